//! Sensor outputs (issue 16): relative position, velocity and acceleration between two
//! markers resolved in a chosen body's axes, on the suspension corner
//! (models/suspension_corner.toml), against hand calculation. The lower ball joint B =
//! (0, 0.70, 0.17) and the lower arm's inner pivot A = (0, 0.25, 0.20) are both points of the
//! lower arm, which only rotates about x (angle φ): so `B − A` in the arm's axes stays
//! (0, 0.45, −0.03) for all time, in ground axes it is `R_x(φ) (0, 0.45, −0.03)`, its velocity
//! `ω × d` with `ω = φ̇ x`. Run from the design position (the static solve off), in both
//! formulations.

mod common;
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
            common::cosim::advance(&mut sim, 0.005 * k as f64);
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

// ----- joint reactions in a chosen frame, a rod's axial force ------------------------------

/// A rigid pendulum (m = 3 kg, centre l = 0.6 m below the pivot, I_zz = 0.04 kg m² about the
/// centre, gravity −y) on a revolute joint whose frames have x along global +y at the start
/// (`x_axis = [0, 1, 0]`), hanging at rest position with θ̇₀ = 4 rad/s; reaction outputs in
/// frame 1, frame 2, the bob's axes and ground axes.
fn pendulum(formulation: &str) -> String {
    let mut text = format!(
        r#"
[model]
name = "reaction_pendulum"
gravity = [0.0, -9.81, 0.0]
formulation = "{formulation}"
[[bodies]]
name = "bob"
mass = 3.0
inertia = [0.04, 0.04, 0.04]
position = [0.0, -0.6, 0.0]
velocity = [2.4, 0.0, 0.0]
angular_velocity = [0.0, 0.0, 4.0]
[[joints]]
name = "pivot"
type = "revolute"
body1 = "ground"
body2 = "bob"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]
x_axis = [0.0, 1.0, 0.0]
[[outputs]]
name = "theta"
type = "joint_coordinate"
joint = "pivot"
[[outputs]]
name = "omega"
type = "joint_rate"
joint = "pivot"
"#
    );
    for frame in ["", "frame1", "frame2", "bob", "ground"] {
        for c in ["x", "y", "z"] {
            let key = if frame.is_empty() {
                String::new()
            } else {
                format!("frame = \"{frame}\"\n")
            };
            text.push_str(&format!(
                "[[outputs]]\nname = \"f_{frame}_{c}\"\ntype = \"joint_force\"\njoint = \"pivot\"\ncomponent = \"{c}\"\n{key}"
            ));
        }
    }
    text.push_str("[[outputs]]\nname = \"n2_z\"\ntype = \"joint_torque\"\njoint = \"pivot\"\ncomponent = \"z\"\nframe = \"frame2\"\n");
    text
}

