//! Writing the `.fmu`: resources, token, `modelDescription.xml`, binaries, documentation and
//! the template files, zipped.

use super::capabilities::Capabilities;
use super::deps::output_dependencies;
use super::token::model_token_of;
use super::xml::{fmt_f64, FmiVersion, ModelDescription, XmlError};
use super::{Causality, StartValue, VarKind, VariableTable};
use crate::mbs::spec::ModelSpec;
use std::io::Write;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The files of `fmu-template/` compiled into the tool: `(path in the FMU, content)`.
pub const TEMPLATE: &[(&str, &[u8])] = &[
    ("model.png", include_bytes!("../../fmu-template/model.png")),
    (
        "documentation/licenses/LICENSE.txt",
        include_bytes!("../../fmu-template/documentation/licenses/LICENSE.txt"),
    ),
];

/// Name of the model file inside `resources/` (what the runtime loads).
pub const MODEL_RESOURCE: &str = "model.toml";

#[derive(Debug, Error)]
pub enum PackageError {
    #[error("{file}: cannot read: {reason}")]
    Read { file: PathBuf, reason: String },
    #[error("{file}: referenced by the model but outside its directory {dir}; move it under the model's directory so its relative path can be kept inside resources/")]
    OutsideModelDir { file: PathBuf, dir: PathBuf },
    #[error("{file}: not a Linux shared library (no ELF header); build it with `cargo build --release --lib` or pass --library PATH")]
    NotElf { file: PathBuf },
    #[error("{file}: cannot drop its debug information ({reason}); pass --keep-debug-info to pack it as it is")]
    Strip { file: PathBuf, reason: String },
    #[error("--extra-binary {platform}={file}: {reason}")]
    ExtraBinary {
        platform: String,
        file: PathBuf,
        reason: String,
    },
    #[error("{file}: cannot write the FMU: {reason}")]
    Write { file: PathBuf, reason: String },
    #[error("model {model:?}: the variable name {name:?} is used twice (names must be unique; `time`, `solver.*` and `stats.*` are reserved)")]
    DuplicateName { model: String, name: String },
    #[error(transparent)]
    Xml(#[from] XmlError),
    #[error("zip: {0}")]
    Zip(String),
}

impl PackageError {
    /// Errors the user can fix (files, paths, arguments) as opposed to internal failures.
    pub fn is_user_error(&self) -> bool {
        !matches!(self, PackageError::Xml(_) | PackageError::Zip(_))
    }
}

#[derive(Debug, Clone)]
pub struct PackageOptions {
    pub version: FmiVersion,
    /// The runtime cdylib for 64-bit Linux.
    pub library: PathBuf,
    /// `(platform folder, library)` built elsewhere, e.g. `("x86_64-windows", "mbsfmu.dll")`:
    /// a folder name of this FMI version ([`super::platform::PLATFORMS`]).
    pub extra_binaries: Vec<(String, PathBuf)>,
    /// A directory laid out like `fmu-template/`; `None`: the compiled-in [`TEMPLATE`].
    pub template_dir: Option<PathBuf>,
    pub generation_date_and_time: String,
    pub capabilities: Capabilities,
    /// Pack `library` without its `.debug_*` sections (see [`super::strip`]).
    pub strip_debug_info: bool,
    /// Pack this text as the model instead of `model_file`'s content (a model with its
    /// `[solver]` table edited by `export --set`, see [`super::bake`]); the spec must have
    /// been loaded from it.
    pub model_text: Option<String>,
}

/// What was written.
#[derive(Debug, Clone)]
pub struct Packed {
    pub description: ModelDescription,
    /// Archive entry names in order.
    pub entries: Vec<String>,
    /// Size in bytes of the Linux library as given and as packed (after stripping).
    pub library_size: (usize, usize),
    /// Size in bytes of the `.fmu` (the zip).
    pub fmu_size: usize,
}

fn read(file: &Path) -> Result<Vec<u8>, PackageError> {
    std::fs::read(file).map_err(|e| PackageError::Read {
        file: file.to_path_buf(),
        reason: e.to_string(),
    })
}

/// The files for `resources/`: the model as `model.toml` and every other file the model
/// references at its path relative to the model's directory (so the runtime's loader finds
/// them from `resources/model.toml`).
pub fn collect_resources(
    spec: &ModelSpec,
    model_file: &Path,
) -> Result<Vec<(String, Vec<u8>)>, PackageError> {
    let canon = |p: &Path| {
        p.canonicalize().map_err(|e| PackageError::Read {
            file: p.to_path_buf(),
            reason: e.to_string(),
        })
    };
    let model_canon = canon(model_file)?;
    let dir = model_canon
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut files = vec![(MODEL_RESOURCE.to_string(), read(model_file)?)];
    for f in &spec.source_files {
        let f = resolve(f, model_file);
        let c = canon(&f)?;
        if c == model_canon {
            continue;
        }
        let rel = c
            .strip_prefix(&dir)
            .map_err(|_| PackageError::OutsideModelDir {
                file: f.clone(),
                dir: dir.clone(),
            })?;
        let rel: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let rel = rel.join("/");
        if rel == MODEL_RESOURCE {
            return Err(PackageError::Read { file: f, reason: "a referenced file may not be named model.toml next to the model (the model itself is packed under that name)".into() });
        }
        if rel == crate::mbs::resolved::FILE_NAME {
            return Err(PackageError::Read { file: f, reason: format!("a referenced file may not be named {rel} next to the model (the packager writes the resolved model under that name)") });
        }
        if !files.iter().any(|(p, _)| *p == rel) {
            files.push((rel, read(&c)?));
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

/// A referenced file as the loader opened it (absolute, or relative to the working
/// directory); a relative path that does not exist there is taken relative to the model's
/// directory (hand-built specs).
fn resolve(f: &Path, model_file: &Path) -> PathBuf {
    if f.is_relative() && !f.exists() {
        model_file.parent().unwrap_or(Path::new("")).join(f)
    } else {
        f.to_path_buf()
    }
}

/// Every regular file under `dir` (recursively) as `(relative path with '/', content)`,
/// sorted by path.
pub fn read_tree(dir: &Path) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) -> std::io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.is_dir() {
                walk(root, &path, out)?;
            } else if path.is_file() {
                let rel = path.strip_prefix(root).expect("walk stays under its root");
                let parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                out.push((parts.join("/"), std::fs::read(&path)?));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn template_files(dir: &Option<PathBuf>) -> Result<Vec<(String, Vec<u8>)>, PackageError> {
    match dir {
        None => Ok(TEMPLATE
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_vec()))
            .collect()),
        Some(d) => {
            let files = read_tree(d).map_err(|e| PackageError::Read {
                file: d.clone(),
                reason: e.to_string(),
            })?;
            Ok(files
                .into_iter()
                .filter(|(p, _)| p != "README.md")
                .collect())
        }
    }
}

/// What a library must be, in words, and the test of its first bytes.
type BinaryFormat = (&'static str, fn(&[u8]) -> bool);

/// The kind of shared library a platform folder's importers load, by the folder name (FMI 2
/// `win64`, FMI 3 `x86_64-windows`, ...): what its first bytes must be.
fn binary_format(platform: &str) -> Option<BinaryFormat> {
    fn pe(b: &[u8]) -> bool {
        b.starts_with(b"MZ")
    }
    fn mach_o(b: &[u8]) -> bool {
        // 32- and 64-bit Mach-O and the universal (fat) header, in either byte order.
        const MAGIC: [u32; 3] = [0xfeed_face, 0xfeed_facf, 0xcafe_babe];
        b.get(..4).is_some_and(|m| {
            let m: [u8; 4] = m.try_into().expect("four bytes");
            MAGIC.contains(&u32::from_be_bytes(m)) || MAGIC.contains(&u32::from_le_bytes(m))
        })
    }
    fn elf(b: &[u8]) -> bool {
        b.starts_with(b"\x7fELF")
    }
    if platform.starts_with("win") || platform.ends_with("-windows") {
        Some(("a Windows DLL (PE file, \"MZ\" header)", pe))
    } else if platform.starts_with("darwin") || platform.ends_with("-darwin") {
        Some(("a macOS dynamic library (Mach-O header)", mach_o))
    } else if platform.starts_with("linux") || platform.ends_with("-linux") {
        Some(("a Linux shared library (ELF header)", elf))
    } else {
        None
    }
}

/// The content of an `--extra-binary` for the platform folder `platform`, refused (with
/// what was expected) when it is not a shared library of that platform's kind: an empty or
/// misnamed file would only fail in the importer.
fn read_extra_binary(platform: &str, path: &Path) -> Result<Vec<u8>, String> {
    let content = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    check_binary_header(platform, path, &content)?;
    Ok(content)
}

/// [`read_extra_binary`]'s check on the file's first bytes only, without reading the rest
/// (`export` checks every `--extra-binary` before it writes anything, then each FMU reads it).
pub fn check_extra_binary(platform: &str, path: &Path) -> Result<(), String> {
    use std::io::Read;
    let mut head = Vec::with_capacity(HEADER_BYTES);
    std::fs::File::open(path)
        .and_then(|f| f.take(HEADER_BYTES as u64).read_to_end(&mut head))
        .map_err(|e| format!("cannot read: {e}"))?;
    check_binary_header(platform, path, &head)
}

/// More than any header test of [`binary_format`] reads.
const HEADER_BYTES: usize = 16;

fn check_binary_header(platform: &str, path: &Path, content: &[u8]) -> Result<(), String> {
    if let Some((expected, ok)) = binary_format(platform) {
        if !ok(content) {
            let found = if content.is_empty() {
                "an empty file".to_string()
            } else {
                "a file without that header".to_string()
            };
            return Err(format!(
                "{} is {found}, but the {platform} platform needs {expected}",
                path.display()
            ));
        }
    }
    Ok(())
}

fn extension_of(p: &Path) -> String {
    p.extension()
        .map(|e| e.to_string_lossy().into_owned())
        .unwrap_or_else(|| "so".into())
}

/// A file of the FMU: path inside its folder, content.
pub type PackedFile = (String, Vec<u8>);

/// Everything `resources/` holds, by path, and the model token: the model as `model.toml`
/// (`model_text` in place of the file's content when given), the files it references, and
/// the resolved model (src/mbs/resolved.rs), resolved from the packed text as the runtime
/// would resolve it (none when that text does not resolve). Benchmarks that unpack a model
/// by hand use this too.
pub fn packed_resources(
    spec: &ModelSpec,
    model_file: &Path,
    model_text: Option<&String>,
) -> Result<(Vec<PackedFile>, String), PackageError> {
    let mut resources = collect_resources(spec, model_file)?;
    // The runtime recomputes this from resources/model.toml and the files its loader reads
    // (same contents, same order), so the token is computed by the same function.
    let sources: Vec<PathBuf> = spec
        .source_files
        .iter()
        .map(|f| resolve(f, model_file))
        .collect();
    let token = match model_text {
        None => model_token_of(model_file, &sources).map_err(|(file, e)| PackageError::Read {
            file,
            reason: e.to_string(),
        })?,
        Some(text) => {
            if let Some(r) = resources.iter_mut().find(|(p, _)| p == MODEL_RESOURCE) {
                r.1 = text.clone().into_bytes();
            }
            let mut contents = vec![text.clone().into_bytes()];
            for f in sources.iter().filter(|p| p.as_path() != model_file) {
                contents.push(read(f)?);
            }
            super::token::model_token(contents.iter().map(|c| c.as_slice()))
        }
    };
    // A packed text that does not resolve (only a spec built in code, as in tests, next to a
    // placeholder file) gets no resolved model: the runtime then reads model.toml, as it must.
    let packed = &resources
        .iter()
        .find(|(p, _)| p == MODEL_RESOURCE)
        .expect("packed")
        .1;
    let resolved = std::str::from_utf8(packed)
        .ok()
        .and_then(|text| crate::mbs::load_model_str(text, model_file).ok());
    if let Some(r) = resolved {
        let bytes = crate::mbs::resolved::encode(&r, model_file, &token).map_err(|reason| {
            PackageError::Read {
                file: model_file.to_path_buf(),
                reason,
            }
        })?;
        resources.push((crate::mbs::resolved::FILE_NAME.into(), bytes));
        resources.sort_by(|a, b| a.0.cmp(&b.0));
    }
    Ok((resources, token))
}

/// Build the FMU in memory. Returns the zip bytes and what went into it.
pub fn build_fmu(
    spec: &ModelSpec,
    model_file: &Path,
    opts: &PackageOptions,
) -> Result<(Vec<u8>, Packed), PackageError> {
    let (resources, token) = packed_resources(spec, model_file, opts.model_text.as_ref())?;
    let table = VariableTable::from_spec(spec);
    let mut seen = std::collections::HashSet::new();
    if let Some(v) = table
        .variables
        .iter()
        .find(|v| !seen.insert(v.name.as_str()))
    {
        return Err(PackageError::DuplicateName {
            model: spec.name.clone(),
            name: v.name.clone(),
        });
    }
    let md = ModelDescription::new(
        spec,
        &table,
        opts.version,
        &token,
        &opts.generation_date_and_time,
        opts.capabilities,
    );
    let xml = md.to_xml()?;

    let lib = read(&opts.library)?;
    if !lib.starts_with(b"\x7fELF") {
        return Err(PackageError::NotElf {
            file: opts.library.clone(),
        });
    }
    let given_size = lib.len();
    let lib = if opts.strip_debug_info {
        super::strip::strip_debug_info(&lib).map_err(|reason| PackageError::Strip {
            file: opts.library.clone(),
            reason,
        })?
    } else {
        lib
    };
    let library_size = (given_size, lib.len());
    let id = &md.model_identifier;
    let mut entries: Vec<(String, Vec<u8>)> =
        vec![("modelDescription.xml".into(), xml.into_bytes())];
    entries.push((
        format!("binaries/{}/{id}.so", opts.version.linux_platform()),
        lib,
    ));
    for (platform, path) in &opts.extra_binaries {
        let bad = |reason: &str| PackageError::ExtraBinary {
            platform: platform.clone(),
            file: path.clone(),
            reason: reason.into(),
        };
        // The version's own name only (`export` translates between the versions' names).
        super::platform::platform_folder(opts.version, platform, false).map_err(|e| bad(&e))?;
        if platform == opts.version.linux_platform() {
            return Err(bad("this platform's library is given by --library"));
        }
        let content = read_extra_binary(platform, path).map_err(|e| bad(&e))?;
        entries.push((
            format!("binaries/{platform}/{id}.{}", extension_of(path)),
            content,
        ));
    }
    for (p, c) in &resources {
        entries.push((format!("resources/{p}"), c.clone()));
    }
    entries.push((
        "documentation/index.html".into(),
        documentation_html(spec, &table, &md, &resources).into_bytes(),
    ));
    for (p, c) in template_files(&opts.template_dir)? {
        if p == "documentation/index.html"
            || p == "modelDescription.xml"
            || p.starts_with("resources/")
            || p.starts_with("binaries/")
        {
            continue; // generated; a template must not override them
        }
        entries.push((p, c));
    }

    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    // Deflate at its highest level: the library dominates the FMU and compresses about 1 %
    // smaller than at the default level, for well under a second more per export.
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .compression_level(Some(9))
        .unix_permissions(0o644);
    let zerr = |e: zip::result::ZipError| PackageError::Zip(e.to_string());
    let mut names = Vec::new();
    for (name, content) in &entries {
        zip.start_file(name.as_str(), options).map_err(zerr)?;
        zip.write_all(content)
            .map_err(|e| PackageError::Zip(e.to_string()))?;
        names.push(name.clone());
    }
    let bytes = zip.finish().map_err(zerr)?.into_inner();
    let fmu_size = bytes.len();
    Ok((
        bytes,
        Packed {
            description: md,
            entries: names,
            library_size,
            fmu_size,
        },
    ))
}

/// Build the FMU and write it to `out`.
pub fn write_fmu(
    spec: &ModelSpec,
    model_file: &Path,
    opts: &PackageOptions,
    out: &Path,
) -> Result<Packed, PackageError> {
    let (bytes, packed) = build_fmu(spec, model_file, opts)?;
    std::fs::write(out, bytes).map_err(|e| PackageError::Write {
        file: out.to_path_buf(),
        reason: e.to_string(),
    })?;
    Ok(packed)
}

/// HTML-escape text.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            _ => o.push(c),
        }
    }
    o
}

