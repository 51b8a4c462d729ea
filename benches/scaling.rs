//! Issue 7's scaling benchmark: spherical chains of N bars (built as TOML text following
//! `models/spherical_chain.toml` and loaded with the normal loader), the half-implicit method
//! of paper 004 at rtol 1e-4 / atol 1e-6.
//!
//! ```text
//! cargo bench --bench scaling [-- N...]        # default N = 8 16 32 64 128 256
//! BENCH_RUNS=5 cargo bench --bench scaling      # runs per cell (median, min, max)
//! ```
//!
//! Per N: time per accepted step, time per simulated second, steps, one engine evaluation
//! (forces + M fill + Φq fill on the sparse structure), each the median (min, max) of several
//! runs of this thread's CPU time. The exponent of time per step in N is fitted by least
//! squares on log-log. A second table compares the dense and sparse saddle-point paths on the
//! same steps. Rewrites the `scaling` section of docs/benchmarks.md.

#[path = "common/report.rs"]
mod report;

use mbsfmu::integrate::half_implicit::HalfImplicit;
use mbsfmu::integrate::sparse::SaddleSolver;
use mbsfmu::integrate::{Integrator, MechState, Mechanical, Settings};
use mbsfmu::mbs::system::System;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

/// The model file of an N-bar chain, element by element as in `models/spherical_chain.toml`.
fn chain_toml(n: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "[model]\nname = \"spherical_chain_{n}\"\n\
         gravity = [\"9.81*0.3/sqrt(1.13)\", \"-9.81/sqrt(1.13)\", \"9.81*0.2/sqrt(1.13)\"]\n"
    );
    for i in 1..=n {
        let _ = writeln!(
            s,
            "[[bodies]]\nname = \"bar{i}\"\nmass = 1.0\n\
             inertia = [\"(1^2 + 0.05^2)/12\", \"(0.05^2 + 0.05^2)/12\", \"(1^2 + 0.05^2)/12\"]\n\
             position = [0.0, {}, 0.0]\nangular_velocity = [0.0, -1.0, 0.0]\n",
            -(i as f64) + 0.5
        );
    }
    for i in 1..=n {
        let body1 = if i == 1 {
            "ground".to_string()
        } else {
            format!("bar{}", i - 1)
        };
        let _ = writeln!(
            s,
            "[[joints]]\nname = \"ball{i}\"\ntype = \"spherical\"\nbody1 = \"{body1}\"\n\
             body2 = \"bar{i}\"\npoint = [0.0, {}, 0.0]\n",
            -((i - 1) as f64)
        );
    }
    s
}

fn build(n: usize) -> (System, MechState) {
    let name = format!("spherical_chain_{n}.toml");
    let spec = mbsfmu::mbs::load_model_str(&chain_toml(n), Path::new(&name))
        .unwrap_or_else(|e| panic!("chain {n}: {e}"));
    let mut sys = System::new(Arc::new(spec)).expect("chain builds");
    let x0 = sys.initial_state(0.0).expect("chain assembles");
    (sys, x0)
}

fn settings() -> Settings {
    Settings {
        rtol: 1e-4,
        atol: 1e-6,
        ..Settings::default()
    }
}

/// Simulated time per run: shorter for long chains (time per step is the measure).
fn t_end(n: usize) -> f64 {
    match n {
        0..=32 => 1.0,
        33..=64 => 0.5,
        65..=128 => 0.25,
        _ => 0.15,
    }
}

struct Run {
    cpu: f64,
    steps: u64,
    t: f64,
    /// Quasi-Newton iterations per accepted step (all sub-steps and rejected attempts).
    iters_per_step: f64,
}

/// Integrate from `x0` until `t_end` or `max_steps`, timing the steps only.
fn run(sys0: &System, x0: &MechState, solver: SaddleSolver, t_end: f64, max_steps: u64) -> Run {
    let mut sys = sys0.clone();
    let mut hi = HalfImplicit::new(settings(), sys.n_q(), sys.n_c());
    hi.set_saddle_solver(solver);
    hi.initialize(&mut sys, x0).expect("initialize");
    let c0 = report::thread_cpu_time();
    let mut steps = 0;
    while Integrator::<System>::state(&hi).t < t_end && steps < max_steps {
        hi.step(&mut sys, t_end).expect("step");
        steps += 1;
    }
    let cpu = report::thread_cpu_time() - c0;
    let stats = Integrator::<System>::stats(&hi);
    Run {
        cpu,
        steps,
        t: Integrator::<System>::state(&hi).t,
        iters_per_step: stats.newton_iters as f64 / stats.steps.max(1) as f64,
    }
}

/// One engine evaluation on the sparse structure: forces, M fill, Φq fill.
fn evaluation_time(sys0: &System, x0: &MechState) -> f64 {
    let mut sys = sys0.clone();
    let (nq, q, v) = (sys.n_q(), x0.q.clone(), x0.v.clone());
    let mut f = vec![0.0; nq];
    let (mp, jp) = {
        let s = sys.sparse_structure().unwrap();
        (
            s.mass_pattern().len(),
            s.constraint_jacobian_pattern().len(),
        )
    };
    let (mut mv, mut jv) = (vec![0.0; mp], vec![0.0; jp]);
    let reps = (20_000 / nq).max(5);
    let c0 = report::thread_cpu_time();
    for _ in 0..reps {
        sys.forces(0.0, &q, &v, &mut f);
        let s = sys.sparse_structure().unwrap();
        s.mass_matrix_values(0.0, &q, &mut mv);
        s.constraint_jacobian_values(0.0, &q, &mut jv);
    }
    (report::thread_cpu_time() - c0) / reps as f64
}

