//! Structural integrators on the index-3 augmented Lagrangian form with velocity and
//! acceleration projections (paper 001's baseline, Cuadrado et al.): the trapezoidal rule,
//! Newmark, HHT-α and generalized-α as one family.
//!
//! Newmark formulas, `q̂ = q_n + h v_n + h²(½−β) a_n`, `v̂ = v_n + (1−γ) h a_n`:
//! `q_{n+1} = q̂ + βh² a_{n+1}`, `v_{n+1} = v̂ + γh a_{n+1}`, so `q_{n+1}` is the only unknown.
//! `a` is the acceleration-like variable of the generalized-α method in the form of Arnold &
//! Brüls (2007), `(1−α_m) a_{n+1} + α_m a_n = (1−α_f) q̈_{n+1} + α_f q̈_n`, and the true
//! accelerations `q̈_{n+1}` satisfy the equations of motion at `t_{n+1}`:
//!
//! ```text
//!   (1−α_m) M a_{n+1} + M (α_m a_n − α_f q̈_n) + (1−α_f) (Φqᵀλ − Q)_{n+1} = 0,
//!   λ_{n+1} = λ* + p Φ(q_{n+1}),   λ* ← λ* + p Φ(q_{n+1}) after every Newton iteration,
//! ```
//!
//! (this is HHT for α_m = 0 and the plain Newmark scheme for α_m = α_f = 0, where `a = q̈`.)
//! Using the consistent `q̈` in the history term matters: with the Chung–Hulbert weighting
//! and projected accelerations, HHT dropped to first order on the constrained chain.
//!
//! (index-3 augmented Lagrangian with penalty `p`, one per constraint row: at convergence `Φ = 0`
//! exactly and `λ* = λ`). `M` is `M(q_{n+1})` in both inertia terms (the equations hold at
//! `t_{n+1}`). The Newton matrix, multiplied by `βh²/(1−α_m)`, is
//! `T = M + c[γh C + βh²(K + Φqᵀ P Φq)]`, `c = (1−α_f)/(1−α_m)`, `P = diag(p)`,
//! `K = −Q_q + ∂(Φqᵀλ)/∂q + ∂(M(a + r))/∂q / c` (`r` the history term),
//! `C = −Q_v`; it is formed once per step (modified Newton, refreshed when convergence is slow).
//! After convergence the velocities are projected onto `Φq v + Φt = 0` and the accelerations
//! onto `Φq a = γ`. Paper 001 projects in the `W`-metric, `W = M + γhC + βh²K` (the Newton
//! matrix without the penalty term, reusing its factorization). We tried that first: with the
//! constraint Hessian in `K` the `W`-projected accelerations are not the accelerations of the
//! equations of motion, and the position error on the chain test stopped converging regularly
//! (errors 6e-3, 1.1e-3, 7.6e-5, 7.2e-5 for h = 0.05 … 0.00625). So the projection here is
//! mass-orthogonal (the h → 0 limit of the `W`-metric), and the accelerations and multipliers
//! are the consistent ones from `[M Φqᵀ; Φq 0][a; λ] = [f; γ]`, one factorization for both.
//!
//! Variants: trapezoidal (β = ¼, γ = ½), Newmark (dissipative, γ = 0.6, β = (γ+½)²/4, first
//! order), HHT-α (α = −0.1: α_f = 0.1, γ = ½+0.1, β = (1.1)²/4), generalized-α (ρ∞ = 0.8).
//!
//! Local error estimate for variable steps (Zienkiewicz & Xie): the difference between the
//! Newmark position update and a Taylor expansion with linearly varying acceleration,
//! `e_q = (β − 1/6) h² (q̈_{n+1} − q̈_n)`; for velocities, when the member is only first order
//! (`γ ≠ ½ + α_f − α_m`, dissipative Newmark) `e_v = (γ − ½ − α_f + α_m) h (q̈_{n+1} − q̈_n)`,
//! otherwise the velocity error `−h³/12 ⃛v` is estimated from the second divided difference
//! of `q̈` over the last two steps (without it the global error of the trapezoidal rule on the
//! chain was 140× the tolerance). The controller uses order 2 for the second-order members
//! and order 1 otherwise.

