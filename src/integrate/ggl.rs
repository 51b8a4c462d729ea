//! The stabilized index-2 (Gear–Gupta–Leimkuhler) equations of motion in the residual form of
//! an explicit multibody formalism, paper 003 eq. (10):
//!
//! ```text
//!   F(y, ẏ) = P ẏ + g(t, y),   y = (q, v, λ, η),   P = diag(I_{2 n_q}, 0)
//!   g = ( −v + Φ_qᵀ η,  −M⁻¹ (f − Φ_qᵀ λ),  Φ_q v + Φ_t,  Φ )
//! ```
//!
//! `∂F/∂y = ∂g/∂y` (called `G` here) does not depend on `ẏ`, so the iteration matrix is
//! `J = α P + G` and the partitioned update (24) is just a new `α` on the diagonal.
//!
//! One residual evaluation (#fc) = one evaluation of `g`: forces, constraints, constraint
//! Jacobian and `Φ_t`, and one solve with `M`. `M` is factored once per distinct `(t, q)` (the
//! factorization is cached, so the finite-difference columns for `v`, `λ`, `η` reuse it). When
//! the system reports its sparse structure ([`SparseStructure`]: the engine does), only the
//! structural nonzeros of `M` and `Φ_q` are filled, `M` is factored block by block (the
//! connected components of its pattern: a diagonal entry per translational coordinate, a 4×4
//! block per set of Euler parameters) and the `Φ_q` products run over the nonzeros; otherwise
//! `M` and `Φ_q` are dense, `M` is factored by `L D Lᵀ` (by LU where that meets a pivot that
//! is not positive), with a diagonal fast path. (On the pendulum
//! chain N = 32 zeroing and filling the dense `M` and scanning it for off-diagonal entries were
//! a quarter of the BDF's time.) A singular `M` (e.g. Euler-parameter inertia without
//! augmentation) is reported as `IntegrateError::Singular`: the explicit form needs a regular
//! mass matrix.

#![allow(clippy::needless_range_loop)] // index-heavy numerical kernels

use super::linalg::DenseLu;
use super::{IntegrateError, MultibodySystem};
use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

/// Residual evaluator with preallocated workspaces and a cached factorization of `M`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ggl {
    pub nq: usize,
    pub nc: usize,
    pub ny: usize,
    /// Residual evaluations (#fc) so far.
    pub evals: u64,
    m: DMatrix<f64>,
    mass: MassFactor,
    /// Whether the system was asked for its sparse structure yet (on first use).
    sparse_checked: bool,
    sparse: Option<SparseForms>,
    m_valid: bool,
    m_t: f64,
    m_q: Vec<f64>,
    phi_q: DMatrix<f64>,
    phi_q2: DMatrix<f64>,
    f: Vec<f64>,
    r: Vec<f64>,
    phi: Vec<f64>,
    phi_t: Vec<f64>,
    // Analytic-Jacobian workspaces.
    fq: DMatrix<f64>,
    fv: DMatrix<f64>,
    h: DMatrix<f64>,
    col: Vec<f64>,
    unit: Vec<f64>,
}

impl Ggl {
    pub fn new(nq: usize, nc: usize) -> Self {
        Ggl {
            nq,
            nc,
            ny: 2 * nq + 2 * nc,
            evals: 0,
            m: DMatrix::zeros(nq, nq),
            mass: MassFactor::new(nq),
            sparse_checked: false,
            sparse: None,
            m_valid: false,
            m_t: f64::NAN,
            m_q: vec![f64::NAN; nq],
            phi_q: DMatrix::zeros(nc, nq),
            phi_q2: DMatrix::zeros(nc, nq),
            f: vec![0.0; nq],
            r: vec![0.0; nq],
            phi: vec![0.0; nc],
            phi_t: vec![0.0; nc],
            fq: DMatrix::zeros(nq, nq),
            fv: DMatrix::zeros(nq, nq),
            h: DMatrix::zeros(nq, nq),
            col: vec![0.0; nq],
            unit: vec![0.0; nc],
        }
    }

