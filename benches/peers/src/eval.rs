//! Our equations from `System`, evaluated into preallocated workspaces: the saddle-point
//! accelerations (CVODE's right-hand side), the coordinate projection (CVODE's projection
//! function) and the stabilized index-2 GGL residual (IDA's residual). Only `System`'s trait
//! methods are used, so the peers see exactly the model our integrators see.

use mbsfmu::integrate::system::Mechanical;
use mbsfmu::mbs::system::System;
use nalgebra::DMatrix;

/// In-place LU with partial pivoting of a square matrix. Returns false when singular.
pub fn lu_factor(a: &mut DMatrix<f64>, piv: &mut [usize]) -> bool {
    let n = a.nrows();
    for k in 0..n {
        let mut p = k;
        let mut best = a[(k, k)].abs();
        for i in k + 1..n {
            let v = a[(i, k)].abs();
            if v > best {
                best = v;
                p = i;
            }
        }
        if best == 0.0 {
            return false;
        }
        piv[k] = p;
        if p != k {
            a.swap_rows(k, p);
        }
        let d = 1.0 / a[(k, k)];
        for i in k + 1..n {
            a[(i, k)] *= d;
        }
        for j in k + 1..n {
            let akj = a[(k, j)];
            if akj != 0.0 {
                for i in k + 1..n {
                    let l = a[(i, k)];
                    a[(i, j)] -= l * akj;
                }
            }
        }
    }
    true
}

pub fn lu_solve(a: &DMatrix<f64>, piv: &[usize], b: &mut [f64]) {
    let n = a.nrows();
    for k in 0..n {
        b.swap(k, piv[k]);
    }
    for j in 0..n {
        let bj = b[j];
        if bj != 0.0 {
            for i in j + 1..n {
                b[i] -= a[(i, j)] * bj;
            }
        }
    }
    for j in (0..n).rev() {
        b[j] /= a[(j, j)];
        let bj = b[j];
        for i in 0..j {
            b[i] -= a[(i, j)] * bj;
        }
    }
}

pub struct Eval {
    pub sys: System,
    pub nq: usize,
    pub nc: usize,
    m: DMatrix<f64>,
    jac: DMatrix<f64>,
    f: Vec<f64>,
    gamma: Vec<f64>,
    kkt: DMatrix<f64>,
    kkt_piv: Vec<usize>,
    rhs: Vec<f64>,
    phi: Vec<f64>,
    phi_t: Vec<f64>,
    gram: DMatrix<f64>,
    gram_piv: Vec<usize>,
    w: Vec<f64>,
    // Cached LU of M for the GGL residual (M depends on q only).
    m_lu: DMatrix<f64>,
    m_piv: Vec<usize>,
    m_q: Vec<f64>,
    m_valid: bool,
    m_diag: bool,
    /// Right-hand side / residual evaluations.
    pub evals: u64,
}

impl Eval {
    pub fn new(sys: System) -> Eval {
        let (nq, nc) = (sys.n_q(), sys.n_c());
        Eval {
            sys,
            nq,
            nc,
            m: DMatrix::zeros(nq, nq),
            jac: DMatrix::zeros(nc, nq),
            f: vec![0.0; nq],
            gamma: vec![0.0; nc],
            kkt: DMatrix::zeros(nq + nc, nq + nc),
            kkt_piv: vec![0; nq + nc],
            rhs: vec![0.0; nq + nc],
            phi: vec![0.0; nc],
            phi_t: vec![0.0; nc],
            gram: DMatrix::zeros(nc, nc),
            gram_piv: vec![0; nc],
            w: vec![0.0; nq.max(nc)],
            m_lu: DMatrix::zeros(nq, nq),
            m_piv: vec![0; nq],
            m_q: vec![f64::NAN; nq],
            m_valid: false,
            m_diag: false,
            evals: 0,
        }
    }

    /// `[M Φqᵀ; Φq 0] [a; λ] = [f; γ]`. Returns false when the matrix is singular.
    pub fn accelerations(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
        a: &mut [f64],
        lambda: Option<&mut [f64]>,
    ) -> bool {
        self.evals += 1;
        let (nq, nc) = (self.nq, self.nc);
        self.sys.mass_matrix(t, q, &mut self.m);
        self.sys.constraint_jacobian(t, q, &mut self.jac);
        self.sys.forces(t, q, v, &mut self.f);
        self.sys.acceleration_rhs(t, q, v, &mut self.gamma);
        self.kkt.fill(0.0);
        self.kkt.view_mut((0, 0), (nq, nq)).copy_from(&self.m);
        self.kkt.view_mut((nq, 0), (nc, nq)).copy_from(&self.jac);
        self.kkt.view_mut((0, nq), (nq, nc)).tr_copy_from(&self.jac);
        if !lu_factor(&mut self.kkt, &mut self.kkt_piv) {
            return false;
        }
        self.rhs[..nq].copy_from_slice(&self.f);
        self.rhs[nq..].copy_from_slice(&self.gamma);
        lu_solve(&self.kkt, &self.kkt_piv, &mut self.rhs);
        a.copy_from_slice(&self.rhs[..nq]);
        if let Some(l) = lambda {
            l.copy_from_slice(&self.rhs[nq..]);
        }
        true
    }

