#!/usr/bin/env python3
"""Slider-crank (paper 004, issue 2 model 3): closed-form kinematics and inverse dynamics.

Geometry (planar, gravity g = 9.81 along -y): crank O-A of length a = 0.1 pivoting at the
origin, crank angle theta from +x; rod A-B of length b = 0.3; slider B = (x, 0) on the x axis.
    sin(beta) = -a sin(theta) / b,  cos(beta) = +sqrt(1 - sin^2 beta)   (rod angle, A to B)
    x = a cos(theta) + b cos(beta)
    beta' = -a cos(theta) theta' / (b cos beta)
    x'    = -a sin(theta) theta' - b sin(beta) beta'
    beta''= (-a cos(theta) theta'' + a sin(theta) theta'^2 + b sin(beta) beta'^2) / (b cos beta)
    x''   = -a cos(theta) theta'^2 - a sin(theta) theta'' - b cos(beta) beta'^2 - b sin(beta) beta''
Bodies: crank m1 = 0.12, centre at a/2, Izz 1e-4; rod m2 = 0.5, centre at mid length, Izz 4e-3;
slider m3 = 2 (translation only).
Slider normal reaction N (ground on slider, +y), from the rod's moment balance about A and
the slider's force balance (F_B = force of the slider on the rod = (F_f - m3 x'', N - m3 g)):
    (B - A) x F_B = I2 beta'' + (G2 - A) x m2 (a_G2 - g_vec)
Friction on the slider: F_f = -mu |N| tanh(x' / v_reg), v_reg = 1e-3 (N solved exactly, the
equation is piecewise linear in N).
Crank torque (about +z, applied by the driver to the crank) by virtual work in theta:
    tau = sum_i (m_i a_Gi - m_i g_vec) . dG_i/dtheta + I1 theta'' + I2 beta'' dbeta/dtheta
          + m3 x'' dx/dtheta - F_f dx/dtheta
Pin forces (global x, y): slider on rod F_B, crank on rod F_A = m2 (a_G2 - g_vec) - F_B,
ground on crank at O F_O = m1 (a_G1 - g_vec) + F_A.
Columns: t, crank_angle, crank_rate, crank_acc, slider_x, slider_v, slider_a, rod_angle,
normal_force, friction_force, crank_torque, ground_on_crank_{x,y}, crank_on_rod_{x,y},
slider_on_rod_{x,y}.
"""

import numpy as np

import common

G = 9.81
A, B = 0.1, 0.3
M1, I1 = 0.12, 1e-4
M2, I2 = 0.5, 4e-3
M3 = 2.0
V_REG = 1e-3


def kinematics(th, dth, ddth):
    """Slider x, x', x'', rod angle beta, beta', beta'' (arrays or scalars)."""
    sb = -A * np.sin(th) / B
    cb = np.sqrt(1.0 - sb * sb)
    beta = np.arctan2(sb, cb)
    x = A * np.cos(th) + B * cb
    dbeta = -A * np.cos(th) * dth / (B * cb)
    dx = -A * np.sin(th) * dth - B * sb * dbeta
    ddbeta = (-A * np.cos(th) * ddth + A * np.sin(th) * dth**2 + B * sb * dbeta**2) / (B * cb)
    ddx = -A * np.cos(th) * dth**2 - A * np.sin(th) * ddth - B * cb * dbeta**2 - B * sb * ddbeta
    return x, dx, ddx, beta, dbeta, ddbeta


def cross(u, v):
    return u[0] * v[1] - u[1] * v[0]