    /// Use dense `M` and `Φ_q` even when the system reports a sparse structure (the reference
    /// path the sparse one is tested against).
    pub fn use_dense(&mut self) {
        self.sparse_checked = true;
        self.sparse = None;
        self.mass = MassFactor::new(self.nq);
        self.m_valid = false;
    }

    /// Forget the cached factorization of `M` (system parameters or excitation offsets changed).
    pub fn invalidate_mass(&mut self) {
        self.m_valid = false;
    }

    /// Factor `M(t, q)` unless the cached factorization is for exactly this `(t, q)`.
    fn prepare_mass<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        q: &[f64],
    ) -> Result<(), IntegrateError> {
        if self.m_valid
            && self.m_t.to_bits() == t.to_bits()
            && self
                .m_q
                .iter()
                .zip(q)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        {
            return Ok(());
        }
        self.m_valid = false;
        self.check_sparse(sys);
        match (&mut self.sparse, sys.sparse_structure()) {
            (Some(sp), Some(ss)) => {
                ss.mass_matrix_values(t, q, &mut sp.m_vals);
                self.mass.factor_blocks(&sp.m_vals, t)?;
            }
            _ => {
                sys.mass_matrix(t, q, &mut self.m);
                self.mass.factor_dense(&self.m, t)?;
            }
        }
        self.m_t = t;
        self.m_q.copy_from_slice(q);
        self.m_valid = true;
        Ok(())
    }

    /// Ask the system for its sparse structure, once.
    fn check_sparse<S: MultibodySystem + ?Sized>(&mut self, sys: &mut S) {
        if self.sparse_checked {
            return;
        }
        self.sparse_checked = true;
        if let Some(ss) = sys.sparse_structure() {
            let m_idx = ss.mass_pattern();
            let j_idx = ss.constraint_jacobian_pattern();
            self.mass.set_blocks(&m_idx);
            self.sparse = Some(SparseForms {
                m_vals: vec![0.0; m_idx.len()],
                j_vals: vec![0.0; j_idx.len()],
                j_idx,
            });
        }
    }

    /// `out = g(t, y)`; counts one residual evaluation.
    pub fn eval<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        y: &[f64],
        out: &mut [f64],
    ) -> Result<(), IntegrateError> {
        self.evals += 1;
        let (nq, nc) = (self.nq, self.nc);
        let (q, rest) = y.split_at(nq);
        let (v, rest) = rest.split_at(nq);
        let (lambda, eta) = rest.split_at(nc);
        let (o1, rest) = out.split_at_mut(nq);
        let (o2, rest) = rest.split_at_mut(nq);
        let (o3, o4) = rest.split_at_mut(nc);
        // Without constraints `g` is `(−v, −M⁻¹ f)`: from the system's own O(n) recursion
        // where it has one (a planar tree), instead of forming and factoring `M`.
        if nc == 0 && sys.unconstrained_accelerations(t, q, v, &mut self.r) {
            for j in 0..nq {
                o1[j] = -v[j];
                o2[j] = -self.r[j];
            }
            return Ok(());
        }
        self.prepare_mass(sys, t, q)?;
        sys.forces(t, q, v, &mut self.f);
        match (&mut self.sparse, sys.sparse_structure()) {
            (Some(sp), Some(ss)) => {
                // Φ, Φ_q and Φ_t in one pass over the constraint rows.
                ss.constraint_values(t, q, &mut self.phi, &mut sp.j_vals, &mut self.phi_t);
                // The same sums as the dense loops below, in the same order per column (rows
                // ascending), without the structural zeros.
                o1.fill(0.0);
                self.r.fill(0.0);
                o3.copy_from_slice(&self.phi_t);
                for (&(k, j), &c) in sp.j_idx.iter().zip(&sp.j_vals) {
                    o1[j] += c * eta[k];
                    self.r[j] += c * lambda[k];
                    o3[k] += c * v[j];
                }
                for j in 0..nq {
                    o1[j] -= v[j];
                    self.r[j] = self.f[j] - self.r[j];
                }
            }
            _ => {
                sys.constraint_values(t, q, &mut self.phi, &mut self.phi_q, &mut self.phi_t);
                for j in 0..nq {
                    let c = self.phi_q.column(j);
                    let (mut se, mut sl) = (0.0, 0.0);
                    for k in 0..nc {
                        se += c[k] * eta[k];
                        sl += c[k] * lambda[k];
                    }
                    o1[j] = se - v[j];
                    self.r[j] = self.f[j] - sl;
                }
                for k in 0..nc {
                    let mut s = self.phi_t[k];
                    for j in 0..nq {
                        s += self.phi_q[(k, j)] * v[j];
                    }
                    o3[k] = s;
                }
            }
        }
        self.mass.solve(&mut self.r);
        for j in 0..nq {
            o2[j] = -self.r[j];
        }
        o4.copy_from_slice(&self.phi);
        Ok(())
    }

    /// `out = M(t, q)⁻¹ x` column by column for a matrix (after `prepare_mass`).
    fn mass_solve_columns(
        &mut self,
        x: &DMatrix<f64>,
        sign: f64,
        out: &mut DMatrix<f64>,
        row0: usize,
        col0: usize,
    ) {
        for j in 0..x.ncols() {
            self.col.copy_from_slice(x.column(j).as_slice());
            self.mass.solve(&mut self.col);
            for i in 0..self.nq {
                out[(row0 + i, col0 + j)] = sign * self.col[i];
            }
        }
    }

    /// `G = ∂g/∂y` at `(t, y)` from the system's analytic derivatives (force Jacobians,
    /// constraint Hessians, `∂(M a)/∂q`). The only difference quotient is `Φ_tq = ∂Φ_q/∂t`
    /// (the traits have no mixed time derivative): a central difference in `t`, relative
    /// error about `ε^(2/3)`. Not counted as residual evaluations.
    pub fn analytic_jacobian<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        y: &[f64],
        g: &mut DMatrix<f64>,
    ) -> Result<(), IntegrateError> {
        let (nq, nc) = (self.nq, self.nc);
        let (q, rest) = y.split_at(nq);
        let (v, rest) = rest.split_at(nq);
        let (lambda, eta) = rest.split_at(nc);
        let (iv, il, ie) = (nq, 2 * nq, 2 * nq + nc);
        g.fill(0.0);
        self.prepare_mass(sys, t, q)?;
        sys.constraint_jacobian(t, q, &mut self.phi_q);
        // Rows of q̇ − v + Φ_qᵀη.
        sys.constraint_force_jacobian(t, q, eta, &mut self.h);
        g.view_mut((0, 0), (nq, nq)).copy_from(&self.h);
        for i in 0..nq {
            g[(i, iv + i)] = -1.0;
        }
        for k in 0..nc {
            for j in 0..nq {
                g[(j, ie + k)] = self.phi_q[(k, j)];
            }
        }
        // Rows of v̇ − a, a = M⁻¹(f − Φ_qᵀλ):  ∂a/∂q = M⁻¹(f_q − ∂(Φ_qᵀλ)/∂q − ∂(M a)/∂q).
        sys.forces(t, q, v, &mut self.f);
        for j in 0..nq {
            let mut sl = 0.0;
            for k in 0..nc {
                sl += self.phi_q[(k, j)] * lambda[k];
            }
            self.r[j] = self.f[j] - sl;
        }
        self.mass.solve(&mut self.r);
        sys.force_jacobians(t, q, v, &mut self.fq, &mut self.fv);
        sys.constraint_force_jacobian(t, q, lambda, &mut self.h);
        self.fq -= &self.h;
        sys.mass_times_accel_jacobian(t, q, &self.r, &mut self.h);
        self.fq -= &self.h;
        let fq = std::mem::replace(&mut self.fq, DMatrix::zeros(0, 0));
        self.mass_solve_columns(&fq, -1.0, g, iv, 0);
        self.fq = fq;
        let fv = std::mem::replace(&mut self.fv, DMatrix::zeros(0, 0));
        self.mass_solve_columns(&fv, -1.0, g, iv, iv);
        self.fv = fv;
        for k in 0..nc {
            for j in 0..nq {
                self.col[j] = self.phi_q[(k, j)];
            }
            self.mass.solve(&mut self.col);
            for j in 0..nq {
                g[(iv + j, il + k)] = self.col[j];
            }
        }
        // Rows of Φ_q v + Φ_t: row k of ∂(Φ_q v)/∂q is (H_k v)ᵀ with H_k the Hessian of Φ_k.
        for k in 0..nc {
            self.unit.fill(0.0);
            self.unit[k] = 1.0;
            sys.constraint_force_jacobian(t, q, &self.unit, &mut self.h);
            for j in 0..nq {
                let mut s = 0.0;
                for i in 0..nq {
                    s += self.h[(i, j)] * v[i];
                }
                g[(il + k, j)] = s;
            }
        }
        let dt = f64::EPSILON.cbrt() * t.abs().max(1.0);
        let (tp, tm) = (t + dt, t - dt);
        sys.constraint_jacobian(tp, q, &mut self.phi_q2);
        let mut tmp = std::mem::replace(&mut self.phi_q, DMatrix::zeros(0, 0));
        sys.constraint_jacobian(tm, q, &mut tmp);
        let inv = 1.0 / (tp - tm);
        for k in 0..nc {
            for j in 0..nq {
                g[(il + k, j)] += (self.phi_q2[(k, j)] - tmp[(k, j)]) * inv;
            }
        }
        sys.constraint_jacobian(t, q, &mut tmp);
        self.phi_q = tmp;
        for k in 0..nc {
            for j in 0..nq {
                g[(il + k, iv + j)] = self.phi_q[(k, j)];
                g[(il + nc + k, j)] = self.phi_q[(k, j)];
            }
        }
        Ok(())
    }

    /// Accelerations and multipliers at a consistent `(t, q, v)` from the saddle-point system
    /// `[M Φ_qᵀ; Φ_q 0] [a; λ] = [f; γ]` (dense LU; used once at initialisation).
    pub fn consistent_multipliers<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        q: &[f64],
        v: &[f64],
        a: &mut [f64],
        lambda: &mut [f64],
    ) -> Result<(), IntegrateError> {
        let (nq, nc) = (self.nq, self.nc);
        let n = nq + nc;
        let mut k = DMatrix::zeros(n, n);
        sys.mass_matrix(t, q, &mut self.m);
        sys.constraint_jacobian(t, q, &mut self.phi_q);
        k.view_mut((0, 0), (nq, nq)).copy_from(&self.m);
        for c in 0..nc {
            for j in 0..nq {
                k[(nq + c, j)] = self.phi_q[(c, j)];
                k[(j, nq + c)] = self.phi_q[(c, j)];
            }
        }
        let mut rhs = vec![0.0; n];
        sys.forces(t, q, v, &mut rhs[..nq]);
        sys.acceleration_rhs(t, q, v, &mut rhs[nq..]);
        let mut lu = DenseLu::new(n);
        lu.factor(&k).map_err(|e| IntegrateError::Singular {
            t,
            what: format!(
                "saddle-point matrix [M Φqᵀ; Φq 0] singular at step {} (redundant constraints?)",
                e.0
            ),
        })?;
        lu.solve(&mut rhs);
        a.copy_from_slice(&rhs[..nq]);
        lambda.copy_from_slice(&rhs[nq..]);
        self.m_valid = false;
        Ok(())
    }
}

