//! The constraint rows `g(p, u(t)) = 0`: cut joints, drivers off the tree and the Euler
//! parameters' normalizations, evaluated by the element layer at the tree's body poses and
//! projected on the joint axes (`G = ∂g/∂p`), with `∂g/∂t` and the acceleration right-hand side.

use super::kinematics;
use super::kinematics::{sv, Sv};
use super::tree::{NodeCoord, Parent};
use super::{body_wrench, BodyGrad, JRow, JointModel, Rates};
use crate::mbs::kin::{
    eval_coord_accel, eval_coord_need, eval_coord_wrenches, eval_coord_wrenches_accel, CoordVal,
    CoordWrenches, Need,
};
use crate::mbs::math::e_mat;
use crate::mbs::system::{RowKind, System};
use nalgebra::{DMatrix, Vector4};

impl JointModel {
    /// The wrench at the world origin equivalent to a body gradient (virtual power:
    /// `g_r·ṙ + g_e·ė = Wᵀ V` with `ė = ½Eᵀω`).
    pub(super) fn wrench(&self, bg: &BodyGrad) -> Sv {
        let i = self.body_node[bg.body];
        let (e, r) = (self.ws.kin.e[i], self.ws.kin.com[i]);
        sv(&(0.5 * e_mat(&e) * bg.g_e + r.cross(&bg.g_r)), &bg.g_r)
    }

    /// `G` row `k` += the projection of wrench `w` on body `b`'s ancestors' free axes.
    fn project_row(&self, b: usize, w: &Sv, k: usize, jac: &mut DMatrix<f64>) {
        let mut node = Parent::Node(self.body_node[b]);
        while let Parent::Node(i) = node {
            if let NodeCoord::Free(a) = self.nodes[i].coord {
                for (l, d) in self.nodes[i].dofs().enumerate() {
                    jac[(k, a + l)] += self.ws.kin.s[d].dot(w);
                }
            }
            node = self.nodes[i].parent;
        }
    }

    /// Row `k` of `G` for the normalization of Euler-parameter entry `n` (`eᵀ` on its four
    /// coordinates); returns `e`.
    fn norm_row(&self, n: usize, q: &[f64], k: usize, jac: &mut DMatrix<f64>) -> Vector4<f64> {
        let (col, e) = (self.euler[n].1, self.euler_of(n, q, None).0);
        for d in 0..4 {
            jac[(k, col + d)] = e[d];
        }
        e
    }

    /// The Euler parameters and rates of entry `k` of `euler` in `(q, v)`.
    pub(super) fn euler_of(
        &self,
        k: usize,
        q: &[f64],
        v: Option<&[f64]>,
    ) -> (Vector4<f64>, Vector4<f64>) {
        let a = self.euler[k].1;
        (
            kinematics::euler(q, a),
            v.map_or(Vector4::zeros(), |v| kinematics::euler(v, a)),
        )
    }

    pub(super) fn row_coord(
        sys: &System,
        row: usize,
    ) -> (&crate::mbs::kin::Coord, f64, Option<usize>) {
        match &sys.rows[row].kind {
            RowKind::Coord {
                coord,
                offset,
                motion,
            } => (coord, *offset, *motion),
            RowKind::Normalize { .. } => unreachable!("normalization rows are not joint rows"),
        }
    }

    /// `c` at the snapshot with its gradient as body wrenches (no `conv`).
    pub(super) fn wrenches(
        &self,
        sys: &System,
        c: &crate::mbs::kin::Coord,
        with_vel: bool,
    ) -> CoordWrenches {
        eval_coord_wrenches(
            sys.layout(),
            &self.ws.snap,
            c,
            &self.ws.refs,
            with_vel,
            false,
        )
    }

    /// `c` at the snapshot, computing what `need` names (`val`, `rate` always).
    pub(super) fn eval(
        &self,
        sys: &System,
        c: &crate::mbs::kin::Coord,
        with_vel: bool,
        need: Need,
    ) -> CoordVal {
        let v: Option<&[f64]> = if with_vel { Some(&[]) } else { None };
        eval_coord_need(sys.layout(), &self.ws.snap, c, &self.ws.refs, v, None, need)
    }

