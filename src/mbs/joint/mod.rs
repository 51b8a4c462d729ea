//! The joint-coordinate formulation (paper 003, eqs. (1)–(5)):
//!
//! ```text
//!   M(p, u(t)) p̈ = Ψ(p, ṗ, u(t)) − Gᵀ(p, u(t)) λ,     g(p, u(t)) = 0
//! ```
//!
//! `p` holds the coordinates of the spanning-tree joints ([`tree`]: revolute angle, prismatic
//! travel, fixed joints none; spherical joints four Euler parameters; free bodies three
//! translations, and four Euler parameters when rigid). Euler parameters keep `v = ṗ = ė`;
//! their normalization `½(eᵀe − 1) = 0` is a constraint row, and `M` gets `c e eᵀ` on their
//! block (singular there otherwise; as the absolute formulation does, this changes only the
//! normalization's multiplier). A driver on a tree joint
//! eliminates that coordinate: its `u(t)`, `u̇`, `ü` enter the forward recursion, and through
//! it `M` and `Ψ`. The loop-closing (cut) joints and the drivers that are not on tree joints
//! are the constraints `g`, written once in the element layer.
//!
//! **One element layer.** The absolute [`System`] owns the model's elements — constraint rows,
//! force laws, outputs — as scalar coordinates of body kinematics (`mbs::kin`). This module
//! fills that layer's [`Snapshot`] with the bodies' poses and velocities from the tree
//! ([`kinematics`]) and maps each element's gradient with respect to a body's `(r, e)` to a
//! wrench at the world origin, `[½E(e) g_e + r × g_r; g_r]`, which the tree projects on its
//! joint axes `Sᵀ` (`G` rows) or adds into the recursive Newton–Euler pass ([`rnea`], `Ψ`).
//! `M` comes from the composite-rigid-body algorithm ([`crba`]). Outputs, contact events and
//! friction normals are evaluated by the absolute layer at the equivalent absolute state.
//!
//! The implicit methods' Jacobian terms `∂Ψ/∂ṗ`, `∂Ψ/∂p`, `∂(Gᵀλ)/∂p`, `∂(M a)/∂p` are
//! analytic: tangents of the recursions ([`rnea::bias_velocity_jacobian`], `derivatives.rs`).

mod aba;
mod absolute_view;
mod contact_friction;
pub mod crba;
mod derivatives;
mod dynamics;
pub mod kinematics;
mod load;
mod planar;
pub mod rnea;
mod rows;
mod sparse;
mod tires;
pub mod tree;

use super::kin::{BodyWrench, Coord, QDef, Snapshot};
use super::spec::{BodyRef, DriverTarget, ModelSpec};
use super::system::{Law, RowKind, RowOwner, System};
use super::ModelError;
use kinematics::{sv, Inertia, Kin, Sv};
use nalgebra::{DMatrix, Matrix6, Vector3, Vector4};
use serde::{Deserialize, Serialize};
use tree::{Node, NodeCoord, Parent};

/// From this many free coordinates on, a planar tree's accelerations come from the
/// articulated-body algorithm (`aba.rs`, O(n)) instead of `L D Lᵀ` of the composite-rigid-body
/// `M`; below it the formed `M` is cheaper (docs/benchmarks.md, "The articulated-body solve").
const ABA_MIN_DOFS: usize = 5;
// Below it a simple planar tree takes the small-tree kernel (`planar/small.rs`).
const _: () = assert!(planar::SMALL_MAX + 1 == ABA_MIN_DOFS);

/// The tree, the constraint rows and the workspace of the joint formulation. Lives inside
/// [`System`] (field `joint`), which dispatches to it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JointModel {
    nodes: Vec<Node>,
    /// Node of each body.
    body_node: Vec<usize>,
    /// Number of state coordinates.
    n_free: usize,
    /// Number of per-dof entries of the recursion.
    n_dof: usize,
    /// Per spherical node with state coordinates: the node, its first state coordinate and
    /// the `c` of its `c e eᵀ` mass term.
    euler: Vec<(usize, usize, f64)>,
    /// Cut joints (indices into `ModelSpec::joints`).
    cut_joints: Vec<usize>,
    /// Constraint rows: the cut joints' rows and the rows of drivers that are not on tree
    /// joints (element-layer rows), then the Euler-parameter normalizations.
    rows: Vec<JRow>,
    /// Independent rows kept after assembly (indices into `rows`).
    active: Vec<usize>,
    /// Absolute coordinate column → body (for the element layer's gradients).
    col_body: Vec<usize>,
    has_friction: bool,
    #[serde(skip)]
    ws: Workspace,
}

