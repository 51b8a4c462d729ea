//! Small dense linear algebra with preallocated storage: LU with partial pivoting that factors
//! into its own buffer (nalgebra's `LU` takes ownership and allocates its permutation on every
//! factorization, which the integrators must not do per step).

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

/// In-place LU factorization `P A = L U` of a square matrix, column-major storage.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DenseLu {
    n: usize,
    a: Vec<f64>,
    piv: Vec<usize>,
    /// Whether a successful factorization is held.
    valid: bool,
}

/// The matrix is singular (or not finite) at elimination step `col`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SingularAt(pub usize);

impl DenseLu {
    pub fn new(n: usize) -> Self {
        DenseLu {
            n,
            a: vec![0.0; n * n],
            piv: vec![0; n],
            valid: false,
        }
    }

    pub fn dim(&self) -> usize {
        self.n
    }

    pub fn is_valid(&self) -> bool {
        self.valid
    }

    pub fn invalidate(&mut self) {
        self.valid = false;
    }

    /// Factor `m` (copied into the internal buffer; `m` is unchanged).
    pub fn factor(&mut self, m: &DMatrix<f64>) -> Result<(), SingularAt> {
        let n = self.n;
        debug_assert!(m.nrows() == n && m.ncols() == n);
        self.a.copy_from_slice(m.as_slice());
        self.factor_in_place()
    }

    /// Factor whatever the buffer holds (see [`DenseLu::buffer_mut`]).
    pub fn factor_in_place(&mut self) -> Result<(), SingularAt> {
        let (a, piv) = (&mut self.a[..], &mut self.piv[..]);
        // Small systems at constant sizes, so that their loops unroll (the loop bookkeeping
        // was most of a 2 × 2 factorization); the same operations in the same order.
        let r = match self.n {
            1 => lu_factor(a, piv, 1),
            2 => lu_factor(a, piv, 2),
            3 => lu_factor(a, piv, 3),
            4 => lu_factor(a, piv, 4),
            5 => lu_factor(a, piv, 5),
            6 => lu_factor(a, piv, 6),
            n => lu_factor(a, piv, n),
        };
        self.valid = r.is_ok();
        r
    }

    /// Column-major buffer to fill before [`DenseLu::factor_in_place`].
    pub fn buffer_mut(&mut self) -> &mut [f64] {
        self.valid = false;
        &mut self.a
    }

    /// Solve `A x = b` in place.
    pub fn solve(&self, b: &mut [f64]) {
        debug_assert!(self.valid && b.len() == self.n);
        let (a, piv) = (&self.a[..], &self.piv[..]);
        match self.n {
            1 => lu_solve(a, piv, b, 1),
            2 => lu_solve(a, piv, b, 2),
            3 => lu_solve(a, piv, b, 3),
            4 => lu_solve(a, piv, b, 4),
            5 => lu_solve(a, piv, b, 5),
            6 => lu_solve(a, piv, b, 6),
            n => lu_solve(a, piv, b, n),
        }
    }
}

/// [`DenseLu::factor_in_place`] at the size `n` (inlined at each constant size).
#[inline(always)]
fn lu_factor(a: &mut [f64], piv: &mut [usize], n: usize) -> Result<(), SingularAt> {
    for k in 0..n {
        // Pivot: largest magnitude in column k at or below the diagonal.
        let col = k * n;
        let mut p = k;
        let mut best = a[col + k].abs();
        for i in k + 1..n {
            let v = a[col + i].abs();
            if v > best {
                best = v;
                p = i;
            }
        }
        // Zero, infinite or NaN: `0 < best < ∞` tested on `best` and `1/best`, since the
        // compiler turns the two tests on `best` alone (as `is_finite`) into a bit
        // classification of two dozen instructions.
        if !(best > 0.0 && 1.0 / best > 0.0) {
            return Err(SingularAt(k));
        }
        piv[k] = p;
        if p != k {
            for j in 0..n {
                a.swap(j * n + k, j * n + p);
            }
        }
        let inv = 1.0 / a[col + k];
        for i in k + 1..n {
            a[col + i] *= inv;
        }
        // Rank-one update of the trailing block, column by column (contiguous inner loop).
        let (left, right) = a.split_at_mut((k + 1) * n);
        let lcol = &left[col + k + 1..col + n];
        for j in 0..n - k - 1 {
            let cj = &mut right[j * n..(j + 1) * n];
            let akj = cj[k];
            if akj != 0.0 {
                for (x, l) in cj[k + 1..].iter_mut().zip(lcol) {
                    *x -= l * akj;
                }
            }
        }
    }
    Ok(())
}

