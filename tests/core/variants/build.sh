#!/usr/bin/env bash
# Rebuilds variants.bpf.o (committed) from variants.bpf.c with Debian's clang 14.
set -euo pipefail
cd "$(dirname "$0")"
clang -g -O2 -target bpf -c variants.bpf.c -o variants.bpf.o
llvm-strip -g variants.bpf.o
