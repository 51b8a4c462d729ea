//! FMI 3.0: all 75 functions of `fmi3Functions.h`. Co-Simulation is implemented; Model
//! Exchange, Scheduled Execution, clocks and configuration mode return fmi3Error (the model
//! has none of these). The contract of every function is the FMI 3.0 standard's.
#![allow(non_snake_case, clippy::missing_safety_doc, clippy::too_many_arguments)]

use super::fmi2::do_step;
use super::*;
use crate::cosim::{Advance, InputRequest, SetPhase};
use crate::mbs::error::show_number as show_real;
use fmi_sys::fmi3::*;
use std::ptr::null_mut;

const V: FmiVersion = FmiVersion::V3;

// Legal states per function (FMI 3.0 Co-Simulation state machine).
const M_ANY: u32 = st::ANY;
const M_GET: u32 = st::INIT_MODE | st::EVENT | st::STEP | st::TERMINATED | st::ERROR;
const M_SET: u32 = st::INSTANTIATED | st::INIT_MODE | st::EVENT | st::STEP;
/// Get of variable values: also in Instantiated (FMI 3.0.2's state table is ambiguous there;
/// newer Reference FMUs allow it), for every variable but the outputs
/// ([`readable_in_instantiated`]).
const M_GET_VALUES: u32 = M_GET | st::INSTANTIATED;

/// In Instantiated the parameters (calculated ones from the parameters set so far), inputs,
/// solver settings, statistics and time are read; outputs need the assembled initial state,
/// which only Initialization Mode computes.
fn readable_in_instantiated(core: &Core, vr: u32) -> Result<(), Fail> {
    if core.state != st::INSTANTIATED {
        return Ok(());
    }
    match core.table.get(vr) {
        Some(v) if v.causality == crate::description::Causality::Output => Err(Fail::arg(format!(
            "output `{}` is not allowed in state Instantiated: outputs need the assembled initial state; read them in Initialization Mode or later",
            v.name
        ))),
        _ => Ok(()),
    }
}

#[inline]
unsafe fn b3(
    c: fmi3Instance,
    func: &str,
    mask: u32,
    body: impl FnOnce(&Instance, &mut Core) -> BodyResult,
) -> fmi3Status {
    // SAFETY: `c` comes from the importer; see `boundary`.
    unsafe { boundary(c, V, func, mask, body) as fmi3Status }
}

fn phase(core: &Core) -> SetPhase {
    if core.state == st::STEP || core.state == st::EVENT {
        SetPhase::Stepping
    } else {
        SetPhase::Setup
    }
}

fn check_n(nvr: usize, n_values: usize) -> Result<(), Fail> {
    if nvr != n_values {
        return Err(Fail::arg(format!("nValues = {n_values} differs from nValueReferences = {nvr} (all variables are scalars)")));
    }
    Ok(())
}

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
pub extern "C" fn fmi3GetVersion() -> *const c_char {
    c"3.0".as_ptr()
}
const _: fmi3GetVersionTYPE = Some(fmi3GetVersion);

#[no_mangle]
pub unsafe extern "C" fn fmi3SetDebugLogging(
    instance: fmi3Instance,
    loggingOn: fmi3Boolean,
    nCategories: usize,
    categories: *const fmi3String,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3SetDebugLogging", M_ANY, |inst, _| {
            Ok(inst.set_debug_logging(loggingOn, nCategories, categories))
        })
    }
}
const _: fmi3SetDebugLoggingTYPE = Some(fmi3SetDebugLogging);

// ---------------------------------------------------------------- instantiation

unsafe fn log_before_instance(
    logMessage: fmi3LogMessageCallback,
    env: fmi3InstanceEnvironment,
    name: fmi3String,
    msg: &str,
) {
    // SAFETY: importer's string or NULL.
    let n = to_cstring(unsafe { c_str(name) }.unwrap_or(""));
    emit(
        &Logger::V3(logMessage, Env(env)),
        &n,
        Status::Error,
        "logStatusError",
        msg,
    );
}

#[no_mangle]
pub unsafe extern "C" fn fmi3InstantiateModelExchange(
    instanceName: fmi3String,
    _instantiationToken: fmi3String,
    _resourcePath: fmi3String,
    _visible: fmi3Boolean,
    _loggingOn: fmi3Boolean,
    instanceEnvironment: fmi3InstanceEnvironment,
    logMessage: fmi3LogMessageCallback,
) -> fmi3Instance {
    guarded(null_mut(), || {
        unsafe {
            log_before_instance(logMessage, instanceEnvironment, instanceName, "fmi3InstantiateModelExchange: not supported: this FMU implements Co-Simulation only")
        };
        null_mut()
    })
}
const _: fmi3InstantiateModelExchangeTYPE = Some(fmi3InstantiateModelExchange);

#[no_mangle]
pub unsafe extern "C" fn fmi3InstantiateScheduledExecution(
    instanceName: fmi3String,
    _instantiationToken: fmi3String,
    _resourcePath: fmi3String,
    _visible: fmi3Boolean,
    _loggingOn: fmi3Boolean,
    instanceEnvironment: fmi3InstanceEnvironment,
    logMessage: fmi3LogMessageCallback,
    _clockUpdate: fmi3ClockUpdateCallback,
    _lockPreemption: fmi3LockPreemptionCallback,
    _unlockPreemption: fmi3UnlockPreemptionCallback,
) -> fmi3Instance {
    guarded(null_mut(), || {
        unsafe {
            log_before_instance(logMessage, instanceEnvironment, instanceName, "fmi3InstantiateScheduledExecution: not supported: this FMU implements Co-Simulation only")
        };
        null_mut()
    })
}
const _: fmi3InstantiateScheduledExecutionTYPE = Some(fmi3InstantiateScheduledExecution);

