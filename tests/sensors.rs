//! Sensor outputs (issue 16): relative position, velocity and acceleration between two
//! markers resolved in a chosen body's axes, on the suspension corner
//! (models/suspension_corner.toml), against hand calculation. The lower ball joint B =
//! (0, 0.70, 0.17) and the lower arm's inner pivot A = (0, 0.25, 0.20) are both points of the
//! lower arm, which only rotates about x (angle φ): so `B − A` in the arm's axes stays
//! (0, 0.45, −0.03) for all time, in ground axes it is `R_x(φ) (0, 0.45, −0.03)`, its velocity
//! `ω × d` with `ω = φ̇ x`. Run from the design position (the static solve off), in both
//! formulations.

use mbsfmu::cosim::Simulation;
use mbsfmu::description::VariableTable;
use mbsfmu::mbs::system::System;
use std::path::Path;
use std::sync::Arc;

const SENSORS: &str = r#"
[[outputs]]
name = "w_rel_chassis_y"
type = "relative_position"
body1 = "chassis"
body2 = "upright"
point2 = [0.0, 0.75, 0.30]
frame = "chassis"
component = "y"
[[outputs]]
name = "w_rel_chassis_z"
type = "relative_position"
body1 = "chassis"
body2 = "upright"
point2 = [0.0, 0.75, 0.30]
frame = "chassis"
component = "z"
"#;

fn pair(name: &str, kind: &str, frame: &str, c: &str) -> String {
    format!(
        "[[outputs]]\nname = \"{name}\"\ntype = \"{kind}\"\nbody1 = \"lower_arm\"\npoint1 = [0.0, 0.25, 0.20]\nbody2 = \"upright\"\npoint2 = [0.0, 0.70, 0.17]\nframe = \"{frame}\"\ncomponent = \"{c}\"\n"
    )
}

fn model(formulation: &str) -> String {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/suspension_corner.toml");
    let text = std::fs::read_to_string(file).unwrap();
    let text = text.replace(
        "initial = \"static\"\n",
        &format!("formulation = \"{formulation}\"\n"),
    );
    let mut extra = String::from(SENSORS);
    for (n, kind, frame, c) in [
        ("d_arm_x", "relative_position", "lower_arm", "x"),
        ("d_arm_y", "relative_position", "lower_arm", "y"),
        ("d_arm_z", "relative_position", "lower_arm", "z"),
        ("d_y", "relative_position", "ground", "y"),
        ("d_z", "relative_position", "ground", "z"),
        ("v_y", "relative_velocity", "ground", "y"),
        ("v_z", "relative_velocity", "ground", "z"),
        ("a_y", "relative_acceleration", "ground", "y"),
        ("a_z", "relative_acceleration", "ground", "z"),
    ] {
        extra.push_str(&pair(n, kind, frame, c));
    }
    extra.push_str(
        "[[outputs]]\nname = \"phi\"\ntype = \"angle\"\nbody = \"lower_arm\"\naxis = [1.0, 0.0, 0.0]\n\
         [[outputs]]\nname = \"phi_dot\"\ntype = \"angular_velocity\"\nbody = \"lower_arm\"\naxis = [1.0, 0.0, 0.0]\n\
         [[outputs]]\nname = \"aB_y\"\ntype = \"acceleration\"\nbody = \"upright\"\npoint = [0.0, 0.70, 0.17]\ncomponent = \"y\"\n\
         [[outputs]]\nname = \"aA_y\"\ntype = \"acceleration\"\nbody = \"lower_arm\"\npoint = [0.0, 0.25, 0.20]\ncomponent = \"y\"\n\
         [[outputs]]\nname = \"aB_z\"\ntype = \"acceleration\"\nbody = \"upright\"\npoint = [0.0, 0.70, 0.17]\ncomponent = \"z\"\n\
         [[outputs]]\nname = \"aA_z\"\ntype = \"acceleration\"\nbody = \"lower_arm\"\npoint = [0.0, 0.25, 0.20]\ncomponent = \"z\"\n",
    );
    extra.push_str(ALIGNMENT);
    format!("{text}\n{extra}")
}

/// Wheel alignment of the upright (outboard axis +y: the left wheel) and, for the hand
/// calculation, the same axes from relative positions: `a` from the wheel centre W to
/// W + (0, 1, 0), `s` from the lower to the upper ball joint.
const ALIGNMENT: &str = r#"
[[outputs]]
name = "camber_s"
type = "camber"
body = "upright"
axis = [0.0, 1.0, 0.0]
[[outputs]]
name = "toe_s"
type = "toe"
body = "upright"
axis = [0.0, 1.0, 0.0]
[[outputs]]
name = "caster_s"
type = "caster"
body = "upright"
axis = [0.0, 1.0, 0.0]
point1 = [0.0, 0.70, 0.17]
point2 = [0.0, 0.65, 0.48]
[[outputs]]
name = "kingpin_s"
type = "kingpin"
body = "upright"
axis = [0.0, 1.0, 0.0]
point1 = [0.0, 0.70, 0.17]
point2 = [0.0, 0.65, 0.48]
[[outputs]]
name = "ax"
type = "relative_position"
body1 = "upright"
point1 = [0.0, 0.75, 0.30]
body2 = "upright"
point2 = [0.0, 1.75, 0.30]
component = "x"
[[outputs]]
name = "ay"
type = "relative_position"
body1 = "upright"
point1 = [0.0, 0.75, 0.30]
body2 = "upright"
point2 = [0.0, 1.75, 0.30]
component = "y"
[[outputs]]
name = "az"
type = "relative_position"
body1 = "upright"
point1 = [0.0, 0.75, 0.30]
body2 = "upright"
point2 = [0.0, 1.75, 0.30]
component = "z"
[[outputs]]
name = "sx"
type = "relative_position"
body1 = "upright"
point1 = [0.0, 0.70, 0.17]
body2 = "upright"
point2 = [0.0, 0.65, 0.48]
component = "x"
[[outputs]]
name = "sy"
type = "relative_position"
body1 = "upright"
point1 = [0.0, 0.70, 0.17]
body2 = "upright"
point2 = [0.0, 0.65, 0.48]
component = "y"
[[outputs]]
name = "sz"
type = "relative_position"
body1 = "upright"
point1 = [0.0, 0.70, 0.17]
body2 = "upright"
point2 = [0.0, 0.65, 0.48]
component = "z"
"#;

