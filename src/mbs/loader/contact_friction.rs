//! Resolution of a contact's friction keys (`mu`, `v_reg` and the stiction keys on a
//! `contact`) and of `contact_friction` outputs. See docs/model-format.md (`contact`) and
//! `mbs::contact_friction`.

use super::joint_elements::STICTION_KEYS;
use super::*;

impl Resolver<'_> {
    /// The friction of a contact: `None` without `mu` (then no friction key may be given).
    pub(super) fn contact_friction(
        &mut self,
        f: &RawForce,
        el: &str,
        sp: Range<usize>,
        present: &[(&'static str, Range<usize>)],
    ) -> Res<Option<ContactFrictionSpec>> {
        let Some(m) = &f.mu else {
            for (k, s) in present {
                if *k == "v_reg" || STICTION_KEYS.contains(k) {
                    return Err(self.err(
                        s.clone(),
                        el,
                        format!("key `{k}` needs `mu` (a contact has friction only with a kinetic friction coefficient `mu`)"),
                    ));
                }
            }
            return Ok(None);
        };
        let mu = self.nonneg_scalar(m, el, "mu", true, "")?;
        let v_reg = match &f.v_reg {
            Some(v) => self.positive_scalar(v, el, "v_reg", true, "m/s")?,
            None => Scalar::Const(1e-3),
        };
        let stiction = self.stiction_spec(f, el, sp, present, mu, ["N/m", "N s/m", "m/s"])?;
        Ok(Some(ContactFrictionSpec {
            mu,
            v_reg,
            stiction,
        }))
    }

    /// A `type = "contact_friction"` output: `force` (a contact with `mu`) and `component`.
    pub(super) fn contact_friction_output(
        &mut self,
        o: &RawOutput,
        el: &str,
        sp: Range<usize>,
        present: &[(&'static str, Range<usize>)],
    ) -> Res<(OutputQuantity, &'static str)> {
        let what = "a contact_friction output";
        self.allowed_keys(el, what, present, &["force", "component"])?;
        let fnm = self.required(&o.force, sp.clone(), el, "force", what)?;
        let force = *self.force_index.get(fnm.get_ref()).ok_or_else(|| {
            let hint = did_you_mean(fnm.get_ref(), self.force_index.keys());
            self.err(
                fnm.span(),
                el,
                format!("no force element named `{}`{hint}", fnm.get_ref()),
            )
        })?;
        self.ensure(
            matches!(
                self.force_specs[force].kind,
                ForceKind::Contact {
                    friction: Some(_),
                    ..
                }
            ),
            fnm.span(),
            el,
            || {
                format!(
                    "force element `{}` is not a contact with friction (`mu`)",
                    fnm.get_ref()
                )
            },
        )?;
        let c = self.required(&o.component, sp, el, "component", what)?;
        let names: Vec<&str> = CONTACT_FRICTION_COMPONENTS
            .iter()
            .map(|(n, _)| *n)
            .collect();
        let component = names
            .iter()
            .position(|n| *n == c.get_ref().as_str())
            .ok_or_else(|| {
                self.err(
                    c.span(),
                    el,
                    format!(
                        "unknown contact_friction component `{}` (one of: {})",
                        c.get_ref(),
                        names.join(", ")
                    ),
                )
            })?;
        Ok((
            OutputQuantity::ContactFriction { force, component },
            CONTACT_FRICTION_COMPONENTS[component].1,
        ))
    }
}
