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
//!
//! **Joint formulation.** A driver on a spanning-tree joint is eliminated and a body hanging
//! from a moving frame is placed relative to it, so there an input's value and rate also move
//! a subtree at a fixed state ([`moved_subtrees`]): positions, angles and their rates of the
//! subtree's bodies, joint coordinates and element lengths and forces between the subtree and
//! the rest, the energy, and (through the group) accelerations and reactions. Under the
//! default smooth reconstruction a sample changes only `ü`, so the declaration is the same in
//! both formulations; under `hold` and `linear` the joint formulation's is larger (a few
//! relative quantities to a moving frame stay declared although they are zero there).

use crate::mbs::joint::tree::{spanning_tree, Parent};
use crate::mbs::spec::{
    BodyRef, ContactGeometry, DriverTarget, ForceKind, Formulation, JointKind, ModelSpec, Motion,
    OutputQuantity, ReactionAxes,
};
use std::collections::{BTreeMap, BTreeSet};

fn input_of(m: &Motion) -> Option<usize> {
    m.input().map(|(i, _)| i)
}

/// The references an element attaches to (a joint element: the joint's two sides).
fn force_refs(spec: &ModelSpec, kind: &ForceKind) -> Vec<BodyRef> {
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
        ForceKind::PrismaticFriction { joint, .. }
        | ForceKind::RevoluteFriction { joint, .. }
        | ForceKind::JointStop { joint, .. } => spec
            .joints
            .get(*joint)
            .map_or(Vec::new(), |j| vec![j.body1, j.body2]),
        ForceKind::Tire(ts) => vec![BodyRef::Body(ts.wheel)],
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

/// A subtree that an input moves (see [`moved_subtrees`]).
struct Moved {
    input: usize,
    bodies: BTreeSet<usize>,
    /// The moving frame it hangs from (it moves with the subtree and, a frame being
    /// translation only, nothing rotates), or `None` below a driven joint.
    frame: Option<usize>,
}

impl Moved {
    fn contains(&self, r: &BodyRef) -> bool {
        match r {
            BodyRef::Body(b) => self.bodies.contains(b),
            BodyRef::Frame(f) => self.frame == Some(*f),
            BodyRef::Ground => false,
        }
    }
}

/// What moves with an input at a fixed state in the joint formulation: pairs of an input and
/// the bodies of a spanning-tree subtree. In joint coordinates a driven tree joint's
/// coordinate is not part of the state (the driver is eliminated), and a body hanging from a
/// moving frame is placed relative to the frame: the input's value moves the subtree, its
/// rate the subtree's velocities, as a moving frame moves an attached element in either
/// formulation. Subtrees: below each tree joint a driver fed by an input drives, and below
/// each tree joint hanging from a frame whose position an input sets. Empty in absolute
/// coordinates.
fn moved_subtrees(spec: &ModelSpec) -> Vec<Moved> {
    if spec.formulation != Formulation::Joint {
        return Vec::new();
    }
    let tree = spanning_tree(spec);
    let nodes = &tree.nodes;
    // Bodies of the subtree rooted at node `k` (parents come before their children).
    let subtree = |k: usize| -> BTreeSet<usize> {
        let mut inside = vec![false; nodes.len()];
        let mut bodies = BTreeSet::new();
        for m in k..nodes.len() {
            inside[m] = m == k || matches!(nodes[m].parent, Parent::Node(p) if inside[p]);
            if let (true, Some(b)) = (inside[m], nodes[m].body) {
                bodies.insert(b);
            }
        }
        bodies
    };
    let mut out = Vec::new();
    for d in &spec.drivers {
        let (Some(i), DriverTarget::JointCoordinate(j)) = (input_of(&d.motion), &d.target) else {
            continue;
        };
        if let Some(k) = nodes.iter().position(|n| n.joint == Some(*j)) {
            out.push(Moved {
                input: i,
                bodies: subtree(k),
                frame: None,
            });
        }
    }
    for (k, n) in nodes.iter().enumerate() {
        if let Parent::Frame(f) = n.parent {
            let inputs = spec
                .frames
                .get(f)
                .map(|fr| fr.position.iter().filter_map(input_of));
            for i in inputs.into_iter().flatten() {
                out.push(Moved {
                    input: i,
                    bodies: subtree(k),
                    frame: Some(f),
                });
            }
        }
    }
    out
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
    // Joint formulation: an input's value and rate move its subtrees at a fixed state
    // (`moved_subtrees`): velocity forces, gyroscopic terms and the constraint rows of the
    // group change with them.
    let eliminated = moved_subtrees(spec);
    for m in &eliminated {
        let refs: Vec<BodyRef> = m.bodies.iter().map(|&b| BodyRef::Body(b)).collect();
        act_on(&refs, &BTreeSet::from([m.input]), VALUE | RATE);
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
        let geometric: BTreeSet<usize> =
            force_refs(spec, &f.kind).iter().flat_map(of_ref).collect();
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
        // A tire's road height: its value and rate enter the vertical force.
        if let ForceKind::Tire(ts) = &f.kind {
            add(
                &mut force,
                &input_of(&ts.road_height).into_iter().collect(),
                VALUE | RATE,
            );
            add(
                &mut energy,
                &input_of(&ts.road_height).into_iter().collect(),
                VALUE,
            );
        }
        for r in force_refs(spec, &f.kind) {
            if let Some(g) = group_of(&r) {
                merge(&mut acting[g], &force);
            }
        }
        // Friction without stiction stores no energy.
        if !matches!(
            f.kind,
            ForceKind::PrismaticFriction { stiction: None, .. }
                | ForceKind::RevoluteFriction { stiction: None, .. }
        ) {
            add(&mut energy, &geometric, VALUE);
        }
        element_force.push(force);
        let mut length = Deps::new();
        add(&mut length, &geometric, VALUE);
        if let ForceKind::Tire(ts) = &f.kind {
            add(
                &mut length,
                &input_of(&ts.road_height).into_iter().collect(),
                VALUE,
            );
        }
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
    // Joint formulation, what moves with a subtree (`moved_subtrees`). A quantity of one body (absolute
    // position, orientation and their rates) when the body is in the subtree; a relative one
    // between two references (joint coordinate, element length and force) when exactly one of
    // them is (the subtree moves rigidly, which leaves the relative pose and its rate alone).
    let moved_body = |b: usize, rotation: bool, mask: u8| -> Deps {
        let mut d = Deps::new();
        for m in &eliminated {
            if m.bodies.contains(&b) && !(rotation && m.frame.is_some()) {
                add(&mut d, &BTreeSet::from([m.input]), mask);
            }
        }
        d
    };
    let moved_between = |refs: &[BodyRef], mask: u8| -> Deps {
        let mut d = Deps::new();
        for m in &eliminated {
            if refs.iter().filter(|r| m.contains(r)).count() % 2 == 1 {
                add(&mut d, &BTreeSet::from([m.input]), mask);
            }
        }
        d
    };
    let joint_ends = |j: usize| -> Vec<BodyRef> {
        spec.joints
            .get(j)
            .map_or(Vec::new(), |js| vec![js.body1, js.body2])
    };
    let force_ends = |f: usize| -> Vec<BodyRef> {
        spec.forces
            .get(f)
            .map_or(Vec::new(), |fs| force_refs(spec, &fs.kind))
    };
    spec.outputs
        .iter()
        .map(|o| {
            let mut deps: Deps = match &o.quantity {
                OutputQuantity::Position { body, .. } => frame_own(body, VALUE),
                OutputQuantity::Velocity { body, .. } => frame_own(body, RATE),
                OutputQuantity::Angle { .. }
                | OutputQuantity::AngularVelocity { .. }
                | OutputQuantity::WheelAngle { .. } => Deps::new(),
                OutputQuantity::JointCoordinate { joint } => joint_travel(*joint, VALUE),
                OutputQuantity::JointRate { joint } => joint_travel(*joint, RATE),
                OutputQuantity::ElementLength { force }
                | OutputQuantity::ElementComponent {
                    force,
                    length: true,
                    ..
                } => element_length.get(*force).cloned().unwrap_or_else(all),
                OutputQuantity::ElementForce { force }
                | OutputQuantity::ElementComponent { force, .. }
                | OutputQuantity::Tire { force, .. }
                | OutputQuantity::ContactFriction { force, .. } => {
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
            if !eliminated.is_empty() {
                let extra = match &o.quantity {
                    OutputQuantity::Position {
                        body: BodyRef::Body(b),
                        ..
                    } => moved_body(*b, false, VALUE),
                    OutputQuantity::Angle { body, .. } => moved_body(*body, true, VALUE),
                    OutputQuantity::Velocity {
                        body: BodyRef::Body(b),
                        ..
                    } => moved_body(*b, false, VALUE | RATE),
                    OutputQuantity::AngularVelocity { body, .. } => {
                        moved_body(*body, true, VALUE | RATE)
                    }
                    OutputQuantity::JointCoordinate { joint } => {
                        moved_between(&joint_ends(*joint), VALUE)
                    }
                    OutputQuantity::JointRate { joint } => {
                        moved_between(&joint_ends(*joint), VALUE | RATE)
                    }
                    OutputQuantity::ElementLength { force }
                    | OutputQuantity::ElementComponent {
                        force,
                        length: true,
                        ..
                    } => moved_between(&force_ends(*force), VALUE),
                    OutputQuantity::ElementForce { force }
                    | OutputQuantity::ElementComponent { force, .. }
                    | OutputQuantity::Tire { force, .. }
                    | OutputQuantity::ContactFriction { force, .. } => {
                        moved_between(&force_ends(*force), VALUE | RATE)
                    }
                    OutputQuantity::WheelAngle { body, .. } => moved_body(*body, true, VALUE),
                    // A reaction resolved along another body's axes turns with that body.
                    OutputQuantity::JointForce {
                        axes: ReactionAxes::Body(BodyRef::Body(b)),
                        ..
                    }
                    | OutputQuantity::JointTorque {
                        axes: ReactionAxes::Body(BodyRef::Body(b)),
                        ..
                    } => moved_body(*b, true, VALUE),
                    // Resolved along a third reference's axes: any of the three moving counts.
                    OutputQuantity::Relative {
                        order: order @ (0 | 1),
                        body1,
                        body2,
                        frame,
                        ..
                    } => {
                        let mask = if *order == 0 { VALUE } else { VALUE | RATE };
                        let mut d = Deps::new();
                        for m in &eliminated {
                            if [body1, body2, frame].iter().any(|r| m.contains(r)) {
                                add(&mut d, &BTreeSet::from([m.input]), mask);
                            }
                        }
                        d
                    }
                    // Kinetic and potential energy of the subtree.
                    OutputQuantity::Energy => {
                        let mut d = Deps::new();
                        for m in &eliminated {
                            add(&mut d, &BTreeSet::from([m.input]), VALUE | RATE);
                        }
                        d
                    }
                    _ => Deps::new(),
                };
                merge(&mut deps, &extra);
            }
            deps.into_iter()
                .filter(|&(i, mask)| i < n_inputs && mask & changed(i) != 0)
                .map(|(i, _)| i)
                .collect()
        })
        .collect()
}
