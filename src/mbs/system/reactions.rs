//! Sensor values of joints and elements: joint reactions resolved along a chosen set of axes
//! (`frame` of a `joint_force` / `joint_torque` output), the axial force of a distance joint's
//! rod, and one component of a bushing (`component` of `element_force` / `element_length`).

use super::{Law, System};
use crate::mbs::kin::{eval_quantity, QDef};
use crate::mbs::spec::{BodyRef, LocalFrame, ReactionAxes};
use nalgebra::{Matrix3, Vector3};

impl System {
    /// The current global axes (columns) of a frame fixed in `body` (moving frames translate
    /// only; particles carry no orientation and keep the identity).
    fn axes_of(&self, body: BodyRef, frame: &LocalFrame) -> Matrix3<f64> {
        match body {
            BodyRef::Body(b) => self.snap.a[b] * frame.axes,
            _ => frame.axes,
        }
    }

    /// Component `component` of the reaction vector `w` (global coordinates, on body 2) along
    /// `axes`; for [`ReactionAxes::RodAxial`] the tension of the rod: `−w·u`, `u` the unit
    /// vector from frame 1's origin to frame 2's (positive when the rod pulls the ends
    /// together). Needs the snapshot loaded at the output's state.
    pub(super) fn reaction_component(
        &self,
        joint: usize,
        axes: ReactionAxes,
        component: usize,
        w: &Vector3<f64>,
    ) -> f64 {
        let js = &self.spec.joints[joint];
        let basis = match axes {
            ReactionAxes::Frame1 => self.axes_of(js.body1, &js.frame1),
            ReactionAxes::Frame2 => self.axes_of(js.body2, &js.frame2),
            ReactionAxes::Body(b) => self.axes_of(b, &LocalFrame::identity()),
            ReactionAxes::RodAxial => {
                let d = QDef::Diff {
                    from: (js.body1, js.frame1.origin),
                    to: (js.body2, js.frame2.origin),
                };
                let d = eval_quantity(&self.layout, &self.snap, &d, false).x;
                let n = d.norm();
                return if n > 0.0 { -w.dot(&d) / n } else { f64::NAN };
            }
        };
        basis.column(component).dot(w)
    }

    /// Component `component` (0-5) of bushing `force`: the force (torque) on body 2 its law
    /// gives, or with `length` the deflection from the rest position. Needs the snapshot
    /// loaded at `v`'s state.
    pub(super) fn element_component(
        &self,
        force: usize,
        component: usize,
        length: bool,
        t: f64,
        v: &[f64],
    ) -> f64 {
        let Some(i) = self
            .terms
            .iter()
            .enumerate()
            .filter(|(_, tm)| tm.element == force)
            .nth(component)
            .map(|(i, _)| i)
        else {
            return f64::NAN;
        };
        let cv = self.term_value(i, Some(v));
        if length {
            match self.terms[i].law {
                Law::Linear { rest, .. } => cv.val - rest,
                _ => cv.val,
            }
        } else {
            self.term_law(i, cv.val, cv.rate, t).0
        }
    }
}
