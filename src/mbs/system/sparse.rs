//! The engine's sparse structure: `M` is block diagonal (3 diagonal entries per body plus a
//! 4×4 block per rigid body), each constraint row touches the columns of the one or two bodies
//! its scalar coordinate involves. Patterns are taken from the same row evaluation as the
//! values, so fills and patterns cannot disagree. With `formulation = "joint"` every method
//! answers in joint coordinates (`mbs::joint`, `sparse.rs` there).

use super::{RowGrad, System};
use crate::integrate::sparse::SparseStructure;
use crate::mbs::kin::Need;
use crate::mbs::math::g_mat;
use nalgebra::Vector4;

impl SparseStructure for System {
    fn mass_pattern(&mut self) -> Vec<(usize, usize)> {
        if let Some(j) = self.joint.as_mut() {
            return j.mass_pattern();
        }
        let mut out = Vec::with_capacity(19 * self.bodies.len());
        for b in 0..self.bodies.len() {
            let o = self.layout.offsets[b];
            for k in 0..3 {
                out.push((o + k, o + k));
            }
            if self.layout.is_rigid(b) {
                for j in 0..4 {
                    for i in 0..4 {
                        out.push((o + 3 + i, o + 3 + j));
                    }
                }
            }
        }
        out
    }

    fn constraint_jacobian_pattern(&mut self) -> Vec<(usize, usize)> {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.constraint_jacobian_pattern(s));
        }
        // Which columns a row touches depends only on which bodies its coordinate involves,
        // not on the state: evaluate once at the model's initial coordinates.
        let q = self.q0.clone();
        self.load(0.0, &q, None);
        let mut out = Vec::new();
        for (k, &i) in self.active.iter().enumerate() {
            match self.row_eval(&self.rows[i], 0.0, None, &q, Need::GRAD).1 {
                RowGrad::Quat(col, _) => out.extend((0..4).map(|d| (k, col + d))),
                RowGrad::Coord(cv) => out.extend(cv.columns().map(|(_, g)| (k, g))),
            }
        }
        out
    }

    fn mass_matrix_values(&mut self, _t: f64, q: &[f64], vals: &mut [f64]) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.mass_matrix_values(s, _t, q, vals));
        }
        let mut n = 0;
        for b in 0..self.bodies.len() {
            let o = self.layout.offsets[b];
            let bd = &self.bodies[b];
            vals[n..n + 3].fill(bd.mass);
            n += 3;
            if self.layout.is_rigid(b) {
                // Same expression as the dense `mass_matrix` (bit-identical values).
                let p = Vector4::new(q[o + 3], q[o + 4], q[o + 5], q[o + 6]);
                let g = g_mat(&p);
                let mp = 4.0 * g.transpose() * bd.inertia * g + bd.reg * p * p.transpose();
                vals[n..n + 16].copy_from_slice(mp.as_slice());
                n += 16;
            }
        }
        debug_assert_eq!(n, vals.len());
    }

    fn constraint_jacobian_values(&mut self, t: f64, q: &[f64], vals: &mut [f64]) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.constraint_jacobian_values(s, t, q, vals));
        }
        self.load(t, q, None);
        let mut n = 0;
        for &i in &self.active {
            let grad = self.row_eval(&self.rows[i], t, None, q, Need::GRAD).1;
            n = put_row_grad(&grad, vals, n);
        }
        debug_assert_eq!(n, vals.len());
    }

    fn constraint_values(
        &mut self,
        t: f64,
        q: &[f64],
        phi: &mut [f64],
        jac_vals: &mut [f64],
        phi_t: &mut [f64],
    ) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.constraint_values(s, t, q, phi, jac_vals, phi_t));
        }
        // One `row_eval` per row gives value, gradient and time derivative together.
        self.load(t, q, None);
        let mut n = 0;
        for (k, &i) in self.active.iter().enumerate() {
            let (value, grad, rate, _) = self.row_eval(&self.rows[i], t, None, q, Need::GRAD);
            phi[k] = value;
            phi_t[k] = rate;
            n = put_row_grad(&grad, jac_vals, n);
        }
        debug_assert_eq!(n, jac_vals.len());
    }
}

