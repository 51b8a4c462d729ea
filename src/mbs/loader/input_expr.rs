//! Input expressions: a motion written as `"0.05 + post_z"` or `"2*u - 0.01"`, an affine
//! function `scale·u + offset` of one FMU input `u` (docs/model-format.md, *Motions*).
//!
//! The expression is evaluated with the input at a few values and must be affine: scale and
//! offset follow from two evaluations, the others check the fit. That keeps one evaluator
//! (`expr.rs`) and gives `u̇`, `ü` exactly: `scale·u̇`, `scale·ü`.

use super::*;

/// Scale and offset of `text` as an affine function of the input named `input`; `lookup`
/// resolves every other name (parameters at their values). `Err` says why not.
pub(super) fn affine_in_input(
    text: &str,
    input: &str,
    lookup: &dyn Fn(&str) -> Option<f64>,
) -> Result<(f64, f64), String> {
    let at = |u: f64| {
        expr::eval(text, &|n: &str| {
            if n == input {
                Some(u)
            } else {
                lookup(n)
            }
        })
        .map_err(|e| e.message)
    };
    let at_named = |u: f64| at(u).map_err(|e| format!("at {input} = {u}: {e}"));
    let offset = at_named(0.0)?;
    let scale = at_named(1.0)? - offset;
    // Values of either sign and size: a kink (abs), a curve (u^2, sin) or a pole shows.
    for u in [-3.7, -0.41, 0.29, 2.5, 17.0] {
        let f = at(u).map_err(|e| format!("at {input} = {u}: {e}"))?;
        let fit = offset + scale * u;
        if (f - fit).abs() > 1e-9 * (1.0 + offset.abs() + (scale * u).abs()) {
            return Err(format!(
                "it is not affine in the input `{input}` (at {input} = {u} it gives {f}, \
                 offset + scale·{input} gives {fit}); an input may only be offset and scaled"
            ));
        }
    }
    if scale == 0.0 {
        return Err(format!(
            "it does not depend on the input `{input}` (scale 0)"
        ));
    }
    Ok((scale, offset))
}

impl Resolver<'_> {
    /// A bushing's `preload_force` and `preload_torque` (zeros when absent); not together
    /// with `static_preload`, which computes them.
    pub(super) fn bushing_preload(&mut self, f: &RawForce, el: &str) -> Res<[f64; 6]> {
        let mut p = [0.0; 6];
        for (k, key, v) in [
            (0, "preload_force", &f.preload_force),
            (3, "preload_torque", &f.preload_torque),
        ] {
            let Some(v) = v else { continue };
            if let Some(s) = f.static_preload.as_ref().filter(|s| *s.get_ref()) {
                return Err(self.err(
                    s.span(),
                    el,
                    format!("`static_preload = true` computes the preload: give it or `{key}`, not both"),
                ));
            }
            let x = self.vec3(v, el, key)?;
            p[k..k + 3].copy_from_slice(x.as_slice());
        }
        Ok(p)
    }

    /// `law` with its damping replaced by the damper curve in table file `t`.
    pub(super) fn damper_table(
        &mut self,
        law: ForceLaw,
        t: &S<String>,
        damping: Option<std::ops::Range<usize>>,
        el: &str,
    ) -> Res<ForceLaw> {
        if let Some(span) = damping {
            return Err(self.err(
                span,
                el,
                String::from("give `damping` (linear) or `damper_table` (a curve), not both"),
            ));
        }
        let (file, velocity, force) = self.table_file(t, el)?;
        Ok(ForceLaw::DamperTable {
            spring: Box::new(law),
            file,
            velocity,
            force,
        })
    }

    /// A motion given as text: a bare input name, an expression in one input, or `None`
    /// when the text names no input (a number or an expression of parameters).
    pub(super) fn input_motion(
        &mut self,
        n: &S<Num>,
        el: &str,
        field: &str,
    ) -> Res<Option<Motion>> {
        let Num::Text(t) = n.get_ref() else {
            return Ok(None);
        };
        if let Some(&i) = self.input_index.get(t.trim()) {
            self.input_used[i] = true;
            self.input_bare[i] = true;
            return Ok(Some(Motion::Input(i)));
        }
        let mut used: Vec<(String, usize)> = Vec::new();
        for id in expr::identifiers(t) {
            if let Some(&i) = self.input_index.get(&id) {
                if !used.iter().any(|(_, j)| *j == i) {
                    used.push((id, i));
                }
            }
        }
        let (name, i) = match used.len() {
            0 => return Ok(None),
            1 => used.remove(0),
            _ => {
                let names: Vec<&str> = used.iter().map(|(n, _)| n.as_str()).collect();
                return Err(self.err(
                    n.span(),
                    el,
                    format!(
                        "`{field}` = \"{t}\": an expression may use one input, this one uses {}",
                        names.join(" and ")
                    ),
                ));
            }
        };
        let (scale, offset) = affine_in_input(t, &name, &self.param_lookup())
            .map_err(|e| self.err(n.span(), el, format!("`{field}` = \"{t}\": {e}")))?;
        // Parameters in the expression are read when the model is resolved (load and
        // initialization), like any expression.
        for id in expr::identifiers(t) {
            if let Some(&p) = self.param_index.get(&id) {
                self.param_uses[p].push(ParamUse {
                    tunable_ok: false,
                    what: format!("{el} `{field}` (an input expression: evaluated when the model is resolved, at load and at initialization)"),
                });
            }
        }
        self.input_used[i] = true;
        Ok(Some(Motion::AffineInput {
            input: i,
            scale,
            offset,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::affine_in_input;

    fn params(n: &str) -> Option<f64> {
        match n {
            "h0" => Some(0.25),
            "g" => Some(3.0),
            _ => None,
        }
    }

    #[test]
    fn offsets_and_scales_are_recovered() {
        let cases = [
            ("0.05 + post_z", (1.0, 0.05)),
            ("2*post_z - 0.01", (2.0, -0.01)),
            ("-post_z", (-1.0, 0.0)),
            ("(post_z + h0)/g", (1.0 / 3.0, 0.25 / 3.0)),
            ("h0 - 0.5*(post_z - 1)", (-0.5, 0.75)),
            // `deg(x)` is x degrees in radians.
            ("deg(post_z)", (std::f64::consts::PI / 180.0, 0.0)),
        ];
        for (text, (s, o)) in cases {
            let (scale, offset) = affine_in_input(text, "post_z", &params).unwrap();
            assert!(
                (scale - s).abs() < 1e-14 && (offset - o).abs() < 1e-14,
                "{text}: {scale} {offset}"
            );
        }
    }

    #[test]
    fn non_affine_expressions_are_refused() {
        for text in [
            "post_z^2",
            "abs(post_z)",
            "sin(post_z)",
            "1/post_z",
            "sqrt(post_z)",
            "0*post_z + 1",
            "post_z*post_z - post_z",
            "exp(post_z)",
        ] {
            let e = affine_in_input(text, "post_z", &params).unwrap_err();
            assert!(
                e.contains("not affine")
                    || e.contains("does not depend")
                    || e.contains("at post_z"),
                "{text}: {e}"
            );
        }
        let e = affine_in_input("post_z + k", "post_z", &params).unwrap_err();
        assert!(e.contains('k'), "{e}");
    }
}
