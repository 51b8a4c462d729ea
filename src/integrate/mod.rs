//! Time integration. Methods see the problem only through [`system`]'s traits.
//!
//! Every method implements [`Integrator`]: initialise at a consistent state, then take one
//! accepted step at a time, never past the limit the caller gives (co-simulation cannot step
//! past the communication point because the inputs beyond it are unknown).

pub mod any;
pub mod bdf;
pub mod clock;
pub mod dense;
pub mod events;
pub mod explicit;
pub mod ggl;
pub mod half_implicit;
pub mod jacobian;
pub mod linalg;
pub mod local_linearization;
pub mod newmark;
pub mod reanchor;
pub mod rosenbrock;
pub mod sdirk;
pub mod sparse;
pub mod step_control;
pub mod system;
pub mod test_systems;

use crate::show::show_number;
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use reanchor::InputKink;
pub use system::{
    ConstraintHessians, Excitations, ForceJacobians, Mechanical, MultibodySystem, StepHooks,
};

/// Which integration method. The names are the values of the FMU parameter
/// `solver.integrator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    #[default]
    Bdf,
    RosenbrockNystrom,
    WMethod,
    Sdirk,
    Trapezoidal,
    Newmark,
    Hht,
    GeneralizedAlpha,
    LocalLinearization,
    HalfImplicit,
    Dopri5,
}

impl Method {
    pub const ALL: [Method; 11] = [
        Method::Bdf,
        Method::RosenbrockNystrom,
        Method::WMethod,
        Method::Sdirk,
        Method::Trapezoidal,
        Method::Newmark,
        Method::Hht,
        Method::GeneralizedAlpha,
        Method::LocalLinearization,
        Method::HalfImplicit,
        Method::Dopri5,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Method::Bdf => "bdf",
            Method::RosenbrockNystrom => "rosenbrock_nystrom",
            Method::WMethod => "w_method",
            Method::Sdirk => "sdirk",
            Method::Trapezoidal => "trapezoidal",
            Method::Newmark => "newmark",
            Method::Hht => "hht",
            Method::GeneralizedAlpha => "generalized_alpha",
            Method::LocalLinearization => "local_linearization",
            Method::HalfImplicit => "half_implicit",
            Method::Dopri5 => "dopri5",
        }
    }
    pub fn from_name(s: &str) -> Option<Method> {
        Method::ALL.iter().copied().find(|m| m.name() == s)
    }
    /// Whether the method carries a multistep history, which cannot absorb a jump in the state
    /// (a kink in a driven input at a communication point). Every method is restarted from the
    /// projected state after such a jump ([`Integrator::restart`]); a multistep method loses
    /// its history there, a one-step method only re-evaluates what it carried from the last
    /// step. The co-simulation layer's recovery from a kink seen only at the stage times of a
    /// failed step (FMI 3 intermediate update) is for multistep methods only.
    pub fn is_multistep(self) -> bool {
        self == Method::Bdf
    }
}

/// How the iteration matrix is obtained (paper 003). Values of `solver.jacobian`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum JacobianStrategy {
    #[default]
    Dense,
    Sparse,
    DenseExtended,
    SparseExtended,
    Analytic,
    AnalyticExtended,
}

impl JacobianStrategy {
    pub const ALL: [JacobianStrategy; 6] = [
        JacobianStrategy::Dense,
        JacobianStrategy::Sparse,
        JacobianStrategy::DenseExtended,
        JacobianStrategy::SparseExtended,
        JacobianStrategy::Analytic,
        JacobianStrategy::AnalyticExtended,
    ];
    pub fn name(self) -> &'static str {
        match self {
            JacobianStrategy::Dense => "dense",
            JacobianStrategy::Sparse => "sparse",
            JacobianStrategy::DenseExtended => "dense_extended",
            JacobianStrategy::SparseExtended => "sparse_extended",
            JacobianStrategy::Analytic => "analytic",
            JacobianStrategy::AnalyticExtended => "analytic_extended",
        }
    }
    pub fn from_name(s: &str) -> Option<JacobianStrategy> {
        JacobianStrategy::ALL
            .iter()
            .copied()
            .find(|m| m.name() == s)
    }
    /// Whether the extended partitioned update (26) is used between full evaluations.
    pub fn extended(self) -> bool {
        matches!(
            self,
            JacobianStrategy::DenseExtended
                | JacobianStrategy::SparseExtended
                | JacobianStrategy::AnalyticExtended
        )
    }
}

/// Solver settings (the `solver.*` FMU parameters).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub method: Method,
    pub jacobian: JacobianStrategy,
    pub rtol: f64,
    pub atol: f64,
    /// Largest internal step; `0` or infinite means unbounded.
    pub max_step: f64,
    /// First internal step; `0` means chosen by the method.
    pub initial_step: f64,
    /// Fixed step size: only when explicitly asked for (`Some(h)`), otherwise error-controlled.
    pub fixed_step: Option<f64>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            method: Method::Bdf,
            jacobian: JacobianStrategy::DenseExtended,
            rtol: 1e-4,
            atol: 1e-6,
            max_step: 0.0,
            initial_step: 0.0,
            fixed_step: None,
        }
    }
}

