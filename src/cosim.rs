//! FMI-agnostic co-simulation: a model instance that advances to a communication point.
//!
//! [`Simulation`] owns the engine, the integrator, the solver settings, the inputs (with their
//! history and the polynomial segments the engine evaluates), the outputs cache and the
//! statistics. The C ABI (`fmi`) maps value references and states onto this API; nothing here
//! knows about FMI status codes or pointers.
//!
//! # Inputs inside a communication step
//! Drivers need `u`, `u̇`, `ü` over the step. The segment for input `i` on `[t_c, t_c + H]` is:
//! 1. FMI 2 input derivatives ([`Simulation::set_input_derivative`]), when the importer gave
//!    them for this step: the Taylor polynomial `u + u̇ s + ü s²/2` (exact up to the order the
//!    importer provides).
//! 2. Otherwise a reconstruction from the input history: the polynomial through the last three
//!    samples (communication points, and intermediate-update times when the importer answers
//!    the FMI 3 callback), extrapolated over the step. For a smooth input with sample spacing
//!    `H` the value error is `O(H³)`, the first derivative `O(H²)`, the second `O(H)`. With
//!    fewer samples (start of simulation) it is linear, then constant.
//! 3. FMI 3 intermediate update: after every accepted internal step at `t_k` the importer is
//!    asked for the inputs at `t_k`; those samples join the history, so the spacing becomes
//!    the internal step size and the errors above shrink accordingly. Inside a step the
//!    importer is also asked at the stage times where the integrator evaluates the equations
//!    ([`InputRequest::Stage`]): the engine is wrapped for the step ([`StageSampled`]), and
//!    before an evaluation at a new time `t_s` inside the step the segment of each answered
//!    input becomes the quadratic through the last two accepted samples and `(t_s, u(t_s))`,
//!    with `t0 = t_s`. So `u(t_s)` is the importer's value exactly, and `u̇`, `ü` are the
//!    derivatives of that interpolant (errors `O(h²)`, `O(h)` in the internal step `h`,
//!    interpolated, not extrapolated). A stage time within `1e-5·max(1, |t|)` of the accepted
//!    time or of an earlier request reuses that segment: the integrators' finite differences
//!    in time (`∛ε·max(1, |t|)` ≈ 6e-6) never reach the importer, and repeated evaluations at
//!    one stage time (Newton iterations) ask once.

mod reconstruct;
mod rough_answers;
use reconstruct::stage_segment;
use rough_answers::RoughAnswers;

pub use reconstruct::InputState;

use crate::description::{
    Causality, SolverSetting, StatKind, VarKind, VarType, Variability, VariableTable,
};
use crate::integrate::any::AnyIntegrator;
use crate::integrate::clock::CallClock;
use crate::integrate::events::{
    Event, EventFunctions, EventLocator, StepOutcome, MAX_CPU_SECONDS_PER_CALL, MAX_STEPS_PER_CALL,
};
use crate::integrate::{
    rtol_in_range, InputKink, IntegrateError, Integrator, JacobianStrategy, MechState, Method,
    MultibodySystem, Settings, Stats, RTOL_MIN,
};
use crate::mbs::inputs::{InputSegment, InputSignals};
use crate::mbs::spec::Reconstruction;
use crate::mbs::{ModelError, ModelSpec};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use thiserror::Error;

pub mod shape;

/// How often (in communication points) [`Engine::check_state`] runs. What it watches grows
/// smoothly, so a few points late costs little; at every point it took a tenth of a
/// slider-crank's time at 1 ms steps.
pub const CHECK_STATE_EVERY: u32 = 16;

/// The spacing of doubles at `t` (one unit in the last place of `|t|`).
pub fn time_spacing(t: f64) -> f64 {
    let a = t.abs();
    f64::from_bits(a.to_bits() + 1) - a
}

/// How far a master's communication point may lie from the instance time before a step of
/// `h` is refused: rounding, never a part of the step. The FMU ends each step on the master's
/// `t + h`, so a master that sums its steps passes that time bit for bit, and one that computes
/// `t0 + k·H` differs from it by an ulp of `t` (measured over 1e6 steps at t0 = 0, 1e3, 1e6);
/// 64 spacings leave room for other ways of computing the time. At most 1e-3 of the step
/// (unless the step is that close to the time resolution itself), and never more than the
/// 1e-9·max(1, |t|) of before, which at t = 1e6 let a master off by 0.9 ms of a 1 ms step pass.
pub fn communication_point_tolerance(t: f64, h: f64) -> f64 {
    (1e-9 * t.abs().max(1.0)).min((1e-3 * h).max(64.0 * time_spacing(t)))
}

/// A step refused as too short that a time near 0 would have allowed: at `|t| > 1` the
/// methods' minimum step is 16 spacings of doubles at `t` (`16 ε |t|`), against `16 ε` near 0.
/// Only a step a model can need counts, at least [`RESOLVABLE_NEED`] times that minimum near
/// 0: a step that collapsed without bound (an error test that no size passes) ends a few
/// rounding units below the minimum wherever it is, and at t = 4.28 (minimum 7.6e-15 s) such
/// a collapse was blamed on the time's resolution, with the advice to start nearer 0, which
/// cannot help it.
fn step_below_time_resolution(e: &IntegrateError) -> bool {
    matches!(e, IntegrateError::StepTooSmall { t, h, .. }
        if t.abs() > 1.0 && *h >= RESOLVABLE_NEED * 16.0 * f64::EPSILON)
}

/// How many times the minimum step near t = 0 a refused step must be for the time's
/// resolution to be blamed (3.6e-12 s: the stiff double pendulum's first steps are 1.4e-9 s).
const RESOLVABLE_NEED: f64 = 1e3;

/// How far a step of `h` may end past the stop time `stop` of a run from `start`: rounding,
/// not a part of the step (a step ending 0.9 ms past a stop at 1e6 + 1 s was taken until
/// session 28). A master that sums its steps drifts from the exact sum by up to half a spacing
/// of doubles per step, the same way in every step (0.41 of a spacing per step summing 1 ms
/// from 1e6 s: 4.8e-5 s after 1e6 steps), so its last step may end that far past a stop time
/// computed as `start + n·h`: the bound for `(stop − start)/h` steps of `h`, or 64 spacings,
/// and never more than the 1e-9·max(1, |stop|) of before.
pub fn stop_time_tolerance(start: f64, stop: f64, h: f64) -> f64 {
    let spacing = time_spacing(start.abs().max(stop.abs()));
    let drift = 0.5 * spacing * ((stop - start) / h).max(1.0);
    (1e-9 * stop.abs().max(1.0)).min(drift.max(64.0 * spacing))
}

/// What the co-simulation layer needs from the engine beyond the integrator traits
/// (implemented by `mbs::system::System`; generic so the layer can be tested with small
/// systems).
pub trait Engine:
    MultibodySystem + EventFunctions + Clone + Serialize + DeserializeOwned + Send + 'static
{
    /// Change parameters together, all or none (`(index, value)` pairs); with `rules`, checked
    /// against every rule of the model file they take part in.
    fn set_parameters(&mut self, changes: &[(usize, f64)], rules: bool) -> Result<(), ModelError>;
    /// Every rule of the model file on the current parameter values.
    fn check_parameters(&self) -> Result<(), ModelError> {
        Ok(())
    }
    /// The engine's current value of parameter `i` when it computes some itself (calculated
    /// parameters after initialization); `None`: the value last set.
    fn parameter_value(&self, _i: usize) -> Option<f64> {
        None
    }
    /// Before initialization: bring the calculated parameters up to the parameters set so
    /// far (what the initial state does first anyway); a no-op when they are.
    fn resolve_parameters(&mut self) -> Result<(), ModelError> {
        Ok(())
    }
    /// After a state was restored: take what the engine keeps of the model's files and a
    /// serialized state leaves out (the table files' contents) from `spec`, the model of the
    /// simulation.
    fn adopt_model_files(&mut self, _spec: &ModelSpec) {}
    fn inputs_mut(&mut self) -> &mut InputSignals;
    /// Built-in motions (not inputs) with rate or acceleration jumps: evaluate them by their
    /// right limits at `t` (where the state continues from).
    fn set_motion_right_limit_at(&mut self, _t: f64) {}
    /// The earliest built-in motion breakpoint in `(after, before)`, where steps must land.
    fn next_motion_breakpoint(&self, _after: f64, _before: f64) -> Option<f64> {
        None
    }
    /// Whether a built-in motion has a breakpoint exactly at `t`.
    fn has_motion_breakpoint_at(&self, _t: f64) -> bool {
        false
    }
    /// A consistent state at `t0` for the current parameters and inputs.
    fn initial_state(&mut self, t0: f64) -> Result<MechState, ModelError>;
    fn n_outputs(&self) -> usize;
    fn evaluate_outputs(&mut self, x: &MechState, out: &mut [f64]) -> Result<(), ModelError>;
    /// Accelerations and multipliers at a state (saddle-point system).
    fn accelerations(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
    ) -> Result<(Vec<f64>, Vec<f64>), ModelError>;
    /// Per input in `inputs`: the derivatives of every output with respect to the input's
    /// value, rate and second rate at `x.t`, at the fixed state `x`.
    fn output_input_derivatives(
        &mut self,
        x: &MechState,
        inputs: &[usize],
    ) -> Result<Vec<crate::mbs::system::InputDerivatives>, ModelError>;
    /// After a failed step at state `x`: a sentence on a cause the engine can see there (a
    /// mechanism at a singular position), added to the failure's message.
    fn failure_cause(&self, _x: &MechState) -> Option<String> {
        None
    }
    /// A sentence on parameter values far outside what double-precision solvers handle,
    /// added to a failure's message (a damping of 1e308 fails as "singular matrix").
    fn parameter_note(&self) -> Option<String> {
        None
    }
    /// After a completed step at state `x`: an error where the state is wrong in a way the
    /// integration cannot see (a constraint dropped as redundant at assembly that no longer
    /// holds). Called at every [`CHECK_STATE_EVERY`]th communication point.
    fn check_state(&mut self, _x: &MechState) -> Result<(), ModelError> {
        Ok(())
    }
}

impl Engine for crate::mbs::system::System {
    fn set_parameters(&mut self, changes: &[(usize, f64)], rules: bool) -> Result<(), ModelError> {
        crate::mbs::system::System::set_parameters_with(self, changes, rules)
    }
    fn check_parameters(&self) -> Result<(), ModelError> {
        crate::mbs::system::System::check_parameters(self)
    }
    fn parameter_value(&self, i: usize) -> Option<f64> {
        crate::mbs::system::System::parameters(self).get(i).copied()
    }
    fn resolve_parameters(&mut self) -> Result<(), ModelError> {
        crate::mbs::system::System::resolve_parameters(self)
    }
    fn adopt_model_files(&mut self, spec: &ModelSpec) {
        crate::mbs::system::System::adopt_source_contents(self, spec)
    }
    fn inputs_mut(&mut self) -> &mut InputSignals {
        crate::mbs::system::System::inputs_mut(self)
    }
    fn set_motion_right_limit_at(&mut self, t: f64) {
        crate::mbs::system::System::set_motion_right_limit_at(self, t)
    }
    fn next_motion_breakpoint(&self, after: f64, before: f64) -> Option<f64> {
        crate::mbs::system::System::next_motion_breakpoint(self, after, before)
    }
    fn has_motion_breakpoint_at(&self, t: f64) -> bool {
        crate::mbs::system::System::has_motion_breakpoint_at(self, t)
    }
    fn initial_state(&mut self, t0: f64) -> Result<MechState, ModelError> {
        crate::mbs::system::System::initial_state(self, t0)
    }
    fn n_outputs(&self) -> usize {
        crate::mbs::system::System::n_outputs(self)
    }
    fn evaluate_outputs(&mut self, x: &MechState, out: &mut [f64]) -> Result<(), ModelError> {
        crate::mbs::system::System::evaluate_outputs(self, x, out)
    }
    fn accelerations(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
    ) -> Result<(Vec<f64>, Vec<f64>), ModelError> {
        crate::mbs::system::System::accelerations(self, t, q, v)
    }
    fn output_input_derivatives(
        &mut self,
        x: &MechState,
        inputs: &[usize],
    ) -> Result<Vec<crate::mbs::system::InputDerivatives>, ModelError> {
        crate::mbs::system::System::output_input_derivatives(self, x, inputs)
    }
    fn failure_cause(&self, x: &MechState) -> Option<String> {
        crate::mbs::singular::singular_position(self, x)
    }
    fn check_state(&mut self, x: &MechState) -> Result<(), ModelError> {
        self.check_dropped_rows(x)
    }
    fn parameter_note(&self) -> Option<String> {
        crate::mbs::system::System::extreme_parameters(self)
    }
}

#[derive(Debug, Error, Clone, PartialEq)]
pub enum CosimError {
    #[error("unknown value reference {0}")]
    UnknownVr(u32),
    /// `actual` and `requested` are FMI 3 type names ([`CosimError::in_fmi2_terms`] gives the
    /// FMI 2 ones).
    #[error("variable `{name}` (value reference {vr}) is of type {actual}, not {requested}")]
    WrongType {
        vr: u32,
        name: String,
        actual: &'static str,
        requested: &'static str,
    },
    #[error("variable `{name}`: value {value} is not finite")]
    NotFinite { name: String, value: f64 },
    #[error("variable `{name}` has causality {causality} and cannot be set")]
    NotSettable {
        name: String,
        causality: &'static str,
    },
    #[error("variable `{name}` is not tunable: it can only be set before initialization ends")]
    NotTunable { name: String },
    #[error("variable `{name}`: invalid value {value}: {reason}")]
    InvalidValue {
        name: String,
        value: String,
        reason: String,
    },
    #[error("{what} in the model file: {reason}")]
    FileSetting { what: String, reason: String },
    /// A failure with what the engine sees as its likely cause ([`Engine::parameter_note`]).
    #[error("{source}; {note}")]
    Noted {
        source: Box<CosimError>,
        note: String,
    },
    #[error(
        "the parameter values set before initialization ended ({values}) break a rule of the \
         model file: {reason}"
    )]
    RulesBroken { values: String, reason: String },
    #[error("variables {values}, set together: {reason}")]
    InvalidValues { values: String, reason: String },
    #[error("model: {0}")]
    Model(#[from] ModelError),
    #[error("integrator: {0}")]
    Integrate(#[from] IntegrateError),
    #[error("the instance is not initialized")]
    NotInitialized,
    #[error("communication point {requested} does not match the instance time {current}")]
    TimeMismatch { requested: f64, current: f64 },
    #[error("invalid communication step size {0} (must be finite and positive)")]
    InvalidStepSize(f64),
    #[error("step to {} goes past the stop time {} (by {:.3e} s, more than rounding)", show_real(*t_end), show_real(*stop), t_end - stop)]
    PastStop { t_end: f64, stop: f64 },
    #[error("output derivatives of order {order} are not available: {reason}")]
    OutputDerivative { order: i64, reason: String },
    #[error("directional derivative: {0}")]
    Derivative(String),
    #[error("state does not belong to this model: {0}")]
    ForeignState(String),
}

impl CosimError {
    /// A failed computation (the model or the integrator), not a wrong call.
    pub fn is_computation(&self) -> bool {
        match self {
            CosimError::Integrate(_) | CosimError::Model(_) => true,
            CosimError::Noted { source, .. } => source.is_computation(),
            _ => false,
        }
    }

    /// The error as an FMI 2 importer reads it: the types by their FMI 2 names (Real,
    /// Integer; a tester read "is of type Int64, not Float64" from fmi2GetReal).
    pub fn in_fmi2_terms(self) -> CosimError {
        fn fmi2_name(t: &'static str) -> &'static str {
            match t {
                "Float64" => "Real",
                "Int64" => "Integer",
                other => other,
            }
        }
        match self {
            CosimError::WrongType {
                vr,
                name,
                actual,
                requested,
            } => CosimError::WrongType {
                vr,
                name,
                actual: fmi2_name(actual),
                requested: fmi2_name(requested),
            },
            e => e,
        }
    }
}

/// Where the instance is in its life cycle, as far as setting variables is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetPhase {
    /// Instantiated or initialization mode: parameters, solver settings and inputs.
    Setup,
    /// Step mode: inputs and tunable parameters.
    Stepping,
}

/// Why [`Simulation::advance_to`] asks the importer for input values inside a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputRequest {
    /// After an accepted internal step (FMI 3 `intermediateStepFinished = true`).
    AcceptedStep,
    /// At a stage time of a step in progress, which may still be rejected
    /// (`intermediateStepFinished = false`).
    Stage,
}

/// The importer's answer source inside a step: called with the time and the reason, returns
/// `(input index, value)` for the inputs it provides.
pub type InputCallback<'a> = &'a mut dyn FnMut(f64, InputRequest) -> Vec<(usize, f64)>;

/// How a call to [`Simulation::advance_to`] ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Advance {
    Completed,
    /// The integrator could not go further than `last_successful_time`; the instance is there
    /// and usable (retry with a smaller step, or restore a saved state).
    Discard {
        last_successful_time: f64,
        reason_is_recoverable: bool,
    },
    /// Early return (only when enabled with [`Simulation::set_early_return`]): the step ended
    /// on a contact event before `t_end`; the instance is at `event.t` with outputs there.
    EarlyReturn {
        event: Event,
    },
}

/// Everything that changes during a simulation: what FMU state save/restore copies.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SimState<E> {
    engine: E,
    integrator: Option<AnyIntegrator>,
    settings: Settings,
    tolerance: Option<f64>,
    params: Vec<f64>,
    inputs: Vec<InputState>,
    /// Inputs were set since the engine's segments were last built.
    inputs_dirty: bool,
    /// Current state (initial state in initialization mode, last communication point after).
    x: Option<MechState>,
    outputs: Vec<f64>,
    outputs_valid: bool,
    start: f64,
    stop: Option<f64>,
    initialized: bool,
    reinit: bool,
    stats_base: Stats,
    cpu_time: f64,
    /// Size of the last communication step (for output-derivative fallbacks).
    last_h: f64,
    /// Contact event location inside the communication step (idle without contacts).
    events: EventLocator,
    /// Whether the importer's answers inside the steps were found rough, and for how many
    /// steps they are not asked for (`rough_answers.rs`).
    rough: RoughAnswers,
    /// What the engine saw at the last Discard's state ([`Engine::failure_cause`]); part of
    /// the message only, so not kept in an FMU state.
    #[serde(skip)]
    failure_cause: Option<String>,
    /// Where the current (or last) communication step started (for the advice of a Discard).
    #[serde(skip)]
    call_start: f64,
    /// Communication points since the engine last checked the state ([`Engine::check_state`]).
    #[serde(skip)]
    unchecked_points: u32,
    /// Initialization Mode: the columns of the output/input Jacobian computed so far through
    /// the initial state ([`Simulation::initial_jacobian_column`]), per input; cleared by
    /// whatever changes the initial state ([`Simulation::invalidate`]).
    #[serde(skip)]
    initial_columns: Vec<Option<Vec<f64>>>,
    /// Parameters were taken before initialization ended that broke a rule of the model file
    /// together with the others ([`Simulation::set_reals`]). Not serialized (the format
    /// stays): a restored state before initialization checks again.
    #[serde(skip)]
    rules_pending: bool,
}

