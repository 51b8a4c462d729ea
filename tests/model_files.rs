//! Every model in `models/` loads, and the resolved values are checked against hand
//! computation (masses, inertias, joint frames, initial joint angles).

use mbsfmu::mbs::spec::*;
use mbsfmu::mbs::{load_model, ModelSpec};
use nalgebra::{Matrix3, Vector3};
use std::f64::consts::PI;
use std::path::{Path, PathBuf};

fn models_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models")
}

fn load(name: &str) -> ModelSpec {
    let path = models_dir().join(name);
    load_model(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn c(s: Scalar, spec: &ModelSpec) -> f64 {
    s.eval(&spec.default_parameters())
}

/// Position and rotation of a reference at the initial configuration (frames at t0 with inputs
/// at their start values; the models here only use inputs, constants and ramps in frames).
fn pose(spec: &ModelSpec, b: BodyRef) -> (Vector3<f64>, Matrix3<f64>) {
    match b {
        BodyRef::Ground => (Vector3::zeros(), Matrix3::identity()),
        BodyRef::Frame(i) => {
            let p: Vec<f64> = spec.frames[i]
                .position
                .iter()
                .map(|m| match m {
                    Motion::Input(k) => spec.inputs[*k].start,
                    Motion::Constant(s) => c(*s, spec),
                    Motion::Ramp {
                        initial,
                        slope,
                        start,
                    } => {
                        let t0 = spec.experiment.start;
                        c(*initial, spec) + c(*slope, spec) * (t0 - c(*start, spec)).max(0.0)
                    }
                    other => panic!("frame motion {other:?} not expected in the gallery"),
                })
                .collect();
            (Vector3::new(p[0], p[1], p[2]), Matrix3::identity())
        }
        BodyRef::Body(i) => {
            let b = &spec.bodies[i];
            (b.position, b.orientation.to_rotation_matrix().into_inner())
        }
    }
}

fn global(spec: &ModelSpec, b: BodyRef, f: &LocalFrame) -> (Vector3<f64>, Matrix3<f64>) {
    let (r, a) = pose(spec, b);
    (r + a * f.origin, a * f.axes)
}

/// Angle of frame 2's x axis relative to frame 1's about frame 1's z (the revolute coordinate).
fn frame_angle(f1: &Matrix3<f64>, f2: &Matrix3<f64>) -> f64 {
    let x1 = f1.column(0);
    let z1 = f1.column(2);
    let x2 = f2.column(0);
    x1.cross(&x2).dot(&z1).atan2(x1.dot(&x2))
}

fn joint<'a>(spec: &'a ModelSpec, name: &str) -> &'a JointSpec {
    spec.joints
        .iter()
        .find(|j| j.name == name)
        .unwrap_or_else(|| panic!("no joint {name}"))
}

fn body<'a>(spec: &'a ModelSpec, name: &str) -> &'a BodySpec {
    spec.bodies
        .iter()
        .find(|j| j.name == name)
        .unwrap_or_else(|| panic!("no body {name}"))
}

fn names<T>(v: &[T], f: impl Fn(&T) -> &str) -> Vec<String> {
    v.iter().map(|x| f(x).to_string()).collect()
}

/// Frames are orthonormal and right-handed; joint frames coincide at the initial configuration
/// (distance joints: their ends are `length` apart).
fn check_frames(spec: &ModelSpec) {
    for j in &spec.joints {
        for f in [&j.frame1, &j.frame2] {
            assert!(
                (f.axes.transpose() * f.axes - Matrix3::identity()).norm() < 1e-12,
                "{}",
                j.name
            );
            assert!((f.axes.determinant() - 1.0).abs() < 1e-12, "{}", j.name);
        }
        let (p1, a1) = global(spec, j.body1, &j.frame1);
        let (p2, a2) = global(spec, j.body2, &j.frame2);
        if j.kind == JointKind::Distance {
            let l = c(j.length.expect("distance joint has a length"), spec);
            assert!(((p2 - p1).norm() - l).abs() < 1e-12, "{}", j.name);
        } else {
            assert!(
                (p2 - p1).norm() < 1e-12,
                "{}: origins differ {p1} {p2}",
                j.name
            );
            assert!(
                (a1.column(2) - a2.column(2)).norm() < 1e-12,
                "{}: z axes differ",
                j.name
            );
            if j.kind != JointKind::Revolute {
                assert!((a1 - a2).norm() < 1e-12, "{}: frames differ", j.name);
            }
        }
    }
}

#[test]
fn every_model_in_the_gallery_loads() {
    let mut n = 0;
    for entry in std::fs::read_dir(models_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) == Some("toml") {
            let spec = load_model(&path).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(spec.source_files[0], path);
            assert_eq!(
                format!("{}.toml", spec.name),
                path.file_name().unwrap().to_str().unwrap()
            );
            check_frames(&spec);
            n += 1;
        }
    }
    assert_eq!(
        n, 9,
        "the seven benchmark models, the suspension corner and the tire quarter car"
    );
}