/// Hand calculation: with `e_r` from the pivot to the centre and `e_t` along increasing θ, the
/// reaction on the bob is `F = m a − m g⃗`, `a = −θ̇² l e_r + θ̈ l e_t`, `θ̈ = −m g l sin θ / I_O`:
/// `F·(−e_r) = m (g cos θ + θ̇² l)` (the rod's pull), `F·e_t = m g sin θ · I_zz / I_O`. At the
/// bottom at the start: `m (g + θ̇₀² l)` = 58.23 N along the rod. Frame 2's x axis is `−e_r`,
/// its y axis `−e_t`; the bob's axes are x = e_t, y = −e_r; frame 1 (fixed) has x = global y,
/// y = −global x, so frame-2 components are `R_z(θ)ᵀ` of the frame-1 ones; `frame = "ground"`
/// gives global components. Both formulations, 2 s.
#[test]
fn joint_reactions_in_frame_1_frame_2_and_body_axes_against_hand_calculation() {
    let (m, l, g): (f64, f64, f64) = (3.0, 0.6, 9.81);
    let i_o = 0.04 + m * l * l;
    for formulation in ["absolute", "joint"] {
        let spec = Arc::new(
            mbsfmu::mbs::load_model_str(&pendulum(formulation), Path::new("pendulum.toml"))
                .unwrap(),
        );
        let table = Arc::new(VariableTable::from_spec(&spec));
        let mut sim = Simulation::new(
            spec.clone(),
            table.clone(),
            System::new(spec.clone()).unwrap(),
        );
        sim.setup_experiment(Some(1e-9), 0.0, None).unwrap();
        sim.initialize().unwrap();
        let names: Vec<String> = spec.outputs.iter().map(|o| o.name.clone()).collect();
        let at = |o: &[f64], n: &str| o[names.iter().position(|x| x == n).unwrap()];
        let o = sim.outputs().unwrap().to_vec();
        let bottom = m * (g + 16.0 * l);
        assert!((bottom - 58.23).abs() < 1e-12);
        assert!(
            (at(&o, "f_frame2_x") - bottom).abs() < 1e-8,
            "{formulation}: pull at the bottom {} against {bottom}",
            at(&o, "f_frame2_x")
        );
        let mut swing = 0.0f64;
        for k in 0..=200 {
            if k > 0 {
                common::cosim::advance(&mut sim, 0.01 * k as f64);
            }
            let o = sim.outputs().unwrap().to_vec();
            let (th, om) = (at(&o, "theta"), at(&o, "omega"));
            swing = swing.max(th.abs());
            let pull = m * (g * th.cos() + om * om * l);
            let tangential = m * g * th.sin() * 0.04 / i_o;
            let (er, et) = ([th.sin(), -th.cos()], [th.cos(), th.sin()]);
            // Global F = −pull e_r + tangential e_t.
            let fg = [
                -pull * er[0] + tangential * et[0],
                -pull * er[1] + tangential * et[1],
            ];
            let want = [
                ("f_frame2_x", pull),
                ("f_frame2_y", -tangential),
                ("f_bob_x", tangential),
                ("f_bob_y", pull),
                ("f_ground_x", fg[0]),
                ("f_ground_y", fg[1]),
                ("f_frame1_x", fg[1]),
                ("f_frame1_y", -fg[0]),
                ("f__x", fg[1]),
                ("f__y", -fg[0]),
            ];
            let tol = 1e-6 * bottom;
            for (n, w) in want {
                assert!(
                    (at(&o, n) - w).abs() < tol,
                    "{formulation} t = {}: {n} = {} against {w}",
                    0.01 * k as f64,
                    at(&o, n)
                );
            }
            // Frame 2 = R_z(θ)ᵀ frame 1 (to the constraint drift of the absolute formulation).
            let (c, s) = (th.cos(), th.sin());
            let (f1x, f1y) = (at(&o, "f_frame1_x"), at(&o, "f_frame1_y"));
            assert!((at(&o, "f_frame2_x") - (c * f1x + s * f1y)).abs() < tol);
            assert!((at(&o, "f_frame2_y") - (-s * f1x + c * f1y)).abs() < tol);
            for n in ["f_frame1_z", "f_frame2_z", "f_bob_z", "f_ground_z", "n2_z"] {
                assert!(at(&o, n).abs() < tol, "{n} = {}", at(&o, n));
            }
        }
        assert!(swing > 0.9, "{formulation}: swings to {swing}");
    }
}

/// A 3-D check of the frame choice: a spinning top-like body on a spherical joint, tilted,
/// after 0.3 s of motion. The frame-2 (and body-axes) components are `A₂ᵀ` of the global ones,
/// with `A₂` the body's rotation from its Euler parameters times frame 2's axes in body
/// coordinates; the frame-1 ones `A₁ᵀ` with the fixed frame 1.
#[test]
fn joint_reactions_in_frame_2_are_the_rotated_frame_1_reactions_in_3d() {
    use mbsfmu::integrate::any::AnyIntegrator;
    use mbsfmu::integrate::{Integrator, Mechanical, Method, Settings};
    use nalgebra::{Matrix3, Quaternion, UnitQuaternion, Vector3};
    let mut text = String::from(
        r#"
[model]
name = "top"
gravity = [0.0, 0.0, -9.81]
[[bodies]]
name = "top"
mass = 2.0
inertia = [0.05, 0.07, 0.02]
position = [0.1, 0.05, 0.3]
orientation = { axis = [1.0, 2.0, 0.5], angle = 0.7 }
angular_velocity = [0.5, -1.0, 12.0]
[[joints]]
name = "tip"
type = "spherical"
body1 = "ground"
body2 = "top"
point = [0.0, 0.0, 0.0]
axis = [0.3, 0.2, 1.0]
"#,
    );
    for frame in ["frame1", "frame2", "top", "ground"] {
        for c in ["x", "y", "z"] {
            text.push_str(&format!(
                "[[outputs]]\nname = \"f_{frame}_{c}\"\ntype = \"joint_force\"\njoint = \"tip\"\ncomponent = \"{c}\"\nframe = \"{frame}\"\n"
            ));
        }
    }
    let mut spec = mbsfmu::mbs::load_model_str(&text, Path::new("top.toml")).unwrap();
    // Absolute coordinates: the top's orientation is read off the state.
    spec.formulation = mbsfmu::mbs::spec::Formulation::Absolute;
    let spec = Arc::new(spec);
    let mut sys = System::new(spec.clone()).unwrap();
    let x0 = sys.initial_state(0.0).unwrap();
    let settings = Settings {
        method: Method::Sdirk,
        rtol: 1e-8,
        atol: 1e-10,
        ..Settings::default()
    };
    let mut integ = AnyIntegrator::new(settings, sys.n_q(), sys.n_c()).unwrap();
    integ.initialize(&mut sys, &x0).unwrap();
    while integ.step(&mut sys, 0.3).unwrap() < 0.3 {}
    let x = Integrator::<System>::state(&integ).clone();
    let mut o = vec![0.0; sys.n_outputs()];
    sys.evaluate_outputs(&x, &mut o).unwrap();
    let v = |k: usize| Vector3::new(o[3 * k], o[3 * k + 1], o[3 * k + 2]);
    let (f1, f2, fb, fg) = (v(0), v(1), v(2), v(3));
    let q = &x.q;
    let a = UnitQuaternion::from_quaternion(Quaternion::new(q[3], q[4], q[5], q[6]))
        .to_rotation_matrix()
        .into_inner();
    let js = &spec.joints[0];
    let a1: Matrix3<f64> = js.frame1.axes;
    let a2 = a * js.frame2.axes;
    let scale = fg.norm();
    assert!(scale > 1.0, "{fg}");
    for (got, want, what) in [
        (f1, a1.transpose() * fg, "frame1"),
        (f2, a2.transpose() * fg, "frame2"),
        (fb, a.transpose() * fg, "body"),
        (f2, a2.transpose() * a1 * f1, "R(frame1→frame2) f1"),
    ] {
        assert!(
            (got - want).norm() < 1e-12 * scale,
            "{what}: {got} against {want}"
        );
    }
    assert!((f2 - f1).norm() > 1e-3 * scale, "the frames differ here");
}

