//! Time functions: value and first two derivatives of every [`Motion`].

use super::inputs::InputSignals;
use super::spec::Motion;
use serde::{Deserialize, Serialize};
use std::f64::consts::PI;

/// Natural cubic spline through `(x_i, y_i)`, constant extrapolation outside.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spline {
    x: Vec<f64>,
    y: Vec<f64>,
    /// Second derivatives at the knots.
    m: Vec<f64>,
}

impl Spline {
    /// `x` strictly increasing, at least two points (the loader checks both).
    pub fn new(x: &[f64], y: &[f64]) -> Spline {
        let n = x.len();
        let mut m = vec![0.0; n];
        if n > 2 {
            // Tridiagonal system for natural end conditions (Thomas algorithm).
            let mut c = vec![0.0; n];
            let mut d = vec![0.0; n];
            for i in 1..n - 1 {
                let (h0, h1) = (x[i] - x[i - 1], x[i + 1] - x[i]);
                let a = h0;
                let b = 2.0 * (h0 + h1);
                let cc = h1;
                let rhs = 6.0 * ((y[i + 1] - y[i]) / h1 - (y[i] - y[i - 1]) / h0);
                let denom = b - a * c[i - 1];
                c[i] = cc / denom;
                d[i] = (rhs - a * d[i - 1]) / denom;
            }
            for i in (1..n - 1).rev() {
                m[i] = d[i] - c[i] * m[i + 1];
            }
        }
        Spline {
            x: x.to_vec(),
            y: y.to_vec(),
            m,
        }
    }

    /// Value, first and second derivative.
    pub fn eval(&self, t: f64) -> [f64; 3] {
        let n = self.x.len();
        // A non-finite argument (a diverging trial iterate) must come out as NaN for the
        // integrator to reject, not index past the table.
        if t.is_nan() {
            return [f64::NAN; 3];
        }
        if t <= self.x[0] {
            return [self.y[0], 0.0, 0.0];
        }
        if t >= self.x[n - 1] {
            return [self.y[n - 1], 0.0, 0.0];
        }
        let i = self.x.partition_point(|&k| k <= t).clamp(1, n - 1) - 1;
        cubic_piece(&self.x, &self.y, &self.m, i, t)
    }
}

/// Value, first and second derivative at `t` of the cubic spline piece on `[x_i, x_{i+1}]`
/// with knot values `y` and knot second derivatives `m` (any end conditions).
pub(crate) fn cubic_piece(x: &[f64], y: &[f64], m: &[f64], i: usize, t: f64) -> [f64; 3] {
    let h = x[i + 1] - x[i];
    let (a, b) = ((x[i + 1] - t) / h, (t - x[i]) / h);
    let (mi, mj) = (m[i], m[i + 1]);
    let val = a * y[i] + b * y[i + 1] + ((a * a * a - a) * mi + (b * b * b - b) * mj) * h * h / 6.0;
    let d1 = (y[i + 1] - y[i]) / h - (3.0 * a * a - 1.0) * h / 6.0 * mi
        + (3.0 * b * b - 1.0) * h / 6.0 * mj;
    let d2 = a * mi + b * mj;
    [val, d1, d2]
}

/// A motion slot: the motion, its spline if tabulated, and the excitation offset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MotionSlot {
    pub motion: Motion,
    spline: Option<Spline>,
    /// Added to the value (extended partitioned Jacobian update perturbs it).
    pub offset: f64,
    /// Added to the rate and the acceleration (the same update perturbs the jet `u̇`, `ü`:
    /// in joint coordinates they enter the equations independently of `u`). Only ever nonzero
    /// inside one Jacobian evaluation, so not part of a saved state.
    #[serde(skip)]
    pub rate_offsets: [f64; 2],
}

impl MotionSlot {
    pub fn new(motion: &Motion) -> MotionSlot {
        let spline = match motion {
            Motion::Table { t, values, .. } => Some(Spline::new(t, values)),
            _ => None,
        };
        MotionSlot {
            motion: motion.clone(),
            spline,
            offset: 0.0,
            rate_offsets: [0.0; 2],
        }
    }

    /// Whether the slot varies in time (an excitation).
    pub fn is_excitation(&self) -> bool {
        !matches!(self.motion, Motion::Constant(_))
    }

    /// Times where a built-in motion's rate (a ramp's start) or acceleration (a smooth step's
    /// start and end) jumps. The co-simulation layer lands its steps on them.
    pub fn breakpoints(&self, params: &[f64]) -> [Option<f64>; 2] {
        let p = |s: &super::spec::Scalar| s.eval(params);
        match &self.motion {
            Motion::Ramp { start, slope, .. } if p(slope) != 0.0 => [Some(p(start)), None],
            Motion::SmoothStep {
                start, duration, ..
            } => [Some(p(start)), Some(p(start) + p(duration))],
            _ => [None, None],
        }
    }

