//! The benchmark problems as engine models built in code, their references and error measures.
//!
//! The specs follow issue 2's descriptions of `double_pendulum_stiff.toml`, `pendulum_chain.toml`
//! (with the suspension driven by built-in sines, paper 003) and `slider_crank.toml` (crank
//! angle 2πt by a built-in ramp instead of the FMU input).

use mbsfmu::integrate::MechState;
use mbsfmu::mbs::spec::*;
use mbsfmu::mbs::system::System;
use nalgebra::{Matrix3, UnitQuaternion, Vector3};
use std::f64::consts::PI;
use std::path::Path;

fn c(x: f64) -> Scalar {
    Scalar::Const(x)
}

fn empty_spec(name: &str) -> ModelSpec {
    ModelSpec {
        name: name.into(),
        description: String::new(),
        gravity: [c(0.0), c(-9.81), c(0.0)],
        initialization: Initialization::Consistent,
        formulation: Default::default(),
        experiment: ExperimentSpec::default(),
        solver: Default::default(),
        parameters: vec![],
        inputs: vec![],
        bodies: vec![],
        frames: vec![],
        joints: vec![],
        drivers: vec![],
        forces: vec![],
        outputs: vec![],
        source_files: vec![],
        warnings: vec![],
        source_text: None,
        source_contents: Default::default(),
    }
}

fn rigid(
    name: &str,
    mass: f64,
    inertia: [f64; 3],
    pos: Vector3<f64>,
    angle_z: f64,
    vel: Vector3<f64>,
    omega_z: f64,
) -> BodySpec {
    BodySpec {
        name: name.into(),
        kind: BodyKind::Rigid,
        mass: c(mass),
        inertia: [
            c(inertia[0]),
            c(inertia[1]),
            c(inertia[2]),
            c(0.0),
            c(0.0),
            c(0.0),
        ],
        position: pos,
        orientation: UnitQuaternion::from_axis_angle(&Vector3::z_axis(), angle_z),
        velocity: vel,
        angular_velocity: Vector3::new(0.0, 0.0, omega_z),
    }
}

/// A frame at global point `p` with global axes (x, y, z), expressed in the coordinates of `b`.
fn local_global_axes(b: &BodySpec, p: Vector3<f64>) -> LocalFrame {
    LocalFrame {
        origin: b.orientation.inverse() * (p - b.position),
        axes: *b.orientation.inverse().to_rotation_matrix().matrix(),
    }
}

/// A frame at body point `origin` with the body's own axes.
fn local_body_axes(origin: Vector3<f64>) -> LocalFrame {
    LocalFrame {
        origin,
        axes: Matrix3::identity(),
    }
}

fn revolute(name: &str, b1: BodyRef, f1: LocalFrame, b2: BodyRef, f2: LocalFrame) -> JointSpec {
    JointSpec {
        name: name.into(),
        kind: JointKind::Revolute,
        body1: b1,
        body2: b2,
        frame1: f1,
        frame2: f2,
        length: None,
        initial_angle: None,
    }
}

