//! The model file reader (TOML → [`ModelSpec`]). See docs/model-format.md for the format.
//!
//! Two stages: serde reads the file into the span-carrying schema of [`super::model_file`]
//! (TOML syntax, unknown keys, wrong types, missing keys), then [`Resolver`] checks and
//! resolves it: names to indices, expressions to numbers, global points and axes at the initial
//! configuration to frames in body coordinates, CSV tables to samples. Every error names the
//! file, line and column, the element and what is wrong.

use super::error::Location;
use super::expr;
use super::model_file::*;
use super::spec::*;
use super::table;
use super::{ModelError, ModelSpec};
use crate::description::units::{parse_unit, BaseUnit};
use crate::integrate::{JacobianStrategy, Method, Settings};
use nalgebra::{Matrix3, SymmetricEigen, Unit, UnitQuaternion, Vector3};
use std::collections::HashMap;
use std::f64::consts::PI;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The largest ratio of two bodies' masses a model may have ([`Resolver::mass_spread`]): twelve of
/// the sixteen digits of a double, leaving the lighter body four.
pub const MAX_MASS_RATIO: f64 = 1e12;

/// The longest `[model] name` (it is the library's file name in the FMU).
const MAX_MODEL_NAME: usize = 200;

mod contact_friction;
mod curves;
mod elements;
mod input_expr;
mod joint_elements;
mod sensors;
mod tire;

/// Read and validate a model file (and the table files it references: see
/// [`ModelSpec::source_contents`]).
pub fn load_model(path: &Path) -> Result<ModelSpec, ModelError> {
    let text = std::fs::read_to_string(path).map_err(|e| ModelError::Io {
        file: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    load_model_str(&text, path)
}

/// Parse model text; `path` names the file in messages and locates referenced files (CSV tables).
pub fn load_model_str(text: &str, path: &Path) -> Result<ModelSpec, ModelError> {
    load_model_with_parameters(text, path, &[])
}

/// Resolve model text with parameter values in place of the file's (`values[i]` for parameter
/// `i`; missing entries keep the file's value). Table files are read from disk, once, and kept
/// in the model ([`ModelSpec::source_contents`]); resolving it again with other values
/// ([`resolve_again`]) reads them from there. Calculated parameters (a `value` that is an
/// expression of other parameters) are always re-evaluated. Every geometry field, mass and
/// expression is evaluated with these values: this is how parameters set before
/// initialization act on everything (the engine re-resolves at initialization).
///
/// Two readers of the same schema: the file is read by `toml` 0.9's parser (about half the
/// time of 0.8's `toml_edit` document, which keeps every comment and space: most of a cold FMU
/// instantiation) and resolved. A file it cannot read (TOML syntax, unknown keys, wrong
/// types, missing keys) is read again by [`load_model_general`], whose table spans cover whole
/// elements: those errors name the element the general path names. Both readers agree on every
/// value and on the start of every span, the only part of a span the resolver uses (errors'
/// and warnings' locations); `tests/model_files.rs` checks that the two give the same model or
/// error for every model file. 0.9 also reads TOML 1.1 (docs/model-format.md).
pub fn load_model_with_parameters(
    text: &str,
    path: &Path,
    values: &[f64],
) -> Result<ModelSpec, ModelError> {
    load_with(text, path, values, None)
}

/// The model `spec` (loaded from its text) resolved again from that text with other parameter
/// values, with the table files' contents it holds ([`ModelSpec::source_contents`]): nothing
/// is read from disk. This is how parameters set before initialization act on everything
/// (and how a changed value is checked against the file's rules), so an instance simulates the
/// files it was loaded from, whatever happened to them on disk since. `None` for a model
/// without its text (built in code).
pub fn resolve_again(spec: &ModelSpec, values: &[f64]) -> Option<Result<ModelSpec, ModelError>> {
    let text = spec.source_text.as_deref()?;
    let path = spec.source_files.first().cloned().unwrap_or_default();
    Some(load_with(text, &path, values, Some(&spec.source_contents)))
}

fn load_with(
    text: &str,
    path: &Path,
    values: &[f64],
    files: Option<&SourceContents>,
) -> Result<ModelSpec, ModelError> {
    match toml_fast::from_str::<RawFile>(text) {
        Ok(raw) => resolve(&raw, text, path, values, files),
        Err(_) => general(text, path, values, files),
    }
}

/// [`load_model_with_parameters`] through `toml` 0.8 only: the reader whose errors the loader
/// reports (public for the test that compares the two readers).
#[doc(hidden)]
pub fn load_model_general(
    text: &str,
    path: &Path,
    values: &[f64],
) -> Result<ModelSpec, ModelError> {
    general(text, path, values, None)
}

fn general(
    text: &str,
    path: &Path,
    values: &[f64],
    files: Option<&SourceContents>,
) -> Result<ModelSpec, ModelError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| Source::new(text, path).serde_error(&e))?;
    resolve(&raw, text, path, values, files)
}

/// `files`: the table files' contents to read tables from (resolving a loaded model again);
/// `None` reads them from disk and keeps them in the model.
fn resolve(
    raw: &RawFile,
    text: &str,
    path: &Path,
    values: &[f64],
    files: Option<&SourceContents>,
) -> Result<ModelSpec, ModelError> {
    let src = Source::new(text, path);
    let mut r = Resolver::new(&src);
    r.overrides = values.to_vec();
    r.given = files.cloned();
    let mut spec = r.resolve(raw)?;
    spec.source_text = Some(text.to_string());
    spec.source_contents = match files {
        Some(f) => f.clone(),
        None => SourceContents::new(std::mem::take(&mut r.read)),
    };
    Ok(spec)
}

/// The file text with a line index, to turn byte offsets into line and column.
struct Source<'a> {
    file: PathBuf,
    text: &'a str,
    /// Built at the first location asked for (errors and warnings only).
    line_starts: std::cell::OnceCell<Vec<usize>>,
}

impl<'a> Source<'a> {
    fn new(text: &'a str, path: &Path) -> Self {
        Source {
            file: path.to_path_buf(),
            text,
            line_starts: std::cell::OnceCell::new(),
        }
    }

    fn loc(&self, offset: usize) -> Location {
        let line_starts = self.line_starts.get_or_init(|| {
            let mut starts = vec![0];
            starts.extend(self.text.match_indices('\n').map(|(i, _)| i + 1));
            starts
        });
        let offset = offset.min(self.text.len());
        let line = line_starts.partition_point(|&s| s <= offset);
        let start = line_starts[line - 1];
        let column = self
            .text
            .get(start..offset)
            .map(|s| s.chars().count())
            .unwrap_or(offset - start)
            + 1;
        Location {
            file: self.file.clone(),
            line,
            column,
        }
    }

    /// A serde/TOML error, attributed to the element whose span contains it when the file is
    /// well-formed enough to tell.
    fn serde_error(&self, e: &toml::de::Error) -> ModelError {
        let message = e
            .message()
            .trim_end()
            .replacen("unknown field", "unknown key", 1)
            .replacen("missing field", "missing key", 1)
            .replacen("invalid type: ", "wrong type: ", 1)
            .replace('\n', "; ");
        // A file that is not TOML at all: say so (the parser's own words are terse).
        let message = if toml::from_str::<toml::Table>(self.text).is_err() {
            format!("TOML syntax error: {message}")
        } else {
            message
        };
        let Some(span) = e.span() else {
            return ModelError::Syntax {
                at: Location {
                    file: self.file.clone(),
                    line: 0,
                    column: 0,
                },
                message,
            };
        };
        let at = self.loc(span.start);
        match self.element_at(span.start) {
            Some(element) => ModelError::Element {
                at,
                element,
                message,
            },
            None => ModelError::Syntax { at, message },
        }
    }

