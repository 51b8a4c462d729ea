//! The BDF integrator does not allocate per step once running (counting global allocator).
//! Only the sparse strategies' pattern widening (a rare event) may allocate, so they are not
//! part of this check.

mod alloc_count;

use mbsfmu::integrate::bdf::Bdf;
use mbsfmu::integrate::test_systems::CartesianChain;
use mbsfmu::integrate::{InputKink, Integrator, JacobianStrategy, Settings};

#[test]
fn no_allocation_per_step() {
    for strategy in [
        JacobianStrategy::Dense,
        JacobianStrategy::DenseExtended,
        JacobianStrategy::AnalyticExtended,
    ] {
        let mut sys = CartesianChain::paper(6);
        let x0 = sys.consistent_state(0.0);
        let mut bdf = Bdf::new(
            Settings {
                jacobian: strategy,
                ..Settings::default()
            },
            12,
            6,
        );
        bdf.initialize(&mut sys, &x0).unwrap();
        for _ in 0..20 {
            bdf.step(&mut sys, 100.0).unwrap();
        }
        // The re-anchoring workspace is sized on first use.
        bdf.inputs_changed(&mut sys, InputKink::UNKNOWN).unwrap();
        let before = alloc_count::allocations();
        let stats_before = *bdf.stats();
        let mut t_comm = bdf.state().t;
        // Communication points of very different spacing: clipping changes h (and α), which
        // forces Jacobian refreshes and updates inside the counted window.
        for i in 0..600 {
            // A communication point with new inputs of unknown kink: the history is
            // re-anchored there (one LU and solves in a preallocated workspace).
            bdf.inputs_changed(&mut sys, InputKink::UNKNOWN).unwrap();
            t_comm += [0.05, 0.002, 0.3][i % 3];
            while bdf.state().t < t_comm {
                bdf.step(&mut sys, t_comm).unwrap();
            }
        }
        let allocs = alloc_count::allocations() - before;
        assert_eq!(
            bdf.reanchors(),
            601,
            "re-anchored at every communication point"
        );
        let s = bdf.stats();
        assert!(
            s.jac_evals + s.jac_updates > stats_before.jac_evals + stats_before.jac_updates,
            "Jacobian work happened"
        );
        assert_eq!(
            allocs,
            0,
            "{}: {allocs} allocations in {} steps",
            strategy.name(),
            s.steps - stats_before.steps
        );
    }
}

/// A rig master's Set of an input (before every communication step) allocates nothing: the
/// all-or-none Set checks in one walk and applies in a second, without collecting.
#[test]
fn setting_an_input_allocates_nothing() {
    use mbsfmu::cosim::{SetPhase, Simulation};
    use mbsfmu::description::VariableTable;
    use mbsfmu::mbs::system::System;
    use std::sync::Arc;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/quarter_car_rig.toml");
    let spec = Arc::new(mbsfmu::mbs::load_model(&path).unwrap());
    let table = Arc::new(VariableTable::from_spec(&spec));
    let mut sim = Simulation::new(spec.clone(), table.clone(), System::new(spec).unwrap());
    sim.setup_experiment(None, 0.0, None).unwrap();
    sim.initialize().unwrap();
    let vr = table.by_name("stamp_z").unwrap().value_reference;
    sim.set_real(vr, 1e-3, SetPhase::Stepping).unwrap();
    let before = alloc_count::allocations();
    for k in 0..100 {
        sim.set_real(vr, 1e-5 * k as f64, SetPhase::Stepping)
            .unwrap();
    }
    let allocs = alloc_count::allocations() - before;
    assert_eq!(allocs, 0, "{allocs} allocations in 100 Sets");
}
