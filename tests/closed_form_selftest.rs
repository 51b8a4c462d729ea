//! Self-test of `tests/common/closed_form.rs`: numerical derivatives, energy balances, hand
//! arithmetic, a Newton-Euler cross-check, and agreement with the committed Python tables.

mod common;

use common::closed_form::{
    chain_angles, four_link, pendulum_chain, quarter_car, slider_crank, Motion, RefTable,
};
use mbsfmu::integrate::test_systems::{saddle_point_solve, CartesianChain};
use std::f64::consts::PI;

/// Composite Simpson of `f` over [a, b] with `n` (even) intervals.
fn simpson(f: impl Fn(f64) -> f64, a: f64, b: f64, n: usize) -> f64 {
    let h = (b - a) / n as f64;
    let mut s = f(a) + f(b);
    for i in 1..n {
        s += f(a + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0
}

#[test]
fn smooth_start_motion_is_consistent() {
    let m = Motion::SmoothStart {
        rate: 2.0 * PI,
        ramp: 1.0,
    };
    let h = 1e-6;
    // (not at the ramp end itself: the jerk jumps there, checked by continuity below)
    for &t in &[0.1, 0.5, 0.9, 0.999, 1.001, 1.5, 7.0] {
        let [a, v, acc] = m.eval(t);
        let [ap, vp, _] = m.eval(t + h);
        let [am, vm, _] = m.eval(t - h);
        assert!((v - (ap - am) / (2.0 * h)).abs() < 1e-8, "t={t}");
        assert!((acc - (vp - vm) / (2.0 * h)).abs() < 1e-6, "t={t}");
        assert!(a.is_finite());
    }
    let (l, r) = (m.eval(1.0 - 1e-13), m.eval(1.0 + 1e-13));
    for k in 0..3 {
        assert!(
            (l[k] - r[k]).abs() < 1e-11,
            "jump in derivative {k} at the ramp end"
        );
    }
    assert_eq!(m.eval(0.0), [0.0, 0.0, 0.0]);
    assert_eq!(m.eval(3.0)[1], 2.0 * PI);
}

#[test]
fn slider_crank_derivatives_match_finite_differences() {
    let p = slider_crank::Params::default();
    let m = Motion::SmoothStart {
        rate: 2.0 * PI,
        ramp: 1.0,
    };
    let h = 1e-5;
    for i in 0..40 {
        let t = 0.053 + 0.05 * i as f64; // off the ramp end, where the jerk jumps
        let k = |t: f64| {
            let [a, v, acc] = m.eval(t);
            slider_crank::kinematics(&p, a, v, acc)
        };
        let (c, plus, minus) = (k(t), k(t + h), k(t - h));
        assert!(
            (c.dx - (plus.x - minus.x) / (2.0 * h)).abs() < 1e-8,
            "t={t}"
        );
        assert!(
            (c.dbeta - (plus.beta - minus.beta) / (2.0 * h)).abs() < 1e-8,
            "t={t}"
        );
        assert!(
            (c.ddx - (plus.dx - minus.dx) / (2.0 * h)).abs() < 1e-6,
            "t={t}"
        );
        assert!(
            (c.ddbeta - (plus.dbeta - minus.dbeta) / (2.0 * h)).abs() < 1e-6,
            "t={t}"
        );
        // loop closure: slider at rod length from the crank tip
        let [th, _, _] = m.eval(t);
        let (ax, ay) = (0.1 * th.cos(), 0.1 * th.sin());
        assert!(((c.x - ax).hypot(ay) - 0.3).abs() < 1e-15);
    }
}

#[test]
fn slider_crank_torque_work_equals_energy_change() {
    // Frictionless: int tau w dt = dE. With friction the losses int -F v dt are added.
    for mu in [0.0, 0.4] {
        let p = slider_crank::Params {
            mu,
            ..Default::default()
        };
        let m = Motion::SmoothStart {
            rate: 2.0 * PI,
            ramp: 1.0,
        };
        let (t0, t1) = (0.0, 1.7);
        let work = simpson(
            |t| {
                let [a, v, acc] = m.eval(t);
                slider_crank::inverse_dynamics(&p, a, v, acc).torque * v
            },
            t0,
            t1,
            200_000,
        );
        let loss = simpson(
            |t| {
                let [a, v, acc] = m.eval(t);
                let d = slider_crank::inverse_dynamics(&p, a, v, acc);
                -d.friction * d.kin.dx
            },
            t0,
            t1,
            200_000,
        );
        let e = |t: f64| {
            let [a, v, _] = m.eval(t);
            slider_crank::energy(&p, a, v)
        };
        let de = e(t1) - e(t0);
        assert!(de.abs() > 0.1);
        assert!(
            (work - loss - de).abs() < 1e-8,
            "mu={mu}: work {work} loss {loss} dE {de}"
        );
        if mu > 0.0 {
            assert!(loss > 0.1, "friction dissipates: {loss}");
        }
    }
}

/// Newton-Euler on every body for the frictionless slider-crank (independent of virtual work).
#[test]
fn slider_crank_torque_matches_newton_euler() {
    let p = slider_crank::Params::default();
    let cross = |u: [f64; 2], v: [f64; 2]| u[0] * v[1] - u[1] * v[0];
    for i in 0..25 {
        let th = -3.0 + 0.27 * i as f64;
        let (dth, ddth) = (5.0 - 0.4 * i as f64, 11.0 - 0.9 * i as f64);
        let d = slider_crank::inverse_dynamics(&p, th, dth, ddth);
        let k = d.kin;
        let (s, c) = th.sin_cos();
        let pa = [0.1 * c, 0.1 * s];
        let acc_a = [
            0.1 * (-ddth * s - dth * dth * c),
            0.1 * (ddth * c - dth * dth * s),
        ];
        let acc_g2 = [0.5 * (acc_a[0] + k.ddx), 0.5 * acc_a[1]];
        // force of the slider on the rod, then of the crank on the rod
        let fb = [-2.0 * k.ddx, d.normal - 2.0 * 9.81];
        let fa = [
            0.5 * acc_g2[0] - fb[0],
            0.5 * acc_g2[1] - fb[1] + 0.5 * 9.81,
        ];
        // rod moment about its centre
        let g2 = [0.5 * (pa[0] + k.x), 0.5 * pa[1]];
        let rod = 4e-3 * k.ddbeta
            - cross([pa[0] - g2[0], pa[1] - g2[1]], fa)
            - cross([k.x - g2[0], -g2[1]], fb);
        assert!(rod.abs() < 1e-12, "rod moment residual {rod}");
        // crank about the origin
        let g1 = [0.5 * pa[0], 0.5 * pa[1]];
        let acc_g1 = [0.5 * acc_a[0], 0.5 * acc_a[1]];
        let tau = 1e-4 * ddth + cross(g1, [0.12 * acc_g1[0], 0.12 * acc_g1[1]])
            - cross(g1, [0.0, -0.12 * 9.81])
            + cross(pa, fa);
        assert!(
            (tau - d.torque).abs() < 1e-12,
            "theta {th}: {tau} vs {}",
            d.torque
        );
        for j in 0..2 {
            assert!((d.slider_on_rod[j] - fb[j]).abs() < 1e-12);
            assert!((d.crank_on_rod[j] - fa[j]).abs() < 1e-12);
        }
        // crank force balance: ground + rod's reaction + weight = m1 a_G1
        let fo = d.ground_on_crank;
        assert!((fo[0] - fa[0] - 0.12 * acc_g1[0]).abs() < 1e-12);
        assert!((fo[1] - fa[1] - 0.12 * 9.81 - 0.12 * acc_g1[1]).abs() < 1e-12);
    }
}

#[test]
fn four_link_loop_closes_and_derivatives_match() {
    let p = four_link::Params::default();
    let h = 1e-5;
    for i in 0..72 {
        let th = i as f64 * 2.0 * PI / 72.0;
        let (beta, psi) = four_link::positions(&p, th);
        let r1 = [
            2.0 * th.cos() + 12.2 * beta.cos(),
            2.0 * th.sin() + 12.2 * beta.sin(),
        ];
        let r2 = [10.0 + 7.4 * psi.cos(), 7.4 * psi.sin()];
        assert!((r1[0] - r2[0]).abs() < 1e-12 && (r1[1] - r2[1]).abs() < 1e-12);
        assert!(r2[1] > 0.0, "rocker end above the x axis");
        let k = four_link::kinematics(&p, th, 1.3, 0.7);
        let q = |a: f64| four_link::positions(&p, a);
        let (bp, pp) = q(th + h);
        let (bm, pm) = q(th - h);
        assert!((k.dbeta - 1.3 * (bp - bm) / (2.0 * h)).abs() < 1e-8);
        assert!((k.dpsi - 1.3 * (pp - pm) / (2.0 * h)).abs() < 1e-8);
        // second derivative along the motion: d/dt of the rates
        let kp = four_link::kinematics(&p, th + 1.3 * h, 1.3 + 0.7 * h, 0.7);
        let km = four_link::kinematics(&p, th - 1.3 * h, 1.3 - 0.7 * h, 0.7);
        assert!((k.ddpsi - (kp.dpsi - km.dpsi) / (2.0 * h)).abs() < 1e-6);
        assert!((k.ddbeta - (kp.dbeta - km.dbeta) / (2.0 * h)).abs() < 1e-6);
    }
}

#[test]
fn four_link_torque_work_equals_energy_change() {
    let p = four_link::Params::default();
    let m = Motion::SmoothStart {
        rate: PI,
        ramp: 1.0,
    };
    let (t0, t1) = (0.0, 2.6);
    let work = simpson(
        |t| {
            let [a, v, acc] = m.eval(t);
            four_link::rotor_torque(&p, a, v, acc) * v
        },
        t0,
        t1,
        200_000,
    );
    let e = |t: f64| {
        let [a, v, _] = m.eval(t);
        four_link::energy(&p, a, v)
    };
    let de = e(t1) - e(t0);
    assert!(de.abs() > 100.0);
    assert!(
        (work - de).abs() < 1e-9 * de.abs().max(1e4),
        "work {work} dE {de}"
    );
}

#[test]
fn quarter_car_equilibrium_by_hand() {
    let eq = quarter_car::equilibrium(&quarter_car::Params::default(), 0.0);
    // tire carries 340 kg, suspension 300 kg, actuator 350 kg
    assert!((eq.tire_force - 3335.4).abs() < 1e-9);
    assert!((eq.susp_force - 2943.0).abs() < 1e-9);
    assert!((eq.stamp_force - 3433.5).abs() < 1e-9);
    assert!((eq.wheel_z - 0.283323).abs() < 1e-12);
    assert!((eq.chassis_z - 0.636173).abs() < 1e-12);
    let up = quarter_car::equilibrium(&quarter_car::Params::default(), 0.05);
    assert!((up.chassis_z - eq.chassis_z - 0.05).abs() < 1e-15);
}

#[test]
fn chain_angles_of_a_straight_tilted_chain() {
    let pts: Vec<[f64; 2]> = (0..5)
        .map(|k| [2.0 + k as f64 * 0.3f64.sin(), -(k as f64) * 0.3f64.cos()])
        .collect();
    for a in chain_angles(&pts) {
        assert!((a - 0.3).abs() < 1e-15);
    }
}

/// The Rust formulas agree with the committed Python tables (two implementations).
#[test]
fn agrees_with_committed_tables() {
    for (file, mu, motion) in [
        ("slider_crank.csv", 0.0, Motion::Constant { rate: 2.0 * PI }),
        (
            "slider_crank_mu04.csv",
            0.4,
            Motion::Constant { rate: 2.0 * PI },
        ),
        (
            "slider_crank_smooth.csv",
            0.0,
            Motion::SmoothStart {
                rate: 2.0 * PI,
                ramp: 1.0,
            },
        ),
    ] {
        let tab = RefTable::load(file).unwrap();
        let p = slider_crank::Params {
            mu,
            ..Default::default()
        };
        let (ix, itau, inn) = (
            tab.column_index("slider_x").unwrap(),
            tab.column_index("crank_torque").unwrap(),
            tab.column_index("normal_force").unwrap(),
        );
        for i in 0..tab.len() {
            let t = tab.times()[i];
            let [a, v, acc] = motion.eval(t);
            let d = slider_crank::inverse_dynamics(&p, a, v, acc);
            assert!((d.kin.x - tab.data[ix][i]).abs() < 1e-12, "{file} t={t}");
            assert!((d.torque - tab.data[itau][i]).abs() < 1e-10, "{file} t={t}");
            assert!((d.normal - tab.data[inn][i]).abs() < 1e-10, "{file} t={t}");
            let fo = tab.data[tab.column_index("ground_on_crank_y").unwrap()][i];
            assert!((d.ground_on_crank[1] - fo).abs() < 1e-10, "{file} t={t}");
        }
    }
    for (file, motion) in [
        ("four_link.csv", Motion::Constant { rate: PI }),
        (
            "four_link_smooth.csv",
            Motion::SmoothStart {
                rate: PI,
                ramp: 1.0,
            },
        ),
    ] {
        let tab = RefTable::load(file).unwrap();
        let p = four_link::Params::default();
        let (ipsi, itau) = (
            tab.column_index("rocker_angle").unwrap(),
            tab.column_index("rotor_torque").unwrap(),
        );
        for i in 0..tab.len() {
            let t = tab.times()[i];
            let [a, v, acc] = motion.eval(t);
            let k = four_link::kinematics(&p, a, v, acc);
            assert!((k.psi - tab.data[ipsi][i]).abs() < 1e-12, "{file} t={t}");
            let tau = four_link::rotor_torque(&p, a, v, acc);
            assert!(
                (tau - tab.data[itau][i]).abs() < 1e-9 * (1.0 + tau.abs()),
                "{file} t={t}"
            );
        }
    }
    let tab = RefTable::load("quarter_car.csv").unwrap();
    let eq = quarter_car::equilibrium(&quarter_car::Params::default(), 0.0);
    assert!((tab.at("chassis_z", 0.0).unwrap() - eq.chassis_z).abs() < 1e-12);
    assert!((tab.at("stamp_force", 0.0).unwrap() - eq.stamp_force).abs() < 1e-9);
}

#[test]
fn interpolation_orders() {
    // Sampled closed form at 0.01 s: cubic interpolation between samples is ~1e-4 dt^4-accurate
    // on the slider position, linear only ~dt^2.
    let tab = RefTable::load("slider_crank.csv").unwrap();
    let p = slider_crank::Params::default();
    let ix = tab.column_index("slider_x").unwrap();
    let (mut e_lin, mut e_cub) = (0.0f64, 0.0f64);
    for i in 0..700 {
        let t = 0.0137 + i as f64 * 0.0113;
        let x = slider_crank::kinematics(&p, 2.0 * PI * t, 2.0 * PI, 0.0).x;
        e_lin = e_lin.max((tab.linear(ix, t) - x).abs());
        e_cub = e_cub.max((tab.cubic(ix, t) - x).abs());
    }
    assert!(e_lin < 1e-3 && e_lin > 1e-6, "linear {e_lin}");
    assert!(e_cub < 1e-6, "cubic {e_cub}");
    let ts: Vec<f64> = (0..500).map(|i| 0.0031 + i as f64 * 0.0157).collect();
    let xs: Vec<f64> = ts
        .iter()
        .map(|&t| slider_crank::kinematics(&p, 2.0 * PI * t, 2.0 * PI, 0.0).x + 1e-3 * t)
        .collect();
    let err = tab.max_abs_error("slider_x", &ts, &xs).unwrap();
    // the planted 1e-3 t drift is found (largest at the last sample inside 8 s)
    assert!(
        (err - 1e-3 * ts.iter().copied().filter(|&t| t <= 8.0).fold(0.0, f64::max)).abs() < 1e-6
    );
    // exact at the samples, clamped outside
    assert_eq!(tab.cubic(ix, tab.times()[5]), tab.data[ix][5]);
    assert_eq!(tab.linear(ix, -1.0), tab.data[ix][0]);
}

#[test]
fn reader_reports_bad_tables() {
    let bad = [
        "t,x\n0,1\n0.1,2,3\n",
        "t,x\n0,1\n0.1,abc\n",
        "x,t\n0,1\n1,2\n",
        "t,x\n0,1\n0,2\n",
        "t,x\n0,1\n0.1\n",
    ];
    for text in bad {
        assert!(
            RefTable::parse(std::path::Path::new("bad.csv"), text).is_err(),
            "{text:?}"
        );
    }
    let tab = RefTable::parse(std::path::Path::new("ok.csv"), "# c\nt,x\n0,1\n1,3\n").unwrap();
    assert_eq!(tab.comments, vec!["c".to_string()]);
    assert!(tab.column("y").is_err());
    assert_eq!(tab.linear(1, 0.5), 2.0);
}

#[test]
fn every_reference_table_loads() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "csv") {
            let tab = RefTable::from_file(&path).unwrap();
            assert!(
                tab.comments[0].starts_with("generated by: tools/references/"),
                "{path:?}"
            );
            n += 1;
        }
    }
    assert!(n >= 15);
}

