//! Paper 003, Table 2 analogue: the pendulum chain `CartesianChain::paper(N)` (suspension
//! x = 2 + 0.3 sin ωt, y = 0.2 sin ωt, ω = 2π·0.05 rad/s), t ∈ [0, 200] s, ATOL 1e-6, RTOL 1e-4,
//! every Jacobian strategy of the BDF integrator.
//!
//! ```text
//! cargo bench --bench bdf_table2 [-- N... ]      # default N = 12 14 16 32 64
//! BENCH_RUNS=5 cargo bench --bench bdf_table2     # runs per cell (median CPU time)
//! ```
//!
//! CPU time is this thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), so other load on the machine
//! does not count. The tip deviation is the maximum over the 0.5 s grid of the reference
//! `tests/data/pendulum_chain_tip.csv` (scipy DOP853 at 1e-12 in minimal coordinates,
//! `tools/references/pendulum_chain_tip.py`), read from the BDF's dense output. Writes the table to
//! stdout and to `docs/benchmarks-bdf.md`.

use mbsfmu::integrate::bdf::Bdf;
use mbsfmu::integrate::test_systems::CartesianChain;
use mbsfmu::integrate::{Integrator, JacobianStrategy, Settings, Stats};
use std::fmt::Write as _;

const READING: &str = "
Reading the table:
- This chain is in absolute (Cartesian) coordinates. Its Jacobian depends on *relative*
  positions, which follow the moving suspension, so the excitation term of (26) (derived for
  joint coordinates, where `y` stays put while `u` moves) predicts a change that does not
  happen. The store judges the term at every full evaluation (it must predict the change of
  `G` since the previous full evaluation at least 4x better than no term) and keeps it off
  here: the extended strategies run as the plain partitioned update (24) plus the re-evaluation
  policy. Their #Je saving comes from (24).
- CPU: one residual of this test system is cheap (O(N) forces, a dense N x 2N constraint
  Jacobian), while every Newton iteration also back-substitutes with the dense n_y x n_y LU
  (n_y = 6N) and every refresh, full or cheap, re-factors it. The finite-difference Jacobian
  work is therefore a small share of the total (#fc - #fcw against #fcw), and fewer #Je cannot
  bring the CPU time near 60 % of dense. With the engine's model (a full multibody evaluation
  per residual) the Jacobian share, and the saving, are larger.
- At N = 64 (n_y = 384) one LU costs more than the ~320 cheap residuals of a full FD
  Jacobian, and every update re-factors: the extended strategies' many updates (#LU) cost more
  CPU than the full evaluations they replace.
";

fn cpu_time() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn reference(n: usize) -> Option<Vec<(f64, f64, f64)>> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/pendulum_chain_tip.csv"
    );
    let text = std::fs::read_to_string(path).ok()?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next()?.split(',').collect();
    let ix = header.iter().position(|h| *h == format!("x{n}"))?;
    Some(
        lines
            .map(|l| {
                let v: Vec<f64> = l.split(',').map(|s| s.trim().parse().unwrap()).collect();
                (v[0], v[ix], v[ix + 1])
            })
            .collect(),
    )
}

struct Cell {
    cpu: f64,
    stats: Stats,
    dev: Option<f64>,
    error: Option<String>,
}

fn run(n: usize, strategy: JacobianStrategy, refs: Option<&[(f64, f64, f64)]>) -> Cell {
    let t_end = 200.0;
    let mut sys = CartesianChain::paper(n);
    let x0 = sys.consistent_state(0.0);
    let settings = Settings {
        jacobian: strategy,
        rtol: 1e-4,
        atol: 1e-6,
        ..Settings::default()
    };
    let mut bdf = Bdf::new(settings, 2 * n, n);
    let (mut q, mut v) = (vec![0.0; 2 * n], vec![0.0; 2 * n]);
    let mut dev = 0.0f64;
    let mut next = 1;
    let start = cpu_time();
    let mut error = bdf.initialize(&mut sys, &x0).err().map(|e| e.to_string());
    while error.is_none() && bdf.state().t < t_end {
        match bdf.step(&mut sys, t_end) {
            Ok(t) => {
                if let Some(r) = refs {
                    while next < r.len() && r[next].0 <= t {
                        bdf.interpolate(r[next].0, &mut q, &mut v);
                        dev = dev
                            .max((q[2 * n - 2] - r[next].1).abs())
                            .max((q[2 * n - 1] - r[next].2).abs());
                        next += 1;
                    }
                }
            }
            Err(e) => error = Some(e.to_string()),
        }
    }
    let cpu = cpu_time() - start;
    Cell {
        cpu,
        stats: *bdf.stats(),
        dev: refs.map(|_| dev),
        error,
    }
}

