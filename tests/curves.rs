//! Characteristic curves (issue 16): a `spring_damper` with a `damper_table` whose rows are
//! sampled from the closed-form progressive damper `f_d(v) = c₁ v + c₃ v³` equals that curve
//! (the not-a-knot spline reproduces cubics), along a whole run and between the rows; and the
//! motion it gives matches an independent fixed-step RK4 solution of the one-degree-of-freedom
//! equation `m z̈ = −m g + k (l − l₀) + f_d(l̇)`, `l = 0.5 − z`, for every integrator in both
//! formulations (the implicit ones use the curve's analytic slope in their Jacobians).

mod common;

use mbsfmu::cosim::{SetPhase, Simulation};
use mbsfmu::description::VariableTable;
use mbsfmu::integrate::Method;
use mbsfmu::mbs::system::System;
use std::path::PathBuf;
use std::sync::Arc;

const M: f64 = 2.0;
const K: f64 = 400.0;
const C1: f64 = 40.0;
const C3: f64 = 300.0;
const G: f64 = 9.81;
const V0: f64 = -0.8;

fn damper(v: f64) -> f64 {
    C1 * v + C3 * v * v * v
}

fn model_text(formulation: &str) -> String {
    format!(
        r#"
[model]
name = "table_damper"
gravity = [0.0, 0.0, -9.81]
formulation = "{formulation}"
[[bodies]]
name = "mass"
mass = {M}
inertia = [0.1, 0.1, 0.1]
position = [0.0, 0.0, 0.0]
velocity = [0.0, 0.0, {V0}]
[[joints]]
name = "guide"
type = "prismatic"
body1 = "ground"
body2 = "mass"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]
[[forces]]
name = "strut"
type = "spring_damper"
body1 = "ground"
point1 = [0.0, 0.0, 0.5]
body2 = "mass"
stiffness = {K}
free_length = 0.5
damper_table = "damper.csv"
[[outputs]]
name = "z"
type = "position"
body = "mass"
component = "z"
[[outputs]]
name = "vz"
type = "velocity"
body = "mass"
component = "z"
[[outputs]]
name = "tension"
type = "element_force"
force = "strut"
[[outputs]]
name = "length"
type = "element_length"
force = "strut"
"#
    )
}

