//! Static equilibrium: `f(q, 0) − Φ_q(q)ᵀ λ = 0`, `Φ(q) = 0`, from an assembled `q`.
//!
//! Works through the integrator-facing traits only (`Mechanical`, `ForceJacobians`,
//! `ConstraintHessians`, `StepHooks`) plus [`CoordinateInfo`] for units and names, so any
//! formulation that implements them (absolute coordinates in `mbs::system`, a joint-coordinate
//! formulation with `n_c` = its closure and driver rows) gets the same solver.
//!
//! The method:
//! - **Scaling.** Unknowns: length coordinates are measured in the model's length scale `L`
//!   (the extent of the initial coordinates), the others (Euler parameters, angles) as they are;
//!   multipliers in the units that make their columns O(1). Residual rows: force rows divided
//!   by the load scale `F` (the largest applied force at the start, at least 1e-3 of stiffness
//!   times length; `F L` for rows conjugate to a dimensionless coordinate), constraint rows by
//!   the norm of their scaled gradient. Scaling
//!   every mass and stiffness by `s` scales `f`, `∂f/∂q`, `M` and `λ` by `s` and leaves the
//!   scaled problem unchanged; a consistent change of length unit changes `L` with it: the
//!   iterates are the same.
//! - **Newton** on the scaled KKT system with an Armijo line search on the scaled residual.
//! - **Implicit dynamic relaxation** when a Newton step does not decrease the residual (far
//!   from equilibrium, a snap-through, a soft direction): the step solves
//!   `(K + μ M) Δq + Φ_qᵀ Δλ = r`, i.e. one backward-Euler step of the overdamped motion
//!   `μ M q̇ = f − Φ_qᵀλ`; `μ` is raised until the step decreases the residual and lowered
//!   after every success, so the iteration returns to Newton's quadratic convergence near the
//!   equilibrium (pseudo-transient continuation). Steps of the overdamped motion head for a
//!   stable equilibrium, the one a damped dynamic run settles to.
//! - **Newton only where the stiffness is positive.** Every iteration, `μ` is at least twice
//!   the most negative generalized eigenvalue of `(K, M)` on the constraints' null space, so
//!   where the stiffness is negative (above a hilltop, past an inflection) the step follows
//!   the force down instead of heading for the nearest stationary point (the crest). The
//!   multipliers in `K` are the reactions at rest (`M q̈ + Φ_qᵀλ = f`, `Φ_q q̈ = 0`) after
//!   every step that was not a full Newton step: stepped along with the positions, they lag
//!   behind (a pendulum's upright compression read at its hanging position made it
//!   "unstable" there). Any step that runs against the force (`μ = 0` included, where the
//!   stiffness is singular) is retried with more relaxation.
//! - **Trust radius.** No step is longer than 0.5 scaled units; a step that went past the
//!   minimum along it into a region concave along it (climbing towards a crest) is retaken
//!   from where it started, half as long.
//! - **Unstable equilibria** (converged where the reduced stiffness is negative): a small
//!   displacement along the unstable mode, towards the start (or, from a start exactly there,
//!   to the side where the mode's largest component is positive), and the iteration goes on;
//!   at most three times.
//! - **No equilibrium.** If the residual stalls, the tangent stiffness reduced to the
//!   constraints' null space is examined: directions in which it is (near) zero or negative
//!   and along which a force remains are reported by coordinate name.

use crate::integrate::system::{ConstraintHessians, ForceJacobians, Mechanical, StepHooks};
use nalgebra::{DMatrix, DVector};

/// Units and names of the coordinates, for scaling and messages.
pub trait CoordinateInfo {
    /// Whether coordinate `i` is a length (m in a metre model); otherwise dimensionless
    /// (Euler parameters, angles).
    fn coordinate_is_length(&self, i: usize) -> bool;
    /// A human name: `body 'chassis' z`, `body 'arm' rotation (e1)`.
    fn coordinate_label(&self, i: usize) -> String;
}

/// What the solver did.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticSolution {
    /// Multipliers of the active constraint rows at the equilibrium.
    pub lambda: Vec<f64>,
    /// Newton iterations (including relaxation steps).
    pub iterations: usize,
    /// Steps taken with the dynamic-relaxation term (`μ > 0`).
    pub relaxation_steps: usize,
    /// Scaled force residual at the end (force rows / load scale).
    pub force_residual: f64,
}

/// Why no equilibrium was found.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticFailure {
    pub message: String,
    /// An equilibrium was found, but only unstable ones (the bodies are left there).
    pub only_unstable: bool,
}

const MAX_ITER: usize = 400;
/// Unstable equilibria left behind before giving up.
const MAX_ESCAPES: usize = 3;
/// The longest step, in scaled units (length scales, radians-like for angles and Euler
/// parameters), one iteration may take.
const TRUST_RADIUS: f64 = 0.5;
/// Converged when the scaled residual (force rows relative to the load scale, constraint rows
/// relative to the length scale) is below this.
const TOL: f64 = 1e-11;

