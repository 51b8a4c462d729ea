#!/usr/bin/env bash
# Runs every test: Rust unit and integration tests (including the C ABI tests, which load the
# release cdylib) and the Python tests (fmpy validation, independent scipy references).
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