#[test]
fn pendulum_chain() {
    let s = load("pendulum_chain.toml");
    assert_eq!(names(&s.inputs, |i| &i.name), ["susp_x", "susp_y"]);
    assert_eq!((s.inputs[0].start, s.inputs[1].start), (2.0, 0.0));
    assert_eq!(names(&s.outputs, |o| &o.name), ["tip_x", "tip_y"]);
    assert_eq!(s.bodies.len(), 16);
    assert!(s
        .bodies
        .iter()
        .all(|b| b.kind == BodyKind::Particle && c(b.mass, &s) == 1.0));
    assert_eq!(
        s.frames[0].position,
        [
            Motion::Input(0),
            Motion::Input(1),
            Motion::Constant(Scalar::Const(0.0))
        ]
    );
    let rods: Vec<_> = s
        .joints
        .iter()
        .filter(|j| j.kind == JointKind::Distance)
        .collect();
    let planes: Vec<_> = s
        .joints
        .iter()
        .filter(|j| j.kind == JointKind::Planar)
        .collect();
    assert_eq!((rods.len(), planes.len()), (16, 16));
    // The first rod hangs from the suspension frame at its origin.
    assert_eq!(rods[0].body1, BodyRef::Frame(0));
    assert!(rods[0].frame1.origin.norm() < 1e-15);
    assert!(rods.iter().all(|r| r.length == Some(Scalar::Const(1.0))));
    assert_eq!(s.bodies[15].position, Vector3::new(2.0, -16.0, 0.0));
    assert_eq!(
        s.outputs[1].quantity,
        OutputQuantity::Position {
            body: BodyRef::Body(15),
            point: Vector3::zeros(),
            component: 1
        }
    );
    assert_eq!(s.gravity.map(|g| c(g, &s)), [0.0, -9.81, 0.0]);
    assert_eq!(s.experiment.stop, 200.0);
}

#[test]
fn double_pendulum_bar2_frame_and_prestressed_spring() {
    let s = load("double_pendulum_stiff.toml");
    assert_eq!(
        names(&s.outputs, |o| &o.name),
        ["theta1", "theta2", "omega1"]
    );
    let b2 = body(&s, "bar2");
    // Paper 000: centre (3.4488887, -0.388228), velocity (3.8822857, 14.4888887) (its last
    // digits of ẏ are off: 10 * 1.5 cos(π/12) = 14.4888873).
    assert!((b2.position - Vector3::new(3.4488887, -0.388228, 0.0)).norm() < 1e-6);
    assert!((b2.velocity - Vector3::new(3.8822857, 14.4888887, 0.0)).norm() < 2e-6);
    let pin_velocity = b2.velocity
        + b2.angular_velocity
            .cross(&(Vector3::new(2.0, 0.0, 0.0) - b2.position));
    assert!(pin_velocity.norm() < 1e-12, "consistent with bar 1 at rest");
    assert!((b2.orientation.angle() - PI / 12.0).abs() < 1e-12); // 23π/12 ≡ −π/12
    assert_eq!(c(b2.inertia[2], &s), 0.225);
    let elbow = joint(&s, "elbow");
    // Bar 2's joint frame is its own body frame: θ measures bar 2 relative to bar 1.
    assert!((elbow.frame2.axes - Matrix3::identity()).norm() < 1e-12);
    assert!((elbow.frame2.origin - Vector3::new(-1.5, 0.0, 0.0)).norm() < 1e-12);
    assert!((elbow.frame1.origin - Vector3::new(1.0, 0.0, 0.0)).norm() < 1e-12);
    let (_, f1) = global(&s, elbow.body1, &elbow.frame1);
    let (_, f2) = global(&s, elbow.body2, &elbow.frame2);
    assert!(
        (frame_angle(&f1, &f2) + PI / 12.0).abs() < 1e-12,
        "initial elbow angle −π/12"
    );
    let shoulder = joint(&s, "shoulder");
    let (_, g1) = global(&s, shoulder.body1, &shoulder.frame1);
    let (_, g2) = global(&s, shoulder.body2, &shoulder.frame2);
    assert!(frame_angle(&g1, &g2).abs() < 1e-12);
    // The springs take the joints' frames; the stiff one starts π/12 from its free angle.
    match &s.forces[1].kind {
        ForceKind::RotationalSpringDamper {
            frame1,
            frame2,
            stiffness,
            damping,
            free_angle,
            ..
        } => {
            assert_eq!((frame1, frame2), (&elbow.frame1, &elbow.frame2));
            assert_eq!(
                (c(*stiffness, &s), c(*damping, &s), c(*free_angle, &s)),
                (3e5, 5e4, 0.0)
            );
        }
        k => panic!("{k:?}"),
    }
    match &s.forces[0].kind {
        ForceKind::RotationalSpringDamper {
            free_angle,
            stiffness,
            ..
        } => {
            assert_eq!(c(*free_angle, &s), 3.0 * PI / 2.0);
            assert_eq!(*stiffness, Scalar::Param(0));
        }
        k => panic!("{k:?}"),
    }
    // Stiffness and damping parameters are tunable by default.
    assert!(s.parameters.iter().all(|p| p.tunable));
}

