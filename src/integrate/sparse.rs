//! Sparse linear algebra for large tree-like models, where the dense `O(n³)` LU of the
//! saddle-point matrix `[M Φqᵀ; Φq 0]` dominates the cost of a step.
//!
//! - [`Pattern`]: a compressed-sparse-column structure built once from `(row, col)` lists.
//! - [`SparseLu`]: `faer`'s sparse LU (COLAMD column ordering, partial pivoting by rows). The
//!   symbolic analysis runs once per pattern; each [`SparseLu::factor`] only refactors the
//!   values, into storage and a workspace that are kept between calls (no heap allocation
//!   once the factors have reached their size).
//! - [`SparseStructure`]: what a system reports so that integrators can use the above: the
//!   fixed structural patterns of `M(q)` and `Φq(q, t)` and value fills in pattern order.
//! - [`SparseSaddle`]: the saddle-point matrix assembled from those fills, factored and
//!   solved, with the products `M x`, `Φq x`, `Φqᵀ λ` on the sparse values.

use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
use faer::linalg::lu::partial_pivoting::factor::PartialPivLuParams;
use faer::sparse::linalg::lu::{
    factorize_symbolic_lu, LuRef, LuSymbolicParams, NumericLu, SymbolicLu,
};
use faer::sparse::linalg::SupernodalThreshold;
use faer::sparse::{SparseColMatRef, SymbolicSparseColMatRef};
use faer::{Conj, MatMut, Par, Spec};
use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Sizes at and above which the integrators use the sparse saddle-point path when the system
/// offers [`SparseStructure`] (`n_q + n_c`). Below it the dense LU is faster (measured with
/// `cargo bench --bench scaling`; see docs/engine.md).
pub const SPARSE_THRESHOLD: usize = 48;

/// Which factorization an integrator uses for the saddle-point matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SaddleSolver {
    /// Sparse when the system reports [`SparseStructure`] and `n_q + n_c` reaches
    /// [`SPARSE_THRESHOLD`]; dense otherwise.
    #[default]
    Auto,
    /// Always the dense LU.
    Dense,
    /// Sparse whenever the system reports its structure (dense otherwise).
    Sparse,
}

impl SaddleSolver {
    /// Whether to use the sparse path for a saddle matrix of dimension `n`.
    pub fn use_sparse(self, n: usize, structure_available: bool) -> bool {
        structure_available
            && match self {
                SaddleSolver::Auto => n >= SPARSE_THRESHOLD,
                SaddleSolver::Dense => false,
                SaddleSolver::Sparse => true,
            }
    }
}

/// Errors of the sparse factorization.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SparseError {
    #[error("matrix is structurally or numerically singular at elimination step {0}")]
    Singular(usize),
    #[error("sparse analysis failed: {0}")]
    Analysis(String),
}

/// A compressed-sparse-column structure (row indices sorted within each column).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pattern {
    nrows: usize,
    ncols: usize,
    col_ptr: Vec<usize>,
    row_idx: Vec<usize>,
}

impl Pattern {
    /// Build from `(row, col)` entries in any order; duplicates are merged. Also returns, for
    /// each entry of `entries`, its position in pattern (value) order.
    pub fn from_entries(
        nrows: usize,
        ncols: usize,
        entries: &[(usize, usize)],
    ) -> (Pattern, Vec<usize>) {
        let mut sorted: Vec<(usize, usize)> = entries.iter().map(|&(r, c)| (c, r)).collect();
        sorted.sort_unstable();
        sorted.dedup();
        let mut col_ptr = vec![0; ncols + 1];
        let mut row_idx = Vec::with_capacity(sorted.len());
        for &(c, r) in &sorted {
            assert!(
                r < nrows && c < ncols,
                "entry ({r}, {c}) outside {nrows}×{ncols}"
            );
            col_ptr[c + 1] += 1;
            row_idx.push(r);
        }
        for c in 0..ncols {
            col_ptr[c + 1] += col_ptr[c];
        }
        let p = Pattern {
            nrows,
            ncols,
            col_ptr,
            row_idx,
        };
        let pos = entries
            .iter()
            .map(|&(r, c)| p.position(r, c).expect("entry is in the pattern"))
            .collect();
        (p, pos)
    }

