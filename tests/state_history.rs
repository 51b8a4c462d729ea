//! An evaluation at a state depends on that state alone, not on the states an instance visited
//! before: a fresh `System` and one driven through other states give bit-identical answers,
//! and a serialized FMU state (`Simulation::save`, postcard as `fmi::state_bytes` encodes it)
//! continues bit for bit in a fresh instance and in the same one. Before, the joint
//! formulation's planar tree detected its plane and built the planar-first load's reference
//! (`planar::PlanarRef`) at the first pose it loaded, and the planar-first load equals the
//! spatial recursion only to round-off: after deserialization (an empty workspace) four_link's
//! outputs differed by 5e-10 from the first step on, the stiff double pendulum's by up to
//! 1.6e-9.

mod common;

use mbsfmu::cosim::{SetPhase, SimState, Simulation};
use mbsfmu::description::VariableTable;
use mbsfmu::integrate::system::Mechanical;
use mbsfmu::mbs::inputs::InputSegment;
use mbsfmu::mbs::system::System;
use nalgebra::DMatrix;
use std::path::Path;
use std::sync::Arc;

const MODELS: [&str; 2] = ["double_pendulum_stiff.toml", "four_link.toml"];

fn path(file: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(file)
}

/// The gallery model in the joint formulation (its default), the inputs on fixed cubics,
/// assembled at t = 0 (which drops four_link's redundant loop rows).
fn system(file: &str) -> System {
    let text = std::fs::read_to_string(path(file)).unwrap().replacen(
        "[model]\n",
        "[model]\nformulation = \"joint\"\n",
        1,
    );
    let spec = mbsfmu::mbs::load_model_str(&text, &path(file)).unwrap();
    let mut sys = System::new(Arc::new(spec)).unwrap();
    for (i, seg) in sys.inputs_mut().segments.iter_mut().enumerate() {
        *seg = InputSegment {
            t0: 0.0,
            coeffs: [0.01 * i as f64, 0.3, -0.7, 1.9],
        };
    }
    sys.initial_state(0.0).unwrap();
    sys
}

/// `M`, `Ψ`, the accelerations and multipliers at `(t, q, v)`, in that order.
fn evaluate(sys: &mut System, t: f64, q: &[f64], v: &[f64]) -> Vec<Vec<f64>> {
    let nq = sys.n_q();
    let mut m = DMatrix::zeros(nq, nq);
    sys.mass_matrix(t, q, &mut m);
    let mut f = vec![0.0; nq];
    sys.forces(t, q, v, &mut f);
    let (mut a, mut l) = (vec![0.0; nq], vec![0.0; sys.n_c()]);
    sys.accelerations_into(t, q, v, &mut a, &mut l).unwrap();
    vec![m.as_slice().to_vec(), f, a, l]
}

fn bits(x: &[Vec<f64>]) -> Vec<Vec<u64>> {
    x.iter()
        .map(|v| v.iter().map(|y| y.to_bits()).collect())
        .collect()
}

/// A state near the initial one: `q₀ + shift`, rates from `k` (four_link's loop closure is
/// not satisfied off `q₀`, which the evaluations do not need).
fn state(sys: &mut System, k: usize) -> (f64, Vec<f64>, Vec<f64>) {
    let x0 = sys.initial_state(0.0).unwrap();
    let nq = sys.n_q();
    let t = 0.1 + 0.23 * k as f64;
    let shift = 0.4 * (1.7 * k as f64).sin();
    let q = (0..nq)
        .map(|i| x0.q[i] + shift * (i as f64 + 1.0).sin())
        .collect();
    let v = (0..nq)
        .map(|i| 0.8 * (1.3 * i as f64 + 0.4 + t).cos())
        .collect();
    (t, q, v)
}

