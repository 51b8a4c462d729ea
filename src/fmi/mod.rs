//! The FMI 2.0 and FMI 3.0 C ABI. The only unsafe code of the crate.
//!
//! Every exported function is one line into [`boundary`] (or a sibling helper), which
//! - turns the instance pointer into a reference (NULL, foreign pointers and instances of the
//!   other FMI version are refused by a magic number),
//! - refuses calls while another call on the same instance runs (re-entrant or concurrent use;
//!   the only re-entrant call the standards allow, `fmi3SetFloat64` from inside the
//!   intermediate-update callback, is handled before the boundary and only records values),
//! - checks that the call is legal in the instance's current state (a bit mask per function,
//!   as in the Modelica Reference FMUs),
//! - runs the body under `catch_unwind`: a panic is logged, poisons the instance (every later
//!   call returns Error) and returns Error,
//! - maps the result to the status code.
//!
//! There is no global mutable state: everything lives in the [`Instance`] the importer holds.

mod fmi2;
mod fmi3;
pub(crate) mod resources;
pub(crate) mod state_bytes;

use crate::cosim::{CosimError, SimState, Simulation};
use crate::description::VariableTable;
use crate::mbs::ModelSpec;
use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, TryLockError};

/// The engine the FMU runs.
pub(crate) type ActiveEngine = crate::mbs::system::System;

/// Log categories (name, description), for `modelDescription.xml` and `SetDebugLogging`.
pub use crate::description::xml::LOG_CATEGORIES;

const CAT_EVENTS: u32 = 1;
const CAT_WARNING: u32 = 2;
const CAT_DISCARD: u32 = 4;
const CAT_ERROR: u32 = 8;
const CAT_FATAL: u32 = 16;
const CAT_ALL: u32 = 31;

const INSTANCE_MAGIC: u64 = 0x6d62_7366_6d75_494e; // "mbsfmuIN"
const DEAD_MAGIC: u64 = 0x6465_6164_6465_6164;

/// Status codes: the same numbers in FMI 2 and FMI 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub(crate) enum Status {
    Ok = 0,
    Warning = 1,
    Discard = 2,
    Error = 3,
    Fatal = 4,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FmiVersion {
    V2,
    V3,
}

/// Instance states as bits, so that a function's legal states are a mask.
pub(crate) mod st {
    pub const INSTANTIATED: u32 = 1;
    pub const INIT_MODE: u32 = 2;
    /// FMI 2 stepComplete / FMI 3 Step Mode.
    pub const STEP: u32 = 4;
    /// FMI 2 stepFailed (after Discard).
    pub const STEP_FAILED: u32 = 8;
    pub const TERMINATED: u32 = 16;
    /// After a failed computation: only inspection, state restore, reset and free.
    pub const ERROR: u32 = 32;
    /// FMI 3 Event Mode (only when the importer asks for it; there are no events).
    pub const EVENT: u32 = 64;
    pub const ANY: u32 = INSTANTIATED | INIT_MODE | STEP | STEP_FAILED | TERMINATED | ERROR | EVENT;

    pub fn name(s: u32) -> &'static str {
        match s {
            INSTANTIATED => "Instantiated",
            INIT_MODE => "Initialization Mode",
            STEP => "Step Mode",
            STEP_FAILED => "Step Failed",
            TERMINATED => "Terminated",
            ERROR => "Error",
            EVENT => "Event Mode",
            _ => "?",
        }
    }
}

/// A raw pointer the importer gave us and promises to keep valid; only passed back to it.
#[derive(Clone, Copy)]
pub(crate) struct Env(pub *mut c_void);
// SAFETY: the pointer is never dereferenced by us, only handed back to the importer's callbacks.
unsafe impl Send for Env {}
unsafe impl Sync for Env {}

#[derive(Clone, Copy)]
pub(crate) enum Logger {
    V2(fmi_sys::fmi2::fmi2CallbackLogger, Env),
    V3(fmi_sys::fmi3::fmi3LogMessageCallback, Env),
}

/// FMI 3 intermediate update: the importer's callback and the inputs it provides that way.
pub(crate) struct Intermediate {
    pub callback:
        unsafe extern "C" fn(*mut c_void, f64, bool, bool, bool, bool, *mut bool, *mut f64),
    pub env: Env,
    /// `(value reference, input index)` of the inputs the importer provides in the callback.
    pub inputs: Vec<(u32, usize)>,
}