    pub fn nrows(&self) -> usize {
        self.nrows
    }
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// Number of structural nonzeros.
    pub fn nnz(&self) -> usize {
        self.row_idx.len()
    }
    pub fn col_ptr(&self) -> &[usize] {
        &self.col_ptr
    }
    pub fn row_idx(&self) -> &[usize] {
        &self.row_idx
    }

    /// Position of `(row, col)` in value order, if structural.
    pub fn position(&self, row: usize, col: usize) -> Option<usize> {
        let (a, b) = (self.col_ptr[col], self.col_ptr[col + 1]);
        self.row_idx[a..b].binary_search(&row).ok().map(|k| a + k)
    }

    /// Dense copy of a matrix with this pattern (tests, diagnostics).
    pub fn to_dense(&self, vals: &[f64]) -> DMatrix<f64> {
        let mut m = DMatrix::zeros(self.nrows, self.ncols);
        for c in 0..self.ncols {
            for k in self.col_ptr[c]..self.col_ptr[c + 1] {
                m[(self.row_idx[k], c)] = vals[k];
            }
        }
        m
    }
}

/// The factors and the workspace faer needs; rebuilt from the pattern when absent (after
/// deserialization: faer's types are not serializable, and the factors are cheap to redo).
struct Factors {
    symbolic: SymbolicLu<usize>,
    numeric: NumericLu<usize, f64>,
    req: StackReq,
    mem: MemBuffer,
}

impl Clone for Factors {
    fn clone(&self) -> Self {
        Factors {
            symbolic: self.symbolic.clone(),
            numeric: self.numeric.clone(),
            req: self.req,
            mem: MemBuffer::new(self.req),
        }
    }
}

impl std::fmt::Debug for Factors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Factors")
            .field("n", &self.symbolic.nrows())
            .finish_non_exhaustive()
    }
}

/// Sparse LU `P A Q = L U` of a square matrix with a fixed [`Pattern`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SparseLu {
    pattern: Pattern,
    #[serde(skip)]
    factors: Option<Factors>,
    #[serde(skip)]
    valid: bool,
}

impl SparseLu {
    /// Prepare for matrices with this (square) pattern. The symbolic analysis runs here.
    pub fn new(pattern: Pattern) -> Result<Self, SparseError> {
        assert_eq!(
            pattern.nrows, pattern.ncols,
            "sparse LU needs a square matrix"
        );
        let mut lu = SparseLu {
            pattern,
            factors: None,
            valid: false,
        };
        lu.analyse()?;
        Ok(lu)
    }

    pub fn dim(&self) -> usize {
        self.pattern.nrows
    }
    pub fn pattern(&self) -> &Pattern {
        &self.pattern
    }
    /// Whether a successful factorization is held.
    pub fn is_valid(&self) -> bool {
        self.valid && self.factors.is_some()
    }
    pub fn invalidate(&mut self) {
        self.valid = false;
    }

