//! The absolute view: the equivalent absolute state for the element layer's outputs, events
//! and step hooks, the joint coordinates of an absolute state, and the initial state.

use super::tree;
use super::tree::{NodeCoord, Parent};
use super::{JointModel, Rates};
use crate::integrate::MechState;
use crate::mbs::math::e_mat;
use crate::mbs::spec::Initialization;
use crate::mbs::system::{AssemblyReport, BodyChanges, Law, System};
use crate::mbs::ModelError;
use nalgebra::{DMatrix, DVector, Vector3, Vector4};

impl JointModel {
    /// The equivalent absolute state `(q, v)` of the element layer.
    pub fn to_absolute(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: Option<&[f64]>,
    ) -> (Vec<f64>, Vec<f64>) {
        self.fill_absolute(sys, t, q, v);
        (self.ws.abs_q.clone(), self.ws.abs_v.clone())
    }

    /// The equivalent absolute positions, borrowed from the workspace (no allocation).
    pub fn absolute_positions(&mut self, sys: &System, t: f64, q: &[f64]) -> &[f64] {
        self.fill_absolute(sys, t, q, None);
        &self.ws.abs_q
    }

    /// [`Self::to_absolute`] into `ws.abs_q`, `ws.abs_v` (no allocation once sized).
    pub(super) fn fill_absolute(&mut self, sys: &System, t: f64, q: &[f64], v: Option<&[f64]>) {
        self.load(sys, t, q, v.map_or(Rates::None, Rates::Full));
        let layout = sys.layout();
        let (qa, va) = (&mut self.ws.abs_q, &mut self.ws.abs_v);
        qa.resize(layout.n_q, 0.0);
        va.resize(layout.n_q, 0.0);
        let s = &self.ws.snap;
        for b in 0..layout.offsets.len() {
            let o = layout.offsets[b];
            qa[o..o + 3].copy_from_slice(s.r[b].as_slice());
            va[o..o + 3].copy_from_slice(s.rd[b].as_slice());
            if layout.is_rigid(b) {
                qa[o + 3..o + 7].copy_from_slice(s.p[b].as_slice());
                va[o + 3..o + 7].copy_from_slice(s.pd[b].as_slice());
            }
        }
    }

