//! Small systems written by hand against the traits, with analytic everything: for testing
//! integrators independently of the engine, and as an example of implementing the traits.

use super::sparse::SparseStructure;
use super::system::{ConstraintHessians, Excitations, ForceJacobians, Mechanical, StepHooks};
use super::MechState;
use nalgebra::{DMatrix, DVector};

/// Paper 003's benchmark in planar Cartesian coordinates: `n` particles of mass `m` joined by
/// massless rods of length `l`, the first rod hanging from a suspension point
/// `s(t) = (2 + ax sin ωt, ay sin ωt)`, gravity `g` along −y. Coordinates
/// `q = (x1, y1, …, xn, yn)`; constraints `φ_k = ½(|r_k − r_{k−1}|² − l²)`, `r_0 = s(t)`.
/// Excitations: `u_0 = s_x`, `u_1 = s_y`.
#[derive(Debug, Clone)]
pub struct CartesianChain {
    pub n: usize,
    pub m: f64,
    pub l: f64,
    pub g: f64,
    pub ax: f64,
    pub ay: f64,
    pub omega: f64,
    offset: [f64; 2],
}

impl CartesianChain {
    pub fn new(n: usize, ax: f64, ay: f64, omega: f64) -> Self {
        CartesianChain {
            n,
            m: 1.0,
            l: 1.0,
            g: 9.81,
            ax,
            ay,
            omega,
            offset: [0.0; 2],
        }
    }

    /// The paper's excitation: amplitudes 0.3 / 0.2 m at ω = 2π·0.05 rad/s.
    pub fn paper(n: usize) -> Self {
        Self::new(n, 0.3, 0.2, 2.0 * std::f64::consts::PI * 0.05)
    }

    /// Suspension position, velocity, acceleration.
    pub fn suspension(&self, t: f64) -> [[f64; 2]; 3] {
        let (s, c) = (self.omega * t).sin_cos();
        let w = self.omega;
        [
            [
                2.0 + self.ax * s + self.offset[0],
                self.ay * s + self.offset[1],
            ],
            [self.ax * w * c, self.ay * w * c],
            [-self.ax * w * w * s, -self.ay * w * w * s],
        ]
    }

    fn point(&self, q: &[f64], t: f64, k: usize) -> [f64; 2] {
        if k == 0 {
            self.suspension(t)[0]
        } else {
            [q[2 * (k - 1)], q[2 * (k - 1) + 1]]
        }
    }

    fn vel(&self, v: &[f64], t: f64, k: usize) -> [f64; 2] {
        if k == 0 {
            self.suspension(t)[1]
        } else {
            [v[2 * (k - 1)], v[2 * (k - 1) + 1]]
        }
    }

    /// Hanging straight down from the suspension at `t`, velocities projected onto the
    /// velocity constraints (minimal norm), multipliers from the saddle-point system.
    pub fn consistent_state(&mut self, t: f64) -> MechState {
        let n = self.n;
        let s = self.suspension(t)[0];
        let mut q = vec![0.0; 2 * n];
        for k in 0..n {
            q[2 * k] = s[0];
            q[2 * k + 1] = s[1] - (k as f64 + 1.0) * self.l;
        }
        let mut jac = DMatrix::zeros(n, 2 * n);
        self.constraint_jacobian(t, &q, &mut jac);
        let mut phi_t = vec![0.0; n];
        self.constraint_time_derivative(t, &q, &mut phi_t);
        let jjt = &jac * jac.transpose();
        let mu = jjt
            .lu()
            .solve(&(-DVector::from_vec(phi_t)))
            .expect("chain Jacobian has full rank");
        let v = (jac.transpose() * mu).as_slice().to_vec();
        let lambda = saddle_point_multipliers(self, t, &q, &v);
        MechState { t, q, v, lambda }
    }
}

/// Accelerations' multipliers from `[M Φqᵀ; Φq 0] [a; λ] = [f; γ]` (dense, for tests).
pub fn saddle_point_multipliers<S: Mechanical + ?Sized>(
    sys: &mut S,
    t: f64,
    q: &[f64],
    v: &[f64],
) -> Vec<f64> {
    saddle_point_solve(sys, t, q, v).1
}