    fn symbolic_ref(&self) -> SymbolicSparseColMatRef<'_, usize> {
        let p = &self.pattern;
        SymbolicSparseColMatRef::new_checked(p.nrows, p.ncols, &p.col_ptr, None, &p.row_idx)
    }

    fn analyse(&mut self) -> Result<(), SparseError> {
        let n = self.pattern.nrows;
        let params = LuSymbolicParams {
            // Tree-like models have little fill: the simplicial (left-looking) factorization
            // beats supernodes there, and it works in the preallocated workspace only.
            supernodal_flop_ratio_threshold: SupernodalThreshold::FORCE_SIMPLICIAL,
            ..Default::default()
        };
        let symbolic = factorize_symbolic_lu(self.symbolic_ref(), params)
            .map_err(|e| SparseError::Analysis(format!("{e:?}")))?;
        let req = StackReq::any_of(&[
            symbolic.factorize_numeric_lu_scratch::<f64>(Par::Seq, Spec::default()),
            symbolic.solve_in_place_scratch::<f64>(1, Par::Seq),
        ]);
        let mem = MemBuffer::try_new(req)
            .map_err(|_| SparseError::Analysis(format!("no memory for the workspace (n = {n})")))?;
        self.factors = Some(Factors {
            symbolic,
            numeric: NumericLu::new(),
            req,
            mem,
        });
        Ok(())
    }

    /// Factor the matrix whose values (in pattern order) are `vals`.
    pub fn factor(&mut self, vals: &[f64]) -> Result<(), SparseError> {
        assert_eq!(vals.len(), self.pattern.nnz());
        self.valid = false;
        if self.factors.is_none() {
            self.analyse()?;
        }
        let p = &self.pattern;
        let a = SparseColMatRef::new(
            SymbolicSparseColMatRef::new_checked(p.nrows, p.ncols, &p.col_ptr, None, &p.row_idx),
            vals,
        );
        let f = self.factors.as_mut().expect("analysed above");
        let params: Spec<PartialPivLuParams, f64> = Spec::default();
        f.symbolic
            .factorize_numeric_lu(
                &mut f.numeric,
                a,
                Par::Seq,
                MemStack::new(&mut f.mem),
                params,
            )
            .map_err(|e| match e {
                faer::sparse::linalg::LuError::SymbolicSingular { index } => {
                    SparseError::Singular(index)
                }
                other => SparseError::Analysis(format!("{other:?}")),
            })?;
        self.valid = true;
        Ok(())
    }

    /// Solve `A x = b` in place with the held factorization. A zero pivot shows up as
    /// non-finite entries of `b` (callers check).
    pub fn solve(&mut self, b: &mut [f64]) {
        let n = self.pattern.nrows;
        assert!(
            self.is_valid() && b.len() == n,
            "solve without a factorization"
        );
        let f = self.factors.as_mut().expect("valid implies factors");
        LuRef::new_unchecked(&f.symbolic, &f.numeric).solve_in_place_with_conj(
            Conj::No,
            MatMut::from_column_major_slice_mut(b, n, 1),
            Par::Seq,
            MemStack::new(&mut f.mem),
        );
    }
}

/// What a system tells integrators about the sparsity of `M(q)` and `Φq(q, t)`.
///
/// The patterns are structural (every entry that can ever be nonzero, each `(row, col)` at
/// most once) and fixed for the life of the system once assembly has chosen the active
/// constraint rows. The value fills write exactly `pattern.len()` numbers, in the order of the
/// pattern list: entry `k` of a fill is the matrix entry at `pattern[k]`, and every matrix
/// entry not in the pattern is zero. The fills must equal the dense trait methods exactly.
pub trait SparseStructure {
    /// Structural nonzeros of `M(q)` (`n_q × n_q`).
    fn mass_pattern(&mut self) -> Vec<(usize, usize)>;
    /// Structural nonzeros of `Φq(q, t)` (`n_c × n_q`).
    fn constraint_jacobian_pattern(&mut self) -> Vec<(usize, usize)>;
    /// Values of `M(q)` in the order of [`SparseStructure::mass_pattern`].
    fn mass_matrix_values(&mut self, t: f64, q: &[f64], vals: &mut [f64]);
    /// Values of `Φq(q, t)` in the order of [`SparseStructure::constraint_jacobian_pattern`].
    fn constraint_jacobian_values(&mut self, t: f64, q: &[f64], vals: &mut [f64]);
    /// `Φ(q, t)`, the values of `Φq` (pattern order) and `Φ_t` together, bit for bit what
    /// [`Mechanical::constraints`](super::Mechanical::constraints),
    /// [`SparseStructure::constraint_jacobian_values`] and
    /// [`Mechanical::constraint_time_derivative`](super::Mechanical::constraint_time_derivative)
    /// give: a residual needs all three at the same `(t, q)`, and a system that evaluates each
    /// constraint row's kinematics once for the three saves two passes.
    fn constraint_values(
        &mut self,
        t: f64,
        q: &[f64],
        phi: &mut [f64],
        jac_vals: &mut [f64],
        phi_t: &mut [f64],
    );
}

