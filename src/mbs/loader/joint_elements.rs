//! Resolution of the force elements that act on a joint coordinate: `prismatic_friction`,
//! `revolute_friction` (with optional stiction) and `joint_stop`. See docs/model-format.md and
//! `mbs::friction`, `mbs::stops`.

use super::elements::joint_kind_name;
use super::*;

/// The keys of stiction, on joint friction and contacts.
pub(super) const STICTION_KEYS: [&str; 4] = [
    "mu_static",
    "stiction_stiffness",
    "stiction_damping",
    "stiction_velocity",
];

impl Resolver<'_> {
    /// The stiction keys of a friction element (`mu_static`, `stiction_stiffness`,
    /// `stiction_damping`, `stiction_velocity`; `units` of stiffness, damping and speed),
    /// checked against the kinetic `mu`: `None` without `mu_static`.
    pub(super) fn stiction_spec(
        &mut self,
        f: &RawForce,
        el: &str,
        sp: Range<usize>,
        present: &[(&'static str, Range<usize>)],
        mu: Scalar,
        units: [&str; 3],
    ) -> Res<Option<StictionSpec>> {
        let Some(ms) = &f.mu_static else {
            for (k, s) in present {
                if STICTION_KEYS.contains(k) {
                    return Err(self.err(s.clone(), el, format!("key `{k}` needs `mu_static` (stiction is on only with a static friction coefficient)")));
                }
            }
            return Ok(None);
        };
        let mu_static = self.nonneg_scalar(ms, el, "mu_static", true, "")?;
        let (vs, vk) = (self.value_of(mu_static), self.value_of(mu));
        self.ensure(vs >= vk, ms.span(), el, || {
            format!("`mu_static` = {vs} is below the kinetic `mu` = {vk} (static friction is at least kinetic friction)")
        })?;
        let ks = self.required(
            &f.stiction_stiffness,
            sp,
            el,
            "stiction_stiffness",
            "friction with `mu_static`",
        )?;
        let stiffness = self.positive_scalar(ks, el, "stiction_stiffness", true, units[0])?;
        let damping = match &f.stiction_damping {
            Some(c) => self.nonneg_scalar(c, el, "stiction_damping", true, units[1])?,
            None => Scalar::Const(0.0),
        };
        let v_stick = match &f.stiction_velocity {
            Some(v) => Some(self.positive_scalar(v, el, "stiction_velocity", true, units[2])?),
            None => None,
        };
        Ok(Some(StictionSpec {
            mu_static,
            stiffness,
            damping,
            v_stick,
        }))
    }
    /// The joint named by `joint`, which must be of one of `kinds`.
    fn coordinate_joint(
        &self,
        f: &RawForce,
        el: &str,
        sp: Range<usize>,
        what: &str,
        kinds: &[JointKind],
        needs: &str,
    ) -> Res<usize> {
        let jn = self.required(&f.joint, sp, el, "joint", what)?;
        let ji = self.joint_ref(jn, el)?;
        let jk = self.joint_specs[ji].kind;
        self.ensure(kinds.contains(&jk), jn.span(), el, || {
            format!(
                "joint `{}` is a {} joint; {needs}",
                jn.get_ref(),
                joint_kind_name(jk)
            )
        })?;
        Ok(ji)
    }

    pub(super) fn joint_friction(
        &mut self,
        f: &RawForce,
        el: &str,
        sp: Range<usize>,
        present: &[(&'static str, Range<usize>)],
    ) -> Res<ForceKind> {
        let kname = f.kind.get_ref().as_str();
        let revolute = kname == "revolute_friction";
        let what = format!("a {kname} force");
        let mut allowed = vec!["joint", "mu", "v_reg"];
        allowed.extend_from_slice(&STICTION_KEYS);
        if revolute {
            allowed.push("radius");
        }
        self.allowed_keys(el, &what, present, &allowed)?;
        let ji = if revolute {
            self.coordinate_joint(
                f,
                el,
                sp.clone(),
                &what,
                &[JointKind::Revolute],
                "revolute_friction needs a revolute joint",
            )?
        } else {
            self.coordinate_joint(
                f,
                el,
                sp.clone(),
                &what,
                &[JointKind::Prismatic],
                "prismatic_friction needs a prismatic joint",
            )?
        };
        let rate = if revolute { "rad/s" } else { "m/s" };
        let m = self.required(&f.mu, sp.clone(), el, "mu", &what)?;
        let mu = self.nonneg_scalar(m, el, "mu", true, "")?;
        let v_reg = match &f.v_reg {
            Some(v) => self.positive_scalar(v, el, "v_reg", true, rate)?,
            None => Scalar::Const(1e-3),
        };
        let stiction = if revolute {
            self.stiction_spec(
                f,
                el,
                sp.clone(),
                present,
                mu,
                ["N m/rad", "N m s/rad", rate],
            )?
        } else {
            self.stiction_spec(f, el, sp.clone(), present, mu, ["N/m", "N s/m", rate])?
        };
        if revolute {
            let r = self.required(&f.radius, sp, el, "radius", &what)?;
            let radius = self.positive_scalar(r, el, "radius", true, "m")?;
            Ok(ForceKind::RevoluteFriction {
                joint: ji,
                mu,
                v_reg,
                radius,
                stiction,
            })
        } else {
            Ok(ForceKind::PrismaticFriction {
                joint: ji,
                mu,
                v_reg,
                stiction,
            })
        }
    }

    pub(super) fn joint_stop(
        &mut self,
        f: &RawForce,
        el: &str,
        sp: Range<usize>,
        present: &[(&'static str, Range<usize>)],
    ) -> Res<ForceKind> {
        let what = "a joint_stop force";
        self.allowed_keys(
            el,
            what,
            present,
            &[
                "joint",
                "lower",
                "upper",
                "stiffness",
                "damping",
                "restitution",
            ],
        )?;
        let ji = self.coordinate_joint(
            f,
            el,
            sp.clone(),
            what,
            &[JointKind::Revolute, JointKind::Prismatic],
            "a joint_stop needs a revolute or prismatic joint (it limits the joint coordinate)",
        )?;
        let revolute = self.joint_specs[ji].kind == JointKind::Revolute;
        let (len, unit_k, unit_c) = if revolute {
            ("rad", "N m/rad", "N m s/rad")
        } else {
            ("m", "N/m", "N s/m")
        };
        let lower = match &f.lower {
            Some(x) => Some(self.scalar(x, el, "lower", true)?),
            None => None,
        };
        let upper = match &f.upper {
            Some(x) => Some(self.scalar(x, el, "upper", true)?),
            None => None,
        };
        self.ensure(lower.is_some() || upper.is_some(), sp.clone(), el, || {
            "a joint_stop needs `lower`, `upper` or both (the coordinate limits)".into()
        })?;
        if let (Some(l), Some(u), Some(us)) = (lower, upper, &f.upper) {
            let (lv, uv) = (self.value_of(l), self.value_of(u));
            self.ensure(lv < uv, us.span(), el, || {
                format!("`upper` = {uv} {len} must be above `lower` = {lv} {len}")
            })?;
        }
        let k = self.required(&f.stiffness, sp.clone(), el, "stiffness", what)?;
        let stiffness = self.one_nonneg(k, el, "stiffness", unit_k)?;
        let (v, from) = (self.value_of(stiffness), self.source_of(stiffness));
        self.ensure(v > 0.0, k.span(), el, || {
            format!(
                "joint_stop `stiffness` must be positive, got {v} {}{from}",
                unit_k
            )
        })?;
        let damping = match (&f.damping, &f.restitution) {
            (Some(_), Some(e)) => {
                return Err(self.err(
                    e.span(),
                    el,
                    "give either `damping` or `restitution`, not both",
                ));
            }
            (Some(c), None) => StopDamping::Damping(self.one_nonneg(c, el, "damping", unit_c)?),
            (None, Some(e)) => {
                let s = self.scalar(e, el, "restitution", true)?;
                let v = self.value_of(s);
                self.ensure(v > 0.0 && v <= 1.0, e.span(), el, || {
                    format!("`restitution` must be in (0, 1], got {v}")
                })?;
                self.sign_rule(s, true, el, "restitution");
                StopDamping::Restitution(s)
            }
            (None, None) => StopDamping::Damping(Scalar::Const(0.0)),
        };
        Ok(ForceKind::JointStop {
            joint: ji,
            lower,
            upper,
            stiffness,
            damping,
        })
    }
}
