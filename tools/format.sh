#!/usr/bin/env bash
# Formats every tracked C file with clang-format-19 (.clang-format: LLVM
# style, 100 columns), or with --check only reports the ones that are not
# formatted (build.sh test runs that, so CI fails on unformatted code).
#   tools/format.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
CF=${CLANG_FORMAT:-clang-format-19}
command -v "$CF" >/dev/null || { echo "format.sh: $CF not found (apt-get install clang-format-19)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.c' '*.h')
if [ "${1:-}" = --check ]; then
  bad=()
  for f in "${files[@]}"; do "$CF" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f"); done
  if [ ${#bad[@]} -gt 0 ]; then
    echo "format.sh: not clang-formatted (run tools/format.sh): ${bad[*]}" >&2
    exit 1
  fi
  echo "format.sh: ${#files[@]} files formatted"
else
  "$CF" -i "${files[@]}"
fi
