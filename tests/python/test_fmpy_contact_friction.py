"""Contact friction (models/elements/incline_particle.toml, incline_sphere.toml: a particle
and a solid sphere on a plane inclined by 30 degrees) exported as FMI 2 and FMI 3 and
simulated by fmpy's own `simulate_fmu`, against closed forms:

- the particle with mu_static = 0.7 > tan 30 deg stays within 1e-6 m of its start over 2 s,
  sticking; with the parameters set to mu = 0.4, mu_s = 0.5 it slides with
  g (sin t - mu cos t);
- the sphere (I = 2/5 m r^2, mu = 0.5) rolls with 5/7 g sin t and omega = -v / r.

Communication step 1 ms, FMU at rtol 1e-8."""

import numpy as np
import pytest

from test_fmpy_validate import ROOT, export, tools  # noqa: F401  (fixture)

G = 9.81
TH = np.radians(30.0)
ELEMENTS = ROOT / "models" / "elements"


@pytest.fixture(autouse=True)
def need_fmpy():
    pytest.importorskip("fmpy")


def down_slope(r, x, y):
    return r[x] * np.cos(TH) - r[y] * np.sin(TH)


def fitted_slope(t, v):
    return float(np.polyfit(t, v, 1)[0])


@pytest.mark.parametrize("version", [2, 3])
def test_particle_holds_and_slides(tools, version, tmp_path):  # noqa: F811
    from fmpy import simulate_fmu

    fmu = export(tools, ELEMENTS / "incline_particle.toml", version, tmp_path)
    out = ["x", "y", "vx", "vy", "stick", "friction_x", "normal_force"]
    r = simulate_fmu(str(fmu), stop_time=2.0, output_interval=0.001, relative_tolerance=1e-8, output=out)
    assert r["time"][-1] == pytest.approx(2.0)
    drift = float(np.abs(down_slope(r, "x", "y") - down_slope(r, "x", "y")[0]).max())
    print(f"\nincline_particle FMI {version}: hold drift {drift:.2e} m")
    assert drift < 1e-6
    assert (r["stick"] == 1.0).all()
    # Held: the friction force carries the weight's down-slope component, -m g sin t along
    # the slope, whose x component is -m g sin t cos t.
    assert r["friction_x"][-1] == pytest.approx(-G * np.sin(TH) * np.cos(TH), rel=1e-6)
    assert r["normal_force"][-1] == pytest.approx(G * np.cos(TH), rel=1e-6)

    r = simulate_fmu(
        str(fmu),
        stop_time=2.0,
        output_interval=0.001,
        relative_tolerance=1e-8,
        start_values={"mu": 0.4, "mu_s": 0.5},
        output=out,
    )
    t = r["time"]
    sel = t >= 0.5
    a = fitted_slope(t[sel], down_slope(r, "vx", "vy")[sel])
    a_ref = G * (np.sin(TH) - 0.4 * np.cos(TH))
    print(f"  slide acceleration {a:.9f} vs {a_ref:.9f}")
    assert a == pytest.approx(a_ref, rel=1e-6)
    assert (r["stick"][sel] == 0.0).all()


@pytest.mark.parametrize("version", [2, 3])
def test_sphere_rolls(tools, version, tmp_path):  # noqa: F811
    from fmpy import simulate_fmu

    fmu = export(tools, ELEMENTS / "incline_sphere.toml", version, tmp_path)
    r = simulate_fmu(
        str(fmu),
        stop_time=0.4,
        output_interval=0.001,
        relative_tolerance=1e-8,
        output=["vx", "vy", "wz", "slip", "stick"],
    )
    t = r["time"]
    sel = t >= 0.1
    v = down_slope(r, "vx", "vy")
    a = fitted_slope(t[sel], v[sel])
    a_ref = 5.0 / 7.0 * G * np.sin(TH)
    roll = float(np.abs(r["wz"][sel] + v[sel] / 0.1).max())
    print(f"\nincline_sphere FMI {version}: acceleration {a:.9f} vs {a_ref:.9f}, |w + v/r| {roll:.2e}")
    assert a == pytest.approx(a_ref, rel=1e-4)
    assert roll < 1e-3
    assert (r["stick"][sel] == 1.0).all()
