//! Loading a state into the workspace: the node values, the tree's forward recursion (spatial,
//! or planar-first for planar trees), the element layer's snapshot and the inertias, each
//! made once per state and reused while the state stays (a BDF residual asks for `M`, `Ψ`
//! and the rows at one state).

use super::kinematics::{Inertia, Kin, Sv};
use super::tree::{NodeCoord, NodeKind};
use super::{crba, planar};
use super::{JointModel, Rates};
use crate::mbs::math::e_mat;
use crate::mbs::system::System;
use nalgebra::{Matrix6, Vector3, Vector4};

impl JointModel {
    /// Run the recursion at `(t, q)` with the given rates and fill the element layer's
    /// snapshot.
    pub(super) fn load(&mut self, sys: &System, t: f64, q: &[f64], rates: Rates) {
        self.load_tree(sys, t, q, rates);
        self.fill_snapshot(sys, !matches!(rates, Rates::None));
    }

    /// [`JointModel::load`] without the element layer's snapshot: the recursion alone, which
    /// is all the mass matrix and the fast-path forces read (the snapshot's rates cost a
    /// matrix product per body). The snapshot then still describes an earlier state: only
    /// callers that read nothing of it use this.
    pub(super) fn load_tree(&mut self, sys: &System, t: f64, q: &[f64], rates: Rates) {
        self.load_tree_as(sys, t, q, rates, false);
    }

    /// [`JointModel::load_tree`]; with `planar_first`, a planar tree whose evaluation reads
    /// only the planar recursion (`planar_first_ok`) gets the planar quantities straight from
    /// the coordinates (`planar::PlanarRef`) and the spatial ones only when a later caller
    /// asks ([`JointModel::ensure_spatial`]). True when the planar-first load ran: the
    /// caller then reads `ws.planar` only (no `inertias`, no snapshot).
    pub(super) fn load_tree_as(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        rates: Rates,
        planar_first: bool,
    ) -> bool {
        // Planar-first only where `planar_first_ok` saw a plane and the reference.
        let planar = planar_first && self.planar_first_ok(sys);
        let (n, nf) = (self.nodes.len(), sys.frame_motions.len());
        let ws = &mut self.ws;
        if ws.kin.vel.len() != n || ws.kin.x.len() != self.n_dof || ws.kin.frame.len() != nf {
            ws.kin.resize(n, self.n_dof, nf);
            ws.snap.resize(sys.spec().bodies.len(), nf);
            ws.ib.resize(n, Inertia::ZERO);
            ws.i6.resize(n, Matrix6::zeros());
            ws.ic.resize(n, Inertia::ZERO);
            ws.f.resize(n, Sv::zeros());
            ws.w.resize(n, Sv::zeros());
            (ws.free_dofs, ws.driven_dofs) = (Vec::new(), Vec::new());
            for node in &self.nodes {
                match node.coord {
                    NodeCoord::None => {}
                    NodeCoord::Free(a) => {
                        ws.free_dofs.extend(node.dofs().zip(a..));
                    }
                    NodeCoord::Driven(slot) => ws.driven_dofs.push((node.dof, slot)),
                }
            }
        }
        // The node values in place, noting whether the pose and the rates change: `kin` holds
        // the last loaded pose, and the rates of the last computed motion (a load without
        // rates leaves them, and the free dofs' `ẍ` stay zero).
        let with_rates = !matches!(rates, Rates::None);
        let kin = &mut ws.kin;
        let (mut same_pose, mut same_motion) = (ws.pose_loaded, ws.motion_valid);
        for (f, slots) in sys.frame_motions.iter().enumerate() {
            let mut st = [Vector3::zeros(); 3];
            for k in 0..3 {
                let m = sys.motion(slots[k], t);
                for d in 0..3 {
                    st[d][k] = m[d];
                }
            }
            same_pose &= kin.frame[f][0] == st[0];
            kin.frame[f][0] = st[0];
            if with_rates {
                same_motion &= kin.frame[f][1..] == st[1..];
                kin.frame[f] = st;
            }
        }
        for &(d, a) in &ws.free_dofs {
            same_pose &= kin.x[d] == q[a];
            kin.x[d] = q[a];
            let xd = match rates {
                Rates::Full(v) => v[a],
                _ => 0.0,
            };
            same_motion &= kin.xd[d] == xd;
            if with_rates {
                kin.xd[d] = xd;
            }
        }
        for &(d, slot) in &ws.driven_dofs {
            let [u, ud, udd] = sys.motion(slot, t);
            same_pose &= kin.x[d] == u;
            kin.x[d] = u;
            same_motion &= kin.xd[d] == ud && kin.xdd[d] == udd;
            if with_rates {
                (kin.xd[d], kin.xdd[d]) = (ud, udd);
            }
        }
        if !same_pose {
            ws.spatial_pose = false;
            ws.spatial_motion = false;
            if !planar {
                ws.kin.positions(&self.nodes);
                ws.spatial_pose = true;
            }
            ws.pose_loaded = true;
            ws.inertia_valid = false;
            ws.motion_valid = false;
            ws.generation += 1;
            ws.pose_gen += 1;
        }
        if with_rates && !(same_motion && ws.motion_valid) {
            // (A new pose cleared `motion_valid`.)
            ws.spatial_motion = false;
            if !planar {
                self.ensure_spatial_pose();
                self.ws.kin.motion(&self.nodes);
                self.ws.spatial_motion = true;
            }
            self.ws.motion_valid = true;
            self.ws.generation += 1;
        }
        let ws = &mut self.ws;
        if let (true, Some(plane)) = (planar, &ws.fast.plane) {
            // The planar pose and motion straight from the coordinates, unless this state's
            // are there (made by an earlier planar-first load, or projected since from the
            // spatial ones), and with the rates the transmitted forces.
            let pose_key = Some((ws.pose_gen, ws.inertia_gen));
            let pose = ws.planar.key != pose_key;
            let stale = ws.planar.motion_key != Some(ws.generation);
            let kin = &ws.kin;
            let at = planar::PlanarAt {
                x: &kin.x,
                xd: &kin.xd,
                xdd: &kin.xdd,
                frames: &kin.frame,
                gravity: &sys.gravity,
            };
            let rates = with_rates.then_some(stale);
            let motion = ws.planar_ref.load(plane, at, pose, rates, &mut ws.planar);
            if pose {
                ws.planar.key = pose_key;
                ws.planar_first_poses += 1;
            }
            if motion {
                ws.planar.motion_key = Some(ws.generation);
            }
            return true;
        }
        self.ensure_spatial(with_rates);
        false
    }

