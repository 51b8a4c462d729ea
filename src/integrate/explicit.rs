//! Dormand–Prince 5(4) on the index-1 form, the non-stiff baseline of the suite.
//!
//! The state is `y = (q, v)`, `y' = (v, a)` with `a` (and `λ`) from the saddle-point system
//! `[M Φqᵀ; Φq 0][a; λ] = [f; γ]`. The embedded 4th-order solution gives the error estimate;
//! after every accepted step `q` is projected onto `Φ = 0` (Gauss–Newton, minimal norm) and `v`
//! onto `Φq v + Φt = 0` (minimal norm), which stops the drift of the index-1 form. Because the
//! projection moves the state, the first stage of the next step is re-evaluated at the
//! projected state (no FSAL reuse): 7 right-hand sides per step. Dense output uses
//! Dormand–Prince's continuous extension of order 4 on the unprojected step.

#![allow(clippy::needless_range_loop)] // index loops are clearer in dense numerics

use super::dense::{self, Constrained};
use super::step_control::{weighted_rms_norm, StepController};
use super::{IntegrateError, Integrator, MechState, Method, MultibodySystem, Settings, Stats};
use serde::{Deserialize, Serialize};

const C: [f64; 7] = [0.0, 1.0 / 5.0, 3.0 / 10.0, 4.0 / 5.0, 8.0 / 9.0, 1.0, 1.0];
const A: [[f64; 6]; 7] = [
    [0.0; 6],
    [1.0 / 5.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [3.0 / 40.0, 9.0 / 40.0, 0.0, 0.0, 0.0, 0.0],
    [44.0 / 45.0, -56.0 / 15.0, 32.0 / 9.0, 0.0, 0.0, 0.0],
    [
        19372.0 / 6561.0,
        -25360.0 / 2187.0,
        64448.0 / 6561.0,
        -212.0 / 729.0,
        0.0,
        0.0,
    ],
    [
        9017.0 / 3168.0,
        -355.0 / 33.0,
        46732.0 / 5247.0,
        49.0 / 176.0,
        -5103.0 / 18656.0,
        0.0,
    ],
    [
        35.0 / 384.0,
        0.0,
        500.0 / 1113.0,
        125.0 / 192.0,
        -2187.0 / 6784.0,
        11.0 / 84.0,
    ],
];
/// Difference of the 5th- and 4th-order weights.
const E: [f64; 7] = [
    71.0 / 57600.0,
    0.0,
    -71.0 / 16695.0,
    71.0 / 1920.0,
    -17253.0 / 339200.0,
    22.0 / 525.0,
    -1.0 / 40.0,
];
/// Dense-output coefficients (Hairer, Nørsett & Wanner, `contd5`).
const D: [f64; 7] = [
    -12715105075.0 / 11282082432.0,
    0.0,
    87487479700.0 / 32700410799.0,
    -10690763975.0 / 1880347072.0,
    701980252875.0 / 199316789632.0,
    -1453857185.0 / 822651844.0,
    69997945.0 / 29380423.0,
];

/// Dormand–Prince 5(4) with coordinate projection.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Dopri5 {
    settings: Settings,
    state: MechState,
    stats: Stats,
    h: f64,
    ctrl: StepController,
    ws: Constrained,
    /// Stage derivatives `k_i = (v_i, a_i)`, each of length `2 n_q`.
    k: Vec<Vec<f64>>,
    y0: Vec<f64>,
    y1: Vec<f64>,
    ystage: Vec<f64>,
    err: Vec<f64>,
    lambda_tmp: Vec<f64>,
    /// Continuous extension of the last accepted step: `t_old`, `h`, and five coefficient rows.
    dense_t: f64,
    dense_h: f64,
    rcont: Vec<Vec<f64>>,
    initialized: bool,
    /// `k[0]` (evaluated at the end of the last step) belongs to the right-hand side before
    /// [`Integrator::rhs_changed`] or to the state before [`Integrator::restart`]: evaluated
    /// again at the start of the next step. Saved with the state: a restart may set it at the
    /// end of a communication step, and the event locator's backup is taken before the step
    /// that clears it.
    rhs_stale: bool,
}

