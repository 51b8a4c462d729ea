//! Rosenbrock–Nyström methods on the state-space ODE by generalized coordinate partitioning
//! (paper 000): the order-4 L-stable method with 4 stages, 3 function evaluations and an
//! embedded order-3 solution, and the order-2 W-method of Verwer et al.
//!
//! **Partitioning** (section 1): Gaussian elimination of `Φq` with full pivoting picks the
//! dependent coordinates `u` (pivot columns); the rest are the independent `w`. Pivoting is
//! done on the plain and on the column-equilibrated Jacobian and the better-conditioned
//! choice kept (see `choose_partition` for why). Given `(t, w,
//! ẇ)`, `u` is recovered by Newton on `Φ(u, w, t) = 0`, `u̇ = Hẇ − Φu⁻¹Φt` with
//! `H = −Φu⁻¹Φw`, and the state-space ODE (9) is `M̂ ẅ = Q̂` with
//! `M̂ = TᵀMT`, `Q̂ = Tᵀ(Q − M g)`, `T = [H; I]`, `g = [Φu⁻¹τ; 0]` (eqs. (10a), (10b)). The
//! partition is kept while the 1-norm condition number of `Φu` stays within 25 % of its value
//! at the last partitioning (section 4) and `‖Φq‖₁‖Φu⁻¹‖₁` within a factor 2 of its value
//! there (not in the paper: the condition number is blind to a dependent Euler parameter
//! going to zero, see `REL_GROWTH`), and re-chosen at an accepted step otherwise.
//!
//! **Method** (Theorem 2.1, eqs. (25a)–(25f)), in the `M̂`-scaled form (43)–(45): the
//! iteration matrix `Π = M̂/γ² − (h/γ) M̂J₂ − h² M̂J₁` is formed with the reduced mass matrix and
//! factored once per step. Deviations, stated plainly:
//! - `J₁ = ∂ẅ/∂w`, `J₂ = ∂ẅ/∂ẇ` and `∂ẅ/∂t` are central finite differences of the
//!   state-space ODE (each evaluation recovers `u` by Newton to round-off), not the analytic
//!   expressions of section 3; their error (~1e-10 relative) is far below the test tolerances.
//!   A perturbed `ẇ` moves no position, so `J₂`'s columns evaluate only the velocity-level
//!   half on the step start's `u`, `H` and `M̂` (`eval_velocities`).
//! - The stage right side uses `M̂ₙ f(stage)` where (45) writes `Q̂(stage)`: that equality
//!   holds only if `M̂` is constant over the step, which it is not for Cartesian models (`H`
//!   changes), and using `Q̂` directly costs the method its order.
//!
//! **Coefficients**: from paper 000's tables to the printed precision. Two misprints in the
//! tables were found by re-deriving the Nyström coefficients from the base method (unit test
//! below): the base coefficient `γ₂₁` is `−2.3419…` (the sign is lost in the table; `γ₂ =
//! γ + γ₂₁ = −1.7692` as printed confirms it), and `a₂₁ = α₂₁/γ = 2.0`, not `0.2`. With these,
//! all 8 order-4 conditions of the base method hold to 1e-16 and every other printed
//! Nyström coefficient agrees with the formulas of Theorem 2.1.
//!
//! **Step control** (13)–(16): weighted RMS of the difference between the order-4 and the
//! embedded order-3 (W-method: order 2 / 1) solutions in `w` and `ẇ`, elementary controller
//! with exponent `1/(q+1)`, `q` the embedded order.

#![allow(clippy::needless_range_loop)] // index loops are clearer in dense numerics
#![allow(clippy::excessive_precision)] // coefficients are quoted digit for digit from paper 000

use super::dense::{self, Lu};
use super::step_control::{weighted_rms_norm, StepController};
use super::{IntegrateError, Integrator, MechState, Method, MultibodySystem, Settings, Stats};
use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

/// A Rosenbrock–Nyström scheme in the variables of Theorem 2.1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RnTableau {
    pub s: usize,
    pub gamma: f64,
    /// `α_i` (stage times) and `γ_i = Σ_j γ_ij`.
    pub alpha: Vec<f64>,
    pub gamma_i: Vec<f64>,
    /// Strictly lower triangular `s × s`, row-major.
    pub a: Vec<f64>,
    pub c: Vec<f64>,
    pub delta: Vec<f64>,
    pub theta: Vec<f64>,
    pub m: Vec<f64>,
    pub m_hat: Vec<f64>,
    pub mu: Vec<f64>,
    pub mu_hat: Vec<f64>,
    /// Order of the main and of the embedded solution.
    pub order: u32,
    pub embedded_order: u32,
}

impl RnTableau {
    /// The order-4 L-stable method of paper 000 (γ = 0.57281606), embedded order 3.
    pub fn rn4() -> Self {
        let z = 0.0;
        RnTableau {
            s: 4,
            gamma: 0.57281606,
            alpha: vec![
                0.0,
                1.14563212,
                0.655214975973133829477748,
                0.655214975973133829477748,
            ],
            gamma_i: vec![
                0.57281606,
                -1.769177067112013949170520,
                0.759293964293209853670967,
                -0.104894621490955803206743,
            ],
            #[rustfmt::skip]
            a: vec![
                z, z, z, z,
                2.0, z, z, z,
                1.86794814949823713234476, 0.23444556851723885002322, z, z,
                1.86794814949823713234476, 0.23444556851723885002322, 0.0, z,
            ],
            #[rustfmt::skip]
            c: vec![
                z, z, z, z,
                -7.137649943349979830369260, z, z, z,
                2.580923666509657714488050, 0.651629887302032023387417, z, z,
                -2.137115266506619116806370, -0.321469531339951070769241, -0.694966049282445225157329, z,
            ],
            #[rustfmt::skip]
            delta: vec![
                z, z, z, z,
                -1.196361007112013949170520, z, z, z,
                1.470280254409780714633870, 0.348105837679204490016704, z, z,
                0.003765094355556165798974, -0.109762486758103255675398, -0.228031035973133829477744, z,
            ],
            #[rustfmt::skip]
            theta: vec![
                z, z, z, z,
                1.14563212, z, z, z,
                0.789509162815638629626980, 0.134294186842504800149232, z, z,
                0.789509162815638629626980, 0.134294186842504800149232, 0.0, z,
            ],
            m: vec![
                2.255566228604565243728840,
                0.287055063194157607662630,
                0.435311963379983213402707,
                1.093507656403247803214820,
            ],
            m_hat: vec![
                2.068399160527583734258670,
                0.238681352067532797956493,
                0.363373345435391708261747,
                0.366557127936155144309163,
            ],
            mu: vec![
                1.592750819409585342074900,
                0.195938266310250609693329,
                0.0,
                0.626378747320742177841171,
            ],
            mu_hat: vec![
                1.434903971848209472627100,
                0.222978672588698369045153,
                0.124559686414702049774897,
                0.209969809789304321311906,
            ],
            order: 4,
            embedded_order: 3,
        }
    }

