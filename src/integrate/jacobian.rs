//! Iteration matrices for the BDF corrector (paper 003, sections 2.2–3.3).
//!
//! The store keeps `G ≈ ∂g/∂y` (see [`super::ggl`]) and forms `J = α P + G` on demand, so
//! - a **full evaluation** computes `G` by dense finite differences (16)/(17), by grouped
//!   columns (CPR, (20)) on an estimated pattern, or analytically;
//! - the **partitioned update** (24) is a new `α` on the diagonal of the same `G`;
//! - the **extended partitioned update** (26) adds `Σ_i ∂²g/∂u_i∂y · (u_i(t_new) − u_i(t_old))`
//!   to `G`, the second derivatives by differences of `G` under an excitation offset, computed
//!   with every full evaluation. The sum runs over the *channels* of the excitations: the value
//!   `u_i` only, or the whole jet `(u_i, u̇_i, ü_i)` when the system says the jet enters the
//!   equations ([`Excitations::excitation_orders`]; joint coordinates, where a translating
//!   suspension enters only through `ü`).
//!
//! The `η` columns are never differenced: `∂g/∂η = (Φ_qᵀ; 0; 0; 0)` is the transpose of the
//! `Φ` rows' `q` block, which the `q` columns already gave (saves `n_c` calls per Jacobian).
//!
//! When to refresh is decided by [`ReevalPolicy`], the same object for every strategy.

// The thread CPU clock is a system call: read only when profiling.
use super::clock::thread_cpu_time;
use super::ggl::Ggl;
use super::linalg::DenseLu;
use super::system::Excitations;
use super::{IntegrateError, JacobianStrategy, MultibodySystem, Stats};
use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

/// Why the iteration matrix should be refreshed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reason {
    /// No matrix yet.
    Initial,
    /// `α` moved outside the band where the scaled update (18) is effective.
    AlphaChange,
    /// The corrector converged, but slowly.
    SlowConvergence,
    /// The corrector diverged or did not converge in the allowed iterations.
    ConvergenceFailure,
    /// Repeated error-test failures in one step with a matrix that is not a fresh full one:
    /// a poor matrix can let the corrector stop short on the constraints, and then no step
    /// size passes the error test.
    ErrorTestFailures,
}

/// How the matrix is refreshed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refresh {
    /// New `G` by the strategy's own method (dense FD, CPR, analytic).
    Full,
    /// A dense FD pass that also widens the sparse pattern estimate (sparse strategies).
    Widen,
    /// Partitioned (24) / extended partitioned (26) update of the old `G`.
    Update,
}

/// What to do after a corrector failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureAction {
    Refresh(Refresh),
    ReduceStep,
}

/// The re-evaluation policy (paper 003, section 2.3 a–c), shared by all strategies.
///
/// - `α` change: the ratio `α/α_J` outside `[alpha_lo, alpha_hi]` (DASSL's band 0.6…1.67,
///   within which the scaled update (18) keeps the rate acceptable);
/// - slow convergence: measured contraction rate above `slow_rate` on a converged step;
/// - failure: refresh unless the matrix was refreshed in this very step, in which case the
///   step is reduced (after a fresh update, a full evaluation; after a fresh sparse one, a
///   widening dense pass).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReevalPolicy {
    pub alpha_lo: f64,
    pub alpha_hi: f64,
    pub slow_rate: f64,
    /// Safety net: at most this many cheap updates in a row, then a full evaluation. An old
    /// `G` that still converges can let the corrector leave the constraint manifold slowly
    /// (measured on the 32-link chain: 50 updates over 3.4 s ended in an error-test collapse).
    pub max_updates: u32,
    /// Running success rate of cheap updates (exponential average: 1 when a fresh update
    /// reaches an accepted step, 0 when the corrector fails on it). Below
    /// `min_update_success` the policy asks for full evaluations instead: the Jacobian then
    /// drifts with the state (nonlinear motion), which no update tracks, and each failed
    /// update costs an LU and a corrector attempt (measured on the engine's 64-link chain,
    /// n_y = 640, where one LU costs more than a full finite-difference Jacobian: 307 updates
    /// for 32 full evaluations made dense_extended 5 % slower than dense). Every full
    /// evaluation moves the rate back towards 1, so updates are tried again later.
    pub update_success: f64,
    pub min_update_success: f64,
    updates_in_row: u32,
    pending: Option<Reason>,
    /// The kind of refresh that produced the current matrix.
    last: Option<Refresh>,
    /// Whether the current matrix was produced during the current step (attempts included).
    fresh: bool,
    /// Whether the slow convergence behind `pending` was seen on a fresh matrix.
    slow_on_fresh: bool,
}

impl Default for ReevalPolicy {
    fn default() -> Self {
        ReevalPolicy {
            alpha_lo: 0.6,
            alpha_hi: 1.0 / 0.6,
            slow_rate: 0.5,
            max_updates: 20,
            update_success: 1.0,
            min_update_success: 0.5,
            updates_in_row: 0,
            pending: Some(Reason::Initial),
            last: None,
            fresh: false,
            slow_on_fresh: false,
        }
    }
}

impl ReevalPolicy {
    /// Start over (no matrix).
    pub fn reset(&mut self) {
        self.pending = Some(Reason::Initial);
        self.updates_in_row = 0;
        self.update_success = 1.0;
        self.last = None;
        self.fresh = false;
        self.slow_on_fresh = false;
    }

