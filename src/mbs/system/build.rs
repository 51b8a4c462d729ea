//! Building the element data from the resolved model and the current parameters: constraint
//! rows, force terms and their laws, drivers, sensors, outputs' coordinates. Runs at
//! construction and again after a parameter change (`System::set_parameter`).

use super::{
    fresh_bodies_id, unit, BodyData, ForceTerm, Law, Row, RowKind, RowOwner, SpringLaw, System,
};
use crate::mbs::kin::{eval_coord, Coord, QDef};
use crate::mbs::math::wrap_pi;
use crate::mbs::motion::MotionSlot;
use crate::mbs::spec::*;
use crate::mbs::ModelError;
use nalgebra::{Matrix3, Vector3};

fn frame_vec(body: BodyRef, f: &LocalFrame, k: usize) -> QDef {
    QDef::Vector(body, f.axes.column(k).into_owned())
}

fn diff(b1: BodyRef, f1: &LocalFrame, b2: BodyRef, f2: &LocalFrame) -> QDef {
    QDef::Diff {
        from: (b1, f1.origin),
        to: (b2, f2.origin),
    }
}
impl System {
    /// (Re)build element data from the spec and the current parameters.
    pub(super) fn build(&mut self) -> Result<(), ModelError> {
        let spec = self.spec.clone();
        let pv = |s: &Scalar| s.eval(&self.params);
        // Bodies.
        let mut bodies = Vec::with_capacity(spec.bodies.len());
        for b in &spec.bodies {
            let m = pv(&b.mass);
            if m.is_nan() || m <= 0.0 || !m.is_finite() {
                return Err(self.err(format!("body '{}': mass {m} must be positive", b.name)));
            }
            let [xx, yy, zz, xy, xz, yz] = b.inertia.map(|s| pv(&s));
            let j = Matrix3::new(xx, xy, xz, xy, yy, yz, xz, yz, zz);
            if b.kind == BodyKind::Rigid {
                let ok = j.symmetric_eigenvalues().iter().all(|&e| e > 0.0);
                if !ok {
                    return Err(self.err(format!(
                        "body '{}': inertia tensor is not positive definite",
                        b.name
                    )));
                }
            }
            bodies.push(BodyData {
                mass: m,
                inertia: j,
                reg: 4.0 * j.trace() / 3.0,
            });
        }
        let gravity = Vector3::new(
            pv(&spec.gravity[0]),
            pv(&spec.gravity[1]),
            pv(&spec.gravity[2]),
        );
        // Motion slots: keep offsets across rebuilds.
        let old_offsets: Vec<(f64, [f64; 2])> = self
            .motions
            .iter()
            .map(|m| (m.offset, m.rate_offsets))
            .collect();
        let mut motions: Vec<MotionSlot> = Vec::new();
        let mut add_motion = |m: &Motion| {
            motions.push(MotionSlot::new(m));
            motions.len() - 1
        };
        let frame_motions: Vec<[usize; 3]> = spec
            .frames
            .iter()
            .map(|f| [0, 1, 2].map(|k| add_motion(&f.position[k])))
            .collect();
        // Angle slots.
        // Per slot also the angle at the initial configuration where its branch starts, where
        // the file gives more than the frames do (they give it modulo 2π).
        let mut angle_coords: Vec<Coord> = Vec::new();
        let mut angle_starts: Vec<Option<f64>> = Vec::new();
        let mut new_angle = |x1: QDef, y1: QDef, x2: QDef, start: Option<f64>| {
            let c = Coord::Angle {
                x1,
                y1,
                x2,
                slot: angle_coords.len(),
            };
            angle_coords.push(c);
            angle_starts.push(start);
            c
        };
        // Constraint rows.
        let mut rows = Vec::new();
        for (b, _) in spec.bodies.iter().enumerate() {
            if self.layout.is_rigid(b) {
                rows.push(Row {
                    kind: RowKind::Normalize {
                        col: self.layout.offsets[b] + 3,
                    },
                    owner: RowOwner::Normalization(b),
                    label: format!(
                        "body '{}' Euler-parameter normalization",
                        spec.bodies[b].name
                    ),
                });
            }
        }
        let mut joint_coords = Vec::with_capacity(spec.joints.len());
        for (ji, j) in spec.joints.iter().enumerate() {
            let (b1, b2, f1, f2) = (j.body1, j.body2, &j.frame1, &j.frame2);
            let d = diff(b1, f1, b2, f2);
            let (x1, y1, z1) = (
                frame_vec(b1, f1, 0),
                frame_vec(b1, f1, 1),
                frame_vec(b1, f1, 2),
            );
            let (x2, y2, z2) = (
                frame_vec(b2, f2, 0),
                frame_vec(b2, f2, 1),
                frame_vec(b2, f2, 2),
            );
            let g = |k: usize| QDef::Vector(BodyRef::Ground, unit(k));
            let mut coords: Vec<(Coord, f64, &str)> = Vec::new();
            let spherical = |c: &mut Vec<(Coord, f64, &str)>| {
                c.push((Coord::Dot(g(0), d), 0.0, "x position"));
                c.push((Coord::Dot(g(1), d), 0.0, "y position"));
                c.push((Coord::Dot(g(2), d), 0.0, "z position"));
            };
            let axis_parallel = |c: &mut Vec<(Coord, f64, &str)>| {
                c.push((Coord::Dot(x1, z2), 0.0, "axis alignment (x1·z2)"));
                c.push((Coord::Dot(y1, z2), 0.0, "axis alignment (y1·z2)"));
            };
            let mut jc = None;
            match j.kind {
                JointKind::Spherical => spherical(&mut coords),
                JointKind::Revolute => {
                    spherical(&mut coords);
                    axis_parallel(&mut coords);
                    jc = Some(new_angle(x1, y1, x2, j.initial_angle));
                }
                JointKind::Universal => {
                    spherical(&mut coords);
                    coords.push((Coord::Dot(z1, x2), 0.0, "cross axes perpendicular (z1·x2)"));
                }
                JointKind::Cylindrical | JointKind::Prismatic => {
                    axis_parallel(&mut coords);
                    coords.push((Coord::Dot(x1, d), 0.0, "on axis (x1·d)"));
                    coords.push((Coord::Dot(y1, d), 0.0, "on axis (y1·d)"));
                    if j.kind == JointKind::Prismatic {
                        coords.push((Coord::Dot(x1, y2), 0.0, "no rotation (x1·y2)"));
                    }
                    jc = Some(Coord::Dot(z1, d));
                }
                JointKind::Fixed => {
                    spherical(&mut coords);
                    axis_parallel(&mut coords);
                    coords.push((Coord::Dot(x1, y2), 0.0, "no rotation (x1·y2)"));
                }
                JointKind::Distance => {
                    let l = j.length.map(|s| pv(&s)).unwrap_or(0.0);
                    if l.is_nan() || l <= 0.0 {
                        return Err(self.err(format!(
                            "joint '{}': distance length {l} must be positive",
                            j.name
                        )));
                    }
                    coords.push((Coord::HalfSq(d), 0.5 * l * l, "rod length"));
                }
                JointKind::Planar => {
                    coords.push((Coord::Dot(z1, d), 0.0, "in plane (z1·d)"));
                    // The orientation rows wherever both ends carry axes (a rigid body, ground
                    // or a moving frame) and one of them turns. A particle on body 2 only stays
                    // in the plane. (With body 2 = ground and a rigid body 1 they were left
                    // out: the block could tumble about the in-plane axes and fall through the
                    // plane while its own plane kept the ground point.)
                    let axes = |b: BodyRef| match b {
                        BodyRef::Body(k) => self.layout.is_rigid(k),
                        BodyRef::Ground | BodyRef::Frame(_) => true,
                    };
                    let turns =
                        |b: BodyRef| matches!(b, BodyRef::Body(k) if self.layout.is_rigid(k));
                    if axes(b1) && axes(b2) && (turns(b1) || turns(b2)) {
                        coords.push((
                            Coord::Dot(z1, x2),
                            0.0,
                            "rotation about normal only (z1·x2)",
                        ));
                        coords.push((
                            Coord::Dot(z1, y2),
                            0.0,
                            "rotation about normal only (z1·y2)",
                        ));
                    }
                }
            }
            for (coord, offset, what) in coords {
                rows.push(Row {
                    kind: RowKind::Coord {
                        coord,
                        offset,
                        motion: None,
                    },
                    owner: RowOwner::Joint(ji),
                    label: format!("joint '{}' {}", j.name, what),
                });
            }
            joint_coords.push(jc);
        }
        for (di, dr) in spec.drivers.iter().enumerate() {
            let slot = add_motion(&dr.motion);
            let coord = match &dr.target {
                DriverTarget::JointCoordinate(j) => joint_coords[*j].ok_or_else(|| {
                    self.err(format!(
                        "driver '{}': joint '{}' has no coordinate to drive",
                        dr.name, spec.joints[*j].name
                    ))
                })?,
                DriverTarget::PointComponent {
                    body,
                    point,
                    component,
                } => Coord::Dot(
                    QDef::Vector(BodyRef::Ground, unit(*component)),
                    QDef::Point(BodyRef::Body(*body), *point),
                ),
            };
            rows.push(Row {
                kind: RowKind::Coord {
                    coord,
                    offset: 0.0,
                    motion: Some(slot),
                },
                owner: RowOwner::Driver(di),
                label: format!("driver '{}'", dr.name),
            });
        }
        // Force elements.
        let mut terms = Vec::new();
        let mut tires = Vec::new();
        let mut n_stick = 0;
        let mut cfrictions = Vec::new();
        for (fi, f) in spec.forces.iter().enumerate() {
            match &f.kind {
                ForceKind::Tire(ts) => {
                    let slot = add_motion(&ts.road_height);
                    tires.push(self.build_tire(fi, ts, slot)?);
                }
                ForceKind::SpringDamper {
                    body1,
                    point1,
                    body2,
                    point2,
                    free_length,
                    law,
                    actuator,
                } => {
                    let (law, damper) = match law {
                        ForceLaw::DamperTable {
                            spring,
                            velocity,
                            force,
                            ..
                        } => (
                            spring.as_ref(),
                            Some(crate::mbs::curves::Curve::new(velocity, force)),
                        ),
                        other => (other, None),
                    };
                    let law = match law {
                        // The loader nests no curve in a curve.
                        ForceLaw::DamperTable { .. } => SpringLaw::Linear {
                            k: 0.0,
                            c: 0.0,
                            preload: 0.0,
                        },
                        ForceLaw::Linear {
                            stiffness,
                            damping,
                            preload,
                        } => SpringLaw::Linear {
                            k: pv(stiffness),
                            c: pv(damping),
                            preload: pv(preload),
                        },
                        ForceLaw::Polynomial { coeffs, damping } => SpringLaw::Poly {
                            coeffs: coeffs.iter().map(&pv).collect(),
                            c: pv(damping),
                        },
                        ForceLaw::Table {
                            deflection,
                            force,
                            damping,
                            ..
                        } => SpringLaw::Table {
                            curve: crate::mbs::curves::Curve::new(deflection, force),
                            c: pv(damping),
                        },
                    };
                    let actuator = actuator.as_ref().map(&mut add_motion);
                    let coord = Coord::Norm(QDef::Diff {
                        from: (*body1, *point1),
                        to: (*body2, *point2),
                    });
                    terms.push(ForceTerm {
                        coord,
                        law: Law::Spring {
                            law,
                            free: pv(free_length),
                            actuator,
                            damper,
                        },
                        element: fi,
                        preset: 0.0,
                        preset_ref: 0.0,
                    });
                }
                ForceKind::RotationalSpringDamper {
                    body1,
                    frame1,
                    body2,
                    frame2,
                    stiffness,
                    damping,
                    free_angle,
                    actuator,
                    table,
                    damper_table,
                    initial_angle,
                } => {
                    let coord = new_angle(
                        frame_vec(*body1, frame1, 0),
                        frame_vec(*body1, frame1, 1),
                        frame_vec(*body2, frame2, 0),
                        *initial_angle,
                    );
                    let actuator = actuator.as_ref().map(&mut add_motion);
                    terms.push(ForceTerm {
                        coord,
                        law: Law::Torsion {
                            k: pv(stiffness),
                            c: pv(damping),
                            free: pv(free_angle),
                            actuator,
                            spring: table.as_ref().map(crate::mbs::curves::Curve::from_table),
                            damper: damper_table
                                .as_ref()
                                .map(crate::mbs::curves::Curve::from_table),
                        },
                        element: fi,
                        preset: 0.0,
                        preset_ref: 0.0,
                    });
                }
                ForceKind::Bushing {
                    preload,
                    body1,
                    frame1,
                    body2,
                    frame2,
                    stiffness,
                    damping,
                    rot_stiffness,
                    rot_damping,
                    tables,
                    damper_tables,
                } => {
                    let d = diff(*body1, frame1, *body2, frame2);
                    let a1 = [0, 1, 2].map(|k| frame_vec(*body1, frame1, k));
                    let a2 = [0, 1, 2].map(|k| frame_vec(*body2, frame2, k));
                    for k in 0..3 {
                        terms.push(ForceTerm {
                            coord: Coord::Dot(a1[k], d),
                            law: Law::Linear {
                                k: pv(&stiffness[k]),
                                c: pv(&damping[k]),
                                rest: f64::NAN,
                                preload: preload[k],
                                curve: tables[k]
                                    .as_ref()
                                    .map(crate::mbs::curves::Curve::from_table),
                                damper: damper_tables[k]
                                    .as_ref()
                                    .map(crate::mbs::curves::Curve::from_table),
                            },
                            element: fi,
                            preset: 0.0,
                            preset_ref: 0.0,
                        });
                    }
                    // Small relative rotations about frame-1 axes: θx = ½(z1·y2 − y1·z2), ...
                    let rot = [(2, 1, 1, 2), (0, 2, 2, 0), (1, 0, 0, 1)];
                    for (k, (a, b, c, e)) in rot.into_iter().enumerate() {
                        let coord = Coord::Combo([(0.5, a1[a], a2[b]), (-0.5, a1[c], a2[e])]);
                        terms.push(ForceTerm {
                            coord,
                            law: Law::Linear {
                                k: pv(&rot_stiffness[k]),
                                c: pv(&rot_damping[k]),
                                rest: f64::NAN,
                                preload: preload[3 + k],
                                curve: tables[3 + k]
                                    .as_ref()
                                    .map(crate::mbs::curves::Curve::from_table),
                                damper: damper_tables[3 + k]
                                    .as_ref()
                                    .map(crate::mbs::curves::Curve::from_table),
                            },
                            element: fi,
                            preset: 0.0,
                            preset_ref: 0.0,
                        });
                    }
                }
                ForceKind::Contact {
                    geometry,
                    law,
                    stiffness,
                    damping,
                    friction,
                } => {
                    if let Some(fs) = friction {
                        let cf =
                            self.build_contact_friction(fi, terms.len(), geometry, fs, &cfrictions);
                        cfrictions.push(cf);
                    }
                    let hertz = *law == ContactLaw::Hertz;
                    let (coord, gap) = match geometry {
                        ContactGeometry::SpherePlane {
                            sphere_body,
                            center,
                            radius,
                            plane_body,
                            point,
                            normal,
                        } => (
                            Coord::Dot(
                                QDef::Vector(*plane_body, normal.normalize()),
                                QDef::Diff {
                                    from: (*plane_body, *point),
                                    to: (*sphere_body, *center),
                                },
                            ),
                            pv(radius),
                        ),
                        ContactGeometry::SphereSphere {
                            body1,
                            center1,
                            radius1,
                            body2,
                            center2,
                            radius2,
                        } => (
                            Coord::Norm(QDef::Diff {
                                from: (*body1, *center1),
                                to: (*body2, *center2),
                            }),
                            pv(radius1) + pv(radius2),
                        ),
                    };
                    terms.push(ForceTerm {
                        coord,
                        law: Law::Contact {
                            gap,
                            hertz,
                            k: pv(stiffness),
                            c: pv(damping),
                        },
                        element: fi,
                        preset: 0.0,
                        preset_ref: 0.0,
                    });
                }
                ForceKind::PrismaticFriction { joint, .. }
                | ForceKind::RevoluteFriction { joint, .. }
                | ForceKind::JointStop { joint, .. } => {
                    let coord = joint_coords[*joint].ok_or_else(|| {
                        self.err(format!("force '{}': joint has no coordinate", f.name))
                    })?;
                    let law = self.joint_element_law(&f.kind, &mut n_stick);
                    terms.push(ForceTerm {
                        coord,
                        law,
                        element: fi,
                        preset: 0.0,
                        preset_ref: 0.0,
                    });
                }
            }
        }
        // Rotation outputs: the body frame's x axis projected on the plane normal to the axis,
        // measured from the global reference direction; continuous through the angle slots.
        let output_coords: Vec<Option<Coord>> = spec
            .outputs
            .iter()
            .map(|o| match &o.quantity {
                OutputQuantity::Angle { body, axis } => {
                    let a = axis.normalize();
                    let r = if a.x.abs() < 0.9 {
                        Vector3::x()
                    } else {
                        Vector3::y()
                    };
                    let x1 = (r - a * a.dot(&r)).normalize();
                    let y1 = a.cross(&x1);
                    Some(new_angle(
                        QDef::Vector(BodyRef::Ground, x1),
                        QDef::Vector(BodyRef::Ground, y1),
                        QDef::Vector(BodyRef::Body(*body), x1),
                        None,
                    ))
                }
                _ => None,
            })
            .collect();
        // Keep excitation offsets (the BDF may be mid-perturbation only inside one call, but
        // rebuilding must never silently reset a user's state).
        for (m, (o, r)) in motions.iter_mut().zip(old_offsets) {
            m.offset = o;
            m.rate_offsets = r;
        }
        let first_build = self.angle_refs.is_empty() && !angle_coords.is_empty();
        self.bodies = bodies;
        self.bodies_id = fresh_bodies_id();
        self.gravity = gravity;
        self.excitation_slots = (0..motions.len())
            .filter(|&i| motions[i].is_excitation())
            .collect();
        self.motions = motions;
        self.frame_motions = frame_motions;
        self.rows = rows;
        // Preloads from equilibrium survive parameter changes (they are recomputed only at
        // initialization).
        if self.presets.len() == terms.len() {
            for (tm, &(p, r)) in terms.iter_mut().zip(&self.presets) {
                tm.preset = p;
                tm.preset_ref = r;
            }
        }
        // The effective inertias of restitution stops come from initialization.
        for (new, old) in terms.iter_mut().zip(&self.terms) {
            if let (Law::Stop(n), Law::Stop(o)) = (&mut new.law, &old.law) {
                n.m_eff = o.m_eff;
            }
        }
        self.terms = terms;
        self.tires = tires;
        self.set_contact_friction(cfrictions);
        // Fresh stick states stick at the file's configuration (set below) until
        // initialization places them at the assembled one.
        let fresh_stick = self.stick.len() != n_stick;
        if fresh_stick {
            self.stick = vec![crate::mbs::friction::StickState::at(0.0); n_stick];
        }
        self.joint_coords = joint_coords;
        self.output_coords = output_coords;
        self.angle_coords = angle_coords;
        self.angle_starts = angle_starts;
        if first_build || self.angle_refs.len() != self.angle_coords.len() {
            self.angle_refs = vec![0.0; self.angle_coords.len()];
            self.reset_angle_refs_at(&self.q0.clone(), self.spec.experiment.start);
            self.angle_refs0 = self.angle_refs.clone();
        }
        // Free lengths / angles that are relative to the initial configuration, measured on the
        // initial branches (a rebuild after the system has turned must not shift them by 2π).
        let q0 = self.q0.clone();
        self.load(self.spec.experiment.start, &q0, None);
        for i in 0..self.terms.len() {
            let cv = eval_coord(
                &self.layout,
                &self.snap,
                &self.terms[i].coord,
                &self.angle_refs0,
                None,
                None,
            );
            match &mut self.terms[i].law {
                Law::Linear { rest, .. } if rest.is_nan() => *rest = cv.val,
                Law::Torsion { free, .. } => {
                    // The initial deviation from the free angle is taken in (−π, π].
                    let init = cv.val;
                    *free = init - wrap_pi(init - *free);
                }
                Law::Friction {
                    stiction: Some((_, slot)),
                    ..
                } if fresh_stick => {
                    self.stick[*slot] = crate::mbs::friction::StickState::at(cv.val);
                }
                _ => {}
            }
        }
        Ok(())
    }
}