#[derive(Debug, Clone, Default)]
struct Workspace {
    kin: Kin,
    snap: Snapshot,
    /// The angle branch references the element layer reads with `snap`: the system's, with
    /// each tree joint's own angle replaced by its coordinate, which is continuous (a step
    /// that turned a joint by more than π read the angle 2π behind; `fill_snapshot`).
    refs: Vec<f64>,
    /// Body spatial inertias (at the loaded poses): compact for the recursions, as
    /// 6 × 6 matrices for the Jacobians.
    ib: Vec<Inertia>,
    i6: Vec<Matrix6<f64>>,
    /// Composite inertias (each node's subtree), with `ib`.
    ic: Vec<Inertia>,
    f: Vec<Sv>,
    w: Vec<Sv>,
    /// The poses depend only on the node values and the moving frames' positions, which
    /// `kin` holds: a pose is loaded once this is set (a BDF residual asks for `M` and `Ψ`
    /// at the same state, and the load compares the values it writes).
    pose_loaded: bool,
    /// Per free dof `(dof, state coordinate)`, per driven node `(dof, motion slot)`.
    free_dofs: Vec<(usize, usize)>,
    driven_dofs: Vec<(usize, usize)>,
    /// The inertias depend on the poses and the bodies' mass data (parameters may change it):
    /// the mass data they were computed with (`System::bodies_id`), valid while
    /// `inertia_valid` (cleared when the poses change).
    inertia_key: u64,
    inertia_valid: bool,
    /// Bumped whenever the inertias are recomputed (the planar projections' key, with
    /// `generation`).
    inertia_gen: u64,
    /// `i6` holds the inertias of `inertia_gen == i6_gen` (made only for the Jacobians).
    i6_gen: u64,
    /// A planar tree's projections of the recursion (`planar.rs`).
    planar: planar::PlanarWs,
    /// A planar tree's pose-independent data for the planar-first load, and whether the
    /// spatial poses and velocities in `kin` are those of the loaded state (false after a
    /// planar-first load, which fills only `planar`; made on demand by
    /// [`JointModel::ensure_spatial`]).
    planar_ref: planar::PlanarRef,
    spatial_pose: bool,
    spatial_motion: bool,
    /// Poses made by the planar-first load (for tests that it is taken).
    planar_first_poses: u64,
    /// The velocities depend on the poses and the node rates (`ẋ`, the driven `ẍ`, the moving
    /// frames), which `kin` holds as of the last `Kin::motion`: valid while `motion_valid`
    /// (cleared with the poses). The re-anchoring's path points and dopri5's right-hand side
    /// ask for forces and `γ` at one state, each loading it.
    motion_valid: bool,
    /// Bumped whenever the poses or the velocities are recomputed; the snapshot was filled
    /// at `snap_key = (generation, with velocities)`.
    generation: u64,
    /// Bumped whenever the poses are recomputed (the planar projections of the subspaces and
    /// inertias, which the rates leave alone).
    pose_gen: u64,
    snap_key: Option<(u64, bool)>,
    /// Which elements are read off tree joint coordinates (built at first use, also after a
    /// restored FMU state: not serialized).
    fast: FastPaths,
    /// Fast paths off (tests compare them with the general path).
    general_only: bool,
    /// Node accelerations with the state accelerations in (driver forces).
    acc_full: Vec<Sv>,
    /// [`JointModel::saddle_residual`]'s node accelerations from `p̈` alone and the rows'
    /// wrenches times `λ`, per node.
    res_da: Vec<Sv>,
    res_w: Vec<Sv>,
    psi: Vec<f64>,
    /// The mass matrix of `accelerations` (factored in place).
    m: DMatrix<f64>,
    /// The sparse structure's patterns (`sparse.rs`; `j_pat` is rebuilt when the active rows
    /// change) and the dense matrices its values are gathered from.
    m_pat: Vec<(usize, usize)>,
    j_pat: Vec<(usize, usize)>,
    m_sparse: DMatrix<f64>,
    j_sparse: DMatrix<f64>,
    /// Whether `M` falls into more than one block (`sparse.rs`, `has_sparse_structure`).
    forest: Option<bool>,
    /// The absolute state of the last [`JointModel::fill_absolute`] (kept: per-step callers
    /// such as the event functions do not allocate).
    abs_q: Vec<f64>,
    abs_v: Vec<f64>,
}

