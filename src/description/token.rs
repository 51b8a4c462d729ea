//! The FMI 2 `guid` / FMI 3 `instantiationToken`: a hash of the packed model (everything under
//! `resources/`). The packager writes it into `modelDescription.xml`; the runtime recomputes it
//! from the unpacked `resources/` directory with [`resources_token`] and rejects an
//! instantiation whose token differs (a stale or edited FMU).

use sha2::{Digest, Sha256};
use std::path::Path;

/// GUID-formatted token (`{xxxxxxxx-xxxx-8xxx-yxxx-xxxxxxxxxxxx}`, UUID version 8 "custom")
/// from SHA-256 over the files sorted by relative path. `files` are `(path relative to
/// resources/, with '/' separators, content)`. Paths and contents are length-prefixed so
/// moving bytes between a name and a content changes the token.
pub fn model_token(files: &[(String, Vec<u8>)]) -> String {
    let mut sorted: Vec<&(String, Vec<u8>)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut h = Sha256::new();
    h.update(b"mbsfmu-token-v1\0");
    for (path, content) in sorted {
        h.update((path.len() as u64).to_le_bytes());
        h.update(path.as_bytes());
        h.update((content.len() as u64).to_le_bytes());
        h.update(content);
    }
    let d = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    b[6] = (b[6] & 0x0f) | 0x80; // version 8
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{{{}-{}-{}-{}-{}}}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Every regular file under `dir` (recursively) as `(relative path with '/', content)`,
/// sorted by path. What the packager puts in `resources/` is exactly what this returns after
/// unpacking.
pub fn read_tree(dir: &Path) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) -> std::io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let path = entry.path();
            let ft = entry.file_type()?;
            if ft.is_dir() {
                walk(root, &path, out)?;
            } else if ft.is_file() || (ft.is_symlink() && path.is_file()) {
                let rel = path.strip_prefix(root).expect("walk stays under its root");
                let rel: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                out.push((rel.join("/"), std::fs::read(&path)?));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The token of an unpacked `resources/` directory (what the runtime compares at instantiation).
pub fn resources_token(dir: &Path) -> std::io::Result<String> {
    Ok(model_token(&read_tree(dir)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(p: &str, c: &str) -> (String, Vec<u8>) {
        (p.to_string(), c.as_bytes().to_vec())
    }

    #[test]
    fn token_is_guid_shaped_and_order_independent() {
        let a = model_token(&[f("model.toml", "x = 1"), f("t/road.csv", "0,1")]);
        let b = model_token(&[f("t/road.csv", "0,1"), f("model.toml", "x = 1")]);
        assert_eq!(a, b);
        assert_eq!(a.len(), 38);
        let parts: Vec<&str> = a
            .trim_matches(|c| c == '{' || c == '}')
            .split('-')
            .collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            vec![8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('8'));
    }

    #[test]
    fn any_change_changes_the_token() {
        let base = model_token(&[f("model.toml", "x = 1")]);
        assert_ne!(base, model_token(&[f("model.toml", "x = 2")]));
        assert_ne!(base, model_token(&[f("model2.toml", "x = 1")]));
        assert_ne!(
            base,
            model_token(&[f("model.toml", "x = 1"), f("a.csv", "")])
        );
        // Moving bytes between name and content must not collide.
        assert_ne!(model_token(&[f("ab", "c")]), model_token(&[f("a", "bc")]));
    }

    #[test]
    fn directory_token_matches_file_list() {
        let dir = std::env::temp_dir().join(format!("mbsfmu-token-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("tables")).unwrap();
        std::fs::write(dir.join("model.toml"), "x = 1").unwrap();
        std::fs::write(dir.join("tables/road.csv"), "0,1").unwrap();
        let t = resources_token(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            t,
            model_token(&[f("model.toml", "x = 1"), f("tables/road.csv", "0,1")])
        );
    }
}
