//! The in-tree fuzzer (issue 13): seeded random FMI 2 and FMI 3 call sequences through the
//! real shared library, crafted serialized FMU states, and mutated model files. Every job
//! runs in a forked child, so a crash (signal) or a call that never returns is seen and
//! attributed instead of taking the test process down; every call is timed.
//!
//! It fails on: a crash, a call longer than [`SLOW_CALL`], a panic caught by the FMU's
//! boundary (the log message `internal error (panic: ...)`), a legitimate state the FMU
//! refuses to deserialize, a child that stops reporting for [`HANG`].
//!
//! CI (`cargo test --release --test fuzz`) runs a short fixed-seed campaign. The long run of
//! docs/fmi-runtime.md ("Reliability limits") is the same code with more jobs:
//! `MBSFMU_FUZZ_SEQUENCES=100000 MBSFMU_FUZZ_STATES=20000 MBSFMU_FUZZ_MODELS=20000
//! MBSFMU_FUZZ_SEED=7 cargo test --release --test fuzz -- --nocapture --test-threads 1`.
#![allow(clippy::missing_safety_doc)]

mod fmi_common;

use fmi_common::*;
use std::cell::Cell;
use std::ffi::{c_char, c_void, CString};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A call slower than this fails the campaign.
const SLOW_CALL: Duration = Duration::from_secs(5);
/// A child that reports nothing for this long is killed and its job counted as a hang.
const HANG: Duration = Duration::from_secs(30);

/// Forking while another test thread of this binary is inside the library could copy a held
/// lock into the child: the campaigns run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn env_count(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn seed() -> u64 {
    env_count("MBSFMU_FUZZ_SEED", 13)
}

// ------------------------------------------------------------------------ random numbers

/// SplitMix64: small, seedable, good enough to choose calls and arguments.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64, job: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ job.rotate_left(17));
        r.next();
        r
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len())]
    }
    /// A hostile but type-correct number.
    fn hostile(&mut self) -> f64 {
        match self.below(20) {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            3 => f64::MAX,
            4 => -f64::MAX,
            5 => f64::MIN_POSITIVE,
            6 => 5e-324,
            7 => 0.0,
            8 => -0.0,
            9 => 1e308,
            10 => 1e170,
            11 => -1.0,
            12 => -1e6 * self.unit(),
            13 => 1e6 * self.unit(),
            14 => 1e-12,
            _ => 2.0 * self.unit(),
        }
    }
    /// A communication step: mostly ordinary, sometimes hostile.
    /// Hostile sizes are rare: each may cost the whole work budget of a call (0.5 s).
    fn step(&mut self) -> f64 {
        match self.below(400) {
            0..=1 => self.hostile(),
            2 => 1e170,
            3..=12 => 10.0 * self.unit(),
            _ => self.pick(&[1e-3, 2e-3, 1e-2, 0.05]),
        }
    }
    /// A value for a Float64 variable: ordinary (near 1) or hostile.
    fn value(&mut self) -> f64 {
        if self.chance(0.5) {
            self.hostile()
        } else {
            self.unit() * self.pick(&[0.1, 1.0, 10.0, 1000.0])
        }
    }
}

// ------------------------------------------------------------------------ models

/// A model as an unpacked FMU resources folder, with its variables by kind.
struct FuzzModel {
    _dir: TempDir,
    resources: PathBuf,
    token: String,
    reals: Vec<u32>,
    ints: Vec<u32>,
    inputs: Vec<u32>,
    outputs: Vec<u32>,
    text: String,
}

impl FuzzModel {
    fn new(name: &str, text: &str) -> FuzzModel {
        let dir = TempDir::new(&format!("fuzz-{name}"));
        let resources = dir.0.join("resources");
        std::fs::create_dir_all(&resources).unwrap();
        let file = resources.join("model.toml");
        std::fs::write(&file, text).unwrap();
        let spec = mbsfmu::mbs::load_model(&file).unwrap();
        let token = mbsfmu::description::token::model_token_of(&file, &spec.source_files).unwrap();
        let table = mbsfmu::description::VariableTable::from_spec(&spec);
        use mbsfmu::description::{Causality, VarType};
        let mut m = FuzzModel {
            _dir: dir,
            resources,
            token,
            reals: Vec::new(),
            ints: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            text: text.to_string(),
        };
        for v in &table.variables {
            match v.var_type {
                VarType::Float64 => m.reals.push(v.value_reference),
                _ => m.ints.push(v.value_reference),
            }
            match v.causality {
                Causality::Input => m.inputs.push(v.value_reference),
                Causality::Output => m.outputs.push(v.value_reference),
                _ => {}
            }
        }
        m
    }
    fn uri(&self) -> String {
        format!("file://{}/", self.resources.display())
    }
    fn path(&self) -> String {
        format!("{}/", self.resources.display())
    }
    fn vr(&self, r: &mut Rng, from: &[u32]) -> u32 {
        match r.below(12) {
            0 => r.next() as u32,
            1 => u32::MAX,
            _ if from.is_empty() => r.below(64) as u32,
            _ => r.pick(from),
        }
    }
}

/// The models the sequences run on: the C ABI tests' oscillator (cheap), and gallery models
/// with contacts, inputs and constraints.
fn models() -> Vec<FuzzModel> {
    let gallery = |n: &str| {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("models/{n}.toml")),
        )
        .unwrap()
    };
    vec![
        FuzzModel::new("oscillator", OSCILLATOR),
        FuzzModel::new("bouncing_balls", &gallery("bouncing_balls")),
        FuzzModel::new("slider_crank", &gallery("slider_crank")),
        FuzzModel::new("quarter_car_rig", &gallery("quarter_car_rig")),
    ]
}

/// Which model a job uses: mostly the oscillator (the campaign's cost).
fn model_index(r: &mut Rng, n: usize) -> usize {
    if r.chance(0.6) {
        0
    } else {
        1 + r.below(n - 1)
    }
}

