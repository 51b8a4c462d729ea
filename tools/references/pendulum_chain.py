#!/usr/bin/env python3
"""Paper 003's chain of mathematical pendulums in minimal coordinates (independent reference).

Model: N particles of mass m = 1 kg joined by massless rods of length l = 1 m, planar, gravity
g = 9.81 along -y. Rod 1 hangs from the suspension point s(t); rod k joins particle k-1 and k.

Suspension (paper 003, section 4.2.1, "omega = 0.05 Hz"):
    moving:  s(t) = (2 + 0.3 sin wt, 0.2 sin wt),  w = 2 pi 0.05 rad/s
    fixed:   s(t) = (2, 0)                        (the FMU model with constant inputs)

Coordinates: absolute rod angles phi_k measured from -y (counter-clockwise positive), so
    r_i = s + l sum_{k<=i} (sin phi_k, -cos phi_k).
Lagrange's equations (C_jk = sum_{i >= max(j,k)} m_i, C_j = C_jj):
    sum_k l^2 C_jk [cos(phi_j - phi_k) phi''_k + sin(phi_j - phi_k) phi'_k^2]
        = -l C_j [ g sin phi_j + cos(phi_j) s''_x + sin(phi_j) s''_y ]
i.e. mass matrix M_jk = l^2 C_jk cos(phi_j - phi_k), quadratic velocity terms, gravity, and
the suspension acceleration as an inertial load (the suspension velocity drops out).

Initial state (--init):
    rigid      phi_k(0) = phi0, phi'_k(0) = 0: the chain hangs straight and, since the
               suspension moves, translates rigidly with the suspension velocity at t = 0
               (the definition the benchmark issue uses).
    projected  phi_k(0) = phi0, particle velocities = mass-weighted minimal-norm projection of
               zero onto the velocity constraints (what Cartesian/absolute-coordinate codes such
               as integrate::test_systems::CartesianChain::consistent_state produce from "at
               rest"). For phi0 = 0 this is phi'_1(0) = -s'_x(0)/l, phi'_k(0) = 0 for k > 1.
Solved by scipy solve_ivp (DOP853 by default) at rtol = atol = 1e-12 unless told otherwise.
Columns: t, tip_x, tip_y, phi_1..phi_N, and with --velocities also dphi_1..dphi_N.
"""

import numpy as np
from scipy.integrate import solve_ivp

import common

G = 9.81
OMEGA = 2.0 * np.pi * 0.05


class Chain:
    def __init__(self, n, moving=True, m=1.0, l=1.0, g=G, ax=0.3, ay=0.2, omega=OMEGA):
        self.n, self.moving, self.m, self.l, self.g = n, moving, m, l, g
        self.ax, self.ay, self.omega = (ax, ay, omega) if moving else (0.0, 0.0, 0.0)
        idx = np.arange(n)
        # C_jk = number of particles at or beyond rod max(j,k), times m
        self.c = m * (n - np.maximum.outer(idx, idx)).astype(float)
        self.cj = np.diag(self.c).copy()

    def suspension(self, t):
        """Position, velocity, acceleration of the suspension point."""
        s, c = np.sin(self.omega * t), np.cos(self.omega * t)
        w = self.omega
        return (
            np.array([2.0 + self.ax * s, self.ay * s]),
            np.array([self.ax * w * c, self.ay * w * c]),
            np.array([-self.ax * w * w * s, -self.ay * w * w * s]),
        )

    def accelerations(self, t, phi, dphi):
        l = self.l
        d = np.subtract.outer(phi, phi)
        mass = l * l * self.c * np.cos(d)
        quad = l * l * (self.c * np.sin(d)) @ (dphi * dphi)
        sdd = self.suspension(t)[2]
        rhs = -l * self.cj * (self.g * np.sin(phi) + np.cos(phi) * sdd[0] + np.sin(phi) * sdd[1]) - quad
        return np.linalg.solve(mass, rhs)

    def rhs(self, t, y):
        n = self.n
        return np.concatenate([y[n:], self.accelerations(t, y[:n], y[n:])])

    def positions(self, t, phi):
        """Particle positions, shape (n, 2)."""
        s = self.suspension(t)[0]
        steps = self.l * np.stack([np.sin(phi), -np.cos(phi)], axis=1)
        return s + np.cumsum(steps, axis=0)

    def velocities(self, t, phi, dphi):
        sd = self.suspension(t)[1]
        steps = self.l * (dphi[:, None] * np.stack([np.cos(phi), np.sin(phi)], axis=1))
        return sd + np.cumsum(steps, axis=0)

    def energy(self, t, phi, dphi):
        """Kinetic + gravitational energy (conserved for the fixed suspension)."""
        v = self.velocities(t, phi, dphi)
        r = self.positions(t, phi)
        return 0.5 * self.m * np.sum(v * v) + self.m * self.g * np.sum(r[:, 1])

    def initial_state(self, init="rigid", phi0=0.0):
        n = self.n
        phi = np.full(n, phi0)
        dphi = np.zeros(n)
        if init == "projected":
            # Minimize sum |v_i|^2 with v_i = s' + l sum_{k<=i} dphi_k e'_k (e'_k = (cos, sin)):
            # a linear least-squares problem in dphi.
            sd = self.suspension(0.0)[1]
            e = self.l * np.stack([np.cos(phi), np.sin(phi)], axis=1)  # (n, 2)
            a = np.zeros((2 * n, n))
            for i in range(n):
                for k in range(i + 1):
                    a[2 * i : 2 * i + 2, k] = e[k]
            b = -np.tile(sd, n)
            dphi = np.linalg.lstsq(a, b, rcond=None)[0]
        elif init != "rigid":
            raise ValueError(init)
        return np.concatenate([phi, dphi])


