//! Element tests over every integrator and both formulations (`tests/joint_elements.rs`,
//! `tests/contact_friction.rs`): the model of `models/elements/`, the cases, and a run with the
//! event locator that reports the outputs at every accepted step.

use mbsfmu::integrate::any::AnyIntegrator;
use mbsfmu::integrate::events::EventLocator;
use mbsfmu::integrate::system::Mechanical;
use mbsfmu::integrate::{Integrator, MechState, Method, Settings};
use mbsfmu::mbs::system::System;
use std::path::Path;
use std::sync::Arc;

/// The model `models/elements/<file>` with text replacements, in the absolute or the joint
/// formulation.
pub fn system(file: &str, joint: bool, edits: &[(&str, &str)]) -> System {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models/elements")
        .join(file);
    let mut text = std::fs::read_to_string(&path).unwrap();
    for (a, b) in edits {
        assert!(text.contains(a), "{a}");
        text = text.replace(a, b);
    }
    // Always explicit: the default formulation is joint, and the tests compare both.
    text = text.replacen(
        "[model]\n",
        &format!("[model]\nformulation = \"{}\"\n", formulation(joint)),
        1,
    );
    let spec = mbsfmu::mbs::load_model_str(&text, &path).unwrap_or_else(|e| panic!("{e}"));
    System::new(Arc::new(spec)).unwrap()
}

/// Tolerances `rtol` (`atol = rtol / 100`); the maximum step (10 ms) keeps every phase sampled.
pub fn settings(method: Method, rtol: f64) -> Settings {
    Settings {
        method,
        rtol,
        atol: rtol * 1e-2,
        max_step: 0.01,
        ..Settings::default()
    }
}

/// How a run reports and how long it may take.
pub struct Run {
    /// Call `at` with the initial outputs too.
    pub report_start: bool,
    /// Give up after this much wall time (a method that crawls is a failure, not a hang).
    pub max_seconds: u64,
}

/// Integrate to `t_end` with the event locator, calling `at` with the outputs at every
/// accepted step. `ELEMENTS_DEBUG=<method name>` prints them.
pub fn simulate(
    sys: &mut System,
    method: Method,
    rtol: f64,
    t_end: f64,
    run: Run,
    mut at: impl FnMut(f64, &[f64]),
) -> Result<(), String> {
    let x0 = sys.initial_state(0.0).map_err(|e| e.to_string())?;
    let mut integ = AnyIntegrator::new(settings(method, rtol), sys.n_q(), sys.n_c())
        .map_err(|e| e.to_string())?;
    integ.initialize(sys, &x0).map_err(|e| e.to_string())?;
    let mut loc = EventLocator::new(1e-12);
    loc.max_steps_per_call = u64::MAX;
    loc.max_cpu_per_call = f64::INFINITY;
    let mut out = vec![0.0; sys.n_outputs()];
    if run.report_start {
        sys.evaluate_outputs(&x0, &mut out)
            .map_err(|e| e.to_string())?;
        at(0.0, &out);
    }
    let debug = std::env::var("ELEMENTS_DEBUG").is_ok_and(|m| m == method.name());
    let started = std::time::Instant::now();
    loop {
        let t = Integrator::<System>::state(&integ).t;
        if t >= t_end {
            return Ok(());
        }
        if started.elapsed().as_secs() > run.max_seconds {
            return Err(format!("too slow: t = {t}"));
        }
        loc.step(&mut integ, sys, t_end)
            .map_err(|e| format!("at t = {t}: {e}"))?;
        let x: MechState = Integrator::<System>::state(&integ).clone();
        sys.evaluate_outputs(&x, &mut out)
            .map_err(|e| e.to_string())?;
        if debug {
            eprintln!("{:.6e} {out:?}", x.t);
        }
        at(x.t, &out);
    }
}

/// Every available method, in the absolute and the joint formulation.
pub fn cases() -> Vec<(Method, bool)> {
    let mut v = Vec::new();
    for joint in [false, true] {
        for m in Method::ALL {
            if AnyIntegrator::is_available(m) {
                v.push((m, joint));
            }
        }
    }
    v
}

/// The first-order methods (dissipative Newmark, half-implicit Euler): looser checks.
pub fn first_order(m: Method) -> bool {
    matches!(m, Method::Newmark | Method::HalfImplicit)
}

pub fn formulation(joint: bool) -> &'static str {
    if joint {
        "joint"
    } else {
        "absolute"
    }
}