#![allow(clippy::needless_range_loop)] // index loops are clearer in dense numerics

use super::dense::{self, Constrained, Lu};
use super::step_control::{weighted_rms_norm, StepController};
use super::{IntegrateError, Integrator, MechState, Method, MultibodySystem, Settings, Stats};
use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

const MAX_ITERS: usize = 20;
/// Iterations after which a stale Newton matrix is refreshed.
const REFRESH_AFTER: usize = 6;
/// Ratio of the penalty stiffness to the mass in the Newton matrix: large enough that the
/// augmented Lagrangian update converges in a few iterations, small enough to keep `T` well
/// conditioned (about 4 digits lost).
const PENALTY_RATIO: f64 = 1e4;

/// Parameters of the family.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NewmarkParams {
    pub beta: f64,
    pub gamma: f64,
    pub alpha_m: f64,
    pub alpha_f: f64,
}

impl NewmarkParams {
    pub fn trapezoidal() -> Self {
        NewmarkParams {
            beta: 0.25,
            gamma: 0.5,
            alpha_m: 0.0,
            alpha_f: 0.0,
        }
    }
    /// Dissipative Newmark with `γ = ½ + δ`, `β = (γ + ½)²/4` (first order).
    pub fn newmark(delta: f64) -> Self {
        let gamma = 0.5 + delta;
        NewmarkParams {
            beta: 0.25 * (gamma + 0.5) * (gamma + 0.5),
            gamma,
            alpha_m: 0.0,
            alpha_f: 0.0,
        }
    }
    /// HHT with `α ∈ [−⅓, 0]` (second order).
    pub fn hht(alpha: f64) -> Self {
        NewmarkParams {
            beta: 0.25 * (1.0 - alpha) * (1.0 - alpha),
            gamma: 0.5 - alpha,
            alpha_m: 0.0,
            alpha_f: -alpha,
        }
    }
    /// Generalized-α with spectral radius at infinity `rho_inf ∈ [0, 1]` (second order).
    pub fn generalized_alpha(rho_inf: f64) -> Self {
        let alpha_m = (2.0 * rho_inf - 1.0) / (rho_inf + 1.0);
        let alpha_f = rho_inf / (rho_inf + 1.0);
        let gamma = 0.5 - alpha_m + alpha_f;
        NewmarkParams {
            beta: 0.25 * (gamma + 0.5) * (gamma + 0.5),
            gamma,
            alpha_m,
            alpha_f,
        }
    }
    pub fn for_method(m: Method) -> Option<Self> {
        match m {
            Method::Trapezoidal => Some(Self::trapezoidal()),
            Method::Newmark => Some(Self::newmark(0.1)),
            Method::Hht => Some(Self::hht(-0.1)),
            Method::GeneralizedAlpha => Some(Self::generalized_alpha(0.8)),
            _ => None,
        }
    }
}

