"""Directional derivatives (FMI 2 and 3) and FMI 3 adjoint derivatives of every output with
respect to every input, through fmpy's FMU2Slave / FMU3Slave, for every model in models/ with
inputs, against central differences an importer takes itself: set an input to u +- delta at
the current communication point and read the outputs (the FMU's definition, docs/fmi-runtime.md:
state held, the input's segment rebuilt through the new sample). Checked after steps with a
moving input so the reconstruction has slope and curvature.
"""

import numpy as np
import pytest

from test_fmpy_validate import MODELS, export, tools  # noqa: F401  (fixture)


def model_io(md):
    outputs = [v.valueReference for v in md.modelVariables if v.causality == "output"]
    inputs = [v for v in md.modelVariables if v.causality == "input"]
    return outputs, [v.valueReference for v in inputs], [float(v.start) for v in inputs]


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("model", MODELS, ids=[m.stem for m in MODELS])
def test_directional_and_adjoint_derivatives_match_set_get(tools, model, version, tmp_path):  # noqa: F811
    pytest.importorskip("fmpy")
    from fmpy import extract, read_model_description
    from fmpy.fmi2 import FMU2Slave
    from fmpy.fmi3 import FMU3Slave

    fmu_path = export(tools, model, version, tmp_path)
    md = read_model_description(str(fmu_path))
    outputs, inputs, starts = model_io(md)
    if not inputs:
        pytest.skip("no inputs")
    cls = FMU2Slave if version == 2 else FMU3Slave
    fmu = cls(guid=md.guid, unzipDirectory=extract(str(fmu_path)),
              modelIdentifier=md.coSimulation.modelIdentifier, instanceName="d")
    fmu.instantiate()
    if version == 2:
        fmu.setupExperiment(startTime=0.0)
        fmu.enterInitializationMode()
        set_, get = fmu.setReal, fmu.getReal
    else:
        fmu.enterInitializationMode(startTime=0.0)
        set_, get = fmu.setFloat64, fmu.getFloat64
    fmu.exitInitializationMode()
    h = max(float(md.defaultExperiment.stepSize), 0.005)

    def signal(t):
        return [s + 0.01 * (k + 1) * np.sin(3.0 * t) for k, s in enumerate(starts)]

    t = 0.0
    for _ in range(8):
        set_(inputs, signal(t))
        fmu.doStep(t, h)
        t += h
    set_(inputs, signal(t))
    y0 = np.array(get(outputs))
    u0 = np.array(get(inputs))
    fd = np.zeros((len(outputs), len(inputs)))
    for k in range(len(inputs)):
        d = 1e-6 * max(1.0, abs(u0[k]))
        up, um = u0.copy(), u0.copy()
        up[k] += d
        um[k] -= d
        set_(inputs, list(up))
        yp = np.array(get(outputs))
        set_(inputs, list(um))
        ym = np.array(get(outputs))
        fd[:, k] = (yp - ym) / (2 * d)
    set_(inputs, list(u0))
    # Round-off of the difference quotients (~1e-16 |y| / delta) with a margin, plus 1e-6 relative.
    tol = 1e-6 * np.abs(fd) + 1e-5 * (1.0 + np.abs(y0))[:, None]
    for k in range(len(inputs)):
        seed = [1.0 if j == k else 0.0 for j in range(len(inputs))]
        col = np.array(fmu.getDirectionalDerivative(outputs, inputs, seed))
        assert np.all(np.abs(col - fd[:, k]) <= tol[:, k]), (col, fd[:, k])
    if version == 3:
        wseed = [1.0 + r for r in range(len(outputs))]
        # fmpy 0.3.32 sizes the adjoint's sensitivity by the unknowns unless told; the standard
        # (and the FMU, which refuses other sizes) wants one entry per known.
        adj = np.array(fmu.getAdjointDerivative(outputs, inputs, wseed, nSensitivity=len(inputs)))
        want = np.array(wseed) @ fd
        assert np.all(np.abs(adj - want) <= 1e-6 * np.abs(want) + 1e-5 * (1.0 + np.abs(y0)).sum()), (adj, want)
    print(f"\n{model.stem} FMI {version}: max |dy/du| {np.abs(fd).max():.3e}")
    fmu.terminate()
    fmu.freeInstance()
