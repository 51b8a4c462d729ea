//! The multibody system in absolute coordinates: `q = (r, p)` per rigid body (centre of mass
//! and Euler parameters, 7 coordinates with the normalization constraint `½(pᵀp − 1) = 0`),
//! `q = r` per particle. Implements every trait of `integrate::system`.
//!
//! Rigid-body inertia with Euler parameters (Haug, ch. 11): `M_p = 4 Gᵀ J' G`, applied torque
//! `2 Gᵀ n'`, gyroscopic force `−2 Gᵀ (ω' × J' ω')`, `ω' = 2 G ṗ`. `M_p` is singular along
//! `p`; we add `c p pᵀ` (`c = 4 tr(J')/3`) so that `M` itself is regular (methods that need
//! `M⁻¹` work). This changes only the multiplier of the normalization constraint, not the
//! motion, because `pᵀ p̈ = −ṗᵀ ṗ` is fixed by that constraint.

mod contact_friction;
mod output_derivs;
mod reactions;
mod sparse;
mod tires;
pub use output_derivs::InputDerivatives;

use super::inputs::InputSignals;
use super::kin::{
    eval_coord, eval_coord_need, raw_angle, Coord, CoordVal, LMat, Layout, Need, QDef, Snapshot,
};
use super::math::{g_mat, skew, wrap_pi};
use super::motion::MotionSlot;
use super::spec::*;
use super::ModelError;
use crate::integrate::sparse::SparseStructure;
use crate::integrate::system::{
    ConstraintHessians, Excitations, ForceJacobians, Mechanical, StepHooks,
};
use crate::integrate::MechState;
use nalgebra::{DMatrix, DVector, Matrix3, Matrix4, Vector3, Vector4};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What assembly found: sizes, redundant rows, how far the given state was from consistent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssemblyReport {
    pub n_coordinates: usize,
    /// Constraint equations in the model (normalization rows included).
    pub n_equations: usize,
    /// Independent equations kept.
    pub n_independent: usize,
    /// Degrees of freedom (coordinates minus independent equations; drivers count as
    /// equations, so a fully driven mechanism has 0).
    pub dof: usize,
    /// Redundant rows dropped, by label.
    pub dropped: Vec<String>,
    /// Largest constraint residual of the state given in the model file.
    pub initial_residual: f64,
    /// Largest position change made by assembly.
    pub max_position_change: f64,
    /// Largest velocity change made by projection.
    pub max_velocity_change: f64,
    /// Residual after assembly (positions).
    pub final_residual: f64,
    /// Per body (file order): how far initialization moved it from the file's position,
    /// `(name, translation of the centre in m, rotation angle in rad)`.
    pub body_moves: Vec<(String, f64, f64)>,
    /// Static equilibrium iterations (Newton and relaxation steps), when it was solved.
    pub static_iterations: Option<(usize, usize)>,
}

/// Who owns a constraint row (for messages, reactions and outputs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RowOwner {
    Normalization(usize),
    Joint(usize),
    Driver(usize),
}

/// One scalar constraint `φ = ξ(q, t) − offset − u(t)`.
// Built once per model; most rows are `Coord`, so boxing would only add indirection.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) enum RowKind {
    Normalize {
        col: usize,
    },
    Coord {
        coord: Coord,
        offset: f64,
        motion: Option<usize>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Row {
    pub(super) kind: RowKind,
    pub(super) owner: RowOwner,
    pub(super) label: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct BodyData {
    pub(super) mass: f64,
    pub(super) inertia: Matrix3<f64>,
    reg: f64,
}

/// Scalar force laws `F(ξ, ξ̇, t)`; the generalized force is `F ∇ξ`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) enum Law {
    /// Tension-positive spring along a length: `F = −(k(ξ − l0) + c ξ̇ + preload + act)`.
    Spring {
        law: SpringLaw,
        free: f64,
        actuator: Option<usize>,
        /// A damper curve `f_d(ξ̇)` in place of `c ξ̇` (`damper_table`).
        damper: Option<super::curves::Curve>,
    },
    /// Torque `−k(θ − θ0) − c θ̇ + act`; a spring curve `f(θ − θ0)` in place of `k(θ − θ0)`,
    /// a damper curve `f_d(θ̇)` in place of `c θ̇` (`table`, `damper_table`).
    Torsion {
        k: f64,
        c: f64,
        free: f64,
        actuator: Option<usize>,
        spring: Option<super::curves::Curve>,
        damper: Option<super::curves::Curve>,
    },
    /// Linear spring-damper on a coordinate around its initial value `rest`:
    /// `−k(ξ − rest) − c ξ̇ + preload` (bushing components); a curve `f(ξ − rest)` in place of
    /// `k(ξ − rest)` on a component with a table, a damper curve `f_d(ξ̇)` in place of `c ξ̇`
    /// on one with a damper table.
    Linear {
        k: f64,
        c: f64,
        rest: f64,
        preload: f64,
        curve: Option<super::curves::Curve>,
        damper: Option<super::curves::Curve>,
    },
    /// Penalty contact on a separation coordinate ξ with penetration `δ = gap − ξ`.
    Contact {
        gap: f64,
        hertz: bool,
        k: f64,
        c: f64,
    },
    /// Regularized Coulomb friction on a joint coordinate: `−μ r N tanh(ξ̇/v)` (`r` = 1 for a
    /// prismatic joint), with the stiction state in slot `.1` of `System::stick` if any
    /// (`mbs::friction`).
    Friction {
        mu: f64,
        v_reg: f64,
        joint: usize,
        radius: f64,
        stiction: Option<(super::friction::Stiction, usize)>,
    },
    /// End stop on a joint coordinate (`mbs::stops`).
    Stop(super::stops::Stop),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) enum SpringLaw {
    Linear { k: f64, c: f64, preload: f64 },
    Poly { coeffs: Vec<f64>, c: f64 },
    Table { curve: super::curves::Curve, c: f64 },
}

/// One term of a force element: a scalar coordinate and its law.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct ForceTerm {
    pub(super) coord: Coord,
    pub(super) law: Law,
    /// Index of the force element in the spec.
    pub(super) element: usize,
    /// Constant generalized force along the coordinate from `static_preload` (0 otherwise),
    /// and the coordinate's value where it was computed (energy reference).
    #[serde(default)]
    pub(super) preset: f64,
    #[serde(default)]
    preset_ref: f64,
}

fn no_time() -> f64 {
    f64::NAN
}

