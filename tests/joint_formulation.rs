//! The joint-coordinate formulation (`[model] formulation = "joint"`, `mbs::joint`) against
//! independent references: the minimal-coordinate chain of paper 003 (closed form and the
//! scipy table), the stiff double pendulum (scipy Radau table), the slider-crank (closed-form
//! kinematics and inverse dynamics); and against the absolute formulation of the same models.
//! Integration runs through the integrator traits (BDF and one-step methods), which do not
//! know which formulation they integrate.

mod common;
use common::closed_form::{pendulum_chain, RefTable};
use mbsfmu::integrate::any::AnyIntegrator;
use mbsfmu::integrate::system::Mechanical;
use mbsfmu::integrate::{Integrator, MechState, Method, Settings};
use mbsfmu::mbs::inputs::InputSegment;
use mbsfmu::mbs::spec::*;
use mbsfmu::mbs::system::System;
use nalgebra::{DMatrix, DVector, UnitQuaternion, Vector3};
use std::path::Path;
use std::sync::Arc;

fn c(x: f64) -> Scalar {
    Scalar::Const(x)
}

/// A gallery model's text with `formulation` set.
fn model(file: &str, formulation: &str, extra: &str) -> System {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap().replacen(
        "[model]\n",
        &format!("[model]\nformulation = \"{formulation}\"\n"),
        1,
    ) + extra;
    let spec = mbsfmu::mbs::load_model_str(&text, &path).unwrap();
    System::new(Arc::new(spec)).unwrap()
}

fn out_index(sys: &System, name: &str) -> usize {
    sys.spec()
        .outputs
        .iter()
        .position(|o| o.name == name)
        .unwrap_or_else(|| panic!("no output {name}"))
}

/// Integrate with `method` to every communication point `k·dt ≤ t_end`, returning the outputs
/// at each point.
fn run(sys: &mut System, method: Method, tol: f64, dt: f64, t_end: f64) -> Vec<(f64, Vec<f64>)> {
    let x0 = sys.initial_state(0.0).unwrap();
    let settings = Settings {
        method,
        rtol: tol,
        atol: tol,
        ..Settings::default()
    };
    let mut integ = AnyIntegrator::new(settings, sys.n_q(), sys.n_c()).unwrap();
    integ.initialize(sys, &x0).unwrap();
    let mut out = Vec::new();
    let n = (t_end / dt).round() as usize;
    for k in 1..=n {
        let tc = k as f64 * dt;
        while Integrator::<System>::state(&integ).t < tc - 1e-12 {
            integ.step(sys, tc).unwrap();
        }
        let x = Integrator::<System>::state(&integ).clone();
        let mut y = vec![0.0; sys.n_outputs()];
        sys.evaluate_outputs(&x, &mut y).unwrap();
        out.push((tc, y));
    }
    out
}

// ----- stiff double pendulum -----

#[test]
fn double_pendulum_is_two_joint_angles_without_constraints() {
    let mut sys = model("double_pendulum_stiff.toml", "joint", "");
    assert_eq!((sys.n_q(), sys.n_c()), (2, 0));
    let x = sys.initial_state(0.0).unwrap();
    // Shoulder angle 0, elbow −π/12 (bar 2 relative to bar 1), rates 0 and 10 rad/s.
    assert!(x.q[0].abs() < 1e-12 && (x.q[1] + std::f64::consts::PI / 12.0).abs() < 1e-12);
    assert!(x.v[0].abs() < 1e-12 && (x.v[1] - 10.0).abs() < 1e-12);
    // M by CRBA against the planar double pendulum in relative angles:
    // bars m1 L1 I1, m2 L2 I2 (about the centres), centres at half length.
    let (m1, l1, i1, m2, l2, i2) = (3.0, 2.0, 1.0, 0.3, 3.0, 0.225);
    let th2 = x.q[1];
    let c2 = (l1 * l2 / 2.0) * m2 * th2.cos();
    let m22 = i2 + m2 * (l2 / 2.0f64).powi(2);
    let m11 = i1 + m1 * (l1 / 2.0f64).powi(2) + m2 * l1 * l1 + m22 + 2.0 * c2;
    let m12 = m22 + c2;
    let mut m = DMatrix::zeros(2, 2);
    sys.mass_matrix(0.0, &x.q, &mut m);
    let expect = DMatrix::from_row_slice(2, 2, &[m11, m12, m12, m22]);
    assert!((&m - &expect).amax() < 1e-12, "M = {m}, expected {expect}");
}

/// θ1 against scipy Radau at 1e-12 (tests/data/double_pendulum_stiff.csv), with BDF and the
/// one-step Rosenbrock–Nyström and SDIRK methods, and against the absolute formulation.
#[test]
fn double_pendulum_follows_the_reference_and_the_absolute_formulation() {
    let reference = RefTable::load("double_pendulum_stiff.csv").unwrap();
    let mut abs = model("double_pendulum_stiff.toml", "absolute", "");
    let k = out_index(&abs, "theta1");
    let w = out_index(&abs, "omega1");
    let abs_out = run(&mut abs, Method::Bdf, 1e-7, 0.02, 2.0);
    for method in [Method::Bdf, Method::RosenbrockNystrom, Method::Sdirk] {
        let mut sys = model("double_pendulum_stiff.toml", "joint", "");
        let out = run(&mut sys, method, 1e-7, 0.02, 2.0);
        let (mut err_ref, mut err_abs, mut err_w) = (0.0f64, 0.0f64, 0.0f64);
        for ((t, y), (_, ya)) in out.iter().zip(&abs_out) {
            err_ref = err_ref.max((y[k] - reference.at("theta1", *t).unwrap()).abs());
            err_w = err_w.max((y[w] - reference.at("omega1", *t).unwrap()).abs());
            err_abs = err_abs.max((y[k] - ya[k]).abs());
        }
        println!(
            "double pendulum, joint, {}: max |θ1 − ref| {err_ref:.2e}, |ω1 − ref| {err_w:.2e}, |θ1 − absolute| {err_abs:.2e}",
            method.name()
        );
        assert!(err_ref < 2e-5, "{}: θ1 error {err_ref}", method.name());
        assert!(err_w < 2e-3, "{}: ω1 error {err_w}", method.name());
        assert!(
            err_abs < 2e-5,
            "{}: θ1 vs absolute {err_abs}",
            method.name()
        );
    }
}

/// A small planar tree's accelerations come from the one-pass kernel (`planar/small.rs`),
/// which must give what forming `M` and `Ψ` on the shared load and solving gives, to the bit:
/// the stiff double pendulum (two revolute joints, two spring-dampers) and a cart on a slanted
/// rail with a double pendulum (prismatic root, three nodes), at states across several turns.
/// (Against independent references through the integrators that use it: the double
/// pendulum's scipy table above, BDF and SDIRK.)
#[test]
fn small_tree_kernel_equals_forming_m_and_psi() {
    // The cart of `CART_PENDULUM` with a second pendulum on its arm: three nodes.
    let cart = format!(
        "{CART_PENDULUM}[[bodies]]\nname = \"rod2\"\nmass = 0.5\ninertia = [0.01, 0.02, 0.015]\n\
         position = [0.5, -0.9, 0.0]\n[[joints]]\nname = \"hinge2\"\ntype = \"revolute\"\n\
         body1 = \"arm\"\nbody2 = \"rod2\"\npoint = [0.3, -0.6, 0.0]\naxis = [0.0, 0.0, 1.0]\n"
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("cart.toml");
    let cart = System::new(Arc::new(mbsfmu::mbs::load_model_str(&cart, &path).unwrap())).unwrap();
    for (name, mut sys) in [
        (
            "double pendulum",
            model("double_pendulum_stiff.toml", "joint", ""),
        ),
        ("cart", cart),
    ] {
        let n = sys.n_q();
        assert_eq!(sys.n_c(), 0);
        let x0 = sys.initial_state(0.0).unwrap();
        for k in 0..20 {
            let kf = k as f64;
            let q: Vec<f64> = (0..n)
                .map(|i| x0.q[i] + 0.9 * kf * (1.0 + i as f64) * (0.3 * kf + i as f64).sin())
                .collect();
            let v: Vec<f64> = (0..n).map(|i| 7.0 * (1.7 * kf - i as f64).cos()).collect();
            let (mut a, mut lambda) = (vec![0.0; n], vec![]);
            sys.accelerations_into(0.0, &q, &v, &mut a, &mut lambda)
                .unwrap();
            let (mut m, mut f) = (DMatrix::zeros(n, n), vec![0.0; n]);
            sys.mass_matrix(0.0, &q, &mut m);
            sys.forces(0.0, &q, &v, &mut f);
            assert!(mbsfmu::dense::ldlt_solve(m.as_mut_slice(), &mut f));
            assert_eq!(a, f, "{name}, state {k}: kernel against forming M and Ψ");
        }
        assert!(
            sys.joint_model().unwrap().small_tree_kernel(),
            "{name}: the kernel did not serve it"
        );
    }
}

// ----- paper 003's chain of revolute pendulums -----

/// Paper 003's chain as rigid bodies and revolute joints (one angle per joint): bob `k` is a
/// body of 1 kg at the end of rod `k`, hinged at the previous bob (the first at the moving
/// suspension). A rigid body needs a positive inertia; `j` is tiny so that the bodies are the
/// paper's point masses to ~1e-12.
pub fn revolute_chain_spec(n: usize, j: f64) -> ModelSpec {
    let w_hz = 0.05;
    let omega = 2.0 * std::f64::consts::PI * w_hz;
    // The chain starts hanging and moving rigidly with the suspension (as the reference).
    let v0 = Vector3::new(0.3 * omega, 0.2 * omega, 0.0);
    let bodies = (0..n)
        .map(|k| BodySpec {
            name: format!("bob{k}"),
            kind: BodyKind::Rigid,
            mass: c(1.0),
            inertia: [c(j), c(j), c(j), c(0.0), c(0.0), c(0.0)],
            position: Vector3::new(2.0, -(k as f64 + 1.0), 0.0),
            orientation: UnitQuaternion::identity(),
            velocity: v0,
            angular_velocity: Vector3::zeros(),
        })
        .collect();
    let joints = (0..n)
        .map(|k| JointSpec {
            name: format!("hinge{k}"),
            kind: JointKind::Revolute,
            body1: if k == 0 {
                BodyRef::Frame(0)
            } else {
                BodyRef::Body(k - 1)
            },
            body2: BodyRef::Body(k),
            frame1: LocalFrame::identity(),
            frame2: LocalFrame {
                origin: Vector3::new(0.0, 1.0, 0.0),
                axes: nalgebra::Matrix3::identity(),
            },
            length: None,
            initial_angle: None,
        })
        .collect();
    let tip = |component| OutputSpec {
        name: format!("tip_{}", ["x", "y"][component]),
        unit: "m".into(),
        description: String::new(),
        quantity: OutputQuantity::Position {
            body: BodyRef::Body(n - 1),
            point: Vector3::zeros(),
            component,
        },
        scale: 1.0,
    };
    ModelSpec {
        name: "revolute_chain".into(),
        description: String::new(),
        gravity: [c(0.0), c(-9.81), c(0.0)],
        initialization: Initialization::Consistent,
        formulation: Formulation::Joint,
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
        outputs: vec![tip(0), tip(1)],
        source_files: vec![],
        warnings: vec![],
        source_text: None,
        source_contents: Default::default(),
    }
}

/// Relative joint angles θ (θ_1 = φ_1, θ_k = φ_k − φ_{k−1}) against the paper's absolute rod
/// angles φ: p̈ from `[M Gᵀ; G 0]` (no constraints here: M p̈ = Ψ) equals the closed form.
#[test]
fn revolute_chain_accelerations_equal_the_minimal_coordinate_chain() {
    let n = 6;
    let mut sys = System::new(Arc::new(revolute_chain_spec(n, 1e-12))).unwrap();
    assert_eq!((sys.n_q(), sys.n_c()), (n, 0));
    let p = pendulum_chain::Params::paper(n);
    let t = 7.3;
    let phi: Vec<f64> = (0..n).map(|k| 0.4 * (k as f64 + 0.7).sin()).collect();
    let dphi: Vec<f64> = (0..n).map(|k| 0.8 * (1.3 * k as f64).cos()).collect();
    let rel = |a: &[f64]| -> Vec<f64> {
        (0..n)
            .map(|k| if k == 0 { a[0] } else { a[k] - a[k - 1] })
            .collect()
    };
    let (q, v) = (rel(&phi), rel(&dphi));
    let (a, lambda) = sys.accelerations(t, &q, &v).unwrap();
    assert!(lambda.is_empty());
    let a_ref = rel(&pendulum_chain::accelerations(&p, t, &phi, &dphi));
    for k in 0..n {
        assert!(
            (a[k] - a_ref[k]).abs() < 1e-9 * (1.0 + a_ref[k].abs()),
            "joint {k}: {} vs {}",
            a[k],
            a_ref[k]
        );
    }
}

/// N = 16 over 20 s (the suspension sine included) against scipy DOP853 at 1e-12
/// (tests/data/pendulum_chain_n16.csv), BDF and SDIRK; and against the absolute formulation of
/// the same chain as particles with rods (`models/pendulum_chain.toml` physics).
#[test]
fn revolute_chain_n16_follows_the_paper_reference() {
    let reference = RefTable::load("pendulum_chain_n16.csv").unwrap();
    for method in [Method::Bdf, Method::Sdirk] {
        let mut sys = System::new(Arc::new(revolute_chain_spec(16, 1e-12))).unwrap();
        let out = run(&mut sys, method, 1e-7, 0.5, 20.0);
        let mut err = 0.0f64;
        for (t, y) in &out {
            err = err
                .max((y[0] - reference.at("tip_x", *t).unwrap()).abs())
                .max((y[1] - reference.at("tip_y", *t).unwrap()).abs());
        }
        println!(
            "chain N = 16, joint, {}: max tip error over 20 s {err:.2e}",
            method.name()
        );
        assert!(err < 1e-4, "{}: tip error {err}", method.name());
    }
}

// ----- slider-crank: a loop closed by a cut joint, the crank driven -----

#[test]
fn slider_crank_tree_cut_and_driven_coordinate() {
    let sys = model("slider_crank.toml", "joint", "");
    let jm = sys.joint_model().unwrap();
    let names = |js: &[usize]| -> Vec<String> {
        js.iter()
            .map(|&j| sys.spec().joints[j].name.clone())
            .collect()
    };
    assert_eq!(
        names(&jm.tree_joints()),
        ["crank_pivot", "crank_pin", "wrist_pin"]
    );
    assert_eq!(names(jm.cut_joints()), ["slide"]);
    // The driven crank angle is eliminated: two state coordinates.
    assert_eq!(sys.n_q(), 2);
}

/// `G`, `∂g/∂t` and `γ` of the cut joint (with the driven crank) against central differences
/// of the constraint values along a smooth motion.
#[test]
fn slider_crank_constraint_derivatives_are_consistent() {
    let mut sys = model("slider_crank.toml", "joint", "");
    sys.inputs_mut().segments[0] = InputSegment {
        t0: 0.0,
        coeffs: [0.0, 2.0 * std::f64::consts::PI, 0.5, 0.3],
    };
    let x = sys.initial_state(0.0).unwrap();
    let (nq, nc) = (sys.n_q(), sys.n_c());
    assert_eq!(nc, 2, "the planar loop leaves two independent rows");
    let t = 0.13;
    let q: Vec<f64> = x.q.iter().map(|a| a + 0.05).collect();
    let v = vec![0.7, -1.1];
    let a = [0.3, 0.9];
    let g_at = |sys: &mut System, s: f64| {
        // g along q(t+s) = q + v s + a s²/2.
        let qs: Vec<f64> = (0..nq)
            .map(|i| q[i] + v[i] * s + 0.5 * a[i] * s * s)
            .collect();
        let mut phi = vec![0.0; nc];
        sys.constraints(t + s, &qs, &mut phi);
        phi
    };
    let h = 1e-4;
    let (gp, g0, gm) = (g_at(&mut sys, h), g_at(&mut sys, 0.0), g_at(&mut sys, -h));
    let mut jac = DMatrix::zeros(nc, nq);
    let mut phi_t = vec![0.0; nc];
    let mut gamma = vec![0.0; nc];
    sys.constraint_jacobian(t, &q, &mut jac);
    sys.constraint_time_derivative(t, &q, &mut phi_t);
    sys.acceleration_rhs(t, &q, &v, &mut gamma);
    for k in 0..nc {
        let gd = (gp[k] - gm[k]) / (2.0 * h);
        let gdd = (gp[k] - 2.0 * g0[k] + gm[k]) / (h * h);
        let gv: f64 = (0..nq).map(|i| jac[(k, i)] * v[i]).sum();
        let ga: f64 = (0..nq).map(|i| jac[(k, i)] * a[i]).sum();
        // Central differences: O(h²) ≈ 1e-8 relative.
        assert!(
            (gd - (gv + phi_t[k])).abs() < 1e-6 * (1.0 + gd.abs()),
            "row {k}: ġ {gd} vs {}",
            gv + phi_t[k]
        );
        // g̈ = G a − γ.
        assert!(
            (gdd - (ga - gamma[k])).abs() < 1e-4 * (1.0 + gdd.abs()),
            "row {k}: g̈ {gdd} vs {}",
            ga - gamma[k]
        );
    }
}

/// Slider position and crank torque against the closed-form inverse dynamics
/// (tests/data/slider_crank.csv, crank at 2π rad/s), BDF and SDIRK, and against the absolute
/// formulation.
#[test]
fn slider_crank_follows_the_closed_form() {
    let reference = RefTable::load("slider_crank.csv").unwrap();
    let drive = |sys: &mut System| {
        sys.inputs_mut().segments[0] = InputSegment {
            t0: 0.0,
            coeffs: [0.0, 2.0 * std::f64::consts::PI, 0.0, 0.0],
        };
    };
    let mut abs = model("slider_crank.toml", "absolute", "");
    drive(&mut abs);
    let abs_out = run(&mut abs, Method::Bdf, 1e-8, 0.01, 2.0);
    let (kx, kt) = (out_index(&abs, "slider_x"), out_index(&abs, "crank_torque"));
    for method in [Method::Bdf, Method::Sdirk] {
        let mut sys = model("slider_crank.toml", "joint", "");
        drive(&mut sys);
        let out = run(&mut sys, method, 1e-8, 0.01, 2.0);
        let (mut ex, mut et, mut ea) = (0.0f64, 0.0f64, 0.0f64);
        for ((t, y), (_, ya)) in out.iter().zip(&abs_out) {
            ex = ex.max((y[kx] - reference.at("slider_x", *t).unwrap()).abs());
            et = et.max((y[kt] - reference.at("crank_torque", *t).unwrap()).abs());
            ea = ea.max((y[kt] - ya[kt]).abs());
        }
        println!(
            "slider-crank, joint, {}: max |x − ref| {ex:.2e} m, |torque − ref| {et:.2e} N m, |torque − absolute| {ea:.2e}",
            method.name()
        );
        assert!(ex < 1e-9, "{}: slider x error {ex}", method.name());
        assert!(et < 1e-4, "{}: torque error {et}", method.name());
        assert!(ea < 1e-4, "{}: torque vs absolute {ea}", method.name());
    }
}

// ----- selection and refusals -----

/// The trees of the models with particles, spherical joints and loops through them: the
/// chain of particles becomes 16 particles on planar tree joints (two travels each) with the
/// rods as constraints; the spherical chain eight spherical tree joints (four Euler
/// parameters each, their normalizations the only constraints); the suspension corner a tree
/// through the lower ball joint with the upper ball joint and the tie rod cut.
#[test]
fn particles_spherical_joints_and_free_bodies_make_the_tree() {
    let names = |sys: &System, js: &[usize]| -> Vec<String> {
        js.iter()
            .map(|&j| sys.spec().joints[j].name.clone())
            .collect()
    };
    let chain = model("pendulum_chain.toml", "joint", "");
    let jm = chain.joint_model().unwrap();
    // Each particle hangs from ground by its planar joint (two in-plane travels); the rods
    // close the loops.
    assert_eq!(
        names(&chain, &jm.tree_joints()),
        (1..=16).map(|k| format!("plane{k}")).collect::<Vec<_>>()
    );
    assert!(jm.free_bodies().is_empty());
    assert_eq!((chain.n_q(), chain.n_c()), (32, 16));
    let sph = model("spherical_chain.toml", "joint", "");
    let jm = sph.joint_model().unwrap();
    assert_eq!(jm.tree_joints().len(), 8);
    assert!(jm.cut_joints().is_empty() && jm.free_bodies().is_empty());
    assert_eq!((sph.n_q(), sph.n_c()), (32, 8));
    assert!(sph
        .row_labels()
        .iter()
        .all(|l| l.contains("Euler-parameter normalization")));
    let mut corner = model("suspension_corner.toml", "joint", "");
    let jm = corner.joint_model().unwrap();
    assert_eq!(
        names(&corner, &jm.tree_joints()),
        ["chassis_guide", "lower_pivot", "upper_pivot", "lower_ball"]
    );
    assert_eq!(names(&corner, jm.cut_joints()), ["upper_ball", "tie_rod"]);
    corner.initial_state(0.0).unwrap();
    let r = corner.report.clone().unwrap();
    assert_eq!((r.n_coordinates, r.n_independent, r.dof), (7, 5, 2));
    // A free rigid body: three translations and four Euler parameters.
    let free = free_flap_in("joint", "");
    assert_eq!(free.joint_model().unwrap().free_bodies(), [0, 2]);
    assert_eq!((free.n_q(), free.n_c()), (3 + 4 + 1 + 3, 1));
}

#[test]
fn formulation_key_is_checked() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/double_pendulum_stiff.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let bad = text.replacen("[model]\n", "[model]\nformulation = \"minimal\"\n", 1);
    let e = mbsfmu::mbs::load_model_str(&bad, &path)
        .unwrap_err()
        .to_string();
    assert!(e.contains("formulation") && e.contains("minimal"), "{e}");
    let spec = mbsfmu::mbs::load_model_str(&text, &path).unwrap();
    assert_eq!(spec.formulation, Formulation::Joint, "joint is the default");
    // A fully prescribed model (its one tree coordinate driven) has nothing to integrate in
    // joint coordinates: unless the file names a formulation it stays in absolute ones, and
    // naming joint gives an error that says what to do.
    let driven = r#"
[model]
name = "driven_bar"
gravity = [0.0, -9.81, 0.0]

[[bodies]]
name = "bar"
mass = 2.0
inertia = [0.1, 0.1, 0.1]
position = [0.5, 0.0, 0.0]

[[joints]]
name = "pivot"
type = "revolute"
body1 = "ground"
body2 = "bar"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]

