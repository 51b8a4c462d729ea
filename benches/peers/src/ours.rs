//! Our own integrators in the same harness as the peers: the same `System`, the same references,
//! error measures and timing, so the ratios ours / peer isolate the integrator machinery.
//!
//! Outputs at the reference times: our integrators step freely to `t_end` (never stopped at a
//! reference time, which would cap the step size at the reference grid); between two accepted
//! steps the state is the quintic Hermite interpolant of `q` through `(q, v, a)` at both ends
//! (`a` from the saddle-point system at the accepted states), projected onto the constraint
//! manifold like CVODE's dense output. Interpolation error O(h⁶) per step, below the
//! integration error. Like the peers' dense output this is output cost, excluded from the time.

use crate::eval::Eval;
use crate::problems::Problem;
use crate::solvers::{cpu_time, RunResult};
use mbsfmu::integrate::any::AnyIntegrator;
use mbsfmu::integrate::system::{Mechanical, StepHooks};
use mbsfmu::integrate::{Integrator, JacobianStrategy, Method, Settings};
use mbsfmu::mbs::system::System;
use std::sync::Arc;

/// One of our integrators as named on the command line.
#[derive(Debug, Clone, Copy)]
pub struct Ours {
    pub method: Method,
    pub jacobian: JacobianStrategy,
    /// BDF only: largest order (default 5).
    pub max_order: Option<usize>,
}

/// `ours_<method>`, `ours_bdf_<jacobian strategy>` or `ours_bdf<k>_<strategy>` (BDF with the
/// order limited to k); None if the name is not ours.
pub fn parse(name: &str) -> Option<Ours> {
    let rest = name.strip_prefix("ours_")?;
    if let Some(r) = rest.strip_prefix("bdf") {
        let (k, j) = r.split_once('_')?;
        let max_order = if k.is_empty() {
            None
        } else {
            Some(k.parse().ok().filter(|k| (1..=5).contains(k))?)
        };
        return Some(Ours {
            method: Method::Bdf,
            jacobian: JacobianStrategy::from_name(j)?,
            max_order,
        });
    }
    // The one-step methods use the engine's analytic force Jacobians where they need them.
    Some(Ours {
        method: Method::from_name(rest)?,
        jacobian: JacobianStrategy::Analytic,
        max_order: None,
    })
}

/// Quintic Hermite interpolant on one step and its time derivative.
struct Hermite<'a> {
    t0: f64,
    h: f64,
    q0: &'a [f64],
    v0: &'a [f64],
    a0: &'a [f64],
    q1: &'a [f64],
    v1: &'a [f64],
    a1: &'a [f64],
}

impl Hermite<'_> {
    fn eval(&self, t: f64, q: &mut [f64], v: &mut [f64]) {
        let h = self.h;
        let s = ((t - self.t0) / h).clamp(0.0, 1.0);
        let (s2, s3, s4, s5) = (s * s, s * s * s, s.powi(4), s.powi(5));
        let b = [
            1.0 - 10.0 * s3 + 15.0 * s4 - 6.0 * s5,
            s - 6.0 * s3 + 8.0 * s4 - 3.0 * s5,
            0.5 * s2 - 1.5 * s3 + 1.5 * s4 - 0.5 * s5,
            0.5 * s3 - s4 + 0.5 * s5,
            -4.0 * s3 + 7.0 * s4 - 3.0 * s5,
            10.0 * s3 - 15.0 * s4 + 6.0 * s5,
        ];
        let d = [
            -30.0 * s2 + 60.0 * s3 - 30.0 * s4,
            1.0 - 18.0 * s2 + 32.0 * s3 - 15.0 * s4,
            s - 4.5 * s2 + 6.0 * s3 - 2.5 * s4,
            1.5 * s2 - 4.0 * s3 + 2.5 * s4,
            -12.0 * s2 + 28.0 * s3 - 15.0 * s4,
            30.0 * s2 - 60.0 * s3 + 30.0 * s4,
        ];
        for j in 0..q.len() {
            let c = [
                self.q0[j],
                h * self.v0[j],
                h * h * self.a0[j],
                h * h * self.a1[j],
                h * self.v1[j],
                self.q1[j],
            ];
            q[j] = (0..6).map(|k| b[k] * c[k]).sum();
            v[j] = (0..6).map(|k| d[k] * c[k]).sum::<f64>() / h;
        }
    }
}