/// A process-wide unique id for a set of body data ([`System::bodies_id`]).
fn fresh_bodies_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The multibody system. Plain data: `Clone + Serialize` (FMU state copies it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct System {
    pub(super) spec: Arc<ModelSpec>,
    pub(super) params: Vec<f64>,
    pub(super) inputs: InputSignals,
    pub(super) layout: Layout,
    pub(super) bodies: Vec<BodyData>,
    /// Names the contents of `bodies`: a fresh id at every build and every deserialization,
    /// kept by a clone (whose bodies are the same), so that caches of values computed from
    /// the mass data compare one number instead of the data.
    #[serde(skip, default = "fresh_bodies_id")]
    pub(super) bodies_id: u64,
    pub(super) gravity: Vector3<f64>,
    pub(super) motions: Vec<MotionSlot>,
    /// The time at which built-in motions are evaluated by their right limits (where the
    /// state has been carried past a ramp's start or a smooth step's ends); elsewhere at a
    /// breakpoint the left limit applies (the step that lands on it). See
    /// [`System::set_motion_right_limit_at`]. Not part of a saved state: the co-simulation
    /// layer sets it again before it continues from a state.
    #[serde(skip, default = "no_time")]
    motion_right_at: f64,
    /// Motion slots of the moving frames' x, y, z.
    pub(super) frame_motions: Vec<[usize; 3]>,
    /// The time-varying motion slots: excitation `i` is slot `excitation_slots[i]`.
    excitation_slots: Vec<usize>,
    pub(super) rows: Vec<Row>,
    /// Rows kept after removing redundant ones (indices into `rows`).
    active: Vec<usize>,
    /// Rows dropped as redundant, reported once.
    pub dropped: Vec<String>,
    /// What the last assembly did (for `mbsfmu check` and the FMU log).
    pub report: Option<AssemblyReport>,
    pub(super) terms: Vec<ForceTerm>,
    /// Tire elements (`mbs::tire`): forces on their wheel bodies outside the scalar terms.
    #[serde(default)]
    pub(super) tires: Vec<super::tire::Tire>,
    /// Angle branch references, one per angle slot.
    pub(super) angle_refs: Vec<f64>,
    /// The references at the model's initial configuration (rest angles are measured there,
    /// whatever the current branch).
    angle_refs0: Vec<f64>,
    /// The angle coordinates by slot (to update references at accepted steps).
    pub(super) angle_coords: Vec<Coord>,
    /// Per joint: the revolute angle slot or the prismatic travel coordinate.
    pub(super) joint_coords: Vec<Option<Coord>>,
    /// Per output: its angle coordinate (rotation outputs only).
    output_coords: Vec<Option<Coord>>,
    /// Joint normal reaction per joint, from the last accepted step (friction).
    joint_normal: Vec<f64>,
    /// Stick states of the friction elements with stiction (`mbs::friction`), by slot; changed
    /// only at accepted steps.
    #[serde(default)]
    stick: Vec<super::friction::StickState>,
    /// Their values at the start of the step being located (`StepHooks::checkpoint`).
    #[serde(skip)]
    stick_backup: Vec<super::friction::StickState>,
    /// A stick state changed mode at the last accepted step.
    #[serde(skip)]
    law_switched: bool,
    /// Contacts with friction (`mbs::contact_friction`) and the stick states of those with
    /// stiction, by slot (changed only at accepted steps), with their checkpoint.
    #[serde(default)]
    pub(super) contact_friction: Vec<super::contact_friction::ContactFriction>,
    #[serde(default)]
    contact_stick: Vec<super::contact_friction::ContactStick>,
    #[serde(skip)]
    contact_stick_backup: Vec<super::contact_friction::ContactStick>,
    /// Per force term: preload from equilibrium and its reference coordinate value (empty when
    /// no element has `static_preload`).
    #[serde(default)]
    presets: Vec<(f64, f64)>,
    pub(super) q0: Vec<f64>,
    pub(super) v0: Vec<f64>,
    snap: Snapshot,
    #[serde(skip)]
    scratch_lambda: Vec<f64>,
    /// Sparse saddle-point workspace of [`System::accelerations`] on large models (patterns
    /// analysed once; rebuilt when the active rows change or after deserialization).
    #[serde(skip)]
    saddle_cache: Option<Box<crate::integrate::sparse::SparseSaddle>>,
    /// The joint-coordinate formulation (`[model] formulation = "joint"`): when present, every
    /// integrator-facing method answers in joint coordinates (`mbs::joint`), and the fields
    /// above are its element layer, evaluated on the tree's body kinematics.
    pub(super) joint: Option<Box<super::joint::JointModel>>,
}

fn frame_vec(body: BodyRef, f: &LocalFrame, k: usize) -> QDef {
    QDef::Vector(body, f.axes.column(k).into_owned())
}

fn diff(b1: BodyRef, f1: &LocalFrame, b2: BodyRef, f2: &LocalFrame) -> QDef {
    QDef::Diff {
        from: (b1, f1.origin),
        to: (b2, f2.origin),
    }
}

fn unit(k: usize) -> Vector3<f64> {
    let mut e = Vector3::zeros();
    e[k] = 1.0;
    e
}

impl System {
    /// Build the system with the model's default parameter values.
    pub fn new(spec: Arc<ModelSpec>) -> Result<System, ModelError> {
        let params = spec.default_parameters();
        Self::with_parameters(spec, params)
    }

    pub fn with_parameters(spec: Arc<ModelSpec>, params: Vec<f64>) -> Result<System, ModelError> {
        let kinds: Vec<BodyKind> = spec.bodies.iter().map(|b| b.kind).collect();
        let layout = Layout::new(&kinds);
        let starts: Vec<f64> = spec.inputs.iter().map(|i| i.start).collect();
        let mut sys = System {
            inputs: InputSignals::new(&starts),
            layout,
            params,
            bodies: Vec::new(),
            bodies_id: 0,
            gravity: Vector3::zeros(),
            motions: Vec::new(),
            motion_right_at: f64::NAN,
            frame_motions: Vec::new(),
            excitation_slots: Vec::new(),
            rows: Vec::new(),
            active: Vec::new(),
            dropped: Vec::new(),
            report: None,
            terms: Vec::new(),
            tires: Vec::new(),
            angle_refs: Vec::new(),
            angle_refs0: Vec::new(),
            angle_coords: Vec::new(),
            joint_coords: Vec::new(),
            output_coords: Vec::new(),
            joint_normal: vec![0.0; spec.joints.len()],
            stick: Vec::new(),
            stick_backup: Vec::new(),
            law_switched: false,
            contact_friction: Vec::new(),
            contact_stick: Vec::new(),
            contact_stick_backup: Vec::new(),
            presets: Vec::new(),
            q0: Vec::new(),
            v0: Vec::new(),
            snap: Snapshot::default(),
            scratch_lambda: Vec::new(),
            saddle_cache: None,
            joint: None,
            spec,
        };
        sys.snap
            .resize(sys.spec.bodies.len(), sys.spec.frames.len());
        sys.initial_coordinates();
        sys.build()?;
        sys.active = (0..sys.rows.len()).collect();
        if sys.spec.formulation == Formulation::Joint {
            let jm = super::joint::JointModel::new(&sys)?;
            sys.joint = Some(Box::new(jm));
        }
        Ok(sys)
    }

    /// Run `f` on the joint formulation; inside, `sys` is the element layer alone (its
    /// methods answer in absolute coordinates).
    fn with_joint<R>(
        &mut self,
        f: impl FnOnce(&mut super::joint::JointModel, &mut System) -> R,
    ) -> R {
        let mut j = self.joint.take().expect("joint formulation present");
        let r = f(&mut j, self);
        self.joint = Some(j);
        r
    }

    /// The joint formulation, when the model selected it.
    pub fn joint_model(&self) -> Option<&super::joint::JointModel> {
        self.joint.as_deref()
    }

    /// The joint formulation's fast paths (force elements, angle branches and driver forces
    /// read off the tree joints' own coordinates) on (the default) or off (the general element
    /// path throughout), for tests that compare the two. No effect in the absolute formulation.
    pub fn set_joint_fast_paths(&mut self, on: bool) {
        if let Some(j) = self.joint.as_mut() {
            j.set_fast_paths(on);
        }
    }

    /// Whether the joint formulation's tree is planar (`M` and `Ψ` by the planar recursion;
    /// `None` in the absolute formulation or before the first evaluation); for tests.
    pub fn joint_planar_tree(&self) -> Option<bool> {
        self.joint.as_ref().and_then(|j| j.planar_tree())
    }

    /// How many poses the joint formulation's planar-first load has made (a planar tree's
    /// `M` and `Ψ` straight from the coordinates; 0 in the absolute formulation); for tests.
    pub fn joint_planar_first_poses(&self) -> u64 {
        self.joint.as_ref().map_or(0, |j| j.planar_first_poses())
    }

    /// How many force terms the joint formulation evaluates on a tree joint's own coordinate
    /// (0 in the absolute formulation); for tests that the fast path is taken.
    pub fn joint_tree_coordinate_terms(&mut self) -> usize {
        if self.joint.is_none() {
            return 0;
        }
        self.with_joint(|j, s| j.tree_coordinate_terms(s))
    }

    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    pub fn parameters(&self) -> &[f64] {
        &self.params
    }
    pub fn inputs(&self) -> &InputSignals {
        &self.inputs
    }
    pub fn inputs_mut(&mut self) -> &mut InputSignals {
        &mut self.inputs
    }

    /// Change a parameter; element data are rebuilt (the state is kept). Checks physical
    /// validity of the values that depend on it.
    pub fn set_parameter(&mut self, i: usize, value: f64) -> Result<(), ModelError> {
        let name = &self
            .spec
            .parameters
            .get(i)
            .ok_or_else(|| self.err(format!("no parameter with index {i}")))?
            .name;
        if !value.is_finite() {
            return Err(self.err(format!(
                "parameter '{name}' = {value} is not a finite number"
            )));
        }
        if self.spec.parameters[i].calculated {
            return Err(self.err(format!(
                "parameter '{name}' is computed from other parameters (its value is an expression): set those instead"
            )));
        }
        let old = self.params[i];
        self.params[i] = value;
        if let Err(e) = self.build() {
            self.params[i] = old;
            self.build().expect("previous parameter values were valid");
            return Err(e);
        }
        Ok(())
    }

    pub(super) fn err(&self, message: String) -> ModelError {
        ModelError::Assembly {
            file: self.spec.source_files.first().cloned().unwrap_or_default(),
            message,
        }
    }

    fn initial_coordinates(&mut self) {
        let n = self.layout.n_q;
        let (mut q, mut v) = (vec![0.0; n], vec![0.0; n]);
        for (b, body) in self.spec.bodies.iter().enumerate() {
            let o = self.layout.offsets[b];
            q[o..o + 3].copy_from_slice(body.position.as_slice());
            v[o..o + 3].copy_from_slice(body.velocity.as_slice());
            if self.layout.is_rigid(b) {
                let uq = body.orientation.quaternion();
                let p = Vector4::new(uq.w, uq.i, uq.j, uq.k);
                // ṗ = ½ E(p)ᵀ ω for unit p.
                let pd = 0.5 * super::math::e_mat(&p).transpose() * body.angular_velocity;
                q[o + 3..o + 7].copy_from_slice(p.as_slice());
                v[o + 3..o + 7].copy_from_slice(pd.as_slice());
            }
        }
        self.q0 = q;
        self.v0 = v;
    }

    /// (Re)build element data from the spec and the current parameters.
    fn build(&mut self) -> Result<(), ModelError> {
        let spec = self.spec.clone();
        let pv = |s: &Scalar| s.eval(&self.params);
        // Bodies.
        let mut bodies = Vec::with_capacity(spec.bodies.len());
        for b in &spec.bodies {
            let m = pv(&b.mass);
            if m.is_nan() || m <= 0.0 || !m.is_finite() {
                return Err(self.err(format!("body '{}': mass {m} must be positive", b.name)));
            }
            let [xx, yy, zz, xy, xz, yz] = b.inertia.map(|s| pv(&s));
            let j = Matrix3::new(xx, xy, xz, xy, yy, yz, xz, yz, zz);
            if b.kind == BodyKind::Rigid {
                let ok = j.symmetric_eigenvalues().iter().all(|&e| e > 0.0);
                if !ok {
                    return Err(self.err(format!(
                        "body '{}': inertia tensor is not positive definite",
                        b.name
                    )));
                }
            }
            bodies.push(BodyData {
                mass: m,
                inertia: j,
                reg: 4.0 * j.trace() / 3.0,
            });
        }
        let gravity = Vector3::new(
            pv(&spec.gravity[0]),
            pv(&spec.gravity[1]),
            pv(&spec.gravity[2]),
        );
        // Motion slots: keep offsets across rebuilds.
        let old_offsets: Vec<(f64, [f64; 2])> = self
            .motions
            .iter()
            .map(|m| (m.offset, m.rate_offsets))
            .collect();
        let mut motions: Vec<MotionSlot> = Vec::new();
        let mut add_motion = |m: &Motion| {
            motions.push(MotionSlot::new(m));
            motions.len() - 1
        };
        let frame_motions: Vec<[usize; 3]> = spec
            .frames
            .iter()
            .map(|f| [0, 1, 2].map(|k| add_motion(&f.position[k])))
            .collect();
        // Angle slots.
        let mut angle_coords: Vec<Coord> = Vec::new();
        let mut new_angle = |x1: QDef, y1: QDef, x2: QDef| {
            let c = Coord::Angle {
                x1,
                y1,
                x2,
                slot: angle_coords.len(),
            };
            angle_coords.push(c);
            c
        };
        // Constraint rows.
        let mut rows = Vec::new();
        for (b, _) in spec.bodies.iter().enumerate() {
            if self.layout.is_rigid(b) {
                rows.push(Row {
                    kind: RowKind::Normalize {
                        col: self.layout.offsets[b] + 3,
                    },
                    owner: RowOwner::Normalization(b),
                    label: format!(
                        "body '{}' Euler-parameter normalization",
                        spec.bodies[b].name
                    ),
                });
            }
        }
        let mut joint_coords = Vec::with_capacity(spec.joints.len());
        for (ji, j) in spec.joints.iter().enumerate() {
            let (b1, b2, f1, f2) = (j.body1, j.body2, &j.frame1, &j.frame2);
            let d = diff(b1, f1, b2, f2);
            let (x1, y1, z1) = (
                frame_vec(b1, f1, 0),
                frame_vec(b1, f1, 1),
                frame_vec(b1, f1, 2),
            );
            let (x2, y2, z2) = (
                frame_vec(b2, f2, 0),
                frame_vec(b2, f2, 1),
                frame_vec(b2, f2, 2),
            );
            let g = |k: usize| QDef::Vector(BodyRef::Ground, unit(k));
            let mut coords: Vec<(Coord, f64, &str)> = Vec::new();
            let spherical = |c: &mut Vec<(Coord, f64, &str)>| {
                c.push((Coord::Dot(g(0), d), 0.0, "x position"));
                c.push((Coord::Dot(g(1), d), 0.0, "y position"));
                c.push((Coord::Dot(g(2), d), 0.0, "z position"));
            };
            let axis_parallel = |c: &mut Vec<(Coord, f64, &str)>| {
                c.push((Coord::Dot(x1, z2), 0.0, "axis alignment (x1·z2)"));
                c.push((Coord::Dot(y1, z2), 0.0, "axis alignment (y1·z2)"));
            };
            let mut jc = None;
            match j.kind {
                JointKind::Spherical => spherical(&mut coords),
                JointKind::Revolute => {
                    spherical(&mut coords);
                    axis_parallel(&mut coords);
                    jc = Some(new_angle(x1, y1, x2));
                }
                JointKind::Universal => {
                    spherical(&mut coords);
                    coords.push((Coord::Dot(z1, x2), 0.0, "cross axes perpendicular (z1·x2)"));
                }
                JointKind::Cylindrical | JointKind::Prismatic => {
                    axis_parallel(&mut coords);
                    coords.push((Coord::Dot(x1, d), 0.0, "on axis (x1·d)"));
                    coords.push((Coord::Dot(y1, d), 0.0, "on axis (y1·d)"));
                    if j.kind == JointKind::Prismatic {
                        coords.push((Coord::Dot(x1, y2), 0.0, "no rotation (x1·y2)"));
                    }
                    jc = Some(Coord::Dot(z1, d));
                }
                JointKind::Fixed => {
                    spherical(&mut coords);
                    axis_parallel(&mut coords);
                    coords.push((Coord::Dot(x1, y2), 0.0, "no rotation (x1·y2)"));
                }
                JointKind::Distance => {
                    let l = j.length.map(|s| pv(&s)).unwrap_or(0.0);
                    if l.is_nan() || l <= 0.0 {
                        return Err(self.err(format!(
                            "joint '{}': distance length {l} must be positive",
                            j.name
                        )));
                    }
                    coords.push((Coord::HalfSq(d), 0.5 * l * l, "rod length"));
                }
                JointKind::Planar => {
                    coords.push((Coord::Dot(z1, d), 0.0, "in plane (z1·d)"));
                    let rigid2 = matches!(b2, BodyRef::Body(b) if self.layout.is_rigid(b));
                    if rigid2 {
                        coords.push((
                            Coord::Dot(z1, x2),
                            0.0,
                            "rotation about normal only (z1·x2)",
                        ));
                        coords.push((
                            Coord::Dot(z1, y2),
                            0.0,
                            "rotation about normal only (z1·y2)",
                        ));
                    }
                }
            }
            for (coord, offset, what) in coords {
                rows.push(Row {
                    kind: RowKind::Coord {
                        coord,
                        offset,
                        motion: None,
                    },
                    owner: RowOwner::Joint(ji),
                    label: format!("joint '{}' {}", j.name, what),
                });
            }
            joint_coords.push(jc);
        }
        for (di, dr) in spec.drivers.iter().enumerate() {
            let slot = add_motion(&dr.motion);
            let coord = match &dr.target {
                DriverTarget::JointCoordinate(j) => joint_coords[*j].ok_or_else(|| {
                    self.err(format!(
                        "driver '{}': joint '{}' has no coordinate to drive",
                        dr.name, spec.joints[*j].name
                    ))
                })?,
                DriverTarget::PointComponent {
                    body,
                    point,
                    component,
                } => Coord::Dot(
                    QDef::Vector(BodyRef::Ground, unit(*component)),
                    QDef::Point(BodyRef::Body(*body), *point),
                ),
            };
            rows.push(Row {
                kind: RowKind::Coord {
                    coord,
                    offset: 0.0,
                    motion: Some(slot),
                },
                owner: RowOwner::Driver(di),
                label: format!("driver '{}'", dr.name),
            });
        }
        // Force elements.
        let mut terms = Vec::new();
        let mut tires = Vec::new();
        let mut n_stick = 0;
        let mut cfrictions = Vec::new();
        for (fi, f) in spec.forces.iter().enumerate() {
            match &f.kind {
                ForceKind::Tire(ts) => {
                    let slot = add_motion(&ts.road_height);
                    tires.push(self.build_tire(fi, ts, slot)?);
                }
                ForceKind::SpringDamper {
                    body1,
                    point1,
                    body2,
                    point2,
                    free_length,
                    law,
                    actuator,
                } => {
                    let (law, damper) = match law {
                        ForceLaw::DamperTable {
                            spring,
                            velocity,
                            force,
                            ..
                        } => (
                            spring.as_ref(),
                            Some(super::curves::Curve::new(velocity, force)),
                        ),
                        other => (other, None),
                    };
                    let law = match law {
                        // The loader nests no curve in a curve.
                        ForceLaw::DamperTable { .. } => SpringLaw::Linear {
                            k: 0.0,
                            c: 0.0,
                            preload: 0.0,
                        },
                        ForceLaw::Linear {
                            stiffness,
                            damping,
                            preload,
                        } => SpringLaw::Linear {
                            k: pv(stiffness),
                            c: pv(damping),
                            preload: pv(preload),
                        },
                        ForceLaw::Polynomial { coeffs, damping } => SpringLaw::Poly {
                            coeffs: coeffs.iter().map(&pv).collect(),
                            c: pv(damping),
                        },
                        ForceLaw::Table {
                            deflection,
                            force,
                            damping,
                            ..
                        } => SpringLaw::Table {
                            curve: super::curves::Curve::new(deflection, force),
                            c: pv(damping),
                        },
                    };
                    let actuator = actuator.as_ref().map(&mut add_motion);
                    let coord = Coord::Norm(QDef::Diff {
                        from: (*body1, *point1),
                        to: (*body2, *point2),
                    });
                    terms.push(ForceTerm {
                        coord,
                        law: Law::Spring {
                            law,
                            free: pv(free_length),
                            actuator,
                            damper,
                        },
                        element: fi,
                        preset: 0.0,
                        preset_ref: 0.0,
                    });
                }
                ForceKind::RotationalSpringDamper {
                    body1,
                    frame1,
                    body2,
                    frame2,
                    stiffness,
                    damping,
                    free_angle,
                    actuator,
                    table,
                    damper_table,
                } => {
                    let coord = new_angle(
                        frame_vec(*body1, frame1, 0),
                        frame_vec(*body1, frame1, 1),
                        frame_vec(*body2, frame2, 0),
                    );
                    let actuator = actuator.as_ref().map(&mut add_motion);
                    terms.push(ForceTerm {
                        coord,
                        law: Law::Torsion {
                            k: pv(stiffness),
                            c: pv(damping),
                            free: pv(free_angle),
                            actuator,
                            spring: table.as_ref().map(super::curves::Curve::from_table),
                            damper: damper_table.as_ref().map(super::curves::Curve::from_table),
                        },
                        element: fi,
                        preset: 0.0,
                        preset_ref: 0.0,
                    });
                }
                ForceKind::Bushing {
                    preload,
                    body1,
                    frame1,
                    body2,
                    frame2,
                    stiffness,
                    damping,
                    rot_stiffness,
                    rot_damping,
                    tables,
                    damper_tables,
                } => {
                    let d = diff(*body1, frame1, *body2, frame2);
                    let a1 = [0, 1, 2].map(|k| frame_vec(*body1, frame1, k));
                    let a2 = [0, 1, 2].map(|k| frame_vec(*body2, frame2, k));
                    for k in 0..3 {
                        terms.push(ForceTerm {
                            coord: Coord::Dot(a1[k], d),
                            law: Law::Linear {
                                k: pv(&stiffness[k]),
                                c: pv(&damping[k]),
                                rest: f64::NAN,
                                preload: preload[k],
                                curve: tables[k].as_ref().map(super::curves::Curve::from_table),
                                damper: damper_tables[k]
                                    .as_ref()
                                    .map(super::curves::Curve::from_table),
                            },
                            element: fi,
                            preset: 0.0,
                            preset_ref: 0.0,
                        });
                    }
                    // Small relative rotations about frame-1 axes: θx = ½(z1·y2 − y1·z2), ...
                    let rot = [(2, 1, 1, 2), (0, 2, 2, 0), (1, 0, 0, 1)];
                    for (k, (a, b, c, e)) in rot.into_iter().enumerate() {
                        let coord = Coord::Combo([(0.5, a1[a], a2[b]), (-0.5, a1[c], a2[e])]);
                        terms.push(ForceTerm {
                            coord,
                            law: Law::Linear {
                                k: pv(&rot_stiffness[k]),
                                c: pv(&rot_damping[k]),
                                rest: f64::NAN,
                                preload: preload[3 + k],
                                curve: tables[3 + k].as_ref().map(super::curves::Curve::from_table),
                                damper: damper_tables[3 + k]
                                    .as_ref()
                                    .map(super::curves::Curve::from_table),
                            },
                            element: fi,
                            preset: 0.0,
                            preset_ref: 0.0,
                        });
                    }
                }
                ForceKind::Contact {
                    geometry,
                    law,
                    stiffness,
                    damping,
                    friction,
                } => {
                    if let Some(fs) = friction {
                        let cf =
                            self.build_contact_friction(fi, terms.len(), geometry, fs, &cfrictions);
                        cfrictions.push(cf);
                    }
                    let hertz = *law == ContactLaw::Hertz;
                    let (coord, gap) = match geometry {
                        ContactGeometry::SpherePlane {
                            sphere_body,
                            center,
                            radius,
                            plane_body,
                            point,
                            normal,
                        } => (
                            Coord::Dot(
                                QDef::Vector(*plane_body, normal.normalize()),
                                QDef::Diff {
                                    from: (*plane_body, *point),
                                    to: (*sphere_body, *center),
                                },
                            ),
                            pv(radius),
                        ),
                        ContactGeometry::SphereSphere {
                            body1,
                            center1,
                            radius1,
                            body2,
                            center2,
                            radius2,
                        } => (
                            Coord::Norm(QDef::Diff {
                                from: (*body1, *center1),
                                to: (*body2, *center2),
                            }),
                            pv(radius1) + pv(radius2),
                        ),
                    };
                    terms.push(ForceTerm {
                        coord,
                        law: Law::Contact {
                            gap,
                            hertz,
                            k: pv(stiffness),
                            c: pv(damping),
                        },
                        element: fi,
                        preset: 0.0,
                        preset_ref: 0.0,
                    });
                }
                ForceKind::PrismaticFriction { joint, .. }
                | ForceKind::RevoluteFriction { joint, .. }
                | ForceKind::JointStop { joint, .. } => {
                    let coord = joint_coords[*joint].ok_or_else(|| {
                        self.err(format!("force '{}': joint has no coordinate", f.name))
                    })?;
                    let law = self.joint_element_law(&f.kind, &mut n_stick);
                    terms.push(ForceTerm {
                        coord,
                        law,
                        element: fi,
                        preset: 0.0,
                        preset_ref: 0.0,
                    });
                }
            }
        }
        // Rotation outputs: the body frame's x axis projected on the plane normal to the axis,
        // measured from the global reference direction; continuous through the angle slots.
        let output_coords: Vec<Option<Coord>> = spec
            .outputs
            .iter()
            .map(|o| match &o.quantity {
                OutputQuantity::Angle { body, axis } => {
                    let a = axis.normalize();
                    let r = if a.x.abs() < 0.9 {
                        Vector3::x()
                    } else {
                        Vector3::y()
                    };
                    let x1 = (r - a * a.dot(&r)).normalize();
                    let y1 = a.cross(&x1);
                    Some(new_angle(
                        QDef::Vector(BodyRef::Ground, x1),
                        QDef::Vector(BodyRef::Ground, y1),
                        QDef::Vector(BodyRef::Body(*body), x1),
                    ))
                }
                _ => None,
            })
            .collect();
        // Keep excitation offsets (the BDF may be mid-perturbation only inside one call, but
        // rebuilding must never silently reset a user's state).
        for (m, (o, r)) in motions.iter_mut().zip(old_offsets) {
            m.offset = o;
            m.rate_offsets = r;
        }
        let first_build = self.angle_refs.is_empty() && !angle_coords.is_empty();
        self.bodies = bodies;
        self.bodies_id = fresh_bodies_id();
        self.gravity = gravity;
        self.excitation_slots = (0..motions.len())
            .filter(|&i| motions[i].is_excitation())
            .collect();
        self.motions = motions;
        self.frame_motions = frame_motions;
        self.rows = rows;
        // Preloads from equilibrium survive parameter changes (they are recomputed only at
        // initialization).
        if self.presets.len() == terms.len() {
            for (tm, &(p, r)) in terms.iter_mut().zip(&self.presets) {
                tm.preset = p;
                tm.preset_ref = r;
            }
        }
        // The effective inertias of restitution stops come from initialization.
        for (new, old) in terms.iter_mut().zip(&self.terms) {
            if let (Law::Stop(n), Law::Stop(o)) = (&mut new.law, &old.law) {
                n.m_eff = o.m_eff;
            }
        }
        self.terms = terms;
        self.tires = tires;
        self.set_contact_friction(cfrictions);
        // Fresh stick states stick at the file's configuration (set below) until
        // initialization places them at the assembled one.
        let fresh_stick = self.stick.len() != n_stick;
        if fresh_stick {
            self.stick = vec![super::friction::StickState::at(0.0); n_stick];
        }
        self.joint_coords = joint_coords;
        self.output_coords = output_coords;
        self.angle_coords = angle_coords;
        if first_build || self.angle_refs.len() != self.angle_coords.len() {
            self.angle_refs = vec![0.0; self.angle_coords.len()];
            self.reset_angle_refs_at(&self.q0.clone(), self.spec.experiment.start);
            self.angle_refs0 = self.angle_refs.clone();
        }
        // Free lengths / angles that are relative to the initial configuration, measured on the
        // initial branches (a rebuild after the system has turned must not shift them by 2π).
        let q0 = self.q0.clone();
        self.load(self.spec.experiment.start, &q0, None);
        for i in 0..self.terms.len() {
            let cv = eval_coord(
                &self.layout,
                &self.snap,
                &self.terms[i].coord,
                &self.angle_refs0,
                None,
                None,
            );
            match &mut self.terms[i].law {
                Law::Linear { rest, .. } if rest.is_nan() => *rest = cv.val,
                Law::Torsion { free, .. } => {
                    // The initial deviation from the free angle is taken in (−π, π].
                    let init = cv.val;
                    *free = init - wrap_pi(init - *free);
                }
                Law::Friction {
                    stiction: Some((_, slot)),
                    ..
                } if fresh_stick => {
                    self.stick[*slot] = super::friction::StickState::at(cv.val);
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn reset_angle_refs_at(&mut self, q: &[f64], t: f64) {
        self.load(t, q, None);
        for (i, c) in self.angle_coords.iter().enumerate() {
            self.angle_refs[i] = raw_angle(&self.layout, &self.snap, c).unwrap_or(0.0);
        }
    }

    /// Unpack the state and evaluate moving frames at `t`.
    fn load(&mut self, t: f64, q: &[f64], v: Option<&[f64]>) {
        self.snap.load(&self.layout, q, v);
        for (f, slots) in self.frame_motions.iter().enumerate() {
            let mut st = [Vector3::zeros(); 3];
            for k in 0..3 {
                let m = self.motions[slots[k]].eval(
                    t,
                    &self.params,
                    &self.inputs,
                    self.motion_right_at,
                );
                for d in 0..3 {
                    st[d][k] = m[d];
                }
            }
            self.snap.frame[f] = st;
        }
    }

    fn coord(&self, c: &Coord, v: Option<&[f64]>) -> CoordVal {
        eval_coord(&self.layout, &self.snap, c, &self.angle_refs, v, None)
    }

    /// [`System::coord`] computing only what `need` names (`val`, `rate`, `xi_t` always).
    fn coord_need(&self, c: &Coord, v: Option<&[f64]>, need: Need) -> CoordVal {
        eval_coord_need(&self.layout, &self.snap, c, &self.angle_refs, v, None, need)
    }

    /// Value, gradient and (into `hess`) the coordinate-space Hessian.
    fn coord_hessian(&self, c: &Coord, v: Option<&[f64]>, hess: &mut LMat) -> CoordVal {
        eval_coord(&self.layout, &self.snap, c, &self.angle_refs, v, Some(hess))
    }

    pub(super) fn motion(&self, slot: usize, t: f64) -> [f64; 3] {
        self.motions[slot].eval(t, &self.params, &self.inputs, self.motion_right_at)
    }

    /// From now on, evaluate built-in motions at `t` by their right limits: the state is at
    /// `t` and continues past any breakpoint there (a ramp starting at `t` moves with its
    /// slope from `t` on). The co-simulation layer sets it at the start of the run and
    /// whenever it continues from an accepted time.
    pub fn set_motion_right_limit_at(&mut self, t: f64) {
        self.motion_right_at = t;
    }

    /// The earliest breakpoint of a built-in motion (a ramp's start: a rate jump; a smooth
    /// step's start and end: acceleration jumps) in `(after, before)`.
    pub fn next_motion_breakpoint(&self, after: f64, before: f64) -> Option<f64> {
        self.motions
            .iter()
            .flat_map(|m| m.breakpoints(&self.params))
            .flatten()
            .filter(|&tb| tb > after && tb < before)
            .min_by(f64::total_cmp)
    }

    /// Whether a built-in motion has a breakpoint at `t` (exactly: steps land on them).
    pub fn has_motion_breakpoint_at(&self, t: f64) -> bool {
        self.motions
            .iter()
            .flat_map(|m| m.breakpoints(&self.params))
            .flatten()
            .any(|tb| tb == t)
    }

    // ----- constraint rows -----

    /// Value, Jacobian row (via callback), Φ_t, γ of one row; the Jacobian row only with
    /// `need.grad`, γ only with `need.conv`.
    fn row_eval(
        &self,
        r: &Row,
        t: f64,
        v: Option<&[f64]>,
        q: &[f64],
        need: Need,
    ) -> (f64, RowGrad, f64, f64) {
        match &r.kind {
            RowKind::Normalize { col } => {
                let p = Vector4::new(q[*col], q[col + 1], q[col + 2], q[col + 3]);
                let pd = v.map_or(Vector4::zeros(), |v| {
                    Vector4::new(v[*col], v[col + 1], v[col + 2], v[col + 3])
                });
                (
                    0.5 * (p.norm_squared() - 1.0),
                    RowGrad::Quat(*col, p),
                    0.0,
                    -pd.norm_squared(),
                )
            }
            RowKind::Coord {
                coord,
                offset,
                motion,
            } => {
                let cv = self.coord_need(coord, v, need);
                let (u, du, ddu) = motion.map_or((0.0, 0.0, 0.0), |m| {
                    let [a, b, c] = self.motion(m, t);
                    (a, b, c)
                });
                let phi = cv.val - offset - u;
                let phi_t = cv.xi_t - du;
                let gamma = -cv.conv + ddu;
                (phi, RowGrad::Coord(cv), phi_t, gamma)
            }
        }
    }

    // ----- forces -----

    /// Scalar law value and its partial derivatives `(F, ∂F/∂ξ, ∂F/∂ξ̇)`.
    /// The law of force term `i` plus its preload from equilibrium.
    pub(super) fn term_law(&self, i: usize, xi: f64, rate: f64, t: f64) -> (f64, f64, f64) {
        let tm = &self.terms[i];
        let (f, a, b) = self.law(&tm.law, xi, rate, t);
        (f + tm.preset, a, b)
    }

    /// Force terms with `static_preload` (their elements marked), in term order, with the
    /// element name: the unknowns of the preload computation.
    pub(crate) fn preload_terms(&self) -> Vec<(usize, String)> {
        self.terms
            .iter()
            .enumerate()
            .filter(|(_, tm)| self.spec.forces[tm.element].static_preload)
            .map(|(i, tm)| (i, self.spec.forces[tm.element].name.clone()))
            .collect()
    }

    /// The generalized force of a unit preload on term `i` at `q` (its coordinate gradient).
    pub(crate) fn term_direction(&mut self, i: usize, t: f64, q: &[f64], out: &mut [f64]) -> f64 {
        self.load(t, q, None);
        out.fill(0.0);
        let cv = self.coord(&self.terms[i].coord, None);
        for (l, g) in cv.columns() {
            out[g] += cv.grad[l];
        }
        cv.val
    }

    pub(crate) fn n_terms(&self) -> usize {
        self.terms.len()
    }

    /// Set the preloads (per term, with their reference coordinate values); kept across
    /// parameter changes.
    pub(crate) fn set_presets(&mut self, presets: Vec<(f64, f64)>) {
        for (tm, &(p, r)) in self.terms.iter_mut().zip(&presets) {
            tm.preset = p;
            tm.preset_ref = r;
        }
        self.presets = presets;
    }

    /// The preload of force element `e` from equilibrium: the spring tension (N), torque
    /// (N m), or for a bushing the 6 components (force on body 2 along frame-1 axes, then
    /// torques); empty if the element has none.
    pub fn element_preload(&self, e: usize) -> Vec<f64> {
        self.terms
            .iter()
            .filter(|tm| tm.element == e && self.spec.forces[e].static_preload)
            .map(|tm| match tm.law {
                Law::Spring { .. } => -tm.preset,
                _ => tm.preset,
            })
            .collect()
    }

    pub(super) fn law(&self, law: &Law, xi: f64, rate: f64, t: f64) -> (f64, f64, f64) {
        match law {
            Law::Spring {
                law,
                free,
                actuator,
                damper,
            } => {
                let x = xi - free;
                let act = actuator.map_or(0.0, |m| self.motion(m, t)[0]);
                let (f, df, c) = match law {
                    SpringLaw::Linear { k, c, preload } => (k * x + preload, *k, *c),
                    SpringLaw::Poly { coeffs, c } => {
                        let (mut f, mut df, mut xp) = (0.0, 0.0, 1.0);
                        for (i, a) in coeffs.iter().enumerate() {
                            df += (i + 1) as f64 * a * xp;
                            xp *= x;
                            f += a * xp;
                        }
                        (f, df, *c)
                    }
                    SpringLaw::Table { curve, c } => {
                        let (f, df) = curve.eval(x);
                        (f, df, *c)
                    }
                };
                let (fd, dfd) = match damper {
                    Some(curve) => curve.eval(rate),
                    None => (c * rate, c),
                };
                // Tension T pulls the points together: generalized force −T ∇l.
                (-(f + fd + act), -df, -dfd)
            }
            Law::Torsion {
                k,
                c,
                free,
                actuator,
                spring,
                damper,
            } => {
                let act = actuator.map_or(0.0, |m| self.motion(m, t)[0]);
                let (fs, dfs) = match spring {
                    Some(curve) => curve.eval(xi - free),
                    None => (k * (xi - free), *k),
                };
                let (fd, dfd) = match damper {
                    Some(curve) => curve.eval(rate),
                    None => (c * rate, *c),
                };
                (-fs - fd + act, -dfs, -dfd)
            }
            Law::Linear {
                k,
                c,
                rest,
                preload,
                curve,
                damper,
            } => {
                let (fs, dfs) = match curve {
                    Some(curve) => curve.eval(xi - rest),
                    None => (k * (xi - rest), *k),
                };
                let (fd, dfd) = match damper {
                    Some(curve) => curve.eval(rate),
                    None => (c * rate, *c),
                };
                (-fs - fd + preload, -dfs, -dfd)
            }
            Law::Contact { gap, hertz, k, c } => {
                let delta = gap - xi;
                if delta <= 0.0 {
                    return (0.0, 0.0, 0.0);
                }
                let ddelta = -rate;
                // F pushes apart (along +∇ξ). dF/dξ = −dF/dδ, dF/dξ̇ = −dF/dδ̇.
                let (f, f_d, f_dd) = if *hertz {
                    let d15 = delta.powf(1.5);
                    let dd15 = 1.5 * delta.sqrt();
                    (
                        k * d15 + c * d15 * ddelta,
                        k * dd15 + c * dd15 * ddelta,
                        c * d15,
                    )
                } else {
                    (k * delta + c * ddelta, *k, *c)
                };
                if f <= 0.0 {
                    (0.0, 0.0, 0.0)
                } else {
                    (f, -f_d, -f_dd)
                }
            }
            Law::Friction {
                mu,
                v_reg,
                joint,
                radius,
                stiction,
            } => {
                let n = self.joint_normal[*joint] * radius;
                let st = stiction.as_ref().map(|(s, slot)| (s, &self.stick[*slot]));
                super::friction::force(*mu, *v_reg, n, st, xi, rate)
            }
            Law::Stop(stop) => stop.force(xi, rate),
        }
    }

    /// Gyroscopic force of rigid body `b` and (optionally) its derivatives w.r.t. `p`, `ṗ`.
    fn gyro(&self, b: usize) -> (Vector4<f64>, Matrix4<f64>, Matrix4<f64>) {
        let (p, pd) = (self.snap.p[b], self.snap.pd[b]);
        let j = &self.bodies[b].inertia;
        let g = g_mat(&p);
        let w = 2.0 * g * pd;
        let jw = j * w;
        let h = w.cross(&jw);
        let q = -2.0 * g.transpose() * h;
        // ∂h/∂ω = ω̃ J − (Jω)~
        let dh = skew(&w) * j - skew(&jw);
        let dq_dpd = -2.0 * g.transpose() * dh * (2.0 * g);
        // ∂ω/∂p = −2 G(ṗ);  ∂(Gᵀh)/∂p|_h = columns G(e_i)ᵀ h.
        let mut gt_h = Matrix4::zeros();
        for i in 0..4 {
            let mut ei = Vector4::zeros();
            ei[i] = 1.0;
            gt_h.set_column(i, &(g_mat(&ei).transpose() * h));
        }
        let dq_dp = -2.0 * gt_h - 2.0 * g.transpose() * dh * (-2.0 * g_mat(&pd));
        (q, dq_dp, dq_dpd)
    }

    // ----- state for the co-simulation layer -----

    /// Number of active (independent) constraint rows.
    pub fn active_rows(&self) -> usize {
        self.n_c()
    }

    /// Labels of the active rows.
    pub fn row_labels(&self) -> Vec<String> {
        if let Some(j) = &self.joint {
            return j.row_labels(self);
        }
        self.active
            .iter()
            .map(|&i| self.rows[i].label.clone())
            .collect()
    }

    /// The consistent initial state: positions by Newton on the constraints (minimal change),
    /// velocities by projection, or static equilibrium when the model asks for it. Detects and
    /// drops redundant constraint rows (reported in [`System::dropped`]).
    pub fn initial_state(&mut self, t0: f64) -> Result<MechState, ModelError> {
        self.re_resolve()?;
        let x = if self.joint.is_some() {
            self.with_joint(|j, s| j.initial_state(s, t0))?
        } else {
            super::assembly::initial_state(self, t0)?
        };
        if self.joint.is_some() {
            self.with_joint(|j, s| {
                let (qa, va) = j.to_absolute(s, x.t, &x.q, Some(&x.v));
                s.initialize_joint_elements(x.t, &qa, &va)
            })?;
        } else {
            self.initialize_joint_elements(x.t, &x.q, &x.v)?;
        }
        Ok(x)
    }

    /// Parameters set before initialization act on everything they are used in (geometry,
    /// masses, expressions, calculated parameters): when they differ from the values the
    /// model was resolved with, the model text is resolved again with them and the system
    /// rebuilt (inputs kept). Without the text (a model built in code) only the fields that
    /// name a parameter follow (as during stepping).
    fn re_resolve(&mut self) -> Result<(), ModelError> {
        let Some(text) = self.spec.source_text.clone() else {
            return Ok(());
        };
        let same = self
            .spec
            .parameters
            .iter()
            .zip(&self.params)
            .all(|(p, v)| p.calculated || p.value == *v);
        if same {
            return Ok(());
        }
        let path = self.spec.source_files.first().cloned().unwrap_or_default();
        let mut spec = super::loader::load_model_with_parameters(&text, &path, &self.params)?;
        // Parameters do not choose the formulation; keep the one this system was built in
        // (a caller may have set it on the resolved model).
        spec.formulation = self.spec.formulation;
        let params = spec.default_parameters();
        let mut fresh = System::with_parameters(Arc::new(spec), params)?;
        fresh.inputs = self.inputs.clone();
        *self = fresh;
        Ok(())
    }

    pub(crate) fn initial_guess(&self) -> (Vec<f64>, Vec<f64>) {
        (self.q0.clone(), self.v0.clone())
    }

    pub(crate) fn set_active_rows(&mut self, active: Vec<usize>, dropped: Vec<String>) {
        self.saddle_cache = None;
        self.active = active;
        self.dropped = dropped;
    }

    pub(crate) fn all_rows_count(&self) -> usize {
        self.rows.len()
    }

    pub(crate) fn all_row_label(&self, i: usize) -> &str {
        &self.rows[i].label
    }

    pub(crate) fn reset_angles(&mut self, q: &[f64], t: f64) {
        self.reset_angle_refs_at(q, t);
    }

    /// Move every angle's branch reference to the branch nearest its value at `q` (assembly
    /// iterates; accepted integration steps do the same through `accept_step`).
    pub(crate) fn track_angles(&mut self, q: &[f64], t: f64) {
        self.load(t, q, None);
        for (i, c) in self.angle_coords.iter().enumerate() {
            if let Some(raw) = raw_angle(&self.layout, &self.snap, c) {
                self.angle_refs[i] = super::math::unwrap_near(raw, self.angle_refs[i]);
            }
        }
    }

    /// Evaluate the scalar coordinate of force term `i` (for outputs and energy).
    fn term_value(&self, i: usize, v: Option<&[f64]>) -> CoordVal {
        self.coord(&self.terms[i].coord, v)
    }
}

/// Whether an output needs the accelerations and multipliers.
pub(super) fn output_needs_dynamics(q: &OutputQuantity) -> bool {
    matches!(
        q,
        OutputQuantity::Acceleration { .. }
            | OutputQuantity::Relative { order: 2, .. }
            | OutputQuantity::JointForce { .. }
            | OutputQuantity::JointTorque { .. }
            | OutputQuantity::DriverForce { .. }
    )
}

/// A row's gradient, scattered lazily (a short-lived value on the stack: no boxing).
#[allow(clippy::large_enum_variant)]
enum RowGrad {
    Quat(usize, Vector4<f64>),
    Coord(CoordVal),
}

impl RowGrad {
    fn scatter_row(&self, row: usize, jac: &mut DMatrix<f64>) {
        match self {
            RowGrad::Quat(col, p) => {
                for k in 0..4 {
                    jac[(row, col + k)] = p[k];
                }
            }
            RowGrad::Coord(cv) => {
                for (l, g) in cv.columns() {
                    jac[(row, g)] += cv.grad[l];
                }
            }
        }
    }
}

impl Mechanical for System {
    fn n_q(&self) -> usize {
        match &self.joint {
            Some(j) => j.n_q(),
            None => self.layout.n_q,
        }
    }
    fn sparse_structure(&mut self) -> Option<&mut dyn SparseStructure> {
        // The joint formulation answers in joint coordinates (`joint/sparse.rs`), when its
        // mass matrix falls into blocks.
        if let Some(j) = self.joint.as_mut() {
            if !j.has_sparse_structure() {
                return None;
            }
        }
        Some(self)
    }
    fn n_c(&self) -> usize {
        match &self.joint {
            Some(j) => j.n_c(),
            None => self.active.len(),
        }
    }

    fn mass_matrix(&mut self, _t: f64, q: &[f64], m: &mut DMatrix<f64>) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.mass_matrix(s, _t, q, m));
        }
        m.fill(0.0);
        for b in 0..self.bodies.len() {
            let o = self.layout.offsets[b];
            let bd = &self.bodies[b];
            for k in 0..3 {
                m[(o + k, o + k)] = bd.mass;
            }
            if self.layout.is_rigid(b) {
                let p = Vector4::new(q[o + 3], q[o + 4], q[o + 5], q[o + 6]);
                let g = g_mat(&p);
                let mp = 4.0 * g.transpose() * bd.inertia * g + bd.reg * p * p.transpose();
                m.view_mut((o + 3, o + 3), (4, 4)).copy_from(&mp);
            }
        }
    }

    fn unconstrained_accelerations(&mut self, t: f64, q: &[f64], v: &[f64], a: &mut [f64]) -> bool {
        self.joint.is_some() && self.with_joint(|j, s| j.unconstrained_accelerations(s, t, q, v, a))
    }

    fn forces(&mut self, t: f64, q: &[f64], v: &[f64], f: &mut [f64]) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.forces(s, t, q, v, f));
        }
        self.load(t, q, Some(v));
        f.fill(0.0);
        for b in 0..self.bodies.len() {
            let o = self.layout.offsets[b];
            let fg = self.bodies[b].mass * self.gravity;
            for k in 0..3 {
                f[o + k] += fg[k];
            }
            if self.layout.is_rigid(b) {
                let (qg, _, _) = self.gyro(b);
                for k in 0..4 {
                    f[o + 3 + k] += qg[k];
                }
            }
        }
        for i in 0..self.terms.len() {
            let cv = self.coord_need(&self.terms[i].coord, Some(v), Need::GRAD);
            let (force, _, _) = self.term_law(i, cv.val, cv.rate, t);
            if force != 0.0 {
                for (l, g) in cv.columns() {
                    f[g] += force * cv.grad[l];
                }
            }
        }
        self.add_tire_forces(t, f);
        self.add_contact_friction_forces(t, f);
    }

    fn constraints(&mut self, t: f64, q: &[f64], phi: &mut [f64]) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.constraints(s, t, q, phi));
        }
        self.load(t, q, None);
        for (k, &i) in self.active.iter().enumerate() {
            phi[k] = self.row_eval(&self.rows[i], t, None, q, Need::VALUE).0;
        }
    }

    fn constraint_jacobian(&mut self, t: f64, q: &[f64], jac: &mut DMatrix<f64>) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.constraint_jacobian(s, t, q, jac));
        }
        self.load(t, q, None);
        jac.fill(0.0);
        for (k, &i) in self.active.iter().enumerate() {
            self.row_eval(&self.rows[i], t, None, q, Need::GRAD)
                .1
                .scatter_row(k, jac);
        }
    }

    fn constraint_values(
        &mut self,
        t: f64,
        q: &[f64],
        phi: &mut [f64],
        jac: &mut DMatrix<f64>,
        phi_t: &mut [f64],
    ) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.constraint_values_dense(s, t, q, phi, jac, phi_t));
        }
        crate::integrate::system::constraint_values_by_parts(self, t, q, phi, jac, phi_t);
    }

    fn constraint_jacobian_and_rhs(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
        jac: &mut DMatrix<f64>,
        gamma: &mut [f64],
    ) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.constraint_jacobian_and_rhs(s, t, q, v, jac, gamma));
        }
        crate::integrate::system::constraint_jacobian_and_rhs_by_parts(self, t, q, v, jac, gamma);
    }

    fn saddle_residual(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
        x: &[f64],
        out: &mut [f64],
    ) -> bool {
        if self.joint.is_none() {
            return false; // the absolute formulation forms `K` (its rows carry no recursion)
        }
        self.with_joint(|j, s| j.saddle_residual(s, t, q, v, x, out));
        true
    }

    fn constraint_time_derivative(&mut self, t: f64, q: &[f64], phi_t: &mut [f64]) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.constraint_time_derivative(s, t, q, phi_t));
        }
        self.load(t, q, None);
        for (k, &i) in self.active.iter().enumerate() {
            phi_t[k] = self.row_eval(&self.rows[i], t, None, q, Need::VALUE).2;
        }
    }

    fn acceleration_rhs(&mut self, t: f64, q: &[f64], v: &[f64], gamma: &mut [f64]) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.acceleration_rhs(s, t, q, v, gamma));
        }
        self.load(t, q, Some(v));
        for (k, &i) in self.active.iter().enumerate() {
            gamma[k] = self.row_eval(&self.rows[i], t, Some(v), q, Need::ALL).3;
        }
    }
}