#[no_mangle]
pub unsafe extern "C" fn fmi3InstantiateCoSimulation(
    instanceName: fmi3String,
    instantiationToken: fmi3String,
    resourcePath: fmi3String,
    visible: fmi3Boolean,
    loggingOn: fmi3Boolean,
    eventModeUsed: fmi3Boolean,
    earlyReturnAllowed: fmi3Boolean,
    requiredIntermediateVariables: *const fmi3ValueReference,
    nRequiredIntermediateVariables: usize,
    instanceEnvironment: fmi3InstanceEnvironment,
    logMessage: fmi3LogMessageCallback,
    intermediateUpdate: fmi3IntermediateUpdateCallback,
) -> fmi3Instance {
    guarded(null_mut(), || unsafe {
        instantiate_cs(
            instanceName,
            instantiationToken,
            resourcePath,
            visible,
            loggingOn,
            eventModeUsed,
            earlyReturnAllowed,
            requiredIntermediateVariables,
            nRequiredIntermediateVariables,
            instanceEnvironment,
            logMessage,
            intermediateUpdate,
        )
    })
}
const _: fmi3InstantiateCoSimulationTYPE = Some(fmi3InstantiateCoSimulation);

unsafe fn instantiate_cs(
    instanceName: fmi3String,
    instantiationToken: fmi3String,
    resourcePath: fmi3String,
    _visible: fmi3Boolean,
    loggingOn: fmi3Boolean,
    eventModeUsed: fmi3Boolean,
    earlyReturnAllowed: fmi3Boolean,
    required: *const fmi3ValueReference,
    n_required: usize,
    env: fmi3InstanceEnvironment,
    logMessage: fmi3LogMessageCallback,
    intermediateUpdate: fmi3IntermediateUpdateCallback,
) -> fmi3Instance {
    let logger = Logger::V3(logMessage, Env(env));
    // SAFETY: importer's strings or NULL.
    let name = unsafe { c_str_arg(instanceName, "instanceName") };
    let cname = to_cstring(name.as_ref().copied().unwrap_or(""));
    let fail = |msg: String| {
        emit(
            &logger,
            &cname,
            Status::Error,
            "logStatusError",
            &format!("fmi3InstantiateCoSimulation: {msg}"),
        );
        null_mut()
    };
    let name = match name {
        Ok(n) if n.trim().is_empty() => return fail("instanceName is empty".into()),
        Ok(n) => n,
        Err(e) => return fail(e),
    };
    // SAFETY: as above.
    let token = match unsafe { c_str_arg(instantiationToken, "instantiationToken") } {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    // SAFETY: as above.
    let path = match unsafe { c_str_arg(resourcePath, "resourcePath") } {
        Ok(p) => p,
        Err(e) => return fail(format!("{e}; the FMU needs its resources folder")),
    };
    let dir = match resources::fmi3_resource_dir(path) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let model = match load_model(&dir) {
        Ok(m) => m,
        Err(e) => return fail(format!("cannot load the model: {e}")),
    };
    if token != model.token {
        return fail(format!(
            "instantiationToken {token} does not match the packed model's token {}: the modelDescription.xml does not belong to {}",
            model.token,
            dir.join("model.toml").display()
        ));
    }
    // SAFETY: importer's array.
    let required = match unsafe { in_slice(required, n_required, "requiredIntermediateVariables") }
    {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let mut warnings = Vec::new();
    let mut inputs = Vec::new();
    for &vr in required {
        match model.table.get(vr).map(|v| v.kind) {
            Some(crate::description::VarKind::Input(i)) => inputs.push((vr, i)),
            Some(_) => warnings.push(format!(
                "value reference {vr} is not an input; it is not updated during doStep"
            )),
            None => {
                return fail(format!(
                    "requiredIntermediateVariables: unknown value reference {vr}"
                ))
            }
        }
    }
    let intermediate = match intermediateUpdate {
        Some(cb) if !inputs.is_empty() => Some(Intermediate {
            callback: cb,
            env: Env(env),
            inputs,
        }),
        _ => None,
    };
    let inst = Instance::new(V, cname, logger, loggingOn, model, intermediate);
    if let Ok(mut core) = inst.core.lock() {
        core.event_mode_used = eventModeUsed;
        // Early return at contact events: only when the importer allows it and the model has
        // contacts (mightReturnEarlyFromDoStep is written for exactly those models).
        let early = earlyReturnAllowed && core.sim.has_events();
        core.sim.set_early_return(early);
    }
    for w in warnings {
        inst.log(
            Status::Warning,
            &format!("fmi3InstantiateCoSimulation: {w}"),
        );
    }
    inst.log_event(&format!(
        "fmi3InstantiateCoSimulation: instance `{name}` from {}",
        dir.display()
    ));
    Box::into_raw(inst) as fmi3Instance
}

#[no_mangle]
pub unsafe extern "C" fn fmi3FreeInstance(instance: fmi3Instance) {
    unsafe { free_instance(instance, V, "fmi3FreeInstance") }
}
const _: fmi3FreeInstanceTYPE = Some(fmi3FreeInstance);

// ---------------------------------------------------------------- life cycle

#[no_mangle]
pub unsafe extern "C" fn fmi3EnterInitializationMode(
    instance: fmi3Instance,
    toleranceDefined: fmi3Boolean,
    tolerance: fmi3Float64,
    startTime: fmi3Float64,
    stopTimeDefined: fmi3Boolean,
    stopTime: fmi3Float64,
) -> fmi3Status {
    unsafe {
        b3(
            instance,
            "fmi3EnterInitializationMode",
            st::INSTANTIATED,
            |_, core| {
                core.sim.setup_experiment(
                    toleranceDefined.then_some(tolerance),
                    startTime,
                    stopTimeDefined.then_some(stopTime),
                )?;
                core.last_successful_time = startTime;
                core.state = st::INIT_MODE;
                Ok(Status::Ok)
            },
        )
    }
}
const _: fmi3EnterInitializationModeTYPE = Some(fmi3EnterInitializationMode);

#[no_mangle]
pub unsafe extern "C" fn fmi3ExitInitializationMode(instance: fmi3Instance) -> fmi3Status {
    unsafe {
        b3(
            instance,
            "fmi3ExitInitializationMode",
            st::INIT_MODE,
            |inst, core| {
                core.sim
                    .initialize()
                    .map_err(|e| Fail::computation(e.to_string()))?;
                core.state = if core.event_mode_used {
                    st::EVENT
                } else {
                    st::STEP
                };
                core.last_successful_time = core.sim.time();
                for w in core.sim.advisories() {
                    inst.log(Status::Warning, &format!("fmi3ExitInitializationMode: {w}"));
                }
                inst.log_event(&format!("initialized at t = {}", core.sim.time()));
                Ok(Status::Ok)
            },
        )
    }
}
const _: fmi3ExitInitializationModeTYPE = Some(fmi3ExitInitializationMode);

#[no_mangle]
pub unsafe extern "C" fn fmi3EnterEventMode(instance: fmi3Instance) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3EnterEventMode", st::STEP, |_, core| {
            if !core.event_mode_used {
                return Err(Fail::arg(
                    "Event Mode was not requested at instantiation (eventModeUsed = false)",
                ));
            }
            core.state = st::EVENT;
            Ok(Status::Ok)
        })
    }
}
const _: fmi3EnterEventModeTYPE = Some(fmi3EnterEventMode);