/// `Φ_q` values on the system's pattern (and the values of `M`, factored by [`MassFactor`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SparseForms {
    m_vals: Vec<f64>,
    j_idx: Vec<(usize, usize)>,
    j_vals: Vec<f64>,
}

/// The factorization of `M`: dense `L D Lᵀ` (symmetric positive definite), else dense LU,
/// diagonal, or LU per diagonal block of a sparse pattern.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct MassFactor {
    n: usize,
    is_diag: bool,
    diag: Vec<f64>,
    lu: DenseLu,
    /// `L D Lᵀ` factors (column-major `n × n`), valid when `use_ldlt`.
    #[serde(default)]
    ldlt: Vec<f64>,
    #[serde(default)]
    use_ldlt: bool,
    /// Sparse pattern only: the coordinates of each block (connected component of the pattern),
    /// where each value of `M` goes `(block, row, column within the block)`, and the blocks.
    blocks: Vec<Vec<usize>>,
    at: Vec<(usize, usize, usize)>,
    block_mats: Vec<DMatrix<f64>>,
    block_lus: Vec<DenseLu>,
    /// Diagonal pattern: the coordinate of each value.
    diag_at: Vec<usize>,
    scratch: Vec<f64>,
}

impl MassFactor {
    fn new(n: usize) -> Self {
        MassFactor {
            n,
            is_diag: false,
            diag: vec![0.0; n],
            lu: DenseLu::new(n),
            ldlt: vec![0.0; n * n],
            use_ldlt: false,
            blocks: Vec::new(),
            at: Vec::new(),
            block_mats: Vec::new(),
            block_lus: Vec::new(),
            diag_at: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Blocks from the pattern `idx` of `M` (entries `(i, j)`; a coordinate the pattern does not
    /// touch is a block of its own with a zero diagonal, reported singular when factored).
    fn set_blocks(&mut self, idx: &[(usize, usize)]) {
        let n = self.n;
        let mut parent: Vec<usize> = (0..n).collect();
        fn root(p: &mut [usize], mut i: usize) -> usize {
            while p[i] != i {
                p[i] = p[p[i]];
                i = p[i];
            }
            i
        }
        for &(i, j) in idx {
            let (a, b) = (root(&mut parent, i), root(&mut parent, j));
            if a != b {
                parent[a.max(b)] = a.min(b);
            }
        }
        let mut block_of = vec![usize::MAX; n];
        let mut local = vec![0; n];
        self.blocks.clear();
        for c in 0..n {
            let r = root(&mut parent, c);
            if block_of[r] == usize::MAX {
                block_of[r] = self.blocks.len();
                self.blocks.push(Vec::new());
            }
            let b = block_of[r];
            block_of[c] = b;
            local[c] = self.blocks[b].len();
            self.blocks[b].push(c);
        }
        self.at = idx
            .iter()
            .map(|&(i, j)| (block_of[i], local[i], local[j]))
            .collect();
        self.block_mats = self
            .blocks
            .iter()
            .map(|b| DMatrix::zeros(b.len(), b.len()))
            .collect();
        self.block_lus = self.blocks.iter().map(|b| DenseLu::new(b.len())).collect();
        let largest = self.blocks.iter().map(Vec::len).max().unwrap_or(0);
        self.scratch = vec![0.0; largest];
        self.is_diag = largest <= 1;
        self.diag_at = if self.is_diag {
            idx.iter().map(|&(i, _)| i).collect()
        } else {
            Vec::new()
        };
    }

    fn singular(t: f64, what: String) -> IntegrateError {
        IntegrateError::Singular { t, what }
    }

    /// `M` is symmetric ([`super::system::Mechanical::mass_matrix`]) and, where the explicit
    /// GGL form can use it (regular), positive definite: `L D Lᵀ` factors it (its lower
    /// triangle) at half the flops of the LU, with no pivot search or row swaps
    /// (docs/benchmarks.md, "The mass matrix by L D Lᵀ"). The LU remains for a matrix where
    /// `L D Lᵀ` finds a pivot that is not positive, and names the singular step as before.
    fn factor_dense(&mut self, m: &DMatrix<f64>, t: f64) -> Result<(), IntegrateError> {
        let n = self.n;
        let mut diag = true;
        'scan: for j in 0..n {
            for i in 0..n {
                if i != j && m[(i, j)] != 0.0 {
                    diag = false;
                    break 'scan;
                }
            }
        }
        self.is_diag = diag;
        self.use_ldlt = false;
        if diag {
            for i in 0..n {
                self.diag[i] = m[(i, i)];
            }
            return self.check_diag(t);
        }
        self.ldlt.resize(n * n, 0.0);
        self.ldlt.copy_from_slice(m.as_slice());
        if crate::dense::ldlt_factor(&mut self.ldlt, n) {
            self.use_ldlt = true;
            return Ok(());
        }
        self.lu.factor(m).map_err(|e| {
            Self::singular(
                t,
                format!("mass matrix is singular at elimination step {} (the explicit GGL form needs a regular M)", e.0),
            )
        })
    }

    fn check_diag(&self, t: f64) -> Result<(), IntegrateError> {
        match self.diag.iter().position(|d| *d == 0.0 || !d.is_finite()) {
            None => Ok(()),
            Some(i) => Err(Self::singular(
                t,
                format!(
                    "mass matrix has diagonal entry {} at coordinate {i}",
                    self.diag[i]
                ),
            )),
        }
    }

    /// Factor from the values of the pattern given to [`MassFactor::set_blocks`].
    fn factor_blocks(&mut self, vals: &[f64], t: f64) -> Result<(), IntegrateError> {
        self.use_ldlt = false;
        if self.is_diag {
            self.diag.fill(0.0);
            for (&c, &x) in self.diag_at.iter().zip(vals) {
                self.diag[c] += x;
            }
            return self.check_diag(t);
        }
        for m in &mut self.block_mats {
            m.fill(0.0);
        }
        for (&(b, i, j), &x) in self.at.iter().zip(vals) {
            self.block_mats[b][(i, j)] += x;
        }
        for (b, (m, lu)) in self.block_mats.iter().zip(&mut self.block_lus).enumerate() {
            lu.factor(m).map_err(|e| {
                Self::singular(
                    t,
                    format!(
                        "mass matrix is singular in its block of coordinates {:?} at elimination step {} (the explicit GGL form needs a regular M)",
                        self.blocks[b], e.0
                    ),
                )
            })?;
        }
        Ok(())
    }

    /// `x ← M⁻¹ x` (after a factor call).
    fn solve(&mut self, x: &mut [f64]) {
        if self.is_diag {
            for (xi, d) in x.iter_mut().zip(&self.diag) {
                *xi /= d;
            }
        } else if self.use_ldlt {
            crate::dense::ldlt_substitute(&self.ldlt, x);
        } else if self.blocks.is_empty() {
            self.lu.solve(x);
        } else {
            for (coords, lu) in self.blocks.iter().zip(&self.block_lus) {
                let w = &mut self.scratch[..coords.len()];
                for (wi, &c) in w.iter_mut().zip(coords) {
                    *wi = x[c];
                }
                lu.solve(w);
                for (wi, &c) in w.iter().zip(coords) {
                    x[c] = *wi;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MassFactor;
    use nalgebra::{DMatrix, DVector};

    fn solve_with(mf: &mut MassFactor, m: &DMatrix<f64>, b: &[f64]) -> Vec<f64> {
        mf.factor_dense(m, 0.0).unwrap();
        let mut x = b.to_vec();
        mf.solve(&mut x);
        x
    }

    /// `M⁻¹ b` against nalgebra's LU: by `L D Lᵀ` for a positive definite `M`, by the LU for
    /// a regular symmetric indefinite one (where `L D Lᵀ` meets a negative pivot), by the
    /// diagonal for a diagonal one; a singular `M` is still an error naming the step.
    #[test]
    fn mass_factor_solves_by_ldlt_and_falls_back_to_lu() {
        let n = 7;
        let a = DMatrix::from_fn(n, n, |i, j| ((3 * i + 5 * j) % 11) as f64 / 7.0 - 0.6);
        let b: Vec<f64> = (0..n).map(|i| 1.0 + i as f64).collect();
        let spd = &a * a.transpose() + DMatrix::identity(n, n);
        let mut indefinite = spd.clone();
        indefinite[(0, 0)] = -3.0;
        let diagonal = DMatrix::from_diagonal(&DVector::from_fn(n, |i, _| 2.0 + i as f64));
        let mut mf = MassFactor::new(n);
        for (m, ldlt) in [(&spd, true), (&indefinite, false), (&diagonal, false)] {
            let want = m
                .clone()
                .lu()
                .solve(&DVector::from_column_slice(&b))
                .unwrap();
            let x = solve_with(&mut mf, m, &b);
            assert_eq!(mf.use_ldlt, ldlt);
            for i in 0..n {
                assert!((x[i] - want[i]).abs() <= 1e-12 * (1.0 + want[i].abs()));
            }
        }
        let singular = DMatrix::from_element(n, n, 1.0);
        let err = mf.factor_dense(&singular, 0.5).unwrap_err().to_string();
        assert!(err.contains("mass matrix is singular"), "{err}");
    }
}