/// The Newmark-family integrator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Newmark {
    method: Method,
    par: NewmarkParams,
    settings: Settings,
    state: MechState,
    stats: Stats,
    h: f64,
    ctrl: StepController,
    /// Penalty of the current step.
    pen: f64,
    ws: Constrained,
    nq: usize,
    nc: usize,
    /// The generalized-α acceleration-like variable `a_n` of the Newmark formulas.
    a: Vec<f64>,
    /// True accelerations `q̈_n` at the current state (consistent with the constraints).
    qdd: Vec<f64>,
    /// `q̈_{n−1}` and `h_{n−1}` for the velocity error estimate of γ = ½ (`h_prev = 0`: none).
    qdd_prev: Vec<f64>,
    h_prev: f64,
    /// `α_m M a_n + α_f (Φqᵀλ − Q)_n`.
    r_prev: Vec<f64>,
    // Workspace.
    m: DMatrix<f64>,
    jac: DMatrix<f64>,
    dfdq: DMatrix<f64>,
    dfdv: DMatrix<f64>,
    tmp: DMatrix<f64>,
    t_mat: Lu,
    f: Vec<f64>,
    phi: Vec<f64>,
    phi_t: Vec<f64>,
    gam: Vec<f64>,
    qhat: Vec<f64>,
    vhat: Vec<f64>,
    q1: Vec<f64>,
    v1: Vec<f64>,
    a1: Vec<f64>,
    lam_star: Vec<f64>,
    lam1: Vec<f64>,
    res: Vec<f64>,
    r_c: Vec<f64>,
    y_old: Vec<f64>,
    y_new: Vec<f64>,
    err: Vec<f64>,
    initialized: bool,
    /// Penalty per constraint row of the current step (`penalty`; recomputed every step).
    #[serde(skip)]
    pen_rows: Vec<f64>,
    #[serde(skip)]
    pen_cols: Vec<usize>,
    #[serde(skip)]
    a_eff: Vec<f64>,
    /// `a_n` shifted to the step size of the step being tried (see [`Newmark::shift_a`]).
    #[serde(skip)]
    a_step: Vec<f64>,
    /// `q̈_n` (and with it `a_n`) belongs to the right-hand side before
    /// [`Integrator::rhs_changed`] or to the state before [`Integrator::restart`]: evaluated
    /// again at the start of the next step. Saved with the state: a restart may set it at the
    /// end of a communication step, and the event locator's backup is taken before the step
    /// that clears it.
    rhs_stale: bool,
}

impl Newmark {
    /// `method` is one of `Trapezoidal`, `Newmark`, `Hht`, `GeneralizedAlpha` (taken from
    /// `settings.method`); other methods are a settings error at `initialize`.
    pub fn new(settings: Settings, n_q: usize, n_c: usize) -> Self {
        let par =
            NewmarkParams::for_method(settings.method).unwrap_or(NewmarkParams::trapezoidal());
        Self::with_params(settings, par, n_q, n_c)
    }

    /// Any parameters (the method name stays `settings.method`).
    pub fn with_params(settings: Settings, par: NewmarkParams, n_q: usize, n_c: usize) -> Self {
        let (nq, nc) = (n_q, n_c);
        Newmark {
            method: settings.method,
            par,
            settings,
            state: MechState {
                t: 0.0,
                q: vec![0.0; nq],
                v: vec![0.0; nq],
                lambda: vec![0.0; nc],
            },
            stats: Stats::default(),
            h: 0.0,
            ctrl: StepController::elementary(),
            pen: 0.0,
            ws: Constrained::new(nq, nc),
            nq,
            nc,
            a: vec![0.0; nq],
            qdd: vec![0.0; nq],
            qdd_prev: vec![0.0; nq],
            h_prev: 0.0,
            r_prev: vec![0.0; nq],
            m: DMatrix::zeros(nq, nq),
            jac: DMatrix::zeros(nc, nq),
            dfdq: DMatrix::zeros(nq, nq),
            dfdv: DMatrix::zeros(nq, nq),
            tmp: DMatrix::zeros(nq, nq),
            t_mat: Lu::new(nq),
            f: vec![0.0; nq],
            phi: vec![0.0; nc],
            phi_t: vec![0.0; nc],
            gam: vec![0.0; nc],
            qhat: vec![0.0; nq],
            vhat: vec![0.0; nq],
            q1: vec![0.0; nq],
            v1: vec![0.0; nq],
            a1: vec![0.0; nq],
            lam_star: vec![0.0; nc],
            lam1: vec![0.0; nc],
            res: vec![0.0; nq],
            r_c: vec![0.0; nc],
            y_old: vec![0.0; 2 * nq],
            y_new: vec![0.0; 2 * nq],
            err: vec![0.0; 2 * nq],
            initialized: false,
            pen_rows: vec![0.0; n_c],
            pen_cols: Vec::with_capacity(n_q),
            a_eff: vec![0.0; n_q],
            a_step: vec![0.0; n_q],
            rhs_stale: false,
        }
    }

