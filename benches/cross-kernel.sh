#!/usr/bin/env bash
# Encodes a cross-architecture Debian kernel (default: the arm64 build of the
# corpus kernel's version) with btfkit and, if PAHOLE is set, with that
# reference pahole; compares the bytes and prints wall / CPU / peak RSS.
#
#   PAHOLE=/path/to/pahole benches/cross-kernel.sh [PACKAGE] [DEST]
#
# Needs once: dpkg --add-architecture arm64 && apt-get update
# Fetching and unpacking goes through data/fetch-debian-kernel.sh (DEST
# defaults to $TMPDIR/btfkit-debian-kernel-<arch>); nothing is installed.
# BTFKIT (default target/release/btfkit) and JOBS (default 2) can be set.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
pkg="${1:-linux-image-6.12.117+deb12-cloud-arm64-dbg:arm64}"
arch="${pkg##*:}"
[ "$arch" = "$pkg" ] && arch=native
dest="${2:-${TMPDIR:-/tmp}/btfkit-debian-kernel-$arch}"
btfkit="${BTFKIT:-$here/target/release/btfkit}"
jobs="${JOBS:-2}"
features="--btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs,reproducible_build"

[ -x "$btfkit" ] || (cd "$here" && cargo build --release)
vmlinux=$("$here/data/fetch-debian-kernel.sh" "$pkg" "$dest" | sed -n 's/^vmlinux: //p')
echo "vmlinux: $vmlinux ($(readelf -h "$vmlinux" | sed -n 's/ *Machine: *//p'))"
out="$dest/out"
mkdir -p "$out"

# Prints "wall s, user+sys s, peak RSS MiB" from a /usr/bin/time -v log.
summary() {
  awk -F': ' '
    /Elapsed \(wall clock\)/ { n = split($2, t, ":"); w = 0; for (i = 1; i <= n; i++) w = w * 60 + t[i] }
    /User time/ { u = $2 } /System time/ { s = $2 } /Maximum resident/ { r = $2 }
    END { printf "wall %.2f s, user+sys %.2f+%.2f s, peak RSS %d MiB\n", w, u, s, r / 1024 }' "$1"
}

/usr/bin/time -v -o "$out/btfkit.time" "$btfkit" pahole -J -j"$jobs" "$features" --lang_exclude=rust \
  --btf_encode_detached="$out/btfkit.btf" "$vmlinux"
echo "btfkit -j$jobs: $(summary "$out/btfkit.time"); $(sha256sum < "$out/btfkit.btf" | cut -c1-16)… $(stat -c %s "$out/btfkit.btf") bytes"

if [ -n "${PAHOLE:-}" ]; then
  /usr/bin/time -v -o "$out/pahole.time" "$PAHOLE" -J -j"$jobs" "$features" --lang_exclude=rust \
    --btf_encode_detached="$out/pahole.btf" "$vmlinux"
  echo "pahole -j$jobs: $(summary "$out/pahole.time"); $(sha256sum < "$out/pahole.btf" | cut -c1-16)… $(stat -c %s "$out/pahole.btf") bytes"
  if cmp -s "$out/btfkit.btf" "$out/pahole.btf"; then
    echo "identical"
  else
    echo "DIFFERENT; first differences:"
    "$btfkit" diff "$out/pahole.btf" "$out/btfkit.btf" | head -40
    exit 1
  fi
fi
