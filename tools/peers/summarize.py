#!/usr/bin/env python3
"""Markdown tables from benches/peers/results/{sundials,exudyn}.json: every measured row, and per
problem and solver the CPU time at a target error, interpolated log-log between the two sweep
points that bracket it (or 'not reached').

Usage: python3 tools/peers/summarize.py [--target 1e-4]
"""

import argparse
import json
import math
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RES = os.path.join(ROOT, "benches", "peers", "results")


def load(name):
    p = os.path.join(RES, name)
    return json.load(open(p)) if os.path.exists(p) else None


def at_target(points, target):
    """points: (error, cpu_ms, setting); log-log interpolation of cpu at the target error."""
    pts = sorted((e, c, s) for e, c, s in points if e > 0 and math.isfinite(e))
    best = None
    for (e1, c1, s1), (e2, c2, s2) in zip(pts, pts[1:]):
        if e1 <= target <= e2:
            w = (math.log(target) - math.log(e1)) / (math.log(e2) - math.log(e1)) if e2 > e1 else 0.0
            c = math.exp(math.log(c1) + w * (math.log(c2) - math.log(c1)))
            if best is None or c < best[0]:
                best = (c, f"between {s1} and {s2}")
    # Cheapest run already at or below the target (covers non-monotone sweeps).
    below = [(c, s) for e, c, s in pts if e <= target]
    if below:
        c, s = min(below)
        if best is None or c < best[0]:
            best = (c, f"{s} (error {min(e for e, cc, ss in pts if ss == s):.1e})")
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", type=float, default=1e-4)
    a = ap.parse_args()
    sund, exu = load("sundials.json"), load("exudyn.json")
    series, wall = {}, {}
    print("| problem | peer | setting | error | steps | f-evals / Newton its | Jacobians | CPU ms median (min–max) | wall ms median |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in (sund or {}).get("rows", []):
        ok = r["ok"]
        err = f"{r['error']:.2e}" if ok else f"failed: {r['message']}"
        setting = f"rtol=atol={r['rtol']:.0e}"
        print(f"| {r['problem']} | SUNDIALS {r['solver']} | {setting} | {err} | {r['steps']} | {r['f_evals']} | {r['jac_evals']} | "
              f"{r['cpu']['median_ms']:.1f} ({r['cpu']['min_ms']:.1f}–{r['cpu']['max_ms']:.1f}) | {r['wall']['median_ms']:.1f} |")
        if ok:
            series.setdefault((r["problem"], "SUNDIALS " + r["solver"]), []).append((r["error"], r["cpu"]["median_ms"], setting))
            wall.setdefault((r["problem"], "SUNDIALS " + r["solver"]), []).append((r["error"], r["wall"]["median_ms"], setting))
    for r in (exu or {}).get("rows", []):
        setting = f"h={r['step_size']:.2e}"
        print(f"| {r['problem']} | Exudyn {r['solver']} | {setting} | {r['error']:.2e} | {r['steps']} | {r['newton_iterations']} | {r['jacobians']} | "
              f"{r['cpu']['median_ms']:.1f} ({r['cpu']['min_ms']:.1f}–{r['cpu']['max_ms']:.1f}) | {r['wall']['median_ms']:.1f} |")
        if r["ok"]:
            series.setdefault((r["problem"], "Exudyn " + r["solver"]), []).append((r["error"], r["cpu"]["median_ms"], setting))
            wall.setdefault((r["problem"], "Exudyn " + r["solver"]), []).append((r["error"], r["solver_timer"]["median_ms"], setting))
    print()
    print(f"CPU time at error {a.target:.0e} (log-log interpolation between bracketing sweep points):")
    print()
    print("| problem | peer | CPU ms at target | from | wall ms (SUNDIALS) / Exudyn timer ms at target |")
    print("|---|---|---|---|---|")
    for (prob, peer), pts in sorted(series.items()):
        b = at_target(pts, a.target)
        w = at_target(wall[(prob, peer)], a.target)
        print(f"| {prob} | {peer} | {'%.1f' % b[0] if b else 'not reached'} | {b[1] if b else 'smallest error %.1e' % min(p[0] for p in pts)} | "
              f"{'%.1f' % w[0] if w else '–'} |")


if __name__ == "__main__":
    main()
