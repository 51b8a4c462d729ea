//! The joint formulation's sparse structure (`integrate::sparse::SparseStructure`, through
//! [`System`], for a forest of trees, see [`JointModel::has_sparse_structure`]): `M_ij` is nonzero only when the nodes of coordinates `i` and `j` lie on one
//! root path (the entries the composite-rigid-body algorithm writes), so a forest of trees
//! hanging from ground gives one block per tree; a constraint row touches the state
//! coordinates of the ancestors of the bodies its scalar coordinate involves, a normalization
//! row its four Euler parameters.
//!
//! The values are the dense methods' own matrices, gathered at the pattern: bit for bit what
//! `mass_matrix` and `constraint_jacobian` give. `constraint_values` evaluates each row once,
//! at the rheonomic rates (the positions, values and gradients do not depend on the rates).

use super::{JRow, JointModel, Rates};
use crate::mbs::system::System;
use nalgebra::DMatrix;

impl JointModel {
    /// Whether the system reports this structure: only when more than one tree hanging from
    /// ground carries coordinates, so that `M` falls into blocks. A single tree's `M` is one
    /// dense block; the dense path is then the faster one (measured on the spherical chain:
    /// BDF 17 % slower when its one block went through the sparse fills).
    pub fn has_sparse_structure(&mut self) -> bool {
        if let Some(f) = self.ws.forest {
            return f;
        }
        let mut root = vec![0; self.nodes.len()];
        let mut roots = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            root[i] = match n.parent {
                super::Parent::Node(p) => root[p],
                _ => i,
            };
            if matches!(n.coord, super::NodeCoord::Free(_)) && !roots.contains(&root[i]) {
                roots.push(root[i]);
            }
        }
        let forest = roots.len() > 1;
        self.ws.forest = Some(forest);
        forest
    }

    /// Free state coordinates of the nodes from `node` to the root.
    fn ancestor_columns(&self, node: usize, out: &mut Vec<usize>) {
        let mut p = super::Parent::Node(node);
        while let super::Parent::Node(i) = p {
            if let super::NodeCoord::Free(a) = self.nodes[i].coord {
                out.extend(a..a + self.nodes[i].kind.n_dof());
            }
            p = self.nodes[i].parent;
        }
    }

    /// Entries of `M` in the order `crba::mass_matrix` writes them (each once).
    pub fn mass_pattern(&mut self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for i in 0..self.nodes.len() {
            let super::NodeCoord::Free(a) = self.nodes[i].coord else {
                continue;
            };
            let n = self.nodes[i].kind.n_dof();
            for k in 0..n {
                for l in 0..n {
                    out.push((a + k, a + l));
                }
                let mut p = self.nodes[i].parent;
                while let super::Parent::Node(j) = p {
                    if let super::NodeCoord::Free(b) = self.nodes[j].coord {
                        for l in 0..self.nodes[j].kind.n_dof() {
                            out.push((a + k, b + l));
                            out.push((b + l, a + k));
                        }
                    }
                    p = self.nodes[j].parent;
                }
            }
        }
        self.ws.m_pat = out.clone();
        out
    }

    /// Entries of `G`, row by row, columns ascending (which bodies a row's coordinate involves
    /// does not depend on the state: evaluated at zero joint coordinates, unit Euler
    /// parameters).
    pub fn constraint_jacobian_pattern(&mut self, sys: &System) -> Vec<(usize, usize)> {
        let mut q = vec![0.0; self.n_free];
        for &(_, a, _) in &self.euler {
            q[a] = 1.0;
        }
        self.load(sys, 0.0, &q, Rates::None);
        let mut out = Vec::new();
        let mut cols = Vec::new();
        for (k, &a) in self.active.iter().enumerate() {
            cols.clear();
            match self.rows[a] {
                JRow::Norm(n) => {
                    let c = self.euler[n].1;
                    cols.extend(c..c + 4);
                }
                JRow::Element(r) => {
                    let (c, _, _) = Self::row_coord(sys, r);
                    let cw = self.wrenches(sys, c, false);
                    for bw in &cw.bodies[..cw.n] {
                        self.ancestor_columns(self.body_node[bw.body], &mut cols);
                    }
                }
            }
            cols.sort_unstable();
            cols.dedup();
            out.extend(cols.iter().map(|&c| (k, c)));
        }
        self.ws.j_pat = out.clone();
        out
    }

    pub fn mass_matrix_values(&mut self, sys: &System, t: f64, q: &[f64], vals: &mut [f64]) {
        if self.ws.m_pat.is_empty() {
            self.mass_pattern();
        }
        let mut m = std::mem::replace(&mut self.ws.m_sparse, DMatrix::zeros(0, 0));
        if m.nrows() != self.n_free {
            m = DMatrix::zeros(self.n_free, self.n_free);
        }
        // Only the pattern's entries are ever written into this matrix.
        self.mass_matrix_entries(sys, t, q, &mut m);
        for (v, &(r, c)) in vals.iter_mut().zip(&self.ws.m_pat) {
            *v = m[(r, c)];
        }
        self.ws.m_sparse = m;
    }

    pub fn constraint_jacobian_values(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        vals: &mut [f64],
    ) {
        if self.ws.j_pat.is_empty() && !self.active.is_empty() {
            self.constraint_jacobian_pattern(sys);
        }
        let mut jac = self.take_jac_scratch();
        self.constraint_jacobian(sys, t, q, &mut jac);
        for (v, &(r, c)) in vals.iter_mut().zip(&self.ws.j_pat) {
            *v = jac[(r, c)];
        }
        self.ws.j_sparse = jac;
    }

    /// `Φ`, the values of `G` and `Φ_t` with one recursion and one evaluation per row
    /// ([`JointModel::constraint_rows`] into a scratch matrix, gathered at the pattern).
    pub fn constraint_values(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        phi: &mut [f64],
        jac_vals: &mut [f64],
        phi_t: &mut [f64],
    ) {
        if self.ws.j_pat.is_empty() && !self.active.is_empty() {
            self.constraint_jacobian_pattern(sys);
        }
        let mut jac = self.take_jac_scratch();
        // Only the pattern's entries are ever written (and summed into) here.
        for &(r, c) in &self.ws.j_pat {
            jac[(r, c)] = 0.0;
        }
        self.constraint_rows(sys, t, q, phi, &mut jac, phi_t);
        for (v, &(r, c)) in jac_vals.iter_mut().zip(&self.ws.j_pat) {
            *v = jac[(r, c)];
        }
        self.ws.j_sparse = jac;
    }

    fn take_jac_scratch(&mut self) -> DMatrix<f64> {
        let jac = std::mem::replace(&mut self.ws.j_sparse, DMatrix::zeros(0, 0));
        let (nc, nq) = (self.n_c(), self.n_free);
        if jac.shape() == (nc, nq) {
            jac
        } else {
            DMatrix::zeros(nc, nq)
        }
    }
}
