#!/usr/bin/env python3
"""fmpy calling the FMU (issue 7's FMU overhead, the Python importer's view): per-call time of
doStep (h = 1 ms) and of getFloat64 / getReal with one value reference, through fmpy's
FMU3Slave / FMU2Slave (ctypes). Process CPU time per call, median / min / max over repeats.

Usage: fmu_overhead_fmpy.py FMU3 FMU2 [REPEATS]   (prints one JSON object)
"""

import json
import statistics
import sys
import time

from fmpy import extract, read_model_description
from fmpy.fmi2 import FMU2Slave
from fmpy.fmi3 import FMU3Slave


def bench(f, calls, repeats):
    ns = []
    for _ in range(repeats):
        t0 = time.process_time_ns()
        for _ in range(calls):
            f()
        ns.append((time.process_time_ns() - t0) / calls)
    return {"median_ns": statistics.median(ns), "min_ns": min(ns), "max_ns": max(ns),
            "repeats": repeats, "calls_per_repeat": calls}


def open_slave(path, cls):
    md = read_model_description(path)
    d = extract(path)
    vr = {v.name: v.valueReference for v in md.modelVariables}
    guid = getattr(md, "instantiationToken", None) or md.guid
    s = cls(guid=guid, unzipDirectory=d, modelIdentifier=md.coSimulation.modelIdentifier, instanceName="fmpy")
    s.instantiate()
    return s, vr


def main():
    fmu3, fmu2 = sys.argv[1], sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    out = {}
    s, vr = open_slave(fmu3, FMU3Slave)
    s.enterInitializationMode(startTime=0.0)
    s.exitInitializationMode()
    x = [vr["x"]]
    out["fmpy3_get1"] = bench(lambda: s.getFloat64(x), 20000, repeats)
    t = [0.0]

    def step3():
        s.doStep(currentCommunicationPoint=t[0], communicationStepSize=1e-3)
        t[0] += 1e-3

    out["fmpy3_dostep"] = bench(step3, 2000, repeats)
    s.terminate()
    s.freeInstance()
    s, vr = open_slave(fmu2, FMU2Slave)
    s.setupExperiment(startTime=0.0)
    s.enterInitializationMode()
    s.exitInitializationMode()
    x = [vr["x"]]
    out["fmpy2_get1"] = bench(lambda: s.getReal(x), 20000, repeats)
    t = [0.0]

    def step2():
        s.doStep(currentCommunicationPoint=t[0], communicationStepSize=1e-3)
        t[0] += 1e-3

    out["fmpy2_dostep"] = bench(step2, 2000, repeats)
    s.terminate()
    s.freeInstance()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
