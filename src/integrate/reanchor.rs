//! Re-anchoring a multistep history at a kink of the right-hand side (new input segments at a
//! communication point, the state unchanged).
//!
//! The BDF's backward differences describe the polynomial `P` through the last `k + 1`
//! solution values. Where the right-hand side's time derivatives jump (the smooth input
//! reconstruction joins its segments with a jump in `ü`), `P` extrapolates the old dynamics,
//! and a formula whose history spans the kink makes a local error of the jump times a power of
//! `h` below its order (the rig's noisy road: 7 BDF steps per 1 ms communication step, 27× the
//! noise-free count, and 2600 rejections in 2 s). Re-anchoring replaces the history's
//! derivatives at `t_n` by those of the new right-hand side: the accelerations `a` and their
//! rates `ȧ`, `ä` at `(t_n, q_n, v_n)`. `K(t) = Σ_m Δ_m (t − t_n)^m / m!` is added to the
//! history (values at `t_n − j h`, so `y_n` stays), with `Δ_1 = a − P_v'`, `Δ_2 = ȧ − P_v''`,
//! `Δ_3 = ä − P_v'''` on the velocities and `Δ_2 = a − P_q''`, `Δ_3 = ȧ − P_q'''`,
//! `Δ_4 = ä − P_q''''` on the positions, as far as the order's polynomial degree reaches.
//! (On a driven post the tire turns the jump in `ü` into jumps of the wheel's `ȧ` and `ä`;
//! correcting `a` and `ȧ` only left about 10× more rejections on the rig's corner.) When the
//! next order is 4 or 5 also `Δ_4 = a⃛ − P_v''''` and `Δ_5 = a⃛ − P_q^(5)`: the smooth mode's
//! `u⃛` jumps too, and with those derivatives left from the old segments the corner's BDF
//! stayed at 3.7 steps per communication step (1.6 with them). At order 5 also `Δ_5 = 0 −
//! P_v^(5)`: the new `a⁗` is not computed, and the old history's is a difference across the
//! old kinks (zeroing it: 3137 → 2875 steps and 94 → 59 rejections on the joint corner's 2 s).
//!
//! `a`, `ȧ`, `ä` come from the saddle-point system `K(s) (a, λ) = r(s)`,
//! `K = [M Φ_qᵀ; Φ_q 0]`, `r = (f, γ)`, along the Taylor path of the trajectory: one LU at
//! `s = 0`, and differences of the residual `r(s) − K(s) (a, λ)` solved with the same LU
//! ([`ReanchorWork::rhs_derivatives`]): `ȧ` from a forward difference at a tiny `δ_f`, `ä`
//! from a pair at `±δ`, `a⃛` from one point at `δ₃` ([`ReanchorWork::third_derivative`]):
//! five evaluations of `M`, `Φ_q`, forces and `γ` with `a⃛`, four without. (Nine and five
//! with the central pair for `ȧ` and the four-point `a⃛` before session 10, six and four with
//! a central pair for `a⃛` before session 19: each time the same rig errors and fewer
//! evaluations.) All storage is preallocated on first use (no allocation per communication
//! point).

#![allow(clippy::needless_range_loop)] // index-heavy numerical kernels

use super::linalg::DenseLu;
use super::{IntegrateError, MultibodySystem};
use nalgebra::{DMatrix, DVectorView, DVectorViewMut};

/// How much the excitations jump at the current point, over all inputs: `value = max |Δu|`
/// (beyond round-off), `accel = max |Δü|`, `jerk = max |Δu⃛|` (in the inputs' own units).
/// Infinite when not known (no previous segment).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InputKink {
    /// A jump of the value itself (a held sample that changed): where it did not move the
    /// state (a force or torque input, or a driven coordinate the joint formulation
    /// eliminates), the accelerations jump by an `O(1)` amount.
    pub value: f64,
    /// A jump of the slope `u̇` that moved no state (a `linear` input's new slope on a force,
    /// or on a position that reaches the bodies through a damper): the accelerations jump, or
    /// their rates, by an amount not known here.
    pub rate: f64,
    pub accel: f64,
    pub jerk: f64,
}

impl InputKink {
    /// Size unknown: treat as large.
    pub const UNKNOWN: InputKink = InputKink {
        value: f64::INFINITY,
        rate: f64::INFINITY,
        accel: f64::INFINITY,
        jerk: f64::INFINITY,
    };

    /// No jump at all.
    pub const NONE: InputKink = InputKink {
        value: 0.0,
        rate: 0.0,
        accel: 0.0,
        jerk: 0.0,
    };

    /// The jump of the value alone (the others set to none).
    pub fn value_only(self) -> InputKink {
        InputKink {
            value: self.value,
            ..InputKink::NONE
        }
    }

