//! The engine's dynamics against independent hand-written equations.

use mbsfmu::integrate::system::Mechanical;
use mbsfmu::integrate::test_systems::{saddle_point_solve, CartesianChain};
use mbsfmu::mbs::spec::*;
use mbsfmu::mbs::system::System;
use nalgebra::{UnitQuaternion, Vector3};
use std::f64::consts::PI;
use std::sync::Arc;

fn c(x: f64) -> Scalar {
    Scalar::Const(x)
}

/// Paper 003's pendulum chain as an engine model: particles, massless rods (distance joints),
/// a planar joint per particle, the suspension as a moving frame with built-in sine motions.
pub fn chain_spec(n: usize) -> ModelSpec {
    let w_hz = 0.05;
    let bodies = (0..n)
        .map(|k| BodySpec {
            name: format!("p{k}"),
            kind: BodyKind::Particle,
            mass: c(1.0),
            inertia: [c(0.0); 6],
            position: Vector3::new(2.0, -(k as f64 + 1.0), 0.0),
            orientation: UnitQuaternion::identity(),
            velocity: Vector3::zeros(),
            angular_velocity: Vector3::zeros(),
        })
        .collect();
    let mut joints = Vec::new();
    for k in 0..n {
        let prev = if k == 0 {
            BodyRef::Frame(0)
        } else {
            BodyRef::Body(k - 1)
        };
        joints.push(JointSpec {
            name: format!("rod{k}"),
            kind: JointKind::Distance,
            body1: prev,
            body2: BodyRef::Body(k),
            frame1: LocalFrame::identity(),
            frame2: LocalFrame::identity(),
            length: Some(c(1.0)),
            initial_angle: None,
        });
        joints.push(JointSpec {
            name: format!("plane{k}"),
            kind: JointKind::Planar,
            body1: BodyRef::Ground,
            body2: BodyRef::Body(k),
            frame1: LocalFrame::identity(),
            frame2: LocalFrame::identity(),
            length: None,
            initial_angle: None,
        });
    }
    ModelSpec {
        name: "chain".into(),
        description: String::new(),
        gravity: [c(0.0), c(-9.81), c(0.0)],
        initialization: Initialization::Consistent,
        // The absolute formulation's equations (joint: tests/joint_formulation.rs).
        formulation: mbsfmu::mbs::spec::Formulation::Absolute,
        experiment: ExperimentSpec::default(),
        solver: Default::default(),
        parameters: vec![],
        inputs: vec![],
        bodies,
        frames: vec![MovingFrameSpec {
            name: "suspension".into(),
            position: [
                Motion::Sine {
                    offset: c(2.0),
                    amplitude: c(0.3),
                    frequency: c(w_hz),
                    phase: c(0.0),
                },
                Motion::Sine {
                    offset: c(0.0),
                    amplitude: c(0.2),
                    frequency: c(w_hz),
                    phase: c(0.0),
                },
                Motion::Constant(c(0.0)),
            ],
        }],
        joints,
        drivers: vec![],
        forces: vec![],
        outputs: vec![],
        source_files: vec![],
        warnings: vec![],
        source_text: None,
        source_contents: Default::default(),
    }
}