/// A co-simulation instance of one model.
pub struct Simulation<E: Engine> {
    spec: Arc<ModelSpec>,
    table: Arc<VariableTable>,
    st: SimState<E>,
    /// Stop a communication step at the first contact event (FMI 3 early return).
    early_return: bool,
    /// CPU seconds one communication step may take ([`MAX_CPU_SECONDS_PER_CALL`] unless set).
    cpu_budget: f64,
    /// Messages for the importer's log since the last [`Simulation::take_notes`].
    notes: Vec<String>,
}

fn causality_name(c: Causality) -> &'static str {
    match c {
        Causality::Parameter => "parameter",
        Causality::Input => "input",
        Causality::Output => "output",
        Causality::Local => "local",
        Causality::Independent => "independent",
        Causality::CalculatedParameter => "calculatedParameter",
    }
}

fn type_name(t: VarType) -> &'static str {
    match t {
        VarType::Float64 => "Float64",
        VarType::Int64 => "Int64",
        VarType::Enumeration(_) => "Enumeration",
    }
}

impl<E: Engine> Simulation<E> {
    /// A fresh instance with the model's default parameters and solver settings.
    pub fn new(spec: Arc<ModelSpec>, table: Arc<VariableTable>, engine: E) -> Simulation<E> {
        let inputs = spec
            .inputs
            .iter()
            .map(|u| InputState::new(u.start))
            .collect();
        let n_out = engine.n_outputs();
        Simulation {
            st: SimState {
                engine,
                integrator: None,
                settings: spec.solver,
                tolerance: None,
                params: spec.default_parameters(),
                inputs,
                inputs_dirty: true,
                x: None,
                outputs: vec![0.0; n_out],
                outputs_valid: false,
                start: spec.experiment.start,
                stop: None,
                initialized: false,
                reinit: false,
                stats_base: Stats::default(),
                cpu_time: 0.0,
                last_h: 0.0,
                events: EventLocator::default(),
                rough: RoughAnswers::default(),
                failure_cause: None,
                call_start: 0.0,
                unchecked_points: 0,
                initial_columns: Vec::new(),
                rules_pending: false,
            },
            spec,
            table,
            early_return: false,
            cpu_budget: MAX_CPU_SECONDS_PER_CALL,
            notes: Vec::new(),
        }
    }

    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }
    pub fn table(&self) -> &VariableTable {
        &self.table
    }
    pub fn settings(&self) -> Settings {
        self.effective_settings()
    }
    /// Whether the model has contact events (event location runs inside every step; early
    /// return is possible).
    pub fn has_events(&self) -> bool {
        self.st.engine.n_events() > 0
    }
    /// FMI 3 early return: when on, [`Simulation::advance_to`] ends a communication step at
    /// the first contact event inside it with [`Advance::EarlyReturn`].
    pub fn set_early_return(&mut self, on: bool) {
        self.early_return = on;
    }
    /// Whether early return is on.
    pub fn early_return(&self) -> bool {
        self.early_return
    }
    /// The CPU seconds one communication step may take (default
    /// [`MAX_CPU_SECONDS_PER_CALL`]; `f64::INFINITY`: no CPU limit). The limit keeps an
    /// importer's thread from being blocked for long, but where it ends a step depends on the
    /// machine's speed and load; a caller that has no host thread to protect (`mbsfmu
    /// simulate`, tests) lifts it so that its results do not. The step limit
    /// ([`MAX_STEPS_PER_CALL`]) stays.
    pub fn set_cpu_budget_per_call(&mut self, seconds: f64) {
        self.cpu_budget = seconds;
    }
    /// Counters of the contact event location (located events, re-steps, discarded work).
    pub fn event_stats(&self) -> crate::integrate::events::EventStats {
        self.st.events.stats
    }
    /// Why the last internal step failed during the last communication step (for the message
    /// of a Discard).
    pub fn last_failure(&self) -> Option<String> {
        let err = self.st.events.last_error()?;
        let e = err.to_string();
        // A work budget that ran out: which setting made the steps that short. Tolerances
        // tighter than the defaults are the usual cause (tighter ones only make it worse).
        let budget = match err {
            IntegrateError::WorkBudget { t, steps, .. } if *steps > 0 => {
                let s = self.effective_settings();
                let d = Settings::default();
                let mean = (t - self.st.call_start) / *steps as f64;
                // Steps at (or within a few percent of) the largest the settings allow: that
                // setting made them short, whatever the tolerances ask for.
                let limit = [
                    ("solver.max_step", s.max_step),
                    ("[solver] fixed_step", s.fixed_step.unwrap_or(0.0)),
                ]
                .into_iter()
                .find(|&(_, h)| h > 0.0 && mean >= 0.95 * h);
                let tight: Vec<String> = [
                    ("solver.rtol", s.rtol, d.rtol),
                    ("solver.atol", s.atol, d.atol),
                ]
                .iter()
                .filter(|(_, v, def)| v < def)
                .map(|(n, v, def)| format!("{n} = {v:e} (default {def:e})"))
                .collect();
                if let Some((name, h)) = limit {
                    format!(
                        "; the internal steps averaged {mean:.3e} s against {name} = {}: \
                         that setting limits them (not the tolerances), so this communication \
                         step needs more of them than one call may take: raise {name} or use \
                         shorter communication steps",
                        show_real(h)
                    )
                } else if tight.is_empty() {
                    format!(
                        "; the internal steps averaged {mean:.3e} s: use shorter communication \
                         steps, or another solver.integrator (bdf for stiff models)"
                    )
                } else {
                    format!(
                        "; the internal steps averaged {mean:.3e} s, which the tolerances \
                         {} ask for: loosen them, or use shorter communication steps or \
                         another solver.integrator (tighter tolerances make the steps shorter \
                         still)",
                        tight.join(", ")
                    )
                }
            }
            _ => String::new(),
        };
        // A minimum step set by the time's resolution, not by the model: at t = 5e5 the
        // stiff double pendulum's first steps (1.4e-9 s, as from t = 0) are below the 16
        // spacings of doubles (1.8e-9 s) a step must span.
        let resolution = match err {
            IntegrateError::StepTooSmall { t, .. } if step_below_time_resolution(err) => format!(
                "; that minimum is set by the resolution of doubles at t = {} (they are {:.3e} \
                 s apart there; at |t| <= 1 the minimum is {:.3e} s), not by the model: the \
                 model needs shorter steps here than a time this large can resolve; start the \
                 simulation nearer t = 0 (shift the model's time axis), since shorter \
                 communication steps or tighter tolerances do not help",
                show_real(*t),
                time_spacing(*t),
                16.0 * f64::EPSILON
            ),
            _ => String::new(),
        };
        // What to choose instead, for the methods that stall on stiff models.
        let hint = match self.effective_settings().method {
            Method::Dopri5 => {
                "; this method treats the forces explicitly, so stiff springs, dampers and \
                 contacts bound its step size: for stiff models use solver.integrator = bdf \
                 (or sdirk, rosenbrock_nystrom)"
            }
            Method::HalfImplicit => {
                "; this method treats the forces explicitly and is first order, so stiff \
                 springs, dampers and contacts bound its step size, and so does a velocity \
                 that starts from zero under a large acceleration (a rig's input start-up): \
                 use solver.integrator = bdf (or sdirk, rosenbrock_nystrom)"
            }
            Method::LocalLinearization => {
                "; local_linearization evaluates a matrix exponential of the full Jacobian in \
                 every step, slow on models with many coordinates or frequent Jacobian \
                 changes: use solver.integrator = bdf"
            }
            _ => "",
        };
        let cause = self
            .st
            .failure_cause
            .as_ref()
            .map_or(String::new(), |c| format!("; {c}"));
        Some(format!("{e}{budget}{resolution}{cause}{hint}"))
    }

    /// Whether the last Discard came from a step size below the minimum that the resolution
    /// of the time sets at large `|t|` (a start time nearer 0 helps, a shorter communication
    /// step does not).
    pub fn last_failure_is_time_resolution(&self) -> bool {
        self.st
            .events
            .last_error()
            .is_some_and(step_below_time_resolution)
    }

    /// Whether the last Discard came from the work budget of one call running out (not from
    /// a step the method could not take).
    pub fn last_failure_is_work_budget(&self) -> bool {
        matches!(
            self.st.events.last_error(),
            Some(IntegrateError::WorkBudget { .. })
        )
    }

    /// Refuse, before any work, a communication step to `t_end` that the settings make cost
    /// more than the work budget of one call ([`MAX_STEPS_PER_CALL`]): a fixed step or
    /// `solver.max_step` that small against the step.
    pub fn check_step_budget(&self, t_end: f64) -> Result<(), CosimError> {
        let s = self.effective_settings();
        let span = t_end - self.time();
        // (name, value, whether it is a variable of the FMU: the fixed step is the file's only)
        for (name, h, variable) in [
            ("solver.max_step", s.max_step, true),
            ("[solver] fixed_step", s.fixed_step.unwrap_or(0.0), false),
        ] {
            // The steps counted as BDF plans them, ⌈span/h − 1e-6⌉, so that rounding does not
            // add one: 1 ms from t = 8e-3 s is 1.0000000000000009e-3 s, 5000.0000000004 steps
            // of 2e-7 s, which refused the 9th step of a run set up for exactly 5000.
            if h > 0.0 && h.is_finite() && span / h - 1e-6 > MAX_STEPS_PER_CALL as f64 {
                let reason = format!(
                    "a communication step of {} s would need {:.3e} internal steps, more than \
                     the work budget of {MAX_STEPS_PER_CALL} per call; raise {name} or use \
                     shorter communication steps",
                    show_real(span),
                    span / h
                );
                if !variable {
                    return Err(CosimError::FileSetting {
                        what: format!("{name} = {}", show_real(h)),
                        reason,
                    });
                }
                return Err(CosimError::InvalidValue {
                    name: name.into(),
                    value: show_real(h),
                    reason,
                });
            }
        }
        Ok(())
    }
    pub fn is_initialized(&self) -> bool {
        self.st.initialized
    }

    /// Current time: the start time before initialization, then the last communication point
    /// (or the last successful time after a Discard).
    pub fn time(&self) -> f64 {
        self.st.x.as_ref().map_or(self.st.start, |x| x.t)
    }

    fn effective_settings(&self) -> Settings {
        let mut s = self.st.settings;
        if let Some(tol) = self.st.tolerance {
            s.rtol = tol;
        }
        s
    }

    fn var(&self, vr: u32) -> Result<&crate::description::Variable, CosimError> {
        self.table.get(vr).ok_or(CosimError::UnknownVr(vr))
    }

    /// Start of initialization: experiment data from the importer. `tolerance` overrides
    /// `solver.rtol`.
    pub fn setup_experiment(
        &mut self,
        tolerance: Option<f64>,
        start: f64,
        stop: Option<f64>,
    ) -> Result<(), CosimError> {
        if !start.is_finite() {
            return Err(CosimError::InvalidValue {
                name: "startTime".into(),
                value: start.to_string(),
                reason: "not finite".into(),
            });
        }
        if let Some(tol) = tolerance {
            if !rtol_in_range(tol) {
                return Err(CosimError::InvalidValue {
                    name: "tolerance".into(),
                    value: tol.to_string(),
                    reason: format!("must be in [{RTOL_MIN:e}, 1)"),
                });
            }
        }
        if let Some(stop) = stop {
            if stop.is_nan() || stop < start {
                return Err(CosimError::InvalidValue {
                    name: "stopTime".into(),
                    value: stop.to_string(),
                    reason: format!("must not be before the start time {start}"),
                });
            }
        }
        self.st.tolerance = tolerance;
        self.st.start = start;
        self.st.stop = stop;
        self.invalidate();
        Ok(())
    }

    fn invalidate(&mut self) {
        self.st.outputs_valid = false;
        self.st.initial_columns.clear();
        if !self.st.initialized {
            self.st.x = None;
        }
    }

    // ---- setting and getting by value reference ----

    /// Set a Float64 variable ([`Simulation::set_reals`] of one).
    pub fn set_real(
        &mut self,
        vr: u32,
        value: f64,
        phase: SetPhase,
    ) -> Result<Option<String>, CosimError> {
        self.set_reals(&[vr], &[value], phase)
    }

    /// Set Float64 variables, all or none: every value is checked before any is applied, and
    /// the parameters among them against the model file's rules together (limits set in one
    /// call may pass through an order that is invalid one at a time). An error changes
    /// nothing ("argument errors leave the instance state unchanged", docs/fmi-runtime.md).
    ///
    /// Before initialization ends, parameters arrive one at a time (fmpy sets start values in
    /// the order of the model description), so a value that breaks a rule of the file only
    /// together with the others as they are now (`lower` set above the old `upper`) is taken
    /// with a warning (`Ok(Some(message))`), and the rules are checked again when
    /// initialization ends or an output is read ([`Simulation::check_pending_rules`]).
    pub fn set_reals(
        &mut self,
        vrs: &[u32],
        values: &[f64],
        phase: SetPhase,
    ) -> Result<Option<String>, CosimError> {
        let mut warning = None;
        // Two passes: check everything (collecting the parameters, which are checked
        // together), then apply; inputs and settings are applied in a second walk, so that a
        // rig's input Set allocates nothing.
        let mut params: Vec<(usize, f64, String)> = Vec::new();
        for (&vr, &value) in vrs.iter().zip(values) {
            let v = self.var(vr)?;
            if v.var_type != VarType::Float64 {
                return Err(CosimError::WrongType {
                    vr,
                    name: v.name.clone(),
                    actual: type_name(v.var_type),
                    requested: "Float64",
                });
            }
            self.check_settable(v, phase)?;
            if !value.is_finite() {
                return Err(CosimError::NotFinite {
                    name: v.name.clone(),
                    value,
                });
            }
            let bad = |reason: String| CosimError::InvalidValue {
                name: v.name.clone(),
                value: show_real(value),
                reason,
            };
            match v.kind {
                VarKind::Parameter(i) => {
                    if let Some(rule) = &self.spec.parameters[i].rule {
                        rule.check(value).map_err(bad)?;
                    }
                    params.retain(|p| p.0 != i);
                    // A master that sets every tunable parameter before each step, mostly to
                    // the values they have (Simulink's FMU block does), must not pay for a
                    // check against the file's rules and a restart of the integrator each time.
                    if value.to_bits() != self.st.params[i].to_bits() {
                        params.push((i, value, v.name.clone()));
                    }
                }
                VarKind::Input(_) => check_input_magnitude(&v.name, value)?,
                VarKind::Solver(s) => {
                    let reason = match s {
                        SolverSetting::Rtol if !rtol_in_range(value) => "must be in [1e-14, 1)",
                        SolverSetting::Atol if value <= 0.0 => "must be positive",
                        SolverSetting::MaxStep | SolverSetting::InitialStep if value < 0.0 => {
                            "must be non-negative"
                        }
                        _ => "",
                    };
                    if !reason.is_empty() {
                        return Err(bad(reason.into()));
                    }
                }
                _ => {
                    return Err(CosimError::NotSettable {
                        name: v.name.clone(),
                        causality: causality_name(v.causality),
                    })
                }
            }
        }
        if !params.is_empty() {
            let changes: Vec<(usize, f64)> = params.iter().map(|p| (p.0, p.1)).collect();
            // "`n` = v, …": the refusal and the warning name the same values.
            let names = params
                .iter()
                .map(|(_, x, n)| format!("`{n}` = {}", show_real(*x)))
                .collect::<Vec<_>>()
                .join(", ");
            let refused = |e: ModelError| match &params[..] {
                [(_, x, n)] => CosimError::InvalidValue {
                    name: n.clone(),
                    value: show_real(*x),
                    reason: e.to_string(),
                },
                _ => CosimError::InvalidValues {
                    values: names.clone(),
                    reason: e.to_string(),
                },
            };
            match self.st.engine.set_parameters(&changes, true) {
                Ok(()) => {}
                Err(e) if !self.st.initialized => {
                    // Possibly only in this order: taken, and checked again at the end of
                    // initialization (what cannot be built at all is still refused here).
                    self.st
                        .engine
                        .set_parameters(&changes, false)
                        .map_err(refused)?;
                    warning = Some(format!(
                        "{names} taken for now, but with the other parameters as they are the \
                         model file's rules do not hold: {e}; checked again when initialization \
                         ends (another parameter may be set next)"
                    ));
                    self.st.rules_pending = true;
                }
                Err(e) => return Err(refused(e)),
            }
            for &(i, value, _) in &params {
                self.st.params[i] = value;
            }
            if self.st.initialized {
                // The integrator's history (and Jacobians) belong to the old parameters.
                self.st.reinit = true;
            }
        }
        for (&vr, &value) in vrs.iter().zip(values) {
            match self.var(vr)?.kind {
                VarKind::Input(i) => {
                    self.st.inputs[i].value = value;
                    self.st.inputs_dirty = true;
                }
                VarKind::Solver(SolverSetting::Rtol) => self.st.settings.rtol = value,
                VarKind::Solver(SolverSetting::Atol) => self.st.settings.atol = value,
                VarKind::Solver(SolverSetting::MaxStep) => self.st.settings.max_step = value,
                VarKind::Solver(SolverSetting::InitialStep) => {
                    self.st.settings.initial_step = value
                }
                // Parameters: applied above; nothing else passed the checks.
                _ => {}
            }
        }
        self.invalidate();
        Ok(warning)
    }

    /// The model file's rules on the parameters set before initialization ended with a
    /// warning ([`Simulation::set_reals`]): an argument error naming the parameters set so far
    /// when they still fail (the instance stays where it is; set a valid value and go on).
    fn check_pending_rules(&mut self) -> Result<(), CosimError> {
        if !self.st.rules_pending {
            return Ok(());
        }
        self.st.engine.check_parameters().map_err(|e| {
            let set: Vec<String> = self
                .spec
                .parameters
                .iter()
                .zip(&self.st.params)
                .filter(|(p, v)| !p.calculated && p.value.to_bits() != v.to_bits())
                .map(|(p, v)| format!("`{}` = {}", p.name, show_real(*v)))
                .collect();
            CosimError::RulesBroken {
                values: set.join(", "),
                reason: e.to_string(),
            }
        })?;
        self.st.rules_pending = false;
        Ok(())
    }

    /// Set an Int64 or Enumeration variable (FMI 2 Integer, FMI 3 Int64).
    pub fn set_integer(&mut self, vr: u32, value: i64, phase: SetPhase) -> Result<(), CosimError> {
        self.set_integers(&[vr], &[value], phase)
    }

    /// Set Int64 or Enumeration variables, all or none (as [`Simulation::set_reals`]).
    pub fn set_integers(
        &mut self,
        vrs: &[u32],
        values: &[i64],
        phase: SetPhase,
    ) -> Result<(), CosimError> {
        let mut changes = Vec::with_capacity(vrs.len());
        for (&vr, &value) in vrs.iter().zip(values) {
            changes.push(self.check_integer(vr, value, phase)?);
        }
        for change in changes {
            match change {
                Ok(m) => self.st.settings.method = m,
                Err(j) => self.st.settings.jacobian = j,
            }
        }
        self.st.initial_columns.clear();
        Ok(())
    }

    /// What setting `vr` to `value` changes: an integrator (`Ok`) or a Jacobian strategy.
    fn check_integer(
        &self,
        vr: u32,
        value: i64,
        phase: SetPhase,
    ) -> Result<Result<Method, JacobianStrategy>, CosimError> {
        let v = self.var(vr)?.clone();
        let VarType::Enumeration(et) = v.var_type else {
            if v.var_type == VarType::Float64 {
                return Err(CosimError::WrongType {
                    vr,
                    name: v.name,
                    actual: "Float64",
                    requested: "Int64",
                });
            }
            return Err(CosimError::NotSettable {
                name: v.name,
                causality: causality_name(v.causality),
            });
        };
        self.check_settable(&v, phase)?;
        let items = et.items();
        let Some((item, _)) = items.iter().find(|(_, val)| *val == value) else {
            return Err(CosimError::InvalidValue {
                name: v.name,
                value: value.to_string(),
                reason: format!("not an item of {} (1..={})", et.type_name(), items.len()),
            });
        };
        match v.kind {
            VarKind::Solver(SolverSetting::Integrator) => {
                let m = Method::from_name(item).expect("enumeration items are method names");
                if !AnyIntegrator::is_available(m) {
                    return Err(CosimError::InvalidValue {
                        name: v.name,
                        value: item.to_string(),
                        reason: "this method is not available in this build".into(),
                    });
                }
                Ok(Ok(m))
            }
            VarKind::Solver(SolverSetting::Jacobian) => {
                Ok(Err(JacobianStrategy::from_name(item)
                    .expect("enumeration items are strategy names")))
            }
            _ => Err(CosimError::NotSettable {
                name: v.name,
                causality: causality_name(v.causality),
            }),
        }
    }

    fn check_settable(
        &self,
        v: &crate::description::Variable,
        phase: SetPhase,
    ) -> Result<(), CosimError> {
        match v.causality {
            Causality::Parameter => {
                if phase == SetPhase::Stepping && v.variability != Variability::Tunable {
                    return Err(CosimError::NotTunable {
                        name: v.name.clone(),
                    });
                }
                Ok(())
            }
            Causality::Input => Ok(()),
            c => Err(CosimError::NotSettable {
                name: v.name.clone(),
                causality: causality_name(c),
            }),
        }
    }

    /// Get a Float64 variable.
    pub fn get_real(&mut self, vr: u32) -> Result<f64, CosimError> {
        let v = self.var(vr)?;
        if v.var_type != VarType::Float64 {
            return Err(CosimError::WrongType {
                vr,
                name: v.name.clone(),
                actual: type_name(v.var_type),
                requested: "Float64",
            });
        }
        let kind = v.kind;
        if let VarKind::Parameter(i) = kind {
            if self.spec.parameters[i].calculated && !self.st.initialized {
                // In Initialization Mode (and before) a calculated parameter follows the
                // parameters set so far, as the outputs do: the model is resolved again with
                // them, as the initial state would do first.
                self.st.engine.resolve_parameters()?;
            }
        }
        Ok(match kind {
            VarKind::Time => self.time(),
            VarKind::Parameter(i) => self
                .st
                .engine
                .parameter_value(i)
                .unwrap_or(self.st.params[i]),
            VarKind::Input(i) => self.st.inputs[i].value,
            VarKind::Solver(SolverSetting::Rtol) => self.effective_settings().rtol,
            VarKind::Solver(SolverSetting::Atol) => self.st.settings.atol,
            VarKind::Solver(SolverSetting::MaxStep) => self.st.settings.max_step,
            VarKind::Solver(SolverSetting::InitialStep) => self.st.settings.initial_step,
            VarKind::Solver(_) => unreachable!("enumerations are not Float64"),
            VarKind::Output(i) => {
                self.ensure_outputs()?;
                let y = self.st.outputs[i];
                if !y.is_finite() {
                    // After a failed step the state may hold NaN: say so instead of OK + NaN.
                    return Err(CosimError::Model(ModelError::Assembly {
                        file: self.spec.source_files.first().cloned().unwrap_or_default(),
                        message: format!(
                            "output `{}` is {y} at t = {} (the state is not finite: the last step failed; restore a saved state or reset)",
                            self.var(vr)?.name,
                            self.time()
                        ),
                    }));
                }
                y
            }
            VarKind::Stat(StatKind::CpuTime) => self.st.cpu_time,
            VarKind::Stat(_) => unreachable!("counters are Int64"),
        })
    }

    /// Get an Int64 or Enumeration variable.
    pub fn get_integer(&mut self, vr: u32) -> Result<i64, CosimError> {
        let v = self.var(vr)?;
        if v.var_type == VarType::Float64 {
            return Err(CosimError::WrongType {
                vr,
                name: v.name.clone(),
                actual: "Float64",
                requested: "Int64",
            });
        }
        let s = self.stats();
        Ok(match v.kind {
            VarKind::Solver(SolverSetting::Integrator) => {
                Method::ALL
                    .iter()
                    .position(|m| *m == self.st.settings.method)
                    .unwrap() as i64
                    + 1
            }
            VarKind::Solver(SolverSetting::Jacobian) => {
                JacobianStrategy::ALL
                    .iter()
                    .position(|j| *j == self.st.settings.jacobian)
                    .unwrap() as i64
                    + 1
            }
            VarKind::Stat(k) => {
                let n = match k {
                    StatKind::Steps => s.steps,
                    StatKind::RejectedSteps => s.rejected_steps,
                    StatKind::FEvals => s.f_evals,
                    StatKind::JacEvals => s.jac_evals,
                    StatKind::JacUpdates => s.jac_updates,
                    StatKind::Lu => s.lu,
                    StatKind::NewtonIters => s.newton_iters,
                    StatKind::Restarts => s.restarts,
                    StatKind::CpuTime => unreachable!("cpu time is Float64"),
                };
                n.min(i64::MAX as u64) as i64
            }
            _ => unreachable!("no other integer variables"),
        })
    }

    /// Settings that will likely give wrong results on this model, each with what to change.
    /// Not errors: the importer may know better (the FMI layer logs them as warnings at the end
    /// of initialization, the CLI prints them).
    pub fn advisories(&self) -> Vec<String> {
        let s = self.effective_settings();
        let mut out = Vec::new();
        if s.method == Method::LocalLinearization
            && self.has_events()
            && s.max_step == 0.0
            && s.fixed_step.is_none()
        {
            out.push(
                "solver.integrator = local_linearization on a model with contacts and \
                 solver.max_step = 0 (unbounded): the method is exact inside a linear contact \
                 mode, so its error estimate lets one step span a whole contact, which neither \
                 the estimate nor the event location sees. Set solver.max_step below the \
                 shortest contact duration (about π·sqrt(m/k) for a linear penalty contact of \
                 stiffness k on a mass m; 2e-3 s for models/bouncing_balls.toml)."
                    .to_string(),
            );
        }
        // Plausibility warnings from loading the model (unit slips, bodies nothing holds).
        out.extend(self.spec.warnings.iter().cloned());
        out
    }

    /// Messages for the importer's log that came up in the calls since the last take (the
    /// FMI layer logs them as warnings after each step).
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Communication steps that found the importer's answers inside the step rough
    /// (`rough_answers.rs`), since initialization.
    pub fn rough_answer_steps(&self) -> u64 {
        self.st.rough.found
    }

    /// Statistics cumulative since initialization.
    pub fn stats(&self) -> Stats {
        let mut s = self.st.stats_base;
        // Work of steps thrown away while locating contact events.
        crate::integrate::events::add_stats(&mut s, &self.st.events.stats.discarded);
        if let Some(i) = &self.st.integrator {
            let c = <AnyIntegrator as Integrator<E>>::stats(i);
            s.steps += c.steps;
            s.rejected_steps += c.rejected_steps;
            s.f_evals += c.f_evals;
            s.f_evals_jacobian += c.f_evals_jacobian;
            s.jac_evals += c.jac_evals;
            s.jac_updates += c.jac_updates;
            s.lu += c.lu;
            s.newton_iters += c.newton_iters;
            s.convergence_failures += c.convergence_failures;
            s.error_test_failures += c.error_test_failures;
            s.restarts += c.restarts;
        }
        s
    }

    /// FMI 2 input derivative of order 1 or 2 for the next communication step.
    pub fn set_input_derivative(
        &mut self,
        vr: u32,
        order: i64,
        value: f64,
    ) -> Result<(), CosimError> {
        let v = self.var(vr)?.clone();
        let VarKind::Input(i) = v.kind else {
            return Err(CosimError::NotSettable {
                name: v.name,
                causality: causality_name(v.causality),
            });
        };
        if !(1..=2).contains(&order) {
            return Err(CosimError::InvalidValue {
                name: v.name,
                value: format!("order {order}"),
                reason: "input derivatives of order 1 and 2 are supported".into(),
            });
        }
        check_input_magnitude(&v.name, value)?;
        self.st.inputs[i].derivs[order as usize - 1] = Some(value);
        self.st.inputs_dirty = true;
        self.invalidate();
        Ok(())
    }

    /// Index of an input by value reference (for the intermediate-update bookkeeping).
    pub fn input_index(&self, vr: u32) -> Option<usize> {
        match self.table.get(vr)?.kind {
            VarKind::Input(i) => Some(i),
            _ => None,
        }
    }

    // ---- inputs as segments ----

    /// Record the current value of every input as a sample at `t` and rebuild the engine's
    /// segments for a step of size `h` (see [`reconstruct`]: FMI 2 derivatives, the dense
    /// samples of intermediate updates, or the input's reconstruction mode).
    /// Between communication points the segments stay those the last step used (outputs at
    /// the end of a step are evaluated with the input the step was integrated with) until the
    /// importer sets an input.
    ///
    /// `at_sample`: the segments for outputs read at `t` itself, before the step
    /// ([`InputState::segment_at_sample`]: under `smooth` the value and slope carried over
    /// even where the new segment kinks); `doStep` rebuilds the step's own segments.
    /// Where the formulation eliminates driven motions (joint coordinates: they enter the
    /// equations through their jets, not as constraints): every excitation's jet at `t` as
    /// the committed segments (the ones the state was integrated with) give it, to tell the
    /// rate jumps of the new segments by ([`input_jump`]). `None` otherwise.
    fn committed_jets(&mut self, t: f64) -> Option<Vec<[f64; 3]>> {
        let e = &mut self.st.engine;
        if e.excitation_orders() < 3 || e.n_excitations() == 0 {
            return None;
        }
        let installed = e.inputs_mut().segments.clone();
        for (seg, inp) in e.inputs_mut().segments.iter_mut().zip(&self.st.inputs) {
            if let Some(c) = inp.committed {
                *seg = c;
            }
        }
        let jets = eliminated_jets(e, t);
        e.inputs_mut().segments = installed;
        jets
    }

    fn prepare_inputs(&mut self, t: f64, h: f64, at_sample: bool) {
        self.st.inputs_dirty = false;
        let signals = self.st.engine.inputs_mut();
        for (i, inp) in self.st.inputs.iter_mut().enumerate() {
            inp.record(t, inp.value);
            let mode = self.spec.inputs[i].reconstruction;
            signals.segments[i] = if at_sample {
                inp.segment_at_sample(mode, t, h)
            } else {
                inp.segment(mode, t, h)
            };
        }
    }

    /// The step size segments are built for before the importer's `doStep` says it: the last
    /// communication step (only `ü` at the communication point depends on it).
    fn expected_step(&self) -> f64 {
        if self.st.last_h > 0.0 {
            self.st.last_h
        } else {
            Some(self.spec.experiment.step)
                .filter(|h| *h > 0.0 && h.is_finite())
                .unwrap_or(1e-3)
        }
    }

    fn refresh_inputs(&mut self) {
        if self.st.inputs_dirty {
            let t = self.time();
            self.prepare_inputs(t, self.expected_step(), true);
        }
    }

    fn ensure_state(&mut self) -> Result<(), CosimError> {
        if self.st.x.is_none() {
            self.check_pending_rules()?;
            let t0 = self.st.start;
            self.prepare_inputs(t0, self.expected_step(), false);
            // A ramp starting at the start time moves with its slope from the start on.
            self.st.engine.set_motion_right_limit_at(t0);
            let x = self.st.engine.initial_state(t0)?;
            self.st.x = Some(x);
        }
        Ok(())
    }

    fn ensure_outputs(&mut self) -> Result<(), CosimError> {
        if self.st.outputs_valid {
            return Ok(());
        }
        self.ensure_state()?;
        self.refresh_inputs();
        let x = self.st.x.as_ref().expect("state ensured");
        self.st.engine.evaluate_outputs(x, &mut self.st.outputs)?;
        self.st.outputs_valid = true;
        Ok(())
    }

    /// Outputs at the current time.
    pub fn outputs(&mut self) -> Result<&[f64], CosimError> {
        self.ensure_outputs()?;
        Ok(&self.st.outputs)
    }

    /// End of initialization: the consistent initial state for the parameters and inputs set
    /// so far, and the integrator.
    pub fn initialize(&mut self) -> Result<(), CosimError> {
        self.initialize_plain()
            .map_err(|e| match self.st.engine.parameter_note() {
                Some(note) => CosimError::Noted {
                    source: Box::new(e),
                    note,
                },
                None => e,
            })
    }

    fn initialize_plain(&mut self) -> Result<(), CosimError> {
        self.st.x = None;
        self.ensure_state()?;
        let settings = self.effective_settings();
        let (n_q, n_c) = (self.st.engine.n_q(), self.st.engine.n_c());
        let mut integ = AnyIntegrator::new(settings, n_q, n_c)?;
        let x = self.st.x.clone().expect("state ensured");
        integ.initialize(&mut self.st.engine, &x)?;
        self.st.integrator = Some(integ);
        self.st.events = EventLocator::new(1e-3 * settings.atol);
        self.st.initialized = true;
        self.st.reinit = false;
        self.st.stats_base = Stats::default();
        self.st.outputs_valid = false;
        self.ensure_outputs()?;
        Ok(())
    }

    /// Advance from the current time to `t_end` (exactly). `intermediate`, when given, is
    /// called after every accepted internal step before `t_end` and at the stage times inside
    /// the steps (see the module documentation) with the time and the reason, and returns new
    /// input values `(input index, value)` valid at that time.
    ///
    /// Adds the call's time to `stats.cpu_time` (see [`crate::integrate::clock`]: the first
    /// milliseconds of a call by the monotonic clock, the rest as thread CPU time).
    pub fn advance_to(
        &mut self,
        t_end: f64,
        intermediate: Option<InputCallback<'_>>,
    ) -> Result<Advance, CosimError> {
        // A fixed step or `solver.max_step` that cannot reach `t_end` within the work budget:
        // refused before any work, naming the setting (every caller: both FMI versions and
        // `mbsfmu simulate`).
        if self.st.initialized {
            self.check_step_budget(t_end)?;
        }
        self.st.call_start = self.time();
        // The work budget counts from here, on the clock `stats.cpu_time` reads.
        self.st.events.max_cpu_per_call = self.cpu_budget;
        self.st.events.begin_call(t_end, CallClock::start());
        let r = self.advance(t_end, intermediate);
        self.st.failure_cause = match (&r, &self.st.x) {
            (Ok(Advance::Discard { .. }), Some(x)) => self
                .st
                .engine
                .failure_cause(x)
                .or_else(|| self.st.engine.parameter_note()),
            _ => None,
        };
        self.st.cpu_time += self.st.events.call_elapsed();
        r
    }

    fn advance(
        &mut self,
        t_end: f64,
        mut intermediate: Option<InputCallback<'_>>,
    ) -> Result<Advance, CosimError> {
        if !self.st.initialized {
            return Err(CosimError::NotInitialized);
        }
        let t0 = self.time();
        if !(t_end.is_finite() && t_end > t0) {
            return Err(CosimError::InvalidStepSize(t_end - t0));
        }
        if let Some(stop) = self.st.stop {
            if t_end > stop + stop_time_tolerance(self.st.start, stop, t_end - t0) {
                return Err(CosimError::PastStop { t_end, stop });
            }
        }
        let jets_before = self.committed_jets(t0);
        self.prepare_inputs(t0, t_end - t0, false);
        for inp in &mut self.st.inputs {
            inp.last_d1 = inp.derivs[0].map(|d| (t0, d));
            inp.derivs = [None, None];
            inp.intermediate = false;
        }
        // New input segments may make the state inconsistent at t0: a jump in a driven
        // input's value or slope moves the driven positions or velocities. A communication
        // point is not a discontinuity by itself: only a jump beyond the tolerance is
        // projected, and the method restarted there (keeping what does not depend on the
        // history: a multistep method's Jacobian, iteration matrix and step size; a one-step
        // method's step size and Jacobians). Every method: a one-step method that started
        // from the unprojected state took the jump as part of its first step (on the
        // quarter-car rig with the stamp held, Dormand–Prince 1.6e-4 m off at any tolerance,
        // SDIRK 13 618 rejected steps in 2 s at rtol 1e-5).
        let multistep = self.effective_settings().method.is_multistep();
        let settings = self.effective_settings();
        // Segments that continue the last ones in value and slope (the smooth mode) cannot
        // move a driven position or velocity: no need to evaluate the constraints.
        let continued = self
            .st
            .inputs
            .iter()
            .zip(&self.st.engine.inputs_mut().segments)
            .all(|(inp, seg)| {
                inp.committed.is_some_and(|c| {
                    let (a, b) = (c.eval(t0), seg.eval(t0));
                    a[0] == b[0] && a[1] == b[1]
                })
            });
        // Built-in motions continue from t0 by their right limits; a ramp starting at t0 (a
        // step landed on it) is a rate jump like an input's.
        self.st.engine.set_motion_right_limit_at(t0);
        if intermediate.is_some() && !continued {
            // The importer answers inside the step, so a value that jumps from the last
            // segment's is a step of the signal at t0, not a trend: hold it there
            // and let the stage answers give the rates after it. Smoothing through the
            // samples just before t0 turns the jump into rates of jump / spacing (a slope of
            // 2.4e4 rad/s and a second derivative of 1.3e9 rad/s² were seen on the
            // slider-crank's 0.1 rad step), which the joint formulation's equations, where a
            // driven coordinate's `ü` is a force, take literally.
            let segments = &mut self.st.engine.inputs_mut().segments;
            for (inp, seg) in self.st.inputs.iter_mut().zip(segments.iter_mut()) {
                // A value jump, not an interpolation error of the last step's stage segment.
                let jumps = inp.committed.is_some_and(|c| {
                    let (a, b) = (c.eval(t0)[0], seg.eval(t0)[0]);
                    (a - b).abs() > 1e-6 * (1.0 + b.abs())
                });
                if jumps {
                    *seg = InputSegment::constant(t0, seg.eval(t0)[0]);
                    inp.history.retain(|&(th, _)| th >= t0);
                }
            }
        }
        let at_breakpoint = self.st.engine.has_motion_breakpoint_at(t0);
        let jumped = match &self.st.x {
            Some(x) if !self.st.reinit && (!continued || at_breakpoint) => {
                input_jump(&mut self.st.engine, &settings, x, jets_before.as_deref())
            }
            _ => None,
        };
        let restarted = self.st.reinit || jumped.is_some();
        if let Some(x) = jumped {
            self.st.x = Some(x.clone());
            let integ = self.st.integrator.as_mut().expect("initialized");
            restart_after_jump(
                integ,
                &mut self.st.engine,
                &settings,
                &x,
                &mut self.st.stats_base,
            )?;
            self.st.events.reset();
        }
        if self.st.reinit {
            // Restart from the current state with a fresh method object (its history and
            // Jacobians belong to the old parameters); the statistics so far carry over.
            let settings = self.effective_settings();
            let (n_q, n_c) = (self.st.engine.n_q(), self.st.engine.n_c());
            let old = self.st.integrator.as_ref().expect("initialized");
            let s = *<AnyIntegrator as Integrator<E>>::stats(old);
            add_stats(&mut self.st.stats_base, &s);
            // The state as the old method left it, made consistent for a fresh start (the
            // BDF's satisfies the constraints only to its corrector's tolerance, relative to
            // |q|: at rtol 1e-3 the quarter car in absolute coordinates failed the start's
            // check after a parameter change).
            let held = self.st.x.as_ref().expect("initialized");
            let x0 =
                <AnyIntegrator as Integrator<E>>::restart_state(old, &mut self.st.engine, held);
            let mut fresh = AnyIntegrator::new(settings, n_q, n_c)?;
            fresh.initialize(&mut self.st.engine, &x0)?;
            self.st.x = Some(x0);
            self.st.integrator = Some(fresh);
            self.st.events.reset();
            self.st.reinit = false;
            self.st.stats_base.restarts += 1;
        }
        let integ = self.st.integrator.as_mut().expect("initialized");
        if !restarted {
            // The new segments change the right-hand side at t0 (u'' jumps between segments,
            // a held sample's value jumps): derivatives the method carried over from its last
            // step are stale, and every method evaluates them again before its next step.
            <AnyIntegrator as Integrator<E>>::rhs_changed(integ);
            // The history spans the kink there: a multistep method re-anchors it when the
            // kink matters at its tolerance (always after a jump of a value).
            let kink = input_kink(&self.st.inputs, &mut self.st.engine, t0);
            if kink.any() {
                <AnyIntegrator as Integrator<E>>::inputs_changed(integ, &mut self.st.engine, kink)?;
            }
        }
        // Answers found rough (noise at every call) in an earlier step are not asked for
        // during a pause; this step's reactions to them are counted (`rough_answers.rs`).
        let asked = intermediate.is_some() && self.st.rough.ask_now();
        if !asked {
            intermediate = None;
        }
        let (mut reactions, redos_before) = (0u32, self.st.events.stats.input_redos);
        let (mut rough, mut largest_jump) = (false, 0.0f64);
        // What the step found when its answers turned rough (the copy's counters go back).
        let mut rough_redos = 0u64;
        let mut start_over = false;
        // A copy to start the step over from without the answers, should they be rough.
        let mut snapshot = (asked && self.st.rough.suspicious()).then(|| {
            (
                integ.clone(),
                self.st.engine.clone(),
                self.st.inputs.clone(),
                self.st.events.clone(),
                self.st.stats_base,
            )
        });
        // The inputs whose answers jumped (for the note).
        let mut jumped_inputs = vec![false; self.st.inputs.len()];
        // Segments at the last accepted time, and the importer's answers at stage times of
        // this communication step.
        let mut base = self.st.engine.inputs_mut().segments.clone();
        // The communication point's reconstruction, which rough answers fall back to.
        let start_segments = base.clone();
        let mut stage_samples: Vec<(f64, Vec<(usize, f64)>)> = Vec::new();
        // The inputs the importer answered for at stage times of this step.
        let mut answered = vec![false; self.st.inputs.len()];
        let mut t_n = t0;
        // The accepted time at which a kink seen at the stage times was already restarted on.
        let mut kink_restarted_at = f64::NAN;
        // Times closer than this are one instant: no method can step across a gap of a few
        // rounding units (3 · 0.1 = 0.30000000000000004 against a ramp starting at 0.3).
        let sliver = 1e3 * f64::EPSILON * t_end.abs().max(1.0);
        let result = loop {
            // Steps land on the breakpoints of built-in motions (a ramp's start).
            let mut t_now = Integrator::<E>::state(&*integ).t;
            let next = self.st.engine.next_motion_breakpoint(t_now, t_end);
            // A breakpoint a sliver after the current time, or (after landing on one) a
            // sliver left before the communication point: the state is taken there as it is,
            // and a breakpoint handled as if landed on.
            let jump_to = match next {
                Some(tb) if tb - t_now <= sliver => Some(tb),
                None if t_end - t_now <= sliver => Some(t_end),
                _ => None,
            };
            if let Some(t_to) = jump_to {
                let mut x = Integrator::<E>::state(&*integ).clone();
                x.t = t_to;
                let r = restart_after_jump(
                    integ,
                    &mut self.st.engine,
                    &settings,
                    &x,
                    &mut self.st.stats_base,
                );
                if let Err(e) = r {
                    break Err(CosimError::Integrate(e));
                }
                self.st.events.reset();
                if t_to >= t_end {
                    break Ok(Advance::Completed);
                }
                let r = continue_at_breakpoint(
                    integ,
                    &mut self.st.engine,
                    &settings,
                    &mut self.st.stats_base,
                    &mut self.st.events,
                    t_to,
                );
                if let Err(e) = r {
                    break Err(CosimError::Integrate(e));
                }
                t_now = t_to;
            }
            let t_stop = match jump_to {
                Some(_) => self.st.engine.next_motion_breakpoint(t_now, t_end),
                None => next,
            }
            .unwrap_or(t_end);
            let stepped = match intermediate.as_mut() {
                Some(cb) => {
                    let mut sys = StageSampled {
                        engine: &mut self.st.engine,
                        ask: &mut **cb,
                        inputs: &self.st.inputs,
                        base: &base,
                        samples: &mut stage_samples,
                        t_n,
                        t_end,
                        current: f64::NAN,
                        redo_tol: redoes_on_input_jumps(settings.method)
                            .then_some((settings.rtol, settings.atol)),
                    };
                    let r = self.st.events.step(integ, &mut sys, t_stop);
                    for (_, values) in sys.samples.iter() {
                        for &(i, u) in values {
                            if let (Some(a), true) = (answered.get_mut(i), u.is_finite()) {
                                *a = true;
                            }
                        }
                    }
                    // Outputs at t_end use the segment of the importer's value there, if it
                    // was asked (the last stage of BDF and of stiffly accurate methods);
                    // otherwise, and after a failure, the accepted segments.
                    let t_seg = match &r {
                        Ok(out) if out.time() >= t_end => t_end,
                        _ => f64::NAN,
                    };
                    sys.current = f64::INFINITY;
                    sys.prepare(t_seg, false);
                    r
                }
                None => self.st.events.step(integ, &mut self.st.engine, t_stop),
            };
            match stepped {
                Ok(out) => {
                    let t = out.time();
                    if t >= t_end {
                        break Ok(Advance::Completed);
                    }
                    if t >= t_stop {
                        let r = continue_at_breakpoint(
                            integ,
                            &mut self.st.engine,
                            &settings,
                            &mut self.st.stats_base,
                            &mut self.st.events,
                            t,
                        );
                        if let Err(e) = r {
                            break Err(CosimError::Integrate(e));
                        }
                    }
                    if let (true, StepOutcome::Event(event)) = (self.early_return, out) {
                        break Ok(Advance::EarlyReturn { event });
                    }
                    if let Some(cb) = intermediate.as_mut() {
                        let values = cb(t, InputRequest::AcceptedStep);
                        self.st.engine.inputs_mut().segments.copy_from_slice(&base);
                        // A step shorter than the stage-time resolution ran on the accepted
                        // segments (`StageSampled::prepare`). After it, a value that jumps from
                        // the accepted segment is a step of the signal, where that segment
                        // carries the samples' trend (at least two of them: the first after a
                        // step holds it): held from `t`, as at a communication point (a
                        // quadratic through the samples across it has a slope of jump / step),
                        // with the accepted segments' jets at `t` as where the eliminated
                        // motions were. A trend leaves the segment by its error over less than
                        // 1e-5 s only.
                        let on_base = ran_on_accepted_segments(&stage_samples, t_n, t_end, t);
                        let inputs = &self.st.inputs;
                        let steps_at = |i: usize, u: f64| {
                            let (Some(inp), Some(seg)) = (inputs.get(i), base.get(i)) else {
                                return false;
                            };
                            let b = seg.eval(t)[0];
                            on_base
                                && inp.history.iter().filter(|s| s.0 < t).count() >= 2
                                && (u - b).abs() > 1e-6 * (1.0 + b.abs())
                        };
                        let stepped = values.iter().any(|&(i, u)| steps_at(i, u));
                        if stepped {
                            reactions += 1;
                            for &(i, u) in values.iter().filter(|&&(i, u)| steps_at(i, u)) {
                                largest_jump = largest_jump.max((u - base[i].eval(t)[0]).abs());
                                jumped_inputs[i] = true;
                            }
                        }
                        // A step shorter than the resolution ran on the accepted segments
                        // throughout (`on_base` also holds after a method whose stages missed
                        // `t`, where the stage segments moved the driven motion).
                        let short = t <= t_n + stage_resolution(t);
                        let path_jets = if stepped || short {
                            eliminated_jets(&mut self.st.engine, t)
                        } else {
                            None
                        };
                        let jumped: Vec<bool> = if stepped {
                            values.iter().map(|&(i, u)| steps_at(i, u)).collect()
                        } else {
                            Vec::new()
                        };
                        let signals = self.st.engine.inputs_mut();
                        let mut kink = InputKink::NONE;
                        for (k, (i, u)) in values.into_iter().enumerate() {
                            if let Some(inp) = self.st.inputs.get_mut(i) {
                                if u.is_finite() {
                                    let jumps = jumped.get(k).copied().unwrap_or(false);
                                    if jumps {
                                        inp.history.retain(|&(th, _)| th >= t);
                                    }
                                    inp.value = u;
                                    inp.intermediate = true;
                                    inp.record(t, u);
                                    signals.segments[i] = if jumps {
                                        InputSegment::constant(t, u)
                                    } else {
                                        inp.segment(
                                            self.spec.inputs[i].reconstruction,
                                            t,
                                            t_end - t,
                                        )
                                    };
                                    kink = kink_between(kink, &base[i], &signals.segments[i], t);
                                }
                            }
                        }
                        // After a step on the accepted segments only, what the driven motion did
                        // in it (a step of the signal, a ramp's start: the new segment's value
                        // and slope against the accepted one's at `t`) is an impulse on the
                        // free coordinates, where joint coordinates eliminate that motion
                        // (applied beyond the tolerance only, `input_jump`): without it the
                        // bob of a pendulum under a frame that stepped, or started to ramp,
                        // went with the frame. Not after a step on stage segments: their `ü`
                        // carried the slope's change (`stage_segment`) and they end where the
                        // new ones start; an impulse for the interpolation error between them
                        // restarted the method at almost every step of smooth answers
                        // (slider-crank: 281 restarts in 1 s).
                        let before = path_jets;
                        base.copy_from_slice(&signals.segments);
                        // Only a jump of a value re-anchors here (a held force's new sample:
                        // the accelerations jump); the kinks in `ü` between the importer's
                        // segments were never re-anchored on this path.
                        let kink = kink.value_only();
                        // The importer's samples may start a motion the state does not have
                        // yet (an input that moves from its first sample on): a jump, as at a
                        // communication point.
                        let r = continue_after_change(
                            integ,
                            &mut self.st.engine,
                            &settings,
                            &mut self.st.stats_base,
                            &mut self.st.events,
                            kink,
                            before.as_deref(),
                        );
                        if let Err(e) = r {
                            break Err(CosimError::Integrate(e));
                        }
                        t_n = t;
                        stage_samples.retain(|&(ts, _)| ts > t);
                        let redos = self.st.events.stats.input_redos - redos_before;
                        rough = self.st.rough.too_rough(reactions, redos);
                        rough_redos = redos;
                        let copy = if rough { snapshot.take() } else { None };
                        if let Some((i0, e0, u0, ev0, b0)) = copy {
                            // The step again from its start, on the communication point's
                            // reconstruction: nothing of the noise reaches the state. The work
                            // thrown away counts as the event location's does, the restarts
                            // as restarts (a restart in between moved the method's counters
                            // into `stats_base`: all of it against all of it at the copy).
                            let mut now = self.st.stats_base;
                            add_stats(&mut now, <AnyIntegrator as Integrator<E>>::stats(integ));
                            let mut then = b0;
                            add_stats(&mut then, <AnyIntegrator as Integrator<E>>::stats(&i0));
                            *integ = i0;
                            self.st.engine = e0;
                            self.st.inputs = u0;
                            self.st.events = ev0;
                            self.st.stats_base = b0;
                            self.st.stats_base.restarts +=
                                now.restarts.saturating_sub(then.restarts);
                            crate::integrate::events::add_work(
                                &mut self.st.events.stats.discarded,
                                &now,
                                &then,
                            );
                            answered.fill(false);
                            stage_samples.clear();
                            base.copy_from_slice(&start_segments);
                            t_n = t0;
                            kink_restarted_at = f64::NAN;
                            start_over = true;
                        } else if rough {
                            // Back to the communication point's reconstruction, without this
                            // step's answers: continued from them (a polynomial through
                            // answers 1e-5 s apart, each with its own noise) the segment's
                            // slope is the noise over that spacing (the pendulum sent 0.4 m
                            // off in 0.3 s). The path's jets at `t` against it are the jump.
                            let before = eliminated_jets(&mut self.st.engine, t);
                            for inp in self.st.inputs.iter_mut() {
                                inp.history.retain(|&(th, _)| th <= t0);
                                inp.intermediate = false;
                            }
                            answered.fill(false);
                            let signals = self.st.engine.inputs_mut();
                            let mut kink = InputKink::NONE;
                            for (old, new) in signals.segments.iter().zip(&start_segments) {
                                kink = kink_between(kink, old, new, t);
                            }
                            signals.segments.copy_from_slice(&start_segments);
                            base.copy_from_slice(&start_segments);
                            let kink = kink.value_only();
                            let r = continue_after_change(
                                integ,
                                &mut self.st.engine,
                                &settings,
                                &mut self.st.stats_base,
                                &mut self.st.events,
                                kink,
                                before.as_deref(),
                            );
                            if let Err(e) = r {
                                break Err(CosimError::Integrate(e));
                            }
                        }
                    }
                    if rough {
                        // The rest of the step (or the step again) without the answers.
                        intermediate = None;
                    }
                    if std::mem::take(&mut start_over) {
                        continue;
                    }
                }
                Err(e) if e.is_recoverable() => {
                    let t = Integrator::<E>::state(integ).t;
                    // Intermediate update: an input with a kink exactly at the accepted time
                    // (a ramp starting there) shows only at the stage times after it, as a
                    // velocity jump no step size resolves. Restart once from the state
                    // projected onto the line through the accepted sample and the newest stage
                    // answer, then try again.
                    if multistep && intermediate.is_some() && kink_restarted_at != t {
                        kink_restarted_at = t;
                        if let Some((ts, values)) = stage_samples
                            .iter()
                            .filter(|(ts, _)| *ts > t)
                            .min_by(|a, b| a.0.total_cmp(&b.0))
                            .cloned()
                        {
                            let signals = self.st.engine.inputs_mut();
                            for (i, u) in values {
                                let (Some(inp), true) = (self.st.inputs.get(i), u.is_finite())
                                else {
                                    continue;
                                };
                                let un = inp.history.last().map_or(inp.value, |&(_, v)| v);
                                let line = reconstruct::through_samples(&[(t, un), (ts, u)], ts, u);
                                base[i] = line;
                                signals.segments[i] = line;
                            }
                            let r = restart_on_jump(
                                integ,
                                &mut self.st.engine,
                                &settings,
                                &mut self.st.stats_base,
                                None,
                            );
                            match r {
                                Ok(true) => {
                                    self.st.events.reset();
                                    stage_samples.clear();
                                    reactions += 1;
                                    continue;
                                }
                                Ok(false) => {}
                                Err(e) => break Err(CosimError::Integrate(e)),
                            }
                        }
                    }
                    break Ok(Advance::Discard {
                        last_successful_time: t,
                        reason_is_recoverable: true,
                    });
                }
                Err(e) => break Err(CosimError::Integrate(e)),
            }
        };
        let x = Integrator::<E>::state(self.st.integrator.as_ref().expect("initialized"));
        match &mut self.st.x {
            Some(held) => held.clone_from(x),
            held => *held = Some(x.clone()),
        }
        // An input the importer answered for inside the step continues from its answers at
        // the next communication point (a polynomial through the samples), as after an
        // accepted-step answer: a step of one internal step has none, and the mode's own
        // segment there (`linear`'s, one step late; `hold`'s) was a jump against the answers
        // this step integrated, which joint coordinates took as an impulse each time (a frame
        // ramping at 0.1 m/s sent the pendulum under it off at 0.9 m/s within 0.3 s).
        if asked {
            let redos = if rough {
                rough_redos
            } else {
                self.st.events.stats.input_redos - redos_before
            };
            let pause = self.st.rough.finish(reactions, redos);
            if let (Some(pause), true, 1) = (pause, rough, self.st.rough.found) {
                // The inputs that jumped, or (steps taken again only) those answered.
                let which = if jumped_inputs.contains(&true) {
                    &jumped_inputs
                } else {
                    &answered
                };
                let names: Vec<String> = (self.spec.inputs.iter().zip(which))
                    .filter(|(_, &a)| a)
                    .map(|(u, _)| format!("`{}`", u.name))
                    .collect();
                self.notes.push(format!(
                    "the importer's answers to {} inside the communication step to t = {} are \
                     not smooth at any time scale: {reactions} of them jumped against their \
                     own trend (by up to {}) and {redos} internal steps were taken again (a \
                     noisy signal read at every call?). The rest of that step ran on the last \
                     answer, and the next {pause} step(s) take the inputs as set before each \
                     fmi3DoStep only, with their reconstruction mode; then the answers are \
                     asked for again, after pauses that double up to {} steps while they stay \
                     rough. Said once per instance.",
                    names.join(", "),
                    show_real(t_end),
                    show_real(largest_jump),
                    rough_answers::MAX_PAUSE
                ));
            }
        }
        for (inp, &a) in self.st.inputs.iter_mut().zip(&answered) {
            inp.intermediate |= a;
        }
        // The reconstruction of the next step continues from the segments this one ended with.
        let signals = self.st.engine.inputs_mut();
        // Each was built for the rest of the step from its start.
        for (inp, seg) in self.st.inputs.iter_mut().zip(&signals.segments) {
            inp.commit(*seg, t_end - seg.t0);
        }
        self.st.last_h = self.st.x.as_ref().expect("just set").t - t0;
        self.st.outputs_valid = false;
        if result.is_ok() {
            let x = self.st.x.as_ref().expect("just set");
            self.st.unchecked_points += 1;
            if self.st.unchecked_points >= CHECK_STATE_EVERY {
                self.st.unchecked_points = 0;
                self.st.engine.check_state(x)?;
            }
            self.ensure_outputs()?;
        }
        result
    }

    fn accelerations(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
    ) -> Result<(Vec<f64>, Vec<f64>), CosimError> {
        let (a, l) = self.st.engine.accelerations(t, q, v)?;
        if a.iter().chain(l.iter()).any(|z| !z.is_finite()) {
            return Err(CosimError::OutputDerivative {
                order: 1,
                reason: format!("non-finite accelerations at t = {t}"),
            });
        }
        Ok((a, l))
    }

    /// Outputs at the point `s` along the Taylor path `q + s v + s²/2 a + s³/6 j`,
    /// `v + s a + s²/2 j` from the current state.
    fn outputs_on_path(
        &mut self,
        x: &MechState,
        a: &[f64],
        j: &[f64],
        s: f64,
        out: &mut [f64],
    ) -> Result<(), CosimError> {
        let q: Vec<f64> = (0..x.q.len())
            .map(|i| x.q[i] + s * x.v[i] + s * s / 2.0 * a[i] + s * s * s / 6.0 * j[i])
            .collect();
        let v: Vec<f64> = (0..x.v.len())
            .map(|i| x.v[i] + s * a[i] + s * s / 2.0 * j[i])
            .collect();
        let t = x.t + s;
        let (_, lambda) = self.accelerations(t, &q, &v)?;
        self.st
            .engine
            .evaluate_outputs(&MechState { t, q, v, lambda }, out)?;
        Ok(())
    }

    /// Time derivative of order 1 or 2 of an output at the current state. Every output is a
    /// function `y(t, q, v)` (the engine computes accelerations and reactions from the
    /// state), so `ẏ = y_t + y_q v + y_v a`: central differences along the Taylor path of the
    /// solution through the current state, with `a` from the saddle-point system and, for
    /// the second derivative, the jerk `j` by a central difference of `a`. Truncation error
    /// `O(δ²)` with `δ` a small fraction of the internal step size.
    ///
    /// The derivative is that of the force laws in effect at the current state: where an
    /// event function (a contact's or tire's gap, a stop) changes sign between the current
    /// state and a point of the stencil, the path would reach into another law (penetration
    /// without the kinetic energy it takes), and the differences are taken one-sided on the
    /// side that stays (second order, `δ` halved until one side does). Before, the energy of
    /// the undamped bouncing balls read up to 152.6 W at the last communication point before
    /// each impact (a conserved quantity; the samples' central difference: 0.03 W).
    pub fn output_derivative(&mut self, vr: u32, order: i64) -> Result<f64, CosimError> {
        let v = self.var(vr)?.clone();
        let VarKind::Output(i) = v.kind else {
            return Err(CosimError::OutputDerivative {
                order,
                reason: format!("`{}` is not an output", v.name),
            });
        };
        if !(1..=2).contains(&order) {
            return Err(CosimError::OutputDerivative {
                order,
                reason: "orders 1 and 2 are supported".into(),
            });
        }
        self.ensure_state()?;
        self.refresh_inputs();
        let t = self.time();
        let x = self.st.x.clone().expect("state ensured");
        let h = self
            .st
            .integrator
            .as_ref()
            .map_or(1e-3, |g| Integrator::<E>::next_step_size(g));
        // At most 1e-3 s, but never below the time resolution at t (which wins at large t).
        let mut d = (0.05 * h).min(1e-3).max(1e-6 * t.abs().max(1.0));
        let (a, _) = self.accelerations(t, &x.q, &x.v)?;
        let n = x.q.len();
        // Positions along the path (without the jerk's `s³` term) and the accelerations there.
        let path_q = |s: f64| -> Vec<f64> {
            (0..n)
                .map(|k| x.q[k] + s * x.v[k] + s * s / 2.0 * a[k])
                .collect()
        };
        let path_v = |s: f64| -> Vec<f64> { (0..n).map(|k| x.v[k] + s * a[k]).collect() };
        // The stencil: central (0), or one-sided forward (1) or backward (-1) where the
        // central one would cross an event function's zero.
        let n_ev = self.st.engine.n_events();
        let mut dir = 0.0;
        if n_ev > 0 {
            let mut g0 = vec![0.0; n_ev];
            self.st.engine.event_functions(t, &x.q, &mut g0);
            let mut g = vec![0.0; n_ev];
            let mut stays = |e: &mut E, s: f64| -> bool {
                e.event_functions(t + s, &path_q(s), &mut g);
                g0.iter().zip(&g).all(|(a, b)| (*a >= 0.0) == (*b >= 0.0))
            };
            // Points a one-sided stencil uses: 2 for the first derivative, 3 for the second.
            let reach = if order == 1 { 2 } else { 3 };
            let d_min = 1e-9 * t.abs().max(1.0);
            loop {
                let e = &mut self.st.engine;
                if stays(e, d) && stays(e, -d) {
                    dir = 0.0;
                    break;
                }
                if (1..=reach).all(|k| stays(e, -(k as f64) * d)) {
                    dir = -1.0;
                    break;
                }
                if (1..=reach).all(|k| stays(e, k as f64 * d)) {
                    dir = 1.0;
                    break;
                }
                if d / 2.0 < d_min {
                    // Events on both sides within a few time resolutions: central.
                    dir = 0.0;
                    break;
                }
                d /= 2.0;
            }
        }
        let mut jerk = vec![0.0; n];
        if order == 2 {
            let mut accel_at = |s: f64| self.accelerations(t + s, &path_q(s), &path_v(s));
            if dir == 0.0 {
                let (ap, _) = accel_at(d)?;
                let (am, _) = accel_at(-d)?;
                for k in 0..n {
                    jerk[k] = (ap[k] - am[k]) / (2.0 * d);
                }
            } else {
                let (a1, _) = accel_at(dir * d)?;
                let (a2, _) = accel_at(2.0 * dir * d)?;
                for k in 0..n {
                    jerk[k] = dir * (-3.0 * a[k] + 4.0 * a1[k] - a2[k]) / (2.0 * d);
                }
            }
        }
        let n_out = self.st.outputs.len();
        let y = |sim: &mut Self, s: f64| -> Result<f64, CosimError> {
            let mut out = vec![0.0; n_out];
            sim.outputs_on_path(&x, &a, &jerk, s, &mut out)?;
            Ok(out[i])
        };
        if dir == 0.0 {
            let (yp, ym) = (y(self, d)?, y(self, -d)?);
            if order == 1 {
                return Ok((yp - ym) / (2.0 * d));
            }
            let y0 = y(self, 0.0)?;
            return Ok((yp - 2.0 * y0 + ym) / (d * d));
        }
        let (y0, y1, y2) = (y(self, 0.0)?, y(self, dir * d)?, y(self, 2.0 * dir * d)?);
        if order == 1 {
            return Ok(dir * (-3.0 * y0 + 4.0 * y1 - y2) / (2.0 * d));
        }
        let y3 = y(self, 3.0 * dir * d)?;
        Ok((2.0 * y0 - 5.0 * y1 + 4.0 * y2 - y3) / (d * d))
    }

    /// `∂y/∂u`: rows are the outputs `unknowns`, columns the inputs `knowns` (value
    /// references), at the current point, consistent with what the importer observes by
    /// setting an input and reading the outputs at the same instant.
    ///
    /// Setting input `j` to `u` at the current time `t` makes the FMU record the sample
    /// `(t, u)` of every input and rebuild their segments (module documentation): depending on
    /// the reconstruction mode the value, `u̇` and `ü` at `t` change with `u` (under `smooth`
    /// only `ü`), so a kinematic driver's reaction changes through `ü` (the `Φ_tt` term of the
    /// saddle-point system) and a moving frame's force elements through `u` and `u̇`. The
    /// chain rule combines the segment rebuild's derivative `d(u, u̇, ü)/du` (the derivative of
    /// the reconstruction's branch in use, [`rebuild_derivative`]) with
    /// the engine's derivatives of the outputs with respect to `(u, u̇, ü)`
    /// ([`Engine::output_input_derivatives`]: one factorization of the saddle-point matrix,
    /// analytic for drivers and actuators, central differences of the direct partials only
    /// for inputs that move a frame; central differences over `(u, u̇, ü)` in the joint
    /// formulation), taken on the segments a Set rebuilds ([`Simulation::set_segments`]), not
    /// on those of the last step: where the importer has not set the inputs at `t` yet they
    /// differ (under `linear` the rate at `t` is the last step's slope until a Set, and `0`
    /// plus the perturbation over `h` after it), and the outputs are not affine in the rate
    /// in joint coordinates. The state is held fixed: in absolute coordinates outputs that
    /// are functions of the state (positions, angles, velocities) have zero derivative; in
    /// joint coordinates a driven tree joint or a moving frame also moves its subtree.
    ///
    /// In Initialization Mode the outputs follow the inputs through the initial state
    /// (assembly, static equilibrium), which a Set recomputes: there the Jacobian is that of
    /// the same path ([`Simulation::initial_jacobian_column`]).
    pub fn output_input_jacobian(
        &mut self,
        unknowns: &[u32],
        knowns: &[u32],
    ) -> Result<nalgebra::DMatrix<f64>, CosimError> {
        let (rows, cols) = self.derivative_indices(unknowns, knowns)?;
        self.ensure_state()?;
        self.refresh_inputs();
        let mut jac = nalgebra::DMatrix::zeros(rows.len(), cols.len());
        if !self.st.initialized {
            // The instance's own outputs first (their failure is the one a Get reports).
            self.ensure_outputs()?;
            for (c, &j) in cols.iter().enumerate() {
                let column = self.initial_jacobian_column(j)?;
                for (r, &i) in rows.iter().enumerate() {
                    jac[(r, c)] = column[i];
                }
            }
            return Ok(jac);
        }
        let x = self.st.x.clone().expect("state ensured");
        let h = self.expected_step();
        let rebuilt = self.set_segments(x.t, h);
        let held = std::mem::replace(&mut self.st.engine.inputs_mut().segments, rebuilt);
        let der = self.st.engine.output_input_derivatives(&x, &cols);
        self.st.engine.inputs_mut().segments = held;
        let der = der?;
        for (c, &j) in cols.iter().enumerate() {
            let mode = self.spec.inputs[j].reconstruction;
            let ds = rebuild_derivative(&self.st.inputs[j], mode, x.t, h);
            for (r, &i) in rows.iter().enumerate() {
                jac[(r, c)] = (0..3).map(|k| der[c][k][i] * ds[k]).sum();
            }
        }
        Ok(jac)
    }

    /// The segments the outputs at `t` see after the importer sets an input at `t` (to the
    /// value it has): every input's value recorded as the sample at `t` and its segment
    /// rebuilt for a step of `h` ([`Simulation::prepare_inputs`] with `at_sample`), computed
    /// on copies. Where the inputs were set at `t` already these are the installed segments;
    /// right after a step, before the importer sets the inputs, the installed ones are the
    /// step's.
    fn set_segments(&self, t: f64, h: f64) -> Vec<InputSegment> {
        self.st
            .inputs
            .iter()
            .zip(&self.spec.inputs)
            .map(|(inp, spec)| rebuilt_segment(inp, spec.reconstruction, t, h, 0.0))
            .collect()
    }

    /// Initialization Mode: the derivatives of every output with respect to input `j` along
    /// the path a Set and a Get take there: the input's value changed, the initial state
    /// computed again (assembly, and the static equilibrium with `initial = "static"`; the
    /// outputs follow the inputs through it, so a driven position moves the bodies it drives),
    /// the outputs evaluated on it. Central differences of that path on scratch copies of the
    /// instance (the instance itself is untouched), with the step `δ = 10⁻⁶·max(1, |u|)` and
    /// `2δ`: four initial states per input, kept until something that changes the initial
    /// state is set. The two differences must agree (to `10⁻⁵` relative, and to a floor of
    /// `10⁻¹¹` of the outputs' size over `δ`, the static solver's tolerance): otherwise once
    /// more with steps 100 times smaller and the same floor (a contact or stop that opens or
    /// closes between `δ` and `2δ`), and if they still disagree the derivative is refused,
    /// naming the output: the initial state does not depend smoothly on the input there (a
    /// switch within the step, or an equilibrium the solver finds only to its tolerance), and
    /// Set/Get differences there depend on their step.
    fn initial_jacobian_column(&mut self, j: usize) -> Result<Vec<f64>, CosimError> {
        let n_in = self.st.inputs.len();
        if self.st.initial_columns.len() != n_in {
            self.st.initial_columns = vec![None; n_in];
        }
        if let Some(column) = &self.st.initial_columns[j] {
            return Ok(column.clone());
        }
        let u = self.st.inputs[j].value;
        let y0 = self.st.outputs.clone();
        let name = &self.spec.inputs[j].name;
        let mut worst = None;
        // The round-off floor is that of the first step on both tries: the smaller step must
        // not pass with 100 times the noise.
        let d0 = 1e-6 * u.abs().max(1.0);
        let mut d = d0;
        for shrink in [1.0, 1e-2] {
            d = shrink * d0;
            let [p1, m1, p2, m2] =
                [d, -d, 2.0 * d, -2.0 * d].map(|s| self.initial_outputs_with(j, u + s));
            let (p1, m1, p2, m2) = (p1?, m1?, p2?, m2?);
            let mut column = Vec::with_capacity(y0.len());
            worst = None;
            for i in 0..y0.len() {
                let c1 = (p1[i] - m1[i]) / (2.0 * d);
                let c2 = (p2[i] - m2[i]) / (4.0 * d);
                let scale = [y0[i], p2[i], m2[i]]
                    .iter()
                    .fold(1.0f64, |a, v| a.max(v.abs()));
                let tol = 1e-5 * c1.abs().max(c2.abs()) + 1e-11 * scale / d0;
                if !(c1.is_finite() && c2.is_finite()) || (c1 - c2).abs() > tol {
                    worst = Some((i, c1, c2));
                    break;
                }
                column.push(c1);
            }
            if worst.is_none() {
                self.st.initial_columns[j] = Some(column.clone());
                return Ok(column);
            }
        }
        let (i, c1, c2) = worst.expect("a disagreement");
        Err(CosimError::Derivative(format!(
            "in Initialization Mode the outputs follow input `{name}` through the initial state \
             (assembly{}), and output `{}` does not depend smoothly on it at {name} = {}: \
             central differences with steps {} and {} give {c1:e} and {c2:e} (a contact or \
             stop that opens or closes within the step, or an equilibrium found only to the \
             solver's tolerance), and Set/Get differences there depend on their step",
            if self.spec.initialization == crate::mbs::spec::Initialization::Static {
                ", static equilibrium"
            } else {
                ""
            },
            self.spec.outputs[i].name,
            show_real(u),
            show_real(d),
            show_real(2.0 * d),
        )))
    }

    /// Initialization Mode: the outputs a Get shows after the importer sets input `j` to `u`,
    /// computed on a scratch copy of the instance. A failure there is the derivative's, not
    /// the instance's (whose outputs were computed): reported as such.
    fn initial_outputs_with(&self, j: usize, u: f64) -> Result<Vec<f64>, CosimError> {
        let mut scratch = Simulation {
            spec: self.spec.clone(),
            table: self.table.clone(),
            st: self.st.clone(),
            early_return: self.early_return,
            cpu_budget: self.cpu_budget,
            notes: Vec::new(),
        };
        scratch.st.inputs[j].value = u;
        scratch.st.inputs_dirty = true;
        scratch.invalidate();
        scratch.outputs().map(<[f64]>::to_vec).map_err(|e| {
            CosimError::Derivative(format!(
                "in Initialization Mode the outputs follow input `{}` through the initial \
                 state, which fails at {} = {}: {e}",
                self.spec.inputs[j].name,
                self.spec.inputs[j].name,
                show_real(u)
            ))
        })
    }

    /// The same Jacobian as [`Simulation::output_input_jacobian`] (after initialization) by
    /// one central difference of the outputs per input along the rebuilt segment: an
    /// independent oracle for tests.
    pub fn output_input_jacobian_differenced(
        &mut self,
        unknowns: &[u32],
        knowns: &[u32],
    ) -> Result<nalgebra::DMatrix<f64>, CosimError> {
        let (rows, cols) = self.derivative_indices(unknowns, knowns)?;
        self.ensure_state()?;
        self.refresh_inputs();
        let x = self.st.x.clone().expect("state ensured");
        let t = x.t;
        let h = self.expected_step();
        let n_out = self.st.outputs.len();
        let (mut yp, mut ym) = (vec![0.0; n_out], vec![0.0; n_out]);
        let mut jac = nalgebra::DMatrix::zeros(rows.len(), cols.len());
        let rebuilt = self.set_segments(t, h);
        let held = std::mem::replace(&mut self.st.engine.inputs_mut().segments, rebuilt.clone());
        let mut result = Ok(());
        for (c, &j) in cols.iter().enumerate() {
            let inp = &self.st.inputs[j];
            let d = sample_step(inp);
            let mode = self.spec.inputs[j].reconstruction;
            let (sp, sm) = (
                rebuilt_segment(inp, mode, t, h, d),
                rebuilt_segment(inp, mode, t, h, -d),
            );
            self.st.engine.inputs_mut().segments[j] = sp;
            let rp = self.st.engine.evaluate_outputs(&x, &mut yp);
            self.st.engine.inputs_mut().segments[j] = sm;
            let rm = self.st.engine.evaluate_outputs(&x, &mut ym);
            self.st.engine.inputs_mut().segments[j] = rebuilt[j];
            if let Err(e) = rp.and(rm) {
                result = Err(e);
                break;
            }
            for (r, &i) in rows.iter().enumerate() {
                jac[(r, c)] = (yp[i] - ym[i]) / (2.0 * d);
            }
        }
        self.st.engine.inputs_mut().segments = held;
        result?;
        Ok(jac)
    }

    /// Output and input indices of the value references of a derivative request.
    fn derivative_indices(
        &self,
        unknowns: &[u32],
        knowns: &[u32],
    ) -> Result<(Vec<usize>, Vec<usize>), CosimError> {
        let mut rows = Vec::with_capacity(unknowns.len());
        for &vr in unknowns {
            match self.var(vr)?.kind {
                VarKind::Output(i) => rows.push(i),
                _ => {
                    return Err(CosimError::Derivative(format!(
                        "unknown {vr} is not an output"
                    )))
                }
            }
        }
        let mut cols = Vec::with_capacity(knowns.len());
        for &vr in knowns {
            match self.var(vr)?.kind {
                VarKind::Input(i) => cols.push(i),
                _ => {
                    return Err(CosimError::Derivative(format!(
                        "known {vr} is not an input"
                    )))
                }
            }
        }
        Ok((rows, cols))
    }

    // ---- state ----

    /// A copy of everything that changes (FMU state).
    pub fn save(&self) -> SimState<E> {
        self.st.clone()
    }

    /// Go back to a saved state. Fails (and changes nothing) if the state has the wrong
    /// dimensions for this model.
    pub fn restore(&mut self, s: &SimState<E>) -> Result<(), CosimError> {
        self.validate_state(s)?;
        self.st = s.clone();
        self.st.engine.adopt_model_files(&self.spec);
        self.st.rules_pending |= !self.st.initialized;
        Ok(())
    }

    /// Like [`Simulation::restore`] but consumes the state.
    pub fn restore_owned(&mut self, s: SimState<E>) -> Result<(), CosimError> {
        self.validate_state(&s)?;
        self.st = s;
        self.st.engine.adopt_model_files(&self.spec);
        self.st.rules_pending |= !self.st.initialized;
        Ok(())
    }

    /// A state decoded from bytes lacks what the engine keeps of the model's files (the table
    /// files' contents, not serialized): give it this simulation's (the same files, read at
    /// instantiation). [`Simulation::restore`] does it too; doing it once at decoding spares
    /// every restore of the state a copy.
    pub fn adopt_model_files(&self, s: &mut SimState<E>) {
        s.engine.adopt_model_files(&self.spec);
    }

    /// Whether a saved state fits this model (dimensions, consistency).
    pub fn validate_state(&self, s: &SimState<E>) -> Result<(), CosimError> {
        let bad = |what: &str| Err(CosimError::ForeignState(what.into()));
        if s.params.len() != self.spec.parameters.len() {
            return bad("parameter count");
        }
        if s.inputs.len() != self.spec.inputs.len()
            || s.inputs
                .iter()
                .any(|i| i.history.len() > reconstruct::HISTORY)
        {
            return bad("input count");
        }
        if s.outputs.len() != self.st.outputs.len() {
            return bad("output count");
        }
        if s.engine.n_q() != self.st.engine.n_q() {
            return bad("engine dimensions");
        }
        if let Some(x) = &s.x {
            let n = self.st.engine.n_q();
            if x.q.len() != n || x.v.len() != n || !x.t.is_finite() {
                return bad("state dimensions");
            }
        }
        if s.initialized != s.integrator.is_some() {
            return bad("integrator");
        }
        self.validate_structure(s)
    }

    /// Every size and number in a state that came from outside (deserialized bytes, whose
    /// checksum anyone can recompute) against this instance's own structure: the engine's
    /// shape against the live engine's, the integrator's against one of the same method built
    /// and initialized here (see [`shape`]), settings and times with the rules of the setters.
    fn validate_structure(&self, s: &SimState<E>) -> Result<(), CosimError> {
        use shape::Shape;
        let bad = |m: String| CosimError::ForeignState(m);
        let live = Shape::of(&self.st.engine).map_err(bad)?;
        let (nq, nc) = (self.st.engine.n_q(), self.st.engine.n_c());
        let bound = live.largest().max((nq + nc + 1) as u64);
        let engine = Shape::of(&s.engine).map_err(bad)?;
        engine.check_against(&live, bound, "engine").map_err(bad)?;
        engine.check_integers_equal(&live, "engine").map_err(bad)?;
        check_settings(&s.settings).map_err(bad)?;
        if let Some(tol) = s.tolerance {
            if !rtol_in_range(tol) {
                return Err(bad(format!("tolerance {tol} outside [{RTOL_MIN:e}, 1)")));
            }
        }
        let finite = |v: &[f64]| v.iter().all(|z| z.is_finite());
        let rules_ok = self
            .spec
            .parameters
            .iter()
            .zip(&s.params)
            .all(|(p, &v)| p.rule.as_ref().is_none_or(|r| r.check(v).is_ok()));
        if !rules_ok
            || !finite(&s.params)
            || !s.start.is_finite()
            || s.stop.is_some_and(|t| t.is_nan())
        {
            return Err(bad("non-finite parameter, start or stop time".into()));
        }
        for inp in &s.inputs {
            let ok = inp.value.is_finite()
                && inp
                    .history
                    .iter()
                    .all(|(t, u)| t.is_finite() && u.is_finite())
                && inp.history.windows(2).all(|w| w[0].0 < w[1].0)
                && inp.derivs.iter().flatten().all(|d| d.is_finite())
                && inp
                    .last_d1
                    .is_none_or(|(t, d)| t.is_finite() && d.is_finite());
            if !ok {
                return Err(bad("input history is not finite and increasing".into()));
            }
        }
        let (snq, snc) = (s.engine.n_q(), s.engine.n_c());
        if let Some(x) = &s.x {
            if !finite(&x.q) || !finite(&x.v) || x.lambda.len() > snc.max(nc) {
                return Err(bad("state is not finite or has the wrong size".into()));
            }
        }
        Shape::of(&s.events)
            .map_err(bad)?
            .check_against(&Shape::default(), bound, "event locator")
            .map_err(bad)?;
        let Some(integ) = &s.integrator else {
            return Ok(());
        };
        let cand = Shape::of(integ).map_err(bad)?;
        let method = <AnyIntegrator as Integrator<E>>::method(integ);
        let x =
            s.x.as_ref()
                .ok_or_else(|| bad("integrator without a state".into()))?;
        let settings = Settings {
            method,
            ..s.settings
        };
        let mut reference = AnyIntegrator::new(settings, snq, snc)?;
        let mut engine = s.engine.clone();
        // The candidate engine passed the checks above. Should its numbers still make the
        // method's start panic, the state is refused (every step would do the same); should
        // the start merely fail, the uninitialized reference serves.
        let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            reference.initialize(&mut engine, x).is_ok()
        }));
        match started {
            Ok(true) => {}
            Ok(false) => reference = AnyIntegrator::new(settings, snq, snc)?,
            Err(_) => return Err(bad("the state's engine cannot start its method".into())),
        }
        let r = Shape::of(&reference).map_err(bad)?;
        let bound = bound.max(r.largest());
        cand.check_against(&r, bound, "integrator").map_err(bad)
    }
}

