//! Unit strings (Modelica/FMI style: `N.m`, `m/s2`, `N.s/m`, `1/s`) to SI base-unit exponents
//! for `UnitDefinitions`.

/// Exponents of the SI base units (plus rad, which FMI lists separately) and the factor to SI:
/// `value_SI = factor * value + offset`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BaseUnit {
    pub kg: i32,
    pub m: i32,
    pub s: i32,
    pub a: i32,
    pub k: i32,
    pub mol: i32,
    pub cd: i32,
    pub rad: i32,
    pub factor: f64,
    pub offset: f64,
}

impl BaseUnit {
    pub const ONE: BaseUnit = BaseUnit {
        kg: 0,
        m: 0,
        s: 0,
        a: 0,
        k: 0,
        mol: 0,
        cd: 0,
        rad: 0,
        factor: 1.0,
        offset: 0.0,
    };

    const fn e(kg: i32, m: i32, s: i32, a: i32, k: i32, rad: i32, factor: f64) -> BaseUnit {
        BaseUnit {
            kg,
            m,
            s,
            a,
            k,
            mol: 0,
            cd: 0,
            rad,
            factor,
            offset: 0.0,
        }
    }

    fn pow(self, p: i32) -> BaseUnit {
        BaseUnit {
            kg: self.kg * p,
            m: self.m * p,
            s: self.s * p,
            a: self.a * p,
            k: self.k * p,
            mol: self.mol * p,
            cd: self.cd * p,
            rad: self.rad * p,
            factor: self.factor.powi(p),
            offset: 0.0,
        }
    }

    fn mul(self, o: BaseUnit) -> BaseUnit {
        BaseUnit {
            kg: self.kg + o.kg,
            m: self.m + o.m,
            s: self.s + o.s,
            a: self.a + o.a,
            k: self.k + o.k,
            mol: self.mol + o.mol,
            cd: self.cd + o.cd,
            rad: self.rad + o.rad,
            factor: self.factor * o.factor,
            offset: 0.0,
        }
    }

    /// Non-zero exponents as `(FMI attribute name, exponent)`.
    pub fn exponents(&self) -> Vec<(&'static str, i32)> {
        [
            ("kg", self.kg),
            ("m", self.m),
            ("s", self.s),
            ("A", self.a),
            ("K", self.k),
            ("mol", self.mol),
            ("cd", self.cd),
            ("rad", self.rad),
        ]
        .into_iter()
        .filter(|(_, e)| *e != 0)
        .collect()
    }

    /// The same SI base-unit exponents (rad counted as a base unit, as FMI does).
    pub fn same_dimension(&self, o: &BaseUnit) -> bool {
        self.exponents() == o.exponents()
    }

    /// The SI unit of this dimension, in the model file's notation: a named one where the
    /// models use it (`N`, `N.m/rad`, `m/s2`), otherwise base units (`kg.m-1`; `1`).
    pub fn si_unit(&self) -> String {
        const NAMED: &[&str] = &[
            "kg",
            "m",
            "s",
            "rad",
            "N",
            "N.m",
            "N/m",
            "N.s/m",
            "N.m/rad",
            "N.m.s/rad",
            "m/s",
            "m/s2",
            "rad/s",
            "rad/s2",
            "kg.m2",
            "Pa",
            "W",
            "Hz",
        ];
        if let Some(n) = NAMED
            .iter()
            .find(|n| parse_unit(n).is_some_and(|u| u.same_dimension(self)))
        {
            return n.to_string();
        }
        let e = self.exponents();
        if e.is_empty() {
            return "1".into();
        }
        e.iter()
            .map(|(n, p)| {
                if *p == 1 {
                    n.to_string()
                } else {
                    format!("{n}{p}")
                }
            })
            .collect::<Vec<_>>()
            .join(".")
    }

    /// Factor 1 and no offset: a value in this unit is the value in SI units.
    pub fn is_si(&self) -> bool {
        (self.factor - 1.0).abs() <= 1e-9 && self.offset == 0.0
    }

    /// Set an exponent from its FMI attribute name; false if the name is not an exponent.
    pub fn set_exponent(&mut self, name: &str, e: i32) -> bool {
        match name {
            "kg" => self.kg = e,
            "m" => self.m = e,
            "s" => self.s = e,
            "A" => self.a = e,
            "K" => self.k = e,
            "mol" => self.mol = e,
            "cd" => self.cd = e,
            "rad" => self.rad = e,
            _ => return false,
        }
        true
    }
}

