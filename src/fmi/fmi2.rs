//! FMI 2.0 Co-Simulation: the 34 functions of `fmi2Functions.h` for Co-Simulation, plus the
//! Model Exchange ones (which return fmi2Error: this FMU is Co-Simulation only).
//! The contract of every function is the FMI 2.0 standard's.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use super::*;
use crate::cosim::{communication_point_tolerance, time_spacing, Advance, SetPhase};
use crate::mbs::error::show_number as show_real;
use fmi_sys::fmi2::*;
use std::ptr::null_mut;

const V: FmiVersion = FmiVersion::V2;

// Legal states per function (FMI 2.0 Co-Simulation state machine).
const M_ANY: u32 = st::ANY;
const M_GET: u32 = st::INIT_MODE | st::STEP | st::STEP_FAILED | st::TERMINATED | st::ERROR;
const M_SET: u32 = st::INSTANTIATED | st::INIT_MODE | st::STEP;
const M_OUT_DER: u32 = st::STEP | st::STEP_FAILED | st::TERMINATED | st::ERROR;
const M_STATUS: u32 = st::STEP | st::STEP_FAILED | st::TERMINATED;

#[inline]
unsafe fn b2(
    c: fmi2Component,
    func: &str,
    mask: u32,
    body: impl FnOnce(&Instance, &mut Core) -> BodyResult,
) -> fmi2Status {
    // SAFETY: `c` comes from the importer; see `boundary`.
    unsafe { boundary(c, V, func, mask, body) as fmi2Status }
}

fn phase(core: &Core) -> SetPhase {
    if core.state == st::STEP {
        SetPhase::Stepping
    } else {
        SetPhase::Setup
    }
}

/// For types this FMU has no variables of: every value reference is an error.
fn no_variables(core: &Core, vrs: &[u32], ty: &str) -> BodyResult {
    match vrs.first() {
        None => Ok(Status::Ok),
        Some(&vr) => match core.table.get(vr) {
            Some(v) => Err(Fail::arg(format!("variable `{}` (value reference {vr}) is not of type {ty}; this FMU has no {ty} variables", v.name))),
            None => Err(Fail::arg(format!("unknown value reference {vr}"))),
        },
    }
}

// ---------------------------------------------------------------- inquiry, logging

#[no_mangle]
pub extern "C" fn fmi2GetTypesPlatform() -> *const c_char {
    c"default".as_ptr()
}
const _: fmi2GetTypesPlatformTYPE = Some(fmi2GetTypesPlatform);

#[no_mangle]
pub extern "C" fn fmi2GetVersion() -> *const c_char {
    c"2.0".as_ptr()
}
const _: fmi2GetVersionTYPE = Some(fmi2GetVersion);

#[no_mangle]
pub unsafe extern "C" fn fmi2SetDebugLogging(
    c: fmi2Component,
    loggingOn: fmi2Boolean,
    nCategories: usize,
    categories: *const fmi2String,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2SetDebugLogging", M_ANY, |inst, _| {
            Ok(inst.set_debug_logging(loggingOn != 0, nCategories, categories))
        })
    }
}
const _: fmi2SetDebugLoggingTYPE = Some(fmi2SetDebugLogging);

// ---------------------------------------------------------------- life cycle

#[no_mangle]
pub unsafe extern "C" fn fmi2Instantiate(
    instanceName: fmi2String,
    fmuType: fmi2Type,
    fmuGUID: fmi2String,
    fmuResourceLocation: fmi2String,
    functions: *const fmi2CallbackFunctions,
    visible: fmi2Boolean,
    loggingOn: fmi2Boolean,
) -> fmi2Component {
    guarded(null_mut(), || unsafe {
        instantiate(
            instanceName,
            fmuType,
            fmuGUID,
            fmuResourceLocation,
            functions,
            visible,
            loggingOn,
        )
    })
}
const _: fmi2InstantiateTYPE = Some(fmi2Instantiate);

