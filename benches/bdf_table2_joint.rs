//! Paper 003, Table 2 and Fig. 7 analogues in joint coordinates (issue 15): the chain of N
//! revolute pendulums (`chain_model::joint_chain_model_text`, n_y = 2N), t ∈ [0, 200] s,
//! ATOL 1e-6, RTOL 1e-4, BDF with dense / dense_extended / analytic / analytic_extended, the
//! excitation term of (26) judged automatically over the excitation jet (u, u̇, ü).
//!
//! ```text
//! cargo bench --bench bdf_table2_joint [-- N...]   # default N = 16 32 64; BENCH_RUNS (default 3)
//! ```
//!
//! Two suspensions: `translate` (paper 003's x = 2 + 0.3 sin ωt, y = 0.2 sin ωt, ω = 2π·0.05;
//! tip deviation against `tests/data/integrators/pendulum_chain_tip.csv`, scipy DOP853 1e-12)
//! and `tilt` (the same suspension carrying a rocker that tilts the chain's plane about x by
//! u = 0.5 sin ωt through a driven, eliminated revolute: u enters Ψ through gravity's direction;
//! tip deviation against the engine's own Dopri5 at RTOL 1e-10 in the same coordinates, an
//! independent method). Writes the section
//! `bdf_table2_joint` of docs/benchmarks.md and, at N = 16, the Fig. 7 analogue
//! docs/bdf_fig7_joint.svg (instants of full Jacobians and of cheap updates against the
//! excitation, dense above dense_extended, both suspensions).

#[path = "common/chain_model.rs"]
mod chain_model;
#[path = "common/report.rs"]
mod report;

use mbsfmu::integrate::bdf::Bdf;
use mbsfmu::integrate::explicit::Dopri5;
use mbsfmu::integrate::system::Mechanical;
use mbsfmu::integrate::{Integrator, JacobianStrategy, MechState, Settings, Stats};
use mbsfmu::mbs::load_model_str;
use mbsfmu::mbs::system::System;
use mbsfmu::mbs::ModelSpec;
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

const T_END: f64 = 200.0;
const OMEGA: f64 = 2.0 * std::f64::consts::PI * 0.05;

#[derive(Clone, Copy, PartialEq)]
enum Event {
    Full,
    /// A cheap update with the excitation term of (26) active.
    Update26,
    /// A cheap update without it (the partitioned update (24)).
    Update24,
}

struct Run {
    cpu: f64,
    stats: Stats,
    dev: f64,
    updates26: u64,
    term_at_end: bool,
    events: Vec<(f64, Event)>,
    error: Option<String>,
}

fn spec(n: usize, tilt: bool) -> Arc<ModelSpec> {
    let suspension = if tilt {
        chain_model::Suspension::Tilt
    } else {
        chain_model::Suspension::Sine
    };
    let text = chain_model::joint_chain_model_text(n, suspension);
    Arc::new(load_model_str(&text, Path::new("pendulum_chain_joint.toml")).expect("model loads"))
}

/// Tip (x, y) on the 0.5 s grid: from the csv (translating suspension) or from Dopri5 at
/// RTOL 1e-10 (tilting suspension).
fn reference(spec: &Arc<ModelSpec>, n: usize, tilt: bool) -> Vec<(f64, [f64; 2])> {
    let grid: Vec<f64> = (0..=400).map(|k| 0.5 * k as f64).collect();
    if !tilt {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/integrators/pendulum_chain_tip.csv"
        );
        let text = std::fs::read_to_string(path).expect("reference csv");
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let ix = header
            .iter()
            .position(|h| *h == format!("x{n}"))
            .unwrap_or_else(|| panic!("no column x{n} in {path}"));
        return lines
            .map(|l| {
                let v: Vec<f64> = l.split(',').map(|s| s.trim().parse().unwrap()).collect();
                (v[0], [v[ix], v[ix + 1]])
            })
            .collect();
    }
    let mut sys = System::new(spec.clone()).unwrap();
    let x0 = sys.initial_state(0.0).unwrap();
    let settings = Settings {
        rtol: 1e-10,
        atol: 1e-12,
        ..Settings::default()
    };
    let mut dp = Dopri5::new(settings, sys.n_q(), sys.n_c());
    dp.initialize(&mut sys, &x0).unwrap();
    let mut y = vec![0.0; 2];
    let mut out = Vec::new();
    for &tg in &grid {
        while Integrator::<System>::state(&dp).t < tg {
            dp.step(&mut sys, tg).expect("reference run");
        }
        sys.evaluate_outputs(Integrator::<System>::state(&dp), &mut y)
            .unwrap();
        out.push((tg, [y[0], y[1]]));
    }
    out
}