#[no_mangle]
pub unsafe extern "C" fn fmi3Terminate(instance: fmi3Instance) -> fmi3Status {
    unsafe {
        b3(
            instance,
            "fmi3Terminate",
            st::STEP | st::EVENT,
            |_, core| {
                core.state = st::TERMINATED;
                Ok(Status::Ok)
            },
        )
    }
}
const _: fmi3TerminateTYPE = Some(fmi3Terminate);

#[no_mangle]
pub unsafe extern "C" fn fmi3Reset(instance: fmi3Instance) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3Reset", M_ANY, |_, core| {
            core.reset();
            Ok(Status::Ok)
        })
    }
}
const _: fmi3ResetTYPE = Some(fmi3Reset);

// ---------------------------------------------------------------- Float64 / Int64

#[no_mangle]
pub unsafe extern "C" fn fmi3GetFloat64(
    instance: fmi3Instance,
    valueReferences: *const fmi3ValueReference,
    nValueReferences: usize,
    values: *mut fmi3Float64,
    nValues: usize,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3GetFloat64", M_GET_VALUES, |_, core| {
            check_n(nValueReferences, nValues)?;
            let vrs = in_slice(valueReferences, nValueReferences, "valueReferences")?;
            let out = out_slice(values, nValues, "values")?;
            for (o, &r) in out.iter_mut().zip(vrs) {
                readable_in_instantiated(core, r)?;
                *o = core.sim.get_real(r)?;
            }
            Ok(Status::Ok)
        })
    }
}
const _: fmi3GetFloat64TYPE = Some(fmi3GetFloat64);

#[no_mangle]
pub unsafe extern "C" fn fmi3SetFloat64(
    instance: fmi3Instance,
    valueReferences: *const fmi3ValueReference,
    nValueReferences: usize,
    values: *const fmi3Float64,
    nValues: usize,
) -> fmi3Status {
    unsafe { set_float64(instance, valueReferences, nValueReferences, values, nValues) }
}
const _: fmi3SetFloat64TYPE = Some(fmi3SetFloat64);

unsafe fn set_float64(
    instance: fmi3Instance,
    vr: *const fmi3ValueReference,
    nvr: usize,
    values: *const f64,
    n_values: usize,
) -> fmi3Status {
    // Inside the intermediate-update callback the core is busy with the step: only record.
    // SAFETY: importer's pointer, checked by magic.
    if let Some(inst) = unsafe { Instance::from_ptr(instance, V) } {
        let recorded = guarded(None, || {
            let mut ib = inst.inbox.try_lock().ok()?;
            if !ib.active {
                return None;
            }
            // SAFETY: importer's arrays.
            Some(unsafe { record_intermediate(inst, &mut ib, vr, nvr, values, n_values) })
        });
        if let Some(r) = recorded {
            return match r {
                Ok(()) => Status::Ok as fmi3Status,
                Err(msg) => {
                    inst.log(
                        Status::Error,
                        &format!("fmi3SetFloat64 (intermediate update): {msg}"),
                    );
                    Status::Error as fmi3Status
                }
            };
        }
    }
    unsafe {
        b3(instance, "fmi3SetFloat64", M_SET, |inst, core| {
            check_n(nvr, n_values)?;
            let vrs = in_slice(vr, nvr, "valueReferences")?;
            let vals = in_slice(values, n_values, "values")?;
            let p = phase(core);
            match core.sim.set_reals(vrs, vals, p)? {
                Some(w) => {
                    inst.log(Status::Warning, &format!("fmi3SetFloat64: {w}"));
                    Ok(Status::Warning)
                }
                None => Ok(Status::Ok),
            }
        })
    }
}

unsafe fn record_intermediate(
    inst: &Instance,
    ib: &mut Inbox,
    vr: *const u32,
    nvr: usize,
    values: *const f64,
    n_values: usize,
) -> Result<(), String> {
    if nvr != n_values {
        return Err(format!(
            "nValues = {n_values} differs from nValueReferences = {nvr}"
        ));
    }
    // SAFETY: importer's arrays.
    let vrs = unsafe { in_slice(vr, nvr, "valueReferences") }?;
    // SAFETY: importer's arrays.
    let vals = unsafe { in_slice(values, n_values, "values") }?;
    let im = inst
        .intermediate
        .as_ref()
        .ok_or("no intermediate variables")?;
    let mut staged = Vec::with_capacity(nvr);
    for (&r, &v) in vrs.iter().zip(vals) {
        let Some(&(_, i)) = im.inputs.iter().find(|(x, _)| *x == r) else {
            return Err(format!(
                "value reference {r} is not one of the requiredIntermediateVariables inputs"
            ));
        };
        if !v.is_finite() {
            return Err(format!("value {v} for value reference {r} is not finite"));
        }
        staged.push((i, v));
    }
    ib.values.extend(staged);
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn fmi3GetInt64(
    instance: fmi3Instance,
    valueReferences: *const fmi3ValueReference,
    nValueReferences: usize,
    values: *mut fmi3Int64,
    nValues: usize,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3GetInt64", M_GET_VALUES, |_, core| {
            check_n(nValueReferences, nValues)?;
            let vrs = in_slice(valueReferences, nValueReferences, "valueReferences")?;
            let out = out_slice(values, nValues, "values")?;
            for (o, &r) in out.iter_mut().zip(vrs) {
                readable_in_instantiated(core, r)?;
                *o = core.sim.get_integer(r)?;
            }
            Ok(Status::Ok)
        })
    }
}
const _: fmi3GetInt64TYPE = Some(fmi3GetInt64);

