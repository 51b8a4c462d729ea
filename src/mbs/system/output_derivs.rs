//! Derivatives of the outputs with respect to the inputs at a fixed state `(t, q, v)`: what
//! an importer sees by setting an input and reading the outputs at the same instant (FMI
//! directional derivatives).
//!
//! An input `j` enters the engine through the motion slots `Motion::Input(j)`, whose value,
//! rate and second rate at `t` are `(u, u̇, ü)` of the input's segment. The slots feed
//! - kinematic drivers `Φ = ξ(q) − u`: at fixed `(q, v)` only `γ` changes, `∂γ/∂ü = 1`
//!   (`Φ_t = ξ_t − u̇` changes too, but no output at fixed `v` depends on it);
//! - actuators of springs and torsion springs: `∂F/∂u = ∓1` along `∇ξ` (analytic);
//! - moving frames (a prescribed point position): every coordinate touching the frame
//!   changes with the frame's position, velocity and acceleration. The kinematics module has
//!   no derivative with respect to a frame's state, so for an input that feeds a frame the
//!   direct partials (`∂f`, `∂γ` and the outputs at fixed `a`, `λ`) are central differences
//!   over the segment, one component at a time. A frame also moves constraint rows, so
//!   `Φq` depends on it: the differenced right-hand side is the residual
//!   `[f − Φqᵀλ; γ − Φq a]` at the fixed `(a, λ)`. Only those partials are differenced.
//!
//! Accelerations and multipliers follow from `[M Φqᵀ; Φq 0][a; λ] = [f; γ]` at fixed `q`:
//! `[∂a; ∂λ]` solves the same matrix with right-hand side `[∂f; ∂γ]`, so one factorization
//! gives the base point and every direction. The dynamic outputs (acceleration, joint
//! reactions, driver forces) are affine in `(a, λ)`, so their response is exact: the output
//! evaluated on `(∂a, ∂λ)` minus the output on zeros.

use super::*;
use crate::integrate::sparse::{SaddleSolver, SparseSaddle};
use crate::mbs::inputs::InputSegment;

/// The saddle-point matrix at `(t, q)`, factored once (also used by
/// [`System::accelerations`]).
pub(super) enum Factored {
    Dense(nalgebra::LU<f64, nalgebra::Dyn, nalgebra::Dyn>),
    Sparse(Box<SparseSaddle>),
}

impl Factored {
    /// Solve in place; false when singular or not finite.
    pub(super) fn solve(&mut self, x: &mut [f64]) -> bool {
        if x.is_empty() {
            // A model without bodies: nalgebra cannot slice an empty system.
            return true;
        }
        match self {
            Factored::Dense(lu) => {
                let mut b = DVector::from_column_slice(x);
                if !lu.solve_mut(&mut b) {
                    return false;
                }
                x.copy_from_slice(b.as_slice());
            }
            Factored::Sparse(sp) => sp.solve(x),
        }
        x.iter().all(|v| v.is_finite())
    }
}

/// `∂y/∂u`, `∂y/∂u̇`, `∂y/∂ü` of every output (scaled as reported) for one input.
pub type InputDerivatives = [Vec<f64>; 3];

/// Central-difference step for a channel whose current value is `value`: the cube root of
/// the machine epsilon relative to the value's size, at least its absolute size at 1 (the
/// outputs are smooth in the input's value and rate and affine in its second rate).
fn difference_step(value: f64) -> f64 {
    f64::EPSILON.cbrt() * value.abs().max(1.0)
}

