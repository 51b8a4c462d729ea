//! Variable-order (1–5), variable-step BDF on the stabilized index-2 (GGL) equations of motion,
//! paper 003 eqs. (7)–(10), in the explicit-formalism residual form (see [`super::ggl`]).
//!
//! Form: **fixed leading coefficient** in the quasi-constant step-size representation
//! (Shampine & Reichelt's `ode15s` / scipy's `BDF` with κ = 0): the history is the array of
//! backward differences `D_j = ∇^j y_n` on an equidistant grid of spacing `h`; a step-size change
//! re-interpolates `D` onto the new grid. The corrector equation of order `k` is
//!
//! ```text
//!   F(y, α (y − y_pred + ψ)) = 0,   α = γ_k / h,   γ_k = Σ_{j≤k} 1/j,
//!   y_pred = Σ_{j=0..k} D_j,   ψ = (1/γ_k) Σ_{j=1..k} γ_j D_j,
//! ```
//!
//! i.e. paper 003's (13) with `β = α (ψ − y_pred)`; `α` depends only on `h` and `k`, so the
//! iteration matrix stays valid while neither changes. The corrector is simplified Newton with
//! DASSL's scaled update (18), `c = 2 / (1 + α/α_J)`, `α_J` the coefficient the matrix was formed
//! with. Local error `e = (y − y_pred)/(k+1)` on `q`, `v` only (`λ`, `η` excluded: they are
//! index-2 variables whose BDF error does not behave like `h^(k+1)`); step and order selection as
//! in scipy's BDF (order k−1, k, k+1 compared after k+1 steps of equal size). The Newton
//! increment norm weighs `λ`, `η` by `h` (as RADAU5 does for index-2 components).
//!
//! Step and order changes decided after an accepted step are applied lazily at the start of the
//! next step, so that [`Bdf::interpolate`] between steps uses exactly the interpolation polynomial
//! of the last step.

#![allow(clippy::needless_range_loop)] // index-heavy numerical kernels

use super::clock::thread_cpu_time;
use super::dense::{projection_tol, Constrained};
use super::ggl::Ggl;
use super::jacobian::{FailureAction, JacobianStore, ReevalPolicy, Refresh};
use super::reanchor::{reanchor_differences, InputKink, ReanchorWork};
use super::step_control::{initial_step_size, weighted_rms_norm};
use super::{IntegrateError, Integrator, MechState, Method, MultibodySystem, Settings, Stats};
use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

pub const MAX_ORDER: usize = 5;
const NEWTON_MAXIT: usize = 4;
/// Acceptance after a single corrector iteration: the contraction rate is not measured in
/// this step, so the remaining error of the first update is bounded with the slowest rate the
/// policy keeps a matrix for (`ReevalPolicy::slow_rate`, 0.5: `ρ/(1−ρ) = 1`) and must be below
/// this fraction of the corrector tolerance. The iteration error of a step that stops after one
/// update is systematic (the same old matrix, the same predictor bias, step after step): it
/// accumulates like a truncation error that the error test never sees. With the former
/// acceptance (carried-over rate floored at 0.2, full tolerance: first updates up to 0.4 of the
/// error weight) it dominated at tight tolerances, where the communication grid holds the
/// step below what the error test allows: the stiff double pendulum in joint coordinates at
/// rtol 1e-8 ended 1.0e-7 (dense) and 7.1e-8 (dense_extended) off the Radau reference instead
/// of the converged corrector's 5.1e-8 (docs/integrators.md, "Corrector convergence").
const FIRST_ITERATION_TOL: f64 = 0.1;
/// Corrector convergence: estimated remaining error `rate/(1−rate)·‖Δ‖` below this, in the
/// error-test norm (scipy uses 0.01–0.03, DASSL 0.33; 0.1 measured as the robust middle on the
/// pendulum chain: 0.33 lost the sparse run, 0.01 doubled the Jacobian evaluations).
const NEWTON_TOL: f64 = 0.1;
/// Contraction rate above which the corrector is declared divergent.
const MAX_RATE: f64 = 0.9;
const MIN_FACTOR: f64 = 0.2;
const MAX_FACTOR: f64 = 10.0;
/// Step reductions within one call of `step` before giving up.
const MAX_REJECTIONS: u32 = 30;

/// A few ulps of `t`: differences of times near `t` below this are rounding, not steps.
fn time_resolution(t: f64) -> f64 {
    4.0 * f64::EPSILON * t.abs()
}

/// `γ_k = Σ_{j=1..k} 1/j`.
fn gamma(k: usize) -> f64 {
    (1..=k).map(|j| 1.0 / j as f64).sum()
}

/// The BDF integrator. Plain data: clone or serialize it to save the whole solver state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Bdf {
    settings: Settings,
    /// Largest order used (1–5).
    pub max_order: usize,
    /// Use exactly this order, no order selection (with `Settings::fixed_step`, for order tests).
    pub fixed_order: Option<usize>,
    initialized: bool,
    nq: usize,
    nc: usize,
    ny: usize,
    ggl: Ggl,
    jac: JacobianStore,
    state: MechState,
    /// Backward differences, column `j` = `∇^j y_n` on the grid of spacing `h`.
    d: DMatrix<f64>,
    d_new: DMatrix<f64>,
    order: usize,
    h: f64,
    h_next: f64,
    order_next: usize,
    n_equal_steps: usize,
    rate_prev: Option<f64>,
    stats: Stats,
    y: Vec<f64>,
    y_pred: Vec<f64>,
    psi: Vec<f64>,
    corr: Vec<f64>,
    g0: Vec<f64>,
    res: Vec<f64>,
    w: Vec<f64>,
    err: Vec<f64>,
    err2: Vec<f64>,
    /// Where the CPU time goes (off unless [`Bdf::enable_profile`]).
    #[serde(default)]
    profile: Profile,
    /// Workspace of the re-anchoring at communication points (not state).
    #[serde(skip)]
    reanchor: ReanchorWork,
}