    /// Whether anything jumped.
    pub fn any(&self) -> bool {
        self.value > 0.0 || self.rate > 0.0 || self.accel > 0.0 || self.jerk > 0.0
    }

    /// Whether the kink can matter for steps of size `h` at the velocities' error weight
    /// `weight` (`atol + rtol |v|`): a history spanning a jump `Δa` in an acceleration makes a
    /// velocity error of about `0.3 h Δa` (BDF2–5: the formula applied to `Δa (t − t_n)₊`
    /// leaves `(1 − 1/γ_k) h Δa`), and a jump `Δȧ` one of about `h² Δȧ`; for an input that
    /// drives a coordinate, `Δü` and `Δu⃛` are those jumps. Below a tenth of the weight the
    /// error test hardly notices them, and re-anchoring would only cost (one LU of the
    /// saddle-point matrix: on the chain N = 16 at H = 0.05 s, as much as the BDF's whole run,
    /// for no fewer steps). (A force input enters `ä` only, so the measure overestimates its
    /// effect for ordinary masses: re-anchored more often than needed.)
    ///
    /// A jump of an input's value always matters: how it reaches the accelerations (through a
    /// mass, a lever, a tire's stiffness) is not known here, and a force jump `ΔF` makes the
    /// history's velocity error `0.3 h ΔF / m`, on a 1 kg slider at `h` = 1 ms 3e-4 per
    /// newton, far above any tolerance for ordinary forces.
    ///
    /// So does a jump of its slope, for the same reason: a `linear` input's slope changes at
    /// every sample of a noisy signal, and a post that reaches the wheel through the tire's
    /// damper makes the wheel's acceleration jump with it. Without re-anchoring there the BDF
    /// took 42 000 steps (18 400 rejected) for the corner's 2 s under 0.1 mm of noise.
    pub fn matters(&self, h: f64, weight: f64) -> bool {
        if self.value > 0.0 || self.rate > 0.0 {
            return true;
        }
        let effect = 0.3 * self.size(h);
        effect.is_nan() || effect > 0.1 * weight
    }

    /// `h (|Δü| + h |Δu⃛|)`: the velocity error scale of the kink for steps of size `h`.
    pub fn size(&self, h: f64) -> f64 {
        h * (self.accel + h * self.jerk)
    }
}

/// Preallocated workspace for [`ReanchorWork::rhs_derivatives`] (sized on first use; not part
/// of the integrator's saved state).
#[derive(Debug, Clone, Default)]
pub struct ReanchorWork {
    n: usize,
    k: DMatrix<f64>,
    m: DMatrix<f64>,
    phi_q: DMatrix<f64>,
    lu: DenseLu,
    sol: Vec<f64>,
    sol1: Vec<f64>,
    rhs: Vec<f64>,
    diff: Vec<f64>,
    odd: Vec<f64>,
    qs: Vec<f64>,
    vs: Vec<f64>,
    /// Re-anchorings made (a diagnostic).
    pub count: u64,
    /// `a`, `ȧ`, `ä` of the last [`ReanchorWork::rhs_derivatives`].
    pub a: Vec<f64>,
    pub adot: Vec<f64>,
    pub addot: Vec<f64>,
    /// `a⃛` of the last [`ReanchorWork::rhs_derivatives`].
    pub adddot: Vec<f64>,
    /// What the velocities' fifth derivative `a⁗` is re-anchored to at order 5: zero (not
    /// computed; see [`reanchor_differences`]).
    pub a4: Vec<f64>,
    /// Products `K x` at a path point (or the residual `r − K x` of the system's own pass).
    kx: Vec<f64>,
    /// The `x` of [`ReanchorWork::residual_at`].
    xs: Vec<f64>,
    kx1: Vec<f64>,
    /// `ρ(0)`: the round-off of the solve at `s = 0`.
    rho0: Vec<f64>,
}

impl ReanchorWork {
    fn size(&mut self, nq: usize, nc: usize) {
        let n = nq + nc;
        if self.n == n && self.a.len() == nq && self.k.nrows() == n && self.adddot.len() == nq {
            return;
        }
        self.n = n;
        self.k = DMatrix::zeros(n, n);
        self.m = DMatrix::zeros(nq, nq);
        self.phi_q = DMatrix::zeros(nc, nq);
        self.lu = DenseLu::new(n);
        for v in [
            &mut self.sol,
            &mut self.sol1,
            &mut self.rhs,
            &mut self.diff,
            &mut self.odd,
            &mut self.kx,
            &mut self.kx1,
            &mut self.xs,
            &mut self.rho0,
        ] {
            *v = vec![0.0; n];
        }
        for v in [
            &mut self.qs,
            &mut self.vs,
            &mut self.a,
            &mut self.adot,
            &mut self.addot,
            &mut self.adddot,
            &mut self.a4,
        ] {
            *v = vec![0.0; nq];
        }
    }

