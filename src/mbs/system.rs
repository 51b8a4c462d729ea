//! The multibody system in absolute coordinates: `q = (r, p)` per rigid body (centre of mass
//! and Euler parameters, 7 coordinates with the normalization constraint `½(pᵀp − 1) = 0`),
//! `q = r` per particle. Implements every trait of `integrate::system`.
//!
//! Rigid-body inertia with Euler parameters (Haug, ch. 11): `M_p = 4 Gᵀ J' G`, applied torque
//! `2 Gᵀ n'`, gyroscopic force `−2 Gᵀ (ω' × J' ω')`, `ω' = 2 G ṗ`. `M_p` is singular along
//! `p`; we add `c p pᵀ` (`c = 4 tr(J')/3`) so that `M` itself is regular (methods that need
//! `M⁻¹` work). This changes only the multiplier of the normalization constraint, not the
//! motion, because `pᵀ p̈ = −ṗᵀ ṗ` is fixed by that constraint.

/// A dropped constraint row's residual, relative to the model's size, beyond which it no
/// longer holds ([`System::check_dropped_rows`]).
const DROPPED_ROW_TOL: f64 = 1e-6;

mod build;
mod contact_friction;
mod integrator_traits;
mod laws;
mod output_derivs;
mod outputs;
mod reactions;
mod sparse;
mod tires;
pub use output_derivs::InputDerivatives;

use super::inputs::InputSignals;
use super::kin::{
    eval_coord, eval_coord_need, raw_angle, Coord, CoordVal, LMat, Layout, Need, Snapshot,
};
use super::motion::MotionSlot;
use super::spec::*;
use super::ModelError;
use crate::integrate::system::Mechanical;
use crate::integrate::MechState;
use nalgebra::{DMatrix, DVector, Matrix3, Vector3, Vector4};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What assembly found: sizes, redundant rows, how far the given state was from consistent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Largest constraint residual of the state given in the model file (absolute
    /// coordinates, in both formulations).
    pub initial_residual: f64,
    /// What assembly changed of the bodies' state given in the model file, from the body poses
    /// and velocities before and after (the same in both formulations). Positions: the file's
    /// against the assembled ones (before any static equilibrium). Velocities: the file's
    /// (with `initial = "static"`: rest) against the initial state's.
    pub assembly: BodyChanges,
    /// Residual after assembly (positions).
    pub final_residual: f64,
    /// Per body (file order): how far the static equilibrium moved it from the assembled
    /// position, `(name, translation of the centre in m, rotation angle in rad)` (empty
    /// without `initial = "static"`).
    pub body_moves: Vec<(String, f64, f64)>,
    /// Static equilibrium iterations (Newton and relaxation steps), when it was solved.
    pub static_iterations: Option<(usize, usize)>,
}

/// The largest change of one kind over the bodies, and the body it belongs to (empty when no
/// body changed).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LargestChange {
    pub value: f64,
    pub body: String,
}

