//! Static equilibrium (issue 14) on the suspension corner at real sizes: the solver's
//! equilibrium against an independent check, the settled state of a heavily damped dynamic run
//! from the design position (BDF at tight tolerance), over a 3 × 3 sweep of spring rate and
//! free length and over mass/stiffness scalings 0.01, 1, 100; and the drift diagnosis when
//! there is no equilibrium.

mod common;
use mbsfmu::integrate::any::AnyIntegrator;
use mbsfmu::integrate::system::Mechanical;
use mbsfmu::integrate::{Integrator, Method, Settings};
use mbsfmu::mbs::spec::ModelSpec;
use mbsfmu::mbs::system::System;
use std::path::Path;
use std::sync::Arc;
use toml::Value;

/// Design length of the corner's coil-over (see the model's header).
const DESIGN_LENGTH: f64 = 0.512_445_119_012_758_2;

struct Variant {
    k_spring: f64,
    /// Free length minus design length.
    preload_travel: f64,
    /// Factor on every mass, inertia, stiffness and damping.
    scale: f64,
    /// Coil-over and tire damping (before `scale`).
    c_spring: f64,
    c_tire: f64,
    k_tire: f64,
    initial: &'static str,
}

impl Default for Variant {
    fn default() -> Self {
        Variant {
            k_spring: 60000.0,
            preload_travel: 0.06,
            scale: 1.0,
            c_spring: 3500.0,
            c_tire: 150.0,
            k_tire: 250000.0,
            initial: "static",
        }
    }
}

fn num(v: &Value) -> Option<f64> {
    v.as_float().or_else(|| v.as_integer().map(|i| i as f64))
}

fn corner(v: &Variant) -> ModelSpec {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/suspension_corner.toml");
    let mut doc: Value = std::fs::read_to_string(&path).unwrap().parse().unwrap();
    doc["model"]["initial"] = Value::String(v.initial.into());
    let s = v.scale;
    for p in doc["parameters"].as_array_mut().unwrap() {
        let name = p["name"].as_str().unwrap().to_string();
        let value = num(&p["value"]).unwrap();
        let new = match name.as_str() {
            "m_chassis" | "m_upright" => value * s,
            "k_spring" => v.k_spring * s,
            "c_spring" => v.c_spring * s,
            "l0_spring" => DESIGN_LENGTH + v.preload_travel,
            "k_tire" => v.k_tire * s,
            "c_tire" => v.c_tire * s,
            "z_pad" => value,
            other => panic!("unexpected parameter {other}"),
        };
        p["value"] = Value::Float(new);
    }
    for b in doc["bodies"].as_array_mut().unwrap() {
        if let Some(m) = num(&b["mass"]) {
            b["mass"] = Value::Float(m * s);
        }
        let inertia: Vec<Value> = b["inertia"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| Value::Float(num(x).unwrap() * s))
            .collect();
        b["inertia"] = Value::Array(inertia);
    }
    let text = toml::to_string(&doc).unwrap();
    let mut spec = mbsfmu::mbs::load_model_str(&text, &path).unwrap();
    // Absolute coordinates: the tests read the bodies' positions off the state.
    spec.formulation = mbsfmu::mbs::spec::Formulation::Absolute;
    spec
}

/// Translational coordinates of every body (centres of mass).
fn positions(sys: &System, q: &[f64]) -> Vec<f64> {
    let mut out = Vec::new();
    for &o in &sys.layout().offsets {
        out.extend_from_slice(&q[o..o + 3]);
    }
    out
}

fn static_positions(v: &Variant) -> Vec<f64> {
    let spec = Arc::new(corner(v));
    let mut sys = System::new(spec).unwrap();
    let x = sys.initial_state(0.0).unwrap();
    positions(&sys, &x.q)
}

