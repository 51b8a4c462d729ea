#!/usr/bin/env bash
# Installs what the build and the tests need on a fresh machine (idempotent):
# - libclang (fmi-sys runs bindgen at build time)
# - a Python venv in .venv with fmpy, numpy and scipy (FMU validation and independent references)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

need_apt=()
# libclang proper (libclang.so*, libclang-NN.so*), not libclang-cpp.so*, which some images ship
# alone and which clang-sys (bindgen) rightly ignores.
have_libclang=$(ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/llvm-*/lib/libclang-[0-9]*.so* \
    /usr/lib/*/libclang.so* /usr/lib/*/libclang-[0-9]*.so* 2>/dev/null | head -n 1 || true)
[ -n "$have_libclang" ] || need_apt+=(libclang-dev)
command -v valgrind >/dev/null 2>&1 || need_apt+=(valgrind)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: installing ${need_apt[*]}"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

venv="$here/.venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import fmpy, scipy, numpy, pytest" 2>/dev/null; then
    echo "setup: creating $venv (fmpy, scipy, numpy, pytest)"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -r "$here/tools/requirements.txt"
fi
