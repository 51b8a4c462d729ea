//! Mass matrix by the composite-rigid-body algorithm: composite inertias leaves to root, then
//! `M_ij = S_jᵀ (I^c_i S_i)` for every ancestor `j` of `i`. World-frame spatial quantities
//! (see [`super::kinematics`]) add without transforms. Only the state coordinates' rows and
//! columns are formed (driven and fixed joints carry no column).

use super::kinematics::{Inertia, Sv};
use super::tree::{Node, NodeCoord, Parent};
use nalgebra::DMatrix;
use std::ops::AddAssign;

/// The composite inertias `ic` (each node's subtree) from the bodies' `ib`. They depend on the
/// poses only: the caller keeps them with the body inertias. Spatial [`Inertia`] or the
/// planar tree's four-number ones (`planar.rs`).
pub fn composite_inertias<T: Copy + AddAssign>(nodes: &[Node], ib: &[T], ic: &mut [T]) {
    ic.copy_from_slice(ib);
    sum_subtrees(nodes.iter().map(|n| n.parent), ic);
}

/// Turns per-node values into subtree sums, leaves to root (each node's parents in order;
/// parents come before their children). The composite inertias, and the recursive
/// Newton–Euler's transmitted forces.
pub fn sum_subtrees<T, P>(parents: P, x: &mut [T])
where
    T: Copy + AddAssign,
    P: DoubleEndedIterator<Item = Parent> + ExactSizeIterator,
{
    for (i, p) in parents.enumerate().rev() {
        if let Parent::Node(p) = p {
            let c = x[i];
            x[p] += c;
        }
    }
}

/// `m` (n_free × n_free) from the motion subspaces `s` (per dof) and the composite inertias
/// `ic` ([`composite_inertias`]).
pub fn mass_matrix(nodes: &[Node], s: &[Sv], ic: &[Inertia], m: &mut DMatrix<f64>) {
    m.fill(0.0);
    mass_matrix_entries(nodes, s, ic, m);
}

/// [`mass_matrix`] without zeroing `m` first: writes (overwrites) exactly the entries of
/// coordinates on one root path and leaves the others as they are (the sparse fills keep a
/// matrix whose other entries stay zero).
pub fn mass_matrix_entries(nodes: &[Node], s: &[Sv], ic: &[Inertia], m: &mut DMatrix<f64>) {
    for i in 0..nodes.len() {
        let NodeCoord::Free(a) = nodes[i].coord else {
            continue;
        };
        for (k, dk) in nodes[i].dofs().enumerate() {
            let f = ic[i].mul(&s[dk]);
            for (l, dl) in nodes[i].dofs().enumerate() {
                m[(a + k, a + l)] = s[dl].dot(&f);
            }
            let mut p = nodes[i].parent;
            while let Parent::Node(j) = p {
                if let NodeCoord::Free(b) = nodes[j].coord {
                    for (l, dl) in nodes[j].dofs().enumerate() {
                        let mij = s[dl].dot(&f);
                        m[(a + k, b + l)] = mij;
                        m[(b + l, a + k)] = mij;
                    }
                }
                p = nodes[j].parent;
            }
        }
    }
}
