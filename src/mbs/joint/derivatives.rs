//! `∂Ψ/∂p` analytic: the tangent of the forward recursion and of the Newton–Euler pass along
//! one joint coordinate, plus the force elements through the element layer's analytic
//! Hessians.
//!
//! Along `q_j` (joint `j`, motion subspace `S_j`), everything in `j`'s subtree moves with the
//! spatial velocity `S_j`: `δS_i = S_j ×ₘ S_i` (below `j`), `δI_i = S_j ×* I_i − I_i S_j ×ₘ`,
//! `δV_i = δV_λ(i) + δS_i ẋ_i`, `δA_i = δA_λ(i) + δS_i ẍ_i + δV_i ×ₘ S_i ẋ_i + V_i ×ₘ δS_i ẋ_i`,
//! `δf_i = δI_i (A_i + a_g) + I_i δA_i + δV_i ×* I_i V_i + V_i ×* (δI_i V_i + I_i δV_i) − δW_i`,
//! and `∂Ψ_k/∂q_j = −(δS_kᵀ F_k + S_kᵀ δF_k)` with `F` the subtree sums of the Newton–Euler
//! pass. The applied wrench changes `δW` in two ways: the elements' absolute generalized forces
//! change (`∂f/∂q_abs · δq_abs + ∂f/∂v_abs · δv_abs`, the analytic element Jacobians of the
//! absolute formulation), and a fixed absolute force acts through moved bodies
//! (`[½E(δe) f_e + δr × f_r; 0]`).

use super::super::kin::{eval_coord, LMat, LVec, LOCAL};
use super::super::math::e_mat;
use super::super::system::System;
use super::kinematics::{crf, crm, sv, Sv};
use super::tree::{NodeCoord, Parent};
use super::JointModel;
use nalgebra::{DMatrix, Vector3, Vector4};

/// One force element linearized in absolute coordinates.
struct TermLin {
    cols: [(usize, usize); LOCAL],
    n: usize,
    dq: LMat,
    dv: LMat,
}

fn ang(v: &Sv) -> Vector3<f64> {
    Vector3::new(v[0], v[1], v[2])
}
fn lin(v: &Sv) -> Vector3<f64> {
    Vector3::new(v[3], v[4], v[5])
}