/// Thread CPU time spent in the parts of the BDF, seconds (see [`Bdf::enable_profile`]).
/// `jacobian` is the full and partitioned Jacobian work without the LU, `lu` the
/// factorizations, `solve` the back-substitutions, `residual` the residual evaluations of the
/// predictor and the corrector; the rest of `total` is the integrator's own vector work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub enabled: bool,
    pub total: f64,
    pub residual: f64,
    pub jacobian: f64,
    pub lu: f64,
    pub solve: f64,
    /// Full evaluations by cause: initial, `α` change, slow convergence, corrector failure,
    /// error-test failures, the cap on updates in a row (counted whether or not profiling).
    pub full_by_reason: [u64; 6],
}

/// Adds the CPU time of a section to a profile counter when profiling is on.
#[inline]
fn clock(on: bool) -> f64 {
    if on {
        thread_cpu_time()
    } else {
        0.0
    }
}

/// Outcome of one corrector solve.
struct Newton {
    converged: bool,
    iters: usize,
    nonfinite: bool,
}

impl Bdf {
    /// A BDF integrator for a system with `n_q` coordinates and `n_c` constraints (the same
    /// constructor shape as the suite's other methods). Workspaces are (re)allocated from the
    /// system itself in `initialize`, which also learns the number of excitations.
    pub fn new(settings: Settings, n_q: usize, n_c: usize) -> Self {
        let mut bdf = Bdf::unsized_new(settings);
        let ny = 2 * n_q + 2 * n_c;
        bdf.nq = n_q;
        bdf.nc = n_c;
        bdf.ny = ny;
        bdf.ggl = Ggl::new(n_q, n_c);
        bdf.jac = JacobianStore::new(settings.jacobian, n_q, n_c, 0);
        bdf
    }

    fn unsized_new(settings: Settings) -> Self {
        Bdf {
            settings,
            max_order: MAX_ORDER,
            fixed_order: None,
            initialized: false,
            nq: 0,
            nc: 0,
            ny: 0,
            ggl: Ggl::new(0, 0),
            jac: JacobianStore::new(settings.jacobian, 0, 0, 0),
            state: MechState::default(),
            d: DMatrix::zeros(0, MAX_ORDER + 3),
            d_new: DMatrix::zeros(0, MAX_ORDER + 1),
            order: 1,
            h: 0.0,
            h_next: 0.0,
            order_next: 1,
            n_equal_steps: 0,
            rate_prev: None,
            stats: Stats::default(),
            y: Vec::new(),
            y_pred: Vec::new(),
            psi: Vec::new(),
            corr: Vec::new(),
            g0: Vec::new(),
            res: Vec::new(),
            w: Vec::new(),
            err: Vec::new(),
            err2: Vec::new(),
            profile: Profile::default(),
            reanchor: ReanchorWork::default(),
        }
    }

    /// Measure the thread CPU time per part of the step (residuals, Jacobians, LU,
    /// back-substitutions) from now on; read it with [`Bdf::profile`]. Costs a few system calls
    /// per Newton iteration.
    pub fn enable_profile(&mut self) {
        self.profile = Profile {
            enabled: true,
            ..Profile::default()
        };
    }

    /// The measured breakdown (all zero unless [`Bdf::enable_profile`] was called).
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The last accepted state (inherent, so calls need no system type).
    pub fn state(&self) -> &MechState {
        &self.state
    }

