//! The event locator does not allocate per step when no event occurs (counting global
//! allocator): the integrator backup is serialized into a buffer kept between steps. BDF on the
//! bouncing balls in free flight (no contact before t = 0.285 s).

mod alloc_count;

use mbsfmu::integrate::any::AnyIntegrator;
use mbsfmu::integrate::events::{EventLocator, StepOutcome};
use mbsfmu::integrate::system::Mechanical;
use mbsfmu::integrate::{Integrator, Method, Settings};
use mbsfmu::mbs::system::System;
use std::path::Path;
use std::sync::Arc;

#[test]
fn no_allocation_per_step_without_events() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/bouncing_balls.toml");
    let spec = Arc::new(mbsfmu::mbs::load_model(&f).unwrap());
    let mut sys = System::new(spec).unwrap();
    let x0 = sys.initial_state(0.0).unwrap();
    let settings = Settings {
        method: Method::Bdf,
        rtol: 1e-6,
        atol: 1e-8,
        max_step: 1e-3,
        ..Settings::default()
    };
    let mut integ = AnyIntegrator::new(settings, sys.n_q(), sys.n_c()).unwrap();
    integ.initialize(&mut sys, &x0).unwrap();
    let mut loc = EventLocator::new(1e-10);
    for _ in 0..20 {
        loc.step(&mut integ, &mut sys, 0.25).unwrap();
    }
    let before = alloc_count::allocations();
    for _ in 0..50 {
        let out = loc.step(&mut integ, &mut sys, 0.25).unwrap();
        assert!(matches!(out, StepOutcome::Step(_)));
    }
    let n = alloc_count::allocations() - before;
    let t = Integrator::<System>::state(&integ).t;
    assert!(t < 0.25, "still in free flight: t = {t}");
    assert_eq!(n, 0, "{n} allocations in 50 steps");
}
