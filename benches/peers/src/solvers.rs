//! CVODE and IDA on our equations, one-step mode with dense output at the reference times.

use crate::eval::Eval;
use crate::problems::Problem;
use mbsfmu::integrate::system::{Mechanical, StepHooks};
use mbsfmu::mbs::system::System;
use std::os::raw::{c_int, c_void};
use std::sync::Arc;
use sundials_sys::*;

#[derive(Debug, Clone, Default)]
pub struct RunResult {
    pub ok: bool,
    pub message: String,
    pub steps: i64,
    /// Right-hand side (CVODE) / residual (IDA) evaluations, including those of the
    /// finite-difference Jacobians.
    pub f_evals: i64,
    /// Of which for the finite-difference Jacobians.
    pub f_evals_jac: i64,
    pub jac_evals: i64,
    pub nonlin_iters: i64,
    pub err_test_fails: i64,
    pub conv_fails: i64,
    pub projections: i64,
    /// LU factorizations (ours; SUNDIALS does not count them separately).
    pub lu: i64,
    /// Max-abs error over the reference times.
    pub error: f64,
    pub wall_s: f64,
    pub cpu_s: f64,
    /// Time spent evaluating the outputs at the reference times (dense output, projection of
    /// the output state for CVODE, observed quantities), excluded from `wall_s`/`cpu_s`.
    pub output_wall_s: f64,
    pub output_cpu_s: f64,
}

pub fn cpu_time() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

struct Ctx {
    eval: Eval,
    q: Vec<f64>,
    v: Vec<f64>,
    a: Vec<f64>,
}

unsafe fn slice<'a>(v: N_Vector) -> &'a mut [f64] {
    std::slice::from_raw_parts_mut(N_VGetArrayPointer(v), N_VGetLength(v) as usize)
}

unsafe extern "C" fn cv_rhs(t: f64, y: N_Vector, ydot: N_Vector, ud: *mut c_void) -> c_int {
    let ctx = &mut *(ud as *mut Ctx);
    let n = ctx.eval.nq;
    let y = slice(y);
    let yd = slice(ydot);
    let (q, v) = y.split_at(n);
    if !ctx.eval.accelerations(t, q, v, &mut ctx.a, None) {
        return 1; // recoverable: CVODE retries with a smaller step
    }
    yd[..n].copy_from_slice(v);
    yd[n..].copy_from_slice(&ctx.a);
    0
}

unsafe extern "C" fn cv_proj(
    t: f64,
    ycur: N_Vector,
    corr: N_Vector,
    _eps: f64,
    err: N_Vector,
    ud: *mut c_void,
) -> c_int {
    let ctx = &mut *(ud as *mut Ctx);
    let n = ctx.eval.nq;
    let y = slice(ycur);
    let c = slice(corr);
    ctx.q.copy_from_slice(&y[..n]);
    ctx.v.copy_from_slice(&y[n..]);
    let ok = if err.is_null() {
        ctx.eval.project(t, &mut ctx.q, &mut ctx.v, 1e-12, None)
    } else {
        let e = slice(err);
        let (eq, ev) = e.split_at_mut(n);
        ctx.eval
            .project(t, &mut ctx.q, &mut ctx.v, 1e-12, Some((eq, ev)))
    };
    if !ok {
        return 1;
    }
    for j in 0..n {
        c[j] = ctx.q[j] - y[j];
        c[n + j] = ctx.v[j] - y[n + j];
    }
    0
}

unsafe extern "C" fn ida_res(
    t: f64,
    y: N_Vector,
    yp: N_Vector,
    r: N_Vector,
    ud: *mut c_void,
) -> c_int {
    let ctx = &mut *(ud as *mut Ctx);
    if ctx.eval.ggl_residual(t, slice(y), slice(yp), slice(r)) {
        0
    } else {
        1
    }
}

/// Records observed values at the reference times as the solver passes them.
pub struct Recorder<'p> {
    p: &'p Problem,
    next: usize,
    err: f64,
    obs: Vec<f64>,
}

