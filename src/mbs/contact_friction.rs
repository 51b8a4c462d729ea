//! Friction in penalty contacts (`contact` with `mu`): regularized Coulomb on the tangential
//! slip velocity, with the stiction state of joint friction (`mbs::friction`) in the tangent
//! plane.
//!
//! **Geometry.** Side 1 is the sphere (`sphere` of a sphere_plane contact, `body1` of a
//! sphere_sphere contact), side 2 the plane (or `body2`). `n` is the unit contact normal
//! pointing from side 2 to side 1 (the plane's normal; `(c1 − c2)/|c1 − c2|` for two spheres).
//! The contact point `P` is the sphere's surface point `c1 − r1 n` on a plane (the lever arm of
//! a rigid sphere, whatever the penetration), and the middle of the penetration
//! `c1 − (r1 − δ/2) n` between two spheres (symmetric in the two). The slip velocity is the velocity of side 1's material point at `P` relative to
//! side 2's material point at `P`, `v_rel = (ṙ1 + ω1 × (P − r1)) − (ṙ2 + ω2 × (P − r2))`, and
//! its tangential part `v_t = v_rel − n (n · v_rel)`; a sphere rolling without slipping has
//! `v_t = 0`.
//!
//! **Force.** `F` acts on side 1 at `P` (and `−F` on side 2), in the tangent plane:
//!
//! - slip: `F = −μ_k N tanh(|v_t| / v_reg) v_t / |v_t|`, `N` the contact's normal force at the
//!   same state (its penalty law, not lagged);
//! - stick (`mu_static` given): `F = −k_s d_t − c_s v_t`, `d_t` the tangential part of
//!   `X1 − X2`, two material points (one per side) fixed when the contact stuck. At every
//!   accepted step that keeps sticking, both are moved to the present contact point with
//!   `d_t` kept (`X1 = P`, `X2 = P − d_t`), so a rolling sphere carries no geometric drift
//!   and a held block does not creep (the anchor is a point of the plane).
//! - `F = 0` while `N = 0` (lift-off).
//!
//! The mode changes at accepted steps only (as for joint friction): stick → slip when
//! `|k_s d_t| > μ_s N` or at lift-off (`N = 0`); slip → stick by `friction::may_stick` on the
//! slip speed, in contact only, with the anchor placed where the spring carries the present
//! kinetic force (continuous force).
//!
//! **Jacobians** (implicit methods): the generalized forces `Q` on the two sides' absolute
//! coordinates `(r, p)` (or `r` of a particle) are differentiated by central differences over
//! the at most 14 + 14 local positions and velocities (`Eval::jac`): the law involves the
//! normal force, the contact point, the rotation rates and the tanh regularization, and the
//! differences are exact to ~1e-6 relative at the steps chosen below, which is all Newton
//! needs (the tests compare motions, not Jacobians, with closed forms).

use super::friction::{self, StickState, Stiction};
use super::kin::{Layout, Snapshot, LOCAL};
use super::math::{e_mat, rot};
use super::spec::BodyRef;
use nalgebra::{Matrix3, SMatrix, SVector, Vector3, Vector4};
use serde::{Deserialize, Serialize};

type V3 = Vector3<f64>;
/// Generalized force on the local coordinates (side 1's block, then side 2's).
pub type LocalForce = SVector<f64, LOCAL>;
/// `∂Q/∂(q_local, v_local)`.
pub type LocalJacobian = SMatrix<f64, LOCAL, { 2 * LOCAL }>;

/// The contact's shape in its sides' coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Shape {
    /// Sphere centre (side 1) and radius; plane point and unit normal (side 2).
    SpherePlane {
        center: V3,
        radius: f64,
        point: V3,
        normal: V3,
    },
    SphereSphere {
        center1: V3,
        radius1: f64,
        center2: V3,
        radius2: f64,
    },
}

/// One contact with friction, resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContactFriction {
    /// Force element (spec index) and its normal force term (index into the system's terms).
    pub element: usize,
    pub term: usize,
    pub sides: [BodyRef; 2],
    pub shape: Shape,
    pub mu: f64,
    pub v_reg: f64,
    /// Stiction parameters and the slot of the state in `System::contact_stick`.
    pub stiction: Option<(Stiction, usize)>,
}