impl Workspace {
    /// Angle slot `s`'s value where it is a tree joint's own coordinate (continuous, loaded
    /// in `kin`): what the element layer's branch references are replaced by.
    fn tree_angle(&self, s: usize) -> Option<f64> {
        self.fast
            .slots
            .get(s)
            .copied()
            .flatten()
            .map(|d| self.kin.x[d])
    }
}

/// Elements whose scalar coordinate is a tree joint's own coordinate (a revolute angle or a
/// prismatic travel, `sys.joint_coords`): their value and rate are the recursion's `x`, `ẋ` of
/// that dof, their gradient the unit vector of its state coordinate (none when driven). The
/// general path gets the same numbers from the bodies' poses (`kin::eval_coord`, `atan2`)
/// and projects the resulting wrench pair on the tree, where it cancels on every other axis.
#[derive(Debug, Clone, Default)]
struct FastPaths {
    built: bool,
    /// Per force term.
    terms: Vec<Option<TreeCoord>>,
    /// Per angle slot: the dof whose `x` is that angle.
    slots: Vec<Option<usize>>,
    /// Per driver: the dof it eliminates (a driven tree joint).
    drivers: Vec<Option<usize>>,
    /// Every force term is in `terms` (none reads the element layer's snapshot).
    all_terms: bool,
    /// Per row of `JointModel::rows`: whether `∂g/∂t` can be nonzero, i.e. the row reads a
    /// moving frame or a body below a driven tree joint. The others' rate at zero state
    /// rates is exactly zero, and the BDF residual asks for `∂g/∂t` at every evaluation (on
    /// the rig's corner, whose post is a moving frame that no loop touches, 8 % of its run).
    time_rows: Vec<bool>,
    /// The plane of a planar tree (`planar.rs`), decided at the model's reference pose at the
    /// first evaluation after the build (`plane_checked`, `JointModel::check_plane`).
    plane: Option<planar::Plane>,
    plane_checked: bool,
    /// A planar tree whose `M` and `Ψ` read nothing but the planar recursion (every force
    /// term in `terms`, no tires or friction contacts): the planar-first load may serve them.
    planar_first: bool,
}

#[derive(Debug, Clone, Copy)]
struct TreeCoord {
    /// Per-dof index in the recursion.
    dof: usize,
    /// State coordinate (free joints).
    state: Option<usize>,
}

/// The same scalar coordinate up to its angle slot (each element has its own).
fn same_coord(a: &Coord, b: &Coord) -> bool {
    match (a, b) {
        (
            Coord::Angle { x1, y1, x2, .. },
            Coord::Angle {
                x1: u1,
                y1: v1,
                x2: u2,
                ..
            },
        ) => x1 == u1 && y1 == v1 && x2 == u2,
        _ => a == b,
    }
}

/// A constraint row of the joint formulation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
enum JRow {
    /// Index into the element layer's rows.
    Element(usize),
    /// `½(eᵀe − 1)` of the Euler parameters of entry `k` of `JointModel::euler`.
    Norm(usize),
}

/// Which velocities the recursion uses.
#[derive(Clone, Copy)]
enum Rates<'a> {
    /// Positions only.
    None,
    /// State rates zero: only drivers and moving frames move (for `∂g/∂t`).
    Rheonomic,
    /// The state's rates.
    Full(&'a [f64]),
}

/// A body's wrench at the world origin as a spatial force.
#[inline]
fn body_wrench(w: &BodyWrench) -> Sv {
    sv(&w.moment, &w.force)
}

/// A body's share of an element gradient: `∂ξ/∂r`, `∂ξ/∂e`.
#[derive(Clone, Copy)]
struct BodyGrad {
    body: usize,
    g_r: Vector3<f64>,
    g_e: Vector4<f64>,
}

/// The driver that eliminates tree node `n`'s coordinate: a driver on its joint, when the
/// joint has one degree of freedom.
fn eliminating_driver(spec: &ModelSpec, n: &tree::Node) -> Option<usize> {
    if n.kind == tree::NodeKind::Fixed || n.kind.n_dof() != 1 {
        return None;
    }
    spec.drivers
        .iter()
        .position(|d| matches!(d.target, DriverTarget::JointCoordinate(j) if Some(j) == n.joint))
}

