//! What the runtime supports, written into the `CoSimulation` element. One struct for both FMI
//! versions so the FMI 2 and FMI 3 flags cannot drift apart; the runtime (`src/fmi`) should read
//! [`Capabilities::RUNTIME`] too when it decides what to refuse.

use super::xml::FmiVersion;
use crate::mbs::spec::{ForceKind, ModelSpec};

/// Co-Simulation capability flags. Field names follow the FMI attributes (spellings per version
/// in the writer).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capabilities {
    pub needs_execution_tool: bool,
    pub can_be_instantiated_only_once_per_process: bool,
    pub can_handle_variable_communication_step_size: bool,
    /// FMI 2 only (FMI 3 has intermediate update instead).
    pub can_interpolate_inputs: bool,
    pub max_output_derivative_order: u32,
    /// FMI 2 only; spelled `canRunAsynchronuously` in the standard.
    pub can_run_asynchronuously: bool,
    /// FMI 2 only: the FMU allocates with its own allocator and ignores the callbacks.
    pub can_not_use_memory_management_functions: bool,
    pub can_get_and_set_fmu_state: bool,
    pub can_serialize_fmu_state: bool,
    pub provides_directional_derivatives: bool,
    /// FMI 3 only.
    pub provides_adjoint_derivatives: bool,
    /// FMI 3 only.
    pub provides_intermediate_update: bool,
    /// FMI 3 only.
    pub can_return_early_after_intermediate_update: bool,
    /// FMI 3 only.
    pub might_return_early_from_do_step: bool,
    /// FMI 3 only.
    pub has_event_mode: bool,
}

impl Capabilities {
    /// What the mbsfmu runtime implements. Change here, nowhere else.
    pub const RUNTIME: Capabilities = Capabilities {
        needs_execution_tool: false,
        can_be_instantiated_only_once_per_process: false,
        can_handle_variable_communication_step_size: true,
        can_interpolate_inputs: true,
        // fmi2GetRealOutputDerivatives / fmi3GetOutputDerivatives: orders 1 and 2 along the
        // solution through the current state (cosim::Simulation::output_derivative).
        max_output_derivative_order: 2,
        can_run_asynchronuously: false,
        // Rust's global allocator is used; the FMI 2 callbacks are ignored.
        can_not_use_memory_management_functions: true,
        can_get_and_set_fmu_state: true,
        can_serialize_fmu_state: true,
        provides_directional_derivatives: true,
        // fmi3GetAdjointDerivative is implemented (transpose of the output/input Jacobian).
        provides_adjoint_derivatives: true,
        provides_intermediate_update: true,
        // The importer's earlyReturnRequested from the intermediate-update callback is not
        // acted on.
        can_return_early_after_intermediate_update: false,
        // fmi3DoStep returns early at contact events when the importer allows it
        // (earlyReturnAllowed); model-dependent, see `for_model`.
        might_return_early_from_do_step: true,
        has_event_mode: false,
    };

    /// All flags false / zero: what an importer must assume when an attribute is absent.
    pub const NONE: Capabilities = Capabilities {
        needs_execution_tool: false,
        can_be_instantiated_only_once_per_process: false,
        can_handle_variable_communication_step_size: false,
        can_interpolate_inputs: false,
        max_output_derivative_order: 0,
        can_run_asynchronuously: false,
        can_not_use_memory_management_functions: false,
        can_get_and_set_fmu_state: false,
        can_serialize_fmu_state: false,
        provides_directional_derivatives: false,
        provides_adjoint_derivatives: false,
        provides_intermediate_update: false,
        can_return_early_after_intermediate_update: false,
        might_return_early_from_do_step: false,
        has_event_mode: false,
    };

    /// The flags as they hold for `spec`: early return happens only at contact events, so a
    /// model without penalty contacts never returns early and does not claim it.
    pub fn for_model(self, spec: &ModelSpec) -> Capabilities {
        let mut c = self;
        let contacts = spec.forces.iter().any(|f| {
            matches!(
                f.kind,
                ForceKind::Contact { .. } | ForceKind::JointStop { .. } | ForceKind::Tire(_)
            )
        });
        c.might_return_early_from_do_step &= contacts;
        c
    }

    /// The flags that exist in `version`; the others are reset to their absent value, so a
    /// description read back from XML compares equal to the one written.
    pub fn for_version(self, version: FmiVersion) -> Capabilities {
        let mut c = self;
        match version {
            FmiVersion::Fmi2 => {
                c.provides_adjoint_derivatives = false;
                c.provides_intermediate_update = false;
                c.can_return_early_after_intermediate_update = false;
                c.might_return_early_from_do_step = false;
                c.has_event_mode = false;
            }
            FmiVersion::Fmi3 => {
                c.can_interpolate_inputs = false;
                c.can_run_asynchronuously = false;
                c.can_not_use_memory_management_functions = false;
            }
        }
        c
    }