impl Dopri5 {
    pub fn new(settings: Settings, n_q: usize, n_c: usize) -> Self {
        let n = 2 * n_q;
        Dopri5 {
            settings: Settings {
                method: Method::Dopri5,
                ..settings
            },
            state: MechState {
                t: 0.0,
                q: vec![0.0; n_q],
                v: vec![0.0; n_q],
                lambda: vec![0.0; n_c],
            },
            stats: Stats::default(),
            h: 0.0,
            ctrl: StepController::pi(),
            ws: Constrained::new(n_q, n_c),
            k: vec![vec![0.0; n]; 7],
            y0: vec![0.0; n],
            y1: vec![0.0; n],
            ystage: vec![0.0; n],
            err: vec![0.0; n],
            lambda_tmp: vec![0.0; n_c],
            dense_t: 0.0,
            dense_h: 0.0,
            rcont: vec![vec![0.0; n]; 5],
            initialized: false,
            rhs_stale: false,
        }
    }

    /// `dy = (v, a)` at `y = (q, v)`; `lambda` receives the multipliers.
    fn rhs<S: MultibodySystem + ?Sized>(
        ws: &mut Constrained,
        stats: &mut Stats,
        sys: &mut S,
        t: f64,
        y: &[f64],
        dy: &mut [f64],
        lambda: &mut [f64],
    ) -> Result<(), IntegrateError> {
        let n = ws.nq;
        stats.f_evals += 1;
        let (q, v) = y.split_at(n);
        let (dq, dv) = dy.split_at_mut(n);
        dq.copy_from_slice(v);
        ws.accelerations(sys, t, q, v, dv, lambda)
    }

    /// The state at `t` inside the last accepted step (order-4 continuous extension of the
    /// unprojected step; the endpoint differs from the projected state by the projection).
    pub fn dense_output(&self, t: f64, q: &mut [f64], v: &mut [f64]) {
        let n = self.state.q.len();
        let th = if self.dense_h > 0.0 {
            (t - self.dense_t) / self.dense_h
        } else {
            1.0
        };
        let th1 = 1.0 - th;
        for i in 0..2 * n {
            let r = &self.rcont;
            let y = r[0][i] + th * (r[1][i] + th1 * (r[2][i] + th * (r[3][i] + th1 * r[4][i])));
            if i < n {
                q[i] = y;
            } else {
                v[i - n] = y;
            }
        }
    }
}

impl<S: MultibodySystem + ?Sized> Integrator<S> for Dopri5 {
    fn initialize(&mut self, sys: &mut S, x: &MechState) -> Result<(), IntegrateError> {
        dense::validate_settings(&self.settings)?;
        let n = self.ws.nq;
        if x.q.len() != n || x.v.len() != n || sys.n_q() != n || sys.n_c() != self.ws.nc {
            return Err(IntegrateError::Inconsistent {
                t: x.t,
                what: format!(
                    "dimension mismatch: integrator built for n_q = {n}, n_c = {}",
                    self.ws.nc
                ),
            });
        }
        self.state.t = x.t;
        self.state.q.copy_from_slice(&x.q);
        self.state.v.copy_from_slice(&x.v);
        self.stats = Stats::default();
        self.ctrl = StepController::pi();
        self.y0[..n].copy_from_slice(&x.q);
        self.y0[n..].copy_from_slice(&x.v);
        Self::rhs(
            &mut self.ws,
            &mut self.stats,
            sys,
            x.t,
            &self.y0,
            &mut self.k[0],
            &mut self.state.lambda,
        )?;
        self.h = dense::first_step(&self.settings, x.t, &self.y0, &self.k[0], 4);
        for r in self.rcont.iter_mut() {
            r.fill(0.0);
        }
        self.rcont[0].copy_from_slice(&self.y0);
        self.dense_t = x.t;
        self.dense_h = 0.0;
        self.initialized = true;
        self.rhs_stale = false;
        Ok(())
    }