    pub fn params(&self) -> NewmarkParams {
        self.par
    }

    /// `γ − (½ + α_f − α_m)`: zero for the second-order members.
    fn gamma_defect(&self) -> f64 {
        self.par.gamma - (0.5 + self.par.alpha_f - self.par.alpha_m)
    }

    fn order(&self) -> u32 {
        if self.gamma_defect().abs() < 1e-12 {
            2
        } else {
            1
        }
    }

    /// `r = (α_m a_n − α_f q̈_n) / (1 − α_m)` from the current state: the history term of the
    /// weighted equilibrium, multiplied by `M(q_{n+1})` in the residual. The equations of
    /// motion hold at `t_{n+1}`, so the mass matrix there multiplies the whole
    /// `(1−α_m) a_{n+1} + α_m a_n − α_f q̈_n = (1−α_f) q̈_{n+1}`; with `M(q_n)` on the history
    /// part (as before) the error `(M_{n+1} − M_n)(α_m a_n − α_f q̈_n)` is first order in `h`,
    /// harmless where `M` barely changes (absolute coordinates) but not in joint coordinates,
    /// where it moves with every relative rotation (spherical chain: HHT and generalized-α
    /// failed their error test step after step).
    fn history(&mut self) {
        let NewmarkParams {
            alpha_m, alpha_f, ..
        } = self.par;
        for i in 0..self.nq {
            self.r_prev[i] = (alpha_m * self.a_step[i] - alpha_f * self.qdd[i]) / (1.0 - alpha_m);
        }
    }

    /// `a_n` for a step of size `h`, into `a_step`. The α-methods' `a_n` is the acceleration
    /// shifted in time by a fraction of the step that produced it, `a_n ≈ q̈(t_n + (α_m − α_f)
    /// h_{n−1})` (Arnold & Brüls 2007; HHT: `a_n = (1−α_f) q̈_n + α_f q̈_{n−1}` exactly); the
    /// formulas are second order only when that shift is `(α_m − α_f) h` of the step taken. After
    /// a change of step size the velocity update carries the mismatch, a local error
    /// `(Δ/2 + Δ²) h (h_{n−1} − h) q⃛` (`Δ = α_m − α_f`): first order in `h` when the steps
    /// change all the time, as they do when a communication grid splits them unevenly, and not
    /// seen by the error estimate. On the quarter-car rig (1 ms grid) HHT's error then rose as
    /// the tolerance was tightened (4.5e-7 m at rtol 1e-4, 3.1e-6 at 1e-10). So `a_n` is moved
    /// to the new shift with `q⃛ ≈ (q̈_n − q̈_{n−1}) / h_{n−1}`; the filter state of `a` stays.
    fn shift_a(&mut self, h: f64) {
        let d = self.par.alpha_m - self.par.alpha_f;
        self.a_step.resize(self.nq, 0.0);
        let s = if self.h_prev > 0.0 && d != 0.0 {
            d * (h - self.h_prev) / self.h_prev
        } else {
            0.0
        };
        for i in 0..self.nq {
            self.a_step[i] = self.a[i] + s * (self.qdd[i] - self.qdd_prev[i]);
        }
    }