/// A heavily damped dynamic run from the design position until it is at rest.
fn settled_positions(v: &Variant) -> Vec<f64> {
    let spec = Arc::new(corner(&Variant {
        initial: "consistent",
        // Near-critical heave damping, wheel hop well damped (the equilibrium does not
        // depend on damping).
        c_spring: 20000.0,
        c_tire: 3000.0,
        ..*v
    }));
    let mut sys = System::new(spec).unwrap();
    let x0 = sys.initial_state(0.0).unwrap();
    let settings = Settings {
        method: Method::Bdf,
        rtol: 1e-9,
        atol: 1e-11,
        ..Settings::default()
    };
    let mut integ = AnyIntegrator::new(settings, sys.n_q(), sys.n_c()).unwrap();
    integ.initialize(&mut sys, &x0).unwrap();
    let mut t_end = 5.0;
    loop {
        while Integrator::<System>::state(&integ).t < t_end {
            integ.step(&mut sys, t_end).unwrap();
        }
        let st = Integrator::<System>::state(&integ);
        let vmax = st.v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        // At rest: the remaining motion moves the bodies by far less than the tolerance.
        if vmax < 1e-8 {
            return positions(&sys, &st.q);
        }
        assert!(
            t_end < 60.0,
            "the damped run did not settle (|v| = {vmax:e})"
        );
        t_end += 5.0;
    }
}

fn compare(v: &Variant, what: &str) {
    let s = static_positions(v);
    let d = settled_positions(v);
    let design = {
        let spec = Arc::new(corner(&Variant {
            initial: "consistent",
            ..*v
        }));
        let mut sys = System::new(spec).unwrap();
        let x = sys.initial_state(0.0).unwrap();
        positions(&sys, &x.q)
    };
    let moved = s
        .iter()
        .zip(&design)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let err = s
        .iter()
        .zip(&d)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    println!("{what}: equilibrium {moved:.4} m from the design position, |static − settled| = {err:.2e} m");
    // The check is meaningful only if the equilibrium is away from the design position.
    assert!(
        moved > 0.01,
        "{what}: the equilibrium is at the design position"
    );
    assert!(err < 1e-6, "{what}: static and settled differ by {err:e} m");
}

#[test]
fn corner_equilibrium_matches_damped_run_over_spring_rate_and_free_length() {
    for k in [45000.0, 60000.0, 80000.0] {
        for travel in [0.04, 0.06, 0.08] {
            compare(
                &Variant {
                    k_spring: k,
                    preload_travel: travel,
                    ..Variant::default()
                },
                &format!("k = {k} N/m, free length = design + {travel} m"),
            );
        }
    }
}

#[test]
fn corner_equilibrium_is_scale_invariant() {
    let mut eq = Vec::new();
    for scale in [0.01, 1.0, 100.0] {
        let v = Variant {
            scale,
            ..Variant::default()
        };
        compare(&v, &format!("masses and stiffnesses x {scale}"));
        eq.push(static_positions(&v));
    }
    // Scaling masses and stiffnesses together leaves the equilibrium where it is.
    for e in &eq[1..] {
        let d = e
            .iter()
            .zip(&eq[0])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(d < 1e-9, "scaled equilibria differ by {d:e} m");
    }
}

/// Realistic parameter sets and post heights an importer may give: the solver converges and
/// the state it returns is at rest (accelerations from the saddle-point system, not from the
/// solver, vanish).
#[test]
fn corner_equilibrium_over_masses_tire_rates_and_post_heights() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/suspension_corner.toml");
    for m in [250.0, 360.0, 480.0] {
        for k_tire in [150e3, 250e3, 400e3] {
            for post in [-0.05, 0.0, 0.08] {
                let mut doc: Value = std::fs::read_to_string(&path).unwrap().parse().unwrap();
                for p in doc["parameters"].as_array_mut().unwrap() {
                    match p["name"].as_str().unwrap() {
                        "m_chassis" => p["value"] = Value::Float(m),
                        "k_tire" => p["value"] = Value::Float(k_tire),
                        _ => {}
                    }
                }
                doc["inputs"][0]["start"] = Value::Float(post);
                let text = toml::to_string(&doc).unwrap();
                let spec = Arc::new(mbsfmu::mbs::load_model_str(&text, &path).unwrap());
                let mut sys = System::new(spec).unwrap();
                let x = sys
                    .initial_state(0.0)
                    .unwrap_or_else(|e| panic!("m = {m}, k_tire = {k_tire}, post = {post}: {e}"));
                let (a, _) = sys.accelerations(0.0, &x.q, &x.v).unwrap();
                let amax = a.iter().fold(0.0f64, |s, v| s.max(v.abs()));
                assert!(
                    amax < 1e-8,
                    "m = {m}, k_tire = {k_tire}, post = {post}: |a| = {amax:e}"
                );
            }
        }
    }
}