def solve(n, t, moving=True, init="rigid", phi0=0.0, method="DOP853", rtol=1e-12, atol=1e-12):
    """Angles and rates at the times `t`: arrays (len(t), n) each, and the Chain."""
    chain = Chain(n, moving)
    y0 = chain.initial_state(init, phi0)
    sol = solve_ivp(chain.rhs, (t[0], t[-1]), y0, method=method, t_eval=t, rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(sol.message)
    return sol.y[:n].T, sol.y[n:].T, chain, sol


def main():
    p = common.parser(__doc__.splitlines()[1], t_end=200.0, dt=0.1)
    p.add_argument("--links", type=int, default=16, help="number of particles/rods N")
    p.add_argument("--fixed", action="store_true", help="fixed suspension at (2, 0)")
    p.add_argument("--init", choices=["rigid", "projected"], default="rigid")
    p.add_argument("--phi0", type=float, default=0.0, help="initial angle of every rod [rad]")
    p.add_argument("--method", default="DOP853", help="solve_ivp method (DOP853, Radau)")
    p.add_argument("--rtol", type=float, default=1e-12)
    p.add_argument("--atol", type=float, default=1e-12)
    p.add_argument("--velocities", action="store_true", help="also write dphi_k columns")
    args = p.parse_args()
    t = common.sample_times(args)
    phi, dphi, chain, sol = solve(
        args.links, t, not args.fixed, args.init, args.phi0, args.method, args.rtol, args.atol
    )
    tip = np.array([chain.positions(tk, pk)[-1] for tk, pk in zip(t, phi)])
    cols = ["t", "tip_x", "tip_y"] + [f"phi_{k + 1}" for k in range(args.links)]
    data = [t[:, None], tip, phi]
    if args.velocities:
        cols += [f"dphi_{k + 1}" for k in range(args.links)]
        data.append(dphi)
    susp = "fixed at (2, 0)" if args.fixed else "s(t) = (2 + 0.3 sin wt, 0.2 sin wt), w = 2 pi 0.05"
    common.write_csv(
        args.out,
        cols,
        np.hstack(data),
        [
            f"pendulum chain (paper 003): N = {args.links} particles 1 kg, rods 1 m, g = 9.81 along -y",
            f"suspension {susp}; initial phi_k = {args.phi0}, velocities '{args.init}'",
            "minimal coordinates: absolute rod angles phi_k from -y (counter-clockwise positive)",
            f"scipy solve_ivp {args.method} rtol={args.rtol} atol={args.atol} ({sol.nfev} f-evals)",
        ],
    )


if __name__ == "__main__":
    main()
