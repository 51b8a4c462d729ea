//! The spanning tree of the joint graph, as flat arrays in topological order (RBDL style:
//! node `i` attaches its body to its parent, and every parent node comes before its children).
//! A node has 0 to 4 coordinates (its *dofs*, numbered consecutively in flat per-dof arrays
//! from `Node::dof`).
//!
//! **Rule.** Ground and the moving frames are the root. The joints are taken in file order,
//! in repeated passes: a revolute, prismatic, cylindrical, universal, planar, fixed or
//! spherical joint becomes a tree joint when exactly one of its two ends is already in the tree
//! and the other is a rigid body not yet in it (a planar joint also takes a particle as body 2
//! when body 1 is ground or a moving frame: its two in-plane translations). When no joint can
//! be added and bodies remain, the first remaining body in file order becomes a *free body*
//! hanging from ground (a particle: three translations; a rigid body: three translations and
//! four Euler parameters), and the passes go on from it. The joints not taken (and every
//! distance joint) close loops and become constraints (cut joints). So a user chooses the tree
//! by the order of the joints and bodies in the model file.
//!
//! **Multi-coordinate joints** are chains of elementary stages ([`Stage`]): a rotation about or
//! a translation along one axis of the frame reached by the stages before it. Each stage is one
//! coordinate; its motion subspace is fixed in that intermediate frame, which is what the
//! recursions need (`Node::stages`).

use super::super::spec::{BodyKind, BodyRef, JointKind, LocalFrame, ModelSpec};
use nalgebra::{Matrix3, UnitQuaternion, Vector3};
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// Joint kinds a tree node supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeKind {
    /// One angle about the joint frame's z axis.
    Revolute,
    /// One travel along the joint frame's z axis.
    Prismatic,
    /// No coordinate.
    Fixed,
    /// Four Euler parameters `e` of the child joint frame relative to the parent joint frame
    /// (rates `ė`, normalization `½(eᵀe − 1) = 0` a constraint row). Spherical joints and the
    /// rotation of free rigid bodies.
    Spherical,
    /// Three translations along the parent frame's axes (particles and free rigid bodies).
    Translation,
    /// Cylindrical joint: travel along the joint frame's z axis (the joint's
    /// `joint_coordinate`, as prismatic), then the angle about it (as revolute).
    Cylindrical,
    /// Universal joint: the angle about frame 1's z axis, then the angle about frame 2's x
    /// axis (`axis2`), i.e. frame 2 = frame 1 · Rz(θ₁) · Rx(θ₂).
    Universal,
    /// Planar joint on a rigid body 2: travels along frame 1's x and y axes, then the angle
    /// about the normal z (frame 2 = frame 1 · T(x, y, 0) · Rz(θ)).
    Planar,
    /// Planar joint on a particle (body 2) hanging from ground or a moving frame: the travels
    /// along frame 1's x and y axes.
    PlanarTranslation,
}

/// One elementary motion of a tree node: a rotation about (`rot`) or a translation along the
/// axis `axis` (0, 1, 2 = x, y, z) of the frame reached by the node's earlier stages, by
/// `sign` times the node's coordinate `k` (index within the node).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stage {
    pub rot: bool,
    pub axis: usize,
    pub k: usize,
    pub sign: f64,
}

const fn st(rot: bool, axis: usize, k: usize, sign: f64) -> Stage {
    Stage { rot, axis, k, sign }
}

impl NodeKind {
    /// Whether the node's stages move each other's axes (`S_k ×ₘ S_l ≠ 0` for two of them):
    /// universal and planar joints. One stage, pure translations and the cylindrical joint's
    /// travel and rotation about the same axis commute (no stage velocity product; the
    /// tangents of `S_k ×ₘ S_l` vanish with it, since the stages' axes stay parallel or
    /// translational under every `δS = S_j ×ₘ S`).
    pub fn stages_interact(self) -> bool {
        matches!(self, NodeKind::Universal | NodeKind::Planar)
    }

    /// Number of coordinates.
    pub fn n_dof(self) -> usize {
        match self {
            NodeKind::Revolute | NodeKind::Prismatic => 1,
            NodeKind::Fixed => 0,
            NodeKind::Spherical => 4,
            NodeKind::Translation | NodeKind::Planar => 3,
            NodeKind::Cylindrical | NodeKind::Universal | NodeKind::PlanarTranslation => 2,
        }
    }
}

