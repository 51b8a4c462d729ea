//! Resolution of a `type = "tire"` force element (see `mbs::tire` and docs/model-format.md).

use super::*;

impl Resolver<'_> {
    /// A `NumOrList` that must be one number.
    fn single(&self, v: &S<NumOrList>, el: &str, field: &str) -> Res<S<Num>> {
        match v.get_ref() {
            NumOrList::One(n) => Ok(S::new(v.span(), n.clone())),
            NumOrList::List(_) => Err(self.err(
                v.span(),
                el,
                format!("`{field}` must be a single number here, not a list"),
            )),
        }
    }

    pub(super) fn tire(
        &mut self,
        f: &RawForce,
        el: &str,
        sp: Range<usize>,
        present: &[(&'static str, Range<usize>)],
    ) -> Res<ForceKind> {
        let what = "a tire";
        self.allowed_keys(
            el,
            what,
            present,
            &[
                "joint",
                "radius",
                "stiffness",
                "damping",
                "mu",
                "v_reg",
                "road_height",
                "road_profile",
                "magic_formula",
            ],
        )?;
        let jn = self.required(&f.joint, sp.clone(), el, "joint", what)?;
        let ji = self.joint_ref(jn, el)?;
        let js = self.joint_specs[ji].clone();
        self.ensure(js.kind == JointKind::Revolute, jn.span(), el, || {
            format!(
                "joint `{}` is a {:?} joint; a tire's wheel spins on a revolute joint",
                jn.get_ref(),
                js.kind
            )
        })?;
        let wheel = match js.body2 {
            BodyRef::Body(b) if !self.is_particle(js.body2) => b,
            _ => {
                return Err(self.err(
                    jn.span(),
                    el,
                    format!(
                        "the wheel is body2 of joint `{}` and must be a rigid body, not {}",
                        jn.get_ref(),
                        self.ref_name(js.body2)
                    ),
                ))
            }
        };
        let r = self.required(&f.radius, sp.clone(), el, "radius", what)?;
        let radius = self.positive_scalar(r, el, "radius", false, "m")?;
        let k = self.required(&f.stiffness, sp.clone(), el, "stiffness", what)?;
        let k = self.single(k, el, "stiffness")?;
        let stiffness = self.positive_scalar(&k, el, "stiffness", true, "N/m")?;
        let damping = match &f.damping {
            Some(c) => {
                let c = self.single(c, el, "damping")?;
                self.nonneg_scalar(&c, el, "damping", true, "N s/m")?
            }
            None => Scalar::Const(0.0),
        };
        let mu = match &f.mu {
            Some(m) => self.nonneg_scalar(m, el, "mu", true, "")?,
            None => Scalar::Const(1.0),
        };
        let v_low = match &f.v_reg {
            Some(v) => self.positive_scalar(v, el, "v_reg", true, "m/s")?,
            None => Scalar::Const(0.5),
        };
        let road_height = match &f.road_height {
            Some(m) => self.motion(m, el, "road_height")?,
            None => Motion::Constant(Scalar::Const(0.0)),
        };
        let road_profile = match &f.road_profile {
            Some(file) => {
                let (path, x, h) = self.table_file(file, el)?;
                self.ensure(x.len() >= 2, file.span(), el, || {
                    "`road_profile` needs at least two rows (x, height)".into()
                })?;
                Some((path, x, h))
            }
            None => None,
        };
        let mf = self.required(&f.magic_formula, sp, el, "magic_formula", what)?;
        let raw = mf.get_ref();
        let mut coef = |v: &Option<S<Num>>, key: &str, positive: bool| -> Res<Scalar> {
            let v = self.required(v, mf.span(), el, key, "`magic_formula`")?;
            let field = format!("magic_formula.{key}");
            if positive {
                self.positive_scalar(v, el, &field, true, "")
            } else {
                self.scalar(v, el, &field, true)
            }
        };
        let mf_x = [
            coef(&raw.bx, "bx", true)?,
            coef(&raw.cx, "cx", true)?,
            coef(&raw.ex, "ex", false)?,
        ];
        let mf_y = [
            coef(&raw.by, "by", true)?,
            coef(&raw.cy, "cy", true)?,
            coef(&raw.ey, "ey", false)?,
        ];
        for (s, key) in [(mf_x[2], "ex"), (mf_y[2], "ey")] {
            let e = self.value_of(s);
            self.ensure(e <= 1.0, mf.span(), el, || {
                format!("`magic_formula.{key}` = {e} must not exceed 1 (the curve would fold back)")
            })?;
        }
        Ok(ForceKind::Tire(Box::new(TireSpec {
            joint: ji,
            wheel,
            center: js.frame2.origin,
            axis: js.frame2.axes.column(2).into_owned(),
            radius,
            stiffness,
            damping,
            mu,
            mf_x,
            mf_y,
            v_low,
            road_height,
            road_profile,
        })))
    }
}

impl Resolver<'_> {
    /// A `type = "tire"` output: `force` (a tire element) and `component`.
    pub(super) fn tire_output(
        &mut self,
        o: &RawOutput,
        el: &str,
        sp: Range<usize>,
        present: &[(&'static str, Range<usize>)],
    ) -> Res<(OutputQuantity, &'static str)> {
        let what = "a tire output";
        self.allowed_keys(el, what, present, &["force", "component"])?;
        let fnm = self.required(&o.force, sp.clone(), el, "force", what)?;
        let force = *self.force_index.get(fnm.get_ref()).ok_or_else(|| {
            self.err(
                fnm.span(),
                el,
                format!("no force element named `{}`", fnm.get_ref()),
            )
        })?;
        self.ensure(
            matches!(self.force_specs[force].kind, ForceKind::Tire(_)),
            fnm.span(),
            el,
            || format!("force element `{}` is not a tire", fnm.get_ref()),
        )?;
        let c = self.required(&o.component, sp, el, "component", what)?;
        let names: Vec<&str> = TIRE_COMPONENTS.iter().map(|(n, _)| *n).collect();
        let component = names
            .iter()
            .position(|n| *n == c.get_ref().as_str())
            .ok_or_else(|| {
                self.err(
                    c.span(),
                    el,
                    format!(
                        "unknown tire component `{}` (one of: {})",
                        c.get_ref(),
                        names.join(", ")
                    ),
                )
            })?;
        Ok((
            OutputQuantity::Tire { force, component },
            TIRE_COMPONENTS[component].1,
        ))
    }
}
