//! Kinematic assembly and static equilibrium.
//!
//! 1. Positions: minimum-norm Gauss–Newton on all constraint rows, `Δq = −Φ_q⁺ Φ` (SVD
//!    pseudo-inverse, so redundant rows do not break it).
//! 2. Redundant rows: at the assembled configuration, rows whose gradient is (numerically) a
//!    combination of earlier rows are dropped and reported; rows that are redundant but
//!    *inconsistent* (the residual stays) are an error naming them.
//! 3. Velocities: minimal-norm projection onto `Φ_q v + Φ_t = 0`.
//! 4. Static equilibrium (`initial = "static"`): `f(q, 0) − Φ_qᵀ λ = 0, Φ = 0` by the scaled,
//!    globalized solver of `mbs::statics`.

use super::math::e_mat;
use super::system::{BodyChanges, LargestChange, System};
use super::ModelError;
use crate::integrate::system::Mechanical;
use crate::integrate::MechState;
use nalgebra::{DMatrix, DVector, Vector3, Vector4};

const POS_TOL: f64 = 1e-12;
/// The largest constraint residual one stage of the assembly's continuation removes (rad for
/// angles, model units for lengths): a quarter radian keeps a driven crank on its branch.
const STAGE_RESIDUAL: f64 = 0.25;
const MAX_ITER: usize = 60;

fn fail(sys: &System, message: String) -> ModelError {
    ModelError::Assembly {
        file: sys.spec().source_files.first().cloned().unwrap_or_default(),
        message,
    }
}

/// Residual and Jacobian of all rows (temporarily activating all of them).
pub(super) fn all_rows(sys: &mut System, t: f64, q: &[f64]) -> (DVector<f64>, DMatrix<f64>) {
    let n = sys.all_rows_count();
    let (nq, saved) = (sys.n_q(), (0..n).collect::<Vec<_>>());
    sys.set_active_rows(saved, Vec::new());
    let mut phi = vec![0.0; n];
    let mut jac = DMatrix::zeros(n, nq);
    sys.constraints(t, q, &mut phi);
    sys.constraint_jacobian(t, q, &mut jac);
    (DVector::from_vec(phi), jac)
}

pub(super) fn pinv_solve(jac: &DMatrix<f64>, rhs: &DVector<f64>) -> DVector<f64> {
    pinv_solve_scaled(jac, rhs, 0.0)
}

