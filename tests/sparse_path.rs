//! The sparse saddle-point path of the half-implicit integrator: same results as the dense
//! path, and no allocation per step (counting global allocator, per thread).

mod alloc_count;

use mbsfmu::integrate::half_implicit::HalfImplicit;
use mbsfmu::integrate::sparse::SaddleSolver;
use mbsfmu::integrate::test_systems::CartesianChain;
use mbsfmu::integrate::{Integrator, MechState, Mechanical, MultibodySystem, Settings};
use mbsfmu::mbs::system::System;
use std::sync::Arc;

fn settings() -> Settings {
    Settings {
        rtol: 1e-5,
        atol: 1e-7,
        ..Settings::default()
    }
}

/// Integrate to `t_end` with the given path; returns the final state and the step count.
fn integrate<S: MultibodySystem>(
    sys: &mut S,
    x0: &MechState,
    solver: SaddleSolver,
    t_end: f64,
) -> (MechState, u64, bool) {
    let mut hi = HalfImplicit::new(settings(), sys.n_q(), sys.n_c());
    hi.set_saddle_solver(solver);
    hi.initialize(sys, x0).unwrap();
    while Integrator::<S>::state(&hi).t < t_end {
        hi.step(sys, t_end).unwrap();
    }
    let stats = Integrator::<S>::stats(&hi);
    (
        Integrator::<S>::state(&hi).clone(),
        stats.steps,
        hi.uses_sparse(),
    )
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

fn spherical_chain() -> (System, MechState) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/models/spherical_chain.toml");
    let mut spec = mbsfmu::mbs::load_model(std::path::Path::new(path)).unwrap();
    // The absolute formulation's sparse saddle-point path (n_q + n_c = 88).
    spec.formulation = mbsfmu::mbs::spec::Formulation::Absolute;
    let mut sys = System::new(Arc::new(spec)).unwrap();
    let x0 = sys.initial_state(0.0).unwrap();
    (sys, x0)
}

#[test]
fn sparse_path_matches_dense_and_does_not_allocate_per_step() {
    // 1. The engine's spherical chain (n_q + n_c = 88; both paths forced) and the
    //    hand-written chain: the two factorizations pivot
    //    differently, and the quasi-Newton iteration stops once its correction is below
    //    1e-3 (atol + rtol |q|) ≈ 1e-7, so positions agree to that bound (in practice far
    //    better) and velocities, difference quotients (q1 − q0)/h, to it divided by h.
    let (sys0, x0) = spherical_chain();
    let (xd, nd, sd) = integrate(&mut sys0.clone(), &x0, SaddleSolver::Dense, 0.5);
    let (xs, ns, ss) = integrate(&mut sys0.clone(), &x0, SaddleSolver::Sparse, 0.5);
    assert!(!sd && ss, "paths as asked");
    assert_eq!(nd, ns, "same step sequence");
    let dq = max_diff(&xd.q, &xs.q);
    let dv = max_diff(&xd.v, &xs.v);
    assert!(
        dq < 1e-8 && dv < 1e-6,
        "spherical chain: |Δq| {dq:e}, |Δv| {dv:e}"
    );
    assert!(xd.t == xs.t && xd.t == 0.5);

    let mut chain = CartesianChain::paper(12);
    let y0 = chain.consistent_state(0.0);
    let (yd, md, _) = integrate(&mut chain.clone(), &y0, SaddleSolver::Dense, 5.0);
    let (ys, ms, s2) = integrate(&mut chain.clone(), &y0, SaddleSolver::Sparse, 5.0);
    assert!(s2);
    assert_eq!(md, ms);
    let dq = max_diff(&yd.q, &ys.q);
    assert!(dq < 1e-8, "pendulum chain: |Δq| {dq:e}");

    // 2. The automatic choice on a long chain is sparse, and steps do not allocate once the
    //    factors have reached their size (warm-up steps first).
    let mut long = CartesianChain::paper(80);
    let z0 = long.consistent_state(0.0);
    let mut hi = HalfImplicit::new(settings(), long.n_q(), long.n_c());
    hi.initialize(&mut long, &z0).unwrap();
    assert!(hi.uses_sparse(), "n = 240 is above the threshold");
    for _ in 0..20 {
        hi.step(&mut long, 1e3).unwrap();
    }
    let before = alloc_count::allocations();
    let steps_before = Integrator::<CartesianChain>::stats(&hi).steps;
    let mut t_comm = Integrator::<CartesianChain>::state(&hi).t;
    for i in 0..200 {
        t_comm += [0.05, 0.002, 0.3][i % 3];
        while Integrator::<CartesianChain>::state(&hi).t < t_comm {
            hi.step(&mut long, t_comm).unwrap();
        }
    }
    let allocs = alloc_count::allocations() - before;
    let steps = Integrator::<CartesianChain>::stats(&hi).steps - steps_before;
    assert!(steps > 100, "{steps} steps");
    assert_eq!(allocs, 0, "{allocs} allocations in {steps} steps");

    // 3. The same with the engine (spherical chain, sparse path): its evaluations do not
    //    allocate either.
    let (mut sys, x0) = spherical_chain();
    let mut hi = HalfImplicit::new(settings(), sys.n_q(), sys.n_c());
    hi.set_saddle_solver(SaddleSolver::Sparse);
    hi.initialize(&mut sys, &x0).unwrap();
    assert!(hi.uses_sparse());
    for _ in 0..20 {
        hi.step(&mut sys, 1e3).unwrap();
    }
    let before = alloc_count::allocations();
    let steps_before = Integrator::<System>::stats(&hi).steps;
    for _ in 0..200 {
        hi.step(&mut sys, 1e3).unwrap();
    }
    let allocs = alloc_count::allocations() - before;
    let steps = Integrator::<System>::stats(&hi).steps - steps_before;
    assert_eq!(allocs, 0, "engine: {allocs} allocations in {steps} steps");

    // 4. A serialized integrator (FMU state) carries no sparse factors; the restored copy
    //    refactors and continues exactly like the original.
    let bytes = postcard::to_stdvec(&hi).unwrap();
    let mut restored: HalfImplicit = postcard::from_bytes(&bytes).unwrap();
    let mut sys2 = sys.clone();
    for _ in 0..10 {
        hi.step(&mut sys, 1e3).unwrap();
        restored.step(&mut sys2, 1e3).unwrap();
    }
    let (a, b) = (
        Integrator::<System>::state(&hi),
        Integrator::<System>::state(&restored),
    );
    assert_eq!(a.t, b.t);
    assert_eq!(a.q, b.q);
}
