#!/bin/sh
# Rebuild the bcc libbpf-tools BPF objects kept in this directory.
#
#   BCC_DIR=/path/to/bcc LIBBPF_DIR=/path/to/libbpf tests/core/objects/build.sh [tool ...]
#
# BCC_DIR     a checkout of iovisor/bcc (only libbpf-tools/ is read).
# LIBBPF_DIR  a checkout of libbpf/libbpf at the commit bcc pins as its
#             src/cc/libbpf submodule (see README.md). Its src/*.h headers are
#             installed into a scratch bpf/ include directory with libbpf's own
#             "install_headers" target, and its include/uapi is used as the
#             uapi include path, exactly as bcc's libbpf-tools Makefile does.
# OUT_DIR     where X.bpf.o goes (default: the directory of this script);
#             big-endian objects go to $OUT_DIR/bpfeb/.
# CLANG, LLVM_STRIP   compilers (default clang, llvm-strip; we used clang 14).
# BPFEB_TOOLS tools that are also built with -target bpfeb
#             (default: the list in BPFEB_DEFAULT below).
#
# With no tool arguments every libbpf-tools/*.bpf.c is built. A tool that
# fails to compile is reported and the script goes on; the exit status is 1
# if anything failed.
#
# Flags are those of bcc's libbpf-tools/Makefile for ARCH=x86:
#   $(CLANG) -g -O2 -Wall -Werror=undef [-mcpu=v3 for softirqs] -target bpf
#            -D__TARGET_ARCH_x86 -Ix86/ -I$(OUTPUT) -I<libbpf>/include/uapi
#            -c X.bpf.c -o X.bpf.o && llvm-strip -g X.bpf.o
# The compiler runs inside $BCC_DIR/libbpf-tools with a relative source name,
# as make does.
#
# Two additions to bcc's flags, neither of which changes code or types:
#  * Reproducibility: clang records absolute source paths, and they survive
#    "llvm-strip -g" as BTF line-info file names. -fdebug-prefix-map rewrites
#    them as if bcc were checked out at /bcc with headers in
#    /bcc/libbpf-tools/.output (bcc's $(OUTPUT)), so the objects do not depend
#    on where BCC_DIR or the scratch include directory is.
#  * -idirafter /usr/include/<multiarch>: usdt.bpf.h (javagc) includes
#    <linux/errno.h>, which needs <asm/errno.h>; Debian keeps that in the
#    multiarch directory, which clang does not search for -target bpf. Being
#    -idirafter, it only serves headers that are found nowhere else.
#
# "-target bpf" means host byte order, so the script refuses to run on a
# big-endian host (the bpfel objects would silently become bpfeb).
# Paths (BCC_DIR, LIBBPF_DIR, TMPDIR) must not contain spaces.

set -u

: "${BCC_DIR:?set BCC_DIR to a bcc checkout}"
: "${LIBBPF_DIR:?set LIBBPF_DIR to a libbpf checkout}"
CLANG=${CLANG:-clang}
LLVM_STRIP=${LLVM_STRIP:-llvm-strip}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT_DIR=${OUT_DIR:-$HERE}
BPFEB_DEFAULT="bindsnoop biolatency ksnoop memleak offcputime tcppktlat"
BPFEB_TOOLS=${BPFEB_TOOLS-$BPFEB_DEFAULT}
# Virtual root the build paths are mapped to (see the header comment).
VROOT=/bcc
ARCH=x86

TOOLS_DIR=$BCC_DIR/libbpf-tools
[ -d "$TOOLS_DIR/$ARCH" ] || { echo "no $TOOLS_DIR/$ARCH" >&2; exit 2; }
[ -f "$LIBBPF_DIR/src/bpf_helpers.h" ] || { echo "no $LIBBPF_DIR/src/bpf_helpers.h" >&2; exit 2; }

