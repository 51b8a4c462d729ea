//! `mbsfmu export MODEL.toml [--fmi 2|3] [-o FILE.fmu]`.

use super::{CliError, CliResult};
use clap::Args;
use mbsfmu::description::bake::{bake_solver, parse_solver_sets};
use mbsfmu::description::package::{check_extra_binary, write_fmu, PackageOptions};
use mbsfmu::description::platform::platform_folder;
use mbsfmu::description::xml::{model_identifier, now_utc, FmiVersion};
use mbsfmu::description::Capabilities;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The model file (TOML).
    pub model: PathBuf,
    /// FMI version to write (2 or 3); both when absent.
    #[arg(long, value_parser = ["2", "3"])]
    pub fmi: Option<String>,
    /// Output file (needs --fmi). Default: <model name>_fmi2.fmu / _fmi3.fmu in --out-dir.
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Directory for the default file names.
    #[arg(long, default_value = ".")]
    pub out_dir: PathBuf,
    /// The runtime library for 64-bit Linux. Default: libmbsfmu.so next to this executable.
    #[arg(long)]
    pub library: Option<PathBuf>,
    /// A runtime library built elsewhere, as PLATFORM=PATH (e.g. x86_64-windows=mbsfmu.dll);
    /// may be repeated. PLATFORM is a binaries/ folder: FMI 2 win32, win64, linux32, darwin64,
    /// ...; FMI 3 x86_64-windows, i686-windows, aarch64-darwin, ... Exporting both versions,
    /// either version's name is translated (win64 <-> x86_64-windows, win32 <-> i686-windows,
    /// linux32 <-> i686-linux, darwin64 <-> x86_64-darwin); a platform the other version has
    /// no name for (aarch64-*, darwin32) needs --fmi. With --fmi, give that version's name.
    #[arg(long = "extra-binary", value_name = "PLATFORM=PATH")]
    pub extra_binary: Vec<String>,
    /// A directory laid out like fmu-template/ to use instead of the built-in template.
    #[arg(long)]
    pub template: Option<PathBuf>,
    /// Pack the Linux library with its debug information (by default it is dropped: the
    /// release build's line tables triple the FMU's size and serve only profilers).
    #[arg(long)]
    pub keep_debug_info: bool,
    /// Write a solver choice into the packed model's [solver] table: solver.KEY=VALUE
    /// (integrator, jacobian, rtol, atol, max_step, initial_step, fixed_step); may repeat.
    /// The FMU starts with it, for masters that drop Enumeration parameters.
    #[arg(long = "set", value_name = "solver.KEY=VALUE")]
    pub set: Vec<String>,
}

/// `libmbsfmu.so` next to the running executable (`target/release/`); for a debug build of
/// the tool `../release/` first.
pub fn default_library() -> CliResult<PathBuf> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Internal(format!("cannot locate the running executable: {e}")))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    // A debug build of the tool still packs the release library when there is one.
    let mut candidates = Vec::new();
    if dir.file_name().is_some_and(|n| n == "debug") {
        candidates.push(dir.join("../release/libmbsfmu.so"));
    }
    candidates.push(dir.join("libmbsfmu.so"));
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        CliError::User(format!(
            "cannot find the runtime library libmbsfmu.so in {}; build it with `cargo build --release --lib` or pass --library PATH",
            dir.display()
        ))
    })
}

/// A size in MB (10^6 bytes, as file managers show it).
fn megabytes(bytes: usize) -> String {
    format!("{:.2} MB", bytes as f64 / 1e6)
}

