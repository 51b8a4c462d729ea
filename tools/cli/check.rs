//! `mbsfmu check MODEL.toml`.

use super::CliResult;
use mbsfmu::description::VariableTable;
use mbsfmu::mbs::spec::ModelSpec;
use mbsfmu::mbs::system::{AssemblyReport, LargestChange, System};
use std::path::Path;
use std::sync::Arc;

/// Assemble the model as the FMU will at its start time: degrees of freedom, redundant
/// constraints dropped, how far the file's state was from consistent. `Err` for a model that
/// cannot be assembled (a user error; the message names the model file).
pub fn assembly_report(spec: &ModelSpec) -> Result<String, String> {
    let mut sys = System::new(Arc::new(spec.clone())).map_err(|e| e.to_string())?;
    let t0 = spec.experiment.start;
    let x = sys.initial_state(t0).map_err(|e| e.to_string())?;
    let r = sys.report.clone().ok_or("assembly produced no report")?;
    let mut s = format!(
        "  assembly at t = {t0}: {} coordinates, {} constraint equations ({} independent), {} degrees of freedom\n",
        r.n_coordinates, r.n_equations, r.n_independent, r.dof
    );
    // The joint formulation decides at its first evaluation whether the tree is planar.
    let planar = sys
        .accelerations(t0, &x.q, &x.v)
        .ok()
        .and_then(|_| sys.joint_planar_tree());
    if let Some(j) = sys.joint_model() {
        let names = |js: &[usize]| -> String {
            let v: Vec<&str> = js.iter().map(|&i| spec.joints[i].name.as_str()).collect();
            if v.is_empty() {
                "none".into()
            } else {
                v.join(", ")
            }
        };
        let free: Vec<&str> = j
            .free_bodies()
            .iter()
            .map(|&b| spec.bodies[b].name.as_str())
            .collect();
        s.push_str(&format!(
            "  joint coordinates: tree joints {}; cut joints (constraints) {}; free bodies {}\n",
            names(&j.tree_joints()),
            names(j.cut_joints()),
            if free.is_empty() {
                "none".to_string()
            } else {
                free.join(", ")
            }
        ));
        s.push_str(match planar {
            Some(true) => "  joint coordinates: planar tree (every tree joint moves in one plane): M and Ψ by the planar recursion\n",
            Some(false) => "  joint coordinates: spatial tree: M and Ψ by the spatial recursion\n",
            None => "",
        });
    }
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
        "  initial state: constraint residual {:.3e} as given, {:.3e} after assembly\n",
        r.initial_residual, r.final_residual
    ));
    s.push_str(&initial_changes(&r));
    for (e, f) in spec.forces.iter().enumerate() {
        let p = sys.element_preload(e);
        if !p.is_empty() {
            let values: Vec<String> = p.iter().map(|v| format!("{v:.6e}")).collect();
            s.push_str(&format!(
                "  static_preload: `{}` preload {} (tension/torque added so that the design position is the equilibrium)\n",
                f.name,
                values.join(", ")
            ));
        }
    }
    if let Some((iterations, relaxation)) = r.static_iterations {
        s.push_str(&format!(
            "  static equilibrium found ({iterations} iterations, {relaxation} of them relaxation steps); from the assembled positions the bodies moved by:\n"
        ));
        for (name, dr, angle) in &r.body_moves {
            s.push_str(&format!(
                "    {name:<16} {dr:.6} m, {:.4} deg\n",
                angle.to_degrees()
            ));
        }
        let mut y = vec![0.0; sys.n_outputs()];
        sys.evaluate_outputs(&x, &mut y)
            .map_err(|e| e.to_string())?;
        if !y.is_empty() {
            s.push_str("  outputs at the equilibrium:\n");
            for (o, v) in spec.outputs.iter().zip(&y) {
                s.push_str(&format!("    {:<16} {v:.6e} {}\n", o.name, o.unit));
            }
        }
    }
    Ok(s)
}

/// What assembly changed of the file's state, per kind and in physical units, with the body
/// of each largest change: one line for positions, one for velocities (with `initial =
/// "static"` the velocities start from rest, not from the file).
fn initial_changes(r: &AssemblyReport) -> String {
    let c = &r.assembly;
    let of = |l: &LargestChange, unit: &str| -> String {
        if l.value == 0.0 {
            format!("0 {unit}")
        } else {
            format!("{:.3e} {unit} (body `{}`)", l.value, l.body)
        }
    };
    let rot = if c.rotation.value == 0.0 {
        "0 rad".to_string()
    } else {
        format!(
            "{:.3e} rad = {:.4} deg (body `{}`)",
            c.rotation.value,
            c.rotation.value.to_degrees(),
            c.rotation.body
        )
    };
    let mut s = format!(
        "  assembly moved the bodies by up to {} and turned them by up to {}\n",
        of(&c.displacement, "m"),
        rot
    );
    let v = format!(
        "{} and the angular velocities by up to {}",
        of(&c.velocity, "m/s"),
        of(&c.angular_velocity, "rad/s")
    );
    if r.static_iterations.is_some() {
        s.push_str(&format!(
            "  velocities: from rest (initial = \"static\"; the file's velocities are not used), projection onto the constraints changed them by up to {v}\n"
        ));
    } else {
        s.push_str(&format!("  assembly changed the velocities by up to {v}\n"));
    }
    s
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

/// The model's load-time warnings, one line each (`check` lists them, `export` prints them
/// to stderr).
pub fn warning_lines(spec: &ModelSpec) -> impl Iterator<Item = String> + '_ {
    spec.warnings.iter().map(|w| format!("warning: {w}"))
}

pub fn run(model: &Path) -> CliResult {
    let spec = mbsfmu::mbs::load_model(model)?;
    out!("{}", summary(&spec));
    if spec.warnings.is_empty() {
        outln!("  the file loads without errors or warnings (assembly follows)");
    } else {
        outln!("  loads without errors; warnings:");
        for w in warning_lines(&spec) {
            outln!("    {w}");
        }
    }
    match assembly_report(&spec) {
        Ok(report) => out!("{report}"),
        // The engine's errors name the model file themselves.
        Err(message) => return Err(super::CliError::User(message)),
    }
    Ok(())
}