impl<'p> Recorder<'p> {
    pub fn new(p: &'p Problem) -> Self {
        Recorder {
            p,
            next: 0,
            err: 0.0,
            obs: Vec::new(),
        }
    }
    pub fn record(&mut self, sys: &mut System, t: f64, q: &[f64], v: &[f64]) {
        self.p.observable.observe(sys, t, q, v, &mut self.obs);
        let e = self
            .p
            .observable
            .error(&self.obs, &self.p.reference.values[self.next]);
        self.err = self.err.max(e);
        self.next += 1;
    }
    /// Reference times up to `t` (within the run), or None when done.
    pub fn pending(&self, t: f64) -> Option<f64> {
        let tr = *self.p.reference.t.get(self.next)?;
        (tr <= t * (1.0 + 1e-14) && tr <= self.p.t_end).then_some(tr)
    }
}

/// The evaluator at the consistent initial state: `(eval, [q; v], a, λ)`.
type Initial = (Eval, Vec<f64>, Vec<f64>, Vec<f64>);

fn setup(p: &Problem) -> Result<Initial, String> {
    let mut sys = System::new(Arc::new(p.spec.clone())).map_err(|e| e.to_string())?;
    let x0 = sys.initial_state(0.0).map_err(|e| e.to_string())?;
    let mut eval = Eval::new(sys);
    let mut a = vec![0.0; eval.nq];
    let mut lam = vec![0.0; eval.nc];
    if !eval.accelerations(0.0, &x0.q, &x0.v, &mut a, Some(&mut lam)) {
        return Err("singular saddle-point matrix at t = 0".into());
    }
    eval.evals = 0;
    let _ = eval.sys.n_q();
    let mut y = x0.q.clone();
    y.extend_from_slice(&x0.v);
    Ok((eval, y, a, lam))
}

/// CVODE BDF, dense direct linear solver with CVODE's own difference-quotient Jacobian, on
/// `q̇ = v, v̇ = a(t, q, v)`; CVODE's projection (CVodeSetProjFn) puts `(q, v)` back on
/// `Φ = 0, Φq v + Φt = 0` after every step and projects the error estimate.
pub fn run_cvode(p: &Problem, rtol: f64, atol: f64) -> RunResult {
    let (eval, y0, _a0, _) = match setup(p) {
        Ok(x) => x,
        Err(e) => {
            return RunResult {
                message: e,
                ..Default::default()
            }
        }
    };
    let n = eval.nq;
    let mut ctx = Box::new(Ctx {
        q: vec![0.0; n],
        v: vec![0.0; n],
        a: vec![0.0; n],
        eval,
    });
    let mut rec = Recorder::new(p);
    let mut res = RunResult::default();
    let (w0, c0) = (std::time::Instant::now(), cpu_time());
    unsafe {
        let mut sunctx: SUNContext = std::ptr::null_mut();
        SUNContext_Create(std::ptr::null_mut(), &mut sunctx);
        let y = N_VNew_Serial(2 * n as i64, sunctx);
        slice(y).copy_from_slice(&y0);
        let ytmp = N_VClone(y);
        let mem = CVodeCreate(CV_BDF, sunctx);
        let a = SUNDenseMatrix(2 * n as i64, 2 * n as i64, sunctx);
        let ls = SUNLinSol_Dense(y, a, sunctx);
        let mut flag = CVodeInit(mem, Some(cv_rhs), 0.0, y);
        flag |= CVodeSStolerances(mem, rtol, atol);
        flag |= CVodeSetUserData(mem, &mut *ctx as *mut Ctx as *mut c_void);
        flag |= CVodeSetLinearSolver(mem, ls, a);
        flag |= CVodeSetMaxNumSteps(mem, 10_000_000);
        flag |= CVodeSetProjFn(mem, Some(cv_proj));
        flag |= CVodeSetStopTime(mem, p.t_end);
        if flag != 0 {
            res.message = format!("CVODE setup failed ({flag})");
        } else {
            let (q0, v0) = y0.split_at(n);
            rec.record(&mut ctx.eval.sys, 0.0, q0, v0);
            let mut t = 0.0;
            loop {
                let f = CVode(mem, p.t_end, y, &mut t, CV_ONE_STEP);
                if f < 0 {
                    res.message = format!("CVode returned {f} at t = {t}");
                    break;
                }
                {
                    let ys = slice(y);
                    let (q, v) = ys.split_at(n);
                    ctx.eval.sys.accept_step(t, q, v, None);
                }
                let (ow, oc) = (std::time::Instant::now(), cpu_time());
                while let Some(tr) = rec.pending(t) {
                    CVodeGetDky(mem, tr, 0, ytmp);
                    // CVODE's interpolant is not on the constraint manifold: the returned
                    // state is projected like the steps are (outputs only; the integration
                    // is not affected).
                    let ys = slice(ytmp);
                    ctx.q.copy_from_slice(&ys[..n]);
                    ctx.v.copy_from_slice(&ys[n..]);
                    if project_outputs() {
                        ctx.eval.project(tr, &mut ctx.q, &mut ctx.v, 1e-12, None);
                    }
                    rec.record(&mut ctx.eval.sys, tr, &ctx.q, &ctx.v);
                }
                res.output_wall_s += ow.elapsed().as_secs_f64();
                res.output_cpu_s += cpu_time() - oc;
                if t >= p.t_end || f == CV_TSTOP_RETURN {
                    res.ok = true;
                    break;
                }
            }
        }
        let mut x: std::os::raw::c_long = 0;
        CVodeGetNumSteps(mem, &mut x);
        res.steps = x as i64;
        CVodeGetNumRhsEvals(mem, &mut x);
        res.f_evals = x as i64;
        CVodeGetNumLinRhsEvals(mem, &mut x);
        res.f_evals_jac = x as i64;
        res.f_evals += res.f_evals_jac;
        CVodeGetNumJacEvals(mem, &mut x);
        res.jac_evals = x as i64;
        CVodeGetNumNonlinSolvIters(mem, &mut x);
        res.nonlin_iters = x as i64;
        CVodeGetNumErrTestFails(mem, &mut x);
        res.err_test_fails = x as i64;
        CVodeGetNumNonlinSolvConvFails(mem, &mut x);
        res.conv_fails = x as i64;
        CVodeGetNumProjEvals(mem, &mut x);
        res.projections = x as i64;
        let mut mem = mem;
        CVodeFree(&mut mem);
        SUNLinSolFree(ls);
        SUNMatDestroy(a);
        N_VDestroy(y);
        N_VDestroy(ytmp);
        SUNContext_Free(&mut sunctx);
    }
    res.wall_s = w0.elapsed().as_secs_f64() - res.output_wall_s;
    res.cpu_s = cpu_time() - c0 - res.output_cpu_s;
    finish(res, &rec, p)
}