/// The saddle-point matrix `[M Φqᵀ; Φq 0]` on the sparse patterns of a [`SparseStructure`],
/// with its sparse LU and the sparse values of `M` and `Φq` (for residual products).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SparseSaddle {
    nq: usize,
    nc: usize,
    m_idx: Vec<(usize, usize)>,
    /// Values of `M` in the system's pattern order.
    pub m_vals: Vec<f64>,
    /// Position of each `M` entry in the saddle matrix's values.
    m_at: Vec<usize>,
    j_idx: Vec<(usize, usize)>,
    /// Values of `Φq` in the system's pattern order.
    pub j_vals: Vec<f64>,
    /// Positions of `(n_q + r, c)` and `(c, n_q + r)` for each `Φq` entry `(r, c)`.
    j_at: Vec<[usize; 2]>,
    kkt_vals: Vec<f64>,
    lu: SparseLu,
}

impl SparseSaddle {
    /// Build the saddle pattern from the two patterns and run the symbolic analysis.
    pub fn new(
        nq: usize,
        nc: usize,
        m_idx: Vec<(usize, usize)>,
        j_idx: Vec<(usize, usize)>,
    ) -> Result<Self, SparseError> {
        let n = nq + nc;
        let mut entries = Vec::with_capacity(m_idx.len() + 2 * j_idx.len());
        entries.extend_from_slice(&m_idx);
        for &(r, c) in &j_idx {
            entries.push((nq + r, c));
            entries.push((c, nq + r));
        }
        let (pattern, pos) = Pattern::from_entries(n, n, &entries);
        let m_at = pos[..m_idx.len()].to_vec();
        let j_at = pos[m_idx.len()..]
            .chunks_exact(2)
            .map(|c| [c[0], c[1]])
            .collect();
        let kkt_vals = vec![0.0; pattern.nnz()];
        Ok(SparseSaddle {
            nq,
            nc,
            m_vals: vec![0.0; m_idx.len()],
            j_vals: vec![0.0; j_idx.len()],
            m_idx,
            m_at,
            j_idx,
            j_at,
            kkt_vals,
            lu: SparseLu::new(pattern)?,
        })
    }

    /// From the patterns a system reports.
    pub fn for_system(
        s: &mut dyn SparseStructure,
        nq: usize,
        nc: usize,
    ) -> Result<Self, SparseError> {
        let m = s.mass_pattern();
        let j = s.constraint_jacobian_pattern();
        Self::new(nq, nc, m, j)
    }

    pub fn nq(&self) -> usize {
        self.nq
    }
    pub fn nc(&self) -> usize {
        self.nc
    }
    pub fn dim(&self) -> usize {
        self.nq + self.nc
    }
    /// Structural nonzeros of the saddle matrix.
    pub fn nnz(&self) -> usize {
        self.kkt_vals.len()
    }
    pub fn is_factored(&self) -> bool {
        self.lu.is_valid()
    }
    pub fn invalidate(&mut self) {
        self.lu.invalidate();
    }

    /// Fill `M(q)` and `Φq(q, t)` from the system.
    pub fn evaluate(&mut self, s: &mut dyn SparseStructure, t: f64, q: &[f64]) {
        s.mass_matrix_values(t, q, &mut self.m_vals);
        if self.nc > 0 {
            s.constraint_jacobian_values(t, q, &mut self.j_vals);
        }
    }

    /// Assemble the saddle matrix from `m_vals`, `j_vals` and factor it.
    pub fn factor(&mut self) -> Result<(), SparseError> {
        self.kkt_vals.fill(0.0);
        for (k, &p) in self.m_at.iter().enumerate() {
            self.kkt_vals[p] += self.m_vals[k];
        }
        for (k, &[a, b]) in self.j_at.iter().enumerate() {
            self.kkt_vals[a] += self.j_vals[k];
            self.kkt_vals[b] += self.j_vals[k];
        }
        self.lu.factor(&self.kkt_vals)
    }

    /// Solve `[M Φqᵀ; Φq 0] x = b` in place (length `n_q + n_c`).
    pub fn solve(&mut self, b: &mut [f64]) {
        self.lu.solve(b);
    }

    /// `y += M x`.
    pub fn m_mul_add(&self, x: &[f64], y: &mut [f64]) {
        for (&(r, c), &v) in self.m_idx.iter().zip(&self.m_vals) {
            y[r] += v * x[c];
        }
    }

    /// `y += Φq x` (`y` of length `n_c`).
    pub fn j_mul_add(&self, x: &[f64], y: &mut [f64]) {
        for (&(r, c), &v) in self.j_idx.iter().zip(&self.j_vals) {
            y[r] += v * x[c];
        }
    }

