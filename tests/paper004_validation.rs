//! Paper 004's checks on the engine's own models (`models/*.toml`), against references that are
//! independent of the engine (tools/references/README.md):
//!
//! - first-order convergence of the half-implicit (symplectic Euler, index 3) method at fixed
//!   steps on the driven four-link and slider-crank (closed-form kinematics and inverse dynamics)
//!   and on the free double pendulum (scipy DOP853 at 1e-13 in minimal coordinates);
//! - bounded energy error of the half-implicit method where the dissipative Newmark member
//!   (γ = 0.6, paper 001's first-order baseline, standing in for backward Euler) drains the
//!   energy (paper 004, Fig. 3): the free double pendulum and the four-link with its drive
//!   removed, both conservative.
//!
//! `cargo test --release --test paper004_validation -- --nocapture` prints the numbers that
//! docs/integrators.md quotes.

mod common;
use common::closed_form::RefTable;
use mbsfmu::integrate::any::AnyIntegrator;
use mbsfmu::integrate::system::Mechanical;
use mbsfmu::integrate::{Integrator, MechState, Method, Settings};
use mbsfmu::mbs::inputs::InputSegment;
use mbsfmu::mbs::system::System;
use std::path::Path;
use std::sync::Arc;

/// The model file's text with every top-level block for which `drop` returns true removed (a
/// block runs from its `[..]` / `[[..]]` header to the next header), plus `extra` appended.
fn model_text(file: &str, drop: impl Fn(&str) -> bool, extra: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(file);
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    let mut block = String::new();
    let flush = |block: &mut String, out: &mut String| {
        if !drop(block) {
            out.push_str(block);
        }
        block.clear();
    };
    for line in text.lines() {
        if line.starts_with('[') {
            flush(&mut block, &mut out);
        }
        block.push_str(line);
        block.push('\n');
    }
    flush(&mut block, &mut out);
    out.push_str(extra);
    out
}

fn system(file: &str, drop: impl Fn(&str) -> bool, extra: &str) -> System {
    let text = model_text(file, drop, extra);
    let mut spec = mbsfmu::mbs::load_model_str(&text, Path::new(file)).unwrap();
    // Paper 004's setting: absolute coordinates, every joint a set of constraints.
    spec.formulation = mbsfmu::mbs::spec::Formulation::Absolute;
    System::new(Arc::new(spec)).unwrap()
}

fn out_index(sys: &System, name: &str) -> usize {
    sys.spec()
        .outputs
        .iter()
        .position(|o| o.name == name)
        .unwrap_or_else(|| panic!("no output {name}"))
}

fn integrator(method: Method, h: f64, sys: &System) -> AnyIntegrator {
    let settings = Settings {
        method,
        fixed_step: Some(h),
        rtol: 1e-6,
        atol: 1e-6,
        ..Settings::default()
    };
    AnyIntegrator::new(settings, sys.n_q(), sys.n_c()).unwrap()
}

/// Least-squares slope of log(err) against log(h).
fn slope(hs: &[f64], errs: &[f64]) -> f64 {
    let xs: Vec<f64> = hs.iter().map(|h| h.ln()).collect();
    let ys: Vec<f64> = errs.iter().map(|e| e.ln()).collect();
    let n = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    sxy / sxx
}

/// Fixed-step half-implicit runs over `t_end` for the step sizes `hs`; at every `dt` the named
/// outputs are compared with the reference columns of the same name. Returns, per output, the
/// maximal errors for each `h`.
fn half_implicit_errors(
    make_sys: &dyn Fn() -> System,
    reference: &RefTable,
    outputs: &[&str],
    hs: &[f64],
    t_end: f64,
    dt: f64,
) -> Vec<Vec<f64>> {
    let mut errs = vec![vec![]; outputs.len()];
    for &h in hs {
        let mut sys = make_sys();
        let ix: Vec<usize> = outputs.iter().map(|n| out_index(&sys, n)).collect();
        let x0 = sys.initial_state(0.0).unwrap();
        let mut integ = integrator(Method::HalfImplicit, h, &sys);
        integ.initialize(&mut sys, &x0).unwrap();
        let mut out = vec![0.0; sys.n_outputs()];
        let mut worst = vec![0.0f64; outputs.len()];
        let n = (t_end / dt).round() as usize;
        for k in 1..=n {
            let tc = k as f64 * dt;
            while Integrator::<System>::state(&integ).t < tc {
                integ.step(&mut sys, tc).unwrap();
            }
            let x = Integrator::<System>::state(&integ).clone();
            sys.evaluate_outputs(&x, &mut out).unwrap();
            for (j, name) in outputs.iter().enumerate() {
                let mut d = out[ix[j]] - reference.at(name, tc).unwrap();
                if name.starts_with("theta") {
                    // Absolute angles: the engine's and the reference's may differ by 2π.
                    d = (d + std::f64::consts::PI).rem_euclid(2.0 * std::f64::consts::PI)
                        - std::f64::consts::PI;
                }
                let d = d.abs();
                worst[j] = worst[j].max(d);
            }
        }
        for (j, w) in worst.into_iter().enumerate() {
            errs[j].push(w);
        }
    }
    for (j, name) in outputs.iter().enumerate() {
        let p = slope(hs, &errs[j]);
        let list: Vec<String> = errs[j].iter().map(|e| format!("{e:.3e}")).collect();
        println!("  {name:<14} max errors {}  slope {p:.3}", list.join(" "));
    }
    errs
}

