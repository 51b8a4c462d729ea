"""The joint-coordinate formulation through the FMU (FMI 2 and FMI 3, fmpy's `simulate_fmu`):
the gallery models that it supports, with `formulation = "joint"` added to their [model]
section, against the same independent references and tolerances as the absolute formulation
(test_fmpy_references.py). Run: python -m pytest -q -s tests/python/test_fmpy_joint.py
"""

import numpy as np
import pytest

from test_fmpy_references import MODELS, check, crank_signal, max_error, reference, signal, simulate
from test_fmpy_validate import export, tools  # noqa: F401  (fixture)


@pytest.fixture(autouse=True)
def need_fmpy():
    pytest.importorskip("fmpy")


def joint_model(name, tmp_path):
    text = (MODELS / name).read_text()
    assert "[model]\n" in text
    path = tmp_path / name
    path.write_text(text.replace("[model]\n", '[model]\nformulation = "joint"\n', 1))
    return path


@pytest.mark.parametrize("version", [2, 3])
def test_double_pendulum_stiff_joint(tools, version, tmp_path):  # noqa: F811
    """Two joint angles, no constraints; theta1/theta2 against Radau at 1e-12, FMU at 1e-8."""
    fmu = export(tools, joint_model("double_pendulum_stiff.toml", tmp_path), version, tmp_path)
    ref = reference("double_pendulum_stiff.csv")
    r = simulate(fmu, 2.0, 0.01, 1e-8, outputs=["theta1", "theta2"])
    assert r["time"][-1] == pytest.approx(2.0)
    check(
        f"double_pendulum_stiff joint FMI {version}",
        {"theta1": max_error(r, ref, "theta1"), "theta2": max_error(r, ref, "theta2", period=2 * np.pi)},
        {"theta1": 5e-8, "theta2": 5e-8},
    )


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
