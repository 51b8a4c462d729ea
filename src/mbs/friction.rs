//! Joint friction (prismatic travel, revolute angle) with an optional stiction state.
//!
//! **Kinetic friction** is regularized Coulomb: `F = −μ_k N tanh(ξ̇ / v_reg)` along the joint
//! coordinate ξ, with `N` the normal load (prismatic: the joint reaction force perpendicular to
//! the axis; revolute: the magnitude of the joint reaction force times the friction radius `r`,
//! so `N` is then a torque limit per unit μ), taken from the last accepted step. Alone it cannot
//! hold a load: any force below the limit is balanced only at a nonzero creep speed
//! `ξ̇ = v_reg artanh(F / μN)`.
//!
//! **Stiction** (`mu_static` given) adds a stick state, an elasto-plastic "stick anchor":
//!
//! - *stick*: `F = −k_s (ξ − a) − c_s ξ̇`, a stiff spring-damper to the anchor position `a`. The
//!   element holds any load below the static limit with a deflection `F / k_s` and no creep.
//! - *slip*: the kinetic law above.
//!
//! The mode and the anchor are discrete states, changed only at accepted steps (never inside a
//! Newton iteration, so every step integrates a smooth law):
//!
//! - stick → slip when the spring force `|k_s (ξ − a)|` exceeds `μ_s N`;
//! - slip → stick when `|ξ̇|` is below `v_stick` and the element is slowing down (speed lower
//!   than at the previous accepted step, or the sign changed), once it has slipped faster than
//!   `v_stick` since it broke loose (an element that breaks loose is driven by more than the
//!   static limit, so it speeds up; without this, a step that overshoots in the regularized
//!   region, `|ξ̇| < v_reg`, would make it stick again at once); the anchor is placed where the
//!   spring carries the present kinetic force, `a = ξ + F_kin / k_s`, so the force is
//!   continuous at the switch. A load above `μ_s N` then breaks it loose again.
//!
//! At initialization a sticking element's anchor is placed so that its spring already carries
//! the holding force (`System::preload_stick`); static equilibrium keeps every element stuck.
//!
//! The switch stick → slip is detected at the end of the step in which the limit was exceeded
//! (no event location: the mode change is not a function of the positions alone). The states
//! are part of the engine state (FMU state, `getFMUState`).

use serde::{Deserialize, Serialize};

/// Stiction parameters of one element, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stiction {
    pub mu_static: f64,
    /// Anchor spring (N/m or N m/rad) and damper (N s/m or N m s/rad).
    pub k: f64,
    pub c: f64,
    /// Speed below which a slowing element sticks (m/s or rad/s).
    pub v_stick: f64,
}

/// The discrete state of one element with stiction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StickState {
    pub stick: bool,
    /// Anchor position (coordinate units).
    pub anchor: f64,
    /// ξ̇ at the previous accepted step while slipping (NaN after a sticking step).
    pub v_prev: f64,
    /// Slipped faster than `v_stick` since the last break-away (may stick again).
    #[serde(default)]
    pub armed: bool,
}

impl StickState {
    /// Sticking at `xi`, unloaded.
    pub fn at(xi: f64) -> StickState {
        StickState {
            stick: true,
            anchor: xi,
            v_prev: f64::NAN,
            armed: false,
        }
    }
}

/// Kinetic law `(F, ∂F/∂ξ, ∂F/∂ξ̇)` for the limit `mu_n = μ N`.
fn kinetic(mu_n: f64, v_reg: f64, rate: f64) -> (f64, f64, f64) {
    let th = (rate / v_reg).tanh();
    (-mu_n * th, 0.0, -mu_n * (1.0 - th * th) / v_reg)
}

/// Friction force along ξ and its partial derivatives `(F, ∂F/∂ξ, ∂F/∂ξ̇)`; `n` the normal
/// load, `st` the stiction parameters and state if the element has them.
pub fn force(
    mu: f64,
    v_reg: f64,
    n: f64,
    st: Option<(&Stiction, &StickState)>,
    xi: f64,
    rate: f64,
) -> (f64, f64, f64) {
    match st {
        Some((s, state)) if state.stick => (-s.k * (xi - state.anchor) - s.c * rate, -s.k, -s.c),
        _ => kinetic(mu * n, v_reg, rate),
    }
}

