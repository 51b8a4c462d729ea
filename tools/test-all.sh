#!/usr/bin/env bash
# Runs every test: Rust unit and integration tests (including the C ABI tests, which load the
# release cdylib), the Python tests (fmpy validation, outputs against the independent scipy
# references, FMI 3 intermediate update) and the valgrind leak check of the FMU library
# (1000 instantiate/step/free cycles of FMI 2 and FMI 3: about 2 min; LEAK_CYCLES overrides).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash tools/setup.sh
export PATH="$here/.venv/bin:$PATH"
export MBSFMU_PYTHON="$here/.venv/bin/python"
cargo build --release --lib --bins
cargo test --release --lib --bins --tests
if compgen -G "tests/python/test_*.py" >/dev/null; then
    "$here/.venv/bin/python" -m pytest -q tests/python
fi
bash tools/leak-check.sh "${LEAK_CYCLES:-1000}"
