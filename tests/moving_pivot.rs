//! A pendulum hanging from a frame that an input moves sideways, driven with plain samples at
//! 1 ms under `linear` and `hold`, in both formulations, against the minimal-coordinate
//! equation of motion integrated here with RK4 and the reconstruction's own pivot motion:
//! `(I + m L²) θ̈ = −m L (g sin θ + ẍ cos θ)`, where `linear` moves the pivot along straight
//! segments (its velocity jumps at each communication point: `Δθ̇ = −m L cos θ Δẋ/(I + m L²)`)
//! and `hold` in steps (its position jumps: `Δθ = −m L cos θ Δx/(I + m L²)`, the limit of a
//! move ever faster).
//!
//! Until session 28 the joint formulation, which eliminates the frame's motion, gave the
//! pendulum no impulse at those jumps: it moved with the frame as one rigid body (its tip
//! 3.6e-4 m off the frame where the physics swings it 0.08 m), with status OK.

mod common;
use mbsfmu::cosim::{Advance, SetPhase, Simulation};
use mbsfmu::description::VariableTable;
use mbsfmu::mbs::system::System;
use std::f64::consts::PI;
use std::sync::Arc;

/// The model, shared with `tests/python/test_rig_inputs.py` (`RECONSTRUCTION` is the input's
/// mode).
const PIVOT: &str = include_str!("data/moving_pivot.toml");

const H: f64 = 1e-3;
const STEPS: usize = 1500;

/// The sampled signal: a sideways move of 5 cm, `sin³`, one period a second.
fn signal(k: usize) -> f64 {
    0.05 * (2.0 * PI * k as f64 * H).sin().powi(3)
}

/// The bob's mass, inertia about its centre and distance from the pivot (the model above).
const BOB_MASS: f64 = 1.0;
const BOB_INERTIA: f64 = 0.001;
const ARM: f64 = 1.0;

/// `(θ, θ̇)` after `span` of free swing about a pivot at rest or moving uniformly (no `ẍ`),
/// in `n` RK4 steps.
fn free_swing(mut th: f64, mut om: f64, span: f64, n: usize) -> (f64, f64) {
    let (m, l) = (BOB_MASS, ARM);
    let j = BOB_INERTIA + m * l * l;
    let f = |th: f64, om: f64| (om, -m * l * 9.81 * th.sin() / j);
    let dt = span / n as f64;
    for _ in 0..n {
        let k1 = f(th, om);
        let k2 = f(th + 0.5 * dt * k1.0, om + 0.5 * dt * k1.1);
        let k3 = f(th + 0.5 * dt * k2.0, om + 0.5 * dt * k2.1);
        let k4 = f(th + dt * k3.0, om + dt * k3.1);
        th += dt / 6.0 * (k1.0 + 2.0 * k2.0 + 2.0 * k3.0 + k4.0);
        om += dt / 6.0 * (k1.1 + 2.0 * k2.1 + 2.0 * k3.1 + k4.1);
    }
    (th, om)
}

/// The bob's x at the communication points 1 … STEPS, from the minimal equation with the
/// pivot as the reconstruction moves it (`hold`: x = u_k on [t_k, t_k+1]; `linear`: from
/// u_{k−1} to u_k over that step).
fn reference(hold: bool) -> Vec<f64> {
    let (m, l) = (BOB_MASS, ARM);
    let j = BOB_INERTIA + m * l * l;
    let (mut th, mut om) = (0.0_f64, 0.0_f64);
    let mut x_prev = signal(0);
    let mut v_prev = 0.0;
    let mut out = Vec::new();
    for k in 0..STEPS {
        // The pivot over [t_k, t_k+1]: start, velocity.
        let (x0, v) = if hold {
            (signal(k), 0.0)
        } else {
            let p = if k == 0 { signal(0) } else { signal(k - 1) };
            (p, (signal(k) - p) / H)
        };
        th -= m * l * th.cos() * (x0 - x_prev) / j;
        om -= m * l * th.cos() * (v - v_prev) / j;
        // Between the jumps the pivot moves uniformly: no ẍ.
        (th, om) = free_swing(th, om, H, 20);
        x_prev = x0 + v * H;
        v_prev = v;
        out.push(x_prev + l * th.sin());
    }
    out
}

