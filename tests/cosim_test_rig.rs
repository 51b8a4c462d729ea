//! The test-rig case through the co-simulation layer: the quarter-car rig's stamp follows
//! `0.01 sin(2π·1.5 t)`, given at every communication point as value and slope (what an FMI 2
//! importer with input derivatives sends). Every slope change is a kink in the driven
//! coordinate, so the driven velocity jumps at communication points: the multistep BDF is
//! restarted from the projected state there, one-step methods project on their own. Compared
//! with the exact linear solution (tests/data/quarter_car.csv, independent of the engine).

mod common;
use common::closed_form::RefTable;
use mbsfmu::cosim::{Advance, SetPhase, Simulation};
use mbsfmu::description::VariableTable;
use mbsfmu::mbs::system::System;
use std::f64::consts::PI;
use std::path::Path;
use std::sync::Arc;

/// Max errors of chassis and wheel height, and the statistics. `order`: the highest input
/// derivative sent per communication step (1: value and slope; 2: also the second derivative,
/// so the driven acceleration jumps at every communication point).
fn run_with(
    method: &str,
    h: f64,
    t_end: f64,
    order: usize,
    formulation: &str,
) -> (f64, f64, mbsfmu::integrate::Stats) {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/quarter_car_rig.toml");
    let text = std::fs::read_to_string(&f).unwrap().replacen(
        "[model]\n",
        &format!("[model]\nformulation = \"{formulation}\"\n"),
        1,
    );
    let spec = Arc::new(mbsfmu::mbs::load_model_str(&text, &f).unwrap());
    let table = Arc::new(VariableTable::from_spec(&spec));
    let mut sim = Simulation::new(
        spec.clone(),
        table.clone(),
        System::new(spec.clone()).unwrap(),
    );
    let vr = |n: &str| table.by_name(n).unwrap().value_reference;
    let item = mbsfmu::integrate::Method::from_name(method).unwrap();
    let value = mbsfmu::integrate::Method::ALL
        .iter()
        .position(|m| *m == item)
        .unwrap() as i64
        + 1;
    sim.set_integer(vr("solver.integrator"), value, SetPhase::Setup)
        .unwrap();
    sim.setup_experiment(Some(1e-6), 0.0, None).unwrap();
    sim.initialize().unwrap();
    let w = 2.0 * PI * 1.5;
    let u = |t: f64| {
        (
            0.01 * (w * t).sin(),
            0.01 * w * (w * t).cos(),
            -0.01 * w * w * (w * t).sin(),
        )
    };
    let reference = RefTable::load("quarter_car.csv").unwrap();
    let outputs: Vec<usize> = ["chassis_z", "wheel_z"]
        .iter()
        .map(|n| spec.outputs.iter().position(|o| o.name == *n).unwrap())
        .collect();
    let (mut err_c, mut err_w) = (0.0f64, 0.0f64);
    let n = (t_end / h).round() as usize;
    for k in 0..n {
        let t = k as f64 * h;
        let (v, s, a) = u(t);
        sim.set_real(vr("stamp_z"), v, SetPhase::Stepping).unwrap();
        sim.set_input_derivative(vr("stamp_z"), 1, s).unwrap();
        if order >= 2 {
            sim.set_input_derivative(vr("stamp_z"), 2, a).unwrap();
        }
        let r = sim.advance_to((k + 1) as f64 * h, None).unwrap();
        assert_eq!(r, Advance::Completed, "{method} at t = {t}");
        let tc = (k + 1) as f64 * h;
        if (tc * 100.0 - (tc * 100.0).round()).abs() < 1e-9 {
            let o = sim.outputs().unwrap().to_vec();
            err_c = err_c.max((o[outputs[0]] - reference.at("chassis_z", tc).unwrap()).abs());
            err_w = err_w.max((o[outputs[1]] - reference.at("wheel_z", tc).unwrap()).abs());
        }
    }
    (err_c, err_w, sim.stats())
}

fn run(method: &str, h: f64, t_end: f64) -> (f64, f64) {
    let (ec, ew, _) = run_with(method, h, t_end, 1, "joint");
    (ec, ew)
}

#[test]
fn stamp_excitation_through_cosim_matches_the_exact_solution() {
    for method in ["bdf", "rosenbrock_nystrom", "sdirk"] {
        let (ec, ew) = run(method, 0.002, 2.0);
        eprintln!(
            "{method}: max |Δchassis_z| {ec:.2e} m, max |Δwheel_z| {ew:.2e} m (amplitude 1e-2 m)"
        );
        // Piecewise-linear input (value + slope per 2 ms step) against the exact sine: the
        // input error itself is ~ (ω h)²/8 · 1e-2 ≈ 2e-7 m.
        assert!(ec < 2e-5 && ew < 2e-5, "{method}: {ec} {ew}");
    }
}

