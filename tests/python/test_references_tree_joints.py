"""Checks of tools/references/tree_joints.py (tests/data/tree_joint_*.csv) against facts that do
not come from its own equations: energy conservation (cylinder, Hooke pendulum), the Hooke
pendulum's Newton-Euler balance about the joint (no torque about either cross axis, the reaction
force m (a - g)) evaluated on its Lagrange accelerations with positions differentiated
numerically, and the planar block against an independent integrator (Radau) and an
independent set of coordinates (the joint point instead of the centre). The fresh-run and
documentation checks of test_references.py cover these files too.
"""

import os
import sys

import numpy as np
from scipy.integrate import solve_ivp

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "references"))

import common  # noqa: E402
import tree_joints as tj  # noqa: E402


def load(name):
    cols, data, _ = common.read_csv(os.path.join(ROOT, "tests", "data", name))
    return {c: data[:, i] for i, c in enumerate(cols)}


def test_cylinder_energy_conserved_and_travel_closed_form():
    d = load("tree_joint_cylinder.csv")
    e = d["energy"]
    assert np.ptp(e) < 1e-9 * abs(e).max()
    w = np.sqrt(50.0 / 2.0)
    assert np.allclose(d["s"], -0.2 + 0.2 * np.cos(w * d["t"]) + 0.1 / w * np.sin(w * d["t"]), atol=1e-14)
    assert np.ptp(d["th"]) > 1.0  # it really swings


def rot_x(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def rot_y(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def test_hooke_energy_and_newton_euler_about_the_joint():
    d = load("tree_joint_hooke.csv")
    assert np.ptp(d["energy"]) < 1e-10 * abs(d["energy"]).max()
    m, length, j_body, g = 1.0, 0.5, np.diag([0.02, 0.03, 0.04]), np.array([0.0, 0.0, -9.81])
    # Rates from the CSV's own run: re-integrate the state to get (t1', t2', t1'', t2'').
    ts = d["t"][::25]
    ref = solve_ivp(
        lambda t, y: hooke_rhs(y), (0.0, ts[-1]), [0.0, 0.0, 1.5, 2.0],
        method="DOP853", t_eval=ts, rtol=1e-12, atol=1e-12,
    )
    worst_torque, worst_force = 0.0, 0.0
    for k, t in enumerate(ts):
        th, thd = ref.y[:2, k], ref.y[2:, k]
        thdd = np.array(hooke_rhs(ref.y[:, k])[2:])
        assert np.allclose(th, [d["t1"][25 * k], d["t2"][25 * k]], atol=1e-9)

        def centre(h):
            q = th + thd * h + 0.5 * thdd * h * h
            return rot_x(q[0]) @ rot_y(q[1]) @ np.array([0.0, 0.0, -length])

        h = 1e-4
        r = centre(0.0)
        a = (centre(h) - 2.0 * r + centre(-h)) / (h * h)
        v = (centre(h) - centre(-h)) / (2.0 * h)
        rot = rot_x(th[0]) @ rot_y(th[1])
        ex, ey2 = np.array([1.0, 0.0, 0.0]), rot_x(th[0]) @ np.array([0.0, 1.0, 0.0])
        w = thd[0] * ex + thd[1] * ey2
        wd = thdd[0] * ex + thdd[1] * ey2 + thd[1] * thd[0] * np.cross(ex, ey2)
        j = rot @ j_body @ rot.T
        dh = m * np.cross(r, a) + j @ wd + np.cross(w, j @ w)
        tau = np.cross(r, m * g)
        # The universal joint transmits no torque about its two axes.
        worst_torque = max(worst_torque, abs((dh - tau) @ ex), abs((dh - tau) @ ey2))
        f = m * (a - g)
        i = 25 * k
        worst_force = max(worst_force, abs(f[2] - d["f_y1"][i]), abs(f[0] - d["f_z1"][i]))
        assert np.allclose(v @ v, length**2 * (thd[1] ** 2 + np.cos(th[1]) ** 2 * thd[0] ** 2))
    assert worst_torque < 1e-6, worst_torque
    assert worst_force < 1e-5, worst_force


def hooke_rhs(y):
    m, length, jx, jy, jz, g = 1.0, 0.5, 0.02, 0.03, 0.04, 9.81
    t1, t2, d1, d2 = y
    a = (m * length**2 + jx) * np.cos(t2) ** 2 + jz * np.sin(t2) ** 2
    ap = 2.0 * np.sin(t2) * np.cos(t2) * (jz - m * length**2 - jx)
    b = m * length**2 + jy
    return [
        d1,
        d2,
        (-m * g * length * np.sin(t1) * np.cos(t2) - ap * d1 * d2) / a,
        (-m * g * length * np.cos(t1) * np.sin(t2) + 0.5 * ap * d1 * d1) / b,
    ]


def test_planar_block_in_joint_point_coordinates_with_radau():
    """The same block integrated in the joint point's coordinates (p = c + R(th) (0.1, 0.05))
    by Radau: the centre follows the committed table."""
    d = load("tree_joint_planar.csv")
    m, izz = 2.0, 0.08
    off = np.array([0.1, 0.05])  # joint point relative to the centre at t = 0
    springs = [
        (np.array([-1.0, 0.5]), np.array([-0.2, 0.1]), 60.0, 0.5, 0.5),
        (np.array([1.0, 0.8]), np.array([0.3, -0.1]), 40.0, 0.3, 0.6),
    ]

    def rmat(th):
        return np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]])

    def perp(u):
        return np.array([-u[1], u[0]])

    def rhs(_, y):
        p, th, pd, w = y[:2], y[2], y[3:5], y[5]
        ro = rmat(th) @ off
        c, cd = p - ro, pd - w * perp(ro)
        f, tau = np.array([0.0, -m * 9.81]), 0.0
        for anchor, p0, k, damp, l0 in springs:
            rp = rmat(th) @ p0
            dd = c + rp - anchor
            l = np.linalg.norm(dd)
            ld = dd @ (cd + w * perp(rp)) / l
            fi = -(k * (l - l0) + damp * ld) * dd / l
            f += fi
            tau += rp[0] * fi[1] - rp[1] * fi[0]
        wd = tau / izz
        # p'' = c'' + d²/dt² (R off) = f/m + wd perp(ro) - w² ro
        pdd = f / m + wd * perp(ro) - w * w * ro
        return [pd[0], pd[1], w, pdd[0], pdd[1], wd]

    w0 = 1.5
    p0 = off
    pd0 = np.array([0.3, -0.2]) + w0 * perp(off)
    sol = solve_ivp(rhs, (0.0, d["t"][-1]), [p0[0], p0[1], 0.0, pd0[0], pd0[1], w0],
                    method="Radau", t_eval=d["t"], rtol=1e-12, atol=1e-12)
    assert sol.success
    centre = np.array([sol.y[:2, k] - rmat(sol.y[2, k]) @ off for k in range(len(d["t"]))])
    assert np.abs(centre[:, 0] - d["x"]).max() < 1e-8
    assert np.abs(centre[:, 1] - d["y"]).max() < 1e-8
    assert np.abs(sol.y[2] - d["th"]).max() < 1e-8
    assert np.abs(sol.y[5] - d["wz"]).max() < 1e-7
