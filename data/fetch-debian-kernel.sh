#!/usr/bin/env bash
# Fetches a Debian kernel debug package (vmlinux + every module with full
# DWARF) with apt-get download and unpacks it, for the module batch benchmark
# and cross-architecture runs. Nothing is installed on the system.
#
#   data/fetch-debian-kernel.sh [PACKAGE] [DEST]
#
# PACKAGE defaults to the corpus kernel's, linux-image-6.12.117+deb12-cloud-amd64-dbg
# (318 MB download, 1.8 GB unpacked). For arm64 run first
#   dpkg --add-architecture arm64 && apt-get update
# and pass e.g. linux-image-6.12.117+deb12-cloud-arm64-dbg:arm64.
# Prints the unpacked vmlinux and the module folder. Offline, use the corpus
# modules instead (../shared/corpus/kernel/modules).
set -euo pipefail
pkg="${1:-linux-image-6.12.117+deb12-cloud-amd64-dbg}"
dest="${2:-${TMPDIR:-/tmp}/btfkit-debian-kernel}"
mkdir -p "$dest"
cd "$dest"
deb=$(ls ./*.deb 2>/dev/null | head -1 || true)
if [ -z "$deb" ]; then
  apt-get download "$pkg"
  deb=$(ls ./*.deb | head -1)
fi
if [ ! -d root ]; then
  dpkg-deb -x "$deb" root.tmp
  mv root.tmp root
fi
vmlinux=$(find root/usr/lib/debug/boot -name 'vmlinux-*' | head -1)
mods=$(find root/usr/lib/debug/lib/modules -maxdepth 1 -mindepth 1 -type d | head -1)
echo "vmlinux: $dest/$vmlinux"
echo "modules: $dest/$mods ($(find "$mods" -name '*.ko' | wc -l) .ko files)"
