//! Half-implicit symplectic Euler for the index-3 DAE (paper 004, section 2.2), in the
//! generalized coordinates of [`Mechanical`](super::system::Mechanical):
//!
//! ```text
//!   v_{n+1} = v_n + h a_n,   q_{n+1} = q_n + h v_{n+1},   Φ(q_{n+1}, t_{n+1}) = 0,
//!   M_n a_n + Φq_nᵀ λ_n = f(t_n, q_n, v_n)
//! ```
//!
//! Eliminating `a_n` gives eq. (5): `M_n q_{n+1} + Φq_nᵀ λ̂ + b_n = 0`, `Φ(q_{n+1}) = 0` with
//! `λ̂ = h² λ_n`, `b_n = −(M_n q_n + h M_n v_n + h² f_n)` (7a). It is solved by the quasi-Newton
//! iteration with the symmetric matrix (12) `N = [M_n Φq_nᵀ; Φq_n 0]`, formed and factored once
//! per step. Forces (friction, contact included) are explicit: one force evaluation per step.
//! Positions satisfy the constraints at every step; velocities are the difference quotient and
//! satisfy the velocity constraints to O(h) (the method as published, no projection).
//!
//! Variable steps (paper 004 uses a fixed step): step doubling. Each attempt takes one step of
//! `h` and two of `h/2` from the same start (the first shares `N` with the full step); their
//! difference estimates the local error of the two-half-step result, which is kept. The method
//! is first order, so the estimate is O(h²) and the controller uses order 1.

#![allow(clippy::needless_range_loop)] // index loops are clearer in dense numerics

use super::dense::{self, Lu};
use super::sparse::{SaddleSolver, SparseSaddle};
use super::step_control::{error_weight, weighted_rms_norm, StepController};
use super::{IntegrateError, Integrator, MechState, Method, MultibodySystem, Settings, Stats};
use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

/// Largest number of quasi-Newton iterations per step before the step is reduced.
const MAX_ITERS: usize = 25;

/// The matrix (12) and the blocks the residual needs: dense for small models, sparse (on the
/// system's reported structure) for large ones.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Saddle {
    /// Not chosen yet (sized at `initialize`, when the system is known).
    Unset,
    Dense {
        m: DMatrix<f64>,
        jac: DMatrix<f64>,
        n: Lu,
    },
    Sparse(Box<SparseSaddle>),
}

/// One half-implicit step's workspace.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Core {
    nq: usize,
    nc: usize,
    la: Saddle,
    f: Vec<f64>,
    phi: Vec<f64>,
    rhs: Vec<f64>,
    /// `q1 − q0 − h v0` (sparse residual product).
    tmp: Vec<f64>,
    /// The increment `q1 − q0` the iteration solves for (see [`Core::solve`]).
    #[serde(default)]
    dq: Vec<f64>,
    /// Whether `la` and `f` belong to the start of the current attempt.
    start_ready: bool,
}

impl Core {
    fn new(nq: usize, nc: usize) -> Self {
        Core {
            nq,
            nc,
            la: Saddle::Unset,
            f: vec![0.0; nq],
            phi: vec![0.0; nc],
            rhs: vec![0.0; nq + nc],
            tmp: vec![0.0; nq],
            dq: vec![0.0; nq],
            start_ready: false,
        }
    }

