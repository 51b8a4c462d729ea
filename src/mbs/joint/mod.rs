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
mod contact_friction;
pub mod crba;
mod derivatives;
pub mod kinematics;
mod planar;
pub mod rnea;
mod sparse;
mod tires;
pub mod tree;

use super::kin::{
    eval_coord_accel, eval_coord_need, eval_coord_wrenches, eval_coord_wrenches_accel, BodyAccel,
    BodyWrench, Coord, CoordVal, CoordWrenches, Need, QDef, Snapshot,
};
use super::math::{e_mat, unwrap_near};
use super::spec::{BodyRef, DriverTarget, Initialization, ModelSpec};
use super::system::{AssemblyReport, Law, RowKind, RowOwner, System};
use super::ModelError;
use crate::integrate::MechState;
use kinematics::{sv, Inertia, Kin, Sv};
use nalgebra::{DMatrix, DVector, Matrix6, Vector3, Vector4};
use serde::{Deserialize, Serialize};
use tree::{Node, NodeCoord, Parent};

/// From this many free coordinates on, a planar tree's accelerations come from the
/// articulated-body algorithm (`aba.rs`, O(n)) instead of `L D Lᵀ` of the composite-rigid-body
/// `M`; below it the formed `M` is cheaper (docs/benchmarks.md, "The articulated-body solve").
const ABA_MIN_DOFS: usize = 5;

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
    /// The plane of a planar tree (`planar.rs`), decided at the first loaded pose after the
    /// build (`plane_checked`).
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
    /// Angle slot (branch reference) of an angle coordinate.
    slot: Option<usize>,
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
            let slot_of = |c: &Coord| match c {
                Coord::Angle { slot, .. } => Some(*slot),
                _ => None,
            };
            for (k, term) in sys.terms.iter().enumerate() {
                if same_coord(&term.coord, &jc) {
                    fast.terms[k] = Some(TreeCoord {
                        dof: node.dof,
                        state,
                        slot: slot_of(&term.coord),
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

    /// Run the recursion at `(t, q)` with the given rates and fill the element layer's
    /// snapshot.
    fn load(&mut self, sys: &System, t: f64, q: &[f64], rates: Rates) {
        self.load_tree(sys, t, q, rates);
        self.fill_snapshot(!matches!(rates, Rates::None));
    }

    /// [`JointModel::load`] without the element layer's snapshot: the recursion alone, which
    /// is all the mass matrix and the fast-path forces read (the snapshot's rates cost a
    /// matrix product per body). The snapshot then still describes an earlier state: only
    /// callers that read nothing of it use this.
    fn load_tree(&mut self, sys: &System, t: f64, q: &[f64], rates: Rates) {
        self.load_tree_as(sys, t, q, rates, false);
    }

    /// [`JointModel::load_tree`]; with `planar_first`, a planar tree whose evaluation reads
    /// only the planar recursion (`planar_first_ok`) gets the planar quantities straight from
    /// the coordinates (`planar::PlanarRef`) and the spatial ones only when a later caller
    /// asks ([`JointModel::ensure_spatial`]). True when the planar-first load ran: the
    /// caller then reads `ws.planar` only (no `inertias`, no snapshot).
    fn load_tree_as(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        rates: Rates,
        planar_first: bool,
    ) -> bool {
        // Planar-first only where `planar_first_ok` saw a plane and the reference.
        let planar = planar_first && self.planar_first_ok(sys);
        let (n, nf) = (self.nodes.len(), sys.frame_motions.len());
        let ws = &mut self.ws;
        if ws.kin.vel.len() != n || ws.kin.x.len() != self.n_dof || ws.kin.frame.len() != nf {
            ws.kin.resize(n, self.n_dof, nf);
            ws.snap.resize(sys.spec().bodies.len(), nf);
            ws.ib.resize(n, Inertia::ZERO);
            ws.i6.resize(n, Matrix6::zeros());
            ws.ic.resize(n, Inertia::ZERO);
            ws.f.resize(n, Sv::zeros());
            ws.w.resize(n, Sv::zeros());
            (ws.free_dofs, ws.driven_dofs) = (Vec::new(), Vec::new());
            for node in &self.nodes {
                match node.coord {
                    NodeCoord::None => {}
                    NodeCoord::Free(a) => {
                        ws.free_dofs.extend(node.dofs().zip(a..));
                    }
                    NodeCoord::Driven(slot) => ws.driven_dofs.push((node.dof, slot)),
                }
            }
        }
        // The node values in place, noting whether the pose and the rates change: `kin` holds
        // the last loaded pose, and the rates of the last computed motion (a load without
        // rates leaves them, and the free dofs' `ẍ` stay zero).
        let with_rates = !matches!(rates, Rates::None);
        let kin = &mut ws.kin;
        let (mut same_pose, mut same_motion) = (ws.pose_loaded, ws.motion_valid);
        for (f, slots) in sys.frame_motions.iter().enumerate() {
            let mut st = [Vector3::zeros(); 3];
            for k in 0..3 {
                let m = sys.motion(slots[k], t);
                for d in 0..3 {
                    st[d][k] = m[d];
                }
            }
            same_pose &= kin.frame[f][0] == st[0];
            kin.frame[f][0] = st[0];
            if with_rates {
                same_motion &= kin.frame[f][1..] == st[1..];
                kin.frame[f] = st;
            }
        }
        for &(d, a) in &ws.free_dofs {
            same_pose &= kin.x[d] == q[a];
            kin.x[d] = q[a];
            let xd = match rates {
                Rates::Full(v) => v[a],
                _ => 0.0,
            };
            same_motion &= kin.xd[d] == xd;
            if with_rates {
                kin.xd[d] = xd;
            }
        }
        for &(d, slot) in &ws.driven_dofs {
            let [u, ud, udd] = sys.motion(slot, t);
            same_pose &= kin.x[d] == u;
            kin.x[d] = u;
            same_motion &= kin.xd[d] == ud && kin.xdd[d] == udd;
            if with_rates {
                (kin.xd[d], kin.xdd[d]) = (ud, udd);
            }
        }
        if !same_pose {
            ws.spatial_pose = false;
            ws.spatial_motion = false;
            if !planar {
                ws.kin.positions(&self.nodes);
                ws.spatial_pose = true;
            }
            ws.pose_loaded = true;
            ws.inertia_valid = false;
            ws.motion_valid = false;
            ws.generation += 1;
            ws.pose_gen += 1;
        }
        if with_rates && !(same_motion && ws.motion_valid) {
            // (A new pose cleared `motion_valid`.)
            ws.spatial_motion = false;
            if !planar {
                self.ensure_spatial_pose();
                self.ws.kin.motion(&self.nodes);
                self.ws.spatial_motion = true;
            }
            self.ws.motion_valid = true;
            self.ws.generation += 1;
        }
        let ws = &mut self.ws;
        if let (true, Some(plane)) = (planar, &ws.fast.plane) {
            // The planar pose and motion straight from the coordinates, unless this state's
            // are there (made by an earlier planar-first load, or projected since from the
            // spatial ones), and with the rates the transmitted forces.
            let pose_key = Some((ws.pose_gen, ws.inertia_gen));
            let pose = ws.planar.key != pose_key;
            let stale = ws.planar.motion_key != Some(ws.generation);
            let kin = &ws.kin;
            let at = planar::PlanarAt {
                x: &kin.x,
                xd: &kin.xd,
                xdd: &kin.xdd,
                frames: &kin.frame,
                gravity: &sys.gravity,
            };
            let rates = with_rates.then_some(stale);
            let motion = ws.planar_ref.load(plane, at, pose, rates, &mut ws.planar);
            if pose {
                ws.planar.key = pose_key;
                ws.planar_first_poses += 1;
            }
            if motion {
                ws.planar.motion_key = Some(ws.generation);
            }
            return true;
        }
        self.ensure_spatial(with_rates);
        false
    }

    /// Whether the planar-first load may serve an evaluation of `M` and `Ψ`: a planar tree
    /// (detected at an earlier spatial load), the fast paths on, every force element on a
    /// tree coordinate, no tires or friction contacts (those read the snapshot). Builds the
    /// reference data from the loaded spatial pose when the bodies changed.
    fn planar_first_ok(&mut self, sys: &System) -> bool {
        let ws = &mut self.ws;
        let (false, true, Some(plane)) = (ws.general_only, ws.fast.planar_first, &ws.fast.plane)
        else {
            return false;
        };
        if ws.planar_ref.key != Some(sys.bodies_id) {
            // From the spatial pose of the last load (any pose serves as the reference).
            if !ws.pose_loaded || !ws.spatial_pose {
                return false;
            }
            ws.planar_ref.build(
                sys.bodies_id,
                plane,
                &self.nodes,
                &ws.kin.x,
                &ws.kin.s,
                &ws.kin.rot,
                |b| (sys.bodies[b].mass, sys.bodies[b].inertia),
            );
            // New body data (or gravity) with the pose unchanged: what the planar-first
            // load made from the old is stale.
            ws.planar.key = None;
            ws.planar.motion_key = None;
        }
        true
    }

    /// The spatial poses (and with `motion` the velocities) of the loaded state in `kin`,
    /// made now if a planar-first load left them out.
    #[inline]
    fn ensure_spatial(&mut self, motion: bool) {
        self.ensure_spatial_pose();
        if motion && !self.ws.spatial_motion {
            self.ws.kin.motion(&self.nodes);
            self.ws.spatial_motion = true;
        }
    }

    #[inline]
    fn ensure_spatial_pose(&mut self) {
        if !self.ws.spatial_pose {
            self.ws.kin.positions(&self.nodes);
            self.ws.spatial_pose = true;
        }
    }

    /// The element layer's snapshot (bodies' poses and velocities) from the recursion of the
    /// last [`JointModel::load_tree`] (`with_vel` as its rates were given).
    fn fill_snapshot(&mut self, with_vel: bool) {
        self.ensure_spatial(with_vel);
        let ws = &mut self.ws;
        if ws.snap_key == Some((ws.generation, with_vel)) {
            return;
        }
        ws.snap_key = Some((ws.generation, with_vel));
        for (sf, kf) in ws.snap.frame.iter_mut().zip(&ws.kin.frame) {
            // No velocities: the moving frames' rates must not leak into `rate`.
            *sf = if with_vel {
                *kf
            } else {
                [kf[0], Vector3::zeros(), Vector3::zeros()]
            };
        }
        for (i, node) in self.nodes.iter().enumerate() {
            let Some(b) = node.body else {
                continue;
            };
            ws.snap.r[b] = ws.kin.com[i];
            ws.snap.p[b] = ws.kin.e[i];
            ws.snap.a[b] = ws.kin.rot[i];
            if with_vel {
                let (w, vc) = ws.kin.body_velocity(i);
                ws.snap.rd[b] = vc;
                ws.snap.pd[b] = 0.5 * e_mat(&ws.kin.e[i]).transpose() * w;
            } else {
                ws.snap.rd[b] = Vector3::zeros();
                ws.snap.pd[b] = Vector4::zeros();
            }
        }
    }

    /// Body spatial inertias at the current poses, and the composite inertias of the CRBA.
    fn inertias(&mut self, sys: &System) {
        self.ensure_spatial_pose();
        let ws = &mut self.ws;
        if ws.inertia_valid && ws.inertia_key == sys.bodies_id {
            return;
        }
        ws.inertia_key = sys.bodies_id;
        ws.inertia_valid = true;
        ws.inertia_gen += 1;
        for (i, node) in self.nodes.iter().enumerate() {
            let Some(b) = node.body else {
                // The massless node of a free body's translations.
                self.ws.ib[i] = Inertia::ZERO;
                continue;
            };
            let bd = &sys.bodies[b];
            let a = self.ws.kin.rot[i];
            let ib = Inertia::of_body(
                bd.mass,
                &self.ws.kin.com[i],
                &(a * bd.inertia * a.transpose()),
            );
            self.ws.ib[i] = ib;
        }
        crba::composite_inertias(&self.nodes, &self.ws.ib, &mut self.ws.ic);
    }

    /// The body inertias as 6 × 6 matrices (`ws.i6`, for the Jacobians' tangents, which
    /// multiply them by many vectors), after [`JointModel::inertias`]; the evaluations
    /// themselves use the compact form.
    fn inertia_matrices(&mut self) {
        let ws = &mut self.ws;
        if ws.i6_gen != ws.inertia_gen {
            for (m, ib) in ws.i6.iter_mut().zip(&ws.ib) {
                *m = ib.matrix();
            }
            ws.i6_gen = ws.inertia_gen;
        }
    }

    /// The wrench at the world origin equivalent to a body gradient (virtual power:
    /// `g_r·ṙ + g_e·ė = Wᵀ V` with `ė = ½Eᵀω`).
    fn wrench(&self, bg: &BodyGrad) -> Sv {
        let i = self.body_node[bg.body];
        let (e, r) = (self.ws.kin.e[i], self.ws.kin.com[i]);
        sv(&(0.5 * e_mat(&e) * bg.g_e + r.cross(&bg.g_r)), &bg.g_r)
    }

    /// `G` row `k` += the projection of wrench `w` on body `b`'s ancestors' free axes.
    fn project_row(&self, b: usize, w: &Sv, k: usize, jac: &mut DMatrix<f64>) {
        let mut node = Parent::Node(self.body_node[b]);
        while let Parent::Node(i) = node {
            if let NodeCoord::Free(a) = self.nodes[i].coord {
                for (l, d) in self.nodes[i].dofs().enumerate() {
                    jac[(k, a + l)] += self.ws.kin.s[d].dot(w);
                }
            }
            node = self.nodes[i].parent;
        }
    }

    /// Row `k` of `G` for the normalization of Euler-parameter entry `n` (`eᵀ` on its four
    /// coordinates); returns `e`.
    fn norm_row(&self, n: usize, q: &[f64], k: usize, jac: &mut DMatrix<f64>) -> Vector4<f64> {
        let (col, e) = (self.euler[n].1, self.euler_of(n, q, None).0);
        for d in 0..4 {
            jac[(k, col + d)] = e[d];
        }
        e
    }

    /// The Euler parameters and rates of entry `k` of `euler` in `(q, v)`.
    fn euler_of(&self, k: usize, q: &[f64], v: Option<&[f64]>) -> (Vector4<f64>, Vector4<f64>) {
        let a = self.euler[k].1;
        (
            kinematics::euler(q, a),
            v.map_or(Vector4::zeros(), |v| kinematics::euler(v, a)),
        )
    }

    fn row_coord(sys: &System, row: usize) -> (&super::kin::Coord, f64, Option<usize>) {
        match &sys.rows[row].kind {
            RowKind::Coord {
                coord,
                offset,
                motion,
            } => (coord, *offset, *motion),
            RowKind::Normalize { .. } => unreachable!("normalization rows are not joint rows"),
        }
    }

    /// `c` at the snapshot with its gradient as body wrenches (no `conv`).
    fn wrenches(&self, sys: &System, c: &super::kin::Coord, with_vel: bool) -> CoordWrenches {
        eval_coord_wrenches(
            sys.layout(),
            &self.ws.snap,
            c,
            &sys.angle_refs,
            with_vel,
            false,
        )
    }

    /// `c` at the snapshot, computing what `need` names (`val`, `rate` always).
    fn eval(&self, sys: &System, c: &super::kin::Coord, with_vel: bool, need: Need) -> CoordVal {
        let v: Option<&[f64]> = if with_vel { Some(&[]) } else { None };
        eval_coord_need(
            sys.layout(),
            &self.ws.snap,
            c,
            &sys.angle_refs,
            v,
            None,
            need,
        )
    }

    // ----- the equations -----

    pub fn mass_matrix(&mut self, sys: &System, t: f64, q: &[f64], m: &mut DMatrix<f64>) {
        // A slice fill: nalgebra's element iterator cost 15 instructions per entry.
        m.as_mut_slice().fill(0.0);
        self.mass_matrix_entries(sys, t, q, m);
    }

    /// [`JointModel::mass_matrix`] into a matrix whose entries off the coordinates' root paths
    /// are already zero (not zeroed again).
    fn mass_matrix_entries(&mut self, sys: &System, t: f64, q: &[f64], m: &mut DMatrix<f64>) {
        if !self.load_tree_as(sys, t, q, Rates::None, true) {
            self.inertias(sys);
        }
        self.mass_matrix_loaded(sys, q, m);
    }

    /// Whether the tree is planar (`ws.fast.plane`), with the planar projections of the
    /// loaded recursion and inertias made (false also with the fast paths off). After
    /// [`JointModel::load_tree`] and [`JointModel::inertias`].
    fn planar_loaded(&mut self, sys: &System, with_motion: bool) -> bool {
        if self.ws.general_only {
            return false;
        }
        self.ensure_fast(sys);
        let n_q = self.n_q();
        let ws = &mut self.ws;
        if !ws.fast.plane_checked {
            // Exactly parallel axes in the model give parallel axes to round-off.
            ws.fast.plane = planar::Plane::detect(&self.nodes, &ws.kin.s, 1e-12);
            ws.fast.plane_checked = true;
            ws.fast.planar_first = ws.fast.plane.is_some()
                && ws.fast.all_terms
                && sys.tires.is_empty()
                && sys.contact_friction.is_empty();
            ws.planar.layout(&self.nodes, n_q);
        }
        let Some(plane) = &ws.fast.plane else {
            return false;
        };
        // The pose's projections once per pose (the mass matrix and the forces of one
        // residual share them), the rates' after every new motion.
        let key = (ws.pose_gen, ws.inertia_gen);
        if ws.planar.key != Some(key) {
            ws.planar.project_pose(plane, &ws.kin.s, &ws.ib, &ws.ic);
            ws.planar.key = Some(key);
        }
        if with_motion && ws.planar.motion_key != Some(ws.generation) {
            ws.planar.project_motion(plane, &ws.kin.vel, &ws.kin.acc);
            ws.planar.motion_key = Some(ws.generation);
        }
        true
    }

    /// The mass matrix's entries from the loaded poses and inertias (any rates).
    fn mass_matrix_loaded(&mut self, sys: &System, q: &[f64], m: &mut DMatrix<f64>) {
        if self.planar_loaded(sys, false) {
            planar::entries(&self.ws.planar, Some(m), None);
            return; // no Euler parameters in a planar tree
        }
        crba::mass_matrix_entries(&self.nodes, &self.ws.kin.s, &self.ws.ic, m);
        for k in 0..self.euler.len() {
            let (a, c) = (self.euler[k].1, self.euler[k].2);
            let (e, _) = self.euler_of(k, q, None);
            m.view_mut((a, a), (4, 4)).ger(c, &e, &e, 1.0);
        }
    }

    pub fn forces(&mut self, sys: &System, t: f64, q: &[f64], v: &[f64], f: &mut [f64]) {
        let fast = !self.ws.general_only;
        self.forces_with(sys, t, q, v, f, fast);
    }

    /// `Ψ`; with `fast`, the elements on tree joint coordinates enter `Ψ` directly instead of
    /// as wrenches, and a planar tree runs the planar recursion (`ws.w` then lacks those
    /// elements and `ws.f`, the subtree sums, is not filled: the position Jacobian's tangents
    /// and the driver forces want both, and call this without).
    pub(super) fn forces_with(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        f: &mut [f64],
        fast: bool,
    ) {
        let planar_first = self.load_tree_as(sys, t, q, Rates::Full(v), fast);
        if !planar_first {
            self.inertias(sys);
        }
        self.forces_loaded(sys, t, f, fast, planar_first);
    }

    /// [`JointModel::forces_with`] from the recursion loaded with the state's rates and the
    /// inertias; `planar_first` when that load was the planar-first one, which made the
    /// transmitted forces. The element layer's snapshot is filled only when an element reads
    /// it (and then left filled for the callers that linearize the elements, `fast` off).
    fn forces_loaded(
        &mut self,
        sys: &System,
        t: f64,
        f: &mut [f64],
        fast: bool,
        planar_first: bool,
    ) {
        if planar_first {
            // Every element enters `Ψ` directly (`planar_first_ok`).
            planar::entries(&self.ws.planar, None, Some(f));
            self.add_direct_terms(sys, t, f);
            return;
        }
        self.ensure_fast(sys);
        let all_fast = fast && self.ws.fast.all_terms;
        let extra = !sys.tires.is_empty() || !sys.contact_friction.is_empty();
        if !all_fast || extra {
            self.fill_snapshot(true);
        }
        let planar = fast && self.planar_loaded(sys, true);
        // Applied wrenches: none when every element enters `Ψ` directly and the planar
        // recursion runs (the spatial one reads `ws.w` anyway).
        let wrenches = !all_fast || extra || !planar;
        if wrenches {
            self.ws.w.iter_mut().for_each(|w| *w = Sv::zeros());
        }
        for (k, term) in sys.terms.iter().enumerate() {
            if fast && self.ws.fast.terms[k].is_some() {
                continue; // `add_direct_terms`
            }
            let cw = self.wrenches(sys, &term.coord, true);
            // With its preload from equilibrium, if the element has `static_preload`.
            let (force, _, _) = sys.term_law(k, cw.val, cw.rate, t);
            if force == 0.0 {
                continue;
            }
            for bw in &cw.bodies[..cw.n] {
                self.ws.w[self.body_node[bw.body]] += force * body_wrench(bw);
            }
        }
        self.add_tire_wrenches(sys, t);
        self.add_contact_friction_wrenches(sys, t);
        let ws = &mut self.ws;
        if let (true, Some(plane)) = (planar, &ws.fast.plane) {
            let w = wrenches.then_some(&ws.w[..]);
            planar::bias_forces(plane, &self.nodes, &mut ws.planar, &sys.gravity, w, f);
        } else {
            rnea::bias_forces(
                &self.nodes,
                &ws.kin.s,
                &ws.kin.vel,
                &ws.kin.acc,
                &sys.gravity,
                &ws.ib,
                &ws.w,
                &mut ws.f,
                f,
            );
        }
        if fast {
            self.add_direct_terms(sys, t, f);
        }
    }

    /// The force elements on tree joint coordinates (`ws.fast.terms`), straight into `Ψ` from
    /// the loaded `x`, `ẋ` (a driven joint's pair of torques or forces does not act on the
    /// state).
    fn add_direct_terms(&self, sys: &System, t: f64, f: &mut [f64]) {
        let kin = &self.ws.kin;
        for (k, tc) in self.ws.fast.terms.iter().enumerate() {
            let Some(tc) = tc else { continue };
            let x = kin.x[tc.dof];
            let val = tc.slot.map_or(x, |s| unwrap_near(x, sys.angle_refs[s]));
            let (force, _, _) = sys.term_law(k, val, kin.xd[tc.dof], t);
            if let (Some(a), true) = (tc.state, force != 0.0) {
                f[a] += force;
            }
        }
    }

    pub fn constraints(&mut self, sys: &System, t: f64, q: &[f64], phi: &mut [f64]) {
        if self.active.is_empty() {
            return; // a tree: no rows, and no kinematics to load for them
        }
        self.load(sys, t, q, Rates::None);
        for (k, &a) in self.active.iter().enumerate() {
            phi[k] = match self.rows[a] {
                JRow::Element(r) => {
                    let (c, offset, motion) = Self::row_coord(sys, r);
                    let u = motion.map_or(0.0, |m| sys.motion(m, t)[0]);
                    self.eval(sys, c, false, Need::VALUE).val - offset - u
                }
                JRow::Norm(n) => 0.5 * (self.euler_of(n, q, None).0.norm_squared() - 1.0),
            };
        }
    }

    pub fn constraint_jacobian(&mut self, sys: &System, t: f64, q: &[f64], jac: &mut DMatrix<f64>) {
        if self.active.is_empty() {
            return; // a tree: no rows, and no kinematics to load for them
        }
        self.load(sys, t, q, Rates::None);
        jac.fill(0.0);
        for (k, &a) in self.active.iter().enumerate() {
            let r = match self.rows[a] {
                JRow::Element(r) => r,
                JRow::Norm(n) => {
                    self.norm_row(n, q, k, jac);
                    continue;
                }
            };
            let (c, _, _) = Self::row_coord(sys, r);
            let cw = self.wrenches(sys, c, false);
            for bw in &cw.bodies[..cw.n] {
                self.project_row(bw.body, &body_wrench(bw), k, jac);
            }
        }
    }

    /// `Φ`, `G` and `∂g/∂t` in one pass over the rows (what the BDF residual reads at every
    /// evaluation): one recursion and one evaluation per row instead of three. The same
    /// values as [`JointModel::constraints`], [`JointModel::constraint_jacobian`] and
    /// [`JointModel::constraint_time_derivative`] (the wrenches do not depend on the rates,
    /// and the rate is formed in the same order).
    pub fn constraint_values_dense(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        phi: &mut [f64],
        jac: &mut DMatrix<f64>,
        phi_t: &mut [f64],
    ) {
        if self.active.is_empty() {
            return; // a tree: no rows, and no kinematics to load for them
        }
        jac.fill(0.0);
        self.constraint_rows(sys, t, q, phi, jac, phi_t);
    }

    /// [`JointModel::constraint_values_dense`] into a `jac` whose entries of the rows'
    /// pattern are zero (the sparse path zeroes only those).
    pub(super) fn constraint_rows(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        phi: &mut [f64],
        jac: &mut DMatrix<f64>,
        phi_t: &mut [f64],
    ) {
        let rates = if self.any_time_row(sys) {
            Rates::Rheonomic
        } else {
            Rates::None
        };
        self.load(sys, t, q, rates);
        for (k, &a) in self.active.iter().enumerate() {
            let r = match self.rows[a] {
                JRow::Element(r) => r,
                JRow::Norm(n) => {
                    let e = self.norm_row(n, q, k, jac);
                    phi[k] = 0.5 * (e.norm_squared() - 1.0);
                    phi_t[k] = 0.0;
                    continue;
                }
            };
            let (c, offset, motion) = Self::row_coord(sys, r);
            let u = motion.map_or([0.0; 3], |m| sys.motion(m, t));
            let time_row = self.ws.fast.time_rows[a];
            let cw = self.wrenches(sys, c, time_row);
            phi[k] = cw.val - offset - u[0];
            phi_t[k] = if time_row { cw.rate } else { 0.0 } - u[1];
            for bw in &cw.bodies[..cw.n] {
                self.project_row(bw.body, &body_wrench(bw), k, jac);
            }
        }
    }

    pub fn constraint_time_derivative(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        phi_t: &mut [f64],
    ) {
        if self.active.is_empty() {
            return;
        }
        if self.any_time_row(sys) {
            self.load(sys, t, q, Rates::Rheonomic);
        }
        for (k, &a) in self.active.iter().enumerate() {
            let JRow::Element(r) = self.rows[a] else {
                phi_t[k] = 0.0;
                continue;
            };
            let (c, _, motion) = Self::row_coord(sys, r);
            let du = motion.map_or(0.0, |m| sys.motion(m, t)[1]);
            let rate = if self.ws.fast.time_rows[a] {
                self.eval(sys, c, true, Need::VALUE).rate
            } else {
                0.0
            };
            phi_t[k] = rate - du;
        }
    }

    pub fn acceleration_rhs(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        gamma: &mut [f64],
    ) {
        if self.active.is_empty() {
            return;
        }
        self.load(sys, t, q, Rates::Full(v));
        for (k, &a) in self.active.iter().enumerate() {
            let r = match self.rows[a] {
                JRow::Element(r) => r,
                JRow::Norm(n) => {
                    gamma[k] = -self.euler_of(n, q, Some(v)).1.norm_squared();
                    continue;
                }
            };
            let (c, _, motion) = Self::row_coord(sys, r);
            let ddu = motion.map_or(0.0, |m| sys.motion(m, t)[2]);
            // ξ̈ = ∇ξ·q̈_abs + conv = ξ̈ at p̈ = 0 (the bodies' accelerations then) + G p̈.
            let kin = &self.ws.kin;
            let xi_dd = eval_coord_accel(sys.layout(), &self.ws.snap, c, &sys.angle_refs, |b| {
                self.body_accel(kin, b)
            });
            gamma[k] = -xi_dd + ddu;
        }
    }

    /// `G` and `γ` in one pass over the rows (one recursion with the rates and one
    /// evaluation per row instead of two): the same values as
    /// [`JointModel::constraint_jacobian`] and [`JointModel::acceleration_rhs`].
    pub fn constraint_jacobian_and_rhs(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        jac: &mut DMatrix<f64>,
        gamma: &mut [f64],
    ) {
        if self.active.is_empty() {
            return;
        }
        self.load(sys, t, q, Rates::Full(v));
        jac.fill(0.0);
        for (k, &a) in self.active.iter().enumerate() {
            let r = match self.rows[a] {
                JRow::Element(r) => r,
                JRow::Norm(n) => {
                    self.norm_row(n, q, k, jac);
                    gamma[k] = -self.euler_of(n, q, Some(v)).1.norm_squared();
                    continue;
                }
            };
            let (c, _, motion) = Self::row_coord(sys, r);
            let ddu = motion.map_or(0.0, |m| sys.motion(m, t)[2]);
            let kin = &self.ws.kin;
            let (cw, xi_dd) =
                eval_coord_wrenches_accel(sys.layout(), &self.ws.snap, c, &sys.angle_refs, |b| {
                    self.body_accel(kin, b)
                });
            gamma[k] = -xi_dd + ddu;
            for bw in &cw.bodies[..cw.n] {
                self.project_row(bw.body, &body_wrench(bw), k, jac);
            }
        }
    }

    /// `ρ = r − K x` of `[M Gᵀ; G 0] (p̈, λ) = (Ψ, γ)` for a given `x = (p̈, λ)`, without
    /// forming `M` or `G`: `Ψ` as [`JointModel::forces`] gives it, then one pass with `p̈` in
    /// (node accelerations `ΔA_i = ΔA_λ(i) + S_i p̈_i` on top of the bias accelerations):
    /// `M p̈ = Sᵀ Σ_subtree I ΔA` plus the Euler parameters' `c e eᵀ p̈`, `Gᵀλ` as the rows'
    /// wrenches times `λ` summed over the subtrees, and `γ − G p̈ = ü_row − ξ̈` with `ξ̈` at the
    /// full accelerations (`ξ̈(p̈) = ξ̈(0) + G p̈`). The equations of forming `K` (a unit test
    /// compares them); the BDF's re-anchoring evaluates it at its path points.
    #[allow(clippy::too_many_arguments)]
    pub fn saddle_residual(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        x: &[f64],
        out: &mut [f64],
    ) {
        let nq = self.n_q();
        let (pdd, lambda) = x.split_at(nq);
        let (of, og) = out.split_at_mut(nq);
        self.forces(sys, t, q, v, of);
        // The rows read the snapshot with velocities (the recursion is the one `forces` ran;
        // its spatial poses and inertias are made here if a planar-first load left them out).
        self.load(sys, t, q, Rates::Full(v));
        self.inertias(sys);
        let n = self.nodes.len();
        let ws = &mut self.ws;
        ws.res_da.resize(n, Sv::zeros());
        ws.res_w.clear();
        ws.res_w.resize(n, Sv::zeros());
        for (i, node) in self.nodes.iter().enumerate() {
            let mut da = match node.parent {
                Parent::Node(p) => ws.res_da[p],
                _ => Sv::zeros(),
            };
            if let NodeCoord::Free(k) = node.coord {
                for (l, d) in node.dofs().enumerate() {
                    da += ws.kin.s[d] * pdd[k + l];
                }
            }
            ws.res_da[i] = da;
        }
        for (k, &a) in self.active.iter().enumerate() {
            let r = match self.rows[a] {
                JRow::Element(r) => r,
                JRow::Norm(n) => {
                    let (col, (e, ed)) = (self.euler[n].1, self.euler_of(n, q, Some(v)));
                    let e_pdd = (0..4).map(|d| e[d] * pdd[col + d]).sum::<f64>();
                    og[k] = -ed.norm_squared() - e_pdd;
                    for d in 0..4 {
                        of[col + d] -= lambda[k] * e[d];
                    }
                    continue;
                }
            };
            let (c, _, motion) = Self::row_coord(sys, r);
            let ddu = motion.map_or(0.0, |m| sys.motion(m, t)[2]);
            let (kin, da) = (&self.ws.kin, &self.ws.res_da);
            let (cw, xi_dd) =
                eval_coord_wrenches_accel(sys.layout(), &self.ws.snap, c, &sys.angle_refs, |b| {
                    let i = self.body_node[b];
                    let (omega_dot, acc) = kin.body_acceleration_of(i, &(kin.acc[i] + da[i]));
                    BodyAccel {
                        omega: kin.body_velocity(i).0,
                        omega_dot,
                        acc,
                    }
                });
            og[k] = -xi_dd + ddu;
            for bw in &cw.bodies[..cw.n] {
                self.ws.res_w[self.body_node[bw.body]] += lambda[k] * body_wrench(bw);
            }
        }
        let ws = &mut self.ws;
        for i in (0..n).rev() {
            let f = ws.ib[i].mul(&ws.res_da[i]) + ws.res_w[i];
            if let NodeCoord::Free(a) = self.nodes[i].coord {
                for (l, d) in self.nodes[i].dofs().enumerate() {
                    of[a + l] -= ws.kin.s[d].dot(&f);
                }
            }
            // `res_w[p]` collects the parent's own wrench and its children's subtree sums.
            if let Parent::Node(p) = self.nodes[i].parent {
                ws.res_w[p] += f;
            }
        }
        for k in 0..self.euler.len() {
            let (a, c) = (self.euler[k].1, self.euler[k].2);
            let (e, _) = self.euler_of(k, q, None);
            let e_pdd = (0..4).map(|d| e[d] * pdd[a + d]).sum::<f64>();
            for d in 0..4 {
                of[a + d] -= c * e[d] * e_pdd;
            }
        }
    }

    /// Body `b`'s rates from the recursion (its accelerations at `p̈ = 0`).
    fn body_accel(&self, kin: &Kin, b: usize) -> BodyAccel {
        let i = self.body_node[b];
        let (omega_dot, acc) = kin.body_acceleration(i);
        BodyAccel {
            omega: kin.body_velocity(i).0,
            omega_dot,
            acc,
        }
    }

    /// `[M Gᵀ; G 0] [p̈; λ] = [Ψ; γ]`, dense; [`JointModel::accelerations_into`] into new
    /// vectors.
    pub fn accelerations(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
    ) -> Result<(Vec<f64>, Vec<f64>), ModelError> {
        let (mut a, mut lambda) = (vec![0.0; self.n_q()], vec![0.0; self.n_c()]);
        self.accelerations_into(sys, t, q, v, &mut a, &mut lambda)?;
        Ok((a, lambda))
    }

    /// `[M Gᵀ; G 0] [p̈; λ] = [Ψ; γ]` into `acc` (`n_q`) and `lambda` (`n_c`). A tree (no
    /// loop rows) allocates nothing: one forward pass serves `M` and `Ψ`, and `M p̈ = Ψ` is
    /// solved by `L D Lᵀ` in the workspace (its cost matters for small trees, where the
    /// whole evaluation is a few hundred flops).
    pub fn accelerations_into(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        acc: &mut [f64],
        lambda: &mut [f64],
    ) -> Result<(), ModelError> {
        let (nq, nc) = (self.n_q(), self.n_c());
        if nq == 0 {
            // Every degree of freedom driven: nothing to solve for (nalgebra refuses views of
            // an empty matrix). Outputs still follow the drivers.
            lambda.fill(0.0);
            return Ok(());
        }
        if nc == 0 {
            if self.unconstrained_accelerations(sys, t, q, v, acc) {
                return Ok(());
            }
            // A small or spatial tree (the load is the one above where that ran), or a singular
            // `M` there (this `L D Lᵀ` refuses it too).
            let planar_first = self.load_tree_as(sys, t, q, Rates::Full(v), true);
            let mut m = std::mem::take(&mut self.ws.m);
            if m.shape() != (nq, nq) {
                m = DMatrix::zeros(nq, nq);
            }
            // The CRBA writes the entries of coordinates on one root path only.
            m.as_mut_slice().fill(0.0);
            if planar_first {
                // `M` and `Ψ` from the one pass of the load (`planar::PlanarRef::load`).
                planar::entries(&self.ws.planar, Some(&mut m), Some(acc));
                self.add_direct_terms(sys, t, acc);
            } else {
                self.inertias(sys);
                self.mass_matrix_loaded(sys, q, &mut m);
                let fast = !self.ws.general_only;
                self.forces_loaded(sys, t, acc, fast, false);
            }
            let ok = crate::dense::ldlt_solve(m.as_mut_slice(), acc);
            self.ws.m = m;
            if ok {
                return Ok(());
            }
            // Not positive definite (a massless chain): the LU below says so.
        }
        let mut m = DMatrix::zeros(nq, nq);
        let mut g = DMatrix::zeros(nc, nq);
        let mut rhs = vec![0.0; nq + nc];
        self.mass_matrix(sys, t, q, &mut m);
        self.constraint_jacobian_and_rhs(sys, t, q, v, &mut g, &mut rhs[nq..]);
        self.forces(sys, t, q, v, &mut rhs[..nq]);
        let mut a = DMatrix::zeros(nq + nc, nq + nc);
        a.view_mut((0, 0), (nq, nq)).copy_from(&m);
        a.view_mut((0, nq), (nq, nc)).copy_from(&g.transpose());
        a.view_mut((nq, 0), (nc, nq)).copy_from(&g);
        let x = a.lu().solve(&DVector::from_vec(rhs)).ok_or_else(|| {
            sys.err(format!(
                "singular joint-coordinate saddle-point matrix at t = {t} (dependent loop \
                 constraints or a massless chain)"
            ))
        })?;
        acc.copy_from_slice(&x.as_slice()[..nq]);
        lambda.copy_from_slice(&x.as_slice()[nq..]);
        Ok(())
    }

    /// `p̈ = M⁻¹ Ψ` of a tree (no loop rows) by the articulated-body algorithm, where the tree
    /// is planar (the planar-first load serves it) with at least [`ABA_MIN_DOFS`] free
    /// coordinates; `false`, nothing usable written, otherwise (or where `M` is singular).
    /// What [`crate::integrate::system::Mechanical::unconstrained_accelerations`] asks of the
    /// joint formulation (the BDF's residual without constraints).
    pub fn unconstrained_accelerations(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        acc: &mut [f64],
    ) -> bool {
        self.n_c() == 0
            && self.n_q() >= ABA_MIN_DOFS
            && self.load_tree_as(sys, t, q, Rates::Full(v), true)
            && self.planar_articulated(sys, t, acc)
    }

    /// `p̈ = M⁻¹ Ψ` after a planar-first load: `Ψ` from its one pass and the force elements
    /// ([`JointModel::forces_loaded`]), then the articulated-body algorithm, without forming
    /// `M`. Not inlined: the small trees' path in `accelerations_into` stays as it was.
    #[inline(never)]
    fn planar_articulated(&mut self, sys: &System, t: f64, acc: &mut [f64]) -> bool {
        self.forces_loaded(sys, t, acc, true, true);
        let ws = &mut self.ws;
        ws.planar_ref.solve(&mut ws.planar, acc)
    }

    // ----- Jacobians of the implicit methods -----

    /// `∂Ψ/∂ṗ` analytic: the tree's tangent recursion ([`rnea::bias_velocity_jacobian`]) plus,
    /// per force element, `F_ξ̇ g gᵀ` with `g = ∂ξ̇/∂ṗ = Jᵀ∇ξ` (the element's rate depends on
    /// `ṗ` linearly, its direction not at all). `∂Ψ/∂p` analytic too (`derivatives.rs`).
    pub fn force_jacobians(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        df_dq: &mut DMatrix<f64>,
        df_dv: &mut DMatrix<f64>,
    ) {
        self.velocity_jacobian(sys, t, q, v, df_dv);
        self.position_jacobian(sys, t, q, v, df_dq);
    }

    fn velocity_jacobian(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        out: &mut DMatrix<f64>,
    ) {
        self.load(sys, t, q, Rates::Full(v));
        self.inertias(sys);
        self.inertia_matrices();
        let n = self.n_q();
        let nn = self.nodes.len();
        let (mut dv, mut da, mut df) = (
            vec![Sv::zeros(); nn],
            vec![Sv::zeros(); nn],
            vec![Sv::zeros(); nn],
        );
        let ws = &self.ws;
        rnea::bias_velocity_jacobian(&self.nodes, &ws.kin, &ws.i6, &mut dv, &mut da, &mut df, out);
        let mut g = DVector::zeros(n);
        for term in &sys.terms {
            let cw = self.wrenches(sys, &term.coord, true);
            let (_, _, f_rate) = sys.law(&term.law, cw.val, cw.rate, t);
            if f_rate == 0.0 {
                continue;
            }
            g.fill(0.0);
            for bw in &cw.bodies[..cw.n] {
                let w = body_wrench(bw);
                let mut node = Parent::Node(self.body_node[bw.body]);
                while let Parent::Node(i) = node {
                    if let NodeCoord::Free(a) = self.nodes[i].coord {
                        for (l, d) in self.nodes[i].dofs().enumerate() {
                            g[a + l] += self.ws.kin.s[d].dot(&w);
                        }
                    }
                    node = self.nodes[i].parent;
                }
            }
            out.ger(f_rate, &g, &g, 1.0);
        }
        self.add_tire_velocity_jacobian(sys, t, out);
        self.add_contact_friction_velocity_jacobian(sys, t, out);
    }

    pub fn constraint_force_jacobian(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        lambda: &[f64],
        out: &mut DMatrix<f64>,
    ) {
        self.constraint_force_position_jacobian(sys, t, q, lambda, out);
    }

    pub fn mass_times_accel_jacobian(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        a: &[f64],
        out: &mut DMatrix<f64>,
    ) {
        self.mass_times_accel_position_jacobian(sys, t, q, a, out);
    }

    // ----- the absolute view (outputs, events, step hooks) -----

    /// The equivalent absolute state `(q, v)` of the element layer.
    pub fn to_absolute(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: Option<&[f64]>,
    ) -> (Vec<f64>, Vec<f64>) {
        self.fill_absolute(sys, t, q, v);
        (self.ws.abs_q.clone(), self.ws.abs_v.clone())
    }

    /// [`Self::to_absolute`] into `ws.abs_q`, `ws.abs_v` (no allocation once sized).
    fn fill_absolute(&mut self, sys: &System, t: f64, q: &[f64], v: Option<&[f64]>) {
        self.load(sys, t, q, v.map_or(Rates::None, Rates::Full));
        let layout = sys.layout();
        let (qa, va) = (&mut self.ws.abs_q, &mut self.ws.abs_v);
        qa.resize(layout.n_q, 0.0);
        va.resize(layout.n_q, 0.0);
        let s = &self.ws.snap;
        for b in 0..layout.offsets.len() {
            let o = layout.offsets[b];
            qa[o..o + 3].copy_from_slice(s.r[b].as_slice());
            va[o..o + 3].copy_from_slice(s.rd[b].as_slice());
            if layout.is_rigid(b) {
                qa[o + 3..o + 7].copy_from_slice(s.p[b].as_slice());
                va[o + 3..o + 7].copy_from_slice(s.pd[b].as_slice());
            }
        }
    }

    /// Joint coordinates and rates of an absolute state (tree joints only).
    fn coordinates_of(&self, sys: &System, t: f64, qa: &[f64], va: &[f64]) -> (Vec<f64>, Vec<f64>) {
        use nalgebra::{Matrix3, UnitQuaternion};
        let layout = sys.layout();
        // Per body: rotation, centre of mass, angular velocity, centre-of-mass velocity.
        let body = |b: usize| {
            let o = layout.offsets[b];
            let r = Vector3::new(qa[o], qa[o + 1], qa[o + 2]);
            let rd = Vector3::new(va[o], va[o + 1], va[o + 2]);
            if !layout.is_rigid(b) {
                return (Matrix3::identity(), r, Vector3::zeros(), rd);
            }
            let e = Vector4::new(qa[o + 3], qa[o + 4], qa[o + 5], qa[o + 6]);
            let ed = Vector4::new(va[o + 3], va[o + 4], va[o + 5], va[o + 6]);
            (super::math::rot(&e), r, 2.0 * e_mat(&e) * ed, rd)
        };
        let frame = |f: usize| {
            let slots = sys.frame_motions[f];
            let (mut x, mut xd) = (Vector3::zeros(), Vector3::zeros());
            for k in 0..3 {
                let m = sys.motion(slots[k], t);
                x[k] = m[0];
                xd[k] = m[1];
            }
            (x, xd)
        };
        // Per node: the pose and motion of the frame it carries (a free body's massless
        // translation node: its body's centre of mass, not rotating).
        let mut state = Vec::with_capacity(self.nodes.len());
        for (i, n) in self.nodes.iter().enumerate() {
            state.push(match n.body {
                Some(b) => body(b),
                None => {
                    let child = self.nodes[i + 1..]
                        .iter()
                        .find(|c| c.parent == Parent::Node(i))
                        .and_then(|c| c.body)
                        .expect("a free body's rotation node follows its translation node");
                    let (_, r, _, rd) = body(child);
                    (Matrix3::identity(), r, Vector3::zeros(), rd)
                }
            });
        }
        let (mut p, mut pd) = (vec![0.0; self.n_q()], vec![0.0; self.n_q()]);
        for (i, n) in self.nodes.iter().enumerate() {
            let NodeCoord::Free(a) = n.coord else {
                continue;
            };
            // Parent: rotation, position, angular velocity, velocity of the body origin.
            let (ap, rp, wp, vp) = match n.parent {
                Parent::Ground => (
                    Matrix3::identity(),
                    Vector3::zeros(),
                    Vector3::zeros(),
                    Vector3::zeros(),
                ),
                Parent::Frame(f) => {
                    let (x, xd) = frame(f);
                    (Matrix3::identity(), x, Vector3::zeros(), xd)
                }
                Parent::Node(k) => state[k],
            };
            let (ac, rc, wc, vc) = state[i];
            let (apf, acf) = (ap * n.parent_frame.axes, ac * n.child_frame.axes);
            let o_pf = rp + ap * n.parent_frame.origin;
            let o_cf = rc + ac * n.child_frame.origin;
            let z = apf.column(2).into_owned();
            let v_pf = vp + wp.cross(&(o_pf - rp));
            let v_cf = vc + wc.cross(&(o_cf - rc));
            match n.kind {
                tree::NodeKind::Revolute => {
                    let (x1, y1, x2) = if n.sigma > 0.0 {
                        (apf.column(0), apf.column(1), acf.column(0))
                    } else {
                        (acf.column(0), acf.column(1), apf.column(0))
                    };
                    p[a] = y1.dot(&x2).atan2(x1.dot(&x2));
                    pd[a] = n.sigma * z.dot(&(wc - wp));
                }
                tree::NodeKind::Prismatic => {
                    p[a] = n.sigma * z.dot(&(o_cf - o_pf));
                    pd[a] = n.sigma * z.dot(&(v_cf - v_pf));
                }
                tree::NodeKind::Spherical => {
                    // Child joint frame relative to the parent joint frame; `ė = ½ Eᵀ ω`
                    // with `ω` in the parent joint frame.
                    let rel = apf.transpose() * acf;
                    let qr = UnitQuaternion::from_rotation_matrix(
                        &nalgebra::Rotation3::from_matrix_unchecked(rel),
                    );
                    let e = Vector4::new(qr.w, qr.i, qr.j, qr.k);
                    let ed = 0.5 * e_mat(&e).transpose() * (apf.transpose() * (wc - wp));
                    p[a..a + 4].copy_from_slice(e.as_slice());
                    pd[a..a + 4].copy_from_slice(ed.as_slice());
                }
                tree::NodeKind::Translation => {
                    // The parent (ground) does not rotate.
                    let x = apf.transpose() * (o_cf - o_pf);
                    let xd = apf.transpose() * (v_cf - v_pf);
                    p[a..a + 3].copy_from_slice(x.as_slice());
                    pd[a..a + 3].copy_from_slice(xd.as_slice());
                }
                tree::NodeKind::Fixed => {}
                tree::NodeKind::Cylindrical
                | tree::NodeKind::Universal
                | tree::NodeKind::Planar
                | tree::NodeKind::PlanarTranslation => {
                    // Frame 2 relative to frame 1 whichever way the tree runs (the joint's own
                    // coordinates).
                    let ((a1, o1, v1, w1), (a2, o2, v2, w2)) = {
                        let (pa, ca) = ((apf, o_pf, v_pf, wp), (acf, o_cf, v_cf, wc));
                        if n.sigma > 0.0 {
                            (pa, ca)
                        } else {
                            (ca, pa)
                        }
                    };
                    let d = o2 - o1;
                    // Travels along frame 1's axes and their rates (frame 1 turns with w1).
                    let x = a1.transpose() * d;
                    let xd = a1.transpose() * (v2 - v1 - w1.cross(&d));
                    let angle = a1
                        .column(1)
                        .dot(&a2.column(0))
                        .atan2(a1.column(0).dot(&a2.column(0)));
                    let w = a1.transpose() * (w2 - w1);
                    let (vals, rates): (Vec<f64>, Vec<f64>) = match n.kind {
                        tree::NodeKind::Cylindrical => (vec![x.z, angle], vec![xd.z, w.z]),
                        tree::NodeKind::Universal => {
                            let rel = a1.transpose() * a2;
                            let t1 = rel[(1, 0)].atan2(rel[(0, 0)]);
                            let t2 = rel[(2, 1)].atan2(rel[(2, 2)]);
                            // ω = θ̇₁ z + θ̇₂ Rz(θ₁) x in frame 1.
                            let t2d = w.x * t1.cos() + w.y * t1.sin();
                            (vec![t1, t2], vec![w.z, t2d])
                        }
                        tree::NodeKind::Planar => (vec![x.x, x.y, angle], vec![xd.x, xd.y, w.z]),
                        _ => (vec![x.x, x.y], vec![xd.x, xd.y]),
                    };
                    p[a..a + vals.len()].copy_from_slice(&vals);
                    pd[a..a + rates.len()].copy_from_slice(&rates);
                }
            }
        }
        (p, pd)
    }

    /// Consistent initial state: the absolute assembly (or static equilibrium) of the same
    /// model gives the bodies' poses; the tree coordinates are read off them, polished by
    /// Gauss–Newton on the loop constraints; redundant loop rows are dropped; velocities
    /// projected.
    pub fn initial_state(&mut self, sys: &mut System, t0: f64) -> Result<MechState, ModelError> {
        let xa = super::assembly::initial_state_with(sys, t0, false)?;
        let (mut q, mut v) = self.coordinates_of(sys, t0, &xa.q, &xa.v);
        let (q_given, v_given) = (q.clone(), v.clone());
        let nq = self.n_q();
        self.active = (0..self.rows.len()).collect();
        let all = self.rows.len();
        let mut phi = vec![0.0; all];
        let mut jac = DMatrix::zeros(all, nq);
        let initial_residual = {
            self.constraints(sys, t0, &q, &mut phi);
            phi.iter().fold(0.0f64, |m, x| m.max(x.abs()))
        };
        for _ in 0..30 {
            self.constraints(sys, t0, &q, &mut phi);
            if phi.iter().all(|x| x.abs() < 1e-12) {
                break;
            }
            self.constraint_jacobian(sys, t0, &q, &mut jac);
            let dq = super::assembly::pinv_solve(&jac, &DVector::from_column_slice(&phi));
            q.iter_mut().zip(dq.iter()).for_each(|(x, d)| *x -= d);
        }
        self.constraint_jacobian(sys, t0, &q, &mut jac);
        let (keep, drop) = super::assembly::independent_rows(&jac);
        let dropped: Vec<String> = drop.iter().map(|&i| self.row_label(sys, i)).collect();
        self.active = keep;
        self.ws.j_pat.clear();
        if sys.spec().initialization == Initialization::Static {
            v.iter_mut().for_each(|x| *x = 0.0);
        }
        let nc = self.n_c();
        if nc > 0 {
            let mut g = DMatrix::zeros(nc, nq);
            let mut phi_t = vec![0.0; nc];
            self.constraint_jacobian(sys, t0, &q, &mut g);
            self.constraint_time_derivative(sys, t0, &q, &mut phi_t);
            let res = &g * DVector::from_column_slice(&v) + DVector::from_vec(phi_t);
            let dv = super::assembly::pinv_solve(&g, &res);
            v.iter_mut().zip(dv.iter()).for_each(|(x, d)| *x -= d);
        }
        let mut phi = vec![0.0; nc];
        self.constraints(sys, t0, &q, &mut phi);
        let (qa, _) = self.to_absolute(sys, t0, &q, None);
        sys.track_angles(&qa, t0);
        let (_, lambda) = self.accelerations(sys, t0, &q, &v)?;
        let maxdiff = |a: &[f64], b: &[f64]| {
            a.iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f64::max)
        };
        // The absolute assembly (or static equilibrium) this start was read off moved the
        // bodies; keep what it reported about that.
        let (body_moves, static_iterations) = sys
            .report
            .as_ref()
            .map(|r| (r.body_moves.clone(), r.static_iterations))
            .unwrap_or_default();
        sys.report = Some(AssemblyReport {
            body_moves,
            static_iterations,
            n_coordinates: nq,
            n_equations: all,
            n_independent: nc,
            dof: nq - nc,
            dropped,
            initial_residual,
            max_position_change: maxdiff(&q, &q_given),
            max_velocity_change: maxdiff(&v, &v_given),
            final_residual: phi.iter().fold(0.0, |m, x| m.max(x.abs())),
        });
        Ok(MechState {
            t: t0,
            q,
            v,
            lambda,
        })
    }

    /// Outputs through the absolute element layer at the equivalent absolute state.
    pub fn evaluate_outputs(
        &mut self,
        sys: &mut System,
        x: &MechState,
        out: &mut [f64],
    ) -> Result<(), ModelError> {
        self.ensure_fast(sys);
        let fast = &self.ws.fast;
        let drivers_only = !self.ws.general_only
            && self.euler.is_empty()
            && sys.spec().outputs.iter().all(|o| match o.quantity {
                super::spec::OutputQuantity::DriverForce { driver } => {
                    fast.drivers[driver].is_some()
                }
                ref q => !super::system::output_needs_dynamics(q),
            });
        if !drivers_only {
            let (q, v) = self.to_absolute(sys, x.t, &x.q, Some(&x.v));
            let xa = MechState {
                t: x.t,
                q,
                v,
                lambda: Vec::new(),
            };
            return sys.evaluate_outputs(&xa, out);
        }
        // The only dynamic outputs are the forces of drivers on tree joints: the joint
        // formulation's inverse dynamics gives them without the absolute saddle point.
        if sys
            .spec()
            .outputs
            .iter()
            .any(|o| super::system::output_needs_dynamics(&o.quantity))
        {
            self.driven_forces(sys, x.t, &x.q, &x.v)?;
        }
        // After the inverse dynamics, which loads other rates.
        self.fill_absolute(sys, x.t, &x.q, Some(&x.v));
        let ws = &mut self.ws;
        let (drivers, tau) = (&ws.fast.drivers, &ws.psi);
        // The snapshot is lent to the output code; its key is kept aside so that a panic
        // there (a bug, caught at the C boundary) cannot leave a stale snapshot marked valid.
        let key = ws.snap_key.take();
        sys.evaluate_outputs_given_drivers((x.t, &ws.abs_q, &ws.abs_v), &mut ws.snap, out, |d| {
            drivers[d].map_or(f64::NAN, |k| tau[k])
        });
        ws.snap_key = key;
        Ok(())
    }

    /// Into `ws.psi` (per dof): the generalized forces `τ = Sᵀ F` the joints need at the
    /// state's accelerations and multipliers (inverse dynamics: the subtree sums of
    /// `I A + V ×* I V` minus the applied and constraint wrenches). Zero on the free dofs (up
    /// to round-off), a driver's force on its driven dof. Models without Euler-parameter
    /// nodes (their normalization force is not a wrench).
    fn driven_forces(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
    ) -> Result<(), ModelError> {
        let (pdd, lambda) = self.accelerations(sys, t, q, v)?;
        let mut psi = std::mem::take(&mut self.ws.psi);
        psi.resize(self.n_q().max(self.n_dof), 0.0);
        // Applied wrenches (every element as a wrench), the recursion at (q, v).
        self.forces_with(sys, t, q, v, &mut psi[..self.n_q()], false);
        // Constraint forces −λ ∇ξ as applied wrenches (`M p̈ = Ψ − Gᵀλ`).
        for (k, &a) in self.active.iter().enumerate() {
            let JRow::Element(r) = self.rows[a] else {
                continue;
            };
            let (c, _, _) = Self::row_coord(sys, r);
            let cw = self.wrenches(sys, c, false);
            for bw in &cw.bodies[..cw.n] {
                self.ws.w[self.body_node[bw.body]] -= lambda[k] * body_wrench(bw);
            }
        }
        let nq = self.n_q();
        let ws = &mut self.ws;
        // Accelerations with p̈ in: A_i = A_λ(i) + S_i ẍ_i on top of the bias accelerations.
        ws.acc_full.resize(self.nodes.len(), Sv::zeros());
        for (i, node) in self.nodes.iter().enumerate() {
            let mut a = match node.parent {
                Parent::Node(p) => ws.acc_full[p] - ws.kin.acc[p],
                _ => Sv::zeros(),
            };
            if let NodeCoord::Free(k) = node.coord {
                for (l, d) in node.dofs().enumerate() {
                    a += ws.kin.s[d] * pdd[k + l];
                }
            }
            ws.acc_full[i] = ws.kin.acc[i] + a;
        }
        rnea::bias_forces(
            &self.nodes,
            &ws.kin.s,
            &ws.kin.vel,
            &ws.acc_full,
            &sys.gravity,
            &ws.ib,
            &ws.w,
            &mut ws.f,
            &mut psi[..nq],
        );
        // `ws.f` now holds the subtree sums.
        psi.iter_mut().for_each(|x| *x = 0.0);
        for (i, node) in self.nodes.iter().enumerate() {
            for d in node.dofs() {
                psi[d] = ws.kin.s[d].dot(&ws.f[i]);
            }
        }
        ws.psi = psi;
        Ok(())
    }

    pub fn event_functions(&mut self, sys: &mut System, t: f64, q: &[f64], g: &mut [f64]) {
        self.fill_absolute(sys, t, q, None);
        let qa = std::mem::take(&mut self.ws.abs_q);
        crate::integrate::events::EventFunctions::event_functions(sys, t, &qa, g);
        self.ws.abs_q = qa;
    }

    /// Angle branches (and, with friction, the normal forces from the absolute reactions) at
    /// an accepted step.
    pub fn accept_step(&mut self, sys: &mut System, t: f64, q: &[f64], v: &[f64]) {
        let friction_acts = self.has_friction
            && sys
                .terms
                .iter()
                .any(|t| matches!(t.law, Law::Friction { mu, .. } if mu != 0.0));
        if !self.ws.general_only && !friction_acts && !sys.has_stick_states() {
            // Only the angle branches to track: from the joint formulation's own poses (no
            // absolute state), the tree joints' angles from their coordinates. With the rates:
            // a co-simulation evaluates its outputs at the step that lands on the
            // communication point, which then finds the whole snapshot made.
            self.ensure_fast(sys);
            self.load(sys, t, q, Rates::Full(v));
            let (slots, x) = (&self.ws.fast.slots, &self.ws.kin.x);
            sys.track_angles_from(&self.ws.snap, |s| slots[s].map(|d| x[d]));
            return;
        }
        let (qa, va) = self.to_absolute(sys, t, q, Some(v));
        // The multipliers feed the friction elements' normal forces only; with every μ zero
        // (the slider-crank's default) the absolute saddle-point solve per accepted step is
        // skipped (it was 46 % of the joint slider-crank's time through the FMU).
        let lambda = if friction_acts {
            sys.accelerations(t, &qa, &va).ok().map(|x| x.1)
        } else {
            None
        };
        crate::integrate::system::StepHooks::accept_step(sys, t, &qa, &va, lambda.as_deref());
    }

    pub fn row_labels(&self, sys: &System) -> Vec<String> {
        self.active
            .iter()
            .map(|&a| self.row_label(sys, a))
            .collect()
    }

    fn row_label(&self, sys: &System, a: usize) -> String {
        match self.rows[a] {
            JRow::Element(r) => sys.rows[r].label.clone(),
            JRow::Norm(k) => {
                let n = &self.nodes[self.euler[k].0];
                let spec = sys.spec();
                match n.joint {
                    Some(j) => format!(
                        "joint '{}' Euler-parameter normalization",
                        spec.joints[j].name
                    ),
                    None => format!(
                        "body '{}' Euler-parameter normalization",
                        spec.bodies[n.body.expect("rotation nodes carry a body")].name
                    ),
                }
            }
        }
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
