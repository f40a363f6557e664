#!/bin/sh
# Run the libbpf oracle on every object of a directory against one target BTF.
#
#   run_all.sh HARNESS OBJECTS_DIR TARGET_BTF OUT_DIR [harness options...]
#
# Writes OUT_DIR/X.bpf.o.log for every OBJECTS_DIR/X.bpf.o. The harness is run
# from inside OBJECTS_DIR with the bare file name, so the object path that
# libbpf prints ("loading object from X.bpf.o") does not depend on where the
# objects live. Extra arguments (e.g. --insns, --keep-maps) go to the harness
# before the file names.
set -eu
[ $# -ge 4 ] || { echo "usage: $0 HARNESS OBJECTS_DIR TARGET_BTF OUT_DIR [opts]" >&2; exit 2; }
abs() { (cd "$(dirname "$1")" && printf '%s/%s\n' "$(pwd)" "$(basename "$1")"); }
H=$(abs "$1"); OBJS=$2; T=$(abs "$3"); OUT=$4
shift 4
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$OBJS"
for o in *.bpf.o; do
    "$H" "$@" "$o" "$T" >"$OUT/$o.log" 2>"$OUT/$o.stderr" || echo "harness exit $? on $o" >&2
    # keep stderr files only when non-empty
    [ -s "$OUT/$o.stderr" ] || rm -f "$OUT/$o.stderr"
done
