//! Shared helpers of the C ABI tests: locate the cdylib built with the tests, make an FMU-like
//! resources folder, collect log messages.
#![allow(dead_code)]

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The `libmbsfmu.so` cargo built for this test run: `cargo test` leaves it in `deps/` next to
/// the test binary (same profile and features); `cargo build` puts it one level up.
pub fn lib_path() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("target/<profile>/deps");
    for p in [
        deps.join("libmbsfmu.so"),
        deps.parent()
            .expect("target/<profile>")
            .join("libmbsfmu.so"),
    ] {
        if p.is_file() {
            return p;
        }
    }
    panic!("libmbsfmu.so not found next to {}", exe.display());
}

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "mbsfmu-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A particle on a spring–damper (free length 1) to the point `u − 1` of a base moved along x
/// by the input `u` (1-D motion, no gravity): `m ẍ = −k (x − u) − c (ẋ − u̇)`, closed forms in
/// [`step_response`] and [`sine_response`].
pub const OSCILLATOR: &str = r#"
[model]
name = "oscillator"
description = "Base-excited spring-mass-damper (C ABI tests)"
gravity = [0.0, 0.0, 0.0]

[experiment]
start = 0.0
stop = 10.0
tolerance = 1e-6
step = 0.01

[solver]
integrator = "dopri5"
rtol = 1e-7
atol = 1e-9

[[parameters]]
name = "m"
value = 1.0
unit = "kg"
description = "Mass"

[[parameters]]
name = "k"
value = 100.0
unit = "N/m"
description = "Stiffness"

[[parameters]]
name = "c"
value = 2.0
unit = "N.s/m"
description = "Damping"

[[inputs]]
name = "u"
unit = "m"
start = 0.0
description = "Base position"

[[frames]]
name = "base"
position = [{ input = "u" }, 0.0, 0.0]

[[bodies]]
name = "mass"
type = "particle"
mass = "m"
position = [0.0, 0.0, 0.0]

[[forces]]
name = "spring"
type = "spring_damper"
body1 = "base"
point1 = [-1.0, 0.0, 0.0]
body2 = "mass"
point2 = [0.0, 0.0, 0.0]
stiffness = "k"
damping = "c"
free_length = 1.0

[[outputs]]
name = "x"
type = "position"
body = "mass"
component = "x"
description = "Position of the mass (0 at rest with u = 0)"

[[outputs]]
name = "v"
type = "velocity"
body = "mass"
component = "x"

[[outputs]]
name = "a"
type = "acceleration"
body = "mass"
component = "x"

[[outputs]]
name = "force"
type = "element_force"
force = "spring"
unit = "N"
"#;

/// An FMU-like folder `<tmp>/unpacked fmu/resources/model.toml` and its token (computed by
/// the packager's function). `extra` is appended to the model file (changing the token).
pub struct Resources {
    pub dir: TempDir,
    pub resources: PathBuf,
    pub token: String,
}

impl Resources {
    pub fn oscillator(extra: &str) -> Resources {
        Resources::from_text(&format!("{OSCILLATOR}\n# {extra}\n"))
    }

    /// The oscillator with its input held over each step (`reconstruction = "hold"`): a
    /// sample acts on the outputs at the instant it is set.
    pub fn oscillator_hold() -> Resources {
        let text = OSCILLATOR.replace(
            "description = \"Base position\"",
            "description = \"Base position\"\nreconstruction = \"hold\"",
        );
        assert_ne!(text, OSCILLATOR);
        Resources::from_text(&text)
    }