    /// Value, first and second time derivative at `t`. At a breakpoint `t` the left limit,
    /// unless `right_at == t` (the state has been carried past it: the start of the run, or
    /// a step that landed there).
    pub fn eval(&self, t: f64, params: &[f64], inputs: &InputSignals, right_at: f64) -> [f64; 3] {
        let p = |s: &super::spec::Scalar| s.eval(params);
        let mut out = match &self.motion {
            Motion::Input(i) => inputs.eval(*i, t),
            Motion::AffineInput {
                input,
                scale,
                offset,
            } => {
                let [u, du, ddu] = inputs.eval(*input, t);
                [scale * u + offset, scale * du, scale * ddu]
            }
            Motion::Constant(c) => [p(c), 0.0, 0.0],
            Motion::Ramp {
                initial,
                slope,
                start,
            } => {
                let (i0, k, t0) = (p(initial), p(slope), p(start));
                if t > t0 || (t == t0 && t == right_at) {
                    [i0 + k * (t - t0), k, 0.0]
                } else {
                    [i0, 0.0, 0.0]
                }
            }
            Motion::Sine {
                offset,
                amplitude,
                frequency,
                phase,
            } => {
                let w = 2.0 * PI * p(frequency);
                let a = p(amplitude);
                let (s, c) = (w * t + p(phase)).sin_cos();
                [p(offset) + a * s, a * w * c, -a * w * w * s]
            }
            Motion::SmoothStep {
                initial,
                final_value,
                start,
                duration,
            } => {
                let (i0, f, t0, dt) = (p(initial), p(final_value), p(start), p(duration));
                let after = |tb: f64| t > tb || t == right_at && t == tb;
                if !after(t0) {
                    [i0, 0.0, 0.0]
                } else if after(t0 + dt) {
                    [f, 0.0, 0.0]
                } else {
                    let x = PI * (t - t0) / dt;
                    let (s, c) = x.sin_cos();
                    let a = f - i0;
                    [
                        i0 + a * (1.0 - c) / 2.0,
                        a * PI / (2.0 * dt) * s,
                        a * PI * PI / (2.0 * dt * dt) * c,
                    ]
                }
            }
            Motion::Table { .. } => self.spline.as_ref().map_or([0.0; 3], |s| s.eval(t)),
        };
        out[0] += self.offset;
        out[1] += self.rate_offsets[0];
        out[2] += self.rate_offsets[1];
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A NaN argument (a diverging trial iterate) comes out NaN for the integrator to reject;
    /// it used to index one past the table and panic.
    #[test]
    fn spline_at_nan_is_nan() {
        let s = Spline::new(&[0.0, 1.0, 2.0, 3.0], &[0.0, 1.0, 0.0, 1.0]);
        assert!(s.eval(f64::NAN).iter().all(|v| v.is_nan()));
        assert_eq!(s.eval(1.0)[0], 1.0);
        assert_eq!(s.eval(3.0)[0], 1.0);
        assert_eq!(s.eval(-1.0), [0.0; 3]);
    }

    #[test]
    fn spline_reproduces_a_cubic_in_the_interior_and_is_c2() {
        // A natural spline reproduces straight lines exactly.
        let x: Vec<f64> = (0..8).map(|i| i as f64 * 0.5).collect();
        let y: Vec<f64> = x.iter().map(|x| 2.0 * x - 1.0).collect();
        let s = Spline::new(&x, &y);
        let [v, d, dd] = s.eval(1.3);
        assert!((v - 1.6).abs() < 1e-13 && (d - 2.0).abs() < 1e-13 && dd.abs() < 1e-12);
        // Derivatives against finite differences on a curved table.
        let y2: Vec<f64> = x.iter().map(|x: &f64| x.sin()).collect();
        let s2 = Spline::new(&x, &y2);
        let h = 1e-6;
        for t in [0.3, 1.0, 2.2, 3.1] {
            let [v, d, dd] = s2.eval(t);
            assert!((d - (s2.eval(t + h)[0] - s2.eval(t - h)[0]) / (2.0 * h)).abs() < 1e-7);
            assert!((dd - (s2.eval(t + h)[1] - s2.eval(t - h)[1]) / (2.0 * h)).abs() < 1e-6);
            assert!((v - t.sin()).abs() < 2e-2, "interpolates sin closely");
        }
    }

    #[test]
    fn builtin_motions_derivatives() {
        use crate::mbs::spec::Scalar::Const;
        let inputs = InputSignals::default();
        let motions = [
            Motion::Sine {
                offset: Const(1.0),
                amplitude: Const(0.3),
                frequency: Const(0.7),
                phase: Const(0.2),
            },
            Motion::SmoothStep {
                initial: Const(1.0),
                final_value: Const(3.0),
                start: Const(0.5),
                duration: Const(2.0),
            },
            Motion::Ramp {
                initial: Const(1.0),
                slope: Const(-2.0),
                start: Const(0.5),
            },
        ];
        let h = 1e-6;
        for m in &motions {
            let s = MotionSlot::new(m);
            for t in [0.9, 1.7, 2.3] {
                let [_, d, dd] = s.eval(t, &[], &inputs, f64::NAN);
                let fd1 = (s.eval(t + h, &[], &inputs, f64::NAN)[0]
                    - s.eval(t - h, &[], &inputs, f64::NAN)[0])
                    / (2.0 * h);
                let fd2 = (s.eval(t + h, &[], &inputs, f64::NAN)[1]
                    - s.eval(t - h, &[], &inputs, f64::NAN)[1])
                    / (2.0 * h);
                assert!(
                    (d - fd1).abs() < 1e-7 && (dd - fd2).abs() < 1e-6,
                    "{m:?} at {t}"
                );
            }
        }
    }
}