    /// Choose dense or sparse storage for this system (kept if already chosen alike).
    fn configure<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        mode: SaddleSolver,
    ) -> Result<(), IntegrateError> {
        let (nq, nc) = (self.nq, self.nc);
        let sparse = mode.use_sparse(nq + nc, sys.sparse_structure().is_some());
        match (&self.la, sparse) {
            (Saddle::Dense { .. }, false) | (Saddle::Sparse(_), true) => {}
            (_, false) => {
                self.la = Saddle::Dense {
                    m: DMatrix::zeros(nq, nq),
                    jac: DMatrix::zeros(nc, nq),
                    n: Lu::new(nq + nc),
                }
            }
            (_, true) => {
                let s = sys.sparse_structure().expect("checked above");
                let ss = SparseSaddle::for_system(s, nq, nc).map_err(|e| {
                    IntegrateError::Settings(format!("sparse saddle-point matrix: {e}"))
                })?;
                self.la = Saddle::Sparse(Box::new(ss));
            }
        }
        self.start_ready = false;
        Ok(())
    }

    fn is_sparse(&self) -> bool {
        matches!(self.la, Saddle::Sparse(_))
    }

    /// Whether (12) is factored at the start of the current attempt. The sparse factors are
    /// not serialized, so a restored state refactors.
    fn ready(&self) -> bool {
        self.start_ready
            && match &self.la {
                Saddle::Sparse(s) => s.is_factored(),
                _ => true,
            }
    }

    /// Evaluate `M_n`, `f_n`, `Φq_n` at the step start and factor (12).
    fn prepare<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        stats: &mut Stats,
        t: f64,
        q: &[f64],
        v: &[f64],
    ) -> Result<(), IntegrateError> {
        let (nq, nc) = (self.nq, self.nc);
        sys.forces(t, q, v, &mut self.f);
        stats.f_evals += 1;
        if !dense::all_finite(&self.f) {
            return Err(IntegrateError::NonFinite {
                t,
                what: "forces".into(),
            });
        }
        stats.lu += 1;
        let singular = |what: String| IntegrateError::Singular {
            t,
            what: format!("matrix (12) [M Φqᵀ; Φq 0], {what}"),
        };
        match &mut self.la {
            Saddle::Unset => {
                return Err(IntegrateError::Settings(
                    "half-implicit workspace used before initialize".into(),
                ))
            }
            Saddle::Dense { m, jac, n } => {
                sys.mass_matrix(t, q, m);
                if nc > 0 {
                    sys.constraint_jacobian(t, q, jac);
                }
                let a = &mut n.a;
                a.fill(0.0);
                a.view_mut((0, 0), (nq, nq)).copy_from(m);
                for i in 0..nc {
                    for j in 0..nq {
                        a[(nq + i, j)] = jac[(i, j)];
                        a[(j, nq + i)] = jac[(i, j)];
                    }
                }
                n.factor().map_err(|k| singular(format!("pivot {k}")))?;
            }
            Saddle::Sparse(s) => {
                let st = sys.sparse_structure().ok_or_else(|| {
                    IntegrateError::Settings("system no longer reports its sparse structure".into())
                })?;
                s.evaluate(st, t, q);
                s.factor().map_err(|e| singular(e.to_string()))?;
            }
        }
        self.start_ready = true;
        Ok(())
    }

    /// Accelerations and multipliers at the step start from the factored (12): the matrix
    /// of the index-1 system `[M Φqᵀ; Φq 0][a; λ] = [f; γ]` (sparse path only; `prepare`
    /// must have run at `(t, q, v)`).
    fn accelerations<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        q: &[f64],
        v: &[f64],
        a: &mut [f64],
        lambda: &mut [f64],
    ) -> Result<(), IntegrateError> {
        let nq = self.nq;
        let Saddle::Sparse(s) = &mut self.la else {
            unreachable!("dense start uses dense::Constrained");
        };
        self.rhs[..nq].copy_from_slice(&self.f);
        if self.nc > 0 {
            sys.acceleration_rhs(t, q, v, &mut self.rhs[nq..]);
        }
        s.solve(&mut self.rhs);
        if !dense::all_finite(&self.rhs) {
            return Err(IntegrateError::NonFinite {
                t,
                what: "accelerations".into(),
            });
        }
        a.copy_from_slice(&self.rhs[..nq]);
        lambda.copy_from_slice(&self.rhs[nq..]);
        Ok(())
    }

    /// Solve (5) for `q1` and `λ̂` with the factored (12); `v1`, `lambda` (= λ̂/h²) follow.
    /// `lam_hat` holds the initial guess on entry. `tol` bounds the last correction (∞-norm).
    #[allow(clippy::too_many_arguments)]
    fn solve<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        stats: &mut Stats,
        t1: f64,
        h: f64,
        q0: &[f64],
        v0: &[f64],
        q1: &mut [f64],
        v1: &mut [f64],
        lam_hat: &mut [f64],
        (tol, phi_tol): (f64, f64),
    ) -> Result<bool, IntegrateError> {
        let (nq, nc) = (self.nq, self.nc);
        // The unknown is the increment `Δq = q1 − q0`, and `v1 = Δq / h`: formed from `q1`,
        // `(q1 − q0) / h` carried the rounding of `q` divided by `h` (1e-17 m / 1e-12 s), and the
        // step-doubling estimate of `v` then grew as the step shrank. In a 1e9 N/m contact at
        // atol 1e-9 the step collapsed to 1.8e-12 s and the call ran out of its budget.
        let dq = &mut self.dq;
        dq.resize(nq, 0.0);
        // Predictor: the unconstrained explicit step keeps the first residual small.
        for i in 0..nq {
            dq[i] = h * v0[i];
            q1[i] = q0[i] + dq[i];
        }
        let mut last_dq = f64::INFINITY;
        for _ in 0..MAX_ITERS {
            // e1 = M (q1 − q0 − h v0) + Φqᵀ λ̂ − h² f, e3 = Φ(q1, t1).
            match &self.la {
                Saddle::Dense { m, jac, .. } => {
                    for i in 0..nq {
                        let mut s = -h * h * self.f[i];
                        for j in 0..nq {
                            s += m[(i, j)] * (dq[j] - h * v0[j]);
                        }
                        for k in 0..nc {
                            s += jac[(k, i)] * lam_hat[k];
                        }
                        self.rhs[i] = -s;
                    }
                }
                Saddle::Sparse(s) => {
                    for i in 0..nq {
                        self.tmp[i] = dq[i] - h * v0[i];
                        self.rhs[i] = -h * h * self.f[i];
                    }
                    let e1 = &mut self.rhs[..nq];
                    s.m_mul_add(&self.tmp, e1);
                    s.jt_mul_add(lam_hat, e1);
                    for x in e1.iter_mut() {
                        *x = -*x;
                    }
                }
                Saddle::Unset => unreachable!("prepare ran"),
            }
            if nc > 0 {
                sys.constraints(t1, q1, &mut self.phi);
            }
            // Converged: the last correction was small and the constraints hold to `phi_tol`
            // (e1 is linear in the unknowns, so it vanishes after any full correction).
            if last_dq <= tol && dense::inf_norm(&self.phi) <= phi_tol {
                for i in 0..nq {
                    v1[i] = dq[i] / h;
                }
                return Ok(true);
            }
            for k in 0..nc {
                self.rhs[nq + k] = -self.phi[k];
            }
            match &mut self.la {
                Saddle::Dense { n, .. } => n.solve(&mut self.rhs),
                Saddle::Sparse(s) => s.solve(&mut self.rhs),
                Saddle::Unset => unreachable!("prepare ran"),
            }
            stats.newton_iters += 1;
            if !dense::all_finite(&self.rhs) {
                return Ok(false);
            }
            dense::axpy(dq, 1.0, &self.rhs[..nq]);
            for i in 0..nq {
                q1[i] = q0[i] + dq[i];
            }
            dense::axpy(lam_hat, 1.0, &self.rhs[nq..]);
            last_dq = dense::inf_norm(&self.rhs[..nq]);
        }
        Ok(false)
    }
}