/// One run; `force26`: the excitation term of (26) on from the start and kept on (paper 003's
/// method as published: second derivatives once per full evaluation, never judged).
fn run(
    spec: &Arc<ModelSpec>,
    strategy: JacobianStrategy,
    force26: bool,
    refs: &[(f64, [f64; 2])],
) -> Run {
    let mut sys = System::new(spec.clone()).unwrap();
    let x0 = sys.initial_state(0.0).unwrap();
    let settings = Settings {
        jacobian: strategy,
        rtol: 1e-4,
        atol: 1e-6,
        ..Settings::default()
    };
    let (nq, nc) = (sys.n_q(), sys.n_c());
    let mut bdf = Bdf::new(settings, nq, nc);
    let (mut q, mut v, mut y) = (vec![0.0; nq], vec![0.0; nq], vec![0.0; 2]);
    let (mut next, mut dev, mut updates26) = (1, 0.0f64, 0);
    let mut events = Vec::new();
    let start = report::thread_cpu_time();
    let mut error = bdf.initialize(&mut sys, &x0).err().map(|e| e.to_string());
    // After `initialize`, which builds a fresh store.
    if force26 {
        bdf.jacobian_mut().auto_excitation_term = false;
        bdf.jacobian_mut().set_excitation_term(true);
    }
    while error.is_none() && bdf.state().t < T_END {
        let (je, ju) = (bdf.stats().jac_evals, bdf.stats().jac_updates);
        match bdf.step(&mut sys, T_END) {
            Ok(t) => {
                let s = bdf.stats();
                for _ in je..s.jac_evals {
                    events.push((t, Event::Full));
                }
                let term = bdf.jacobian().excitation_term_active();
                for _ in ju..s.jac_updates {
                    events.push((
                        t,
                        if term {
                            Event::Update26
                        } else {
                            Event::Update24
                        },
                    ));
                    updates26 += u64::from(term);
                }
                while next < refs.len() && refs[next].0 <= t {
                    bdf.interpolate(refs[next].0, &mut q, &mut v);
                    let x = MechState {
                        t: refs[next].0,
                        q: q.clone(),
                        v: v.clone(),
                        lambda: vec![],
                    };
                    sys.evaluate_outputs(&x, &mut y).unwrap();
                    for (a, b) in y.iter().zip(&refs[next].1) {
                        dev = dev.max((a - b).abs());
                    }
                    next += 1;
                }
            }
            Err(e) => error = Some(e.to_string()),
        }
    }
    let cpu = report::thread_cpu_time() - start;
    Run {
        cpu,
        stats: *bdf.stats(),
        dev,
        updates26,
        term_at_end: bdf.jacobian().excitation_term_active(),
        events,
        error,
    }
}

/// Fig. 7 analogue: per suspension, dense above dense_extended; the excitation (suspension x
/// offset, or the tilt angle) over t, full Jacobians as red lines over the full height, cheap
/// updates as short lines at the bottom (blue with the (26) term, grey without).
/// One panel of the figure: title, tilting suspension, instants of Jacobian events.
type Panel = (String, bool, Vec<(f64, Event)>);