[[drivers]]
name = "turn"
joint = "pivot"
motion = { type = "sine", amplitude = 0.1, frequency = 1.0 }
"#;
    let spec = mbsfmu::mbs::load_model_str(driven, &path).unwrap();
    assert_eq!(spec.formulation, Formulation::Absolute);
    let mut sys = System::new(Arc::new(spec)).unwrap();
    let x = sys.initial_state(0.0).unwrap();
    assert_eq!(sys.n_q(), 7);
    let w = 0.1 * 2.0 * std::f64::consts::PI;
    assert!(
        (x.v[1] - 0.5 * w).abs() < 1e-9,
        "the bar's centre moves with the driver: {:?}",
        x.v
    );
    let named = driven.replacen("[model]\n", "[model]\nformulation = \"joint\"\n", 1);
    let spec = mbsfmu::mbs::load_model_str(&named, &path).unwrap();
    assert_eq!(spec.formulation, Formulation::Joint);
    let Err(e) = System::new(Arc::new(spec)) else {
        panic!("a fully driven model in joint coordinates must be refused");
    };
    let e = e.to_string();
    assert!(
        e.contains("every joint coordinate") && e.contains("absolute"),
        "{e}"
    );
}

// ----- measurement (not a test of speed): cost of one evaluation, joint vs absolute -----