    fn step(&mut self, sys: &mut S, t_limit: f64) -> Result<f64, IntegrateError> {
        if !self.initialized {
            return Err(IntegrateError::Settings("step before initialize".into()));
        }
        let n = self.ws.nq;
        let t = self.state.t;
        self.y0[..n].copy_from_slice(&self.state.q);
        self.y0[n..].copy_from_slice(&self.state.v);
        if self.rhs_stale {
            // New inputs at this point (a held force that jumped): the first stage with them,
            // not the previous sample's (that stage weighs 35/384 of the step and enters
            // every other stage: 0.82× of a force jump's first-step response).
            Self::rhs(
                &mut self.ws,
                &mut self.stats,
                sys,
                t,
                &self.y0,
                &mut self.k[0],
                &mut self.state.lambda,
            )?;
            self.rhs_stale = false;
        }
        let mut h_try = self.h;
        loop {
            let p = dense::plan_step(&self.settings, t, h_try, t_limit)?;
            let h = p.h;
            if h < dense::h_min(t) {
                return Err(IntegrateError::StepTooSmall {
                    t,
                    h,
                    h_min: dense::h_min(t),
                    reason: "error test".into(),
                });
            }
            let mut ok = Ok(());
            for s in 1..7 {
                self.ystage.copy_from_slice(&self.y0);
                for (j, kj) in self.k[..s].iter().enumerate() {
                    let a = A[s][j];
                    if a != 0.0 {
                        dense::axpy(&mut self.ystage, h * a, kj);
                    }
                }
                let tail = &mut self.k[s..];
                let ts = t + C[s] * h;
                ok = Self::rhs(
                    &mut self.ws,
                    &mut self.stats,
                    sys,
                    ts,
                    &self.ystage,
                    &mut tail[0],
                    &mut self.lambda_tmp,
                );
                if ok.is_err() {
                    break;
                }
            }
            // Stage 7 was evaluated at the 5th-order solution (row 6 of A are the weights b).
            self.y1.copy_from_slice(&self.ystage);
            let err = match ok {
                Ok(()) => {
                    self.err.fill(0.0);
                    for (s, ks) in self.k.iter().enumerate() {
                        if E[s] != 0.0 {
                            dense::axpy(&mut self.err, h * E[s], ks);
                        }
                    }
                    let e = weighted_rms_norm(
                        &self.err,
                        &self.y0,
                        &self.y1,
                        self.settings.rtol,
                        self.settings.atol,
                    );
                    if e.is_finite() {
                        e
                    } else {
                        f64::INFINITY
                    }
                }
                Err(ref e) if e.is_recoverable() => f64::INFINITY,
                Err(e) => return Err(e),
            };
            let fixed = self.settings.fixed_step.is_some();
            if fixed && !err.is_finite() {
                return Err(IntegrateError::NonFinite {
                    t,
                    what: "Dormand–Prince stage with the fixed step".into(),
                });
            }
            if err <= 1.0 || fixed {
                let t_new = dense::advance(t, p, t_limit);
                // Continuous extension from the unprojected step.
                for i in 0..2 * n {
                    let (y0, y1) = (self.y0[i], self.y1[i]);
                    let k1 = self.k[0][i];
                    let k7 = self.k[6][i];
                    let mut dsum = 0.0;
                    for (s, ks) in self.k.iter().enumerate() {
                        dsum += D[s] * ks[i];
                    }
                    let ydiff = y1 - y0;
                    let bspl = h * k1 - ydiff;
                    self.rcont[0][i] = y0;
                    self.rcont[1][i] = ydiff;
                    self.rcont[2][i] = bspl;
                    self.rcont[3][i] = ydiff - h * k7 - bspl;
                    self.rcont[4][i] = h * dsum;
                }
                self.dense_t = t;
                self.dense_h = h;
                let (q, v) = self.y1.split_at_mut(n);
                let tol = dense::projection_tol(&self.settings);
                let factorizations = self.ws.project_positions(sys, t_new, q, tol)?;
                self.ws.project_velocities(sys, t_new, q, v)?;
                if self.ws.nc > 0 {
                    self.stats.lu += factorizations as u64 + 1;
                }
                self.state.q.copy_from_slice(q);
                self.state.v.copy_from_slice(v);
                self.state.t = t_new;
                // First stage of the next step at the projected state (also gives λ there).
                Self::rhs(
                    &mut self.ws,
                    &mut self.stats,
                    sys,
                    t_new,
                    &self.y1,
                    &mut self.k[0],
                    &mut self.state.lambda,
                )?;
                self.stats.steps += 1;
                if !fixed {
                    let fac = self.ctrl.factor(err, 4, true);
                    self.ctrl.accept(err);
                    self.h = if p.clipped {
                        (fac * h).max(h_try.min(fac * h_try))
                    } else {
                        fac * h
                    };
                } else {
                    self.h = h_try;
                }
                sys.accept_step(
                    t_new,
                    &self.state.q,
                    &self.state.v,
                    Some(&self.state.lambda),
                );
                return Ok(t_new);
            }
            self.stats.rejected_steps += 1;
            self.stats.error_test_failures += 1;
            h_try = if err.is_finite() {
                h * self.ctrl.factor(err, 4, false)
            } else {
                0.25 * h
            };
        }
    }

