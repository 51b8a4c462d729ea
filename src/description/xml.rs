//! `modelDescription.xml` for FMI 2.0 and FMI 3.0 Co-Simulation: the description types, the
//! writer (quick-xml) and a reader that parses the XML back into the same types (used by the
//! round-trip tests and by `mbsfmu info`).

use super::capabilities::Capabilities;
use super::deps::output_dependencies;
use super::units::{parse_unit, BaseUnit};
use super::{
    Causality, EnumType, Initial, StartValue, VarKind, VarType, Variability, VariableTable,
};
use crate::mbs::spec::{first_non_xml_char, ExperimentSpec, ModelSpec};
use quick_xml::events::attributes::Attribute;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, Event};
use quick_xml::name::QName;
use std::collections::HashMap;
use thiserror::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FmiVersion {
    Fmi2,
    Fmi3,
}

impl FmiVersion {
    pub fn attr(self) -> &'static str {
        match self {
            FmiVersion::Fmi2 => "2.0",
            FmiVersion::Fmi3 => "3.0",
        }
    }
    /// Folder under `binaries/` for 64-bit Linux.
    pub fn linux_platform(self) -> &'static str {
        super::platform::linux_platform(self)
    }
    pub fn number(self) -> u32 {
        match self {
            FmiVersion::Fmi2 => 2,
            FmiVersion::Fmi3 => 3,
        }
    }
}

/// Log categories (name, description): listed under `<LogCategories>` in the model description
/// (FMI 2 and 3) and accepted by `SetDebugLogging` (src/fmi).
pub const LOG_CATEGORIES: [(&str, &str); 6] = [
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
];

#[derive(Debug, Clone, PartialEq)]
pub struct UnitDefinition {
    pub name: String,
    /// `None` for units whose symbols we do not know (declared so the variable's unit is
    /// defined, without a conversion).
    pub base: Option<BaseUnit>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EnumerationType {
    pub name: String,
    pub items: Vec<(String, i64)>,
}

/// A variable's type as written in the XML.
#[derive(Debug, Clone, PartialEq)]
pub enum XmlType {
    Float64,
    Int64,
    /// With the name of its declared type.
    Enumeration(String),
    /// Any other FMI type (only from FMUs written by other tools; shown by `info`).
    Other(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct XmlVariable {
    pub name: String,
    pub value_reference: u32,
    pub description: String,
    pub causality: Causality,
    pub variability: Variability,
    pub initial: Option<Initial>,
    pub var_type: XmlType,
    /// Empty: no unit.
    pub unit: String,
    pub start: StartValue,
    /// FMI 3: accessible in intermediate update mode.
    pub intermediate_update: bool,
    /// The start value as written, for types this reader does not interpret (UInt64, String,
    /// Binary, Boolean, Float32, ...; FMI 3 `<Start value>` children joined by spaces).
    pub start_text: Option<String>,
    /// FMI 3 array dimensions as written: a size, or `vr N` for a structural parameter.
    pub dimensions: Vec<String>,
}

/// An entry of `ModelStructure` (by value reference in both versions; the FMI 2 writer and
/// reader translate to and from 1-based `ScalarVariable` indices).
#[derive(Debug, Clone, PartialEq)]
pub struct Unknown {
    pub value_reference: u32,
    /// `None`: depends on all knowns (attribute absent); `Some(vec![])`: on none.
    pub dependencies: Option<Vec<u32>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelDescription {
    pub fmi_version: FmiVersion,
    pub model_name: String,
    pub description: String,
    pub generation_tool: String,
    pub generation_date_and_time: String,
    /// FMI 2 `guid` / FMI 3 `instantiationToken`.
    pub token: String,
    pub model_identifier: String,
    pub structured_names: bool,
    pub capabilities: Capabilities,
    pub units: Vec<UnitDefinition>,
    pub enumeration_types: Vec<EnumerationType>,
    /// `<LogCategories>`: (name, description).
    pub log_categories: Vec<(String, String)>,
    pub experiment: Option<ExperimentSpec>,
    pub variables: Vec<XmlVariable>,
    pub outputs: Vec<Unknown>,
    pub initial_unknowns: Vec<Unknown>,
}

#[derive(Debug, Error)]
pub enum XmlError {
    #[error("modelDescription.xml: malformed XML at byte {position}: {message}")]
    Syntax { position: u64, message: String },
    #[error("modelDescription.xml: element <{element}>: {message}")]
    Content { element: String, message: String },
    #[error("modelDescription.xml: writing failed: {0}")]
    Write(String),
}

/// A C identifier made from the model name (file name of the shared library, symbol-safe).
pub fn model_identifier(model_name: &str) -> String {
    let mut id: String = model_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if id.is_empty() || id.starts_with(|c: char| c.is_ascii_digit()) {
        id.insert(0, '_');
    }
    id
}

/// Whether `name` follows the FMI `structured` naming convention in the subset we produce:
/// identifiers (letters, digits, `_`, not starting with a digit) separated by dots, each
/// optionally followed by `[i,j]` indices.
pub fn is_structured_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|part| {
            let (ident, idx) = match part.find('[') {
                Some(p) => (&part[..p], Some(&part[p..])),
                None => (part, None),
            };
            let ident_ok = ident
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && ident.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            let idx_ok = idx.is_none_or(|s| {
                s.len() > 2
                    && s.ends_with(']')
                    && s[1..s.len() - 1]
                        .split(',')
                        .all(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
            });
            ident_ok && idx_ok
        })
}

/// The current UTC time as `xs:dateTime` (`SOURCE_DATE_EPOCH` overrides it, for reproducible
/// builds).
pub fn now_utc() -> String {
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0)
        });
    format_utc(secs)
}

