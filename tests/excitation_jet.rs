//! The excitation jet of paper 003's update (26) in joint coordinates: the engine's
//! `(u, u̇, ü)` offsets, the store's second derivatives `∂²g/∂u_c∂y` against independent
//! differences, and the term's prediction against the real change of the Jacobian.

#[path = "../benches/common/chain_model.rs"]
mod chain_model;

use mbsfmu::integrate::ggl::Ggl;
use mbsfmu::integrate::jacobian::{JacobianStore, Refresh};
use mbsfmu::integrate::system::{Excitations, Mechanical};
use mbsfmu::integrate::{JacobianStrategy, Stats};
use mbsfmu::mbs::load_model_str;
use mbsfmu::mbs::system::System;
use nalgebra::DMatrix;
use std::path::Path;
use std::sync::Arc;

fn system(text: &str) -> System {
    let spec = load_model_str(text, Path::new("chain.toml")).expect("chain model loads");
    System::new(Arc::new(spec)).expect("chain model builds")
}

/// A generic state of the chain (angles and rates away from the hanging rest).
fn state(sys: &mut System) -> Vec<f64> {
    let x0 = sys.initial_state(0.0).unwrap();
    let n = x0.q.len();
    let mut y = vec![0.0; 2 * n];
    for k in 0..n {
        y[k] = x0.q[k] + 0.1 * (k as f64 + 1.0).sin();
        y[n + k] = 0.05 * (k as f64 + 1.0).cos();
    }
    y
}

/// A full evaluation of `G = ∂g/∂y` at `(t, y)` with an extended store: `G` and the channels'
/// second derivatives, with the number of jet members per excitation and the channels' values.
/// `analytic`: the joint formulation's analytic `G` (no difference noise), else dense
/// differences (and the store's mixed differences for the second derivatives).
fn full(
    sys: &mut System,
    t: f64,
    y: &[f64],
    analytic: bool,
) -> (DMatrix<f64>, Vec<DMatrix<f64>>, usize, Vec<f64>) {
    let (nq, nc) = (sys.n_q(), sys.n_c());
    assert_eq!(nc, 0, "the chain in joint coordinates has no constraints");
    let strategy = if analytic {
        JacobianStrategy::AnalyticExtended
    } else {
        JacobianStrategy::DenseExtended
    };
    let mut store = JacobianStore::new(strategy, nq, nc, sys.n_excitations());
    store.auto_excitation_term = false;
    let mut ggl = Ggl::new(nq, nc);
    let mut g0 = vec![0.0; y.len()];
    ggl.eval(sys, t, y, &mut g0).unwrap();
    let mut stats = Stats::default();
    store
        .refresh(Refresh::Full, &mut ggl, sys, t, y, &g0, 1.0, &mut stats)
        .unwrap();
    let (d_u, orders) = store.excitation_second_derivatives();
    (
        store.g.clone(),
        d_u.to_vec(),
        orders,
        store.excitation_channels().to_vec(),
    )
}

fn max_abs(m: &DMatrix<f64>) -> f64 {
    m.iter().fold(0.0f64, |a, b| a.max(b.abs()))
}

#[test]
fn excitation_jet_is_the_motion_and_its_offsets_shift_each_member() {
    let mut sys = system(&chain_model::joint_chain_model_text(
        4,
        chain_model::Suspension::Sine,
    ));
    assert_eq!(
        sys.excitation_orders(),
        3,
        "joint coordinates: the whole jet"
    );
    // The two moving suspension coordinates (z is constant).
    assert_eq!(sys.n_excitations(), 2);
    let (t, h) = (3.7, 1e-4);
    for i in 0..2 {
        let [u, ud, udd] = sys.excitation_jet(t, i);
        assert_eq!(u, sys.excitation(t, i));
        let fd1 = (sys.excitation(t + h, i) - sys.excitation(t - h, i)) / (2.0 * h);
        let fd2 = (sys.excitation(t + h, i) - 2.0 * u + sys.excitation(t - h, i)) / (h * h);
        assert!((ud - fd1).abs() < 1e-8, "u̇ {ud} vs differences {fd1}");
        assert!((udd - fd2).abs() < 1e-6, "ü {udd} vs differences {fd2}");
        sys.set_excitation_jet_offset(i, [1e-3, 2e-3, 3e-3]);
        let shifted = sys.excitation_jet(t, i);
        sys.set_excitation_jet_offset(i, [0.0; 3]);
        assert_eq!(sys.excitation_jet(t, i), [u, ud, udd]);
        for (k, d) in [1e-3, 2e-3, 3e-3].iter().enumerate() {
            assert!((shifted[k] - [u, ud, udd][k] - d).abs() < 1e-15);
        }
    }
    // Absolute coordinates keep the value-only channel (and the paper-003 pins).
    let abs = system(&chain_model::chain_model_text(4, true));
    assert_eq!(abs.excitation_orders(), 1);
}

