#!/usr/bin/env python3
"""Simulate an FMU with fmpy (an importer independent of mbsfmu) and print a summary.

Usage: run_fmu.py FILE.fmu [--input in.csv] [--stop T] [--step H]
The input CSV has a `time` column and one column per FMU input (names as in the FMU).
"""
import argparse
import sys

import numpy as np
from fmpy import read_model_description, simulate_fmu


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("fmu")
    ap.add_argument("--input")
    ap.add_argument("--stop", type=float)
    ap.add_argument("--step", type=float)
    a = ap.parse_args()
    md = read_model_description(a.fmu)
    inputs = None
    if a.input:
        data = np.genfromtxt(a.input, delimiter=",", names=True)
        names = ["time"] + [n for n in data.dtype.names if n != "time"]
        inputs = np.array([tuple(r) for r in data[names]], dtype=[(n, np.float64) for n in names])
    res = simulate_fmu(a.fmu, stop_time=a.stop, output_interval=a.step, input=inputs)
    outs = [v.name for v in md.modelVariables if v.causality == "output"]
    print(f"{md.modelName} (FMI {md.fmiVersion}) in fmpy: {len(res)} communication points, t = {res['time'][0]:g} .. {res['time'][-1]:g} s")
    for n in outs:
        col = res[n]
        print(f"  {n:>14}: start {col[0]: .6g}  end {col[-1]: .6g}  min {col.min(): .6g}  max {col.max(): .6g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
