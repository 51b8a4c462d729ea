#!/usr/bin/env python3
"""Paper 000's stiff double pendulum (section 5.1) in minimal coordinates (independent reference).

Bars (slender-bar inertias about the centre, I = m L^2 / 12, L the full length):
    bar 1: m1 = 3,   L1 = 2, I1 = 1,     revolute to ground at the origin, centre at a1 = 1
    bar 2: m2 = 0.3, L2 = 3, I2 = 0.225, revolute to the tip of bar 1,     centre at a2 = 1.5
(the paper's "L1 = 1, L2 = 1.5" are the half lengths: its centres (1, 0), (3.4488887, -0.388228)).
Coordinates: absolute bar angles theta1, theta2 about +z (from +x).
Rotational spring-dampers, deviation continuous in time, initial deviation taken in (-pi, pi]:
    ground-bar 1: k1 = 400, c1 = 15,   free angle 3 pi/2 on theta1
                  d1 = theta1 - theta1(0) + wrap(theta1(0) - 3 pi/2)           (= theta1 + pi/2)
    bar 1-bar 2:  k2 = 3e5, c2 = 5e4,  free angle 0 on theta2 - theta1
                  d2 = (theta2 - theta1) - rel(0) + wrap(rel(0)), rel = theta2 - theta1  (= rel - 2 pi)
Lagrange's equations (g = 9.81 along -y, P = m2 L1 a2):
    [I1 + m1 a1^2 + m2 L1^2      P cos(th1 - th2)] [th1'']   [-P sin(th1 - th2) th2'^2 + Q1]
    [P cos(th1 - th2)            I2 + m2 a2^2    ] [th2''] = [ P sin(th1 - th2) th1'^2 + Q2]
    Q1 = -(m1 a1 + m2 L1) g cos th1 + tau1 - tau2,   Q2 = -m2 a2 g cos th2 + tau2
    tau1 = -k1 d1 - c1 th1',   tau2 = -k2 d2 - c2 (th2' - th1')
Initial: theta1 = 0, theta2 = 23 pi/12, omega1 = 0, omega2 = 10.
Energy E = T + V_gravity + k1 d1^2/2 + k2 d2^2/2 decreases by the dissipated work
W = int c1 th1'^2 + c2 (th2' - th1')^2 dt, integrated alongside as a check (E + W = E(0)).
Solved by scipy solve_ivp Radau at rtol = atol = 1e-12 (the problem is stiff: eigenvalue ~ -1e5).
--springs 0 0 0 0 gives the plain (conservative, non-stiff) double pendulum with the same bars.
Columns: t, theta1, theta2, omega1, omega2, energy, dissipated.
"""

import numpy as np
from scipy.integrate import solve_ivp

import common

G = 9.81
M1, L1, M2, L2 = 3.0, 2.0, 0.3, 3.0
A1, A2 = L1 / 2, L2 / 2
I1, I2 = M1 * L1**2 / 12, M2 * L2**2 / 12
K1, C1, FREE1 = 400.0, 15.0, 1.5 * np.pi
K2, C2, FREE2 = 3e5, 5e4, 0.0
TH0 = np.array([0.0, 23 * np.pi / 12])
OM0 = np.array([0.0, 10.0])


def wrap(a):
    """Angle in (-pi, pi]."""
    w = np.mod(a + np.pi, 2 * np.pi) - np.pi
    return np.where(w == -np.pi, np.pi, w)


# Spring offsets fixed once from the initial state, so deviations are continuous in time.
OFF1 = TH0[0] - wrap(TH0[0] - FREE1)
OFF2 = (TH0[1] - TH0[0]) - wrap(TH0[1] - TH0[0] - FREE2)


def deviations(th1, th2):
    return th1 - OFF1, (th2 - th1) - OFF2


SPRINGS = (K1, C1, K2, C2)


