//! Why an integration stopped: a mechanism at or near a singular position.
//!
//! A driver that pushes a mechanism beyond its reach, or through a dead point (a slider-crank
//! or four-bar at a toggle position), asks for velocities that grow without bound as the
//! constraint Jacobian loses rank. Every integrator then fails with its own symptom (a step
//! size below the minimum, a singular iteration matrix, a Newton failure), none of which
//! names the cause. After a failed step the co-simulation layer asks [`singular_position`]
//! whether the constraints are what degenerated, and adds its answer to the message.
//!
//! The test compares the conditioning of the constraint Jacobian at the failure with that at
//! the model file's positions, on the same independent rows, each row scaled to unit maximum
//! (so that the rows' units do not count). Both formulations are judged on the absolute
//! coordinates' rows, so the message names the same joints and drivers in both.

use super::assembly::{all_rows, independent_rows};
use super::system::{RowOwner, System};
use crate::integrate::MechState;
use nalgebra::DMatrix;

/// Largest model diagnosed: the two SVDs are O(n³), and the diagnosis runs inside the
/// master's doStep call, which must return in bounded time.
const MAX_COORDS: usize = 600;
/// The conditioning must have dropped by this factor since the file's positions.
const DROP: f64 = 1e-2;
/// Rows named: those whose weight in the vanishing combination is at least this fraction of
/// the largest one.
const NAMED: f64 = 0.3;

/// A sentence on the singular position at state `x`, or `None` when the constraint Jacobian
/// there is about as well conditioned as at the model file's positions (or the model is too
/// large to check). Works on a copy: the system's caches and angle branches stay as they are.
pub fn singular_position(sys: &System, x: &MechState) -> Option<String> {
    if sys.all_rows_count() == 0 || !x.q.iter().all(|v| v.is_finite()) {
        return None;
    }
    let mut s = sys.clone();
    let q = match s.joint.take() {
        Some(mut j) => j.to_absolute(&s, x.t, &x.q, None).0,
        None => x.q.clone(),
    };
    if q.len() > MAX_COORDS || s.q0.len() != q.len() {
        return None;
    }
    let q0 = s.q0.clone();
    let (_, j_ref) = all_rows(&mut s, x.t, &q0);
    let (keep, _) = independent_rows(&j_ref);
    let (_, j_now) = all_rows(&mut s, x.t, &q);
    let (r_ref, _) = conditioning(&j_ref, &keep)?;
    let (r_now, u) = conditioning(&j_now, &keep)?;
    // (Ratios are finite and non-negative here: `conditioning` checked the entries.)
    if r_now >= DROP * r_ref {
        return None;
    }
    let umax = u.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut names: Vec<&str> = Vec::new();
    let mut order: Vec<usize> = (0..u.len()).collect();
    order.sort_by(|&a, &b| u[b].abs().total_cmp(&u[a].abs()));
    for k in order {
        if u[k].abs() < NAMED * umax || names.len() == 5 {
            break;
        }
        // A body's normalization takes part in any rotation, and names nothing to change.
        if !matches!(s.rows[keep[k]].owner, RowOwner::Normalization(_)) {
            names.push(s.all_row_label(keep[k]));
        }
    }
    Some(format!(
        "at t = {} the mechanism is at or near a singular position: the constraints {} have \
         become dependent (conditioning {r_now:.1e} against {r_ref:.1e} at the model file's \
         positions). A driver that moves the mechanism beyond its reach or through a dead \
         point (a toggle position) demands unbounded velocities there: check the drivers' \
         signals against the mechanism's range of motion",
        x.t,
        names.join(", ")
    ))
}

/// `σ_min / σ_max` of the rows `rows` of `jac`, each scaled to unit maximum, and the left
/// singular vector of `σ_min` (the rows' combination that vanishes). `None` for an empty or
/// non-finite matrix or an SVD that does not converge.
fn conditioning(jac: &DMatrix<f64>, rows: &[usize]) -> Option<(f64, Vec<f64>)> {
    let mut a = DMatrix::zeros(rows.len(), jac.ncols());
    for (k, &i) in rows.iter().enumerate() {
        let row = jac.row(i);
        let m = row.amax();
        if !(m > 0.0 && m.is_finite()) {
            return None;
        }
        a.row_mut(k).copy_from(&(row / m));
    }
    if a.is_empty() || a.nrows() > a.ncols() {
        return None;
    }
    let svd = a.try_svd(true, false, f64::EPSILON, 10_000)?;
    let (kmin, smin) = svd
        .singular_values
        .iter()
        .copied()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    let smax = svd.singular_values.max();
    let u = svd.u?.column(kmin).iter().copied().collect();
    (smax > 0.0).then(|| (smin / smax, u))
}
