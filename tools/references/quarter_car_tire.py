#!/usr/bin/env python3
"""Quarter car with a Magic Formula point-contact tire rolling over a cleat (issue 16).

models/quarter_car_tire.toml in its own minimal coordinates, written from the model's
description (docs/model-format.md, "Tire"), not from the engine:
    state (z_c, z_c', z_u, z_u', W): chassis and wheel-centre heights, wheel spin about +y.
    x = V t (V = 10 m/s, prescribed), road h(x) = natural cubic spline through
    models/cleat.csv (constant outside), road_z input 0.
    deflection d = R - z_u + h(x),  d' = -z_u' + h'(x) V
    F_z = max(0, k_t d + c_t d') while d > 0, else 0                      (lift-off, no pull)
    slip velocity v_sx = V - W R,  kappa = -v_sx / sqrt(V^2 + v_low^2)
    F_x = mu F_z sin(C atan(B kappa - E (B kappa - atan(B kappa))))
    suspension (compression positive) F_s = k_s (L0 - (z_c - z_u)) - c_s (z_c' - z_u')
    m_c z_c'' = F_s - m_c g,   m_u z_u'' = F_z - F_s - m_u g,   I W' = T(t) - R F_x
    brake torque T = -600 (1 - cos(pi (t - 0.3) / 0.1)) / 2 on [0.3, 0.4], -600 after.
The contact switches (d = 0 and k_t d + c_t d' = 0) are located by solve_ivp's events and the
integration restarted there and at the brake's kinks; DOP853, rtol 1e-12, atol 1e-14.
Columns: t, chassis_z, wheel_z, wheel_spin, tire_fz, tire_deflection.
"""

import os

import numpy as np
from scipy.integrate import solve_ivp
from scipy.interpolate import CubicSpline

import common

G = 9.81
M_C, M_U, I_W = 300.0, 40.0, 0.8  # chassis; carrier 30 + wheel 10; wheel spin inertia
K_S, C_S, L0 = 20000.0, 1500.0, 0.64715
R, K_T, C_T, MU, V_LOW = 0.3, 200000.0, 100.0, 1.0, 0.5
B, C, E = 10.0, 1.65, 0.5
V = 10.0
T_BRAKE, T0, DT = -600.0, 0.3, 0.1
Z_C0, Z_U0 = 0.783323, 0.283323

HERE = os.path.dirname(os.path.abspath(__file__))
_, _rows, _ = common.read_csv(os.path.join(HERE, "..", "..", "models", "cleat.csv"))
XS, HS = _rows[:, 0], _rows[:, 1]
SPLINE = CubicSpline(XS, HS, bc_type="natural")


def road(x):
    """Height and slope along x (constant outside the table)."""
    if x <= XS[0]:
        return HS[0], 0.0
    if x >= XS[-1]:
        return HS[-1], 0.0
    return float(SPLINE(x)), float(SPLINE(x, 1))


def brake(t):
    if t <= T0:
        return 0.0
    if t >= T0 + DT:
        return T_BRAKE
    return T_BRAKE * 0.5 * (1.0 - np.cos(np.pi * (t - T0) / DT))


def tire(t, y):
    """(F_z, F_x, deflection, k d + c d') at state y."""
    zc, vc, zu, vu, w = y
    h, dh = road(V * t)
    d = R - zu + h
    dd = -vu + dh * V
    raw = K_T * d + C_T * dd
    fz = raw if (d > 0.0 and raw > 0.0) else 0.0
    kappa = -(V - w * R) / np.hypot(V, V_LOW)
    bk = B * kappa
    fx = MU * fz * np.sin(C * np.arctan(bk - E * (bk - np.arctan(bk))))
    return fz, fx, d, raw


def rhs(t, y):
    zc, vc, zu, vu, w = y
    fz, fx, _, _ = tire(t, y)
    fs = K_S * (L0 - (zc - zu)) - C_S * (vc - vu)
    return [vc, fs / M_C - G, vu, (fz - fs) / M_U - G, (brake(t) - R * fx) / I_W]


def ev_deflection(t, y):
    return tire(t, y)[2]


def ev_push(t, y):
    return tire(t, y)[3]


ev_deflection.terminal = True
ev_push.terminal = True


def solve(t_out, rtol=1e-12, atol=1e-14):
    """Rows (t, chassis_z, wheel_z, wheel_spin, tire_fz, tire_deflection) and the switch times."""
    t_end = t_out[-1]
    y = np.array([Z_C0, 0.0, Z_U0, 0.0, V / R])
    t = 0.0
    breaks = [T0, T0 + DT, t_end]
    ts, ys, switches = [t], [y.copy()], []
    while t < t_end - 1e-15:
        t_stop = min(b for b in breaks if b > t + 1e-15)
        sol = solve_ivp(rhs, (t, t_stop), y, method="DOP853", rtol=rtol, atol=atol, dense_output=True,
                        events=[ev_deflection, ev_push], max_step=1e-3)
        assert sol.success, sol.message
        seg_t = t_out[(t_out > t) & (t_out <= sol.t[-1] + 1e-15)]
        ts.extend(seg_t)
        ys.extend(sol.sol(seg_t).T)
        if sol.status == 1:  # an event: restart just past it
            t_ev = sol.t[-1]
            switches.append(t_ev)
            y = sol.y[:, -1].copy()
            # Step over the switch so the event is not found again at its own start.
            t_next = t_ev + 1e-12
            y = y + 1e-12 * np.array(rhs(t_ev, y))
            t = t_next
        else:
            t, y = sol.t[-1], sol.y[:, -1].copy()
    rows = []
    seen = set()
    for tk, yk in zip(ts, ys):
        key = round(tk, 9)
        if key in seen:
            continue
        seen.add(key)
        fz, _, d, _ = tire(tk, yk)
        rows.append([tk, yk[0], yk[2], yk[4], fz, d])
    rows = np.array(rows)
    keep = np.array([np.any(np.abs(t_out - r) < 1e-9) for r in rows[:, 0]])
    return rows[keep], switches


COLUMNS = ["t", "chassis_z", "wheel_z", "wheel_spin", "tire_fz", "tire_deflection"]


def main():
    p = common.parser(__doc__.splitlines()[0], t_end=1.5, dt=0.001)
    p.add_argument("--rtol", type=float, default=1e-12)
    p.add_argument("--atol", type=float, default=1e-14)
    args = p.parse_args()
    t = common.sample_times(args)
    rows, switches = solve(t, args.rtol, args.atol)
    common.write_csv(
        args.out,
        COLUMNS,
        rows,
        [
            "quarter car with Magic Formula tire over a 40 mm cleat at 10 m/s (models/quarter_car_tire.toml)",
            f"chassis {M_C} kg, unsprung {M_U} kg, spin inertia {I_W}; k_s {K_S}, c_s {C_S}, L0 {L0}",
            f"tire R {R}, k {K_T}, c {C_T}, mu {MU}, B {B}, C {C}, E {E}, v_low {V_LOW}; brake {T_BRAKE} N m",
            f"DOP853 rtol {args.rtol} atol {args.atol}, restarted at contact switches: "
            + ", ".join(f"{s:.12f}" for s in switches),
        ],
    )


if __name__ == "__main__":
    main()