#[test]
fn slider_crank() {
    let s = load("slider_crank.toml");
    assert_eq!(names(&s.inputs, |i| &i.name), ["crank_angle"]);
    assert_eq!(names(&s.outputs, |o| &o.name), ["slider_x", "crank_torque"]);
    let pivot = joint(&s, "crank_pivot");
    // initial_angle = 0: the joint coordinate is the crank's angle from +x although the crank
    // body is rotated by −π/2 (its long axis is body y).
    let (_, f1) = global(&s, pivot.body1, &pivot.frame1);
    let (_, f2) = global(&s, pivot.body2, &pivot.frame2);
    assert!(frame_angle(&f1, &f2).abs() < 1e-12);
    // Frame 2's x axis points along the crank (body y): crank direction = A_crank * e_y = +x.
    assert!((pivot.frame2.axes.column(0) - Vector3::y()).norm() < 1e-12);
    assert_eq!(s.drivers[0].target, DriverTarget::JointCoordinate(0));
    assert_eq!(s.drivers[0].motion, Motion::Input(0));
    assert_eq!(s.outputs[1].unit, "N.m");
    assert_eq!(
        s.outputs[1].quantity,
        OutputQuantity::DriverForce { driver: 0 }
    );
    match s.forces[0].kind {
        ForceKind::PrismaticFriction {
            joint,
            mu,
            v_reg,
            stiction,
        } => {
            assert_eq!(s.joints[joint].name, "slide");
            assert_eq!(mu, Scalar::Param(0));
            assert_eq!(v_reg, Scalar::Const(1e-3));
            assert_eq!(stiction, None);
        }
        ref k => panic!("{k:?}"),
    }
    assert!(s.parameters[0].tunable, "friction is tunable");
    assert_eq!(
        body(&s, "rod").inertia.map(|x| c(x, &s)),
        [4e-3, 4e-4, 4e-3, 0.0, 0.0, 0.0]
    );
    // Crank pin: crank and rod have the same orientation, so the pin angle starts at 0.
    let pin = joint(&s, "crank_pin");
    assert!((pin.frame1.axes - pin.frame2.axes).norm() < 1e-12);
}

#[test]
fn four_link_mass_properties_and_geometry() {
    let s = load("four_link.toml");
    assert_eq!(names(&s.inputs, |i| &i.name), ["rotor_angle"]);
    assert_eq!(
        names(&s.outputs, |o| &o.name),
        ["rocker_angle", "rotor_torque"]
    );
    let rho = 1500.0;
    let m_rotor = rho * PI * 4.0 * 0.1;
    let rotor = body(&s, "rotor");
    assert!((c(rotor.mass, &s) - m_rotor).abs() < 1e-9);
    assert!((c(rotor.mass, &s) - 1884.9555921538758).abs() < 1e-9);
    let i = rotor.inertia.map(|x| c(x, &s));
    assert!((i[2] - m_rotor * 4.0 / 2.0).abs() < 1e-9);
    assert!((i[0] - m_rotor * (3.0 * 4.0 + 0.01) / 12.0).abs() < 1e-9);
    let coupler = body(&s, "coupler");
    assert!((c(coupler.mass, &s) - 183.0).abs() < 1e-12);
    let ic = coupler.inertia.map(|x| c(x, &s));
    assert!((ic[0] - 0.305).abs() < 1e-12 && (ic[1] - 2269.9625).abs() < 1e-9 && ic[1] == ic[2]);
    let rocker = body(&s, "rocker");
    assert!((c(rocker.mass, &s) - 111.0).abs() < 1e-12);
    assert!((c(rocker.inertia[2], &s) - 506.6225).abs() < 1e-9);
    // Rocker end B from the two circle equations, independent of the file's expressions.
    let bx: f64 = (12.2f64.powi(2) - 7.4f64.powi(2) + 100.0 - 4.0) / 16.0;
    let by = (7.4f64.powi(2) - (bx - 10.0).powi(2)).sqrt();
    let pin = joint(&s, "rocker_pin");
    let (p, _) = global(&s, pin.body1, &pin.frame1);
    assert!((p - Vector3::new(bx, by, 0.0)).norm() < 1e-12);
    assert!(((p - Vector3::new(2.0, 0.0, 0.0)).norm() - 12.2).abs() < 1e-12);
    // The rocker pivot's coordinate starts at the rocker's angle from +x.
    let piv = joint(&s, "rocker_pivot");
    let (_, f1) = global(&s, piv.body1, &piv.frame1);
    let (_, f2) = global(&s, piv.body2, &piv.frame2);
    assert!((frame_angle(&f1, &f2) - by.atan2(bx - 10.0)).abs() < 1e-12);
    // The coupler's body x axis points from A to B.
    let ax = coupler.orientation * Vector3::x();
    assert!((ax - (Vector3::new(bx, by, 0.0) - Vector3::new(2.0, 0.0, 0.0)) / 12.2).norm() < 1e-12);
}

#[test]
fn quarter_car_rig() {
    let s = load("quarter_car_rig.toml");
    assert_eq!(names(&s.inputs, |i| &i.name), ["stamp_z"]);
    assert_eq!(
        names(&s.outputs, |o| &o.name),
        ["chassis_z", "wheel_z", "tire_force", "stamp_force"]
    );
    assert_eq!(s.initialization, Initialization::Static);
    assert_eq!(s.gravity.map(|g| c(g, &s)), [0.0, 0.0, -9.81]);
    let tire = &s.outputs[2];
    assert_eq!((tire.scale, tire.unit.as_str()), (-1.0, "N"));
    assert_eq!(s.outputs[3].unit, "N");
    match &s.forces[1].kind {
        ForceKind::SpringDamper {
            body1,
            point1,
            body2,
            point2,
            free_length,
            law,
            actuator,
        } => {
            assert_eq!((*body1, *body2), (BodyRef::Body(2), BodyRef::Body(1)));
            assert!(point1.norm() < 1e-15 && point2.norm() < 1e-15);
            assert_eq!(c(*free_length, &s), 0.3);
            assert_eq!(
                *law,
                ForceLaw::Linear {
                    stiffness: Scalar::Param(2),
                    damping: Scalar::Const(0.0),
                    preload: Scalar::Const(0.0)
                }
            );
            assert!(actuator.is_none());
        }
        k => panic!("{k:?}"),
    }
    // The wheel's guide is on the chassis: frame on the chassis 0.5 below its centre.
    let g = joint(&s, "wheel_guide");
    assert!((g.frame1.origin - Vector3::new(0.0, 0.0, -0.5)).norm() < 1e-12);
    assert!(s.parameters.iter().all(|p| p.tunable));
}