impl System {
    /// The joint formulation's [`System::output_input_derivatives`]: central differences of
    /// the outputs, evaluated as the FMU evaluates them at the joint state `x`, over the
    /// input's value, rate and second rate at `x.t` (one channel at a time, the segment
    /// otherwise unchanged). Drivers on tree joints are eliminated in joint coordinates: their
    /// value and rate move the driven subtree at a fixed state, so positions and velocities
    /// can depend on an input directly here, which they cannot in absolute coordinates.
    fn differenced_input_derivatives(
        &mut self,
        x: &MechState,
        inputs: &[usize],
    ) -> Result<Vec<InputDerivatives>, ModelError> {
        let n_out = self.n_outputs();
        let (mut yp, mut ym) = (vec![0.0; n_out], vec![0.0; n_out]);
        let mut result = Vec::with_capacity(inputs.len());
        for &j in inputs {
            let saved = self.inputs.segments[j];
            let base = saved.eval(x.t);
            let mut der: InputDerivatives = [vec![0.0; n_out], vec![0.0; n_out], vec![0.0; n_out]];
            for (c, dy) in der.iter_mut().enumerate() {
                let d = difference_step(base[c]);
                // The segment expanded at `t` with channel `c` shifted by `s`: value, rate
                // and second rate at `t` are its first three coefficients.
                let shifted = |s: f64| {
                    let mut v = base;
                    v[c] += s;
                    InputSegment {
                        t0: x.t,
                        coeffs: [v[0], v[1], 0.5 * v[2], saved.coeffs[3]],
                    }
                };
                self.inputs.segments[j] = shifted(d);
                let rp = self.evaluate_outputs(x, &mut yp);
                self.inputs.segments[j] = shifted(-d);
                let rm = self.evaluate_outputs(x, &mut ym);
                self.inputs.segments[j] = saved;
                rp?;
                rm?;
                for k in 0..n_out {
                    dy[k] = (yp[k] - ym[k]) / (2.0 * d);
                }
            }
            result.push(der);
        }
        Ok(result)
    }

    fn outputs_need_dynamics(&self) -> bool {
        self.spec.outputs.iter().any(|o| {
            matches!(
                o.quantity,
                OutputQuantity::Acceleration { .. }
                    | OutputQuantity::Relative { order: 2, .. }
                    | OutputQuantity::JointForce { .. }
                    | OutputQuantity::JointTorque { .. }
                    | OutputQuantity::DriverForce { .. }
            )
        })
    }

    /// `[M Φqᵀ; Φq 0]` at `(t, q)`: dense LU for small models, the sparse LU (its symbolic
    /// analysis kept in `saddle_cache`) from the sparse threshold on. Give a sparse
    /// factorization back to the cache when done.
    pub(super) fn factor_saddle(&mut self, t: f64, q: &[f64]) -> Result<Factored, ModelError> {
        let (nq, nc) = (self.n_q(), self.n_c());
        let singular = |s: &Self| {
            s.err(format!(
                "singular saddle-point matrix at t = {t} (dependent constraints or a body \
                 without mass)"
            ))
        };
        if SaddleSolver::Auto.use_sparse(nq + nc, true) {
            let mut sp = match self.saddle_cache.take() {
                Some(sp) if sp.nq() == nq && sp.nc() == nc => sp,
                _ => Box::new(SparseSaddle::for_system(self, nq, nc).map_err(|_| singular(self))?),
            };
            sp.evaluate(self, t, q);
            if sp.factor().is_err() {
                self.saddle_cache = Some(sp);
                return Err(singular(self));
            }
            return Ok(Factored::Sparse(sp));
        }
        let mut m = DMatrix::zeros(nq, nq);
        let mut jac = DMatrix::zeros(nc, nq);
        self.mass_matrix(t, q, &mut m);
        self.constraint_jacobian(t, q, &mut jac);
        let mut a = DMatrix::zeros(nq + nc, nq + nc);
        a.view_mut((0, 0), (nq, nq)).copy_from(&m);
        a.view_mut((0, nq), (nq, nc)).copy_from(&jac.transpose());
        a.view_mut((nq, 0), (nc, nq)).copy_from(&jac);
        Ok(Factored::Dense(a.lu()))
    }

