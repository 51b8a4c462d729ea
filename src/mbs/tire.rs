//! Point-contact tire (issue 16): a wheel body rolling on a road surface `z = h(t, x)`.
//!
//! Geometry (upright-wheel point contact): the wheel centre `C`, the spin axis `a` (a unit
//! vector fixed in the wheel), the road normal `n = +z` (ground). The contact point is straight
//! below the centre, `P = C − R n` (camber does not move it: valid for small camber), and the
//! road height there is `h = u(t) + profile(C_x)`: `u` a motion (typically the rig's post
//! input), `profile` an optional table along ground x (natural cubic spline, constant outside).
//! The slope of the profile changes the height only; the normal stays vertical (a point
//! follower). Tire axes (ISO 8855): forward `x_c = (a × n)/|a × n|`, lateral `y_c = n × x_c`,
//! up `n`; with the spin axis pointing to the vehicle's left, `x_c` is the travel direction and
//! forward rolling is a positive spin about `a`.
//!
//! Forces, on the wheel at the material point under the centre:
//! - vertical `F_z = max(0, k δ + c δ̇)` while the deflection `δ = R − (C_z − h) > 0`, zero
//!   otherwise (lift-off; no pull). `−δ` is the contact's event function.
//! - longitudinal slip `κ = −v_sx / V`, lateral slip angle `α = atan(v_sy / V)`, with `v_s` the
//!   velocity of the wheel's material point at `P` (slip velocity: zero for pure rolling) and
//!   `V = √(V_x² + v_low²)`, `V_x = x_c · v_C` the forward speed. `v_low` regularizes
//!   standstill: below it the slip forces act as stiff dampers on the slip velocity instead of
//!   dividing by zero.
//! - `F_x = μ F_z MF_x(κ)`, `F_y = −μ F_z MF_y(α)` with the unit-peak Magic Formula
//!   `MF(s) = sin(C atan(B s − E (B s − atan(B s))))` (Pacejka). Pure slip per direction (no
//!   combined-slip weighting); no rolling resistance or aligning moment.
//!
//! The generalized force on the wheel's `(r, p)` is `Q = J_Pᵀ F`, `J_P = [I, B(p, c) +
//! 2R ñ E(p)]` the Jacobian of the material point's velocity `v_P = J_P (ṙ, ṗ)`;
//! [`Tire::evaluate`] returns it with its exact derivatives with respect to `(r, p, ṙ, ṗ)`
//! (forward-mode chain rule, checked against finite differences in the tests).

use super::kin::Snapshot;
use super::math::{b_mat, bt_w_jacobian, e_mat, skew};
use super::motion::Spline;
use nalgebra::{Matrix3, Matrix3x4, Matrix4, SMatrix, SVector, Vector3, Vector4};
use serde::{Deserialize, Serialize};

/// Derivative with respect to the wheel's `(r, p, ṙ, ṗ)`.
type Grad = SVector<f64, 14>;
type VGrad = SMatrix<f64, 3, 14>;
/// `∂Q/∂(r, p, ṙ, ṗ)` of the 7 generalized force components.
pub type TireJacobian = SMatrix<f64, 7, 14>;

/// Unit-peak Magic Formula coefficients of one direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MagicFormula {
    /// Stiffness factor `B` (per unit slip, κ or rad).
    pub b: f64,
    /// Shape factor `C`.
    pub c: f64,
    /// Curvature factor `E` (≤ 1).
    pub e: f64,
}

impl MagicFormula {
    /// `MF(s)` and `dMF/ds`.
    pub fn eval(&self, s: f64) -> (f64, f64) {
        let (b, c, e) = (self.b, self.c, self.e);
        let bs = b * s;
        let phi = bs - e * (bs - bs.atan());
        let dphi = b - e * (b - b / (1.0 + bs * bs));
        let th = c * phi.atan();
        (th.sin(), th.cos() * c * dphi / (1.0 + phi * phi))
    }
}