/// Seconds since 1970 to `YYYY-MM-DDThh:mm:ssZ` (proleptic Gregorian, H. Hinnant's
/// days-to-civil algorithm).
pub fn format_utc(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

impl ModelDescription {
    /// The description of `spec` for `version`. `table` must be `VariableTable::from_spec(spec)`
    /// (the value references the runtime uses).
    pub fn new(
        spec: &ModelSpec,
        table: &VariableTable,
        version: FmiVersion,
        token: &str,
        generation_date_and_time: &str,
        capabilities: Capabilities,
    ) -> ModelDescription {
        let fmi3 = version == FmiVersion::Fmi3;
        let mut variables = Vec::new();
        let mut input_vr = HashMap::new();
        let mut output_vr = Vec::new();
        for v in &table.variables {
            if v.causality == Causality::Independent && !fmi3 {
                // FMI 2 Co-Simulation: time is implicit (doStep's arguments), not a variable.
                continue;
            }
            match v.kind {
                VarKind::Input(i) => {
                    input_vr.insert(i, v.value_reference);
                }
                VarKind::Output(i) => output_vr.push((i, v.value_reference)),
                _ => {}
            }
            let var_type = match v.var_type {
                VarType::Float64 => XmlType::Float64,
                VarType::Int64 => XmlType::Int64,
                VarType::Enumeration(e) => XmlType::Enumeration(e.type_name().to_string()),
            };
            variables.push(XmlVariable {
                name: v.name.clone(),
                value_reference: v.value_reference,
                description: v.description.clone(),
                causality: v.causality,
                variability: v.variability,
                initial: v.initial,
                var_type,
                unit: v.unit.clone(),
                start: v.start.clone(),
                intermediate_update: fmi3
                    && capabilities.provides_intermediate_update
                    && v.causality == Causality::Input,
                start_text: None,
                dimensions: Vec::new(),
            });
        }
        let deps = output_dependencies(spec);
        let outputs: Vec<Unknown> = output_vr
            .iter()
            .map(|&(i, vr)| Unknown {
                value_reference: vr,
                dependencies: Some(
                    deps[i]
                        .iter()
                        .filter_map(|u| input_vr.get(u).copied())
                        .collect(),
                ),
            })
            .collect();
        // Outputs are `calculated`, so each is an initial unknown; its initial value depends on
        // parameters and inputs in ways we do not track: dependencies omitted (= on all).
        // Calculated parameters are initial unknowns too (FMI 2 and 3), ahead of the outputs
        // (the list is in variable order).
        let initial_unknowns = table
            .variables
            .iter()
            .filter(|v| v.causality == Causality::CalculatedParameter)
            .map(|v| v.value_reference)
            .chain(output_vr.iter().map(|&(_, vr)| vr))
            .map(|vr| Unknown {
                value_reference: vr,
                dependencies: None,
            })
            .collect();

        let mut unit_names: Vec<String> = variables
            .iter()
            .filter(|v| !v.unit.is_empty())
            .map(|v| v.unit.clone())
            .collect();
        unit_names.sort();
        unit_names.dedup();
        let units = unit_names
            .into_iter()
            .map(|name| UnitDefinition {
                base: parse_unit(&name),
                name,
            })
            .collect();

        let mut enum_types = Vec::new();
        for e in [EnumType::Integrator, EnumType::Jacobian] {
            if table
                .variables
                .iter()
                .any(|v| v.var_type == VarType::Enumeration(e))
            {
                enum_types.push(EnumerationType {
                    name: e.type_name().to_string(),
                    items: e
                        .items()
                        .into_iter()
                        .map(|(n, v)| (n.to_string(), v))
                        .collect(),
                });
            }
        }
        let structured_names = variables.iter().all(|v| is_structured_name(&v.name));
        ModelDescription {
            fmi_version: version,
            model_name: spec.name.clone(),
            description: spec.description.clone(),
            generation_tool: format!("mbsfmu {}", env!("CARGO_PKG_VERSION")),
            generation_date_and_time: generation_date_and_time.to_string(),
            token: token.to_string(),
            model_identifier: model_identifier(&spec.name),
            structured_names,
            capabilities: capabilities.for_model(spec).for_version(version),
            units,
            enumeration_types: enum_types,
            log_categories: LOG_CATEGORIES
                .iter()
                .map(|&(n, d)| (n.to_string(), d.to_string()))
                .collect(),
            experiment: Some(spec.experiment),
            variables,
            outputs,
            initial_unknowns,
        }
    }

    pub fn variable(&self, vr: u32) -> Option<&XmlVariable> {
        self.variables.iter().find(|v| v.value_reference == vr)
    }

    /// The XML text (UTF-8, indented by two spaces).
    pub fn to_xml(&self) -> Result<String, XmlError> {
        let mut w = quick_xml::Writer::new_with_indent(Vec::new(), b' ', 2);
        write_description(&mut w, self).map_err(|e| XmlError::Write(e.to_string()))?;
        String::from_utf8(w.into_inner()).map_err(|e| XmlError::Write(e.to_string()))
    }

    /// Parse `modelDescription.xml` (FMI 2.0 or 3.0).
    pub fn from_xml(text: &str) -> Result<ModelDescription, XmlError> {
        read_description(text)
    }
}

/// `xs:double` text that parses back to the same `f64`.
pub fn fmt_f64(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 {
            "INF".into()
        } else {
            "-INF".into()
        }
    } else {
        format!("{x:?}")
    }
}

