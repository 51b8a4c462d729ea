//! Local linearization (exponential) method, paper 002.
//!
//! For `y' = f(t, y)` the step is `y_{n+1} = y_n + φ`, `φ = ∫₀ʰ e^{A(h−u)} (f_n + f_t u) du`,
//! `A = f_y(t_n, y_n)`, read off the exponential of the augmented matrix (6):
//! `exp(h [[A, f_t, f_n], [0, 0, 1], [0, 0, 0]])` holds `φ` in its top-right column. The
//! exponential is computed by scaling and squaring with the diagonal (6,6) Padé approximant
//! (‖hC/2^s‖₁ ≤ ½, relative accuracy near round-off for that norm).
//!
//! Local error estimate (paper 002, eqs. (29)–(33)): the remainder of the linearization
//! `r(t) = f(t, y) − g(t, y)`, `g = f_n + A (y − y_n) + f_t (t − t_n)`, is approximated by
//! `v_n (t − t_n)²` with `v_n = r(t_{n+1}, y_{n+1}) / h²` (30), and the local error is
//! `l = ∫₀ʰ e^{A(h−u)} v_n u² du` (31), the top-right column of `exp(hL)`,
//! `L = [[A, 2v_n, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]]` (32)–(33). (We include
//! the `f_t` term in `g` so that `r` is the remainder of the same linearization the step uses;
//! for autonomous problems it is the paper's `g`.)
//!
//! Step control (38) with the error per unit step (EPUS, (39)): `r = ‖l‖/h` in the weighted
//! RMS norm, accepted when `r ≤ 1`, `h* = 0.9 r^{−1/k} h` with `k = p = 2`; optionally the PI
//! controller (40), `h_{n+1} = r^{−k_I} (r_{n−1}/r)^{k_P} h` with `k_I = 0.15`, `k_P = 0.2`
//! (Gustafsson's β = (0.7, 0.4) scaled by 1/k).
//!
//! On the multibody system `y = (q, v)`, `f = (v, q̈)` with `q̈` from the saddle-point system
//! (the index-1 form of paper 002, section 2); `f_y` and `f_t` are central finite differences
//! of `f` (the paper derives `f_y` analytically); after each step `q` and `v` are projected onto
//! the constraints as in the explicit method, and the error test measures the estimate's part
//! tangent to the constraints (the part the projection leaves; docs/integrators.md, "Local
//! linearization on driven mechanisms").

#![allow(clippy::needless_range_loop)] // index loops are clearer in dense numerics

use super::dense::{self, Constrained, Lu};
use super::step_control::{weighted_rms_norm, StepController};
use super::{IntegrateError, Integrator, MechState, Method, MultibodySystem, Settings, Stats};
use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

/// Matrix exponential by scaling and squaring with the (6,6) Padé approximant, with
/// preallocated workspace for one size.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Expm {
    n: usize,
    x: DMatrix<f64>,
    p: DMatrix<f64>,
    num: DMatrix<f64>,
    den: Lu,
    out: DMatrix<f64>,
    tmp: DMatrix<f64>,
    col: Vec<f64>,
}

const PADE_DEGREE: usize = 6;

/// Default of [`LocalLinearization::max_jacobian_age`] (measured in docs/integrators.md).
pub const DEFAULT_MAX_JACOBIAN_AGE: u32 = 20;

impl Expm {
    pub fn new(n: usize) -> Self {
        Expm {
            n,
            x: DMatrix::zeros(n, n),
            p: DMatrix::zeros(n, n),
            num: DMatrix::zeros(n, n),
            den: Lu::new(n),
            out: DMatrix::zeros(n, n),
            tmp: DMatrix::zeros(n, n),
            col: vec![0.0; n],
        }
    }

    /// `exp(a)`; the result is in [`Expm::result`]. Errors if `a` is not finite.
    pub fn compute(&mut self, a: &DMatrix<f64>) -> Result<(), String> {
        let n = self.n;
        let norm = (0..n)
            .map(|j| (0..n).map(|i| a[(i, j)].abs()).sum::<f64>())
            .fold(0.0, f64::max);
        if !norm.is_finite() {
            return Err("matrix exponential of a non-finite matrix".into());
        }
        let s = if norm > 0.5 {
            (norm / 0.5).log2().ceil() as i32
        } else {
            0
        };
        let scale = 0.5f64.powi(s);
        self.x.copy_from(a);
        self.x *= scale;
        // N = Σ c_k X^k, D = Σ (−1)^k c_k X^k.
        self.num.fill_with_identity();
        self.den.a.fill_with_identity();
        self.p.fill_with_identity();
        let q = PADE_DEGREE as f64;
        let mut c = 1.0;
        for k in 1..=PADE_DEGREE {
            let kf = k as f64;
            c *= (q - kf + 1.0) / (kf * (2.0 * q - kf + 1.0));
            self.tmp.gemm(1.0, &self.p, &self.x, 0.0);
            std::mem::swap(&mut self.p, &mut self.tmp);
            let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
            for j in 0..n {
                for i in 0..n {
                    let pk = self.p[(i, j)];
                    self.num[(i, j)] += c * pk;
                    self.den.a[(i, j)] += sign * c * pk;
                }
            }
        }
        self.den
            .factor()
            .map_err(|k| format!("Padé denominator singular at pivot {k}"))?;
        for j in 0..n {
            for i in 0..n {
                self.col[i] = self.num[(i, j)];
            }
            self.den.solve(&mut self.col);
            for i in 0..n {
                self.out[(i, j)] = self.col[i];
            }
        }
        for _ in 0..s {
            self.tmp.gemm(1.0, &self.out, &self.out, 0.0);
            std::mem::swap(&mut self.out, &mut self.tmp);
        }
        Ok(())
    }

