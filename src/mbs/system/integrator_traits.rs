//! The integrators' view of the system: the traits of `integrate::system` (`Mechanical`,
//! `ForceJacobians`, `ConstraintHessians`, `Excitations`, `StepHooks`). Each method answers in
//! absolute coordinates, or hands over to the joint formulation when the model selected it.

use super::{RowKind, System};
use crate::integrate::sparse::SparseStructure;
use crate::integrate::system::{
    ConstraintHessians, Excitations, ForceJacobians, Mechanical, StepHooks,
};
use crate::mbs::kin::{LMat, Need};
use crate::mbs::math::g_mat;
use nalgebra::{DMatrix, Matrix4, Vector4};

impl Mechanical for System {
    fn n_q(&self) -> usize {
        match &self.joint {
            Some(j) => j.n_q(),
            None => self.layout.n_q,
        }
    }
    fn sparse_structure(&mut self) -> Option<&mut dyn SparseStructure> {
        // The joint formulation answers in joint coordinates (`joint/sparse.rs`), when its
        // mass matrix falls into blocks.
        if let Some(j) = self.joint.as_mut() {
            if !j.has_sparse_structure() {
                return None;
            }
        }
        Some(self)
    }
    fn n_c(&self) -> usize {
        match &self.joint {
            Some(j) => j.n_c(),
            None => self.active.len(),
        }
    }

    fn mass_matrix(&mut self, _t: f64, q: &[f64], m: &mut DMatrix<f64>) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.mass_matrix(s, _t, q, m));
        }
        m.fill(0.0);
        for b in 0..self.bodies.len() {
            let o = self.layout.offsets[b];
            let bd = &self.bodies[b];
            for k in 0..3 {
                m[(o + k, o + k)] = bd.mass;
            }
            if self.layout.is_rigid(b) {
                let p = Vector4::new(q[o + 3], q[o + 4], q[o + 5], q[o + 6]);
                let g = g_mat(&p);
                let mp = 4.0 * g.transpose() * bd.inertia * g + bd.reg * p * p.transpose();
                m.view_mut((o + 3, o + 3), (4, 4)).copy_from(&mp);
            }
        }
    }

    fn unconstrained_accelerations(&mut self, t: f64, q: &[f64], v: &[f64], a: &mut [f64]) -> bool {
        self.joint.is_some() && self.with_joint(|j, s| j.unconstrained_accelerations(s, t, q, v, a))
    }

    fn forces(&mut self, t: f64, q: &[f64], v: &[f64], f: &mut [f64]) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.forces(s, t, q, v, f));
        }
        self.load(t, q, Some(v));
        f.fill(0.0);
        for b in 0..self.bodies.len() {
            let o = self.layout.offsets[b];
            let fg = self.bodies[b].mass * self.gravity;
            for k in 0..3 {
                f[o + k] += fg[k];
            }
            if self.layout.is_rigid(b) {
                let (qg, _, _) = self.gyro(b);
                for k in 0..4 {
                    f[o + 3 + k] += qg[k];
                }
            }
        }
        for i in 0..self.terms.len() {
            let cv = self.coord_need(&self.terms[i].coord, Some(v), Need::GRAD);
            let (force, _, _) = self.term_law(i, cv.val, cv.rate, t);
            if force != 0.0 {
                for (l, g) in cv.columns() {
                    f[g] += force * cv.grad[l];
                }
            }
        }
        self.add_tire_forces(t, f);
        self.add_contact_friction_forces(t, f);
    }

    fn constraints(&mut self, t: f64, q: &[f64], phi: &mut [f64]) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.constraints(s, t, q, phi));
        }
        self.load(t, q, None);
        for (k, &i) in self.active.iter().enumerate() {
            phi[k] = self.row_eval(&self.rows[i], t, None, q, Need::VALUE).0;
        }
    }

    fn constraint_jacobian(&mut self, t: f64, q: &[f64], jac: &mut DMatrix<f64>) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.constraint_jacobian(s, t, q, jac));
        }
        self.load(t, q, None);
        jac.fill(0.0);
        for (k, &i) in self.active.iter().enumerate() {
            self.row_eval(&self.rows[i], t, None, q, Need::GRAD)
                .1
                .scatter_row(k, jac);
        }
    }

    fn constraint_values(
        &mut self,
        t: f64,
        q: &[f64],
        phi: &mut [f64],
        jac: &mut DMatrix<f64>,
        phi_t: &mut [f64],
    ) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.constraint_values_dense(s, t, q, phi, jac, phi_t));
        }
        crate::integrate::system::constraint_values_by_parts(self, t, q, phi, jac, phi_t);
    }

    fn constraint_jacobian_and_rhs(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
        jac: &mut DMatrix<f64>,
        gamma: &mut [f64],
    ) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.constraint_jacobian_and_rhs(s, t, q, v, jac, gamma));
        }
        crate::integrate::system::constraint_jacobian_and_rhs_by_parts(self, t, q, v, jac, gamma);
    }

    fn saddle_residual(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
        x: &[f64],
        out: &mut [f64],
    ) -> bool {
        if self.joint.is_none() {
            return false; // the absolute formulation forms `K` (its rows carry no recursion)
        }
        self.with_joint(|j, s| j.saddle_residual(s, t, q, v, x, out));
        true
    }

    fn constraint_time_derivative(&mut self, t: f64, q: &[f64], phi_t: &mut [f64]) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.constraint_time_derivative(s, t, q, phi_t));
        }
        self.load(t, q, None);
        for (k, &i) in self.active.iter().enumerate() {
            phi_t[k] = self.row_eval(&self.rows[i], t, None, q, Need::VALUE).2;
        }
    }

    fn acceleration_rhs(&mut self, t: f64, q: &[f64], v: &[f64], gamma: &mut [f64]) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.acceleration_rhs(s, t, q, v, gamma));
        }
        self.load(t, q, Some(v));
        for (k, &i) in self.active.iter().enumerate() {
            gamma[k] = self.row_eval(&self.rows[i], t, Some(v), q, Need::ALL).3;
        }
    }
}

