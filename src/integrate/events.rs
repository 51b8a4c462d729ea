//! Event functions and event location, generic over every integrator.
//!
//! A penalty contact force switches on when the bodies start to penetrate and off when they
//! separate: the right-hand side has a kink there. A step that straddles the kink has an error
//! the method's error estimate does not see correctly, and (paper 002, section 3) methods that
//! rely on a local model of the right-hand side (the local linearization, Rosenbrock, W)
//! linearize on the wrong side of it. So after every accepted step the [`EventLocator`] looks for
//! a sign change of the system's event functions `g_i(t, q)` (negative = in contact) and, when
//! one changed, takes the step again from a backup of the integrator so that it ends on the
//! contact instant:
//!
//! 0. Detection: the contact state (`g < 0`) at both ends of the step and at ¼, ½, ¾ of the
//!    cubic Hermite interpolant of the positions through `(q_n, v_n)` and `(q_{n+1}, v_{n+1})`
//!    (so a contact that closes and opens again inside one step is seen too, as long as the
//!    interpolant dips; a sign-change locator cannot promise more).
//! 1. First guess: the earliest root of a switched `g_i` along that interpolant (no extra
//!    right-hand sides; error `O(h⁴)`).
//! 2. Refinement: the Illinois variant of regula falsi on `G(τ)`, the event function at the end
//!    of one step of the method from `t_n` with limit `τ`; each evaluation restores the backup
//!    and steps again. The step that ends just past the switch with `|G(τ)| ≤ gap_tol` is kept,
//!    so the accepted step ends on the contact surface of the numerical solution itself (for
//!    the local linearization this is paper 002's `Ψ(ŷ(t*)) = 0` with `ŷ` from its formula
//!    (18)) and the next step starts in the new contact state.
//! 3. Restart of the method at the event ([`EventLocator::restart_after_event`], default on):
//!    its step-size history belongs to the old contact state. The restart starts from the
//!    method's state ([`Integrator::restart_state`]: the BDF projects it onto the
//!    constraints first, its corrector satisfies them only to its tolerance); should that
//!    state fail the consistency check all the same, the step fails recoverably
//!    ([`IntegrateError::Restart`]: Discard, not Error).
//!
//! With several switches in one step the earliest root wins. Friction is not an event (its
//! regularized law is smooth).
//!
//! The backup is the integrator serialized (postcard) into a buffer that is kept between steps,
//! so the common case (no event) does not allocate; restoring deserializes (allocates), which
//! happens only at events. The work of the steps thrown away is counted in
//! [`EventStats::discarded`], because restoring the backup also restores the integrator's own
//! statistics. The system's discrete states that `accept_step` changes (friction stick states)
//! are rolled back with the integrator (`StepHooks::checkpoint`/`rollback`); the joint normal
//! forces are not: a redone step sees those committed by the thrown-away step (they lag one
//! step by design anyway).
//!
//! The same backup serves a system that finds, after an accepted step, that the step could not
//! resolve what an evaluation inside it saw (`StepHooks::take_redo`: the co-simulation's FMI 3
//! intermediate-update answers that jumped inside a Rosenbrock–Nyström or Dormand–Prince
//! step): the step is taken again, shorter, from the backup. Only a system that says it may
//! ask (`StepHooks::may_redo`) is backed up for that before every step.

use super::clock::CallClock;
use super::system::{Mechanical, MultibodySystem};
use super::{IntegrateError, Integrator, Stats};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Event (switching) functions of a system: `g_i(t, q)`, positive when the contact is open,
/// negative when it is closed (the penalty force acts). Systems without contacts keep the
/// defaults (no events).
pub trait EventFunctions: Mechanical {
    /// Number of event functions.
    fn n_events(&self) -> usize {
        0
    }
    /// `g_i(t, q)` for every event, into `g` (length [`EventFunctions::n_events`]).
    fn event_functions(&mut self, _t: f64, _q: &[f64], _g: &mut [f64]) {}
}

/// A located event: the step ended on the instant where `g_index` changes sign.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub t: f64,
    /// Which event function (the engine numbers contacts in model order).
    pub index: usize,
    /// The contact closes (`g` goes negative) rather than opens.
    pub begins: bool,
}

