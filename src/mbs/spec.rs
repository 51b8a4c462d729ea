//! The resolved, validated model: what the loader produces from a model file and what the
//! engine, the variable table and the packager consume. All names are resolved to indices, all
//! geometry is in SI units, joint frames are given per body in body coordinates.
//!
//! Numbers that the importing tool may change at run time are [`Scalar`]s: either a constant or
//! a reference to a named parameter, resolved by the engine against the current parameter
//! values.

use nalgebra::{Matrix3, UnitQuaternion, Vector3};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A number in the model: a constant, or a parameter (by index into [`ModelSpec::parameters`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Scalar {
    Const(f64),
    Param(usize),
}

impl Scalar {
    pub fn eval(&self, params: &[f64]) -> f64 {
        match *self {
            Scalar::Const(x) => x,
            Scalar::Param(i) => params[i],
        }
    }
}

impl From<f64> for Scalar {
    fn from(x: f64) -> Self {
        Scalar::Const(x)
    }
}

/// What a body, joint end or force end is attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BodyRef {
    Ground,
    /// Index into [`ModelSpec::bodies`].
    Body(usize),
    /// Index into [`ModelSpec::frames`] (a ground point moved by prescribed motions).
    Frame(usize),
}

/// A frame fixed in a body (or ground / moving frame): origin and orientation, both in the
/// coordinates of that body. Joint axes are the frame's z axis.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LocalFrame {
    pub origin: Vector3<f64>,
    /// Columns are the frame's x, y, z axes in body coordinates (orthonormal, right-handed).
    pub axes: Matrix3<f64>,
}