unsafe fn instantiate(
    instanceName: fmi2String,
    fmuType: fmi2Type,
    fmuGUID: fmi2String,
    fmuResourceLocation: fmi2String,
    functions: *const fmi2CallbackFunctions,
    _visible: fmi2Boolean,
    loggingOn: fmi2Boolean,
) -> fmi2Component {
    if functions.is_null()
        || !(functions as usize).is_multiple_of(std::mem::align_of::<fmi2CallbackFunctions>())
    {
        return null_mut();
    }
    // SAFETY: non-NULL, aligned, the importer's struct; copied (the standard does not promise
    // it outlives the call in every version).
    let f = unsafe { *functions };
    let logger = Logger::V2(f.logger, Env(f.componentEnvironment));
    // SAFETY: NUL-terminated strings from the importer, or NULL.
    let name = unsafe { c_str_arg(instanceName, "instanceName") };
    let cname = to_cstring(name.as_ref().copied().unwrap_or(""));
    let fail = |msg: String| {
        emit(
            &logger,
            &cname,
            Status::Error,
            "logStatusError",
            &format!("fmi2Instantiate: {msg}"),
        );
        null_mut()
    };
    let name = match name {
        Ok(n) if n.trim().is_empty() => return fail("instanceName is empty".into()),
        Ok(n) => n,
        Err(e) => return fail(e),
    };
    if fmuType != fmi2Type_fmi2CoSimulation {
        return fail(format!(
            "instance `{name}`: this FMU supports Co-Simulation only (fmuType {fmuType})"
        ));
    }
    // SAFETY: as above.
    let guid = match unsafe { c_str_arg(fmuGUID, "fmuGUID") } {
        Ok(g) => g,
        Err(e) => return fail(e),
    };
    // SAFETY: as above.
    let uri = match unsafe { c_str_arg(fmuResourceLocation, "fmuResourceLocation") } {
        Ok(u) => u,
        Err(e) => return fail(format!("{e}; the FMU needs its resources folder")),
    };
    let dir = match resources::fmi2_resource_dir(uri) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let model = match load_model(&dir) {
        Ok(m) => m,
        Err(e) => return fail(format!("cannot load the model: {e}")),
    };
    if guid != model.token {
        return fail(format!(
            "fmuGUID {guid} does not match the packed model's token {}: the modelDescription.xml does not belong to {}",
            model.token,
            dir.join("model.toml").display()
        ));
    }
    let inst = Instance::new(V, cname, logger, loggingOn != 0, model, None);
    inst.log_event(&format!(
        "fmi2Instantiate: instance `{name}` of model `{}` from {}",
        inst.core
            .lock()
            .map(|c| c.spec.name.clone())
            .unwrap_or_default(),
        dir.display()
    ));
    Box::into_raw(inst) as fmi2Component
}

#[no_mangle]
pub unsafe extern "C" fn fmi2FreeInstance(c: fmi2Component) {
    unsafe { free_instance(c, V, "fmi2FreeInstance") }
}
const _: fmi2FreeInstanceTYPE = Some(fmi2FreeInstance);

#[no_mangle]
pub unsafe extern "C" fn fmi2SetupExperiment(
    c: fmi2Component,
    toleranceDefined: fmi2Boolean,
    tolerance: fmi2Real,
    startTime: fmi2Real,
    stopTimeDefined: fmi2Boolean,
    stopTime: fmi2Real,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2SetupExperiment", st::INSTANTIATED, |_, core| {
            core.sim.setup_experiment(
                (toleranceDefined != 0).then_some(tolerance),
                startTime,
                (stopTimeDefined != 0).then_some(stopTime),
            )?;
            core.last_successful_time = startTime;
            Ok(Status::Ok)
        })
    }
}
const _: fmi2SetupExperimentTYPE = Some(fmi2SetupExperiment);

#[no_mangle]
pub unsafe extern "C" fn fmi2EnterInitializationMode(c: fmi2Component) -> fmi2Status {
    unsafe {
        b2(
            c,
            "fmi2EnterInitializationMode",
            st::INSTANTIATED,
            |_, core| {
                core.state = st::INIT_MODE;
                Ok(Status::Ok)
            },
        )
    }
}
const _: fmi2EnterInitializationModeTYPE = Some(fmi2EnterInitializationMode);

