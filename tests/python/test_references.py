"""Checks of the reference solutions themselves (tools/references/*.py, tests/data/*.csv).

Each reference is checked against facts that do not come from its own equations of motion:
energy conservation or the energy balance, Newton-Euler balances evaluated on the Lagrange
accelerations, numerical derivatives of closed-form positions, hand arithmetic, an
independent integrator, and a fresh run of its script equal to the committed CSV.
"""

import os
import shlex
import subprocess
import sys

import numpy as np
import pytest
from scipy.integrate import solve_ivp

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REFS = os.path.join(ROOT, "tools", "references")
DATA = os.path.join(ROOT, "tests", "data")
sys.path.insert(0, REFS)

import bouncing_balls as bb  # noqa: E402
import common  # noqa: E402
import double_pendulum_stiff as dp  # noqa: E402
import four_link as fl  # noqa: E402
import pendulum_chain as pc  # noqa: E402
import quarter_car as qc  # noqa: E402
import slider_crank as sc  # noqa: E402
import spherical_chain as sph  # noqa: E402


def cross(u, v):
    return u[0] * v[1] - u[1] * v[0]


def load(name):
    cols, data, comments = common.read_csv(os.path.join(DATA, name))
    return {c: data[:, i] for i, c in enumerate(cols)}, data, comments


# ---------------------------------------------------------------- pendulum chain


def test_chain_newton_balance_on_lagrange_accelerations():
    """Particle accelerations from the minimal-coordinate equations must be explained by rod
    forces along the rods plus gravity (Newton, particle by particle from the tip)."""
    n = 6
    chain = pc.Chain(n, moving=True)
    rng = np.random.default_rng(1)
    for t in [0.0, 1.3, 7.7]:
        phi = rng.uniform(-0.8, 0.8, n)
        dphi = rng.uniform(-1.0, 1.0, n)
        ddphi = chain.accelerations(t, phi, dphi)
        e = np.stack([np.sin(phi), -np.cos(phi)], axis=1)  # rod directions
        ep = np.stack([np.cos(phi), np.sin(phi)], axis=1)
        acc = chain.suspension(t)[2] + np.cumsum(
            chain.l * (ddphi[:, None] * ep - (dphi**2)[:, None] * e), axis=0
        )
        # Rod k pulls particle k towards particle k-1 with tension T_k (force -T_k e_k) and
        # rod k+1 pulls it outward (+T_{k+1} e_{k+1}). Going from the tip, the net force
        # perpendicular to rod k must vanish once the known forces are removed.
        t_next = 0.0
        for k in reversed(range(n)):
            f = chain.m * acc[k] - chain.m * np.array([0.0, -chain.g])
            if k + 1 < n:
                f = f - t_next * e[k + 1]
            # f = -T_k e_k: the component along e'_k is zero
            assert abs(f @ ep[k]) < 1e-10 * (1 + np.abs(f).max())
            t_next = -(f @ e[k])


def test_chain_fixed_energy_conserved():
    cols, data, _ = common.read_csv(os.path.join(DATA, "pendulum_chain_fixed_n16.csv"))
    n = 16
    chain = pc.Chain(n, moving=False)
    i_phi = cols.index("phi_1")
    i_dphi = cols.index("dphi_1")
    e = np.array([chain.energy(r[0], r[i_phi : i_phi + n], r[i_dphi : i_dphi + n]) for r in data])
    swing = np.ptp([chain.positions(0.0, r[i_phi : i_phi + n])[:, 1].sum() for r in data]) * chain.g
    assert swing > 1.0  # the chain really moves
    assert np.abs(e - e[0]).max() < 1e-9 * abs(e[0])


def test_chain_projected_initial_velocities_are_minimal_norm():
    """'projected' start: particle velocities (0, s'_y), as a Cartesian code projects zero."""
    chain = pc.Chain(5, moving=True)
    y0 = chain.initial_state("projected")
    v = chain.velocities(0.0, y0[:5], y0[5:])
    sd = chain.suspension(0.0)[1]
    assert np.allclose(v[:, 0], 0.0, atol=1e-14)
    assert np.allclose(v[:, 1], sd[1], atol=1e-14)


def test_chain_tolerance_sweep_agrees():
    """The committed tolerance against a 10x tighter run over 50 s: 1e-9 rad."""
    t = np.linspace(0, 50, 101)
    a = pc.solve(8, t)[0]
    b = pc.solve(8, t, rtol=1e-13, atol=1e-14)[0]
    assert np.abs(a - b).max() < 1e-9


