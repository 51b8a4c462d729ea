//! Drivers and joints whose equations are dependent at the start. Assembly drops one as
//! redundant; that is only right when the two prescribe the same motion, and for joints when
//! they stay dependent along it. A loop joint redundant on the joint formulation's tree loses
//! all its rows, whatever the axes. Checked against closed forms, in both formulations.

mod common;

use common::cosim::{initial_outputs, spec_in, started};
use mbsfmu::cosim::Advance;
use mbsfmu::integrate::Method;
use mbsfmu::mbs::system::System;

/// A 0.5 m crank on a pivot, its joint driven to θ = t, and (by mistake) a point driver on its
/// tip; `TIP` is replaced by the tip driver's component and motion. A pendulum on the tip leaves
/// the joint formulation a free coordinate.
const CRANK: &str = r#"[model]
name = "crank"
gravity = [0.0, -9.81, 0.0]
[[bodies]]
name = "crank"
mass = 1.0
inertia = [0.01, 0.01, 0.01]
position = [0.25, 0.0, 0.0]
[[joints]]
name = "pivot"
type = "revolute"
body1 = "ground"
body2 = "crank"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]
[[bodies]]
name = "bob"
mass = 1.0
inertia = [0.01, 0.01, 0.01]
position = [0.5, -0.5, 0.0]
[[joints]]
name = "hinge"
type = "revolute"
body1 = "crank"
body2 = "bob"
point = [0.5, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]
[[drivers]]
name = "angle_drive"
joint = "pivot"
motion = { type = "ramp", slope = 1.0 }
[[drivers]]
name = "tip_drive"
body = "crank"
point = [0.5, 0.0, 0.0]
TIP
"#;

fn start_error(text: &str, formulation: &str) -> String {
    let mut sys = System::new(spec_in(text, formulation, "crank.toml")).unwrap();
    match sys.initial_state(0.0) {
        Ok(_) => panic!("{formulation}: the contradictory drivers were accepted"),
        Err(e) => e.to_string(),
    }
}

/// The tip's y driven to −0.5 t: dependent on θ at t = 0 (both rows move the tip along y), but
/// θ = t moves it at +0.5 m/s. The velocity equations disagree by 1 m/s.
#[test]
fn drivers_that_disagree_in_velocity_are_refused_naming_both() {
    let text = CRANK.replace(
        "TIP",
        "component = \"y\"\nmotion = { type = \"ramp\", slope = -0.5 }",
    );
    for formulation in ["joint", "absolute"] {
        let msg = start_error(&text, formulation);
        for part in [
            "driver 'tip_drive' is redundant at t = 0",
            "driver 'angle_drive'",
            "prescribe different motions",
            "velocity equation is off by 1.000e0",
        ] {
            assert!(
                msg.contains(part),
                "{formulation}: {part:?} missing in: {msg}"
            );
        }
    }
}

/// The tip's x held at 0.5 m: at θ = 0 its row is dependent and its velocity (0) agrees, but
/// θ̇ = 1 gives the tip the centripetal acceleration ẍ = −0.5 θ̇² = −0.5 m/s², the driver 0.
#[test]
fn drivers_that_disagree_in_acceleration_are_refused() {
    let text = CRANK.replace(
        "TIP",
        "component = \"x\"\nmotion = { type = \"constant\", value = 0.5 }",
    );
    for formulation in ["joint", "absolute"] {
        let msg = start_error(&text, formulation);
        for part in [
            "driver 'tip_drive' is redundant",
            "acceleration equation is off by 5.000e-1",
        ] {
            assert!(
                msg.contains(part),
                "{formulation}: {part:?} missing in: {msg}"
            );
        }
    }
}

