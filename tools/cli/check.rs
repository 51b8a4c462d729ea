//! `mbsfmu check MODEL.toml`.

use super::CliResult;
use mbsfmu::description::VariableTable;
use mbsfmu::mbs::spec::ModelSpec;
use mbsfmu::mbs::system::System;
use std::path::Path;
use std::sync::Arc;

/// Assemble the model as the FMU will at its start time: degrees of freedom, redundant
/// constraints dropped, how far the file's state was from consistent. `Err` for a model that
/// cannot be assembled (a user error).
pub fn assembly_report(spec: &ModelSpec) -> Result<String, String> {
    let mut sys = System::new(Arc::new(spec.clone())).map_err(|e| e.to_string())?;
    let t0 = spec.experiment.start;
    sys.initial_state(t0).map_err(|e| e.to_string())?;
    let r = sys.report.clone().ok_or("assembly produced no report")?;
    let mut s = format!(
        "  assembly at t = {t0}: {} coordinates, {} constraint equations ({} independent), {} degrees of freedom\n",
        r.n_coordinates, r.n_equations, r.n_independent, r.dof
    );
    if r.dropped.is_empty() {
        s.push_str("  no redundant constraints\n");
    } else {
        s.push_str(&format!(
            "  {} redundant constraint equations dropped:\n",
            r.dropped.len()
        ));
        for d in &r.dropped {
            s.push_str(&format!("    - {d}\n"));
        }
    }
    s.push_str(&format!(
        "  initial state: constraint residual {:.3e} as given, {:.3e} after assembly; positions moved by up to {:.3e}, velocities by up to {:.3e}\n",
        r.initial_residual, r.final_residual, r.max_position_change, r.max_velocity_change
    ));
    if spec.initialization == mbsfmu::mbs::spec::Initialization::Static {
        s.push_str("  started in static equilibrium\n");
    }
    Ok(s)
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
        Ok(report) => print!("{report}"),
        Err(message) => {
            return Err(super::CliError::User(format!(
                "{}: {message}",
                model.display()
            )))
        }
    }
    Ok(())
}