/// With the second derivative sent too, the driven acceleration `u''` (and with it the
/// right-hand side) jumps at every communication point while the state does not. The one-step
/// methods that carry `f(t_n, y_n)` from the end of one step into the next (local
/// linearization, SDIRK, Rosenbrock–Nyström) must evaluate it again (`Integrator::rhs_changed`):
/// a stale value made every column of the local linearization's Jacobian look like a force kink
/// (one-sided differences off by the jump / 6e-6) and its step fail, and SDIRK's error estimate
/// reject steps.
#[test]
fn second_derivative_inputs_refresh_the_carried_right_hand_side() {
    // Evaluation bounds about 1.4x the measured counts (1 s at 2 ms communication steps); with
    // the stale value: local linearization Discard at the first communication point, SDIRK
    // 25 200 evaluations (2 099 steps); Rosenbrock–Nyström hardly notices (11 800 evaluations,
    // 9.8e-9 m instead of 4.5e-9 m: its stages re-evaluate f), so its row is a plain check.
    //
    // Local linearization runs in absolute coordinates here: in joint coordinates (the
    // default) it takes about 100 steps per communication step on this model with or without
    // the second derivative (63 526 steps, 489 310 evaluations over 1 s at the same error;
    // 505 steps in absolute coordinates), an open problem (docs/integrators.md, end of "Local
    // linearization on driven mechanisms").
    for (method, bound, max_evals, formulation) in [
        ("local_linearization", 2e-5, 75_000, "absolute"),
        ("sdirk", 2e-5, 6_000, "absolute"),
        ("rosenbrock_nystrom", 2e-5, 17_500, "absolute"),
        // Joint: 1179 steps, 6486 evaluations measured (absolute 864, 4834).
        ("sdirk", 2e-5, 9_000, "joint"),
        ("rosenbrock_nystrom", 2e-5, 17_500, "joint"),
    ] {
        let (ec, ew, st) = run_with(method, 0.002, 1.0, 2, formulation);
        eprintln!(
            "{method} ({formulation}), value/slope/curvature every 2 ms: max |Δchassis_z| \
             {ec:.2e} m, max |Δwheel_z| {ew:.2e} m, {} steps, {} evaluations",
            st.steps, st.f_evals
        );
        assert!(ec < bound && ew < bound, "{method}: {ec} {ew}");
        assert!(
            st.f_evals < max_evals,
            "{method}: {} evaluations",
            st.f_evals
        );
    }
}

/// The same kinks for the BDF: a history that spans a jump of `u''` extrapolates the old
/// dynamics, so the method re-anchors it at each communication point to the new right-hand
/// side's `a`, `ȧ`, `ä` (`Integrator::inputs_changed`, src/integrate/reanchor.rs) instead of
/// restarting. Checked against the exact solution; one restart at the start (the rig starts
/// at rest, the first segment with the sine's slope), none at the kinks; measured 639 steps,
/// 0 rejected, 1 Jacobian, errors 4.0e-8 and 1.7e-8 m (session 10: 676, 5, 1 with the
/// six-evaluation re-anchoring before order 5's `a⁗` was zeroed; 663, 3, 1 before; 543, 0
/// and 13 before `a⃛` was re-anchored too: errors about 2e-8 m), bounded at 10 rejections.
#[test]
fn bdf_reanchors_its_history_at_second_derivative_kinks() {
    // Joint coordinates (the default) measured 526 steps, 0 rejected, 1 Jacobian, no restart,
    // errors 2.1e-8 and 1.4e-8 m.
    for formulation in ["absolute", "joint"] {
        let (ec, ew, st) = run_with("bdf", 0.002, 1.0, 2, formulation);
        eprintln!(
            "bdf ({formulation}), value/slope/curvature every 2 ms: max |Δchassis_z| {ec:.2e} m, \
             max |Δwheel_z| {ew:.2e} m, {} steps, {} rejected, {} Jacobians, {} restarts",
            st.steps, st.rejected_steps, st.jac_evals, st.restarts
        );
        assert!(ec < 2e-5 && ew < 2e-5, "bdf {formulation}: {ec} {ew}");
        assert!(st.restarts <= 1, "{formulation}: {} restarts", st.restarts);
        assert!(
            st.rejected_steps <= 10,
            "{formulation}: {} rejected steps",
            st.rejected_steps
        );
    }
}

