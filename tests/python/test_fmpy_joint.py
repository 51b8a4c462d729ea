"""The joint-coordinate formulation through the FMU (FMI 2 and FMI 3, fmpy's `simulate_fmu`):
every gallery model, with `formulation = "joint"` (the default) written into its [model]
section, against the same independent references and tolerances as the absolute formulation
(test_fmpy_references.py; the spherical chain against tests/data/spherical_chain.csv as
tests/spherical_chain_reference.rs; the suspension corner against the hand calculations of
test_fmpy_corner_parameters.py). Run: python -m pytest -q -s tests/python/test_fmpy_joint.py
"""

import numpy as np
import pytest

from test_fmpy_corner_parameters import ARMS, G
from test_fmpy_corner_parameters import run as corner_run
from test_fmpy_references import (
    MODELS,
    RestingStartChain,
    check,
    crank_signal,
    max_error,
    reference,
    signal,
    simulate,
)
from test_fmpy_validate import export, in_formulation, tools  # noqa: F401  (fixture)


@pytest.fixture(autouse=True)
def need_fmpy():
    pytest.importorskip("fmpy")


def joint_model(name, tmp_path):
    # Explicit although joint is the default: this file checks the joint formulation.
    return in_formulation(MODELS / name, "joint", tmp_path)


@pytest.mark.parametrize("version", [2, 3])
def test_double_pendulum_stiff_joint(tools, version, tmp_path):  # noqa: F811
    """Two joint angles, no constraints; theta1/theta2 against Radau at 1e-12, FMU at 1e-8,
    under the default Jacobian strategy (dense_extended, `solver.jacobian` 3) and under dense (1).

    Measured (2026-11-24, session 7): 5.04e-8 rad (dense_extended) and 5.07e-8 rad (dense),
    what the BDF's steps give with the corrector converged (5.06e-8 with a corrector tolerance
    1000 times tighter, either strategy, either landing rule). Before the corrector test of
    docs/integrators.md ("Corrector convergence"), a step could stop after one update on an old
    matrix, and the strategies differed by that iteration error: 1.0e-7 (dense), 7.1e-8
    (dense_extended); the 2.6e-9 / 3.3e-8 measured before the re-anchoring merge came from
    twice as many steps (the former landing rule locked the step near H/5), with that iteration
    error partly cancelling. Bound 1e-7 (10 rtol); the two strategies solve the same corrector
    to convergence, so they agree to well below the error (1e-8)."""
    from fmpy import simulate_fmu

    fmu = export(tools, joint_model("double_pendulum_stiff.toml", tmp_path), version, tmp_path)
    ref = reference("double_pendulum_stiff.csv")
    runs = {
        name: simulate_fmu(str(fmu), stop_time=2.0, output_interval=0.01, relative_tolerance=1e-8,
                           start_values={"solver.atol": 1e-10, "solver.jacobian": value},
                           output=["theta1", "theta2"])
        for name, value in [("dense_extended", 3), ("dense", 1)]
    }
    for name, r in runs.items():
        assert r["time"][-1] == pytest.approx(2.0)
        check(
            f"double_pendulum_stiff joint {name} FMI {version}",
            {"theta1": max_error(r, ref, "theta1"),
             "theta2": max_error(r, ref, "theta2", period=2 * np.pi)},
            {"theta1": 1e-7, "theta2": 1e-7},
        )
    apart = float(np.abs(runs["dense"]["theta1"] - runs["dense_extended"]["theta1"]).max())
    check(f"double_pendulum_stiff joint FMI {version}", {"strategies apart": apart},
          {"strategies apart": 1e-8})


@pytest.mark.parametrize("version", [2, 3])
def test_slider_crank_joint(tools, version, tmp_path):  # noqa: F811
    """Crank driven by the input (its coordinate eliminated), the slide as the cut joint:
    slider_x and crank torque against the closed form once the input reconstruction is exact
    (from t = 2 H, as for the absolute formulation)."""
    fmu = export(tools, joint_model("slider_crank.toml", tmp_path), version, tmp_path)
    ref = reference("slider_crank.csv")
    dt = 0.01
    r = simulate(fmu, 8.0, dt, 1e-8, crank_signal(8.0, dt, "crank_angle", "constant", 2 * np.pi),
                 ["slider_x", "crank_torque"])
    assert r["time"][-1] == pytest.approx(8.0)
    # After the smooth reconstruction's start-up, as in test_fmpy_references.py.
    late = lambda t: t > 6 * dt  # noqa: E731
    check(
        f"slider_crank joint FMI {version}",
        {n: max_error(r, ref, n, late) for n in ["slider_x", "crank_torque"]},
        {"slider_x": 1e-9, "crank_torque": 1e-8},
    )