def rhs(t, y, springs=SPRINGS):
    k1, c1, k2, c2 = springs
    th1, th2, w1, w2, _ = y
    d1, d2 = deviations(th1, th2)
    tau1 = -k1 * d1 - c1 * w1
    tau2 = -k2 * d2 - c2 * (w2 - w1)
    p = M2 * L1 * A2
    s, c = np.sin(th1 - th2), np.cos(th1 - th2)
    m11, m22, m12 = I1 + M1 * A1**2 + M2 * L1**2, I2 + M2 * A2**2, p * c
    f1 = -p * s * w2**2 - (M1 * A1 + M2 * L1) * G * np.cos(th1) + tau1 - tau2
    f2 = p * s * w1**2 - M2 * A2 * G * np.cos(th2) + tau2
    det = m11 * m22 - m12 * m12
    a1 = (m22 * f1 - m12 * f2) / det
    a2 = (m11 * f2 - m12 * f1) / det
    return [w1, w2, a1, a2, c1 * w1**2 + c2 * (w2 - w1) ** 2]


def energy(th1, th2, w1, w2, springs=SPRINGS):
    """Kinetic + gravity + spring energy, from Cartesian centre velocities (not from M)."""
    v1 = A1 * w1 * np.array([-np.sin(th1), np.cos(th1)])
    v2 = L1 * w1 * np.array([-np.sin(th1), np.cos(th1)]) + A2 * w2 * np.array([-np.sin(th2), np.cos(th2)])
    y1 = A1 * np.sin(th1)
    y2 = L1 * np.sin(th1) + A2 * np.sin(th2)
    d1, d2 = deviations(th1, th2)
    kin = 0.5 * M1 * np.sum(v1 * v1, axis=0) + 0.5 * M2 * np.sum(v2 * v2, axis=0)
    kin = kin + 0.5 * I1 * w1**2 + 0.5 * I2 * w2**2
    k1, _, k2, _ = springs
    return kin + G * (M1 * y1 + M2 * y2) + 0.5 * k1 * d1**2 + 0.5 * k2 * d2**2


def solve(t, method="Radau", rtol=1e-12, atol=1e-12, springs=SPRINGS):
    """Rows (t, theta1, theta2, omega1, omega2, energy, dissipated) at the times `t`."""
    y0 = np.concatenate([TH0, OM0, [0.0]])
    f = lambda t, y: rhs(t, y, springs)
    sol = solve_ivp(f, (t[0], t[-1]), y0, method=method, t_eval=t, rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(sol.message)
    th1, th2, w1, w2, diss = sol.y
    return np.stack([t, th1, th2, w1, w2, energy(th1, th2, w1, w2, springs), diss], axis=1), sol


def main():
    p = common.parser(__doc__.splitlines()[1], t_end=2.0, dt=0.001)
    p.add_argument("--method", default="Radau")
    p.add_argument("--rtol", type=float, default=1e-12)
    p.add_argument("--atol", type=float, default=1e-12)
    p.add_argument("--springs", type=float, nargs=4, default=list(SPRINGS), metavar=("K1", "C1", "K2", "C2"),
                   help="spring-damper constants (0 0 0 0: the plain, non-stiff double pendulum)")
    args = p.parse_args()
    t = common.sample_times(args)
    springs = tuple(args.springs)
    data, sol = solve(t, args.method, args.rtol, args.atol, springs)
    common.write_csv(
        args.out,
        ["t", "theta1", "theta2", "omega1", "omega2", "energy", "dissipated"],
        data,
        [
            "stiff double pendulum (paper 000, 5.1): bars m=3 L=2 and m=0.3 L=3, I = m L^2/12",
            f"springs: ground-bar1 k={springs[0]:g} c={springs[1]:g} free 3pi/2 (on theta1), "
            f"bar1-bar2 k={springs[2]:g} c={springs[3]:g} free 0",
            "initial theta1=0 theta2=23pi/12 omega1=0 omega2=10; theta continuous (no wrapping)",
            "energy = T + gravity (y=0 datum) + spring energy; dissipated = damper work so far",
            f"scipy solve_ivp {args.method} rtol={args.rtol} atol={args.atol} ({sol.nfev} f-evals)",
        ],
    )


if __name__ == "__main__":
    main()