/// A 2 kg block on a vertical slide, lifted by a joint driver and by a point driver with the same
/// motion y = 0.1 sin(2π t): the second is redundant and agrees. A 1 kg pendulum hangs from the
/// block at rest (vertical motion of its pivot leaves it hanging). The load-carrying driver reads
/// (2 + 1) kg (g + ÿ); the dropped one carries nothing and reads 0 (it read NaN, and the FMU
/// refused its outputs at t = 0).
const LIFT: &str = r#"[model]
name = "lift"
gravity = [0.0, -9.81, 0.0]
[[bodies]]
name = "a"
mass = 2.0
inertia = [0.01, 0.01, 0.01]
position = [0.0, 0.0, 0.0]
[[joints]]
name = "slide"
type = "prismatic"
body1 = "ground"
body2 = "a"
point = [0.0, 0.0, 0.0]
axis = [0.0, 1.0, 0.0]
[[bodies]]
name = "bob"
mass = 1.0
inertia = [0.01, 0.01, 0.01]
position = [0.0, -0.5, 0.0]
[[joints]]
name = "hinge"
type = "revolute"
body1 = "a"
body2 = "bob"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]
[[drivers]]
name = "d1"
joint = "slide"
motion = { type = "sine", amplitude = 0.1, frequency = 1.0 }
[[drivers]]
name = "d2"
body = "a"
component = "y"
motion = { type = "sine", amplitude = 0.1, frequency = 1.0 }
[[outputs]]
name = "y"
type = "position"
body = "a"
component = "y"
[[outputs]]
name = "F1"
type = "driver_force"
driver = "d1"
[[outputs]]
name = "F2"
type = "driver_force"
driver = "d2"
"#;

#[test]
fn a_redundant_driver_that_agrees_is_dropped_and_carries_no_load() {
    let (m, g, a, w) = (3.0, 9.81, 0.1, 2.0 * std::f64::consts::PI);
    for formulation in ["joint", "absolute"] {
        let y0 = initial_outputs(LIFT, formulation, "lift.toml");
        assert!(
            (y0[1] - m * g).abs() < 1e-9,
            "{formulation}: F1(0) = {}",
            y0[1]
        );
        assert_eq!(y0[2], 0.0, "{formulation}: F2(0)");
        let spec = spec_in(LIFT, formulation, "lift.toml");
        let (mut sim, table) = started(&spec, Method::Bdf, Some(1e-8));
        let vr = |n: &str| table.by_name(n).unwrap().value_reference;
        for i in 1..=8 {
            let t = 0.1 * i as f64;
            assert!(matches!(sim.advance_to(t, None), Ok(Advance::Completed)));
            let (y, f1, f2) = (
                sim.get_real(vr("y")).unwrap(),
                sim.get_real(vr("F1")).unwrap(),
                sim.get_real(vr("F2")).unwrap(),
            );
            let (s, acc) = ((w * t).sin(), -a * w * w * (w * t).sin());
            assert!((y - a * s).abs() < 1e-7, "{formulation} t = {t}: y = {y}");
            assert!(
                (f1 - m * (g + acc)).abs() < 1e-6 * m * g,
                "{formulation} t = {t}: F1 = {f1}, expected {}",
                m * (g + acc)
            );
            assert_eq!(f2, 0.0, "{formulation} t = {t}: F2");
        }
    }
}