/// What one call to [`EventLocator::step`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepOutcome {
    /// An ordinary accepted step to this time.
    Step(f64),
    /// The accepted step ends on an event.
    Event(Event),
}

impl StepOutcome {
    /// The time the accepted step ended at.
    pub fn time(&self) -> f64 {
        match self {
            StepOutcome::Step(t) => *t,
            StepOutcome::Event(e) => e.t,
        }
    }
}

/// Counters of the event location, cumulative.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct EventStats {
    /// Located events.
    pub events: u64,
    /// Steps taken again from the backup (each one a root-finding evaluation, or a step
    /// across an input's jump taken shorter, `StepHooks::take_redo`).
    pub redo_steps: u64,
    /// Of those, the steps taken again across an input's jump (`StepHooks::take_redo`).
    pub input_redos: u64,
    /// Work not in the integrator's own statistics: steps thrown away (the restore rolls them
    /// back) and, for methods whose `initialize` clears their counters, the work before a
    /// restart. Add it to the integrator's statistics for the total work.
    pub discarded: Stats,
    /// Restarts of the integrator at located events.
    pub restarts: u64,
}

/// Most root-finding evaluations (re-steps) per event. Illinois needs 2 to 5 from the Hermite
/// guess; the cap only bounds pathological cases (an integrator whose end point is not a
/// continuous function of the step limit), which then end on the bracket's far side.
const MAX_REDO: usize = 40;

/// Locates sign changes of [`EventFunctions`] between accepted steps and makes the step end on
/// the earliest one. Plain data (FMU state copies it); the buffers are rebuilt on demand.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventLocator {
    /// `g` at the start of the next step (time `t_g`).
    g: Vec<f64>,
    t_g: f64,
    have_g: bool,
    /// The event the previous accepted step was located on (it ended within `gap_tol` of that
    /// contact's surface, on the new side). Only then is a switch of the same contact right at
    /// the start of the next step a repeat of the located one; a step that merely ended close
    /// to a surface without crossing it has located nothing.
    located_last: Option<usize>,
    /// A located step is kept when `|g| ≤ gap_tol` at its end (length units of the model).
    pub gap_tol: f64,
    /// Restart the method at every located event (default): its step-size history (and a
    /// multistep method's difference table) belongs to the old contact state. Without the
    /// restart, steps proposed from the smooth flight phase can jump over a whole contact,
    /// which methods whose error estimate does not see the contact force then accept.
    pub restart_after_event: bool,
    pub stats: EventStats,
    /// Most accepted internal steps per communication step (the work budget of one call; see
    /// [`MAX_STEPS_PER_CALL`]).
    #[serde(skip, default = "default_budget")]
    pub max_steps_per_call: u64,
    /// Most CPU seconds per communication step ([`MAX_CPU_SECONDS_PER_CALL`]).
    #[serde(skip, default = "default_cpu_budget")]
    pub max_cpu_per_call: f64,
    #[serde(skip)]
    call: CallBudget,
    #[serde(skip)]
    ws: Workspace,
}

/// The work budget of one communication step: at most this many accepted internal steps
/// between two communication points, and at most [`MAX_CPU_SECONDS_PER_CALL`] of the thread's
/// CPU time. A method that needs more is either stuck (step sizes collapsing towards the
/// rounding limit) or asked for a horizon far beyond what one call should do (the importer's
/// thread blocked for minutes); the step then ends with the recoverable
/// [`IntegrateError::WorkBudget`] (FMI Discard at the last accepted time), and shorter
/// communication steps continue from there. The gallery models need a few hundred internal
/// steps per simulated second.
pub const MAX_STEPS_PER_CALL: u64 = 5_000;

/// CPU seconds one communication step may take (see [`MAX_STEPS_PER_CALL`]).
pub const MAX_CPU_SECONDS_PER_CALL: f64 = 0.5;

fn default_budget() -> u64 {
    MAX_STEPS_PER_CALL
}

fn default_cpu_budget() -> f64 {
    MAX_CPU_SECONDS_PER_CALL
}

