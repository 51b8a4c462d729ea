//! The contacts' friction (`mbs::contact_friction`) in the joint formulation, as the tires are
//! (`tires.rs`): the element layer gives each contact's generalized force on its sides'
//! absolute coordinates and its Jacobians at the tree's snapshot; here the force becomes a
//! wrench per side, `∂Q/∂(ṙ, ė)` is carried to `∂Ψ/∂ṗ` through the sides' velocity maps, and
//! `∂Q/∂(r, e)`, `∂Q/∂(ṙ, ė)` join the applied-force linearization of `∂Ψ/∂p`.

use super::super::contact_friction::{ContactFriction, LocalForce, Side};
use super::super::kin::{LMat, LOCAL};
use super::super::system::System;
use super::derivatives::{Applied, TermLin};
use super::{BodyGrad, JointModel};
use nalgebra::{DMatrix, Vector3, Vector4};

impl JointModel {
    /// The per-body gradients of a local generalized force (columns from `columns`).
    fn local_grads(&self, sys: &System, sides: &[Side; 2], q: &LocalForce) -> Vec<BodyGrad> {
        let layout = sys.layout();
        let (cols, n) = ContactFriction::columns(sides);
        let mut out: Vec<BodyGrad> = Vec::with_capacity(2);
        for &(l, g) in &cols[..n] {
            let b = self.col_body[g];
            let c = g - layout.offsets[b];
            if c == 0 {
                out.push(BodyGrad {
                    body: b,
                    g_r: Vector3::zeros(),
                    g_e: Vector4::zeros(),
                });
            }
            let bg = out
                .last_mut()
                .expect("a body's block starts at its column 0");
            if c < 3 {
                bg.g_r[c] = q[l];
            } else {
                bg.g_e[c - 3] = q[l];
            }
        }
        out
    }

    /// Add every contact's friction wrenches to the applied wrenches (snapshot loaded with
    /// rates).
    pub(super) fn add_contact_friction_wrenches(&mut self, sys: &System, t: f64) {
        for i in 0..sys.contact_friction.len() {
            let (sides, _, q) = sys.contact_friction_eval(&self.ws.snap, i, t);
            for bg in self.local_grads(sys, &sides, &q) {
                let w = self.wrench(&bg);
                self.ws.w[self.body_node[bg.body]] += w;
            }
        }
    }

    /// `∂Ψ/∂ṗ += Jᵀ ∂Q/∂(ṙ, ė) J` per contact, `J` the sides' stacked velocity maps.
    pub(super) fn add_contact_friction_velocity_jacobian(
        &self,
        sys: &System,
        t: f64,
        out: &mut DMatrix<f64>,
    ) {
        let n = out.ncols();
        let layout = sys.layout();
        for i in 0..sys.contact_friction.len() {
            let sides = sys.contact_friction[i].sides(layout, &self.ws.snap);
            let jac = sys.contact_friction_jacobian(&sides, i, t);
            let (cols, nl) = ContactFriction::columns(&sides);
            let mut j = DMatrix::zeros(nl, n);
            let mut l = 0;
            while l < nl {
                let b = self.col_body[cols[l].1];
                let w = if layout.is_rigid(b) { 7 } else { 3 };
                let map = self.body_velocity_map(b, n);
                j.rows_mut(l, w).copy_from(&map.rows(0, w));
                l += w;
            }
            let dv = DMatrix::from_fn(nl, nl, |r, c| jac[(r, LOCAL + c)]);
            *out += j.transpose() * dv * &j;
        }
    }

    /// The contacts' friction forces and their linearization, for `∂Ψ/∂p`.
    pub(super) fn linearize_contact_friction(&self, sys: &System, t: f64, applied: &mut Applied) {
        for i in 0..sys.contact_friction.len() {
            let (sides, _, q) = sys.contact_friction_eval(&self.ws.snap, i, t);
            let jac = sys.contact_friction_jacobian(&sides, i, t);
            let (cols, n) = ContactFriction::columns(&sides);
            let (mut dq, mut dv) = (LMat::zeros(), LMat::zeros());
            for r in 0..n {
                for c in 0..n {
                    dq[(r, c)] = jac[(r, c)];
                    dv[(r, c)] = jac[(r, LOCAL + c)];
                }
            }
            applied.lins.push(TermLin { cols, n, dq, dv });
            for bg in self.local_grads(sys, &sides, &q) {
                applied.fr[bg.body] += bg.g_r;
                applied.fe[bg.body] += bg.g_e;
                applied.w[self.body_node[bg.body]] += self.wrench(&bg);
            }
        }
    }
}
