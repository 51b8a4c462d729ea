//! Issue 15's peer at minimal coordinates: the hand-written C right-hand sides of
//! `csrc/minimal.c` integrated by CVODE (BDF, Newton, dense direct solver with CVODE's
//! difference-quotient Jacobian, scalar `rtol = atol`) in a co-simulation loop, the way an
//! FMU exported by a Modelica tool would run them: at every communication point `t_k` the
//! master's samples arrive, the peer integrates to `t_k + H` and never past it
//! (`CVodeSetStopTime`), then the outputs are compared with the reference.
//!
//! Inputs (the chain's suspension): [`Inputs::Reconstructed`] gives the peer exactly what our
//! FMU makes of the samples (the smooth mode of `mbsfmu::cosim::reconstruct`, the suspension
//! acceleration from its segment); [`Inputs::Exact`] the analytic signal (a peer that knows the
//! input between samples, the generous case).
//! Restart: [`Restart::Continue`] keeps CVODE's history across communication points (the
//! fast, generous case); [`Restart::ReInit`] calls `CVodeReInit` at every point (what many
//! tools do after an input change: order 1, a fresh initial step).

use mbsfmu::cosim::InputState;
use mbsfmu::mbs::inputs::InputSegment;
use mbsfmu::mbs::spec::Reconstruction;
use std::os::raw::{c_int, c_void};
use sundials_sys::*;

extern "C" {
    pub fn mbs_dp_rhs(t: f64, y: *const f64, yd: *mut f64);
    pub fn mbs_chain_rhs(
        n: c_int,
        t: f64,
        y: *const f64,
        yd: *mut f64,
        sxdd: f64,
        sydd: f64,
        work: *mut f64,
    );
    pub fn mbs_slider_crank(th: f64, dth: f64, ddth: f64, torque: *mut f64, x: *mut f64);
}