    /// Whether the planar-first load may serve an evaluation of `M` and `Ψ`: a planar tree,
    /// the fast paths on, every force element on a tree coordinate, no tires or friction
    /// contacts (those read the snapshot). Decides the plane and builds the reference data
    /// when the bodies changed (both at the model's reference pose, [`JointModel::check_plane`]).
    pub(super) fn planar_first_ok(&mut self, sys: &System) -> bool {
        if self.ws.general_only {
            return false;
        }
        if !(self.ws.fast.built && self.ws.fast.plane_checked) {
            self.check_plane(sys);
        }
        let (true, Some(_)) = (self.ws.fast.planar_first, &self.ws.fast.plane) else {
            return false;
        };
        if self.ws.planar_ref.key != Some(sys.bodies_id) {
            // At the reference pose, not at a loaded one: the planar-first load equals the
            // spatial recursion only to round-off, and a reference taken at whatever pose came
            // first made every later answer depend on the instance's history (a deserialized
            // FMU state did not continue bit for bit).
            let kin = self.reference_pose(sys);
            let ws = &mut self.ws;
            let Some(plane) = &ws.fast.plane else {
                return false;
            };
            ws.planar_ref.build(
                sys.bodies_id,
                plane,
                &self.nodes,
                &kin.x,
                &kin.s,
                &kin.rot,
                |b| (sys.bodies[b].mass, sys.bodies[b].inertia),
            );
            // New body data (or gravity) with the pose unchanged: what the planar-first
            // load made from the old is stale.
            ws.planar.key = None;
            ws.planar.motion_key = None;
        }
        true
    }

    /// Builds the fast paths if needed and decides once whether the tree moves in a plane
    /// (`ws.fast.plane`) and the planar-first load may serve it. The plane comes from the
    /// reference pose, not from the first loaded one, for the reason in `planar_first_ok`;
    /// deciding it here also lets the first evaluation after an instantiation or a restored
    /// (deserialized) FMU state take the planar-first load as every later one does.
    #[cold]
    pub(super) fn check_plane(&mut self, sys: &System) {
        self.ensure_fast(sys);
        if self.ws.fast.plane_checked {
            return;
        }
        let n_q = self.n_q();
        // Exactly parallel axes in the model give parallel axes to round-off.
        let plane = planar::Plane::detect(&self.nodes, &self.reference_pose(sys).s, 1e-12);
        let fast = &mut self.ws.fast;
        fast.plane = plane;
        fast.plane_checked = true;
        fast.planar_first = fast.plane.is_some()
            && fast.all_terms
            && sys.tires.is_empty()
            && sys.contact_friction.is_empty();
        self.ws.planar.layout(&self.nodes, n_q);
    }