/// Accelerations and multipliers from the saddle-point system (dense, for tests).
pub fn saddle_point_solve<S: Mechanical + ?Sized>(
    sys: &mut S,
    t: f64,
    q: &[f64],
    v: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let (nq, nc) = (sys.n_q(), sys.n_c());
    let mut m = DMatrix::zeros(nq, nq);
    let mut jac = DMatrix::zeros(nc, nq);
    let mut f = vec![0.0; nq];
    let mut gamma = vec![0.0; nc];
    sys.mass_matrix(t, q, &mut m);
    sys.constraint_jacobian(t, q, &mut jac);
    sys.forces(t, q, v, &mut f);
    sys.acceleration_rhs(t, q, v, &mut gamma);
    let mut a = DMatrix::zeros(nq + nc, nq + nc);
    a.view_mut((0, 0), (nq, nq)).copy_from(&m);
    a.view_mut((0, nq), (nq, nc)).copy_from(&jac.transpose());
    a.view_mut((nq, 0), (nc, nq)).copy_from(&jac);
    let rhs = DVector::from_iterator(nq + nc, f.iter().chain(gamma.iter()).copied());
    let x = a.lu().solve(&rhs).expect("saddle-point matrix is regular");
    (
        x.rows(0, nq).as_slice().to_vec(),
        x.rows(nq, nc).as_slice().to_vec(),
    )
}

impl Mechanical for CartesianChain {
    fn n_q(&self) -> usize {
        2 * self.n
    }
    fn sparse_structure(&mut self) -> Option<&mut dyn SparseStructure> {
        Some(self)
    }
    fn n_c(&self) -> usize {
        self.n
    }
    fn mass_matrix(&mut self, _t: f64, _q: &[f64], m: &mut DMatrix<f64>) {
        m.fill(0.0);
        m.fill_diagonal(self.m);
    }
    fn forces(&mut self, _t: f64, _q: &[f64], _v: &[f64], f: &mut [f64]) {
        for k in 0..self.n {
            f[2 * k] = 0.0;
            f[2 * k + 1] = -self.m * self.g;
        }
    }
    fn constraints(&mut self, t: f64, q: &[f64], phi: &mut [f64]) {
        for k in 1..=self.n {
            let (a, b) = (self.point(q, t, k), self.point(q, t, k - 1));
            let d = [a[0] - b[0], a[1] - b[1]];
            phi[k - 1] = 0.5 * (d[0] * d[0] + d[1] * d[1] - self.l * self.l);
        }
    }
    fn constraint_jacobian(&mut self, t: f64, q: &[f64], jac: &mut DMatrix<f64>) {
        jac.fill(0.0);
        for k in 1..=self.n {
            let (a, b) = (self.point(q, t, k), self.point(q, t, k - 1));
            let d = [a[0] - b[0], a[1] - b[1]];
            jac[(k - 1, 2 * (k - 1))] = d[0];
            jac[(k - 1, 2 * (k - 1) + 1)] = d[1];
            if k > 1 {
                jac[(k - 1, 2 * (k - 2))] = -d[0];
                jac[(k - 1, 2 * (k - 2) + 1)] = -d[1];
            }
        }
    }
    fn constraint_time_derivative(&mut self, t: f64, q: &[f64], phi_t: &mut [f64]) {
        phi_t.fill(0.0);
        let (a, s) = (self.point(q, t, 1), self.suspension(t));
        let d = [a[0] - s[0][0], a[1] - s[0][1]];
        phi_t[0] = -(d[0] * s[1][0] + d[1] * s[1][1]);
    }
    fn acceleration_rhs(&mut self, t: f64, q: &[f64], v: &[f64], gamma: &mut [f64]) {
        for k in 1..=self.n {
            let (va, vb) = (self.vel(v, t, k), self.vel(v, t, k - 1));
            let dd = [va[0] - vb[0], va[1] - vb[1]];
            gamma[k - 1] = -(dd[0] * dd[0] + dd[1] * dd[1]);
        }
        let (a, s) = (self.point(q, t, 1), self.suspension(t));
        let d = [a[0] - s[0][0], a[1] - s[0][1]];
        gamma[0] += d[0] * s[2][0] + d[1] * s[2][1];
    }
}

