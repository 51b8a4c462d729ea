//! CSV input tables (`time,u1,u2,...`) and CSV result files.

use super::{CliError, CliResult};
use std::path::{Path, PathBuf};

/// Input signals sampled at increasing times; linear interpolation between samples, constant
/// outside.
#[derive(Debug, Clone, PartialEq)]
pub struct InputTable {
    pub file: PathBuf,
    pub names: Vec<String>,
    pub t: Vec<f64>,
    /// `values[column][row]`.
    pub values: Vec<Vec<f64>>,
}

impl InputTable {
    pub fn parse(text: &str, file: &Path) -> CliResult<InputTable> {
        let err =
            |line: usize, m: String| CliError::User(format!("{}:{line}: {m}", file.display()));
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim()))
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
        let (hline, header) = lines.next().ok_or_else(|| {
            err(
                1,
                "empty input file: expected a header line `time,<input>,...`".into(),
            )
        })?;
        let cols: Vec<String> = header
            .split(',')
            .map(|c| c.trim().trim_matches('"').to_string())
            .collect();
        if !matches!(cols[0].as_str(), "time" | "t") {
            return Err(err(
                hline,
                format!("the first column must be `time`, found {:?}", cols[0]),
            ));
        }
        let names: Vec<String> = cols[1..].to_vec();
        for (i, n) in names.iter().enumerate() {
            if n.is_empty() {
                return Err(err(hline, format!("column {} has an empty name", i + 2)));
            }
            if names[..i].contains(n) {
                return Err(err(hline, format!("column {n:?} appears twice")));
            }
        }
        let mut t = Vec::new();
        let mut values = vec![Vec::new(); names.len()];
        for (ln, line) in lines {
            let cells: Vec<&str> = line.split(',').map(str::trim).collect();
            if cells.len() != cols.len() {
                return Err(err(
                    ln,
                    format!(
                        "{} values, but the header has {} columns",
                        cells.len(),
                        cols.len()
                    ),
                ));
            }
            let mut row = Vec::with_capacity(cells.len());
            for (c, cell) in cells.iter().enumerate() {
                let x: f64 = cell.parse().map_err(|_| {
                    err(
                        ln,
                        format!("column {:?}: {cell:?} is not a number", cols[c]),
                    )
                })?;
                if !x.is_finite() {
                    return Err(err(
                        ln,
                        format!("column {:?}: {cell} is not finite", cols[c]),
                    ));
                }
                row.push(x);
            }
            if let Some(&last) = t.last() {
                if row[0] <= last {
                    return Err(err(
                        ln,
                        format!("time {} does not increase (previous row: {last})", row[0]),
                    ));
                }
            }
            t.push(row[0]);
            for (c, v) in row[1..].iter().enumerate() {
                values[c].push(*v);
            }
        }
        if t.is_empty() {
            return Err(err(hline, "no data rows after the header".into()));
        }
        Ok(InputTable {
            file: file.to_path_buf(),
            names,
            t,
            values,
        })
    }

    pub fn read(file: &Path) -> CliResult<InputTable> {
        let text = std::fs::read_to_string(file)
            .map_err(|e| CliError::User(format!("{}: cannot read: {e}", file.display())))?;
        InputTable::parse(&text, file)
    }

    fn segment(&self, time: f64) -> Option<usize> {
        if time <= self.t[0] || time >= *self.t.last().expect("non-empty") {
            return None;
        }
        Some(self.t.partition_point(|&x| x <= time) - 1)
    }

    /// Value of column `c` at `time`.
    pub fn value(&self, c: usize, time: f64) -> f64 {
        let v = &self.values[c];
        match self.segment(time) {
            None => {
                if time <= self.t[0] {
                    v[0]
                } else {
                    *v.last().expect("non-empty")
                }
            }
            Some(i) => v[i] + (v[i + 1] - v[i]) * (time - self.t[i]) / (self.t[i + 1] - self.t[i]),
        }
    }
}

/// A number for a CSV cell: shortest round-trip text, exponent form for very large/small.
pub fn fmt_cell(x: f64) -> String {
    let a = x.abs();
    if x == 0.0 || (1e-4..1e7).contains(&a) || !x.is_finite() {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

/// Write `header` and rows to `file`.
/// Write the result table to `out`, opened (created) before the run; `file` names it in
/// errors.
pub fn write_csv(
    out: &mut std::fs::File,
    file: &Path,
    header: &[String],
    rows: &[Vec<f64>],
) -> CliResult {
    use std::io::Write as _;
    let mut s = header.join(",");
    s.push('\n');
    for r in rows {
        s.push_str(&r.iter().map(|&x| fmt_cell(x)).collect::<Vec<_>>().join(","));
        s.push('\n');
    }
    out.write_all(s.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| CliError::User(format!("{}: cannot write: {e}", file.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_interpolates_and_reports_errors() {
        let p = Path::new("in.csv");
        let t = InputTable::parse("# comment\ntime, F ,s\n0,0,1\n1,10,1\n3,10,-1\n", p).unwrap();
        assert_eq!(t.names, vec!["F", "s"]);
        assert_eq!(t.value(0, 0.25), 2.5);
        assert_eq!(t.value(0, -1.0), 0.0);
        assert_eq!(t.value(1, 2.0), 0.0);
        assert_eq!(t.value(1, 9.0), -1.0);
        let e = |s: &str| match InputTable::parse(s, p) {
            Err(CliError::User(m)) => m,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            e("time,F\n0,1\n0,2\n"),
            "in.csv:3: time 0 does not increase (previous row: 0)"
        );
        assert_eq!(
            e("time,F\n0,x\n"),
            "in.csv:2: column \"F\": \"x\" is not a number"
        );
        assert_eq!(
            e("x,F\n0,1\n"),
            "in.csv:1: the first column must be `time`, found \"x\""
        );
        assert_eq!(
            e("time,F\n0,1,2\n"),
            "in.csv:2: 3 values, but the header has 2 columns"
        );
        assert_eq!(
            e("time,F,F\n0,1,2\n"),
            "in.csv:1: column \"F\" appears twice"
        );
        assert_eq!(e("time,F\n"), "in.csv:1: no data rows after the header");
    }

    #[test]
    fn cells_round_trip() {
        for x in [0.0, 1.0, -2.5, 1e-9, 123456789.0, 0.1 + 0.2, -3e12] {
            assert_eq!(fmt_cell(x).parse::<f64>().unwrap(), x);
        }
        assert_eq!(fmt_cell(1e-9), "1e-9");
        assert_eq!(fmt_cell(0.5), "0.5");
    }
}