    /// Joint coordinates and rates of an absolute state (tree joints only). A revolute angle
    /// is the element layer's continuous one (its branch reference `sys.angle_refs` at that
    /// state); the other angles are in (−π, π].
    fn coordinates_of(&self, sys: &System, t: f64, qa: &[f64], va: &[f64]) -> (Vec<f64>, Vec<f64>) {
        use nalgebra::{Matrix3, UnitQuaternion};
        let layout = sys.layout();
        // Per body: rotation, centre of mass, angular velocity, centre-of-mass velocity.
        let body = |b: usize| {
            let o = layout.offsets[b];
            let r = Vector3::new(qa[o], qa[o + 1], qa[o + 2]);
            let rd = Vector3::new(va[o], va[o + 1], va[o + 2]);
            if !layout.is_rigid(b) {
                return (Matrix3::identity(), r, Vector3::zeros(), rd);
            }
            let e = Vector4::new(qa[o + 3], qa[o + 4], qa[o + 5], qa[o + 6]);
            let ed = Vector4::new(va[o + 3], va[o + 4], va[o + 5], va[o + 6]);
            (crate::mbs::math::rot(&e), r, 2.0 * e_mat(&e) * ed, rd)
        };
        let frame = |f: usize| {
            let slots = sys.frame_motions[f];
            let (mut x, mut xd) = (Vector3::zeros(), Vector3::zeros());
            for k in 0..3 {
                let m = sys.motion(slots[k], t);
                x[k] = m[0];
                xd[k] = m[1];
            }
            (x, xd)
        };
        // Per node: the pose and motion of the frame it carries (a free body's massless
        // translation node: its body's centre of mass, not rotating).
        let mut state = Vec::with_capacity(self.nodes.len());
        for (i, n) in self.nodes.iter().enumerate() {
            state.push(match n.body {
                Some(b) => body(b),
                None => {
                    let child = self.nodes[i + 1..]
                        .iter()
                        .find(|c| c.parent == Parent::Node(i))
                        .and_then(|c| c.body)
                        .expect("a free body's rotation node follows its translation node");
                    let (_, r, _, rd) = body(child);
                    (Matrix3::identity(), r, Vector3::zeros(), rd)
                }
            });
        }
        let (mut p, mut pd) = (vec![0.0; self.n_q()], vec![0.0; self.n_q()]);
        for (i, n) in self.nodes.iter().enumerate() {
            let NodeCoord::Free(a) = n.coord else {
                continue;
            };
            // Parent: rotation, position, angular velocity, velocity of the body origin.
            let (ap, rp, wp, vp) = match n.parent {
                Parent::Ground => (
                    Matrix3::identity(),
                    Vector3::zeros(),
                    Vector3::zeros(),
                    Vector3::zeros(),
                ),
                Parent::Frame(f) => {
                    let (x, xd) = frame(f);
                    (Matrix3::identity(), x, Vector3::zeros(), xd)
                }
                Parent::Node(k) => state[k],
            };
            let (ac, rc, wc, vc) = state[i];
            let (apf, acf) = (ap * n.parent_frame.axes, ac * n.child_frame.axes);
            let o_pf = rp + ap * n.parent_frame.origin;
            let o_cf = rc + ac * n.child_frame.origin;
            let z = apf.column(2).into_owned();
            let v_pf = vp + wp.cross(&(o_pf - rp));
            let v_cf = vc + wc.cross(&(o_cf - rc));
            match n.kind {
                tree::NodeKind::Revolute => {
                    let (x1, y1, x2) = if n.sigma > 0.0 {
                        (apf.column(0), apf.column(1), acf.column(0))
                    } else {
                        (acf.column(0), acf.column(1), apf.column(0))
                    };
                    // On the branch the element layer tracked through the assembly and the
                    // static equilibrium (from `θ0`): `atan2` alone wrapped an equilibrium past
                    // ±π into (−π, π], 2π from where the springs on the joint measure it.
                    let raw = y1.dot(&x2).atan2(x1.dot(&x2));
                    p[a] = match n.joint.and_then(|j| sys.joint_coords[j]) {
                        Some(crate::mbs::kin::Coord::Angle { slot, .. }) => {
                            crate::mbs::math::unwrap_near(raw, sys.angle_refs[slot])
                        }
                        _ => raw,
                    };
                    pd[a] = n.sigma * z.dot(&(wc - wp));
                }
                tree::NodeKind::Prismatic => {
                    p[a] = n.sigma * z.dot(&(o_cf - o_pf));
                    pd[a] = n.sigma * z.dot(&(v_cf - v_pf));
                }
                tree::NodeKind::Spherical => {
                    // Child joint frame relative to the parent joint frame; `ė = ½ Eᵀ ω`
                    // with `ω` in the parent joint frame.
                    let rel = apf.transpose() * acf;
                    let qr = UnitQuaternion::from_rotation_matrix(
                        &nalgebra::Rotation3::from_matrix_unchecked(rel),
                    );
                    let e = Vector4::new(qr.w, qr.i, qr.j, qr.k);
                    let ed = 0.5 * e_mat(&e).transpose() * (apf.transpose() * (wc - wp));
                    p[a..a + 4].copy_from_slice(e.as_slice());
                    pd[a..a + 4].copy_from_slice(ed.as_slice());
                }
                tree::NodeKind::Translation => {
                    // The parent (ground) does not rotate.
                    let x = apf.transpose() * (o_cf - o_pf);
                    let xd = apf.transpose() * (v_cf - v_pf);
                    p[a..a + 3].copy_from_slice(x.as_slice());
                    pd[a..a + 3].copy_from_slice(xd.as_slice());
                }
                tree::NodeKind::Fixed => {}
                tree::NodeKind::Cylindrical
                | tree::NodeKind::Universal
                | tree::NodeKind::Planar
                | tree::NodeKind::PlanarTranslation => {
                    // Frame 2 relative to frame 1 whichever way the tree runs (the joint's own
                    // coordinates).
                    let ((a1, o1, v1, w1), (a2, o2, v2, w2)) = {
                        let (pa, ca) = ((apf, o_pf, v_pf, wp), (acf, o_cf, v_cf, wc));
                        if n.sigma > 0.0 {
                            (pa, ca)
                        } else {
                            (ca, pa)
                        }
                    };
                    let d = o2 - o1;
                    // Travels along frame 1's axes and their rates (frame 1 turns with w1).
                    let x = a1.transpose() * d;
                    let xd = a1.transpose() * (v2 - v1 - w1.cross(&d));
                    let angle = a1
                        .column(1)
                        .dot(&a2.column(0))
                        .atan2(a1.column(0).dot(&a2.column(0)));
                    let w = a1.transpose() * (w2 - w1);
                    let (vals, rates): (Vec<f64>, Vec<f64>) = match n.kind {
                        tree::NodeKind::Cylindrical => (vec![x.z, angle], vec![xd.z, w.z]),
                        tree::NodeKind::Universal => {
                            let rel = a1.transpose() * a2;
                            let t1 = rel[(1, 0)].atan2(rel[(0, 0)]);
                            let t2 = rel[(2, 1)].atan2(rel[(2, 2)]);
                            // ω = θ̇₁ z + θ̇₂ Rz(θ₁) x in frame 1.
                            let t2d = w.x * t1.cos() + w.y * t1.sin();
                            (vec![t1, t2], vec![w.z, t2d])
                        }
                        tree::NodeKind::Planar => (vec![x.x, x.y, angle], vec![xd.x, xd.y, w.z]),
                        _ => (vec![x.x, x.y], vec![xd.x, xd.y]),
                    };
                    p[a..a + vals.len()].copy_from_slice(&vals);
                    pd[a..a + rates.len()].copy_from_slice(&rates);
                }
            }
        }
        (p, pd)
    }

