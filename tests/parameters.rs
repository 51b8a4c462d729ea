//! Parameter rules (issue 14), as a catalogue: what each kind of parameter is declared as in
//! the FMU and what changing it does.
//! - used bare in a tunable field (stiffness, damping, free length): tunable, acts at once;
//! - used in geometry, a mass or an expression: fixed; set before initialization it re-resolves
//!   the model (the changed geometry is assembled);
//! - computed from others (`value` is an expression of parameters): follows them, read-only;
//! - used by nothing: a load-time warning, not exposed.

use mbsfmu::cosim::{SetPhase, Simulation};
use mbsfmu::description::{Causality, VarKind, Variability, VariableTable};
use mbsfmu::mbs::system::System;
use std::path::Path;
use std::sync::Arc;

const MODEL: &str = r#"
[model]
name = "params"
gravity = [0.0, 0.0, -9.81]
initial = "static"

[[parameters]]
name = "k"
value = 1000.0

[[parameters]]
name = "c"
value = "2*0.1*sqrt(k*10)"

[[parameters]]
name = "h"
value = 1.0
description = "height of the hanger (geometry)"

[[parameters]]
name = "m"
value = 10.0

[[parameters]]
name = "l0"
value = 0.5

[[parameters]]
name = "unused"
value = 3.0

[[bodies]]
name = "bob"
type = "particle"
mass = "m"
position = [0.0, 0.0, "h - 0.5"]

[[joints]]
name = "guide"
type = "planar"
body1 = "ground"
body2 = "bob"
point = [0.0, 0.0, 0.0]
axis = [1.0, 0.0, 0.0]

[[joints]]
name = "guide2"
type = "planar"
body1 = "ground"
body2 = "bob"
point = [0.0, 0.0, 0.0]
axis = [0.0, 1.0, 0.0]

[[forces]]
name = "spring"
type = "spring_damper"
body1 = "ground"
point1 = [0.0, 0.0, "h"]
body2 = "bob"
stiffness = "k"
damping = "c"
free_length = "l0"

[[outputs]]
name = "z"
type = "position"
body = "bob"
component = "z"
"#;

fn spec() -> mbsfmu::mbs::ModelSpec {
    mbsfmu::mbs::load_model_str(MODEL, Path::new("params.toml")).unwrap()
}

fn sim() -> (Simulation<System>, Arc<VariableTable>) {
    let spec = Arc::new(spec());
    let table = Arc::new(VariableTable::from_spec(&spec));
    let engine = System::new(spec.clone()).unwrap();
    (Simulation::new(spec, table.clone(), engine), table)
}

fn vr(t: &VariableTable, n: &str) -> u32 {
    t.by_name(n).unwrap().value_reference
}

#[test]
fn declarations() {
    let spec = spec();
    let t = VariableTable::from_spec(&spec);
    let kind = |n: &str| {
        let v = t.by_name(n).unwrap();
        (v.causality, v.variability)
    };
    // k is used in c's expression: fixed (c follows it at initialization).
    assert_eq!(kind("k"), (Causality::Parameter, Variability::Fixed));
    assert_eq!(
        kind("c"),
        (Causality::CalculatedParameter, Variability::Fixed)
    );
    assert_eq!(kind("h"), (Causality::Parameter, Variability::Fixed));
    assert_eq!(kind("m"), (Causality::Parameter, Variability::Fixed));
    assert_eq!(kind("l0"), (Causality::Parameter, Variability::Tunable));
    assert!(t.by_name("unused").is_none());
    assert!(matches!(
        t.by_name("c").unwrap().kind,
        VarKind::Parameter(1)
    ));
    assert_eq!(spec.warnings.len(), 1, "{:?}", spec.warnings);
    assert!(spec.warnings[0].contains("parameters[5] \"unused\""));
    assert!(spec.warnings[0].contains("acts on nothing"));
}

/// Static equilibrium of the hanging mass: z = h − l0 − m g / k.
fn equilibrium(h: f64, l0: f64, m: f64, k: f64) -> f64 {
    h - l0 - m * 9.81 / k
}

#[test]
fn parameters_set_before_initialization_act() {
    let (mut s, t) = sim();
    s.setup_experiment(None, 0.0, None).unwrap();
    s.initialize().unwrap();
    let z0 = s.get_real(vr(&t, "z")).unwrap();
    assert!(
        (z0 - equilibrium(1.0, 0.5, 10.0, 1000.0)).abs() < 1e-9,
        "{z0}"
    );
    let c0 = s.get_real(vr(&t, "c")).unwrap();
    assert!((c0 - 2.0 * 0.1 * (1000.0f64 * 10.0).sqrt()).abs() < 1e-12);

    let (mut s, t) = sim();
    for (n, v) in [("h", 1.4), ("k", 4000.0), ("m", 12.0), ("l0", 0.3)] {
        s.set_real(vr(&t, n), v, SetPhase::Setup).unwrap();
    }
    // A calculated parameter cannot be set.
    assert!(s.set_real(vr(&t, "c"), 1.0, SetPhase::Setup).is_err());
    s.setup_experiment(None, 0.0, None).unwrap();
    s.initialize().unwrap();
    let z = s.get_real(vr(&t, "z")).unwrap();
    assert!(
        (z - equilibrium(1.4, 0.3, 12.0, 4000.0)).abs() < 1e-9,
        "{z}"
    );
    // c follows k.
    let c = s.get_real(vr(&t, "c")).unwrap();
    assert!(
        (c - 2.0 * 0.1 * (4000.0f64 * 10.0).sqrt()).abs() < 1e-12,
        "{c}"
    );
    // Fixed parameters cannot change during stepping; tunable ones can, and act.
    assert!(s.set_real(vr(&t, "h"), 2.0, SetPhase::Stepping).is_err());
    s.set_real(vr(&t, "l0"), 0.35, SetPhase::Stepping).unwrap();
    s.advance_to(20.0, None).unwrap();
    let z = s.get_real(vr(&t, "z")).unwrap();
    // The damped bob (ζ ≈ 0.09) settles to the new free length's equilibrium.
    assert!(
        (z - equilibrium(1.4, 0.35, 12.0, 4000.0)).abs() < 1e-5,
        "{z}"
    );
}