fn parse_f64(s: &str) -> Option<f64> {
    match s.trim() {
        "INF" => Some(f64::INFINITY),
        "-INF" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        t => t.parse().ok(),
    }
}

fn causality_str(c: Causality) -> &'static str {
    match c {
        Causality::Parameter => "parameter",
        Causality::Input => "input",
        Causality::Output => "output",
        Causality::Local => "local",
        Causality::Independent => "independent",
        Causality::CalculatedParameter => "calculatedParameter",
    }
}

fn variability_str(v: Variability) -> &'static str {
    match v {
        Variability::Constant => "constant",
        Variability::Fixed => "fixed",
        Variability::Tunable => "tunable",
        Variability::Discrete => "discrete",
        Variability::Continuous => "continuous",
    }
}

fn initial_str(i: Initial) -> &'static str {
    match i {
        Initial::Exact => "exact",
        Initial::Approx => "approx",
        Initial::Calculated => "calculated",
    }
}

type W = quick_xml::Writer<Vec<u8>>;
type IoResult = std::io::Result<()>;

/// An attribute value escaped for XML: the five markup characters as entities, and tab, line
/// feed and carriage return as character references (written raw, a parser's attribute-value
/// normalisation would turn them into spaces).
fn escape_attribute(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c => out.push(c),
        }
    }
    out
}

/// A start tag; refuses (an error, no output) a value with a character XML 1.0 cannot represent,
/// so that no ill-formed `modelDescription.xml` is ever written (the model loader refuses such
/// strings first, naming the file and element).
fn start_tag(name: &str, attrs: &[(&str, String)]) -> std::io::Result<BytesStart<'static>> {
    let mut e = BytesStart::new(name.to_string());
    for (k, v) in attrs {
        if let Some((pos, c)) = first_non_xml_char(v) {
            return Err(std::io::Error::other(format!(
                "<{name}> attribute {k}: the control character U+{:04X} at character {pos} \
                 cannot be represented in XML 1.0",
                c as u32
            )));
        }
        let value = escape_attribute(v);
        e.push_attribute(Attribute {
            key: QName(k.as_bytes()),
            value: value.into_bytes().into(),
        });
    }
    Ok(e)
}

fn empty(w: &mut W, name: &str, attrs: &[(&str, String)]) -> IoResult {
    w.write_event(Event::Empty(start_tag(name, attrs)?))
}

fn open(w: &mut W, name: &str, attrs: &[(&str, String)]) -> IoResult {
    w.write_event(Event::Start(start_tag(name, attrs)?))
}

fn close(w: &mut W, name: &str) -> IoResult {
    w.write_event(Event::End(BytesEnd::new(name.to_string())))
}

fn start_text(v: &XmlVariable) -> Option<String> {
    match v.start {
        StartValue::None => None,
        StartValue::Float(x) => Some(fmt_f64(x)),
        StartValue::Int(i) => Some(i.to_string()),
    }
}