    /// Consistent initial state: the absolute assembly (or static equilibrium) of the same
    /// model gives the bodies' poses; the tree coordinates are read off them, polished by
    /// Gauss–Newton on the loop constraints; redundant loop rows are dropped; velocities
    /// projected.
    pub fn initial_state(&mut self, sys: &mut System, t0: f64) -> Result<MechState, ModelError> {
        let xa = crate::mbs::assembly::initial_state_with(sys, t0, false)?;
        let (mut q, mut v) = self.coordinates_of(sys, t0, &xa.q, &xa.v);
        let nq = self.n_q();
        self.active = (0..self.rows.len()).collect();
        let all = self.rows.len();
        let mut phi = vec![0.0; all];
        let mut jac = DMatrix::zeros(all, nq);
        // The loop rows' gradients can cancel to round-off on the tree (a loop joint redundant
        // on it): rank decisions are relative to their size before that.
        let scale = self.gradient_scale(sys, t0, &q);
        for _ in 0..30 {
            self.constraints(sys, t0, &q, &mut phi);
            if phi.iter().all(|x| x.abs() < 1e-12) {
                break;
            }
            self.constraint_jacobian(sys, t0, &q, &mut jac);
            let dq = crate::mbs::assembly::pinv_solve_scaled(
                &jac,
                &DVector::from_column_slice(&phi),
                scale,
            );
            q.iter_mut().zip(dq.iter()).for_each(|(x, d)| *x -= d);
        }
        self.constraint_jacobian(sys, t0, &q, &mut jac);
        let (keep, drop) = crate::mbs::assembly::independent_rows_scaled(&jac, scale);
        let dropped: Vec<String> = drop.iter().map(|&i| self.row_label(sys, i)).collect();
        self.active = keep;
        self.ws.j_pat.clear();
        if sys.spec().initialization == Initialization::Static {
            v.iter_mut().for_each(|x| *x = 0.0);
        }
        let nc = self.n_c();
        if nc > 0 {
            let mut g = DMatrix::zeros(nc, nq);
            let mut phi_t = vec![0.0; nc];
            self.constraint_jacobian(sys, t0, &q, &mut g);
            self.constraint_time_derivative(sys, t0, &q, &mut phi_t);
            let res = &g * DVector::from_column_slice(&v) + DVector::from_vec(phi_t);
            let dv = crate::mbs::assembly::pinv_solve(&g, &res);
            v.iter_mut().zip(dv.iter()).for_each(|(x, d)| *x -= d);
        }
        let mut phi = vec![0.0; nc];
        self.constraints(sys, t0, &q, &mut phi);
        let (qa, va) = self.to_absolute(sys, t0, &q, Some(&v));
        sys.track_angles(&qa, t0);
        let (_, lambda) = self.accelerations(sys, t0, &q, &v)?;
        // The absolute assembly (or static equilibrium) this start was read off moved the
        // bodies; keep what it reported about the file's state and the equilibrium, and measure
        // what changed on the bodies' poses and velocities the joint state stands for (the
        // joint coordinates are read off the assembled state, so comparing them would show no
        // change at all).
        let prior = sys.report.clone().unwrap_or_default();
        let (q_file, v_file) = sys.initial_guess();
        let assembly = if prior.static_iterations.is_some() {
            let rest = vec![0.0; va.len()];
            let vel = crate::mbs::assembly::body_changes(sys, (&qa, &qa), (&qa, &rest), (&qa, &va));
            BodyChanges {
                velocity: vel.velocity,
                angular_velocity: vel.angular_velocity,
                ..prior.assembly
            }
        } else {
            crate::mbs::assembly::body_changes(sys, (&q_file, &qa), (&q_file, &v_file), (&qa, &va))
        };
        sys.report = Some(AssemblyReport {
            body_moves: prior.body_moves,
            static_iterations: prior.static_iterations,
            n_coordinates: nq,
            n_equations: all,
            n_independent: nc,
            dof: nq - nc,
            dropped,
            initial_residual: prior.initial_residual,
            assembly,
            final_residual: phi.iter().fold(0.0, |m, x| m.max(x.abs())),
        });
        Ok(MechState {
            t: t0,
            q,
            v,
            lambda,
        })
    }