#[test]
fn bouncing_balls() {
    let s = load("bouncing_balls.toml");
    assert!(s.inputs.is_empty());
    assert_eq!(names(&s.outputs, |o| &o.name), ["y1", "y2", "energy"]);
    assert_eq!(s.outputs[2].quantity, OutputQuantity::Energy);
    assert_eq!(s.outputs[2].unit, "J");
    assert_eq!(body(&s, "ball1").position.y, 1.0);
    assert_eq!(body(&s, "ball2").position.y, 0.5);
    assert!((c(body(&s, "ball1").inertia[0], &s) - 0.004).abs() < 1e-15);
    match &s.forces[1].kind {
        ForceKind::Contact {
            geometry:
                ContactGeometry::SpherePlane {
                    sphere_body,
                    center,
                    radius,
                    plane_body,
                    normal,
                    ..
                },
            law,
            stiffness,
            damping,
            ..
        } => {
            assert_eq!(
                (*sphere_body, *plane_body),
                (BodyRef::Body(1), BodyRef::Ground)
            );
            assert!(center.norm() < 1e-15);
            assert_eq!(c(*radius, &s), 0.1);
            assert_eq!(*normal, Vector3::y());
            assert_eq!(
                (*law, c(*stiffness, &s), c(*damping, &s)),
                (ContactLaw::Linear, 1e5, 0.0)
            );
        }
        k => panic!("{k:?}"),
    }
}

#[test]
fn spherical_chain() {
    let s = load("spherical_chain.toml");
    assert_eq!(names(&s.outputs, |o| &o.name), ["tip_x", "tip_y", "tip_z"]);
    let g = Vector3::from(s.gravity.map(|g| c(g, &s)));
    assert!((g.norm() - 9.81).abs() < 1e-12);
    assert!((g.normalize() - Vector3::new(0.3, -1.0, 0.2).normalize()).norm() < 1e-12);
    assert_eq!(s.bodies.len(), 8);
    assert!(s.joints.iter().all(|j| j.kind == JointKind::Spherical));
    assert_eq!(
        s.outputs[0].quantity,
        OutputQuantity::Position {
            body: BodyRef::Body(7),
            point: Vector3::new(0.0, -0.5, 0.0),
            component: 0
        }
    );
    let b = body(&s, "bar3");
    assert_eq!(b.angular_velocity, Vector3::new(0.0, -1.0, 0.0));
    assert!((c(b.inertia[1], &s) - 0.005 / 12.0).abs() < 1e-15);
    assert!((c(b.inertia[0], &s) - 1.0025 / 12.0).abs() < 1e-15);
}

/// One element of every kind not in the gallery, with its resolved values checked by hand.
const FEATURES: &str = r#"
[model]
name = "features"
gravity = [0.0, "g_y", 0.0]

[[parameters]]
name = "g_y"
value = -9.81

[[parameters]]
name = "L"
value = 2.0
description = "used only inside expressions: fixed"

[[parameters]]
name = "k"
value = "1000*L"

[[parameters]]
name = "m"
value = 3.0

[[inputs]]
name = "force_in"
unit = "N"
start = 5.0

[[inputs]]
name = "base_z"
start = 0.25

[[bodies]]
name = "a"
mass = "m"
inertia = { xx = 2.0, yy = 3.0, zz = 4.0, xy = 0.5 }
position = [0.0, 0.0, 0.0]
orientation = { axis = [0.0, 0.0, 1.0], angle = 0.5 }

[[bodies]]
name = "b"
mass = 1.0
inertia = [1.0, 1.0, 1.0]
position = ["L", 0.0, 0.0]
orientation = [0.9950041652780258, 0.0, 0.0, 0.09983341664682815]

[[bodies]]
name = "c"
mass = 1.0
inertia = [1.0, 1.0, 1.0]
position = [0.0, 1.0, 0.0]
orientation = { axis = [1.0, 0.0, 0.0], angle = 0.3 }

[[frames]]
name = "base"
position = [{ type = "sine", amplitude = 0.1, frequency = 2.0 }, { type = "ramp", initial = 1.0, slope = 0.5, start = 1.0 }, "base_z"]

[[joints]]
name = "hinge_ab"
type = "revolute"
body1 = "a"
body2 = "b"
point = [1.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]

[[joints]]
name = "hinge_x"
type = "revolute"
body1 = "ground"
body2 = "c"
point = [0.0, 1.0, 0.0]
axis = [1.0, 0.0, 0.0]

[[joints]]
name = "cardan"
type = "universal"
body1 = "a"
body2 = "c"
point = [0.0, 0.5, 0.0]
axis = [0.0, 0.0, 1.0]
axis2 = [1.0, 1.0, 0.0]

