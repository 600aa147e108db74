#!/usr/bin/env bash
# Regenerates the --emit plan CHECK blocks of golden tests from the current
# output, as LLVM's update_test_checks.py does for its tests:
#
#   tests/update_golden.sh [--fusec PATH] FILE.fg...
#
# A file opts in with a RUN line that pipes `--emit plan` into FileCheck
# with the prefix PLAN, and a block the script owns:
#
#   # RUN: %fusec %s --emit plan -o - | %FileCheck %s --check-prefix=PLAN
#   # PLAN-BEGIN (tests/update_golden.sh writes this block: rerun it, do not edit)
#   # PLAN: graph g: 1 kernel, 0 temps
#   # PLAN-NEXT:   param p0 x f32[4] strides [1]
#   # PLAN-END
#
# Everything outside the block (hand-written checks of what a person
# asserts, such as CHECK-NOT lines) is left as it is. A file without the
# block gets one after its last RUN line. Running the script twice changes
# nothing the second time.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
FUSEC=${FUSEC:-$here/build/tools/fusec}
if [ "${1:-}" = --fusec ]; then FUSEC=$2; shift 2; fi
[ $# -gt 0 ] || { echo "usage: tests/update_golden.sh [--fusec PATH] FILE.fg..." >&2; exit 2; }
status=0
for f in "$@"; do
  run=$(sed -n 's/^# RUN: \(.*--emit plan.*\)| *%FileCheck %s --check-prefix=PLAN *$/\1/p' "$f" | head -1)
  if [ -z "$run" ]; then
    echo "update_golden: $f: no RUN line '... --emit plan ... | %FileCheck %s --check-prefix=PLAN'" >&2
    status=1
    continue
  fi
  cmd=${run//%fusec/$FUSEC}
  cmd=${cmd//%s/$f}
  if ! out=$(bash -o pipefail -c "$cmd"); then
    echo "update_golden: $f: '$cmd' failed" >&2
    status=1
    continue
  fi
  block=$(mktemp)
  {
    echo "# PLAN-BEGIN (tests/update_golden.sh writes this block: rerun it, do not edit)"
    first=1
    while IFS= read -r line; do
      if [ -z "$line" ]; then echo "# PLAN-EMPTY:"; continue; fi
      # FileCheck's own syntax in the text: {{ and [[ start patterns
      line=${line//\{\{/\{\{\\\{\\\{\}\}}
      line=${line//\[\[/\{\{\\\[\\\[\}\}}
      if [ $first = 1 ]; then echo "# PLAN: $line"; first=0; else echo "# PLAN-NEXT: $line"; fi
    done <<<"$out"
    echo "# PLAN-END"
  } >"$block"
  new=$(mktemp)
  if grep -q '^# PLAN-BEGIN' "$f"; then
    awk -v blk="$block" '
      /^# PLAN-BEGIN/ { while ((getline l < blk) > 0) print l; skip = 1; next }
      skip && /^# PLAN-END/ { skip = 0; next }
      !skip { print }' "$f" >"$new"
  else
    last=$(grep -n '^# RUN:' "$f" | tail -1 | cut -d: -f1)
    { head -n "$last" "$f"; cat "$block"; tail -n +"$((last + 1))" "$f"; } >"$new"
  fi
  if cmp -s "$new" "$f"; then rm -f "$new"; else mv "$new" "$f"; echo "update_golden: updated $f"; fi
  rm -f "$block"
done
exit $status