#[test]
fn relative_kinematics_on_the_corner_match_hand_calculation() {
    // Both formulations: the joint formulation evaluates the outputs from the absolute
    // coordinates of its state, so this checks that state's kinematics as well.
    for formulation in ["absolute", "joint"] {
        let text = model(formulation);
        let spec = Arc::new(
            mbsfmu::mbs::load_model_str(
                &text,
                &Path::new(env!("CARGO_MANIFEST_DIR")).join("models/corner_sensors.toml"),
            )
            .unwrap(),
        );
        let table = Arc::new(VariableTable::from_spec(&spec));
        let mut sim = Simulation::new(
            spec.clone(),
            table.clone(),
            System::new(spec.clone()).unwrap(),
        );
        sim.setup_experiment(Some(1e-7), 0.0, None).unwrap();
        sim.initialize().unwrap();
        let idx = |n: &str| spec.outputs.iter().position(|o| o.name == n).unwrap();
        let y0 = sim.outputs().unwrap().to_vec();
        // At the design position: wheel centre W − chassis centre (0, 0.2, 0.6), chassis axes.
        assert!(
            (y0[idx("w_rel_chassis_y")] - 0.55).abs() < 1e-12,
            "{formulation}"
        );
        assert!(
            (y0[idx("w_rel_chassis_z")] + 0.30).abs() < 1e-12,
            "{formulation}"
        );
        // Design position: wheel upright, kingpin leaning inward by atan(0.05/0.31) = 9.2°
        // (the model file's comment), no caster (both ball joints at x = 0).
        assert!(y0[idx("camber_s")].abs() < 1e-12 && y0[idx("toe_s")].abs() < 1e-12);
        assert!(y0[idx("caster_s")].abs() < 1e-12);
        assert!((y0[idx("kingpin_s")] - (0.05f64 / 0.31).atan()).abs() < 1e-12);
        let mut moved = 0.0f64;
        let mut camber_moved = 0.0f64;
        for k in 1..=40 {
            sim.advance_to(0.005 * k as f64, None).unwrap();
            let y = sim.outputs().unwrap().to_vec();
            let o = |n: &str| y[idx(n)];
            let (phi, w) = (o("phi"), o("phi_dot"));
            moved = moved.max(phi.abs());
            let (dy, dz) = (
                0.45 * phi.cos() + 0.03 * phi.sin(),
                0.45 * phi.sin() - 0.03 * phi.cos(),
            );
            let t = 0.005 * k as f64;
            let close = |name: &str, want: f64, tol: f64| {
                assert!(
                    (o(name) - want).abs() < tol,
                    "{formulation} t = {t}: {name} = {} against {want}",
                    o(name)
                );
            };
            // The ball joint holds B on the arm: constant in the arm's axes (to the
            // integrator's constraint tolerance).
            // Alignment angles from the axes' components (camber: top outward positive;
            // toe-in positive; caster: top rearward; kingpin: top inboard).
            let (ax, ay, az) = (o("ax"), o("ay"), o("az"));
            let n = (ax * ax + ay * ay + az * az).sqrt();
            close("camber_s", (-az / n).asin(), 1e-12);
            close("toe_s", ax.atan2(ay), 1e-12);
            close("caster_s", (-o("sx")).atan2(o("sz")), 1e-12);
            close("kingpin_s", (-o("sy")).atan2(o("sz")), 1e-12);
            camber_moved = camber_moved.max(o("camber_s").abs());
            // The gallery's own `camber` output (the upright's angle about +x, positive top
            // inboard) is minus this camber while the toe stays small.
            close("camber_s", -o("camber"), 1e-3 * o("camber").abs() + 1e-9);
            close("d_arm_x", 0.0, 1e-6);
            close("d_arm_y", 0.45, 1e-6);
            close("d_arm_z", -0.03, 1e-6);
            close("d_y", dy, 1e-6);
            close("d_z", dz, 1e-6);
            // ω × d with ω = φ̇ x.
            close("v_y", -w * dz, 1e-5);
            close("v_z", w * dy, 1e-5);
            // Accelerations: the difference of the two points' own acceleration outputs.
            close("a_y", o("aB_y") - o("aA_y"), 1e-9 * (1.0 + o("aB_y").abs()));
            close("a_z", o("aB_z") - o("aA_z"), 1e-9 * (1.0 + o("aB_z").abs()));
        }
        assert!(
            moved > 0.01,
            "{formulation}: the arm must rotate ({moved} rad)"
        );
    }
}

#[test]
fn relative_output_errors_name_the_key() {
    let text = model("absolute").replace("frame = \"chassis\"", "frame = \"chasis\"");
    let e = mbsfmu::mbs::load_model_str(&text, Path::new("corner.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("chasis") && e.contains("w_rel_chassis_y"), "{e}");
    let text = model("absolute").replace(
        "type = \"relative_position\"\nbody1 = \"chassis\"",
        "type = \"relative_position\"\nbody = \"chassis\"",
    );
    let e = mbsfmu::mbs::load_model_str(&text, Path::new("corner.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("body"), "{e}");
}