    pub fn result(&self) -> &DMatrix<f64> {
        &self.out
    }
}

/// The LL step and its error estimate for an ODE of dimension `m` (usable on any ODE).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LlCore {
    m: usize,
    c: DMatrix<f64>,
    l: DMatrix<f64>,
    e_step: Expm,
    e_err: Expm,
}

impl LlCore {
    pub fn new(m: usize) -> Self {
        LlCore {
            m,
            c: DMatrix::zeros(m + 2, m + 2),
            l: DMatrix::zeros(m + 3, m + 3),
            e_step: Expm::new(m + 2),
            e_err: Expm::new(m + 3),
        }
    }

    /// `φ` of eq. (5) for the Jacobian `a`, `f_t`, `f_n` and step `h` (6).
    pub fn increment(
        &mut self,
        a: &DMatrix<f64>,
        ft: &[f64],
        f: &[f64],
        h: f64,
        phi: &mut [f64],
    ) -> Result<(), String> {
        let m = self.m;
        self.c.fill(0.0);
        for j in 0..m {
            for i in 0..m {
                self.c[(i, j)] = h * a[(i, j)];
            }
        }
        for i in 0..m {
            self.c[(i, m)] = h * ft[i];
            self.c[(i, m + 1)] = h * f[i];
        }
        self.c[(m, m + 1)] = h;
        self.e_step.compute(&self.c)?;
        let e = self.e_step.result();
        for i in 0..m {
            phi[i] = e[(i, m + 1)];
        }
        Ok(())
    }

    /// Local error `l = ∫₀ʰ e^{A(h−u)} v u² du` (31) from `exp(hL)` (32)–(33).
    pub fn local_error(
        &mut self,
        a: &DMatrix<f64>,
        v: &[f64],
        h: f64,
        l: &mut [f64],
    ) -> Result<(), String> {
        let m = self.m;
        self.l.fill(0.0);
        for j in 0..m {
            for i in 0..m {
                self.l[(i, j)] = h * a[(i, j)];
            }
        }
        for i in 0..m {
            self.l[(i, m)] = h * 2.0 * v[i];
        }
        self.l[(m, m + 1)] = h;
        self.l[(m + 1, m + 2)] = h;
        self.e_err.compute(&self.l)?;
        let e = self.e_err.result();
        for i in 0..m {
            l[i] = e[(i, m + 2)];
        }
        Ok(())
    }
}

/// The local linearization method on the index-1 form with projections.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LocalLinearization {
    settings: Settings,
    /// PI step-size control (40) instead of the elementary rule (38).
    pub pi_control: bool,
    state: MechState,
    stats: Stats,
    h: f64,
    ctrl: StepController,
    nq: usize,
    ws: Constrained,
    core: LlCore,
    jac: DMatrix<f64>,
    f0: Vec<f64>,
    ft: Vec<f64>,
    fp: Vec<f64>,
    fm: Vec<f64>,
    y0: Vec<f64>,
    y1: Vec<f64>,
    yp: Vec<f64>,
    phi: Vec<f64>,
    vres: Vec<f64>,
    lerr: Vec<f64>,
    lam_tmp: Vec<f64>,
    jac_ready: bool,
    /// `f0` belongs to the right-hand side before [`Integrator::rhs_changed`].
    rhs_stale: bool,
    initialized: bool,
    jalt: DMatrix<f64>,
    kinks: Vec<usize>,
    /// Jacobian columns taken one-sided because a force kink lay within the difference step.
    pub kink_columns: u64,
    /// Reuse `A` over at most this many accepted steps (1: a fresh Jacobian every step, the
    /// paper's method). See [`LocalLinearization::step`] and docs/integrators.md.
    pub max_jacobian_age: u32,
    /// Accepted steps taken with the current `A`.
    jac_age: u32,
    /// `A` is the Jacobian at `y0` (not an older one).
    jac_fresh: bool,
    /// The last fresh Jacobian is one mode's (no kink column taken one-sided, no jump entered):
    /// only then may it be reused.
    jac_reusable: bool,
    /// The linear-in-time forcing of the step: `f_t` with a fresh `A`, else
    /// `f_t + (J(y0) − A) f0` (the total derivative of `f` along the motion minus `A f0`).
    w: Vec<f64>,
}

