//! Paper 003, Table 2 analogue on the engine: `models/pendulum_chain.toml` (N particles of 1 kg
//! on 1 m rods, 3-D particles held in the plane by planar joints: n_q = 3N, n_c = 2N,
//! n_y = 10N) with the suspension as a built-in excitation x = 2 + 0.3 sin ωt, y = 0.2 sin ωt,
//! ω = 2π·0.05 rad/s, t ∈ [0, 200] s, ATOL 1e-6, RTOL 1e-4, every Jacobian strategy.
//!
//! ```text
//! cargo bench --bench bdf_table2 [-- N...]       # default N = 12 14 16 32 64
//! BENCH_RUNS=5 cargo bench --bench bdf_table2     # timed runs per cell (default 3, 1 at N ≥ 64)
//! ```
//!
//! The model text for N particles is generated here in the form of `models/pendulum_chain.toml`
//! (the test `engine_chain_text_is_the_model_file` in `tests/bdf.rs` checks that the generator
//! with input-fed suspension reproduces the file for N = 16) with the two `{ input = … }`
//! suspension motions replaced by `sine` motions, and loaded with the normal loader.
//!
//! CPU time is this thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), median (min–max) of the timed
//! runs (3, or 1 from N = 64 on, unless BENCH_RUNS); the runs carry the BDF's CPU counters
//! (residuals, Jacobians, LU, back-substitutions), whose system calls add about 2–4 %. The tip deviation is the maximum over the 0.5 s grid of
//! `tests/data/integrators/pendulum_chain_tip.csv` (scipy DOP853 at 1e-12 in minimal
//! coordinates, `tools/references/pendulum_chain_tip.py`, from the same projected "at rest"
//! start the engine's assembly makes), read from the BDF's dense output. Writes the generated
//! section `bdf_table2` of `docs/benchmarks.md`.

#[path = "common/bdf_run.rs"]
mod bdf_run;
#[path = "common/chain_model.rs"]
mod chain_model;
#[path = "common/report.rs"]
mod report;

use bdf_run::{run, Reference, Run};
use mbsfmu::integrate::JacobianStrategy;
use mbsfmu::mbs::{load_model_str, ModelSpec};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

fn chain_spec(n: usize) -> Arc<ModelSpec> {
    let text = chain_model::chain_model_text(n, true);
    let name = format!("pendulum_chain_n{n}.toml");
    Arc::new(load_model_str(&text, Path::new(&name)).expect("generated chain model loads"))
}