# Host byte order check: od reads the bytes 01 00 as one host-order 16-bit
# number, which is 1 only on a little-endian host.
case $(printf '\001\000' | od -An -tu2 | tr -d ' ') in
1) ;;
*) echo "big-endian host: '-target bpf' would not give bpfel objects" >&2; exit 2 ;;
esac

OUT_DIR=$(mkdir -p "$OUT_DIR" && cd "$OUT_DIR" && pwd)
INC=$(mktemp -d "${TMPDIR:-/tmp}/btfkit-bpfinc.XXXXXX")
trap 'rm -rf "$INC"' EXIT INT TERM

# Install the libbpf BPF-side headers ($INC/bpf/*.h) with libbpf's own target.
if ! make -s -C "$LIBBPF_DIR/src" install_headers DESTDIR="$INC" INCLUDEDIR= \
        >"$INC/make.log" 2>&1 || [ ! -f "$INC/bpf/bpf_helpers.h" ]; then
    cat "$INC/make.log" >&2
    echo "installing libbpf headers failed" >&2
    exit 2
fi
UAPI=$(cd "$LIBBPF_DIR/include/uapi" && pwd)
ABS_TOOLS=$(cd "$TOOLS_DIR" && pwd)
MULTIARCH=$("$CLANG" -print-multiarch 2>/dev/null || true)
[ -n "$MULTIARCH" ] || MULTIARCH=x86_64-linux-gnu
MAPS="-fdebug-prefix-map=$ABS_TOOLS=$VROOT/libbpf-tools"
MAPS="$MAPS -fdebug-prefix-map=$INC=$VROOT/libbpf-tools/.output"
MAPS="$MAPS -fdebug-prefix-map=$UAPI=$VROOT/src/cc/libbpf/include/uapi"

if [ $# -gt 0 ]; then
    TOOLS="$*"
else
    TOOLS=$(cd "$TOOLS_DIR" && ls *.bpf.c | sed 's/\.bpf\.c$//' | tr '\n' ' ')
fi

# build TOOL TARGET OUTFILE
build() {
    tool=$1 target=$2 out=$3
    extra=
    [ "$tool" = softirqs ] && extra=-mcpu=v3
    # shellcheck disable=SC2086
    (cd "$TOOLS_DIR" &&
        "$CLANG" -g -O2 -Wall -Werror=undef $extra -target "$target" \
            -D__TARGET_ARCH_$ARCH -I$ARCH/ -I"$INC" -I"$UAPI" \
            -idirafter "/usr/include/$MULTIARCH" $MAPS \
            -c "$tool.bpf.c" -o "$out.tmp" &&
        "$LLVM_STRIP" -g "$out.tmp" && mv "$out.tmp" "$out")
    rc=$?
    rm -f "$out.tmp"
    return $rc
}

failed=
n_ok=0
for t in $TOOLS; do
    if build "$t" bpf "$OUT_DIR/$t.bpf.o" 2>"$INC/err"; then
        n_ok=$((n_ok + 1))
    else
        echo "FAILED: $t (bpf)" >&2
        sed 's/^/    /' "$INC/err" >&2
        failed="$failed $t"
    fi
done

n_eb=0
if [ -n "$BPFEB_TOOLS" ]; then
    mkdir -p "$OUT_DIR/bpfeb"
    for t in $BPFEB_TOOLS; do
        # Only tools that were asked for (or all, when no arguments).
        case " $TOOLS " in *" $t "*) ;; *) continue ;; esac
        if build "$t" bpfeb "$OUT_DIR/bpfeb/$t.bpf.o" 2>"$INC/err"; then
            n_eb=$((n_eb + 1))
        else
            echo "FAILED: $t (bpfeb)" >&2
            sed 's/^/    /' "$INC/err" >&2
            failed="$failed $t(bpfeb)"
        fi
    done
fi

echo "built $n_ok bpfel and $n_eb bpfeb objects into $OUT_DIR"
if [ -n "$failed" ]; then
    echo "failed:$failed" >&2
    exit 1
fi
exit 0