pub use crate::mbs::spec::MAX_INPUT_MAGNITUDE;

/// A real for a message: as written for ordinary magnitudes, in exponent form beyond (`1e101`,
/// not its 102 digits).
use crate::mbs::error::show_number as show_real;

fn check_input_magnitude(name: &str, value: f64) -> Result<(), CosimError> {
    if !value.is_finite() {
        return Err(CosimError::NotFinite {
            name: name.into(),
            value,
        });
    }
    if value.abs() > MAX_INPUT_MAGNITUDE {
        return Err(CosimError::InvalidValue {
            name: name.into(),
            value: show_real(value),
            reason: format!("inputs are limited to |u| <= {MAX_INPUT_MAGNITUDE:e}"),
        });
    }
    Ok(())
}

/// The rules of the solver setters, for settings that arrive in a state.
fn check_settings(s: &Settings) -> Result<(), String> {
    let ok = rtol_in_range(s.rtol)
        && s.atol > 0.0
        && s.atol.is_finite()
        && s.max_step >= 0.0
        && !s.max_step.is_nan()
        && s.initial_step >= 0.0
        && s.initial_step.is_finite()
        && s.fixed_step.is_none_or(|h| h > 0.0 && h.is_finite());
    if ok {
        Ok(())
    } else {
        Err(format!("solver settings out of range: {s:?}"))
    }
}