/// One run of our integrator `method` at `rtol = atol`.
/// A run whose integration exceeds `cpu_cap` CPU seconds is stopped and reported as failed.
pub fn run(p: &Problem, o: Ours, rtol: f64, cpu_cap: f64) -> RunResult {
    let mut res = RunResult::default();
    let spec = Arc::new(p.spec.clone());
    let (mut sys, x0, out_sys) = match (|| -> Result<_, String> {
        let mut sys = System::new(spec.clone()).map_err(|e| e.to_string())?;
        let x0 = sys.initial_state(0.0).map_err(|e| e.to_string())?;
        // Assembled like the integrator's (assembly fixes the active constraint rows).
        let mut out_sys = System::new(spec.clone()).map_err(|e| e.to_string())?;
        out_sys.initial_state(0.0).map_err(|e| e.to_string())?;
        Ok((sys, x0, out_sys))
    })() {
        Ok(x) => x,
        Err(e) => {
            res.message = e;
            return res;
        }
    };
    // A second System for the outputs, so that evaluating them cannot touch the integrator's.
    let mut out = Eval::new(out_sys);
    let n = out.nq;
    let mut rec = crate::solvers::Recorder::new(p);
    let (mut qa, mut va, mut aa) = (x0.q.clone(), x0.v.clone(), vec![0.0; n]);
    let (mut qb, mut vb, mut ab) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    let (mut qi, mut vi) = (vec![0.0; n], vec![0.0; n]);
    let mut ta = 0.0;
    out.sys.accept_step(0.0, &qa, &va, None);
    out.accelerations(0.0, &qa, &va, &mut aa, None);
    rec.record(&mut out.sys, 0.0, &qa, &va);
    let settings = Settings {
        method: o.method,
        jacobian: o.jacobian,
        rtol,
        atol: rtol,
        ..Settings::default()
    };
    let (w0, c0) = (std::time::Instant::now(), cpu_time());
    let mut integ = match AnyIntegrator::new(settings, sys.n_q(), sys.n_c()) {
        Ok(i) => i,
        Err(e) => {
            res.message = e.to_string();
            return res;
        }
    };
    if let (AnyIntegrator::Bdf(b), Some(k)) = (&mut integ, o.max_order) {
        b.max_order = k;
    }
    let mut status = integ.initialize(&mut sys, &x0);
    let mut capped = false;
    let mut n_steps = 0u64;
    while status.is_ok() {
        n_steps += 1;
        if n_steps.is_multiple_of(64) && cpu_time() - c0 - res.output_cpu_s > cpu_cap {
            capped = true;
            break;
        }
        let t = match integ.step(&mut sys, p.t_end) {
            Ok(t) => t,
            Err(e) => {
                status = Err(e);
                break;
            }
        };
        let (ow, oc) = (std::time::Instant::now(), cpu_time());
        let x = Integrator::<System>::state(&integ);
        qb.copy_from_slice(&x.q);
        vb.copy_from_slice(&x.v);
        out.sys.accept_step(t, &qb, &vb, None);
        out.accelerations(t, &qb, &vb, &mut ab, None);
        let herm = Hermite {
            t0: ta,
            h: t - ta,
            q0: &qa,
            v0: &va,
            a0: &aa,
            q1: &qb,
            v1: &vb,
            a1: &ab,
        };
        while let Some(tr) = rec.pending(t) {
            herm.eval(tr, &mut qi, &mut vi);
            if crate::solvers::project_outputs() {
                out.project(tr, &mut qi, &mut vi, 1e-12, None);
            }
            rec.record(&mut out.sys, tr, &qi, &vi);
        }
        std::mem::swap(&mut qa, &mut qb);
        std::mem::swap(&mut va, &mut vb);
        std::mem::swap(&mut aa, &mut ab);
        ta = t;
        res.output_wall_s += ow.elapsed().as_secs_f64();
        res.output_cpu_s += cpu_time() - oc;
        if t >= p.t_end {
            break;
        }
    }
    res.wall_s = w0.elapsed().as_secs_f64() - res.output_wall_s;
    res.cpu_s = cpu_time() - c0 - res.output_cpu_s;
    match status {
        Ok(()) if capped => {
            res.message = format!("stopped at t = {ta} after {cpu_cap} s CPU (--max-run cap)")
        }
        Ok(()) => res.ok = true,
        Err(e) => res.message = e.to_string(),
    }
    let st = *Integrator::<System>::stats(&integ);
    res.steps = st.steps as i64;
    res.f_evals = st.f_evals as i64;
    res.f_evals_jac = st.f_evals_jacobian as i64;
    res.jac_evals = st.jac_evals as i64;
    res.nonlin_iters = st.newton_iters as i64;
    res.err_test_fails = st.error_test_failures as i64;
    res.conv_fails = st.convergence_failures as i64;
    res.projections = st.lu as i64;
    crate::solvers::finish(res, &rec, p)
}
