//! Which outputs depend directly (at the same instant, without integrating) on which inputs:
//! the `dependencies` of `ModelStructure/Outputs`.
//!
//! Inputs enter a model in two ways (the only places `Motion::Input` can appear):
//! - kinematically, driving a driver or a moving frame: positions, velocities and everything
//!   computed from them change at once with the input, so every output depends on it;
//! - as an actuator force/torque of a force element: only acceleration-level quantities see it
//!   at the same instant (accelerations, joint and driver reactions, and that element's own
//!   force). Positions, velocities, lengths, angles and energy are states or functions of the
//!   state, so they do not depend on it directly.
//!
//! Anything not provably independent by these rules is reported as dependent.

use crate::mbs::spec::{ForceKind, ModelSpec, Motion, OutputQuantity};
use std::collections::BTreeSet;

fn input_of(m: &Motion) -> Option<usize> {
    match m {
        Motion::Input(i) => Some(*i),
        _ => None,
    }
}

/// For each output (in `spec.outputs` order), the sorted input indices it depends on.
pub fn output_dependencies(spec: &ModelSpec) -> Vec<Vec<usize>> {
    let mut kinematic = BTreeSet::new();
    for d in &spec.drivers {
        kinematic.extend(input_of(&d.motion));
    }
    for f in &spec.frames {
        kinematic.extend(f.position.iter().filter_map(input_of));
    }
    // Actuator inputs of each force element.
    let actuator: Vec<BTreeSet<usize>> = spec
        .forces
        .iter()
        .map(|f| {
            let a = match &f.kind {
                ForceKind::SpringDamper { actuator, .. }
                | ForceKind::RotationalSpringDamper { actuator, .. } => actuator.as_ref(),
                _ => None,
            };
            a.and_then(input_of).into_iter().collect()
        })
        .collect();
    let all_forces: BTreeSet<usize> = actuator.iter().flatten().copied().collect();
    let n_inputs = spec.inputs.len();
    spec.outputs
        .iter()
        .map(|o| {
            let mut set = kinematic.clone();
            match &o.quantity {
                OutputQuantity::Position { .. }
                | OutputQuantity::Velocity { .. }
                | OutputQuantity::Angle { .. }
                | OutputQuantity::AngularVelocity { .. }
                | OutputQuantity::JointCoordinate { .. }
                | OutputQuantity::JointRate { .. }
                | OutputQuantity::ElementLength { .. }
                | OutputQuantity::Energy => {}
                OutputQuantity::ElementForce { force } => match actuator.get(*force) {
                    Some(a) => set.extend(a.iter().copied()),
                    // Dangling index (the loader should prevent it): be conservative.
                    None => set.extend(0..n_inputs),
                },
                OutputQuantity::Acceleration { .. }
                | OutputQuantity::JointForce { .. }
                | OutputQuantity::JointTorque { .. }
                | OutputQuantity::DriverForce { .. } => set.extend(all_forces.iter().copied()),
            }
            set.into_iter().filter(|i| *i < n_inputs).collect()
        })
        .collect()
}
