#!/usr/bin/env bash
# Leak check of the FMU library: N (default 1000) cycles of instantiate / initialize / step /
# FMU state round trip / free for FMI 2 and FMI 3 (plus a failing instantiation per cycle) under
# valgrind; fails on any definite, indirect or possible leak and on memory errors.
# The FMU is exported by the mbsfmu CLI from a small oscillator model (the packaging path, so
# the GUID/token comes from the packager).
# Usage: tools/leak-check.sh [CYCLES]   (LEAK_ON_PURPOSE=1: negative control, must fail)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cycles=${1:-1000}
target=${CARGO_TARGET_DIR:-$here/target}
cd "$here"
cargo build --release --lib --bins
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/oscillator.toml" <<'TOML'
[model]
name = "oscillator"
description = "Base-excited spring-mass-damper (leak check)"
gravity = [0.0, 0.0, 0.0]

[[parameters]]
name = "k"
value = 100.0
unit = "N/m"

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
stiffness = "k"
damping = 2.0
free_length = 1.0

[[outputs]]
name = "x"
type = "position"
body = "mass"
component = "x"
TOML
"$target/release/mbsfmu" export "$work/oscillator.toml" --fmi 2 -o "$work/osc.fmu" --library "$target/release/libmbsfmu.so" >/dev/null
mkdir "$work/fmu"
unzip -q "$work/osc.fmu" -d "$work/fmu"
md="$work/fmu/modelDescription.xml"
guid=$(sed -n 's/.*guid="\([^"]*\)".*/\1/p' "$md" | head -1)
vr_of() { grep -o "name=\"$1\"[^>]*valueReference=\"[0-9]*\"" "$md" | sed 's/.*valueReference="\([0-9]*\)"/\1/' | head -1; }
export VR_U=$(vr_of u) VR_X=$(vr_of x)
lib=$(ls "$work"/fmu/binaries/linux64/*.so | head -1)
cc -O1 -g -Wall -o "$work/driver" tools/leak-driver.c -ldl
valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=1 \
    "$work/driver" "$lib" "file://$work/fmu/resources" "$work/fmu/resources/" "$guid" "$cycles"
echo "leak check: no leaks, no memory errors over $cycles cycles"