[[joints]]
name = "explicit"
type = "cylindrical"
body1 = "base"
body2 = "b"
frame1 = { origin = [1.0, 2.0, 3.0], axis = [0.0, 1.0, 0.0], x_axis = [0.0, 0.0, 1.0] }
frame2 = { origin = [0.5, 0.0, 0.0] }

[[drivers]]
name = "lift"
body = "b"
point = [2.0, 1.0, 0.0]
component = "y"
motion = { type = "smooth_step", initial = 0.0, final = 0.2, start = 0.5, duration = 1.0 }

[[forces]]
name = "poly"
type = "spring_damper"
law = "polynomial"
body1 = "base"
body2 = "b"
point2 = [2.0, 0.0, 1.0]
coeffs = ["k", 0.0, 5e4]
damping = 3.0
actuator = { input = "force_in" }

[[forces]]
name = "torsion"
type = "rotational_spring_damper"
body1 = "a"
body2 = "b"
axis = [0.0, 0.0, 1.0]
stiffness = "k"
free_angle = 0.1

[[forces]]
name = "mount"
type = "bushing"
body1 = "a"
body2 = "c"
point = [0.0, 1.0, 0.0]
stiffness = [1.0, 2.0, 3.0]
rot_damping = [0.1, 0.2, 0.3]

[[forces]]
name = "bump"
type = "contact"
geometry = "sphere_plane"
sphere = "c"
center = [0.0, 1.0, 0.1]
radius = 0.05
plane = "a"
point = [0.0, 0.0, -1.0]
normal = [0.0, 0.0, 2.0]
law = "hertz"
stiffness = 1e9

[[outputs]]
name = "hinge_angle_deg"
type = "joint_coordinate"
joint = "hinge_ab"
scale = "180/pi"

[[outputs]]
name = "reaction_y"
type = "joint_force"
joint = "cardan"
component = "y"

[[outputs]]
name = "spring_len"
type = "element_length"
force = "poly"

[[outputs]]
name = "torsion_torque"
type = "element_force"
force = "torsion"
"#;

