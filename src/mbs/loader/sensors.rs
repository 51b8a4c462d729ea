//! Sensor outputs: relative position, velocity and acceleration of one marker with respect
//! to another, resolved along the axes of a chosen body; wheel alignment angles; joint
//! reactions along a chosen frame and a rod's axial force (docs/model-format.md, *Outputs*).

use super::elements::joint_kind_name;
use super::*;

impl Resolver<'_> {
    /// `camber`, `toe` (keys `body`, `axis`: the outboard wheel axis) and `caster`, `kingpin`
    /// (keys `body`, `axis`, `point1`, `point2`: the steering axis from lower to upper).
    pub(super) fn wheel_angle_output(
        &mut self,
        o: &RawOutput,
        kname: &str,
        el: &str,
        sp: Range<usize>,
        present: &[(&'static str, Range<usize>)],
    ) -> Res<(OutputQuantity, &'static str)> {
        let what = format!("a {kname} output");
        let steering = matches!(kname, "caster" | "kingpin");
        let keys: &[&str] = if steering {
            &["body", "axis", "point1", "point2"]
        } else {
            &["body", "axis"]
        };
        self.allowed_keys(el, &what, present, keys)?;
        let bn = self.required(&o.body, sp.clone(), el, "body", &what)?;
        let b = self.body_ref(bn, el, "body")?;
        let BodyRef::Body(body) = b else {
            return Err(self.err(
                bn.span(),
                el,
                format!("{what} needs a body, not {}", self.ref_name(b)),
            ));
        };
        self.check_rigid(b, bn.span(), el, &what)?;
        let ax = self.required(&o.axis, sp.clone(), el, "axis", &what)?;
        let axis_global = self.unit_vec3(ax, el, "axis")?;
        self.ensure(axis_global.y.abs() > 1e-9, ax.span(), el, || {
            "`axis` is the outboard wheel axis (vehicle y left): it needs a y component (+ for a left wheel, − for a right one)".into()
        })?;
        let side = axis_global.y.signum();
        let (_, rot) = self.pose(b);
        let axis = rot.transpose() * axis_global;
        let (mut point1, mut point2) = (Vector3::zeros(), Vector3::zeros());
        if steering {
            let p1 = self.required(&o.point1, sp.clone(), el, "point1", &what)?;
            let p2 = self.required(&o.point2, sp.clone(), el, "point2", &what)?;
            let (g1, g2) = (self.vec3(p1, el, "point1")?, self.vec3(p2, el, "point2")?);
            self.ensure((g2 - g1).norm() > 1e-9, p2.span(), el, || {
                "`point1` and `point2` (the steering axis) coincide".into()
            })?;
            point1 = self.local_point(b, g1);
            point2 = self.local_point(b, g2);
        }
        let kind = match kname {
            "camber" => 0,
            "toe" => 1,
            "caster" => 2,
            _ => 3,
        };
        Ok((
            OutputQuantity::WheelAngle {
                kind,
                body,
                axis,
                point1,
                point2,
                side,
            },
            "rad",
        ))
    }

    pub(super) fn relative_output(
        &mut self,
        o: &RawOutput,
        kname: &str,
        el: &str,
        sp: Range<usize>,
        present: &[(&'static str, Range<usize>)],
    ) -> Res<(OutputQuantity, &'static str)> {
        let what = format!("a {kname} output");
        self.allowed_keys(
            el,
            &what,
            present,
            &[
                "body1",
                "point1",
                "body2",
                "point2",
                "frame",
                "component",
                "joint",
            ],
        )?;
        let marker = |r: &mut Self,
                      body: &Option<S<String>>,
                      point: &Option<NumList>,
                      b: &str,
                      p: &str|
         -> Res<(BodyRef, Vector3<f64>)> {
            let bn = r.required(body, sp.clone(), el, b, &what)?;
            let body = r.body_ref(bn, el, b)?;
            let local = match point {
                Some(x) => {
                    let g = r.vec3(x, el, p)?;
                    r.local_point(body, g)
                }
                None => Vector3::zeros(),
            };
            Ok((body, local))
        };
        let (body1, point1) = marker(self, &o.body1, &o.point1, "body1", "point1")?;
        let (body2, point2) = marker(self, &o.body2, &o.point2, "body2", "point2")?;
        let (frame, axes) = self.resolving_frame(o, el, &what)?;
        let c = self.required(&o.component, sp.clone(), el, "component", &what)?;
        let component = self.component(c, el)?;
        let (order, unit) = match kname {
            "relative_position" => (0, "m"),
            "relative_velocity" => (1, "m/s"),
            _ => (2, "m/s2"),
        };
        Ok((
            OutputQuantity::Relative {
                order,
                body1,
                point1,
                body2,
                point2,
                frame,
                axes,
                component,
            },
            unit,
        ))
    }

    /// The axes a relative output is resolved along: `frame` a body (its own axes, default
    /// ground), or with `joint` that joint's `"frame1"` (default) or `"frame2"`.
    fn resolving_frame(
        &mut self,
        o: &RawOutput,
        el: &str,
        what: &str,
    ) -> Res<(BodyRef, nalgebra::Matrix3<f64>)> {
        let is_joint_frame = |f: &S<String>| matches!(f.get_ref().as_str(), "frame1" | "frame2");
        let Some(jn) = &o.joint else {
            return match &o.frame {
                Some(f) if is_joint_frame(f) => Err(self.err(
                    f.span(),
                    el,
                    format!(
                        "`frame = \"{}\"` is a joint's frame: give the joint with `joint`",
                        f.get_ref()
                    ),
                )),
                Some(f) => {
                    let b = self.body_ref(f, el, "frame")?;
                    self.check_rigid(b, f.span(), el, &format!("the `frame` of {what}"))?;
                    Ok((b, nalgebra::Matrix3::identity()))
                }
                None => Ok((BodyRef::Ground, nalgebra::Matrix3::identity())),
            };
        };
        let j = self.joint_ref(jn, el)?;
        let second = match &o.frame {
            None => false,
            Some(f) if is_joint_frame(f) => f.get_ref() == "frame2",
            Some(f) => {
                return Err(self.err(
                    f.span(),
                    el,
                    format!("with `joint`, `frame` is \"frame1\" or \"frame2\" (that joint's frames), got \"{}\"", f.get_ref()),
                ))
            }
        };
        let js = &self.joint_specs[j];
        let (b, axes) = if second {
            (js.body2, js.frame2.axes)
        } else {
            (js.body1, js.frame1.axes)
        };
        self.check_rigid(b, jn.span(), el, &format!("the joint frame of {what}"))?;
        Ok((b, axes))
    }

    /// `joint_force` / `joint_torque`: keys `joint`, `component` (`x`, `y`, `z`; `axial` for
    /// a distance joint's rod tension) and `frame` (`"frame1"` default, `"frame2"`, or a rigid
    /// body / `ground` whose axes resolve the reaction).
    pub(super) fn joint_reaction_output(
        &mut self,
        o: &RawOutput,
        kname: &str,
        el: &str,
        sp: Range<usize>,
        present: &[(&'static str, Range<usize>)],
    ) -> Res<(OutputQuantity, &'static str)> {
        let what = format!("a {kname} output");
        self.allowed_keys(el, &what, present, &["joint", "component", "frame"])?;
        let jn = self.required(&o.joint, sp.clone(), el, "joint", &what)?;
        let joint = self.joint_ref(jn, el)?;
        let c = self.required(&o.component, sp.clone(), el, "component", &what)?;
        let force = kname == "joint_force";
        if c.get_ref() == "axial" {
            let kind = self.joint_specs[joint].kind;
            self.ensure(force && kind == JointKind::Distance, c.span(), el, || {
                if force {
                    format!(
                        "`component = \"axial\"` is the rod force of a distance joint; joint `{}` is a {} joint (use \"x\", \"y\" or \"z\" with `frame`)",
                        jn.get_ref(),
                        joint_kind_name(kind)
                    )
                } else {
                    "`component = \"axial\"` is for `joint_force` on a distance joint (the rod carries no torque)".into()
                }
            })?;
            if let Some(f) = &o.frame {
                return Err(self.err(
                    f.span(),
                    el,
                    "`frame` does not apply to the axial rod force (it is along the rod)",
                ));
            }
            let q = OutputQuantity::JointForce {
                joint,
                component: 0,
                axes: ReactionAxes::RodAxial,
            };
            return Ok((q, "N"));
        }
        let component = self.component(c, el)?;
        let axes = match o.frame.as_ref() {
            None => ReactionAxes::Frame1,
            Some(f) if f.get_ref() == "frame1" => ReactionAxes::Frame1,
            Some(f) if f.get_ref() == "frame2" => ReactionAxes::Frame2,
            Some(f) => {
                let b = self.body_ref(f, el, "frame").map_err(|_| {
                    self.err(
                        f.span(),
                        el,
                        format!(
                            "`frame`: \"{}\" is neither \"frame1\", \"frame2\" (the joint's frames) nor a body, frame or \"ground\"",
                            f.get_ref()
                        ),
                    )
                })?;
                self.check_rigid(b, f.span(), el, &format!("the `frame` of {what}"))?;
                ReactionAxes::Body(b)
            }
        };
        Ok(if force {
            (
                OutputQuantity::JointForce {
                    joint,
                    component,
                    axes,
                },
                "N",
            )
        } else {
            (
                OutputQuantity::JointTorque {
                    joint,
                    component,
                    axes,
                },
                "N.m",
            )
        })
    }

    /// `element_force` / `element_length`: key `force`, and for a bushing optionally
    /// `component` (`x`, `y`, `z`: force on body 2 along frame-1 axes / deflection; `rx`, `ry`,
    /// `rz`: torque / rotation).
    pub(super) fn element_output(
        &mut self,
        o: &RawOutput,
        kname: &str,
        el: &str,
        sp: Range<usize>,
        present: &[(&'static str, Range<usize>)],
    ) -> Res<(OutputQuantity, &'static str)> {
        let what = format!("a {kname} output");
        self.allowed_keys(el, &what, present, &["force", "component"])?;
        let fnm = self.required(&o.force, sp, el, "force", &what)?;
        let force = *self.force_index.get(fnm.get_ref()).ok_or_else(|| {
            let hint = did_you_mean(fnm.get_ref(), self.force_index.keys());
            self.err(
                fnm.span(),
                el,
                format!("no force element named `{}`{hint}", fnm.get_ref()),
            )
        })?;
        let length = kname == "element_length";
        let kind = &self.force_specs[force].kind;
        if let Some(c) = &o.component {
            self.ensure(
                matches!(kind, ForceKind::Bushing { .. }),
                c.span(),
                el,
                || {
                    format!(
                    "`component` selects one of a bushing's six components; `{}` is not a bushing",
                    fnm.get_ref()
                )
                },
            )?;
            const NAMES: [&str; 6] = ["x", "y", "z", "rx", "ry", "rz"];
            let component = NAMES.iter().position(|n| n == c.get_ref()).ok_or_else(|| {
                self.err(
                    c.span(),
                    el,
                    format!(
                        "`component` of a bushing is one of \"x\", \"y\", \"z\", \"rx\", \"ry\", \"rz\", got \"{}\"",
                        c.get_ref()
                    ),
                )
            })?;
            let unit = match (component < 3, length) {
                (true, false) => "N",
                (false, false) => "N.m",
                (true, true) => "m",
                (false, true) => "rad",
            };
            let q = OutputQuantity::ElementComponent {
                force,
                component,
                length,
            };
            return Ok((q, unit));
        }
        // Torques and angles: rotational springs, and friction and stops on a revolute joint.
        let rot = match kind {
            ForceKind::RotationalSpringDamper { .. } | ForceKind::RevoluteFriction { .. } => true,
            ForceKind::JointStop { joint, .. } => {
                self.joint_specs[*joint].kind == JointKind::Revolute
            }
            _ => false,
        };
        Ok(if length {
            (
                OutputQuantity::ElementLength { force },
                if rot { "rad" } else { "m" },
            )
        } else {
            (
                OutputQuantity::ElementForce { force },
                if rot { "N.m" } else { "N" },
            )
        })
    }
}
