//! The contacts' friction (`mbs::contact_friction`) in the system: built from the spec, their
//! generalized forces and (finite-difference) Jacobians on the two sides' absolute
//! coordinates, the stick states at initialization and accepted steps, energy and outputs.
//! The joint formulation evaluates the same elements on its own snapshot
//! (`contact_friction_eval`).

use super::super::contact_friction::{ContactFriction, ContactStick, Eval, Shape, Side};
use super::super::friction::Stiction;
use super::super::kin::Snapshot;
use super::super::spec::{ContactFrictionSpec, ContactGeometry, Scalar};
use super::{Law, System};
use nalgebra::DMatrix;

impl System {
    /// Resolve the friction of contact element `element`, whose normal term is `term`;
    /// stiction slots are numbered after those already in `built`.
    pub(super) fn build_contact_friction(
        &self,
        element: usize,
        term: usize,
        geometry: &ContactGeometry,
        fs: &ContactFrictionSpec,
        built: &[ContactFriction],
    ) -> ContactFriction {
        let pv = |s: &Scalar| s.eval(&self.params);
        let (sides, shape) = match geometry {
            ContactGeometry::SpherePlane {
                sphere_body,
                center,
                radius,
                plane_body,
                point,
                normal,
            } => (
                [*sphere_body, *plane_body],
                Shape::SpherePlane {
                    center: *center,
                    radius: pv(radius),
                    point: *point,
                    normal: normal.normalize(),
                },
            ),
            ContactGeometry::SphereSphere {
                body1,
                center1,
                radius1,
                body2,
                center2,
                radius2,
            } => (
                [*body1, *body2],
                Shape::SphereSphere {
                    center1: *center1,
                    radius1: pv(radius1),
                    center2: *center2,
                    radius2: pv(radius2),
                },
            ),
        };
        let v_reg = pv(&fs.v_reg);
        let slot = built.iter().filter(|c| c.stiction.is_some()).count();
        ContactFriction {
            element,
            term,
            sides,
            shape,
            mu: pv(&fs.mu),
            v_reg,
            stiction: fs.stiction.as_ref().map(|s| {
                (
                    Stiction {
                        mu_static: pv(&s.mu_static),
                        k: pv(&s.stiffness),
                        c: pv(&s.damping),
                        v_stick: s.v_stick.as_ref().map_or(v_reg, pv),
                    },
                    slot,
                )
            }),
        }
    }

    /// Install rebuilt elements; the stick states are kept when their number is unchanged
    /// (a parameter change), fresh ones slip until initialization places them.
    pub(super) fn set_contact_friction(&mut self, cfs: Vec<ContactFriction>) {
        let n = cfs.iter().filter(|c| c.stiction.is_some()).count();
        if self.contact_stick.len() != n {
            self.contact_stick = vec![ContactStick::slipping(); n];
        }
        self.contact_friction = cfs;
    }

