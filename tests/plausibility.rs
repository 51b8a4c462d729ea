//! Plausibility warnings and unit consistency (issue 14): a catalogue of the warnings the
//! loader gives (`ModelSpec::warnings`, printed by `mbsfmu check`, logged by the FMU), a model
//! in mm that assembles and finds the same equilibrium as the model in m, and assembly
//! failures that name their largest residuals.

use mbsfmu::mbs::system::System;
use std::path::Path;
use std::sync::Arc;
use toml::Value;

fn corner_text() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("models/suspension_corner.toml"),
    )
    .unwrap()
}

fn load(text: &str) -> mbsfmu::mbs::ModelSpec {
    mbsfmu::mbs::load_model_str(text, Path::new("model.toml")).unwrap()
}

#[test]
fn gallery_models_have_no_warnings() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let spec = mbsfmu::mbs::load_model(&p).unwrap();
            assert!(
                spec.warnings.is_empty(),
                "{}: {:?}",
                p.display(),
                spec.warnings
            );
        }
    }
}

#[test]
fn catalogue_of_warnings() {
    // One hard point in mm in a model in metres (the z = 500).
    let text = corner_text().replace("point = [0.0, 0.65, 0.48]", "point = [0.0, 0.65, 480.0]");
    let w = load(&text).warnings;
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].starts_with("model.toml:"), "{}", w[0]);
    assert!(w[0].contains("joints[4] \"upper_ball\""), "{}", w[0]);
    assert!(w[0].contains("mm in a model in metres"), "{}", w[0]);
    // A body position in mm.
    let text = corner_text().replace(
        "position = [0.0, 0.73, 0.30]",
        "position = [0.0, 730.0, 300.0]",
    );
    let w = load(&text).warnings;
    assert!(
        w.iter().any(|w| w.contains("bodies[3] \"upright\"")),
        "{w:?}"
    );
    // A body nothing holds.
    let text = corner_text()
        + "\n[[bodies]]\nname = \"loose\"\nmass = 1.0\ninertia = [0.1, 0.1, 0.1]\nposition = [0.0, 0.0, 1.0]\n";
    let w = load(&text).warnings;
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("bodies[4] \"loose\""), "{}", w[0]);
    assert!(w[0].contains("nothing holds it"), "{}", w[0]);
    // A contact sphere whose centre starts behind its plane (a normal of the wrong sign):
    // 0.5 m behind with radius 0.1, six radii deep (until session 25 no warning, and the ball
    // left at hundreds of m/s).
    let balls = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("models/bouncing_balls.toml"),
    )
    .unwrap()
    .replace("normal = [0.0, 1.0, 0.0]", "normal = [0.0, -1.0, 0.0]");
    let w = load(&balls).warnings;
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("forces[1] \"ball_ground\"")
            && w[0].contains("the sphere's centre starts 0.5 m behind the plane (along `normal` [0, -1, 0]), 6.0 radii deep"),
        "{}",
        w[0]
    );
}

/// The model in the consistent units mm, t, s, N (as FE codes use): lengths × 1e3, masses
/// × 1e-3, inertias (t mm²) × 1e3, stiffness (N/mm) and damping (N s/mm) × 1e-3, gravity
/// in mm/s².
fn to_mm(v: &mut Value, key: &str) {
    const LENGTHS: &[&str] = &["position", "point", "point1", "point2"];
    match v {
        Value::Table(t) => {
            for (k, x) in t.iter_mut() {
                to_mm(x, k);
            }
            let name = t
                .get("name")
                .and_then(|n| n.as_str())
                .unwrap_or("")
                .to_string();
            let factor = match name.as_str() {
                "k_spring" | "k_tire" | "c_spring" | "c_tire" | "m_chassis" | "m_upright" => 1e-3,
                "l0_spring" => 1e3,
                _ => 1.0,
            };
            if let Some(Value::Float(x)) = t.get_mut("value") {
                *x *= factor;
            }
            if let Some(Value::Float(x)) = t.get_mut("free_length") {
                *x *= 1e3;
            }
            if let Some(Value::Float(x)) = t.get_mut("mass") {
                *x *= 1e-3;
            }
        }
        Value::Array(a) if LENGTHS.contains(&key) || key == "inertia" || key == "gravity" => {
            let f = 1e3;
            for x in a.iter_mut() {
                if let Value::Float(y) = x {
                    *y *= f;
                }
            }
        }
        Value::Array(a) => {
            for x in a.iter_mut() {
                to_mm(x, key);
            }
        }
        _ => {}
    }
}

#[test]
fn a_consistent_model_in_mm_assembles_to_the_same_equilibrium() {
    let mut doc: Value = corner_text().parse().unwrap();
    to_mm(&mut doc, "");
    let mm = load(&toml::to_string(&doc).unwrap());
    assert!(mm.warnings.is_empty(), "{:?}", mm.warnings);
    let m = load(&corner_text());
    let eq = |spec: mbsfmu::mbs::ModelSpec| {
        let spec = Arc::new(spec);
        let mut sys = System::new(spec.clone()).unwrap();
        let x = sys.initial_state(0.0).unwrap();
        let mut y = vec![0.0; sys.n_outputs()];
        sys.evaluate_outputs(&x, &mut y).unwrap();
        y
    };
    let (ym, ymm) = (eq(m.clone()), eq(mm));
    for (i, o) in m.outputs.iter().enumerate() {
        let f = if o.unit == "m" { 1e3 } else { 1.0 };
        assert!(
            (ymm[i] - f * ym[i]).abs() < 1e-9 * (f * ym[i]).abs().max(1.0),
            "{}: {} in mm vs {} in m",
            o.name,
            ymm[i],
            ym[i]
        );
    }
}

#[test]
fn assembly_failures_name_the_largest_residuals() {
    // A tie rod of 3 m where the arms keep the upright within 0.5 m of the rack: no solution.
    let text = corner_text().replace(
        "point2 = [-0.13, 0.68, 0.28]\n",
        "point2 = [-0.13, 0.68, 0.28]\nlength = 3.0\n",
    );
    let spec = Arc::new(load(&text));
    let e = System::new(spec)
        .unwrap()
        .initial_state(0.0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot be assembled"), "{e}");
    // The violated row is named first, then where the last attempt ended.
    let given = e.split("violated as given:").nth(1).unwrap_or("");
    assert!(given.trim_start().starts_with("joint 'tie_rod'"), "{e}");
    let listed = e
        .split("largest residuals after the last attempt:")
        .nth(1)
        .unwrap_or("");
    assert!(listed.contains("joint '"), "{e}");
}
