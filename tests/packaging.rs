//! The packager: modelDescription.xml for a small hand-built model checked attribute by
//! attribute (FMI 2 and FMI 3), the token, the reader round trip, and the FMU layout.

mod common;
use common::closed_form::RefTable;
use mbsfmu::description::package::{build_fmu, PackageOptions};
use mbsfmu::description::token::model_token;
use mbsfmu::description::xml::{FmiVersion, ModelDescription};
use mbsfmu::description::{Capabilities, VariableTable};
use mbsfmu::integrate::Settings;
use mbsfmu::mbs::spec::*;
use nalgebra::{UnitQuaternion, Vector3};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A mass on a prismatic joint, held by a spring with an actuator force input.
fn small_model(source_files: Vec<PathBuf>) -> ModelSpec {
    let c = Scalar::Const;
    ModelSpec {
        name: "slider".into(),
        description: "Mass on a spring".into(),
        gravity: [c(0.0), c(0.0), c(-9.81)],
        initialization: Initialization::Consistent,
        formulation: Default::default(),
        experiment: ExperimentSpec {
            start: 0.0,
            stop: 2.0,
            tolerance: 1e-6,
            step: 0.01,
        },
        solver: Settings::default(),
        parameters: vec![
            ParameterSpec {
                name: "k".into(),
                value: 100.0,
                unit: "N/m".into(),
                description: "Spring stiffness".into(),
                tunable: true,
                calculated: false,
                acts: true,
                rule: None,
            },
            ParameterSpec {
                name: "m".into(),
                value: 2.0,
                unit: "kg".into(),
                description: "Mass".into(),
                tunable: false,
                calculated: false,
                acts: true,
                rule: None,
            },
        ],
        inputs: vec![InputSpec {
            name: "F".into(),
            unit: "N".into(),
            start: 0.5,
            description: "Actuator force".into(),
            // Held: a force sample acts at once, so outputs depend on it directly (with the
            // default smooth reconstruction only through the second rate, which a force
            // does not use).
            reconstruction: mbsfmu::mbs::spec::Reconstruction::Hold,
        }],
        bodies: vec![BodySpec {
            name: "block".into(),
            kind: BodyKind::Particle,
            mass: Scalar::Param(1),
            inertia: [c(0.0); 6],
            position: Vector3::new(0.1, 0.0, 0.0),
            orientation: UnitQuaternion::identity(),
            velocity: Vector3::zeros(),
            angular_velocity: Vector3::zeros(),
        }],
        frames: vec![],
        joints: vec![JointSpec {
            name: "slide".into(),
            kind: JointKind::Prismatic,
            body1: BodyRef::Ground,
            body2: BodyRef::Body(0),
            frame1: LocalFrame::identity(),
            frame2: LocalFrame::identity(),
            length: None,
            initial_angle: None,
        }],
        drivers: vec![],
        forces: vec![ForceSpec {
            static_preload: false,
            name: "spring".into(),
            kind: ForceKind::SpringDamper {
                body1: BodyRef::Ground,
                point1: Vector3::zeros(),
                body2: BodyRef::Body(0),
                point2: Vector3::zeros(),
                free_length: c(0.0),
                law: ForceLaw::Linear {
                    stiffness: Scalar::Param(0),
                    damping: c(1.0),
                    preload: c(0.0),
                },
                actuator: Some(Motion::Input(0)),
            },
        }],
        outputs: vec![
            OutputSpec {
                name: "x".into(),
                unit: "m".into(),
                description: "Position".into(),
                scale: 1.0,
                quantity: OutputQuantity::Position {
                    body: BodyRef::Body(0),
                    point: Vector3::zeros(),
                    component: 0,
                },
            },
            OutputSpec {
                name: "a".into(),
                unit: "m/s2".into(),
                description: "Acceleration".into(),
                scale: 1.0,
                quantity: OutputQuantity::Acceleration {
                    body: BodyRef::Body(0),
                    point: Vector3::zeros(),
                    component: 0,
                },
            },
            OutputSpec {
                name: "f".into(),
                unit: "N".into(),
                description: "Spring force".into(),
                scale: 1.0,
                quantity: OutputQuantity::ElementForce { force: 0 },
            },
        ],
        source_files,
        warnings: vec![],
        source_text: None,
        source_contents: Default::default(),
    }
}