impl LocalLinearization {
    pub fn new(settings: Settings, n_q: usize, n_c: usize) -> Self {
        let m = 2 * n_q;
        LocalLinearization {
            settings: Settings {
                method: Method::LocalLinearization,
                ..settings
            },
            pi_control: false,
            state: MechState {
                t: 0.0,
                q: vec![0.0; n_q],
                v: vec![0.0; n_q],
                lambda: vec![0.0; n_c],
            },
            stats: Stats::default(),
            h: 0.0,
            ctrl: StepController::elementary(),
            nq: n_q,
            ws: Constrained::new(n_q, n_c),
            core: LlCore::new(m),
            jac: DMatrix::zeros(m, m),
            f0: vec![0.0; m],
            ft: vec![0.0; m],
            fp: vec![0.0; m],
            fm: vec![0.0; m],
            y0: vec![0.0; m],
            y1: vec![0.0; m],
            yp: vec![0.0; m],
            phi: vec![0.0; m],
            vres: vec![0.0; m],
            lerr: vec![0.0; m],
            lam_tmp: vec![0.0; n_c],
            jac_ready: false,
            rhs_stale: false,
            initialized: false,
            kink_columns: 0,
            jalt: DMatrix::zeros(m, m),
            kinks: Vec::with_capacity(m),
            max_jacobian_age: DEFAULT_MAX_JACOBIAN_AGE,
            jac_age: 0,
            jac_fresh: false,
            jac_reusable: false,
            w: vec![0.0; m],
        }
    }

    /// With the PI controller (40).
    pub fn with_pi(settings: Settings, n_q: usize, n_c: usize) -> Self {
        let mut s = Self::new(settings, n_q, n_c);
        s.pi_control = true;
        s
    }

    fn controller(&self) -> StepController {
        if self.pi_control {
            StepController::pi()
        } else {
            StepController::elementary()
        }
    }

    /// `f(t, y)` into `out` (`y = (q, v)`).
    #[allow(clippy::too_many_arguments)]
    fn rhs<S: MultibodySystem + ?Sized>(
        ws: &mut Constrained,
        stats: &mut Stats,
        lam: &mut [f64],
        sys: &mut S,
        t: f64,
        y: &[f64],
        out: &mut [f64],
        jacobian: bool,
    ) -> Result<(), IntegrateError> {
        let n = ws.nq;
        stats.f_evals += 1;
        if jacobian {
            stats.f_evals_jacobian += 1;
        }
        let (q, v) = y.split_at(n);
        let (dq, dv) = out.split_at_mut(n);
        dq.copy_from_slice(v);
        ws.accelerations(sys, t, q, v, dv, lam)
    }