    /// `M`, `Φ_q` (the blocks of `K`) and `r` at time `t` and the path point in `self.qs`,
    /// `self.vs` (`K` itself is formed only at `s = 0`, for its LU).
    fn at_path_point<S: MultibodySystem + ?Sized>(&mut self, sys: &mut S, t: f64) {
        let (qs, vs) = (std::mem::take(&mut self.qs), std::mem::take(&mut self.vs));
        let nq = qs.len();
        sys.mass_matrix(t, &qs, &mut self.m);
        let (f, g) = self.rhs.split_at_mut(nq);
        sys.constraint_jacobian_and_rhs(t, &qs, &vs, &mut self.phi_q, g);
        sys.forces(t, &qs, &vs, f);
        self.qs = qs;
        self.vs = vs;
    }

    /// `r − K x` at time `t`, the path point in `self.qs`, `self.vs` and `x` in `self.xs`,
    /// into `self.kx`, by the system's own pass ([`super::Mechanical::saddle_residual`]: no
    /// `M`, `Φ_q` or products). `false` where the system has none (nothing written).
    fn residual_at<S: MultibodySystem + ?Sized>(&mut self, sys: &mut S, t: f64) -> bool {
        sys.saddle_residual(t, &self.qs, &self.vs, &self.xs, &mut self.kx)
    }

    /// `K = [M Φ_qᵀ; Φ_q 0]` into `self.k` from the blocks of the last path point.
    fn form_k(&mut self) {
        let nq = self.m.nrows();
        let nc = self.n - nq;
        self.k.view_mut((0, 0), (nq, nq)).copy_from(&self.m);
        for c in 0..nc {
            for j in 0..nq {
                self.k[(nq + c, j)] = self.phi_q[(c, j)];
                self.k[(j, nq + c)] = self.phi_q[(c, j)];
            }
        }
    }