pub fn run(a: &ExportArgs) -> CliResult {
    let versions = match a.fmi.as_deref() {
        Some("2") => vec![FmiVersion::Fmi2],
        Some("3") => vec![FmiVersion::Fmi3],
        _ => vec![FmiVersion::Fmi2, FmiVersion::Fmi3],
    };
    if a.output.is_some() && versions.len() > 1 {
        return Err(CliError::User("-o/--output names one file: give --fmi 2 or --fmi 3 with it, or use --out-dir for both".into()));
    }
    // Each version's folder for every --extra-binary, checked before anything is written.
    let mut extra: Vec<Vec<(String, PathBuf)>> = vec![Vec::new(); versions.len()];
    for e in &a.extra_binary {
        let (platform, path) = e
            .split_once('=')
            .ok_or_else(|| CliError::User(format!("--extra-binary {e}: expected PLATFORM=PATH")))?;
        for (k, &v) in versions.iter().enumerate() {
            let folder = platform_folder(v, platform, versions.len() > 1)
                .map_err(|m| CliError::User(format!("--extra-binary {e}: {m}")))?;
            if folder == v.linux_platform() {
                return Err(CliError::User(format!(
                    "--extra-binary {e}: the {folder} library of the FMI {} FMU is the one --library gives",
                    v.number()
                )));
            }
            // The file's kind is checked here too (its header: each FMU reads the file once
            // when it is written), so that nothing is written for a bad one.
            check_extra_binary(folder, Path::new(path))
                .map_err(|m| CliError::User(format!("--extra-binary {e}: {m}")))?;
            extra[k].push((folder.to_string(), PathBuf::from(path)));
        }
    }
    let solver_sets = parse_solver_sets(&a.set).map_err(|e| CliError::User(e.to_string()))?;
    let (spec, model_text) = if solver_sets.is_empty() {
        (mbsfmu::mbs::load_model(&a.model)?, None)
    } else {
        let text = std::fs::read_to_string(&a.model)
            .map_err(|e| CliError::User(format!("{}: cannot read: {e}", a.model.display())))?;
        let baked = bake_solver(&text, &a.model.display().to_string(), &solver_sets)
            .map_err(|e| CliError::User(e.to_string()))?;
        let spec = mbsfmu::mbs::load_model_str(&baked, &a.model)
            .map_err(|e| CliError::User(format!("with --set {}: {e}", a.set.join(" --set "))))?;
        // Importers pass the DefaultExperiment tolerance, which overrides solver.rtol: say so
        // where the file's own [experiment] tolerance makes the --set moot.
        let (tol, rtol) = (spec.experiment.tolerance, spec.solver.rtol);
        if a.set.iter().any(|s| s.starts_with("solver.rtol=")) && tol != rtol {
            eprintln!(
                "warning: the model's [experiment] tolerance {tol} is the FMU's default \
                 experiment tolerance, which importers pass and which overrides solver.rtol = \
                 {rtol}; change or remove that tolerance to make the rtol the default"
            );
        }
        (spec, Some(baked))
    };
    // The model's warnings, as `check` gives them; the FMU is still written.
    for w in super::check::warning_lines(&spec) {
        eprintln!("{w}");
    }
    // Refuse what `check` refuses: an FMU whose initialization cannot succeed is no FMU.
    super::check::assembly_report(&spec).map_err(|message| {
        CliError::User(format!(
            "{message} (not exported; `mbsfmu check` shows the same)"
        ))
    })?;
    let library = match &a.library {
        Some(l) => l.clone(),
        None => default_library()?,
    };
    outln!("runtime library: {}", library.display());
    let date = now_utc();
    // Create the output directory, --out-dir or the one `-o` names, with its parents (the
    // packager only said "No such file or directory").
    let out_dir = match &a.output {
        Some(o) => o.parent().unwrap_or(Path::new("")),
        None => a.out_dir.as_path(),
    };
    if !out_dir.as_os_str().is_empty() {
        std::fs::create_dir_all(out_dir).map_err(|e| {
            CliError::User(format!(
                "{}: cannot create the output directory: {e}",
                out_dir.display()
            ))
        })?;
    }
    for (v, extra) in versions.into_iter().zip(extra) {
        let out = match &a.output {
            Some(o) => o.clone(),
            None => a.out_dir.join(format!(
                "{}_fmi{}.fmu",
                model_identifier(&spec.name),
                v.number()
            )),
        };
        let opts = PackageOptions {
            version: v,
            library: library.clone(),
            extra_binaries: extra,
            template_dir: a.template.clone(),
            generation_date_and_time: date.clone(),
            capabilities: Capabilities::RUNTIME,
            strip_debug_info: !a.keep_debug_info,
            model_text: model_text.clone(),
        };
        let packed = write_fmu(&spec, &a.model, &opts, &out).map_err(|e| {
            if e.is_user_error() {
                CliError::User(e.to_string())
            } else {
                CliError::Internal(e.to_string())
            }
        })?;
        let md = &packed.description;
        outln!(
            "wrote {} (FMI {}, {} variables: {} inputs, {} outputs; token {})",
            out.display(),
            v.attr(),
            md.variables.len(),
            spec.inputs.len(),
            spec.outputs.len(),
            md.token
        );
        if model_text.is_some() {
            let fixed = match spec.solver.fixed_step {
                Some(h) => format!(", fixed_step {h}"),
                None => String::new(),
            };
            outln!(
                "  solver baked into resources/model.toml: integrator {}, jacobian {}, rtol {}, atol {}{fixed}",
                spec.solver.method.name(),
                spec.solver.jacobian.name(),
                spec.solver.rtol,
                spec.solver.atol
            );
        }
        let (given, packed_lib) = packed.library_size;
        let library = if given != packed_lib {
            format!(
                "{} without debug information, {} as built",
                megabytes(packed_lib),
                megabytes(given)
            )
        } else {
            megabytes(packed_lib)
        };
        outln!(
            "  FMU size {} ({} bytes); library {library}",
            megabytes(packed.fmu_size),
            packed.fmu_size
        );
    }
    Ok(())
}
