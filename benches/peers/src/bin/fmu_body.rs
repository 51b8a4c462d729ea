//! The bodies of the FMU calls timed by `tools/fmu-overhead.c`, called directly in Rust on the
//! co-simulation layer (`mbsfmu::cosim::Simulation`, what the C ABI functions wrap): the
//! difference to the C master's per-call time through `dlopen` is what our C boundary adds
//! (instance pointer check, lock, state mask, `catch_unwind`, argument checks, status mapping).
//! Same model, same call sequence, same clock (this thread's CPU time).
//!
//! Usage: `fmu_body MODEL.toml [REPEATS]`; prints one JSON object.

use mbsfmu::cosim::{SetPhase, Simulation};
use mbsfmu::description::VariableTable;
use mbsfmu::mbs::system::System;
use std::hint::black_box;
use std::sync::Arc;

fn cpu_ns() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

fn bench(
    out: &mut Vec<String>,
    name: &str,
    repeats: usize,
    calls: usize,
    mut f: impl FnMut(usize),
) {
    let mut ns: Vec<f64> = (0..repeats)
        .map(|_| {
            let t0 = cpu_ns();
            for i in 0..calls {
                f(i);
            }
            (cpu_ns() - t0) / calls as f64
        })
        .collect();
    ns.sort_by(|a, b| a.total_cmp(b));
    let n = ns.len();
    let med = if n % 2 == 1 {
        ns[n / 2]
    } else {
        0.5 * (ns[n / 2 - 1] + ns[n / 2])
    };
    out.push(format!(
        "  \"{name}\": {{\"median_ns\": {med:.2}, \"min_ns\": {:.2}, \"max_ns\": {:.2}, \"repeats\": {repeats}, \"calls_per_repeat\": {calls}}}",
        ns[0],
        ns[n - 1]
    ));
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).ok_or("usage: fmu_body MODEL.toml [REPEATS]")?;
    let repeats: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(7);
    let spec =
        Arc::new(mbsfmu::mbs::load_model(std::path::Path::new(path)).map_err(|e| e.to_string())?);
    let table = Arc::new(VariableTable::from_spec(&spec));
    let vr = |n: &str| {
        table
            .by_name(n)
            .map(|v| v.value_reference)
            .ok_or(format!("no variable {n}"))
    };
    let (vr_u, vr_x) = (vr("u")?, vr("x")?);
    let engine = System::new(spec.clone()).map_err(|e| e.to_string())?;
    let mut sim = Simulation::new(spec, table, engine);
    sim.setup_experiment(None, 0.0, None)
        .map_err(|e| e.to_string())?;
    sim.initialize().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let n_cheap = 1_000_000;
    bench(&mut out, "rust_get1", repeats, n_cheap, |_| {
        black_box(sim.get_real(black_box(vr_x)).ok());
    });
    bench(&mut out, "rust_set1", repeats, n_cheap, |i| {
        let u = 1e-3 * (i & 1) as f64;
        black_box(sim.set_real(black_box(vr_u), u, SetPhase::Stepping).ok());
    });
    let mut t = 0.0;
    bench(&mut out, "rust_dostep_tiny", repeats, 20_000, |_| {
        sim.advance_to(t + 1e-9, None).expect("step");
        t += 1e-9;
    });
    bench(&mut out, "rust_dostep", repeats, 2_000, |_| {
        sim.advance_to(t + 1e-3, None).expect("step");
        t += 1e-3;
    });
    println!("{{\n{}\n}}", out.join(",\n"));
    Ok(())
}