/// Paper 004's half-implicit method with step-doubling error control.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HalfImplicit {
    settings: Settings,
    state: MechState,
    stats: Stats,
    h: f64,
    ctrl: StepController,
    /// Matrix (12) at the step start (kept across rejected attempts) and at the midpoint.
    core: Core,
    mid: Core,
    q_full: Vec<f64>,
    v_full: Vec<f64>,
    q_mid: Vec<f64>,
    v_mid: Vec<f64>,
    q_end: Vec<f64>,
    v_end: Vec<f64>,
    lam_full: Vec<f64>,
    lam_a: Vec<f64>,
    lam_b: Vec<f64>,
    y_old: Vec<f64>,
    y_new: Vec<f64>,
    err: Vec<f64>,
    /// Dense or sparse saddle-point factorization.
    saddle_solver: SaddleSolver,
    initialized: bool,
}

impl HalfImplicit {
    pub fn new(settings: Settings, n_q: usize, n_c: usize) -> Self {
        HalfImplicit {
            settings: Settings {
                method: Method::HalfImplicit,
                ..settings
            },
            state: MechState {
                t: 0.0,
                q: vec![0.0; n_q],
                v: vec![0.0; n_q],
                lambda: vec![0.0; n_c],
            },
            stats: Stats::default(),
            h: 0.0,
            ctrl: StepController::elementary(),
            core: Core::new(n_q, n_c),
            mid: Core::new(n_q, n_c),
            q_full: vec![0.0; n_q],
            v_full: vec![0.0; n_q],
            q_mid: vec![0.0; n_q],
            v_mid: vec![0.0; n_q],
            q_end: vec![0.0; n_q],
            v_end: vec![0.0; n_q],
            lam_full: vec![0.0; n_c],
            lam_a: vec![0.0; n_c],
            lam_b: vec![0.0; n_c],
            y_old: vec![0.0; 2 * n_q],
            y_new: vec![0.0; 2 * n_q],
            err: vec![0.0; 2 * n_q],
            saddle_solver: SaddleSolver::Auto,
            initialized: false,
        }
    }

