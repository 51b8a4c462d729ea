//! The serde schema of a model file: what the TOML says, with the span of every value so that
//! the loader ([`super::loader`]) can point at the offending line and column. Elements are flat
//! structs holding every key any `type` of that element may use (serde's internally tagged
//! enums would buffer the input and lose the spans); the loader checks which keys a given
//! `type` allows.

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use toml::Spanned;

pub type S<T> = Spanned<T>;
/// A list of numbers (vectors: 3 components).
pub type NumList = S<Vec<S<Num>>>;

/// A numeric field: a number, or a string holding a parameter name or an expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Num {
    Number(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number, a parameter name or an expression string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num::Number(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num::Number(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num::Number(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
                Ok(Num::Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// A scalar or a list (bushing stiffness per axis).
#[derive(Debug, Clone, PartialEq)]
pub enum NumOrList {
    One(Num),
    List(Vec<S<Num>>),
}

impl<'de> Deserialize<'de> for NumOrList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NumOrList;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number, a parameter name, an expression string or a list of them")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(NumOrList::One(Num::Number(v as f64)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(NumOrList::One(Num::Number(v as f64)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(NumOrList::One(Num::Number(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(NumOrList::One(Num::Text(v.to_string())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(x) = seq.next_element::<S<Num>>()? {
                    out.push(x);
                }
                Ok(NumOrList::List(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// `inertia = [Ixx, Iyy, Izz]` or `inertia = { xx = .., yy = .., zz = .., xy = .., ... }`.
#[derive(Debug, Clone, PartialEq)]
pub enum RawInertia {
    Diagonal(Vec<S<Num>>),
    Full(Box<RawInertiaFull>),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawInertiaFull {
    pub xx: S<Num>,
    pub yy: S<Num>,
    pub zz: S<Num>,
    pub xy: Option<S<Num>>,
    pub xz: Option<S<Num>>,
    pub yz: Option<S<Num>>,
}

impl<'de> Deserialize<'de> for RawInertia {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawInertia;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list [Ixx, Iyy, Izz] or a table { xx, yy, zz, xy, xz, yz }")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(x) = seq.next_element::<S<Num>>()? {
                    out.push(x);
                }
                Ok(RawInertia::Diagonal(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                RawInertiaFull::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|f| RawInertia::Full(Box::new(f)))
            }
        }
        d.deserialize_any(V)
    }
}

/// `orientation = [w, x, y, z]` (unit quaternion, scalar first) or
/// `orientation = { axis = [..], angle = .. }`.
#[derive(Debug, Clone, PartialEq)]
pub enum RawOrientation {
    Quaternion(Vec<S<Num>>),
    AxisAngle(RawAxisAngle),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAxisAngle {
    pub axis: NumList,
    pub angle: S<Num>,
}

impl<'de> Deserialize<'de> for RawOrientation {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawOrientation;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a quaternion [w, x, y, z] or a table { axis = [x, y, z], angle = rad }",
                )
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(x) = seq.next_element::<S<Num>>()? {
                    out.push(x);
                }
                Ok(RawOrientation::Quaternion(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                RawAxisAngle::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(RawOrientation::AxisAngle)
            }
        }
        d.deserialize_any(V)
    }
}

/// A motion: a number / parameter / expression (constant), or a table
/// `{ input = .. }`, `{ table = "file.csv" }`, `{ type = "sine", ... }`.
#[derive(Debug, Clone, PartialEq)]
pub enum RawMotionValue {
    Constant(Num),
    Table(Box<RawMotion>),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMotion {
    pub input: Option<S<String>>,
    pub table: Option<S<String>>,
    #[serde(rename = "type")]
    pub kind: Option<S<String>>,
    pub value: Option<S<Num>>,
    pub initial: Option<S<Num>>,
    pub slope: Option<S<Num>>,
    pub start: Option<S<Num>>,
    pub offset: Option<S<Num>>,
    pub amplitude: Option<S<Num>>,
    pub frequency: Option<S<Num>>,
    pub phase: Option<S<Num>>,
    #[serde(rename = "final")]
    pub final_value: Option<S<Num>>,
    pub duration: Option<S<Num>>,
}

impl<'de> Deserialize<'de> for RawMotionValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawMotionValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a motion: a number, parameter or expression, or a table such as { input = \"name\" }, \
                     { table = \"file.csv\" } or { type = \"sine\", ... }",
                )
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(RawMotionValue::Constant(Num::Number(v as f64)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(RawMotionValue::Constant(Num::Number(v as f64)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(RawMotionValue::Constant(Num::Number(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(RawMotionValue::Constant(Num::Text(v.to_string())))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                RawMotion::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|m| RawMotionValue::Table(Box::new(m)))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFile {
    pub model: S<RawModel>,
    pub experiment: Option<S<RawExperiment>>,
    pub solver: Option<S<RawSolver>>,
    #[serde(default)]
    pub parameters: Vec<S<RawParameter>>,
    #[serde(default)]
    pub inputs: Vec<S<RawInput>>,
    #[serde(default)]
    pub bodies: Vec<S<RawBody>>,
    #[serde(default)]
    pub frames: Vec<S<RawFrame>>,
    #[serde(default)]
    pub joints: Vec<S<RawJoint>>,
    #[serde(default)]
    pub drivers: Vec<S<RawDriver>>,
    #[serde(default)]
    pub forces: Vec<S<RawForce>>,
    #[serde(default)]
    pub outputs: Vec<S<RawOutput>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    pub name: S<String>,
    pub description: Option<S<String>>,
    pub gravity: NumList,
    pub initial: Option<S<String>>,
    pub formulation: Option<S<String>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExperiment {
    pub start: Option<S<Num>>,
    pub stop: Option<S<Num>>,
    pub tolerance: Option<S<Num>>,
    pub step: Option<S<Num>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSolver {
    pub integrator: Option<S<String>>,
    pub jacobian: Option<S<String>>,
    pub rtol: Option<S<Num>>,
    pub atol: Option<S<Num>>,
    pub max_step: Option<S<Num>>,
    pub initial_step: Option<S<Num>>,
    pub fixed_step: Option<S<Num>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawParameter {
    pub name: S<String>,
    pub value: S<Num>,
    pub unit: Option<S<String>>,
    pub description: Option<S<String>>,
    pub tunable: Option<S<bool>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawInput {
    pub name: S<String>,
    pub unit: Option<S<String>>,
    pub start: Option<S<Num>>,
    pub description: Option<S<String>>,
    pub reconstruction: Option<S<String>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBody {
    pub name: S<String>,
    #[serde(rename = "type")]
    pub kind: Option<S<String>>,
    pub mass: S<Num>,
    pub inertia: Option<S<RawInertia>>,
    pub position: NumList,
    pub orientation: Option<S<RawOrientation>>,
    pub velocity: Option<NumList>,
    pub angular_velocity: Option<NumList>,
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFrame {
    pub name: S<String>,
    pub position: S<Vec<S<RawMotionValue>>>,
    pub description: Option<String>,
}

/// A joint frame given explicitly in body coordinates.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLocalFrame {
    pub origin: Option<NumList>,
    pub axis: Option<NumList>,
    pub x_axis: Option<NumList>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawJoint {
    pub name: S<String>,
    #[serde(rename = "type")]
    pub kind: S<String>,
    pub body1: S<String>,
    pub body2: S<String>,
    pub point: Option<NumList>,
    pub axis: Option<NumList>,
    pub x_axis: Option<NumList>,
    pub axis2: Option<NumList>,
    pub initial_angle: Option<S<Num>>,
    pub frame1: Option<S<RawLocalFrame>>,
    pub frame2: Option<S<RawLocalFrame>>,
    pub point1: Option<NumList>,
    pub point2: Option<NumList>,
    pub length: Option<S<Num>>,
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDriver {
    pub name: S<String>,
    pub joint: Option<S<String>>,
    pub body: Option<S<String>>,
    pub point: Option<NumList>,
    pub component: Option<S<String>>,
    pub motion: S<RawMotionValue>,
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawForce {
    pub name: S<String>,
    #[serde(rename = "type")]
    pub kind: S<String>,
    pub description: Option<String>,
    // Two-body elements.
    pub body1: Option<S<String>>,
    pub body2: Option<S<String>>,
    pub point1: Option<NumList>,
    pub point2: Option<NumList>,
    // Spring-damper laws.
    pub law: Option<S<String>>,
    pub stiffness: Option<S<NumOrList>>,
    pub damping: Option<S<NumOrList>>,
    pub preload: Option<S<Num>>,
    pub coeffs: Option<NumList>,
    pub table: Option<S<String>>,
    /// Damper curve: CSV of velocity (m/s), force (N) (src/mbs/curves.rs).
    pub damper_table: Option<S<String>>,
    pub free_length: Option<S<Num>>,
    pub actuator: Option<S<RawMotionValue>>,
    /// Preload from equilibrium (spring-dampers, rotational springs, bushings).
    pub static_preload: Option<S<bool>>,
    // Rotational spring-damper, bushing.
    pub joint: Option<S<String>>,
    pub point: Option<NumList>,
    pub axis: Option<NumList>,
    pub x_axis: Option<NumList>,
    pub initial_angle: Option<S<Num>>,
    pub free_angle: Option<S<Num>>,
    pub frame1: Option<S<RawLocalFrame>>,
    pub frame2: Option<S<RawLocalFrame>>,
    pub rot_stiffness: Option<NumList>,
    pub rot_damping: Option<NumList>,
    /// Bushing preload: force / torque on body 2 along frame-1 axes at the rest position.
    pub preload_force: Option<NumList>,
    pub preload_torque: Option<NumList>,
    /// Bushing characteristic curves per component (`mbs::curves`).
    pub tables: Option<S<RawAxisTables>>,
    /// Bushing damper curves per component: velocity, force (`mbs::curves`).
    pub damper_tables: Option<S<RawAxisTables>>,
    // Contact.
    pub geometry: Option<S<String>>,
    pub sphere: Option<S<String>>,
    pub center: Option<NumList>,
    pub radius: Option<S<Num>>,
    pub plane: Option<S<String>>,
    pub normal: Option<NumList>,
    pub center1: Option<NumList>,
    pub center2: Option<NumList>,
    pub radius1: Option<S<Num>>,
    pub radius2: Option<S<Num>>,
    // Prismatic friction.
    pub mu: Option<S<Num>>,
    pub v_reg: Option<S<Num>>,
    // Joint friction with stiction, joint stops (mbs::friction, mbs::stops).
    pub mu_static: Option<S<Num>>,
    pub stiction_stiffness: Option<S<Num>>,
    pub stiction_damping: Option<S<Num>>,
    pub stiction_velocity: Option<S<Num>>,
    pub lower: Option<S<Num>>,
    pub upper: Option<S<Num>>,
    pub restitution: Option<S<Num>>,
    // Tire (`mbs::tire`; also `joint`, `radius`, `stiffness`, `damping`, `mu`, `v_reg`).
    pub road_height: Option<S<RawMotionValue>>,
    pub road_profile: Option<S<String>>,
    pub magic_formula: Option<S<RawMagicFormula>>,
}

/// A bushing's per-component table files: force against deflection (x, y, z) and torque
/// against rotation (rx, ry, rz).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAxisTables {
    pub x: Option<S<String>>,
    pub y: Option<S<String>>,
    pub z: Option<S<String>>,
    pub rx: Option<S<String>>,
    pub ry: Option<S<String>>,
    pub rz: Option<S<String>>,
}

impl RawAxisTables {
    /// The six entries in component order.
    pub fn by_component(&self) -> [&Option<S<String>>; 6] {
        [&self.x, &self.y, &self.z, &self.rx, &self.ry, &self.rz]
    }
}

/// Magic Formula coefficients of a tire: `B`, `C`, `E` per direction (x longitudinal, y
/// lateral).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMagicFormula {
    pub bx: Option<S<Num>>,
    pub cx: Option<S<Num>>,
    pub ex: Option<S<Num>>,
    pub by: Option<S<Num>>,
    pub cy: Option<S<Num>>,
    pub ey: Option<S<Num>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOutput {
    pub name: S<String>,
    #[serde(rename = "type")]
    pub kind: S<String>,
    pub unit: Option<S<String>>,
    pub description: Option<S<String>>,
    pub body: Option<S<String>>,
    pub point: Option<NumList>,
    pub component: Option<S<String>>,
    pub axis: Option<NumList>,
    pub joint: Option<S<String>>,
    pub driver: Option<S<String>>,
    pub force: Option<S<String>>,
    pub scale: Option<S<Num>>,
    /// Relative kinematics outputs: the two markers and the resolving frame.
    pub body1: Option<S<String>>,
    pub point1: Option<NumList>,
    pub body2: Option<S<String>>,
    pub point2: Option<NumList>,
    pub frame: Option<S<String>>,
}

/// Which optional keys are present, with their spans: the loader rejects keys that the
/// element's `type` does not use.
pub trait PresentKeys {
    fn present_keys(&self) -> Vec<(&'static str, std::ops::Range<usize>)>;
}

macro_rules! present_keys {
    ($t:ty, [$($f:ident),* $(,)?]) => {
        impl PresentKeys for $t {
            fn present_keys(&self) -> Vec<(&'static str, std::ops::Range<usize>)> {
                let mut v = Vec::new();
                $( if let Some(x) = &self.$f { v.push((stringify!($f), x.span())); } )*
                v
            }
        }
    };
}

present_keys!(
    RawJoint,
    [
        point,
        axis,
        x_axis,
        axis2,
        initial_angle,
        frame1,
        frame2,
        point1,
        point2,
        length
    ]
);
present_keys!(
    RawForce,
    [
        body1,
        body2,
        point1,
        point2,
        law,
        stiffness,
        damping,
        preload,
        coeffs,
        table,
        damper_table,
        free_length,
        actuator,
        static_preload,
        joint,
        point,
        axis,
        x_axis,
        initial_angle,
        free_angle,
        frame1,
        frame2,
        rot_stiffness,
        rot_damping,
        preload_force,
        preload_torque,
        tables,
        damper_tables,
        geometry,
        sphere,
        center,
        radius,
        plane,
        normal,
        center1,
        center2,
        radius1,
        radius2,
        mu,
        v_reg,
        road_height,
        road_profile,
        magic_formula,
        mu_static,
        stiction_stiffness,
        stiction_damping,
        stiction_velocity,
        lower,
        upper,
        restitution
    ]
);
present_keys!(
    RawOutput,
    [body, point, component, axis, joint, driver, force, body1, point1, body2, point2, frame]
);
present_keys!(
    RawMotion,
    [
        input,
        table,
        kind,
        value,
        initial,
        slope,
        start,
        offset,
        amplitude,
        frequency,
        phase,
        final_value,
        duration
    ]
);

/// A lenient view of the file used only to say which element a serde error is in: each
/// element's span and name, nothing else.
#[derive(Debug, Default, Deserialize)]
pub struct LooseFile {
    pub model: Option<S<IgnoredAny>>,
    pub experiment: Option<S<IgnoredAny>>,
    pub solver: Option<S<IgnoredAny>>,
    pub parameters: Option<Vec<S<LooseElement>>>,
    pub inputs: Option<Vec<S<LooseElement>>>,
    pub bodies: Option<Vec<S<LooseElement>>>,
    pub frames: Option<Vec<S<LooseElement>>>,
    pub joints: Option<Vec<S<LooseElement>>>,
    pub drivers: Option<Vec<S<LooseElement>>>,
    pub forces: Option<Vec<S<LooseElement>>>,
    pub outputs: Option<Vec<S<LooseElement>>>,
}

#[derive(Debug, Default)]
pub struct LooseElement {
    pub name: Option<String>,
}

impl<'de> Deserialize<'de> for LooseElement {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LooseElement;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut name = None;
                while let Some(k) = map.next_key::<String>()? {
                    if k == "name" {
                        if let toml::Value::String(s) = map.next_value::<toml::Value>()? {
                            name = Some(s);
                        }
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(LooseElement { name })
            }
        }
        d.deserialize_map(V)
    }
}
