//! The joint-coordinate formulation (paper 003, eqs. (1)–(5)):
//!
//! ```text
//!   M(p, u(t)) p̈ = Ψ(p, ṗ, u(t)) − Gᵀ(p, u(t)) λ,     g(p, u(t)) = 0
//! ```
//!
//! `p` holds one coordinate per degree of freedom of the spanning-tree joints
//! ([`tree`]: revolute angle, prismatic travel; fixed joints none). A driver on a tree joint
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

pub mod crba;
mod derivatives;
pub mod kinematics;
pub mod rnea;
mod tires;
pub mod tree;

use super::kin::{eval_coord, CoordVal, Snapshot};
use super::math::e_mat;
use super::spec::{DriverTarget, Initialization};
use super::system::{AssemblyReport, Law, RowKind, RowOwner, System};
use super::ModelError;
use crate::integrate::MechState;
use kinematics::{sv, Kin, Sv};
use nalgebra::{DMatrix, DVector, Matrix6, Vector3, Vector4};
use serde::{Deserialize, Serialize};
use tree::{Node, NodeCoord, Parent};

/// The tree, the constraint rows and the workspace of the joint formulation. Lives inside
/// [`System`] (field `joint`), which dispatches to it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JointModel {
    nodes: Vec<Node>,
    /// Node of each body.
    body_node: Vec<usize>,
    /// Node of each state coordinate.
    free_nodes: Vec<usize>,
    /// Cut joints (indices into `ModelSpec::joints`).
    cut_joints: Vec<usize>,
    /// Constraint rows (indices into the element layer's rows): the cut joints' rows and the
    /// rows of drivers that are not on tree joints.
    rows: Vec<usize>,
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
    i6: Vec<Matrix6<f64>>,
    ic: Vec<Matrix6<f64>>,
    f: Vec<Sv>,
    w: Vec<Sv>,
    /// The poses depend only on the node values and the moving frames' positions: the key
    /// of the poses in `kin` (a BDF residual asks for `M` and `Ψ` at the same state).
    pose_key: Option<(Vec<f64>, Vec<Vector3<f64>>)>,
    /// The inertias depend on the poses and the bodies' mass data (parameters may change it).
    inertia_key: Option<Vec<(f64, nalgebra::Matrix3<f64>)>>,
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

/// A body's share of an element gradient: `∂ξ/∂r`, `∂ξ/∂e`.
#[derive(Clone, Copy)]
struct BodyGrad {
    body: usize,
    g_r: Vector3<f64>,
    g_e: Vector4<f64>,
}

impl JointModel {
    /// The tree of `sys`'s model, or an error naming the element the formulation cannot take.
    pub fn new(sys: &System) -> Result<JointModel, ModelError> {
        let spec = sys.spec();
        let file = spec.source_files.first().cloned().unwrap_or_default();
        let span = tree::spanning_tree(spec).map_err(|u| ModelError::Assembly {
            file: file.clone(),
            message: format!("formulation = \"joint\": {} {}", u.element, u.message),
        })?;
        let mut nodes = span.nodes;
        // Drivers on tree joints eliminate their coordinate.
        let mut eliminated = vec![false; spec.drivers.len()];
        let mut n_free = 0;
        let mut free_nodes = Vec::new();
        for (i, n) in nodes.iter_mut().enumerate() {
            if n.kind == tree::NodeKind::Fixed {
                continue;
            }
            let driver = spec
                .drivers
                .iter()
                .position(|d| matches!(d.target, DriverTarget::JointCoordinate(j) if j == n.joint));
            n.coord = match driver {
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
                None => {
                    free_nodes.push(i);
                    n_free += 1;
                    NodeCoord::Free(n_free - 1)
                }
            };
        }
        let rows: Vec<usize> = (0..sys.rows.len())
            .filter(|&i| match sys.rows[i].owner {
                RowOwner::Joint(j) => span.cut.contains(&j),
                RowOwner::Driver(d) => !eliminated[d],
                RowOwner::Normalization(_) => false,
            })
            .collect();
        let mut body_node = vec![0; spec.bodies.len()];
        for (i, n) in nodes.iter().enumerate() {
            body_node[n.body] = i;
        }
        let layout = sys.layout();
        let mut col_body = vec![0; layout.n_q];
        for b in 0..spec.bodies.len() {
            let o = layout.offsets[b];
            col_body[o..o + 7].iter_mut().for_each(|c| *c = b);
        }
        let has_friction = sys
            .terms
            .iter()
            .any(|t| matches!(t.law, Law::Friction { .. }));
        Ok(JointModel {
            active: (0..rows.len()).collect(),
            nodes,
            body_node,
            free_nodes,
            cut_joints: span.cut,
            rows,
            col_body,
            has_friction,
            ws: Workspace::default(),
        })
    }

