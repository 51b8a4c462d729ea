"""Issue 14 through fmpy (FMI 2 and 3): the suspension corner FMU initializes in static
equilibrium with changed masses, stiffnesses, a geometry parameter and a non-zero initial post
height, and each change moves the outputs as a hand calculation says:

- total weight W = (m_chassis + m_upright + 8 kg of arms) g is carried by the tire:
  tire_force = W (the tire line stays within 0.2 mm of vertical: to 0.1 %);
- `z_pad` (the wheel pan's top above the post, a geometry parameter used in a point) and the
  initial `post_z` raise the tire's lower end: the whole corner moves up by as much, the
  forces stay (chassis_z and wheel_z shift exactly by the sum);
- a softer tire deflects more: wheel_z changes by -W (1/k_new - 1/k_old) relative to a run
  with the same masses.

Also: the model stays at rest after initialization (outputs constant over 0.2 s).
"""

import numpy as np
import pytest

from test_fmpy_validate import ROOT, export, tools  # noqa: F401  (fixture)

MODEL = ROOT / "models" / "suspension_corner.toml"
G = 9.81
ARMS = 5.0 + 3.0


def run(fmu, version, start_values, stop=0.2):
    from fmpy import simulate_fmu

    res = simulate_fmu(
        str(fmu),
        start_time=0.0,
        stop_time=stop,
        output_interval=0.01,
        start_values=start_values,
        fmi_type="CoSimulation",
        validate=False,
    )
    return res


@pytest.mark.parametrize("version", [2, 3])
def test_corner_initializes_with_changed_parameters(tools, version, tmp_path):
    fmu = export(tools, MODEL, version, tmp_path)
    base = run(fmu, version, {})
    changed = {"m_chassis": 380.0, "m_upright": 32.0, "k_tire": 2.0e5, "k_spring": 70000.0}
    res = run(fmu, version, changed)
    w = (380.0 + 32.0 + ARMS) * G
    assert abs(res["tire_force"][0] - w) < 1e-3 * w
    assert abs(base["tire_force"][0] - (360.0 + 30.0 + ARMS) * G) < 1e-3 * w
    # At rest in the new equilibrium.
    for name in ("chassis_z", "wheel_z", "tire_force"):
        assert np.ptp(res[name]) < 1e-6 * max(1.0, abs(res[name][0])), name
    # Softer tire alone (same masses as the base run): the wheel sits lower by the extra
    # tire deflection.
    soft = run(fmu, version, {"k_tire": 2.0e5})
    w0 = (360.0 + 30.0 + ARMS) * G
    expected = -w0 * (1 / 2.0e5 - 1 / 2.5e5)
    assert abs((soft["wheel_z"][0] - base["wheel_z"][0]) - expected) < 2e-3 * abs(expected)
    # Geometry parameter and initial post height: a pure vertical shift.
    shifted = run(fmu, version, {"z_pad": 0.02, "post_z": 0.015})
    for name in ("chassis_z", "wheel_z"):
        assert abs(shifted[name][0] - base[name][0] - 0.035) < 1e-9, name
    assert abs(shifted["tire_force"][0] - base["tire_force"][0]) < 1e-6
    assert abs(shifted["wheel_y"][0] - base["wheel_y"][0]) < 1e-9


# The parameter kinds of tests/parameters.rs: a calculated parameter (c from k), a geometry
# parameter (h), a mass (m), a tunable free length (l0) and an unused one.
PARAMS_MODEL = """
[model]
name = "params"
gravity = [0.0, 0.0, -9.81]
initial = "static"

[[parameters]]
name = "k"
value = 1000.0

[[parameters]]
name = "c"
value = "2*0.1*sqrt(k*10)"

[[parameters]]
name = "h"
value = 1.0
description = "height of the hanger (geometry)"

[[parameters]]
name = "m"
value = 10.0

[[parameters]]
name = "l0"
value = 0.5

[[parameters]]
name = "unused"
value = 3.0

[[bodies]]
name = "bob"
type = "particle"
mass = "m"
position = [0.0, 0.0, "h - 0.5"]

[[joints]]
name = "guide"
type = "planar"
body1 = "ground"
body2 = "bob"
point = [0.0, 0.0, 0.0]
axis = [1.0, 0.0, 0.0]

[[joints]]
name = "guide2"
type = "planar"
body1 = "ground"
body2 = "bob"
point = [0.0, 0.0, 0.0]
axis = [0.0, 1.0, 0.0]

[[forces]]
name = "spring"
type = "spring_damper"
body1 = "ground"
point1 = [0.0, 0.0, "h"]
body2 = "bob"
stiffness = "k"
damping = "c"
free_length = "l0"

[[outputs]]
name = "z"
type = "position"
body = "bob"
component = "z"
"""


@pytest.mark.parametrize("version", [2, 3])
def test_parameter_kinds_validate_and_act(tools, version, tmp_path):
    from fmpy import read_model_description
    from fmpy.validation import validate_fmu

    model = tmp_path / "params.toml"
    model.write_text(PARAMS_MODEL)
    fmu = export(tools, model, version, tmp_path)
    assert validate_fmu(str(fmu)) == []
    md = read_model_description(str(fmu))
    kinds = {v.name: (v.causality, v.variability) for v in md.modelVariables}
    assert kinds["c"] == ("calculatedParameter", "fixed")
    assert kinds["k"] == ("parameter", "fixed")
    assert kinds["l0"] == ("parameter", "tunable")
    assert "unused" not in kinds
    assert "c" in [u.variable.name for u in md.initialUnknowns]
    res = run(fmu, version, {"k": 4000.0, "h": 1.4, "m": 12.0}, stop=0.1)
    # Hanging mass: z = h - l0 - m g / k (c following k is checked in tests/parameters.rs).
    assert abs(res["z"][0] - (1.4 - 0.5 - 12.0 * G / 4000.0)) < 1e-9
