//! The engine's analytic derivatives against central finite differences, for every joint
//! kind, driver kind and force element, at a generic (non-assembled) state.

use mbsfmu::integrate::system::{
    ConstraintHessians, Excitations, ForceJacobians, Mechanical, StepHooks,
};
use mbsfmu::mbs::spec::*;
use mbsfmu::mbs::system::System;
use nalgebra::{DMatrix, DVector, Matrix3, UnitQuaternion, Vector3};
use std::sync::Arc;

fn c(x: f64) -> Scalar {
    Scalar::Const(x)
}

fn frame(origin: [f64; 3], axis: [f64; 3], angle: f64) -> LocalFrame {
    let r =
        UnitQuaternion::from_axis_angle(&nalgebra::Unit::new_normalize(Vector3::from(axis)), angle);
    LocalFrame {
        origin: Vector3::from(origin),
        axes: *r.to_rotation_matrix().matrix(),
    }
}

fn rigid(name: &str, pos: [f64; 3], axis: [f64; 3], angle: f64) -> BodySpec {
    BodySpec {
        name: name.into(),
        kind: BodyKind::Rigid,
        mass: c(2.0),
        inertia: [c(0.3), c(0.4), c(0.5), c(0.01), c(-0.02), c(0.03)],
        position: Vector3::from(pos),
        orientation: UnitQuaternion::from_axis_angle(
            &nalgebra::Unit::new_normalize(Vector3::from(axis)),
            angle,
        ),
        velocity: Vector3::new(0.1, -0.2, 0.3),
        angular_velocity: Vector3::new(0.5, -1.0, 2.0),
    }
}

fn particle(name: &str, pos: [f64; 3]) -> BodySpec {
    BodySpec {
        name: name.into(),
        kind: BodyKind::Particle,
        mass: c(1.5),
        inertia: [c(0.0); 6],
        position: Vector3::from(pos),
        orientation: UnitQuaternion::identity(),
        velocity: Vector3::new(0.3, 0.1, -0.2),
        angular_velocity: Vector3::zeros(),
    }
}

fn joint(
    name: &str,
    kind: JointKind,
    b1: BodyRef,
    b2: BodyRef,
    f1: LocalFrame,
    f2: LocalFrame,
) -> JointSpec {
    JointSpec {
        name: name.into(),
        kind,
        body1: b1,
        body2: b2,
        frame1: f1,
        frame2: f2,
        length: Some(c(1.3)),
        initial_angle: None,
    }
}

