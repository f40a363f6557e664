#!/bin/sh
# Builds the optimised inputs of the `next` profile (tests/next/bin/) from the
# corpus's fixture sources, with the corpus's compilers (gcc 12.2.0, clang
# 14.0.6, Debian bookworm) and flags, and with clang 19.1.7 (bookworm's
# clang-19 package), which marks functions whose signature it changed with
# DW_CC_nocall (clang 14 does not). The committed objects are the inputs of
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
# clang 19 at -O2: DW_CC_nocall (the fixtures, and tests/next/src/nocall.c
# whose functions lose, fold or split their parameters)
SRC=$OLDPWD/tests/next/src
for f in func_protos clones optimized_params inline_only variables kfuncs aliases_weak \
         main_prog structs_unions packed_aligned; do
	clang-19 -g -O2 $FLAGS -c "src/$f.c" -o "$OUT/$f.clang19-O2.o"
done
clang-19 -g -O2 $FLAGS -fdebug-prefix-map=$SRC=tests/next/src -c "$SRC/nocall.c" -o "$OUT/nocall.clang19-O2.o"
# gcc 16's DW_TAG_GNU_annotation chains, written by hand (no gcc 16 here)
python3 "$SRC/gnu_annotation.py" > "$OUT/gnu_annotation.s.tmp"
as -o "$OUT/gnu_annotation.handmade.o" "$OUT/gnu_annotation.s.tmp"
rm "$OUT/gnu_annotation.s.tmp"
# a weak definition and the strong one the linker keeps, in two units
# (sources in tests/next/src)
SFLAGS="$FLAGS -fdebug-prefix-map=$SRC=tests/next/src"
gcc -g -O2 $SFLAGS -o "$OUT/weak_strong.gcc-O2.exe" "$SRC/weak_strong_a.c" "$SRC/weak_strong_b.c"
clang -g -O2 $SFLAGS -o "$OUT/weak_strong.clang-O2.exe" "$SRC/weak_strong_a.c" "$SRC/weak_strong_b.c"
gcc -g -O3 $FLAGS -o "$OUT/prog.gcc-O3.exe" src/main_prog.c src/cu_pair_a.c src/cu_pair_b.c \
	src/clones.c src/variables.c src/inline_only.c src/aliases_weak.c src/optimized_params.c \
	src/arrays.c src/func_protos.c src/kfuncs.c