/// The state update at an accepted step (module rules).
pub fn accept(
    mu: f64,
    v_reg: f64,
    n: f64,
    s: &Stiction,
    state: &mut StickState,
    xi: f64,
    rate: f64,
) {
    if state.stick {
        if (s.k * (xi - state.anchor)).abs() > s.mu_static * n {
            state.stick = false;
            state.armed = false;
        }
        // Slowing down is judged between slipping steps only (NaN compares false).
        state.v_prev = f64::NAN;
        return;
    }
    if may_stick(s, state, rate) {
        let (f, _, _) = kinetic(mu * n, v_reg, rate);
        state.anchor = xi + f / s.k;
    }
}

/// The slip → stick rule of a slipping element at an accepted step, on its slip rate (a signed
/// rate, or a speed for a contact's tangent plane): arms it once faster than `v_stick`,
/// switches to stick when armed, slower than `v_stick` and slowing down. The caller places the
/// anchor when this returns `true`.
pub fn may_stick(s: &Stiction, state: &mut StickState, rate: f64) -> bool {
    state.armed |= rate.abs() >= s.v_stick;
    let slowing = rate.abs() < state.v_prev.abs() || rate * state.v_prev < 0.0;
    if state.armed && rate.abs() < s.v_stick && slowing {
        state.stick = true;
        state.v_prev = f64::NAN;
        true
    } else {
        state.v_prev = rate;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Stiction = Stiction {
        mu_static: 0.5,
        k: 1e5,
        c: 30.0,
        v_stick: 1e-3,
    };

    #[test]
    fn derivatives_match_finite_differences() {
        let h = 1e-8;
        for stick in [true, false] {
            let state = StickState {
                stick,
                anchor: 0.01,
                v_prev: 0.0,
                armed: false,
            };
            for (xi, rate) in [(0.0, 1e-4), (0.02, -3e-4), (0.3, 2e-3), (-1.0, -0.5)] {
                let f = |x: f64, v: f64| force(0.4, 1e-3, 20.0, Some((&S, &state)), x, v).0;
                let (_, fx, fv) = force(0.4, 1e-3, 20.0, Some((&S, &state)), xi, rate);
                let dx = (f(xi + h, rate) - f(xi - h, rate)) / (2.0 * h);
                let dv = (f(xi, rate + h) - f(xi, rate - h)) / (2.0 * h);
                assert!(
                    (fx - dx).abs() <= 1e-5 * (1.0 + dx.abs()),
                    "{stick} {xi}: {fx} {dx}"
                );
                assert!(
                    (fv - dv).abs() <= 1e-5 * (1.0 + dv.abs()),
                    "{stick} {rate}: {fv} {dv}"
                );
            }
        }
    }

    #[test]
    fn breaks_loose_above_the_static_limit_and_sticks_when_slowing() {
        let (mu, v_reg, n) = (0.4, 1e-3, 20.0);
        let mut st = StickState::at(0.0);
        // Spring force 9 N < μ_s N = 10 N: holds.
        accept(mu, v_reg, n, &S, &mut st, 9e-5, 0.0);
        assert!(st.stick);
        // 11 N > 10 N: slips.
        accept(mu, v_reg, n, &S, &mut st, 11e-5, 0.0);
        assert!(!st.stick);
        // Accelerating through low speed: keeps slipping; a reversal before it has slipped
        // faster than v_stick does not make it stick.
        accept(mu, v_reg, n, &S, &mut st, 12e-5, 1e-4);
        accept(mu, v_reg, n, &S, &mut st, 13e-5, -5e-5);
        accept(mu, v_reg, n, &S, &mut st, 13e-5, 5e-4);
        assert!(!st.stick);
        accept(mu, v_reg, n, &S, &mut st, 0.1, 2e-3);
        assert!(!st.stick && st.armed);
        // Slowing below v_stick: sticks with the kinetic force carried by the spring.
        accept(mu, v_reg, n, &S, &mut st, 0.2, 2e-4);
        assert!(st.stick);
        let (f_stick, _, _) = force(mu, v_reg, n, Some((&S, &st)), 0.2, 0.0);
        let (f_kin, _, _) = kinetic(mu * n, v_reg, 2e-4);
        assert!((f_stick - f_kin).abs() < 1e-12);
    }
}
