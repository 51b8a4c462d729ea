//! The test-rig benchmark (issue 12): the FMU driven through its FMI 2 C ABI the way a rig
//! master drives it: `libmbsfmu.so` loaded with dlopen, one instance per run, a `fmi2DoStep`
//! loop at a fixed communication step with the input sampled and set (`fmi2SetReal`) before
//! every step, no input derivatives. Every integrator on
//! 1. a suspension corner on a post driven by a seeded random road sampled at 1 ms for 10 s
//!    (models/suspension_corner.toml when present, else the quarter-car rig),
//! 2. the pendulum chain N = 16 through its two suspension inputs at H = 1 ms for 20 s,
//! 3. the slider-crank, crank angle 2π t, at H = 1 ms for 8 s.
//!
//! Per run: the thread CPU time of the whole master loop (instantiate to free), the FMU's
//! statistics, the error against the independent reference where one exists, the real-time
//! factor (simulated time / CPU time). Medians with min and max over `BENCH_REPEATS` runs
//! (default 3; one run when a run takes longer than 20 s). A run is stopped after 30 s of CPU.
//!
//! Run: `cargo build --release --lib && cargo bench --bench rig` (writes the `rig` section of
//! docs/benchmarks.md); `BENCH_QUICK=1` runs 2 s of each case; `BENCH_METHODS=bdf,sdirk` and
//! `BENCH_CASES=chain,slider` select (and then print instead of writing the docs).
//! `BENCH_CORNER_REFERENCE=1` gives the corner an error column (against the same rig loop run
//! by dopri5 at rtol 1e-10, computed first); `BENCH_CORNER_FORMULATION=absolute` (or `joint`)
//! runs the corner in that formulation instead of the model file's (the default, joint).

#![allow(clippy::missing_safety_doc)]

#[path = "common/chain_model.rs"]
mod chain_model;
#[path = "common/fmi2_master.rs"]
mod fmi2_master;
#[path = "common/report.rs"]
mod report;

use fmi2_master::{run_once, Case, Reference, RunOut, Unpacked};
use fmi_sys::fmi2::*;
use report::{benchmarks_md, median_min_max, replace_section};
use std::path::Path;

/// A reference table of `tests/data`.
fn table(file: &str, cols: &[&str]) -> Reference {
    fmi2_master::table(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(file),
        cols,
    )
}

/// A seeded random road: a sum of sines with random phases over 0.5–20 Hz, amplitude falling
/// like 1/f (an ISO 8608 class-B-like profile at about 50 km/h), about 12 mm RMS, sampled
/// with 0.1 mm measurement noise.
fn road() -> Box<dyn Fn(f64) -> Vec<f64>> {
    let mut seed = 0x9E3779B97F4A7C15u64;
    let mut uniform = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let comps: Vec<(f64, f64, f64)> = (0..40)
        .map(|k| {
            let f = 0.5 * (40.0f64).powf(k as f64 / 39.0);
            (
                f,
                0.006 / f.sqrt() / (1.0 + f / 10.0),
                2.0 * std::f64::consts::PI * uniform(),
            )
        })
        .collect();
    let noise: Vec<f64> = (0..20_001)
        .map(|_| 1e-4 * ((0..12).map(|_| uniform()).sum::<f64>() - 6.0))
        .collect();
    Box::new(move |t: f64| {
        let k = ((t / 1e-3).round() as usize).min(noise.len() - 1);
        let z: f64 = comps
            .iter()
            .map(|(f, a, p)| a * (2.0 * std::f64::consts::PI * f * t + p).sin())
            .sum();
        vec![z + noise[k]]
    })
}

/// The corner's reference (`BENCH_CORNER_REFERENCE=1`): the same rig loop (same samples, same
/// reconstruction, so the same problem) with dopri5 at rtol 1e-10, atol 1e-12; `chassis_z` and
/// `wheel_z` after every communication step.
fn corner_reference(f: &Fmi2Binding, case: &Case) -> Reference {
    let u = Unpacked::new("corner_reference", &case.model);
    let dopri5 = 1 + mbsfmu::integrate::Method::ALL
        .iter()
        .position(|m| *m == mbsfmu::integrate::Method::Dopri5)
        .unwrap() as i32;
    let tight = Case {
        name: "corner reference",
        model: case.model.clone(),
        h: case.h,
        t_end: case.t_end,
        inputs: case.inputs.clone(),
        signal: road(),
        outputs: case.outputs.clone(),
        reference: None,
        rtol: 1e-10,
        atol: Some(1e-12),
    };
    let mut rec = Vec::new();
    let r = fmi2_master::run_recording(f, &u, &tight, dopri5, None, Some(&mut rec));
    eprintln!(
        "corner reference: dopri5 rtol 1e-10, {} steps, {:.1} s CPU{}",
        r.stats[0],
        r.cpu,
        r.message.map_or(String::new(), |m| format!(", {m}"))
    );
    let h = case.h;
    Box::new(move |t: f64| {
        let k = (t / h).round() as usize;
        k.checked_sub(1).and_then(|i| rec.get(i).cloned())
    })
}