# ---------------------------------------------------------------- stiff double pendulum


def test_double_pendulum_energy_balance():
    """E(t) + dissipated work = E(0), E from Cartesian centre velocities."""
    d, _, _ = load("double_pendulum_stiff.csv")
    e0 = d["energy"][0]
    assert abs(e0 - (dp.energy(0.0, 23 * np.pi / 12, 0.0, 10.0))) < 1e-9
    # the damped spring really dissipates most of the energy
    assert d["dissipated"][-1] > 0.5 * e0
    assert np.abs(d["energy"] + d["dissipated"] - e0).max() < 1e-9 * e0


def test_double_pendulum_free_energy_conserved():
    """Without springs the pendulum is conservative: energy constant to 1e-9 relative."""
    d, _, _ = load("double_pendulum_free.csv")
    assert np.ptp(d["theta1"]) > 1.0  # it really swings
    assert np.abs(d["energy"] - d["energy"][0]).max() < 1e-9 * abs(d["energy"][0])
    assert np.all(d["dissipated"] == 0.0)


def test_double_pendulum_newton_euler_balance():
    """Lagrange accelerations satisfy the moment balances of bar 2 about the joint and of the
    whole pendulum about the origin (Newton-Euler with Cartesian centre accelerations)."""
    rng = np.random.default_rng(2)
    gv = np.array([0.0, -dp.G])
    for _ in range(5):
        th1, th2 = rng.uniform(-3, 3, 2)
        w1, w2 = rng.uniform(-5, 5, 2)
        _, _, a1, a2, _ = dp.rhs(0.0, [th1, th2, w1, w2, 0.0])
        e1, e2 = np.array([np.cos(th1), np.sin(th1)]), np.array([np.cos(th2), np.sin(th2)])
        p1, p2 = np.array([-e1[1], e1[0]]), np.array([-e2[1], e2[0]])
        g1 = dp.A1 * e1
        joint = dp.L1 * e1
        g2 = joint + dp.A2 * e2
        acc_joint = dp.L1 * (a1 * p1 - w1**2 * e1)
        acc_g1 = dp.A1 * (a1 * p1 - w1**2 * e1)
        acc_g2 = acc_joint + dp.A2 * (a2 * p2 - w2**2 * e2)
        d1, d2 = dp.deviations(th1, th2)
        tau1 = -dp.K1 * d1 - dp.C1 * w1
        tau2 = -dp.K2 * d2 - dp.C2 * (w2 - w1)
        lhs2 = dp.I2 * a2 + cross(g2 - joint, dp.M2 * acc_g2)
        rhs2 = tau2 + cross(g2 - joint, dp.M2 * gv)
        assert abs(lhs2 - rhs2) < 1e-9 * (1 + abs(tau2))
        lhs = dp.I1 * a1 + cross(g1, dp.M1 * acc_g1) + dp.I2 * a2 + cross(g2, dp.M2 * acc_g2)
        rhs = tau1 + cross(g1, dp.M1 * gv) + cross(g2, dp.M2 * gv)
        assert abs(lhs - rhs) < 1e-9 * (1 + abs(tau1) + abs(tau2))


def test_double_pendulum_initial_state_matches_paper():
    """Paper 000's centre of bar 2 (3.4488887, -0.388228) and its velocity (3.8822857, 14.4888887)."""
    th2 = 23 * np.pi / 12
    c2 = dp.L1 * np.array([1.0, 0.0]) + dp.A2 * np.array([np.cos(th2), np.sin(th2)])
    v2 = 10.0 * dp.A2 * np.array([-np.sin(th2), np.cos(th2)])
    assert np.allclose(c2, [3.4488887, -0.388228], atol=1e-6)
    assert np.allclose(v2, [3.8822857, 14.4888887], atol=1e-6)
    # initial spring deviations taken in (-pi, pi]
    d1, d2 = dp.deviations(0.0, th2)
    assert np.isclose(d1, np.pi / 2) and np.isclose(d2, -np.pi / 12)


def test_double_pendulum_against_explicit_integrator():
    """DOP853 (explicit, stability-limited, so far more accurate than asked) over 0.2 s."""
    t = np.linspace(0, 0.2, 201)
    a, _ = dp.solve(t)
    b, _ = dp.solve(t, method="DOP853", rtol=1e-13, atol=1e-13)
    assert np.abs(a[:, 1:3] - b[:, 1:3]).max() < 1e-10
    assert np.abs(a[:, 3:5] - b[:, 3:5]).max() < 1e-8