    /// The accelerations of the right-hand side that changed at the current point (new input
    /// segments: a held force that jumped). The step's formulas start from `a_n`: with the
    /// previous sample's, the trapezoidal rule averages the old force with the new one and
    /// moves a slider 0.50× of a force jump's first-step response. The jump `Δ = q̈_new − q̈_n`
    /// is added to `a_n` (for the α-methods `a` tracks `q̈` shifted in time: their filter state
    /// stays, only the new level enters) and to `q̈_{n−1}`, so that the velocity error
    /// estimate's second difference is that of the new right-hand side, not the jump itself.
    fn refresh_accelerations<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
    ) -> Result<(), IntegrateError> {
        let t = self.state.t;
        self.stats.f_evals += 1;
        self.ws.accelerations(
            sys,
            t,
            &self.state.q,
            &self.state.v,
            &mut self.a1,
            &mut self.lam1,
        )?;
        for i in 0..self.nq {
            let jump = self.a1[i] - self.qdd[i];
            self.a[i] += jump;
            self.qdd_prev[i] += jump;
            self.qdd[i] = self.a1[i];
        }
        self.state.lambda.copy_from_slice(&self.lam1);
        Ok(())
    }

    /// Penalties per constraint row, `p_k = PENALTY_RATIO m_k / (cβh² ‖Φq_k‖²)` with `m_k =
    /// Φq_k M Φq_kᵀ / ‖Φq_k‖²`, the mass along the row's own direction (from the current `m`,
    /// `jac`), into `pen_rows`; returns the largest. Per row because the Newton matrix's
    /// constraint-Hessian term moves with the multipliers, and the multiplier update
    /// `λ* += p_k Φ_k` turns the quadratic remainder of a Newton step into a force `p_k Φ_k Φ_qq`:
    /// one penalty scaled by the largest diagonal of `M` (in joint coordinates the root's
    /// composite inertia) made that force, on an Euler-parameter block (`Φ_qq = I`), larger
    /// than the small inertia about a bar's axis, and the iteration diverged (spherical chain,
    /// HHT and generalized-α). Along its own direction an Euler normalization row sees only
    /// the `c e eᵀ` mass; a position row the masses it moves.
    fn penalty(&mut self, h: f64) -> f64 {
        let c = (1.0 - self.par.alpha_f) / (1.0 - self.par.alpha_m);
        let mmax = (0..self.nq)
            .fold(0.0f64, |x, i| x.max(self.m[(i, i)].abs()))
            .max(1e-300);
        let scale = PENALTY_RATIO / (c * self.par.beta * h * h);
        self.pen_rows.resize(self.nc, 0.0);
        self.pen_cols.clear();
        let mut pmax = 0.0f64;
        for k in 0..self.nc {
            self.pen_cols.clear();
            let mut g2 = 0.0;
            for j in 0..self.nq {
                let g = self.jac[(k, j)];
                if g != 0.0 {
                    self.pen_cols.push(j);
                    g2 += g * g;
                }
            }
            let mut mk = 0.0;
            for &i in &self.pen_cols {
                for &j in &self.pen_cols {
                    mk += self.jac[(k, i)] * self.m[(i, j)] * self.jac[(k, j)];
                }
            }
            let g2 = g2.max(1e-300);
            let mk = (mk / g2).max(1e-12 * mmax);
            self.pen_rows[k] = scale * mk / g2;
            pmax = pmax.max(self.pen_rows[k]);
        }
        pmax
    }

    /// Form and factor `T` at `q1`, `v1`, `a1`, `λ = lam1` (penalties `pen_rows`).
    fn form_matrix<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t1: f64,
        h: f64,
    ) -> Result<(), IntegrateError> {
        let (nq, nc) = (self.nq, self.nc);
        let NewmarkParams {
            beta,
            gamma,
            alpha_m,
            alpha_f,
        } = self.par;
        let c = (1.0 - alpha_f) / (1.0 - alpha_m);
        sys.mass_matrix(t1, &self.q1, &mut self.m);
        sys.force_jacobians(t1, &self.q1, &self.v1, &mut self.dfdq, &mut self.dfdv);
        self.stats.jac_evals += 1;
        let bh2 = beta * h * h;
        // ∂(M (a1 + r))/∂q: the residual's inertia term is `βh² M(q1) (a1 + r)`.
        self.a_eff.resize(nq, 0.0);
        for i in 0..nq {
            self.a_eff[i] = self.a1[i] + self.r_prev[i];
        }
        sys.mass_times_accel_jacobian(t1, &self.q1, &self.a_eff, &mut self.tmp);
        let a = &mut self.t_mat.a;
        // In place (no temporaries): T = M + βh² ∂(Ma)/∂q − cβh² Q_q − cγh Q_v + ….
        for j in 0..nq {
            for i in 0..nq {
                a[(i, j)] = self.m[(i, j)] + bh2 * self.tmp[(i, j)]
                    - c * bh2 * self.dfdq[(i, j)]
                    - c * gamma * h * self.dfdv[(i, j)];
            }
        }
        if nc > 0 {
            sys.constraint_jacobian(t1, &self.q1, &mut self.jac);
            sys.constraint_force_jacobian(t1, &self.q1, &self.lam1, &mut self.tmp);
            let a = &mut self.t_mat.a;
            for j in 0..nq {
                for i in 0..nq {
                    a[(i, j)] += c * bh2 * self.tmp[(i, j)];
                }
            }
            let s = c * bh2;
            for i in 0..nq {
                for j in 0..nq {
                    let mut x = 0.0;
                    for k in 0..nc {
                        x += self.jac[(k, i)] * self.pen_rows[k] * self.jac[(k, j)];
                    }
                    a[(i, j)] += s * x;
                }
            }
        }
        self.stats.lu += 1;
        self.t_mat.factor().map_err(|k| IntegrateError::Singular {
            t: t1,
            what: format!("Newton matrix of the augmented Lagrangian, pivot {k}"),
        })
    }

    /// Velocities and accelerations from `q1` by the Newmark formulas.
    fn newmark_va(&mut self, h: f64) {
        let NewmarkParams { beta, gamma, .. } = self.par;
        for i in 0..self.nq {
            self.a1[i] = (self.q1[i] - self.qhat[i]) / (beta * h * h);
            self.v1[i] = self.vhat[i] + gamma * h * self.a1[i];
        }
    }

    /// Newton on the index-3 augmented Lagrangian equations for `q1`. Returns `Ok(false)` on
    /// convergence failure.
    fn solve<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t1: f64,
        h: f64,
    ) -> Result<bool, IntegrateError> {
        let (nq, nc) = (self.nq, self.nc);
        let NewmarkParams {
            beta,
            alpha_m,
            alpha_f,
            ..
        } = self.par;
        let c = (1.0 - alpha_f) / (1.0 - alpha_m);
        let bh2 = beta * h * h;
        let fixed = self.settings.fixed_step.is_some();
        let phi_tol = dense::projection_tol(&self.settings);
        self.history();
        // Predictor: constant acceleration.
        for i in 0..nq {
            self.q1[i] = self.qhat[i] + bh2 * self.a_step[i];
        }
        self.newmark_va(h);
        self.lam_star.copy_from_slice(&self.state.lambda);
        self.lam1.copy_from_slice(&self.state.lambda);
        sys.mass_matrix(t1, &self.q1, &mut self.m);
        if nc > 0 {
            sys.constraint_jacobian(t1, &self.q1, &mut self.jac);
        }
        let p = if nc > 0 { self.penalty(h) } else { 0.0 };
        self.pen = p;
        self.form_matrix(sys, t1, h)?;
        let mut since_refresh = 0;
        for _ in 0..MAX_ITERS {
            // R̃ = M (q1 − q̂) + cβh² (Φqᵀ λ̄ − Q) + βh²/(1−α_m) r_n, λ̄ = λ* + pΦ.
            sys.mass_matrix(t1, &self.q1, &mut self.m);
            sys.forces(t1, &self.q1, &self.v1, &mut self.f);
            self.stats.f_evals += 1;
            if nc > 0 {
                sys.constraints(t1, &self.q1, &mut self.phi);
                sys.constraint_jacobian(t1, &self.q1, &mut self.jac);
                for k in 0..nc {
                    self.lam1[k] = self.lam_star[k] + self.pen_rows[k] * self.phi[k];
                }
            }
            for i in 0..nq {
                let mut s = 0.0;
                for j in 0..nq {
                    s += self.m[(i, j)] * (self.q1[j] - self.qhat[j] + bh2 * self.r_prev[j]);
                }
                let mut g = -self.f[i];
                for k in 0..nc {
                    g += self.jac[(k, i)] * self.lam1[k];
                }
                s += c * bh2 * g;
                self.res[i] = -s;
            }
            if !dense::all_finite(&self.res) {
                return Ok(false);
            }
            self.t_mat.solve(&mut self.res);
            self.stats.newton_iters += 1;
            dense::axpy(&mut self.q1, 1.0, &self.res);
            self.newmark_va(h);
            if nc > 0 {
                sys.constraints(t1, &self.q1, &mut self.phi);
                for k in 0..nc {
                    self.lam_star[k] += self.pen_rows[k] * self.phi[k];
                }
            }
            let dq = dense::inf_norm(&self.res);
            let scale = dense::inf_norm(&self.q1).max(1.0);
            let dq_tol = if fixed {
                1e-12 * scale
            } else {
                1e-3 * (self.settings.atol + self.settings.rtol * scale)
            };
            if dq <= dq_tol && dense::inf_norm(&self.phi) <= phi_tol {
                self.lam1.copy_from_slice(&self.lam_star);
                return Ok(true);
            }
            since_refresh += 1;
            if since_refresh >= REFRESH_AFTER {
                self.form_matrix(sys, t1, h)?;
                since_refresh = 0;
            }
        }
        Ok(false)
    }
}

