#!/usr/bin/env bash
# FMU call overhead (issue 7): a compiled C master (tools/fmu-overhead.c, built here with cc)
# calling the release library through dlopen on a trivial model (one particle on a spring),
# the same call bodies called directly in Rust on the co-simulation layer
# (benches/peers/src/bin/fmu_body.rs), and fmpy calling the FMUs
# (tools/fmu_overhead_fmpy.py). Writes benches/peers/results/fmu_overhead.json.
# Usage: tools/fmu-overhead.sh [REPEATS]      (about 1 minute)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
repeats=${1:-7}
target=${CARGO_TARGET_DIR:-$here/target}
peers_target=${PEERS_TARGET_DIR:-$target}
cd "$here"
cargo build --release --lib --bins --quiet
(cd benches/peers && CARGO_TARGET_DIR="$peers_target" cargo build --release --quiet --bin fmu_body)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/particle.toml" <<'TOML'
[model]
name = "particle"
description = "One particle on a spring to a moving base (FMU call overhead benchmark)"
gravity = [0.0, 0.0, 0.0]

[[inputs]]
name = "u"
unit = "m"
start = 0.0

[[frames]]
name = "base"
position = [{ input = "u" }, 0.0, 0.0]

[[bodies]]
name = "mass"
type = "particle"
mass = 1.0
position = [0.0, 0.0, 0.0]

[[forces]]
name = "spring"
type = "spring_damper"
body1 = "base"
point1 = [-1.0, 0.0, 0.0]
body2 = "mass"
point2 = [0.0, 0.0, 0.0]
stiffness = 100.0
damping = 2.0
free_length = 1.0

[[outputs]]
name = "x"
type = "position"
body = "mass"
component = "x"
TOML
lib_so="$target/release/libmbsfmu.so"
"$target/release/mbsfmu" export "$work/particle.toml" --fmi 3 -o "$work/p3.fmu" --library "$lib_so" >/dev/null
"$target/release/mbsfmu" export "$work/particle.toml" --fmi 2 -o "$work/p2.fmu" --library "$lib_so" >/dev/null
mkdir "$work/fmu"
unzip -q "$work/p3.fmu" -d "$work/fmu"
md="$work/fmu/modelDescription.xml"
token=$(sed -n 's/.*instantiationToken="\([^"]*\)".*/\1/p' "$md" | head -1)
vr_of() { grep -o "name=\"$1\"[^>]*valueReference=\"[0-9]*\"" "$md" | sed 's/.*valueReference="\([0-9]*\)"/\1/' | head -1; }
so=$(ls "$work"/fmu/binaries/*/*.so | head -1)
cc -O2 -Wall -o "$work/master" tools/fmu-overhead.c -ldl
RESOURCE_URI="file://$work/fmu/resources" "$work/master" "$so" "$work/fmu/resources/" "$token" "$(vr_of u)" "$(vr_of x)" "$repeats" > "$work/c.json"
"$peers_target/release/fmu_body" "$work/particle.toml" "$repeats" > "$work/rust.json"
py="$here/.venv/bin/python"; [ -x "$py" ] || py=python3
"$py" tools/fmu_overhead_fmpy.py "$work/p3.fmu" "$work/p2.fmu" 5 > "$work/fmpy.json"
"$py" - "$work" "$here/benches/peers/results/fmu_overhead.json" <<'PY'
import datetime, json, os, platform, sys
w, out = sys.argv[1], sys.argv[2]
r = {"date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
     "load_average_at_start": open("/proc/loadavg").read().split()[:3],
     "clock": "this thread's CPU time (C master, Rust direct); process CPU time (fmpy)",
     "model": "one particle on a spring to an input-driven base (1 body, 3 coordinates)"}
for k in ("c", "rust", "fmpy"):
    r.update(json.load(open(os.path.join(w, k + ".json"))))
json.dump(r, open(out, "w"), indent=1)
print(f"wrote {out}")
PY