/// What initialization changed of the bodies' state, the largest of each kind, in physical
/// units (the norm of each body's change, not of single coordinates).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BodyChanges {
    /// Displacement of the centre of mass, m.
    pub displacement: LargestChange,
    /// Rotation angle, rad (rigid bodies).
    pub rotation: LargestChange,
    /// Change of the centre-of-mass velocity, m/s.
    pub velocity: LargestChange,
    /// Change of the angular velocity (global), rad/s (rigid bodies).
    pub angular_velocity: LargestChange,
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
    /// The time the references were last moved to (an accepted step, the assembly).
    pub(super) angle_t: f64,
    /// The references at the model's initial configuration (rest angles are measured there,
    /// whatever the current branch).
    angle_refs0: Vec<f64>,
    /// The angle coordinates by slot (to update references at accepted steps).
    pub(super) angle_coords: Vec<Coord>,
    /// Per angle slot: its value at the model's initial configuration where the model gives
    /// it beyond (−π, π] (a revolute joint's `θ0`, [`JointSpec::initial_angle`]); the branch
    /// references start nearest it. `None`: the raw angle in (−π, π].
    ///
    /// [`JointSpec::initial_angle`]: super::spec::JointSpec::initial_angle
    #[serde(default)]
    pub(super) angle_starts: Vec<Option<f64>>,
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
    /// Static equilibrium is being sought: its accepted iterates keep the stick states as they
    /// are (a static equilibrium with stiction is one where it holds; the normal forces that
    /// set the limit are not known before it).
    #[serde(skip)]
    pub(super) stick_frozen: bool,
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
            angle_t: 0.0,
            angle_refs0: Vec::new(),
            angle_coords: Vec::new(),
            angle_starts: Vec::new(),
            joint_coords: Vec::new(),
            output_coords: Vec::new(),
            joint_normal: vec![0.0; spec.joints.len()],
            stick: Vec::new(),
            stick_backup: Vec::new(),
            stick_frozen: false,
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

    /// Parameters whose values are far outside what double-precision solvers handle (beyond
    /// 1e30 or below 1e-30 in magnitude, not 0), as a sentence for a failure's message: a
    /// damping of 1e308 fails the start as a singular matrix, a gravity of 1e300 as a Newton
    /// failure, neither naming it.
    pub fn extreme_parameters(&self) -> Option<String> {
        let named: Vec<String> = self
            .spec
            .parameters
            .iter()
            .zip(&self.params)
            .filter(|(_, v)| v.abs() > 1e30 || (**v != 0.0 && v.abs() < 1e-30))
            .map(|(p, v)| format!("`{}` = {v:e}", p.name))
            .collect();
        (!named.is_empty()).then(|| {
            format!(
                "parameter {} far outside the range a double-precision solver handles (a \
                 magnitude between 1e-30 and 1e30): a value out of range?",
                named.join(", ")
            )
        })
    }

    /// Change a parameter ([`System::set_parameters`] of one).
    pub fn set_parameter(&mut self, i: usize, value: f64) -> Result<(), ModelError> {
        self.set_parameters(&[(i, value)])
    }

    /// Change parameters together, all or none; element data are rebuilt (the state is kept).
    /// The values are checked against every rule of the model file they take part in.
    pub fn set_parameters(&mut self, changes: &[(usize, f64)]) -> Result<(), ModelError> {
        self.set_parameters_with(changes, true)
    }

    /// After a deserialized FMU state: the table files' contents (not part of a serialized
    /// state) from `spec`, the model the state belongs to (the same files), so that resolving
    /// the model again reads no file. A no-op where the engine has them.
    pub fn adopt_source_contents(&mut self, spec: &ModelSpec) {
        let have = &self.spec.source_contents;
        if have.ptr_eq(&spec.source_contents) || !have.is_empty() || spec.source_contents.is_empty()
        {
            return;
        }
        Arc::make_mut(&mut self.spec).source_contents = spec.source_contents.clone();
    }

    /// Every rule of the model file on the current parameter values (the loader run on them).
    pub fn check_parameters(&self) -> Result<(), ModelError> {
        self.check_parameter_values(&self.params)
    }

    fn check_parameter_values(&self, values: &[f64]) -> Result<(), ModelError> {
        if let Some(checked) = super::loader::resolve_again(&self.spec, values) {
            checked?;
        }
        Ok(())
    }

    /// [`System::set_parameters`]; with `rules = false` without the model file's rules (the
    /// co-simulation layer defers them to the end of initialization, where parameters are
    /// set one at a time: a master moving both limits of a stop sets one of them first).
    pub fn set_parameters_with(
        &mut self,
        changes: &[(usize, f64)],
        rules: bool,
    ) -> Result<(), ModelError> {
        let mut candidate = self.params.clone();
        for &(i, value) in changes {
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
            candidate[i] = value;
        }
        // The model file's rules that involve these parameters (an axis, an inertia's triangle
        // inequality, a restitution ≤ 1, limits in order) are the loader's: run it on the
        // candidate values, so a value the file would refuse is refused here too, with the
        // loader's message, and the instance keeps its previous values.
        if rules {
            self.check_parameter_values(&candidate)?;
        }
        let old = std::mem::replace(&mut self.params, candidate);
        if let Err(e) = self.build() {
            self.params = old;
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

    /// Branch references at `q` (the file's configuration, or where an assembly restarts from
    /// it): the raw angles, each on the branch nearest its slot's start `θ0` where the model
    /// gives one (a revolute joint with `initial_angle = 3.6` starts at 3.6, not 3.6 − 2π).
    fn reset_angle_refs_at(&mut self, q: &[f64], t: f64) {
        self.load(t, q, None);
        for (i, c) in self.angle_coords.iter().enumerate() {
            let raw = raw_angle(&self.layout, &self.snap, c).unwrap_or(0.0);
            self.angle_refs[i] = match self.angle_starts.get(i).copied().flatten() {
                Some(start) => super::math::unwrap_near(raw, start),
                None => raw,
            };
        }
        self.angle_t = t;
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
    /// drops redundant constraint rows (reported in [`System::dropped`]). The run continues
    /// from `t0`, so motions are read by their right limits there (a ramp starting at `t0`
    /// already moves), as the co-simulation layer does.
    pub fn initial_state(&mut self, t0: f64) -> Result<MechState, ModelError> {
        self.re_resolve()?;
        self.set_motion_right_limit_at(t0);
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
    /// model was resolved with, the model text is resolved again with them (with the table
    /// files read when the model was loaded: [`super::loader::resolve_again`]) and the system
    /// rebuilt (inputs kept). Without the text (a model built in code) only the fields that
    /// name a parameter follow (as during stepping).
    fn re_resolve(&mut self) -> Result<(), ModelError> {
        self.resolve_parameters()
    }

    /// The calculated parameters (and everything resolved from the model text) for the
    /// parameters set so far, before initialization ([`System::re_resolve`]); a no-op when
    /// the model was resolved with them.
    pub fn resolve_parameters(&mut self) -> Result<(), ModelError> {
        if self.spec.source_text.is_none() {
            return Ok(());
        }
        let same = self
            .spec
            .parameters
            .iter()
            .zip(&self.params)
            .all(|(p, v)| p.calculated || p.value == *v);
        if same {
            return Ok(());
        }
        // From the text and table files read when the model was loaded (never from disk).
        let Some(resolved) = super::loader::resolve_again(&self.spec, &self.params) else {
            return Ok(());
        };
        let mut spec = resolved?;
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

    /// The rows assembly dropped as redundant must keep holding along the motion. One that
    /// depends on the others only in the initial configuration (a mechanism drawn in a
    /// singular position: rods whose spheres touch where they meet) is not enforced, and the
    /// mechanism can come apart along it without a sign; this names it. At a state of either
    /// formulation (joint coordinates: at its absolute positions). A dropped row counts as
    /// broken when its residual exceeds [`DROPPED_ROW_TOL`] of the model's size and a hundred
    /// times the largest kept row's (truly redundant rows follow the kept ones' drift).
    pub(crate) fn check_dropped_rows(&mut self, x: &MechState) -> Result<(), ModelError> {
        if self.active.len() >= self.rows.len() {
            return Ok(());
        }
        if self.joint.is_some() {
            return self.with_joint(|j, s| {
                let qa = j.absolute_positions(s, x.t, &x.q);
                s.check_dropped_rows_at(x.t, qa)
            });
        }
        self.check_dropped_rows_at(x.t, &x.q)
    }

    /// Only the dropped rows are evaluated on the way that passes (the check runs at every
    /// communication point); the kept rows only when a dropped one is above the tolerance.
    fn check_dropped_rows_at(&mut self, t: f64, q: &[f64]) -> Result<(), ModelError> {
        self.load(t, q, None);
        let scale = self
            .layout
            .offsets
            .iter()
            .flat_map(|&o| q[o..o + 3].iter())
            .fold(1.0f64, |m, x| m.max(x.abs()));
        // `active` is ascending: walk it alongside the rows to visit the dropped ones.
        debug_assert!(self.active.windows(2).all(|w| w[0] < w[1]));
        let (mut worst, mut next_kept) = ((0.0f64, usize::MAX), 0);
        for (i, r) in self.rows.iter().enumerate() {
            if self.active.get(next_kept) == Some(&i) {
                next_kept += 1;
                continue;
            }
            let phi = self.row_eval(r, t, None, q, Need::VALUE).0.abs();
            if phi > worst.0 || phi.is_nan() {
                worst = (phi, i);
            }
        }
        let (phi, i) = worst;
        if i == usize::MAX || phi <= DROPPED_ROW_TOL * scale {
            return Ok(());
        }
        let kept = self.active.iter().fold(0.0f64, |m, &k| {
            m.max(
                self.row_eval(&self.rows[k], t, None, q, Need::VALUE)
                    .0
                    .abs(),
            )
        });
        if phi <= 100.0 * kept {
            return Ok(());
        }
        Err(self.err(format!(
            "constraint `{}` was dropped at assembly as redundant (it depended on the other \
             constraints in the initial configuration), but at t = {t} it is violated by \
             {phi:.3e} while the others hold to {kept:.1e}: the mechanism started in a singular \
             position, where its constraints are dependent only momentarily, and now comes apart \
             along the dropped one. Start it away from that position (or remove the joint if it \
             is meant to be redundant)",
            self.rows[i].label
        )))
    }

    pub(crate) fn all_rows_count(&self) -> usize {
        self.rows.len()
    }

    pub(crate) fn all_row_label(&self, i: usize) -> &str {
        &self.rows[i].label
    }

    /// Whether row `i` is an Euler-parameter normalization.
    pub(crate) fn row_is_normalization(&self, i: usize) -> bool {
        matches!(self.rows[i].owner, RowOwner::Normalization(_))
    }

    /// Whether row `i` belongs to a driver (it prescribes a motion).
    pub(crate) fn row_is_driver(&self, i: usize) -> bool {
        matches!(self.rows[i].owner, RowOwner::Driver(_))
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
        self.angle_t = t;
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
        // Reaction on body 2 about frame 2's origin; when body 2 is ground or a moving frame,
        // minus the reaction on body 1 about that same point (not about frame 1's origin: the
        // frames of a prismatic, cylindrical or planar joint do not coincide).
        let (b, sign) = match (js.body2, js.body1) {
            (BodyRef::Body(b2), _) => (b2, 1.0),
            (_, BodyRef::Body(b1)) => (b1, -1.0),
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
        // Frame 2's origin from body `b`'s centre of mass (world axes).
        let arm = match js.body2 {
            BodyRef::Body(_) if width == 3 => Vector3::zeros(),
            BodyRef::Body(_) => self.snap.a[b] * js.frame2.origin,
            BodyRef::Ground => js.frame2.origin - self.snap.r[b],
            BodyRef::Frame(f) => self.snap.frame[f][0] + js.frame2.origin - self.snap.r[b],
        };
        // Q_p = 2 Eᵀ n  ⇒  n = ½ E Q_p (unit p); torque about the centre of mass, moved to
        // frame 2's origin: n_P = n − (x_P − r) × F.
        let n_cm = if width == 3 {
            Vector3::zeros()
        } else {
            let qp = Vector4::new(gen[3], gen[4], gen[5], gen[6]);
            0.5 * super::math::e_mat(&self.snap.p[b]) * qp
        };
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
