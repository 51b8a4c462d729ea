//! Forward recursion: body poses, spatial velocities and (bias) accelerations from the joint
//! coordinates, root to leaves.
//!
//! Spatial vectors are 6-vectors `[angular; linear]` in the world frame, referred to the
//! world origin (Featherstone's fixed-frame form): a body's velocity `V = [ω; v_O]` with `v_O`
//! the velocity of the body-fixed point at the origin. No coordinate transforms are needed
//! between bodies, so the composite inertias of [`super::crba`] and the forces of
//! [`super::rnea`] simply add up the tree.

use super::super::math::{e_mat, rot};
use super::tree::{Node, NodeCoord, NodeKind, Parent};
use nalgebra::{Matrix3, Matrix6, Quaternion, UnitQuaternion, Vector3, Vector4, Vector6};

/// A spatial vector `[angular; linear]` (world frame, at the origin).
pub type Sv = Vector6<f64>;

#[inline]
pub fn ang(v: &Sv) -> Vector3<f64> {
    Vector3::new(v[0], v[1], v[2])
}
#[inline]
pub fn lin(v: &Sv) -> Vector3<f64> {
    Vector3::new(v[3], v[4], v[5])
}
#[inline]
pub fn sv(a: &Vector3<f64>, l: &Vector3<f64>) -> Sv {
    Sv::new(a.x, a.y, a.z, l.x, l.y, l.z)
}

/// Motion cross motion `v ×ₘ m`.
#[inline]
pub fn crm(v: &Sv, m: &Sv) -> Sv {
    let (w, u) = (ang(v), lin(v));
    let (ma, ml) = (ang(m), lin(m));
    sv(&w.cross(&ma), &(u.cross(&ma) + w.cross(&ml)))
}

/// Motion cross force `v ×* f`.
#[inline]
pub fn crf(v: &Sv, f: &Sv) -> Sv {
    let (w, u) = (ang(v), lin(v));
    let (n, fl) = (ang(f), lin(f));
    sv(&(w.cross(&n) + u.cross(&fl)), &w.cross(&fl))
}

/// A spatial inertia at the world origin by its ten numbers: mass `m`, first moment `h = m c`
/// (`c` the centre of mass) and rotational inertia `j` about the origin, `I = [j, [h]×;
/// [h]×ᵀ, m 1]`. Products with it take 24 multiplications instead of the 36 of the full 6 × 6
/// matrix (no zeros): the recursions of [`super::crba`] and [`super::rnea`] spend most of
/// a small tree's evaluation in them. Sums of inertias (composite bodies) stay in this form.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Inertia {
    pub m: f64,
    pub h: Vector3<f64>,
    pub j: Matrix3<f64>,
}