    /// Before a corrector solve with coefficient `alpha`, the matrix having been formed with
    /// `alpha_j`: the reason to refresh, if any.
    pub fn before_solve(&self, alpha: f64, alpha_j: f64) -> Option<Reason> {
        if let Some(r) = self.pending {
            return Some(r);
        }
        let ratio = alpha / alpha_j;
        if !(self.alpha_lo..=self.alpha_hi).contains(&ratio) {
            return Some(Reason::AlphaChange);
        }
        None
    }

    /// Which kind of refresh a reason calls for under `strategy`.
    pub fn choose(&self, reason: Reason, strategy: JacobianStrategy) -> Refresh {
        match self.choose_kind(reason, strategy) {
            Refresh::Update
                if self.updates_in_row >= self.max_updates
                    || self.update_success < self.min_update_success =>
            {
                Refresh::Full
            }
            kind => kind,
        }
    }

    /// [`ReevalPolicy::choose`] without the cap on updates in a row (to tell the cap apart).
    pub fn choose_uncapped(&self, reason: Reason, strategy: JacobianStrategy) -> Refresh {
        self.choose_kind(reason, strategy)
    }

    fn choose_kind(&self, reason: Reason, strategy: JacobianStrategy) -> Refresh {
        let sparse = matches!(
            strategy,
            JacobianStrategy::Sparse | JacobianStrategy::SparseExtended
        );
        match reason {
            Reason::Initial | Reason::ErrorTestFailures => Refresh::Full,
            Reason::AlphaChange => {
                if strategy.extended() {
                    Refresh::Update
                } else {
                    Refresh::Full
                }
            }
            Reason::SlowConvergence | Reason::ConvergenceFailure => {
                let on_fresh = if reason == Reason::SlowConvergence {
                    self.slow_on_fresh
                } else {
                    self.fresh
                };
                match self.last {
                    // A fresh sparse matrix that converges badly: the pattern misses entries.
                    Some(Refresh::Full) if sparse && on_fresh => Refresh::Widen,
                    // An old matrix, full or updated: try to track `α` and the excitation
                    // first. An update costs one LU and at most one more corrector attempt,
                    // a full evaluation n_y residuals; if the fresh update fails too, the next
                    // failure finds it fresh and asks for a full evaluation (measured on the
                    // engine's 16-link chain: 9 of dense_extended's 12 full evaluations were
                    // corrector failures on an old *updated* matrix before this rule).
                    Some(_) if strategy.extended() && !on_fresh => Refresh::Update,
                    _ => Refresh::Full,
                }
            }
        }
    }

    /// After a corrector failure.
    pub fn on_failure(&mut self, strategy: JacobianStrategy) -> FailureAction {
        if self.fresh && self.last == Some(Refresh::Update) {
            self.update_success *= 0.75;
        }
        let sparse = matches!(
            strategy,
            JacobianStrategy::Sparse | JacobianStrategy::SparseExtended
        );
        if !self.fresh {
            return FailureAction::Refresh(self.choose(Reason::ConvergenceFailure, strategy));
        }
        match self.last {
            Some(Refresh::Update) => FailureAction::Refresh(Refresh::Full),
            Some(Refresh::Full) if sparse => FailureAction::Refresh(Refresh::Widen),
            _ => FailureAction::ReduceStep,
        }
    }

    /// A refresh of `kind` was made.
    pub fn refreshed(&mut self, kind: Refresh) {
        if kind != Refresh::Update {
            self.update_success += 0.1 * (1.0 - self.update_success);
        }
        self.updates_in_row = if kind == Refresh::Update {
            self.updates_in_row + 1
        } else {
            0
        };
        self.last = Some(kind);
        self.fresh = true;
        self.pending = None;
        self.slow_on_fresh = false;
    }

    /// The corrector converged with contraction `rate` (if measured).
    pub fn converged(&mut self, rate: Option<f64>) {
        if let Some(r) = rate {
            if r > self.slow_rate {
                self.pending = Some(Reason::SlowConvergence);
                self.slow_on_fresh = self.fresh;
            }
        }
    }

    /// `count` error-test failures so far in the current step: from the second one on, ask for
    /// a full evaluation unless the matrix already is a fresh full one.
    pub fn on_error_test_failures(&mut self, count: u32) {
        let fresh_full =
            self.fresh && matches!(self.last, Some(Refresh::Full) | Some(Refresh::Widen));
        if count >= 2 && !fresh_full {
            self.pending = Some(Reason::ErrorTestFailures);
        }
    }

    /// A step was accepted: the current matrix is no longer fresh.
    pub fn step_accepted(&mut self) {
        if self.fresh && self.last == Some(Refresh::Update) {
            self.update_success = 0.75 * self.update_success + 0.25;
        }
        self.fresh = false;
    }

    pub fn is_fresh(&self) -> bool {
        self.fresh
    }
}

/// A grouping of columns for CPR differences: `groups[k]` lists the columns of group `k`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Colouring {
    pub groups: Vec<Vec<usize>>,
}

