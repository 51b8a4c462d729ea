//! Which outputs depend directly (at the same instant, without integrating) on which inputs:
//! the `dependencies` of `ModelStructure/Outputs` (FMI 2 and 3).
//!
//! The state `(q, v)` is held when an input changes; an output depends directly on an input
//! only if its value at that state can change with it. Inputs enter a model in three ways (the
//! only places `Motion::Input` can appear):
//! - **through a driver**: the driven coordinate is part of the state, so positions,
//!   velocities, angles, lengths, element forces and energy do not change at once; the
//!   driver's constraint `ξ(q) = u(t)` enters the accelerations through `u̇, ü` (the input
//!   reconstruction makes them functions of the current value), so accelerations, joint and
//!   driver reactions depend on it;
//! - **moving a frame** (a ground point with prescribed position): the frame's own position,
//!   velocity and acceleration, the lengths and forces of elements attached to it, the travel
//!   of prismatic joints attached to it (a frame does not rotate, so revolute angles do not
//!   change), the energy if an element with potential is attached, and accelerations and
//!   reactions;
//! - **as an actuator force** of a force element: that element's force, accelerations and
//!   reactions.
//!
//! Accelerations and reactions couple at the same instant only through joints (constraints):
//! bodies joined by joints form a *group* (ground and moving frames do not join groups). An
//! input acts on the groups it touches (the driven joint's or body's group, the groups
//! attached to its frame by joints or force elements, the groups of its actuator's element);
//! an acceleration or reaction output depends on the inputs acting on its group. The rules are
//! structural: a zero that comes from geometry (a force perpendicular to the reported reaction
//! component) is still declared. The table is checked against the FMU's directional
//! derivatives on every gallery model (`tests/dependencies.rs`).

use crate::mbs::spec::{
    BodyRef, ContactGeometry, DriverTarget, ForceKind, JointKind, ModelSpec, Motion, OutputQuantity,
};
use std::collections::BTreeSet;

fn input_of(m: &Motion) -> Option<usize> {
    match m {
        Motion::Input(i) => Some(*i),
        _ => None,
    }
}

/// The references an element attaches to.
fn force_refs(kind: &ForceKind) -> Vec<BodyRef> {
    match kind {
        ForceKind::SpringDamper { body1, body2, .. }
        | ForceKind::RotationalSpringDamper { body1, body2, .. }
        | ForceKind::Bushing { body1, body2, .. } => vec![*body1, *body2],
        ForceKind::Contact { geometry, .. } => match geometry {
            ContactGeometry::SpherePlane {
                sphere_body,
                plane_body,
                ..
            } => vec![*sphere_body, *plane_body],
            ContactGeometry::SphereSphere { body1, body2, .. } => vec![*body1, *body2],
        },
        ForceKind::PrismaticFriction { .. } => Vec::new(),
    }
}

