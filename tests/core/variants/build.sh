#!/usr/bin/env bash
# Rebuilds the committed objects beside this file: variants.bpf.o and
# modules.bpf.o with Debian's clang 14, matches.bpf.o with clang 16 (apt
# install clang-16; clang 15 is the first to emit TYPE_MATCHES relocations).
set -euo pipefail
cd "$(dirname "$0")"
clang -g -O2 -target bpf -c variants.bpf.c -o variants.bpf.o
llvm-strip -g variants.bpf.o
clang -g -O2 -target bpf -c modules.bpf.c -o modules.bpf.o
llvm-strip -g modules.bpf.o
clang-16 -g -O2 -target bpf -c matches.bpf.c -o matches.bpf.o
llvm-strip -g matches.bpf.o