#[test]
fn joint_evaluations_do_not_depend_on_the_states_before() {
    for file in MODELS {
        let at = state(&mut system(file), 3);
        // Evaluated first at the state: a deserialized copy of the assembled system (its
        // workspace empty, as in an FMU state restored into another instance).
        let bytes = postcard::to_stdvec(&system(file)).unwrap();
        let mut fresh: System = postcard::from_bytes(&bytes).unwrap();
        let want = evaluate(&mut fresh, at.0, &at.1, &at.2);
        // Driven through other states first (after the initial one), each evaluated in full
        // (and the outputs, which make the spatial poses), then at the state.
        let mut driven = system(file);
        for k in [1, 5, 2, 4] {
            let (t, q, v) = state(&mut driven, k);
            evaluate(&mut driven, t, &q, &v);
            let mut out = vec![0.0; driven.n_outputs()];
            let x = mbsfmu::integrate::MechState {
                t,
                q,
                v,
                lambda: vec![0.0; driven.n_c()],
            };
            driven.evaluate_outputs(&x, &mut out).unwrap();
        }
        let got = evaluate(&mut driven, at.0, &at.1, &at.2);
        assert_eq!(
            driven.joint_planar_tree(),
            Some(true),
            "{file}: not the planar path"
        );
        for (what, (g, w)) in ["M", "Ψ", "p̈", "λ"]
            .iter()
            .zip(bits(&got).iter().zip(&bits(&want)))
        {
            assert_eq!(g, w, "{file}: {what} depends on the states before");
        }
        // The same state again in the driven instance (its caches hold it now).
        let again = evaluate(&mut driven, at.0, &at.1, &at.2);
        assert_eq!(bits(&again), bits(&want), "{file}: second evaluation");
    }
}

fn simulation(file: &str) -> Simulation<System> {
    let spec = Arc::new(mbsfmu::mbs::load_model(&path(file)).unwrap());
    let table = Arc::new(VariableTable::from_spec(&spec));
    Simulation::new(spec.clone(), table, System::new(spec).unwrap())
}

/// Steps of 1 ms from `t`, the inputs set at each communication point; the outputs' bits
/// after each step.
fn steps(sim: &mut Simulation<System>, t: f64, n: usize) -> Vec<Vec<u64>> {
    let inputs: Vec<u32> = sim
        .spec()
        .inputs
        .iter()
        .map(|i| sim.table().by_name(&i.name).unwrap().value_reference)
        .collect();
    (1..=n)
        .map(|k| {
            let tc = t + (k - 1) as f64 * 1e-3;
            for (j, &vr) in inputs.iter().enumerate() {
                let u = 0.01 * (9.4 * tc + j as f64).sin();
                sim.set_real(vr, u, SetPhase::Stepping).unwrap();
            }
            common::cosim::advance(sim, t + k as f64 * 1e-3);
            sim.outputs().unwrap().iter().map(|y| y.to_bits()).collect()
        })
        .collect()
}

#[test]
fn a_serialized_fmu_state_continues_bit_for_bit() {
    for file in MODELS {
        let mut sim = simulation(file);
        sim.initialize().unwrap();
        steps(&mut sim, 0.0, 100);
        let t = sim.time();
        let saved = sim.save();
        let bytes = postcard::to_stdvec(&saved).unwrap();
        let want = steps(&mut sim, t, 20);
        let restored = || -> SimState<System> { postcard::from_bytes(&bytes).unwrap() };
        // Into a fresh instance, initialized at t = 0 and stepped elsewhere.
        let mut other = simulation(file);
        other.initialize().unwrap();
        steps(&mut other, 0.0, 3);
        other.restore_owned(restored()).unwrap();
        assert_eq!(steps(&mut other, t, 20), want, "{file}: another instance");
        // Into the instance it came from, now 20 steps further.
        sim.restore_owned(restored()).unwrap();
        assert_eq!(steps(&mut sim, t, 20), want, "{file}: the same instance");
        // The in-memory state, for comparison.
        sim.restore(&saved).unwrap();
        assert_eq!(steps(&mut sim, t, 20), want, "{file}: in memory");
    }
}
