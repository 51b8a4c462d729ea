//! mbsfmu: multibody models as FMI 2.0 / FMI 3.0 Co-Simulation FMUs.
//!
//! Layers (each knows only the ones above it in this list):
//! - [`show`]: numbers in messages.
//! - [`dense`]: small dense kernels (`L D Lᵀ`) shared by the engine and the integrators.
//! - [`mbs`]: the multibody problem (model file, kinematics, forces, constraints).
//! - [`integrate`]: time integration; sees the problem only through the traits in
//!   [`integrate::system`].
//! - [`cosim`]: FMI-agnostic co-simulation (`advance_to(t)`, inputs, outputs, state).
//! - [`description`]: the variable table and modelDescription types, shared by the runtime and
//!   the packager.
//! - [`fmi`]: the C ABI (the only unsafe code).

pub mod cosim;
pub mod dense;
pub mod description;
pub mod fmi;
pub mod integrate;
pub mod mbs;
pub mod show;
