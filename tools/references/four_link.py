#!/usr/bin/env python3
"""Four-link crank-rocker (paper 004, issue 2 model 4): closed-form kinematics, inverse dynamics.

Geometry (planar, gravity g = 9.81 along -y): rotor disk of radius r = 2 pivoting at the
origin, rim point P = r e(theta) (initially (2, 0)); coupler P-R of length c = 12.2; rocker
O-R of length b = 7.4 pivoting at O = (10, 0), its free end R above the x axis at theta = 0.
e(a) = (cos a, sin a), e'(a) = (-sin a, cos a); coupler angle beta (P to R), rocker angle psi
(O to R), both from +x.
Loop closure r e(theta) + c e(beta) = O + b e(psi), solved in closed form:
    D = O - P, d = |D|, alpha = arccos((d^2 + c^2 - b^2) / (2 d c)) in (0, pi)
    beta = atan2(D) + alpha   (the branch with R above the x axis at theta = 0; Grashof
                               crank-rocker: d in [8, 12] never reaches c - b or c + b, so the
                               branch is kept for all theta)
    psi  = atan2(P + c e(beta) - O)
Rates and accelerations from the differentiated loop (2x2, Cramer):
    c beta' e'(beta) - b psi' e'(psi) = -r theta' e'(theta)
    c beta'' e'(beta) - b psi'' e'(psi) = -r theta'' e'(theta) + r theta'^2 e(theta)
                                          + c beta'^2 e(beta) - b psi'^2 e(psi)
Bodies: bars of square section w x w = 0.1 x 0.1, density 1500: coupler m = 183, rocker
m = 111, Izz = m (L^2 + w^2) / 12 about the centre (mid length); rotor disk m = 1500 pi r^2 0.1,
Izz = m r^2 / 2, centre at the pivot.
Rotor torque (about +z, applied by the driver) by virtual work in theta:
    tau = I_disk theta'' + sum_bars [(m a_G - m g_vec) . dG/dtheta + I phi'' dphi/dtheta]
Columns: t, rotor_angle, rotor_rate, rotor_acc, coupler_angle, rocker_angle, rocker_rate,
rocker_acc, rotor_torque.
"""

import numpy as np

import common

G = 9.81
R_ROTOR, L_COUPLER, L_ROCKER = 2.0, 12.2, 7.4
PIVOT = np.array([10.0, 0.0])
W, RHO, DISK_T = 0.1, 1500.0, 0.1
M_C = RHO * W * W * L_COUPLER
M_R = RHO * W * W * L_ROCKER
I_C = M_C * (L_COUPLER**2 + W**2) / 12
I_R = M_R * (L_ROCKER**2 + W**2) / 12
M_D = RHO * np.pi * R_ROTOR**2 * DISK_T
I_D = 0.5 * M_D * R_ROTOR**2


def e(a):
    return np.array([np.cos(a), np.sin(a)])


def ep(a):
    return np.array([-np.sin(a), np.cos(a)])


def cross(u, v):
    return u[0] * v[1] - u[1] * v[0]


def positions(th):
    """Coupler angle beta and rocker angle psi for rotor angle th."""
    r, c, b = R_ROTOR, L_COUPLER, L_ROCKER
    p = r * e(th)
    dvec = PIVOT[:, None] - p if np.ndim(th) else PIVOT - p
    d = np.hypot(dvec[0], dvec[1])
    alpha = np.arccos((d * d + c * c - b * b) / (2 * d * c))
    beta = np.arctan2(dvec[1], dvec[0]) + alpha
    rr = p + c * e(beta)
    psi = np.arctan2(rr[1] - PIVOT[1], rr[0] - PIVOT[0])
    return beta, psi


def solve2(beta, psi, rhs):
    """[c e'(beta), -b e'(psi)] [x; y] = rhs by Cramer's rule."""
    c, b = L_COUPLER, L_ROCKER
    col1, col2 = c * ep(beta), -b * ep(psi)
    det = cross(col1, col2)
    return cross(rhs, col2) / det, cross(col1, rhs) / det


