//! `mbsfmu simulate MODEL.toml [--input in.csv] [--stop T] [--step H] [--out out.csv]
//! [--plot out.png]`: the communication loop, CSV in/out, the plot and a progress bar. The
//! model runs behind [`CoSimulation`]; [`instantiate`] is the one call into `cosim` left to
//! wire.

use super::csv::{write_csv, InputTable};
use super::{CliError, CliResult};
use clap::Args;
use mbsfmu::cosim::{Advance, SetPhase, Simulation};
use mbsfmu::description::xml::model_identifier;
use mbsfmu::description::{Causality, VarKind, VarType, VariableTable};
use mbsfmu::mbs::error::show_number;
use mbsfmu::mbs::spec::ModelSpec;
use mbsfmu::mbs::system::System;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// The model file (TOML).
    pub model: PathBuf,
    /// CSV with a `time` column and one column per model input (others keep their start).
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Start time (default: the model's experiment start).
    #[arg(long, allow_negative_numbers = true)]
    pub start: Option<f64>,
    /// Stop time (default: the model's experiment stop).
    #[arg(long, allow_negative_numbers = true)]
    pub stop: Option<f64>,
    /// Communication step (default: the model's experiment step).
    #[arg(long, allow_negative_numbers = true)]
    pub step: Option<f64>,
    /// Result CSV (default: <model name>_out.csv).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write a PNG plot of the outputs.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Comma-separated outputs to plot (default: all, at most 8).
    #[arg(long, value_delimiter = ',')]
    pub plot_outputs: Vec<String>,
    /// Set a parameter (including solver.*) before initialization: NAME=VALUE; may repeat.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
}

/// A model instance advancing in communication steps: what `cosim` provides to the FMU and
/// to this command alike.
pub trait CoSimulation {
    /// Set input `index` (in `ModelSpec::inputs` order) to `value` now, with first and second
    /// time derivatives `d1`, `d2` (FMI 2 input derivatives: the Taylor polynomial
    /// `value + d1 s + d2 s²/2` the FMU aims its segment for the coming step at).
    fn set_input(&mut self, index: usize, value: f64, d1: f64, d2: f64);
    /// Initialize with the inputs set so far (the consistent or static start); implementations
    /// that need no initialization succeed.
    fn initialize(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// Integrate to `t`.
    fn advance_to(&mut self, t: f64) -> Result<(), String>;
    /// Current outputs in `ModelSpec::outputs` order.
    fn outputs(&mut self, out: &mut [f64]);
    /// Solver statistics so far, where the implementation keeps them.
    fn stats(&self) -> Option<mbsfmu::integrate::Stats> {
        None
    }
}

/// The FMU's own co-simulation layer, in process: the same `Simulation` the C ABI drives.
struct InProcess {
    sim: Simulation<System>,
    input_vr: Vec<u32>,
    /// Initialization waits for the first input values so that drivers start consistent
    /// with them (as an importer sets inputs in initialization mode).
    initialized: bool,
    error: Option<String>,
}

impl InProcess {
    fn ensure_initialized(&mut self) -> Result<(), String> {
        if !self.initialized {
            self.sim.initialize().map_err(|e| e.to_string())?;
            for w in self.sim.advisories() {
                eprintln!("warning: {w}");
            }
            self.initialized = true;
        }
        Ok(())
    }
}

impl CoSimulation for InProcess {
    fn initialize(&mut self) -> Result<(), String> {
        self.ensure_initialized()
    }

    fn stats(&self) -> Option<mbsfmu::integrate::Stats> {
        Some(self.sim.stats())
    }

    fn set_input(&mut self, index: usize, value: f64, d1: f64, d2: f64) {
        let vr = self.input_vr[index];
        let phase = if self.initialized {
            SetPhase::Stepping
        } else {
            SetPhase::Setup
        };
        // The derivatives in setup too: the initial state's driver rates and the first step
        // follow the table (an FMI 2 master may set input derivatives in Initialization Mode).
        let r = self
            .sim
            .set_real(vr, value, phase)
            .and_then(|_| self.sim.set_input_derivative(vr, 1, d1))
            .and_then(|_| self.sim.set_input_derivative(vr, 2, d2));
        if let Err(e) = r {
            self.error.get_or_insert(e.to_string());
        }
    }