/// Values the importer sets from inside the intermediate-update callback (the instance core
/// is busy with the step then).
#[derive(Default)]
pub(crate) struct Inbox {
    pub active: bool,
    pub values: Vec<(usize, f64)>,
}

/// What the mutex protects: the state machine and the simulation.
pub(crate) struct Core {
    pub state: u32,
    pub sim: Simulation<ActiveEngine>,
    pub pristine: ActiveEngine,
    pub spec: Arc<ModelSpec>,
    pub table: Arc<VariableTable>,
    pub last_successful_time: f64,
    pub last_step_status: Status,
    pub event_mode_used: bool,
    /// Addresses of the FMU states this instance handed out and the importer has not freed:
    /// FreeInstance releases them.
    pub states: Vec<usize>,
}

impl Core {
    pub fn reset(&mut self) {
        // Early return is the importer's choice at instantiation: it survives a reset.
        let early_return = self.sim.early_return();
        self.sim = Simulation::new(self.spec.clone(), self.table.clone(), self.pristine.clone());
        self.sim.set_early_return(early_return);
        self.state = st::INSTANTIATED;
        self.last_successful_time = self.sim.time();
        self.last_step_status = Status::Ok;
    }
}

/// One FMU instance, as handed to the importer.
#[repr(C)]
pub(crate) struct Instance {
    magic: u64,
    pub version: FmiVersion,
    pub name: CString,
    pub token: String,
    logger: Logger,
    logging_on: AtomicBool,
    categories: AtomicU32,
    poisoned: AtomicBool,
    pub intermediate: Option<Intermediate>,
    pub inbox: Mutex<Inbox>,
    pub core: Mutex<Core>,
}

// Instances are used from the importer's threads: everything in them must be Send + Sync.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Instance>();
    send_sync::<StateBox>();
};

/// What the loaded model gives an instance.
#[derive(Clone)]
pub(crate) struct LoadedModel {
    pub spec: Arc<ModelSpec>,
    pub table: Arc<VariableTable>,
    pub engine: ActiveEngine,
    pub token: String,
}

/// Load `model.toml` (and what it references) from the resources folder and compute its
/// token as the packager did (`description::token::model_token_of`: the model file and its
/// referenced files, in loader order). The model itself comes from the packager's
/// `resolved_model.bin` when that file belongs to these files and this build
/// ([`read_resolved`]), else from parsing `model.toml`.
///
/// Models loaded before in this process are kept by resource folder ([`MODEL_CACHE`]): an
/// importer that instantiates the same FMU again (parameter sweeps, restarts, one instance per
/// test case) gets a copy of the built engine instead of parsing the TOML and building the
/// model again, most of `fmi2Instantiate`'s time. An entry is used only while the token of its
/// files, recomputed from their bytes at every call, is unchanged. `MBSFMU_MODEL_CACHE=0` in
/// the environment turns the cache off (every instantiation loads afresh; for measuring).
pub(crate) fn load_model(resource_dir: &Path) -> Result<LoadedModel, String> {
    let use_cache = UNLOAD_HOOK && std::env::var_os("MBSFMU_MODEL_CACHE").is_none_or(|v| v != "0");
    let model_file = resource_dir.join("model.toml");
    // The cached path checks for the file first; the cold path learns of a missing one from
    // its read's error (one system call less: they count in a cold instantiation).
    let no_model = || {
        format!(
            "the resources folder {} has no model.toml",
            resource_dir.display()
        )
    };
    let token_of = |spec: &ModelSpec| {
        crate::description::token::model_token_of(&model_file, &spec.source_files)
            .map_err(|(p, e)| format!("cannot read {}: {e}", p.display()))
    };
    if let (true, Ok(cache)) = (use_cache, MODEL_CACHE.lock()) {
        if !model_file.is_file() {
            return Err(no_model());
        }
        if let Some((_, m)) = cache.iter().find(|(dir, _)| dir == resource_dir) {
            if token_of(&m.spec).ok().as_ref() == Some(&m.token) {
                return Ok(m.clone());
            }
        }
    }
    // Read once: the model and its token come from the same bytes.
    let text = std::fs::read_to_string(&model_file).map_err(|e| {
        if !model_file.is_file() {
            return no_model();
        }
        crate::mbs::ModelError::Io {
            file: model_file.clone(),
            reason: e.to_string(),
        }
        .to_string()
    })?;
    // Every file is read once, here: the token is computed from the bytes the model keeps
    // (`ModelSpec::source_contents`), and parameters set later resolve the model again from
    // them, never from disk (docs/fmi-runtime.md, *Variables*).
    let (spec, token) = match read_resolved(resource_dir, &text) {
        Some(st) => st,
        None => {
            let spec = crate::mbs::load_model_str(&text, &model_file).map_err(|e| e.to_string())?;
            let token = crate::description::token::model_token_of_spec(text.as_bytes(), &spec)
                .map_err(|p| format!("cannot read {}", p.display()))?;
            (spec, token)
        }
    };
    let spec = Arc::new(spec);
    let table = Arc::new(VariableTable::from_spec(&spec));
    let engine = crate::mbs::system::System::new(spec.clone()).map_err(|e| e.to_string())?;
    let model = LoadedModel {
        spec,
        table,
        engine,
        token,
    };
    if let (true, Ok(mut cache)) = (use_cache, MODEL_CACHE.lock()) {
        cache.retain(|(dir, _)| dir != resource_dir);
        if cache.len() >= MODEL_CACHE_SIZE {
            cache.remove(0);
        }
        cache.push((resource_dir.to_path_buf(), model.clone()));
    }
    Ok(model)
}

