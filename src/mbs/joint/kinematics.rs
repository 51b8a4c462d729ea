//! Forward recursion: body poses, spatial velocities and (bias) accelerations from the joint
//! coordinates, root to leaves.
//!
//! Spatial vectors are 6-vectors `[angular; linear]` in the world frame, referred to the
//! world origin (Featherstone's fixed-frame form): a body's velocity `V = [ω; v_O]` with `v_O`
//! the velocity of the body-fixed point at the origin. No coordinate transforms are needed
//! between bodies, so the composite inertias of [`super::crba`] and the forces of
//! [`super::rnea`] simply add up the tree.

use super::super::math::rot;
use super::tree::{Node, NodeKind, Parent};
use nalgebra::{Matrix3, Matrix6, UnitQuaternion, Vector3, Vector4, Vector6};

/// A spatial vector `[angular; linear]` (world frame, at the origin).
pub type Sv = Vector6<f64>;

fn ang(v: &Sv) -> Vector3<f64> {
    Vector3::new(v[0], v[1], v[2])
}
fn lin(v: &Sv) -> Vector3<f64> {
    Vector3::new(v[3], v[4], v[5])
}
pub fn sv(a: &Vector3<f64>, l: &Vector3<f64>) -> Sv {
    Sv::new(a.x, a.y, a.z, l.x, l.y, l.z)
}

/// Motion cross motion `v ×ₘ m`.
pub fn crm(v: &Sv, m: &Sv) -> Sv {
    let (w, u) = (ang(v), lin(v));
    let (ma, ml) = (ang(m), lin(m));
    sv(&w.cross(&ma), &(u.cross(&ma) + w.cross(&ml)))
}

/// Motion cross force `v ×* f`.
pub fn crf(v: &Sv, f: &Sv) -> Sv {
    let (w, u) = (ang(v), lin(v));
    let (n, fl) = (ang(f), lin(f));
    sv(&(w.cross(&n) + u.cross(&fl)), &w.cross(&fl))
}

/// Spatial inertia at the world origin of a body with mass `m`, centre of mass `c` and
/// rotational inertia `j` about the centre (world axes).
pub fn spatial_inertia(m: f64, c: &Vector3<f64>, j: &Matrix3<f64>) -> Matrix6<f64> {
    let cx = super::super::math::skew(c);
    let mut out = Matrix6::zeros();
    out.fixed_view_mut::<3, 3>(0, 0)
        .copy_from(&(j + m * cx * cx.transpose()));
    out.fixed_view_mut::<3, 3>(0, 3).copy_from(&(m * cx));
    out.fixed_view_mut::<3, 3>(3, 0)
        .copy_from(&(m * cx.transpose()));
    out.fixed_view_mut::<3, 3>(3, 3)
        .copy_from(&(m * Matrix3::identity()));
    out
}

/// Per-node kinematic workspace (node `i` carries body `nodes[i].body`).
#[derive(Debug, Clone, Default)]
pub struct Kin {
    pub quat: Vec<UnitQuaternion<f64>>,
    /// Euler parameters of the body (the element layer's `p`).
    pub e: Vec<Vector4<f64>>,
    pub rot: Vec<Matrix3<f64>>,
    pub com: Vec<Vector3<f64>>,
    /// Motion subspace (zero for fixed joints).
    pub s: Vec<Sv>,
    pub vel: Vec<Sv>,
    /// Acceleration with the state coordinates' accelerations zero (drivers' `ü` and moving
    /// frames' accelerations included; gravity not).
    pub acc: Vec<Sv>,
    /// Moving frames: position, velocity, acceleration.
    pub frame: Vec<[Vector3<f64>; 3]>,
    /// Node coordinate value, rate and acceleration (0 for fixed joints).
    pub x: Vec<f64>,
    pub xd: Vec<f64>,
    pub xdd: Vec<f64>,
}

