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
    pendulum_with_inertia(angle_deg, formulation, 0.01)
}

/// [`pendulum`] with the bob's principal moments of inertia `inertia` (kg m²).
fn pendulum_with_inertia(angle_deg: f64, formulation: &str, inertia: f64) -> ModelSpec {
    pendulum_drawn(angle_deg, formulation, inertia, 1.0, "")
}

/// The pendulum with the bob on the side `side` (1: +x, −1: −x) of the pivot and the extra
/// body keys `body_extra`.
fn pendulum_drawn(
    angle_deg: f64,
    formulation: &str,
    inertia: f64,
    side: f64,
    body_extra: &str,
) -> ModelSpec {
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
inertia = [{inertia}, {inertia}, {inertia}]
position = [{}, {}, 0.0]
{body_extra}
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
        side * a.cos(),
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

/// The same with a compact bob (inertia 0.001 kg m², a tenth of the above) drawn as a
/// tester did, left of the pivot and turned with the link (`angle` = a − π/2 about z), from
/// 22.5°, 45°, 60° and 89.4° above the horizontal (and the other starts, on both sides), both
/// formulations: hanging at y = −1. Before, those four starts failed with "the only
/// equilibrium found is unstable": Newton went to the upright position (the nearest
/// stationary point); leaving it, the multipliers were stepped by the same fraction as the
/// positions, so at the hanging position they still held the upright's compressive reaction,
/// the stability check read a negative stiffness there, and the escape ran out of steps.
#[test]
fn a_compact_bob_ends_hanging_from_every_start() {
    for formulation in ["absolute", "joint"] {
        for (deg, side) in [22.5, 45.0, 60.0, 89.4, 0.0, 80.0, 170.0, -30.0]
            .into_iter()
            .flat_map(|d| [(d, -1.0), (d, 1.0)])
        {
            let a = f64::to_radians(deg);
            let turned = if side < 0.0 {
                format!(
                    "orientation = {{ axis = [0.0, 0.0, 1.0], angle = {} }}\n",
                    a - std::f64::consts::FRAC_PI_2
                )
            } else {
                String::new()
            };
            let spec = pendulum_drawn(deg, formulation, 0.001, side, &turned);
            let mut sys = System::new(Arc::new(spec)).unwrap();
            let x = sys.initial_state(0.0).unwrap_or_else(|e| {
                panic!("{formulation}, start {deg} deg on side {side}: {e}");
            });
            let mut out = [0.0];
            sys.evaluate_outputs(&x, &mut out).unwrap();
            assert!(
                (out[0] + 1.0).abs() < 1e-9,
                "{formulation}, start {deg} deg on side {side}: bob at y = {}, not hanging at -1",
                out[0]
            );
        }
    }
}

/// An inverted pendulum on a torsion spring: bob 1 kg (inertia 0.001 kg m²) 1 m above a
/// revolute pivot, a torsion spring of rate `k` with its free angle upright, joint angle θ
/// from upright (`initial_angle` = the start). Gravity −y.
fn inverted_pendulum(theta0: f64, k: f64) -> String {
    bob_on_torsion_spring(theta0, k, 0.0, true)
}

/// Below `m g l` = 9.81 N m/rad the spring cannot hold the bob upright: the stable
/// equilibrium is the root of `k θ = m g l sin θ` in (0, π) (k = 6: 1.631944 rad), by
/// bisection. From 0.3 rad the static start finds +θ; from exactly upright (an unstable
/// equilibrium, which a damped run would not leave; the solver leaves it to one side) ±θ.
/// Both formulations, k = 1 ... 9. Before, every one failed with "the only equilibrium found
/// is unstable".
#[test]
fn an_inverted_pendulum_on_a_weak_torsion_spring_leans_to_its_equilibrium() {
    let mgl = 9.81;
    for k in [1.0, 3.0, 6.0, 9.0] {
        let g = |t: f64| k * t - mgl * t.sin();
        let (mut lo, mut hi) = (1e-3, std::f64::consts::PI);
        assert!(g(lo) < 0.0 && g(hi) > 0.0);
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if g(mid) < 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let want = 0.5 * (lo + hi);
        if k == 6.0 {
            assert!((want - 1.631944).abs() < 1e-6, "{want}");
        }
        for formulation in ["absolute", "joint"] {
            for theta0 in [0.3, 0.0] {
                let text = inverted_pendulum(theta0, k);
                let got = common::cosim::initial_outputs(&text, formulation, "inverted.toml")[0];
                let err = if theta0 > 0.0 {
                    (got - want).abs()
                } else {
                    (got.abs() - want).abs()
                };
                assert!(
                    err < 1e-8,
                    "{formulation}, k = {k}, start {theta0} rad: theta = {got}, the stable \
                     equilibrium is at {want}"
                );
            }
        }
    }
}

/// A weightless slider-crank with two stable equilibria: crank 0.1 m on the revolute
/// `crank_pivot` (`initial_angle` = the drawn crank angle φ0, so the joint angle is the
/// crank's angle from +x), rod 0.3 m, slider on x; a torsion spring kt = 5 N m/rad on the
/// crank with free angle −0.1, a spring ks = 2000 N/m of free length 0.9 m from the ground
/// point (1.2, 0, 0) to the slider.
fn bistable_slider_crank(phi0: f64) -> String {
    let (r, l) = (0.1, 0.3);
    let (tx, ty) = (r * phi0.cos(), r * phi0.sin());
    let x = tx + (l * l - ty * ty).sqrt();
    let rod = (-ty).atan2(x - tx);
    let half_pi = std::f64::consts::FRAC_PI_2;
    format!(
        r#"[model]
name = "bistable"
gravity = [0.0, 0.0, 0.0]
initial = "static"

[[bodies]]
name = "crank"
mass = 0.12
inertia = [1e-4, 1e-5, 1e-4]
position = [{cx}, {cy}, 0.0]
orientation = {{ axis = [0.0, 0.0, 1.0], angle = {ca} }}

[[bodies]]
name = "rod"
mass = 0.5
inertia = [4e-3, 4e-4, 4e-3]
position = [{rx}, {cy}, 0.0]
orientation = {{ axis = [0.0, 0.0, 1.0], angle = {ra} }}

[[bodies]]
name = "slider"
mass = 2.0
inertia = [1e-4, 1e-4, 1e-4]
position = [{x}, 0.0, 0.0]

[[joints]]
name = "crank_pivot"
type = "revolute"
body1 = "ground"
body2 = "crank"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]
initial_angle = {phi0}

[[joints]]
name = "crank_pin"
type = "revolute"
body1 = "crank"
body2 = "rod"
point = [{tx}, {ty}, 0.0]
axis = [0.0, 0.0, 1.0]

[[joints]]
name = "wrist_pin"
type = "revolute"
body1 = "rod"
body2 = "slider"
point = [{x}, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]

[[joints]]
name = "slide"
type = "prismatic"
body1 = "ground"
body2 = "slider"
point = [{x}, 0.0, 0.0]
axis = [1.0, 0.0, 0.0]

[[forces]]
name = "crank_spring"
type = "rotational_spring_damper"
joint = "crank_pivot"
stiffness = 5.0
free_angle = -0.1

[[forces]]
name = "slider_spring"
type = "spring_damper"
body1 = "ground"
point1 = [1.2, 0.0, 0.0]
body2 = "slider"
stiffness = 2000.0
free_length = 0.9

[[outputs]]
name = "phi"
type = "joint_coordinate"
joint = "crank_pivot"

[[outputs]]
name = "x"
type = "position"
body = "slider"
component = "x"
"#,
        cx = 0.5 * tx,
        cy = 0.5 * ty,
        ca = phi0 - half_pi,
        rx = 0.5 * (tx + x),
        ra = rod - half_pi,
    )
}

