//! Parameter rules (issue 14), as a catalogue: what each kind of parameter is declared as in
//! the FMU and what changing it does.
//! - used bare in a tunable field (stiffness, damping, free length): tunable, acts at once;
//! - used in geometry, a mass or an expression: fixed; set before initialization it re-resolves
//!   the model (the changed geometry is assembled);
//! - computed from others (`value` is an expression of parameters): follows them, read-only;
//! - used by nothing: a load-time warning, not exposed.

mod common;

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
    common::cosim::advance(&mut s, 20.0);
    let z = s.get_real(vr(&t, "z")).unwrap();
    // The damped bob (ζ ≈ 0.09) settles to the new free length's equilibrium.
    assert!(
        (z - equilibrium(1.4, 0.35, 12.0, 4000.0)).abs() < 1e-5,
        "{z}"
    );
}

/// A sled at 1 m/s into a stop at 0.1 m whose restitution, stiffness and limits are
/// parameters (docs/model-format.md, `joint_stop`: the rebound speed is e times the impact
/// speed), and a bar whose inertia and hinge axis are parameters.
const RULES: &str = r#"
[model]
name = "rules"
gravity = [0.0, -9.81, 0.0]

[[parameters]]
name = "lo"
value = -0.05

[[parameters]]
name = "up"
value = 0.1

[[parameters]]
name = "ks"
value = 1e7

[[parameters]]
name = "e"
value = 0.7

[[parameters]]
name = "Ix"
value = 0.01

[[parameters]]
name = "az"
value = 1.0

[[bodies]]
name = "sled"
mass = 2.0
inertia = [0.1, 0.1, 0.1]
position = [0.0, 0.0, 0.0]
velocity = [1.0, 0.0, 0.0]

[[joints]]
name = "guide"
type = "prismatic"
body1 = "ground"
body2 = "sled"
point = [0.0, 0.0, 0.0]
axis = [1.0, 0.0, 0.0]

[[forces]]
name = "end_stop"
type = "joint_stop"
joint = "guide"
lower = "lo"
upper = "up"
stiffness = "ks"
restitution = "e"

[[bodies]]
name = "bar"
mass = 1.0
inertia = ["Ix", 0.1, 0.1]
position = [0.0, 2.0, 0.0]

[[joints]]
name = "pivot"
type = "revolute"
body1 = "ground"
body2 = "bar"
point = [0.0, 2.0, 0.0]
axis = [0.0, 0.0, "az"]

[[outputs]]
name = "speed"
type = "joint_rate"
joint = "guide"
"#;

/// Every value the model file refuses is refused when set while stepping (tunable ones), by
/// the variable's name, the value and the file's rule; the instance keeps its previous value
/// and goes on. Before initialization ends such a value is taken with a warning that names
/// it, and the end of initialization refuses the values as they are then, naming them, with
/// the instance still in initialization. Before session 25 an axis of zero length or an
/// inertia against the triangle inequality failed the initialization without naming the
/// variable, and in Step Mode a restitution of 2 or a stop stiffness of 0 was taken silently
/// (the sled left through the stop).
#[test]
fn a_value_the_file_refuses_is_refused_when_set_and_changes_nothing() {
    let spec = Arc::new(mbsfmu::mbs::load_model_str(RULES, Path::new("rules.toml")).unwrap());
    let table = Arc::new(VariableTable::from_spec(&spec));
    let mut s = Simulation::new(spec.clone(), table.clone(), System::new(spec).unwrap());
    let t = &table;
    let refused = |s: &mut Simulation<System>, name: &str, value: f64, phase, rule: &str| {
        let msg = s
            .set_real(vr(t, name), value, phase)
            .expect_err(&format!("{name} = {value} accepted"))
            .to_string();
        let head = format!("variable `{name}`: invalid value {value}");
        assert!(msg.starts_with(&head) && msg.contains(rule), "{msg}");
    };
    // Before initialization ends parameters arrive one at a time: a value that breaks a rule
    // is taken with a warning naming it, and the rules are checked again at the end.
    let warned = |s: &mut Simulation<System>, name: &str, value: f64, rule: &str| {
        let w = s
            .set_real(vr(t, name), value, SetPhase::Setup)
            .unwrap()
            .unwrap_or_else(|| panic!("{name} = {value}: no warning"));
        let head = format!("`{name}` = {value} taken for now, but with the other parameters");
        assert!(w.starts_with(&head) && w.contains(rule), "{w}");
    };
    warned(&mut s, "az", 0.0, "`axis` has zero length");
    warned(&mut s, "Ix", 1.0, "triangle inequality");
    s.setup_experiment(None, 0.0, None).unwrap();
    let msg = s.initialize().unwrap_err().to_string();
    assert!(
        msg.starts_with(
            "the parameter values set before initialization ended (`Ix` = 1, `az` = 0)"
        ) && msg.contains("triangle inequality"),
        "{msg}"
    );
    // The instance stays in initialization: valid values, and it goes on.
    warned(&mut s, "az", 1.0, "triangle inequality");
    assert_eq!(
        s.set_real(vr(t, "Ix"), 0.02, SetPhase::Setup).unwrap(),
        None
    );
    s.initialize().unwrap();
    refused(
        &mut s,
        "e",
        2.0,
        SetPhase::Stepping,
        "`restitution` must be in (0, 1]",
    );
    refused(
        &mut s,
        "ks",
        0.0,
        SetPhase::Stepping,
        "`stiffness` must be positive",
    );
    refused(
        &mut s,
        "lo",
        0.2,
        SetPhase::Stepping,
        "must be above `lower`",
    );
    assert_eq!(s.get_real(vr(t, "e")).unwrap(), 0.7);
    // The stop kept its restitution: the sled comes back at 0.7 m/s.
    for k in 1..=30 {
        common::cosim::advance(&mut s, 0.01 * k as f64);
    }
    let v = s.get_real(vr(t, "speed")).unwrap();
    assert!((v + 0.7).abs() < 1e-3, "rebound speed {v}");
}

