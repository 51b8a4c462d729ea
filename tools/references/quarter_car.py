#!/usr/bin/env python3
"""Quarter-car stamp rig (issue 2 model 5): static equilibrium by hand, exact linear response.

Vertical coordinates (gravity g = 9.81 along -z): chassis centre z_c (300 kg, prismatic to
ground), wheel centre z_w (40 kg, prismatic to the chassis), stamp top z_s = u(t) (10 kg,
driven). Suspension spring-damper k_s = 20000, c = 1500, free length 0.5 between wheel and
chassis centres; tire spring k_t = 200000, free length 0.3 between stamp top and wheel centre,
no damping, no lift-off (the model is linear).
Forces, compression positive:
    F_susp = k_s (0.5 - (z_c - z_w)) - c (z_c' - z_w')
    F_tire = k_t (0.3 - (z_w - z_s))
    m_c z_c'' = F_susp - m_c g,   m_w z_w'' = F_tire - F_susp - m_w g
    stamp_force (actuator force on the stamp, +z) = m_s (u'' + g) + F_tire
Static equilibrium at u = 0 (by hand):
    F_tire = (m_c + m_w) g = 3335.4 N,  F_susp = m_c g = 2943 N,  stamp_force = 350 g = 3433.5 N
    z_w = 0.3 - (m_c + m_w) g / k_t,    z_c = z_w + 0.5 - m_c g / k_s
Response to u(t) = amp sin(2 pi f t) from equilibrium: x = (y_c, y_w, y_c', y_w') deviations,
x' = A x + B u solved exactly: steady state Im(X e^{i w t}) with (i w - A) X = B amp, plus the
homogeneous part expm(A t) (x(0) - x_p(0)) (scipy.linalg.expm, machine precision).
Columns: t, stamp_z, chassis_z, wheel_z, chassis_v, wheel_v, tire_force, susp_force, stamp_force.
"""

import numpy as np
from scipy.linalg import expm

import common

G = 9.81
M_C, M_W, M_S = 300.0, 40.0, 10.0
K_S, C_S, L_S = 20000.0, 1500.0, 0.5
K_T, L_T = 200000.0, 0.3


def equilibrium(u=0.0):
    """dict: chassis_z, wheel_z, tire_force, susp_force, stamp_force at rest with stamp at u."""
    f_tire = (M_C + M_W) * G
    f_susp = M_C * G
    z_w = u + L_T - f_tire / K_T
    z_c = z_w + L_S - f_susp / K_S
    return dict(chassis_z=z_c, wheel_z=z_w, tire_force=f_tire, susp_force=f_susp, stamp_force=M_S * G + f_tire)


def system_matrices(c=C_S):
    a = np.zeros((4, 4))
    a[0, 2] = a[1, 3] = 1.0
    a[2, :] = [-K_S / M_C, K_S / M_C, -c / M_C, c / M_C]
    a[3, :] = [K_S / M_W, -(K_S + K_T) / M_W, c / M_W, -c / M_W]
    b = np.array([0.0, 0.0, 0.0, K_T / M_W])
    return a, b


def sine_response(t, amp=0.01, freq=1.5, c=C_S):
    """Rows (t, stamp_z, chassis_z, wheel_z, chassis_v, wheel_v, tire, susp, stamp_force)."""
    a, b = system_matrices(c)
    w = 2 * np.pi * freq
    xc = np.linalg.solve(1j * w * np.eye(4) - a, b * amp)
    xp = np.imag(np.outer(np.exp(1j * w * t), xc))  # (len(t), 4)
    x0 = np.zeros(4)
    xh = np.array([expm(a * tk) @ (x0 - xp[0]) for tk in t])
    x = xp + xh
    eq = equilibrium()
    u = amp * np.sin(w * t)
    udd = -amp * w * w * np.sin(w * t)
    z_c = eq["chassis_z"] + x[:, 0]
    z_w = eq["wheel_z"] + x[:, 1]
    f_tire = K_T * (L_T - (z_w - u))
    f_susp = K_S * (L_S - (z_c - z_w)) - c * (x[:, 2] - x[:, 3])
    stamp = M_S * (udd + G) + f_tire
    return np.stack([t, u, z_c, z_w, x[:, 2], x[:, 3], f_tire, f_susp, stamp], axis=1)


COLUMNS = ["t", "stamp_z", "chassis_z", "wheel_z", "chassis_v", "wheel_v", "tire_force", "susp_force", "stamp_force"]


def main():
    p = common.parser(__doc__.splitlines()[1], t_end=5.0, dt=0.01)
    p.add_argument("--amp", type=float, default=0.01, help="stamp amplitude [m]")
    p.add_argument("--freq", type=float, default=1.5, help="stamp frequency [Hz]")
    p.add_argument("--damping", type=float, default=C_S, help="suspension damping [N s/m]")
    args = p.parse_args()
    t = common.sample_times(args)
    eq = equilibrium()
    common.write_csv(
        args.out,
        COLUMNS,
        sine_response(t, args.amp, args.freq, args.damping),
        [
            "quarter-car stamp rig: chassis 300, wheel 40, stamp 10 kg; k_s=2e4 L0=0.5, k_t=2e5 L0=0.3",
            f"suspension damping c = {args.damping}; stamp_z = {args.amp} sin(2 pi {args.freq} t), from equilibrium",
            "equilibrium: " + ", ".join(f"{k} = {v:.12g}" for k, v in eq.items()),
            "exact linear solution (steady state + expm homogeneous part); forces compression positive",
        ],
    )


if __name__ == "__main__":
    main()