fn reference(n: usize) -> Option<Reference> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/integrators/pendulum_chain_tip.csv"
    );
    let text = std::fs::read_to_string(path).ok()?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next()?.split(',').collect();
    let ix = header.iter().position(|h| *h == format!("x{n}"))?;
    let (mut t, mut values) = (Vec::new(), Vec::new());
    for l in lines {
        let v: Vec<f64> = l.split(',').map(|s| s.trim().parse().unwrap()).collect();
        t.push(v[0]);
        values.push(vec![v[ix], v[ix + 1]]);
    }
    Some(Reference { t, values })
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
    // Timed runs per cell: BENCH_RUNS, else 3 (1 from N = 64 on, where one run takes ~30 s:
    // the default command then takes about 5 minutes).
    let env_runs: Option<usize> = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(|r: usize| r.max(1));
    let runs_for = |n: usize| env_runs.unwrap_or(if n >= 64 { 1 } else { 3 });
    // BENCH_STRATEGIES=dense,dense_extended: only these (for exploring; the table wants all, so
    // docs/benchmarks.md is left alone).
    let strategies: Vec<JacobianStrategy> = match std::env::var("BENCH_STRATEGIES") {
        Ok(list) => list
            .split(',')
            .filter_map(|s| JacobianStrategy::from_name(s.trim()))
            .collect(),
        Err(_) => JacobianStrategy::ALL.to_vec(),
    };
    let mut md = String::new();
    writeln!(
        md,
        "`cargo bench --bench bdf_table2` (benches/bdf_table2.rs; N = {ns:?}; timed runs per cell: {}; \
         machine shared with other jobs). Engine model `models/pendulum_chain.toml` generated for N particles, \
         suspension as built-in `sine` motions, n_y = 10N, t in [0, 200] s, ATOL 1e-6, RTOL 1e-4. \
         CPU: thread CPU seconds, median (min-max). #fc: residual evaluations, #fcw: without those spent on \
         Jacobians, #Je: full Jacobian evaluations, #upd: (extended) partitioned updates, #LU: factorizations. \
         Tip dev: max |tip - reference| over the 0.5 s grid (scipy DOP853 1e-12, minimal coordinates).\n",
        ns.iter()
            .map(|&n| format!("{} at N = {n}", runs_for(n)))
            .collect::<Vec<_>>()
            .join(", ")
    )
    .unwrap();
    writeln!(md, "| N | strategy | CPU [s] | % of dense | steps | rej | #fc | #fcw | #Je | #upd | #LU | Newton it | tip dev [m] |").unwrap();
    writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|---|").unwrap();
    let mut breakdown = String::new();
    writeln!(
        breakdown,
        "\nWhere the time goes (thread CPU counters in every timed run, overhead about 2-4 % at N = 16; \
         the median run, percent of its BDF time): residuals of predictor and corrector, Jacobian work without the LU (finite \
         differences, analytic derivatives, second derivatives of (26), updates), LU factorizations, \
         back-substitutions, the rest (history, error norms). #Je by cause: initial / alpha change / slow \
         convergence / corrector failure / error-test failures / cap on updates in a row.\n\n\
         | N | strategy | BDF CPU [s] | residuals | Jacobians | LU | back-subst. | rest | LU+back-subst. | #Je by cause |\n\
         |---|---|---|---|---|---|---|---|---|---|"
    )
    .unwrap();
    print!("{md}");
    let mut notes = String::new();
    for &n in &ns {
        let spec = chain_spec(n);
        let Some(refs) = reference(n) else {
            eprintln!("no reference for N = {n} in tests/data/integrators/pendulum_chain_tip.csv (run tools/references/pendulum_chain_tip.py)");
            continue;
        };
        let off = {
            let sys = mbsfmu::mbs::system::System::new(spec.clone()).unwrap();
            sys.layout().offsets[n - 1]
        };
        let pick = move |q: &[f64], out: &mut Vec<f64>| {
            out.clear();
            out.extend_from_slice(&q[off..off + 2]);
        };
        let mut dense: Option<(f64, u64)> = None;
        for strategy in strategies.iter().copied() {
            let runs = runs_for(n);
            let mut cells: Vec<Run> = (0..runs)
                .map(|_| run(&spec, strategy, 1e-4, 1e-6, 200.0, &refs, &pick, true))
                .collect();
            let cpus: Vec<f64> = cells.iter().map(|c| c.cpu).collect();
            let (med, lo, hi) = report::median_min_max(&cpus);
            // The breakdown of the median run (runs differ only in timing).
            cells.sort_by(|a, b| a.cpu.total_cmp(&b.cpu));
            let c = &cells[cells.len() / 2];
            let s = c.stats;
            let (dense_cpu, dense_je) = *dense.get_or_insert((med, s.jac_evals));
            let row = format!(
                "| {n} | {} | {med:.3} ({lo:.3}-{hi:.3}) | {:.0}% | {} | {} | {} | {} | {} | {} | {} | {} | {}{} |\n",
                strategy.name(),
                100.0 * med / dense_cpu,
                s.steps,
                s.rejected_steps,
                s.f_evals,
                s.f_evals_without_jacobian(),
                s.jac_evals,
                s.jac_updates,
                s.lu,
                s.newton_iters,
                format_args!("{:.1e}", c.dev),
                c.error.as_ref().map_or(String::new(), |e| format!(" (failed: {e})")),
            );
            print!("{row}");
            md.push_str(&row);
            let p = c.profile;
            let pct = |x: f64| 100.0 * x / p.total;
            let rest = p.total - p.residual - p.jacobian - p.lu - p.solve;
            writeln!(
                breakdown,
                "| {n} | {} | {:.3} | {:.0}% | {:.0}% | {:.0}% | {:.0}% | {:.0}% | {:.0}% | {} |",
                strategy.name(),
                p.total,
                pct(p.residual),
                pct(p.jacobian),
                pct(p.lu),
                pct(p.solve),
                pct(rest),
                pct(p.lu + p.solve),
                p.full_by_reason.map(|x| x.to_string()).join(" / ")
            )
            .unwrap();
            if n == 16 && strategy.extended() && strategy != JacobianStrategy::SparseExtended {
                writeln!(
                    notes,
                    "- N = 16, {} vs dense: #Je {} vs {dense_je} (ratio {:.2}, target <= 0.20); CPU {:.0}% of dense (target <= 60%).",
                    strategy.name(),
                    s.jac_evals,
                    s.jac_evals as f64 / dense_je as f64,
                    100.0 * med / dense_cpu
                )
                .unwrap();
            }
        }
    }
    md.push_str(&breakdown);
    print!("{breakdown}");
    if !notes.is_empty() {
        md.push_str("\nTargets (issue 3):\n\n");
        md.push_str(&notes);
        print!("\nTargets (issue 3):\n{notes}");
    }
    if strategies.len() < JacobianStrategy::ALL.len() {
        println!("(a subset of the strategies: docs/benchmarks.md left alone)");
    } else if let Err(e) = report::replace_section(&report::benchmarks_md(), "bdf_table2", &md) {
        eprintln!("{e}");
    }
}