impl LocalFrame {
    pub fn identity() -> Self {
        LocalFrame {
            origin: Vector3::zeros(),
            axes: Matrix3::identity(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BodyKind {
    Rigid,
    /// Point mass: no orientation, no inertia.
    Particle,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BodySpec {
    pub name: String,
    pub kind: BodyKind,
    pub mass: Scalar,
    /// Inertia tensor about the centre of mass in body coordinates: xx, yy, zz, xy, xz, yz.
    /// Ignored for particles.
    pub inertia: [Scalar; 6],
    /// Initial position of the centre of mass (global).
    pub position: Vector3<f64>,
    /// Initial orientation (body to global). Identity for particles.
    pub orientation: UnitQuaternion<f64>,
    /// Initial velocity of the centre of mass (global).
    pub velocity: Vector3<f64>,
    /// Initial angular velocity (global components).
    pub angular_velocity: Vector3<f64>,
}

/// A time function: what drives a driver, a moving frame coordinate or an actuator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Motion {
    /// The value of an FMU input (index into [`ModelSpec::inputs`]).
    Input(usize),
    /// `scale · u + offset` of FMU input `u` (a model file's `"0.05 + post_z"`); its rates are
    /// `scale · u̇`, `scale · ü`.
    AffineInput {
        input: usize,
        scale: f64,
        offset: f64,
    },
    Constant(Scalar),
    /// `initial + slope * max(t - start, 0)`.
    Ramp {
        initial: Scalar,
        slope: Scalar,
        start: Scalar,
    },
    /// `offset + amplitude * sin(2π frequency t + phase)`; frequency in Hz, phase in rad.
    Sine {
        offset: Scalar,
        amplitude: Scalar,
        frequency: Scalar,
        phase: Scalar,
    },
    /// `initial + (final − initial) (1 − cos(π (t − start)/duration))/2` on
    /// `[start, start + duration]`, constant outside.
    SmoothStep {
        initial: Scalar,
        final_value: Scalar,
        start: Scalar,
        duration: Scalar,
    },
    /// Cubic spline (not-a-knot or natural) through `(t, value)` samples from a CSV file,
    /// constant extrapolation outside.
    Table {
        file: PathBuf,
        t: Vec<f64>,
        values: Vec<f64>,
    },
}

impl Motion {
    /// The input this motion follows and `∂value/∂u` (1 for a bare input).
    pub fn input(&self) -> Option<(usize, f64)> {
        match *self {
            Motion::Input(i) => Some((i, 1.0)),
            Motion::AffineInput { input, scale, .. } => Some((input, scale)),
            _ => None,
        }
    }
}

/// A ground point that moves by prescribed translation (test-rig base, pendulum suspension).
/// Joints and forces attach to it like to a body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MovingFrameSpec {
    pub name: String,
    /// Position components x, y, z as functions of time.
    pub position: [Motion; 3],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JointKind {
    Revolute,
    Prismatic,
    Spherical,
    Universal,
    Cylindrical,
    Fixed,
    /// Massless rod between the two frame origins; its length is [`JointSpec::length`].
    Distance,
    /// Body 2's frame origin stays in the x-y plane of body 1's frame; for rigid bodies the
    /// rotation is about the plane normal only.
    Planar,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JointSpec {
    pub name: String,
    pub kind: JointKind,
    pub body1: BodyRef,
    pub body2: BodyRef,
    /// Joint frame on body 1 and on body 2, in their body coordinates. At the initial
    /// configuration the two frames coincide (except for distance joints, whose origins are the
    /// rod ends). For the universal joint the cross axes are frame1.z and frame2.x.
    pub frame1: LocalFrame,
    pub frame2: LocalFrame,
    /// Rod length of a distance joint.
    pub length: Option<Scalar>,
    /// Revolute joints: the angle at the initial configuration, `θ0` (`initial_angle`, or the
    /// bodies' relative rotation in (−π, π]). The frames give it only modulo 2π; the angle's
    /// branch starts here (`initial_angle = 3.6` reads 3.6, not 3.6 − 2π). `None` (explicit
    /// frames, other kinds): the frames' angle in (−π, π].
    #[serde(default)]
    pub initial_angle: Option<f64>,
}

/// What a driver prescribes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DriverTarget {
    /// Revolute angle (rad, relative rotation of the bodies' joint frames about frame1.z, zero
    /// where their x axes coincide) or prismatic travel (m, along frame1.z, zero at the initial
    /// configuration). Index into [`ModelSpec::joints`].
    JointCoordinate(usize),
    /// Global component (0 = x, 1 = y, 2 = z) of a point fixed in a body (body coordinates).
    PointComponent {
        body: usize,
        point: Vector3<f64>,
        component: usize,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriverSpec {
    pub name: String,
    pub target: DriverTarget,
    pub motion: Motion,
}

/// Force law of a point-to-point element as a function of the deflection `x = l − l0` and its
/// rate; the scalar force is tension-positive (pulls the two points together).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ForceLaw {
    /// `k x + c ẋ + preload`.
    Linear {
        stiffness: Scalar,
        damping: Scalar,
        preload: Scalar,
    },
    /// `Σ_i coeffs[i] x^(i+1) + c ẋ` (no constant term; use preload in Linear for that).
    Polynomial {
        coeffs: Vec<Scalar>,
        damping: Scalar,
    },
    /// Tabulated `force(x)` (the C² curve of [`crate::mbs::curves::Curve`]), plus `c ẋ`.
    Table {
        file: PathBuf,
        deflection: Vec<f64>,
        force: Vec<f64>,
        damping: Scalar,
    },
    /// `spring` (any other law, its damping 0) plus a tabulated damper force `f_d(ẋ)`
    /// (`damper_table`; [`crate::mbs::curves::Curve`]).
    DamperTable {
        spring: Box<ForceLaw>,
        file: PathBuf,
        velocity: Vec<f64>,
        force: Vec<f64>,
    },
}

/// A characteristic curve read from a two-column table file (`mbs::curves::Curve` evaluates
/// it): `x` strictly increasing, at least two rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurveTable {
    pub file: PathBuf,
    pub x: Vec<f64>,
    pub y: Vec<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ContactLaw {
    /// `F = k δ + c δ̇` (never pulling).
    Linear,
    /// `F = k δ^(3/2) + c δ^(3/2) δ̇` (Hunt–Crossley style damping, never pulling).
    Hertz,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ContactGeometry {
    /// Sphere of `radius` centred at `center` (body coordinates of `sphere_body`) against the
    /// plane through `point` with unit `normal` (coordinates of `plane_body`); contact when the
    /// sphere penetrates from the normal side.
    SpherePlane {
        sphere_body: BodyRef,
        center: Vector3<f64>,
        radius: Scalar,
        plane_body: BodyRef,
        point: Vector3<f64>,
        normal: Vector3<f64>,
    },
    SphereSphere {
        body1: BodyRef,
        center1: Vector3<f64>,
        radius1: Scalar,
        body2: BodyRef,
        center2: Vector3<f64>,
        radius2: Scalar,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ForceKind {
    /// Point-to-point spring-damper-actuator between frame origins (body coordinates).
    SpringDamper {
        body1: BodyRef,
        point1: Vector3<f64>,
        body2: BodyRef,
        point2: Vector3<f64>,
        free_length: Scalar,
        law: ForceLaw,
        /// Additional tension-positive actuator force.
        actuator: Option<Motion>,
    },
    /// Torque about frame1.z between two bodies: `−k (θ − θ0) − c θ̇`, θ the relative rotation
    /// of the frames (continuous in time; the initial deviation taken in (−π, π]).
    RotationalSpringDamper {
        body1: BodyRef,
        frame1: LocalFrame,
        body2: BodyRef,
        frame2: LocalFrame,
        stiffness: Scalar,
        damping: Scalar,
        free_angle: Scalar,
        /// Additional actuator torque (positive about frame1.z on body 2).
        actuator: Option<Motion>,
        /// Spring torque `f(θ − θ0)` in place of `k (θ − θ0)` (`table`; `mbs::curves`).
        #[serde(default)]
        table: Option<CurveTable>,
        /// Damper torque `f_d(θ̇)` in place of `c θ̇` (`damper_table`).
        #[serde(default)]
        damper_table: Option<CurveTable>,
        /// The angle θ at the initial configuration where its branch starts (as
        /// [`JointSpec::initial_angle`]; the joint's for a spring on a joint).
        #[serde(default)]
        initial_angle: Option<f64>,
    },
    /// Six-component linear bushing between two frames: translational and rotational stiffness
    /// and damping per axis of frame 1 (small relative rotations).
    Bushing {
        /// Force then torque on body 2 along frame-1 axes at the rest position (N, N m);
        /// `[f64; 6]` of zeros when none is given.
        preload: [f64; 6],
        body1: BodyRef,
        frame1: LocalFrame,
        body2: BodyRef,
        frame2: LocalFrame,
        stiffness: [Scalar; 3],
        damping: [Scalar; 3],
        rot_stiffness: [Scalar; 3],
        rot_damping: [Scalar; 3],
        /// Per component (x, y, z, rx, ry, rz): a force-deflection (torque-angle) table in
        /// place of that component's stiffness (`tables`; `mbs::curves`).
        #[serde(default)]
        tables: Box<[Option<CurveTable>; 6]>,
        /// Per component: a force-velocity (torque-angular velocity) damper curve in place of
        /// that component's damping (`damper_tables`; `mbs::curves`).
        #[serde(default)]
        damper_tables: Box<[Option<CurveTable>; 6]>,
    },
    /// Penalty contact, with tangential friction if `friction` is given
    /// (`mbs::contact_friction`).
    Contact {
        geometry: ContactGeometry,
        law: ContactLaw,
        stiffness: Scalar,
        damping: Scalar,
        #[serde(default)]
        friction: Option<ContactFrictionSpec>,
    },
    /// Regularised Coulomb friction in a prismatic joint: `−μ |N| tanh(ẋ / v_reg)` along the
    /// axis, `N` the joint's normal reaction from the last accepted step.
    PrismaticFriction {
        joint: usize,
        mu: Scalar,
        v_reg: Scalar,
        /// Static friction that holds (`mu_static` given): see `mbs::friction`.
        #[serde(default)]
        stiction: Option<StictionSpec>,
    },
    /// Regularised Coulomb friction torque in a revolute joint: `−μ r |F| tanh(θ̇ / v_reg)`,
    /// `F` the joint's reaction force from the last accepted step, `r` the friction radius.
    RevoluteFriction {
        joint: usize,
        mu: Scalar,
        v_reg: Scalar,
        radius: Scalar,
        stiction: Option<StictionSpec>,
    },
    /// One- or two-sided end stop on a revolute angle or prismatic travel (see `mbs::stops`).
    JointStop {
        joint: usize,
        lower: Option<Scalar>,
        upper: Option<Scalar>,
        stiffness: Scalar,
        damping: StopDamping,
    },
    /// Point-contact tire on the wheel of a revolute joint (`mbs::tire`).
    Tire(Box<TireSpec>),
}

/// Static friction of a joint friction element (`mbs::friction`): the element holds with a stiff
/// spring-damper to an anchor until the spring force exceeds `mu_static · N`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StictionSpec {
    pub mu_static: Scalar,
    /// Anchor spring stiffness (N/m, or N m/rad for a revolute joint).
    pub stiffness: Scalar,
    /// Anchor damping (N s/m, or N m s/rad).
    pub damping: Scalar,
    /// Below this speed (m/s or rad/s), slowing down, a slipping element sticks again
    /// (`None`: `v_reg`).
    pub v_stick: Option<Scalar>,
}

/// Friction of a penalty contact (`mbs::contact_friction`): regularized Coulomb on the
/// tangential slip velocity, with optional stiction (same keys and meanings as joint friction;
/// stiffness in N/m, damping in N s/m).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ContactFrictionSpec {
    pub mu: Scalar,
    pub v_reg: Scalar,
    pub stiction: Option<StictionSpec>,
}

/// How a joint stop dissipates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum StopDamping {
    /// Viscous damping coefficient (N s/m or N m s/rad).
    Damping(Scalar),
    /// Coefficient of restitution; the damping follows from the effective inertia of the joint
    /// coordinate at the initial configuration.
    Restitution(Scalar),
}

/// A tire: the wheel is body 2 of a revolute joint, its centre the joint point, its spin axis
/// the joint axis (see `mbs::tire` and docs/model-format.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TireSpec {
    pub joint: usize,
    pub wheel: usize,
    /// Wheel centre and unit spin axis in wheel coordinates.
    pub center: Vector3<f64>,
    pub axis: Vector3<f64>,
    pub radius: Scalar,
    pub stiffness: Scalar,
    pub damping: Scalar,
    pub mu: Scalar,
    /// Magic Formula `[B, C, E]`, longitudinal then lateral.
    pub mf_x: [Scalar; 3],
    pub mf_y: [Scalar; 3],
    pub v_low: Scalar,
    /// Road height `u(t)` (m).
    pub road_height: Motion,
    /// Road profile: file, ground x (m), height (m).
    pub road_profile: Option<(PathBuf, Vec<f64>, Vec<f64>)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForceSpec {
    pub name: String,
    pub kind: ForceKind,
    /// `static_preload = true`: a constant force (torque) along each of the element's
    /// coordinates is computed at initialization so that the design position is the static
    /// equilibrium (see `mbs::assembly`).
    #[serde(default)]
    pub static_preload: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParameterSpec {
    pub name: String,
    pub value: f64,
    pub unit: String,
    pub description: String,
    /// Whether it may be changed in step mode (FMI tunable). Geometry and masses are fixed after
    /// initialization; stiffness, damping, friction and gravity are tunable.
    pub tunable: bool,
    /// Its `value` is an expression of other parameters: it follows them (re-evaluated when
    /// the model is re-resolved at initialization) and cannot be set itself.
    #[serde(default)]
    pub calculated: bool,
    /// Something uses it (an element field, or another parameter's expression that is used);
    /// a parameter that acts on nothing is a load-time warning and is not exposed.
    #[serde(default = "yes")]
    pub acts: bool,
    /// The sign the fields it feeds require (the loader's rule, applied again when the
    /// importer sets the parameter).
    #[serde(default)]
    pub rule: Option<ParamRule>,
}

fn yes() -> bool {
    true
}

/// A parameter used as a stiffness, damping or friction coefficient must not be negative; one
/// used as a mass, length or radius must be positive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParamRule {
    /// Strictly positive (else: not negative).
    pub positive: bool,
    /// The field that asks for it (`[[forces]] 'spring' `stiffness``), for the message.
    pub what: String,
}

impl ParamRule {
    /// `Err(reason)` when `value` breaks the rule.
    pub fn check(&self, value: f64) -> Result<(), String> {
        if self.positive && value.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return Err(format!("must be positive: it is {}", self.what));
        }
        if !self.positive && value.partial_cmp(&0.0) == Some(std::cmp::Ordering::Less) {
            return Err(format!("must not be negative: it is {}", self.what));
        }
        Ok(())
    }
}

/// Largest magnitude of an input value or input derivative. The reconstruction of an input
/// over a step takes differences and divided differences of samples, which overflow long
/// before `f64::MAX`; no physical input comes near this.
pub const MAX_INPUT_MAGNITUDE: f64 = 1e100;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputSpec {
    pub name: String,
    pub unit: String,
    pub start: f64,
    pub description: String,
    /// How the value between communication points is rebuilt from the samples the importer
    /// sets (docs/fmi-runtime.md, "Inputs inside a communication step").
    pub reconstruction: Reconstruction,
}

/// How an input is reconstructed between the samples the importer sets at communication
/// points (when it gives no input derivatives and no intermediate updates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Reconstruction {
    /// Zero-order hold: the newest sample over the whole step, `u̇ = ü = 0`.
    Hold,
    /// First-order hold one step late: a straight line from the value at the communication
    /// point to the newest sample at the end of the step; never overshoots.
    Linear,
    /// C¹ cubic segments that follow the quadratic extrapolation of the samples while they
    /// are smooth and fall back to a bounded least-squares trend on steps and noise.
    #[default]
    Smooth,
}

impl Reconstruction {
    pub const ALL: [Reconstruction; 3] = [
        Reconstruction::Hold,
        Reconstruction::Linear,
        Reconstruction::Smooth,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Reconstruction::Hold => "hold",
            Reconstruction::Linear => "linear",
            Reconstruction::Smooth => "smooth",
        }
    }
    pub fn from_name(s: &str) -> Option<Reconstruction> {
        Self::ALL.into_iter().find(|r| r.name() == s)
    }
}

/// What an output reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum OutputQuantity {
    /// Global component of a body point's position / velocity / acceleration.
    Position {
        body: BodyRef,
        point: Vector3<f64>,
        component: usize,
    },
    Velocity {
        body: BodyRef,
        point: Vector3<f64>,
        component: usize,
    },
    Acceleration {
        body: BodyRef,
        point: Vector3<f64>,
        component: usize,
    },
    /// Rotation angle of a rigid body about a global axis (rad): from the reference direction
    /// `e` (global x, or y for an axis near x, projected normal to the axis) to the projection
    /// of the body-fixed `R e`; 0 at the identity orientation, continuous in time. The same
    /// words are in docs/model-format.md and docs/engine.md.
    Angle {
        body: usize,
        axis: Vector3<f64>,
    },
    /// Angular velocity component about a global axis.
    AngularVelocity {
        body: usize,
        axis: Vector3<f64>,
    },
    /// Joint coordinate (revolute angle / prismatic travel) and its rate.
    JointCoordinate {
        joint: usize,
    },
    JointRate {
        joint: usize,
    },
    /// Reaction force (acting on body 2) or torque (about frame 2's origin), component along
    /// the axes `axes` (joint frame 1 by default).
    JointForce {
        joint: usize,
        component: usize,
        #[serde(default)]
        axes: ReactionAxes,
    },
    JointTorque {
        joint: usize,
        component: usize,
        #[serde(default)]
        axes: ReactionAxes,
    },
    /// Generalized reaction of a driver (N for translation, N m for rotation), the force/torque
    /// the driver applies along/about its coordinate.
    DriverForce {
        driver: usize,
    },
    /// Force element's scalar force (tension / torque / contact force) and length (or angle /
    /// penetration).
    ElementForce {
        force: usize,
    },
    ElementLength {
        force: usize,
    },
    /// One of a bushing's six components (`component` 0-2 translation x, y, z along frame-1
    /// axes, 3-5 rotation about them): the force (torque) on body 2 its law gives, including
    /// the preload, or with `length` its deflection from the rest position (m, or the
    /// small-angle rotation).
    ElementComponent {
        force: usize,
        component: usize,
        length: bool,
    },
    /// A tire's quantity (`mbs::tire`), by [`TIRE_COMPONENTS`] index: `F_x`, `F_y`, `F_z` (N),
    /// `κ`, `α` (rad), deflection (m).
    Tire {
        force: usize,
        component: usize,
    },
    /// A contact's friction (`mbs::contact_friction`), by [`CONTACT_FRICTION_COMPONENTS`]
    /// index: the friction force on the sphere (body 1) in ground axes, the slip speed, the
    /// stick mode.
    ContactFriction {
        force: usize,
        component: usize,
    },
    /// Kinetic + gravitational + elastic potential energy.
    Energy,
    /// Relative kinematics of marker 2 with respect to marker 1 (points in body coordinates),
    /// component along axis `component` of `frame`'s body coordinates: `order` 0 position
    /// `e·(r₂ − r₁)`, 1 velocity `e·(ṙ₂ − ṙ₁)`, 2 acceleration `e·(r̈₂ − r̈₁)` (derivatives
    /// in the ground frame, resolved along the current `e`).
    /// Wheel alignment angle of a rigid body (the upright), vehicle axes x forward, y left,
    /// z up: `kind` 0 camber `asin(−a_z)`, 1 toe-in `atan2(a_x, side·a_y)` of the outboard
    /// wheel axis `a` (body coordinates); 2 caster `atan2(−s_x, s_z)`, 3 kingpin inclination
    /// `atan2(−side·s_y, s_z)` of the steering axis `s` from `point1` (lower) to `point2`
    /// (upper). `side` is the sign of the axis's initial y (+1 left, −1 right wheel).
    WheelAngle {
        kind: usize,
        body: usize,
        axis: Vector3<f64>,
        point1: Vector3<f64>,
        point2: Vector3<f64>,
        side: f64,
    },
    Relative {
        order: usize,
        body1: BodyRef,
        point1: Vector3<f64>,
        body2: BodyRef,
        point2: Vector3<f64>,
        frame: BodyRef,
        /// Columns: the resolving axes in `frame`'s body coordinates (the identity for the
        /// body's own axes, a joint frame's axes with `joint` + `frame = "frame1"/"frame2"`).
        #[serde(default = "identity_axes")]
        axes: Matrix3<f64>,
        component: usize,
    },
}

/// The `component` names of a `contact_friction` output, with their units.
pub const CONTACT_FRICTION_COMPONENTS: [(&str, &str); 5] = [
    ("fx", "N"),
    ("fy", "N"),
    ("fz", "N"),
    ("slip", "m/s"),
    ("stick", "1"),
];

fn identity_axes() -> Matrix3<f64> {
    Matrix3::identity()
}

/// The axes a joint reaction is resolved along (`frame` of a `joint_force` / `joint_torque`
/// output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum ReactionAxes {
    /// The joint's frame on body 1 (current orientation).
    #[default]
    Frame1,
    /// The joint's frame on body 2.
    Frame2,
    /// A body's own axes (ground: the global axes).
    Body(BodyRef),
    /// The rod of a distance joint: the scalar tension (positive pulling the ends together);
    /// `component` is unused.
    RodAxial,
}

