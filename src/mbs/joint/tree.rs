//! The spanning tree of the joint graph, as flat arrays in topological order (RBDL style:
//! node `i` is the joint that attaches body `nodes[i].body` to its parent, and every parent
//! node comes before its children).
//!
//! **Rule.** Ground and the moving frames are the root. The joints are taken in file order,
//! in repeated passes: a joint becomes a tree joint when exactly one of its two ends is
//! already in the tree and the other is a body not yet in it. The remaining joints close loops
//! and become constraints (cut joints). So a user chooses the tree by the order of the joints
//! in the model file: the first joints listed that reach a body attach it.

use super::super::spec::{BodyKind, BodyRef, JointKind, LocalFrame, ModelSpec};
use nalgebra::UnitQuaternion;
use serde::{Deserialize, Serialize};

/// Joint kinds a tree node supports (one coordinate or none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeKind {
    Revolute,
    Prismatic,
    Fixed,
}

/// What the node's coordinate is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeCoord {
    /// No coordinate (fixed joint).
    None,
    /// A state coordinate: index into the state vector `p`.
    Free(usize),
    /// Eliminated by a driver: the value is the motion slot's `u(t)` (with `u̇`, `ü`).
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
    /// The joint (index into `ModelSpec::joints`).
    pub joint: usize,
    pub kind: NodeKind,
    /// The child body.
    pub body: usize,
    pub parent: Parent,
    /// +1 when the parent is the joint's body 1, −1 when the tree runs from body 2 to body 1
    /// (the coordinate keeps the joint's own sign convention).
    pub sigma: f64,
    /// Joint frame on the parent side (parent body coordinates) and on the child side.
    pub parent_frame: LocalFrame,
    pub child_frame: LocalFrame,
    /// Rotations of the parent frame's axes and the inverse of the child frame's axes.
    pub q_parent_frame: UnitQuaternion<f64>,
    pub q_child_frame_inv: UnitQuaternion<f64>,
    pub coord: NodeCoord,
}

/// Why a model cannot be put into joint coordinates (the element named).
pub struct Unsupported {
    pub element: String,
    pub message: String,
}

/// The spanning tree: nodes (without coordinates assigned yet) and the cut joints.
pub struct Spanning {
    pub nodes: Vec<Node>,
    pub cut: Vec<usize>,
}

fn rot_quat(m: &nalgebra::Matrix3<f64>) -> UnitQuaternion<f64> {
    UnitQuaternion::from_rotation_matrix(&nalgebra::Rotation3::from_matrix_unchecked(*m))
}

/// Build the spanning tree by the rule in the module documentation.
pub fn spanning_tree(spec: &ModelSpec) -> Result<Spanning, Unsupported> {
    for b in &spec.bodies {
        if b.kind == BodyKind::Particle {
            return Err(Unsupported {
                element: format!("body '{}'", b.name),
                message: "is a particle; the joint formulation supports rigid bodies only so \
                          far (use formulation = \"absolute\")"
                    .into(),
            });
        }
    }
    let nb = spec.bodies.len();
    let mut node_of: Vec<Option<usize>> = vec![None; nb];
    let mut used = vec![false; spec.joints.len()];
    let mut nodes: Vec<Node> = Vec::new();
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
            let (i1, i2) = (in_tree(j.body1, &node_of), in_tree(j.body2, &node_of));
            let (parent_ref, child, sigma, pf, cf) = match (i1, i2, j.body1, j.body2) {
                (true, false, _, BodyRef::Body(c)) => (j.body1, c, 1.0, j.frame1, j.frame2),
                (false, true, BodyRef::Body(c), _) => (j.body2, c, -1.0, j.frame2, j.frame1),
                _ => continue,
            };
            let kind = match j.kind {
                JointKind::Revolute => NodeKind::Revolute,
                JointKind::Prismatic => NodeKind::Prismatic,
                JointKind::Fixed => NodeKind::Fixed,
                other => {
                    return Err(Unsupported {
                        element: format!("joint '{}'", j.name),
                        message: format!(
                            "would attach body '{}' to the tree, but {other:?} tree joints are \
                             not supported by the joint formulation yet (revolute, prismatic and \
                             fixed are); list a supported joint to that body earlier in the file \
                             or use formulation = \"absolute\"",
                            spec.bodies[child].name
                        ),
                    })
                }
            };
            let parent = match parent_ref {
                BodyRef::Ground => Parent::Ground,
                BodyRef::Frame(f) => Parent::Frame(f),
                BodyRef::Body(b) => Parent::Node(node_of[b].expect("parent is in the tree")),
            };
            used[ji] = true;
            node_of[child] = Some(nodes.len());
            nodes.push(Node {
                joint: ji,
                kind,
                body: child,
                parent,
                sigma,
                parent_frame: pf,
                child_frame: cf,
                q_parent_frame: rot_quat(&pf.axes),
                q_child_frame_inv: rot_quat(&cf.axes).inverse(),
                coord: NodeCoord::None,
            });
            added = true;
        }
        if !added {
            break;
        }
    }
    if let Some(b) = (0..nb).find(|&b| node_of[b].is_none()) {
        return Err(Unsupported {
            element: format!("body '{}'", spec.bodies[b].name),
            message: "is not connected to ground through joints; free bodies (six degrees of \
                      freedom) are not supported by the joint formulation yet (use formulation \
                      = \"absolute\")"
                .into(),
        });
    }
    let cut = (0..spec.joints.len()).filter(|&j| !used[j]).collect();
    Ok(Spanning { nodes, cut })
}