fn symbol(sym: &str) -> Option<BaseUnit> {
    use std::f64::consts::PI;
    Some(match sym {
        "1" => BaseUnit::ONE,
        "kg" => BaseUnit::e(1, 0, 0, 0, 0, 0, 1.0),
        "g" => BaseUnit::e(1, 0, 0, 0, 0, 0, 1e-3),
        "t" => BaseUnit::e(1, 0, 0, 0, 0, 0, 1e3),
        "m" => BaseUnit::e(0, 1, 0, 0, 0, 0, 1.0),
        "mm" => BaseUnit::e(0, 1, 0, 0, 0, 0, 1e-3),
        "cm" => BaseUnit::e(0, 1, 0, 0, 0, 0, 1e-2),
        "km" => BaseUnit::e(0, 1, 0, 0, 0, 0, 1e3),
        "s" => BaseUnit::e(0, 0, 1, 0, 0, 0, 1.0),
        "ms" => BaseUnit::e(0, 0, 1, 0, 0, 0, 1e-3),
        "min" => BaseUnit::e(0, 0, 1, 0, 0, 0, 60.0),
        "h" => BaseUnit::e(0, 0, 1, 0, 0, 0, 3600.0),
        "A" => BaseUnit::e(0, 0, 0, 1, 0, 0, 1.0),
        "K" => BaseUnit::e(0, 0, 0, 0, 1, 0, 1.0),
        "mol" => BaseUnit {
            mol: 1,
            ..BaseUnit::ONE
        },
        "cd" => BaseUnit {
            cd: 1,
            ..BaseUnit::ONE
        },
        "rad" => BaseUnit::e(0, 0, 0, 0, 0, 1, 1.0),
        "deg" => BaseUnit::e(0, 0, 0, 0, 0, 1, PI / 180.0),
        "rev" => BaseUnit::e(0, 0, 0, 0, 0, 1, 2.0 * PI),
        "rpm" => BaseUnit::e(0, 0, -1, 0, 0, 1, 2.0 * PI / 60.0),
        "N" => BaseUnit::e(1, 1, -2, 0, 0, 0, 1.0),
        "kN" => BaseUnit::e(1, 1, -2, 0, 0, 0, 1e3),
        "J" => BaseUnit::e(1, 2, -2, 0, 0, 0, 1.0),
        "W" => BaseUnit::e(1, 2, -3, 0, 0, 0, 1.0),
        "Pa" => BaseUnit::e(1, -1, -2, 0, 0, 0, 1.0),
        "Hz" => BaseUnit::e(0, 0, -1, 0, 0, 0, 1.0),
        "V" => BaseUnit::e(1, 2, -3, -1, 0, 0, 1.0),
        _ => return None,
    })
}

/// Parse `a.b2/c.d` (one optional `/`; factors separated by `.`; an integer exponent, possibly
/// negative, directly after a symbol). `None` for symbols we do not know: such units are still
/// declared, just without a `BaseUnit`.
pub fn parse_unit(unit: &str) -> Option<BaseUnit> {
    let unit = unit.trim();
    if unit.is_empty() {
        return None;
    }
    let (num, den) = match unit.split_once('/') {
        Some((n, d)) => (n, Some(d)),
        None => (unit, None),
    };
    let product = |s: &str| -> Option<BaseUnit> {
        let mut acc = BaseUnit::ONE;
        for factor in s.split('.') {
            let split = factor
                .find(|c: char| c.is_ascii_digit() || c == '-')
                .unwrap_or(factor.len());
            let (sym, exp) = factor.split_at(split);
            let (sym, p) = if sym.is_empty() {
                // A bare number: only "1" (as in "1/s") is meaningful.
                (exp, 1)
            } else if exp.is_empty() {
                (sym, 1)
            } else {
                (sym, exp.parse::<i32>().ok()?)
            };
            acc = acc.mul(symbol(sym)?.pow(p));
        }
        Some(acc)
    };
    let mut u = product(num)?;
    if let Some(d) = den {
        if d.contains('/') {
            return None;
        }
        u = u.mul(product(d)?.pow(-1));
    }
    Some(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(u: &str) -> Vec<(&'static str, i32)> {
        parse_unit(u)
            .unwrap_or_else(|| panic!("{u} should parse"))
            .exponents()
    }

    #[test]
    fn derived_units_reduce_to_si_base_units() {
        assert_eq!(ex("N"), vec![("kg", 1), ("m", 1), ("s", -2)]);
        assert_eq!(ex("N.m"), vec![("kg", 1), ("m", 2), ("s", -2)]);
        assert_eq!(ex("J"), ex("N.m"));
        assert_eq!(ex("m/s2"), vec![("m", 1), ("s", -2)]);
        assert_eq!(ex("rad/s"), vec![("s", -1), ("rad", 1)]);
        assert_eq!(ex("N/m"), vec![("kg", 1), ("s", -2)]);
        assert_eq!(ex("N.s/m"), vec![("kg", 1), ("s", -1)]);
        assert_eq!(
            ex("N.m/rad"),
            vec![("kg", 1), ("m", 2), ("s", -2), ("rad", -1)]
        );
        assert_eq!(ex("kg.m2"), vec![("kg", 1), ("m", 2)]);
        assert_eq!(ex("1/s"), vec![("s", -1)]);
        assert_eq!(ex("s-1"), vec![("s", -1)]);
        assert!(ex("1").is_empty());
    }

    #[test]
    fn factors_and_unknown_units() {
        assert!((parse_unit("deg").unwrap().factor - std::f64::consts::PI / 180.0).abs() < 1e-15);
        assert!((parse_unit("mm/s").unwrap().factor - 1e-3).abs() < 1e-18);
        assert!(
            (parse_unit("rpm").unwrap().factor - 2.0 * std::f64::consts::PI / 60.0).abs() < 1e-15
        );
        assert_eq!(parse_unit("rpm").unwrap().exponents(), ex("rad/s"));
        assert_eq!(parse_unit("furlong"), None);
        assert_eq!(parse_unit("m/s/s"), None);
        assert_eq!(parse_unit(""), None);
    }

    #[test]
    fn dimensions_and_si_units() {
        let u = |s: &str| parse_unit(s).unwrap();
        assert!(u("N.m").same_dimension(&u("J")));
        assert!(u("rpm").same_dimension(&u("rad/s")));
        assert!(!u("Hz").same_dimension(&u("rad/s")));
        assert!(!u("rad").same_dimension(&u("1")));
        assert_eq!(u("kN").si_unit(), "N");
        assert_eq!(u("N/mm").si_unit(), "N/m");
        assert_eq!(u("J").si_unit(), "N.m");
        assert_eq!(u("kg/m").si_unit(), "kg.m-1");
        assert_eq!(u("g").si_unit(), "kg");
        assert_eq!(u("1").si_unit(), "1");
        assert!(u("N.s/m").is_si() && u("1").is_si());
        assert!(!u("g").is_si() && !u("deg").is_si() && !u("mm").is_si());
    }
}