fn add_stats(a: &mut Stats, c: &Stats) {
    a.steps += c.steps;
    a.rejected_steps += c.rejected_steps;
    a.f_evals += c.f_evals;
    a.f_evals_jacobian += c.f_evals_jacobian;
    a.jac_evals += c.jac_evals;
    a.jac_updates += c.jac_updates;
    a.lu += c.lu;
    a.newton_iters += c.newton_iters;
    a.convergence_failures += c.convergence_failures;
    a.error_test_failures += c.error_test_failures;
    a.restarts += c.restarts;
}

/// The engine as the integrator sees it during a step with stage-time input requests (FMI 3
/// intermediate update): before an evaluation at time `t` the input segments are those for
/// `t` (module documentation). Built afresh for every internal step.
struct StageSampled<'a, E: Engine> {
    engine: &'a mut E,
    ask: &'a mut dyn FnMut(f64, InputRequest) -> Vec<(usize, f64)>,
    inputs: &'a [InputState],
    /// Segments at the last accepted time `t_n`.
    base: &'a [InputSegment],
    /// The importer's answers at stage times of this communication step.
    samples: &'a mut Vec<(f64, Vec<(usize, f64)>)>,
    t_n: f64,
    t_end: f64,
    /// The time the engine's segments are set for.
    current: f64,
    /// `(rtol, atol)` where a step whose answers left the signal's trend is taken again
    /// ([`redoes_on_input_jumps`]).
    redo_tol: Option<(f64, f64)>,
}