/// Steps taken towards the current communication point (reset when the limit changes).
#[derive(Debug, Clone, Default)]
struct CallBudget {
    t_limit: Option<f64>,
    steps: u64,
    /// The call's clock, from its start (`begin_call`) or its first step.
    clock: Option<CallClock>,
    /// Begun by the caller (`begin_call`): a new limit inside the call (a motion's
    /// breakpoint) resets the step count but keeps the clock.
    begun: bool,
    /// Why the last step failed (for the importer's log and the advice that goes with it).
    last_error: Option<IntegrateError>,
    /// Steps of this call take over 1 ms each: the clock is read after every step.
    slow: bool,
}

#[derive(Debug, Clone, Default)]
struct Workspace {
    g_new: Vec<f64>,
    g_a: Vec<f64>,
    g_b: Vec<f64>,
    g_h: Vec<f64>,
    q0: Vec<f64>,
    v0: Vec<f64>,
    q1: Vec<f64>,
    v1: Vec<f64>,
    qi: Vec<f64>,
    backup: Vec<u8>,
    backup_len: usize,
}

/// Whether the contact state (closed: `g < 0`) differs.
fn switched(before: f64, after: f64) -> bool {
    (before < 0.0) != (after < 0.0)
}

pub(crate) fn add_work(acc: &mut Stats, now: &Stats, before: &Stats) {
    let d = |a: u64, b: u64| a.saturating_sub(b);
    acc.steps += d(now.steps, before.steps);
    acc.rejected_steps += d(now.rejected_steps, before.rejected_steps);
    acc.f_evals += d(now.f_evals, before.f_evals);
    acc.f_evals_jacobian += d(now.f_evals_jacobian, before.f_evals_jacobian);
    acc.jac_evals += d(now.jac_evals, before.jac_evals);
    acc.jac_updates += d(now.jac_updates, before.jac_updates);
    acc.lu += d(now.lu, before.lu);
    acc.newton_iters += d(now.newton_iters, before.newton_iters);
    acc.convergence_failures += d(now.convergence_failures, before.convergence_failures);
    acc.error_test_failures += d(now.error_test_failures, before.error_test_failures);
}

/// Add `b`'s counters to `a` (the integrator's statistics plus [`EventStats::discarded`]).
pub fn add_stats(a: &mut Stats, b: &Stats) {
    add_work(a, b, &Stats::default());
}

impl Default for EventLocator {
    fn default() -> Self {
        EventLocator::new(1e-10)
    }
}

impl EventLocator {
    /// A locator that keeps a located step when the event function at its end is within
    /// `gap_tol` of zero.
    pub fn new(gap_tol: f64) -> EventLocator {
        EventLocator {
            g: Vec::new(),
            t_g: f64::NAN,
            have_g: false,
            located_last: None,
            gap_tol: gap_tol.abs().max(1e-15),
            restart_after_event: true,
            stats: EventStats::default(),
            max_steps_per_call: MAX_STEPS_PER_CALL,
            max_cpu_per_call: MAX_CPU_SECONDS_PER_CALL,
            call: CallBudget::default(),
            ws: Workspace::default(),
        }
    }

    /// Forget the event functions' values (after the integrator was re-initialized or the state
    /// was changed from outside); they are evaluated again at the next step.
    pub fn reset(&mut self) {
        self.have_g = false;
        self.located_last = None;
    }

    fn size(&mut self, n: usize, nq: usize) {
        let ws = &mut self.ws;
        for v in [&mut ws.g_new, &mut ws.g_a, &mut ws.g_b, &mut ws.g_h] {
            v.resize(n, 0.0);
        }
        for v in [&mut ws.q0, &mut ws.v0, &mut ws.q1, &mut ws.v1, &mut ws.qi] {
            v.resize(nq, 0.0);
        }
        if self.g.len() != n {
            self.g.resize(n, 0.0);
            self.have_g = false;
            self.located_last = None;
        }
    }

    fn save<I: Serialize>(&mut self, integ: &I) -> Result<(), IntegrateError> {
        let ws = &mut self.ws;
        loop {
            match postcard::to_slice(integ, &mut ws.backup) {
                Ok(used) => {
                    ws.backup_len = used.len();
                    return Ok(());
                }
                Err(postcard::Error::SerializeBufferFull) => {
                    // Grows only while the integrator's serialized size grows (start-up).
                    let n = (2 * ws.backup.len()).max(4096);
                    ws.backup.resize(n, 0);
                }
                Err(e) => {
                    return Err(IntegrateError::Settings(format!(
                        "event location: cannot back up the integrator: {e}"
                    )))
                }
            }
        }
    }