/// Every element kind at once; the state is not assembled (derivatives hold anywhere).
fn kitchen_sink() -> ModelSpec {
    let (b0, b1, b2, g, fr) = (
        BodyRef::Body(0),
        BodyRef::Body(1),
        BodyRef::Body(2),
        BodyRef::Ground,
        BodyRef::Frame(0),
    );
    let f = |o: [f64; 3], ax: [f64; 3], a: f64| frame(o, ax, a);
    let kinds = [
        JointKind::Revolute,
        JointKind::Prismatic,
        JointKind::Spherical,
        JointKind::Universal,
        JointKind::Cylindrical,
        JointKind::Fixed,
        JointKind::Distance,
        JointKind::Planar,
    ];
    let mut joints = Vec::new();
    for (i, k) in kinds.iter().enumerate() {
        let (a, b) = match i % 3 {
            0 => (b0, b1),
            1 => (g, b0),
            _ => (b1, fr),
        };
        joints.push(joint(
            &format!("j{i}"),
            *k,
            a,
            b,
            f(
                [0.1 * i as f64, -0.2, 0.3],
                [1.0, 0.5 * i as f64, 0.2],
                0.4 + 0.1 * i as f64,
            ),
            f(
                [-0.3, 0.2 * i as f64, 0.1],
                [0.3, 1.0, -0.4],
                1.1 - 0.2 * i as f64,
            ),
        ));
    }
    // Particle joints: distance, spherical, planar.
    joints.push(joint(
        "jp_dist",
        JointKind::Distance,
        b0,
        b2,
        f([0.2, 0.0, 0.1], [0.0, 0.0, 1.0], 0.0),
        LocalFrame::identity(),
    ));
    joints.push(joint(
        "jp_planar",
        JointKind::Planar,
        g,
        b2,
        f([0.0, 0.0, 0.0], [0.2, 0.1, 1.0], 0.3),
        LocalFrame::identity(),
    ));
    let drivers = vec![
        DriverSpec {
            name: "d_rev".into(),
            target: DriverTarget::JointCoordinate(0),
            motion: Motion::Sine {
                offset: c(0.2),
                amplitude: c(0.3),
                frequency: c(0.5),
                phase: c(0.1),
            },
        },
        DriverSpec {
            name: "d_pri".into(),
            target: DriverTarget::JointCoordinate(1),
            motion: Motion::Input(0),
        },
        DriverSpec {
            name: "d_pt".into(),
            target: DriverTarget::PointComponent {
                body: 1,
                point: Vector3::new(0.1, 0.2, -0.3),
                component: 2,
            },
            motion: Motion::Ramp {
                initial: c(0.1),
                slope: c(0.4),
                start: c(0.0),
            },
        },
    ];
    let lin = ForceLaw::Linear {
        stiffness: c(120.0),
        damping: c(3.0),
        preload: c(2.0),
    };
    let forces = vec![
        ForceSpec {
            static_preload: false,
            name: "spring".into(),
            kind: ForceKind::SpringDamper {
                body1: b0,
                point1: Vector3::new(0.1, 0.2, 0.3),
                body2: fr,
                point2: Vector3::new(-0.2, 0.1, 0.0),
                free_length: c(0.7),
                law: lin,
                actuator: Some(Motion::Input(1)),
            },
        },
        ForceSpec {
            static_preload: false,
            name: "poly".into(),
            kind: ForceKind::SpringDamper {
                body1: b1,
                point1: Vector3::new(0.0, 0.2, 0.0),
                body2: b2,
                point2: Vector3::zeros(),
                free_length: c(0.5),
                law: ForceLaw::Polynomial {
                    coeffs: vec![c(50.0), c(-10.0), c(30.0)],
                    damping: c(1.0),
                },
                actuator: None,
            },
        },
        ForceSpec {
            static_preload: false,
            name: "table".into(),
            kind: ForceKind::SpringDamper {
                body1: g,
                point1: Vector3::new(0.0, 1.0, 0.0),
                body2: b1,
                point2: Vector3::new(0.1, 0.0, 0.0),
                free_length: c(1.0),
                law: ForceLaw::Table {
                    file: "t.csv".into(),
                    deflection: vec![-3.0, -1.0, 0.0, 1.0, 3.0],
                    force: vec![-500.0, -80.0, 0.0, 100.0, 700.0],
                    damping: c(2.0),
                },
                actuator: None,
            },
        },
        ForceSpec {
            static_preload: false,
            name: "torsion".into(),
            kind: ForceKind::RotationalSpringDamper {
                body1: b0,
                frame1: f([0.0; 3], [0.1, 0.2, 1.0], 0.2),
                body2: b1,
                frame2: f([0.0; 3], [0.0, 0.3, 1.0], -0.5),
                stiffness: c(40.0),
                damping: c(1.5),
                free_angle: c(0.3),
                actuator: Some(Motion::Constant(c(0.7))),
                table: None,
                damper_table: None,
                initial_angle: None,
            },
        },
        ForceSpec {
            static_preload: false,
            name: "bushing".into(),
            kind: ForceKind::Bushing {
                preload: [5.0, -3.0, 2.0, 0.4, -0.2, 0.1],
                body1: b0,
                frame1: f([0.1, 0.0, 0.0], [1.0, 0.0, 0.2], 0.3),
                body2: b1,
                frame2: f([0.0, 0.1, 0.0], [0.2, 1.0, 0.0], -0.2),
                stiffness: [c(100.0), c(200.0), c(300.0)],
                damping: [c(1.0), c(2.0), c(3.0)],
                rot_stiffness: [c(10.0), c(20.0), c(30.0)],
                rot_damping: [c(0.1), c(0.2), c(0.3)],
                tables: Default::default(),
                damper_tables: Default::default(),
            },
        },
        ForceSpec {
            static_preload: false,
            name: "contact_plane".into(),
            kind: ForceKind::Contact {
                geometry: ContactGeometry::SpherePlane {
                    sphere_body: b1,
                    center: Vector3::new(0.0, -0.1, 0.0),
                    radius: c(5.0),
                    plane_body: b0,
                    point: Vector3::new(0.0, 0.0, -0.2),
                    normal: Vector3::new(0.1, 1.0, 0.2),
                },
                law: ContactLaw::Linear,
                stiffness: c(1e3),
                damping: c(5.0),
                friction: None,
            },
        },
        ForceSpec {
            static_preload: false,
            name: "contact_spheres".into(),
            kind: ForceKind::Contact {
                geometry: ContactGeometry::SphereSphere {
                    body1: b2,
                    center1: Vector3::zeros(),
                    radius1: c(3.0),
                    body2: b0,
                    center2: Vector3::new(0.1, 0.0, 0.0),
                    radius2: c(2.0),
                },
                law: ContactLaw::Hertz,
                stiffness: c(1e3),
                damping: c(2.0),
                friction: None,
            },
        },
        ForceSpec {
            static_preload: false,
            name: "friction".into(),
            kind: ForceKind::PrismaticFriction {
                joint: 1,
                mu: c(0.3),
                v_reg: c(0.05),
                stiction: None,
            },
        },
        // Stiction that holds (stick law at the fixture) and one that has slipped (kinetic law
        // with the stick machinery), and stops penetrated on both sides.
        ForceSpec {
            static_preload: false,
            name: "bearing".into(),
            kind: ForceKind::RevoluteFriction {
                joint: 0,
                mu: c(0.3),
                v_reg: c(0.05),
                radius: c(0.02),
                stiction: Some(StictionSpec {
                    mu_static: c(1e6),
                    stiffness: c(50.0),
                    damping: c(2.0),
                    v_stick: Some(c(1e-3)),
                }),
            },
        },
        ForceSpec {
            static_preload: false,
            name: "slipping".into(),
            kind: ForceKind::PrismaticFriction {
                joint: 1,
                mu: c(0.2),
                v_reg: c(0.5),
                stiction: Some(StictionSpec {
                    mu_static: c(0.2),
                    stiffness: c(1e6),
                    damping: c(0.0),
                    v_stick: Some(c(1e-6)),
                }),
            },
        },
        ForceSpec {
            static_preload: false,
            name: "stop_lower".into(),
            kind: ForceKind::JointStop {
                joint: 1,
                lower: Some(c(10.0)),
                upper: None,
                stiffness: c(30.0),
                damping: StopDamping::Damping(c(1.5)),
            },
        },
        ForceSpec {
            static_preload: false,
            name: "stop_upper".into(),
            kind: ForceKind::JointStop {
                joint: 0,
                lower: Some(c(-20.0)),
                upper: Some(c(-10.0)),
                stiffness: c(20.0),
                damping: StopDamping::Damping(c(0.7)),
            },
        },
    ];
    ModelSpec {
        name: "kitchen_sink".into(),
        description: String::new(),
        gravity: [c(0.0), c(-9.81), c(1.0)],
        initialization: Initialization::Consistent,
        // The absolute formulation's equations (joint: tests/joint_formulation.rs).
        formulation: mbsfmu::mbs::spec::Formulation::Absolute,
        experiment: ExperimentSpec::default(),
        solver: Default::default(),
        parameters: vec![],
        inputs: vec![
            InputSpec {
                name: "u0".into(),
                unit: "m".into(),
                start: 0.1,
                description: String::new(),
                reconstruction: Default::default(),
            },
            InputSpec {
                name: "u1".into(),
                unit: "N".into(),
                start: 3.0,
                description: String::new(),
                reconstruction: Default::default(),
            },
        ],
        bodies: vec![
            rigid("a", [0.1, 0.2, 0.3], [1.0, 2.0, 3.0], 0.7),
            rigid("b", [1.0, -0.5, 0.2], [-1.0, 0.5, 2.0], 1.9),
            particle("c", [0.5, 0.4, -0.6]),
        ],
        frames: vec![MovingFrameSpec {
            name: "base".into(),
            position: [
                Motion::Sine {
                    offset: c(0.3),
                    amplitude: c(0.2),
                    frequency: c(0.7),
                    phase: c(0.0),
                },
                Motion::Input(0),
                Motion::Constant(c(0.1)),
            ],
        }],
        joints,
        drivers,
        forces,
        outputs: vec![],
        source_files: vec![],
        warnings: vec![],
        source_text: None,
        source_contents: Default::default(),
    }
}

