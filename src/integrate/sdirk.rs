//! Two-stage SDIRK of order 3, `γ = (3+√3)/6` (A-stable), on the index-1 form with position
//! and velocity projections (paper 001, sections 3–6).
//!
//! Tableau (paper 001, Table 1 with eq. (30)): `c = (γ, 1−γ)`, `A = [[γ, 0], [1−2γ, γ]]`,
//! `b = (½, ½)`. The state is `y = (q, v)`, `f(y) = (v, q̈)`. The accelerations of the index-1
//! augmented Lagrangian (1)–(2) are, once its multiplier iteration has converged, exactly the
//! solution of the saddle-point system `[M Φqᵀ; Φq 0][q̈; λ] = [Q; γ]`; we solve that system
//! directly (one factorization, no penalty iteration) and use the penalty only in the iteration
//! matrix, where it plays the paper's role.
//!
//! Each stage is solved by simplified Newton with the decoupled iteration matrix of eqs.
//! (24)–(25), `G = M + Φqᵀ p Φq + γh C + (γh)² K`, `K = −Q_q + ∂(Φqᵀλ)/∂q + ∂(Mq̈)/∂q`,
//! `C = −Q_v` (the term `Φqᵀ p Φ̇q` of (24) needs second constraint derivatives contracted
//! with `v`, which the traits do not give; it is one of the "non-relevant terms" neglected in
//! (21)), formed and factored once per step at its start:
//! `G Δz_v = M̄ r_v − γh K r_q`, `Δz_q = r_q + γh Δz_v`, `M̄ = M + Φqᵀ p Φq`.
//! After the step, positions are projected mass-orthogonally onto `Φ = 0` (eq. (3)) and
//! velocities onto `Φq v + Φt = 0` (eq. (4)); the derivative at the projected state is the
//! next step's `f_0`.
//!
//! Error estimate (the paper runs with a fixed step and has none): the two stages admit no
//! second embedded solution of order 2, so the comparison solution also uses the derivatives at
//! both ends of the step: the trapezoidal rule `ŷ = y_n + h/2 (f_0 + f_end)`, order 2, with
//! `f_end = f(y_{n+1})` at the projected end state. The difference
//! `y_{n+1} − ŷ = h/2 (f_1 + f_2 − f_0 − f_end)` is O(h³) (`Σd = Σdc = 0`, `Σdc² = γ(γ−1)`); as
//! usual for stiff problems (Hairer–Wanner IV.8) it is filtered by `(I − γhJ)⁻¹`, with the same
//! `G`. The end point matters: the stages sit at `c = γ ≈ 0.79` and `1 − γ ≈ 0.21` and the
//! method is not stiffly accurate, so an estimate from `f_0, f_1, f_2` alone is blind to the
//! last fifth of the step. A contact that closes there (a free fall, integrated exactly, takes
//! long steps) went unnoticed: 3e-3 m error on the bouncing balls at any tolerance. `f_end` is
//! the next step's `f_0`, so an accepted step costs no extra evaluation.

#![allow(clippy::needless_range_loop)] // index loops are clearer in dense numerics

use super::dense::{self, Constrained, Lu};
use super::step_control::{weighted_rms_norm, StepController};
use super::{IntegrateError, Integrator, MechState, Method, MultibodySystem, Settings, Stats};
use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

/// `γ = (3 + √3)/6`.
pub const GAMMA: f64 = 0.788_675_134_594_812_9;
const MAX_ITERS: usize = 10;
/// Penalty stiffness relative to the mass in `M̄ = M + Φqᵀ p Φq`.
const PENALTY_RATIO: f64 = 1e4;

/// Two-stage, order-3 SDIRK with projections.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sdirk {
    settings: Settings,
    state: MechState,
    stats: Stats,
    h: f64,
    ctrl: StepController,
    nq: usize,
    nc: usize,
    ws: Constrained,
    /// `f(y_n)` at the current (projected) state.
    f0: Vec<f64>,
    /// Stage derivatives.
    fs: [Vec<f64>; 2],
    z: Vec<f64>,
    ystage: Vec<f64>,
    y0: Vec<f64>,
    y1: Vec<f64>,
    dy: Vec<f64>,
    err: Vec<f64>,
    lam_tmp: Vec<f64>,
    /// `f` and `λ` at the projected end of the step being tried (the next `f_0` if accepted).
    f_end: Vec<f64>,
    lam_end: Vec<f64>,
    // Iteration matrix.
    m: DMatrix<f64>,
    mbar: DMatrix<f64>,
    k: DMatrix<f64>,
    c: DMatrix<f64>,
    tmp: DMatrix<f64>,
    jac: DMatrix<f64>,
    g: Lu,
    rhs: Vec<f64>,
    /// `f0` belongs to the right-hand side before [`Integrator::rhs_changed`].
    rhs_stale: bool,
    initialized: bool,
}

