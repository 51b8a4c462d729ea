//! Issue 4's matrix: every integrator on every model with an independent reference, at a matched
//! accuracy. For each (model, method) the tolerance (`rtol = atol = tol`) is swept over
//! half-decades from loose to tight; the first (cheapest) setting whose error against the
//! reference is at most the model's target is kept, and is rerun a few times for the CPU time.
//!
//! ```text
//! cargo bench --bench suite_matrix              # all models, ≈ 6 min CPU (wall more on a loaded machine)
//! cargo bench --bench suite_matrix -- --quick   # 3 timing runs, smaller time budget per run
//! cargo bench --bench suite_matrix -- double_pendulum_stiff quarter_car   # some models only
//! cargo bench --bench suite_matrix -- --formulation=joint --methods=bdf,dopri5   # partial run
//! ```
//!
//! CPU time is this thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) of initialisation plus the
//! run to the horizon (outputs evaluated at every sample point), so other load on the machine
//! only counts through caches. References (tests/data, tools/references/README.md) are
//! independent of the engine: scipy solutions at 1e-12 in minimal coordinates (or, for the
//! spherical chain, in the bar axes), closed-form kinematics, or exact linear solutions.
//! Writes the `suite_matrix` section of docs/benchmarks.md (only when every model ran).

#[path = "common/report.rs"]
mod report;

use mbsfmu::integrate::any::AnyIntegrator;
use mbsfmu::integrate::{Integrator, Method, Settings, Stats};
use mbsfmu::mbs::inputs::InputSegment;
use mbsfmu::mbs::system::System;
use std::f64::consts::PI;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

/// A reference table: the `t` column and the named columns.
struct RefTable {
    header: Vec<String>,
    rows: Vec<Vec<f64>>,
}

impl RefTable {
    fn load(name: &str) -> RefTable {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut lines = text.lines().filter(|l| !l.starts_with('#'));
        let header = lines
            .next()
            .expect("header line")
            .split(',')
            .map(|s| s.trim().to_string())
            .collect();
        let rows = lines
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.split(',').map(|x| x.trim().parse().unwrap()).collect())
            .collect();
        RefTable { header, rows }
    }

    fn col(&self, name: &str) -> usize {
        self.header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    }

    /// Value of column `c` at `t`, which must be a sample time of the table.
    fn at(&self, c: usize, t: f64) -> f64 {
        let dt = self.rows[1][0] - self.rows[0][0];
        let i = ((t - self.rows[0][0]) / dt).round() as usize;
        let row = &self.rows[i];
        assert!((row[0] - t).abs() < 1e-9, "t = {t} is not a sample time");
        row[c]
    }
}

/// A driving input `u(t)`, `u'(t)` given in closed form.
type Drive = fn(f64) -> (f64, f64);

/// One model of the matrix.
struct Case {
    name: &'static str,
    file: &'static str,
    reference: &'static str,
    horizon: f64,
    /// Spacing of the output samples (a multiple of the reference's spacing).
    dt: f64,
    /// Outputs compared with the reference column of the same name.
    outputs: &'static [&'static str],
    /// Divides the error: `Some(s)` a fixed scale, `None` the largest |reference value|.
    scale: Option<f64>,
    error_text: &'static str,
    /// Inputs in model order, each given in closed form (cubic Hermite segment per sample
    /// interval: value and slope continuous, so the state stays consistent).
    drives: &'static [Drive],
    /// `max_step` for the local linearization (the only per-method setting): it is exact inside
    /// a linear contact mode, so without a bound below the shortest contact a step can carry a
    /// ball through a whole contact (or through the other ball), which no estimate at the step
    /// ends sees (docs/integrators.md).
    ll_max_step: Option<f64>,
}

