//! Generated sections of `docs/benchmarks.md`. Each benchmark owns the text between
//! `<!-- BEGIN GENERATED name -->` and `<!-- END GENERATED name -->` and rewrites only that,
//! so the hand-written reading around the tables survives a rerun and benchmarks can run one
//! at a time or all together (`bash tools/bench.sh`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `docs/benchmarks.md` of this checkout.
pub fn benchmarks_md() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/benchmarks.md")
}

/// Replace the generated section `name` of `path` by `body` (a trailing newline is added).
pub fn replace_section(path: &Path, name: &str, body: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let begin = format!("<!-- BEGIN GENERATED {name} -->");
    let end = format!("<!-- END GENERATED {name} -->");
    let (Some(b), Some(e)) = (text.find(&begin), text.find(&end)) else {
        return Err(format!(
            "{}: no markers `{begin}` … `{end}`; add them where the section belongs",
            path.display()
        ));
    };
    if e < b {
        return Err(format!(
            "{}: `{end}` comes before `{begin}`",
            path.display()
        ));
    }
    let mut out = String::with_capacity(text.len() + body.len());
    out.push_str(&text[..b + begin.len()]);
    out.push('\n');
    out.push_str(body.trim_end());
    out.push('\n');
    out.push_str(&text[e..]);
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))
}

/// Median, min and max of repeated measurements.
pub fn median_min_max(xs: &[f64]) -> (f64, f64, f64) {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    assert!(n > 0, "median of no measurements");
    let med = if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    };
    (med, v[0], v[n - 1])
}

/// This thread's CPU time in seconds (other load on the machine does not count).
pub fn thread_cpu_time() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