struct Scales {
    /// Per coordinate: divides `Δq` (the length scale for lengths, 1 otherwise).
    col_q: Vec<f64>,
    /// Per force row: multiplies the residual.
    row_f: Vec<f64>,
    /// Per constraint row: multiplies the residual.
    row_c: Vec<f64>,
    /// Per multiplier: divides `Δλ`.
    col_l: Vec<f64>,
    /// The load scale `F` (N) and the length scale `L` (m).
    force: f64,
    len: f64,
}

struct Work {
    f: Vec<f64>,
    phi: Vec<f64>,
    jac: DMatrix<f64>,
    dfq: DMatrix<f64>,
    dfv: DMatrix<f64>,
    hess: DMatrix<f64>,
    mass: DMatrix<f64>,
    zeros: Vec<f64>,
}

fn residual<S: Mechanical>(
    sys: &mut S,
    t: f64,
    q: &[f64],
    lambda: &DVector<f64>,
    w: &mut Work,
) -> (DVector<f64>, DVector<f64>) {
    sys.forces(t, q, &w.zeros, &mut w.f);
    sys.constraints(t, q, &mut w.phi);
    sys.constraint_jacobian(t, q, &mut w.jac);
    let r1 = DVector::from_column_slice(&w.f) - w.jac.transpose() * lambda;
    (r1, DVector::from_column_slice(&w.phi))
}

fn scaled_norm(r1: &DVector<f64>, r2: &DVector<f64>, s: &Scales) -> (f64, f64) {
    let a = r1
        .iter()
        .zip(&s.row_f)
        .map(|(x, k)| (x * k).abs())
        .fold(0.0, f64::max);
    let b = r2
        .iter()
        .zip(&s.row_c)
        .map(|(x, k)| (x * k).abs())
        .fold(0.0, f64::max);
    (a, b)
}

fn merit(r1: &DVector<f64>, r2: &DVector<f64>, s: &Scales) -> f64 {
    let a: f64 = r1.iter().zip(&s.row_f).map(|(x, k)| (x * k).powi(2)).sum();
    let b: f64 = r2.iter().zip(&s.row_c).map(|(x, k)| (x * k).powi(2)).sum();
    (a + b).sqrt()
}

/// The force and constraint parts of [`merit`].
fn merit_parts(r1: &DVector<f64>, r2: &DVector<f64>, s: &Scales) -> (f64, f64) {
    let a: f64 = r1.iter().zip(&s.row_f).map(|(x, k)| (x * k).powi(2)).sum();
    let b: f64 = r2.iter().zip(&s.row_c).map(|(x, k)| (x * k).powi(2)).sum();
    (a.sqrt(), b.sqrt())
}

fn scales<S: Mechanical + ForceJacobians + CoordinateInfo>(
    sys: &mut S,
    t: f64,
    q: &[f64],
    w: &mut Work,
) -> Scales {
    let nq = sys.n_q();
    // Length scale: the extent of the length coordinates (positions), at least the largest
    // of them; 1 if there are none or all are zero.
    let lens: Vec<f64> = (0..nq)
        .filter(|&i| sys.coordinate_is_length(i))
        .map(|i| q[i])
        .collect();
    let (lo, hi) = lens
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let amax = lens.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let mut len = if lens.is_empty() {
        1.0
    } else {
        (hi - lo).max(amax)
    };
    if !(len.is_finite() && len > 0.0) {
        len = 1.0;
    }
    // Load scale: the largest applied force component on a length coordinate (gravity,
    // springs, actuators); if none (a weightless model at rest), the mass matrix times the
    // length scale times a unit rate, so that the scaled problem stays well defined.
    sys.forces(t, q, &w.zeros, &mut w.f);
    sys.mass_matrix(t, q, &mut w.mass);
    let mut force = (0..nq)
        .filter(|&i| sys.coordinate_is_length(i))
        .map(|i| w.f[i].abs())
        .fold(0.0, f64::max);
    // Where the applied forces cancel at the start (a `static_preload` spring holding the
    // weight it was computed for: a net force of 1e-14 N), the net force is round-off, and the
    // residual's own round-off stalled the solver ("load scale 7.1e-15 N"). At least a
    // thousandth of the force the stiffness makes over the length scale.
    sys.force_jacobians(t, q, &w.zeros, &mut w.dfq, &mut w.dfv);
    let stiff = (0..nq)
        .filter(|&i| sys.coordinate_is_length(i))
        .map(|i| w.dfq[(i, i)].abs())
        .fold(0.0, f64::max);
    if (1e-3 * stiff * len).is_finite() {
        force = force.max(1e-3 * stiff * len);
    }
    if force.is_nan() || force <= 0.0 {
        let m = (0..nq).map(|i| w.mass[(i, i)].abs()).fold(0.0, f64::max);
        force = if m > 0.0 { m * len } else { 1.0 };
    }
    let col_q: Vec<f64> = (0..nq)
        .map(|i| {
            if sys.coordinate_is_length(i) {
                len
            } else {
                1.0
            }
        })
        .collect();
    let row_f: Vec<f64> = (0..nq)
        .map(|i| {
            if sys.coordinate_is_length(i) {
                1.0 / force
            } else {
                1.0 / (force * len)
            }
        })
        .collect();
    sys.constraint_jacobian(t, q, &mut w.jac);
    let nc = sys.n_c();
    let mut row_c = vec![1.0; nc];
    let mut col_l = vec![1.0; nc];
    for i in 0..nc {
        let g = (0..nq)
            .map(|j| (w.jac[(i, j)] * col_q[j]).powi(2))
            .sum::<f64>()
            .sqrt();
        let g = if g > 0.0 { g } else { 1.0 };
        row_c[i] = 1.0 / g;
        // A multiplier λ_i contributes Φ_q,i λ_i to the force rows; in scaled units that is
        // O(g λ_i / (F L)): its natural unit is F L / g.
        col_l[i] = force * len / g;
    }
    Scales {
        col_q,
        row_f,
        row_c,
        col_l,
        force,
        len,
    }
}

