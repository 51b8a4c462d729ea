//! The BDF Jacobian strategies on the test-rig case: `models/quarter_car_rig.toml` with the
//! stamp driven by a built-in sine, z = 0.01 sin(2π·1.5 t), from static equilibrium, t ∈ [0, 5] s,
//! at the model's own tolerances (RTOL 1e-5, ATOL 1e-8) and at paper 003's vehicle tolerances
//! (RTOL 1e-4, ATOL 1e-5, its Table 3).
//!
//! ```text
//! cargo bench --bench bdf_quarter_car
//! BENCH_RUNS=7 cargo bench --bench bdf_quarter_car    # timed runs per cell (default 5)
//! ```
//!
//! The model text is the file's, with the `stamp_z` input removed and the stamp driver's
//! `{ input = "stamp_z" }` replaced by `{ type = "sine", amplitude = 0.01, frequency = 1.5 }`.
//! The error is the largest deviation of chassis and wheel height from the exact linear
//! solution `tests/data/quarter_car.csv` (`tools/references/quarter_car.py`: same excitation,
//! same equilibrium start, matrix exponential) on its 0.01 s grid. Writes the generated section
//! `bdf_quarter_car` of `docs/benchmarks.md`.

#[path = "common/bdf_run.rs"]
mod bdf_run;
#[path = "common/report.rs"]
mod report;

use bdf_run::{run, Reference, Run};
use mbsfmu::integrate::JacobianStrategy;
use mbsfmu::mbs::load_model_str;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

const MOTION: &str = "motion = { type = \"sine\", amplitude = 0.01, frequency = 1.5 }";

/// The model file with the stamp driven by the built-in sine.
fn model_text() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/models/quarter_car_rig.toml");
    let text = std::fs::read_to_string(path).expect("models/quarter_car_rig.toml");
    let input = "[[inputs]]\nname = \"stamp_z\"";
    let start = text.find(input).expect("the stamp_z input block");
    let end = start + text[start..].find("\n\n").expect("end of the input block") + 2;
    let mut out = format!("{}{}", &text[..start], &text[end..]);
    let driven = "motion = { input = \"stamp_z\" }";
    assert!(out.contains(driven), "the stamp driver is input-fed");
    out = out.replace(driven, MOTION);
    out
}

fn reference() -> Reference {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/quarter_car.csv");
    let text = std::fs::read_to_string(path).expect("tests/data/quarter_car.csv");
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| h.trim() == name).unwrap();
    let (ic, iw) = (col("chassis_z"), col("wheel_z"));
    let (mut t, mut values) = (Vec::new(), Vec::new());
    for l in lines {
        let v: Vec<f64> = l.split(',').map(|s| s.trim().parse().unwrap()).collect();
        t.push(v[0]);
        values.push(vec![v[ic], v[iw]]);
    }
    Reference { t, values }
}

fn main() {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
        .max(1);
    let text = model_text();
    let spec =
        Arc::new(load_model_str(&text, Path::new("quarter_car_rig_sine.toml")).expect("loads"));
    let refs = reference();
    let t_end = *refs.t.last().unwrap();
    let (ic, iw) = {
        let sys = mbsfmu::mbs::system::System::new(spec.clone()).unwrap();
        let names: Vec<&str> = spec.bodies.iter().map(|b| b.name.as_str()).collect();
        let at = |n: &str| sys.layout().offsets[names.iter().position(|b| *b == n).unwrap()] + 2;
        (at("chassis"), at("wheel"))
    };
    let pick = move |q: &[f64], out: &mut Vec<f64>| {
        out.clear();
        out.push(q[ic]);
        out.push(q[iw]);
    };
    let mut md = String::new();
    writeln!(
        md,
        "`cargo bench --bench bdf_quarter_car` (benches/bdf_quarter_car.rs; {runs} timed runs per cell; machine \
         shared with other jobs). `models/quarter_car_rig.toml` with the stamp driven by the built-in \
         `0.01 sin(2 pi 1.5 t)` (in place of the `stamp_z` input), from static equilibrium, t in [0, {t_end}] s; \
         rigid bodies with Euler parameters: n_y = {}. CPU: thread CPU milliseconds, median (min-max). \
         Error: max |chassis_z|, |wheel_z| deviation from the exact linear solution (tests/data/quarter_car.csv) \
         on its 0.01 s grid. Breakdown from one extra run with counters: residuals / Jacobians without LU / \
         LU / back-substitutions, percent of the BDF time.\n",
        2 * spec_nq(&spec) + 2 * spec_nc(&spec),
    )
    .unwrap();
    writeln!(md, "| RTOL / ATOL | strategy | CPU [ms] | % of dense | steps | rej | #fc | #fcw | #Je | #upd | #LU | Newton it | error [m] | res / Jac / LU / solve |").unwrap();
    writeln!(
        md,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    .unwrap();
    print!("{md}");
    for (rtol, atol) in [(1e-5, 1e-8), (1e-4, 1e-5)] {
        let mut dense_cpu = None;
        for strategy in JacobianStrategy::ALL {
            let cells: Vec<Run> = (0..runs)
                .map(|_| run(&spec, strategy, rtol, atol, t_end, &refs, &pick, false))
                .collect();
            let cpus: Vec<f64> = cells.iter().map(|c| 1e3 * c.cpu).collect();
            let (med, lo, hi) = report::median_min_max(&cpus);
            let dense = *dense_cpu.get_or_insert(med);
            let c = &cells[0];
            let s = c.stats;
            let p = run(&spec, strategy, rtol, atol, t_end, &refs, &pick, true).profile;
            let pct = |x: f64| 100.0 * x / p.total;
            let row = format!(
                "| {rtol:.0e} / {atol:.0e} | {} | {med:.1} ({lo:.1}-{hi:.1}) | {:.0}% | {} | {} | {} | {} | {} | {} | {} | {} | {:.1e}{} | {:.0} / {:.0} / {:.0} / {:.0} % |\n",
                strategy.name(),
                100.0 * med / dense,
                s.steps,
                s.rejected_steps,
                s.f_evals,
                s.f_evals_without_jacobian(),
                s.jac_evals,
                s.jac_updates,
                s.lu,
                s.newton_iters,
                c.dev,
                c.error.as_ref().map_or(String::new(), |e| format!(" (failed: {e})")),
                pct(p.residual),
                pct(p.jacobian),
                pct(p.lu),
                pct(p.solve),
            );
            print!("{row}");
            md.push_str(&row);
        }
    }
    if let Err(e) = report::replace_section(&report::benchmarks_md(), "bdf_quarter_car", &md) {
        eprintln!("{e}");
    }
}

fn spec_nq(spec: &Arc<mbsfmu::mbs::ModelSpec>) -> usize {
    mbsfmu::mbs::system::System::new(spec.clone())
        .unwrap()
        .layout()
        .n_q
}

fn spec_nc(spec: &Arc<mbsfmu::mbs::ModelSpec>) -> usize {
    let mut sys = mbsfmu::mbs::system::System::new(spec.clone()).unwrap();
    sys.initial_state(0.0).unwrap();
    sys.active_rows()
}