#[test]
fn pendulum_chain_accelerations_equal_the_hand_written_cartesian_chain() {
    let n = 5;
    let mut sys = System::new(Arc::new(chain_spec(n))).unwrap();
    let mut reference = CartesianChain::paper(n);
    // A generic consistent-looking planar state (need not satisfy the constraints: the
    // saddle-point system is defined anywhere).
    let t = 7.3;
    let q2: Vec<f64> = (0..2 * n)
        .map(|i| {
            if i % 2 == 0 {
                2.0 + 0.3 * (i as f64).sin()
            } else {
                -(i as f64 / 2.0 + 1.0) + 0.1 * (i as f64).cos()
            }
        })
        .collect();
    let v2: Vec<f64> = (0..2 * n)
        .map(|i| 0.5 * ((i * 7 % 5) as f64 - 2.0))
        .collect();
    let mut q3 = vec![0.0; 3 * n];
    let mut v3 = vec![0.0; 3 * n];
    for k in 0..n {
        q3[3 * k] = q2[2 * k];
        q3[3 * k + 1] = q2[2 * k + 1];
        v3[3 * k] = v2[2 * k];
        v3[3 * k + 1] = v2[2 * k + 1];
    }
    let (a_ref, l_ref) = saddle_point_solve(&mut reference, t, &q2, &v2);
    let (a, l) = sys.accelerations(t, &q3, &v3).unwrap();
    for k in 0..n {
        assert!(
            (a[3 * k] - a_ref[2 * k]).abs() < 1e-10,
            "x accel of particle {k}"
        );
        assert!(
            (a[3 * k + 1] - a_ref[2 * k + 1]).abs() < 1e-10,
            "y accel of particle {k}"
        );
        assert!(a[3 * k + 2].abs() < 1e-12, "stays in plane");
    }
    // Rows: rod0, plane0, rod1, plane1, ...: the rod multipliers equal the reference's.
    for k in 0..n {
        assert!(
            (l[2 * k] - l_ref[k]).abs() < 1e-9,
            "rod {k} multiplier {} vs {}",
            l[2 * k],
            l_ref[k]
        );
    }
    let _ = PI;
}

#[test]
fn pendulum_chain_assembles_with_consistent_velocities_for_the_moving_suspension() {
    let n = 4;
    let mut sys = System::new(Arc::new(chain_spec(n))).unwrap();
    let x = sys.initial_state(0.0).unwrap();
    let nc = sys.n_c();
    let mut phi = vec![0.0; nc];
    sys.constraints(0.0, &x.q, &mut phi);
    assert!(phi.iter().all(|p| p.abs() < 1e-10));
    let mut jac = nalgebra::DMatrix::zeros(nc, sys.n_q());
    sys.constraint_jacobian(0.0, &x.q, &mut jac);
    let mut phi_t = vec![0.0; nc];
    sys.constraint_time_derivative(0.0, &x.q, &mut phi_t);
    let res =
        &jac * nalgebra::DVector::from_column_slice(&x.v) + nalgebra::DVector::from_vec(phi_t);
    assert!(res.amax() < 1e-10);
    // The same minimal-norm projection as the hand-written chain.
    let mut reference = CartesianChain::paper(n);
    let xr = reference.consistent_state(0.0);
    for k in 0..n {
        assert!(
            (x.v[3 * k] - xr.v[2 * k]).abs() < 1e-10
                && (x.v[3 * k + 1] - xr.v[2 * k + 1]).abs() < 1e-10
        );
    }
}