    /// The spatial poses at a pose fixed by the model alone: every dof value zero (Euler
    /// parameters the identity), the moving frames at the origin. In a separate `Kin`: the
    /// loaded pose's caches in `ws.kin` stay as they are.
    fn reference_pose(&self, sys: &System) -> Kin {
        let mut kin = Kin::default();
        kin.resize(self.nodes.len(), self.n_dof, sys.frame_motions.len());
        for node in &self.nodes {
            if node.kind == NodeKind::Spherical {
                kin.x[node.dof] = 1.0;
            }
        }
        kin.positions(&self.nodes);
        kin
    }

    /// The spatial poses (and with `motion` the velocities) of the loaded state in `kin`,
    /// made now if a planar-first load left them out.
    #[inline]
    pub(super) fn ensure_spatial(&mut self, motion: bool) {
        self.ensure_spatial_pose();
        if motion && !self.ws.spatial_motion {
            self.ws.kin.motion(&self.nodes);
            self.ws.spatial_motion = true;
        }
    }

    #[inline]
    fn ensure_spatial_pose(&mut self) {
        if !self.ws.spatial_pose {
            self.ws.kin.positions(&self.nodes);
            self.ws.spatial_pose = true;
        }
    }

    /// The element layer's snapshot (bodies' poses and velocities) from the recursion of the
    /// last [`JointModel::load_tree`] (`with_vel` as its rates were given), and the angle
    /// references it is read with (`Workspace::refs`; always, as an accepted step moves the
    /// system's without a new pose).
    pub(super) fn fill_snapshot(&mut self, sys: &System, with_vel: bool) {
        self.ensure_spatial(with_vel);
        self.ensure_fast(sys);
        let ws = &mut self.ws;
        let mut refs = std::mem::take(&mut ws.refs);
        refs.clear();
        refs.extend(
            (0..sys.angle_refs.len()).map(|s| ws.tree_angle(s).unwrap_or(sys.angle_refs[s])),
        );
        ws.refs = refs;
        if ws.snap_key == Some((ws.generation, with_vel)) {
            return;
        }
        ws.snap_key = Some((ws.generation, with_vel));
        for (sf, kf) in ws.snap.frame.iter_mut().zip(&ws.kin.frame) {
            // No velocities: the moving frames' rates must not leak into `rate`.
            *sf = if with_vel {
                *kf
            } else {
                [kf[0], Vector3::zeros(), Vector3::zeros()]
            };
        }
        for (i, node) in self.nodes.iter().enumerate() {
            let Some(b) = node.body else {
                continue;
            };
            ws.snap.r[b] = ws.kin.com[i];
            ws.snap.p[b] = ws.kin.e[i];
            ws.snap.a[b] = ws.kin.rot[i];
            if with_vel {
                let (w, vc) = ws.kin.body_velocity(i);
                ws.snap.rd[b] = vc;
                ws.snap.pd[b] = 0.5 * e_mat(&ws.kin.e[i]).transpose() * w;
            } else {
                ws.snap.rd[b] = Vector3::zeros();
                ws.snap.pd[b] = Vector4::zeros();
            }
        }
    }

    /// Body spatial inertias at the current poses, and the composite inertias of the CRBA.
    pub(super) fn inertias(&mut self, sys: &System) {
        self.ensure_spatial_pose();
        let ws = &mut self.ws;
        if ws.inertia_valid && ws.inertia_key == sys.bodies_id {
            return;
        }
        ws.inertia_key = sys.bodies_id;
        ws.inertia_valid = true;
        ws.inertia_gen += 1;
        for (i, node) in self.nodes.iter().enumerate() {
            let Some(b) = node.body else {
                // The massless node of a free body's translations.
                self.ws.ib[i] = Inertia::ZERO;
                continue;
            };
            let bd = &sys.bodies[b];
            let a = self.ws.kin.rot[i];
            let ib = Inertia::of_body(
                bd.mass,
                &self.ws.kin.com[i],
                &(a * bd.inertia * a.transpose()),
            );
            self.ws.ib[i] = ib;
        }
        crba::composite_inertias(&self.nodes, &self.ws.ib, &mut self.ws.ic);
    }

    /// The body inertias as 6 × 6 matrices (`ws.i6`, for the Jacobians' tangents, which
    /// multiply them by many vectors), after [`JointModel::inertias`]; the evaluations
    /// themselves use the compact form.
    pub(super) fn inertia_matrices(&mut self) {
        let ws = &mut self.ws;
        if ws.i6_gen != ws.inertia_gen {
            for (m, ib) in ws.i6.iter_mut().zip(&ws.ib) {
                *m = ib.matrix();
            }
            ws.i6_gen = ws.inertia_gen;
        }
    }
}