/// The scaled, regularized KKT matrix of one iteration, factored once for the right-hand
/// sides of that iteration (the step, and in relaxation its force-driven part).
struct Kkt<'a> {
    s: &'a Scales,
    nq: usize,
    nc: usize,
    a: DMatrix<f64>,
    lu: nalgebra::LU<f64, nalgebra::Dyn, nalgebra::Dyn>,
    /// The least-squares fallback where the matrix is singular (a direction without
    /// stiffness); made when first needed.
    svd: Option<Option<nalgebra::SVD<f64, nalgebra::Dyn, nalgebra::Dyn>>>,
}

impl<'a> Kkt<'a> {
    fn new(w: &Work, s: &'a Scales, mu: f64) -> Self {
        let (nq, nc) = (w.mass.nrows(), w.jac.nrows());
        let n = nq + nc;
        // Unscaled: [dfq − H − μM, −Φqᵀ; Φq, 0] [Δq; Δλ] = −[r1; r2].
        let mut a = DMatrix::zeros(n, n);
        for i in 0..nq {
            for j in 0..nq {
                let v = w.dfq[(i, j)] - w.hess[(i, j)] - mu * w.mass[(i, j)];
                a[(i, j)] = s.row_f[i] * v * s.col_q[j];
            }
            for k in 0..nc {
                a[(i, nq + k)] = -s.row_f[i] * w.jac[(k, i)] * s.col_l[k];
            }
        }
        for k in 0..nc {
            for j in 0..nq {
                a[(nq + k, j)] = s.row_c[k] * w.jac[(k, j)] * s.col_q[j];
            }
        }
        Kkt {
            s,
            nq,
            nc,
            lu: a.clone().lu(),
            a,
            svd: None,
        }
    }

    /// The step `(Δq, Δλ)` for the residuals `r1` (forces) and `r2` (constraints).
    fn solve(
        &mut self,
        r1: &DVector<f64>,
        r2: &DVector<f64>,
    ) -> Option<(DVector<f64>, DVector<f64>)> {
        let (nq, nc, s) = (self.nq, self.nc, self.s);
        let mut b = DVector::zeros(nq + nc);
        for i in 0..nq {
            b[i] = -s.row_f[i] * r1[i];
        }
        for k in 0..nc {
            b[nq + k] = -s.row_c[k] * r2[k];
        }
        let x = match self.lu.solve(&b) {
            Some(x) if x.iter().all(|v| v.is_finite()) => x,
            _ => {
                let a = &self.a;
                let svd = self
                    .svd
                    .get_or_insert_with(|| crate::mbs::math::bounded_svd(a.clone(), true, true));
                let svd = svd.as_ref()?;
                let smax = svd.singular_values.iter().cloned().fold(0.0, f64::max);
                svd.solve(&b, 1e-12 * smax.max(1e-300)).ok()?
            }
        };
        let dq = DVector::from_iterator(nq, (0..nq).map(|i| x[i] * s.col_q[i]));
        let dl = DVector::from_iterator(nc, (0..nc).map(|k| x[nq + k] * s.col_l[k]));
        Some((dq, dl))
    }
}