/// A body on a spherical joint at P, with two rods from ground to its point Q on a line
/// through P; the three spheres about P and the rods' ground points touch at Q, so their
/// gradients are dependent at the start only (a mechanism drawn in a singular position) and
/// Q cannot move (the body turns about P–Q). Assembly drops rod `h3` as redundant; the body's
/// spin off that line then stretched it by 0.37 m without a word. Now the run stops at the
/// first communication point where the dropped row comes apart, naming it.
const TANGENT_RODS: &str = r#"[model]
name = "hinge"
gravity = [0.0, 0.0, -9.81]
[experiment]
tolerance = 1e-9
[solver]
atol = 1e-10
[[bodies]]
name = "b"
mass = 1.3
inertia = { xx = 0.05, yy = 0.08, zz = 0.11, xy = 0.01, xz = -0.005, yz = 0.02 }
position = [0.35, 0.1, 0.5]
orientation = [0.49757104789172696, 0.3785745324616513, -0.7571490649233026, 0.18928726623082565]
velocity = [0.32199378875996976, 0.053665631459994936, -0.3756594202199646]
angular_velocity = [0.4024922359499621, 1.3416407864998738, 0.5366563145999496]
[[joints]]
name = "h"
type = "spherical"
body1 = "ground"
body2 = "b"
point = [0.019501552810007594, -0.06832815729997471, 0.1926687370800101]
[[joints]]
name = "h2"
type = "distance"
body1 = "ground"
body2 = "b"
point1 = [0.5073312629199899, 0.5577708763999664, 0.44310835055998654]
point2 = [0.2073312629199899, 0.5577708763999664, 0.44310835055998654]
[[joints]]
name = "h3"
type = "distance"
body1 = "ground"
body2 = "b"
point1 = [0.2073312629199899, 1.0577708763999665, 0.6431083505599866]
point2 = [0.2073312629199899, 0.5577708763999664, 0.44310835055998654]
[[outputs]]
name = "cx"
type = "position"
body = "b"
component = "x"
"#;

#[test]
fn a_joint_redundant_only_at_the_start_stops_the_run_naming_it() {
    for formulation in ["joint", "absolute"] {
        let spec = spec_in(TANGENT_RODS, formulation, "hinge.toml");
        let (mut sim, _) = started(&spec, Method::Bdf, None);
        let err = (1..=100)
            .find_map(|i| sim.advance_to(0.01 * i as f64, None).err())
            .unwrap_or_else(|| panic!("{formulation}: ran 1 s with rod h3 dropped"));
        let msg = err.to_string();
        assert!(
            msg.contains("joint 'h3' rod length") && msg.contains("dropped at assembly"),
            "{formulation}: {msg}"
        );
    }
}

/// A door on two hinges on the tilted axis a = (0, 0.6, 0.8) through the origin: a revolute at
/// the bottom and, at a (on the axis), a spherical joint or a second revolute about a (`UPPER`).
/// The upper hinge is fully redundant: the door is a pendulum about a. In joint coordinates its
/// rows are the gradients of its equations projected on the lower hinge's axis, zero up to
/// round-off (1e-17); they were judged against themselves, one of them kept, and the door had 0
/// degrees of freedom and a singular matrix at the first step (axes along x or z gave exact
/// zeros and passed).
const TILTED_DOOR: &str = r#"[model]
name = "door"
gravity = [0.0, 0.0, -9.81]
[[bodies]]
name = "door"
mass = 3.0
inertia = [0.5, 0.3, 0.4]
position = [0.4, 0.3, 0.4]
[[joints]]
name = "lower"
type = "revolute"
body1 = "ground"
body2 = "door"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.6, 0.8]
[[joints]]
name = "upper"
body1 = "ground"
body2 = "door"
point = [0.0, 0.6, 0.8]
UPPER
[[outputs]]
name = "phi"
type = "joint_coordinate"
joint = "lower"
"#;

