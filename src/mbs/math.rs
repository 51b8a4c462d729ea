//! Euler-parameter (unit quaternion) kinematics, after Haug, *Computer-Aided Kinematics and
//! Dynamics of Mechanical Systems*, ch. 6 and 11. `p = (e0, e1, e2, e3)`, `e = (e1, e2, e3)`.
//!
//! - `A(p) = (e0² − eᵀe) I + 2 e eᵀ + 2 e0 ẽ` (body → global)
//! - `G(p) = [−e, −ẽ + e0 I]`, `E(p) = [−e, ẽ + e0 I]`, `A = E Gᵀ`
//! - angular velocity: global `ω = 2 E ṗ`, body `ω' = 2 G ṗ`
//! - `B(p, a') = ∂(A(p) a')/∂p = 2 [(e0 I + ẽ) a', e a'ᵀ − (e0 I + ẽ) ã']`, linear in `p`.

use nalgebra::{Matrix3, Matrix3x4, Matrix4, Vector3, Vector4};

pub fn skew(a: &Vector3<f64>) -> Matrix3<f64> {
    Matrix3::new(0.0, -a.z, a.y, a.z, 0.0, -a.x, -a.y, a.x, 0.0)
}

pub fn rot(p: &Vector4<f64>) -> Matrix3<f64> {
    let e0 = p[0];
    let e = Vector3::new(p[1], p[2], p[3]);
    Matrix3::identity() * (e0 * e0 - e.dot(&e)) + 2.0 * e * e.transpose() + 2.0 * e0 * skew(&e)
}

pub fn g_mat(p: &Vector4<f64>) -> Matrix3x4<f64> {
    let e = Vector3::new(p[1], p[2], p[3]);
    let m = -skew(&e) + Matrix3::identity() * p[0];
    let mut g = Matrix3x4::zeros();
    g.set_column(0, &(-e));
    g.fixed_view_mut::<3, 3>(0, 1).copy_from(&m);
    g
}

pub fn e_mat(p: &Vector4<f64>) -> Matrix3x4<f64> {
    let e = Vector3::new(p[1], p[2], p[3]);
    let m = skew(&e) + Matrix3::identity() * p[0];
    let mut g = Matrix3x4::zeros();
    g.set_column(0, &(-e));
    g.fixed_view_mut::<3, 3>(0, 1).copy_from(&m);
    g
}

/// `B(p, a') = ∂(A(p) a')/∂p`.
pub fn b_mat(p: &Vector4<f64>, a: &Vector3<f64>) -> Matrix3x4<f64> {
    let e = Vector3::new(p[1], p[2], p[3]);
    let m = Matrix3::identity() * p[0] + skew(&e);
    let mut b = Matrix3x4::zeros();
    b.set_column(0, &(2.0 * m * a));
    b.fixed_view_mut::<3, 3>(0, 1)
        .copy_from(&(2.0 * (e * a.transpose() - m * skew(a))));
    b
}

/// `B(p, a') w` without forming `B`: the element layer's point and vector velocities
/// (`B(p, a') ṗ`) and convective terms (`B(ṗ, a') ṗ`) at every evaluation. The same
/// products and sums in the same order as `b_mat(p, a) * w` with nalgebra's matrix products
/// (column by column), less the products with the structural zeros of `ã'`, so the result is
/// the same to the bit, up to the sign of an exact zero (test
/// `b_mul_equals_the_formed_product`). Forming the 3 × 4 matrix cost about 150 instructions,
/// 6 % of the suspension corner's BDF run through the FMU.
#[inline]
pub fn b_mul(p: &Vector4<f64>, a: &Vector3<f64>, w: &Vector4<f64>) -> Vector3<f64> {
    let (p0, e1, e2, e3) = (p[0], p[1], p[2], p[3]);
    let (ax, ay, az) = (a.x, a.y, a.z);
    // m = e0 I + ẽ, row by row.
    let m = [[p0, -e3, e2], [e3, p0, -e1], [-e2, e1, p0]];
    let e = [e1, e2, e3];
    let mut out = [0.0; 3];
    for i in 0..3 {
        let r = &m[i];
        let b0 = 2.0 * ((r[0] * ax + r[1] * ay) + r[2] * az);
        // (m ã')_ij with ã' = [[0, −a_z, a_y], [a_z, 0, −a_x], [−a_y, a_x, 0]].
        let s0 = r[1] * az + r[2] * -ay;
        let s1 = r[0] * -az + r[2] * ax;
        let s2 = r[0] * ay + r[1] * -ax;
        let b1 = 2.0 * (e[i] * ax - s0);
        let b2 = 2.0 * (e[i] * ay - s1);
        let b3 = 2.0 * (e[i] * az - s2);
        out[i] = ((b0 * w[0] + b1 * w[1]) + b2 * w[2]) + b3 * w[3];
    }
    Vector3::new(out[0], out[1], out[2])
}

/// `∂(B(p, a')ᵀ w)/∂p` for fixed `w` (constant in `p` because `B` is linear in `p`): column
/// `i` is `B(e_i, a')ᵀ w`.
pub fn bt_w_jacobian(a: &Vector3<f64>, w: &Vector3<f64>) -> Matrix4<f64> {
    let mut out = Matrix4::zeros();
    for i in 0..4 {
        let mut ei = Vector4::zeros();
        ei[i] = 1.0;
        out.set_column(i, &(b_mat(&ei, a).transpose() * w));
    }
    out
}