/// Greedy colouring of the column-intersection graph (largest degree first), restricted to
/// `cols`: two columns conflict when some row has a pattern entry in both. `rows_of_col[r]`
/// lists the rows of column `r`.
pub fn colour_columns(n_rows: usize, rows_of_col: &[Vec<usize>], cols: &[usize]) -> Colouring {
    let mut cols_of_row: Vec<Vec<usize>> = vec![Vec::new(); n_rows];
    for &r in cols {
        for &i in &rows_of_col[r] {
            cols_of_row[i].push(r);
        }
    }
    // Degree = number of distinct neighbours (bounded above by the sum of row counts).
    let ncols = rows_of_col.len();
    let mut stamp = vec![usize::MAX; ncols];
    let mut degree = vec![0usize; ncols];
    for &r in cols {
        for &i in &rows_of_col[r] {
            for &c in &cols_of_row[i] {
                if c != r && stamp[c] != r {
                    stamp[c] = r;
                    degree[r] += 1;
                }
            }
        }
    }
    let mut order: Vec<usize> = cols.to_vec();
    order.sort_by(|a, b| degree[*b].cmp(&degree[*a]).then(a.cmp(b)));
    let mut colour = vec![usize::MAX; ncols];
    let mut forbidden: Vec<usize> = Vec::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &r in &order {
        for &i in &rows_of_col[r] {
            for &c in &cols_of_row[i] {
                let k = colour[c];
                if k != usize::MAX {
                    forbidden[k] = r;
                }
            }
        }
        let k = (0..groups.len())
            .find(|&k| forbidden[k] != r)
            .unwrap_or(groups.len());
        if k == groups.len() {
            groups.push(Vec::new());
            forbidden.push(usize::MAX);
        }
        groups[k].push(r);
        colour[r] = k;
    }
    for g in &mut groups {
        g.sort_unstable();
    }
    Colouring { groups }
}

/// Whether a colouring is a consistent partition (paper 003, section 3.1): every column of
/// `cols` in exactly one group, and no row with pattern entries in two columns of one group.
pub fn is_consistent_partition(
    n_rows: usize,
    rows_of_col: &[Vec<usize>],
    cols: &[usize],
    c: &Colouring,
) -> bool {
    let mut seen = vec![0usize; rows_of_col.len()];
    for g in &c.groups {
        for &r in g {
            seen[r] += 1;
        }
    }
    if cols.iter().any(|&r| seen[r] != 1) || seen.iter().sum::<usize>() != cols.len() {
        return false;
    }
    let mut owner = vec![usize::MAX; n_rows];
    for (k, g) in c.groups.iter().enumerate() {
        for &r in g {
            for &i in &rows_of_col[r] {
                if owner[i] == k {
                    return false;
                }
                owner[i] = k;
            }
        }
        for &r in g {
            for &i in &rows_of_col[r] {
                owner[i] = usize::MAX;
            }
        }
    }
    true
}

/// With the excitation term of (26) judged off, its second derivatives are recomputed (to
/// judge again) only at every `DU_EVERY`-th full evaluation.
const DU_EVERY: u32 = 8;

/// Channel `c` (jet member `c % orders` of excitation `c / orders`) at `t`.
fn channel_value<S: Excitations + ?Sized>(sys: &mut S, t: f64, c: usize, orders: usize) -> f64 {
    if orders == 1 {
        sys.excitation(t, c)
    } else {
        sys.excitation_jet(t, c / orders)[c % orders]
    }
}

/// Shift excitation `i`'s channels (the value only when `orders` is 1, as systems without a
/// jet expect).
fn set_channel_offset<S: Excitations + ?Sized>(
    sys: &mut S,
    i: usize,
    delta: [f64; 3],
    orders: usize,
) {
    if orders == 1 {
        sys.set_excitation_offset(i, delta[0]);
    } else {
        sys.set_excitation_jet_offset(i, delta);
    }
}

/// Increment (17): `δ = max(|y|, ε^¼) √ε`.
#[inline]
fn increment(y: f64) -> f64 {
    y.abs().max(f64::EPSILON.powf(0.25)) * f64::EPSILON.sqrt()
}

/// The difference increment of solver-vector entry `r` (`y_r` its value): (17) for `q` and
/// `v`, and `1 + |λ|` for the multipliers `λ` (`2 n_q ≤ r < 2 n_q + n_c`). `g` is affine in
/// `λ` (`g_v = −M⁻¹ (f − Φ_qᵀ λ)`, forces do not depend on `λ`), so any increment gives the
/// exact column but for rounding, `ε |g| / δ`: with (17)'s `√ε |λ|` that is `√ε |g| / |λ|`,
/// and where the accelerations are huge (a driven coordinate's `ü` ≈ 1.2e8 rad/s² on a
/// 0.2 rad step reconstructed over 0.1 ms) the column `M⁻¹ Φ_qᵀ` of the driven rows drowned
/// in it: those rows' λ entries came out exactly 0, and `α P + G` was singular at every `α`.
fn increment_at(nq: usize, nc: usize, r: usize, y: f64) -> f64 {
    if (2 * nq..2 * nq + nc).contains(&r) {
        1.0 + y.abs()
    } else {
        increment(y)
    }
}