    /// `a`, `ȧ` and `ä` of the current right-hand side at `(t, q, v)` into `self.a`,
    /// `self.adot`, `self.addot`; `δ` is the time increment of the second differences. With
    /// `x(s) = (a, λ)(s) = x₀ + s x₁ + s² x₂ + …` along the trajectory and `K(s) x(s) = r(s)`,
    /// the residual `ρ(s) = r(s) − K(s) x₀` gives `x₁ = K₀⁻¹ (ρ(δ_f) − ρ(0)) / δ_f` (`δ_f =
    /// 10⁻⁴ δ`) and `x₂ = K₀⁻¹ [(ρ(δ) + ρ(−δ) − 2ρ(0)) / 2δ² − (K(δ) − K(−δ)) x₁ / 2δ]`, all
    /// with the LU of `K₀`. The first pass follows `q + s v + s² a/2`, `v + s a` (enough for
    /// `ȧ`); the second adds the `ȧ` terms, so its second derivative is the trajectory's.
    /// (A forward difference suffices for `x₁` where a second difference does not: its
    /// round-off is `ε |r| / δ_f`, not `/ δ²`.) With `third =
    /// Some(δ₃)` also `a⃛` into `self.adddot` ([`ReanchorWork::third_derivative`], increment
    /// `δ₃`), else `self.adddot` is zero. Returns `false` when a value is not finite (nothing
    /// to re-anchor to).
    pub fn rhs_derivatives<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        q: &[f64],
        v: &[f64],
        delta: f64,
        third: Option<f64>,
    ) -> Result<bool, IntegrateError> {
        let (nq, nc) = (sys.n_q(), sys.n_c());
        self.size(nq, nc);
        self.qs.copy_from_slice(q);
        self.vs.copy_from_slice(v);
        self.at_path_point(sys, t);
        self.form_k();
        self.lu
            .factor(&self.k)
            .map_err(|e| IntegrateError::Singular {
                t,
                what: format!(
                "saddle-point matrix [M Φqᵀ; Φq 0] singular at step {} (redundant constraints?)",
                e.0
            ),
            })?;
        self.sol.copy_from_slice(&self.rhs);
        self.lu.solve(&mut self.sol);
        self.a.copy_from_slice(&self.sol[..nq]);
        let n = self.n;
        // ρ(0) = r₀ − K₀ x₀: the solve's round-off, subtracted from the differences below.
        k_mul(&self.m, &self.phi_q, &self.sol, &mut self.kx);
        for i in 0..n {
            self.rho0[i] = self.rhs[i] - self.kx[i];
        }
        // Pass 1: x₁ from a forward difference at δ_f = 10⁻⁴ δ along `q + s v + s² a/2`,
        // `v + s a`: error δ_f ρ''/2 (relative about δ_f ω for a motion of frequency ω) and
        // round-off ε |r| / δ_f, both far below the `O(δ²)` of a central pair at δ (one
        // evaluation instead of two). The increment is the one `t + δ_f` represents.
        let df = (t + 1e-4 * delta) - t;
        if df.is_nan() || df <= 0.0 {
            return Ok(false); // an increment below the time's resolution
        }
        for i in 0..nq {
            self.qs[i] = q[i] + df * v[i] + 0.5 * df * df * self.a[i];
            self.vs[i] = v[i] + df * self.a[i];
        }
        // With the system's own residual pass (joint coordinates) each path point is one
        // `r − K x`; otherwise `M`, `Φ_q` and `r` there and the products below.
        self.xs.copy_from_slice(&self.sol);
        let own = self.residual_at(sys, t + df);
        if !own {
            self.at_path_point(sys, t + df);
            k_mul(&self.m, &self.phi_q, &self.sol, &mut self.kx);
            for i in 0..n {
                self.kx[i] = self.rhs[i] - self.kx[i];
            }
        }
        for i in 0..n {
            self.sol1[i] = (self.kx[i] - self.rho0[i]) / df;
        }
        self.lu.solve(&mut self.sol1);
        self.adot.copy_from_slice(&self.sol1[..nq]);
        // Pass 2: x₂ from the even part of ρ and the change of K along the path through `ȧ`.
        for (pass, s) in [delta, -delta].into_iter().enumerate() {
            for i in 0..nq {
                let (s2, s3) = (0.5 * s * s, s * s * s / 6.0);
                self.qs[i] = q[i] + s * v[i] + s2 * self.a[i] + s3 * self.adot[i];
                self.vs[i] = v[i] + s * self.a[i] + s2 * self.adot[i];
            }
            if own {
                // `R(s) = r − K (x₀ + s x₁)`: `(R(δ) + R(−δ) − 2ρ(0)) / 2δ²` is the even part
                // below with the change of `K` through `x₁` in it.
                for i in 0..n {
                    self.xs[i] = self.sol[i] + s * self.sol1[i];
                }
                self.residual_at(sys, t + s);
                for i in 0..n {
                    let rho = self.kx[i] - self.rho0[i];
                    if pass == 0 {
                        self.diff[i] = rho;
                    } else {
                        self.diff[i] = (self.diff[i] + rho) / (2.0 * delta * delta);
                    }
                }
                continue;
            }
            self.at_path_point(sys, t + s);
            k_mul(&self.m, &self.phi_q, &self.sol, &mut self.kx);
            k_mul(&self.m, &self.phi_q, &self.sol1, &mut self.kx1);
            for i in 0..n {
                let rho = self.rhs[i] - self.kx[i] - self.rho0[i];
                let kx1 = self.kx1[i];
                if pass == 0 {
                    self.diff[i] = rho;
                    self.odd[i] = kx1;
                } else {
                    self.diff[i] = (self.diff[i] + rho) / (2.0 * delta * delta)
                        - (self.odd[i] - kx1) / (2.0 * delta);
                }
            }
        }
        self.lu.solve(&mut self.diff);
        for i in 0..nq {
            self.addot[i] = 2.0 * self.diff[i];
        }
        self.adddot.fill(0.0);
        if let Some(delta3) = third {
            self.third_derivative(sys, t, q, v, delta3);
        }
        Ok(self
            .a
            .iter()
            .chain(&self.adot)
            .chain(&self.addot)
            .chain(&self.adddot)
            .all(|z| z.is_finite()))
    }

    /// `a⃛` into `self.adddot`, after [`ReanchorWork::rhs_derivatives`]'s two passes (`x₀` in
    /// `self.sol`, `x₁` in `self.sol1`, `x₂` in `self.diff`). Along the trajectory's Taylor path
    /// through `ä` (exact to `s³` in `v`, `s⁴` in `q`) the residual
    /// `R(s) = r(s) − K(s) (x₀ + s x₁ + s² x₂) = ρ(0) + R₁ s + R₂ s² + K₀ x₃ s³ + R₄ s⁴ + …`
    /// at one point `s = δ` gives `x₃ = K₀⁻¹ (R(δ) − ρ(0)) / δ³`, `a⃛ = 6 x₃`, off by:
    /// - `R₄ δ / K₀ x₃`: `K₀ x₄ + K' x₃` and the path's missing `a⃛ s⁴ / 24` in `v` times
    ///   `∂r/∂v`, about `δ ω / 4` for a motion of frequency `ω`: 0.35 % at the BDF's `δ = h/4`
    ///   and `h ω = 0.05`. Through the history that is `h⁴ a⃛ δ ω / 96` in a step's velocity,
    ///   a few percent of an order-4 step's local error (`12/125 h⁵ a⁗`).
    /// - `R₁ / δ²`, `R₁ = K₀ (x₁ − x₁_computed)`: the forward difference's error (about `δ_f
    ///   x₂`) and its round-off `ε |r| / δ_f` (the larger on the rig's corner: a few percent of
    ///   `a⃛`).
    /// - `R₂ / δ`, from the second pass's error in `x₂` (its pair at `±0.02 h` in the BDF:
    ///   about `(0.02 h ω)²` of `x₂`), negligible.
    ///
    /// (A central pair at `±δ` cancels the `R₄` term but costs a second evaluation, one of the
    /// six a re-anchoring made, for an error mostly below the `R₁` term already there: on the
    /// rig's corner 8 % fewer `fmi2DoStep` instructions with it gone, for about the same
    /// steps.) One more evaluation of `M`, `Φ_q`, forces and `γ`, no new LU.
    fn third_derivative<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        q: &[f64],
        v: &[f64],
        delta: f64,
    ) {
        let (nq, n, s) = (q.len(), self.n, delta);
        let (s2, s3, s4) = (0.5 * s * s, s * s * s / 6.0, s * s * s * s / 24.0);
        for i in 0..nq {
            self.qs[i] = q[i] + s * v[i] + s2 * self.a[i] + s3 * self.adot[i] + s4 * self.addot[i];
            self.vs[i] = v[i] + s * self.a[i] + s2 * self.adot[i] + s3 * self.addot[i];
        }
        for i in 0..n {
            self.odd[i] = self.sol[i] + s * self.sol1[i] + s * s * self.diff[i];
        }
        self.xs.copy_from_slice(&self.odd);
        if !self.residual_at(sys, t + s) {
            self.at_path_point(sys, t + s);
            k_mul(&self.m, &self.phi_q, &self.odd, &mut self.kx);
            for i in 0..n {
                self.kx[i] = self.rhs[i] - self.kx[i];
            }
        }
        let d3 = s * s * s;
        for i in 0..n {
            self.odd[i] = (self.kx[i] - self.rho0[i]) / d3;
        }
        self.lu.solve(&mut self.odd);
        for i in 0..nq {
            self.adddot[i] = 6.0 * self.odd[i];
        }
    }
}

