//! TEMPORARY stand-in engine, selectable only in builds with the `standin` feature: a base-excited
//! spring–mass–damper `m ẍ = −k (x − u) − c (ẋ − u̇)` with one input `u` (base position), so
//! the co-simulation layer and the C ABI can be exercised end to end before the multibody
//! engine (`mbs::system::System`) and the model reader exist. Not a deliverable: it is selected
//! only for a model file whose first line is [`STANDIN_MARKER`].

use super::Engine;
use crate::integrate::system::{ConstraintHessians, Excitations, ForceJacobians, Mechanical, StepHooks};
use crate::integrate::MechState;
use crate::mbs::inputs::InputSignals;
use crate::mbs::spec::*;
use crate::mbs::ModelError;
use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};
use std::path::Path;

pub const STANDIN_MARKER: &str = "# mbsfmu-standin-oscillator";

/// The spec the stand-in exposes: parameters m (fixed), k, c (tunable); input u; outputs x,
/// v, a, spring force.
pub fn standin_spec(model_file: &Path) -> ModelSpec {
    let p = |name: &str, value: f64, unit: &str, tunable: bool| ParameterSpec {
        name: name.into(),
        value,
        unit: unit.into(),
        description: String::new(),
        tunable,
    };
    let o = |name: &str, unit: &str| OutputSpec {
        name: name.into(),
        unit: unit.into(),
        description: String::new(),
        quantity: OutputQuantity::Energy,
    };
    ModelSpec {
        name: "standin".into(),
        description: "stand-in oscillator".into(),
        gravity: [Scalar::Const(0.0); 3],
        initialization: Initialization::Consistent,
        experiment: ExperimentSpec::default(),
        solver: crate::integrate::Settings { rtol: 1e-6, atol: 1e-8, ..Default::default() },
        parameters: vec![p("m", 1.0, "kg", false), p("k", 100.0, "N/m", true), p("c", 2.0, "N.s/m", true)],
        inputs: vec![InputSpec { name: "u".into(), unit: "m".into(), start: 0.0, description: "base position".into() }],
        bodies: vec![],
        frames: vec![],
        joints: vec![],
        drivers: vec![],
        forces: vec![],
        outputs: vec![o("x", "m"), o("v", "m/s"), o("a", "m/s2"), o("force", "N")],
        source_files: vec![model_file.to_path_buf()],
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StandInEngine {
    params: [f64; 3],
    inputs: InputSignals,
    offset: f64,
}

impl StandInEngine {
    pub fn new(spec: &ModelSpec) -> Self {
        StandInEngine {
            params: [spec.parameters[0].value, spec.parameters[1].value, spec.parameters[2].value],
            inputs: InputSignals::new(&[spec.inputs[0].start]),
            offset: 0.0,
        }
    }
    fn force(&self, t: f64, x: f64, v: f64) -> f64 {
        let [u, du, _] = self.inputs.eval(0, t);
        let [_, k, c] = self.params;
        -k * (x - u - self.offset) - c * (v - du)
    }
}

impl Engine for StandInEngine {
    fn set_parameter(&mut self, i: usize, value: f64) -> Result<(), ModelError> {
        let ok = match i {
            0 => value > 0.0,
            1 | 2 => value >= 0.0,
            _ => false,
        };
        if !ok {
            return Err(ModelError::Assembly { file: "standin".into(), message: format!("parameter {i} = {value} is not physical") });
        }
        self.params[i] = value;
        Ok(())
    }
    fn inputs_mut(&mut self) -> &mut InputSignals {
        &mut self.inputs
    }
    fn initial_state(&mut self, t0: f64) -> Result<MechState, ModelError> {
        let u = self.inputs.eval(0, t0)[0];
        Ok(MechState { t: t0, q: vec![u], v: vec![0.0], lambda: vec![] })
    }
    fn n_outputs(&self) -> usize {
        4
    }
    fn evaluate_outputs(&mut self, x: &MechState, out: &mut [f64]) {
        let f = self.force(x.t, x.q[0], x.v[0]);
        out[0] = x.q[0];
        out[1] = x.v[0];
        out[2] = f / self.params[0];
        out[3] = -f;
    }
}

impl Mechanical for StandInEngine {
    fn n_q(&self) -> usize {
        1
    }
    fn n_c(&self) -> usize {
        0
    }
    fn mass_matrix(&mut self, _t: f64, _q: &[f64], m: &mut DMatrix<f64>) {
        m[(0, 0)] = self.params[0];
    }
    fn forces(&mut self, t: f64, q: &[f64], v: &[f64], f: &mut [f64]) {
        f[0] = self.force(t, q[0], v[0]);
    }
    fn constraints(&mut self, _t: f64, _q: &[f64], _phi: &mut [f64]) {}
    fn constraint_jacobian(&mut self, _t: f64, _q: &[f64], _jac: &mut DMatrix<f64>) {}
    fn constraint_time_derivative(&mut self, _t: f64, _q: &[f64], _phi_t: &mut [f64]) {}
    fn acceleration_rhs(&mut self, _t: f64, _q: &[f64], _v: &[f64], _gamma: &mut [f64]) {}
}

impl ForceJacobians for StandInEngine {
    fn force_jacobians(&mut self, _t: f64, _q: &[f64], _v: &[f64], df_dq: &mut DMatrix<f64>, df_dv: &mut DMatrix<f64>) {
        df_dq[(0, 0)] = -self.params[1];
        df_dv[(0, 0)] = -self.params[2];
    }
}

impl ConstraintHessians for StandInEngine {
    fn constraint_force_jacobian(&mut self, _t: f64, _q: &[f64], _l: &[f64], out: &mut DMatrix<f64>) {
        out.fill(0.0);
    }
    fn mass_times_accel_jacobian(&mut self, _t: f64, _q: &[f64], _a: &[f64], out: &mut DMatrix<f64>) {
        out.fill(0.0);
    }
}

impl Excitations for StandInEngine {
    fn n_excitations(&self) -> usize {
        1
    }
    fn excitation(&mut self, t: f64, _i: usize) -> f64 {
        self.inputs.eval(0, t)[0] + self.offset
    }
    fn set_excitation_offset(&mut self, _i: usize, delta: f64) {
        self.offset = delta;
    }
}

impl StepHooks for StandInEngine {
    fn accept_step(&mut self, _t: f64, _q: &[f64], _v: &[f64], _l: Option<&[f64]>) {}
}
