#!/usr/bin/env python3
"""Exudyn peer benchmarks (issue 7): the same physical models in Exudyn's own terms
(exudyn_models.py), solved with its generalized-alpha and its implicit trapezoidal rule
(TrapezoidalIndex2) at fixed steps swept over a range, error against the same references as the
SUNDIALS peers (benches/peers/data), time from Exudyn's own solver timer
(`mbs.sys['dynamicSolver'].timer.total`, enabled by simulationSettings.displayComputationTime)
and process CPU time around SolveDynamic for comparison.

Usage: .venv/bin/python tools/peers/exudyn_bench.py [--problems dp,slider,chain4,...]
       [--repeats 5] [--validate] [--out benches/peers/results/exudyn.json]
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

import exudyn as exu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import exudyn_models as em  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(ROOT, "benches", "peers", "data")


def read_reference(name):
    with open(os.path.join(DATA, name)) as f:
        lines = [l for l in f if not l.startswith("#")]
    header = lines[0].strip().split(",")
    data = np.array([[float(x) for x in l.split(",")] for l in lines[1:]])
    return {h: data[:, i] for i, h in enumerate(header)}


def wrap(a):
    return (a + np.pi) % (2 * np.pi) - np.pi


PROBLEMS = {
    "dp": dict(name="double_pendulum_stiff", t_end=2.0, ref="double_pendulum_stiff.csv", dt_ref=1e-3,
               steps=[500, 1000, 2000, 4000, 10000, 20000, 40000]),
    "slider": dict(name="slider_crank", t_end=8.0, ref="slider_crank.csv", dt_ref=1e-2,
                   steps=[200, 400, 800, 1600, 3200, 8000, 16000, 32000, 64000]),
}
# The long chains sweep only the step counts around error 1e-4 (a run at N = 64 costs ~5-8 s).
for n, dt, steps in ((4, 0.1, None), (8, 0.1, None), (16, 0.1, None), (32, 0.25, [4000, 8000, 16000, 32000]),
                     (64, 0.5, [8000, 16000, 32000])):
    PROBLEMS[f"chain{n}"] = dict(name=f"pendulum_chain_n{n}", n=n, t_end=200.0, ref=f"pendulum_chain_n{n}.csv", dt_ref=dt,
                                 steps=steps or [2000, 4000, 8000, 16000, 32000, 64000])


def build(key, sc):
    if key == "dp":
        return em.double_pendulum(sc)
    if key == "slider":
        return em.slider_crank(sc)
    return em.chain(sc, PROBLEMS[key]["n"])


def observe(key, mbs, sensors, t_ref):
    """Observed values at the reference times (sensors written at the reference spacing)."""
    if key in ("dp", "slider"):
        (s, col), = sensors.values()
        d = mbs.GetSensorStoredData(s)
        sign = -1.0 if key == "slider" else 1.0  # Exudyn's connector force is the reaction
        return d[:, 0], sign * d[:, 1 + col][:, None]
    n = PROBLEMS[key]["n"]
    pos = [mbs.GetSensorStoredData(sensors[f"p{k}"]) for k in range(n)]
    t = pos[0][:, 0]
    w = em.W
    px, py = 2.0 + 0.3 * np.sin(w * t), 0.2 * np.sin(w * t)
    phis = []
    for k in range(n):
        x, y = pos[k][:, 1], pos[k][:, 2]
        phis.append(np.arctan2(x - px, -(y - py)))
        px, py = x, y
    return t, np.array(phis).T


def run(key, solver, n_steps):
    p = PROBLEMS[key]
    sc = exu.SystemContainer()
    mbs, sensors = build(key, sc)
    mbs.Assemble()
    ss = exu.SimulationSettings()
    ti = ss.timeIntegration
    ti.endTime = p["t_end"]
    ti.numberOfSteps = n_steps
    ti.verboseMode = 0
    ss.solutionSettings.writeSolutionToFile = False  # noqa (deprecated alias, still honoured)
    ss.solutionSettings.sensorsWritePeriod = max(p["dt_ref"], p["t_end"] / n_steps)
    ss.displayComputationTime = True  # enables the solver's own timers
    ss.displayStatistics = False
    st = exu.DynamicSolverType.GeneralizedAlpha if solver == "generalized_alpha" else exu.DynamicSolverType.TrapezoidalIndex2
    c0, w0 = time.process_time(), time.perf_counter()
    # Exudyn prints its timer table when displayComputationTime is set: keep stdout clean.
    devnull = os.open(os.devnull, os.O_WRONLY)
    saved = os.dup(1)
    os.dup2(devnull, 1)
    try:
        ok = exu.SolveDynamic(mbs, ss, solverType=st, showHints=False)
    finally:
        os.dup2(saved, 1)
        os.close(devnull)
        os.close(saved)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    solver_obj = mbs.sys["dynamicSolver"]
    it = solver_obj.it
    t, obs = observe(key, mbs, sensors, None)
    ref = read_reference(p["ref"])
    cols = {"dp": ["theta1"], "slider": ["crank_torque"]}.get(key) or [f"phi_{k}" for k in range(1, p["n"] + 1)]
    rv = np.array([ref[c] for c in cols]).T
    # Compare at reference times present in the output (sensor times are multiples of the
    # write period, which is a multiple of the reference spacing).
    idx_ref = np.rint(t / p["dt_ref"]).astype(int)
    keep = (np.abs(t / p["dt_ref"] - idx_ref) < 1e-6) & (idx_ref < len(ref["t"]))
    diff = obs[keep] - rv[idx_ref[keep]]
    if key != "slider":
        diff = wrap(diff)
    return dict(ok=bool(ok), timer_total_s=solver_obj.timer.total, timer_factorization_s=solver_obj.timer.factorization,
                timer_python_s=solver_obj.timer.python, cpu_s=cpu, wall_s=wall, steps=int(it.currentStepIndex) - 1,
                newton_iterations=int(it.newtonStepsCount), jacobians=int(it.newtonJacobiCount),
                compared_points=int(keep.sum()), error=float(np.max(np.abs(diff))), obs_t=t[keep], obs=obs[keep], ref=rv[idx_ref[keep]])


def stats(xs):
    return dict(median_ms=1e3 * statistics.median(xs), min_ms=1e3 * min(xs), max_ms=1e3 * max(xs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", default="dp,slider,chain4,chain8,chain16,chain32,chain64")
    ap.add_argument("--solvers", default="generalized_alpha,trapezoidal_index2")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds; longer configurations run 3 times")
    ap.add_argument("--steps", default=None, help="comma-separated step counts (overrides the sweep)")
    ap.add_argument("--validate", action="store_true", help="print the finest run's trajectory against the reference")
    ap.add_argument("--out", default=os.path.join(ROOT, "benches", "peers", "results", "exudyn.json"))
    a = ap.parse_args()
    rows = []
    for key in a.problems.split(","):
        p = PROBLEMS[key]
        steps = [int(x) for x in a.steps.split(",")] if a.steps else p["steps"]
        for solver in a.solvers.split(","):
            for n in steps:
                first = run(key, solver, n)
                timers, cpus, walls = [first["timer_total_s"]], [first["cpu_s"]], [first["wall_s"]]
                # Budget in CPU seconds (as the Rust harness): 3 runs if `repeats` would exceed it, 1 if one does.
                reps = a.repeats if first["cpu_s"] * a.repeats <= a.budget else (min(3, a.repeats) if first["cpu_s"] <= a.budget else 1)
                for _ in range(reps - 1):
                    r = run(key, solver, n)
                    timers.append(r["timer_total_s"])
                    cpus.append(r["cpu_s"])
                    walls.append(r["wall_s"])
                row = dict(problem=p["name"], solver=solver, run_id=os.environ.get("BENCH_RUN_ID", ""), steps=n, step_size=p["t_end"] / n, ok=first["ok"],
                           steps_taken=first["steps"],  # differs from steps when Exudyn's adaptiveStep reduced steps
                           error=first["error"], compared_points=first["compared_points"],
                           newton_iterations=first["newton_iterations"], jacobians=first["jacobians"], repeats=len(timers),
                           solver_timer=stats(timers), cpu=stats(cpus), wall=stats(walls),
                           python_callback_s=first["timer_python_s"])
                rows.append(row)
                print(f"{p['name']:24} {solver:20} steps {n:7d}  err {first['error']:9.2e}  timer {row['solver_timer']['median_ms']:9.2f} ms "
                      f"(min {row['solver_timer']['min_ms']:.2f}, max {row['solver_timer']['max_ms']:.2f}, n={len(timers)})  cpu {row['cpu']['median_ms']:9.2f} ms  "
                      f"newton {first['newton_iterations']}  jac {first['jacobians']}", file=sys.stderr, flush=True)
                if a.validate and n == steps[-1]:
                    t, o, r = first["obs_t"], first["obs"], first["ref"]
                    for i in np.linspace(0, len(t) - 1, 11).astype(int):
                        print(f"   t {t[i]:8.3f}  exudyn {o[i][0]: .8f}  reference {r[i][0]: .8f}", file=sys.stderr)
        write(a, rows)


def write(a, rows):
    """Write the results so far; rows of (problem, solver) pairs measured now replace old ones."""
    report = dict(tool="tools/peers/exudyn_bench.py", exudyn=exu.__version__, python=platform.python_version(),
                  date_utc=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  machine=f"{platform.processor() or platform.machine()}; {os.cpu_count()} cpus; {platform.system()} {platform.release()}",
                  timing_note="solver_timer: Exudyn's own timer of the solve (mbs.sys['dynamicSolver'].timer.total, "
                              "displayComputationTime=True); cpu/wall: process CPU / wall time around exu.SolveDynamic "
                              "(includes solver setup). Stats and error from the first run. Fixed step sizes.",
                  rows=rows)
    if os.path.exists(a.out):
        old = json.load(open(a.out))
        keys = {(r["problem"], r["solver"]) for r in rows}
        report["rows"] = [r for r in old.get("rows", []) if (r["problem"], r["solver"]) not in keys] + rows
    with open(a.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