impl ForceJacobians for System {
    fn force_jacobians(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
        df_dq: &mut DMatrix<f64>,
        df_dv: &mut DMatrix<f64>,
    ) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.force_jacobians(s, t, q, v, df_dq, df_dv));
        }
        self.load(t, q, Some(v));
        df_dq.fill(0.0);
        df_dv.fill(0.0);
        let mut hess = LMat::zeros();
        for b in 0..self.bodies.len() {
            if self.layout.is_rigid(b) {
                let o = self.layout.offsets[b] + 3;
                let (_, dp, dpd) = self.gyro(b);
                df_dq.view_mut((o, o), (4, 4)).copy_from(&dp);
                df_dv.view_mut((o, o), (4, 4)).copy_from(&dpd);
            }
        }
        for i in 0..self.terms.len() {
            let cv = self.coord_hessian(&self.terms[i].coord, Some(v), &mut hess);
            let (force, f_xi, f_rate) = self.term_law(i, cv.val, cv.rate, t);
            if force == 0.0 && f_xi == 0.0 && f_rate == 0.0 {
                continue;
            }
            let vl = cv.gather(v);
            // ∂ξ̇/∂q = ∇²ξ v + ∇ξ_t
            let drate = hess * vl + cv.grad_t;
            let dq = cv.grad * (f_xi * cv.grad + f_rate * drate).transpose() + force * hess;
            let dv = f_rate * cv.grad * cv.grad.transpose();
            let (cols, n_cols) = cv.column_array();
            let cols = &cols[..n_cols];
            for &(li, gi) in cols {
                for &(lj, gj) in cols {
                    df_dq[(gi, gj)] += dq[(li, lj)];
                    df_dv[(gi, gj)] += dv[(li, lj)];
                }
            }
        }
        self.add_tire_jacobians(t, df_dq, df_dv);
        self.add_contact_friction_jacobians(t, df_dq, df_dv);
    }
}