/// The model file and its damper table (17 rows, −2 … 2 m/s) in a temporary directory of its
/// own per call (tests run in parallel threads of one process: a shared directory let one test
/// read the table while another rewrote it).
fn write_model(formulation: &str) -> PathBuf {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("mbsfmu-curves-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut csv = String::from("velocity,force\n");
    for i in 0..=16 {
        let v = -2.0 + 0.25 * i as f64;
        csv.push_str(&format!("{v},{}\n", damper(v)));
    }
    std::fs::write(dir.join("damper.csv"), csv).unwrap();
    let path = dir.join(format!("{formulation}.toml"));
    std::fs::write(&path, model_text(formulation)).unwrap();
    path
}

/// RK4 at 1e-5 s of `m z̈ = −m g + k (l − l₀) + f_d(l̇)` with `l = 0.5 − z`, `l̇ = −ż`:
/// `(z, ż)` every 0.01 s up to 1 s.
fn reference() -> Vec<(f64, f64)> {
    let acc = |z: f64, v: f64| (-M * G + K * (0.5 - z - 0.5) + damper(-v)) / M;
    let (mut z, mut v) = (0.0, V0);
    let h = 1e-5;
    let mut out = vec![(z, v)];
    for k in 1..=100_000 {
        let (k1z, k1v) = (v, acc(z, v));
        let (k2z, k2v) = (v + 0.5 * h * k1v, acc(z + 0.5 * h * k1z, v + 0.5 * h * k1v));
        let (k3z, k3v) = (v + 0.5 * h * k2v, acc(z + 0.5 * h * k2z, v + 0.5 * h * k2v));
        let (k4z, k4v) = (v + h * k3v, acc(z + h * k3z, v + h * k3v));
        z += h / 6.0 * (k1z + 2.0 * k2z + 2.0 * k3z + k4z);
        v += h / 6.0 * (k1v + 2.0 * k2v + 2.0 * k3v + k4v);
        if k % 1000 == 0 {
            out.push((z, v));
        }
    }
    out
}

#[test]
fn table_damper_equals_the_closed_form_curve_for_every_integrator_and_formulation() {
    let reference = reference();
    for formulation in ["absolute", "joint"] {
        let path = write_model(formulation);
        let spec = Arc::new(mbsfmu::mbs::load_model(&path).unwrap());
        for method in Method::ALL {
            let table = Arc::new(VariableTable::from_spec(&spec));
            let mut sim = Simulation::new(
                spec.clone(),
                table.clone(),
                System::new(spec.clone()).unwrap(),
            );
            let vr = |n: &str| table.by_name(n).unwrap().value_reference;
            let item = Method::ALL.iter().position(|m| *m == method).unwrap() as i64 + 1;
            sim.set_integer(vr("solver.integrator"), item, SetPhase::Setup)
                .unwrap();
            sim.set_real(vr("solver.atol"), 1e-9, SetPhase::Setup)
                .unwrap();
            sim.setup_experiment(Some(1e-7), 0.0, None).unwrap();
            sim.initialize().unwrap();
            let mut worst = 0.0f64;
            // Local linearization needs some 12 000 steps in the first 10 ms at these
            // tolerances (its error estimate is of second order), more than one call may
            // take: it is driven at 1 ms.
            let parts = if method == Method::LocalLinearization {
                10
            } else {
                1
            };
            for (k, &(z_ref, _)) in reference.iter().enumerate().skip(1) {
                for j in 1..=parts {
                    let t = 0.01 * (k - 1) as f64 + 0.01 * j as f64 / parts as f64;
                    common::cosim::advance(&mut sim, t);
                }
                let o = sim.outputs().unwrap().to_vec();
                let (z, vz, tension, length) = (o[0], o[1], o[2], o[3]);
                // The element's force is the closed-form law at its own state, to rounding.
                let want = K * (length - 0.5) + damper(-vz);
                assert!(
                    (tension - want).abs() < 1e-9 * (1.0 + want.abs()),
                    "{formulation} {method:?} t = {}: tension {tension} against {want}",
                    0.01 * k as f64
                );
                worst = worst.max((z - z_ref).abs());
            }
            eprintln!(
                "{formulation} {}: max |z − z_ref| = {worst:.2e} m",
                method.name()
            );
            // Amplitude ~0.06 m; rtol 1e-7, atol 1e-9. (Until session 29 the test ignored a
            // Discard at the work budget and compared local linearization's output at an
            // earlier time, which read as a drift of 3.6e-3 m: it is within 2e-10 m.)
            let bound = 2e-5;
            assert!(worst < bound, "{formulation} {method:?}: {worst}");
        }
    }
}

/// The engine's analytic force Jacobians (which the implicit integrators use) against central
/// differences of the forces, at a state where the damper works on its curved part.
#[test]
fn force_jacobians_use_the_curve_slope() {
    use mbsfmu::integrate::system::{ForceJacobians, Mechanical};
    use nalgebra::DMatrix;
    for formulation in ["absolute", "joint"] {
        let path = write_model(formulation);
        let spec = Arc::new(mbsfmu::mbs::load_model(&path).unwrap());
        let mut sys = System::new(spec).unwrap();
        let x = sys.initial_state(0.0).unwrap();
        let nq = sys.n_q();
        let (q, mut v) = (x.q.clone(), x.v.clone());
        for (i, vi) in v.iter_mut().enumerate() {
            *vi += 0.37 * (i as f64 + 1.0).sin(); // off the initial state, |l̇| ~ 1 m/s
        }
        let (mut dq, mut dv) = (DMatrix::zeros(nq, nq), DMatrix::zeros(nq, nq));
        sys.force_jacobians(0.0, &q, &v, &mut dq, &mut dv);
        let h = 1e-6;
        for j in 0..nq {
            let (mut fp, mut fm) = (vec![0.0; nq], vec![0.0; nq]);
            let mut vp = v.clone();
            vp[j] += h;
            sys.forces(0.0, &q, &vp, &mut fp);
            vp[j] -= 2.0 * h;
            sys.forces(0.0, &q, &vp, &mut fm);
            for i in 0..nq {
                let fd = (fp[i] - fm[i]) / (2.0 * h);
                assert!(
                    (dv[(i, j)] - fd).abs() < 1e-5 * (1.0 + fd.abs()),
                    "{formulation} ∂f{i}/∂v{j}: {} against {fd}",
                    dv[(i, j)]
                );
            }
        }
        assert!(dv.amax() > C1, "{formulation}: the damper enters ∂f/∂v");
    }
}

#[test]
fn damping_and_damper_table_together_are_refused() {
    let path = write_model("absolute");
    let text = model_text("absolute")
        .replace("free_length = 0.5\n", "free_length = 0.5\ndamping = 10.0\n");
    let e = mbsfmu::mbs::load_model_str(&text, &path)
        .unwrap_err()
        .to_string();
    assert!(e.contains("strut") && e.contains("not both"), "{e}");
    let text = model_text("absolute").replace("damper.csv", "missing.csv");
    let e = mbsfmu::mbs::load_model_str(&text, &path)
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.csv"), "{e}");
}

/// A preloaded bushing (issue 16): a 4 kg body hangs on a bushing to ground with
/// `preload_force = [0, 0, P]` and `preload_torque = [0, 0, T]` (on body 2, along the
/// bushing's axes). Its static equilibrium, reached with damping, is the closed form
/// `δz = (P − m g)/k` and, the small-angle rotation coordinate being `sin θ`,
/// `θ = asin(T/k_r)`; with `P = m g`, `T = 0` the body does not move at all.
#[test]
fn preloaded_bushing_settles_where_the_closed_form_says() {
    let (m, k, kr, g) = (4.0, 2.0e4, 300.0, 9.81);
    let text = |p: f64, t: f64| {
        format!(
            r#"
[model]
name = "preloaded"
gravity = [0.0, 0.0, -9.81]
[[bodies]]
name = "block"
mass = {m}
inertia = [0.02, 0.02, 0.02]
position = [0.0, 0.0, 0.0]
[[forces]]
name = "mount"
type = "bushing"
body1 = "ground"
body2 = "block"
stiffness = [{k}, {k}, {k}]
damping = [400.0, 400.0, 400.0]
rot_stiffness = [{kr}, {kr}, {kr}]
rot_damping = [3.0, 3.0, 3.0]
preload_force = [0.0, 0.0, {p}]
preload_torque = [0.0, 0.0, {t}]
[[outputs]]
name = "z"
type = "position"
body = "block"
component = "z"
[[outputs]]
name = "yaw"
type = "angle"
body = "block"
axis = [0.0, 0.0, 1.0]
"#
        )
    };
    let run = |p: f64, t: f64| {
        let spec = Arc::new(
            mbsfmu::mbs::load_model_str(&text(p, t), std::path::Path::new("preloaded.toml"))
                .unwrap(),
        );
        let table = Arc::new(VariableTable::from_spec(&spec));
        let mut sim = Simulation::new(
            spec.clone(),
            table.clone(),
            System::new(spec.clone()).unwrap(),
        );
        sim.setup_experiment(Some(1e-8), 0.0, None).unwrap();
        sim.initialize().unwrap();
        let mut max_dz = 0.0f64;
        for k in 1..=200 {
            common::cosim::advance(&mut sim, 0.01 * k as f64);
            max_dz = max_dz.max(sim.outputs().unwrap()[0].abs());
        }
        let o = sim.outputs().unwrap().to_vec();
        (o[0], o[1], max_dz)
    };
    // Preload carrying the weight: nothing moves.
    let (z, yaw, max_dz) = run(m * g, 0.0);
    assert!(max_dz < 1e-9 && yaw.abs() < 1e-12, "{z} {yaw} {max_dz}");
    // Other preloads: the closed-form equilibrium.
    let (p, t) = (120.0, 45.0);
    let (z, yaw, _) = run(p, t);
    let (z_ref, yaw_ref) = ((p - m * g) / k, (t / kr).asin());
    assert!((z - z_ref).abs() < 1e-7, "z {z} against {z_ref}");
    assert!((yaw - yaw_ref).abs() < 1e-6, "yaw {yaw} against {yaw_ref}");
    // Given and computed preloads together are refused.
    let e = mbsfmu::mbs::load_model_str(
        &text(p, t).replace("preload_force", "static_preload = true\npreload_force"),
        std::path::Path::new("preloaded.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("mount") && e.contains("not both"), "{e}");
}

// ----- spring tables (`law = "table"`), torsion tables, bushing tables ---------------------

/// A temporary directory for a model and its tables.
fn temp_dir(tag: &str) -> PathBuf {
    // One per call: tests run in parallel threads of one process.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("mbsfmu-curves-{tag}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `x,f(x)` rows of `f` at `xs`, with a header.
fn csv_of(xs: &[f64], f: impl Fn(f64) -> f64) -> String {
    let mut s = String::from("x,f\n");
    for &x in xs {
        s.push_str(&format!("{x},{}\n", f(x)));
    }
    s
}

const K1: f64 = 300.0;
const K3: f64 = 9.0e4;

fn cubic_spring(x: f64) -> f64 {
    K1 * x + K3 * x * x * x
}

fn cubic_spring_slope(x: f64) -> f64 {
    K1 + 3.0 * K3 * x * x
}

/// The mass of the damper model on a `law = "table"` spring sampled (uneven rows, −0.3 …
/// 0.3 m) from the closed-form progressive law `K1 x + K3 x³`, no damper.
fn table_spring_model(formulation: &str) -> PathBuf {
    let dir = temp_dir("spring");
    let xs = [
        -0.3, -0.22, -0.15, -0.1, -0.04, 0.0, 0.03, 0.1, 0.18, 0.25, 0.3,
    ];
    std::fs::write(dir.join("spring.csv"), csv_of(&xs, cubic_spring)).unwrap();
    let text = model_text(formulation).replace(
        &format!("stiffness = {K}\nfree_length = 0.5\ndamper_table = \"damper.csv\"\n"),
        "law = \"table\"\ntable = \"spring.csv\"\nfree_length = 0.5\n",
    );
    assert!(text.contains("spring.csv"));
    let path = dir.join(format!("{formulation}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// The table spring is the closed-form law within 1e-9 in force and slope: the curve itself
/// at 601 points inside and beyond the rows (linear beyond: the end value and slope), the
/// element's force along a run at its own length, and the engine's `∂f/∂q` in the joint
/// formulation (one coordinate z, `l = 0.5 − z`, force on z `= f(−z)`, so `∂f/∂z = −f'(−z)`).
/// (The spring table used a natural spline with constant extrapolation before: 1e-2 off a
/// cubic at the ends and no stiffness beyond the rows.)
#[test]
fn table_spring_sampled_from_a_cubic_is_the_closed_form_law_in_force_and_slope() {
    let xs = [
        -0.3, -0.22, -0.15, -0.1, -0.04, 0.0, 0.03, 0.1, 0.18, 0.25, 0.3,
    ];
    let ys: Vec<f64> = xs.iter().map(|&x| cubic_spring(x)).collect();
    let c = mbsfmu::mbs::curves::Curve::new(&xs, &ys);
    for k in 0..=600 {
        let x = -0.3 + 0.001 * k as f64;
        let (f, d) = c.eval(x);
        assert!((f - cubic_spring(x)).abs() < 1e-9, "{x}: {f}");
        assert!((d - cubic_spring_slope(x)).abs() < 1e-9, "{x}: slope {d}");
    }
    let (f, d) = c.eval(0.4);
    let want = cubic_spring(0.3) + 0.1 * cubic_spring_slope(0.3);
    assert!((f - want).abs() < 1e-9 && (d - cubic_spring_slope(0.3)).abs() < 1e-9);

    for formulation in ["absolute", "joint"] {
        let spec = Arc::new(mbsfmu::mbs::load_model(&table_spring_model(formulation)).unwrap());
        let table = Arc::new(VariableTable::from_spec(&spec));
        let mut sim = Simulation::new(
            spec.clone(),
            table.clone(),
            System::new(spec.clone()).unwrap(),
        );
        sim.setup_experiment(Some(1e-8), 0.0, None).unwrap();
        sim.initialize().unwrap();
        let mut x_range = (0.0f64, 0.0f64);
        for k in 1..=100 {
            common::cosim::advance(&mut sim, 0.01 * k as f64);
            let o = sim.outputs().unwrap().to_vec();
            let x = o[3] - 0.5;
            x_range = (x_range.0.min(x), x_range.1.max(x));
            let want = cubic_spring(x);
            assert!(
                (o[2] - want).abs() < 1e-9 * (1.0 + want.abs()),
                "{formulation}: tension {} against {want} at x = {x}",
                o[2]
            );
        }
        assert!(x_range.1 - x_range.0 > 0.05, "{formulation}: {x_range:?}");
    }

    use mbsfmu::integrate::system::{ForceJacobians, Mechanical};
    use nalgebra::DMatrix;
    let spec = Arc::new(mbsfmu::mbs::load_model(&table_spring_model("joint")).unwrap());
    let mut sys = System::new(spec).unwrap();
    assert_eq!(sys.n_q(), 1);
    let v = [0.0];
    let (mut dq, mut dv) = (DMatrix::zeros(1, 1), DMatrix::zeros(1, 1));
    for z in [-0.27, -0.12, 0.0, 0.05, 0.21, 0.29] {
        let mut f = [0.0];
        sys.forces(0.0, &[z], &v, &mut f);
        let want = cubic_spring(-z) - M * G;
        assert!(
            (f[0] - want).abs() < 1e-9,
            "z = {z}: force {} against {want}",
            f[0]
        );
        sys.force_jacobians(0.0, &[z], &v, &mut dq, &mut dv);
        let slope = cubic_spring_slope(-z);
        assert!(
            (dq[(0, 0)] + slope).abs() < 1e-9,
            "z = {z}: ∂f/∂z {} against {}",
            dq[(0, 0)],
            -slope
        );
    }
}

/// The engine's force Jacobians against central differences with the new curves in both
/// formulations: the table pendulum (torsion spring and damper tables) off its initial state,
/// and the bushing mount (axial and torsional tables) displaced and turning.
#[test]
fn force_jacobians_use_the_torsion_and_bushing_curve_slopes() {
    use mbsfmu::integrate::system::{ForceJacobians, Mechanical};
    use nalgebra::DMatrix;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/elements");
    for file in ["table_pendulum.toml", "bushing_mount.toml"] {
        for formulation in ["absolute", "joint"] {
            let path = dir.join(file);
            let text = std::fs::read_to_string(&path).unwrap().replace(
                "[model]\n",
                &format!("[model]\nformulation = \"{formulation}\"\n"),
            );
            let spec = Arc::new(mbsfmu::mbs::load_model_str(&text, &path).unwrap());
            let mut sys = System::new(spec).unwrap();
            let x = sys.initial_state(0.0).unwrap();
            let nq = sys.n_q();
            let (mut q, mut v) = (x.q.clone(), x.v.clone());
            for (i, qi) in q.iter_mut().enumerate() {
                *qi += 0.013 * (i as f64 + 0.5).cos(); // deflected into the curved parts
            }
            for (i, vi) in v.iter_mut().enumerate() {
                *vi += 0.4 * (i as f64 + 1.0).sin();
            }
            let (mut dq, mut dv) = (DMatrix::zeros(nq, nq), DMatrix::zeros(nq, nq));
            sys.force_jacobians(0.0, &q, &v, &mut dq, &mut dv);
            let h = 1e-6;
            for (jac, wrt_q) in [(&dq, true), (&dv, false)] {
                for j in 0..nq {
                    let (mut fp, mut fm) = (vec![0.0; nq], vec![0.0; nq]);
                    let (mut qp, mut vp) = (q.clone(), v.clone());
                    let x = if wrt_q { &mut qp } else { &mut vp };
                    x[j] += h;
                    sys.forces(0.0, &qp, &vp, &mut fp);
                    let x = if wrt_q { &mut qp } else { &mut vp };
                    x[j] -= 2.0 * h;
                    sys.forces(0.0, &qp, &vp, &mut fm);
                    for i in 0..nq {
                        let fd = (fp[i] - fm[i]) / (2.0 * h);
                        assert!(
                            (jac[(i, j)] - fd).abs() < 1e-5 * (1.0 + fd.abs()),
                            "{file} {formulation} ∂f{i}/∂{}{j}: {} against {fd}",
                            if wrt_q { "q" } else { "v" },
                            jac[(i, j)]
                        );
                    }
                }
            }
        }
    }
}

/// The table pendulum's element torque is `−f(θ) − f_d(θ̇)` of its own state, `f` the cubic
/// its spring table samples, `f_d` the damper table's not-a-knot spline as scipy's
/// `CubicSpline` evaluates it (the reference's `damper_torque` column, at the reference's θ̇,
/// within 1e-6 rad/s of the engine's); its energy output includes the table spring's potential
/// `½ I_O θ̇² − m g l cos θ + K1 θ²/2 + K3 θ⁴/4` (the closed-form integral of the cubic); the
/// damper's work only decreases it.
#[test]
fn table_pendulum_torque_and_energy_are_the_closed_form() {
    let (m, l, i_o, g) = (2.0, 0.5, 0.05 + 2.0 * 0.25, 9.81);
    let spring = |th: f64| 20.0 * th + 40.0 * th.powi(3);
    let potential = |th: f64| 10.0 * th * th + 10.0 * th.powi(4);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models/elements/table_pendulum.toml");
    let spec = Arc::new(mbsfmu::mbs::load_model(&path).unwrap());
    let table = Arc::new(VariableTable::from_spec(&spec));
    let mut sim = Simulation::new(
        spec.clone(),
        table.clone(),
        System::new(spec.clone()).unwrap(),
    );
    let atol = table.by_name("solver.atol").unwrap().value_reference;
    sim.set_real(atol, 1e-11, SetPhase::Setup).unwrap();
    sim.setup_experiment(Some(1e-9), 0.0, None).unwrap();
    sim.initialize().unwrap();
    let reference = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/table_pendulum.csv"),
    )
    .unwrap();
    // Rows t, theta, omega, spring_torque, damper_torque every 0.01 s.
    let reference: Vec<Vec<f64>> = reference
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('t'))
        .map(|l| l.split(',').map(|x| x.trim().parse().unwrap()).collect())
        .collect();
    let mut last = f64::INFINITY;
    for (k, r) in reference.iter().enumerate().take(101).skip(1) {
        common::cosim::advance(&mut sim, 0.01 * k as f64);
        let o = sim.outputs().unwrap().to_vec();
        let (th, om, torque, energy) = (o[0], o[1], o[2], o[3]);
        let fd = -torque - spring(th);
        assert!((r[0] - 0.01 * k as f64).abs() < 1e-12, "{r:?}");
        assert!(
            (om - r[2]).abs() < 1e-6,
            "t = {}: omega {om} against {}",
            r[0],
            r[2]
        );
        assert!(
            (fd - r[4]).abs() < 1e-6,
            "damper torque {fd} against scipy's spline {}",
            r[4]
        );
        let want = 0.5 * i_o * om * om - m * g * l * th.cos() + potential(th);
        assert!(energy < last, "energy rose at t = {}", 0.01 * k as f64);
        // Scale ~10 J (½ I_O θ̇₀² = 9.9 J); the absolute formulation's bodies are consistent
        // to the integration tolerance only.
        assert!(
            (energy - want).abs() < 1e-6,
            "energy {energy} against {want}"
        );
        last = energy;
    }
}

/// The bushing mount (`models/elements/bushing_mount.toml`): the block sinks until the axial
/// table gives its weight, 39.24 N, which the table has at the row −0.012 m; the 15 N m torque
/// preload turns it until the torsional table gives 15 N m, at the row 0.2 = sin θ. Reached by
/// the static initialization (Newton on the curves' slopes) and by settling under damping,
/// in both formulations.
#[test]
fn bushing_with_table_axes_deflects_to_the_tables_inverse() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/elements/bushing_mount.toml");
    let (z_ref, yaw_ref) = (-0.012, 0.2f64.asin());
    for formulation in ["absolute", "joint"] {
        for initial in ["consistent", "static"] {
            let text = std::fs::read_to_string(&path).unwrap().replace(
                "[model]\n",
                &format!("[model]\nformulation = \"{formulation}\"\ninitial = \"{initial}\"\n"),
            );
            let spec = Arc::new(mbsfmu::mbs::load_model_str(&text, &path).unwrap());
            let table = Arc::new(VariableTable::from_spec(&spec));
            let mut sim = Simulation::new(
                spec.clone(),
                table.clone(),
                System::new(spec.clone()).unwrap(),
            );
            sim.setup_experiment(Some(1e-9), 0.0, None).unwrap();
            sim.initialize().unwrap();
            let what = format!("{formulation} {initial}");
            if initial == "static" {
                let o = sim.outputs().unwrap().to_vec();
                assert!(
                    (o[0] - z_ref).abs() < 1e-9,
                    "{what}: z {} against {z_ref}",
                    o[0]
                );
                assert!((o[1] - yaw_ref).abs() < 1e-9, "{what}: yaw {}", o[1]);
                assert!((o[2] - 39.24).abs() < 1e-7, "{what}: force {}", o[2]);
                // Components: the force on the block along z carries the weight, the deflections
                // are the tables' rows, the torque (table + preload) vanishes.
                assert!((o[4] - 39.24).abs() < 1e-7, "{what}: fz {}", o[4]);
                assert!((o[5] - z_ref).abs() < 1e-9, "{what}: dz {}", o[5]);
                assert!((o[6] - 0.2).abs() < 1e-9, "{what}: sin θ {}", o[6]);
                assert!(o[7].abs() < 1e-7, "{what}: torque {}", o[7]);
            }
            common::cosim::advance(&mut sim, 3.0);
            let o = sim.outputs().unwrap().to_vec();
            assert!(
                (o[0] - z_ref).abs() < 1e-7,
                "{what}: z {} against {z_ref}",
                o[0]
            );
            assert!(
                (o[1] - yaw_ref).abs() < 1e-6,
                "{what}: yaw {} against {yaw_ref}",
                o[1]
            );
        }
    }
}

/// A bushing damper table (`damper_tables`): the mount's radial component (linear spring
/// 2e4 N/m, damper table sampled from `300 v + 3000 v³` at uneven rows) pushes the block with
/// `−2e4 x − (300 v + 3000 v³)` along a run that starts at 0.5 m/s sideways, both
/// formulations: the not-a-knot spline reproduces the cubic, so the closed form is exact.
#[test]
fn bushing_damper_table_is_the_closed_form_curve() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/elements/bushing_mount.toml");
    for formulation in ["absolute", "joint"] {
        let text = std::fs::read_to_string(&path).unwrap().replace(
            "[model]\n",
            &format!("[model]\nformulation = \"{formulation}\"\n"),
        );
        let spec = Arc::new(mbsfmu::mbs::load_model_str(&text, &path).unwrap());
        let table = Arc::new(VariableTable::from_spec(&spec));
        let mut sim = Simulation::new(spec.clone(), table, System::new(spec.clone()).unwrap());
        sim.setup_experiment(Some(1e-8), 0.0, None).unwrap();
        sim.initialize().unwrap();
        let (mut worst, mut vmax) = (0.0f64, 0.0f64);
        for k in 0..=200 {
            if k > 0 {
                common::cosim::advance(&mut sim, k as f64 * 1e-3);
            }
            let o = sim.outputs().unwrap().to_vec();
            let (fx, dx, v) = (o[8], o[9], o[10]);
            let want = -2e4 * dx - (300.0 * v + 3000.0 * v.powi(3));
            worst = worst.max((fx - want).abs());
            vmax = vmax.max(v.abs());
        }
        println!("{formulation}: |v| up to {vmax:.3} m/s, force error {worst:.2e} N");
        assert!(
            vmax > 0.45,
            "{formulation}: the damper was not exercised ({vmax})"
        );
        assert!(worst < 1e-8, "{formulation}: force error {worst} N");
    }
}

#[test]
fn bushing_damper_table_with_damping_on_the_same_component_is_refused() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/elements/bushing_mount.toml");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "damping = [0.0, 300.0, 300.0]",
        "damping = [100.0, 300.0, 300.0]",
    );
    let e = mbsfmu::mbs::load_model_str(&text, &path)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mount") && e.contains("damper_tables.x") && e.contains("damping"),
        "{e}"
    );
}