    fn element_at(&self, offset: usize) -> Option<String> {
        let loose: LooseFile = toml::from_str(self.text).ok()?;
        let tables = [
            ("model", &loose.model),
            ("experiment", &loose.experiment),
            ("solver", &loose.solver),
        ];
        for (name, t) in tables {
            if let Some(t) = t {
                if t.span().contains(&offset) {
                    return Some(format!("[{name}]"));
                }
            }
        }
        let lists = [
            ("parameters", &loose.parameters),
            ("inputs", &loose.inputs),
            ("bodies", &loose.bodies),
            ("frames", &loose.frames),
            ("joints", &loose.joints),
            ("drivers", &loose.drivers),
            ("forces", &loose.forces),
            ("outputs", &loose.outputs),
        ];
        for (section, list) in lists {
            for (i, el) in list.iter().flatten().enumerate() {
                if el.span().contains(&offset) {
                    return Some(match &el.get_ref().name {
                        Some(n) => format!("{section}[{i}] \"{n}\""),
                        None => format!("{section}[{i}]"),
                    });
                }
            }
        }
        None
    }
}

type Res<T> = Result<T, ModelError>;

/// How a parameter is used: where, and whether that use may change at run time.
struct ParamUse {
    tunable_ok: bool,
    what: String,
}

struct Resolver<'a> {
    src: &'a Source<'a>,
    dir: PathBuf,
    t0: f64,
    params: Vec<ParameterSpec>,
    param_index: HashMap<String, usize>,
    param_uses: Vec<Vec<ParamUse>>,
    inputs: Vec<InputSpec>,
    input_index: HashMap<String, usize>,
    input_used: Vec<bool>,
    /// Per input: some element takes its bare value (no input expression converting it).
    input_bare: Vec<bool>,
    /// FMU variable names (parameters, inputs, outputs) → element that owns it.
    variables: HashMap<String, String>,
    /// Bodies and frames → reference.
    bodies_by_name: HashMap<String, BodyRef>,
    body_specs: Vec<BodySpec>,
    frame_positions: Vec<Vector3<f64>>,
    frame_specs: Vec<MovingFrameSpec>,
    joint_index: HashMap<String, usize>,
    joint_specs: Vec<JointSpec>,
    driver_index: HashMap<String, usize>,
    driver_specs: Vec<DriverSpec>,
    force_index: HashMap<String, usize>,
    force_specs: Vec<ForceSpec>,
    source_files: Vec<PathBuf>,
    /// Every point read (global, initial configuration), with where it was written: for the
    /// plausibility check of the model's extent.
    points: Vec<(Range<usize>, String, Vector3<f64>)>,
    /// Parameter values that replace the file's (see [`load_model_with_parameters`]).
    overrides: Vec<f64>,
    /// Where table files are read from when the model is resolved again ([`resolve_again`]);
    /// `None`: from disk, into `read`.
    given: Option<SourceContents>,
    /// The table files read from disk, by path, in the order read.
    read: Vec<(PathBuf, Vec<u8>)>,
    /// Plausibility warnings an element's own reading finds (a contact sphere that starts
    /// behind its plane).
    element_warnings: Vec<String>,
}

const NO_KEYS: &[&str] = &[];

fn label(section: &str, i: usize, name: &str) -> String {
    format!("{section}[{i}] \"{name}\"")
}

fn axis_name(c: usize) -> &'static str {
    ["x", "y", "z"][c]
}

impl<'a> Resolver<'a> {
    fn new(src: &'a Source<'a>) -> Self {
        let dir = src.file.parent().map(Path::to_path_buf).unwrap_or_default();
        Resolver {
            src,
            dir,
            t0: 0.0,
            params: Vec::new(),
            param_index: HashMap::new(),
            param_uses: Vec::new(),
            inputs: Vec::new(),
            input_index: HashMap::new(),
            input_used: Vec::new(),
            input_bare: Vec::new(),
            variables: HashMap::new(),
            bodies_by_name: HashMap::new(),
            body_specs: Vec::new(),
            frame_positions: Vec::new(),
            frame_specs: Vec::new(),
            joint_index: HashMap::new(),
            joint_specs: Vec::new(),
            driver_index: HashMap::new(),
            driver_specs: Vec::new(),
            force_index: HashMap::new(),
            force_specs: Vec::new(),
            source_files: vec![src.file.clone()],
            points: Vec::new(),
            element_warnings: Vec::new(),
            overrides: Vec::new(),
            given: None,
            read: Vec::new(),
        }
    }

    // ----- errors -----------------------------------------------------------------------------

    fn err(&self, span: Range<usize>, el: &str, message: impl Into<String>) -> ModelError {
        ModelError::Element {
            at: self.src.loc(span.start),
            element: el.to_string(),
            message: message.into(),
        }
    }

    fn ensure(
        &self,
        ok: bool,
        span: Range<usize>,
        el: &str,
        message: impl FnOnce() -> String,
    ) -> Res<()> {
        if ok {
            Ok(())
        } else {
            Err(self.err(span, el, message()))
        }
    }

    /// Reject keys the element's `type` does not use.
    fn allowed_keys(
        &self,
        el: &str,
        what: &str,
        present: &[(&'static str, Range<usize>)],
        allowed: &[&str],
    ) -> Res<()> {
        for (k, span) in present {
            if !allowed.contains(k) {
                let k = if *k == "final_value" {
                    "final"
                } else if *k == "kind" {
                    "type"
                } else {
                    k
                };
                let uses = if allowed.is_empty() {
                    "no other keys".to_string()
                } else {
                    allowed.join(", ")
                };
                return Err(self.err(
                    span.clone(),
                    el,
                    format!("key `{k}` does not apply to {what} (it uses: {uses})"),
                ));
            }
        }
        Ok(())
    }

    fn required<'b, T>(
        &self,
        v: &'b Option<T>,
        el_span: Range<usize>,
        el: &str,
        key: &str,
        what: &str,
    ) -> Res<&'b T> {
        v.as_ref().ok_or_else(|| {
            self.err(
                el_span,
                el,
                format!("missing key `{key}` ({what} needs it)"),
            )
        })
    }

    // ----- names ------------------------------------------------------------------------------

    fn check_name(&self, name: &S<String>, el: &str) -> Res<()> {
        let n = name.get_ref();
        if n.starts_with("solver.") || n.starts_with("stats.") {
            return Err(self.err(
                name.span(),
                el,
                format!("name `{n}`: the prefixes `solver.` and `stats.` are reserved for solver settings and statistics"),
            ));
        }
        let mut chars = n.chars();
        let ok = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        self.ensure(ok, name.span(), el, || {
            format!("name `{n}` is not valid: use letters, digits and `_`, starting with a letter or `_`")
        })
    }