fn write_description(w: &mut W, md: &ModelDescription) -> IoResult {
    let fmi3 = md.fmi_version == FmiVersion::Fmi3;
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let mut root = vec![
        ("fmiVersion", md.fmi_version.attr().to_string()),
        ("modelName", md.model_name.clone()),
    ];
    root.push((
        if fmi3 { "instantiationToken" } else { "guid" },
        md.token.clone(),
    ));
    if !md.description.is_empty() {
        root.push(("description", md.description.clone()));
    }
    root.push(("generationTool", md.generation_tool.clone()));
    root.push(("generationDateAndTime", md.generation_date_and_time.clone()));
    root.push((
        "variableNamingConvention",
        if md.structured_names {
            "structured"
        } else {
            "flat"
        }
        .to_string(),
    ));
    if !fmi3 {
        root.push(("numberOfEventIndicators", "0".to_string()));
    }
    open(w, "fmiModelDescription", &root)?;

    let mut cs = vec![("modelIdentifier", md.model_identifier.clone())];
    cs.extend(md.capabilities.attributes(md.fmi_version));
    empty(w, "CoSimulation", &cs)?;

    if !md.units.is_empty() {
        open(w, "UnitDefinitions", &[])?;
        for u in &md.units {
            match &u.base {
                None => empty(w, "Unit", &[("name", u.name.clone())])?,
                Some(b) => {
                    open(w, "Unit", &[("name", u.name.clone())])?;
                    let mut attrs: Vec<(&str, String)> = b
                        .exponents()
                        .into_iter()
                        .map(|(k, e)| (k, e.to_string()))
                        .collect();
                    if b.factor != 1.0 {
                        attrs.push(("factor", fmt_f64(b.factor)));
                    }
                    if b.offset != 0.0 {
                        attrs.push(("offset", fmt_f64(b.offset)));
                    }
                    empty(w, "BaseUnit", &attrs)?;
                    close(w, "Unit")?;
                }
            }
        }
        close(w, "UnitDefinitions")?;
    }

    if !md.enumeration_types.is_empty() {
        open(w, "TypeDefinitions", &[])?;
        for t in &md.enumeration_types {
            if fmi3 {
                open(w, "EnumerationType", &[("name", t.name.clone())])?;
            } else {
                open(w, "SimpleType", &[("name", t.name.clone())])?;
                open(w, "Enumeration", &[])?;
            }
            for (n, v) in &t.items {
                empty(w, "Item", &[("name", n.clone()), ("value", v.to_string())])?;
            }
            if fmi3 {
                close(w, "EnumerationType")?;
            } else {
                close(w, "Enumeration")?;
                close(w, "SimpleType")?;
            }
        }
        close(w, "TypeDefinitions")?;
    }

    // After UnitDefinitions and TypeDefinitions, before DefaultExperiment (both XSDs).
    if !md.log_categories.is_empty() {
        open(w, "LogCategories", &[])?;
        for (n, d) in &md.log_categories {
            let mut attrs = vec![("name", n.clone())];
            if !d.is_empty() {
                attrs.push(("description", d.clone()));
            }
            empty(w, "Category", &attrs)?;
        }
        close(w, "LogCategories")?;
    }

    if let Some(e) = &md.experiment {
        empty(
            w,
            "DefaultExperiment",
            &[
                ("startTime", fmt_f64(e.start)),
                ("stopTime", fmt_f64(e.stop)),
                ("tolerance", fmt_f64(e.tolerance)),
                ("stepSize", fmt_f64(e.step)),
            ],
        )?;
    }

    open(w, "ModelVariables", &[])?;
    for v in &md.variables {
        let mut common = vec![
            ("name", v.name.clone()),
            ("valueReference", v.value_reference.to_string()),
        ];
        if !v.description.is_empty() {
            common.push(("description", v.description.clone()));
        }
        common.push(("causality", causality_str(v.causality).to_string()));
        common.push(("variability", variability_str(v.variability).to_string()));
        if let Some(i) = v.initial {
            common.push(("initial", initial_str(i).to_string()));
        }
        let mut typed: Vec<(&str, String)> = Vec::new();
        let type_name = match &v.var_type {
            XmlType::Float64 => {
                if !v.unit.is_empty() {
                    typed.push(("unit", v.unit.clone()));
                }
                if fmi3 {
                    "Float64"
                } else {
                    "Real"
                }
            }
            XmlType::Int64 => {
                if fmi3 {
                    "Int64"
                } else {
                    "Integer"
                }
            }
            XmlType::Enumeration(t) => {
                typed.push(("declaredType", t.clone()));
                "Enumeration"
            }
            XmlType::Other(t) => t.as_str(),
        };
        if fmi3 && v.intermediate_update {
            typed.push(("intermediateUpdate", "true".to_string()));
        }
        if let Some(s) = start_text(v) {
            typed.push(("start", s));
        }
        if fmi3 {
            common.extend(typed);
            empty(w, type_name, &common)?;
        } else {
            open(w, "ScalarVariable", &common)?;
            empty(w, type_name, &typed)?;
            close(w, "ScalarVariable")?;
        }
    }
    close(w, "ModelVariables")?;

    // FMI 2 refers to variables by 1-based position in ModelVariables, FMI 3 by value reference.
    let index_of: HashMap<u32, usize> = md
        .variables
        .iter()
        .enumerate()
        .map(|(i, v)| (v.value_reference, i + 1))
        .collect();
    let refer = |vr: u32| -> String {
        if fmi3 {
            vr.to_string()
        } else {
            index_of
                .get(&vr)
                .map_or_else(|| "0".to_string(), |i| i.to_string())
        }
    };
    let unknown_attrs = |u: &Unknown| -> Vec<(&str, String)> {
        let mut a = vec![(
            if fmi3 { "valueReference" } else { "index" },
            refer(u.value_reference),
        )];
        if let Some(d) = &u.dependencies {
            a.push((
                "dependencies",
                d.iter().map(|&vr| refer(vr)).collect::<Vec<_>>().join(" "),
            ));
        }
        a
    };
    open(w, "ModelStructure", &[])?;
    if fmi3 {
        for u in &md.outputs {
            empty(w, "Output", &unknown_attrs(u))?;
        }
        for u in &md.initial_unknowns {
            empty(w, "InitialUnknown", &unknown_attrs(u))?;
        }
    } else {
        if !md.outputs.is_empty() {
            open(w, "Outputs", &[])?;
            for u in &md.outputs {
                empty(w, "Unknown", &unknown_attrs(u))?;
            }
            close(w, "Outputs")?;
        }
        if !md.initial_unknowns.is_empty() {
            open(w, "InitialUnknowns", &[])?;
            for u in &md.initial_unknowns {
                empty(w, "Unknown", &unknown_attrs(u))?;
            }
            close(w, "InitialUnknowns")?;
        }
    }
    close(w, "ModelStructure")?;
    close(w, "fmiModelDescription")?;
    Ok(())
}

