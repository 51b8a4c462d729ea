//! Outputs (positions, velocities, accelerations, angles, forces, reactions, sensors) at a
//! state, the forces of single elements, and the mechanical energy.

use super::{output_needs_dynamics, unit, Law, RowOwner, SpringLaw, System};
use crate::integrate::system::Mechanical;
use crate::integrate::MechState;
use crate::mbs::kin::{raw_angle, raw_angle_rate, Coord, Need, QDef, Snapshot};
use crate::mbs::spec::*;
use crate::mbs::ModelError;
use nalgebra::{DMatrix, DVector, Vector3, Vector4};

impl System {
    pub fn n_outputs(&self) -> usize {
        self.spec.outputs.len()
    }

    /// Evaluate every output at the state `x` (accelerations and reactions from the
    /// saddle-point system at `x`).
    pub fn evaluate_outputs(&mut self, x: &MechState, out: &mut [f64]) -> Result<(), ModelError> {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.evaluate_outputs(s, x, out));
        }
        let needs_dynamics = self
            .spec
            .outputs
            .iter()
            .any(|o| output_needs_dynamics(&o.quantity));
        let (acc, lambda) = if needs_dynamics {
            self.accelerations(x.t, &x.q, &x.v)?
        } else {
            (Vec::new(), Vec::new())
        };
        self.load(x.t, &x.q, Some(&x.v));
        let spec = self.spec.clone();
        for (k, o) in spec.outputs.iter().enumerate() {
            out[k] = o.scale * self.output(k, &o.quantity, (x.t, &x.q, &x.v), &acc, &lambda);
        }
        Ok(())
    }

    /// Outputs at the absolute state `(t, q, v)` whose only dynamic outputs are driver forces,
    /// given by `driver_force` (the joint formulation's inverse dynamics): no saddle-point
    /// solve here. `snap` is that state's snapshot, which the joint formulation has already
    /// made (unpacking `q` again costs a rotation matrix per body, a third of the outputs'
    /// cost on the double pendulum).
    pub(in crate::mbs) fn evaluate_outputs_given_drivers(
        &mut self,
        (t, q, v): (f64, &[f64], &[f64]),
        snap: &mut Snapshot,
        out: &mut [f64],
        driver_force: impl Fn(usize) -> f64,
    ) {
        std::mem::swap(&mut self.snap, snap);
        let spec = self.spec.clone();
        for (k, o) in spec.outputs.iter().enumerate() {
            out[k] = o.scale
                * match o.quantity {
                    OutputQuantity::DriverForce { driver } => driver_force(driver),
                    ref qty => self.output(k, qty, (t, q, v), &[], &[]),
                };
        }
        std::mem::swap(&mut self.snap, snap);
    }

    /// Whether accepting a step updates stick states (besides tracking angle branches).
    pub(in crate::mbs) fn has_stick_states(&self) -> bool {
        !self.stick.is_empty() || !self.contact_stick.is_empty()
    }

    /// Track the angle branches at an accepted step at `t` from a snapshot with velocities;
    /// `direct(slot)` is the continuous value where the formulation knows it (a tree joint's
    /// own coordinate in the joint formulation), taken as it is. Any other angle goes to the
    /// branch nearest where its rate says it went since the last accepted step (reference +
    /// rate × elapsed), not nearest the last reference: a step that turns a joint by more
    /// than π (a fast rotor under a stiff integrator's long steps) landed on the branch 2π
    /// behind, and springs and outputs read the wrapped angle.
    pub(in crate::mbs) fn track_angles_from(
        &mut self,
        snap: &Snapshot,
        t: f64,
        direct: impl Fn(usize) -> Option<f64>,
    ) {
        let dt = t - self.angle_t;
        for (i, c) in self.angle_coords.iter().enumerate() {
            if let Some(x) = direct(i) {
                self.angle_refs[i] = x;
            } else if let Some((raw, rate)) = raw_angle_rate(&self.layout, snap, c) {
                let guess = self.angle_refs[i] + rate * dt;
                let near = if guess.is_finite() {
                    guess
                } else {
                    self.angle_refs[i]
                };
                self.angle_refs[i] = crate::mbs::math::unwrap_near(raw, near);
            }
        }
        self.angle_t = t;
    }

    pub(super) fn output(
        &mut self,
        k: usize,
        quantity: &OutputQuantity,
        (t, q, v): (f64, &[f64], &[f64]),
        acc: &[f64],
        lambda: &[f64],
    ) -> f64 {
        let point = |sys: &System, body: BodyRef, p: &Vector3<f64>| {
            crate::mbs::kin::eval_quantity(&sys.layout, &sys.snap, &QDef::Point(body, *p), true)
        };
        match quantity {
            OutputQuantity::Position {
                body,
                point: p,
                component,
            } => point(self, *body, p).x[*component],
            OutputQuantity::Velocity {
                body,
                point: p,
                component,
            } => point(self, *body, p).xd[*component],
            OutputQuantity::Acceleration {
                body,
                point: p,
                component,
            } => {
                let e = QDef::Vector(BodyRef::Ground, unit(*component));
                let cv = self.coord(&Coord::Dot(e, QDef::Point(*body, *p)), Some(v));
                let al = cv.gather(acc);
                cv.grad.dot(&al) + cv.conv
            }
            OutputQuantity::Angle { .. } => {
                // The value alone: the gradient machinery would be two thirds of the cost.
                match self.output_coords[k] {
                    Some(ref c @ Coord::Angle { slot, .. }) => {
                        let raw = raw_angle(&self.layout, &self.snap, c).expect("an angle");
                        crate::mbs::math::unwrap_near(raw, self.angle_refs[slot])
                    }
                    _ => f64::NAN,
                }
            }
            OutputQuantity::AngularVelocity { body, axis } => {
                let o = self.layout.offsets[*body];
                let p = Vector4::new(q[o + 3], q[o + 4], q[o + 5], q[o + 6]);
                let pd = Vector4::new(v[o + 3], v[o + 4], v[o + 5], v[o + 6]);
                (2.0 * crate::mbs::math::e_mat(&p) * pd).dot(&axis.normalize())
            }
            OutputQuantity::JointCoordinate { joint } => {
                let c = self.joint_coords[*joint].as_ref();
                c.map_or(f64::NAN, |c| self.coord_need(c, Some(v), Need::VALUE).val)
            }
            OutputQuantity::JointRate { joint } => {
                let c = self.joint_coords[*joint].as_ref();
                c.map_or(f64::NAN, |c| self.coord_need(c, Some(v), Need::VALUE).rate)
            }
            OutputQuantity::JointForce {
                joint,
                component,
                axes,
            }
            | OutputQuantity::JointTorque {
                joint,
                component,
                axes,
            } => {
                let (f, n) = self.joint_reaction(*joint, t, q, lambda);
                let w = if matches!(quantity, OutputQuantity::JointForce { .. }) {
                    f
                } else {
                    n
                };
                self.reaction_component(*joint, *axes, *component, &w)
            }
            OutputQuantity::DriverForce { driver } => {
                let row = self
                    .active
                    .iter()
                    .position(|&i| self.rows[i].owner == RowOwner::Driver(*driver));
                // A driver dropped as redundant (it agrees with the others: assembly checks)
                // carries no load, as dropped joint rows do.
                row.map_or(0.0, |k| -lambda[k])
            }
            OutputQuantity::ElementForce { force } => self.element_force(*force, t, v),
            OutputQuantity::ElementComponent {
                force,
                component,
                length,
            } => self.element_component(*force, *component, *length, t, v),
            OutputQuantity::ElementLength { force } if self.tire_of_element(*force).is_some() => {
                let i = self.tire_of_element(*force).expect("checked");
                self.tire_eval(&self.snap, i, t, false).forces.deflection
            }
            OutputQuantity::ElementLength { force } => {
                let i = self.terms.iter().position(|tm| tm.element == *force);
                i.map_or(f64::NAN, |i| {
                    let cv = self.term_value(i, Some(v));
                    match self.terms[i].law {
                        Law::Contact { gap, .. } => (gap - cv.val).max(0.0),
                        _ => cv.val,
                    }
                })
            }
            OutputQuantity::Tire { force, component } => {
                self.tire_of_element(*force).map_or(f64::NAN, |i| {
                    let f = self.tire_eval(&self.snap, i, t, false).forces;
                    [f.fx, f.fy, f.fz, f.kappa, f.alpha, f.deflection][*component]
                })
            }
            OutputQuantity::ContactFriction { force, component } => {
                self.contact_friction_output(*force, *component, t)
            }
            OutputQuantity::Energy => self.energy(t, q, v),
            OutputQuantity::WheelAngle {
                kind,
                body,
                axis,
                point1,
                point2,
                side,
            } => {
                let b = BodyRef::Body(*body);
                let a = crate::mbs::kin::eval_quantity(
                    &self.layout,
                    &self.snap,
                    &QDef::Vector(b, *axis),
                    false,
                )
                .x
                .normalize();
                let s = point(self, b, point2).x - point(self, b, point1).x;
                match kind {
                    0 => (-a.z).clamp(-1.0, 1.0).asin(),
                    1 => a.x.atan2(side * a.y),
                    2 => (-s.x).atan2(s.z),
                    _ => (-side * s.y).atan2(s.z),
                }
            }
            OutputQuantity::Relative {
                order,
                body1,
                point1,
                body2,
                point2,
                frame,
                axes,
                component,
            } => {
                let e = crate::mbs::kin::eval_quantity(
                    &self.layout,
                    &self.snap,
                    &QDef::Vector(*frame, axes.column(*component).into_owned()),
                    false,
                )
                .x;
                let (p1, p2) = (point(self, *body1, point1), point(self, *body2, point2));
                match order {
                    0 => e.dot(&(p2.x - p1.x)),
                    1 => e.dot(&(p2.xd - p1.xd)),
                    _ => {
                        // Global acceleration components of each point, as for `Acceleration`.
                        let acc_of = |sys: &System, body: BodyRef, p: &Vector3<f64>| {
                            Vector3::from_fn(|i, _| {
                                let g = QDef::Vector(BodyRef::Ground, unit(i));
                                let cv = sys.coord(&Coord::Dot(g, QDef::Point(body, *p)), Some(v));
                                cv.grad.dot(&cv.gather(acc)) + cv.conv
                            })
                        };
                        let (a1, a2) = (acc_of(self, *body1, point1), acc_of(self, *body2, point2));
                        e.dot(&(a2 - a1))
                    }
                }
            }
        }
    }

    /// Scalar force of element `e` (tension, torque or contact force; sum over bushing terms
    /// is not meaningful, so the translational magnitude is reported there).
    pub(super) fn element_force(&self, e: usize, t: f64, v: &[f64]) -> f64 {
        if let Some(i) = self.tire_of_element(e) {
            return self.tire_eval(&self.snap, i, t, false).forces.fz;
        }
        let mut vals = Vec::new();
        for (i, tm) in self.terms.iter().enumerate() {
            if tm.element != e {
                continue;
            }
            let cv = self.term_value(i, Some(v));
            let (f, _, _) = self.term_law(i, cv.val, cv.rate, t);
            vals.push(match tm.law {
                Law::Spring { .. } => -f,
                _ => f,
            });
        }
        match vals.len() {
            0 => f64::NAN,
            1 => vals[0],
            _ => vals[..3].iter().map(|x| x * x).sum::<f64>().sqrt(),
        }
    }

    /// Kinetic + gravitational + elastic energy.
    pub fn energy(&mut self, t: f64, q: &[f64], v: &[f64]) -> f64 {
        if self.joint.is_some() {
            return self.with_joint(|j, s| {
                let (qa, va) = j.to_absolute(s, t, q, Some(v));
                s.energy(t, &qa, &va)
            });
        }
        let n = self.n_q();
        let mut m = DMatrix::zeros(n, n);
        self.mass_matrix(t, q, &mut m);
        let vv = DVector::from_column_slice(v);
        let mut e = 0.5 * vv.dot(&(&m * &vv));
        self.load(t, q, Some(v));
        for b in 0..self.bodies.len() {
            e -= self.bodies[b].mass * self.gravity.dot(&self.snap.r[b]);
        }
        for i in 0..self.terms.len() {
            let cv = self.term_value(i, Some(v));
            e += match &self.terms[i].law {
                Law::Spring { law, free, .. } => {
                    let x = cv.val - free;
                    match law {
                        SpringLaw::Linear { k, preload, .. } => 0.5 * k * x * x + preload * x,
                        SpringLaw::Poly { coeffs, .. } => coeffs
                            .iter()
                            .enumerate()
                            .map(|(i, a)| a * x.powi(i as i32 + 2) / (i as f64 + 2.0))
                            .sum(),
                        SpringLaw::Table { curve, .. } => curve.integral(x),
                    }
                }
                Law::Torsion {
                    k, free, spring, ..
                } => match spring {
                    Some(curve) => curve.integral(cv.val - free),
                    None => 0.5 * k * (cv.val - free).powi(2),
                },
                Law::Linear {
                    k,
                    rest,
                    preload,
                    curve,
                    ..
                } => {
                    let x = cv.val - rest;
                    match curve {
                        Some(curve) => curve.integral(x) - preload * x,
                        None => 0.5 * k * x * x - preload * x,
                    }
                }
                Law::Contact { gap, hertz, k, .. } => {
                    let d = (gap - cv.val).max(0.0);
                    if *hertz {
                        0.4 * k * d.powf(2.5)
                    } else {
                        0.5 * k * d * d
                    }
                }
                Law::Friction {
                    stiction: Some((s, slot)),
                    ..
                } if self.stick[*slot].stick => {
                    0.5 * s.k * (cv.val - self.stick[*slot].anchor).powi(2)
                }
                Law::Friction { .. } => 0.0,
                Law::Stop(stop) => stop.energy(cv.val),
            } - self.terms[i].preset * (cv.val - self.terms[i].preset_ref);
        }
        e + self.tire_energy(t) + self.contact_friction_energy(t)
    }
}