fn cases(quick: bool) -> Vec<Case> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let corner = root.join("models/suspension_corner.toml");
    // `BENCH_CORNER_FORMULATION=absolute|joint`: the corner in that formulation (unset: the
    // model file's, i.e. the default, joint).
    let formulation = std::env::var("BENCH_CORNER_FORMULATION").ok();
    let (corner_model, corner_input) = if corner.is_file() {
        let text = std::fs::read_to_string(&corner).unwrap();
        let text = match formulation {
            Some(f) => text.replacen("[model]\n", &format!("[model]\nformulation = \"{f}\"\n"), 1),
            None => text,
        };
        (text, "post_z")
    } else {
        (
            std::fs::read_to_string(root.join("models/quarter_car_rig.toml")).unwrap(),
            "stamp_z",
        )
    };
    let horizon = |t: f64| if quick { t.min(2.0) } else { t };
    let w = 2.0 * std::f64::consts::PI * 0.05;
    vec![
        Case {
            name: if corner.is_file() {
                "corner"
            } else {
                "quarter car"
            },
            model: corner_model,
            h: 1e-3,
            t_end: horizon(10.0),
            inputs: vec![corner_input],
            signal: road(),
            outputs: if corner.is_file() {
                vec!["chassis_z", "wheel_z"]
            } else {
                vec![]
            },
            reference: None,
            rtol: 1e-4,
            atol: None,
        },
        Case {
            name: "chain N=16",
            model: std::fs::read_to_string(root.join("models/pendulum_chain.toml")).unwrap(),
            h: 1e-3,
            t_end: horizon(20.0),
            inputs: vec!["susp_x", "susp_y"],
            signal: Box::new(move |t| vec![2.0 + 0.3 * (w * t).sin(), 0.2 * (w * t).sin()]),
            outputs: vec!["tip_x", "tip_y"],
            reference: Some(table(
                "pendulum_chain_n16_projected.csv",
                &["tip_x", "tip_y"],
            )),
            rtol: 1e-4,
            atol: None,
        },
        Case {
            name: "slider-crank",
            model: std::fs::read_to_string(root.join("models/slider_crank.toml")).unwrap(),
            h: 1e-3,
            t_end: horizon(8.0),
            inputs: vec!["crank_angle"],
            signal: Box::new(|t| vec![2.0 * std::f64::consts::PI * t]),
            outputs: vec!["slider_x"],
            reference: Some(table("slider_crank.csv", &["slider_x"])),
            rtol: 1e-5,
            atol: None,
        },
    ]
}

/// Paper 003's Jacobian reuse through the FMU: the chain N = 16 with smooth suspension inputs
/// (sampled, default reconstruction) at H = 0.05 s for 60 s, BDF with `dense` and
/// `dense_extended`; full Jacobians and `stats.cpu_time` (thread CPU inside doStep).
/// `BENCH_PAPER003_FORMULATION=joint`: the chain as N revolute pendulums in joint coordinates
/// (`chain_model::joint_chain_model_text` with input-fed suspension), where the (26) term acts
/// over the excitation jet.
fn paper003(f: &Fmi2Binding, quick: bool, repeats: usize) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let w = 2.0 * std::f64::consts::PI * 0.05;
    let joint = std::env::var("BENCH_PAPER003_FORMULATION").is_ok_and(|v| v == "joint");
    let case = Case {
        name: if joint {
            "chain N=16 in joint coordinates, H = 0.05 s"
        } else {
            "chain N=16, H = 0.05 s"
        },
        model: if joint {
            chain_model::joint_chain_model_text(16, chain_model::Suspension::Inputs)
        } else {
            std::fs::read_to_string(root.join("models/pendulum_chain.toml")).unwrap()
        },
        h: 0.05,
        t_end: if quick { 10.0 } else { 60.0 },
        inputs: vec!["susp_x", "susp_y"],
        signal: Box::new(move |t| vec![2.0 + 0.3 * (w * t).sin(), 0.2 * (w * t).sin()]),
        outputs: vec!["tip_x", "tip_y"],
        reference: Some(table(
            "pendulum_chain_n16_projected.csv",
            &["tip_x", "tip_y"],
        )),
        rtol: 1e-4,
        atol: None,
    };
    let u = Unpacked::new("paper003", &case.model);
    let bdf = 1 + mbsfmu::integrate::Method::ALL
        .iter()
        .position(|m| *m == mbsfmu::integrate::Method::Bdf)
        .unwrap() as i32;
    let mut md = format!(
        "**Paper 003 through the FMU**: {}, {} s, BDF rtol {}, sampled inputs:\n\n| Jacobian \
         | stats.cpu_time s median (min–max) | full Jacobians | updates | LU | steps | restarts \
         | max error |\n|---|---|---|---|---|---|---|---|\n",
        case.name, case.t_end, case.rtol
    );
    let mut rows = Vec::new();
    for strategy in [
        mbsfmu::integrate::JacobianStrategy::Dense,
        mbsfmu::integrate::JacobianStrategy::DenseExtended,
    ] {
        let item = 1 + mbsfmu::integrate::JacobianStrategy::ALL
            .iter()
            .position(|j| *j == strategy)
            .unwrap() as i32;
        let runs: Vec<RunOut> = (0..repeats)
            .map(|_| run_once(f, &u, &case, bdf, Some(item)))
            .collect();
        let cpus: Vec<f64> = runs.iter().map(|r| r.fmu_cpu).collect();
        let (med, lo, hi) = median_min_max(&cpus);
        let r = runs.last().unwrap();
        let line = format!(
            "| {} | {:.3} ({:.3}–{:.3}) | {} | {} | {} | {} | {} | {} |\n",
            strategy.name(),
            med,
            lo,
            hi,
            r.stats[2],
            r.stats[3],
            r.stats[4],
            r.stats[0],
            r.stats[5],
            r.error.map_or("–".into(), |e| format!("{e:.1e}")),
        );
        eprint!("paper003: {line}");
        md.push_str(&line);
        rows.push((med, r.stats[2]));
    }
    md.push_str(&format!(
        "\ndense_extended / dense: full Jacobians {:.2}, CPU {:.0} % (targets ≤ 0.2 and ≤ 60 %).\n\n",
        rows[1].1 as f64 / rows[0].1.max(1) as f64,
        100.0 * rows[1].0 / rows[0].0
    ));
    md
}