/// Joint groups: per body, a group id (bodies joined by joints share one).
fn joint_groups(spec: &ModelSpec) -> Vec<usize> {
    let mut parent: Vec<usize> = (0..spec.bodies.len()).collect();
    fn root(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    for j in &spec.joints {
        if let (BodyRef::Body(a), BodyRef::Body(b)) = (j.body1, j.body2) {
            if a < parent.len() && b < parent.len() {
                let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
                parent[ra] = rb;
            }
        }
    }
    (0..parent.len()).map(|i| root(&mut parent, i)).collect()
}

/// For each output (in `spec.outputs` order), the sorted input indices it depends on.
pub fn output_dependencies(spec: &ModelSpec) -> Vec<Vec<usize>> {
    let group = joint_groups(spec);
    let group_of = |r: &BodyRef| match r {
        BodyRef::Body(b) => group.get(*b).copied(),
        _ => None,
    };
    // Per group: the inputs acting on it at the same instant.
    let mut acting: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); spec.bodies.len()];
    let n_inputs = spec.inputs.len();
    // Inputs of each moving frame.
    let frame_inputs: Vec<BTreeSet<usize>> = spec
        .frames
        .iter()
        .map(|f| f.position.iter().filter_map(input_of).collect())
        .collect();
    let of_ref = |r: &BodyRef| -> BTreeSet<usize> {
        match r {
            BodyRef::Frame(f) => frame_inputs.get(*f).cloned().unwrap_or_default(),
            _ => BTreeSet::new(),
        }
    };
    let mut act_on = |refs: &[BodyRef], inputs: &BTreeSet<usize>| {
        for r in refs {
            if let Some(g) = group_of(r) {
                acting[g].extend(inputs.iter().copied());
            }
        }
    };
    for d in &spec.drivers {
        let inputs: BTreeSet<usize> = input_of(&d.motion).into_iter().collect();
        match d.target {
            DriverTarget::JointCoordinate(j) => {
                if let Some(js) = spec.joints.get(j) {
                    act_on(&[js.body1, js.body2], &inputs);
                }
            }
            DriverTarget::PointComponent { body, .. } => act_on(&[BodyRef::Body(body)], &inputs),
        }
    }
    // Joints to a moving frame carry its motion into the group.
    for j in &spec.joints {
        let mut inputs = of_ref(&j.body1);
        inputs.extend(of_ref(&j.body2));
        act_on(&[j.body1, j.body2], &inputs);
    }
    // Per force element: inputs that change its force (actuator, attached frames) and its
    // length (attached frames).
    let mut element_force = Vec::with_capacity(spec.forces.len());
    let mut element_length = Vec::with_capacity(spec.forces.len());
    let mut energy = BTreeSet::new();
    for f in &spec.forces {
        let geometric: BTreeSet<usize> = force_refs(&f.kind).iter().flat_map(of_ref).collect();
        let mut force = geometric.clone();
        if let ForceKind::SpringDamper {
            actuator: Some(a), ..
        }
        | ForceKind::RotationalSpringDamper {
            actuator: Some(a), ..
        } = &f.kind
        {
            force.extend(input_of(a));
        }
        act_on(&force_refs(&f.kind), &force);
        if !matches!(f.kind, ForceKind::PrismaticFriction { .. }) {
            energy.extend(geometric.iter().copied());
        }
        element_force.push(force);
        element_length.push(geometric);
    }
    let joint_travel = |j: usize| -> BTreeSet<usize> {
        match spec.joints.get(j) {
            Some(js) if js.kind == JointKind::Prismatic => {
                let mut s = of_ref(&js.body1);
                s.extend(of_ref(&js.body2));
                s
            }
            Some(_) => BTreeSet::new(),
            // Dangling index (the loader prevents it): be conservative.
            None => (0..n_inputs).collect(),
        }
    };
    let all = || -> BTreeSet<usize> { (0..n_inputs).collect() };
    let on = |refs: &[BodyRef]| -> BTreeSet<usize> {
        let mut s = BTreeSet::new();
        for r in refs {
            match group_of(r) {
                Some(g) => s.extend(acting[g].iter().copied()),
                // A frame's own acceleration is its prescribed one.
                None => s.extend(of_ref(r)),
            }
        }
        s
    };
    spec.outputs
        .iter()
        .map(|o| {
            let set: BTreeSet<usize> =
                match &o.quantity {
                    OutputQuantity::Position { body, .. }
                    | OutputQuantity::Velocity { body, .. } => of_ref(body),
                    OutputQuantity::Angle { .. } | OutputQuantity::AngularVelocity { .. } => {
                        BTreeSet::new()
                    }
                    OutputQuantity::JointCoordinate { joint }
                    | OutputQuantity::JointRate { joint } => joint_travel(*joint),
                    OutputQuantity::ElementLength { force } => {
                        element_length.get(*force).cloned().unwrap_or_else(all)
                    }
                    OutputQuantity::ElementForce { force } => {
                        element_force.get(*force).cloned().unwrap_or_else(all)
                    }
                    OutputQuantity::Energy => energy.clone(),
                    OutputQuantity::Acceleration { body, .. } => on(&[*body]),
                    OutputQuantity::JointForce { joint, .. }
                    | OutputQuantity::JointTorque { joint, .. } => match spec.joints.get(*joint) {
                        Some(js) => on(&[js.body1, js.body2]),
                        None => all(),
                    },
                    OutputQuantity::DriverForce { driver } => match spec.drivers.get(*driver) {
                        Some(d) => match d.target {
                            DriverTarget::JointCoordinate(j) => match spec.joints.get(j) {
                                Some(js) => on(&[js.body1, js.body2]),
                                None => all(),
                            },
                            DriverTarget::PointComponent { body, .. } => on(&[BodyRef::Body(body)]),
                        },
                        None => all(),
                    },
                };
            set.into_iter().filter(|i| *i < n_inputs).collect()
        })
        .collect()
}