    fn advance_to(&mut self, t: f64) -> Result<(), String> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.ensure_initialized()?;
        let r = self.sim.advance_to(t, None);
        match r {
            Ok(Advance::Completed) => Ok(()),
            Ok(Advance::Discard {
                last_successful_time,
                ..
            }) => Err(format!(
                "the integrator could not continue past t = {last_successful_time}: {} ({})",
                self.sim
                    .last_failure()
                    .unwrap_or_else(|| "no reason given".into()),
                // The work budget ran out: the message says which setting made the steps
                // short; tighter tolerances would only make them shorter.
                if self.sim.last_failure_is_work_budget() {
                    "a shorter communication step is a smaller --step; tolerances and the \
                     integrator are --set solver.rtol=…, solver.atol=…, solver.integrator=…"
                } else if self.sim.last_failure_is_time_resolution() {
                    // A smaller --step or tighter tolerances cannot help there.
                    "try a --start nearer 0"
                } else {
                    "try a smaller --step, another solver.integrator, or tighter tolerances"
                }
            )),
            // Early return is only switched on by FMI 3 instances.
            Ok(Advance::EarlyReturn { event }) => {
                Err(format!("internal: early return at t = {}", event.t))
            }
            Err(e) => Err(e.to_string()),
        }
    }

    fn outputs(&mut self, out: &mut [f64]) {
        if let Err(e) = self.ensure_initialized() {
            self.error.get_or_insert(e);
            out.fill(f64::NAN);
            return;
        }
        match self.sim.outputs() {
            Ok(o) => out.copy_from_slice(o),
            Err(e) => {
                self.error.get_or_insert(e.to_string());
                out.fill(f64::NAN);
            }
        }
    }
}

/// Create a co-simulation instance of `spec` at `start` with `parameters` (value per
/// `ModelSpec::parameters`), solver overrides `solver` (`(name, value)` of `solver.*`
/// variables; enumerations by their item value) and the experiment's tolerance `tol`, which
/// overrides `solver.rtol` as an importer's would (`None`: keep `solver.rtol`).
pub fn instantiate(
    spec: &ModelSpec,
    parameters: &[f64],
    solver: &[(String, f64)],
    start: f64,
    tol: Option<f64>,
) -> CliResult<Box<dyn CoSimulation>> {
    let mut spec = spec.clone();
    let (fixed, solver): (Vec<_>, Vec<_>) = solver.iter().partition(|(n, _)| n == FIXED_STEP);
    if let Some((_, h)) = fixed.last() {
        spec.solver.fixed_step = Some(*h);
    }
    let spec = Arc::new(spec);
    let table = Arc::new(VariableTable::from_spec(&spec));
    let engine = System::new(spec.clone()).map_err(|e| CliError::User(e.to_string()))?;
    let mut sim = Simulation::new(spec.clone(), table.clone(), engine);
    // No host thread to keep responsive here (Ctrl-C is seen between communication steps,
    // a second one ends the process at once): without the
    // CPU limit per communication step the run's results do not depend on the machine's
    // speed or load. The step limit of a call stays.
    sim.set_cpu_budget_per_call(f64::INFINITY);
    let user = |e: mbsfmu::cosim::CosimError| CliError::User(e.to_string());
    sim.setup_experiment(tol, start, None).map_err(user)?;
    for (v, value) in table.variables.iter().filter_map(|v| match v.kind {
        VarKind::Parameter(i) => Some((v, parameters[i])),
        _ => None,
    }) {
        if value
            != spec.parameters[match v.kind {
                VarKind::Parameter(i) => i,
                _ => unreachable!(),
            }]
            .value
        {
            sim.set_real(v.value_reference, value, SetPhase::Setup)
                .map_err(user)?;
        }
    }
    for (name, value) in solver {
        let v = table
            .by_name(name)
            .ok_or_else(|| CliError::User(format!("--set: no variable {name:?}")))?;
        match v.var_type {
            VarType::Float64 => sim
                .set_real(v.value_reference, *value, SetPhase::Setup)
                .map(|w| w.into_iter().for_each(|w| eprintln!("warning: {w}"))),
            _ => sim.set_integer(v.value_reference, *value as i64, SetPhase::Setup),
        }
        .map_err(user)?;
    }
    let input_vr = (0..spec.inputs.len())
        .map(|i| {
            table
                .variables
                .iter()
                .find(|v| v.kind == VarKind::Input(i))
                .map(|v| v.value_reference)
                .expect("every input has a variable")
        })
        .collect();
    Ok(Box::new(InProcess {
        sim,
        input_vr,
        initialized: false,
        error: None,
    }))
}