/// The model from `resources/resolved_model.bin` with its token, when that file was written
/// by this build for exactly the files in `resources/` (src/mbs/resolved.rs); `None` sends
/// the caller to `model.toml`. `text` is `model.toml` as read; the files it references are read
/// here, once, into the model, and the token computed from those bytes.
fn read_resolved(resource_dir: &Path, text: &str) -> Option<(ModelSpec, String)> {
    let model_file = resource_dir.join("model.toml");
    let bytes = std::fs::read(resource_dir.join(crate::mbs::resolved::FILE_NAME)).ok()?;
    let (mut spec, token) = crate::mbs::resolved::decode(&bytes, &model_file)?;
    spec.read_source_contents().ok()?;
    let now = crate::description::token::model_token_of_spec(text.as_bytes(), &spec).ok()?;
    (now == token).then_some((spec, token))
}

/// Resource folders and their loaded models, oldest first (see [`load_model`]).
static MODEL_CACHE: Mutex<Vec<(PathBuf, LoadedModel)>> = Mutex::new(Vec::new());
const MODEL_CACHE_SIZE: usize = 8;

/// Empties [`MODEL_CACHE`] when the library is unloaded (`dlclose`) or the process ends. A
/// static's heap memory outlives the unloaded code that owns it: an importer that loads and
/// unloads the FMU per run (and valgrind's leak check, tools/leak-check.sh) would lose the
/// cached models at every unload.
extern "C" fn clear_model_cache_on_unload() {
    // try_lock: never block in a destructor (a thread still inside `load_model` during an
    // unload is already the importer's error; the memory is then left as it is).
    if let Ok(mut cache) = MODEL_CACHE.try_lock() {
        *cache = Vec::new();
    }
}

/// The destructor's registration, run by the dynamic loader at unload and at exit. On targets
/// without it the cache stays off ([`UNLOAD_HOOK`]).
#[used]
#[cfg_attr(target_os = "linux", link_section = ".fini_array")]
#[cfg_attr(target_os = "macos", link_section = "__DATA,__mod_term_func")]
static CLEAR_MODEL_CACHE_ON_UNLOAD: extern "C" fn() = clear_model_cache_on_unload;
const UNLOAD_HOOK: bool = cfg!(any(target_os = "linux", target_os = "macos"));

impl Instance {
    pub fn new(
        version: FmiVersion,
        name: CString,
        logger: Logger,
        logging_on: bool,
        model: LoadedModel,
        intermediate: Option<Intermediate>,
    ) -> Box<Instance> {
        let sim = Simulation::new(
            model.spec.clone(),
            model.table.clone(),
            model.engine.clone(),
        );
        let t = sim.time();
        Box::new(Instance {
            magic: INSTANCE_MAGIC,
            version,
            name,
            token: model.token,
            logger,
            logging_on: AtomicBool::new(logging_on),
            // Every category on: `loggingOn = true` at instantiation is debug logging on
            // (FMI 2.0.2 §2.1.5), events included, as fmpy's `debug_logging=True` expects
            // without a `SetDebugLogging`; with `loggingOn = false` `log_cat` holds events back.
            categories: AtomicU32::new(CAT_ALL),
            poisoned: AtomicBool::new(false),
            intermediate,
            inbox: Mutex::new(Inbox::default()),
            core: Mutex::new(Core {
                state: st::INSTANTIATED,
                sim,
                pristine: model.engine,
                spec: model.spec,
                table: model.table,
                last_successful_time: t,
                last_step_status: Status::Ok,
                event_mode_used: false,
                states: Vec::new(),
            }),
        })
    }