    /// `∂(slot value)/∂u` for a slot among `slots` (an input expression's scale), else 0.
    fn slot_gain(&self, s: usize, slots: &[usize]) -> f64 {
        if slots.contains(&s) {
            self.motions[s].motion.input().map_or(0.0, |(_, g)| g)
        } else {
            0.0
        }
    }

    /// Motion slots driven by input `j`.
    fn input_slots(&self, j: usize) -> Vec<usize> {
        (0..self.motions.len())
            .filter(|&s| self.motions[s].motion.input().is_some_and(|(i, _)| i == j))
            .collect()
    }

    /// For each input in `inputs` (indices into `ModelSpec::inputs`): the derivatives of all
    /// outputs with respect to the input's value, rate and second rate at `x.t`, at the fixed
    /// state `x` (module documentation). The input segments are left as they were.
    pub fn output_input_derivatives(
        &mut self,
        x: &MechState,
        inputs: &[usize],
    ) -> Result<Vec<InputDerivatives>, ModelError> {
        if self.joint.is_some() {
            return self.differenced_input_derivatives(x, inputs);
        }
        let (t, q, v) = (x.t, &x.q[..], &x.v[..]);
        let (nq, nc, n_out) = (self.n_q(), self.n_c(), self.n_outputs());
        let dynamics = self.outputs_need_dynamics();
        let mut fac = if dynamics {
            Some(self.factor_saddle(t, q)?)
        } else {
            None
        };
        let singular = |s: &Self| s.err(format!("singular saddle-point matrix at t = {t}"));
        // Base accelerations and multipliers (held while differencing frame partials).
        let (acc0, lam0) = match fac.as_mut() {
            Some(fac) => {
                let mut rhs = vec![0.0; nq + nc];
                self.forces(t, q, v, &mut rhs[..nq]);
                self.acceleration_rhs(t, q, v, &mut rhs[nq..]);
                if !fac.solve(&mut rhs) {
                    return Err(singular(self));
                }
                let lam = rhs.split_off(nq);
                (rhs, lam)
            }
            None => (Vec::new(), Vec::new()),
        };
        let spec = self.spec.clone();
        let mut result = Vec::with_capacity(inputs.len());
        for &j in inputs {
            let slots = self.input_slots(j);
            let feeds_frame = self
                .frame_motions
                .iter()
                .any(|fm| fm.iter().any(|s| slots.contains(s)));
            let mut der: InputDerivatives = [vec![0.0; n_out], vec![0.0; n_out], vec![0.0; n_out]];
            for (c, dy) in der.iter_mut().enumerate() {
                // Direct partials at fixed (a, λ): forces, γ, outputs.
                let mut rhs = vec![0.0; nq + nc];
                if feeds_frame {
                    self.differenced_partials(x, j, c, &acc0, &lam0, &mut rhs, dy)?;
                } else {
                    self.analytic_partials(t, v, &slots, c, &mut rhs, dy);
                }
                let Some(fac) = fac.as_mut() else { continue };
                if rhs.iter().all(|&r| r == 0.0) {
                    continue;
                }
                if !fac.solve(&mut rhs) {
                    return Err(singular(self));
                }
                let dlam = rhs.split_off(nq);
                let (zero_a, zero_l) = (vec![0.0; nq], vec![0.0; nc]);
                self.load(t, q, Some(v));
                for (k, o) in spec.outputs.iter().enumerate() {
                    if !matches!(
                        o.quantity,
                        OutputQuantity::Acceleration { .. }
                            | OutputQuantity::Relative { order: 2, .. }
                            | OutputQuantity::JointForce { .. }
                            | OutputQuantity::JointTorque { .. }
                            | OutputQuantity::DriverForce { .. }
                    ) {
                        continue;
                    }
                    // Affine in (a, λ): the linear part is exact.
                    let with = self.output(k, &o.quantity, (x.t, &x.q, &x.v), &rhs, &dlam);
                    let without = self.output(k, &o.quantity, (x.t, &x.q, &x.v), &zero_a, &zero_l);
                    dy[k] += o.scale * (with - without);
                }
            }
            result.push(der);
        }
        if let Some(Factored::Sparse(sp)) = fac {
            self.saddle_cache = Some(sp);
        }
        Ok(result)
    }

