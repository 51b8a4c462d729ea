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

/// Accelerations and joint reactions of the slider-crank against the independent
/// inverse dynamics (Newton–Euler per body in tests/common/closed_form.rs). The ground pivot's
/// frame is the global one, so its force is compared by component; the other joints' frames
/// turn with their first body, so their in-plane force magnitude is compared.
#[test]
fn slider_crank_acceleration_and_joint_reactions_match_inverse_dynamics() {
    use mbsfmu::mbs::spec::{BodyRef, OutputQuantity, OutputSpec};
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/slider_crank.toml");
    let mut spec = mbsfmu::mbs::load_model(&f).unwrap();
    let joint = |n: &str| spec.joints.iter().position(|j| j.name == n).unwrap();
    let slider = spec.bodies.iter().position(|b| b.name == "slider").unwrap();
    let (pivot, pin, wrist, slide) = (
        joint("crank_pivot"),
        joint("crank_pin"),
        joint("wrist_pin"),
        joint("slide"),
    );
    let out = |name: &str, quantity| OutputSpec {
        name: name.into(),
        unit: String::new(),
        description: String::new(),
        quantity,
        scale: 1.0,
    };
    let mut extra = vec![out(
        "ax",
        OutputQuantity::Acceleration {
            body: BodyRef::Body(slider),
            point: nalgebra::Vector3::zeros(),
            component: 0,
        },
    )];
    for (j, tag) in [
        (pivot, "pivot"),
        (pin, "pin"),
        (wrist, "wrist"),
        (slide, "slide"),
    ] {
        for c in 0..3 {
            extra.push(out(
                &format!("{tag}{c}"),
                OutputQuantity::JointForce {
                    joint: j,
                    component: c,
                    axes: Default::default(),
                },
            ));
        }
    }
    spec.outputs.extend(extra);
    let p = slider_crank::Params::default();
    let spec = Arc::new(spec);
    for (th, w, a) in STATES {
        let mut sys = System::new(spec.clone()).unwrap();
        sys.inputs_mut().segments[0] = InputSegment {
            t0: 0.0,
            coeffs: [th, w, 0.5 * a, 0.0],
        };
        let x = sys.initial_state(0.0).unwrap();
        let mut v = vec![0.0; sys.n_outputs()];
        sys.evaluate_outputs(&x, &mut v).unwrap();
        let o: HashMap<String, f64> = spec.outputs.iter().map(|o| o.name.clone()).zip(v).collect();
        let d = slider_crank::inverse_dynamics(&p, th, w, a);
        let tol = |x: f64| 1e-8 * x.abs().max(1.0);
        assert!(
            (o["ax"] - d.kin.ddx).abs() < tol(d.kin.ddx),
            "θ={th}: slider acceleration {} vs {}",
            o["ax"],
            d.kin.ddx
        );
        for c in 0..2 {
            let (e, r) = (o[&format!("pivot{c}")], d.ground_on_crank[c]);
            assert!(
                (e - r).abs() < tol(r),
                "θ={th}: ground on crank [{c}] {e} vs {r}"
            );
        }
        let norm = |tag: &str| {
            (o[&format!("{tag}0")].powi(2)
                + o[&format!("{tag}1")].powi(2)
                + o[&format!("{tag}2")].powi(2))
            .sqrt()
        };
        let mag = |v: [f64; 2]| v[0].hypot(v[1]);
        assert!(
            (norm("pin") - mag(d.crank_on_rod)).abs() < tol(mag(d.crank_on_rod)),
            "θ={th}: crank pin {} vs {}",
            norm("pin"),
            mag(d.crank_on_rod)
        );
        assert!(
            (norm("wrist") - mag(d.slider_on_rod)).abs() < tol(mag(d.slider_on_rod)),
            "θ={th}: wrist pin {} vs {}",
            norm("wrist"),
            mag(d.slider_on_rod)
        );
        assert!(
            (norm("slide") - d.normal.abs()).abs() < tol(d.normal),
            "θ={th}: slide normal {} vs {}",
            norm("slide"),
            d.normal
        );
    }
}