const TARGET: f64 = 1e-4;

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "double_pendulum_stiff",
            file: "double_pendulum_stiff.toml",
            reference: "double_pendulum_stiff.csv",
            horizon: 2.0,
            dt: 0.02,
            outputs: &["theta1"],
            scale: Some(1.0),
            error_text:
                "max |Δθ1| [rad] every 0.02 s over 2 s (Radau 1e-12 in minimal coordinates)",
            drives: &[],
            ll_max_step: None,
        },
        Case {
            name: "slider_crank",
            file: "slider_crank.toml",
            reference: "slider_crank.csv",
            horizon: 2.0,
            dt: 0.01,
            outputs: &["crank_torque"],
            scale: None,
            error_text:
                "max |Δ crank_torque| / max |torque| every 0.01 s over 2 s, crank at 2π rad/s \
                         (closed form; zero degrees of freedom)",
            drives: &[|t| (2.0 * PI * t, 2.0 * PI)],
            ll_max_step: None,
        },
        Case {
            name: "four_link",
            file: "four_link.toml",
            reference: "four_link.csv",
            horizon: 2.0,
            dt: 0.01,
            outputs: &["rotor_torque"],
            scale: None,
            error_text:
                "max |Δ rotor_torque| / max |torque| every 0.01 s over 2 s, rotor at π rad/s \
                         (closed form; zero degrees of freedom)",
            drives: &[|t| (PI * t, PI)],
            ll_max_step: None,
        },
        Case {
            name: "quarter_car",
            file: "quarter_car_rig.toml",
            reference: "quarter_car.csv",
            horizon: 2.0,
            dt: 0.01,
            outputs: &["chassis_z", "wheel_z"],
            scale: Some(0.01),
            error_text:
                "max(|Δchassis_z|, |Δwheel_z|) / 0.01 m (stamp amplitude) every 0.01 s over \
                         2 s, stamp 0.01 sin(2π·1.5 t) (exact linear solution)",
            drives: &[|t| {
                let w = 2.0 * PI * 1.5;
                (0.01 * (w * t).sin(), 0.01 * w * (w * t).cos())
            }],
            ll_max_step: None,
        },
        Case {
            name: "pendulum_chain",
            file: "pendulum_chain.toml",
            reference: "pendulum_chain_n16_projected.csv",
            horizon: 20.0,
            dt: 0.1,
            outputs: &["tip_x", "tip_y"],
            scale: Some(1.0),
            error_text: "max(|Δtip_x|, |Δtip_y|) [m] every 0.1 s over 20 s, N = 16, suspension \
                         (2 + 0.3 sin ωt, 0.2 sin ωt), ω = 2π·0.05 (DOP853 1e-12, projected start)",
            drives: &[
                |t| {
                    let w = 2.0 * PI * 0.05;
                    (2.0 + 0.3 * (w * t).sin(), 0.3 * w * (w * t).cos())
                },
                |t| {
                    let w = 2.0 * PI * 0.05;
                    (0.2 * (w * t).sin(), 0.2 * w * (w * t).cos())
                },
            ],
            ll_max_step: None,
        },
        Case {
            name: "bouncing_balls",
            file: "bouncing_balls.toml",
            reference: "bouncing_balls.csv",
            horizon: 1.0,
            dt: 0.01,
            outputs: &["y1", "y2"],
            scale: Some(1.0),
            error_text: "max(|Δy1|, |Δy2|) [m] every 0.01 s over 1 s, through 5 contacts \
                         without event location (piecewise exact)",
            drives: &[],
            ll_max_step: Some(2e-3),
        },
        Case {
            name: "spherical_chain",
            file: "spherical_chain.toml",
            reference: "spherical_chain.csv",
            horizon: 2.0,
            dt: 0.02,
            outputs: &["tip_x", "tip_y", "tip_z"],
            scale: Some(1.0),
            error_text: "max(|Δtip_x|, |Δtip_y|, |Δtip_z|) [m] every 0.02 s over 2 s, 8 bars on \
                         spherical joints spinning at 1 rad/s about their axes, oblique gravity \
                         (DOP853 1e-12 in the bar axes)",
            drives: &[],
            ll_max_step: None,
        },
    ]
}

