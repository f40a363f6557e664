#!/usr/bin/env bash
# Runs every fuzz target (or those named) for SECONDS each (default 60),
# seeded from the corpus. Crashes land in fuzz/artifacts/<target>/; turn each
# into a regression test under tests/ with its input checked in.
# Usage: fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"; shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo fuzz list)
corpus="${BTFKIT_CORPUS:-$(cd ../.. && pwd)/shared/corpus}"
# cargo-fuzz needs nightly flags; the stable toolchain accepts them this way.
export RUSTC_BOOTSTRAP=1
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  case "$t" in
    btf_read|dedup) find "$corpus/expected/fixtures" -name '*.btf' -size -64k -exec cp -n {} "corpus/$t/" \; ;;
    # The standalone fixtures before dedup (copies to map), each after a
    # chunking byte.
    dedup_chunked)
      for f in $(find "$corpus/expected-prededup/fixtures" -name '*.btf' -size -64k); do
        [ -e "corpus/$t/$(basename "$f")" ] || { printf '\002'; cat "$f"; } > "corpus/$t/$(basename "$f")"
      done ;;
    # One input per CU: the fixtures' DWARF sections as the encoder sees them
    # (relocated), in the target's layout (src/dwarf/fuzz_input.rs).
    dwarf_cu)
      [ -n "$(ls -A "corpus/$t")" ] || (cd .. && cargo run -q --release --example fuzz_seed -- "fuzz/corpus/$t" \
        $(find "$corpus/fixtures/bin" -name '*.o' -size -256k)) ;;
    *) find "$corpus/fixtures/bin" -name '*.o' -size -256k -exec cp -n {} "corpus/$t/" \; ;;
  esac
  echo "== $t for ${secs}s"
  # detect_leaks=0: LeakSanitizer reports the 64 bytes glibc keeps per thread for
  # thread-local destructors (__cxa_thread_atexit_impl, rayon workers), not ours.
  cargo fuzz run "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -detect_leaks=0
done
