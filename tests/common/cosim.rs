//! The co-simulation layer as the FMU drives it, set up for a test.

use mbsfmu::cosim::{Advance, SetPhase, Simulation};
use mbsfmu::description::VariableTable;
use mbsfmu::integrate::Method;
use mbsfmu::mbs::system::System;
use mbsfmu::mbs::ModelSpec;
use std::sync::Arc;

/// A simulation of `spec` with `solver.integrator = method` set in setup (before
/// `setup_experiment` and `initialize`, which the caller does), and its variable table.
pub fn simulation(
    spec: &Arc<ModelSpec>,
    method: Method,
) -> (Simulation<System>, Arc<VariableTable>) {
    let table = Arc::new(VariableTable::from_spec(spec));
    let mut sim = Simulation::new(
        spec.clone(),
        table.clone(),
        System::new(spec.clone()).unwrap(),
    );
    let item = Method::ALL.iter().position(|m| *m == method).unwrap() as i64 + 1;
    let vr = table.by_name("solver.integrator").unwrap().value_reference;
    sim.set_integer(vr, item, SetPhase::Setup).unwrap();
    (sim, table)
}

/// Advance to `t`, which must complete: a Discard (which `advance_to` returns as `Ok`) fails
/// the test with its reason, where ignoring it would compare outputs at an earlier time. The
/// CPU limit per call is lifted so that where a step ends does not depend on the machine's
/// speed or load (a debug build is some 30× slower); the step limit stays.
pub fn advance(sim: &mut Simulation<System>, t: f64) {
    sim.set_cpu_budget_per_call(f64::INFINITY);
    match sim.advance_to(t, None).unwrap() {
        Advance::Completed => {}
        other => panic!(
            "advance to t = {t}: {other:?}: {}",
            sim.last_failure().unwrap_or_default()
        ),
    }
}

/// Set a Float64 variable by name in setup.
pub fn set_real(sim: &mut Simulation<System>, table: &VariableTable, name: &str, value: f64) {
    let vr = table.by_name(name).unwrap().value_reference;
    sim.set_real(vr, value, SetPhase::Setup).unwrap();
}

/// A model text with `[model] formulation = "…"` set, loaded (`name` only labels messages).
pub fn spec_in(text: &str, formulation: &str, name: &str) -> Arc<ModelSpec> {
    let text = text.replacen(
        "[model]\n",
        &format!("[model]\nformulation = \"{formulation}\"\n"),
        1,
    );
    let spec = mbsfmu::mbs::load_model_str(&text, std::path::Path::new(name))
        .unwrap_or_else(|e| panic!("{name} ({formulation}): {e}"));
    Arc::new(spec)
}

/// [`simulation`] of `spec`, set up from t = 0 with `tolerance` (the model's if `None`) and
/// initialized.
pub fn started(
    spec: &Arc<ModelSpec>,
    method: Method,
    tolerance: Option<f64>,
) -> (Simulation<System>, Arc<VariableTable>) {
    let (mut sim, table) = simulation(spec, method);
    sim.setup_experiment(tolerance, 0.0, None).unwrap();
    sim.initialize().unwrap();
    (sim, table)
}

/// The outputs at the consistent (or static) initial state of `text` in `formulation`, at
/// t = 0, through the engine alone.
pub fn initial_outputs(text: &str, formulation: &str, name: &str) -> Vec<f64> {
    let mut sys = System::new(spec_in(text, formulation, name)).unwrap();
    let x = sys
        .initial_state(0.0)
        .unwrap_or_else(|e| panic!("{name} ({formulation}): {e}"));
    let mut out = vec![0.0; sys.n_outputs()];
    sys.evaluate_outputs(&x, &mut out).unwrap();
    out
}