/// A row's gradient into `vals` from position `n` in pattern order; returns the next position.
fn put_row_grad(grad: &RowGrad, vals: &mut [f64], n: usize) -> usize {
    match grad {
        RowGrad::Quat(_, p) => {
            vals[n..n + 4].copy_from_slice(p.as_slice());
            n + 4
        }
        RowGrad::Coord(cv) => {
            let mut n = n;
            for (l, _) in cv.columns() {
                vals[n] = cv.grad[l];
                n += 1;
            }
            n
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::integrate::sparse::{Pattern, SparseStructure};
    use crate::integrate::Mechanical;
    use crate::mbs::load_model;
    use crate::mbs::system::System;
    use nalgebra::DMatrix;
    use std::sync::Arc;

    /// The sparse fills equal the dense trait methods exactly, at a generic state (assembled,
    /// then every coordinate perturbed so that no entry is accidentally zero or symmetric),
    /// for every model in `models/`.
    #[test]
    fn fills_equal_dense_methods_for_every_model() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
        let mut n_models = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().and_then(|s| s.to_str()) != Some("toml") {
                continue;
            }
            // The absolute formulation's structure (joint: tests/joint_formulation.rs).
            let mut spec = load_model(&path).unwrap();
            spec.formulation = crate::mbs::spec::Formulation::Absolute;
            let mut sys = System::new(Arc::new(spec)).unwrap();
            let x = sys.initial_state(0.0).unwrap();
            let (nq, nc) = (sys.n_q(), sys.n_c());
            let q: Vec<f64> =
                x.q.iter()
                    .enumerate()
                    .map(|(i, v)| v + 0.013 * ((i as f64) * 1.7).sin())
                    .collect();
            let t = 0.37;
            let s: &mut dyn SparseStructure = sys.sparse_structure().expect("engine is sparse");
            let mp = s.mass_pattern();
            let jp = s.constraint_jacobian_pattern();
            let mut mv = vec![0.0; mp.len()];
            let mut jv = vec![0.0; jp.len()];
            s.mass_matrix_values(t, &q, &mut mv);
            s.constraint_jacobian_values(t, &q, &mut jv);
            let mut md = DMatrix::zeros(nq, nq);
            let mut jd = DMatrix::zeros(nc, nq);
            sys.mass_matrix(t, &q, &mut md);
            sys.constraint_jacobian(t, &q, &mut jd);
            // Scatter the fills (summing duplicates like the dense scatter does).
            let mut ms = DMatrix::zeros(nq, nq);
            for (&(r, c), v) in mp.iter().zip(&mv) {
                ms[(r, c)] += v;
            }
            let mut js = DMatrix::zeros(nc, nq);
            for (&(r, c), v) in jp.iter().zip(&jv) {
                js[(r, c)] += v;
            }
            assert_eq!(ms, md, "{}: mass matrix", path.display());
            assert_eq!(js, jd, "{}: constraint Jacobian", path.display());
            // The one-pass call equals the three separate ones bit for bit.
            let (mut phi1, mut phi_t1, mut jv1) = (vec![0.0; nc], vec![0.0; nc], jv.clone());
            jv1.fill(f64::NAN);
            let s: &mut dyn SparseStructure = sys.sparse_structure().unwrap();
            s.constraint_values(t, &q, &mut phi1, &mut jv1, &mut phi_t1);
            let (mut phi, mut phi_t) = (vec![0.0; nc], vec![0.0; nc]);
            sys.constraints(t, &q, &mut phi);
            sys.constraint_time_derivative(t, &q, &mut phi_t);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&phi1), bits(&phi), "{}: Φ", path.display());
            assert_eq!(bits(&jv1), bits(&jv), "{}: Φq values", path.display());
            assert_eq!(bits(&phi_t1), bits(&phi_t), "{}: Φ_t", path.display());
            // The patterns are no denser than needed for a tree: O(bodies), not n_q².
            let (p, _) = Pattern::from_entries(nc, nq, &jp);
            assert!(
                p.nnz() <= 14 * nc,
                "{}: {} entries",
                path.display(),
                p.nnz()
            );
            n_models += 1;
        }
        assert!(n_models >= 7, "found {n_models} models");
    }

    /// `System::accelerations` takes the sparse path on large models (spherical chain:
    /// n_q + n_c = 88) and agrees with a dense solve of the same saddle-point system; a
    /// second call reuses the analysed pattern.
    #[test]
    fn sparse_accelerations_match_dense() {
        use crate::integrate::sparse::SaddleSolver;
        use crate::integrate::test_systems::saddle_point_solve;
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/spherical_chain.toml");
        let mut spec = load_model(&path).unwrap();
        spec.formulation = crate::mbs::spec::Formulation::Absolute;
        let mut sys = System::new(Arc::new(spec)).unwrap();
        let x = sys.initial_state(0.0).unwrap();
        assert!(SaddleSolver::Auto.use_sparse(sys.n_q() + sys.n_c(), true));
        let v: Vec<f64> =
            x.v.iter()
                .enumerate()
                .map(|(i, v)| v + 0.1 * (i as f64).cos())
                .collect();
        for t in [0.0, 0.4] {
            let (a, l) = sys.accelerations(t, &x.q, &v).unwrap();
            let (ad, ld) = saddle_point_solve(&mut sys, t, &x.q, &v);
            let scale = ad.iter().chain(&ld).fold(1.0f64, |m, x| m.max(x.abs()));
            for (p, q) in a.iter().chain(&l).zip(ad.iter().chain(&ld)) {
                assert!((p - q).abs() <= 1e-10 * scale, "{p} vs {q}");
            }
        }
        assert!(sys.saddle_cache.is_some());
    }
}