    fn state(&self) -> &MechState {
        &self.state
    }
    fn next_step_size(&self) -> f64 {
        self.h
    }
    fn stats(&self) -> &Stats {
        &self.stats
    }
    fn method(&self) -> Method {
        Method::Dopri5
    }
    fn set_settings(&mut self, settings: Settings) {
        self.settings = Settings {
            method: Method::Dopri5,
            ..settings
        };
    }
    fn rhs_changed(&mut self) {
        self.rhs_stale = true;
    }
    /// From the projected state `x`: the step size and controller stay, the first stage is
    /// evaluated at `x` before the next step (as after [`Integrator::rhs_changed`]).
    fn restart(&mut self, sys: &mut S, x: &MechState) -> Result<bool, IntegrateError> {
        if !self.initialized || !self.state.assign_same_size(x) {
            return self.initialize(sys, x).map(|()| false);
        }
        let n = self.ws.nq;
        self.y0[..n].copy_from_slice(&x.q);
        self.y0[n..].copy_from_slice(&x.v);
        for r in self.rcont.iter_mut() {
            r.fill(0.0);
        }
        self.rcont[0].copy_from_slice(&self.y0);
        self.dense_t = x.t;
        self.dense_h = 0.0;
        self.rhs_stale = true;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrate::test_systems::Oscillator;

    /// The continuous extension against the closed form inside a step, and at its ends.
    #[test]
    fn dense_output_is_fourth_order_inside_the_step() {
        let mut errs = vec![];
        for h in [0.2, 0.1] {
            let mut sys = Oscillator {
                m: 1.0,
                k: 4.0,
                c: 0.0,
            };
            let x0 = MechState {
                t: 0.0,
                q: vec![1.0],
                v: vec![0.5],
                lambda: vec![],
            };
            let mut integ = Dopri5::new(
                Settings {
                    fixed_step: Some(h),
                    ..Settings::default()
                },
                1,
                0,
            );
            integ.initialize(&mut sys, &x0).unwrap();
            let t1 = integ.step(&mut sys, 10.0).unwrap();
            assert_eq!(t1, h);
            let (mut q, mut v) = ([0.0], [0.0]);
            integ.dense_output(t1, &mut q, &mut v);
            assert!((q[0] - Integrator::<Oscillator>::state(&integ).q[0]).abs() < 1e-15);
            integ.dense_output(0.0, &mut q, &mut v);
            assert!((q[0] - 1.0).abs() < 1e-15 && (v[0] - 0.5).abs() < 1e-15);
            let mut worst = 0.0f64;
            for k in 1..10 {
                let t = h * k as f64 / 10.0;
                integ.dense_output(t, &mut q, &mut v);
                let (xe, ve) = sys.exact(1.0, 0.5, t);
                worst = worst.max((q[0] - xe).abs()).max((v[0] - ve).abs());
            }
            errs.push(worst);
        }
        // Local error of an order-4 interpolant: O(h^5), ratio 32 when h halves.
        assert!(errs[0] < 1e-4 && errs[0] / errs[1] > 20.0, "{errs:?}");
    }
}