    /// Parameters, inputs and outputs become FMU variables: one namespace.
    fn claim_variable(&mut self, name: &S<String>, el: &str) -> Res<()> {
        self.check_name(name, el)?;
        let n = name.get_ref();
        if n == "time" {
            return Err(self.err(
                name.span(),
                el,
                "name `time` is reserved for the independent variable",
            ));
        }
        if let Some(other) = self.variables.get(n) {
            return Err(self.err(
                name.span(),
                el,
                format!("duplicate name `{n}`: {other} has it already (parameters, inputs and outputs share one namespace)"),
            ));
        }
        self.variables.insert(n.clone(), el.to_string());
        Ok(())
    }

    /// A string written into `modelDescription.xml` (a description or a unit): refused if it
    /// holds a character XML 1.0 cannot represent (a control character other than tab, line
    /// feed and carriage return), which would make the FMU unreadable for every importer.
    fn xml_string(&self, v: &Option<S<String>>, el: &str, field: &str) -> Res<Option<String>> {
        let Some(v) = v else {
            return Ok(None);
        };
        if let Some((pos, c)) = first_non_xml_char(v.get_ref()) {
            return Err(self.err(
                v.span(),
                el,
                format!(
                    "`{field}` contains the control character U+{:04X} at character {pos}: \
                     modelDescription.xml cannot carry it (XML 1.0 forbids it, even as a \
                     character reference); remove it (tab, line feed and carriage return are allowed)",
                    c as u32
                ),
            ));
        }
        Ok(Some(v.get_ref().clone()))
    }

    /// A `unit` as written into `modelDescription.xml`, in SI base units; `None` for an empty
    /// unit and for one mbsfmu does not know (a warning: it is declared without base units,
    /// so importers cannot convert it).
    fn declared_unit(&mut self, u: &S<String>, el: &str) -> Res<Option<BaseUnit>> {
        let text = u.get_ref().trim();
        if text.is_empty() {
            return Ok(None);
        }
        let b = parse_unit(text);
        if b.is_none() {
            let w = self.err(
                u.span(),
                el,
                format!(
                    "unit \"{text}\" is not one mbsfmu knows (SI units and their multiples, such \
                     as N.m/rad, mm, deg, rpm): the FMU declares it without SI base units, so an \
                     importer cannot convert it"
                ),
            );
            self.element_warnings.push(w.to_string());
        }
        Ok(b)
    }

    // ----- numbers ----------------------------------------------------------------------------