    /// Statistics since initialisation.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The step size the next step will try.
    pub fn next_step_size(&self) -> f64 {
        self.h_next
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Re-anchorings of the history at communication points since this object was made or
    /// restored (a diagnostic, not saved with the state).
    pub fn reanchors(&self) -> u64 {
        self.reanchor.count
    }

    /// Current order.
    pub fn order(&self) -> usize {
        self.order
    }

    /// The Jacobian store (strategy, pattern estimate, colouring, current `G`).
    pub fn jacobian(&self) -> &JacobianStore {
        &self.jac
    }

    /// The Jacobian store, mutable (e.g. `auto_excitation_term`); set after `initialize`.
    pub fn jacobian_mut(&mut self) -> &mut JacobianStore {
        &mut self.jac
    }

    /// The re-evaluation policy (thresholds are public; they survive `initialize`).
    pub fn policy_mut(&mut self) -> &mut ReevalPolicy {
        &mut self.jac.policy
    }

    /// Residual evaluator (for tests and diagnostics).
    pub fn residual(&mut self) -> &mut Ggl {
        &mut self.ggl
    }

    /// The full solver vector `y = (q, v, λ, η)` of the last accepted step.
    pub fn solver_vector(&self) -> &[f64] {
        &self.y
    }

    fn h_max(&self) -> f64 {
        let m = self.settings.max_step;
        if m > 0.0 && m.is_finite() {
            m
        } else {
            f64::INFINITY
        }
    }

    fn allocate<S: MultibodySystem + ?Sized>(&mut self, sys: &mut S) {
        let (nq, nc) = (sys.n_q(), sys.n_c());
        let ny = 2 * nq + 2 * nc;
        self.nq = nq;
        self.nc = nc;
        self.ny = ny;
        self.ggl = Ggl::new(nq, nc);
        // Keep the policy's thresholds (they may have been tuned through `policy_mut`).
        let policy = self.jac.policy.clone();
        self.jac = JacobianStore::new(self.settings.jacobian, nq, nc, sys.n_excitations());
        self.jac.size_channels_for(sys);
        self.jac.policy = policy;
        self.d = DMatrix::zeros(ny, MAX_ORDER + 3);
        self.d_new = DMatrix::zeros(ny, MAX_ORDER + 1);
        for v in [
            &mut self.y,
            &mut self.y_pred,
            &mut self.psi,
            &mut self.corr,
            &mut self.g0,
            &mut self.res,
            &mut self.w,
        ] {
            *v = vec![0.0; ny];
        }
        self.err = vec![0.0; 2 * nq];
        self.err2 = vec![0.0; 2 * nq];
        self.state = MechState {
            t: 0.0,
            q: vec![0.0; nq],
            v: vec![0.0; nq],
            lambda: vec![0.0; nc],
        };
        self.stats = Stats::default();
        self.rate_prev = None;
        self.n_equal_steps = 0;
    }

    /// `y = (q, v, λ, 0)` with `λ` from the saddle-point system; checks consistency.
    fn consistent_y<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        x: &MechState,
        acc: &mut [f64],
    ) -> Result<(), IntegrateError> {
        let (nq, nc) = (self.nq, self.nc);
        if x.q.len() != nq || x.v.len() != nq {
            return Err(IntegrateError::Settings(format!(
                "state has {} positions and {} velocities, the system {nq}",
                x.q.len(),
                x.v.len()
            )));
        }
        let t = x.t;
        if !t.is_finite() || x.q.iter().chain(&x.v).any(|z| !z.is_finite()) {
            return Err(IntegrateError::NonFinite {
                t,
                what: "initial state".into(),
            });
        }
        self.y[..nq].copy_from_slice(&x.q);
        self.y[nq..2 * nq].copy_from_slice(&x.v);
        let mut lambda = vec![0.0; nc];
        self.ggl
            .consistent_multipliers(sys, t, &x.q, &x.v, acc, &mut lambda)?;
        self.y[2 * nq..2 * nq + nc].copy_from_slice(&lambda);
        self.y[2 * nq + nc..].fill(0.0);
        // Consistency: Φ = 0 and Φ_q v + Φ_t = 0 to well below the tolerances.
        let mut g = vec![0.0; self.ny];
        self.ggl.eval(sys, t, &self.y, &mut g)?;
        self.ggl.evals = 0;
        let tol = 10.0 * self.settings.atol + 1e-10;
        // The velocity rows scale with the velocities: a state the method itself produced
        // (a restart at an event) satisfies them to its Newton tolerance, relative to |v| (a
        // wheel spinning at 33 rad/s has |ṗ| ≈ 17).
        let vmax = x.v.iter().fold(0.0f64, |m, z| m.max(z.abs()));
        let tol_v = tol + 10.0 * self.settings.rtol * vmax;
        let pos = g[2 * nq + nc..].iter().fold(0.0f64, |m, z| m.max(z.abs()));
        let vel = g[2 * nq..2 * nq + nc]
            .iter()
            .fold(0.0f64, |m, z| m.max(z.abs()));
        if pos > tol || vel > tol_v {
            return Err(IntegrateError::Inconsistent {
                t,
                what: format!(
                    "max |Φ| = {pos:e} (allowed {tol:e}), max |Φ_q v + Φ_t| = {vel:e} (allowed {tol_v:e})"
                ),
            });
        }
        Ok(())
    }

