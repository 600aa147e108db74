#!/usr/bin/env bash
# On the build machine (LLVM, no GPU): compiles every example and test graph
# into .gpu/ptx/ and unpacks xxHash into .deps/ for the GPU machine, which
# has neither LLVM nor a package registry. Then the device runs
# tests/gpu/device_run.sh with .gpu and .deps carried.
set -euo pipefail
cd "$(dirname "$0")/../.."
FUSEC=${FUSEC:-build/tools/fusec}
rm -rf .gpu && mkdir -p .gpu/ptx
# variant DIR FLAGS FILE...: each FILE compiled with FLAGS into .gpu/DIR,
# named as .gpu/ptx's (what device_run.sh check reads back); a file fusec
# refuses is reported and skipped.
variant() {
  local dir=$1 flags=$2 f
  shift 2
  mkdir -p ".gpu/$dir"
  for f in "$@"; do
    [ -f "$f" ] || continue
    # shellcheck disable=SC2086 # FLAGS is a list of options
    "$FUSEC" "$f" $flags -o ".gpu/$dir/$(dirname "$f" | tr / _)__$(basename "$f" .fg).ptx" 2>.gpu/err.txt ||
      echo "skip $f ($dir): $(head -1 .gpu/err.txt)"
  done
}
# row_column.fg: the row + column form at small and odd shapes.
variant ptx "" examples/*.fg tests/graphs/*.fg bench/*.fg tests/golden/opt/row_column.fg \
  tests/golden/opt/rowcol_pipeline.fg tests/golden/opt/rowcol_deferred.fg
# The same graphs without bookending (views as index arithmetic, results
# copied): checked too, so the path stays correct.
variant ptx-nobookend "--disable-pass=bookend" examples/*.fg tests/graphs/views.fg tests/graphs/strided.fg
rm -f .gpu/err.txt
# issue 19 (wgmma): the attention graphs again for sm_90a, where head dims
# 64 and 128 take the wgmma forward (checked by device_run.sh check, with
# misaligned pointers too), and the forward benchmark graphs for both
# targets (device_run.sh wgmmabench: the same run times both kernels).
mkdir -p .gpu/bench-sm90a
FWD="tests/graphs/attention_wgmma.fg tests/graphs/attention_fwd.fg tests/graphs/attention_overlap.fg"
# The backward too (wgmmabwd): attention_bwd_wgmma.fg and attention_bwd.fg
# take the wgmma dq and dk, dv kernels at sm_90a (the default since run Z9);
# attention_bwd_zip.fg and backend_layouts.fg write the packed dQKV through
# strides (zip-store) from them.
# shellcheck disable=SC2086 # FWD is a list of files
variant ptx-sm90a "--arch sm_90a" $FWD tests/graphs/attention_bwd_wgmma.fg tests/graphs/attention_bwd.fg \
  tests/graphs/attention_bwd_zip.fg tests/graphs/backend_layouts.fg
"$FUSEC" bench/suite/attention.fg --arch sm_90a -o .gpu/bench-sm90a/attention_sm90a.ptx
"$FUSEC" bench/suite/attention.fg -o .gpu/bench-sm90a/attention_sm90.ptx
# wgmma2: the software-pipelined loop (knob ATTN_OVERLAP=1, 3 stages)
# checked like the default (.gpu/ptx-sm90a-overlap/, misaligned too: that
# variant keeps the plain loop at 3 stages), and the bench variants timed
# in the same wgmmabench run: attention_sm90a-<name>.ptx, name = the knobs.
# shellcheck disable=SC2086
variant ptx-sm90a-overlap "--arch sm_90a --knob ATTN_OVERLAP=1" $FWD
"$FUSEC" bench/suite/attention.fg --arch sm_90a --knob ATTN_OVERLAP=1 -o .gpu/bench-sm90a/attention_sm90a-overlap.ptx
"$FUSEC" bench/suite/attention.fg --arch sm_90a --knob ATTN_OVERLAP=0 -o .gpu/bench-sm90a/attention_sm90a-nooverlap.ptx
# attnpp: the causal LPT work order (knob ATTN_LPT=4; at sm_90a with the
# overlapped loop, and at sm_90 on the mma.sync kernel) checked like the
# default (misaligned too: the plain variant keeps its loop, the LPT order
# applies to both; 4 pairs a section, so that graphs of 6 or 10 pairs end
# in a partial section), and the bench variant timed in the same
# wgmmabench run.
# shellcheck disable=SC2086
variant ptx-sm90a-lpt "--arch sm_90a --knob ATTN_LPT=4 --knob ATTN_OVERLAP=1" $FWD
variant ptx-lpt "--knob ATTN_LPT=4" tests/graphs/attention_fwd.fg
"$FUSEC" bench/suite/attention.fg --arch sm_90a --knob ATTN_LPT=1 -o .gpu/bench-sm90a/attention_sm90a-lpt.ptx
# attnpp (kept on branch attnws2, removed on main): pingpong between the
# two warpgroups (knob ATTN_PINGPONG 1 and 2: named barriers in the
# overlapped loop, which they turn on; at D 64 they also make the CTA two
# warpgroups, as ATTN_WS does) checked like the default (misaligned too),
# and the bench variants timed in the same wgmmabench run.
for pp in 1 2; do
  # shellcheck disable=SC2086
  variant ptx-sm90a-pingpong$pp "--arch sm_90a --knob ATTN_PINGPONG=$pp" $FWD
  "$FUSEC" bench/suite/attention.fg --arch sm_90a --knob ATTN_PINGPONG=$pp -o .gpu/bench-sm90a/attention_sm90a-pingpong$pp.ptx
done
# attnws: the warp-specialized forward (knob ATTN_WS 1 and 2: producer
# warpgroup, mbarrier ring, setmaxnreg; 2 with the consumers' pingpong),
# checked like the default (misaligned too: the producer's plain loads),
# and the bench variants timed in the same wgmmabench run.
for ws in 1 2; do
  variant ptx-sm90a-ws$ws "--arch sm_90a --knob ATTN_WS=$ws" tests/graphs/attention_ws.fg \
    tests/graphs/attention_wgmma.fg tests/graphs/attention_overlap.fg
  "$FUSEC" bench/suite/attention.fg --arch sm_90a --knob ATTN_WS=$ws -o .gpu/bench-sm90a/attention_sm90a-ws$ws.ptx
done
# The causal backward's LPT order in sections (knob ATTN_BWD_LPT=2, not the
# default: to be measured), checked like the default (misaligned too: the
# ptx-sm90a-bwd* pattern) and timed in the same wgmmabench run.
variant ptx-sm90a-bwdlpt2 "--arch sm_90a --knob ATTN_BWD_LPT=2" tests/graphs/attention_bwd_wgmma.fg \
  tests/graphs/attention_bwd.fg tests/graphs/attention_bwd_zip.fg
"$FUSEC" bench/suite/attention.fg --arch sm_90a --knob ATTN_BWD_LPT=2 -o .gpu/bench-sm90a/attention_sm90a-bwdlpt2.ptx
rm -f .gpu/err.txt
# Timelines of the row + column kernels at the issue shapes (knob TRACE,
# for tests/gpu/device_run.sh trace; docs/architecture.md).
# tests/graphs/l2_reverse.fg with every kernel ascending (knob L2_REVERSE=0),
# for tests/gpu/device_run.sh l2order: the outputs must equal the default's
# bit for bit.
mkdir -p .gpu/l2
"$FUSEC" tests/graphs/l2_reverse.fg --knob L2_REVERSE=0 -o .gpu/l2/ascending.ptx
mkdir -p .gpu/trace
"$FUSEC" examples/fp8_amax.fg --graph amax_rowcol --knob TRACE=1 -o .gpu/trace/amax_rowcol.ptx
for g in rmsnorm_bwd_4k layernorm_bwd_4k; do
  "$FUSEC" bench/norm_bwd.fg --graph "$g" --knob TRACE=1 -o ".gpu/trace/$g.ptx"
done
# Random graphs of the differential tester (tools/fgdiff.c), each with its
# artifact, for tests/gpu/device_run.sh difftest (FG_DIFFTEST_COUNT graphs),
# then FG_DIFFTEST_SYM_COUNT over a symbolic leading size (fgdiff
# --symbolic; a finding of either is in its summary and does not stop this).
FGDIFF=${FGDIFF:-$(dirname "$FUSEC")/fgdiff}
if [ -x "$FGDIFF" ]; then
  "$FGDIFF" --seed "${FG_DIFFTEST_SEED:-200001}" --count "${FG_DIFFTEST_COUNT:-600}" --out .gpu/difftest | tail -2 || true
  "$FGDIFF" --symbolic --seed "${FG_DIFFTEST_SYM_SEED:-200001}" --count "${FG_DIFFTEST_SYM_COUNT:-300}" \
    --out .gpu/difftest-sym | tail -3 || true
fi
cat examples/*.fg >.gpu/all_examples.fg
"$FUSEC" .gpu/all_examples.fg -o .gpu/all_examples.ptx
# First loads, PTX JIT against SASS (tests/gpu/device_run.sh coldload):
# every example graph alone and all of them in one artifact, each as PTX
# only (.gpu/coldload/ptx) and with SASS for FG_COLDLOAD_ARCH (sm_90, the
# H100's; fusec --cubin) beside its PTX (.gpu/coldload/sass). The SASS is
# made here: the GPU machine may have no ptxas.
mkdir -p .gpu/coldload/ptx .gpu/coldload/sass
coldload_pair() { # SRC NAME [--graph G]
  local src=$1 name=$2
  shift 2
  "$FUSEC" "$src" "$@" -o ".gpu/coldload/ptx/$name.ptx" &&
    "$FUSEC" "$src" "$@" --cubin "${FG_COLDLOAD_ARCH:-sm_90}" -o ".gpu/coldload/sass/$name.ptx" ||
    { echo "coldload: skipped $name (no ptxas here?)"; rm -f ".gpu/coldload/ptx/$name.ptx"; }
}
for f in examples/*.fg; do
  for g in $(sed -n 's/^graph \([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' "$f"); do
    coldload_pair "$f" "$(basename "$f" .fg)__$g" --graph "$g"
  done
done
coldload_pair .gpu/all_examples.fg all_examples
if [ ! -d .deps/root ]; then
  mkdir -p .deps && (cd .deps && apt-get download libxxhash0 libxxhash-dev >/dev/null 2>&1 &&
    for d in *.deb; do dpkg -x "$d" root; done)
fi
ls .gpu/ptx | wc -l