/// `M` is diagonal; rod `k` couples particles `k − 1` and `k`.
impl SparseStructure for CartesianChain {
    fn mass_pattern(&mut self) -> Vec<(usize, usize)> {
        (0..2 * self.n).map(|i| (i, i)).collect()
    }
    fn constraint_jacobian_pattern(&mut self) -> Vec<(usize, usize)> {
        let mut out = Vec::with_capacity(4 * self.n);
        for k in 1..=self.n {
            out.push((k - 1, 2 * (k - 1)));
            out.push((k - 1, 2 * (k - 1) + 1));
            if k > 1 {
                out.push((k - 1, 2 * (k - 2)));
                out.push((k - 1, 2 * (k - 2) + 1));
            }
        }
        out
    }
    fn mass_matrix_values(&mut self, _t: f64, _q: &[f64], vals: &mut [f64]) {
        vals.fill(self.m);
    }
    fn constraint_jacobian_values(&mut self, t: f64, q: &[f64], vals: &mut [f64]) {
        let mut n = 0;
        for k in 1..=self.n {
            let (a, b) = (self.point(q, t, k), self.point(q, t, k - 1));
            let d = [a[0] - b[0], a[1] - b[1]];
            vals[n] = d[0];
            vals[n + 1] = d[1];
            n += 2;
            if k > 1 {
                vals[n] = -d[0];
                vals[n + 1] = -d[1];
                n += 2;
            }
        }
    }
    fn constraint_values(
        &mut self,
        t: f64,
        q: &[f64],
        phi: &mut [f64],
        jac_vals: &mut [f64],
        phi_t: &mut [f64],
    ) {
        self.constraints(t, q, phi);
        self.constraint_jacobian_values(t, q, jac_vals);
        self.constraint_time_derivative(t, q, phi_t);
    }
}

impl ForceJacobians for CartesianChain {
    fn force_jacobians(
        &mut self,
        _t: f64,
        _q: &[f64],
        _v: &[f64],
        df_dq: &mut DMatrix<f64>,
        df_dv: &mut DMatrix<f64>,
    ) {
        df_dq.fill(0.0);
        df_dv.fill(0.0);
    }
}

impl ConstraintHessians for CartesianChain {
    fn constraint_force_jacobian(
        &mut self,
        _t: f64,
        _q: &[f64],
        lambda: &[f64],
        out: &mut DMatrix<f64>,
    ) {
        out.fill(0.0);
        for k in 1..=self.n {
            let l = lambda[k - 1];
            let (i, j) = (2 * (k - 1), if k > 1 { Some(2 * (k - 2)) } else { None });
            for c in 0..2 {
                out[(i + c, i + c)] += l;
                if let Some(j) = j {
                    out[(j + c, j + c)] += l;
                    out[(i + c, j + c)] -= l;
                    out[(j + c, i + c)] -= l;
                }
            }
        }
    }
    fn mass_times_accel_jacobian(
        &mut self,
        _t: f64,
        _q: &[f64],
        _a: &[f64],
        out: &mut DMatrix<f64>,
    ) {
        out.fill(0.0);
    }
}

impl Excitations for CartesianChain {
    fn n_excitations(&self) -> usize {
        2
    }
    fn excitation(&mut self, t: f64, i: usize) -> f64 {
        self.suspension(t)[0][i]
    }
    fn set_excitation_offset(&mut self, i: usize, delta: f64) {
        self.offset[i] = delta;
    }
}

impl StepHooks for CartesianChain {
    fn accept_step(&mut self, _t: f64, _q: &[f64], _v: &[f64], _lambda: Option<&[f64]>) {}
}

/// Undamped linear oscillator `m ẍ = −k x`, no constraints: closed-form solution
/// `x = x0 cos ωt + v0/ω sin ωt`. For convergence-order tests of every method.
#[derive(Debug, Clone)]
pub struct Oscillator {
    pub m: f64,
    pub k: f64,
    pub c: f64,
}

