//! Kinematic assembly and static equilibrium.
//!
//! 1. Positions: minimum-norm Gauss–Newton on all constraint rows, `Δq = −Φ_q⁺ Φ` (SVD
//!    pseudo-inverse, so redundant rows do not break it).
//! 2. Redundant rows: at the assembled configuration, rows whose gradient is (numerically) a
//!    combination of earlier rows are dropped and reported; rows that are redundant but
//!    *inconsistent* (the residual stays) are an error naming them.
//! 3. Velocities: minimal-norm projection onto `Φ_q v + Φ_t = 0`.
//! 4. Static equilibrium (`initial = "static"`): Newton on `f(q, 0) − Φ_qᵀ λ = 0, Φ = 0`.

use super::system::System;
use super::ModelError;
use crate::integrate::system::{ConstraintHessians, ForceJacobians, Mechanical};
use crate::integrate::MechState;
use nalgebra::{DMatrix, DVector};

const POS_TOL: f64 = 1e-12;
const MAX_ITER: usize = 60;

fn fail(sys: &System, message: String) -> ModelError {
    ModelError::Assembly {
        file: sys.spec().source_files.first().cloned().unwrap_or_default(),
        message,
    }
}

/// Residual and Jacobian of all rows (temporarily activating all of them).
fn all_rows(sys: &mut System, t: f64, q: &[f64]) -> (DVector<f64>, DMatrix<f64>) {
    let n = sys.all_rows_count();
    let (nq, saved) = (sys.n_q(), (0..n).collect::<Vec<_>>());
    sys.set_active_rows(saved, Vec::new());
    let mut phi = vec![0.0; n];
    let mut jac = DMatrix::zeros(n, nq);
    sys.constraints(t, q, &mut phi);
    sys.constraint_jacobian(t, q, &mut jac);
    (DVector::from_vec(phi), jac)
}

fn pinv_solve(jac: &DMatrix<f64>, rhs: &DVector<f64>) -> DVector<f64> {
    let zero = || DVector::zeros(jac.ncols());
    // Guards: an empty matrix has no SVD, non-finite entries make nalgebra's SVD iterate
    // forever, and so do entries near the overflow limit (1e308 stiffness): scaled by a power
    // of two (exact) when huge, and the iterations bounded.
    let amax = jac.amax();
    if jac.is_empty() || !amax.is_finite() || rhs.iter().any(|r| !r.is_finite()) {
        return zero();
    }
    let scale = if amax > 1e100 {
        2f64.powi(amax.log2().ceil() as i32)
    } else {
        1.0
    };
    let Some(svd) = (jac / scale).try_svd(true, true, f64::EPSILON, 10_000) else {
        return zero();
    };
    let smax = svd.singular_values.iter().cloned().fold(0.0, f64::max);
    svd.solve(&(rhs / scale), 1e-10 * smax.max(1e-300))
        .unwrap_or_else(|_| zero())
}

/// Damped Gauss–Newton on `Φ(q) − (1 − s) r0 = 0` from `q`, tracking angle branches after
/// every iterate. Returns whether it converged.
fn gauss_newton(
    sys: &mut System,
    t: f64,
    q: &mut [f64],
    r0: &DVector<f64>,
    s: f64,
    tol: f64,
) -> bool {
    let target = |phi: DVector<f64>| phi - r0 * (1.0 - s);
    let (phi, mut jac) = all_rows(sys, t, q);
    let mut res = target(phi);
    let mut norm = res.norm();
    for _ in 0..MAX_ITER {
        if !norm.is_finite() {
            return false;
        }
        if res.amax() < tol {
            return true;
        }
        let dq = pinv_solve(&jac, &res);
        let q_old = q.to_vec();
        let mut step = 1.0;
        loop {
            for i in 0..q.len() {
                q[i] = q_old[i] - step * dq[i];
            }
            let (phi, j) = all_rows(sys, t, q);
            let r = target(phi);
            let n = r.norm();
            if n < norm || step < 1e-4 {
                res = r;
                jac = j;
                norm = n;
                break;
            }
            step *= 0.5;
        }
        sys.track_angles(q, t);
        if step < 1e-4 {
            return res.amax() < tol;
        }
    }
    res.amax() < tol
}