    /// `y += Φqᵀ λ` (`y` of length `n_q`).
    pub fn jt_mul_add(&self, lambda: &[f64], y: &mut [f64]) {
        for (&(r, c), &v) in self.j_idx.iter().zip(&self.j_vals) {
            y[c] += v * lambda[r];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::DVector;

    /// Small deterministic generator (tests must not depend on a crate's random stream).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> f64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 11) as f64) / ((1u64 << 53) as f64)
        }
        fn below(&mut self, n: usize) -> usize {
            ((self.next() * n as f64) as usize).min(n - 1)
        }
    }

    fn dense_solve(a: &DMatrix<f64>, b: &[f64]) -> Vec<f64> {
        a.clone()
            .lu()
            .solve(&DVector::from_column_slice(b))
            .expect("regular")
            .as_slice()
            .to_vec()
    }

    fn max_diff(a: &[f64], b: &[f64]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max)
    }

    #[test]
    fn pattern_positions_and_duplicates() {
        let entries = [(2, 0), (0, 0), (1, 2), (2, 0), (0, 1)];
        let (p, pos) = Pattern::from_entries(3, 3, &entries);
        assert_eq!(p.nnz(), 4);
        assert_eq!(p.col_ptr(), &[0, 2, 3, 4]);
        assert_eq!(p.row_idx(), &[0, 2, 0, 1]);
        assert_eq!(pos, vec![1, 0, 3, 1, 2]);
        assert_eq!(p.position(1, 1), None);
    }

    #[test]
    fn lu_matches_dense_on_random_sparse_matrices() {
        let mut rng = Lcg(7);
        for trial in 0..20 {
            let n = 5 + rng.below(60);
            // Diagonal plus random off-diagonal entries; some diagonal entries absent so that
            // pivoting is needed.
            let mut entries = Vec::new();
            for i in 0..n {
                if rng.next() < 0.8 {
                    entries.push((i, i));
                }
                for _ in 0..3 {
                    entries.push((i, rng.below(n)));
                }
                entries.push((i, (i + 1) % n));
                entries.push(((i + 1) % n, i));
            }
            let (p, _) = Pattern::from_entries(n, n, &entries);
            let mut lu = SparseLu::new(p.clone()).unwrap();
            // Refactor the same pattern with fresh values several times.
            for _ in 0..3 {
                let vals: Vec<f64> = (0..p.nnz()).map(|_| 2.0 * rng.next() - 1.0).collect();
                let a = p.to_dense(&vals);
                if a.clone().lu().solve(&DVector::zeros(n)).is_none() {
                    continue;
                }
                let b: Vec<f64> = (0..n).map(|_| rng.next()).collect();
                let want = dense_solve(&a, &b);
                lu.factor(&vals).unwrap();
                let mut x = b.clone();
                lu.solve(&mut x);
                let scale = want.iter().fold(1.0f64, |s, v| s.max(v.abs()));
                assert!(
                    max_diff(&x, &want) <= 1e-9 * scale,
                    "trial {trial}, n = {n}: diff {}",
                    max_diff(&x, &want)
                );
            }
        }
    }

    #[test]
    fn saddle_matches_dense_on_random_chains() {
        let mut rng = Lcg(11);
        for bodies in [1usize, 3, 10, 40] {
            // Blocks of 7 coordinates (3 diagonal + 4×4 SPD), one normalization row per body,
            // three rows coupling consecutive bodies: the shape of a spherical chain.
            let nq = 7 * bodies;
            let mut m_idx = Vec::new();
            for b in 0..bodies {
                let o = 7 * b;
                for k in 0..3 {
                    m_idx.push((o + k, o + k));
                }
                for j in 0..4 {
                    for i in 0..4 {
                        m_idx.push((o + 3 + i, o + 3 + j));
                    }
                }
            }
            let mut j_idx = Vec::new();
            let mut nc = 0;
            for b in 0..bodies {
                let o = 7 * b;
                for k in 0..4 {
                    j_idx.push((nc, o + 3 + k));
                }
                nc += 1;
                for _ in 0..3 {
                    for k in 0..7 {
                        j_idx.push((nc, o + k));
                        if b > 0 {
                            j_idx.push((nc, o - 7 + k));
                        }
                    }
                    nc += 1;
                }
            }
            let mut s = SparseSaddle::new(nq, nc, m_idx.clone(), j_idx.clone()).unwrap();
            for _ in 0..3 {
                // SPD 4×4 blocks: L Lᵀ + I.
                let mut mv = vec![0.0; m_idx.len()];
                for b in 0..bodies {
                    let base = b * 19;
                    for k in 0..3 {
                        mv[base + k] = 1.0 + rng.next();
                    }
                    let l = nalgebra::Matrix4::from_fn(|_, _| rng.next());
                    let spd = l * l.transpose() + nalgebra::Matrix4::identity();
                    for j in 0..4 {
                        for i in 0..4 {
                            mv[base + 3 + 4 * j + i] = spd[(i, j)];
                        }
                    }
                }
                let jv: Vec<f64> = (0..j_idx.len()).map(|_| 2.0 * rng.next() - 1.0).collect();
                s.m_vals.copy_from_slice(&mv);
                s.j_vals.copy_from_slice(&jv);
                let mut a = DMatrix::zeros(nq + nc, nq + nc);
                for (&(r, c), v) in m_idx.iter().zip(&mv) {
                    a[(r, c)] += v;
                }
                for (&(r, c), v) in j_idx.iter().zip(&jv) {
                    a[(nq + r, c)] += v;
                    a[(c, nq + r)] += v;
                }
                let b: Vec<f64> = (0..nq + nc).map(|_| rng.next() - 0.5).collect();
                let want = dense_solve(&a, &b);
                s.factor().unwrap();
                let mut x = b.clone();
                s.solve(&mut x);
                let scale = want.iter().fold(1.0f64, |s, v| s.max(v.abs()));
                assert!(
                    max_diff(&x, &want) <= 1e-8 * scale,
                    "bodies {bodies}: diff {}",
                    max_diff(&x, &want)
                );
                // Products against the dense blocks.
                let xs: Vec<f64> = (0..nq).map(|_| rng.next()).collect();
                let ls: Vec<f64> = (0..nc).map(|_| rng.next()).collect();
                let mut y = vec![0.0; nq];
                s.m_mul_add(&xs, &mut y);
                s.jt_mul_add(&ls, &mut y);
                let mut z = vec![0.0; nc];
                s.j_mul_add(&xs, &mut z);
                let mb = a.view((0, 0), (nq, nq));
                let jb = a.view((nq, 0), (nc, nq));
                let yd = mb * DVector::from_column_slice(&xs)
                    + jb.transpose() * DVector::from_column_slice(&ls);
                let zd = jb * DVector::from_column_slice(&xs);
                assert!(max_diff(&y, yd.as_slice()) < 1e-12);
                assert!(max_diff(&z, zd.as_slice()) < 1e-12);
            }
        }
    }

    #[test]
    fn structurally_singular_is_an_error() {
        // Column 1 is empty.
        let (p, _) = Pattern::from_entries(2, 2, &[(0, 0), (1, 0)]);
        match SparseLu::new(p.clone()) {
            Err(_) => {}
            Ok(mut lu) => assert!(lu.factor(&[1.0, 2.0]).is_err()),
        }
    }

    #[test]
    fn clone_and_serde_roundtrip_refactor() {
        let (p, _) = Pattern::from_entries(2, 2, &[(0, 0), (1, 0), (0, 1), (1, 1)]);
        let vals = [4.0, 1.0, 2.0, 3.0];
        let mut lu = SparseLu::new(p).unwrap();
        lu.factor(&vals).unwrap();
        let mut c = lu.clone();
        let mut x = [1.0, 2.0];
        c.solve(&mut x);
        let want = dense_solve(&DMatrix::from_column_slice(2, 2, &vals), &[1.0, 2.0]);
        assert!(max_diff(&x, &want) < 1e-14);
        let bytes = postcard::to_stdvec(&lu).unwrap();
        let mut back: SparseLu = postcard::from_bytes(&bytes).unwrap();
        assert!(!back.is_valid(), "factors are not serialized");
        back.factor(&vals).unwrap();
        let mut y = [1.0, 2.0];
        back.solve(&mut y);
        assert_eq!(x, y);
    }
}
