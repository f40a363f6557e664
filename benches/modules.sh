#!/bin/sh
# Batch encoding of every *.ko under MODDIR: btfkit in one process vs the
# reference, one process per module, two at a time (as `make -j2` runs it).
#
#   PAHOLE=/path/to/pahole-v1.31 [BTFKIT=target/release/btfkit] [JOBS=2] \
#     benches/modules.sh MODDIR BASE.btf [OUTDIR]
#
# Prints wall, user+sys and peak RSS of both runs (GNU time; for the
# reference, peak RSS is the largest single pahole process) and how many
# outputs are byte-identical.
set -u
MODDIR=$1
BASE=$2
OUT=${3:-/tmp/btfkit-modules-bench}
: "${PAHOLE:?set PAHOLE to the reference pahole binary}"
BTFKIT=${BTFKIT:-target/release/btfkit}
JOBS=${JOBS:-2}
# The 6.12 kernel's PAHOLE_FLAGS (scripts/Makefile.btf) for in-tree modules.
FEATURES=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs
export PAHOLE BASE OUT FEATURES

rm -rf "$OUT"
mkdir -p "$OUT/ref" "$OUT/btfkit"
find "$MODDIR" -name '*.ko' | sort >"$OUT/list"
echo "modules: $(wc -l <"$OUT/list"), load average: $(cut -d' ' -f1-3 /proc/loadavg)"

/usr/bin/time -f 'reference: %e s wall, %U s user, %S s sys, %M KB peak RSS' -o "$OUT/ref.time" \
  xargs -P"$JOBS" -n1 sh -c 'exec "$PAHOLE" -J -j --btf_features="$FEATURES" --lang_exclude=rust \
    --btf_base "$BASE" --btf_encode_detached="$OUT/ref/$(basename "$1" .ko).btf" "$1"' _ <"$OUT/list" \
  >"$OUT/ref.log" 2>&1
echo "reference exit: $?"
cat "$OUT/ref.time"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

/usr/bin/time -f 'btfkit:    %e s wall, %U s user, %S s sys, %M KB peak RSS' -o "$OUT/btfkit.time" \
  "$BTFKIT" encode -j"$JOBS" --base "$BASE" --btf-features="$FEATURES" --lang-exclude=rust \
    --out-dir "$OUT/btfkit" "$MODDIR" >"$OUT/btfkit.log" 2>&1
echo "btfkit exit: $?"
tail -n1 "$OUT/btfkit.log"
cat "$OUT/btfkit.time"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

same=0
differ=0
missing=0
for r in "$OUT"/ref/*.btf; do
  b="$OUT/btfkit/$(basename "$r")"
  if [ ! -f "$b" ]; then
    missing=$((missing + 1))
  elif cmp -s "$r" "$b"; then
    same=$((same + 1))
  else
    differ=$((differ + 1))
    echo "differs: $(basename "$r")"
  fi
done
echo "reference outputs: $(ls "$OUT"/ref | wc -l), btfkit outputs: $(ls "$OUT"/btfkit | wc -l)"
echo "byte-identical: $same, different: $differ, missing from btfkit: $missing"
