//! Drivers and joints whose equations are dependent at the start. Assembly drops one as
//! redundant; that is only right when the two prescribe the same motion, and for joints when
//! they stay dependent along it. Checked against closed forms, in both formulations.

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