    /// The order-2 W-method (Verwer et al. 1997) as tabulated in paper 000, `γ = 1 + 1/√2`
    /// (the table prints 14 digits of closed-form values; we use the closed forms).
    pub fn w2() -> Self {
        let r2 = std::f64::consts::SQRT_2;
        let g = 1.0 + 1.0 / r2;
        RnTableau {
            s: 2,
            gamma: g,
            alpha: vec![0.0, 1.0],
            gamma_i: vec![g, -g],
            a: vec![0.0, 0.0, 2.0 - r2, 0.0],
            c: vec![0.0, 0.0, -2.0 * (2.0 - r2), 0.0],
            delta: vec![0.0, 0.0, -(1.0 + r2), 0.0],
            theta: vec![0.0, 0.0, 1.0, 0.0],
            m: vec![1.5 * (2.0 - r2), 1.0 - 1.0 / r2],
            m_hat: vec![2.0 * (2.0 - r2), 2.0 - r2],
            mu: vec![1.5 - 1.0 / r2, 0.5],
            mu_hat: vec![2.0 - r2, 1.0],
            order: 2,
            embedded_order: 1,
        }
    }

    fn at(v: &[f64], s: usize, i: usize, j: usize) -> f64 {
        v[i * s + j]
    }

    /// Stage `i` is evaluated at the same arguments as stage `i − 1` (paper 000: stage 4 of
    /// the order-4 method), so its function value is reused.
    fn reuses_previous(&self, i: usize) -> bool {
        if i == 0 {
            return false;
        }
        let s = self.s;
        self.alpha[i] == self.alpha[i - 1]
            && (0..s).all(|j| Self::at(&self.theta, s, i, j) == Self::at(&self.theta, s, i - 1, j))
            && (0..s).all(|j| Self::at(&self.a, s, i, j) == Self::at(&self.a, s, i - 1, j))
    }
}

/// The coordinate partition.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Partition {
    dep: Vec<usize>,
    ind: Vec<usize>,
    /// 1-norm condition number of `Φu` when the partition was chosen.
    cond_ref: f64,
    /// `‖Φq‖₁ ‖Φu⁻¹‖₁` when the partition was chosen (see `rel_last`).
    rel_ref: f64,
}

/// Rosenbrock–Nyström (order 4) or W-method (order 2) on the state-space ODE.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RosenbrockNystrom {
    method: Method,
    tab: RnTableau,
    settings: Settings,
    state: MechState,
    stats: Stats,
    h: f64,
    ctrl: StepController,
    nq: usize,
    nc: usize,
    nd: usize,
    part: Partition,
    /// Partitions chosen so far (diagnostics).
    pub repartitions: u64,
    used: Vec<bool>,
    alt_dep: Vec<usize>,
    alt_ind: Vec<usize>,
    /// Condition number of `Φu` at the last recovery.
    cond_last: f64,
    /// `‖Φq‖₁ ‖Φu⁻¹‖₁` at the last factorization of `Φu`: its conditioning relative to the
    /// whole constraint Jacobian. `cond(Φu)` cannot see a dependent block that shrinks as a
    /// whole against the independent columns: the Euler-parameter normalization alone gives
    /// the 1×1 block `Φu = e₀`, condition number 1 down to e₀ = 0.
    rel_last: f64,
    /// Jacobians `J₁`, `J₂`, `f_t` belong to the current step start.
    jac_ready: bool,
    /// Accepted steps since the Jacobian was evaluated.
    jac_age: u32,
    // Evaluation workspace.
    m: DMatrix<f64>,
    jac: DMatrix<f64>,
    elim: DMatrix<f64>,
    phiu: Lu,
    phiu_inv: DMatrix<f64>,
    hmat: DMatrix<f64>,
    ht: Vec<f64>,
    mt: DMatrix<f64>,
    mhat: DMatrix<f64>,
    mhat_lu: Lu,
    force: Vec<f64>,
    phi: Vec<f64>,
    phit: Vec<f64>,
    tau: Vec<f64>,
    g: Vec<f64>,
    qdd: Vec<f64>,
    colv: Vec<f64>,
    qe: Vec<f64>,
    ve: Vec<f64>,
    // Step workspace (independent coordinates).
    q0: Vec<f64>,
    v0: Vec<f64>,
    h0: DMatrix<f64>,
    ht0: Vec<f64>,
    w0: Vec<f64>,
    wd0: Vec<f64>,
    f0: Vec<f64>,
    fs: Vec<f64>,
    ww: Vec<f64>,
    wwd: Vec<f64>,
    fout: Vec<f64>,
    fp: Vec<f64>,
    fm: Vec<f64>,
    ft: Vec<f64>,
    j1: DMatrix<f64>,
    j2: DMatrix<f64>,
    mhat0: DMatrix<f64>,
    mj1: DMatrix<f64>,
    mj2: DMatrix<f64>,
    pi: Lu,
    z: Vec<Vec<f64>>,
    r: Vec<f64>,
    tmp: Vec<f64>,
    tmp2: Vec<f64>,
    y_old: Vec<f64>,
    y_new: Vec<f64>,
    err: Vec<f64>,
    /// Start-of-step data belong to the right-hand side before [`Integrator::rhs_changed`].
    rhs_stale: bool,
    initialized: bool,
}

const NEWTON_ITERS: usize = 12;
/// Growth of `‖Φq‖₁ ‖Φu⁻¹‖₁` that re-chooses the partition. For a body's normalization row
/// alone it is the largest |eᵢ| over the dependent |e_d|, and 2 bounds the amplification of
/// the independent parameters' errors into e_d by 2; it is laxer than the 25 % of `cond(Φu)`
/// so that partitions that were fine by that rule are kept.
const REL_GROWTH: f64 = 2.0;
/// Steps the W-method keeps a Jacobian.
const W_JACOBIAN_AGE: u32 = 4;

/// 1-norm of column `j`.
fn col_abs_sum(m: &DMatrix<f64>, j: usize) -> f64 {
    m.column(j).iter().map(|x| x.abs()).sum()
}

