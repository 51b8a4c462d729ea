//! A small simple planar tree's accelerations `p̈ = M⁻¹ Ψ` in one pass over fixed-size arrays.
//!
//! For a tree of up to [`SMALL_MAX`] nodes, each a revolute or prismatic joint with a free
//! coordinate ([`PlanarRef::simple`]), the evaluation is a few hundred flops, and what the
//! general path adds around them costs more than they do: the load's bookkeeping (which pose
//! and which rates are loaded, for the callers that share one load between `M`, `Ψ` and the
//! Jacobians), the per-node workspace arrays, the mass matrix's target lists and the
//! workspace matrix (docs/benchmarks.md, "One evaluation, session 34": 1 640 instructions per
//! call on the stiff double pendulum, the sines and cosines 230 of them). Here the same
//! operations in the same order as [`PlanarRef::pass_simple`], [`super::entries`],
//! `JointModel::add_direct_terms` and the `L D Lᵀ` of `JointModel::accelerations_into`
//! (each node by `simple_node`, shared with the pass) run on arrays of the tree's size (one
//! copy per size), from `q` and `v` straight to `p̈`, so the answer is the same to the bit (test
//! `small_tree_kernel_equals_forming_m_and_psi`). Nothing in the workspace is read or
//! written: the loaded state the other evaluations share stays what it was.

use super::{simple_node, PAt, PInertia, PlanarRef, Plane, Pv};
use crate::mbs::joint::tree::Parent;
use nalgebra::Vector3;

/// The most nodes the kernel takes: from `ABA_MIN_DOFS` (5) coordinates on, the
/// articulated-body solve is cheaper than forming and factoring `M`.
pub const SMALL_MAX: usize = 4;

impl PlanarRef {
    /// Whether [`PlanarRef::small_accelerations`] serves this tree.
    pub fn is_small(&self) -> bool {
        self.simple && (1..=SMALL_MAX).contains(&self.nodes.len())
    }

    /// `acc = M⁻¹ Ψ` at the state `(q, v)` of a tree that [`PlanarRef::is_small`];
    /// `direct(x, ẋ, Ψ)` adds the force elements on the joint coordinates (`x`, `ẋ` per
    /// dof). False, `acc` not usable, where `M` is not positive definite or not finite.
    pub fn small_accelerations(
        &self,
        plane: &Plane,
        gravity: &Vector3<f64>,
        q: &[f64],
        v: &[f64],
        direct: impl FnOnce(&[f64], &[f64], &mut [f64]),
        acc: &mut [f64],
    ) -> bool {
        match self.nodes.len() {
            1 => self.small_n::<1>(plane, gravity, q, v, direct, acc),
            2 => self.small_n::<2>(plane, gravity, q, v, direct, acc),
            3 => self.small_n::<3>(plane, gravity, q, v, direct, acc),
            4 => self.small_n::<4>(plane, gravity, q, v, direct, acc),
            _ => false,
        }
    }

    #[inline(always)]
    fn small_n<const N: usize>(
        &self,
        plane: &Plane,
        gravity: &Vector3<f64>,
        q: &[f64],
        v: &[f64],
        direct: impl FnOnce(&[f64], &[f64], &mut [f64]),
        acc: &mut [f64],
    ) -> bool {
        // One free coordinate per node: the state is `N` long (else not this kernel's tree).
        if q.len() != N || v.len() != N || acc.len() != N {
            return false;
        }
        let (nodes, stages) = (&self.nodes[..N], &self.stages[..N]);
        let ag = Pv::new(0.0, -gravity.dot(&plane.e1), -gravity.dot(&plane.e2));
        // Per dof (a simple tree has one per node; the force elements read them by dof).
        let (mut x, mut xd) = ([0.0; N], [0.0; N]);
        // Per node: state coordinate, pose, subspace, composite inertia, velocity, bias
        // acceleration, transmitted force.
        let mut state = [0usize; N];
        let mut at = [PAt::ROOT; N];
        let mut s = [Pv::default(); N];
        let mut ic = [PInertia::default(); N];
        let (mut vel, mut bias, mut f) =
            ([Pv::default(); N], [Pv::default(); N], [Pv::default(); N]);
        for i in 0..N {
            let (node, st) = (&nodes[i], &stages[i]);
            let Some(a) = node.state else {
                return false; // not simple
            };
            let d = st.dof;
            (state[i], x[d], xd[d]) = (a, q[a], v[a]);
            let parent = match node.parent {
                Parent::Node(k) => (at[k], vel[k], bias[k]),
                _ => (PAt::ROOT, Pv::default(), Pv::default()),
            };
            let nd = simple_node(node, st, x[d], xd[d], parent, &ag);
            (at[i], s[i], ic[i]) = (nd.at, nd.s, nd.ib);
            (vel[i], bias[i], f[i]) = (nd.vel, nd.acc, nd.f);
        }
        for i in (0..N).rev() {
            if let Parent::Node(p) = nodes[i].parent {
                let (c, fi) = (ic[i], f[i]);
                ic[p] += c;
                f[p] += fi;
            }
        }
        // `M` over each node's root path (column `b` is `m[b]`; symmetric), `Ψ`.
        let mut m = [[0.0; N]; N];
        for i in 0..N {
            let (a, si) = (state[i], s[i]);
            let fi = ic[i].mul(&si);
            let mut j = i;
            loop {
                let (b, val) = (state[j], s[j].dot(&fi));
                m[b][a] = val;
                m[a][b] = val;
                match nodes[j].parent {
                    Parent::Node(p) => j = p,
                    _ => break,
                }
            }
            acc[a] = -si.dot(&f[i]);
        }
        direct(&x, &xd, acc);
        crate::dense::ldlt_solve(m.as_flattened_mut(), acc)
    }
}