/// Cubic Hermite segment of `u` on `[t0, t1]`.
fn hermite(u: Drive, t0: f64, t1: f64) -> InputSegment {
    let (u0, d0) = u(t0);
    let (u1, d1) = u(t1);
    let h = t1 - t0;
    let s = (u1 - u0) / h;
    InputSegment {
        t0,
        coeffs: [
            u0,
            d0,
            (3.0 * s - 2.0 * d0 - d1) / h,
            (d0 + d1 - 2.0 * s) / (h * h),
        ],
    }
}

/// Loaded once per model.
struct Prepared {
    spec: Arc<mbsfmu::mbs::spec::ModelSpec>,
    reference: RefTable,
    /// (output index, reference column)
    pairs: Vec<(usize, usize)>,
    scale: f64,
}

/// `formulation`: the model file as it is, or with `[model] formulation` set to this value.
fn prepare(case: &Case, formulation: Option<&str>) -> Prepared {
    let f = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(case.file);
    let spec = match formulation {
        None => mbsfmu::mbs::load_model(&f).unwrap(),
        Some(form) => {
            let text = std::fs::read_to_string(&f).unwrap();
            assert!(!text.contains("formulation ="), "{}", case.name);
            let text = text.replacen(
                "[model]\n",
                &format!("[model]\nformulation = \"{form}\"\n"),
                1,
            );
            mbsfmu::mbs::load_model_str(&text, &f).unwrap()
        }
    };
    let spec = Arc::new(spec);
    let reference = RefTable::load(case.reference);
    let pairs: Vec<(usize, usize)> = case
        .outputs
        .iter()
        .map(|n| {
            (
                spec.outputs.iter().position(|o| o.name == *n).unwrap(),
                reference.col(n),
            )
        })
        .collect();
    let n = (case.horizon / case.dt).round() as usize;
    let scale = case.scale.unwrap_or_else(|| {
        (0..=n)
            .flat_map(|k| pairs.iter().map(move |&(_, c)| (k, c)))
            .map(|(k, c)| reference.at(c, k as f64 * case.dt).abs())
            .fold(0.0, f64::max)
    });
    assert_eq!(spec.inputs.len(), case.drives.len(), "{}", case.name);
    Prepared {
        spec,
        reference,
        pairs,
        scale,
    }
}

/// The result of one run.
#[derive(Clone)]
enum Outcome {
    Done { err: f64, cpu: f64, stats: Stats },
    Failed(String),
    OverBudget { t: f64, cpu: f64 },
}

fn run(case: &Case, p: &Prepared, method: Method, tol: f64, budget: f64) -> Outcome {
    let mut sys = System::new(p.spec.clone()).unwrap();
    let set_inputs = |sys: &mut System, t0: f64| {
        for (i, u) in case.drives.iter().enumerate() {
            sys.inputs_mut().segments[i] = hermite(*u, t0, t0 + case.dt);
        }
    };
    let mut settings = Settings {
        method,
        rtol: tol,
        atol: tol,
        ..Settings::default()
    };
    if let (Method::LocalLinearization, Some(h)) = (method, case.ll_max_step) {
        settings.max_step = h;
    }
    let mut out = vec![0.0; p.spec.outputs.len()];
    let start = report::thread_cpu_time();
    set_inputs(&mut sys, 0.0);
    let x0 = match sys.initial_state(0.0) {
        Ok(x) => x,
        Err(e) => return Outcome::Failed(format!("initial state: {e}")),
    };
    let mut integ = AnyIntegrator::new(settings, x0.q.len(), sys_nc(&sys)).unwrap();
    if let Err(e) = integ.initialize(&mut sys, &x0) {
        return Outcome::Failed(format!("initialize: {e}"));
    }
    let n = (case.horizon / case.dt).round() as usize;
    let mut err: f64 = 0.0;
    for k in 1..=n {
        let tc = k as f64 * case.dt;
        while Integrator::<System>::state(&integ).t < tc {
            if let Err(e) = integ.step(&mut sys, tc) {
                return Outcome::Failed(format!(
                    "t = {:.4}: {e}",
                    Integrator::<System>::state(&integ).t
                ));
            }
            let cpu = report::thread_cpu_time() - start;
            if cpu > budget {
                return Outcome::OverBudget {
                    t: Integrator::<System>::state(&integ).t,
                    cpu,
                };
            }
        }
        let x = Integrator::<System>::state(&integ).clone();
        if let Err(e) = sys.evaluate_outputs(&x, &mut out) {
            return Outcome::Failed(format!("outputs at t = {tc}: {e}"));
        }
        for &(o, c) in &p.pairs {
            let d = (out[o] - p.reference.at(c, tc)).abs() / p.scale;
            err = if d.is_nan() {
                f64::INFINITY
            } else {
                err.max(d)
            };
        }
        if k < n {
            set_inputs(&mut sys, tc);
            Integrator::<System>::rhs_changed(&mut integ);
        }
    }
    let cpu = report::thread_cpu_time() - start;
    Outcome::Done {
        err,
        cpu,
        stats: *Integrator::<System>::stats(&integ),
    }
}

