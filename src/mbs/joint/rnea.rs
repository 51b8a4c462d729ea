//! Bias forces by recursive Newton–Euler: with the state accelerations zero (driven joints at
//! their `ü`, moving frames at their accelerations, gravity as an upward acceleration of the
//! root), the joint forces `τ = S_iᵀ f_i` needed to move the tree are `−Ψ` minus the applied
//! forces: `Ψ = −τ(p, ṗ, u, u̇, ü) ` with the applied wrenches subtracted in the body forces.

use super::kinematics::{crf, sv, Sv};
use super::tree::{Node, NodeCoord, Parent};
use nalgebra::{Matrix6, Vector3};

/// `psi` (length n_free) from the velocities `vel`, bias accelerations `acc`, gravity `g`,
/// body inertias `i6` and applied wrenches `w_ext` (at the origin); `f` is scratch.
#[allow(clippy::too_many_arguments)]
pub fn bias_forces(
    nodes: &[Node],
    s: &[Sv],
    vel: &[Sv],
    acc: &[Sv],
    gravity: &Vector3<f64>,
    i6: &[Matrix6<f64>],
    w_ext: &[Sv],
    f: &mut [Sv],
    psi: &mut [f64],
) {
    let ag = sv(&Vector3::zeros(), &(-gravity));
    for i in 0..nodes.len() {
        let iv = i6[i] * vel[i];
        f[i] = i6[i] * (acc[i] + ag) + crf(&vel[i], &iv) - w_ext[i];
    }
    for i in (0..nodes.len()).rev() {
        if let NodeCoord::Free(a) = nodes[i].coord {
            psi[a] = -s[i].dot(&f[i]);
        }
        if let Parent::Node(p) = nodes[i].parent {
            let fi = f[i];
            f[p] += fi;
        }
    }
}