    /// Choose the saddle-point factorization (takes effect at the next `initialize`). The
    /// default picks the sparse LU for large systems that report their structure.
    pub fn set_saddle_solver(&mut self, solver: SaddleSolver) {
        self.saddle_solver = solver;
    }

    /// Whether the sparse path is in use (after `initialize`).
    pub fn uses_sparse(&self) -> bool {
        self.core.is_sparse()
    }

    /// Bounds on the last correction and on the constraint residual at convergence.
    fn iteration_tol(&self, q: &[f64]) -> (f64, f64) {
        let phi_tol = dense::projection_tol(&self.settings);
        if self.settings.fixed_step.is_some() {
            (1e-12 * dense::inf_norm(q).max(1.0), phi_tol)
        } else {
            // Far below the local error the step is accepted with.
            (
                1e-3 * (self.settings.atol + self.settings.rtol * dense::inf_norm(q)),
                phi_tol,
            )
        }
    }

    /// One step of `h` from the current state into `q_full`, `v_full`, `lam_full` (λ̂).
    fn single<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        h: f64,
        t1: f64,
    ) -> Result<bool, IntegrateError> {
        let tol = self.iteration_tol(&self.state.q);
        for k in 0..self.lam_full.len() {
            self.lam_full[k] = h * h * self.state.lambda[k];
        }
        self.core.solve(
            sys,
            &mut self.stats,
            t1,
            h,
            &self.state.q,
            &self.state.v,
            &mut self.q_full,
            &mut self.v_full,
            &mut self.lam_full,
            tol,
        )
    }
}

impl<S: MultibodySystem + ?Sized> Integrator<S> for HalfImplicit {
    fn initialize(&mut self, sys: &mut S, x: &MechState) -> Result<(), IntegrateError> {
        dense::validate_settings(&self.settings)?;
        let n = self.core.nq;
        if x.q.len() != n || x.v.len() != n || sys.n_q() != n || sys.n_c() != self.core.nc {
            return Err(IntegrateError::Inconsistent {
                t: x.t,
                what: format!(
                    "dimension mismatch: integrator built for n_q = {n}, n_c = {}",
                    self.core.nc
                ),
            });
        }
        self.state.t = x.t;
        self.state.q.copy_from_slice(&x.q);
        self.state.v.copy_from_slice(&x.v);
        self.stats = Stats::default();
        self.ctrl = StepController::elementary();
        self.core.configure(sys, self.saddle_solver)?;
        self.mid.configure(sys, self.saddle_solver)?;
        // Multipliers and accelerations at the start (initial guess, first step size).
        let mut a = vec![0.0; n];
        if self.core.is_sparse() {
            // The index-1 matrix is (12) at the start: factor it once for both.
            self.core.prepare(sys, &mut self.stats, x.t, &x.q, &x.v)?;
            self.core
                .accelerations(sys, x.t, &x.q, &x.v, &mut a, &mut self.state.lambda)?;
        } else {
            let mut ws = dense::Constrained::new(n, self.core.nc);
            ws.accelerations(sys, x.t, &x.q, &x.v, &mut a, &mut self.state.lambda)?;
            self.stats.f_evals += 1;
        }
        self.y_old[..n].copy_from_slice(&x.q);
        self.y_old[n..].copy_from_slice(&x.v);
        self.y_new[..n].copy_from_slice(&x.v);
        self.y_new[n..].copy_from_slice(&a);
        self.h = dense::first_step(&self.settings, x.t, &self.y_old, &self.y_new, 1);
        // The sparse start factorization is that of the first step (same t, q, v).
        self.core.start_ready = self.core.is_sparse();
        self.initialized = true;
        Ok(())
    }