#[test]
fn no_equilibrium_names_the_drifting_coordinates() {
    // Without the tire nothing holds the corner up: the chassis slides down its guide.
    let spec = Arc::new(corner(&Variant {
        k_tire: 0.0,
        c_tire: 0.0,
        ..Variant::default()
    }));
    let mut sys = System::new(spec).unwrap();
    let e = sys.initial_state(0.0).unwrap_err().to_string();
    assert!(e.contains("static equilibrium not found"), "{e}");
    assert!(e.contains("body 'chassis' z"), "{e}");
    assert!(e.contains("nothing holds it"), "{e}");
}

/// A pendulum (bob 1 kg at `L` = 1 m on a revolute pivot, gravity −y) starting at `angle`
/// above the horizontal, `initial = "static"`, in `formulation`.
fn pendulum(angle_deg: f64, formulation: &str) -> ModelSpec {
    let a = angle_deg.to_radians();
    let text = format!(
        r#"[model]
name = "pendulum_static"
gravity = [0.0, -9.81, 0.0]
initial = "static"
formulation = "{formulation}"

[[bodies]]
name = "bob"
mass = 1.0
inertia = [0.01, 0.01, 0.01]
position = [{}, {}, 0.0]

[[joints]]
name = "pivot"
type = "revolute"
body1 = "ground"
body2 = "bob"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]

[[outputs]]
name = "bob_y"
type = "position"
body = "bob"
component = "y"
"#,
        a.cos(),
        a.sin()
    );
    mbsfmu::mbs::load_model_str(&text, Path::new("pendulum.toml")).unwrap()
}

/// The static initialization returns the equilibrium a damped run settles to, the bob
/// hanging at y = −L, from starts where Newton alone finds the upright (unstable) one (45°
/// and 80° above the horizontal: it is the nearest root) or finds no stiffness to start from
/// (exactly horizontal: gravity across the link, no reaction yet), in both formulations.
/// Before the stability check the 45° start came back balanced upright (y = +L) and the
/// horizontal one failed with "no equilibrium ... it tips over".
#[test]
fn static_initialization_leaves_the_unstable_equilibrium_for_the_stable_one() {
    for formulation in ["absolute", "joint"] {
        for deg in [0.0, 45.0, 80.0, -30.0, 170.0] {
            let spec = pendulum(deg, formulation);
            let mut sys = System::new(Arc::new(spec)).unwrap();
            let x = sys.initial_state(0.0).unwrap_or_else(|e| {
                panic!("{formulation}, start {deg} deg: {e}");
            });
            let mut out = [0.0];
            sys.evaluate_outputs(&x, &mut out).unwrap();
            assert!(
                (out[0] + 1.0).abs() < 1e-9,
                "{formulation}, start {deg} deg: bob at y = {}, not hanging at -1",
                out[0]
            );
        }
    }
}

/// Where the only equilibrium is unstable (a slider between a spring of negative rate, a
/// polynomial law `F = −1000 x`, at its free length), the static initialization says so and
/// names the coordinate that runs away, instead of returning the unstable position.
#[test]
fn an_equilibrium_that_is_only_unstable_is_refused_by_name() {
    let text = r#"[model]
name = "repelled_slider"
gravity = [0.0, -9.81, 0.0]
initial = "static"

[[bodies]]
name = "slider"
mass = 1.0
inertia = [0.01, 0.01, 0.01]
position = [1.0, 0.0, 0.0]

[[joints]]
name = "guide"
type = "prismatic"
body1 = "ground"
body2 = "slider"
point = [1.0, 0.0, 0.0]
axis = [1.0, 0.0, 0.0]

[[forces]]
name = "repeller"
type = "spring_damper"
body1 = "ground"
body2 = "slider"
point1 = [0.0, 0.0, 0.0]
point2 = [1.0, 0.0, 0.0]
law = "polynomial"
coeffs = [-1000.0]
"#;
    for formulation in ["absolute", "joint"] {
        let text = text.replace(
            "initial = \"static\"",
            &format!("initial = \"static\"\nformulation = \"{formulation}\""),
        );
        let spec = mbsfmu::mbs::load_model_str(&text, Path::new("repelled.toml")).unwrap();
        let mut sys = System::new(Arc::new(spec)).unwrap();
        let e = sys.initial_state(0.0).unwrap_err().to_string();
        assert!(
            e.contains("static equilibrium not found")
                && e.contains("the only equilibrium found is unstable")
                && e.contains("body 'slider' x"),
            "{formulation}: {e}"
        );
    }
}