    /// The oscillator with its damping a calculated parameter, `c = 2·0.1·sqrt(k m)` (2 N·s/m
    /// with the defaults), and its variable table.
    pub fn oscillator_calculated() -> (Resources, mbsfmu::description::VariableTable) {
        let text = OSCILLATOR.replace(
            "value = 2.0\nunit = \"N.s/m\"",
            "value = \"2*0.1*sqrt(k*m)\"\nunit = \"N.s/m\"",
        );
        assert_ne!(text, OSCILLATOR);
        let spec = mbsfmu::mbs::load_model_str(&text, Path::new("model.toml")).unwrap();
        let table = mbsfmu::description::VariableTable::from_spec(&spec);
        (Resources::from_text(&text), table)
    }

    /// A model of `models/` (one file, no data files) as the exporter packs it, after `edit`
    /// of its text; with its variable table and spec.
    pub fn gallery(
        name: &str,
        edit: impl FnOnce(&str) -> String,
    ) -> (
        Resources,
        mbsfmu::description::VariableTable,
        mbsfmu::mbs::ModelSpec,
    ) {
        let model = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("models")
            .join(format!("{name}.toml"));
        let text = edit(&std::fs::read_to_string(&model).unwrap());
        let r = Resources::from_text(&text);
        let spec = mbsfmu::mbs::load_model(&r.resources.join("model.toml")).unwrap();
        assert_eq!(spec.source_files.len(), 1, "{name} reads other files");
        let table = mbsfmu::description::VariableTable::from_spec(&spec);
        (r, table, spec)
    }

    /// A model file's text as the exporter packs it.
    pub fn from_text(text: &str) -> Resources {
        let dir = TempDir::new("res");
        // A space in the path exercises the percent-encoding of FMI 2 URIs.
        let resources = dir.0.join("unpacked fmu").join("resources");
        std::fs::create_dir_all(&resources).unwrap();
        std::fs::write(resources.join("model.toml"), text).unwrap();
        let model = resources.join("model.toml");
        let spec = mbsfmu::mbs::load_model(&model).expect("model loads");
        let token = mbsfmu::description::token::model_token_of(&model, &spec.source_files).unwrap();
        Resources {
            dir,
            resources,
            token,
        }
    }

    /// Writes `resources/resolved_model.bin` as `mbsfmu export` packs it, from `spec` (the
    /// model resolved from `model.toml`, or another one, to show which the FMU reads).
    pub fn write_resolved(&self, spec: Option<&mbsfmu::mbs::ModelSpec>) -> Vec<u8> {
        let model = self.resources.join("model.toml");
        let loaded = mbsfmu::mbs::load_model(&model).expect("model loads");
        let bytes = mbsfmu::mbs::resolved::encode(spec.unwrap_or(&loaded), &model, &self.token)
            .expect("encodes");
        std::fs::write(
            self.resources.join(mbsfmu::mbs::resolved::FILE_NAME),
            &bytes,
        )
        .unwrap();
        bytes
    }

    /// FMI 2 `file:` URI with percent-encoding.
    pub fn uri(&self) -> String {
        let s = self.resources.to_str().unwrap();
        format!("file://{}/", s.replace('%', "%25").replace(' ', "%20"))
    }

    /// FMI 3 plain path with a trailing separator.
    pub fn path(&self) -> String {
        format!("{}/", self.resources.display())
    }
}

/// Value references of the oscillator model, looked up by name in the variable table.
pub fn vr(name: &str) -> u32 {
    let spec = mbsfmu::mbs::load_model_str(OSCILLATOR, Path::new("model.toml"))
        .expect("oscillator model loads");
    let table = mbsfmu::description::VariableTable::from_spec(&spec);
    table
        .by_name(name)
        .unwrap_or_else(|| panic!("no variable {name}"))
        .value_reference
}

/// Log messages `(status, category, message)` of one instance.
#[derive(Default)]
pub struct LogSink {
    pub messages: Mutex<Vec<(u32, String, String)>>,
}