/// The minimal-coordinate chain and the Cartesian test system (`CartesianChain`, saddle-point
/// accelerations) describe the same mechanics: equal particle accelerations at random states,
/// and `consistent_state` is the reference tables' "projected" start.
#[test]
fn minimal_chain_agrees_with_cartesian_test_system() {
    let n = 7;
    let p = pendulum_chain::Params::paper(n);
    let mut cart = CartesianChain::paper(n);
    for (i, &t) in [0.0, 2.5, 9.1, 31.0].iter().enumerate() {
        let phi: Vec<f64> = (0..n)
            .map(|k| 0.6 * ((k * 7 + i * 3) as f64).sin())
            .collect();
        let dphi: Vec<f64> = (0..n)
            .map(|k| 0.9 * ((k * 5 + i) as f64 + 0.3).cos())
            .collect();
        let ddphi = pendulum_chain::accelerations(&p, t, &phi, &dphi);
        let (r, v, a) = pendulum_chain::cartesian(&p, t, &phi, &dphi, &ddphi);
        let q: Vec<f64> = r.iter().flatten().copied().collect();
        let vq: Vec<f64> = v.iter().flatten().copied().collect();
        let (acc, _) = saddle_point_solve(&mut cart, t, &q, &vq);
        for k in 0..n {
            for c in 0..2 {
                let diff = (acc[2 * k + c] - a[k][c]).abs();
                assert!(diff < 1e-9, "t={t} particle {k} axis {c}: {diff:e}");
            }
        }
    }
    // projected start of the references = CartesianChain's consistent state
    let state = CartesianChain::paper(n).consistent_state(0.0);
    let w = 2.0 * PI * 0.05;
    for k in 0..n {
        assert!(state.v[2 * k].abs() < 1e-14);
        assert!((state.v[2 * k + 1] - 0.2 * w).abs() < 1e-14);
    }
}

