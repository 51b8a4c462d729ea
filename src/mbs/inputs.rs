//! Input signals as the engine sees them: each FMU input is a polynomial segment in time,
//! `u(t) = c0 + c1 s + c2 s² + c3 s³` with `s = t − t0`, from which drivers take the value and
//! its first two time derivatives. The co-simulation layer decides the segment: held value,
//! FMI 2 input derivatives, FMI 3 intermediate updates, or a reconstruction from history.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct InputSegment {
    pub t0: f64,
    pub coeffs: [f64; 4],
}

impl InputSegment {
    pub fn constant(t0: f64, value: f64) -> Self {
        InputSegment {
            t0,
            coeffs: [value, 0.0, 0.0, 0.0],
        }
    }

    /// Value, first and second time derivative at `t`.
    pub fn eval(&self, t: f64) -> [f64; 3] {
        let s = t - self.t0;
        let [c0, c1, c2, c3] = self.coeffs;
        [
            c0 + s * (c1 + s * (c2 + s * c3)),
            c1 + s * (2.0 * c2 + s * 3.0 * c3),
            2.0 * c2 + 6.0 * c3 * s,
        ]
    }
}

/// The current segment of every input, in `ModelSpec::inputs` order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct InputSignals {
    pub segments: Vec<InputSegment>,
}

impl InputSignals {
    pub fn new(starts: &[f64]) -> Self {
        InputSignals {
            segments: starts
                .iter()
                .map(|&u| InputSegment::constant(0.0, u))
                .collect(),
        }
    }

    pub fn eval(&self, i: usize, t: f64) -> [f64; 3] {
        self.segments[i].eval(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cubic_segment_derivatives_match_finite_differences() {
        let seg = InputSegment {
            t0: 1.0,
            coeffs: [0.5, -2.0, 3.0, 0.7],
        };
        let h = 1e-6;
        let t = 1.3;
        let [u, du, ddu] = seg.eval(t);
        let [up, dup, _] = seg.eval(t + h);
        let [um, dum, _] = seg.eval(t - h);
        assert!((du - (up - um) / (2.0 * h)).abs() < 1e-8);
        assert!((ddu - (dup - dum) / (2.0 * h)).abs() < 1e-7);
        let s: f64 = 0.3;
        assert!((u - (0.5 - 2.0 * s + 3.0 * s * s + 0.7 * s * s * s)).abs() < 1e-15);
    }
}
