//! Contact event functions of the engine: one per penalty contact, in model order.
//!
//! `g = ξ − gap`, the contact's separation coordinate minus its contact distance: for a
//! sphere-plane contact the height of the sphere centre above the plane minus the radius, for a
//! sphere-sphere contact the centre distance minus the sum of the radii. The penalty force acts
//! exactly when `g < 0` (see `System::law`), so the sign changes of `g` are the instants where
//! the force switches on or off. (A damped contact also releases where `k δ + c δ̇` reaches zero
//! while still penetrating; that kink is not an event.) Friction is smooth (regularized) and has
//! no event.
//!
//! After the contacts, one per tire (`mbs::tire`), in model order: `g = C_z − h − R = −δ`, the
//! wheel centre's height above the road minus the unloaded radius (lift-off / touch-down).

use super::{Law, System};
use crate::integrate::events::EventFunctions;

impl System {
    /// The force terms that are contacts (indices into `terms`), in model order.
    fn contact_terms(&self) -> impl Iterator<Item = (usize, f64)> + '_ {
        self.terms
            .iter()
            .enumerate()
            .filter_map(|(i, t)| match t.law {
                Law::Contact { gap, .. } => Some((i, gap)),
                _ => None,
            })
    }

    /// Names of the event functions: the contact force elements' names, then the tires'.
    pub fn event_names(&self) -> Vec<String> {
        self.contact_terms()
            .map(|(i, _)| self.spec.forces[self.terms[i].element].name.clone())
            .chain(
                self.tires
                    .iter()
                    .map(|tr| self.spec.forces[tr.element].name.clone()),
            )
            .collect()
    }
}

impl EventFunctions for System {
    fn n_events(&self) -> usize {
        self.contact_terms().count() + self.tires.len()
    }

    fn event_functions(&mut self, t: f64, q: &[f64], g: &mut [f64]) {
        if self.joint.is_some() {
            return self.with_joint(|j, s| j.event_functions(s, t, q, g));
        }
        self.load(t, q, None);
        let mut k = 0;
        for i in 0..self.terms.len() {
            if let Law::Contact { gap, .. } = self.terms[i].law {
                g[k] = self.coord(&self.terms[i].coord, None).val - gap;
                k += 1;
            }
        }
        for tr in &self.tires {
            g[k] = tr.gap(&self.snap, self.motion(tr.road_slot, t)[0]);
            k += 1;
        }
    }
}
