//! The resolved model in binary form: `resources/resolved_model.bin`, written by the packager
//! next to `model.toml` so that an FMU instantiation reads the model instead of parsing and
//! resolving its TOML (about two thirds of a cold `fmi2Instantiate` of a small model).
//!
//! The file is a cache, never the truth: it is used only when it was written by a build of
//! the same sources as the running library ([`BUILD`]) and for the very files in `resources/`
//! (the model token over `model.toml` and the files it references, the FMU's own token). Any
//! other file (another build, an edited `model.toml`, a damaged file) is ignored and the
//! model is read from `model.toml` as before, with the same result.
//!
//! Paths in the model (the model file and the files it references) are stored relative to
//! the model's directory and the model file as `model.toml`, so the file does not depend on
//! where the FMU was built or is unpacked.

use super::ModelSpec;
use std::path::Path;

/// Name of the file in `resources/`.
pub const FILE_NAME: &str = "resolved_model.bin";

const MAGIC: &[u8; 8] = b"MBSFMUrm";

/// Fingerprint of the sources this library was compiled from (tools/build.rs): the binary
/// layout of [`ModelSpec`] is that of one build, so a file from any other build is ignored.
pub const BUILD: &str = env!("MBSFMU_SOURCE_HASH");

/// The file's bytes for `spec`, loaded from `model_file`, whose packed files have `token`.
pub fn encode(spec: &ModelSpec, model_file: &Path, token: &str) -> Result<Vec<u8>, String> {
    let mut relative = spec.clone();
    rebase(&mut relative, model_file, Path::new("model.toml"));
    let mut body = Vec::with_capacity(4096);
    for s in [BUILD, token] {
        body.extend_from_slice(&(s.len() as u32).to_le_bytes());
        body.extend_from_slice(s.as_bytes());
    }
    postcard::to_io(&relative, &mut body).map_err(|e| format!("cannot encode the model: {e}"))?;
    let mut out = Vec::with_capacity(body.len() + 12);
    out.extend_from_slice(MAGIC);
    // A damaged file could still decode into a (wrong) model: the checksum refuses it.
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// The model in `bytes`, with its paths as loaded from `model_file`, and the token the file
/// was written for; `None` for a file of another build or a damaged one (a CRC-32 over all
/// but the magic). The caller checks the token against the files (it needs the model's file
/// list to compute it).
pub fn decode(bytes: &[u8], model_file: &Path) -> Option<(ModelSpec, String)> {
    let rest = bytes.strip_prefix(MAGIC)?;
    let (crc, body) = rest.split_first_chunk::<4>()?;
    if crc32fast::hash(body) != u32::from_le_bytes(*crc) {
        return None;
    }
    let (build, rest) = take_str(body)?;
    if build != BUILD {
        return None;
    }
    let (token, payload) = take_str(rest)?;
    let mut spec: ModelSpec = postcard::from_bytes(payload).ok()?;
    rebase(&mut spec, Path::new("model.toml"), model_file);
    Some((spec, token.to_string()))
}

fn take_str(b: &[u8]) -> Option<(&str, &[u8])> {
    let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
    let s = std::str::from_utf8(b.get(4..4 + n)?).ok()?;
    Some((s, &b[4 + n..]))
}

/// Moves the model's paths from `from` (the model file it was loaded from) to `to`: the
/// loader records the model file itself and the referenced files as its directory joined
/// with the relative paths written in the model (tables keep those relative paths), and the
/// warnings start with the model file's path.
fn rebase(spec: &mut ModelSpec, from: &Path, to: &Path) {
    let from_dir = from.parent().unwrap_or(Path::new(""));
    let to_dir = to.parent().unwrap_or(Path::new(""));
    for p in &mut spec.source_files {
        if p == from {
            *p = to.to_path_buf();
        } else if let Ok(rest) = p.strip_prefix(from_dir) {
            *p = to_dir.join(rest);
        }
    }
    let (a, b) = (format!("{}:", from.display()), format!("{}:", to.display()));
    for w in &mut spec.warnings {
        if let Some(rest) = w.strip_prefix(&a) {
            *w = format!("{b}{rest}");
        }
    }
}