/// The iteration-matrix store: `G`, its factorization, the sparse pattern estimate, the
/// excitation derivatives and the policy.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JacobianStore {
    pub strategy: JacobianStrategy,
    pub policy: ReevalPolicy,
    nq: usize,
    nc: usize,
    ny: usize,
    nu: usize,
    /// `G ≈ ∂g/∂y` behind the current matrix (updates included).
    pub g: DMatrix<f64>,
    /// `α` of the current factorization.
    pub alpha_j: f64,
    /// `∂²g/∂u_c∂y` per excitation channel `c = i · orders + k` (`k`-th member of `u_i`'s
    /// jet; extended strategies). Sized at the first full evaluation, when the system's
    /// `excitation_orders` is known.
    d_u: Vec<DMatrix<f64>>,
    /// The channels' values at which `G` is valid (`orders` per excitation once sized).
    u_j: Vec<f64>,
    /// `G` and `u` of the last full evaluation (to judge the excitation term of (26)).
    g_full: DMatrix<f64>,
    u_full: Vec<f64>,
    has_full: bool,
    /// Whether `d_u` was computed at the last full evaluation (needed to judge the term).
    d_u_valid: bool,
    /// Consecutive judgements "term off", and full evaluations since `d_u` was last computed:
    /// once the term has been judged off twice, `d_u` (n_u more full Jacobians by differences)
    /// is recomputed only every `DU_EVERY`-th full evaluation, to judge again.
    off_in_row: u32,
    fulls_since_du: u32,
    /// Whether updates add the excitation term of (26) (else they are the plain (24)). Off until
    /// the second full evaluation has shown that the term predicts the change of `G` (an
    /// unjudged wrong term can make the corrector accept poor iterates).
    excitation_term: bool,
    /// Decide `excitation_term` from the data at each full evaluation (see `judge_excitation_term`).
    pub auto_excitation_term: bool,
    /// Estimated pattern Ω: rows of each (non-η) column; empty until the first dense pass.
    rows_of_col: Vec<Vec<usize>>,
    /// The columns that are differenced (all but η).
    fd_cols: Vec<usize>,
    pub colouring: Colouring,
    lu: DenseLu,
    tmp: DMatrix<f64>,
    g0u: Vec<f64>,
    g1: Vec<f64>,
    ywork: Vec<f64>,
    deltas: Vec<f64>,
    /// Time the factorizations (thread CPU seconds into `lu_seconds`).
    #[serde(default)]
    pub profile: bool,
    #[serde(default)]
    pub lu_seconds: f64,
}

impl JacobianStore {
    pub fn new(strategy: JacobianStrategy, nq: usize, nc: usize, nu: usize) -> Self {
        let ny = 2 * nq + 2 * nc;
        let ext = strategy.extended();
        JacobianStore {
            strategy,
            policy: ReevalPolicy::default(),
            nq,
            nc,
            ny,
            nu,
            g: DMatrix::zeros(ny, ny),
            alpha_j: f64::NAN,
            d_u: if ext {
                (0..nu).map(|_| DMatrix::zeros(ny, ny)).collect()
            } else {
                Vec::new()
            },
            u_j: vec![0.0; nu],
            g_full: if ext && nu > 0 {
                DMatrix::zeros(ny, ny)
            } else {
                DMatrix::zeros(0, 0)
            },
            u_full: vec![0.0; nu],
            has_full: false,
            d_u_valid: false,
            off_in_row: 0,
            fulls_since_du: 0,
            excitation_term: false,
            auto_excitation_term: true,
            rows_of_col: Vec::new(),
            fd_cols: (0..2 * nq + nc).collect(),
            colouring: Colouring::default(),
            lu: DenseLu::new(ny),
            tmp: if ext && nu > 0 {
                DMatrix::zeros(ny, ny)
            } else {
                DMatrix::zeros(0, 0)
            },
            g0u: vec![0.0; ny],
            g1: vec![0.0; ny],
            ywork: vec![0.0; ny],
            deltas: vec![0.0; ny],
            profile: false,
            lu_seconds: 0.0,
        }
    }

    /// Forget everything (new initial state); the strategy's pattern estimate is rebuilt too.
    pub fn reset(&mut self) {
        self.policy.reset();
        self.has_full = false;
        self.d_u_valid = false;
        self.off_in_row = 0;
        self.fulls_since_du = 0;
        self.excitation_term = false;
        self.alpha_j = f64::NAN;
        self.rows_of_col.clear();
        self.colouring.groups.clear();
        self.lu.invalidate();
    }

    pub fn n_excitations(&self) -> usize {
        self.nu
    }

    /// Jet members per excitation in the channels (1 until sized otherwise).
    pub(crate) fn orders(&self) -> usize {
        self.u_j.len().checked_div(self.nu).unwrap_or(1).max(1)
    }

    /// Size the channel storage for the system's jet members per excitation, when the
    /// integrator allocates: a state saved mid-run then has the layout of a freshly initialized
    /// one (the FMU's structural check of a restored state compares the two).
    pub fn size_channels_for<S: Excitations + ?Sized>(&mut self, sys: &S) {
        if self.strategy.extended() && self.nu > 0 {
            self.size_channels(sys.excitation_orders().clamp(1, 3));
        }
    }

    /// Size the channel storage for `orders` jet members per excitation (once; a system does
    /// not change its orders).
    pub(crate) fn size_channels(&mut self, orders: usize) {
        let n = self.nu * orders;
        if self.u_j.len() == n && self.d_u.len() == n {
            return;
        }
        let ny = self.ny;
        self.u_j = vec![0.0; n];
        self.u_full = vec![0.0; n];
        self.d_u = (0..n).map(|_| DMatrix::zeros(ny, ny)).collect();
        self.has_full = false;
        self.d_u_valid = false;
    }

    /// The excitation channels' second derivatives `∂²g/∂u_c∂y` of the last computation
    /// (`orders` jet members per excitation; empty before the first full evaluation of an
    /// extended strategy), for tests and diagnostics.
    pub fn excitation_second_derivatives(&self) -> (&[DMatrix<f64>], usize) {
        (&self.d_u, self.orders())
    }

