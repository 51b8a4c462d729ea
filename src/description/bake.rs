//! `mbsfmu export --set solver.KEY=VALUE`: writing solver choices into the packed model file.
//!
//! The FMU's `solver.integrator` and `solver.jacobian` are Enumeration parameters; some
//! masters (libcosim, Ecos) drop Enumeration variables, so their users cannot choose there.
//! The model file's `[solver]` table sets the defaults the FMU starts from, so the packager
//! edits that table in the packed copy (comments and layout kept, via `toml_edit`) and the
//! FMU is built from the edited text: `modelDescription.xml` shows the new start values and
//! the token covers the packed bytes.

use crate::integrate::{JacobianStrategy, Method};
use thiserror::Error;

/// The keys of the model file's `[solver]` table, with whether the value is a name.
pub const SOLVER_KEYS: [(&str, bool); 7] = [
    ("integrator", true),
    ("jacobian", true),
    ("rtol", false),
    ("atol", false),
    ("max_step", false),
    ("initial_step", false),
    ("fixed_step", false),
];

#[derive(Debug, Error, PartialEq)]
pub enum BakeError {
    #[error("--set {set}: expected solver.KEY=VALUE")]
    Syntax { set: String },
    #[error("--set {set}: export sets only the [solver] table (solver.KEY=VALUE with KEY one of {keys}); parameters are set in the importer")]
    NotSolver { set: String, keys: String },
    #[error("--set {set}: {key:?} is not a [solver] key (one of {keys})")]
    UnknownKey {
        set: String,
        key: String,
        keys: String,
    },
    #[error("--set {set}: {value:?} is not one of {choices}")]
    UnknownChoice {
        set: String,
        value: String,
        choices: String,
    },
    #[error("--set {set}: {value:?} is not a number")]
    NotANumber { set: String, value: String },
    #[error("{file}: cannot edit its [solver] table: {reason}")]
    Edit { file: String, reason: String },
}

/// One `solver.KEY=VALUE` checked against the `[solver]` keys and their choices.
#[derive(Debug, Clone)]
pub struct SolverSet {
    pub key: &'static str,
    pub value: toml_edit::Value,
}

/// Parse `solver.KEY=VALUE` arguments. Names are checked here; ranges (a positive `atol`…)
/// by the loader when the edited model is loaded.
pub fn parse_solver_sets(sets: &[String]) -> Result<Vec<SolverSet>, BakeError> {
    let keys = SOLVER_KEYS
        .iter()
        .map(|(k, _)| *k)
        .collect::<Vec<_>>()
        .join(", ");
    let mut out = Vec::new();
    for s in sets {
        let (name, value) = s
            .split_once('=')
            .ok_or_else(|| BakeError::Syntax { set: s.clone() })?;
        let (name, value) = (name.trim(), value.trim());
        let key = name
            .strip_prefix("solver.")
            .ok_or_else(|| BakeError::NotSolver {
                set: s.clone(),
                keys: keys.clone(),
            })?;
        let &(key, is_name) =
            SOLVER_KEYS
                .iter()
                .find(|(k, _)| *k == key)
                .ok_or_else(|| BakeError::UnknownKey {
                    set: s.clone(),
                    key: key.to_string(),
                    keys: keys.clone(),
                })?;
        let value = if is_name {
            let choices: Vec<&str> = match key {
                "integrator" => Method::ALL.iter().map(|m| m.name()).collect(),
                _ => JacobianStrategy::ALL.iter().map(|m| m.name()).collect(),
            };
            if !choices.contains(&value) {
                return Err(BakeError::UnknownChoice {
                    set: s.clone(),
                    value: value.to_string(),
                    choices: choices.join(", "),
                });
            }
            toml_edit::Value::from(value)
        } else {
            let x: f64 = value
                .parse()
                .ok()
                .filter(|x: &f64| x.is_finite())
                .ok_or_else(|| BakeError::NotANumber {
                    set: s.clone(),
                    value: value.to_string(),
                })?;
            // As written when it is TOML (`1e-9` stays `1e-9`), else the number.
            value
                .parse::<toml_edit::Value>()
                .ok()
                .filter(|v| v.is_float() || v.is_integer())
                .map(|mut v| {
                    v.decor_mut().clear();
                    v
                })
                .unwrap_or_else(|| toml_edit::Value::from(x))
        };
        out.push(SolverSet { key, value });
    }
    Ok(out)
}