/// What the node's coordinates are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeCoord {
    /// No coordinate (fixed joint).
    None,
    /// State coordinates: index of the first in the state vector `p` (`n_dof` consecutive).
    Free(usize),
    /// Eliminated by a driver (one-coordinate joints): the value is the motion slot's `u(t)`
    /// (with `u̇`, `ü`).
    Driven(usize),
}

/// What a node hangs from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Parent {
    Ground,
    /// A moving frame (translation only), by index.
    Frame(usize),
    /// Another node, by index (earlier in the arrays).
    Node(usize),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// The joint (index into `ModelSpec::joints`); `None` for a free body's nodes.
    pub joint: Option<usize>,
    pub kind: NodeKind,
    /// The child body; `None` for the massless intermediate node of a free rigid body (its
    /// translations; the rotation node below it carries the body).
    pub body: Option<usize>,
    pub parent: Parent,
    /// +1 when the parent is the joint's body 1, −1 when the tree runs from body 2 to body 1
    /// (revolute and prismatic coordinates keep the joint's own sign convention).
    pub sigma: f64,
    /// Joint frame on the parent side (parent body coordinates) and on the child side.
    pub parent_frame: LocalFrame,
    pub child_frame: LocalFrame,
    /// Rotations of the parent frame's axes and the inverse of the child frame's axes.
    pub q_parent_frame: UnitQuaternion<f64>,
    pub q_child_frame_inv: UnitQuaternion<f64>,
    pub coord: NodeCoord,
    /// First of the node's entries in the per-dof arrays.
    pub dof: usize,
}

impl Node {
    /// The node's entries in the per-dof arrays.
    pub fn dofs(&self) -> Range<usize> {
        self.dof..self.dof + self.kind.n_dof()
    }

    /// The node's elementary stages in the order they move the child frame (empty for fixed
    /// and spherical nodes). A tree running from body 2 to body 1 (`sigma = −1`) takes the
    /// inverse motion: the stages reversed with negated coordinates, so that every coordinate
    /// keeps the joint's own convention (frame 2 relative to frame 1).
    pub fn stages(&self) -> &'static [Stage] {
        const REV: [[Stage; 1]; 2] = [[st(true, 2, 0, 1.0)], [st(true, 2, 0, -1.0)]];
        const PRI: [[Stage; 1]; 2] = [[st(false, 2, 0, 1.0)], [st(false, 2, 0, -1.0)]];
        const TRA: [Stage; 3] = [
            st(false, 0, 0, 1.0),
            st(false, 1, 1, 1.0),
            st(false, 2, 2, 1.0),
        ];
        const CYL: [[Stage; 2]; 2] = [
            [st(false, 2, 0, 1.0), st(true, 2, 1, 1.0)],
            [st(false, 2, 0, -1.0), st(true, 2, 1, -1.0)],
        ];
        const UNI: [[Stage; 2]; 2] = [
            [st(true, 2, 0, 1.0), st(true, 0, 1, 1.0)],
            [st(true, 0, 1, -1.0), st(true, 2, 0, -1.0)],
        ];
        const PLA: [[Stage; 3]; 2] = [
            [
                st(false, 0, 0, 1.0),
                st(false, 1, 1, 1.0),
                st(true, 2, 2, 1.0),
            ],
            [
                st(true, 2, 2, -1.0),
                st(false, 0, 0, -1.0),
                st(false, 1, 1, -1.0),
            ],
        ];
        const PLT: [Stage; 2] = [st(false, 0, 0, 1.0), st(false, 1, 1, 1.0)];
        let r = usize::from(self.sigma < 0.0);
        match self.kind {
            NodeKind::Fixed | NodeKind::Spherical => &[],
            NodeKind::Revolute => &REV[r],
            NodeKind::Prismatic => &PRI[r],
            NodeKind::Translation => &TRA,
            NodeKind::Cylindrical => &CYL[r],
            NodeKind::Universal => &UNI[r],
            NodeKind::Planar => &PLA[r],
            NodeKind::PlanarTranslation => &PLT,
        }
    }
}

/// The spanning tree: nodes (without state coordinates assigned yet) and the cut joints.
pub struct Spanning {
    pub nodes: Vec<Node>,
    pub cut: Vec<usize>,
    /// Number of per-dof entries.
    pub n_dof: usize,
}

fn rot_quat(m: &Matrix3<f64>) -> UnitQuaternion<f64> {
    UnitQuaternion::from_rotation_matrix(&nalgebra::Rotation3::from_matrix_unchecked(*m))
}

fn push(nodes: &mut Vec<Node>, n_dof: &mut usize, mut node: Node) -> usize {
    node.dof = *n_dof;
    *n_dof += node.kind.n_dof();
    nodes.push(node);
    nodes.len() - 1
}

