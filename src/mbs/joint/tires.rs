//! The tires (`mbs::tire`) in the joint formulation: the element layer evaluates each tire's
//! generalized force `Q` on the wheel's absolute `(r, e)` and its Jacobians at the tree's
//! snapshot; here `Q` becomes a wrench on the wheel's node (as a scalar force's gradient does),
//! `∂Q/∂(ṙ, ė)` is carried to `∂Ψ/∂ṗ` through the wheel's velocity map `J`, and `∂Q/∂(r, e)`,
//! `∂Q/∂(ṙ, ė)` join the applied-force linearization of `∂Ψ/∂p` (`derivatives.rs`).

use super::super::kin::{LMat, LOCAL};
use super::super::math::e_mat;
use super::super::system::System;
use super::derivatives::{Applied, TermLin};
use super::kinematics::Sv;
use super::tree::{NodeCoord, Parent};
use super::{BodyGrad, JointModel};
use nalgebra::{DMatrix, Vector3, Vector4};

impl JointModel {
    fn tire_grad(body: usize, q: &nalgebra::SVector<f64, 7>) -> BodyGrad {
        BodyGrad {
            body,
            g_r: Vector3::new(q[0], q[1], q[2]),
            g_e: Vector4::new(q[3], q[4], q[5], q[6]),
        }
    }

    /// Add every tire's wrench to the applied wrenches (snapshot loaded with rates).
    pub(super) fn add_tire_wrenches(&mut self, sys: &System, t: f64) {
        for i in 0..sys.tires.len() {
            let ev = sys.tire_eval(&self.ws.snap, i, t, false);
            let b = sys.tires[i].body;
            let w = self.wrench(&Self::tire_grad(b, &ev.q));
            self.ws.w[self.body_node[b]] += w;
        }
    }

    /// The wheel's absolute velocity map: column `a` is `(ṙ, ė)` of body `b` for a unit rate
    /// of free coordinate `a` (`[v_O + ω × r; ½Eᵀω]` of the ancestors' motion subspaces).
    fn body_velocity_map(&self, b: usize, n: usize) -> DMatrix<f64> {
        let mut j = DMatrix::zeros(7, n);
        let (r, e) = (self.ws.snap.r[b], self.ws.snap.p[b]);
        let mut node = Parent::Node(self.body_node[b]);
        while let Parent::Node(i) = node {
            if let NodeCoord::Free(a) = self.nodes[i].coord {
                let s: Sv = self.ws.kin.s[i];
                let w = Vector3::new(s[0], s[1], s[2]);
                let v = Vector3::new(s[3], s[4], s[5]) + w.cross(&r);
                let ed = 0.5 * e_mat(&e).transpose() * w;
                for k in 0..3 {
                    j[(k, a)] += v[k];
                }
                for k in 0..4 {
                    j[(3 + k, a)] += ed[k];
                }
            }
            node = self.nodes[i].parent;
        }
        j
    }

    /// `∂Ψ/∂ṗ += Jᵀ ∂Q/∂(ṙ, ė) J` per tire.
    pub(super) fn add_tire_velocity_jacobian(&self, sys: &System, t: f64, out: &mut DMatrix<f64>) {
        let n = out.ncols();
        for i in 0..sys.tires.len() {
            let ev = sys.tire_eval(&self.ws.snap, i, t, true);
            let j = self.body_velocity_map(sys.tires[i].body, n);
            let dv = DMatrix::from_fn(7, 7, |r, c| ev.jac[(r, 7 + c)]);
            *out += j.transpose() * dv * &j;
        }
    }

    /// The tires' absolute forces and their linearization, for `∂Ψ/∂p`.
    pub(super) fn linearize_tires(&self, sys: &System, t: f64, applied: &mut Applied) {
        let layout = sys.layout();
        for i in 0..sys.tires.len() {
            let ev = sys.tire_eval(&self.ws.snap, i, t, true);
            let b = sys.tires[i].body;
            let o = layout.offsets[b];
            let mut cols = [(0, 0); LOCAL];
            let (mut dq, mut dv) = (LMat::zeros(), LMat::zeros());
            for r in 0..7 {
                cols[r] = (r, o + r);
                for c in 0..7 {
                    dq[(r, c)] = ev.jac[(r, c)];
                    dv[(r, c)] = ev.jac[(r, 7 + c)];
                }
            }
            applied.lins.push(TermLin { cols, n: 7, dq, dv });
            let bg = Self::tire_grad(b, &ev.q);
            applied.fr[b] += bg.g_r;
            applied.fe[b] += bg.g_e;
            applied.w[self.body_node[b]] += self.wrench(&bg);
        }
    }
}