/// A translating suspension enters the joint-coordinate equations only through `ü`, as an
/// effective gravity `g − ü`: the store's `∂²g/∂ü∂y` must equal `−∂G/∂g` taken by differences
/// of two models whose gravity differs (independent of the offset mechanism), and the `u`,
/// `u̇` channels must vanish (translation and Galilean invariance).
#[test]
fn second_derivative_in_the_suspension_acceleration_is_minus_the_gravity_derivative() {
    let n = 6;
    let text = chain_model::joint_chain_model_text(n, chain_model::Suspension::Sine);
    let mut sys = system(&text);
    let y = state(&mut sys);
    let t = 2.3;
    let (g, d_u, orders, _) = full(&mut sys, t, &y, false);
    let (g_exact, _, _, _) = full(&mut sys, t, &y, true);
    assert_eq!((orders, d_u.len()), (3, 6));
    let scale = max_abs(&g);
    for (i, axis) in ["x", "y"].iter().enumerate() {
        // Gravity component `axis` lowered by h: the same as the suspension accelerating by h
        // (G is linear in gravity; analytic G, so no difference noise in the reference).
        let h = 1.0;
        let shifted = if *axis == "x" {
            text.replace(
                "gravity = [0.0, -9.81, 0.0]",
                &format!("gravity = [{}, -9.81, 0.0]", -h),
            )
        } else {
            text.replace(
                "gravity = [0.0, -9.81, 0.0]",
                &format!("gravity = [0.0, {}, 0.0]", -9.81 - h),
            )
        };
        assert_ne!(shifted, text);
        let mut sys_h = system(&shifted);
        let (g_h, _, _, _) = full(&mut sys_h, t, &y, true);
        let reference = (g_h - &g_exact) / h;
        let d_udd = &d_u[i * orders + 2];
        let err = max_abs(&(d_udd - &reference));
        assert!(
            max_abs(&reference) > 1e-2,
            "the chain's Jacobian depends on gravity along {axis}"
        );
        assert!(
            err < 1e-3 * max_abs(&reference),
            "∂²g/∂ü_{axis}∂y off by {err:e} (reference {:e})",
            max_abs(&reference)
        );
        for k in 0..2 {
            let d = max_abs(&d_u[i * orders + k]);
            assert!(
                d < 1e-6 * scale,
                "channel {k} of {axis} should vanish: {d:e}"
            );
        }
    }
}

/// The judged quantity: over a short interval at a fixed state, the change of `G` that the
/// excitation term of (26) predicts against the change a full evaluation finds. Translating
/// suspension (linear in ü: the remainder is finite-difference noise) and tilting suspension
/// (u enters through gravity's direction, `g cos u`: second-order remainder).
#[test]
fn excitation_term_predicts_the_real_jacobian_change() {
    for (tilt, dt, tol) in [(false, 0.5, 1e-3), (true, 0.1, 5e-2)] {
        let mut sys = system(&chain_model::joint_chain_model_text(
            5,
            if tilt {
                chain_model::Suspension::Tilt
            } else {
                chain_model::Suspension::Sine
            },
        ));
        let y = state(&mut sys);
        let t1 = 1.9;
        let t2 = t1 + dt;
        // Second derivatives by the store's differences; the real change from analytic G.
        let (_, d_u, _, u1) = full(&mut sys, t1, &y, false);
        let (g1, _, _, _) = full(&mut sys, t1, &y, true);
        let (g2, _, _, u2) = full(&mut sys, t2, &y, true);
        let change = &g2 - &g1;
        let mut predicted = DMatrix::zeros(g1.nrows(), g1.ncols());
        for c in 0..d_u.len() {
            predicted += &d_u[c] * (u2[c] - u1[c]);
        }
        let size = max_abs(&change);
        let miss = max_abs(&(&change - &predicted));
        println!("tilt {tilt}: |ΔG| = {size:.3e}, |ΔG − prediction| = {miss:.3e}");
        assert!(
            size > 1e-4,
            "tilt {tilt}: the Jacobian moves with the excitation ({size:e})"
        );
        assert!(
            miss < tol * size,
            "tilt {tilt}: prediction misses the change by {miss:e} of {size:e}"
        );
        // The value-only term of the absolute formulation predicts nothing here.
        if !tilt {
            let value_only: f64 = (0..2)
                .map(|i| max_abs(&(&d_u[3 * i] * (u2[3 * i] - u1[3 * i]))))
                .sum();
            assert!(
                value_only < 1e-2 * size,
                "value-only prediction {value_only:e}"
            );
        }
    }
}
