//! Dense linear algebra and constraint machinery shared by the suite's integrators
//! (Dormand–Prince, half-implicit, Newmark family, SDIRK, …): an in-place LU with partial
//! pivoting (no allocation after construction), the index-1 saddle-point solve for
//! accelerations and multipliers, coordinate projections onto the position and velocity
//! constraints, and the step-size bookkeeping every method shares (clipping at `t_limit`,
//! maximum and minimum step).
//!
//! Statistics are counted the same way by every method of the suite:
//! - `f_evals`: evaluations of the forces with the constraint terms at one point (one
//!   right-hand side of the index-1 form, one residual of an implicit method, one state-space
//!   acceleration); those made for finite-difference Jacobians are also in `f_evals_jacobian`.
//! - `jac_evals`: Jacobian evaluations (analytic force Jacobians or a full finite-difference
//!   sweep).
//! - `lu`: factorizations of iteration matrices and of projection matrices; the saddle-point
//!   factorization inside one right-hand-side evaluation is part of that evaluation.
//! - `newton_iters`: corrector iterations (linear solves with the iteration matrix).
//! - `steps`, `rejected_steps` (error test or convergence failure), `error_test_failures`,
//!   `convergence_failures`.

#![allow(clippy::needless_range_loop)] // index loops are clearer in dense numerics

use super::step_control::initial_step_size;
use super::system::Mechanical;
use super::{IntegrateError, Settings};
use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

/// LU factorization with partial pivoting, stored in place. Build the matrix in [`Lu::a`],
/// call [`Lu::factor`], then [`Lu::solve`] any number of right-hand sides.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Lu {
    pub a: DMatrix<f64>,
    piv: Vec<usize>,
}

impl Lu {
    pub fn new(n: usize) -> Self {
        Lu {
            a: DMatrix::zeros(n, n),
            piv: vec![0; n],
        }
    }

    pub fn dim(&self) -> usize {
        self.piv.len()
    }

    /// Factor `a` in place. Returns the column at which a zero (relative to the largest entry)
    /// pivot appeared, if any.
    pub fn factor(&mut self) -> Result<(), usize> {
        let n = self.dim();
        let scale = self.a.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        if !scale.is_finite() {
            return Err(0);
        }
        let tiny = scale * 1e-15 + f64::MIN_POSITIVE;
        for k in 0..n {
            let mut p = k;
            let mut best = self.a[(k, k)].abs();
            for i in k + 1..n {
                let x = self.a[(i, k)].abs();
                if x > best {
                    best = x;
                    p = i;
                }
            }
            if best <= tiny {
                return Err(k);
            }
            self.piv[k] = p;
            if p != k {
                self.a.swap_rows(p, k);
            }
            let d = 1.0 / self.a[(k, k)];
            for i in k + 1..n {
                self.a[(i, k)] *= d;
            }
            for j in k + 1..n {
                let akj = self.a[(k, j)];
                if akj != 0.0 {
                    for i in k + 1..n {
                        let lik = self.a[(i, k)];
                        self.a[(i, j)] -= lik * akj;
                    }
                }
            }
        }
        Ok(())
    }

    /// Solve `A x = b` in place (`b` becomes `x`).
    pub fn solve(&self, b: &mut [f64]) {
        let n = self.dim();
        for k in 0..n {
            b.swap(k, self.piv[k]);
        }
        for j in 0..n {
            let bj = b[j];
            if bj != 0.0 {
                for i in j + 1..n {
                    b[i] -= self.a[(i, j)] * bj;
                }
            }
        }
        for j in (0..n).rev() {
            b[j] /= self.a[(j, j)];
            let bj = b[j];
            for i in 0..j {
                b[i] -= self.a[(i, j)] * bj;
            }
        }
    }
}

