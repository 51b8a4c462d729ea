//! The co-simulation layer as the FMU drives it, set up for a test.

use mbsfmu::cosim::{SetPhase, Simulation};
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

/// Set a Float64 variable by name in setup.
pub fn set_real(sim: &mut Simulation<System>, table: &VariableTable, name: &str, value: f64) {
    let vr = table.by_name(name).unwrap().value_reference;
    sim.set_real(vr, value, SetPhase::Setup).unwrap();
}