/// `K x` for `K = [M Φ_qᵀ; Φ_q 0]` from its blocks (`x = (a, λ)`).
fn k_mul(m: &DMatrix<f64>, phi_q: &DMatrix<f64>, x: &[f64], out: &mut [f64]) {
    let nq = m.nrows();
    let (xa, xl) = x.split_at(nq);
    let (oa, oc) = out.split_at_mut(nq);
    let xa = DVectorView::from_slice(xa, nq);
    let xl = DVectorView::from_slice(xl, xl.len());
    let mut oa = DVectorViewMut::from_slice(oa, nq);
    oa.gemv(1.0, m, &xa, 0.0);
    if !xl.is_empty() {
        oa.gemv_tr(1.0, phi_q, &xl, 1.0);
        let nc = oc.len();
        DVectorViewMut::from_slice(oc, nc).gemv(1.0, phi_q, &xa, 0.0);
    }
}

/// Derivatives of Newton's backward interpolant `P(t_n + s h) = Σ_j ∇^j y_n N_j(s)`,
/// `N_j(s) = s (s + 1) … (s + j − 1) / j!`, at `s = 0`: `P^(m)(t_n) = h^−m Σ_j c[m][j] ∇^j y_n`
/// with `c[m][j] = m! [s^m] N_j(s)`, for `m ≤ 5` and `j ≤ k < N`.
pub fn backward_derivative_coefficients<const N: usize>(k: usize) -> [[f64; N]; 6] {
    let mut c = [[0.0; N]; 6];
    let mut poly = [0.0; N];
    poly[0] = 1.0;
    for j in 1..=k.min(N - 1) {
        // poly ← poly · (s + j − 1) / j
        let shift = (j - 1) as f64;
        for p in (0..=j).rev() {
            let lower = if p > 0 { poly[p - 1] } else { 0.0 };
            poly[p] = (lower + shift * poly[p]) / j as f64;
        }
        let mut fact = 1.0;
        for m in 1..6 {
            fact *= m as f64;
            c[m][j] = fact * poly.get(m).copied().unwrap_or(0.0);
        }
    }
    c
}