# ---------------------------------------------------------------- slider-crank


def test_slider_crank_kinematics_vs_numerical_derivatives():
    h = 1e-5
    th = np.linspace(0, 2 * np.pi, 37)
    x, dx, ddx, beta, dbeta, ddbeta = sc.kinematics(th, 1.0, 0.0)
    xp, _, _, bp, _, _ = sc.kinematics(th + h, 1.0, 0.0)
    xm, _, _, bm, _, _ = sc.kinematics(th - h, 1.0, 0.0)
    assert np.allclose(dx, (xp - xm) / (2 * h), atol=1e-9)
    assert np.allclose(dbeta, (bp - bm) / (2 * h), atol=1e-9)
    assert np.allclose(ddx, (xp - 2 * x + xm) / h**2, atol=1e-5)
    assert np.allclose(ddbeta, (bp - 2 * beta + bm) / h**2, atol=1e-5)
    # loop closure: |B - A| = rod length, slider on the x axis
    ax, ay = sc.A * np.cos(th), sc.A * np.sin(th)
    assert np.allclose(np.hypot(x - ax, -ay), sc.B, atol=1e-15)
    # general motion: chain rule with theta'' != 0
    t = np.linspace(0.05, 0.95, 19)
    tr = lambda t: (2.0 * t + 1.5 * t**2, 2.0 + 3.0 * t, 3.0)
    xs = lambda t: sc.kinematics(*tr(t))[0]
    k = sc.kinematics(*tr(t))
    assert np.allclose(k[1], (xs(t + h) - xs(t - h)) / (2 * h), atol=1e-8)
    assert np.allclose(k[2], (xs(t + h) - 2 * xs(t) + xs(t - h)) / h**2, atol=2e-4)


def newton_euler_slider_crank(th, dth, ddth, mu=0.0):
    """Crank torque and slider normal force by Newton-Euler on every body (independent)."""
    x, dx, ddx, beta, dbeta, ddbeta = sc.kinematics(th, dth, ddth)
    e, ep = np.array([np.cos(th), np.sin(th)]), np.array([-np.sin(th), np.cos(th)])
    pa = sc.A * e
    acc_a = sc.A * (ddth * ep - dth**2 * e)
    acc_g2 = 0.5 * (acc_a + np.array([ddx, 0.0]))
    gv = np.array([0.0, -sc.G])
    pb = np.array([x, 0.0])
    g2 = 0.5 * (pa + pb)
    s = np.tanh(dx / sc.V_REG)

    # unknown N: rod moment about A with F_B(N) = (F_f(N) - m3 x'', N - m3 g)
    def resid(n):
        fb = np.array([-mu * abs(n) * s - sc.M3 * ddx, n - sc.M3 * sc.G])
        return cross(pb - pa, fb) + cross(g2 - pa, sc.M2 * gv) - sc.I2 * ddbeta - cross(g2 - pa, sc.M2 * acc_g2)

    from scipy.optimize import brentq

    n = brentq(resid, -1e4, 1e4, xtol=1e-14)
    fb = np.array([-mu * abs(n) * s - sc.M3 * ddx, n - sc.M3 * sc.G])
    fa = sc.M2 * acc_g2 - fb - sc.M2 * gv  # force of the crank on the rod
    # crank about the origin: I1 th'' + G1 x m1 a_G1 = tau + G1 x m1 g + A x (-fa)
    g1 = 0.5 * pa
    acc_g1 = 0.5 * acc_a
    tau = sc.I1 * ddth + cross(g1, sc.M1 * acc_g1) - cross(g1, sc.M1 * gv) + cross(pa, fa)
    fo = sc.M1 * (acc_g1 - gv) + fa  # ground on crank
    return tau, n, fo, fa, fb


@pytest.mark.parametrize("mu", [0.0, 0.4])
def test_slider_crank_torque_vs_newton_euler(mu):
    rng = np.random.default_rng(3)
    for _ in range(20):
        th, dth, ddth = rng.uniform(-4, 4), rng.uniform(-8, 8), rng.uniform(-20, 20)
        d = sc.dynamics(th, dth, ddth, mu)
        tau, n, fo, fa, fb = newton_euler_slider_crank(th, dth, ddth, mu)
        assert abs(d["torque"] - tau) < 1e-11
        assert abs(d["normal"] - n) < 1e-10
        for mine, theirs in [(d["f_o"], fo), (d["f_a"], fa), (d["f_b"], fb)]:
            assert np.abs(mine - theirs).max() < 1e-10


