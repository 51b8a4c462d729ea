//! `static_preload` (issue 14): preload from equilibrium on the suspension corner. The design
//! position stays put, and the computed preloads equal the virtual-work values from
//! kinematically perturbed configurations (assembly with drivers, no force evaluation).

mod common;
use mbsfmu::integrate::any::AnyIntegrator;
use mbsfmu::integrate::system::Mechanical;
use mbsfmu::integrate::{Integrator, Method, Settings};
use mbsfmu::mbs::spec::ModelSpec;
use mbsfmu::mbs::system::System;
use std::path::Path;
use std::sync::Arc;

const G: f64 = 9.81;

fn corner_text() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/suspension_corner.toml");
    std::fs::read_to_string(path)
        .unwrap()
        .replace("initial = \"static\"", "initial = \"consistent\"")
}

/// The corner with `static_preload` on the coil-over and the tire (and `extra` appended).
fn marked(extra: &str) -> ModelSpec {
    let text = corner_text()
        .replace(
            "free_length = \"l0_spring\"\n",
            "free_length = \"l0_spring\"\nstatic_preload = true\n",
        )
        .replace(
            "free_length = 0.30\n",
            "free_length = 0.30\nstatic_preload = true\n",
        )
        + extra;
    mbsfmu::mbs::load_model_str(&text, Path::new("corner.toml")).unwrap()
}

fn index(spec: &ModelSpec, name: &str) -> usize {
    spec.forces.iter().position(|f| f.name == name).unwrap()
}

#[test]
fn design_position_stays_put() {
    let spec = Arc::new(marked(""));
    let mut sys = System::new(spec.clone()).unwrap();
    let x0 = sys.initial_state(0.0).unwrap();
    let n = sys.n_outputs();
    let mut y0 = vec![0.0; n];
    sys.evaluate_outputs(&x0, &mut y0).unwrap();
    assert_eq!(y0[0], 0.6, "chassis_z at the design position");
    let settings = Settings {
        method: Method::Bdf,
        rtol: 1e-8,
        atol: 1e-10,
        ..Settings::default()
    };
    let mut integ = AnyIntegrator::new(settings, sys.n_q(), sys.n_c()).unwrap();
    integ.initialize(&mut sys, &x0).unwrap();
    let mut y = vec![0.0; n];
    for k in 1..=20 {
        let t_end = 0.05 * k as f64;
        while Integrator::<System>::state(&integ).t < t_end {
            integ.step(&mut sys, t_end).unwrap();
        }
        let x = Integrator::<System>::state(&integ).clone();
        sys.evaluate_outputs(&x, &mut y).unwrap();
        for (i, o) in spec.outputs.iter().enumerate() {
            // Forces in N: 1e-9 relative to the load; positions and angles 1e-9 absolute.
            let tol = if o.unit == "N" { 1e-9 * 4000.0 } else { 1e-9 };
            assert!(
                (y[i] - y0[i]).abs() < tol,
                "{} moved from {} to {} at t = {t_end}",
                o.name,
                y0[i],
                y[i]
            );
        }
    }
}

/// Body centre heights, coil-over length and tire length with the lower arm turned by `eps`
/// from the design position and the chassis held (assembly only).
fn perturbed(eps: f64) -> (Vec<f64>, f64, f64) {
    let text = corner_text()
        + &format!(
            "\n[[drivers]]\nname = \"hold\"\njoint = \"chassis_guide\"\nmotion = 0.0\n\n\
             [[drivers]]\nname = \"turn\"\njoint = \"lower_pivot\"\nmotion = {eps:e}\n"
        );
    let mut spec = mbsfmu::mbs::load_model_str(&text, Path::new("corner.toml")).unwrap();
    // Absolute coordinates: the body heights are read off the state.
    spec.formulation = mbsfmu::mbs::spec::Formulation::Absolute;
    let spec = Arc::new(spec);
    let mut sys = System::new(spec.clone()).unwrap();
    let x = sys.initial_state(0.0).unwrap();
    let z: Vec<f64> = sys.layout().offsets.iter().map(|&o| x.q[o + 2]).collect();
    let mut y = vec![0.0; sys.n_outputs()];
    sys.evaluate_outputs(&x, &mut y).unwrap();
    let name = |n: &str| spec.outputs.iter().position(|o| o.name == n).unwrap();
    let spring = y[name("spring_length")];
    // Tire: from the post top (0, 0.75, 0) to the wheel centre.
    let tire = ((y[name("wheel_y")] - 0.75).powi(2) + y[name("wheel_z")].powi(2)).sqrt();
    (z, spring, tire)
}