/// A planar four-bar built from four revolute joints: in 3-D, 3 of the 20 joint equations are
/// redundant. They are detected at assembly, dropped and reported; one degree of freedom stays.
#[test]
fn four_bar_redundant_constraints_are_detected_and_dropped() {
    // Crank 0→(0,1), coupler (0,1)→(2,1.5), rocker (2,1.5)→(2,0); pivots (0,0), (2,0).
    let bar = |name: &str, a: [f64; 2], b: [f64; 2]| {
        let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
        let len = (dx * dx + dy * dy).sqrt();
        let m = 1.0;
        BodySpec {
            name: name.into(),
            kind: BodyKind::Rigid,
            mass: c(m),
            inertia: [
                c(1e-3),
                c(m * len * len / 12.0),
                c(m * len * len / 12.0),
                c(0.0),
                c(0.0),
                c(0.0),
            ],
            position: Vector3::new((a[0] + b[0]) / 2.0, (a[1] + b[1]) / 2.0, 0.0),
            orientation: UnitQuaternion::from_axis_angle(&Vector3::z_axis(), dy.atan2(dx)),
            velocity: Vector3::zeros(),
            angular_velocity: Vector3::zeros(),
        }
    };
    let bodies = vec![
        bar("crank", [0.0, 0.0], [0.0, 1.0]),
        bar("coupler", [0.0, 1.0], [2.0, 1.5]),
        bar("rocker", [2.0, 0.0], [2.0, 1.5]),
    ];
    // Frames: revolute about global z at a global point, in each body's coordinates.
    let local = |b: &BodySpec, p: [f64; 2]| LocalFrame {
        origin: b.orientation.inverse() * (Vector3::new(p[0], p[1], 0.0) - b.position),
        axes: *b.orientation.inverse().to_rotation_matrix().matrix(),
    };
    let ground = |p: [f64; 2]| LocalFrame {
        origin: Vector3::new(p[0], p[1], 0.0),
        axes: nalgebra::Matrix3::identity(),
    };
    let rev = |name: &str, b1: BodyRef, f1: LocalFrame, b2: BodyRef, f2: LocalFrame| JointSpec {
        name: name.into(),
        kind: JointKind::Revolute,
        body1: b1,
        body2: b2,
        frame1: f1,
        frame2: f2,
        length: None,
        initial_angle: None,
    };
    let joints = vec![
        rev(
            "pivot_crank",
            BodyRef::Ground,
            ground([0.0, 0.0]),
            BodyRef::Body(0),
            local(&bodies[0], [0.0, 0.0]),
        ),
        rev(
            "crank_coupler",
            BodyRef::Body(0),
            local(&bodies[0], [0.0, 1.0]),
            BodyRef::Body(1),
            local(&bodies[1], [0.0, 1.0]),
        ),
        rev(
            "coupler_rocker",
            BodyRef::Body(1),
            local(&bodies[1], [2.0, 1.5]),
            BodyRef::Body(2),
            local(&bodies[2], [2.0, 1.5]),
        ),
        rev(
            "pivot_rocker",
            BodyRef::Ground,
            ground([2.0, 0.0]),
            BodyRef::Body(2),
            local(&bodies[2], [2.0, 0.0]),
        ),
    ];
    let mut spec = chain_spec(1);
    spec.bodies = bodies;
    spec.joints = joints;
    spec.frames.clear();
    let mut sys = System::new(Arc::new(spec)).unwrap();
    let x = sys.initial_state(0.0).unwrap();
    assert_eq!(sys.dropped.len(), 3, "dropped: {:?}", sys.dropped);
    assert_eq!(sys.n_q() - sys.n_c(), 1, "one degree of freedom");
    assert!(
        sys.dropped.iter().all(|d| d.starts_with("joint '")),
        "{:?}",
        sys.dropped
    );
    // The reduced system is regular: accelerations exist and keep the loop closed.
    let (a, _) = sys.accelerations(0.0, &x.q, &x.v).unwrap();
    assert!(a.iter().all(|v| v.is_finite()));
}

#[test]
fn inconsistent_joints_fail_assembly_with_the_joint_names() {
    // A rod of length 1 from the origin and a second rod of length 1 from (5, 0) to the same
    // particle: no configuration satisfies both.
    let mut spec = chain_spec(1);
    spec.frames.clear();
    spec.joints = vec![
        JointSpec {
            name: "rod_a".into(),
            kind: JointKind::Distance,
            body1: BodyRef::Ground,
            body2: BodyRef::Body(0),
            frame1: LocalFrame::identity(),
            frame2: LocalFrame::identity(),
            length: Some(c(1.0)),
            initial_angle: None,
        },
        JointSpec {
            name: "rod_b".into(),
            kind: JointKind::Distance,
            body1: BodyRef::Ground,
            body2: BodyRef::Body(0),
            frame1: LocalFrame {
                origin: Vector3::new(5.0, 0.0, 0.0),
                axes: nalgebra::Matrix3::identity(),
            },
            frame2: LocalFrame::identity(),
            length: Some(c(1.0)),
            initial_angle: None,
        },
    ];
    let mut sys = System::new(Arc::new(spec)).unwrap();
    let err = sys.initial_state(0.0).unwrap_err().to_string();
    assert!(
        err.contains("cannot be assembled") && err.contains("rod_a") && err.contains("rod_b"),
        "{err}"
    );
}

fn output(name: &str, quantity: OutputQuantity) -> OutputSpec {
    OutputSpec {
        name: name.into(),
        unit: String::new(),
        description: String::new(),
        quantity,
        scale: 1.0,
    }
}

