#!/usr/bin/env bash
# On the build machine (LLVM, no GPU): compiles every example and test graph
# into .gpu/ptx/ and unpacks xxHash into .deps/ for the GPU machine, which
# has neither LLVM nor a package registry. Then the device runs
# tests/gpu/device_run.sh with .gpu and .deps carried.
set -euo pipefail
cd "$(dirname "$0")/../.."
FUSEC=${FUSEC:-build/tools/fusec}
rm -rf .gpu && mkdir -p .gpu/ptx
# row_column.fg: the row + column form at small and odd shapes.
for f in examples/*.fg tests/graphs/*.fg bench/*.fg tests/golden/opt/row_column.fg tests/golden/opt/rowcol_pipeline.fg tests/golden/opt/rowcol_deferred.fg; do
  [ -f "$f" ] || continue
  out=.gpu/ptx/$(dirname "$f" | tr / _)__$(basename "$f" .fg).ptx
  if ! "$FUSEC" "$f" -o "$out" 2>.gpu/err.txt; then
    echo "skip $f: $(head -1 .gpu/err.txt)"
  fi
done
# The same graphs without bookending (views as index arithmetic, results
# copied): checked too, so the path stays correct.
mkdir -p .gpu/ptx-nobookend
for f in examples/*.fg tests/graphs/views.fg tests/graphs/strided.fg; do
  out=.gpu/ptx-nobookend/$(dirname "$f" | tr / _)__$(basename "$f" .fg).ptx
  "$FUSEC" "$f" --disable-pass=bookend -o "$out" 2>.gpu/err.txt || echo "skip $f (no bookend): $(head -1 .gpu/err.txt)"
done
rm -f .gpu/err.txt
# issue 19 (wgmma): the attention graphs again for sm_90a, where head dims
# 64 and 128 take the wgmma forward (checked by device_run.sh check, with
# misaligned pointers too), and the forward benchmark graphs for both
# targets (device_run.sh wgmmabench: the same run times both kernels).
mkdir -p .gpu/ptx-sm90a .gpu/bench-sm90a
# The backward too (wgmmabwd): attention_bwd_wgmma.fg and attention_bwd.fg
# take the wgmma dq and dk, dv kernels at sm_90a (the default since run Z9);
# attention_bwd_zip.fg and backend_layouts.fg write the packed dQKV through
# strides (zip-store) from them.
for f in tests/graphs/attention_wgmma.fg tests/graphs/attention_fwd.fg tests/graphs/attention_bwd_wgmma.fg tests/graphs/attention_bwd.fg tests/graphs/attention_bwd_zip.fg tests/graphs/backend_layouts.fg tests/graphs/attention_overlap.fg; do
  out=.gpu/ptx-sm90a/$(dirname "$f" | tr / _)__$(basename "$f" .fg).ptx
  "$FUSEC" "$f" --arch sm_90a -o "$out" 2>.gpu/err.txt ||
    echo "skip $f (sm_90a): $(head -1 .gpu/err.txt)"
done
"$FUSEC" bench/suite/attention.fg --arch sm_90a -o .gpu/bench-sm90a/attention_sm90a.ptx
"$FUSEC" bench/suite/attention.fg -o .gpu/bench-sm90a/attention_sm90.ptx
# wgmma2: the software-pipelined loop (knob ATTN_OVERLAP=1, 3 stages)
# checked like the default (.gpu/ptx-sm90a-overlap/, misaligned too: that
# variant keeps the plain loop at 3 stages), and the bench variants timed
# in the same wgmmabench run: attention_sm90a-<name>.ptx, name = the knobs.
mkdir -p .gpu/ptx-sm90a-overlap
for f in tests/graphs/attention_wgmma.fg tests/graphs/attention_fwd.fg tests/graphs/attention_overlap.fg; do
  out=.gpu/ptx-sm90a-overlap/$(dirname "$f" | tr / _)__$(basename "$f" .fg).ptx
  "$FUSEC" "$f" --arch sm_90a --knob ATTN_OVERLAP=1 -o "$out" 2>.gpu/err.txt || echo "skip $f (sm_90a overlap): $(head -1 .gpu/err.txt)"
done
"$FUSEC" bench/suite/attention.fg --arch sm_90a --knob ATTN_OVERLAP=1 -o .gpu/bench-sm90a/attention_sm90a-overlap.ptx
"$FUSEC" bench/suite/attention.fg --arch sm_90a --knob ATTN_OVERLAP=0 -o .gpu/bench-sm90a/attention_sm90a-nooverlap.ptx
# attnpp: the causal LPT work order (knob ATTN_LPT=4; at sm_90a with the
# overlapped loop, and at sm_90 on the mma.sync kernel) checked like the
# default (misaligned too: the plain variant keeps its loop, the LPT order
# applies to both; 4 pairs a section, so that graphs of 6 or 10 pairs end
# in a partial section), and the bench variant timed in the same
# wgmmabench run.
mkdir -p .gpu/ptx-sm90a-lpt .gpu/ptx-lpt
for f in tests/graphs/attention_wgmma.fg tests/graphs/attention_fwd.fg tests/graphs/attention_overlap.fg; do
  out=.gpu/ptx-sm90a-lpt/$(dirname "$f" | tr / _)__$(basename "$f" .fg).ptx
  "$FUSEC" "$f" --arch sm_90a --knob ATTN_LPT=4 --knob ATTN_OVERLAP=1 -o "$out" 2>.gpu/err.txt || echo "skip $f (sm_90a lpt): $(head -1 .gpu/err.txt)"
done
"$FUSEC" tests/graphs/attention_fwd.fg --knob ATTN_LPT=4 -o .gpu/ptx-lpt/tests_graphs__attention_fwd.ptx
"$FUSEC" bench/suite/attention.fg --arch sm_90a --knob ATTN_LPT=1 -o .gpu/bench-sm90a/attention_sm90a-lpt.ptx
# attnpp (kept on branch attnws2, removed on main): pingpong between the
# two warpgroups (knob ATTN_PINGPONG 1 and 2: named barriers in the
# overlapped loop, which they turn on; at D 64 they also make the CTA two
# warpgroups, as ATTN_WS does) checked like the default (misaligned too),
# and the bench variants timed in the same wgmmabench run.
for pp in 1 2; do
  mkdir -p .gpu/ptx-sm90a-pingpong$pp
  for f in tests/graphs/attention_wgmma.fg tests/graphs/attention_fwd.fg tests/graphs/attention_overlap.fg; do
    out=.gpu/ptx-sm90a-pingpong$pp/$(dirname "$f" | tr / _)__$(basename "$f" .fg).ptx
    "$FUSEC" "$f" --arch sm_90a --knob ATTN_PINGPONG=$pp -o "$out" 2>.gpu/err.txt || echo "skip $f (sm_90a pingpong $pp): $(head -1 .gpu/err.txt)"
  done
  "$FUSEC" bench/suite/attention.fg --arch sm_90a --knob ATTN_PINGPONG=$pp -o .gpu/bench-sm90a/attention_sm90a-pingpong$pp.ptx
done
# attnws: the warp-specialized forward (knob ATTN_WS 1 and 2: producer
# warpgroup, mbarrier ring, setmaxnreg; 2 with the consumers' pingpong),
# checked like the default (misaligned too: the producer's plain loads),
# and the bench variants timed in the same wgmmabench run.
for ws in 1 2; do
  mkdir -p .gpu/ptx-sm90a-ws$ws
  for f in tests/graphs/attention_ws.fg tests/graphs/attention_wgmma.fg tests/graphs/attention_overlap.fg; do
    out=.gpu/ptx-sm90a-ws$ws/$(dirname "$f" | tr / _)__$(basename "$f" .fg).ptx
    "$FUSEC" "$f" --arch sm_90a --knob ATTN_WS=$ws -o "$out" 2>.gpu/err.txt || echo "skip $f (sm_90a ws $ws): $(head -1 .gpu/err.txt)"
  done
  "$FUSEC" bench/suite/attention.fg --arch sm_90a --knob ATTN_WS=$ws -o .gpu/bench-sm90a/attention_sm90a-ws$ws.ptx
done
# The causal backward's LPT order in sections (knob ATTN_BWD_LPT=2, not the
# default: to be measured), checked like the default (misaligned too: the
# ptx-sm90a-bwd* pattern) and timed in the same wgmmabench run.
mkdir -p .gpu/ptx-sm90a-bwdlpt2
for f in tests/graphs/attention_bwd_wgmma.fg tests/graphs/attention_bwd.fg tests/graphs/attention_bwd_zip.fg; do
  out=.gpu/ptx-sm90a-bwdlpt2/$(dirname "$f" | tr / _)__$(basename "$f" .fg).ptx
  "$FUSEC" "$f" --arch sm_90a --knob ATTN_BWD_LPT=2 -o "$out" 2>.gpu/err.txt || echo "skip $f (sm_90a bwd lpt 2): $(head -1 .gpu/err.txt)"
done
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
