//! Characteristic curves of force elements from tables: force against deflection or velocity
//! (`table` and `damper_table` of a `spring_damper` or `rotational_spring_damper`, the
//! per-axis `tables` of a `bushing`). One implementation for all of them.
//!
//! A C² cubic spline with not-a-knot end conditions: it reproduces any cubic exactly, so a
//! table sampled from `c₁ v + c₃ v³` is that curve, and a fine table of a smooth measured
//! curve is close to it. Outside the table the curve continues as the straight line of its
//! end value and slope (a damper keeps damping beyond the measured range; a constant
//! extrapolation would lose its derivative, which the implicit integrators' Jacobians use).

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    x: Vec<f64>,
    y: Vec<f64>,
    /// Second derivatives at the knots.
    m: Vec<f64>,
    /// `∫ f` from `x[0]` to each knot (the potential of a spring curve).
    cum: Vec<f64>,
}

impl Curve {
    /// `x` strictly increasing, at least two points (the table reader checks both).
    pub fn new(x: &[f64], y: &[f64]) -> Curve {
        let n = x.len();
        let mut m = vec![0.0; n];
        if n >= 4 {
            // Continuity of the first derivative at interior knots, plus not-a-knot (third
            // derivative continuous across x₁ and x_{n−2}). Tables are short: a dense solve
            // once at load.
            let h: Vec<f64> = (0..n - 1).map(|i| x[i + 1] - x[i]).collect();
            let mut a = DMatrix::zeros(n, n);
            let mut b = DVector::zeros(n);
            a[(0, 0)] = h[1];
            a[(0, 1)] = -(h[0] + h[1]);
            a[(0, 2)] = h[0];
            for i in 1..n - 1 {
                a[(i, i - 1)] = h[i - 1];
                a[(i, i)] = 2.0 * (h[i - 1] + h[i]);
                a[(i, i + 1)] = h[i];
                b[i] = 6.0 * ((y[i + 1] - y[i]) / h[i] - (y[i] - y[i - 1]) / h[i - 1]);
            }
            a[(n - 1, n - 3)] = h[n - 2];
            a[(n - 1, n - 2)] = -(h[n - 3] + h[n - 2]);
            a[(n - 1, n - 1)] = h[n - 3];
            if let Some(s) = a.lu().solve(&b) {
                m = s.iter().copied().collect();
            }
        } else if n == 3 {
            // Not-a-knot with three points: the parabola through them.
            let d0 = (y[1] - y[0]) / (x[1] - x[0]);
            let d1 = (y[2] - y[1]) / (x[2] - x[1]);
            let c = 2.0 * (d1 - d0) / (x[2] - x[0]);
            m = vec![c; 3];
        }
        let mut cum = vec![0.0; n];
        for i in 0..n - 1 {
            cum[i + 1] = cum[i] + piece_integral(x, y, &m, i, x[i + 1]);
        }
        Curve {
            x: x.to_vec(),
            y: y.to_vec(),
            m,
            cum,
        }
    }

    /// The curve of a table read by the loader.
    pub fn from_table(t: &super::spec::CurveTable) -> Curve {
        Curve::new(&t.x, &t.y)
    }

    /// `∫₀^v f(s) ds`, analytic (the elastic energy of a spring curve with deflection `v`).
    pub fn integral(&self, v: f64) -> f64 {
        self.antiderivative(v) - self.antiderivative(0.0)
    }

    /// `∫_{x₀}^v f(s) ds`, with the linear extrapolation outside the table.
    fn antiderivative(&self, v: f64) -> f64 {
        let n = self.x.len();
        if v <= self.x[0] {
            let (y0, d0) = self.eval(self.x[0]);
            let u = v - self.x[0];
            return y0 * u + 0.5 * d0 * u * u;
        }
        if v >= self.x[n - 1] {
            let (y1, d1) = self.eval(self.x[n - 1]);
            let u = v - self.x[n - 1];
            return self.cum[n - 1] + y1 * u + 0.5 * d1 * u * u;
        }
        let i = self.x.partition_point(|&k| k <= v).clamp(1, n - 1) - 1;
        self.cum[i] + piece_integral(&self.x, &self.y, &self.m, i, v)
    }

    /// Value and slope at `v`.
    pub fn eval(&self, v: f64) -> (f64, f64) {
        let n = self.x.len();
        let seg = |i: usize, t: f64| {
            let [val, d1, _] = super::motion::cubic_piece(&self.x, &self.y, &self.m, i, t);
            (val, d1)
        };
        if v <= self.x[0] {
            let (y0, d0) = seg(0, self.x[0]);
            return (y0 + d0 * (v - self.x[0]), d0);
        }
        if v >= self.x[n - 1] {
            let (y1, d1) = seg(n - 2, self.x[n - 1]);
            return (y1 + d1 * (v - self.x[n - 1]), d1);
        }
        let i = self.x.partition_point(|&k| k <= v).clamp(1, n - 1) - 1;
        seg(i, v)
    }
}

