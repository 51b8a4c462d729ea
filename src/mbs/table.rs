//! Two-column CSV tables (`t,value` for motions, `deflection,force` for spring laws) and the
//! natural cubic spline the loader uses to evaluate a table at the start time.
//!
//! Format: one row per line, two comma-separated numbers; blank lines and lines starting with
//! `#` are skipped; the first non-blank line may be a header (any non-numeric first field). The
//! first column must be strictly increasing, and there must be at least two rows.

use std::path::Path;
use thiserror::Error;

/// What is wrong with a table file; `line` is 1-based, 0 for the file as a whole.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("{}{message}", if *line > 0 { format!("line {line}: ") } else { String::new() })]
pub struct TableError {
    pub line: usize,
    pub message: String,
}

/// Read a table file.
pub fn read_table_file(path: &Path) -> Result<(Vec<f64>, Vec<f64>), TableError> {
    parse_table_bytes(&read_table_bytes(path)?)
}

/// A table file's bytes (the loader keeps them: a model resolved again reads no file).
pub fn read_table_bytes(path: &Path) -> Result<Vec<u8>, TableError> {
    std::fs::read(path).map_err(|e| TableError {
        line: 0,
        message: format!("cannot read the table file: {e}"),
    })
}

/// Parse a table file's bytes (UTF-8 text, as [`parse_table`]).
pub fn parse_table_bytes(bytes: &[u8]) -> Result<(Vec<f64>, Vec<f64>), TableError> {
    let text = std::str::from_utf8(bytes).map_err(|_| TableError {
        line: 0,
        message: "cannot read the table file: stream did not contain valid UTF-8".into(),
    })?;
    parse_table(text)
}

/// Parse table text.
pub fn parse_table(text: &str) -> Result<(Vec<f64>, Vec<f64>), TableError> {
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    let mut seen_row = false;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = l.split(',').map(str::trim).collect();
        let first_row = !seen_row;
        seen_row = true;
        if first_row && fields[0].parse::<f64>().is_err() {
            // A header row.
            if fields.len() != 2 {
                return Err(TableError {
                    line,
                    message: format!("the header has {} columns, expected 2", fields.len()),
                });
            }
            continue;
        }
        if fields.len() != 2 {
            return Err(TableError {
                line,
                message: format!("{} columns, expected 2 (`x,value`)", fields.len()),
            });
        }
        let mut row = [0.0; 2];
        for (k, f) in fields.iter().enumerate() {
            row[k] = match f.parse::<f64>() {
                Ok(v) if v.is_finite() => v,
                _ => {
                    return Err(TableError {
                        line,
                        message: format!("column {}: `{f}` is not a finite number", k + 1),
                    })
                }
            };
        }
        if let Some(&last) = xs.last() {
            if row[0] <= last {
                return Err(TableError {
                    line,
                    message: format!(
                        "the first column must be strictly increasing ({} follows {last})",
                        row[0]
                    ),
                });
            }
        }
        xs.push(row[0]);
        ys.push(row[1]);
    }
    if xs.len() < 2 {
        return Err(TableError {
            line: 0,
            message: format!("{} data rows, at least 2 are needed", xs.len()),
        });
    }
    Ok((xs, ys))
}