    /// The channels' values at which `G` is valid.
    pub fn excitation_channels(&self) -> &[f64] {
        &self.u_j
    }

    fn is_sparse(&self) -> bool {
        matches!(
            self.strategy,
            JacobianStrategy::Sparse | JacobianStrategy::SparseExtended
        )
    }

    fn is_analytic(&self) -> bool {
        matches!(
            self.strategy,
            JacobianStrategy::Analytic | JacobianStrategy::AnalyticExtended
        )
    }

    /// The estimated pattern (rows per column; empty before the first dense pass).
    pub fn pattern(&self) -> &[Vec<usize>] {
        &self.rows_of_col
    }

    /// The differenced columns (all but the η columns).
    pub fn fd_columns(&self) -> &[usize] {
        &self.fd_cols
    }

    /// Refresh the matrix at `(t, y)` with `g0 = g(t, y)` and factor `α P + G`.
    #[allow(clippy::too_many_arguments)]
    pub fn refresh<S: MultibodySystem + ?Sized>(
        &mut self,
        kind: Refresh,
        ggl: &mut Ggl,
        sys: &mut S,
        t: f64,
        y: &[f64],
        g0: &[f64],
        alpha: f64,
        stats: &mut Stats,
    ) -> Result<(), IntegrateError> {
        let before = ggl.evals;
        let result = self.refresh_inner(kind, ggl, sys, t, y, g0);
        stats.f_evals_jacobian += ggl.evals - before;
        result?;
        match kind {
            Refresh::Update => stats.jac_updates += 1,
            _ => stats.jac_evals += 1,
        }
        self.policy.refreshed(kind);
        self.factor(alpha, t, stats)
    }

    fn refresh_inner<S: MultibodySystem + ?Sized>(
        &mut self,
        kind: Refresh,
        ggl: &mut Ggl,
        sys: &mut S,
        t: f64,
        y: &[f64],
        g0: &[f64],
    ) -> Result<(), IntegrateError> {
        // An update needs a previous full evaluation; fall back to one otherwise.
        let kind = if kind == Refresh::Update && self.alpha_j.is_nan() {
            Refresh::Full
        } else {
            kind
        };
        match kind {
            Refresh::Update => {
                let orders = self.orders();
                for c in 0..self.d_u.len() {
                    let u = channel_value(sys, t, c, orders);
                    let du = u - self.u_j[c];
                    if du != 0.0 && self.excitation_term {
                        self.g.zip_apply(&self.d_u[c], |g, d| *g += d * du);
                    }
                    self.u_j[c] = u;
                }
                Ok(())
            }
            Refresh::Full | Refresh::Widen => {
                let dense =
                    kind == Refresh::Widen || (self.is_sparse() && self.rows_of_col.is_empty());
                let mut g = std::mem::replace(&mut self.g, DMatrix::zeros(0, 0));
                let r = self.evaluate_g(dense, ggl, sys, t, y, g0, &mut g);
                self.g = g;
                r?;
                if self.is_sparse() && dense {
                    self.widen_pattern();
                }
                if self.strategy.extended() && self.nu > 0 {
                    self.size_channels(sys.excitation_orders().clamp(1, 3));
                }
                let orders = self.orders();
                for c in 0..self.u_j.len() {
                    self.u_j[c] = channel_value(sys, t, c, orders);
                }
                if self.strategy.extended() && self.nu > 0 {
                    // The second derivatives are taken here, at the new full evaluation, and
                    // the judge predicts the change from the previous one backwards with them
                    // (the same first-order Taylor step). So the first full evaluation, which
                    // has nothing to be judged against, computes none while the term is judged
                    // (a short run that keeps its one matrix never pays for them: a third of
                    // the residuals of the joint pendulum chain's run). Measured on the
                    // engine's 64-link chain (term judged off): computing d_u at every full
                    // evaluation tripled its cost (2 excitations).
                    let needed = !self.auto_excitation_term
                        || (self.has_full
                            && (self.excitation_term
                                || self.off_in_row < 2
                                || self.fulls_since_du + 1 >= DU_EVERY));
                    self.d_u_valid = false;
                    if needed {
                        self.excitation_derivatives(dense, ggl, sys, t, y, g0)?;
                        self.d_u_valid = true;
                        self.fulls_since_du = 0;
                    } else {
                        self.fulls_since_du += 1;
                    }
                    self.judge_excitation_term();
                }
                Ok(())
            }
        }
    }

    /// `G` by the strategy's method (`dense` forces dense differences for FD strategies).
    #[allow(clippy::too_many_arguments)]
    fn evaluate_g<S: MultibodySystem + ?Sized>(
        &mut self,
        dense: bool,
        ggl: &mut Ggl,
        sys: &mut S,
        t: f64,
        y: &[f64],
        g0: &[f64],
        out: &mut DMatrix<f64>,
    ) -> Result<(), IntegrateError> {
        if self.is_analytic() {
            ggl.analytic_jacobian(sys, t, y, out)
        } else if dense || !self.is_sparse() {
            self.fd_dense(ggl, sys, t, y, g0, out)
        } else {
            self.fd_sparse(ggl, sys, t, y, g0, out)
        }
    }

