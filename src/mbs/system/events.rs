//! Contact event functions of the engine, in model order: one per penalty contact, one per
//! finite limit of a joint stop.
//!
//! Contacts: `g = ξ − gap`, the contact's separation coordinate minus its contact distance: for
//! a sphere-plane contact the height of the sphere centre above the plane minus the radius, for
//! a sphere-sphere contact the centre distance minus the sum of the radii. The penalty force
//! acts exactly when `g < 0` (see `System::law`), so the sign changes of `g` are the instants
//! where the force switches on or off. (A damped contact also releases where `k δ + c δ̇`
//! reaches zero while still penetrating; that kink is not an event.)
//!
//! Joint stops (`mbs::stops`): `ξ − lower` and `upper − ξ` on the joint coordinate.
//!
//! Friction has no event: its regularized law is smooth, and stick/slip changes happen at
//! accepted steps (`mbs::friction`).
//!
//! After the contacts and stops, one per tire (`mbs::tire`), in model order: `g = C_z − h − R =
//! −δ`, the wheel centre's height above the road minus the unloaded radius (lift-off /
//! touch-down).

use super::{Law, System};
use crate::integrate::events::EventFunctions;

impl System {
    /// Event functions per force term: `(term, count)` for the terms that have any.
    fn event_terms(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.terms
            .iter()
            .enumerate()
            .filter_map(|(i, t)| match &t.law {
                Law::Contact { .. } => Some((i, 1)),
                Law::Stop(s) if s.n_events() > 0 => Some((i, s.n_events())),
                _ => None,
            })
    }

    /// Names of the event functions: the contact force elements' names; a stop's name with
    /// ` (lower)` or ` (upper)`; then the tires' names.
    pub fn event_names(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, _) in self.event_terms() {
            let name = &self.spec.forces[self.terms[i].element].name;
            match &self.terms[i].law {
                Law::Stop(s) => {
                    if s.lower.is_finite() {
                        out.push(format!("{name} (lower)"));
                    }
                    if s.upper.is_finite() {
                        out.push(format!("{name} (upper)"));
                    }
                }
                _ => out.push(name.clone()),
            }
        }
        out.extend(
            self.tires
                .iter()
                .map(|tr| self.spec.forces[tr.element].name.clone()),
        );
        out
    }
}

impl EventFunctions for System {
    fn n_events(&self) -> usize {
        self.event_terms().map(|(_, n)| n).sum::<usize>() + self.tires.len()
    }

    fn event_functions(&mut self, t: f64, q: &[f64], g: &mut [f64]) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.event_functions(s, t, q, g));
        }
        self.load(t, q, None);
        let mut k = 0;
        for i in 0..self.terms.len() {
            match &self.terms[i].law {
                Law::Contact { gap, .. } => {
                    g[k] = self.coord(&self.terms[i].coord, None).val - gap;
                    k += 1;
                }
                Law::Stop(s) => {
                    let xi = self.coord(&self.terms[i].coord, None).val;
                    k += s.events(xi, &mut g[k..]);
                }
                _ => {}
            }
        }
        for tr in &self.tires {
            g[k] = tr.gap(&self.snap, self.motion(tr.road_slot, t)[0]);
            k += 1;
        }
    }
}