/// Value of the natural cubic spline through `(xs, ys)` at `x`, constant outside the table.
pub fn spline_eval(xs: &[f64], ys: &[f64], x: f64) -> f64 {
    let n = xs.len();
    if x.is_nan() {
        return f64::NAN;
    }
    if x <= xs[0] {
        return ys[0];
    }
    if x >= xs[n - 1] {
        return ys[n - 1];
    }
    // Second derivatives by the tridiagonal (Thomas) algorithm, zero at both ends.
    let mut m = vec![0.0; n];
    if n > 2 {
        let mut c = vec![0.0; n];
        let mut d = vec![0.0; n];
        for i in 1..n - 1 {
            let h0 = xs[i] - xs[i - 1];
            let h1 = xs[i + 1] - xs[i];
            let a = h0;
            let b = 2.0 * (h0 + h1);
            let r = 6.0 * ((ys[i + 1] - ys[i]) / h1 - (ys[i] - ys[i - 1]) / h0);
            let denom = b - a * c[i - 1];
            c[i] = h1 / denom;
            d[i] = (r - a * d[i - 1]) / denom;
        }
        for i in (1..n - 1).rev() {
            m[i] = d[i] - c[i] * m[i + 1];
        }
    }
    let k = xs.partition_point(|&t| t <= x) - 1;
    let h = xs[k + 1] - xs[k];
    let a = (xs[k + 1] - x) / h;
    let b = (x - xs[k]) / h;
    a * ys[k] + b * ys[k + 1] + ((a * a * a - a) * m[k] + (b * b * b - b) * m[k + 1]) * h * h / 6.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spline_eval_at_nan_is_nan() {
        let (xs, ys) = ([0.0, 1.0, 2.0], [0.0, 1.0, 0.0]);
        assert!(spline_eval(&xs, &ys, f64::NAN).is_nan());
    }

    #[test]
    fn reads_header_comments_and_rows() {
        let (t, v) = parse_table("# stamp profile\nt, z\n0, 0\n\n0.5, 0.01\n1.0,0.0\n").unwrap();
        assert_eq!(t, vec![0.0, 0.5, 1.0]);
        assert_eq!(v, vec![0.0, 0.01, 0.0]);
        let (t, _) = parse_table("0,1\n1e-3,2").unwrap();
        assert_eq!(t, vec![0.0, 1e-3]);
    }

    #[test]
    fn rejects_bad_tables_with_line_numbers() {
        let e = parse_table("t,v\n0,0\n1,abc\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(
            e.message.contains("column 2: `abc` is not a finite number"),
            "{e}"
        );
        let e = parse_table("0,0\n1,1\n1,2\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.message.contains("strictly increasing"), "{e}");
        let e = parse_table("0,0,1\n").unwrap_err();
        assert_eq!((e.line, e.message.contains("3 columns")), (1, true));
        let e = parse_table("t,v\n0,0\n").unwrap_err();
        assert_eq!(e.line, 0);
        assert!(e.message.contains("1 data rows"), "{e}");
        assert!(parse_table("0,nan\n1,1")
            .unwrap_err()
            .message
            .contains("not a finite"));
        assert_eq!(e.to_string(), "1 data rows, at least 2 are needed");
        assert_eq!(
            parse_table("0,x\n").unwrap_err().to_string(),
            "line 1: column 2: `x` is not a finite number"
        );
    }

    #[test]
    fn spline_reproduces_cubic_free_data() {
        // A natural spline through samples of a straight line is the line itself.
        let xs = [0.0, 0.3, 1.0, 2.5];
        let ys: Vec<f64> = xs.iter().map(|x| 2.0 * x - 1.0).collect();
        for x in [0.1, 0.5, 1.7, 2.4] {
            assert!((spline_eval(&xs, &ys, x) - (2.0 * x - 1.0)).abs() < 1e-14);
        }
        // Constant outside, interpolating at the knots.
        assert_eq!(spline_eval(&xs, &ys, -1.0), -1.0);
        assert_eq!(spline_eval(&xs, &ys, 9.0), 4.0);
        assert!((spline_eval(&xs, &ys, 1.0) - 1.0).abs() < 1e-15);
    }

    #[test]
    fn spline_matches_sine_closely() {
        // Natural spline through a dense sampling of sin on [0, pi] (zero curvature at the ends
        // is exact for sin there): interpolation error O(h^4).
        let n = 41;
        let xs: Vec<f64> = (0..n)
            .map(|i| std::f64::consts::PI * i as f64 / (n - 1) as f64)
            .collect();
        let ys: Vec<f64> = xs.iter().map(|x| x.sin()).collect();
        for x in [0.05, 1.0, 2.0, 3.1] {
            assert!((spline_eval(&xs, &ys, x) - x.sin()).abs() < 1e-6);
        }
    }
}
