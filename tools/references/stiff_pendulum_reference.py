"""Reference for paper 000's stiff double pendulum (section 5.1; models/double_pendulum_stiff.toml):
bar 1 (mass 3, length 2, J = 1) pinned at the origin, bar 2 (mass 0.3, length 3, J = 0.225)
pinned to bar 1's tip; gravity 9.81 along -y; rotational spring-dampers k1 = 400, c1 = 15 (free
angle 3*pi/2, ground-bar 1) and k2 = 3e5, c2 = 5e4 (free angle 0, bar 1-bar 2). Start: theta1 = 0,
theta2 = -pi/12 (= 23*pi/12), omega1 = 0, omega2 = 10.

Integrated independently in the two absolute bar angles with scipy's Radau at rtol = atol = 1e-12,
checked against Radau at 1e-11 and LSODA at 1e-12; theta1 and omega1 every 0.01 s to
tests/data/integrators/stiff_pendulum_reference.csv.

Run: /tmp/venv-probe/bin/python tools/references/stiff_pendulum_reference.py
"""
import os
import numpy as np
from scipy.integrate import solve_ivp

M1, M2, J1, J2, L1, L2, G = 3.0, 0.3, 1.0, 0.225, 1.0, 1.5, 9.81
K1, C1, K2, C2, A1 = 400.0, 15.0, 3e5, 5e4, 1.5 * np.pi


def rhs(t, y):
    th1, th2, w1, w2 = y
    e1, n1 = np.array([np.cos(th1), np.sin(th1)]), np.array([-np.sin(th1), np.cos(th1)])
    e2, n2 = np.array([np.cos(th2), np.sin(th2)]), np.array([-np.sin(th2), np.cos(th2)])
    # Centres: r1 = L1 e1, r2 = 2 L1 e1 + L2 e2; dr/dtheta columns.
    jr1 = np.column_stack([L1 * n1, np.zeros(2)])
    jr2 = np.column_stack([2 * L1 * n1, L2 * n2])
    mass = M1 * jr1.T @ jr1 + M2 * jr2.T @ jr2 + np.diag([J1, J2])
    # Centripetal terms: d/dt(J) w = -L e w^2.
    a1 = -L1 * e1 * w1**2
    a2 = -2 * L1 * e1 * w1**2 - L2 * e2 * w2**2
    grav = np.array([0.0, -G])
    q = jr1.T @ (M1 * grav - M1 * a1) + jr2.T @ (M2 * grav - M2 * a2)
    tau1 = -K1 * (th1 - A1) - C1 * w1
    tau2 = -K2 * (th2 - th1) - C2 * (w2 - w1)
    q += np.array([tau1 - tau2, tau2])
    return np.concatenate([[w1, w2], np.linalg.solve(mass, q)])


def main():
    ts = np.linspace(0.0, 2.0, 201)
    y0 = [0.0, -np.pi / 12, 0.0, 10.0]
    a = solve_ivp(rhs, (0, 2), y0, method="Radau", rtol=1e-12, atol=1e-12, t_eval=ts)
    b = solve_ivp(rhs, (0, 2), y0, method="Radau", rtol=1e-11, atol=1e-11, t_eval=ts)
    c = solve_ivp(rhs, (0, 2), y0, method="LSODA", rtol=1e-12, atol=1e-12, t_eval=ts)
    d1 = np.abs(a.y[0] - b.y[0]).max()
    d2 = np.abs(a.y[0] - c.y[0]).max()
    print(f"theta1: Radau 1e-12 vs 1e-11 {d1:.1e}, vs LSODA 1e-12 {d2:.1e}; steps {a.t.size} nfev {a.nfev}")
    assert max(d1, d2) < 1e-8
    out = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "stiff_pendulum_reference.csv")
    with open(out, "w") as fh:
        fh.write(f"# paper 000 stiff double pendulum, Radau 1e-12 in bar angles; vs Radau 1e-11: {d1:.1e}, vs LSODA 1e-12: {d2:.1e}\n")
        fh.write("t,theta1,theta2,omega1,omega2\n")
        for i, t in enumerate(ts):
            fh.write(",".join([repr(float(t))] + [f"{a.y[k][i]:.17e}" for k in range(4)]) + "\n")
    print("wrote", os.path.normpath(out))


if __name__ == "__main__":
    main()