    /// The instance behind an importer's pointer, if it is one of ours of this FMI version.
    ///
    /// # Safety
    /// `p` must be NULL or point to readable memory of at least 16 bytes (any pointer the
    /// importer got from us, even of the other version or a state, qualifies).
    pub unsafe fn from_ptr<'a>(p: *mut c_void, version: FmiVersion) -> Option<&'a Instance> {
        if p.is_null() || !(p as usize).is_multiple_of(std::mem::align_of::<Instance>()) {
            return None;
        }
        // SAFETY: per the caller's contract the first word is readable; `magic` is the first
        // field of the repr(C) struct.
        let magic = unsafe { std::ptr::read(p as *const u64) };
        if magic != INSTANCE_MAGIC {
            return None;
        }
        // SAFETY: the magic says it is a live Instance we allocated.
        let inst = unsafe { &*(p as *const Instance) };
        (inst.version == version).then_some(inst)
    }

    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::SeqCst)
    }

    pub fn poison(&self) {
        self.poisoned.store(true, Ordering::SeqCst);
    }

    /// Log through the importer's callback if the category is on.
    pub fn log(&self, status: Status, msg: &str) {
        let cat = match status {
            Status::Ok => CAT_EVENTS,
            Status::Warning => CAT_WARNING,
            Status::Discard => CAT_DISCARD,
            Status::Error => CAT_ERROR,
            Status::Fatal => CAT_FATAL,
        };
        self.log_cat(status, cat, msg);
    }

    pub fn log_event(&self, msg: &str) {
        self.log_cat(Status::Ok, CAT_EVENTS, msg);
    }

    fn log_cat(&self, status: Status, cat: u32, msg: &str) {
        let on = self.logging_on.load(Ordering::Relaxed);
        // Status messages (Warning, Discard, Error, Fatal) go to the importer's callback
        // whenever their category is on, also with loggingOn = false: otherwise a user never
        // learns why a call failed (fmpy and others instantiate with logging off). Only the
        // debug category logEvents follows loggingOn. (FMI 3 says loggingOn = false disables
        // all logging; this deviates for status messages on purpose.)
        let enabled = self.categories.load(Ordering::Relaxed) & cat != 0;
        let allowed = enabled && (on || status > Status::Ok);
        if allowed {
            emit(&self.logger, &self.name, status, cat_name(cat), msg);
        }
    }

    /// `SetDebugLogging`. All or none: every category is checked before any is switched (an
    /// unknown one among known ones used to leave the known ones switched). `nCategories = 0`:
    /// `true` switches every category on; `false` switches debug logging (`logEvents`) off and
    /// leaves the status categories as they are (docs/fmi-runtime.md, *Logging*).
    ///
    /// # Safety
    /// `categories` must point to `n` C strings (checked for NULL).
    pub unsafe fn set_debug_logging(
        &self,
        on: bool,
        n: usize,
        categories: *const *const c_char,
    ) -> Status {
        if n == 0 {
            // Off switches the debug logging off; the status categories stay as they are
            // (the deviation in `log_cat`: an importer that turns debug logging off by
            // default must still hear why a call failed). On switches everything on.
            self.logging_on.store(on, Ordering::Relaxed);
            if on {
                self.categories.store(CAT_ALL, Ordering::Relaxed);
            }
            return Status::Ok;
        }
        // SAFETY: forwarded contract.
        let cats = match unsafe { in_slice(categories, n, "categories") } {
            Ok(c) => c,
            Err(e) => {
                self.log(Status::Error, &format!("SetDebugLogging: {e}"));
                return Status::Error;
            }
        };
        let mut named = 0;
        for (i, &c) in cats.iter().enumerate() {
            // SAFETY: forwarded contract (NULL checked inside).
            let name = match unsafe { c_str(c) } {
                Some(s) => s,
                None => {
                    self.log(
                        Status::Error,
                        &format!(
                            "SetDebugLogging: category {i} of {n} is NULL or not UTF-8; no \
                             category was switched"
                        ),
                    );
                    return Status::Error;
                }
            };
            named |= match name {
                "logEvents" => CAT_EVENTS,
                "logStatusWarning" => CAT_WARNING,
                "logStatusDiscard" => CAT_DISCARD,
                "logStatusError" => CAT_ERROR,
                "logStatusFatal" => CAT_FATAL,
                "logAll" => CAT_ALL,
                other => {
                    self.log(
                        Status::Error,
                        &format!(
                            "SetDebugLogging: unknown log category `{other}` (category {i} of \
                             {n}); no category was switched"
                        ),
                    );
                    return Status::Error;
                }
            };
        }
        let bits = self.categories.load(Ordering::Relaxed);
        self.categories.store(
            if on { bits | named } else { bits & !named },
            Ordering::Relaxed,
        );
        // `loggingOn` gates the debug category only: switching status categories leaves it.
        if named & CAT_EVENTS != 0 {
            self.logging_on.store(on, Ordering::Relaxed);
        }
        Status::Ok
    }
}

