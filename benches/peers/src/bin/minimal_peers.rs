//! Issue 15, peers at minimal coordinates: in one run, the same communication loop for
//! - CVODE on the hand-written minimal-coordinate C right-hand sides (`csrc/minimal.c`,
//!   `src/minimal.rs`), what a Modelica tool's FMU would run;
//! - our FMU through the FMI 2 C ABI (`benches/common/fmi2_master.rs`, shared with the rig
//!   bench) in the absolute and the joint formulation;
//! - Exudyn on the slider-crank (`tools/peers/exudyn_bench.py`, fixed step = H);
//!
//! each at the loosest tolerance of a sweep whose error is at most 1e-4 against the
//! independent reference, CPU medians (min, max) over `--repeats` runs; and the cost of one
//! acceleration evaluation of the C right-hand side against the joint formulation.
//! Writes the `minimal_peers` section of docs/benchmarks.md (unless `--print`, or any option
//! that narrows the run: only the whole default set replaces the section).
//!
//! `cargo run --release --bin minimal_peers -- [--repeats 3] [--cases dp10,dp1,slider1,
//!  slider10,chain16] [--methods bdf,sdirk,...] [--formulations absolute,joint] [--no-peers]
//!  [--no-exudyn] [--no-eval] [--print] [--profile-eval N [--profile-only dp|chain16] [--profile-alternate]]`
//! (needs `cargo build --release --lib` in the root for libmbsfmu.so, or `MBSFMU_LIB`).

#![allow(clippy::needless_range_loop)]

#[path = "../../../common/fmi2_master.rs"]
mod fmi2_master;
#[path = "../minimal.rs"]
mod minimal;
#[path = "../../../common/report.rs"]
mod report;

use fmi2_master::{run_once, Case, Unpacked};
use mbsfmu::mbs::system::System;
use minimal::{Inputs, Model, Restart};
use report::median_min_max;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use fmi2_master::thread_cpu;

/// `benches/peers/data`.
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data")
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const TARGET: f64 = 1e-4;
const TOLS: [f64; 12] = [
    1e-3, 3e-4, 1e-4, 3e-5, 1e-5, 3e-6, 1e-6, 3e-7, 1e-7, 3e-8, 1e-8, 3e-9,
];

/// A gallery model's text in a formulation.
fn gallery(file: &str, formulation: &str) -> String {
    std::fs::read_to_string(root().join("models").join(file))
        .unwrap()
        .replacen(
            "[model]\n",
            &format!("[model]\nformulation = \"{formulation}\"\n"),
            1,
        )
}

/// Paper 003's chain as N rigid bodies (1 kg, inertia 1e-12 kg m²: point masses) on revolute
/// joints, the model the joint formulation runs (as `tests/joint_formulation.rs` builds it);
/// the suspension from the inputs `susp_x`, `susp_y`, or the built-in sine motions.
fn revolute_chain_toml(n: usize, inputs: bool) -> String {
    let mut s = String::from(
        "[model]\nname = \"revolute_chain\"\nformulation = \"joint\"\ngravity = [0.0, -9.81, 0.0]\n\n\
         [solver]\nintegrator = \"bdf\"\nrtol = 1e-4\natol = 1e-6\n\n",
    );
    if inputs {
        s.push_str(
            "[[inputs]]\nname = \"susp_x\"\nstart = 2.0\n\n[[inputs]]\nname = \"susp_y\"\nstart = 0.0\n\n\
             [[frames]]\nname = \"suspension\"\nposition = [{ input = \"susp_x\" }, { input = \"susp_y\" }, 0.0]\n\n",
        );
    } else {
        s.push_str(
            "[[frames]]\nname = \"suspension\"\nposition = [{ type = \"sine\", offset = 2.0, amplitude = 0.3, \
             frequency = 0.05 }, { type = \"sine\", amplitude = 0.2, frequency = 0.05 }, 0.0]\n\n",
        );
    }
    for k in 1..=n {
        writeln!(
            s,
            "[[bodies]]\nname = \"bob{k}\"\nmass = 1.0\ninertia = [1e-12, 1e-12, 1e-12]\nposition = [2.0, -{k}.0, 0.0]\n"
        )
        .unwrap();
    }
    for k in 1..=n {
        let parent = if k == 1 {
            "suspension".to_string()
        } else {
            format!("bob{}", k - 1)
        };
        writeln!(
            s,
            "[[joints]]\nname = \"hinge{k}\"\ntype = \"revolute\"\nbody1 = \"{parent}\"\nbody2 = \"bob{k}\"\n\
             point = [2.0, -{}.0, 0.0]\naxis = [0.0, 0.0, 1.0]\n",
            k - 1
        )
        .unwrap();
    }
    for c in ["x", "y"] {
        writeln!(
            s,
            "[[outputs]]\nname = \"tip_{c}\"\ntype = \"position\"\nbody = \"bob{n}\"\ncomponent = \"{c}\"\n"
        )
        .unwrap();
    }
    s
}