fn run(reconstruction: &str, formulation: &str) -> Vec<f64> {
    let text = PIVOT.replace("RECONSTRUCTION", reconstruction);
    let spec = common::cosim::spec_in(&text, formulation, "pivot");
    let table = Arc::new(VariableTable::from_spec(&spec));
    let mut sim = Simulation::new(spec.clone(), table.clone(), System::new(spec).unwrap());
    sim.setup_experiment(None, 0.0, None).unwrap();
    sim.initialize().unwrap();
    let u = table.by_name("top_x").unwrap().value_reference;
    let tip = table.by_name("tip_x").unwrap().value_reference;
    let mut out = Vec::new();
    for k in 0..STEPS {
        sim.set_real(u, signal(k), SetPhase::Stepping).unwrap();
        let r = sim.advance_to((k + 1) as f64 * H, None).unwrap();
        assert_eq!(r, Advance::Completed);
        out.push(sim.get_real(tip).unwrap());
    }
    out
}

#[test]
fn a_pendulum_on_a_sampled_moving_pivot_swings_in_every_mode_and_formulation() {
    for (mode, hold) in [("linear", false), ("hold", true)] {
        let want = reference(hold);
        let swing = want
            .iter()
            .enumerate()
            .map(|(k, x)| (x - signal(k)).abs())
            .fold(0.0, f64::max);
        assert!(swing > 0.05, "{mode}: the reference swings {swing} m");
        for formulation in ["joint", "absolute"] {
            let got = run(mode, formulation);
            let err = got
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            // Measured: 6.8e-7 / 7.6e-7 m (linear, joint / absolute), 6.0e-7 / 1.3e-6 m
            // (hold) of a 0.079 m swing; the joint formulation before: 0.079 m.
            assert!(
                err < 1e-4 * swing,
                "{mode}, {formulation}: tip x off the minimal equation by up to {err} m \
                 (swing {swing} m)"
            );
        }
    }
}

/// FMI 3 intermediate update: the importer answers inside the communication steps (1 ms) with
/// `x_of(t)`, which is 0 until `t_s` and then moves the frame uniformly or not at all
/// (`rate`): a step of `dx` and a ramp of `rate` starting at `t_s`. The pendulum starts at rest
/// and, from `t_s`, swings freely from `(θ₀, θ̇₀)` given by the impulse rule:
/// `θ₀ = −m L dx / (I + m L²)` (a position step is the limit of a move ever faster: the bob
/// keeps its place) and `θ̇₀ = −m L rate / (I + m L²)` (the bob keeps its velocity). The bob's x
/// is `x_of(t) + L sin θ` (RK4). `reconstruction` is the input's mode, which the intermediate
/// path must not depend on. The largest error at the communication points, the reference's
/// largest swing about the frame, and the restarts.
fn intermediate_path_error(
    integrator: &str,
    formulation: &str,
    reconstruction: &str,
    (t_s, dx, rate): (f64, f64, f64),
) -> (f64, f64, u64) {
    use mbsfmu::cosim::InputRequest;
    let x_of = move |t: f64| if t >= t_s { dx + rate * (t - t_s) } else { 0.0 };
    let (m, l) = (BOB_MASS, ARM);
    let j = BOB_INERTIA + m * l * l;
    // The reference at the communication points from the jump on (nothing moves before it).
    let mut state = (-m * l * dx / j, -m * l * rate / j);
    let mut swing = 0.0f64;
    let reference: Vec<f64> = (1..=1300)
        .map(|k| {
            let (t0, t1) = ((k - 1) as f64 * H, k as f64 * H);
            if t1 < t_s {
                return 0.0;
            }
            let span = t1 - t0.max(t_s);
            state = free_swing(state.0, state.1, span, 100);
            swing = swing.max((l * state.0.sin()).abs());
            x_of(t1) + l * state.0.sin()
        })
        .collect();
    let text = PIVOT.replace("RECONSTRUCTION", reconstruction).replace(
        "[solver]\n",
        &format!("[solver]\nintegrator = \"{integrator}\"\n"),
    );
    let spec = common::cosim::spec_in(&text, formulation, "pivot");
    let table = Arc::new(VariableTable::from_spec(&spec));
    let mut sim = Simulation::new(spec.clone(), table.clone(), System::new(spec).unwrap());
    sim.set_cpu_budget_per_call(f64::INFINITY);
    sim.setup_experiment(None, 0.0, None).unwrap();
    sim.initialize().unwrap();
    let u = table.by_name("top_x").unwrap().value_reference;
    let tip = table.by_name("tip_x").unwrap().value_reference;
    let mut worst = 0.0f64;
    for (k, want) in reference.iter().enumerate() {
        let t = k as f64 * H;
        sim.set_real(u, x_of(t), SetPhase::Stepping).unwrap();
        let mut answer = |t: f64, _: InputRequest| vec![(0, x_of(t))];
        let r = sim
            .advance_to((k + 1) as f64 * H, Some(&mut answer))
            .unwrap();
        assert_eq!(
            r,
            Advance::Completed,
            "{integrator}, {formulation}: step {k}"
        );
        let got = sim.get_real(tip).unwrap();
        worst = worst.max((got - want).abs());
    }
    (worst, swing, sim.stats().restarts)
}

