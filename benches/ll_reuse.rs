//! Local linearization with and without keeping its Jacobian (`max_jacobian_age` 20 against 1,
//! the paper's fresh Jacobian per step): the tire quarter car over the cleat (both
//! formulations, rtol 1e-4, atol 1e-6, errors against the scipy reference
//! tests/data/quarter_car_tire.csv) and the smooth two-link chain (tol 1e-5 and 1e-7, error
//! against tests/data/integrators/chain2_reference.csv). Prints a markdown table (the one in
//! docs/integrators.md, "Local linearization: keeping the Jacobian").
//!
//! ```text
//! cargo bench --bench ll_reuse               # 3 timing runs per row (the slow rows once)
//! cargo bench --bench ll_reuse -- --runs 5
//! ```
//!
//! Times are this thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`): median [min–max] of the runs.

#[path = "common/report.rs"]
mod report;

use mbsfmu::integrate::local_linearization::LocalLinearization;
use mbsfmu::integrate::test_systems::{saddle_point_multipliers, CartesianChain};
use mbsfmu::integrate::{
    Integrator, MechState, Mechanical, Method, MultibodySystem, Settings, Stats,
};
use mbsfmu::mbs::system::System;
use std::path::Path;

fn read_rows(path: &Path) -> Vec<Vec<f64>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('t'))
        .map(|l| l.split(',').map(|x| x.trim().parse().unwrap()).collect())
        .collect()
}

/// Steps `integ` to each communication point; `err` gets the state there.
fn run<S: MultibodySystem>(
    integ: &mut LocalLinearization,
    sys: &mut S,
    t_end: f64,
    dt: f64,
    mut err: impl FnMut(&mut S, &MechState),
) {
    let n = (t_end / dt).round() as usize;
    for i in 1..=n {
        let tc = i as f64 * dt;
        while Integrator::<S>::step(integ, sys, tc).unwrap() < tc {}
        let x = Integrator::<S>::state(integ).clone();
        err(sys, &x);
    }
}

/// One configuration: (stats, errors, CPU seconds).
fn tire(formulation: &str, age: u32) -> (Stats, [f64; 2], f64) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let reference = read_rows(&root.join("tests/data/quarter_car_tire.csv"));
    let model = root.join("models/quarter_car_tire.toml");
    let text = std::fs::read_to_string(&model).unwrap().replace(
        "gravity = [0.0, 0.0, -9.81]",
        &format!("gravity = [0.0, 0.0, -9.81]\nformulation = \"{formulation}\""),
    );
    let spec = mbsfmu::mbs::load_model_str(&text, &model).unwrap();
    let mut sys = System::new(std::sync::Arc::new(spec)).unwrap();
    let x0 = sys.initial_state(0.0).unwrap();
    let s = Settings {
        method: Method::LocalLinearization,
        rtol: 1e-4,
        atol: 1e-6,
        ..Settings::default()
    };
    let t0 = report::thread_cpu_time();
    let mut integ = LocalLinearization::new(s, sys.n_q(), sys.n_c());
    integ.max_jacobian_age = age;
    Integrator::<System>::initialize(&mut integ, &mut sys, &x0).unwrap();
    let (mut zerr, mut werr) = (0.0f64, 0.0f64);
    let mut out = vec![0.0; sys.n_outputs()];
    run(&mut integ, &mut sys, 0.7, 0.01, |sys, x| {
        sys.evaluate_outputs(x, &mut out).unwrap();
        let r = &reference[(x.t / 0.001).round() as usize];
        zerr = zerr.max((out[0] - r[1]).abs()).max((out[1] - r[2]).abs());
        werr = werr.max((out[2] - r[3]).abs());
    });
    let cpu = report::thread_cpu_time() - t0;
    (*Integrator::<System>::stats(&integ), [zerr, werr], cpu)
}

fn chain(tol: f64, age: u32) -> (Stats, [f64; 2], f64) {
    let reference = read_rows(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/integrators/chain2_reference.csv"),
    );
    let mut sys = CartesianChain::new(2, 0.3, 0.2, 2.0);
    let (q, v) = (reference[0][1..5].to_vec(), reference[0][5..9].to_vec());
    let lambda = saddle_point_multipliers(&mut sys, 0.0, &q, &v);
    let x0 = MechState {
        t: 0.0,
        q,
        v,
        lambda,
    };
    let s = Settings {
        method: Method::LocalLinearization,
        rtol: tol,
        atol: tol,
        ..Settings::default()
    };
    let t0 = report::thread_cpu_time();
    let mut integ = LocalLinearization::new(s, 4, 2);
    integ.max_jacobian_age = age;
    Integrator::<CartesianChain>::initialize(&mut integ, &mut sys, &x0).unwrap();
    let mut err = 0.0f64;
    run(&mut integ, &mut sys, 2.0, 0.1, |_, x| {
        let r = reference
            .iter()
            .find(|r| (r[0] - x.t).abs() < 1e-9)
            .unwrap();
        for k in 0..4 {
            err = err.max((x.q[k] - r[1 + k]).abs());
        }
    });
    let cpu = report::thread_cpu_time() - t0;
    (
        *Integrator::<CartesianChain>::stats(&integ),
        [err, 0.0],
        cpu,
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args
        .iter()
        .position(|a| a == "--runs")
        .map(|i| args[i + 1].parse().unwrap())
        .unwrap_or(3);
    println!("| case | max_jacobian_age | steps | rejected | Jacobians | right-hand sides | error | CPU s, median [min–max] (runs) |");
    println!("|---|---|---|---|---|---|---|---|");
    type Case = (String, Box<dyn Fn(u32) -> (Stats, [f64; 2], f64)>, bool);
    let cases: Vec<Case> = vec![
        (
            "tire joint, rtol 1e-4".into(),
            Box::new(|a| tire("joint", a)),
            false,
        ),
        (
            "tire absolute, rtol 1e-4".into(),
            Box::new(|a| tire("absolute", a)),
            true,
        ),
        (
            "chain, tol 1e-5".into(),
            Box::new(|a| chain(1e-5, a)),
            false,
        ),
        (
            "chain, tol 1e-7".into(),
            Box::new(|a| chain(1e-7, a)),
            false,
        ),
    ];
    for (name, f, slow) in &cases {
        for age in [1, 20] {
            // The absolute tire without reuse takes about half a minute: once.
            let n = if *slow && age == 1 { 1 } else { runs };
            let mut times = vec![];
            let mut last = None;
            for _ in 0..n {
                let (st, e, cpu) = f(age);
                times.push(cpu);
                last = Some((st, e));
            }
            let (st, e) = last.unwrap();
            let (med, lo, hi) = report::median_min_max(&times);
            let error = if name.starts_with("tire") {
                format!("heights {:.1e} m, spin {:.1e} rad/s", e[0], e[1])
            } else {
                format!("{:.2e}", e[0])
            };
            println!(
                "| {name} | {age} | {} | {} | {} | {} | {error} | {med:.3} [{lo:.3}–{hi:.3}] ({n}) |",
                st.steps, st.rejected_steps, st.jac_evals, st.f_evals
            );
        }
    }
}
