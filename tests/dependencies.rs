//! `ModelStructure` dependencies (issue 14) over every gallery model: the declared direct
//! dependencies of the outputs on the inputs are exactly the pairs whose directional
//! derivative (the FMU's own `Simulation::output_input_jacobian`) is non-zero at some sampled
//! state. Checked on the rule table `description::deps::output_dependencies`, which both the
//! FMI 2 and the FMI 3 `ModelStructure` writers use.

use mbsfmu::cosim::{SetPhase, Simulation};
use mbsfmu::description::deps::output_dependencies;
use mbsfmu::description::VariableTable;
use mbsfmu::mbs::system::System;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

fn models() -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("models"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    v
}

/// Pairs (output, input) with a non-zero derivative at one of a few states along a run with
/// moving inputs.
fn measured(path: &Path) -> BTreeSet<(usize, usize)> {
    let spec = Arc::new(mbsfmu::mbs::load_model(path).unwrap());
    let table = Arc::new(VariableTable::from_spec(&spec));
    let engine = System::new(spec.clone()).unwrap();
    let mut sim = Simulation::new(spec.clone(), table.clone(), engine);
    sim.setup_experiment(Some(1e-6), spec.experiment.start, None)
        .unwrap();
    sim.initialize().unwrap();
    let vr = |n: &str| table.by_name(n).unwrap().value_reference;
    let ins: Vec<u32> = spec.inputs.iter().map(|i| vr(&i.name)).collect();
    let outs: Vec<u32> = spec.outputs.iter().map(|o| vr(&o.name)).collect();
    let mut nonzero = BTreeSet::new();
    if ins.is_empty() {
        return nonzero;
    }
    for k in 1..=4 {
        let t = spec.experiment.start + 0.01 * k as f64;
        for (j, &v) in ins.iter().enumerate() {
            let u0 = spec.inputs[j].start;
            // Different curvature per input and sample, so no derivative vanishes by accident.
            let du = 0.002 * (k * k) as f64 * (1.0 + 0.3 * j as f64);
            sim.set_real(v, u0 + du, SetPhase::Stepping).unwrap();
        }
        sim.advance_to(t, None).unwrap();
        let jac = sim.output_input_jacobian(&outs, &ins).unwrap();
        let scale = jac.amax().max(1e-300);
        for i in 0..outs.len() {
            for j in 0..ins.len() {
                if jac[(i, j)].abs() > 1e-12 * scale {
                    nonzero.insert((i, j));
                }
            }
        }
    }
    nonzero
}

/// Every rule of the table in one model: a frame moved by an input carries a prismatic joint
/// and a spring; an actuator input on another spring; outputs of every kind.
const RULES: &str = r#"
[model]
name = "rules"
gravity = [0.0, 0.0, -9.81]
[[inputs]]
name = "base_z"
[[inputs]]
name = "push"
[[inputs]]
name = "turn"
# The base moves diagonally: along the slide (travel, spring) and across it (reactions).
[[frames]]
name = "base"
position = ["base_z", 0.0, "base_z"]
[[bodies]]
name = "slider"
mass = 2.0
inertia = [0.1, 0.1, 0.1]
position = [0.0, 0.0, 0.5]
[[bodies]]
name = "arm"
mass = 1.0
inertia = [0.01, 0.1, 0.1]
position = [0.5, 0.0, 0.5]
[[bodies]]
name = "bob"
mass = 1.0
inertia = [0.01, 0.01, 0.01]
position = [0.0, 1.0, 0.0]
[[joints]]
name = "slide"
type = "prismatic"
body1 = "base"
body2 = "slider"
point = [0.0, 0.0, 0.5]
axis = [0.0, 0.0, 1.0]
[[joints]]
name = "hinge"
type = "revolute"
body1 = "slider"
body2 = "arm"
point = [0.0, 0.0, 0.5]
axis = [0.0, 1.0, 0.0]
[[joints]]
name = "bob_slide"
type = "prismatic"
body1 = "ground"
body2 = "bob"
point = [0.0, 1.0, 0.0]
axis = [0.0, 0.0, 1.0]
[[drivers]]
name = "turn_drive"
joint = "hinge"
motion = "turn"
[[forces]]
name = "lift"
type = "spring_damper"
body1 = "base"
point1 = [0.3, 0.0, 0.0]
body2 = "slider"
stiffness = 1000.0
damping = 10.0
[[forces]]
name = "bob_spring"
type = "spring_damper"
body1 = "ground"
point1 = [0.0, 1.0, -0.5]
body2 = "bob"
stiffness = 500.0
actuator = "push"
[[outputs]]
name = "base_pos"
type = "position"
body = "base"
component = "z"
[[outputs]]
name = "base_vel"
type = "velocity"
body = "base"
component = "z"
[[outputs]]
name = "slider_pos"
type = "position"
body = "slider"
component = "z"
[[outputs]]
name = "travel"
type = "joint_coordinate"
joint = "slide"
[[outputs]]
name = "travel_rate"
type = "joint_rate"
joint = "slide"
[[outputs]]
name = "hinge_angle"
type = "joint_coordinate"
joint = "hinge"
[[outputs]]
name = "arm_angle"
type = "angle"
body = "arm"
axis = [0.0, 1.0, 0.0]
[[outputs]]
name = "lift_length"
type = "element_length"
force = "lift"
[[outputs]]
name = "lift_force"
type = "element_force"
force = "lift"
[[outputs]]
name = "bob_force"
type = "element_force"
force = "bob_spring"
[[outputs]]
name = "bob_length"
type = "element_length"
force = "bob_spring"
[[outputs]]
name = "bob_acc"
type = "acceleration"
body = "bob"
component = "z"
[[outputs]]
name = "slide_reaction"
type = "joint_force"
joint = "slide"
component = "x"
[[outputs]]
name = "turn_torque"
type = "driver_force"
driver = "turn_drive"
[[outputs]]
name = "energy"
type = "energy"
"#;

#[test]
fn declared_dependencies_equal_the_measured_ones_on_every_gallery_model() {
    let dir = std::env::temp_dir().join(format!("mbsfmu-deps-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("rules.toml");
    std::fs::write(&rules, RULES).unwrap();
    let mut failures = Vec::new();
    for path in models().into_iter().chain([rules]) {
        let spec = mbsfmu::mbs::load_model(&path).unwrap();
        let declared: BTreeSet<(usize, usize)> = output_dependencies(&spec)
            .iter()
            .enumerate()
            .flat_map(|(i, deps)| deps.iter().map(move |&j| (i, j)))
            .collect();
        let found = measured(&path);
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let show = |set: &BTreeSet<(usize, usize)>| {
            set.iter()
                .map(|&(i, j)| format!("{} <- {}", spec.outputs[i].name, spec.inputs[j].name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!("{name}: declared [{}]", show(&declared));
        let extra: BTreeSet<_> = declared.difference(&found).copied().collect();
        let missing: BTreeSet<_> = found.difference(&declared).copied().collect();
        if !extra.is_empty() || !missing.is_empty() {
            failures.push(format!(
                "{name}: declared but zero: [{}]; non-zero but not declared: [{}]",
                show(&extra),
                show(&missing)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