    /// Dense differences (16) with increments (17), η columns from the `Φ` rows.
    fn fd_dense<S: MultibodySystem + ?Sized>(
        &mut self,
        ggl: &mut Ggl,
        sys: &mut S,
        t: f64,
        y: &[f64],
        g0: &[f64],
        out: &mut DMatrix<f64>,
    ) -> Result<(), IntegrateError> {
        self.ywork.copy_from_slice(y);
        for idx in 0..self.fd_cols.len() {
            let r = self.fd_cols[idx];
            let yr = y[r];
            self.ywork[r] = yr + increment_at(self.nq, self.nc, r, yr);
            let d = self.ywork[r] - yr;
            let res = ggl.eval(sys, t, &self.ywork, &mut self.g1);
            self.ywork[r] = yr;
            res?;
            let inv = 1.0 / d;
            for (o, (a, b)) in out.column_mut(r).iter_mut().zip(self.g1.iter().zip(g0)) {
                *o = (a - b) * inv;
            }
        }
        self.fill_eta_columns(out);
        Ok(())
    }

    /// Grouped differences (20) on the estimated pattern.
    fn fd_sparse<S: MultibodySystem + ?Sized>(
        &mut self,
        ggl: &mut Ggl,
        sys: &mut S,
        t: f64,
        y: &[f64],
        g0: &[f64],
        out: &mut DMatrix<f64>,
    ) -> Result<(), IntegrateError> {
        out.fill(0.0);
        self.ywork.copy_from_slice(y);
        for k in 0..self.colouring.groups.len() {
            for &r in &self.colouring.groups[k] {
                self.ywork[r] = y[r] + increment_at(self.nq, self.nc, r, y[r]);
                self.deltas[r] = self.ywork[r] - y[r];
            }
            let res = ggl.eval(sys, t, &self.ywork, &mut self.g1);
            for &r in &self.colouring.groups[k] {
                self.ywork[r] = y[r];
            }
            res?;
            for &r in &self.colouring.groups[k] {
                let inv = 1.0 / self.deltas[r];
                for &i in &self.rows_of_col[r] {
                    out[(i, r)] = (self.g1[i] - g0[i]) * inv;
                }
            }
        }
        self.fill_eta_columns(out);
        Ok(())
    }

    /// `∂g/∂η`: rows of `q̇` get `Φ_qᵀ`, read off the `Φ` rows' `q` block.
    fn fill_eta_columns(&self, out: &mut DMatrix<f64>) {
        let (nq, nc) = (self.nq, self.nc);
        // The η columns and the Φ rows both start at 2 n_q + n_c.
        let (ie, ip) = (2 * nq + nc, 2 * nq + nc);
        for k in 0..nc {
            out.column_mut(ie + k).fill(0.0);
            for j in 0..nq {
                let v = out[(ip + k, j)];
                out[(j, ie + k)] = v;
            }
        }
    }

    /// Ω := Ω ∪ Σ(G) with the freshly computed dense `G`, then recolour.
    fn widen_pattern(&mut self) {
        let ny = self.ny;
        if self.rows_of_col.is_empty() {
            self.rows_of_col = vec![Vec::new(); ny];
        }
        for &r in &self.fd_cols {
            let rows = &mut self.rows_of_col[r];
            for i in 0..ny {
                if self.g[(i, r)] != 0.0 && !rows.contains(&i) {
                    rows.push(i);
                }
            }
            rows.sort_unstable();
        }
        self.colouring = colour_columns(ny, &self.rows_of_col, &self.fd_cols);
    }

    /// Whether the excitation term of (26) earns its place, judged at each full evaluation: it
    /// must predict the change of `G` since the previous full evaluation clearly better than no term
    /// (the plain partitioned update (24)); the prediction uses the second derivatives taken at
    /// this evaluation (`d_u_valid`), read backwards to the previous one. The Taylor step behind (26) assumes `y` stays put
    /// while `u` moves; in absolute coordinates the bodies follow a moving support, the
    /// Jacobian depends on relative positions and the term then predicts a change that does not
    /// happen (measured on the Cartesian pendulum chain: twice the full evaluations of (24)).
    fn judge_excitation_term(&mut self) {
        if self.auto_excitation_term && self.has_full && self.d_u_valid {
            let (mut with, mut without) = (0.0, 0.0);
            for idx in 0..self.g.len() {
                let change = self.g.as_slice()[idx] - self.g_full.as_slice()[idx];
                let mut predicted = 0.0;
                for c in 0..self.d_u.len() {
                    predicted += self.d_u[c].as_slice()[idx] * (self.u_j[c] - self.u_full[c]);
                }
                with += (change - predicted) * (change - predicted);
                without += change * change;
            }
            // Clearly better, not just better: between nearby full evaluations both errors
            // are finite-difference noise.
            self.excitation_term = with < 0.25 * without;
            self.off_in_row = if self.excitation_term {
                0
            } else {
                self.off_in_row + 1
            };
        }
        self.g_full.copy_from(&self.g);
        self.u_full.copy_from_slice(&self.u_j);
        self.has_full = true;
    }

    /// Switch the excitation term of (26) on or off (combine with `auto_excitation_term = false`
    /// to keep it so, for a model known to be excitation-dominated in relative coordinates).
    pub fn set_excitation_term(&mut self, on: bool) {
        self.excitation_term = on;
    }

    /// Whether updates currently include the excitation term of (26).
    pub fn excitation_term_active(&self) -> bool {
        self.strategy.extended() && self.nu > 0 && self.excitation_term
    }

