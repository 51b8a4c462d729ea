"""The characteristic-curve models (issue 16) exported as FMI 2 and FMI 3 and simulated by
fmpy's own `simulate_fmu`: the tables travel in the FMU.

models/elements/table_pendulum.toml (a pendulum on a torsion spring table and a torsion damper
table) against the independent scipy reference tools/references/table_pendulum.py
(tests/data/table_pendulum.csv, DOP853 at 1e-12, converged to 3e-10 rad), and
models/elements/bushing_mount.toml (a block on a bushing with axial and torsional tables)
settling at the tables' inverse: z = -0.012 m (the row where the axial table gives m g) and
sin(yaw) = 0.2 (the row where the torsional table gives the 15 N m preload)."""

import sys

import numpy as np
import pytest

from test_fmpy_validate import ROOT, export, tools  # noqa: F401  (fixture)

sys.path.insert(0, str(ROOT / "tools" / "references"))

import common  # noqa: E402


@pytest.fixture(autouse=True)
def need_fmpy():
    pytest.importorskip("fmpy")


@pytest.mark.parametrize("version", [2, 3])
def test_table_pendulum(tools, version, tmp_path):  # noqa: F811
    from fmpy import simulate_fmu

    fmu = export(tools, ROOT / "models" / "elements" / "table_pendulum.toml", version, tmp_path)
    cols, data, _ = common.read_csv(str(ROOT / "tests" / "data" / "table_pendulum.csv"))
    ref = {c: data[:, i] for i, c in enumerate(cols)}
    r = simulate_fmu(
        str(fmu),
        stop_time=2.0,
        output_interval=0.01,
        relative_tolerance=1e-9,
        start_values={"solver.atol": 1e-11},
        output=["theta", "omega", "torque"],
    )
    idx = np.searchsorted(ref["t"], r["time"] - 1e-9)
    assert np.allclose(ref["t"][idx], r["time"], atol=1e-9)
    err = float(np.abs(r["theta"] - ref["theta"][idx]).max())
    torque = -(ref["spring_torque"][idx] + ref["damper_torque"][idx])
    terr = float(np.abs(r["torque"] - torque).max())
    print(f"\ntable_pendulum FMI {version}: theta {err:.2e} rad, torque {terr:.2e} N m")
    # Measured 1.0e-8 rad and 2.7e-7 N m (both FMI versions).
    assert err < 1e-7
    assert terr < 5e-6


@pytest.mark.parametrize("version", [2, 3])
def test_bushing_mount(tools, version, tmp_path):  # noqa: F811
    from fmpy import simulate_fmu

    fmu = export(tools, ROOT / "models" / "elements" / "bushing_mount.toml", version, tmp_path)
    r = simulate_fmu(str(fmu), stop_time=3.0, output_interval=0.01, relative_tolerance=1e-9)
    z, yaw = r["z"][-1], r["yaw"][-1]
    print(f"\nbushing_mount FMI {version}: z {z:.9f} m, sin(yaw) {np.sin(yaw):.9f}")
    assert abs(z + 0.012) < 1e-7
    assert abs(np.sin(yaw) - 0.2) < 1e-6
    assert abs(r["mount_fz"][-1] - 39.24) < 1e-4
