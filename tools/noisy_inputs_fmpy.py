#!/usr/bin/env python3
"""A rig master with noisy sampled position inputs, through fmpy's FMI 2 C calls (ctypes):
the gallery's pendulum_chain FMU driven at H = 1 ms with susp_x = 2 + 0.3 sin(pi t) and
susp_y = 0.2 sin(pi t), each sample with seeded white noise, values set before every doStep
and no input derivatives (docs/fmi-runtime.md, "Noise on a moving driven position").

Usage: noisy_inputs_fmpy.py FMU INTEGRATOR NOISE [T_END [param=value ...]]
  INTEGRATOR: the solver.integrator enumeration value (bdf 1, dopri5 11, ...; `mbsfmu info`)
  NOISE: standard deviation of the noise in metres (1e-4 in the docs' table)
  param=value: a Real start value (solver.rtol=1e-5), or jac=N for solver.jacobian
Prints one line: process CPU of the master loop and the FMU's statistics.
Export the FMU first: mbsfmu export models/pendulum_chain.toml --fmi 2 -o chain.fmu
(copy the model with `reconstruction = "linear"` under each input to compare the modes).
"""

import math
import sys
import time

import numpy as np
from fmpy import extract, read_model_description
from fmpy.fmi2 import FMU2Slave


def main():
    fmu, integrator, noise = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    t_end = float(sys.argv[4]) if len(sys.argv) > 4 else 2.0
    extra = dict(a.split("=", 1) for a in sys.argv[5:])
    md = read_model_description(fmu)
    vr = {v.name: v.valueReference for v in md.modelVariables}
    s = FMU2Slave(guid=md.guid, unzipDirectory=extract(fmu),
                  modelIdentifier=md.coSimulation.modelIdentifier, instanceName="rig")
    s.instantiate()
    s.setupExperiment(startTime=0.0)
    s.setInteger([vr["solver.integrator"]], [integrator])
    for name, value in extra.items():
        if name == "jac":
            s.setInteger([vr["solver.jacobian"]], [int(value)])
        else:
            s.setReal([vr[name]], [float(value)])
    s.enterInitializationMode()
    s.exitInitializationMode()
    rng = np.random.default_rng(7)
    h, w = 1e-3, math.pi
    steps = int(round(t_end / h))
    t = 0.0
    c0 = time.process_time()
    for k in range(steps):
        ux = 2.0 + 0.3 * math.sin(w * t) + noise * rng.standard_normal()
        uy = 0.2 * math.sin(w * t) + noise * rng.standard_normal()
        s.setReal([vr["susp_x"], vr["susp_y"]], [ux, uy])
        s.doStep(currentCommunicationPoint=t, communicationStepSize=h)
        t = (k + 1) * h
    cpu = time.process_time() - c0
    ints = ["stats.steps", "stats.rejected_steps", "stats.f_evals", "stats.jac_evals",
            "stats.jac_updates", "stats.lu", "stats.restarts"]
    reals = ["stats.cpu_time", "tip_x", "tip_y"]
    values = list(s.getInteger([vr[n] for n in ints])) + list(s.getReal([vr[n] for n in reals]))
    print(f"integrator={integrator} noise={noise} master_cpu={cpu:.3f}s "
          + " ".join(f"{n.split('.')[-1]}={v:.6g}" for n, v in zip(ints + reals, values)))
    s.terminate()
    s.freeInstance()


if __name__ == "__main__":
    main()
