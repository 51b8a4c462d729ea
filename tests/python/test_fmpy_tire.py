"""The tire gallery model (models/quarter_car_tire.toml: a quarter car braking over a 40 mm
cleat at 10 m/s, with lift-off) exported as FMI 2 and FMI 3 and simulated by fmpy's own
`simulate_fmu`, against the independent scipy reference tools/references/quarter_car_tire.py
(tests/data/quarter_car_tire.csv: the model's equations in minimal coordinates, DOP853 at 1e-12
with the contact switches located; converged to 6e-7 rad/s in the spin and 6e-5 N in the load
between rtol 1e-10 and 1e-12).

No input signal: the road input `road_z` stays at 0 and the cleat profile excites the car.
Communication step 1 ms, FMU at rtol 1e-8 (measured errors printed with `pytest -s`)."""

import sys

import numpy as np
import pytest

from test_fmpy_validate import ROOT, export, tools  # noqa: F401  (fixture)

sys.path.insert(0, str(ROOT / "tools" / "references"))

import common  # noqa: E402

NAMES = ["chassis_z", "wheel_z", "wheel_spin", "tire_fz", "tire_deflection"]


@pytest.fixture(autouse=True)
def need_fmpy():
    pytest.importorskip("fmpy")


@pytest.mark.parametrize("version", [2, 3])
def test_quarter_car_tire_on_a_cleat(tools, version, tmp_path):  # noqa: F811
    from fmpy import simulate_fmu

    fmu = export(tools, ROOT / "models" / "quarter_car_tire.toml", version, tmp_path)
    cols, data, _ = common.read_csv(str(ROOT / "tests" / "data" / "quarter_car_tire.csv"))
    ref = {c: data[:, i] for i, c in enumerate(cols)}
    r = simulate_fmu(
        str(fmu),
        stop_time=1.5,
        output_interval=0.001,
        relative_tolerance=1e-8,
        start_values={"solver.atol": 1e-11},
        output=NAMES + ["tire_fx", "tire_kappa"],
    )
    assert r["time"][-1] == pytest.approx(1.5)
    idx = np.searchsorted(ref["t"], r["time"] - 1e-9)
    assert np.allclose(ref["t"][idx], r["time"], atol=1e-9)
    errors = {n: float(np.abs(r[n] - ref[n][idx]).max()) for n in NAMES}
    tol = {"chassis_z": 1e-8, "wheel_z": 1e-8, "wheel_spin": 1e-4, "tire_fz": 5e-3, "tire_deflection": 1e-8}
    print(f"\nquarter_car_tire FMI {version}: " + ", ".join(f"{k} {v:.2e} (tol {tol[k]:.0e})" for k, v in errors.items()))
    for n in NAMES:
        assert errors[n] < tol[n], f"{n}: {errors[n]:.3e} above {tol[n]:.0e}"
    # Slip outputs: κ from the reference spin, and the braking force balancing the brake
    # torque once the spin is steady (I W' = T - R F_x = 0: F_x = -600 / 0.3 N) before the cleat.
    v_d = np.hypot(10.0, 0.5)
    kappa_ref = (ref["wheel_spin"][idx] * 0.3 - 10.0) / v_d
    kappa_err = float(np.abs(r["tire_kappa"] - kappa_ref).max())
    print(f"  tire_kappa {kappa_err:.2e}")
    assert kappa_err < 1e-5
    k = np.searchsorted(r["time"], 0.49 - 1e-9)
    assert r["tire_fx"][k] == pytest.approx(-2000.0, abs=0.5)
    # The cleat throws the wheel off the road, the brake slows the unloaded wheel, and the
    # tire spins it back up on touch-down.
    assert r["tire_fz"].min() == 0.0 and r["tire_fz"].max() > 3 * 3335.4
    assert r["wheel_spin"].min() < 0.5 * 10 / 0.3


def test_reference_is_converged_and_starts_in_equilibrium():
    """The stored reference against the same script at rtol 1e-10 (measured: 2.8e-10 m,
    5.8e-7 rad/s, 5.6e-5 N: well below the FMU tolerances above), and its first row against
    the hand equilibrium."""
    import quarter_car_tire as qct

    cols, data, _ = common.read_csv(str(ROOT / "tests" / "data" / "quarter_car_tire.csv"))
    rows, switches = qct.solve(data[:, 0], rtol=1e-10, atol=1e-12)
    diff = np.abs(rows - data).max(axis=0)
    print("\nreference rtol 1e-10 vs 1e-12: " + ", ".join(f"{c} {d:.1e}" for c, d in zip(cols, diff)))
    assert diff[1] < 1e-9 and diff[2] < 1e-9 and diff[3] < 1e-5 and diff[4] < 1e-3
    assert len(switches) == 4
    # Deflection exact; the load carries c h'(0) V from the spline's tiny slope at x = 0.
    assert data[0, 5] == pytest.approx(340 * 9.81 / 200000, rel=1e-12)
    assert data[0, 4] == pytest.approx(340 * 9.81, rel=1e-6)
    assert data[0, 3] == pytest.approx(10 / 0.3, rel=1e-14)
