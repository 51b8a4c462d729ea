//! Force terms and their scalar laws: springs, dampers, bushings, contacts, friction, stops,
//! with the static preloads; and the rigid bodies' gyroscopic terms.

use super::{Law, SpringLaw, System};
use crate::mbs::math::{g_mat, skew};
use nalgebra::{Matrix4, Vector4};

impl System {
    /// Scalar law value and its partial derivatives `(F, ∂F/∂ξ, ∂F/∂ξ̇)`.
    /// The law of force term `i` plus its preload from equilibrium.
    pub(in crate::mbs) fn term_law(&self, i: usize, xi: f64, rate: f64, t: f64) -> (f64, f64, f64) {
        let tm = &self.terms[i];
        let (f, a, b) = self.law(&tm.law, xi, rate, t);
        (f + tm.preset, a, b)
    }

    /// [`System::term_law`]'s force alone. A linear torsion spring-damper (the joint springs
    /// of most planar models) is worked out here, inline: on a small tree along a trajectory
    /// the call and the dispatch of the general law were a tenth of an evaluation
    /// (docs/benchmarks.md, "One evaluation, session 24").
    #[inline]
    pub(in crate::mbs) fn term_force(&self, i: usize, xi: f64, rate: f64, t: f64) -> f64 {
        let tm = &self.terms[i];
        if let Law::Torsion {
            k,
            c,
            free,
            actuator: None,
            spring: None,
            damper: None,
        } = &tm.law
        {
            // The same operations as `law` (and the preset added last), so the same numbers.
            return (-(k * (xi - free)) - c * rate + 0.0) + tm.preset;
        }
        self.term_law(i, xi, rate, t).0
    }

    /// Force terms with `static_preload` (their elements marked), in term order, with the
    /// element name: the unknowns of the preload computation.
    pub(crate) fn preload_terms(&self) -> Vec<(usize, String)> {
        self.terms
            .iter()
            .enumerate()
            .filter(|(_, tm)| self.spec.forces[tm.element].static_preload)
            .map(|(i, tm)| (i, self.spec.forces[tm.element].name.clone()))
            .collect()
    }

    /// The generalized force of a unit preload on term `i` at `q` (its coordinate gradient).
    pub(crate) fn term_direction(&mut self, i: usize, t: f64, q: &[f64], out: &mut [f64]) -> f64 {
        self.load(t, q, None);
        out.fill(0.0);
        let cv = self.coord(&self.terms[i].coord, None);
        for (l, g) in cv.columns() {
            out[g] += cv.grad[l];
        }
        cv.val
    }

    pub(crate) fn n_terms(&self) -> usize {
        self.terms.len()
    }

    /// Set the preloads (per term, with their reference coordinate values); kept across
    /// parameter changes.
    pub(crate) fn set_presets(&mut self, presets: Vec<(f64, f64)>) {
        for (tm, &(p, r)) in self.terms.iter_mut().zip(&presets) {
            tm.preset = p;
            tm.preset_ref = r;
        }
        self.presets = presets;
    }

    /// The preload of force element `e` from equilibrium: the spring tension (N), torque
    /// (N m), or for a bushing the 6 components (force on body 2 along frame-1 axes, then
    /// torques); empty if the element has none.
    pub fn element_preload(&self, e: usize) -> Vec<f64> {
        self.terms
            .iter()
            .filter(|tm| tm.element == e && self.spec.forces[e].static_preload)
            .map(|tm| match tm.law {
                Law::Spring { .. } => -tm.preset,
                _ => tm.preset,
            })
            .collect()
    }