    fn param_lookup(&self) -> impl Fn(&str) -> Option<f64> + '_ {
        |n: &str| self.param_index.get(n).map(|&i| self.params[i].value)
    }

    /// Offset of a position inside a string value (after the opening quote).
    fn expr_error(&self, n: &S<Num>, el: &str, e: expr::ExprError) -> ModelError {
        let at = n.span().start + 1 + e.offset;
        let text = match n.get_ref() {
            Num::Text(t) => t.as_str(),
            Num::Number(_) => "",
        };
        // A long expression is shown around the error only (the location points into it).
        const SHOWN: usize = 80;
        let shown = if text.chars().count() <= SHOWN {
            text.to_string()
        } else {
            let chars: Vec<char> = text.chars().collect();
            let mid = text.get(..e.offset).map_or(0, |p| p.chars().count());
            let from = mid.saturating_sub(SHOWN / 2).min(chars.len() - SHOWN);
            let part: String = chars[from..from + SHOWN].iter().collect();
            format!(
                "{}{part}{}",
                if from > 0 { "…" } else { "" },
                if from + SHOWN < chars.len() {
                    "…"
                } else {
                    ""
                }
            )
        };
        self.err(
            at..at,
            el,
            format!("in the expression \"{shown}\": {}", e.message),
        )
    }

    /// A number fixed at load time: parameter names and expressions evaluate to default values.
    fn number(&mut self, n: &S<Num>, el: &str, field: &str) -> Res<f64> {
        match n.get_ref() {
            Num::Number(v) => {
                self.ensure(v.is_finite(), n.span(), el, || {
                    format!("`{field}` must be a finite number")
                })?;
                Ok(*v)
            }
            Num::Text(t) => {
                let v =
                    expr::eval(t, &self.param_lookup()).map_err(|e| self.expr_error(n, el, e))?;
                for id in expr::identifiers(t) {
                    if let Some(&i) = self.param_index.get(&id) {
                        self.param_uses[i].push(ParamUse {
                            tunable_ok: false,
                            what: format!("{el} `{field}` (an expression: evaluated when the model is resolved, at load and at initialization)"),
                        });
                    }
                }
                Ok(v)
            }
        }
    }

    /// A number the engine reads at run time: a bare parameter name stays a reference.
    fn scalar(&mut self, n: &S<Num>, el: &str, field: &str, tunable_ok: bool) -> Res<Scalar> {
        if let Num::Text(t) = n.get_ref() {
            if let Some(&i) = self.param_index.get(t.trim()) {
                self.param_uses[i].push(ParamUse {
                    tunable_ok,
                    what: format!("{el} `{field}`"),
                });
                return Ok(Scalar::Param(i));
            }
        }
        Ok(Scalar::Const(self.number(n, el, field)?))
    }

    fn value_of(&self, s: Scalar) -> f64 {
        match s {
            Scalar::Const(x) => x,
            Scalar::Param(i) => self.params[i].value,
        }
    }

    /// Where a value came from, for a message: ` (parameter `k`)` for a parameter's value.
    pub(super) fn source_of(&self, s: Scalar) -> String {
        match s {
            Scalar::Const(_) => String::new(),
            Scalar::Param(i) => format!(" (parameter `{}`)", self.params[i].name),
        }
    }

    fn nonneg_scalar(
        &mut self,
        n: &S<Num>,
        el: &str,
        field: &str,
        tunable_ok: bool,
        unit: &str,
    ) -> Res<Scalar> {
        let s = self.scalar(n, el, field, tunable_ok)?;
        let v = self.value_of(s);
        let from = self.source_of(s);
        self.ensure(v >= 0.0, n.span(), el, || {
            format!("`{field}` must not be negative, got {v} {unit}{from}")
        })?;
        self.sign_rule(s, false, el, field);
        Ok(s)
    }

    fn positive_scalar(
        &mut self,
        n: &S<Num>,
        el: &str,
        field: &str,
        tunable_ok: bool,
        unit: &str,
    ) -> Res<Scalar> {
        let s = self.scalar(n, el, field, tunable_ok)?;
        let v = self.value_of(s);
        let from = self.source_of(s);
        self.ensure(v > 0.0, n.span(), el, || {
            format!("`{field}` must be positive, got {v} {unit}{from}")
        })?;
        self.sign_rule(s, true, el, field);
        Ok(s)
    }

    /// Remember the sign a parameter must keep when the importer sets it (the strictest use).
    fn sign_rule(&mut self, s: Scalar, positive: bool, el: &str, field: &str) {
        if let Scalar::Param(i) = s {
            let r = &mut self.params[i].rule;
            if r.as_ref().is_none_or(|r| positive && !r.positive) {
                *r = Some(crate::mbs::spec::ParamRule {
                    positive,
                    what: format!("{el} `{field}`"),
                });
            }
        }
    }

    fn list(&mut self, v: &NumList, el: &str, field: &str, len: usize) -> Res<Vec<f64>> {
        let items = v.get_ref();
        self.ensure(items.len() == len, v.span(), el, || {
            format!("`{field}` needs {len} components, got {}", items.len())
        })?;
        items.iter().map(|x| self.number(x, el, field)).collect()
    }

    fn vec3(&mut self, v: &NumList, el: &str, field: &str) -> Res<Vector3<f64>> {
        let x = self.list(v, el, field, 3)?;
        let x = Vector3::new(x[0], x[1], x[2]);
        if matches!(
            field,
            "position" | "point" | "point1" | "point2" | "center" | "center1" | "center2"
        ) {
            self.points.push((v.span(), el.to_string(), x));
        }
        Ok(x)
    }

    /// Masses that differ by more than [`MAX_MASS_RATIO`] are refused, naming both bodies: the
    /// lighter one's entries fall below the heavier's round-off in the mass matrix, the
    /// saddle-point and Newton matrices come out singular, and every integrator fails at the
    /// start with a message that cannot say why (1e300 kg beside 0.3 kg did).
    fn mass_spread(&self, raw: &RawFile) -> Res<()> {
        let masses: Vec<f64> = self
            .body_specs
            .iter()
            .map(|b| self.value_of(b.mass))
            .collect();
        let by = |better: fn(f64, f64) -> bool| {
            (0..masses.len()).fold(0, |k, i| if better(masses[i], masses[k]) { i } else { k })
        };
        let (heavy, light) = (by(|a, b| a > b), by(|a, b| a < b));
        let ratio = masses[heavy] / masses[light];
        if ratio.is_finite() && ratio <= MAX_MASS_RATIO {
            return Ok(());
        }
        let name = |i: usize| self.body_specs[i].name.as_str();
        Err(self.err(
            raw.bodies[heavy].get_ref().mass.span(),
            &label("bodies", heavy, name(heavy)),
            format!(
                "`mass` {:?} kg is {} the mass of body `{}` ({:?} kg); beyond \
                 {MAX_MASS_RATIO:.0e} the lighter body is lost in the heavier one's round-off and \
                 no solver can move it. A value in other units (g in a model in kg)? A body that \
                 does not move can be fixed to the ground instead of made heavy",
                masses[heavy],
                if ratio.is_finite() {
                    format!("{ratio:.1e} times")
                } else {
                    "more than 1e308 times".into()
                },
                name(light),
                masses[light]
            ),
        ))
    }

    /// Plausibility warnings: points far outside the model's extent (a value in mm in a model
    /// in metres), bodies that no joint, driver or force element refers to.
    fn warnings(&self, raw: &RawFile) -> Vec<String> {
        let mut out = Vec::new();
        let n = self.points.len();
        if n >= 3 {
            // Robust centre and size: component-wise median, median distance (one stray point
            // must not move them).
            let median_of = |mut v: Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let c =
                Vector3::from_fn(|k, _| median_of(self.points.iter().map(|p| p.2[k]).collect()));
            let median = median_of(self.points.iter().map(|p| (p.2 - c).norm()).collect());
            for (span, el, p) in &self.points {
                let r = (p - c).norm();
                if median > 0.0 && r > 20.0 * median {
                    out.push(self.err(span.clone(), el, format!(
                        "this point is {r:.3} from the centre of the model, {:.0} times the typical distance {median:.3}: a value in other units (mm in a model in metres)?",
                        r / median
                    )).to_string());
                }
            }
        }
        let mut held = vec![false; self.body_specs.len()];
        let mut hold = |r: &BodyRef| {
            if let BodyRef::Body(b) = r {
                held[*b] = true;
            }
        };
        for j in &self.joint_specs {
            hold(&j.body1);
            hold(&j.body2);
        }
        for d in &self.driver_specs {
            match d.target {
                DriverTarget::PointComponent { body, .. } => hold(&BodyRef::Body(body)),
                DriverTarget::JointCoordinate(_) => {}
            }
        }
        for f in &self.force_specs {
            match &f.kind {
                ForceKind::SpringDamper { body1, body2, .. }
                | ForceKind::RotationalSpringDamper { body1, body2, .. }
                | ForceKind::Bushing { body1, body2, .. } => {
                    hold(body1);
                    hold(body2);
                }
                ForceKind::Contact { geometry, .. } => match geometry {
                    ContactGeometry::SpherePlane {
                        sphere_body,
                        plane_body,
                        ..
                    } => {
                        hold(sphere_body);
                        hold(plane_body);
                    }
                    ContactGeometry::SphereSphere { body1, body2, .. } => {
                        hold(body1);
                        hold(body2);
                    }
                },
                ForceKind::PrismaticFriction { .. }
                | ForceKind::RevoluteFriction { .. }
                | ForceKind::JointStop { .. } => {}
                ForceKind::Tire(ts) => hold(&BodyRef::Body(ts.wheel)),
            }
        }
        for (i, h) in held.iter().enumerate() {
            if !h {
                let b = raw.bodies[i].get_ref();
                out.push(self.err(raw.bodies[i].span(), &label("bodies", i, b.name.get_ref()),
                    "no joint, driver or force element refers to this body: nothing holds it (it falls freely under gravity)").to_string());
            }
        }
        out
    }

    fn unit_vec3(&mut self, v: &NumList, el: &str, field: &str) -> Res<Vector3<f64>> {
        let x = self.vec3(v, el, field)?;
        // Scaled by the largest component first: a direction may be written at any
        // magnitude, and |x|² overflows from components of 1.3e154 (or underflows).
        let amax = x.amax();
        self.ensure(amax > 0.0, v.span(), el, || {
            format!("`{field}` has zero length")
        })?;
        let x = x / amax;
        Ok(x / x.norm())
    }

    fn scalar3(
        &mut self,
        v: &NumList,
        el: &str,
        field: &str,
        tunable_ok: bool,
    ) -> Res<[Scalar; 3]> {
        let items = v.get_ref();
        self.ensure(items.len() == 3, v.span(), el, || {
            format!("`{field}` needs 3 components, got {}", items.len())
        })?;
        let mut out = [Scalar::Const(0.0); 3];
        for (k, x) in items.iter().enumerate() {
            out[k] = self.scalar(x, el, field, tunable_ok)?;
        }
        Ok(out)
    }

    fn component(&self, c: &S<String>, el: &str) -> Res<usize> {
        match c.get_ref().as_str() {
            "x" => Ok(0),
            "y" => Ok(1),
            "z" => Ok(2),
            other => Err(self.err(
                c.span(),
                el,
                format!("`component` must be \"x\", \"y\" or \"z\", got \"{other}\""),
            )),
        }
    }

    // ----- references -------------------------------------------------------------------------

    fn body_ref(&self, name: &S<String>, el: &str, field: &str) -> Res<BodyRef> {
        let n = name.get_ref();
        if n == "ground" {
            return Ok(BodyRef::Ground);
        }
        self.bodies_by_name.get(n).copied().ok_or_else(|| {
            self.err(
                name.span(),
                el,
                format!(
                    "`{field}`: no body or frame named `{n}`{} (the fixed world is \"ground\")",
                    did_you_mean(n, self.bodies_by_name.keys())
                ),
            )
        })
    }

    /// Position and rotation of what a reference names, at the initial configuration.
    fn pose(&self, b: BodyRef) -> (Vector3<f64>, Matrix3<f64>) {
        match b {
            BodyRef::Ground => (Vector3::zeros(), Matrix3::identity()),
            BodyRef::Frame(i) => (self.frame_positions[i], Matrix3::identity()),
            BodyRef::Body(i) => {
                let b = &self.body_specs[i];
                (b.position, b.orientation.to_rotation_matrix().into_inner())
            }
        }
    }

    fn is_particle(&self, b: BodyRef) -> bool {
        matches!(b, BodyRef::Body(i) if self.body_specs[i].kind == BodyKind::Particle)
    }

    fn ref_name(&self, b: BodyRef) -> String {
        match b {
            BodyRef::Ground => "ground".into(),
            BodyRef::Frame(i) => format!("frame `{}`", self.frame_specs[i].name),
            BodyRef::Body(i) => format!("body `{}`", self.body_specs[i].name),
        }
    }

    /// A point given globally at the initial configuration, in the coordinates of `b`.
    fn local_point(&self, b: BodyRef, p: Vector3<f64>) -> Vector3<f64> {
        let (r, a) = self.pose(b);
        a.transpose() * (p - r)
    }

    fn input_ref(&mut self, name: &S<String>, el: &str) -> Res<usize> {
        match self.input_index.get(name.get_ref()) {
            Some(&i) => {
                self.input_used[i] = true;
                self.input_bare[i] = true;
                Ok(i)
            }
            None => Err(self.err(
                name.span(),
                el,
                format!(
                    "no input named `{}`{}",
                    name.get_ref(),
                    did_you_mean(name.get_ref(), self.input_index.keys())
                ),
            )),
        }
    }

    fn joint_ref(&self, name: &S<String>, el: &str) -> Res<usize> {
        self.joint_index
            .get(name.get_ref())
            .copied()
            .ok_or_else(|| {
                self.err(
                    name.span(),
                    el,
                    format!(
                        "no joint named `{}`{}",
                        name.get_ref(),
                        did_you_mean(name.get_ref(), self.joint_index.keys())
                    ),
                )
            })
    }

    // ----- geometry ---------------------------------------------------------------------------

    /// Joint axes (columns x, y, z) from a z axis and an optional x reference direction.
    fn axes(
        &mut self,
        axis: Option<&NumList>,
        x_axis: Option<&NumList>,
        el: &str,
        x_key: &str,
    ) -> Res<Matrix3<f64>> {
        let z = match axis {
            Some(a) => self.unit_vec3(a, el, "axis")?,
            None => Vector3::z(),
        };
        let x = match x_axis {
            Some(xa) => {
                let x = self.unit_vec3(xa, el, x_key)?;
                let c = x.dot(&z);
                self.ensure(c.abs() < 1e-6, xa.span(), el, || {
                    format!(
                        "`{x_key}` must be perpendicular to `axis` (they are {:.4}° apart)",
                        c.clamp(-1.0, 1.0).acos().to_degrees()
                    )
                })?;
                (x - c * z).normalize()
            }
            None => default_perpendicular(&z),
        };
        Ok(Matrix3::from_columns(&[x, z.cross(&x), z]))
    }

    fn explicit_frame(&mut self, f: &S<RawLocalFrame>, el: &str) -> Res<LocalFrame> {
        let f = f.get_ref();
        let origin = match &f.origin {
            Some(o) => self.vec3(o, el, "origin")?,
            None => Vector3::zeros(),
        };
        let axes = self.axes(f.axis.as_ref(), f.x_axis.as_ref(), el, "x_axis")?;
        Ok(LocalFrame { origin, axes })
    }

    /// Default angle of a revolute joint / rotational spring: the rotation of body 2 relative to
    /// body 1 about the axis at the initial configuration (twist part), in (−π, π].
    fn relative_angle(&self, b1: BodyRef, b2: BodyRef, axis: &Vector3<f64>) -> f64 {
        let q = |b: BodyRef| match b {
            BodyRef::Body(i) => self.body_specs[i].orientation,
            _ => UnitQuaternion::identity(),
        };
        let rel = q(b2) * q(b1).inverse();
        let qi = rel.quaternion();
        wrap_angle(2.0 * qi.imag().dot(axis).atan2(qi.w))
    }

    /// Frames of a joint-like element from a global point and axes at the initial
    /// configuration; the frame on body 2 is turned by `theta0` about z so that the element's
    /// angle starts at `theta0`.
    fn frames_from_global(
        &self,
        b1: BodyRef,
        b2: BodyRef,
        point: Vector3<f64>,
        rj: Matrix3<f64>,
        theta0: f64,
    ) -> (LocalFrame, LocalFrame) {
        let (r1, a1) = self.pose(b1);
        let (r2, a2) = self.pose(b2);
        let rz = Matrix3::from(nalgebra::Rotation3::from_axis_angle(
            &Vector3::z_axis(),
            theta0,
        ));
        let f1 = LocalFrame {
            origin: a1.transpose() * (point - r1),
            axes: a1.transpose() * rj,
        };
        let f2 = LocalFrame {
            origin: a2.transpose() * (point - r2),
            axes: a2.transpose() * rj * rz,
        };
        (f1, f2)
    }

    fn check_two_ends(&self, b1: BodyRef, b2: BodyRef, span2: Range<usize>, el: &str) -> Res<()> {
        if b1 == b2 {
            return Err(self.err(
                span2,
                el,
                format!("connects {} to itself", self.ref_name(b1)),
            ));
        }
        let groundish = |b: BodyRef| !matches!(b, BodyRef::Body(_));
        self.ensure(!(groundish(b1) && groundish(b2)), span2, el, || {
            format!(
                "connects {} to {}: at least one end must be a body",
                self.ref_name(b1),
                self.ref_name(b2)
            )
        })
    }

    fn check_rigid(&self, b: BodyRef, span: Range<usize>, el: &str, what: &str) -> Res<()> {
        self.ensure(!self.is_particle(b), span, el, || {
            format!(
                "{} is a particle (no orientation), but {what} needs a rigid body",
                self.ref_name(b)
            )
        })
    }

    // ----- motions ----------------------------------------------------------------------------

    fn table_file(&mut self, file: &S<String>, el: &str) -> Res<(PathBuf, Vec<f64>, Vec<f64>)> {
        let rel = PathBuf::from(file.get_ref());
        let full = self.dir.join(&rel);
        let parsed = match &self.given {
            // Resolving a loaded model again: its files as read then (a table that is the
            // model file itself is its text).
            Some(files) => match files
                .get(&full)
                .or_else(|| (full == self.src.file).then_some(self.src.text.as_bytes()))
            {
                Some(bytes) => table::parse_table_bytes(bytes),
                None => Err(table::TableError {
                    line: 0,
                    message: "not among the files read when the model was loaded".into(),
                }),
            },
            None => match self.read.iter().find(|(p, _)| *p == full) {
                Some((_, bytes)) => table::parse_table_bytes(bytes),
                None => table::read_table_bytes(&full).and_then(|bytes| {
                    let parsed = table::parse_table_bytes(&bytes);
                    self.read.push((full.clone(), bytes));
                    parsed
                }),
            },
        };
        let (x, y) = parsed.map_err(|e| {
            self.err(
                file.span(),
                el,
                format!("table file `{}`: {e}", full.display()),
            )
        })?;
        if !self.source_files.contains(&full) {
            self.source_files.push(full);
        }
        Ok((rel, x, y))
    }

    fn motion(&mut self, m: &S<RawMotionValue>, el: &str, field: &str) -> Res<Motion> {
        let raw = match m.get_ref() {
            RawMotionValue::Constant(n) => {
                let n = S::new(m.span(), n.clone());
                if let Some(input) = self.input_motion(&n, el, field)? {
                    return Ok(input);
                }
                return Ok(Motion::Constant(self.scalar(&n, el, field, false)?));
            }
            RawMotionValue::Table(t) => t.as_ref(),
        };
        let present = raw.present_keys();
        let what = format!("`{field}`");
        if let Some(input) = &raw.input {
            self.allowed_keys(el, &format!("an input motion {what}"), &present, &["input"])?;
            return Ok(Motion::Input(self.input_ref(input, el)?));
        }
        if let Some(file) = &raw.table {
            self.allowed_keys(el, &format!("a table motion {what}"), &present, &["table"])?;
            let (file, t, values) = self.table_file(file, el)?;
            return Ok(Motion::Table { file, t, values });
        }
        let Some(kind) = &raw.kind else {
            return Err(self.err(
                m.span(),
                el,
                format!("{what}: a motion table needs `input`, `table` or `type` (constant, ramp, sine, smooth_step)"),
            ));
        };
        let span = m.span();
        let zero = || Scalar::Const(0.0);
        macro_rules! opt {
            ($f:ident, $name:expr) => {
                match &raw.$f {
                    Some(v) => self.scalar(v, el, $name, false)?,
                    None => zero(),
                }
            };
        }
        macro_rules! req {
            ($f:ident, $name:expr, $kind:expr) => {{
                let v = self.required(
                    &raw.$f,
                    span.clone(),
                    el,
                    $name,
                    &format!("a {} motion", $kind),
                )?;
                self.scalar(v, el, $name, false)?
            }};
        }
        match kind.get_ref().as_str() {
            "constant" => {
                self.allowed_keys(el, "a constant motion", &present, &["kind", "value"])?;
                Ok(Motion::Constant(req!(value, "value", "constant")))
            }
            "ramp" => {
                self.allowed_keys(el, "a ramp motion", &present, &["kind", "initial", "slope", "start"])?;
                Ok(Motion::Ramp { initial: opt!(initial, "initial"), slope: req!(slope, "slope", "ramp"), start: opt!(start, "start") })
            }
            "sine" => {
                self.allowed_keys(el, "a sine motion", &present, &["kind", "offset", "amplitude", "frequency", "phase"])?;
                let amplitude = req!(amplitude, "amplitude", "sine");
                let fspan = raw.frequency.as_ref().map(|f| f.span()).unwrap_or(span.clone());
                let frequency = req!(frequency, "frequency", "sine");
                let fv = self.value_of(frequency);
                self.ensure(fv >= 0.0, fspan, el, || format!("`frequency` must not be negative, got {fv} Hz"))?;
                Ok(Motion::Sine { offset: opt!(offset, "offset"), amplitude, frequency, phase: opt!(phase, "phase") })
            }
            "smooth_step" => {
                self.allowed_keys(el, "a smooth_step motion", &present, &["kind", "initial", "final_value", "start", "duration"])?;
                let dspan = raw.duration.as_ref().map(|f| f.span()).unwrap_or(span.clone());
                let duration = req!(duration, "duration", "smooth_step");
                let dv = self.value_of(duration);
                self.ensure(dv > 0.0, dspan, el, || format!("`duration` must be positive, got {dv} s"))?;
                Ok(Motion::SmoothStep {
                    initial: opt!(initial, "initial"),
                    final_value: req!(final_value, "final", "smooth_step"),
                    start: opt!(start, "start"),
                    duration,
                })
            }
            other => Err(self.err(
                kind.span(),
                el,
                format!("unknown motion type `{other}` (one of: constant, ramp, sine, smooth_step; or use `input` / `table`)"),
            )),
        }
    }

    /// Value of a motion at time `t` with inputs at their start values (to place moving frames
    /// at the initial configuration).
    fn motion_at(&self, m: &Motion, t: f64) -> f64 {
        let v = |s: &Scalar| self.value_of(*s);
        match m {
            Motion::Input(i) => self.inputs[*i].start,
            Motion::AffineInput {
                input,
                scale,
                offset,
            } => scale * self.inputs[*input].start + offset,
            Motion::Constant(c) => v(c),
            Motion::Ramp {
                initial,
                slope,
                start,
            } => v(initial) + v(slope) * (t - v(start)).max(0.0),
            Motion::Sine {
                offset,
                amplitude,
                frequency,
                phase,
            } => v(offset) + v(amplitude) * (2.0 * PI * v(frequency) * t + v(phase)).sin(),
            Motion::SmoothStep {
                initial,
                final_value,
                start,
                duration,
            } => {
                let s = ((t - v(start)) / v(duration)).clamp(0.0, 1.0);
                v(initial) + (v(final_value) - v(initial)) * (1.0 - (PI * s).cos()) / 2.0
            }
            Motion::Table { t: ts, values, .. } => table::spline_eval(ts, values, t),
        }
    }

    // ----- sections ---------------------------------------------------------------------------

    fn resolve(&mut self, raw: &RawFile) -> Res<ModelSpec> {
        let model = raw.model.get_ref();
        self.check_name(&model.name, "[model]")?;
        let description = self
            .xml_string(&model.description, "[model]", "description")?
            .unwrap_or_default();
        // The name is the FMU's model identifier, the library's file name (`<name>.so`,
        // `.dylib`, `.dll`): file systems allow 255 bytes per name.
        let len = model.name.get_ref().len();
        self.ensure(len <= MAX_MODEL_NAME, model.name.span(), "[model]", || {
            format!("name is {len} characters long: at most {MAX_MODEL_NAME} (it names the FMU's library file, and file names are limited to 255 bytes)")
        })?;

        // Parameters first: everything else may refer to them.
        for (i, p) in raw.parameters.iter().enumerate() {
            let p = p.get_ref();
            let el = label("parameters", i, p.name.get_ref());
            self.claim_variable(&p.name, &el)?;
            let calculated = match p.value.get_ref() {
                Num::Text(t) => expr::identifiers(t)
                    .iter()
                    .any(|id| self.param_index.contains_key(id)),
                Num::Number(_) => false,
            };
            let mut value = self.number(&p.value, &el, "value")?;
            if !calculated {
                if let Some(&v) = self.overrides.get(i) {
                    value = v;
                }
            }
            self.param_index
                .insert(p.name.get_ref().clone(), self.params.len());
            self.param_uses.push(Vec::new());
            self.params.push(ParameterSpec {
                name: p.name.get_ref().clone(),
                value,
                unit: self.xml_string(&p.unit, &el, "unit")?.unwrap_or_default(),
                description: self
                    .xml_string(&p.description, &el, "description")?
                    .unwrap_or_default(),
                tunable: false,
                calculated,
                acts: true,
                rule: None,
            });
            // A warning, not a refusal: a parameter in other units is right where expressions
            // convert it (`angle = "angle_deg*pi/180"`), which the loader does not trace.
            if let Some(u) = &p.unit {
                if let Some(b) = self.declared_unit(u, &el)? {
                    if !b.is_si() {
                        let w = self.err(
                            u.span(),
                            &el,
                            not_si(
                                u.get_ref().trim(),
                                &b,
                                "an element that takes this parameter's value takes it in",
                                ", unless every use converts it in an expression",
                            ),
                        );
                        self.element_warnings.push(w.to_string());
                    }
                }
            }
        }

        let mut experiment = self.experiment(raw)?;
        self.t0 = experiment.start;
        let solver = self.solver(raw)?;
        // The experiment's tolerance is what importers pass (and it overrides `solver.rtol`):
        // where the file gives `solver.rtol` and no tolerance of the experiment, the rtol
        // written is the experiment's too, not the unwritten default 1e-4.
        let tolerance_written = raw
            .experiment
            .as_ref()
            .is_some_and(|x| x.get_ref().tolerance.is_some());
        let rtol_written = raw
            .solver
            .as_ref()
            .is_some_and(|x| x.get_ref().rtol.is_some());
        if rtol_written && !tolerance_written {
            experiment.tolerance = solver.rtol;
        }
        let initialization = match &model.initial {
            None => Initialization::Consistent,
            Some(s) => match s.get_ref().as_str() {
                "consistent" => Initialization::Consistent,
                "static" => Initialization::Static,
                other => {
                    return Err(self.err(
                        s.span(),
                        "[model]",
                        format!("`initial` must be \"consistent\" or \"static\", got \"{other}\""),
                    ))
                }
            },
        };
        let formulation = match &model.formulation {
            None => Formulation::Joint,
            Some(s) => match s.get_ref().as_str() {
                "absolute" => Formulation::Absolute,
                "joint" => Formulation::Joint,
                other => {
                    return Err(self.err(
                        s.span(),
                        "[model]",
                        format!("`formulation` must be \"absolute\" or \"joint\", got \"{other}\""),
                    ))
                }
            },
        };
        let gravity = self.scalar3(&model.gravity, "[model]", "gravity", true)?;

        for (i, inp) in raw.inputs.iter().enumerate() {
            let inp = inp.get_ref();
            let el = label("inputs", i, inp.name.get_ref());
            self.claim_variable(&inp.name, &el)?;
            let start = match &inp.start {
                Some(s) => {
                    let v = self.number(s, &el, "start")?;
                    // The same limit a master's values meet (`cosim`): the reconstruction's
                    // divided differences overflow long before f64::MAX.
                    self.ensure(v.abs() <= MAX_INPUT_MAGNITUDE, s.span(), &el, || {
                        format!("`start` = {v:e} is too large: inputs are limited to |u| <= {MAX_INPUT_MAGNITUDE:e}")
                    })?;
                    v
                }
                None => 0.0,
            };
            let reconstruction = match &inp.reconstruction {
                None => Reconstruction::default(),
                Some(r) => Reconstruction::from_name(r.get_ref()).ok_or_else(|| {
                    self.err(
                        r.span(),
                        &el,
                        format!(
                            "`reconstruction` must be \"hold\", \"linear\" or \"smooth\", \
                             got \"{}\"",
                            r.get_ref()
                        ),
                    )
                })?,
            };
            self.input_index
                .insert(inp.name.get_ref().clone(), self.inputs.len());
            self.input_used.push(false);
            self.input_bare.push(false);
            self.inputs.push(InputSpec {
                name: inp.name.get_ref().clone(),
                unit: self.xml_string(&inp.unit, &el, "unit")?.unwrap_or_default(),
                start,
                description: self
                    .xml_string(&inp.description, &el, "description")?
                    .unwrap_or_default(),
                reconstruction,
            });
        }

        if raw.bodies.is_empty() {
            return Err(self.err(
                raw.model.span(),
                "[model]",
                "the model has no [[bodies]]: nothing moves, there is nothing to integrate",
            ));
        }
        for (i, b) in raw.bodies.iter().enumerate() {
            self.body(i, b)?;
        }
        self.mass_spread(raw)?;
        for (i, f) in raw.frames.iter().enumerate() {
            self.frame(i, f)?;
        }
        for (i, j) in raw.joints.iter().enumerate() {
            self.joint(i, j)?;
        }
        for (i, d) in raw.drivers.iter().enumerate() {
            self.driver(i, d)?;
        }
        for (i, f) in raw.forces.iter().enumerate() {
            self.force(i, f)?;
        }
        let mut outputs = Vec::new();
        for (i, o) in raw.outputs.iter().enumerate() {
            outputs.push(self.output(i, o)?);
        }

        // An input's value is taken in SI units wherever it is used bare; an input in other
        // units is fed through an input expression that converts it ("u_deg*pi/180").
        for (i, inp) in raw.inputs.iter().enumerate() {
            let inp = inp.get_ref();
            let el = label("inputs", i, inp.name.get_ref());
            if let Some(u) = &inp.unit {
                if let Some(b) = self.declared_unit(u, &el)? {
                    self.ensure(b.is_si() || !self.input_bare[i], u.span(), &el, || {
                        not_si(
                            u.get_ref().trim(),
                            &b,
                            "an element takes this input's bare value in SI units: give the input in",
                            &format!(
                                ", or feed it through an input expression that converts it \
                                 (`\"{}*{}\"`)",
                                inp.name.get_ref(),
                                fmt_factor(b.factor)
                            ),
                        )
                    })?;
                }
            }
        }

        // An input that drives nothing is almost certainly a misspelt reference.
        for (i, used) in self.input_used.iter().enumerate() {
            if !used {
                let inp = raw.inputs[i].get_ref();
                return Err(self.err(
                    inp.name.span(),
                    &label("inputs", i, inp.name.get_ref()),
                    "this input drives nothing: no driver, frame, actuator or tire refers to it",
                ));
            }
        }

        // Tunability: by default a parameter is tunable when every use may change at run time.
        for (i, p) in raw.parameters.iter().enumerate() {
            let p = p.get_ref();
            let uses = &self.param_uses[i];
            let fixed_use = uses.iter().find(|u| !u.tunable_ok);
            self.params[i].tunable = match &p.tunable {
                None => !uses.is_empty() && fixed_use.is_none(),
                Some(t) if *t.get_ref() => {
                    if let Some(u) = fixed_use {
                        return Err(self.err(
                            t.span(),
                            &label("parameters", i, p.name.get_ref()),
                            format!(
                                "cannot be tunable: it is used in {}, which is fixed after initialization \
                                 (masses, geometry and motions are; stiffness, damping, friction and gravity are not)",
                                u.what
                            ),
                        ));
                    }
                    true
                }
                Some(_) => false,
            };
        }

        // A parameter acts if an element uses it, or a calculated parameter that acts does
        // (parameters may only refer to parameters above them: one backward pass settles it).
        let mut extra_warnings = Vec::new();
        {
            let n = self.params.len();
            let mut acts = vec![false; n];
            for i in (0..n).rev() {
                let direct = self.param_uses[i]
                    .iter()
                    .any(|u| !u.what.starts_with("parameters["));
                let via = self.param_uses[i].iter().any(|u| {
                    u.what.starts_with("parameters[")
                        && u.what
                            .split('"')
                            .nth(1)
                            .and_then(|name| self.param_index.get(name))
                            .is_some_and(|&k| acts[k])
                });
                acts[i] = direct || via;
            }
            for (i, p) in raw.parameters.iter().enumerate() {
                self.params[i].acts = acts[i];
                if !acts[i] {
                    let p = p.get_ref();
                    extra_warnings.push(
                        self.err(
                            p.name.span(),
                            &label("parameters", i, p.name.get_ref()),
                            "this parameter acts on nothing (no element or used parameter refers to it): it is not exposed in the FMU",
                        )
                        .to_string(),
                    );
                }
                if self.params[i].calculated
                    && p.get_ref().tunable.as_ref().is_some_and(|t| *t.get_ref())
                {
                    return Err(self.err(
                        p.get_ref().name.span(),
                        &label("parameters", i, p.get_ref().name.get_ref()),
                        "a parameter computed from other parameters cannot be tunable (it follows them at initialization)",
                    ));
                }
                if self.params[i].calculated {
                    self.params[i].tunable = false;
                }
            }
        }
        let mut warnings = self.warnings(raw);
        warnings.extend(extra_warnings);
        warnings.append(&mut self.element_warnings);
        let mut spec = ModelSpec {
            name: model.name.get_ref().clone(),
            description,
            gravity,
            initialization,
            formulation,
            experiment,
            solver,
            parameters: std::mem::take(&mut self.params),
            inputs: std::mem::take(&mut self.inputs),
            bodies: std::mem::take(&mut self.body_specs),
            frames: std::mem::take(&mut self.frame_specs),
            joints: std::mem::take(&mut self.joint_specs),
            drivers: std::mem::take(&mut self.driver_specs),
            forces: std::mem::take(&mut self.force_specs),
            warnings,
            source_text: None,
            source_contents: SourceContents::default(),
            outputs,
            source_files: std::mem::take(&mut self.source_files),
        };
        // The default is joint coordinates, except for a fully prescribed model (every tree
        // coordinate driven), which only the absolute formulation integrates.
        if model.formulation.is_none() && !super::joint::has_free_coordinate(&spec) {
            spec.formulation = Formulation::Absolute;
        }
        Ok(spec)
    }

    fn experiment(&mut self, raw: &RawFile) -> Res<ExperimentSpec> {
        let mut e = ExperimentSpec::default();
        let Some(x) = &raw.experiment else {
            return Ok(e);
        };
        let el = "[experiment]";
        let x = x.get_ref();
        if let Some(v) = &x.start {
            e.start = self.number(v, el, "start")?;
        }
        if let Some(v) = &x.stop {
            e.stop = self.number(v, el, "stop")?;
            self.ensure(e.stop > e.start, v.span(), el, || {
                format!("`stop` ({}) must be after `start` ({})", e.stop, e.start)
            })?;
        } else {
            e.stop = e.start + 1.0;
        }
        if let Some(v) = &x.tolerance {
            e.tolerance = self.number(v, el, "tolerance")?;
            self.ensure(
                crate::integrate::rtol_in_range(e.tolerance),
                v.span(),
                el,
                || {
                    format!(
                        "`tolerance` must be in [{:e}, 1) (a relative tolerance), got {}",
                        crate::integrate::RTOL_MIN,
                        super::error::show_number(e.tolerance)
                    )
                },
            )?;
        }
        if let Some(v) = &x.step {
            e.step = self.number(v, el, "step")?;
            self.ensure(e.step > 0.0, v.span(), el, || {
                format!("`step` must be positive, got {} s", e.step)
            })?;
        }
        Ok(e)
    }

    fn solver(&mut self, raw: &RawFile) -> Res<Settings> {
        let mut s = Settings::default();
        let Some(x) = &raw.solver else { return Ok(s) };
        let el = "[solver]";
        let x = x.get_ref();
        if let Some(v) = &x.integrator {
            s.method = Method::from_name(v.get_ref()).ok_or_else(|| {
                let names: Vec<&str> = Method::ALL.iter().map(|m| m.name()).collect();
                self.err(
                    v.span(),
                    el,
                    format!(
                        "unknown integrator \"{}\" (one of: {})",
                        v.get_ref(),
                        names.join(", ")
                    ),
                )
            })?;
        }
        if let Some(v) = &x.jacobian {
            s.jacobian = JacobianStrategy::from_name(v.get_ref()).ok_or_else(|| {
                let names: Vec<&str> = JacobianStrategy::ALL.iter().map(|m| m.name()).collect();
                self.err(
                    v.span(),
                    el,
                    format!(
                        "unknown jacobian \"{}\" (one of: {})",
                        v.get_ref(),
                        names.join(", ")
                    ),
                )
            })?;
        }
        for (key, val, target, positive) in [
            ("rtol", &x.rtol, &mut s.rtol, true),
            ("atol", &x.atol, &mut s.atol, true),
            ("max_step", &x.max_step, &mut s.max_step, false),
            ("initial_step", &x.initial_step, &mut s.initial_step, false),
        ] {
            if let Some(v) = val {
                let n = self.number(v, el, key)?;
                let ok = match key {
                    "rtol" => crate::integrate::rtol_in_range(n),
                    _ if positive => n > 0.0,
                    _ => n >= 0.0,
                };
                let need = match key {
                    "rtol" => "in [1e-14, 1) (a relative tolerance)",
                    _ if positive => "positive",
                    _ => "zero or positive",
                };
                self.ensure(ok, v.span(), el, || {
                    format!(
                        "`{key}` must be {need}, got {}",
                        super::error::show_number(n)
                    )
                })?;
                *target = n;
            }
        }
        if let Some(v) = &x.fixed_step {
            let n = self.number(v, el, "fixed_step")?;
            self.ensure(n > 0.0, v.span(), el, || {
                format!(
                    "`fixed_step` must be positive, got {}",
                    super::error::show_number(n)
                )
            })?;
            s.fixed_step = Some(n);
        }
        Ok(s)
    }
}