/// Column `c` of the input table feeds model input `map[c]`.
pub fn map_inputs(spec: &ModelSpec, table: &InputTable) -> CliResult<Vec<usize>> {
    table
        .names
        .iter()
        .map(|n| {
            spec.inputs
                .iter()
                .position(|i| i.name == *n)
                .ok_or_else(|| {
                    let known: Vec<&str> = spec.inputs.iter().map(|i| i.name.as_str()).collect();
                    CliError::User(format!(
                        "{}: column {n:?} is not an input of model {:?} (its inputs: {})",
                        table.file.display(),
                        spec.name,
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ))
                })
        })
        .collect()
}

/// Communication points from `start` to `stop` (the last one exactly `stop`).
pub fn grid(start: f64, stop: f64, step: f64) -> CliResult<Vec<f64>> {
    for (name, x) in [("start", start), ("stop", stop)] {
        if !x.is_finite() || x.abs() > 1e15 {
            return Err(CliError::User(format!(
                "{name} time {x:e} s (--{name} or the model's [experiment]): must be a finite \
                 number of magnitude below 1e15 s"
            )));
        }
    }
    if !(step > 0.0 && step.is_finite()) {
        return Err(CliError::User(format!(
            "--step {step}: must be a positive number"
        )));
    }
    if stop <= start {
        return Err(CliError::User(format!(
            "--stop {stop} must be after --start {start}"
        )));
    }
    // Far from 0 the doubles are far apart: a step below their spacing there does not advance
    // the time (or by another amount than asked). At least 1000 spacings: the communication
    // points are then where asked to 0.05 %.
    let far = start.abs().max(stop.abs());
    let spacing = f64::from_bits(far.to_bits() + 1) - far;
    if step < 1e3 * spacing {
        return Err(CliError::User(format!(
            "the communication step {} s (--step or the model's [experiment] step) is below the \
             time resolution at t = {far:e} s (--start {start}, \
             --stop {stop}): doubles there are {spacing:e} s apart; use a --step of at least \
             {:e} s (1000 times the resolution) or times nearer 0",
            show_number(step),
            1e3 * spacing
        )));
    }
    let steps = (stop - start) / step;
    if steps.is_nan() || steps > 5e7 {
        return Err(CliError::User(format!(
            "{steps:.3e} communication steps of {step} s from {start} to {stop} s: choose a \
             larger --step"
        )));
    }
    // At least one step: a step longer than the run is one step to `stop`.
    let n = ((steps - 1e-9).ceil() as usize).max(1);
    Ok((0..=n)
        .map(|k| {
            if k == n {
                stop
            } else {
                start + k as f64 * step
            }
        })
        .collect())
}

/// The communication loop's result: rows `[t, outputs...]` up to the last communication point
/// reached, and why it stopped early, if it did (the rows are kept either way).
pub struct LoopResult {
    pub rows: Vec<Vec<f64>>,
    pub failure: Option<String>,
}

/// The C¹ cubic spline through an input's values `u` at the grid points `t` (Hermite, with
/// the slope of the parabola through each point and its neighbours; the chords at the ends),
/// as the FMI 2 derivatives the communication loop sets.
struct InputSpline {
    t: Vec<f64>,
    u: Vec<f64>,
    m: Vec<f64>,
}

impl InputSpline {
    fn new(t: &[f64], u: Vec<f64>) -> InputSpline {
        let n = t.len();
        let chord = |j: usize| (u[j + 1] - u[j]) / (t[j + 1] - t[j]);
        let h = |j: usize| t[j + 1] - t[j];
        if n < 3 {
            let m = vec![if n == 2 { chord(0) } else { 0.0 }; n];
            return InputSpline {
                t: t.to_vec(),
                u,
                m,
            };
        }
        // The C² spline: `h_j m_{j−1} + 2 (h_{j−1} + h_j) m_j + h_{j−1} m_{j+1} = 3 (h_j c_{j−1}
        // + h_{j−1} c_j)` inside, the end slopes those of the parabolas through the first and
        // last three points (exact for quadratics, so the spline is). C² makes `ü` at a point
        // the same from both sides and accurate to O(H²); a C¹ spline with local slopes has
        // `ü` at the points one step late (its error is `−u⃛ H`).
        let mut m = vec![0.0; n];
        m[0] = chord(0) - (chord(1) - chord(0)) * h(0) / (h(0) + h(1));
        let (a, b) = (n - 3, n - 2);
        m[n - 1] = chord(b) + (chord(b) - chord(a)) * h(b) / (h(a) + h(b));
        // Thomas algorithm on m_1 … m_{n−2}: row j has h(j) left, 2 (h(j−1) + h(j)) on the
        // diagonal, h(j − 1) right.
        let (mut diag, mut rhs) = (vec![0.0; n], vec![0.0; n]);
        for j in 1..n - 1 {
            diag[j] = 2.0 * (h(j - 1) + h(j));
            rhs[j] = 3.0 * (h(j) * chord(j - 1) + h(j - 1) * chord(j));
            if j == 1 {
                rhs[j] -= h(j) * m[0];
            } else {
                let w = h(j) / diag[j - 1];
                diag[j] -= w * h(j - 2);
                rhs[j] -= w * rhs[j - 1];
            }
        }
        rhs[n - 2] -= h(n - 3) * m[n - 1];
        for j in (1..n - 1).rev() {
            let right = if j + 1 < n - 1 {
                h(j - 1) * m[j + 1]
            } else {
                0.0
            };
            m[j] = (rhs[j] - right) / diag[j];
        }
        InputSpline {
            t: t.to_vec(),
            u,
            m,
        }
    }