struct Fixture {
    sys: System,
    t: f64,
    q: Vec<f64>,
    v: Vec<f64>,
}

fn fixture() -> Fixture {
    let spec = Arc::new(kitchen_sink());
    let mut sys = System::new(spec).expect("builds");
    sys.inputs_mut().segments[0] = mbsfmu::mbs::inputs::InputSegment {
        t0: 0.0,
        coeffs: [0.1, 0.3, -0.2, 0.05],
    };
    let n = sys.n_q();
    // A generic state near the initial one (so contact is active and angles near their branch).
    let mut q = vec![0.0; n];
    let mut v = vec![0.0; n];
    for i in 0..n {
        q[i] = 0.05 * ((i * 7 % 11) as f64 - 5.0) / 5.0;
        v[i] = 0.4 * ((i * 5 % 13) as f64 - 6.0) / 6.0;
    }
    let spec = sys.spec().clone();
    let layout = sys.layout().clone();
    for (b, body) in spec.bodies.iter().enumerate() {
        let o = layout.offsets[b];
        for k in 0..3 {
            q[o + k] += body.position[k];
        }
        if layout.is_rigid(b) {
            let uq = body.orientation.quaternion();
            let p = [uq.w, uq.i, uq.j, uq.k];
            for k in 0..4 {
                q[o + 3 + k] += p[k];
            }
        }
    }
    let t = 0.37;
    // Friction needs a normal force: take it from some multipliers.
    let lambda: Vec<f64> = (0..sys.n_c()).map(|i| 0.5 + 0.1 * i as f64).collect();
    sys.accept_step(t, &q, &v, Some(&lambda));
    Fixture { sys, t, q, v }
}