    /// Analytic direct partials for an input that feeds drivers and actuators only:
    /// `rhs = [∂f; ∂γ]` and `dy` = outputs' partials at fixed `(a, λ)`, for component `c`
    /// (0 value, 1 rate, 2 second rate).
    fn analytic_partials(
        &mut self,
        t: f64,
        v: &[f64],
        slots: &[usize],
        c: usize,
        rhs: &mut [f64],
        dy: &mut [f64],
    ) {
        let nq = self.n_q();
        match c {
            0 => {
                // Actuators: spring F = −(… + act) along ∇l, torsion +act along ∇θ.
                let mut touched = Vec::new();
                for i in 0..self.terms.len() {
                    let sign = match &self.terms[i].law {
                        Law::Spring {
                            actuator: Some(s), ..
                        } if slots.contains(s) => -self.slot_gain(*s, slots),
                        Law::Torsion {
                            actuator: Some(s), ..
                        } if slots.contains(s) => self.slot_gain(*s, slots),
                        _ => continue,
                    };
                    let cv = self.term_value(i, Some(v));
                    for (l, g) in cv.columns() {
                        rhs[g] += sign * cv.grad[l];
                    }
                    touched.push(self.terms[i].element);
                }
                if touched.is_empty() {
                    return;
                }
                for (k, o) in self.spec.outputs.iter().enumerate() {
                    if let OutputQuantity::ElementForce { force } = o.quantity {
                        if touched.contains(&force) {
                            dy[k] += o.scale * self.element_force_input_partial(force, t, v, slots);
                        }
                    }
                }
            }
            2 => {
                // Drivers: γ = −conv + ü.
                for (k, &i) in self.active.iter().enumerate() {
                    if let RowKind::Coord {
                        motion: Some(s), ..
                    } = &self.rows[i].kind
                    {
                        if slots.contains(s) {
                            rhs[nq + k] += self.slot_gain(*s, slots);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// `∂(element_force(e))/∂u` through the actuators driven by `slots`.
    fn element_force_input_partial(&self, e: usize, t: f64, v: &[f64], slots: &[usize]) -> f64 {
        let mut vals = Vec::new();
        let mut dvals = Vec::new();
        for (i, tm) in self.terms.iter().enumerate() {
            if tm.element != e {
                continue;
            }
            let cv = self.term_value(i, Some(v));
            let (f, _, _) = self.term_law(i, cv.val, cv.rate, t);
            // Reported force: spring tension −F = … + act; torsion F = … + act.
            let (val, dval) = match &tm.law {
                Law::Spring { actuator, .. } => {
                    (-f, actuator.map_or(0.0, |s| self.slot_gain(s, slots)))
                }
                Law::Torsion { actuator, .. } => {
                    (f, actuator.map_or(0.0, |s| self.slot_gain(s, slots)))
                }
                _ => (f, 0.0),
            };
            vals.push(val);
            dvals.push(dval);
        }
        match vals.len() {
            0 => 0.0,
            1 => dvals[0],
            _ => {
                let n = vals[..3].iter().map(|x| x * x).sum::<f64>().sqrt();
                if n == 0.0 {
                    0.0
                } else {
                    (0..3).map(|i| vals[i] * dvals[i]).sum::<f64>() / n
                }
            }
        }
    }

    /// Direct partials for an input that feeds a moving frame, by central differences over
    /// input `j`'s segment with only component `c` of `(u, u̇, ü)` at `t` moved: `[∂f; ∂γ]`
    /// into `rhs`, the outputs at the fixed `(acc, lam)` into `dy`.
    #[allow(clippy::too_many_arguments)]
    fn differenced_partials(
        &mut self,
        x: &MechState,
        j: usize,
        c: usize,
        acc: &[f64],
        lam: &[f64],
        rhs: &mut [f64],
        dy: &mut [f64],
    ) -> Result<(), ModelError> {
        let (t, q, v) = (x.t, &x.q[..], &x.v[..]);
        let (nq, n_out) = (self.n_q(), self.n_outputs());
        let saved = self.inputs.segments[j];
        let base = saved.eval(t);
        let h = f64::EPSILON.cbrt() * base[c].abs().max(1.0);
        let mut plus = vec![0.0; rhs.len()];
        let mut minus = vec![0.0; rhs.len()];
        let (mut yp, mut ym) = (vec![0.0; n_out], vec![0.0; n_out]);
        let spec = self.spec.clone();
        for (sign, r, y) in [(1.0, &mut plus, &mut yp), (-1.0, &mut minus, &mut ym)] {
            let mut w = base;
            w[c] += sign * h;
            // A segment starting at t reproduces (u, u̇, ü) there exactly.
            self.inputs.segments[j] = crate::mbs::inputs::InputSegment {
                t0: t,
                coeffs: [w[0], w[1], 0.5 * w[2], 0.0],
            };
            self.forces(t, q, v, &mut r[..nq]);
            self.acceleration_rhs(t, q, v, &mut r[nq..]);
            if !lam.is_empty() {
                // A frame moves constraint rows, so Φq changes too: differentiate the residual
                // [f − Φqᵀλ; γ − Φq a] at the fixed (a, λ).
                let nc = r.len() - nq;
                let mut jac = DMatrix::zeros(nc, nq);
                self.constraint_jacobian(t, q, &mut jac);
                for i in 0..nc {
                    for g in 0..nq {
                        let e = jac[(i, g)];
                        r[g] -= e * lam[i];
                        r[nq + i] -= e * acc[g];
                    }
                }
            }
            self.load(t, q, Some(v));
            for (k, o) in spec.outputs.iter().enumerate() {
                y[k] = o.scale * self.output(k, &o.quantity, (x.t, &x.q, &x.v), acc, lam);
            }
        }
        self.inputs.segments[j] = saved;
        for k in 0..rhs.len() {
            rhs[k] = (plus[k] - minus[k]) / (2.0 * h);
        }
        for k in 0..n_out {
            dy[k] = (yp[k] - ym[k]) / (2.0 * h);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mbs::inputs::InputSegment;
    use crate::mbs::loader::load_model_str;

    fn out(name: &str, body: &str) -> String {
        format!("\n[[outputs]]\nname = \"{name}\"\n{body}\n")
    }

    /// Each model with inputs, plus outputs that see the inputs at a fixed state
    /// (accelerations, reactions, energy, frame points) and, on the quarter car, an actuated
    /// suspension spring driven by a second input.
    fn models() -> Vec<(String, String)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
        let read = |m: &str| std::fs::read_to_string(dir.join(format!("{m}.toml"))).unwrap();
        let slider = read("slider_crank")
            + &out(
                "ax",
                "type = \"acceleration\"\nbody = \"slider\"\ncomponent = \"x\"",
            )
            + &out(
                "fpin",
                "type = \"joint_force\"\njoint = \"crank_pin\"\ncomponent = \"y\"",
            )
            + &out("e", "type = \"energy\"");
        let four = read("four_link")
            + &out(
                "ar",
                "type = \"acceleration\"\nbody = \"rocker\"\ncomponent = \"y\"",
            )
            + &out(
                "tr",
                "type = \"joint_torque\"\njoint = \"rocker_pivot\"\ncomponent = \"z\"",
            );
        let quarter = read("quarter_car_rig").replace(
            "free_length = 0.5\n",
            "free_length = 0.5\nactuator = { input = \"susp_force\" }\n",
        ) + "\n[[inputs]]\nname = \"susp_force\"\nstart = 0.0\n"
            + &out(
                "ac",
                "type = \"acceleration\"\nbody = \"chassis\"\ncomponent = \"z\"",
            )
            + &out("fs", "type = \"element_force\"\nforce = \"suspension\"")
            + &out("e", "type = \"energy\"");
        let chain = read("pendulum_chain")
            + &out(
                "a1",
                "type = \"acceleration\"\nbody = \"p1\"\ncomponent = \"x\"",
            )
            + &out(
                "a9",
                "type = \"acceleration\"\nbody = \"p9\"\ncomponent = \"y\"",
            )
            + &out(
                "f1",
                "type = \"joint_force\"\njoint = \"rod1\"\ncomponent = \"y\"",
            )
            + &out(
                "vs",
                "type = \"velocity\"\nbody = \"suspension\"\ncomponent = \"x\"",
            )
            + &out("e", "type = \"energy\"");
        vec![
            ("slider_crank".into(), slider),
            ("four_link".into(), four),
            ("quarter_car_rig".into(), quarter),
            ("pendulum_chain".into(), chain),
        ]
    }

    #[test]
    fn analytic_input_derivatives_match_central_differences_of_the_outputs() {
        for (name, text) in models() {
            let spec = load_model_str(&text, std::path::Path::new("test.toml"))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let n_in = spec.inputs.len();
            let mut sys = System::new(Arc::new(spec)).unwrap();
            let mut x = sys.initial_state(0.0).unwrap();
            // A generic point: velocities off the rest state, inputs on a curved segment.
            x.t = 0.37;
            for (k, v) in x.v.iter_mut().enumerate() {
                *v += 0.05 * (1.3 * k as f64 + 0.4).sin();
            }
            for j in 0..n_in {
                let u0 = sys.inputs().segments[j].coeffs[0];
                sys.inputs_mut().segments[j] = InputSegment {
                    t0: 0.3,
                    coeffs: [u0 + 0.01, 0.4 - 0.2 * j as f64, -0.9, 0.5],
                };
            }
            let cols: Vec<usize> = (0..n_in).collect();
            let an = sys.output_input_derivatives(&x, &cols).unwrap();
            let n_out = sys.n_outputs();
            let (mut yp, mut ym) = (vec![0.0; n_out], vec![0.0; n_out]);
            let mut nonzero = 0;
            for (j, an_j) in an.iter().enumerate() {
                let saved = sys.inputs().segments[j];
                let base = saved.eval(x.t);
                for c in 0..3 {
                    let h = f64::EPSILON.cbrt() * base[c].abs().max(1.0);
                    for (s, y) in [(1.0, &mut yp), (-1.0, &mut ym)] {
                        let mut w = base;
                        w[c] += s * h;
                        sys.inputs_mut().segments[j] = InputSegment {
                            t0: x.t,
                            coeffs: [w[0], w[1], 0.5 * w[2], 0.0],
                        };
                        sys.evaluate_outputs(&x, y).unwrap();
                    }
                    sys.inputs_mut().segments[j] = saved;
                    let fd: Vec<f64> = (0..n_out).map(|k| (yp[k] - ym[k]) / (2.0 * h)).collect();
                    let scale = fd.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                    for k in 0..n_out {
                        let (a, d) = (an_j[c][k], fd[k]);
                        if d.is_nan() && a.is_nan() {
                            continue;
                        }
                        let tol = 1e-6 * d.abs().max(1e-3 * scale).max(1e-9);
                        assert!(
                            (a - d).abs() <= tol,
                            "{name}: input {j} component {c} output {k}: analytic {a} vs \
                             differences {d}"
                        );
                        if d.abs() > 1e-6 {
                            nonzero += 1;
                        }
                    }
                }
            }
            assert!(nonzero > 0, "{name}: no output depends on the inputs");
        }
    }
}