// ------------------------------------------------------------------------ job reports

/// What one job reports to the parent (fixed size, written through a pipe).
#[derive(Debug, Default, Clone, Copy)]
struct Report {
    calls: u64,
    /// Longest call (ns) and the call kind.
    max_ns: u64,
    max_kind: u64,
    slow: u64,
    panics: u64,
    /// Legitimate serialized states the FMU refused.
    refused_legit: u64,
    ok: u64,
    errors: u64,
    /// Crafted states the FMU accepted and then stepped without incident.
    crafted_accepted: u64,
}

const WORDS: usize = 9;

impl Report {
    fn to_words(self) -> [u64; WORDS] {
        [
            self.calls,
            self.max_ns,
            self.max_kind,
            self.slow,
            self.panics,
            self.refused_legit,
            self.ok,
            self.errors,
            self.crafted_accepted,
        ]
    }
    fn from_words(w: [u64; WORDS]) -> Report {
        Report {
            calls: w[0],
            max_ns: w[1],
            max_kind: w[2],
            slow: w[3],
            panics: w[4],
            refused_legit: w[5],
            ok: w[6],
            errors: w[7],
            crafted_accepted: w[8],
        }
    }
}

/// Timing of calls inside a job.
struct Clock<'a> {
    rep: &'a mut Report,
}

impl Clock<'_> {
    fn time<T>(&mut self, kind: u64, f: impl FnOnce() -> T) -> T {
        if std::env::var_os("MBSFMU_FUZZ_TRACE").is_some() {
            eprintln!("fuzz: call kind {kind}");
        }
        let t = Instant::now();
        let r = f();
        let ns = t.elapsed().as_nanos() as u64;
        self.rep.calls += 1;
        if ns > self.rep.max_ns {
            self.rep.max_ns = ns;
            self.rep.max_kind = kind;
        }
        if ns > SLOW_CALL.as_nanos() as u64 {
            self.rep.slow += 1;
        }
        r
    }
    fn status(&mut self, s: u32) {
        if s == 0 {
            self.rep.ok += 1;
        } else if s >= 3 {
            self.rep.errors += 1;
        }
    }
}

/// Totals of a campaign.
#[derive(Debug, Default)]
struct Summary {
    jobs: u64,
    crashes: Vec<(u64, String)>,
    hangs: Vec<u64>,
    total: Report,
    elapsed: Duration,
}

impl Summary {
    fn add(&mut self, r: Report) {
        self.jobs += 1;
        let t = &mut self.total;
        t.calls += r.calls;
        if r.max_ns > t.max_ns {
            t.max_ns = r.max_ns;
            t.max_kind = r.max_kind;
        }
        t.slow += r.slow;
        t.panics += r.panics;
        t.refused_legit += r.refused_legit;
        t.ok += r.ok;
        t.errors += r.errors;
        t.crafted_accepted += r.crafted_accepted;
    }
    fn print(&self, what: &str) {
        let t = &self.total;
        println!(
            "fuzz {what}: {} jobs, {} calls ({} OK, {} Error or worse), {} crashes, {} hangs, {} calls > {:?}, longest call {:.3} s (kind {}), {} panics caught, {} legitimate states refused, {} crafted states accepted, {:.1} s",
            self.jobs,
            t.calls,
            t.ok,
            t.errors,
            self.crashes.len(),
            self.hangs.len(),
            t.slow,
            SLOW_CALL,
            t.max_ns as f64 * 1e-9,
            t.max_kind,
            t.panics,
            t.refused_legit,
            t.crafted_accepted,
            self.elapsed.as_secs_f64()
        );
    }
    fn assert_clean(&self, what: &str) {
        self.print(what);
        let t = &self.total;
        assert!(
            self.crashes.is_empty(),
            "{what}: crashes (job, signal): {:?}",
            self.crashes
        );
        assert!(
            self.hangs.is_empty(),
            "{what}: hangs in jobs {:?}",
            self.hangs
        );
        assert_eq!(t.slow, 0, "{what}: calls longer than {SLOW_CALL:?}");
        assert_eq!(t.panics, 0, "{what}: panics caught by the boundary");
        assert_eq!(t.refused_legit, 0, "{what}: legitimate states refused");
    }
}

// ------------------------------------------------------------------------ forked workers

fn write_all(fd: i32, words: &[u64]) {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut off = 0;
    while off < bytes.len() {
        let n = unsafe {
            libc::write(
                fd,
                bytes[off..].as_ptr() as *const c_void,
                bytes.len() - off,
            )
        };
        if n <= 0 {
            unsafe { libc::_exit(3) };
        }
        off += n as usize;
    }
}