    /// Value at point `k` and the `(u̇, ü)` whose Taylor quadratic from there meets the spline's
    /// value and slope at point `k + 1`; at the last point the spline's slope and its last
    /// segment's acceleration there.
    fn at(&self, k: usize) -> (f64, f64, f64) {
        let (t, u, m) = (&self.t, &self.u, &self.m);
        if k + 1 < t.len() {
            let h = t[k + 1] - t[k];
            let c = (u[k + 1] - u[k]) / h;
            (u[k], 2.0 * c - m[k + 1], 2.0 * (m[k + 1] - c) / h)
        } else if k > 0 {
            let h = t[k] - t[k - 1];
            let c = (u[k] - u[k - 1]) / h;
            (u[k], m[k], (2.0 * m[k - 1] + 4.0 * m[k] - 6.0 * c) / h)
        } else {
            (u[k], 0.0, 0.0)
        }
    }
}

/// Run the communication loop.
pub fn run_loop(
    sim: &mut dyn CoSimulation,
    n_outputs: usize,
    inputs: Option<(&InputTable, &[usize])>,
    grid: &[f64],
    progress: bool,
) -> LoopResult {
    // Each input follows the C¹ cubic spline through the table's values at the grid points
    // (slopes from the parabola through three neighbours, one-sided at the ends): every step
    // ends exactly on the table's value, whatever rows lie inside it or a rounding error away
    // from its ends, and `u̇`, `ü` at a point are the spline's, accurate to O(H) on a sampled
    // smooth signal. (Until session 21 the derivative was the chord over the coming step and
    // `ü` was left to the FMU, whose segment then started with the step before's slope:
    // accelerations and driver forces at every point read 4× the signal's.) The FMU aims its
    // segment at the Taylor polynomial of `u̇`, `ü` from where the last segment ended
    // (docs/fmi-runtime.md), so point `k` gets the `u̇`, `ü` whose quadratic meets the spline's
    // value and slope at `k + 1`. At the last point no step follows: the slope and
    // acceleration where the last step ended serve the outputs there, not the table's
    // "constant after its end", which would stop the input dead.
    let splines: Vec<(usize, InputSpline)> = inputs
        .map(|(table, map)| {
            map.iter()
                .enumerate()
                .map(|(c, &i)| {
                    let u: Vec<f64> = grid.iter().map(|&t| table.value(c, t)).collect();
                    (i, InputSpline::new(grid, u))
                })
                .collect()
        })
        .unwrap_or_default();
    let set_inputs = |sim: &mut dyn CoSimulation, k: usize| {
        for (i, sp) in &splines {
            let (u, d1, d2) = sp.at(k);
            sim.set_input(*i, u, d1, d2);
        }
    };
    let mut rows = Vec::with_capacity(grid.len());
    let mut out = vec![0.0; n_outputs];
    let started = Instant::now();
    let mut last_draw = started;
    set_inputs(sim, 0);
    // Apart from the steps: a start that cannot be found (no static equilibrium, an assembly
    // that fails) is not a failure "in the step to" the first point, and has no outputs.
    if let Err(m) = sim.initialize() {
        return LoopResult {
            rows,
            failure: Some(format!("initialization at t = {} failed: {m}", grid[0])),
        };
    }
    sim.outputs(&mut out);
    rows.push(
        std::iter::once(grid[0])
            .chain(out.iter().copied())
            .collect(),
    );
    let mut failure = None;
    for (k, w) in grid.windows(2).enumerate() {
        if interrupt::requested() {
            failure = Some(format!("interrupted (Ctrl-C) at t = {}", w[0]));
            break;
        }
        if let Err(m) = sim.advance_to(w[1]) {
            failure = Some(format!(
                "simulation failed in the step to t = {}: {m}",
                w[1]
            ));
            break;
        }
        set_inputs(sim, k + 1);
        sim.outputs(&mut out);
        rows.push(std::iter::once(w[1]).chain(out.iter().copied()).collect());
        if progress
            && started.elapsed().as_secs_f64() > 0.5
            && last_draw.elapsed().as_secs_f64() > 0.1
        {
            last_draw = Instant::now();
            let frac = (w[1] - grid[0]) / (grid[grid.len() - 1] - grid[0]);
            let filled = (frac * 30.0).round() as usize;
            eprint!(
                "\r[{}{}] {:3.0}%  t = {:.4} s",
                "#".repeat(filled),
                " ".repeat(30 - filled.min(30)),
                frac * 100.0,
                w[1]
            );
            let _ = std::io::stderr().flush();
        }
    }
    if progress && started.elapsed().as_secs_f64() > 0.5 {
        eprintln!();
    }
    LoopResult { rows, failure }
}