impl LogSink {
    pub fn contains(&self, status: u32, needle: &str) -> bool {
        self.messages
            .lock()
            .unwrap()
            .iter()
            .any(|(s, _, m)| *s == status && m.contains(needle))
    }
    /// Messages of `status` that contain `needle`.
    pub fn count(&self, status: u32, needle: &str) -> usize {
        self.messages
            .lock()
            .unwrap()
            .iter()
            .filter(|(s, _, m)| *s == status && m.contains(needle))
            .count()
    }
    pub fn dump(&self) -> String {
        self.messages
            .lock()
            .unwrap()
            .iter()
            .map(|(s, c, m)| format!("[{s} {c}] {m}\n"))
            .collect()
    }
    pub fn clear(&self) {
        self.messages.lock().unwrap().clear();
    }
}

fn text(p: *const c_char) -> String {
    if p.is_null() {
        "<NULL>".into()
    } else {
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// FMI 2 logger. The real type is variadic; stable Rust cannot define variadic functions, so
/// this receives the format and its first argument (the same registers on x86_64 System V).
/// It checks that the FMU passes `"%s"` as the format and the text as the argument.
pub unsafe extern "C" fn fmi2_logger(
    env: *mut c_void,
    _name: *const c_char,
    status: u32,
    category: *const c_char,
    fmt: *const c_char,
    arg: *const c_char,
) {
    let sink = unsafe { &*(env as *const LogSink) };
    let fmt = text(fmt);
    let msg = if fmt == "%s" {
        text(arg)
    } else {
        format!("FORMAT NOT %s: {fmt}")
    };
    sink.messages
        .lock()
        .unwrap()
        .push((status, text(category), msg));
}

pub unsafe extern "C" fn fmi3_logger(
    env: *mut c_void,
    status: u32,
    category: *const c_char,
    message: *const c_char,
) {
    let sink = unsafe { &*(env as *const LogSink) };
    sink.messages
        .lock()
        .unwrap()
        .push((status, text(category), text(message)));
}

pub fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// Closed-form response of `x'' + 2ζω0 x' + ω0² x = ω0² u + 2ζω0 u'` (the stand-in with m = 1)
/// to a unit-free step `u = U` at t = 0 from rest at 0.
pub fn step_response(k: f64, c: f64, u: f64, t: f64) -> f64 {
    let w0 = k.sqrt();
    let zeta = c / (2.0 * w0);
    let wd = w0 * (1.0 - zeta * zeta).sqrt();
    u * (1.0 - (-zeta * w0 * t).exp() * ((wd * t).cos() + zeta * w0 / wd * (wd * t).sin()))
}

/// Closed-form response to `u = A sin(ω t)` from rest at 0 (m = 1).
pub fn sine_response(k: f64, c: f64, a: f64, w: f64, t: f64) -> f64 {
    // Particular solution Im[X e^{iωt}], X = (k + i c ω) A / (k − ω² + i c ω).
    let (nr, ni) = (k * a, c * w * a);
    let (dr, di) = (k - w * w, c * w);
    let den = dr * dr + di * di;
    let (xr, xi) = ((nr * dr + ni * di) / den, (ni * dr - nr * di) / den);
    let xp = |t: f64| xr * (w * t).sin() + xi * (w * t).cos();
    let dxp = |t: f64| xr * w * (w * t).cos() - xi * w * (w * t).sin();
    let w0 = k.sqrt();
    let zeta = c / (2.0 * w0);
    let wd = w0 * (1.0 - zeta * zeta).sqrt();
    let c1 = -xp(0.0);
    let c2 = (-dxp(0.0) + zeta * w0 * c1) / wd;
    xp(t) + (-zeta * w0 * t).exp() * (c1 * (wd * t).cos() + c2 * (wd * t).sin())
}

/// `text` (a model file) with input `input`'s reconstruction set to `mode`.
pub fn with_reconstruction(text: &str, input: &str, mode: &str) -> String {
    let key = format!("name = \"{input}\"\n");
    assert_eq!(text.matches(&key).count(), 1, "input {input}");
    text.replace(&key, &format!("{key}reconstruction = \"{mode}\"\n"))
}