/// Issue 12: the rig's slider-crank, the crank angle `2πt` sampled at 1 ms and set as a plain
/// value (no derivatives; default smooth reconstruction), run by the local linearization
/// through `advance_to`. The reconstruction starts the crank from rest: it reaches 2π rad/s
/// within the second interval (θ̈ ≈ 6e4 rad/s²), and the mechanism, fully driven, follows
/// kinematically. The unprojected error estimate held that motion's curvature and the
/// error-per-unit-step test stalled at 4e-8 s steps just after t = 1 ms (the work budget ran
/// out in the step to 2 ms); the projected one is about zero there (no degree of freedom is
/// left). From t = 5 ms on the reconstruction is the exact ramp, so slider position and crank
/// torque are checked against the closed form (`closed_form::slider_crank`, θ = 2πt,
/// θ̇ = 2π, θ̈ = 0). Measured over 0.3 s: 305 steps, 2.4e-11 m and 2.0e-10 N·m.
#[test]
fn local_linearization_runs_the_sampled_slider_crank() {
    use common::closed_form::slider_crank;
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/slider_crank.toml");
    let spec = Arc::new(mbsfmu::mbs::load_model(&f).unwrap());
    let (mut sim, table) =
        common::cosim::simulation(&spec, mbsfmu::integrate::Method::LocalLinearization);
    let vr = |n: &str| table.by_name(n).unwrap().value_reference;
    sim.setup_experiment(Some(1e-5), 0.0, None).unwrap();
    sim.initialize().unwrap();
    let out = |n: &str| spec.outputs.iter().position(|o| o.name == n).unwrap();
    let (ix, itq) = (out("slider_x"), out("crank_torque"));
    let p = slider_crank::Params::default();
    let w = 2.0 * PI;
    let (h, n) = (1e-3, 300);
    let (mut err_x, mut err_tq) = (0.0f64, 0.0f64);
    for k in 0..n {
        let t = k as f64 * h;
        sim.set_real(vr("crank_angle"), w * t, SetPhase::Stepping)
            .unwrap();
        let r = sim.advance_to((k + 1) as f64 * h, None);
        assert!(
            matches!(r, Ok(Advance::Completed)),
            "local linearization at t = {t}: {r:?}"
        );
        let tc = (k + 1) as f64 * h;
        // The reconstruction's start-up (its own, any integrator's) ends at 3 ms (4 ms before
        // the smooth mode trusted a trend from three samples): before that the driven motion
        // is not yet the ramp (the torque follows the start-up's θ̈).
        if tc >= 5e-3 - 1e-12 {
            let o = sim.outputs().unwrap().to_vec();
            let th = w * tc;
            let k = slider_crank::kinematics(&p, th, w, 0.0);
            let d = slider_crank::inverse_dynamics(&p, th, w, 0.0);
            err_x = err_x.max((o[ix] - k.x).abs());
            err_tq = err_tq.max((o[itq] - d.torque).abs());
        }
    }
    let st = sim.stats();
    eprintln!(
        "local_linearization, slider-crank sampled at 1 ms: max |Δslider_x| {err_x:.1e} m, \
         max |Δcrank_torque| {err_tq:.1e} N·m, {} steps, {} rejected, {} Jacobians",
        st.steps, st.rejected_steps, st.jac_evals
    );
    assert!(err_x < 1e-8 && err_tq < 1e-6, "{err_x} {err_tq}");
    assert!(st.steps < 2 * n as u64, "{} steps", st.steps);
}