#[test]
fn preloads_equal_the_virtual_work_values() {
    let spec = Arc::new(marked(""));
    let mut sys = System::new(spec.clone()).unwrap();
    sys.initial_state(0.0).unwrap();
    let masses: Vec<f64> = vec![360.0, 5.0, 3.0, 30.0];
    let weight: f64 = masses.iter().sum::<f64>() * G;
    let t_spring = sys.element_preload(index(&spec, "coilover"));
    let t_tire = sys.element_preload(index(&spec, "tire"));
    assert_eq!((t_spring.len(), t_tire.len()), (1, 1));
    // Heave of the whole corner (the coil-over keeps its length, the tire is vertical at the
    // design position): the tire carries the whole weight, tension = −W.
    assert!(
        (t_tire[0] + weight).abs() < 1e-9 * weight,
        "tire preload {} vs −W = {}",
        t_tire[0],
        -weight
    );
    // Wheel travel with the chassis held: −Σ m g δz − T_s δl_s − T_t δl_t = 0.
    let eps = 1e-5;
    let (zp, sp, tp) = perturbed(eps);
    let (zm, sm, tm) = perturbed(-eps);
    let work_gravity: f64 = masses
        .iter()
        .zip(zp.iter().zip(&zm))
        .map(|(m, (a, b))| -m * G * (a - b))
        .sum();
    let expected = (work_gravity - t_tire[0] * (tp - tm)) / (sp - sm);
    // The coil-over's tension at the design position is its spring force k (l − l0) plus the
    // computed preload (the tire is at its free length there: preload = tension).
    let design_length = (0.05f64.powi(2) + 0.51f64.powi(2)).sqrt();
    let tension = 60000.0 * (design_length - 0.572445) + t_spring[0];
    println!(
        "coil-over tension {tension} N (preload {} N), virtual work {expected} N; tire {} N",
        t_spring[0], t_tire[0]
    );
    assert!(
        (tension - expected).abs() < 1e-6 * expected.abs(),
        "coil-over tension {tension} vs virtual work {expected}"
    );
}