    fn step(&mut self, sys: &mut S, t_limit: f64) -> Result<f64, IntegrateError> {
        if !self.initialized {
            return Err(IntegrateError::Settings("step before initialize".into()));
        }
        let n = self.core.nq;
        let t = self.state.t;
        let fixed = self.settings.fixed_step.is_some();
        let mut h_try = self.h;
        let mut failures = 0u32;
        // The component that failed the last error test: (index in (q, v), |value|, estimate,
        // weight), for the message if the step size collapses.
        let mut worst: Option<(usize, f64, f64, f64)> = None;
        loop {
            let mut p = dense::plan_step(&self.settings, t, h_try, t_limit)?;
            // A step that would leave less than a hundredth of itself before the limit takes
            // the rest too: this index-3 method's velocities come from position differences
            // over the step, so their error grows as 1/h, and a remainder step of 2.3e-9 s
            // (the spherical chain in joint coordinates, 2.3e-9 s before a communication
            // point) failed its error test at every smaller step down to the minimum.
            let rest = t_limit - t;
            let cap = self.settings.max_step;
            let sliver = rest - p.h < 0.01 * p.h;
            let within_cap = cap <= 0.0 || rest <= cap;
            if !p.clipped && !fixed && sliver && within_cap {
                p = dense::Planned {
                    h: rest,
                    clipped: true,
                };
            }
            let h = p.h;
            if h < dense::h_min(t) {
                return Err(IntegrateError::StepTooSmall {
                    t,
                    h,
                    h_min: dense::h_min(t),
                    reason: stall_reason(worst, n),
                });
            }
            let t1 = dense::advance(t, p, t_limit);
            if !self.core.ready() {
                self.core
                    .prepare(sys, &mut self.stats, t, &self.state.q, &self.state.v)?;
            }
            if fixed {
                if !self.single(sys, h, t1)? {
                    return Err(IntegrateError::NewtonFailed { t, failures: 1 });
                }
                self.q_end.copy_from_slice(&self.q_full);
                self.v_end.copy_from_slice(&self.v_full);
                self.lam_a.copy_from_slice(&self.lam_full);
                self.finish(sys, t1, h, h, 0.0, p.clipped, h_try);
                return Ok(t1);
            }
            // Full step, then two half steps (the first reuses N).
            let half = 0.5 * h;
            let tm = t + half;
            let mut ok = self.single(sys, h, t1)?;
            if ok {
                let tol = self.iteration_tol(&self.state.q);
                for k in 0..self.lam_a.len() {
                    self.lam_a[k] = half * half * self.state.lambda[k];
                }
                ok = self.core.solve(
                    sys,
                    &mut self.stats,
                    tm,
                    half,
                    &self.state.q,
                    &self.state.v,
                    &mut self.q_mid,
                    &mut self.v_mid,
                    &mut self.lam_a,
                    tol,
                )?;
            }
            if ok {
                let tol = self.iteration_tol(&self.q_mid);
                self.lam_b.copy_from_slice(&self.lam_a);
                self.mid
                    .prepare(sys, &mut self.stats, tm, &self.q_mid, &self.v_mid)?;
                ok = self.mid.solve(
                    sys,
                    &mut self.stats,
                    t1,
                    half,
                    &self.q_mid,
                    &self.v_mid,
                    &mut self.q_end,
                    &mut self.v_end,
                    &mut self.lam_b,
                    tol,
                )?;
            }
            if !ok {
                self.stats.convergence_failures += 1;
                self.stats.rejected_steps += 1;
                failures += 1;
                if failures > 10 {
                    return Err(IntegrateError::NewtonFailed { t, failures });
                }
                h_try = 0.25 * h;
                continue;
            }
            for i in 0..n {
                self.err[i] = self.q_end[i] - self.q_full[i];
                self.err[n + i] = self.v_end[i] - self.v_full[i];
                self.y_old[i] = self.state.q[i];
                self.y_old[n + i] = self.state.v[i];
                self.y_new[i] = self.q_end[i];
                self.y_new[n + i] = self.v_end[i];
            }
            let err = weighted_rms_norm(
                &self.err,
                &self.y_old,
                &self.y_new,
                self.settings.rtol,
                self.settings.atol,
            );
            if err <= 1.0 {
                self.finish(sys, t1, h, half, err, p.clipped, h_try);
                return Ok(t1);
            }
            worst = worst_component(&self.err, &self.y_old, &self.y_new, &self.settings);
            self.stats.rejected_steps += 1;
            self.stats.error_test_failures += 1;
            h_try = if err.is_finite() {
                h * self.ctrl.factor(err, 1, false)
            } else {
                0.25 * h
            };
        }
    }