/// The pendulum chain (models/pendulum_chain.toml) with its suspension sampled at H = 0.1 s
/// (`x = 2 + 0.01 sin 2πt`, `y = 0.01 sin 2πt`), and the same run with one step of ε in the
/// grid at t = 3 s (a master meeting another FMU's event): the tip agrees with the uniform
/// grid's to the reconstruction's own error. Before, the trend's lag closed within the short
/// step and the tip moved 2.9 m within 0.1 s at ε = 1e-5 (status OK); at ε = 1e-4, 3 cm.
#[test]
fn one_short_communication_step_leaves_the_chain_on_course() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/pendulum_chain.toml");
    let spec = Arc::new(mbsfmu::mbs::load_model(&f).unwrap());
    let table = Arc::new(VariableTable::from_spec(&spec));
    let vr = |n: &str| table.by_name(n).unwrap().value_reference;
    let tip: Vec<usize> = ["tip_x", "tip_y"]
        .iter()
        .map(|n| spec.outputs.iter().position(|o| o.name == *n).unwrap())
        .collect();
    let w = 2.0 * PI;
    // Tip (x, y) after each communication step that ends at 3.1 s and 4.0 s.
    let run = |grid: &[f64]| {
        let mut sim = Simulation::new(
            spec.clone(),
            table.clone(),
            System::new(spec.clone()).unwrap(),
        );
        sim.setup_experiment(Some(1e-6), 0.0, None).unwrap();
        sim.initialize().unwrap();
        let (mut t, mut out) = (0.0, Vec::new());
        for &h in grid {
            let s = 0.01 * (w * t).sin();
            sim.set_real(vr("susp_x"), 2.0 + s, SetPhase::Stepping)
                .unwrap();
            sim.set_real(vr("susp_y"), s, SetPhase::Stepping).unwrap();
            let r = sim.advance_to(t + h, None).unwrap();
            assert_eq!(r, Advance::Completed, "step to {}", t + h);
            t += h;
            if (t - 3.1).abs() < 1e-9 || (t - 4.0).abs() < 1e-9 {
                let o = sim.outputs().unwrap();
                out.push((o[tip[0]], o[tip[1]]));
            }
        }
        out
    };
    let uniform = run(&[0.1; 40]);
    for eps in [1e-4, 1e-5, 1e-7] {
        let mut grid = vec![0.1; 30];
        grid.extend([eps, 0.1 - eps]);
        grid.extend([0.1; 9]);
        let short = run(&grid);
        for (k, (a, b)) in short.iter().zip(&uniform).enumerate() {
            let d = (a.0 - b.0).hypot(a.1 - b.1);
            // Measured: 7.4e-4 m at t = 3.1 s for every ε (the reconstruction differs on the
            // two grids by the trend's extrapolation error over 0.1 s).
            assert!(
                d < 3e-3,
                "ε = {eps}, point {k}: tip {a:?} against {b:?} ({d} m)"
            );
        }
    }
}

/// A step of a driven angle sampled at H = 0.1 ms with the default `smooth` reconstruction
/// (the gallery's default settings, BDF): every step completes, and once the step has settled
/// the mechanism sits where the closed-form position analysis puts it at the new angle.
/// Before the fix the BDF returned Discard ("iteration matrix αP + ∂g/∂y singular") in the
/// communication step after the jump, for four_link's rotor stepping by 0.2–0.5 rad and the
/// slider-crank's crank by 0.3–0.5 rad, and retrying with smaller steps failed the same way.
#[test]
fn a_stepped_driven_angle_at_a_tenth_of_a_millisecond_completes() {
    use common::closed_form::{four_link, slider_crank};
    let (h, t_jump, t_end): (f64, f64, f64) = (1e-4, 5e-3, 2e-2);
    for (model, input, output, amplitude) in [
        ("four_link", "rotor_angle", "rocker_angle", 0.2),
        ("four_link", "rotor_angle", "rocker_angle", 0.5),
        ("slider_crank", "crank_angle", "slider_x", 0.3),
        ("slider_crank", "crank_angle", "slider_x", 0.5),
    ] {
        let f = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("models/{model}.toml"));
        let spec = Arc::new(mbsfmu::mbs::load_model(&f).unwrap());
        let (mut sim, table) = common::cosim::simulation(&spec, mbsfmu::integrate::Method::Bdf);
        let vr = |n: &str| table.by_name(n).unwrap().value_reference;
        sim.setup_experiment(None, 0.0, None).unwrap();
        sim.initialize().unwrap();
        let iy = spec.outputs.iter().position(|o| o.name == output).unwrap();
        let expected = if model == "four_link" {
            four_link::kinematics(&four_link::Params::default(), amplitude, 0.0, 0.0).psi
        } else {
            slider_crank::kinematics(&slider_crank::Params::default(), amplitude, 0.0, 0.0).x
        };
        let n = (t_end / h).round() as usize;
        let mut err = 0.0f64;
        for k in 0..n {
            let t = k as f64 * h;
            let u = if t >= t_jump - 1e-12 { amplitude } else { 0.0 };
            sim.set_real(vr(input), u, SetPhase::Stepping).unwrap();
            let r = sim.advance_to((k + 1) as f64 * h, None);
            assert!(
                matches!(r, Ok(Advance::Completed)),
                "{model}, {input} stepped 0 → {amplitude} at t = {t_jump}, H = {h}: \
                 step from t = {t}: {r:?}"
            );
            // The smooth mode closes a step's gap with time constant H/2: settled after 20 H.
            if t >= t_jump + 20.0 * h {
                err = err.max((sim.outputs().unwrap()[iy] - expected).abs());
            }
        }
        eprintln!("{model}, {input} 0 → {amplitude}: max |Δ{output}| after settling {err:.1e}");
        assert!(err < 1e-6, "{model}: {output} off by {err}");
    }
}