pub fn project_outputs() -> bool {
    std::env::var("PEERS_NO_OUTPUT_PROJECTION").is_err()
}

pub fn finish(mut res: RunResult, rec: &Recorder, p: &Problem) -> RunResult {
    res.error = rec.err;
    if res.ok && rec.next < p.reference.t.iter().filter(|&&t| t <= p.t_end).count() {
        res.ok = false;
        res.message = format!("only {} of the reference times reached", rec.next);
    }
    res
}

/// IDA (variable-order BDF) on the GGL residual, dense direct linear solver with IDA's own
/// difference-quotient Jacobian; λ, η are algebraic (IDASetId) and excluded from the error
/// test (IDASetSuppressAlg).
pub fn run_ida(p: &Problem, rtol: f64, atol: f64) -> RunResult {
    let (eval, qv0, a0, lam0) = match setup(p) {
        Ok(x) => x,
        Err(e) => {
            return RunResult {
                message: e,
                ..Default::default()
            }
        }
    };
    let (n, nc) = (eval.nq, eval.nc);
    let ny = 2 * n + 2 * nc;
    let mut y0 = qv0.clone();
    y0.extend_from_slice(&lam0);
    y0.extend(std::iter::repeat_n(0.0, nc));
    let mut yp0 = qv0[n..].to_vec();
    yp0.extend_from_slice(&a0);
    yp0.extend(std::iter::repeat_n(0.0, 2 * nc));
    let mut ctx = Box::new(Ctx {
        q: vec![0.0; n],
        v: vec![0.0; n],
        a: vec![0.0; n],
        eval,
    });
    let mut rec = Recorder::new(p);
    let mut res = RunResult::default();
    let (w0, c0) = (std::time::Instant::now(), cpu_time());
    unsafe {
        let mut sunctx: SUNContext = std::ptr::null_mut();
        SUNContext_Create(std::ptr::null_mut(), &mut sunctx);
        let y = N_VNew_Serial(ny as i64, sunctx);
        slice(y).copy_from_slice(&y0);
        let yp = N_VClone(y);
        slice(yp).copy_from_slice(&yp0);
        let id = N_VClone(y);
        for (i, x) in slice(id).iter_mut().enumerate() {
            *x = if i < 2 * n { 1.0 } else { 0.0 };
        }
        let ytmp = N_VClone(y);
        let mem = IDACreate(sunctx);
        let a = SUNDenseMatrix(ny as i64, ny as i64, sunctx);
        let ls = SUNLinSol_Dense(y, a, sunctx);
        let mut flag = IDAInit(mem, Some(ida_res), 0.0, y, yp);
        flag |= IDASStolerances(mem, rtol, atol);
        flag |= IDASetUserData(mem, &mut *ctx as *mut Ctx as *mut c_void);
        flag |= IDASetLinearSolver(mem, ls, a);
        flag |= IDASetMaxNumSteps(mem, 10_000_000);
        flag |= IDASetId(mem, id);
        flag |= IDASetSuppressAlg(mem, 1);
        flag |= IDASetStopTime(mem, p.t_end);
        // IDA's own initial-step estimate is tiny at tight tolerances (large v̇ of the stiff
        // springs); at such steps the index-2 iteration matrix (condition ~ 1/h²) makes the
        // Newton iteration fail at t = 0. A user sets the initial step: 1e-4 s.
        let h0 = std::env::var("PEERS_IDA_H0")
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(1e-4);
        flag |= IDASetInitStep(mem, h0);
        if flag != 0 {
            res.message = format!("IDA setup failed ({flag})");
        } else {
            let (q0, v0) = (&y0[..n], &y0[n..2 * n]);
            rec.record(&mut ctx.eval.sys, 0.0, q0, v0);
            let mut t = 0.0;
            loop {
                let f = IDASolve(mem, p.t_end, &mut t, y, yp, IDA_ONE_STEP);
                if f < 0 {
                    res.message = format!("IDASolve returned {f} at t = {t}");
                    break;
                }
                {
                    let ys = slice(y);
                    ctx.eval.sys.accept_step(
                        t,
                        &ys[..n],
                        &ys[n..2 * n],
                        Some(&ys[2 * n..2 * n + nc]),
                    );
                }
                let (ow, oc) = (std::time::Instant::now(), cpu_time());
                while let Some(tr) = rec.pending(t) {
                    IDAGetDky(mem, tr, 0, ytmp);
                    let ys = slice(ytmp);
                    rec.record(&mut ctx.eval.sys, tr, &ys[..n], &ys[n..2 * n]);
                }
                res.output_wall_s += ow.elapsed().as_secs_f64();
                res.output_cpu_s += cpu_time() - oc;
                if t >= p.t_end || f == IDA_TSTOP_RETURN {
                    res.ok = true;
                    break;
                }
            }
        }
        let mut x: std::os::raw::c_long = 0;
        IDAGetNumSteps(mem, &mut x);
        res.steps = x as i64;
        IDAGetNumResEvals(mem, &mut x);
        res.f_evals = x as i64;
        IDAGetNumLinResEvals(mem, &mut x);
        res.f_evals_jac = x as i64;
        res.f_evals += res.f_evals_jac;
        IDAGetNumJacEvals(mem, &mut x);
        res.jac_evals = x as i64;
        IDAGetNumNonlinSolvIters(mem, &mut x);
        res.nonlin_iters = x as i64;
        IDAGetNumErrTestFails(mem, &mut x);
        res.err_test_fails = x as i64;
        IDAGetNumNonlinSolvConvFails(mem, &mut x);
        res.conv_fails = x as i64;
        let mut mem = mem;
        IDAFree(&mut mem);
        SUNLinSolFree(ls);
        SUNMatDestroy(a);
        for v in [y, yp, id, ytmp] {
            N_VDestroy(v);
        }
        SUNContext_Free(&mut sunctx);
    }
    res.wall_s = w0.elapsed().as_secs_f64() - res.output_wall_s;
    res.cpu_s = cpu_time() - c0 - res.output_cpu_s;
    finish(res, &rec, p)
}
