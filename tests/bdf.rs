//! BDF integrator tests against independent references (closed form, scipy in minimal
//! coordinates, finite differences).

use mbsfmu::integrate::bdf::Bdf;
use mbsfmu::integrate::test_systems::{CartesianChain, Oscillator};
use mbsfmu::integrate::{Integrator, JacobianStrategy, MechState, Settings};

fn settings(strategy: JacobianStrategy, rtol: f64, atol: f64) -> Settings {
    Settings { jacobian: strategy, rtol, atol, ..Settings::default() }
}

/// Global error at T of fixed-order, fixed-step BDF-k on the undamped oscillator, started from
/// the exact history.
fn oscillator_error(order: usize, h: f64, t_end: f64) -> f64 {
    let mut sys = Oscillator { m: 1.0, k: 1.0, c: 0.0 };
    let (x0, v0) = (1.0, 0.3);
    let mut s = settings(JacobianStrategy::Analytic, 1e-13, 1e-13);
    s.fixed_step = Some(h);
    let mut bdf = Bdf::new(s);
    bdf.fixed_order = Some(order);
    let past: Vec<MechState> = (0..=order)
        .map(|j| {
            let t = -(j as f64) * h;
            let (x, v) = sys.exact(x0, v0, t);
            MechState { t, q: vec![x], v: vec![v], lambda: vec![] }
        })
        .collect();
    bdf.initialize_with_history(&mut sys, h, order, &past).unwrap();
    while bdf.state().t < t_end {
        bdf.step(&mut sys, t_end).unwrap();
    }
    assert_eq!(bdf.state().t, t_end);
    let (x, v) = sys.exact(x0, v0, t_end);
    (bdf.state().q[0] - x).abs().max((bdf.state().v[0] - v).abs())
}

#[test]
fn convergence_orders_one_to_five() {
    let t_end = 3.2;
    for order in 1..=5 {
        let hs = [0.1, 0.05, 0.025, 0.0125];
        let errs: Vec<f64> = hs.iter().map(|&h| oscillator_error(order, h, t_end)).collect();
        let slopes: Vec<f64> = errs.windows(2).map(|e| (e[0] / e[1]).log2()).collect();
        let slope = (errs[0] / errs[3]).log2() / 3.0;
        println!("order {order}: errors {errs:?}, slopes {slopes:.3?}, mean {slope:.3}");
        assert!((slope - order as f64).abs() < 0.3, "order {order}: measured slope {slope}");
    }
}