impl ForceJacobians for System {
    fn force_jacobians(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
        df_dq: &mut DMatrix<f64>,
        df_dv: &mut DMatrix<f64>,
    ) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.force_jacobians(s, t, q, v, df_dq, df_dv));
        }
        self.load(t, q, Some(v));
        df_dq.fill(0.0);
        df_dv.fill(0.0);
        let mut hess = LMat::zeros();
        for b in 0..self.bodies.len() {
            if self.layout.is_rigid(b) {
                let o = self.layout.offsets[b] + 3;
                let (_, dp, dpd) = self.gyro(b);
                df_dq.view_mut((o, o), (4, 4)).copy_from(&dp);
                df_dv.view_mut((o, o), (4, 4)).copy_from(&dpd);
            }
        }
        for i in 0..self.terms.len() {
            let cv = self.coord_hessian(&self.terms[i].coord, Some(v), &mut hess);
            let (force, f_xi, f_rate) = self.term_law(i, cv.val, cv.rate, t);
            if force == 0.0 && f_xi == 0.0 && f_rate == 0.0 {
                continue;
            }
            let vl = cv.gather(v);
            // ∂ξ̇/∂q = ∇²ξ v + ∇ξ_t
            let drate = hess * vl + cv.grad_t;
            let dq = cv.grad * (f_xi * cv.grad + f_rate * drate).transpose() + force * hess;
            let dv = f_rate * cv.grad * cv.grad.transpose();
            let (cols, n_cols) = cv.column_array();
            let cols = &cols[..n_cols];
            for &(li, gi) in cols {
                for &(lj, gj) in cols {
                    df_dq[(gi, gj)] += dq[(li, lj)];
                    df_dv[(gi, gj)] += dv[(li, lj)];
                }
            }
        }
        self.add_tire_jacobians(t, df_dq, df_dv);
        self.add_contact_friction_jacobians(t, df_dq, df_dv);
    }
}

