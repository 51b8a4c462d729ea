//! Every integrator on every model in `models/` (issue 4): a short run with the inputs held at
//! their start values reaches the end, stays on the constraint manifold and produces finite
//! outputs.

use mbsfmu::integrate::any::AnyIntegrator;
use mbsfmu::integrate::system::Mechanical;
use mbsfmu::integrate::{Integrator, Method, Settings};
use mbsfmu::mbs::system::System;
use std::path::Path;
use std::sync::Arc;

fn make(method: Method, settings: Settings, nq: usize, nc: usize) -> Option<AnyIntegrator> {
    Some(
        AnyIntegrator::new(Settings { method, ..settings }, nq, nc)
            .expect("every method is available"),
    )
}

fn models() -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("models"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_integrator_runs_on_every_model() {
    let horizon = 0.2;
    let mut failures = Vec::new();
    for f in models() {
        let spec = Arc::new(mbsfmu::mbs::load_model(&f).unwrap());
        for method in Method::ALL {
            let mut sys = System::new(spec.clone()).unwrap();
            let x0 = sys.initial_state(spec.experiment.start).unwrap();
            let (nq, nc) = (sys.n_q(), sys.n_c());
            let settings = Settings {
                rtol: 1e-4,
                atol: 1e-6,
                ..Settings::default()
            };
            let Some(mut integ) = make(method, settings, nq, nc) else {
                continue;
            };
            let name = format!(
                "{} / {}",
                f.file_name().unwrap().to_string_lossy(),
                method.name()
            );
            if let Err(e) = integ.initialize(&mut sys, &x0) {
                failures.push(format!("{name}: initialize: {e}"));
                continue;
            }
            let t_end = spec.experiment.start + horizon;
            let started = std::time::Instant::now();
            let mut ok = true;
            while Integrator::<System>::state(&integ).t < t_end {
                if let Err(e) = integ.step(&mut sys, t_end) {
                    failures.push(format!(
                        "{name}: at t = {}: {e}",
                        Integrator::<System>::state(&integ).t
                    ));
                    ok = false;
                    break;
                }
                if started.elapsed().as_secs() > 20 {
                    failures.push(format!(
                        "{name}: too slow ({} steps in 20 s, t = {})",
                        Integrator::<System>::stats(&integ).steps,
                        Integrator::<System>::state(&integ).t
                    ));
                    ok = false;
                    break;
                }
            }
            if !ok {
                continue;
            }
            let x = Integrator::<System>::state(&integ).clone();
            let mut phi = vec![0.0; nc];
            sys.constraints(x.t, &x.q, &mut phi);
            let worst = phi.iter().fold(0.0f64, |m, p| m.max(p.abs()));
            let mut out = vec![0.0; sys.n_outputs()];
            sys.evaluate_outputs(&x, &mut out).unwrap();
            eprintln!(
                "{name}: {} steps, {} rejected, residual {worst:.1e}, outputs {out:.4?}",
                Integrator::<System>::stats(&integ).steps,
                Integrator::<System>::stats(&integ).rejected_steps
            );
            if worst.is_nan() || worst >= 1e-4 || out.iter().any(|o| !o.is_finite()) {
                failures.push(format!("{name}: residual {worst:e}, outputs {out:?}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Starting exactly at an equilibrium (fixed suspension, hanging at rest: every derivative
/// zero) must not stall any method: the Newton updates are then at round-off level and a
/// rate estimate from two of them is meaningless (DASSL accepts such an update as converged).
#[test]
fn every_integrator_starts_from_an_exact_equilibrium() {
    use mbsfmu::integrate::test_systems::CartesianChain;
    for method in Method::ALL {
        let mut sys = CartesianChain::new(4, 0.0, 0.0, 1.0);
        let x = sys.consistent_state(0.0);
        let mut integ = AnyIntegrator::new(
            Settings {
                method,
                ..Settings::default()
            },
            8,
            4,
        )
        .unwrap();
        integ.initialize(&mut sys, &x).unwrap();
        while Integrator::<CartesianChain>::state(&integ).t < 1.0 {
            integ
                .step(&mut sys, 1.0)
                .unwrap_or_else(|e| panic!("{}: {e}", method.name()));
        }
        let q = &Integrator::<CartesianChain>::state(&integ).q;
        // It stays at rest: the tip is still straight below the suspension.
        assert!(
            (q[6] - 2.0).abs() < 1e-9 && (q[7] + 4.0).abs() < 1e-6,
            "{}: {q:?}",
            method.name()
        );
    }
}