/// [`DenseLu::solve`] at the size `n` (inlined at each constant size).
#[inline(always)]
fn lu_solve(a: &[f64], piv: &[usize], b: &mut [f64], n: usize) {
    for (k, &p) in piv[..n].iter().enumerate() {
        if p != k {
            b.swap(k, p);
        }
    }
    // Forward substitution with unit lower triangle, column oriented (slices: no bounds
    // checks in the inner loops, which were half of a BDF step's solve).
    for k in 0..n {
        let (head, tail) = b.split_at_mut(k + 1);
        let bk = head[k];
        if bk != 0.0 {
            for (x, l) in tail.iter_mut().zip(&a[k * n + k + 1..(k + 1) * n]) {
                *x -= l * bk;
            }
        }
    }
    for k in (0..n).rev() {
        let (head, tail) = b.split_at_mut(k);
        tail[0] /= a[k * n + k];
        let bk = tail[0];
        if bk != 0.0 {
            for (x, u) in head.iter_mut().zip(&a[k * n..k * n + k]) {
                *x -= u * bk;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lu_solves_against_nalgebra() {
        let n = 7;
        let m = DMatrix::from_fn(n, n, |i, j| {
            ((i * 7 + j * 3) % 5) as f64 - 2.0 + if i == j { 0.5 } else { 0.0 }
        });
        let b: Vec<f64> = (0..n).map(|i| (i as f64).sin()).collect();
        let mut lu = DenseLu::new(n);
        lu.factor(&m).unwrap();
        let mut x = b.clone();
        lu.solve(&mut x);
        let r = &m * nalgebra::DVector::from_vec(x) - nalgebra::DVector::from_vec(b);
        assert!(r.norm() < 1e-12, "residual {}", r.norm());
    }

    /// Sizes 1 to 9 (the constant-size ones and past them) against nalgebra, and the
    /// constant-size factors and solutions bit for bit against the same code at a size the
    /// compiler cannot see.
    #[test]
    fn lu_at_every_small_size_matches_the_general_one() {
        for n in 1..=9 {
            let m = DMatrix::from_fn(n, n, |i, j| {
                ((i * 5 + j * 11) % 7) as f64 - 3.0 + if i == j { 0.3 } else { 0.0 }
            });
            let b: Vec<f64> = (0..n).map(|i| (1.0 + i as f64).cos()).collect();
            let mut lu = DenseLu::new(n);
            lu.factor(&m).unwrap();
            let mut x = b.clone();
            lu.solve(&mut x);
            let r = &m * nalgebra::DVector::from_vec(x.clone())
                - nalgebra::DVector::from_vec(b.clone());
            assert!(r.norm() < 1e-12, "n = {n}: residual {}", r.norm());
            let opaque = std::hint::black_box(n);
            let (mut a, mut piv) = (m.as_slice().to_vec(), vec![0; n]);
            lu_factor(&mut a, &mut piv, opaque).unwrap();
            let mut y = b.clone();
            lu_solve(&a, &piv, &mut y, opaque);
            assert_eq!((&a, &piv), (&lu.a, &lu.piv), "n = {n}: factors");
            assert_eq!(x, y, "n = {n}: solution");
        }
    }

    #[test]
    fn lu_reports_singular() {
        let m = DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 2.0, 4.0]);
        let mut lu = DenseLu::new(2);
        assert_eq!(lu.factor(&m), Err(SingularAt(1)));
        assert!(!lu.is_valid());
        // Not finite: infinite or NaN pivots are refused too.
        for bad in [f64::INFINITY, f64::NAN] {
            let m = DMatrix::from_row_slice(2, 2, &[bad, 0.0, 0.0, 1.0]);
            assert_eq!(lu.factor(&m), Err(SingularAt(0)), "{bad}");
        }
    }
}
