#!/bin/sh
# Linker wrapper (see .cargo/config.toml): when linking the FMU library (whose link line
# carries src/fmi/exports.map), drop rustc's own version script, which would also export
# `#[no_mangle]` symbols of dependencies (fmi-sys's `callback_log`). Every other link is passed
# through unchanged.
ours=""
for a in "$@"; do
    case "$a" in *exports.map) ours=1 ;; esac
done
if [ -z "$ours" ]; then
    exec cc "$@"
fi
for a in "$@"; do
    shift
    case "$a" in
        *exports.map) set -- "$@" "$a" ;;
        -Wl,--version-script=*) ;;
        *) set -- "$@" "$a" ;;
    esac
done
exec cc "$@"
