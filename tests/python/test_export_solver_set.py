"""`mbsfmu export --set solver.integrator=...` bakes the solver choice into the FMU, for
masters that drop Enumeration parameters (libcosim, Ecos): the packed model's [solver] table
carries it, modelDescription.xml's start value shows it, the runtime accepts the FMU (its token
covers the edited model) and runs the chosen integrator, giving the same trajectory as the
default FMU with `solver.integrator` set through the FMI API.

Run: python -m pytest -q tests/python/test_export_solver_set.py
"""

import subprocess
import tomllib
import zipfile

import numpy as np
import pytest

from test_fmpy_validate import ROOT, tools  # noqa: F401  (fixture)

MODEL = ROOT / "models" / "double_pendulum_stiff.toml"


def _export(tools, version, out, *sets):
    mbsfmu, library = tools
    args = [str(mbsfmu), "export", str(MODEL), "--fmi", str(version), "-o", str(out), "--library", str(library)]
    for s in sets:
        args += ["--set", s]
    return subprocess.run(args, capture_output=True, text=True)


def _start_of(fmu, name):
    from fmpy import read_model_description

    md = read_model_description(str(fmu))
    v = next(v for v in md.modelVariables if v.name == name)
    return v.start, v


@pytest.mark.parametrize("version", [2, 3])
def test_baked_integrator_is_the_fmus_default(tools, version, tmp_path):
    from fmpy import simulate_fmu

    baked = tmp_path / "baked.fmu"
    r = _export(tools, version, baked, "solver.integrator=sdirk", "solver.rtol=1e-6")
    assert r.returncode == 0, r.stderr
    assert "solver baked into resources/model.toml: integrator sdirk" in r.stdout
    with zipfile.ZipFile(baked) as z:
        packed = tomllib.loads(z.read("resources/model.toml").decode())
    assert packed["solver"]["integrator"] == "sdirk"
    assert packed["solver"]["rtol"] == 1e-6
    start, var = _start_of(baked, "solver.integrator")
    items = {item.name: item.value for item in var.declaredType.items}
    assert int(start) == int(items["sdirk"])
    assert float(_start_of(baked, "solver.rtol")[0]) == 1e-6

    plain = tmp_path / "plain.fmu"
    r = _export(tools, version, plain)
    assert r.returncode == 0, r.stderr
    outputs = [v.name for v in __import__("fmpy").read_model_description(str(plain)).modelVariables if v.causality == "output"]
    kw = dict(stop_time=0.5, output_interval=0.01, output=outputs, relative_tolerance=1e-6)
    a = simulate_fmu(str(baked), **kw)
    b = simulate_fmu(str(plain), start_values={"solver.integrator": int(items["sdirk"])}, **kw)
    c = simulate_fmu(str(plain), **kw)
    for name in outputs:
        # Same integrator, same settings: the same numbers.
        np.testing.assert_array_equal(a[name], b[name])
    # And the choice matters: BDF (the file's default) gives different rounding-level numbers,
    # so the equality above is no accident of an ignored setting.
    assert any(not np.array_equal(a[n], c[n]) for n in outputs)


def test_bad_sets_are_user_errors(tools, tmp_path):
    out = tmp_path / "x.fmu"
    r = _export(tools, 2, out, "solver.integrator=radau")
    assert r.returncode == 1 and '"radau" is not one of bdf' in r.stderr, r.stderr
    r = _export(tools, 2, out, "solver.tolerance=1e-3")
    assert r.returncode == 1 and '"tolerance" is not a [solver] key' in r.stderr, r.stderr
    r = _export(tools, 2, out, "solver.atol=-1")
    assert r.returncode == 1 and "atol" in r.stderr and "positive" in r.stderr, r.stderr
    r = _export(tools, 2, out, "k=2")
    assert r.returncode == 1 and "only the [solver] table" in r.stderr, r.stderr
    assert not out.exists()