impl Kin {
    pub fn resize(&mut self, n: usize, n_frames: usize) {
        self.quat.resize(n, UnitQuaternion::identity());
        self.e.resize(n, Vector4::new(1.0, 0.0, 0.0, 0.0));
        self.rot.resize(n, Matrix3::identity());
        self.com.resize(n, Vector3::zeros());
        self.s.resize(n, Sv::zeros());
        self.vel.resize(n, Sv::zeros());
        self.acc.resize(n, Sv::zeros());
        self.frame.resize(n_frames, [Vector3::zeros(); 3]);
        self.x.resize(n, 0.0);
        self.xd.resize(n, 0.0);
        self.xdd.resize(n, 0.0);
    }

    /// World pose of a parent: rotation and position of its body frame (ground and moving
    /// frames do not rotate).
    fn parent_pose(&self, p: Parent) -> (UnitQuaternion<f64>, Matrix3<f64>, Vector3<f64>) {
        match p {
            Parent::Ground => (
                UnitQuaternion::identity(),
                Matrix3::identity(),
                Vector3::zeros(),
            ),
            Parent::Frame(f) => (
                UnitQuaternion::identity(),
                Matrix3::identity(),
                self.frame[f][0],
            ),
            Parent::Node(k) => (self.quat[k], self.rot[k], self.com[k]),
        }
    }

    fn parent_motion(&self, p: Parent) -> (Sv, Sv) {
        match p {
            Parent::Ground => (Sv::zeros(), Sv::zeros()),
            Parent::Frame(f) => (
                sv(&Vector3::zeros(), &self.frame[f][1]),
                sv(&Vector3::zeros(), &self.frame[f][2]),
            ),
            Parent::Node(k) => (self.vel[k], self.acc[k]),
        }
    }

    /// Poses and motion subspaces from `x` (and `frame`).
    pub fn positions(&mut self, nodes: &[Node]) {
        for (i, n) in nodes.iter().enumerate() {
            let (qp, ap, rp) = self.parent_pose(n.parent);
            let q_pf = qp * n.q_parent_frame;
            let o_pf = rp + ap * n.parent_frame.origin;
            let z = q_pf * Vector3::z();
            let (q_cf, o_cf, s) = match n.kind {
                NodeKind::Revolute => {
                    let qj =
                        UnitQuaternion::from_axis_angle(&Vector3::z_axis(), n.sigma * self.x[i]);
                    let a = n.sigma * z;
                    (q_pf * qj, o_pf, sv(&a, &o_pf.cross(&a)))
                }
                NodeKind::Prismatic => (
                    q_pf,
                    o_pf + n.sigma * self.x[i] * z,
                    sv(&Vector3::zeros(), &(n.sigma * z)),
                ),
                NodeKind::Fixed => (q_pf, o_pf, Sv::zeros()),
            };
            let q = q_cf * n.q_child_frame_inv;
            let e = Vector4::new(q.w, q.i, q.j, q.k);
            let a = rot(&e);
            self.quat[i] = q;
            self.e[i] = e;
            self.rot[i] = a;
            self.com[i] = o_cf - a * n.child_frame.origin;
            self.s[i] = s;
        }
    }

    /// Spatial velocities and bias accelerations from `xd`, `xdd` (after [`Kin::positions`]).
    pub fn motion(&mut self, nodes: &[Node]) {
        for (i, n) in nodes.iter().enumerate() {
            let (vp, ap) = self.parent_motion(n.parent);
            let sxd = self.s[i] * self.xd[i];
            let v = vp + sxd;
            self.vel[i] = v;
            // Ṡ = V ×ₘ S for a joint axis fixed in the parent (V_parent × S = V × S).
            self.acc[i] = ap + self.s[i] * self.xdd[i] + crm(&v, &sxd);
        }
    }

    /// Angular velocity and centre-of-mass velocity of node `i`'s body.
    pub fn body_velocity(&self, i: usize) -> (Vector3<f64>, Vector3<f64>) {
        let w = ang(&self.vel[i]);
        (w, lin(&self.vel[i]) + w.cross(&self.com[i]))
    }

    /// Angular and centre-of-mass accelerations of node `i`'s body (from `acc`).
    pub fn body_acceleration(&self, i: usize) -> (Vector3<f64>, Vector3<f64>) {
        let (w, vc) = self.body_velocity(i);
        let wd = ang(&self.acc[i]);
        (
            wd,
            lin(&self.acc[i]) + wd.cross(&self.com[i]) + w.cross(&vc),
        )
    }
}