fn sys_nc(sys: &System) -> usize {
    use mbsfmu::integrate::system::Mechanical;
    sys.n_c()
}

/// One cell of the matrix.
enum Cell {
    Reached {
        tol: f64,
        err: f64,
        stats: Stats,
        cpu: Vec<f64>,
    },
    NotReached {
        why: String,
    },
}

const TOLS_FROM: i32 = 4; // 10^(-4/2) = 1e-2
const TOLS_TO: i32 = 22; // 10^(-22/2) = 1e-11

fn sweep(case: &Case, p: &Prepared, method: Method, budget: f64, repeats: usize) -> Cell {
    // Best (smallest) error seen, with its tolerance and CPU time, for the "not reached" text.
    let mut best: Option<(f64, f64, f64)> = None;
    let mut last_problem = String::new();
    let mut tightest: Option<(f64, f64)> = None;
    for k in TOLS_FROM..=TOLS_TO {
        let tol = 10f64.powf(-k as f64 / 2.0);
        match run(case, p, method, tol, budget) {
            Outcome::Done { err, cpu, stats } => {
                if err <= TARGET {
                    let mut cpus = vec![cpu];
                    // Long runs vary little relative to their length: fewer repeats.
                    let repeats = if cpu > 0.3 { repeats.min(3) } else { repeats };
                    for _ in 1..repeats {
                        if let Outcome::Done { cpu, .. } = run(case, p, method, tol, 10.0 * budget)
                        {
                            cpus.push(cpu);
                        }
                    }
                    return Cell::Reached {
                        tol,
                        err,
                        stats,
                        cpu: cpus,
                    };
                }
                if best.is_none_or(|b| err < b.0) {
                    best = Some((err, tol, cpu));
                }
                tightest = Some((err, tol));
            }
            Outcome::Failed(e) => last_problem = format!("tol {tol:.0e} failed: {e}"),
            Outcome::OverBudget { t, cpu } => {
                last_problem =
                    format!("tol {tol:.0e}: over the budget, t = {t:.3} after {cpu:.1} s");
                break;
            }
        }
    }
    let mut why = String::from("not reached");
    if let Some((err, tol, cpu)) = best {
        let _ = write!(
            why,
            ": best {err:.1e} at tol {tol:.0e} ({:.0} ms)",
            cpu * 1e3
        );
    }
    if let (Some((err, tol)), Some(b)) = (tightest, best) {
        if tol < b.1 {
            let _ = write!(why, ", {err:.1e} at tol {tol:.0e}");
        }
    }
    if !last_problem.is_empty() {
        let _ = write!(why, "; {last_problem}");
    }
    Cell::NotReached { why }
}