fn cat_name(cat: u32) -> &'static str {
    match cat {
        CAT_EVENTS => "logEvents",
        CAT_WARNING => "logStatusWarning",
        CAT_DISCARD => "logStatusDiscard",
        CAT_ERROR => "logStatusError",
        _ => "logStatusFatal",
    }
}

fn to_cstring(s: &str) -> CString {
    CString::new(s.replace('\0', "\\0")).expect("NULs replaced")
}

/// Call the importer's logger. FMI 2's logger is printf-like: the message is passed as the
/// argument of a `"%s"` format, never as the format.
pub(crate) fn emit(logger: &Logger, name: &CStr, status: Status, category: &str, msg: &str) {
    let cat = to_cstring(category);
    let text = to_cstring(msg);
    match *logger {
        Logger::V2(Some(f), env) => {
            // SAFETY: the importer's callback with valid NUL-terminated strings.
            unsafe {
                f(
                    env.0,
                    name.as_ptr(),
                    status as u32,
                    cat.as_ptr(),
                    c"%s".as_ptr(),
                    text.as_ptr(),
                )
            }
        }
        Logger::V3(Some(f), env) => {
            // SAFETY: as above.
            unsafe { f(env.0, status as u32, cat.as_ptr(), text.as_ptr()) }
        }
        _ => {}
    }
}

/// A string argument the call cannot do without, by name: `Err` says whether it is NULL or not
/// valid UTF-8 (and where the first invalid byte is), for the importer's log.
///
/// # Safety
/// `p` must be NULL or a NUL-terminated string.
pub(crate) unsafe fn c_str_arg<'a>(p: *const c_char, what: &str) -> Result<&'a str, String> {
    if p.is_null() {
        return Err(format!("{what} is NULL"));
    }
    // SAFETY: caller's contract.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str().map_err(|e| {
        let at = e.valid_up_to();
        format!(
            "{what} is not valid UTF-8 (byte 0x{:02x} at offset {at} of {}; it begins {:?})",
            c.to_bytes()[at],
            c.to_bytes().len(),
            String::from_utf8_lossy(&c.to_bytes()[..at])
        )
    })
}

/// Read a C string; `None` for NULL or invalid UTF-8.
///
/// # Safety
/// `p` must be NULL or a NUL-terminated string.
pub(crate) unsafe fn c_str<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: caller's contract.
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

/// An input array as a slice: empty for `n == 0` (the pointer may then be NULL), an error for
/// NULL or misaligned pointers.
///
/// # Safety
/// For `n > 0`, `p` must point to `n` readable elements.
pub(crate) unsafe fn in_slice<'a, T>(p: *const T, n: usize, what: &str) -> Result<&'a [T], String> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(format!("{what} is NULL but its length is {n}"));
    }
    if !(p as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(format!("{what} is not aligned"));
    }
    if n > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return Err(format!("{what}: length {n} is impossible"));
    }
    // SAFETY: caller's contract; NULL, alignment and size checked.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Like [`in_slice`] for output arrays.
///
/// # Safety
/// For `n > 0`, `p` must point to `n` writable elements not aliased by other arguments.
pub(crate) unsafe fn out_slice<'a, T>(
    p: *mut T,
    n: usize,
    what: &str,
) -> Result<&'a mut [T], String> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(format!("{what} is NULL but its length is {n}"));
    }
    if !(p as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(format!("{what} is not aligned"));
    }
    if n > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return Err(format!("{what}: length {n} is impossible"));
    }
    // SAFETY: caller's contract; NULL, alignment and size checked.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// Write a scalar output argument.
///
/// # Safety
/// `p` must be NULL or valid for writing a `T`.
pub(crate) unsafe fn out_ref<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, String> {
    if p.is_null() {
        return Err(format!("{what} is NULL"));
    }
    if !(p as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(format!("{what} is not aligned"));
    }
    // SAFETY: caller's contract.
    Ok(unsafe { &mut *p })
}

