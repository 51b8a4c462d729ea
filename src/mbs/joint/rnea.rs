//! Bias forces by recursive Newton–Euler: with the state accelerations zero (driven joints at
//! their `ü`, moving frames at their accelerations, gravity as an upward acceleration of the
//! root), the joint forces `τ = S_iᵀ f_i` needed to move the tree are `−Ψ` minus the applied
//! forces: `Ψ = −τ(p, ṗ, u, u̇, ü) ` with the applied wrenches subtracted in the body forces.

use super::kinematics::{crf, crm, euler, sv, Inertia, Kin, Sv};
use super::tree::{Node, NodeCoord, NodeKind, Parent};
use nalgebra::{Matrix6, Vector3};

/// `psi` (length n_free) from the subspaces `s` (per dof), the velocities `vel`, bias accelerations `acc`, gravity `g`,
/// body inertias `i6` (compact) and applied wrenches `w_ext` (at the origin); `f` is scratch.
#[allow(clippy::too_many_arguments)]
pub fn bias_forces(
    nodes: &[Node],
    s: &[Sv],
    vel: &[Sv],
    acc: &[Sv],
    gravity: &Vector3<f64>,
    i6: &[Inertia],
    w_ext: &[Sv],
    f: &mut [Sv],
    psi: &mut [f64],
) {
    let ag = sv(&Vector3::zeros(), &(-gravity));
    for i in 0..nodes.len() {
        let iv = i6[i].mul(&vel[i]);
        f[i] = i6[i].mul(&(acc[i] + ag)) + crf(&vel[i], &iv) - w_ext[i];
    }
    for i in (0..nodes.len()).rev() {
        if let NodeCoord::Free(a) = nodes[i].coord {
            for (k, d) in nodes[i].dofs().enumerate() {
                psi[a + k] = -s[d].dot(&f[i]);
            }
        }
        if let Parent::Node(p) = nodes[i].parent {
            let fi = f[i];
            f[p] += fi;
        }
    }
}

/// The tree part of `∂Ψ/∂ṗ` (gyroscopic and Coriolis terms; applied forces not included),
/// column by column as the tangent of the recursion along one state rate: with positions
/// fixed, `δV_i = S_j` on the subtree of joint `j`, `δA_i = δA_λ(i) + δV_i ×ₘ S_i ẋ_i +
/// V_i ×ₘ S_i δẋ_i` (+ the node's own velocity product's tangent, `Kin::node_bias`), `δf_i = I_i δA_i + δV_i ×* I_i V_i
/// + V_i ×* I_i δV_i`, summed up the tree and projected, `∂Ψ_k/∂ṗ_j = −S_kᵀ δF_k`.
/// `O(n · bodies)`; `dv`, `da`, `df` are scratch (per node).
#[allow(clippy::too_many_arguments)]
pub fn bias_velocity_jacobian(
    nodes: &[Node],
    kin: &Kin,
    i6: &[Matrix6<f64>],
    dv: &mut [Sv],
    da: &mut [Sv],
    df: &mut [Sv],
    out: &mut nalgebra::DMatrix<f64>,
) {
    out.fill(0.0);
    let (s, vel, xd) = (&kin.s, &kin.vel, &kin.xd);
    let sxd: Vec<Sv> = nodes.iter().map(|n| kin.s_times(n, xd)).collect();
    // In the subtree of the current column's joint (parents come first).
    let mut sub = vec![false; nodes.len()];
    for jn in 0..nodes.len() {
        let NodeCoord::Free(c0) = nodes[jn].coord else {
            continue;
        };
        for (m, dm) in nodes[jn].dofs().enumerate() {
            let col = c0 + m;
            for i in 0..nodes.len() {
                let parent_in = matches!(nodes[i].parent, Parent::Node(p) if sub[p]);
                sub[i] = i == jn || parent_in;
                if !sub[i] {
                    dv[i] = Sv::zeros();
                    da[i] = Sv::zeros();
                    df[i] = Sv::zeros();
                    continue;
                }
                let (dvp, dap) = match nodes[i].parent {
                    Parent::Node(p) if parent_in => (dv[p], da[p]),
                    _ => (Sv::zeros(), Sv::zeros()),
                };
                let own = if i == jn { s[dm] } else { Sv::zeros() };
                let dvi = dvp + own;
                let mut dai = dap + crm(&dvi, &sxd[i]) + crm(&vel[i], &own);
                if i == jn && nodes[i].kind == NodeKind::Spherical {
                    // δ(−(2 eᵀė/|e|²) S ė) along ė_m.
                    let e = euler(&kin.x, nodes[i].dof);
                    let n2 = e.norm_squared();
                    let c = 2.0 * e.dot(&euler(xd, nodes[i].dof)) / n2;
                    dai -= (2.0 * e[m] / n2) * sxd[i] + c * own;
                } else if i == jn {
                    // δ of the stages' `Σ_{k<l} (S_k ẋ_k) ×ₘ (S_l ẋ_l)` along ẋ_m.
                    dai += kin.staged_bias_tangent(&nodes[i], xd, |d| {
                        if d == dm {
                            s[d]
                        } else {
                            Sv::zeros()
                        }
                    });
                }
                let iv = i6[i] * vel[i];
                df[i] = i6[i] * dai + crf(&dvi, &iv) + crf(&vel[i], &(i6[i] * dvi));
                dv[i] = dvi;
                da[i] = dai;
            }
            for i in (0..nodes.len()).rev() {
                if let NodeCoord::Free(k0) = nodes[i].coord {
                    for (k, dk) in nodes[i].dofs().enumerate() {
                        out[(k0 + k, col)] = -s[dk].dot(&df[i]);
                    }
                }
                if let Parent::Node(p) = nodes[i].parent {
                    let fi = df[i];
                    df[p] += fi;
                }
            }
        }
    }
}