#[no_mangle]
pub unsafe extern "C" fn fmi2ExitInitializationMode(c: fmi2Component) -> fmi2Status {
    unsafe {
        b2(
            c,
            "fmi2ExitInitializationMode",
            st::INIT_MODE,
            |inst, core| {
                core.sim
                    .initialize()
                    .map_err(|e| Fail::computation(e.to_string()))?;
                core.state = st::STEP;
                core.last_successful_time = core.sim.time();
                for w in core.sim.advisories() {
                    inst.log(Status::Warning, &format!("fmi2ExitInitializationMode: {w}"));
                }
                inst.log_event(&format!("initialized at t = {}", core.sim.time()));
                Ok(Status::Ok)
            },
        )
    }
}
const _: fmi2ExitInitializationModeTYPE = Some(fmi2ExitInitializationMode);

#[no_mangle]
pub unsafe extern "C" fn fmi2Terminate(c: fmi2Component) -> fmi2Status {
    unsafe {
        b2(c, "fmi2Terminate", st::STEP | st::STEP_FAILED, |_, core| {
            core.state = st::TERMINATED;
            Ok(Status::Ok)
        })
    }
}
const _: fmi2TerminateTYPE = Some(fmi2Terminate);

#[no_mangle]
pub unsafe extern "C" fn fmi2Reset(c: fmi2Component) -> fmi2Status {
    unsafe {
        b2(c, "fmi2Reset", M_ANY, |_, core| {
            core.reset();
            Ok(Status::Ok)
        })
    }
}
const _: fmi2ResetTYPE = Some(fmi2Reset);

// ---------------------------------------------------------------- get / set

#[no_mangle]
pub unsafe extern "C" fn fmi2GetReal(
    c: fmi2Component,
    vr: *const fmi2ValueReference,
    nvr: usize,
    value: *mut fmi2Real,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2GetReal", M_GET, |_, core| {
            let vrs = in_slice(vr, nvr, "vr")?;
            let out = out_slice(value, nvr, "value")?;
            for (o, &r) in out.iter_mut().zip(vrs) {
                *o = core.sim.get_real(r).map_err(CosimError::in_fmi2_terms)?;
            }
            Ok(Status::Ok)
        })
    }
}
const _: fmi2GetRealTYPE = Some(fmi2GetReal);

#[no_mangle]
pub unsafe extern "C" fn fmi2GetInteger(
    c: fmi2Component,
    vr: *const fmi2ValueReference,
    nvr: usize,
    value: *mut fmi2Integer,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2GetInteger", M_GET, |_, core| {
            let vrs = in_slice(vr, nvr, "vr")?;
            let out = out_slice(value, nvr, "value")?;
            for (o, &r) in out.iter_mut().zip(vrs) {
                // Counters saturate at the 32-bit limit of fmi2Integer.
                *o = core
                    .sim
                    .get_integer(r)
                    .map_err(CosimError::in_fmi2_terms)?
                    .clamp(i32::MIN as i64, i32::MAX as i64) as i32;
            }
            Ok(Status::Ok)
        })
    }
}
const _: fmi2GetIntegerTYPE = Some(fmi2GetInteger);

#[no_mangle]
pub unsafe extern "C" fn fmi2GetBoolean(
    c: fmi2Component,
    vr: *const fmi2ValueReference,
    nvr: usize,
    value: *mut fmi2Boolean,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2GetBoolean", M_GET, |_, core| {
            let vrs = in_slice(vr, nvr, "vr")?;
            out_slice(value, nvr, "value")?;
            no_variables(core, vrs, "Boolean")
        })
    }
}
const _: fmi2GetBooleanTYPE = Some(fmi2GetBoolean);

#[no_mangle]
pub unsafe extern "C" fn fmi2GetString(
    c: fmi2Component,
    vr: *const fmi2ValueReference,
    nvr: usize,
    value: *mut fmi2String,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2GetString", M_GET, |_, core| {
            let vrs = in_slice(vr, nvr, "vr")?;
            out_slice(value, nvr, "value")?;
            no_variables(core, vrs, "String")
        })
    }
}
const _: fmi2GetStringTYPE = Some(fmi2GetString);

