//! Kinematics and inverse dynamics of the driven benchmark models against closed form
//! (tests/common/closed_form.rs, derived in minimal coordinates independently of the engine).
//!
//! The driving input is set to the Taylor polynomial `θ + ω s + α s²/2`; assembly then fixes
//! positions, velocities and (through the saddle-point system) accelerations and the driver's
//! reaction, which must equal the closed-form values.

mod common;
use common::closed_form::{four_link, slider_crank};
use mbsfmu::mbs::inputs::InputSegment;
use mbsfmu::mbs::system::System;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

fn at(model: &str, theta: f64, omega: f64, alpha: f64) -> HashMap<String, f64> {
    let f = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(model);
    let spec = mbsfmu::mbs::load_model(&f).unwrap();
    let mut sys = System::new(Arc::new(spec)).unwrap();
    // One assembly from the file's geometry (θ = 0): the engine's continuation turns the
    // mechanism to θ.
    sys.inputs_mut().segments[0] = InputSegment {
        t0: 0.0,
        coeffs: [theta, omega, 0.5 * alpha, 0.0],
    };
    let x = sys.initial_state(0.0).unwrap();
    let mut out = vec![0.0; sys.n_outputs()];
    sys.evaluate_outputs(&x, &mut out).unwrap();
    sys.spec()
        .outputs
        .iter()
        .map(|o| o.name.clone())
        .zip(out)
        .collect()
}

const STATES: [(f64, f64, f64); 5] = [
    (0.0, 0.0, 0.0),
    (0.4, 6.0, 0.0),
    (1.3, -4.0, 25.0),
    (2.6, 12.0, -40.0),
    (4.4, 2.0, 3.0),
];

#[test]
fn slider_crank_position_and_driving_torque_match_closed_form() {
    let p = slider_crank::Params::default();
    for (th, w, a) in STATES {
        let o = at("slider_crank.toml", th, w, a);
        let d = slider_crank::inverse_dynamics(&p, th, w, a);
        assert!(
            (o["slider_x"] - d.kin.x).abs() < 1e-10,
            "θ={th}: slider_x {} vs {}",
            o["slider_x"],
            d.kin.x
        );
        let tol = 1e-9 * d.torque.abs().max(1.0);
        assert!(
            (o["crank_torque"] - d.torque).abs() < tol,
            "θ={th}, ω={w}, α={a}: crank_torque {} vs {}",
            o["crank_torque"],
            d.torque
        );
    }
}

#[test]
fn four_link_rocker_angle_and_rotor_torque_match_closed_form() {
    let p = four_link::Params::default();
    for (th, w, a) in STATES {
        let o = at("four_link.toml", th, w * 0.2, a * 0.1);
        let (_, psi) = four_link::positions(&p, th);
        let diff = (o["rocker_angle"] - psi + std::f64::consts::PI)
            .rem_euclid(2.0 * std::f64::consts::PI)
            - std::f64::consts::PI;
        assert!(
            diff.abs() < 1e-10,
            "θ={th}: rocker_angle {} vs {psi}",
            o["rocker_angle"]
        );
        let torque = four_link::rotor_torque(&p, th, w * 0.2, a * 0.1);
        assert!(
            (o["rotor_torque"] - torque).abs() < 1e-8 * torque.abs().max(1.0),
            "θ={th}: rotor_torque {} vs {torque}",
            o["rotor_torque"]
        );
    }
}
