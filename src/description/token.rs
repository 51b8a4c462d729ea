//! The model token: the FMI 2 GUID / FMI 3 instantiationToken of an FMU, a hash of the packed
//! model (the model file and every file it references). The packager writes it into
//! `modelDescription.xml`; the runtime recomputes it from `resources/` at instantiation and
//! refuses a mismatch (a model description that does not belong to the packed model).

use crate::mbs::ModelSpec;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Token of the packed model: SHA-256 over the files' contents in the given order (the model
/// file first, then the referenced files in `ModelSpec::source_files` order), each prefixed by
/// its length so that moving bytes between files changes the hash. File names are not hashed:
/// the packager may place files differently in `resources/` than they were on disk.
///
/// Format: `{xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx}`, the first 128 bits of the digest in
/// UUID layout (FMI 2 tools expect a GUID-shaped string).
pub fn model_token<'a, I>(files: I) -> String
where
    I: IntoIterator<Item = &'a [u8]>,
{
    let mut h = Sha256::new();
    h.update(b"mbsfmu-model-token-v1");
    for bytes in files {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    let d = h.finalize();
    let hex: String = d[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{{{}-{}-{}-{}-{}}}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// [`model_token`] of files on disk, in the given order.
pub fn model_token_of_files(paths: &[PathBuf]) -> Result<String, (PathBuf, std::io::Error)> {
    let mut contents = Vec::with_capacity(paths.len());
    for p in paths {
        contents.push(std::fs::read(p).map_err(|e| (p.clone(), e))?);
    }
    Ok(model_token(contents.iter().map(|c| c.as_slice())))
}

/// Whether `s` has the token format (used to give a clearer message for garbage input).
pub fn looks_like_token(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 38
        && b[0] == b'{'
        && b[37] == b'}'
        && s[1..37].char_indices().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

/// [`model_token`] of the model file's bytes, already read, then the files `others` on disk
/// (a copy of `model_file` among them skipped, as in [`model_token_of`]).
pub fn model_token_of_read(
    model_file: &Path,
    model_bytes: &[u8],
    others: &[PathBuf],
) -> Result<String, (PathBuf, std::io::Error)> {
    let mut contents = Vec::with_capacity(others.len());
    for p in others.iter().filter(|p| p.as_path() != model_file) {
        contents.push(std::fs::read(p).map_err(|e| (p.clone(), e))?);
    }
    Ok(model_token(
        std::iter::once(model_bytes).chain(contents.iter().map(|c| c.as_slice())),
    ))
}

/// [`model_token`] of the model file's bytes and the contents of the files it references as
/// the model holds them ([`ModelSpec::source_contents`]: what the loader read, or what
/// [`ModelSpec::read_source_contents`] read), in the order of [`model_token_of_read`]: the
/// token of exactly the bytes the model is (and will be re-)resolved from, with no file read
/// again. `Err` names a referenced file whose contents the model lacks.
pub fn model_token_of_spec(model_bytes: &[u8], spec: &ModelSpec) -> Result<String, PathBuf> {
    let model_file = spec.source_files.first();
    let mut contents = Vec::with_capacity(spec.source_files.len());
    for p in spec.source_files.iter().filter(|p| Some(*p) != model_file) {
        contents.push(spec.source_contents.get(p).ok_or_else(|| p.clone())?);
    }
    Ok(model_token(std::iter::once(model_bytes).chain(contents)))
}

/// Convenience for callers holding paths: the model file first, then `others`.
pub fn model_token_of(
    model_file: &Path,
    others: &[PathBuf],
) -> Result<String, (PathBuf, std::io::Error)> {
    let mut all = vec![model_file.to_path_buf()];
    all.extend(others.iter().filter(|p| p.as_path() != model_file).cloned());
    model_token_of_files(&all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_has_guid_shape_and_depends_on_every_byte_and_boundary() {
        let a = model_token([b"abc".as_slice(), b"def".as_slice()]);
        assert!(looks_like_token(&a), "{a}");
        // Independent check of the digest layout against sha2 directly.
        let mut h = Sha256::new();
        h.update(b"mbsfmu-model-token-v1");
        h.update(3u64.to_le_bytes());
        h.update(b"abc");
        h.update(3u64.to_le_bytes());
        h.update(b"def");
        let d = h.finalize();
        assert_eq!(
            &a[1..9],
            format!("{:02x}{:02x}{:02x}{:02x}", d[0], d[1], d[2], d[3])
        );
        assert_ne!(a, model_token([b"abd".as_slice(), b"def".as_slice()]));
        assert_ne!(a, model_token([b"abcd".as_slice(), b"ef".as_slice()]));
        assert_ne!(a, model_token([b"abcdef".as_slice()]));
        assert_eq!(a, model_token([b"abc".as_slice(), b"def".as_slice()]));
        assert!(!looks_like_token("{not-a-token}"));
    }
}
