"""Test-rig inputs through the C ABI, as a rig master drives the FMU: fmpy's FMU2Slave /
FMU3Slave, a doStep loop at a fixed communication step, the input sampled and set before every
step, no input derivatives. Every reconstruction mode (docs/fmi-runtime.md, "Inputs inside a
communication step"):

- a post stepping 0 -> 20 mm sampled at 2 ms stays within [0, 20 mm] (hold, linear, default);
- the quarter car driven by 0.01 sin(2 pi 1.5 t) at H = 5 ms against the exact linear solution
  (tests/data/quarter_car.csv, tools/references/quarter_car.py), with the documented error of
  each mode;
- white noise on a slow road: the post the model sees deviates from the true road by less than
  the noise (default mode);
- held, ramped, stepped and stopped inputs on every gallery model with inputs, FMI 2 and 3,
  plain and (FMI 3) intermediate-update paths: no Discard at the gallery's default settings;
- smooth inputs: stats.restarts = 0 on every gallery model with inputs, FMI 2 and 3;
- FMI 3 intermediate update answering with a frame's position step inside a communication
  step: the pendulum under it against scipy's minimal-coordinate swing, both formulations.

Uses the `mbsfmu` binary and `libmbsfmu.so` from $CARGO_TARGET_DIR (default target/).
Printed figures (pytest -s) are the ones quoted in docs/fmi-runtime.md.
"""

import math
import re
import sys

import numpy as np
import pytest

from test_fmpy_validate import ROOT, export, tools  # noqa: F401  (fixture)

sys.path.insert(0, str(ROOT / "tools" / "references"))
import common  # noqa: E402

MODES = ["hold", "linear", "smooth"]

# The post (stamp) position the model sees, as an output.
STAMP_OUTPUT = """
[[outputs]]
name = "post_seen"
type = "position"
body = "stamp"
component = "z"
description = "Stamp height: the reconstructed input as the model sees it"
"""


def variant(tmp_path, model, mode=None, extra=""):
    """A copy of models/<model>.toml with every input's reconstruction set to `mode`."""
    text = (ROOT / "models" / f"{model}.toml").read_text()
    if mode is not None:
        text = re.sub(
            r'(\[\[inputs\]\]\s*\nname = "[^"]+")',
            lambda m: m.group(1) + f'\nreconstruction = "{mode}"',
            text,
        )
    text += extra
    path = tmp_path / f"{model}_{mode or 'default'}.toml"
    path.write_text(text)
    return path


class Slave:
    """An FMU instance driven like a rig master drives it."""

    def __init__(self, fmu_path, version, intermediate=None):
        from fmpy import extract, read_model_description

        md = read_model_description(str(fmu_path))
        self.md = md
        self.vr = {v.name: v.valueReference for v in md.modelVariables}
        self.inputs = [v.name for v in md.modelVariables if v.causality == "input"]
        self.version = version
        unzipped = extract(str(fmu_path))
        if version == 2:
            from fmpy.fmi2 import FMU2Slave

            self.fmu = FMU2Slave(
                guid=md.guid,
                unzipDirectory=unzipped,
                modelIdentifier=md.coSimulation.modelIdentifier,
                instanceName="rig",
            )
            self.fmu.instantiate()
            self.fmu.setupExperiment(startTime=0.0)
            self.fmu.enterInitializationMode()
            self.fmu.exitInitializationMode()
        else:
            from fmpy.fmi3 import FMU3Slave

            self.fmu = FMU3Slave(
                guid=md.guid,
                unzipDirectory=unzipped,
                modelIdentifier=md.coSimulation.modelIdentifier,
                instanceName="rig",
            )
            if intermediate is None:
                self.fmu.instantiate()
            else:
                vrs = [self.vr[n] for n in self.inputs]

                def cb(env, t, set_requested, get_allowed, step_finished, can_return_early, early_req, early_t):
                    if set_requested:
                        self.fmu.setFloat64(vrs, list(intermediate(t)))

                self._cb = cb
                self.fmu.instantiate(intermediateUpdate=cb, requiredIntermediateVariables=vrs)
            self.fmu.enterInitializationMode(startTime=0.0)
            self.fmu.exitInitializationMode()

    def set(self, values):
        vrs = [self.vr[n] for n in self.inputs]
        if self.version == 2:
            self.fmu.setReal(vrs, list(values))
        else:
            self.fmu.setFloat64(vrs, list(values))

    def step(self, t, h):
        self.fmu.doStep(currentCommunicationPoint=t, communicationStepSize=h)

    def real(self, names):
        vrs = [self.vr[n] for n in names]
        return self.fmu.getReal(vrs) if self.version == 2 else self.fmu.getFloat64(vrs)

    def stat(self, name):
        vr = [self.vr[name]]
        return self.fmu.getInteger(vr)[0] if self.version == 2 else self.fmu.getInt64(vr)[0]

    def close(self):
        self.fmu.terminate()
        self.fmu.freeInstance()