impl Lu {
    /// Solve `Aᵀ x = b` in place with the factorization of `A`.
    pub fn solve_transpose(&self, b: &mut [f64]) {
        let n = self.dim();
        // A = Pᵀ L U (row swaps in order), so Aᵀ = Uᵀ Lᵀ P.
        for j in 0..n {
            let mut s = b[j];
            for i in 0..j {
                s -= self.a[(i, j)] * b[i];
            }
            b[j] = s / self.a[(j, j)];
        }
        for j in (0..n).rev() {
            let mut s = b[j];
            for i in j + 1..n {
                s -= self.a[(i, j)] * b[i];
            }
            b[j] = s;
        }
        for k in (0..n).rev() {
            b.swap(k, self.piv[k]);
        }
    }
}

/// `y += a·x`.
pub fn axpy(y: &mut [f64], a: f64, x: &[f64]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += a * xi;
    }
}

pub fn inf_norm(x: &[f64]) -> f64 {
    x.iter().fold(0.0f64, |m, v| m.max(v.abs()))
}

pub fn all_finite(x: &[f64]) -> bool {
    x.iter().all(|v| v.is_finite())
}

/// Workspace for the index-1 saddle-point solve and the coordinate projections.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Constrained {
    pub nq: usize,
    pub nc: usize,
    pub m: DMatrix<f64>,
    pub jac: DMatrix<f64>,
    pub f: Vec<f64>,
    pub gamma: Vec<f64>,
    pub phi: Vec<f64>,
    pub phi_t: Vec<f64>,
    /// `[M Φqᵀ; Φq 0]`.
    pub saddle: Lu,
    /// `Φq Φqᵀ` for the minimal-norm projections.
    pub jjt: Lu,
    pub rhs: Vec<f64>,
    pub mu: Vec<f64>,
}

/// Largest number of Newton iterations of the position projection.
const PROJECTION_ITERS: usize = 8;

impl Constrained {
    pub fn new(nq: usize, nc: usize) -> Self {
        Constrained {
            nq,
            nc,
            m: DMatrix::zeros(nq, nq),
            jac: DMatrix::zeros(nc, nq),
            f: vec![0.0; nq],
            gamma: vec![0.0; nc],
            phi: vec![0.0; nc],
            phi_t: vec![0.0; nc],
            saddle: Lu::new(nq + nc),
            jjt: Lu::new(nc),
            rhs: vec![0.0; nq + nc],
            mu: vec![0.0; nc],
        }
    }

