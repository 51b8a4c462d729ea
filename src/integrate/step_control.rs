//! Error norms and step-size control shared by every error-controlled method.

use serde::{Deserialize, Serialize};

/// The error weight `atol + rtol · max(|a|, |b|)` of one component.
#[inline]
pub fn error_weight(a: f64, b: f64, rtol: f64, atol: f64) -> f64 {
    atol + rtol * a.abs().max(b.abs())
}

/// Weighted RMS norm `sqrt(1/n Σ (e_i / (atol + rtol·max(|a_i|, |b_i|)))²)`, the usual
/// mixed absolute/relative error measure (DASSL, Hairer–Wanner). `a`, `b` are the old and new
/// values the weights are taken from.
pub fn weighted_rms_norm(err: &[f64], a: &[f64], b: &[f64], rtol: f64, atol: f64) -> f64 {
    debug_assert!(err.len() == a.len() && a.len() == b.len());
    if err.is_empty() {
        return 0.0;
    }
    let mut s = 0.0;
    for i in 0..err.len() {
        let r = err[i] / error_weight(a[i], b[i], rtol, atol);
        s += r * r;
    }
    (s / err.len() as f64).sqrt()
}

/// Step-size controller: `h_new = h · clamp(safety · err^(−k1) · err_prev^(k2), min, max)`
/// with `k1 = β1/(p+1)`, `k2 = β2/(p+1)`; elementary control is `β2 = 0`. `p` is the order of the
/// error estimator's lower-order solution (the estimate behaves like `h^(p+1)`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepController {
    pub safety: f64,
    pub min_factor: f64,
    pub max_factor: f64,
    pub beta1: f64,
    pub beta2: f64,
    /// Error of the previous accepted step (for PI control).
    pub err_prev: f64,
}

impl StepController {
    /// Elementary (I) controller.
    pub fn elementary() -> Self {
        StepController {
            safety: 0.9,
            min_factor: 0.2,
            max_factor: 5.0,
            beta1: 1.0,
            beta2: 0.0,
            err_prev: 1.0,
        }
    }

    /// PI controller (Gustafsson), β1 = 0.7, β2 = 0.4.
    pub fn pi() -> Self {
        StepController {
            beta1: 0.7,
            beta2: 0.4,
            ..Self::elementary()
        }
    }

    /// Factor for the next step given the scaled error `err` (≤ 1 accepts) of a method whose
    /// estimate is `O(h^(order+1))`. After a rejection the factor is capped at 1.
    pub fn factor(&self, err: f64, order: u32, accepted: bool) -> f64 {
        let k = (order + 1) as f64;
        let err = err.max(1e-10);
        let mut fac = self.safety * err.powf(-self.beta1 / k);
        if accepted && self.beta2 != 0.0 {
            fac *= self.err_prev.max(1e-10).powf(self.beta2 / k);
        }
        let fac = fac.clamp(self.min_factor, self.max_factor);
        if accepted {
            fac
        } else {
            fac.min(1.0)
        }
    }

    /// Record an accepted step's error (for the PI term).
    pub fn accept(&mut self, err: f64) {
        self.err_prev = err.max(1e-4);
    }
}

/// The first step size by the Hairer–Wanner heuristic: `h = 0.01 · ‖y‖ / ‖y'‖` (weighted), at
/// most `h_max`, at least `max(1e-10, 1600 ε |t|)`. `y`, `dy` the state and its derivative.
pub fn initial_step_size(
    t: f64,
    y: &[f64],
    dy: &[f64],
    rtol: f64,
    atol: f64,
    order: u32,
    h_max: f64,
) -> f64 {
    let d0 = weighted_rms_norm(y, y, y, rtol, atol);
    let d1 = weighted_rms_norm(dy, y, y, rtol, atol);
    let h0 = if d0 < 1e-5 || d1 < 1e-5 {
        1e-6
    } else {
        0.01 * d0 / d1
    };
    // Second derivative unknown here: use the first-order estimate with the order's root.
    let h1 = if d1 <= 1e-15 {
        (1e-6f64).max(h0 * 1e-3)
    } else {
        (0.01 / d1).powf(1.0 / (order as f64 + 1.0))
    };
    let h = h0.min(h1.max(h0 * 1e-2)).min(100.0 * h0);
    // Not below 1e-10 s, nor within a hundred times the smallest step at `t` (16 ε |t|):
    // far from t = 0 a floor proportional to `t` alone (1e-10 t, 1e-6 s at t = 1e4 s) forced
    // a first step far above what a stiff start needs.
    let h_floor = 1e-10_f64.max(1600.0 * f64::EPSILON * t.abs());
    let h = if h_max > 0.0 { h.min(h_max) } else { h };
    h.max(h_floor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn norm_is_one_at_the_tolerance() {
        let n = weighted_rms_norm(
            &[1e-6 + 1e-3 * 2.0, 1e-6 + 1e-3 * 2.0],
            &[2.0, -2.0],
            &[1.0, 0.0],
            1e-3,
            1e-6,
        );
        assert!((n - 1.0).abs() < 1e-12);
    }

    #[test]
    fn controller_shrinks_on_large_error_and_grows_on_small() {
        let c = StepController::elementary();
        assert!(c.factor(10.0, 3, false) < 1.0);
        assert!(c.factor(1e-3, 3, true) > 1.0);
        assert!(c.factor(1e-30, 3, true) <= c.max_factor);
        // err = 1 with safety 0.9: shrink slightly.
        assert!((c.factor(1.0, 3, true) - 0.9).abs() < 1e-12);
    }

    /// A stiff start (a large derivative) gets the same first step far from t = 0 as at 0,
    /// down to a hundred times the smallest step the time resolution allows there.
    #[test]
    fn a_stiff_start_far_from_zero_is_not_floored_at_a_long_step() {
        let (y, dy) = ([1.0, 0.5], [1e6, -3e6]);
        let h0 = initial_step_size(0.0, &y, &dy, 1e-6, 1e-8, 1, 0.0);
        assert!(h0 < 1e-8, "{h0}");
        for t in [1e4, 86400.0] {
            let h = initial_step_size(t, &y, &dy, 1e-6, 1e-8, 1, 0.0);
            let h_min = 16.0 * f64::EPSILON * t;
            assert!(
                h <= h0.max(100.0 * h_min) * (1.0 + 1e-12),
                "t = {t}: {h} against {h0}"
            );
            assert!(h >= 100.0 * h_min * (1.0 - 1e-12), "t = {t}: {h}");
        }
    }
}
