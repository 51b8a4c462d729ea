//! Resource locations as the two standards give them.

use std::path::PathBuf;

/// FMI 2 `fmuResourceLocation`: a `file` URI, `file:///abs/path`, `file:/abs/path` or
/// `file://localhost/abs/path`, percent-encoded (RFC 3986); a trailing slash is optional.
pub(crate) fn fmi2_resource_dir(uri: &str) -> Result<PathBuf, String> {
    let rest = uri
        .strip_prefix("file:")
        .or_else(|| uri.strip_prefix("FILE:"))
        .ok_or_else(|| format!("fmuResourceLocation `{uri}` is not a file: URI"))?;
    let path = if let Some(after) = rest.strip_prefix("//") {
        // Authority: empty or localhost.
        let (auth, path) = after.split_at(after.find('/').unwrap_or(after.len()));
        if !(auth.is_empty() || auth.eq_ignore_ascii_case("localhost")) {
            return Err(format!(
                "fmuResourceLocation `{uri}` names a remote host `{auth}`"
            ));
        }
        path
    } else {
        rest
    };
    if !path.starts_with('/') {
        return Err(format!(
            "fmuResourceLocation `{uri}` is not an absolute path"
        ));
    }
    let decoded = percent_decode(path)
        .ok_or_else(|| format!("fmuResourceLocation `{uri}` has an invalid percent-encoding"))?;
    Ok(PathBuf::from(decoded))
}

/// FMI 3 `resourcePath`: a plain absolute path (normally ending in a separator).
pub(crate) fn fmi3_resource_dir(path: &str) -> Result<PathBuf, String> {
    if path.is_empty() {
        return Err("resourcePath is empty".into());
    }
    // Tolerate importers that pass an FMI 2 style URI.
    if path.starts_with("file:") {
        return fmi2_resource_dir(path);
    }
    Ok(PathBuf::from(path))
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fmi2_uri_forms() {
        for uri in [
            "file:///tmp/a%20b/resources/",
            "file:/tmp/a%20b/resources/",
            "file://localhost/tmp/a%20b/resources/",
        ] {
            assert_eq!(
                fmi2_resource_dir(uri).unwrap(),
                PathBuf::from("/tmp/a b/resources/"),
                "{uri}"
            );
        }
        assert!(fmi2_resource_dir("http://x/y").is_err());
        assert!(fmi2_resource_dir("file://server/share").is_err());
        assert!(fmi2_resource_dir("file:relative/x").is_err());
        assert!(fmi2_resource_dir("file:///bad%zz").is_err());
        assert!(fmi2_resource_dir("file:///trunc%2").is_err());
        assert_eq!(
            fmi2_resource_dir("file:///%C3%A4").unwrap(),
            PathBuf::from("/ä")
        );
        assert_eq!(
            fmi3_resource_dir("/x/resources/").unwrap(),
            PathBuf::from("/x/resources/")
        );
    }
}