    /// `f(t, y0 + d e_k)` into `fp` (`plus`) or `fm`.
    fn col_perturbed<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        k: usize,
        d: f64,
        plus: bool,
    ) -> Result<(), IntegrateError> {
        self.yp.copy_from_slice(&self.y0);
        self.yp[k] += d;
        self.rhs_at_yp(sys, t, plus)
    }

    /// `f(t, yp)` into `fp` (`into_fp`) or `fm`, counted with the Jacobian's right-hand sides.
    fn rhs_at_yp<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        into_fp: bool,
    ) -> Result<(), IntegrateError> {
        let out = if into_fp { &mut self.fp } else { &mut self.fm };
        Self::rhs(
            &mut self.ws,
            &mut self.stats,
            &mut self.lam_tmp,
            sys,
            t,
            &self.yp,
            out,
            true,
        )
    }

    /// `max |ẏ|` and `max(1, |y|)` at the step start (`f0`, `y0`): the scales of a difference
    /// step along the motion, `s ‖ẏ‖ = ε max(1, ‖y‖)`.
    fn motion_scales(&self) -> (f64, f64) {
        let speed = self.f0.iter().fold(0.0f64, |a, x| a.max(x.abs()));
        let ymax = self.y0.iter().fold(1.0f64, |a, x| a.max(x.abs()));
        (speed, ymax)
    }

    /// `f(t, y0 + s f0)` into `fp` (`into_fp`) or `fm`: a point `s` along the motion from the
    /// step start (`yp` holds it). Counted with the Jacobian's right-hand sides.
    fn rhs_along_motion<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        s: f64,
        into_fp: bool,
    ) -> Result<(), IntegrateError> {
        for ((p, y), f) in self.yp.iter_mut().zip(&self.y0).zip(&self.f0) {
            *p = y + s * f;
        }
        self.rhs_at_yp(sys, t, into_fp)
    }

    /// `y` lies on a force kink (columns `kinks`, both one-sided differences in `jac`/`jalt`):
    /// the step needs the Jacobian of the mode the motion enters, which depends on how the
    /// coordinates move together (a ball-ball gap closes when the upper ball falls faster), so
    /// pick the combination of sides that best predicts `f(y + τ ẏ) − f(y)` for a small `τ`.
    fn choose_kink_sides<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        eps: f64,
    ) -> Result<(), IntegrateError> {
        let m = 2 * self.nq;
        let (speed, ymax) = self.motion_scales();
        if speed == 0.0 {
            self.kinks.clear();
            return Ok(());
        }
        let tau = eps * ymax / speed;
        self.rhs_along_motion(sys, t, tau, true)?;
        // base = Σ over smooth columns of J τ ẏ; the kinked columns are added per combination.
        for i in 0..m {
            let mut b = 0.0;
            for k in 0..m {
                if !self.kinks.contains(&k) {
                    b += self.jac[(i, k)] * tau * self.f0[k];
                }
            }
            self.lerr[i] = b;
        }
        let nk = self.kinks.len().min(10);
        let (mut best, mut best_mask) = (f64::INFINITY, 0usize);
        for mask in 0..(1usize << nk) {
            let mut res = 0.0;
            for i in 0..m {
                let mut p = self.lerr[i];
                for (b, &k) in self.kinks.iter().enumerate() {
                    let jk = if b < nk && mask & (1 << b) != 0 {
                        self.jalt[(i, k)]
                    } else {
                        self.jac[(i, k)]
                    };
                    p += jk * tau * self.f0[k];
                }
                let r = self.fp[i] - self.f0[i] - p;
                res += r * r;
            }
            if res < best {
                best = res;
                best_mask = mask;
            }
        }
        for (b, &k) in self.kinks.iter().enumerate().take(nk) {
            if best_mask & (1 << b) != 0 {
                for i in 0..m {
                    self.jac[(i, k)] = self.jalt[(i, k)];
                }
            }
        }
        self.kinks.clear();
        Ok(())
    }

    /// `f_y`, `f_t` at the step start by central differences (one-sided at force kinks).
    fn jacobians<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
    ) -> Result<(), IntegrateError> {
        let kinks = self.kink_columns;
        let jumped = self.jacobians_at(sys, true)?;
        self.jac_fresh = true;
        self.jac_age = 0;
        self.jac_reusable = !jumped && self.kink_columns == kinks;
        self.w.copy_from_slice(&self.ft);
        Ok(())
    }

    /// With `A` kept from an earlier step: the forcing `w = f_t + J(y0) f0 − A f0` of the
    /// step, `f_t + J f0 = d/dσ f(t + σ, y0 + σ f0)` by one central difference (2 right-hand
    /// sides instead of the 2m + 2 of a Jacobian). With it the linear model
    /// `f0 + A (y − y0) + w (t − t0)` still matches `f` along the motion to first order, so
    /// the step stays of order 2 and the remainder (30) stays `O(h²)` whatever `A` is (an
    /// exponential W-method); the error estimate sees `(J − A)` through `f(t1, y1)`. Returns
    /// false, leaving `w` unset, when the one-sided differences disagree (a force switch within
    /// the difference step): the caller then takes a fresh Jacobian, which handles that case.
    fn reused_forcing<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
    ) -> Result<bool, IntegrateError> {
        let m = 2 * self.nq;
        let t = self.state.t;
        // 100 times the Jacobian's 6e-6: the direction `f0` moves the fast components (a
        // velocity under a contact's acceleration) by that much but the slow ones far less,
        // so `J f0` is a difference of nearly equal values; at 6e-6 its round-off cost the
        // bouncing balls' energy 5.5e-10 (4.8e-12 with 6e-4; `tests/contact_events.rs`).
        // The shrinking below keeps the truncation in check where `f` curves.
        let eps = 6e-4;
        let (speed, ymax) = self.motion_scales();
        let mut d = eps * t.abs().max(1.0);
        if speed > 0.0 {
            d = d.min(eps * ymax / speed);
        }
        // As in the Jacobian's columns: the one-sided differences differ by `f'' d` on a
        // smooth path (a brake torque's smooth step has `f'' ~ 5e5` rad/s⁴) and by a finite
        // amount across a switch, so shrink `d` (to 6e-6 and 6e-8) until they agree.
        let mut agreed = false;
        for _ in 0..3 {
            for (sign, plus) in [(1.0, true), (-1.0, false)] {
                self.rhs_along_motion(sys, t + sign * d, sign * d, plus)?;
            }
            if one_sided_agree(&self.fp[..m], &self.f0[..m], &self.fm[..m], d) {
                agreed = true;
                break;
            }
            d *= 1e-2;
        }
        if !agreed {
            return Ok(false);
        }
        for i in 0..m {
            let mut af = 0.0;
            for k in 0..m {
                af += self.jac[(i, k)] * self.f0[k];
            }
            self.w[i] = (self.fp[i] - self.fm[i]) / (2.0 * d) - af;
        }
        Ok(true)
    }

    /// [`Self::jacobians`]; `rebase`: step into the entered mode when `y0` is on a jump of `f`.
    /// Returns whether it did.
    fn jacobians_at<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        rebase: bool,
    ) -> Result<bool, IntegrateError> {
        let m = 2 * self.nq;
        let t = self.state.t;
        let eps3 = 6e-6;
        self.stats.jac_evals += 1;
        let mut near_switch = false;
        for k in 0..m {
            let d0 = eps3 * self.y0[k].abs().max(1.0);
            let mut d = d0;
            // One-sided differences D± = ±(f(y ± d e_k) − f(y)) / d; their mean is the central
            // difference. Where a force has a kink within d of y (a penalty contact about to
            // open or close, gap < d), D+ and D− differ by the contact stiffness and the mean
            // is half a stiffness that neither side of the kink has: the step's linearization
            // is then wrong by O(k h) even for tiny h, the estimate (30)-(31) sees it as
            // error, and the step size collapsed to ~1e-11 s before every contact. So shrink d
            // until both sides agree (the Jacobian of y's own mode), and if they never do (y is
            // on the kink, as after a located contact), take the one-sided difference on the
            // side the state moves to, with the full d.
            // (The side is chosen in `choose_kink_sides` from the direction of motion.)
            let mut agreed = false;
            for _ in 0..5 {
                self.col_perturbed(sys, t, k, d, true)?;
                self.col_perturbed(sys, t, k, -d, false)?;
                if one_sided_agree(&self.fp[..m], &self.f0[..m], &self.fm[..m], d) {
                    agreed = true;
                    break;
                }
                // A switch of the right-hand side lies within d of y0.
                near_switch = true;
                d *= 1e-2;
            }
            if agreed {
                for i in 0..m {
                    self.jac[(i, k)] = (self.fp[i] - self.fm[i]) / (2.0 * d);
                }
            } else {
                self.kink_columns += 1;
                self.col_perturbed(sys, t, k, d0, true)?;
                self.col_perturbed(sys, t, k, -d0, false)?;
                for i in 0..m {
                    self.jac[(i, k)] = (self.fp[i] - self.f0[i]) / d0;
                    self.jalt[(i, k)] = (self.f0[i] - self.fm[i]) / d0;
                }
                self.kinks.push(k);
            }
        }
        if !self.kinks.is_empty() {
            self.choose_kink_sides(sys, t, eps3)?;
        }
        if near_switch && rebase && self.enter_jump(sys, t, eps3)? {
            // Linearized in the entered mode and extrapolated back to `y0`.
            return Ok(true);
        }
        self.time_derivative(sys, t, eps3)?;
        self.jac_ready = true;
        Ok(false)
    }

    /// `y0` may lie on a jump of `f` (a switch lies within the difference step): a force that
    /// switches on with a finite value, as a stop's damping `c δ̇` at `δ = 0` with `δ̇ ≠ 0`.
    /// The linearization at `y0` belongs to the mode the motion leaves; the step's remainder
    /// then holds the jump itself, which does not shrink with `h`, and the error per unit step
    /// (39) cannot be met by any step (the step size collapsed at every such impact). When the
    /// motion enters the jump (`f(y0 + σ ẏ)` does not tend to `f0` as `σ` shrinks), linearize
    /// the entered mode at `y_s = y0 + σ ẏ` and extrapolate it back to `y0`:
    /// `f0 ← f(y_s) − J(y_s) σ ẏ`, `J ← J(y_s)`, `f_t ← f_t(y_s)`. Returns whether it did.
    fn enter_jump<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        eps: f64,
    ) -> Result<bool, IntegrateError> {
        let m = 2 * self.nq;
        let (speed, ymax) = self.motion_scales();
        if speed == 0.0 {
            return Ok(false);
        }
        // σ ‖ẏ‖ = 1e-2 eps ymax: far beyond the switch's distance (below the smallest
        // difference step, 1e-8 eps), small enough that the new mode is linear across it.
        let sigma = 1e-2 * eps * ymax / speed;
        let (mut near, mut far) = (0.0f64, 0.0f64);
        for (s, out) in [(1e-2 * sigma, &mut near), (sigma, &mut far)] {
            self.rhs_along_motion(sys, t, s, false)?;
            *out = (0..m).fold(0.0f64, |a, i| a.max((self.fm[i] - self.f0[i]).abs()));
        }
        // `fm` holds f(y_s); `yp` holds y_s. A smooth (or kinked) f changes ~100 times less
        // over the shorter distance; a jump changes as much.
        if near.is_nan() || near <= 0.1 * far {
            return Ok(false);
        }
        self.y1.copy_from_slice(&self.y0);
        self.vres.copy_from_slice(&self.f0);
        self.y0.copy_from_slice(&self.yp);
        self.f0.copy_from_slice(&self.fm);
        let r = self.jacobians_at(sys, false);
        self.y0.copy_from_slice(&self.y1);
        r?;
        for i in 0..m {
            let mut jd = 0.0;
            for k in 0..m {
                jd += self.jac[(i, k)] * sigma * self.vres[k];
            }
            self.f0[i] -= jd;
        }
        Ok(true)
    }

    /// `f_t` at `(t, y0)` by a central difference.
    fn time_derivative<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        eps3: f64,
    ) -> Result<(), IntegrateError> {
        let m = 2 * self.nq;
        let dt = eps3 * t.abs().max(1.0);
        Self::rhs(
            &mut self.ws,
            &mut self.stats,
            &mut self.lam_tmp,
            sys,
            t + dt,
            &self.y0,
            &mut self.fp,
            true,
        )?;
        Self::rhs(
            &mut self.ws,
            &mut self.stats,
            &mut self.lam_tmp,
            sys,
            t - dt,
            &self.y0,
            &mut self.fm,
            true,
        )?;
        for i in 0..m {
            self.ft[i] = (self.fp[i] - self.fm[i]) / (2.0 * dt);
        }
        Ok(())
    }
}