    /// Start from the exact history `past[j]` at `t0 − j h` (`past[0]` the current state,
    /// `past.len() = order + 1`), for fixed-order, fixed-step tests without a start-up phase.
    pub fn initialize_with_history<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        h: f64,
        order: usize,
        past: &[MechState],
    ) -> Result<(), IntegrateError> {
        if past.len() != order + 1 || !(1..=MAX_ORDER).contains(&order) || h <= 0.0 {
            return Err(IntegrateError::Settings(format!(
                "history needs order + 1 = {} states, got {}",
                order + 1,
                past.len()
            )));
        }
        self.initialize(sys, &past[0])?;
        let mut acc = vec![0.0; self.nq];
        // Values into columns 0..=order, then backward differences in place.
        for (j, x) in past.iter().enumerate() {
            self.consistent_y(sys, x, &mut acc)?;
            self.d.column_mut(j).copy_from_slice(&self.y);
        }
        // past[j] is y_{n−j}: ∇^level y_n = ∇^(level−1) y_n − ∇^(level−1) y_{n−1}.
        for level in 1..=order {
            for j in (level..=order).rev() {
                for i in 0..self.ny {
                    self.d[(i, j)] = self.d[(i, j - 1)] - self.d[(i, j)];
                }
            }
        }
        self.consistent_y(sys, &past[0], &mut acc)?;
        self.order = order;
        self.order_next = order;
        self.h = h;
        self.h_next = h;
        self.n_equal_steps = order + 1;
        Ok(())
    }

    /// The start-up step size estimate at the consistent state `x` with accelerations `acc`
    /// (`self.y` holds its solver vector).
    fn startup_step(&self, x: &MechState, acc: &[f64]) -> f64 {
        let nq = self.nq;
        let mut dy = vec![0.0; 2 * nq];
        dy[..nq].copy_from_slice(&x.v);
        dy[nq..].copy_from_slice(acc);
        let s = self.settings;
        let h_max = if self.h_max().is_finite() {
            self.h_max()
        } else {
            0.0
        };
        initial_step_size(x.t, &self.y[..2 * nq], &dy, s.rtol, s.atol, 1, h_max)
    }

    /// Order-1 history at the consistent state `x` (`self.y`, accelerations `acc`) for a first
    /// step of size `h0`.
    fn start_order_one(&mut self, x: &MechState, acc: &[f64], h0: f64) {
        let (nq, nc) = (self.nq, self.nc);
        self.d.fill(0.0);
        self.d.column_mut(0).copy_from_slice(&self.y);
        for i in 0..nq {
            self.d[(i, 1)] = h0 * x.v[i];
            self.d[(nq + i, 1)] = h0 * acc[i];
        }
        self.order = 1;
        self.order_next = 1;
        self.h = h0;
        self.h_next = h0;
        self.state = MechState {
            t: x.t,
            q: x.q.clone(),
            v: x.v.clone(),
            lambda: self.y[2 * nq..2 * nq + nc].to_vec(),
        };
    }

    /// Start again at order 1 from `x` (a jump in the state), keeping the Jacobian store
    /// (`G`, its LU, the policy and its counters: the matrix depends on where the system is,
    /// not on the history), the statistics, and the step size as far as the start-up estimate
    /// allows. Falls back to [`Integrator::initialize`] before the first initialization or for
    /// a state of another size. Returns `true` when the statistics were kept.
    pub fn restart<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        x: &MechState,
    ) -> Result<bool, IntegrateError> {
        if !self.initialized || x.q.len() != self.nq || x.v.len() != self.nq {
            Integrator::<S>::initialize(self, sys, x)?;
            return Ok(false);
        }
        let evals = self.ggl.evals;
        let mut acc = vec![0.0; self.nq];
        let r = self.consistent_y(sys, x, &mut acc);
        self.ggl.evals += evals;
        r?;
        let estimate = self.startup_step(x, &acc);
        let h0 = self
            .settings
            .fixed_step
            .unwrap_or(estimate.min(self.h_next));
        self.start_order_one(x, &acc, h0);
        self.n_equal_steps = 0;
        self.rate_prev = None;
        self.stats.f_evals = self.ggl.evals;
        Ok(true)
    }

    /// `x0` (a state of this method, for a fresh start from it: [`Integrator::restart_state`])
    /// projected onto the constraints: positions by minimal-norm Gauss–Newton to
    /// [`projection_tol`] (not below the round-off of `Φ` at the coordinates' size), velocities
    /// onto `Φ_q v + Φ_t = 0` at them. The corrector leaves `Φ` at its Newton tolerance, which
    /// is relative to `|q|`, while [`Integrator::initialize`] checks `|Φ| ≤ 10 atol + 1e-10`:
    /// at rtol 1e-4 and atol 1e-9 the quarter car in the absolute formulation (`|x|` = 5.2 m at
    /// the tire's lift-off) left `|Φ|` = 1.6e-8, and the restart at the lift-off failed (at
    /// rtol 1e-3 so did the restart after a parameter change). Should the projection not
    /// converge, `x0` as it is (the check decides).
    fn projected<S: MultibodySystem + ?Sized>(&self, sys: &mut S, x0: &MechState) -> MechState {
        let mut x = x0.clone();
        if self.nc == 0 || x.q.len() != self.nq || x.v.len() != self.nq {
            return x;
        }
        let mut c = Constrained::new(self.nq, self.nc);
        let qmax = x.q.iter().fold(0.0f64, |m, z| m.max(z.abs()));
        let tol = projection_tol(&self.settings).max(64.0 * f64::EPSILON * (1.0 + qmax));
        let projected = c
            .project_positions(sys, x.t, &mut x.q, tol)
            .and_then(|_| c.project_velocities(sys, x.t, &x.q, &mut x.v));
        if projected.is_err() || !x.q.iter().chain(&x.v).all(|z| z.is_finite()) {
            return x0.clone();
        }
        x
    }

    /// Re-anchor the history to the right-hand side that changed at the current point with
    /// the state (new input segments at a communication point; see [`super::reanchor`]), when
    /// the kink can matter at the current step size and tolerance, and always when an input's
    /// value jumped (a held force: the accelerations jump, the state does not, so the order
    /// and step size stay and only the history's derivatives change). Costs one LU of the
    /// saddle-point matrix and four evaluations of forces, `M`, `Φ_q`, `γ` (five when the next
    /// order is 4 or 5 and `a⃛` is re-anchored too); allocates only the first time.
    fn reanchor<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        kink: InputKink,
    ) -> Result<(), IntegrateError> {
        // With a fixed step only a jump of a value: the small kinks in `ü` are left as they
        // were (the fixed-step BDF is the order tests' plain method), but a history across an
        // acceleration jump `Δa` makes the first step's velocity `h Δa / γ_k` instead of
        // `h Δa` (BDF5: 0.44×), which no step size makes small.
        if !self.initialized || (self.settings.fixed_step.is_some() && kink.value == 0.0) {
            return Ok(());
        }
        let h = self.h;
        // The velocities' error weight: atol + rtol |v| at the largest velocity.
        let vmax = self.state.v.iter().fold(0.0f64, |m, z| m.max(z.abs()));
        let weight = self.settings.atol + self.settings.rtol * vmax;
        if !kink.matters(h, weight) {
            return Ok(());
        }
        // The order of the next step (its differences are all kept after an accepted step).
        let k = self.order_next;
        let t = self.state.t;
        let work = &mut self.reanchor;
        // Only an improvement of the history: if the new right-hand side cannot be evaluated
        // here (a singular saddle-point matrix, values not finite), the step's own Newton
        // iteration and error test decide as before.
        // `a⃛` enters the history from order 4 on (the velocities' fourth derivative), from
        // a third difference at `h/4`: its truncation error (`δ` times the fourth
        // derivative, see `third_derivative`) stays below the order-4 terms it corrects, and
        // its round-off is `ε |r| / δ³` (at `δ = 0.02 h`, the first passes' increment, it
        // swamped the `a⃛` of smooth motions: more steps on the smooth rig test).
        let third = (k >= 4).then_some(0.25 * h);
        if !matches!(
            work.rhs_derivatives(sys, t, &self.state.q, &self.state.v, 0.02 * h, third),
            Ok(true)
        ) {
            return Ok(());
        }
        work.count += 1;
        let (rtol, atol) = (self.settings.rtol, self.settings.atol);
        let none: &[f64] = &[];
        reanchor_differences::<{ MAX_ORDER + 1 }>(
            &mut self.d,
            k,
            h,
            self.nq,
            [
                &work.a,
                &work.adot,
                &work.addot,
                if third.is_some() { &work.adddot } else { none },
                // At order 5 the velocities' fifth derivative: the old history's is the
                // backward difference across the last steps and their kinks, not the new
                // segment's; zero (one order lower there) is the better guess.
                if k >= 5 { &work.a4 } else { none },
            ],
            rtol,
            atol,
        );
        Ok(())
    }

    /// Re-interpolate the differences onto a grid of spacing `factor · h` (scipy's `change_D`).
    fn change_d(&mut self, factor: f64) {
        let k = self.order;
        let r = Self::r_matrix(k, factor);
        let u = Self::r_matrix(k, 1.0);
        let mut ru = [[0.0; MAX_ORDER + 1]; MAX_ORDER + 1];
        for i in 0..=k {
            for j in 0..=k {
                ru[i][j] = (0..=k).map(|l| r[i][l] * u[l][j]).sum();
            }
        }
        for j in 0..=k {
            let mut c = self.d_new.column_mut(j);
            c.fill(0.0);
            for (i, row) in ru.iter().enumerate().take(k + 1) {
                c.axpy(row[j], &self.d.column(i), 1.0);
            }
        }
        for j in 0..=k {
            self.d.column_mut(j).copy_from(&self.d_new.column(j));
        }
        self.n_equal_steps = 0;
    }

    fn r_matrix(k: usize, factor: f64) -> [[f64; MAX_ORDER + 1]; MAX_ORDER + 1] {
        let mut m = [[0.0; MAX_ORDER + 1]; MAX_ORDER + 1];
        for j in 0..=k {
            m[0][j] = 1.0;
        }
        for i in 1..=k {
            for j in 1..=k {
                m[i][j] = (i as f64 - 1.0 - factor * j as f64) / i as f64;
            }
        }
        for i in 1..=k {
            for j in 0..=k {
                m[i][j] *= m[i - 1][j];
            }
        }
        m
    }

    /// Dense output: `q(t)`, `v(t)` from the interpolation polynomial of the last step (valid
    /// on `[t_n − h, t_n]`, where it is the BDF's own order-`k` interpolant).
    pub fn interpolate(&self, t: f64, q: &mut [f64], v: &mut [f64]) {
        let nq = self.nq;
        let tn = self.state.t;
        let h = self.h;
        for i in 0..nq {
            q[i] = self.d[(i, 0)];
            v[i] = self.d[(nq + i, 0)];
        }
        let mut p = 1.0;
        for j in 0..self.order {
            p *= (t - (tn - h * j as f64)) / (h * (j as f64 + 1.0));
            let c = self.d.column(j + 1);
            for i in 0..nq {
                q[i] += p * c[i];
                v[i] += p * c[nq + i];
            }
        }
    }

    /// One corrector solve at `t_new` (predictor and `ψ` prepared, `g0 = g(t_new, y_pred)`).
    fn newton<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t_new: f64,
        alpha: f64,
        tol: f64,
    ) -> Result<Newton, IntegrateError> {
        let n2 = 2 * self.nq;
        self.corr.fill(0.0);
        self.y.copy_from_slice(&self.y_pred);
        let c = 2.0 / (1.0 + alpha / self.jac.alpha_j);
        let mut norm_old: Option<f64> = None;
        let mut measured: Option<f64> = None;
        for m in 0..NEWTON_MAXIT {
            if m == 0 {
                self.res.copy_from_slice(&self.g0);
            } else {
                let c0 = clock(self.profile.enabled);
                self.ggl.eval(sys, t_new, &self.y, &mut self.res)?;
                self.profile.residual += clock(self.profile.enabled) - c0;
            }
            for i in 0..n2 {
                self.res[i] += alpha * (self.corr[i] + self.psi[i]);
            }
            if self.res.iter().any(|z| !z.is_finite()) {
                return Ok(Newton {
                    converged: false,
                    iters: m,
                    nonfinite: true,
                });
            }
            for r in self.res.iter_mut() {
                *r = -*r;
            }
            let c0 = clock(self.profile.enabled);
            self.jac.solve(&mut self.res);
            self.profile.solve += clock(self.profile.enabled) - c0;
            self.stats.newton_iters += 1;
            let mut s = 0.0;
            for i in 0..self.ny {
                self.res[i] *= c;
                let z = self.res[i] * self.w[i];
                s += z * z;
            }
            let dn = (s / self.ny as f64).sqrt();
            if !dn.is_finite() {
                return Ok(Newton {
                    converged: false,
                    iters: m + 1,
                    nonfinite: true,
                });
            }
            // DASSL: an update at round-off level of y has converged (an exact equilibrium
            // would otherwise produce a meaningless rate from two round-off-sized updates).
            let y_norm = {
                let mut s = 0.0;
                for i in 0..self.ny {
                    let z = self.y[i] * self.w[i];
                    s += z * z;
                }
                (s / self.ny as f64).sqrt()
            };
            // Also negligible: an update a thousand times below the tolerance. At rest in an
            // exact equilibrium (static initialization) the updates are round-off of the force
            // balance, of no size relative to the tolerance but without contraction between
            // them: the rate test would call that divergence and shrink h forever.
            let negligible = dn <= 100.0 * f64::EPSILON * y_norm || dn <= 1e-3 * tol;
            let rate = match norm_old {
                Some(o) => {
                    let r = dn / o;
                    measured = Some(r);
                    Some(r)
                }
                // The previous step's rate, floored at the slowest one the policy keeps the
                // matrix for: a stale tiny rate must not accept a large first increment (α
                // and the state moved since it was measured). None after a refresh.
                None => self.rate_prev.map(|r| r.max(self.jac.policy.slow_rate)),
            };
            if let (Some(r), Some(_), false) = (rate, norm_old, negligible) {
                // Divergence or too slow to finish in the remaining iterations (DASSL: 0.9).
                if r > MAX_RATE {
                    return Ok(Newton {
                        converged: false,
                        iters: m + 1,
                        nonfinite: false,
                    });
                }
            }
            for i in 0..self.ny {
                self.y[i] += self.res[i];
                self.corr[i] += self.res[i];
            }
            let tol_m = if norm_old.is_none() {
                FIRST_ITERATION_TOL * tol
            } else {
                tol
            };
            if dn == 0.0
                || negligible
                || rate.is_some_and(|r| r < 1.0 && r / (1.0 - r) * dn < tol_m)
            {
                if measured.is_some() {
                    self.rate_prev = measured;
                }
                self.jac.policy.converged(measured);
                return Ok(Newton {
                    converged: true,
                    iters: m + 1,
                    nonfinite: false,
                });
            }
            norm_old = Some(dn);
        }
        Ok(Newton {
            converged: false,
            iters: NEWTON_MAXIT,
            nonfinite: false,
        })
    }

    fn refresh<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        kind: Refresh,
        t_new: f64,
        alpha: f64,
    ) -> Result<(), IntegrateError> {
        let on = self.profile.enabled;
        let c0 = clock(on);
        let lu0 = self.jac.lu_seconds;
        self.jac.profile = on;
        let r = self.jac.refresh(
            kind,
            &mut self.ggl,
            sys,
            t_new,
            &self.y_pred,
            &self.g0,
            alpha,
            &mut self.stats,
        );
        let lu = self.jac.lu_seconds - lu0;
        self.profile.lu += lu;
        self.profile.jacobian += clock(on) - c0 - lu;
        r?;
        self.rate_prev = None;
        Ok(())
    }

    fn step_impl<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t_limit: f64,
    ) -> Result<f64, IntegrateError> {
        if !self.initialized {
            return Err(IntegrateError::Settings(
                "BDF step before initialize".into(),
            ));
        }
        let t = self.state.t;
        if t_limit.is_nan() || t_limit <= t {
            return Err(IntegrateError::Settings(format!(
                "step limit {t_limit} must exceed the current time {t}"
            )));
        }
        let (nq, nc, ny) = (self.nq, self.nc, self.ny);
        let n2 = 2 * nq;
        self.ggl.invalidate_mass();
        if let Some(k) = self.fixed_order {
            self.order_next = k.clamp(1, MAX_ORDER);
        }
        self.order = self.order_next;
        let mut h_target = match self.settings.fixed_step {
            Some(h) => h,
            None => self.h_next.min(self.h_max()),
        };
        let (rtol, atol) = (self.settings.rtol, self.settings.atol);
        let newton_tol = NEWTON_TOL;
        let mut rejections = 0u32;
        let mut error_failures = 0u32;
        let mut nonfinite = false;
        loop {
            let k = self.order;
            // Land on the limit with equal steps over the whole remaining interval: r/n for
            // n = ⌈r/h⌉ (one step if h stretched by up to 1 % reaches it). The steps after the
            // first find n − 1, n − 2, … and the same r/n (the 1e-6 keeps rounding from adding
            // a step), and the next communication interval of the same length the same grid,
            // so h changes only when the controller asks for it.
            // (Equalizing only within 4 steps of the limit changed h twice per interval: α
            // left the band where the matrix is kept, and the equal-step count never reached
            // k + 1, so h never grew — the slider-crank at H = 1 ms stayed at H/7.)
            let r = t_limit - t;
            let n = if r <= 1.01 * h_target {
                1.0
            } else {
                (r / h_target - 1e-6).ceil().max(1.0)
            };
            let mut h_plan = r / n;
            // Keep the grid (no re-interpolation) for changes at rounding level: of `h`, and
            // of the time itself (`t + h − t` differs from `h` by up to an ulp of `t`; judged
            // against `h` alone, every step at t = 1e4 s with h = 1 ms was a change, which
            // resets the equal-step count, so order and step size never adapted: the stiff
            // double pendulum took 529 steps from t0 = 1e4 against 322 from 0).
            let same = |a: f64, b: f64| (a - b).abs() <= 1e-10 * b + time_resolution(t_limit);
            if same(h_plan, self.h) {
                h_plan = self.h;
            }
            let clipped = h_plan < 0.999 * h_target;
            let t_new = if t + h_plan >= t_limit - 1e-10 * h_plan - time_resolution(t_limit) {
                t_limit
            } else {
                t + h_plan
            };
            let h_actual = t_new - t;
            let h_step = if same(h_actual, self.h) {
                self.h
            } else {
                h_actual
            };
            let h_min = 16.0 * f64::EPSILON * t.abs().max(1e-3);
            if h_step.is_nan() || h_step < h_min {
                return Err(if nonfinite {
                    IntegrateError::NonFinite {
                        t,
                        what: "residual (step size reduced to the minimum)".into(),
                    }
                } else {
                    IntegrateError::StepTooSmall {
                        t,
                        h: h_step,
                        h_min,
                        reason: "repeated error-test or corrector failures".into(),
                    }
                });
            }
            if h_step != self.h {
                self.change_d(h_step / self.h);
                self.h = h_step;
            }
            // Predictor and ψ.
            let gk = gamma(k);
            self.y_pred.fill(0.0);
            self.psi.fill(0.0);
            for j in 0..=k {
                // Column slices: the indexed form's bounds checks were a visible share of a
                // step on small models (ny = 4 on the double pendulum).
                let c = &self.d.as_slice()[j * ny..(j + 1) * ny];
                let gj = gamma(j) / gk;
                for ((p, s), &c) in self.y_pred.iter_mut().zip(self.psi.iter_mut()).zip(c) {
                    *p += c;
                    *s += gj * c;
                }
            }
            let alpha = gk / h_step;
            for i in 0..ny {
                let wi = 1.0 / (atol + rtol * self.y_pred[i].abs());
                self.w[i] = if i < n2 { wi } else { wi * h_step };
            }
            let c0 = clock(self.profile.enabled);
            self.ggl.eval(sys, t_new, &self.y_pred, &mut self.g0)?;
            self.profile.residual += clock(self.profile.enabled) - c0;
            let mut outcome = if self.g0.iter().all(|z| z.is_finite()) {
                loop {
                    let reason = if self.jac.has_matrix() {
                        self.jac.policy.before_solve(alpha, self.jac.alpha_j)
                    } else {
                        Some(super::jacobian::Reason::Initial)
                    };
                    if let Some(reason) = reason {
                        let kind = self.jac.policy.choose(reason, self.jac.strategy);
                        if kind != Refresh::Update {
                            let capped = self.jac.policy.choose_uncapped(reason, self.jac.strategy)
                                == Refresh::Update;
                            self.profile.full_by_reason
                                [if capped { 5 } else { reason as usize }] += 1;
                        }
                        self.refresh(sys, kind, t_new, alpha)?;
                    }
                    let n = self.newton(sys, t_new, alpha, newton_tol)?;
                    if n.converged || n.nonfinite {
                        break n;
                    }
                    self.stats.convergence_failures += 1;
                    match self.jac.policy.on_failure(self.jac.strategy) {
                        FailureAction::Refresh(kind) => {
                            if kind != Refresh::Update {
                                self.profile.full_by_reason[3] += 1;
                            }
                            self.refresh(sys, kind, t_new, alpha)?
                        }
                        FailureAction::ReduceStep => break n,
                    }
                }
            } else {
                Newton {
                    converged: false,
                    iters: 0,
                    nonfinite: true,
                }
            };
            if outcome.nonfinite {
                nonfinite = true;
                outcome.converged = false;
            }
            if !outcome.converged {
                self.stats.rejected_steps += 1;
                rejections += 1;
                if rejections > MAX_REJECTIONS {
                    return Err(IntegrateError::NewtonFailed {
                        t,
                        failures: rejections,
                    });
                }
                h_target = 0.25 * h_step;
                continue;
            }
            // Local error on q, v.
            let ec = 1.0 / (k as f64 + 1.0);
            for i in 0..n2 {
                self.err[i] = ec * self.corr[i];
            }
            let err_norm = weighted_rms_norm(
                &self.err,
                &self.d.column(0).as_slice()[..n2],
                &self.y[..n2],
                rtol,
                atol,
            );
            let safety =
                0.9 * (2 * NEWTON_MAXIT + 1) as f64 / (2 * NEWTON_MAXIT + outcome.iters) as f64;
            if self.settings.fixed_step.is_none() && err_norm > 1.0 {
                self.stats.error_test_failures += 1;
                self.stats.rejected_steps += 1;
                rejections += 1;
                error_failures += 1;
                self.jac.policy.on_error_test_failures(error_failures);
                if rejections > MAX_REJECTIONS {
                    return Err(IntegrateError::StepTooSmall {
                        t,
                        h: h_step,
                        h_min,
                        reason: "repeated error-test failures".into(),
                    });
                }
                h_target = h_step * MIN_FACTOR.max(safety * err_norm.powf(-1.0 / (k as f64 + 1.0)));
                continue;
            }
            // Accept: update the differences.
            self.stats.steps += 1;
            self.n_equal_steps += 1;
            {
                let d = self.d.as_mut_slice();
                let (head, tail) = d.split_at_mut((k + 2) * ny);
                let dk1 = &mut head[(k + 1) * ny..];
                for ((x, &c), old) in tail[..ny].iter_mut().zip(&self.corr).zip(dk1.iter()) {
                    *x = c - old;
                }
                dk1.copy_from_slice(&self.corr);
                for j in (0..=k).rev() {
                    let (lo, hi) = head.split_at_mut((j + 1) * ny);
                    for (x, &y) in lo[j * ny..].iter_mut().zip(&hi[..ny]) {
                        *x += y;
                    }
                }
            }
            self.state.t = t_new;
            self.state.q.copy_from_slice(&self.y[..nq]);
            self.state.v.copy_from_slice(&self.y[nq..n2]);
            self.state.lambda.copy_from_slice(&self.y[n2..n2 + nc]);
            sys.accept_step(
                t_new,
                &self.state.q,
                &self.state.v,
                Some(&self.state.lambda),
            );
            self.jac.policy.step_accepted();
            self.stats.f_evals = self.ggl.evals;
            // Next step size and order (applied at the start of the next step).
            self.order_next = k;
            if self.settings.fixed_step.is_some() {
                self.h_next = h_step;
            } else if self.n_equal_steps > k {
                let norm_of = |bdf: &mut Bdf, col: usize, ec: f64| -> f64 {
                    for i in 0..n2 {
                        bdf.err2[i] = ec * bdf.d[(i, col)];
                    }
                    weighted_rms_norm(&bdf.err2, &bdf.y[..n2], &bdf.y[..n2], rtol, atol)
                };
                let max_k = if self.fixed_order.is_some() {
                    k
                } else {
                    self.max_order.clamp(1, MAX_ORDER)
                };
                let min_k = if self.fixed_order.is_some() { k } else { 1 };
                let e_m = if k > min_k {
                    norm_of(self, k, 1.0 / k as f64)
                } else {
                    f64::INFINITY
                };
                let e_p = if k < max_k {
                    norm_of(self, k + 2, 1.0 / (k as f64 + 2.0))
                } else {
                    f64::INFINITY
                };
                let f_m = e_m.max(1e-300).powf(-1.0 / k as f64);
                let f_0 = err_norm.max(1e-300).powf(-1.0 / (k as f64 + 1.0));
                let f_p = e_p.max(1e-300).powf(-1.0 / (k as f64 + 2.0));
                let (mut best, mut dk) = (f_0, 0i32);
                if f_m > best {
                    best = f_m;
                    dk = -1;
                }
                if f_p > best {
                    best = f_p;
                    dk = 1;
                }
                self.order_next = (k as i32 + dk) as usize;
                self.h_next = (h_step * (safety * best).min(MAX_FACTOR)).min(self.h_max());
                self.n_equal_steps = 0;
            } else if !clipped {
                self.h_next = h_step;
            } else {
                // Landed on a shortened grid: keep the target, but the one this step came to
                // after rejections (not the one it started with, which failed), and at most
                // MAX_FACTOR times this step: the differences are now on its grid, and
                // stretching them by ρ multiplies the j-th one's rounding by ρ^j (a 1e-8 s
                // communication step, then 10 ms ones: ρ = 1e5, a predictor far off the
                // constraints, "mass matrix singular", Discard at every retry).
                self.h_next = h_target.min(MAX_FACTOR * h_step);
            }
            return Ok(t_new);
        }
    }
}