/// Whether the joint formulation leaves `spec` a coordinate to integrate (it refuses a model
/// whose every tree coordinate is driven; the loader then keeps such a model, when the file
/// does not name a formulation, in absolute coordinates).
pub fn has_free_coordinate(spec: &ModelSpec) -> bool {
    spec.bodies.is_empty()
        || tree::spanning_tree(spec)
            .nodes
            .iter()
            .any(|n| n.kind != tree::NodeKind::Fixed && eliminating_driver(spec, n).is_none())
}

impl JointModel {
    /// The tree of `sys`'s model (every model has one; the `Result` keeps room for elements a
    /// later tree rule cannot take).
    pub fn new(sys: &System) -> Result<JointModel, ModelError> {
        let spec = sys.spec();
        let span = tree::spanning_tree(spec);
        let mut nodes = span.nodes;
        // Drivers on tree joints eliminate their coordinate.
        let mut eliminated = vec![false; spec.drivers.len()];
        let mut n_free = 0;
        let mut euler = Vec::new();
        for (i, n) in nodes.iter_mut().enumerate() {
            if n.kind == tree::NodeKind::Fixed {
                continue;
            }
            n.coord = match eliminating_driver(spec, n) {
                Some(d) => {
                    let slot = sys.rows.iter().find_map(|r| match (&r.kind, r.owner) {
                        (
                            RowKind::Coord {
                                motion: Some(s), ..
                            },
                            RowOwner::Driver(k),
                        ) if k == d => Some(*s),
                        _ => None,
                    });
                    eliminated[d] = true;
                    NodeCoord::Driven(slot.expect("every driver has a row"))
                }
                _ => {
                    if n.kind == tree::NodeKind::Spherical {
                        let b = n.body.expect("spherical nodes carry a body");
                        euler.push((i, n_free, euler_mass_scale(sys, b, &n.child_frame)));
                    }
                    n_free += n.kind.n_dof();
                    NodeCoord::Free(n_free - n.kind.n_dof())
                }
            };
        }
        if n_free == 0 && !spec.bodies.is_empty() {
            // The integrators need at least one coordinate to integrate.
            return Err(sys.err(
                "every joint coordinate of the tree is driven (no free coordinate is left to \
                 integrate in joint coordinates): use formulation = \"absolute\" for a fully \
                 prescribed model"
                    .into(),
            ));
        }
        let mut rows: Vec<JRow> = (0..sys.rows.len())
            .filter(|&i| match sys.rows[i].owner {
                RowOwner::Joint(j) => span.cut.contains(&j),
                RowOwner::Driver(d) => !eliminated[d],
                RowOwner::Normalization(_) => false,
            })
            .map(JRow::Element)
            .collect();
        rows.extend((0..euler.len()).map(JRow::Norm));
        let mut body_node = vec![0; spec.bodies.len()];
        for (i, n) in nodes.iter().enumerate() {
            if let Some(b) = n.body {
                body_node[b] = i;
            }
        }
        let layout = sys.layout();
        let mut col_body = vec![0; layout.n_q];
        for b in 0..spec.bodies.len() {
            let o = layout.offsets[b];
            let w = if layout.is_rigid(b) { 7 } else { 3 };
            col_body[o..o + w].iter_mut().for_each(|c| *c = b);
        }
        let has_friction = sys
            .terms
            .iter()
            .any(|t| matches!(t.law, Law::Friction { .. }));
        Ok(JointModel {
            active: (0..rows.len()).collect(),
            nodes,
            body_node,
            n_free,
            n_dof: span.n_dof,
            euler,
            cut_joints: span.cut,
            rows,
            col_body,
            has_friction,
            ws: Workspace::default(),
        })
    }

    pub fn n_q(&self) -> usize {
        self.n_free
    }
    pub fn n_c(&self) -> usize {
        self.active.len()
    }
    /// The tree joints in topological order and the cut joints (indices into the spec's
    /// joints), for reports and tests.
    pub fn tree_joints(&self) -> Vec<usize> {
        self.nodes.iter().filter_map(|n| n.joint).collect()
    }
    /// The free bodies (hanging from ground by their own translations and rotation), for
    /// reports and tests.
    pub fn free_bodies(&self) -> Vec<usize> {
        self.nodes
            .iter()
            .filter(|n| n.joint.is_none() && n.body.is_some())
            .filter_map(|n| n.body)
            .collect()
    }
    pub fn cut_joints(&self) -> &[usize] {
        &self.cut_joints
    }

