#!/usr/bin/env python3
"""Chain of rigid bars on spherical joints, spinning about their axes (independent reference).

The model (models/spherical_chain.toml): N = 8 bars of length L = 1, mass m = 1, square section
a x a, a = 0.05; inertia about the centre transverse I_t = m (L^2 + a^2)/12, axial
I_a = m (a^2 + a^2)/12 (the square section makes the tensor axisymmetric: I_x = I_z). Bar 1
hangs from a spherical joint at the origin, bar i+1 from the lower end of bar i. Gravity
g = 9.81 (0.3, -1, 0.2)/sqrt(1.13). At t = 0 every bar hangs along -y and spins about its own
axis: omega_i = (0, -1, 0), centre velocities zero (consistent: the joints lie on the axes).

Coordinates: the unit axis e_i of every bar (from its upper joint to its lower end), E =
(e_1 .. e_N) in R^{3N}, with the N constraints |e_i|^2 = 1. Positions
    joint below bar i:  p_i = L (e_1 + .. + e_i)          (tip = p_N)
    centre of bar i:    c_i = sum_{j<i} L e_j + (L/2) e_i = sum_j A_ij e_j,
    A_ij = L (j < i), L/2 (j = i), 0 (j > i).
Angular velocity of bar i: omega_i = e_i x e_i' + s_i e_i with the axial spin s_i = omega_i . e_i
(e_i' = omega_i x e_i, so e_i x e_i' = omega_i - (omega_i . e_i) e_i).

Spin is constant. Angular momentum about the centre (axisymmetric inertia):
    H_i = I_t (e_i x e_i') + I_a s_i e_i.
The forces on bar i are gravity at the centre and the joint forces at points c_i + alpha e_i on
the axis, whose moments about the centre alpha e_i x F are perpendicular to e_i. Euler:
    d(H_i . e_i)/dt = H_i' . e_i + H_i . e_i' = M_i . e_i + I_t (e_i x e_i') . e_i' = 0,
so I_a s_i is constant: s_i = s_i(0) = (0,-1,0).(0,-1,0) = +1 in the model.

Transverse motion (d'Alembert). Virtual rotations delta theta_i perpendicular to e_i move the
axis by delta e_i = delta theta_i x e_i, i.e. delta theta_i = e_i x delta e_i (delta e_i . e_i = 0),
and the centres by delta c_i = sum_j A_ij delta e_j. The joint forces do no virtual work on
displacements that keep the chain together, so
    sum_i  m (g - c_i'') . delta c_i  -  H_i' . delta theta_i  = 0     (moment of gravity about c_i: 0)
with H_i' = I_t (e_i x e_i'') + I_a s_i e_i' and H_i' . (e_i x delta e_i) = (H_i' x e_i) . delta e_i,
    H_i' x e_i = I_t (e_i'' - (e_i . e_i'') e_i) + I_a s_i (e_i' x e_i).
For all delta E with delta e_i . e_i = 0, so up to a multiple lambda_i of e_i in each block:
    M E'' + gyro(E, E') = Q + sum_i lambda_i e_i          (block i of the last term: lambda_i e_i)
    M = (m A^T A + I_t 1_N) (x) 1_3    (constant: translational kinetic energy + transverse inertia)
    Q_j = m sum_i A_ij g,              gyro_j = I_a s_j (e_j' x e_j),
    e_i . e_i'' = -|e_i'|^2            (second derivative of |e_i|^2 = 1).
Each evaluation solves this saddle system for (E'', lambda) with numpy (dense, 4N unknowns).
The equations are an ODE in (E, E') (index 1: the constraints are only kept through their
second derivative); nothing is projected, and the drift max_i | |e_i| - 1 | is reported.
Energy (a check, computed from Cartesian centre velocities c_i' = sum_j A_ij e_j', not from M):
    T = sum_i m |c_i'|^2 / 2 + I_t |e_i'|^2 / 2 + I_a s_i^2 / 2,   V = -sum_i m g . c_i.
(Energy does not see the gyroscopic term, which does no work; tests/python/test_references.py
checks its sign against a separate Newton-Euler integration of the bars with quaternions.)

Solved by scipy solve_ivp DOP853 at rtol = atol = 1e-12 (the problem is not stiff).
Columns: t, tip_x, tip_y, tip_z (the model's outputs: global position of the free end of the
last bar), energy, unit_err (max_i | |e_i| - 1 |), and e{i}_{x,y,z} for every bar.
"""

import numpy as np
from scipy.integrate import solve_ivp

import common

G = 9.81
G_DIR = np.array([0.3, -1.0, 0.2]) / np.sqrt(1.13)
L, MASS, SIDE = 1.0, 1.0, 0.05
I_T = MASS * (L**2 + SIDE**2) / 12
I_A = MASS * (SIDE**2 + SIDE**2) / 12