#[test]
fn preload_needs_enough_and_independent_elements() {
    // Only the coil-over: nothing can carry the corner's weight in heave.
    let text = corner_text().replace(
        "free_length = \"l0_spring\"\n",
        "free_length = \"l0_spring\"\nstatic_preload = true\n",
    );
    let spec = Arc::new(mbsfmu::mbs::load_model_str(&text, Path::new("c.toml")).unwrap());
    let e = System::new(spec)
        .unwrap()
        .initial_state(0.0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot hold the design position"), "{e}");
    assert!(e.contains("body 'chassis' z"), "{e}");
    // A second marked spring in parallel with the coil-over: not unique.
    let extra = "\n[[forces]]\nname = \"helper\"\ntype = \"spring_damper\"\nbody1 = \"chassis\"\n\
                 point1 = [0.0, 0.50, 0.70]\nbody2 = \"lower_arm\"\npoint2 = [0.0, 0.55, 0.19]\n\
                 stiffness = 1000.0\nstatic_preload = true\n";
    let spec = Arc::new(marked(extra));
    let e = System::new(spec)
        .unwrap()
        .initial_state(0.0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not determined uniquely"), "{e}");
    assert!(e.contains("`helper`"), "{e}");
}

/// A horizontal bar (m = 2 kg, L = 0.8 m) on a hinge about +y at its left end, held by a
/// rotational spring with `static_preload`, and a block (m = 3 kg) hung on a bushing with
/// `static_preload`: the preloads are the closed-form holding torque and force.
#[test]
fn rotational_spring_and_bushing_preloads_are_the_holding_loads() {
    let text = r#"
[model]
name = "holders"
gravity = [0.0, 0.0, -9.81]

[[bodies]]
name = "bar"
mass = 2.0
inertia = [0.001, 0.1067, 0.1067]
position = [0.4, 0.0, 1.0]

[[bodies]]
name = "block"
mass = 3.0
inertia = [0.01, 0.01, 0.01]
position = [2.0, 0.0, 1.0]

[[joints]]
name = "hinge"
type = "revolute"
body1 = "ground"
body2 = "bar"
point = [0.0, 0.0, 1.0]
axis = [0.0, 1.0, 0.0]

[[forces]]
name = "torsion"
type = "rotational_spring_damper"
joint = "hinge"
stiffness = 500.0
static_preload = true

[[forces]]
name = "mount"
type = "bushing"
body1 = "ground"
body2 = "block"
point = [2.0, 0.0, 1.0]
stiffness = [1e5, 1e5, 1e5]
rot_stiffness = [1e3, 1e3, 1e3]
static_preload = true
"#;
    let spec = Arc::new(mbsfmu::mbs::load_model_str(text, Path::new("holders.toml")).unwrap());
    let mut sys = System::new(spec.clone()).unwrap();
    let x0 = sys.initial_state(0.0).unwrap();
    // Gravity's moment about the hinge axis +y: r × F = (0.4, 0, 0) × (0, 0, −m g) has
    // y component +0.4 m g; the spring holds it with −0.4 m g.
    let torque = sys.element_preload(index(&spec, "torsion"));
    assert_eq!(torque.len(), 1);
    assert!((torque[0] + 0.4 * 2.0 * G).abs() < 1e-9, "{torque:?}");
    // The bushing carries the block's weight along +z, nothing else.
    let mount = sys.element_preload(index(&spec, "mount"));
    assert_eq!(mount.len(), 6);
    let expected = [0.0, 0.0, 3.0 * G, 0.0, 0.0, 0.0];
    for (m, e) in mount.iter().zip(expected) {
        assert!((m - e).abs() < 1e-9, "{mount:?}");
    }
    // And nothing moves.
    let (a, _) = sys.accelerations(0.0, &x0.q, &x0.v).unwrap();
    assert!(a.iter().all(|v| v.abs() < 1e-9), "{a:?}");
}

/// `static_preload` with `initial = "static"` on a one-dof model: a 3 kg block on a vertical
/// guide hangs on a spring whose computed preload (m g = 29.43 N) holds it where it is drawn,
/// so the static solve has nothing to do. The net force at the start is round-off (1e-14 N),
/// which was the solver's load scale: it stalled ("load scale 7.105e-15 N"). Both
/// formulations.
#[test]
fn static_preload_with_a_static_start_on_a_small_model() {
    let text = r#"
[model]
name = "sp_static"
gravity = [0.0, 0.0, -9.81]
initial = "static"
[[bodies]]
name = "b"
mass = 3.0
inertia = [0.1, 0.1, 0.1]
position = [0.0, 0.0, 0.0]
[[joints]]
name = "slide"
type = "prismatic"
body1 = "ground"
body2 = "b"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]
[[forces]]
name = "spr"
type = "spring_damper"
body1 = "ground"
point1 = [0.0, 0.0, 1.0]
body2 = "b"
stiffness = 300.0
static_preload = true
[[outputs]]
name = "z"
type = "position"
body = "b"
component = "z"
[[outputs]]
name = "F"
type = "element_force"
force = "spr"
"#;
    for formulation in ["absolute", "joint"] {
        let out = common::cosim::initial_outputs(text, formulation, "sp_static.toml");
        assert!(out[0].abs() < 1e-12, "{formulation}: z = {}", out[0]);
        assert!(
            (out[1] - 3.0 * G).abs() < 1e-9,
            "{formulation}: F = {}",
            out[1]
        );
    }
}