    fn restore<I: DeserializeOwned>(&self, integ: &mut I) -> Result<(), IntegrateError> {
        *integ = postcard::from_bytes(&self.ws.backup[..self.ws.backup_len]).map_err(|e| {
            IntegrateError::Settings(format!(
                "event location: cannot restore the integrator backup: {e}"
            ))
        })?;
        Ok(())
    }

    /// The event functions at `t0 + s h` on the cubic Hermite interpolant of the positions
    /// through `(q_n, v_n)` and `(q_{n+1}, v_{n+1})`, into `ws.g_h`.
    fn hermite_g<S: EventFunctions + ?Sized>(&mut self, sys: &mut S, t0: f64, h: f64, s: f64) {
        let ws = &mut self.ws;
        let (h00, h10) = (
            (1.0 + 2.0 * s) * (1.0 - s) * (1.0 - s),
            s * (1.0 - s) * (1.0 - s),
        );
        let (h01, h11) = (s * s * (3.0 - 2.0 * s), s * s * (s - 1.0));
        for i in 0..ws.qi.len() {
            ws.qi[i] = h00 * ws.q0[i] + h10 * h * ws.v0[i] + h01 * ws.q1[i] + h11 * h * ws.v1[i];
        }
        sys.event_functions(t0 + s * h, &ws.qi, &mut ws.g_h);
    }

    /// Root of `g_k` along the Hermite interpolant on `[t0, t0 + s_hi h]`, where `g_k` has
    /// switched at `s_hi` (value `f_hi`).
    fn hermite_root<S: EventFunctions + ?Sized>(
        &mut self,
        sys: &mut S,
        k: usize,
        t0: f64,
        h: f64,
        s_hi: f64,
        f_hi: f64,
    ) -> f64 {
        let (mut a, mut b) = (0.0f64, s_hi);
        let (mut fa, mut fb) = (self.g[k], f_hi);
        let mut side = 0i8;
        let mut s = 0.5 * s_hi;
        for _ in 0..60 {
            s = if fb != fa {
                (a * fb - b * fa) / (fb - fa)
            } else {
                0.5 * (a + b)
            };
            if !(s > a && s < b) {
                s = 0.5 * (a + b);
            }
            self.hermite_g(sys, t0, h, s);
            let f = self.ws.g_h[k];
            if f.abs() <= 1e-3 * self.gap_tol || (b - a) <= 1e-14 {
                break;
            }
            if switched(self.g[k], f) {
                b = s;
                fb = f;
                if side == 1 {
                    fa *= 0.5;
                }
                side = 1;
            } else {
                a = s;
                fa = f;
                if side == -1 {
                    fb *= 0.5;
                }
                side = -1;
            }
        }
        t0 + s * h
    }

    /// One accepted step of `integ` towards `t_limit`; when an event function changes sign in
    /// it, the step is redone to end on the earliest such instant. Systems without events
    /// (`n_events() == 0`) cost nothing beyond the plain step.
    pub fn step<S, I>(
        &mut self,
        integ: &mut I,
        sys: &mut S,
        t_limit: f64,
    ) -> Result<StepOutcome, IntegrateError>
    where
        S: MultibodySystem + EventFunctions + ?Sized,
        I: Integrator<S> + Serialize + DeserializeOwned,
    {
        let r = self.budgeted_step(integ, sys, t_limit);
        if let Err(e) = &r {
            self.call.last_error = Some(e.clone());
        }
        r
    }

    /// Why the last step failed, when it did during the current communication step.
    pub fn last_error(&self) -> Option<&IntegrateError> {
        self.call.last_error.as_ref()
    }

    /// Start the work budget of a call to `t_limit` on the caller's clock.
    pub fn begin_call(&mut self, t_limit: f64, clock: CallClock) {
        self.call = CallBudget {
            t_limit: Some(t_limit),
            clock: Some(clock),
            begun: true,
            ..Default::default()
        };
    }