def test_slider_crank_energy_balance():
    """Work of the crank torque = change of energy (+ friction losses), smooth start, 2 s."""
    for mu in [0.0, 0.4]:
        t = np.linspace(0, 2, 400001)
        th, dth, ddth = common.driven_angle(t, "smooth", 2 * np.pi, 1.0)
        d = sc.dynamics(th, dth, ddth, mu)
        from scipy.integrate import cumulative_simpson

        work = cumulative_simpson(d["torque"] * dth, x=t, initial=0.0)
        loss = cumulative_simpson(-d["friction"] * d["dx"], x=t, initial=0.0)
        e = sc.energy(th, dth)
        assert np.abs(work - loss - (e - e[0])).max() < 1e-8


# ---------------------------------------------------------------- four-link


def test_four_link_loop_closure_and_derivatives():
    th = np.linspace(0, 2 * np.pi, 73)
    beta, psi = fl.positions(th)
    p = fl.R_ROTOR * np.array([np.cos(th), np.sin(th)])
    r1 = p + fl.L_COUPLER * np.array([np.cos(beta), np.sin(beta)])
    r2 = fl.PIVOT[:, None] + fl.L_ROCKER * np.array([np.cos(psi), np.sin(psi)])
    assert np.abs(r1 - r2).max() < 1e-12
    b0, p0 = fl.positions(0.0)
    assert r1[1, 0] > 0  # free end above the x axis at theta = 0
    assert np.isclose(np.cos(p0) * fl.L_ROCKER + 10.0, 2 + fl.L_COUPLER * np.cos(b0))
    h = 1e-5
    _, dbeta, ddbeta, _, dpsi, ddpsi = fl.kinematics(th, 1.0, 0.0)
    bp, pp = fl.positions(th + h)
    bm, pm = fl.positions(th - h)
    assert np.allclose(dbeta, (bp - bm) / (2 * h), atol=1e-9)
    assert np.allclose(dpsi, (pp - pm) / (2 * h), atol=1e-9)
    # second differences need a larger step: psi comes from coordinates ~10 (rounding/h^2)
    h = 1e-3
    bp, pp = fl.positions(th + h)
    bm, pm = fl.positions(th - h)
    assert np.allclose(ddbeta, (bp - 2 * beta + bm) / h**2, atol=1e-6)
    assert np.allclose(ddpsi, (pp - 2 * psi + pm) / h**2, atol=1e-6)


def test_four_link_energy_balance():
    from scipy.integrate import cumulative_simpson

    t = np.linspace(0, 3, 600001)
    th, dth, ddth = common.driven_angle(t, "smooth", np.pi, 1.0)
    tau = fl.torque(th, dth, ddth)
    work = cumulative_simpson(tau * dth, x=t, initial=0.0)
    e = fl.energy(th, dth)
    assert np.abs(tau).max() > 1e3
    assert np.abs(work - (e - e[0])).max() < 1e-9 * np.abs(e - e[0]).max()


def test_four_link_static_torque_vs_potential_gradient():
    """At rest the torque holds gravity: tau = dV/dtheta (numerical derivative)."""
    h = 1e-6
    for th in np.linspace(0.1, 6.2, 11):
        v = lambda a: fl.energy(a, 0.0)
        assert abs(fl.torque(th, 0.0, 0.0) - (v(th + h) - v(th - h)) / (2 * h)) < 1e-5


# ---------------------------------------------------------------- quarter car


def test_quarter_car_equilibrium_by_hand():
    eq = qc.equilibrium()
    assert eq["tire_force"] == pytest.approx(3335.4, abs=1e-9)
    assert eq["stamp_force"] == pytest.approx(3433.5, abs=1e-9)
    assert eq["wheel_z"] == pytest.approx(0.3 - 3335.4 / 200000, abs=1e-15)
    assert eq["wheel_z"] == pytest.approx(0.283323, abs=1e-12)
    assert eq["chassis_z"] == pytest.approx(0.283323 + 0.5 - 2943 / 20000, abs=1e-12)
    d, _, _ = load("quarter_car.csv")
    assert d["chassis_z"][0] == pytest.approx(0.636173, abs=1e-12)
    assert d["stamp_force"][0] == pytest.approx(3433.5, abs=1e-9)