impl RosenbrockNystrom {
    /// `settings.method` selects the scheme: `WMethod` gives the order-2 W-method, anything
    /// else the order-4 Rosenbrock–Nyström method.
    pub fn new(settings: Settings, n_q: usize, n_c: usize) -> Self {
        let (method, tab) = if settings.method == Method::WMethod {
            (Method::WMethod, RnTableau::w2())
        } else {
            (Method::RosenbrockNystrom, RnTableau::rn4())
        };
        let (nq, nc) = (n_q, n_c);
        let nd = nq.saturating_sub(nc);
        let s = tab.s;
        RosenbrockNystrom {
            method,
            tab,
            settings: Settings { method, ..settings },
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
            nd,
            part: Partition {
                dep: (0..nc).collect(),
                ind: (nc..nq).collect(),
                cond_ref: 1.0,
                rel_ref: 1.0,
            },
            repartitions: 0,
            used: vec![false; nq],
            alt_dep: Vec::with_capacity(nc),
            alt_ind: Vec::with_capacity(nq),
            cond_last: 1.0,
            rel_last: 1.0,
            jac_ready: false,
            jac_age: 0,
            m: DMatrix::zeros(nq, nq),
            jac: DMatrix::zeros(nc, nq),
            elim: DMatrix::zeros(nc, nq),
            phiu: Lu::new(nc),
            phiu_inv: DMatrix::zeros(nc, nc),
            hmat: DMatrix::zeros(nc, nd),
            ht: vec![0.0; nc],
            mt: DMatrix::zeros(nq, nd),
            mhat: DMatrix::zeros(nd, nd),
            mhat_lu: Lu::new(nd),
            force: vec![0.0; nq],
            phi: vec![0.0; nc],
            phit: vec![0.0; nc],
            tau: vec![0.0; nc],
            g: vec![0.0; nq],
            qdd: vec![0.0; nq],
            colv: vec![0.0; nc.max(nd)],
            qe: vec![0.0; nq],
            ve: vec![0.0; nq],
            q0: vec![0.0; nq],
            v0: vec![0.0; nq],
            h0: DMatrix::zeros(nc, nd),
            ht0: vec![0.0; nc],
            w0: vec![0.0; nd],
            wd0: vec![0.0; nd],
            f0: vec![0.0; nd],
            fs: vec![0.0; nd],
            ww: vec![0.0; nd],
            wwd: vec![0.0; nd],
            fout: vec![0.0; nd],
            fp: vec![0.0; nd],
            fm: vec![0.0; nd],
            ft: vec![0.0; nd],
            j1: DMatrix::zeros(nd, nd),
            j2: DMatrix::zeros(nd, nd),
            mhat0: DMatrix::zeros(nd, nd),
            mj1: DMatrix::zeros(nd, nd),
            mj2: DMatrix::zeros(nd, nd),
            pi: Lu::new(nd),
            z: vec![vec![0.0; nd]; s],
            r: vec![0.0; nd],
            tmp: vec![0.0; nd],
            tmp2: vec![0.0; nd],
            y_old: vec![0.0; 2 * nd],
            y_new: vec![0.0; 2 * nd],
            err: vec![0.0; 2 * nd],
            rhs_stale: false,
            initialized: false,
        }
    }

    pub fn tableau(&self) -> &RnTableau {
        &self.tab
    }

    /// Dependent coordinates of the current partition.
    pub fn dependent(&self) -> &[usize] {
        &self.part.dep
    }

    /// Factor `Φu` from `self.jac` and return its 1-norm condition number; sets `rel_last`.
    fn factor_phiu(&mut self, t: f64) -> Result<f64, IntegrateError> {
        let norm = self.factor_phiu_lu(t)?;
        Ok(self.invert_phiu(norm))
    }

    /// Factor `Φu` from `self.jac` (the LU only: what a Newton iteration needs); returns the
    /// 1-norm of `Φu` for [`Self::invert_phiu`].
    fn factor_phiu_lu(&mut self, t: f64) -> Result<f64, IntegrateError> {
        let nc = self.nc;
        for (k, &c) in self.part.dep.iter().enumerate() {
            for i in 0..nc {
                self.phiu.a[(i, k)] = self.jac[(i, c)];
            }
        }
        let norm = (0..nc)
            .map(|j| (0..nc).map(|i| self.phiu.a[(i, j)].abs()).sum::<f64>())
            .fold(0.0, f64::max);
        self.phiu.factor().map_err(|k| IntegrateError::Singular {
            t,
            what: format!("dependent constraint Jacobian Φu (partition degenerate), pivot {k}"),
        })?;
        Ok(norm)
    }

    /// `Φu⁻¹` from the factored `Φu` (`norm` its 1-norm); sets `rel_last`, returns the
    /// condition number.
    fn invert_phiu(&mut self, norm: f64) -> f64 {
        let nc = self.nc;
        for j in 0..nc {
            self.colv[..nc].fill(0.0);
            self.colv[j] = 1.0;
            self.phiu.solve(&mut self.colv[..nc]);
            for i in 0..nc {
                self.phiu_inv[(i, j)] = self.colv[i];
            }
        }
        let inv_norm = (0..nc)
            .map(|j| (0..nc).map(|i| self.phiu_inv[(i, j)].abs()).sum::<f64>())
            .fold(0.0, f64::max);
        let jac_norm = (0..self.nq)
            .map(|j| (0..nc).map(|i| self.jac[(i, j)].abs()).sum::<f64>())
            .fold(0.0, f64::max);
        self.rel_last = jac_norm * inv_norm;
        norm * inv_norm
    }

    /// Gaussian elimination of `self.jac` with full pivoting, optionally with the columns
    /// equilibrated to unit 2-norm first; the pivot columns become `part.dep`.
    fn pivot(&mut self, t: f64, equilibrate: bool) -> Result<(), IntegrateError> {
        let (nq, nc) = (self.nq, self.nc);
        self.elim.copy_from(&self.jac);
        if equilibrate {
            let col_norm = |m: &DMatrix<f64>, j: usize| {
                (0..nc).map(|i| m[(i, j)] * m[(i, j)]).sum::<f64>().sqrt()
            };
            let largest = (0..nq).map(|j| col_norm(&self.elim, j)).fold(0.0, f64::max);
            for j in 0..nq {
                let norm = col_norm(&self.elim, j);
                // A column that is zero up to round-off (a coordinate the constraints do not
                // involve, e.g. the chassis height of the quarter car, whose column picks up
                // 1e-139 from a rotation left at round-off by a projection) must stay zero:
                // scaled to unit norm it looked like the best pivot and made `Φu` singular.
                // (Division, not multiplication by 1/norm: near-ties between pivots must be
                // broken as before, or partitions, and results, shift at round-off level.)
                let keep = norm > f64::EPSILON * largest;
                for i in 0..nc {
                    if keep {
                        self.elim[(i, j)] /= norm;
                    } else {
                        self.elim[(i, j)] = 0.0;
                    }
                }
            }
        }
        let scale = self.elim.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        self.part.dep.clear();
        self.part.ind.clear();
        self.used.fill(false);
        for k in 0..nc {
            let (mut bi, mut bj, mut best) = (k, usize::MAX, -1.0);
            for i in k..nc {
                for j in 0..nq {
                    if self.used[j] {
                        continue;
                    }
                    let a = self.elim[(i, j)].abs();
                    // Equilibrated, a column with a single entry (an Euler-parameter column
                    // of the normalization row alone) scales to exactly ±1, so all of a body's
                    // Euler parameters tie and the first one, e₀, won even at e₀ ≈ 0. An exact
                    // tie goes to the column that is larger in the unscaled Jacobian.
                    let better = a > best
                        || (equilibrate
                            && a == best
                            && bj != usize::MAX
                            && col_abs_sum(&self.jac, j) > col_abs_sum(&self.jac, bj));
                    if better {
                        best = a;
                        bi = i;
                        bj = j;
                    }
                }
            }
            if bj == usize::MAX || best <= 1e-12 * scale.max(f64::MIN_POSITIVE) {
                return Err(IntegrateError::Singular {
                    t,
                    what: format!(
                        "constraint Jacobian has rank {k} < {nc} (redundant constraints)"
                    ),
                });
            }
            self.elim.swap_rows(k, bi);
            self.used[bj] = true;
            self.part.dep.push(bj);
            let p = self.elim[(k, bj)];
            for i in k + 1..nc {
                let l = self.elim[(i, bj)] / p;
                if l != 0.0 {
                    for j in 0..nq {
                        let x = self.elim[(k, j)];
                        self.elim[(i, j)] -= l * x;
                    }
                }
            }
        }
        self.part.dep.sort_unstable();
        for j in 0..nq {
            if !self.used[j] {
                self.part.ind.push(j);
            }
        }
        Ok(())
    }