/// Paper 003's chain as the gallery's absolute model has it: particles, rods (distance
/// joints), a planar joint per particle, the suspension as a moving frame.
fn particle_chain_spec(n: usize) -> ModelSpec {
    let mut spec = revolute_chain_spec(n, 1e-12);
    spec.formulation = Formulation::Absolute;
    for b in &mut spec.bodies {
        b.kind = BodyKind::Particle;
        b.inertia = [c(0.0); 6];
    }
    spec.joints.clear();
    for k in 0..n {
        let prev = if k == 0 {
            BodyRef::Frame(0)
        } else {
            BodyRef::Body(k - 1)
        };
        spec.joints.push(JointSpec {
            name: format!("rod{k}"),
            kind: JointKind::Distance,
            body1: prev,
            body2: BodyRef::Body(k),
            frame1: LocalFrame::identity(),
            frame2: LocalFrame::identity(),
            length: Some(c(1.0)),
            initial_angle: None,
        });
        spec.joints.push(JointSpec {
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
    spec
}

fn cpu_time() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + 1e-9 * ts.tv_nsec as f64
}

/// Median, min, max in µs of `runs` runs of `reps` calls of `f`.
fn measure(reps: usize, mut f: impl FnMut(usize) -> f64) -> (f64, f64, f64) {
    let mut runs = Vec::new();
    let mut sink = 0.0;
    for _ in 0..9 {
        let c0 = cpu_time();
        for r in 0..reps {
            sink += f(r);
        }
        runs.push((cpu_time() - c0) / reps as f64 * 1e6);
    }
    assert!(sink.is_finite());
    runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (runs[runs.len() / 2], runs[0], runs[runs.len() - 1])
}

/// Thread CPU time of one acceleration evaluation (`System::accelerations`: M, Ψ or f, G, γ and
/// the solve of the saddle-point system) and of one residual batch (`mass_matrix`, `forces`,
/// `constraints`, `constraint_jacobian`, `constraint_time_derivative` into preallocated
/// storage), at a consistent state with nonzero rates. docs/benchmarks.md quotes the output of
/// `cargo test --release --test joint_formulation -- --ignored --nocapture evaluation_cost`.
#[test]
#[ignore]
fn evaluation_cost_joint_against_absolute() {
    let dp = |f: &str| model("double_pendulum_stiff.toml", f, "");
    let mut cases: Vec<(String, System, usize)> = vec![
        ("double pendulum, absolute".into(), dp("absolute"), 20_000),
        ("double pendulum, joint".into(), dp("joint"), 20_000),
    ];
    for n in [16, 32] {
        let reps = 40_000 / n;
        cases.push((
            format!("chain N = {n}, absolute (particles, rods)"),
            System::new(Arc::new(particle_chain_spec(n))).unwrap(),
            reps,
        ));
        let mut rigid = revolute_chain_spec(n, 1e-3);
        rigid.formulation = Formulation::Absolute;
        cases.push((
            format!("chain N = {n}, absolute (rigid bodies, revolute)"),
            System::new(Arc::new(rigid)).unwrap(),
            reps,
        ));
        cases.push((
            format!("chain N = {n}, joint (revolute)"),
            System::new(Arc::new(revolute_chain_spec(n, 1e-3))).unwrap(),
            reps,
        ));
    }
    println!("| model | n_q | n_c | accelerations µs (min, max) | residual batch µs (min, max) |");
    println!("|---|---|---|---|---|");
    for (name, mut sys, reps) in cases {
        let x = sys.initial_state(0.0).unwrap();
        let (nq, nc) = (sys.n_q(), sys.n_c());
        // A state off the initial rest: advance a little with BDF.
        let settings = Settings {
            rtol: 1e-6,
            atol: 1e-6,
            ..Settings::default()
        };
        let mut integ = AnyIntegrator::new(settings, nq, nc).unwrap();
        integ.initialize(&mut sys, &x).unwrap();
        while Integrator::<System>::state(&integ).t < 1.0 {
            integ.step(&mut sys, 1.0).unwrap();
        }
        let x = Integrator::<System>::state(&integ).clone();
        let acc = measure(reps, |r| {
            let t = x.t + 1e-9 * r as f64;
            sys.accelerations(t, &x.q, &x.v).unwrap().0[0]
        });
        let (mut f, mut phi, mut phi_t) = (vec![0.0; nq], vec![0.0; nc], vec![0.0; nc]);
        let mut jac = DMatrix::zeros(nc, nq);
        let mut m = DMatrix::zeros(nq, nq);
        let batch = measure(reps, |r| {
            let t = x.t + 1e-9 * r as f64;
            sys.mass_matrix(t, &x.q, &mut m);
            sys.forces(t, &x.q, &x.v, &mut f);
            sys.constraints(t, &x.q, &mut phi);
            sys.constraint_jacobian(t, &x.q, &mut jac);
            sys.constraint_time_derivative(t, &x.q, &mut phi_t);
            m[(0, 0)] + f[0]
        });
        println!(
            "| {name} | {nq} | {nc} | {:.2} ({:.2}, {:.2}) | {:.2} ({:.2}, {:.2}) |",
            acc.0, acc.1, acc.2, batch.0, batch.1, batch.2
        );
    }
    // A hand-written minimal-coordinate right-hand side for scale: the closed-form chain of
    // tests/common/closed_form.rs (absolute rod angles, M and the right-hand side formed
    // directly, nalgebra LU; allocates like `System::accelerations`).
    for n in [16, 32] {
        let p = pendulum_chain::Params::paper(n);
        let phi: Vec<f64> = (0..n).map(|k| 0.1 * (k as f64).sin()).collect();
        let dphi: Vec<f64> = (0..n).map(|k| 0.2 * (k as f64).cos()).collect();
        let acc = measure(40_000 / n, |r| {
            pendulum_chain::accelerations(&p, 1.0 + 1e-9 * r as f64, &phi, &dphi)[0]
        });
        println!(
            "| chain N = {n}, hand-written closed form (Rust) | {n} | 0 | {:.2} ({:.2}, {:.2}) | |",
            acc.0, acc.1, acc.2
        );
    }
}

// ----- the rest of the gallery -----

/// Four-link crank-rocker (a loop: the rocker pivot is the cut joint, rotor driven at π rad/s)
/// against the closed form (tests/data/four_link.csv).
#[test]
fn four_link_follows_the_closed_form() {
    let reference = RefTable::load("four_link.csv").unwrap();
    for method in [Method::Bdf, Method::Sdirk] {
        let mut sys = model("four_link.toml", "joint", "");
        assert_eq!(
            (sys.n_q(), sys.joint_model().unwrap().cut_joints().len()),
            (2, 1)
        );
        sys.inputs_mut().segments[0] = InputSegment {
            t0: 0.0,
            coeffs: [0.0, std::f64::consts::PI, 0.0, 0.0],
        };
        let (ka, kt) = (
            out_index(&sys, "rocker_angle"),
            out_index(&sys, "rotor_torque"),
        );
        let out = run(&mut sys, method, 1e-8, 0.01, 2.0);
        let (mut ea, mut et, mut scale) = (0.0f64, 0.0f64, 0.0f64);
        for (t, y) in &out {
            scale = scale.max(reference.at("rotor_torque", *t).unwrap().abs());
            ea = ea.max((y[ka] - reference.at("rocker_angle", *t).unwrap()).abs());
            et = et.max((y[kt] - reference.at("rotor_torque", *t).unwrap()).abs());
        }
        println!(
            "four-link, joint, {}: max |rocker angle − ref| {ea:.2e} rad, |rotor torque − ref| {et:.2e} N m (max |torque| {scale:.3e})",
            method.name()
        );
        assert!(ea < 1e-9, "{}: rocker angle error {ea}", method.name());
        assert!(et < 1e-8 * scale, "{}: torque error {et}", method.name());
    }
}

/// The quarter-car rig through the co-simulation layer (the engine type the FMU runs), stamp
/// `0.01 sin(2π·1.5 t)` sent as value and slope every 2 ms, from static equilibrium, against
/// the exact linear solution (tests/data/quarter_car.csv) with the absolute formulation's
/// bound (tests/cosim_test_rig.rs).
#[test]
fn quarter_car_through_cosim_follows_the_exact_solution() {
    use mbsfmu::cosim::{Advance, SetPhase, Simulation};
    use mbsfmu::description::VariableTable;
    let reference = RefTable::load("quarter_car.csv").unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/quarter_car_rig.toml");
    let text = std::fs::read_to_string(&path).unwrap().replacen(
        "[model]\n",
        "[model]\nformulation = \"joint\"\n",
        1,
    );
    let spec = Arc::new(mbsfmu::mbs::load_model_str(&text, &path).unwrap());
    for method in ["bdf", "sdirk"] {
        let table = Arc::new(VariableTable::from_spec(&spec));
        let mut sim = Simulation::new(
            spec.clone(),
            table.clone(),
            System::new(spec.clone()).unwrap(),
        );
        let vr = |n: &str| table.by_name(n).unwrap().value_reference;
        let item = Method::from_name(method).unwrap();
        let value = Method::ALL.iter().position(|m| *m == item).unwrap() as i64 + 1;
        sim.set_integer(vr("solver.integrator"), value, SetPhase::Setup)
            .unwrap();
        sim.setup_experiment(Some(1e-6), 0.0, None).unwrap();
        sim.initialize().unwrap();
        let w = 2.0 * std::f64::consts::PI * 1.5;
        let outputs: Vec<usize> = ["chassis_z", "wheel_z"]
            .iter()
            .map(|n| spec.outputs.iter().position(|o| o.name == *n).unwrap())
            .collect();
        let (mut ec, mut ew) = (0.0f64, 0.0f64);
        let h = 0.002;
        for k in 0..1000 {
            let t = k as f64 * h;
            sim.set_real(vr("stamp_z"), 0.01 * (w * t).sin(), SetPhase::Stepping)
                .unwrap();
            sim.set_input_derivative(vr("stamp_z"), 1, 0.01 * w * (w * t).cos())
                .unwrap();
            let r = sim.advance_to((k + 1) as f64 * h, None).unwrap();
            assert_eq!(r, Advance::Completed, "{method} at t = {t}");
            let tc = (k + 1) as f64 * h;
            if (tc * 100.0 - (tc * 100.0).round()).abs() < 1e-9 {
                let o = sim.outputs().unwrap().to_vec();
                ec = ec.max((o[outputs[0]] - reference.at("chassis_z", tc).unwrap()).abs());
                ew = ew.max((o[outputs[1]] - reference.at("wheel_z", tc).unwrap()).abs());
            }
        }
        println!("quarter car, joint, cosim, {method}: max |Δchassis_z| {ec:.2e} m, |Δwheel_z| {ew:.2e} m");
        assert!(ec < 2e-5 && ew < 2e-5, "{method}: {ec} {ew}");
    }
}

/// Paper 002's bouncing balls (penalty contact; each ball on a vertical prismatic guide, so one
/// coordinate each) against scipy (tests/data/bouncing_balls.csv) and the absolute formulation.
#[test]
fn bouncing_balls_follow_the_reference_and_the_absolute_formulation() {
    let reference = RefTable::load("bouncing_balls.csv").unwrap();
    let mut abs = model("bouncing_balls.toml", "absolute", "");
    let mut sys = model("bouncing_balls.toml", "joint", "");
    assert_eq!((sys.n_q(), sys.n_c()), (2, 0));
    let (k1, k2) = (out_index(&sys, "y1"), out_index(&sys, "y2"));
    let out = run(&mut sys, Method::Bdf, 1e-8, 0.01, 1.0);
    let abs_out = run(&mut abs, Method::Bdf, 1e-8, 0.01, 1.0);
    let (mut er, mut ea) = (0.0f64, 0.0f64);
    for ((t, y), (_, ya)) in out.iter().zip(&abs_out) {
        for (k, name) in [(k1, "y1"), (k2, "y2")] {
            er = er.max((y[k] - reference.at(name, *t).unwrap()).abs());
            ea = ea.max((y[k] - ya[k]).abs());
        }
    }
    println!("bouncing balls, joint, bdf: max |y − ref| {er:.2e} m, |y − absolute| {ea:.2e} m");
    assert!(er < 1e-4, "error against the reference {er}");
    assert!(ea < 1e-4, "error against the absolute formulation {ea}");
}

/// Paper 003's Table 2 analogue in joint coordinates (a measurement, printed): the chain of N
/// revolute pendulums with the moving suspension as excitation, t ∈ [0, 200] s, ATOL 1e-6,
/// RTOL 1e-4, BDF with each Jacobian strategy; thread CPU seconds, full Jacobians (#Je), cheap
/// updates (#upd), and the tip deviation from scipy DOP853 at 1e-12 on the 0.5 s grid
/// (tests/data/integrators/pendulum_chain_tip.csv, the reference of benches/bdf_table2.rs, from
/// the same start). docs/benchmarks.md quotes
/// `cargo test --release --test joint_formulation -- --ignored --nocapture table2` (N from
/// `TABLE2_N`, default 16 and 32).
#[test]
#[ignore]
fn table2_analogue_chain_in_joint_coordinates() {
    use mbsfmu::integrate::bdf::Bdf;
    use mbsfmu::integrate::JacobianStrategy;
    let ns: Vec<usize> = std::env::var("TABLE2_N")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![16, 32]);
    let rtol: f64 = std::env::var("TABLE2_RTOL")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1e-4);
    println!("| N | strategy | CPU [s] | % of dense | steps | #fc | #Je | #upd | #LU | tip dev [m] | (26) term at end |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let reference = RefTable::load("integrators/pendulum_chain_tip.csv").unwrap();
    for n in ns {
        // The "projected" start of benches/bdf_table2.rs (what the absolute assembly makes of
        // the particle chain hanging at rest): every bob moves with (0, ẏ_susp(0)), the first
        // rod turns with −ẋ_susp(0)/l.
        let mut spec = revolute_chain_spec(n, 1e-12);
        let omega = 2.0 * std::f64::consts::PI * 0.05;
        for (k, b) in spec.bodies.iter_mut().enumerate() {
            b.velocity = Vector3::new(0.0, 0.2 * omega, 0.0);
            b.angular_velocity = Vector3::new(0.0, 0.0, if k == 0 { -0.3 * omega } else { 0.0 });
        }
        let spec = Arc::new(spec);
        let mut dense_cpu = None;
        for strategy in [
            JacobianStrategy::Dense,
            JacobianStrategy::DenseExtended,
            JacobianStrategy::Analytic,
            JacobianStrategy::AnalyticExtended,
        ] {
            let mut sys = System::new(spec.clone()).unwrap();
            let x0 = sys.initial_state(0.0).unwrap();
            let settings = Settings {
                jacobian: strategy,
                rtol,
                atol: 1e-2 * rtol,
                ..Settings::default()
            };
            let mut bdf = Bdf::new(settings, sys.n_q(), sys.n_c());
            let (mut q, mut v) = (vec![0.0; sys.n_q()], vec![0.0; sys.n_q()]);
            let mut y = vec![0.0; sys.n_outputs()];
            let times = &reference.data[0];
            let (mut next, mut dev) = (1, 0.0f64);
            let c0 = cpu_time();
            bdf.initialize(&mut sys, &x0).unwrap();
            while bdf.state().t < 200.0 {
                let t = bdf.step(&mut sys, 200.0).unwrap();
                while next < times.len() && times[next] <= t {
                    let tr = times[next];
                    bdf.interpolate(tr, &mut q, &mut v);
                    let x = MechState {
                        t: tr,
                        q: q.clone(),
                        v: v.clone(),
                        lambda: vec![],
                    };
                    sys.evaluate_outputs(&x, &mut y).unwrap();
                    dev = dev
                        .max((y[0] - reference.at(&format!("x{n}"), tr).unwrap()).abs())
                        .max((y[1] - reference.at(&format!("y{n}"), tr).unwrap()).abs());
                    next += 1;
                }
            }
            let cpu = cpu_time() - c0;
            let base = *dense_cpu.get_or_insert(cpu);
            let s = bdf.stats();
            println!(
                "| {n} | {} | {cpu:.3} | {:.0}% | {} | {} | {} | {} | {} | {dev:.1e} | {} |",
                strategy.name(),
                100.0 * cpu / base,
                s.steps,
                s.f_evals,
                s.jac_evals,
                s.jac_updates,
                s.lu,
                if bdf.jacobian().excitation_term_active() {
                    "on"
                } else {
                    "off"
                }
            );
        }
    }
}

/// A spatial (non-planar) tree with every kind of force element that acts through rotations:
/// revolute joints about z and x, a prismatic joint along a skew axis, a bushing, a
/// rotational spring-damper, a spring-damper, oblique gravity.
fn spatial_arm() -> System {
    spatial_arm_in("joint")
}

fn spatial_arm_in(formulation: &str) -> System {
    let text = spatial_arm_text(formulation);
    let spec = mbsfmu::mbs::load_model_str(&text, Path::new("spatial_arm.toml")).unwrap();
    System::new(Arc::new(spec)).unwrap()
}

fn spatial_arm_text(formulation: &str) -> String {
    r#"
[model]
name = "spatial_arm"
formulation = "FORMULATION"
gravity = [0.0, -9.81, -1.0]

[[bodies]]
name = "a"
mass = 2.0
inertia = [0.1, 0.2, 0.3]
position = [0.5, 0.0, 0.0]

[[bodies]]
name = "b"
mass = 1.0
inertia = [0.05, 0.07, 0.09]
position = [1.0, 0.0, -0.4]

[[bodies]]
name = "c"
mass = 0.5
inertia = [0.01, 0.02, 0.015]
position = [1.0, 0.3, -0.6]

[[joints]]
name = "j1"
type = "revolute"
body1 = "ground"
body2 = "a"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]

[[joints]]
name = "j2"
type = "revolute"
body1 = "a"
body2 = "b"
point = [1.0, 0.0, 0.0]
axis = [1.0, 0.0, 0.0]

[[joints]]
name = "j3"
type = "prismatic"
body1 = "b"
body2 = "c"
point = [1.0, 0.3, -0.6]
axis = [0.0, 1.0, 1.0]

[[forces]]
name = "mount"
type = "bushing"
body1 = "ground"
body2 = "b"
point = [1.0, 0.0, -0.4]
stiffness = [200.0, 300.0, 400.0]
damping = [5.0, 6.0, 7.0]
rot_stiffness = [50.0, 60.0, 70.0]
rot_damping = [1.0, 2.0, 3.0]

[[forces]]
name = "twist"
type = "rotational_spring_damper"
joint = "j2"
stiffness = 30.0
damping = 2.0

[[forces]]
name = "cord"
type = "spring_damper"
body1 = "ground"
point1 = [0.3, 0.5, 0.2]
body2 = "c"
point2 = [1.0, 0.3, -0.6]
stiffness = 500.0
damping = 9.0
free_length = 0.8

[[outputs]]
name = "c_x"
type = "position"
body = "c"
component = "x"

[[outputs]]
name = "c_y"
type = "position"
body = "c"
component = "y"

[[outputs]]
name = "c_z"
type = "position"
body = "c"
component = "z"

[[outputs]]
name = "b_wx"
type = "angular_velocity"
body = "b"
axis = [1.0, 0.0, 0.0]

[[outputs]]
name = "energy"
type = "energy"
"#
    .replace("FORMULATION", formulation)
}

