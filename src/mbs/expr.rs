//! A small expression evaluator for numeric fields of model files: `"23*pi/12"`,
//! `"sqrt(2)/2"`, `"2 + 1.5*cos(23*pi/12)"`. Evaluated once at load time; identifiers other than
//! the built-in constants are looked up by the caller (parameter defaults).
//!
//! Grammar (usual precedence, `^` right-associative and binding tighter than unary minus, so
//! `-2^2 = -4`):
//! ```text
//! expr    = term (('+' | '-') term)*
//! term    = unary (('*' | '/') unary)*
//! unary   = ('+' | '-') unary | power
//! power   = primary ('^' unary)?
//! primary = number | name | name '(' expr (',' expr)* ')' | '(' expr ')'
//! ```

use thiserror::Error;

/// Where (byte offset into the expression) and what.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("{message}")]
pub struct ExprError {
    pub offset: usize,
    pub message: String,
}

/// The functions an expression may call, with their number of arguments.
pub const FUNCTIONS: [(&str, usize); 12] = [
    ("sqrt", 1),
    ("sin", 1),
    ("cos", 1),
    ("tan", 1),
    ("asin", 1),
    ("acos", 1),
    ("atan", 1),
    ("atan2", 2),
    ("exp", 1),
    ("ln", 1),
    ("abs", 1),
    ("deg", 1),
];

/// Evaluate `text`; `lookup` resolves names that are not built in (`pi`).
pub fn eval(text: &str, lookup: &dyn Fn(&str) -> Option<f64>) -> Result<f64, ExprError> {
    let mut p = Parser {
        s: text.as_bytes(),
        pos: 0,
        depth: 0,
        lookup,
    };
    p.skip_ws();
    if p.pos == p.s.len() {
        return Err(ExprError {
            offset: 0,
            message: "empty expression".into(),
        });
    }
    let v = p.expr()?;
    p.skip_ws();
    if p.pos != p.s.len() {
        return Err(p.err(format!("unexpected `{}`", p.rest_token())));
    }
    if !v.is_finite() {
        return Err(ExprError {
            offset: 0,
            message: format!("expression evaluates to {v} (not a finite number)"),
        });
    }
    Ok(v)
}