const HS: [f64; 4] = [4e-3, 2e-3, 1e-3, 5e-4];

/// Paper 004, section 3 (Table 2's four-link, rotor driven at π rad/s): the positions of the
/// zero-degree-of-freedom mechanism satisfy the constraints (so they are exact up to the
/// Newton tolerance), the rocker's angular velocity converges with order 1, and so does the
/// driving torque (a Lagrange multiplier).
#[test]
fn half_implicit_first_order_on_the_driven_four_link() {
    let reference = RefTable::load("four_link.csv").unwrap();
    let make = || {
        let mut sys = system(
            "four_link.toml",
            |_| false,
            "\n[[outputs]]\nname = \"rocker_rate\"\ntype = \"angular_velocity\"\n\
             body = \"rocker\"\naxis = [0.0, 0.0, 1.0]\n",
        );
        sys.inputs_mut().segments[0] = InputSegment {
            t0: 0.0,
            coeffs: [0.0, std::f64::consts::PI, 0.0, 0.0],
        };
        sys
    };
    println!("four-link, rotor at π rad/s, half-implicit, h = {HS:?}, 2 s:");
    let errs = half_implicit_errors(
        &make,
        &reference,
        &["rocker_angle", "rocker_rate", "rotor_torque"],
        &HS,
        2.0,
        0.02,
    );
    assert!(
        errs[0].iter().all(|e| *e < 1e-8),
        "positions must satisfy the constraints: {:?}",
        errs[0]
    );
    let p_rate = slope(&HS, &errs[1]);
    assert!((p_rate - 1.0).abs() < 0.3, "rocker rate slope {p_rate}");
    let p_torque = slope(&HS, &errs[2]);
    assert!((p_torque - 1.0).abs() < 0.3, "torque slope {p_torque}");
}

/// The same on the engine's slider-crank (crank at 2π rad/s, no friction): slider velocity and
/// crank torque of order 1, positions exact.
#[test]
fn half_implicit_first_order_on_the_driven_slider_crank_model() {
    let reference = RefTable::load("slider_crank.csv").unwrap();
    let make = || {
        let mut sys = system(
            "slider_crank.toml",
            |_| false,
            "\n[[outputs]]\nname = \"slider_v\"\ntype = \"velocity\"\nbody = \"slider\"\n\
             component = \"x\"\n",
        );
        sys.inputs_mut().segments[0] = InputSegment {
            t0: 0.0,
            coeffs: [0.0, 2.0 * std::f64::consts::PI, 0.0, 0.0],
        };
        sys
    };
    println!("slider-crank, crank at 2π rad/s, half-implicit, h = {HS:?}, 2 s:");
    let errs = half_implicit_errors(
        &make,
        &reference,
        &["slider_x", "slider_v", "crank_torque"],
        &HS,
        2.0,
        0.02,
    );
    assert!(
        errs[0].iter().all(|e| *e < 1e-8),
        "positions must satisfy the constraints: {:?}",
        errs[0]
    );
    for (j, what) in [(1, "slider velocity"), (2, "crank torque")] {
        let p = slope(&HS, &errs[j]);
        assert!((p - 1.0).abs() < 0.3, "{what} slope {p}");
    }
}

/// The stiff double pendulum with its springs and dampers set to zero: the conservative double
/// pendulum of `tests/data/double_pendulum_free.csv`.
fn free_double_pendulum() -> System {
    let mut sys = system("double_pendulum_stiff.toml", |_| false, "");
    for name in ["k1", "c1", "k2", "c2"] {
        let i = sys
            .spec()
            .parameters
            .iter()
            .position(|p| p.name == name)
            .unwrap();
        sys.set_parameter(i, 0.0).unwrap();
    }
    sys
}

/// Two degrees of freedom: the angles themselves converge with order 1.
#[test]
fn half_implicit_first_order_on_the_free_double_pendulum_model() {
    let reference = RefTable::load("double_pendulum_free.csv").unwrap();
    println!("free double pendulum, half-implicit, h = {HS:?}, 2 s:");
    let errs = half_implicit_errors(
        &free_double_pendulum,
        &reference,
        &["theta1", "theta2"],
        &HS,
        2.0,
        0.02,
    );
    for (j, what) in [(0, "theta1"), (1, "theta2")] {
        let p = slope(&HS, &errs[j]);
        assert!((p - 1.0).abs() < 0.3, "{what} slope {p}");
    }
}