/// Paper 003's suspension `s(t) = (2 + 0.3 sin ωt, 0.2 sin ωt)`, ω = 2π · 0.05: value,
/// velocity and acceleration of x and y.
pub fn suspension(t: f64) -> [[f64; 3]; 2] {
    let w = 2.0 * std::f64::consts::PI * 0.05;
    let (s, c) = (w * t).sin_cos();
    [
        [2.0 + 0.3 * s, 0.3 * w * c, -0.3 * w * w * s],
        [0.2 * s, 0.2 * w * c, -0.2 * w * w * s],
    ]
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Model {
    /// Stiff double pendulum, y = (θ1, θ2, ω1, ω2); output θ1.
    DoublePendulum,
    /// Chain of `n` pendulums, y = (φ, φ̇); outputs tip x, y.
    Chain(usize),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Inputs {
    Reconstructed,
    Exact,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Restart {
    Continue,
    ReInit,
}

impl Model {
    pub fn dim(self) -> usize {
        match self {
            Model::DoublePendulum => 4,
            Model::Chain(n) => 2 * n,
        }
    }
    /// The initial states: the pendulum of paper 000 (θ2 = 23π/12, ω2 = 10); the chain
    /// hanging straight at rest. With the exact signal the suspension already moves at t = 0,
    /// and "at rest" is the "projected" state of `tests/data/pendulum_chain_n*_projected.csv`
    /// (the particles at rest: `φ̇1 = −ṡx(0)`, the rest 0), what the engine makes of it. The
    /// reconstruction of samples starts flat (one sample, no slope) and takes the suspension
    /// to its velocity within the first steps, an impulse that leaves the particles at rest
    /// and turns the first rod: the same motion as H → 0, so the chain starts with φ̇ = 0.
    pub fn initial(self, inputs: Inputs) -> Vec<f64> {
        match self {
            Model::DoublePendulum => vec![0.0, 23.0 * std::f64::consts::PI / 12.0, 0.0, 10.0],
            Model::Chain(n) => {
                let mut y = vec![0.0; 2 * n];
                if inputs == Inputs::Exact {
                    y[n] = -suspension(0.0)[0][1];
                }
                y
            }
        }
    }
}

/// What the right-hand side needs besides the state.
pub struct Rhs {
    pub model: Model,
    pub inputs: Inputs,
    /// The suspension's segments on the current step (reconstructed mode).
    pub seg: [InputSegment; 2],
    work: Vec<f64>,
    pub evals: u64,
}

impl Rhs {
    pub fn new(model: Model, inputs: Inputs) -> Rhs {
        let n = model.dim() / 2;
        Rhs {
            model,
            inputs,
            seg: [InputSegment::constant(0.0, 0.0); 2],
            work: vec![0.0; n * n + n],
            evals: 0,
        }
    }
    /// Suspension acceleration at `t`.
    fn sdd(&self, t: f64) -> (f64, f64) {
        match self.inputs {
            Inputs::Exact => {
                let s = suspension(t);
                (s[0][2], s[1][2])
            }
            Inputs::Reconstructed => (self.seg[0].eval(t)[2], self.seg[1].eval(t)[2]),
        }
    }
    pub fn eval(&mut self, t: f64, y: &[f64], yd: &mut [f64]) {
        self.evals += 1;
        match self.model {
            // SAFETY: y and yd hold 4 values.
            Model::DoublePendulum => unsafe { mbs_dp_rhs(t, y.as_ptr(), yd.as_mut_ptr()) },
            Model::Chain(n) => {
                let (ax, ay) = self.sdd(t);
                // SAFETY: y, yd hold 2n values, work n² + n.
                unsafe {
                    mbs_chain_rhs(
                        n as c_int,
                        t,
                        y.as_ptr(),
                        yd.as_mut_ptr(),
                        ax,
                        ay,
                        self.work.as_mut_ptr(),
                    )
                }
            }
        }
    }
}

unsafe fn slice<'a>(v: N_Vector) -> &'a mut [f64] {
    std::slice::from_raw_parts_mut(N_VGetArrayPointer(v), N_VGetLength(v) as usize)
}

unsafe extern "C" fn cv_rhs(t: f64, y: N_Vector, ydot: N_Vector, ud: *mut c_void) -> c_int {
    let rhs = &mut *(ud as *mut Rhs);
    rhs.eval(t, slice(y), slice(ydot));
    0
}

/// Reference outputs at a communication point, if the reference has that time.
pub type Reference<'a> = &'a dyn Fn(f64) -> Option<Vec<f64>>;

#[derive(Debug, Clone, Default)]
pub struct CosimRun {
    pub ok: bool,
    pub message: String,
    /// Thread CPU time of the whole loop (create to free).
    pub cpu: f64,
    pub steps: i64,
    pub f_evals: i64,
    pub jac_evals: i64,
    pub error: f64,
}

/// CVODE on the C right-hand side through `[0, t_end]` in communication steps of `h`.
pub fn cvode_cosim(
    model: Model,
    inputs: Inputs,
    restart: Restart,
    h: f64,
    t_end: f64,
    tol: f64,
    reference: Reference,
) -> CosimRun {
    let dim = model.dim();
    let mut rhs = Box::new(Rhs::new(model, inputs));
    let mut res = CosimRun::default();
    let c0 = crate::thread_cpu();
    let n_steps = (t_end / h).round() as usize;
    // The master's samples of the suspension, reconstructed as our FMU does.
    let s0 = suspension(0.0);
    let mut inp = [InputState::new(s0[0][0]), InputState::new(s0[1][0])];
    unsafe {
        let mut sunctx: SUNContext = std::ptr::null_mut();
        SUNContext_Create(std::ptr::null_mut(), &mut sunctx);
        let y = N_VNew_Serial(dim as i64, sunctx);
        slice(y).copy_from_slice(&model.initial(inputs));
        let mem = CVodeCreate(CV_BDF, sunctx);
        let a = SUNDenseMatrix(dim as i64, dim as i64, sunctx);
        let ls = SUNLinSol_Dense(y, a, sunctx);
        let mut flag = CVodeInit(mem, Some(cv_rhs), 0.0, y);
        flag |= CVodeSStolerances(mem, tol, tol);
        flag |= CVodeSetUserData(mem, &mut *rhs as *mut Rhs as *mut c_void);
        flag |= CVodeSetLinearSolver(mem, ls, a);
        flag |= CVodeSetMaxNumSteps(mem, 1_000_000);
        let mut x: std::os::raw::c_long = 0;
        if flag != 0 {
            res.message = format!("CVODE setup failed ({flag})");
        } else {
            res.ok = true;
            for k in 0..n_steps {
                let t = k as f64 * h;
                let te = t + h;
                if let Model::Chain(_) = model {
                    let s = suspension(t);
                    for (i, inp) in inp.iter_mut().enumerate() {
                        inp.value = s[i][0];
                        inp.record(t, inp.value);
                        rhs.seg[i] = inp.segment(Reconstruction::Smooth, t, h);
                        inp.committed = Some(rhs.seg[i]);
                    }
                }
                if restart == Restart::ReInit && k > 0 {
                    CVodeReInit(mem, t, y);
                }
                CVodeSetStopTime(mem, te);
                let mut tr = t;
                let f = CVode(mem, te, y, &mut tr, CV_NORMAL);
                if f < 0 {
                    res.ok = false;
                    res.message = format!("CVode returned {f} at t = {tr}");
                    break;
                }
                if let Some(want) = reference(te) {
                    let ys = slice(y);
                    let got = outputs(&rhs, te, ys);
                    let e = want
                        .iter()
                        .zip(&got)
                        .map(|(a, b)| (a - b).abs())
                        .fold(0.0f64, f64::max);
                    res.error = res.error.max(e);
                }
                // Every 64 steps, as the FMU's master (the clock is a system call).
                if k % 64 == 63 && crate::thread_cpu() - c0 > 30.0 {
                    res.ok = false;
                    res.message = format!("stopped after 30 s CPU at t = {te}");
                    break;
                }
            }
        }
        CVodeGetNumSteps(mem, &mut x);
        res.steps = x as i64;
        CVodeGetNumRhsEvals(mem, &mut x);
        res.f_evals = x as i64;
        CVodeGetNumLinRhsEvals(mem, &mut x);
        res.f_evals += x as i64;
        CVodeGetNumJacEvals(mem, &mut x);
        res.jac_evals = x as i64;
        let mut mem = mem;
        CVodeFree(&mut mem);
        SUNLinSolFree(ls);
        SUNMatDestroy(a);
        N_VDestroy(y);
        SUNContext_Free(&mut sunctx);
    }
    res.cpu = crate::thread_cpu() - c0;
    res
}

/// The outputs the FMU reports: θ1; the tip `s(t) + Σ (sin φ_k, −cos φ_k)` with the
/// suspension position the peer has at `t` (its reconstruction or the exact signal).
pub fn outputs(rhs: &Rhs, t: f64, y: &[f64]) -> Vec<f64> {
    match rhs.model {
        Model::DoublePendulum => vec![y[0]],
        Model::Chain(n) => {
            let (sx, sy) = match rhs.inputs {
                Inputs::Exact => {
                    let s = suspension(t);
                    (s[0][0], s[1][0])
                }
                Inputs::Reconstructed => (rhs.seg[0].eval(t)[0], rhs.seg[1].eval(t)[0]),
            };
            let (dx, dy) = y[..n]
                .iter()
                .fold((0.0, 0.0), |(x, yy), p| (x + p.sin(), yy - p.cos()));
            vec![sx + dx, sy + dy]
        }
    }
}

/// The slider-crank peer: no state is left once the crank angle is prescribed, so a
/// minimal-coordinate FMU evaluates the inverse dynamics at each communication point, with
/// the angle's rate and acceleration from the same reconstruction our FMU uses. Returns the
/// CPU time of the loop and the torque error at the reference points.
pub fn slider_crank_cosim(h: f64, t_end: f64, reference: Reference) -> CosimRun {
    let c0 = crate::thread_cpu();
    let mut inp = InputState::new(0.0);
    let mut res = CosimRun {
        ok: true,
        ..Default::default()
    };
    let n_steps = (t_end / h).round() as usize;
    for k in 0..n_steps {
        let t = k as f64 * h;
        inp.value = 2.0 * std::f64::consts::PI * t;
        inp.record(t, inp.value);
        let seg = inp.segment(Reconstruction::Smooth, t, h);
        inp.committed = Some(seg);
        // The outputs at every communication point, as an FMU computes them for its master.
        let te = t + h;
        let [th, dth, ddth] = seg.eval(te);
        let (mut tau, mut x) = (0.0, 0.0);
        // SAFETY: two output pointers to locals.
        unsafe { mbs_slider_crank(th, dth, ddth, &mut tau, &mut x) };
        res.f_evals += 1;
        if let Some(want) = reference(te) {
            res.error = res.error.max((std::hint::black_box(tau) - want[0]).abs());
        }
    }
    res.cpu = crate::thread_cpu() - c0;
    res
}

#[cfg(test)]
mod tests {
    //! The C right-hand sides against the independent references of `data/` (scipy at 1e-12,
    //! closed form), with the peers harness's error measures: θ1 on the 1 ms grid; all rod
    //! angles on the reference grid; the crank torque on the 10 ms grid.
    use super::*;

    fn csv(file: &str) -> (Vec<String>, Vec<Vec<f64>>) {
        let path = crate::data_dir().join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines().filter(|l| !l.starts_with('#'));
        let header = lines.next().unwrap().split(',').map(String::from).collect();
        let rows = lines
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.split(',').map(|x| x.parse().unwrap()).collect())
            .collect();
        (header, rows)
    }

    /// Classical RK4 at a fixed step: independent of CVODE, so the check is of the RHS only.
    fn rk4(rhs: &mut Rhs, y: &mut [f64], t: f64, h: f64) {
        let n = y.len();
        let (mut k1, mut k2, mut k3, mut k4, mut tmp) = (
            vec![0.0; n],
            vec![0.0; n],
            vec![0.0; n],
            vec![0.0; n],
            vec![0.0; n],
        );
        rhs.eval(t, y, &mut k1);
        (0..n).for_each(|i| tmp[i] = y[i] + 0.5 * h * k1[i]);
        rhs.eval(t + 0.5 * h, &tmp, &mut k2);
        (0..n).for_each(|i| tmp[i] = y[i] + 0.5 * h * k2[i]);
        rhs.eval(t + 0.5 * h, &tmp, &mut k3);
        (0..n).for_each(|i| tmp[i] = y[i] + h * k3[i]);
        rhs.eval(t + h, &tmp, &mut k4);
        (0..n).for_each(|i| y[i] += h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]));
    }

    #[test]
    fn double_pendulum_rhs_follows_the_radau_reference() {
        let (h, rows) = csv("double_pendulum_stiff.csv");
        let col = |n: &str| h.iter().position(|c| c == n).unwrap();
        let (c1, c2) = (col("theta1"), col("omega2"));
        let mut rhs = Rhs::new(Model::DoublePendulum, Inputs::Exact);
        let mut y = Model::DoublePendulum.initial(Inputs::Exact);
        // Explicit RK4 at 2 µs (the stiff eigenvalue ~ −1e5 needs h < 2.8e-5), 500 per row.
        let mut err: f64 = 0.0;
        for (k, r) in rows.iter().enumerate().skip(1) {
            for j in 0..500 {
                rk4(
                    &mut rhs,
                    &mut y,
                    (k - 1) as f64 * 1e-3 + j as f64 * 2e-6,
                    2e-6,
                );
            }
            err = err.max((y[0] - r[c1]).abs());
            assert!((y[3] - r[c2]).abs() < 1e-5, "ω2 at {}: {}", r[0], y[3]);
        }
        assert!(err < 1e-8, "θ1 error {err}");
    }

    #[test]
    fn chain_rhs_follows_the_dop853_reference() {
        let n = 16;
        let (h, rows) = csv("pendulum_chain_n16.csv");
        let phi1 = h.iter().position(|c| c == "phi_1").unwrap();
        let mut rhs = Rhs::new(Model::Chain(n), Inputs::Exact);
        // The "rigid" start of this reference: φ̇ = 0.
        let mut y = vec![0.0; 2 * n];
        let dt = rows[1][0] - rows[0][0];
        let sub = (dt / 1e-3).round() as usize;
        let mut err: f64 = 0.0;
        for (k, r) in rows
            .iter()
            .enumerate()
            .skip(1)
            .take_while(|(_, r)| r[0] <= 20.0)
        {
            for j in 0..sub {
                rk4(
                    &mut rhs,
                    &mut y,
                    (k - 1) as f64 * dt + j as f64 * 1e-3,
                    1e-3,
                );
            }
            for i in 0..n {
                err = err.max((y[i] - r[phi1 + i]).abs());
            }
        }
        assert!(err < 1e-8, "rod angle error over 20 s {err}");
    }

    #[test]
    fn projected_chain_start_matches_its_reference() {
        let n = 16;
        let (h, rows) = csv("../../../tests/data/pendulum_chain_n16_projected.csv");
        let (tx, ty) = (
            h.iter().position(|c| c == "tip_x").unwrap(),
            h.iter().position(|c| c == "tip_y").unwrap(),
        );
        let mut rhs = Rhs::new(Model::Chain(n), Inputs::Exact);
        let mut y = Model::Chain(n).initial(Inputs::Exact);
        let dt = rows[1][0] - rows[0][0];
        let sub = (dt / 1e-3).round() as usize;
        let mut err: f64 = 0.0;
        for (k, r) in rows
            .iter()
            .enumerate()
            .skip(1)
            .take_while(|(_, r)| r[0] <= 5.0)
        {
            for j in 0..sub {
                rk4(
                    &mut rhs,
                    &mut y,
                    (k - 1) as f64 * dt + j as f64 * 1e-3,
                    1e-3,
                );
            }
            let o = outputs(&rhs, r[0], &y);
            err = err.max((o[0] - r[tx]).abs()).max((o[1] - r[ty]).abs());
        }
        assert!(err < 1e-8, "tip error over 5 s {err}");
    }

    #[test]
    fn slider_crank_torque_is_the_closed_form() {
        let (h, rows) = csv("slider_crank.csv");
        let col = |n: &str| h.iter().position(|c| c == n).unwrap();
        let (th, dth, ddth, tq, sx) = (
            col("crank_angle"),
            col("crank_rate"),
            col("crank_acc"),
            col("crank_torque"),
            col("slider_x"),
        );
        for r in &rows {
            let (mut tau, mut x) = (0.0, 0.0);
            unsafe { mbs_slider_crank(r[th], r[dth], r[ddth], &mut tau, &mut x) };
            assert!(
                (tau - r[tq]).abs() < 1e-10,
                "t {}: {tau} vs {}",
                r[0],
                r[tq]
            );
            assert!((x - r[sx]).abs() < 1e-12);
        }
    }
}