/// The `--set` name of the model file's `[solver] fixed_step`.
const FIXED_STEP: &str = "solver.fixed_step";

/// Parameter values and solver overrides from `--set`.
/// `(parameter values in ModelSpec order, solver.* overrides by name)`.
pub type Settings = (Vec<f64>, Vec<(String, f64)>);

pub fn apply_sets(spec: &ModelSpec, sets: &[String]) -> CliResult<Settings> {
    let table = VariableTable::from_spec(spec);
    let mut params = spec.default_parameters();
    let mut solver = Vec::new();
    for s in sets {
        let (name, value) = s
            .split_once('=')
            .ok_or_else(|| CliError::User(format!("--set {s}: expected NAME=VALUE")))?;
        let (name, value) = (name.trim(), value.trim());
        // The fixed step is a key of the model file's [solver] table, not an FMU variable (the
        // FMU's is the packed file's: `mbsfmu export --set solver.fixed_step=…`).
        if name == FIXED_STEP {
            match value.parse::<f64>() {
                Ok(x) if x > 0.0 && x.is_finite() => solver.push((name.to_string(), x)),
                _ => {
                    return Err(CliError::User(format!(
                        "--set {s}: {value:?} is not a positive number of seconds"
                    )))
                }
            }
            continue;
        }
        let var = table
            .by_name(name)
            .filter(|v| v.causality == Causality::Parameter)
            .ok_or_else(|| {
                let names: Vec<&str> = table
                    .variables
                    .iter()
                    .filter(|v| v.causality == Causality::Parameter)
                    .map(|v| v.name.as_str())
                    .collect();
                let what = match table.by_name(name).map(|v| v.causality) {
                    Some(Causality::Input) => {
                        "is an input, not a parameter: give its values over time with --input \
                         FILE.csv (without it the input keeps its start value)"
                            .to_string()
                    }
                    Some(c) => format!(
                        "is not a parameter (it is an {})",
                        format!("{c:?}").to_lowercase()
                    ),
                    None => "is not a parameter".to_string(),
                };
                CliError::User(format!(
                    "--set {s}: {name:?} {what}; the parameters of model {:?} are {}, \
                     {FIXED_STEP}",
                    spec.name,
                    names.join(", ")
                ))
            })?;
        let parsed: f64 = match (var.var_type, value.parse::<f64>()) {
            // An Integer or Enumeration takes a whole number (1.5 ran as item 1).
            (mbsfmu::description::VarType::Float64, Ok(x)) => x,
            (_, Ok(x)) if x.fract() == 0.0 => x,
            (_, Ok(_)) => {
                return Err(CliError::User(format!(
                "--set {s}: {value:?} is not a whole number ({name} is an integer or enumeration)"
            )))
            }
            (mbsfmu::description::VarType::Enumeration(e), Err(_)) => e
                .items()
                .iter()
                .find(|(n, _)| *n == value)
                .map(|(_, i)| *i as f64)
                .ok_or_else(|| {
                    let names: Vec<&str> = e.items().iter().map(|(n, _)| *n).collect();
                    CliError::User(format!(
                        "--set {s}: {value:?} is not one of {}",
                        names.join(", ")
                    ))
                })?,
            (_, Err(_)) => {
                return Err(CliError::User(format!(
                    "--set {s}: {value:?} is not a number"
                )))
            }
        };
        match var.kind {
            VarKind::Parameter(i) => params[i] = parsed,
            _ => solver.push((name.to_string(), parsed)),
        }
    }
    Ok((params, solver))
}

