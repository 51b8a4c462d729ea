//! The FMI 2.0 Co-Simulation C ABI, through the real shared library (libloading).
//!
//! The model is a base-excited oscillator written in the model format (closed-form
//! references). Run: `cargo test --release --test fmi2_abi`.
#![allow(clippy::missing_safety_doc)]

mod fmi_common;

use fmi_common::*;
use fmi_sys::fmi2::*;
use std::ffi::c_void;
use std::ptr::{null, null_mut};

const OK: u32 = fmi2Status_fmi2OK;
const DISCARD: u32 = fmi2Status_fmi2Discard;
const ERROR: u32 = fmi2Status_fmi2Error;

const CS_FUNCTIONS: [&str; 34] = [
    "fmi2GetTypesPlatform",
    "fmi2GetVersion",
    "fmi2SetDebugLogging",
    "fmi2Instantiate",
    "fmi2FreeInstance",
    "fmi2SetupExperiment",
    "fmi2EnterInitializationMode",
    "fmi2ExitInitializationMode",
    "fmi2Terminate",
    "fmi2Reset",
    "fmi2GetReal",
    "fmi2GetInteger",
    "fmi2GetBoolean",
    "fmi2GetString",
    "fmi2SetReal",
    "fmi2SetInteger",
    "fmi2SetBoolean",
    "fmi2SetString",
    "fmi2GetFMUstate",
    "fmi2SetFMUstate",
    "fmi2FreeFMUstate",
    "fmi2SerializedFMUstateSize",
    "fmi2SerializeFMUstate",
    "fmi2DeSerializeFMUstate",
    "fmi2GetDirectionalDerivative",
    "fmi2SetRealInputDerivatives",
    "fmi2GetRealOutputDerivatives",
    "fmi2DoStep",
    "fmi2CancelStep",
    "fmi2GetStatus",
    "fmi2GetRealStatus",
    "fmi2GetIntegerStatus",
    "fmi2GetBooleanStatus",
    "fmi2GetStringStatus",
];

fn lib() -> Fmi2Binding {
    unsafe { Fmi2Binding::new(lib_path()) }.expect("load libmbsfmu.so")
}

/// One instance with its log sink; freed on drop.
struct Inst<'a> {
    f: &'a Fmi2Binding,
    c: fmi2Component,
    sink: Box<LogSink>,
    _cb: Box<fmi2CallbackFunctions>,
}

fn callbacks(sink: &LogSink) -> Box<fmi2CallbackFunctions> {
    Box::new(fmi2CallbackFunctions {
        // SAFETY (test): see `fmi2_logger` on the variadic type.
        logger: Some(unsafe {
            std::mem::transmute::<
                *const (),
                unsafe extern "C" fn(*mut c_void, *const i8, u32, *const i8, *const i8, ...),
            >(fmi2_logger as *const ())
        }),
        allocateMemory: None,
        freeMemory: None,
        stepFinished: None,
        componentEnvironment: sink as *const LogSink as *mut c_void,
    })
}

impl<'a> Inst<'a> {
    fn try_new(f: &'a Fmi2Binding, uri: &str, guid: &str, name: &str) -> Result<Inst<'a>, String> {
        Inst::try_new_logging(f, uri, guid, name, false)
    }
    fn try_new_logging(
        f: &'a Fmi2Binding,
        uri: &str,
        guid: &str,
        name: &str,
        logging_on: bool,
    ) -> Result<Inst<'a>, String> {
        let sink = Box::new(LogSink::default());
        let cb = callbacks(&sink);
        let (n, g, u) = (cstr(name), cstr(guid), cstr(uri));
        let c = unsafe {
            f.fmi2Instantiate(
                n.as_ptr(),
                fmi2Type_fmi2CoSimulation,
                g.as_ptr(),
                u.as_ptr(),
                &*cb,
                0,
                logging_on as i32,
            )
        };
        if c.is_null() {
            return Err(sink.dump());
        }
        Ok(Inst {
            f,
            c,
            sink,
            _cb: cb,
        })
    }
    fn new(f: &'a Fmi2Binding, r: &Resources) -> Inst<'a> {
        Inst::try_new(f, &r.uri(), &r.token, "inst")
            .unwrap_or_else(|log| panic!("instantiate failed:\n{log}"))
    }
    fn get(&self, vr: u32) -> (u32, f64) {
        let mut v = f64::NAN;
        let s = unsafe { self.f.fmi2GetReal(self.c, &vr, 1, &mut v) };
        (s, v)
    }
    fn geti(&self, vr: u32) -> (u32, i32) {
        let mut v = -1;
        let s = unsafe { self.f.fmi2GetInteger(self.c, &vr, 1, &mut v) };
        (s, v)
    }
    fn set(&self, vr: u32, v: f64) -> u32 {
        unsafe { self.f.fmi2SetReal(self.c, &vr, 1, &v) }
    }
    fn seti(&self, vr: u32, v: i32) -> u32 {
        unsafe { self.f.fmi2SetInteger(self.c, &vr, 1, &v) }
    }
    fn step(&self, t: f64, h: f64) -> u32 {
        unsafe { self.f.fmi2DoStep(self.c, t, h, 1) }
    }
    fn init(&self, stop: Option<f64>) {
        unsafe {
            assert_eq!(
                self.f.fmi2SetupExperiment(
                    self.c,
                    0,
                    0.0,
                    0.0,
                    stop.is_some() as i32,
                    stop.unwrap_or(0.0)
                ),
                OK
            );
            assert_eq!(self.f.fmi2EnterInitializationMode(self.c), OK);
            assert_eq!(
                self.f.fmi2ExitInitializationMode(self.c),
                OK,
                "{}",
                self.sink.dump()
            );
        }
    }
    fn get_state(&self) -> fmi2FMUstate {
        let mut s: fmi2FMUstate = null_mut();
        assert_eq!(unsafe { self.f.fmi2GetFMUstate(self.c, &mut s) }, OK);
        s
    }
    fn serialize(&self, s: fmi2FMUstate) -> Vec<u8> {
        let mut n = 0usize;
        assert_eq!(
            unsafe { self.f.fmi2SerializedFMUstateSize(self.c, s, &mut n) },
            OK
        );
        let mut buf = vec![0u8; n];
        assert_eq!(
            unsafe {
                self.f
                    .fmi2SerializeFMUstate(self.c, s, buf.as_mut_ptr() as *mut i8, n)
            },
            OK
        );
        buf
    }
    fn deserialize(&self, bytes: &[u8]) -> (u32, fmi2FMUstate) {
        let mut s: fmi2FMUstate = null_mut();
        let st = unsafe {
            self.f
                .fmi2DeSerializeFMUstate(self.c, bytes.as_ptr() as *const i8, bytes.len(), &mut s)
        };
        (st, s)
    }
    fn free_state(&self, mut s: fmi2FMUstate) {
        assert_eq!(unsafe { self.f.fmi2FreeFMUstate(self.c, &mut s) }, OK);
        assert!(s.is_null());
    }
}

impl Drop for Inst<'_> {
    fn drop(&mut self) {
        unsafe { self.f.fmi2FreeInstance(self.c) };
    }
}

#[test]
fn exports_every_cosimulation_function_and_only_fmi_symbols() {
    let so = unsafe { libloading::Library::new(lib_path()) }.unwrap();
    for name in CS_FUNCTIONS {
        assert!(
            unsafe { so.get::<*const c_void>(name.as_bytes()) }.is_ok(),
            "{name} is not exported"
        );
    }
    let f = lib_path();
    if let Ok(out) = std::process::Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&f)
        .output()
    {
        let text = String::from_utf8_lossy(&out.stdout);
        let names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split_whitespace().nth(2))
            .collect();
        let foreign: Vec<&&str> = names
            .iter()
            .filter(|n| !n.starts_with("fmi2") && !n.starts_with("fmi3"))
            .collect();
        assert!(
            foreign.is_empty(),
            "symbols other than fmi2*/fmi3* exported: {foreign:?}"
        );
        assert!(names.len() >= 34 + 75, "{} symbols", names.len());
    }
    let f = lib();
    unsafe {
        assert_eq!(
            std::ffi::CStr::from_ptr(f.fmi2GetVersion())
                .to_str()
                .unwrap(),
            "2.0"
        );
        assert_eq!(
            std::ffi::CStr::from_ptr(f.fmi2GetTypesPlatform())
                .to_str()
                .unwrap(),
            "default"
        );
    }
}

#[test]
fn null_and_foreign_instance_pointers_are_errors_not_crashes() {
    let f = lib();
    let mut x = 0.0;
    let vr = 0u32;
    let mut junk = [0u64; 8];
    let foreign = junk.as_mut_ptr() as *mut c_void;
    for c in [null_mut(), foreign] {
        unsafe {
            assert_eq!(f.fmi2GetReal(c, &vr, 1, &mut x), ERROR);
            assert_eq!(f.fmi2SetReal(c, &vr, 1, &x), ERROR);
            assert_eq!(f.fmi2DoStep(c, 0.0, 0.1, 1), ERROR);
            assert_eq!(f.fmi2SetupExperiment(c, 0, 0.0, 0.0, 0, 0.0), ERROR);
            assert_eq!(f.fmi2EnterInitializationMode(c), ERROR);
            assert_eq!(f.fmi2Terminate(c), ERROR);
            assert_eq!(f.fmi2Reset(c), ERROR);
            assert_eq!(f.fmi2SetDebugLogging(c, 1, 0, null()), ERROR);
            f.fmi2FreeInstance(c);
        }
    }
}

#[test]
fn instantiation_failures_return_null_with_a_message() {
    let f = lib();
    // NULL callback structure: nothing to report through, NULL.
    let (n, g, u) = (cstr("x"), cstr("{x}"), cstr("file:///nonexistent"));
    assert!(unsafe {
        f.fmi2Instantiate(
            n.as_ptr(),
            fmi2Type_fmi2CoSimulation,
            g.as_ptr(),
            u.as_ptr(),
            null(),
            0,
            0,
        )
    }
    .is_null());
    // Missing resources folder.
    let e = Inst::try_new(&f, "file:///nonexistent/resources", "{x}", "a")
        .err()
        .unwrap();
    assert!(e.contains("has no model.toml"), "{e}");
    // Not a file URI.
    let e = Inst::try_new(&f, "http://example.com/resources", "{x}", "a")
        .err()
        .unwrap();
    assert!(e.contains("not a file: URI"), "{e}");
    // NULL strings.
    let sink = LogSink::default();
    let cb = callbacks(&sink);
    assert!(unsafe {
        f.fmi2Instantiate(
            null(),
            fmi2Type_fmi2CoSimulation,
            g.as_ptr(),
            u.as_ptr(),
            &*cb,
            0,
            0,
        )
    }
    .is_null());
    assert!(unsafe {
        f.fmi2Instantiate(
            n.as_ptr(),
            fmi2Type_fmi2CoSimulation,
            null(),
            u.as_ptr(),
            &*cb,
            0,
            0,
        )
    }
    .is_null());
    assert!(unsafe {
        f.fmi2Instantiate(
            n.as_ptr(),
            fmi2Type_fmi2CoSimulation,
            g.as_ptr(),
            null(),
            &*cb,
            0,
            0,
        )
    }
    .is_null());
    assert!(
        sink.contains(ERROR, "instanceName is NULL"),
        "{}",
        sink.dump()
    );
    assert!(sink.contains(ERROR, "fmuGUID is NULL"), "{}", sink.dump());
    assert!(
        sink.contains(ERROR, "fmuResourceLocation is NULL"),
        "{}",
        sink.dump()
    );
    assert!(!sink.dump().contains("FORMAT NOT %s"));
}

#[test]
fn an_instance_name_that_is_not_utf8_is_refused_as_such() {
    let f = lib();
    let sink = LogSink::default();
    let cb = callbacks(&sink);
    let n = std::ffi::CString::new(&b"wheel\xff1"[..]).unwrap();
    let (g, u) = (cstr("{x}"), cstr("file:///nonexistent"));
    assert!(unsafe {
        f.fmi2Instantiate(
            n.as_ptr(),
            fmi2Type_fmi2CoSimulation,
            g.as_ptr(),
            u.as_ptr(),
            &*cb,
            0,
            0,
        )
    }
    .is_null());
    // Before: "instanceName is NULL or empty".
    assert!(
        sink.contains(
            ERROR,
            "instanceName is not valid UTF-8 (byte 0xff at offset 5 of 7; it begins \"wheel\")"
        ),
        "{}",
        sink.dump()
    );
    assert!(!sink.dump().contains("NULL"), "{}", sink.dump());
    // A GUID that is not UTF-8 is not called NULL either.
    let sink = LogSink::default();
    let cb = callbacks(&sink);
    let (n, g) = (cstr("x"), std::ffi::CString::new(&b"{\xc3}"[..]).unwrap());
    assert!(unsafe {
        f.fmi2Instantiate(
            n.as_ptr(),
            fmi2Type_fmi2CoSimulation,
            g.as_ptr(),
            u.as_ptr(),
            &*cb,
            0,
            0,
        )
    }
    .is_null());
    assert!(
        sink.contains(ERROR, "fmuGUID is not valid UTF-8"),
        "{}",
        sink.dump()
    );
}