    /// Seconds since the current call began, on its clock (0 before any call).
    pub fn call_elapsed(&mut self) -> f64 {
        self.call.clock.as_mut().map_or(0.0, CallClock::elapsed)
    }

    fn budgeted_step<S, I>(
        &mut self,
        integ: &mut I,
        sys: &mut S,
        t_limit: f64,
    ) -> Result<StepOutcome, IntegrateError>
    where
        S: MultibodySystem + EventFunctions + ?Sized,
        I: Integrator<S> + Serialize + DeserializeOwned,
    {
        let timed = self.max_cpu_per_call.is_finite();
        if self.call.t_limit != Some(t_limit) {
            let begun = self.call.begun;
            let clock = match self.call.clock {
                Some(c) if begun => c,
                _ => CallClock::start(),
            };
            self.call = CallBudget {
                t_limit: Some(t_limit),
                clock: Some(clock),
                begun,
                ..Default::default()
            };
        }
        // The clock (past `CPU_AFTER` a system call) every 8 steps, and after the first step
        // and every step once they are slow (a large model's steps take a good part of the
        // budget each): a call ends at most one step past its budget.
        let steps = self.call.steps;
        let cpu = match &mut self.call.clock {
            Some(c) if timed && (steps % 8 == 7 || steps == 1 || self.call.slow) => c.elapsed(),
            _ => 0.0,
        };
        if cpu > 1e-3 * steps as f64 {
            self.call.slow = true;
        }
        if self.call.steps >= self.max_steps_per_call || cpu > self.max_cpu_per_call {
            // The next call starts with a fresh budget (progress in every call).
            self.call.t_limit = None;
            return Err(IntegrateError::WorkBudget {
                t: integ.state().t,
                t_limit,
                steps: self.call.steps,
                cpu,
                step_limit: self.max_steps_per_call,
                cpu_limit: self.max_cpu_per_call,
            });
        }
        self.call.steps += 1;
        let out = self.locate(integ, sys, t_limit)?;
        let switched_law = sys.take_law_switch();
        if switched_law
            || matches!(
                (out, self.restart_after_event),
                (StepOutcome::Event(_), true)
            )
        {
            let before = *integ.stats();
            // Inside a communication step: a restart whose state cannot be made consistent
            // is a failure of this step (Discard: a retry from the step's start may locate the
            // event elsewhere), not of the instance (Error). The method is then put back as it
            // was at the event (a failed initialization leaves it half reset), so the
            // instance stays usable there. The backup of the step is no longer needed.
            self.save(integ)?;
            let x = integ.restart_state(sys, integ.state());
            if let Err(e) = integ.initialize(sys, &x) {
                self.restore(integ)?;
                return Err(match e {
                    IntegrateError::Inconsistent { t, what } => IntegrateError::Restart { t, what },
                    e => e,
                });
            }
            let after = integ.stats();
            if after.steps < before.steps || after.f_evals < before.f_evals {
                add_stats(&mut self.stats.discarded, &before);
            }
            self.stats.restarts += 1;
        }
        Ok(out)
    }

