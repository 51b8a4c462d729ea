//! [`AnyIntegrator`]: one type for every integration method, chosen at run time by the FMU
//! parameter `solver.integrator`. Cloneable and serializable as a whole (FMU state).
//!
//! Methods are added here as they are written. Until the BDF (`integrate::bdf`) lands,
//! `Method::Bdf` is served by [`StandInRk`], a small explicit Runge–Kutta method for
//! unconstrained systems that exists only so the co-simulation layer and the C ABI can be
//! tested with a real integration. It is NOT the BDF and not a deliverable.

use super::step_control::{weighted_rms_norm, StepController};
use super::{IntegrateError, Integrator, MechState, Method, MultibodySystem, Settings, Stats};
use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AnyIntegrator {
    /// Temporary stand-in for `Method::Bdf` (see the module documentation).
    StandIn(StandInRk),
}

impl AnyIntegrator {
    /// The integrator for `settings.method`, for a system with `n_q` coordinates and `n_c`
    /// constraints.
    pub fn new(
        settings: Settings,
        n_q: usize,
        n_c: usize,
    ) -> Result<AnyIntegrator, IntegrateError> {
        match settings.method {
            Method::Bdf => Ok(AnyIntegrator::StandIn(StandInRk::new(settings, n_q, n_c)?)),
            m => Err(IntegrateError::Settings(format!(
                "integration method `{}` is not available in this build",
                m.name()
            ))),
        }
    }

    /// Whether [`AnyIntegrator::new`] can build `method`.
    pub fn is_available(method: Method) -> bool {
        matches!(method, Method::Bdf)
    }
}

/// Forward a call to the method inside (one arm per variant).
macro_rules! dispatch {
    ($self:expr, $i:ident => $e:expr) => {
        match $self {
            AnyIntegrator::StandIn($i) => $e,
        }
    };
}

impl<S: MultibodySystem + ?Sized> Integrator<S> for AnyIntegrator {
    fn initialize(&mut self, sys: &mut S, x: &MechState) -> Result<(), IntegrateError> {
        dispatch!(self, i => i.initialize(sys, x))
    }
    fn step(&mut self, sys: &mut S, t_limit: f64) -> Result<f64, IntegrateError> {
        dispatch!(self, i => i.step(sys, t_limit))
    }
    fn state(&self) -> &MechState {
        dispatch!(self, i => Integrator::<S>::state(i))
    }
    fn next_step_size(&self) -> f64 {
        dispatch!(self, i => Integrator::<S>::next_step_size(i))
    }
    fn stats(&self) -> &Stats {
        dispatch!(self, i => Integrator::<S>::stats(i))
    }
    fn method(&self) -> Method {
        dispatch!(self, i => Integrator::<S>::method(i))
    }
    fn set_settings(&mut self, settings: Settings) {
        dispatch!(self, i => Integrator::<S>::set_settings(i, settings))
    }
}

/// Stand-in integrator (temporary, see the module documentation): Bogacki–Shampine 3(2) on
/// `M v̇ = f`, for systems without constraints only.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StandInRk {
    settings: Settings,
    x: MechState,
    h: f64,
    stats: Stats,
    ctrl: StepController,
    n_q: usize,
    // Workspaces (preallocated).
    m: DMatrix<f64>,
    f: Vec<f64>,
    k: [Vec<f64>; 4],
    kq: [Vec<f64>; 4],
    yq: Vec<f64>,
    yv: Vec<f64>,
    err: Vec<f64>,
    old: Vec<f64>,
    new: Vec<f64>,
    have_k1: bool,
}

impl StandInRk {
    pub fn new(settings: Settings, n_q: usize, n_c: usize) -> Result<StandInRk, IntegrateError> {
        if n_c > 0 {
            return Err(IntegrateError::Settings(
                "the stand-in integrator handles unconstrained systems only".into(),
            ));
        }
        let z = || vec![0.0; n_q];
        Ok(StandInRk {
            settings,
            x: MechState::default(),
            h: 0.0,
            stats: Stats::default(),
            ctrl: StepController::elementary(),
            n_q,
            m: DMatrix::zeros(n_q, n_q),
            f: z(),
            k: [z(), z(), z(), z()],
            kq: [z(), z(), z(), z()],
            yq: z(),
            yv: z(),
            err: vec![0.0; 2 * n_q],
            old: vec![0.0; 2 * n_q],
            new: vec![0.0; 2 * n_q],
            have_k1: false,
        })
    }

    /// Acceleration `M⁻¹ f` into `out`.
    fn accel<S: MultibodySystem + ?Sized>(
        &mut self,
        sys: &mut S,
        t: f64,
        q: &[f64],
        v: &[f64],
        out_idx: usize,
    ) -> Result<(), IntegrateError> {
        sys.mass_matrix(t, q, &mut self.m);
        sys.forces(t, q, v, &mut self.f);
        self.stats.f_evals += 1;
        let lu = self.m.clone().lu();
        let b = nalgebra::DVector::from_column_slice(&self.f);
        let a = lu.solve(&b).ok_or_else(|| IntegrateError::Singular {
            t,
            what: "mass matrix".into(),
        })?;
        if a.iter().any(|x| !x.is_finite()) {
            return Err(IntegrateError::NonFinite {
                t,
                what: "accelerations".into(),
            });
        }
        self.k[out_idx].copy_from_slice(a.as_slice());
        self.kq[out_idx].copy_from_slice(v);
        Ok(())
    }
}

