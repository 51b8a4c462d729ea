#!/usr/bin/env python3
"""Reference tip positions for paper 003's pendulum chain, in minimal coordinates.

N point masses m = 1 kg on massless rods l = 1 m, the first rod hanging from the suspension
s(t) = (2 + 0.3 sin wt, 0.2 sin wt), w = 2 pi 0.05 rad/s, gravity 9.81 along -y. Angles a_i of
rod i from the downward vertical: r_k = s + l sum_{j<=k} (sin a_j, -cos a_j). Lagrange:

  sum_j n_ij l^2 [cos(a_i - a_j) a_j'' + sin(a_i - a_j) a_j'^2]
      + (N - i + 1) l [sx'' cos a_i + (sy'' + g) sin a_i] = 0,   n_ij = N - max(i, j) + 1.

Initial state: hanging straight down (a = 0) with the velocities of
`test_systems::CartesianChain::consistent_state` (minimal-norm projection): all particles move
with (0, sy'(0)), i.e. a_1' = -sx'(0)/l, the other rates zero. This is also what the engine's
assembly makes of `models/pendulum_chain.toml` "at rest" (the "projected" start; the test
`pendulum_chain_assembles_with_consistent_velocities_for_the_moving_suspension` checks the
engine against CartesianChain), so the reference serves both in tests/bdf.rs and
benches/bdf_table2.rs.

Integrated with DOP853 at rtol = atol = 1e-12; the printed difference to a second run (Radau
at 1e-10 for N <= 8, where it is affordable; DOP853 at 1e-10 otherwise) bounds the reference's
own error. Output: tests/data/integrators/pendulum_chain_tip.csv with
t and, per N, the tip x and y every 0.5 s on [0, 200].
"""
import sys
import numpy as np
from scipy.integrate import solve_ivp

G, L, M = 9.81, 1.0, 1.0
AX, AY, W = 0.3, 0.2, 2 * np.pi * 0.05


def rhs(t, z, n):
    a, ad = z[:n], z[n:]
    idx = np.arange(1, n + 1)
    nij = n - np.maximum.outer(idx, idx) + 1.0
    dif = a[:, None] - a[None, :]
    mm = M * L * L * nij * np.cos(dif)
    sxdd = -AX * W * W * np.sin(W * t)
    sydd = -AY * W * W * np.sin(W * t)
    rest = M * L * L * (nij * np.sin(dif)) @ (ad * ad)
    rest += M * (n - idx + 1.0) * L * (sxdd * np.cos(a) + (sydd + G) * np.sin(a))
    add = np.linalg.solve(mm, -rest)
    return np.concatenate([ad, add])


def tip(t, z, n):
    a = z[:n]
    sx = 2.0 + AX * np.sin(W * t)
    sy = AY * np.sin(W * t)
    return sx + L * np.sum(np.sin(a), axis=0), sy - L * np.sum(np.cos(a), axis=0)


def solve(n, method, tol, t_eval):
    z0 = np.zeros(2 * n)
    z0[n] = -AX * W / L
    sol = solve_ivp(rhs, (0.0, 200.0), z0, method=method, rtol=tol, atol=tol, t_eval=t_eval, args=(n,))
    assert sol.success, sol.message
    return tip(sol.t, sol.y, n)


def main(out):
    t_eval = np.linspace(0.0, 200.0, 401)
    ns = [4, 8, 12, 14, 16, 32, 64]
    cols = [t_eval]
    header = ["t"]
    for n in ns:
        x, y = solve(n, "DOP853", 1e-12, t_eval)
        other = "Radau" if n <= 8 else "DOP853"
        xr, yr = solve(n, other, 1e-10, t_eval)
        err = max(np.max(np.abs(x - xr)), np.max(np.abs(y - yr)))
        print(f"N = {n}: max |DOP853(1e-12) - {other}(1e-10)| of the tip = {err:.2e}", file=sys.stderr, flush=True)
        cols += [x, y]
        header += [f"x{n}", f"y{n}"]
    np.savetxt(out, np.column_stack(cols), delimiter=",", header=",".join(header), comments="", fmt="%.12e")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/integrators/pendulum_chain_tip.csv")