    pub fn set_fast_paths(&mut self, on: bool) {
        self.ws.general_only = !on;
    }

    /// Whether the tree moves in one plane and `M` and `Ψ` run the planar recursion
    /// (`planar.rs`; decided at the first evaluation, `None` before it).
    pub fn planar_tree(&self) -> Option<bool> {
        let f = &self.ws.fast;
        (f.built && f.plane_checked).then_some(f.plane.is_some())
    }

    /// How many poses the planar-first load has made (`load_tree_as`).
    pub fn planar_first_poses(&self) -> u64 {
        self.ws.planar_first_poses
    }

    pub fn tree_coordinate_terms(&mut self, sys: &System) -> usize {
        self.ensure_fast(sys);
        self.ws.fast.terms.iter().filter(|t| t.is_some()).count()
    }

    /// Build [`FastPaths`] once.
    #[inline]
    fn ensure_fast(&mut self, sys: &System) {
        if !self.ws.fast.built {
            self.build_fast(sys);
        }
    }

    #[cold]
    fn build_fast(&mut self, sys: &System) {
        let mut fast = FastPaths {
            built: true,
            terms: vec![None; sys.terms.len()],
            slots: vec![None; sys.angle_coords.len()],
            drivers: vec![None; sys.spec().drivers.len()],
            all_terms: false,
            time_rows: Vec::new(),
            plane: None,
            plane_checked: false,
            planar_first: false,
        };
        for node in &self.nodes {
            let Some(j) = node.joint else { continue };
            if !matches!(
                node.kind,
                tree::NodeKind::Revolute | tree::NodeKind::Prismatic
            ) {
                continue;
            }
            let Some(jc) = sys.joint_coords[j] else {
                continue;
            };
            let state = match node.coord {
                NodeCoord::Free(a) => Some(a),
                _ => None,
            };
            for (k, term) in sys.terms.iter().enumerate() {
                if same_coord(&term.coord, &jc) {
                    fast.terms[k] = Some(TreeCoord {
                        dof: node.dof,
                        state,
                    });
                }
            }
            for (s, c) in sys.angle_coords.iter().enumerate() {
                if same_coord(c, &jc) {
                    fast.slots[s] = Some(node.dof);
                }
            }
            if let NodeCoord::Driven(_) = node.coord {
                for (d, dr) in sys.spec().drivers.iter().enumerate() {
                    if dr.target == DriverTarget::JointCoordinate(j) {
                        fast.drivers[d] = Some(node.dof);
                    }
                }
            }
        }
        fast.all_terms = fast.terms.iter().all(Option::is_some);
        fast.time_rows = self
            .rows
            .iter()
            .map(|row| match *row {
                JRow::Norm(_) => false,
                JRow::Element(r) => Self::row_coord(sys, r)
                    .0
                    .quantities()
                    .flat_map(QDef::bodies)
                    .any(|b| match b {
                        BodyRef::Ground => false,
                        BodyRef::Frame(_) => true,
                        BodyRef::Body(b) => self.moves_with_time(self.body_node[b]),
                    }),
            })
            .collect();
        self.ws.fast = fast;
    }

    /// Whether an active row can move with time (`FastPaths::time_rows`).
    fn any_time_row(&mut self, sys: &System) -> bool {
        self.ensure_fast(sys);
        self.active.iter().any(|&a| self.ws.fast.time_rows[a])
    }

    /// Whether node `i` moves when every state rate is zero: a driven joint or a moving frame
    /// on its path to ground.
    fn moves_with_time(&self, i: usize) -> bool {
        let mut node = Parent::Node(i);
        while let Parent::Node(i) = node {
            if matches!(self.nodes[i].coord, NodeCoord::Driven(_)) {
                return true;
            }
            node = self.nodes[i].parent;
        }
        matches!(node, Parent::Frame(_))
    }
}

/// The `c` of a spherical node's `c e eᵀ` mass term: `4/3` of the trace of the child body's
/// rotational inertia about the joint point (the scale of its `4 Eᵀ J E` block), 1 if zero.
fn euler_mass_scale(sys: &System, body: usize, child_frame: &super::spec::LocalFrame) -> f64 {
    let bd = &sys.bodies[body];
    let d = child_frame.origin;
    let c = 4.0 / 3.0 * (bd.inertia.trace() + 2.0 * bd.mass * d.norm_squared());
    if c > 0.0 && c.is_finite() {
        c
    } else {
        1.0
    }
}