#[test]
fn every_element_kind_resolves() {
    let s = mbsfmu::mbs::load_model_str(FEATURES, Path::new("features.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    check_frames_except(&s, "explicit");
    let p = |n: &str| s.parameters.iter().find(|p| p.name == n).unwrap();
    // Parameter expressions use earlier defaults; tunability follows the uses.
    assert_eq!(p("k").value, 2000.0);
    assert!(p("g_y").tunable);
    // k = "1000*L" is computed from L (issue 14): it follows L and is not settable itself.
    assert!(p("k").calculated && !p("k").tunable);
    assert!(!p("L").tunable, "used only in expressions");
    assert!(!p("m").tunable, "a mass");
    assert_eq!(s.gravity[1], Scalar::Param(0));
    assert_eq!(s.bodies[0].mass, Scalar::Param(3));
    assert_eq!(s.bodies[1].position.x, 2.0);
    // Full inertia: xx yy zz xy xz yz.
    assert_eq!(
        s.bodies[0].inertia.map(|x| c(x, &s)),
        [2.0, 3.0, 4.0, 0.5, 0.0, 0.0]
    );

    // Revolute between two rotated bodies: θ0 = 0.2 − 0.5 (body b's quaternion is 0.2 about z).
    let j = joint(&s, "hinge_ab");
    let (_, f1) = global(&s, j.body1, &j.frame1);
    let (_, f2) = global(&s, j.body2, &j.frame2);
    assert!((frame_angle(&f1, &f2) - (0.2 - 0.5)).abs() < 1e-12);
    // Revolute about global x: θ0 = body c's rotation 0.3 about x, with z1 = z2 = global x.
    let j = joint(&s, "hinge_x");
    let (_, f1) = global(&s, j.body1, &j.frame1);
    let (_, f2) = global(&s, j.body2, &j.frame2);
    assert!((f1.column(2) - Vector3::x()).norm() < 1e-12);
    assert!((frame_angle(&f1, &f2) - 0.3).abs() < 1e-12);

    // Universal: frame1.z = axis, frame2.x = axis2 (normalized), both global at t0.
    let j = joint(&s, "cardan");
    let (_, f1) = global(&s, j.body1, &j.frame1);
    let (_, f2) = global(&s, j.body2, &j.frame2);
    assert!((f1.column(2) - Vector3::z()).norm() < 1e-12);
    assert!((f2.column(0) - Vector3::new(1.0, 1.0, 0.0).normalize()).norm() < 1e-12);

    // Explicit frames are taken as given (axes completed to a right-handed frame).
    let j = joint(&s, "explicit");
    assert_eq!(j.body1, BodyRef::Frame(0));
    assert_eq!(j.frame1.origin, Vector3::new(1.0, 2.0, 3.0));
    assert_eq!(
        j.frame1.axes,
        Matrix3::from_columns(&[Vector3::z(), Vector3::x(), Vector3::y()])
    );
    assert_eq!(j.frame2.axes, Matrix3::identity());

    // Motions.
    let base = &s.frames[0];
    assert_eq!(
        base.position[0],
        Motion::Sine {
            offset: 0.0.into(),
            amplitude: 0.1.into(),
            frequency: 2.0.into(),
            phase: 0.0.into()
        }
    );
    assert_eq!(
        base.position[1],
        Motion::Ramp {
            initial: 1.0.into(),
            slope: 0.5.into(),
            start: 1.0.into()
        }
    );
    assert_eq!(base.position[2], Motion::Input(1));
    let d = &s.drivers[0];
    // Point (2, 1, 0) on body b (at (2, 0, 0), rotated 0.2 about z) in body coordinates.
    let local = Vector3::new(0.2f64.sin(), 0.2f64.cos(), 0.0);
    match d.target {
        DriverTarget::PointComponent {
            body,
            point,
            component,
        } => {
            assert_eq!((body, component), (1, 1));
            assert!((point - local).norm() < 1e-12);
        }
        ref t => panic!("{t:?}"),
    }
    assert_eq!(
        d.motion,
        Motion::SmoothStep {
            initial: 0.0.into(),
            final_value: 0.2.into(),
            start: 0.5.into(),
            duration: 1.0.into()
        }
    );

    // Polynomial spring from the moving frame's origin; its point on the frame is relative to
    // the frame's position at t0: (sin 0 · 0.1, 1.0, 0.25).
    match &s.forces[0].kind {
        ForceKind::SpringDamper {
            body1,
            point1,
            body2,
            point2,
            free_length,
            law,
            actuator,
        } => {
            assert_eq!((*body1, *body2), (BodyRef::Frame(0), BodyRef::Body(1)));
            assert!(point1.norm() < 1e-15);
            let p2 = Vector3::new(2.0, 0.0, 1.0) - Vector3::new(2.0, 0.0, 0.0);
            let r = nalgebra::Rotation3::from_axis_angle(&Vector3::z_axis(), 0.2);
            assert!((point2 - r.inverse() * p2).norm() < 1e-12);
            let l0: f64 =
                (Vector3::<f64>::new(2.0, 0.0, 1.0) - Vector3::new(0.0, 1.0, 0.25)).norm();
            assert!((c(*free_length, &s) - l0).abs() < 1e-12);
            assert_eq!(
                *law,
                ForceLaw::Polynomial {
                    coeffs: vec![Scalar::Param(2), 0.0.into(), 5e4.into()],
                    damping: 3.0.into()
                }
            );
            assert_eq!(*actuator, Some(Motion::Input(0)));
        }
        k => panic!("{k:?}"),
    }
    // Rotational spring between bodies: frames like a revolute at body b's centre, angle
    // starting at the relative rotation −0.3.
    match &s.forces[1].kind {
        ForceKind::RotationalSpringDamper {
            body1,
            frame1,
            body2,
            frame2,
            stiffness,
            free_angle,
            ..
        } => {
            let (p1, a1) = global(&s, *body1, frame1);
            let (p2, a2) = global(&s, *body2, frame2);
            assert!((p1 - Vector3::new(2.0, 0.0, 0.0)).norm() < 1e-12 && (p2 - p1).norm() < 1e-12);
            assert!((frame_angle(&a1, &a2) + 0.3).abs() < 1e-12);
            assert_eq!((*stiffness, *free_angle), (Scalar::Param(2), 0.1.into()));
        }
        k => panic!("{k:?}"),
    }
    match &s.forces[2].kind {
        ForceKind::Bushing {
            frame1,
            frame2,
            body1,
            body2,
            stiffness,
            damping,
            rot_stiffness,
            rot_damping,
            ..
        } => {
            let (p1, a1) = global(&s, *body1, frame1);
            let (p2, a2) = global(&s, *body2, frame2);
            assert!((p1 - p2).norm() < 1e-12 && (a1 - a2).norm() < 1e-12);
            assert_eq!(*stiffness, [1.0.into(), 2.0.into(), 3.0.into()]);
            assert_eq!(*damping, [0.0.into(); 3]);
            assert_eq!(*rot_stiffness, [0.0.into(); 3]);
            assert_eq!(*rot_damping, [0.1.into(), 0.2.into(), 0.3.into()]);
        }
        k => panic!("{k:?}"),
    }
    // Contact: centre and plane in body coordinates of c and a, normal normalized.
    match &s.forces[3].kind {
        ForceKind::Contact {
            geometry:
                ContactGeometry::SpherePlane {
                    sphere_body,
                    center,
                    radius,
                    plane_body,
                    point,
                    normal,
                },
            law,
            ..
        } => {
            assert_eq!(
                (*sphere_body, *plane_body, *law),
                (BodyRef::Body(2), BodyRef::Body(0), ContactLaw::Hertz)
            );
            let rc = nalgebra::Rotation3::from_axis_angle(&Vector3::x_axis(), 0.3);
            assert!((center - rc.inverse() * Vector3::new(0.0, 0.0, 0.1)).norm() < 1e-12);
            assert_eq!(c(*radius, &s), 0.05);
            assert!((point - Vector3::new(0.0, 0.0, -1.0)).norm() < 1e-12); // a's z is global z
            assert!((normal - Vector3::z()).norm() < 1e-12);
        }
        k => panic!("{k:?}"),
    }
    // Outputs: units by kind, scale.
    let o = &s.outputs;
    assert!((o[0].scale - 180.0 / PI).abs() < 1e-12);
    assert_eq!(o[0].unit, "");
    assert_eq!(
        (o[1].unit.as_str(), o[1].quantity.clone()),
        (
            "N",
            OutputQuantity::JointForce {
                joint: 2,
                component: 1,
                axes: Default::default(),
            }
        )
    );
    assert_eq!(o[2].unit, "m");
    assert_eq!(o[3].unit, "N.m");
}

fn check_frames_except(spec: &ModelSpec, skip: &str) {
    let mut s = spec.clone();
    s.joints.retain(|j| j.name != skip);
    check_frames(&s);
}

/// Every `.toml` model under `dir` (recursively; not Cargo manifests).
fn toml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            toml_files(&path, out);
        } else if path.extension().and_then(|e| e.to_str()) == Some("toml")
            && path.file_name().unwrap() != "Cargo.toml"
        {
            out.push(path);
        }
    }
}