/// The methods that accept a step across a jump or a kink of the importer's answers, where
/// the answers alone show it (the moving-pivot pendulum, docs/fmi-runtime.md): the
/// Rosenbrock–Nyström method evaluates at the step's end after its error test (a frame step
/// there sent the pendulum 1 m off, 100× its swing, status OK), and Dormand–Prince's stages
/// each take the importer's value on a smooth quadratic, which its error estimate cannot tell
/// from a ramp that starts inside the step (13 % of the swing). The others' own error tests
/// reject such steps until they are shorter than the stage resolution.
fn redoes_on_input_jumps(m: Method) -> bool {
    matches!(m, Method::RosenbrockNystrom | Method::Dopri5)
}

/// Stage times within this of the accepted time, or of an earlier request, reuse that
/// segment (the integrators' finite differences in time never reach the importer).
fn stage_resolution(t: f64) -> f64 {
    1e-5 * t.abs().max(1.0)
}

/// The stage answer an evaluation at `ta` (inside the step, at most `t_end`) uses: one
/// within [`stage_resolution`] of it.
fn stage_sample_index(samples: &[(f64, Vec<(usize, f64)>)], ta: f64) -> Option<usize> {
    let sigma = stage_resolution(ta);
    samples.iter().position(|&(ts, _)| (ta - ts).abs() <= sigma)
}