def test_quarter_car_exact_response_vs_integrator():
    """Exact linear solution against DOP853 on the absolute-coordinate equations with gravity."""
    amp, freq, w = 0.01, 1.5, 2 * np.pi * 1.5
    t = np.linspace(0, 3, 301)
    exact = qc.sine_response(t, amp, freq)
    eq = qc.equilibrium()

    def f(t, y):
        zc, zw, vc, vw = y
        u = amp * np.sin(w * t)
        fs = qc.K_S * (qc.L_S - (zc - zw)) - qc.C_S * (vc - vw)
        ft = qc.K_T * (qc.L_T - (zw - u))
        return [vc, vw, fs / qc.M_C - qc.G, (ft - fs) / qc.M_W - qc.G]

    sol = solve_ivp(f, (0, 3), [eq["chassis_z"], eq["wheel_z"], 0, 0], "DOP853", t_eval=t, rtol=1e-12, atol=1e-13)
    assert np.abs(sol.y[0] - exact[:, 2]).max() < 1e-10
    assert np.abs(sol.y[1] - exact[:, 3]).max() < 1e-10
    assert np.abs(sol.y[3] - exact[:, 5]).max() < 1e-9


# ---------------------------------------------------------------- bouncing balls


def test_bouncing_balls_energy_conserved():
    d, _, _ = load("bouncing_balls.csv")
    e0 = bb.energy(bb.Y0)
    assert np.abs(d["energy"] - e0).max() < 1e-9 * e0


def test_bouncing_balls_first_contact_closed_form():
    cols, ev, _ = common.read_csv(os.path.join(DATA, "bouncing_balls_events.csv"))
    assert ev[0, 1] == 2 and ev[0, 2] == 1  # lower ball hits the ground first
    assert ev[0, 0] == pytest.approx(np.sqrt(2 * 0.4 / 9.81), abs=1e-13)
    # while only the ground contact is active the lower ball is a harmonic oscillator about
    # R - g m/K; contact lasts until the gap reopens: closed form for the end
    w = np.sqrt(bb.K / bb.M)
    v0 = -np.sqrt(2 * 9.81 * 0.4)
    # y - y_s = A cos(w s) + B sin(w s), y_s = R - g/w^2, y(0) = R, y'(0) = v0
    ys = bb.R - 9.81 / w**2
    a, b = bb.R - ys, v0 / w
    # end of contact: y = R again, first root s > 0 of a cos + b sin = a
    s_end = 2 * np.arctan2(b, a) % (2 * np.pi) / w
    assert ev[1, 0] - ev[0, 0] == pytest.approx(s_end, abs=1e-12)


def test_bouncing_balls_vs_event_integrator():
    """DOP853 with event location, restarted at every switch, agrees over 1.5 s."""
    t_out = np.linspace(0, 1.5, 1501)
    z_exact, events = bb.simulate(t_out)
    t0, z0, act = 0.0, bb.Y0.copy(), np.array([False, False])
    res = []
    while t0 < 1.5:
        evs = []
        for i in range(2):
            ev = lambda t, z, i=i: bb.gaps(z)[i]
            ev.terminal = True
            ev.direction = 1.0 if act[i] else -1.0
            evs.append(ev)
        sol = solve_ivp(
            lambda t, z: bb.rhs(z, *act), (t0, 1.5), z0, "DOP853", events=evs, rtol=1e-13, atol=1e-13, dense_output=True
        )
        t1 = sol.t[-1]
        mask = (t_out >= t0) & (t_out <= t1)
        res.append((t_out[mask], sol.sol(t_out[mask]).T))
        if sol.status == 1:
            i = 0 if len(sol.t_events[0]) else 1
            act[i] = not act[i]
        t0, z0 = t1, sol.y[:, -1]
    z_ivp = np.zeros_like(z_exact)
    for tt, zz in res:
        idx = np.searchsorted(t_out, tt)
        z_ivp[idx] = zz
    assert np.abs(z_ivp[:, :2] - z_exact[:, :2]).max() < 1e-8
    assert len(events) >= 10


# ---------------------------------------------------------------- spherical chain


