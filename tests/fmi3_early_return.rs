//! FMI 3 early return at contact events through the real C ABI (libloading): paper 002's two
//! bouncing balls; a long `fmi3DoStep` returns early with `earlyReturn = true` and
//! `lastSuccessfulTime` at the contact instants of the independent exact reference
//! (`tests/data/bouncing_balls_events.csv`), outputs published there, and the next `fmi3DoStep`
//! continues from that time. Without `earlyReturnAllowed`, or for a model without contacts,
//! doStep never returns early; the capability flag follows the model.
//! Run: `cargo test --release --test fmi3_early_return`.

mod fmi_common;

use fmi_common::*;
use fmi_sys::fmi3::*;
use mbsfmu::description::xml::{FmiVersion, ModelDescription};
use mbsfmu::description::{Capabilities, VariableTable};
use std::ffi::c_void;
use std::path::Path;
use std::ptr::null;

const OK: u32 = fmi3Status_fmi3OK;

fn lib() -> Fmi3Binding {
    unsafe { Fmi3Binding::new(lib_path()) }.expect("load libmbsfmu.so")
}

fn model_file() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/bouncing_balls.toml")
}

/// `resources/model.toml` with the bouncing balls and its token.
fn resources() -> (TempDir, String, String) {
    let dir = TempDir::new("early");
    let res = dir.0.join("resources");
    std::fs::create_dir_all(&res).unwrap();
    let model = res.join("model.toml");
    std::fs::copy(model_file(), &model).unwrap();
    let spec = mbsfmu::mbs::load_model(&model).unwrap();
    let token = mbsfmu::description::token::model_token_of(&model, &spec.source_files).unwrap();
    let path = format!("{}/", res.display());
    (dir, path, token)
}

fn vr_of(name: &str) -> u32 {
    let spec = mbsfmu::mbs::load_model(&model_file()).unwrap();
    VariableTable::from_spec(&spec)
        .by_name(name)
        .unwrap()
        .value_reference
}

/// Reference contact switches before `t_end`.
fn reference_before(t_end: f64) -> Vec<f64> {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bouncing_balls_events.csv");
    std::fs::read_to_string(f)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('t'))
        .map(|l| l.split(',').next().unwrap().trim().parse::<f64>().unwrap())
        .filter(|&t| t < t_end)
        .collect()
}

struct Inst<'a> {
    f: &'a Fmi3Binding,
    c: fmi3Instance,
    sink: Box<LogSink>,
}

impl<'a> Inst<'a> {
    fn new(f: &'a Fmi3Binding, path: &str, token: &str, early_allowed: bool) -> Inst<'a> {
        let sink = Box::new(LogSink::default());
        let (n, t, p) = (cstr("balls"), cstr(token), cstr(path));
        let c = unsafe {
            f.fmi3InstantiateCoSimulation(
                n.as_ptr(),
                t.as_ptr(),
                p.as_ptr(),
                false,
                true,
                false,
                early_allowed,
                null(),
                0,
                &*sink as *const LogSink as *mut c_void,
                Some(fmi3_logger),
                None,
            )
        };
        assert!(!c.is_null(), "{}", sink.dump());
        unsafe {
            assert_eq!(
                f.fmi3EnterInitializationMode(c, false, 0.0, 0.0, true, 5.0),
                OK
            );
            assert_eq!(f.fmi3ExitInitializationMode(c), OK, "{}", sink.dump());
        }
        Inst { f, c, sink }
    }
    /// doStep: (status, earlyReturn, lastSuccessfulTime).
    fn step(&self, t: f64, h: f64) -> (u32, bool, f64) {
        let (mut ehn, mut term, mut early, mut lst) = (true, true, true, f64::NAN);
        let s = unsafe {
            self.f.fmi3DoStep(
                self.c, t, h, true, &mut ehn, &mut term, &mut early, &mut lst,
            )
        };
        assert!(!ehn && !term, "{}", self.sink.dump());
        (s, early, lst)
    }
    fn get(&self, vr: u32) -> f64 {
        let mut v = f64::NAN;
        assert_eq!(
            unsafe { self.f.fmi3GetFloat64(self.c, &vr, 1, &mut v, 1) },
            OK
        );
        v
    }
}

impl Drop for Inst<'_> {
    fn drop(&mut self) {
        unsafe { self.f.fmi3FreeInstance(self.c) };
    }
}