mod with_model {
    use super::*;

    #[test]
    fn wrong_guid_and_model_exchange_are_refused() {
        let f = lib();
        let r = Resources::oscillator("");
        let e = Inst::try_new(&f, &r.uri(), "{00000000-0000-0000-0000-000000000000}", "a")
            .err()
            .unwrap();
        assert!(e.contains("does not match the packed model's token"), "{e}");
        // Another model's token (the file differs by one comment).
        let other = Resources::oscillator(" (other)");
        assert_ne!(other.token, r.token);
        assert!(Inst::try_new(&f, &r.uri(), &other.token, "a").is_err());
        // URI forms: without authority, with localhost.
        let path = r.resources.to_str().unwrap().replace(' ', "%20");
        for uri in [
            format!("file:{path}"),
            format!("file://localhost{path}/"),
            r.uri(),
        ] {
            Inst::try_new(&f, &uri, &r.token, "a").unwrap_or_else(|e| panic!("{uri}: {e}"));
        }
        let sink = LogSink::default();
        let cb = callbacks(&sink);
        let (n, g, u) = (cstr("me"), cstr(&r.token), cstr(&r.uri()));
        assert!(unsafe {
            f.fmi2Instantiate(
                n.as_ptr(),
                fmi2Type_fmi2ModelExchange,
                g.as_ptr(),
                u.as_ptr(),
                &*cb,
                0,
                0,
            )
        }
        .is_null());
        assert!(
            sink.contains(ERROR, "Co-Simulation only"),
            "{}",
            sink.dump()
        );
    }

    /// Full life cycle: parameters, a step input, doStep to the end, outputs against the
    /// closed-form step response, statistics, terminate, reset, again.
    #[test]
    fn life_cycle_matches_the_closed_form_step_response() {
        let f = lib();
        let r = Resources::oscillator("");
        let inst = Inst::new(&f, &r);
        let (k, c, u) = (vr("k"), vr("c"), vr("u"));
        for round in 0..2 {
            assert_eq!(inst.set(k, 64.0), OK);
            assert_eq!(inst.set(c, 1.6), OK);
            inst.init(Some(2.0));
            assert_eq!(inst.get(vr("x")), (OK, 0.0));
            assert_eq!(inst.set(u, 0.1), OK);
            let h = 0.01;
            let mut worst: f64 = 0.0;
            for i in 0..200 {
                let t = i as f64 * h;
                assert_eq!(inst.step(t, h), OK, "{}", inst.sink.dump());
                let (s, x) = inst.get(vr("x"));
                assert_eq!(s, OK);
                worst = worst.max((x - step_response(64.0, 1.6, 0.1, t + h)).abs());
                let (_, time) = inst.get(vr("time"));
                assert_eq!(time, t + h);
            }
            assert!(worst < 1e-6, "round {round}: max error {worst}");
            let (s, steps) = inst.geti(vr("stats.steps"));
            assert_eq!(s, OK);
            assert!(steps >= 200, "{steps}");
            let (s, cpu) = inst.get(vr("stats.cpu_time"));
            assert!(s == OK && cpu > 0.0 && cpu < 60.0, "{cpu}");
            // Past the stop time: error.
            assert_eq!(inst.step(2.0, 0.1), ERROR);
            let mut lst = 0.0;
            assert_eq!(
                unsafe {
                    f.fmi2GetRealStatus(inst.c, fmi2StatusKind_fmi2LastSuccessfulTime, &mut lst)
                },
                OK
            );
            assert!((lst - 2.0).abs() < 1e-12);
            assert_eq!(unsafe { f.fmi2Terminate(inst.c) }, OK);
            assert_eq!(inst.get(vr("x")).0, OK);
            assert_eq!(unsafe { f.fmi2Reset(inst.c) }, OK);
            assert_eq!(inst.get(vr("k")).0, ERROR, "Get is illegal in Instantiated");
        }
    }

    #[test]
    fn solver_enumerations_and_tolerance() {
        let f = lib();
        let r = Resources::oscillator("");
        let inst = Inst::new(&f, &r);
        assert_eq!(inst.seti(vr("solver.integrator"), 11), OK); // dopri5
        assert_eq!(inst.seti(vr("solver.integrator"), 0), ERROR);
        assert_eq!(inst.seti(vr("solver.integrator"), 12), ERROR);
        assert_eq!(inst.seti(vr("solver.jacobian"), 3), OK);
        assert_eq!(inst.set(vr("solver.rtol"), 1e-8), OK);
        assert_eq!(inst.set(vr("solver.rtol"), 2.0), ERROR);
        assert_eq!(inst.set(vr("solver.atol"), -1.0), ERROR);
        unsafe {
            assert_eq!(f.fmi2SetupExperiment(inst.c, 1, 1e-5, 0.0, 0, 0.0), OK);
            assert_eq!(f.fmi2EnterInitializationMode(inst.c), OK);
        }
        // The importer's tolerance overrides solver.rtol.
        assert_eq!(inst.get(vr("solver.rtol")), (OK, 1e-5));
        assert_eq!(inst.geti(vr("solver.jacobian")), (OK, 3));
        assert_eq!(unsafe { f.fmi2ExitInitializationMode(inst.c) }, OK);
        // Solver settings are fixed after initialization.
        assert_eq!(inst.seti(vr("solver.jacobian"), 1), ERROR);
        assert_eq!(inst.set(vr("solver.rtol"), 1e-3), ERROR);
        assert!(
            inst.sink.contains(ERROR, "not tunable"),
            "{}",
            inst.sink.dump()
        );
    }