/// The `component` names of a `tire` output, with their units.
pub const TIRE_COMPONENTS: [(&str, &str); 6] = [
    ("fx", "N"),
    ("fy", "N"),
    ("fz", "N"),
    ("kappa", "1"),
    ("alpha", "rad"),
    ("deflection", "m"),
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputSpec {
    pub name: String,
    pub unit: String,
    pub description: String,
    pub quantity: OutputQuantity,
    /// The output's value is `scale × quantity` (e.g. −1 for a compression-positive spring
    /// force, `180/π` for degrees). 1 unless the model file says otherwise.
    pub scale: f64,
}

/// Which coordinates the engine integrates (`[model] formulation`, docs/engine.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Formulation {
    /// 7 coordinates per rigid body (centre of mass, Euler parameters), 3 per particle; every
    /// joint a set of constraints.
    Absolute,
    /// One coordinate per degree of freedom of the spanning-tree joints (`mbs::joint`);
    /// loop-closing joints and the remaining drivers are the constraints. The default: at
    /// least as fast as `Absolute` on every gallery model (docs/benchmarks.md).
    #[default]
    Joint,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Initialization {
    /// Make the given state consistent: positions by Newton on the constraints (least change),
    /// velocities by projection.
    #[default]
    Consistent,
    /// Solve for static equilibrium (velocities zero) under the initial inputs.
    Static,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ExperimentSpec {
    pub start: f64,
    pub stop: f64,
    pub tolerance: f64,
    pub step: f64,
}

impl Default for ExperimentSpec {
    fn default() -> Self {
        ExperimentSpec {
            start: 0.0,
            stop: 1.0,
            tolerance: 1e-4,
            step: 1e-2,
        }
    }
}

/// The first character of `s` that XML 1.0 cannot represent, with its 1-based position in
/// characters: the control characters U+0000–U+001F other than tab, line feed and carriage
/// return, and U+FFFE, U+FFFF (XML 1.0 `Char`; not even as character references). The model's
/// description and its variables' names, units and descriptions are written into
/// `modelDescription.xml`: the loader refuses such characters there, and the XML writer checks
/// again before writing.
pub fn first_non_xml_char(s: &str) -> Option<(usize, char)> {
    s.chars()
        .enumerate()
        .find(|&(_, c)| {
            (c < '\u{20}' && !matches!(c, '\t' | '\n' | '\r')) || c == '\u{FFFE}' || c == '\u{FFFF}'
        })
        .map(|(i, c)| (i + 1, c))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    pub name: String,
    pub description: String,
    /// Gravity acceleration vector (global), each component possibly a parameter.
    pub gravity: [Scalar; 3],
    pub initialization: Initialization,
    /// Absolute (default) or joint coordinates.
    #[serde(default)]
    pub formulation: Formulation,
    pub experiment: ExperimentSpec,
    /// Default solver settings written into the FMU (overridable by `solver.*` parameters).
    pub solver: crate::integrate::Settings,
    pub parameters: Vec<ParameterSpec>,
    pub inputs: Vec<InputSpec>,
    pub bodies: Vec<BodySpec>,
    pub frames: Vec<MovingFrameSpec>,
    pub joints: Vec<JointSpec>,
    pub drivers: Vec<DriverSpec>,
    pub forces: Vec<ForceSpec>,
    pub outputs: Vec<OutputSpec>,
    /// The model file and every file it references (CSV tables), for packaging into
    /// `resources/`.
    pub source_files: Vec<PathBuf>,
    /// Plausibility warnings found at load (`file:line:col: element: ...`): likely unit slips,
    /// bodies nothing holds. Printed by `mbsfmu check`, logged by the FMU.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The model file's text, when loaded from text: parameters that act through geometry or
    /// expressions are applied by re-resolving it at initialization
    /// ([`crate::mbs::load_model_with_parameters`]).
    #[serde(default)]
    pub source_text: Option<String>,
    /// The contents of the files the model references (table files), as the loader read them
    /// (or, for a model read from `resolved_model.bin`, as the FMU read them at instantiation
    /// to check its token): resolving the model again with other parameter values reads the
    /// tables from here, never from disk again. Not serialized (not in `resolved_model.bin`,
    /// not in an FMU state: a restored state takes the instance's, the same files).
    #[serde(skip)]
    pub source_contents: SourceContents,
}

/// The bytes of the files a model references, by the path the loader records in
/// [`ModelSpec::source_files`] (the model file itself is [`ModelSpec::source_text`]). Shared:
/// a clone (of the spec, of an engine, of an FMU state) copies a pointer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SourceContents(std::sync::Arc<Vec<(PathBuf, Vec<u8>)>>);

impl SourceContents {
    pub fn new(files: Vec<(PathBuf, Vec<u8>)>) -> Self {
        SourceContents(std::sync::Arc::new(files))
    }

    /// The contents of `path` (compared as paths: `dir/./a.csv` is `dir/a.csv`).
    pub fn get(&self, path: &std::path::Path) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, b)| b.as_slice())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether both hold the same allocation (a clone of one another).
    pub fn ptr_eq(&self, other: &SourceContents) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl ModelSpec {
    /// Default parameter values, in [`ModelSpec::parameters`] order.
    pub fn default_parameters(&self) -> Vec<f64> {
        self.parameters.iter().map(|p| p.value).collect()
    }

    /// Read the files the model references (its [`ModelSpec::source_files`] but the model
    /// file) from disk into [`ModelSpec::source_contents`], once: for a model that comes
    /// without them (decoded from `resolved_model.bin`). The caller computes the model token
    /// from these very bytes (`description::token::model_token_of_spec`).
    pub fn read_source_contents(&mut self) -> Result<(), (PathBuf, std::io::Error)> {
        let model_file = self.source_files.first();
        let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::with_capacity(self.source_files.len());
        for p in self.source_files.iter().filter(|p| Some(*p) != model_file) {
            if files.iter().any(|(q, _)| q == p) {
                continue;
            }
            files.push((p.clone(), std::fs::read(p).map_err(|e| (p.clone(), e))?));
        }
        self.source_contents = SourceContents::new(files);
        Ok(())
    }
}
