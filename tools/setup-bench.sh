#!/usr/bin/env bash
# Installs what the peer benchmarks need (idempotent), on top of tools/setup.sh:
# - Debian's libsundials-dev (SUNDIALS 6.4.1: CVODE, IDA). sundials-sys 0.6.2 generates its
#   bindings from the headers in /usr/include and links the system libraries (it would build its
#   vendored copy with CMake only when no SUNDIALS >= 6 headers are found).
# - libclang (bindgen, for sundials-sys)
# - Exudyn (tools/requirements-bench.txt) into the project venv .venv
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

need_apt=()
[ -f /usr/include/cvode/cvode.h ] && [ -f /usr/include/ida/ida.h ] || need_apt+=(libsundials-dev)
[ -n "$(ls /usr/lib/llvm-*/lib/libclang*.so* 2>/dev/null)" ] || need_apt+=(libclang-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup-bench: installing ${need_apt[*]}"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

venv="$here/.venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if ! "$venv/bin/python" -c "import exudyn, numpy" 2>/dev/null; then
    echo "setup-bench: installing Exudyn into $venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -r "$here/tools/requirements-bench.txt"
fi