// ---------------------------------------------------------------- reader

struct Element {
    name: String,
    attrs: HashMap<String, String>,
}

impl Element {
    fn get(&self, k: &str) -> Option<&str> {
        self.attrs.get(k).map(String::as_str)
    }
    fn err(&self, message: impl Into<String>) -> XmlError {
        XmlError::Content {
            element: self.name.clone(),
            message: message.into(),
        }
    }
    fn req(&self, k: &str) -> Result<&str, XmlError> {
        self.get(k)
            .ok_or_else(|| self.err(format!("missing attribute {k}")))
    }
    fn u32(&self, k: &str) -> Result<u32, XmlError> {
        let s = self.req(k)?;
        s.trim().parse().map_err(|_| {
            self.err(format!(
                "attribute {k}: expected an unsigned integer, found {s:?}"
            ))
        })
    }
    fn f64(&self, k: &str) -> Result<Option<f64>, XmlError> {
        self.get(k)
            .map(|s| {
                parse_f64(s).ok_or_else(|| {
                    self.err(format!("attribute {k}: expected a number, found {s:?}"))
                })
            })
            .transpose()
    }
    fn i64(&self, k: &str) -> Result<Option<i64>, XmlError> {
        self.get(k)
            .map(|s| {
                s.trim().parse().map_err(|_| {
                    self.err(format!("attribute {k}: expected an integer, found {s:?}"))
                })
            })
            .transpose()
    }
}

fn element(e: &BytesStart) -> Result<Element, XmlError> {
    let name = String::from_utf8_lossy(e.local_name().as_ref()).into_owned();
    let mut attrs = HashMap::new();
    for a in e.attributes() {
        let a = a.map_err(|err| XmlError::Content {
            element: name.clone(),
            message: err.to_string(),
        })?;
        let key = String::from_utf8_lossy(a.key.local_name().as_ref()).into_owned();
        let value = a.unescape_value().map_err(|err| XmlError::Content {
            element: name.clone(),
            message: err.to_string(),
        })?;
        attrs.insert(key, value.into_owned());
    }
    Ok(Element { name, attrs })
}

fn parse_causality(el: &Element) -> Result<Causality, XmlError> {
    Ok(match el.get("causality").unwrap_or("local") {
        "parameter" => Causality::Parameter,
        "input" => Causality::Input,
        "output" => Causality::Output,
        "local" => Causality::Local,
        "independent" => Causality::Independent,
        "calculatedParameter" => Causality::CalculatedParameter,
        other => {
            return Err(el.err(format!(
                "causality {other:?} is not supported by this reader"
            )))
        }
    })
}

fn parse_variability(el: &Element, var_type: &XmlType) -> Result<Variability, XmlError> {
    // Real numbers are continuous by default (FMI 2 Real, FMI 3 Float64 and Float32).
    let real = matches!(var_type, XmlType::Float64)
        || matches!(var_type, XmlType::Other(t) if t == "Float32" || t == "Real");
    let default = if real { "continuous" } else { "discrete" };
    Ok(match el.get("variability").unwrap_or(default) {
        "constant" => Variability::Constant,
        "fixed" => Variability::Fixed,
        "tunable" => Variability::Tunable,
        "discrete" => Variability::Discrete,
        "continuous" => Variability::Continuous,
        other => return Err(el.err(format!("unknown variability {other:?}"))),
    })
}

