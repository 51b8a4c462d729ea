"""Every model in models/ exported as FMI 2 and FMI 3 passes fmpy's validator (XML schema,
causality/variability/initial rules, start values, units, model structure) and, once the
runtime library exports the FMI functions, simulates with fmpy.

Uses the `mbsfmu` binary and the runtime `libmbsfmu.so` from $CARGO_TARGET_DIR (default
target/) release, else debug. Run: python -m pytest -q tests/python
"""

import ctypes
import os
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted((ROOT / "models").glob("*.toml")) if (ROOT / "models").is_dir() else []
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))


def _find(name):
    for profile in ("release", "debug"):
        p = TARGET / profile / name
        if p.is_file():
            return p
    return None


MBSFMU = _find("mbsfmu")
LIBRARY = _find("libmbsfmu.so")


def _exports(lib, symbols):
    try:
        dll = ctypes.CDLL(str(lib))
    except OSError:
        return False
    return all(hasattr(dll, s) for s in symbols)


@pytest.fixture(scope="module")
def tools():
    if MBSFMU is None or LIBRARY is None:
        pytest.skip(f"build first: cargo build --release --lib --bins (looked in {TARGET})")
    return MBSFMU, LIBRARY


def test_models_exist():
    if not MODELS:
        pytest.skip("no models in models/ yet")
    assert all(m.stat().st_size > 0 for m in MODELS)


def in_formulation(model, formulation, tmp_path):
    """`model` with `[model] formulation` set (the default is "joint"), written into `tmp_path`
    under its own name."""
    text = model.read_text()
    assert "[model]\n" in text and "formulation =" not in text, model
    path = tmp_path / model.name
    path.write_text(text.replace("[model]\n", f'[model]\nformulation = "{formulation}"\n', 1))
    return path


def export(tools, model, version, tmp_path):
    mbsfmu, library = tools
    check = subprocess.run([str(mbsfmu), "check", str(model)], capture_output=True, text=True)
    if check.returncode == 1:
        pytest.skip(f"{model.name} does not load yet: {check.stderr.strip()}")
    assert check.returncode == 0, check.stderr
    out = tmp_path / f"{model.stem}_fmi{version}.fmu"
    r = subprocess.run(
        [str(mbsfmu), "export", str(model), "--fmi", str(version), "-o", str(out), "--library", str(library)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, f"export failed ({r.returncode}): {r.stderr}"
    return out


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("model", MODELS, ids=[m.stem for m in MODELS])
def test_fmpy_validates(tools, model, version, tmp_path):
    from fmpy.validation import validate_fmu

    fmu = export(tools, model, version, tmp_path)
    problems = validate_fmu(str(fmu))
    assert problems == [], "\n".join(problems)
    with zipfile.ZipFile(fmu) as z:
        names = set(z.namelist())
    platform = "linux64" if version == 2 else "x86_64-linux"
    assert any(n.startswith(f"binaries/{platform}/") and n.endswith(".so") for n in names)
    assert {"modelDescription.xml", "resources/model.toml", "documentation/index.html"} <= names


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("model", MODELS, ids=[m.stem for m in MODELS])
def test_fmpy_simulates(tools, model, version, tmp_path):
    from fmpy import read_model_description, simulate_fmu

    probe = "fmi2Instantiate" if version == 2 else "fmi3InstantiateCoSimulation"
    if not _exports(tools[1], [probe, "fmi2DoStep" if version == 2 else "fmi3DoStep"]):
        pytest.skip(f"{tools[1]} does not export the FMI {version} functions yet")
    fmu = export(tools, model, version, tmp_path)
    md = read_model_description(str(fmu))
    outputs = [v.name for v in md.modelVariables if v.causality == "output"]
    result = simulate_fmu(str(fmu), output=outputs)
    assert len(result) >= 2
    assert result["time"][-1] == pytest.approx(float(md.defaultExperiment.stopTime))
    for name in outputs:
        assert np.all(np.isfinite(result[name])), name