/// Paper 000 section 5.1. Bars lie along their body x axes; each spring's frames carry the
/// bodies' own axes, so the angle of spring 2 is θ2 − θ1 (starts at −π/12 with free angle 0) and
/// that of spring 1 is θ1 (starts at 0, free angle 3π/2, initial deviation π/2).
pub fn double_pendulum_spec() -> ModelSpec {
    let th2 = 23.0 * PI / 12.0;
    let (m1, l1, m2, l2) = (3.0, 2.0, 0.3, 3.0);
    let i1 = m1 * l1 * l1 / 12.0;
    let i2 = m2 * l2 * l2 / 12.0;
    let dir2 = Vector3::new(th2.cos(), th2.sin(), 0.0);
    let c2 = Vector3::new(l1, 0.0, 0.0) + 0.5 * l2 * dir2;
    // Centre velocity of bar 2: ω ẑ × (centre − pin).
    let v2 = 10.0 * Vector3::z().cross(&(0.5 * l2 * dir2));
    let bar1 = rigid(
        "bar1",
        m1,
        [1e-4, i1, i1],
        Vector3::new(1.0, 0.0, 0.0),
        0.0,
        Vector3::zeros(),
        0.0,
    );
    let bar2 = rigid("bar2", m2, [1e-4, i2, i2], c2, th2, v2, 10.0);
    let mut s = empty_spec("double_pendulum_stiff");
    let ground = LocalFrame::identity();
    let pin1 = local_body_axes(Vector3::new(-1.0, 0.0, 0.0));
    let pin1_tip = local_body_axes(Vector3::new(1.0, 0.0, 0.0));
    let pin2 = local_body_axes(Vector3::new(-1.5, 0.0, 0.0));
    // Joint frames must coincide initially: bar 2's pin frame in global axes (so the revolute
    // equations hold), the springs use the bodies' own axes.
    s.joints = vec![
        revolute(
            "shoulder",
            BodyRef::Ground,
            ground,
            BodyRef::Body(0),
            local_global_axes(&bar1, Vector3::zeros()),
        ),
        revolute(
            "elbow",
            BodyRef::Body(0),
            pin1_tip,
            BodyRef::Body(1),
            local_global_axes(&bar2, Vector3::new(l1, 0.0, 0.0)),
        ),
    ];
    s.forces = vec![
        ForceSpec {
            static_preload: false,
            name: "spring1".into(),
            kind: ForceKind::RotationalSpringDamper {
                body1: BodyRef::Ground,
                frame1: ground,
                body2: BodyRef::Body(0),
                frame2: pin1,
                stiffness: c(400.0),
                damping: c(15.0),
                free_angle: c(1.5 * PI),
                actuator: None,
                table: None,
                damper_table: None,
                initial_angle: None,
            },
        },
        ForceSpec {
            static_preload: false,
            name: "spring2".into(),
            kind: ForceKind::RotationalSpringDamper {
                body1: BodyRef::Body(0),
                frame1: pin1_tip,
                body2: BodyRef::Body(1),
                frame2: pin2,
                stiffness: c(3e5),
                damping: c(5e4),
                free_angle: c(0.0),
                actuator: None,
                table: None,
                damper_table: None,
                initial_angle: None,
            },
        },
    ];
    s.bodies = vec![bar1, bar2];
    s
}