impl ConstraintHessians for System {
    fn constraint_force_jacobian(
        &mut self,
        t: f64,
        q: &[f64],
        lambda: &[f64],
        out: &mut DMatrix<f64>,
    ) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.constraint_force_jacobian(s, t, q, lambda, out));
        }
        self.load(t, q, None);
        out.fill(0.0);
        let mut hess = LMat::zeros();
        for (k, &i) in self.active.iter().enumerate() {
            match &self.rows[i].kind {
                RowKind::Normalize { col } => {
                    for d in 0..4 {
                        out[(col + d, col + d)] += lambda[k];
                    }
                }
                RowKind::Coord { coord, .. } => {
                    let cv = self.coord_hessian(coord, None, &mut hess);
                    let (cols, n_cols) = cv.column_array();
                    let cols = &cols[..n_cols];
                    for &(li, gi) in cols {
                        for &(lj, gj) in cols {
                            out[(gi, gj)] += lambda[k] * hess[(li, lj)];
                        }
                    }
                }
            }
        }
    }

    fn mass_times_accel_jacobian(&mut self, _t: f64, q: &[f64], a: &[f64], out: &mut DMatrix<f64>) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.mass_times_accel_jacobian(s, _t, q, a, out));
        }
        out.fill(0.0);
        for b in 0..self.bodies.len() {
            if !self.layout.is_rigid(b) {
                continue;
            }
            let o = self.layout.offsets[b] + 3;
            let p = Vector4::new(q[o], q[o + 1], q[o + 2], q[o + 3]);
            let av = Vector4::new(a[o], a[o + 1], a[o + 2], a[o + 3]);
            let bd = &self.bodies[b];
            let g = g_mat(&p);
            let w = bd.inertia * g * av;
            // M_p a = 4 G(p)ᵀ J' G(p) a + c p pᵀ a;  ∂(G(p) a)/∂p = −G(a).
            let mut gt_w = Matrix4::zeros();
            for i in 0..4 {
                let mut ei = Vector4::zeros();
                ei[i] = 1.0;
                gt_w.set_column(i, &(g_mat(&ei).transpose() * w));
            }
            let d = 4.0 * gt_w
                + 4.0 * g.transpose() * bd.inertia * (-g_mat(&av))
                + bd.reg * (Matrix4::identity() * p.dot(&av) + p * av.transpose());
            out.view_mut((o, o), (4, 4)).copy_from(&d);
        }
    }
}

