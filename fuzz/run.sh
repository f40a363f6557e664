#!/usr/bin/env bash
# Runs every fuzz target (or those named) for SECONDS each (default 60),
# seeded from the corpus, the repository's fixtures and, for the ELF
# targets, every section of those fixtures cut short, moved and garbled
# (tests/bad_input/sections.rs writes them). A crash stops the run with
# exit 1 after printing the target, the artifact's path and its bytes in
# base64; turn each into a regression test under tests/fuzz-regressions/.
# Usage: fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"; shift || true
targets=("$@")
# cargo-fuzz needs nightly flags; the stable toolchain accepts them this way.
export RUSTC_BOOTSTRAP=1
# (a missing cargo-fuzz must fail the run, not list no targets and pass)
command -v cargo-fuzz >/dev/null || { echo "fuzz/run.sh: cargo-fuzz is not installed (cargo install --locked cargo-fuzz)" >&2; exit 2; }
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo fuzz list)
[ ${#targets[@]} -gt 0 ] || { echo "fuzz/run.sh: cargo fuzz list named no target" >&2; exit 2; }
corpus="${BTFKIT_CORPUS:-$(cd ../.. && pwd)/shared/corpus}"
# (and the next reference's optimised, clang 19 and hand-made gcc 16-style objects)
fixtures=(../tests/fixtures/*.o ../tests/fixtures/*.exe ../tests/next/bin/*.o)
if [ -d "$corpus/fixtures/bin" ]; then
  mapfile -t -O ${#fixtures[@]} fixtures < <(find "$corpus/fixtures/bin" -name '*.o' -size -256k)
fi
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  case "$t" in
    btf_read|dedup)
      cp -n ../tests/fixtures/btf-2026/*.btf "corpus/$t/"
      [ -d "$corpus/expected/fixtures" ] && find "$corpus/expected/fixtures" -name '*.btf' -size -64k -exec cp -n {} "corpus/$t/" \; ;;
    # The standalone fixtures before dedup (copies to map), each after a
    # chunking byte.
    dedup_chunked)
      [ -d "$corpus/expected-prededup/fixtures" ] && for f in $(find "$corpus/expected-prededup/fixtures" -name '*.btf' -size -64k); do
        [ -e "corpus/$t/$(basename "$f")" ] || { printf '\002'; cat "$f"; } > "corpus/$t/$(basename "$f")"
      done ;;
    # One input per CU: the fixtures' DWARF sections as the encoder sees them
    # (relocated), in the target's layout (src/testing/fuzz_input.rs).
    dwarf_cu)
      [ -n "$(ls -A "corpus/$t")" ] || (cd .. && cargo run -q --profile test --example fuzz_seed -- "fuzz/corpus/$t" "${fixtures[@]#../}") ;;
    elf_open|elf_encode)
      cp -n "${fixtures[@]}" "corpus/$t/"
      # A program dwz compressed: partial units and their imports.
      prog="$corpus/fixtures/bin/prog.gcc-O2.exe"
      if command -v dwz >/dev/null && [ -f "$prog" ] && [ ! -e "corpus/$t/dwz-prog.exe" ]; then
        cp "$prog" "corpus/$t/dwz-prog.exe" && dwz "corpus/$t/dwz-prog.exe" || rm -f "corpus/$t/dwz-prog.exe"
      fi
      if ! ls "corpus/$t" | grep -q '^section-damage-'; then
        (cd .. && BTFKIT_DAMAGE_SEEDS="$PWD/fuzz/corpus/$t" cargo test -q --test bad_input \
          sections::every_section_of_every_fixture >/dev/null)
      fi ;;
    # The libbpf-tools objects, whole.
    core_object) cp -n ../tests/core/objects/*.bpf.o ../tests/core/objects/bpfeb/*.bpf.o "corpus/$t/" 2>/dev/null || true
      for f in ../tests/core/objects/bpfeb/*.bpf.o; do cp -n "$f" "corpus/$t/be-$(basename "$f")"; done ;;
    *) cp -n "${fixtures[@]}" "corpus/$t/" ;;
  esac
  echo "== $t for ${secs}s ($(ls "corpus/$t" | wc -l) inputs)"
  # detect_leaks=0: LeakSanitizer reports the 64 bytes glibc keeps per thread for
  # thread-local destructors (__cxa_thread_atexit_impl, rayon workers), not ours.
  if ! cargo fuzz run "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -detect_leaks=0; then
    echo "fuzz: $t FAILED; the reproducing input(s):"
    for a in artifacts/"$t"/*; do
      [ -f "$a" ] || continue
      echo "fuzz: $t: fuzz/$a ($(stat -c %s "$a") bytes), base64:"
      base64 -w 0 "$a"; echo
    done
    exit 1
  fi
done