def run_rig(slave, signal, h, t_end, outputs):
    """Set the sampled input before each doStep; outputs at every communication point."""
    n = int(round(t_end / h))
    rows = []
    for k in range(n):
        t = k * h
        slave.set(signal(t))
        slave.step(t, h)
        rows.append([t + h] + list(slave.real(outputs)))
    return np.array(rows)


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("mode", MODES + [None], ids=MODES + ["default"])
def test_a_sampled_step_stays_between_its_levels(tools, tmp_path, mode, version):
    fmu = export(tools, variant(tmp_path, "quarter_car_rig", mode, STAMP_OUTPUT), version, tmp_path)
    s = Slave(fmu, version)
    rows = run_rig(s, lambda t: [0.02 if t >= 0.02 - 1e-9 else 0.0], 0.002, 0.1, ["post_seen", "tire_force"])
    s.close()
    post, tire = rows[:, 1], rows[:, 2]
    print(f"\nstep 0 -> 20 mm at 2 ms, {mode or 'default'}, FMI {version}: post in "
          f"[{post.min() * 1e3:.4f}, {post.max() * 1e3:.4f}] mm, peak tire force {tire.max():.0f} N")
    assert post.min() >= -1e-9 and post.max() <= 0.02 + 1e-9
    assert abs(post[-1] - 0.02) < 1e-9


# Max errors over 0.5 .. 5 s at H = 5 ms against the exact solution, per mode (measured, see the
# docs table; the bounds are about 1.5x the measurement): chassis, wheel (m).
SINE_BOUNDS = {"hold": 6e-4, "linear": 1.2e-3, "smooth": 3e-5}


@pytest.mark.parametrize("mode", MODES)
def test_quarter_car_sine_per_mode_against_the_exact_solution(tools, tmp_path, mode):
    _, ref, _ = common.read_csv(ROOT / "tests" / "data" / "quarter_car.csv")
    fmu = export(tools, variant(tmp_path, "quarter_car_rig", mode, STAMP_OUTPUT), 2, tmp_path)
    s = Slave(fmu, 2)
    w = 2 * math.pi * 1.5
    h = 0.005
    rows = run_rig(s, lambda t: [0.01 * math.sin(w * t)], h, 5.0, ["chassis_z", "wheel_z", "post_seen"])
    restarts = s.stat("stats.restarts")
    s.close()
    on_grid = np.isclose(np.mod(rows[:, 0] + 1e-9, 0.01), 0.0, atol=1e-7)

    def errors(window):
        keep = on_grid & window
        t = rows[keep, 0]
        return (
            np.abs(rows[keep, 1] - np.interp(t, ref[:, 0], ref[:, 2])).max(),
            np.abs(rows[keep, 2] - np.interp(t, ref[:, 0], ref[:, 3])).max(),
            np.abs(rows[keep, 3] - 0.01 * np.sin(w * t)).max(),
        )

    # The FMU starts at rest and learns the input's slope from its samples: the first steps
    # lag (start-up), which the damped rig forgets within about 0.3 s.
    start = errors(rows[:, 0] < 0.5)
    err_c, err_w, err_u = errors(rows[:, 0] >= 0.5)
    print(f"\nquarter car sine H = 5 ms, {mode}: t >= 0.5 s: chassis {err_c:.2e} m, wheel "
          f"{err_w:.2e} m, post {err_u:.2e} m; t < 0.5 s: chassis {start[0]:.2e} m, wheel "
          f"{start[1]:.2e} m, post {start[2]:.2e} m; restarts {restarts}")
    assert err_c < SINE_BOUNDS[mode] and err_w < SINE_BOUNDS[mode]