/// The door's angle about a by RK4 on its own equation: the centre c = 0.5 a + d (cos φ x̂ +
/// sin φ a × x̂) with d = 0.4 (c0 = (0.4, 0.3, 0.4), c0·a = 0.5) and a × x̂ = (0, 0.8, −0.6),
/// so its height is 0.4 − 0.6 d sin φ and `I_a φ̈ = m g d sin β cos φ` with sin β = 0.6 (the
/// axis' angle to the vertical's normal plane), `I_a = aᵀ J a + m d² = 0.3·0.36 + 0.4·0.64 +
/// 3·0.16 = 0.844`. From rest at φ = 0; the angle at `t` (steps of 1e-4 s).
fn tilted_door_angle(t: f64) -> f64 {
    let (m, g, d, sin_beta) = (3.0, 9.81, 0.4, 0.6);
    let i_a = 0.3 * 0.36 + 0.4 * 0.64 + m * d * d;
    let acc = |phi: f64| m * g * d * sin_beta * phi.cos() / i_a;
    let n = (t / 1e-4).round().max(1.0) as usize;
    let h = t / n as f64;
    let (mut x, mut v) = (0.0f64, 0.0f64);
    for _ in 0..n {
        let (k1x, k1v) = (v, acc(x));
        let (k2x, k2v) = (v + 0.5 * h * k1v, acc(x + 0.5 * h * k1x));
        let (k3x, k3v) = (v + 0.5 * h * k2v, acc(x + 0.5 * h * k2x));
        let (k4x, k4v) = (v + h * k3v, acc(x + h * k3x));
        x += h / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x);
        v += h / 6.0 * (k1v + 2.0 * k2v + 2.0 * k3v + k4v);
    }
    x
}

/// The assembly report of `spec` (initial state through the engine alone).
fn report(spec: &std::sync::Arc<mbsfmu::mbs::ModelSpec>) -> mbsfmu::mbs::system::AssemblyReport {
    let mut sys = System::new(spec.clone()).unwrap();
    sys.initial_state(0.0).unwrap();
    sys.report.clone().unwrap()
}

#[test]
fn a_loop_joint_redundant_on_a_tilted_axis_is_dropped_whole() {
    for (upper, n_rows) in [
        ("type = \"spherical\"", 3),
        ("type = \"revolute\"\naxis = [0.0, 0.6, 0.8]", 5),
    ] {
        let text = TILTED_DOOR.replace("UPPER", upper);
        for formulation in ["joint", "absolute"] {
            let case = format!("{formulation}, upper {upper:?}");
            let spec = spec_in(&text, formulation, "door.toml");
            let r = report(&spec);
            assert_eq!(r.dof, 1, "{case}: {r:?}");
            let upper_dropped = r.dropped.iter().filter(|l| l.contains("'upper'")).count();
            if formulation == "joint" {
                // Every row of the cut joint goes (the lower hinge is the tree joint).
                assert_eq!((r.n_coordinates, r.n_independent), (1, 0), "{case}: {r:?}");
                assert_eq!(upper_dropped, n_rows, "{case}: {r:?}");
            }
            let (mut sim, table) = started(&spec, Method::Bdf, Some(1e-8));
            let vr = table.by_name("phi").unwrap().value_reference;
            let mut worst = 0.0f64;
            for i in 1..=10 {
                let t = 0.1 * i as f64;
                let step = sim.advance_to(t, None);
                assert!(
                    matches!(step, Ok(Advance::Completed)),
                    "{case}: step to {t}: {:?}",
                    step.err().map(|e| e.to_string())
                );
                let phi = sim.get_real(vr).unwrap();
                worst = worst.max((phi - tilted_door_angle(t)).abs());
            }
            // φ(1 s) is about 0.6 rad.
            assert!(
                worst < 1e-5,
                "{case}: φ off the 1-DOF reference by {worst:.3e} rad"
            );
        }
    }
}