/// A free rigid body (`hub`, no joint to ground: translations and Euler parameters) carrying a
/// flap on a hinge, and a free particle (`bead`) on a string to the hub; a bushing holds the
/// hub near its start. `extra` is appended (a loop-closing joint).
fn free_flap_in(formulation: &str, extra: &str) -> System {
    let text = r#"
[model]
name = "free_flap"
formulation = "FORMULATION"
gravity = [0.0, -9.81, -1.0]

[[bodies]]
name = "hub"
mass = 3.0
inertia = [0.2, 0.3, 0.4]
position = [0.2, 0.1, 0.0]
orientation = { axis = [1.0, 1.0, 0.0], angle = 0.4 }
velocity = [0.1, 0.5, -0.2]
angular_velocity = [1.0, -2.0, 3.0]

[[bodies]]
name = "flap"
mass = 1.0
inertia = [0.05, 0.06, 0.07]
position = [0.7, 0.1, 0.0]

[[bodies]]
name = "bead"
type = "particle"
mass = 0.5
position = [0.2, 0.6, 0.3]
velocity = [0.0, 0.3, 0.1]

[[joints]]
name = "hinge"
type = "revolute"
body1 = "hub"
body2 = "flap"
point = [0.45, 0.1, 0.0]
axis = [0.0, 1.0, 0.0]

[[forces]]
name = "mount"
type = "bushing"
body1 = "ground"
body2 = "hub"
point = [0.2, 0.1, 0.0]
stiffness = [200.0, 300.0, 400.0]
damping = [5.0, 6.0, 7.0]
rot_stiffness = [50.0, 60.0, 70.0]
rot_damping = [1.0, 2.0, 3.0]

[[forces]]
name = "string"
type = "spring_damper"
body1 = "hub"
point1 = [0.2, 0.1, 0.0]
body2 = "bead"
point2 = [0.2, 0.6, 0.3]
stiffness = 80.0
damping = 1.0
free_length = 0.4

[[outputs]]
name = "flap_x"
type = "position"
body = "flap"
component = "x"

[[outputs]]
name = "flap_z"
type = "position"
body = "flap"
component = "z"

[[outputs]]
name = "bead_y"
type = "position"
body = "bead"
component = "y"

[[outputs]]
name = "hub_wz"
type = "angular_velocity"
body = "hub"
axis = [0.0, 0.0, 1.0]

[[outputs]]
name = "energy"
type = "energy"
"#
    .replace("FORMULATION", formulation)
        + extra;
    let spec = mbsfmu::mbs::load_model_str(&text, Path::new("free_flap.toml")).unwrap();
    System::new(Arc::new(spec)).unwrap()
}

/// Rigid bodies held only by a universal, a cylindrical and a planar joint, springs between
/// them: in joint coordinates a tree of those three joints (2 + 2 + 3 coordinates, no
/// constraint).
fn cut_kinds_in(formulation: &str) -> System {
    let text = r#"
[model]
name = "cut_kinds"
formulation = "FORMULATION"
gravity = [0.0, -9.81, -2.0]

[[bodies]]
name = "a"
mass = 2.0
inertia = [0.1, 0.2, 0.3]
position = [0.0, -0.5, 0.0]
angular_velocity = [0.5, 0.0, 0.3]

[[bodies]]
name = "b"
mass = 1.0
inertia = [0.05, 0.06, 0.07]
position = [0.0, -1.5, 0.0]
velocity = [0.2, 0.0, 0.0]

[[bodies]]
name = "c"
mass = 1.5
inertia = [0.05, 0.06, 0.07]
position = [1.0, -1.5, 0.0]

[[joints]]
name = "u"
type = "universal"
body1 = "ground"
body2 = "a"
point = [0.0, 0.0, 0.0]
axis = [1.0, 0.0, 0.0]
axis2 = [0.0, 0.0, 1.0]

[[joints]]
name = "cyl"
type = "cylindrical"
body1 = "a"
body2 = "b"
point = [0.0, -1.0, 0.0]
axis = [0.0, 1.0, 0.0]

[[joints]]
name = "pl"
type = "planar"
body1 = "ground"
body2 = "c"
point = [1.0, -1.5, 0.0]
axis = [0.0, 0.0, 1.0]

[[forces]]
name = "s1"
type = "spring_damper"
body1 = "b"
point1 = [0.0, -1.5, 0.0]
body2 = "c"
point2 = [1.0, -1.5, 0.0]
stiffness = 100.0
damping = 2.0
free_length = 0.8

[[forces]]
name = "s2"
type = "spring_damper"
body1 = "ground"
point1 = [0.0, -2.0, 0.0]
body2 = "b"
point2 = [0.0, -1.5, 0.0]
stiffness = 50.0
damping = 1.0
free_length = 0.5

[[outputs]]
name = "bx"
type = "position"
body = "b"
component = "x"

[[outputs]]
name = "by"
type = "position"
body = "b"
component = "y"

[[outputs]]
name = "cx"
type = "position"
body = "c"
component = "x"

[[outputs]]
name = "aw"
type = "angular_velocity"
body = "a"
axis = [1.0, 0.0, 0.0]
"#
    .replace("FORMULATION", formulation);
    let spec = mbsfmu::mbs::load_model_str(&text, Path::new("cut_kinds.toml")).unwrap();
    System::new(Arc::new(spec)).unwrap()
}

/// The same three joint kinds with every tree joint running from body 2 to body 1 (the child
/// is each joint's body 1: inverse stage order, negated coordinates) and skew axes; springs to
/// ground, initial rates.
fn reversed_kinds_in(formulation: &str) -> System {
    let text = r#"
[model]
name = "reversed_kinds"
formulation = "FORMULATION"
gravity = [0.0, -9.81, -2.0]

[[bodies]]
name = "a"
mass = 2.0
inertia = [0.1, 0.2, 0.3]
position = [0.0, -0.5, 0.0]
angular_velocity = [0.5, 0.2, 0.3]

[[bodies]]
name = "b"
mass = 1.0
inertia = [0.05, 0.06, 0.07]
position = [0.0, -1.5, 0.2]
velocity = [0.2, 0.1, -0.3]
angular_velocity = [0.0, 1.0, 0.0]

[[bodies]]
name = "c"
mass = 1.5
inertia = [0.05, 0.08, 0.07]
position = [1.0, -1.5, 0.0]
velocity = [0.0, 0.4, 0.1]
angular_velocity = [0.3, 0.0, 2.0]

[[joints]]
name = "u"
type = "universal"
body1 = "a"
body2 = "ground"
point = [0.0, 0.0, 0.0]
axis = [1.0, 0.0, 0.0]
axis2 = [0.0, 0.0, 1.0]

[[joints]]
name = "cyl"
type = "cylindrical"
body1 = "b"
body2 = "a"
point = [0.0, -1.0, 0.1]
axis = [0.3, 1.0, 0.2]

[[joints]]
name = "pl"
type = "planar"
body1 = "c"
body2 = "b"
point = [0.5, -1.5, 0.1]
axis = [0.2, 0.1, 1.0]

[[forces]]
name = "s1"
type = "spring_damper"
body1 = "ground"
point1 = [1.5, -1.0, 0.3]
body2 = "c"
point2 = [1.2, -1.4, 0.1]
stiffness = 80.0
damping = 1.0
free_length = 0.3

[[forces]]
name = "s2"
type = "spring_damper"
body1 = "ground"
point1 = [0.0, -2.2, 0.0]
body2 = "b"
point2 = [0.1, -1.6, 0.2]
stiffness = 50.0
damping = 0.5
free_length = 0.4

[[outputs]]
name = "bx"
type = "position"
body = "b"
component = "x"

[[outputs]]
name = "bz"
type = "position"
body = "b"
component = "z"

[[outputs]]
name = "cy"
type = "position"
body = "c"
component = "y"

[[outputs]]
name = "aw"
type = "angular_velocity"
body = "a"
axis = [1.0, 0.0, 0.0]

[[outputs]]
name = "cw"
type = "angular_velocity"
body = "c"
axis = [0.2, 0.1, 1.0]

[[outputs]]
name = "s1_length"
type = "element_length"
force = "s1"

[[outputs]]
name = "energy"
type = "energy"
"#
    .replace("FORMULATION", formulation);
    let spec = mbsfmu::mbs::load_model_str(&text, Path::new("reversed_kinds.toml")).unwrap();
    System::new(Arc::new(spec)).unwrap()
}

/// A distance joint from ground to the flap's tip: a loop through the free body.
const FLAP_TETHER: &str = "\n[[joints]]\nname = \"tether\"\ntype = \"distance\"\n\
    body1 = \"ground\"\nbody2 = \"flap\"\npoint1 = [0.9, -0.3, 0.1]\npoint2 = [0.9, 0.1, 0.0]\n";

/// Gallery models with their inputs moving (smooth cubics), for the derivative checks.
fn excited(file: &str) -> System {
    let mut sys = model(file, "joint", "");
    excite(&mut sys);
    sys
}

/// Every input of `sys` moves: `u(t) = u0 + 0.2 t − 0.5 t² + 0.3 t³` scaled to the input.
fn excite(sys: &mut System) {
    for seg in sys.inputs_mut().segments.iter_mut() {
        let u0 = seg.coeffs[0];
        let s = 0.1 * (1.0 + u0.abs());
        *seg = InputSegment {
            t0: 0.0,
            coeffs: [u0, 2.0 * s, -5.0 * s, 3.0 * s],
        };
    }
}

/// The analytic `∂Ψ/∂ṗ` and `∂Ψ/∂p` (tangent recursions plus the elements through the
/// element layer's Hessians) against central differences of `Ψ`: the double pendulum (stiff
/// rotational springs and dampers), the chain (Coriolis and the moving suspension only), the
/// quarter car (springs to a driven stamp, a prismatic tree), the four-link (driven rotor), and
/// a spatial arm (non-planar rotations, bushing, rotational and point-to-point springs).
#[test]
fn force_jacobians_are_the_derivatives_of_the_bias_forces() {
    use mbsfmu::integrate::system::ForceJacobians;
    let mut quarter = model("quarter_car_rig.toml", "joint", "");
    quarter.inputs_mut().segments[0] = InputSegment {
        t0: 0.0,
        coeffs: [0.01, 0.2, -1.0, 3.0],
    };
    let mut four = model("four_link.toml", "joint", "");
    four.inputs_mut().segments[0] = InputSegment {
        t0: 0.0,
        coeffs: [0.0, 3.0, 0.5, 0.0],
    };
    let cases = [
        model("double_pendulum_stiff.toml", "joint", ""),
        System::new(Arc::new(revolute_chain_spec(7, 1e-2))).unwrap(),
        quarter,
        four,
        spatial_arm(),
        model("spherical_chain.toml", "joint", ""),
        excited("suspension_corner.toml"),
        excited("pendulum_chain.toml"),
        free_flap_in("joint", ""),
        cut_kinds_in("joint"),
        reversed_kinds_in("joint"),
    ];
    for mut sys in cases {
        let n = sys.n_q();
        let t = 0.31;
        let x = sys.initial_state(0.0).unwrap();
        let q: Vec<f64> = (0..n)
            .map(|k| x.q[k] + 0.03 * (k as f64 + 0.4).sin())
            .collect();
        let v: Vec<f64> = (0..n).map(|k| 1.1 * (0.7 * k as f64 + 0.2).cos()).collect();
        let (mut dq, mut dv) = (DMatrix::zeros(n, n), DMatrix::zeros(n, n));
        sys.force_jacobians(t, &q, &v, &mut dq, &mut dv);
        let (mut fp, mut fm) = (vec![0.0; n], vec![0.0; n]);
        for (what, jac) in [("∂Ψ/∂p", &dq), ("∂Ψ/∂ṗ", &dv)] {
            let (mut scale, mut err) = (0.0f64, 0.0f64);
            for j in 0..n {
                let h = 1e-6;
                let (mut qq, mut vv) = (q.clone(), v.clone());
                let x = if what == "∂Ψ/∂p" {
                    &mut qq
                } else {
                    &mut vv
                };
                x[j] += h;
                sys.forces(t, &qq, &vv, &mut fp);
                let x = if what == "∂Ψ/∂p" {
                    &mut qq
                } else {
                    &mut vv
                };
                x[j] -= 2.0 * h;
                sys.forces(t, &qq, &vv, &mut fm);
                for i in 0..n {
                    let fd = (fp[i] - fm[i]) / (2.0 * h);
                    scale = scale.max(fd.abs());
                    err = err.max((jac[(i, j)] - fd).abs());
                }
            }
            println!(
                "{}: |{what} − differences| {err:.2e} (scale {scale:.2e})",
                sys.spec().name
            );
            assert!(
                err < 1e-6 * scale.max(1.0),
                "{} {what}: {err} (scale {scale})",
                sys.spec().name
            );
        }
    }
}

/// The spatial arm (gyroscopic coupling between non-parallel axes, a skew prismatic joint,
/// bushing and springs) in both formulations: the same motion within the integration
/// tolerance (the absolute formulation is validated against independent references in
/// tests/spherical_chain_reference.rs and the paper tests).
#[test]
fn spatial_arm_agrees_with_the_absolute_formulation() {
    let mut abs = spatial_arm_in("absolute");
    let abs_out = run(&mut abs, Method::Bdf, 1e-9, 0.05, 2.0);
    for method in [Method::Bdf, Method::RosenbrockNystrom] {
        let mut sys = spatial_arm_in("joint");
        assert_eq!((sys.n_q(), sys.n_c()), (3, 0));
        let out = run(&mut sys, method, 1e-9, 0.05, 2.0);
        let mut err = 0.0f64;
        for ((_, y), (_, ya)) in out.iter().zip(&abs_out) {
            for k in 0..y.len() {
                err = err.max((y[k] - ya[k]).abs() / (1.0 + ya[k].abs()));
            }
        }
        println!(
            "spatial arm, joint vs absolute, {}: max relative output difference {err:.2e}",
            method.name()
        );
        assert!(err < 1e-6, "{}: {err}", method.name());
    }
}

/// The analytic `∂(Gᵀλ)/∂p` and `∂(M a)/∂p` against central differences of `Gᵀλ` and `M a`:
/// the slider-crank (prismatic cut joint, driven crank), the four-link (revolute cut joint),
/// the spatial arm closed by a tether (a distance cut joint in 3-D), the chain.
#[test]
fn constraint_hessians_are_the_derivatives_of_g_and_m() {
    use mbsfmu::integrate::system::ConstraintHessians;
    let mut slider = model("slider_crank.toml", "joint", "");
    slider.inputs_mut().segments[0] = InputSegment {
        t0: 0.0,
        coeffs: [0.2, 2.0, 0.0, 0.0],
    };
    let tether = "\n[[joints]]\nname = \"tether\"\ntype = \"distance\"\nbody1 = \"ground\"\n\
                  body2 = \"c\"\npoint1 = [0.3, 0.5, 0.2]\npoint2 = [1.0, 0.3, -0.6]\n";
    // The arm with the tether: a loop through three tree joints.
    let closed = {
        let base = spatial_arm_text("joint") + tether;
        let spec = mbsfmu::mbs::load_model_str(&base, Path::new("spatial_loop.toml")).unwrap();
        System::new(Arc::new(spec)).unwrap()
    };
    let cases = [
        slider,
        model("four_link.toml", "joint", ""),
        closed,
        System::new(Arc::new(revolute_chain_spec(6, 1e-2))).unwrap(),
        model("spherical_chain.toml", "joint", ""),
        excited("suspension_corner.toml"),
        excited("pendulum_chain.toml"),
        free_flap_in("joint", FLAP_TETHER),
        cut_kinds_in("joint"),
        reversed_kinds_in("joint"),
    ];
    for mut sys in cases {
        let x = sys.initial_state(0.0).unwrap();
        let (n, nc) = (sys.n_q(), sys.n_c());
        let t = 0.27;
        let q: Vec<f64> = (0..n)
            .map(|k| x.q[k] + 0.02 * (k as f64 + 0.4).sin())
            .collect();
        let lambda: Vec<f64> = (0..nc)
            .map(|k| 3.0 * (1.7 * k as f64 + 0.3).cos())
            .collect();
        let a: Vec<f64> = (0..n).map(|k| 2.0 * (0.9 * k as f64 + 0.1).sin()).collect();
        let (mut hg, mut hm) = (DMatrix::zeros(n, n), DMatrix::zeros(n, n));
        sys.constraint_force_jacobian(t, &q, &lambda, &mut hg);
        sys.mass_times_accel_jacobian(t, &q, &a, &mut hm);
        let l = nalgebra::DVector::from_column_slice(&lambda);
        let av = nalgebra::DVector::from_column_slice(&a);
        let eval = |sys: &mut System, qq: &[f64]| {
            let (mut g, mut m) = (DMatrix::zeros(nc, n), DMatrix::zeros(n, n));
            sys.constraint_jacobian(t, qq, &mut g);
            sys.mass_matrix(t, qq, &mut m);
            (g.transpose() * &l, m * &av)
        };
        let (mut eg, mut em, mut sg, mut sm) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        for j in 0..n {
            let h = 1e-6;
            let mut qq = q.clone();
            qq[j] += h;
            let (gp, mp) = eval(&mut sys, &qq);
            qq[j] -= 2.0 * h;
            let (gm, mm) = eval(&mut sys, &qq);
            for i in 0..n {
                let (fg, fm) = ((gp[i] - gm[i]) / (2.0 * h), (mp[i] - mm[i]) / (2.0 * h));
                sg = sg.max(fg.abs());
                sm = sm.max(fm.abs());
                eg = eg.max((hg[(i, j)] - fg).abs());
                em = em.max((hm[(i, j)] - fm).abs());
            }
        }
        println!(
            "{} (n_c {nc}): |∂(Gᵀλ)/∂p − differences| {eg:.2e} (scale {sg:.2e}), |∂(M a)/∂p − differences| {em:.2e} (scale {sm:.2e})",
            sys.spec().name
        );
        assert!(
            eg < 1e-6 * sg.max(1.0),
            "{}: Gᵀλ {eg} (scale {sg})",
            sys.spec().name
        );
        assert!(
            em < 1e-6 * sm.max(1.0),
            "{}: M a {em} (scale {sm})",
            sys.spec().name
        );
    }
}