def test_default_mode_does_not_amplify_noise(tools, tmp_path):
    """0.1 mm white noise on a 0.5 Hz, 10 mm road sampled at 1 ms."""
    fmu = export(tools, variant(tmp_path, "quarter_car_rig", None, STAMP_OUTPUT), 2, tmp_path)
    s = Slave(fmu, 2)
    rng = np.random.default_rng(12)
    sigma, h, t_end = 1e-4, 0.001, 2.0
    noise = rng.normal(0.0, sigma, int(round(t_end / h)) + 1)

    def road(t):
        return 0.01 * math.sin(math.pi * t)

    rows = run_rig(s, lambda t: [road(t) + noise[int(round(t / h))]], h, t_end, ["post_seen"])
    s.close()
    keep = rows[:, 0] > 0.05
    err = rows[keep, 1] - np.array([road(t) for t in rows[keep, 0]])
    rms = math.sqrt(np.mean(err**2))
    print(f"\nnoise sigma {sigma:.1e} m: reconstructed minus true road RMS {rms:.2e} m ({rms / sigma:.2f} sigma)")
    assert rms <= sigma


# Gallery models with inputs: start values and a scale for each input.
GALLERY = {
    "quarter_car_rig": {"stamp_z": (0.0, 0.01)},
    "slider_crank": {"crank_angle": (0.0, 1.0)},
    "four_link": {"rotor_angle": (0.0, 1.0)},
    "pendulum_chain": {"susp_x": (2.0, 0.1), "susp_y": (0.0, 0.1)},
    "suspension_corner": {"post_z": (0.0, 0.01)},
}


def profile(t):
    """Unit-scale test profile: a smooth start, a hold, a ramp, a step, a stop."""
    if t < 0.1:
        return 0.2 * math.sin(20 * t)  # smooth
    if t < 0.2:
        return 0.2 * math.sin(2.0)  # held
    if t < 0.3:
        return 0.2 * math.sin(2.0) + 2.0 * (t - 0.2)  # ramped
    if t < 0.4:
        return 0.2 * math.sin(2.0) + 0.2 + 0.1  # stepped (+0.1)
    return 0.2 * math.sin(2.0) + 0.3  # stopped


@pytest.mark.parametrize("path", ["plain", "intermediate"])
@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("model", list(GALLERY))
def test_held_ramped_stepped_stopped_inputs_do_not_discard(tools, tmp_path, model, version, path):
    if path == "intermediate" and version == 2:
        pytest.skip("intermediate update is FMI 3")
    spec = GALLERY[model]
    fmu = export(tools, ROOT / "models" / f"{model}.toml", version, tmp_path)

    def values(t):
        return [u0 + scale * profile(t) for (u0, scale) in spec.values()]

    s = Slave(fmu, version, intermediate=values if path == "intermediate" else None)
    assert s.inputs == list(spec)
    h = s.md.defaultExperiment.stepSize
    h = float(h) if h else 0.01
    rows = run_rig(s, values, h, 0.6, [])
    restarts = s.stat("stats.restarts")
    s.close()
    print(f"\n{model} FMI {version} {path}, H = {h}: {len(rows)} steps, restarts {restarts}")


@pytest.mark.parametrize("path", ["plain", "intermediate"])
@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("model", list(GALLERY))
def test_smooth_inputs_never_restart(tools, tmp_path, model, version, path):
    if path == "intermediate" and version == 2:
        pytest.skip("intermediate update is FMI 3")
    spec = GALLERY[model]
    fmu = export(tools, ROOT / "models" / f"{model}.toml", version, tmp_path)

    # Plain path: a sine (the reconstruction starts at rest and takes the slope up smoothly).
    # Intermediate update: the importer's value is exact at every internal time, so an input
    # that moves from t = 0 on is a real velocity jump of the resting start state; the smooth
    # input here starts at rest too (1 - cos).
    def values(t):
        shape = 0.2 * math.sin(3.0 * t) if path == "plain" else 0.2 * (1.0 - math.cos(3.0 * t))
        return [u0 + scale * shape for (u0, scale) in spec.values()]

    s = Slave(fmu, version, intermediate=values if path == "intermediate" else None)
    h = s.md.defaultExperiment.stepSize
    h = float(h) if h else 0.01
    run_rig(s, values, h, 1.0, [])
    restarts, steps = s.stat("stats.restarts"), s.stat("stats.steps")
    s.close()
    print(f"\n{model} FMI {version} {path}, smooth input at H = {h}: restarts {restarts}, steps {steps}")
    if path == "plain":
        assert restarts == 0
    else:
        # Known limitation (docs/fmi-runtime.md): internal steps shorter than the stage-time
        # resolution (1e-5 s: the start-up, right after a communication point) run on the
        # segment of the last accepted time, and the importer's sample at their end is a
        # small jump. Measured: 0 to 4 restarts in this second.
        assert restarts <= 5


