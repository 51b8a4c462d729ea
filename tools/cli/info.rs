//! `mbsfmu info FILE.fmu`.

use super::{CliError, CliResult};
use mbsfmu::description::xml::{fmt_f64, FmiVersion, ModelDescription, XmlType};
use mbsfmu::description::{Causality, Initial, StartValue, Variability};
use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

/// What an FMU holds, as text.
pub fn describe(fmu: &Path) -> CliResult<String> {
    let user = |m: String| CliError::User(format!("{}: {m}", fmu.display()));
    let file = std::fs::File::open(fmu).map_err(|e| user(format!("cannot open: {e}")))?;
    let mut zip =
        zip::ZipArchive::new(file).map_err(|e| user(format!("not an FMU (zip archive): {e}")))?;
    let names: Vec<String> = zip.file_names().map(str::to_string).collect();
    let mut xml = String::new();
    zip.by_name("modelDescription.xml")
        .map_err(|_| user("no modelDescription.xml in the archive".into()))?
        .read_to_string(&mut xml)
        .map_err(|e| user(format!("modelDescription.xml: {e}")))?;
    let md = ModelDescription::from_xml(&xml).map_err(|e| user(e.to_string()))?;

    let mut s = String::new();
    // The interfaces the description declares (an FMU from another tool may be Model
    // Exchange only).
    let interfaces: Vec<&str> = [
        ("<ModelExchange", "Model Exchange"),
        ("<CoSimulation", "Co-Simulation"),
        ("<ScheduledExecution", "Scheduled Execution"),
    ]
    .iter()
    .filter(|(tag, _)| xml.contains(tag))
    .map(|(_, name)| *name)
    .collect();
    s.push_str(&format!(
        "{}: FMI {} {} FMU\n",
        fmu.display(),
        md.fmi_version.attr(),
        if interfaces.is_empty() {
            "(no interface declared)".to_string()
        } else {
            interfaces.join(" + ")
        }
    ));
    s.push_str(&format!("  model:       {}\n", md.model_name));
    if !md.description.is_empty() {
        s.push_str(&format!("  description: {}\n", md.description));
    }
    s.push_str(&format!(
        "  generated:   {} on {}\n",
        md.generation_tool, md.generation_date_and_time
    ));
    s.push_str(&format!(
        "  {}{}\n",
        if md.fmi_version == FmiVersion::Fmi3 {
            "token:       "
        } else {
            "guid:        "
        },
        md.token
    ));
    s.push_str(&format!("  identifier:  {}\n", md.model_identifier));
    let platforms: BTreeSet<String> = names
        .iter()
        .filter_map(|n| n.strip_prefix("binaries/"))
        .filter_map(|rest| rest.split_once('/'))
        .filter(|(_, file)| !file.is_empty())
        .map(|(p, file)| format!("{p} ({file})"))
        .collect();
    s.push_str(&format!(
        "  platforms:   {}\n",
        if platforms.is_empty() {
            "none (no binaries/)".to_string()
        } else {
            platforms.into_iter().collect::<Vec<_>>().join(", ")
        }
    ));
    let caps: Vec<String> = md
        .capabilities
        .attributes(md.fmi_version)
        .into_iter()
        .filter(|(_, v)| v != "false")
        .map(|(k, v)| {
            if v == "true" {
                k.to_string()
            } else {
                format!("{k}={v}")
            }
        })
        .collect();
    s.push_str(&format!("  capabilities: {}\n", caps.join(", ")));
    if let Some(e) = md.experiment {
        s.push_str(&format!(
            "  default experiment: {} .. {} s, step {} s, tolerance {}\n",
            fmt_f64(e.start),
            fmt_f64(e.stop),
            fmt_f64(e.step),
            fmt_f64(e.tolerance)
        ));
    }
    let resources: Vec<&str> = names
        .iter()
        .filter_map(|n| n.strip_prefix("resources/"))
        .filter(|n| !n.is_empty() && !n.ends_with('/'))
        .collect();
    s.push_str(&format!("  resources:   {}\n", resources.join(", ")));
    let fmi3 = md.fmi_version == FmiVersion::Fmi3;
    s.push_str(&format!("  {} variables:\n", md.variables.len()));
    s.push_str(&format!(
        "    {:>5}  {:<28} {:<11} {:<10} {:<10} {:<16} {:<8} {}\n",
        "vr", "name", "causality", "variab.", "initial", "type", "unit", "start"
    ));
    for v in &md.variables {
        let c = match v.causality {
            Causality::Parameter => "parameter",
            Causality::Input => "input",
            Causality::Output => "output",
            Causality::Local => "local",
            Causality::Independent => "independent",
            Causality::CalculatedParameter => "calculatedParameter",
        };
        let var = match v.variability {
            Variability::Constant => "constant",
            Variability::Fixed => "fixed",
            Variability::Tunable => "tunable",
            Variability::Discrete => "discrete",
            Variability::Continuous => "continuous",
        };
        let init = match v.initial {
            None => "",
            Some(Initial::Exact) => "exact",
            Some(Initial::Approx) => "approx",
            Some(Initial::Calculated) => "calculated",
        };
        let ty = match &v.var_type {
            XmlType::Float64 => if fmi3 { "Float64" } else { "Real" }.to_string(),
            XmlType::Int64 => if fmi3 { "Int64" } else { "Integer" }.to_string(),
            XmlType::Enumeration(t) => t.clone(),
            XmlType::Other(t) => t.clone(),
        };
        let ty = if v.dimensions.is_empty() {
            ty
        } else {
            format!("{ty}[{}]", v.dimensions.join(", "))
        };
        let start = match (&v.start, &v.var_type) {
            (StartValue::None, _) => v.start_text.clone().unwrap_or_default(),
            (StartValue::Float(x), _) => fmt_f64(*x),
            (StartValue::Int(i), XmlType::Enumeration(t)) => md
                .enumeration_types
                .iter()
                .find(|e| e.name == *t)
                .and_then(|e| e.items.iter().find(|(_, x)| x == i))
                .map_or_else(|| i.to_string(), |(n, _)| format!("{n} ({i})")),
            (StartValue::Int(i), _) => i.to_string(),
        };
        let line = format!(
            "    {:>5}  {:<28} {:<11} {:<10} {:<10} {:<16} {:<8} {}",
            v.value_reference, v.name, c, var, init, ty, v.unit, start
        );
        s.push_str(line.trim_end());
        s.push('\n');
    }
    // Inputs with their descriptions: the FMU writes there how it reconstructs the input
    // between communication points.
    let inputs: Vec<_> = md
        .variables
        .iter()
        .filter(|v| v.causality == Causality::Input)
        .collect();
    if !inputs.is_empty() {
        s.push_str("  inputs:\n");
        for v in inputs {
            s.push_str(&format!("    {}: {}\n", v.name, v.description));
        }
    }
    if !md.outputs.is_empty() {
        s.push_str("  output dependencies (direct, on inputs):\n");
        let name = |vr: u32| {
            md.variable(vr)
                .map_or_else(|| format!("#{vr}"), |v| v.name.clone())
        };
        for u in &md.outputs {
            let d = match &u.dependencies {
                None => "all inputs".to_string(),
                Some(d) if d.is_empty() => "none".to_string(),
                Some(d) => d.iter().map(|&vr| name(vr)).collect::<Vec<_>>().join(", "),
            };
            s.push_str(&format!("    {} <- {}\n", name(u.value_reference), d));
        }
    }
    Ok(s)
}

pub fn run(fmu: &Path) -> CliResult {
    out!("{}", describe(fmu)?);
    Ok(())
}