/// A bar of length L along +x, revolute to ground at the origin about z, held by a driver at
/// angle 0. Statics by hand: the driver applies +m g L/2 about +z, the pivot pushes the bar up
/// with m g; the reaction reported on ground (body 2 of the second joint) is the opposite.
#[test]
fn reaction_and_driver_sign_conventions() {
    let (m, l, g) = (3.0, 2.0, 9.81);
    let bar = BodySpec {
        name: "bar".into(),
        kind: BodyKind::Rigid,
        mass: c(m),
        inertia: [
            c(1e-3),
            c(m * l * l / 12.0),
            c(m * l * l / 12.0),
            c(0.0),
            c(0.0),
            c(0.0),
        ],
        position: Vector3::new(l / 2.0, 0.0, 0.0),
        orientation: UnitQuaternion::identity(),
        velocity: Vector3::zeros(),
        angular_velocity: Vector3::zeros(),
    };
    let pivot_on_bar = LocalFrame {
        origin: Vector3::new(-l / 2.0, 0.0, 0.0),
        axes: nalgebra::Matrix3::identity(),
    };
    let mut spec = chain_spec(1);
    spec.frames.clear();
    spec.bodies = vec![bar];
    spec.joints = vec![JointSpec {
        name: "pivot".into(),
        kind: JointKind::Revolute,
        body1: BodyRef::Ground,
        body2: BodyRef::Body(0),
        frame1: LocalFrame::identity(),
        frame2: pivot_on_bar,
        length: None,
        initial_angle: None,
    }];
    spec.drivers = vec![DriverSpec {
        name: "hold".into(),
        target: DriverTarget::JointCoordinate(0),
        motion: Motion::Constant(c(0.0)),
    }];
    spec.outputs = vec![
        output("torque", OutputQuantity::DriverForce { driver: 0 }),
        output(
            "fx",
            OutputQuantity::JointForce {
                joint: 0,
                component: 0,
                axes: Default::default(),
            },
        ),
        output(
            "fy",
            OutputQuantity::JointForce {
                joint: 0,
                component: 1,
                axes: Default::default(),
            },
        ),
        output("angle", OutputQuantity::JointCoordinate { joint: 0 }),
        output("energy", OutputQuantity::Energy),
    ];
    let mut sys = System::new(Arc::new(spec.clone())).unwrap();
    let x = sys.initial_state(0.0).unwrap();
    let mut out = vec![0.0; 5];
    sys.evaluate_outputs(&x, &mut out).unwrap();
    assert!(
        (out[0] - m * g * l / 2.0).abs() < 1e-9,
        "driver torque {}",
        out[0]
    );
    assert!(
        out[1].abs() < 1e-9 && (out[2] - m * g).abs() < 1e-9,
        "pivot force on the bar ({}, {})",
        out[1],
        out[2]
    );
    assert!(out[3].abs() < 1e-12);
    assert!(out[4].abs() < 1e-12, "potential energy zero at y = 0");
    // Same joint written ground-second: the reaction on ground is the opposite.
    let mut swapped = spec;
    swapped.joints[0] = JointSpec {
        name: "pivot".into(),
        kind: JointKind::Revolute,
        body1: BodyRef::Body(0),
        body2: BodyRef::Ground,
        frame1: pivot_on_bar,
        frame2: LocalFrame::identity(),
        length: None,
        initial_angle: None,
    };
    let mut sys = System::new(Arc::new(swapped)).unwrap();
    let x = sys.initial_state(0.0).unwrap();
    sys.evaluate_outputs(&x, &mut out).unwrap();
    assert!(
        out[1].abs() < 1e-9 && (out[2] + m * g).abs() < 1e-9,
        "reaction on ground ({}, {})",
        out[1],
        out[2]
    );
    // Driven from the bar's side, the driver's torque acts on ground about the bar's axis.
    assert!(
        (out[0] + m * g * l / 2.0).abs() < 1e-9,
        "driver torque {}",
        out[0]
    );
}