#[no_mangle]
pub unsafe extern "C" fn fmi3SetInt64(
    instance: fmi3Instance,
    valueReferences: *const fmi3ValueReference,
    nValueReferences: usize,
    values: *const fmi3Int64,
    nValues: usize,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3SetInt64", M_SET, |_, core| {
            check_n(nValueReferences, nValues)?;
            let vrs = in_slice(valueReferences, nValueReferences, "valueReferences")?;
            let vals = in_slice(values, nValues, "values")?;
            let p = phase(core);
            core.sim.set_integers(vrs, vals, p)?;
            Ok(Status::Ok)
        })
    }
}
const _: fmi3SetInt64TYPE = Some(fmi3SetInt64);

// ---------------------------------------------------------------- types without variables

macro_rules! no_var_get_set {
    ($get:ident, $get_ty:ident, $set:ident, $set_ty:ident, $t:ty, $name:literal) => {
        #[no_mangle]
        pub unsafe extern "C" fn $get(
            instance: fmi3Instance,
            valueReferences: *const fmi3ValueReference,
            nValueReferences: usize,
            values: *mut $t,
            nValues: usize,
        ) -> fmi3Status {
            unsafe {
                b3(instance, stringify!($get), M_GET_VALUES, |_, core| {
                    check_n(nValueReferences, nValues)?;
                    let vrs = in_slice(valueReferences, nValueReferences, "valueReferences")?;
                    out_slice(values, nValues, "values")?;
                    no_variables(core, vrs, $name)
                })
            }
        }
        const _: $get_ty = Some($get);

        #[no_mangle]
        pub unsafe extern "C" fn $set(
            instance: fmi3Instance,
            valueReferences: *const fmi3ValueReference,
            nValueReferences: usize,
            values: *const $t,
            nValues: usize,
        ) -> fmi3Status {
            unsafe {
                b3(instance, stringify!($set), M_SET, |_, core| {
                    check_n(nValueReferences, nValues)?;
                    let vrs = in_slice(valueReferences, nValueReferences, "valueReferences")?;
                    in_slice(values, nValues, "values")?;
                    no_variables(core, vrs, $name)
                })
            }
        }
        const _: $set_ty = Some($set);
    };
}

no_var_get_set!(
    fmi3GetFloat32,
    fmi3GetFloat32TYPE,
    fmi3SetFloat32,
    fmi3SetFloat32TYPE,
    fmi3Float32,
    "Float32"
);
no_var_get_set!(
    fmi3GetInt8,
    fmi3GetInt8TYPE,
    fmi3SetInt8,
    fmi3SetInt8TYPE,
    fmi3Int8,
    "Int8"
);
no_var_get_set!(
    fmi3GetUInt8,
    fmi3GetUInt8TYPE,
    fmi3SetUInt8,
    fmi3SetUInt8TYPE,
    fmi3UInt8,
    "UInt8"
);
no_var_get_set!(
    fmi3GetInt16,
    fmi3GetInt16TYPE,
    fmi3SetInt16,
    fmi3SetInt16TYPE,
    fmi3Int16,
    "Int16"
);
no_var_get_set!(
    fmi3GetUInt16,
    fmi3GetUInt16TYPE,
    fmi3SetUInt16,
    fmi3SetUInt16TYPE,
    fmi3UInt16,
    "UInt16"
);
no_var_get_set!(
    fmi3GetInt32,
    fmi3GetInt32TYPE,
    fmi3SetInt32,
    fmi3SetInt32TYPE,
    fmi3Int32,
    "Int32"
);
no_var_get_set!(
    fmi3GetUInt32,
    fmi3GetUInt32TYPE,
    fmi3SetUInt32,
    fmi3SetUInt32TYPE,
    fmi3UInt32,
    "UInt32"
);
no_var_get_set!(
    fmi3GetUInt64,
    fmi3GetUInt64TYPE,
    fmi3SetUInt64,
    fmi3SetUInt64TYPE,
    fmi3UInt64,
    "UInt64"
);
no_var_get_set!(
    fmi3GetBoolean,
    fmi3GetBooleanTYPE,
    fmi3SetBoolean,
    fmi3SetBooleanTYPE,
    fmi3Boolean,
    "Boolean"
);
no_var_get_set!(
    fmi3GetString,
    fmi3GetStringTYPE,
    fmi3SetString,
    fmi3SetStringTYPE,
    fmi3String,
    "String"
);

#[no_mangle]
pub unsafe extern "C" fn fmi3GetBinary(
    instance: fmi3Instance,
    valueReferences: *const fmi3ValueReference,
    nValueReferences: usize,
    valueSizes: *mut usize,
    values: *mut fmi3Binary,
    nValues: usize,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3GetBinary", M_GET_VALUES, |_, core| {
            check_n(nValueReferences, nValues)?;
            let vrs = in_slice(valueReferences, nValueReferences, "valueReferences")?;
            out_slice(valueSizes, nValues, "valueSizes")?;
            out_slice(values, nValues, "values")?;
            no_variables(core, vrs, "Binary")
        })
    }
}
const _: fmi3GetBinaryTYPE = Some(fmi3GetBinary);

#[no_mangle]
pub unsafe extern "C" fn fmi3SetBinary(
    instance: fmi3Instance,
    valueReferences: *const fmi3ValueReference,
    nValueReferences: usize,
    valueSizes: *const usize,
    values: *const fmi3Binary,
    nValues: usize,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3SetBinary", M_SET, |_, core| {
            check_n(nValueReferences, nValues)?;
            let vrs = in_slice(valueReferences, nValueReferences, "valueReferences")?;
            in_slice(valueSizes, nValues, "valueSizes")?;
            in_slice(values, nValues, "values")?;
            no_variables(core, vrs, "Binary")
        })
    }
}
const _: fmi3SetBinaryTYPE = Some(fmi3SetBinary);

#[no_mangle]
pub unsafe extern "C" fn fmi3GetClock(
    instance: fmi3Instance,
    valueReferences: *const fmi3ValueReference,
    nValueReferences: usize,
    values: *mut fmi3Clock,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3GetClock", M_GET, |_, core| {
            let vrs = in_slice(valueReferences, nValueReferences, "valueReferences")?;
            out_slice(values, nValueReferences, "values")?;
            no_variables(core, vrs, "Clock")
        })
    }
}
const _: fmi3GetClockTYPE = Some(fmi3GetClock);

