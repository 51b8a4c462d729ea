//! Mass matrix by the composite-rigid-body algorithm: composite inertias leaves to root, then
//! `M_ij = S_jᵀ (I^c_i S_i)` for every ancestor `j` of `i`. World-frame spatial quantities
//! (see [`super::kinematics`]) add without transforms. Only the state coordinates' rows and
//! columns are formed (driven and fixed joints carry no column).

use super::kinematics::Sv;
use super::tree::{Node, NodeCoord, Parent};
use nalgebra::{DMatrix, Matrix6};

/// `m` (n_free × n_free) from the motion subspaces `s` and body spatial inertias `i6`;
/// `ic` is scratch of the same length.
pub fn mass_matrix(
    nodes: &[Node],
    s: &[Sv],
    i6: &[Matrix6<f64>],
    ic: &mut [Matrix6<f64>],
    m: &mut DMatrix<f64>,
) {
    m.fill(0.0);
    ic.copy_from_slice(i6);
    for i in (0..nodes.len()).rev() {
        if let Parent::Node(p) = nodes[i].parent {
            let c = ic[i];
            ic[p] += c;
        }
    }
    for i in 0..nodes.len() {
        let NodeCoord::Free(a) = nodes[i].coord else {
            continue;
        };
        let f = ic[i] * s[i];
        m[(a, a)] = s[i].dot(&f);
        let mut k = nodes[i].parent;
        while let Parent::Node(j) = k {
            if let NodeCoord::Free(b) = nodes[j].coord {
                let mij = s[j].dot(&f);
                m[(a, b)] = mij;
                m[(b, a)] = mij;
            }
            k = nodes[j].parent;
        }
    }
}