    pub fn n_q(&self) -> usize {
        self.free_nodes.len()
    }
    pub fn n_c(&self) -> usize {
        self.active.len()
    }
    /// The tree joints in topological order and the cut joints (indices into the spec's
    /// joints), for reports and tests.
    pub fn tree_joints(&self) -> Vec<usize> {
        self.nodes.iter().map(|n| n.joint).collect()
    }
    pub fn cut_joints(&self) -> &[usize] {
        &self.cut_joints
    }

    /// Run the recursion at `(t, q)` with the given rates and fill the element layer's
    /// snapshot.
    fn load(&mut self, sys: &System, t: f64, q: &[f64], rates: Rates) {
        let (n, nf) = (self.nodes.len(), sys.frame_motions.len());
        let ws = &mut self.ws;
        if ws.kin.x.len() != n || ws.kin.frame.len() != nf {
            ws.kin.resize(n, nf);
            ws.snap.resize(sys.spec().bodies.len(), nf);
            ws.i6.resize(n, Matrix6::zeros());
            ws.ic.resize(n, Matrix6::zeros());
            ws.f.resize(n, Sv::zeros());
            ws.w.resize(n, Sv::zeros());
        }
        for (f, slots) in sys.frame_motions.iter().enumerate() {
            let mut st = [Vector3::zeros(); 3];
            for k in 0..3 {
                let m = sys.motion(slots[k], t);
                for d in 0..3 {
                    st[d][k] = m[d];
                }
            }
            ws.kin.frame[f] = st;
            ws.snap.frame[f] = st;
        }
        if matches!(rates, Rates::None) {
            // No velocities: the moving frames' rates must not leak into `rate`.
            for f in 0..nf {
                ws.snap.frame[f][1] = Vector3::zeros();
                ws.snap.frame[f][2] = Vector3::zeros();
            }
        }
        for (i, node) in self.nodes.iter().enumerate() {
            let (x, xd, xdd) = match node.coord {
                NodeCoord::None => (0.0, 0.0, 0.0),
                NodeCoord::Free(a) => {
                    let xd = match rates {
                        Rates::Full(v) => v[a],
                        _ => 0.0,
                    };
                    (q[a], xd, 0.0)
                }
                NodeCoord::Driven(slot) => {
                    let [u, ud, udd] = sys.motion(slot, t);
                    (u, ud, udd)
                }
            };
            ws.kin.x[i] = x;
            ws.kin.xd[i] = xd;
            ws.kin.xdd[i] = xdd;
        }
        let same_pose = ws.pose_key.as_ref().is_some_and(|(x, fr)| {
            *x == ws.kin.x && fr.iter().zip(&ws.kin.frame).all(|(a, b)| *a == b[0])
        });
        if !same_pose {
            ws.kin.positions(&self.nodes);
            ws.pose_key = Some((
                ws.kin.x.clone(),
                ws.kin.frame.iter().map(|f| f[0]).collect(),
            ));
            ws.inertia_key = None;
        }
        let with_vel = !matches!(rates, Rates::None);
        if with_vel {
            ws.kin.motion(&self.nodes);
        }
        for (i, node) in self.nodes.iter().enumerate() {
            let b = node.body;
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

    /// Body spatial inertias at the current poses.
    fn inertias(&mut self, sys: &System) {
        let same = self.ws.inertia_key.as_ref().is_some_and(|k| {
            self.nodes.iter().zip(k).all(|(n, (m, j))| {
                sys.bodies[n.body].mass == *m && sys.bodies[n.body].inertia == *j
            })
        });
        if same {
            return;
        }
        self.ws.inertia_key = Some(
            self.nodes
                .iter()
                .map(|n| (sys.bodies[n.body].mass, sys.bodies[n.body].inertia))
                .collect(),
        );
        for (i, node) in self.nodes.iter().enumerate() {
            let bd = &sys.bodies[node.body];
            let a = self.ws.kin.rot[i];
            self.ws.i6[i] = kinematics::spatial_inertia(
                bd.mass,
                &self.ws.kin.com[i],
                &(a * bd.inertia * a.transpose()),
            );
        }
    }

    /// Split an element gradient into its bodies' `(∂/∂r, ∂/∂e)` parts.
    fn body_grads(&self, sys: &System, cv: &CoordVal, out: &mut [BodyGrad; 4]) -> usize {
        let layout = sys.layout();
        let mut n = 0;
        for (l, g) in cv.columns() {
            let b = self.col_body[g];
            let k = match out[..n].iter().position(|bg| bg.body == b) {
                Some(k) => k,
                None => {
                    out[n] = BodyGrad {
                        body: b,
                        g_r: Vector3::zeros(),
                        g_e: Vector4::zeros(),
                    };
                    n += 1;
                    n - 1
                }
            };
            let c = g - layout.offsets[b];
            if c < 3 {
                out[k].g_r[c] += cv.grad[l];
            } else {
                out[k].g_e[c - 3] += cv.grad[l];
            }
        }
        n
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
                jac[(k, a)] += self.ws.kin.s[i].dot(w);
            }
            node = self.nodes[i].parent;
        }
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

    fn eval(&self, sys: &System, c: &super::kin::Coord, with_vel: bool) -> CoordVal {
        let v: Option<&[f64]> = if with_vel { Some(&[]) } else { None };
        eval_coord(sys.layout(), &self.ws.snap, c, &sys.angle_refs, v, None)
    }

    // ----- the equations -----

    pub fn mass_matrix(&mut self, sys: &System, t: f64, q: &[f64], m: &mut DMatrix<f64>) {
        self.load(sys, t, q, Rates::None);
        self.inertias(sys);
        crba::mass_matrix(&self.nodes, &self.ws.kin.s, &self.ws.i6, &mut self.ws.ic, m);
    }

    pub fn forces(&mut self, sys: &System, t: f64, q: &[f64], v: &[f64], f: &mut [f64]) {
        self.load(sys, t, q, Rates::Full(v));
        self.inertias(sys);
        self.ws.w.iter_mut().for_each(|w| *w = Sv::zeros());
        let mut bgs = [BodyGrad {
            body: 0,
            g_r: Vector3::zeros(),
            g_e: Vector4::zeros(),
        }; 4];
        for (k, term) in sys.terms.iter().enumerate() {
            let cv = self.eval(sys, &term.coord, true);
            // With its preload from equilibrium, if the element has `static_preload`.
            let (force, _, _) = sys.term_law(k, cv.val, cv.rate, t);
            if force == 0.0 {
                continue;
            }
            let nb = self.body_grads(sys, &cv, &mut bgs);
            for bg in &bgs[..nb] {
                let w = self.wrench(bg);
                self.ws.w[self.body_node[bg.body]] += force * w;
            }
        }
        self.add_tire_wrenches(sys, t);
        let ws = &mut self.ws;
        rnea::bias_forces(
            &self.nodes,
            &ws.kin.s,
            &ws.kin.vel,
            &ws.kin.acc,
            &sys.gravity,
            &ws.i6,
            &ws.w,
            &mut ws.f,
            f,
        );
    }

    pub fn constraints(&mut self, sys: &System, t: f64, q: &[f64], phi: &mut [f64]) {
        self.load(sys, t, q, Rates::None);
        for (k, &a) in self.active.iter().enumerate() {
            let (c, offset, motion) = Self::row_coord(sys, self.rows[a]);
            let u = motion.map_or(0.0, |m| sys.motion(m, t)[0]);
            phi[k] = self.eval(sys, c, false).val - offset - u;
        }
    }

    pub fn constraint_jacobian(&mut self, sys: &System, t: f64, q: &[f64], jac: &mut DMatrix<f64>) {
        self.load(sys, t, q, Rates::None);
        jac.fill(0.0);
        let mut bgs = [BodyGrad {
            body: 0,
            g_r: Vector3::zeros(),
            g_e: Vector4::zeros(),
        }; 4];
        for (k, &a) in self.active.iter().enumerate() {
            let (c, _, _) = Self::row_coord(sys, self.rows[a]);
            let cv = self.eval(sys, c, false);
            let nb = self.body_grads(sys, &cv, &mut bgs);
            for bg in &bgs[..nb] {
                let w = self.wrench(bg);
                self.project_row(bg.body, &w, k, jac);
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
        self.load(sys, t, q, Rates::Rheonomic);
        for (k, &a) in self.active.iter().enumerate() {
            let (c, _, motion) = Self::row_coord(sys, self.rows[a]);
            let du = motion.map_or(0.0, |m| sys.motion(m, t)[1]);
            phi_t[k] = self.eval(sys, c, true).rate - du;
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
        self.load(sys, t, q, Rates::Full(v));
        let mut bgs = [BodyGrad {
            body: 0,
            g_r: Vector3::zeros(),
            g_e: Vector4::zeros(),
        }; 4];
        for (k, &a) in self.active.iter().enumerate() {
            let (c, _, motion) = Self::row_coord(sys, self.rows[a]);
            let ddu = motion.map_or(0.0, |m| sys.motion(m, t)[2]);
            let cv = self.eval(sys, c, true);
            // ξ̈ = ∇ξ·q̈_abs + conv, q̈_abs = J p̈ + (the bodies' accelerations at p̈ = 0).
            let nb = self.body_grads(sys, &cv, &mut bgs);
            let mut bias = 0.0;
            for bg in &bgs[..nb] {
                let i = self.body_node[bg.body];
                let (wd, ac) = self.ws.kin.body_acceleration(i);
                let (w, _) = self.ws.kin.body_velocity(i);
                let e = self.ws.kin.e[i];
                let ed = self.ws.snap.pd[bg.body];
                let edd = 0.5 * (e_mat(&ed).transpose() * w + e_mat(&e).transpose() * wd);
                bias += bg.g_r.dot(&ac) + bg.g_e.dot(&edd);
            }
            gamma[k] = -(cv.conv + bias) + ddu;
        }
    }

    /// `[M Gᵀ; G 0] [p̈; λ] = [Ψ; γ]`, dense.
    pub fn accelerations(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
    ) -> Result<(Vec<f64>, Vec<f64>), ModelError> {
        let (nq, nc) = (self.n_q(), self.n_c());
        let mut m = DMatrix::zeros(nq, nq);
        let mut g = DMatrix::zeros(nc, nq);
        let mut rhs = vec![0.0; nq + nc];
        self.mass_matrix(sys, t, q, &mut m);
        self.constraint_jacobian(sys, t, q, &mut g);
        self.forces(sys, t, q, v, &mut rhs[..nq]);
        self.acceleration_rhs(sys, t, q, v, &mut rhs[nq..]);
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
        Ok((
            x.rows(0, nq).iter().copied().collect(),
            x.rows(nq, nc).iter().copied().collect(),
        ))
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
        let n = self.n_q();
        let nn = self.nodes.len();
        let (mut dv, mut da, mut df) = (
            vec![Sv::zeros(); nn],
            vec![Sv::zeros(); nn],
            vec![Sv::zeros(); nn],
        );
        let ws = &self.ws;
        rnea::bias_velocity_jacobian(
            &self.nodes,
            &ws.kin.s,
            &ws.kin.vel,
            &ws.kin.xd,
            &ws.i6,
            &mut dv,
            &mut da,
            &mut df,
            out,
        );
        let mut bgs = [BodyGrad {
            body: 0,
            g_r: Vector3::zeros(),
            g_e: Vector4::zeros(),
        }; 4];
        let mut g = DVector::zeros(n);
        for term in &sys.terms {
            let cv = self.eval(sys, &term.coord, true);
            let (_, _, f_rate) = sys.law(&term.law, cv.val, cv.rate, t);
            if f_rate == 0.0 {
                continue;
            }
            g.fill(0.0);
            let nb = self.body_grads(sys, &cv, &mut bgs);
            for bg in &bgs[..nb] {
                let w = self.wrench(bg);
                let mut node = Parent::Node(self.body_node[bg.body]);
                while let Parent::Node(i) = node {
                    if let NodeCoord::Free(a) = self.nodes[i].coord {
                        g[a] += self.ws.kin.s[i].dot(&w);
                    }
                    node = self.nodes[i].parent;
                }
            }
            out.ger(f_rate, &g, &g, 1.0);
        }
        self.add_tire_velocity_jacobian(sys, t, out);
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
        self.load(sys, t, q, v.map_or(Rates::None, Rates::Full));
        let layout = sys.layout();
        let (mut qa, mut va) = (vec![0.0; layout.n_q], vec![0.0; layout.n_q]);
        let s = &self.ws.snap;
        for b in 0..layout.offsets.len() {
            let o = layout.offsets[b];
            qa[o..o + 3].copy_from_slice(s.r[b].as_slice());
            qa[o + 3..o + 7].copy_from_slice(s.p[b].as_slice());
            va[o..o + 3].copy_from_slice(s.rd[b].as_slice());
            va[o + 3..o + 7].copy_from_slice(s.pd[b].as_slice());
        }
        (qa, va)
    }

    /// Joint coordinates and rates of an absolute state (tree joints only).
    fn coordinates_of(&self, sys: &System, t: f64, qa: &[f64], va: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let layout = sys.layout();
        let body = |b: usize| {
            let o = layout.offsets[b];
            let e = Vector4::new(qa[o + 3], qa[o + 4], qa[o + 5], qa[o + 6]);
            let ed = Vector4::new(va[o + 3], va[o + 4], va[o + 5], va[o + 6]);
            let r = Vector3::new(qa[o], qa[o + 1], qa[o + 2]);
            let rd = Vector3::new(va[o], va[o + 1], va[o + 2]);
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
        let (mut p, mut pd) = (vec![0.0; self.n_q()], vec![0.0; self.n_q()]);
        for n in &self.nodes {
            let NodeCoord::Free(a) = n.coord else {
                continue;
            };
            // Parent: rotation, position, angular velocity, velocity of the body origin.
            let (ap, rp, wp, vp) = match n.parent {
                Parent::Ground => (
                    nalgebra::Matrix3::identity(),
                    Vector3::zeros(),
                    Vector3::zeros(),
                    Vector3::zeros(),
                ),
                Parent::Frame(f) => {
                    let (x, xd) = frame(f);
                    (nalgebra::Matrix3::identity(), x, Vector3::zeros(), xd)
                }
                Parent::Node(k) => body(self.nodes[k].body),
            };
            let (ac, rc, wc, vc) = body(n.body);
            let (apf, acf) = (ap * n.parent_frame.axes, ac * n.child_frame.axes);
            let o_pf = rp + ap * n.parent_frame.origin;
            let o_cf = rc + ac * n.child_frame.origin;
            let z = apf.column(2).into_owned();
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
                    let v_pf = vp + wp.cross(&(o_pf - rp));
                    let v_cf = vc + wc.cross(&(o_cf - rc));
                    p[a] = n.sigma * z.dot(&(o_cf - o_pf));
                    pd[a] = n.sigma * z.dot(&(v_cf - v_pf));
                }
                tree::NodeKind::Fixed => {}
            }
        }
        (p, pd)
    }

    /// Consistent initial state: the absolute assembly (or static equilibrium) of the same
    /// model gives the bodies' poses; the tree coordinates are read off them, polished by
    /// Gauss–Newton on the loop constraints; redundant loop rows are dropped; velocities
    /// projected.
    pub fn initial_state(&mut self, sys: &mut System, t0: f64) -> Result<MechState, ModelError> {
        let xa = super::assembly::initial_state(sys, t0)?;
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
        let dropped: Vec<String> = drop
            .iter()
            .map(|&i| sys.rows[self.rows[i]].label.clone())
            .collect();
        self.active = keep;
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
        let (qa, va) = self.to_absolute(sys, x.t, &x.q, Some(&x.v));
        let xa = MechState {
            t: x.t,
            q: qa,
            v: va,
            lambda: Vec::new(),
        };
        sys.evaluate_outputs(&xa, out)
    }

    pub fn event_functions(&mut self, sys: &mut System, t: f64, q: &[f64], g: &mut [f64]) {
        let (qa, _) = self.to_absolute(sys, t, q, None);
        crate::integrate::events::EventFunctions::event_functions(sys, t, &qa, g);
    }

    /// Angle branches (and, with friction, the normal forces from the absolute reactions) at
    /// an accepted step.
    pub fn accept_step(&mut self, sys: &mut System, t: f64, q: &[f64], v: &[f64]) {
        let (qa, va) = self.to_absolute(sys, t, q, Some(v));
        let lambda = if self.has_friction {
            sys.accelerations(t, &qa, &va).ok().map(|x| x.1)
        } else {
            None
        };
        crate::integrate::system::StepHooks::accept_step(sys, t, &qa, &va, lambda.as_deref());
    }

    pub fn row_labels(&self, sys: &System) -> Vec<String> {
        self.active
            .iter()
            .map(|&a| sys.rows[self.rows[a]].label.clone())
            .collect()
    }
}