#[no_mangle]
pub unsafe extern "C" fn fmi3SetClock(
    instance: fmi3Instance,
    valueReferences: *const fmi3ValueReference,
    nValueReferences: usize,
    values: *const fmi3Clock,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3SetClock", M_SET, |_, core| {
            let vrs = in_slice(valueReferences, nValueReferences, "valueReferences")?;
            in_slice(values, nValueReferences, "values")?;
            no_variables(core, vrs, "Clock")
        })
    }
}
const _: fmi3SetClockTYPE = Some(fmi3SetClock);

// ---------------------------------------------------------------- dependencies (not provided)

#[no_mangle]
pub unsafe extern "C" fn fmi3GetNumberOfVariableDependencies(
    instance: fmi3Instance,
    _valueReference: fmi3ValueReference,
    _nDependencies: *mut usize,
) -> fmi3Status {
    unsafe {
        b3(
            instance,
            "fmi3GetNumberOfVariableDependencies",
            M_ANY,
            |_, _| {
                Err(Fail::arg(
                    "not supported: dependencies are given in modelDescription.xml only",
                ))
            },
        )
    }
}
const _: fmi3GetNumberOfVariableDependenciesTYPE = Some(fmi3GetNumberOfVariableDependencies);

#[no_mangle]
pub unsafe extern "C" fn fmi3GetVariableDependencies(
    instance: fmi3Instance,
    _dependent: fmi3ValueReference,
    _elementIndicesOfDependent: *mut usize,
    _independents: *mut fmi3ValueReference,
    _elementIndicesOfIndependents: *mut usize,
    _dependencyKinds: *mut fmi3DependencyKind,
    _nDependencies: usize,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3GetVariableDependencies", M_ANY, |_, _| {
            Err(Fail::arg(
                "not supported: dependencies are given in modelDescription.xml only",
            ))
        })
    }
}
const _: fmi3GetVariableDependenciesTYPE = Some(fmi3GetVariableDependencies);

// ---------------------------------------------------------------- FMU state

#[no_mangle]
pub unsafe extern "C" fn fmi3GetFMUState(
    instance: fmi3Instance,
    FMUState: *mut fmi3FMUState,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3GetFMUState", M_ANY, |_, core| {
            fmu_state::get(core, FMUState)
        })
    }
}
const _: fmi3GetFMUStateTYPE = Some(fmi3GetFMUState);

#[no_mangle]
pub unsafe extern "C" fn fmi3SetFMUState(
    instance: fmi3Instance,
    FMUState: fmi3FMUState,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3SetFMUState", M_ANY, |inst, core| {
            fmu_state::set(inst, core, FMUState)
        })
    }
}
const _: fmi3SetFMUStateTYPE = Some(fmi3SetFMUState);

#[no_mangle]
pub unsafe extern "C" fn fmi3FreeFMUState(
    instance: fmi3Instance,
    FMUState: *mut fmi3FMUState,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3FreeFMUState", M_ANY, |_, core| {
            fmu_state::free(core, FMUState)
        })
    }
}
const _: fmi3FreeFMUStateTYPE = Some(fmi3FreeFMUState);

#[no_mangle]
pub unsafe extern "C" fn fmi3SerializedFMUStateSize(
    instance: fmi3Instance,
    FMUState: fmi3FMUState,
    size: *mut usize,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3SerializedFMUStateSize", M_ANY, |inst, _| {
            fmu_state::size(inst, FMUState, size)
        })
    }
}
const _: fmi3SerializedFMUStateSizeTYPE = Some(fmi3SerializedFMUStateSize);

#[no_mangle]
pub unsafe extern "C" fn fmi3SerializeFMUState(
    instance: fmi3Instance,
    FMUState: fmi3FMUState,
    serializedState: *mut fmi3Byte,
    size: usize,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3SerializeFMUState", M_ANY, |inst, _| {
            fmu_state::serialize(inst, FMUState, serializedState, size)
        })
    }
}
const _: fmi3SerializeFMUStateTYPE = Some(fmi3SerializeFMUState);

#[no_mangle]
pub unsafe extern "C" fn fmi3DeserializeFMUState(
    instance: fmi3Instance,
    serializedState: *const fmi3Byte,
    size: usize,
    FMUState: *mut fmi3FMUState,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3DeserializeFMUState", M_ANY, |inst, core| {
            fmu_state::deserialize(inst, core, serializedState, size, FMUState)
        })
    }
}
const _: fmi3DeserializeFMUStateTYPE = Some(fmi3DeserializeFMUState);

// ---------------------------------------------------------------- derivatives

unsafe fn partials(
    core: &mut Core,
    unknowns: *const u32,
    n_unknowns: usize,
    knowns: *const u32,
    n_knowns: usize,
    seed: *const f64,
    n_seed: usize,
    sensitivity: *mut f64,
    n_sens: usize,
    adjoint: bool,
) -> BodyResult {
    // SAFETY: importer's arrays, checked inside.
    let (u, k) = unsafe {
        (
            in_slice(unknowns, n_unknowns, "unknowns")?,
            in_slice(knowns, n_knowns, "knowns")?,
        )
    };
    let (n_in, n_out) = if adjoint {
        (n_unknowns, n_knowns)
    } else {
        (n_knowns, n_unknowns)
    };
    if n_seed != n_in || n_sens != n_out {
        return Err(Fail::arg(format!("nSeed = {n_seed} and nSensitivity = {n_sens} must be {n_in} and {n_out} (all variables are scalars)")));
    }
    // SAFETY: as above.
    let (s, out) = unsafe {
        (
            in_slice(seed, n_seed, "seed")?,
            out_slice(sensitivity, n_sens, "sensitivity")?,
        )
    };
    if s.iter().any(|x| !x.is_finite()) {
        return Err(Fail::arg("seed has a non-finite entry"));
    }
    let jac = core.sim.output_input_jacobian(u, k)?;
    let v = nalgebra::DVector::from_column_slice(s);
    let r = if adjoint {
        jac.transpose() * v
    } else {
        jac * v
    };
    out.copy_from_slice(r.as_slice());
    Ok(Status::Ok)
}