    /// The contact's normal law `N(ξ, ξ̇)`.
    fn contact_normal(&self, cf: &ContactFriction, t: f64) -> impl Fn(f64, f64) -> f64 + '_ {
        let law = &self.terms[cf.term].law;
        move |xi, rate| self.law(law, xi, rate, t).0
    }

    fn contact_stick_of(&self, cf: &ContactFriction) -> Option<&ContactStick> {
        cf.stiction.map(|(_, slot)| &self.contact_stick[slot])
    }

    /// Element `i` at snapshot `s` (velocities loaded) and time `t`: its sides, the friction,
    /// and its generalized force on the sides' local coordinates.
    pub(crate) fn contact_friction_eval(
        &self,
        s: &Snapshot,
        i: usize,
        t: f64,
    ) -> ([Side; 2], Eval, super::super::contact_friction::LocalForce) {
        let cf = &self.contact_friction[i];
        let sides = cf.sides(&self.layout, s);
        let ev = cf.evaluate(
            &sides,
            &self.contact_normal(cf, t),
            self.contact_stick_of(cf),
        );
        let q = cf.local_force(&sides, &ev);
        (sides, ev, q)
    }

    /// `∂Q/∂(q, v)` of element `i` on its local coordinates.
    pub(crate) fn contact_friction_jacobian(
        &self,
        sides: &[Side; 2],
        i: usize,
        t: f64,
    ) -> super::super::contact_friction::LocalJacobian {
        let cf = &self.contact_friction[i];
        cf.jacobian(
            sides,
            &self.contact_normal(cf, t),
            self.contact_stick_of(cf),
        )
    }

    /// `f += Q` of every contact's friction (snapshot loaded with velocities).
    pub(super) fn add_contact_friction_forces(&self, t: f64, f: &mut [f64]) {
        for i in 0..self.contact_friction.len() {
            let (sides, _, q) = self.contact_friction_eval(&self.snap, i, t);
            let (cols, n) = ContactFriction::columns(&sides);
            for &(l, g) in &cols[..n] {
                f[g] += q[l];
            }
        }
    }

    /// `∂Q/∂q`, `∂Q/∂v` added (snapshot loaded with velocities).
    pub(super) fn add_contact_friction_jacobians(
        &self,
        t: f64,
        df_dq: &mut DMatrix<f64>,
        df_dv: &mut DMatrix<f64>,
    ) {
        for i in 0..self.contact_friction.len() {
            let sides = self.contact_friction[i].sides(&self.layout, &self.snap);
            let jac = self.contact_friction_jacobian(&sides, i, t);
            let (cols, n) = ContactFriction::columns(&sides);
            for &(li, gi) in &cols[..n] {
                for &(lj, gj) in &cols[..n] {
                    df_dq[(gi, gj)] += jac[(li, lj)];
                    df_dv[(gi, gj)] += jac[(li, super::super::kin::LOCAL + lj)];
                }
            }
        }
    }

    /// Stick-state updates at an accepted step (absolute state).
    pub(super) fn accept_contact_stick(&mut self, t: f64, q: &[f64], v: &[f64]) {
        if self.contact_stick.is_empty() {
            return;
        }
        self.load(t, q, Some(v));
        for i in 0..self.contact_friction.len() {
            let cf = &self.contact_friction[i];
            let Some((_, slot)) = cf.stiction else {
                continue;
            };
            let sides = cf.sides(&self.layout, &self.snap);
            let mut st = self.contact_stick[slot];
            let switched = cf.accept(&sides, &self.contact_normal(cf, t), &mut st);
            self.contact_stick[slot] = st;
            self.law_switched |= switched;
        }
    }

    /// At the initial (absolute) state: each contact with stiction that touches and is slower
    /// than its `v_stick` sticks where it is, unloaded; the others slip.
    pub(super) fn initialize_contact_friction(&mut self, t: f64, q: &[f64], v: &[f64]) {
        if self.contact_stick.is_empty() {
            return;
        }
        self.load(t, q, Some(v));
        for i in 0..self.contact_friction.len() {
            let cf = &self.contact_friction[i];
            let Some((_, slot)) = cf.stiction else {
                continue;
            };
            let Law::Contact { gap, .. } = self.terms[cf.term].law else {
                continue;
            };
            let sides = cf.sides(&self.layout, &self.snap);
            self.contact_stick[slot] = cf.initial_stick(&sides, gap);
        }
    }

    /// The contact friction of force element `e`, if it has one.
    pub(super) fn contact_friction_of_element(&self, e: usize) -> Option<usize> {
        self.contact_friction.iter().position(|c| c.element == e)
    }

    /// Output component (`CONTACT_FRICTION_COMPONENTS`) of element `e` (snapshot loaded).
    pub(super) fn contact_friction_output(&self, e: usize, component: usize, t: f64) -> f64 {
        let Some(i) = self.contact_friction_of_element(e) else {
            return f64::NAN;
        };
        let (_, ev, _) = self.contact_friction_eval(&self.snap, i, t);
        match component {
            0..=2 => ev.force[component],
            3 => ev.kin.slip.norm(),
            _ => {
                let stuck = self
                    .contact_stick_of(&self.contact_friction[i])
                    .is_some_and(|s| s.mode.stick);
                if stuck {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }

    /// Elastic energy of the sticking contacts' anchor springs (snapshot loaded).
    pub(super) fn contact_friction_energy(&self, _t: f64) -> f64 {
        self.contact_friction
            .iter()
            .map(|cf| match self.contact_stick_of(cf) {
                Some(st) => cf.energy(&cf.sides(&self.layout, &self.snap), st),
                None => 0.0,
            })
            .sum()
    }
}