    /// Accelerations and multipliers from `[M Φqᵀ; Φq 0][a; λ] = [f; γ]`: one right-hand-side
    /// evaluation (the caller counts it).
    pub fn accelerations<S: Mechanical + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        q: &[f64],
        v: &[f64],
        a: &mut [f64],
        lambda: &mut [f64],
    ) -> Result<(), IntegrateError> {
        let (nq, nc) = (self.nq, self.nc);
        // Without constraints from the system's own recursion where it has one, instead of
        // forming and factoring `M`.
        if nc == 0 && sys.unconstrained_accelerations(t, q, v, a) {
            if !all_finite(a) {
                return Err(IntegrateError::NonFinite {
                    t,
                    what: "accelerations".into(),
                });
            }
            return Ok(());
        }
        sys.mass_matrix(t, q, &mut self.m);
        sys.forces(t, q, v, &mut self.f);
        if nc > 0 {
            sys.constraint_jacobian(t, q, &mut self.jac);
            sys.acceleration_rhs(t, q, v, &mut self.gamma);
        }
        let s = &mut self.saddle.a;
        s.fill(0.0);
        s.view_mut((0, 0), (nq, nq)).copy_from(&self.m);
        for i in 0..nc {
            for j in 0..nq {
                let x = self.jac[(i, j)];
                s[(nq + i, j)] = x;
                s[(j, nq + i)] = x;
            }
        }
        self.saddle.factor().map_err(|k| IntegrateError::Singular {
            t,
            what: format!("saddle-point matrix [M Φqᵀ; Φq 0], pivot {k}"),
        })?;
        self.rhs[..nq].copy_from_slice(&self.f);
        self.rhs[nq..].copy_from_slice(&self.gamma);
        self.saddle.solve(&mut self.rhs);
        if !all_finite(&self.rhs) {
            return Err(IntegrateError::NonFinite {
                t,
                what: "accelerations".into(),
            });
        }
        a.copy_from_slice(&self.rhs[..nq]);
        lambda.copy_from_slice(&self.rhs[nq..]);
        Ok(())
    }

    /// Mass-orthogonal velocity projection followed by the consistent accelerations and
    /// multipliers, with one factorization of `[M Φqᵀ; Φq 0]` at `q`:
    /// `[M Φqᵀ; Φq 0][Δv; μ] = [0; −(Φq v + Φt)]`, then `[a; λ]` from `[f(v); γ(v)]`.
    /// One right-hand-side evaluation (the caller counts it and the factorization).
    #[allow(clippy::too_many_arguments)]
    pub fn project_velocities_and_accelerations<S: Mechanical + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        q: &[f64],
        v: &mut [f64],
        a: &mut [f64],
        lambda: &mut [f64],
    ) -> Result<(), IntegrateError> {
        let (nq, nc) = (self.nq, self.nc);
        sys.mass_matrix(t, q, &mut self.m);
        if nc > 0 {
            sys.constraint_jacobian(t, q, &mut self.jac);
            sys.constraint_time_derivative(t, q, &mut self.phi_t);
        }
        self.form_saddle();
        self.saddle.factor().map_err(|k| IntegrateError::Singular {
            t,
            what: format!("saddle-point matrix [M Φqᵀ; Φq 0], pivot {k}"),
        })?;
        if nc > 0 {
            self.rhs[..nq].fill(0.0);
            for i in 0..nc {
                let mut r = self.phi_t[i];
                for j in 0..nq {
                    r += self.jac[(i, j)] * v[j];
                }
                self.rhs[nq + i] = -r;
            }
            self.saddle.solve(&mut self.rhs);
            axpy(v, 1.0, &self.rhs[..nq]);
        }
        sys.forces(t, q, v, &mut self.f);
        if nc > 0 {
            sys.acceleration_rhs(t, q, v, &mut self.gamma);
        }
        self.rhs[..nq].copy_from_slice(&self.f);
        self.rhs[nq..].copy_from_slice(&self.gamma);
        self.saddle.solve(&mut self.rhs);
        if !all_finite(&self.rhs) || !all_finite(v) {
            return Err(IntegrateError::NonFinite {
                t,
                what: "projected velocities / accelerations".into(),
            });
        }
        a.copy_from_slice(&self.rhs[..nq]);
        lambda.copy_from_slice(&self.rhs[nq..]);
        Ok(())
    }

    /// `[M Φqᵀ; Φq 0]` from `self.m`, `self.jac` into `self.saddle.a`.
    fn form_saddle(&mut self) {
        let (nq, nc) = (self.nq, self.nc);
        let s = &mut self.saddle.a;
        s.fill(0.0);
        s.view_mut((0, 0), (nq, nq)).copy_from(&self.m);
        for i in 0..nc {
            for j in 0..nq {
                let x = self.jac[(i, j)];
                s[(nq + i, j)] = x;
                s[(j, nq + i)] = x;
            }
        }
    }

    /// Factor `Φq Φqᵀ` for the current `self.jac`.
    fn factor_jjt(&mut self, t: f64) -> Result<(), IntegrateError> {
        let nc = self.nc;
        for i in 0..nc {
            for j in 0..=i {
                let mut s = 0.0;
                for k in 0..self.nq {
                    s += self.jac[(i, k)] * self.jac[(j, k)];
                }
                self.jjt.a[(i, j)] = s;
                self.jjt.a[(j, i)] = s;
            }
        }
        self.jjt.factor().map_err(|k| IntegrateError::Singular {
            t,
            what: format!("Φq Φqᵀ (dependent constraints?), pivot {k}"),
        })
    }

    /// `x -= Φqᵀ μ` with `Φq Φqᵀ μ = r` (minimal-norm correction so that `Φq Δx = −r`).
    fn min_norm_correction(&mut self, x: &mut [f64], r_is_in_mu: bool) {
        debug_assert!(r_is_in_mu);
        self.jjt.solve(&mut self.mu);
        for j in 0..self.nq {
            let mut s = 0.0;
            for i in 0..self.nc {
                s += self.jac[(i, j)] * self.mu[i];
            }
            x[j] -= s;
        }
    }

    /// Project `q` onto `Φ(q, t) = 0` by Gauss–Newton with minimal-norm corrections
    /// (`Δq = −Φqᵀ(Φq Φqᵀ)⁻¹Φ`, Jacobian refreshed each iteration) until `‖Φ‖∞ ≤ tol`.
    /// Returns the number of iterations.
    pub fn project_positions<S: Mechanical + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        q: &mut [f64],
        tol: f64,
    ) -> Result<usize, IntegrateError> {
        if self.nc == 0 {
            return Ok(0);
        }
        for it in 0..=PROJECTION_ITERS {
            sys.constraints(t, q, &mut self.phi);
            let r = inf_norm(&self.phi);
            if !r.is_finite() {
                return Err(IntegrateError::NonFinite {
                    t,
                    what: "constraint residual in projection".into(),
                });
            }
            if r <= tol {
                return Ok(it);
            }
            if it == PROJECTION_ITERS {
                break;
            }
            sys.constraint_jacobian(t, q, &mut self.jac);
            self.factor_jjt(t)?;
            self.mu.copy_from_slice(&self.phi);
            self.min_norm_correction(q, true);
        }
        Err(IntegrateError::NewtonFailed {
            t,
            failures: PROJECTION_ITERS as u32,
        })
    }

    /// Project `q` onto `Φ(q, t) = 0` mass-orthogonally (paper 001's eq. (3) in the limit of a
    /// large penalty): Newton steps `[M Φqᵀ; Φq 0][Δq; μ] = [0; −Φ]`, matrix refreshed each
    /// iteration, until `‖Φ‖∞ ≤ tol`. Returns the number of factorizations.
    pub fn project_positions_mass<S: Mechanical + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        q: &mut [f64],
        tol: f64,
    ) -> Result<usize, IntegrateError> {
        let nq = self.nq;
        if self.nc == 0 {
            return Ok(0);
        }
        for it in 0..=PROJECTION_ITERS {
            sys.constraints(t, q, &mut self.phi);
            let r = inf_norm(&self.phi);
            if !r.is_finite() {
                return Err(IntegrateError::NonFinite {
                    t,
                    what: "constraint residual in projection".into(),
                });
            }
            if r <= tol {
                return Ok(it);
            }
            if it == PROJECTION_ITERS {
                break;
            }
            sys.mass_matrix(t, q, &mut self.m);
            sys.constraint_jacobian(t, q, &mut self.jac);
            self.form_saddle();
            self.saddle.factor().map_err(|k| IntegrateError::Singular {
                t,
                what: format!("saddle-point matrix in the position projection, pivot {k}"),
            })?;
            self.rhs[..nq].fill(0.0);
            for i in 0..self.nc {
                self.rhs[nq + i] = -self.phi[i];
            }
            self.saddle.solve(&mut self.rhs);
            axpy(q, 1.0, &self.rhs[..nq]);
        }
        Err(IntegrateError::NewtonFailed {
            t,
            failures: PROJECTION_ITERS as u32,
        })
    }

    /// Project `v` onto `Φq v + Φt = 0` (minimal-norm correction) at positions `q`.
    pub fn project_velocities<S: Mechanical + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        q: &[f64],
        v: &mut [f64],
    ) -> Result<(), IntegrateError> {
        if self.nc == 0 {
            return Ok(());
        }
        sys.constraint_jacobian(t, q, &mut self.jac);
        sys.constraint_time_derivative(t, q, &mut self.phi_t);
        self.factor_jjt(t)?;
        for i in 0..self.nc {
            let mut s = self.phi_t[i];
            for j in 0..self.nq {
                s += self.jac[(i, j)] * v[j];
            }
            self.mu[i] = s;
        }
        self.min_norm_correction(v, true);
        Ok(())
    }

    /// Remove from each of `xs` its component normal to the constraints at `q`:
    /// `x -= Φqᵀ(Φq Φqᵀ)⁻¹Φq x` (minimal norm), leaving `Φq x = 0`. An error `x` of an
    /// unprojected step becomes, to first order, this tangential part once the step is
    /// projected onto the constraints.
    pub fn project_tangent<S: Mechanical + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        q: &[f64],
        xs: [&mut [f64]; 2],
    ) -> Result<(), IntegrateError> {
        if self.nc == 0 {
            return Ok(());
        }
        sys.constraint_jacobian(t, q, &mut self.jac);
        self.factor_jjt(t)?;
        for x in xs {
            for i in 0..self.nc {
                self.mu[i] = (0..self.nq).map(|j| self.jac[(i, j)] * x[j]).sum();
            }
            self.min_norm_correction(x, true);
        }
        Ok(())
    }

    /// `‖Φ(q,t)‖∞` and `‖Φq v + Φt‖∞` (diagnostics and tests).
    pub fn residuals<S: Mechanical + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        q: &[f64],
        v: &[f64],
    ) -> (f64, f64) {
        if self.nc == 0 {
            return (0.0, 0.0);
        }
        sys.constraints(t, q, &mut self.phi);
        sys.constraint_jacobian(t, q, &mut self.jac);
        sys.constraint_time_derivative(t, q, &mut self.phi_t);
        let mut rv = 0.0f64;
        for i in 0..self.nc {
            let mut s = self.phi_t[i];
            for j in 0..self.nq {
                s += self.jac[(i, j)] * v[j];
            }
            rv = rv.max(s.abs());
        }
        (inf_norm(&self.phi), rv)
    }
}