def kinematics(th, dth, ddth):
    r, c, b = R_ROTOR, L_COUPLER, L_ROCKER
    beta, psi = positions(th)
    dbeta, dpsi = solve2(beta, psi, -r * dth * ep(th))
    rhs = -r * ddth * ep(th) + r * dth**2 * e(th) + c * dbeta**2 * e(beta) - b * dpsi**2 * e(psi)
    ddbeta, ddpsi = solve2(beta, psi, rhs)
    return beta, dbeta, ddbeta, psi, dpsi, ddpsi


def torque(th, dth, ddth):
    r, b = R_ROTOR, L_ROCKER
    beta, dbeta, ddbeta, psi, dpsi, ddpsi = kinematics(th, dth, ddth)
    jb, jp = solve2(beta, psi, -r * ep(th))  # dbeta/dtheta, dpsi/dtheta
    acc_p = r * (ddth * ep(th) - dth**2 * e(th))
    acc_r = b * (ddpsi * ep(psi) - dpsi**2 * e(psi))
    j_p, j_r = r * ep(th), b * jp * ep(psi)
    g = np.array([0.0 * th, -G + 0.0 * th])
    tau = I_D * ddth
    tau = tau + np.sum(M_C * (0.5 * (acc_p + acc_r) - g) * 0.5 * (j_p + j_r), axis=0) + I_C * ddbeta * jb
    tau = tau + np.sum(M_R * (0.5 * acc_r - g) * 0.5 * j_r, axis=0) + I_R * ddpsi * jp
    return tau


def energy(th, dth):
    """Kinetic + gravitational energy (y = 0 datum)."""
    r, c, b = R_ROTOR, L_COUPLER, L_ROCKER
    beta, dbeta, _, psi, dpsi, _ = kinematics(th, dth, 0.0 * th)
    v_p = r * dth * ep(th)
    v_r = b * dpsi * ep(psi)
    y_c = 0.5 * (r * np.sin(th) + PIVOT[1] + b * np.sin(psi))
    y_r = PIVOT[1] + 0.5 * b * np.sin(psi)
    kin = 0.5 * I_D * dth**2 + 0.5 * M_C * np.sum((0.5 * (v_p + v_r)) ** 2, axis=0) + 0.5 * I_C * dbeta**2
    kin = kin + 0.5 * M_R * np.sum((0.5 * v_r) ** 2, axis=0) + 0.5 * I_R * dpsi**2
    return kin + G * (M_C * y_c + M_R * y_r)


def table(t, motion="constant", rate=np.pi, ramp=1.0):
    th, dth, ddth = common.driven_angle(t, motion, rate, ramp)
    beta, dbeta, ddbeta, psi, dpsi, ddpsi = kinematics(th, dth, ddth)
    return np.stack([t, th, dth, ddth, beta, psi, dpsi, ddpsi, torque(th, dth, ddth)], axis=1)


COLUMNS = [
    "t",
    "rotor_angle",
    "rotor_rate",
    "rotor_acc",
    "coupler_angle",
    "rocker_angle",
    "rocker_rate",
    "rocker_acc",
    "rotor_torque",
]


def main():
    p = common.parser(__doc__.splitlines()[1], t_end=8.0, dt=0.01)
    p.add_argument("--motion", choices=["constant", "smooth"], default="constant")
    p.add_argument("--rate", type=float, default=np.pi, help="rotor rate [rad/s]")
    p.add_argument("--ramp", type=float, default=1.0, help="smooth-start duration [s]")
    args = p.parse_args()
    t = common.sample_times(args)
    motion = (
        f"rotor_angle = {args.rate} t"
        if args.motion == "constant"
        else f"smooth start: rate {args.rate} (1 - cos(pi t/{args.ramp}))/2 for t < {args.ramp}, then constant"
    )
    common.write_csv(
        args.out,
        COLUMNS,
        table(t, args.motion, args.rate, args.ramp),
        [
            "four-link crank-rocker (paper 004): rotor r=2 at origin, coupler 12.2, rocker 7.4 at (10,0)",
            "bars 0.1x0.1 density 1500 (Izz = m(L^2+w^2)/12), disk thickness 0.1 (Izz = m r^2/2)",
            f"motion: {motion}",
            "angles from +x: coupler P->R, rocker pivot->free end; closed form, torque by virtual work",
        ],
    )


if __name__ == "__main__":
    main()