/// Until session 30 the joint formulation, which eliminates the frame's motion, let the bob go
/// with the frame and leave at 1.07 m/s (0.34 m off after 1 s), with status OK: the internal
/// step across the jump ran on the accepted segment, and the jump at its end gave no impulse.
#[test]
fn a_pivot_step_inside_a_step_on_the_intermediate_path() {
    for formulation in ["absolute", "joint"] {
        let (worst, swing, _) =
            intermediate_path_error("bdf", formulation, "hold", (0.3004, 0.01, 0.0));
        assert!(swing > 9e-3, "the reference swings {swing} m");
        // Measured: absolute 3.7e-7 m, joint 1.5e-7 m.
        eprintln!("{formulation}: {worst:.3e} m");
        assert!(
            worst < 1e-3 * swing,
            "{formulation}: off by up to {worst} m (swing {swing} m)"
        );
    }
}

/// The frame starts to move at 0.1 m/s at t = 0.3004 s, inside a communication step, on the
/// intermediate path. After it most communication steps are one internal step, which asks the
/// importer at stage times only; until session 30 the input then continued at the next
/// communication point by its mode's own segment (`linear` one step late, `hold` held) instead
/// of the answers, a jump against the path just integrated: 672 restarts in 1 s in absolute
/// coordinates, and in joint coordinates an impulse each time, the pendulum sent off at 0.9 m/s
/// (1.03 m off). Now the answers carry over in every mode.
///
/// Until session 31 joint coordinates, which eliminate the frame's motion, also gave the free
/// coordinates no impulse for the ramp's start, so the bob went with the frame (0.0315 m off,
/// the reference's whole swing, status OK): the step across the start ran on the accepted
/// segment (shorter than the stage-time resolution) and the slope the next segment took there
/// reached the free coordinates nowhere; or it ran on a stage segment whose `ü` left out the
/// slope's jump at the step's start.
#[test]
fn a_frame_ramping_from_inside_a_step_on_the_intermediate_path() {
    for mode in ["hold", "linear", "smooth"] {
        for formulation in ["absolute", "joint"] {
            let (worst, swing, restarts) =
                intermediate_path_error("bdf", formulation, mode, (0.3004, 0.0, 0.1));
            eprintln!(
                "{formulation}, {mode}: {worst:.3e} m (swing {swing:.3e} m), restarts {restarts}"
            );
            assert!(swing > 0.03, "the reference swings {swing} m");
            // Measured: absolute 1.2e-9 m, joint 7.3e-11 m, 2 restarts, in every mode.
            assert!(
                worst < 1e-3 * swing,
                "{formulation}, {mode}: off by {worst} m"
            );
            assert!(restarts <= 5, "{formulation}, {mode}: {restarts} restarts");
        }
    }
}

