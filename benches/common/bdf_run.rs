//! Shared driver of the BDF Jacobian-strategy benchmarks (`bdf_table2`, `bdf_quarter_car`):
//! one run of the engine's `System` with one strategy, the deviation from a reference table read
//! off the BDF's dense output, statistics and the CPU-time breakdown.

#![allow(dead_code)]

use mbsfmu::integrate::bdf::{Bdf, Profile};
use mbsfmu::integrate::{Integrator, JacobianStrategy, Settings, Stats};
use mbsfmu::mbs::system::System;
use mbsfmu::mbs::ModelSpec;
use std::sync::Arc;

/// A reference: times and, per time, the expected values of the picked coordinates.
pub struct Reference {
    pub t: Vec<f64>,
    pub values: Vec<Vec<f64>>,
}

/// One run's result.
pub struct Run {
    pub cpu: f64,
    pub stats: Stats,
    pub dev: f64,
    pub error: Option<String>,
    pub profile: Profile,
}

/// Integrate `spec` over `[0, t_end]` with `strategy` (one `step` per internal step, limit
/// `t_end`), comparing `pick(q)` with the reference at its times. The CPU time covers the
/// integrator's `initialize` and steps, not the system's assembly.
#[allow(clippy::too_many_arguments)]
pub fn run(
    spec: &Arc<ModelSpec>,
    strategy: JacobianStrategy,
    rtol: f64,
    atol: f64,
    t_end: f64,
    reference: &Reference,
    pick: &dyn Fn(&[f64], &mut Vec<f64>),
    profile: bool,
) -> Run {
    let mut sys = System::new(spec.clone()).expect("model builds");
    let x0 = sys.initial_state(0.0).expect("model assembles");
    let settings = Settings {
        jacobian: strategy,
        rtol,
        atol,
        ..Settings::default()
    };
    let (nq, nc) = (x0.q.len(), x0.lambda.len());
    let mut bdf = Bdf::new(settings, nq, nc);
    if profile {
        bdf.enable_profile();
    }
    let (mut q, mut v) = (vec![0.0; nq], vec![0.0; nq]);
    let mut got = Vec::new();
    let mut dev = 0.0f64;
    let mut next = 1;
    // The comparison (dense output at ~400 points) is counted too; it is negligible.
    let start = crate::report::thread_cpu_time();
    let mut error = bdf.initialize(&mut sys, &x0).err().map(|e| e.to_string());
    while error.is_none() && bdf.state().t < t_end {
        match bdf.step(&mut sys, t_end) {
            Ok(t) => {
                while next < reference.t.len() && reference.t[next] <= t {
                    bdf.interpolate(reference.t[next], &mut q, &mut v);
                    pick(&q, &mut got);
                    for (a, b) in got.iter().zip(&reference.values[next]) {
                        dev = dev.max((a - b).abs());
                    }
                    next += 1;
                }
            }
            Err(e) => error = Some(e.to_string()),
        }
    }
    let total = crate::report::thread_cpu_time() - start;
    if error.is_none() && next < reference.t.len() && reference.t[next] <= t_end {
        error = Some(format!(
            "reference compared only up to t = {}",
            reference.t[next - 1]
        ));
    }
    Run {
        cpu: total,
        stats: *bdf.stats(),
        dev,
        error,
        profile: *bdf.profile(),
    }
}