impl ConstraintHessians for System {
    fn constraint_force_jacobian(
        &mut self,
        t: f64,
        q: &[f64],
        lambda: &[f64],
        out: &mut DMatrix<f64>,
    ) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.constraint_force_jacobian(s, t, q, lambda, out));
        }
        self.load(t, q, None);
        out.fill(0.0);
        let mut hess = LMat::zeros();
        for (k, &i) in self.active.iter().enumerate() {
            match &self.rows[i].kind {
                RowKind::Normalize { col } => {
                    for d in 0..4 {
                        out[(col + d, col + d)] += lambda[k];
                    }
                }
                RowKind::Coord { coord, .. } => {
                    let cv = self.coord_hessian(coord, None, &mut hess);
                    let (cols, n_cols) = cv.column_array();
                    let cols = &cols[..n_cols];
                    for &(li, gi) in cols {
                        for &(lj, gj) in cols {
                            out[(gi, gj)] += lambda[k] * hess[(li, lj)];
                        }
                    }
                }
            }
        }
    }

    fn mass_times_accel_jacobian(&mut self, _t: f64, q: &[f64], a: &[f64], out: &mut DMatrix<f64>) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.mass_times_accel_jacobian(s, _t, q, a, out));
        }
        out.fill(0.0);
        for b in 0..self.bodies.len() {
            if !self.layout.is_rigid(b) {
                continue;
            }
            let o = self.layout.offsets[b] + 3;
            let p = Vector4::new(q[o], q[o + 1], q[o + 2], q[o + 3]);
            let av = Vector4::new(a[o], a[o + 1], a[o + 2], a[o + 3]);
            let bd = &self.bodies[b];
            let g = g_mat(&p);
            let w = bd.inertia * g * av;
            // M_p a = 4 G(p)ᵀ J' G(p) a + c p pᵀ a;  ∂(G(p) a)/∂p = −G(a).
            let mut gt_w = Matrix4::zeros();
            for i in 0..4 {
                let mut ei = Vector4::zeros();
                ei[i] = 1.0;
                gt_w.set_column(i, &(g_mat(&ei).transpose() * w));
            }
            let d = 4.0 * gt_w
                + 4.0 * g.transpose() * bd.inertia * (-g_mat(&av))
                + bd.reg * (Matrix4::identity() * p.dot(&av) + p * av.transpose());
            out.view_mut((o, o), (4, 4)).copy_from(&d);
        }
    }
}

impl Excitations for System {
    fn n_excitations(&self) -> usize {
        self.excitation_slots.len()
    }
    fn excitation(&mut self, t: f64, i: usize) -> f64 {
        self.motion(self.excitation_slots[i], t)[0]
    }
    fn set_excitation_offset(&mut self, i: usize, delta: f64) {
        let slot = self.excitation_slots[i];
        self.motions[slot].offset = delta;
    }
    /// Joint coordinates: the driven coordinates and moving frames enter the recursion through
    /// `(u, u̇, ü)` separately (a translating suspension only through `ü`). Absolute
    /// coordinates: the value (`u̇`, `ü` enter only `Φ_t` and `γ`, whose `y`-derivatives the
    /// judged term of (26) has never needed there; keeping one order keeps the cost of (26)'s
    /// second derivatives at `n_u` Jacobians).
    fn excitation_orders(&self) -> usize {
        if self.joint.is_some() {
            3
        } else {
            1
        }
    }
    fn excitation_jet(&mut self, t: f64, i: usize) -> [f64; 3] {
        self.motion(self.excitation_slots[i], t)
    }
    fn set_excitation_jet_offset(&mut self, i: usize, delta: [f64; 3]) {
        let slot = self.excitation_slots[i];
        self.motions[slot].offset = delta[0];
        self.motions[slot].rate_offsets = [delta[1], delta[2]];
    }
}

impl StepHooks for System {
    fn accept_step(&mut self, t: f64, q: &[f64], v: &[f64], lambda: Option<&[f64]>) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.accept_step(s, t, q, v));
        }
        self.load(t, q, Some(v));
        let snap = std::mem::take(&mut self.snap);
        self.track_angles_from(&snap, t, |_| None);
        self.snap = snap;
        if let Some(l) = lambda {
            if l.len() == self.active.len() {
                self.scratch_lambda.clear();
                self.scratch_lambda.extend_from_slice(l);
                self.update_joint_normals(t, q);
            }
        }
        self.accept_stick(t, q, v);
        self.accept_contact_stick(t, q, v);
    }
    fn checkpoint(&mut self) {
        self.checkpoint_stick();
        self.contact_stick_backup.clone_from(&self.contact_stick);
    }
    fn rollback(&mut self) {
        self.rollback_stick();
        if self.contact_stick_backup.len() == self.contact_stick.len() {
            self.contact_stick
                .copy_from_slice(&self.contact_stick_backup);
        }
    }
    fn take_law_switch(&mut self) -> bool {
        std::mem::take(&mut self.law_switched)
    }
}