/// The axial force of a rod (a `distance` joint, `component = "axial"`, tension positive): a
/// particle (1.5 kg) swinging in 3-D on a 0.8 m rod from a ground point. Radial balance:
/// `T = m (|v|²/l + g⃗·e_r)` with `e_r` from the pivot to the particle, from the particle's
/// own position and velocity outputs; at the start (straight below, |v|² = 5) `m (5/0.8 + g)`.
/// Both formulations, 2 s.
#[test]
fn rod_axial_force_is_the_radial_balance() {
    let (m, l, g) = (1.5, 0.8, 9.81);
    for formulation in ["absolute", "joint"] {
        let mut text = format!(
            r#"
[model]
name = "rod"
gravity = [0.0, -9.81, 0.0]
formulation = "{formulation}"
[[bodies]]
name = "ball"
type = "particle"
mass = {m}
position = [0.0, -0.8, 0.0]
velocity = [2.0, 0.0, 1.0]
[[joints]]
name = "rod"
type = "distance"
body1 = "ground"
point1 = [0.0, 0.0, 0.0]
body2 = "ball"
point2 = [0.0, -0.8, 0.0]
[[outputs]]
name = "tension"
type = "joint_force"
joint = "rod"
component = "axial"
"#
        );
        for kind in ["position", "velocity"] {
            for c in ["x", "y", "z"] {
                text.push_str(&format!(
                    "[[outputs]]\nname = \"{kind}_{c}\"\ntype = \"{kind}\"\nbody = \"ball\"\ncomponent = \"{c}\"\n"
                ));
            }
        }
        let spec = Arc::new(mbsfmu::mbs::load_model_str(&text, Path::new("rod.toml")).unwrap());
        let table = Arc::new(VariableTable::from_spec(&spec));
        let mut sim = Simulation::new(
            spec.clone(),
            table.clone(),
            System::new(spec.clone()).unwrap(),
        );
        sim.setup_experiment(Some(1e-9), 0.0, None).unwrap();
        sim.initialize().unwrap();
        let start = sim.outputs().unwrap()[0];
        assert!(
            (start - m * (5.0 / l + g)).abs() < 1e-8,
            "{formulation}: {start}"
        );
        for k in 1..=200 {
            common::cosim::advance(&mut sim, 0.01 * k as f64);
            let o = sim.outputs().unwrap().to_vec();
            let (r, v) = (&o[1..4], &o[4..7]);
            let v2 = v.iter().map(|x| x * x).sum::<f64>();
            let want = m * (v2 / l + (-g) * r[1] / l);
            assert!(
                (o[0] - want).abs() < 1e-5 * (1.0 + want.abs()),
                "{formulation} t = {}: tension {} against {want}",
                0.01 * k as f64,
                o[0]
            );
        }
    }
}