/// Find the static equilibrium from the assembled `q` (changed in place). `t` fixes the time
/// (drivers and moving frames at their values at `t`; inputs as the system holds them).
pub fn solve_static<S>(sys: &mut S, t: f64, q: &mut [f64]) -> Result<StaticSolution, StaticFailure>
where
    S: Mechanical + ForceJacobians + ConstraintHessians + StepHooks + CoordinateInfo,
{
    let (nq, nc) = (sys.n_q(), sys.n_c());
    let mut w = Work {
        f: vec![0.0; nq],
        phi: vec![0.0; nc],
        jac: DMatrix::zeros(nc, nq),
        dfq: DMatrix::zeros(nq, nq),
        dfv: DMatrix::zeros(nq, nq),
        hess: DMatrix::zeros(nq, nq),
        mass: DMatrix::zeros(nq, nq),
        zeros: vec![0.0; nq],
    };
    let s = scales(sys, t, q, &mut w);
    // Multipliers: the reactions of the system at rest at the start (least squares on the
    // force balance where the mass matrix leaves them undetermined).
    let mut lambda = rest_multipliers(sys, t, q, &mut w, &s).unwrap_or_else(|| {
        let jt = w.jac.transpose();
        crate::mbs::math::bounded_svd(jt, true, true)
            .and_then(|svd| {
                let smax = svd.singular_values.iter().cloned().fold(0.0, f64::max);
                svd.solve(&DVector::from_column_slice(&w.f), 1e-12 * smax.max(1e-300))
                    .ok()
            })
            .unwrap_or_else(|| DVector::zeros(nc))
    });
    // μ in units of stiffness per mass (a squared frequency); its reference is the largest
    // diagonal stiffness-to-mass ratio, so that a relaxation step at μ_ref is small.
    sys.force_jacobians(t, q, &w.zeros, &mut w.dfq, &mut w.dfv);
    sys.mass_matrix(t, q, &mut w.mass);
    // Where nothing is stiff at the start (gravity alone in absolute coordinates, a link
    // that starts horizontal: no reaction yet), the load over mass and length (`g / L`).
    let m_max = (0..nq)
        .filter(|&i| sys.coordinate_is_length(i))
        .map(|i| w.mass[(i, i)])
        .fold(0.0, f64::max);
    let mu_load = if m_max > 0.0 {
        s.force / (m_max * s.len)
    } else {
        0.0
    };
    let mu_ref = (0..nq)
        .filter(|&i| w.mass[(i, i)] > 0.0)
        .map(|i| w.dfq[(i, i)].abs() / w.mass[(i, i)])
        .fold(mu_load, f64::max)
        .max(1e-300);
    let mut mu: f64 = 0.0;
    let mut relax = 0;
    let (mut r1, mut r2) = residual(sys, t, q, &lambda, &mut w);
    let mut m0 = merit(&r1, &r2, &s);
    let mut stalls = 0;
    let mut escapes = 0;
    let q_start = q.to_vec();
    // The trust radius: the longest step (scaled) the next iteration may take.
    let mut radius = TRUST_RADIUS;
    // The last unstable equilibrium left (position, mode), for the message if no stable one
    // is found.
    let mut left: Option<(Vec<f64>, DVector<f64>)> = None;
    // The last accepted step, where it went past the minimum of the potential along it.
    let mut passed: Option<Passed> = None;
    for it in 0..MAX_ITER {
        let (rf, rc) = scaled_norm(&r1, &r2, &s);
        if !(rf.is_finite() && rc.is_finite()) {
            break;
        }
        if rf < TOL && rc < TOL {
            let Some(mode) = unstable_mode(sys, t, q, &lambda, &mut w, &s) else {
                return Ok(StaticSolution {
                    lambda: lambda.as_slice().to_vec(),
                    iterations: it,
                    relaxation_steps: relax,
                    force_residual: rf,
                });
            };
            // An unstable equilibrium (a link balanced upright): a damped run would leave
            // it. A small displacement along the unstable mode, to the side of the start,
            // and the overdamped motion below carries the bodies away.
            escapes += 1;
            if escapes > MAX_ESCAPES {
                return Err(only_unstable(sys, &mode));
            }
            left = Some((q.to_vec(), mode.clone()));
            leave(q, &mode, &s, &q_start);
            sys.accept_step(t, q, &w.zeros, None);
            if let Some(l) = rest_multipliers(sys, t, q, &mut w, &s) {
                lambda = l;
            }
            (r1, r2) = residual(sys, t, q, &lambda, &mut w);
            m0 = merit(&r1, &r2, &s);
            mu = 0.0;
            stalls = 0;
            radius = TRUST_RADIUS;
            passed = None;
            continue;
        }
        sys.force_jacobians(t, q, &w.zeros, &mut w.dfq, &mut w.dfv);
        sys.constraint_force_jacobian(t, q, lambda.as_slice(), &mut w.hess);
        sys.mass_matrix(t, q, &mut w.mass);
        let tangent = Tangent::new(&w, &s);
        // The last step went past the minimum along it: where the potential is concave along
        // the step there, it climbed the far side towards a crest (and may have crossed it
        // into another basin). Shorter, from where it was.
        if let Some(p) = passed.take() {
            if tangent.as_ref().is_some_and(|tg| tg.concave_along(&p.dir)) {
                q.copy_from_slice(&p.q);
                lambda = p.lambda;
                sys.accept_step(t, q, &w.zeros, None);
                (r1, r2) = residual(sys, t, q, &lambda, &mut w);
                m0 = merit(&r1, &r2, &s);
                radius = 0.5 * p.len;
                continue;
            }
        }
        // Relaxation at least as strong as makes `K + μM` positive definite on the
        // constraints' null space: where the stiffness is negative (above a hilltop, past an
        // inflection), the step follows the force down the potential instead of Newton's
        // towards the nearest stationary point, which may be the crest.
        let floor = tangent
            .as_ref()
            .map_or(0.0, |tg| tg.flow_floor(mu_ref, mu_load));
        let mu_step = mu.max(2.0 * floor);
        let mut kkt = Kkt::new(&w, &s, mu_step);
        let Some((dq, dl)) = kkt.solve(&r1, &r2) else {
            break;
        };
        // A relaxation step is a step of the overdamped motion: it moves with the force
        // (`(K + μM)` positive along it). Where the stiffness is negative (past an
        // inflection of the potential, where a force remains), a smaller `μ` makes the step
        // run against the force, back up to where the residual is smallest: that is not an
        // equilibrium. More relaxation instead.
        // (The force-driven part of the step: without the constraint correction, which
        // does not shrink with `μ`.)
        // A Newton step (`μ = 0`) too: where the stiffness is (near) singular, a link across
        // gravity with no reaction yet, it can point anywhere, uphill included.
        let Some((dq_force, _)) = kkt.solve(&r1, &DVector::zeros(nc)) else {
            break;
        };
        let work = dq_force.dot(&r1);
        if work < 0.0 || (mu_step > 0.0 && work == 0.0) {
            mu = if mu_step == 0.0 {
                1e-4 * mu_ref
            } else {
                mu_step * 10.0
            };
            stalls += 1;
            if mu > 1e12 * mu_ref || stalls > 30 {
                break;
            }
            continue;
        }
        let (f0, c0) = merit_parts(&r1, &r2, &s);
        let (q_old, l_old) = (q.to_vec(), lambda.clone());
        // Within the trust radius: a step from where the stiffness is weak (a link just below
        // the horizontal) could otherwise jump across the potential into another basin.
        let alpha0 = (radius / scaled_len(&dq, &s).max(1e-300)).min(1.0);
        let mut alpha = alpha0;
        let mut accepted = false;
        for _ in 0..12 {
            for i in 0..nq {
                q[i] = q_old[i] + alpha * dq[i];
            }
            lambda = &l_old + alpha * &dl;
            let (a, b) = residual(sys, t, q, &lambda, &mut w);
            let m = merit(&a, &b, &s);
            // A relaxation step across a force-free stretch (a contact or a joint stop open
            // at the start) cannot decrease the residual: the load is the same until the gap
            // closes. Such a step is taken while the residual did not grow and the force at
            // its end still pushes along it (the overdamped motion has not passed the
            // minimum of the potential along the step).
            // Within ten length scales of the start: a gap, not a body falling for ever (a
            // model without an equilibrium is diagnosed where the search stalls).
            let near = (0..nq).all(|i| (q[i] - q_start[i]).abs() <= 10.0 * s.col_q[i]);
            // Nor can it across a stretch where the potential falls ever more steeply
            // (negative stiffness along the way, an inflection of the potential): the residual
            // grows while the potential decreases. The step is taken when the potential
            // decreases along it (the force pushes along it at both ends) and the constraints
            // are not violated by more than the force is unbalanced.
            let (_, c) = merit_parts(&a, &b, &s);
            let downhill = mu_step > 0.0 && a.dot(&dq_force) > 0.0 && near && c <= c0.max(f0);
            if m.is_finite() && (m <= (1.0 - 1e-4 * alpha) * m0 || downhill) {
                if a.dot(&dq) < 0.0 {
                    passed = Some(Passed {
                        q: q_old.clone(),
                        lambda: l_old.clone(),
                        dir: DVector::from_iterator(
                            nq,
                            (0..nq).map(|i| alpha * dq[i] / s.col_q[i]),
                        ),
                        len: alpha * scaled_len(&dq, &s),
                    });
                }
                r1 = a;
                r2 = b;
                m0 = m;
                accepted = true;
                break;
            }
            alpha *= 0.5;
        }
        if mu_step > 0.0 {
            relax += 1;
        }
        if accepted {
            sys.accept_step(t, q, &w.zeros, None);
            stalls = 0;
            // Back towards Newton after a success (only full steps count as good progress;
            // a step cut to the trust radius is full).
            if alpha == alpha0 {
                mu = if mu_step < 1e-6 * mu_ref {
                    0.0
                } else {
                    mu_step * 0.1
                };
                if alpha0 < 1.0 {
                    radius = (2.0 * radius).min(TRUST_RADIUS);
                }
            }
            // After a partial or relaxed step the multipliers lag behind the positions (the
            // reaction of the position before the step, in part): the reactions at rest
            // here instead, so that the stiffness (through the constraint forces) and the
            // stability check see the load the bodies carry here.
            if !(mu_step == 0.0 && alpha == 1.0) {
                if let Some(l) = rest_multipliers(sys, t, q, &mut w, &s) {
                    lambda = l;
                    (r1, r2) = residual(sys, t, q, &lambda, &mut w);
                    m0 = merit(&r1, &r2, &s);
                }
            }
        } else {
            q.copy_from_slice(&q_old);
            lambda = l_old;
            let (a, b) = residual(sys, t, q, &lambda, &mut w);
            r1 = a;
            r2 = b;
            passed = None;
            // A step that does not decrease the residual: more relaxation.
            mu = if mu_step == 0.0 {
                1e-4 * mu_ref
            } else {
                mu_step * 10.0
            };
            stalls += 1;
            if mu > 1e12 * mu_ref || stalls > 30 {
                break;
            }
        }
    }
    if let Some((at, mode)) = left {
        // Left an unstable equilibrium and found no stable one: back there, and say so.
        q.copy_from_slice(&at);
        sys.accept_step(t, q, &w.zeros, None);
        return Err(only_unstable(sys, &mode));
    }
    Err(diagnose(sys, t, q, &lambda, &mut w, &s))
}

