//! `mbsfmu check MODEL.toml`.

use super::CliResult;
use mbsfmu::description::VariableTable;
use mbsfmu::mbs::spec::ModelSpec;
use std::path::Path;

/// HOOK (lead, `mbs::system::System`): the assembly report — degrees of freedom, redundant
/// constraints, initial constraint residuals after consistent initialization. Return
/// `Some(Err(message))` for a model that cannot be assembled (reported as a user error).
/// Until the engine lands this returns `None` and `check` says so.
fn assembly_report(_spec: &ModelSpec) -> Option<Result<String, String>> {
    None
}

pub fn summary(spec: &ModelSpec) -> String {
    let t = VariableTable::from_spec(spec);
    let mut s = format!("model {:?}", spec.name);
    if !spec.description.is_empty() {
        s.push_str(&format!(": {}", spec.description));
    }
    s.push('\n');
    s.push_str(&format!(
        "  {} bodies, {} joints, {} drivers, {} force elements, {} moving frames\n",
        spec.bodies.len(),
        spec.joints.len(),
        spec.drivers.len(),
        spec.forces.len(),
        spec.frames.len()
    ));
    s.push_str(&format!(
        "  {} parameters, {} inputs, {} outputs ({} FMU variables)\n",
        spec.parameters.len(),
        spec.inputs.len(),
        spec.outputs.len(),
        t.variables.len()
    ));
    for (title, names) in [
        (
            "inputs",
            spec.inputs
                .iter()
                .map(|i| format!("{} [{}]", i.name, i.unit))
                .collect::<Vec<_>>(),
        ),
        (
            "outputs",
            spec.outputs
                .iter()
                .map(|o| format!("{} [{}]", o.name, o.unit))
                .collect(),
        ),
        (
            "parameters",
            spec.parameters
                .iter()
                .map(|p| format!("{} = {} {}", p.name, p.value, p.unit))
                .collect(),
        ),
    ] {
        if !names.is_empty() {
            s.push_str(&format!("  {title}: {}\n", names.join(", ")));
        }
    }
    let e = &spec.experiment;
    s.push_str(&format!(
        "  experiment: {} .. {} s, step {} s, tolerance {}\n",
        e.start, e.stop, e.step, e.tolerance
    ));
    s.push_str(&format!(
        "  solver: {} (jacobian {}), rtol {}, atol {}\n",
        spec.solver.method.name(),
        spec.solver.jacobian.name(),
        spec.solver.rtol,
        spec.solver.atol
    ));
    s
}

pub fn run(model: &Path) -> CliResult {
    let spec = mbsfmu::mbs::load_model(model)?;
    print!("{}", summary(&spec));
    println!("  loads without errors");
    match assembly_report(&spec) {
        Some(Ok(report)) => println!("{report}"),
        Some(Err(message)) => return Err(super::CliError::User(format!("{}: {message}", model.display()))),
        None => println!("  NOTE: assembly (degrees of freedom, redundant constraints, initial residuals) is not checked yet: the engine hook is not wired"),
    }
    Ok(())
}