#[no_mangle]
pub unsafe extern "C" fn fmi2SetReal(
    c: fmi2Component,
    vr: *const fmi2ValueReference,
    nvr: usize,
    value: *const fmi2Real,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2SetReal", M_SET, |inst, core| {
            let vrs = in_slice(vr, nvr, "vr")?;
            let vals = in_slice(value, nvr, "value")?;
            let p = phase(core);
            match core
                .sim
                .set_reals(vrs, vals, p)
                .map_err(CosimError::in_fmi2_terms)?
            {
                Some(w) => {
                    inst.log(Status::Warning, &format!("fmi2SetReal: {w}"));
                    Ok(Status::Warning)
                }
                None => Ok(Status::Ok),
            }
        })
    }
}
const _: fmi2SetRealTYPE = Some(fmi2SetReal);

#[no_mangle]
pub unsafe extern "C" fn fmi2SetInteger(
    c: fmi2Component,
    vr: *const fmi2ValueReference,
    nvr: usize,
    value: *const fmi2Integer,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2SetInteger", M_SET, |_, core| {
            let vrs = in_slice(vr, nvr, "vr")?;
            let vals = in_slice(value, nvr, "value")?;
            let p = phase(core);
            let vals: Vec<i64> = vals.iter().map(|&v| v as i64).collect();
            core.sim
                .set_integers(vrs, &vals, p)
                .map_err(CosimError::in_fmi2_terms)?;
            Ok(Status::Ok)
        })
    }
}
const _: fmi2SetIntegerTYPE = Some(fmi2SetInteger);

#[no_mangle]
pub unsafe extern "C" fn fmi2SetBoolean(
    c: fmi2Component,
    vr: *const fmi2ValueReference,
    nvr: usize,
    value: *const fmi2Boolean,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2SetBoolean", M_SET, |_, core| {
            let vrs = in_slice(vr, nvr, "vr")?;
            in_slice(value, nvr, "value")?;
            no_variables(core, vrs, "Boolean")
        })
    }
}
const _: fmi2SetBooleanTYPE = Some(fmi2SetBoolean);

#[no_mangle]
pub unsafe extern "C" fn fmi2SetString(
    c: fmi2Component,
    vr: *const fmi2ValueReference,
    nvr: usize,
    value: *const fmi2String,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2SetString", M_SET, |_, core| {
            let vrs = in_slice(vr, nvr, "vr")?;
            in_slice(value, nvr, "value")?;
            no_variables(core, vrs, "String")
        })
    }
}
const _: fmi2SetStringTYPE = Some(fmi2SetString);

// ---------------------------------------------------------------- FMU state

#[no_mangle]
pub unsafe extern "C" fn fmi2GetFMUstate(
    c: fmi2Component,
    FMUstate: *mut fmi2FMUstate,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2GetFMUstate", M_ANY, |_, core| {
            fmu_state::get(core, FMUstate)
        })
    }
}
const _: fmi2GetFMUstateTYPE = Some(fmi2GetFMUstate);

#[no_mangle]
pub unsafe extern "C" fn fmi2SetFMUstate(c: fmi2Component, FMUstate: fmi2FMUstate) -> fmi2Status {
    unsafe {
        b2(c, "fmi2SetFMUstate", M_ANY, |inst, core| {
            fmu_state::set(inst, core, FMUstate)
        })
    }
}
const _: fmi2SetFMUstateTYPE = Some(fmi2SetFMUstate);

#[no_mangle]
pub unsafe extern "C" fn fmi2FreeFMUstate(
    c: fmi2Component,
    FMUstate: *mut fmi2FMUstate,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2FreeFMUstate", M_ANY, |_, core| {
            fmu_state::free(core, FMUstate)
        })
    }
}
const _: fmi2FreeFMUstateTYPE = Some(fmi2FreeFMUstate);