#[no_mangle]
pub unsafe extern "C" fn fmi3GetDirectionalDerivative(
    instance: fmi3Instance,
    unknowns: *const fmi3ValueReference,
    nUnknowns: usize,
    knowns: *const fmi3ValueReference,
    nKnowns: usize,
    seed: *const fmi3Float64,
    nSeed: usize,
    sensitivity: *mut fmi3Float64,
    nSensitivity: usize,
) -> fmi3Status {
    unsafe {
        b3(
            instance,
            "fmi3GetDirectionalDerivative",
            M_GET,
            |_, core| {
                partials(
                    core,
                    unknowns,
                    nUnknowns,
                    knowns,
                    nKnowns,
                    seed,
                    nSeed,
                    sensitivity,
                    nSensitivity,
                    false,
                )
            },
        )
    }
}
const _: fmi3GetDirectionalDerivativeTYPE = Some(fmi3GetDirectionalDerivative);

#[no_mangle]
pub unsafe extern "C" fn fmi3GetAdjointDerivative(
    instance: fmi3Instance,
    unknowns: *const fmi3ValueReference,
    nUnknowns: usize,
    knowns: *const fmi3ValueReference,
    nKnowns: usize,
    seed: *const fmi3Float64,
    nSeed: usize,
    sensitivity: *mut fmi3Float64,
    nSensitivity: usize,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3GetAdjointDerivative", M_GET, |_, core| {
            partials(
                core,
                unknowns,
                nUnknowns,
                knowns,
                nKnowns,
                seed,
                nSeed,
                sensitivity,
                nSensitivity,
                true,
            )
        })
    }
}
const _: fmi3GetAdjointDerivativeTYPE = Some(fmi3GetAdjointDerivative);

// ---------------------------------------------------------------- configuration, clocks (none)

const NO_CLOCKS: &str = "not supported: the model has no clocks";
const NO_STRUCTURAL: &str = "not supported: the model has no structural parameters";

#[no_mangle]
pub unsafe extern "C" fn fmi3EnterConfigurationMode(instance: fmi3Instance) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3EnterConfigurationMode", M_ANY, |_, _| {
            Err(Fail::arg(NO_STRUCTURAL))
        })
    }
}
const _: fmi3EnterConfigurationModeTYPE = Some(fmi3EnterConfigurationMode);

#[no_mangle]
pub unsafe extern "C" fn fmi3ExitConfigurationMode(instance: fmi3Instance) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3ExitConfigurationMode", M_ANY, |_, _| {
            Err(Fail::arg(NO_STRUCTURAL))
        })
    }
}
const _: fmi3ExitConfigurationModeTYPE = Some(fmi3ExitConfigurationMode);

#[no_mangle]
pub unsafe extern "C" fn fmi3GetIntervalDecimal(
    instance: fmi3Instance,
    _vr: *const fmi3ValueReference,
    _n: usize,
    _intervals: *mut fmi3Float64,
    _q: *mut fmi3IntervalQualifier,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3GetIntervalDecimal", M_ANY, |_, _| {
            Err(Fail::arg(NO_CLOCKS))
        })
    }
}
const _: fmi3GetIntervalDecimalTYPE = Some(fmi3GetIntervalDecimal);

#[no_mangle]
pub unsafe extern "C" fn fmi3GetIntervalFraction(
    instance: fmi3Instance,
    _vr: *const fmi3ValueReference,
    _n: usize,
    _c: *mut fmi3UInt64,
    _r: *mut fmi3UInt64,
    _q: *mut fmi3IntervalQualifier,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3GetIntervalFraction", M_ANY, |_, _| {
            Err(Fail::arg(NO_CLOCKS))
        })
    }
}
const _: fmi3GetIntervalFractionTYPE = Some(fmi3GetIntervalFraction);

#[no_mangle]
pub unsafe extern "C" fn fmi3GetShiftDecimal(
    instance: fmi3Instance,
    _vr: *const fmi3ValueReference,
    _n: usize,
    _shifts: *mut fmi3Float64,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3GetShiftDecimal", M_ANY, |_, _| {
            Err(Fail::arg(NO_CLOCKS))
        })
    }
}
const _: fmi3GetShiftDecimalTYPE = Some(fmi3GetShiftDecimal);

#[no_mangle]
pub unsafe extern "C" fn fmi3GetShiftFraction(
    instance: fmi3Instance,
    _vr: *const fmi3ValueReference,
    _n: usize,
    _c: *mut fmi3UInt64,
    _r: *mut fmi3UInt64,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3GetShiftFraction", M_ANY, |_, _| {
            Err(Fail::arg(NO_CLOCKS))
        })
    }
}
const _: fmi3GetShiftFractionTYPE = Some(fmi3GetShiftFraction);

#[no_mangle]
pub unsafe extern "C" fn fmi3SetIntervalDecimal(
    instance: fmi3Instance,
    _vr: *const fmi3ValueReference,
    _n: usize,
    _intervals: *const fmi3Float64,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3SetIntervalDecimal", M_ANY, |_, _| {
            Err(Fail::arg(NO_CLOCKS))
        })
    }
}
const _: fmi3SetIntervalDecimalTYPE = Some(fmi3SetIntervalDecimal);

#[no_mangle]
pub unsafe extern "C" fn fmi3SetIntervalFraction(
    instance: fmi3Instance,
    _vr: *const fmi3ValueReference,
    _n: usize,
    _c: *const fmi3UInt64,
    _r: *const fmi3UInt64,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3SetIntervalFraction", M_ANY, |_, _| {
            Err(Fail::arg(NO_CLOCKS))
        })
    }
}
const _: fmi3SetIntervalFractionTYPE = Some(fmi3SetIntervalFraction);

#[no_mangle]
pub unsafe extern "C" fn fmi3SetShiftDecimal(
    instance: fmi3Instance,
    _vr: *const fmi3ValueReference,
    _n: usize,
    _shifts: *const fmi3Float64,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3SetShiftDecimal", M_ANY, |_, _| {
            Err(Fail::arg(NO_CLOCKS))
        })
    }
}
const _: fmi3SetShiftDecimalTYPE = Some(fmi3SetShiftDecimal);