    /// `∂²g/∂u_c∂y ≈ (G(u + δu e_c) − G(u)) / δu` with the same method and increments as `G`
    /// (value-only channels, and analytic `G` whatever the channels), else by the mixed
    /// differences of [`JacobianStore::mixed_differences`].
    #[allow(clippy::too_many_arguments)]
    fn excitation_derivatives<S: MultibodySystem + ?Sized>(
        &mut self,
        dense: bool,
        ggl: &mut Ggl,
        sys: &mut S,
        t: f64,
        y: &[f64],
        g0: &[f64],
    ) -> Result<(), IntegrateError> {
        let orders = self.orders();
        for c in 0..self.d_u.len() {
            let (i, k) = (c / orders, c % orders);
            let u = self.u_j[c];
            let du = f64::EPSILON.powf(0.25) * u.abs().max(1.0);
            let mut delta = [0.0; 3];
            delta[k] = du;
            if orders > 1 && !self.is_analytic() {
                self.mixed_differences(ggl, sys, t, y, g0, c, delta)?;
                continue;
            }
            set_channel_offset(sys, i, delta, orders);
            ggl.invalidate_mass();
            let mut tmp = std::mem::replace(&mut self.tmp, DMatrix::zeros(0, 0));
            let mut g0u = std::mem::take(&mut self.g0u);
            let mut r = if self.is_analytic() {
                Ok(())
            } else {
                ggl.eval(sys, t, y, &mut g0u)
            };
            if r.is_ok() {
                r = self.evaluate_g(dense, ggl, sys, t, y, &g0u, &mut tmp);
            }
            set_channel_offset(sys, i, [0.0; 3], orders);
            ggl.invalidate_mass();
            if r.is_ok() {
                let inv = 1.0 / du;
                for ((d, a), b) in self.d_u[c].iter_mut().zip(tmp.iter()).zip(self.g.iter()) {
                    *d = (a - b) * inv;
                }
            }
            self.tmp = tmp;
            self.g0u = g0u;
            r?;
        }
        Ok(())
    }

    /// `∂²g/∂u_c∂y` by mixed second differences with ε^¼ increments in both `y_r` and the
    /// channel (`delta`, zero but for the channel's member):
    /// `(g(y + h e_r, u + δ) − g(y, u + δ) − g(y + h e_r, u) + g(y, u)) / (h δ)`.
    /// A difference of two difference Jacobians (each with √ε increments) carries rounding
    /// noise ≈ ε|g|/(√ε δ), which on the joint-coordinate chain (|g| ≈ 10, δ ≈ 1e-4) is ten
    /// times the derivative itself (`∂G/∂ü` ≈ 1); with h ≈ δ ≈ ε^¼ it is ≈ 1e-4 relative.
    /// Costs 2 residuals per differenced column, in two passes (offset on, then off) so the
    /// system's offset is switched only twice.
    #[allow(clippy::too_many_arguments)]
    fn mixed_differences<S: MultibodySystem + ?Sized>(
        &mut self,
        ggl: &mut Ggl,
        sys: &mut S,
        t: f64,
        y: &[f64],
        g0: &[f64],
        c: usize,
        delta: [f64; 3],
    ) -> Result<(), IntegrateError> {
        let orders = self.orders();
        let i = c / orders;
        let du: f64 = delta.iter().sum();
        let h = |y: f64| f64::EPSILON.powf(0.25) * y.abs().max(1.0);
        let mut d = std::mem::replace(&mut self.d_u[c], DMatrix::zeros(0, 0));
        let mut g0u = std::mem::take(&mut self.g0u);
        // Pass 1, offset on: column r ← g(y + h e_r, u + δ) − g(y, u + δ).
        set_channel_offset(sys, i, delta, orders);
        ggl.invalidate_mass();
        let mut r = ggl.eval(sys, t, y, &mut g0u);
        self.ywork.copy_from_slice(y);
        for idx in 0..self.fd_cols.len() {
            if r.is_err() {
                break;
            }
            let col = self.fd_cols[idx];
            self.ywork[col] = y[col] + h(y[col]);
            r = ggl.eval(sys, t, &self.ywork, &mut self.g1);
            self.ywork[col] = y[col];
            for (o, (a, b)) in d.column_mut(col).iter_mut().zip(self.g1.iter().zip(&g0u)) {
                *o = a - b;
            }
        }
        set_channel_offset(sys, i, [0.0; 3], orders);
        ggl.invalidate_mass();
        // Pass 2, offset off: subtract g(y + h e_r, u) − g(y, u) and scale.
        for idx in 0..self.fd_cols.len() {
            if r.is_err() {
                break;
            }
            let col = self.fd_cols[idx];
            let yr = y[col];
            self.ywork[col] = yr + h(yr);
            let hh = self.ywork[col] - yr;
            r = ggl.eval(sys, t, &self.ywork, &mut self.g1);
            self.ywork[col] = yr;
            let inv = 1.0 / (hh * du);
            for (o, (a, b)) in d.column_mut(col).iter_mut().zip(self.g1.iter().zip(g0)) {
                *o = (*o - (a - b)) * inv;
            }
        }
        if r.is_ok() {
            self.fill_eta_columns(&mut d);
        }
        self.d_u[c] = d;
        self.g0u = g0u;
        r
    }