@pytest.mark.parametrize("version", [2, 3])
def test_four_link_joint(tools, version, tmp_path):  # noqa: F811
    """Rotor driven (eliminated), the rocker pivot as the cut joint: rocker angle and rotor
    torque against the closed form from t = 6 H (after the smooth reconstruction's start-up),
    the absolute formulation's tolerances."""
    fmu = export(tools, joint_model("four_link.toml", tmp_path), version, tmp_path)
    ref = reference("four_link.csv")
    dt = 0.01
    r = simulate(fmu, 8.0, dt, 1e-8, crank_signal(8.0, dt, "rotor_angle", "constant", np.pi),
                 ["rocker_angle", "rotor_torque"])
    assert r["time"][-1] == pytest.approx(8.0)
    # After the smooth reconstruction's start-up, as in test_fmpy_references.py.
    late = lambda t: t > 6 * dt  # noqa: E731
    check(
        f"four_link joint FMI {version}",
        {n: max_error(r, ref, n, late) for n in ["rocker_angle", "rotor_torque"]},
        {"rocker_angle": 1e-9, "rotor_torque": 1e-4},
    )


@pytest.mark.parametrize("version", [2, 3])
def test_quarter_car_rig_joint(tools, version, tmp_path):  # noqa: F811
    """Static initialization, the stamp driven through its input (eliminated coordinate): the
    absolute formulation's test and tolerances (after 1.5 s and over the whole run)."""
    fmu = export(tools, joint_model("quarter_car_rig.toml", tmp_path), version, tmp_path)
    ref = reference("quarter_car.csv")
    dt, stop = 0.005, 3.0
    t = np.arange(0.0, stop + dt / 2, dt)
    sig = signal(t, stamp_z=0.01 * np.sin(2 * np.pi * 1.5 * t))
    names = ["chassis_z", "wheel_z", "tire_force", "stamp_force"]
    r = simulate(fmu, stop, dt, 1e-8, sig, names)
    assert r["time"][-1] == pytest.approx(stop)
    on_ref = np.abs(r["time"] / 0.01 - np.round(r["time"] / 0.01)) < 1e-6
    r = r[on_ref]
    check(
        f"quarter_car_rig joint after 1.5 s FMI {version}",
        {n: max_error(r, ref, n, lambda t: t >= 1.5) for n in names},
        {"chassis_z": 1e-5, "wheel_z": 2e-6, "tire_force": 0.5, "stamp_force": 2.0},
    )
    check(
        f"quarter_car_rig joint whole run FMI {version}",
        {n: max_error(r, ref, n) for n in names},
        {"chassis_z": 1e-4, "wheel_z": 5e-4, "tire_force": 150.0, "stamp_force": 2000.0},
    )


@pytest.mark.parametrize("version", [2, 3])
def test_pendulum_chain_joint(tools, version, tmp_path):  # noqa: F811
    """16 particles on planar tree joints (two in-plane travels each; rods as constraints), the
    suspension moved through the inputs every 0.1 s, 10 s, against the minimal-coordinate
    chain (DOP853 at 1e-11) with the absolute formulation's tolerances (the error is the input
    reconstruction's)."""
    from scipy.integrate import solve_ivp

    fmu = export(tools, joint_model("pendulum_chain.toml", tmp_path), version, tmp_path)
    dt, stop, n = 0.1, 10.0, 16
    t = np.arange(0.0, stop + dt / 2, dt)
    chain = RestingStartChain(n)
    sol = solve_ivp(chain.rhs, (0.0, stop), np.zeros(2 * n), method="DOP853", rtol=1e-11, atol=1e-11, t_eval=t)
    assert sol.success
    tip = np.array([chain.positions(ti, sol.y[:n, i])[-1] for i, ti in enumerate(sol.t)])
    ref = {"t": t, "tip_x": tip[:, 0], "tip_y": tip[:, 1]}
    path = np.array([chain.suspension(ti)[0] for ti in t])
    sig = signal(t, susp_x=path[:, 0], susp_y=path[:, 1])
    r = simulate(fmu, stop, dt, 1e-8, sig, ["tip_x", "tip_y"])
    assert r["time"][-1] == pytest.approx(stop)
    assert np.ptp(tip[:, 0]) > 0.1  # the chain really swings
    check(
        f"pendulum_chain joint FMI {version}",
        {n: max_error(r, ref, n) for n in ["tip_x", "tip_y"]},
        {"tip_x": 5e-4, "tip_y": 1.5e-4},
    )


