#!/usr/bin/env bash
# On the GPU machine (python3 with torch, triton, matplotlib; no LLVM): builds
# libfgload alone (cmake, FUSEC_LOADER_ONLY, xxHash from the carried
# .deps/root) and runs bench/bench.py, all within BENCH_BUDGET_S seconds
# (default 500) from the start of this script. Needs .gpu/bench from
# bench/prepare.sh (build machine). Outputs in $OUT (default /tmp/fgbench):
# bench.json, bench.md, bench.png, bench.log (everything printed).
# If the CUDA context dies (or Python crashes, or a workload hangs) bench.py
# is started again and goes on with the next workload (at most 4 processes).
# Arguments are passed to bench.py (e.g. --only bias_gelu,softmax).
# Self-test without a GPU: BENCH_DRY_RUN_CPU=1 bash bench/run.sh: tiny shapes
# on the CPU (needs torch here), fusec through the loader's fake driver (its
# kernels do nothing, so fusec's checks fail by design), artifacts from
# `python3 bench/workloads.py prepare --tiny --fusec build/tools/fusec --out .gpu/bench-tiny`.
set -u
START=$(date +%s)
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/fgbench}
mkdir -p "$OUT"
LOG=$OUT/bench.log
: >"$LOG"
say() { echo "bench/run.sh: $*" | tee -a "$LOG"; }
fail() { echo "bench/run.sh: FAILED: $*" | tee -a "$LOG" >&2; exit 1; }

DRY=${BENCH_DRY_RUN_CPU:-0}
# BENCH_PREP: another prepared directory (e.g. one made with
# `workloads.py prepare --cubin sm_90a`, artifacts with SASS)
PREP=${BENCH_PREP:-.gpu/bench}
[ "$DRY" = 1 ] && PREP=.gpu/bench-tiny
[ -f $PREP/compile.json ] ||
  fail "no $PREP/compile.json: run bench/prepare.sh on the build machine and carry .gpu/bench"
[ -f .deps/root/usr/include/xxhash.h ] ||
  fail "no .deps/root (xxHash): run bench/prepare.sh on the build machine and carry .deps/root"
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || fail "$PY not found"
"$PY" -c 'import torch, matplotlib' 2>>"$LOG" || fail "$PY cannot import torch and matplotlib (see $LOG)"
[ "$DRY" = 1 ] || nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | tee -a "$LOG"

# libfgload, without LLVM or pkg-config: only the shared library target.
BUILD=build-bench
export XXHASH_ROOT=$PWD/.deps/root
if [ ! -f $BUILD/loader/libfgload.so ]; then
  cmake -S . -B $BUILD -DFUSEC_LOADER_ONLY=ON -DCMAKE_BUILD_TYPE=Release >/tmp/fgbench-cmake.log 2>&1 ||
    { tail -40 /tmp/fgbench-cmake.log | tee -a "$LOG"; fail "cmake configure of libfgload"; }
  TARGETS="fgload_shared"
  [ "$DRY" = 1 ] && TARGETS="fgload_shared fake_cuda"
  cmake --build $BUILD -j16 --target $TARGETS >/tmp/fgbench-build.log 2>&1 ||
    { grep -E "error|Error" /tmp/fgbench-build.log | head -40 | tee -a "$LOG"; fail "building libfgload"; }
fi
[ -f $BUILD/loader/libfgload.so ] || fail "$BUILD/loader/libfgload.so was not built"
say "libfgload built in $(( $(date +%s) - START )) s"

export FGLOAD_LIBRARY=$PWD/$BUILD/loader/libfgload.so
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
# Cold compiles: fresh caches for fusec's cubins, the driver's JIT, Inductor and Triton.
TMPD=$(mktemp -d /tmp/fgbench.XXXXXX)
export FUSEC_CACHE_DIR=$TMPD/fusec-cache CUDA_CACHE_DISABLE=1
export TORCHINDUCTOR_CACHE_DIR=$TMPD/inductor TRITON_CACHE_DIR=$TMPD/triton
export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-16}
DEADLINE=$(( START + ${BENCH_BUDGET_S:-500} ))
STATE=$TMPD/state.json
EXTRA=()
if [ "$DRY" = 1 ]; then
  export FGL_LIBCUDA=$PWD/$BUILD/loader/tests/libfake_cuda.so
  EXTRA=(--dry-run-cpu)
fi

rc=0
for attempt in 1 2 3 4; do
  ${PYTHON:-python3} -u bench/bench.py --out "$OUT" --prep "$PREP" --state "$STATE" --deadline "$DEADLINE" \
    "${EXTRA[@]}" "$@" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  case $rc in
    0) break ;;
    2) fail "bench.py could not start (exit 2; see above)" ;;
    *) if [ "$(date +%s)" -ge $(( DEADLINE - 30 )) ]; then break; fi
       say "bench.py exited with $rc (3 = CUDA context lost or a workload hung; other = a crash): resuming in a new process" ;;
  esac
done
say "finished in $(( $(date +%s) - START )) s (bench.py exit $rc); outputs: $(cd "$OUT" && ls | tr '\n' ' ')"
[ -f "$OUT/bench.md" ] || fail "no $OUT/bench.md was written"
exit 0