#[no_mangle]
pub unsafe extern "C" fn fmi2SerializedFMUstateSize(
    c: fmi2Component,
    FMUstate: fmi2FMUstate,
    size: *mut usize,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2SerializedFMUstateSize", M_ANY, |inst, _| {
            fmu_state::size(inst, FMUstate, size)
        })
    }
}
const _: fmi2SerializedFMUstateSizeTYPE = Some(fmi2SerializedFMUstateSize);

#[no_mangle]
pub unsafe extern "C" fn fmi2SerializeFMUstate(
    c: fmi2Component,
    FMUstate: fmi2FMUstate,
    serializedState: *mut fmi2Byte,
    size: usize,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2SerializeFMUstate", M_ANY, |inst, _| {
            fmu_state::serialize(inst, FMUstate, serializedState as *mut u8, size)
        })
    }
}
const _: fmi2SerializeFMUstateTYPE = Some(fmi2SerializeFMUstate);

#[no_mangle]
pub unsafe extern "C" fn fmi2DeSerializeFMUstate(
    c: fmi2Component,
    serializedState: *const fmi2Byte,
    size: usize,
    FMUstate: *mut fmi2FMUstate,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2DeSerializeFMUstate", M_ANY, |inst, core| {
            fmu_state::deserialize(inst, core, serializedState as *const u8, size, FMUstate)
        })
    }
}
const _: fmi2DeSerializeFMUstateTYPE = Some(fmi2DeSerializeFMUstate);

// ---------------------------------------------------------------- derivatives

#[no_mangle]
pub unsafe extern "C" fn fmi2GetDirectionalDerivative(
    c: fmi2Component,
    vUnknown_ref: *const fmi2ValueReference,
    nUnknown: usize,
    vKnown_ref: *const fmi2ValueReference,
    nKnown: usize,
    dvKnown: *const fmi2Real,
    dvUnknown: *mut fmi2Real,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2GetDirectionalDerivative", M_GET, |_, core| {
            let unknowns = in_slice(vUnknown_ref, nUnknown, "vUnknown_ref")?;
            let knowns = in_slice(vKnown_ref, nKnown, "vKnown_ref")?;
            let seed = in_slice(dvKnown, nKnown, "dvKnown")?;
            let out = out_slice(dvUnknown, nUnknown, "dvUnknown")?;
            if seed.iter().any(|s| !s.is_finite()) {
                return Err(Fail::arg("dvKnown has a non-finite entry"));
            }
            let jac = core.sim.output_input_jacobian(unknowns, knowns)?;
            let r = jac * nalgebra::DVector::from_column_slice(seed);
            out.copy_from_slice(r.as_slice());
            Ok(Status::Ok)
        })
    }
}
const _: fmi2GetDirectionalDerivativeTYPE = Some(fmi2GetDirectionalDerivative);

#[no_mangle]
pub unsafe extern "C" fn fmi2SetRealInputDerivatives(
    c: fmi2Component,
    vr: *const fmi2ValueReference,
    nvr: usize,
    order: *const fmi2Integer,
    value: *const fmi2Real,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2SetRealInputDerivatives", M_SET, |_, core| {
            let vrs = in_slice(vr, nvr, "vr")?;
            let orders = in_slice(order, nvr, "order")?;
            let vals = in_slice(value, nvr, "value")?;
            for k in 0..nvr {
                core.sim
                    .set_input_derivative(vrs[k], orders[k] as i64, vals[k])?;
            }
            Ok(Status::Ok)
        })
    }
}
const _: fmi2SetRealInputDerivativesTYPE = Some(fmi2SetRealInputDerivatives);

#[no_mangle]
pub unsafe extern "C" fn fmi2GetRealOutputDerivatives(
    c: fmi2Component,
    vr: *const fmi2ValueReference,
    nvr: usize,
    order: *const fmi2Integer,
    value: *mut fmi2Real,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2GetRealOutputDerivatives", M_OUT_DER, |_, core| {
            let vrs = in_slice(vr, nvr, "vr")?;
            let orders = in_slice(order, nvr, "order")?;
            let out = out_slice(value, nvr, "value")?;
            for k in 0..nvr {
                out[k] = core.sim.output_derivative(vrs[k], orders[k] as i64)?;
            }
            Ok(Status::Ok)
        })
    }
}
const _: fmi2GetRealOutputDerivativesTYPE = Some(fmi2GetRealOutputDerivatives);