/// Tolerance for position projections: well below the integration tolerance so that the
/// projection error does not pollute the error estimate (or, with a fixed step, the
/// convergence order).
pub fn projection_tol(settings: &Settings) -> f64 {
    if settings.fixed_step.is_some() {
        return 1e-13;
    }
    (1e-4 * settings.atol.min(settings.rtol)).clamp(1e-14, 1e-10)
}

/// Checks settings common to every method.
pub fn validate_settings(s: &Settings) -> Result<(), IntegrateError> {
    if !(s.rtol >= 0.0 && s.atol >= 0.0 && s.rtol.is_finite() && s.atol.is_finite())
        || s.rtol + s.atol <= 0.0
    {
        return Err(IntegrateError::Settings(format!(
            "tolerances must be non-negative and not both zero (rtol = {}, atol = {})",
            s.rtol, s.atol
        )));
    }
    if let Some(h) = s.fixed_step {
        if !(h > 0.0 && h.is_finite()) {
            return Err(IntegrateError::Settings(format!(
                "fixed step must be positive and finite, got {h}"
            )));
        }
    }
    if s.max_step.is_nan() || s.max_step < 0.0 {
        return Err(IntegrateError::Settings(format!(
            "max_step must be ≥ 0, got {}",
            s.max_step
        )));
    }
    if !(s.initial_step >= 0.0 && s.initial_step.is_finite()) {
        return Err(IntegrateError::Settings(format!(
            "initial_step must be ≥ 0 and finite, got {}",
            s.initial_step
        )));
    }
    Ok(())
}