impl Inertia {
    pub const ZERO: Inertia = Inertia {
        m: 0.0,
        h: Vector3::new(0.0, 0.0, 0.0),
        j: Matrix3::new(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    };

    /// A body with mass `m`, centre of mass `c` and rotational inertia `jc` about the centre
    /// (world axes).
    pub fn of_body(m: f64, c: &Vector3<f64>, jc: &Matrix3<f64>) -> Inertia {
        let cx = super::super::math::skew(c);
        Inertia {
            m,
            h: m * c,
            j: jc + m * cx * cx.transpose(),
        }
    }

    /// `I v`: `[j ω + h × v_O; m v_O − h × ω]`.
    #[inline]
    pub fn mul(&self, v: &Sv) -> Sv {
        let (w, u) = (ang(v), lin(v));
        sv(
            &(self.j * w + self.h.cross(&u)),
            &(self.m * u - self.h.cross(&w)),
        )
    }

    /// The 6 × 6 matrix (for the Jacobians' tangents, which multiply it by many vectors).
    pub fn matrix(&self) -> Matrix6<f64> {
        let hx = super::super::math::skew(&self.h);
        let mut out = Matrix6::zeros();
        out.fixed_view_mut::<3, 3>(0, 0).copy_from(&self.j);
        out.fixed_view_mut::<3, 3>(0, 3).copy_from(&hx);
        out.fixed_view_mut::<3, 3>(3, 0).copy_from(&hx.transpose());
        out.fixed_view_mut::<3, 3>(3, 3)
            .copy_from(&(self.m * Matrix3::identity()));
        out
    }
}

impl std::ops::AddAssign for Inertia {
    fn add_assign(&mut self, o: Inertia) {
        self.m += o.m;
        self.h += o.h;
        self.j += o.j;
    }
}

/// The Euler parameters of a spherical node (`dofs` its entries in `x`).
pub fn euler(x: &[f64], d: usize) -> Vector4<f64> {
    Vector4::new(x[d], x[d + 1], x[d + 2], x[d + 3])
}

/// Spherical node: `∂S_k/∂e_m` with the parent frame fixed (`axes` the parent joint frame's
/// axes in world, `o` the joint point). `S_k = [a_k; o × a_k]`, `a_k = 2 A E(e)_k / |e|²`, so
/// `∂a_k/∂e_m = 2 A (E(u_m)_k − 2 e_m E(e)_k / |e|²) / |e|²`.
pub fn euler_subspace_derivative(
    axes: &Matrix3<f64>,
    o: &Vector3<f64>,
    e: &Vector4<f64>,
    m: usize,
    k: usize,
) -> Sv {
    let n2 = e.norm_squared();
    let mut um = Vector4::zeros();
    um[m] = 1.0;
    let da = 2.0 * axes * (e_mat(&um).column(k) - 2.0 * e[m] / n2 * e_mat(e).column(k)) / n2;
    sv(&da, &o.cross(&da))
}

/// Per-node kinematic workspace (node `i` carries body `nodes[i].body`); the motion subspace
/// and the coordinates are per dof (`Node::dofs`).
#[derive(Debug, Clone, Default)]
pub struct Kin {
    pub quat: Vec<UnitQuaternion<f64>>,
    /// Euler parameters of the body (the element layer's `p`).
    pub e: Vec<Vector4<f64>>,
    pub rot: Vec<Matrix3<f64>>,
    pub com: Vec<Vector3<f64>>,
    /// Parent joint frame: axes (world; spherical nodes only, for `∂S/∂e`) and origin, per
    /// node.
    pub pf_axes: Vec<Matrix3<f64>>,
    pub pf_origin: Vec<Vector3<f64>>,
    /// Motion subspace, per dof.
    pub s: Vec<Sv>,
    pub vel: Vec<Sv>,
    /// Acceleration with the state coordinates' accelerations zero (drivers' `ü` and moving
    /// frames' accelerations included; gravity not).
    pub acc: Vec<Sv>,
    /// Moving frames: position, velocity, acceleration.
    pub frame: Vec<[Vector3<f64>; 3]>,
    /// Coordinate value, rate and acceleration, per dof.
    pub x: Vec<f64>,
    pub xd: Vec<f64>,
    pub xdd: Vec<f64>,
}

impl Kin {
    pub fn resize(&mut self, n: usize, n_dof: usize, n_frames: usize) {
        self.quat.resize(n, UnitQuaternion::identity());
        self.e.resize(n, Vector4::new(1.0, 0.0, 0.0, 0.0));
        self.rot.resize(n, Matrix3::identity());
        self.com.resize(n, Vector3::zeros());
        self.pf_axes.resize(n, Matrix3::identity());
        self.pf_origin.resize(n, Vector3::zeros());
        self.s.resize(n_dof, Sv::zeros());
        self.vel.resize(n, Sv::zeros());
        self.acc.resize(n, Sv::zeros());
        self.frame.resize(n_frames, [Vector3::zeros(); 3]);
        self.x.resize(n_dof, 0.0);
        self.xd.resize(n_dof, 0.0);
        self.xdd.resize(n_dof, 0.0);
    }

    /// `Σ S_k y_k` over node `n`'s dofs (`y` per dof: rates or accelerations).
    #[inline]
    pub fn s_times(&self, n: &Node, y: &[f64]) -> Sv {
        n.dofs().fold(Sv::zeros(), |a, d| a + self.s[d] * y[d])
    }

    /// The node's own velocity-product term (beyond `V_parent ×ₘ S ẋ`): spherical nodes
    /// `Σ_k Ṡ_k ė_k − V ×ₘ S ė = −(2 eᵀė/|e|²) S ė`; staged nodes `Σ_{k<m} (S_k ẋ_k) ×ₘ (S_m
    /// ẋ_m)` over their stages in order (stage `m`'s axis is fixed in the frame reached by the
    /// stages before it, which moves with them; zero for one stage, for commuting stages as
    /// the cylindrical joint's and for a free body's translations).
    #[inline]
    pub fn node_bias(&self, n: &Node, xd: &[f64]) -> Sv {
        if n.kind == NodeKind::Spherical {
            let (e, ed) = (euler(&self.x, n.dof), euler(xd, n.dof));
            return -(2.0 * e.dot(&ed) / e.norm_squared()) * self.s_times(n, xd);
        }
        if !n.kind.stages_interact() {
            return Sv::zeros();
        }
        let mut out = Sv::zeros();
        let mut before = Sv::zeros();
        for s in n.stages() {
            let d = n.dof + s.k;
            let sm = self.s[d] * xd[d];
            out += crm(&before, &sm);
            before += sm;
        }
        out
    }