    #[test]
    fn invalid_values_and_references_are_errors() {
        let f = lib();
        let r = Resources::oscillator("");
        let inst = Inst::new(&f, &r);
        inst.init(None);
        let x = vr("x");
        assert_eq!(inst.get(9999).0, ERROR);
        assert!(inst.sink.contains(ERROR, "unknown value reference 9999"));
        assert_eq!(inst.set(9999, 1.0), ERROR);
        assert_eq!(inst.geti(x).0, ERROR, "Real variable through GetInteger");
        assert_eq!(
            inst.get(vr("stats.steps")).0,
            ERROR,
            "Integer variable through GetReal"
        );
        // In FMI 2's type names (until session 28: "is of type Int64, not Float64").
        assert_eq!(inst.set(vr("stats.steps"), 1.0), ERROR);
        assert_eq!(inst.seti(vr("k"), 3), ERROR);
        for said in [
            format!("`x` (value reference {x}) is of type Real, not Integer"),
            format!(
                "`stats.steps` (value reference {}) is of type Integer, not Real",
                vr("stats.steps")
            ),
            format!(
                "`k` (value reference {}) is of type Real, not Integer",
                vr("k")
            ),
        ] {
            assert!(
                inst.sink.contains(ERROR, &said),
                "{said}: {}",
                inst.sink.dump()
            );
        }
        assert!(
            !inst.sink.dump().contains("Float64") && !inst.sink.dump().contains("Int64"),
            "{}",
            inst.sink.dump()
        );
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(inst.set(vr("u"), bad), ERROR);
            assert_eq!(inst.set(vr("k"), bad), ERROR);
        }
        assert!(inst.sink.contains(ERROR, "not finite"));
        assert_eq!(inst.set(x, 1.0), ERROR, "output");
        assert_eq!(inst.set(vr("time"), 1.0), ERROR, "independent");
        assert_eq!(inst.set(vr("stats.cpu_time"), 1.0), ERROR, "local");
        assert_eq!(inst.seti(vr("stats.steps"), 1), ERROR, "local");
        assert_eq!(
            inst.set(vr("m"), 2.0),
            ERROR,
            "fixed parameter in step mode"
        );
        assert_eq!(
            inst.set(vr("k"), 50.0),
            OK,
            "tunable parameter in step mode"
        );
        // No Boolean / String variables.
        let (mut b, mut s) = (0, null());
        unsafe {
            assert_eq!(f.fmi2GetBoolean(inst.c, &x, 1, &mut b), ERROR);
            assert_eq!(f.fmi2GetString(inst.c, &x, 1, &mut s), ERROR);
            assert_eq!(f.fmi2SetBoolean(inst.c, &x, 1, &b), ERROR);
            assert_eq!(f.fmi2GetBoolean(inst.c, null(), 0, null_mut()), OK);
        }
        // NULL arrays with non-zero length; zero lengths with NULL are fine.
        unsafe {
            let mut v = 0.0;
            assert_eq!(f.fmi2GetReal(inst.c, null(), 1, &mut v), ERROR);
            assert_eq!(f.fmi2GetReal(inst.c, &x, 1, null_mut()), ERROR);
            assert_eq!(f.fmi2SetReal(inst.c, null(), 1, &v), ERROR);
            assert_eq!(f.fmi2SetReal(inst.c, &x, 1, null()), ERROR);
            assert_eq!(f.fmi2GetReal(inst.c, null(), 0, null_mut()), OK);
            assert_eq!(f.fmi2SetReal(inst.c, null(), 0, null()), OK);
            assert_eq!(
                f.fmi2GetRealStatus(inst.c, fmi2StatusKind_fmi2LastSuccessfulTime, null_mut()),
                ERROR
            );
            assert_eq!(f.fmi2GetFMUstate(inst.c, null_mut()), ERROR);
            assert_eq!(f.fmi2SetFMUstate(inst.c, null_mut()), ERROR);
            assert_eq!(f.fmi2FreeFMUstate(inst.c, null_mut()), OK);
            assert_eq!(f.fmi2SetDebugLogging(inst.c, 1, 1, null()), ERROR);
            let bad = cstr("%s%s%n");
            assert_eq!(f.fmi2SetDebugLogging(inst.c, 1, 1, &bad.as_ptr()), ERROR);
        }
        assert!(
            inst.sink.contains(ERROR, "unknown log category `%s%s%n`"),
            "{}",
            inst.sink.dump()
        );
        assert!(!inst.sink.dump().contains("FORMAT NOT %s"));
        // Step sizes and communication points.
        for h in [0.0, -0.1, f64::NAN, f64::INFINITY] {
            assert_eq!(inst.step(0.0, h), ERROR, "h = {h}");
        }
        assert_eq!(
            inst.step(0.5, 0.1),
            ERROR,
            "communication point differs from the time"
        );
        assert_eq!(inst.step(f64::NAN, 0.1), ERROR);
        assert_eq!(
            inst.step(0.0, 0.1),
            OK,
            "usable after all that: {}",
            inst.sink.dump()
        );
    }

    /// Every function in the states where the standard forbids it: Error, a message, no
    /// crash, and the state is unchanged (a legal call afterwards works).
    #[test]
    fn functions_in_illegal_states_return_error() {
        let f = lib();
        let r = Resources::oscillator("");
        let inst = Inst::new(&f, &r);
        let x = vr("x");
        let u = vr("u");
        let (v, i, st, b) = (0.0, 0, 0u32, 0);
        let one = 1;
        // Calls that are illegal in a given state, as closures returning the status.
        let get_real = || unsafe { f.fmi2GetReal(inst.c, &x, 1, &mut v.clone()) };
        let der_out =
            || unsafe { f.fmi2GetRealOutputDerivatives(inst.c, &x, 1, &one, &mut v.clone()) };
        let dir = || unsafe {
            f.fmi2GetDirectionalDerivative(inst.c, &x, 1, &u, 1, &1.0, &mut v.clone())
        };
        let status =
            || unsafe { f.fmi2GetStatus(inst.c, fmi2StatusKind_fmi2DoStepStatus, &mut st.clone()) };
        let real_status = || unsafe {
            f.fmi2GetRealStatus(
                inst.c,
                fmi2StatusKind_fmi2LastSuccessfulTime,
                &mut v.clone(),
            )
        };
        let bool_status = || unsafe {
            f.fmi2GetBooleanStatus(inst.c, fmi2StatusKind_fmi2Terminated, &mut b.clone())
        };
        let do_step = || unsafe { f.fmi2DoStep(inst.c, 0.0, 0.1, 1) };
        let terminate = || unsafe { f.fmi2Terminate(inst.c) };
        let setup = || unsafe { f.fmi2SetupExperiment(inst.c, 0, 0.0, 0.0, 0, 0.0) };
        let enter = || unsafe { f.fmi2EnterInitializationMode(inst.c) };
        let exit = || unsafe { f.fmi2ExitInitializationMode(inst.c) };
        let set_u = || unsafe { f.fmi2SetReal(inst.c, &u, 1, &0.0) };
        let set_der = || unsafe { f.fmi2SetRealInputDerivatives(inst.c, &u, 1, &one, &0.0) };
        let cancel = || unsafe { f.fmi2CancelStep(inst.c) };
        let int_status = || unsafe {
            f.fmi2GetIntegerStatus(inst.c, fmi2StatusKind_fmi2DoStepStatus, &mut i.clone())
        };
        let me = || unsafe { f.fmi2EnterEventMode(inst.c) + f.fmi2SetTime(inst.c, 0.0) - ERROR };
        type Call<'a> = (&'a str, &'a dyn Fn() -> u32);
        let instantiated: Vec<Call> = vec![
            ("GetReal", &get_real),
            ("GetRealOutputDerivatives", &der_out),
            ("GetDirectionalDerivative", &dir),
            ("GetStatus", &status),
            ("GetRealStatus", &real_status),
            ("GetBooleanStatus", &bool_status),
            ("DoStep", &do_step),
            ("Terminate", &terminate),
            ("ExitInitializationMode", &exit),
            ("CancelStep", &cancel),
            ("EnterEventMode+SetTime", &me),
        ];
        for (name, call) in &instantiated {
            assert_eq!(call(), ERROR, "{name} in Instantiated");
        }
        assert!(
            inst.sink
                .contains(ERROR, "not allowed in state Instantiated"),
            "{}",
            inst.sink.dump()
        );
        assert_eq!(enter(), OK);
        let init_mode: Vec<Call> = vec![
            ("GetRealOutputDerivatives", &der_out),
            ("GetStatus", &status),
            ("DoStep", &do_step),
            ("Terminate", &terminate),
            ("SetupExperiment", &setup),
            ("EnterInitializationMode", &enter),
            ("CancelStep", &cancel),
        ];
        for (name, call) in &init_mode {
            assert_eq!(call(), ERROR, "{name} in Initialization Mode");
        }
        assert_eq!(get_real(), OK);
        assert_eq!(exit(), OK);
        let step_mode: Vec<Call> = vec![
            ("SetupExperiment", &setup),
            ("EnterInitializationMode", &enter),
            ("ExitInitializationMode", &exit),
            ("CancelStep", &cancel),
            ("EnterEventMode+SetTime", &me),
        ];
        for (name, call) in &step_mode {
            assert_eq!(call(), ERROR, "{name} in Step Mode");
        }
        assert_eq!(do_step(), OK);
        assert_eq!(der_out(), OK);
        assert_eq!(status(), OK);
        // Status kinds the FMU does not provide: Discard (FMI 2.0.2 §2.1.3, "fmi2Discard is
        // returned also if the slave is not able to return the required status information"),
        // with a message; until session 25 Error.
        let s = std::ptr::null_mut::<std::os::raw::c_char>();
        let unavailable: Vec<(&str, u32)> = unsafe {
            vec![
                ("GetIntegerStatus", int_status()),
                (
                    "GetStatus(Pending)",
                    f.fmi2GetStatus(inst.c, fmi2StatusKind_fmi2PendingStatus, &mut st.clone()),
                ),
                (
                    "GetRealStatus(Terminated)",
                    f.fmi2GetRealStatus(inst.c, fmi2StatusKind_fmi2Terminated, &mut v.clone()),
                ),
                (
                    "GetBooleanStatus(DoStepStatus)",
                    f.fmi2GetBooleanStatus(inst.c, fmi2StatusKind_fmi2DoStepStatus, &mut b.clone()),
                ),
                (
                    "GetStringStatus(Pending)",
                    f.fmi2GetStringStatus(
                        inst.c,
                        fmi2StatusKind_fmi2PendingStatus,
                        &mut (s as *const _),
                    ),
                ),
            ]
        };
        for (name, got) in unavailable {
            assert_eq!(got, DISCARD, "{name}: {}", inst.sink.dump());
        }
        assert!(inst.sink.contains(DISCARD, "there is no integer status"));
        assert_eq!(terminate(), OK);
        let terminated: Vec<Call> = vec![
            ("DoStep", &do_step),
            ("Terminate", &terminate),
            ("SetReal", &set_u),
            ("SetRealInputDerivatives", &set_der),
            ("SetupExperiment", &setup),
            ("EnterInitializationMode", &enter),
            ("ExitInitializationMode", &exit),
            ("CancelStep", &cancel),
        ];
        for (name, call) in &terminated {
            assert_eq!(call(), ERROR, "{name} in Terminated");
        }
        assert_eq!(get_real(), OK);
        assert_eq!(real_status(), OK);
        assert_eq!(dir(), OK);
    }

    /// Two instances stepping at the same time on two threads give the same bits as the same
    /// runs one after the other.
    #[test]
    fn two_instances_on_two_threads_equal_sequential_runs() {
        let r = Resources::oscillator("");
        let run = |k: f64| -> Vec<u64> {
            let f = lib();
            let inst = Inst::new(&f, &r);
            assert_eq!(inst.set(vr("k"), k), OK);
            inst.init(None);
            let mut out = Vec::new();
            for i in 0..300 {
                let t = i as f64 * 0.01;
                assert_eq!(inst.set(vr("u"), 0.1 * (3.0 * t).sin()), OK);
                assert_eq!(inst.step(t, 0.01), OK);
                out.push(inst.get(vr("x")).1.to_bits());
                out.push(inst.get(vr("force")).1.to_bits());
            }
            out
        };
        let seq = (run(100.0), run(400.0));
        let par = std::thread::scope(|s| {
            let a = s.spawn(|| run(100.0));
            let b = s.spawn(|| run(400.0));
            (a.join().unwrap(), b.join().unwrap())
        });
        assert_eq!(seq, par);
        assert_ne!(seq.0, seq.1);
    }

    fn outputs_over(inst: &Inst, t0: f64, n: usize) -> Vec<u64> {
        let mut out = Vec::new();
        for i in 0..n {
            let t = t0 + i as f64 * 0.05;
            assert_eq!(inst.set(vr("u"), 0.2 * (2.0 * t).cos()), OK);
            assert_eq!(inst.step(t, 0.05), OK);
            for name in ["x", "v", "a", "force"] {
                out.push(inst.get(vr(name)).1.to_bits());
            }
        }
        out
    }

    #[test]
    fn state_save_restore_and_serialization_reproduce_outputs_bit_for_bit() {
        let f = lib();
        let r = Resources::oscillator("");
        let inst = Inst::new(&f, &r);
        inst.init(None);
        outputs_over(&inst, 0.0, 10);
        let s = inst.get_state();
        let first = outputs_over(&inst, 0.5, 20);
        // Restore in place.
        assert_eq!(unsafe { f.fmi2SetFMUstate(inst.c, s) }, OK);
        assert!((inst.get(vr("time")).1 - 0.5).abs() < 1e-12);
        assert_eq!(outputs_over(&inst, 0.5, 20), first);
        // Serialize, deserialize, restore.
        let bytes = inst.serialize(s);
        let (st, s2) = inst.deserialize(&bytes);
        assert_eq!(st, OK, "{}", inst.sink.dump());
        assert_eq!(inst.serialize(s2), bytes, "serialization is deterministic");
        assert_eq!(unsafe { f.fmi2SetFMUstate(inst.c, s2) }, OK);
        assert_eq!(outputs_over(&inst, 0.5, 20), first);
        // Into a fresh instance of the same model (in Instantiated state).
        let other = Inst::new(&f, &r);
        let (st, s3) = other.deserialize(&bytes);
        assert_eq!(st, OK);
        assert_eq!(unsafe { f.fmi2SetFMUstate(other.c, s3) }, OK);
        assert_eq!(outputs_over(&other, 0.5, 20), first);
        // GetFMUstate into an existing state object overwrites it.
        let mut reuse = s3;
        assert_eq!(unsafe { f.fmi2GetFMUstate(other.c, &mut reuse) }, OK);
        assert_eq!(reuse, s3);
        // Not another instance's state, though: overwriting it would move `inst`'s saved point
        // to `other`'s time (until session 25 it did).
        let mut foreign = s;
        assert_eq!(unsafe { f.fmi2GetFMUstate(other.c, &mut foreign) }, ERROR);
        let p = bytes.as_ptr() as *const i8;
        assert_eq!(
            unsafe { f.fmi2DeSerializeFMUstate(other.c, p, bytes.len(), &mut foreign) },
            ERROR
        );
        assert_eq!(foreign, s);
        assert!(other.sink.contains(ERROR, "belongs to another instance"));
        outputs_over(&inst, 1.5, 3);
        assert_eq!(unsafe { f.fmi2SetFMUstate(inst.c, s) }, OK);
        assert_eq!(outputs_over(&inst, 0.5, 20), first);
        other.free_state(s3);
        inst.free_state(s);
        inst.free_state(s2);
    }

    /// A communication point within the tolerance of the instance time is taken as it, and the
    /// step runs to exactly `t + h`; one that would end before the instance time is refused
    /// saying so (until session 25: "invalid communication step size -5e-10", for h = 5e-10).
    /// Since session 28 the tolerance is rounding, at most 1e-3 of the step, unless the step is
    /// within 64 spacings of doubles itself: 8e-10 off for a step of 5e-10 is a mismatch, and a
    /// step that ends before the instance time needs one near the resolution.
    #[test]
    fn a_step_that_ends_before_the_instance_time_is_refused_saying_so() {
        let f = lib();
        let r = Resources::oscillator("");
        let inst = Inst::new(&f, &r);
        inst.init(None);
        assert_eq!(inst.step(0.0, 1.0), OK);
        assert_eq!(inst.step(1.0 - 8e-10, 5e-10), ERROR);
        assert!(
            inst.sink
                .contains(ERROR, "differs from the instance time 1 by -8.000e-10 s"),
            "{}",
            inst.sink.dump()
        );
        assert_eq!(inst.step(1.0 - 1e-14, 5e-15), ERROR);
        assert!(
            inst.sink.contains(ERROR, "not after the instance time 1 "),
            "{}",
            inst.sink.dump()
        );
        assert_eq!(inst.step(1.0 - 5e-10, 0.1), OK, "{}", inst.sink.dump());
        assert_eq!(inst.get(vr("time")).1, 1.0 - 5e-10 + 0.1);
    }

    #[test]
    fn corrupt_or_foreign_serialized_states_are_errors() {
        let f = lib();
        let r = Resources::oscillator("");
        let inst = Inst::new(&f, &r);
        inst.init(None);
        outputs_over(&inst, 0.0, 3);
        let s = inst.get_state();
        let bytes = inst.serialize(s);
        let mut cases: Vec<(String, Vec<u8>)> = vec![
            ("empty".into(), vec![]),
            ("short".into(), bytes[..40].to_vec()),
            ("truncated".into(), bytes[..bytes.len() - 1].to_vec()),
        ];
        let mut longer = bytes.clone();
        longer.push(0);
        cases.push(("extended".into(), longer));
        for pos in [0, 9, 20, 55, 60, bytes.len() / 2, bytes.len() - 1] {
            let mut b = bytes.clone();
            b[pos] ^= 0x5a;
            cases.push((format!("byte {pos} flipped"), b));
        }
        let mut seed = 12345u64;
        let garbage: Vec<u8> = (0..bytes.len())
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (seed >> 33) as u8
            })
            .collect();
        cases.push(("garbage".into(), garbage));
        for (what, b) in &cases {
            let (st, out) = inst.deserialize(b);
            assert_eq!(st, ERROR, "{what}");
            assert!(out.is_null(), "{what}");
        }
        assert!(
            inst.sink.contains(ERROR, "checksum"),
            "{}",
            inst.sink.dump()
        );
        // A state of another model (different token) is refused.
        let r2 = Resources::oscillator(" (other)");
        let other = Inst::new(&f, &r2);
        let (st, _) = other.deserialize(&bytes);
        assert_eq!(st, ERROR);
        assert!(
            other.sink.contains(ERROR, "different model"),
            "{}",
            other.sink.dump()
        );
        // A state pointer that is not a state, and an instance pointer as state.
        let mut junk = [0u64; 4];
        assert_eq!(
            unsafe { f.fmi2SetFMUstate(inst.c, junk.as_mut_ptr() as *mut c_void) },
            ERROR
        );
        assert_eq!(unsafe { f.fmi2SetFMUstate(inst.c, other.c) }, ERROR);
        // Still usable.
        assert_eq!(unsafe { f.fmi2SetFMUstate(inst.c, s) }, OK);
        inst.free_state(s);
    }

    /// A step the integrator cannot complete returns Discard with the last successful time;
    /// restoring the state saved before the step and stepping again succeeds.
    #[test]
    fn discard_then_successful_retry() {
        let f = lib();
        let r = Resources::oscillator("");
        let inst = Inst::new(&f, &r);
        inst.init(None);
        assert_eq!(inst.set(vr("u"), 0.1), OK);
        for i in 0..10 {
            assert_eq!(inst.step(i as f64 * 0.01, 0.01), OK);
        }
        let saved = inst.get_state();
        // An absurd stiffness makes the forces overflow: the integrator stops.
        assert_eq!(inst.set(vr("k"), 1e300), OK);
        assert_eq!(inst.step(0.1, 0.5), DISCARD, "{}", inst.sink.dump());
        assert!(
            inst.sink.contains(DISCARD, "could not reach"),
            "{}",
            inst.sink.dump()
        );
        let mut lst = f64::NAN;
        assert_eq!(
            unsafe { f.fmi2GetRealStatus(inst.c, fmi2StatusKind_fmi2LastSuccessfulTime, &mut lst) },
            OK
        );
        assert!(lst > 0.1 - 1e-12 && lst < 0.6, "{lst}");
        let mut st = 99;
        assert_eq!(
            unsafe { f.fmi2GetStatus(inst.c, fmi2StatusKind_fmi2DoStepStatus, &mut st) },
            OK
        );
        assert_eq!(st, DISCARD);
        // stepFailed: DoStep is illegal, outputs can be read, the saved state restores.
        assert_eq!(inst.step(lst, 0.01), ERROR);
        assert_eq!(inst.get(vr("x")).0, OK);
        assert_eq!(unsafe { f.fmi2SetFMUstate(inst.c, saved) }, OK);
        assert_eq!(inst.get(vr("k")).1, 100.0);
        for i in 0..5 {
            assert_eq!(
                inst.step(0.1 + i as f64 * 0.1, 0.1),
                OK,
                "{}",
                inst.sink.dump()
            );
        }
        let (_, x) = inst.get(vr("x"));
        assert!(
            (x - step_response(100.0, 2.0, 0.1, 0.6)).abs() < 1e-6,
            "{x}"
        );
        inst.free_state(saved);
    }

    #[test]
    fn input_and_output_derivatives() {
        let f = lib();
        let r = Resources::oscillator("");
        let inst = Inst::new(&f, &r);
        inst.init(None);
        let (x, u, force, a) = (vr("x"), vr("u"), vr("force"), vr("a"));
        // Input given with its derivatives: u = 0.1 + 0.5 t exactly (a ramp).
        let mut prev_x = 0.0;
        for i in 0..50 {
            let t = i as f64 * 0.02;
            assert_eq!(inst.set(u, 0.5 * t), OK);
            let orders = [1, 2];
            let vals = [0.5, 0.0];
            let vrs = [u, u];
            assert_eq!(
                unsafe {
                    f.fmi2SetRealInputDerivatives(
                        inst.c,
                        vrs.as_ptr(),
                        2,
                        orders.as_ptr(),
                        vals.as_ptr(),
                    )
                },
                OK
            );
            assert_eq!(inst.step(t, 0.02), OK);
            prev_x = inst.get(x).1;
        }
        // Ramp response from rest of H(s) = (k + c s)/(s² + c s + k): the integral of the
        // k-only step response plus c/k times it (midpoint rule, 20000 intervals).
        let n = 20000;
        let dt = 1.0 / n as f64;
        let ramp: f64 = (0..n)
            .map(|j| step_response(100.0, 2.0, 0.5, (j as f64 + 0.5) * dt) * dt)
            .sum::<f64>()
            + 2.0 / 100.0 * step_response(100.0, 2.0, 0.5, 1.0);
        assert!((prev_x - ramp).abs() < 1e-5, "{prev_x} vs {ramp}");
        // Output derivatives of x are v and a (along the solution through the current state).
        let (mut d1, mut d2) = (0.0, 0.0);
        assert_eq!(
            unsafe { f.fmi2GetRealOutputDerivatives(inst.c, &x, 1, &1, &mut d1) },
            OK
        );
        assert_eq!(
            unsafe { f.fmi2GetRealOutputDerivatives(inst.c, &x, 1, &2, &mut d2) },
            OK
        );
        let (v, acc) = (inst.get(vr("v")).1, inst.get(a).1);
        assert!((d1 - v).abs() < 1e-7 * v.abs().max(1.0), "{d1} vs {v}");
        assert!(
            (d2 - acc).abs() < 1e-5 * acc.abs().max(1.0),
            "{d2} vs {acc}"
        );
        // The force's rate against a difference quotient over a tiny extra step.
        let mut df = 0.0;
        assert_eq!(
            unsafe { f.fmi2GetRealOutputDerivatives(inst.c, &force, 1, &1, &mut df) },
            OK
        );
        let f0 = inst.get(force).1;
        let t_end = inst.get(vr("time")).1;
        assert_eq!(inst.set(u, 0.5 * t_end), OK);
        let vals = [0.5, 0.0];
        let (orders, vrs) = ([1, 2], [u, u]);
        assert_eq!(
            unsafe {
                f.fmi2SetRealInputDerivatives(
                    inst.c,
                    vrs.as_ptr(),
                    2,
                    orders.as_ptr(),
                    vals.as_ptr(),
                )
            },
            OK
        );
        assert_eq!(inst.step(t_end, 1e-6), OK);
        let fd = (inst.get(force).1 - f0) / 1e-6;
        assert!((df - fd).abs() < 1e-3 * df.abs().max(1.0), "{df} vs {fd}");
        assert_eq!(
            unsafe { f.fmi2GetRealOutputDerivatives(inst.c, &x, 1, &3, &mut d1) },
            ERROR
        );
        assert_eq!(
            unsafe { f.fmi2GetRealOutputDerivatives(inst.c, &u, 1, &1, &mut d1) },
            ERROR
        );
        assert_eq!(
            unsafe { f.fmi2SetRealInputDerivatives(inst.c, &u, 1, &3, &0.0) },
            ERROR
        );
        assert_eq!(
            unsafe { f.fmi2SetRealInputDerivatives(inst.c, &x, 1, &1, &0.0) },
            ERROR
        );
        assert_eq!(
            unsafe { f.fmi2SetRealInputDerivatives(inst.c, &u, 1, &1, &f64::NAN) },
            ERROR
        );
        // Directional derivative: force = k (x − u) + c (v − u̇). With the default (smooth)
        // reconstruction a new sample acts over the coming step: the segment starts with the
        // value and slope where the last one ended (C¹), so setting u at this instant changes
        // neither u nor u̇ at it, and ∂force/∂u = 0, as setting and reading shows (the hold
        // mode's −k is in tests/python/test_rig_inputs.py); x has no direct feedthrough.
        let (mut dforce, mut dx) = (0.0, 1.0);
        assert_eq!(
            unsafe { f.fmi2GetDirectionalDerivative(inst.c, &force, 1, &u, 1, &2.0, &mut dforce) },
            OK
        );
        let u_now = inst.get(u).1;
        assert_eq!(inst.set(u, u_now + 1e-6), OK);
        let fp = inst.get(force).1;
        assert_eq!(inst.set(u, u_now - 1e-6), OK);
        let fm = inst.get(force).1;
        assert_eq!(inst.set(u, u_now), OK);
        let fd = 2.0 * (fp - fm) / 2e-6;
        assert!((dforce - fd).abs() <= 1e-6 * fd.abs(), "{dforce} vs {fd}");
        assert_eq!(dforce, 0.0, "the sample acts over the step, not at it");
        assert_eq!(
            unsafe { f.fmi2GetDirectionalDerivative(inst.c, &x, 1, &u, 1, &1.0, &mut dx) },
            OK
        );
        assert_eq!(dx, 0.0);
        assert_eq!(
            unsafe { f.fmi2GetDirectionalDerivative(inst.c, &force, 1, &x, 1, &1.0, &mut dx) },
            ERROR,
            "known must be an input"
        );
        assert_eq!(
            unsafe { f.fmi2GetDirectionalDerivative(inst.c, &force, 1, &u, 1, null(), &mut dx) },
            ERROR
        );
    }

    #[test]
    fn logging_categories_and_events() {
        let f = lib();
        let r = Resources::oscillator("");
        let inst = Inst::new(&f, &r);
        // loggingOn = 0 at instantiation: no events, but errors are reported.
        inst.init(None);
        assert!(!inst
            .sink
            .messages
            .lock()
            .unwrap()
            .iter()
            .any(|(s, _, _)| *s == OK));
        let cats = [cstr("logEvents")];
        let ptrs: Vec<_> = cats.iter().map(|c| c.as_ptr()).collect();
        assert_eq!(
            unsafe { f.fmi2SetDebugLogging(inst.c, 1, 1, ptrs.as_ptr()) },
            OK
        );
        assert_eq!(unsafe { f.fmi2Reset(inst.c) }, OK);
        inst.init(None);
        assert!(
            inst.sink
                .messages
                .lock()
                .unwrap()
                .iter()
                .any(|(s, c, m)| *s == OK && c == "logEvents" && m.contains("initialized")),
            "{}",
            inst.sink.dump()
        );
        // loggingOn = 1 at instantiation is debug logging on, events included, without a
        // SetDebugLogging (fmpy's `debug_logging=True`; until session 25 no events came).
        let on = Inst::try_new_logging(&f, &r.uri(), &r.token, "on", true).unwrap();
        on.init(None);
        assert!(on.sink.contains(OK, "initialized"), "{}", on.sink.dump());
        // Switch off the error category: errors are no longer reported.
        let cats = [cstr("logStatusError")];
        let ptrs: Vec<_> = cats.iter().map(|c| c.as_ptr()).collect();
        assert_eq!(
            unsafe { f.fmi2SetDebugLogging(inst.c, 0, 1, ptrs.as_ptr()) },
            OK
        );
        inst.sink.clear();
        assert_eq!(inst.get(9999).0, ERROR);
        assert!(
            inst.sink.messages.lock().unwrap().is_empty(),
            "{}",
            inst.sink.dump()
        );
    }

    /// `fmi2SetDebugLogging` is all or none: an unknown category among known ones switches
    /// none of them (until session 28 `logEvents` came on, and `loggingOn` with it, in either
    /// order). `nCategories = 0` with off switches debug logging off and keeps the status
    /// messages (why a call failed); naming `logAll` silences them too; on brings back all.
    #[test]
    fn set_debug_logging_is_all_or_none_and_zero_categories_means_all() {
        let f = lib();
        let r = Resources::oscillator("");
        let events = |inst: &Inst| {
            inst.sink
                .messages
                .lock()
                .unwrap()
                .iter()
                .any(|(s, _, _)| *s == OK)
        };
        for names in [["logEvents", "nosuch"], ["nosuch", "logEvents"]] {
            let inst = Inst::new(&f, &r);
            let cats: Vec<_> = names.iter().map(|n| cstr(n)).collect();
            let ptrs: Vec<_> = cats.iter().map(|c| c.as_ptr()).collect();
            assert_eq!(
                unsafe { f.fmi2SetDebugLogging(inst.c, 1, 2, ptrs.as_ptr()) },
                ERROR
            );
            assert!(
                inst.sink.contains(ERROR, "unknown log category `nosuch`")
                    && inst.sink.contains(ERROR, "no category was switched"),
                "{}",
                inst.sink.dump()
            );
            inst.init(None);
            assert!(!events(&inst), "{names:?}: {}", inst.sink.dump());
        }
        let inst = Inst::new(&f, &r);
        inst.init(None);
        assert_eq!(unsafe { f.fmi2SetDebugLogging(inst.c, 0, 0, null()) }, OK);
        inst.sink.clear();
        assert_eq!(inst.get(9999).0, ERROR);
        assert!(inst.sink.contains(ERROR, "unknown value reference 9999"));
        let all = cstr("logAll");
        assert_eq!(
            unsafe { f.fmi2SetDebugLogging(inst.c, 0, 1, &all.as_ptr()) },
            OK
        );
        inst.sink.clear();
        assert_eq!(inst.get(9999).0, ERROR);
        assert_eq!(inst.step(0.5, 0.1), ERROR);
        assert!(
            inst.sink.messages.lock().unwrap().is_empty(),
            "{}",
            inst.sink.dump()
        );
        assert_eq!(unsafe { f.fmi2SetDebugLogging(inst.c, 1, 0, null()) }, OK);
        assert_eq!(inst.get(9999).0, ERROR);
        assert!(inst.sink.contains(ERROR, "unknown value reference 9999"));
        assert_eq!(unsafe { f.fmi2Reset(inst.c) }, OK);
        inst.init(None);
        assert!(events(&inst), "{}", inst.sink.dump());
    }
}