/// The step to try next, clipped to `t_limit` (exactly) and to the maximum step.
#[derive(Debug, Clone, Copy)]
pub struct Planned {
    pub h: f64,
    /// The step ends at `t_limit`: the new time must be set to `t_limit` bit for bit.
    pub clipped: bool,
}

/// Shared step bookkeeping: `h` is the step the controller proposes next.
pub fn plan_step(
    settings: &Settings,
    t: f64,
    h_proposed: f64,
    t_limit: f64,
) -> Result<Planned, IntegrateError> {
    let remaining = t_limit - t;
    if remaining.is_nan() || remaining <= 0.0 {
        return Err(IntegrateError::Settings(format!(
            "step limit {t_limit} is not after the current time {t}"
        )));
    }
    let mut h = settings.fixed_step.unwrap_or(h_proposed);
    if settings.max_step > 0.0 && settings.max_step.is_finite() {
        h = h.min(settings.max_step);
    }
    // Clip when the step would reach the limit or leave a sliver (< 1e-8 h) behind it.
    if h >= remaining * (1.0 - 1e-8) {
        Ok(Planned {
            h: remaining,
            clipped: true,
        })
    } else {
        Ok(Planned { h, clipped: false })
    }
}

/// Smallest step allowed at time `t`.
pub fn h_min(t: f64) -> f64 {
    16.0 * f64::EPSILON * t.abs().max(1.0)
}