    fn locate<S, I>(
        &mut self,
        integ: &mut I,
        sys: &mut S,
        t_limit: f64,
    ) -> Result<StepOutcome, IntegrateError>
    where
        S: MultibodySystem + EventFunctions + ?Sized,
        I: Integrator<S> + Serialize + DeserializeOwned,
    {
        let n = sys.n_events();
        if n == 0 && !sys.may_redo() {
            return integ.step(sys, t_limit).map(StepOutcome::Step);
        }
        if n == 0 {
            self.save(integ)?;
            sys.checkpoint();
            return self.vetted_step(integ, sys, t_limit).map(StepOutcome::Step);
        }
        let nq = integ.state().q.len();
        self.size(n, nq);
        let t0 = integ.state().t;
        {
            let x = integ.state();
            if !self.have_g || self.t_g != t0 {
                sys.event_functions(t0, &x.q, &mut self.g);
                self.t_g = t0;
                self.have_g = true;
            }
            self.ws.q0.copy_from_slice(&x.q);
            self.ws.v0.copy_from_slice(&x.v);
        }
        self.save(integ)?;
        sys.checkpoint();
        let stats0 = *integ.stats();
        let t1 = self.vetted_step(integ, sys, t_limit)?;
        {
            let x = integ.state();
            sys.event_functions(t1, &x.q, &mut self.ws.g_new);
            self.ws.q1.copy_from_slice(&x.q);
            self.ws.v1.copy_from_slice(&x.v);
        }
        // A switch at the end of the step, or one inside it seen on the interpolant (a contact
        // that closed and opened again within the step: the end values alone miss it).
        let h = t1 - t0;
        let mut s_b = 1.0;
        let mut found = (0..n).any(|i| switched(self.g[i], self.ws.g_new[i]));
        if found {
            self.ws.g_b.copy_from_slice(&self.ws.g_new);
        } else {
            for s in [0.25, 0.5, 0.75] {
                self.hermite_g(sys, t0, h, s);
                if (0..n).any(|i| switched(self.g[i], self.ws.g_h[i])) {
                    s_b = s;
                    self.ws.g_b.copy_from_slice(&self.ws.g_h);
                    found = true;
                    break;
                }
            }
        }
        if !found {
            return Ok(self.plain_step(t1));
        }

        // Bracket [a, b] of end times of one step from t0: no switch at a, a switch at b (for
        // a switch seen only inside the step, b and its values are the interpolant's until a
        // re-step confirms them).
        let (mut a, mut b) = (t0, t0 + s_b * h);
        self.ws.g_a.copy_from_slice(&self.g);
        // First guess: the earliest Hermite root among the switched events.
        let mut k = usize::MAX;
        let mut tau = b;
        for i in 0..n {
            if switched(self.g[i], self.ws.g_b[i]) {
                let r = self.hermite_root(sys, i, t0, h, s_b, self.ws.g_b[i]);
                if k == usize::MAX || r < tau {
                    k = i;
                    tau = r;
                }
            }
        }
        let (mut fa, mut fb) = (self.ws.g_a[k], self.ws.g_b[k]);
        let mut side = 0i8;
        if self.located_last == Some(k) && self.g[k].abs() <= self.gap_tol && s_b == 1.0 {
            // The contact switched back right at the start of the step, where the previous step
            // was located on its surface (rounding-level chatter): nothing new to locate.
            return Ok(self.plain_step(t1));
        }
        let t_tol = 4.0 * f64::EPSILON * t1.abs().max(1.0);
        // Shortest step from t0 worth trying (the methods refuse steps below ~16 eps t).
        let h_least = 64.0 * f64::EPSILON * t0.abs().max(1.0);
        let mut at_b = s_b == 1.0;
        for _ in 0..MAX_REDO {
            let lo = (a + 0.5 * t_tol).max(t0 + h_least);
            if lo >= b {
                break;
            }
            tau = if tau.is_finite() {
                tau.clamp(lo, b)
            } else {
                0.5 * (a + b)
            };
            add_work(&mut self.stats.discarded, integ.stats(), &stats0);
            self.restore(integ)?;
            sys.rollback();
            self.stats.redo_steps += 1;
            let Ok(t) = self.vetted_step(integ, sys, tau) else {
                // The method failed on this trial step: fall back to the bracket's far side.
                at_b = false;
                break;
            };
            sys.event_functions(t, &integ.state().q, &mut self.ws.g_new);
            let ws = &mut self.ws;
            let crossed = (0..n).any(|i| switched(self.g[i], ws.g_new[i]));
            if !crossed && t < tau {
                // The method could not take a step as long as asked: an ordinary step that
                // stays before every event; the next call continues the search from there.
                return Ok(self.plain_step(t));
            }
            if crossed {
                b = t;
                ws.g_b.copy_from_slice(&ws.g_new);
                at_b = true;
                // The earliest switched event by linear interpolation in [a, b] becomes the
                // target (it can change when another contact switched first).
                let mut best = f64::INFINITY;
                let mut kk = k;
                for i in 0..n {
                    if switched(ws.g_a[i], ws.g_b[i]) {
                        let (ga, gb) = (ws.g_a[i], ws.g_b[i]);
                        let r = a + (b - a) * ga / (ga - gb);
                        if r < best {
                            best = r;
                            kk = i;
                        }
                    }
                }
                if kk != k {
                    k = kk;
                    fa = ws.g_a[k];
                } else if side == 1 {
                    fa *= 0.5;
                }
                fb = ws.g_b[k];
                side = 1;
            } else {
                a = t;
                ws.g_a.copy_from_slice(&ws.g_new);
                at_b = false;
                fa = ws.g_a[k];
                if side == -1 {
                    fb *= 0.5;
                }
                side = -1;
            }
            // Kept when the step ends just past the switch (the next step starts in the new
            // contact state, with its Jacobian) and every switched contact is within gap_tol of
            // its surface.
            let close = |i: usize| ws.g_new[i].abs() <= self.gap_tol;
            let all_switched_close = (0..n)
                .filter(|&i| switched(self.g[i], ws.g_new[i]))
                .all(close);
            if crossed && all_switched_close {
                return Ok(self.finish(k, t));
            }
            if b - a <= t_tol {
                break;
            }
            let r = if fb != fa {
                (a * fb - b * fa) / (fb - fa)
            } else {
                0.5 * (a + b)
            };
            tau = if !crossed && close(k) {
                // Just before the surface: step over it by as much again.
                r + (r - a).max(t_tol)
            } else {
                r
            };
        }
        // Not converged within the cap, or the bracket shrank to rounding: end on the far side
        // of the bracket, where the switch has happened (honest signs, no forcing needed).
        if !at_b {
            add_work(&mut self.stats.discarded, integ.stats(), &stats0);
            self.restore(integ)?;
            sys.rollback();
            self.stats.redo_steps += 1;
            let t = self.vetted_step(integ, sys, b)?;
            sys.event_functions(t, &integ.state().q, &mut self.ws.g_new);
            if !(0..n).any(|i| switched(self.g[i], self.ws.g_new[i])) {
                // The interpolant's switch was not confirmed by the method: ordinary step.
                return Ok(self.plain_step(t));
            }
            b = t;
            if !switched(self.g[k], self.ws.g_new[k]) {
                k = (0..n)
                    .find(|&i| switched(self.g[i], self.ws.g_new[i]))
                    .unwrap_or(k);
            }
        }
        Ok(self.finish(k, b))
    }