fn main() {
    let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| v == "1");
    let repeats: usize = std::env::var("BENCH_REPEATS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 1 } else { 3 });
    let only: Option<Vec<String>> = std::env::var("BENCH_METHODS")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect());
    let f = fmi2_master::load();
    let mut md = String::new();
    md.push_str(&format!(
        "Run id `{}`; {} run(s) per cell (median, min–max of thread CPU time of the whole \
         master loop); `cargo bench --bench rig`.\n\n",
        std::env::var("BENCH_RUN_ID").unwrap_or_else(|_| "manual".into()),
        repeats
    ));
    let only_cases: Option<Vec<String>> = std::env::var("BENCH_CASES")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect());
    for mut case in cases(quick) {
        if let Some(o) = &only_cases {
            if !o.iter().any(|x| case.name.starts_with(x.as_str())) {
                continue;
            }
        }
        if case.name == "corner" && std::env::var("BENCH_CORNER_REFERENCE").is_ok_and(|v| v == "1")
        {
            case.reference = Some(corner_reference(&f, &case));
        }
        let u = Unpacked::new(&case.name.replace([' ', '='], "_"), &case.model);
        md.push_str(&format!(
            "**{}**, H = {} ms, {} s, rtol {}:\n\n| integrator | CPU s median (min–max) | \
             real-time factor | steps | rejected | Jacobians | updates | LU | Jacobians per \
             comm. step | restarts | max error | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
            case.name,
            case.h * 1e3,
            case.t_end,
            case.rtol
        ));
        for (k, m) in mbsfmu::integrate::Method::ALL.iter().enumerate() {
            if let Some(o) = &only {
                if !o.iter().any(|x| x == m.name()) {
                    continue;
                }
            }
            let mut cpus = Vec::new();
            let mut last = None;
            for _ in 0..repeats {
                let r = run_once(&f, &u, &case, k as i32 + 1, None);
                cpus.push(r.cpu);
                let slow = r.cpu > 20.0 || r.message.is_some();
                last = Some(r);
                if slow {
                    break;
                }
            }
            let r = last.unwrap();
            let (med, lo, hi) = median_min_max(&cpus);
            let n_comm = (r.t_reached / case.h).round().max(1.0);
            let line = format!(
                "| {} | {:.3} ({:.3}–{:.3}) | {:.2} | {} | {} | {} | {} | {} | {:.3} | {} | {} | {} |\n",
                m.name(),
                med,
                lo,
                hi,
                r.t_reached / med,
                r.stats[0],
                r.stats[1],
                r.stats[2],
                r.stats[3],
                r.stats[4],
                r.stats[2] as f64 / n_comm,
                r.stats[5],
                r.error.map_or("–".into(), |e| format!("{e:.1e}")),
                r.message.clone().unwrap_or_default()
            );
            eprint!("{}: {line}", case.name);
            md.push_str(&line);
        }
        md.push('\n');
    }
    if only_cases.is_none()
        || only_cases
            .as_ref()
            .is_some_and(|o| o.iter().any(|x| x == "paper003"))
    {
        md.push_str(&paper003(&f, quick, repeats));
    }
    if !quick && only.is_none() && only_cases.is_none() {
        if let Err(e) = replace_section(&benchmarks_md(), "rig", &md) {
            eprintln!("{e}");
        }
    } else {
        print!("{md}");
    }
}