fn parse_initial(el: &Element) -> Result<Option<Initial>, XmlError> {
    el.get("initial")
        .map(|s| match s {
            "exact" => Ok(Initial::Exact),
            "approx" => Ok(Initial::Approx),
            "calculated" => Ok(Initial::Calculated),
            other => Err(el.err(format!("unknown initial {other:?}"))),
        })
        .transpose()
}

fn parse_type(type_el: &Element, fmi3: bool) -> XmlType {
    match (type_el.name.as_str(), fmi3) {
        ("Real", false) | ("Float64", true) => XmlType::Float64,
        ("Integer", false) | ("Int64", true) => XmlType::Int64,
        ("Enumeration", _) => {
            XmlType::Enumeration(type_el.get("declaredType").unwrap_or("").to_string())
        }
        (other, _) => XmlType::Other(other.to_string()),
    }
}

fn parse_start(type_el: &Element, var_type: &XmlType) -> Result<StartValue, XmlError> {
    Ok(match var_type {
        XmlType::Float64 => type_el
            .f64("start")?
            .map_or(StartValue::None, StartValue::Float),
        XmlType::Int64 | XmlType::Enumeration(_) => type_el
            .i64("start")?
            .map_or(StartValue::None, StartValue::Int),
        XmlType::Other(_) => StartValue::None,
    })
}

/// Build a variable from the element carrying name/causality (`var_el`) and the one carrying
/// type attributes (`type_el`; the same element in FMI 3).
fn make_variable(var_el: &Element, type_el: &Element, fmi3: bool) -> Result<XmlVariable, XmlError> {
    let var_type = parse_type(type_el, fmi3);
    let array_start = type_el
        .get("start")
        .is_some_and(|t| t.split_whitespace().nth(1).is_some());
    Ok(XmlVariable {
        name: var_el.req("name")?.to_string(),
        value_reference: var_el.u32("valueReference")?,
        description: var_el.get("description").unwrap_or("").to_string(),
        causality: parse_causality(var_el)?,
        variability: parse_variability(var_el, &var_type)?,
        initial: parse_initial(var_el)?,
        unit: type_el.get("unit").unwrap_or("").to_string(),
        // An array's start lists several values: kept as text.
        start: if array_start {
            StartValue::None
        } else {
            parse_start(type_el, &var_type)?
        },
        intermediate_update: type_el.get("intermediateUpdate") == Some("true"),
        start_text: match var_type {
            XmlType::Other(_) => type_el.get("start").map(str::to_string),
            _ if array_start => type_el.get("start").map(str::to_string),
            _ => None,
        },
        dimensions: Vec::new(),
        var_type,
    })
}