/// [`pinv_solve`] with singular values below `1e-10 · max(σ_max, floor)` treated as zero:
/// `floor` is the size the matrix's entries have when nothing cancels in them (the joint
/// formulation's loop rows, whose gradients can be all round-off; see
/// [`independent_rows_scaled`]).
pub(super) fn pinv_solve_scaled(
    jac: &DMatrix<f64>,
    rhs: &DVector<f64>,
    floor: f64,
) -> DVector<f64> {
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
    let floor = if floor.is_finite() {
        floor / scale
    } else {
        0.0
    };
    svd.solve(&(rhs / scale), 1e-10 * smax.max(floor).max(1e-300))
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

/// Positions onto the constraint manifold. Plain damped Gauss–Newton where the file's
/// geometry is close to the constraints; otherwise (a driven coordinate starting far from the
/// file's geometry, a rough drawing) a continuation that removes the initial residual in
/// stages of at most [`STAGE_RESIDUAL`], doubling them where a stage fails, so drivers turn
/// the mechanism gradually and it stays on the branch it is drawn in. One Newton solve from
/// far away can land on another branch without any sign of it: a slider-crank drawn at crank
/// angle 0 and driven to 2π came out with the slider through the crank pivot (test
/// `a_crank_driven_a_full_turn_assembles_on_the_drawn_branch` in tests/model_errors.rs).
fn assemble_positions(sys: &mut System, t: f64, q: &mut [f64]) -> Result<(), ModelError> {
    let q_start = q.to_vec();
    let zero = DVector::zeros(sys.all_rows_count());
    // The tolerance is relative to the model's size (a model in mm has residuals 1000 times
    // those of the same model in m, round-off included).
    let scale = {
        let layout = sys.layout();
        layout
            .offsets
            .iter()
            .flat_map(|&o| q[o..o + 3].iter())
            .fold(1.0f64, |m, x| m.max(x.abs()))
    };
    let pos_tol = POS_TOL * scale;
    let phi_start = all_rows(sys, t, q).0;
    let r_start = phi_start.amax();
    let far = r_start > STAGE_RESIDUAL;
    if !far && gauss_newton(sys, t, q, &zero, 1.0, pos_tol) {
        return Ok(());
    }
    let mut stages = 2;
    while far && (stages as f64) * STAGE_RESIDUAL < r_start && stages < 256 {
        stages *= 2;
    }
    while stages <= 256 {
        q.copy_from_slice(&q_start);
        sys.reset_angles(q, t);
        let r0 = all_rows(sys, t, q).0;
        let ok = (1..=stages).all(|k| {
            let s = k as f64 / stages as f64;
            let tol = if k == stages { pos_tol } else { 1e-8 * scale };
            gauss_newton(sys, t, q, &r0, s, tol)
        });
        if ok {
            return Ok(());
        }
        stages *= 2;
    }
    // Last resort where the stages fail: one solve from the file's geometry.
    q.copy_from_slice(&q_start);
    sys.reset_angles(q, t);
    if far && gauss_newton(sys, t, q, &zero, 1.0, pos_tol) {
        return Ok(());
    }
    // The rows the file's geometry violates are the ones that could not be closed: name them
    // first. Where the last attempt ends is a least-squares compromise spread over every row
    // (and over the Euler parameters' norms, which its unnormalized steps leave off), so its
    // largest residuals follow, without the normalizations unless nothing else is left.
    let violated = largest_rows(sys, &phi_start, |i| phi_start[i].abs() > pos_tol);
    let (phi, _) = all_rows(sys, t, q);
    let mut after = largest_rows(sys, &phi, |i| !sys.row_is_normalization(i));
    if after.is_empty() {
        after = largest_rows(sys, &phi, |_| true);
    }
    // (Never empty: a start within the tolerance returns above.)
    Err(fail(sys, format!("the model cannot be assembled at t = {t}: the constraints have no common solution near the initial positions; violated as given: {violated}; largest residuals after the last attempt: {after}")))
}

/// The four rows of largest `|phi|` among those `keep` admits, labelled, `; `-separated.
fn largest_rows(sys: &System, phi: &DVector<f64>, keep: impl Fn(usize) -> bool) -> String {
    let mut worst: Vec<(f64, usize)> = phi
        .iter()
        .enumerate()
        .filter(|&(i, _)| keep(i))
        .map(|(i, v)| (v.abs(), i))
        .collect();
    worst.sort_by(|a, b| b.0.total_cmp(&a.0));
    // Always name the largest ones (a consistent model in mm fails with residuals of any size).
    let names: Vec<String> = worst
        .iter()
        .take(4)
        .map(|w| format!("{} (residual {:.3e})", sys.all_row_label(w.1), w.0))
        .collect();
    names.join("; ")
}

/// Greedy selection of independent rows (modified Gram–Schmidt with a relative tolerance).
pub(super) fn independent_rows(jac: &DMatrix<f64>) -> (Vec<usize>, Vec<usize>) {
    independent_rows_scaled(jac, 0.0)
}

/// [`independent_rows`] with the tolerance relative to at least `scale`: a row is kept when
/// what is left of it after removing the kept rows' directions exceeds 1e-9 times the
/// largest of `scale`, the matrix's largest entry and the row's own norm. The absolute
/// formulation's entries are the gradients themselves (nothing cancels in them), so its
/// largest entry is the scale. A Jacobian in joint coordinates sums a row's gradient over the
/// bodies and axes, and a loop joint that is redundant on the tree (a second hinge on the
/// same axis) has rows that are round-off (1e-17) throughout: relative to themselves they
/// looked independent. The joint formulation passes the size of its rows' gradients before
/// that sum.
pub(super) fn independent_rows_scaled(jac: &DMatrix<f64>, scale: f64) -> (Vec<usize>, Vec<usize>) {
    let (n, m) = (jac.nrows(), jac.ncols());
    let scale = jac
        .amax()
        .max(if scale.is_finite() { scale } else { 0.0 })
        .max(1e-300);
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
    initial_state_with(sys, t0, true)
}

/// [`initial_state`]; without `multipliers` the state's `λ` is left empty (the joint
/// formulation reads only positions and velocities off it: the absolute saddle point it would
/// solve is a tenth of a small model's initialization).
pub fn initial_state_with(
    sys: &mut System,
    t0: f64,
    multipliers: bool,
) -> Result<MechState, ModelError> {
    let (mut q, mut v) = sys.initial_guess();
    // Angle branches start at the file's geometry and follow assembly (never re-wrapped after it).
    let q_given = q.clone();
    sys.reset_angles(&q, t0);
    let initial_residual = all_rows(sys, t0, &q).0.amax();
    assemble_positions(sys, t0, &mut q)?;
    let q_assembled = q.clone();
    let (_, jac) = all_rows(sys, t0, &q);
    let (keep, drop) = independent_rows(&jac);
    let dropped: Vec<String> = drop
        .iter()
        .map(|&i| sys.all_row_label(i).to_string())
        .collect();
    sys.set_active_rows(keep.clone(), dropped);
    sys.track_angles(&q, t0);
    preloads_from_equilibrium(sys, t0, &q)?;
    let mut static_iterations = None;
    let is_static = sys.spec().initialization == super::spec::Initialization::Static;
    let at = if is_static {
        "at the assembled position (the static equilibrium's start)"
    } else {
        "at the assembled position"
    };
    finite_start(sys, t0, &q, &vec![0.0; q.len()], at)?;
    if is_static {
        static_iterations = Some(static_equilibrium(sys, t0, &mut q)?);
        v.iter_mut().for_each(|x| *x = 0.0);
    }
    // The velocities projection starts from: the file's, or rest.
    let v_start = v.clone();
    project_velocities(sys, t0, &q, &mut v)?;
    dropped_rows_agree(sys, t0, &q, &v, &keep, &drop)?;
    finite_start(sys, t0, &q, &v, "in the initial state")?;
    let lambda = if multipliers {
        sys.accelerations(t0, &q, &v)?.1
    } else {
        Vec::new()
    };
    let mut phi = vec![0.0; sys.n_c()];
    sys.constraints(t0, &q, &mut phi);
    let before_v = if is_static { &q } else { &q_given };
    let assembly = body_changes(
        sys,
        (&q_given, &q_assembled),
        (before_v, &v_start),
        (&q, &v),
    );
    sys.report = Some(super::system::AssemblyReport {
        n_coordinates: sys.n_q(),
        n_equations: sys.all_rows_count(),
        n_independent: sys.n_c(),
        dof: sys.n_q() - sys.n_c(),
        dropped: sys.dropped.clone(),
        initial_residual,
        assembly,
        final_residual: phi.iter().fold(0.0, |m, x| m.max(x.abs())),
        body_moves: if is_static {
            body_moves(sys, &q_assembled, &q)
        } else {
            Vec::new()
        },
        static_iterations,
    });
    Ok(MechState {
        t: t0,
        q,
        v,
        lambda,
    })
}

/// Positions and forces that overflow the doubles at the start (a parameter far out of
/// range: a mass of 1e308 kg whose weight is infinite, a point at 1e308 m whose spring or
/// tire force is): refused here, naming the bodies, rather than by the first step as a
/// "non-finite value in residual" naming nothing. The static equilibrium's solver, whose
/// scales come from those forces, took such a start for converged.
fn finite_start(
    sys: &mut System,
    t: f64,
    q: &[f64],
    v: &[f64],
    what: &str,
) -> Result<(), ModelError> {
    let mut f = vec![0.0; sys.n_q()];
    sys.forces(t, q, v, &mut f);
    let layout = sys.layout();
    let bad: Vec<String> = (0..sys.spec().bodies.len())
        .filter_map(|b| {
            let o = layout.offsets[b];
            let n = layout.offsets.get(b + 1).copied().unwrap_or(layout.n_q) - o;
            let (qb, vb, fb) = (&q[o..o + n], &v[o..o + n], &f[o..o + n]);
            if qb.iter().chain(vb).chain(fb).all(|x| x.is_finite()) {
                return None;
            }
            let body = &sys.spec().bodies[b];
            let kind = if qb.iter().any(|x| !x.is_finite()) {
                "position"
            } else if vb.iter().any(|x| !x.is_finite()) {
                "velocity"
            } else {
                "forces"
            };
            let m = body.mass.eval(sys.parameters());
            let m = if m.abs() >= 1e6 {
                format!("{m:e}")
            } else {
                format!("{m}")
            };
            Some(format!("body '{}' ({kind}; mass {m} kg)", body.name))
        })
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(fail(
        sys,
        format!(
            "non-finite values {what} at t = {t}: {}; a parameter is out of range (a mass, \
             stiffness, force or position so large that the forces overflow the doubles)",
            bad.join(", ")
        ),
    ))
}

/// A row dropped as redundant at `t` must also agree with the kept rows in velocity and
/// acceleration. Two drivers whose equations are dependent at the start (a joint angle and a
/// point on the same link, both starting at 0) can still prescribe different motions; the
/// dropped one would be ignored without a word. With `Φ_q,d = cᵀ Φ_q,k` (least squares over
/// the kept rows `k`) the rows agree when `Φ_t,d = cᵀ Φ_t,k` and `γ_d = cᵀ γ_k`.
fn dropped_rows_agree(
    sys: &mut System,
    t: f64,
    q: &[f64],
    v: &[f64],
    keep: &[usize],
    drop: &[usize],
) -> Result<(), ModelError> {
    if drop.is_empty() {
        return Ok(());
    }
    let n = sys.all_rows_count();
    let dropped = sys.dropped.clone();
    let (_, jac) = all_rows(sys, t, q);
    let (mut phi_t, mut gamma) = (vec![0.0; n], vec![0.0; n]);
    sys.constraint_time_derivative(t, q, &mut phi_t);
    sys.acceleration_rhs(t, q, v, &mut gamma);
    sys.set_active_rows(keep.to_vec(), dropped);
    let kept_t = jac.select_rows(keep).transpose();
    let amax = |x: &[f64]| x.iter().fold(0.0f64, |m, y| m.max(y.abs()));
    let (scale_v, scale_a) = (amax(&phi_t), amax(&gamma));
    for &d in drop {
        let c = pinv_solve(&kept_t, &jac.row(d).transpose());
        let combo = |x: &[f64]| {
            keep.iter()
                .zip(c.iter())
                .map(|(&k, ck)| ck * x[k])
                .sum::<f64>()
        };
        let off_v = phi_t[d] - combo(&phi_t);
        let off_a = gamma[d] - combo(&gamma);
        let (level, off) = if off_v.abs() > 1e-10 + 1e-7 * scale_v {
            ("velocity", off_v)
        } else if off_a.abs() > 1e-10 + 1e-7 * scale_a {
            ("acceleration", off_a)
        } else {
            continue;
        };
        // The drivers in the combination are what the user must choose between: they are
        // named first and all, the largest of the other rows after them. Listing only the
        // largest coefficients named a four-bar's normalization and joint rows and not the
        // driver on the other crank (which prescribed rest at that instant).
        let cmax = c.amax();
        let mut movers: Vec<(f64, usize)> = Vec::new();
        let mut others: Vec<(f64, usize)> = Vec::new();
        for (&k, ck) in keep.iter().zip(c.iter()) {
            if ck.abs() <= 1e-6 * cmax {
                continue;
            }
            if sys.row_is_driver(k) {
                movers.push((ck.abs(), k));
            } else {
                others.push((ck.abs(), k));
            }
        }
        movers.sort_by(|a, b| b.0.total_cmp(&a.0));
        others.sort_by(|a, b| b.0.total_cmp(&a.0));
        let label = |w: &(f64, usize)| sys.all_row_label(w.1);
        let taken = 3usize.saturating_sub(movers.len()).min(others.len());
        let mut names: Vec<&str> = movers.iter().map(label).collect();
        names.extend(others[..taken].iter().map(label));
        let rest = others.len() - taken;
        let more = if rest > 0 {
            format!(" and {rest} more constraint rows")
        } else {
            String::new()
        };
        let named = if movers.is_empty() {
            String::new()
        } else {
            format!(
                "; the other motion is prescribed by {}",
                movers.iter().map(label).collect::<Vec<_>>().join(", ")
            )
        };
        return Err(fail(
            sys,
            format!(
                "{} is redundant at t = {t} (its equation is a combination of those of {}{more}), \
                 but they prescribe different motions: its {level} equation is off by \
                 {:.3e} (m or rad per s{}){named}. Remove one of them or make them agree",
                sys.all_row_label(d),
                names.join(", "),
                off.abs(),
                if level == "velocity" { "" } else { "²" },
            ),
        ));
    }
    Ok(())
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

/// Per body: translation of the centre and rotation angle between two configurations
/// (absolute coordinates).
fn body_moves(sys: &System, from: &[f64], to: &[f64]) -> Vec<(String, f64, f64)> {
    let layout = sys.layout();
    sys.spec()
        .bodies
        .iter()
        .enumerate()
        .map(|(b, body)| {
            let o = layout.offsets[b];
            let dr = (0..3)
                .map(|k| (to[o + k] - from[o + k]).powi(2))
                .sum::<f64>()
                .sqrt();
            let angle = if layout.is_rigid(b) {
                let p = |x: &[f64]| Vector4::new(x[o + 3], x[o + 4], x[o + 5], x[o + 6]);
                rotation_angle(&p(from), &p(to))
            } else {
                0.0
            };
            (body.name.clone(), dr, angle)
        })
        .collect()
}

/// Rotation angle between two orientations (unit quaternions, scalar first), in [0, π]:
/// `2 atan2(|vector part|, |scalar part|)` of `p0⁻¹ p1`, accurate also for small angles (where
/// `2 acos(p0·p1)` loses half the digits).
pub(crate) fn rotation_angle(p0: &Vector4<f64>, p1: &Vector4<f64>) -> f64 {
    let (w0, e0) = (p0[0], Vector3::new(p0[1], p0[2], p0[3]));
    let (w1, e1) = (p1[0], Vector3::new(p1[1], p1[2], p1[3]));
    let w = w0 * w1 + e0.dot(&e1);
    let e = w0 * e1 - w1 * e0 - e0.cross(&e1);
    2.0 * e.norm().atan2(w.abs())
}

/// The largest change per kind between two states of the bodies (absolute coordinates `q`,
/// velocities `v = (ṙ, ṗ)`): positions between `pos.0` and `pos.1`; velocities between the
/// states `before` and `after`, angular velocities `ω = 2 E(p) ṗ` (global) each at its own
/// orientation.
pub(crate) fn body_changes(
    sys: &System,
    pos: (&[f64], &[f64]),
    before: (&[f64], &[f64]),
    after: (&[f64], &[f64]),
) -> BodyChanges {
    let layout = sys.layout();
    let mut c = BodyChanges::default();
    let note = |slot: &mut LargestChange, value: f64, name: &str| {
        if value > slot.value {
            *slot = LargestChange {
                value,
                body: name.to_string(),
            };
        }
    };
    let v3 = |x: &[f64], o: usize| Vector3::new(x[o], x[o + 1], x[o + 2]);
    let v4 = |x: &[f64], o: usize| Vector4::new(x[o], x[o + 1], x[o + 2], x[o + 3]);
    let omega = |(q, v): (&[f64], &[f64]), o: usize| 2.0 * e_mat(&v4(q, o + 3)) * v4(v, o + 3);
    for (b, body) in sys.spec().bodies.iter().enumerate() {
        let o = layout.offsets[b];
        let name = body.name.as_str();
        note(
            &mut c.displacement,
            (v3(pos.1, o) - v3(pos.0, o)).norm(),
            name,
        );
        note(
            &mut c.velocity,
            (v3(after.1, o) - v3(before.1, o)).norm(),
            name,
        );
        if layout.is_rigid(b) {
            note(
                &mut c.rotation,
                rotation_angle(&v4(pos.0, o + 3), &v4(pos.1, o + 3)),
                name,
            );
            note(
                &mut c.angular_velocity,
                (omega(after, o) - omega(before, o)).norm(),
                name,
            );
        }
    }
    c
}

/// Static equilibrium by the scaled, globalized solver of [`super::statics`]; returns its
/// (iterations, relaxation steps).
fn static_equilibrium(
    sys: &mut System,
    t: f64,
    q: &mut [f64],
) -> Result<(usize, usize), ModelError> {
    let q_start = q.to_vec();
    sys.stick_frozen = true;
    let solved = super::statics::solve_static(sys, t, q);
    sys.stick_frozen = false;
    match solved {
        Ok(s) => Ok((s.iterations, s.relaxation_steps)),
        Err(e) => {
            // How far the search went: a large sag means the springs cannot carry the load
            // within the mechanism's travel (it collapses to a kinematic limit).
            // (Only a sag of at least 5 % of the model's extent gets the hint; not where the
            // bodies are left at an unstable equilibrium: a pendulum balanced upright has
            // moved as far, and no spring is to blame.)
            let moves = if e.only_unstable {
                Vec::new()
            } else {
                body_moves(sys, &q_start, q)
            };
            let extent = (0..sys.spec().bodies.len())
                .map(|b| {
                    let o = sys.layout().offsets[b];
                    (0..3).map(|k| q_start[o + k].powi(2)).sum::<f64>().sqrt()
                })
                .fold(0.0, f64::max);
            let far = moves
                .iter()
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .filter(|(_, d, _)| *d > 0.05 * extent)
                .map(|(name, d, _)| format!("; where it stopped, body '{name}' had moved {d:.3} m from the assembled position (a sag that large: check that the springs can carry the load within the travel of the mechanism)"))
                .unwrap_or_default();
            Err(fail(
                sys,
                format!(
                    "static equilibrium not found at t = {t}: {}{far}",
                    e.message
                ),
            ))
        }
    }
}

/// `static_preload`: a constant force along the coordinate of every marked force term such
/// that the assembled (design) position is a static equilibrium. Unknowns: the preloads `p`
/// and the multipliers `λ` of `f(q, 0) + G p − Φ_qᵀ λ = 0` (`G` = the terms' coordinate
/// gradients), a linear least-squares problem at the fixed `q`. The rule: the solution must be
/// unique, i.e. the marked terms' directions independent of each other and of the constraint
/// reactions (two springs in parallel, or a bushing component a joint already holds, are
/// refused); and exact (the marked elements must be able to hold every unbalanced direction).
fn preloads_from_equilibrium(sys: &mut System, t: f64, q: &[f64]) -> Result<(), ModelError> {
    let marked = sys.preload_terms();
    if marked.is_empty() {
        return Ok(());
    }
    let (nq, nc, nt) = (sys.n_q(), sys.n_c(), sys.n_terms());
    sys.set_presets(vec![(0.0, 0.0); nt]);
    let m = marked.len();
    let mut a = DMatrix::zeros(nq, nc + m);
    let mut jac = DMatrix::zeros(nc, nq);
    sys.constraint_jacobian(t, q, &mut jac);
    a.view_mut((0, 0), (nq, nc)).copy_from(&(-jac.transpose()));
    let mut col = vec![0.0; nq];
    let mut refs = Vec::with_capacity(m);
    for (k, &(i, _)) in marked.iter().enumerate() {
        refs.push(sys.term_direction(i, t, q, &mut col));
        a.column_mut(nc + k).copy_from_slice(&col);
    }
    let mut f0 = vec![0.0; nq];
    sys.forces(t, q, &vec![0.0; nq], &mut f0);
    let b = -DVector::from_vec(f0);
    // Unit columns: rank decisions independent of units and sizes.
    let norms: Vec<f64> = (0..nc + m)
        .map(|j| a.column(j).norm().max(1e-300))
        .collect();
    let mut scaled = a.clone();
    for (j, n) in norms.iter().enumerate() {
        scaled.column_mut(j).scale_mut(1.0 / n);
    }
    let (_, dependent) = independent_rows(&scaled.transpose());
    let mut names: Vec<&str> = dependent
        .iter()
        .filter(|&&j| j >= nc)
        .map(|&j| marked[j - nc].1.as_str())
        .collect();
    names.dedup();
    if !names.is_empty() {
        return Err(fail(sys, format!(
            "static_preload: the preloads are not determined uniquely: {} act(s) along a motion that a joint or another marked element already takes up (two marked springs in parallel, or a bushing component a joint holds); unmark it (`static_preload = false`) or give its preload explicitly",
            names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        )));
    }
    let svd = crate::mbs::math::bounded_svd(scaled, true, true).ok_or_else(|| {
        fail(
            sys,
            "static_preload: the load directions are not finite (non-finite or huge parameter values)".to_string(),
        )
    })?;
    let smax = svd.singular_values.iter().cloned().fold(0.0, f64::max);
    let y = svd
        .solve(&b, 1e-12 * smax.max(1e-300))
        .map_err(|e| fail(sys, format!("static_preload: {e}")))?;
    let x: Vec<f64> = y.iter().zip(&norms).map(|(v, n)| v / n).collect();
    let xv = DVector::from_column_slice(&x);
    let r = &a * &xv - &b;
    let scale = b.amax().max(a.amax() * xv.amax()).max(1e-300);
    if r.amax() > 1e-9 * scale {
        let mut worst: Vec<(f64, usize)> =
            r.iter().enumerate().map(|(i, v)| (v.abs(), i)).collect();
        // Largest first; equal forces (to 1e-9 of the largest: one load carried through a
        // chain of bodies) in coordinate order, so the message does not depend on round-off.
        let top = worst.iter().fold(0.0f64, |m, w| m.max(w.0)).max(1e-300);
        let level = |v: f64| (v / top * 1e9).round() as i64;
        worst.sort_by(|p, q| level(q.0).cmp(&level(p.0)).then(p.1.cmp(&q.1)));
        let labels: Vec<String> = worst
            .iter()
            .take(3)
            .map(|w| {
                format!(
                    "{} ({:.3e})",
                    super::statics::CoordinateInfo::coordinate_label(sys, w.1),
                    w.0
                )
            })
            .collect();
        return Err(fail(sys, format!(
            "static_preload: the marked elements ({}) cannot hold the design position: a force remains along {}; mark an element that acts along that motion",
            marked.iter().map(|m| format!("`{}`", m.1)).collect::<Vec<_>>().join(", "),
            labels.join(", ")
        )));
    }
    let mut presets = vec![(0.0, 0.0); nt];
    for (k, &(i, _)) in marked.iter().enumerate() {
        presets[i] = (x[nc + k], refs[k]);
    }
    sys.set_presets(presets);
    Ok(())
}