pub fn run(a: &SimulateArgs) -> CliResult {
    let spec = mbsfmu::mbs::load_model(&a.model)?;
    let e = spec.experiment;
    let start = a.start.unwrap_or(e.start);
    let stop = a.stop.unwrap_or(e.stop);
    // One of the two from the model file: say so (the message blamed a --stop never given).
    if stop <= start && (a.start.is_none() || a.stop.is_none()) {
        let from = |given: Option<f64>, flag: &str, key: &str, x: f64| match given {
            Some(_) => format!("--{flag} {x}"),
            None => format!("the model's [experiment] {key} {x}"),
        };
        return Err(CliError::User(format!(
            "{} must be after {} (give {})",
            from(a.stop, "stop", "stop", stop),
            from(a.start, "start", "start", start),
            if a.stop.is_none() {
                "--stop"
            } else {
                "--start"
            }
        )));
    }
    if !a.plot_outputs.is_empty() && a.plot.is_none() {
        return Err(CliError::User(
            "--plot-outputs chooses the outputs of the plot: it needs --plot FILE.png".into(),
        ));
    }
    let g = grid(start, stop, a.step.unwrap_or(e.step))?;
    let input = a.input.as_deref().map(InputTable::read).transpose()?;
    let map = input.as_ref().map(|t| map_inputs(&spec, t)).transpose()?;
    if let Some(table) = &input {
        let (first, last) = (table.t[0], table.t[table.t.len() - 1]);
        let (a, b) = (g[0], g[g.len() - 1]);
        if first > a || last < b {
            eprintln!(
                "warning: {} covers t = {first} .. {last} s, the run {a} .. {b} s: outside the \
                 table each input keeps its first or last value",
                table.file.display()
            );
        }
    }
    let plot_sel: Vec<usize> = if a.plot_outputs.is_empty() {
        (0..spec.outputs.len().min(8)).collect()
    } else {
        a.plot_outputs
            .iter()
            .map(|n| {
                spec.outputs
                    .iter()
                    .position(|o| o.name == *n)
                    .ok_or_else(|| {
                        CliError::User(format!(
                            "--plot-outputs: {n:?} is not an output of model {:?} (outputs: {})",
                            spec.name,
                            spec.outputs
                                .iter()
                                .map(|o| o.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ))
                    })
            })
            .collect::<CliResult<_>>()?
    };
    let (params, solver) = apply_sets(&spec, &a.set)?;
    // The model's experiment tolerance plays the importer's tolerance (it overrides
    // solver.rtol), unless the user sets solver.rtol on the command line.
    let tol = if solver.iter().any(|(n, _)| n == "solver.rtol") {
        None
    } else {
        Some(e.tolerance)
    };
    let mut sim = instantiate(&spec, &params, &solver, start, tol)?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}_out.csv", model_identifier(&spec.name))));
    // The result files are created before the run: a path that cannot be written is refused
    // before the work, not after it (and never hides why a run failed).
    let mut out_file = create_output(&out, "--out")?;
    if let Some(p) = &a.plot {
        if let Err(e) = create_output(p, "--plot") {
            drop(out_file);
            let _ = std::fs::remove_file(&out);
            return Err(e);
        }
    }
    interrupt::catch();
    let wall = Instant::now();
    let LoopResult { rows, failure } = run_loop(
        sim.as_mut(),
        spec.outputs.len(),
        input.as_ref().zip(map.as_deref()),
        &g,
        std::io::stderr().is_terminal(),
    );
    let secs = wall.elapsed().as_secs_f64();
    let header: Vec<String> = std::iter::once("time".to_string())
        .chain(spec.outputs.iter().map(|o| o.name.clone()))
        .collect();
    let written = write_csv(&mut out_file, &out, &header, &rows);
    if let Some(m) = failure {
        // The simulation's error first; what was computed up to the failure (often what
        // shows the cause) is written all the same, the plot too.
        let mut m = m;
        let mut files = vec![out.display().to_string()];
        if let Some(p) = &a.plot {
            if rows.len() >= 2 && write_plot_file(&spec, &rows, &plot_sel, p).is_ok() {
                files.push(p.display().to_string());
            } else {
                // Created before the run; nothing to show in it.
                let _ = std::fs::remove_file(p);
            }
        }
        match (written, rows.last()) {
            (Err(CliError::User(w) | CliError::Internal(w)), _) => m.push_str(&format!(
                "\n(the outputs computed could not be written: {w})"
            )),
            (Ok(()), Some(r)) => m.push_str(&format!(
                "\n(the outputs up to t = {} are in {})",
                r[0],
                files.join(" and ")
            )),
            (Ok(()), None) => {}
        }
        return Err(CliError::User(m));
    }
    written?;
    out!("{}", summary(&spec, &rows, secs));
    if let Some(st) = sim.stats() {
        outln!(
            "  solver: {} steps ({} rejected), {} evaluations, {} Jacobians, {} updates, {} LU, \
             {} restarts",
            st.steps,
            st.rejected_steps,
            st.f_evals,
            st.jac_evals,
            st.jac_updates,
            st.lu,
            st.restarts
        );
    }
    outln!("wrote {}", out.display());
    if let Some(p) = &a.plot {
        write_plot_file(&spec, &rows, &plot_sel, p)?;
        outln!("wrote {}", p.display());
    }
    Ok(())
}