fn read_description(text: &str) -> Result<ModelDescription, XmlError> {
    let mut reader = quick_xml::Reader::from_str(text);
    reader.config_mut().trim_text(true);
    let mut stack: Vec<String> = Vec::new();
    let mut md: Option<ModelDescription> = None;
    let mut pending_var: Option<Element> = None; // FMI 2 ScalarVariable awaiting its type child
    let mut current_enum: Option<EnumerationType> = None;
    let mut current_unit: Option<UnitDefinition> = None;
    // FMI 2 ModelStructure entries by index, translated once all variables are known.
    let mut raw_outputs: Vec<(u32, Option<Vec<u32>>)> = Vec::new();
    let mut raw_initial: Vec<(u32, Option<Vec<u32>>)> = Vec::new();
    loop {
        let pos = reader.buffer_position();
        let ev = reader.read_event().map_err(|e| XmlError::Syntax {
            position: pos,
            message: e.to_string(),
        })?;
        let (e, is_empty) = match &ev {
            Event::Start(e) => (Some(e.clone()), false),
            Event::Empty(e) => (Some(e.clone()), true),
            Event::End(_) => {
                let name = stack.pop().unwrap_or_default();
                match name.as_str() {
                    "ScalarVariable" => {
                        if let Some(v) = pending_var.take() {
                            return Err(v.err("ScalarVariable without a type element"));
                        }
                    }
                    "SimpleType" | "EnumerationType" => {
                        if let (Some(t), Some(m)) = (current_enum.take(), md.as_mut()) {
                            m.enumeration_types.push(t);
                        }
                    }
                    "Unit" => {
                        if let (Some(u), Some(m)) = (current_unit.take(), md.as_mut()) {
                            m.units.push(u);
                        }
                    }
                    _ => {}
                }
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        let el = element(&e.expect("start or empty"))?;
        let parent = stack.last().cloned().unwrap_or_default();
        match el.name.as_str() {
            "fmiModelDescription" => {
                let version = match el.get("fmiVersion") {
                    Some("2.0") => FmiVersion::Fmi2,
                    Some(v) if v.starts_with("3.") => FmiVersion::Fmi3,
                    other => {
                        return Err(el.err(format!(
                            "unsupported fmiVersion {other:?} (only 2.0 and 3.x)"
                        )))
                    }
                };
                let token_key = if version == FmiVersion::Fmi3 {
                    "instantiationToken"
                } else {
                    "guid"
                };
                md = Some(ModelDescription {
                    fmi_version: version,
                    model_name: el.req("modelName")?.to_string(),
                    description: el.get("description").unwrap_or("").to_string(),
                    generation_tool: el.get("generationTool").unwrap_or("").to_string(),
                    generation_date_and_time: el
                        .get("generationDateAndTime")
                        .unwrap_or("")
                        .to_string(),
                    token: el.req(token_key)?.to_string(),
                    model_identifier: String::new(),
                    structured_names: el.get("variableNamingConvention") == Some("structured"),
                    capabilities: Capabilities::NONE,
                    units: Vec::new(),
                    enumeration_types: Vec::new(),
                    log_categories: Vec::new(),
                    experiment: None,
                    variables: Vec::new(),
                    outputs: Vec::new(),
                    initial_unknowns: Vec::new(),
                });
            }
            _ if md.is_none() => {
                return Err(el.err("expected <fmiModelDescription> as the root element"))
            }
            "CoSimulation" => {
                let m = md.as_mut().expect("checked above");
                m.model_identifier = el.req("modelIdentifier")?.to_string();
                let version = m.fmi_version;
                for (k, v) in &el.attrs {
                    m.capabilities
                        .set_attribute(version, k, v)
                        .map_err(|msg| el.err(msg))?;
                }
            }
            "Unit" if parent == "UnitDefinitions" => {
                let u = UnitDefinition {
                    name: el.req("name")?.to_string(),
                    base: None,
                };
                if is_empty {
                    md.as_mut().expect("checked").units.push(u);
                } else {
                    current_unit = Some(u);
                }
            }
            "BaseUnit" if parent == "Unit" => {
                let mut b = BaseUnit::ONE;
                for (k, v) in &el.attrs {
                    match k.as_str() {
                        "factor" => b.factor = el.f64("factor")?.unwrap_or(1.0),
                        "offset" => b.offset = el.f64("offset")?.unwrap_or(0.0),
                        _ => {
                            let e: i32 = v.trim().parse().map_err(|_| {
                                el.err(format!("exponent {k}: expected an integer, found {v:?}"))
                            })?;
                            if !b.set_exponent(k, e) {
                                return Err(el.err(format!("unknown base unit {k}")));
                            }
                        }
                    }
                }
                if let Some(u) = current_unit.as_mut() {
                    u.base = Some(b);
                }
            }
            "SimpleType" | "EnumerationType" if parent == "TypeDefinitions" => {
                let t = EnumerationType {
                    name: el.req("name")?.to_string(),
                    items: Vec::new(),
                };
                if el.name == "EnumerationType" || !is_empty {
                    current_enum = Some(t);
                }
            }
            "Enumeration" if parent == "SimpleType" => {}
            "Item" if parent == "Enumeration" || parent == "EnumerationType" => {
                if let Some(t) = current_enum.as_mut() {
                    let value = el
                        .i64("value")?
                        .ok_or_else(|| el.err("missing attribute value"))?;
                    t.items.push((el.req("name")?.to_string(), value));
                }
            }
            "Category" if parent == "LogCategories" => {
                let name = el.req("name")?.to_string();
                let description = el.get("description").unwrap_or("").to_string();
                md.as_mut()
                    .expect("checked")
                    .log_categories
                    .push((name, description));
            }
            "DefaultExperiment" => {
                let d = ExperimentSpec::default();
                md.as_mut().expect("checked").experiment = Some(ExperimentSpec {
                    start: el.f64("startTime")?.unwrap_or(d.start),
                    stop: el.f64("stopTime")?.unwrap_or(d.stop),
                    tolerance: el.f64("tolerance")?.unwrap_or(d.tolerance),
                    step: el.f64("stepSize")?.unwrap_or(d.step),
                });
            }
            "ScalarVariable" if parent == "ModelVariables" => {
                if is_empty {
                    return Err(el.err("ScalarVariable without a type element"));
                }
                pending_var = Some(el.clone_shallow());
            }
            _ if parent == "ScalarVariable" => {
                // The first child is the type element; later ones (Annotations) are ignored.
                if let Some(var_el) = pending_var.take() {
                    let v = make_variable(&var_el, &el, false)?;
                    md.as_mut().expect("checked").variables.push(v);
                }
            }
            _ if parent == "ModelVariables" => {
                let v = make_variable(&el, &el, true)?;
                md.as_mut().expect("checked").variables.push(v);
            }
            // FMI 3 children of a variable: array dimensions, String/Binary start values.
            "Dimension" | "Start"
                if stack.len() >= 2 && stack[stack.len() - 2] == "ModelVariables" =>
            {
                if let Some(v) = md.as_mut().expect("checked").variables.last_mut() {
                    if el.name == "Dimension" {
                        let d = el
                            .get("start")
                            .map(str::to_string)
                            .or_else(|| el.get("valueReference").map(|r| format!("vr {r}")))
                            .unwrap_or_else(|| "?".into());
                        v.dimensions.push(d);
                    } else if let Some(x) = el.get("value") {
                        let t = v.start_text.get_or_insert_with(String::new);
                        if !t.is_empty() {
                            t.push(' ');
                        }
                        t.push_str(x);
                    }
                }
            }
            "Unknown" | "Output" | "InitialUnknown"
                if parent == "Outputs"
                    || parent == "InitialUnknowns"
                    || parent == "ModelStructure" =>
            {
                let fmi3 = el.name != "Unknown";
                let key = if fmi3 { "valueReference" } else { "index" };
                let id = el.u32(key)?;
                let deps = el
                    .get("dependencies")
                    .map(|s| {
                        s.split_whitespace()
                            .map(|t| {
                                t.parse::<u32>().map_err(|_| {
                                    el.err(format!("dependencies: expected integers, found {t:?}"))
                                })
                            })
                            .collect::<Result<Vec<u32>, XmlError>>()
                    })
                    .transpose()?;
                let is_output = el.name == "Output" || parent == "Outputs";
                if el.name == "Output"
                    || el.name == "InitialUnknown"
                    || parent == "Outputs"
                    || parent == "InitialUnknowns"
                {
                    if is_output {
                        raw_outputs.push((id, deps));
                    } else {
                        raw_initial.push((id, deps));
                    }
                }
            }
            _ => {}
        }
        if !is_empty {
            stack.push(el.name);
        }
    }
    let mut md = md.ok_or_else(|| XmlError::Content {
        element: "fmiModelDescription".into(),
        message: "missing root element".into(),
    })?;
    // FMI 2 references are 1-based variable indices; translate to value references.
    let fmi3 = md.fmi_version == FmiVersion::Fmi3;
    let n = md.variables.len();
    let vrs: Vec<u32> = md.variables.iter().map(|v| v.value_reference).collect();
    let to_vr = |i: u32| -> Result<u32, XmlError> {
        if fmi3 {
            return Ok(i);
        }
        if i == 0 || i as usize > n {
            return Err(XmlError::Content {
                element: "ModelStructure".into(),
                message: format!("index {i} is not a variable (1..{n})"),
            });
        }
        Ok(vrs[i as usize - 1])
    };
    let translate = |raw: Vec<(u32, Option<Vec<u32>>)>| -> Result<Vec<Unknown>, XmlError> {
        raw.into_iter()
            .map(|(id, deps)| {
                Ok(Unknown {
                    value_reference: to_vr(id)?,
                    dependencies: deps
                        .map(|d| {
                            d.into_iter()
                                .map(to_vr)
                                .collect::<Result<Vec<u32>, XmlError>>()
                        })
                        .transpose()?,
                })
            })
            .collect()
    };
    md.outputs = translate(raw_outputs)?;
    md.initial_unknowns = translate(raw_initial)?;
    Ok(md)
}

impl Element {
    fn clone_shallow(&self) -> Element {
        Element {
            name: self.name.clone(),
            attrs: self.attrs.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates_match_known_calendar_dates() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(format_utc(4_107_542_399), "2100-02-28T23:59:59Z");
        assert_eq!(format_utc(-1), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn identifiers_and_structured_names() {
        assert_eq!(model_identifier("double pendulum-2"), "double_pendulum_2");
        assert_eq!(model_identifier("2dof"), "_2dof");
        assert_eq!(model_identifier(""), "_");
        for ok in ["x", "body1.pos_x", "a[1].b[2,3]", "_k"] {
            assert!(is_structured_name(ok), "{ok}");
        }
        for bad in ["", "1x", "a..b", "a b", "a[]", "a[x]", "a.", "der(x)"] {
            assert!(!is_structured_name(bad), "{bad}");
        }
    }

    #[test]
    fn doubles_round_trip_through_text() {
        for x in [
            0.0,
            -0.0,
            1e-300,
            0.1,
            1.0 / 3.0,
            6.02e23,
            f64::MAX,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            let back = parse_f64(&fmt_f64(x)).unwrap();
            assert_eq!(back.to_bits(), x.to_bits(), "{x}");
        }
        assert!(parse_f64(&fmt_f64(f64::NAN)).unwrap().is_nan());
        assert_eq!(fmt_f64(f64::INFINITY), "INF");
    }
}
