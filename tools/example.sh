#!/usr/bin/env bash
# The README's first command: build, export an example model as FMI 2 and FMI 3 FMUs, simulate
# it through the same co-simulation entry point the FMU uses (printed summary + PNG plot), and
# run the exported FMU in fmpy as an independent importer.
#
# Example: the quarter-car on the stamp test rig (models/quarter_car_rig.toml), excited by a
# 1.5 Hz, 10 mm sine on the stamp.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash tools/setup.sh
cargo build --release --lib --bins
out="$here/out"
mkdir -p "$out"
bin="$here/target/release/mbsfmu"
[ -n "${CARGO_TARGET_DIR:-}" ] && bin="$CARGO_TARGET_DIR/release/mbsfmu"

echo "== export"
"$bin" export models/quarter_car_rig.toml --out-dir "$out"
"$bin" info "$out/quarter_car_rig_fmi3.fmu" | head -20

echo "== simulate (the FMU's co-simulation layer, in-process)"
"$here/.venv/bin/python" - "$out/stamp.csv" <<'PY'
import math, sys
with open(sys.argv[1], "w") as f:
    f.write("time,stamp_z\n")
    for i in range(0, 5001):
        t = i * 1e-3
        f.write(f"{t:.4f},{0.01 * math.sin(2 * math.pi * 1.5 * t):.9f}\n")
PY
"$bin" simulate models/quarter_car_rig.toml --input "$out/stamp.csv" --stop 5 --step 0.005 \
    --out "$out/quarter_car.csv" --plot "$out/quarter_car.png" --plot-outputs chassis_z,wheel_z

echo "== the exported FMU in fmpy"
"$here/.venv/bin/python" tools/run_fmu.py "$out/quarter_car_rig_fmi3.fmu" --input "$out/stamp.csv" --stop 5 --step 0.005
echo "results: $out/quarter_car.csv, plot: $out/quarter_car.png"
