#!/usr/bin/env python3
"""Bodies on a cylindrical, a universal and a planar joint, in minimal coordinates.

The models models/elements/{cylinder_pendulum,hooke_pendulum,planar_block}.toml, written out
by hand (nothing from mbsfmu), solved by scipy solve_ivp (DOP853, rtol 1e-12, atol 1e-12).

cylinder (cylindrical joint, axis global x through the origin; m = 2, Ixx = 0.1 about the
centre, centre r = 0.3 below the axis; axial spring k = 50 from (-1, 0, 0) to the axis point
(0, 0, 0) of the sleeve, free length 0.8; gravity -9.81 y):
    travel  m s'' = -k (1 + s - 0.8)  ->  s = -0.2 + 0.2 cos(w t) + (s0'/w) sin(w t), w = sqrt(k/m)
    angle   (Ixx + m r^2) th'' = -m g r sin(th),  th(0) = 0, th'(0) = 3
    centre  (s, -r cos th, -r sin th); energy = kinetic + m g y + k (1 + s - 0.8)^2 / 2
hooke (universal joint at the origin, first axis global x fixed in ground, cross axis global y
fixed in the bob; bob m = 1, J = diag(0.02, 0.03, 0.04) in its axes, centre L = 0.5 below
the joint; gravity -9.81 z). Rotation R = Rx(t1) Ry(t2), body angular velocity
(t1' cos t2, t2', t1' sin t2), centre r = L (-sin t2, cos t2 sin t1, -cos t2 cos t1):
    T = a(t2) t1'^2 / 2 + b t2'^2 / 2,  a = (m L^2 + Jx) cos^2 t2 + Jz sin^2 t2,  b = m L^2 + Jy
    V = -m g L cos t1 cos t2
    a t1'' + a'(t2) t1' t2' = -m g L sin t1 cos t2
    b t2'' - a'(t2) t1'^2 / 2 = -m g L cos t1 sin t2,  a' = 2 sin t2 cos t2 (Jz - m L^2 - Jx)
planar (planar joint, the global x-y plane; block m = 2, Izz = 0.08, centre c at the origin
at t = 0; two spring-dampers from ground anchors A_i to block points P_i, tension
T = k (l - l0) + c l' pulling P_i towards A_i; gravity (0, -9.81, -3), its z part taken by the
joint): Newton-Euler in the centre (X, Y) and the angle th about z:
    m X'' = sum F_x,  m Y'' = sum F_y - m 9.81,  Izz th'' = sum ((P_i - c) x F_i)_z
    reaction on the bob F = m (r'' - g), along the joint frame 1 (x = global y, y = global z,
    z = global x): f_y1, f_z1
Columns: t, then per model: cylinder s, th, x, y, z, wx, energy; hooke t1, t2, x, y, z, wx,
energy, f_y1, f_z1; planar x, y, th, wz.
"""

import numpy as np
from scipy.integrate import solve_ivp

import common

G = 9.81
RTOL, ATOL = 1e-12, 1e-12


def cylinder(t, s0d=0.1, th0d=3.0):
    m, ixx, r, k = 2.0, 0.1, 0.3, 50.0
    w = np.sqrt(k / m)
    s = -0.2 + 0.2 * np.cos(w * t) + s0d / w * np.sin(w * t)
    sd = -0.2 * w * np.sin(w * t) + s0d * np.cos(w * t)
    ia = ixx + m * r * r

    def rhs(_, y):
        return [y[1], -m * G * r * np.sin(y[0]) / ia]

    sol = solve_ivp(rhs, (t[0], t[-1]), [0.0, th0d], method="DOP853", t_eval=t,
                    rtol=RTOL, atol=ATOL)
    th, thd = sol.y
    x, yy, z = s, -r * np.cos(th), -r * np.sin(th)
    energy = 0.5 * m * sd**2 + 0.5 * ia * thd**2 + m * G * yy + 0.5 * k * (1.0 + s - 0.8) ** 2
    cols = ["s", "th", "x", "y", "z", "wx", "energy"]
    return cols, np.column_stack([s, th, x, yy, z, thd, energy])