/// Run `job(id)` for every id in `0..n` in forked children (batches of `batch`); each child
/// writes `(id, report)` after every job. A child that dies by a signal crashed in the job
/// after its last report; one silent for [`HANG`] is killed (hang). Work resumes after it.
fn campaign(n: u64, batch: u64, job: &dyn Fn(u64) -> Report) -> Summary {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let mut sum = Summary::default();
    let mut next = 0u64;
    while next < n {
        let end = (next + batch).min(n);
        let mut fds = [0i32; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            unsafe { libc::close(fds[0]) };
            for id in next..end {
                let r = job(id);
                let mut w = vec![id];
                w.extend_from_slice(&r.to_words());
                write_all(fds[1], &w);
            }
            unsafe { libc::_exit(0) };
        }
        unsafe { libc::close(fds[1]) };
        let fd = fds[0];
        let mut buf: Vec<u8> = Vec::new();
        let mut last_done: Option<u64> = None;
        let mut last_progress = Instant::now();
        let rec = 8 * (1 + WORDS);
        let mut hung = false;
        loop {
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let r = unsafe { libc::poll(&mut pfd, 1, 200) };
            if r > 0 {
                let mut chunk = [0u8; 4096];
                let k = unsafe { libc::read(fd, chunk.as_mut_ptr() as *mut c_void, chunk.len()) };
                if k <= 0 {
                    break; // EOF: the child exited (or died).
                }
                buf.extend_from_slice(&chunk[..k as usize]);
                while buf.len() >= rec {
                    let words: Vec<u64> = buf[..rec]
                        .chunks(8)
                        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                        .collect();
                    buf.drain(..rec);
                    let mut w = [0u64; WORDS];
                    w.copy_from_slice(&words[1..]);
                    sum.add(Report::from_words(w));
                    last_done = Some(words[0]);
                    last_progress = Instant::now();
                }
            } else if last_progress.elapsed() > HANG {
                unsafe { libc::kill(pid, libc::SIGKILL) };
                hung = true;
                break;
            }
        }
        unsafe { libc::close(fd) };
        let mut status = 0;
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let failed_at = last_done.map_or(next, |d| d + 1);
        if hung {
            sum.hangs.push(failed_at);
            next = failed_at + 1;
        } else if libc::WIFSIGNALED(status) || libc::WEXITSTATUS(status) != 0 {
            let why = if libc::WIFSIGNALED(status) {
                format!("signal {}", libc::WTERMSIG(status))
            } else {
                format!("exit {}", libc::WEXITSTATUS(status))
            };
            sum.crashes.push((failed_at, why));
            next = failed_at + 1;
        } else {
            next = end;
        }
    }
    sum.elapsed = started.elapsed();
    sum
}

// ------------------------------------------------------------------------ logging

/// Counts the boundary's panic messages (and keeps nothing else).
struct Sink {
    panics: Cell<u64>,
}

thread_local! {
    /// The last message (printed with `MBSFMU_FUZZ_VERBOSE=1` when something fails).
    static LAST: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

fn verbose(what: &str) {
    if std::env::var_os("MBSFMU_FUZZ_VERBOSE").is_some() {
        LAST.with(|l| eprintln!("fuzz: {what}: last message: {}", l.borrow()));
    }
}

fn note(sink: &Sink, msg: *const c_char) {
    if !msg.is_null() {
        let m = unsafe { std::ffi::CStr::from_ptr(msg) }.to_string_lossy();
        if m.contains("(panic:") {
            sink.panics.set(sink.panics.get() + 1);
            verbose("panic");
        }
        LAST.with(|l| *l.borrow_mut() = m.into_owned());
    }
}

unsafe extern "C" fn log2(
    env: *mut c_void,
    _name: *const c_char,
    _status: u32,
    _category: *const c_char,
    _fmt: *const c_char,
    arg: *const c_char,
) {
    note(unsafe { &*(env as *const Sink) }, arg);
}

unsafe extern "C" fn log3(env: *mut c_void, _status: u32, _cat: *const c_char, msg: *const c_char) {
    note(unsafe { &*(env as *const Sink) }, msg);
}

// ------------------------------------------------------------------------ crafted states

/// Header layout of src/fmi/state_bytes.rs.
const HEADER: usize = 8 + 4 + 38 + 8;
const SUM: usize = 16;

/// Recompute length and checksum, as an attacker who read state_bytes.rs would.
fn reseal(mut bytes: Vec<u8>) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    if bytes.len() < HEADER + SUM {
        return bytes;
    }
    let len = (bytes.len() - HEADER - SUM) as u64;
    bytes[HEADER - 8..HEADER].copy_from_slice(&len.to_le_bytes());
    let mut h = Sha256::new();
    h.update(&bytes[..HEADER]);
    h.update(&bytes[HEADER + SUM..]);
    let d = h.finalize();
    bytes[HEADER..HEADER + SUM].copy_from_slice(&d[..SUM]);
    bytes
}

fn varint(b: &[u8], mut at: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for shift in (0..70).step_by(7) {
        let x = *b.get(at)?;
        at += 1;
        if shift == 63 && x > 1 {
            return None;
        }
        v |= ((x & 0x7f) as u64) << shift;
        if x & 0x80 == 0 {
            return Some((v, at));
        }
    }
    None
}

fn put_varint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Where the payload holds a nalgebra matrix: `(start of nrows, end of ncols, L, r, c)` for
/// `varint L, L f64, varint r, varint c` with `r c = L` (postcard's layout of `VecStorage`).
fn matrices(p: &[u8]) -> Vec<(usize, usize, u64, u64, u64)> {
    let mut out = Vec::new();
    for i in 0..p.len() {
        let Some((l, a)) = varint(p, i) else { continue };
        if l == 0 || l > 1 << 16 {
            continue;
        }
        let dims = a + 8 * l as usize;
        let Some((r, b)) = varint(p, dims) else {
            continue;
        };
        let Some((c, e)) = varint(p, b) else { continue };
        if r >= 1 && c >= 1 && r.checked_mul(c) == Some(l) && r > 1 && c > 1 {
            out.push((dims, e, l, r, c));
        }
    }
    out
}

/// Modular inverse of an odd number mod 2^64 (Newton).
fn inv_odd(c: u64) -> u64 {
    let mut x = c;
    for _ in 0..6 {
        x = x.wrapping_mul(2u64.wrapping_sub(c.wrapping_mul(x)));
    }
    x
}

