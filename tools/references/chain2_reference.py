"""Reference for the suite's constrained convergence tests: CartesianChain with n = 2
(two unit masses, unit rods, g = 9.81, suspension s(t) = (2 + 0.3 sin 2t, 0.2 sin 2t)), started
from the angles theta1 = 1.0, theta2 = 0.5 (from the downward vertical) at rest relative to the
suspension. Integrated independently in minimal coordinates (the two absolute rod angles) with
scipy's DOP853 at rtol = atol = 1e-13, checked against Radau at 1e-12; written in Cartesian
coordinates to tests/data/integrators/chain2_reference.csv.

Run: /tmp/venv-probe/bin/python tools/references/chain2_reference.py
"""
import os
import numpy as np
from scipy.integrate import solve_ivp

M, L, G, AX, AY, W = 1.0, 1.0, 9.81, 0.3, 0.2, 2.0
TH0 = (1.0, 0.5)
T_END = 2.0


def susp(t):
    s, c = np.sin(W * t), np.cos(W * t)
    return (np.array([2.0 + AX * s, AY * s]), np.array([AX * W * c, AY * W * c]), np.array([-AX * W * W * s, -AY * W * W * s]))


def e(th):
    return np.array([np.sin(th), -np.cos(th)])


def de(th):
    return np.array([np.cos(th), np.sin(th)])


def rhs(t, y):
    th, om = y[:2], y[2:]
    _, _, sdd = susp(t)
    jac = np.zeros((4, 2))
    jac[0:2, 0] = L * de(th[0])
    jac[2:4, 0] = L * de(th[0])
    jac[2:4, 1] = L * de(th[1])
    jdot_om = np.concatenate([-L * e(th[0]) * om[0] ** 2, -L * e(th[0]) * om[0] ** 2 - L * e(th[1]) * om[1] ** 2])
    force = np.array([0.0, -M * G, 0.0, -M * G])
    base = np.concatenate([sdd, sdd])
    lhs = M * jac.T @ jac
    r = jac.T @ (force - M * (base + jdot_om))
    return np.concatenate([om, np.linalg.solve(lhs, r)])


def cartesian(t, y):
    th, om = y[:2], y[2:]
    s, sd, _ = susp(t)
    r1 = s + L * e(th[0])
    r2 = r1 + L * e(th[1])
    v1 = sd + L * de(th[0]) * om[0]
    v2 = v1 + L * de(th[1]) * om[1]
    return np.concatenate([r1, r2, v1, v2])


def main():
    ts = np.linspace(0.0, T_END, 21)
    y0 = np.array([TH0[0], TH0[1], 0.0, 0.0])
    a = solve_ivp(rhs, (0.0, T_END), y0, method="DOP853", rtol=1e-13, atol=1e-13, t_eval=ts)
    b = solve_ivp(rhs, (0.0, T_END), y0, method="Radau", rtol=1e-12, atol=1e-12, t_eval=ts)
    diff = max(np.abs(cartesian(t, a.y[:, i]) - cartesian(t, b.y[:, i])).max() for i, t in enumerate(ts))
    print(f"DOP853 1e-13 vs Radau 1e-12, max Cartesian difference: {diff:.2e}")
    assert diff < 1e-9
    out = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "chain2_reference.csv")
    with open(out, "w") as fh:
        fh.write(f"# chain2 reference, DOP853 rtol=atol=1e-13 in minimal coordinates; vs Radau 1e-12: {diff:.1e}\n")
        fh.write("t,x1,y1,x2,y2,vx1,vy1,vx2,vy2\n")
        for i, t in enumerate(ts):
            row = cartesian(t, a.y[:, i])
            fh.write(",".join([repr(float(t))] + [f"{x:.17e}" for x in row]) + "\n")
    print("wrote", os.path.normpath(out))


if __name__ == "__main__":
    main()