def skew(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def quat_matrix(q):
    """Rotation matrix of a unit quaternion (w, x, y, z)."""
    w, x, y, z = q / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


class NewtonEulerChain:
    """The same bars as rigid bodies, written independently of spherical_chain.py's equations:
    centre r, velocity v, quaternion q (body -> global), global angular velocity w per bar; body
    axis -y, joints at body (0, +L/2, 0) (upper) and (0, -L/2, 0) (lower). Per evaluation one
    linear system for the centre accelerations a_i, angular accelerations al_i and the joint
    forces F_k (on bar k from above; bar k-1 gets -F_k):
        m a_i = m g + F_i - F_{i+1}
        J_i al_i + w_i x J_i w_i = u_i x F_i - l_i x F_{i+1}      (u_i, l_i: joint points - centre)
        a_k + al_k x u_k + w_k x (w_k x u_k) = a_{k-1} + al_{k-1} x l_{k-1} + w_{k-1} x (w_{k-1} x l_{k-1})
    (ground: right-hand side 0), and q' = (0, w)/2 * q."""

    def __init__(self, n, g=sph.G * sph.G_DIR):
        self.n, self.g = n, np.asarray(g)
        self.jb = np.diag([sph.I_T, sph.I_A, sph.I_T])
        self.up, self.lo = np.array([0, sph.L / 2, 0]), np.array([0, -sph.L / 2, 0])

    def unpack(self, y):
        n = self.n
        return (
            y[: 3 * n].reshape(n, 3),
            y[3 * n : 6 * n].reshape(n, 3),
            y[6 * n : 10 * n].reshape(n, 4),
            y[10 * n :].reshape(n, 3),
        )

    def accelerations(self, q, w):
        n = self.n
        rot = [quat_matrix(qi) for qi in q]
        jg = [r @ self.jb @ r.T for r in rot]
        up, lo = [r @ self.up for r in rot], [r @ self.lo for r in rot]
        ia = lambda i: slice(3 * i, 3 * i + 3)
        il = lambda i: slice(3 * n + 3 * i, 3 * n + 3 * i + 3)
        jf = lambda k: slice(6 * n + 3 * k, 6 * n + 3 * k + 3)
        k_mat, b = np.zeros((9 * n, 9 * n)), np.zeros(9 * n)
        for i in range(n):
            r1, r2, r3 = slice(3 * i, 3 * i + 3), slice(3 * n + 3 * i, 3 * n + 3 * i + 3), jf(i)
            k_mat[r1, ia(i)] = sph.MASS * np.eye(3)
            k_mat[r1, jf(i)] = -np.eye(3)
            k_mat[r2, il(i)] = jg[i]
            k_mat[r2, jf(i)] = -skew(up[i])
            if i + 1 < n:
                k_mat[r1, jf(i + 1)] = np.eye(3)
                k_mat[r2, jf(i + 1)] = skew(lo[i])
            b[r1] = sph.MASS * self.g
            b[r2] = -np.cross(w[i], jg[i] @ w[i])
            k_mat[r3, ia(i)] = np.eye(3)
            k_mat[r3, il(i)] = -skew(up[i])
            b[r3] = -np.cross(w[i], np.cross(w[i], up[i]))
            if i > 0:
                k_mat[r3, ia(i - 1)] = -np.eye(3)
                k_mat[r3, il(i - 1)] = skew(lo[i - 1])
                b[r3] += np.cross(w[i - 1], np.cross(w[i - 1], lo[i - 1]))
        x = np.linalg.solve(k_mat, b)
        return x[: 3 * n].reshape(n, 3), x[3 * n : 6 * n].reshape(n, 3)

    def rhs(self, t, y):
        _, v, q, w = self.unpack(y)
        a, al = self.accelerations(q, w)
        qd = [0.5 * np.concatenate([[-wi @ qi[1:]], qi[0] * wi + np.cross(wi, qi[1:])]) for wi, qi in zip(w, q)]
        return np.concatenate([v.ravel(), a.ravel(), np.ravel(qd), al.ravel()])

    def state(self, e, ed, spin):
        """Rigid-body state for axes e_i, rates e_i' and axial spins (rotation about e arbitrary)."""
        from scipy.spatial.transform import Rotation

        chain = sph.Chain(self.n)
        quats = []
        for ei in e:
            rot, _ = Rotation.align_vectors([ei], [[0.0, -1.0, 0.0]])
            x, y, z, w = rot.as_quat()
            quats.append([w, x, y, z])
        w = np.cross(e, ed) + np.asarray(spin)[:, None] * e
        return np.concatenate([(chain.a @ e).ravel(), (chain.a @ ed).ravel(), np.ravel(quats), w.ravel()])

    def axes(self, y):
        _, _, q, _ = self.unpack(y)
        return np.array([quat_matrix(qi) @ np.array([0.0, -1.0, 0.0]) for qi in q])


def random_axes(rng, n):
    e = rng.normal(size=(n, 3))
    e /= np.linalg.norm(e, axis=1)[:, None]
    ed = rng.normal(size=(n, 3))
    ed -= np.sum(ed * e, axis=1)[:, None] * e
    return e, ed


def test_spherical_chain_accelerations_vs_newton_euler():
    """e_i'' from the axis equations = al_i x e_i + w_i x (w_i x e_i) from Newton-Euler, at random
    states with fast spins (the gyroscopic term matters); the reversed spin does not agree."""
    rng = np.random.default_rng(7)
    n = 3
    ne = NewtonEulerChain(n)
    for _ in range(5):
        e, ed = random_axes(rng, n)
        spin = rng.uniform(-20, 20, n)
        y = ne.state(e, ed, spin)
        _, _, q, w = ne.unpack(y)
        assert np.abs(ne.axes(y) - e).max() < 1e-14
        _, al = ne.accelerations(q, w)
        edd_ne = np.cross(al, e) + np.cross(w, np.cross(w, e))
        edd, _ = sph.Chain(n, spin=spin).accelerations(e, ed)
        assert np.abs(edd - edd_ne).max() < 1e-11 * (1 + np.abs(edd).max())
        edd_rev, _ = sph.Chain(n, spin=-spin).accelerations(e, ed)
        assert np.abs(edd_rev - edd_ne).max() > 1e-3


def test_spherical_chain_vs_newton_euler_integration():
    """Two bars from a random state with spins 20 and -15 rad/s over 2 s: the axis equations
    and a quaternion Newton-Euler integration agree (tip, axes; 4e-11), the axial spins w_i . e_i
    stay constant in Newton-Euler, and reversing the spins would be seen (0.15)."""
    rng = np.random.default_rng(5)
    n = 2
    e, ed = random_axes(rng, n)
    spin = np.array([20.0, -15.0])
    t = np.linspace(0, 2, 41)
    chain = sph.Chain(n, spin=spin)
    ne = NewtonEulerChain(n)
    a = chain.solve(t, y0=np.concatenate([e.ravel(), ed.ravel()]))
    b = solve_ivp(ne.rhs, (0, 2), ne.state(e, ed, spin), "DOP853", t_eval=t, rtol=1e-12, atol=1e-12)
    assert b.success
    e_a = np.array([chain.split(y)[0] for y in a.y.T])
    e_b = np.array([ne.axes(y) for y in b.y.T])
    assert np.abs(e_a - e_b).max() < 2e-10  # measured 4e-11
    assert np.abs(e_a.sum(axis=1) - e_b.sum(axis=1)).max() < 2e-10  # the tip (L = 1)
    spins = np.array([np.sum(ne.unpack(y)[3] * ne.axes(y), axis=1) for y in b.y.T])
    assert np.abs(spins - spin).max() < 1e-9
    rev = sph.Chain(n, spin=-spin)
    c = rev.solve(t, y0=np.concatenate([e.ravel(), ed.ravel()]))
    e_c = np.array([rev.split(y)[0] for y in c.y.T])
    assert np.abs(e_c - e_b).max() > 1e-3


def test_spherical_chain_energy_and_unit_axes():
    """The committed table: energy constant to 1e-10 J (of 295 J), |e_i| = 1 to 1e-12, and the
    chain really swings (the tip moves by more than 4 m) out of its initial vertical line."""
    d, _, _ = load("spherical_chain.csv")
    assert np.abs(d["energy"] - d["energy"][0]).max() < 1e-10
    assert d["unit_err"].max() < 1e-12
    assert np.ptp(d["tip_x"]) > 4.0 and np.ptp(d["tip_z"]) > 2.0
    for i in range(1, 9):
        norm = np.sqrt(d[f"e{i}_x"] ** 2 + d[f"e{i}_y"] ** 2 + d[f"e{i}_z"] ** 2)
        assert np.abs(norm - 1).max() < 1e-12
    tip = sum(np.stack([d[f"e{i}_x"], d[f"e{i}_y"], d[f"e{i}_z"]]) for i in range(1, 9))
    assert np.abs(tip - np.stack([d["tip_x"], d["tip_y"], d["tip_z"]])).max() < 1e-12
    # energy at t = 0 by hand: spin energy 8 I_a / 2, centres at y = -(i - 1/2)
    e0 = 8 * sph.I_A / 2 - sph.G / np.sqrt(1.13) * sum(i - 0.5 for i in range(1, 9))
    assert d["energy"][0] == pytest.approx(e0, abs=1e-10)  # 14 digits of 295 J


def test_spherical_chain_tolerance_sweep_agrees():
    """The committed file against a 10x tighter run (rtol 1e-13, atol 1e-14): 1e-12 m at the tip."""
    d, data, _ = load("spherical_chain.csv")
    chain = sph.Chain(8)
    b = chain.table(chain.solve(d["t"], rtol=1e-13, atol=1e-14))
    assert np.abs(b[:, 1:4] - data[:, 1:4]).max() < 1e-12
    assert np.abs(b[:, 6:] - data[:, 6:]).max() < 1e-11


# ---------------------------------------------------------------- table pendulum


def test_table_pendulum_energy_balance():
    """E(t) + damper work = E(0), E with the closed-form potential of the spring table
    (K1 theta^2/2 + K3 theta^4/4); the work by Simpson's rule on the 0.01 s samples."""
    from scipy.integrate import simpson

    import table_pendulum as tp

    d, _, _ = load("table_pendulum.csv")
    th, om = d["theta"], d["omega"]
    i_o = tp.IZZ + tp.M * tp.L**2
    e = 0.5 * i_o * om**2 - tp.M * tp.G * tp.L * np.cos(th) + tp.K1 * th**2 / 2 + tp.K3 * th**4 / 4
    work = simpson(d["damper_torque"] * om, x=d["t"])
    assert work > 0.1 * (e[0] - e.min())
    assert abs(e[0] - e[-1] - work) < 1e-6 * abs(e[0] - e.min())
    assert np.all(np.abs(d["spring_torque"] - tp.spring(th)) < 1e-12 * (1 + np.abs(tp.spring(th))))


# ---------------------------------------------------------------- data cannot go stale


def committed_files():
    return sorted(f for f in os.listdir(DATA) if f.endswith(".csv") and not f.endswith("_events.csv"))


def test_every_committed_file_is_small_and_documented():
    files = committed_files()
    assert len(files) >= 14
    for f in files:
        path = os.path.join(DATA, f)
        assert os.path.getsize(path) < 1_000_000, f
        _, data, comments = common.read_csv(path)
        assert comments[0].startswith("generated by: tools/references/"), f
        assert any("date (UTC)" in c for c in comments), f
        assert np.all(np.isfinite(data)), f
        assert np.all(np.diff(data[:, 0]) > 0), f


@pytest.mark.parametrize("name", committed_files())
def test_fresh_short_run_equals_committed(name, tmp_path):
    """Re-run the command recorded in the header over the first samples and compare."""
    path = os.path.join(DATA, name)
    cols, data, comments = common.read_csv(path)
    argv = shlex.split(comments[0][len("generated by: ") :])
    dt = data[1, 0] - data[0, 0]
    k = min(len(data) - 1, 40)
    out = tmp_path / "fresh.csv"
    args, skip = [], False
    for i, a in enumerate(argv[1:]):
        if skip:
            skip = False
            continue
        if a in ("--out", "--t-end", "--dt", "--n", "--events"):
            skip = True
            continue
        args.append(a)
    args += ["--t-end", repr(float(k * round(dt, 12))), "--n", str(k), "--out", str(out)]
    subprocess.run([sys.executable, os.path.join(ROOT, argv[0])] + args, check=True, cwd=ROOT)
    fcols, fresh, _ = common.read_csv(str(out))
    assert fcols == cols
    # 1e-8, not tighter: the generators integrate at rtol 1e-12, but another numpy/scipy build
    # or processor (libm, SIMD kernels) moves the last digits, and over 0.4 s of the table
    # pendulum (a spline with kinks at its knots) that grew to 4.5e-9 N m on a fresh machine
    # (numpy 2.4.6, scipy 1.17.1, AMD EPYC; the file was written on 2026-11-24). The engine is
    # checked against these files at 1e-6 and looser, so 1e-8 still proves the file is the
    # generator's.
    assert np.allclose(fresh, data[: k + 1], rtol=1e-8, atol=1e-8), name