/// A crafted variant of a legitimate serialized state (always re-sealed unless the mutation is
/// about the seal).
fn craft(r: &mut Rng, legit: &[u8]) -> Vec<u8> {
    let payload = &legit[HEADER + SUM..];
    let mats = matrices(payload);
    let mut out = legit.to_vec();
    match r.below(8) {
        // Matrix dimensions whose product wraps to the element count (the segfault).
        0..=2 if !mats.is_empty() => {
            let (s, e, l, _, _) = mats[r.below(mats.len())];
            let c = (r.next() | 1) | (1 << 40);
            let rows = l.wrapping_mul(inv_odd(c));
            let mut dims = Vec::new();
            put_varint(rows, &mut dims);
            put_varint(c, &mut dims);
            let at = HEADER + SUM;
            out.splice(at + s..at + e, dims);
            reseal(out)
        }
        // Consistent but wrong dimensions (same element count).
        3 if !mats.is_empty() => {
            let (s, e, l, rr, _) = mats[r.below(mats.len())];
            let (nr, nc) = if r.chance(0.5) { (1, l) } else { (l / rr, rr) };
            let mut dims = Vec::new();
            put_varint(nr, &mut dims);
            put_varint(nc, &mut dims);
            let at = HEADER + SUM;
            out.splice(at + s..at + e, dims);
            reseal(out)
        }
        // Random bytes of the payload.
        4 | 5 => {
            for _ in 0..1 + r.below(6) {
                if out.len() > HEADER + SUM {
                    let i = HEADER + SUM + r.below(out.len() - HEADER - SUM);
                    out[i] = match r.below(4) {
                        0 => 0xff,
                        1 => 0,
                        _ => r.next() as u8,
                    };
                }
            }
            reseal(out)
        }
        // Truncated or extended payload.
        6 => {
            if r.chance(0.5) {
                let keep = HEADER + SUM + r.below(out.len() - HEADER - SUM);
                out.truncate(keep);
            } else {
                for _ in 0..1 + r.below(64) {
                    out.push(r.next() as u8);
                }
            }
            reseal(out)
        }
        // Header or seal damaged, not re-sealed.
        _ => {
            let i = r.below(HEADER + SUM);
            out[i] ^= 1 << r.below(8);
            out
        }
    }
}

// ------------------------------------------------------------------------ FMI 2 sequences

mod fmi2_fuzz {
    use super::*;
    use fmi_sys::fmi2::*;

    pub fn binding() -> Fmi2Binding {
        unsafe { Fmi2Binding::new(lib_path()) }.expect("load libmbsfmu.so")
    }

    fn callbacks(sink: &Sink) -> fmi2CallbackFunctions {
        fmi2CallbackFunctions {
            logger: Some(unsafe {
                std::mem::transmute::<
                    *const (),
                    unsafe extern "C" fn(*mut c_void, *const i8, u32, *const i8, *const i8, ...),
                >(log2 as *const ())
            }),
            allocateMemory: None,
            freeMemory: None,
            stepFinished: None,
            componentEnvironment: sink as *const Sink as *mut c_void,
        }
    }