    pub(in crate::mbs) fn law(&self, law: &Law, xi: f64, rate: f64, t: f64) -> (f64, f64, f64) {
        match law {
            Law::Spring {
                law,
                free,
                actuator,
                damper,
            } => {
                let x = xi - free;
                let act = actuator.map_or(0.0, |m| self.motion(m, t)[0]);
                let (f, df, c) = match law {
                    SpringLaw::Linear { k, c, preload } => (k * x + preload, *k, *c),
                    SpringLaw::Poly { coeffs, c } => {
                        let (mut f, mut df, mut xp) = (0.0, 0.0, 1.0);
                        for (i, a) in coeffs.iter().enumerate() {
                            df += (i + 1) as f64 * a * xp;
                            xp *= x;
                            f += a * xp;
                        }
                        (f, df, *c)
                    }
                    SpringLaw::Table { curve, c } => {
                        let (f, df) = curve.eval(x);
                        (f, df, *c)
                    }
                };
                let (fd, dfd) = match damper {
                    Some(curve) => curve.eval(rate),
                    None => (c * rate, c),
                };
                // Tension T pulls the points together: generalized force −T ∇l.
                (-(f + fd + act), -df, -dfd)
            }
            Law::Torsion {
                k,
                c,
                free,
                actuator,
                spring,
                damper,
            } => {
                let act = actuator.map_or(0.0, |m| self.motion(m, t)[0]);
                let (fs, dfs) = match spring {
                    Some(curve) => curve.eval(xi - free),
                    None => (k * (xi - free), *k),
                };
                let (fd, dfd) = match damper {
                    Some(curve) => curve.eval(rate),
                    None => (c * rate, *c),
                };
                (-fs - fd + act, -dfs, -dfd)
            }
            Law::Linear {
                k,
                c,
                rest,
                preload,
                curve,
                damper,
            } => {
                let (fs, dfs) = match curve {
                    Some(curve) => curve.eval(xi - rest),
                    None => (k * (xi - rest), *k),
                };
                let (fd, dfd) = match damper {
                    Some(curve) => curve.eval(rate),
                    None => (c * rate, *c),
                };
                (-fs - fd + preload, -dfs, -dfd)
            }
            Law::Contact { gap, hertz, k, c } => {
                let delta = gap - xi;
                if delta <= 0.0 {
                    return (0.0, 0.0, 0.0);
                }
                let ddelta = -rate;
                // F pushes apart (along +∇ξ). dF/dξ = −dF/dδ, dF/dξ̇ = −dF/dδ̇.
                let (f, f_d, f_dd) = if *hertz {
                    let d15 = delta.powf(1.5);
                    let dd15 = 1.5 * delta.sqrt();
                    (
                        k * d15 + c * d15 * ddelta,
                        k * dd15 + c * dd15 * ddelta,
                        c * d15,
                    )
                } else {
                    (k * delta + c * ddelta, *k, *c)
                };
                if f <= 0.0 {
                    (0.0, 0.0, 0.0)
                } else {
                    (f, -f_d, -f_dd)
                }
            }
            Law::Friction {
                mu,
                v_reg,
                joint,
                radius,
                stiction,
            } => {
                let n = self.joint_normal[*joint] * radius;
                let st = stiction.as_ref().map(|(s, slot)| (s, &self.stick[*slot]));
                crate::mbs::friction::force(*mu, *v_reg, n, st, xi, rate)
            }
            Law::Stop(stop) => stop.force(xi, rate),
        }
    }

    /// Gyroscopic force of rigid body `b` and (optionally) its derivatives w.r.t. `p`, `ṗ`.
    pub(super) fn gyro(&self, b: usize) -> (Vector4<f64>, Matrix4<f64>, Matrix4<f64>) {
        let (p, pd) = (self.snap.p[b], self.snap.pd[b]);
        let j = &self.bodies[b].inertia;
        let g = g_mat(&p);
        let w = 2.0 * g * pd;
        let jw = j * w;
        let h = w.cross(&jw);
        let q = -2.0 * g.transpose() * h;
        // ∂h/∂ω = ω̃ J − (Jω)~
        let dh = skew(&w) * j - skew(&jw);
        let dq_dpd = -2.0 * g.transpose() * dh * (2.0 * g);
        // ∂ω/∂p = −2 G(ṗ);  ∂(Gᵀh)/∂p|_h = columns G(e_i)ᵀ h.
        let mut gt_h = Matrix4::zeros();
        for i in 0..4 {
            let mut ei = Vector4::zeros();
            ei[i] = 1.0;
            gt_h.set_column(i, &(g_mat(&ei).transpose() * h));
        }
        let dq_dp = -2.0 * gt_h - 2.0 * g.transpose() * dh * (-2.0 * g_mat(&pd));
        (q, dq_dp, dq_dpd)
    }
}