/// Every model in `models/` through the C ABI: instantiate from a resources folder holding
/// the model and its tables, choose an available implicit method, initialize, take steps of
/// the model's experiment step, read finite outputs.
#[test]
fn every_model_runs_through_the_fmi2_abi() {
    let f = lib();
    let models = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let mut names: Vec<_> = std::fs::read_dir(&models)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    names.sort();
    assert!(!names.is_empty());
    let mut failures = Vec::new();
    for model in &names {
        let spec = mbsfmu::mbs::load_model(model).unwrap();
        let dir = TempDir::new("model");
        let res = dir.0.join("resources");
        std::fs::create_dir_all(&res).unwrap();
        let base = model.parent().unwrap();
        for src in &spec.source_files {
            let rel = src
                .strip_prefix(base)
                .unwrap_or(src.file_name().unwrap().as_ref());
            let dst = if src == model {
                res.join("model.toml")
            } else {
                res.join(rel)
            };
            std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
            std::fs::copy(src, &dst).unwrap();
        }
        let packed = mbsfmu::mbs::load_model(&res.join("model.toml")).unwrap();
        let token = mbsfmu::description::token::model_token_of(
            &res.join("model.toml"),
            &packed.source_files,
        )
        .unwrap();
        let uri = format!("file://{}/", res.display());
        let inst = Inst::try_new(&f, &uri, &token, "m")
            .unwrap_or_else(|e| panic!("{}: {e}", model.display()));
        let table = mbsfmu::description::VariableTable::from_spec(&packed);
        let integ = table.by_name("solver.integrator").unwrap().value_reference;
        assert_eq!(inst.seti(integ, 4), OK, "sdirk"); // 4 = sdirk in Method::ALL order
        let e = packed.experiment;
        unsafe {
            assert_eq!(f.fmi2SetupExperiment(inst.c, 0, 0.0, e.start, 0, 0.0), OK);
            assert_eq!(f.fmi2EnterInitializationMode(inst.c), OK);
        }
        if unsafe { f.fmi2ExitInitializationMode(inst.c) } != OK {
            failures.push(format!(
                "{}: initialization: {}",
                model.display(),
                inst.sink.dump()
            ));
            continue;
        }
        let outputs: Vec<u32> = table
            .variables
            .iter()
            .filter(|v| v.causality == mbsfmu::description::Causality::Output)
            .map(|v| v.value_reference)
            .collect();
        for i in 0..10 {
            let t = e.start + i as f64 * e.step;
            let s = inst.step(t, e.step);
            if s != OK {
                failures.push(format!(
                    "{}: step {i} status {s}: {}",
                    model.display(),
                    inst.sink.dump()
                ));
                break;
            }
        }
        let mut y = vec![f64::NAN; outputs.len()];
        assert_eq!(
            unsafe { f.fmi2GetReal(inst.c, outputs.as_ptr(), outputs.len(), y.as_mut_ptr()) },
            OK
        );
        assert!(
            y.iter().all(|v| v.is_finite()),
            "{}: {y:?}",
            model.display()
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Directional derivatives of every output with respect to every input, for every model in
/// `models/` with inputs, against central differences through the C ABI: set the input to
/// `u ± δ` at the current communication point and read the outputs (what an importer that
/// does not trust the FMU would do). Checked after steps with a moving input (so the
/// reconstructed input has slope and curvature), before and after the importer sets the
/// input at the communication point, with unit seeds and with a combined seed.
#[test]
fn directional_derivatives_match_set_get_differences_for_every_model() {
    let f = lib();
    let models = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let mut names: Vec<_> = std::fs::read_dir(&models)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    names.sort();
    let (mut checked, mut nonzero) = (0, 0);
    for model in &names {
        let spec = mbsfmu::mbs::load_model(model).unwrap();
        if spec.inputs.is_empty() {
            continue;
        }
        let dir = TempDir::new("model");
        let res = dir.0.join("resources");
        std::fs::create_dir_all(&res).unwrap();
        let base = model.parent().unwrap();
        for src in &spec.source_files {
            let rel = src
                .strip_prefix(base)
                .unwrap_or(src.file_name().unwrap().as_ref());
            let dst = if src == model {
                res.join("model.toml")
            } else {
                res.join(rel)
            };
            std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
            std::fs::copy(src, &dst).unwrap();
        }
        let packed = mbsfmu::mbs::load_model(&res.join("model.toml")).unwrap();
        let token = mbsfmu::description::token::model_token_of(
            &res.join("model.toml"),
            &packed.source_files,
        )
        .unwrap();
        let uri = format!("file://{}/", res.display());
        let inst = Inst::try_new(&f, &uri, &token, "m").unwrap();
        let table = mbsfmu::description::VariableTable::from_spec(&packed);
        let of = |c: mbsfmu::description::Causality| -> Vec<u32> {
            table
                .variables
                .iter()
                .filter(|v| v.causality == c)
                .map(|v| v.value_reference)
                .collect()
        };
        let (outputs, inputs) = (
            of(mbsfmu::description::Causality::Output),
            of(mbsfmu::description::Causality::Input),
        );
        let starts: Vec<f64> = packed.inputs.iter().map(|i| i.start).collect();
        // A moving input: start + small sine, different per input.
        let signal = |k: usize, t: f64| starts[k] + 0.01 * (k as f64 + 1.0) * (3.0 * t).sin();
        let e = packed.experiment;
        let h = e.step.max(0.005);
        unsafe {
            assert_eq!(f.fmi2SetupExperiment(inst.c, 0, 0.0, e.start, 0, 0.0), OK);
            assert_eq!(f.fmi2EnterInitializationMode(inst.c), OK);
            assert_eq!(
                f.fmi2ExitInitializationMode(inst.c),
                OK,
                "{}",
                inst.sink.dump()
            );
        }
        let set_inputs = |t: f64| {
            for (k, &vr) in inputs.iter().enumerate() {
                assert_eq!(inst.set(vr, signal(k, t)), OK);
            }
        };
        let read = || -> Vec<f64> {
            let mut y = vec![f64::NAN; outputs.len()];
            assert_eq!(
                unsafe { f.fmi2GetReal(inst.c, outputs.as_ptr(), outputs.len(), y.as_mut_ptr()) },
                OK
            );
            y
        };
        let dir_der = |seed: &[f64]| -> Vec<f64> {
            let mut d = vec![f64::NAN; outputs.len()];
            assert_eq!(
                unsafe {
                    f.fmi2GetDirectionalDerivative(
                        inst.c,
                        outputs.as_ptr(),
                        outputs.len(),
                        inputs.as_ptr(),
                        inputs.len(),
                        seed.as_ptr(),
                        d.as_mut_ptr(),
                    )
                },
                OK,
                "{}",
                inst.sink.dump()
            );
            d
        };
        let mut t = e.start;
        for i in 0..8 {
            set_inputs(t);
            assert_eq!(
                inst.step(t, h),
                OK,
                "{}: {}",
                model.display(),
                inst.sink.dump()
            );
            t += h;
            // After the step (segments of the step), then after setting the inputs at t.
            if i < 6 {
                continue;
            }
            if i == 7 {
                set_inputs(t);
            }
            let u0: Vec<f64> = inputs.iter().map(|&vr| inst.get(vr).1).collect();
            let y0 = read();
            // The FMU's derivatives first: the differences below set the inputs (and set them
            // back), after which "before the importer sets the inputs" would be over.
            let columns: Vec<Vec<f64>> = (0..inputs.len())
                .map(|k| {
                    let mut seed = vec![0.0; inputs.len()];
                    seed[k] = 1.0;
                    dir_der(&seed)
                })
                .collect();
            let seed: Vec<f64> = (0..inputs.len()).map(|k| 1.5 - k as f64).collect();
            let comb = dir_der(&seed);
            let mut jac_fd = vec![vec![0.0; inputs.len()]; outputs.len()];
            for (k, &vr) in inputs.iter().enumerate() {
                let d = 1e-6 * u0[k].abs().max(1.0);
                assert_eq!(inst.set(vr, u0[k] + d), OK);
                let yp = read();
                assert_eq!(inst.set(vr, u0[k] - d), OK);
                let ym = read();
                assert_eq!(inst.set(vr, u0[k]), OK);
                for r in 0..outputs.len() {
                    jac_fd[r][k] = (yp[r] - ym[r]) / (2.0 * d);
                }
                let jk = &columns[k];
                for r in 0..outputs.len() {
                    let (a, b) = (jk[r], jac_fd[r][k]);
                    // Round-off of the difference quotients (~1e-16 |y| / δ), with a margin,
                    // plus relative 1e-6.
                    let tol = 1e-6 * b.abs() + 1e-11 * (1.0 + y0[r].abs()) / d;
                    assert!(
                        (a - b).abs() <= tol,
                        "{}: d {} / d {}: directional {a:e}, set/get differences {b:e} (step {i})",
                        model.display(),
                        table.get(outputs[r]).unwrap().name,
                        table.get(vr).unwrap().name
                    );
                }
            }
            // A combined seed is the matching combination of the columns.
            for r in 0..outputs.len() {
                let want: f64 = (0..inputs.len()).map(|k| jac_fd[r][k] * seed[k]).sum();
                let tol = 1e-6 * want.abs() + 1e-11 * (1.0 + y0[r].abs()) / 1e-6;
                assert!(
                    (comb[r] - want).abs() <= tol,
                    "{}: {comb:?}",
                    model.display()
                );
            }
            // Something really depends on the inputs (not a test of zeros only; the pendulum
            // chain's outputs are tip positions, functions of the state: zero).
            if i == 7 && jac_fd.iter().flatten().any(|v| v.abs() > 1e-3) {
                nonzero += 1;
            }
            if i == 7 {
                eprintln!(
                    "{}: |∂y/∂u| per output {:?}",
                    model.file_name().unwrap().to_string_lossy(),
                    jac_fd
                        .iter()
                        .map(|row| row.iter().fold(0.0f64, |m, v| m.max(v.abs())))
                        .map(|v| format!("{v:.3e}"))
                        .collect::<Vec<_>>()
                );
            }
        }
        checked += 1;
    }
    assert!(checked >= 4, "{checked} models with inputs");
    assert!(nonzero >= 3, "{nonzero} models with a non-zero derivative");
}

/// Accuracy of the three input paths for a sine input against the closed form: FMI 2 input
/// derivatives (exact Taylor polynomial of order 2), the reconstruction from the history of
/// communication-point samples, and zero-order hold (derivatives given as zero).
#[test]
fn input_paths_accuracy_for_a_sine_input() {
    let f = lib();
    let r = Resources::oscillator("");
    let (a, w, h) = (0.1, 5.0, 0.1);
    let run = |mode: u8| -> f64 {
        let inst = Inst::new(&f, &r);
        inst.init(None);
        let u = vr("u");
        let mut worst: f64 = 0.0;
        for i in 0..30 {
            let t = i as f64 * h;
            assert_eq!(inst.set(u, a * (w * t).sin()), OK);
            let d = match mode {
                0 => Some([a * w * (w * t).cos(), -a * w * w * (w * t).sin()]),
                2 => Some([0.0, 0.0]),
                _ => None,
            };
            if let Some(d) = d {
                let (vrs, orders) = ([u, u], [1, 2]);
                assert_eq!(
                    unsafe {
                        f.fmi2SetRealInputDerivatives(
                            inst.c,
                            vrs.as_ptr(),
                            2,
                            orders.as_ptr(),
                            d.as_ptr(),
                        )
                    },
                    OK
                );
            }
            assert_eq!(inst.step(t, h), OK);
            worst = worst.max((inst.get(vr("x")).1 - sine_response(100.0, 2.0, a, w, t + h)).abs());
        }
        worst
    };
    let (taylor, history, zoh) = (run(0), run(1), run(2));
    eprintln!("sine input (amplitude {a}, ω = {w}, H = {h}): max |x error| Taylor(2) {taylor:e}, history {history:e}, zero-order hold {zoh:e}");
    assert!(taylor < 0.1 * history.min(zoh), "{taylor} {history} {zoh}");
    assert!(
        history < zoh,
        "the reconstruction is better than holding: {history} {zoh}"
    );
}

/// Stiction state in the FMU state: a block on a 30° slope above its friction angle
/// (`mu_static` = 0.5 < tan 30°) breaks loose and slides. A state taken while it slips,
/// serialized and restored into a fresh instance (whose own stick state is "stuck at the
/// start"), continues bit for bit, so the stick state travels with the FMU state; the block
/// slides on with g (sin θ − μ_k cos θ).
#[test]
fn stick_state_travels_with_the_serialized_fmu_state() {
    let f = lib();
    let src =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/elements/slope_block.toml");
    let text = std::fs::read_to_string(&src)
        .unwrap()
        .replace("value = 0.5\n", "value = 0.4\n")
        .replace("value = 0.7\n", "value = 0.5\n");
    let (_dir, uri, token, table) = packed_text("stick", &text);
    let vr_of = |n: &str| table.by_name(n).unwrap().value_reference;
    let (travel, speed) = (vr_of("travel"), vr_of("speed"));
    let start = |name: &str| {
        let inst = Inst::try_new(&f, &uri, &token, name).unwrap_or_else(|e| panic!("{e}"));
        unsafe {
            assert_eq!(f.fmi2SetupExperiment(inst.c, 0, 0.0, 0.0, 0, 0.0), OK);
            assert_eq!(f.fmi2EnterInitializationMode(inst.c), OK);
            assert_eq!(f.fmi2ExitInitializationMode(inst.c), OK);
        }
        inst
    };
    let run = |inst: &Inst, t0: f64, n: usize| -> Vec<u64> {
        let mut out = Vec::new();
        for i in 0..n {
            let s = inst.step(t0 + i as f64 * 0.01, 0.01);
            assert_eq!(s, OK, "{}", inst.sink.dump());
            out.push(inst.get(travel).1.to_bits());
            out.push(inst.get(speed).1.to_bits());
        }
        out
    };
    let inst = start("a");
    run(&inst, 0.0, 50);
    let v_half = inst.get(speed).1;
    let s = inst.get_state();
    let bytes = inst.serialize(s);
    let first = run(&inst, 0.5, 100);
    let th = 30f64.to_radians();
    let a = 9.81 * (th.sin() - 0.4 * th.cos());
    let v_end = inst.get(speed).1;
    assert!(
        ((v_end - v_half) - a).abs() < 1e-5,
        "{v_half} → {v_end}, a = {a}"
    );
    let other = start("b");
    let (st, s2) = other.deserialize(&bytes);
    assert_eq!(st, OK, "{}", other.sink.dump());
    assert_eq!(unsafe { f.fmi2SetFMUstate(other.c, s2) }, OK);
    assert_eq!(run(&other, 0.5, 100), first, "restored instance diverged");
    other.free_state(s2);
    inst.free_state(s);
}

/// Contact friction state in the FMU state (format 6): a particle on a 30° incline above its
/// friction angle (`models/elements/incline_particle.toml` with `mu_static` = 0.5 < tan 30°,
/// `mu` = 0.4) breaks loose and slides. A state taken while it slips, serialized and restored
/// into a fresh instance (whose own contact sticks at the start), continues bit for bit, so the
/// contact's stick state travels with the FMU state; it slides on with g (sin θ − μ_k cos θ).
#[test]
fn contact_stick_state_travels_with_the_serialized_fmu_state() {
    let f = lib();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models/elements/incline_particle.toml");
    let text = std::fs::read_to_string(&src)
        .unwrap()
        .replace("value = 0.5\n", "value = 0.4\n")
        .replace("value = 0.7\n", "value = 0.5\n");
    let (_dir, uri, token, table) = packed_text("cstick", &text);
    let vr_of = |n: &str| table.by_name(n).unwrap().value_reference;
    let (vx, vy, stick) = (vr_of("vx"), vr_of("vy"), vr_of("stick"));
    let th = 30f64.to_radians();
    let start = |name: &str| {
        let inst = Inst::try_new(&f, &uri, &token, name).unwrap_or_else(|e| panic!("{e}"));
        unsafe {
            assert_eq!(f.fmi2SetupExperiment(inst.c, 0, 0.0, 0.0, 0, 0.0), OK);
            assert_eq!(f.fmi2EnterInitializationMode(inst.c), OK);
            assert_eq!(f.fmi2ExitInitializationMode(inst.c), OK);
        }
        inst
    };
    let speed = |inst: &Inst| inst.get(vx).1 * th.cos() - inst.get(vy).1 * th.sin();
    let run = |inst: &Inst, t0: f64, n: usize| -> Vec<u64> {
        let mut out = Vec::new();
        for i in 0..n {
            let s = inst.step(t0 + i as f64 * 0.01, 0.01);
            assert_eq!(s, OK, "{}", inst.sink.dump());
            out.push(inst.get(vx).1.to_bits());
            out.push(inst.get(stick).1.to_bits());
        }
        out
    };
    let inst = start("a");
    assert_eq!(inst.get(stick).1, 1.0, "sticks at the start");
    run(&inst, 0.0, 50);
    assert_eq!(inst.get(stick).1, 0.0, "slides at 0.5 s");
    let v_half = speed(&inst);
    let s = inst.get_state();
    let bytes = inst.serialize(s);
    let first = run(&inst, 0.5, 100);
    let a = 9.81 * (th.sin() - 0.4 * th.cos());
    let v_end = speed(&inst);
    assert!(
        ((v_end - v_half) - a).abs() < 1e-5,
        "{v_half} → {v_end}, a = {a}"
    );
    let other = start("b");
    let (st, s2) = other.deserialize(&bytes);
    assert_eq!(st, OK, "{}", other.sink.dump());
    assert_eq!(unsafe { f.fmi2SetFMUstate(other.c, s2) }, OK);
    assert_eq!(run(&other, 0.5, 100), first, "restored instance diverged");
    other.free_state(s2);
    inst.free_state(s);
}

/// `resources/resolved_model.bin`, which `mbsfmu export` packs next to `model.toml` so that
/// an instantiation skips parsing it, is what the FMU reads: a resolved model of the same
/// files but with another mass (written here on purpose) changes the motion. A damaged file is
/// ignored and `model.toml` read instead: the same outputs as without the file, to the bit.
#[test]
fn the_resolved_model_file_is_read_and_a_damaged_one_is_ignored() {
    let f = lib();
    let run = |r: &Resources| -> Vec<f64> {
        let inst = Inst::new(&f, r);
        inst.init(None);
        let mut out = Vec::new();
        for k in 0..50 {
            let t = k as f64 * 0.01;
            assert_eq!(inst.set(vr("u"), 0.01 * (5.0 * t).sin()), OK);
            assert_eq!(inst.step(t, 0.01), OK);
            out.push(inst.get(vr("x")).1);
        }
        out
    };
    let plain = run(&Resources::oscillator("resolved"));
    assert!(
        plain.iter().any(|x| x.abs() > 1e-4),
        "the base moves the mass"
    );

    let packed = Resources::oscillator("resolved");
    packed.write_resolved(None);
    assert_eq!(run(&packed), plain);

    let damaged = Resources::oscillator("resolved");
    let mut bytes = damaged.write_resolved(None);
    let n = bytes.len();
    bytes[n / 2..].iter_mut().for_each(|b| *b = 0xff);
    std::fs::write(
        damaged.resources.join(mbsfmu::mbs::resolved::FILE_NAME),
        &bytes,
    )
    .unwrap();
    assert_eq!(run(&damaged), plain);

    let heavier = Resources::oscillator("resolved");
    let model = heavier.resources.join("model.toml");
    let mut spec = mbsfmu::mbs::load_model(&model).unwrap();
    let m = spec.parameters.iter_mut().find(|p| p.name == "m").unwrap();
    m.value *= 4.0;
    let spec = mbsfmu::mbs::load_model_with_parameters(
        spec.source_text.as_deref().unwrap(),
        &model,
        &spec.parameters.iter().map(|p| p.value).collect::<Vec<_>>(),
    )
    .unwrap();
    heavier.write_resolved(Some(&spec));
    let moved = run(&heavier);
    let diff = moved
        .iter()
        .zip(&plain)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(
        diff > 1e-4,
        "the resolved model is not what the FMU read (max difference {diff})"
    );
}

/// A model text packed as the exporter packs a model file (`resources/model.toml`): the
/// directory (kept while it lives), the resource URI, the instantiation token and the
/// variable table.
fn packed_text(
    tag: &str,
    text: &str,
) -> (TempDir, String, String, mbsfmu::description::VariableTable) {
    let dir = TempDir::new(tag);
    let res = dir.0.join("resources");
    std::fs::create_dir_all(&res).unwrap();
    let model = res.join("model.toml");
    std::fs::write(&model, text).unwrap();
    let packed = mbsfmu::mbs::load_model(&model).unwrap();
    let token = mbsfmu::description::token::model_token_of(&model, &packed.source_files).unwrap();
    let uri = format!("file://{}/", res.display());
    let table = mbsfmu::description::VariableTable::from_spec(&packed);
    (dir, uri, token, table)
}

/// A gallery model packed as the exporter packs it (model file and data files under
/// `resources/`): the directory (kept while it lives), the resource URI, the instantiation
/// token, the variable table and the packed model.
fn gallery_packed(
    name: &str,
) -> (
    TempDir,
    String,
    String,
    mbsfmu::description::VariableTable,
    mbsfmu::mbs::ModelSpec,
) {
    let model = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(format!("{name}.toml"));
    let spec = mbsfmu::mbs::load_model(&model).unwrap();
    let dir = TempDir::new("gallery");
    let res = dir.0.join("resources");
    std::fs::create_dir_all(&res).unwrap();
    let base = model.parent().unwrap();
    for src in &spec.source_files {
        let rel = src
            .strip_prefix(base)
            .unwrap_or(src.file_name().unwrap().as_ref());
        let dst = if *src == model {
            res.join("model.toml")
        } else {
            res.join(rel)
        };
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::copy(src, &dst).unwrap();
    }
    let packed = mbsfmu::mbs::load_model(&res.join("model.toml")).unwrap();
    let token =
        mbsfmu::description::token::model_token_of(&res.join("model.toml"), &packed.source_files)
            .unwrap();
    let uri = format!("file://{}/", res.display());
    let table = mbsfmu::description::VariableTable::from_spec(&packed);
    (dir, uri, token, table, packed)
}

/// A gallery model packed as the exporter does ([`gallery_packed`]), instantiated through the
/// C ABI and initialized with `tolerance`; with its variable table and spec. The directory
/// lives as long as the returned `TempDir`.
fn gallery_instance<'a>(
    f: &'a Fmi2Binding,
    name: &str,
    tolerance: f64,
) -> (
    TempDir,
    Inst<'a>,
    mbsfmu::description::VariableTable,
    mbsfmu::mbs::ModelSpec,
) {
    let (dir, uri, token, table, packed) = gallery_packed(name);
    let inst = Inst::try_new(f, &uri, &token, name).unwrap();
    unsafe {
        assert_eq!(
            f.fmi2SetupExperiment(inst.c, 1, tolerance, packed.experiment.start, 0, 0.0),
            OK
        );
        assert_eq!(f.fmi2EnterInitializationMode(inst.c), OK);
        assert_eq!(
            f.fmi2ExitInitializationMode(inst.c),
            OK,
            "{}",
            inst.sink.dump()
        );
    }
    (dir, inst, table, packed)
}

/// What one instance of quarter_car_tire (road profile `cleat.csv`) does in these tests:
/// `k_tire` set in Initialization Mode, 700 steps of 1 ms over the cleat (reached at
/// t = 0.5 s) with `mu` set in Step Mode after 300 of them; every output at every point.
fn cleat_run(inst: &Inst, table: &mbsfmu::description::VariableTable) -> Vec<f64> {
    let vr = |n: &str| table.by_name(n).unwrap().value_reference;
    let outputs: Vec<u32> = table
        .variables
        .iter()
        .filter(|v| v.causality == mbsfmu::description::Causality::Output)
        .map(|v| v.value_reference)
        .collect();
    let f = inst.f;
    let mut out = Vec::new();
    unsafe {
        assert_eq!(f.fmi2SetupExperiment(inst.c, 0, 0.0, 0.0, 0, 0.0), OK);
        assert_eq!(f.fmi2EnterInitializationMode(inst.c), OK);
        assert_eq!(inst.set(vr("k_tire"), 200000.5), OK, "{}", inst.sink.dump());
        assert_eq!(
            f.fmi2ExitInitializationMode(inst.c),
            OK,
            "{}",
            inst.sink.dump()
        );
    }
    for k in 0..700 {
        if k == 300 {
            assert_eq!(inst.set(vr("mu"), 0.8), OK, "{}", inst.sink.dump());
        }
        assert_eq!(inst.step(k as f64 * 1e-3, 1e-3), OK, "{}", inst.sink.dump());
        out.extend(read_all(inst, &outputs));
    }
    out
}

/// An instance reads its model and table files once, at instantiation, where the token is
/// checked against them: a parameter set before initialization resolves the model again from
/// those contents, never from disk. quarter_car_tire's road profile overwritten on disk after
/// instantiation (the cleat 2.5 times as high) changed nothing without a parameter set, but
/// with one (k_tire) the run read the new file, status OK (peak tire load 22 013 N instead of
/// 10 806 N); with the resources folder gone the parameter set before initialization drew a
/// Warning and ExitInitializationMode an Error ("cannot read the table file"). Now the run
/// is the untouched instance's, to the bit, also after Reset.
#[test]
fn a_table_file_changed_on_disk_after_instantiation_is_not_read_again() {
    let f = lib();
    let (_keep, uri, token, table, _) = gallery_packed("quarter_car_tire");
    let reference = cleat_run(
        &Inst::try_new(&f, &uri, &token, "untouched").unwrap(),
        &table,
    );
    let fz = table.by_name("tire_fz").unwrap().value_reference;
    let n_out = reference.len() / 700;
    let fz_col = table
        .variables
        .iter()
        .filter(|v| v.causality == mbsfmu::description::Causality::Output)
        .position(|v| v.value_reference == fz)
        .unwrap();
    let peak = |run: &[f64]| {
        run.chunks(n_out)
            .map(|y| y[fz_col])
            .fold(f64::NEG_INFINITY, f64::max)
    };
    assert!(
        (9e3..1.3e4).contains(&peak(&reference)),
        "the cleat's peak tire load: {}",
        peak(&reference)
    );

    let (dir, uri, token, _, _) = gallery_packed("quarter_car_tire");
    let inst = Inst::try_new(&f, &uri, &token, "changed").unwrap();
    let cleat = dir.0.join("resources").join("cleat.csv");
    let higher: String = std::fs::read_to_string(&cleat)
        .unwrap()
        .lines()
        .map(|l| match l.split_once(',') {
            Some((x, h)) if l.starts_with(|c: char| c.is_ascii_digit()) => {
                format!("{x},{:?}\n", 2.5 * h.trim().parse::<f64>().unwrap())
            }
            _ => format!("{l}\n"),
        })
        .collect();
    std::fs::write(&cleat, higher).unwrap();
    let changed = cleat_run(&inst, &table);
    assert!(
        changed == reference,
        "the run read the changed table file: peak tire load {} N against {} N",
        peak(&changed),
        peak(&reference)
    );
    unsafe { assert_eq!(f.fmi2Reset(inst.c), OK) };
    assert!(cleat_run(&inst, &table) == reference, "after Reset");
}

/// With the resources folder removed after instantiation, parameters set before
/// initialization and in Step Mode still act (from the files read at instantiation), also
/// on a state that went through serialization (which leaves the table files out): the
/// untouched instance's run, to the bit.
#[test]
fn parameters_act_with_the_resources_folder_removed_after_instantiation() {
    let f = lib();
    let (_keep, uri, token, table, _) = gallery_packed("quarter_car_tire");
    let reference = cleat_run(
        &Inst::try_new(&f, &uri, &token, "untouched").unwrap(),
        &table,
    );

    let (dir, uri, token, _, _) = gallery_packed("quarter_car_tire");
    let inst = Inst::try_new(&f, &uri, &token, "removed").unwrap();
    let fresh = inst.serialize(inst.get_state());
    std::fs::remove_dir_all(dir.0.join("resources")).unwrap();
    assert!(cleat_run(&inst, &table) == reference);

    // A state from bytes, taken before initialization: the parameters set after it is
    // restored resolve the model again with the instance's files.
    unsafe { assert_eq!(f.fmi2Reset(inst.c), OK) };
    let (s, state) = inst.deserialize(&fresh);
    assert_eq!(s, OK, "{}", inst.sink.dump());
    assert_eq!(unsafe { f.fmi2SetFMUstate(inst.c, state) }, OK);
    inst.free_state(state);
    assert!(
        cleat_run(&inst, &table) == reference,
        "from a deserialized state"
    );
}

/// Directional derivatives at every communication point of a sampled sine, including its
/// peaks, against the importer's own central Set/Get differences with the FMU state saved
/// and restored around each perturbation (the definition of docs/fmi-runtime.md), and
/// against `ModelStructure`: an output not declared dependent on the input has derivative 0
/// both ways. Near the peaks the smooth reconstruction's limiters lie within a few 1e-6 of
/// the sample; the FMU differenced its rebuild with a step of 6e-6 and crossed them:
/// quarter_car_rig's d stamp_force / d stamp_z read 2.37e7 instead of 3.83e7 N/m at
/// t = 0.304 (24 of 200 points wrong), and suspension_corner's undeclared
/// d tire_force / d post_z read up to 55 169 N/m against 0 (13 points).
#[test]
fn directional_derivatives_at_the_peaks_of_a_sampled_sine() {
    let f = lib();
    // Per model, how many non-zero derivatives there are at least (the stamp force's on the
    // rig at every point; the corner's outputs depend on the post only through rates, which
    // the smooth mode carries over: all zero after the start).
    for (model, input, min_nonzero) in [
        ("quarter_car_rig", "stamp_z", 200),
        ("suspension_corner", "post_z", 0),
    ] {
        let (_dir, inst, table, spec) = gallery_instance(&f, model, 1e-7);
        let vr = |n: &str| table.by_name(n).unwrap().value_reference;
        let u_vr = vr(input);
        let j = spec.inputs.iter().position(|i| i.name == input).unwrap();
        let outputs: Vec<u32> = spec.outputs.iter().map(|o| vr(&o.name)).collect();
        let declared: Vec<bool> = mbsfmu::description::deps::output_dependencies(&spec)
            .iter()
            .map(|deps| deps.contains(&j))
            .collect();
        let read = || -> Vec<f64> {
            let mut y = vec![f64::NAN; outputs.len()];
            assert_eq!(
                unsafe { f.fmi2GetReal(inst.c, outputs.as_ptr(), outputs.len(), y.as_mut_ptr()) },
                OK
            );
            y
        };
        let (h, mut t) = (2e-3, 0.0f64);
        let (mut bad, mut worst, mut nonzero) = (Vec::new(), 0.0f64, 0);
        for k in 0..200 {
            let u = 0.01 * (5.0 * t).sin();
            assert_eq!(inst.set(u_vr, u), OK);
            let mut dd = vec![f64::NAN; outputs.len()];
            assert_eq!(
                unsafe {
                    f.fmi2GetDirectionalDerivative(
                        inst.c,
                        outputs.as_ptr(),
                        outputs.len(),
                        &u_vr,
                        1,
                        &1.0,
                        dd.as_mut_ptr(),
                    )
                },
                OK
            );
            let y0 = read();
            let state = inst.get_state();
            let eps = 1e-9;
            assert_eq!(inst.set(u_vr, u + eps), OK);
            let yp = read();
            assert_eq!(unsafe { f.fmi2SetFMUstate(inst.c, state) }, OK);
            assert_eq!(inst.set(u_vr, u - eps), OK);
            let ym = read();
            assert_eq!(unsafe { f.fmi2SetFMUstate(inst.c, state) }, OK);
            inst.free_state(state);
            assert_eq!(inst.set(u_vr, u), OK);
            for r in 0..outputs.len() {
                let fd = (yp[r] - ym[r]) / (2.0 * eps);
                // Round-off of the difference quotient (~1e-16 |y| / eps, with a margin),
                // plus relative 1e-5.
                let tol = 1e-5 * fd.abs() + 1e-12 * (1.0 + y0[r].abs()) / eps;
                let name = &spec.outputs[r].name;
                if (dd[r] - fd).abs() > tol {
                    bad.push(format!(
                        "t = {t:.3}: d {name}: FMU {:e}, Set/Get {fd:e}",
                        dd[r]
                    ));
                }
                // Not at the start time: before the first step there is no segment to
                // continue, and every mode takes the sample as the value there (a direct
                // feedthrough `ModelStructure` does not declare; docs/fmi-runtime.md).
                if k > 0 && !declared[r] && (dd[r] != 0.0 || fd.abs() > tol) {
                    bad.push(format!(
                        "t = {t:.3}: d {name} not declared dependent on {input}: FMU {:e}, \
                         Set/Get {fd:e}",
                        dd[r]
                    ));
                }
                if fd.abs() > tol {
                    nonzero += 1;
                    worst = worst.max((dd[r] - fd).abs() / fd.abs());
                }
            }
            assert_eq!(
                inst.step(t, h),
                OK,
                "{model} step {k}: {}",
                inst.sink.dump()
            );
            t += h;
        }
        eprintln!("{model}: worst relative deviation {worst:.2e} over {nonzero} non-zero entries");
        assert!(
            nonzero >= min_nonzero,
            "{model}: {nonzero} non-zero derivatives"
        );
        assert!(
            bad.is_empty(),
            "{model}: {} disagreements:\n{}",
            bad.len(),
            bad[..bad.len().min(12)].join("\n")
        );
    }
}

/// Output derivatives of a conserved energy just before contacts close (bouncing_balls:
/// undamped penalty contacts, energy within 14.7140-14.7150 J): the central difference along
/// the free-flight path reached into penetration on its +δ side and read dE/dt up to 152.6 W
/// and d²E/dt² down to -3.9e5 W/s at the last communication point before each impact. Now
/// one-sided on the current side of the gaps: against the central difference of the
/// samples (at most 0.05 W) everywhere, within 0.2 W.
#[test]
fn energy_output_derivatives_stay_on_the_current_side_of_contacts() {
    let f = lib();
    let (_dir, inst, table, _spec) = gallery_instance(&f, "bouncing_balls", 1e-6);
    let e_vr = table.by_name("energy").unwrap().value_reference;
    let h = 1e-3;
    let (mut energy, mut d1, mut d2) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..1300 {
        energy.push(inst.get(e_vr).1);
        let (mut a, mut b) = (f64::NAN, f64::NAN);
        assert_eq!(
            unsafe { f.fmi2GetRealOutputDerivatives(inst.c, &e_vr, 1, &1, &mut a) },
            OK
        );
        assert_eq!(
            unsafe { f.fmi2GetRealOutputDerivatives(inst.c, &e_vr, 1, &2, &mut b) },
            OK
        );
        d1.push(a);
        d2.push(b);
        assert_eq!(inst.step(k as f64 * h, h), OK, "{}", inst.sink.dump());
    }
    let mut bad = Vec::new();
    for k in 1..energy.len() - 1 {
        let fd = (energy[k + 1] - energy[k - 1]) / (2.0 * h);
        if (d1[k] - fd).abs() > 0.2 || d2[k].abs() > 100.0 {
            bad.push(format!(
                "t = {:.3}: dE/dt {:.4} W, d2E/dt2 {:.4e} W/s; samples' central difference {fd:.4} W",
                k as f64 * h,
                d1[k],
                d2[k]
            ));
        }
    }
    let span = energy
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &e| {
            (a.min(e), b.max(e))
        });
    assert!(span.1 - span.0 < 2e-3, "energy not conserved: {span:?}");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// A calculated parameter read in Initialization Mode follows the parameters set so far, as
/// the outputs do (FMI 2.0 §3.2.3 allows fmi2GetReal there): it read its value for the old
/// parameters until an output had been read (which resolves the model again with them), or
/// until ExitInitializationMode.
#[test]
fn calculated_parameters_follow_the_parameters_in_initialization_mode() {
    let f = lib();
    let (r, table) = Resources::oscillator_calculated();
    let vr = |name: &str| table.by_name(name).unwrap().value_reference;
    let inst = Inst::new(&f, &r);
    assert_eq!(inst.set(vr("k"), 400.0), OK);
    unsafe {
        assert_eq!(f.fmi2SetupExperiment(inst.c, 0, 0.0, 0.0, 0, 0.0), OK);
        assert_eq!(f.fmi2EnterInitializationMode(inst.c), OK);
    }
    // Read before any output: 2·0.1·sqrt(400) = 4.
    let (s, c) = inst.get(vr("c"));
    assert_eq!(s, OK, "{}", inst.sink.dump());
    assert!((c - 4.0).abs() < 1e-12, "c in Initialization Mode: {c}");
    // A parameter set after that read is followed too.
    assert_eq!(inst.set(vr("m"), 4.0), OK);
    assert!((inst.get(vr("c")).1 - 8.0).abs() < 1e-12);
    assert_eq!(inst.get(vr("x")).0, OK);
    assert!((inst.get(vr("c")).1 - 8.0).abs() < 1e-12);
    unsafe { assert_eq!(f.fmi2ExitInitializationMode(inst.c), OK) };
    assert!((inst.get(vr("c")).1 - 8.0).abs() < 1e-12);
    assert_eq!(inst.step(0.0, 0.01), OK);
    assert!((inst.get(vr("c")).1 - 8.0).abs() < 1e-12);
}

/// `fmi2GetDirectionalDerivative` of `outputs` with respect to one input, unit seed.
fn directional_column(inst: &Inst, outputs: &[u32], input: u32) -> (u32, Vec<f64>) {
    let mut d = vec![f64::NAN; outputs.len()];
    let s = unsafe {
        inst.f.fmi2GetDirectionalDerivative(
            inst.c,
            outputs.as_ptr(),
            outputs.len(),
            &input,
            1,
            &1.0,
            d.as_mut_ptr(),
        )
    };
    (s, d)
}

fn read_all(inst: &Inst, outputs: &[u32]) -> Vec<f64> {
    let mut y = vec![f64::NAN; outputs.len()];
    assert_eq!(
        unsafe {
            inst.f
                .fmi2GetReal(inst.c, outputs.as_ptr(), outputs.len(), y.as_mut_ptr())
        },
        OK,
        "{}",
        inst.sink.dump()
    );
    y
}

/// Under `reconstruction = "linear"` the directional derivative is the importer's central
/// Set/Get difference (FMU state saved and restored around each perturbation) also when it is
/// asked after a step, before the importer sets the input at the new communication point
/// (the input still holds the sample of the step's start). It was evaluated on the step's
/// segment, whose rate at the point is the last step's slope, while every Set rebuilds the
/// segment from a sample at the point (rate `(u − u_k)/H`): slider_crank's
/// d crank_torque / d crank_angle read −5.7098 against −61.0003 observed, four_link's
/// d rotor_torque / d rotor_angle −0.0355 against −3.934e6 N·m/rad. Also after setting the
/// input, and the derivative leaves the outputs as they were.
#[test]
fn directional_derivatives_under_linear_reconstruction_before_and_after_setting_the_input() {
    let f = lib();
    for (model, input, output) in [
        ("slider_crank", "crank_angle", "crank_torque"),
        ("four_link", "rotor_angle", "rotor_torque"),
    ] {
        let (r, table, _spec) =
            Resources::gallery(model, |t| with_reconstruction(t, input, "linear"));
        let inst = Inst::new(&f, &r);
        inst.init(None);
        let vr = |n: &str| table.by_name(n).unwrap().value_reference;
        let (u_vr, y_vr) = (vr(input), vr(output));
        let signal = |t: f64| 2.0 * std::f64::consts::PI * t + 0.3 * (3.0 * t).sin();
        let eps = 1e-7;
        let mut bad = Vec::new();
        let mut check = |when: &str, t: f64| {
            let y0 = inst.get(y_vr).1;
            let (s, dd) = directional_column(&inst, &[y_vr], u_vr);
            assert_eq!(s, OK, "{}", inst.sink.dump());
            // The derivative changes nothing the importer reads.
            assert_eq!(inst.get(y_vr).1.to_bits(), y0.to_bits(), "{model} {when}");
            let u0 = inst.get(u_vr).1;
            let state = inst.get_state();
            assert_eq!(inst.set(u_vr, u0 + eps), OK);
            let yp = inst.get(y_vr).1;
            assert_eq!(unsafe { f.fmi2SetFMUstate(inst.c, state) }, OK);
            assert_eq!(inst.set(u_vr, u0 - eps), OK);
            let ym = inst.get(y_vr).1;
            assert_eq!(unsafe { f.fmi2SetFMUstate(inst.c, state) }, OK);
            inst.free_state(state);
            assert_eq!(inst.get(y_vr).1.to_bits(), y0.to_bits(), "{model} {when}");
            let fd = (yp - ym) / (2.0 * eps);
            let tol = 1e-5 * fd.abs() + 1e-12 * (1.0 + y0.abs()) / eps;
            if (dd[0] - fd).abs() > tol {
                bad.push(format!(
                    "t = {t:.2}, {when}: FMU {:.6e}, Set/Get {fd:.6e}",
                    dd[0]
                ));
            }
        };
        let (h, mut t) = (0.01, 0.0);
        for k in 0..30 {
            assert_eq!(inst.set(u_vr, signal(t)), OK);
            if k >= 26 {
                check("after setting the input", t);
            }
            assert_eq!(inst.step(t, h), OK, "{}", inst.sink.dump());
            t += h;
            if k >= 26 {
                check("before setting the input", t);
            }
        }
        assert!(bad.is_empty(), "{model}:\n{}", bad.join("\n"));
    }
}

/// Directional derivatives in Initialization Mode are those of the outputs shown there, which
/// follow the inputs through assembly and, with `initial = "static"`, the static equilibrium:
/// central Set/Get differences with the input set back after each. Before, they were the
/// Step-mode ones at the state held: quarter_car_rig's d(chassis_z, wheel_z)/d stamp_z read
/// 0, 0 (the equilibrium moves with the stamp: 1, 1) and d(tire_force, stamp_force)/d stamp_z
/// 2.0e5 where the forces do not change; pendulum_chain's d tip_y / d susp_y 0 for 1.
#[test]
fn directional_derivatives_in_initialization_mode_follow_the_initial_state() {
    let f = lib();
    for (model, set) in [
        ("quarter_car_rig", None),
        ("quarter_car_rig", Some(("stamp_z", 0.004))),
        ("pendulum_chain", None),
        ("pendulum_chain", Some(("susp_y", 0.2))),
    ] {
        let (r, table, spec) = Resources::gallery(model, |t| t.to_string());
        let inst = Inst::new(&f, &r);
        let vr = |n: &str| table.by_name(n).unwrap().value_reference;
        let outputs: Vec<u32> = spec.outputs.iter().map(|o| vr(&o.name)).collect();
        let inputs: Vec<u32> = spec.inputs.iter().map(|i| vr(&i.name)).collect();
        unsafe {
            assert_eq!(f.fmi2SetupExperiment(inst.c, 0, 0.0, 0.0, 0, 0.0), OK);
            assert_eq!(f.fmi2EnterInitializationMode(inst.c), OK);
        }
        if let Some((name, value)) = set {
            assert_eq!(inst.set(vr(name), value), OK);
        }
        let mut jac = Vec::new();
        let mut worst = 0.0f64;
        for (j, &u_vr) in inputs.iter().enumerate() {
            let y0 = read_all(&inst, &outputs);
            let (s, dd) = directional_column(&inst, &outputs, u_vr);
            assert_eq!(s, OK, "{model}: {}", inst.sink.dump());
            assert_eq!(read_all(&inst, &outputs), y0, "{model}: outputs moved");
            let u0 = inst.get(u_vr).1;
            // Not the FMU's own step (1e-6): an independent difference.
            let eps = 3e-6 * u0.abs().max(1.0);
            assert_eq!(inst.set(u_vr, u0 + eps), OK);
            let yp = read_all(&inst, &outputs);
            assert_eq!(inst.set(u_vr, u0 - eps), OK);
            let ym = read_all(&inst, &outputs);
            assert_eq!(inst.set(u_vr, u0), OK);
            for r in 0..outputs.len() {
                let fd = (yp[r] - ym[r]) / (2.0 * eps);
                let tol = 1e-5 * fd.abs() + 1e-11 * (1.0 + y0[r].abs()) / eps;
                worst = worst.max((dd[r] - fd).abs() / (fd.abs() + 1e-6 * (1.0 + y0[r].abs())));
                assert!(
                    (dd[r] - fd).abs() <= tol,
                    "{model} {set:?}: d {} / d {}: FMU {:e}, Set/Get {fd:e}",
                    spec.outputs[r].name,
                    spec.inputs[j].name,
                    dd[r]
                );
            }
            jac.push(dd);
        }
        eprintln!("{model} {set:?}: worst deviation {worst:.2e}; columns {jac:?}");
        // What the differences show (the start of both models moves as a whole with the input).
        let col = |i: &str| &jac[spec.inputs.iter().position(|x| x.name == i).unwrap()];
        let out = |o: &str| spec.outputs.iter().position(|x| x.name == o).unwrap();
        if model == "quarter_car_rig" {
            let c = col("stamp_z");
            assert!((c[out("chassis_z")] - 1.0).abs() < 1e-6, "{c:?}");
            assert!((c[out("wheel_z")] - 1.0).abs() < 1e-6, "{c:?}");
            assert!(c[out("tire_force")].abs() < 1e-2, "{c:?}");
            assert!(c[out("stamp_force")].abs() < 1e-2, "{c:?}");
        } else {
            assert!((col("susp_y")[out("tip_y")] - 1.0).abs() < 1e-6, "{jac:?}");
        }
        // Initialization goes on as usual, and Step mode has its own derivatives again.
        unsafe { assert_eq!(f.fmi2ExitInitializationMode(inst.c), OK) };
        assert_eq!(directional_column(&inst, &outputs, inputs[0]).0, OK);
        assert_eq!(inst.step(0.0, spec.experiment.step), OK);
    }
}

/// A ball hanging on a spring from a frame the input raises, above a floor it touches (linear
/// penalty contact), started in static equilibrium: the equilibrium height is a kinked
/// function of the input, slope 1 clear of the floor and k / (k + k_contact) on it. In
/// Initialization Mode the derivative follows it on either side; within a few 1e-8 of the
/// kink (not exactly at it) no difference step the FMU takes is clear of it, and the
/// derivative is refused with Error and a message saying why, rather than a number that is
/// neither side's; the instance goes on.
#[test]
fn directional_derivatives_in_initialization_mode_refuse_a_kink_of_the_initial_state() {
    const BALL: &str = r#"
[model]
name = "hanging_ball"
gravity = [0.0, 0.0, -9.81]
initial = "static"
[[inputs]]
name = "h"
start = 1.0
[[frames]]
name = "hook"
position = [0.0, 0.0, { input = "h" }]
[[bodies]]
name = "ball"
type = "particle"
mass = 1.0
position = [0.0, 0.0, 0.5]
[[forces]]
name = "spring"
type = "spring_damper"
body1 = "hook"
body2 = "ball"
point1 = [0.0, 0.0, 1.0]
point2 = [0.0, 0.0, 0.5]
stiffness = 1000.0
free_length = 0.5
[[forces]]
name = "floor"
type = "contact"
geometry = "sphere_plane"
sphere = "ball"
radius = 0.1
normal = [0.0, 0.0, 1.0]
stiffness = 10000.0
[[outputs]]
name = "z"
type = "position"
body = "ball"
component = "z"
"#;
    let f = lib();
    let r = Resources::from_text(BALL);
    let spec = mbsfmu::mbs::load_model_str(BALL, std::path::Path::new("m.toml")).unwrap();
    let table = mbsfmu::description::VariableTable::from_spec(&spec);
    let (h_vr, z_vr) = (
        table.by_name("h").unwrap().value_reference,
        table.by_name("z").unwrap().value_reference,
    );
    let inst = Inst::new(&f, &r);
    unsafe {
        assert_eq!(f.fmi2SetupExperiment(inst.c, 0, 0.0, 0.0, 0, 0.0), OK);
        assert_eq!(f.fmi2EnterInitializationMode(inst.c), OK);
    }
    // Clear of the floor: z = h − 0.5 − m g / k.
    let z = inst.get(z_vr).1;
    assert!((z - (1.0 - 0.5 - 9.81e-3)).abs() < 1e-9, "{z}");
    let (s, d) = directional_column(&inst, &[z_vr], h_vr);
    assert_eq!(s, OK, "{}", inst.sink.dump());
    assert!((d[0] - 1.0).abs() < 1e-6, "{d:?}");
    // On the floor (the spring still in tension: compressed, it would buckle sideways).
    assert_eq!(inst.set(h_vr, 0.605), OK);
    let (s, d) = directional_column(&inst, &[z_vr], h_vr);
    assert_eq!(s, OK, "{}", inst.sink.dump());
    assert!((d[0] - 1000.0 / 11000.0).abs() < 1e-6, "{d:?}");
    // Where the ball just touches (z = radius): h* = 0.1 + 0.5 + m g / k.
    let kink = 0.6 + 9.81e-3;
    assert_eq!(inst.set(h_vr, kink + 1.5e-8), OK);
    let (s, _) = directional_column(&inst, &[z_vr], h_vr);
    assert_eq!(s, ERROR, "a derivative across the kink");
    assert!(
        inst.sink.contains(ERROR, "does not depend smoothly on it"),
        "{}",
        inst.sink.dump()
    );
    // Only the derivative was refused.
    assert_eq!(inst.get(z_vr).0, OK);
    assert_eq!(inst.set(h_vr, 1.0), OK);
    assert_eq!(directional_column(&inst, &[z_vr], h_vr).0, OK);
    unsafe { assert_eq!(f.fmi2ExitInitializationMode(inst.c), OK) };
}

/// A state saved right after an input jump is set back by its own instance and continues
/// bit for bit. pendulum_chain in absolute coordinates with BDF, the suspension held in steps
/// (`hold`): each new sample is a jump, the BDF restarts and makes its diagonal mass pattern,
/// which the instance's freshly built reference has not; the structural check of the state
/// compared the pattern's indices with that empty length and refused the instance's own state
/// ("index 47 in :Bdf.ggl.mass.diag_at[] is out of range"), in SetFMUstate and DeSerialize.
#[test]
fn a_state_saved_after_an_input_jump_is_restored() {
    let f = lib();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/pendulum_chain.toml");
    let text = std::fs::read_to_string(&src)
        .unwrap()
        .replacen("[model]\n", "[model]\nformulation = \"absolute\"\n", 1)
        .replace(
            "name = \"susp_x\"\n",
            "name = \"susp_x\"\nreconstruction = \"hold\"\n",
        );
    assert!(text.contains("reconstruction = \"hold\""));
    let (_dir, uri, token, table) = packed_text("jumpstate", &text);
    let vr_of = |n: &str| table.by_name(n).unwrap().value_reference;
    let (susp_x, tip_x) = (vr_of("susp_x"), vr_of("tip_x"));
    let inst = Inst::try_new(&f, &uri, &token, "a").unwrap_or_else(|e| panic!("{e}"));
    inst.init(None);
    let run = |inst: &Inst, t0: f64, n: usize| -> Vec<u64> {
        (0..n)
            .map(|i| {
                let t = t0 + i as f64 * 0.01;
                assert_eq!(inst.set(susp_x, 2.0 + 0.01 * (i / 3) as f64), OK);
                assert_eq!(inst.step(t, 0.01), OK, "{}", inst.sink.dump());
                inst.get(tip_x).1.to_bits()
            })
            .collect()
    };
    run(&inst, 0.0, 10);
    // Set a new sample (a jump), read an output, save.
    assert_eq!(inst.set(susp_x, 2.05), OK);
    assert_eq!(inst.get(tip_x).0, OK);
    let s = inst.get_state();
    let bytes = inst.serialize(s);
    let first = run(&inst, 0.1, 10);
    assert_eq!(
        unsafe { f.fmi2SetFMUstate(inst.c, s) },
        OK,
        "{}",
        inst.sink.dump()
    );
    assert_eq!(run(&inst, 0.1, 10), first, "restored instance diverged");
    let other = Inst::try_new(&f, &uri, &token, "b").unwrap_or_else(|e| panic!("{e}"));
    other.init(None);
    let (st, s2) = other.deserialize(&bytes);
    assert_eq!(st, OK, "{}", other.sink.dump());
    assert_eq!(unsafe { f.fmi2SetFMUstate(other.c, s2) }, OK);
    assert_eq!(
        run(&other, 0.1, 10),
        first,
        "deserialized instance diverged"
    );
    other.free_state(s2);
    inst.free_state(s);
}
