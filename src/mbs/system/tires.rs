//! The tire elements (`mbs::tire`) in the system: built from the spec, their generalized
//! forces and analytic Jacobians on the wheel's absolute coordinates, energy and outputs. The
//! joint formulation evaluates the same elements on its own snapshot (`tire_eval`).

use super::super::kin::Snapshot;
use super::super::spec::{Scalar, TireSpec};
use super::super::tire::{MagicFormula, Tire, TireEval, TireParams};
use super::System;
use nalgebra::DMatrix;

impl System {
    /// Resolve a tire element with the current parameters; `road_slot` is its road-height
    /// motion slot.
    pub(super) fn build_tire(
        &self,
        element: usize,
        ts: &TireSpec,
        road_slot: usize,
    ) -> Result<Tire, super::ModelError> {
        let pv = |s: &Scalar| s.eval(&self.params);
        let mf = |c: &[Scalar; 3]| MagicFormula {
            b: pv(&c[0]),
            c: pv(&c[1]),
            e: pv(&c[2]),
        };
        let params = TireParams {
            radius: pv(&ts.radius),
            k: pv(&ts.stiffness),
            c: pv(&ts.damping),
            mu: pv(&ts.mu),
            mf_x: mf(&ts.mf_x),
            mf_y: mf(&ts.mf_y),
            v_low: pv(&ts.v_low),
        };
        let name = &self.spec.forces[element].name;
        if !(params.radius > 0.0 && params.k > 0.0 && params.v_low > 0.0) {
            return Err(self.err(format!(
                "tire '{name}': radius {}, stiffness {} and v_reg {} must be positive",
                params.radius, params.k, params.v_low
            )));
        }
        if params.mf_x.e > 1.0 || params.mf_y.e > 1.0 {
            return Err(self.err(format!(
                "tire '{name}': Magic Formula E must not exceed 1 (ex = {}, ey = {})",
                params.mf_x.e, params.mf_y.e
            )));
        }
        Ok(Tire {
            element,
            body: ts.wheel,
            center: ts.center,
            axis: ts.axis.normalize(),
            params,
            road_slot,
            profile: ts
                .road_profile
                .as_ref()
                .map(|(_, x, h)| super::super::motion::Spline::new(x, h)),
        })
    }

    /// Tire `i` at snapshot `s` (velocities loaded) and time `t`.
    pub(crate) fn tire_eval(&self, s: &Snapshot, i: usize, t: f64, jac: bool) -> TireEval {
        let tr = &self.tires[i];
        tr.evaluate(s, self.motion(tr.road_slot, t), jac)
    }

    /// `f += Q` of every tire (snapshot loaded with velocities).
    pub(super) fn add_tire_forces(&self, t: f64, f: &mut [f64]) {
        for i in 0..self.tires.len() {
            let ev = self.tire_eval(&self.snap, i, t, false);
            let o = self.layout.offsets[self.tires[i].body];
            for k in 0..7 {
                f[o + k] += ev.q[k];
            }
        }
    }

    /// `∂Q/∂q`, `∂Q/∂v` of every tire added (snapshot loaded with velocities).
    pub(super) fn add_tire_jacobians(
        &self,
        t: f64,
        df_dq: &mut DMatrix<f64>,
        df_dv: &mut DMatrix<f64>,
    ) {
        for i in 0..self.tires.len() {
            let ev = self.tire_eval(&self.snap, i, t, true);
            let o = self.layout.offsets[self.tires[i].body];
            for r in 0..7 {
                for c in 0..7 {
                    df_dq[(o + r, o + c)] += ev.jac[(r, c)];
                    df_dv[(o + r, o + c)] += ev.jac[(r, 7 + c)];
                }
            }
        }
    }

    /// The tire of force element `e`, if it is one.
    pub(super) fn tire_of_element(&self, e: usize) -> Option<usize> {
        self.tires.iter().position(|tr| tr.element == e)
    }

    /// Elastic energy of the tires, `½ k δ²` in contact (snapshot loaded).
    pub(super) fn tire_energy(&self, t: f64) -> f64 {
        (0..self.tires.len())
            .map(|i| {
                let d = self.tire_eval(&self.snap, i, t, false).forces.deflection;
                0.5 * self.tires[i].params.k * d.max(0.0).powi(2)
            })
            .sum()
    }
}