/// Re-anchor the backward differences `d` (columns `0..=k` on the grid of spacing `h`, rows
/// `q` then `v`, `nq` each) to the accelerations `a` and their rates `ȧ`, `ä`, `a⃛`, `a⁗` at
/// `t_n` (`targets`, an empty slice for one not to change; see the module documentation): on
/// the velocities the derivatives of order 1 to 5, on the positions those of order 2 to 5
/// (the sixth would be `a⁗`, beyond `k`), as far as `k` reaches. Returns the largest
/// change of the predicted value one step ahead, `|K(t_n + h)|`, weighted by
/// `1 / (atol + rtol |y_n|)`.
pub fn reanchor_differences<const N: usize>(
    d: &mut DMatrix<f64>,
    k: usize,
    h: f64,
    nq: usize,
    targets: [&[f64]; 5],
    rtol: f64,
    atol: f64,
) -> f64 {
    let deriv = backward_derivative_coefficients::<N>(k);
    let mut kv = [0.0; N];
    let mut largest = 0.0f64;
    // `s^m` at the points `K` is taken at (`s = h`, then `s = −p h`, `p = 0 … k`) and `h^m`,
    // for `m = 1 … 6`, once per call instead of per row (`powi` was 1.5 % of the rig corner).
    let mut pow = [[0.0; 7]; 8];
    assert!(k + 2 <= pow.len(), "order {k} beyond the table");
    for (p, row) in pow.iter_mut().enumerate().take(k + 2) {
        let s = if p == 0 { h } else { -((p - 1) as f64) * h };
        for (m, z) in row.iter_mut().enumerate() {
            *z = s.powi(m as i32);
        }
    }
    for i in 0..2 * nq {
        // Position rows: derivatives 2, 3, 4, 5 are a, ȧ, ä, a⃛; velocity rows: 1 to 5.
        let (row, first) = if i < nq { (i, 2) } else { (i - nq, 1) };
        let mut deltas = [0.0; 5];
        for (l, delta) in deltas.iter_mut().enumerate() {
            let m = first + l;
            if m <= k && row < targets[l].len() {
                let hist: f64 = (1..=k).map(|j| deriv[m][j] * d[(i, j)]).sum();
                *delta = targets[l][row] - hist / pow[0][m];
            }
        }
        if deltas.iter().all(|&x| x == 0.0) {
            continue;
        }
        // K(s) = Σ_l Δ_l s^(first + l) / (first + l)!
        // (`pow[point]` holds `s^m` of that point.)
        let kk = |point: usize| -> f64 {
            let mut sum = 0.0;
            let mut fact: f64 = (1..=first).map(|x| x as f64).product();
            for (l, delta) in deltas.iter().enumerate() {
                let m = first + l;
                if l > 0 {
                    fact *= m as f64;
                }
                sum += delta * pow[point][m] / fact;
            }
            sum
        };
        largest = largest.max(kk(0).abs() / (atol + rtol * d[(i, 0)].abs()));
        for (p, val) in kv.iter_mut().enumerate().take(k + 1) {
            *val = kk(p + 1);
        }
        // kv[p] = K(t_n − p h): backward differences ∇^j K(t_n) in place.
        for level in 1..=k {
            for p in (level..=k).rev() {
                kv[p] = kv[p - 1] - kv[p];
            }
        }
        for j in 1..=k {
            d[(i, j)] += kv[j];
        }
    }
    largest
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Backward differences of `y` sampled at `t_n − p h`, `p = 0..=k`.
    fn differences(y: impl Fn(f64) -> f64, tn: f64, h: f64, k: usize) -> Vec<f64> {
        let mut v: Vec<f64> = (0..=k).map(|i| y(tn - i as f64 * h)).collect();
        for level in 1..=k {
            for p in (level..=k).rev() {
                v[p] = v[p - 1] - v[p];
            }
        }
        v
    }

    /// The interpolant's derivatives from backward differences equal the derivatives of a
    /// polynomial of degree `k` sampled on the grid (exact up to round-off), for every order.
    #[test]
    fn backward_difference_derivatives_of_a_polynomial_are_exact() {
        let coef = [1.0, 2.0, -3.0, 0.5, -0.25, 0.125];
        let (tn, h) = (0.3, 0.1);
        for k in 1..=5 {
            let y = |t: f64| (0..=k).map(|i| coef[i] * t.powi(i as i32)).sum::<f64>();
            let dy = |m: usize, t: f64| -> f64 {
                (m..=k)
                    .map(|i| {
                        let fall: f64 = (i + 1 - m..=i).map(|x| x as f64).product();
                        coef[i] * fall * t.powi((i - m) as i32)
                    })
                    .sum()
            };
            let v = differences(y, tn, h, k);
            let c = backward_derivative_coefficients::<6>(k);
            for m in 1..=4.min(k) {
                let got: f64 = (1..=k).map(|j| c[m][j] * v[j]).sum::<f64>() / h.powi(m as i32);
                let want = dy(m, tn);
                assert!(
                    (got - want).abs() < 1e-9 * (1.0 + want.abs()),
                    "k {k} m {m}: {got} vs {want}"
                );
            }
        }
    }

    /// `a`, `ȧ`, `ä`, `a⃛` of a damped oscillator `m ẍ = −k x − c ẋ`: along its trajectory
    /// `v^(j) = (A^j y)_v` with `A = [0 1; −k/m −c/m]` (closed form). `a⃛` comes from one
    /// point at `δ₃` ([`ReanchorWork::third_derivative`]), with the errors its documentation
    /// names, checked here as predicted for this system (`K` constant, `∂a/∂v = −c/m`):
    /// - `R₄ δ₃`: `6 x₄ δ₃ = a⁗ δ₃ / 4` and the path's missing `a⃛ s⁴ / 24` in `v`,
    ///   `−(∂a/∂v) a⃛ δ₃ / 4`;
    /// - `R₁ / δ₃²`: the forward difference's error in `ȧ`, `e₁ = δ_f (ä − (∂a/∂v) ȧ) / 2`
    ///   (its path lacks `ȧ s² / 2` in `v`), giving `−6 e₁ / δ₃²`.
    ///
    /// Together 2.1 % of `a⃛` here; what is left is `O(δ₃²)`.
    #[test]
    fn rhs_derivatives_of_a_damped_oscillator_match_the_closed_form() {
        use crate::integrate::test_systems::Oscillator;
        let mut sys = Oscillator {
            m: 2.0,
            k: 50.0,
            c: 3.0,
        };
        // A state where `a⁗` is large against `a⃛` (at some states it nearly vanishes).
        let (t, x, v) = (0.3, 0.1, 0.0);
        let (delta, delta3) = (1e-3, 1e-2);
        let mut work = ReanchorWork::default();
        assert!(work
            .rhs_derivatives(&mut sys, t, &[x], &[v], delta, Some(delta3))
            .unwrap());
        let got = [work.a[0], work.adot[0], work.addot[0], work.adddot[0]];
        let (p, d) = (-sys.k / sys.m, -sys.c / sys.m);
        let mut y = [x, v];
        let mut want = [0.0; 5];
        for w in want.iter_mut() {
            y = [y[1], p * y[0] + d * y[1]];
            *w = y[1];
        }
        let delta_f = (t + 1e-4 * delta) - t;
        let e1 = delta_f * (want[2] - d * want[1]) / 2.0;
        let error3 = (want[4] - d * want[3]) * delta3 / 4.0 - 6.0 * e1 / (delta3 * delta3);
        assert!(
            error3.abs() > 0.02 * want[3].abs(),
            "{error3} of {}",
            want[3]
        );
        let expect = [want[0], want[1], want[2], want[3] + error3];
        let rel = [1e-6, 1e-6, 1e-6, 5e-4];
        for (j, (g, w)) in got.iter().zip(&expect).enumerate() {
            assert!(
                (g - w).abs() < rel[j] * w.abs().max(1.0),
                "derivative {j}: {g} vs {w}"
            );
        }
    }

    /// `a⃛` of a constrained, time-driven system (a three-link Cartesian chain hanging from a
    /// suspension oscillating at 2 Hz, the rods' multipliers coupling everything): the central
    /// difference of `ä` at `t ± ε` along the trajectory's Taylor path, `ä` computed there
    /// from scratch (its own LU and differences), agrees with the `a⃛` of the third pass
    /// extrapolated to `δ₃ → 0` from `δ₃` and `δ₃ / 2` (Richardson: the one point's error is
    /// first order in `δ₃`). The chain starts to swing, `a⁗ / a⃛` is about 160/s, so the one
    /// point's own error is large here: 4 % at `δ₃ = 1e-3` (checked to be below 10 %).
    #[test]
    fn third_derivative_of_a_driven_chain_agrees_with_differences_of_the_second() {
        use crate::integrate::test_systems::CartesianChain;
        let w = 2.0 * std::f64::consts::PI * 2.0;
        let mut sys = CartesianChain::new(3, 0.3, 0.2, w);
        let t = 0.0;
        // Hanging straight down, moving rigidly with the suspension: consistent.
        let q: Vec<f64> = (1..=3).flat_map(|k| [2.0, -(k as f64)]).collect();
        let v: Vec<f64> = (1..=3).flat_map(|_| [0.3 * w, 0.2 * w]).collect();
        let mut jet = |delta3: f64| {
            let mut work = ReanchorWork::default();
            assert!(work
                .rhs_derivatives(&mut sys, t, &q, &v, 1e-4, Some(delta3))
                .unwrap());
            [work.a, work.adot, work.addot, work.adddot]
        };
        let [a, ad, add, one_point] = jet(1e-3);
        let half = jet(5e-4)[3].clone();
        let a3: Vec<f64> = (0..6).map(|i| 2.0 * half[i] - one_point[i]).collect();
        let eps = 1e-3;
        let mut addot_at = |s: f64| -> Vec<f64> {
            let (s2, s3, s4, s5) = (
                s * s / 2.0,
                s.powi(3) / 6.0,
                s.powi(4) / 24.0,
                s.powi(5) / 120.0,
            );
            let qs: Vec<f64> = (0..6)
                .map(|i| q[i] + s * v[i] + s2 * a[i] + s3 * ad[i] + s4 * add[i] + s5 * a3[i])
                .collect();
            let vs: Vec<f64> = (0..6)
                .map(|i| v[i] + s * a[i] + s2 * ad[i] + s3 * add[i] + s4 * a3[i])
                .collect();
            let mut wk = ReanchorWork::default();
            assert!(wk
                .rhs_derivatives(&mut sys, t + s, &qs, &vs, 1e-4, None)
                .unwrap());
            wk.addot
        };
        let (plus, minus) = (addot_at(eps), addot_at(-eps));
        let scale = a3.iter().fold(0.0f64, |m, z| m.max(z.abs()));
        assert!(scale > 1.0, "a⃛ = {a3:?}");
        for i in 0..6 {
            let fd = (plus[i] - minus[i]) / (2.0 * eps);
            assert!(
                (fd - a3[i]).abs() < 1e-3 * scale,
                "coordinate {i}: a⃛ {} vs differences {fd}",
                a3[i]
            );
            assert!(
                (one_point[i] - a3[i]).abs() < 0.1 * scale,
                "coordinate {i}: a⃛ at one point {} vs extrapolated {}",
                one_point[i],
                a3[i]
            );
        }
    }

    /// A history sampled from the old motion `q = c t³ / 6` (acceleration `c t`), re-anchored
    /// to new `a`, `ȧ`, `ä`, `a⃛` at `t_n`, has exactly the new derivatives at `t_n` and keeps
    /// `y_n`.
    #[test]
    fn reanchored_history_has_the_new_derivatives() {
        let (tn, h, c) = (0.5, 0.01, 3.0);
        for k in 2..=5 {
            let mut d = DMatrix::zeros(2, 8);
            let q = differences(|t| c * t.powi(3) / 6.0, tn, h, k);
            let v = differences(|t| c * t * t / 2.0, tn, h, k);
            for j in 0..=k {
                d[(0, j)] = q[j];
                d[(1, j)] = v[j];
            }
            let (a_new, adot_new, addot_new) = (7.0, -40.0, 900.0);
            let cf = backward_derivative_coefficients::<6>(k);
            let der_of = |d: &DMatrix<f64>, row: usize, m: usize| -> f64 {
                (1..=k).map(|j| cf[m][j] * d[(row, j)]).sum::<f64>() / h.powi(m as i32)
            };
            let q_slope = der_of(&d, 0, 1);
            let a3_new = 2.0e4;
            let targets: [&[f64]; 5] = [&[a_new], &[adot_new], &[addot_new], &[a3_new], &[0.0]];
            reanchor_differences::<6>(&mut d, k, h, 1, targets, 1e-4, 1e-6);
            let der = |row: usize, m: usize| der_of(&d, row, m);
            assert!((d[(0, 0)] - q[0]).abs() < 1e-15 && (d[(1, 0)] - v[0]).abs() < 1e-15);
            assert!((der(1, 1) - a_new).abs() < 1e-8, "k {k}: v' {}", der(1, 1));
            assert!(
                (der(1, 2) - adot_new).abs() < 1e-6,
                "k {k}: v'' {}",
                der(1, 2)
            );
            assert!((der(0, 2) - a_new).abs() < 1e-6, "k {k}: q'' {}", der(0, 2));
            if k >= 3 {
                assert!(
                    (der(0, 3) - adot_new).abs() < 1e-4,
                    "k {k}: q''' {}",
                    der(0, 3)
                );
                assert!(
                    (der(1, 3) - addot_new).abs() < 1e-3,
                    "k {k}: v''' {}",
                    der(1, 3)
                );
            }
            if k >= 4 {
                assert!(
                    (der(0, 4) - addot_new).abs() < 1e-1,
                    "k {k}: q'''' {}",
                    der(0, 4)
                );
                assert!(
                    (der(1, 4) - a3_new).abs() < 1e-1,
                    "k {k}: v'''' {}",
                    der(1, 4)
                );
            }
            if k >= 5 {
                assert!(
                    (der(0, 5) - a3_new).abs() < 1e1,
                    "k {k}: q^(5) {}",
                    der(0, 5)
                );
                assert!(der(1, 5).abs() < 1e1, "k {k}: v^(5) {}", der(1, 5));
            }
            // The velocity's slope at t_n is untouched by the position correction.
            assert!(
                (der(0, 1) - q_slope).abs() < 1e-8,
                "k {k}: q' {}",
                der(0, 1)
            );
        }
    }
}
