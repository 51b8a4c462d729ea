//! Resolution of the element sections (bodies, frames, joints, drivers, forces, outputs): the
//! per-type key rules, checks and frame construction. See docs/model-format.md.

use super::*;

impl Resolver<'_> {
    fn claim_body_name(&mut self, name: &S<String>, el: &str, r: BodyRef) -> Res<()> {
        self.check_name(name, el)?;
        let n = name.get_ref();
        self.ensure(n != "ground", name.span(), el, || {
            "the name `ground` is reserved for the fixed world".into()
        })?;
        if self.bodies_by_name.contains_key(n) {
            return Err(self.err(
                name.span(),
                el,
                format!("duplicate name `{n}`: bodies and frames share one namespace"),
            ));
        }
        self.bodies_by_name.insert(n.clone(), r);
        Ok(())
    }

    pub(super) fn body(&mut self, i: usize, b: &S<RawBody>) -> Res<()> {
        let bspan = b.span();
        let b = b.get_ref();
        let el = label("bodies", i, b.name.get_ref());
        self.claim_body_name(&b.name, &el, BodyRef::Body(i))?;
        let kind = match &b.kind {
            None => BodyKind::Rigid,
            Some(k) => match k.get_ref().as_str() {
                "rigid" => BodyKind::Rigid,
                "particle" => BodyKind::Particle,
                other => {
                    return Err(self.err(
                        k.span(),
                        &el,
                        format!("unknown body type \"{other}\" (one of: rigid, particle)"),
                    ))
                }
            },
        };
        let mass = self.positive_scalar(&b.mass, &el, "mass", false, "kg")?;
        let position = self.vec3(&b.position, &el, "position")?;
        let velocity = match &b.velocity {
            Some(v) => self.vec3(v, &el, "velocity")?,
            None => Vector3::zeros(),
        };
        let zero = Scalar::Const(0.0);
        let mut inertia = [zero; 6];
        let mut orientation = UnitQuaternion::identity();
        let mut angular_velocity = Vector3::zeros();
        match kind {
            BodyKind::Particle => {
                let extra = [
                    ("inertia", b.inertia.as_ref().map(|x| x.span())),
                    ("orientation", b.orientation.as_ref().map(|x| x.span())),
                    (
                        "angular_velocity",
                        b.angular_velocity.as_ref().map(|x| x.span()),
                    ),
                ];
                for (k, s) in extra {
                    if let Some(s) = s {
                        return Err(self.err(s, &el, format!("a particle has no `{k}` (it is a point mass); remove the key or use type = \"rigid\"")));
                    }
                }
            }
            BodyKind::Rigid => {
                let ine = self.required(&b.inertia, bspan, &el, "inertia", "a rigid body")?;
                inertia = self.inertia(ine, &el)?;
                if let Some(o) = &b.orientation {
                    orientation = self.orientation(o, &el)?;
                }
                if let Some(w) = &b.angular_velocity {
                    angular_velocity = self.vec3(w, &el, "angular_velocity")?;
                }
            }
        }
        self.body_specs.push(BodySpec {
            name: b.name.get_ref().clone(),
            kind,
            mass,
            inertia,
            position,
            orientation,
            velocity,
            angular_velocity,
        });
        Ok(())
    }

    fn inertia(&mut self, ine: &S<RawInertia>, el: &str) -> Res<[Scalar; 6]> {
        let zero = Scalar::Const(0.0);
        let s = match ine.get_ref() {
            RawInertia::Diagonal(d) => {
                self.ensure(d.len() == 3, ine.span(), el, || {
                    format!("`inertia` as a list is [Ixx, Iyy, Izz] (3 values), got {} values; use {{ xx, yy, zz, xy, xz, yz }} for a full tensor", d.len())
                })?;
                let mut s = [zero; 6];
                for k in 0..3 {
                    s[k] = self.scalar(&d[k], el, "inertia", false)?;
                }
                s
            }
            RawInertia::Full(f) => {
                let mut s = [zero; 6];
                let items = [
                    Some(&f.xx),
                    Some(&f.yy),
                    Some(&f.zz),
                    f.xy.as_ref(),
                    f.xz.as_ref(),
                    f.yz.as_ref(),
                ];
                for (k, x) in items.iter().enumerate() {
                    if let Some(x) = x {
                        s[k] = self.scalar(x, el, "inertia", false)?;
                    }
                }
                s
            }
        };
        let v: Vec<f64> = s.iter().map(|x| self.value_of(*x)).collect();
        let m = Matrix3::new(v[0], v[3], v[4], v[3], v[1], v[5], v[4], v[5], v[2]);
        let mut ev: Vec<f64> = SymmetricEigen::new(m).eigenvalues.iter().copied().collect();
        ev.sort_by(|a, b| a.total_cmp(b));
        let scale = ev[2].abs().max(f64::MIN_POSITIVE);
        self.ensure(ev[0] > 1e-12 * scale && ev[0] > 0.0, ine.span(), el, || {
            format!(
                "inertia is not positive definite (principal moments {}, {}, {} kg m^2)",
                sig6(ev[0]),
                sig6(ev[1]),
                sig6(ev[2])
            )
        })?;
        self.ensure(ev[2] <= (ev[0] + ev[1]) * (1.0 + 1e-9), ine.span(), el, || {
            format!(
                "inertia violates the triangle inequality: the largest principal moment {} exceeds the sum of the others ({} + {}); no mass distribution has this inertia",
                sig6(ev[2]), sig6(ev[0]), sig6(ev[1])
            )
        })?;
        Ok(s)
    }

    fn orientation(&mut self, o: &S<RawOrientation>, el: &str) -> Res<UnitQuaternion<f64>> {
        match o.get_ref() {
            RawOrientation::Quaternion(q) => {
                self.ensure(q.len() == 4, o.span(), el, || {
                    format!(
                        "`orientation` as a list is a unit quaternion [w, x, y, z], got {} values",
                        q.len()
                    )
                })?;
                let mut c = [0.0; 4];
                for k in 0..4 {
                    c[k] = self.number(&q[k], el, "orientation")?;
                }
                let quat = nalgebra::Quaternion::new(c[0], c[1], c[2], c[3]);
                let n = quat.norm();
                self.ensure((n - 1.0).abs() < 1e-3, o.span(), el, || {
                    format!("`orientation` quaternion must have unit length, its norm is {n}")
                })?;
                Ok(UnitQuaternion::from_quaternion(quat))
            }
            RawOrientation::AxisAngle(aa) => {
                let axis = self.unit_vec3(&aa.axis, el, "orientation.axis")?;
                let angle = self.number(&aa.angle, el, "orientation.angle")?;
                Ok(UnitQuaternion::from_axis_angle(
                    &Unit::new_unchecked(axis),
                    angle,
                ))
            }
        }
    }

    pub(super) fn frame(&mut self, i: usize, f: &S<RawFrame>) -> Res<()> {
        let f = f.get_ref();
        let el = label("frames", i, f.name.get_ref());
        self.claim_body_name(&f.name, &el, BodyRef::Frame(i))?;
        let items = f.position.get_ref();
        self.ensure(items.len() == 3, f.position.span(), &el, || {
            format!("`position` needs 3 motions (x, y, z), got {}", items.len())
        })?;
        let mut ms = Vec::new();
        for (k, m) in items.iter().enumerate() {
            ms.push(self.motion(m, &el, &format!("position.{}", axis_name(k)))?);
        }
        let p = Vector3::new(
            self.motion_at(&ms[0], self.t0),
            self.motion_at(&ms[1], self.t0),
            self.motion_at(&ms[2], self.t0),
        );
        let [x, y, z]: [Motion; 3] = ms.try_into().expect("three motions");
        self.frame_positions.push(p);
        self.frame_specs.push(MovingFrameSpec {
            name: f.name.get_ref().clone(),
            position: [x, y, z],
        });
        Ok(())
    }

    pub(super) fn joint(&mut self, i: usize, j: &S<RawJoint>) -> Res<()> {
        let jspan = j.span();
        let j = j.get_ref();
        let el = label("joints", i, j.name.get_ref());
        self.check_name(&j.name, &el)?;
        if self.joint_index.contains_key(j.name.get_ref()) {
            return Err(self.err(
                j.name.span(),
                &el,
                format!("duplicate joint name `{}`", j.name.get_ref()),
            ));
        }
        let (kind, allowed): (JointKind, &[&str]) = match j.kind.get_ref().as_str() {
            "revolute" => (JointKind::Revolute, &["point", "axis", "x_axis", "initial_angle", "frame1", "frame2"]),
            "prismatic" => (JointKind::Prismatic, &["point", "axis", "x_axis", "frame1", "frame2"]),
            "cylindrical" => (JointKind::Cylindrical, &["point", "axis", "x_axis", "frame1", "frame2"]),
            "universal" => (JointKind::Universal, &["point", "axis", "axis2", "frame1", "frame2"]),
            "spherical" => (JointKind::Spherical, &["point", "axis", "x_axis", "frame1", "frame2"]),
            "fixed" => (JointKind::Fixed, &["point", "axis", "x_axis", "frame1", "frame2"]),
            "planar" => (JointKind::Planar, &["point", "axis", "x_axis", "frame1", "frame2"]),
            "distance" => (JointKind::Distance, &["point1", "point2", "length"]),
            other => {
                return Err(self.err(
                    j.kind.span(),
                    &el,
                    format!("unknown joint type \"{other}\" (one of: revolute, prismatic, spherical, universal, cylindrical, fixed, distance, planar)"),
                ))
            }
        };
        let kname = j.kind.get_ref().as_str();
        let what = format!("a {kname} joint");
        self.allowed_keys(&el, &what, &j.present_keys(), allowed)?;
        let b1 = self.body_ref(&j.body1, &el, "body1")?;
        let b2 = self.body_ref(&j.body2, &el, "body2")?;
        self.check_two_ends(b1, b2, j.body2.span(), &el)?;
        match kind {
            JointKind::Revolute
            | JointKind::Prismatic
            | JointKind::Cylindrical
            | JointKind::Universal
            | JointKind::Fixed => {
                self.check_rigid(b1, j.body1.span(), &el, &what)?;
                self.check_rigid(b2, j.body2.span(), &el, &what)?;
            }
            JointKind::Planar => self.check_rigid(
                b1,
                j.body1.span(),
                &el,
                "the plane of a planar joint (body1)",
            )?,
            JointKind::Spherical | JointKind::Distance => {}
        }

        let mut length = None;
        let mut initial_angle = None;
        let (frame1, frame2) = if kind == JointKind::Distance {
            let p1 = self.required(&j.point1, jspan.clone(), &el, "point1", &what)?;
            let p2 = self.required(&j.point2, jspan.clone(), &el, "point2", &what)?;
            let g1 = self.vec3(p1, &el, "point1")?;
            let g2 = self.vec3(p2, &el, "point2")?;
            let d = (g2 - g1).norm();
            length = Some(match &j.length {
                Some(l) => self.positive_scalar(l, &el, "length", false, "m")?,
                None => {
                    self.ensure(d > 1e-12, p2.span(), &el, || {
                        "`point1` and `point2` coincide: give a rod `length` or separate the points"
                            .into()
                    })?;
                    Scalar::Const(d)
                }
            });
            let (_, a1) = self.pose(b1);
            let (_, a2) = self.pose(b2);
            (
                LocalFrame {
                    origin: self.local_point(b1, g1),
                    axes: a1.transpose(),
                },
                LocalFrame {
                    origin: self.local_point(b2, g2),
                    axes: a2.transpose(),
                },
            )
        } else if j.frame1.is_some() || j.frame2.is_some() {
            for (k, s) in [
                ("point", j.point.as_ref().map(|x| x.span())),
                ("axis", j.axis.as_ref().map(|x| x.span())),
                ("x_axis", j.x_axis.as_ref().map(|x| x.span())),
                ("axis2", j.axis2.as_ref().map(|x| x.span())),
                ("initial_angle", j.initial_angle.as_ref().map(|x| x.span())),
            ] {
                if let Some(s) = s {
                    return Err(self.err(s, &el, format!("key `{k}` cannot be combined with explicit `frame1`/`frame2`: give either the global point and axes or both frames")));
                }
            }
            let f1 = self.required(
                &j.frame1,
                jspan.clone(),
                &el,
                "frame1",
                "a joint with an explicit frame2",
            )?;
            let f2 = self.required(
                &j.frame2,
                jspan.clone(),
                &el,
                "frame2",
                "a joint with an explicit frame1",
            )?;
            (self.explicit_frame(f1, &el)?, self.explicit_frame(f2, &el)?)
        } else {
            let p = self.required(&j.point, jspan.clone(), &el, "point", &what)?;
            let point = self.vec3(p, &el, "point")?;
            let axis_needed = matches!(
                kind,
                JointKind::Revolute
                    | JointKind::Prismatic
                    | JointKind::Cylindrical
                    | JointKind::Universal
                    | JointKind::Planar
            );
            if axis_needed {
                self.required(&j.axis, jspan.clone(), &el, "axis", &what)?;
            }
            let x_key = if kind == JointKind::Universal {
                "axis2"
            } else {
                "x_axis"
            };
            let xa = if kind == JointKind::Universal {
                j.axis2.as_ref()
            } else {
                j.x_axis.as_ref()
            };
            let rj = self.axes(j.axis.as_ref(), xa, &el, x_key)?;
            let theta0 = if kind == JointKind::Revolute {
                match &j.initial_angle {
                    Some(a) => self.number(a, &el, "initial_angle")?,
                    None => self.relative_angle(b1, b2, &rj.column(2).into_owned()),
                }
            } else {
                0.0
            };
            if kind == JointKind::Revolute {
                initial_angle = Some(theta0);
            }
            self.frames_from_global(b1, b2, point, rj, theta0)
        };
        if kind == JointKind::Spherical {
            // A particle cannot turn: a joint point away from it keeps its offset in global axes,
            // so the particle would not swing about the point but be held at the offset (fixed in
            // space when the other side is ground).
            for (b, f, other, fspan) in [
                (b1, &frame1, b2, j.frame1.as_ref().map(|x| x.span())),
                (b2, &frame2, b1, j.frame2.as_ref().map(|x| x.span())),
            ] {
                if !self.is_particle(b) {
                    continue;
                }
                let (r, _) = self.pose(b);
                let off = f.origin;
                let point = r + off;
                if off.norm() > 1e-9 * r.norm().max(point.norm()) {
                    let held = if other == BodyRef::Ground {
                        "fixed in space".to_string()
                    } else {
                        format!(
                            "moved with {}'s joint point without turning",
                            self.ref_name(other)
                        )
                    };
                    let span = j
                        .point
                        .as_ref()
                        .map(|x| x.span())
                        .or(fspan)
                        .unwrap_or(jspan);
                    return Err(self.err(
                        span,
                        &el,
                        format!(
                            "{} is a particle (no orientation), but the joint point {} is {} m away from it (offset {} m): a particle cannot turn about a point away from it, so the joint would hold it at that offset ({held}, no degree of freedom left by this joint, its initial velocity discarded); put the joint point at the particle's position {}, or, for a point mass swinging about the point, use a `distance` joint (a rod: point1 = the pivot, point2 = the particle)",
                            self.ref_name(b),
                            fmt_v(&point),
                            fmt_g(off.norm()),
                            fmt_v(&off),
                            fmt_v(&r),
                        ),
                    ));
                }
            }
        }
        self.joint_index
            .insert(j.name.get_ref().clone(), self.joint_specs.len());
        self.joint_specs.push(JointSpec {
            name: j.name.get_ref().clone(),
            kind,
            body1: b1,
            body2: b2,
            frame1,
            frame2,
            length,
            initial_angle,
        });
        Ok(())
    }

    pub(super) fn driver(&mut self, i: usize, d: &S<RawDriver>) -> Res<()> {
        let dspan = d.span();
        let d = d.get_ref();
        let el = label("drivers", i, d.name.get_ref());
        self.check_name(&d.name, &el)?;
        if self.driver_index.contains_key(d.name.get_ref()) {
            return Err(self.err(
                d.name.span(),
                &el,
                format!("duplicate driver name `{}`", d.name.get_ref()),
            ));
        }
        let target = match (&d.joint, &d.body) {
            (Some(jn), None) => {
                for (k, s) in [("point", d.point.as_ref().map(|x| x.span())), ("component", d.component.as_ref().map(|x| x.span()))] {
                    if let Some(s) = s {
                        return Err(self.err(s, &el, format!("key `{k}` does not apply to a joint driver (it belongs to a point driver with `body`)")));
                    }
                }
                let ji = self.joint_ref(jn, &el)?;
                let jk = self.joint_specs[ji].kind;
                self.ensure(matches!(jk, JointKind::Revolute | JointKind::Prismatic), jn.span(), &el, || {
                    format!("joint `{}` is a {} joint: drivers act on the single coordinate of a revolute or prismatic joint only (drive such a joint, or a point component with `body`)", jn.get_ref(), joint_kind_name(jk))
                })?;
                DriverTarget::JointCoordinate(ji)
            }
            (None, Some(bn)) => {
                let b = self.body_ref(bn, &el, "body")?;
                let BodyRef::Body(bi) = b else {
                    return Err(self.err(bn.span(), &el, format!("a point driver needs a body, not {}", self.ref_name(b))));
                };
                let point = match &d.point {
                    Some(p) => {
                        let g = self.vec3(p, &el, "point")?;
                        self.local_point(b, g)
                    }
                    None => Vector3::zeros(),
                };
                let c = self.required(&d.component, dspan.clone(), &el, "component", "a point driver")?;
                DriverTarget::PointComponent { body: bi, point, component: self.component(c, &el)? }
            }
            (Some(_), Some(bn)) => {
                return Err(self.err(bn.span(), &el, "give either `joint` (joint coordinate) or `body` (point component), not both"))
            }
            (None, None) => {
                return Err(self.err(dspan, &el, "missing key `joint` or `body`: a driver prescribes a joint coordinate or a point component"))
            }
        };
        // Two drivers on one coordinate over-determine it (or contradict each other).
        if let Some(other) = self.driver_specs.iter().find(|o| o.target == target) {
            let span = d
                .joint
                .as_ref()
                .or(d.body.as_ref())
                .map(|x| x.span())
                .unwrap_or(dspan);
            return Err(self.err(
                span,
                &el,
                format!("driver `{}` already prescribes this coordinate", other.name),
            ));
        }
        let motion = self.motion(&d.motion, &el, "motion")?;
        self.driver_index
            .insert(d.name.get_ref().clone(), self.driver_specs.len());
        self.driver_specs.push(DriverSpec {
            name: d.name.get_ref().clone(),
            target,
            motion,
        });
        Ok(())
    }

    pub(super) fn force(&mut self, i: usize, f: &S<RawForce>) -> Res<()> {
        let fspan = f.span();
        let f = f.get_ref();
        let el = label("forces", i, f.name.get_ref());
        self.check_name(&f.name, &el)?;
        if self.force_index.contains_key(f.name.get_ref()) {
            return Err(self.err(
                f.name.span(),
                &el,
                format!("duplicate force name `{}`", f.name.get_ref()),
            ));
        }
        let present = f.present_keys();
        let kname = f.kind.get_ref().as_str();
        let what = format!("a {kname} force");
        let sp = fspan.clone();
        let kind = match kname {
            "spring_damper" => {
                let law = f.law.as_ref().map(|l| l.get_ref().as_str()).unwrap_or("linear");
                let law_keys: &[&str] = match law {
                    "linear" => &["stiffness", "damping", "preload"],
                    "polynomial" => &["coeffs", "damping"],
                    "table" => &["table", "damping"],
                    other => {
                        let s = f.law.as_ref().map(|l| l.span()).unwrap_or(sp.clone());
                        return Err(self.err(s, &el, format!("unknown spring law \"{other}\" (one of: linear, polynomial, table)")));
                    }
                };
                let mut allowed = vec!["body1", "body2", "point1", "point2", "law", "free_length", "actuator", "static_preload", "damper_table"];
                allowed.extend_from_slice(law_keys);
                self.allowed_keys(&el, &format!("a {law} spring_damper"), &present, &allowed)?;
                let (b1, b2) = self.two_bodies(f, &el, sp.clone(), &what)?;
                let g1 = match &f.point1 {
                    Some(p) => self.vec3(p, &el, "point1")?,
                    None => self.pose(b1).0,
                };
                let g2 = match &f.point2 {
                    Some(p) => self.vec3(p, &el, "point2")?,
                    None => self.pose(b2).0,
                };
                let d = (g2 - g1).norm();
                let p2span = f.point2.as_ref().map(|p| p.span()).unwrap_or(sp.clone());
                self.ensure(d > 1e-12, p2span, &el, || "the two attachment points coincide at the initial configuration (the force direction is undefined)".into())?;
                let free_length = match &f.free_length {
                    Some(l) => self.nonneg_scalar(l, &el, "free_length", true, "m")?,
                    None => Scalar::Const(d),
                };
                let damping = match &f.damping {
                    Some(c) => self.one_nonneg(c, &el, "damping", "N s/m")?,
                    None => Scalar::Const(0.0),
                };
                let law = match law {
                    "linear" => {
                        let k = self.required(&f.stiffness, sp.clone(), &el, "stiffness", "a linear spring_damper")?;
                        let stiffness = self.one_nonneg(k, &el, "stiffness", "N/m")?;
                        let preload = match &f.preload {
                            Some(p) => {
                                // As for a bushing: the two would be added silently, and
                                // `check` would show their sum as the computed preload.
                                if let Some(s) = f.static_preload.as_ref().filter(|s| *s.get_ref()) {
                                    return Err(self.err(s.span(), &el, "`static_preload = true` computes the preload: give it or `preload`, not both"));
                                }
                                self.scalar(p, &el, "preload", true)?
                            }
                            None => Scalar::Const(0.0),
                        };
                        ForceLaw::Linear { stiffness, damping, preload }
                    }
                    "polynomial" => {
                        let c = self.required(&f.coeffs, sp.clone(), &el, "coeffs", "a polynomial spring_damper")?;
                        self.ensure(!c.get_ref().is_empty(), c.span(), &el, || "`coeffs` must not be empty".into())?;
                        let mut coeffs = Vec::new();
                        for x in c.get_ref() {
                            coeffs.push(self.scalar(x, &el, "coeffs", true)?);
                        }
                        ForceLaw::Polynomial { coeffs, damping }
                    }
                    _ => {
                        let t = self.required(&f.table, sp.clone(), &el, "table", "a table spring_damper")?;
                        let (file, deflection, force) = self.table_file(t, &el)?;
                        ForceLaw::Table { file, deflection, force, damping }
                    }
                };
                let law = match &f.damper_table {
                    Some(t) => self.damper_table(law, t, f.damping.as_ref().map(|d| d.span()), &el)?,
                    None => law,
                };
                let actuator = match &f.actuator {
                    Some(a) => Some(self.motion(a, &el, "actuator")?),
                    None => None,
                };
                ForceKind::SpringDamper {
                    body1: b1,
                    point1: self.local_point(b1, g1),
                    body2: b2,
                    point2: self.local_point(b2, g2),
                    free_length,
                    law,
                    actuator,
                }
            }
            "rotational_spring_damper" => {
                let (b1, frame1, b2, frame2, initial_angle) = if let Some(jn) = &f.joint {
                    self.allowed_keys(&el, "a rotational_spring_damper on a joint", &present, &["joint", "stiffness", "damping", "free_angle", "actuator", "static_preload", "table", "damper_table"])?;
                    let ji = self.joint_ref(jn, &el)?;
                    let js = &self.joint_specs[ji];
                    self.ensure(js.kind == JointKind::Revolute, jn.span(), &el, || {
                        format!("joint `{}` is a {} joint; a rotational spring takes its frames from a revolute joint", jn.get_ref(), joint_kind_name(js.kind))
                    })?;
                    (js.body1, js.frame1, js.body2, js.frame2, js.initial_angle)
                } else {
                    self.allowed_keys(&el, "a rotational_spring_damper between bodies", &present, &["body1", "body2", "point", "axis", "x_axis", "initial_angle", "stiffness", "damping", "free_angle", "actuator", "static_preload", "table", "damper_table"])?;
                    let (b1, b2) = self.two_bodies(f, &el, sp.clone(), &what)?;
                    self.check_rigid(b1, f.body1.as_ref().map(|b| b.span()).unwrap_or(sp.clone()), &el, &what)?;
                    self.check_rigid(b2, f.body2.as_ref().map(|b| b.span()).unwrap_or(sp.clone()), &el, &what)?;
                    let point = match &f.point {
                        Some(p) => self.vec3(p, &el, "point")?,
                        None => self.pose(b2).0,
                    };
                    let a = self.required(&f.axis, sp.clone(), &el, "axis", "a rotational_spring_damper without `joint`")?;
                    let rj = self.axes(Some(a), f.x_axis.as_ref(), &el, "x_axis")?;
                    let theta0 = match &f.initial_angle {
                        Some(a) => self.number(a, &el, "initial_angle")?,
                        None => self.relative_angle(b1, b2, &rj.column(2).into_owned()),
                    };
                    let (f1, f2) = self.frames_from_global(b1, b2, point, rj, theta0);
                    (b1, f1, b2, f2, Some(theta0))
                };
                let stiffness = match &f.stiffness {
                    Some(k) => self.one_nonneg(k, &el, "stiffness", "N m/rad")?,
                    None => Scalar::Const(0.0),
                };
                let damping = match &f.damping {
                    Some(c) => self.one_nonneg(c, &el, "damping", "N m s/rad")?,
                    None => Scalar::Const(0.0),
                };
                let free_angle = match &f.free_angle {
                    Some(a) => self.scalar(a, &el, "free_angle", true)?,
                    None => Scalar::Const(0.0),
                };
                let actuator = match &f.actuator {
                    Some(a) => Some(self.motion(a, &el, "actuator")?),
                    None => None,
                };
                let (table, damper_table) = self.torsion_tables(f, &el)?;
                ForceKind::RotationalSpringDamper { body1: b1, frame1, body2: b2, frame2, stiffness, damping, free_angle, actuator, table, damper_table, initial_angle }
            }
            "bushing" => {
                self.allowed_keys(&el, &what, &present, &["body1", "body2", "point", "axis", "x_axis", "frame1", "frame2", "stiffness", "damping", "rot_stiffness", "rot_damping", "static_preload", "preload_force", "preload_torque", "tables", "damper_tables"])?;
                let (b1, b2) = self.two_bodies(f, &el, sp.clone(), &what)?;
                self.check_rigid(b1, f.body1.as_ref().map(|b| b.span()).unwrap_or(sp.clone()), &el, &what)?;
                self.check_rigid(b2, f.body2.as_ref().map(|b| b.span()).unwrap_or(sp.clone()), &el, &what)?;
                let (frame1, frame2) = if f.frame1.is_some() || f.frame2.is_some() {
                    for (k, s) in [("point", f.point.as_ref().map(|x| x.span())), ("axis", f.axis.as_ref().map(|x| x.span())), ("x_axis", f.x_axis.as_ref().map(|x| x.span()))] {
                        if let Some(s) = s {
                            return Err(self.err(s, &el, format!("key `{k}` cannot be combined with explicit `frame1`/`frame2`")));
                        }
                    }
                    let f1 = self.required(&f.frame1, sp.clone(), &el, "frame1", "a bushing with an explicit frame2")?;
                    let f2 = self.required(&f.frame2, sp.clone(), &el, "frame2", "a bushing with an explicit frame1")?;
                    (self.explicit_frame(f1, &el)?, self.explicit_frame(f2, &el)?)
                } else {
                    let point = match &f.point {
                        Some(p) => self.vec3(p, &el, "point")?,
                        None => self.pose(b2).0,
                    };
                    let rj = self.axes(f.axis.as_ref(), f.x_axis.as_ref(), &el, "x_axis")?;
                    self.frames_from_global(b1, b2, point, rj, 0.0)
                };
                let stiffness = self.three_nonneg(f.stiffness.as_ref(), &el, "stiffness", "N/m")?;
                let damping = self.three_nonneg(f.damping.as_ref(), &el, "damping", "N s/m")?;
                let rot_stiffness = self.list_nonneg(f.rot_stiffness.as_ref(), &el, "rot_stiffness", "N m/rad")?;
                let rot_damping = self.list_nonneg(f.rot_damping.as_ref(), &el, "rot_damping", "N m s/rad")?;
                let preload = self.bushing_preload(f, &el)?;
                let tables = Box::new(self.bushing_tables(f, &el, &stiffness, &rot_stiffness)?);
                let damper_tables = Box::new(self.bushing_damper_tables(f, &el, &damping, &rot_damping)?);
                ForceKind::Bushing { preload, body1: b1, frame1, body2: b2, frame2, stiffness, damping, rot_stiffness, rot_damping, tables, damper_tables }
            }
            "contact" => self.contact(f, &el, sp.clone(), &present)?,
            "tire" => self.tire(f, &el, sp.clone(), &present)?,
            "prismatic_friction" | "revolute_friction" => self.joint_friction(f, &el, sp.clone(), &present)?,
            "joint_stop" => self.joint_stop(f, &el, sp.clone(), &present)?,
            other => {
                return Err(self.err(
                    f.kind.span(),
                    &el,
                    format!("unknown force type \"{other}\" (one of: spring_damper, rotational_spring_damper, bushing, contact, prismatic_friction, revolute_friction, joint_stop, tire; gravity is set in [model])"),
                ))
            }
        };
        self.force_index
            .insert(f.name.get_ref().clone(), self.force_specs.len());
        self.force_specs.push(ForceSpec {
            name: f.name.get_ref().clone(),
            kind,
            static_preload: f.static_preload.as_ref().is_some_and(|b| *b.get_ref()),
        });
        Ok(())
    }

    fn two_bodies(
        &self,
        f: &RawForce,
        el: &str,
        sp: Range<usize>,
        what: &str,
    ) -> Res<(BodyRef, BodyRef)> {
        let n1 = self.required(&f.body1, sp.clone(), el, "body1", what)?;
        let n2 = self.required(&f.body2, sp, el, "body2", what)?;
        let b1 = self.body_ref(n1, el, "body1")?;
        let b2 = self.body_ref(n2, el, "body2")?;
        self.check_two_ends(b1, b2, n2.span(), el)?;
        Ok((b1, b2))
    }

    pub(super) fn one_nonneg(
        &mut self,
        v: &S<NumOrList>,
        el: &str,
        field: &str,
        unit: &str,
    ) -> Res<Scalar> {
        match v.get_ref() {
            NumOrList::One(n) => {
                self.nonneg_scalar(&S::new(v.span(), n.clone()), el, field, true, unit)
            }
            NumOrList::List(_) => Err(self.err(
                v.span(),
                el,
                format!("`{field}` must be a single number here, not a list"),
            )),
        }
    }

    fn three_nonneg(
        &mut self,
        v: Option<&S<NumOrList>>,
        el: &str,
        field: &str,
        unit: &str,
    ) -> Res<[Scalar; 3]> {
        let Some(v) = v else {
            return Ok([Scalar::Const(0.0); 3]);
        };
        match v.get_ref() {
            NumOrList::One(_) => Err(self.err(
                v.span(),
                el,
                format!("`{field}` of a bushing is a list of 3 values (per axis of frame 1)"),
            )),
            NumOrList::List(items) => {
                self.ensure(items.len() == 3, v.span(), el, || {
                    format!("`{field}` needs 3 components, got {}", items.len())
                })?;
                let mut out = [Scalar::Const(0.0); 3];
                for (k, x) in items.iter().enumerate() {
                    out[k] = self.nonneg_scalar(x, el, field, true, unit)?;
                }
                Ok(out)
            }
        }
    }

    fn list_nonneg(
        &mut self,
        v: Option<&NumList>,
        el: &str,
        field: &str,
        unit: &str,
    ) -> Res<[Scalar; 3]> {
        let Some(v) = v else {
            return Ok([Scalar::Const(0.0); 3]);
        };
        let items = v.get_ref();
        self.ensure(items.len() == 3, v.span(), el, || {
            format!("`{field}` needs 3 components, got {}", items.len())
        })?;
        let mut out = [Scalar::Const(0.0); 3];
        for (k, x) in items.iter().enumerate() {
            out[k] = self.nonneg_scalar(x, el, field, true, unit)?;
        }
        Ok(out)
    }

    fn contact(
        &mut self,
        f: &RawForce,
        el: &str,
        sp: Range<usize>,
        present: &[(&'static str, Range<usize>)],
    ) -> Res<ForceKind> {
        let g = self.required(
            &f.geometry,
            sp.clone(),
            el,
            "geometry",
            "a contact force (sphere_plane or sphere_sphere)",
        )?;
        let common = [
            "geometry",
            "law",
            "stiffness",
            "damping",
            "mu",
            "v_reg",
            "mu_static",
            "stiction_stiffness",
            "stiction_damping",
            "stiction_velocity",
        ];
        let law = match f.law.as_ref().map(|l| (l.get_ref().as_str(), l.span())) {
            None | Some(("linear", _)) => ContactLaw::Linear,
            Some(("hertz", _)) => ContactLaw::Hertz,
            Some((other, s)) => {
                return Err(self.err(
                    s,
                    el,
                    format!("unknown contact law \"{other}\" (one of: linear, hertz)"),
                ))
            }
        };
        let geometry = match g.get_ref().as_str() {
            "sphere_plane" => {
                let mut allowed = common.to_vec();
                allowed
                    .extend_from_slice(&["sphere", "center", "radius", "plane", "point", "normal"]);
                self.allowed_keys(el, "a sphere_plane contact", present, &allowed)?;
                let sn = self.required(
                    &f.sphere,
                    sp.clone(),
                    el,
                    "sphere",
                    "a sphere_plane contact",
                )?;
                let sb = self.body_ref(sn, el, "sphere")?;
                let pb = match &f.plane {
                    Some(p) => {
                        let pb = self.body_ref(p, el, "plane")?;
                        self.check_two_ends(sb, pb, p.span(), el)?;
                        self.check_rigid(pb, p.span(), el, "the plane of a contact")?;
                        pb
                    }
                    None => {
                        self.check_two_ends(sb, BodyRef::Ground, sn.span(), el)?;
                        BodyRef::Ground
                    }
                };
                let c = match &f.center {
                    Some(c) => self.vec3(c, el, "center")?,
                    None => self.pose(sb).0,
                };
                let r = self.required(
                    &f.radius,
                    sp.clone(),
                    el,
                    "radius",
                    "a sphere_plane contact",
                )?;
                let radius = self.positive_scalar(r, el, "radius", false, "m")?;
                let p = match &f.point {
                    Some(p) => self.vec3(p, el, "point")?,
                    None => Vector3::zeros(),
                };
                let nl = self.required(
                    &f.normal,
                    sp.clone(),
                    el,
                    "normal",
                    "a sphere_plane contact",
                )?;
                let n = self.unit_vec3(nl, el, "normal")?;
                // A centre behind the plane is a penalty force of the whole depth at the start:
                // a sign or position slip launches the sphere (5 m deep: at 1600 m/s).
                let height = (c - p).dot(&n);
                let r0 = self.value_of(radius);
                if height < 0.0 {
                    let w = self.err(
                        r.span(),
                        el,
                        format!(
                            "the sphere's centre starts {} m behind the plane (along `normal` \
                             {}), {:.1} radii deep: the contact pushes it out with the force of \
                             that whole depth at the start. A sign of `normal`, or a position, \
                             wrong?",
                            fmt_g(-height),
                            fmt_v(&n),
                            (r0 - height) / r0
                        ),
                    );
                    self.element_warnings.push(w.to_string());
                }
                let (_, ap) = self.pose(pb);
                ContactGeometry::SpherePlane {
                    sphere_body: sb,
                    center: self.local_point(sb, c),
                    radius,
                    plane_body: pb,
                    point: self.local_point(pb, p),
                    normal: ap.transpose() * n,
                }
            }
            "sphere_sphere" => {
                let mut allowed = common.to_vec();
                allowed.extend_from_slice(&[
                    "body1", "body2", "center1", "center2", "radius1", "radius2",
                ]);
                self.allowed_keys(el, "a sphere_sphere contact", present, &allowed)?;
                let (b1, b2) = self.two_bodies(f, el, sp.clone(), "a sphere_sphere contact")?;
                let c1 = match &f.center1 {
                    Some(c) => self.vec3(c, el, "center1")?,
                    None => self.pose(b1).0,
                };
                let c2 = match &f.center2 {
                    Some(c) => self.vec3(c, el, "center2")?,
                    None => self.pose(b2).0,
                };
                let r1 = self.required(
                    &f.radius1,
                    sp.clone(),
                    el,
                    "radius1",
                    "a sphere_sphere contact",
                )?;
                let radius1 = self.positive_scalar(r1, el, "radius1", false, "m")?;
                let r2 = self.required(
                    &f.radius2,
                    sp.clone(),
                    el,
                    "radius2",
                    "a sphere_sphere contact",
                )?;
                let radius2 = self.positive_scalar(r2, el, "radius2", false, "m")?;
                ContactGeometry::SphereSphere {
                    body1: b1,
                    center1: self.local_point(b1, c1),
                    radius1,
                    body2: b2,
                    center2: self.local_point(b2, c2),
                    radius2,
                }
            }
            other => {
                return Err(self.err(
                    g.span(),
                    el,
                    format!(
                    "unknown contact geometry \"{other}\" (one of: sphere_plane, sphere_sphere)"
                ),
                ))
            }
        };
        let k = self.required(&f.stiffness, sp.clone(), el, "stiffness", "a contact force")?;
        let stiffness = self.one_nonneg(k, el, "stiffness", "N/m")?;
        let (v, from) = (self.value_of(stiffness), self.source_of(stiffness));
        self.ensure(v > 0.0, k.span(), el, || {
            format!(
                "contact `stiffness` must be positive, got {v} {}{from}",
                "N/m"
            )
        })?;
        let damping = match &f.damping {
            Some(c) => self.one_nonneg(c, el, "damping", "N s/m")?,
            None => Scalar::Const(0.0),
        };
        let friction = self.contact_friction(f, el, sp, present)?;
        Ok(ForceKind::Contact {
            geometry,
            law,
            stiffness,
            damping,
            friction,
        })
    }

    pub(super) fn output(&mut self, i: usize, o: &S<RawOutput>) -> Res<OutputSpec> {
        let ospan = o.span();
        let o = o.get_ref();
        let el = label("outputs", i, o.name.get_ref());
        self.claim_variable(&o.name, &el)?;
        let present = o.present_keys();
        let kname = o.kind.get_ref().as_str();
        let what = format!("a {kname} output");
        let sp = ospan;
        let (quantity, unit): (OutputQuantity, &str) = match kname {
            "position" | "velocity" | "acceleration" => {
                self.allowed_keys(&el, &what, &present, &["body", "point", "component"])?;
                let bn = self.required(&o.body, sp.clone(), &el, "body", &what)?;
                let body = self.body_ref(bn, &el, "body")?;
                let point = match &o.point {
                    Some(p) => {
                        let g = self.vec3(p, &el, "point")?;
                        self.local_point(body, g)
                    }
                    None => Vector3::zeros(),
                };
                let c = self.required(&o.component, sp.clone(), &el, "component", &what)?;
                let component = self.component(c, &el)?;
                match kname {
                    "position" => (OutputQuantity::Position { body, point, component }, "m"),
                    "velocity" => (OutputQuantity::Velocity { body, point, component }, "m/s"),
                    _ => (OutputQuantity::Acceleration { body, point, component }, "m/s2"),
                }
            }
            "relative_position" | "relative_velocity" | "relative_acceleration" => self.relative_output(o, kname, &el, sp.clone(), &present)?,
            "camber" | "toe" | "caster" | "kingpin" => self.wheel_angle_output(o, kname, &el, sp.clone(), &present)?,
            "angle" | "angular_velocity" => {
                self.allowed_keys(&el, &what, &present, &["body", "axis"])?;
                let bn = self.required(&o.body, sp.clone(), &el, "body", &what)?;
                let b = self.body_ref(bn, &el, "body")?;
                let BodyRef::Body(body) = b else {
                    return Err(self.err(bn.span(), &el, format!("{what} needs a body, not {}", self.ref_name(b))));
                };
                self.check_rigid(b, bn.span(), &el, &what)?;
                let axis = match &o.axis {
                    Some(a) => self.unit_vec3(a, &el, "axis")?,
                    None => Vector3::z(),
                };
                if kname == "angle" {
                    (OutputQuantity::Angle { body, axis }, "rad")
                } else {
                    (OutputQuantity::AngularVelocity { body, axis }, "rad/s")
                }
            }
            "joint_coordinate" | "joint_rate" => {
                self.allowed_keys(&el, &what, &present, &["joint"])?;
                let jn = self.required(&o.joint, sp.clone(), &el, "joint", &what)?;
                let joint = self.joint_ref(jn, &el)?;
                let jk = self.joint_specs[joint].kind;
                self.ensure(matches!(jk, JointKind::Revolute | JointKind::Prismatic), jn.span(), &el, || {
                    format!("joint `{}` is a {} joint: `joint_coordinate` and `joint_rate` read the single coordinate of a revolute or prismatic joint only (use `position`, `angle` or `relative_*` outputs)", jn.get_ref(), joint_kind_name(jk))
                })?;
                let rot = jk == JointKind::Revolute;
                if kname == "joint_coordinate" {
                    (OutputQuantity::JointCoordinate { joint }, if rot { "rad" } else { "m" })
                } else {
                    (OutputQuantity::JointRate { joint }, if rot { "rad/s" } else { "m/s" })
                }
            }
            "joint_force" | "joint_torque" => self.joint_reaction_output(o, kname, &el, sp.clone(), &present)?,
            "driver_force" => {
                self.allowed_keys(&el, &what, &present, &["driver"])?;
                let dn = self.required(&o.driver, sp.clone(), &el, "driver", &what)?;
                let driver = *self.driver_index.get(dn.get_ref()).ok_or_else(|| {
                    let hint = did_you_mean(dn.get_ref(), self.driver_index.keys());
                    self.err(dn.span(), &el, format!("no driver named `{}`{hint}", dn.get_ref()))
                })?;
                let rot = matches!(self.driver_specs[driver].target, DriverTarget::JointCoordinate(j) if self.joint_specs[j].kind == JointKind::Revolute);
                (OutputQuantity::DriverForce { driver }, if rot { "N.m" } else { "N" })
            }
            "element_force" | "element_length" => self.element_output(o, kname, &el, sp.clone(), &present)?,
            "tire" => self.tire_output(o, &el, sp.clone(), &present)?,
            "contact_friction" => self.contact_friction_output(o, &el, sp.clone(), &present)?,
            "energy" => {
                self.allowed_keys(&el, &what, &present, NO_KEYS)?;
                (OutputQuantity::Energy, "J")
            }
            other => {
                return Err(self.err(
                    o.kind.span(),
                    &el,
                    format!("unknown output type \"{other}\" (one of: position, velocity, acceleration, angle, angular_velocity, joint_coordinate, joint_rate, joint_force, joint_torque, driver_force, element_force, element_length, tire, contact_friction, energy, relative_position, relative_velocity, relative_acceleration, camber, toe, caster, kingpin)"),
                ))
            }
        };
        let scale = match &o.scale {
            Some(s) => {
                let v = self.number(s, &el, "scale")?;
                self.ensure(v != 0.0, s.span(), &el, || {
                    "`scale` must not be zero".into()
                })?;
                v
            }
            None => 1.0,
        };
        let given_unit = self.xml_string(&o.unit, &el, "unit")?;
        if let Some(u) = &o.unit {
            self.output_unit(u, unit, scale, &el)?;
        }
        let description = self
            .xml_string(&o.description, &el, "description")?
            .unwrap_or_default();
        Ok(OutputSpec {
            name: o.name.get_ref().clone(),
            unit: given_unit.unwrap_or_else(|| {
                if scale.abs() == 1.0 {
                    unit.to_string()
                } else {
                    String::new()
                }
            }),
            description,
            quantity,
            scale,
        })
    }
}

impl Resolver<'_> {
    /// An output's `unit` must say what its value is: the quantity (in SI units, `unit_si`)
    /// times `scale`. So the unit has the quantity's dimension and the factor `1/|scale|`
    /// (`deg` with `scale = "180/pi"`, `mm` with `scale = 1000`); a unit mbsfmu does not know
    /// is a warning.
    fn output_unit(&mut self, u: &S<String>, unit_si: &str, scale: f64, el: &str) -> Res<()> {
        let Some(b) = self.declared_unit(u, el)? else {
            return Ok(());
        };
        let Some(q) = crate::description::units::parse_unit(unit_si) else {
            return Ok(());
        };
        let text = u.get_ref().trim();
        self.ensure(b.same_dimension(&q), u.span(), el, || {
            format!(
                "`unit` = \"{text}\" is a unit of {}, but this output is a quantity in \
                 {unit_si}{}: give a unit of that dimension",
                b.si_unit(),
                if q.si_unit() == unit_si {
                    String::new()
                } else {
                    format!(" (dimension {})", q.si_unit())
                }
            )
        })?;
        let k = b.factor * scale.abs();
        self.ensure((k - 1.0).abs() <= 1e-9, u.span(), el, || {
            let (value, or) = if scale == 1.0 {
                (
                    format!("the quantity in {unit_si} (no `scale`)"),
                    format!("`unit` = \"{unit_si}\""),
                )
            } else {
                (
                    format!(
                        "`scale` = {} times the quantity in {unit_si}",
                        super::fmt_factor(scale)
                    ),
                    "the unit of the scaled value".to_string(),
                )
            };
            format!(
                "`unit` = \"{text}\" is {} {unit_si}, but the output's value is {value}: give \
                 `scale` = {} to output it in {text}, or {or} (as written, an importer \
                 converting units would be off by a factor {})",
                super::fmt_factor(b.factor),
                match super::fmt_factor(scale.signum() / b.factor) {
                    t if t.contains('/') => format!("\"{t}\""),
                    t => t,
                },
                super::fmt_factor(1.0 / k)
            )
        })?;
        Ok(())
    }
}

/// `x` rounded to 6 significant digits, printed without trailing zeros.
fn sig6(x: f64) -> f64 {
    format!("{x:.5e}").parse().unwrap_or(x)
}

pub(super) fn joint_kind_name(k: JointKind) -> &'static str {
    match k {
        JointKind::Revolute => "revolute",
        JointKind::Prismatic => "prismatic",
        JointKind::Spherical => "spherical",
        JointKind::Universal => "universal",
        JointKind::Cylindrical => "cylindrical",
        JointKind::Fixed => "fixed",
        JointKind::Distance => "distance",
        JointKind::Planar => "planar",
    }
}

/// A number as a user would write it: 10 significant digits, shortest form (`0.6`, not
/// `0.6000000000000001`; `0`, not `-0`).
fn fmt_g(x: f64) -> String {
    let r: f64 = format!("{x:.9e}").parse().unwrap_or(x);
    format!("{}", r + 0.0)
}

/// A global vector as in the model file: `[0.6, 0, -0.8]`.
fn fmt_v(v: &Vector3<f64>) -> String {
    format!("[{}, {}, {}]", fmt_g(v.x), fmt_g(v.y), fmt_g(v.z))
}
