#!/bin/sh
# A whole kernel debug package: the reference (pahole for the vmlinux, then
# one process per module, two at a time, as `make -j2` runs them) against one
# `btfkit kernel` process, on the unpacked tree and on the .deb itself.
#
#   PAHOLE=/path/to/pahole-v1.31 [BTFKIT=target/release/btfkit] [JOBS=2] \
#     benches/kernel-package.sh PACKAGE.deb [WORK]
#
# WORK (default /tmp/btfkit-kernel-bench) receives the unpacked tree (timed:
# `dpkg-deb -x`), the reference outputs and btfkit's. Prints wall, user, sys
# and peak RSS of each run (GNU time; for the reference's modules, peak RSS
# is that of the largest single pahole process) and how many of the outputs
# are byte-identical to the reference's. Nothing of it is kept in the repo:
# the generic amd64 package is 1 GB, 6.4 GB unpacked
# (data/fetch-debian-kernel.sh linux-image-6.12.117+deb12-amd64-dbg).
set -u
DEB=$1
WORK=${2:-/tmp/btfkit-kernel-bench}
: "${PAHOLE:?set PAHOLE to the reference pahole binary}"
BTFKIT=${BTFKIT:-target/release/btfkit}
JOBS=${JOBS:-2}
# The 6.12 kernel's PAHOLE_FLAGS (scripts/Makefile.btf), and CONFIG_RUST's exclusion.
FEATURES=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs
export PAHOLE FEATURES
TIME='%e s wall, %U s user, %S s sys, %M KB peak RSS'

mkdir -p "$WORK"
if [ ! -d "$WORK/root" ]; then
  rm -rf "$WORK/root.tmp"
  /usr/bin/time -f "dpkg-deb -x: $TIME" dpkg-deb -x "$DEB" "$WORK/root.tmp" && mv "$WORK/root.tmp" "$WORK/root"
fi
VMLINUX=$(find "$WORK/root/usr/lib/debug/boot" -name 'vmlinux-*' | head -1)
MODROOT=$(find "$WORK/root/usr/lib/debug/lib/modules" -mindepth 1 -maxdepth 1 -type d | head -1)
(cd "$MODROOT" && find . -name '*.ko' | sort) >"$WORK/modules.list"
echo "vmlinux: $VMLINUX"
echo "modules: $(wc -l <"$WORK/modules.list") under $MODROOT"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

rm -rf "$WORK/ref" "$WORK/tree" "$WORK/deb"
mkdir -p "$WORK/ref/modules"
/usr/bin/time -f "reference vmlinux: $TIME" \
  "$PAHOLE" -J -j"$JOBS" --btf_features="$FEATURES,reproducible_build" --lang_exclude=rust \
  --btf_encode_detached="$WORK/ref/vmlinux.btf" "$VMLINUX"
export REF="$WORK/ref" MODROOT
/usr/bin/time -f "reference modules: $TIME" \
  xargs -P"$JOBS" -n1 sh -c 'o="$REF/modules/${1%.ko}.btf"; mkdir -p "$(dirname "$o")";
    exec "$PAHOLE" -J -j --btf_features="$FEATURES" --lang_exclude=rust \
      --btf_base "$REF/vmlinux.btf" --btf_encode_detached="$o" "$MODROOT/$1"' _ \
  <"$WORK/modules.list" >"$WORK/ref.log" 2>&1
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

/usr/bin/time -f "btfkit kernel (tree): $TIME" "$BTFKIT" kernel -j"$JOBS" "$WORK/root" --out-dir "$WORK/tree" \
  >"$WORK/tree.log" 2>&1
tail -n1 "$WORK/tree.log"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/time -f "btfkit kernel (.deb): $TIME" "$BTFKIT" kernel -j"$JOBS" "$DEB" --out-dir "$WORK/deb" \
  >"$WORK/deb.log" 2>&1
tail -n1 "$WORK/deb.log"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

for run in tree deb; do
  same=0 differ=0 missing=0
  for r in "$WORK/ref/vmlinux.btf" $(cd "$WORK/ref" && find modules -name '*.btf' | sed "s|^|$WORK/ref/|"); do
    b="$WORK/$run/${r#"$WORK/ref/"}"
    if [ ! -f "$b" ]; then
      missing=$((missing + 1))
    elif cmp -s "$r" "$b"; then
      same=$((same + 1))
    else
      differ=$((differ + 1))
      echo "$run differs: ${r#"$WORK/ref/"}"
    fi
  done
  echo "$run: byte-identical $same, different $differ, missing $missing (reference outputs: $((same + differ + missing)))"
done