    /// Factor `α P + G` (P = identity on the q, v rows).
    pub fn factor(&mut self, alpha: f64, t: f64, stats: &mut Stats) -> Result<(), IntegrateError> {
        let ny = self.ny;
        let buf = self.lu.buffer_mut();
        buf.copy_from_slice(self.g.as_slice());
        for i in 0..2 * self.nq {
            buf[i * ny + i] += alpha;
        }
        stats.lu += 1;
        self.alpha_j = alpha;
        let c0 = if self.profile { thread_cpu_time() } else { 0.0 };
        let r = self.lu.factor_in_place();
        if self.profile {
            self.lu_seconds += thread_cpu_time() - c0;
        }
        r.map_err(|e| IntegrateError::Singular {
            t,
            what: format!(
                "iteration matrix αP + ∂g/∂y singular at elimination step {} (α = {alpha:e})",
                e.0
            ),
        })
    }

    /// Solve with the current factorization.
    pub fn solve(&self, b: &mut [f64]) {
        self.lu.solve(b);
    }

    pub fn has_matrix(&self) -> bool {
        self.lu.is_valid()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use JacobianStrategy as S;

    #[test]
    fn policy_decisions_follow_paper_003() {
        let mut p = ReevalPolicy::default();
        assert_eq!(p.before_solve(100.0, f64::NAN), Some(Reason::Initial));
        p.refreshed(Refresh::Full);
        p.step_accepted();
        // (c) α change: inside DASSL's band nothing, outside a refresh of the strategy's kind.
        assert_eq!(p.before_solve(120.0, 100.0), None);
        assert_eq!(p.before_solve(200.0, 100.0), Some(Reason::AlphaChange));
        assert_eq!(p.choose(Reason::AlphaChange, S::Dense), Refresh::Full);
        assert_eq!(
            p.choose(Reason::AlphaChange, S::SparseExtended),
            Refresh::Update
        );
        // (a) failure with an old full matrix: re-evaluate (extended: track u first).
        assert_eq!(
            p.on_failure(S::Dense),
            FailureAction::Refresh(Refresh::Full)
        );
        assert_eq!(
            p.on_failure(S::DenseExtended),
            FailureAction::Refresh(Refresh::Update)
        );
        // Failure right after a fresh update: full; after a fresh sparse one: widen; after a
        // fresh dense one: the step must shrink.
        p.refreshed(Refresh::Update);
        assert_eq!(
            p.on_failure(S::DenseExtended),
            FailureAction::Refresh(Refresh::Full)
        );
        p.refreshed(Refresh::Full);
        assert_eq!(
            p.on_failure(S::Sparse),
            FailureAction::Refresh(Refresh::Widen)
        );
        assert_eq!(p.on_failure(S::Dense), FailureAction::ReduceStep);
        // (b) slow convergence on a fresh sparse matrix: widen the pattern next step.
        p.converged(Some(0.8));
        p.step_accepted();
        assert_eq!(p.before_solve(100.0, 100.0), Some(Reason::SlowConvergence));
        assert_eq!(p.choose(Reason::SlowConvergence, S::Sparse), Refresh::Widen);
        // Safety nets: update cap and repeated error-test failures.
        for _ in 0..p.max_updates {
            p.refreshed(Refresh::Update);
        }
        assert_eq!(
            p.choose(Reason::AlphaChange, S::DenseExtended),
            Refresh::Full
        );
        p.step_accepted();
        p.on_error_test_failures(2);
        assert_eq!(
            p.before_solve(100.0, 100.0),
            Some(Reason::ErrorTestFailures)
        );
        assert_eq!(
            p.choose(Reason::ErrorTestFailures, S::DenseExtended),
            Refresh::Full
        );
    }

    #[test]
    fn failing_updates_turn_into_full_evaluations_and_recover() {
        let mut p = ReevalPolicy::default();
        p.refreshed(Refresh::Full);
        p.step_accepted();
        // Updates that keep failing: after four, α changes get full evaluations.
        for _ in 0..4 {
            assert_eq!(
                p.choose(Reason::AlphaChange, S::DenseExtended),
                Refresh::Update
            );
            p.refreshed(Refresh::Update);
            assert_eq!(
                p.on_failure(S::DenseExtended),
                FailureAction::Refresh(Refresh::Full)
            );
            p.refreshed(Refresh::Full);
            p.step_accepted();
        }
        assert!(p.update_success < p.min_update_success);
        assert_eq!(
            p.choose(Reason::AlphaChange, S::DenseExtended),
            Refresh::Full
        );
        // Full evaluations restore confidence; successful updates keep it.
        while p.update_success < p.min_update_success {
            p.refreshed(Refresh::Full);
            p.step_accepted();
        }
        assert_eq!(
            p.choose(Reason::AlphaChange, S::DenseExtended),
            Refresh::Update
        );
        p.refreshed(Refresh::Update);
        let before = p.update_success;
        p.step_accepted();
        assert!(p.update_success > before);
    }

    #[test]
    fn colouring_of_a_banded_pattern() {
        // Tridiagonal 6×6: three groups suffice (columns j, j+3).
        let rows: Vec<Vec<usize>> = (0..6)
            .map(|j: usize| (j.saturating_sub(1)..(j + 2).min(6)).collect())
            .collect();
        let cols: Vec<usize> = (0..6).collect();
        let c = colour_columns(6, &rows, &cols);
        assert!(is_consistent_partition(6, &rows, &cols, &c));
        assert_eq!(c.groups.len(), 3);
    }
}