    /// One random call sequence on a fresh instance.
    pub fn sequence(f: &Fmi2Binding, models: &[FuzzModel], id: u64) -> Report {
        let mut r = Rng::new(seed(), 2, id);
        let m = &models[model_index(&mut r, models.len())];
        let sink = Sink {
            panics: Cell::new(0),
        };
        let cb = callbacks(&sink);
        let mut rep = Report::default();
        let (name, guid, uri) = (
            CString::new("fuzz").unwrap(),
            CString::new(m.token.clone()).unwrap(),
            CString::new(m.uri()).unwrap(),
        );
        let mut clock = Clock { rep: &mut rep };
        let c = clock.time(0, || unsafe {
            f.fmi2Instantiate(
                name.as_ptr(),
                fmi2Type_fmi2CoSimulation,
                guid.as_ptr(),
                uri.as_ptr(),
                &cb,
                0,
                r.chance(0.1) as i32,
            )
        });
        assert!(!c.is_null(), "instantiation of a valid model failed");
        let mut t = 0.0f64;
        let mut states: Vec<fmi2FMUstate> = Vec::new();
        let mut blobs: Vec<Vec<u8>> = Vec::new();
        let n_calls = 5 + r.below(40);
        for _ in 0..n_calls {
            let kind = r.below(24) as u64;
            let s = clock.time(kind, || unsafe {
                match kind {
                    0 => f.fmi2SetupExperiment(
                        c,
                        r.chance(0.5) as i32,
                        if r.chance(0.5) { 1e-4 } else { r.hostile() },
                        if r.chance(0.8) { 0.0 } else { r.hostile() },
                        r.chance(0.5) as i32,
                        if r.chance(0.5) { 10.0 } else { r.hostile() },
                    ),
                    1 | 2 => {
                        let a = f.fmi2EnterInitializationMode(c);
                        let b = f.fmi2ExitInitializationMode(c);
                        a.max(b)
                    }
                    3 | 4 => {
                        let n = r.below(4);
                        let vrs: Vec<u32> = (0..n).map(|_| m.vr(&mut r, &m.reals)).collect();
                        let vals: Vec<f64> = (0..n).map(|_| r.value()).collect();
                        f.fmi2SetReal(c, vrs.as_ptr(), n, vals.as_ptr())
                    }
                    5 => {
                        let n = r.below(4);
                        let vrs: Vec<u32> = (0..n).map(|_| m.vr(&mut r, &m.reals)).collect();
                        let mut vals = vec![0.0; n];
                        let p = if r.chance(0.05) {
                            null_mut()
                        } else {
                            vals.as_mut_ptr()
                        };
                        f.fmi2GetReal(c, vrs.as_ptr(), n, p)
                    }
                    6 => {
                        let vr = m.vr(&mut r, &m.ints);
                        let v = r.pick(&[-1, 0, 1, 2, 5, 9, 10, 11, 12, i32::MAX, i32::MIN]);
                        f.fmi2SetInteger(c, &vr, 1, &v)
                    }
                    7 => {
                        let vr = m.vr(&mut r, &m.ints);
                        let mut v = 0;
                        f.fmi2GetInteger(c, &vr, 1, &mut v)
                    }
                    8..=11 => {
                        let tc = if r.chance(0.9) { t } else { r.hostile() };
                        let h = r.step();
                        let s = f.fmi2DoStep(c, tc, h, 1);
                        let mut lst = t;
                        if f.fmi2GetRealStatus(c, fmi2StatusKind_fmi2LastSuccessfulTime, &mut lst)
                            == 0
                        {
                            t = lst;
                        }
                        s
                    }
                    12 => {
                        let mut st: fmi2FMUstate = if !states.is_empty() && r.chance(0.3) {
                            r.pick(&states)
                        } else {
                            null_mut()
                        };
                        let was = st;
                        let s = f.fmi2GetFMUstate(c, &mut st);
                        if s == 0 && was.is_null() {
                            states.push(st);
                        }
                        s
                    }
                    13 if !states.is_empty() => {
                        let s = f.fmi2SetFMUstate(c, r.pick(&states));
                        let mut lst = t;
                        if f.fmi2GetRealStatus(c, fmi2StatusKind_fmi2LastSuccessfulTime, &mut lst)
                            == 0
                        {
                            t = lst;
                        }
                        s
                    }
                    14 if !states.is_empty() => {
                        let k = r.below(states.len());
                        let mut st = states.swap_remove(k);
                        f.fmi2FreeFMUstate(c, &mut st)
                    }
                    15 if !states.is_empty() => {
                        let st = r.pick(&states);
                        let mut n = 0usize;
                        let s = f.fmi2SerializedFMUstateSize(c, st, &mut n);
                        if s != 0 {
                            return s;
                        }
                        let mut buf = vec![0u8; n];
                        let s = f.fmi2SerializeFMUstate(c, st, buf.as_mut_ptr() as *mut i8, n);
                        if s == 0 {
                            // A legitimate state must come back.
                            let mut back: fmi2FMUstate = null_mut();
                            let d = f.fmi2DeSerializeFMUstate(
                                c,
                                buf.as_ptr() as *const i8,
                                n,
                                &mut back,
                            );
                            if d == 0 {
                                states.push(back);
                            } else {
                                clock_refused();
                            }
                            blobs.push(buf);
                        }
                        s
                    }
                    16 if !blobs.is_empty() => {
                        let k = r.below(blobs.len());
                        let b = craft(&mut r, &blobs[k]);
                        let mut st: fmi2FMUstate = null_mut();
                        let s =
                            f.fmi2DeSerializeFMUstate(c, b.as_ptr() as *const i8, b.len(), &mut st);
                        if s == 0 {
                            states.push(st);
                        }
                        s
                    }
                    17 => {
                        let nu = r.below(3);
                        let nk = r.below(3);
                        let u: Vec<u32> = (0..nu).map(|_| m.vr(&mut r, &m.outputs)).collect();
                        let k: Vec<u32> = (0..nk).map(|_| m.vr(&mut r, &m.inputs)).collect();
                        let seed: Vec<f64> = (0..nk).map(|_| r.value()).collect();
                        let mut out = vec![0.0; nu];
                        f.fmi2GetDirectionalDerivative(
                            c,
                            u.as_ptr(),
                            nu,
                            k.as_ptr(),
                            nk,
                            seed.as_ptr(),
                            out.as_mut_ptr(),
                        )
                    }
                    18 => {
                        let vr = m.vr(&mut r, &m.inputs);
                        let order = r.pick(&[0, 1, 2, 3, -1]);
                        let v = r.value();
                        f.fmi2SetRealInputDerivatives(c, &vr, 1, &order, &v)
                    }
                    19 => {
                        let vr = m.vr(&mut r, &m.outputs);
                        let order = r.pick(&[0, 1, 2, 3]);
                        let mut v = 0.0;
                        f.fmi2GetRealOutputDerivatives(c, &vr, 1, &order, &mut v)
                    }
                    20 => f.fmi2Terminate(c),
                    21 => {
                        t = 0.0;
                        f.fmi2Reset(c)
                    }
                    22 => {
                        let mut st = 0u32;
                        f.fmi2GetStatus(c, r.below(6) as u32, &mut st)
                    }
                    _ => f.fmi2SetDebugLogging(c, r.chance(0.5) as i32, 0, null()),
                }
            });
            clock.status(s);
        }
        // Half the time the importer forgets its states: FreeInstance releases them.
        if r.chance(0.5) {
            for mut st in states.drain(..) {
                unsafe { f.fmi2FreeFMUstate(c, &mut st) };
            }
        }
        clock.time(99, || unsafe { f.fmi2FreeInstance(c) });
        rep.panics += sink.panics.get();
        rep.refused_legit += REFUSED.with(|x| x.replace(0));
        rep
    }
}

thread_local! {
    static REFUSED: Cell<u64> = const { Cell::new(0) };
}

fn clock_refused() {
    verbose("legitimate state refused (or OK with NaN)");
    REFUSED.with(|x| x.set(x.get() + 1));
}

// ------------------------------------------------------------------------ FMI 3 sequences

mod fmi3_fuzz {
    use super::*;
    use fmi_sys::fmi3::*;

    pub fn binding() -> Fmi3Binding {
        unsafe { Fmi3Binding::new(lib_path()) }.expect("load libmbsfmu.so")
    }