/// Create (or truncate) a result file before the run, naming the option it came from.
fn create_output(file: &Path, flag: &str) -> CliResult<std::fs::File> {
    std::fs::File::create(file).map_err(|e| {
        CliError::User(format!(
            "{} ({flag}): cannot create the file: {e}",
            file.display()
        ))
    })
}

/// Ctrl-C (SIGINT) during the run: the communication loop stops at the next communication
/// point and the outputs computed so far are written; a second Ctrl-C ends the process (a
/// step that never returns). The `ctrlc` crate keeps the signal handling out of our code.
mod interrupt {
    use std::sync::atomic::{AtomicBool, Ordering};

    static INTERRUPTED: AtomicBool = AtomicBool::new(false);

    /// Install the handler (where it cannot be installed, Ctrl-C ends the process as before).
    pub fn catch() {
        let _ = ctrlc::set_handler(|| {
            if INTERRUPTED.swap(true, Ordering::SeqCst) {
                std::process::exit(130);
            }
        });
    }

    pub fn requested() -> bool {
        INTERRUPTED.load(Ordering::SeqCst)
    }
}

pub fn write_plot_file(
    spec: &ModelSpec,
    rows: &[Vec<f64>],
    sel: &[usize],
    file: &Path,
) -> CliResult {
    let t: Vec<f64> = rows.iter().map(|r| r[0]).collect();
    let series: Vec<(String, Vec<f64>)> = sel
        .iter()
        .map(|&i| {
            let o = &spec.outputs[i];
            let label = if o.unit.is_empty() {
                o.name.clone()
            } else {
                format!("{} [{}]", o.name, o.unit)
            };
            (label, rows.iter().map(|r| r[i + 1]).collect())
        })
        .collect();
    super::plot::write_plot(file, &t, &series, &spec.name)
}

