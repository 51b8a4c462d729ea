//! What an integrator may know about the mechanical system: small capability traits.
//!
//! The equations of motion in descriptor form (absolute coordinates, `v = q̇`):
//!
//! ```text
//!   M(q) v̇ + Φ_q(q,t)ᵀ λ = f(t, q, v)            (dynamics)
//!   Φ(q, t) = 0                                   (position constraints, index 3)
//!   Φ_q v + Φ_t = 0                               (velocity constraints, index 2)
//!   Φ_q v̇ = γ(t, q, v)                            (acceleration constraints, index 1)
//! ```
//!
//! `f` holds applied, gyroscopic and quadratic-velocity forces. Time enters through `t` and
//! through the excitation inputs `u(t)` that the system holds (drivers fed by FMU inputs, or
//! built-in functions). Integrators pass the system in as `&mut S` on every call, so they never
//! store a reference to it and their own state can be cloned and serialized.
//!
//! Every method writes into caller-provided storage (no allocation on the hot path). Vectors
//! are slices of the right length; matrices are `DMatrix` of the right shape, which the
//! implementation fully overwrites.

use super::sparse::SparseStructure;
use nalgebra::DMatrix;

/// The core: mass matrix, forces and constraints. Every system implements this.
pub trait Mechanical {
    /// Number of position coordinates (= number of velocity coordinates).
    fn n_q(&self) -> usize;
    /// Number of (independent) constraint equations.
    fn n_c(&self) -> usize;

    /// `M(q)`, symmetric, `n_q × n_q`. Positive definite on the null space of `Φ_q`.
    fn mass_matrix(&mut self, t: f64, q: &[f64], m: &mut DMatrix<f64>);
    /// `f(t, q, v)`, length `n_q`.
    fn forces(&mut self, t: f64, q: &[f64], v: &[f64], f: &mut [f64]);
    /// `a = M⁻¹ f(t, q, v)` for a system without constraints (`n_c = 0`), by the system's own
    /// recursion where it has one cheaper than forming and factoring `M` (the articulated-body
    /// algorithm, a small tree's one-pass kernel): `false`, nothing usable written, where it
    /// has none (the caller then forms `M`).
    fn unconstrained_accelerations(
        &mut self,
        _t: f64,
        _q: &[f64],
        _v: &[f64],
        _a: &mut [f64],
    ) -> bool {
        false
    }
    /// `Φ(q, t)`, length `n_c`.
    fn constraints(&mut self, t: f64, q: &[f64], phi: &mut [f64]);
    /// `Φ_q(q, t)`, `n_c × n_q`.
    fn constraint_jacobian(&mut self, t: f64, q: &[f64], jac: &mut DMatrix<f64>);
    /// `Φ_t(q, t)`, length `n_c` (zero for scleronomic constraints).
    fn constraint_time_derivative(&mut self, t: f64, q: &[f64], phi_t: &mut [f64]);
    /// `γ(t, q, v) = −(Φ_q v)_q v − 2 Φ_qt v − Φ_tt`, length `n_c`.
    fn acceleration_rhs(&mut self, t: f64, q: &[f64], v: &[f64], gamma: &mut [f64]);

    /// `Φ`, `Φ_q` and `Φ_t` at one `(t, q)`, what a velocity-level residual reads at every
    /// evaluation. The default asks for each; a system that gets all three from one pass over
    /// its rows overrides it (same values).
    fn constraint_values(
        &mut self,
        t: f64,
        q: &[f64],
        phi: &mut [f64],
        jac: &mut DMatrix<f64>,
        phi_t: &mut [f64],
    ) {
        constraint_values_by_parts(self, t, q, phi, jac, phi_t);
    }

    /// `Φ_q` and `γ` at one `(t, q, v)`, what the saddle-point system of the accelerations
    /// reads. The default asks for each; a system that gets both from one pass over its rows
    /// overrides it (same values).
    fn constraint_jacobian_and_rhs(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
        jac: &mut DMatrix<f64>,
        gamma: &mut [f64],
    ) {
        constraint_jacobian_and_rhs_by_parts(self, t, q, v, jac, gamma);
    }

    /// `ρ = r − K x` of the accelerations' saddle-point system `K (a, λ) = r` (`K = [M Φ_qᵀ;
    /// Φ_q 0]`, `r = (f, γ)`) at `(t, q, v)` for a given `x = (a, λ)` (length `n_q + n_c`),
    /// by an inverse-dynamics pass instead of forming `M` and `Φ_q`. Returns `false`, leaving
    /// `out` alone, where the system has no such pass (the default): callers then form `K`.
    fn saddle_residual(
        &mut self,
        _t: f64,
        _q: &[f64],
        _v: &[f64],
        _x: &[f64],
        _out: &mut [f64],
    ) -> bool {
        false
    }

    /// The sparse structure of `M` and `Φq`, if the system reports it: integrators then use
    /// sparse factorizations on large models (see `integrate::sparse`). `None` (the default):
    /// dense only.
    fn sparse_structure(&mut self) -> Option<&mut dyn SparseStructure> {
        None
    }
}

/// [`Mechanical::constraint_values`] by its three separate calls (the default, and the
/// fallback of a system that overrides it for some configurations only).
pub fn constraint_values_by_parts<S: Mechanical + ?Sized>(
    sys: &mut S,
    t: f64,
    q: &[f64],
    phi: &mut [f64],
    jac: &mut DMatrix<f64>,
    phi_t: &mut [f64],
) {
    sys.constraint_time_derivative(t, q, phi_t);
    sys.constraints(t, q, phi);
    sys.constraint_jacobian(t, q, jac);
}

