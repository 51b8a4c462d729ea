//! End stops on a joint coordinate ξ (revolute angle in rad, prismatic travel in m).
//!
//! A stop is a one-sided spring-damper that acts while the coordinate is beyond a limit:
//! below `lower` with penetration `δ = lower − ξ` it pushes ξ up with `F = k δ + c δ̇`, above
//! `upper` with `δ = ξ − upper` it pushes ξ down with the same law. Between the limits it is
//! zero. The law is the linear Kelvin–Voigt element, applied while `δ > 0` (it may pull slightly
//! at the end of a rebound, where `c δ̇` outweighs `k δ`): that is what makes its coefficient of
//! restitution exact for a coordinate of constant effective inertia `m` and no other force along
//! it — the contact is half a period of a damped oscillator,
//!
//! ```text
//!   e = exp(−π ζ / √(1 − ζ²)),   ζ = c / (2 √(k m)),   equivalently   ζ = −ln e / √(π² + ln² e),
//! ```
//!
//! independent of the impact speed. Given `restitution`, the damping is computed from it with
//! the effective inertia of the coordinate at the initial configuration
//! (`1/m = ∇ξᵀ [M Φqᵀ; Φq 0]⁻¹ ∇ξ`, the model's own mass and constraints). An overdamped stop
//! (`ζ ≥ 1`, reachable only with `damping`) does not rebound.
//!
//! Each finite limit has an event function, `ξ − lower` and `upper − ξ` (negative in contact),
//! so the event locator ends steps where a stop closes or opens (the force switches there).

use serde::{Deserialize, Serialize};

/// One stop element, its values resolved.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stop {
    /// Limits of the coordinate (−∞ / +∞ where the stop is one-sided).
    pub lower: f64,
    pub upper: f64,
    /// Stiffness (N/m or N m/rad).
    pub k: f64,
    /// Damping (N s/m or N m s/rad) when given directly; NaN when `restitution` is.
    pub damping: f64,
    /// Coefficient of restitution in (0, 1], or NaN.
    pub restitution: f64,
    /// Effective inertia of the coordinate (kg or kg m²) at the initial configuration, computed
    /// at initialization when `restitution` is given (NaN before).
    pub m_eff: f64,
}

/// Damping ratio of a Kelvin–Voigt contact with restitution `e` (module formula).
pub fn damping_ratio(e: f64) -> f64 {
    let l = e.ln();
    -l / (std::f64::consts::PI.powi(2) + l * l).sqrt()
}

/// Restitution of a Kelvin–Voigt contact with damping ratio `zeta` (< 1; 0 when ≥ 1).
pub fn restitution(zeta: f64) -> f64 {
    if zeta >= 1.0 {
        return 0.0;
    }
    (-std::f64::consts::PI * zeta / (1.0 - zeta * zeta).sqrt()).exp()
}

impl Stop {
    /// The damping coefficient in use.
    pub fn c(&self) -> f64 {
        if self.restitution.is_nan() {
            self.damping
        } else if self.m_eff.is_finite() && self.m_eff > 0.0 {
            2.0 * damping_ratio(self.restitution) * (self.k * self.m_eff).sqrt()
        } else {
            0.0
        }
    }

    /// Generalized force along ξ and its partial derivatives `(F, ∂F/∂ξ, ∂F/∂ξ̇)`.
    pub fn force(&self, xi: f64, rate: f64) -> (f64, f64, f64) {
        let (k, c) = (self.k, self.c());
        if xi < self.lower {
            // δ = lower − ξ, δ̇ = −ξ̇; F = k δ + c δ̇ along +ξ.
            (k * (self.lower - xi) - c * rate, -k, -c)
        } else if xi > self.upper {
            (-(k * (xi - self.upper) + c * rate), -k, -c)
        } else {
            (0.0, 0.0, 0.0)
        }
    }

    /// Elastic energy `½ k δ²`.
    pub fn energy(&self, xi: f64) -> f64 {
        let d = (self.lower - xi).max(xi - self.upper).max(0.0);
        0.5 * self.k * d * d
    }

    /// Number of event functions (finite limits).
    pub fn n_events(&self) -> usize {
        self.lower.is_finite() as usize + self.upper.is_finite() as usize
    }

    /// Event function values (lower first), negative while that side is in contact; returns
    /// how many were written.
    pub fn events(&self, xi: f64, g: &mut [f64]) -> usize {
        let mut n = 0;
        if self.lower.is_finite() {
            g[n] = xi - self.lower;
            n += 1;
        }
        if self.upper.is_finite() {
            g[n] = self.upper - xi;
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stop() -> Stop {
        Stop {
            lower: -0.1,
            upper: 0.2,
            k: 1e4,
            damping: f64::NAN,
            restitution: 0.6,
            m_eff: 2.0,
        }
    }

    #[test]
    fn restitution_and_damping_ratio_are_inverse() {
        for e in [0.05, 0.3, 0.6, 0.99, 1.0] {
            assert!((restitution(damping_ratio(e)) - e).abs() < 1e-14, "{e}");
        }
        assert_eq!(damping_ratio(1.0), 0.0);
    }

    #[test]
    fn derivatives_match_finite_differences() {
        let s = stop();
        let h = 1e-7;
        for (xi, rate) in [
            (-0.15, 0.3),
            (-0.12, -2.0),
            (0.25, 0.7),
            (0.21, -0.4),
            (0.0, 1.0),
        ] {
            let (_, fx, fv) = s.force(xi, rate);
            let dx = (s.force(xi + h, rate).0 - s.force(xi - h, rate).0) / (2.0 * h);
            let dv = (s.force(xi, rate + h).0 - s.force(xi, rate - h).0) / (2.0 * h);
            assert!(
                (fx - dx).abs() <= 1e-6 * (1.0 + dx.abs()),
                "{xi} {rate}: {fx} {dx}"
            );
            assert!(
                (fv - dv).abs() <= 1e-6 * (1.0 + dv.abs()),
                "{xi} {rate}: {fv} {dv}"
            );
            // The force is minus the gradient of the elastic energy (damping aside).
            let de = (s.energy(xi + h) - s.energy(xi - h)) / (2.0 * h);
            let (f0, _, _) = s.force(xi, 0.0);
            assert!(
                (f0 + de).abs() <= 1e-5 * (1.0 + f0.abs()),
                "{xi}: {f0} {de}"
            );
        }
    }

    #[test]
    fn signs_push_back_inside() {
        let s = stop();
        assert!(s.force(-0.11, 0.0).0 > 0.0);
        assert!(s.force(0.21, 0.0).0 < 0.0);
        assert_eq!(s.force(0.05, 3.0), (0.0, 0.0, 0.0));
        let mut g = [0.0; 2];
        assert_eq!(s.events(-0.11, &mut g), 2);
        assert!(g[0] < 0.0 && g[1] > 0.0);
    }
}