    /// Least-change projection: `q ← q − Φqᵀ(ΦqΦqᵀ)⁻¹Φ` (Gauss–Newton, to `tol`), then
    /// `v ← v − Φqᵀ(ΦqΦqᵀ)⁻¹(Φq v + Φt)`. When given, the error estimates `eq`, `ev` are
    /// projected onto the tangent space with the same (linear) projector. Returns false on
    /// failure (singular Gram matrix or no convergence).
    pub fn project(
        &mut self,
        t: f64,
        q: &mut [f64],
        v: &mut [f64],
        tol: f64,
        err: Option<(&mut [f64], &mut [f64])>,
    ) -> bool {
        let (nq, nc) = (self.nq, self.nc);
        let mut converged = false;
        for _ in 0..10 {
            self.sys.constraints(t, q, &mut self.phi);
            if self.phi.iter().fold(0.0f64, |m, x| m.max(x.abs())) <= tol {
                converged = true;
                break;
            }
            self.sys.constraint_jacobian(t, q, &mut self.jac);
            if !self.factor_gram() {
                return false;
            }
            lu_solve(&self.gram, &self.gram_piv, &mut self.phi);
            for j in 0..nq {
                let mut s = 0.0;
                for i in 0..nc {
                    s += self.jac[(i, j)] * self.phi[i];
                }
                q[j] -= s;
            }
        }
        if !converged {
            return false;
        }
        self.sys.constraint_jacobian(t, q, &mut self.jac);
        self.sys.constraint_time_derivative(t, q, &mut self.phi_t);
        if !self.factor_gram() {
            return false;
        }
        // v
        for i in 0..nc {
            let mut s = self.phi_t[i];
            for j in 0..nq {
                s += self.jac[(i, j)] * v[j];
            }
            self.phi[i] = s;
        }
        self.tangent_correct(v, false);
        if let Some((eq, ev)) = err {
            self.tangent_correct(eq, true);
            self.tangent_correct(ev, true);
        }
        true
    }

    fn factor_gram(&mut self) -> bool {
        self.gram.gemm(1.0, &self.jac, &self.jac.transpose(), 0.0);
        lu_factor(&mut self.gram, &mut self.gram_piv)
    }

    /// `x ← x − Φqᵀ G⁻¹ r` with `r = Φq x` (when `compute_r`) or the prepared `self.phi`.
    fn tangent_correct(&mut self, x: &mut [f64], compute_r: bool) {
        let (nq, nc) = (self.nq, self.nc);
        if compute_r {
            for i in 0..nc {
                let mut s = 0.0;
                for j in 0..nq {
                    s += self.jac[(i, j)] * x[j];
                }
                self.phi[i] = s;
            }
        }
        lu_solve(&self.gram, &self.gram_piv, &mut self.phi);
        for j in 0..nq {
            let mut s = 0.0;
            for i in 0..nc {
                s += self.jac[(i, j)] * self.phi[i];
            }
            x[j] -= s;
        }
    }

    /// GGL residual, paper 003 eq. (10), `y = (q, v, λ, η)`:
    /// `(q̇ − v + Φqᵀη, v̇ − M⁻¹(f − Φqᵀλ), Φq v + Φt, Φ)`.
    pub fn ggl_residual(&mut self, t: f64, y: &[f64], yp: &[f64], r: &mut [f64]) -> bool {
        self.evals += 1;
        let (nq, nc) = (self.nq, self.nc);
        let (q, rest) = y.split_at(nq);
        let (v, rest) = rest.split_at(nq);
        let (lam, eta) = rest.split_at(nc);
        self.sys.constraint_jacobian(t, q, &mut self.jac);
        self.sys.forces(t, q, v, &mut self.f);
        self.sys.constraints(t, q, &mut self.phi);
        self.sys.constraint_time_derivative(t, q, &mut self.phi_t);
        // M is cached per q (finite-difference columns in v, λ, η reuse it).
        if !self.m_valid || self.m_q.as_slice() != q {
            self.sys.mass_matrix(t, q, &mut self.m);
            self.m_diag = (0..nq).all(|j| (0..nq).all(|i| i == j || self.m[(i, j)] == 0.0));
            self.m_lu.copy_from(&self.m);
            if !self.m_diag && !lu_factor(&mut self.m_lu, &mut self.m_piv) {
                return false;
            }
            self.m_q.copy_from_slice(q);
            self.m_valid = true;
        }
        for j in 0..nq {
            let (mut sl, mut se) = (0.0, 0.0);
            for i in 0..nc {
                sl += self.jac[(i, j)] * lam[i];
                se += self.jac[(i, j)] * eta[i];
            }
            r[j] = yp[j] - v[j] + se;
            self.w[j] = self.f[j] - sl;
        }
        if self.m_diag {
            for j in 0..nq {
                self.w[j] /= self.m_lu[(j, j)];
            }
        } else {
            lu_solve(&self.m_lu, &self.m_piv, &mut self.w[..nq]);
        }
        for j in 0..nq {
            r[nq + j] = yp[nq + j] - self.w[j];
        }
        for i in 0..nc {
            let mut s = self.phi_t[i];
            for j in 0..nq {
                s += self.jac[(i, j)] * v[j];
            }
            r[2 * nq + i] = s;
            r[2 * nq + nc + i] = self.phi[i];
        }
        true
    }
}