fn figure(path: &Path, panels: &[Panel]) -> Result<(), String> {
    let root = SVGBackend::new(path, (900, 260 * panels.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let areas = root.split_evenly((panels.len(), 1));
    for ((title, tilt, events), area) in panels.iter().zip(areas.iter()) {
        let amp = if *tilt { 0.5 } else { 0.3 };
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..T_END, -1.2 * amp..1.2 * amp)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("t [s]")
            .y_desc(if *tilt {
                "tilt u [rad]"
            } else {
                "x_susp - 2 [m]"
            })
            .disable_mesh()
            .draw()
            .map_err(|e| e.to_string())?;
        let (lo, hi) = (-1.2 * amp, 1.2 * amp);
        for &(t, e) in events {
            let (top, style) = match e {
                Event::Full => (hi, RED.stroke_width(2)),
                Event::Update26 => (lo + 0.5 * amp, BLUE.stroke_width(1)),
                Event::Update24 => (lo + 0.3 * amp, RGBColor(150, 150, 150).stroke_width(1)),
            };
            chart
                .draw_series(LineSeries::new([(t, lo), (t, top)], style))
                .map_err(|e| e.to_string())?;
        }
        chart
            .draw_series(LineSeries::new(
                (0..=2000).map(|k| {
                    let t = T_END * k as f64 / 2000.0;
                    (t, amp * (OMEGA * t).sin())
                }),
                BLACK.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())
}

fn main() {
    let ns: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let ns = if ns.is_empty() { vec![16, 32, 64] } else { ns };
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
        .max(1);
    // (strategy, (26) term forced on)
    let configs = [
        (JacobianStrategy::Dense, false),
        (JacobianStrategy::DenseExtended, false),
        (JacobianStrategy::DenseExtended, true),
        (JacobianStrategy::Analytic, false),
        (JacobianStrategy::AnalyticExtended, false),
    ];
    let mut md = String::new();
    writeln!(
        md,
        "`cargo bench --bench bdf_table2_joint` (benches/bdf_table2_joint.rs; N = {ns:?}; {runs} timed runs per cell, \
         one program run; machine shared with other jobs). Chain of N revolute pendulums in joint coordinates \
         (n_y = 2N), t in [0, 200] s, ATOL 1e-6, RTOL 1e-4, the (26) term judged automatically over the \
         excitation jet (u, u', u''). CPU: thread CPU seconds, median (min-max). #Je: full Jacobians; \
         #upd (26): cheap updates with the excitation term active; #upd (24): without it. Tip dev: max |tip - reference| \
         over the 0.5 s grid (translate: scipy DOP853 1e-12; tilt: the engine's Dopri5 at RTOL 1e-10).\n"
    )
    .unwrap();
    writeln!(md, "| suspension | N | strategy | CPU [s] | % of dense | #Je | Je ratio | #upd (26) | #upd (24) | steps | #fc | #LU | tip dev [m] | (26) at end |").unwrap();
    writeln!(
        md,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    .unwrap();
    print!("{md}");
    let mut verdicts = String::new();
    let mut panels = Vec::new();
    for tilt in [false, true] {
        let name = if tilt { "tilt" } else { "translate" };
        for &n in &ns {
            let spec = spec(n, tilt);
            let refs = reference(&spec, n, tilt);
            let mut dense: Option<(f64, u64)> = None;
            for (strategy, force26) in configs {
                let label = if force26 {
                    format!("{} (26) on", strategy.name())
                } else {
                    strategy.name().to_string()
                };
                let mut cells: Vec<Run> = (0..runs)
                    .map(|_| run(&spec, strategy, force26, &refs))
                    .collect();
                let cpus: Vec<f64> = cells.iter().map(|c| c.cpu).collect();
                let (med, lo, hi) = report::median_min_max(&cpus);
                cells.sort_by(|a, b| a.cpu.total_cmp(&b.cpu));
                let c = cells.swap_remove(cells.len() / 2);
                let s = c.stats;
                let (dcpu, dje) = *dense.get_or_insert((med, s.jac_evals));
                let row = format!(
                    "| {name} | {n} | {label} | {med:.3} ({lo:.3}-{hi:.3}) | {:.0}% | {} | {:.2} | {} | {} | {} | {} | {} | {:.1e}{} | {} |\n",
                    100.0 * med / dcpu,
                    s.jac_evals,
                    s.jac_evals as f64 / dje as f64,
                    c.updates26,
                    s.jac_updates - c.updates26,
                    s.steps,
                    s.f_evals,
                    s.lu,
                    c.dev,
                    c.error.as_ref().map_or(String::new(), |e| format!(" (failed: {e})")),
                    if c.term_at_end { "on" } else { "off" },
                );
                print!("{row}");
                md.push_str(&row);
                if strategy == JacobianStrategy::DenseExtended {
                    let ratio = s.jac_evals as f64 / dje as f64;
                    let pct = 100.0 * med / dcpu;
                    writeln!(
                        verdicts,
                        "- {name}, N = {n}, {label}: #Je {} vs {dje} (ratio {ratio:.2}, target <= 0.20: {}); CPU {pct:.0}% of dense (target <= 60%: {}).",
                        s.jac_evals,
                        if ratio <= 0.2 { "met" } else { "missed" },
                        if pct <= 60.0 { "met" } else { "missed" },
                    )
                    .unwrap();
                }
                if n == 16
                    && matches!(
                        strategy,
                        JacobianStrategy::Dense | JacobianStrategy::DenseExtended
                    )
                {
                    panels.push((
                        format!(
                            "{name}, N = 16, {label}: #Je = {}, updates (26) = {}, (24) = {}",
                            s.jac_evals,
                            c.updates26,
                            s.jac_updates - c.updates26
                        ),
                        tilt,
                        c.events,
                    ));
                }
            }
        }
    }
    md.push_str("\nTargets (issue 15, dense_extended against dense):\n\n");
    md.push_str(&verdicts);
    print!("\n{verdicts}");
    if !panels.is_empty() {
        let svg = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/bdf_fig7_joint.svg");
        match figure(&svg, &panels) {
            Ok(()) => println!("wrote {}", svg.display()),
            Err(e) => eprintln!("figure: {e}"),
        }
    }
    if let Err(e) = report::replace_section(&report::benchmarks_md(), "bdf_table2_joint", &md) {
        eprintln!("{e}");
    }
}