impl Excitations for System {
    fn n_excitations(&self) -> usize {
        self.excitation_slots.len()
    }
    fn excitation(&mut self, t: f64, i: usize) -> f64 {
        self.motion(self.excitation_slots[i], t)[0]
    }
    fn set_excitation_offset(&mut self, i: usize, delta: f64) {
        let slot = self.excitation_slots[i];
        self.motions[slot].offset = delta;
    }
    /// Joint coordinates: the driven coordinates and moving frames enter the recursion through
    /// `(u, u̇, ü)` separately (a translating suspension only through `ü`). Absolute
    /// coordinates: the value (`u̇`, `ü` enter only `Φ_t` and `γ`, whose `y`-derivatives the
    /// judged term of (26) has never needed there; keeping one order keeps the cost of (26)'s
    /// second derivatives at `n_u` Jacobians).
    fn excitation_orders(&self) -> usize {
        if self.joint.is_some() {
            3
        } else {
            1
        }
    }
    fn excitation_jet(&mut self, t: f64, i: usize) -> [f64; 3] {
        self.motion(self.excitation_slots[i], t)
    }
    fn set_excitation_jet_offset(&mut self, i: usize, delta: [f64; 3]) {
        let slot = self.excitation_slots[i];
        self.motions[slot].offset = delta[0];
        self.motions[slot].rate_offsets = [delta[1], delta[2]];
    }
}