/// Printed after a run: per output its final value, minimum and maximum.
pub fn summary(spec: &ModelSpec, rows: &[Vec<f64>], secs: f64) -> String {
    let last = rows.last().map(|r| r[0]).unwrap_or(0.0);
    let n = rows.len().saturating_sub(1);
    let mut s = format!(
        "{}: simulated to t = {} s in {n} communication step{} ({:.3} s wall time)\n",
        spec.name,
        last,
        if n == 1 { "" } else { "s" },
        secs
    );
    s.push_str(&format!(
        "  {:<24} {:>14} {:>14} {:>14}  unit\n",
        "output", "final", "min", "max"
    ));
    for (i, o) in spec.outputs.iter().enumerate() {
        let col = rows.iter().map(|r| r[i + 1]);
        let (lo, hi) = col
            .clone()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
                (a.min(y), b.max(y))
            });
        let fin = rows.last().map(|r| r[i + 1]).unwrap_or(f64::NAN);
        s.push_str(&format!(
            "  {:<24} {:>14.6e} {:>14.6e} {:>14.6e}  {}\n",
            o.name, fin, lo, hi, o.unit
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// x' = u exactly (u linear between the points the loop sets): checks that the loop sets
    /// inputs at the right times with the right slopes and records outputs at the grid.
    struct Integrator {
        t: f64,
        x: f64,
        u: f64,
        du: f64,
        ddu: f64,
    }

    impl CoSimulation for Integrator {
        fn set_input(&mut self, _index: usize, value: f64, d1: f64, d2: f64) {
            self.u = value;
            self.du = d1;
            self.ddu = d2;
        }
        fn advance_to(&mut self, t: f64) -> Result<(), String> {
            let h = t - self.t;
            self.x += self.u * h + 0.5 * self.du * h * h + self.ddu * h * h * h / 6.0;
            self.t = t;
            Ok(())
        }
        fn outputs(&mut self, out: &mut [f64]) {
            out[0] = self.x;
        }
    }

    /// The spline through samples of a quadratic is the quadratic: x' = u = 3t² sampled every
    /// 0.25 gives x = t³ at every point, so the loop sets values, `u̇` and `ü` at the right
    /// points (on a non-uniform grid too).
    #[test]
    fn loop_integrates_a_sampled_quadratic_input_exactly() {
        let mut text = String::from("time,u\n");
        for k in 0..=8 {
            let t = 0.25 * k as f64;
            text.push_str(&format!("{t},{}\n", 3.0 * t * t));
        }
        let table = InputTable::parse(&text, Path::new("u.csv")).unwrap();
        for g in [
            grid(0.0, 2.0, 0.25).unwrap(),
            vec![0.0, 0.25, 0.5, 1.0, 1.25, 2.0],
        ] {
            let mut sim = Integrator {
                t: 0.0,
                x: 0.0,
                u: 0.0,
                du: 0.0,
                ddu: 0.0,
            };
            let LoopResult { rows, failure } =
                run_loop(&mut sim, 1, Some((&table, &[0])), &g, false);
            assert_eq!(failure, None);
            assert_eq!(rows.len(), g.len());
            for r in rows {
                let exact = r[0].powi(3);
                assert!(
                    (r[1] - exact).abs() < 1e-13,
                    "t = {}: {} vs {exact}",
                    r[0],
                    r[1]
                );
            }
        }
    }

    /// Records where each step's input ends: `u + u̇ h + ü h²/2` (the FMI 2 derivative path's
    /// value at the end of a step).
    struct Ends {
        t: f64,
        u: f64,
        du: f64,
        ddu: f64,
        ends: Vec<(f64, f64)>,
    }

    impl CoSimulation for Ends {
        fn set_input(&mut self, _index: usize, value: f64, d1: f64, d2: f64) {
            self.u = value;
            self.du = d1;
            self.ddu = d2;
        }
        fn advance_to(&mut self, t: f64) -> Result<(), String> {
            let h = t - self.t;
            self.ends
                .push((t, self.u + self.du * h + 0.5 * self.ddu * h * h));
            self.t = t;
            Ok(())
        }
        fn outputs(&mut self, out: &mut [f64]) {
            out[0] = self.u;
        }
    }

    /// Every step ends on the table's value, also where a row lies a rounding error after a
    /// grid point (numpy's `3 * 0.1` = 0.30000000000000004 against the grid's 0.3, which gave
    /// the step [0.3, 0.31] the slope of a segment 6e-17 s long: the input lagged one step)
    /// and where a row lies inside a step.
    #[test]
    fn every_step_ends_on_the_table_with_rows_off_the_grid() {
        let table = InputTable::parse(
            "time,u\n0,0\n0.30000000000000004,0\n0.655,0.0355\n2,0.0355\n",
            Path::new("u.csv"),
        )
        .unwrap();
        let g = grid(0.0, 1.0, 0.01).unwrap();
        let mut sim = Ends {
            t: 0.0,
            u: 0.0,
            du: 0.0,
            ddu: 0.0,
            ends: Vec::new(),
        };
        let LoopResult { failure, .. } = run_loop(&mut sim, 1, Some((&table, &[0])), &g, false);
        assert_eq!(failure, None);
        assert_eq!(sim.ends.len(), 100);
        for (t, u) in sim.ends {
            let want = table.value(0, t);
            assert!(
                (u - want).abs() < 1e-15,
                "t = {t}: step ends at {u}, table {want}"
            );
        }
    }

    #[test]
    fn grid_ends_exactly_at_stop() {
        let g = grid(0.0, 1.0, 0.3).unwrap();
        assert_eq!(g, vec![0.0, 0.3, 0.6, 0.8999999999999999, 1.0]);
        assert_eq!(grid(0.0, 1.0, 0.1).unwrap().len(), 11);
        assert!(matches!(grid(0.0, 1.0, 0.0), Err(CliError::User(_))));
        assert!(matches!(grid(1.0, 1.0, 0.1), Err(CliError::User(_))));
        // A step longer than the run: one step to `stop` (not zero steps that label the
        // start's values with the stop time).
        assert_eq!(grid(0.0, 1.0, 1e9).unwrap(), vec![0.0, 1.0]);
        assert_eq!(grid(-1.0, 1.0, 5.0).unwrap(), vec![-1.0, 1.0]);
        let msg = |r: CliResult<Vec<f64>>| match r {
            Err(CliError::User(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(msg(grid(0.0, f64::INFINITY, 0.1)).contains("stop time inf"));
        assert!(msg(grid(f64::NAN, 1.0, 0.1)).contains("start time NaN"));
        assert!(msg(grid(0.0, 1e9, 1e-3)).contains("1.000e12 communication steps"));
    }
}