/// The forward `(f₊ − f₀)/d` and backward `(f₀ − f₋)/d` differences agree to 1e-3 of the
/// largest (at least 1): no switch of the right-hand side lies within `d`.
fn one_sided_agree(fp: &[f64], f0: &[f64], fm: &[f64], d: f64) -> bool {
    let mut dmax: f64 = 1.0;
    let mut diff: f64 = 0.0;
    for ((p, z), m) in fp.iter().zip(f0).zip(fm) {
        let dp = (p - z) / d;
        let dm = (z - m) / d;
        dmax = dmax.max(dp.abs()).max(dm.abs());
        diff = diff.max((dp - dm).abs());
    }
    diff <= 1e-3 * dmax
}

impl<S: MultibodySystem + ?Sized> Integrator<S> for LocalLinearization {
    fn initialize(&mut self, sys: &mut S, x: &MechState) -> Result<(), IntegrateError> {
        dense::validate_settings(&self.settings)?;
        let n = self.nq;
        if x.q.len() != n || x.v.len() != n || sys.n_q() != n || sys.n_c() != self.ws.nc {
            return Err(IntegrateError::Inconsistent {
                t: x.t,
                what: format!(
                    "dimension mismatch: integrator built for n_q = {n}, n_c = {}",
                    self.ws.nc
                ),
            });
        }
        self.stats = Stats::default();
        self.ctrl = self.controller();
        self.state.t = x.t;
        self.state.q.copy_from_slice(&x.q);
        self.state.v.copy_from_slice(&x.v);
        self.y0[..n].copy_from_slice(&x.q);
        self.y0[n..].copy_from_slice(&x.v);
        Self::rhs(
            &mut self.ws,
            &mut self.stats,
            &mut self.state.lambda,
            sys,
            x.t,
            &self.y0,
            &mut self.f0,
            false,
        )?;
        self.h = dense::first_step(&self.settings, x.t, &self.y0, &self.f0, 1);
        self.jac_ready = false;
        self.rhs_stale = false;
        self.initialized = true;
        Ok(())
    }