def hooke(t, t1d=1.5, t2d=2.0):
    m, length = 1.0, 0.5
    jx, jy, jz = 0.02, 0.03, 0.04
    b = m * length**2 + jy

    def a_of(t2):
        return (m * length**2 + jx) * np.cos(t2) ** 2 + jz * np.sin(t2) ** 2

    def ap_of(t2):
        return 2.0 * np.sin(t2) * np.cos(t2) * (jz - m * length**2 - jx)

    def rhs(_, y):
        t1, t2, d1, d2 = y
        dd1 = (-m * G * length * np.sin(t1) * np.cos(t2) - ap_of(t2) * d1 * d2) / a_of(t2)
        dd2 = (-m * G * length * np.cos(t1) * np.sin(t2) + 0.5 * ap_of(t2) * d1 * d1) / b
        return [d1, d2, dd1, dd2]

    sol = solve_ivp(rhs, (t[0], t[-1]), [0.0, 0.0, t1d, t2d], method="DOP853", t_eval=t,
                    rtol=RTOL, atol=ATOL)
    t1, t2, d1, d2 = sol.y
    x = -length * np.sin(t2)
    y = length * np.cos(t2) * np.sin(t1)
    z = -length * np.cos(t2) * np.cos(t1)
    # World angular velocity t1' e_x + t2' Rx(t1) e_y: its x component is t1'.
    wx = d1
    energy = 0.5 * a_of(t2) * d1**2 + 0.5 * b * d2**2 + m * G * z
    # Centre acceleration a = L (J t'' + H(t', t')) and the joint's reaction on the bob
    # F = m a - m g; the joint frame 1 has x = axis2 = global y, y = z x x = global z, z = global x.
    dd = np.array([rhs(0.0, row)[2:] for row in sol.y.T]).T
    s1, c1, s2, c2 = np.sin(t1), np.cos(t1), np.sin(t2), np.cos(t2)
    az = length * (c2 * s1 * dd[0] + s2 * c1 * dd[1]
                   + c2 * c1 * d1**2 - 2.0 * s2 * s1 * d1 * d2 + c2 * c1 * d2**2)
    ax = length * (-c2 * dd[1] + s2 * d2**2)
    f_y1 = m * (az + G)
    f_z1 = m * ax
    cols = ["t1", "t2", "x", "y", "z", "wx", "energy", "f_y1", "f_z1"]
    return cols, np.column_stack([t1, t2, x, y, z, wx, energy, f_y1, f_z1])


def planar(t):
    m, izz = 2.0, 0.08
    springs = [  # anchor, body point at t = 0 (global), k, c, l0
        (np.array([-1.0, 0.5]), np.array([-0.2, 0.1]), 60.0, 0.5, 0.5),
        (np.array([1.0, 0.8]), np.array([0.3, -0.1]), 40.0, 0.3, 0.6),
    ]

    def rhs(_, y):
        cx, cy, th, vx, vy, w = y
        c = np.array([cx, cy])
        rot = np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]])
        f = np.array([0.0, -m * G])
        tau = 0.0
        for anchor, p0, k, damp, l0 in springs:
            rp = rot @ p0  # p0 relative to the centre (at the origin at t = 0)
            p = c + rp
            pd = np.array([vx, vy]) + w * np.array([-rp[1], rp[0]])
            d = p - anchor
            l = np.linalg.norm(d)
            ld = d @ pd / l
            fi = -(k * (l - l0) + damp * ld) * d / l
            f += fi
            tau += rp[0] * fi[1] - rp[1] * fi[0]
        return [vx, vy, w, f[0] / m, f[1] / m, tau / izz]

    sol = solve_ivp(rhs, (t[0], t[-1]), [0.0, 0.0, 0.0, 0.3, -0.2, 1.5], method="DOP853",
                    t_eval=t, rtol=RTOL, atol=ATOL)
    cx, cy, th, _, _, w = sol.y
    return ["x", "y", "th", "wz"], np.column_stack([cx, cy, th, w])


MODELS = {"cylinder": cylinder, "hooke": hooke, "planar": planar}


def main():
    p = common.parser(__doc__.splitlines()[0], t_end=3.0, dt=0.01)
    p.add_argument("--model", choices=sorted(MODELS), required=True)
    args = p.parse_args()
    t = common.sample_times(args)
    cols, data = MODELS[args.model](t)
    common.write_csv(
        args.out,
        ["t"] + cols,
        np.column_stack([t, data]),
        [f"model: {args.model} (see the docstring)",
         f"solver: scipy solve_ivp DOP853 rtol={RTOL} atol={ATOL}"],
    )


if __name__ == "__main__":
    main()