    pub fn sequence(f: &Fmi3Binding, models: &[FuzzModel], id: u64) -> Report {
        let mut r = Rng::new(seed(), 3, id);
        let m = &models[model_index(&mut r, models.len())];
        let sink = Sink {
            panics: Cell::new(0),
        };
        let mut rep = Report::default();
        let (name, token, path) = (
            CString::new("fuzz3").unwrap(),
            CString::new(m.token.clone()).unwrap(),
            CString::new(m.path()).unwrap(),
        );
        let early = r.chance(0.3);
        let mut clock = Clock { rep: &mut rep };
        let c = clock.time(0, || unsafe {
            f.fmi3InstantiateCoSimulation(
                name.as_ptr(),
                token.as_ptr(),
                path.as_ptr(),
                false,
                r.chance(0.1),
                false,
                early,
                null(),
                0,
                &sink as *const Sink as *mut c_void,
                Some(log3),
                None,
            )
        });
        assert!(!c.is_null(), "instantiation of a valid model failed");
        let mut t = 0.0f64;
        let mut states: Vec<fmi3FMUState> = Vec::new();
        let mut blobs: Vec<Vec<u8>> = Vec::new();
        let n_calls = 5 + r.below(40);
        for _ in 0..n_calls {
            let kind = r.below(24) as u64;
            let s = clock.time(kind, || unsafe {
                match kind {
                    0 | 1 => {
                        let a = f.fmi3EnterInitializationMode(
                            c,
                            r.chance(0.5),
                            if r.chance(0.5) { 1e-4 } else { r.hostile() },
                            if r.chance(0.8) { 0.0 } else { r.hostile() },
                            r.chance(0.5),
                            if r.chance(0.5) { 10.0 } else { r.hostile() },
                        );
                        let b = f.fmi3ExitInitializationMode(c);
                        a.max(b)
                    }
                    2 | 3 => {
                        let n = r.below(4);
                        let vrs: Vec<u32> = (0..n).map(|_| m.vr(&mut r, &m.reals)).collect();
                        let vals: Vec<f64> = (0..n).map(|_| r.value()).collect();
                        let nv = if r.chance(0.05) { n + 1 } else { n };
                        f.fmi3SetFloat64(c, vrs.as_ptr(), n, vals.as_ptr(), nv.min(n))
                    }
                    4 => {
                        let n = r.below(4);
                        let vrs: Vec<u32> = (0..n).map(|_| m.vr(&mut r, &m.reals)).collect();
                        let mut vals = vec![0.0; n];
                        let s = f.fmi3GetFloat64(c, vrs.as_ptr(), n, vals.as_mut_ptr(), n);
                        if s == 0 && vals.iter().any(|v| v.is_nan()) {
                            // OK with NaN outputs is a defect: count it as a refusal.
                            clock_refused();
                        }
                        s
                    }
                    5 => {
                        let vr = m.vr(&mut r, &m.ints);
                        let v = r.pick(&[-1i64, 0, 1, 2, 5, 9, 11, 12, i64::MAX, i64::MIN]);
                        f.fmi3SetInt64(c, &vr, 1, &v, 1)
                    }
                    6 => {
                        let vr = m.vr(&mut r, &m.ints);
                        let mut v = 0i64;
                        f.fmi3GetInt64(c, &vr, 1, &mut v, 1)
                    }
                    7..=10 => {
                        let tc = if r.chance(0.9) { t } else { r.hostile() };
                        let h = r.step();
                        let (mut ehn, mut term, mut er, mut lst) = (false, false, false, t);
                        let s = f.fmi3DoStep(
                            c,
                            tc,
                            h,
                            r.chance(0.5),
                            &mut ehn,
                            &mut term,
                            &mut er,
                            &mut lst,
                        );
                        if s <= 2 {
                            t = lst;
                        }
                        s
                    }
                    11 => {
                        let mut st: fmi3FMUState = if !states.is_empty() && r.chance(0.3) {
                            r.pick(&states)
                        } else {
                            null_mut()
                        };
                        let was = st;
                        let s = f.fmi3GetFMUState(c, &mut st);
                        if s == 0 && was.is_null() {
                            states.push(st);
                        }
                        s
                    }
                    12 if !states.is_empty() => {
                        let s = f.fmi3SetFMUState(c, r.pick(&states));
                        let mut tv = t;
                        let vr = 0u32;
                        if f.fmi3GetFloat64(c, &vr, 1, &mut tv, 1) == 0 && tv.is_finite() {
                            t = tv;
                        }
                        s
                    }
                    13 if !states.is_empty() => {
                        let k = r.below(states.len());
                        let mut st = states.swap_remove(k);
                        f.fmi3FreeFMUState(c, &mut st)
                    }
                    14 if !states.is_empty() => {
                        let st = r.pick(&states);
                        let mut n = 0usize;
                        let s = f.fmi3SerializedFMUStateSize(c, st, &mut n);
                        if s != 0 {
                            return s;
                        }
                        let mut buf = vec![0u8; n];
                        let s = f.fmi3SerializeFMUState(c, st, buf.as_mut_ptr(), n);
                        if s == 0 {
                            let mut back: fmi3FMUState = null_mut();
                            if f.fmi3DeserializeFMUState(c, buf.as_ptr(), n, &mut back) == 0 {
                                states.push(back);
                            } else {
                                clock_refused();
                            }
                            blobs.push(buf);
                        }
                        s
                    }
                    15 if !blobs.is_empty() => {
                        let k = r.below(blobs.len());
                        let b = craft(&mut r, &blobs[k]);
                        let mut st: fmi3FMUState = null_mut();
                        let s = f.fmi3DeserializeFMUState(c, b.as_ptr(), b.len(), &mut st);
                        if s == 0 {
                            states.push(st);
                        }
                        s
                    }
                    16 | 17 => {
                        let nu = r.below(3);
                        let nk = r.below(3);
                        let u: Vec<u32> = (0..nu).map(|_| m.vr(&mut r, &m.outputs)).collect();
                        let k: Vec<u32> = (0..nk).map(|_| m.vr(&mut r, &m.inputs)).collect();
                        let (ns, nsens) = if kind == 16 { (nk, nu) } else { (nu, nk) };
                        let seed: Vec<f64> = (0..ns).map(|_| r.value()).collect();
                        let mut out = vec![0.0; nsens];
                        if kind == 16 {
                            f.fmi3GetDirectionalDerivative(
                                c,
                                u.as_ptr(),
                                nu,
                                k.as_ptr(),
                                nk,
                                seed.as_ptr(),
                                ns,
                                out.as_mut_ptr(),
                                nsens,
                            )
                        } else {
                            f.fmi3GetAdjointDerivative(
                                c,
                                u.as_ptr(),
                                nu,
                                k.as_ptr(),
                                nk,
                                seed.as_ptr(),
                                ns,
                                out.as_mut_ptr(),
                                nsens,
                            )
                        }
                    }
                    18 => {
                        let vr = m.vr(&mut r, &m.outputs);
                        let order = r.pick(&[0, 1, 2, 3]);
                        let mut v = 0.0;
                        f.fmi3GetOutputDerivatives(c, &vr, 1, &order, &mut v, 1)
                    }
                    19 => f.fmi3Terminate(c),
                    20 => {
                        t = 0.0;
                        f.fmi3Reset(c)
                    }
                    21 => f.fmi3EnterStepMode(c),
                    22 => f.fmi3EnterEventMode(c),
                    _ => f.fmi3SetDebugLogging(c, r.chance(0.5), 0, null()),
                }
            });
            clock.status(s);
        }
        if r.chance(0.5) {
            for mut st in states.drain(..) {
                unsafe { f.fmi3FreeFMUState(c, &mut st) };
            }
        }
        clock.time(99, || unsafe { f.fmi3FreeInstance(c) });
        rep.panics += sink.panics.get();
        rep.refused_legit += REFUSED.with(|x| x.replace(0));
        rep
    }