# A pendulum hanging from a frame whose sideways position is the input (tests/moving_pivot.rs).
PIVOT = (ROOT / "tests" / "data" / "moving_pivot.toml").read_text()


# (integrator, start of the motion, frame step dx [m], frame rate afterwards [m/s]): steps and
# ramps late in an internal step, where rosenbrock_nystrom and dopri5 accepted the step without
# the jump until session 33 (1 m and 13 % of the swing off, status OK; docs/fmi-runtime.md).
PIVOT_MOTIONS = [
    ("bdf", 0.3004, 0.01, 0.0),
    ("rosenbrock_nystrom", 0.3007, 0.01, 0.0),
    ("rosenbrock_nystrom", 0.30095, 0.0, -0.5),
    ("dopri5", 0.30095, 0.0, 0.1),
]


@pytest.mark.parametrize("formulation", ["joint", "absolute"])
@pytest.mark.parametrize("integrator,t_s,dx,rate", PIVOT_MOTIONS)
def test_a_pivot_step_inside_a_communication_step_through_intermediate_update(
    tools, tmp_path, formulation, integrator, t_s, dx, rate
):
    """The importer answers the FMI 3 intermediate-update requests with a frame that steps by
    dx, or starts to move at a constant rate, at t_s, inside the 1 ms communication step from
    0.300 s. A position step is the limit of a move ever faster: the bob keeps its place, and a
    rate jump is a blow through the pivot, so the pendulum starts from
    theta0 = -m L dx / (I + m L^2), omega0 = -m L rate / (I + m L^2) and swings freely (scipy
    on the minimal-coordinate equation (I + m L^2) theta'' = -m g L sin theta). Until session
    30 the joint formulation let the bob go with a stepping frame (0.34 m off after 1 s, status
    OK)."""
    from scipy.integrate import solve_ivp

    m, length, inertia, g = 1.0, 1.0, 0.001, 9.81
    j = inertia + m * length**2
    h, t_end = 0.001, 1.3

    def x_of(t):
        return dx + rate * (t - t_s) if t >= t_s else 0.0

    model = tmp_path / f"pivot_{formulation}.toml"
    text = PIVOT.replace("RECONSTRUCTION", "hold")
    text = text.replace("[solver]\n", f'[solver]\nintegrator = "{integrator}"\n', 1)
    model.write_text(text.replace("[model]\n", f'[model]\nformulation = "{formulation}"\n', 1))
    fmu = export(tools, model, 3, tmp_path)
    s = Slave(fmu, 3, intermediate=lambda t: [x_of(t)])
    rows = run_rig(s, lambda t: [x_of(t)], h, t_end, ["tip_x"])
    restarts = s.stat("stats.restarts")
    s.close()
    t = rows[:, 0]
    after = t >= t_s
    swing = solve_ivp(
        lambda _, y: [y[1], -m * g * length * math.sin(y[0]) / j],
        (t_s, t_end),
        [-m * length * dx / j, -m * length * rate / j],
        t_eval=t[after],
        rtol=1e-12,
        atol=1e-14,
    )
    frame = np.array([x_of(tk) for tk in t])
    want = frame.copy()
    want[after] = frame[after] + length * np.sin(swing.y[0])
    err = np.abs(rows[:, 1] - want).max()
    amplitude = np.abs(want[after] - frame[after]).max()
    print(f"\npivot {integrator}, {formulation}, step {dx} m and rate {rate} m/s from {t_s} s: "
          f"tip_x off by {err:.2e} m (swing {amplitude:.2e} m), restarts {restarts}")
    assert amplitude > 9e-3
    # Measured (session 33): at most 3.7e-5 of the swing (bdf, absolute), the ramps 1e-9.
    assert err < 1e-3 * amplitude