    /// Outputs through the absolute element layer at the equivalent absolute state.
    pub fn evaluate_outputs(
        &mut self,
        sys: &mut System,
        x: &MechState,
        out: &mut [f64],
    ) -> Result<(), ModelError> {
        self.ensure_fast(sys);
        let fast = &self.ws.fast;
        let drivers_only = !self.ws.general_only
            && self.euler.is_empty()
            && sys.spec().outputs.iter().all(|o| match o.quantity {
                crate::mbs::spec::OutputQuantity::DriverForce { driver } => {
                    fast.drivers[driver].is_some()
                }
                ref q => !crate::mbs::system::output_needs_dynamics(q),
            });
        if !drivers_only {
            let (q, v) = self.to_absolute(sys, x.t, &x.q, Some(&x.v));
            let xa = MechState {
                t: x.t,
                q,
                v,
                lambda: Vec::new(),
            };
            return sys.evaluate_outputs(&xa, out);
        }
        // The only dynamic outputs are the forces of drivers on tree joints: the joint
        // formulation's inverse dynamics gives them without the absolute saddle point.
        if sys
            .spec()
            .outputs
            .iter()
            .any(|o| crate::mbs::system::output_needs_dynamics(&o.quantity))
        {
            self.driven_forces(sys, x.t, &x.q, &x.v)?;
        }
        // After the inverse dynamics, which loads other rates.
        self.fill_absolute(sys, x.t, &x.q, Some(&x.v));
        let ws = &mut self.ws;
        let (drivers, tau) = (&ws.fast.drivers, &ws.psi);
        // The snapshot is lent to the output code; its key is kept aside so that a panic
        // there (a bug, caught at the C boundary) cannot leave a stale snapshot marked valid.
        let key = ws.snap_key.take();
        sys.evaluate_outputs_given_drivers((x.t, &ws.abs_q, &ws.abs_v), &mut ws.snap, out, |d| {
            drivers[d].map_or(f64::NAN, |k| tau[k])
        });
        ws.snap_key = key;
        Ok(())
    }

    pub fn event_functions(&mut self, sys: &mut System, t: f64, q: &[f64], g: &mut [f64]) {
        self.fill_absolute(sys, t, q, None);
        let qa = std::mem::take(&mut self.ws.abs_q);
        crate::integrate::events::EventFunctions::event_functions(sys, t, &qa, g);
        self.ws.abs_q = qa;
    }

    /// Angle branches (and, with friction, the normal forces from the absolute reactions) at
    /// an accepted step.
    pub fn accept_step(&mut self, sys: &mut System, t: f64, q: &[f64], v: &[f64]) {
        let friction_acts = self.has_friction
            && sys
                .terms
                .iter()
                .any(|t| matches!(t.law, Law::Friction { mu, .. } if mu != 0.0));
        if !self.ws.general_only && !friction_acts && !sys.has_stick_states() {
            // Only the angle branches to track: from the joint formulation's own poses (no
            // absolute state), the tree joints' angles from their coordinates. With the rates:
            // a co-simulation evaluates its outputs at the step that lands on the
            // communication point, which then finds the whole snapshot made.
            self.ensure_fast(sys);
            self.load(sys, t, q, Rates::Full(v));
            sys.track_angles_from(&self.ws.snap, t, |s| self.ws.tree_angle(s));
            return;
        }
        let (qa, va) = self.to_absolute(sys, t, q, Some(v));
        // The multipliers feed the friction elements' normal forces only; with every μ zero
        // (the slider-crank's default) the absolute saddle-point solve per accepted step is
        // skipped (it was 46 % of the joint slider-crank's time through the FMU).
        let lambda = if friction_acts {
            sys.accelerations(t, &qa, &va).ok().map(|x| x.1)
        } else {
            None
        };
        crate::integrate::system::StepHooks::accept_step(sys, t, &qa, &va, lambda.as_deref());
        // The tree joints' own angles from their coordinates (`track_angles_from`).
        self.ensure_fast(sys);
        for (s, r) in sys.angle_refs.iter_mut().enumerate() {
            if let Some(x) = self.ws.tree_angle(s) {
                *r = x;
            }
        }
    }
}