/// The tire's parameters (resolved values).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TireParams {
    /// Unloaded radius `R` (m).
    pub radius: f64,
    /// Vertical stiffness (N/m) and damping (N s/m).
    pub k: f64,
    pub c: f64,
    /// Friction coefficient (peak `F/F_z`).
    pub mu: f64,
    pub mf_x: MagicFormula,
    pub mf_y: MagicFormula,
    /// Low-speed regularization velocity (m/s).
    pub v_low: f64,
}

/// One tire element of the system.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tire {
    /// Index of the force element in the spec.
    pub element: usize,
    /// The wheel body (rigid).
    pub body: usize,
    /// Wheel centre and unit spin axis in wheel coordinates.
    pub center: Vector3<f64>,
    pub axis: Vector3<f64>,
    pub params: TireParams,
    /// Motion slot of the road height `u(t)`.
    pub road_slot: usize,
    /// Road profile along ground x.
    pub profile: Option<Spline>,
}

/// What the tire does at one state (for outputs and tests). Out of contact the forces are zero;
/// the slips are reported all the same.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TireForces {
    /// Deflection `δ` (m; negative: lifted off).
    pub deflection: f64,
    pub fz: f64,
    pub fx: f64,
    pub fy: f64,
    pub kappa: f64,
    /// Slip angle (rad).
    pub alpha: f64,
    /// Force on the wheel (world).
    pub force: Vector3<f64>,
}

/// The evaluation: forces, generalized force on the wheel's `(r, p)` and its Jacobian.
pub struct TireEval {
    pub forces: TireForces,
    pub q: SVector<f64, 7>,
    pub jac: TireJacobian,
}

/// A scalar and its gradient.
#[derive(Clone, Copy)]
struct Sd {
    v: f64,
    d: Grad,
}

fn dot_d(a: &Vector3<f64>, da: &VGrad, b: &Vector3<f64>, db: &VGrad) -> Sd {
    Sd {
        v: a.dot(b),
        d: (a.transpose() * db + b.transpose() * da).transpose(),
    }
}

/// Block `∂(E(p)ᵀ w)/∂p` for fixed `w` (linear in `p`: column `i` is `E(e_i)ᵀ w`), and
/// `∂(E(p) v)/∂p` for fixed `v` (column `i` is `E(e_i) v`).
fn et_w_jacobian(w: &Vector3<f64>) -> Matrix4<f64> {
    let mut out = Matrix4::zeros();
    for i in 0..4 {
        out.set_column(i, &(e_mat(&Vector4::ith(i, 1.0)).transpose() * w));
    }
    out
}
fn e_v_jacobian(v: &Vector4<f64>) -> Matrix3x4<f64> {
    let mut out = Matrix3x4::zeros();
    for i in 0..4 {
        out.set_column(i, &(e_mat(&Vector4::ith(i, 1.0)) * v));
    }
    out
}

impl Tire {
    /// Road height, slope and curvature along x at `x` (profile part only).
    fn profile_at(&self, x: f64) -> [f64; 3] {
        self.profile.as_ref().map_or([0.0; 3], |s| s.eval(x))
    }

    /// Event function `C_z − h − R = −δ` (positions only).
    pub fn gap(&self, s: &Snapshot, road: f64) -> f64 {
        let b = self.body;
        let c = s.r[b] + s.a[b] * self.center;
        c.z - road - self.profile_at(c.x)[0] - self.params.radius
    }