impl Oscillator {
    pub fn exact(&self, x0: f64, v0: f64, t: f64) -> (f64, f64) {
        assert!(
            self.c == 0.0,
            "closed form only for the undamped oscillator"
        );
        let w = (self.k / self.m).sqrt();
        let (s, c) = (w * t).sin_cos();
        (x0 * c + v0 / w * s, -x0 * w * s + v0 * c)
    }
}

impl Mechanical for Oscillator {
    fn n_q(&self) -> usize {
        1
    }
    fn n_c(&self) -> usize {
        0
    }
    fn mass_matrix(&mut self, _t: f64, _q: &[f64], m: &mut DMatrix<f64>) {
        m[(0, 0)] = self.m;
    }
    fn forces(&mut self, _t: f64, q: &[f64], v: &[f64], f: &mut [f64]) {
        f[0] = -self.k * q[0] - self.c * v[0];
    }
    fn constraints(&mut self, _t: f64, _q: &[f64], _phi: &mut [f64]) {}
    fn constraint_jacobian(&mut self, _t: f64, _q: &[f64], _jac: &mut DMatrix<f64>) {}
    fn constraint_time_derivative(&mut self, _t: f64, _q: &[f64], _phi_t: &mut [f64]) {}
    fn acceleration_rhs(&mut self, _t: f64, _q: &[f64], _v: &[f64], _gamma: &mut [f64]) {}
}

impl ForceJacobians for Oscillator {
    fn force_jacobians(
        &mut self,
        _t: f64,
        _q: &[f64],
        _v: &[f64],
        df_dq: &mut DMatrix<f64>,
        df_dv: &mut DMatrix<f64>,
    ) {
        df_dq[(0, 0)] = -self.k;
        df_dv[(0, 0)] = -self.c;
    }
}

impl ConstraintHessians for Oscillator {
    fn constraint_force_jacobian(
        &mut self,
        _t: f64,
        _q: &[f64],
        _lambda: &[f64],
        out: &mut DMatrix<f64>,
    ) {
        out.fill(0.0);
    }
    fn mass_times_accel_jacobian(
        &mut self,
        _t: f64,
        _q: &[f64],
        _a: &[f64],
        out: &mut DMatrix<f64>,
    ) {
        out.fill(0.0);
    }
}

impl Excitations for Oscillator {
    fn n_excitations(&self) -> usize {
        0
    }
    fn excitation(&mut self, _t: f64, _i: usize) -> f64 {
        0.0
    }
    fn set_excitation_offset(&mut self, _i: usize, _delta: f64) {}
}