fn assert_close(a: &DMatrix<f64>, b: &DMatrix<f64>, tol: f64, what: &str) {
    assert_eq!(a.shape(), b.shape());
    let scale = b.amax().max(1.0);
    for i in 0..a.nrows() {
        for j in 0..a.ncols() {
            assert!(
                (a[(i, j)] - b[(i, j)]).abs() <= tol * scale,
                "{what}: entry ({i},{j}) analytic {} vs finite differences {}",
                a[(i, j)],
                b[(i, j)]
            );
        }
    }
}

fn fd_matrix(
    n_out: usize,
    n_in: usize,
    x: &[f64],
    h: f64,
    mut f: impl FnMut(&[f64]) -> Vec<f64>,
) -> DMatrix<f64> {
    let mut m = DMatrix::zeros(n_out, n_in);
    for j in 0..n_in {
        let (mut xp, mut xm) = (x.to_vec(), x.to_vec());
        xp[j] += h;
        xm[j] -= h;
        let (fp, fm) = (f(&xp), f(&xm));
        for i in 0..n_out {
            m[(i, j)] = (fp[i] - fm[i]) / (2.0 * h);
        }
    }
    m
}

#[test]
fn every_element_type_is_present() {
    let fx = fixture();
    let labels = fx.sys.row_labels().join("\n");
    for k in [
        "'j0'",
        "'j1'",
        "'j2'",
        "'j3'",
        "'j4'",
        "'j5'",
        "'j6'",
        "'j7'",
        "jp_dist",
        "jp_planar",
        "d_rev",
        "d_pri",
        "d_pt",
        "normalization",
    ] {
        assert!(labels.contains(k), "{k} missing from\n{labels}");
    }
}