impl StepHooks for System {
    fn accept_step(&mut self, t: f64, q: &[f64], v: &[f64], lambda: Option<&[f64]>) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.accept_step(s, t, q, v));
        }
        self.load(t, q, Some(v));
        for (i, c) in self.angle_coords.iter().enumerate() {
            if let Some(raw) = raw_angle(&self.layout, &self.snap, c) {
                self.angle_refs[i] = super::math::unwrap_near(raw, self.angle_refs[i]);
            }
        }
        if let Some(l) = lambda {
            if l.len() == self.active.len() {
                self.scratch_lambda.clear();
                self.scratch_lambda.extend_from_slice(l);
                self.update_joint_normals(t, q);
            }
        }
        self.accept_stick(t, q, v);
        self.accept_contact_stick(t, q, v);
    }
    fn checkpoint(&mut self) {
        self.checkpoint_stick();
        self.contact_stick_backup.clone_from(&self.contact_stick);
    }
    fn rollback(&mut self) {
        self.rollback_stick();
        if self.contact_stick_backup.len() == self.contact_stick.len() {
            self.contact_stick
                .copy_from_slice(&self.contact_stick_backup);
        }
    }
    fn take_law_switch(&mut self) -> bool {
        std::mem::take(&mut self.law_switched)
    }
}