/// The loader reads models with `toml` 0.9 and a file 0.9 cannot read again with 0.8 (whose
/// spans give the errors' elements); 0.8 alone is `load_model_general`. Both must give the
/// same model, warnings (with their locations) included, for every model file in the
/// repository, with and without parameter values set, and the same error for the ones that do
/// not load (the error catalogue, tests/model_errors.rs, checks the errors' locations).
#[test]
fn fast_and_general_readers_give_the_same_model() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["models", "tests", "benches"] {
        toml_files(&root.join(dir), &mut files);
    }
    let mut loaded = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let general = mbsfmu::mbs::load_model_general(&text, path, &[]);
        let fast = mbsfmu::mbs::load_model_str(&text, path);
        match (&general, &fast) {
            (Ok(g), Ok(f)) => {
                assert!(g == f, "{}: the two readers differ", path.display());
                loaded += 1;
                // Every parameter at 1.25 times its value: the re-resolution at initialization.
                let values: Vec<f64> = g.parameters.iter().map(|p| 1.25 * p.value).collect();
                let g = mbsfmu::mbs::load_model_general(&text, path, &values);
                let f = mbsfmu::mbs::load_model_with_parameters(&text, path, &values);
                match (g, f) {
                    (Ok(g), Ok(f)) => assert!(g == f, "{}: differ with parameters", path.display()),
                    (Err(g), Err(f)) => assert_eq!(g.to_string(), f.to_string()),
                    (g, f) => panic!("{}: {:?} against {:?}", path.display(), g.err(), f.err()),
                }
            }
            (Err(g), Err(f)) => assert_eq!(g.to_string(), f.to_string(), "{}", path.display()),
            (g, f) => panic!(
                "{}: general {:?}, fast {:?}",
                path.display(),
                g.as_ref().err(),
                f.as_ref().err()
            ),
        }
    }
    assert!(loaded >= 15, "only {loaded} of {} files load", files.len());
}