fn start_str(s: &StartValue) -> String {
    match s {
        StartValue::None => String::new(),
        StartValue::Float(x) => fmt_f64(*x),
        StartValue::Int(i) => i.to_string(),
    }
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `documentation/index.html`: what the model is, its interface, parameters and solver options.
pub fn documentation_html(
    spec: &ModelSpec,
    table: &VariableTable,
    md: &ModelDescription,
    resources: &[(String, Vec<u8>)],
) -> String {
    let mut h = String::new();
    let name = esc(&spec.name);
    h.push_str(&format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{name}</title>\n<style>\n\
         body {{ font-family: sans-serif; max-width: 60em; margin: 2em auto; line-height: 1.4; }}\n\
         table {{ border-collapse: collapse; margin-bottom: 1.5em; }}\n\
         th, td {{ border: 1px solid #bbb; padding: 0.2em 0.6em; text-align: left; }}\n\
         th {{ background: #eef2f8; }} code {{ font-size: 95%; }}\n</style>\n</head>\n<body>\n<h1>{name}</h1>\n"
    ));
    if !spec.description.is_empty() {
        h.push_str(&format!("<p>{}</p>\n", esc(&spec.description)));
    }
    h.push_str(&format!(
        "<p>FMI {} Co-Simulation FMU generated by {} on {}. Model identifier <code>{}</code>, {} <code>{}</code>.</p>\n",
        md.fmi_version.attr(),
        esc(&md.generation_tool),
        esc(&md.generation_date_and_time),
        esc(&md.model_identifier),
        if md.fmi_version == FmiVersion::Fmi3 { "instantiation token" } else { "GUID" },
        esc(&md.token)
    ));
    h.push_str(&format!(
        "<p>A multibody model with {}, {}, {}, {} and {}. The FMU integrates it with its own \
         variable-step integrators inside each communication step.</p>\n",
        count(spec.bodies.len(), "body", "bodies"),
        count(spec.joints.len(), "joint", "joints"),
        count(spec.drivers.len(), "driver", "drivers"),
        count(spec.forces.len(), "force element", "force elements"),
        count(spec.frames.len(), "moving frame", "moving frames")
    ));
    let e = &spec.experiment;
    h.push_str(&format!(
        "<h2>Default experiment</h2>\n<p>start {} s, stop {} s, tolerance {}, communication step {} s.</p>\n",
        fmt_f64(e.start),
        fmt_f64(e.stop),
        fmt_f64(e.tolerance),
        fmt_f64(e.step)
    ));

    let row = |cells: &[String]| {
        format!(
            "<tr>{}</tr>\n",
            cells
                .iter()
                .map(|c| format!("<td>{c}</td>"))
                .collect::<String>()
        )
    };
    let header = |cells: &[&str]| {
        format!(
            "<tr>{}</tr>\n",
            cells
                .iter()
                .map(|c| format!("<th>{c}</th>"))
                .collect::<String>()
        )
    };
    let deps = output_dependencies(spec);

    h.push_str("<h2>Inputs</h2>\n");
    let inputs: Vec<_> = table
        .variables
        .iter()
        .filter(|v| v.causality == Causality::Input)
        .collect();
    if inputs.is_empty() {
        h.push_str("<p>None.</p>\n");
    } else {
        h.push_str("<table>\n");
        h.push_str(&header(&[
            "name",
            "unit",
            "start",
            "value reference",
            "description",
        ]));
        for v in inputs {
            h.push_str(&row(&[
                format!("<code>{}</code>", esc(&v.name)),
                esc(&v.unit),
                start_str(&v.start),
                v.value_reference.to_string(),
                esc(&v.description),
            ]));
        }
        h.push_str("</table>\n");
        let c = &md.capabilities;
        h.push_str(match md.fmi_version {
            FmiVersion::Fmi2 if c.can_interpolate_inputs => {
                "<p>Inside a communication step the inputs follow the derivatives the importer \
                 sets with <code>fmi2SetRealInputDerivatives</code>; without them they are held \
                 constant.</p>\n"
            }
            FmiVersion::Fmi3 if c.provides_intermediate_update => {
                "<p>Inside a communication step the FMU asks the importer for current input \
                 values through the intermediate-update callback; without it the inputs are \
                 held constant.</p>\n"
            }
            _ => "<p>Inputs are held constant over a communication step.</p>\n",
        });
    }

    h.push_str("<h2>Outputs</h2>\n");
    let outputs: Vec<_> = table
        .variables
        .iter()
        .filter(|v| v.causality == Causality::Output)
        .collect();
    if outputs.is_empty() {
        h.push_str("<p>None.</p>\n");
    } else {
        h.push_str("<table>\n");
        h.push_str(&header(&[
            "name",
            "unit",
            "value reference",
            "depends directly on",
            "description",
        ]));
        for v in outputs {
            let d = match v.kind {
                VarKind::Output(i) => deps[i]
                    .iter()
                    .map(|&u| format!("<code>{}</code>", esc(&spec.inputs[u].name)))
                    .collect::<Vec<_>>()
                    .join(", "),
                _ => String::new(),
            };
            h.push_str(&row(&[
                format!("<code>{}</code>", esc(&v.name)),
                esc(&v.unit),
                v.value_reference.to_string(),
                if d.is_empty() { "—".into() } else { d },
                esc(&v.description),
            ]));
        }
        h.push_str("</table>\n");
    }

    h.push_str("<h2>Parameters</h2>\n");
    let params: Vec<_> = table
        .variables
        .iter()
        .filter(|v| matches!(v.kind, VarKind::Parameter(_)))
        .collect();
    if params.is_empty() {
        h.push_str("<p>None.</p>\n");
    } else {
        h.push_str("<table>\n");
        h.push_str(&header(&[
            "name",
            "unit",
            "start",
            "changeable",
            "value reference",
            "description",
        ]));
        for v in params {
            let tunable = if v.variability == super::Variability::Tunable {
                "during simulation"
            } else {
                "before initialization"
            };
            h.push_str(&row(&[
                format!("<code>{}</code>", esc(&v.name)),
                esc(&v.unit),
                start_str(&v.start),
                tunable.into(),
                v.value_reference.to_string(),
                esc(&v.description),
            ]));
        }
        h.push_str("</table>\n");
    }

    h.push_str("<h2>Solver options</h2>\n<p>Parameters set before initialization. The importer's tolerance, when it gives one, overrides <code>solver.rtol</code>.</p>\n<table>\n");
    h.push_str(&header(&[
        "name",
        "default",
        "value reference",
        "description",
    ]));
    for v in table
        .variables
        .iter()
        .filter(|v| matches!(v.kind, VarKind::Solver(_)))
    {
        let default = match (v.var_type, &v.start) {
            (super::VarType::Enumeration(t), StartValue::Int(i)) => {
                let items = t.items();
                let chosen = items
                    .iter()
                    .find(|(_, x)| x == i)
                    .map(|(n, _)| *n)
                    .unwrap_or("?");
                let all: Vec<String> = items.iter().map(|(n, x)| format!("{n} = {x}")).collect();
                format!("<code>{chosen}</code> (choices: {})", esc(&all.join(", ")))
            }
            (_, s) => format!("{} {}", start_str(s), esc(&v.unit)),
        };
        h.push_str(&row(&[
            format!("<code>{}</code>", esc(&v.name)),
            default,
            v.value_reference.to_string(),
            esc(&v.description),
        ]));
    }
    h.push_str("</table>\n");

    h.push_str("<h2>Solver statistics</h2>\n<p>Local variables, updated at every communication point.</p>\n<table>\n");
    h.push_str(&header(&["name", "value reference", "description"]));
    for v in table
        .variables
        .iter()
        .filter(|v| matches!(v.kind, VarKind::Stat(_)))
    {
        h.push_str(&row(&[
            format!("<code>{}</code>", esc(&v.name)),
            v.value_reference.to_string(),
            esc(&v.description),
        ]));
    }
    h.push_str("</table>\n");

    if !spec.bodies.is_empty() {
        h.push_str("<h2>Bodies</h2>\n<table>\n");
        h.push_str(&header(&["name", "kind", "mass", "initial position (m)"]));
        let params = spec.default_parameters();
        for b in &spec.bodies {
            let p = b.position;
            h.push_str(&row(&[
                esc(&b.name),
                format!("{:?}", b.kind).to_lowercase(),
                format!("{} kg", fmt_f64(b.mass.eval(&params))),
                format!("({}, {}, {})", fmt_f64(p.x), fmt_f64(p.y), fmt_f64(p.z)),
            ]));
        }
        h.push_str("</table>\n");
    }

    h.push_str("<h2>Packed model files</h2>\n<ul>\n");
    for (p, c) in resources {
        h.push_str(&format!(
            "<li><code>resources/{}</code> ({} bytes){}</li>\n",
            esc(p),
            c.len(),
            if p == crate::mbs::resolved::FILE_NAME {
                ": the model as resolved from <code>model.toml</code> by the packager, read at \
                 instantiation instead of parsing it (ignored, and <code>model.toml</code> read, \
                 when it does not match the files or this binary)"
            } else {
                ""
            }
        ));
    }
    h.push_str(
        "</ul>\n<p>Licence: see <code>documentation/licenses/</code>.</p>\n</body>\n</html>\n",
    );
    h
}