/// `text` (a model file, named `file` in messages) with `sets` written into its `[solver]`
/// table, which is created when absent; everything else is kept as written.
pub fn bake_solver(text: &str, file: &str, sets: &[SolverSet]) -> Result<String, BakeError> {
    let edit = |reason: String| BakeError::Edit {
        file: file.to_string(),
        reason,
    };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| edit(format!("{e}")))?;
    let solver = doc
        .entry("solver")
        .or_insert(toml_edit::table())
        .as_table_like_mut()
        .ok_or_else(|| edit("`solver` is not a table".into()))?;
    for s in sets {
        let mut value = s.value.clone();
        // Keep a comment or spacing that followed the old value.
        if let Some(old) = solver.get(s.key).and_then(|i| i.as_value()) {
            *value.decor_mut() = old.decor().clone();
        }
        solver.insert(s.key, toml_edit::Item::Value(value));
    }
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(s: &[&str]) -> Result<Vec<SolverSet>, BakeError> {
        parse_solver_sets(&s.iter().map(|x| x.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn edits_the_solver_table_and_keeps_the_rest() {
        let text = "# corner\n[model]\nname = \"m\" # the name\n\n[solver]\nintegrator = \"sdirk\" # stiff\nrtol = 1e-6\n\n[[bodies]]\nname = \"b\"\n";
        let out = bake_solver(
            text,
            "m.toml",
            &sets(&["solver.integrator=bdf", "solver.atol=1e-9"]).unwrap(),
        )
        .unwrap();
        assert_eq!(
            out,
            "# corner\n[model]\nname = \"m\" # the name\n\n[solver]\nintegrator = \"bdf\" # stiff\nrtol = 1e-6\natol = 1e-9\n\n[[bodies]]\nname = \"b\"\n"
        );
        let parsed: toml::Table = toml::from_str(&out).unwrap();
        assert_eq!(parsed["solver"]["integrator"].as_str(), Some("bdf"));
        assert_eq!(parsed["solver"]["atol"].as_float(), Some(1e-9));
    }

    #[test]
    fn creates_a_missing_solver_table() {
        let text = "[model]\nname = \"m\"\n\n[[bodies]]\nname = \"b\"\n";
        let out =
            bake_solver(text, "m.toml", &sets(&["solver.fixed_step=0.001"]).unwrap()).unwrap();
        let parsed: toml::Table = toml::from_str(&out).unwrap();
        assert_eq!(parsed["solver"]["fixed_step"].as_float(), Some(0.001));
        assert_eq!(parsed["bodies"][0]["name"].as_str(), Some("b"));
    }

    #[test]
    fn refuses_unknown_keys_choices_and_numbers() {
        let e = sets(&["solver.integrater=bdf"]).unwrap_err().to_string();
        assert!(
            e.contains("\"integrater\"") && e.contains("integrator, jacobian"),
            "{e}"
        );
        let e = sets(&["solver.integrator=radau"]).unwrap_err().to_string();
        assert!(
            e.contains("\"radau\"") && e.contains("bdf, rosenbrock_nystrom"),
            "{e}"
        );
        let e = sets(&["solver.jacobian=exact"]).unwrap_err().to_string();
        assert!(e.contains("dense, sparse"), "{e}");
        let e = sets(&["solver.rtol=tight"]).unwrap_err().to_string();
        assert!(e.contains("not a number"), "{e}");
        let e = sets(&["k=3"]).unwrap_err().to_string();
        assert!(e.contains("only the [solver] table"), "{e}");
        let e = sets(&["solver.rtol"]).unwrap_err().to_string();
        assert!(e.contains("expected solver.KEY=VALUE"), "{e}");
        let e = bake_solver(
            "solver = 3\n",
            "m.toml",
            &sets(&["solver.rtol=1e-3"]).unwrap(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("m.toml") && e.contains("not a table"), "{e}");
    }
}