/// `benches/common/chain_model.rs`'s particle chain (the gallery model for N = 16).
#[path = "../../../common/chain_model.rs"]
mod chain_model;

// ----- one evaluation: the C right-hand side against the joint formulation -----

/// Per-call thread CPU time (µs) of `f`, median (min, max) over 9 batches of `reps` calls.
fn per_call(reps: usize, mut f: impl FnMut()) -> (f64, f64, f64) {
    for _ in 0..reps / 10 + 1 {
        f();
    }
    let xs: Vec<f64> = (0..9)
        .map(|_| {
            let c0 = thread_cpu();
            for _ in 0..reps {
                f();
            }
            (thread_cpu() - c0) / reps as f64 * 1e6
        })
        .collect();
    median_min_max(&xs)
}

/// [`per_call`] of `System::accelerations_into` (the table's number); prints the allocating
/// `System::accelerations` alongside (what the table measured before session 10).
fn joint_per_call(
    sys: &mut System,
    reps: usize,
    t: f64,
    q: &[f64],
    v: &[f64],
    name: &str,
) -> ((f64, f64, f64), (f64, f64, f64)) {
    let (a0, l0) = sys.accelerations(t, q, v).unwrap();
    let (mut a, mut l) = (a0, l0);
    let into = per_call(reps, || {
        sys.accelerations_into(t, q, v, &mut a, &mut l).unwrap();
        std::hint::black_box((&a, &l));
    });
    let alloc = per_call(reps, || {
        std::hint::black_box(sys.accelerations(t, q, v).unwrap());
    });
    // The same state every call lets the poses and inertias be reused (as when a BDF
    // residual asks for `M` and `Ψ` at one state); alternating two states recomputes them
    // every call (as along a trajectory).
    let q2: Vec<f64> = q.iter().map(|x| x + 1e-3).collect();
    let mut flip = false;
    let fresh = per_call(reps, || {
        flip = !flip;
        let qq = if flip { &q2[..] } else { q };
        sys.accelerations_into(t, qq, v, &mut a, &mut l).unwrap();
        std::hint::black_box((&a, &l));
    });
    eprintln!(
        "eval: {name}: accelerations_into {:.3} ({:.3}–{:.3}) µs, accelerations (allocating) \
         {:.3} ({:.3}–{:.3}) µs, accelerations_into at alternating states (poses recomputed) \
         {:.3} ({:.3}–{:.3}) µs",
        into.0, into.1, into.2, alloc.0, alloc.1, alloc.2, fresh.0, fresh.1, fresh.2
    );
    (into, fresh)
}