/// Why a body failed; the boundary logs the message with the status.
pub(crate) struct Fail {
    pub status: Status,
    pub msg: String,
    /// Move the instance to the Error state (failed computation, not a bad argument).
    pub to_error_state: bool,
}

impl Fail {
    pub fn arg(msg: impl Into<String>) -> Fail {
        Fail {
            status: Status::Error,
            msg: msg.into(),
            to_error_state: false,
        }
    }
    /// Information the FMU cannot give (FMI 2 status kinds it does not provide: FMI 2.0.2
    /// §2.1.3, "fmi2Discard is returned also if the slave is not able to return the required
    /// status information").
    pub fn unavailable(msg: impl Into<String>) -> Fail {
        Fail {
            status: Status::Discard,
            msg: msg.into(),
            to_error_state: false,
        }
    }
    pub fn computation(msg: impl Into<String>) -> Fail {
        Fail {
            status: Status::Error,
            msg: msg.into(),
            to_error_state: true,
        }
    }
}

impl From<String> for Fail {
    fn from(s: String) -> Fail {
        Fail::arg(s)
    }
}

impl From<CosimError> for Fail {
    fn from(e: CosimError) -> Fail {
        let computation = e.is_computation();
        Fail {
            status: Status::Error,
            msg: e.to_string(),
            to_error_state: computation,
        }
    }
}

pub(crate) type BodyResult = Result<Status, Fail>;

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".into()
    }
}

/// The boundary every instance function goes through (see the module documentation).
///
/// # Safety
/// `ptr` must be NULL or a pointer the importer got from this library (or at least 16
/// readable bytes); the body's own pointer arguments are its caller's business.
pub(crate) unsafe fn boundary(
    ptr: *mut c_void,
    version: FmiVersion,
    func: &str,
    mask: u32,
    body: impl FnOnce(&Instance, &mut Core) -> BodyResult,
) -> Status {
    // SAFETY: forwarded contract.
    let Some(inst) = (unsafe { Instance::from_ptr(ptr, version) }) else {
        // No instance, hence no logger to report through.
        return Status::Error;
    };
    if inst.is_poisoned() {
        inst.log(
            Status::Error,
            &format!("{func}: the instance is unusable after an internal error; free it"),
        );
        return Status::Error;
    }
    let mut core = match inst.core.try_lock() {
        Ok(c) => c,
        Err(TryLockError::WouldBlock) => {
            inst.log(Status::Error, &format!("{func}: called while another call on this instance is running (from a callback or another thread)"));
            return Status::Error;
        }
        Err(TryLockError::Poisoned(_)) => {
            inst.poison();
            inst.log(
                Status::Error,
                &format!("{func}: the instance is unusable after an internal error; free it"),
            );
            return Status::Error;
        }
    };
    if core.state & mask == 0 {
        inst.log(
            Status::Error,
            &format!("{func}: not allowed in state {}", st::name(core.state)),
        );
        return Status::Error;
    }
    match catch_unwind(AssertUnwindSafe(|| body(inst, &mut core))) {
        Ok(Ok(s)) => s,
        Ok(Err(f)) => {
            if f.to_error_state {
                core.state = st::ERROR;
            }
            inst.log(f.status, &format!("{func}: {}", f.msg));
            f.status
        }
        Err(p) => {
            inst.poison();
            drop(core);
            inst.log(
                Status::Error,
                &format!(
                    "{func}: internal error (panic: {}); the instance is unusable",
                    panic_text(&*p)
                ),
            );
            Status::Error
        }
    }
}

/// Run instance-free code (instantiation) under `catch_unwind`.
pub(crate) fn guarded<R>(default: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(default)
}

/// Free an instance (FreeInstance).
///
/// # Safety
/// As [`boundary`].
pub(crate) unsafe fn free_instance(ptr: *mut c_void, version: FmiVersion, func: &str) {
    // SAFETY: forwarded contract.
    let Some(inst) = (unsafe { Instance::from_ptr(ptr, version) }) else {
        return;
    };
    let busy = matches!(inst.core.try_lock(), Err(TryLockError::WouldBlock));
    if busy {
        inst.log(
            Status::Error,
            &format!(
                "{func}: called while another call on this instance is running (from one of its \
                 callbacks or on another thread); not freed: free it after that call returns"
            ),
        );
        return;
    }
    // SAFETY: allocated by Box::into_raw in instantiate; the magic check above says it is live.
    let mut b = unsafe { Box::from_raw(ptr as *mut Instance) };
    b.magic = DEAD_MAGIC;
    // States the importer never freed belong to this instance and go with it.
    let states = match b.core.get_mut() {
        Ok(core) => std::mem::take(&mut core.states),
        Err(poisoned) => std::mem::take(&mut poisoned.into_inner().states),
    };
    for p in states {
        // SAFETY: every address in `states` is a live StateBox of this instance (removed
        // from the list when freed).
        unsafe { StateBox::free(p as *mut c_void) };
    }
    let _ = catch_unwind(AssertUnwindSafe(move || drop(b)));
}