/// Whether the evaluations at `t`, in a step from the accepted time `t_n`, used the accepted
/// segments ([`StageSampled::prepare`]): `t` within the resolution of `t_n`, or no answer
/// for it.
fn ran_on_accepted_segments(
    samples: &[(f64, Vec<(usize, f64)>)],
    t_n: f64,
    t_end: f64,
    t: f64,
) -> bool {
    let sigma = stage_resolution(t);
    !(t > t_n + sigma && t <= t_end + sigma) || stage_sample_index(samples, t.min(t_end)).is_none()
}

/// At most this many stage answers are kept (a step's stages plus a few from rejected tries).
const STAGE_SAMPLES_KEPT: usize = 16;

impl<E: Engine> StageSampled<'_, E> {
    /// How far the answer `values` at `ts` lies from the signal's trend before it, as a
    /// multiple of the tolerance `atol + rtol |u|`; the largest over the inputs. The trend is
    /// the cubic through the four latest values before `ts`, the accepted samples and the
    /// step's earlier answers (whatever the input's reconstruction mode): a jump or a kink
    /// between two answers leaves it by its size, a smooth signal by the fourth-order term
    /// only.
    fn trend_excess(&self, ts: f64, values: &[(usize, f64)], (rtol, atol): (f64, f64)) -> f64 {
        let mut worst = 0.0f64;
        for &(i, u) in values {
            let Some(inp) = self.inputs.get(i) else {
                continue;
            };
            // The four latest points before `ts` (the history lies before the step).
            let mut pts = [(f64::NEG_INFINITY, 0.0); 4];
            let mut keep = |p: (f64, f64)| {
                let k = (0..4)
                    .min_by(|&a, &b| pts[a].0.total_cmp(&pts[b].0))
                    .unwrap_or(0);
                if p.0 > pts[k].0 {
                    pts[k] = p;
                }
            };
            inp.history.iter().rev().take(4).for_each(|&p| keep(p));
            for (ta, answers) in self.samples.iter().filter(|s| s.0 < ts) {
                if let Some(&(_, ua)) = answers.iter().find(|a| a.0 == i && a.1.is_finite()) {
                    keep((*ta, ua));
                }
            }
            let n = pts.iter().filter(|p| p.0.is_finite()).count();
            pts.sort_by(|a, b| b.0.total_cmp(&a.0));
            let Some(p) = reconstruct::extrapolate(&pts[..n], ts) else {
                continue;
            };
            let tol = atol + rtol * u.abs().max(p.abs());
            if u.is_finite() && p.is_finite() {
                worst = worst.max((u - p).abs() / tol);
            }
        }
        worst
    }

    /// Set the engine's segments for an evaluation at `t`; ask the importer if `t` is a new
    /// stage time inside the step and `may_ask`.
    fn prepare(&mut self, t: f64, may_ask: bool) {
        if t == self.current {
            return;
        }
        self.current = t;
        let segments = &mut self.engine.inputs_mut().segments;
        segments.copy_from_slice(self.base);
        let sigma = stage_resolution(t);
        if !(t > self.t_n + sigma && t <= self.t_end + sigma) {
            return;
        }
        // Evaluations just past the communication point (finite differences in time at its
        // end) use the segment of t_end: the importer is never asked beyond it.
        let ta = t.min(self.t_end);
        let k = match stage_sample_index(self.samples, ta) {
            Some(k) => k,
            None if may_ask => {
                let values = (self.ask)(ta, InputRequest::Stage);
                if self.samples.len() >= STAGE_SAMPLES_KEPT {
                    self.samples.remove(0);
                }
                self.samples.push((ta, values));
                self.samples.len() - 1
            }
            None => return,
        };
        let segments = &mut self.engine.inputs_mut().segments;
        let (ts, values) = &self.samples[k];
        for &(i, u) in values {
            if let (Some(inp), Some(b), true) =
                (self.inputs.get(i), self.base.get(i), u.is_finite())
            {
                let d = b.eval(self.t_n)[1];
                segments[i] = stage_segment(&inp.history, *ts, u, Some((self.t_n, d)));
            }
        }
    }
}