    fn step(&mut self, sys: &mut S, t_limit: f64) -> Result<f64, IntegrateError> {
        if !self.initialized {
            return Err(IntegrateError::Settings("step before initialize".into()));
        }
        let n = self.nq;
        let m = 2 * n;
        let t = self.state.t;
        let fixed = self.settings.fixed_step.is_some();
        if self.rhs_stale {
            // New inputs: f0 (the linearization point, and the base of the Jacobian's one-sided
            // differences, which a stale f0 turned into "kinks" in every column) again. A kept
            // `A` stays usable (the forcing `w`, taken again below from the new right-hand
            // side, keeps the order for any `A`); a fresh one's `w = f_t` belonged to the old
            // inputs, so it counts as kept now. (A fresh Jacobian at every communication point
            // cost the 1-ms slider-crank 2000 Jacobians in 2 s instead of 101.)
            self.y0[..n].copy_from_slice(&self.state.q);
            self.y0[n..].copy_from_slice(&self.state.v);
            Self::rhs(
                &mut self.ws,
                &mut self.stats,
                &mut self.state.lambda,
                sys,
                t,
                &self.y0,
                &mut self.f0,
                false,
            )?;
            self.rhs_stale = false;
            self.jac_fresh = false;
        }
        if !self.jac_ready {
            self.y0[..n].copy_from_slice(&self.state.q);
            self.y0[n..].copy_from_slice(&self.state.v);
            self.jacobians(sys)?;
        } else if !self.jac_fresh && !self.reused_forcing(sys)? {
            self.jacobians(sys)?;
        }
        let mut h_try = self.h;
        loop {
            let p = dense::plan_step(&self.settings, t, h_try, t_limit)?;
            let h = p.h;
            // A step clipped to the limit may be shorter than h_min (the event locator or a
            // shrinking approach to a switch can end a few ulps before a communication point).
            let sliver = p.clipped && h > 0.0 && h <= h_try;
            if h < dense::h_min(t) && !sliver {
                return Err(IntegrateError::StepTooSmall {
                    t,
                    h,
                    h_min: dense::h_min(t),
                    reason: "local linearization error test".into(),
                });
            }
            let t1 = dense::advance(t, p, t_limit);
            self.core
                .increment(&self.jac, &self.w, &self.f0, h, &mut self.phi)
                .map_err(|what| IntegrateError::NonFinite { t, what })?;
            for i in 0..m {
                self.y1[i] = self.y0[i] + self.phi[i];
            }
            let mut err = 0.0;
            if !fixed {
                // v_n = (f(t1, y1) − g(t1, y1)) / h² (30), g the linearization.
                let r = Self::rhs(
                    &mut self.ws,
                    &mut self.stats,
                    &mut self.lam_tmp,
                    sys,
                    t1,
                    &self.y1,
                    &mut self.fp,
                    false,
                );
                err = match r {
                    Ok(()) => {
                        for i in 0..m {
                            let mut g = self.f0[i] + self.w[i] * h;
                            for k in 0..m {
                                g += self.jac[(i, k)] * self.phi[k];
                            }
                            self.vres[i] = (self.fp[i] - g) / (h * h);
                        }
                        self.core
                            .local_error(&self.jac, &self.vres, h, &mut self.lerr)
                            .map_err(|what| IntegrateError::NonFinite { t, what })?;
                        // The step is projected onto the constraints before it is accepted,
                        // which removes the error's normal part (to first order): measure what
                        // stays. On a kinematically driven mechanism that is nothing, where the
                        // unprojected estimate held the driven motion's whole curvature (a
                        // fully driven slider-crank's start-up stalled at 4e-8 s steps).
                        let (lq, lv) = self.lerr.split_at_mut(n);
                        self.ws.project_tangent(sys, t1, &self.y1[..n], [lq, lv])?;
                        // Error per unit step (39).
                        weighted_rms_norm(
                            &self.lerr,
                            &self.y0,
                            &self.y1,
                            self.settings.rtol,
                            self.settings.atol,
                        ) / h
                    }
                    Err(e) if e.is_recoverable() => f64::INFINITY,
                    Err(e) => return Err(e),
                };
                if err.is_nan() || err > 1.0 {
                    self.stats.rejected_steps += 1;
                    self.stats.error_test_failures += 1;
                    if !self.jac_fresh {
                        // The kept `A` may be what failed (the motion left its linearization,
                        // a force law changed within the step): the same step again with the
                        // Jacobian at `y0`, which is the paper's method.
                        self.jacobians(sys)?;
                        continue;
                    }
                    // k = p = 2 for EPUS: the controller's exponent is 1/(order + 1).
                    h_try = if err.is_finite() {
                        h * self.ctrl.factor(err, 1, false)
                    } else {
                        0.25 * h
                    };
                    continue;
                }
            }
            let (q, v) = self.y1.split_at_mut(n);
            let tol = dense::projection_tol(&self.settings);
            let factorizations = self.ws.project_positions(sys, t1, q, tol)?;
            self.ws.project_velocities(sys, t1, q, v)?;
            if self.ws.nc > 0 {
                self.stats.lu += factorizations as u64 + 1;
            }
            self.state.q.copy_from_slice(q);
            self.state.v.copy_from_slice(v);
            self.state.t = t1;
            self.y0.copy_from_slice(&self.y1);
            Self::rhs(
                &mut self.ws,
                &mut self.stats,
                &mut self.state.lambda,
                sys,
                t1,
                &self.y0,
                &mut self.f0,
                false,
            )?;
            self.stats.steps += 1;
            if fixed {
                self.h = h_try;
            } else {
                let fac = self.ctrl.factor(err, 1, true);
                self.ctrl.accept(err);
                self.h = if p.clipped {
                    (fac * h).max(h_try.min(fac * h_try))
                } else {
                    fac * h
                };
            }
            // Keep `A` for the next step (not with a fixed step: no error test would see a
            // stale linearization there).
            self.jac_age += 1;
            self.jac_fresh = false;
            self.jac_ready = !fixed && self.jac_reusable && self.jac_age < self.max_jacobian_age;
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
        Method::LocalLinearization
    }
    fn set_settings(&mut self, settings: Settings) {
        self.settings = Settings {
            method: Method::LocalLinearization,
            ..settings
        };
    }
    fn rhs_changed(&mut self) {
        self.rhs_stale = true;
    }
    /// From the projected state `x`: the step size, controller and a reusable `A` stay; `f0`
    /// is evaluated at `x` before the next step (as after [`Integrator::rhs_changed`], which
    /// also makes a fresh `A` count as kept: its forcing is taken again at `x`).
    fn restart(&mut self, sys: &mut S, x: &MechState) -> Result<bool, IntegrateError> {
        if !self.initialized || !self.state.assign_same_size(x) {
            return self.initialize(sys, x).map(|()| false);
        }
        self.rhs_stale = true;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept (wrong) `A` with the forcing `w = J f0 − A f0` keeps the local error `O(h³)`
    /// (order 2); with the paper's forcing (`f_t = 0` here) it is `O(h²)`. And the estimate
    /// (30)-(31) still tracks the error. Paper 002's test problem (35) at t = 1/π.
    #[test]
    fn kept_jacobian_with_forcing_keeps_order_two() {
        let f = |y: &[f64]| [-y[1] / (y[2] * y[2]), y[0] / (y[2] * y[2]), 1.0];
        let exact = |t: f64| [(1.0 / t).sin(), (1.0 / t).cos(), t];
        let t0 = 1.0 / std::f64::consts::PI;
        let y0 = exact(t0);
        let f0 = f(&y0);
        let x3 = y0[2];
        // The true Jacobian at y0, then a stale one (as at an earlier state).
        let jac = |y: &[f64]| {
            let x3 = y[2];
            DMatrix::from_row_slice(
                3,
                3,
                &[
                    0.0,
                    -1.0 / (x3 * x3),
                    2.0 * y[1] / (x3 * x3 * x3),
                    1.0 / (x3 * x3),
                    0.0,
                    -2.0 * y[0] / (x3 * x3 * x3),
                    0.0,
                    0.0,
                    0.0,
                ],
            )
        };
        let j = jac(&y0);
        let a = jac(&exact(1.05 * x3));
        let mut jf = [0.0; 3];
        let mut w = [0.0; 3];
        for i in 0..3 {
            for k in 0..3 {
                jf[i] += (j[(i, k)] - a[(i, k)]) * f0[k];
            }
            w[i] = jf[i];
        }
        let mut core = LlCore::new(3);
        let (mut hs, mut with, mut without, mut ratio) = (vec![], vec![], vec![], vec![]);
        for h in [2e-3, 1e-3, 5e-4, 2.5e-4] {
            let ye = exact(t0 + h);
            let err = |forcing: &[f64; 3], core: &mut LlCore| {
                let mut phi = [0.0; 3];
                core.increment(&a, forcing, &f0, h, &mut phi).unwrap();
                let y1: Vec<f64> = (0..3).map(|i| y0[i] + phi[i]).collect();
                let e = (0..3).fold(0.0f64, |m, i| m.max((y1[i] - ye[i]).abs()));
                (e, y1, phi)
            };
            let (e_with, y1, phi) = err(&w, &mut core);
            let (e_without, _, _) = err(&[0.0; 3], &mut core);
            // The estimate (30)-(31) with the kept `A` and the corrected linear model.
            let f1 = f(&y1);
            let mut v = [0.0; 3];
            for i in 0..3 {
                let mut g = f0[i] + w[i] * h;
                for k in 0..3 {
                    g += a[(i, k)] * phi[k];
                }
                v[i] = (f1[i] - g) / (h * h);
            }
            let mut l = [0.0; 3];
            core.local_error(&a, &v, h, &mut l).unwrap();
            let est = l.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            hs.push(h);
            with.push(e_with);
            without.push(e_without);
            ratio.push(est / e_with);
        }
        let slope = |e: &[f64]| (e[0] / e[e.len() - 1]).ln() / (hs[0] / hs[hs.len() - 1]).ln();
        assert!((slope(&with) - 3.0).abs() < 0.15, "{with:?}");
        assert!((slope(&without) - 2.0).abs() < 0.15, "{without:?}");
        for r in &ratio {
            assert!((r - 1.0).abs() < 0.1, "estimate / error {ratio:?}");
        }
    }

    #[test]
    fn expm_matches_closed_forms() {
        // Rotation generator: exp([[0, −w], [w, 0]] t) = [[cos, −sin], [sin, cos]], large norm
        // to exercise the squaring.
        let mut e = Expm::new(2);
        let w = 37.0;
        let a = DMatrix::from_row_slice(2, 2, &[0.0, -w, w, 0.0]);
        e.compute(&a).unwrap();
        let r = e.result();
        assert!(
            (r[(0, 0)] - w.cos()).abs() < 1e-12 && (r[(1, 0)] - w.sin()).abs() < 1e-12,
            "{r}"
        );
        // Nilpotent Jordan block: exp(N) = I + N + N²/2.
        let mut e = Expm::new(3);
        let n = DMatrix::from_row_slice(3, 3, &[0.0, 2.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0]);
        e.compute(&n).unwrap();
        assert!(
            (e.result()[(0, 2)] - 3.0).abs() < 1e-14 && (e.result()[(0, 1)] - 2.0).abs() < 1e-14
        );
        // Diagonal.
        let d = DMatrix::from_row_slice(3, 3, &[-2.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 4.0]);
        e.compute(&d).unwrap();
        for (i, x) in [-2.0f64, 0.5, 4.0].iter().enumerate() {
            assert!((e.result()[(i, i)] - x.exp()).abs() < 1e-13 * x.exp());
        }
    }
}