@pytest.mark.parametrize("version", [2, 3])
def test_bouncing_balls_joint(tools, version, tmp_path):  # noqa: F811
    """One prismatic coordinate per ball, penalty contact: y1, y2 against the piecewise-exact
    solution up to 2 s, the absolute formulation's tolerances."""
    fmu = export(tools, joint_model("bouncing_balls.toml", tmp_path), version, tmp_path)
    ref = reference("bouncing_balls.csv")
    r = simulate(fmu, 2.0, 0.001, 1e-8, outputs=["y1", "y2"])
    assert r["time"][-1] == pytest.approx(2.0)
    check(
        f"bouncing_balls joint FMI {version}",
        {n: max_error(r, ref, n) for n in ["y1", "y2"]},
        {"y1": 1e-5, "y2": 1e-5},
    )


@pytest.mark.parametrize("version", [2, 3])
def test_spherical_chain_joint(tools, version, tmp_path):  # noqa: F811
    """Eight spherical tree joints (four Euler parameters each, their normalizations the only
    constraints), spinning bars under oblique gravity: the tip against the scipy reference
    (bar axes as coordinates, DOP853 at 1e-12) over 2 s at the reference's samples."""
    fmu = export(tools, joint_model("spherical_chain.toml", tmp_path), version, tmp_path)
    ref = reference("spherical_chain.csv")
    names = ["tip_x", "tip_y", "tip_z"]
    r = simulate(fmu, 2.0, 0.01, 1e-9, outputs=names)
    assert r["time"][-1] == pytest.approx(2.0)
    assert np.ptp(ref["tip_x"]) > 1.0  # the chain really swings
    check(
        f"spherical_chain joint FMI {version}",
        {n: max_error(r, ref, n) for n in names},
        # Measured 1.2e-9 m.
        {n: 1e-8 for n in names},
    )


@pytest.mark.parametrize("version", [2, 3])
def test_suspension_corner_joint(tools, version, tmp_path):  # noqa: F811
    """The tree through the lower ball joint (four Euler parameters), the upper ball joint and
    the tie rod cut: static initialization against the hand calculations of
    test_fmpy_corner_parameters.py (the tire carries the weight, at rest afterwards, a softer
    tire deflects by W (1/k_new - 1/k_old), z_pad and post_z shift the corner), and a post
    sine through the input against the absolute formulation's FMU."""
    fmu = export(tools, joint_model("suspension_corner.toml", tmp_path), version, tmp_path)
    base = corner_run(fmu, version, {})
    changed = {"m_chassis": 380.0, "m_upright": 32.0, "k_tire": 2.0e5, "k_spring": 70000.0}
    res = corner_run(fmu, version, changed)
    w = (380.0 + 32.0 + ARMS) * G
    assert abs(res["tire_force"][0] - w) < 1e-3 * w
    w0 = (360.0 + 30.0 + ARMS) * G
    assert abs(base["tire_force"][0] - w0) < 1e-3 * w
    for name in ("chassis_z", "wheel_z", "tire_force"):
        assert np.ptp(res[name]) < 1e-6 * max(1.0, abs(res[name][0])), name
    soft = corner_run(fmu, version, {"k_tire": 2.0e5})
    expected = -w0 * (1 / 2.0e5 - 1 / 2.5e5)
    assert abs((soft["wheel_z"][0] - base["wheel_z"][0]) - expected) < 2e-3 * abs(expected)
    shifted = corner_run(fmu, version, {"z_pad": 0.02, "post_z": 0.015})
    for name in ("chassis_z", "wheel_z"):
        assert abs(shifted[name][0] - base[name][0] - 0.035) < 1e-9, name
    # Moving post: both formulations' FMUs under the same sampled input.
    (tmp_path / "abs").mkdir()
    absolute = export(
        tools, in_formulation(MODELS / "suspension_corner.toml", "absolute", tmp_path / "abs"),
        version, tmp_path / "abs",
    )
    dt, stop = 0.005, 1.0
    t = np.arange(0.0, stop + dt / 2, dt)
    sig = signal(t, post_z=0.01 * np.sin(2 * np.pi * 2.0 * t) ** 3)
    names = ["chassis_z", "wheel_z", "camber", "tire_force"]
    rj = simulate(fmu, stop, dt, 1e-8, sig, names)
    ra = simulate(absolute, stop, dt, 1e-8, sig, names)
    assert np.ptp(ra["wheel_z"]) > 5e-3  # the corner really moves
    errors = {n: float(np.max(np.abs(rj[n] - ra[n]))) for n in names}
    check(
        f"suspension_corner joint vs absolute FMI {version}",
        errors,
        # Measured 3.4e-10 m, 8.4e-5 N.
        {"chassis_z": 1e-8, "wheel_z": 1e-8, "camber": 1e-8, "tire_force": 1e-2},
    )