/// The gallery models and the hand-built trees and loops that the joint formulation's tests
/// run over (built by [`joint_case`]).
const JOINT_CASES: [&str; 13] = [
    "bouncing_balls.toml",
    "double_pendulum_stiff.toml",
    "four_link.toml",
    "quarter_car_rig.toml",
    "slider_crank.toml",
    "pendulum_chain.toml",
    "spherical_chain.toml",
    "suspension_corner.toml",
    "revolute chain N = 8",
    "spatial loop",
    "free flap",
    "universal, cylindrical and planar joints",
    "the same reversed",
];

/// One of [`JOINT_CASES`] in joint coordinates.
fn joint_case(file: &str) -> System {
    match file {
        "revolute chain N = 8" => System::new(Arc::new(revolute_chain_spec(8, 1e-12))).unwrap(),
        "free flap" => free_flap_in("joint", FLAP_TETHER),
        "universal, cylindrical and planar joints" => cut_kinds_in("joint"),
        "the same reversed" => reversed_kinds_in("joint"),
        "spatial loop" => {
            let text = spatial_arm_text("joint")
                + "\n[[joints]]\nname = \"tether\"\ntype = \"distance\"\nbody1 = \"ground\"\n\
                   body2 = \"c\"\npoint1 = [0.3, 0.5, 0.2]\npoint2 = [1.0, 0.3, -0.6]\n";
            let spec = mbsfmu::mbs::load_model_str(&text, Path::new("loop.toml")).unwrap();
            System::new(Arc::new(spec)).unwrap()
        }
        _ => model(file, "joint", ""),
    }
}