impl StepHooks for Oscillator {
    fn accept_step(&mut self, _t: f64, _q: &[f64], _v: &[f64], _lambda: Option<&[f64]>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written derivatives against central differences.
    #[test]
    fn chain_derivatives_match_finite_differences() {
        let mut sys = CartesianChain::paper(3);
        let t = 3.7;
        let x = sys.consistent_state(t);
        let mut q = x.q.clone();
        q[1] += 0.1;
        q[4] -= 0.2;
        let v: Vec<f64> = (0..6).map(|i| 0.3 * i as f64 - 0.5).collect();
        let (nq, nc) = (6, 3);
        let mut jac = DMatrix::zeros(nc, nq);
        sys.constraint_jacobian(t, &q, &mut jac);
        let h = 1e-6;
        let phi_at = |sys: &mut CartesianChain, t: f64, q: &[f64]| {
            let mut p = vec![0.0; nc];
            sys.constraints(t, q, &mut p);
            p
        };
        for j in 0..nq {
            let (mut qp, mut qm) = (q.clone(), q.clone());
            qp[j] += h;
            qm[j] -= h;
            let (pp, pm) = (phi_at(&mut sys, t, &qp), phi_at(&mut sys, t, &qm));
            for i in 0..nc {
                assert!((jac[(i, j)] - (pp[i] - pm[i]) / (2.0 * h)).abs() < 1e-7);
            }
        }
        let mut phi_t = vec![0.0; nc];
        sys.constraint_time_derivative(t, &q, &mut phi_t);
        let (pp, pm) = (phi_at(&mut sys, t + h, &q), phi_at(&mut sys, t - h, &q));
        for i in 0..nc {
            assert!((phi_t[i] - (pp[i] - pm[i]) / (2.0 * h)).abs() < 1e-7);
        }
        // γ: the second total derivative of Φ along q(t) = q + v s + a s²/2 equals Φq a − γ.
        let a: Vec<f64> = (0..6).map(|i| 0.1 * i as f64).collect();
        let mut gamma = vec![0.0; nc];
        sys.acceleration_rhs(t, &q, &v, &mut gamma);
        let hh = 1e-4;
        let path = |s: f64| -> Vec<f64> {
            (0..nq)
                .map(|j| q[j] + v[j] * s + 0.5 * a[j] * s * s)
                .collect()
        };
        let (p0, pp, pm) = (
            phi_at(&mut sys, t, &path(0.0)),
            phi_at(&mut sys, t + hh, &path(hh)),
            phi_at(&mut sys, t - hh, &path(-hh)),
        );
        let ja = &jac * DVector::from_vec(a.clone());
        for i in 0..nc {
            let second = (pp[i] - 2.0 * p0[i] + pm[i]) / (hh * hh);
            assert!(
                (second - (ja[i] - gamma[i])).abs() < 1e-5,
                "row {i}: {second} vs {}",
                ja[i] - gamma[i]
            );
        }
        // ∂(Φqᵀλ)/∂q.
        let lambda = [1.5, -0.7, 2.2];
        let mut hess = DMatrix::zeros(nq, nq);
        sys.constraint_force_jacobian(t, &q, &lambda, &mut hess);
        let lam = DVector::from_row_slice(&lambda);
        for j in 0..nq {
            let (mut qp, mut qm) = (q.clone(), q.clone());
            qp[j] += h;
            qm[j] -= h;
            let (mut jp, mut jm) = (DMatrix::zeros(nc, nq), DMatrix::zeros(nc, nq));
            sys.constraint_jacobian(t, &qp, &mut jp);
            sys.constraint_jacobian(t, &qm, &mut jm);
            let col = (jp.transpose() * &lam - jm.transpose() * &lam) / (2.0 * h);
            for i in 0..nq {
                assert!((hess[(i, j)] - col[i]).abs() < 1e-7);
            }
        }
    }

    #[test]
    fn chain_consistent_state_satisfies_constraints() {
        let mut sys = CartesianChain::paper(5);
        let x = sys.consistent_state(0.0);
        let mut phi = vec![0.0; 5];
        sys.constraints(0.0, &x.q, &mut phi);
        assert!(phi.iter().all(|p| p.abs() < 1e-12));
        let mut jac = DMatrix::zeros(5, 10);
        sys.constraint_jacobian(0.0, &x.q, &mut jac);
        let mut phi_t = vec![0.0; 5];
        sys.constraint_time_derivative(0.0, &x.q, &mut phi_t);
        let res = &jac * DVector::from_vec(x.v.clone()) + DVector::from_vec(phi_t);
        assert!(res.norm() < 1e-12);
    }

    #[test]
    fn chain_sparse_fills_equal_dense() {
        let mut sys = CartesianChain::paper(4);
        let t = 1.3;
        let q: Vec<f64> = (0..8).map(|i| 0.7 * (i as f64).cos()).collect();
        let s = sys.sparse_structure().unwrap();
        let (mp, jp) = (s.mass_pattern(), s.constraint_jacobian_pattern());
        let (mut mv, mut jv) = (vec![0.0; mp.len()], vec![0.0; jp.len()]);
        s.mass_matrix_values(t, &q, &mut mv);
        s.constraint_jacobian_values(t, &q, &mut jv);
        let (mut md, mut jd) = (DMatrix::zeros(8, 8), DMatrix::zeros(4, 8));
        sys.mass_matrix(t, &q, &mut md);
        sys.constraint_jacobian(t, &q, &mut jd);
        let (mut ms, mut js) = (DMatrix::zeros(8, 8), DMatrix::zeros(4, 8));
        for (&(r, c), v) in mp.iter().zip(&mv) {
            ms[(r, c)] += v;
        }
        for (&(r, c), v) in jp.iter().zip(&jv) {
            js[(r, c)] += v;
        }
        assert_eq!(ms, md);
        assert_eq!(js, jd);
    }
}