/// Unit quaternion `(w, x, y, z)` of a rotation by `angle` about the unit `axis`.
pub fn quat_axis_angle(axis: &Vector3<f64>, angle: f64) -> Vector4<f64> {
    let (s, c) = (0.5 * angle).sin_cos();
    let a = axis.normalize();
    Vector4::new(c, s * a.x, s * a.y, s * a.z)
}

/// Wrap an angle into (−π, π].
pub fn wrap_pi(x: f64) -> f64 {
    let two_pi = 2.0 * std::f64::consts::PI;
    // `x % 2π` is `x` itself below 2π in magnitude (exactly): skip the library call there,
    // the usual case (it showed in the profile of a double pendulum's evaluation).
    let mut y = if x.abs() < two_pi { x } else { x % two_pi };
    if y <= -std::f64::consts::PI {
        y += two_pi;
    } else if y > std::f64::consts::PI {
        y -= two_pi;
    }
    y
}

/// The representative of the angle `raw` (known modulo 2π) nearest to `reference`.
pub fn unwrap_near(raw: f64, reference: f64) -> f64 {
    reference + wrap_pi(raw - reference)
}

/// The SVD of `m`, or `None` where nalgebra's would not return: an empty matrix has none, and
/// non-finite entries make its iteration run forever (so may entries near the overflow
/// limit); the iterations are bounded (`try_svd`).
pub fn bounded_svd(
    m: nalgebra::DMatrix<f64>,
    u: bool,
    v: bool,
) -> Option<nalgebra::SVD<f64, nalgebra::Dyn, nalgebra::Dyn>> {
    if m.is_empty() || m.iter().any(|x| !x.is_finite() || x.abs() > 1e150) {
        return None;
    }
    m.try_svd(u, v, f64::EPSILON, 10_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_p() -> Vector4<f64> {
        let p = Vector4::new(0.8, -0.3, 0.4, 0.2);
        p / p.norm()
    }

    #[test]
    fn rotation_matrix_is_orthonormal_and_matches_nalgebra() {
        let p = sample_p();
        let a = rot(&p);
        assert!((a * a.transpose() - Matrix3::identity()).norm() < 1e-14);
        let q = nalgebra::UnitQuaternion::from_quaternion(nalgebra::Quaternion::new(
            p[0], p[1], p[2], p[3],
        ));
        assert!((q.to_rotation_matrix().matrix() - a).norm() < 1e-14);
        assert!((e_mat(&p) * g_mat(&p).transpose() - a).norm() < 1e-14);
    }

    #[test]
    fn b_matrix_is_the_derivative_of_a_times_vector() {
        let p = Vector4::new(0.7, -0.2, 0.5, 0.3); // need not be unit: B is ∂/∂p of the formula
        let s = Vector3::new(0.3, -1.2, 0.8);
        let b = b_mat(&p, &s);
        let h = 1e-6;
        for i in 0..4 {
            let (mut pp, mut pm) = (p, p);
            pp[i] += h;
            pm[i] -= h;
            let fd = (rot(&pp) * s - rot(&pm) * s) / (2.0 * h);
            assert!((b.column(i) - fd).norm() < 1e-9);
        }
        let w = Vector3::new(0.4, 0.1, -0.9);
        let jac = bt_w_jacobian(&s, &w);
        for i in 0..4 {
            let (mut pp, mut pm) = (p, p);
            pp[i] += h;
            pm[i] -= h;
            let fd = (b_mat(&pp, &s).transpose() * w - b_mat(&pm, &s).transpose() * w) / (2.0 * h);
            assert!((jac.column(i) - fd).norm() < 1e-9);
        }
    }

    /// `b_mul` against `b_mat(p, a) * w` bit for bit (it repeats nalgebra's products and sums
    /// in their order) over a spread of magnitudes and signs, and `b_mat` against its
    /// definition above, so `b_mul` is the derivative too.
    #[test]
    fn b_mul_equals_the_formed_product() {
        // A small deterministic generator: no dependency for a few hundred numbers.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = (state >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
            (2.0 * u - 1.0) * 10f64.powi((state % 7) as i32 - 3)
        };
        for _ in 0..2000 {
            let p = Vector4::new(next(), next(), next(), next());
            let a = Vector3::new(next(), next(), next());
            let w = Vector4::new(next(), next(), next(), next());
            let (got, want) = (b_mul(&p, &a, &w), b_mat(&p, &a) * w);
            for i in 0..3 {
                assert_eq!(got[i].to_bits(), want[i].to_bits(), "{p:?} {a:?} {w:?}");
            }
        }
    }

    #[test]
    fn angular_velocity_from_quaternion_rate() {
        // p(t) = rotation by ω t about an axis: ω = 2 E ṗ.
        let axis = Vector3::new(1.0, 2.0, -0.5).normalize();
        let w = 1.7;
        let t = 0.4;
        let h = 1e-6;
        let p = quat_axis_angle(&axis, w * t);
        let pd =
            (quat_axis_angle(&axis, w * (t + h)) - quat_axis_angle(&axis, w * (t - h))) / (2.0 * h);
        assert!((2.0 * e_mat(&p) * pd - axis * w).norm() < 1e-8);
        assert!((2.0 * g_mat(&p) * pd - rot(&p).transpose() * axis * w).norm() < 1e-8);
    }

    #[test]
    fn wrapping() {
        use std::f64::consts::PI;
        assert!((wrap_pi(3.0 * PI / 2.0) + PI / 2.0).abs() < 1e-15);
        assert_eq!(wrap_pi(PI), PI);
        assert!((wrap_pi(-PI) - PI).abs() < 1e-15);
        assert!((unwrap_near(0.1, 6.2) - (0.1 + 2.0 * PI)).abs() < 1e-12);
    }
}