impl<E: Engine> crate::integrate::system::Mechanical for StageSampled<'_, E> {
    fn n_q(&self) -> usize {
        self.engine.n_q()
    }
    fn n_c(&self) -> usize {
        self.engine.n_c()
    }
    fn mass_matrix(&mut self, t: f64, q: &[f64], m: &mut nalgebra::DMatrix<f64>) {
        self.prepare(t, true);
        self.engine.mass_matrix(t, q, m)
    }
    fn forces(&mut self, t: f64, q: &[f64], v: &[f64], f: &mut [f64]) {
        self.prepare(t, true);
        self.engine.forces(t, q, v, f)
    }
    fn constraints(&mut self, t: f64, q: &[f64], phi: &mut [f64]) {
        self.prepare(t, true);
        self.engine.constraints(t, q, phi)
    }
    fn constraint_jacobian(&mut self, t: f64, q: &[f64], jac: &mut nalgebra::DMatrix<f64>) {
        self.prepare(t, true);
        self.engine.constraint_jacobian(t, q, jac)
    }
    fn constraint_time_derivative(&mut self, t: f64, q: &[f64], phi_t: &mut [f64]) {
        self.prepare(t, true);
        self.engine.constraint_time_derivative(t, q, phi_t)
    }
    fn acceleration_rhs(&mut self, t: f64, q: &[f64], v: &[f64], gamma: &mut [f64]) {
        self.prepare(t, true);
        self.engine.acceleration_rhs(t, q, v, gamma)
    }
    // The methods with defaults are forwarded too: a default here would silently take the
    // engine's fast paths away on this path only (the articulated-body solve, the one-pass
    // constraint rows, the saddle residual, sparse factorizations); the test
    // `the_stage_sampled_engine_keeps_the_engine_fast_paths` checks each.
    fn unconstrained_accelerations(&mut self, t: f64, q: &[f64], v: &[f64], a: &mut [f64]) -> bool {
        self.prepare(t, true);
        self.engine.unconstrained_accelerations(t, q, v, a)
    }
    fn constraint_values(
        &mut self,
        t: f64,
        q: &[f64],
        phi: &mut [f64],
        jac: &mut nalgebra::DMatrix<f64>,
        phi_t: &mut [f64],
    ) {
        self.prepare(t, true);
        self.engine.constraint_values(t, q, phi, jac, phi_t)
    }
    fn constraint_jacobian_and_rhs(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
        jac: &mut nalgebra::DMatrix<f64>,
        gamma: &mut [f64],
    ) {
        self.prepare(t, true);
        self.engine.constraint_jacobian_and_rhs(t, q, v, jac, gamma)
    }
    fn saddle_residual(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
        x: &[f64],
        out: &mut [f64],
    ) -> bool {
        self.prepare(t, true);
        self.engine.saddle_residual(t, q, v, x, out)
    }
    fn sparse_structure(&mut self) -> Option<&mut dyn crate::integrate::sparse::SparseStructure> {
        self.engine.sparse_structure()
    }
}

impl<E: Engine> crate::integrate::system::ForceJacobians for StageSampled<'_, E> {
    fn force_jacobians(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
        df_dq: &mut nalgebra::DMatrix<f64>,
        df_dv: &mut nalgebra::DMatrix<f64>,
    ) {
        self.prepare(t, true);
        self.engine.force_jacobians(t, q, v, df_dq, df_dv)
    }
}

impl<E: Engine> crate::integrate::system::ConstraintHessians for StageSampled<'_, E> {
    fn constraint_force_jacobian(
        &mut self,
        t: f64,
        q: &[f64],
        lambda: &[f64],
        out: &mut nalgebra::DMatrix<f64>,
    ) {
        self.prepare(t, true);
        self.engine.constraint_force_jacobian(t, q, lambda, out)
    }
    fn mass_times_accel_jacobian(
        &mut self,
        t: f64,
        q: &[f64],
        a: &[f64],
        out: &mut nalgebra::DMatrix<f64>,
    ) {
        self.prepare(t, true);
        self.engine.mass_times_accel_jacobian(t, q, a, out)
    }
}

impl<E: Engine> crate::integrate::system::Excitations for StageSampled<'_, E> {
    fn n_excitations(&self) -> usize {
        self.engine.n_excitations()
    }
    fn excitation(&mut self, t: f64, i: usize) -> f64 {
        self.prepare(t, true);
        self.engine.excitation(t, i)
    }
    fn set_excitation_offset(&mut self, i: usize, delta: f64) {
        self.engine.set_excitation_offset(i, delta)
    }
    fn excitation_orders(&self) -> usize {
        self.engine.excitation_orders()
    }
    fn excitation_jet(&mut self, t: f64, i: usize) -> [f64; 3] {
        self.prepare(t, true);
        self.engine.excitation_jet(t, i)
    }
    fn set_excitation_jet_offset(&mut self, i: usize, delta: [f64; 3]) {
        self.engine.set_excitation_jet_offset(i, delta)
    }
}

impl<E: Engine> EventFunctions for StageSampled<'_, E> {
    fn n_events(&self) -> usize {
        self.engine.n_events()
    }
    fn event_functions(&mut self, t: f64, q: &[f64], g: &mut [f64]) {
        // Gaps depend on positions only; driven bodies move with the stage input.
        self.prepare(t, true);
        self.engine.event_functions(t, q, g)
    }
}

impl<E: Engine> crate::integrate::system::StepHooks for StageSampled<'_, E> {
    fn accept_step(&mut self, t: f64, q: &[f64], v: &[f64], lambda: Option<&[f64]>) {
        // Bookkeeping at the accepted time: the importer is asked there right after the step
        // (InputRequest::AcceptedStep), so use what is known (a stage answer at t if any).
        self.prepare(t, false);
        self.engine.accept_step(t, q, v, lambda)
    }
    fn normalize(&mut self, q: &mut [f64]) -> bool {
        self.engine.normalize(q)
    }
    fn checkpoint(&mut self) {
        self.engine.checkpoint()
    }
    fn rollback(&mut self) {
        self.engine.rollback()
    }
    fn take_law_switch(&mut self) -> bool {
        self.engine.take_law_switch()
    }
    fn may_redo(&self) -> bool {
        self.redo_tol.is_some()
    }
    /// The step is taken again when an answer inside it left the signal's trend by more than
    /// the tolerance ([`StageSampled::trend_excess`]): to the middle between the
    /// last answer that kept to it and the first that did not (a jump is bracketed ever
    /// closer, until a step shorter than the stage resolution crosses it on the accepted
    /// segments and the answer after it is taken as a step of the signal), or, where the
    /// excess grows like a smooth trend's (as the fourth power of the time from the step start), to
    /// where it would just keep to the tolerance, if that is later.
    fn take_redo(&mut self, t0: f64, t1: f64) -> Option<f64> {
        let tol = self.redo_tol?;
        let sigma = stage_resolution(t1);
        let inside = |ts: f64| ts > t0 + sigma && ts <= t1 + sigma;
        let mut first: Option<(f64, f64)> = None;
        for (ts, values) in self.samples.iter() {
            if !inside(*ts) || first.is_some_and(|(tf, _)| tf <= *ts) {
                continue;
            }
            let excess = self.trend_excess(*ts, values, tol);
            if excess > 1.0 {
                first = Some((*ts, excess));
            }
        }
        let (t_dev, excess) = first?;
        let t_fit = self
            .samples
            .iter()
            .map(|s| s.0)
            .filter(|&ts| ts > t0 && ts < t_dev)
            .fold(t0, f64::max);
        let smooth = t0 + 0.9 * (t_dev - t0) * excess.powf(-0.25);
        Some((0.5 * (t_fit + t_dev)).max(smooth).min(t1))
    }
}

/// How much the segments now installed jump against the committed ones at `t0` in value
/// and in the second and third time derivatives: the size of the kink in the right-hand side
/// that a multistep history spans ([`Integrator::inputs_changed`]). The smooth reconstruction
/// keeps value and slope continuous, so only `ü` and the cubic's `u⃛` jump; `hold` jumps in
/// value wherever the sample changed. A value jump that moved a driven position beyond the
/// tolerance was already a restart ([`input_jump`]); what is left here moves no state but
/// makes the accelerations jump (a force or torque, or a driven coordinate that the joint
/// formulation eliminates). Differences of a few rounding units are not jumps. Unknown when
/// an input has no committed segment yet.
fn input_kink<E: Engine>(inputs: &[InputState], e: &mut E, t0: f64) -> InputKink {
    let mut kink = InputKink::NONE;
    for (inp, seg) in inputs.iter().zip(&e.inputs_mut().segments) {
        let Some(c) = inp.committed else {
            return InputKink::UNKNOWN;
        };
        kink = kink_between(kink, &c, seg, t0);
    }
    kink
}

/// `kink` widened by the jump from segment `old` to `new` at `t`.
fn kink_between(mut kink: InputKink, old: &InputSegment, new: &InputSegment, t: f64) -> InputKink {
    let (a, b) = (old.eval(t), new.eval(t));
    let dv = (a[0] - b[0]).abs();
    if dv > 64.0 * f64::EPSILON * (a[0].abs() + b[0].abs()) {
        kink.value = kink.value.max(dv);
    }
    let dr = (a[1] - b[1]).abs();
    if dr > 64.0 * f64::EPSILON * (a[1].abs() + b[1].abs()) {
        kink.rate = kink.rate.max(dr);
    }
    kink.accel = kink.accel.max((a[2] - b[2]).abs());
    kink.jerk = kink.jerk.max(6.0 * (old.coeffs[3] - new.coeffs[3]).abs());
    kink
}

/// After new input segments at `x.t`: the state projected onto the position and velocity
/// constraints of those segments, when they moved a driven position or velocity by more than
/// the integrator's tolerance (a jump); `None` when the state still fits within it (a C¹
/// reconstruction, or the small mismatch of consecutive Taylor segments, which the next
/// step's constraint stabilization absorbs).
///
/// The projection is the physical one ([`project_state`]): positions move by the smallest
/// change in the mass metric, velocities take the impulsive response `Δv = M⁻¹ Φ_qᵀ Λ` that
/// makes `Φ_q v + Φ_t = 0` (momentum changes only through the constraints), so a driven
/// velocity jump acts on the rest of the mechanism like a blow through the joints.
///
/// Where the formulation eliminates the driven motions (joint coordinates), a rate jump of
/// theirs (`before`: their jets before the change) is no constraint violation: the free
/// coordinates take the impulsive response first ([`eliminated_impulse`]). Without it a
/// chain hanging from a frame driven by a `linear` or `hold` input moved with the frame as
/// one rigid body (tip 3.6e-4 m off the frame where the smooth mode and absolute coordinates
/// swing it 0.08 m), with status OK.
fn input_jump<E: Engine>(
    e: &mut E,
    s: &Settings,
    x: &MechState,
    before: Option<&[[f64; 3]]>,
) -> Option<MechState> {
    let t0 = x.t;
    let (nq, nc) = (e.n_q(), e.n_c());
    let weight = |a: f64, b: f64| s.atol + s.rtol * a.abs().max(b.abs());
    let kicked = before.and_then(|b| eliminated_impulse(e, t0, &x.q, &x.v, b));
    let kicked = kicked.filter(|(q, v)| {
        x.q.iter()
            .zip(q)
            .chain(x.v.iter().zip(v))
            .any(|(&a, &b)| (a - b).abs() > weight(a, b))
    });
    let x = &match &kicked {
        Some((q, v)) => MechState {
            q: q.clone(),
            v: v.clone(),
            ..x.clone()
        },
        None => x.clone(),
    };
    let restart = |x: &MechState| MechState {
        t: t0,
        q: x.q.clone(),
        v: x.v.clone(),
        lambda: x.lambda.clone(),
    };
    if nc == 0 {
        return kicked.is_some().then(|| restart(x));
    }
    let mut phi = vec![0.0; nc];
    let mut phi_t = vec![0.0; nc];
    let mut jac = nalgebra::DMatrix::zeros(nc, nq);
    e.constraints(t0, &x.q, &mut phi);
    e.constraint_jacobian(t0, &x.q, &mut jac);
    e.constraint_time_derivative(t0, &x.q, &mut phi_t);
    let vel = &jac * nalgebra::DVector::from_column_slice(&x.v)
        + nalgebra::DVector::from_column_slice(&phi_t);
    // Cheap test first: residuals far below the tolerance need no projection.
    let small = 1e-3 * s.atol;
    if phi.iter().all(|p| p.abs() <= small) && vel.amax() <= small {
        return kicked.is_some().then(|| restart(x));
    }
    // (Where the projection fails, no restart: the state as it was, not kicked.)
    let (q, v) = project_state(e, t0, &x.q, &x.v)?;
    let jump =
        x.q.iter()
            .zip(&q)
            .chain(x.v.iter().zip(&v))
            .map(|(&a, &b)| (a - b).abs() / weight(a, b))
            .fold(0.0f64, f64::max);
    // A kicked state restarts projected, however small the projection.
    (jump > 1.0 || kicked.is_some()).then(|| MechState {
        t: t0,
        q,
        v,
        lambda: x.lambda.clone(),
    })
}

/// The free coordinates' positions and velocities after the eliminated driven motions jumped
/// from their jets `before` to what the installed segments give at `t` (a `linear` input's new
/// slope, a `hold` input's step, a built-in ramp starting). Momentum changes only through the
/// driven motions: a rate jump gives `M Δṗ = −B Δu̇` (with the loop rows' impulses), and
/// `−M⁻¹ B Δu̇` is the response of the accelerations to an input acceleration `Δu̇` at rest
/// (`Ψ` is linear in `ü`, every other term cancels in the difference). A value jump is the
/// limit of a move ever faster, a blow and its opposite: the free coordinates move by
/// `−M⁻¹ B Δu`, as absolute coordinates' projection in the mass metric moves the bodies.
/// `None` when nothing jumped beyond rounding.
fn eliminated_impulse<E: Engine>(
    e: &mut E,
    t: f64,
    q: &[f64],
    v: &[f64],
    before: &[[f64; 3]],
) -> Option<(Vec<f64>, Vec<f64>)> {
    let n = e.n_excitations();
    if before.len() != n {
        return None;
    }
    let jump = |a: f64, b: f64| {
        let d = b - a;
        if d.abs() > 64.0 * f64::EPSILON * (a.abs() + b.abs()) {
            d
        } else {
            0.0
        }
    };
    let now: Vec<[f64; 3]> = (0..n).map(|i| e.excitation_jet(t, i)).collect();
    let dvalue: Vec<f64> = (0..n).map(|i| jump(before[i][0], now[i][0])).collect();
    let drate: Vec<f64> = (0..n).map(|i| jump(before[i][1], now[i][1])).collect();
    if dvalue.iter().chain(&drate).all(|&d| d == 0.0) {
        return None;
    }
    let rest = vec![0.0; v.len()];
    let (a0, _) = e.accelerations(t, q, &rest).ok()?;
    // The response to an input acceleration `d` per excitation, at rest.
    let mut response = |d: &[f64]| -> Option<Vec<f64>> {
        if d.iter().all(|&x| x == 0.0) {
            return Some(vec![0.0; a0.len()]);
        }
        for (i, &x) in d.iter().enumerate() {
            e.set_excitation_jet_offset(i, [0.0, 0.0, x]);
        }
        let r = e.accelerations(t, q, &rest);
        for i in 0..n {
            e.set_excitation_jet_offset(i, [0.0; 3]);
        }
        let (a1, _) = r.ok()?;
        Some(a1.iter().zip(&a0).map(|(p, m)| p - m).collect())
    };
    let (dq, dv) = (response(&dvalue)?, response(&drate)?);
    let q1: Vec<f64> = q.iter().zip(&dq).map(|(a, b)| a + b).collect();
    let v1: Vec<f64> = v.iter().zip(&dv).map(|(a, b)| a + b).collect();
    q1.iter()
        .chain(&v1)
        .all(|z| z.is_finite())
        .then_some((q1, v1))
}

/// Restart `integ` if the segments now installed make its state jump ([`input_jump`]);
/// whether it did.
fn restart_on_jump<E: Engine>(
    integ: &mut AnyIntegrator,
    e: &mut E,
    s: &Settings,
    base: &mut Stats,
    before: Option<&[[f64; 3]]>,
) -> Result<bool, IntegrateError> {
    let x = Integrator::<E>::state(integ).clone();
    match input_jump(e, s, &x, before) {
        Some(xn) => restart_after_jump(integ, e, s, &xn, base).map(|()| true),
        None => Ok(false),
    }
}

/// The right-hand side changed at the accepted time (new input segments, a motion's
/// breakpoint): the method's carried derivatives are stale, and the method restarts from the
/// projected state if the change moved the driven positions or velocities beyond the
/// tolerance, or else (a multistep method) re-anchors its history to the inputs' `kink` there
/// (a held force's new sample).
fn continue_after_change<E: Engine>(
    integ: &mut AnyIntegrator,
    e: &mut E,
    s: &Settings,
    base: &mut Stats,
    events: &mut EventLocator,
    kink: InputKink,
    before: Option<&[[f64; 3]]>,
) -> Result<(), IntegrateError> {
    <AnyIntegrator as Integrator<E>>::rhs_changed(integ);
    if restart_on_jump(integ, e, s, base, before)? {
        events.reset();
    } else if kink.any() {
        <AnyIntegrator as Integrator<E>>::inputs_changed(integ, e, kink)?;
    }
    Ok(())
}

/// On a motion's breakpoint at `t`: continue by the motions' right limits; a rate jump moves
/// the driven velocities (projected, the method restarted, as for an input's jump).
fn continue_at_breakpoint<E: Engine>(
    integ: &mut AnyIntegrator,
    e: &mut E,
    s: &Settings,
    base: &mut Stats,
    events: &mut EventLocator,
    t: f64,
) -> Result<(), IntegrateError> {
    // The eliminated motions' jets by their left limits, for the impulse of a rate jump.
    let before = eliminated_jets(e, t);
    e.set_motion_right_limit_at(t);
    continue_after_change(
        integ,
        e,
        s,
        base,
        events,
        InputKink::NONE,
        before.as_deref(),
    )
}

/// Every excitation's jet at `t` where the formulation eliminates the driven motions (joint
/// coordinates), for [`eliminated_impulse`]; `None` otherwise.
fn eliminated_jets<E: Engine>(e: &mut E, t: f64) -> Option<Vec<[f64; 3]>> {
    let n = e.n_excitations();
    (e.excitation_orders() >= 3 && n > 0).then(|| (0..n).map(|i| e.excitation_jet(t, i)).collect())
}

/// Restart `integ` from `x` after an input jump, keeping the statistics in `base` when the
/// method starts them over.
fn restart_after_jump<E: Engine>(
    integ: &mut AnyIntegrator,
    e: &mut E,
    s: &Settings,
    x: &MechState,
    base: &mut Stats,
) -> Result<(), IntegrateError> {
    let before = *<AnyIntegrator as Integrator<E>>::stats(integ);
    base.restarts += 1;
    match integ.restart(e, x) {
        Ok(true) => Ok(()),
        Ok(false) => {
            add_stats(base, &before);
            Ok(())
        }
        Err(_) => {
            // What the method kept does not fit the projected state (seen with the
            // intermediate update right after the first internal step): start a fresh one.
            add_stats(base, &before);
            let mut fresh = AnyIntegrator::new(*s, e.n_q(), e.n_c())?;
            fresh.initialize(e, x)?;
            *integ = fresh;
            Ok(())
        }
    }
}