    /// One batch of crafted states: a legitimate state of a model after some steps (in
    /// various methods), then mutants of its serialization: deserialize, set, step, read.
    pub fn crafted(f: &Fmi3Binding, models: &[FuzzModel], id: u64) -> Report {
        let mut r = Rng::new(seed(), 4, id);
        let m = &models[model_index(&mut r, models.len())];
        let sink = Sink {
            panics: Cell::new(0),
        };
        let mut rep = Report::default();
        let (name, token, path) = (
            CString::new("crafted").unwrap(),
            CString::new(m.token.clone()).unwrap(),
            CString::new(m.path()).unwrap(),
        );
        let mut clock = Clock { rep: &mut rep };
        unsafe {
            let c = f.fmi3InstantiateCoSimulation(
                name.as_ptr(),
                token.as_ptr(),
                path.as_ptr(),
                false,
                false,
                false,
                false,
                null(),
                0,
                &sink as *const Sink as *mut c_void,
                Some(log3),
                None,
            );
            assert!(!c.is_null());
            // The integrator: every method appears (value 1..=11).
            let method = 1 + r.below(11) as i64;
            let ivr = m.ints[0];
            f.fmi3SetInt64(c, &ivr, 1, &method, 1);
            f.fmi3EnterInitializationMode(c, false, 0.0, 0.0, false, 0.0);
            f.fmi3ExitInitializationMode(c);
            let mut t = 0.0;
            for _ in 0..1 + r.below(5) {
                let (mut a, mut b, mut e, mut lst) = (false, false, false, t);
                f.fmi3DoStep(c, t, 1e-3, true, &mut a, &mut b, &mut e, &mut lst);
                t = lst;
            }
            let mut st: fmi3FMUState = null_mut();
            f.fmi3GetFMUState(c, &mut st);
            let mut n = 0usize;
            f.fmi3SerializedFMUStateSize(c, st, &mut n);
            let mut legit = vec![0u8; n];
            if f.fmi3SerializeFMUState(c, st, legit.as_mut_ptr(), n) != 0 {
                f.fmi3FreeInstance(c);
                return Report::default();
            }
            let mut back: fmi3FMUState = null_mut();
            if f.fmi3DeserializeFMUState(c, legit.as_ptr(), n, &mut back) != 0 {
                verbose("legitimate state refused");
                clock.rep.refused_legit += 1;
            }
            f.fmi3FreeFMUState(c, &mut back);
            for _ in 0..STATES_PER_JOB {
                let b = craft(&mut r, &legit);
                let mut s2: fmi3FMUState = null_mut();
                let d = clock.time(100, || {
                    f.fmi3DeserializeFMUState(c, b.as_ptr(), b.len(), &mut s2)
                });
                clock.status(d);
                if d != 0 {
                    continue;
                }
                let s = clock.time(101, || f.fmi3SetFMUState(c, s2));
                clock.status(s);
                if s == 0 {
                    let mut tc = 0.0;
                    let vr = 0u32;
                    f.fmi3GetFloat64(c, &vr, 1, &mut tc, 1);
                    for _ in 0..3 {
                        let (mut a, mut bb, mut e, mut lst) = (false, false, false, tc);
                        let s = clock.time(102, || {
                            f.fmi3DoStep(c, tc, 1e-3, true, &mut a, &mut bb, &mut e, &mut lst)
                        });
                        clock.status(s);
                        tc = lst;
                    }
                    let mut y = vec![0.0; m.outputs.len()];
                    let s = clock.time(103, || {
                        f.fmi3GetFloat64(
                            c,
                            m.outputs.as_ptr(),
                            m.outputs.len(),
                            y.as_mut_ptr(),
                            y.len(),
                        )
                    });
                    clock.status(s);
                    clock.rep.crafted_accepted += 1;
                    // Back to the legitimate state for the next mutant (the instance may be
                    // in the Error state after a failed step: reset first).
                    f.fmi3Reset(c);
                    f.fmi3EnterInitializationMode(c, false, 0.0, 0.0, false, 0.0);
                    f.fmi3ExitInitializationMode(c);
                    f.fmi3SetFMUState(c, st);
                }
                f.fmi3FreeFMUState(c, &mut s2);
            }
            f.fmi3FreeInstance(c);
        }
        rep.panics += sink.panics.get();
        rep
    }
}

/// Crafted states per forked job (one legitimate state each).
const STATES_PER_JOB: u64 = 20;

// ------------------------------------------------------------------------ model files