/// A Set of several values is all or none: a bad entry anywhere leaves every value as it was
/// (before session 25 the entries before it were applied, and a master that ignores Set's
/// status stepped on with them); limits set in one call are checked together, so they can
/// move past each other.
#[test]
fn a_set_of_several_values_is_all_or_none() {
    let spec = Arc::new(mbsfmu::mbs::load_model_str(RULES, Path::new("rules.toml")).unwrap());
    let table = Arc::new(VariableTable::from_spec(&spec));
    let mut s = Simulation::new(spec.clone(), table.clone(), System::new(spec).unwrap());
    let t = &table;
    let (ks, e, lo, up) = (vr(t, "ks"), vr(t, "e"), vr(t, "lo"), vr(t, "up"));
    let atol = vr(t, "solver.atol");
    s.setup_experiment(None, 0.0, None).unwrap();
    s.initialize().unwrap();
    let before = |s: &mut Simulation<System>| [ks, e, lo, up, atol].map(|v| s.get_real(v).unwrap());
    let old = before(&mut s);
    for (vrs, vals) in [
        (vec![ks, 999_999], vec![2e7, 1.0]),
        (vec![ks, e], vec![2e7, 2.0]),
        (vec![atol, e], vec![1e-9, -1.0]),
        (vec![ks, vr(t, "speed")], vec![2e7, 0.0]),
        (vec![e, lo], vec![0.5, 0.2]),
    ] {
        assert!(
            s.set_reals(&vrs, &vals, SetPhase::Stepping).is_err(),
            "{vrs:?} {vals:?}"
        );
        assert_eq!(before(&mut s), old, "{vrs:?} {vals:?}");
    }
    // Setting values they already have (a master that sets every tunable parameter before
    // each step) changes nothing: no restart of the integrator.
    common::cosim::advance(&mut s, 0.01);
    let restarts = s.stats().restarts;
    s.set_reals(&[ks, e], &[old[0], old[1]], SetPhase::Stepping)
        .unwrap();
    common::cosim::advance(&mut s, 0.02);
    assert_eq!(s.stats().restarts, restarts);
    s.set_real(e, 0.6, SetPhase::Stepping).unwrap();
    common::cosim::advance(&mut s, 0.03);
    assert_eq!(s.stats().restarts, restarts + 1);
    s.set_real(e, 0.7, SetPhase::Stepping).unwrap();
    // Both limits past the old upper one while stepping: refused one at a time, taken
    // together.
    assert!(s.set_real(lo, 0.2, SetPhase::Stepping).is_err());
    s.set_reals(&[lo, up], &[0.2, 0.3], SetPhase::Stepping)
        .unwrap();
    assert_eq!(before(&mut s)[2..4], [0.2, 0.3]);
    let msg = s
        .set_reals(&[lo, up], &[0.5, 0.4], SetPhase::Stepping)
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with("variables `lo` = 0.5, `up` = 0.4, set together:")
            && msg.contains("must be above `lower`"),
        "{msg}"
    );
}

/// A master that sets start values one at a time (fmpy, in the order of the model
/// description) can move both limits of a stop past the old upper one: the first Set is taken
/// with a warning, the second clears it, and initialization goes through.
#[test]
fn limits_set_one_at_a_time_before_initialization_are_taken() {
    let spec = Arc::new(mbsfmu::mbs::load_model_str(RULES, Path::new("rules.toml")).unwrap());
    let table = Arc::new(VariableTable::from_spec(&spec));
    let mut s = Simulation::new(spec.clone(), table.clone(), System::new(spec).unwrap());
    let w = s.set_real(vr(&table, "lo"), 0.2, SetPhase::Setup).unwrap();
    assert!(w.is_some_and(|w| w.contains("must be above `lower`")));
    assert_eq!(
        s.set_real(vr(&table, "up"), 0.3, SetPhase::Setup).unwrap(),
        None
    );
    s.setup_experiment(None, 0.0, None).unwrap();
    s.initialize().unwrap();
    assert_eq!(s.get_real(vr(&table, "lo")).unwrap(), 0.2);
}