fn fmt_ms(s: f64) -> String {
    let ms = s * 1e3;
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else if ms >= 10.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.2}")
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `--formulation=joint|absolute` overrides the model files' choice; `--methods=a,b` limits
    // the methods. Either makes the run a partial one (docs/benchmarks.md left alone).
    let value = |key: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(key)?.strip_prefix('='))
    };
    let formulation = value("--formulation");
    let methods: Vec<Method> = match value("--methods") {
        None => Method::ALL.to_vec(),
        Some(list) => list
            .split(',')
            .map(|n| Method::from_name(n).unwrap_or_else(|| panic!("--methods: unknown {n}")))
            .collect(),
    };
    let only: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let (budget, repeats) = if quick { (1.5, 3) } else { (5.0, 5) };
    let all = cases();
    let selected: Vec<&Case> = all
        .iter()
        .filter(|c| only.is_empty() || only.iter().any(|o| *o == c.name))
        .collect();
    let wall = std::time::Instant::now();
    let cpu0 = report::thread_cpu_time();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "`cargo bench --bench suite_matrix{}`: target error {TARGET:.0e} in each model's output \
         (below); `rtol = atol = tol` swept over half-decades 1e-2 … 1e-11 from loose to tight, \
         the first setting that meets the target is kept (so the achieved error is within about \
         a factor 3 of the target for first-order methods, closer for higher orders). CPU: this \
         thread's CPU time of initialisation and run, median [min–max] of {repeats} runs (3 when a run \
         takes over 0.3 s); the machine was shared with other jobs. Budget {budget} s CPU per run. Jac: full Jacobian \
         evaluations; f evals include the finite-difference Jacobian columns.\n",
        if quick { " -- --quick" } else { "" }
    );
    for case in selected.iter().copied() {
        let p = prepare(case, formulation);
        let _ = writeln!(
            md,
            "**{}**{} — {}.\n",
            case.name,
            formulation.map_or(String::new(), |f| format!(" (formulation = {f})")),
            case.error_text
        );
        let _ = writeln!(
            md,
            "| method | tol | steps | rejected | f evals | Jac | LU | CPU ms | error |"
        );
        let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|");
        for &method in &methods {
            let cell = sweep(case, &p, method, budget, repeats);
            let line = match &cell {
                Cell::Reached {
                    tol,
                    err,
                    stats,
                    cpu,
                } => {
                    let (med, lo, hi) = report::median_min_max(cpu);
                    format!(
                        "| {} | {tol:.0e} | {} | {} | {} | {} | {} | {} [{}–{}] | {err:.1e} |",
                        method.name(),
                        stats.steps,
                        stats.rejected_steps,
                        stats.f_evals,
                        stats.jac_evals,
                        stats.lu,
                        fmt_ms(med),
                        fmt_ms(lo),
                        fmt_ms(hi)
                    )
                }
                Cell::NotReached { why } => {
                    format!("| {} | | | | | | | | {why} |", method.name())
                }
            };
            let line = match (method, case.ll_max_step) {
                (Method::LocalLinearization, Some(h)) => line.replacen(
                    method.name(),
                    &format!("{} (max step {h:.0e} s)", method.name()),
                    1,
                ),
                _ => line,
            };
            println!("{}: {line}", case.name);
            let _ = writeln!(md, "{line}");
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(
        md,
        "This run: {:.0} s CPU (this thread), {:.0} s wall.",
        report::thread_cpu_time() - cpu0,
        wall.elapsed().as_secs_f64()
    );
    println!("{md}");
    if selected.len() == all.len() && formulation.is_none() && methods.len() == Method::ALL.len() {
        match report::replace_section(&report::benchmarks_md(), "suite_matrix", &md) {
            Ok(()) => println!("wrote the suite_matrix section of docs/benchmarks.md"),
            Err(e) => eprintln!("{e}"),
        }
    } else {
        println!("(a subset of the models: docs/benchmarks.md left alone)");
    }
}