impl<S: MultibodySystem + ?Sized> Integrator<S> for Bdf {
    fn initialize(&mut self, sys: &mut S, x: &MechState) -> Result<(), IntegrateError> {
        let s = self.settings;
        if !(s.rtol >= 0.0 && s.atol > 0.0 && s.rtol.is_finite() && s.atol.is_finite()) {
            return Err(IntegrateError::Settings(format!(
                "tolerances must be positive (rtol {}, atol {})",
                s.rtol, s.atol
            )));
        }
        self.allocate(sys);
        let mut acc = vec![0.0; self.nq];
        self.consistent_y(sys, x, &mut acc)?;
        let h0 = if let Some(h) = s.fixed_step {
            h
        } else if s.initial_step > 0.0 {
            s.initial_step
                .max(super::dense::h_min(x.t))
                .min(self.h_max())
        } else {
            self.startup_step(x, &acc)
        };
        self.start_order_one(x, &acc, h0);
        self.jac.reset();
        self.initialized = true;
        Ok(())
    }

    fn step(&mut self, sys: &mut S, t_limit: f64) -> Result<f64, IntegrateError> {
        let c0 = clock(self.profile.enabled);
        let r = self.step_impl(sys, t_limit);
        self.profile.total += clock(self.profile.enabled) - c0;
        self.stats.f_evals = self.ggl.evals;
        r
    }