/// Relative outputs resolved along a joint's frames (`joint` + `frame`): the reaction
/// pendulum's centre relative to the pivot. Along frame 2 (x = −e_r, y = −e_t, turning with
/// the bob) the position is `(−l, 0)` and the velocity `(0, −l θ̇)`; along frame 1 (fixed,
/// x = global y, y = −global x) the position is `(−l cos θ, −l sin θ)`. Both formulations.
#[test]
fn relative_outputs_along_joint_frames() {
    let l = 0.6;
    for formulation in ["absolute", "joint"] {
        let mut text = pendulum(formulation);
        for (name, kind, frame, c) in [
            ("p2x", "relative_position", "frame2", "x"),
            ("p2y", "relative_position", "frame2", "y"),
            ("v2x", "relative_velocity", "frame2", "x"),
            ("v2y", "relative_velocity", "frame2", "y"),
            ("p1x", "relative_position", "frame1", "x"),
            ("p1y", "relative_position", "frame1", "y"),
        ] {
            text.push_str(&format!(
                "[[outputs]]\nname = \"{name}\"\ntype = \"{kind}\"\nbody1 = \"ground\"\nbody2 = \"bob\"\njoint = \"pivot\"\nframe = \"{frame}\"\ncomponent = \"{c}\"\n"
            ));
        }
        let spec =
            Arc::new(mbsfmu::mbs::load_model_str(&text, Path::new("pendulum.toml")).unwrap());
        let table = Arc::new(VariableTable::from_spec(&spec));
        let mut sim = Simulation::new(
            spec.clone(),
            table.clone(),
            System::new(spec.clone()).unwrap(),
        );
        sim.setup_experiment(Some(1e-9), 0.0, None).unwrap();
        sim.initialize().unwrap();
        let names: Vec<String> = spec.outputs.iter().map(|o| o.name.clone()).collect();
        let at = |o: &[f64], n: &str| o[names.iter().position(|x| x == n).unwrap()];
        for k in 1..=100 {
            common::cosim::advance(&mut sim, 0.01 * k as f64);
            let o = sim.outputs().unwrap().to_vec();
            let (th, om) = (at(&o, "theta"), at(&o, "omega"));
            for (n, want) in [
                ("p2x", -l),
                ("p2y", 0.0),
                ("v2x", 0.0),
                ("v2y", -l * om),
                ("p1x", -l * th.cos()),
                ("p1y", -l * th.sin()),
            ] {
                assert!(
                    (at(&o, n) - want).abs() < 1e-6,
                    "{formulation}: {n} = {} against {want}",
                    at(&o, n)
                );
            }
        }
    }
}

/// A joint listed with body 2 = ground: the reaction is the one on ground about frame 2's
/// origin. A 2 kg block slides at 1 m/s along a horizontal prismatic guide (body1 = the block,
/// body2 = ground, frame 2 at the origin), its centre 0.4 m beside the guide, gravity −z.
/// The guide holds the block's weight and the moment of its offset: about the origin, the
/// guide's reaction on the block balances gravity at `r = (t, 0.4, 0)`, so it is
/// `r × (0, 0, m g) = (0.4 m g, −t m g, 0)`; on ground, its negative `(−0.4 m g, t m g, 0)`,
/// and the force `(0, 0, −m g)`.
/// Before, the torque was taken about frame 1's origin, which travels with the block, and
/// `M_y` read 0 at every time.
#[test]
fn the_reaction_on_ground_of_a_reversed_prismatic_joint_is_about_frame_2() {
    let (m, g) = (2.0f64, 9.81f64);
    let text = r#"
[model]
name = "rev_prism"
gravity = [0.0, 0.0, -9.81]
[[bodies]]
name = "b"
mass = 2.0
inertia = [0.1, 0.2, 0.25]
position = [0.0, 0.4, 0.0]
velocity = [1.0, 0.0, 0.0]
[[joints]]
name = "j"
type = "prismatic"
body1 = "b"
body2 = "ground"
point = [0.0, 0.0, 0.0]
axis = [1.0, 0.0, 0.0]
[[outputs]]
name = "Fz"
type = "joint_force"
joint = "j"
frame = "ground"
component = "z"
[[outputs]]
name = "Mx"
type = "joint_torque"
joint = "j"
frame = "ground"
component = "x"
[[outputs]]
name = "My"
type = "joint_torque"
joint = "j"
frame = "ground"
component = "y"
[[outputs]]
name = "Mz"
type = "joint_torque"
joint = "j"
frame = "ground"
component = "z"
"#;
    for formulation in ["absolute", "joint"] {
        let spec = common::cosim::spec_in(text, formulation, "rev_prism.toml");
        let (mut sim, _) =
            common::cosim::started(&spec, mbsfmu::integrate::Method::Bdf, Some(1e-9));
        for k in 0..=4 {
            let t = 0.25 * k as f64;
            if k > 0 {
                common::cosim::advance(&mut sim, t);
            }
            let o = sim.outputs().unwrap().to_vec();
            // On ground: the block pushes down with m g.
            let want = [-m * g, -0.4 * m * g, t * m * g, 0.0];
            for ((n, got), w) in ["Fz", "Mx", "My", "Mz"].iter().zip(&o).zip(want) {
                assert!(
                    (got - w).abs() < 1e-6 * m * g,
                    "{formulation} t = {t}: {n} = {got} against {w}"
                );
            }
        }
    }
}