#[test]
fn constraint_jacobian_matches_finite_differences() {
    let mut fx = fixture();
    let (n, m, t) = (fx.sys.n_q(), fx.sys.n_c(), fx.t);
    let mut jac = DMatrix::zeros(m, n);
    fx.sys.constraint_jacobian(t, &fx.q, &mut jac);
    let sys = &mut fx.sys;
    let fd = fd_matrix(m, n, &fx.q, 1e-6, |q| {
        let mut p = vec![0.0; m];
        sys.constraints(t, q, &mut p);
        p
    });
    assert_close(&jac, &fd, 1e-7, "Φ_q");
}

#[test]
fn constraint_time_derivative_matches_finite_differences() {
    let mut fx = fixture();
    let (m, t) = (fx.sys.n_c(), fx.t);
    let mut phi_t = vec![0.0; m];
    fx.sys.constraint_time_derivative(t, &fx.q, &mut phi_t);
    let sys = &mut fx.sys;
    let q = fx.q.clone();
    let fd = fd_matrix(m, 1, &[t], 1e-6, |tt| {
        let mut p = vec![0.0; m];
        sys.constraints(tt[0], &q, &mut p);
        p
    });
    assert_close(&DMatrix::from_column_slice(m, 1, &phi_t), &fd, 1e-7, "Φ_t");
}

#[test]
fn acceleration_rhs_matches_second_derivative_along_a_path() {
    // Along q(s) = q + v s + a s²/2, t(s) = t + s: d²Φ/ds² = Φ_q a − γ.
    let mut fx = fixture();
    let (n, m, t) = (fx.sys.n_q(), fx.sys.n_c(), fx.t);
    let a: Vec<f64> = (0..n).map(|i| 0.3 * ((i * 3 % 7) as f64 - 3.0)).collect();
    let mut gamma = vec![0.0; m];
    fx.sys.acceleration_rhs(t, &fx.q, &fx.v, &mut gamma);
    let mut jac = DMatrix::zeros(m, n);
    fx.sys.constraint_jacobian(t, &fx.q, &mut jac);
    let ja = &jac * DVector::from_column_slice(&a);
    let h = 1e-4;
    let mut phi_at = |s: f64| {
        let qs: Vec<f64> = (0..n)
            .map(|j| fx.q[j] + fx.v[j] * s + 0.5 * a[j] * s * s)
            .collect();
        let mut p = vec![0.0; m];
        fx.sys.constraints(t + s, &qs, &mut p);
        p
    };
    let (p0, pp, pm) = (phi_at(0.0), phi_at(h), phi_at(-h));
    for i in 0..m {
        let second = (pp[i] - 2.0 * p0[i] + pm[i]) / (h * h);
        let expect = ja[i] - gamma[i];
        assert!(
            (second - expect).abs() < 1e-4 * expect.abs().max(1.0),
            "row {i} ({}): {second} vs {expect}",
            fx.sys.row_labels()[i]
        );
    }
}

#[test]
fn constraint_hessian_matches_finite_differences() {
    let mut fx = fixture();
    let (n, m, t) = (fx.sys.n_q(), fx.sys.n_c(), fx.t);
    let lambda: Vec<f64> = (0..m).map(|i| ((i * 13 % 9) as f64 - 4.0) * 0.7).collect();
    let mut hess = DMatrix::zeros(n, n);
    fx.sys
        .constraint_force_jacobian(t, &fx.q, &lambda, &mut hess);
    let lam = DVector::from_column_slice(&lambda);
    let sys = &mut fx.sys;
    let fd = fd_matrix(n, n, &fx.q, 1e-6, |q| {
        let mut jac = DMatrix::zeros(m, n);
        sys.constraint_jacobian(t, q, &mut jac);
        (jac.transpose() * &lam).as_slice().to_vec()
    });
    assert_close(&hess, &fd, 1e-6, "∂(Φ_qᵀλ)/∂q");
}