/// The bistable slider-crank's potential `V(φ) = ½ kt (φ + 0.1)² + ½ ks (1.2 − x(φ) − 0.9)²`,
/// `x(φ) = r cos φ + sqrt(l² − r² sin² φ)`, has minima at φ = −1.16179 (x = 0.325395) and
/// φ = +1.12279 (x = 0.329458) and its crest at φ = +0.02309. The static start from a drawn
/// angle must settle into the minimum on its side of the crest, as a damped run does (minima
/// and crest by bisection on the analytic `dV/dφ`). Before, the starts from ±0.5 and +0.3 rad
/// (where the stiffness is negative) went to the wrong minimum without a word: Newton's step
/// heads for the nearest stationary point, the crest, and the escape from there went to
/// either side. Both formulations.
#[test]
fn a_bistable_slider_crank_settles_on_the_side_it_is_drawn() {
    let (r, l, kt, ks) = (0.1f64, 0.3f64, 5.0, 2000.0);
    let x = |p: f64| r * p.cos() + (l * l - (r * p.sin()).powi(2)).sqrt();
    let dx =
        |p: f64| -r * p.sin() - r * r * p.sin() * p.cos() / (l * l - (r * p.sin()).powi(2)).sqrt();
    let dv = |p: f64| kt * (p + 0.1) - ks * (0.3 - x(p)) * dx(p);
    let root = |mut lo: f64, mut hi: f64| {
        let up = dv(hi) > 0.0;
        assert!((dv(lo) > 0.0) != up, "no sign change in [{lo}, {hi}]");
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if (dv(mid) > 0.0) == up {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        0.5 * (lo + hi)
    };
    let (left, crest, right) = (root(-1.4, -0.8), root(-0.2, 0.2), root(0.8, 1.4));
    assert!((left + 1.16179).abs() < 1e-5 && (right - 1.12279).abs() < 1e-5);
    assert!((crest - 0.02309).abs() < 1e-5, "{crest}");
    for formulation in ["joint", "absolute"] {
        for phi0 in [-0.5, -0.3, 0.0, 0.05, 0.3, 0.5] {
            let want = if phi0 < crest { left } else { right };
            let text = bistable_slider_crank(phi0);
            let out = common::cosim::initial_outputs(&text, formulation, "bistable.toml");
            assert!(
                (out[0] - want).abs() < 1e-8 && (out[1] - x(want)).abs() < 1e-9,
                "{formulation}, drawn at {phi0} rad: crank at {} rad, slider at {} m; the \
                 minimum on that side is at {want} rad, x = {}",
                out[0],
                out[1],
                x(want)
            );
        }
    }
}

/// A pendulum on a torsion spring: bob 1 kg (inertia 0.001 kg m²) 1 m from a revolute pivot,
/// joint angle θ from hanging (`initial_angle` = the start θ0), spring rate `k`, free angle
/// `free`. Gravity −y.
fn sprung_pendulum(theta0: f64, k: f64, free: f64) -> String {
    bob_on_torsion_spring(theta0, k, free, false)
}

/// A bob 1 kg (inertia 0.001 kg m²) 1 m from a revolute pivot about z on a torsion spring
/// (rate `k`, free angle `free`), drawn at joint angle `theta0` (`initial_angle`) from
/// straight above the pivot (`upright`) or straight below it. Gravity −y.
fn bob_on_torsion_spring(theta0: f64, k: f64, free: f64, upright: bool) -> String {
    // The bob at angle θ about z from its zero position (0, ±1).
    let sign = if upright { -1.0 } else { 1.0 };
    format!(
        r#"[model]
name = "bob"
gravity = [0.0, -9.81, 0.0]
initial = "static"

[[bodies]]
name = "bob"
mass = 1.0
inertia = [0.001, 0.001, 0.001]
position = [{x}, {y}, 0.0]
orientation = {{ axis = [0.0, 0.0, 1.0], angle = {theta0} }}

[[joints]]
name = "pivot"
type = "revolute"
body1 = "ground"
body2 = "bob"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]
initial_angle = {theta0}

[[forces]]
name = "spring"
type = "rotational_spring_damper"
joint = "pivot"
stiffness = {k}
free_angle = {free}

[[outputs]]
name = "theta"
type = "joint_coordinate"
joint = "pivot"
"#,
        x = sign * theta0.sin(),
        y = -sign * theta0.cos(),
    )
}