/// The committed N = 4 table's first samples from a tiny RK4 integration of the Rust
/// minimal-coordinate equations (a second implementation of the Python script's equations).
#[test]
fn minimal_chain_reproduces_committed_table() {
    let tab = RefTable::load("pendulum_chain_n4_projected.csv").unwrap();
    let p = pendulum_chain::Params::paper(4);
    let w = 2.0 * PI * 0.05;
    let mut y = vec![0.0; 8];
    y[4] = -0.3 * w; // projected start: phi'_1 = -s'_x(0) / l
    let f = |t: f64, y: &[f64]| -> Vec<f64> {
        let a = pendulum_chain::accelerations(&p, t, &y[..4], &y[4..]);
        y[4..].iter().copied().chain(a).collect()
    };
    let h = 1e-3;
    let mut t = 0.0;
    for step in 1..=5000 {
        let k1 = f(t, &y);
        let y2: Vec<f64> = y.iter().zip(&k1).map(|(a, b)| a + 0.5 * h * b).collect();
        let k2 = f(t + 0.5 * h, &y2);
        let y3: Vec<f64> = y.iter().zip(&k2).map(|(a, b)| a + 0.5 * h * b).collect();
        let k3 = f(t + 0.5 * h, &y3);
        let y4: Vec<f64> = y.iter().zip(&k3).map(|(a, b)| a + h * b).collect();
        let k4 = f(t + h, &y4);
        for i in 0..8 {
            y[i] += h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
        }
        t = step as f64 * h;
        if step % 100 == 0 {
            for (k, yk) in y.iter().take(4).enumerate() {
                let r = tab.at(&format!("phi_{}", k + 1), t).unwrap();
                assert!((yk - r).abs() < 1e-9, "t={t} phi_{}: {yk} vs {r}", k + 1);
            }
        }
    }
}
