//! Small dense kernels shared by the engine ([`crate::mbs`]) and the integrators
//! ([`crate::integrate`]); they know nothing of either.
//!
//! `M = L D Lᵀ` for symmetric positive definite matrices (mass matrices), column-major in a
//! plain slice. Written out rather than nalgebra's `Cholesky`: for the small systems of a
//! multibody model its generic code costs more than the arithmetic, and `L D Lᵀ` has no square
//! roots and one division per column in its dependent chain (nalgebra's 2 × 2 Cholesky solve
//! is a chain of 2 square roots and 6 divisions). Against a pivoting LU of the same matrix it
//! does half the flops and no pivot search or row swaps (the pendulum chain's 16 × 16 mass
//! matrix: 16 100 instructions per LU; docs/benchmarks.md, "The mass matrix by L D Lᵀ").
//! After the factorization `L` (unit diagonal) is below the diagonal and `D` on it; only the
//! lower triangle is read. Small systems run at constant sizes, so that their loops unroll
//! (the loop bookkeeping was half of a 2 × 2 solve).

/// Solve `M x = b` in place (`b` becomes `x`; `n = b.len()`, `a` is `M` column-major,
/// overwritten by its factors). False if `M` is not positive definite (or not finite).
/// Inlined: for a 2 × 2 tree the call costs a fifth of the solve.
#[inline(always)]
pub fn ldlt_solve(a: &mut [f64], b: &mut [f64]) -> bool {
    let n = b.len();
    debug_assert_eq!(a.len(), n * n);
    match n {
        1 => solve_in(a, b, 1),
        2 => solve_in(a, b, 2),
        3 => solve_in(a, b, 3),
        4 => solve_in(a, b, 4),
        _ => solve_in(a, b, n),
    }
}

/// Factor the `n × n` matrix in `a` in place; false if it is not positive definite (or not
/// finite), and then `a` holds no usable factors.
pub fn ldlt_factor(a: &mut [f64], n: usize) -> bool {
    debug_assert_eq!(a.len(), n * n);
    match n {
        1 => factor_in(a, 1),
        2 => factor_in(a, 2),
        3 => factor_in(a, 3),
        4 => factor_in(a, 4),
        _ => factor_in(a, n),
    }
}

/// `x ← M⁻¹ x` with the factors of [`ldlt_factor`] (`n = x.len()`).
pub fn ldlt_substitute(a: &[f64], x: &mut [f64]) {
    let n = x.len();
    debug_assert_eq!(a.len(), n * n);
    match n {
        1 => substitute_in(a, x, 1),
        2 => substitute_in(a, x, 2),
        3 => substitute_in(a, x, 3),
        4 => substitute_in(a, x, 4),
        _ => substitute_in(a, x, n),
    }
}

/// [`ldlt_solve`] at the size `n` (inlined at each constant size).
#[inline(always)]
fn solve_in(a: &mut [f64], b: &mut [f64], n: usize) -> bool {
    if !factor_in(a, n) {
        return false;
    }
    substitute_in(a, b, n);
    true
}

/// `L y = b`, `z = D⁻¹ y`, `Lᵀ x = z`.
#[inline(always)]
fn substitute_in(a: &[f64], b: &mut [f64], n: usize) {
    for j in 0..n {
        let bj = b[j];
        for i in j + 1..n {
            b[i] -= a[i + j * n] * bj;
        }
    }
    for j in 0..n {
        b[j] /= a[j + j * n];
    }
    for j in (0..n).rev() {
        let mut dot = -0.0;
        for i in j + 1..n {
            dot += a[i + j * n] * b[i];
        }
        b[j] -= dot;
    }
}

/// Left-looking, column by column (contiguous column updates, like nalgebra's Cholesky).
#[inline(always)]
fn factor_in(a: &mut [f64], n: usize) -> bool {
    for j in 0..n {
        let (done, rest) = a.split_at_mut(j * n);
        let col = &mut rest[..n];
        // Column j of `L D` (rows j..n): M_ij − Σ_k L_ik (D_k L_jk) over the earlier columns
        // (iterated by chunks and tails: fewer index checks in these short loops).
        for (k, ck) in done.chunks_exact(n).enumerate() {
            let tail = &ck[j..];
            let w = tail[0] * ck[k];
            for (x, y) in col[j..].iter_mut().zip(tail) {
                *x -= w * y;
            }
        }
        let d = col[j];
        let r = 1.0 / d;
        // `0 < d < ∞` (NaN fails both): tested on `d` and `1/d`, since the compiler turns the
        // same two tests on `d` alone (as `is_finite`) into a bit classification of two dozen
        // instructions.
        if !(d > 0.0 && r > 0.0) {
            return false;
        }
        for x in &mut col[j + 1..] {
            *x *= r;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{DMatrix, DVector};

    fn rng(mut seed: u64) -> impl FnMut() -> f64 {
        move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        }
    }

    /// Against nalgebra's LU on symmetric positive definite matrices of sizes 1 to 20 (a
    /// deterministic pseudo-random `A Aᵀ + I`); the separate factor and substitution give the
    /// one-call solve's result bit for bit, and so do the constant sizes the general code.
    #[test]
    fn ldlt_solve_matches_lu() {
        let mut rnd = rng(12345);
        for n in 1..=20 {
            let a = DMatrix::from_fn(n, n, |_, _| rnd());
            let m = &a * a.transpose() + DMatrix::identity(n, n);
            let b: Vec<f64> = (0..n).map(|_| rnd()).collect();
            let want = m
                .clone()
                .lu()
                .solve(&DVector::from_column_slice(&b))
                .unwrap();
            let mut x = b.clone();
            assert!(ldlt_solve(m.clone().as_mut_slice(), &mut x));
            for i in 0..n {
                assert!(
                    (x[i] - want[i]).abs() <= 1e-12 * (1.0 + want[i].abs()),
                    "n = {n}"
                );
            }
            let mut f = m.clone();
            assert!(ldlt_factor(f.as_mut_slice(), n));
            let mut y = b.clone();
            ldlt_substitute(f.as_slice(), &mut y);
            assert_eq!(x, y, "n = {n}");
            let mut z = b.clone();
            assert!(solve_in(
                m.clone().as_mut_slice(),
                &mut z,
                std::hint::black_box(n)
            ));
            assert_eq!(x, z, "n = {n}");
        }
    }

    /// Indefinite, singular and non-finite matrices are refused, not solved.
    #[test]
    fn ldlt_refuses_what_is_not_positive_definite() {
        let indefinite = [1.0, 2.0, 2.0, 1.0];
        assert!(!ldlt_solve(&mut indefinite.clone(), &mut [1.0, 1.0]));
        let singular = [1.0, 1.0, 1.0, 1.0];
        assert!(!ldlt_solve(&mut singular.clone(), &mut [1.0, 1.0]));
        assert!(!ldlt_factor(&mut [f64::NAN], 1));
        assert!(!ldlt_factor(&mut [f64::INFINITY], 1));
        // Negative definite at size 6 (the general code).
        let mut neg: Vec<f64> = (0..36)
            .map(|k| if k % 7 == 0 { -2.0 } else { 0.1 })
            .collect();
        assert!(!ldlt_factor(&mut neg, 6));
    }
}