#[test]
fn do_step_returns_early_at_every_contact_instant_and_resumes() {
    let f = lib();
    let (_dir, path, token) = resources();
    let inst = Inst::new(&f, &path, &token, true);
    let (y1, y2) = (vr_of("y1"), vr_of("y2"));
    let reference = reference_before(1.0);
    assert_eq!(reference.len(), 10);

    // First contact: the lower ball reaches the ground in free fall, y2 = 0.5 − g t²/2 = R.
    let (s, early, lst) = inst.step(0.0, 1.0);
    assert_eq!((s, early), (OK, true), "{}", inst.sink.dump());
    let t_fall = (2.0 * 0.4 / 9.81f64).sqrt();
    assert!((t_fall - reference[0]).abs() < 1e-12);
    assert!(
        (lst - reference[0]).abs() < 2e-6,
        "{lst} vs {}",
        reference[0]
    );
    // Outputs are published at lastSuccessfulTime: the ball touches the plane, the upper ball
    // has fallen for the same time.
    assert!((inst.get(y2) - 0.1).abs() < 1e-9, "y2 = {}", inst.get(y2));
    let y1_exact = 1.0 - 0.5 * 9.81 * lst * lst;
    assert!((inst.get(y1) - y1_exact).abs() < 1e-5);

    // The importer continues from lastSuccessfulTime with the rest of its step; every contact
    // switch before t = 1 ends a doStep, then the step completes.
    let mut t = lst;
    let mut got = vec![lst];
    loop {
        let (s, early, lst) = inst.step(t, 1.0 - t);
        assert_eq!(s, OK, "{}", inst.sink.dump());
        t = lst;
        if !early {
            assert_eq!(lst, 1.0);
            break;
        }
        got.push(lst);
        assert!(got.len() <= 20, "too many early returns: {got:?}");
    }
    assert_eq!(got.len(), reference.len(), "{got:?}");
    // BDF at the model's rtol 1e-6: the instants carry the trajectory's error (the located
    // steps themselves end within 1e-9 m of the contact surface).
    let worst = got
        .iter()
        .zip(&reference)
        .map(|(g, r)| (g - r).abs())
        .fold(0.0, f64::max);
    println!(
        "max |t_early - t_ref| over {} early returns: {worst:.2e} s",
        got.len()
    );
    assert!(worst < 5e-5, "{got:?} vs {reference:?}");
    // A doStep from the wrong time (the original communication point) is refused.
    let (s, _, _) = inst.step(0.5, 0.1);
    assert_ne!(s, OK);
}

#[test]
fn no_early_return_unless_allowed() {
    let f = lib();
    let (_dir, path, token) = resources();
    let inst = Inst::new(&f, &path, &token, false);
    let (s, early, lst) = inst.step(0.0, 1.0);
    assert_eq!((s, early, lst), (OK, false, 1.0), "{}", inst.sink.dump());
}

#[test]
fn capability_flag_follows_the_model() {
    let check = |file: &Path, expect: bool| {
        let spec = mbsfmu::mbs::load_model(file).unwrap();
        let table = VariableTable::from_spec(&spec);
        for (v, flag) in [(FmiVersion::Fmi3, expect), (FmiVersion::Fmi2, false)] {
            let md = ModelDescription::new(&spec, &table, v, "{t}", "d", Capabilities::RUNTIME);
            assert_eq!(md.capabilities.might_return_early_from_do_step, flag);
            // Importer-requested early return (from the callback) is not implemented.
            assert!(!md.capabilities.can_return_early_after_intermediate_update);
        }
    };
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    check(&models.join("bouncing_balls.toml"), true);
    check(&models.join("slider_crank.toml"), false);
    check(&models.join("pendulum_chain.toml"), false);
}