    /// `(attribute name, value)` for the `CoSimulation` element of `version`, in schema order.
    pub fn attributes(&self, version: FmiVersion) -> Vec<(&'static str, String)> {
        let b = |x: bool| x.to_string();
        match version {
            FmiVersion::Fmi2 => vec![
                ("needsExecutionTool", b(self.needs_execution_tool)),
                (
                    "canHandleVariableCommunicationStepSize",
                    b(self.can_handle_variable_communication_step_size),
                ),
                ("canInterpolateInputs", b(self.can_interpolate_inputs)),
                (
                    "maxOutputDerivativeOrder",
                    self.max_output_derivative_order.to_string(),
                ),
                ("canRunAsynchronuously", b(self.can_run_asynchronuously)),
                (
                    "canBeInstantiatedOnlyOncePerProcess",
                    b(self.can_be_instantiated_only_once_per_process),
                ),
                (
                    "canNotUseMemoryManagementFunctions",
                    b(self.can_not_use_memory_management_functions),
                ),
                ("canGetAndSetFMUstate", b(self.can_get_and_set_fmu_state)),
                ("canSerializeFMUstate", b(self.can_serialize_fmu_state)),
                (
                    "providesDirectionalDerivative",
                    b(self.provides_directional_derivatives),
                ),
            ],
            FmiVersion::Fmi3 => vec![
                ("needsExecutionTool", b(self.needs_execution_tool)),
                (
                    "canBeInstantiatedOnlyOncePerProcess",
                    b(self.can_be_instantiated_only_once_per_process),
                ),
                ("canGetAndSetFMUState", b(self.can_get_and_set_fmu_state)),
                ("canSerializeFMUState", b(self.can_serialize_fmu_state)),
                (
                    "providesDirectionalDerivatives",
                    b(self.provides_directional_derivatives),
                ),
                (
                    "providesAdjointDerivatives",
                    b(self.provides_adjoint_derivatives),
                ),
                (
                    "canHandleVariableCommunicationStepSize",
                    b(self.can_handle_variable_communication_step_size),
                ),
                (
                    "maxOutputDerivativeOrder",
                    self.max_output_derivative_order.to_string(),
                ),
                (
                    "providesIntermediateUpdate",
                    b(self.provides_intermediate_update),
                ),
                (
                    "mightReturnEarlyFromDoStep",
                    b(self.might_return_early_from_do_step),
                ),
                (
                    "canReturnEarlyAfterIntermediateUpdate",
                    b(self.can_return_early_after_intermediate_update),
                ),
                ("hasEventMode", b(self.has_event_mode)),
            ],
        }
    }

    /// Set one flag from an attribute read from XML. Unknown attributes are ignored (other
    /// tools' FMUs carry flags we do not model); returns whether the name was known.
    pub fn set_attribute(
        &mut self,
        version: FmiVersion,
        name: &str,
        value: &str,
    ) -> Result<bool, String> {
        let flag = || match value.trim() {
            "true" | "1" => Ok(true),
            "false" | "0" => Ok(false),
            other => Err(format!(
                "attribute {name}: expected true or false, found {other:?}"
            )),
        };
        let fmi2 = version == FmiVersion::Fmi2;
        match name {
            "needsExecutionTool" => self.needs_execution_tool = flag()?,
            "canBeInstantiatedOnlyOncePerProcess" => {
                self.can_be_instantiated_only_once_per_process = flag()?
            }
            "canHandleVariableCommunicationStepSize" => {
                self.can_handle_variable_communication_step_size = flag()?
            }
            "canInterpolateInputs" if fmi2 => self.can_interpolate_inputs = flag()?,
            "maxOutputDerivativeOrder" => {
                self.max_output_derivative_order = value.trim().parse().map_err(|_| {
                    format!("attribute {name}: expected an unsigned integer, found {value:?}")
                })?
            }
            "canRunAsynchronuously" if fmi2 => self.can_run_asynchronuously = flag()?,
            "canNotUseMemoryManagementFunctions" if fmi2 => {
                self.can_not_use_memory_management_functions = flag()?
            }
            "canGetAndSetFMUstate" if fmi2 => self.can_get_and_set_fmu_state = flag()?,
            "canSerializeFMUstate" if fmi2 => self.can_serialize_fmu_state = flag()?,
            "providesDirectionalDerivative" if fmi2 => {
                self.provides_directional_derivatives = flag()?
            }
            "canGetAndSetFMUState" if !fmi2 => self.can_get_and_set_fmu_state = flag()?,
            "canSerializeFMUState" if !fmi2 => self.can_serialize_fmu_state = flag()?,
            "providesDirectionalDerivatives" if !fmi2 => {
                self.provides_directional_derivatives = flag()?
            }
            "providesAdjointDerivatives" if !fmi2 => self.provides_adjoint_derivatives = flag()?,
            "providesIntermediateUpdate" if !fmi2 => self.provides_intermediate_update = flag()?,
            "mightReturnEarlyFromDoStep" if !fmi2 => self.might_return_early_from_do_step = flag()?,
            "canReturnEarlyAfterIntermediateUpdate" if !fmi2 => {
                self.can_return_early_after_intermediate_update = flag()?
            }
            "hasEventMode" if !fmi2 => self.has_event_mode = flag()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}