/// The message where the only equilibrium found is unstable (the bodies are left there).
fn only_unstable<S: CoordinateInfo>(sys: &S, mode: &DVector<f64>) -> StaticFailure {
    StaticFailure {
        message: format!(
            "the only equilibrium found is unstable: the stiffness is negative along {}, and \
             the overdamped motion away from it found no stable one; start from positions \
             nearer a stable one, or use initial = \"consistent\" and let the dynamics settle",
            mode_names(sys, mode)
        ),
        only_unstable: true,
    }
}

/// An accepted step that went past the minimum of the potential along it (the force at its
/// end opposes it): where it came from, and the step (scaled).
struct Passed {
    q: Vec<f64>,
    lambda: DVector<f64>,
    dir: DVector<f64>,
    len: f64,
}

/// The length of `dq` in scaled units.
fn scaled_len(dq: &DVector<f64>, s: &Scales) -> f64 {
    dq.iter()
        .zip(&s.col_q)
        .map(|(d, c)| (d / c).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// The constraint reactions of the bodies at rest at `q`: `λ` of
/// `M q̈ + Φ_qᵀλ = f(q, 0)`, `Φ_q q̈ = 0`, in the scaled units (`None` where that system is
/// singular). These are the multipliers of the overdamped motion too, and at an equilibrium
/// the equilibrium's.
fn rest_multipliers<S: Mechanical>(
    sys: &mut S,
    t: f64,
    q: &[f64],
    w: &mut Work,
    s: &Scales,
) -> Option<DVector<f64>> {
    let (nq, nc) = (sys.n_q(), sys.n_c());
    if nc == 0 {
        return Some(DVector::zeros(0));
    }
    sys.forces(t, q, &w.zeros, &mut w.f);
    sys.constraint_jacobian(t, q, &mut w.jac);
    sys.mass_matrix(t, q, &mut w.mass);
    let mut a = DMatrix::zeros(nq + nc, nq + nc);
    for i in 0..nq {
        for j in 0..nq {
            a[(i, j)] = s.row_f[i] * w.mass[(i, j)] * s.col_q[j];
        }
    }
    // The acceleration's unit does not change λ: the mass block scaled to O(1).
    let big = a.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if !(big.is_finite() && big > 0.0) {
        return None;
    }
    a.scale_mut(1.0 / big);
    let mut b = DVector::zeros(nq + nc);
    for i in 0..nq {
        for k in 0..nc {
            a[(i, nq + k)] = s.row_f[i] * w.jac[(k, i)] * s.col_l[k];
            a[(nq + k, i)] = s.row_c[k] * w.jac[(k, i)] * s.col_q[i];
        }
        b[i] = s.row_f[i] * w.f[i];
    }
    let x = a.clone().lu().solve(&b).filter(|x| {
        x.iter().all(|v| v.is_finite()) && (&a * x - &b).amax() <= 1e-8 * b.amax().max(1e-300)
    })?;
    Some(DVector::from_iterator(
        nc,
        (0..nc).map(|k| x[nq + k] * s.col_l[k]),
    ))
}

/// The tangent stiffness and the mass reduced to the constraints' null space (scaled, both
/// symmetric): what decides whether a step may be Newton's.
struct Tangent {
    null: DMatrix<f64>,
    k: DMatrix<f64>,
    m: DMatrix<f64>,
}

impl Tangent {
    /// From the Jacobians in `w` (`dfq`, `hess`, `mass`, `jac`); `None` where the constraints
    /// fix every coordinate.
    fn new(w: &Work, s: &Scales) -> Option<Self> {
        let (nq, nc) = (w.mass.nrows(), w.jac.nrows());
        let mut jq = DMatrix::zeros(nc, nq);
        for i in 0..nc {
            for j in 0..nq {
                jq[(i, j)] = s.row_c[i] * w.jac[(i, j)] * s.col_q[j];
            }
        }
        let null = null_space(&jq, nq);
        if null.ncols() == 0 {
            return None;
        }
        let mut k = DMatrix::zeros(nq, nq);
        let mut m = DMatrix::zeros(nq, nq);
        for i in 0..nq {
            for j in 0..nq {
                k[(i, j)] = -s.row_f[i] * (w.dfq[(i, j)] - w.hess[(i, j)]) * s.col_q[j];
                m[(i, j)] = s.row_f[i] * w.mass[(i, j)] * s.col_q[j];
            }
        }
        let k = null.transpose() * (&k + k.transpose()) * 0.5 * &null;
        let m = null.transpose() * (&m + m.transpose()) * 0.5 * &null;
        Some(Tangent { null, k, m })
    }

    /// The smallest `μ ≥ 0` (stiffness per mass) with `K + μM` positive semi-definite on the
    /// null space: `−` the smallest eigenvalue of `(K, M)` where it is clearly negative (below
    /// −1e-6 of the largest magnitude, or of the load's `μ`, `F / (m L)`), else 0.
    fn flow_floor(&self, mu_ref: f64, mu_load: f64) -> f64 {
        if let Some(ch) = self.m.clone().cholesky() {
            let Some(li) = ch.l().try_inverse() else {
                return 0.0;
            };
            let c = &li * &self.k * li.transpose();
            let c = (&c + c.transpose()) * 0.5;
            if c.iter().any(|x| !x.is_finite()) {
                return 0.0;
            }
            let e = nalgebra::SymmetricEigen::new(c).eigenvalues;
            // (Where every eigenvalue is round-off, a link across gravity with no reaction
            // yet, the load's `μ` keeps the threshold absolute.)
            let emax = e.iter().fold(mu_load, |m, x| m.max(x.abs()));
            let emin = e.iter().cloned().fold(f64::INFINITY, f64::min);
            return if emin < -1e-6 * emax { -emin } else { 0.0 };
        }
        // A direction without mass (a massless body): the smallest tried `μ` that makes
        // `K + μM` definite, if any.
        let e = nalgebra::SymmetricEigen::new(self.k.clone()).eigenvalues;
        let emax = e.iter().fold(1.0f64, |m, x| m.max(x.abs()));
        let emin = e.iter().cloned().fold(f64::INFINITY, f64::min);
        if emin >= -1e-6 * emax {
            return 0.0;
        }
        let mut mu = 1e-4 * mu_ref;
        while mu <= 1e12 * mu_ref {
            if (&self.k + mu * &self.m).cholesky().is_some() {
                return mu;
            }
            mu *= 10.0;
        }
        0.0
    }

    /// Whether the stiffness along `dir` (scaled, projected onto the null space) is clearly
    /// negative: below −1e-6 of the largest, or of 1 (a stiffness that deflects by one
    /// length scale under the load scale) where all are round-off.
    fn concave_along(&self, dir: &DVector<f64>) -> bool {
        let d = self.null.transpose() * dir;
        let kmax = self.k.iter().fold(1.0f64, |m, x| m.max(x.abs()));
        d.dot(&(&self.k * &d)) < -1e-6 * kmax * d.norm_squared()
    }
}

/// Displace `q` along `mode` (scaled) by the escape length, to the side where the start lies
/// (a damped run from a start beside a hilltop goes down that side); from a start exactly at
/// the hilltop, to the side where the mode's largest component is positive.
fn leave(q: &mut [f64], mode: &DVector<f64>, s: &Scales, q_start: &[f64]) {
    const LEN: f64 = 0.05;
    let nq = q.len();
    let norm = mode.norm().max(1e-300);
    let toward: f64 = (0..nq)
        .map(|i| mode[i] * (q_start[i] - q[i]) / s.col_q[i])
        .sum();
    let away: f64 = (0..nq)
        .map(|i| ((q_start[i] - q[i]) / s.col_q[i]).powi(2))
        .sum::<f64>()
        .sqrt();
    let sign = if toward.abs() > 1e-6 * norm * away && away > 1e-9 {
        toward.signum()
    } else {
        let big = mode.iter().cloned().fold(
            0.0f64,
            |m: f64, x: f64| {
                if x.abs() > m.abs() {
                    x
                } else {
                    m
                }
            },
        );
        if big < 0.0 {
            -1.0
        } else {
            1.0
        }
    };
    for i in 0..nq {
        q[i] += sign * LEN * mode[i] / norm * s.col_q[i];
    }
}

/// Why there is no equilibrium: the directions of the constraint null space in which the
/// tangent stiffness is zero or negative and along which a force remains.
fn diagnose<S>(
    sys: &mut S,
    t: f64,
    q: &[f64],
    lambda: &DVector<f64>,
    w: &mut Work,
    s: &Scales,
) -> StaticFailure
where
    S: Mechanical + ForceJacobians + ConstraintHessians + CoordinateInfo,
{
    let nq = sys.n_q();
    let (r1, r2) = residual(sys, t, q, lambda, w);
    let (rf, rc) = scaled_norm(&r1, &r2, s);
    let mut msg = format!(
        "the force residual stays at {:.3e} of the load scale {:.3e} N (constraint residual {:.3e})",
        rf,
        1.0 / s.row_f.iter().cloned().fold(0.0, f64::max).max(1e-300),
        rc
    );
    if !(rf.is_finite() && rc.is_finite()) {
        return StaticFailure {
            message: format!("{msg}: the iteration produced non-finite values"),
            only_unstable: false,
        };
    }
    let Some((null, eig)) = reduced_stiffness(sys, t, q, lambda, w, s) else {
        msg.push_str(": the constraints fix every coordinate, so an equilibrium should exist (check the drivers and the inputs)");
        return StaticFailure {
            message: msg,
            only_unstable: false,
        };
    };
    let fr = null.transpose() * DVector::from_iterator(nq, (0..nq).map(|i| r1[i] * s.row_f[i]));
    // Scaled stiffness: 1 deflects by one length scale under the load scale. Where every
    // eigenvalue is round-off (nothing holds the model at all), relative thresholds would
    // call a 1e-20 "stiff" or a −1e-21 "tipping over": the floor keeps them absolute there.
    let kmax = eig
        .eigenvalues
        .iter()
        .fold(0.0f64, |m, x| m.max(x.abs()))
        .max(1.0);
    let mut found = Vec::new();
    for (e, &val) in eig.eigenvalues.iter().enumerate() {
        let dir = eig.eigenvectors.column(e);
        let push = dir.dot(&fr);
        if val <= 1e-9 * kmax && push.abs() > 1e-3 * rf.max(1e-300) {
            let v = &null * dir;
            let why = if val < -1e-9 * kmax {
                // A stall on a slope (the residual's minimum where the potential still
                // falls) looks the same as a hilltop here: both are named.
                "the stiffness is negative there: a position that tips over, or a slope \
                 the search could not follow (`initial = \"consistent\"` with damping lets \
                 the dynamics settle)"
            } else {
                "nothing holds it there (no joint, spring or driver resists that motion)"
            };
            found.push(format!("{} ({why})", mode_names(sys, &v)));
        }
    }
    if found.is_empty() {
        msg.push_str(": the solver stalled although the structure supports the load (a stiff or non-smooth force law? try `initial = \"consistent\"` and let the dynamics settle)");
    } else {
        msg.push_str(&format!(
            "; no equilibrium found: the unbalanced force drives {}",
            found.join("; ")
        ));
    }
    StaticFailure {
        message: msg,
        only_unstable: false,
    }
}

/// The scaled tangent stiffness `K = −(∂f/∂q − H)` (`H` the constraint forces' Jacobian)
/// reduced to the null space of `Φ_q`: the basis and the eigen-decomposition; `None` where
/// the constraints fix every coordinate.
fn reduced_stiffness<S>(
    sys: &mut S,
    t: f64,
    q: &[f64],
    lambda: &DVector<f64>,
    w: &mut Work,
    s: &Scales,
) -> Option<(DMatrix<f64>, nalgebra::SymmetricEigen<f64, nalgebra::Dyn>)>
where
    S: Mechanical + ForceJacobians + ConstraintHessians,
{
    sys.force_jacobians(t, q, &w.zeros, &mut w.dfq, &mut w.dfv);
    sys.constraint_force_jacobian(t, q, lambda.as_slice(), &mut w.hess);
    sys.constraint_jacobian(t, q, &mut w.jac);
    sys.mass_matrix(t, q, &mut w.mass);
    let tg = Tangent::new(w, s)?;
    Some((tg.null, nalgebra::SymmetricEigen::new(tg.k)))
}

/// At an equilibrium: the direction (scaled coordinates) of the most negative reduced
/// stiffness, if it is clearly negative (an unstable equilibrium); `None` for a stable or
/// neutral one.
fn unstable_mode<S>(
    sys: &mut S,
    t: f64,
    q: &[f64],
    lambda: &DVector<f64>,
    w: &mut Work,
    s: &Scales,
) -> Option<DVector<f64>>
where
    S: Mechanical + ForceJacobians + ConstraintHessians,
{
    let (null, eig) = reduced_stiffness(sys, t, q, lambda, w, s)?;
    let kmax = eig.eigenvalues.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let (e, &val) = eig
        .eigenvalues
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(b.1))?;
    (val < -1e-6 * kmax.max(1e-300)).then(|| &null * eig.eigenvectors.column(e))
}

/// The (up to three) coordinates that take part most in `v`, by name.
fn mode_names<S: CoordinateInfo>(sys: &S, v: &DVector<f64>) -> String {
    let mut comps: Vec<(f64, usize)> = v.iter().enumerate().map(|(i, x)| (x.abs(), i)).collect();
    comps.sort_by(|a, b| b.0.total_cmp(&a.0));
    comps
        .iter()
        .take(3)
        .filter(|c| c.0 > 0.1 * comps[0].0)
        .map(|c| sys.coordinate_label(c.1))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Orthonormal basis of the null space of `a` (`n` columns), by SVD.
fn null_space(a: &DMatrix<f64>, n: usize) -> DMatrix<f64> {
    if a.nrows() == 0 {
        return DMatrix::identity(n, n);
    }
    // SVD of the square Gram-free form: pad to n rows so V is n × n.
    let mut sq = DMatrix::zeros(n.max(a.nrows()), n);
    sq.view_mut((0, 0), (a.nrows(), n)).copy_from(a);
    let Some(svd) = crate::mbs::math::bounded_svd(sq, false, true) else {
        // Non-finite or unbounded data: no direction is known to be free.
        return DMatrix::zeros(n, 0);
    };
    let vt = svd.v_t.expect("requested");
    let smax = svd.singular_values.iter().cloned().fold(0.0, f64::max);
    let cols: Vec<usize> = (0..n)
        .filter(|&i| i >= svd.singular_values.len() || svd.singular_values[i] <= 1e-10 * smax)
        .collect();
    let mut out = DMatrix::zeros(n, cols.len());
    for (c, &i) in cols.iter().enumerate() {
        out.set_column(c, &vt.row(i).transpose());
    }
    out
}
