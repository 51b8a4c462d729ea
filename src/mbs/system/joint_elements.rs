//! The engine side of the force elements on joint coordinates: joint friction with stiction
//! (`mbs::friction`) and joint stops (`mbs::stops`): their laws from the spec, the stick states
//! at accepted steps and at initialization, the stops' effective inertias.

use super::{Law, System};
use crate::mbs::friction::{self, StickState, Stiction};
use crate::mbs::spec::{ForceKind, StictionSpec, StopDamping};
use crate::mbs::stops::Stop;
use crate::mbs::ModelError;

impl System {
    /// The law of a joint friction or stop element; stiction slots are numbered by `n_stick`.
    pub(super) fn joint_element_law(&self, kind: &ForceKind, n_stick: &mut usize) -> Law {
        let pv = |s: &crate::mbs::spec::Scalar| s.eval(&self.params);
        let mut stiction = |s: &Option<StictionSpec>, v_reg: f64| {
            s.as_ref().map(|s| {
                *n_stick += 1;
                (
                    Stiction {
                        mu_static: pv(&s.mu_static),
                        k: pv(&s.stiffness),
                        c: pv(&s.damping),
                        v_stick: s.v_stick.as_ref().map_or(v_reg, pv),
                    },
                    *n_stick - 1,
                )
            })
        };
        match kind {
            ForceKind::PrismaticFriction {
                joint,
                mu,
                v_reg,
                stiction: st,
            } => Law::Friction {
                mu: pv(mu),
                v_reg: pv(v_reg),
                joint: *joint,
                radius: 1.0,
                stiction: stiction(st, pv(v_reg)),
            },
            ForceKind::RevoluteFriction {
                joint,
                mu,
                v_reg,
                radius,
                stiction: st,
            } => Law::Friction {
                mu: pv(mu),
                v_reg: pv(v_reg),
                joint: *joint,
                radius: pv(radius),
                stiction: stiction(st, pv(v_reg)),
            },
            ForceKind::JointStop {
                lower,
                upper,
                stiffness,
                damping,
                ..
            } => {
                let (damping, restitution) = match damping {
                    StopDamping::Damping(c) => (pv(c), f64::NAN),
                    StopDamping::Restitution(e) => (f64::NAN, pv(e)),
                };
                Law::Stop(Stop {
                    lower: lower.as_ref().map_or(f64::NEG_INFINITY, pv),
                    upper: upper.as_ref().map_or(f64::INFINITY, pv),
                    k: pv(stiffness),
                    damping,
                    restitution,
                    m_eff: f64::NAN,
                })
            }
            _ => unreachable!("not a joint element"),
        }
    }

    /// Stick-state updates at an accepted step (absolute state, normals already updated).
    pub(super) fn accept_stick(&mut self, t: f64, q: &[f64], v: &[f64]) {
        if self.stick.is_empty() || self.stick_frozen {
            return;
        }
        self.load(t, q, Some(v));
        for i in 0..self.terms.len() {
            if let Law::Friction {
                mu,
                v_reg,
                joint,
                radius,
                stiction: Some((s, slot)),
            } = self.terms[i].law
            {
                let cv = self.coord(&self.terms[i].coord, Some(v));
                let n = self.joint_normal[joint] * radius;
                let before = self.stick[slot].stick;
                friction::accept(mu, v_reg, n, &s, &mut self.stick[slot], cv.val, cv.rate);
                self.law_switched |= self.stick[slot].stick != before;
            }
        }
    }

    /// At the initial (absolute) state: every stiction element slower than its `v_stick`
    /// sticks where it is, carrying the load that holds it there ([`Self::preload_stick`]), a
    /// faster one slips; every restitution stop gets the effective inertia of its coordinate.
    pub(super) fn initialize_joint_elements(
        &mut self,
        t: f64,
        q: &[f64],
        v: &[f64],
    ) -> Result<(), ModelError> {
        self.load(t, q, Some(v));
        for i in 0..self.terms.len() {
            let cv = self.coord(&self.terms[i].coord, Some(v));
            match self.terms[i].law {
                Law::Friction {
                    stiction: Some((s, slot)),
                    ..
                } => {
                    self.stick[slot] = if cv.rate.abs() < s.v_stick {
                        StickState::at(cv.val)
                    } else {
                        StickState {
                            stick: false,
                            anchor: cv.val,
                            v_prev: cv.rate,
                            armed: true,
                        }
                    }
                }
                Law::Stop(stop) if !stop.restitution.is_nan() => {
                    let m = self.effective_inertia(i, t, q).ok_or_else(|| {
                        self.err(format!(
                            "force '{}': cannot compute the effective inertia of the joint \
                             coordinate for `restitution` (singular saddle-point matrix); give \
                             `damping` instead",
                            self.spec.forces[self.terms[i].element].name
                        ))
                    })?;
                    if let Law::Stop(s) = &mut self.terms[i].law {
                        s.m_eff = m;
                    }
                }
                _ => {}
            }
        }
        // Joint friction reads the joint's normal force from the last accepted step; at the
        // start there is none, and the whole first step ran without friction (a block sliding
        // under μ = 0.3 lost nothing in its first 0.05 s step). The reactions of the initial
        // state, without friction, as every later step's are taken without it.
        if self
            .terms
            .iter()
            .any(|t| matches!(t.law, Law::Friction { .. }))
        {
            if let Ok((_, lambda)) = self.accelerations(t, q, v) {
                if lambda.len() == self.active.len() {
                    self.scratch_lambda = lambda;
                    self.update_joint_normals(t, q);
                }
            }
        }
        self.preload_stick(t, q, v);
        self.initialize_contact_friction(t, q, v);
        Ok(())
    }