/// Every integrator on every gallery model (the models'
/// inputs held at their start values, as tests/models_integrate.rs does for the absolute
/// formulation), plus the revolute chain and the spatial arm closed by a tether (a loop with
/// two degrees of freedom), 0.2 s: each reaches the end, stays on the loop constraints and
/// produces finite outputs. The integrators never learn which formulation runs.
#[test]
fn every_integrator_runs_on_every_supported_gallery_model_in_joint_coordinates() {
    let mut failures = Vec::new();
    for file in JOINT_CASES {
        for method in Method::ALL {
            let mut sys = joint_case(file);
            let t0 = sys.spec().experiment.start;
            let x0 = sys.initial_state(t0).unwrap();
            let (nq, nc) = (sys.n_q(), sys.n_c());
            let settings = Settings {
                method,
                rtol: 1e-4,
                atol: 1e-6,
                ..Settings::default()
            };
            let mut integ = AnyIntegrator::new(settings, nq, nc).unwrap();
            let name = format!("{file} / {}", method.name());
            if let Err(e) = integ.initialize(&mut sys, &x0) {
                failures.push(format!("{name}: initialize: {e}"));
                continue;
            }
            let t_end = t0 + 0.2;
            let mut ok = true;
            while Integrator::<System>::state(&integ).t < t_end {
                if let Err(e) = integ.step(&mut sys, t_end) {
                    failures.push(format!("{name}: {e}"));
                    ok = false;
                    break;
                }
            }
            if !ok {
                continue;
            }
            let x = Integrator::<System>::state(&integ).clone();
            let mut phi = vec![0.0; nc];
            sys.constraints(x.t, &x.q, &mut phi);
            let worst = phi.iter().fold(0.0f64, |m, p| m.max(p.abs()));
            let mut out = vec![0.0; sys.n_outputs()];
            sys.evaluate_outputs(&x, &mut out).unwrap();
            println!(
                "{name}: {} steps, residual {worst:.1e}",
                Integrator::<System>::stats(&integ).steps
            );
            if worst.is_nan() || worst >= 1e-4 || out.iter().any(|o| !o.is_finite()) {
                failures.push(format!("{name}: residual {worst:e}, outputs {out:?}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every gallery model in both formulations, its inputs moving (smooth cubics; the suspension
/// corner's post, the chain's suspension, the drivers' angles, the rig's stamp), the free
/// body with a loop through it, and bodies on universal, cylindrical and planar tree joints
/// (both directions): the same outputs within the integration tolerance (BDF at
/// 1e-9; each output relative to its largest magnitude, at least 1). The absolute formulation
/// is validated against independent references elsewhere (tests/python/test_fmpy_references.py,
/// the paper tests); the joint formulation's FMUs against the same references in
/// tests/python/test_fmpy_joint.py.
#[test]
fn every_gallery_model_agrees_with_the_absolute_formulation() {
    let cases: [(&str, f64); 11] = [
        ("bouncing_balls.toml", 1.0),
        ("double_pendulum_stiff.toml", 1.0),
        ("four_link.toml", 1.0),
        ("pendulum_chain.toml", 2.0),
        ("quarter_car_rig.toml", 1.0),
        ("slider_crank.toml", 1.0),
        ("spherical_chain.toml", 1.0),
        ("suspension_corner.toml", 1.0),
        ("free flap", 1.0),
        ("universal, cylindrical and planar joints", 1.0),
        ("the same reversed", 1.0),
    ];
    let mut failures = Vec::new();
    for (file, t_end) in cases {
        let make = |formulation: &str| -> System {
            let mut sys = match file {
                "free flap" => free_flap_in(formulation, FLAP_TETHER),
                "universal, cylindrical and planar joints" => cut_kinds_in(formulation),
                "the same reversed" => reversed_kinds_in(formulation),
                _ => model(file, formulation, ""),
            };
            excite(&mut sys);
            sys
        };
        let (mut abs, mut sys) = (make("absolute"), make("joint"));
        let abs_out = run(&mut abs, Method::Bdf, 1e-9, 0.05, t_end);
        let out = run(&mut sys, Method::Bdf, 1e-9, 0.05, t_end);
        let no = sys.n_outputs();
        let scale: Vec<f64> = (0..no)
            .map(|k| abs_out.iter().fold(1.0f64, |m, (_, y)| m.max(y[k].abs())))
            .collect();
        let mut err = 0.0f64;
        let mut worst = String::new();
        for ((_, y), (_, ya)) in out.iter().zip(&abs_out) {
            for k in 0..no {
                let e = (y[k] - ya[k]).abs() / scale[k];
                if e > err {
                    err = e;
                    worst = sys.spec().outputs[k].name.clone();
                }
            }
        }
        println!(
            "{file}: joint {} coordinates / absolute {}; max output difference {err:.2e} ({worst})",
            sys.n_q(),
            abs.n_q()
        );
        if err.is_nan() || err >= 1e-5 {
            failures.push(format!("{file}: {err:e} ({worst})"));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

/// The user chooses the tree by the file order: the suspension corner with its two ball joints
/// listed the other way round hangs the upright from the upper arm and cuts the lower ball
/// joint, and moves the same (post moving, BDF at 1e-9) as the gallery's tree.
#[test]
fn file_order_chooses_the_tree_and_not_the_motion() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/suspension_corner.toml");
    let text = std::fs::read_to_string(&path).unwrap().replacen(
        "[model]\n",
        "[model]\nformulation = \"joint\"\n",
        1,
    );
    // The two joint blocks (up to the next table), swapped whole.
    let block = |name: &str| -> String {
        let b = text
            .find(&format!("[[joints]]\nname = \"{name}\"\n"))
            .unwrap();
        let e = b + 2 + text[b + 2..].find("\n[[").unwrap();
        text[b..e].to_string()
    };
    let (lower, upper) = (block("lower_ball"), block("upper_ball"));
    let swapped = text
        .replacen(&lower, "@LOWER@", 1)
        .replacen(&upper, &lower, 1)
        .replacen("@LOWER@", &upper, 1);
    assert_ne!(swapped, text);
    let build = |t: &str| {
        let spec = mbsfmu::mbs::load_model_str(t, &path).unwrap();
        let mut sys = System::new(Arc::new(spec)).unwrap();
        excite(&mut sys);
        sys
    };
    let (mut given, mut other) = (build(&text), build(&swapped));
    let names = |sys: &System, js: &[usize]| -> Vec<String> {
        js.iter()
            .map(|&j| sys.spec().joints[j].name.clone())
            .collect()
    };
    let jm = other.joint_model().unwrap();
    assert!(names(&other, &jm.tree_joints()).contains(&"upper_ball".to_string()));
    assert_eq!(names(&other, jm.cut_joints()), ["lower_ball", "tie_rod"]);
    // The upper ball joint joins the upper arm and the upright.
    let ub = &other.spec().joints[jm.tree_joints()[3]];
    assert_eq!(ub.name, "upper_ball");
    assert_eq!(
        (ub.body1, ub.body2),
        (BodyRef::Body(2), BodyRef::Body(3)),
        "upper_arm and upright"
    );
    let a = run(&mut given, Method::Bdf, 1e-9, 0.05, 0.5);
    let b = run(&mut other, Method::Bdf, 1e-9, 0.05, 0.5);
    let mut err = 0.0f64;
    for ((_, y), (_, yb)) in a.iter().zip(&b) {
        for k in 0..y.len() {
            err = err.max((y[k] - yb[k]).abs() / (1.0 + y[k].abs()));
        }
    }
    assert_eq!(a.len(), b.len());
    let wheel = out_index(&given, "wheel_z");
    let travel = a
        .iter()
        .map(|(_, y)| (y[wheel] - a[0].1[wheel]).abs())
        .fold(0.0, f64::max);
    println!(
        "suspension corner, tree through the upper ball joint: wheel travel {travel:.2e} m, \
         max relative difference {err:.2e}"
    );
    assert!(travel > 1e-3, "the corner moves: {travel}");
    assert!(err < 1e-6, "{err}");
}

/// A model whose every tree coordinate is driven has nothing to integrate in joint
/// coordinates: `System::new` says so and names the way out, instead of panicking on an empty
/// saddle-point matrix (found on a driven prismatic body); the absolute formulation runs it.
#[test]
fn a_fully_driven_tree_is_refused_with_a_clear_message() {
    let text = |formulation: &str| {
        format!(
            r#"
[model]
name = "driven"
formulation = "{formulation}"
gravity = [0.0, 0.0, -9.81]
[[inputs]]
name = "s"
start = 0.1
[[bodies]]
name = "cart"
mass = 3.0
inertia = [0.1, 0.1, 0.1]
position = [0.0, 0.0, 0.0]
[[joints]]
name = "lift"
type = "prismatic"
body1 = "ground"
body2 = "cart"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]
[[drivers]]
name = "drive"
joint = "lift"
motion = "s"
"#
        )
    };
    let path = std::path::Path::new("driven.toml");
    let joint = mbsfmu::mbs::load_model_str(&text("joint"), path).unwrap();
    let err = match mbsfmu::mbs::system::System::new(std::sync::Arc::new(joint)) {
        Ok(_) => panic!("a fully driven tree was accepted in joint coordinates"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("every joint coordinate of the tree is driven")
            && err.contains("formulation = \"absolute\""),
        "{err}"
    );
    let absolute = mbsfmu::mbs::load_model_str(&text("absolute"), path).unwrap();
    let mut sys = mbsfmu::mbs::system::System::new(std::sync::Arc::new(absolute)).unwrap();
    sys.initial_state(0.0).unwrap();
}

// ----- fast paths on tree joint coordinates against the general element path -----

/// `Ψ` with the fast paths on and off at `states`; returns the largest difference relative
/// to the largest force.
fn forces_fast_and_general(sys: &mut System, states: &[(Vec<f64>, Vec<f64>)]) -> f64 {
    let n = sys.n_q();
    let mut worst = 0.0f64;
    for (q, v) in states {
        let (mut f_fast, mut f_gen) = (vec![0.0; n], vec![0.0; n]);
        sys.set_joint_fast_paths(true);
        Mechanical::forces(sys, 0.4, q, v, &mut f_fast);
        sys.set_joint_fast_paths(false);
        Mechanical::forces(sys, 0.4, q, v, &mut f_gen);
        sys.set_joint_fast_paths(true);
        let scale = f_gen.iter().fold(1.0f64, |m, x| m.max(x.abs()));
        for i in 0..n {
            worst = worst.max((f_fast[i] - f_gen[i]).abs() / scale);
        }
    }
    worst
}

/// A rotational spring-damper and a joint stop on tree joints that run from body 2 to body 1
/// (`sigma = −1`: the coordinate keeps the joint's own sign), a revolute and a prismatic one.
const REVERSED_TREE: &str = r#"
[model]
name = "reversed_tree"
formulation = "joint"
gravity = [0.0, -9.81, 0.0]

[[bodies]]
name = "bar"
mass = 2.0
inertia = [1e-3, 0.5, 0.5]
position = [1.0, 0.0, 0.0]
velocity = [0.0, 3.0, 0.0]
angular_velocity = [0.0, 0.0, 3.0]

[[bodies]]
name = "sled"
mass = 1.0
inertia = [0.1, 0.1, 0.1]
position = [0.0, -1.0, 0.0]
velocity = [0.5, 0.0, 0.0]

[[joints]]
name = "pivot"
type = "revolute"
body1 = "bar"
body2 = "ground"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]

[[joints]]
name = "guide"
type = "prismatic"
body1 = "sled"
body2 = "ground"
point = [0.0, -1.0, 0.0]
axis = [1.0, 0.0, 0.0]

[[forces]]
name = "torsion"
type = "rotational_spring_damper"
joint = "pivot"
stiffness = 50.0
damping = 2.0
free_angle = 0.5

[[forces]]
name = "stop"
type = "joint_stop"
joint = "guide"
lower = -0.2
upper = 0.3
stiffness = 1e4
damping = 10.0

[[outputs]]
name = "angle"
type = "joint_coordinate"
joint = "pivot"
"#;

#[test]
fn fast_paths_on_tree_coordinates_equal_the_general_path() {
    // Stiff double pendulum: both rotational spring-dampers sit on tree revolute joints.
    let mut sys = model("double_pendulum_stiff.toml", "joint", "");
    sys.initial_state(0.0).unwrap();
    assert_eq!(sys.joint_tree_coordinate_terms(), 2);
    let states: Vec<(Vec<f64>, Vec<f64>)> = [
        ([0.0, -0.26], [0.0, 10.0]),
        ([0.3, 0.2], [-1.0, 3.0]),
        ([-2.0, 3.3], [4.0, -7.0]),
        ([7.5, -4.0], [0.5, 20.0]),
    ]
    .iter()
    .map(|(q, v)| (q.to_vec(), v.to_vec()))
    .collect();
    let d = forces_fast_and_general(&mut sys, &states);
    assert!(
        d < 1e-12,
        "double pendulum: Ψ differs by {d:.2e} (relative)"
    );

    // Reversed tree joints, revolute and prismatic, inside and beyond the stop.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/x.toml");
    let spec = mbsfmu::mbs::load_model_str(REVERSED_TREE, &path).unwrap();
    let mut sys = System::new(Arc::new(spec)).unwrap();
    sys.initial_state(0.0).unwrap();
    assert_eq!(sys.n_q(), 2);
    assert_eq!(sys.joint_tree_coordinate_terms(), 2);
    let mut states = Vec::new();
    for th in [0.3, 2.9, -3.5, 7.0] {
        for s in [-0.25, 0.0, 0.35] {
            states.push((vec![th, s], vec![1.5 - th, 0.8 * s - 0.1]));
        }
    }
    let d = forces_fast_and_general(&mut sys, &states);
    assert!(d < 1e-12, "reversed tree: Ψ differs by {d:.2e} (relative)");
}

/// Whole runs with the fast paths on and off: the angle branches (tracked from the joint
/// coordinates or from the absolute poses) and the driver torque (the joint formulation's
/// inverse dynamics or the absolute saddle point) give the same outputs, to the integration
/// tolerance (round-off differences through the step control).
#[test]
fn fast_paths_give_the_same_runs_as_the_general_path() {
    let runs = |file: &str, drive: bool, t_end: f64| {
        let mut res = Vec::new();
        for on in [true, false] {
            let mut sys = model(file, "joint", "");
            if drive {
                sys.inputs_mut().segments[0] = InputSegment {
                    t0: 0.0,
                    coeffs: [0.0, 2.0 * std::f64::consts::PI, 0.5, 0.3],
                };
            }
            sys.set_joint_fast_paths(on);
            res.push(run(&mut sys, Method::Bdf, 1e-8, 0.01, t_end));
        }
        res
    };
    // The stiff pendulum spins its outer bar through several turns: the angle outputs and
    // the springs pass the ±π branch many times.
    let r = runs("double_pendulum_stiff.toml", false, 2.0);
    let mut worst = 0.0f64;
    for ((_, a), (_, b)) in r[0].iter().zip(&r[1]) {
        for (x, y) in a.iter().zip(b) {
            worst = worst.max((x - y).abs() / (1.0 + y.abs()));
        }
    }
    // Ψ agrees to round-off (above); the step control amplifies that over 2 s of this
    // chaotic motion to the integration tolerance (measured 1.8e-8 at rtol 1e-8), no more.
    assert!(
        worst < 1e-7,
        "double pendulum outputs differ by {worst:.2e}"
    );
    // The slider-crank's crank torque (a driver force on the driven tree joint).
    let r = runs("slider_crank.toml", true, 1.0);
    let sys = model("slider_crank.toml", "joint", "");
    let k = out_index(&sys, "crank_torque");
    let (mut worst, mut scale) = (0.0f64, 0.0f64);
    for ((_, a), (_, b)) in r[0].iter().zip(&r[1]) {
        worst = worst.max((a[k] - b[k]).abs());
        scale = scale.max(b[k].abs());
    }
    assert!(scale > 1.0, "the crank torque is exercised ({scale})");
    assert!(
        worst < 1e-9 * scale,
        "crank torque differs by {worst:.2e} (max |τ| {scale:.3})"
    );
    // At one state off the run: the free coordinates' inverse-dynamics residual is zero and
    // the driver torque equals the absolute saddle point's multiplier.
    let mut sys = model("slider_crank.toml", "joint", "");
    sys.inputs_mut().segments[0] = InputSegment {
        t0: 0.0,
        coeffs: [0.0, 2.0 * std::f64::consts::PI, 0.5, 0.3],
    };
    let x0 = sys.initial_state(0.0).unwrap();
    let mut x = x0.clone();
    x.t = 0.0;
    x.v = vec![3.0, -2.0];
    let mut y = [vec![0.0; sys.n_outputs()], vec![0.0; sys.n_outputs()]];
    for (on, y) in [true, false].into_iter().zip(y.iter_mut()) {
        sys.set_joint_fast_paths(on);
        sys.evaluate_outputs(&x, y).unwrap();
    }
    assert!(
        (y[0][k] - y[1][k]).abs() < 1e-10 * (1.0 + y[1][k].abs()),
        "crank torque {} against {}",
        y[0][k],
        y[1][k]
    );
}

/// The joint formulation's sparse structure (what BDF's residual and the half-implicit
/// method's sparse path use, reported for forests of trees only): on every case of `JOINT_CASES` (gallery models, hand-built trees and a loop), at a generic
/// state (assembled, then every coordinate perturbed) with the inputs moving, the fills
/// scattered on their patterns equal the dense `M` and `G` bit for bit, the one-pass
/// `constraint_values` equals the separate `Φ`, `G` and `Φ_t` calls bit for bit, and each
/// pattern lists an entry at most once.
#[test]
fn sparse_fills_equal_the_dense_methods_in_joint_coordinates() {
    use mbsfmu::integrate::sparse::SparseStructure;
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for file in JOINT_CASES {
        let mut sys = joint_case(file);
        excite(&mut sys);
        let x = sys.initial_state(0.0).unwrap();
        let (nq, nc) = (sys.n_q(), sys.n_c());
        let q: Vec<f64> =
            x.q.iter()
                .enumerate()
                .map(|(i, v)| v + 0.013 * ((i as f64) * 1.7).sin())
                .collect();
        let t = 0.37;
        // Reported to the integrators only for a forest (`M` in blocks); the fills hold anyway.
        let forest = sys.sparse_structure().is_some();
        let s: &mut dyn SparseStructure = &mut sys;
        let mp = s.mass_pattern();
        let jp = s.constraint_jacobian_pattern();
        let (mut mv, mut jv) = (vec![0.0; mp.len()], vec![0.0; jp.len()]);
        s.mass_matrix_values(t, &q, &mut mv);
        s.constraint_jacobian_values(t, &q, &mut jv);
        let (mut phi1, mut phi_t1, mut jv1) =
            (vec![0.0; nc], vec![0.0; nc], vec![f64::NAN; jp.len()]);
        s.constraint_values(t, &q, &mut phi1, &mut jv1, &mut phi_t1);
        for (name, p) in [("M", &mp), ("G", &jp)] {
            let mut sorted = p.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(
                sorted.len(),
                p.len(),
                "{file}: {name} pattern has duplicates"
            );
        }
        let (mut md, mut jd) = (DMatrix::zeros(nq, nq), DMatrix::zeros(nc, nq));
        sys.mass_matrix(t, &q, &mut md);
        sys.constraint_jacobian(t, &q, &mut jd);
        let (mut ms, mut js) = (DMatrix::zeros(nq, nq), DMatrix::zeros(nc, nq));
        for (&(r, c), v) in mp.iter().zip(&mv) {
            ms[(r, c)] = *v;
        }
        for (&(r, c), v) in jp.iter().zip(&jv) {
            js[(r, c)] = *v;
        }
        assert_eq!(bits(ms.as_slice()), bits(md.as_slice()), "{file}: M");
        assert_eq!(bits(js.as_slice()), bits(jd.as_slice()), "{file}: G");
        let (mut phi, mut phi_t) = (vec![0.0; nc], vec![0.0; nc]);
        sys.constraints(t, &q, &mut phi);
        sys.constraint_time_derivative(t, &q, &mut phi_t);
        assert_eq!(bits(&phi1), bits(&phi), "{file}: Φ");
        assert_eq!(bits(&jv1), bits(&jv), "{file}: G values");
        assert_eq!(bits(&phi_t1), bits(&phi_t), "{file}: Φ_t");
        let expect_forest = matches!(
            file,
            "bouncing_balls.toml"
                | "pendulum_chain.toml"
                | "free flap"
                | "universal, cylindrical and planar joints"
        );
        assert_eq!(forest, expect_forest, "{file}: structure reported");
        println!(
            "{file}: forest {forest}, n_q {nq}, n_c {nc}, M {} of {} entries, G {} of {}",
            mp.len(),
            nq * nq,
            jp.len(),
            nq * nc
        );
    }
}

/// `Mechanical::saddle_residual` (one inverse-dynamics pass, what the BDF's re-anchoring
/// evaluates at its path points) against `r − K x` with `K` formed from `M` and `Φ_q`, on
/// every gallery model in joint coordinates, at a state off the initial one (Euler parameters
/// off the unit sphere too), with moving inputs (driven coordinates, moving frames) and an
/// arbitrary `x = (a, λ)`.
#[test]
fn saddle_residual_equals_the_formed_saddle_point_system() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let file = path.file_name().unwrap().to_str().unwrap().to_owned();
        let mut sys = model(&file, "joint", "");
        for (i, seg) in sys.inputs_mut().segments.iter_mut().enumerate() {
            *seg = InputSegment {
                t0: 0.0,
                coeffs: [0.01 * i as f64, 0.3, -0.7, 1.9],
            };
        }
        let x0 = sys.initial_state(0.0).unwrap();
        let (nq, nc) = (sys.n_q(), sys.n_c());
        let t = 0.17;
        let q: Vec<f64> = (0..nq)
            .map(|i| x0.q[i] + 0.02 * (i as f64 + 1.0).sin())
            .collect();
        let v: Vec<f64> = (0..nq)
            .map(|i| 0.8 * (1.3 * i as f64 + 0.4).cos())
            .collect();
        let x: Vec<f64> = (0..nq + nc)
            .map(|i| 2.0 * (0.7 * i as f64 + 0.2).sin())
            .collect();
        let mut own = vec![f64::NAN; nq + nc];
        assert!(sys.saddle_residual(t, &q, &v, &x, &mut own), "{file}");
        let mut m = DMatrix::zeros(nq, nq);
        let mut g = DMatrix::zeros(nc, nq);
        let mut r = vec![0.0; nq + nc];
        sys.mass_matrix(t, &q, &mut m);
        sys.constraint_jacobian(t, &q, &mut g);
        sys.forces(t, &q, &v, &mut r[..nq]);
        sys.acceleration_rhs(t, &q, &v, &mut r[nq..]);
        let (a, lambda) = x.split_at(nq);
        for i in 0..nq + nc {
            // r − K x and the size of its terms (the tolerance's scale).
            let (kx, scale) = if i < nq {
                let terms = (0..nq)
                    .map(|j| m[(i, j)] * a[j])
                    .chain((0..nc).map(|k| g[(k, i)] * lambda[k]));
                terms.fold((0.0, r[i].abs()), |(s, z), x| (s + x, z + x.abs()))
            } else {
                let k = i - nq;
                (0..nq)
                    .map(|j| g[(k, j)] * a[j])
                    .fold((0.0, r[i].abs()), |(s, z), x| (s + x, z + x.abs()))
            };
            let formed = r[i] - kx;
            assert!(
                (own[i] - formed).abs() <= 1e-11 * (1.0 + scale),
                "{file}: entry {i} of r − K x: own pass {} against formed {formed} (scale {scale})",
                own[i]
            );
        }
        checked += 1;
    }
    assert!(checked >= 9, "gallery models checked: {checked}");
}

/// The BDF's re-anchoring derivatives through the joint formulation's own residual pass
/// (`saddle_residual` at every path point): `ȧ` agrees with the central difference of `a`
/// and `a⃛` with the central difference of `ä`, each recomputed from scratch at `t ± ε` on
/// the trajectory's Taylor path. On the suspension corner (loops, Euler parameters, the post
/// a moving frame) and the slider-crank (a driven crank), both moving, at a state the BDF
/// reached. The increments are the BDF's at h = 1 ms (`δ = 0.02 h`, `δ₃ = h/4`) on the
/// corner, and `δ₃ = 2.5 h` on the slider-crank, whose motion is slow.
///
/// `a⃛` comes from one path point at `δ₃` (src/integrate/reanchor.rs, `third_derivative`)
/// and carries two errors by design: its truncation, first order in `δ₃`, and the forward
/// difference's error in `ȧ`, `R₁ / δ₃²`, with `R₁` that difference's truncation (about
/// `δ_f x₂`, with the multipliers' rates in `x₂`: 13 % of the slider-crank's `a⃛` at `h/4`)
/// and its round-off (`ε |r| / δ_f`: on the corner a few percent). At a given state and `δ`
/// both are `C δ₃ + D / δ₃²` with the same `C`, `D` (the round-off too: the same `x₁`), so
/// three `δ₃` (2δ₃, δ₃, δ₃/2) give `a⃛` with both removed, and that is what is compared, to
/// 0.2 % of the scale (measured: corner 1e-4 relative, slider-crank 0.2 %). The `a⃛` the BDF
/// uses, at `δ₃`, must stay within 10 % of it (measured: corner up to 4 %, slider-crank 3 %).
#[test]
fn reanchoring_derivatives_in_joint_coordinates_agree_with_differences() {
    use mbsfmu::integrate::reanchor::ReanchorWork;
    for (file, delta3) in [
        ("suspension_corner.toml", 2.5e-4),
        ("slider_crank.toml", 2.5e-3),
    ] {
        let t0 = 0.05;
        let mut sys = model(file, "joint", "");
        for seg in sys.inputs_mut().segments.iter_mut() {
            *seg = InputSegment {
                t0: 0.0,
                coeffs: [0.0, 0.4, -2.0, 30.0],
            };
        }
        let x0 = sys.initial_state(0.0).unwrap();
        let settings = Settings {
            method: Method::Bdf,
            rtol: 1e-8,
            atol: 1e-8,
            ..Settings::default()
        };
        let mut integ = AnyIntegrator::new(settings, sys.n_q(), sys.n_c()).unwrap();
        integ.initialize(&mut sys, &x0).unwrap();
        while Integrator::<System>::state(&integ).t < t0 - 1e-12 {
            integ.step(&mut sys, t0).unwrap();
        }
        let x = Integrator::<System>::state(&integ).clone();
        let (t, nq) = (x.t, sys.n_q());
        let derivs = |sys: &mut System, s: f64, jet: &[Vec<f64>; 4], delta3: f64| {
            let (s2, s3, s4, s5) = (
                s * s / 2.0,
                s.powi(3) / 6.0,
                s.powi(4) / 24.0,
                s.powi(5) / 120.0,
            );
            let [a, ad, add, a3] = jet;
            let qs: Vec<f64> = (0..nq)
                .map(|i| x.q[i] + s * x.v[i] + s2 * a[i] + s3 * ad[i] + s4 * add[i] + s5 * a3[i])
                .collect();
            let vs: Vec<f64> = (0..nq)
                .map(|i| x.v[i] + s * a[i] + s2 * ad[i] + s3 * add[i] + s4 * a3[i])
                .collect();
            let mut w = ReanchorWork::default();
            assert!(w
                .rhs_derivatives(sys, t + s, &qs, &vs, 2e-5, Some(delta3))
                .unwrap());
            [w.a, w.adot, w.addot, w.adddot]
        };
        let zero = vec![0.0; nq];
        let zeros = [zero.clone(), zero.clone(), zero.clone(), zero];
        let at = |sys: &mut System, d3: f64| derivs(sys, 0.0, &zeros, d3);
        let (one_point, twice, half) = (
            at(&mut sys, delta3),
            at(&mut sys, 2.0 * delta3)[3].clone(),
            at(&mut sys, 0.5 * delta3)[3].clone(),
        );
        // `A(d) = a⃛ + C d + D / d²` at d = 2δ₃, δ₃, δ₃/2, solved for `a⃛`.
        let extrapolated: Vec<f64> = (0..nq)
            .map(|i| (-4.0 * twice[i] + 9.0 * one_point[3][i] - 2.0 * half[i]) / 3.0)
            .collect();
        let mut jet = one_point.clone();
        jet[3] = extrapolated;
        let eps = 1e-4;
        let (plus, minus) = (
            derivs(&mut sys, eps, &jet, delta3),
            derivs(&mut sys, -eps, &jet, delta3),
        );
        for (j, name) in [(1, "ȧ"), (3, "a⃛")] {
            let scale = jet[j].iter().fold(0.0f64, |m, z| m.max(z.abs()));
            assert!(scale > 1.0, "{file}: {name} = {:?}", jet[j]);
            for i in 0..nq {
                let fd = (plus[j - 1][i] - minus[j - 1][i]) / (2.0 * eps);
                assert!(
                    (fd - jet[j][i]).abs() < 2e-3 * scale,
                    "{file}: coordinate {i}: {name} {} vs differences {fd} (scale {scale})",
                    jet[j][i]
                );
            }
        }
        let scale = jet[3].iter().fold(0.0f64, |m, z| m.max(z.abs()));
        for i in 0..nq {
            assert!(
                (one_point[3][i] - jet[3][i]).abs() < 0.1 * scale,
                "{file}: coordinate {i}: a⃛ at δ₃ {} vs extrapolated {} (scale {scale})",
                one_point[3][i],
                jet[3][i]
            );
        }
    }
}

/// A planar mechanism in a tilted plane (normal (1, 2, 2)/3): a bar on a moving frame, a
/// slider travelling along it, a second bar on the slider. The inertias have products with the
/// normal, gravity and the frame's motion have components across the plane, and a
/// point-to-point spring acts through the element layer's wrenches: everything the planar
/// recursion must ignore or project.
const TILTED_PLANAR: &str = r#"
[model]
name = "tilted_planar"
formulation = "joint"
gravity = [1.0, -9.81, 3.0]

[[inputs]]
name = "s"

[[frames]]
name = "base"
position = ["0.3*s", "-0.2*s", "0.5*s"]

[[bodies]]
name = "bar1"
mass = 2.0
inertia = { xx = 0.2, yy = 0.3, zz = 0.25, xy = 0.01, xz = -0.02, yz = 0.015 }
position = ["2/sqrt(5)", "-1/sqrt(5)", 0.0]

[[bodies]]
name = "slider"
mass = 0.7
inertia = { xx = 0.02, yy = 0.03, zz = 0.025, xy = -0.004, xz = 0.002, yz = 0.001 }
position = ["4/sqrt(5)", "-2/sqrt(5)", 0.0]

[[bodies]]
name = "bar2"
mass = 1.1
inertia = { xx = 0.1, yy = 0.12, zz = 0.08, xy = 0.003, xz = 0.005, yz = -0.002 }
position = ["4/sqrt(5) + 0.8*2/(3*sqrt(5))", "-2/sqrt(5) + 0.8*4/(3*sqrt(5))", "-0.8*5/(3*sqrt(5))"]

[[joints]]
name = "shoulder"
type = "revolute"
body1 = "base"
body2 = "bar1"
point = [0.0, 0.0, 0.0]
axis = ["1/3", "2/3", "2/3"]

[[joints]]
name = "rail"
type = "prismatic"
body1 = "bar1"
body2 = "slider"
point = ["4/sqrt(5)", "-2/sqrt(5)", 0.0]
axis = ["2/sqrt(5)", "-1/sqrt(5)", 0.0]

[[joints]]
name = "elbow"
type = "revolute"
body1 = "slider"
body2 = "bar2"
point = ["4/sqrt(5)", "-2/sqrt(5)", 0.0]
axis = ["-1/3", "-2/3", "-2/3"]

[[forces]]
name = "shoulder_spring"
type = "rotational_spring_damper"
joint = "shoulder"
stiffness = 40.0
damping = 1.5

[[forces]]
name = "tether"
type = "spring_damper"
body1 = "ground"
point1 = [0.5, 1.0, -0.3]
body2 = "bar2"
point2 = ["4/sqrt(5) + 1.2*2/(3*sqrt(5))", "-2/sqrt(5) + 1.2*4/(3*sqrt(5))", "-1.2*5/(3*sqrt(5))"]
stiffness = 300.0
damping = 4.0
free_length = 1.0
"#;

/// Planar trees (`src/mbs/joint/planar.rs`): `M` and `Ψ` by the planar recursion against the
/// spatial one (the fast paths off: world-frame CRBA and Newton–Euler, elements through the
/// general path), on every gallery model in joint coordinates and on `TILTED_PLANAR`, at
/// moving states with moving inputs. The planar path is taken where the tree is planar
/// (checked), and not taken on the 3-D models.
#[test]
fn planar_trees_match_the_spatial_recursion() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let mut cases: Vec<(String, System)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("toml"))
        .map(|p| {
            let file = p.file_name().unwrap().to_str().unwrap().to_owned();
            let sys = model(&file, "joint", "");
            (file, sys)
        })
        .collect();
    let spec = mbsfmu::mbs::load_model_str(TILTED_PLANAR, Path::new("tilted.toml")).unwrap();
    cases.push(("tilted".into(), System::new(Arc::new(spec)).unwrap()));
    let mut planar = Vec::new();
    for (file, mut sys) in cases {
        for (i, seg) in sys.inputs_mut().segments.iter_mut().enumerate() {
            *seg = InputSegment {
                t0: 0.0,
                coeffs: [0.01 * i as f64, 0.3, -0.7, 1.9],
            };
        }
        let x0 = sys.initial_state(0.0).unwrap();
        let nq = sys.n_q();
        let mut worst = 0.0f64;
        for (t, shift) in [(0.17, 0.02), (0.9, -0.3), (1.6, 0.7)] {
            let q: Vec<f64> = (0..nq)
                .map(|i| x0.q[i] + shift * (i as f64 + 1.0).sin())
                .collect();
            let v: Vec<f64> = (0..nq)
                .map(|i| 0.8 * (1.3 * i as f64 + 0.4 + t).cos())
                .collect();
            let mut m = [DMatrix::zeros(nq, nq), DMatrix::zeros(nq, nq)];
            let mut f = [vec![0.0; nq], vec![0.0; nq]];
            for (k, on) in [true, false].into_iter().enumerate() {
                sys.set_joint_fast_paths(on);
                sys.mass_matrix(t, &q, &mut m[k]);
                sys.forces(t, &q, &v, &mut f[k]);
            }
            sys.set_joint_fast_paths(true);
            let m_scale = m[1].amax().max(1e-300);
            let f_scale = f[1].iter().fold(1.0f64, |a, x| a.max(x.abs()));
            worst = worst.max((&m[0] - &m[1]).amax() / m_scale);
            for (x, y) in f[0].iter().zip(&f[1]) {
                worst = worst.max((x - y).abs() / f_scale);
            }
        }
        assert!(
            worst <= 1e-12,
            "{file}: planar against spatial, worst {worst:e}"
        );
        if sys.joint_planar_tree() == Some(true) {
            planar.push(file);
        }
    }
    planar.sort();
    // The plane-bound gallery models, and the tilted one; not the spherical chain, the
    // suspension corner or the quarter cars' vertical models with 3-D bodies.
    for must in [
        "double_pendulum_stiff.toml",
        "four_link.toml",
        "slider_crank.toml",
        "tilted",
    ] {
        assert!(
            planar.iter().any(|p| p == must),
            "{must} not planar: {planar:?}"
        );
    }
    for never in ["spherical_chain.toml", "suspension_corner.toml"] {
        assert!(
            !planar.iter().any(|p| p == never),
            "{never} taken as planar"
        );
    }
}

/// The accelerations, multipliers and outputs of `sys` at `(t, q, v)`.
fn accelerations_and_outputs(
    sys: &mut System,
    t: f64,
    q: &[f64],
    v: &[f64],
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut a, mut l) = (vec![0.0; sys.n_q()], vec![0.0; sys.n_c()]);
    sys.accelerations_into(t, q, v, &mut a, &mut l).unwrap();
    let mut out = vec![0.0; sys.n_outputs()];
    let x = MechState {
        t,
        q: q.to_vec(),
        v: v.to_vec(),
        lambda: l.clone(),
    };
    sys.evaluate_outputs(&x, &mut out).unwrap();
    (a, l, out)
}

/// A parameter change of a body's mass at an unchanged state: the planar-first load must not
/// keep the pose (inertias) or the transmitted forces it made with the old mass. Each
/// operation is checked against a system built with the new value.
#[test]
fn planar_first_load_follows_a_mass_parameter_at_the_same_state() {
    let with_mass_parameter = |m2: f64| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/double_pendulum_stiff.toml");
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replacen("[model]\n", "[model]\nformulation = \"joint\"\n", 1)
            .replacen("mass = 0.3\n", "mass = \"m2\"\n", 1)
            .replacen(
                "[[parameters]]\nname = \"k1\"",
                &format!(
                    "[[parameters]]\nname = \"m2\"\nvalue = {m2}\n\n[[parameters]]\nname = \"k1\""
                ),
                1,
            );
        let spec = mbsfmu::mbs::load_model_str(&text, &path).unwrap();
        System::new(Arc::new(spec)).unwrap()
    };
    let (q, v) = ([0.3, 0.2], [-1.0, 3.0]);
    // Each operation on its own after the change (the mass matrix's entries as a vector).
    let op = |name: &str, sys: &mut System| -> Vec<f64> {
        match name {
            "mass matrix" => {
                let mut m = DMatrix::zeros(2, 2);
                sys.mass_matrix(0.0, &q, &mut m);
                m.as_slice().to_vec()
            }
            "forces" => {
                let mut f = vec![0.0; 2];
                sys.forces(0.0, &q, &v, &mut f);
                f
            }
            _ => accelerations_and_outputs(sys, 0.0, &q, &v).0,
        }
    };
    for name in ["mass matrix", "forces", "accelerations"] {
        let mut sys = with_mass_parameter(0.3);
        // A planar-first load at this state (after one at another state); the accelerations
        // themselves take the small-tree kernel, which does not load.
        for qs in [[0.5, -0.1], q] {
            accelerations_and_outputs(&mut sys, 0.0, &qs, &v);
            op("forces", &mut sys);
        }
        assert!(
            sys.joint_planar_first_poses() > 0,
            "{name}: planar-first load not taken"
        );
        let i = sys
            .spec()
            .parameters
            .iter()
            .position(|p| p.name == "m2")
            .unwrap();
        sys.set_parameter(i, 0.9).unwrap();
        let got = op(name, &mut sys);
        let want = op(name, &mut with_mass_parameter(0.9));
        let before = op(name, &mut with_mass_parameter(0.3));
        let close = |a: &[f64], b: &[f64]| {
            a.iter()
                .zip(b)
                .all(|(x, y)| (x - y).abs() <= 1e-12 * (1.0 + y.abs()))
        };
        assert!(
            close(&got, &want),
            "{name} after the mass change: {got:?}, fresh: {want:?}"
        );
        // The change shows in what is compared.
        assert!(!close(&before, &want), "{name}: the mass does not show");
    }
}

/// The planar-first load (`planar::PlanarRef`: a planar tree's subspaces, inertias,
/// velocities and bias accelerations straight from the coordinates, the spatial poses made
/// only on demand) against the spatial recursion with the fast paths off, along a sequence of
/// states as an integration visits them: `M`, `Ψ` and the accelerations at each state, then
/// the outputs (which need the spatial poses the planar-first load left out). On the planar
/// gallery models and on `TILTED_PLANAR` without its tether (every force on a tree
/// coordinate) with the elbow driven: a moving frame, a prismatic joint between two
/// revolutes about an axis across the world axes, a driven joint, inertia products. The tilted
/// mechanism's five free coordinates (with the block's planar joint) take the articulated-body
/// solve (`aba.rs`), the double pendulum and the cart the small-tree kernel
/// (`planar/small.rs`): on a tree both are checked against `M⁻¹ Ψ` from the same state's `M`
/// and `Ψ` too.
const CART_PENDULUM: &str = r#"[model]
name = "cart"
formulation = "joint"
gravity = [0.0, -9.81, 0.0]
[[bodies]]
name = "cart"
mass = 2.0
inertia = [0.1, 0.2, 0.3]
position = [0.3, 0.4, 0.0]
[[bodies]]
name = "arm"
mass = 0.7
inertia = [0.01, 0.04, 0.045]
position = [0.3, -0.1, 0.0]
[[joints]]
name = "rail"
type = "prismatic"
body1 = "ground"
body2 = "cart"
point = [0.0, 0.0, 0.0]
axis = [0.6, 0.8, 0.0]
[[joints]]
name = "hinge"
type = "revolute"
body1 = "cart"
body2 = "arm"
point = [0.3, 0.4, 0.0]
axis = [0.0, 0.0, 1.0]
[[forces]]
name = "hinge_spring"
type = "rotational_spring_damper"
joint = "hinge"
stiffness = 30.0
damping = 0.4
"#;

#[test]
fn planar_first_load_equals_the_spatial_recursion() {
    let tether = TILTED_PLANAR.find("[[forces]]\nname = \"tether\"").unwrap();
    // A block on a planar joint on bar 2 too: its stages move each other's axes.
    let bar2 = "[\"4/sqrt(5) + 0.8*2/(3*sqrt(5))\", \"-2/sqrt(5) + 0.8*4/(3*sqrt(5))\", \
                \"-0.8*5/(3*sqrt(5))\"]";
    let tilted = format!(
        "{}\n[[inputs]]\nname = \"elbow_angle\"\n\n[[drivers]]\nname = \"elbow_drive\"\n\
         joint = \"elbow\"\nmotion = {{ input = \"elbow_angle\" }}\n\n[[bodies]]\n\
         name = \"block\"\nmass = 0.5\ninertia = {{ xx = 0.01, yy = 0.02, zz = 0.015, \
         xy = 0.001, xz = 0.0, yz = 0.002 }}\nposition = {bar2}\n\n[[joints]]\n\
         name = \"slab\"\ntype = \"planar\"\nbody1 = \"bar2\"\nbody2 = \"block\"\n\
         point = {bar2}\naxis = [\"1/3\", \"2/3\", \"2/3\"]\n\n[[outputs]]\n\
         name = \"bar2_x\"\ntype = \"position\"\nbody = \"bar2\"\ncomponent = \"x\"\n",
        &TILTED_PLANAR[..tether]
    );
    let mut cases: Vec<(String, System)> = [
        "double_pendulum_stiff.toml",
        "four_link.toml",
        "slider_crank.toml",
    ]
    .iter()
    .map(|f| (f.to_string(), model(f, "joint", "")))
    .collect();
    let spec = mbsfmu::mbs::load_model_str(&tilted, Path::new("tilted.toml")).unwrap();
    cases.push(("tilted".into(), System::new(Arc::new(spec)).unwrap()));
    // A cart on a slanted rail with a pendulum and a torsion spring: one stage per node, a
    // prismatic one among them (the planar load's pass for such trees, `pass_simple`).
    let spec = mbsfmu::mbs::load_model_str(CART_PENDULUM, Path::new("cart.toml")).unwrap();
    cases.push(("cart".into(), System::new(Arc::new(spec)).unwrap()));
    for (file, mut sys) in cases {
        for (i, seg) in sys.inputs_mut().segments.iter_mut().enumerate() {
            *seg = InputSegment {
                t0: 0.0,
                coeffs: [0.01 * i as f64, 0.3, -0.7, 1.9],
            };
        }
        let x0 = sys.initial_state(0.0).unwrap();
        let nq = sys.n_q();
        let states: Vec<(f64, Vec<f64>, Vec<f64>)> = (0..8)
            .map(|k| {
                let t = 0.1 + 0.23 * k as f64;
                let shift = 0.4 * (1.7 * k as f64).sin();
                let q = (0..nq)
                    .map(|i| x0.q[i] + shift * (i as f64 + 1.0).sin())
                    .collect();
                let v = (0..nq)
                    .map(|i| 0.8 * (1.3 * i as f64 + 0.4 + t).cos())
                    .collect();
                (t, q, v)
            })
            .collect();
        let eval = |sys: &mut System, (t, q, v): &(f64, Vec<f64>, Vec<f64>)| {
            let mut m = DMatrix::zeros(nq, nq);
            let mut f = vec![0.0; nq];
            sys.mass_matrix(*t, q, &mut m);
            sys.forces(*t, q, v, &mut f);
            let (a, _, out) = accelerations_and_outputs(sys, *t, q, v);
            (m, f, a, out)
        };
        // Fast paths on: each state twice (the second finds the pose cached), in turn.
        sys.set_joint_fast_paths(true);
        let first = sys.joint_planar_first_poses();
        let fast: Vec<_> = states
            .iter()
            .map(|s| {
                let _ = eval(&mut sys, s);
                eval(&mut sys, s)
            })
            .collect();
        // Taken at every state (the plane and the reference come from the model's reference
        // pose, not from a loaded one; the double pendulum's first state is its initial pose,
        // made already by `initial_state`), except where an element reads the snapshot (the
        // slider-crank's friction: the spatial path, compared all the same).
        let taken = sys.joint_planar_first_poses() - first;
        if file == "slider_crank.toml" {
            assert_eq!(taken, 0, "{file}: planar-first poses");
        } else {
            assert!(
                taken >= states.len() as u64 - 1,
                "{file}: {taken} planar-first poses"
            );
        }
        sys.set_joint_fast_paths(false);
        for (k, s) in states.iter().enumerate() {
            let (m, f, a, out) = eval(&mut sys, s);
            let (fm, ff, fa, fout) = &fast[k];
            let rel = |x: &[f64], y: &[f64]| {
                let scale = y.iter().fold(1.0f64, |a, z| a.max(z.abs()));
                x.iter()
                    .zip(y)
                    .fold(0.0f64, |w, (p, q)| w.max((p - q).abs() / scale))
            };
            // Where there are no loop rows the planar-first `p̈` comes from the articulated-
            // body solve or the small-tree kernel, without the shared `M`: against `M⁻¹ Ψ`
            // from its own `M` and `Ψ`.
            let by_m = if sys.n_c() == 0 {
                let x = fm
                    .clone()
                    .lu()
                    .solve(&DVector::from_column_slice(ff))
                    .unwrap();
                rel(fa, x.as_slice())
            } else {
                0.0
            };
            let worst = [
                rel(fm.as_slice(), m.as_slice()),
                rel(ff, &f),
                rel(fa, &a),
                rel(fout, &out),
                by_m,
            ];
            assert!(
                worst.iter().all(|&w| w <= 1e-10),
                "{file}, state {k}: planar-first against spatial (M, Ψ, p̈, outputs) and p̈ \
                 against M⁻¹ Ψ {worst:?}"
            );
        }
    }
}

/// Outputs of every kind a model's state alone determines (positions, velocities, angles about
/// two axes, angular velocities, joint coordinates and rates, element forces, energy), added
/// to every gallery model: the joint formulation reads them from its own snapshot of the
/// bodies (no unpacking of the absolute state again); with the fast paths off they go through
/// the absolute element layer at the equivalent absolute state. Both at three states with the
/// inputs moving, the angles several turns away from their references: the same to round-off.
#[test]
fn outputs_from_the_joint_snapshot_equal_the_absolute_layer() {
    let files = [
        "bouncing_balls.toml",
        "double_pendulum_stiff.toml",
        "four_link.toml",
        "pendulum_chain.toml",
        "quarter_car_rig.toml",
        "quarter_car_tire.toml",
        "slider_crank.toml",
        "spherical_chain.toml",
        "suspension_corner.toml",
    ];
    let mut n_outputs = 0;
    for file in files {
        let spec = model(file, "joint", "").spec().clone();
        let mut extra = String::new();
        let mut add = |ty: &str, name: &str, rest: String| {
            extra += &format!("\n[[outputs]]\nname = \"extra_{name}\"\ntype = \"{ty}\"\n{rest}\n");
        };
        for (b, body) in spec.bodies.iter().enumerate() {
            let p = body.position + Vector3::new(0.1, -0.2, 0.3);
            for (c, comp) in ["x", "y", "z"].into_iter().enumerate() {
                let at = format!(
                    "body = \"{}\"\npoint = [{}, {}, {}]\ncomponent = \"{comp}\"",
                    body.name, p.x, p.y, p.z
                );
                add("position", &format!("p{b}{c}"), at.clone());
                add("velocity", &format!("v{b}{c}"), at);
            }
            if body.kind == BodyKind::Rigid {
                for (a, axis) in ["[0, 0, 1]", "[1, 2, 2]"].into_iter().enumerate() {
                    let at = format!("body = \"{}\"\naxis = {axis}", body.name);
                    add("angle", &format!("a{b}{a}"), at.clone());
                    add("angular_velocity", &format!("w{b}{a}"), at);
                }
            }
        }
        for (j, joint) in spec.joints.iter().enumerate() {
            if matches!(joint.kind, JointKind::Revolute | JointKind::Prismatic) {
                let at = format!("joint = \"{}\"", joint.name);
                add("joint_coordinate", &format!("q{j}"), at.clone());
                add("joint_rate", &format!("r{j}"), at);
            }
        }
        for (f, force) in spec.forces.iter().enumerate() {
            if !matches!(force.kind, ForceKind::Bushing { .. }) {
                add(
                    "element_force",
                    &format!("f{f}"),
                    format!("force = \"{}\"", force.name),
                );
            }
        }
        add("energy", "energy", String::new());
        let mut sys = model(file, "joint", &extra);
        for seg in sys.inputs_mut().segments.iter_mut() {
            *seg = InputSegment {
                t0: 0.0,
                coeffs: [0.01, 0.2, -0.3, 0.1],
            };
        }
        let x0 = sys.initial_state(0.0).unwrap();
        let n = sys.n_q();
        for k in 0..3 {
            let mut x = x0.clone();
            x.t = 0.1 * k as f64;
            for i in 0..n {
                let s = (1.3 * (i + 1) as f64 + k as f64).sin();
                x.v[i] += 0.7 * s;
                x.q[i] += [0.0, 0.05, 7.0][k] * s;
            }
            let mut y = [vec![0.0; sys.n_outputs()], vec![0.0; sys.n_outputs()]];
            for (on, y) in [true, false].into_iter().zip(y.iter_mut()) {
                sys.set_joint_fast_paths(on);
                sys.evaluate_outputs(&x, y).unwrap();
            }
            for (o, (a, b)) in sys.spec().outputs.iter().zip(y[0].iter().zip(&y[1])) {
                // A driver's force comes from the inverse dynamics on one side and the
                // absolute saddle point on the other: equal on the constraint manifold, to
                // the conditioning of the solve off it (four_link's loop at state 2).
                let rel = match o.quantity {
                    OutputQuantity::DriverForce { .. } => 1e-9,
                    _ => 1e-12,
                };
                assert!(
                    a.is_finite() && (a - b).abs() <= rel * (1.0 + b.abs()),
                    "{file}, state {k}: output {} is {a} from the joint snapshot, {b} from the \
                     absolute layer",
                    o.name
                );
            }
            n_outputs += sys.n_outputs();
        }
    }
    assert!(n_outputs > 300, "{n_outputs} outputs compared");
}

/// The load's caches (session 16: node values written and compared in place, the rates kept
/// through loads without rates): evaluations in an order that mixes loads without rates
/// (mass matrix, constraints), with only the driven rates (`∂g/∂t`) and with the state's
/// rates, over three states that repeat, equal those of a fresh system each time. A stale
/// pose, motion or snapshot gives an error of the size of the quantities; the tolerance
/// allows the planar-first and the spatial recursion's round-off (a fresh system starts
/// spatial). The models: a loop with a driver (four-bar, slider-crank), and the tilted
/// mechanism with its moving frame and the elbow driven (planar-first).
#[test]
fn cached_loads_in_any_order_equal_fresh_evaluations() {
    let tether = TILTED_PLANAR.find("[[forces]]\nname = \"tether\"").unwrap();
    let tilted = format!(
        "{}\n[[inputs]]\nname = \"elbow_angle\"\n\n[[drivers]]\nname = \"elbow_drive\"\n\
         joint = \"elbow\"\nmotion = {{ input = \"elbow_angle\" }}\n",
        &TILTED_PLANAR[..tether]
    );
    let tilted = mbsfmu::mbs::load_model_str(&tilted, Path::new("tilted.toml")).unwrap();
    // Moving inputs, assembled (the active constraint rows and the angle branches).
    let moving = |mut sys: System| {
        for (i, seg) in sys.inputs_mut().segments.iter_mut().enumerate() {
            *seg = InputSegment {
                t0: 0.0,
                coeffs: [0.01 * i as f64, 0.3, -0.7, 1.9],
            };
        }
        let x0 = sys.initial_state(0.0).unwrap();
        (sys, x0)
    };
    let specs = [
        (
            "four_link",
            model("four_link.toml", "joint", "").spec().clone(),
        ),
        (
            "slider_crank",
            model("slider_crank.toml", "joint", "").spec().clone(),
        ),
        ("tilted", tilted),
    ];
    for (name, spec) in &specs {
        let make = || System::new(Arc::new(spec.clone())).unwrap();
        let (mut sys, x0) = moving(make());
        let (nq, nc) = (sys.n_q(), sys.n_c());
        let states: Vec<(f64, Vec<f64>, Vec<f64>)> = (0..3)
            .map(|k| {
                let t = 0.2 + 0.3 * k as f64;
                let q = (0..nq)
                    .map(|i| x0.q[i] + 0.05 * k as f64 * (i as f64 + 1.0).sin())
                    .collect();
                let v = (0..nq)
                    .map(|i| 0.5 * (1.1 * (i + k) as f64).cos())
                    .collect();
                (t, q, v)
            })
            .collect();
        // One operation on `sys`: its result as one vector.
        let op = |sys: &mut System, kind: usize, (t, q, v): &(f64, Vec<f64>, Vec<f64>)| match kind {
            0 => {
                let mut m = DMatrix::zeros(nq, nq);
                sys.mass_matrix(*t, q, &mut m);
                m.as_slice().to_vec()
            }
            1 => {
                let mut f = vec![0.0; nq];
                sys.forces(*t, q, v, &mut f);
                f
            }
            2 => {
                let mut phi = vec![0.0; nc];
                sys.constraints(*t, q, &mut phi);
                phi
            }
            3 => {
                let mut phi_t = vec![0.0; nc];
                sys.constraint_time_derivative(*t, q, &mut phi_t);
                phi_t
            }
            4 => {
                let (mut a, mut l) = (vec![0.0; nq], vec![0.0; nc]);
                sys.accelerations_into(*t, q, v, &mut a, &mut l).unwrap();
                a.extend(l);
                a
            }
            _ => accelerations_and_outputs(sys, *t, q, v).2,
        };
        // A fixed mixed order: loads without rates between loads with them at the same and
        // at other states, and the same rates after a load without rates.
        let mut seed = 7u64;
        for step in 0..60 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let kind = (seed >> 33) as usize % 6;
            let state = &states[(seed >> 45) as usize % 3];
            let got = op(&mut sys, kind, state);
            let want = op(&mut moving(make()).0, kind, state);
            let scale = want.iter().fold(1.0f64, |a, x| a.max(x.abs()));
            let worst = got
                .iter()
                .zip(&want)
                .fold(0.0f64, |w, (a, b)| w.max((a - b).abs() / scale));
            assert!(
                worst <= 1e-10,
                "{name}, step {step}, operation {kind}: cached against fresh {worst:e}"
            );
        }
    }
}