/// Paper 003's chain (as `tests/engine_dynamics.rs::chain_spec`), except the initial particle
/// velocities: the chain hangs straight and translates rigidly with the suspension velocity at
/// t = 0 (`phi_k' = 0`), the initial condition of the references `pendulum_chain_nN.csv`
/// (`--init rigid`). Assembly keeps it (it is consistent). The engine's default, the
/// minimal-norm projection of "at rest", would give `v_x = 0` and a different motion.
pub fn chain_spec(n: usize) -> ModelSpec {
    let w_hz = 0.05;
    let w = 2.0 * PI * w_hz;
    let v0 = Vector3::new(0.3 * w, 0.2 * w, 0.0);
    let mut s = empty_spec("pendulum_chain");
    s.bodies = (0..n)
        .map(|k| BodySpec {
            name: format!("p{k}"),
            kind: BodyKind::Particle,
            mass: c(1.0),
            inertia: [c(0.0); 6],
            position: Vector3::new(2.0, -(k as f64 + 1.0), 0.0),
            orientation: UnitQuaternion::identity(),
            velocity: v0,
            angular_velocity: Vector3::zeros(),
        })
        .collect();
    for k in 0..n {
        let prev = if k == 0 {
            BodyRef::Frame(0)
        } else {
            BodyRef::Body(k - 1)
        };
        s.joints.push(JointSpec {
            name: format!("rod{k}"),
            kind: JointKind::Distance,
            body1: prev,
            body2: BodyRef::Body(k),
            frame1: LocalFrame::identity(),
            frame2: LocalFrame::identity(),
            length: Some(c(1.0)),
            initial_angle: None,
        });
        s.joints.push(JointSpec {
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
    s.frames = vec![MovingFrameSpec {
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
    }];
    s
}

/// Paper 004's slider-crank, crank angle 2πt. Crank and rod have their long axis along body y
/// (as in issue 2), hence the −π/2 orientation; joint frames carry global axes so the crank
/// joint's coordinate is the crank angle from +x.
pub fn slider_crank_spec() -> ModelSpec {
    let crank = rigid(
        "crank",
        0.12,
        [1e-4, 1e-5, 1e-4],
        Vector3::new(0.05, 0.0, 0.0),
        -PI / 2.0,
        Vector3::zeros(),
        0.0,
    );
    let rod = rigid(
        "rod",
        0.5,
        [4e-3, 4e-4, 4e-3],
        Vector3::new(0.25, 0.0, 0.0),
        -PI / 2.0,
        Vector3::zeros(),
        0.0,
    );
    let slider = rigid(
        "slider",
        2.0,
        [1e-4, 1e-4, 1e-4],
        Vector3::new(0.4, 0.0, 0.0),
        0.0,
        Vector3::zeros(),
        0.0,
    );
    let mut s = empty_spec("slider_crank");
    let g = |p: [f64; 2]| LocalFrame {
        origin: Vector3::new(p[0], p[1], 0.0),
        axes: Matrix3::identity(),
    };
    let pz = |p: f64| Vector3::new(p, 0.0, 0.0);
    s.joints = vec![
        revolute(
            "crank_pivot",
            BodyRef::Ground,
            g([0.0, 0.0]),
            BodyRef::Body(0),
            local_global_axes(&crank, pz(0.0)),
        ),
        revolute(
            "crank_pin",
            BodyRef::Body(0),
            local_global_axes(&crank, pz(0.1)),
            BodyRef::Body(1),
            local_global_axes(&rod, pz(0.1)),
        ),
        revolute(
            "wrist_pin",
            BodyRef::Body(1),
            local_global_axes(&rod, pz(0.4)),
            BodyRef::Body(2),
            local_global_axes(&slider, pz(0.4)),
        ),
        // Prismatic along global x: frame z axis = global x.
        JointSpec {
            name: "slide".into(),
            kind: JointKind::Prismatic,
            body1: BodyRef::Ground,
            body2: BodyRef::Body(2),
            frame1: LocalFrame {
                origin: pz(0.4),
                axes: Matrix3::new(0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0),
            },
            frame2: LocalFrame {
                origin: Vector3::zeros(),
                axes: Matrix3::new(0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0),
            },
            length: None,
            initial_angle: None,
        },
    ];
    // 2πt as a ramp that started before t = 0 (no kink at the start).
    s.drivers = vec![DriverSpec {
        name: "crank_drive".into(),
        target: DriverTarget::JointCoordinate(0),
        motion: Motion::Ramp {
            initial: c(-2.0 * PI),
            slope: c(2.0 * PI),
            start: c(-1.0),
        },
    }];
    s.outputs = vec![
        OutputSpec {
            name: "crank_torque".into(),
            unit: "N.m".into(),
            description: String::new(),
            quantity: OutputQuantity::DriverForce { driver: 0 },
            scale: 1.0,
        },
        OutputSpec {
            name: "slider_x".into(),
            unit: "m".into(),
            description: String::new(),
            quantity: OutputQuantity::Position {
                body: BodyRef::Body(2),
                point: Vector3::zeros(),
                component: 0,
            },
            scale: 1.0,
        },
    ];
    s.bodies = vec![crank, rod, slider];
    s
}

/// A reference table: times and the compared columns.
#[derive(Debug, Clone)]
pub struct Reference {
    pub file: String,
    pub t: Vec<f64>,
    /// `values[i][k]`: column k at time i.
    pub values: Vec<Vec<f64>>,
}

/// Read columns `cols` of a reference CSV (comment lines start with '#', one header line).
pub fn read_reference(path: &Path, cols: &[String]) -> Reference {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let idx: Vec<usize> = cols
        .iter()
        .map(|c| {
            header
                .iter()
                .position(|h| h == c)
                .unwrap_or_else(|| panic!("{}: no column {c}", path.display()))
        })
        .collect();
    let it = header.iter().position(|h| *h == "t").expect("t column");
    let (mut t, mut values) = (Vec::new(), Vec::new());
    for l in lines {
        let f: Vec<f64> = l
            .split(',')
            .map(|x| x.trim().parse().expect("number"))
            .collect();
        t.push(f[it]);
        values.push(idx.iter().map(|&i| f[i]).collect());
    }
    Reference {
        file: path.display().to_string(),
        t,
        values,
    }
}

/// What is compared against the reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Observable {
    /// θ1 of the double pendulum (rad), compared modulo 2π.
    Theta1,
    /// All rod angles φ_k of the chain (absolute, from −y, counter-clockwise), modulo 2π.
    ChainAngles(usize),
    /// The driver torque of the slider-crank (N m).
    CrankTorque,
}

pub struct Problem {
    pub name: String,
    pub spec: ModelSpec,
    pub t_end: f64,
    pub observable: Observable,
    pub reference: Reference,
    /// Tolerances swept (rtol; atol = rtol).
    pub rtols: Vec<f64>,
}

fn wrap(a: f64) -> f64 {
    let w = (a + PI).rem_euclid(2.0 * PI) - PI;
    if w == -PI {
        PI
    } else {
        w
    }
}

impl Observable {
    /// Observed values at the state (same order as the reference columns).
    pub fn observe(&self, sys: &mut System, t: f64, q: &[f64], v: &[f64], out: &mut Vec<f64>) {
        out.clear();
        match *self {
            Observable::Theta1 => {
                // Bar 1's x axis from its Euler parameters: A[1,0] = 2(e1 e2 + e0 e3),
                // A[0,0] = e0² + e1² − e2² − e3².
                let (e0, e1, e2, e3) = (q[3], q[4], q[5], q[6]);
                out.push((2.0 * (e1 * e2 + e0 * e3)).atan2(e0 * e0 + e1 * e1 - e2 * e2 - e3 * e3));
            }
            Observable::ChainAngles(n) => {
                let (mut px, mut py) = (
                    2.0 + 0.3 * (2.0 * PI * 0.05 * t).sin(),
                    0.2 * (2.0 * PI * 0.05 * t).sin(),
                );
                for k in 0..n {
                    let (x, y) = (q[3 * k], q[3 * k + 1]);
                    out.push((x - px).atan2(-(y - py)));
                    px = x;
                    py = y;
                }
            }
            Observable::CrankTorque => {
                let x = MechState {
                    t,
                    q: q.to_vec(),
                    v: v.to_vec(),
                    lambda: vec![],
                };
                let mut o = [0.0; 2];
                sys.evaluate_outputs(&x, &mut o).expect("outputs");
                out.push(o[0]);
            }
        }
    }

    /// Max-abs difference between observed and reference values at one time.
    pub fn error(&self, obs: &[f64], reference: &[f64]) -> f64 {
        obs.iter()
            .zip(reference)
            .map(|(o, r)| match self {
                Observable::CrankTorque => (o - r).abs(),
                _ => wrap(o - r).abs(),
            })
            .fold(0.0, f64::max)
    }
}

pub fn data_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data")
}

pub fn double_pendulum() -> Problem {
    let cols = vec!["theta1".to_string()];
    Problem {
        name: "double_pendulum_stiff".into(),
        spec: double_pendulum_spec(),
        t_end: 2.0,
        observable: Observable::Theta1,
        reference: read_reference(&data_dir().join("double_pendulum_stiff.csv"), &cols),
        rtols: vec![1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8],
    }
}

pub fn chain(n: usize, rtols: Vec<f64>) -> Problem {
    let cols: Vec<String> = (1..=n).map(|k| format!("phi_{k}")).collect();
    Problem {
        name: format!("pendulum_chain_n{n}"),
        spec: chain_spec(n),
        t_end: 200.0,
        observable: Observable::ChainAngles(n),
        reference: read_reference(&data_dir().join(format!("pendulum_chain_n{n}.csv")), &cols),
        rtols,
    }
}

pub fn slider_crank() -> Problem {
    let cols = vec!["crank_torque".to_string()];
    Problem {
        name: "slider_crank".into(),
        spec: slider_crank_spec(),
        t_end: 8.0,
        observable: Observable::CrankTorque,
        reference: read_reference(&data_dir().join("slider_crank.csv"), &cols),
        rtols: vec![1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8],
    }
}