impl<S: MultibodySystem + ?Sized> Integrator<S> for Newmark {
    fn initialize(&mut self, sys: &mut S, x: &MechState) -> Result<(), IntegrateError> {
        dense::validate_settings(&self.settings)?;
        if NewmarkParams::for_method(self.method).is_none() {
            return Err(IntegrateError::Settings(format!(
                "{} is not a Newmark-family method",
                self.method.name()
            )));
        }
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
        self.state.t = x.t;
        self.state.q.copy_from_slice(&x.q);
        self.state.v.copy_from_slice(&x.v);
        self.stats = Stats::default();
        self.ctrl = StepController::elementary();
        let mut ws = dense::Constrained::new(n, self.nc);
        ws.accelerations(sys, x.t, &x.q, &x.v, &mut self.qdd, &mut self.state.lambda)?;
        // The acceleration-like variable starts at the true acceleration.
        self.a.copy_from_slice(&self.qdd);
        self.h_prev = 0.0;
        self.stats.f_evals += 1;
        self.y_old[..n].copy_from_slice(&x.q);
        self.y_old[n..].copy_from_slice(&x.v);
        self.y_new[..n].copy_from_slice(&x.v);
        self.y_new[n..].copy_from_slice(&self.a);
        self.h = dense::first_step(&self.settings, x.t, &self.y_old, &self.y_new, self.order());
        self.initialized = true;
        self.rhs_stale = false;
        Ok(())
    }