/// The potential `V(θ) = ½ k (θ − θf)² − m g l cos θ` of a pendulum on a weak torsion spring
/// has several wells; the overdamped motion from θ0 ends at the first zero of `V'` downhill
/// from θ0 (marched in steps of 1e-3 rad, then bisected). The static start must end there,
/// from starts on both sides of the crests, both formulations. Before, 17 of these 36 starts
/// went wrong: 13 failed ("the only equilibrium found is unstable"), 4 ended in another well
/// (k = 2, θf = 5 from 4.5 rad: at −5.317 rad for 6.064).
/// The joint coordinate is compared as it is: since the angle branches start at
/// `initial_angle` and follow the static solution (tests/angle_branches.rs), it reads 6.064,
/// not 6.064 − 2π.
#[test]
fn a_pendulum_on_a_torsion_spring_settles_where_the_overdamped_motion_does() {
    for (k, free) in [(0.5, 3.0), (0.5, 5.0), (2.0, 3.0), (2.0, 5.0)] {
        let dv = |t: f64| k * (t - free) + 9.81 * t.sin();
        for d0 in [-3.0, -2.5, -2.0, -1.0, -0.5, 0.5, 1.0, 1.5, 3.0] {
            let theta0: f64 = free + d0;
            let dir = -dv(theta0).signum();
            let mut a = theta0;
            while dv(a + dir * 1e-3).signum() != dir {
                a += dir * 1e-3;
            }
            let (mut lo, mut hi) = (a, a + dir * 1e-3);
            for _ in 0..100 {
                let mid = 0.5 * (lo + hi);
                if dv(mid).signum() == dv(lo).signum() {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            let want = 0.5 * (lo + hi);
            for formulation in ["absolute", "joint"] {
                let text = sprung_pendulum(theta0, k, free);
                let got = common::cosim::initial_outputs(&text, formulation, "sprung.toml")[0];
                let err = got - want;
                assert!(
                    err.abs() < 1e-8,
                    "{formulation}, k = {k}, free angle {free}, start {theta0} rad: theta = \
                     {got}, the overdamped motion ends at {want}"
                );
            }
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