/// Smallest relative tolerance accepted anywhere (`solver.rtol`, `[experiment] tolerance`, the
/// importer's tolerance); the largest is exclusive 1. Below 1e-14 the error test asks for more
/// than double precision resolves (steps collapse to the rounding limit); at 1 and above no
/// step is ever rejected for accuracy, so the result is noise.
pub const RTOL_MIN: f64 = 1e-14;

/// Whether `tol` is a usable relative tolerance: `[RTOL_MIN, 1)`.
pub fn rtol_in_range(tol: f64) -> bool {
    (RTOL_MIN..1.0).contains(&tol)
}

/// Solver statistics, counted as in paper 003's tables. Cumulative since initialisation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Accepted steps.
    pub steps: u64,
    /// Rejected steps (error test or convergence failure).
    pub rejected_steps: u64,
    /// Residual / right-hand-side evaluations in total (#fc).
    pub f_evals: u64,
    /// Of those, the ones spent on finite-difference Jacobians (#fc − #fcw).
    pub f_evals_jacobian: u64,
    /// Full Jacobian evaluations (#Je).
    pub jac_evals: u64,
    /// Cheap partitioned / extended partitioned Jacobian updates.
    pub jac_updates: u64,
    /// LU factorizations.
    pub lu: u64,
    /// Newton iterations.
    pub newton_iters: u64,
    /// Newton convergence failures.
    pub convergence_failures: u64,
    /// Error-test failures.
    pub error_test_failures: u64,
    /// Restarts from a projected state (input jumps, parameter changes), counted by the
    /// co-simulation layer.
    pub restarts: u64,
}

impl Stats {
    /// #fcw: function calls without those spent on Jacobians.
    pub fn f_evals_without_jacobian(&self) -> u64 {
        self.f_evals - self.f_evals_jacobian
    }
}

/// Why a step could not be taken. `Recoverable` ones may succeed with a smaller communication
/// step (the co-simulation layer maps them to Discard); `Fatal` ones leave the integrator
/// unusable until re-initialised (Error).
#[derive(Debug, Error, Clone, PartialEq)]
pub enum IntegrateError {
    #[error("step size {h:e} at t = {} fell below the minimum {h_min:e} ({reason})", show_number(*t))]
    StepTooSmall {
        t: f64,
        h: f64,
        h_min: f64,
        reason: String,
    },
    #[error("Newton iteration failed to converge at t = {} after {failures} step reductions", show_number(*t))]
    NewtonFailed { t: f64, failures: u32 },
    #[error("singular matrix at t = {}: {what}", show_number(*t))]
    Singular { t: f64, what: String },
    #[error("non-finite value in {what} at t = {}", show_number(*t))]
    NonFinite { t: f64, what: String },
    #[error("inconsistent initial values at t = {}: {what}", show_number(*t))]
    Inconsistent { t: f64, what: String },
    /// The restart of the method at an event or a switch of a force law, inside a
    /// communication step, failed (its state could not be made consistent): recoverable, a
    /// retry from the step's start with another step may locate the event elsewhere.
    #[error("restart at the event at t = {} failed: {what}", show_number(*t))]
    Restart { t: f64, what: String },
    #[error("invalid setting: {0}")]
    Settings(String),
    #[error("work budget of one communication step exhausted after {steps} internal steps{}: reached t = {} of {} (limits: {step_limit} steps{} per call); use shorter communication steps", if *cpu > 0.0 { format!(" and {cpu:.2} s CPU") } else { String::new() }, show_number(*t), show_number(*t_limit), if cpu_limit.is_finite() { format!(", {} s CPU", show_number(*cpu_limit)) } else { String::new() })]
    WorkBudget {
        t: f64,
        t_limit: f64,
        steps: u64,
        cpu: f64,
        /// The limits of the call that ran out: steps, CPU seconds (infinite: none).
        step_limit: u64,
        cpu_limit: f64,
    },
}

impl IntegrateError {
    /// Whether a retry with a smaller step (or from a restored state) may succeed.
    pub fn is_recoverable(&self) -> bool {
        matches!(
            self,
            IntegrateError::StepTooSmall { .. }
                | IntegrateError::NewtonFailed { .. }
                | IntegrateError::NonFinite { .. }
                | IntegrateError::Singular { .. }
                | IntegrateError::WorkBudget { .. }
                | IntegrateError::Restart { .. }
        )
    }
}

/// The state the co-simulation layer reads and writes: positions, velocities, multipliers.
#[derive(Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct MechState {
    pub t: f64,
    pub q: Vec<f64>,
    pub v: Vec<f64>,
    /// Constraint multipliers (reaction forces), length `n_c`; may be stale by one step.
    pub lambda: Vec<f64>,
}