fn identity_frame() -> LocalFrame {
    LocalFrame {
        origin: Vector3::zeros(),
        axes: Matrix3::identity(),
    }
}

/// Build the spanning tree by the rule in the module documentation (every model has one: a
/// body no tree joint reaches is free).
pub fn spanning_tree(spec: &ModelSpec) -> Spanning {
    let nb = spec.bodies.len();
    let rigid = |b: usize| spec.bodies[b].kind == BodyKind::Rigid;
    let mut node_of: Vec<Option<usize>> = vec![None; nb];
    let mut used = vec![false; spec.joints.len()];
    let mut nodes: Vec<Node> = Vec::new();
    let mut n_dof = 0;
    let in_tree = |r: BodyRef, node_of: &[Option<usize>]| match r {
        BodyRef::Ground | BodyRef::Frame(_) => true,
        BodyRef::Body(b) => node_of[b].is_some(),
    };
    loop {
        let mut added = false;
        for (ji, j) in spec.joints.iter().enumerate() {
            if used[ji] {
                continue;
            }
            let mut kind = match j.kind {
                JointKind::Revolute => NodeKind::Revolute,
                JointKind::Prismatic => NodeKind::Prismatic,
                JointKind::Fixed => NodeKind::Fixed,
                JointKind::Spherical => NodeKind::Spherical,
                JointKind::Cylindrical => NodeKind::Cylindrical,
                JointKind::Universal => NodeKind::Universal,
                JointKind::Planar => NodeKind::Planar,
                // Constraints only (cut joints).
                JointKind::Distance => continue,
            };
            let (i1, i2) = (in_tree(j.body1, &node_of), in_tree(j.body2, &node_of));
            let (parent_ref, child, sigma, pf, cf) = match (i1, i2, j.body1, j.body2) {
                (true, false, _, BodyRef::Body(c)) => (j.body1, c, 1.0, j.frame1, j.frame2),
                (false, true, BodyRef::Body(c), _) => (j.body2, c, -1.0, j.frame2, j.frame1),
                _ => continue,
            };
            if !rigid(child) {
                // A particle held in a plane fixed to ground or a moving frame keeps its two
                // in-plane travels (its frame never rotates); otherwise it hangs from the tree
                // by its own translations (a free body).
                let fixed_plane = matches!(parent_ref, BodyRef::Ground | BodyRef::Frame(_));
                if kind == NodeKind::Planar && sigma > 0.0 && fixed_plane {
                    kind = NodeKind::PlanarTranslation;
                } else {
                    continue;
                }
            }
            let parent = match parent_ref {
                BodyRef::Ground => Parent::Ground,
                BodyRef::Frame(f) => Parent::Frame(f),
                BodyRef::Body(b) => Parent::Node(node_of[b].expect("parent is in the tree")),
            };
            used[ji] = true;
            let node = Node {
                joint: Some(ji),
                kind,
                body: Some(child),
                parent,
                sigma,
                parent_frame: pf,
                child_frame: cf,
                q_parent_frame: rot_quat(&pf.axes),
                q_child_frame_inv: rot_quat(&cf.axes).inverse(),
                coord: NodeCoord::None,
                dof: 0,
            };
            node_of[child] = Some(push(&mut nodes, &mut n_dof, node));
            added = true;
        }
        if added {
            continue;
        }
        // A free body: translations of the centre of mass from ground, then (rigid) the
        // rotation about it.
        let Some(b) = (0..nb).find(|&b| node_of[b].is_none()) else {
            break;
        };
        let free = |kind, body, parent| Node {
            joint: None,
            kind,
            body,
            parent,
            sigma: 1.0,
            parent_frame: identity_frame(),
            child_frame: identity_frame(),
            q_parent_frame: UnitQuaternion::identity(),
            q_child_frame_inv: UnitQuaternion::identity(),
            coord: NodeCoord::None,
            dof: 0,
        };
        let t = if rigid(b) { None } else { Some(b) };
        let ti = push(
            &mut nodes,
            &mut n_dof,
            free(NodeKind::Translation, t, Parent::Ground),
        );
        node_of[b] = Some(ti);
        if rigid(b) {
            let ri = push(
                &mut nodes,
                &mut n_dof,
                free(NodeKind::Spherical, Some(b), Parent::Node(ti)),
            );
            node_of[b] = Some(ri);
        }
    }
    let cut = (0..spec.joints.len()).filter(|&j| !used[j]).collect();
    Spanning { nodes, cut, n_dof }
}