    fn state(&self) -> &MechState {
        &self.state
    }
    fn next_step_size(&self) -> f64 {
        self.h
    }
    fn stats(&self) -> &Stats {
        &self.stats
    }
    fn method(&self) -> Method {
        Method::HalfImplicit
    }
    fn set_settings(&mut self, settings: Settings) {
        self.settings = Settings {
            method: Method::HalfImplicit,
            ..settings
        };
    }
    /// From the projected state `x`: the step size and controller stay; the start matrix (12)
    /// is evaluated at `x` (forces are evaluated at every step's start anyway).
    fn restart(&mut self, sys: &mut S, x: &MechState) -> Result<bool, IntegrateError> {
        if !self.initialized || !self.state.assign_same_size(x) {
            return self.initialize(sys, x).map(|()| false);
        }
        self.core.start_ready = false;
        Ok(true)
    }
}

impl HalfImplicit {
    /// Commit the accepted result in `q_end`, `v_end`, `lam_a` (λ̂ of the last sub-step `hs`).
    #[allow(clippy::too_many_arguments)]
    fn finish<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t1: f64,
        h: f64,
        hs: f64,
        err: f64,
        clipped: bool,
        h_try: f64,
    ) {
        self.state.t = t1;
        self.state.q.copy_from_slice(&self.q_end);
        self.state.v.copy_from_slice(&self.v_end);
        // λ_n = λ̂ / h² belongs to the start of the last sub-step (stale by one sub-step).
        let lam = if self.settings.fixed_step.is_some() {
            &self.lam_a
        } else {
            &self.lam_b
        };
        for k in 0..self.state.lambda.len() {
            self.state.lambda[k] = lam[k] / (hs * hs);
        }
        self.core.start_ready = false;
        self.stats.steps += 1;
        if self.settings.fixed_step.is_none() {
            let fac = self.ctrl.factor(err, 1, true);
            self.ctrl.accept(err);
            self.h = if clipped {
                (fac * h).max(h_try.min(fac * h_try))
            } else {
                fac * h
            };
        } else {
            self.h = h_try;
        }
        sys.accept_step(t1, &self.state.q, &self.state.v, Some(&self.state.lambda));
    }
}

/// The component with the largest weighted error of a failed test: (index in `(q, v)`,
/// `max(|y_old|, |y_new|)`, estimate, weight).
fn worst_component(
    err: &[f64],
    y_old: &[f64],
    y_new: &[f64],
    s: &Settings,
) -> Option<(usize, f64, f64, f64)> {
    let mut worst: Option<(usize, f64, f64, f64)> = None;
    let mut largest = -1.0;
    for i in 0..err.len() {
        let y = y_old[i].abs().max(y_new[i].abs());
        let w = error_weight(y_old[i], y_new[i], s.rtol, s.atol);
        let r = (err[i] / w).abs();
        if r > largest {
            largest = r;
            worst = Some((i, y, err[i].abs(), w));
        }
    }
    worst
}

/// Why the step size collapsed, from the component that failed the last error test. Where a
/// velocity's estimate is a large part of the velocity itself, the step size cannot fix it:
/// the velocities are difference quotients half a step behind, and from rest under an
/// acceleration `a` the estimate is about `a h / 4` against a velocity of about `a h`
/// (docs/integrators.md, the half-implicit method).
fn stall_reason(worst: Option<(usize, f64, f64, f64)>, n: usize) -> String {
    let Some((i, y, est, w)) = worst else {
        return "step doubling".into();
    };
    if i < n {
        return format!(
            "step doubling; the last failed test: estimate {est:.1e} against a weight {w:.1e} \
             in position coordinate {i} (|q| = {y:.3e})"
        );
    }
    let k = i - n;
    let lag = if est > 0.1 * y {
        "; that estimate is a large part of the velocity itself, as where a velocity starts \
         from zero under a large acceleration: this first-order method's velocities are \
         difference quotients half a step behind, and only solver.atol can accept them there"
    } else {
        ""
    };
    format!(
        "step doubling; the last failed test: estimate {est:.1e} against a weight {w:.1e} in \
         the velocity of coordinate {k} (|v| = {y:.3e}){lag}"
    )
}