    fn state(&self) -> &MechState {
        Bdf::state(self)
    }

    fn next_step_size(&self) -> f64 {
        Bdf::next_step_size(self)
    }

    fn stats(&self) -> &Stats {
        Bdf::stats(self)
    }

    fn method(&self) -> Method {
        Method::Bdf
    }

    fn restart(&mut self, sys: &mut S, x: &MechState) -> Result<bool, IntegrateError> {
        Bdf::restart(self, sys, x)
    }

    fn restart_state(&self, sys: &mut S, x: &MechState) -> MechState {
        self.projected(sys, x)
    }

    fn inputs_changed(&mut self, sys: &mut S, kink: InputKink) -> Result<(), IntegrateError> {
        self.reanchor(sys, kink)
    }

    fn set_settings(&mut self, settings: Settings) {
        let strategy_changed = settings.jacobian != self.settings.jacobian;
        self.settings = settings;
        if strategy_changed {
            let (nu, orders) = (self.jac.n_excitations(), self.jac.orders());
            let mut policy = self.jac.policy.clone();
            policy.reset();
            self.jac = JacobianStore::new(settings.jacobian, self.nq, self.nc, nu);
            if settings.jacobian.extended() && nu > 0 {
                self.jac.size_channels(orders);
            }
            self.jac.policy = policy;
        }
    }
}