/// Least-squares slope of log y against log x.
fn fit_exponent(x: &[f64], y: &[f64]) -> f64 {
    let lx: Vec<f64> = x.iter().map(|v| v.ln()).collect();
    let ly: Vec<f64> = y.iter().map(|v| v.ln()).collect();
    let n = lx.len() as f64;
    let (mx, my) = (lx.iter().sum::<f64>() / n, ly.iter().sum::<f64>() / n);
    let sxy: f64 = lx.iter().zip(&ly).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = lx.iter().map(|a| (a - mx) * (a - mx)).sum();
    sxy / sxx
}

fn fmt_us(s: f64) -> String {
    format!("{:.1}", s * 1e6)
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let default_ns = args.is_empty();
    let ns = if default_ns {
        vec![8, 16, 32, 64, 128, 256]
    } else {
        args
    };
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);

    let mut table = String::new();
    let _ = writeln!(
        table,
        "Half-implicit (paper 004), rtol 1e-4, atol 1e-6, automatic saddle-point path; CPU time \
         of the benchmark thread, median (min-max) of {runs} runs; machine shared with other \
         jobs while measured.\n"
    );
    let _ = writeln!(
        table,
        "| N | n_q | n_c | path | steps | Newton it./step | t_end [s] | time/step [µs] | time per simulated s [ms] | engine eval [µs] |"
    );
    let _ = writeln!(table, "|---|---|---|---|---|---|---|---|---|---|");
    let mut per_step = Vec::new();
    for &n in &ns {
        let (sys, x0) = build(n);
        let te = t_end(n);
        let mut ts = Vec::new();
        let mut tsim = Vec::new();
        let (mut steps, mut iters) = (0, 0.0);
        for _ in 0..runs {
            let r = run(&sys, &x0, SaddleSolver::Auto, te, u64::MAX);
            ts.push(r.cpu / r.steps as f64);
            tsim.push(r.cpu / r.t);
            steps = r.steps;
            iters = r.iters_per_step;
        }
        let evals: Vec<f64> = (0..runs).map(|_| evaluation_time(&sys, &x0)).collect();
        let (m, lo, hi) = report::median_min_max(&ts);
        let (ms, los, his) = report::median_min_max(&tsim);
        let (me, loe, hie) = report::median_min_max(&evals);
        let sparse = SaddleSolver::Auto.use_sparse(sys.n_q() + sys.n_c(), true);
        per_step.push((n as f64, m));
        let line = format!(
            "| {n} | {} | {} | {} | {steps} | {iters:.1} | {te} | {} ({}-{}) | {:.1} ({:.1}-{:.1}) | {} ({}-{}) |",
            sys.n_q(),
            sys.n_c(),
            if sparse { "sparse" } else { "dense" },
            fmt_us(m),
            fmt_us(lo),
            fmt_us(hi),
            ms * 1e3,
            los * 1e3,
            his * 1e3,
            fmt_us(me),
            fmt_us(loe),
            fmt_us(hie),
        );
        println!("{line}");
        let _ = writeln!(table, "{line}");
    }
    if per_step.len() >= 2 {
        let (x, y): (Vec<f64>, Vec<f64>) = per_step.iter().copied().unzip();
        let all = fit_exponent(&x, &y);
        let _ = writeln!(
            table,
            "\nFitted exponent of time per step in N (least squares on log-log, N = {}-{}): \
             **{all:.2}** (target at most 1.2).",
            x[0],
            x[x.len() - 1]
        );
        let big: Vec<(f64, f64)> = per_step.iter().copied().filter(|p| p.0 >= 32.0).collect();
        if big.len() >= 2 && big.len() < per_step.len() {
            let (xb, yb): (Vec<f64>, Vec<f64>) = big.iter().copied().unzip();
            let e = fit_exponent(&xb, &yb);
            let _ = writeln!(
                table,
                "Over N = {}-{} only: **{e:.2}**.",
                xb[0],
                xb[xb.len() - 1]
            );
        }
        println!("exponent {all:.3}");
    }

    // Dense against sparse on the same first steps.
    let cmp: Vec<usize> = if default_ns {
        vec![2, 4, 8, 16, 32, 64]
    } else {
        ns.iter().copied().filter(|&n| n <= 64).collect()
    };
    if !cmp.is_empty() {
        let _ = writeln!(
            table,
            "\nDense against sparse saddle-point path, the same first 30 steps from the same \
             state (time per step, median (min-max) of {runs} runs):\n"
        );
        let _ = writeln!(
            table,
            "| N | n_q + n_c | dense [µs/step] | sparse [µs/step] | dense / sparse |"
        );
        let _ = writeln!(table, "|---|---|---|---|---|");
        for &n in &cmp {
            let (sys, x0) = build(n);
            let mut d = Vec::new();
            let mut s = Vec::new();
            for _ in 0..runs {
                let rd = run(&sys, &x0, SaddleSolver::Dense, 100.0, 30);
                let rs = run(&sys, &x0, SaddleSolver::Sparse, 100.0, 30);
                d.push(rd.cpu / rd.steps as f64);
                s.push(rs.cpu / rs.steps as f64);
            }
            let (md, lod, hid) = report::median_min_max(&d);
            let (msp, los, his) = report::median_min_max(&s);
            let line = format!(
                "| {n} | {} | {} ({}-{}) | {} ({}-{}) | {:.2} |",
                sys.n_q() + sys.n_c(),
                fmt_us(md),
                fmt_us(lod),
                fmt_us(hid),
                fmt_us(msp),
                fmt_us(los),
                fmt_us(his),
                md / msp
            );
            println!("{line}");
            let _ = writeln!(table, "{line}");
        }
    }
    if let Err(e) = report::replace_section(&report::benchmarks_md(), "scaling", &table) {
        eprintln!("not written: {e}");
    }
}