/// `(q, v)` projected onto the position and velocity constraints at `t` in the mass metric:
/// positions by Newton on `[M Φ_qᵀ; Φ_q 0] (Δq, μ) = (0, −Φ)`, velocities by the impulsive
/// response `[M Φ_qᵀ; Φ_q 0] (Δv, Λ) = (0, −(Φ_q v + Φ_t))`. Falls back to minimal-norm
/// corrections (`Φ_qᵀ (Φ_q Φ_qᵀ)⁻¹`) if the saddle-point matrix is singular.
fn project_state<E: Engine>(
    e: &mut E,
    t: f64,
    q: &[f64],
    v: &[f64],
) -> Option<(Vec<f64>, Vec<f64>)> {
    use nalgebra::{DMatrix, DVector};
    let (nq, nc) = (e.n_q(), e.n_c());
    let mut m = DMatrix::zeros(nq, nq);
    let mut jac = DMatrix::zeros(nc, nq);
    let mut phi = vec![0.0; nc];
    let mut phi_t = vec![0.0; nc];
    // Solves for the correction of a constraint residual `r` at positions `q`.
    let correction = |e: &mut E,
                      q: &[f64],
                      r: &[f64],
                      m: &mut DMatrix<f64>,
                      jac: &mut DMatrix<f64>|
     -> Option<DVector<f64>> {
        e.mass_matrix(t, q, m);
        e.constraint_jacobian(t, q, jac);
        let mut k = DMatrix::zeros(nq + nc, nq + nc);
        k.view_mut((0, 0), (nq, nq)).copy_from(m);
        k.view_mut((nq, 0), (nc, nq)).copy_from(jac);
        k.view_mut((0, nq), (nq, nc)).copy_from(&jac.transpose());
        let mut rhs = DVector::zeros(nq + nc);
        for (i, ri) in r.iter().enumerate() {
            rhs[nq + i] = -ri;
        }
        let sol = k
            .lu()
            .solve(&rhs)
            .filter(|s| s.iter().all(|z| z.is_finite()));
        let sol = match sol {
            Some(s) => s.rows(0, nq).into_owned(),
            None => {
                let y = (&*jac * jac.transpose())
                    .lu()
                    .solve(&DVector::from_column_slice(r))?;
                -(jac.transpose() * y)
            }
        };
        Some(sol)
    };
    let mut q = q.to_vec();
    let scale = 1.0 + q.iter().fold(0.0f64, |a, z| a.max(z.abs()));
    for _ in 0..20 {
        e.constraints(t, &q, &mut phi);
        if phi.iter().all(|p| p.abs() <= 1e-13 * scale) {
            break;
        }
        let dq = correction(e, &q, &phi, &mut m, &mut jac)?;
        q.iter_mut().zip(dq.iter()).for_each(|(a, d)| *a += d);
    }
    e.constraints(t, &q, &mut phi);
    if !phi.iter().all(|p| p.abs() <= 1e-9 * scale) {
        return None;
    }
    e.constraint_jacobian(t, &q, &mut jac);
    e.constraint_time_derivative(t, &q, &mut phi_t);
    let r = &jac * DVector::from_column_slice(v) + DVector::from_column_slice(&phi_t);
    let dv = correction(e, &q, r.as_slice(), &mut m, &mut jac)?;
    let v: Vec<f64> = v.iter().zip(dv.iter()).map(|(a, d)| a + d).collect();
    Some((q, v))
}

/// The segment the outputs at `t` see ([`InputState::segment_at_sample`]) after the importer
/// set `value + s` at `t`, for a step of size `h`.
fn rebuilt_segment(inp: &InputState, mode: Reconstruction, t: f64, h: f64, s: f64) -> InputSegment {
    let mut probe = inp.clone();
    probe.value = inp.value + s;
    probe.record(t, inp.value + s);
    probe.segment_at_sample(mode, t, h)
}

/// The difference step for the sample `u` of an input: small against the scale on which the
/// smooth mode's limiters switch. They compare the newest sample with the recent samples
/// (its misfit against their increments, the target against their range), so that scale is
/// the samples' spread, not `|u|` or 1: a step of `∛ε·max(1, |u|)` = 6e-6 crossed into
/// another branch near the peaks of a 1 cm sine sampled every 2 ms, whose increments there
/// are a few 1e-6 (quarter_car_rig's stamp force read 2.37e7 instead of 3.83e7 N/m). `1e-6`
/// of the spread, but not below `1e-9 |u|` (round-off of the rebuilt coefficients, relative
/// `ε |u| / step`); on a flat history the rebuild is linear in the perturbation (every
/// quantity it compares scales with it), and any step is exact.
fn sample_step(inp: &InputState) -> f64 {
    let u = inp.value;
    let (lo, hi) = inp
        .history
        .iter()
        .map(|s| s.1)
        .chain([u])
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    let spread = hi - lo;
    let d = if spread > 0.0 && spread.is_finite() {
        (1e-6 * spread).max(1e-9 * u.abs())
    } else {
        1e-6 * u.abs().max(1.0)
    };
    d.max(1e-150)
}

/// `d(u, u̇, ü)(t)/du` of the segment the outputs at `t` see after setting the input to `u`
/// at `t`: the derivative of the reconstruction's branch in use at the current samples.
///
/// The rebuild is not affine in the sample: under `smooth` the target is blended by weights
/// that depend on the sample (misfit against increments), clamped to the samples' range
/// widened by the trend's excursion, and its end slope bounded (Fritsch–Carlson); `u` and
/// `u̇` at `t` are the carried ones and do not depend on the sample at all
/// ([`InputState::segment_at_sample`]). It is smooth between the limiters' switches, so a
/// central difference with a step small against the samples' spread ([`sample_step`]) is the
/// derivative of the current branch to round-off. Where the two one-sided differences still
/// disagree, a switch lies within the step: it is retried with steps 1e3 and 1e6 times
/// smaller (down to round-off). A sample exactly at a switch (a set of measure zero) has no
/// derivative; there the central difference, the mean of the two sides, is returned, which
/// is what an importer's own central Set/Get difference gives.
fn rebuild_derivative(inp: &InputState, mode: Reconstruction, t: f64, h: f64) -> [f64; 3] {
    let at = |s: f64| rebuilt_segment(inp, mode, t, h, s).eval(t);
    let y0 = at(0.0);
    let mut d = sample_step(inp);
    let floor = 1e-12 * inp.value.abs();
    let mut first = None;
    for _ in 0..3 {
        let (p, m) = (at(d), at(-d));
        let central = [0, 1, 2].map(|k| (p[k] - m[k]) / (2.0 * d));
        // A switch within the step changes the slope by O(1); the blend's own curvature
        // makes the one-sided differences differ by O(d) only (1e-6 relative at the first
        // step on a quadratic ramp), and shrinking the step for that only adds round-off.
        let consistent = (0..3).all(|k| {
            let (fwd, bwd) = ((p[k] - y0[k]) / d, (y0[k] - m[k]) / d);
            let scale = y0[k].abs().max(p[k].abs()).max(m[k].abs());
            (fwd - bwd).abs() <= 1e-3 * fwd.abs().max(bwd.abs()) + 1e3 * f64::EPSILON * scale / d
        });
        if consistent {
            return central;
        }
        let first = *first.get_or_insert(central);
        if d * 1e-3 < floor {
            return first;
        }
        d *= 1e-3;
    }
    // A switch at the sample itself: the mean of the two sides, from the first (largest)
    // step, where round-off is smallest.
    first.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The time's resolution is blamed for a step a model can need (the stiff double
    /// pendulum's 1.4e-9 s at t = 5e5, below the 1.8e-9 s minimum there), not for a collapse
    /// that ends a few rounding units below the minimum at any time (the spherical chain's
    /// 5e-15 s at t = 4.28), nor near t = 0.
    #[test]
    fn only_a_step_a_model_can_need_is_blamed_on_the_time_resolution() {
        let refused = |t: f64, h: f64| IntegrateError::StepTooSmall {
            t,
            h,
            h_min: 16.0 * f64::EPSILON * t.abs().max(1.0),
            reason: String::new(),
        };
        assert!(step_below_time_resolution(&refused(5e5, 1.4e-9)));
        assert!(!step_below_time_resolution(&refused(4.28, 5e-15)));
        assert!(!step_below_time_resolution(&refused(0.5, 1e-9)));
    }

    /// The advisory about the local linearization on contact models appears exactly when the
    /// method, contacts and an unbounded step come together.
    #[test]
    fn advisories_name_the_local_linearization_step_bound_on_contact_models() {
        let sim_for = |model: &str, settings: &[(&str, f64)]| {
            let f = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(format!("models/{model}.toml"));
            let spec = Arc::new(crate::mbs::load_model(&f).unwrap());
            let table = Arc::new(VariableTable::from_spec(&spec));
            let engine = crate::mbs::system::System::new(spec.clone()).unwrap();
            let mut sim = Simulation::new(spec.clone(), table.clone(), engine);
            for (name, value) in settings {
                let v = table.by_name(name).unwrap();
                match v.var_type {
                    crate::description::VarType::Float64 => {
                        assert!(sim
                            .set_real(v.value_reference, *value, SetPhase::Setup)
                            .unwrap()
                            .is_none())
                    }
                    _ => sim
                        .set_integer(v.value_reference, *value as i64, SetPhase::Setup)
                        .unwrap(),
                }
            }
            sim
        };
        // The enumeration item of `solver.integrator` (1-based, in `Method::ALL` order).
        let ll = (1 + Method::ALL
            .iter()
            .position(|m| *m == Method::LocalLinearization)
            .unwrap()) as f64;
        let w = sim_for("bouncing_balls", &[("solver.integrator", ll)]).advisories();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("solver.max_step"), "{}", w[0]);
        let bounded = [("solver.integrator", ll), ("solver.max_step", 2e-3)];
        assert!(sim_for("bouncing_balls", &bounded).advisories().is_empty());
        assert!(sim_for("bouncing_balls", &[]).advisories().is_empty());
        let no_contacts = [("solver.integrator", ll)];
        assert!(sim_for("double_pendulum_stiff", &no_contacts)
            .advisories()
            .is_empty());
    }

    #[test]
    fn analytic_output_input_jacobian_matches_the_differenced_oracle() {
        for m in [
            "slider_crank",
            "four_link",
            "quarter_car_rig",
            "pendulum_chain",
        ] {
            let f =
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("models/{m}.toml"));
            let spec = Arc::new(crate::mbs::load_model(&f).unwrap());
            let table = Arc::new(VariableTable::from_spec(&spec));
            let engine = crate::mbs::system::System::new(spec.clone()).unwrap();
            let mut sim = Simulation::new(spec.clone(), table.clone(), engine);
            sim.setup_experiment(Some(1e-6), 0.0, None).unwrap();
            sim.initialize().unwrap();
            let vr = |n: &str| table.by_name(n).unwrap().value_reference;
            let ins: Vec<u32> = spec.inputs.iter().map(|i| vr(&i.name)).collect();
            let outs: Vec<u32> = spec.outputs.iter().map(|o| vr(&o.name)).collect();
            // A few samples in the history, so the rebuilt segment has a slope and curvature.
            for k in 1..=3 {
                let t = 0.01 * k as f64;
                for (j, &v) in ins.iter().enumerate() {
                    let u0 = spec.inputs[j].start;
                    sim.set_real(v, u0 + 0.002 * (k * k) as f64, SetPhase::Stepping)
                        .unwrap();
                }
                sim.set_cpu_budget_per_call(f64::INFINITY);
                let r = sim.advance_to(t, None).unwrap();
                assert_eq!(
                    r,
                    Advance::Completed,
                    "{}",
                    sim.last_failure().unwrap_or_default()
                );
            }
            let an = sim.output_input_jacobian(&outs, &ins).unwrap();
            let fd = sim.output_input_jacobian_differenced(&outs, &ins).unwrap();
            let scale = fd.amax();
            for (a, d) in an.iter().zip(fd.iter()) {
                let tol = 1e-6 * d.abs().max(1e-3 * scale).max(1e-9);
                assert!((a - d).abs() <= tol, "{m}: analytic {a} vs differenced {d}");
            }
        }
    }

    /// The FMI 3 intermediate-update path wraps the engine in `StageSampled`; every method
    /// with a default in the integrator's traits must reach the engine, or that path alone
    /// loses the articulated-body solve, the saddle residual and the sparse structure (the
    /// answers are equal either way, so only this comparison shows a missing forward).
    /// `StageSampled::take_redo` against a signal known in closed form: a sine sampled at the
    /// accepted steps and answered at RN-like stage times (0.655 h, 1.146 h, the end) lets the
    /// step stand; a jump between the inner stage and the end brackets the redo between them;
    /// a jump before the first answer sends it to the middle of the step; an answer that
    /// jumped beyond the accepted step (a rejected try's) is no reason to redo it.
    #[test]
    fn a_step_is_redone_for_a_jump_of_the_answers_and_not_for_a_smooth_signal() {
        use crate::integrate::system::StepHooks;
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/x.toml");
        let text =
            "[model]\nname = \"one\"\nformulation = \"joint\"\ngravity = [0.0, -9.81, 0.0]\n\
                    [[bodies]]\nname = \"b\"\nmass = 1.0\ninertia = [0.01, 0.01, 0.01]\n\
                    position = [0.5, 0.0, 0.0]\n[[joints]]\nname = \"j\"\ntype = \"revolute\"\n\
                    body1 = \"ground\"\nbody2 = \"b\"\npoint = [0.0, 0.0, 0.0]\n\
                    axis = [0.0, 0.0, 1.0]\n";
        let spec = crate::mbs::load_model_str(text, &path).unwrap();
        let mut engine = crate::mbs::system::System::new(Arc::new(spec)).unwrap();
        let u = |t: f64| 0.1 * (5.0 * t).sin();
        let (t0, h) = (1.0, 0.01);
        let mut inp = InputState::new(u(t0));
        for k in (0..4).rev() {
            let t = t0 - k as f64 * h;
            inp.record(t, u(t));
        }
        let inputs = vec![inp];
        let base = vec![InputSegment::constant(t0, u(t0))];
        let mut ask = |_: f64, _: InputRequest| Vec::new();
        let mut redo = |answers: &[(f64, f64)]| {
            let mut samples: Vec<(f64, Vec<(usize, f64)>)> =
                answers.iter().map(|&(t, v)| (t, vec![(0, v)])).collect();
            let mut sys = StageSampled {
                engine: &mut engine,
                ask: &mut ask,
                inputs: &inputs,
                base: &base,
                samples: &mut samples,
                t_n: t0,
                t_end: t0 + 10.0 * h,
                current: f64::NAN,
                redo_tol: Some((1e-4, 1e-6)),
            };
            sys.take_redo(t0, t0 + h)
        };
        let (ti, tb, te) = (t0 + 0.655 * h, t0 + 1.146 * h, t0 + h);
        assert_eq!(redo(&[(ti, u(ti)), (tb, u(tb)), (te, u(te))]), None);
        let jumped = |t: f64| u(t) + 0.01;
        let r = redo(&[(ti, u(ti)), (tb, jumped(tb)), (te, jumped(te))]).unwrap();
        assert!((r - 0.5 * (ti + te)).abs() < 1e-12, "{r}");
        let r = redo(&[(ti, jumped(ti)), (tb, jumped(tb)), (te, jumped(te))]).unwrap();
        assert!((r - 0.5 * (t0 + ti)).abs() < 1e-12, "{r}");
        assert_eq!(redo(&[(ti, u(ti)), (tb, jumped(tb)), (te, u(te))]), None);
    }

    #[test]
    fn the_stage_sampled_engine_keeps_the_engine_fast_paths() {
        use crate::integrate::system::Mechanical;
        use std::fmt::Write as _;
        // A planar chain of 6 revolute links in joint coordinates (a tree: the
        // articulated-body solve and the saddle residual), and the same in absolute
        // coordinates (the sparse structure).
        let mut text = String::from(
            "[model]\nname = \"chain6\"\nformulation = \"FORM\"\ngravity = [0.0, -9.81, 0.0]\n",
        );
        for k in 1..=6 {
            let parent = if k == 1 {
                "ground".to_string()
            } else {
                format!("b{}", k - 1)
            };
            write!(
                text,
                "[[bodies]]\nname = \"b{k}\"\nmass = 1.0\ninertia = [0.01, 0.01, 0.01]\n\
                 position = [{}.5, 0.0, 0.0]\n\
                 [[joints]]\nname = \"j{k}\"\ntype = \"revolute\"\nbody1 = \"{parent}\"\n\
                 body2 = \"b{k}\"\npoint = [{}.0, 0.0, 0.0]\naxis = [0.0, 0.0, 1.0]\n",
                k - 1,
                k - 1
            )
            .unwrap();
        }
        for form in ["joint", "absolute"] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/x.toml");
            let spec = crate::mbs::load_model_str(&text.replace("FORM", form), &path).unwrap();
            let mut engine = crate::mbs::system::System::new(Arc::new(spec)).unwrap();
            let x = engine.initial_state(0.0).unwrap();
            let (n, nc) = (engine.n_q(), engine.n_c());
            let v: Vec<f64> = (0..n).map(|k| 0.1 * k as f64).collect();
            let direct = {
                let (mut a, mut r) = (vec![0.0; n], vec![0.0; n + nc]);
                let fast = engine.unconstrained_accelerations(0.1, &x.q, &v, &mut a);
                let saddle = engine.saddle_residual(0.1, &x.q, &v, &vec![0.0; n + nc], &mut r);
                (fast, saddle, engine.sparse_structure().is_some())
            };
            let inputs: Vec<InputState> = Vec::new();
            let (base, mut samples) = (Vec::new(), Vec::new());
            let mut ask = |_: f64, _: InputRequest| Vec::new();
            let mut wrapped = StageSampled {
                engine: &mut engine,
                ask: &mut ask,
                inputs: &inputs,
                base: &base,
                samples: &mut samples,
                t_n: 0.0,
                t_end: 0.2,
                current: f64::NAN,
                redo_tol: None,
            };
            let (mut a, mut r) = (vec![0.0; n], vec![0.0; n + nc]);
            let fast = wrapped.unconstrained_accelerations(0.1, &x.q, &v, &mut a);
            let saddle = wrapped.saddle_residual(0.1, &x.q, &v, &vec![0.0; n + nc], &mut r);
            let sparse = wrapped.sparse_structure().is_some();
            assert_eq!((fast, saddle, sparse), direct, "{form}");
            // The test means something: the joint chain has the first two, the absolute
            // one the third.
            let expected = if form == "joint" {
                (true, true, direct.2)
            } else {
                (false, false, true)
            };
            assert_eq!(direct, expected, "{form}");
        }
    }
}