    /// Sticking elements start carrying the force that holds their coordinate still
    /// (`ξ̈ = 0`), their anchors placed accordingly, instead of unloaded. Unloaded, the load
    /// arrived as a step on the anchor's spring-damper, whose overshoot (18 % at the examples'
    /// damping ratio of about 0.5) broke a block loose at 85 % of `μ_s N`: slope_block at 31°
    /// slid 0.42 m in 1 s. Each round adds `−m_eff ξ̈` (the force along `ξ` that cancels its
    /// acceleration, `m_eff` the coordinate's effective inertia under the constraints); exact
    /// in one round for one element, a few for coupled ones. A load above `μ_s N` breaks it
    /// loose at the first accepted step, as during the run.
    fn preload_stick(&mut self, t: f64, q: &[f64], v: &[f64]) {
        let sticking: Vec<(usize, usize, f64)> = (0..self.terms.len())
            .filter_map(|i| match self.terms[i].law {
                Law::Friction {
                    stiction: Some((s, slot)),
                    ..
                } if self.stick[slot].stick => Some((i, slot, s.k)),
                _ => None,
            })
            .collect();
        let m_eff: Vec<Option<f64>> = sticking
            .iter()
            .map(|&(i, _, _)| self.effective_inertia(i, t, q))
            .collect();
        for _ in 0..8 {
            let Ok((a, _)) = self.accelerations(t, q, v) else {
                return;
            };
            self.load(t, q, Some(v));
            let mut settled = true;
            for (&(i, slot, k), m) in sticking.iter().zip(&m_eff) {
                let Some(m) = *m else { continue };
                let cv = self.coord(&self.terms[i].coord, Some(v));
                let xdd: f64 = cv.columns().map(|(l, g)| cv.grad[l] * a[g]).sum();
                let df = -m * xdd;
                // F = −k (ξ − anchor) − c ξ̇: the anchor moves the force by k per unit.
                self.stick[slot].anchor += df / k;
                let f = k * (self.stick[slot].anchor - cv.val);
                settled &= df.abs() <= 1e-9 * f.abs().max(1e-12);
            }
            if settled {
                return;
            }
        }
    }

    /// `1 / (∇ξᵀ x)` with `[M Φqᵀ; Φq 0] [x; μ] = [∇ξ; 0]`: the inertia the coordinate of term
    /// `i` shows to a force along it, under the constraints (absolute state).
    fn effective_inertia(&mut self, i: usize, t: f64, q: &[f64]) -> Option<f64> {
        let (nq, nc) = (self.layout.n_q, self.active.len());
        self.load(t, q, None);
        let cv = self.coord(&self.terms[i].coord, None);
        let mut x = vec![0.0; nq + nc];
        for (l, g) in cv.columns() {
            x[g] += cv.grad[l];
        }
        let grad = x.clone();
        let mut fac = self.factor_saddle(t, q).ok()?;
        let ok = fac.solve(&mut x);
        if let super::output_derivs::Factored::Sparse(sp) = fac {
            self.saddle_cache = Some(sp);
        }
        let inv: f64 = grad[..nq].iter().zip(&x[..nq]).map(|(a, b)| a * b).sum();
        (ok && inv.is_finite() && inv > 0.0).then(|| 1.0 / inv)
    }

    /// Keep the stick states at the start of a step that may be taken again.
    pub(super) fn checkpoint_stick(&mut self) {
        self.stick_backup.clear();
        self.stick_backup.extend_from_slice(&self.stick);
    }

    /// Back to the states of the last checkpoint.
    pub(super) fn rollback_stick(&mut self) {
        if self.stick_backup.len() == self.stick.len() {
            self.stick.copy_from_slice(&self.stick_backup);
        }
        self.law_switched = false;
    }
}