/// A saved FMU state as handed to the importer.
#[repr(C)]
pub(crate) struct StateBox {
    magic: u64,
    pub snapshot: Snapshot,
}

const STATE_MAGIC: u64 = 0x6d62_7366_6d75_5354; // "mbsfmuST"

/// Everything FMU state save/restore covers.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Snapshot {
    pub state: u32,
    pub last_successful_time: f64,
    pub last_step_status: u32,
    pub sim: SimState<ActiveEngine>,
}

impl Snapshot {
    pub fn take(core: &Core) -> Snapshot {
        Snapshot {
            state: core.state,
            last_successful_time: core.last_successful_time,
            last_step_status: core.last_step_status as u32,
            sim: core.sim.save(),
        }
    }

    /// The two versions share the engine state and the serialized format; a state in a mode
    /// the other version does not have would leave the instance where none of its functions
    /// may be called.
    pub fn check_version(&self, version: FmiVersion) -> Result<(), Fail> {
        let foreign = match version {
            FmiVersion::V2 => st::EVENT,
            FmiVersion::V3 => st::STEP_FAILED,
        };
        if self.state != foreign {
            return Ok(());
        }
        Err(Fail::arg(format!(
            "the FMU state was taken in {}, which this FMI version does not have: a state of \
             this model's FMU of the other FMI version?",
            st::name(self.state)
        )))
    }

    pub fn restore(&self, version: FmiVersion, core: &mut Core) -> Result<(), Fail> {
        if self.state.count_ones() != 1 || self.state & st::ANY == 0 {
            return Err(Fail::arg("the FMU state is corrupt (state machine)"));
        }
        self.check_version(version)?;
        core.sim.restore(&self.sim)?;
        core.state = self.state;
        core.last_successful_time = self.last_successful_time;
        core.last_step_status = match self.last_step_status {
            0 => Status::Ok,
            1 => Status::Warning,
            2 => Status::Discard,
            3 => Status::Error,
            _ => Status::Fatal,
        };
        Ok(())
    }
}

impl StateBox {
    pub fn new_raw(snapshot: Snapshot) -> *mut c_void {
        Box::into_raw(Box::new(StateBox {
            magic: STATE_MAGIC,
            snapshot,
        })) as *mut c_void
    }

    /// # Safety
    /// `p` must be NULL or at least 8 readable bytes.
    pub unsafe fn from_ptr<'a>(p: *mut c_void) -> Option<&'a mut StateBox> {
        if p.is_null() || !(p as usize).is_multiple_of(std::mem::align_of::<StateBox>()) {
            return None;
        }
        // SAFETY: caller's contract; `magic` is the first field.
        if unsafe { std::ptr::read(p as *const u64) } != STATE_MAGIC {
            return None;
        }
        // SAFETY: the magic says it is a live StateBox we allocated.
        Some(unsafe { &mut *(p as *mut StateBox) })
    }

    /// # Safety
    /// `p` must be a live StateBox pointer (checked by [`StateBox::from_ptr`] first).
    pub unsafe fn free(p: *mut c_void) {
        // SAFETY: caller's contract.
        let mut b = unsafe { Box::from_raw(p as *mut StateBox) };
        b.magic = DEAD_MAGIC;
        drop(b);
    }
}

/// Shared bodies of the FMU state functions (the same in both versions).
pub(crate) mod fmu_state {
    use super::*;

    /// # Safety
    /// `out` is the importer's `FMUState*` argument.
    pub unsafe fn get(core: &mut Core, out: *mut *mut c_void) -> BodyResult {
        // SAFETY: forwarded.
        let slot = unsafe { out_ref(out, "FMUState") }?;
        let snap = Snapshot::take(core);
        // SAFETY: forwarded (`*slot` is NULL or the importer's earlier state).
        unsafe { store(core, slot, snap) }
    }

