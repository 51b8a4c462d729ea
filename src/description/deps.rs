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
use std::collections::{BTreeMap, BTreeSet};

fn input_of(m: &Motion) -> Option<usize> {
    m.input().map(|(i, _)| i)
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

/// Through which of the input's value `u`, rate `u̇` and second rate `ü` (at the current
/// time) a dependency runs: bit masks.
pub const VALUE: u8 = 1;
pub const RATE: u8 = 2;
pub const ACCEL: u8 = 4;

/// Per input: the channels through which it reaches outputs, as a mask.
type Deps = BTreeMap<usize, u8>;

fn add(d: &mut Deps, inputs: &BTreeSet<usize>, mask: u8) {
    for &i in inputs {
        *d.entry(i).or_insert(0) |= mask;
    }
}

fn merge(d: &mut Deps, other: &Deps) {
    for (&i, &m) in other {
        *d.entry(i).or_insert(0) |= m;
    }
}

/// For each output (in `spec.outputs` order), the sorted input indices it depends on directly:
/// through the channels that setting the input changes at the same instant under its
/// reconstruction mode.
pub fn output_dependencies(spec: &ModelSpec) -> Vec<Vec<usize>> {
    use crate::mbs::spec::Reconstruction;
    // What setting a sample changes at that instant under each reconstruction mode
    // (docs/fmi-runtime.md): hold the value; linear the slope (the value continues the last
    // segment); smooth only the second rate (value and slope continue).
    output_dependencies_with(spec, &|i| match spec.inputs[i].reconstruction {
        Reconstruction::Hold => VALUE,
        Reconstruction::Linear => RATE,
        Reconstruction::Smooth => ACCEL,
    })
}

/// As [`output_dependencies`], counting for input `i` only the channels `changed(i)` (a mask
/// of [`VALUE`], [`RATE`], [`ACCEL`]): those that setting the input changes at the same
/// instant under its reconstruction (e.g. a hold changes the value; a reconstruction that
/// keeps value and rate continuous at the sample only the second rate).
pub fn output_dependencies_with(
    spec: &ModelSpec,
    changed: &dyn Fn(usize) -> u8,
) -> Vec<Vec<usize>> {
    let group = joint_groups(spec);
    let group_of = |r: &BodyRef| match r {
        BodyRef::Body(b) => group.get(*b).copied(),
        _ => None,
    };
    // Per group: the inputs acting on it at the same instant, by channel.
    let mut acting: Vec<Deps> = vec![Deps::new(); spec.bodies.len()];
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
    let mut act_on = |refs: &[BodyRef], inputs: &BTreeSet<usize>, mask: u8| {
        for r in refs {
            if let Some(g) = group_of(r) {
                add(&mut acting[g], inputs, mask);
            }
        }
    };
    // A driver's input enters the accelerations through `ü` (γ) only.
    for d in &spec.drivers {
        let inputs: BTreeSet<usize> = input_of(&d.motion).into_iter().collect();
        match d.target {
            DriverTarget::JointCoordinate(j) => {
                if let Some(js) = spec.joints.get(j) {
                    act_on(&[js.body1, js.body2], &inputs, ACCEL);
                }
            }
            DriverTarget::PointComponent { body, .. } => {
                act_on(&[BodyRef::Body(body)], &inputs, ACCEL)
            }
        }
    }
    // Joints to a moving frame carry its motion into the group (its position enters `Φ_q`,
    // its rates `γ`).
    for j in &spec.joints {
        let mut inputs = of_ref(&j.body1);
        inputs.extend(of_ref(&j.body2));
        act_on(&[j.body1, j.body2], &inputs, VALUE | RATE | ACCEL);
    }
    // Per force element: inputs that change its force (actuator value; attached frames'
    // position and rate) and its length (attached frames' position).
    let mut element_force: Vec<Deps> = Vec::with_capacity(spec.forces.len());
    let mut element_length: Vec<Deps> = Vec::with_capacity(spec.forces.len());
    let mut energy = Deps::new();
    for f in &spec.forces {
        let geometric: BTreeSet<usize> = force_refs(&f.kind).iter().flat_map(of_ref).collect();
        let mut force = Deps::new();
        add(&mut force, &geometric, VALUE | RATE);
        if let ForceKind::SpringDamper {
            actuator: Some(a), ..
        }
        | ForceKind::RotationalSpringDamper {
            actuator: Some(a), ..
        } = &f.kind
        {
            add(&mut force, &input_of(a).into_iter().collect(), VALUE);
        }
        for r in force_refs(&f.kind) {
            if let Some(g) = group_of(&r) {
                merge(&mut acting[g], &force);
            }
        }
        if !matches!(f.kind, ForceKind::PrismaticFriction { .. }) {
            add(&mut energy, &geometric, VALUE);
        }
        element_force.push(force);
        let mut length = Deps::new();
        add(&mut length, &geometric, VALUE);
        element_length.push(length);
    }
    let joint_travel = |j: usize, mask: u8| -> Deps {
        let mut d = Deps::new();
        match spec.joints.get(j) {
            Some(js) if js.kind == JointKind::Prismatic => {
                add(&mut d, &of_ref(&js.body1), mask);
                add(&mut d, &of_ref(&js.body2), mask);
            }
            Some(_) => {}
            // Dangling index (the loader prevents it): be conservative.
            None => add(&mut d, &(0..n_inputs).collect(), VALUE | RATE | ACCEL),
        }
        d
    };
    let all = || -> Deps {
        let mut d = Deps::new();
        add(&mut d, &(0..n_inputs).collect(), VALUE | RATE | ACCEL);
        d
    };
    let frame_own = |r: &BodyRef, mask: u8| -> Deps {
        let mut d = Deps::new();
        add(&mut d, &of_ref(r), mask);
        d
    };
    let on = |refs: &[BodyRef]| -> Deps {
        let mut d = Deps::new();
        for r in refs {
            match group_of(r) {
                Some(g) => merge(&mut d, &acting[g]),
                // A frame's own acceleration is its prescribed one.
                None => add(&mut d, &of_ref(r), ACCEL),
            }
        }
        d
    };
    spec.outputs
        .iter()
        .map(|o| {
            let deps: Deps = match &o.quantity {
                OutputQuantity::Position { body, .. } => frame_own(body, VALUE),
                OutputQuantity::Velocity { body, .. } => frame_own(body, RATE),
                OutputQuantity::Angle { .. }
                | OutputQuantity::AngularVelocity { .. }
                | OutputQuantity::WheelAngle { .. } => Deps::new(),
                OutputQuantity::JointCoordinate { joint } => joint_travel(*joint, VALUE),
                OutputQuantity::JointRate { joint } => joint_travel(*joint, RATE),
                OutputQuantity::ElementLength { force } => {
                    element_length.get(*force).cloned().unwrap_or_else(all)
                }
                OutputQuantity::ElementForce { force } => {
                    element_force.get(*force).cloned().unwrap_or_else(all)
                }
                OutputQuantity::Energy => energy.clone(),
                OutputQuantity::Relative {
                    order,
                    body1,
                    body2,
                    ..
                } => match order {
                    0 | 1 => {
                        let mask = if *order == 0 { VALUE } else { RATE };
                        let mut d = frame_own(body1, mask);
                        merge(&mut d, &frame_own(body2, mask));
                        d
                    }
                    _ => on(&[*body1, *body2]),
                },
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
            deps.into_iter()
                .filter(|&(i, mask)| i < n_inputs && mask & changed(i) != 0)
                .map(|(i, _)| i)
                .collect()
        })
        .collect()
}