/// `∫_{x_i}^t` of the cubic piece on `[x_i, x_{i+1}]` (the form of `motion::cubic_piece`:
/// `a y_i + b y_j + ((a³ − a) m_i + (b³ − b) m_j) h²/6`, `a = (x_j − t)/h`, `b = 1 − a`).
fn piece_integral(x: &[f64], y: &[f64], m: &[f64], i: usize, t: f64) -> f64 {
    let h = x[i + 1] - x[i];
    let (a, b) = ((x[i + 1] - t) / h, (t - x[i]) / h);
    let (a2, b2) = (a * a, b * b);
    h * (0.5 * y[i] * (1.0 - a2)
        + 0.5 * y[i + 1] * b2
        + h * h / 6.0
            * (-m[i] * (0.25 * a2 * a2 - 0.5 * a2 + 0.25) + m[i + 1] * (0.25 * b2 * b2 - 0.5 * b2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproduces_a_cubic_and_extrapolates_linearly() {
        let f = |v: f64| 1500.0 * v + 4000.0 * v * v * v - 200.0 * v * v;
        let df = |v: f64| 1500.0 + 12000.0 * v * v - 400.0 * v;
        // Uneven knots.
        let x = [-1.0, -0.6, -0.25, -0.05, 0.0, 0.1, 0.3, 0.7, 1.0];
        let y: Vec<f64> = x.iter().map(|&v| f(v)).collect();
        let c = Curve::new(&x, &y);
        for k in 0..=200 {
            let v = -1.0 + 0.01 * k as f64;
            let (val, d) = c.eval(v);
            assert!(
                (val - f(v)).abs() < 1e-9 * (1.0 + f(v).abs()),
                "{v}: {val} {}",
                f(v)
            );
            assert!(
                (d - df(v)).abs() < 1e-8 * (1.0 + df(v).abs()),
                "{v}: {d} {}",
                df(v)
            );
        }
        let (y1, d1) = (f(1.0), df(1.0));
        let (val, d) = c.eval(1.5);
        assert!((val - (y1 + 0.5 * d1)).abs() < 1e-8 * y1.abs() && (d - d1).abs() < 1e-8 * d1);
        let (y0, d0) = (f(-1.0), df(-1.0));
        let (val, d) = c.eval(-2.0);
        assert!((val - (y0 - d0)).abs() < 1e-8 * y0.abs() && (d - d0).abs() < 1e-8 * d0);
        // The potential: the closed-form integral inside, plus the straight line's outside.
        let big_f = |v: f64| 750.0 * v * v + 1000.0 * v.powi(4) - 200.0 / 3.0 * v.powi(3);
        for v in [-1.0, -0.7, -0.05, 0.0, 0.2, 0.65, 1.0] {
            let (got, want) = (c.integral(v), big_f(v));
            assert!(
                (got - want).abs() < 1e-9 * (1.0 + want.abs()),
                "{v}: {got} {want}"
            );
        }
        let want = big_f(1.0) + y1 * 0.5 + 0.5 * d1 * 0.25;
        assert!((c.integral(1.5) - want).abs() < 1e-9 * want);
        let want = big_f(-1.0) - y0 + 0.5 * d0;
        assert!((c.integral(-2.0) - want).abs() < 1e-9 * want.abs());
    }

    #[test]
    fn slope_matches_finite_differences_on_a_measured_like_table() {
        // A degressive damper: steep at low speed, flatter above 0.1 m/s, asymmetric.
        let x = [-1.0, -0.3, -0.1, 0.0, 0.1, 0.3, 1.0];
        let y = [-900.0, -550.0, -350.0, 0.0, 700.0, 1100.0, 1900.0];
        let c = Curve::new(&x, &y);
        let h = 1e-6;
        for v in [-1.3, -0.7, -0.2, -0.05, 0.02, 0.1, 0.25, 0.6, 1.4] {
            let fd = (c.eval(v + h).0 - c.eval(v - h).0) / (2.0 * h);
            let (_, d) = c.eval(v);
            assert!((d - fd).abs() < 1e-5 * (1.0 + d.abs()), "{v}: {d} {fd}");
        }
        for (i, &v) in x.iter().enumerate() {
            assert!(
                (c.eval(v).0 - y[i]).abs() < 1e-9,
                "passes through the knots"
            );
        }
        // Two and three points: the line and the parabola.
        let line = Curve::new(&[0.0, 1.0], &[0.0, 2.0]);
        assert_eq!(line.eval(3.0), (6.0, 2.0));
        let par = Curve::new(&[-1.0, 0.0, 1.0], &[1.0, 0.0, 1.0]);
        let (v, d) = par.eval(0.5);
        assert!((v - 0.25).abs() < 1e-14 && (d - 1.0).abs() < 1e-14);
    }
}