    pub fn constraints(&mut self, sys: &System, t: f64, q: &[f64], phi: &mut [f64]) {
        if self.active.is_empty() {
            return; // a tree: no rows, and no kinematics to load for them
        }
        self.load(sys, t, q, Rates::None);
        for (k, &a) in self.active.iter().enumerate() {
            phi[k] = match self.rows[a] {
                JRow::Element(r) => {
                    let (c, offset, motion) = Self::row_coord(sys, r);
                    let u = motion.map_or(0.0, |m| sys.motion(m, t)[0]);
                    self.eval(sys, c, false, Need::VALUE).val - offset - u
                }
                JRow::Norm(n) => 0.5 * (self.euler_of(n, q, None).0.norm_squared() - 1.0),
            };
        }
    }

    pub fn constraint_jacobian(&mut self, sys: &System, t: f64, q: &[f64], jac: &mut DMatrix<f64>) {
        if self.active.is_empty() {
            return; // a tree: no rows, and no kinematics to load for them
        }
        self.load(sys, t, q, Rates::None);
        jac.fill(0.0);
        for (k, &a) in self.active.iter().enumerate() {
            let r = match self.rows[a] {
                JRow::Element(r) => r,
                JRow::Norm(n) => {
                    self.norm_row(n, q, k, jac);
                    continue;
                }
            };
            let (c, _, _) = Self::row_coord(sys, r);
            let cw = self.wrenches(sys, c, false);
            for bw in &cw.bodies[..cw.n] {
                self.project_row(bw.body, &body_wrench(bw), k, jac);
            }
        }
    }

    /// The size of the active rows' gradients before they are summed over the bodies and
    /// projected on the joint axes: the largest entry of each body's `∂ξ/∂r` (the wrench's
    /// force) and of its moment about the body's centre of mass (`½E ∂ξ/∂e`, half the absolute
    /// formulation's `∂ξ/∂e` at unit Euler parameters), and of a normalization row's `e`. The
    /// absolute formulation's rank decisions are relative to these entries; a `G` row of a loop
    /// joint that is redundant on the tree is round-off of them and must be judged against
    /// them, not against itself ([`crate::mbs::assembly::independent_rows_scaled`]).
    pub(super) fn gradient_scale(&mut self, sys: &System, t: f64, q: &[f64]) -> f64 {
        if self.active.is_empty() {
            return 0.0;
        }
        self.load(sys, t, q, Rates::None);
        let mut scale = 0.0f64;
        for &a in &self.active {
            let r = match self.rows[a] {
                JRow::Element(r) => r,
                JRow::Norm(n) => {
                    scale = scale.max(self.euler_of(n, q, None).0.amax());
                    continue;
                }
            };
            let (c, _, _) = Self::row_coord(sys, r);
            let cw = self.wrenches(sys, c, false);
            for bw in &cw.bodies[..cw.n] {
                let com = self.ws.kin.com[self.body_node[bw.body]];
                let about_com = bw.moment - com.cross(&bw.force);
                scale = scale.max(bw.force.amax()).max(about_com.amax());
            }
        }
        scale
    }

    /// `Φ`, `G` and `∂g/∂t` in one pass over the rows (what the BDF residual reads at every
    /// evaluation): one recursion and one evaluation per row instead of three. The same
    /// values as [`JointModel::constraints`], [`JointModel::constraint_jacobian`] and
    /// [`JointModel::constraint_time_derivative`] (the wrenches do not depend on the rates,
    /// and the rate is formed in the same order).
    pub fn constraint_values_dense(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        phi: &mut [f64],
        jac: &mut DMatrix<f64>,
        phi_t: &mut [f64],
    ) {
        if self.active.is_empty() {
            return; // a tree: no rows, and no kinematics to load for them
        }
        jac.fill(0.0);
        self.constraint_rows(sys, t, q, phi, jac, phi_t);
    }

    /// [`JointModel::constraint_values_dense`] into a `jac` whose entries of the rows'
    /// pattern are zero (the sparse path zeroes only those).
    pub(super) fn constraint_rows(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        phi: &mut [f64],
        jac: &mut DMatrix<f64>,
        phi_t: &mut [f64],
    ) {
        let rates = if self.any_time_row(sys) {
            Rates::Rheonomic
        } else {
            Rates::None
        };
        self.load(sys, t, q, rates);
        for (k, &a) in self.active.iter().enumerate() {
            let r = match self.rows[a] {
                JRow::Element(r) => r,
                JRow::Norm(n) => {
                    let e = self.norm_row(n, q, k, jac);
                    phi[k] = 0.5 * (e.norm_squared() - 1.0);
                    phi_t[k] = 0.0;
                    continue;
                }
            };
            let (c, offset, motion) = Self::row_coord(sys, r);
            let u = motion.map_or([0.0; 3], |m| sys.motion(m, t));
            let time_row = self.ws.fast.time_rows[a];
            let cw = self.wrenches(sys, c, time_row);
            phi[k] = cw.val - offset - u[0];
            phi_t[k] = if time_row { cw.rate } else { 0.0 } - u[1];
            for bw in &cw.bodies[..cw.n] {
                self.project_row(bw.body, &body_wrench(bw), k, jac);
            }
        }
    }