/// Positions onto the constraint manifold. Plain damped Gauss–Newton first; if that fails
/// (a driven coordinate starting far from the file's geometry), a continuation that removes
/// the initial residual in 2, 4, … 256 stages, so drivers turn the mechanism gradually and
/// angle branches follow.
fn assemble_positions(sys: &mut System, t: f64, q: &mut [f64]) -> Result<(), ModelError> {
    let q_start = q.to_vec();
    let zero = DVector::zeros(sys.all_rows_count());
    if gauss_newton(sys, t, q, &zero, 1.0, POS_TOL) {
        return Ok(());
    }
    let mut stages = 2;
    while stages <= 256 {
        q.copy_from_slice(&q_start);
        sys.reset_angles(q, t);
        let r0 = all_rows(sys, t, q).0;
        let ok = (1..=stages).all(|k| {
            let s = k as f64 / stages as f64;
            let tol = if k == stages { POS_TOL } else { 1e-8 };
            gauss_newton(sys, t, q, &r0, s, tol)
        });
        if ok {
            return Ok(());
        }
        stages *= 2;
    }
    let (phi, _) = all_rows(sys, t, q);
    let mut worst: Vec<(f64, usize)> = phi.iter().enumerate().map(|(i, v)| (v.abs(), i)).collect();
    worst.sort_by(|a, b| b.0.total_cmp(&a.0));
    let names: Vec<String> = worst
        .iter()
        .take(4)
        .filter(|w| w.0 > 1e-9)
        .map(|w| format!("{} (residual {:.3e})", sys.all_row_label(w.1), w.0))
        .collect();
    Err(fail(sys, format!("the model cannot be assembled at t = {t}: the constraints have no common solution near the initial positions; largest residuals: {}", names.join("; "))))
}

/// Greedy selection of independent rows (modified Gram–Schmidt with a relative tolerance).
fn independent_rows(jac: &DMatrix<f64>) -> (Vec<usize>, Vec<usize>) {
    let (n, m) = (jac.nrows(), jac.ncols());
    let scale = jac.amax().max(1e-300);
    let mut basis: Vec<DVector<f64>> = Vec::new();
    let (mut keep, mut drop) = (Vec::new(), Vec::new());
    for i in 0..n {
        let mut r = DVector::from_iterator(m, jac.row(i).iter().copied());
        let r0 = r.norm();
        for b in &basis {
            let c = b.dot(&r);
            r -= b * c;
        }
        if r0 > 0.0 && r.norm() > 1e-9 * scale.max(r0) {
            basis.push(r.normalize());
            keep.push(i);
        } else {
            drop.push(i);
        }
    }
    (keep, drop)
}

pub fn initial_state(sys: &mut System, t0: f64) -> Result<MechState, ModelError> {
    let (mut q, mut v) = sys.initial_guess();
    // Angle branches start at the file's geometry and follow assembly (never re-wrapped after it).
    let (q_given, v_given) = (q.clone(), v.clone());
    sys.reset_angles(&q, t0);
    let initial_residual = all_rows(sys, t0, &q).0.amax();
    assemble_positions(sys, t0, &mut q)?;
    let (_, jac) = all_rows(sys, t0, &q);
    let (keep, drop) = independent_rows(&jac);
    let dropped: Vec<String> = drop
        .iter()
        .map(|&i| sys.all_row_label(i).to_string())
        .collect();
    sys.set_active_rows(keep, dropped);
    sys.track_angles(&q, t0);
    if sys.spec().initialization == super::spec::Initialization::Static {
        static_equilibrium(sys, t0, &mut q)?;
        v.iter_mut().for_each(|x| *x = 0.0);
    }
    project_velocities(sys, t0, &q, &mut v)?;
    let (_, lambda) = sys.accelerations(t0, &q, &v)?;
    let mut phi = vec![0.0; sys.n_c()];
    sys.constraints(t0, &q, &mut phi);
    let maxdiff = |a: &[f64], b: &[f64]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max)
    };
    sys.report = Some(super::system::AssemblyReport {
        n_coordinates: sys.n_q(),
        n_equations: sys.all_rows_count(),
        n_independent: sys.n_c(),
        dof: sys.n_q() - sys.n_c(),
        dropped: sys.dropped.clone(),
        initial_residual,
        max_position_change: maxdiff(&q, &q_given),
        max_velocity_change: maxdiff(&v, &v_given),
        final_residual: phi.iter().fold(0.0, |m, x| m.max(x.abs())),
    });
    Ok(MechState {
        t: t0,
        q,
        v,
        lambda,
    })
}

