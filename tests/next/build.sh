#!/bin/sh
# Builds the optimised inputs of the `next` profile (tests/next/bin/) from the
# corpus's fixture sources, with the corpus's compilers (gcc 12.2.0, clang
# 14.0.6, Debian bookworm) and flags. The committed objects are the inputs of
# record: other compiler versions give other bytes.
#   sh tests/next/build.sh [CORPUS_DIR]     (from the repository root)
set -eu
CORPUS=${1:-../shared/corpus}
B=tests/next/bin
mkdir -p "$B"
cd "$CORPUS/fixtures"
OUT=$OLDPWD/$B
FLAGS="-fno-asynchronous-unwind-tables -fdebug-prefix-map=$(pwd)=."
# -O3: more clones (.isra, .constprop, .part), dropped and reordered
# parameters, the inputs the true_signature feature is about.
for f in func_protos clones optimized_params inline_only variables kfuncs aliases_weak \
         main_prog structs_unions packed_aligned; do
	gcc -g -O3 $FLAGS -c "src/$f.c" -o "$OUT/$f.gcc-O3.o"
	clang -g -O3 $FLAGS -c "src/$f.c" -o "$OUT/$f.clang-O3.o"
done
# a weak definition and the strong one the linker keeps, in two units
# (sources in tests/next/src)
SRC=$OLDPWD/tests/next/src
SFLAGS="$FLAGS -fdebug-prefix-map=$SRC=tests/next/src"
gcc -g -O2 $SFLAGS -o "$OUT/weak_strong.gcc-O2.exe" "$SRC/weak_strong_a.c" "$SRC/weak_strong_b.c"
clang -g -O2 $SFLAGS -o "$OUT/weak_strong.clang-O2.exe" "$SRC/weak_strong_a.c" "$SRC/weak_strong_b.c"
gcc -g -O3 $FLAGS -o "$OUT/prog.gcc-O3.exe" src/main_prog.c src/cu_pair_a.c src/cu_pair_b.c \
	src/clones.c src/variables.c src/inline_only.c src/aliases_weak.c src/optimized_params.c \
	src/arrays.c src/func_protos.c src/kfuncs.c