    /// Choose the dependent coordinates (paper 000: full-pivoting elimination of `Φq`).
    /// Plain full pivoting depends on the units of the coordinates (a rotation's column holds
    /// lever arms, a translation's direction cosines); pivoting on the column-equilibrated
    /// Jacobian does not, but a column with a single small entry is then blown up to 1. So both
    /// are computed and the equilibrated choice is kept unless its `Φu` is worse conditioned
    /// by more than 25 % (the same margin as the repartition rule). On paper 000's stiff
    /// pendulum in `(x, y, θ)` coordinates plain pivoting makes the bar-2 angle dependent and
    /// the θ1 error at tol 1e-2 was 0.76; with the angles independent it is 5e-2 (the paper's
    /// Table 1 value); on the Cartesian chain the equilibrated choice alone ran into a
    /// singular `Φu` that it kept re-choosing.
    fn choose_partition<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        q: &[f64],
    ) -> Result<(), IntegrateError> {
        sys.constraint_jacobian(t, q, &mut self.jac);
        self.pivot(t, false)?;
        let cond_plain = self.factor_phiu(t)?;
        self.alt_dep.clone_from(&self.part.dep);
        self.alt_ind.clone_from(&self.part.ind);
        // Should the equilibrated choice still be singular in the unscaled Jacobian, the
        // plain one (already known to be regular) is kept.
        let cond_eq = match self.pivot(t, true) {
            Ok(()) => self.factor_phiu(t).unwrap_or(f64::INFINITY),
            Err(_) => f64::INFINITY,
        };
        self.part.cond_ref = cond_eq;
        if cond_eq > 1.25 * cond_plain {
            std::mem::swap(&mut self.part.dep, &mut self.alt_dep);
            std::mem::swap(&mut self.part.ind, &mut self.alt_ind);
            self.part.cond_ref = self.factor_phiu(t)?;
        }
        // `rel_last` belongs to the last factorization, which is the chosen partition's.
        self.part.rel_ref = self.rel_last;
        self.cond_last = self.part.cond_ref;
        self.repartitions += 1;
        Ok(())
    }

    /// Recover `u` in `self.qe` (independent part already set, dependent part holding the
    /// guess) by Newton; leaves `jac`, `Φu` factored at the solution.
    fn recover_positions<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
    ) -> Result<(), IntegrateError> {
        let nc = self.nc;
        let scale = dense::inf_norm(&self.qe).max(1.0);
        let mut last = f64::INFINITY;
        for it in 0..NEWTON_ITERS {
            sys.constraints(t, &self.qe, &mut self.phi);
            sys.constraint_jacobian(t, &self.qe, &mut self.jac);
            // The LU only: `Φu⁻¹` (nc solves) is needed at the solution alone.
            let norm = self.factor_phiu_lu(t)?;
            let r = dense::inf_norm(&self.phi);
            if !r.is_finite() {
                return Err(IntegrateError::NonFinite {
                    t,
                    what: "constraints while recovering dependent coordinates".into(),
                });
            }
            // Stop at round-off: the residual no longer decreases, or it is already tiny.
            if r <= 1e-15 * scale || (it > 1 && r >= 0.5 * last && r <= 1e-10 * scale) {
                self.cond_last = self.invert_phiu(norm);
                return Ok(());
            }
            last = r;
            self.colv[..nc].copy_from_slice(&self.phi);
            self.phiu.solve(&mut self.colv[..nc]);
            for (k, &c) in self.part.dep.iter().enumerate() {
                self.qe[c] -= self.colv[k];
            }
        }
        sys.constraints(t, &self.qe, &mut self.phi);
        if dense::inf_norm(&self.phi) <= 1e-10 * scale {
            sys.constraint_jacobian(t, &self.qe, &mut self.jac);
            self.cond_last = self.factor_phiu(t)?;
            return Ok(());
        }
        Err(IntegrateError::NewtonFailed {
            t,
            failures: NEWTON_ITERS as u32,
        })
    }

    /// State-space evaluation at `(t, w, ẇ) = (t, self.ww, self.wwd)`: recovers `qe`, `ve`
    /// (the dependent coordinates predicted from the step start, `dt` after it), writes `ẅ`
    /// into `self.fout` (`M̂` left in `mhat`).
    fn eval<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        dt: f64,
        jacobian: bool,
    ) -> Result<(), IntegrateError> {
        self.eval_positions(sys, t, dt)?;
        self.eval_velocities(sys, t, jacobian)
    }

    /// The position-level half of [`Self::eval`] at `(t, self.ww)`: `qe`, `Φu⁻¹`, `H`, `h_t`,
    /// `M`, `MT`, `M̂` and its LU.
    fn eval_positions<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        dt: f64,
    ) -> Result<(), IntegrateError> {
        let (nq, nc, nd) = (self.nq, self.nc, self.nd);
        let w = &self.ww;
        // Tangent predictor from the step start: u ≈ u_n + H_n (w − w_n) + h_t,n Δt.
        self.qe.copy_from_slice(&self.q0);
        for (k, &c) in self.part.ind.iter().enumerate() {
            self.qe[c] = w[k];
        }
        for (i, &c) in self.part.dep.iter().enumerate() {
            let mut s = self.ht0[i] * dt;
            for k in 0..nd {
                s += self.h0[(i, k)] * (w[k] - self.w0[k]);
            }
            self.qe[c] += s;
        }
        if nc > 0 {
            self.recover_positions(sys, t)?;
        }
        // H = −Φu⁻¹ Φw, h_t = −Φu⁻¹ Φt, u̇ = H ẇ + h_t. The dense products here and below run
        // column by column (axpy on contiguous columns, independent sums per row) and add in
        // the same order as the plain dot products, so the numbers are those of a dot product.
        if nc > 0 {
            sys.constraint_time_derivative(t, &self.qe, &mut self.phit);
            let inv = self.phiu_inv.as_slice();
            for (k, &c) in self.part.ind.iter().enumerate() {
                let hk = &mut self.hmat.as_mut_slice()[k * nc..(k + 1) * nc];
                hk.fill(0.0);
                for l in 0..nc {
                    let x = self.jac[(l, c)];
                    for (h, &a) in hk.iter_mut().zip(&inv[l * nc..(l + 1) * nc]) {
                        *h -= a * x;
                    }
                }
            }
            for i in 0..nc {
                let mut s = 0.0;
                for l in 0..nc {
                    s -= self.phiu_inv[(i, l)] * self.phit[l];
                }
                self.ht[i] = s;
            }
        }
        sys.mass_matrix(t, &self.qe, &mut self.m);
        // MT = M T (T: rows dep = H, rows ind = I), M̂ = Tᵀ MT.
        let m = self.m.as_slice();
        for k in 0..nd {
            let ck = self.part.ind[k];
            let col = &mut self.mt.as_mut_slice()[k * nq..(k + 1) * nq];
            col.copy_from_slice(&m[ck * nq..(ck + 1) * nq]);
            for (i, &c) in self.part.dep.iter().enumerate() {
                let h = self.hmat[(i, k)];
                for (x, &a) in col.iter_mut().zip(&m[c * nq..(c + 1) * nq]) {
                    *x += a * h;
                }
            }
        }
        // H's row i, `H[(i, k)]` over k, is every nc-th entry from i (column-major).
        let hs = self.hmat.as_slice();
        for l in 0..nd {
            let mt = &self.mt.as_slice()[l * nq..(l + 1) * nq];
            let col = &mut self.mhat.as_mut_slice()[l * nd..(l + 1) * nd];
            for (y, &r) in col.iter_mut().zip(&self.part.ind) {
                *y = mt[r];
            }
            for (i, &c) in self.part.dep.iter().enumerate() {
                let x = mt[c];
                for (y, &h) in col.iter_mut().zip(hs.iter().skip(i).step_by(nc)) {
                    *y += h * x;
                }
            }
        }
        self.mhat_lu.a.copy_from(&self.mhat);
        self.mhat_lu
            .factor()
            .map_err(|k| IntegrateError::Singular {
                t,
                what: format!("reduced mass matrix M̂, pivot {k}"),
            })?;
        Ok(())
    }

    /// The velocity-level half of [`Self::eval`] at `(t, self.wwd)` on the positions of the
    /// last [`Self::eval_positions`]: `ve`, `Q`, `g`, `Q̂`, and `ẅ = M̂⁻¹ Q̂` in `fout`. Alone it
    /// is a whole evaluation at a changed `ẇ` (what the columns of `J₂` need): the positions,
    /// `H` and `M̂` do not depend on `ẇ`.
    fn eval_velocities<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        jacobian: bool,
    ) -> Result<(), IntegrateError> {
        let (nq, nc, nd) = (self.nq, self.nc, self.nd);
        self.stats.f_evals += 1;
        if jacobian {
            self.stats.f_evals_jacobian += 1;
        }
        for (k, &c) in self.part.ind.iter().enumerate() {
            self.ve[c] = self.wwd[k];
        }
        for (i, &c) in self.part.dep.iter().enumerate() {
            let mut s = self.ht[i];
            for k in 0..nd {
                s += self.hmat[(i, k)] * self.wwd[k];
            }
            self.ve[c] = s;
        }
        sys.forces(t, &self.qe, &self.ve, &mut self.force);
        self.g.fill(0.0);
        if nc > 0 {
            sys.acceleration_rhs(t, &self.qe, &self.ve, &mut self.tau);
            for (i, &c) in self.part.dep.iter().enumerate() {
                let mut s = 0.0;
                for l in 0..nc {
                    s += self.phiu_inv[(i, l)] * self.tau[l];
                }
                self.g[c] = s;
            }
        }
        // Q̂ = Tᵀ (Q − M g).
        self.qdd.copy_from_slice(&self.force); // Q − M g (temporarily)
        let m = self.m.as_slice();
        for j in 0..nq {
            let gj = self.g[j];
            for (x, &a) in self.qdd.iter_mut().zip(&m[j * nq..(j + 1) * nq]) {
                *x -= a * gj;
            }
        }
        for k in 0..nd {
            self.fout[k] = self.qdd[self.part.ind[k]];
        }
        let hs = self.hmat.as_slice();
        for (i, &c) in self.part.dep.iter().enumerate() {
            let x = self.qdd[c];
            for (y, &h) in self.fout.iter_mut().zip(hs.iter().skip(i).step_by(nc)) {
                *y += h * x;
            }
        }
        self.mhat_lu.solve(&mut self.fout);
        if !dense::all_finite(&self.fout) {
            return Err(IntegrateError::NonFinite {
                t,
                what: "state-space accelerations".into(),
            });
        }
        Ok(())
    }

    /// Full accelerations and multipliers at the last evaluated point (`qe`, `ve`, `ẅ`):
    /// `q̈ = T ẅ + g`, `Φuᵀ λ = (Q − M q̈)_u`.
    fn multipliers(&mut self) {
        let wdd = &self.fout;
        let (nq, nc, nd) = (self.nq, self.nc, self.nd);
        if nc == 0 {
            return;
        }
        for (k, &c) in self.part.ind.iter().enumerate() {
            self.qdd[c] = wdd[k];
        }
        for (i, &c) in self.part.dep.iter().enumerate() {
            let mut s = self.g[c];
            for k in 0..nd {
                s += self.hmat[(i, k)] * wdd[k];
            }
            self.qdd[c] = s;
        }
        for (i, &c) in self.part.dep.iter().enumerate() {
            let mut s = self.force[c];
            for j in 0..nq {
                s -= self.m[(c, j)] * self.qdd[j];
            }
            self.colv[i] = s;
        }
        self.phiu.solve_transpose(&mut self.colv[..nc]);
        self.state.lambda.copy_from_slice(&self.colv[..nc]);
    }

    /// Start-of-step data: `w0`, `ẇ0`, `f0`, `H0`, `M̂0` at the current state.
    fn start_data<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
    ) -> Result<(), IntegrateError> {
        let t = self.state.t;
        self.q0.copy_from_slice(&self.state.q);
        self.v0.copy_from_slice(&self.state.v);
        for (k, &c) in self.part.ind.iter().enumerate() {
            self.w0[k] = self.state.q[c];
            self.wd0[k] = self.state.v[c];
        }
        self.ht0.fill(0.0);
        self.h0.fill(0.0);
        self.ww.copy_from_slice(&self.w0);
        self.wwd.copy_from_slice(&self.wd0);
        self.eval(sys, t, 0.0, false)?;
        self.f0.copy_from_slice(&self.fout);
        self.multipliers();
        self.h0.copy_from(&self.hmat);
        self.ht0.copy_from_slice(&self.ht);
        self.mhat0.copy_from(&self.mhat);
        Ok(())
    }
}

