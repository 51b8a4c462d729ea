//! [`AnyIntegrator`]: one type for every integration method, chosen at run time by the FMU
//! parameter `solver.integrator`. Cloneable and serializable as a whole (FMU state).

use super::bdf::Bdf;
use super::explicit::Dopri5;
use super::half_implicit::HalfImplicit;
use super::local_linearization::LocalLinearization;
use super::newmark::Newmark;
use super::rosenbrock::RosenbrockNystrom;
use super::sdirk::Sdirk;
use super::{
    InputKink, IntegrateError, Integrator, MechState, Method, MultibodySystem, Settings, Stats,
};
use serde::{Deserialize, Serialize};

// One per FMU instance, built once and never moved on the hot path: the size difference of
// the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AnyIntegrator {
    /// `bdf` (the default).
    Bdf(Bdf),
    /// `rosenbrock_nystrom` and `w_method`.
    RosenbrockNystrom(RosenbrockNystrom),
    Sdirk(Sdirk),
    /// `trapezoidal`, `newmark`, `hht`, `generalized_alpha`.
    Newmark(Newmark),
    LocalLinearization(LocalLinearization),
    HalfImplicit(HalfImplicit),
    Dopri5(Dopri5),
}

impl AnyIntegrator {
    /// The integrator for `settings.method`, for a system with `n_q` coordinates and `n_c`
    /// constraints.
    pub fn new(
        settings: Settings,
        n_q: usize,
        n_c: usize,
    ) -> Result<AnyIntegrator, IntegrateError> {
        Ok(match settings.method {
            Method::Bdf => AnyIntegrator::Bdf(Bdf::new(settings, n_q, n_c)),
            Method::RosenbrockNystrom | Method::WMethod => {
                AnyIntegrator::RosenbrockNystrom(RosenbrockNystrom::new(settings, n_q, n_c))
            }
            Method::Sdirk => AnyIntegrator::Sdirk(Sdirk::new(settings, n_q, n_c)),
            Method::Trapezoidal | Method::Newmark | Method::Hht | Method::GeneralizedAlpha => {
                AnyIntegrator::Newmark(Newmark::new(settings, n_q, n_c))
            }
            Method::LocalLinearization => {
                AnyIntegrator::LocalLinearization(LocalLinearization::new(settings, n_q, n_c))
            }
            Method::HalfImplicit => {
                AnyIntegrator::HalfImplicit(HalfImplicit::new(settings, n_q, n_c))
            }
            Method::Dopri5 => AnyIntegrator::Dopri5(Dopri5::new(settings, n_q, n_c)),
        })
    }

    /// Whether [`AnyIntegrator::new`] can build `method`.
    pub fn is_available(_method: Method) -> bool {
        true
    }
}

/// Forward a call to the method inside (one arm per variant).
macro_rules! dispatch {
    ($self:expr, $i:ident => $e:expr) => {
        match $self {
            AnyIntegrator::Bdf($i) => $e,
            AnyIntegrator::RosenbrockNystrom($i) => $e,
            AnyIntegrator::Sdirk($i) => $e,
            AnyIntegrator::Newmark($i) => $e,
            AnyIntegrator::LocalLinearization($i) => $e,
            AnyIntegrator::HalfImplicit($i) => $e,
            AnyIntegrator::Dopri5($i) => $e,
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
    fn rhs_changed(&mut self) {
        dispatch!(self, i => Integrator::<S>::rhs_changed(i))
    }
    fn inputs_changed(&mut self, sys: &mut S, kink: InputKink) -> Result<(), IntegrateError> {
        dispatch!(self, i => Integrator::<S>::inputs_changed(i, sys, kink))
    }
    fn restart(&mut self, sys: &mut S, x: &MechState) -> Result<bool, IntegrateError> {
        dispatch!(self, i => Integrator::<S>::restart(i, sys, x))
    }
    fn restart_state(&self, sys: &mut S, x: &MechState) -> MechState {
        dispatch!(self, i => Integrator::<S>::restart_state(i, sys, x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_available_method_reports_itself() {
        for m in Method::ALL {
            let s = Settings {
                method: m,
                ..Default::default()
            };
            match AnyIntegrator::new(s, 2, 0) {
                Ok(i) => {
                    assert!(AnyIntegrator::is_available(m));
                    let got = <AnyIntegrator as Integrator<
                        crate::integrate::test_systems::Oscillator,
                    >>::method(&i);
                    assert_eq!(got, m, "{m:?}");
                }
                Err(_) => assert!(!AnyIntegrator::is_available(m)),
            }
        }
    }
}
