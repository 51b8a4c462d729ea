//! The variable table: every FMU variable with its value reference, shared by the runtime
//! (mapping value references to model quantities) and the packager (writing
//! `modelDescription.xml`). One source of truth: both call [`VariableTable::from_spec`].

pub mod bake;
pub mod capabilities;
pub mod deps;
pub mod package;
pub mod platform;
pub mod strip;
pub mod token;
pub mod units;
pub mod xml;

pub use capabilities::Capabilities;
pub use xml::{FmiVersion, ModelDescription};

use crate::integrate::{JacobianStrategy, Method};
use crate::mbs::spec::ModelSpec;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Causality {
    Parameter,
    /// Computed from other parameters at initialization; readable, not settable.
    CalculatedParameter,
    Input,
    Output,
    Local,
    Independent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variability {
    Constant,
    Fixed,
    Tunable,
    Discrete,
    Continuous,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Initial {
    Exact,
    Approx,
    Calculated,
}

/// The FMI type of a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarType {
    /// FMI 2 Real / FMI 3 Float64.
    Float64,
    /// FMI 2 Integer / FMI 3 Int64 (counters).
    Int64,
    /// FMI 2 Enumeration / FMI 3 Enumeration, with its type.
    Enumeration(EnumType),
}

/// Enumeration types declared in `TypeDefinitions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnumType {
    Integrator,
    Jacobian,
}

impl EnumType {
    pub fn type_name(self) -> &'static str {
        match self {
            EnumType::Integrator => "SolverIntegrator",
            EnumType::Jacobian => "SolverJacobian",
        }
    }
    /// Items `(name, value)`; values start at 1 as FMI 2 requires.
    pub fn items(self) -> Vec<(&'static str, i64)> {
        match self {
            EnumType::Integrator => Method::ALL
                .iter()
                .enumerate()
                .map(|(i, m)| (m.name(), i as i64 + 1))
                .collect(),
            EnumType::Jacobian => JacobianStrategy::ALL
                .iter()
                .enumerate()
                .map(|(i, j)| (j.name(), i as i64 + 1))
                .collect(),
        }
    }
}

/// Solver settings exposed as parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SolverSetting {
    Integrator,
    Jacobian,
    Rtol,
    Atol,
    MaxStep,
    InitialStep,
}

/// Solver statistics exposed as local variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatKind {
    Steps,
    RejectedSteps,
    FEvals,
    JacEvals,
    JacUpdates,
    Lu,
    NewtonIters,
    CpuTime,
    Restarts,
}

/// What a variable maps to in the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarKind {
    Time,
    /// Index into `ModelSpec::parameters`.
    Parameter(usize),
    Solver(SolverSetting),
    /// Index into `ModelSpec::inputs`.
    Input(usize),
    /// Index into `ModelSpec::outputs`.
    Output(usize),
    Stat(StatKind),
}