impl RosenbrockNystrom {
    /// `J₁`, `J₂`, `∂ẅ/∂t` at the step start by central differences, then `M̂J₁`, `M̂J₂`.
    fn jacobians<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
    ) -> Result<(), IntegrateError> {
        let nd = self.nd;
        let t = self.state.t;
        // Cube root of the machine epsilon: balances truncation and round-off.
        let eps3 = 6e-6;
        self.stats.jac_evals += 1;
        // The step start once, in full: `J₂`'s columns (`ẇ` perturbed) change no position
        // and reuse its `qe`, `H`, `M̂` and LU (the same numbers a full evaluation recovers);
        // `J₁` (`w` perturbed, after them) needs the position half every time.
        self.ww.copy_from_slice(&self.w0);
        self.wwd.copy_from_slice(&self.wd0);
        self.eval(sys, t, 0.0, true)?;
        for which in [1, 0] {
            for k in 0..nd {
                let x = if which == 0 { self.w0[k] } else { self.wd0[k] };
                let d = eps3 * x.abs().max(1.0);
                for sign in [1.0, -1.0] {
                    self.ww.copy_from_slice(&self.w0);
                    self.wwd.copy_from_slice(&self.wd0);
                    if which == 0 {
                        self.ww[k] = x + sign * d;
                        self.eval(sys, t, 0.0, true)?;
                    } else {
                        self.wwd[k] = x + sign * d;
                        self.eval_velocities(sys, t, true)?;
                    }
                    if sign > 0.0 {
                        self.fp.copy_from_slice(&self.fout);
                    } else {
                        self.fm.copy_from_slice(&self.fout);
                    }
                }
                let jm = if which == 0 {
                    &mut self.j1
                } else {
                    &mut self.j2
                };
                for i in 0..nd {
                    jm[(i, k)] = (self.fp[i] - self.fm[i]) / (2.0 * d);
                }
            }
        }
        let dt = eps3 * t.abs().max(1.0);
        self.ww.copy_from_slice(&self.w0);
        self.wwd.copy_from_slice(&self.wd0);
        self.eval(sys, t + dt, dt, true)?;
        self.fp.copy_from_slice(&self.fout);
        self.eval(sys, t - dt, -dt, true)?;
        for i in 0..nd {
            self.ft[i] = (self.fp[i] - self.fout[i]) / (2.0 * dt);
        }
        self.mj1.gemm(1.0, &self.mhat0, &self.j1, 0.0);
        self.mj2.gemm(1.0, &self.mhat0, &self.j2, 0.0);
        self.jac_ready = true;
        self.jac_age = 0;
        Ok(())
    }

    /// Factor `Π = M̂/γ² − (h/γ) M̂J₂ − h² M̂J₁` (44).
    fn factor_pi(&mut self, h: f64) -> Result<(), IntegrateError> {
        let nd = self.nd;
        let g = self.tab.gamma;
        for j in 0..nd {
            for i in 0..nd {
                self.pi.a[(i, j)] = self.mhat0[(i, j)] / (g * g)
                    - h / g * self.mj2[(i, j)]
                    - h * h * self.mj1[(i, j)];
            }
        }
        self.stats.lu += 1;
        self.pi.factor().map_err(|k| IntegrateError::Singular {
            t: self.state.t,
            what: format!("Rosenbrock iteration matrix Π (44), pivot {k}"),
        })
    }

    /// The stages (25c)–(25f) in the form (43)–(45) for step `h`; results in `z`.
    fn stages<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        h: f64,
    ) -> Result<(), IntegrateError> {
        let (nd, s) = (self.nd, self.tab.s);
        let t = self.state.t;
        let g = self.tab.gamma;
        for i in 0..s {
            let ai = self.tab.alpha[i];
            if i == 0 {
                self.fs.copy_from_slice(&self.f0);
            } else if !self.tab.reuses_previous(i) {
                for k in 0..nd {
                    let (mut w, mut wd) = (self.w0[k] + h * ai * self.wd0[k], self.wd0[k]);
                    for j in 0..i {
                        w += h * RnTableau::at(&self.tab.theta, s, i, j) * self.z[j][k];
                        wd += RnTableau::at(&self.tab.a, s, i, j) * self.z[j][k];
                    }
                    self.ww[k] = w;
                    self.wwd[k] = wd;
                }
                self.eval(sys, t + ai * h, ai * h, false)?;
                self.fs.copy_from_slice(&self.fout);
            }
            // r_i = (1/γ) M̂ [h f_i + h²γ_i f_t + Σ c_ij z_j] + (1/γ) M̂J₁ [h²γ_i ẇ_n + h² Σ δ_ij z_j].
            let gi = self.tab.gamma_i[i];
            for k in 0..nd {
                let mut a = h * self.fs[k] + h * h * gi * self.ft[k];
                let mut b = h * h * gi * self.wd0[k];
                for j in 0..i {
                    a += RnTableau::at(&self.tab.c, s, i, j) * self.z[j][k];
                    b += h * h * RnTableau::at(&self.tab.delta, s, i, j) * self.z[j][k];
                }
                self.tmp[k] = a;
                self.tmp2[k] = b;
            }
            for r in 0..nd {
                let mut x = 0.0;
                for k in 0..nd {
                    x += self.mhat0[(r, k)] * self.tmp[k] + self.mj1[(r, k)] * self.tmp2[k];
                }
                self.r[r] = x / g;
            }
            self.pi.solve(&mut self.r);
            self.z[i].copy_from_slice(&self.r);
        }
        Ok(())
    }
}

