//! The FMI 2 C ABI master of the benchmarks (issue 12's rig, issue 15's peers at minimal
//! coordinates): `libmbsfmu.so` loaded with dlopen and driven the way a rig master drives it,
//! one instance per run, a `fmi2DoStep` loop at a fixed communication step with the inputs
//! sampled and set (`fmi2SetReal`) before every step, no input derivatives. Used by
//! `benches/rig.rs` and `benches/peers/src/bin/minimal_peers.rs` (`#[path]` includes).

#![allow(dead_code, clippy::missing_safety_doc)]

use fmi_sys::fmi2::*;
use std::ffi::{c_char, c_void, CString};
use std::path::{Path, PathBuf};

/// A run is stopped after this much thread CPU time.
pub const RUN_BUDGET: f64 = 30.0;

pub fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// `libmbsfmu.so`: `$MBSFMU_LIB` when set, else next to the running executable (`deps/` or one
/// level up, as for `cargo bench`), else the release build of the checkout this file is in.
pub fn lib_path() -> PathBuf {
    if let Some(p) = std::env::var_os("MBSFMU_LIB") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("executable path");
    let dir = exe.parent().expect("executable directory");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    [
        dir.join("libmbsfmu.so"),
        dir.parent()
            .map_or(dir.join("x"), |p| p.join("libmbsfmu.so")),
        root.join("target/release/libmbsfmu.so"),
        root.join("../../target/release/libmbsfmu.so"),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .expect("libmbsfmu.so: run `cargo build --release --lib` first (or set MBSFMU_LIB)")
}

/// Loads the FMU library.
pub fn load() -> Fmi2Binding {
    // SAFETY: loading our own library, which has no initialization side effects.
    unsafe { Fmi2Binding::new(lib_path()) }.expect("load libmbsfmu.so")
}

unsafe extern "C" fn logger(
    _env: *mut c_void,
    _name: *const c_char,
    status: u32,
    _category: *const c_char,
    message: *const c_char,
) {
    if status >= fmi2Status_fmi2Warning && !message.is_null() {
        // SAFETY: the FMU passes a NUL-terminated message.
        let m = unsafe { std::ffi::CStr::from_ptr(message) };
        // The FMU passes its text as the argument of a "%s" format (printf-safe); a Rust
        // callback cannot read C varargs on stable, so only the status is shown then.
        if m.to_bytes() == b"%s" {
            eprintln!(
                "  fmu: status {status} (message text in the printf argument, not readable here)"
            );
        } else {
            eprintln!("  fmu: {}", m.to_string_lossy());
        }
    }
}

/// A model in an FMU-like resources folder, with its token and value references.
pub struct Unpacked {
    _dir: tempdir::Dir,
    pub uri: CString,
    pub token: CString,
    pub table: mbsfmu::description::VariableTable,
}

mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl Unpacked {
    pub fn new(tag: &str, text: &str) -> Unpacked {
        let dir = std::env::temp_dir().join(format!("mbsfmu-rig-{tag}-{}", std::process::id()));
        let res = dir.join("resources");
        std::fs::create_dir_all(&res).unwrap();
        let model = res.join("model.toml");
        std::fs::write(&model, text).unwrap();
        let spec = mbsfmu::mbs::load_model(&model).expect("model loads");
        // resources/ as `mbsfmu export` lays it out (the resolved model next to model.toml).
        let (files, token) =
            mbsfmu::description::package::packed_resources(&spec, &model, None).unwrap();
        for (p, bytes) in &files {
            std::fs::write(res.join(p), bytes).unwrap();
        }
        let table = mbsfmu::description::VariableTable::from_spec(&spec);
        Unpacked {
            uri: CString::new(format!("file://{}/", res.display())).unwrap(),
            token: CString::new(token).unwrap(),
            _dir: tempdir::Dir(dir),
            table,
        }
    }
    pub fn vr(&self, name: &str) -> u32 {
        self.table
            .by_name(name)
            .unwrap_or_else(|| panic!("no variable {name}"))
            .value_reference
    }
}

/// One case: a model, its inputs as functions of time, the step, the horizon, and the error
/// measure (output names with their reference values at a time, if any).
pub struct Case {
    pub name: &'static str,
    pub model: String,
    pub h: f64,
    pub t_end: f64,
    pub inputs: Vec<&'static str>,
    pub signal: Box<dyn Fn(f64) -> Vec<f64>>,
    pub outputs: Vec<&'static str>,
    pub reference: Option<Reference>,
    pub rtol: f64,
    /// `solver.atol` too, when given (else the model's).
    pub atol: Option<f64>,
}

pub struct RunOut {
    pub cpu: f64,
    pub t_reached: f64,
    pub error: Option<f64>,
    pub stats: [i64; 6],
    /// `stats.cpu_time`: thread CPU time inside doStep.
    pub fmu_cpu: f64,
    pub message: Option<String>,
}

pub fn run_once(
    f: &Fmi2Binding,
    u: &Unpacked,
    case: &Case,
    method_item: i32,
    jacobian_item: Option<i32>,
) -> RunOut {
    run_recording(f, u, case, method_item, jacobian_item, None)
}

/// [`run_once`], also pushing the case's outputs after every communication step into `record`
/// when given (to make a reference from a tight-tolerance run).
pub fn run_recording(
    f: &Fmi2Binding,
    u: &Unpacked,
    case: &Case,
    method_item: i32,
    jacobian_item: Option<i32>,
    mut record: Option<&mut Vec<Vec<f64>>>,
) -> RunOut {
    let cb = fmi2CallbackFunctions {
        // SAFETY: the FMU calls the logger with exactly these five arguments for "%s" formats;
        // the variadic tail is never read.
        logger: Some(unsafe {
            std::mem::transmute::<
                *const (),
                unsafe extern "C" fn(
                    *mut c_void,
                    *const c_char,
                    u32,
                    *const c_char,
                    *const c_char,
                    ...
                ),
            >(logger as *const ())
        }),
        allocateMemory: None,
        freeMemory: None,
        stepFinished: None,
        componentEnvironment: std::ptr::null_mut(),
    };
    let name = CString::new("rig").unwrap();
    let in_vr: Vec<u32> = case.inputs.iter().map(|n| u.vr(n)).collect();
    let out_vr: Vec<u32> = case.outputs.iter().map(|n| u.vr(n)).collect();
    let stat_vr: Vec<u32> = [
        "stats.steps",
        "stats.rejected_steps",
        "stats.jac_evals",
        "stats.jac_updates",
        "stats.lu",
        "stats.restarts",
    ]
    .iter()
    .map(|n| u.vr(n))
    .collect();
    let c0 = thread_cpu();
    // SAFETY: valid strings and callbacks that outlive the instance.
    let c = unsafe {
        f.fmi2Instantiate(
            name.as_ptr(),
            fmi2Type_fmi2CoSimulation,
            u.token.as_ptr(),
            u.uri.as_ptr(),
            &cb,
            0,
            0,
        )
    };
    assert!(!c.is_null(), "instantiate failed");
    let mut out = vec![0.0; out_vr.len()];
    let mut err: Option<f64> = None;
    let mut message = None;
    let n = (case.t_end / case.h).round() as usize;
    let mut t_reached = 0.0;
    unsafe {
        let it = u.vr("solver.integrator");
        assert_eq!(f.fmi2SetInteger(c, &it, 1, &method_item), fmi2Status_fmi2OK);
        let rt = u.vr("solver.rtol");
        assert_eq!(f.fmi2SetReal(c, &rt, 1, &case.rtol), fmi2Status_fmi2OK);
        if let Some(atol) = case.atol {
            let at = u.vr("solver.atol");
            assert_eq!(f.fmi2SetReal(c, &at, 1, &atol), fmi2Status_fmi2OK);
        }
        if let Some(j) = jacobian_item {
            let jv = u.vr("solver.jacobian");
            assert_eq!(f.fmi2SetInteger(c, &jv, 1, &j), fmi2Status_fmi2OK);
        }
        f.fmi2SetupExperiment(c, 0, 0.0, 0.0, 0, 0.0);
        let u0 = (case.signal)(0.0);
        f.fmi2SetReal(c, in_vr.as_ptr(), in_vr.len(), u0.as_ptr());
        f.fmi2EnterInitializationMode(c);
        if f.fmi2ExitInitializationMode(c) != fmi2Status_fmi2OK {
            message = Some("initialization failed".into());
        }
        for k in 0..n {
            if message.is_some() {
                break;
            }
            let t = k as f64 * case.h;
            let v = (case.signal)(t);
            f.fmi2SetReal(c, in_vr.as_ptr(), in_vr.len(), v.as_ptr());
            let s = f.fmi2DoStep(c, t, case.h, 1);
            if s != fmi2Status_fmi2OK {
                message = Some(format!("doStep status {s} at t = {t}"));
                break;
            }
            t_reached = t + case.h;
            if let Some(rec) = record.as_mut() {
                f.fmi2GetReal(c, out_vr.as_ptr(), out_vr.len(), out.as_mut_ptr());
                rec.push(out.clone());
            }
            if let Some(r) = &case.reference {
                if let Some(want) = r(t_reached) {
                    f.fmi2GetReal(c, out_vr.as_ptr(), out_vr.len(), out.as_mut_ptr());
                    let e = want
                        .iter()
                        .zip(&out)
                        .map(|(a, b)| (a - b).abs())
                        .fold(0.0f64, f64::max);
                    err = Some(err.unwrap_or(0.0).max(e));
                }
            }
            // The budget check every 64 steps: CLOCK_THREAD_CPUTIME_ID is a system call (about
            // 1 µs), a visible share of a 1 ms step of a small model.
            if k % 64 == 63 && thread_cpu() - c0 > RUN_BUDGET {
                message = Some(format!(
                    "stopped after {RUN_BUDGET} s CPU at t = {t_reached}"
                ));
                break;
            }
        }
        let mut stats = [0i32; 6];
        f.fmi2GetInteger(c, stat_vr.as_ptr(), stat_vr.len(), stats.as_mut_ptr());
        let mut fmu_cpu = 0.0;
        let cv = u.vr("stats.cpu_time");
        f.fmi2GetReal(c, &cv, 1, &mut fmu_cpu);
        f.fmi2Terminate(c);
        f.fmi2FreeInstance(c);
        RunOut {
            cpu: thread_cpu() - c0,
            t_reached,
            error: err,
            stats: stats.map(i64::from),
            fmu_cpu,
            message,
        }
    }
}

/// Reference values of the case's outputs at a time, where the reference has that time.
pub type Reference = Box<dyn Fn(f64) -> Option<Vec<f64>>>;

/// A reference table: `t` and columns, values only at its own grid points.
pub fn table(path: &Path, cols: &[&str]) -> Reference {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty());
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let idx: Vec<usize> = cols
        .iter()
        .map(|c| header.iter().position(|h| h == c).unwrap())
        .collect();
    let rows: Vec<Vec<f64>> = lines
        .map(|l| l.split(',').map(|x| x.parse().unwrap()).collect())
        .collect();
    let dt = rows[1][0] - rows[0][0];
    Box::new(move |t: f64| {
        let k = (t / dt).round();
        if (t - k * dt).abs() > 1e-9 || k as usize >= rows.len() {
            return None;
        }
        let r = &rows[k as usize];
        Some(idx.iter().map(|&i| r[i]).collect())
    })
}