/// The quarter car (models/quarter_car_rig.toml) with its stamp following `0.01 sin 3πt`,
/// sampled at 0.01 s, then at steps that shrink to 1e-7 s (or grow from it) and back to
/// 0.01 s: a master homing in on another FMU's event. The stamp force, which carries the
/// driven stamp's inertia (10 kg × ü), stays with the run that is given the signal's exact
/// derivatives (FMI 2 input derivatives) on the same grid, and both the uniform grid's
/// (about 3530 N). Before, the stamp force read −3.9e4 N at the end of the shrinking steps
/// with samples, and −5.9e8 N with derivatives at the first step of 1e-7 s (status OK).
#[test]
fn shrinking_communication_steps_keep_the_stamp_force() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/quarter_car_rig.toml");
    let spec = Arc::new(mbsfmu::mbs::load_model(&f).unwrap());
    let table = Arc::new(VariableTable::from_spec(&spec));
    let vr = |n: &str| table.by_name(n).unwrap().value_reference;
    let force = spec
        .outputs
        .iter()
        .position(|o| o.name == "stamp_force")
        .unwrap();
    let w = 3.0 * PI;
    // Stamp force after each step from the 50th on, with samples only or with derivatives.
    let run = |grid: &[f64], derivatives: bool| {
        let mut sim = Simulation::new(
            spec.clone(),
            table.clone(),
            System::new(spec.clone()).unwrap(),
        );
        sim.setup_experiment(Some(1e-6), 0.0, None).unwrap();
        sim.initialize().unwrap();
        let (mut t, mut out) = (0.0, Vec::new());
        for (k, &h) in grid.iter().enumerate() {
            let z = vr("stamp_z");
            sim.set_real(z, 0.01 * (w * t).sin(), SetPhase::Stepping)
                .unwrap();
            if derivatives {
                sim.set_input_derivative(z, 1, 0.01 * w * (w * t).cos())
                    .unwrap();
                sim.set_input_derivative(z, 2, -0.01 * w * w * (w * t).sin())
                    .unwrap();
            }
            let r = sim.advance_to(t + h, None).unwrap();
            assert_eq!(r, Advance::Completed, "step to {}", t + h);
            t += h;
            if k >= 50 {
                out.push(sim.outputs().unwrap()[force]);
            }
        }
        out
    };
    let shrinking = vec![1e-3, 1e-4, 1e-5, 1e-6, 1e-7];
    let mut growing = shrinking.clone();
    growing.reverse();
    // A switch to sustained 1 µs steps for 2 ms (a multi-rate master): −25 kN 1 ms after the
    // switch, when the scale carried from the 10 ms steps ran out.
    // Measured: within 2.5 N over the fine steps; the first 10 ms step after them 21 N off
    // (3546 against 3568 N): eight samples within 7 µs tell nothing about the next 10 ms
    // (their trend is dropped for the line through them, which misses ½ ü H² = 44 µm).
    let sustained = vec![1e-6; 2000];
    for (tail, bound) in [(shrinking, 20.0), (growing, 20.0), (sustained, 30.0)] {
        let mut grid = vec![0.01; 50];
        grid.extend(&tail);
        grid.extend([0.01; 5]);
        let (samples, exact) = (run(&grid, false), run(&grid, true));
        let (at, worst) = samples
            .iter()
            .zip(&exact)
            .map(|(a, b)| (a - b).abs())
            .enumerate()
            .fold((0, 0.0), |w, (k, d)| if d > w.1 { (k, d) } else { w });
        // Measured: 1.4 and 1.5 N (3526–3530 N at the short steps); before, −3.9e4 N with
        // samples, and −5.9e8 N with derivatives after the first 1e-7 s step (the last
        // polynomial's truncation error closed within it).
        assert!(
            worst < bound,
            "{:?}: stamp force {} against {} after step {at} of {}",
            &tail[..5],
            samples[at],
            exact[at],
            samples.len()
        );
    }
}