impl<S: MultibodySystem + ?Sized> Integrator<S> for RosenbrockNystrom {
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
        // nc = nq is a kinematically driven mechanism (no state-space ODE, every coordinate
        // is recovered from the constraints); more constraints than coordinates is not a model.
        if self.nc > self.nq {
            return Err(IntegrateError::Inconsistent {
                t: x.t,
                what: format!(
                    "{} independent constraints cannot hold in {} coordinates",
                    self.nc, self.nq
                ),
            });
        }
        self.stats = Stats::default();
        self.ctrl = StepController::elementary();
        self.repartitions = 0;
        self.state.t = x.t;
        self.state.q.copy_from_slice(&x.q);
        self.state.v.copy_from_slice(&x.v);
        if self.nc > 0 {
            self.choose_partition(sys, x.t, &x.q)?;
        }
        self.start_data(sys)?;
        // The state is the consistent one the recovery produced.
        self.state.q.copy_from_slice(&self.qe);
        self.state.v.copy_from_slice(&self.ve);
        self.jac_ready = false;
        let nd = self.nd;
        self.y_old[..nd].copy_from_slice(&self.w0);
        self.y_old[nd..].copy_from_slice(&self.wd0);
        self.y_new[..nd].copy_from_slice(&self.wd0);
        self.y_new[nd..].copy_from_slice(&self.f0);
        self.h = dense::first_step(
            &self.settings,
            x.t,
            &self.y_old,
            &self.y_new,
            self.tab.embedded_order,
        );
        self.rhs_stale = false;
        self.initialized = true;
        Ok(())
    }

    fn step(&mut self, sys: &mut S, t_limit: f64) -> Result<f64, IntegrateError> {
        if !self.initialized {
            return Err(IntegrateError::Settings("step before initialize".into()));
        }
        let (nd, s) = (self.nd, self.tab.s);
        let t = self.state.t;
        let fixed = self.settings.fixed_step.is_some();
        let q_emb = self.tab.embedded_order;
        if self.rhs_stale {
            // New inputs: f0, H0, M̂0 at the current state again (the W-method keeps its
            // Jacobian, which may be approximate; Rosenbrock forms a new one every step).
            self.start_data(sys)?;
            self.rhs_stale = false;
        }
        if !self.jac_ready {
            self.jacobians(sys)?;
        }
        let mut h_try = self.h;
        let mut failures = 0u32;
        loop {
            let p = dense::plan_step(&self.settings, t, h_try, t_limit)?;
            let h = p.h;
            if h < dense::h_min(t) {
                return Err(IntegrateError::StepTooSmall {
                    t,
                    h,
                    h_min: dense::h_min(t),
                    reason: "Rosenbrock error test".into(),
                });
            }
            let t1 = dense::advance(t, p, t_limit);
            self.factor_pi(h)?;
            let mut res = self.stages(sys, h);
            if res.is_ok() {
                for k in 0..nd {
                    let (mut w, mut wd, mut ew, mut ewd) =
                        (self.w0[k] + h * self.wd0[k], self.wd0[k], 0.0, 0.0);
                    for i in 0..s {
                        let zi = self.z[i][k];
                        w += h * self.tab.mu[i] * zi;
                        wd += self.tab.m[i] * zi;
                        ew += h * (self.tab.mu[i] - self.tab.mu_hat[i]) * zi;
                        ewd += (self.tab.m[i] - self.tab.m_hat[i]) * zi;
                    }
                    self.ww[k] = w;
                    self.wwd[k] = wd;
                    self.err[k] = ew;
                    self.err[nd + k] = ewd;
                    self.y_old[k] = self.w0[k];
                    self.y_old[nd + k] = self.wd0[k];
                    self.y_new[k] = w;
                    self.y_new[nd + k] = wd;
                }
            }
            let mut err = 0.0;
            if res.is_ok() && !fixed {
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
                        h * self.ctrl.factor(err, q_emb, false)
                    } else {
                        0.25 * h
                    };
                    continue;
                }
            }
            // Step 13: dependent coordinates at the new point (also the next step's stage 1).
            if res.is_ok() {
                res = self.eval(sys, t1, h, false);
            }
            match res {
                Ok(()) => {}
                Err(e) if e.is_recoverable() && !fixed => {
                    self.stats.rejected_steps += 1;
                    self.stats.convergence_failures += 1;
                    failures += 1;
                    if failures > 10 {
                        return Err(e);
                    }
                    h_try = 0.25 * h;
                    continue;
                }
                Err(e) => return Err(e),
            }
            self.state.t = t1;
            self.state.q.copy_from_slice(&self.qe);
            self.state.v.copy_from_slice(&self.ve);
            self.multipliers();
            self.stats.steps += 1;
            if fixed {
                self.h = h_try;
            } else {
                let fac = self.ctrl.factor(err, q_emb, true);
                self.ctrl.accept(err);
                self.h = if p.clipped {
                    (fac * h).max(h_try.min(fac * h_try))
                } else {
                    fac * h
                };
            }
            // Step 14: keep the partition while cond(Φu) grew by at most 25 % and Φu did not
            // degenerate against the whole Jacobian (`rel_last` at most REL_GROWTH times its
            // value at the partitioning). The second test is what re-chooses a body's
            // dependent Euler parameter before it passes through zero at a rotation angle of
            // π (e₀) or 2π (the axis ones): without it Newton found no e₀ once the independent
            // ones reached norm 1, and the step failed at any tolerance.
            let repartition = self.nc > 0
                && (self.cond_last > 1.25 * self.part.cond_ref
                    || self.rel_last > REL_GROWTH * self.part.rel_ref);
            if repartition {
                // q0 is free here (start data is rebuilt below).
                self.q0.copy_from_slice(&self.state.q);
                let q = std::mem::take(&mut self.q0);
                let r = self.choose_partition(sys, t1, &q);
                self.q0 = q;
                r?;
                self.start_data(sys)?;
            } else {
                self.q0.copy_from_slice(&self.qe);
                self.v0.copy_from_slice(&self.ve);
                self.w0.copy_from_slice(&self.ww);
                self.wd0.copy_from_slice(&self.wwd);
                self.f0.copy_from_slice(&self.fout);
                self.h0.copy_from(&self.hmat);
                self.ht0.copy_from_slice(&self.ht);
                self.mhat0.copy_from(&self.mhat);
            }
            // The W-method is of order 2 with any matrix: it keeps J₁, J₂, f_t for up to
            // W_JACOBIAN_AGE steps (new partition: new coordinates, new Jacobian) and only
            // re-multiplies them by the new M̂. The Rosenbrock method needs the exact Jacobian.
            self.jac_age += 1;
            if self.method == Method::WMethod && !repartition && self.jac_age < W_JACOBIAN_AGE {
                self.mj1.gemm(1.0, &self.mhat0, &self.j1, 0.0);
                self.mj2.gemm(1.0, &self.mhat0, &self.j2, 0.0);
            } else {
                self.jac_ready = false;
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
        self.settings = Settings {
            method: self.method,
            ..settings
        };
    }
    fn rhs_changed(&mut self) {
        self.rhs_stale = true;
    }
    /// From the projected state `x`: the step size, controller, partition and (W-method) the
    /// kept Jacobian stay; the start-of-step data are evaluated at `x` before the next step
    /// (as after [`Integrator::rhs_changed`]).
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

    /// `J₂`'s columns come from the velocity-level half alone, on the step start's positions,
    /// `H` and `M̂`; they must equal central differences of full evaluations at the perturbed
    /// `ẇ` to the bit. A position-level quantity that came to depend on `ẇ` (or a velocity
    /// term left in the position half) fails here.
    #[test]
    fn velocity_columns_equal_full_evaluations() {
        use crate::integrate::test_systems::CartesianChain;
        let mut sys = CartesianChain::paper(3);
        let mut x = sys.consistent_state(0.3);
        // Rods off the vertical and velocities well away from rest, so that `J₂` (from `γ`,
        // quadratic in `v`, through `H ≠ 0`) is not small; the recovery makes the dependent
        // coordinates consistent.
        let s = sys.suspension(0.3)[0];
        let (mut px, mut py) = (s[0], s[1]);
        for (k, angle) in [0.3f64, 0.8, -0.4].into_iter().enumerate() {
            px += angle.sin();
            py -= angle.cos();
            x.q[2 * k] = px;
            x.q[2 * k + 1] = py;
        }
        for (i, v) in x.v.iter_mut().enumerate() {
            *v = 0.4 + 0.3 * i as f64;
        }
        for method in [Method::RosenbrockNystrom, Method::WMethod] {
            let settings = Settings {
                method,
                ..Settings::default()
            };
            let mut rn = RosenbrockNystrom::new(settings, 6, 3);
            rn.initialize(&mut sys, &x).unwrap();
            rn.jacobians(&mut sys).unwrap();
            let (nd, t) = (rn.nd, rn.state.t);
            let j2 = rn.j2.clone();
            assert!(j2.iter().any(|x| x.abs() > 0.1), "J₂ = {j2}");
            for k in 0..nd {
                let x = rn.wd0[k];
                let d = 6e-6 * x.abs().max(1.0);
                let mut f = [vec![0.0; nd], vec![0.0; nd]];
                for (fs, sign) in f.iter_mut().zip([1.0, -1.0]) {
                    rn.ww.copy_from_slice(&rn.w0);
                    rn.wwd.copy_from_slice(&rn.wd0);
                    rn.wwd[k] = x + sign * d;
                    rn.eval(&mut sys, t, 0.0, false).unwrap();
                    fs.copy_from_slice(&rn.fout);
                }
                for i in 0..nd {
                    assert_eq!(j2[(i, k)], (f[0][i] - f[1][i]) / (2.0 * d), "J₂[{i}, {k}]");
                }
            }
        }
    }

    /// Re-derive the Nyström coefficients of the order-4 method from the base Rosenbrock
    /// method (paper 000's first table, with γ₂₁ < 0) by Theorem 2.1, check them against the
    /// coefficients we use (the paper's second table, a₂₁ corrected), and check the 8 order
    /// conditions of the base method (Hairer–Wanner IV.7, Table 7.1).
    #[test]
    fn rn4_coefficients_follow_from_the_base_method() {
        let g = 0.57281606;
        let n = 4;
        let mut al = DMatrix::<f64>::zeros(n, n);
        let mut ga = DMatrix::<f64>::zeros(n, n);
        al[(1, 0)] = 1.14563212;
        al[(2, 0)] = 0.520920789130629029328516;
        al[(2, 1)] = 0.134294186842504800149232;
        al[(3, 0)] = 0.520920789130629029328516;
        al[(3, 1)] = 0.134294186842504800149232;
        ga[(1, 0)] = -2.341993127112013949170520;
        ga[(2, 0)] = -0.027333746543489836196505;
        ga[(2, 1)] = 0.213811650836699689867472;
        ga[(3, 0)] = -0.259083837785510222112641;
        ga[(3, 1)] = -0.190595807732311751616358;
        ga[(3, 2)] = -0.228031035973133829477744;
        for i in 0..n {
            ga[(i, i)] = g;
        }
        let b = nalgebra::RowDVector::from_row_slice(&[
            0.324534707891734513474196,
            0.049086544787523308684633,
            0.0,
            0.626378747320742177841171,
        ]);
        let bh = nalgebra::RowDVector::from_row_slice(&[
            0.520920789130629029328516,
            0.144549714665364599584681,
            0.124559686414702049774897,
            0.209969809789304321311906,
        ]);
        let gi = ga.clone().try_inverse().unwrap();
        let a = &al * &gi;
        let c = DMatrix::<f64>::identity(n, n) / g - &gi;
        let d = &ga + &ga * &al * &gi;
        let th = &al + &al * &al * &gi;
        let beta = &al + &ga;
        let m = &b * &gi;
        let mh = &bh * &gi;
        let mu = &b * &beta * &gi;
        let muh = &bh * &beta * &gi;
        let t = RnTableau::rn4();
        for i in 0..n {
            for j in 0..i {
                let k = i * n + j;
                assert!((a[(i, j)] - t.a[k]).abs() < 1e-14, "a{i}{j}");
                assert!((c[(i, j)] - t.c[k]).abs() < 1e-13, "c{i}{j}");
                assert!((d[(i, j)] - t.delta[k]).abs() < 1e-14, "delta{i}{j}");
                assert!((th[(i, j)] - t.theta[k]).abs() < 1e-14, "theta{i}{j}");
            }
            assert!(
                (m[i] - t.m[i]).abs() < 1e-14 && (mh[i] - t.m_hat[i]).abs() < 1e-14,
                "m{i}"
            );
            assert!(
                (mu[i] - t.mu[i]).abs() < 1e-14 && (muh[i] - t.mu_hat[i]).abs() < 1e-14,
                "mu{i}"
            );
            let alpha_i: f64 = (0..n).map(|j| al[(i, j)]).sum();
            let gamma_i: f64 = (0..n).map(|j| ga[(i, j)]).sum();
            assert!(
                (alpha_i - t.alpha[i]).abs() < 1e-14 && (gamma_i - t.gamma_i[i]).abs() < 1e-14,
                "alpha/gamma {i}"
            );
        }
        // Order conditions (β' strictly lower part of α + γ).
        let ai: Vec<f64> = (0..n).map(|i| (0..n).map(|j| al[(i, j)]).sum()).collect();
        let mut l = beta.clone();
        for i in 0..n {
            l[(i, i)] = 0.0;
        }
        let bi: Vec<f64> = (0..n).map(|i| (0..n).map(|j| l[(i, j)]).sum()).collect();
        let dot = |x: &[f64]| (0..n).map(|i| b[i] * x[i]).sum::<f64>();
        let mv = |mat: &DMatrix<f64>, x: &[f64]| -> Vec<f64> {
            (0..n)
                .map(|i| (0..n).map(|j| mat[(i, j)] * x[j]).sum())
                .collect()
        };
        let sq: Vec<f64> = ai.iter().map(|x| x * x).collect();
        let cu: Vec<f64> = ai.iter().map(|x| x * x * x).collect();
        let conds = [
            (b.sum(), 1.0),
            (dot(&bi), 0.5 - g),
            (dot(&sq), 1.0 / 3.0),
            (dot(&mv(&l, &bi)), 1.0 / 6.0 - g + g * g),
            (dot(&cu), 0.25),
            (
                dot(&ai
                    .iter()
                    .zip(mv(&al, &bi))
                    .map(|(x, y)| x * y)
                    .collect::<Vec<_>>()),
                0.125 - g / 3.0,
            ),
            (dot(&mv(&l, &sq)), 1.0 / 12.0 - g / 3.0),
            (
                dot(&mv(&l, &mv(&l, &bi))),
                1.0 / 24.0 - g / 2.0 + 1.5 * g * g - g * g * g,
            ),
        ];
        for (k, (x, y)) in conds.iter().enumerate() {
            assert!((x - y).abs() < 1e-14, "order condition {k}: {x} vs {y}");
        }
    }

    #[test]
    fn stage_four_reuses_stage_three() {
        let t = RnTableau::rn4();
        assert!(t.reuses_previous(3) && !t.reuses_previous(2) && !t.reuses_previous(1));
    }
}