/// Every identifier in `text` (to record which parameters an expression uses).
pub fn identifiers(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphabetic() || b[i] == b'_' {
            // A name, unless it is the exponent of a number like `1e5`.
            let prev_digit = i > 0 && (b[i - 1].is_ascii_digit() || b[i - 1] == b'.');
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            if !prev_digit {
                out.push(text[start..i].to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Deepest nesting of parentheses, signs and powers: the parser recurses once per level, and
/// a model file must not overflow the stack of the importer's thread (1 MiB hosts exist).
pub const MAX_DEPTH: usize = 100;

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    /// Current nesting (see [`MAX_DEPTH`]).
    depth: usize,
    lookup: &'a dyn Fn(&str) -> Option<f64>,
}

impl Parser<'_> {
    fn err(&self, message: String) -> ExprError {
        ExprError {
            offset: self.pos,
            message,
        }
    }
    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.pos).copied()
    }
    fn rest_token(&self) -> String {
        String::from_utf8_lossy(&self.s[self.pos..])
            .chars()
            .take(12)
            .collect()
    }
    fn expr(&mut self) -> Result<f64, ExprError> {
        let mut v = self.term()?;
        while let Some(c @ (b'+' | b'-')) = self.peek() {
            self.pos += 1;
            let r = self.term()?;
            v = if c == b'+' { v + r } else { v - r };
        }
        Ok(v)
    }
    fn term(&mut self) -> Result<f64, ExprError> {
        let mut v = self.unary()?;
        while let Some(c @ (b'*' | b'/')) = self.peek() {
            self.pos += 1;
            let at = self.pos;
            let r = self.unary()?;
            if c == b'*' {
                v *= r;
            } else {
                if r == 0.0 {
                    return Err(ExprError {
                        offset: at,
                        message: "division by zero".into(),
                    });
                }
                v /= r;
            }
        }
        Ok(v)
    }
    /// Every level of nesting passes here (parentheses, function arguments, signs, powers).
    fn unary(&mut self) -> Result<f64, ExprError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.err(format!(
                "expression nested deeper than {MAX_DEPTH} levels (parentheses, signs or powers)"
            )));
        }
        self.depth += 1;
        let r = self.unary_inner();
        self.depth -= 1;
        r
    }
    fn unary_inner(&mut self) -> Result<f64, ExprError> {
        match self.peek() {
            Some(b'-') => {
                self.pos += 1;
                Ok(-self.unary()?)
            }
            Some(b'+') => {
                self.pos += 1;
                self.unary()
            }
            _ => self.power(),
        }
    }
    fn power(&mut self) -> Result<f64, ExprError> {
        let base = self.primary()?;
        if self.peek() == Some(b'^') {
            self.pos += 1;
            let e = self.unary()?;
            return Ok(base.powf(e));
        }
        Ok(base)
    }
    fn primary(&mut self) -> Result<f64, ExprError> {
        match self.peek() {
            None => {
                Err(self.err("expression ends where a number, name or `(` was expected".into()))
            }
            Some(b'(') => {
                self.pos += 1;
                let v = self.expr()?;
                if self.peek() != Some(b')') {
                    return Err(self.err("missing `)`".into()));
                }
                self.pos += 1;
                Ok(v)
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => self.number(),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => self.name(),
            Some(_) => Err(self.err(format!("unexpected `{}`", self.rest_token()))),
        }
    }
    fn number(&mut self) -> Result<f64, ExprError> {
        let start = self.pos;
        let s = self.s;
        let mut i = self.pos;
        while i < s.len() && (s[i].is_ascii_digit() || s[i] == b'.') {
            i += 1;
        }
        if i < s.len() && (s[i] == b'e' || s[i] == b'E') {
            let mut j = i + 1;
            if j < s.len() && (s[j] == b'+' || s[j] == b'-') {
                j += 1;
            }
            if j < s.len() && s[j].is_ascii_digit() {
                while j < s.len() && s[j].is_ascii_digit() {
                    j += 1;
                }
                i = j;
            }
        }
        let text = std::str::from_utf8(&s[start..i]).unwrap_or("");
        self.pos = i;
        text.parse::<f64>().map_err(|_| ExprError {
            offset: start,
            message: format!("`{text}` is not a number"),
        })
    }
    fn name(&mut self) -> Result<f64, ExprError> {
        let start = self.pos;
        while self.pos < self.s.len()
            && (self.s[self.pos].is_ascii_alphanumeric() || self.s[self.pos] == b'_')
        {
            self.pos += 1;
        }
        let name = std::str::from_utf8(&self.s[start..self.pos])
            .unwrap_or("")
            .to_string();
        if self.peek() == Some(b'(') {
            let Some(&(_, nargs)) = FUNCTIONS.iter().find(|(f, _)| *f == name) else {
                let known: Vec<&str> = FUNCTIONS.iter().map(|(f, _)| *f).collect();
                return Err(ExprError {
                    offset: start,
                    message: format!("unknown function `{name}` (known: {})", known.join(", ")),
                });
            };
            self.pos += 1;
            let mut args = vec![self.expr()?];
            while self.peek() == Some(b',') {
                self.pos += 1;
                args.push(self.expr()?);
            }
            if self.peek() != Some(b')') {
                return Err(self.err(format!("missing `)` after the arguments of `{name}`")));
            }
            self.pos += 1;
            if args.len() != nargs {
                return Err(ExprError {
                    offset: start,
                    message: format!("`{name}` takes {nargs} argument(s), got {}", args.len()),
                });
            }
            let a = args[0];
            let v = match name.as_str() {
                "sqrt" => a.sqrt(),
                "sin" => a.sin(),
                "cos" => a.cos(),
                "tan" => a.tan(),
                "asin" => a.asin(),
                "acos" => a.acos(),
                "atan" => a.atan(),
                "atan2" => a.atan2(args[1]),
                "exp" => a.exp(),
                "ln" => a.ln(),
                "abs" => a.abs(),
                "deg" => a.to_radians(),
                _ => unreachable!("function table and match agree"),
            };
            if !v.is_finite() {
                return Err(ExprError {
                    offset: start,
                    message: format!("`{name}({a})` is not a finite number"),
                });
            }
            return Ok(v);
        }
        if name == "pi" {
            return Ok(std::f64::consts::PI);
        }
        (self.lookup)(&name).ok_or_else(|| ExprError {
            offset: start,
            message: format!("unknown name `{name}` (not a parameter)"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::PI;

    fn ev(s: &str) -> Result<f64, ExprError> {
        eval(s, &|n| match n {
            "L" => Some(2.0),
            "k_1" => Some(400.0),
            _ => None,
        })
    }

    #[test]
    fn arithmetic_and_precedence() {
        assert_eq!(ev("1 + 2*3").unwrap(), 7.0);
        assert_eq!(ev("(1 + 2)*3").unwrap(), 9.0);
        assert_eq!(ev("2^3^2").unwrap(), 512.0); // right-associative
        assert_eq!(ev("-2^2").unwrap(), -4.0);
        assert_eq!(ev("2^-1").unwrap(), 0.5);
        assert_eq!(ev("8/4/2").unwrap(), 1.0); // left-associative
        assert_eq!(ev("1 - 2 - 3").unwrap(), -4.0);
        assert_eq!(ev("1.5e3 + 2E-1").unwrap(), 1500.2);
        assert_eq!(ev(".5").unwrap(), 0.5);
        assert_eq!(ev("--1").unwrap(), 1.0);
    }

    #[test]
    fn constants_functions_and_names() {
        assert_eq!(ev("23*pi/12").unwrap(), 23.0 * PI / 12.0);
        assert_eq!(ev("sqrt(2)/2").unwrap(), 2f64.sqrt() / 2.0);
        assert_eq!(
            ev("2 + 1.5*cos(23*pi/12)").unwrap(),
            2.0 + 1.5 * (23.0 * PI / 12.0).cos()
        );
        assert_eq!(ev("atan2(1, 1)").unwrap(), PI / 4.0);
        assert!((ev("exp(ln(3))").unwrap() - 3.0).abs() < 1e-15);
        assert_eq!(
            ev("abs(-3) + tan(0) + sin(0) + asin(0) + acos(1) + atan(0)").unwrap(),
            3.0
        );
        assert_eq!(ev("deg(180)").unwrap(), PI);
        assert_eq!(ev("L^2*k_1/12").unwrap(), 4.0 * 400.0 / 12.0);
    }

    #[test]
    fn errors_say_where_and_what() {
        let e = ev("1 + ").unwrap_err();
        assert!(e.message.contains("expression ends"), "{e}");
        let e = ev("2*foo").unwrap_err();
        assert_eq!(e.offset, 2);
        assert!(e.message.contains("unknown name `foo`"), "{e}");
        let e = ev("sqr(2)").unwrap_err();
        assert!(e.message.contains("unknown function `sqr`"), "{e}");
        let e = ev("(1 + 2").unwrap_err();
        assert!(e.message.contains("missing `)`"), "{e}");
        let e = ev("1 / 0").unwrap_err();
        assert_eq!(e.message, "division by zero");
        assert!(ev("sqrt(-1)")
            .unwrap_err()
            .message
            .contains("not a finite number"));
        assert!(ev("atan2(1)")
            .unwrap_err()
            .message
            .contains("takes 2 argument(s), got 1"));
        let e = ev("1 2").unwrap_err();
        assert_eq!(e.offset, 2);
        assert!(e.message.contains("unexpected `2`"), "{e}");
        assert!(ev("").unwrap_err().message.contains("empty"));
        assert!(ev("1 $ 2")
            .unwrap_err()
            .message
            .contains("unexpected `$ 2`"));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        // On a 256 KiB thread: 100 levels fit, 1e5 levels are refused before recursing.
        let r = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let ok = format!("{}1{}", "(".repeat(99), ")".repeat(99));
                assert_eq!(ev(&ok), Ok(1.0));
                for deep in [
                    format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000)),
                    "-".repeat(100_000) + "1",
                    "2^".repeat(100_000) + "1",
                    "sqrt(".repeat(100_000) + "1",
                ] {
                    let e = ev(&deep).unwrap_err();
                    assert!(e.message.contains("deeper than 100 levels"), "{e:?}");
                }
            })
            .unwrap()
            .join();
        assert!(r.is_ok());
    }

    #[test]
    fn identifiers_skip_exponents() {
        assert_eq!(identifiers("2e5*k + sqrt(L)"), vec!["k", "sqrt", "L"]);
    }
}