/// Minimal-norm velocity correction onto `Φ_q v + Φ_t = 0`.
pub fn project_velocities(
    sys: &mut System,
    t: f64,
    q: &[f64],
    v: &mut [f64],
) -> Result<(), ModelError> {
    let (nq, nc) = (sys.n_q(), sys.n_c());
    if nc == 0 {
        return Ok(());
    }
    let mut jac = DMatrix::zeros(nc, nq);
    let mut phi_t = vec![0.0; nc];
    sys.constraint_jacobian(t, q, &mut jac);
    sys.constraint_time_derivative(t, q, &mut phi_t);
    let res = &jac * DVector::from_column_slice(v) + DVector::from_vec(phi_t);
    let dv = pinv_solve(&jac, &res);
    for (vi, d) in v.iter_mut().zip(dv.iter()) {
        *vi -= d;
    }
    Ok(())
}

/// Newton on `[f(q,0) − Φ_qᵀλ; Φ(q)] = 0` with a backtracking line search.
fn static_equilibrium(sys: &mut System, t: f64, q: &mut [f64]) -> Result<(), ModelError> {
    let (nq, nc) = (sys.n_q(), sys.n_c());
    let zeros = vec![0.0; nq];
    let mut f = vec![0.0; nq];
    let mut phi = vec![0.0; nc];
    let mut jac = DMatrix::zeros(nc, nq);
    let residual = |sys: &mut System,
                    q: &[f64],
                    lambda: &DVector<f64>,
                    f: &mut Vec<f64>,
                    phi: &mut Vec<f64>,
                    jac: &mut DMatrix<f64>|
     -> DVector<f64> {
        sys.forces(t, q, &zeros, f);
        sys.constraints(t, q, phi);
        sys.constraint_jacobian(t, q, jac);
        let r1 = DVector::from_column_slice(f) - jac.transpose() * lambda;
        DVector::from_iterator(nq + nc, r1.iter().copied().chain(phi.iter().copied()))
    };
    // λ from least squares on the force balance at the start.
    sys.forces(t, q, &zeros, &mut f);
    sys.constraint_jacobian(t, q, &mut jac);
    let mut lambda = pinv_solve(&jac.transpose(), &DVector::from_column_slice(&f));
    let force_scale = f.iter().map(|x| x.abs()).fold(1.0, f64::max);
    let mut dfq = DMatrix::zeros(nq, nq);
    let mut dfv = DMatrix::zeros(nq, nq);
    let mut hess = DMatrix::zeros(nq, nq);
    for _ in 0..100 {
        let r = residual(sys, q, &lambda, &mut f, &mut phi, &mut jac);
        let rn = r.amax();
        if rn < 1e-10 * force_scale {
            return Ok(());
        }
        sys.force_jacobians(t, q, &zeros, &mut dfq, &mut dfv);
        sys.constraint_force_jacobian(t, q, lambda.as_slice(), &mut hess);
        let mut a = DMatrix::zeros(nq + nc, nq + nc);
        a.view_mut((0, 0), (nq, nq)).copy_from(&(&dfq - &hess));
        a.view_mut((0, nq), (nq, nc)).copy_from(&(-jac.transpose()));
        a.view_mut((nq, 0), (nc, nq)).copy_from(&jac);
        let dx = pinv_solve(&a, &(-&r));
        let mut step = 1.0;
        let (q_old, l_old) = (q.to_vec(), lambda.clone());
        loop {
            for i in 0..nq {
                q[i] = q_old[i] + step * dx[i];
            }
            lambda = &l_old + step * dx.rows(nq, nc);
            let r_new = residual(sys, q, &lambda, &mut f, &mut phi, &mut jac).amax();
            if r_new < rn || step < 1e-3 {
                break;
            }
            step *= 0.5;
        }
    }
    let r = residual(sys, q, &lambda, &mut f, &mut phi, &mut jac);
    Err(fail(sys, format!("static equilibrium not found at t = {t}: the force residual stays at {:.3e} (is the model statically determined? a free body or an unsupported mechanism has no equilibrium)", r.amax())))
}