#[derive(Debug, Clone, PartialEq)]
pub enum StartValue {
    None,
    Float(f64),
    Int(i64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Variable {
    pub name: String,
    pub value_reference: u32,
    pub description: String,
    pub causality: Causality,
    pub variability: Variability,
    pub initial: Option<Initial>,
    pub var_type: VarType,
    pub unit: String,
    pub start: StartValue,
    pub kind: VarKind,
}

#[derive(Debug, Clone, PartialEq)]
pub struct VariableTable {
    pub variables: Vec<Variable>,
}

impl VariableTable {
    /// Build the table. Value references are the positions in the table (`time` is 0), so
    /// lookup is an index.
    pub fn from_spec(spec: &ModelSpec) -> VariableTable {
        // time, the 6 solver settings, the statistics (a few more reserved than there are).
        let mut vars: Vec<Variable> =
            Vec::with_capacity(24 + spec.parameters.len() + spec.inputs.len() + spec.outputs.len());
        let mut push = |name: String,
                        description: String,
                        causality,
                        variability,
                        initial,
                        var_type,
                        unit: String,
                        start,
                        kind| {
            let vr = vars.len() as u32;
            vars.push(Variable {
                name,
                value_reference: vr,
                description,
                causality,
                variability,
                initial,
                var_type,
                unit,
                start,
                kind,
            });
        };
        push(
            "time".into(),
            "Simulation time".into(),
            Causality::Independent,
            Variability::Continuous,
            None,
            VarType::Float64,
            "s".into(),
            StartValue::None,
            VarKind::Time,
        );
        for (i, p) in spec.parameters.iter().enumerate() {
            // A parameter that acts on nothing is not exposed (the loader warns).
            if !p.acts {
                continue;
            }
            if p.calculated {
                // Computed from other parameters: readable, not settable (FMI
                // calculatedParameter, fixed, calculated at initialization).
                push(
                    p.name.clone(),
                    p.description.clone(),
                    Causality::CalculatedParameter,
                    Variability::Fixed,
                    Some(Initial::Calculated),
                    VarType::Float64,
                    p.unit.clone(),
                    StartValue::None,
                    VarKind::Parameter(i),
                );
                continue;
            }
            push(
                p.name.clone(),
                p.description.clone(),
                Causality::Parameter,
                if p.tunable {
                    Variability::Tunable
                } else {
                    Variability::Fixed
                },
                Some(Initial::Exact),
                VarType::Float64,
                p.unit.clone(),
                StartValue::Float(p.value),
                VarKind::Parameter(i),
            );
        }
        let s = &spec.solver;
        let solver: [(&str, &str, VarType, &str, StartValue, SolverSetting); 6] = [
            (
                "solver.integrator",
                "Integration method",
                VarType::Enumeration(EnumType::Integrator),
                "",
                StartValue::Int(
                    Method::ALL.iter().position(|m| *m == s.method).unwrap() as i64 + 1,
                ),
                SolverSetting::Integrator,
            ),
            (
                "solver.jacobian",
                "Iteration-matrix strategy (BDF)",
                VarType::Enumeration(EnumType::Jacobian),
                "",
                StartValue::Int(
                    JacobianStrategy::ALL
                        .iter()
                        .position(|j| *j == s.jacobian)
                        .unwrap() as i64
                        + 1,
                ),
                SolverSetting::Jacobian,
            ),
            (
                "solver.rtol",
                "Relative tolerance (overridden by the importer's tolerance)",
                VarType::Float64,
                "",
                StartValue::Float(s.rtol),
                SolverSetting::Rtol,
            ),
            (
                "solver.atol",
                "Absolute tolerance",
                VarType::Float64,
                "",
                StartValue::Float(s.atol),
                SolverSetting::Atol,
            ),
            (
                "solver.max_step",
                "Largest internal step (0: unbounded)",
                VarType::Float64,
                "s",
                StartValue::Float(s.max_step),
                SolverSetting::MaxStep,
            ),
            (
                "solver.initial_step",
                "First internal step (0: automatic)",
                VarType::Float64,
                "s",
                StartValue::Float(s.initial_step),
                SolverSetting::InitialStep,
            ),
        ];
        for (name, desc, ty, unit, start, setting) in solver {
            push(
                name.into(),
                desc.into(),
                Causality::Parameter,
                Variability::Fixed,
                Some(Initial::Exact),
                ty,
                unit.into(),
                start,
                VarKind::Solver(setting),
            );
        }
        for (i, u) in spec.inputs.iter().enumerate() {
            // The importer sees how the FMU fills in the input between communication points.
            let mode = format!("between communication points: {}", u.reconstruction.name());
            let description = if u.description.is_empty() {
                mode
            } else {
                format!("{} ({mode})", u.description)
            };
            push(
                u.name.clone(),
                description,
                Causality::Input,
                Variability::Continuous,
                None,
                VarType::Float64,
                u.unit.clone(),
                StartValue::Float(u.start),
                VarKind::Input(i),
            );
        }
        for (i, o) in spec.outputs.iter().enumerate() {
            push(
                o.name.clone(),
                o.description.clone(),
                Causality::Output,
                Variability::Continuous,
                Some(Initial::Calculated),
                VarType::Float64,
                o.unit.clone(),
                StartValue::None,
                VarKind::Output(i),
            );
        }
        let stats: [(&str, &str, StatKind); 9] = [
            ("stats.steps", "Accepted internal steps", StatKind::Steps),
            (
                "stats.rejected_steps",
                "Rejected internal steps",
                StatKind::RejectedSteps,
            ),
            (
                "stats.f_evals",
                "Right-hand-side / residual evaluations",
                StatKind::FEvals,
            ),
            (
                "stats.jac_evals",
                "Full Jacobian evaluations",
                StatKind::JacEvals,
            ),
            (
                "stats.jac_updates",
                "Partitioned Jacobian updates",
                StatKind::JacUpdates,
            ),
            ("stats.lu", "LU factorizations", StatKind::Lu),
            (
                "stats.newton_iters",
                "Newton iterations",
                StatKind::NewtonIters,
            ),
            (
                "stats.cpu_time",
                "CPU time spent inside doStep",
                StatKind::CpuTime,
            ),
            (
                "stats.restarts",
                "Integrator restarts from a projected state (input jumps, parameter changes)",
                StatKind::Restarts,
            ),
        ];
        for (name, desc, kind) in stats {
            let (ty, unit) = if kind == StatKind::CpuTime {
                (VarType::Float64, "s")
            } else {
                (VarType::Int64, "")
            };
            // Discrete: statistics change only at communication points, and FMI forbids
            // continuous integer variables.
            push(
                name.into(),
                desc.into(),
                Causality::Local,
                Variability::Discrete,
                Some(Initial::Calculated),
                ty,
                unit.into(),
                StartValue::None,
                VarKind::Stat(kind),
            );
        }
        VariableTable { variables: vars }
    }

    pub fn get(&self, vr: u32) -> Option<&Variable> {
        self.variables.get(vr as usize)
    }

    pub fn by_name(&self, name: &str) -> Option<&Variable> {
        self.variables.iter().find(|v| v.name == name)
    }
}