/// An arm on a universal joint (2 DOF), a weight welded to its tip by `weld` and also through a
/// brace (arm–brace and brace–weight fixed), turned about (1, 1, 1): `weld` closes a rigid loop
/// and all six of its equations are redundant. Joint coordinates kept one of its round-off rows
/// (1 DOF) and failed with a singular matrix at t = 3.4e-7.
const WELDED_LOOP: &str = r#"[model]
name = "welded"
gravity = [0.0, -9.81, -1.0]
[solver]
atol = 1e-11
[[bodies]]
name = "arm"
mass = 1.0
inertia = [0.01, 0.1, 0.1]
position = [0.5, 0.0, 0.0]
[[bodies]]
name = "weight"
mass = 2.0
inertia = [0.02, 0.03, 0.04]
position = [1.0, 0.1, 0.0]
orientation = { axis = [1.0, 1.0, 1.0], angle = 0.4 }
[[bodies]]
name = "brace"
mass = 0.5
inertia = [0.01, 0.01, 0.01]
position = [0.8, 0.05, 0.0]
[[joints]]
name = "weld"
type = "fixed"
body1 = "weight"
body2 = "arm"
point = [1.0, 0.0, 0.0]
[[joints]]
name = "pivot"
type = "universal"
body1 = "ground"
body2 = "arm"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]
axis2 = [0.0, 1.0, 0.0]
[[joints]]
name = "w2"
type = "fixed"
body1 = "arm"
body2 = "brace"
point = [0.8, 0.0, 0.0]
[[joints]]
name = "w3"
type = "fixed"
body1 = "brace"
body2 = "weight"
point = [0.9, 0.0, 0.0]
[[outputs]]
name = "wy"
type = "position"
body = "weight"
component = "y"
[[outputs]]
name = "wz"
type = "position"
body = "weight"
component = "z"
"#;

#[test]
fn a_rigid_loop_with_a_turned_body_keeps_its_two_degrees_of_freedom() {
    let mut end = Vec::new();
    for formulation in ["joint", "absolute"] {
        let spec = spec_in(WELDED_LOOP, formulation, "welded.toml");
        let r = report(&spec);
        assert_eq!(r.dof, 2, "{formulation}: {r:?}");
        let (mut sim, table) = started(&spec, Method::Bdf, Some(1e-9));
        for i in 1..=10 {
            let t = 0.1 * i as f64;
            let step = sim.advance_to(t, None);
            assert!(
                matches!(step, Ok(Advance::Completed)),
                "{formulation}: step to {t}: {:?}",
                step.err().map(|e| e.to_string())
            );
        }
        let mut get = |n: &str| {
            sim.get_real(table.by_name(n).unwrap().value_reference)
                .unwrap()
        };
        let (wy, wz) = (get("wy"), get("wz"));
        end.push((wy, wz));
    }
    // The weight has fallen (y from 0.1 m to about −0.09 m at 1 s) the same way in both forms.
    let ((jy, jz), (ay, az)) = (end[0], end[1]);
    assert!(jy < 0.0, "joint: wy(1) = {jy}");
    assert!(
        (jy - ay).abs() < 1e-6 && (jz - az).abs() < 1e-6,
        "joint ({jy}, {jz}) against absolute ({ay}, {az})"
    );
}

/// The gallery's four-bar (its rotor driven by an input, at rest at t = 0) with a second
/// driver turning the rocker at 1 rad/s from its assembled angle: the rocker's driver is a combination of the rotor's
/// and the loop's rows, and the message names the rotor's driver, the motion the user must
/// choose between. Before, it listed the three largest coefficients: the coupler's
/// normalization and two joint rows, and no driver.
#[test]
fn conflicting_drivers_in_a_loop_name_each_other() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/four_link.toml");
    let text = std::fs::read_to_string(path).unwrap().replacen(
        "[[outputs]]",
        "[[drivers]]\nname = \"rocker_drive\"\njoint = \"rocker_pivot\"\n\
         motion = { type = \"ramp\", initial = 1.3139267846680114, slope = 1.0 }\n\n[[outputs]]",
        1,
    );
    for formulation in ["joint", "absolute"] {
        let mut sys = System::new(spec_in(&text, formulation, "four_link.toml")).unwrap();
        let msg = match sys.initial_state(0.0) {
            Ok(_) => panic!("{formulation}: the conflicting drivers were accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            msg.contains("prescribe different motions")
                && msg.contains("the other motion is prescribed by driver 'rotor_drive'"),
            "{formulation}: {msg}"
        );
    }
}
