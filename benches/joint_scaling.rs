//! Issue 15's scaling benchmark: a chain of N pendulums (rigid bodies of 1 kg, 1 m apart, on
//! revolute joints about z, paper 003's chain with a small rotational inertia), the same model
//! text in both formulations: absolute (7 coordinates per body, 6 equations per joint and
//! body) and joint coordinates (one angle per joint, no constraints). The chain starts straight,
//! tilted by 0.3 rad, at rest; half-implicit method of paper 004 at rtol 1e-4 / atol 1e-6 (the
//! method of `benches/scaling.rs`; the absolute formulation on its sparse saddle-point path,
//! the joint formulation dense).
//!
//! ```text
//! cargo bench --bench joint_scaling [-- N...]      # default N = 4 8 16 32 64 128 256
//! BENCH_RUNS=3 cargo bench --bench joint_scaling   # runs per cell (median, min, max)
//! ```
//!
//! Per N and formulation: CPU time per simulated second (this thread), steps, time per step;
//! the exponents of both in N fitted by least squares on log-log. Rewrites the
//! `joint-scaling` section of docs/benchmarks.md.

#[path = "common/report.rs"]
mod report;

use mbsfmu::integrate::half_implicit::HalfImplicit;
use mbsfmu::integrate::{Integrator, MechState, Mechanical, Settings};
use mbsfmu::mbs::system::System;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

const TILT: f64 = 0.3;

/// The model file of an N-pendulum chain in `formulation`.
fn chain_toml(n: usize, formulation: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "[model]\nname = \"revolute_chain_{n}\"\nformulation = \"{formulation}\"\n\
         gravity = [0.0, -9.81, 0.0]\n"
    );
    let (dx, dy) = (TILT.sin(), -TILT.cos());
    for i in 1..=n {
        let _ = writeln!(
            s,
            "[[bodies]]\nname = \"p{i}\"\nmass = 1.0\ninertia = [0.01, 0.01, 0.01]\n\
             position = [{:?}, {:?}, 0.0]\n",
            dx * i as f64,
            dy * i as f64
        );
    }
    for i in 1..=n {
        let body1 = if i == 1 {
            "ground".to_string()
        } else {
            format!("p{}", i - 1)
        };
        let k = (i - 1) as f64;
        let _ = writeln!(
            s,
            "[[joints]]\nname = \"rod{i}\"\ntype = \"revolute\"\nbody1 = \"{body1}\"\n\
             body2 = \"p{i}\"\npoint = [{:?}, {:?}, 0.0]\naxis = [0.0, 0.0, 1.0]\n",
            dx * k,
            dy * k
        );
    }
    s
}

fn build(n: usize, formulation: &str) -> (System, MechState) {
    let name = format!("revolute_chain_{n}.toml");
    let spec = mbsfmu::mbs::load_model_str(&chain_toml(n, formulation), Path::new(&name))
        .unwrap_or_else(|e| panic!("chain {n}: {e}"));
    let mut sys = System::new(Arc::new(spec)).expect("chain builds");
    let x0 = sys.initial_state(0.0).expect("chain assembles");
    (sys, x0)
}

/// Simulated time per run: shorter for long chains.
fn t_end(n: usize) -> f64 {
    match n {
        0..=16 => 1.0,
        17..=64 => 0.5,
        65..=128 => 0.2,
        _ => 0.1,
    }
}

/// Per N: (N, CPU per simulated second, time per step).
type Points = Vec<(f64, f64, f64)>;

struct Run {
    cpu: f64,
    steps: u64,
    t: f64,
}

fn run(sys0: &System, x0: &MechState, t_end: f64) -> Run {
    let mut sys = sys0.clone();
    let settings = Settings {
        rtol: 1e-4,
        atol: 1e-6,
        ..Settings::default()
    };
    let mut hi = HalfImplicit::new(settings, sys.n_q(), sys.n_c());
    hi.initialize(&mut sys, x0).expect("initialize");
    let c0 = report::thread_cpu_time();
    let mut steps = 0;
    while Integrator::<System>::state(&hi).t < t_end {
        hi.step(&mut sys, t_end).expect("step");
        steps += 1;
    }
    Run {
        cpu: report::thread_cpu_time() - c0,
        steps,
        t: Integrator::<System>::state(&hi).t,
    }
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

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let ns = if args.is_empty() {
        vec![4, 8, 16, 32, 64, 128, 256]
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
        "Half-implicit (paper 004), rtol 1e-4, atol 1e-6; CPU time of the benchmark thread, \
         median (min-max) of {runs} runs; machine shared with other jobs while measured.\n"
    );
    let _ = writeln!(
        table,
        "| N | formulation | n_q | n_c | steps | t_end [s] | time/step [µs] | CPU per simulated s [ms] |"
    );
    let _ = writeln!(table, "|---|---|---|---|---|---|---|---|");
    let mut fits: Vec<(&str, Points)> = vec![("absolute", vec![]), ("joint", vec![])];
    for &n in &ns {
        for (formulation, points) in fits.iter_mut() {
            let (sys, x0) = build(n, formulation);
            let te = t_end(n);
            let (mut per_s, mut per_step, mut steps) = (Vec::new(), Vec::new(), 0);
            for _ in 0..runs {
                let r = run(&sys, &x0, te);
                per_s.push(r.cpu / r.t);
                per_step.push(r.cpu / r.steps as f64);
                steps = r.steps;
            }
            let (ms, los, his) = report::median_min_max(&per_s);
            let (mp, lop, hip) = report::median_min_max(&per_step);
            points.push((n as f64, ms, mp));
            let line = format!(
                "| {n} | {formulation} | {} | {} | {steps} | {te} | {:.1} ({:.1}-{:.1}) | {:.2} ({:.2}-{:.2}) |",
                sys.n_q(),
                sys.n_c(),
                mp * 1e6,
                lop * 1e6,
                hip * 1e6,
                ms * 1e3,
                los * 1e3,
                his * 1e3,
            );
            println!("{line}");
            let _ = writeln!(table, "{line}");
        }
    }
    if ns.len() >= 2 {
        let _ = writeln!(
            table,
            "\nFitted exponents in N (least squares on log-log, N = {}-{}):\n",
            ns[0],
            ns[ns.len() - 1]
        );
        for (formulation, points) in &fits {
            let x: Vec<f64> = points.iter().map(|p| p.0).collect();
            let ys: Vec<f64> = points.iter().map(|p| p.1).collect();
            let yp: Vec<f64> = points.iter().map(|p| p.2).collect();
            let (es, ep) = (fit_exponent(&x, &ys), fit_exponent(&x, &yp));
            let _ = writeln!(
                table,
                "- {formulation}: CPU per simulated second **N^{es:.2}**, time per step N^{ep:.2}"
            );
            println!("{formulation}: per simulated s N^{es:.3}, per step N^{ep:.3}");
        }
    }
    if let Err(e) = report::replace_section(&report::benchmarks_md(), "joint-scaling", &table) {
        eprintln!("not written: {e}");
    }
}