class Chain:
    """N bars on spherical joints; state y = (E, E') flattened, E = (e_1 .. e_N)."""

    def __init__(self, n, spin=1.0, g=G * G_DIR, length=L, mass=MASS, i_t=I_T, i_a=I_A):
        self.n = n
        self.length, self.mass, self.i_t, self.i_a = length, mass, i_t, i_a
        self.g = np.asarray(g, dtype=float)
        self.spin = np.broadcast_to(np.asarray(spin, dtype=float), (n,)).copy()
        a = np.tril(np.full((n, n), length), -1) + np.diag(np.full(n, length / 2))
        self.a = a
        m_scalar = mass * a.T @ a + i_t * np.eye(n)
        self.m = np.kron(m_scalar, np.eye(3))
        self.q = np.kron(mass * a.sum(axis=0), self.g)  # Q_j = m sum_i A_ij g

    def split(self, y):
        n = self.n
        return y[: 3 * n].reshape(n, 3), y[3 * n :].reshape(n, 3)

    def accelerations(self, e, ed):
        """E'' (n x 3) and the multipliers lambda (n) at the state (E, E')."""
        n = self.n
        gyro = self.i_a * self.spin[:, None] * np.cross(ed, e)
        k = np.zeros((4 * n, 4 * n))
        k[: 3 * n, : 3 * n] = self.m
        for i in range(n):
            k[3 * i : 3 * i + 3, 3 * n + i] = -e[i]
            k[3 * n + i, 3 * i : 3 * i + 3] = e[i]
        rhs = np.concatenate([self.q - gyro.ravel(), -np.sum(ed * ed, axis=1)])
        sol = np.linalg.solve(k, rhs)
        return sol[: 3 * n].reshape(n, 3), sol[3 * n :]

    def rhs(self, t, y):
        e, ed = self.split(y)
        edd, _ = self.accelerations(e, ed)
        return np.concatenate([ed.ravel(), edd.ravel()])

    def initial_state(self):
        """All bars along -y, omega_i = spin_i (0, -1, 0): e_i' = omega_i x e_i = 0."""
        e = np.tile([0.0, -1.0, 0.0], (self.n, 1))
        return np.concatenate([e.ravel(), np.zeros(3 * self.n)])

    def centres(self, e):
        return self.a @ e

    def tip(self, e):
        return self.length * e.sum(axis=0)

    def energy(self, e, ed):
        cd = self.a @ ed  # centre velocities
        kin = 0.5 * self.mass * np.sum(cd * cd) + 0.5 * self.i_t * np.sum(ed * ed)
        kin += 0.5 * self.i_a * np.sum(self.spin**2)
        return kin - self.mass * np.sum(self.centres(e) @ self.g)

    def solve(self, t, y0=None, method="DOP853", rtol=1e-12, atol=1e-12):
        """The solve_ivp result with values at the times `t`."""
        y0 = self.initial_state() if y0 is None else y0
        sol = solve_ivp(self.rhs, (t[0], t[-1]), y0, method=method, t_eval=t, rtol=rtol, atol=atol)
        if not sol.success:
            raise RuntimeError(sol.message)
        return sol

    def table(self, sol):
        """Rows (t, tip_x, tip_y, tip_z, energy, unit_err, e1_x, .., eN_z) of a solution."""
        rows = []
        for k, t in enumerate(sol.t):
            e, ed = self.split(sol.y[:, k])
            unit_err = np.abs(np.linalg.norm(e, axis=1) - 1.0).max()
            rows.append(np.concatenate([[t], self.tip(e), [self.energy(e, ed), unit_err], e.ravel()]))
        return np.array(rows)

    def columns(self):
        cols = ["t", "tip_x", "tip_y", "tip_z", "energy", "unit_err"]
        return cols + [f"e{i + 1}_{c}" for i in range(self.n) for c in "xyz"]


def main():
    p = common.parser(__doc__.splitlines()[1], t_end=2.0, dt=0.01)
    p.add_argument("--links", type=int, default=8, help="number of bars (default %(default)s)")
    p.add_argument("--spin", type=float, default=1.0, help="initial axial spin of every bar [rad/s]")
    p.add_argument("--method", default="DOP853")
    p.add_argument("--rtol", type=float, default=1e-12)
    p.add_argument("--atol", type=float, default=1e-12)
    args = p.parse_args()
    t = common.sample_times(args)
    chain = Chain(args.links, spin=args.spin)
    sol = chain.solve(t, method=args.method, rtol=args.rtol, atol=args.atol)
    data = chain.table(sol)
    e0 = data[0, 4]
    common.write_csv(
        args.out,
        chain.columns(),
        data,
        [
            f"spherical chain: {args.links} bars L={L:g} m={MASS:g} section {SIDE:g} x {SIDE:g}, "
            f"I_t={I_T:.10g} I_a={I_A:.10g} about the centre",
            "gravity 9.81 (0.3, -1, 0.2)/sqrt(1.13); bar 1 hangs from the origin",
            f"initial: every bar along -y, omega = {args.spin:g} (0, -1, 0) (axial spin {args.spin:g}), "
            "centres at rest",
            "coordinates: bar axes e_i (joint -> lower end); tip = L sum e_i; unit_err = max |e_i| - 1",
            f"scipy solve_ivp {args.method} rtol={args.rtol} atol={args.atol} ({sol.nfev} f-evals), "
            "no projection",
            f"energy drift max |E - E0| = {np.abs(data[:, 4] - e0).max():.2e} J (E0 = {e0:.10g} J); "
            f"max unit_err = {data[:, 5].max():.2e}",
        ],
    )


if __name__ == "__main__":
    main()