impl<S: MultibodySystem + ?Sized> Integrator<S> for StandInRk {
    fn initialize(&mut self, sys: &mut S, x: &MechState) -> Result<(), IntegrateError> {
        if x.q.len() != self.n_q || x.v.len() != self.n_q {
            return Err(IntegrateError::Inconsistent {
                t: x.t,
                what: "state dimensions".into(),
            });
        }
        self.x = x.clone();
        self.stats = Stats::default();
        self.ctrl = StepController::elementary();
        let (q, v) = (x.q.clone(), x.v.clone());
        self.accel(sys, x.t, &q, &v, 0)?;
        self.have_k1 = true;
        let mut y = q.clone();
        y.extend_from_slice(&v);
        let mut dy = v.clone();
        dy.extend_from_slice(&self.k[0]);
        self.h = if self.settings.initial_step > 0.0 {
            self.settings.initial_step
        } else {
            super::step_control::initial_step_size(
                x.t,
                &y,
                &dy,
                self.settings.rtol,
                self.settings.atol,
                2,
                self.settings.max_step,
            )
        };
        Ok(())
    }

    fn step(&mut self, sys: &mut S, t_limit: f64) -> Result<f64, IntegrateError> {
        let n = self.n_q;
        let t = self.x.t;
        let h_min = 1e-12 * t.abs().max(1.0);
        if !self.have_k1 {
            let (q, v) = (self.x.q.clone(), self.x.v.clone());
            self.accel(sys, t, &q, &v, 0)?;
            self.have_k1 = true;
        }
        let mut rejections = 0u32;
        loop {
            let mut h = self.h;
            if self.settings.max_step > 0.0 && self.settings.max_step.is_finite() {
                h = h.min(self.settings.max_step);
            }
            let clipped = t + h >= t_limit - 1e-14 * t_limit.abs().max(1.0);
            if clipped {
                h = t_limit - t;
            }
            if h < h_min && !clipped {
                return Err(IntegrateError::StepTooSmall {
                    t,
                    h,
                    h_min,
                    reason: "error test".into(),
                });
            }
            // Stages (Bogacki–Shampine): c = 0, 1/2, 3/4, 1.
            let stage = |me: &mut Self, coef: &[(usize, f64)]| {
                for i in 0..n {
                    let mut dq = 0.0;
                    let mut dv = 0.0;
                    for &(j, a) in coef {
                        dq += a * me.kq[j][i];
                        dv += a * me.k[j][i];
                    }
                    me.yq[i] = me.x.q[i] + h * dq;
                    me.yv[i] = me.x.v[i] + h * dv;
                }
            };
            stage(self, &[(0, 0.5)]);
            let (yq, yv) = (self.yq.clone(), self.yv.clone());
            self.accel(sys, t + 0.5 * h, &yq, &yv, 1)?;
            stage(self, &[(1, 0.75)]);
            let (yq, yv) = (self.yq.clone(), self.yv.clone());
            self.accel(sys, t + 0.75 * h, &yq, &yv, 2)?;
            stage(self, &[(0, 2.0 / 9.0), (1, 1.0 / 3.0), (2, 4.0 / 9.0)]);
            let (yq, yv) = (self.yq.clone(), self.yv.clone());
            let t_new = if clipped { t_limit } else { t + h };
            self.accel(sys, t_new, &yq, &yv, 3)?;
            // Error: y3 − y2 with b* = (7/24, 1/4, 1/3, 1/8).
            let e = [
                2.0 / 9.0 - 7.0 / 24.0,
                1.0 / 3.0 - 0.25,
                4.0 / 9.0 - 1.0 / 3.0,
                -0.125,
            ];
            for i in 0..n {
                let (mut eq, mut ev) = (0.0, 0.0);
                for (j, ej) in e.iter().enumerate() {
                    eq += ej * self.kq[j][i];
                    ev += ej * self.k[j][i];
                }
                self.err[i] = h * eq;
                self.err[n + i] = h * ev;
                self.old[i] = self.x.q[i];
                self.old[n + i] = self.x.v[i];
                self.new[i] = self.yq[i];
                self.new[n + i] = self.yv[i];
            }
            let err = weighted_rms_norm(
                &self.err,
                &self.old,
                &self.new,
                self.settings.rtol,
                self.settings.atol,
            );
            if !err.is_finite() {
                return Err(IntegrateError::NonFinite {
                    t,
                    what: "error estimate".into(),
                });
            }
            if err <= 1.0 {
                self.stats.steps += 1;
                self.x.t = t_new;
                self.x.q.copy_from_slice(&self.yq);
                self.x.v.copy_from_slice(&self.yv);
                // FSAL: the last stage is the next step's first.
                let (k3, kq3) = (self.k[3].clone(), self.kq[3].clone());
                self.k[0].copy_from_slice(&k3);
                self.kq[0].copy_from_slice(&kq3);
                let fac = self.ctrl.factor(err, 2, true);
                self.ctrl.accept(err);
                if !clipped || h >= 0.5 * self.h {
                    self.h = h * fac;
                }
                sys.accept_step(t_new, &self.x.q, &self.x.v, None);
                return Ok(t_new);
            }
            self.stats.rejected_steps += 1;
            self.stats.error_test_failures += 1;
            rejections += 1;
            self.h = h * self.ctrl.factor(err, 2, false);
            if rejections > 50 {
                return Err(IntegrateError::StepTooSmall {
                    t,
                    h: self.h,
                    h_min,
                    reason: "50 consecutive rejections".into(),
                });
            }
        }
    }

    fn state(&self) -> &MechState {
        &self.x
    }
    fn next_step_size(&self) -> f64 {
        self.h
    }
    fn stats(&self) -> &Stats {
        &self.stats
    }
    fn method(&self) -> Method {
        Method::Bdf
    }
    fn set_settings(&mut self, settings: Settings) {
        self.settings = settings;
    }
}