def dynamics(th, dth, ddth, mu=0.0, v_reg=V_REG):
    """dict with the kinematics, the normal force N, friction force and crank torque."""
    x, dx, ddx, beta, dbeta, ddbeta = kinematics(th, dth, ddth)
    e = np.array([np.cos(th), np.sin(th)])  # crank direction
    ep = np.array([-np.sin(th), np.cos(th)])
    pa = A * e
    acc_a = A * (ddth * ep - dth**2 * e)
    acc_b = np.array([ddx, np.zeros_like(ddx)])
    acc_g1 = 0.5 * acc_a
    acc_g2 = 0.5 * (acc_a + acc_b)
    d = np.array([x, np.zeros_like(x)]) - pa  # B - A
    gvec = np.array([0.0 * x, -G + 0.0 * x])
    # Moment balance of the rod about A, slider force balance folded in.
    r = I2 * ddbeta + cross(0.5 * d, M2 * (acc_g2 - gvec)) + d[0] * M3 * G - d[1] * M3 * ddx
    s = np.tanh(dx / v_reg)
    n_pos = r / (d[0] + d[1] * mu * s)
    n_neg = r / (d[0] - d[1] * mu * s)
    n = np.where(n_pos >= 0.0, n_pos, n_neg)
    f_fric = -mu * np.abs(n) * s
    # Pin forces: slider on rod at B, crank on rod at A, ground on crank at O.
    f_b = np.array([f_fric - M3 * ddx, n - M3 * G])
    f_a = M2 * (acc_g2 - gvec) - f_b
    f_o = M1 * (acc_g1 - gvec) + f_a
    # Virtual work in theta: velocity coefficients dG/dtheta etc.
    dbeta_dth = -A * np.cos(th) / (B * np.cos(beta))
    dx_dth = -A * np.sin(th) - B * np.sin(beta) * dbeta_dth
    j1 = 0.5 * A * ep
    j2 = 0.5 * (A * ep + np.array([dx_dth, 0.0 * dx_dth]))
    tau = (
        np.sum((M1 * (acc_g1 - gvec)) * j1, axis=0)
        + np.sum((M2 * (acc_g2 - gvec)) * j2, axis=0)
        + I1 * ddth
        + I2 * ddbeta * dbeta_dth
        + (M3 * ddx - f_fric) * dx_dth
    )
    return dict(
        x=x, dx=dx, ddx=ddx, beta=beta, dbeta=dbeta, ddbeta=ddbeta, normal=n, friction=f_fric, torque=tau,
        f_o=f_o, f_a=f_a, f_b=f_b,
    )


def energy(th, dth):
    """Kinetic + gravitational energy of the mechanism at crank angle th, rate dth."""
    x, dx, _, beta, dbeta, _ = kinematics(th, dth, 0.0 * th)
    va = A * dth * np.array([-np.sin(th), np.cos(th)])
    vg2 = 0.5 * (va + np.array([dx, 0.0 * dx]))
    kin = 0.5 * M1 * np.sum((0.5 * va) ** 2, axis=0) + 0.5 * I1 * dth**2
    kin = kin + 0.5 * M2 * np.sum(vg2**2, axis=0) + 0.5 * I2 * dbeta**2 + 0.5 * M3 * dx**2
    pot = G * (M1 * 0.5 * A * np.sin(th) + M2 * 0.5 * A * np.sin(th))
    return kin + pot


def table(t, motion="constant", rate=2 * np.pi, ramp=1.0, mu=0.0, v_reg=V_REG):
    th, dth, ddth = common.driven_angle(t, motion, rate, ramp)
    d = dynamics(th, dth, ddth, mu, v_reg)
    return np.stack(
        [t, th, dth, ddth, d["x"], d["dx"], d["ddx"], d["beta"], d["normal"], d["friction"], d["torque"]]
        + [d["f_o"][0], d["f_o"][1], d["f_a"][0], d["f_a"][1], d["f_b"][0], d["f_b"][1]],
        axis=1,
    )


COLUMNS = [
    "t",
    "crank_angle",
    "crank_rate",
    "crank_acc",
    "slider_x",
    "slider_v",
    "slider_a",
    "rod_angle",
    "normal_force",
    "friction_force",
    "crank_torque",
    "ground_on_crank_x",
    "ground_on_crank_y",
    "crank_on_rod_x",
    "crank_on_rod_y",
    "slider_on_rod_x",
    "slider_on_rod_y",
]


def main():
    p = common.parser(__doc__.splitlines()[1], t_end=8.0, dt=0.01)
    p.add_argument("--motion", choices=["constant", "smooth"], default="constant")
    p.add_argument("--rate", type=float, default=2 * np.pi, help="crank rate [rad/s]")
    p.add_argument("--ramp", type=float, default=1.0, help="smooth-start duration [s]")
    p.add_argument("--mu", type=float, default=0.0, help="Coulomb friction coefficient")
    p.add_argument("--v-reg", type=float, default=V_REG, help="tanh regularization velocity")
    args = p.parse_args()
    t = common.sample_times(args)
    motion = (
        f"crank_angle = {args.rate} t"
        if args.motion == "constant"
        else f"smooth start: rate {args.rate} (1 - cos(pi t/{args.ramp}))/2 for t < {args.ramp}, then constant"
    )
    common.write_csv(
        args.out,
        COLUMNS,
        table(t, args.motion, args.rate, args.ramp, args.mu, args.v_reg),
        [
            "slider-crank (paper 004): crank 0.1/0.12 kg/Izz 1e-4, rod 0.3/0.5 kg/Izz 4e-3, slider 2 kg",
            f"motion: {motion}; friction mu = {args.mu}, tanh(v/{args.v_reg})",
            "closed-form kinematics, inverse dynamics by virtual work in the crank angle (exact)",
        ],
    )


if __name__ == "__main__":
    main()
