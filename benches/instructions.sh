#!/usr/bin/env bash
# Instruction counts of the hot workloads, for comparing two builds on a
# shared machine where wall and CPU times vary by 20 % from run to run.
# Instruction counts under valgrind are reproducible to a few parts per
# million; they do not see cache misses, so a layout change still needs
# timing (or `--cache-sim=yes`, which this script passes with CACHE=1).
#
#   benches/instructions.sh BTFKIT [CORPUS]
#
# BTFKIT: the btfkit binary to measure, built with symbols so that the
#         counts can be read per function (`cargo build --profile profiling`:
#         target/profiling/btfkit; the release build is stripped).
# CORPUS: the decompressed corpus (default /tmp/corpus: kernel/, expected/,
#         expected-prededup/). Prints one line per workload:
#         workload  instructions  [D1 misses  LL misses]
# Workloads:
#   encode-btrfs   encode btrfs.ko over the reference vmlinux BTF, -j1,
#                  without dedup and functions (decode + per-CU encode + merge)
#   dedup-vmlinux  btfkit dedup of the 4.35 M-type pre-dedup vmlinux
# The modules directory of the corpus holds btrfs.ko; a missing input skips
# its workload with a note.
set -eu
BIN=${1:?usage: benches/instructions.sh BTFKIT [CORPUS]}
CORPUS=${2:-/tmp/corpus}
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is not installed" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
SIM=--cache-sim=no
[ "${CACHE:-0}" = 1 ] && SIM=--cache-sim=yes

run() { # name, command...
    local name=$1; shift
    valgrind --tool=cachegrind $SIM --cachegrind-out-file="$TMP/$name.out" "$@" >"$TMP/$name.log" 2>&1 \
        || { echo "$name: failed, see below" >&2; tail -5 "$TMP/$name.log" >&2; return 1; }
    local ir d1 ll
    ir=$(sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' "$TMP/$name.log" | tr -d ,)
    d1=$(sed -n 's/.*D1  misses: *\([0-9,]*\).*/\1/p' "$TMP/$name.log" | tr -d ,)
    ll=$(sed -n 's/.*LL misses: *\([0-9,]*\).*/\1/p' "$TMP/$name.log" | tr -d ,)
    printf '%-14s %14s %12s %12s\n' "$name" "$ir" "${d1:--}" "${ll:--}"
}

printf '%-14s %14s %12s %12s\n' workload instructions "D1 misses" "LL misses"
KO=$(find "$CORPUS/kernel" -name btrfs.ko 2>/dev/null | head -1)
BASE=$CORPUS/expected/kernel/vmlinux.kernel.btf
if [ -n "$KO" ] && [ -f "$BASE" ]; then
    run encode-btrfs "$BIN" encode "$KO" -j1 --no-dedup --no-funcs --base "$BASE" -o "$TMP/btrfs.btf" \
        --btf-features encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs \
        --lang-exclude rust
else
    echo "encode-btrfs: skipped (no btrfs.ko or vmlinux.kernel.btf under $CORPUS)"
fi
PRE=$CORPUS/expected-prededup/kernel/vmlinux.kernel.btf
if [ -f "$PRE" ]; then
    run dedup-vmlinux "$BIN" dedup "$PRE" -o "$TMP/dedup.btf"
    cmp -s "$TMP/dedup.btf" "$CORPUS/expected/kernel/vmlinux.kernel.btf" \
        || echo "dedup-vmlinux: output differs from the expected BTF" >&2
else
    echo "dedup-vmlinux: skipped (no $PRE)"
fi