    /// Into the importer's earlier state `*slot` (one of this instance's), or a new one.
    ///
    /// # Safety
    /// `*slot` is NULL or what the importer got from a Get or Deserialize (checked by magic).
    unsafe fn store(core: &mut Core, slot: &mut *mut c_void, snap: Snapshot) -> BodyResult {
        // SAFETY: checked by magic.
        match unsafe { StateBox::from_ptr(*slot) } {
            Some(_) if !core.states.contains(&(*slot as usize)) => Err(Fail::arg(
                "the FMU state passed in to be overwritten belongs to another instance; pass \
                 NULL for a new state of this one (its own state was left unchanged)",
            )),
            Some(b) => {
                b.snapshot = snap;
                Ok(Status::Ok)
            }
            None => {
                *slot = StateBox::new_raw(snap);
                core.states.push(*slot as usize);
                Ok(Status::Ok)
            }
        }
    }

    /// # Safety
    /// `s` is the importer's `FMUState` argument.
    pub unsafe fn set(inst: &Instance, core: &mut Core, s: *mut c_void) -> BodyResult {
        // SAFETY: forwarded.
        let b = unsafe { StateBox::from_ptr(s) }
            .ok_or_else(|| Fail::arg("the FMU state is NULL or not one of this FMU's states"))?;
        b.snapshot.restore(inst.version, core)?;
        Ok(Status::Ok)
    }

    /// # Safety
    /// `s` is the importer's `FMUState*` argument.
    pub unsafe fn free(core: &mut Core, s: *mut *mut c_void) -> BodyResult {
        if s.is_null() {
            return Ok(Status::Ok);
        }
        // SAFETY: non-NULL pointer from the importer.
        let slot = unsafe { out_ref(s, "FMUState") }?;
        if slot.is_null() {
            return Ok(Status::Ok);
        }
        // SAFETY: checked by magic.
        if unsafe { StateBox::from_ptr(*slot) }.is_none() {
            return Err(Fail::arg("the FMU state is not one of this FMU's states"));
        }
        let Some(k) = core.states.iter().position(|&p| p == *slot as usize) else {
            return Err(Fail::arg(
                "the FMU state belongs to another instance: free it through that instance",
            ));
        };
        core.states.swap_remove(k);
        // SAFETY: live StateBox.
        unsafe { StateBox::free(*slot) };
        *slot = std::ptr::null_mut();
        Ok(Status::Ok)
    }

    /// # Safety
    /// Importer's arguments.
    pub unsafe fn size(inst: &Instance, s: *mut c_void, size: *mut usize) -> BodyResult {
        // SAFETY: forwarded.
        let b = unsafe { StateBox::from_ptr(s) }
            .ok_or_else(|| Fail::arg("the FMU state is NULL or not one of this FMU's states"))?;
        // SAFETY: forwarded.
        let out = unsafe { out_ref(size, "size") }?;
        *out = state_bytes::encode(&inst.token, &b.snapshot)
            .map_err(Fail::arg)?
            .len();
        Ok(Status::Ok)
    }

    /// # Safety
    /// Importer's arguments.
    pub unsafe fn serialize(
        inst: &Instance,
        s: *mut c_void,
        bytes: *mut u8,
        size: usize,
    ) -> BodyResult {
        // SAFETY: forwarded.
        let b = unsafe { StateBox::from_ptr(s) }
            .ok_or_else(|| Fail::arg("the FMU state is NULL or not one of this FMU's states"))?;
        let data = state_bytes::encode(&inst.token, &b.snapshot).map_err(Fail::arg)?;
        if size != data.len() {
            return Err(Fail::arg(format!(
                "buffer size {size} differs from the serialized size {}",
                data.len()
            )));
        }
        // SAFETY: forwarded.
        let out = unsafe { out_slice(bytes, size, "serializedState") }?;
        out.copy_from_slice(&data);
        Ok(Status::Ok)
    }

    /// # Safety
    /// Importer's arguments.
    pub unsafe fn deserialize(
        inst: &Instance,
        core: &mut Core,
        bytes: *const u8,
        size: usize,
        s: *mut *mut c_void,
    ) -> BodyResult {
        // SAFETY: forwarded.
        let data = unsafe { in_slice(bytes, size, "serializedState") }?;
        // SAFETY: forwarded.
        let slot = unsafe { out_ref(s, "FMUState") }?;
        let mut snap = state_bytes::decode(&inst.token, data).map_err(Fail::arg)?;
        snap.check_version(inst.version)?;
        // Validate against this model before handing it out.
        core.sim.validate_state(&snap.sim)?;
        core.sim.adopt_model_files(&mut snap.sim);
        // SAFETY: forwarded.
        unsafe { store(core, slot, snap) }
    }
}