#[no_mangle]
pub unsafe extern "C" fn fmi3SetShiftFraction(
    instance: fmi3Instance,
    _vr: *const fmi3ValueReference,
    _n: usize,
    _c: *const fmi3UInt64,
    _r: *const fmi3UInt64,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3SetShiftFraction", M_ANY, |_, _| {
            Err(Fail::arg(NO_CLOCKS))
        })
    }
}
const _: fmi3SetShiftFractionTYPE = Some(fmi3SetShiftFraction);

#[no_mangle]
pub unsafe extern "C" fn fmi3EvaluateDiscreteStates(instance: fmi3Instance) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3EvaluateDiscreteStates", M_ANY, |_, _| {
            Err(Fail::arg("not supported: the model has no discrete states"))
        })
    }
}
const _: fmi3EvaluateDiscreteStatesTYPE = Some(fmi3EvaluateDiscreteStates);

#[no_mangle]
pub unsafe extern "C" fn fmi3UpdateDiscreteStates(
    instance: fmi3Instance,
    discreteStatesNeedUpdate: *mut fmi3Boolean,
    terminateSimulation: *mut fmi3Boolean,
    nominalsOfContinuousStatesChanged: *mut fmi3Boolean,
    valuesOfContinuousStatesChanged: *mut fmi3Boolean,
    nextEventTimeDefined: *mut fmi3Boolean,
    nextEventTime: *mut fmi3Float64,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3UpdateDiscreteStates", st::EVENT, |_, _| {
            // No discrete states and no events: nothing changes.
            for (p, name) in [
                (discreteStatesNeedUpdate, "discreteStatesNeedUpdate"),
                (terminateSimulation, "terminateSimulation"),
                (
                    nominalsOfContinuousStatesChanged,
                    "nominalsOfContinuousStatesChanged",
                ),
                (
                    valuesOfContinuousStatesChanged,
                    "valuesOfContinuousStatesChanged",
                ),
                (nextEventTimeDefined, "nextEventTimeDefined"),
            ] {
                *out_ref(p, name)? = false;
            }
            *out_ref(nextEventTime, "nextEventTime")? = 0.0;
            Ok(Status::Ok)
        })
    }
}
const _: fmi3UpdateDiscreteStatesTYPE = Some(fmi3UpdateDiscreteStates);

// ---------------------------------------------------------------- Model Exchange (unsupported)

const NO_ME: &str = "not supported: this FMU implements Co-Simulation only";

#[no_mangle]
pub unsafe extern "C" fn fmi3EnterContinuousTimeMode(instance: fmi3Instance) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3EnterContinuousTimeMode", M_ANY, |_, _| {
            Err(Fail::arg(NO_ME))
        })
    }
}
const _: fmi3EnterContinuousTimeModeTYPE = Some(fmi3EnterContinuousTimeMode);

#[no_mangle]
pub unsafe extern "C" fn fmi3CompletedIntegratorStep(
    instance: fmi3Instance,
    _noSetPrior: fmi3Boolean,
    _enterEventMode: *mut fmi3Boolean,
    _terminate: *mut fmi3Boolean,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3CompletedIntegratorStep", M_ANY, |_, _| {
            Err(Fail::arg(NO_ME))
        })
    }
}
const _: fmi3CompletedIntegratorStepTYPE = Some(fmi3CompletedIntegratorStep);

#[no_mangle]
pub unsafe extern "C" fn fmi3SetTime(instance: fmi3Instance, _time: fmi3Float64) -> fmi3Status {
    unsafe { b3(instance, "fmi3SetTime", M_ANY, |_, _| Err(Fail::arg(NO_ME))) }
}
const _: fmi3SetTimeTYPE = Some(fmi3SetTime);

#[no_mangle]
pub unsafe extern "C" fn fmi3SetContinuousStates(
    instance: fmi3Instance,
    _x: *const fmi3Float64,
    _n: usize,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3SetContinuousStates", M_ANY, |_, _| {
            Err(Fail::arg(NO_ME))
        })
    }
}
const _: fmi3SetContinuousStatesTYPE = Some(fmi3SetContinuousStates);

#[no_mangle]
pub unsafe extern "C" fn fmi3GetContinuousStateDerivatives(
    instance: fmi3Instance,
    _d: *mut fmi3Float64,
    _n: usize,
) -> fmi3Status {
    unsafe {
        b3(
            instance,
            "fmi3GetContinuousStateDerivatives",
            M_ANY,
            |_, _| Err(Fail::arg(NO_ME)),
        )
    }
}
const _: fmi3GetContinuousStateDerivativesTYPE = Some(fmi3GetContinuousStateDerivatives);

#[no_mangle]
pub unsafe extern "C" fn fmi3GetEventIndicators(
    instance: fmi3Instance,
    _z: *mut fmi3Float64,
    _n: usize,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3GetEventIndicators", M_ANY, |_, _| {
            Err(Fail::arg(NO_ME))
        })
    }
}
const _: fmi3GetEventIndicatorsTYPE = Some(fmi3GetEventIndicators);

#[no_mangle]
pub unsafe extern "C" fn fmi3GetContinuousStates(
    instance: fmi3Instance,
    _x: *mut fmi3Float64,
    _n: usize,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3GetContinuousStates", M_ANY, |_, _| {
            Err(Fail::arg(NO_ME))
        })
    }
}
const _: fmi3GetContinuousStatesTYPE = Some(fmi3GetContinuousStates);

#[no_mangle]
pub unsafe extern "C" fn fmi3GetNominalsOfContinuousStates(
    instance: fmi3Instance,
    _x: *mut fmi3Float64,
    _n: usize,
) -> fmi3Status {
    unsafe {
        b3(
            instance,
            "fmi3GetNominalsOfContinuousStates",
            M_ANY,
            |_, _| Err(Fail::arg(NO_ME)),
        )
    }
}
const _: fmi3GetNominalsOfContinuousStatesTYPE = Some(fmi3GetNominalsOfContinuousStates);

#[no_mangle]
pub unsafe extern "C" fn fmi3GetNumberOfEventIndicators(
    instance: fmi3Instance,
    _n: *mut usize,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3GetNumberOfEventIndicators", M_ANY, |_, _| {
            Err(Fail::arg(NO_ME))
        })
    }
}
const _: fmi3GetNumberOfEventIndicatorsTYPE = Some(fmi3GetNumberOfEventIndicators);