/// ` (did you mean `x`?)` for the closest candidate within a small edit distance, else "".
fn did_you_mean<'b>(name: &str, candidates: impl Iterator<Item = &'b String>) -> String {
    let limit = (name.chars().count() / 3).clamp(1, 3);
    let mut best: Option<(usize, &String)> = None;
    for c in candidates {
        let d = edit_distance(name, c);
        if d <= limit
            && d < name.chars().count()
            && best.is_none_or(|(bd, bc)| d < bd || (d == bd && c < bc))
        {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}

/// Levenshtein distance.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// A unit vector perpendicular to `z`, chosen deterministically: global x projected onto the
/// plane normal to `z`, or global y when `z` is within ~25° of global x.
pub fn default_perpendicular(z: &Vector3<f64>) -> Vector3<f64> {
    let e = if z.x.abs() < 0.9 {
        Vector3::x()
    } else {
        Vector3::y()
    };
    (e - z * z.dot(&e)).normalize()
}

/// Angle in (−π, π].
pub fn wrap_angle(a: f64) -> f64 {
    let mut x = a.rem_euclid(2.0 * PI);
    if x > PI {
        x -= 2.0 * PI;
    }
    x
}

/// A factor as a model file would write it: `pi/180` for degrees.
fn fmt_factor(f: f64) -> String {
    for (v, t) in [(PI / 180.0, "pi/180"), (180.0 / PI, "180/pi")] {
        if (f / v - 1.0).abs() < 1e-12 {
            return t.into();
        }
    }
    // 12 significant digits: 1/0.001 is 1000, not 999.9999999999999.
    let f: f64 = format!("{f:.11e}").parse().unwrap_or(f);
    format!("{f}")
}

/// The message for a unit `text` (parsed to `b`) that is not the SI unit of its dimension
/// where the engine takes the value in SI units; `what` ends with "in" before the SI unit.
/// `or` is another remedy, appended after the SI unit's.
fn not_si(text: &str, b: &BaseUnit, what: &str, or: &str) -> String {
    let si = b.si_unit();
    format!(
        "`unit` = \"{text}\" is {} {si}, but {what} {si} (`unit` = \"{si}\" or another unit \
         of factor 1 for that dimension){or}; as written, an importer converting units would be off \
         by a factor {}",
        fmt_factor(b.factor),
        fmt_factor(1.0 / b.factor)
    )
}