/// `initial = "static"` with a contact or a joint stop open where the model is drawn: a 2 kg
/// ball (radius 0.1 m, contact stiffness 1e5 N/m) drawn 0.1 m above the ground plane settles
/// at `z = 0.1 − m g / k` = 0.0998038 m; a 2 kg slider on a vertical guide with its lower stop
/// 5 cm below (1e4 N/m) at `−0.05 − m g / k` = −0.051962 m. Across the gap the load does not
/// change, so no step could decrease the residual and the solver gave up with "the stiffness
/// is negative there (an unstable position: it tips over)". Both formulations.
#[test]
fn static_start_closes_an_open_contact_or_stop() {
    let (m, g) = (2.0, 9.81);
    let ball = r#"
[model]
name = "static_gap"
gravity = [0.0, 0.0, -9.81]
initial = "static"
[[bodies]]
name = "ball"
mass = 2.0
inertia = [0.01, 0.01, 0.01]
position = [0.0, 0.0, 0.2]
[[joints]]
name = "g"
type = "prismatic"
body1 = "ground"
body2 = "ball"
point = [0.0, 0.0, 0.2]
axis = [0.0, 0.0, 1.0]
[[forces]]
name = "c"
type = "contact"
geometry = "sphere_plane"
sphere = "ball"
radius = 0.1
normal = [0.0, 0.0, 1.0]
stiffness = 1e5
damping = 50.0
[[outputs]]
name = "z"
type = "position"
body = "ball"
component = "z"
"#;
    let stop = r#"
[model]
name = "static_stop"
gravity = [0.0, 0.0, -9.81]
initial = "static"
[[bodies]]
name = "b"
mass = 2.0
inertia = [0.01, 0.01, 0.01]
position = [0.0, 0.0, 0.0]
[[joints]]
name = "g"
type = "prismatic"
body1 = "ground"
body2 = "b"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]
[[forces]]
name = "st"
type = "joint_stop"
joint = "g"
lower = -0.05
stiffness = 1e4
damping = 10.0
[[outputs]]
name = "x"
type = "joint_coordinate"
joint = "g"
"#;
    for formulation in ["absolute", "joint"] {
        for (text, want) in [(ball, 0.1 - m * g / 1e5), (stop, -0.05 - m * g / 1e4)] {
            let out = common::cosim::initial_outputs(text, formulation, "gap.toml");
            assert!(
                (out[0] - want).abs() < 1e-9,
                "{formulation}: {} against {want}",
                out[0]
            );
        }
    }
}

