#!/usr/bin/env bash
# Runs the fuzz_parse harness for a while on a fresh corpus seeded from the
# examples and the golden tests (libFuzzer writes new inputs to the first
# corpus dir only). Exit 77 (skip) when the harness was not built.
#   run_fuzz.sh FUZZER SOURCE_DIR SECONDS
set -u
fuzzer=$1 src=$2 secs=${3:-20}
[[ -x $fuzzer ]] || { echo "skipped: $fuzzer not built (needs clang with -fsanitize=fuzzer)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz_parse.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus"
seeds=()
for d in examples tests/graphs tests/golden/frontend tests/golden/frontend/errors; do
  [[ -d $src/$d ]] && seeds+=("$src/$d")
done
cd "$work" && "$fuzzer" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -dict="$src/tests/fuzz/fg.dict" -print_final_stats=1 corpus "${seeds[@]}"
