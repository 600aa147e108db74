#!/usr/bin/env bash
# Every example, test graph and benchmark graph (and the row + column
# golden graphs, whose shared arrays must fit) compiles with fusec, and
# ptxas accepts its PTX for sm_90 (skipped, saying so, without ptxas).
# Graphs the code generator rejects on purpose (symbolic sizes it cannot take yet) must fail
# with a line:col error, not crash.
#   ptxas_all.sh FUSEC SOURCE_DIR
set -u
FUSEC=$1
cd "$2"
PTXAS=${PTXAS:-}
case $PTXAS in *NOTFOUND) PTXAS= ;; esac
[ -n "$PTXAS" ] || PTXAS=$(command -v ptxas || true)
[ -n "$PTXAS" ] || [ ! -x /usr/local/cuda/bin/ptxas ] || PTXAS=/usr/local/cuda/bin/ptxas
if [ -z "$PTXAS" ]; then echo "skipped: ptxas not found"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
for f in examples/*.fg tests/graphs/*.fg bench/*.fg tests/golden/opt/row_column.fg tests/golden/opt/rowcol_pipeline.fg tests/golden/opt/rowcol_deferred.fg; do
  out=$tmp/$(basename "$f" .fg).ptx
  if "$FUSEC" "$f" -o "$out" 2>"$tmp/err"; then
    if "$PTXAS" -arch=sm_90 "$out" -o "$tmp/x.cubin" 2>"$tmp/ptxas.err"; then
      pass=$((pass + 1))
    else
      fail=$((fail + 1)); echo "FAIL ptxas $f:"; head -5 "$tmp/ptxas.err"
    fi
  else
    rc=$?
    if [ "$rc" = 1 ] && grep -q "symbolic" "$tmp/err" && grep -qE '^[^:]+:[0-9]+:[0-9]+: error:' "$tmp/err"; then
      pass=$((pass + 1))   # rejected on purpose, with a located error
    else
      fail=$((fail + 1)); echo "FAIL fusec $f (exit $rc):"; head -5 "$tmp/err"
    fi
  fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