/// The stick state of one contact: the mode (`StickState`; its scalar `anchor` is unused) and
/// the two anchored material points in their sides' coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ContactStick {
    pub mode: StickState,
    pub x1: V3,
    pub x2: V3,
}

impl ContactStick {
    pub fn slipping() -> ContactStick {
        ContactStick {
            mode: StickState {
                stick: false,
                anchor: 0.0,
                v_prev: f64::NAN,
                armed: true,
            },
            x1: V3::zeros(),
            x2: V3::zeros(),
        }
    }
}

/// One side's state: a rigid body, a particle, a moving frame or the ground.
#[derive(Debug, Clone, Copy)]
pub struct Side {
    r: V3,
    p: Vector4<f64>,
    a: Matrix3<f64>,
    rd: V3,
    pd: Vector4<f64>,
    rigid: bool,
    /// Global first column and width (7 rigid, 3 particle); none for ground and frames.
    cols: Option<(usize, usize)>,
}

impl Side {
    pub fn of(layout: &Layout, s: &Snapshot, b: BodyRef) -> Side {
        let mut side = Side {
            r: V3::zeros(),
            p: Vector4::new(1.0, 0.0, 0.0, 0.0),
            a: Matrix3::identity(),
            rd: V3::zeros(),
            pd: Vector4::zeros(),
            rigid: false,
            cols: None,
        };
        match b {
            BodyRef::Ground => {}
            BodyRef::Frame(f) => {
                side.r = s.frame[f][0];
                side.rd = s.frame[f][1];
            }
            BodyRef::Body(b) => {
                side.r = s.r[b];
                side.rd = s.rd[b];
                side.rigid = layout.is_rigid(b);
                if side.rigid {
                    side.p = s.p[b];
                    side.a = s.a[b];
                    side.pd = s.pd[b];
                }
                side.cols = Some((layout.offsets[b], if side.rigid { 7 } else { 3 }));
            }
        }
        side
    }

    fn width(&self) -> usize {
        self.cols.map_or(0, |c| c.1)
    }
    fn omega(&self) -> V3 {
        if self.rigid {
            2.0 * e_mat(&self.p) * self.pd
        } else {
            V3::zeros()
        }
    }
    fn material(&self, local: &V3) -> V3 {
        self.r + self.a * local
    }
    fn local_of(&self, x: &V3) -> V3 {
        self.a.transpose() * (x - self.r)
    }
    fn velocity_at(&self, x: &V3) -> V3 {
        self.rd + self.omega().cross(&(x - self.r))
    }
    /// `(Q_r, Q_p)` of force `f` applied at `x`: virtual power `f · v(x)`, `ω = 2 E ṗ`.
    fn generalized(&self, f: &V3, x: &V3, out: &mut [f64]) {
        out[..3].copy_from_slice(f.as_slice());
        if self.rigid {
            let qp = 2.0 * e_mat(&self.p).transpose() * (x - self.r).cross(f);
            out[3..7].copy_from_slice(qp.as_slice());
        }
    }
    /// Add `h` to local position (`vel` false) or velocity coordinate `k`.
    fn perturb(&mut self, k: usize, h: f64, vel: bool) {
        match (vel, k < 3) {
            (false, true) => self.r[k] += h,
            (false, false) => {
                self.p[k - 3] += h;
                self.a = rot(&self.p);
            }
            (true, true) => self.rd[k] += h,
            (true, false) => self.pd[k - 3] += h,
        }
    }
}

/// The contact at one state.
#[derive(Debug, Clone, Copy)]
pub struct Kinematics {
    /// Normal (side 2 → side 1), contact point, tangential slip velocity.
    pub n: V3,
    pub point: V3,
    pub slip: V3,
    /// The normal term's coordinate and rate (the contact law's `ξ`, `ξ̇`).
    pub xi: f64,
    pub rate: f64,
}

/// Friction at one state.
#[derive(Debug, Clone, Copy)]
pub struct Eval {
    pub kin: Kinematics,
    /// Normal force `N ≥ 0`.
    pub normal: f64,
    /// Friction force on side 1 (ground axes).
    pub force: V3,
}

/// `tanh(x) / x`, smooth through 0.
fn tanh_over(x: f64) -> f64 {
    if x.abs() < 1e-4 {
        1.0 - x * x / 3.0
    } else {
        x.tanh() / x
    }
}

impl ContactFriction {
    pub fn sides(&self, layout: &Layout, s: &Snapshot) -> [Side; 2] {
        self.sides.map(|b| Side::of(layout, s, b))
    }