fn eval_cost(md: &mut String) {
    md.push_str(
        "**One evaluation of the accelerations** (thread CPU per call, median (min–max) of 9 \
         batches; C: `csrc/minimal.c` at -O2, the whole right-hand side; joint: \
         `System::accelerations_into` of the joint formulation, which also returns λ, into the \
         caller's vectors; before session 10 the allocating `System::accelerations`), at one state (chain: φ_k = 0.4 sin(k + 0.7), φ̇_k = 0.8 cos(1.3 k); \
         double pendulum: θ1 = 0.3, elbow 0.2, ω = (−1, 2)), and for the double pendulum also at \
         two states in turn (both joint angles 1e-3 apart, so that the poses are recomputed at \
         every call, as along a trajectory; the C side at the same two states); both give the \
         same accelerations (max relative difference in the last column, at the first state):\n\n\
         | model | C right-hand side µs | joint formulation µs | joint / C | max rel. diff. |\n\
         |---|---|---|---|---|\n",
    );
    // Double pendulum: joint q = (θ1, θ2 − θ1).
    {
        let text = gallery("double_pendulum_stiff.toml", "joint");
        let spec = mbsfmu::mbs::load_model_str(&text, &root().join("models/x.toml")).unwrap();
        let mut sys = System::new(Arc::new(spec)).unwrap();
        // θ2 − θ1 = 0.2 + 2π: the C model's spring deviation is θ2 − θ1 − 2π (θ2 starts at
        // 23π/12, the elbow angle at −π/12).
        let y = [0.3, 0.5 + 2.0 * std::f64::consts::PI, -1.0, 2.0];
        let mut yd = [0.0; 4];
        let c = per_call(200_000, || unsafe {
            minimal::mbs_dp_rhs(0.0, y.as_ptr(), yd.as_mut_ptr())
        });
        // The C right-hand side at the two alternating states of `joint_per_call` (its
        // angles 1e-3 apart), so that both sides are also compared along a trajectory.
        let y2 = [y[0] + 1e-3, y[1] + 2e-3, y[2], y[3]];
        let mut yd2 = [0.0; 4];
        let mut flip = false;
        let c_alt = per_call(200_000, || {
            flip = !flip;
            let yy = if flip { &y2 } else { &y };
            unsafe { minimal::mbs_dp_rhs(0.0, yy.as_ptr(), yd2.as_mut_ptr()) };
            std::hint::black_box(&yd2);
        });
        let q = [y[0], y[1] - y[0] - 2.0 * std::f64::consts::PI];
        let v = [y[2], y[3] - y[2]];
        let (a, _) = sys.accelerations(0.0, &q, &v).unwrap();
        let (j, j_alt) = joint_per_call(&mut sys, 50_000, 0.0, &q, &v, "stiff double pendulum");
        let want = [yd[2], yd[3] - yd[2]];
        let diff = (0..2)
            .map(|i| (a[i] - want[i]).abs() / (1.0 + want[i].abs()))
            .fold(0.0f64, f64::max);
        row(md, "stiff double pendulum", c, j, diff);
        row(
            md,
            "stiff double pendulum, two states in turn",
            c_alt,
            j_alt,
            diff,
        );
    }
    for n in [16usize, 32] {
        let text = revolute_chain_toml(n, false);
        let spec = mbsfmu::mbs::load_model_str(&text, &root().join("models/x.toml")).unwrap();
        let mut sys = System::new(Arc::new(spec)).unwrap();
        let t = 7.3;
        let mut y: Vec<f64> = (0..n).map(|k| 0.4 * (k as f64 + 0.7).sin()).collect();
        y.extend((0..n).map(|k| 0.8 * (1.3 * k as f64).cos()));
        let mut yd = vec![0.0; 2 * n];
        let mut work = vec![0.0; n * n + n];
        let s = minimal::suspension(t);
        let c = per_call(20_000, || unsafe {
            minimal::mbs_chain_rhs(
                n as i32,
                t,
                y.as_ptr(),
                yd.as_mut_ptr(),
                s[0][2],
                s[1][2],
                work.as_mut_ptr(),
            )
        });
        let rel = |a: &[f64]| -> Vec<f64> {
            (0..n)
                .map(|k| if k == 0 { a[0] } else { a[k] - a[k - 1] })
                .collect()
        };
        let (q, v) = (rel(&y[..n]), rel(&y[n..]));
        let (a, _) = sys.accelerations(t, &q, &v).unwrap();
        let (j, _) = joint_per_call(&mut sys, 5_000, t, &q, &v, &format!("chain N = {n}"));
        let want = rel(&yd[n..]);
        let diff = (0..n)
            .map(|i| (a[i] - want[i]).abs() / (1.0 + want[i].abs()))
            .fold(0.0f64, f64::max);
        row(md, &format!("chain N = {n}"), c, j, diff);
    }
    md.push('\n');

    fn row(md: &mut String, name: &str, c: (f64, f64, f64), j: (f64, f64, f64), diff: f64) {
        let line = format!(
            "| {name} | {:.3} ({:.3}–{:.3}) | {:.3} ({:.3}–{:.3}) | {:.2} | {diff:.1e} |\n",
            c.0,
            c.1,
            c.2,
            j.0,
            j.1,
            j.2,
            j.0 / c.0
        );
        eprint!("eval: {line}");
        md.push_str(&line);
    }
}

