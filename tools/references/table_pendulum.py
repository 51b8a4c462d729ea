#!/usr/bin/env python3
"""Pendulum on a table torsion spring and a table torsion damper (issue 16, curves).

`models/elements/table_pendulum.toml`: a rigid body (m = 2 kg, I_zz = 0.05 kg m^2 about its
centre) hangs from a revolute joint at the origin (axis z), its centre l = 0.5 m below the
pivot; gravity g = 9.81 along -y. A `rotational_spring_damper` on the joint has
    spring torque table  f(theta)   = K1 theta + K3 theta^3   (models/elements/torsion_spring.csv)
    damper torque table  f_d(omega) = C1 omega + C2 tanh(omega / W)  (torsion_damper.csv)
so the torque on the pendulum is -f(theta) - f_d(omega). Equation of motion (one coordinate):
    (I_zz + m l^2) theta'' = -m g l sin(theta) - f(theta) - f_d(omega)
The spring is the closed-form cubic (the engine's not-a-knot spline reproduces cubics). The
damper is not a polynomial: here it is the not-a-knot cubic spline of the table's rows
(scipy.interpolate.CubicSpline, bc_type="not-a-knot", an implementation independent of the
engine's), which is the curve the model file defines; the motion stays inside the table.
Start: theta = 0, omega = OMEGA0. Solved by DOP853 at rtol 1e-12, atol 1e-14.
Columns: t, theta, omega, spring_torque (f(theta)), damper_torque (f_d(omega)).

`--write-tables` (re)writes the two CSV tables from these formulas.
"""

import os

import numpy as np
from scipy.integrate import solve_ivp
from scipy.interpolate import CubicSpline

import common

G = 9.81
M, L, IZZ = 2.0, 0.5, 0.05
K1, K3 = 20.0, 40.0
C1, C2, W = 0.15, 0.6, 2.0
OMEGA0 = 6.0
HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "..", "models", "elements")


def spring(theta):
    return K1 * theta + K3 * theta**3


def damper_rows():
    w = np.arange(-12.0, 12.0 + 1e-9, 1.0)
    return w, C1 * w + C2 * np.tanh(w / W)


def write_tables():
    th = np.arange(-2.0, 2.0 + 1e-9, 0.25)
    with open(os.path.join(MODELS, "torsion_spring.csv"), "w") as f:
        f.write(f"# f(theta) = {K1} theta + {K3} theta^3 (tools/references/table_pendulum.py)\n")
        f.write("angle,torque\n")
        for x in th:
            f.write(f"{x:.17g},{spring(x):.17g}\n")
    w, fd = damper_rows()
    with open(os.path.join(MODELS, "torsion_damper.csv"), "w") as f:
        f.write(f"# f_d(omega) = {C1} omega + {C2} tanh(omega / {W}) at the rows (tools/references/table_pendulum.py)\n")
        f.write("angular_velocity,torque\n")
        for x, y in zip(w, fd):
            f.write(f"{x:.17g},{y:.17g}\n")


def read_damper_table():
    """The rows as the model reads them (the file, not the formula)."""
    data = np.loadtxt(os.path.join(MODELS, "torsion_damper.csv"), delimiter=",", comments="#", skiprows=2)
    return data[:, 0], data[:, 1]


def main():
    p = common.parser(__doc__.splitlines()[0], t_end=2.0, dt=0.01)
    p.add_argument("--write-tables", action="store_true", help="rewrite the model's CSV tables")
    p.add_argument("--rtol", type=float, default=1e-12)
    p.add_argument("--atol", type=float, default=1e-14)
    args = p.parse_args()
    if args.write_tables:
        write_tables()
    w, fd = read_damper_table()
    damper = CubicSpline(w, fd, bc_type="not-a-knot")
    i_o = IZZ + M * L * L

    def rhs(_t, y):
        th, om = y
        return [om, (-M * G * L * np.sin(th) - spring(th) - damper(om)) / i_o]

    t = common.sample_times(args)
    sol = solve_ivp(rhs, (0.0, t[-1]), [0.0, OMEGA0], method="DOP853", t_eval=t, rtol=args.rtol, atol=args.atol)
    assert sol.success, sol.message
    th, om = sol.y
    assert np.all(np.abs(om) < w[-1]), "the motion left the damper table"
    data = np.column_stack([t, th, om, spring(th), damper(om)])
    common.write_csv(
        args.out,
        ["t", "theta", "omega", "spring_torque", "damper_torque"],
        data,
        [
            __doc__.splitlines()[0],
            "(I_zz + m l^2) theta'' = -m g l sin(theta) - f(theta) - f_d(omega)",
            f"m={M} l={L} I_zz={IZZ} g={G} K1={K1} K3={K3} f_d = not-a-knot spline of torsion_damper.csv",
            f"theta(0)=0 omega(0)={OMEGA0}; DOP853 rtol={args.rtol} atol={args.atol}",
        ],
    )


if __name__ == "__main__":
    main()