    /// Evaluate at the snapshot (velocities loaded) with road height `road = [u, u̇, ü]`.
    /// The Jacobian is formed only when `want_jac`.
    pub fn evaluate(&self, s: &Snapshot, road: [f64; 3], want_jac: bool) -> TireEval {
        let tp = &self.params;
        let big_r = tp.radius;
        let b = self.body;
        let (p, pd, am) = (s.p[b], s.pd[b], s.a[b]);
        let (cl, al) = (self.center, self.axis);
        let n = Vector3::z();
        let nt = skew(&n);
        let i3 = Matrix3::<f64>::identity();
        // Centre position and velocity.
        let bc = b_mat(&p, &cl);
        let pos_c = s.r[b] + am * cl;
        let vel_c = s.rd[b] + bc * pd;
        let mut d_c = VGrad::zeros();
        d_c.fixed_view_mut::<3, 3>(0, 0).copy_from(&i3);
        d_c.fixed_view_mut::<3, 4>(0, 3).copy_from(&bc);
        let mut d_vc = VGrad::zeros();
        d_vc.fixed_view_mut::<3, 4>(0, 3)
            .copy_from(&b_mat(&pd, &cl));
        d_vc.fixed_view_mut::<3, 3>(0, 7).copy_from(&i3);
        d_vc.fixed_view_mut::<3, 4>(0, 10).copy_from(&bc);
        // Angular velocity ω = 2 E(p) ṗ.
        let em = e_mat(&p);
        let w = 2.0 * em * pd;
        let mut d_w = VGrad::zeros();
        d_w.fixed_view_mut::<3, 4>(0, 3)
            .copy_from(&(2.0 * e_v_jacobian(&pd)));
        d_w.fixed_view_mut::<3, 4>(0, 10).copy_from(&(2.0 * em));
        // Material point under the centre: v_P = v_C − R ω × n = v_C + R ñ ω.
        let vel_p = vel_c + big_r * nt * w;
        let d_vp = d_vc + big_r * nt * d_w;
        // Tire axes from the spin axis.
        let a = am * al;
        let mut d_a = VGrad::zeros();
        d_a.fixed_view_mut::<3, 4>(0, 3).copy_from(&b_mat(&p, &al));
        let m = a.cross(&n);
        let lm = m.norm().max(1e-12);
        let xc = m / lm;
        let d_xc = (i3 - xc * xc.transpose()) * (-nt * d_a) / lm;
        let yc = n.cross(&xc);
        let d_yc = nt * d_xc;
        // Deflection and its rate.
        let [prof, slope, curv] = self.profile_at(pos_c.x);
        let delta = big_r - pos_c.z + road[0] + prof;
        let d_delta = -d_c.row(2) + slope * d_c.row(0);
        let delta_rate = -vel_c.z + road[1] + slope * vel_c.x;
        let d_delta_rate = -d_vc.row(2) + slope * d_vc.row(0) + curv * vel_c.x * d_c.row(0);
        let mut out = TireEval {
            forces: TireForces {
                deflection: delta,
                ..Default::default()
            },
            q: SVector::zeros(),
            jac: TireJacobian::zeros(),
        };
        let fz_raw = tp.k * delta + tp.c * delta_rate;
        // Slips (reported also out of contact: they are kinematic).
        let vx = dot_d(&xc, &d_xc, &vel_c, &d_vc);
        let vsx = dot_d(&xc, &d_xc, &vel_p, &d_vp);
        let vsy = dot_d(&yc, &d_yc, &vel_p, &d_vp);
        let vd = (vx.v * vx.v + tp.v_low * tp.v_low).sqrt();
        let d_vd = vx.d * (vx.v / vd);
        let kappa = -vsx.v / vd;
        let d_kappa = -vsx.d / vd + d_vd * (vsx.v / (vd * vd));
        let sy = vsy.v / vd;
        let d_sy = vsy.d / vd - d_vd * (vsy.v / (vd * vd));
        let alpha = sy.atan();
        let d_alpha = d_sy / (1.0 + sy * sy);
        if delta <= 0.0 || fz_raw <= 0.0 {
            out.forces.kappa = kappa;
            out.forces.alpha = alpha;
            return out;
        }
        let fz = Sd {
            v: fz_raw,
            d: (tp.k * d_delta + tp.c * d_delta_rate).transpose(),
        };
        let (mx, dmx) = tp.mf_x.eval(kappa);
        let (my, dmy) = tp.mf_y.eval(alpha);
        let fx = tp.mu * fz.v * mx;
        let d_fx = tp.mu * (fz.d * mx + d_kappa * (fz.v * dmx));
        let fy = -tp.mu * fz.v * my;
        let d_fy = -tp.mu * (fz.d * my + d_alpha * (fz.v * dmy));
        let f = fx * xc + fy * yc + fz.v * n;
        let forces = TireForces {
            deflection: delta,
            fz: fz.v,
            fx,
            fy,
            kappa,
            alpha,
            force: f,
        };
        out.forces = forces;
        // Q = J_Pᵀ F.
        let jp = bc + 2.0 * big_r * nt * em;
        out.q.fixed_rows_mut::<3>(0).copy_from(&f);
        out.q
            .fixed_rows_mut::<4>(3)
            .copy_from(&(jp.transpose() * f));
        if want_jac {
            let d_f = xc * d_fx.transpose()
                + fx * d_xc
                + yc * d_fy.transpose()
                + fy * d_yc
                + n * fz.d.transpose();
            out.jac.fixed_view_mut::<3, 14>(0, 0).copy_from(&d_f);
            out.jac
                .fixed_view_mut::<4, 14>(3, 0)
                .copy_from(&(jp.transpose() * d_f));
            // The direction J_P itself moves with p.
            let extra = bt_w_jacobian(&cl, &f) + 2.0 * big_r * et_w_jacobian(&(nt.transpose() * f));
            let mut blk = out.jac.fixed_view_mut::<4, 4>(3, 3);
            blk += extra;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mbs::math::{quat_axis_angle, rot};

    fn tire(profile: bool) -> Tire {
        Tire {
            element: 0,
            body: 0,
            center: Vector3::new(0.01, 0.02, -0.03),
            axis: Vector3::y(),
            params: TireParams {
                radius: 0.3,
                k: 2.0e5,
                c: 500.0,
                mu: 0.9,
                mf_x: MagicFormula {
                    b: 12.0,
                    c: 1.65,
                    e: 0.3,
                },
                mf_y: MagicFormula {
                    b: 9.0,
                    c: 1.3,
                    e: -0.5,
                },
                v_low: 0.5,
            },
            road_slot: 0,
            profile: profile
                .then(|| Spline::new(&[-1.0, 0.0, 0.05, 0.1, 1.0], &[0.0, 0.0, 0.02, 0.0, 0.01])),
        }
    }

    fn snap(y: &[f64; 14]) -> Snapshot {
        let mut s = Snapshot::default();
        s.resize(1, 0);
        s.r[0] = Vector3::new(y[0], y[1], y[2]);
        s.p[0] = Vector4::new(y[3], y[4], y[5], y[6]);
        s.a[0] = rot(&s.p[0]);
        s.rd[0] = Vector3::new(y[7], y[8], y[9]);
        s.pd[0] = Vector4::new(y[10], y[11], y[12], y[13]);
        s
    }

    /// A rolling, slipping, slightly cambered and steered wheel, 1 cm into the road.
    fn state() -> [f64; 14] {
        let axis = Vector3::new(0.1, 0.05, 1.0).normalize();
        let p = quat_axis_angle(&axis, 0.3);
        let a = rot(&p);
        let c = a * Vector3::new(0.01, 0.02, -0.03);
        let omega = Vector3::new(0.3, 33.0, -0.4);
        let pd = 0.5 * e_mat(&p).transpose() * omega;
        let r = Vector3::new(0.03, 0.2, 0.29) - c;
        let rd = Vector3::new(9.5, 0.4, 0.05);
        [
            r.x, r.y, r.z, p[0], p[1], p[2], p[3], rd.x, rd.y, rd.z, pd[0], pd[1], pd[2], pd[3],
        ]
    }

    #[test]
    fn magic_formula_matches_closed_form_and_derivative() {
        let mf = MagicFormula {
            b: 10.0,
            c: 1.9,
            e: 0.97,
        };
        for &s in &[-0.5, -0.1, -0.01, 0.0, 0.03, 0.2, 1.0] {
            let (y, dy) = mf.eval(s);
            let bs: f64 = 10.0 * s;
            let expect = (1.9 * (bs - 0.97 * (bs - bs.atan())).atan()).sin();
            assert!((y - expect).abs() < 1e-15, "{s}: {y} vs {expect}");
            let h = 1e-6;
            let fd = (mf.eval(s + h).0 - mf.eval(s - h).0) / (2.0 * h);
            assert!(
                (dy - fd).abs() < 1e-6 * (1.0 + fd.abs()),
                "{s}: {dy} vs {fd}"
            );
        }
        // Slope at zero: B C (cornering stiffness per unit load and μ).
        assert!((mf.eval(0.0).1 - 19.0).abs() < 1e-12);
    }

    #[test]
    fn jacobian_matches_finite_differences() {
        for profile in [false, true] {
            let t = tire(profile);
            let y0 = state();
            let road = [0.004, 0.1, 0.0];
            let ev = t.evaluate(&snap(&y0), road, true);
            assert!(ev.forces.fz > 0.0 && ev.forces.fx.abs() > 1.0 && ev.forces.fy.abs() > 1.0);
            for j in 0..14 {
                let h = 1e-7 * (1.0 + y0[j].abs());
                let (mut yp, mut ym) = (y0, y0);
                yp[j] += h;
                ym[j] -= h;
                let qp = t.evaluate(&snap(&yp), road, false).q;
                let qm = t.evaluate(&snap(&ym), road, false).q;
                for i in 0..7 {
                    let fd = (qp[i] - qm[i]) / (2.0 * h);
                    let an = ev.jac[(i, j)];
                    let scale = 1.0 + ev.jac.column(j).amax();
                    assert!(
                        (fd - an).abs() < 2e-5 * scale,
                        "profile {profile}: dQ{i}/dy{j}: analytic {an}, fd {fd}"
                    );
                }
            }
        }
    }

    /// Virtual power: `Q · (ṙ, ṗ)` is the power of the contact force at the material point,
    /// `F · (v_C + ω × (P − C))`.
    #[test]
    fn generalized_force_is_the_force_at_the_contact_point() {
        let t = tire(false);
        let y = state();
        let s = snap(&y);
        let ev = t.evaluate(&s, [0.0; 3], false);
        let v = SVector::<f64, 7>::from_column_slice(&y[7..14]);
        let w = 2.0 * e_mat(&s.p[0]) * s.pd[0];
        let c = s.a[0] * t.center;
        let v_c = s.rd[0] + w.cross(&c);
        let v_p = v_c + w.cross(&(-t.params.radius * Vector3::z()));
        let p_force = ev.forces.force.dot(&v_p);
        assert!((ev.q.dot(&v) - p_force).abs() < 1e-9 * p_force.abs().max(1.0));
    }

    #[test]
    fn no_force_when_lifted_off_or_pulling() {
        let t = tire(false);
        let mut y = state();
        y[2] += 0.02; // 1 cm above the road
        let ev = t.evaluate(&snap(&y), [0.0; 3], true);
        assert!(ev.forces.deflection < 0.0);
        assert_eq!(ev.q, SVector::<f64, 7>::zeros());
        assert_eq!(ev.jac, TireJacobian::zeros());
        // In contact but moving up fast: k δ + c δ̇ < 0, no pull.
        let mut y = state();
        y[9] = 10.0;
        let ev = t.evaluate(&snap(&y), [0.0; 3], false);
        assert!(ev.forces.deflection > 0.0);
        assert_eq!(ev.forces.fz, 0.0);
        assert_eq!(ev.q, SVector::<f64, 7>::zeros());
    }
}