impl JointModel {
    /// `out = ∂Ψ/∂p` at `(t, q, v)`.
    pub(super) fn position_jacobian(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        out: &mut DMatrix<f64>,
    ) {
        let n = self.n_q();
        let mut psi = vec![0.0; n];
        // Fills the recursion, the inertias and the subtree sums F (applied wrenches in).
        self.forces(sys, t, q, v, &mut psi);
        let layout = sys.layout();
        let nb = layout.offsets.len();
        let nn = self.nodes.len();
        let snap = &self.ws.snap;
        let mut va = vec![0.0; layout.n_q];
        for b in 0..nb {
            let o = layout.offsets[b];
            va[o..o + 3].copy_from_slice(snap.rd[b].as_slice());
            va[o + 3..o + 7].copy_from_slice(snap.pd[b].as_slice());
        }
        // The elements, linearized; their absolute forces per body.
        let (mut fr, mut fe) = (vec![Vector3::zeros(); nb], vec![Vector4::zeros(); nb]);
        let mut lins = Vec::new();
        let mut hess = LMat::zeros();
        for term in &sys.terms {
            let cv = eval_coord(
                layout,
                snap,
                &term.coord,
                &sys.angle_refs,
                Some(&[]),
                Some(&mut hess),
            );
            let (force, f_xi, f_rate) = sys.law(&term.law, cv.val, cv.rate, t);
            if force == 0.0 && f_xi == 0.0 && f_rate == 0.0 {
                continue;
            }
            let vl = cv.gather(&va);
            let drate = hess * vl + cv.grad_t;
            let dq = cv.grad * (f_xi * cv.grad + f_rate * drate).transpose() + force * hess;
            let dv = f_rate * cv.grad * cv.grad.transpose();
            let (cols, nc) = cv.column_array();
            for &(l, g) in &cols[..nc] {
                let b = self.col_body[g];
                let c = g - layout.offsets[b];
                if c < 3 {
                    fr[b][c] += force * cv.grad[l];
                } else {
                    fe[b][c - 3] += force * cv.grad[l];
                }
            }
            lins.push(TermLin {
                cols,
                n: nc,
                dq,
                dv,
            });
        }
        let kin = &self.ws.kin;
        let (s, vel, acc) = (&kin.s, &kin.vel, &kin.acc);
        let ag = sv(&Vector3::zeros(), &(-sys.gravity));
        let mut sub = vec![false; nn];
        let (mut ds, mut dvel, mut dacc, mut df, mut dw) = (
            vec![Sv::zeros(); nn],
            vec![Sv::zeros(); nn],
            vec![Sv::zeros(); nn],
            vec![Sv::zeros(); nn],
            vec![Sv::zeros(); nn],
        );
        // Per body: δr, δe, δṙ, δė along the current column.
        let (mut dr, mut de) = (vec![Vector3::zeros(); nb], vec![Vector4::zeros(); nb]);
        let (mut drd, mut ded) = (vec![Vector3::zeros(); nb], vec![Vector4::zeros(); nb]);
        out.fill(0.0);
        for jn in 0..nn {
            let NodeCoord::Free(col) = self.nodes[jn].coord else {
                continue;
            };
            let sj = s[jn];
            let (wj, vj) = (ang(&sj), lin(&sj));
            for i in 0..nn {
                let b = self.nodes[i].body;
                let parent = match self.nodes[i].parent {
                    Parent::Node(p) if sub[p] => Some(p),
                    _ => None,
                };
                sub[i] = i == jn || parent.is_some();
                if !sub[i] {
                    ds[i] = Sv::zeros();
                    dvel[i] = Sv::zeros();
                    dacc[i] = Sv::zeros();
                    dr[b] = Vector3::zeros();
                    de[b] = Vector4::zeros();
                    drd[b] = Vector3::zeros();
                    ded[b] = Vector4::zeros();
                    continue;
                }
                ds[i] = if i == jn {
                    Sv::zeros()
                } else {
                    crm(&sj, &s[i])
                };
                let (dvp, dap) = parent.map_or((Sv::zeros(), Sv::zeros()), |p| (dvel[p], dacc[p]));
                dvel[i] = dvp + ds[i] * kin.xd[i];
                dacc[i] = dap
                    + ds[i] * kin.xdd[i]
                    + crm(&dvel[i], &(s[i] * kin.xd[i]))
                    + crm(&vel[i], &(ds[i] * kin.xd[i]));
                let (r, e) = (kin.com[i], kin.e[i]);
                let (w, _) = kin.body_velocity(i);
                dr[b] = vj + wj.cross(&r);
                de[b] = 0.5 * e_mat(&e).transpose() * wj;
                let dwb = ang(&dvel[i]);
                drd[b] = lin(&dvel[i]) + dwb.cross(&r) + w.cross(&dr[b]);
                ded[b] = 0.5 * (e_mat(&de[b]).transpose() * w + e_mat(&e).transpose() * dwb);
            }
            // Applied wrench changes.
            dw.iter_mut().for_each(|x| *x = Sv::zeros());
            for (i, node) in self.nodes.iter().enumerate() {
                if sub[i] {
                    let b = node.body;
                    dw[i] += sv(
                        &(0.5 * e_mat(&de[b]) * fe[b] + dr[b].cross(&fr[b])),
                        &Vector3::zeros(),
                    );
                }
            }
            for tl in &lins {
                let (mut jl, mut dvl) = (LVec::zeros(), LVec::zeros());
                for &(l, g) in &tl.cols[..tl.n] {
                    let b = self.col_body[g];
                    let c = g - layout.offsets[b];
                    if c < 3 {
                        jl[l] = dr[b][c];
                        dvl[l] = drd[b][c];
                    } else {
                        jl[l] = de[b][c - 3];
                        dvl[l] = ded[b][c - 3];
                    }
                }
                if jl.iter().all(|x| *x == 0.0) && dvl.iter().all(|x| *x == 0.0) {
                    continue;
                }
                let dfl = tl.dq * jl + tl.dv * dvl;
                for &(l, g) in &tl.cols[..tl.n] {
                    let b = self.col_body[g];
                    let i = self.body_node[b];
                    let c = g - layout.offsets[b];
                    if c < 3 {
                        let mut f = Vector3::zeros();
                        f[c] = dfl[l];
                        dw[i] += sv(&kin.com[i].cross(&f), &f);
                    } else {
                        let mut f = Vector4::zeros();
                        f[c - 3] = dfl[l];
                        dw[i] += sv(&(0.5 * e_mat(&kin.e[i]) * f), &Vector3::zeros());
                    }
                }
            }
            for i in 0..nn {
                if !sub[i] {
                    df[i] = -dw[i];
                    continue;
                }
                let ii = &self.ws.i6[i];
                let di = |x: &Sv| crf(&sj, &(ii * x)) - ii * crm(&sj, x);
                df[i] = di(&(acc[i] + ag))
                    + ii * dacc[i]
                    + crf(&dvel[i], &(ii * vel[i]))
                    + crf(&vel[i], &(di(&vel[i]) + ii * dvel[i]))
                    - dw[i];
            }
            for i in (0..nn).rev() {
                if let NodeCoord::Free(k) = self.nodes[i].coord {
                    out[(k, col)] = -(ds[i].dot(&self.ws.f[i]) + s[i].dot(&df[i]));
                }
                if let Parent::Node(p) = self.nodes[i].parent {
                    let fi = df[i];
                    df[p] += fi;
                }
            }
        }
    }
}