impl Sdirk {
    pub fn new(settings: Settings, n_q: usize, n_c: usize) -> Self {
        let (nq, nc) = (n_q, n_c);
        let n = 2 * nq;
        Sdirk {
            settings: Settings {
                method: Method::Sdirk,
                ..settings
            },
            state: MechState {
                t: 0.0,
                q: vec![0.0; nq],
                v: vec![0.0; nq],
                lambda: vec![0.0; nc],
            },
            stats: Stats::default(),
            h: 0.0,
            ctrl: StepController::elementary(),
            nq,
            nc,
            ws: Constrained::new(nq, nc),
            f0: vec![0.0; n],
            fs: [vec![0.0; n], vec![0.0; n]],
            z: vec![0.0; n],
            ystage: vec![0.0; n],
            y0: vec![0.0; n],
            y1: vec![0.0; n],
            dy: vec![0.0; n],
            err: vec![0.0; n],
            lam_tmp: vec![0.0; nc],
            f_end: vec![0.0; n],
            lam_end: vec![0.0; nc],
            m: DMatrix::zeros(nq, nq),
            mbar: DMatrix::zeros(nq, nq),
            k: DMatrix::zeros(nq, nq),
            c: DMatrix::zeros(nq, nq),
            tmp: DMatrix::zeros(nq, nq),
            jac: DMatrix::zeros(nc, nq),
            g: Lu::new(nq),
            rhs: vec![0.0; nq],
            rhs_stale: false,
            initialized: false,
        }
    }