impl MechState {
    /// Take `x` in place (time, positions, velocities, multipliers) when it has the sizes of
    /// `self`: a one-step method's [`Integrator::restart`] from a projected state. Whether it
    /// did (otherwise `self` is unchanged and the method initializes instead).
    pub fn assign_same_size(&mut self, x: &MechState) -> bool {
        if x.q.len() != self.q.len() || x.v.len() != self.v.len() {
            return false;
        }
        self.t = x.t;
        self.q.copy_from_slice(&x.q);
        self.v.copy_from_slice(&x.v);
        // The multipliers are re-evaluated at the next step's start; keep them if absent.
        if x.lambda.len() == self.lambda.len() {
            self.lambda.copy_from_slice(&x.lambda);
        }
        true
    }
}

impl Clone for MechState {
    fn clone(&self) -> Self {
        MechState {
            t: self.t,
            q: self.q.clone(),
            v: self.v.clone(),
            lambda: self.lambda.clone(),
        }
    }

    /// Into the vectors already there (the co-simulation layer copies the integrator's state
    /// after every communication step).
    fn clone_from(&mut self, source: &Self) {
        self.t = source.t;
        self.q.clone_from(&source.q);
        self.v.clone_from(&source.v);
        self.lambda.clone_from(&source.lambda);
    }
}

/// A time integrator. `S` is passed into every call (never stored).
///
/// Implementations are plain data: `Clone + Serialize + Deserialize` (FMU state save/restore and
/// serialization copy the whole integrator, history and Jacobian cache included, so that
/// repeating steps after a restore reproduces results bit for bit).
pub trait Integrator<S: MultibodySystem + ?Sized> {
    /// Start from a consistent state `x` (positions and velocities satisfy the constraints).
    /// Discards any history.
    fn initialize(&mut self, sys: &mut S, x: &MechState) -> Result<(), IntegrateError>;
    /// Take one accepted step, ending at or before `t_limit`; if the step ends exactly at
    /// `t_limit` the returned time equals `t_limit` bit for bit. Returns the new time.
    fn step(&mut self, sys: &mut S, t_limit: f64) -> Result<f64, IntegrateError>;
    /// The current (last accepted) state.
    fn state(&self) -> &MechState;
    /// The step size the method would try next.
    fn next_step_size(&self) -> f64;
    /// Statistics so far.
    fn stats(&self) -> &Stats;
    /// The method.
    fn method(&self) -> Method;
    /// Settings may change between steps (tolerances from the importer).
    fn set_settings(&mut self, settings: Settings);
    /// The right-hand side changed at the current point while the state did not: new input
    /// segments at a communication point (the driven accelerations `u''` jump between C¹
    /// segments, a held force's value jumps). A method that carries derivatives from the end
    /// of the last step into the next (`f(t_n, y_n)`, a first stage, the accelerations `q̈_n`)
    /// evaluates them again before its next step: with the old ones a held force acts late
    /// (the trapezoidal rule moved 0.50× of a force jump's first-step response). Methods that
    /// evaluate everything at the start of each step need nothing (the default).
    fn rhs_changed(&mut self) {}
    /// New input segments at the current point, the state unchanged (a communication point
    /// without a jump): the right-hand side's time derivatives may jump there by `kink` (the
    /// smooth reconstruction joins its segments with a jump in `ü`). A multistep method whose
    /// history spans that kink re-anchors it to the new right-hand side when the kink matters
    /// at its tolerance; one-step methods need nothing beyond [`Integrator::rhs_changed`]
    /// (the default).
    fn inputs_changed(&mut self, _sys: &mut S, _kink: InputKink) -> Result<(), IntegrateError> {
        Ok(())
    }
    /// Start again from `x` after a jump in the state (an input that moved a driven position
    /// or velocity, projected by the co-simulation layer): the history is gone, but what does
    /// not depend on it may be kept (a multistep method keeps its Jacobian, iteration matrix
    /// and step size; a one-step method takes `x`, keeps its step size, step-size controller
    /// and Jacobians, and re-evaluates the derivatives it carried, as after
    /// [`Integrator::rhs_changed`]). Returns whether the statistics were kept (`true`) or start
    /// over like after [`Integrator::initialize`] (the default, which is `initialize`).
    fn restart(&mut self, sys: &mut S, x: &MechState) -> Result<bool, IntegrateError> {
        self.initialize(sys, x).map(|()| false)
    }
    /// `x`, a state this method produced (its [`Integrator::state`]), made consistent for a
    /// fresh start from it with [`Integrator::initialize`] (an event located, a force law
    /// switched, a parameter changed). As it is by default: the methods project their states
    /// onto the constraints every step. A method whose accepted states satisfy the constraints
    /// only to its corrector's tolerance (the BDF) projects it onto them, so that the start's
    /// consistency check holds.
    fn restart_state(&self, _sys: &mut S, x: &MechState) -> MechState {
        x.clone()
    }
}