def revolute_chain_model(tmp_path, n=16):
    """pendulum_chain.toml as paper 003 writes the chain: the same header, inputs, suspension
    frame and outputs, the particles as rigid bodies with a negligible rotational inertia
    (1e-9 kg m^2) on revolute joints about z (one angle per pendulum, no constraints)."""
    text = (MODELS / "pendulum_chain.toml").read_text()
    head, outputs = text[: text.index("[[bodies]]")], text[text.index("[[outputs]]"):]
    head = head.replace("[model]\n", '[model]\nformulation = "joint"\n', 1)
    parts = [head]
    for i in range(1, n + 1):
        parts.append(
            f'[[bodies]]\nname = "p{i}"\nmass = 1.0\ninertia = [1e-9, 1e-9, 1e-9]\n'
            f"position = [2.0, {-float(i)}, 0.0]\n\n"
        )
    for i in range(1, n + 1):
        body1 = "suspension" if i == 1 else f"p{i - 1}"
        parts.append(
            f'[[joints]]\nname = "pin{i}"\ntype = "revolute"\nbody1 = "{body1}"\nbody2 = "p{i}"\n'
            f"point = [2.0, {-float(i - 1)}, 0.0]\naxis = [0.0, 0.0, 1.0]\n\n"
        )
    parts.append(outputs)
    path = tmp_path / "pendulum_chain_revolute.toml"
    path.write_text("".join(parts))
    return path


@pytest.mark.parametrize("version", [2, 3])
def test_revolute_chain_joint(tools, version, tmp_path):  # noqa: F811
    """Paper 003's chain of revolute pendulums (16 angles, no constraints) through the FMU,
    the suspension moved through the inputs every 0.1 s, 10 s, against the same
    minimal-coordinate reference and tolerances as the particle chain."""
    from scipy.integrate import solve_ivp

    import subprocess

    model = revolute_chain_model(tmp_path)
    report = subprocess.run([str(tools[0]), "check", str(model)], capture_output=True, text=True).stdout
    assert "16 coordinates, 0 constraint equations" in report, report
    fmu = export(tools, model, version, tmp_path)
    dt, stop, n = 0.1, 10.0, 16
    t = np.arange(0.0, stop + dt / 2, dt)
    chain = RestingStartChain(n)
    sol = solve_ivp(chain.rhs, (0.0, stop), np.zeros(2 * n), method="DOP853", rtol=1e-11, atol=1e-11, t_eval=t)
    assert sol.success
    tip = np.array([chain.positions(ti, sol.y[:n, i])[-1] for i, ti in enumerate(sol.t)])
    ref = {"t": t, "tip_x": tip[:, 0], "tip_y": tip[:, 1]}
    path = np.array([chain.suspension(ti)[0] for ti in t])
    sig = signal(t, susp_x=path[:, 0], susp_y=path[:, 1])
    r = simulate(fmu, stop, dt, 1e-8, sig, ["tip_x", "tip_y"])
    assert r["time"][-1] == pytest.approx(stop)
    check(
        f"pendulum_chain as revolute pendulums, joint FMI {version}",
        {n: max_error(r, ref, n) for n in ["tip_x", "tip_y"]},
        {"tip_x": 5e-4, "tip_y": 1.5e-4},
    )