    fn rhs_eval<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        stage: usize,
    ) -> Result<(), IntegrateError> {
        let n = self.nq;
        self.stats.f_evals += 1;
        let (q, v) = self.ystage.split_at(n);
        let (dq, dv) = self.fs[stage].split_at_mut(n);
        dq.copy_from_slice(v);
        self.ws.accelerations(sys, t, q, v, dv, &mut self.lam_tmp)
    }

    /// `K`, `C`, `M̄` at the step start and `G` for step `h`.
    fn form_matrices<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        h: f64,
    ) -> Result<(), IntegrateError> {
        let (nq, nc) = (self.nq, self.nc);
        let t = self.state.t;
        let (q, v) = (&self.state.q, &self.state.v);
        sys.mass_matrix(t, q, &mut self.m);
        sys.force_jacobians(t, q, v, &mut self.k, &mut self.c);
        self.stats.jac_evals += 1;
        // K = −Q_q + H(λ) + ∂(Mq̈)/∂q, C = −Q_v.
        self.k.neg_mut();
        self.c.neg_mut();
        sys.mass_times_accel_jacobian(t, q, &self.f0[nq..], &mut self.tmp);
        for j in 0..nq {
            for i in 0..nq {
                self.k[(i, j)] += self.tmp[(i, j)];
            }
        }
        self.mbar.copy_from(&self.m);
        if nc > 0 {
            sys.constraint_force_jacobian(t, q, &self.state.lambda, &mut self.tmp);
            sys.constraint_jacobian(t, q, &mut self.jac);
            let mmax = (0..nq).fold(0.0f64, |x, i| x.max(self.m[(i, i)].abs()));
            let mut jmax = 0.0f64;
            for r in 0..nc {
                jmax = jmax.max((0..nq).map(|j| self.jac[(r, j)] * self.jac[(r, j)]).sum());
            }
            let p = PENALTY_RATIO * mmax.max(1e-300) / jmax.max(1e-300);
            for j in 0..nq {
                for i in 0..nq {
                    self.k[(i, j)] += self.tmp[(i, j)];
                    let mut x = 0.0;
                    for r in 0..nc {
                        x += self.jac[(r, i)] * self.jac[(r, j)];
                    }
                    self.mbar[(i, j)] += p * x;
                }
            }
        }
        self.factor_g(h)
    }

    fn factor_g(&mut self, h: f64) -> Result<(), IntegrateError> {
        let gh = GAMMA * h;
        let nq = self.nq;
        for j in 0..nq {
            for i in 0..nq {
                self.g.a[(i, j)] =
                    self.mbar[(i, j)] + gh * self.c[(i, j)] + gh * gh * self.k[(i, j)];
            }
        }
        self.stats.lu += 1;
        self.g.factor().map_err(|k| IntegrateError::Singular {
            t: self.state.t,
            what: format!("SDIRK iteration matrix (24), pivot {k}"),
        })
    }

    /// Solve `(I − γhJ) x = r` in place on `x` (length `2 n_q`) by (24)–(25).
    fn solve_iteration(&mut self, h: f64, x: &mut [f64]) {
        let nq = self.nq;
        let gh = GAMMA * h;
        let (rq, rv) = x.split_at_mut(nq);
        for i in 0..nq {
            let mut s = 0.0;
            for j in 0..nq {
                s += self.mbar[(i, j)] * rv[j] - gh * self.k[(i, j)] * rq[j];
            }
            self.rhs[i] = s;
        }
        self.g.solve(&mut self.rhs);
        rv.copy_from_slice(&self.rhs);
        dense::axpy(rq, gh, rv);
    }

    /// Stage `i` by simplified Newton; on success `fs[i]` holds the stage derivative.
    fn stage<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        i: usize,
        h: f64,
        newton_tol: f64,
    ) -> Result<bool, IntegrateError> {
        let n = 2 * self.nq;
        let t = self.state.t;
        let c = if i == 0 { GAMMA } else { 1.0 - GAMMA };
        let a21 = 1.0 - 2.0 * GAMMA;
        // Predictor (paper 001, step 3): z_i = c_i h f_0.
        for j in 0..n {
            self.z[j] = c * h * self.f0[j];
        }
        let mut prev = f64::INFINITY;
        for _ in 0..MAX_ITERS {
            for j in 0..n {
                self.ystage[j] = self.y0[j] + self.z[j];
            }
            if let Err(e) = self.rhs_eval(sys, t + c * h, i) {
                return if e.is_recoverable() {
                    Ok(false)
                } else {
                    Err(e)
                };
            }
            // r = −(z − h Σ a_ij f_j).
            for j in 0..n {
                let mut s = self.z[j] - h * GAMMA * self.fs[i][j];
                if i == 1 {
                    s -= h * a21 * self.fs[0][j];
                }
                self.dy[j] = -s;
            }
            let mut dy = std::mem::take(&mut self.dy);
            self.solve_iteration(h, &mut dy);
            self.dy = dy;
            self.stats.newton_iters += 1;
            dense::axpy(&mut self.z, 1.0, &self.dy);
            let nrm = weighted_rms_norm(
                &self.dy,
                &self.y0,
                &self.y0,
                self.settings.rtol,
                self.settings.atol,
            );
            if !nrm.is_finite() || (nrm > prev && nrm > newton_tol) {
                return Ok(false);
            }
            prev = nrm;
            if nrm <= newton_tol {
                // Stage derivative from the converged z: h γ f_i = z_i − h Σ_{j<i} a_ij f_j.
                for j in 0..n {
                    let mut s = self.z[j];
                    if i == 1 {
                        s -= h * a21 * self.fs[0][j];
                    }
                    self.fs[i][j] = s / (h * GAMMA);
                }
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Projects `y1` onto the constraints (positions mass-orthogonally, eq. (3); velocities,
    /// eq. (4)) and evaluates `f_end`, `λ_end` there.
    fn project_end<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t1: f64,
    ) -> Result<(), IntegrateError> {
        let n = self.nq;
        let (q, v) = self.y1.split_at_mut(n);
        let tol = dense::projection_tol(&self.settings);
        let it = self.ws.project_positions_mass(sys, t1, q, tol)?;
        self.stats.lu += it as u64;
        self.stats.f_evals += 1;
        self.stats.lu += 1;
        self.ws.project_velocities_and_accelerations(
            sys,
            t1,
            q,
            v,
            &mut self.f_end[n..],
            &mut self.lam_end,
        )?;
        self.f_end[..n].copy_from_slice(v);
        Ok(())
    }
}

impl<S: MultibodySystem + ?Sized> Integrator<S> for Sdirk {
    fn initialize(&mut self, sys: &mut S, x: &MechState) -> Result<(), IntegrateError> {
        dense::validate_settings(&self.settings)?;
        let n = self.nq;
        if x.q.len() != n || x.v.len() != n || sys.n_q() != n || sys.n_c() != self.nc {
            return Err(IntegrateError::Inconsistent {
                t: x.t,
                what: format!(
                    "dimension mismatch: integrator built for n_q = {n}, n_c = {}",
                    self.nc
                ),
            });
        }
        self.stats = Stats::default();
        self.ctrl = StepController::elementary();
        self.state.t = x.t;
        self.state.q.copy_from_slice(&x.q);
        self.state.v.copy_from_slice(&x.v);
        self.f0[..n].copy_from_slice(&x.v);
        self.stats.f_evals += 1;
        self.ws.accelerations(
            sys,
            x.t,
            &x.q,
            &x.v,
            &mut self.f0[n..],
            &mut self.state.lambda,
        )?;
        self.y0[..n].copy_from_slice(&x.q);
        self.y0[n..].copy_from_slice(&x.v);
        self.h = dense::first_step(&self.settings, x.t, &self.y0, &self.f0, 2);
        self.rhs_stale = false;
        self.initialized = true;
        Ok(())
    }

    fn step(&mut self, sys: &mut S, t_limit: f64) -> Result<f64, IntegrateError> {
        if !self.initialized {
            return Err(IntegrateError::Settings("step before initialize".into()));
        }
        let n = self.nq;
        let t = self.state.t;
        let fixed = self.settings.fixed_step.is_some();
        // Newton stopping: far below the error test (fixed step: near round-off).
        let newton_tol = if fixed {
            1e-10 / (self.settings.rtol + self.settings.atol)
        } else {
            0.01
        };
        self.y0[..n].copy_from_slice(&self.state.q);
        self.y0[n..].copy_from_slice(&self.state.v);
        if self.rhs_stale {
            // New inputs: f_0 (stage predictor, error estimate) again.
            self.stats.f_evals += 1;
            self.ws.accelerations(
                sys,
                t,
                &self.state.q,
                &self.state.v,
                &mut self.f0[n..],
                &mut self.state.lambda,
            )?;
            self.f0[..n].copy_from_slice(&self.state.v);
            self.rhs_stale = false;
        }
        let mut h_try = self.h;
        let mut failures = 0u32;
        let mut formed_for = f64::NAN;
        loop {
            let p = dense::plan_step(&self.settings, t, h_try, t_limit)?;
            let h = p.h;
            if h < dense::h_min(t) {
                return Err(IntegrateError::StepTooSmall {
                    t,
                    h,
                    h_min: dense::h_min(t),
                    reason: "SDIRK error test / convergence".into(),
                });
            }
            let t1 = dense::advance(t, p, t_limit);
            if formed_for.is_nan() {
                self.form_matrices(sys, h)?;
            } else if formed_for != h {
                self.factor_g(h)?;
            }
            formed_for = h;
            let ok = self.stage(sys, 0, h, newton_tol)? && self.stage(sys, 1, h, newton_tol)?;
            if !ok {
                self.stats.convergence_failures += 1;
                self.stats.rejected_steps += 1;
                failures += 1;
                if fixed || failures > 10 {
                    return Err(IntegrateError::NewtonFailed { t, failures });
                }
                h_try = 0.25 * h;
                continue;
            }
            for j in 0..2 * n {
                self.y1[j] = self.y0[j] + 0.5 * h * (self.fs[0][j] + self.fs[1][j]);
            }
            match self.project_end(sys, t1) {
                Ok(()) => {}
                Err(e) if e.is_recoverable() && !fixed => {
                    self.stats.rejected_steps += 1;
                    h_try = 0.25 * h;
                    continue;
                }
                Err(e) => return Err(e),
            }
            let mut err = 0.0;
            if !fixed {
                // y_{n+1} − trapezoidal rule through both ends (module doc).
                for j in 0..2 * n {
                    self.err[j] =
                        0.5 * h * (self.fs[0][j] + self.fs[1][j] - self.f0[j] - self.f_end[j]);
                }
                let mut e = std::mem::take(&mut self.err);
                self.solve_iteration(h, &mut e);
                self.err = e;
                err = weighted_rms_norm(
                    &self.err,
                    &self.y0,
                    &self.y1,
                    self.settings.rtol,
                    self.settings.atol,
                );
                if err.is_nan() || err > 1.0 {
                    self.stats.rejected_steps += 1;
                    self.stats.error_test_failures += 1;
                    h_try = if err.is_finite() {
                        h * self.ctrl.factor(err, 2, false)
                    } else {
                        0.25 * h
                    };
                    continue;
                }
            }
            std::mem::swap(&mut self.f0, &mut self.f_end);
            std::mem::swap(&mut self.state.lambda, &mut self.lam_end);
            self.state.q.copy_from_slice(&self.y1[..n]);
            self.state.v.copy_from_slice(&self.y1[n..]);
            self.state.t = t1;
            self.stats.steps += 1;
            if fixed {
                self.h = h_try;
            } else {
                let fac = self.ctrl.factor(err, 2, true);
                self.ctrl.accept(err);
                self.h = if p.clipped {
                    (fac * h).max(h_try.min(fac * h_try))
                } else {
                    fac * h
                };
            }
            sys.accept_step(t1, &self.state.q, &self.state.v, Some(&self.state.lambda));
            return Ok(t1);
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
        Method::Sdirk
    }
    fn set_settings(&mut self, settings: Settings) {
        self.settings = Settings {
            method: Method::Sdirk,
            ..settings
        };
    }
    fn rhs_changed(&mut self) {
        self.rhs_stale = true;
    }
    /// From the projected state `x`: the step size and controller stay (the iteration matrix
    /// is formed at every step's start anyway), `f_0` is evaluated at `x` before the next step
    /// (as after [`Integrator::rhs_changed`]).
    fn restart(&mut self, sys: &mut S, x: &MechState) -> Result<bool, IntegrateError> {
        if !self.initialized || !self.state.assign_same_size(x) {
            return self.initialize(sys, x).map(|()| false);
        }
        self.rhs_stale = true;
        Ok(true)
    }
}