impl System {
    /// Joint reaction force on body 2 (global) and torque about the joint point, from the
    /// multipliers of the active rows owned by joint `j`. Uses `self.snap` (call `load` first).
    fn joint_reaction(
        &self,
        j: usize,
        t: f64,
        q: &[f64],
        lambda: &[f64],
    ) -> (Vector3<f64>, Vector3<f64>) {
        let js = &self.spec.joints[j];
        // Reaction on body 2; when body 2 is ground or a moving frame, minus the reaction on
        // body 1 (the joint is massless and its frames coincide at the joint point).
        let (b, frame, sign) = match (js.body2, js.body1) {
            (BodyRef::Body(b2), _) => (b2, &js.frame2, 1.0),
            (_, BodyRef::Body(b1)) => (b1, &js.frame1, -1.0),
            _ => return (Vector3::zeros(), Vector3::zeros()),
        };
        let o = self.layout.offsets[b];
        let width = if self.layout.is_rigid(b) { 7 } else { 3 };
        let mut gen = [0.0; 7];
        for (k, &i) in self.active.iter().enumerate() {
            if self.rows[i].owner != RowOwner::Joint(j) {
                continue;
            }
            if let RowGrad::Coord(cv) = self.row_eval(&self.rows[i], t, None, q, Need::GRAD).1 {
                for (l, g) in cv.columns() {
                    if g >= o && g < o + width {
                        gen[g - o] -= lambda[k] * cv.grad[l];
                    }
                }
            }
        }
        let force = Vector3::new(gen[0], gen[1], gen[2]);
        if width == 3 {
            return (sign * force, Vector3::zeros());
        }
        let p = self.snap.p[b];
        // Q_p = 2 Eᵀ n  ⇒  n = ½ E Q_p (unit p); torque about the centre of mass, moved to the
        // joint point: n_P = n − (x_P − r) × F.
        let qp = Vector4::new(gen[3], gen[4], gen[5], gen[6]);
        let n_cm = 0.5 * super::math::e_mat(&p) * qp;
        let arm = self.snap.a[b] * frame.origin;
        (sign * force, sign * (n_cm - arm.cross(&force)))
    }

    fn update_joint_normals(&mut self, t: f64, q: &[f64]) {
        let lambda = std::mem::take(&mut self.scratch_lambda);
        for j in 0..self.spec.joints.len() {
            let kind = self.spec.joints[j].kind;
            if kind != JointKind::Prismatic && kind != JointKind::Revolute {
                continue;
            }
            let (f, _) = self.joint_reaction(j, t, q, &lambda);
            if kind == JointKind::Revolute {
                // The friction radius turns the whole reaction force into a torque limit.
                self.joint_normal[j] = f.norm();
                continue;
            }
            let z = match self.spec.joints[j].body1 {
                BodyRef::Body(b1) => self.snap.a[b1] * self.spec.joints[j].frame1.axes.column(2),
                _ => self.spec.joints[j].frame1.axes.column(2).into_owned(),
            };
            self.joint_normal[j] = (f - z * z.dot(&f)).norm();
        }
        self.scratch_lambda = lambda;
    }

    /// Accelerations and multipliers from `[M Φqᵀ; Φq 0][a; λ] = [f; γ]`: dense LU for small
    /// models, the sparse LU on the engine's structure from
    /// [`SPARSE_THRESHOLD`](crate::integrate::sparse::SPARSE_THRESHOLD) unknowns on (the
    /// dense `O(n³)` factorization would dominate there).
    pub fn accelerations(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
    ) -> Result<(Vec<f64>, Vec<f64>), ModelError> {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.accelerations(s, t, q, v));
        }
        let (nq, nc) = (self.n_q(), self.n_c());
        let mut f = vec![0.0; nq];
        let mut gamma = vec![0.0; nc];
        self.forces(t, q, v, &mut f);
        self.acceleration_rhs(t, q, v, &mut gamma);
        let mut fac = self.factor_saddle(t, q)?;
        let mut x: Vec<f64> = f.iter().chain(gamma.iter()).copied().collect();
        let ok = fac.solve(&mut x);
        if let output_derivs::Factored::Sparse(sp) = fac {
            self.saddle_cache = Some(sp);
        }
        if !ok {
            return Err(self.err(format!(
                "singular saddle-point matrix at t = {t} (dependent constraints or a body \
                 without mass)"
            )));
        }
        let lambda = x.split_off(nq);
        Ok((x, lambda))
    }

    /// [`System::accelerations`] into `a` (`n_q`) and `lambda` (`n_c`), for callers in a loop:
    /// the joint formulation of a tree allocates nothing; the absolute formulation copies
    /// from `accelerations`' vectors.
    pub fn accelerations_into(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
        a: &mut [f64],
        lambda: &mut [f64],
    ) -> Result<(), ModelError> {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.accelerations_into(s, t, q, v, a, lambda));
        }
        let (x, l) = self.accelerations(t, q, v)?;
        a.copy_from_slice(&x);
        lambda.copy_from_slice(&l);
        Ok(())
    }

    pub fn n_outputs(&self) -> usize {
        self.spec.outputs.len()
    }

    /// Evaluate every output at the state `x` (accelerations and reactions from the
    /// saddle-point system at `x`).
    pub fn evaluate_outputs(&mut self, x: &MechState, out: &mut [f64]) -> Result<(), ModelError> {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.evaluate_outputs(s, x, out));
        }
        let needs_dynamics = self
            .spec
            .outputs
            .iter()
            .any(|o| output_needs_dynamics(&o.quantity));
        let (acc, lambda) = if needs_dynamics {
            self.accelerations(x.t, &x.q, &x.v)?
        } else {
            (Vec::new(), Vec::new())
        };
        self.load(x.t, &x.q, Some(&x.v));
        let spec = self.spec.clone();
        for (k, o) in spec.outputs.iter().enumerate() {
            out[k] = o.scale * self.output(k, &o.quantity, (x.t, &x.q, &x.v), &acc, &lambda);
        }
        Ok(())
    }

    /// Outputs at the absolute state `(t, q, v)` whose only dynamic outputs are driver forces,
    /// given by `driver_force` (the joint formulation's inverse dynamics): no saddle-point
    /// solve here. `snap` is that state's snapshot, which the joint formulation has already
    /// made (unpacking `q` again costs a rotation matrix per body, a third of the outputs'
    /// cost on the double pendulum).
    pub(super) fn evaluate_outputs_given_drivers(
        &mut self,
        (t, q, v): (f64, &[f64], &[f64]),
        snap: &mut Snapshot,
        out: &mut [f64],
        driver_force: impl Fn(usize) -> f64,
    ) {
        std::mem::swap(&mut self.snap, snap);
        let spec = self.spec.clone();
        for (k, o) in spec.outputs.iter().enumerate() {
            out[k] = o.scale
                * match o.quantity {
                    OutputQuantity::DriverForce { driver } => driver_force(driver),
                    ref qty => self.output(k, qty, (t, q, v), &[], &[]),
                };
        }
        std::mem::swap(&mut self.snap, snap);
    }

    /// Whether accepting a step updates stick states (besides tracking angle branches).
    pub(super) fn has_stick_states(&self) -> bool {
        !self.stick.is_empty() || !self.contact_stick.is_empty()
    }

    /// Track the angle branches from a snapshot filled by the joint formulation; `direct(slot)`
    /// is the continuous value where the formulation knows it (a tree joint's own angle).
    pub(super) fn track_angles_from(
        &mut self,
        snap: &Snapshot,
        direct: impl Fn(usize) -> Option<f64>,
    ) {
        for (i, c) in self.angle_coords.iter().enumerate() {
            if let Some(raw) = direct(i).or_else(|| raw_angle(&self.layout, snap, c)) {
                self.angle_refs[i] = super::math::unwrap_near(raw, self.angle_refs[i]);
            }
        }
    }

    fn output(
        &mut self,
        k: usize,
        quantity: &OutputQuantity,
        (t, q, v): (f64, &[f64], &[f64]),
        acc: &[f64],
        lambda: &[f64],
    ) -> f64 {
        let point = |sys: &System, body: BodyRef, p: &Vector3<f64>| {
            super::kin::eval_quantity(&sys.layout, &sys.snap, &QDef::Point(body, *p), true)
        };
        match quantity {
            OutputQuantity::Position {
                body,
                point: p,
                component,
            } => point(self, *body, p).x[*component],
            OutputQuantity::Velocity {
                body,
                point: p,
                component,
            } => point(self, *body, p).xd[*component],
            OutputQuantity::Acceleration {
                body,
                point: p,
                component,
            } => {
                let e = QDef::Vector(BodyRef::Ground, unit(*component));
                let cv = self.coord(&Coord::Dot(e, QDef::Point(*body, *p)), Some(v));
                let al = cv.gather(acc);
                cv.grad.dot(&al) + cv.conv
            }
            OutputQuantity::Angle { .. } => {
                // The value alone: the gradient machinery would be two thirds of the cost.
                match self.output_coords[k] {
                    Some(ref c @ Coord::Angle { slot, .. }) => {
                        let raw = raw_angle(&self.layout, &self.snap, c).expect("an angle");
                        super::math::unwrap_near(raw, self.angle_refs[slot])
                    }
                    _ => f64::NAN,
                }
            }
            OutputQuantity::AngularVelocity { body, axis } => {
                let o = self.layout.offsets[*body];
                let p = Vector4::new(q[o + 3], q[o + 4], q[o + 5], q[o + 6]);
                let pd = Vector4::new(v[o + 3], v[o + 4], v[o + 5], v[o + 6]);
                (2.0 * super::math::e_mat(&p) * pd).dot(&axis.normalize())
            }
            OutputQuantity::JointCoordinate { joint } => {
                let c = self.joint_coords[*joint].as_ref();
                c.map_or(f64::NAN, |c| self.coord_need(c, Some(v), Need::VALUE).val)
            }
            OutputQuantity::JointRate { joint } => {
                let c = self.joint_coords[*joint].as_ref();
                c.map_or(f64::NAN, |c| self.coord_need(c, Some(v), Need::VALUE).rate)
            }
            OutputQuantity::JointForce {
                joint,
                component,
                axes,
            }
            | OutputQuantity::JointTorque {
                joint,
                component,
                axes,
            } => {
                let (f, n) = self.joint_reaction(*joint, t, q, lambda);
                let w = if matches!(quantity, OutputQuantity::JointForce { .. }) {
                    f
                } else {
                    n
                };
                self.reaction_component(*joint, *axes, *component, &w)
            }
            OutputQuantity::DriverForce { driver } => {
                let row = self
                    .active
                    .iter()
                    .position(|&i| self.rows[i].owner == RowOwner::Driver(*driver));
                row.map_or(f64::NAN, |k| -lambda[k])
            }
            OutputQuantity::ElementForce { force } => self.element_force(*force, t, v),
            OutputQuantity::ElementComponent {
                force,
                component,
                length,
            } => self.element_component(*force, *component, *length, t, v),
            OutputQuantity::ElementLength { force } if self.tire_of_element(*force).is_some() => {
                let i = self.tire_of_element(*force).expect("checked");
                self.tire_eval(&self.snap, i, t, false).forces.deflection
            }
            OutputQuantity::ElementLength { force } => {
                let i = self.terms.iter().position(|tm| tm.element == *force);
                i.map_or(f64::NAN, |i| {
                    let cv = self.term_value(i, Some(v));
                    match self.terms[i].law {
                        Law::Contact { gap, .. } => (gap - cv.val).max(0.0),
                        _ => cv.val,
                    }
                })
            }
            OutputQuantity::Tire { force, component } => {
                self.tire_of_element(*force).map_or(f64::NAN, |i| {
                    let f = self.tire_eval(&self.snap, i, t, false).forces;
                    [f.fx, f.fy, f.fz, f.kappa, f.alpha, f.deflection][*component]
                })
            }
            OutputQuantity::ContactFriction { force, component } => {
                self.contact_friction_output(*force, *component, t)
            }
            OutputQuantity::Energy => self.energy(t, q, v),
            OutputQuantity::WheelAngle {
                kind,
                body,
                axis,
                point1,
                point2,
                side,
            } => {
                let b = BodyRef::Body(*body);
                let a = super::kin::eval_quantity(
                    &self.layout,
                    &self.snap,
                    &QDef::Vector(b, *axis),
                    false,
                )
                .x
                .normalize();
                let s = point(self, b, point2).x - point(self, b, point1).x;
                match kind {
                    0 => (-a.z).clamp(-1.0, 1.0).asin(),
                    1 => a.x.atan2(side * a.y),
                    2 => (-s.x).atan2(s.z),
                    _ => (-side * s.y).atan2(s.z),
                }
            }
            OutputQuantity::Relative {
                order,
                body1,
                point1,
                body2,
                point2,
                frame,
                axes,
                component,
            } => {
                let e = super::kin::eval_quantity(
                    &self.layout,
                    &self.snap,
                    &QDef::Vector(*frame, axes.column(*component).into_owned()),
                    false,
                )
                .x;
                let (p1, p2) = (point(self, *body1, point1), point(self, *body2, point2));
                match order {
                    0 => e.dot(&(p2.x - p1.x)),
                    1 => e.dot(&(p2.xd - p1.xd)),
                    _ => {
                        // Global acceleration components of each point, as for `Acceleration`.
                        let acc_of = |sys: &System, body: BodyRef, p: &Vector3<f64>| {
                            Vector3::from_fn(|i, _| {
                                let g = QDef::Vector(BodyRef::Ground, unit(i));
                                let cv = sys.coord(&Coord::Dot(g, QDef::Point(body, *p)), Some(v));
                                cv.grad.dot(&cv.gather(acc)) + cv.conv
                            })
                        };
                        let (a1, a2) = (acc_of(self, *body1, point1), acc_of(self, *body2, point2));
                        e.dot(&(a2 - a1))
                    }
                }
            }
        }
    }

    /// Scalar force of element `e` (tension, torque or contact force; sum over bushing terms
    /// is not meaningful, so the translational magnitude is reported there).
    fn element_force(&self, e: usize, t: f64, v: &[f64]) -> f64 {
        if let Some(i) = self.tire_of_element(e) {
            return self.tire_eval(&self.snap, i, t, false).forces.fz;
        }
        let mut vals = Vec::new();
        for (i, tm) in self.terms.iter().enumerate() {
            if tm.element != e {
                continue;
            }
            let cv = self.term_value(i, Some(v));
            let (f, _, _) = self.term_law(i, cv.val, cv.rate, t);
            vals.push(match tm.law {
                Law::Spring { .. } => -f,
                _ => f,
            });
        }
        match vals.len() {
            0 => f64::NAN,
            1 => vals[0],
            _ => vals[..3].iter().map(|x| x * x).sum::<f64>().sqrt(),
        }
    }

    /// Kinetic + gravitational + elastic energy.
    pub fn energy(&mut self, t: f64, q: &[f64], v: &[f64]) -> f64 {
        if self.joint.is_some() {
            return self.with_joint(|j, s| {
                let (qa, va) = j.to_absolute(s, t, q, Some(v));
                s.energy(t, &qa, &va)
            });
        }
        let n = self.n_q();
        let mut m = DMatrix::zeros(n, n);
        self.mass_matrix(t, q, &mut m);
        let vv = DVector::from_column_slice(v);
        let mut e = 0.5 * vv.dot(&(&m * &vv));
        self.load(t, q, Some(v));
        for b in 0..self.bodies.len() {
            e -= self.bodies[b].mass * self.gravity.dot(&self.snap.r[b]);
        }
        for i in 0..self.terms.len() {
            let cv = self.term_value(i, Some(v));
            e += match &self.terms[i].law {
                Law::Spring { law, free, .. } => {
                    let x = cv.val - free;
                    match law {
                        SpringLaw::Linear { k, preload, .. } => 0.5 * k * x * x + preload * x,
                        SpringLaw::Poly { coeffs, .. } => coeffs
                            .iter()
                            .enumerate()
                            .map(|(i, a)| a * x.powi(i as i32 + 2) / (i as f64 + 2.0))
                            .sum(),
                        SpringLaw::Table { curve, .. } => curve.integral(x),
                    }
                }
                Law::Torsion {
                    k, free, spring, ..
                } => match spring {
                    Some(curve) => curve.integral(cv.val - free),
                    None => 0.5 * k * (cv.val - free).powi(2),
                },
                Law::Linear {
                    k,
                    rest,
                    preload,
                    curve,
                    ..
                } => {
                    let x = cv.val - rest;
                    match curve {
                        Some(curve) => curve.integral(x) - preload * x,
                        None => 0.5 * k * x * x - preload * x,
                    }
                }
                Law::Contact { gap, hertz, k, .. } => {
                    let d = (gap - cv.val).max(0.0);
                    if *hertz {
                        0.4 * k * d.powf(2.5)
                    } else {
                        0.5 * k * d * d
                    }
                }
                Law::Friction {
                    stiction: Some((s, slot)),
                    ..
                } if self.stick[*slot].stick => {
                    0.5 * s.k * (cv.val - self.stick[*slot].anchor).powi(2)
                }
                Law::Friction { .. } => 0.0,
                Law::Stop(stop) => stop.energy(cv.val),
            } - self.terms[i].preset * (cv.val - self.terms[i].preset_ref);
        }
        e + self.tire_energy(t) + self.contact_friction_energy(t)
    }
}