    pub fn kinematics(&self, sides: &[Side; 2]) -> Kinematics {
        let [s1, s2] = sides;
        // The contact point's distance from side 1's centre (module docs).
        let (c1, arm, n, xi, rate) = match self.shape {
            Shape::SpherePlane {
                center,
                radius,
                point,
                normal,
            } => {
                let c = s1.material(&center);
                let n = s2.a * normal;
                let x0 = s2.material(&point);
                let nd = s2.omega().cross(&n);
                let rate = nd.dot(&(c - x0)) + n.dot(&(s1.velocity_at(&c) - s2.velocity_at(&x0)));
                (c, radius, n, n.dot(&(c - x0)), rate)
            }
            Shape::SphereSphere {
                center1,
                radius1,
                center2,
                radius2,
            } => {
                let (c1, c2) = (s1.material(&center1), s2.material(&center2));
                let d = c2 - c1;
                let xi = d.norm();
                // Coincident centres: no normal (the force is zero there, see `evaluate`).
                let u = if xi > 0.0 { d / xi } else { V3::zeros() };
                let rate = u.dot(&(s2.velocity_at(&c2) - s1.velocity_at(&c1)));
                // Middle of the penetration δ = r1 + r2 − ξ.
                let arm = radius1 - 0.5 * (radius1 + radius2 - xi);
                (c1, arm, -u, xi, rate)
            }
        };
        let point = c1 - arm * n;
        let v = s1.velocity_at(&point) - s2.velocity_at(&point);
        Kinematics {
            n,
            point,
            slip: v - n * n.dot(&v),
            xi,
            rate,
        }
    }

    /// The friction force at `sides`; `normal(ξ, ξ̇)` is the contact's normal law.
    pub fn evaluate(
        &self,
        sides: &[Side; 2],
        normal: &dyn Fn(f64, f64) -> f64,
        stick: Option<&ContactStick>,
    ) -> Eval {
        let kin = self.kinematics(sides);
        let n_force = normal(kin.xi, kin.rate).max(0.0);
        let force = if n_force <= 0.0 || kin.n == V3::zeros() {
            V3::zeros()
        } else {
            match (self.stiction, stick) {
                (Some((s, _)), Some(st)) if st.mode.stick => {
                    -s.k * self.deflection(sides, &kin, st) - s.c * kin.slip
                }
                _ => self.kinetic(n_force, &kin.slip),
            }
        };
        Eval {
            kin,
            normal: n_force,
            force,
        }
    }

    fn kinetic(&self, n_force: f64, slip: &V3) -> V3 {
        -self.mu * n_force * tanh_over(slip.norm() / self.v_reg) / self.v_reg * slip
    }

    /// Tangential part of `X1 − X2` of a sticking contact.
    fn deflection(&self, sides: &[Side; 2], kin: &Kinematics, st: &ContactStick) -> V3 {
        let d = sides[0].material(&st.x1) - sides[1].material(&st.x2);
        d - kin.n * kin.n.dot(&d)
    }

    /// The generalized force of `ev` on the local coordinates.
    pub fn local_force(&self, sides: &[Side; 2], ev: &Eval) -> LocalForce {
        let mut q = LocalForce::zeros();
        let w1 = sides[0].width();
        sides[0].generalized(&ev.force, &ev.kin.point, &mut q.as_mut_slice()[..w1]);
        sides[1].generalized(&-ev.force, &ev.kin.point, &mut q.as_mut_slice()[w1..]);
        q
    }

    /// `(local index, global column)` of the sides' coordinates, and their count.
    pub fn columns(sides: &[Side; 2]) -> ([(usize, usize); LOCAL], usize) {
        let mut out = [(0, 0); LOCAL];
        let mut n = 0;
        for s in sides {
            if let Some((o, w)) = s.cols {
                for k in 0..w {
                    out[n] = (n, o + k);
                    n += 1;
                }
            }
        }
        (out, n)
    }