/// The slider-crank of a tester's report: crank 0.1 m drawn at 1 rad, rod 0.3 m, slider 2 kg on
/// x held by a 300 N/m spring at its drawn length, a 2 N m/rad torsion spring on the crank
/// pivot with free angle 0 (pre-stressed by the drawn 1 rad), gravity −y.
const SLIDER_CRANK: &str = r#"
[model]
name = "sc"
gravity = [0.0, -9.81, 0.0]
initial = "static"
[[bodies]]
name = "crank"
mass = 0.3
inertia = [1e-4, 0.00025, 0.00025]
position = [0.027015115293407, 0.0420735492403948, 0.0]
orientation = { axis = [0.0, 0.0, 1.0], angle = 1 }
[[bodies]]
name = "rod"
mass = 0.5
inertia = [1e-4, 0.00375, 0.00375]
position = [0.198008758341185, 0.0420735492403948, 0.0]
orientation = { axis = [0.0, 0.0, 1.0], angle = -0.284304905894242 }
[[bodies]]
name = "slider"
mass = 2.0
inertia = [1e-3, 1e-3, 1e-3]
position = [0.341987286095555, 0.0, 0.0]
[[joints]]
name = "pivot"
type = "revolute"
body1 = "ground"
body2 = "crank"
point = [0, 0, 0.0]
axis = [0.0, 0.0, 1.0]
[[joints]]
name = "pin"
type = "revolute"
body1 = "crank"
body2 = "rod"
point = [0.054030230586814, 0.0841470984807897, 0.0]
axis = [0.0, 0.0, 1.0]
[[joints]]
name = "wrist"
type = "revolute"
body1 = "rod"
body2 = "slider"
point = [0.341987286095555, 0, 0.0]
axis = [0.0, 0.0, 1.0]
[[joints]]
name = "slide"
type = "prismatic"
body1 = "ground"
body2 = "slider"
point = [0.341987286095555, 0, 0.0]
axis = [1.0, 0.0, 0.0]
[[forces]]
name = "k"
type = "spring_damper"
body1 = "ground"
point1 = [-0.2, 0.0, 0.0]
body2 = "slider"
stiffness = 300.0
damping = 10.0
[[forces]]
name = "kt"
type = "rotational_spring_damper"
joint = "pivot"
stiffness = 2.0
[[outputs]]
name = "crank_q"
type = "joint_coordinate"
joint = "pivot"
"#;

/// The slider-crank's potential as a function of the crank angle θ alone (closed-form
/// kinematics: slider at `x(θ) = a cos θ + sqrt(l² − (a sin θ)²)`, crank centre at height
/// `a/2 sin θ`, rod centre at `a/2 sin θ`), and its derivative by central differences.
fn slider_crank_potential(theta: f64) -> f64 {
    let (a, l, g) = (0.1, 0.3, 9.81);
    let (m_crank, m_rod, k, kt) = (0.3, 0.5, 300.0, 2.0);
    let x = |t: f64| a * t.cos() + (l * l - (a * t.sin()).powi(2)).sqrt();
    // Free length: the drawn one (slider drawn at θ = 1, spring anchored at x = −0.2).
    let stretch = x(theta) - x(1.0);
    0.5 * kt * theta * theta
        + 0.5 * k * stretch * stretch
        + (m_crank + m_rod) * g * 0.5 * a * theta.sin()
}

/// The crank angle where `dV/dθ = 0`, by bisection on the analytic-enough derivative (central
/// differences of a smooth function) between angles where it changes sign, after a scan.
fn slider_crank_equilibrium() -> f64 {
    let dv = |t: f64| {
        let h = 1e-6;
        (slider_crank_potential(t + h) - slider_crank_potential(t - h)) / (2.0 * h)
    };
    // From the drawn angle downhill: the first sign change of dV/dθ below θ = 1.
    let mut hi = 1.0;
    assert!(dv(hi) > 0.0);
    let mut lo = hi;
    while dv(lo) > 0.0 {
        hi = lo;
        lo -= 0.01;
        assert!(
            lo > -std::f64::consts::PI,
            "no minimum below the drawn angle"
        );
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if dv(mid) > 0.0 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    0.5 * (lo + hi)
}

/// A pre-stressed slider-crank whose potential falls monotonically from the drawn position to
/// its only minimum (θ = −0.557 rad) through an inflection near θ = 0.2 rad, where the force
/// residual has a local minimum that is not an equilibrium (|dV/dθ| = 0.35 N m there). The
/// line search on the residual stopped there and the start was refused with "the stiffness is
/// negative there (an unstable position: it tips over)"; a damped run settles at the minimum.
/// Both formulations.
#[test]
fn static_start_passes_an_inflection_of_the_potential() {
    let want = slider_crank_equilibrium();
    assert!((want + 0.5566).abs() < 1e-3, "reference equilibrium {want}");
    for formulation in ["joint", "absolute"] {
        let out = common::cosim::initial_outputs(SLIDER_CRANK, formulation, "slider_crank.toml");
        assert!(
            (out[0] - want).abs() < 1e-6,
            "{formulation}: crank at {} rad, the minimum of the potential is at {want}",
            out[0]
        );
    }
}