/// [`Mechanical::constraint_jacobian_and_rhs`] by its two separate calls.
pub fn constraint_jacobian_and_rhs_by_parts<S: Mechanical + ?Sized>(
    sys: &mut S,
    t: f64,
    q: &[f64],
    v: &[f64],
    jac: &mut DMatrix<f64>,
    gamma: &mut [f64],
) {
    sys.constraint_jacobian(t, q, jac);
    sys.acceleration_rhs(t, q, v, gamma);
}

/// Analytic derivatives of the forces (needed by implicit methods; the finite-difference
/// fallback lives in the integrator's Jacobian policy).
pub trait ForceJacobians: Mechanical {
    /// `∂f/∂q` and `∂f/∂v`, both `n_q × n_q`, fully overwritten.
    fn force_jacobians(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
        df_dq: &mut DMatrix<f64>,
        df_dv: &mut DMatrix<f64>,
    );
}

/// Second-order constraint terms, for Newton iterations on index-3 / augmented forms.
pub trait ConstraintHessians: Mechanical {
    /// `∂(Φ_qᵀ λ)/∂q`, `n_q × n_q`, fully overwritten.
    fn constraint_force_jacobian(
        &mut self,
        t: f64,
        q: &[f64],
        lambda: &[f64],
        out: &mut DMatrix<f64>,
    );
    /// `∂(M(q) a)/∂q`, `n_q × n_q`, fully overwritten (zero when `M` is constant).
    fn mass_times_accel_jacobian(&mut self, t: f64, q: &[f64], a: &[f64], out: &mut DMatrix<f64>);
}

/// Rheonomic excitations `u(t)` that enter the equations (drivers, moving frames, actuators).
/// Used by the extended partitioned Jacobian update (paper 003, eq. (26)), which needs
/// `∂²F/∂u_i∂y` and the change of `u_i` between two times.
pub trait Excitations: Mechanical {
    /// Number of excitation signals.
    fn n_excitations(&self) -> usize;
    /// `u_i(t)`.
    fn excitation(&mut self, t: f64, i: usize) -> f64;
    /// Add `delta` to `u_i` in every subsequent evaluation (0 restores the true signal).
    /// Only the value is shifted, not its time derivatives.
    fn set_excitation_offset(&mut self, i: usize, delta: f64);

    /// How many members of the jet `(u_i, u̇_i, ü_i)` enter the equations as independent
    /// arguments (1: the value only; 3: value, rate and acceleration). In joint coordinates a
    /// driven coordinate or a moving frame enters the recursion through all three, and a
    /// translating suspension enters the chain's equations *only* through `ü` (effective
    /// gravity), so (26) needs `∂²F/∂ü_i∂y` there. Default 1 (the value).
    fn excitation_orders(&self) -> usize {
        1
    }
    /// `(u_i, u̇_i, ü_i)(t)`; members beyond [`Excitations::excitation_orders`] may be zero.
    fn excitation_jet(&mut self, t: f64, i: usize) -> [f64; 3] {
        [self.excitation(t, i), 0.0, 0.0]
    }
    /// Add `delta[k]` to the `k`-th time derivative of `u_i` in every subsequent evaluation,
    /// independently of the others (zeros restore the true signal). Default: the value only.
    fn set_excitation_jet_offset(&mut self, i: usize, delta: [f64; 3]) {
        self.set_excitation_offset(i, delta[0]);
    }
}

/// Hooks at accepted steps: state the system keeps between steps (continuous angle branches,
/// friction normal forces from the last reactions) is committed here and only here, so rejected
/// steps and Newton iterations never change it.
pub trait StepHooks: Mechanical {
    /// Called once per accepted step with the accepted state and the multipliers if known.
    fn accept_step(&mut self, t: f64, q: &[f64], v: &[f64], lambda: Option<&[f64]>);
    /// Bring `q` back onto any invariant the coordinates carry that is not one of the
    /// constraints (none for the engine: unit quaternions are explicit constraints). Returns
    /// whether anything changed.
    fn normalize(&mut self, _q: &mut [f64]) -> bool {
        false
    }
    /// Keep the discrete states that `accept_step` changes (friction stick states) before a
    /// step that may be taken again: the event locator calls this before the step it may redo
    /// and [`StepHooks::rollback`] whenever it restores the integrator, so a thrown-away step
    /// leaves no trace in them.
    fn checkpoint(&mut self) {}
    /// Back to the states of the last [`StepHooks::checkpoint`].
    fn rollback(&mut self) {}
    /// Whether the last `accept_step` switched a force law (friction stick ↔ slip): the method
    /// must then start afresh (its stored derivatives and step-size history belong to the old
    /// law); the event locator restarts it. Reading clears the flag.
    fn take_law_switch(&mut self) -> bool {
        false
    }
    /// Whether [`StepHooks::take_redo`] may ever name a time: the event locator then backs the
    /// method up before every step (a copy of its state per step, so only where needed).
    fn may_redo(&self) -> bool {
        false
    }
    /// After a step from `t0` accepted at `t1`: a time in `(t0, t1)` to take the step to
    /// instead, when an evaluation inside it saw the system leave what the step could resolve
    /// (an input that jumped or kinked between two stage times, which a method whose error
    /// estimate is blind to it accepted); `None` when the step stands.
    fn take_redo(&mut self, _t0: f64, _t1: f64) -> Option<f64> {
        None
    }
}

/// Everything an integrator may use. Blanket-implemented.
pub trait MultibodySystem:
    Mechanical + ForceJacobians + ConstraintHessians + Excitations + StepHooks
{
}
impl<T: Mechanical + ForceJacobians + ConstraintHessians + Excitations + StepHooks> MultibodySystem
    for T
{
}