/// The ramp's start anywhere in a communication step, either way: the step across it ran on the
/// accepted segment at some starts and on a stage segment at others (with only the first of the
/// two fixes of session 31, the joint formulation was still the whole swing off at 0.30025,
/// 0.30055 and 0.30095 s with a rate of −0.5 m/s).
#[test]
fn a_ramp_starting_anywhere_in_a_step_swings_the_pendulum_in_both_formulations() {
    for t_s in [0.3001, 0.30025, 0.30055, 0.3007, 0.30095, 0.30099] {
        for rate in [0.1, -0.5] {
            for formulation in ["absolute", "joint"] {
                let (worst, swing, restarts) =
                    intermediate_path_error("bdf", formulation, "smooth", (t_s, 0.0, rate));
                eprintln!(
                    "{formulation}, t_s {t_s}, rate {rate}: {worst:.3e} m, restarts {restarts}"
                );
                // Measured: at most 2.1e-8 m (absolute) and 7.1e-9 m (joint), 2–3 restarts.
                assert!(
                    worst < 1e-4 * swing,
                    "{formulation}, t_s {t_s}, rate {rate}: off by {worst} m (swing {swing} m)"
                );
                assert!(
                    restarts <= 5,
                    "{formulation}, t_s {t_s}: {restarts} restarts"
                );
            }
        }
    }
}

/// Every integrator on the intermediate path, a 1 cm step of the frame and ramps either way
/// starting early, in the middle and at the end of a communication step: each method's error
/// test (rosenbrock_nystrom's and dopri5's: the check of the answers against their trend,
/// `StageSampled::take_redo`) shrinks the internal steps around the jump until the one that
/// crosses it runs on the accepted segments, and the jump's impulse is applied at its end.
///
/// Until session 33 rosenbrock_nystrom and dopri5 accepted a step whose last evaluation saw
/// the jump (a step at 0.3007 s sent the pendulum off by 1 m with rosenbrock_nystrom in joint
/// coordinates, a ramp from 0.30095 s was 13 % of the swing off with dopri5), status OK.
/// Left out: half_implicit in absolute coordinates, which stops on this rig from rest
/// (docs/benchmarks.md, *Why the half-implicit method stops on the rig*). `PIVOT_METHODS`
/// (comma-separated names) narrows the run.
#[test]
fn every_integrator_swings_the_pendulum_after_a_step_or_a_ramp_inside_a_step() {
    use mbsfmu::integrate::Method;
    let only = std::env::var("PIVOT_METHODS").ok();
    for method in Method::ALL {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|m| m == method.name()))
        {
            continue;
        }
        for formulation in ["absolute", "joint"] {
            if method == Method::HalfImplicit && formulation == "absolute" {
                continue;
            }
            for t_s in [0.3001, 0.30025, 0.30055, 0.3007, 0.30095, 0.30099] {
                for (dx, rate) in [(0.01, 0.0), (0.0, 0.1), (0.0, -0.5)] {
                    let name = method.name();
                    let (worst, swing, restarts) =
                        intermediate_path_error(name, formulation, "smooth", (t_s, dx, rate));
                    let what = format!("{name}, {formulation}, t_s {t_s}, jump {dx}, rate {rate}");
                    eprintln!(
                        "{what}: {:.1e} of the swing, restarts {restarts}",
                        worst / swing
                    );
                    // Measured: at most 1.2e-3 of the swing (half_implicit, joint, steps),
                    // 2.9e-4 (newmark), the others below 1e-4 (rosenbrock_nystrom and dopri5
                    // 3.5e-5); 1 to 5 restarts.
                    assert!(
                        worst < 3e-3 * swing,
                        "{what}: off by {worst} m (swing {swing} m)"
                    );
                    assert!(restarts <= 5, "{what}: {restarts} restarts");
                }
            }
        }
    }
}

