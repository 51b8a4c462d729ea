//! Paper 000's validation (its Table 1 shape) on `models/double_pendulum_stiff.toml`: over
//! 2 s the maximal error of θ1 against an independent tight-tolerance reference (Radau at
//! 1e-12 in minimal coordinates, tests/data/double_pendulum_stiff.csv) stays within a small
//! multiple of the tolerance for tolerances 1e-2 … 1e-5, and the implicit Rosenbrock–Nyström
//! method needs far fewer steps than the explicit Dormand–Prince method.

mod common;
use common::closed_form::RefTable;
use mbsfmu::integrate::explicit::Dopri5;
use mbsfmu::integrate::rosenbrock::RosenbrockNystrom;
use mbsfmu::integrate::system::Mechanical;
use mbsfmu::integrate::{Integrator, Method, Settings};
use mbsfmu::mbs::system::System;
use std::path::Path;
use std::sync::Arc;

fn system() -> (System, mbsfmu::integrate::MechState, usize) {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/double_pendulum_stiff.toml");
    let spec = Arc::new(mbsfmu::mbs::load_model(&f).unwrap());
    let k = spec
        .outputs
        .iter()
        .position(|o| o.name == "theta1")
        .unwrap();
    let mut sys = System::new(spec).unwrap();
    let x = sys.initial_state(0.0).unwrap();
    (sys, x, k)
}

/// Max |θ1 − θ1_ref| sampled every 0.02 s, and the steps of a free run to 2 s.
fn run(method: Method, tol: f64, reference: &RefTable) -> (f64, u64) {
    let make = |s: Settings, nq, nc| -> Box<dyn Integrator<System>> {
        match s.method {
            Method::Dopri5 => Box::new(Dopri5::new(s, nq, nc)),
            _ => Box::new(RosenbrockNystrom::new(s, nq, nc)),
        }
    };
    let settings = Settings {
        method,
        rtol: tol,
        atol: tol,
        ..Settings::default()
    };
    // Error, sampled at communication points.
    let (mut sys, x0, k) = system();
    let mut integ = make(settings, sys.n_q(), sys.n_c());
    integ.initialize(&mut sys, &x0).unwrap();
    let mut out = vec![0.0; sys.n_outputs()];
    let mut err: f64 = 0.0;
    for i in 1..=100 {
        let tc = i as f64 * 0.02;
        while integ.state().t < tc {
            integ.step(&mut sys, tc).unwrap();
        }
        let x = integ.state().clone();
        sys.evaluate_outputs(&x, &mut out).unwrap();
        err = err.max((out[k] - reference.at("theta1", tc).unwrap()).abs());
    }
    // Steps, free run.
    let (mut sys, x0, _) = system();
    let mut integ = make(settings, sys.n_q(), sys.n_c());
    integ.initialize(&mut sys, &x0).unwrap();
    while integ.state().t < 2.0 {
        integ.step(&mut sys, 2.0).unwrap();
    }
    (err, integ.stats().steps)
}

#[test]
fn theta1_error_follows_the_tolerance_and_implicit_needs_far_fewer_steps() {
    let reference = RefTable::load("double_pendulum_stiff.csv").unwrap();
    eprintln!("| tol | RN4 max θ1 error | RN4 steps |");
    let mut errs = Vec::new();
    for tol in [1e-2, 1e-3, 1e-4, 1e-5] {
        let (err, steps) = run(Method::RosenbrockNystrom, tol, &reference);
        eprintln!("| {tol:.0e} | {err:.3e} | {steps} |");
        assert!(err < 20.0 * tol, "tol {tol}: θ1 error {err}");
        errs.push(err);
    }
    // Tighter tolerances do not make it worse overall (Table 1's trend).
    assert!(errs[3] < errs[0], "{errs:?}");
    let (err_rn, steps_rn) = run(Method::RosenbrockNystrom, 1e-4, &reference);
    let (err_dp, steps_dp) = run(Method::Dopri5, 1e-4, &reference);
    eprintln!("tol 1e-4: Rosenbrock-Nystrom {steps_rn} steps (error {err_rn:.2e}), Dormand-Prince {steps_dp} steps (error {err_dp:.2e}), ratio {:.0}", steps_dp as f64 / steps_rn as f64);
    assert!(
        steps_dp > 20 * steps_rn,
        "explicit {steps_dp} vs implicit {steps_rn}"
    );
}