    pub fn constraint_time_derivative(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        phi_t: &mut [f64],
    ) {
        if self.active.is_empty() {
            return;
        }
        if self.any_time_row(sys) {
            self.load(sys, t, q, Rates::Rheonomic);
        }
        for (k, &a) in self.active.iter().enumerate() {
            let JRow::Element(r) = self.rows[a] else {
                phi_t[k] = 0.0;
                continue;
            };
            let (c, _, motion) = Self::row_coord(sys, r);
            let du = motion.map_or(0.0, |m| sys.motion(m, t)[1]);
            let rate = if self.ws.fast.time_rows[a] {
                self.eval(sys, c, true, Need::VALUE).rate
            } else {
                0.0
            };
            phi_t[k] = rate - du;
        }
    }

    pub fn acceleration_rhs(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        gamma: &mut [f64],
    ) {
        if self.active.is_empty() {
            return;
        }
        self.load(sys, t, q, Rates::Full(v));
        for (k, &a) in self.active.iter().enumerate() {
            let r = match self.rows[a] {
                JRow::Element(r) => r,
                JRow::Norm(n) => {
                    gamma[k] = -self.euler_of(n, q, Some(v)).1.norm_squared();
                    continue;
                }
            };
            let (c, _, motion) = Self::row_coord(sys, r);
            let ddu = motion.map_or(0.0, |m| sys.motion(m, t)[2]);
            // ξ̈ = ∇ξ·q̈_abs + conv = ξ̈ at p̈ = 0 (the bodies' accelerations then) + G p̈.
            let kin = &self.ws.kin;
            let xi_dd = eval_coord_accel(sys.layout(), &self.ws.snap, c, &self.ws.refs, |b| {
                self.body_accel(kin, b)
            });
            gamma[k] = -xi_dd + ddu;
        }
    }

    /// `G` and `γ` in one pass over the rows (one recursion with the rates and one
    /// evaluation per row instead of two): the same values as
    /// [`JointModel::constraint_jacobian`] and [`JointModel::acceleration_rhs`].
    pub fn constraint_jacobian_and_rhs(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        jac: &mut DMatrix<f64>,
        gamma: &mut [f64],
    ) {
        if self.active.is_empty() {
            return;
        }
        self.load(sys, t, q, Rates::Full(v));
        jac.fill(0.0);
        for (k, &a) in self.active.iter().enumerate() {
            let r = match self.rows[a] {
                JRow::Element(r) => r,
                JRow::Norm(n) => {
                    self.norm_row(n, q, k, jac);
                    gamma[k] = -self.euler_of(n, q, Some(v)).1.norm_squared();
                    continue;
                }
            };
            let (c, _, motion) = Self::row_coord(sys, r);
            let ddu = motion.map_or(0.0, |m| sys.motion(m, t)[2]);
            let kin = &self.ws.kin;
            let (cw, xi_dd) =
                eval_coord_wrenches_accel(sys.layout(), &self.ws.snap, c, &self.ws.refs, |b| {
                    self.body_accel(kin, b)
                });
            gamma[k] = -xi_dd + ddu;
            for bw in &cw.bodies[..cw.n] {
                self.project_row(bw.body, &body_wrench(bw), k, jac);
            }
        }
    }

    pub fn row_labels(&self, sys: &System) -> Vec<String> {
        self.active
            .iter()
            .map(|&a| self.row_label(sys, a))
            .collect()
    }

    pub(super) fn row_label(&self, sys: &System, a: usize) -> String {
        match self.rows[a] {
            JRow::Element(r) => sys.rows[r].label.clone(),
            JRow::Norm(k) => {
                let n = &self.nodes[self.euler[k].0];
                let spec = sys.spec();
                match n.joint {
                    Some(j) => format!(
                        "joint '{}' Euler-parameter normalization",
                        spec.joints[j].name
                    ),
                    None => format!(
                        "body '{}' Euler-parameter normalization",
                        spec.bodies[n.body.expect("rotation nodes carry a body")].name
                    ),
                }
            }
        }
    }
}