    /// `∂Q/∂(q, v)` on the local coordinates by central differences (module docs).
    pub fn jacobian(
        &self,
        sides: &[Side; 2],
        normal: &dyn Fn(f64, f64) -> f64,
        stick: Option<&ContactStick>,
    ) -> LocalJacobian {
        let mut jac = LocalJacobian::zeros();
        let w1 = sides[0].width();
        let n = w1 + sides[1].width();
        for vel in [false, true] {
            let h = if vel { 1e-3 * self.v_reg } else { 1e-8 };
            for k in 0..n {
                let (i, kk) = if k < w1 { (0, k) } else { (1, k - w1) };
                let q_at = |step: f64| {
                    let mut sd = *sides;
                    sd[i].perturb(kk, step, vel);
                    self.local_force(&sd, &self.evaluate(&sd, normal, stick))
                };
                let col = (q_at(h) - q_at(-h)) / (2.0 * h);
                jac.set_column(k + if vel { LOCAL } else { 0 }, &col);
            }
        }
        jac
    }

    /// The stick-state update at an accepted step (module docs); returns whether the mode
    /// changed.
    pub fn accept(
        &self,
        sides: &[Side; 2],
        normal: &dyn Fn(f64, f64) -> f64,
        st: &mut ContactStick,
    ) -> bool {
        let Some((s, _)) = self.stiction else {
            return false;
        };
        let before = st.mode.stick;
        let ev = self.evaluate(sides, normal, Some(st));
        let speed = ev.kin.slip.norm();
        let [s1, s2] = sides;
        if ev.normal <= 0.0 {
            // Lift-off: slipping, and free to stick again at the next touch-down.
            st.mode.stick = false;
            st.mode.armed = true;
            st.mode.v_prev = speed;
        } else if st.mode.stick {
            let d = self.deflection(sides, &ev.kin, st);
            if s.k * d.norm() > s.mu_static * ev.normal {
                st.mode.stick = false;
                st.mode.armed = false;
            } else {
                st.x1 = s1.local_of(&ev.kin.point);
                st.x2 = s2.local_of(&(ev.kin.point - d));
            }
            st.mode.v_prev = f64::NAN;
        } else if friction::may_stick(&s, &mut st.mode, speed) {
            let f = self.kinetic(ev.normal, &ev.kin.slip);
            st.x1 = s1.local_of(&ev.kin.point);
            st.x2 = s2.local_of(&(ev.kin.point + f / s.k));
        }
        st.mode.stick != before
    }

    /// The state at initialization: touching (`δ ≥ 0`) and slower than `v_stick`, it sticks
    /// where it is, unloaded; otherwise it slips.
    pub fn initial_stick(&self, sides: &[Side; 2], gap: f64) -> ContactStick {
        let kin = self.kinematics(sides);
        match self.stiction {
            Some((s, _)) if kin.xi <= gap && kin.slip.norm() < s.v_stick => ContactStick {
                mode: StickState::at(0.0),
                x1: sides[0].local_of(&kin.point),
                x2: sides[1].local_of(&kin.point),
            },
            _ => {
                let mut st = ContactStick::slipping();
                st.mode.v_prev = kin.slip.norm();
                st
            }
        }
    }