#[no_mangle]
pub unsafe extern "C" fn fmi3GetNumberOfContinuousStates(
    instance: fmi3Instance,
    _n: *mut usize,
) -> fmi3Status {
    unsafe {
        b3(
            instance,
            "fmi3GetNumberOfContinuousStates",
            M_ANY,
            |_, _| Err(Fail::arg(NO_ME)),
        )
    }
}
const _: fmi3GetNumberOfContinuousStatesTYPE = Some(fmi3GetNumberOfContinuousStates);

// ---------------------------------------------------------------- Co-Simulation

#[no_mangle]
pub unsafe extern "C" fn fmi3EnterStepMode(instance: fmi3Instance) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3EnterStepMode", st::EVENT, |_, core| {
            core.state = st::STEP;
            Ok(Status::Ok)
        })
    }
}
const _: fmi3EnterStepModeTYPE = Some(fmi3EnterStepMode);

#[no_mangle]
pub unsafe extern "C" fn fmi3GetOutputDerivatives(
    instance: fmi3Instance,
    valueReferences: *const fmi3ValueReference,
    nValueReferences: usize,
    orders: *const fmi3Int32,
    values: *mut fmi3Float64,
    nValues: usize,
) -> fmi3Status {
    unsafe {
        b3(
            instance,
            "fmi3GetOutputDerivatives",
            st::STEP | st::EVENT | st::TERMINATED | st::ERROR,
            |_, core| {
                check_n(nValueReferences, nValues)?;
                let vrs = in_slice(valueReferences, nValueReferences, "valueReferences")?;
                let ord = in_slice(orders, nValueReferences, "orders")?;
                let out = out_slice(values, nValues, "values")?;
                for k in 0..nValueReferences {
                    out[k] = core.sim.output_derivative(vrs[k], ord[k] as i64)?;
                }
                Ok(Status::Ok)
            },
        )
    }
}
const _: fmi3GetOutputDerivativesTYPE = Some(fmi3GetOutputDerivatives);

#[no_mangle]
pub unsafe extern "C" fn fmi3DoStep(
    instance: fmi3Instance,
    currentCommunicationPoint: fmi3Float64,
    communicationStepSize: fmi3Float64,
    _noSetFMUStatePriorToCurrentPoint: fmi3Boolean,
    eventHandlingNeeded: *mut fmi3Boolean,
    terminateSimulation: *mut fmi3Boolean,
    earlyReturn: *mut fmi3Boolean,
    lastSuccessfulTime: *mut fmi3Float64,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3DoStep", st::STEP, |inst, core| {
            let ehn = out_ref(eventHandlingNeeded, "eventHandlingNeeded")?;
            let term = out_ref(terminateSimulation, "terminateSimulation")?;
            let early = out_ref(earlyReturn, "earlyReturn")?;
            let lst = out_ref(lastSuccessfulTime, "lastSuccessfulTime")?;
            *ehn = false;
            *term = false;
            *early = false;
            let (tc, h) = (currentCommunicationPoint, communicationStepSize);
            let r = match &inst.intermediate {
                Some(im) => {
                    let mut ask = |t: f64, why: InputRequest| {
                        ask_intermediate(inst, im, t, why == InputRequest::AcceptedStep)
                    };
                    do_step(core, tc, h, Some(&mut ask))
                }
                None => do_step(core, tc, h, None),
            };
            for note in core.sim.take_notes() {
                inst.log(Status::Warning, &format!("fmi3DoStep: {note}"));
            }
            let adv = r?;
            *lst = core.sim.time();
            core.last_successful_time = *lst;
            match adv {
                Advance::Completed => Ok(Status::Ok),
                Advance::Discard {
                    last_successful_time,
                    ..
                } => {
                    inst.log(
                        Status::Discard,
                        &format!("fmi3DoStep: the integrator could not reach t = {} and stopped at t = {} ({}); continue from there with a smaller step, or restore a saved state", show_real(tc + h), show_real(last_successful_time), core.sim.last_failure().unwrap_or_else(|| "no reason given".into())),
                    );
                    Ok(Status::Discard)
                }
                Advance::EarlyReturn { event } => {
                    // The state, outputs and lastSuccessfulTime are at the contact instant; the
                    // importer continues with doStep from there.
                    *early = true;
                    inst.log_event(&format!(
                        "fmi3DoStep: early return at t = {} (contact {} {}) before the communication point {}",
                        show_real(event.t),
                        event.index,
                        if event.begins { "closes" } else { "opens" },
                        show_real(tc + h)
                    ));
                    Ok(Status::Ok)
                }
            }
        })
    }
}
const _: fmi3DoStepTYPE = Some(fmi3DoStep);

/// Ask the importer for the intermediate inputs at `t`, after an accepted internal step
/// (`step_finished`) or at a stage time of a step in progress. The instance core stays locked
/// by the step; the importer's `fmi3SetFloat64` calls land in the inbox (see `set_float64`).
fn ask_intermediate(
    inst: &Instance,
    im: &Intermediate,
    t: f64,
    step_finished: bool,
) -> Vec<(usize, f64)> {
    {
        let mut ib = inst.inbox.lock().unwrap_or_else(|p| p.into_inner());
        ib.active = true;
        ib.values.clear();
    }
    let (mut early_requested, mut early_time) = (false, t);
    // SAFETY: the importer's callback with its own environment pointer and valid out pointers.
    // No lock on the inbox is held across the call.
    unsafe {
        (im.callback)(
            im.env.0,
            t,
            true,
            false,
            step_finished,
            false,
            &mut early_requested,
            &mut early_time,
        )
    };
    let mut ib = inst.inbox.lock().unwrap_or_else(|p| p.into_inner());
    ib.active = false;
    std::mem::take(&mut ib.values)
}

// ---------------------------------------------------------------- Scheduled Execution

#[no_mangle]
pub unsafe extern "C" fn fmi3ActivateModelPartition(
    instance: fmi3Instance,
    _clockReference: fmi3ValueReference,
    _activationTime: fmi3Float64,
) -> fmi3Status {
    unsafe {
        b3(instance, "fmi3ActivateModelPartition", M_ANY, |_, _| {
            Err(Fail::arg(
                "not supported: this FMU implements Co-Simulation only",
            ))
        })
    }
}
const _: fmi3ActivateModelPartitionTYPE = Some(fmi3ActivateModelPartition);