/// Max |E − E0| over (0, T/2] and (T/2, T], and E(T) − E0, at fixed step `h`.
fn energy_drift(
    make_sys: &dyn Fn() -> System,
    method: Method,
    h: f64,
    t_end: f64,
) -> (f64, f64, f64, f64) {
    let mut sys = make_sys();
    let x0 = sys.initial_state(0.0).unwrap();
    let energy = |sys: &mut System, x: &MechState| sys.energy(x.t, &x.q, &x.v);
    let e0 = energy(&mut sys, &x0);
    let mut integ = integrator(method, h, &sys);
    integ.initialize(&mut sys, &x0).unwrap();
    let (mut first, mut second) = (0.0f64, 0.0f64);
    let n = (t_end / 0.01).round() as usize;
    for k in 1..=n {
        let tc = k as f64 * 0.01;
        while Integrator::<System>::state(&integ).t < tc {
            integ.step(&mut sys, tc).unwrap();
        }
        let x = Integrator::<System>::state(&integ).clone();
        let d = (energy(&mut sys, &x) - e0).abs();
        if tc <= 0.5 * t_end {
            first = first.max(d);
        } else {
            second = second.max(d);
        }
    }
    let x = Integrator::<System>::state(&integ).clone();
    (e0, first, second, energy(&mut sys, &x) - e0)
}

/// Paper 004, Fig. 3: the half-implicit energy error stays bounded (no growth from the first
/// to the second half of the run), the dissipative first-order method loses energy steadily
/// (its loss grows from the first to the second half and ends beyond the half-implicit error).
fn energy_check(name: &str, make_sys: &dyn Fn() -> System, h: f64, t_end: f64) {
    let hi = energy_drift(make_sys, Method::HalfImplicit, h, t_end);
    let nm = energy_drift(make_sys, Method::Newmark, h, t_end);
    for (m, r) in [("half_implicit", hi), ("newmark γ=0.6", nm)] {
        println!(
            "energy {name:<22} {m:<14} h {h:e}: E0 {:.6e} J, max |ΔE| first half {:.3e}, second \
             half {:.3e}, ΔE(T) {:.3e} (relative {:.2e})",
            r.0,
            r.1,
            r.2,
            r.3,
            r.3 / r.0.abs().max(1e-300)
        );
    }
    let scale = hi.0.abs().max(1.0);
    assert!(
        hi.2 < 1.5 * hi.1 + 1e-12 * scale,
        "{name}: half-implicit energy error grows: {hi:?}"
    );
    // Newmark's loss keeps growing and ends beyond the half-implicit method's bounded error.
    assert!(
        nm.3 < 0.0 && nm.2 > 1.3 * nm.1 && nm.3.abs() > hi.2,
        "{name}: Newmark γ = 0.6 should drain the energy: {nm:?} vs half-implicit {hi:?}"
    );
}

#[test]
fn half_implicit_energy_bounded_on_the_free_double_pendulum_model() {
    energy_check("free double pendulum", &free_double_pendulum, 1e-3, 20.0);
}

/// The four-link with its drive removed: one degree of freedom, released at rest from the
/// file's geometry under gravity (conservative).
#[test]
fn half_implicit_energy_bounded_on_the_free_four_link() {
    let make = || {
        system(
            "four_link.toml",
            |block: &str| {
                block.starts_with("[[drivers]]")
                    || block.starts_with("[[inputs]]")
                    || block.contains("type = \"driver_force\"")
            },
            "",
        )
    };
    energy_check("free four-link", &make, 1e-3, 20.0);
}

/// With variable steps, a limit just past the proposed step (by 1e-6 of it, as a
/// communication point 2.3e-9 s after the step's end) is reached in one step. Before, the
/// half-implicit method stopped short and tried the 2.3e-9 s remainder, where its velocities
/// (position differences over the step, error ∝ 1/h) failed the error test at every smaller
/// step down to the minimum: the spherical chain in joint coordinates stopped at t = 4.28 s
/// under `mbsfmu simulate` at default settings.
#[test]
fn half_implicit_takes_a_sliver_before_the_limit_with_the_step() {
    for file in [
        "spherical_chain.toml",
        "four_link.toml",
        "slider_crank.toml",
    ] {
        let mut sys = system(file, |_| false, "");
        let settings = Settings {
            method: Method::HalfImplicit,
            ..Settings::default()
        };
        // (The initial state first: it settles the independent constraint rows.)
        let x0 = sys.initial_state(0.0).unwrap();
        let mut integ = AnyIntegrator::new(settings, sys.n_q(), sys.n_c()).unwrap();
        integ.initialize(&mut sys, &x0).unwrap();
        for _ in 0..20 {
            if integ.step(&mut sys, 1.0).unwrap() >= 1.0 {
                break;
            }
        }
        let t = Integrator::<System>::state(&integ).t;
        let h = Integrator::<System>::next_step_size(&integ);
        let limit = t + h * (1.0 + 1e-6);
        let mut steps = 0;
        while Integrator::<System>::state(&integ).t < limit {
            integ
                .step(&mut sys, limit)
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            steps += 1;
        }
        assert_eq!(Integrator::<System>::state(&integ).t, limit, "{file}");
        assert_eq!(steps, 1, "{file}: {steps} steps for {h:e} s");
    }
}
