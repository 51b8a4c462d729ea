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

/// Reference tip positions (scipy DOP853 at 1e-12 in minimal coordinates,
/// `tools/references/pendulum_chain.py`): rows (t, x_N, y_N for each N in the header).
fn reference(n: usize) -> Vec<(f64, f64, f64)> {
    let text = include_str!("data/pendulum_chain_tip.csv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let ix = header.iter().position(|h| *h == format!("x{n}")).expect("N in the reference");
    lines
        .map(|l| {
            let v: Vec<f64> = l.split(',').map(|s| s.trim().parse().unwrap()).collect();
            (v[0], v[ix], v[ix + 1])
        })
        .collect()
}

/// Integrate the chain to `t_end` (one `step` call per internal step, limit `t_end`) and return
/// the largest tip deviation from the reference at the grid times (dense output) and the BDF.
fn chain_run(n: usize, strategy: JacobianStrategy, rtol: f64, atol: f64, t_end: f64) -> (f64, Bdf) {
    let mut sys = CartesianChain::paper(n);
    let x0 = sys.consistent_state(0.0);
    let mut bdf = Bdf::new(settings(strategy, rtol, atol));
    bdf.initialize(&mut sys, &x0).unwrap();
    let refs = reference(n);
    let (mut q, mut v) = (vec![0.0; 2 * n], vec![0.0; 2 * n]);
    let mut dev = 0.0f64;
    let mut next = 1;
    while bdf.state().t < t_end {
        let t = bdf.step(&mut sys, t_end).unwrap();
        while next < refs.len() && refs[next].0 <= t {
            bdf.interpolate(refs[next].0, &mut q, &mut v);
            let (_, xr, yr) = refs[next];
            dev = dev.max((q[2 * n - 2] - xr).abs()).max((q[2 * n - 1] - yr).abs());
            next += 1;
        }
    }
    (dev, bdf)
}

#[test]
fn chain_tip_matches_reference_with_every_strategy() {
    for strategy in JacobianStrategy::ALL {
        let (dev, bdf) = chain_run(4, strategy, 1e-6, 1e-8, 30.0);
        let s = bdf.stats();
        println!("{:>18}: dev {dev:.2e}, steps {}, rej {}, fc {}, fcj {}, Je {}, upd {}, lu {}", strategy.name(), s.steps, s.rejected_steps, s.f_evals, s.f_evals_jacobian, s.jac_evals, s.jac_updates, s.lu);
        assert!(dev < 1e-3, "{}: tip deviation {dev}", strategy.name());
    }
}