/// The warnings of a model that loads carry the location of the element they name: the line of
/// an unheld body's `[[bodies]]` header, counted here by hand, through the fast reader.
#[test]
fn warning_locations_through_the_fast_reader() {
    let path = models_dir().join("double_pendulum_stiff.toml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    let line = text.lines().count() + 2;
    text.push_str("\n[[bodies]]\nname = \"loose\"\nmass = 1.0\ninertia = [1.0, 1.0, 1.0]\nposition = [0.0, 1.0, 0.0]\n");
    let spec = mbsfmu::mbs::load_model_str(&text, &path).unwrap();
    let want = format!("{}:{line}:1: bodies[2] \"loose\": no joint", path.display());
    assert!(
        spec.warnings.iter().any(|w| w.starts_with(&want)),
        "{want} not among {:?}",
        spec.warnings
    );
}

/// The fast reader reads TOML 1.1 (docs/model-format.md): an inline table over two lines with
/// a trailing comma gives the model its TOML 1.0 spelling gives through the general reader.
#[test]
fn toml_1_1_inline_table_over_lines_reads_as_its_1_0_spelling() {
    let path = models_dir().join("double_pendulum_stiff.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let one_line = "orientation = { axis = [0.0, 0.0, 1.0], angle = \"23*pi/12\" }";
    assert!(text.contains(one_line));
    let over_lines = "orientation = { axis = [0.0, 0.0, 1.0],\n  angle = \"23*pi/12\", }";
    // Same byte offsets after the edit would not hold: compare models without the text.
    let mut want = mbsfmu::mbs::load_model_general(&text, &path, &[]).unwrap();
    let mut got = mbsfmu::mbs::load_model_str(&text.replacen(one_line, over_lines, 1), &path)
        .unwrap_or_else(|e| panic!("{e}"));
    want.source_text = None;
    got.source_text = None;
    assert!(want == got);
}

/// `mbsfmu export` packs the resolved model (`resources/resolved_model.bin`) so that an FMU
/// instantiation need not parse the TOML. Read where the FMU is unpacked (another folder than
/// the one it was written from), it must be the model that resolving the packed `model.toml`
/// there gives (paths, warnings and all), for every model file of the repository that packs;
/// and the token it carries is the one of the packed files. A damaged or truncated file, or
/// one of another build, is refused, never misread.
#[test]
fn the_packed_resolved_model_is_the_model_resolved_where_the_fmu_is_unpacked() {
    use mbsfmu::mbs::resolved;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["models", "tests", "benches"] {
        toml_files(&root.join(dir), &mut files);
    }
    let unpacked = std::env::temp_dir().join(format!("mbsfmu-resolved-{}", std::process::id()));
    // A model with a warning (a body nothing holds): warnings carry the model file's path.
    let source = unpacked.with_extension("src");
    std::fs::create_dir_all(&source).unwrap();
    let mut warned =
        std::fs::read_to_string(models_dir().join("double_pendulum_stiff.toml")).unwrap();
    warned.push_str("\n[[bodies]]\nname = \"loose\"\nmass = 1.0\ninertia = [1.0, 1.0, 1.0]\nposition = [0.0, 1.0, 0.0]\n");
    std::fs::write(source.join("warned.toml"), warned).unwrap();
    files.push(source.join("warned.toml"));
    let (mut packed, mut with_tables, mut with_warnings) = (0, 0, 0);
    for path in &files {
        let Ok(spec) = load_model(path) else { continue };
        // Files that reference tables outside their folder do not pack (export refuses them).
        let Ok((resources, token)) =
            mbsfmu::description::package::packed_resources(&spec, path, None)
        else {
            continue;
        };
        let res = unpacked.join("resources");
        let _ = std::fs::remove_dir_all(&unpacked);
        for (p, bytes) in &resources {
            let f = res.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, bytes).unwrap();
        }
        let model = res.join("model.toml");
        let text = std::fs::read_to_string(&model).unwrap();
        let direct = mbsfmu::mbs::load_model_str(&text, &model).unwrap();
        let bin = &resources
            .iter()
            .find(|(p, _)| p == resolved::FILE_NAME)
            .unwrap_or_else(|| panic!("{}: no resolved model packed", path.display()))
            .1;
        let (mut read, read_token) = resolved::decode(bin, &model)
            .unwrap_or_else(|| panic!("{}: the resolved model does not read", path.display()));
        // The file leaves the table files' contents out: the FMU reads them at instantiation
        // (and its token from those bytes).
        assert!(
            read.source_contents.is_empty(),
            "{}: contents in the file",
            path.display()
        );
        read.read_source_contents().unwrap();
        assert!(
            read == direct,
            "{}: the resolved model differs",
            path.display()
        );
        assert_eq!(read_token, token, "{}", path.display());
        let now = mbsfmu::description::token::model_token_of(&model, &read.source_files).unwrap();
        assert_eq!(
            now,
            token,
            "{}: token of the unpacked files",
            path.display()
        );
        assert_eq!(
            mbsfmu::description::token::model_token_of_spec(text.as_bytes(), &read),
            Ok(token.clone()),
            "{}: token of the contents read",
            path.display()
        );
        packed += 1;
        with_tables += usize::from(direct.source_files.len() > 1);
        with_warnings += usize::from(!direct.warnings.is_empty());
        // Every truncation and a damaged byte at every position are refused (a damaged
        // payload could otherwise decode into another model).
        if packed == 1 {
            for n in 0..bin.len() {
                assert!(resolved::decode(&bin[..n], &model).is_none());
            }
            for i in 0..bin.len() {
                let mut b = bin.clone();
                b[i] ^= 0x5a;
                assert!(
                    resolved::decode(&b, &model).is_none(),
                    "a damaged byte {i} is read"
                );
            }
            // A sound file written by another build (its layout of the model may differ).
            let mut body = bin[12..].to_vec();
            body[4] ^= 0x01;
            let mut other = bin[..8].to_vec();
            other.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
            other.extend_from_slice(&body);
            assert!(
                resolved::decode(&other, &model).is_none(),
                "another build's file is read"
            );
            let mut same = bin[..8].to_vec();
            same.extend_from_slice(&crc32fast::hash(&bin[12..]).to_le_bytes());
            same.extend_from_slice(&bin[12..]);
            assert!(
                resolved::decode(&same, &model).is_some(),
                "the test's layout is wrong"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&unpacked);
    let _ = std::fs::remove_dir_all(&source);
    assert!(packed >= 15, "only {packed} of {} files pack", files.len());
    assert!(
        with_tables >= 3,
        "only {with_tables} models with table files"
    );
    assert!(with_warnings >= 1, "no model with warnings");
}

/// The experiment's tolerance (what importers pass, overriding `solver.rtol`) follows a
/// `[solver] rtol` the file writes when the file gives no tolerance of its own: before, the
/// unwritten default 1e-4 overrode it in every importer and in `mbsfmu simulate`.
#[test]
fn experiment_tolerance_follows_a_written_solver_rtol() {
    let base = "[model]\nname = \"m\"\ngravity = [0.0, 0.0, -9.81]\n\n[[bodies]]\nname = \"b\"\nmass = 1.0\ninertia = [1.0, 1.0, 1.0]\nposition = [0.0, 0.0, 0.0]\n";
    let load = |extra: &str| {
        mbsfmu::mbs::load_model_str(&format!("{base}\n{extra}"), Path::new("m.toml")).unwrap()
    };
    let s = load("[solver]\nrtol = 1e-8\n");
    assert_eq!((s.experiment.tolerance, s.solver.rtol), (1e-8, 1e-8));
    let s = load("[solver]\nrtol = 1e-8\n\n[experiment]\ntolerance = 1e-5\n");
    assert_eq!((s.experiment.tolerance, s.solver.rtol), (1e-5, 1e-8));
    let s = load("[experiment]\ntolerance = 1e-5\n");
    assert_eq!((s.experiment.tolerance, s.solver.rtol), (1e-5, 1e-4));
    let s = load("");
    assert_eq!((s.experiment.tolerance, s.solver.rtol), (1e-4, 1e-4));
}