// ---------------------------------------------------------------- stepping

#[no_mangle]
pub unsafe extern "C" fn fmi2DoStep(
    c: fmi2Component,
    currentCommunicationPoint: fmi2Real,
    communicationStepSize: fmi2Real,
    _noSetFMUStatePriorToCurrentPoint: fmi2Boolean,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2DoStep", st::STEP, |inst, core| {
            match do_step(core, currentCommunicationPoint, communicationStepSize, None)? {
                Advance::Completed => {
                    core.last_step_status = Status::Ok;
                    core.last_successful_time = core.sim.time();
                    Ok(Status::Ok)
                }
                Advance::Discard {
                    last_successful_time,
                    ..
                } => {
                    core.state = st::STEP_FAILED;
                    core.last_step_status = Status::Discard;
                    core.last_successful_time = last_successful_time;
                    inst.log(
                    Status::Discard,
                    &format!("fmi2DoStep: the integrator could not reach t = {} and stopped at t = {} ({}); restore a saved state (fmi2SetFMUstate) and retry with a smaller step", show_real(currentCommunicationPoint + communicationStepSize), show_real(last_successful_time), core.sim.last_failure().unwrap_or_else(|| "no reason given".into())),
                );
                    Ok(Status::Discard)
                }
                // Early return is an FMI 3 feature and never switched on for FMI 2 instances.
                Advance::EarlyReturn { event } => Err(Fail::computation(format!(
                    "internal: early return at t = {} in an FMI 2 instance",
                    event.t
                ))),
            }
        })
    }
}
const _: fmi2DoStepTYPE = Some(fmi2DoStep);

/// The common part of doStep: argument checks, timing, advancing.
pub(crate) fn do_step(
    core: &mut Core,
    tc: f64,
    h: f64,
    intermediate: Option<crate::cosim::InputCallback<'_>>,
) -> Result<Advance, Fail> {
    if !(h.is_finite() && h > 0.0) {
        return Err(Fail::arg(format!(
            "communication step size {h} must be positive and finite"
        )));
    }
    if !tc.is_finite() {
        return Err(Fail::arg(format!("communication point {tc} is not finite")));
    }
    let t = core.sim.time();
    let tol = communication_point_tolerance(t, h);
    if (tc - t).abs() > tol {
        return Err(Fail::arg(format!(
            "communication point {} differs from the instance time {} by {:.3e} s, more than \
             rounding allows ({tol:.3e} s for a step of {} s): continue from the instance time",
            show_real(tc),
            show_real(t),
            tc - t,
            show_real(h)
        )));
    }
    // Within the tolerance the step runs from the instance time to `tc + h`; a step that
    // would end there or before it cannot.
    if tc + h <= t {
        return Err(Fail::arg(format!(
            "the step from {} of size {} ends at {}, not after the instance time {} (the \
             communication point is taken as the instance time within rounding, and the step \
             runs from there to t + h)",
            show_real(tc),
            show_real(h),
            show_real(tc + h),
            show_real(t)
        )));
    }
    // A step below the time resolution at `tc` (the spacing of doubles there) would not
    // advance the time, or advance it by another amount than asked.
    let advanced = (tc + h) - tc;
    if (advanced - h).abs() > 1e-3 * h {
        let ulp = time_spacing(tc);
        return Err(Fail::arg(format!(
            "communication step size {h} is below the time resolution at t = {tc}: doubles there are {ulp:e} s apart, so t + h = {}; use a step of at least {:e} s (1000 times the resolution) or a start time nearer 0",
            tc + h,
            1e3 * ulp
        )));
    }
    // `advance_to` times itself into `stats.cpu_time` (cheaply: no system call in a short
    // call).
    let r = core.sim.advance_to(tc + h, intermediate);
    r.map_err(|e| match e {
        // `InvalidValue`, `FileSetting`: a step the work budget cannot cover
        // (`check_step_budget`).
        CosimError::PastStop { .. }
        | CosimError::InvalidStepSize(_)
        | CosimError::InvalidValue { .. }
        | CosimError::FileSetting { .. } => Fail::arg(e.to_string()),
        e => Fail::computation(e.to_string()),
    })
}