/// `n` evaluations of the joint double pendulum and `n / 4` of the joint chain N = 16 (what
/// `perf record --call-graph dwarf` should look at); `only` = `dp` or `chain16` runs one of
/// them (the chain's evaluations cost ten times the pendulum's and would hide it).
fn profile_eval(n: usize, only: Option<&str>, alternate: bool) {
    if only != Some("chain16") {
        profile_dp(n, alternate);
    }
    if only != Some("dp") {
        profile_chain(n / 4);
    }
}

/// `alternate`: two states in turn, so the poses are recomputed at every call (as along a
/// trajectory) instead of found in the pose cache.
fn profile_dp(n: usize, alternate: bool) {
    let text = gallery("double_pendulum_stiff.toml", "joint");
    let spec = mbsfmu::mbs::load_model_str(&text, &root().join("models/x.toml")).unwrap();
    let mut sys = System::new(Arc::new(spec)).unwrap();
    let (q, v) = ([0.3, 0.2], [-1.0, 3.0]);
    let q2 = [0.301, 0.201];
    let (mut a, mut l) = sys.accelerations(0.0, &q, &v).unwrap();
    for i in 0..n {
        let qq = if alternate && i % 2 == 1 { &q2 } else { &q };
        sys.accelerations_into(0.0, qq, &v, &mut a, &mut l).unwrap();
        std::hint::black_box((&a, &l));
    }
}

fn profile_chain(n: usize) {
    let text = revolute_chain_toml(16, false);
    let spec = mbsfmu::mbs::load_model_str(&text, &root().join("models/x.toml")).unwrap();
    let mut sys = System::new(Arc::new(spec)).unwrap();
    let q: Vec<f64> = (0..16).map(|k| 0.1 * (k as f64).sin()).collect();
    let (mut a, mut l) = sys.accelerations(7.3, &q, &q).unwrap();
    for _ in 0..n {
        sys.accelerations_into(7.3, &q, &q, &mut a, &mut l).unwrap();
        std::hint::black_box((&a, &l));
    }
}

// ----- the co-simulation runs -----

