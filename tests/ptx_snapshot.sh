#!/usr/bin/env bash
# Writes the output of fusec (PTX with its plan) for every graph of the
# repository, under a set of knobs and arches, into DIR, one file each.
# Two snapshots taken before and after a behaviour-preserving change must be
# byte-identical:  diff -r BEFORE AFTER
#   ptx_snapshot.sh FUSEC DIR [SOURCE_DIR]
set -u
FUSEC=$(realpath "$1")
OUT=$(realpath -m "$2")
cd "${3:-$(dirname "$0")/..}"
mkdir -p "$OUT"
variants=("default:" "sm80:--arch sm_80" "O0:-O0"
  "defer0:--knob ROWCOL_DEFER=0" "pack0:--knob ROWCOL_PACK=0" "early0:--knob ROWCOL_EARLY=0"
  "pipe1:--knob ROWCOL_PIPE=1" "rows2:--knob ROWCOL_ROWS=2" "cl1:--knob CLUSTER=1" "cl2:--knob CLUSTER=2"
  "trace:--knob TRACE=1" "nobookend:--disable-pass=bookend")
n=0
for f in examples/*.fg tests/graphs/*.fg bench/*.fg tests/golden/opt/*.fg; do
  base=$(echo "$f" | tr '/' '_')
  for v in "${variants[@]}"; do
    name=${v%%:*}; flags=${v#*:}
    # shellcheck disable=SC2086
    "$FUSEC" "$f" $flags -o "$OUT/$base.$name.ptx" >"$OUT/$base.$name.log" 2>&1
    echo "exit $?" >>"$OUT/$base.$name.log"
    # plans too, so that a change in what is printed shows up
    [ "$name" = default ] && { "$FUSEC" "$f" --emit plan -o - >"$OUT/$base.plan" 2>&1; echo "exit $?" >>"$OUT/$base.plan"; }
    n=$((n + 1))
  done
done
# The attention graphs again at sm_90a, where they take the wgmma kernels
# (forward; the backward with ATTN_BWD_WGMMA=1; the overlapped forward
# loop with ATTN_OVERLAP=1, with one and two warpgroups), as
# tests/gpu/prepare.sh compiles them for the GPU check.
sm90a=("sm90a:--arch sm_90a" "sm90a-bwd:--arch sm_90a --knob ATTN_BWD_WGMMA=1"
  "sm90a-overlap:--arch sm_90a --knob ATTN_OVERLAP=1"
  "sm90a-overlap-wg1:--arch sm_90a --knob ATTN_OVERLAP=1 --knob ATTN_WG=1"
  "sm90a-stages3:--arch sm_90a --knob ATTN_STAGES=3")
for f in tests/graphs/attention_wgmma.fg tests/graphs/attention_fwd.fg tests/graphs/attention_bwd_wgmma.fg \
  tests/graphs/attention_bwd.fg tests/graphs/attention_overlap.fg bench/suite/attention.fg; do
  base=$(echo "$f" | tr '/' '_')
  for v in "${sm90a[@]}"; do
    name=${v%%:*}; flags=${v#*:}
    # shellcheck disable=SC2086
    "$FUSEC" "$f" $flags -o "$OUT/$base.$name.ptx" >"$OUT/$base.$name.log" 2>&1
    echo "exit $?" >>"$OUT/$base.$name.log"
    n=$((n + 1))
  done
done
echo "ptx_snapshot: $n artifacts in $OUT"