    /// Elastic energy of the stick spring, `½ k_s |d_t|²`.
    pub fn energy(&self, sides: &[Side; 2], st: &ContactStick) -> f64 {
        match self.stiction {
            Some((s, _)) if st.mode.stick => {
                let kin = self.kinematics(sides);
                0.5 * s.k * self.deflection(sides, &kin, st).norm_squared()
            }
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mbs::spec::BodyKind;

    const S: Stiction = Stiction {
        mu_static: 0.5,
        k: 1e5,
        c: 30.0,
        v_stick: 1e-3,
    };

    /// A rigid sphere (body 0, r = 0.1) on the ground plane z = 0, its centre at height
    /// `h`, moving with `v` and turning with `w` (global).
    fn ball(h: f64, v: V3, w: V3) -> (ContactFriction, [Side; 2]) {
        let layout = Layout::new(&[BodyKind::Rigid]);
        let mut s = Snapshot::default();
        s.resize(1, 0);
        let p = Vector4::new(1.0, 0.0, 0.0, 0.0);
        s.r[0] = V3::new(0.3, -0.2, h);
        s.rd[0] = v;
        // ṗ = ½ Eᵀ ω for a unit p.
        s.pd[0] = 0.5 * e_mat(&p).transpose() * w;
        let cf = ContactFriction {
            element: 0,
            term: 0,
            sides: [BodyRef::Body(0), BodyRef::Ground],
            shape: Shape::SpherePlane {
                center: V3::zeros(),
                radius: 0.1,
                point: V3::zeros(),
                normal: V3::z(),
            },
            mu: 0.4,
            v_reg: 1e-3,
            stiction: Some((S, 0)),
        };
        let sides = cf.sides(&layout, &s);
        (cf, sides)
    }

    /// Normal law `N = 1e5 δ` (r = 0.1).
    fn normal(xi: f64, _rate: f64) -> f64 {
        (1e5 * (0.1 - xi)).max(0.0)
    }

    #[test]
    fn rolling_without_slipping_has_no_slip() {
        // v = ω × (r n) with n = z: rolling along x at 2 m/s needs ω_y = 20 rad/s.
        let (cf, sides) = ball(0.1 - 1e-4, V3::new(2.0, 0.0, 0.0), V3::new(0.0, 20.0, 0.0));
        let kin = cf.kinematics(&sides);
        assert!(kin.slip.norm() < 1e-12, "{:?}", kin.slip);
        assert!((kin.point - V3::new(0.3, -0.2, -1e-4)).norm() < 1e-12);
        // Spinning in place: slip −ω × r n at the contact point, opposite the spin's motion.
        let (cf, sides) = ball(0.1 - 1e-4, V3::zeros(), V3::new(0.0, 20.0, 0.0));
        let ev = cf.evaluate(&sides, &normal, None);
        assert!((ev.kin.slip - V3::new(-2.0, 0.0, 0.0)).norm() < 1e-12);
        // Kinetic friction μ N opposite the slip: +x on the ball, which drives it forward.
        assert!(
            (ev.force - V3::new(0.4 * 10.0, 0.0, 0.0)).norm() < 1e-9,
            "{:?}",
            ev.force
        );
    }

    #[test]
    fn sticks_holds_releases_and_lifts_off() {
        let (cf, sides) = ball(0.1 - 1e-4, V3::zeros(), V3::zeros());
        let mut st = cf.initial_stick(&sides, 0.1);
        assert!(st.mode.stick);
        // Move the ball 40 µm along y: the anchor spring pulls back with 4 N < μ_s N = 5 N.
        let (_, moved) = ball(0.1 - 1e-4, V3::zeros(), V3::zeros());
        let mut moved = moved;
        moved[0].r.y += 4e-5;
        let ev = cf.evaluate(&moved, &normal, Some(&st));
        assert!(
            (ev.force - V3::new(0.0, -4.0, 0.0)).norm() < 1e-9,
            "{:?}",
            ev.force
        );
        assert!(!cf.accept(&moved, &normal, &mut st));
        // Re-anchored at the present contact point with the deflection kept.
        let again = cf.evaluate(&moved, &normal, Some(&st));
        assert!((again.force - ev.force).norm() < 1e-9);
        // 60 µm: 6 N > 5 N, it slips.
        moved[0].r.y += 2e-5;
        assert!(cf.accept(&moved, &normal, &mut st));
        assert!(!st.mode.stick && !st.mode.armed);
        // Lift-off releases a sticking contact and arms it.
        let mut st = cf.initial_stick(&sides, 0.1);
        let (_, up) = ball(0.2, V3::zeros(), V3::zeros());
        assert!(cf.evaluate(&up, &normal, Some(&st)).force == V3::zeros());
        assert!(cf.accept(&up, &normal, &mut st));
        assert!(!st.mode.stick && st.mode.armed);
    }

    #[test]
    fn sticks_again_when_slowing_with_a_continuous_force() {
        let (cf, fast) = ball(0.1 - 1e-4, V3::new(0.01, 0.0, 0.0), V3::zeros());
        let mut st = cf.initial_stick(&fast, 0.1);
        assert!(!st.mode.stick);
        assert!(!cf.accept(&fast, &normal, &mut st));
        let (_, slow) = ball(0.1 - 1e-4, V3::new(5e-4, 0.0, 0.0), V3::zeros());
        let kinetic = cf.evaluate(&slow, &normal, Some(&st)).force;
        assert!(cf.accept(&slow, &normal, &mut st));
        assert!(st.mode.stick);
        // The anchor spring carries the kinetic force of that instant (the damper adds
        // −c_s v_t on top).
        let stick = cf.evaluate(&slow, &normal, Some(&st)).force;
        let damper = -S.c * V3::new(5e-4, 0.0, 0.0);
        assert!(
            (stick - damper - kinetic).norm() < 1e-9,
            "{stick:?} {kinetic:?}"
        );
    }
}