struct CaseDef {
    key: &'static str,
    title: String,
    h: f64,
    t_end: f64,
    /// (formulation label, model text) for our FMU.
    models: Vec<(&'static str, String)>,
    inputs: Vec<&'static str>,
    signal: fn(f64) -> Vec<f64>,
    outputs: Vec<&'static str>,
    reference: (PathBuf, Vec<&'static str>),
    /// Reference points before this time are not compared (the slider-crank: samples alone
    /// cannot tell that the crank already turns at t = 0; the reconstruction needs a few
    /// steps to find the rate, for the peer and for us alike).
    compare_from: f64,
    /// The minimal-coordinate peer, if it integrates anything.
    peer: Option<Model>,
}

fn case_defs() -> Vec<CaseDef> {
    let dp = |key, h: f64| CaseDef {
        key,
        title: format!("stiff double pendulum, H = {} ms, 2 s", h * 1e3),
        h,
        t_end: 2.0,
        models: vec![
            (
                "absolute",
                gallery("double_pendulum_stiff.toml", "absolute"),
            ),
            ("joint", gallery("double_pendulum_stiff.toml", "joint")),
        ],
        inputs: vec![],
        signal: |_| vec![],
        outputs: vec!["theta1"],
        reference: (data_dir().join("double_pendulum_stiff.csv"), vec!["theta1"]),
        compare_from: 0.0,
        peer: Some(Model::DoublePendulum),
    };
    let slider = |key, h: f64| CaseDef {
        key,
        title: format!(
            "slider-crank, crank angle 2πt sampled, H = {} ms, 8 s",
            h * 1e3
        ),
        h,
        t_end: 8.0,
        models: vec![
            ("absolute", gallery("slider_crank.toml", "absolute")),
            ("joint", gallery("slider_crank.toml", "joint")),
        ],
        inputs: vec!["crank_angle"],
        signal: |t| vec![2.0 * std::f64::consts::PI * t],
        outputs: vec!["crank_torque"],
        reference: (data_dir().join("slider_crank.csv"), vec!["crank_torque"]),
        compare_from: 0.1,
        peer: None,
    };
    vec![
        dp("dp10", 1e-2),
        dp("dp1", 1e-3),
        slider("slider10", 1e-2),
        slider("slider1", 1e-3),
        CaseDef {
            key: "chain16",
            title: "chain N = 16, suspension inputs sampled, H = 1 ms, 20 s".into(),
            h: 1e-3,
            t_end: 20.0,
            models: vec![
                ("absolute", chain_model::chain_model_text(16, false)),
                ("joint", revolute_chain_toml(16, true)),
            ],
            inputs: vec!["susp_x", "susp_y"],
            signal: |t| {
                let s = minimal::suspension(t);
                vec![s[0][0], s[1][0]]
            },
            outputs: vec!["tip_x", "tip_y"],
            reference: (
                root().join("tests/data/pendulum_chain_n16_projected.csv"),
                vec!["tip_x", "tip_y"],
            ),
            compare_from: 0.0,
            peer: Some(Model::Chain(16)),
        },
    ]
}

fn reference_of(c: &CaseDef) -> fmi2_master::Reference {
    let table = fmi2_master::table(&c.reference.0, &c.reference.1);
    let from = c.compare_from;
    Box::new(move |t| if t < from - 1e-12 { None } else { table(t) })
}

/// One measured configuration: the tolerance the sweep chose, its error, the CPU times.
struct Measured {
    solver: String,
    tol: f64,
    error: f64,
    cpus: Vec<f64>,
    detail: String,
    note: String,
}

impl Measured {
    fn med(&self) -> f64 {
        median_min_max(&self.cpus).0
    }
}

/// The sweep: run at each tolerance until the error is at most `TARGET`, then repeat that
/// tolerance to `repeats` runs. `run(tol)` returns (cpu, error, ok, detail, note).
fn sweep(
    solver: String,
    repeats: usize,
    mut run: impl FnMut(f64) -> (f64, f64, bool, String, String),
) -> Measured {
    let mut last = None;
    for &tol in &TOLS {
        let (cpu, err, ok, detail, note) = run(tol);
        eprintln!("  {solver}: tol {tol:.0e} error {err:.2e} cpu {cpu:.4} {note}");
        if !ok && note.contains("stopped after") {
            last = Some(Measured {
                solver: solver.clone(),
                tol,
                error: err,
                cpus: vec![cpu],
                detail,
                note: format!("{note}; target error not reached"),
            });
            break;
        }
        if ok && err <= TARGET {
            let mut cpus = vec![cpu];
            for _ in 1..repeats {
                cpus.push(run(tol).0);
            }
            return Measured {
                solver,
                tol,
                error: err,
                cpus,
                detail,
                note,
            };
        }
        last = Some(Measured {
            solver: solver.clone(),
            tol,
            error: err,
            cpus: vec![cpu],
            detail,
            note: format!("{note} target error not reached in the sweep"),
        });
    }
    last.unwrap()
}

fn method_item(name: &str) -> i32 {
    1 + mbsfmu::integrate::Method::ALL
        .iter()
        .position(|m| m.name() == name)
        .unwrap_or_else(|| panic!("no integrator {name}")) as i32
}

fn measure_case(
    c: &CaseDef,
    repeats: usize,
    methods: &[String],
    formulations: &[String],
    peers: bool,
) -> Vec<Measured> {
    let mut out = Vec::new();
    let reference = reference_of(c);
    // The minimal-coordinate peer.
    match c.peer {
        _ if !peers => {}
        Some(model) => {
            let variants: Vec<(Inputs, Restart)> = match model {
                Model::Chain(_) => vec![
                    (Inputs::Reconstructed, Restart::Continue),
                    (Inputs::Reconstructed, Restart::ReInit),
                    (Inputs::Exact, Restart::Continue),
                ],
                _ => vec![
                    (Inputs::Exact, Restart::Continue),
                    (Inputs::Exact, Restart::ReInit),
                ],
            };
            // `--continued-only`: the generous CVODE variant alone (instruction counts under
            // callgrind, where the ReInit sweeps would be counted too).
            let continued_only = std::env::args().any(|a| a == "--continued-only");
            for (inputs, restart) in variants {
                if continued_only && restart != Restart::Continue {
                    continue;
                }
                let name = format!(
                    "CVODE, C RHS, {}{}",
                    match restart {
                        Restart::Continue => "continued",
                        Restart::ReInit => "CVodeReInit at each point",
                    },
                    match (model, inputs) {
                        (Model::Chain(_), Inputs::Reconstructed) => ", our reconstruction",
                        (Model::Chain(_), Inputs::Exact) => ", exact signal",
                        _ => "",
                    }
                );
                out.push(sweep(name, repeats, |tol| {
                    let r = minimal::cvode_cosim(model, inputs, restart, c.h, c.t_end, tol, &|t| {
                        reference(t)
                    });
                    (
                        r.cpu,
                        r.error,
                        r.ok,
                        format!(
                            "{} steps, {} f-evals, {} Jacobians{}",
                            r.steps,
                            r.f_evals,
                            r.jac_evals,
                            if restart == Restart::ReInit {
                                " (last interval: ReInit resets them)"
                            } else {
                                ""
                            }
                        ),
                        r.message,
                    )
                }));
            }
        }
        None => {
            let mut cpus = Vec::new();
            let mut r = minimal::CosimRun::default();
            for _ in 0..repeats.max(1) {
                r = minimal::slider_crank_cosim(c.h, c.t_end, &|t| reference(t));
                cpus.push(r.cpu);
            }
            out.push(Measured {
                solver: "C closed form at each point (0 states)".into(),
                tol: f64::NAN,
                error: r.error,
                cpus,
                detail: format!("{} evaluations", r.f_evals),
                note: String::new(),
            });
        }
    }
    // Our FMU through the C ABI.
    let f = fmi2_master::load();
    for (formulation, text) in &c.models {
        if !formulations.iter().any(|f| f == formulation) {
            continue;
        }
        let u = Unpacked::new(&format!("{}-{formulation}", c.key), text);
        for m in methods {
            let item = method_item(m);
            out.push(sweep(format!("ours, {formulation}, {m}"), repeats, |tol| {
                let case = Case {
                    name: "minimal_peers",
                    model: text.clone(),
                    h: c.h,
                    t_end: c.t_end,
                    inputs: c.inputs.clone(),
                    signal: Box::new(c.signal),
                    outputs: c.outputs.clone(),
                    reference: Some(reference_of(c)),
                    rtol: tol,
                    atol: Some(tol),
                };
                let r = run_once(&f, &u, &case, item, None);
                (
                    r.cpu,
                    r.error.unwrap_or(f64::INFINITY),
                    r.message.is_none(),
                    format!(
                        "{} steps, {} rejected, {} Jacobians, {} LU, in doStep {:.4} s",
                        r.stats[0], r.stats[1], r.stats[2], r.stats[4], r.fmu_cpu
                    ),
                    r.message.unwrap_or_default(),
                )
            }));
        }
    }
    out
}

/// Exudyn on the slider-crank at fixed steps H (its own solver over the whole span, not a
/// communication loop): rows (solver, step, error, cpu median, min, max).
/// Exudyn's solver, step size, error, CPU median, min, max.
type ExudynRow = (String, f64, f64, f64, f64, f64);

fn exudyn_slider(repeats: usize) -> Result<Vec<ExudynRow>, String> {
    let out =
        std::env::temp_dir().join(format!("mbsfmu-minimal-exudyn-{}.json", std::process::id()));
    // `PEERS_PYTHON`: an interpreter with Exudyn, else the project venv (tools/setup-bench.sh).
    let py = std::env::var_os("PEERS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv/bin/python"));
    let status = std::process::Command::new(&py)
        .args(["-W", "ignore"])
        .arg(root().join("tools/peers/exudyn_bench.py"))
        .args(["--problems", "slider", "--steps", "800,8000", "--repeats"])
        .arg(repeats.to_string())
        .arg("--out")
        .arg(&out)
        .status()
        .map_err(|e| format!("{}: {e}", py.display()))?;
    if !status.success() {
        return Err(format!("exudyn_bench.py: {status}"));
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&out);
    let rows = v["rows"].as_array().ok_or("exudyn.json: no rows")?;
    Ok(rows
        .iter()
        .filter(|r| r["problem"].as_str() == Some("slider_crank"))
        .map(|r| {
            (
                r["solver"].as_str().unwrap_or("?").to_string(),
                r["step_size"].as_f64().unwrap_or(f64::NAN),
                r["error"].as_f64().unwrap_or(f64::NAN),
                r["cpu"]["median_ms"].as_f64().unwrap_or(f64::NAN) * 1e-3,
                r["cpu"]["min_ms"].as_f64().unwrap_or(f64::NAN) * 1e-3,
                r["cpu"]["max_ms"].as_f64().unwrap_or(f64::NAN) * 1e-3,
            )
        })
        .collect())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let flag = |name: &str| args.iter().any(|a| a == name);
    let repeats: usize = opt("--repeats").map_or(3, |v| v.parse().expect("--repeats N"));
    let cases: Vec<String> = opt("--cases")
        .unwrap_or_else(|| "dp10,dp1,slider10,slider1,chain16".into())
        .split(',')
        .map(String::from)
        .collect();
    let methods: Vec<String> = opt("--methods")
        .unwrap_or_else(|| "bdf,sdirk,rosenbrock_nystrom,generalized_alpha,dopri5".into())
        .split(',')
        .map(String::from)
        .collect();
    let formulations: Vec<String> = opt("--formulations")
        .unwrap_or_else(|| "absolute,joint".into())
        .split(',')
        .map(String::from)
        .collect();
    // Only a run of the whole default set may replace the docs' section: a partial run
    // (one case, one method, no peers) once overwrote it with a single profiling row.
    let full_run = ["--cases", "--methods", "--formulations"]
        .iter()
        .all(|o| opt(o).is_none())
        && !["--no-eval", "--no-peers", "--no-exudyn"]
            .iter()
            .any(|f| flag(f));
    let print_only = flag("--print") || !full_run;
    if !full_run && !flag("--print") {
        eprintln!("a partial run (--cases/--methods/--formulations/--no-*): printing, not writing docs/benchmarks.md");
    }
    if let Some(n) = opt("--profile-eval") {
        // For `perf record`: only the joint formulation's evaluations, `n` times each.
        let only = opt("--profile-only");
        let alternate = flag("--profile-alternate");
        return profile_eval(
            n.parse().expect("--profile-eval N"),
            only.as_deref(),
            alternate,
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: String = load
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    let mut md = format!(
        "Run id `{}`, {} UTC, load average at start {load}; {repeats} run(s) per cell, thread \
         CPU; `cargo run --release --bin minimal_peers` in `benches/peers`.\n\n",
        std::env::var("BENCH_RUN_ID").unwrap_or_else(|_| "manual".into()),
        utc_now(),
    );
    if !flag("--no-eval") {
        eval_cost(&mut md);
    }
    for c in case_defs() {
        if !cases.iter().any(|k| k == c.key) {
            continue;
        }
        eprintln!("== {}", c.title);
        let rows = measure_case(&c, repeats, &methods, &formulations, !flag("--no-peers"));
        let best_peer = rows
            .iter()
            .filter(|r| r.solver.starts_with("CVODE") && r.error <= TARGET)
            .map(Measured::med)
            .fold(f64::INFINITY, f64::min);
        writeln!(
            md,
            "**{}** (error: {}; each solver at the loosest `rtol = atol` of 1e-3, 3e-4, … \
             with error ≤ 1e-4):\n\n| solver | tol | error | CPU ms median (min–max) | / best \
             CVODE | counts | note |\n|---|---|---|---|---|---|---|",
            c.title,
            match c.peer {
                Some(Model::DoublePendulum) => "max |θ1 − ref| on the 1 ms grid",
                Some(Model::Chain(_)) => "max tip |x − ref|, |y − ref| on the 0.1 s grid",
                None => "max |crank torque − ref| on the 10 ms grid from t = 0.1 s",
            }
        )
        .unwrap();
        for r in &rows {
            let (med, lo, hi) = median_min_max(&r.cpus);
            let line = format!(
                "| {} | {} | {:.1e} | {} ({}–{}) | {} | {} | {} |",
                r.solver,
                if r.tol.is_nan() {
                    "–".into()
                } else {
                    format!("{:.0e}", r.tol)
                },
                r.error,
                ms(med),
                ms(lo),
                ms(hi),
                if r.solver.starts_with("ours") && best_peer.is_finite() {
                    format!("{:.2}", med / best_peer)
                } else {
                    "–".into()
                },
                r.detail,
                r.note
            );
            eprintln!("{line}");
            md.push_str(&line);
            md.push('\n');
        }
        if c.key.starts_with("slider") && !flag("--no-exudyn") {
            match exudyn_slider(repeats) {
                Ok(ex) => {
                    for (solver, step, err, med, lo, hi) in ex {
                        if (step - c.h).abs() > 1e-12 {
                            continue;
                        }
                        let line = format!(
                            "| Exudyn {solver}, fixed step {} ms (whole span, no loop) | – | {err:.1e} | {} ({}–{}) | – | process CPU | |",
                            step * 1e3,
                            ms(med),
                            ms(lo),
                            ms(hi)
                        );
                        eprintln!("{line}");
                        md.push_str(&line);
                        md.push('\n');
                    }
                }
                Err(e) => {
                    eprintln!("Exudyn: {e}");
                    writeln!(md, "| Exudyn | – | – | – | – | – | not run: {e} |").unwrap();
                }
            }
        }
        md.push('\n');
    }
    if print_only {
        print!("{md}");
    } else if let Err(e) =
        report::replace_section(&root().join("docs/benchmarks.md"), "minimal_peers", &md)
    {
        eprintln!("{e}");
        print!("{md}");
    }
}

/// Seconds as milliseconds with three significant digits.
fn ms(s: f64) -> String {
    let m = s * 1e3;
    let d = if m >= 100.0 {
        0
    } else if m >= 10.0 {
        1
    } else if m >= 1.0 {
        2
    } else {
        3
    };
    format!("{m:.d$}")
}

fn utc_now() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}