#[test]
fn force_jacobians_match_finite_differences() {
    let mut fx = fixture();
    let (n, t) = (fx.sys.n_q(), fx.t);
    let (mut dq, mut dv) = (DMatrix::zeros(n, n), DMatrix::zeros(n, n));
    fx.sys.force_jacobians(t, &fx.q, &fx.v, &mut dq, &mut dv);
    let (q, v) = (fx.q.clone(), fx.v.clone());
    let sys = &mut fx.sys;
    let fd_q = fd_matrix(n, n, &q, 1e-6, |qq| {
        let mut f = vec![0.0; n];
        sys.forces(t, qq, &v, &mut f);
        f
    });
    let fd_v = fd_matrix(n, n, &v, 1e-6, |vv| {
        let mut f = vec![0.0; n];
        sys.forces(t, &q, vv, &mut f);
        f
    });
    assert_close(&dq, &fd_q, 1e-6, "∂f/∂q");
    assert_close(&dv, &fd_v, 1e-6, "∂f/∂v");
    // The check is not vacuous: the force depends on q and v.
    assert!(dq.amax() > 10.0 && dv.amax() > 0.5);
}

#[test]
fn mass_times_acceleration_jacobian_matches_finite_differences() {
    let mut fx = fixture();
    let (n, t) = (fx.sys.n_q(), fx.t);
    let a: Vec<f64> = (0..n).map(|i| 0.3 * ((i * 3 % 7) as f64 - 3.0)).collect();
    let mut d = DMatrix::zeros(n, n);
    fx.sys.mass_times_accel_jacobian(t, &fx.q, &a, &mut d);
    let av = DVector::from_column_slice(&a);
    let sys = &mut fx.sys;
    let fd = fd_matrix(n, n, &fx.q, 1e-6, |q| {
        let mut mm = DMatrix::zeros(n, n);
        sys.mass_matrix(t, q, &mut mm);
        (mm * &av).as_slice().to_vec()
    });
    assert_close(&d, &fd, 1e-6, "∂(M a)/∂q");
}

#[test]
fn excitation_offsets_shift_the_driven_constraints() {
    let mut fx = fixture();
    let (m, t) = (fx.sys.n_c(), fx.t);
    assert!(fx.sys.n_excitations() >= 4);
    let mut base = vec![0.0; m];
    fx.sys.constraints(t, &fx.q, &mut base);
    let mut moved = 0;
    for i in 0..fx.sys.n_excitations() {
        let u = fx.sys.excitation(t, i);
        fx.sys.set_excitation_offset(i, 1e-3);
        assert!((fx.sys.excitation(t, i) - u - 1e-3).abs() < 1e-15);
        let mut p = vec![0.0; m];
        fx.sys.constraints(t, &fx.q, &mut p);
        if p.iter().zip(&base).any(|(a, b)| a != b) {
            moved += 1;
        }
        fx.sys.set_excitation_offset(i, 0.0);
    }
    // The frame's x, y and the three drivers change constraint values (actuators do not).
    assert!(moved >= 5, "{moved}");
}

#[test]
fn rigid_body_inertia_matches_euler_equations() {
    // A free rigid body: p̈ from the saddle-point system reproduces J ω̇ + ω × J ω = 0.
    let mut spec = kitchen_sink();
    spec.joints.clear();
    spec.drivers.clear();
    spec.forces.clear();
    spec.frames.clear();
    spec.gravity = [c(0.0); 3];
    spec.bodies.truncate(1);
    let mut sys = System::new(Arc::new(spec)).unwrap();
    let x = sys.initial_state(0.0).unwrap();
    let (a, _) = sys.accelerations(0.0, &x.q, &x.v).unwrap();
    let p = nalgebra::Vector4::new(x.q[3], x.q[4], x.q[5], x.q[6]);
    let pd = nalgebra::Vector4::new(x.v[3], x.v[4], x.v[5], x.v[6]);
    let pdd = nalgebra::Vector4::new(a[3], a[4], a[5], a[6]);
    let g = mbsfmu::mbs::math::g_mat(&p);
    let w = 2.0 * g * pd; // body frame
    let wd = 2.0 * g * pdd; // Ġ ṗ = 0
    let j = Matrix3::new(0.3, 0.01, -0.02, 0.01, 0.4, 0.03, -0.02, 0.03, 0.5);
    let euler = j * wd + w.cross(&(j * w));
    assert!(euler.norm() < 1e-10, "{euler}");
    // and the global angular velocity equals the one given in the model.
    let omega = 2.0 * mbsfmu::mbs::math::e_mat(&p) * pd;
    assert!((omega - Vector3::new(0.5, -1.0, 2.0)).norm() < 1e-12);
}