/// The first step: the setting, or the Hairer–Wanner heuristic on `y = (q, v)`, `y' = (v, a)`.
pub fn first_step(settings: &Settings, t: f64, y: &[f64], dy: &[f64], order: u32) -> f64 {
    if let Some(h) = settings.fixed_step {
        return h;
    }
    if settings.initial_step > 0.0 {
        // Below the smallest step at `t` no method can step (1e-300 failed at once).
        return settings.initial_step.max(h_min(t));
    }
    let h_max = if settings.max_step > 0.0 {
        settings.max_step
    } else {
        0.0
    };
    initial_step_size(t, y, dy, settings.rtol, settings.atol, order, h_max)
}

/// The new time after an accepted step.
pub fn advance(t: f64, p: Planned, t_limit: f64) -> f64 {
    if p.clipped {
        t_limit
    } else {
        t + p.h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lu_solves_a_pivoting_system() {
        let mut lu = Lu::new(3);
        lu.a.copy_from_slice(&[0.0, 2.0, 1.0, 1.0, 1.0, 3.0, 4.0, -1.0, 0.5]);
        let a = lu.a.clone();
        lu.factor().unwrap();
        let x = [1.0, -2.0, 0.5];
        let b = &a * nalgebra::DVector::from_row_slice(&x);
        let mut y = b.as_slice().to_vec();
        lu.solve(&mut y);
        for i in 0..3 {
            assert!((y[i] - x[i]).abs() < 1e-14);
        }
        let bt = a.transpose() * nalgebra::DVector::from_row_slice(&x);
        let mut y = bt.as_slice().to_vec();
        lu.solve_transpose(&mut y);
        for i in 0..3 {
            assert!((y[i] - x[i]).abs() < 1e-14);
        }
        let mut s = Lu::new(2);
        s.a.copy_from_slice(&[1.0, 2.0, 2.0, 4.0]);
        assert!(s.factor().is_err());
    }

    #[test]
    fn plan_step_hits_the_limit_exactly() {
        let s = Settings::default();
        let p = plan_step(&s, 0.1, 0.5, 0.3).unwrap();
        assert!(p.clipped);
        assert_eq!(advance(0.1, p, 0.3), 0.3);
        let p = plan_step(&s, 0.1, 0.05, 0.3).unwrap();
        assert!(!p.clipped && p.h == 0.05);
        assert!(plan_step(&s, 0.3, 0.1, 0.3).is_err());
    }
}