#[no_mangle]
pub unsafe extern "C" fn fmi2CancelStep(c: fmi2Component) -> fmi2Status {
    unsafe {
        b2(c, "fmi2CancelStep", M_ANY, |_, _| {
            Err(Fail::arg(
                "no asynchronous step is in progress (fmi2DoStep never returns fmi2Pending)",
            ))
        })
    }
}
const _: fmi2CancelStepTYPE = Some(fmi2CancelStep);

#[no_mangle]
pub unsafe extern "C" fn fmi2GetStatus(
    c: fmi2Component,
    s: fmi2StatusKind,
    value: *mut fmi2Status,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2GetStatus", M_STATUS, |_, core| {
            let out = out_ref(value, "value")?;
            if s != fmi2StatusKind_fmi2DoStepStatus {
                return Err(Fail::unavailable(format!("status kind {s} is not available through fmi2GetStatus (only fmi2DoStepStatus)")));
            }
            *out = core.last_step_status as fmi2Status;
            Ok(Status::Ok)
        })
    }
}
const _: fmi2GetStatusTYPE = Some(fmi2GetStatus);

#[no_mangle]
pub unsafe extern "C" fn fmi2GetRealStatus(
    c: fmi2Component,
    s: fmi2StatusKind,
    value: *mut fmi2Real,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2GetRealStatus", M_STATUS, |_, core| {
            let out = out_ref(value, "value")?;
            if s != fmi2StatusKind_fmi2LastSuccessfulTime {
                return Err(Fail::unavailable(format!("status kind {s} is not available through fmi2GetRealStatus (only fmi2LastSuccessfulTime)")));
            }
            *out = core.last_successful_time;
            Ok(Status::Ok)
        })
    }
}
const _: fmi2GetRealStatusTYPE = Some(fmi2GetRealStatus);

#[no_mangle]
pub unsafe extern "C" fn fmi2GetIntegerStatus(
    c: fmi2Component,
    s: fmi2StatusKind,
    value: *mut fmi2Integer,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2GetIntegerStatus", M_STATUS, |_, _| {
            out_ref(value, "value")?;
            Err(Fail::unavailable(format!(
                "status kind {s}: there is no integer status"
            )))
        })
    }
}
const _: fmi2GetIntegerStatusTYPE = Some(fmi2GetIntegerStatus);

#[no_mangle]
pub unsafe extern "C" fn fmi2GetBooleanStatus(
    c: fmi2Component,
    s: fmi2StatusKind,
    value: *mut fmi2Boolean,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2GetBooleanStatus", M_STATUS, |_, _| {
            let out = out_ref(value, "value")?;
            if s != fmi2StatusKind_fmi2Terminated {
                return Err(Fail::unavailable(format!("status kind {s} is not available through fmi2GetBooleanStatus (only fmi2Terminated)")));
            }
            // The FMU never asks to end the simulation.
            *out = 0;
            Ok(Status::Ok)
        })
    }
}
const _: fmi2GetBooleanStatusTYPE = Some(fmi2GetBooleanStatus);

#[no_mangle]
pub unsafe extern "C" fn fmi2GetStringStatus(
    c: fmi2Component,
    s: fmi2StatusKind,
    value: *mut fmi2String,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2GetStringStatus", M_STATUS, |_, _| {
            out_ref(value, "value")?;
            Err(Fail::unavailable(format!(
                "status kind {s}: there is no string status (no asynchronous steps)"
            )))
        })
    }
}
const _: fmi2GetStringStatusTYPE = Some(fmi2GetStringStatus);

// ---------------------------------------------------------------- Model Exchange (unsupported)

const NO_ME: &str = "not supported: this FMU implements Co-Simulation only";