    /// `integ.step` to `t_limit`, taken again from the backup made at its start, to the time
    /// the system names, as long as it finds that an evaluation inside the accepted step saw
    /// what the step could not resolve (`StepHooks::take_redo`; a system that never names
    /// one costs nothing more than the step).
    fn vetted_step<S, I>(
        &mut self,
        integ: &mut I,
        sys: &mut S,
        t_limit: f64,
    ) -> Result<f64, IntegrateError>
    where
        S: MultibodySystem + EventFunctions + ?Sized,
        I: Integrator<S> + Serialize + DeserializeOwned,
    {
        let t0 = integ.state().t;
        let stats0 = *integ.stats();
        let mut limit = t_limit;
        for _ in 0..MAX_REDO {
            let t1 = integ.step(sys, limit)?;
            match sys.take_redo(t0, t1) {
                Some(t_redo) if t_redo > t0 && t_redo < t1 => {
                    add_work(&mut self.stats.discarded, integ.stats(), &stats0);
                    self.restore(integ)?;
                    sys.rollback();
                    self.stats.redo_steps += 1;
                    self.stats.input_redos += 1;
                    limit = t_redo;
                }
                _ => return Ok(t1),
            }
        }
        // Not settled within the cap (a pathological system): the last step stands.
        integ.step(sys, limit)
    }

    /// The accepted step ends at `t` before or without any event (values at `t` in `ws.g_new`).
    fn plain_step(&mut self, t: f64) -> StepOutcome {
        self.g.copy_from_slice(&self.ws.g_new);
        self.t_g = t;
        self.located_last = None;
        StepOutcome::Step(t)
    }

    /// The accepted step ends at `t` on event `k` (values at `t` in `ws.g_new`).
    fn finish(&mut self, k: usize, t: f64) -> StepOutcome {
        let begins = self.g[k] >= 0.0;
        self.g.copy_from_slice(&self.ws.g_new);
        self.t_g = t;
        self.located_last = Some(k);
        self.stats.events += 1;
        StepOutcome::Event(Event {
            t,
            index: k,
            begins,
        })
    }
}
