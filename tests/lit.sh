#!/usr/bin/env bash
# A tiny lit: runs the "# RUN:" lines of one test file.
#
#   bash tests/lit.sh TEST_FILE
#
# A RUN line ending in '\' continues on the next RUN line. Substitutions:
#   %s          the test file          %t   a fresh temp path for this test
#   %S          the test's directory   %fusec, %fgrun, %FileCheck: $FUSEC,
#   %not        inverts the exit status: fails on 0 and on a crash (>= 128);
#               "%not --exit=N cmd" requires exactly status N
# Each line runs with `bash -o pipefail -c`; the first failing line fails the
# test, printing the command and its output. "# REQUIRES: ptxas" skips the
# test (exit 77, ctest's SKIP_RETURN_CODE) when $PTXAS is empty.
set -u

test_file=${1:?usage: lit.sh TEST_FILE}
[[ -r $test_file ]] || { echo "lit.sh: cannot read '$test_file'" >&2; exit 2; }
test_file=$(cd "$(dirname "$test_file")" && pwd)/$(basename "$test_file")

# ---- REQUIRES ----
while IFS= read -r feat; do
  for f in ${feat//,/ }; do
    case $f in
      ptxas) [[ -n ${PTXAS:-} ]] || { echo "skipped: requires ptxas (PTXAS is empty)"; exit 77; } ;;
      *) echo "lit.sh: unknown REQUIRES feature '$f' in $test_file" >&2; exit 2 ;;
    esac
  done
done < <(sed -n 's/^.*# REQUIRES:[[:space:]]*//p' "$test_file")

# ---- collect RUN lines, joining continuations ----
cmds=()
cur=""
while IFS= read -r line; do
  if [[ $line == *'\' ]]; then
    cur+="${line%\\} "
  else
    cmds+=("$cur$line")
    cur=""
  fi
done < <(sed -n 's/^.*# RUN:[[:space:]]*//p' "$test_file")
[[ -n $cur ]] && { echo "lit.sh: last RUN line ends in '\\' in $test_file" >&2; exit 2; }
(( ${#cmds[@]} )) || { echo "lit.sh: no RUN lines in $test_file" >&2; exit 2; }

tmpdir=$(mktemp -d "${TMPDIR:-/tmp}/lit.XXXXXX") || exit 2
trap 'rm -rf "$tmpdir"' EXIT
tmp=$tmpdir/$(basename "$test_file").tmp

# %not as a shell function available to every RUN line.
prelude='lit_not() {
  local want=""
  if [[ ${1:-} == --exit=* ]]; then want=${1#--exit=}; shift; fi
  "$@"
  local rc=$?
  if [[ -n $want ]]; then
    [[ $rc == "$want" ]] && return 0
    echo "lit.sh: %not: expected exit status $want, got $rc" >&2
    return 1
  fi
  (( rc != 0 && rc < 128 )) && return 0
  if (( rc == 0 )); then echo "lit.sh: %not: command succeeded" >&2
  else echo "lit.sh: %not: command crashed (exit status $rc)" >&2; fi
  return 1
}
'

q() { printf '%q' "$1"; }
n=0
for c in "${cmds[@]}"; do
  n=$((n + 1))
  # longest keys first: %fusec before %s, %t before nothing else starting so
  c=${c//%fusec/$(q "${FUSEC:-fusec}")}
  c=${c//%fgrun/$(q "${FGRUN:-fgrun}")}
  c=${c//%FileCheck/$(q "${FILECHECK:-FileCheck}")}
  c=${c//%not/lit_not}
  c=${c//%S/$(q "$(dirname "$test_file")")}
  c=${c//%s/$(q "$test_file")}
  c=${c//%t/$(q "$tmp")}
  out=$(cd "$tmpdir" && bash -o pipefail -c "$prelude$c" 2>&1)
  rc=$?
  if (( rc != 0 )); then
    echo "FAIL: $test_file (RUN line $n, exit status $rc)"
    echo "command: $c"
    echo "--- output ---"
    printf '%s\n' "$out"
    exit 1
  fi
done
echo "PASS: $test_file (${#cmds[@]} RUN lines)"
exit 0