#[no_mangle]
pub unsafe extern "C" fn fmi2EnterEventMode(c: fmi2Component) -> fmi2Status {
    unsafe { b2(c, "fmi2EnterEventMode", M_ANY, |_, _| Err(Fail::arg(NO_ME))) }
}
const _: fmi2EnterEventModeTYPE = Some(fmi2EnterEventMode);

#[no_mangle]
pub unsafe extern "C" fn fmi2NewDiscreteStates(
    c: fmi2Component,
    _info: *mut fmi2EventInfo,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2NewDiscreteStates", M_ANY, |_, _| {
            Err(Fail::arg(NO_ME))
        })
    }
}
const _: fmi2NewDiscreteStatesTYPE = Some(fmi2NewDiscreteStates);

#[no_mangle]
pub unsafe extern "C" fn fmi2EnterContinuousTimeMode(c: fmi2Component) -> fmi2Status {
    unsafe {
        b2(c, "fmi2EnterContinuousTimeMode", M_ANY, |_, _| {
            Err(Fail::arg(NO_ME))
        })
    }
}
const _: fmi2EnterContinuousTimeModeTYPE = Some(fmi2EnterContinuousTimeMode);

#[no_mangle]
pub unsafe extern "C" fn fmi2CompletedIntegratorStep(
    c: fmi2Component,
    _noSetPrior: fmi2Boolean,
    _enterEventMode: *mut fmi2Boolean,
    _terminate: *mut fmi2Boolean,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2CompletedIntegratorStep", M_ANY, |_, _| {
            Err(Fail::arg(NO_ME))
        })
    }
}
const _: fmi2CompletedIntegratorStepTYPE = Some(fmi2CompletedIntegratorStep);

#[no_mangle]
pub unsafe extern "C" fn fmi2SetTime(c: fmi2Component, _time: fmi2Real) -> fmi2Status {
    unsafe { b2(c, "fmi2SetTime", M_ANY, |_, _| Err(Fail::arg(NO_ME))) }
}
const _: fmi2SetTimeTYPE = Some(fmi2SetTime);

#[no_mangle]
pub unsafe extern "C" fn fmi2SetContinuousStates(
    c: fmi2Component,
    _x: *const fmi2Real,
    _nx: usize,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2SetContinuousStates", M_ANY, |_, _| {
            Err(Fail::arg(NO_ME))
        })
    }
}
const _: fmi2SetContinuousStatesTYPE = Some(fmi2SetContinuousStates);

#[no_mangle]
pub unsafe extern "C" fn fmi2GetDerivatives(
    c: fmi2Component,
    _d: *mut fmi2Real,
    _nx: usize,
) -> fmi2Status {
    unsafe { b2(c, "fmi2GetDerivatives", M_ANY, |_, _| Err(Fail::arg(NO_ME))) }
}
const _: fmi2GetDerivativesTYPE = Some(fmi2GetDerivatives);

#[no_mangle]
pub unsafe extern "C" fn fmi2GetEventIndicators(
    c: fmi2Component,
    _z: *mut fmi2Real,
    _ni: usize,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2GetEventIndicators", M_ANY, |_, _| {
            Err(Fail::arg(NO_ME))
        })
    }
}
const _: fmi2GetEventIndicatorsTYPE = Some(fmi2GetEventIndicators);

#[no_mangle]
pub unsafe extern "C" fn fmi2GetContinuousStates(
    c: fmi2Component,
    _x: *mut fmi2Real,
    _nx: usize,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2GetContinuousStates", M_ANY, |_, _| {
            Err(Fail::arg(NO_ME))
        })
    }
}
const _: fmi2GetContinuousStatesTYPE = Some(fmi2GetContinuousStates);

#[no_mangle]
pub unsafe extern "C" fn fmi2GetNominalsOfContinuousStates(
    c: fmi2Component,
    _x: *mut fmi2Real,
    _nx: usize,
) -> fmi2Status {
    unsafe {
        b2(c, "fmi2GetNominalsOfContinuousStates", M_ANY, |_, _| {
            Err(Fail::arg(NO_ME))
        })
    }
}
const _: fmi2GetNominalsOfContinuousStatesTYPE = Some(fmi2GetNominalsOfContinuousStates);