    /// The tangent of a staged node's [`Kin::node_bias`] given the tangents `delta(d)` of the
    /// products `S_d ẋ_d` of its dofs (zero for spherical nodes, whose terms are written out
    /// where they are differentiated).
    pub fn staged_bias_tangent(&self, n: &Node, xd: &[f64], delta: impl Fn(usize) -> Sv) -> Sv {
        if !n.kind.stages_interact() {
            return Sv::zeros();
        }
        let mut out = Sv::zeros();
        let (mut before, mut dbefore) = (Sv::zeros(), Sv::zeros());
        for s in n.stages() {
            let d = n.dof + s.k;
            let (sm, dsm) = (self.s[d] * xd[d], delta(d));
            out += crm(&dbefore, &sm) + crm(&before, &dsm);
            before += sm;
            dbefore += dsm;
        }
        out
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
            let d = n.dof;
            let (q_cf, o_cf) = match n.kind {
                NodeKind::Fixed => (q_pf, o_pf),
                NodeKind::Spherical => {
                    // Rotation by the normalized parameters; the subspace is the exact
                    // derivative of that pose, `ω = 2 A E(e) ė / |e|²` (`E(e) e = 0`).
                    let e = euler(&self.x, d);
                    let qr =
                        UnitQuaternion::from_quaternion(Quaternion::new(e[0], e[1], e[2], e[3]));
                    let a_pf = q_pf.to_rotation_matrix().into_inner();
                    let a = 2.0 / e.norm_squared() * a_pf * e_mat(&e);
                    self.pf_axes[i] = a_pf;
                    for k in 0..4 {
                        let ak = a.column(k).into_owned();
                        self.s[d + k] = sv(&ak, &o_pf.cross(&ak));
                    }
                    (q_pf * qr, o_pf)
                }
                _ => {
                    // The stages in turn: each moves the frame reached so far about or along
                    // one of its own axes; its subspace is that axis (through that origin).
                    let (mut q, mut o) = (q_pf, o_pf);
                    for st in n.stages() {
                        let mut unit = Vector3::zeros();
                        unit[st.axis] = 1.0;
                        let a = st.sign * (q * unit);
                        let x = self.x[d + st.k];
                        if st.rot {
                            self.s[d + st.k] = sv(&a, &o.cross(&a));
                            q *= UnitQuaternion::from_axis_angle(
                                &nalgebra::Unit::new_unchecked(unit),
                                st.sign * x,
                            );
                        } else {
                            self.s[d + st.k] = sv(&Vector3::zeros(), &a);
                            o += x * a;
                        }
                    }
                    (q, o)
                }
            };
            self.pf_origin[i] = o_pf;
            // A particle's frame never rotates (its tree node only translates from a
            // non-rotating parent; the joint frame axes on it are global).
            let q = if n.kind == NodeKind::PlanarTranslation {
                UnitQuaternion::identity()
            } else {
                q_cf * n.q_child_frame_inv
            };
            let e = Vector4::new(q.w, q.i, q.j, q.k);
            let a = rot(&e);
            self.quat[i] = q;
            self.e[i] = e;
            self.rot[i] = a;
            self.com[i] = o_cf - a * n.child_frame.origin;
        }
    }

    /// Spatial velocities and bias accelerations from `xd`, `xdd` (after [`Kin::positions`]).
    pub fn motion(&mut self, nodes: &[Node]) {
        for (i, n) in nodes.iter().enumerate() {
            let (vp, ap) = self.parent_motion(n.parent);
            let sxd = self.s_times(n, &self.xd);
            let v = vp + sxd;
            self.vel[i] = v;
            // Ṡ = V_parent ×ₘ S for a joint axis fixed in the parent (`V ×ₘ S ẋ` is the same,
            // `S ẋ ×ₘ S ẋ = 0`); a multi-coordinate node's later axes also move with its
            // earlier coordinates, and a spherical node's with its own parameters.
            // Only a driven node has a coordinate acceleration here (the state's are zero).
            let sxdd = match n.coord {
                NodeCoord::Driven(_) => self.s_times(n, &self.xdd),
                _ => Sv::zeros(),
            };
            self.acc[i] = ap + sxdd + crm(&v, &sxd) + self.node_bias(n, &self.xd);
        }
    }

    /// Angular velocity and centre-of-mass velocity of node `i`'s body.
    #[inline]
    pub fn body_velocity(&self, i: usize) -> (Vector3<f64>, Vector3<f64>) {
        let w = ang(&self.vel[i]);
        (w, lin(&self.vel[i]) + w.cross(&self.com[i]))
    }

    /// Angular and centre-of-mass accelerations of node `i`'s body (from `acc`).
    pub fn body_acceleration(&self, i: usize) -> (Vector3<f64>, Vector3<f64>) {
        self.body_acceleration_of(i, &self.acc[i])
    }

    /// [`Kin::body_acceleration`] for the node's spatial acceleration `acc` (the bias one
    /// with the state's accelerations added, say).
    pub fn body_acceleration_of(&self, i: usize, acc: &Sv) -> (Vector3<f64>, Vector3<f64>) {
        let (w, vc) = self.body_velocity(i);
        let wd = ang(acc);
        (wd, lin(acc) + wd.cross(&self.com[i]) + w.cross(&vc))
    }
}