mod events;
mod joint_elements;

impl super::statics::CoordinateInfo for System {
    fn coordinate_is_length(&self, i: usize) -> bool {
        let b = self.body_of_coordinate(i);
        i - self.layout.offsets[b] < 3
    }
    fn coordinate_label(&self, i: usize) -> String {
        let b = self.body_of_coordinate(i);
        let k = i - self.layout.offsets[b];
        let name = &self.spec.bodies[b].name;
        match k {
            0..=2 => format!("body '{name}' {}", ["x", "y", "z"][k]),
            _ => format!("body '{name}' rotation (e{})", k - 3),
        }
    }
}

impl System {
    /// The body that owns coordinate `i`.
    pub fn body_of_coordinate(&self, i: usize) -> usize {
        self.layout
            .offsets
            .iter()
            .rposition(|&o| o <= i)
            .unwrap_or(0)
    }
}

/// Timing harness for the per-row evaluation (not a correctness test):
/// `cargo test --release --lib mbs::system::eval_timing -- --ignored --nocapture`.
#[cfg(test)]
mod eval_timing {
    use super::System;
    use crate::integrate::clock::thread_cpu_time;
    use crate::integrate::system::{ConstraintHessians, ForceJacobians};
    use crate::integrate::Mechanical;
    use nalgebra::DMatrix;

    fn report(file: &str, what: &str, runs: &mut [f64], sink: f64) {
        runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "{file} {what}: {:.2} us (min {:.2}, max {:.2}) [{sink:.3e}]",
            runs[runs.len() / 2],
            runs[0],
            runs[runs.len() - 1]
        );
    }
    use std::sync::Arc;

    /// Thread CPU time of one GGL-residual-like batch (`forces`, `constraints`,
    /// `constraint_jacobian`, `constraint_time_derivative`, `mass_matrix`), median/min/max
    /// over runs of `reps` batches, in microseconds per batch.
    #[test]
    #[ignore]
    fn engine_evaluation_timing() {
        for (file, reps) in [
            ("double_pendulum_stiff.toml", 20_000),
            ("pendulum_chain.toml", 5_000),
        ] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("models")
                .join(file);
            let spec = crate::mbs::load_model(&path).unwrap();
            let mut sys = System::new(Arc::new(spec)).unwrap();
            let x = sys.initial_state(0.0).unwrap();
            let (nq, nc) = (sys.n_q(), sys.n_c());
            println!("{file}: n_q {nq}, n_c {nc}");
            let v: Vec<f64> = (0..nq).map(|i| 0.1 * (i as f64).cos()).collect();
            let (mut f, mut phi, mut phi_t) = (vec![0.0; nq], vec![0.0; nc], vec![0.0; nc]);
            let mut jac = DMatrix::zeros(nc, nq);
            let mut m = DMatrix::zeros(nq, nq);
            let mut runs = Vec::new();
            let mut sink = 0.0;
            for _ in 0..7 {
                let c0 = thread_cpu_time();
                for r in 0..reps {
                    let t = 0.1 + 1e-9 * r as f64;
                    sys.mass_matrix(t, &x.q, &mut m);
                    sys.constraint_jacobian(t, &x.q, &mut jac);
                    sys.forces(t, &x.q, &v, &mut f);
                    sys.constraint_time_derivative(t, &x.q, &mut phi_t);
                    sys.constraints(t, &x.q, &mut phi);
                    sink += f[0] + phi[0] + phi_t[0] + jac[(0, 0)] + m[(0, 0)];
                }
                runs.push((thread_cpu_time() - c0) / reps as f64 * 1e6);
            }
            report(file, "residual batch", &mut runs, sink);
            // The analytic Jacobian's second-derivative terms.
            let lambda: Vec<f64> = (0..nc).map(|k| 1.0 + 0.1 * k as f64).collect();
            let (mut dq, mut dv, mut h) = (m.clone(), m.clone(), m.clone());
            let mut runs = Vec::new();
            for _ in 0..7 {
                let c0 = thread_cpu_time();
                for r in 0..reps / 4 {
                    let t = 0.1 + 1e-9 * r as f64;
                    sys.force_jacobians(t, &x.q, &v, &mut dq, &mut dv);
                    sys.constraint_force_jacobian(t, &x.q, &lambda, &mut h);
                    sink += dq[(0, 0)] + h[(0, 0)];
                }
                runs.push((thread_cpu_time() - c0) / (reps / 4) as f64 * 1e6);
            }
            report(file, "Hessian batch", &mut runs, sink);
        }
    }
}