/// An importer that answers the intermediate update with a noisy signal (10 µm of white noise
/// on the frame's 5 cm motion, drawn afresh at every call, also at the communication points),
/// 0.3 s of 1 ms steps at rtol 1e-4: every method completes every step, within a few times the
/// internal steps of the same run with the inputs set at the communication points only, ends
/// near where that run ends, and the instance says once which input's answers were rough. The
/// same answers without noise are never found rough.
///
/// Until session 34 every answer was a jump at any step size: BDF Discarded in the first step
/// (5 000 internal steps of 3e-8 s), rosenbrock_nystrom, dopri5 and sdirk took 19 000 to
/// 63 000 internal steps with 7 500 to 63 000 restarts, the CPU up to 4.7 s, and ended with the
/// tip up to 0.85 m off, five of the six 0.4 m or more (docs/fmi-runtime.md, *Noisy answers*).
#[test]
fn noisy_answers_inside_the_step_end_in_bounded_work_with_one_note() {
    use mbsfmu::cosim::InputRequest;
    use mbsfmu::integrate::Method;
    let x_of = |t: f64| 0.05 * (2.0 * PI * t).sin().powi(3);
    let run = |method: &str, formulation: &str, sigma: f64, answer: bool| {
        let text = PIVOT
            .replace("RECONSTRUCTION", "smooth")
            .replace(
                "[solver]\n",
                &format!("[solver]\nintegrator = \"{method}\"\n"),
            )
            .replace("rtol = 1e-7", "rtol = 1e-4")
            .replace("atol = 1e-9", "atol = 1e-4");
        let spec = common::cosim::spec_in(&text, formulation, "pivot");
        let table = Arc::new(VariableTable::from_spec(&spec));
        let mut sim = Simulation::new(spec.clone(), table.clone(), System::new(spec).unwrap());
        sim.setup_experiment(None, 0.0, None).unwrap();
        sim.initialize().unwrap();
        let u = table.by_name("top_x").unwrap().value_reference;
        // xorshift64: uniform noise of standard deviation `sigma`.
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut noise = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed as f64 / u64::MAX as f64 - 0.5) * 12f64.sqrt() * sigma
        };
        for k in 0..300 {
            let t = k as f64 * H;
            sim.set_real(u, x_of(t) + noise(), SetPhase::Stepping)
                .unwrap();
            let mut ask = |t: f64, _: InputRequest| vec![(0usize, x_of(t) + noise())];
            let r = sim.advance_to((k + 1) as f64 * H, answer.then_some(&mut ask as _));
            assert_eq!(
                r.unwrap(),
                Advance::Completed,
                "{method}, {formulation}, noise {sigma}, answering {answer}: step {k}"
            );
        }
        let tip = table.by_name("tip_x").unwrap().value_reference;
        let tip = sim.get_real(tip).unwrap();
        (sim.stats(), sim.rough_answer_steps(), sim.take_notes(), tip)
    };
    for method in Method::ALL {
        if method == Method::HalfImplicit {
            // Stops on this rig from rest without any answers (see the test above).
            continue;
        }
        for formulation in ["absolute", "joint"] {
            let name = method.name();
            let (plain, _, _, tip_plain) = run(name, formulation, 1e-5, false);
            let (noisy, rough, notes, tip_noisy) = run(name, formulation, 1e-5, true);
            let (smooth, never, none, _) = run(name, formulation, 0.0, true);
            eprintln!(
                "{name}, {formulation}: steps {} answered with noise ({} restarts, found rough \
                 in {rough} steps) against {} at the communication points only; {} answered \
                 without noise; tip {tip_noisy:.5} m against {tip_plain:.5} m",
                noisy.steps, noisy.restarts, plain.steps, smooth.steps
            );
            // Measured: at most 2.0 times the steps (rosenbrock_nystrom, absolute: 610
            // against 305), 23 to 404 restarts; the tip within 4.8 mm of the run at the
            // communication points (dopri5, absolute; 1.7 mm rosenbrock_nystrom, absolute;
            // newmark, joint, 4.1 mm, whose run at the communication points is itself 19 mm
            // from the others'; the rest within 1 mm).
            assert!(
                (tip_noisy - tip_plain).abs() < 1e-2,
                "{name}, {formulation}: tip at {tip_noisy} m against {tip_plain} m"
            );
            assert!(
                noisy.steps <= 3 * plain.steps,
                "{name}, {formulation}: {} internal steps against {}",
                noisy.steps,
                plain.steps
            );
            assert!(rough > 0, "{name}, {formulation}: noise never found rough");
            assert_eq!(notes.len(), 1, "{name}, {formulation}: {notes:?}");
            assert!(notes[0].contains("`top_x`"), "{}", notes[0]);
            assert_eq!(
                never, 0,
                "{name}, {formulation}: smooth answers found rough"
            );
            assert!(none.is_empty(), "{none:?}");
        }
    }
}