/// Every element in document order as (slash path, attributes), parsed with quick-xml directly
/// (independent of our reader).
fn elements(xml: &str) -> Vec<(String, BTreeMap<String, String>)> {
    use quick_xml::events::Event;
    let mut r = quick_xml::Reader::from_str(xml);
    let mut stack: Vec<String> = Vec::new();
    let mut out = Vec::new();
    loop {
        let ev = r.read_event().unwrap();
        let (e, is_empty) = match &ev {
            Event::Start(e) => (e.clone(), false),
            Event::Empty(e) => (e.clone(), true),
            Event::End(_) => {
                stack.pop();
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
        let attrs = e
            .attributes()
            .map(|a| {
                let a = a.unwrap();
                (
                    String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                    a.unescape_value().unwrap().into_owned(),
                )
            })
            .collect();
        let path = if stack.is_empty() {
            name.clone()
        } else {
            format!("{}/{}", stack.join("/"), name)
        };
        out.push((path, attrs));
        if !is_empty {
            stack.push(name);
        }
    }
    out
}

fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const DATE: &str = "2026-01-02T03:04:05Z";
const TOKEN: &str = "{01234567-89ab-8cde-8f01-23456789abcd}";

fn description(version: FmiVersion) -> ModelDescription {
    let spec = small_model(vec![]);
    let table = VariableTable::from_spec(&spec);
    ModelDescription::new(&spec, &table, version, TOKEN, DATE, Capabilities::RUNTIME)
}

const INTEGRATORS: [&str; 11] = [
    "bdf",
    "rosenbrock_nystrom",
    "w_method",
    "sdirk",
    "trapezoidal",
    "newmark",
    "hht",
    "generalized_alpha",
    "local_linearization",
    "half_implicit",
    "dopri5",
];
const JACOBIANS: [&str; 6] = [
    "dense",
    "sparse",
    "dense_extended",
    "sparse_extended",
    "analytic",
    "analytic_extended",
];

fn expect_items(
    expected: &mut Vec<(String, BTreeMap<String, String>)>,
    path: &str,
    names: &[&str],
) {
    for (i, n) in names.iter().enumerate() {
        expected.push((
            path.into(),
            attrs(&[("name", n), ("value", &(i + 1).to_string())]),
        ));
    }
}

/// `<LogCategories>` after the type definitions (the order of both XSDs), the categories
/// `SetDebugLogging` accepts.
fn expect_log_categories(e: &mut Vec<(String, BTreeMap<String, String>)>, r: &str) {
    e.push((format!("{r}/LogCategories"), attrs(&[])));
    for (name, description) in [
        (
            "logEvents",
            "Instantiation, initialization, step results and other events",
        ),
        ("logStatusWarning", "Messages with status Warning"),
        (
            "logStatusDiscard",
            "Messages with status Discard (a step the integrator could not complete)",
        ),
        (
            "logStatusError",
            "Messages with status Error (wrong calls, invalid values, failed computations)",
        ),
        ("logStatusFatal", "Messages with status Fatal"),
        ("logAll", "All of the above"),
    ] {
        e.push((
            format!("{r}/LogCategories/Category"),
            attrs(&[("name", name), ("description", description)]),
        ));
    }
}

/// Hand-written expectation, element by element and attribute by attribute.
#[test]
fn fmi2_model_description_matches_hand_written_expectation() {
    let xml = description(FmiVersion::Fmi2).to_xml().unwrap();
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"));
    let got = elements(&xml);
    let tool = format!("mbsfmu {}", env!("CARGO_PKG_VERSION"));
    let r = "fmiModelDescription";
    let mut e: Vec<(String, BTreeMap<String, String>)> = vec![
        (
            r.into(),
            attrs(&[
                ("fmiVersion", "2.0"),
                ("modelName", "slider"),
                ("guid", TOKEN),
                ("description", "Mass on a spring"),
                ("generationTool", &tool),
                ("generationDateAndTime", DATE),
                ("variableNamingConvention", "structured"),
                ("numberOfEventIndicators", "0"),
            ]),
        ),
        (
            format!("{r}/CoSimulation"),
            attrs(&[
                ("modelIdentifier", "slider"),
                ("needsExecutionTool", "false"),
                ("canHandleVariableCommunicationStepSize", "true"),
                ("canInterpolateInputs", "true"),
                ("maxOutputDerivativeOrder", "2"),
                ("canRunAsynchronuously", "false"),
                ("canBeInstantiatedOnlyOncePerProcess", "false"),
                ("canNotUseMemoryManagementFunctions", "true"),
                ("canGetAndSetFMUstate", "true"),
                ("canSerializeFMUstate", "true"),
                ("providesDirectionalDerivative", "true"),
            ]),
        ),
        (format!("{r}/UnitDefinitions"), attrs(&[])),
    ];
    // Units sorted by name: N, N/m, kg, m, m/s2, s.
    for (name, base) in [
        ("N", vec![("kg", "1"), ("m", "1"), ("s", "-2")]),
        ("N/m", vec![("kg", "1"), ("s", "-2")]),
        ("kg", vec![("kg", "1")]),
        ("m", vec![("m", "1")]),
        ("m/s2", vec![("m", "1"), ("s", "-2")]),
        ("s", vec![("s", "1")]),
    ] {
        e.push((
            format!("{r}/UnitDefinitions/Unit"),
            attrs(&[("name", name)]),
        ));
        e.push((format!("{r}/UnitDefinitions/Unit/BaseUnit"), attrs(&base)));
    }
    e.push((format!("{r}/TypeDefinitions"), attrs(&[])));
    e.push((
        format!("{r}/TypeDefinitions/SimpleType"),
        attrs(&[("name", "SolverIntegrator")]),
    ));
    e.push((
        format!("{r}/TypeDefinitions/SimpleType/Enumeration"),
        attrs(&[]),
    ));
    expect_items(
        &mut e,
        &format!("{r}/TypeDefinitions/SimpleType/Enumeration/Item"),
        &INTEGRATORS,
    );
    e.push((
        format!("{r}/TypeDefinitions/SimpleType"),
        attrs(&[("name", "SolverJacobian")]),
    ));
    e.push((
        format!("{r}/TypeDefinitions/SimpleType/Enumeration"),
        attrs(&[]),
    ));
    expect_items(
        &mut e,
        &format!("{r}/TypeDefinitions/SimpleType/Enumeration/Item"),
        &JACOBIANS,
    );
    expect_log_categories(&mut e, r);
    e.push((
        format!("{r}/DefaultExperiment"),
        attrs(&[
            ("startTime", "0.0"),
            ("stopTime", "2.0"),
            ("tolerance", "1e-6"),
            ("stepSize", "0.01"),
        ]),
    ));
    e.push((format!("{r}/ModelVariables"), attrs(&[])));
    let sv = format!("{r}/ModelVariables/ScalarVariable");
    let mut var = |vr: &str,
                   name: &str,
                   desc: &str,
                   caus: &str,
                   var: &str,
                   init: Option<&str>,
                   ty: &str,
                   typed: &[(&str, &str)]| {
        let mut a = vec![
            ("name", name),
            ("valueReference", vr),
            ("description", desc),
            ("causality", caus),
            ("variability", var),
        ];
        if let Some(i) = init {
            a.push(("initial", i));
        }
        e.push((sv.clone(), attrs(&a)));
        e.push((format!("{sv}/{ty}"), attrs(typed)));
    };
    var(
        "1",
        "k",
        "Spring stiffness",
        "parameter",
        "tunable",
        Some("exact"),
        "Real",
        &[("unit", "N/m"), ("start", "100.0")],
    );
    var(
        "2",
        "m",
        "Mass",
        "parameter",
        "fixed",
        Some("exact"),
        "Real",
        &[("unit", "kg"), ("start", "2.0")],
    );
    var(
        "3",
        "solver.integrator",
        "Integration method",
        "parameter",
        "fixed",
        Some("exact"),
        "Enumeration",
        &[("declaredType", "SolverIntegrator"), ("start", "1")],
    );
    var(
        "4",
        "solver.jacobian",
        "Iteration-matrix strategy (BDF)",
        "parameter",
        "fixed",
        Some("exact"),
        "Enumeration",
        // dense_extended, the third item: the default strategy.
        &[("declaredType", "SolverJacobian"), ("start", "3")],
    );
    var(
        "5",
        "solver.rtol",
        "Relative tolerance (overridden by the importer's tolerance)",
        "parameter",
        "fixed",
        Some("exact"),
        "Real",
        &[("start", "0.0001")],
    );
    var(
        "6",
        "solver.atol",
        "Absolute tolerance",
        "parameter",
        "fixed",
        Some("exact"),
        "Real",
        &[("start", "1e-6")],
    );
    var(
        "7",
        "solver.max_step",
        "Largest internal step (0: unbounded)",
        "parameter",
        "fixed",
        Some("exact"),
        "Real",
        &[("unit", "s"), ("start", "0.0")],
    );
    var(
        "8",
        "solver.initial_step",
        "First internal step (0: automatic)",
        "parameter",
        "fixed",
        Some("exact"),
        "Real",
        &[("unit", "s"), ("start", "0.0")],
    );
    var(
        "9",
        "F",
        "Actuator force (between communication points: hold)",
        "input",
        "continuous",
        None,
        "Real",
        &[("unit", "N"), ("start", "0.5")],
    );
    var(
        "10",
        "x",
        "Position",
        "output",
        "continuous",
        Some("calculated"),
        "Real",
        &[("unit", "m")],
    );
    var(
        "11",
        "a",
        "Acceleration",
        "output",
        "continuous",
        Some("calculated"),
        "Real",
        &[("unit", "m/s2")],
    );
    var(
        "12",
        "f",
        "Spring force",
        "output",
        "continuous",
        Some("calculated"),
        "Real",
        &[("unit", "N")],
    );
    for (i, (name, desc)) in [
        ("stats.steps", "Accepted internal steps"),
        ("stats.rejected_steps", "Rejected internal steps"),
        ("stats.f_evals", "Right-hand-side / residual evaluations"),
        ("stats.jac_evals", "Full Jacobian evaluations"),
        ("stats.jac_updates", "Partitioned Jacobian updates"),
        ("stats.lu", "LU factorizations"),
        ("stats.newton_iters", "Newton iterations"),
    ]
    .iter()
    .enumerate()
    {
        var(
            &(13 + i).to_string(),
            name,
            desc,
            "local",
            "discrete",
            Some("calculated"),
            "Integer",
            &[],
        );
    }
    var(
        "20",
        "stats.cpu_time",
        "CPU time spent inside doStep",
        "local",
        "discrete",
        Some("calculated"),
        "Real",
        &[("unit", "s")],
    );
    var(
        "21",
        "stats.restarts",
        "Integrator restarts from a projected state (input jumps, parameter changes)",
        "local",
        "discrete",
        Some("calculated"),
        "Integer",
        &[],
    );
    e.push((format!("{r}/ModelStructure"), attrs(&[])));
    e.push((format!("{r}/ModelStructure/Outputs"), attrs(&[])));
    // ScalarVariable indices (1-based, time is not listed in FMI 2): x = 10, a = 11, f = 12, F = 9.
    // The position does not depend on the actuator force at the same instant; acceleration and
    // the actuated element's force do.
    e.push((
        format!("{r}/ModelStructure/Outputs/Unknown"),
        attrs(&[("index", "10"), ("dependencies", "")]),
    ));
    e.push((
        format!("{r}/ModelStructure/Outputs/Unknown"),
        attrs(&[("index", "11"), ("dependencies", "9")]),
    ));
    e.push((
        format!("{r}/ModelStructure/Outputs/Unknown"),
        attrs(&[("index", "12"), ("dependencies", "9")]),
    ));
    e.push((format!("{r}/ModelStructure/InitialUnknowns"), attrs(&[])));
    for i in ["10", "11", "12"] {
        e.push((
            format!("{r}/ModelStructure/InitialUnknowns/Unknown"),
            attrs(&[("index", i)]),
        ));
    }
    for (k, (g, w)) in got.iter().zip(e.iter()).enumerate() {
        assert_eq!(g, w, "element {k}");
    }
    assert_eq!(got.len(), e.len());
}

#[test]
fn fmi3_model_description_matches_hand_written_expectation() {
    let xml = description(FmiVersion::Fmi3).to_xml().unwrap();
    let got = elements(&xml);
    let tool = format!("mbsfmu {}", env!("CARGO_PKG_VERSION"));
    let r = "fmiModelDescription";
    let mut e: Vec<(String, BTreeMap<String, String>)> = vec![
        (
            r.into(),
            attrs(&[
                ("fmiVersion", "3.0"),
                ("modelName", "slider"),
                ("instantiationToken", TOKEN),
                ("description", "Mass on a spring"),
                ("generationTool", &tool),
                ("generationDateAndTime", DATE),
                ("variableNamingConvention", "structured"),
            ]),
        ),
        (
            format!("{r}/CoSimulation"),
            attrs(&[
                ("modelIdentifier", "slider"),
                ("needsExecutionTool", "false"),
                ("canBeInstantiatedOnlyOncePerProcess", "false"),
                ("canGetAndSetFMUState", "true"),
                ("canSerializeFMUState", "true"),
                ("providesDirectionalDerivatives", "true"),
                ("providesAdjointDerivatives", "true"),
                ("canHandleVariableCommunicationStepSize", "true"),
                ("maxOutputDerivativeOrder", "2"),
                ("providesIntermediateUpdate", "true"),
                ("mightReturnEarlyFromDoStep", "false"),
                ("canReturnEarlyAfterIntermediateUpdate", "false"),
                ("hasEventMode", "false"),
            ]),
        ),
    ];
    // Same unit set as FMI 2 (time adds "s", already used by the solver steps).
    e.push((format!("{r}/UnitDefinitions"), attrs(&[])));
    for (name, base) in [
        ("N", vec![("kg", "1"), ("m", "1"), ("s", "-2")]),
        ("N/m", vec![("kg", "1"), ("s", "-2")]),
        ("kg", vec![("kg", "1")]),
        ("m", vec![("m", "1")]),
        ("m/s2", vec![("m", "1"), ("s", "-2")]),
        ("s", vec![("s", "1")]),
    ] {
        e.push((
            format!("{r}/UnitDefinitions/Unit"),
            attrs(&[("name", name)]),
        ));
        e.push((format!("{r}/UnitDefinitions/Unit/BaseUnit"), attrs(&base)));
    }
    e.push((format!("{r}/TypeDefinitions"), attrs(&[])));
    e.push((
        format!("{r}/TypeDefinitions/EnumerationType"),
        attrs(&[("name", "SolverIntegrator")]),
    ));
    expect_items(
        &mut e,
        &format!("{r}/TypeDefinitions/EnumerationType/Item"),
        &INTEGRATORS,
    );
    e.push((
        format!("{r}/TypeDefinitions/EnumerationType"),
        attrs(&[("name", "SolverJacobian")]),
    ));
    expect_items(
        &mut e,
        &format!("{r}/TypeDefinitions/EnumerationType/Item"),
        &JACOBIANS,
    );
    expect_log_categories(&mut e, r);
    e.push((
        format!("{r}/DefaultExperiment"),
        attrs(&[
            ("startTime", "0.0"),
            ("stopTime", "2.0"),
            ("tolerance", "1e-6"),
            ("stepSize", "0.01"),
        ]),
    ));
    e.push((format!("{r}/ModelVariables"), attrs(&[])));
    let mv = format!("{r}/ModelVariables");
    let mut var = |ty: &str, a: &[(&str, &str)]| e.push((format!("{mv}/{ty}"), attrs(a)));
    var(
        "Float64",
        &[
            ("name", "time"),
            ("valueReference", "0"),
            ("description", "Simulation time"),
            ("causality", "independent"),
            ("variability", "continuous"),
            ("unit", "s"),
        ],
    );
    var(
        "Float64",
        &[
            ("name", "k"),
            ("valueReference", "1"),
            ("description", "Spring stiffness"),
            ("causality", "parameter"),
            ("variability", "tunable"),
            ("initial", "exact"),
            ("unit", "N/m"),
            ("start", "100.0"),
        ],
    );
    var(
        "Float64",
        &[
            ("name", "m"),
            ("valueReference", "2"),
            ("description", "Mass"),
            ("causality", "parameter"),
            ("variability", "fixed"),
            ("initial", "exact"),
            ("unit", "kg"),
            ("start", "2.0"),
        ],
    );
    var(
        "Enumeration",
        &[
            ("name", "solver.integrator"),
            ("valueReference", "3"),
            ("description", "Integration method"),
            ("causality", "parameter"),
            ("variability", "fixed"),
            ("initial", "exact"),
            ("declaredType", "SolverIntegrator"),
            ("start", "1"),
        ],
    );
    var(
        "Enumeration",
        &[
            ("name", "solver.jacobian"),
            ("valueReference", "4"),
            ("description", "Iteration-matrix strategy (BDF)"),
            ("causality", "parameter"),
            ("variability", "fixed"),
            ("initial", "exact"),
            ("declaredType", "SolverJacobian"),
            ("start", "3"), // dense_extended, the default strategy
        ],
    );
    var(
        "Float64",
        &[
            ("name", "solver.rtol"),
            ("valueReference", "5"),
            (
                "description",
                "Relative tolerance (overridden by the importer's tolerance)",
            ),
            ("causality", "parameter"),
            ("variability", "fixed"),
            ("initial", "exact"),
            ("start", "0.0001"),
        ],
    );
    var(
        "Float64",
        &[
            ("name", "solver.atol"),
            ("valueReference", "6"),
            ("description", "Absolute tolerance"),
            ("causality", "parameter"),
            ("variability", "fixed"),
            ("initial", "exact"),
            ("start", "1e-6"),
        ],
    );
    var(
        "Float64",
        &[
            ("name", "solver.max_step"),
            ("valueReference", "7"),
            ("description", "Largest internal step (0: unbounded)"),
            ("causality", "parameter"),
            ("variability", "fixed"),
            ("initial", "exact"),
            ("unit", "s"),
            ("start", "0.0"),
        ],
    );
    var(
        "Float64",
        &[
            ("name", "solver.initial_step"),
            ("valueReference", "8"),
            ("description", "First internal step (0: automatic)"),
            ("causality", "parameter"),
            ("variability", "fixed"),
            ("initial", "exact"),
            ("unit", "s"),
            ("start", "0.0"),
        ],
    );
    var(
        "Float64",
        &[
            ("name", "F"),
            ("valueReference", "9"),
            (
                "description",
                "Actuator force (between communication points: hold)",
            ),
            ("causality", "input"),
            ("variability", "continuous"),
            ("unit", "N"),
            ("intermediateUpdate", "true"),
            ("start", "0.5"),
        ],
    );
    var(
        "Float64",
        &[
            ("name", "x"),
            ("valueReference", "10"),
            ("description", "Position"),
            ("causality", "output"),
            ("variability", "continuous"),
            ("initial", "calculated"),
            ("unit", "m"),
        ],
    );
    var(
        "Float64",
        &[
            ("name", "a"),
            ("valueReference", "11"),
            ("description", "Acceleration"),
            ("causality", "output"),
            ("variability", "continuous"),
            ("initial", "calculated"),
            ("unit", "m/s2"),
        ],
    );
    var(
        "Float64",
        &[
            ("name", "f"),
            ("valueReference", "12"),
            ("description", "Spring force"),
            ("causality", "output"),
            ("variability", "continuous"),
            ("initial", "calculated"),
            ("unit", "N"),
        ],
    );
    for (i, (name, desc)) in [
        ("stats.steps", "Accepted internal steps"),
        ("stats.rejected_steps", "Rejected internal steps"),
        ("stats.f_evals", "Right-hand-side / residual evaluations"),
        ("stats.jac_evals", "Full Jacobian evaluations"),
        ("stats.jac_updates", "Partitioned Jacobian updates"),
        ("stats.lu", "LU factorizations"),
        ("stats.newton_iters", "Newton iterations"),
    ]
    .iter()
    .enumerate()
    {
        let vr = (13 + i).to_string();
        var(
            "Int64",
            &[
                ("name", name),
                ("valueReference", &vr),
                ("description", desc),
                ("causality", "local"),
                ("variability", "discrete"),
                ("initial", "calculated"),
            ],
        );
    }
    var(
        "Float64",
        &[
            ("name", "stats.cpu_time"),
            ("valueReference", "20"),
            ("description", "CPU time spent inside doStep"),
            ("causality", "local"),
            ("variability", "discrete"),
            ("initial", "calculated"),
            ("unit", "s"),
        ],
    );
    var(
        "Int64",
        &[
            ("name", "stats.restarts"),
            ("valueReference", "21"),
            (
                "description",
                "Integrator restarts from a projected state (input jumps, parameter changes)",
            ),
            ("causality", "local"),
            ("variability", "discrete"),
            ("initial", "calculated"),
        ],
    );
    e.push((format!("{r}/ModelStructure"), attrs(&[])));
    // FMI 3 refers by value reference.
    e.push((
        format!("{r}/ModelStructure/Output"),
        attrs(&[("valueReference", "10"), ("dependencies", "")]),
    ));
    e.push((
        format!("{r}/ModelStructure/Output"),
        attrs(&[("valueReference", "11"), ("dependencies", "9")]),
    ));
    e.push((
        format!("{r}/ModelStructure/Output"),
        attrs(&[("valueReference", "12"), ("dependencies", "9")]),
    ));
    for vr in ["10", "11", "12"] {
        e.push((
            format!("{r}/ModelStructure/InitialUnknown"),
            attrs(&[("valueReference", vr)]),
        ));
    }
    for (k, (g, w)) in got.iter().zip(e.iter()).enumerate() {
        assert_eq!(g, w, "element {k}");
    }
    assert_eq!(got.len(), e.len());
}

#[test]
fn reader_round_trips_both_versions() {
    for v in [FmiVersion::Fmi2, FmiVersion::Fmi3] {
        let md = description(v);
        let back = ModelDescription::from_xml(&md.to_xml().unwrap()).unwrap();
        assert_eq!(back, md, "{v:?}");
        // And the variables agree with the table the runtime uses.
        let table = VariableTable::from_spec(&small_model(vec![]));
        for x in &back.variables {
            let t = table.get(x.value_reference).unwrap();
            assert_eq!(
                (&t.name, t.causality, t.variability, t.initial, &t.start),
                (&x.name, x.causality, x.variability, x.initial, &x.start)
            );
        }
    }
}

#[test]
fn reader_reports_malformed_xml_and_missing_attributes() {
    let e = ModelDescription::from_xml("<fmiModelDescription fmiVersion=\"2.0\" modelName=\"a\"")
        .unwrap_err()
        .to_string();
    assert!(e.contains("modelDescription.xml"), "{e}");
    let e = ModelDescription::from_xml("<fmiModelDescription fmiVersion=\"2.0\"/>")
        .unwrap_err()
        .to_string();
    assert!(e.contains("modelName"), "{e}");
    let e = ModelDescription::from_xml(
        "<fmiModelDescription fmiVersion=\"1.0\" modelName=\"a\" guid=\"x\"/>",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("1.0"), "{e}");
}

/// Tab, line feed and carriage return in attribute values are written as character references
/// (raw, a parser's attribute-value normalisation turns them into spaces) and read back; a
/// character XML 1.0 cannot represent at all is an error of the writer, never ill-formed XML.
#[test]
fn attribute_whitespace_survives_and_control_characters_are_refused() {
    for v in [FmiVersion::Fmi2, FmiVersion::Fmi3] {
        let mut md = description(v);
        md.description = "two\tcolumns\nand lines\r\n<&>\"'".into();
        md.variables[0].description = "a\tb".into();
        let xml = md.to_xml().unwrap();
        assert!(
            xml.contains(
                "description=\"two&#9;columns&#10;and lines&#13;&#10;&lt;&amp;&gt;&quot;&apos;\""
            ),
            "{xml}"
        );
        assert!(!xml.contains('\t') && !xml.contains('\r'), "{xml}");
        assert_eq!(ModelDescription::from_xml(&xml).unwrap(), md, "{v:?}");
        for bad in ["form\u{c}feed", "nul\u{0}", "\u{1f}", "\u{FFFF}"] {
            let mut md = description(v);
            md.variables[1].description = bad.into();
            let e = md.to_xml().unwrap_err().to_string();
            assert!(
                e.contains("cannot be represented in XML 1.0") && e.contains("description"),
                "{e}"
            );
        }
        let mut md = description(v);
        md.units[0].name = "N\u{7}".into();
        let e = md.to_xml().unwrap_err().to_string();
        assert!(e.contains("U+0007 at character 2"), "{e}");
    }
}

/// An input through a driver does not change positions or element forces at the held state
/// (the driven coordinate is a state); it changes accelerations at once (issue 14).
#[test]
fn driver_inputs_reach_only_accelerations_and_reactions() {
    let mut spec = small_model(vec![]);
    spec.inputs.push(InputSpec {
        name: "s".into(),
        unit: "m".into(),
        start: 0.0,
        description: String::new(),
        reconstruction: Default::default(),
    });
    spec.drivers.push(DriverSpec {
        name: "drive".into(),
        target: DriverTarget::JointCoordinate(0),
        motion: Motion::Input(1),
    });
    let deps = mbsfmu::description::deps::output_dependencies(&spec);
    assert_eq!(deps, vec![vec![], vec![0, 1], vec![0]]);
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mbsfmu-pack-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn options(dir: &Path, version: FmiVersion) -> PackageOptions {
    let lib = dir.join("libfake.so");
    std::fs::write(&lib, b"\x7fELF fake runtime").unwrap();
    let win = dir.join("mbsfmu.dll");
    std::fs::write(&win, b"MZ fake").unwrap();
    PackageOptions {
        version,
        library: lib,
        extra_binaries: vec![(
            if version == FmiVersion::Fmi2 {
                "win64"
            } else {
                "x86_64-windows"
            }
            .into(),
            win,
        )],
        template_dir: None,
        generation_date_and_time: DATE.into(),
        capabilities: Capabilities::RUNTIME,
        strip_debug_info: false, // the fake library is no real ELF file
        model_text: None,
    }
}

fn unzip(bytes: &[u8]) -> BTreeMap<String, Vec<u8>> {
    use std::io::Read;
    let mut z = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
    let mut out = BTreeMap::new();
    for i in 0..z.len() {
        let mut f = z.by_index(i).unwrap();
        let mut c = Vec::new();
        f.read_to_end(&mut c).unwrap();
        out.insert(f.name().to_string(), c);
    }
    out
}

#[test]
fn fmu_layout_resources_and_token() {
    let dir = temp_dir("layout");
    std::fs::create_dir_all(dir.join("tables")).unwrap();
    let model = dir.join("slider.toml");
    std::fs::write(&model, "# model text\n").unwrap();
    std::fs::write(dir.join("tables/spring.csv"), "0,0\n1,100\n").unwrap();
    let spec = small_model(vec![model.clone(), PathBuf::from("tables/spring.csv")]);
    for v in [FmiVersion::Fmi2, FmiVersion::Fmi3] {
        let (bytes, packed) = build_fmu(&spec, &model, &options(&dir, v)).unwrap();
        let files = unzip(&bytes);
        let plat = if v == FmiVersion::Fmi2 {
            "linux64"
        } else {
            "x86_64-linux"
        };
        let names: Vec<&str> = files.keys().map(String::as_str).collect();
        let so = format!("binaries/{plat}/slider.so");
        let dll = if v == FmiVersion::Fmi2 {
            "binaries/win64/slider.dll"
        } else {
            "binaries/x86_64-windows/slider.dll"
        };
        let mut want = vec![
            dll,
            so.as_str(),
            "documentation/index.html",
            "documentation/licenses/LICENSE.txt",
            "model.png",
            "modelDescription.xml",
            "resources/model.toml",
            "resources/tables/spring.csv",
        ];
        want.sort();
        assert_eq!(names, want);
        assert_eq!(files[&so], b"\x7fELF fake runtime");
        assert_eq!(files["resources/model.toml"], b"# model text\n");
        assert!(files["model.png"].starts_with(b"\x89PNG"));
        // The token is the runtime's: model file, then the referenced files in order.
        let token = model_token([b"# model text\n".as_slice(), b"0,0\n1,100\n".as_slice()]);
        assert_eq!(packed.description.token, token);
        let md = ModelDescription::from_xml(
            std::str::from_utf8(&files["modelDescription.xml"]).unwrap(),
        )
        .unwrap();
        assert_eq!(md.token, token);
        let doc = String::from_utf8(files["documentation/index.html"].clone()).unwrap();
        for needle in [
            "<h1>slider</h1>",
            "<code>F</code>",
            "N/m",
            "100.0",
            "<code>bdf</code>",
            "resources/tables/spring.csv",
        ] {
            assert!(doc.contains(needle), "documentation lacks {needle}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn same_inputs_give_identical_fmu_bytes() {
    let dir = temp_dir("repro");
    let model = dir.join("m.toml");
    std::fs::write(&model, "k = 1\n").unwrap();
    let opts = options(&dir, FmiVersion::Fmi2);
    let a = build_fmu(&small_model(vec![]), &model, &opts).unwrap().0;
    let b = build_fmu(&small_model(vec![]), &model, &opts).unwrap().0;
    assert!(a == b, "two builds differ");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn changed_model_changes_token() {
    let dir = temp_dir("token");
    let model = dir.join("m.toml");
    std::fs::write(dir.join("t.csv"), "0,1\n").unwrap();
    let spec = small_model(vec![PathBuf::from("t.csv")]);
    let token = |text: &str, csv: &str| {
        std::fs::write(&model, text).unwrap();
        std::fs::write(dir.join("t.csv"), csv).unwrap();
        build_fmu(&spec, &model, &options(&dir, FmiVersion::Fmi3))
            .unwrap()
            .1
            .description
            .token
    };
    let a = token("k = 1\n", "0,1\n");
    assert_eq!(a, token("k = 1\n", "0,1\n"), "same model, same token");
    assert_ne!(a, token("k = 2\n", "0,1\n"), "edited model file");
    assert_ne!(a, token("k = 1\n", "0,2\n"), "edited referenced table");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn packaging_errors_name_the_file() {
    let dir = temp_dir("errors");
    let model = dir.join("m.toml");
    std::fs::write(&model, "x").unwrap();
    let mut opts = options(&dir, FmiVersion::Fmi2);
    // Referenced file outside the model directory.
    let outside = std::env::temp_dir().join(format!("mbsfmu-outside-{}.csv", std::process::id()));
    std::fs::write(&outside, "0,1").unwrap();
    let e = build_fmu(&small_model(vec![outside.clone()]), &model, &opts).unwrap_err();
    assert!(
        e.to_string().contains(&*outside.to_string_lossy()) && e.is_user_error(),
        "{e}"
    );
    std::fs::remove_file(&outside).unwrap();
    // Missing referenced file.
    let e = build_fmu(&small_model(vec![PathBuf::from("nope.csv")]), &model, &opts).unwrap_err();
    assert!(e.to_string().contains("nope.csv"), "{e}");
    // A library that is not ELF.
    std::fs::write(&opts.library, b"not a library").unwrap();
    let e = build_fmu(&small_model(vec![]), &model, &opts).unwrap_err();
    assert!(
        e.to_string().contains("libfake.so") && e.to_string().contains("ELF"),
        "{e}"
    );
    // A parameter named like a reserved variable.
    let mut spec = small_model(vec![]);
    spec.parameters[0].name = "solver.rtol".into();
    let e = build_fmu(&spec, &model, &opts).unwrap_err();
    assert!(
        e.to_string().contains("\"solver.rtol\" is used twice") && e.is_user_error(),
        "{e}"
    );
    // Bad extra platform.
    opts = options(&dir, FmiVersion::Fmi2);
    opts.extra_binaries = vec![("../x".into(), opts.library.clone())];
    let e = build_fmu(&small_model(vec![]), &model, &opts).unwrap_err();
    assert!(e.to_string().contains("--extra-binary"), "{e}");
    // The other version's platform name: FMI 2 importers look in win64, not x86_64-windows.
    opts.extra_binaries = vec![("x86_64-windows".into(), opts.library.clone())];
    let e = build_fmu(&small_model(vec![]), &model, &opts).unwrap_err();
    assert!(
        e.to_string().contains("its folder is `win64`") && e.is_user_error(),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// fmpy's validator (schema, start/initial rules, units, model structure) on both versions of
/// the hand-built model. Needs a Python with fmpy: `MBSFMU_PYTHON` (set by tools/test-all.sh),
/// else /tmp/venv-probe or .venv; fails if none is found only when MBSFMU_PYTHON is set.
#[test]
fn fmpy_validates_both_versions() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = match std::env::var("MBSFMU_PYTHON") {
        Ok(p) => PathBuf::from(p),
        Err(_) => match [
            here.join(".venv/bin/python"),
            PathBuf::from("/tmp/venv-probe/bin/python"),
        ]
        .into_iter()
        .find(|p| p.exists())
        {
            Some(p) => p,
            None => {
                eprintln!("SKIPPED: no Python with fmpy (set MBSFMU_PYTHON)");
                return;
            }
        },
    };
    let dir = temp_dir("fmpy");
    let model = dir.join("slider.toml");
    std::fs::write(&model, "x").unwrap();
    for v in [FmiVersion::Fmi2, FmiVersion::Fmi3] {
        let (bytes, _) = build_fmu(&small_model(vec![]), &model, &options(&dir, v)).unwrap();
        let fmu = dir.join(format!("slider{}.fmu", v.number()));
        std::fs::write(&fmu, bytes).unwrap();
        let out = std::process::Command::new(&python)
            .args(["-c", "import sys; from fmpy.validation import validate_fmu; p = validate_fmu(sys.argv[1]); print('\\n'.join(p)); sys.exit(1 if p else 0)"])
            .arg(&fmu)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "fmpy problems for FMI {}:\n{}{}",
            v.number(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // fmpy reads the log categories (what a master offers for SetDebugLogging).
        let out = std::process::Command::new(&python)
            .args(["-c", "import sys; from fmpy import read_model_description; md = read_model_description(sys.argv[1]); print(' '.join(c.name + '=' + (c.description or '') for c in md.logCategories))"])
            .arg(&fmu)
            .output()
            .unwrap();
        let cats = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for (name, description) in mbsfmu::fmi::LOG_CATEGORIES {
            assert!(
                cats.contains(&format!("{name}={description}")),
                "fmpy does not list {name} for FMI {}: {cats}",
                v.number()
            );
        }
        // Negative control: the same check flags an input without a start value.
        let mut broken = description(v);
        broken
            .variables
            .iter_mut()
            .find(|x| x.name == "F")
            .unwrap()
            .start = mbsfmu::description::StartValue::None;
        let bad = dir.join(format!("broken{}.fmu", v.number()));
        let mut z = zip::ZipWriter::new(std::fs::File::create(&bad).unwrap());
        z.start_file(
            "modelDescription.xml",
            zip::write::SimpleFileOptions::default(),
        )
        .unwrap();
        std::io::Write::write_all(&mut z, broken.to_xml().unwrap().as_bytes()).unwrap();
        z.finish().unwrap();
        let out = std::process::Command::new(&python)
            .args(["-c", "import sys; from fmpy.validation import validate_fmu; p = validate_fmu(sys.argv[1]); print('\\n'.join(p)); sys.exit(1 if p else 0)"])
            .arg(&bad)
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("\"F\"") && !out.status.success(),
            "fmpy did not flag the broken FMU"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn mbsfmu(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mbsfmu"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_info_shows_version_variables_capabilities_platforms() {
    let dir = temp_dir("info");
    let model = dir.join("slider.toml");
    std::fs::write(&model, "x").unwrap();
    for v in [FmiVersion::Fmi2, FmiVersion::Fmi3] {
        let fmu = dir.join(format!("s{}.fmu", v.number()));
        let (bytes, packed) = build_fmu(&small_model(vec![]), &model, &options(&dir, v)).unwrap();
        std::fs::write(&fmu, bytes).unwrap();
        let (code, out, err) = mbsfmu(&["info", fmu.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        let plat = if v == FmiVersion::Fmi2 {
            "linux64 (slider.so)"
        } else {
            "x86_64-linux (slider.so)"
        };
        let caps = if v == FmiVersion::Fmi2 {
            "canGetAndSetFMUstate"
        } else {
            "providesIntermediateUpdate"
        };
        for needle in [
            format!("FMI {} Co-Simulation FMU", v.attr()),
            plat.to_string(),
            if v == FmiVersion::Fmi2 {
                "win64 (slider.dll)".into()
            } else {
                "x86_64-windows (slider.dll)".into()
            },
            caps.into(),
            packed.description.token.clone(),
            "a <- F".into(),
            "x <- none".into(),
            "bdf (1)".into(),
            // The input with its reconstruction mode.
            "F: Actuator force (between communication points: hold)".into(),
        ] {
            assert!(out.contains(&needle), "info lacks {needle:?}:\n{out}");
        }
    }
    // Not a zip: a user error naming the file.
    let (code, _, err) = mbsfmu(&["info", model.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("slider.toml") && err.contains("not an FMU"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cli_user_errors_exit_1_and_name_the_file() {
    let (code, _, err) = mbsfmu(&["export", "/nonexistent/model.toml"]);
    assert_eq!(code, 1);
    assert!(err.contains("/nonexistent/model.toml"), "{err}");
    let (code, _, err) = mbsfmu(&["export", "m.toml", "--fmi", "4"]);
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = mbsfmu(&["export", "m.toml", "-o", "x.fmu"]);
    assert_eq!(code, 1);
    assert!(err.contains("--fmi"), "{err}");
    let (code, _, _) = mbsfmu(&["frobnicate"]);
    assert_eq!(code, 1);
    // An enumeration takes a name or a whole number (1.5 ran as bdf without a word).
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/four_link.toml");
    let (code, _, err) = mbsfmu(&[
        "simulate",
        model,
        "--stop",
        "0.01",
        "--set",
        "solver.integrator=1.5",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("\"1.5\" is not a whole number"), "{err}");
    let (code, out, _) = mbsfmu(&["--help"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("export")
            && out.contains("simulate")
            && out.contains("info")
            && out.contains("check")
    );
}

/// `mbsfmu simulate --set solver.rtol=X` takes effect: the model's experiment tolerance stands in
/// for an importer's tolerance (which overrides `solver.rtol`) only when the user has not set
/// `solver.rtol` (it used to override the command line silently). θ1 of the stiff double pendulum
/// at 0.5 s against the independent reference (Radau 1e-12, tests/data), same `atol`, two `rtol`.
#[test]
fn cli_simulate_set_solver_rtol_wins_over_the_experiment_tolerance() {
    let dir = temp_dir("rtol");
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/double_pendulum_stiff.toml"
    );
    let reference = RefTable::load("double_pendulum_stiff.csv").unwrap();
    let theta_ref = reference.column("theta1").unwrap()[reference
        .times()
        .iter()
        .position(|t| (t - 0.5).abs() < 1e-9)
        .unwrap()];
    let theta1_at_end = |rtol: &str| -> f64 {
        let out = dir.join(format!("dp_{rtol}.csv"));
        let (code, _, err) = mbsfmu(&[
            "simulate",
            model,
            "--stop",
            "0.5",
            "--step",
            "0.05",
            "--set",
            "solver.atol=1e-12",
            "--set",
            &format!("solver.rtol={rtol}"),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        // The CLI's CSV names its first column `time`, the reference format `t`.
        let text = std::fs::read_to_string(&out)
            .unwrap()
            .replacen("time", "t", 1);
        let table = RefTable::parse(&out, &text).unwrap();
        let theta1 = table.column("theta1").unwrap();
        *theta1.last().unwrap()
    };
    let loose = (theta1_at_end("1e-3") - theta_ref).abs();
    let tight = (theta1_at_end("1e-10") - theta_ref).abs();
    println!("theta1(0.5 s) error: rtol 1e-3 {loose:.2e}, rtol 1e-10 {tight:.2e}");
    assert!(tight < 1e-7, "rtol 1e-10: {tight:e}");
    assert!(
        loose > 100.0 * tight,
        "rtol 1e-3: {loose:e} vs 1e-10: {tight:e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `mbsfmu simulate` prints the solver statistics, restarts included.
#[test]
fn cli_simulate_prints_solver_statistics() {
    let dir = temp_dir("stats");
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/quarter_car_rig.toml");
    let out = dir.join("qc.csv");
    let (code, stdout, err) = mbsfmu(&[
        "simulate",
        model,
        "--stop",
        "0.05",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("solver:"))
        .unwrap_or_else(|| panic!("no solver line:\n{stdout}"));
    assert!(
        line.contains(" steps (") && line.contains(" Jacobians") && line.ends_with(" 0 restarts"),
        "{line}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `mbsfmu simulate` tells the user when a setting will likely give wrong results: the local
/// linearization on a contact model without a step bound.
#[test]
fn cli_simulate_warns_about_local_linearization_without_max_step_on_contacts() {
    let dir = temp_dir("llwarn");
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/bouncing_balls.toml");
    let out = dir.join("bb.csv");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "simulate",
            model,
            "--stop",
            "0.05",
            "--out",
            out.to_str().unwrap(),
            "--set",
            "solver.integrator=local_linearization",
        ];
        args.extend_from_slice(extra);
        mbsfmu(&args)
    };
    let (code, _, err) = run(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("warning:") && err.contains("solver.max_step"),
        "{err}"
    );
    let (code, _, err) = run(&["--set", "solver.max_step=2e-3"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning:"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A second, independent reader: the fmi-schema crate (strict about unknown attributes and
/// elements) parses both versions and sees the same names, tokens, flags and counts.
#[test]
fn fmi_schema_crate_parses_both_versions() {
    use fmi_schema::traits::FmiModelDescription;
    let md3 = description(FmiVersion::Fmi3);
    // fmi-schema 0.8.0 does not know the `unit` attribute of Float64 variables (it is in the
    // standard's fmi3RealBaseAttributes, and fmpy's XSD check accepts it): strip it for this
    // reader only.
    let mut xml3 = md3.to_xml().unwrap();
    while let Some(p) = xml3.find(" unit=\"") {
        let end = p + 7 + xml3[p + 7..].find('"').unwrap() + 1;
        xml3.replace_range(p..end, "");
    }
    let x3 = fmi_schema::fmi3::Fmi3ModelDescription::deserialize(&xml3).unwrap();
    assert_eq!(x3.model_name, "slider");
    assert_eq!(x3.instantiation_token, TOKEN);
    let cs = x3.co_simulation.as_ref().unwrap();
    assert_eq!(cs.model_identifier, "slider");
    assert_eq!(cs.provides_intermediate_update, Some(true));
    assert_eq!(cs.can_get_and_set_fmu_state, Some(true));
    assert_eq!(cs.might_return_early_from_do_step, Some(false));
    // fmi-schema 0.8.0 has no FMI 3 Enumeration variables either; it skips the two solver
    // enumerations.
    let n_enum = md3
        .variables
        .iter()
        .filter(|v| {
            matches!(
                v.var_type,
                mbsfmu::description::xml::XmlType::Enumeration(_)
            )
        })
        .count();
    assert_eq!(n_enum, 2);
    assert_eq!(x3.model_variables.len(), md3.variables.len() - n_enum);
    assert_eq!(
        x3.model_structure.unknowns.len(),
        md3.outputs.len() + md3.initial_unknowns.len()
    );
    assert_eq!(x3.default_experiment.as_ref().unwrap().stop_time, Some(2.0));

    let md2 = description(FmiVersion::Fmi2);
    let x2 = fmi_schema::fmi2::Fmi2ModelDescription::deserialize(&md2.to_xml().unwrap()).unwrap();
    assert_eq!(x2.guid, TOKEN);
    let cs = x2.co_simulation.as_ref().unwrap();
    assert_eq!(cs.can_interpolate_inputs, Some(true));
    assert_eq!(cs.provides_directional_derivative, Some(true));
    assert_eq!(x2.num_variables(), md2.variables.len());
    assert_eq!(x2.model_structure.outputs.unknowns.len(), 3);
    assert_eq!(x2.model_structure.initial_unknowns.unknowns.len(), 3);
}

/// Issue 16: `mbsfmu export` packs the runtime library without its debug information, reports
/// the FMU's size, and the FMU stays below 3 MB; the packed library still loads and answers
/// through the C ABI.
#[test]
fn cli_export_packs_a_library_without_debug_information_below_3_mb() {
    let dir = temp_dir("small");
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/suspension_corner.toml");
    let fmu = dir.join("corner.fmu");
    let (code, out, err) = mbsfmu(&[
        "export",
        model.to_str().unwrap(),
        "--fmi",
        "2",
        "-o",
        fmu.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let size = std::fs::metadata(&fmu).unwrap().len() as usize;
    assert!(size < 3_000_000, "FMU is {size} bytes:\n{out}");
    assert!(
        out.contains(&format!(
            "FMU size {:.2} MB ({size} bytes)",
            size as f64 / 1e6
        )),
        "export does not report the size:\n{out}"
    );
    let files = unzip(&std::fs::read(&fmu).unwrap());
    let lib = &files["binaries/linux64/suspension_corner.so"];
    let elf = object::build::elf::Builder::read(lib.as_slice()).unwrap();
    let debug: Vec<String> = elf
        .sections
        .iter()
        .map(|s| s.name.to_string())
        .filter(|n| n.starts_with(".debug"))
        .collect();
    assert!(debug.is_empty(), "debug sections left: {debug:?}");
    assert!(
        elf.sections.iter().any(|s| s.name.to_string() == ".symtab"),
        "the symbol table (function names in backtraces) must stay"
    );
    let so = dir.join("corner.so");
    std::fs::write(&so, lib).unwrap();
    let version = unsafe {
        let l = libloading::Library::new(&so).unwrap();
        let f: libloading::Symbol<unsafe extern "C" fn() -> *const std::ffi::c_char> =
            l.get(b"fmi2GetVersion").unwrap();
        std::ffi::CStr::from_ptr(f()).to_str().unwrap().to_owned()
    };
    assert_eq!(version, "2.0");

    // --keep-debug-info packs the library as built (our release profile keeps line tables).
    let (code, out, err) = mbsfmu(&[
        "export",
        model.to_str().unwrap(),
        "--fmi",
        "2",
        "-o",
        fmu.to_str().unwrap(),
        "--keep-debug-info",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("without debug information"), "{out}");
    let kept = &unzip(&std::fs::read(&fmu).unwrap())["binaries/linux64/suspension_corner.so"];
    assert!(kept.len() >= lib.len());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Stripping needs a real ELF file: a truncated one is a user error naming the library.
#[test]
fn stripping_a_broken_library_names_it() {
    let dir = temp_dir("strip");
    let model = dir.join("slider.toml");
    std::fs::write(&model, "x").unwrap();
    let mut opts = options(&dir, FmiVersion::Fmi2);
    opts.strip_debug_info = true;
    let e = build_fmu(&small_model(vec![]), &model, &opts).unwrap_err();
    assert!(e.is_user_error());
    let e = e.to_string();
    assert!(
        e.contains("libfake.so") && e.contains("--keep-debug-info"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A run that fails part-way keeps what it computed: `mbsfmu simulate` writes the outputs up to
/// the last communication point reached, says where they are, and exits with 1. The model
/// pulls a pendulum's bob along x past the rod's reach (x = 0.5 + 10 (t − 0.02) passes the
/// rod length 1 m at t = 0.07 s): no configuration exists from there on. The outputs before
/// follow the driver exactly.
#[test]
fn cli_simulate_keeps_the_outputs_computed_before_a_failure() {
    let dir = temp_dir("partial");
    let model = dir.join("overpull.toml");
    let y0 = -(0.75f64.sqrt());
    std::fs::write(
        &model,
        format!(
            "[model]\nname = \"overpull\"\ngravity = [0.0, -9.81, 0.0]\n\n\
             [experiment]\nstop = 0.2\nstep = 0.01\n\n\
             [[bodies]]\nname = \"p\"\ntype = \"particle\"\nmass = 1.0\nposition = [0.5, {y0}, 0.0]\n\n\
             [[joints]]\nname = \"rod\"\ntype = \"distance\"\nbody1 = \"ground\"\nbody2 = \"p\"\n\
             point1 = [0.0, 0.0, 0.0]\npoint2 = [0.5, {y0}, 0.0]\nlength = 1.0\n\n\
             [[joints]]\nname = \"plane\"\ntype = \"planar\"\nbody1 = \"ground\"\nbody2 = \"p\"\n\
             point = [0.5, {y0}, 0.0]\naxis = [0.0, 0.0, 1.0]\n\n\
             [[drivers]]\nname = \"pull\"\nbody = \"p\"\ncomponent = \"x\"\n\
             motion = {{ type = \"ramp\", initial = 0.5, slope = 10.0, start = 0.02 }}\n\n\
             [[outputs]]\nname = \"x\"\ntype = \"position\"\nbody = \"p\"\ncomponent = \"x\"\n"
        ),
    )
    .unwrap();
    let out = dir.join("overpull.csv");
    let (code, _, err) = mbsfmu(&[
        "simulate",
        model.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("simulation failed in the step to t = ")
            && err.contains(&format!("are in {}", out.display())),
        "{err}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let rows: Vec<Vec<f64>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|c| c.parse().unwrap()).collect())
        .collect();
    let last = rows.last().unwrap()[0];
    assert!(rows.len() >= 6 && last < 0.07 + 1e-12, "{text}");
    for r in &rows {
        let want = 0.5 + 10.0 * (r[0] - 0.02).max(0.0);
        assert!(
            (r[1] - want).abs() < 1e-9,
            "t = {}: x {} vs {want}",
            r[0],
            r[1]
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `mbsfmu check` says which recursion the joint formulation's tree runs: the planar one for
/// the stiff double pendulum and the slider-crank (every tree joint about parallel axes), the
/// spatial one for the suspension corner (ball joints).
#[test]
fn cli_check_says_whether_the_joint_tree_is_planar() {
    let model = |name: &str| format!("{}/models/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    for (name, planar) in [
        ("double_pendulum_stiff", true),
        ("slider_crank", true),
        ("suspension_corner", false),
    ] {
        let (code, out, err) = mbsfmu(&["check", &model(name)]);
        assert_eq!(code, 0, "{name}: {err}");
        let line = out
            .lines()
            .find(|l| l.contains("M and Ψ by the"))
            .unwrap_or_else(|| panic!("{name}: no recursion line in\n{out}"));
        assert_eq!(line.contains("planar tree"), planar, "{name}: {line}");
        assert_eq!(line.contains("spatial tree"), !planar, "{name}: {line}");
    }
}

/// `mbsfmu check` says what assembly changed, per kind and in physical units, with the body,
/// the same in both formulations: an arm driven to 0.1 rad from its drawn 0 (its centre 0.5 m
/// from the pivot moves 2 · 0.5 sin 0.05 = 4.998e-2 m) and a ball on a spherical joint whose
/// given velocity is not ω × r (projection changes v by 0.768 m/s and ω by 1.447 rad/s). Before,
/// the joint formulation said "positions moved by up to 0.000e0, velocities by up to 0.000e0"
/// (it compared joint coordinates read off the assembled state) and the absolute one gave the
/// largest single coordinate (6.078e-1, a velocity component; quaternion components counted as
/// metres). With `initial = "static"` the equilibrium's motion is listed apart, not as
/// assembly's (before: "positions moved by up to 7.532e-2", a quaternion change).
#[test]
fn cli_check_reports_what_assembly_changed_in_both_formulations() {
    let dir = temp_dir("check_changes");
    let model = |formulation: &str| {
        format!(
            r#"[model]
name = "changes"
gravity = [0.0, 0.0, -9.81]
formulation = "{formulation}"

[[bodies]]
name = "arm"
mass = 1.0
inertia = [0.01, 0.1, 0.1]
position = [0.5, 0.0, 0.0]

[[bodies]]
name = "ball"
mass = 2.0
inertia = [0.05, 0.08, 0.11]
position = [0.3, 0.1, -0.4]
velocity = [0.5, 0.0, 0.0]
angular_velocity = [1.0, -2.0, 3.0]

[[joints]]
name = "pivot"
type = "revolute"
body1 = "ground"
body2 = "arm"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]

[[joints]]
name = "socket"
type = "spherical"
body1 = "ground"
body2 = "ball"
point = [0.0, 0.0, 0.0]

[[drivers]]
name = "drive"
joint = "pivot"
motion = 0.1
"#
        )
    };
    for formulation in ["joint", "absolute"] {
        let file = dir.join(format!("changes_{formulation}.toml"));
        std::fs::write(&file, model(formulation)).unwrap();
        let (code, out, err) = mbsfmu(&["check", file.to_str().unwrap()]);
        assert_eq!(code, 0, "{formulation}: {err}");
        for needle in [
            "assembly moved the bodies by up to 4.998e-2 m (body `arm`) and turned them by up to 1.000e-1 rad = 5.7296 deg (body `arm`)",
            "assembly changed the velocities by up to 7.678e-1 m/s (body `ball`) and the angular velocities by up to 1.447e0 rad/s (body `ball`)",
        ] {
            assert!(out.contains(needle), "{formulation}: no {needle:?} in\n{out}");
        }
        // The file's residual (the driver's 0.1 rad), not the joint state's read off the
        // assembled one.
        assert!(
            out.contains("constraint residual 1.000e-1 as given"),
            "{formulation}:\n{out}"
        );
    }
    // Static initialization: the corner's file positions are consistent; the equilibrium moves
    // the bodies, reported as the equilibrium's.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/suspension_corner.toml");
    let text = std::fs::read_to_string(&src).unwrap();
    for formulation in ["joint", "absolute"] {
        let file = dir.join(format!("corner_{formulation}.toml"));
        let t = text.replacen(
            "initial = \"static\"\n",
            &format!("initial = \"static\"\nformulation = \"{formulation}\"\n"),
            1,
        );
        assert_ne!(t, text);
        std::fs::write(&file, t).unwrap();
        let (code, out, err) = mbsfmu(&["check", file.to_str().unwrap()]);
        assert_eq!(code, 0, "{formulation}: {err}");
        for needle in [
            "assembly moved the bodies by up to 0 m and turned them by up to 0 rad\n",
            "velocities: from rest (initial = \"static\"",
            "from the assembled positions the bodies moved by:\n    chassis          0.061276 m, 0.0000 deg\n",
            "    upper_arm        0.038631 m, 8.6390 deg\n",
        ] {
            assert!(out.contains(needle), "{formulation}: no {needle:?} in\n{out}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `simulate --input` drives the model through the table's slopes, also at the first step and
/// at the last row, where the table ends: the slider-crank's crank turned by a table of 2πt
/// (0.01 s samples to exactly the stop time) gives the outputs of the same model with the
/// built-in ramp 2πt at every row. Before, the last row's slope was the table's "constant
/// after its end" (the crank stopped dead: crank torque −4.96 N m for 0.304) and the first
/// step ran without a slope (13.46 N m at t = 0.01 s).
#[test]
fn cli_simulate_input_table_matches_the_built_in_motion_at_every_row() {
    let dir = temp_dir("input_rows");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/slider_crank.toml");
    let text = std::fs::read_to_string(&src).unwrap();
    let table_model = dir.join("slider_crank.toml");
    std::fs::write(&table_model, &text).unwrap();
    let ramp_model = dir.join("slider_crank_ramp.toml");
    // The same model with the ramp in place of the input (and without the input).
    let inputs = text.find("[[inputs]]").unwrap();
    let end = inputs + text[inputs..].find("\n\n").unwrap() + 2;
    let ramp = format!("{}{}", &text[..inputs], &text[end..]).replacen(
        "motion = { input = \"crank_angle\" }",
        "motion = { type = \"ramp\", initial = 0.0, slope = 6.283185307179586 }",
        1,
    );
    assert_ne!(ramp, text);
    std::fs::write(&ramp_model, ramp).unwrap();
    let csv: String = std::iter::once("time,crank_angle\n".to_string())
        .chain((0..=100).map(|k| {
            let t = k as f64 * 0.01;
            format!("{t},{}\n", 2.0 * std::f64::consts::PI * t)
        }))
        .collect();
    let input = dir.join("crank.csv");
    std::fs::write(&input, csv).unwrap();
    let run = |model: &Path, extra: &[&str], out: &str| {
        let out = dir.join(out);
        let mut args = vec![
            "simulate",
            model.to_str().unwrap(),
            "--stop",
            "1",
            "--step",
            "0.01",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let (code, _, err) = mbsfmu(&args);
        assert_eq!(code, 0, "{err}");
        let text = std::fs::read_to_string(&out).unwrap();
        let header: Vec<String> = text
            .lines()
            .next()
            .unwrap()
            .split(',')
            .map(String::from)
            .collect();
        let rows: Vec<Vec<f64>> = text
            .lines()
            .skip(1)
            .map(|l| l.split(',').map(|c| c.parse().unwrap()).collect())
            .collect();
        (header, rows)
    };
    let (header, table_rows) = run(&table_model, &["--input", input.to_str().unwrap()], "t.csv");
    // A run past the table's end says so.
    let (code, _, err) = mbsfmu(&[
        "simulate",
        table_model.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--stop",
        "1.2",
        "--out",
        dir.join("past.csv").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("covers t = 0 .. 1 s, the run 0 .. 1.2 s"),
        "{err}"
    );
    let (_, ramp_rows) = run(&ramp_model, &[], "r.csv");
    assert_eq!(table_rows.len(), 101);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    for (name, tol) in [("crank_torque", 1e-3), ("slider_x", 1e-6)] {
        let c = col(name);
        for (a, b) in table_rows.iter().zip(&ramp_rows) {
            assert!(
                (a[c] - b[c]).abs() < tol,
                "{name} at t = {}: table {} vs ramp {}",
                a[0],
                a[c],
                b[c]
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A position input sampled from a sine at the communication points drives a 10 kg slider:
/// its acceleration and driver force at every row against the closed form `−A ω² sin ωt`
/// (they read 4× that at every row while the CLI passed the chord as `u̇` and no `ü`).
#[test]
fn cli_simulate_input_table_gives_the_sampled_signals_accelerations() {
    let dir = temp_dir("input_accel");
    let model = dir.join("dm.toml");
    std::fs::write(
        &model,
        "[model]\nname = \"dm\"\ngravity = [0.0, 0.0, 0.0]\n\n[experiment]\nstop = 2.0\nstep = 0.01\ntolerance = 1e-8\n\n\
         [[inputs]]\nname = \"u\"\nunit = \"m\"\n\n\
         [[bodies]]\nname = \"b\"\nmass = 10.0\ninertia = [1.0, 1.0, 1.0]\nposition = [0.0, 0.0, 0.0]\n\n\
         [[joints]]\nname = \"s\"\ntype = \"prismatic\"\nbody1 = \"ground\"\nbody2 = \"b\"\npoint = [0.0, 0.0, 0.0]\naxis = [1.0, 0.0, 0.0]\n\n\
         [[drivers]]\nname = \"d\"\njoint = \"s\"\nmotion = \"u\"\n\n\
         [[outputs]]\nname = \"x\"\ntype = \"position\"\nbody = \"b\"\ncomponent = \"x\"\n\n\
         [[outputs]]\nname = \"a\"\ntype = \"acceleration\"\nbody = \"b\"\ncomponent = \"x\"\n\n\
         [[outputs]]\nname = \"F\"\ntype = \"driver_force\"\ndriver = \"d\"\n",
    )
    .unwrap();
    let w = 2.0 * std::f64::consts::PI;
    let csv: String = std::iter::once("time,u\n".to_string())
        .chain((0..=200).map(|k| {
            let t = k as f64 * 0.01;
            format!("{t},{}\n", 0.02 * (w * t).sin())
        }))
        .collect();
    let input = dir.join("u.csv");
    std::fs::write(&input, csv).unwrap();
    let out = dir.join("o.csv");
    let (code, _, err) = mbsfmu(&[
        "simulate",
        model.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    let rows: Vec<Vec<f64>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|c| c.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 201);
    // Amplitude 0.79 m/s²; the spline's `ü` is O(H²) inside (measured 2.6e-4) and O(H) in
    // the first and last few rows (measured 0.057 at the last).
    for (k, r) in rows.iter().enumerate() {
        let (t, x, a, f) = (r[0], r[1], r[2], r[3]);
        let (xe, ae) = (0.02 * (w * t).sin(), -0.02 * w * w * (w * t).sin());
        assert!((x - xe).abs() < 1e-8, "x at t = {t}: {x} vs {xe}");
        let tol = if (5..=195).contains(&k) { 1e-3 } else { 0.08 };
        assert!((a - ae).abs() < tol, "a at t = {t}: {a} vs {ae}");
        assert!(
            (f - 10.0 * a).abs() < 1e-6 * (1.0 + f.abs()),
            "F at t = {t}: {f} vs m a {}",
            10.0 * a
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A reader that leaves early (`mbsfmu check m.toml | head -1`, `export ... | tail -n 0` under
/// `set -o pipefail`) does not make the tool panic, and `export` still writes the FMU: the
/// report to stdout is written last and a closed stdout is not an error. Before, the first
/// `println!` panicked ("failed printing to stdout: Broken pipe", exit 101), in `export` before
/// the archive was written.
#[test]
fn cli_with_a_closed_stdout_neither_panics_nor_loses_the_fmu() {
    let dir = temp_dir("closed_stdout");
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/slider_crank.toml");
    let fmu = dir.join("sc.fmu");
    for args in [
        vec!["check", model],
        vec!["export", model, "--fmi", "2", "-o", fmu.to_str().unwrap()],
    ] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mbsfmu"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Close the read end before the tool has loaded the model and printed anything.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
    assert!(std::fs::metadata(&fmu).unwrap().len() > 1000);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A start that cannot be found is reported as the initialization's failure, not as a failure
/// "in the step to" the first communication point, and writes no row of NaN outputs.
#[test]
fn cli_simulate_reports_a_failed_initialization_as_such() {
    let dir = temp_dir("init_fail");
    let model = dir.join("noeq.toml");
    // Nothing holds the block against gravity: no static equilibrium.
    std::fs::write(
        &model,
        "[model]\nname = \"noeq\"\ngravity = [0.0, -9.81, 0.0]\ninitial = \"static\"\n\n\
         [[bodies]]\nname = \"b\"\nmass = 1.0\ninertia = [0.1, 0.1, 0.1]\nposition = [0.0, 0.0, 0.0]\n\n\
         [[joints]]\nname = \"s\"\ntype = \"prismatic\"\nbody1 = \"ground\"\nbody2 = \"b\"\n\
         point = [0.0, 0.0, 0.0]\naxis = [0.0, 1.0, 0.0]\n\n\
         [[outputs]]\nname = \"y\"\ntype = \"position\"\nbody = \"b\"\ncomponent = \"y\"\n",
    )
    .unwrap();
    let out = dir.join("noeq.csv");
    let (code, _, err) = mbsfmu(&[
        "simulate",
        model.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("initialization at t = 0 failed"), "{err}");
    assert!(err.contains("static equilibrium not found"), "{err}");
    // The diagnosis names the free direction (it said "the solver stalled although the
    // structure supports the load" where every reduced stiffness was round-off).
    assert!(err.contains("body 'b' y (nothing holds it there"), "{err}");
    assert!(!err.contains("in the step to"), "{err}");
    let csv = std::fs::read_to_string(&out).unwrap();
    assert_eq!(csv.lines().count(), 1, "only the header: {csv}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `export --out-dir` into a directory that does not exist yet creates it (the packager said
/// only "No such file or directory").
#[test]
fn cli_export_creates_the_output_directory() {
    let dir = temp_dir("outdir");
    let out = dir.join("new").join("sub");
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/slider_crank.toml");
    let (code, _, err) = mbsfmu(&[
        "export",
        model.to_str().unwrap(),
        "--fmi",
        "2",
        "--out-dir",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.join("slider_crank_fmi2.fmu").is_file());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `simulate` refuses a `solver.max_step` the work budget of one communication step cannot
/// cover before any work, with the FMU's message naming it (it ran 5000 steps and then gave
/// the generic work-budget message): the check is in the shared co-simulation layer.
#[test]
fn cli_simulate_refuses_a_tiny_max_step_naming_it() {
    let dir = temp_dir("maxstep");
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/double_pendulum_stiff.toml"
    );
    let out = dir.join("o.csv");
    let (code, _, err) = mbsfmu(&[
        "simulate",
        model,
        "--stop",
        "0.002",
        "--step",
        "0.001",
        "--set",
        "solver.max_step=1e-12",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("variable `solver.max_step`: invalid value")
            && err.contains("would need 1.000e9 internal steps")
            && err.contains("raise solver.max_step"),
        "{err}"
    );
    assert!(!err.contains("exhausted after"), "{err}");
    // The model file's fixed step is named as the file's key, not as a variable, and tiny
    // values read as numbers (until session 25: "variable `fixed step`: invalid value 0.000…1",
    // three hundred digits).
    let text = std::fs::read_to_string(model).unwrap().replacen(
        "[solver]\n",
        "[solver]\nfixed_step = 1e-300\n",
        1,
    );
    assert!(text.contains("fixed_step = 1e-300"));
    let fixed = dir.join("fixed.toml");
    std::fs::write(&fixed, text).unwrap();
    let (code, _, err) = mbsfmu(&[
        "simulate",
        fixed.to_str().unwrap(),
        "--stop",
        "0.002",
        "--step",
        "0.001",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "[solver] fixed_step = 1e-300 in the model file: a communication step of 0.001 s"
        ) && err.contains("raise [solver] fixed_step"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A work budget that runs out because of tight tolerances says so and advises looser ones
/// (the appended hint said "or tighter tolerances", the opposite).
#[test]
fn cli_simulate_work_budget_advice_names_tight_tolerances() {
    let dir = temp_dir("budget_tol");
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/double_pendulum_stiff.toml"
    );
    let out = dir.join("o.csv");
    let (code, _, err) = mbsfmu(&[
        "simulate",
        model,
        "--stop",
        "0.05",
        "--set",
        "solver.integrator=w_method",
        "--set",
        "solver.rtol=1e-10",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("work budget"), "{err}");
    assert!(
        err.contains("which the tolerances solver.rtol = 1e-10 (default 1e-4)")
            && err.contains("loosen them"),
        "{err}"
    );
    assert!(!err.contains("or tighter tolerances"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--out` and `--plot` are created before the run: a path that cannot be written is refused
/// at once (it was refused after the whole run, and replaced a failed run's error). A run that
/// fails reports its error first and still writes what was computed, the plot too.
#[test]
fn cli_simulate_creates_the_result_files_before_the_run() {
    let dir = temp_dir("out_first");
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/double_pendulum_stiff.toml"
    );
    let missing = dir.join("missing").join("x.csv");
    // The run fails at t = 1e6 (step size below its minimum): refused before it starts.
    let failing = ["--start", "1e6", "--stop", "1000000.05"];
    let mut args = vec!["simulate", model];
    args.extend(failing);
    args.extend(["--out", missing.to_str().unwrap()]);
    let (code, _, err) = mbsfmu(&args);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "{} (--out): cannot create the file",
            missing.display()
        )),
        "{err}"
    );
    assert!(!err.contains("simulation failed"), "{err}");
    let png = dir.join("missing").join("x.png");
    let ok = dir.join("ok.csv");
    let (code, _, err) = mbsfmu(&[
        "simulate",
        model,
        "--stop",
        "0.05",
        "--out",
        ok.to_str().unwrap(),
        "--plot",
        png.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("(--plot): cannot create the file"), "{err}");
    assert!(!ok.exists(), "--out is not left behind");
    // A failing run with writable files: the cause first, then the files with the rows.
    let plot = dir.join("ok.png");
    let mut args = vec!["simulate", model];
    args.extend(failing);
    args.extend([
        "--out",
        ok.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
    ]);
    let (code, _, err) = mbsfmu(&args);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with("error: simulation failed in the step to t = "),
        "{err}"
    );
    assert!(err.contains(&format!("are in {}", ok.display())), "{err}");
    let csv = std::fs::read_to_string(&ok).unwrap();
    assert!(csv.lines().count() >= 2, "{csv}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A `--step` below the spacing of doubles at the run's times is refused naming --start,
/// --step and the resolution (at 1e13 s the run died with "invalid communication step size
/// 0").
#[test]
fn cli_simulate_refuses_a_step_below_the_time_resolution() {
    let dir = temp_dir("resolution");
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/four_link.toml");
    let out = dir.join("o.csv");
    let (code, _, err) = mbsfmu(&[
        "simulate",
        model,
        "--start",
        "1e13",
        "--stop",
        "10000000000000.01",
        "--step",
        "0.001",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "the communication step 0.001 s (--step or the model's [experiment] step) is below \
             the time resolution at t = 1.000000000000001e13 s"
        ) && err.contains("--start 10000000000000")
            && err.contains("1.953125e-3 s apart"),
        "{err}"
    );
    assert!(!out.exists(), "refused before the output is created");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Minor command-line messages: a stop time from the model file is called so (the message
/// blamed a --stop never given); --plot-outputs without --plot is an error (it was ignored).
#[test]
fn cli_simulate_names_the_model_stop_and_needs_plot_for_plot_outputs() {
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/double_pendulum_stiff.toml"
    );
    let (code, _, err) = mbsfmu(&["simulate", model, "--start", "5", "--out", "/dev/null"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("the model's [experiment] stop 2 must be after --start 5 (give --stop)"),
        "{err}"
    );
    let (code, _, err) = mbsfmu(&[
        "simulate",
        model,
        "--stop",
        "0.05",
        "--out",
        "/dev/null",
        "--plot-outputs",
        "theta1",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--plot-outputs") && err.contains("needs --plot"),
        "{err}"
    );
}

/// Ctrl-C (SIGINT) during a long run stops it at the next communication point and writes the
/// outputs computed so far (it left no CSV).
#[test]
fn cli_simulate_ctrl_c_keeps_the_outputs_computed() {
    let dir = temp_dir("sigint");
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/spherical_chain.toml");
    let out = dir.join("c.csv");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_mbsfmu"))
        .args([
            "simulate",
            model,
            "--stop",
            "100",
            "--set",
            "solver.integrator=sdirk",
            "--set",
            "solver.rtol=1e-10",
            "--set",
            "solver.atol=1e-12",
            "--out",
            out.to_str().unwrap(),
        ])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The file is created just before the run starts; then a little computing.
    let t0 = std::time::Instant::now();
    while !out.exists() && t0.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(800));
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("interrupted (Ctrl-C) at t = ")
            && err.contains(&format!("are in {}", out.display())),
        "{err}"
    );
    let csv = std::fs::read_to_string(&out).unwrap();
    assert!(csv.lines().count() >= 2, "{csv}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A parameter so large that the forces overflow the doubles (a 1e308 kg body, whose weight is
/// infinite) fails the initialization naming the body and saying a parameter is out of range:
/// the static equilibrium took it for converged and the first step failed with "non-finite
/// value in residual" naming nothing. (A 1e308 kg chassis beside 3 kg arms is now refused
/// by the mass ratio at the end of initialization, naming the parameter: see the end.)
#[test]
fn cli_simulate_refuses_a_start_whose_forces_overflow() {
    let dir = temp_dir("overflow");
    let heavy = dir.join("heavy.toml");
    std::fs::write(
        &heavy,
        r#"[model]
name = "heavy"
gravity = [0.0, 0.0, -9.81]
initial = "static"

[[parameters]]
name = "m"
value = 1.0

[[bodies]]
name = "bob"
type = "particle"
mass = "m"
position = [0.0, 0.0, -1.0]

[[forces]]
name = "hanger"
type = "spring_damper"
body1 = "ground"
point1 = [0.0, 0.0, 0.0]
body2 = "bob"
stiffness = 1000.0
damping = 10.0
free_length = 1.0

[[outputs]]
name = "z"
type = "position"
body = "bob"
component = "z"
"#,
    )
    .unwrap();
    let out = dir.join("o.csv");
    let (code, _, err) = mbsfmu(&[
        "simulate",
        heavy.to_str().unwrap(),
        "--stop",
        "0.01",
        "--set",
        "m=1e308",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("initialization at t = 0 failed")
            && err.contains("body 'bob' (forces; mass 1e308 kg)")
            && err.contains("a parameter is out of range"),
        "{err}"
    );
    assert!(!err.contains("in the step to"), "{err}");
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/suspension_corner.toml");
    let (code, _, err) = mbsfmu(&[
        "simulate",
        model,
        "--stop",
        "0.01",
        "--set",
        "m_chassis=1e308",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("the parameter values set before initialization ended (`m_chassis` = 1e308) break a rule of the model file")
            && err.contains("bodies[0] \"chassis\": `mass` 1e308 kg is 3.3e307 times the mass of body `upper_arm` (3.0 kg)"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `export --extra-binary PLATFORM=PATH` puts the library in the folder of the FMI version
/// written: exporting both versions, either version's name is translated where there is a
/// one-to-one counterpart (x86_64-windows <-> win64), and a platform the version has no name
/// for is refused before anything is written; with --fmi, the other version's name is refused
/// with the right one.
#[test]
fn cli_export_extra_binary_uses_each_versions_platform_name() {
    let dir = temp_dir("extra");
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/slider_crank.toml");
    let dll = dir.join("mbsfmu.dll");
    std::fs::write(&dll, b"MZ placeholder").unwrap();
    let binaries = |fmu: &Path| -> Vec<String> {
        let files = unzip(&std::fs::read(fmu).unwrap());
        files
            .keys()
            .filter(|k| k.starts_with("binaries/"))
            .cloned()
            .collect()
    };
    for given in ["x86_64-windows", "win64"] {
        let out = dir.join(given);
        let (code, _, err) = mbsfmu(&[
            "export",
            model.to_str().unwrap(),
            "--out-dir",
            out.to_str().unwrap(),
            "--extra-binary",
            &format!("{given}={}", dll.display()),
        ]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            binaries(&out.join("slider_crank_fmi2.fmu")),
            [
                "binaries/linux64/slider_crank.so",
                "binaries/win64/slider_crank.dll"
            ]
        );
        assert_eq!(
            binaries(&out.join("slider_crank_fmi3.fmu")),
            [
                "binaries/x86_64-linux/slider_crank.so",
                "binaries/x86_64-windows/slider_crank.dll"
            ]
        );
    }
    // No FMI 2 name for Apple silicon: refused, nothing written.
    let out = dir.join("arm");
    let dylib = dir.join("mbsfmu.dylib");
    // A 64-bit Mach-O header, as the darwin platforms need (the file's kind is checked).
    std::fs::write(&dylib, b"\xcf\xfa\xed\xfe placeholder").unwrap();
    let arg = format!("aarch64-darwin={}", dylib.display());
    let (code, _, err) = mbsfmu(&[
        "export",
        model.to_str().unwrap(),
        "--out-dir",
        out.to_str().unwrap(),
        "--extra-binary",
        &arg,
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("FMI 2 has no platform name") && err.contains("--fmi 3"),
        "{err}"
    );
    assert!(!out.exists(), "nothing may be written");
    // ... but accepted for FMI 3 only.
    let fmu = dir.join("arm3.fmu");
    let (code, _, err) = mbsfmu(&[
        "export",
        model.to_str().unwrap(),
        "--fmi",
        "3",
        "-o",
        fmu.to_str().unwrap(),
        "--extra-binary",
        &arg,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(binaries(&fmu).contains(&"binaries/aarch64-darwin/slider_crank.dylib".to_string()));
    // With --fmi, the other version's name is refused with the right one.
    for (v, given, right) in [
        ("3", "win64", "x86_64-windows"),
        ("2", "x86_64-windows", "win64"),
    ] {
        let fmu = dir.join(format!("w{v}.fmu"));
        let (code, _, err) = mbsfmu(&[
            "export",
            model.to_str().unwrap(),
            "--fmi",
            v,
            "-o",
            fmu.to_str().unwrap(),
            "--extra-binary",
            &format!("{given}={}", dll.display()),
        ]);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains(&format!("its folder is `{right}`")), "{err}");
        assert!(!fmu.exists());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `simulate --set` names what a name is when it is not a parameter (an input is given with
/// `--input`), and takes `solver.fixed_step`, the model file's `[solver]` key that `export
/// --set` writes (until session 25 it was "not a parameter"): the half-implicit method then
/// takes exactly stop / fixed_step steps.
#[test]
fn cli_simulate_set_names_inputs_and_takes_the_fixed_step() {
    let dir = temp_dir("set_kinds");
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/quarter_car_rig.toml");
    let out = dir.join("o.csv");
    let (code, _, err) = mbsfmu(&["simulate", model, "--stop", "0.1", "--set", "stamp_z=3"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "\"stamp_z\" is an input, not a parameter: give its values over time with --input"
        ),
        "{err}"
    );
    let (code, out_text, err) = mbsfmu(&[
        "simulate",
        model,
        "--stop",
        "0.1",
        "--step",
        "0.01",
        "--set",
        "solver.integrator=half_implicit",
        "--set",
        "solver.fixed_step=1e-3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out_text.contains("solver: 100 steps (0 rejected)"),
        "{out_text}"
    );
    let (code, _, err) = mbsfmu(&["simulate", model, "--set", "solver.fixed_step=-1"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("\"-1\" is not a positive number of seconds"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A failure at the start with a parameter far outside the range of doubles' solvers names the
/// parameter (a damping of 1e308 on a torsion spring failed as "singular matrix … elimination
/// step 4", naming nothing, until session 25).
#[test]
fn cli_simulate_names_an_extreme_parameter_when_the_start_fails() {
    let dir = temp_dir("extreme");
    let model = dir.join("arm.toml");
    std::fs::write(
        &model,
        r#"[model]
name = "arm"
gravity = [0.0, -9.81, 0.0]

[[parameters]]
name = "c"
value = 1.0

[[bodies]]
name = "bar"
mass = 1.0
inertia = [0.01, 0.1, 0.1]
position = [0.5, 0.0, 0.0]

[[bodies]]
name = "ball"
type = "particle"
mass = 0.5
position = [1.0, -1.0, 0.0]

[[joints]]
name = "pivot"
type = "revolute"
body1 = "ground"
body2 = "bar"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]

[[joints]]
name = "rod"
type = "distance"
body1 = "bar"
body2 = "ball"
point1 = [1.0, 0.0, 0.0]
point2 = [1.0, -1.0, 0.0]

[[forces]]
name = "spring"
type = "rotational_spring_damper"
joint = "pivot"
stiffness = 100.0
damping = "c"

[[outputs]]
name = "angle"
type = "joint_coordinate"
joint = "pivot"
"#,
    )
    .unwrap();
    let out = dir.join("o.csv");
    let m = model.to_str().unwrap();
    let args = [
        "simulate",
        m,
        "--stop",
        "0.01",
        "--step",
        "0.01",
        "--out",
        out.to_str().unwrap(),
    ];
    let (code, _, err) = mbsfmu(&[&args[..], &["--set", "c=1e308"]].concat());
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("singular matrix")
            && err.contains(
                "parameter `c` = 1e308 far outside the range a double-precision solver handles"
            ),
        "{err}"
    );
    let (code, _, err) = mbsfmu(&args);
    assert_eq!(code, 0, "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An `initial_step` below the smallest step at the start time is raised to it, for every
/// method (1e-300 failed the first step: "step size 1e-300 fell below the minimum", until
/// session 25).
#[test]
fn cli_simulate_raises_a_tiny_initial_step() {
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/double_pendulum_stiff.toml"
    );
    let dir = temp_dir("initial_step");
    let out = dir.join("o.csv");
    for m in ["bdf", "sdirk", "half_implicit", "dopri5"] {
        let (code, _, err) = mbsfmu(&[
            "simulate",
            model,
            "--stop",
            "0.02",
            "--set",
            "solver.initial_step=1e-300",
            "--set",
            &format!("solver.integrator={m}"),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{m}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `export -o` into a directory that does not exist creates it with its parents, as
/// `--out-dir` does (previously it failed with "No such file or directory").
#[test]
fn cli_export_output_creates_missing_parent_directories() {
    let dir = temp_dir("o_parents");
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/slider_crank.toml");
    let fmu = dir.join("nodir/sub/a.fmu");
    let (code, _, err) = mbsfmu(&["export", model, "--fmi", "2", "-o", fmu.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(fmu.is_file());
    // A bare file name (no parent directory) still works.
    let (code, _, err) = std::process::Command::new(env!("CARGO_BIN_EXE_mbsfmu"))
        .args(["export", model, "--fmi", "3", "-o", "b.fmu"])
        .current_dir(&dir)
        .output()
        .map(|o| {
            (
                o.status.code().unwrap(),
                (),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        })
        .unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(dir.join("b.fmu").is_file());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `export` prints the model's load-time warnings to stderr, in the lines `check` lists them
/// in, and still exports (previously it printed none).
#[test]
fn cli_export_prints_the_models_warnings() {
    let dir = temp_dir("export_warnings");
    let base = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/slider_crank.toml"
    ))
    .unwrap();
    let model = dir.join("warn.toml");
    std::fs::write(
        &model,
        format!(
            "{base}\n[[parameters]]\nname = \"unused_p\"\nvalue = 1.0\n\n[[bodies]]\nname = \"loose\"\nmass = 1.0\ninertia = [1.0, 1.0, 1.0]\nposition = [0.0, 0.0, 479.7]\n"
        ),
    )
    .unwrap();
    let (code, check_out, err) = mbsfmu(&["check", model.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let warnings: Vec<&str> = check_out
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("warning: "))
        .collect();
    assert_eq!(warnings.len(), 3, "{check_out}");
    let fmu = dir.join("w.fmu");
    let (code, _, err) = mbsfmu(&[
        "export",
        model.to_str().unwrap(),
        "--fmi",
        "2",
        "-o",
        fmu.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(fmu.is_file());
    let printed: Vec<&str> = err.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(printed, warnings, "{err}");
    assert!(
        err.contains("\"unused_p\": this parameter acts on nothing"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--extra-binary` files are checked by their platform, as `--library` is: a PE file ("MZ")
/// for Windows, a Mach-O file for macOS, an ELF file for Linux; anything else (an empty file)
/// is refused naming the file, the platform and what was expected, before anything is
/// written (previously a 0-byte DLL was packed).
#[test]
fn cli_export_checks_extra_binaries_by_platform() {
    let dir = temp_dir("extra_kind");
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/slider_crank.toml");
    let file = |name: &str, content: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, content).unwrap();
        p.to_str().unwrap().to_string()
    };
    let empty = file("fake.dll", b"");
    let elf = file("lib.so", b"\x7fELF fake");
    let pe = file("real.dll", b"MZ fake");
    let macho_be = file("a.dylib", b"\xfe\xed\xfa\xcf fake");
    let fat = file("fat.dylib", b"\xca\xfe\xba\xbe fake");
    let macho32_le = file("b.dylib", b"\xce\xfa\xed\xfe fake");
    let out = dir.join("out");
    let export = |fmi: &str, arg: String| {
        let fmu = out.join(format!("x{fmi}.fmu"));
        let r = mbsfmu(&[
            "export",
            model,
            "--fmi",
            fmi,
            "-o",
            fmu.to_str().unwrap(),
            "--extra-binary",
            &arg,
        ]);
        (r, fmu)
    };
    for (fmi, platform, path, expected) in [
        (
            "2",
            "win64",
            &empty,
            "a Windows DLL (PE file, \"MZ\" header)",
        ),
        (
            "3",
            "x86_64-windows",
            &elf,
            "a Windows DLL (PE file, \"MZ\" header)",
        ),
        ("3", "i686-windows", &macho_be, "a Windows DLL"),
        (
            "2",
            "darwin64",
            &pe,
            "a macOS dynamic library (Mach-O header)",
        ),
        (
            "3",
            "aarch64-darwin",
            &elf,
            "a macOS dynamic library (Mach-O header)",
        ),
        ("2", "linux32", &pe, "a Linux shared library (ELF header)"),
        (
            "3",
            "aarch64-linux",
            &empty,
            "a Linux shared library (ELF header)",
        ),
    ] {
        let ((code, _, err), fmu) = export(fmi, format!("{platform}={path}"));
        assert_eq!(code, 1, "{platform}={path}: {err}");
        assert!(
            err.contains(&format!(
                "--extra-binary {platform}={path}: {path} is {}, but the {platform} platform needs {expected}",
                if path == &empty { "an empty file" } else { "a file without that header" }
            )),
            "{err}"
        );
        assert!(!fmu.exists(), "nothing may be written");
    }
    assert!(!out.exists(), "not even the output directory");
    for (fmi, platform, path) in [
        ("2", "win64", &pe),
        ("3", "i686-windows", &pe),
        ("2", "darwin64", &macho_be),
        ("3", "aarch64-darwin", &fat),
        ("2", "darwin32", &macho32_le),
        ("2", "linux32", &elf),
        ("3", "aarch32-linux", &elf),
    ] {
        let ((code, _, err), fmu) = export(fmi, format!("{platform}={path}"));
        assert_eq!(code, 0, "{platform}={path}: {err}");
        assert!(fmu.is_file());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `export --set solver.fixed_step=…` names the fixed step in the line that lists the baked
/// solver settings (previously it was left out).
#[test]
fn cli_export_set_prints_the_fixed_step() {
    let dir = temp_dir("fixed_step_line");
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/slider_crank.toml");
    let fmu = dir.join("f.fmu");
    let (code, out, err) = mbsfmu(&[
        "export",
        model,
        "--fmi",
        "2",
        "-o",
        fmu.to_str().unwrap(),
        "--set",
        "solver.fixed_step=1e-3",
    ]);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.contains("solver baked"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.ends_with(", fixed_step 0.001"), "{line}");
    let (code, out, err) = mbsfmu(&[
        "export",
        model,
        "--fmi",
        "2",
        "-o",
        fmu.to_str().unwrap(),
        "--set",
        "solver.rtol=1e-6",
    ]);
    assert_eq!(code, 0, "{err}");
    let line = out.lines().find(|l| l.contains("solver baked")).unwrap();
    assert!(!line.contains("fixed_step"), "{line}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `mbsfmu simulate` of the stiff double pendulum from t0 = 1e6: its first internal steps are
/// below the smallest step doubles resolve there (16 spacings, 3.7e-9 s). The error says the
/// time's resolution sets that minimum and advises a start nearer 0 (until session 28 it
/// advised a smaller --step or tighter tolerances, which cannot help).
#[test]
fn cli_simulate_at_a_large_start_time_names_the_time_resolution() {
    let dir = temp_dir("bigstart");
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/double_pendulum_stiff.toml");
    let out = dir.join("dp.csv");
    let (code, _, err) = mbsfmu(&[
        "simulate",
        model.to_str().unwrap(),
        "--start",
        "1000000",
        "--stop",
        "1000000.01",
        "--step",
        "0.001",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("set by the resolution of doubles at t = 1000000")
            && err.contains("try a --start nearer 0")
            && !err.contains("try a smaller --step"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