/// A mutant of a model file: hostile numbers, deleted or duplicated lines, byte noise, deep
/// nesting.
fn mutate_model(r: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for _ in 0..1 + r.below(4) {
        let i = r.below(lines.len());
        match r.below(7) {
            0 | 1 => {
                // Replace a number on the line by a hostile one.
                let hostile = r.pick(&[
                    "1e308",
                    "-1e308",
                    "-1",
                    "0",
                    "1e-300",
                    "nan",
                    "inf",
                    "-0.0",
                    "1e170",
                    "\"1e308*10\"",
                    "\"sqrt(-1)\"",
                    "\"1/0\"",
                ]);
                let l = &lines[i];
                if let Some(p) = l.find(|c: char| c.is_ascii_digit()) {
                    let end = l[p..]
                        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == '-'))
                        .map_or(l.len(), |e| p + e);
                    lines[i] = format!("{}{}{}", &l[..p], hostile, &l[end..]);
                }
            }
            2 => {
                lines.remove(i);
            }
            3 => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            4 => {
                let depth = r.pick(&[50, 99, 100, 101, 3000, 30_000]);
                let l = &lines[i];
                if let Some((k, _)) = l.split_once(" = ") {
                    lines[i] = format!("{k} = \"{}1{}\"", "(".repeat(depth), ")".repeat(depth));
                }
            }
            5 => {
                let mut b = lines[i].clone().into_bytes();
                if !b.is_empty() {
                    let j = r.below(b.len());
                    b[j] = r.pick(b"[]{}=\"#,.\\\n0-");
                }
                lines[i] = String::from_utf8_lossy(&b).into_owned();
            }
            _ => {
                let opens = "[".repeat(r.pick(&[10, 200, 5000]));
                lines.insert(i, format!("x = {opens}"));
            }
        }
    }
    lines.join("\n")
}

fn model_job(models: &[FuzzModel], id: u64) -> Report {
    let mut r = Rng::new(seed(), 5, id);
    let m = &models[r.below(models.len())];
    let text = mutate_model(&mut r, &m.text);
    let mut rep = Report::default();
    let clock = Clock { rep: &mut rep };
    // On a 1 MiB thread, like a host's (the FMU parses the model at instantiation).
    let ok = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            let mut rep = Report::default();
            let mut clock = Clock { rep: &mut rep };
            let spec = clock.time(200, || {
                mbsfmu::mbs::load_model_str(&text, Path::new("model.toml"))
            });
            if let Ok(spec) = spec {
                let spec = std::sync::Arc::new(spec);
                clock.time(201, || {
                    if let Ok(mut sys) = mbsfmu::mbs::system::System::new(spec.clone()) {
                        let _ = sys.initial_state(spec.experiment.start);
                    }
                });
            }
            rep
        })
        .unwrap()
        .join();
    match ok {
        Ok(inner) => {
            clock.rep.calls += inner.calls;
            clock.rep.max_ns = clock.rep.max_ns.max(inner.max_ns);
            clock.rep.slow += inner.slow;
        }
        // A panic in the loader or the engine (not behind an FMI boundary): count it.
        Err(_) => clock.rep.panics += 1,
    }
    rep
}

// ------------------------------------------------------------------------ the tests

#[test]
fn fmi2_call_sequences() {
    let models = models();
    let f = fmi2_fuzz::binding();
    let n = env_count("MBSFMU_FUZZ_SEQUENCES", 5000);
    let s = campaign(n, 250, &|id| fmi2_fuzz::sequence(&f, &models, id));
    s.assert_clean("FMI 2 sequences");
    assert_eq!(s.jobs, n);
}

/// Replays one job in this process with a trace of its calls (`MBSFMU_FUZZ_REPLAY=2:1157` or
/// `3:1477`; the seed as in the campaign): for a job the campaign reported.
#[test]
#[ignore]
fn replay() {
    std::env::set_var("MBSFMU_FUZZ_TRACE", "1");
    let spec = std::env::var("MBSFMU_FUZZ_REPLAY").expect("MBSFMU_FUZZ_REPLAY=version:job");
    let (v, id) = spec.split_once(':').expect("version:job");
    let id: u64 = id.parse().unwrap();
    let models = models();
    let rep = if v == "2" {
        fmi2_fuzz::sequence(&fmi2_fuzz::binding(), &models, id)
    } else {
        fmi3_fuzz::sequence(&fmi3_fuzz::binding(), &models, id)
    };
    eprintln!("replayed: {} calls", rep.calls);
}

#[test]
fn fmi3_call_sequences() {
    let models = models();
    let f = fmi3_fuzz::binding();
    let n = env_count("MBSFMU_FUZZ_SEQUENCES", 5000);
    let s = campaign(n, 250, &|id| fmi3_fuzz::sequence(&f, &models, id));
    s.assert_clean("FMI 3 sequences");
    assert_eq!(s.jobs, n);
}

#[test]
fn crafted_serialized_states() {
    let models = models();
    let f = fmi3_fuzz::binding();
    let n = env_count("MBSFMU_FUZZ_STATES", 2000).div_ceil(STATES_PER_JOB);
    let s = campaign(n, 10, &|id| fmi3_fuzz::crafted(&f, &models, id));
    s.assert_clean("crafted states");
    assert!(s.jobs * STATES_PER_JOB >= 2000.min(n * STATES_PER_JOB));
}

#[test]
fn mutated_model_files() {
    let models = models();
    let n = env_count("MBSFMU_FUZZ_MODELS", 1000);
    let s = campaign(n, 200, &|id| model_job(&models, id));
    s.assert_clean("model files");
}

#[test]
fn the_matrix_finder_and_reseal_reproduce_the_overflow_payload() {
    // The crafting itself: a DMatrix serialized by postcard is found, and the wrapped
    // dimensions multiply to the stored count modulo 2^64.
    let m = nalgebra::DMatrix::<f64>::zeros(3, 4);
    let p = postcard::to_stdvec(&m).unwrap();
    let found = matrices(&p);
    assert_eq!(found.len(), 1);
    let (_, _, l, r, c) = found[0];
    assert_eq!((l, r, c), (12, 3, 4));
    let c2 = (1u64 << 40) | 1;
    let r2 = 12u64.wrapping_mul(inv_odd(c2));
    assert_eq!(r2.wrapping_mul(c2), 12);
    assert!(r2.checked_mul(c2).is_none());
}