fn main() {
    let ns: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let ns = if ns.is_empty() {
        vec![12, 14, 16, 32, 64]
    } else {
        ns
    };
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
        .max(1);
    let mut md = String::new();
    writeln!(
        md,
        "# BDF Jacobian strategies: paper 003 Table 2 analogue\n"
    )
    .unwrap();
    writeln!(
        md,
        "Pendulum chain `CartesianChain::paper(N)` (planar Cartesian coordinates, n_y = 6N), t in [0, 200] s, \
         ATOL 1e-6, RTOL 1e-4. CPU: median thread CPU time of {runs} run(s). #fc: residual evaluations, #fcw: without \
         those spent on Jacobians, #Je: full Jacobian evaluations, #upd: (extended) partitioned updates. Tip dev: max \
         |tip − reference| over the 0.5 s grid (scipy DOP853 1e-12, minimal coordinates).\n\n\
         Command: `cargo bench --bench bdf_table2` (benches/bdf_table2.rs).\n"
    )
    .unwrap();
    writeln!(md, "| N | strategy | CPU [s] | % of dense | steps | rej | #fc | #fcw | #Je | #upd | #LU | Newton it | conv fail | tip dev [m] |").unwrap();
    writeln!(
        md,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    .unwrap();
    print!("{md}");
    let mut notes = String::new();
    for &n in &ns {
        let refs = reference(n);
        let mut dense_cpu = f64::NAN;
        let mut dense_je = 0;
        for strategy in JacobianStrategy::ALL {
            let mut cells: Vec<Cell> = (0..runs)
                .map(|_| run(n, strategy, refs.as_deref()))
                .collect();
            cells.sort_by(|a, b| a.cpu.partial_cmp(&b.cpu).unwrap());
            let c = &cells[cells.len() / 2];
            let s = c.stats;
            if strategy == JacobianStrategy::Dense {
                dense_cpu = c.cpu;
                dense_je = s.jac_evals;
            }
            let dev = c.dev.map_or("n/a".to_string(), |d| format!("{d:.2e}"));
            let row = format!(
                "| {n} | {} | {:.3} | {:.1}% | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}{} |\n",
                strategy.name(),
                c.cpu,
                100.0 * c.cpu / dense_cpu,
                s.steps,
                s.rejected_steps,
                s.f_evals,
                s.f_evals_without_jacobian(),
                s.jac_evals,
                s.jac_updates,
                s.lu,
                s.newton_iters,
                s.convergence_failures,
                dev,
                c.error.as_ref().map_or(String::new(), |e| format!(" (failed: {e})")),
            );
            print!("{row}");
            md.push_str(&row);
            if n == 16 && strategy == JacobianStrategy::DenseExtended {
                writeln!(
                    notes,
                    "- N = 16, dense_extended vs dense: #Je {} vs {} (ratio {:.2}, target ≤ 0.20); CPU {:.1}% (target ≤ 60%).",
                    s.jac_evals,
                    dense_je,
                    s.jac_evals as f64 / dense_je as f64,
                    100.0 * c.cpu / dense_cpu
                )
                .unwrap();
            }
        }
    }
    if !notes.is_empty() {
        md.push_str("\nTargets (issue 3):\n");
        md.push_str(&notes);
        print!("\nTargets (issue 3):\n{notes}");
    }
    md.push_str(READING);
    print!("{READING}");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/benchmarks-bdf.md");
    if let Some(dir) = std::path::Path::new(path).parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = std::fs::write(path, &md) {
        eprintln!("could not write {path}: {e}");
    }
}