    fn step(&mut self, sys: &mut S, t_limit: f64) -> Result<f64, IntegrateError> {
        if !self.initialized {
            return Err(IntegrateError::Settings("step before initialize".into()));
        }
        if self.rhs_stale {
            self.refresh_accelerations(sys)?;
            self.rhs_stale = false;
        }
        let nq = self.nq;
        let t = self.state.t;
        let fixed = self.settings.fixed_step.is_some();
        let NewmarkParams { beta, gamma, .. } = self.par;
        let order = self.order();
        let gdef = self.gamma_defect();
        let mut h_try = self.h;
        let mut failures = 0u32;
        loop {
            let pl = dense::plan_step(&self.settings, t, h_try, t_limit)?;
            let h = pl.h;
            if h < dense::h_min(t) {
                return Err(IntegrateError::StepTooSmall {
                    t,
                    h,
                    h_min: dense::h_min(t),
                    reason: "Newmark error test / convergence".into(),
                });
            }
            let t1 = dense::advance(t, pl, t_limit);
            self.shift_a(h);
            for i in 0..nq {
                self.qhat[i] =
                    self.state.q[i] + h * self.state.v[i] + h * h * (0.5 - beta) * self.a_step[i];
                self.vhat[i] = self.state.v[i] + (1.0 - gamma) * h * self.a_step[i];
            }
            let ok = match self.solve(sys, t1, h) {
                Ok(ok) => ok,
                Err(e) if e.is_recoverable() && !fixed => false,
                Err(e) => return Err(e),
            };
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
            // Velocity projection and consistent accelerations / multipliers (one force
            // evaluation, one factorization).
            self.stats.f_evals += 1;
            self.stats.lu += 1;
            match self.ws.project_velocities_and_accelerations(
                sys,
                t1,
                &self.q1,
                &mut self.v1,
                &mut self.a1,
                &mut self.lam1,
            ) {
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
                for i in 0..nq {
                    let da = self.a1[i] - self.qdd[i];
                    self.err[i] = (beta - 1.0 / 6.0) * h * h * da;
                    self.err[nq + i] = if order == 1 {
                        gdef * h * da
                    } else if self.h_prev > 0.0 {
                        // −h³/12 ⃛v with the second difference of the true accelerations.
                        let dd = (da / h - (self.qdd[i] - self.qdd_prev[i]) / self.h_prev)
                            / (0.5 * (h + self.h_prev));
                        -h * h * h / 12.0 * dd
                    } else {
                        0.0
                    };
                    self.y_old[i] = self.state.q[i];
                    self.y_old[nq + i] = self.state.v[i];
                    self.y_new[i] = self.q1[i];
                    self.y_new[nq + i] = self.v1[i];
                }
                err = weighted_rms_norm(
                    &self.err,
                    &self.y_old,
                    &self.y_new,
                    self.settings.rtol,
                    self.settings.atol,
                );
                if err.is_nan() || err > 1.0 {
                    self.stats.rejected_steps += 1;
                    self.stats.error_test_failures += 1;
                    h_try = if err.is_finite() {
                        h * self.ctrl.factor(err, order, false)
                    } else {
                        0.25 * h
                    };
                    continue;
                }
            }
            self.state.t = t1;
            self.state.q.copy_from_slice(&self.q1);
            self.state.v.copy_from_slice(&self.v1);
            // a_{n+1} from (1−α_m) a_{n+1} + α_m a_n = (1−α_f) q̈_{n+1} + α_f q̈_n
            // (Arnold & Brüls), with the consistent q̈ (for α_m = α_f = 0: a = q̈).
            let NewmarkParams {
                alpha_m, alpha_f, ..
            } = self.par;
            for i in 0..nq {
                self.a[i] = ((1.0 - alpha_f) * self.a1[i] + alpha_f * self.qdd[i]
                    - alpha_m * self.a_step[i])
                    / (1.0 - alpha_m);
            }
            self.qdd_prev.copy_from_slice(&self.qdd);
            self.h_prev = h;
            self.qdd.copy_from_slice(&self.a1);
            self.state.lambda.copy_from_slice(&self.lam1);
            self.stats.steps += 1;
            if fixed {
                self.h = h_try;
            } else {
                let fac = self.ctrl.factor(err, order, true);
                self.ctrl.accept(err);
                self.h = if pl.clipped {
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
        self.method
    }
    fn set_settings(&mut self, settings: Settings) {
        // The family member is fixed at construction.
        self.settings = Settings {
            method: self.method,
            ..settings
        };
    }
    fn rhs_changed(&mut self) {
        self.rhs_stale = true;
    }
    /// From the projected state `x`: the step size and controller stay; `q̈_n` is evaluated at
    /// `x` before the next step and its jump added to `a_n` and `q̈_{n−1}` (as after
    /// [`Integrator::rhs_changed`]).
    fn restart(&mut self, sys: &mut S, x: &MechState) -> Result<bool, IntegrateError> {
        if !self.initialized || !self.state.assign_same_size(x) {
            return self.initialize(sys, x).map(|()| false);
        }
        self.rhs_stale = true;
        Ok(true)
    }
}
