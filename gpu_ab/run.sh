#!/usr/bin/env bash
# On the GPU machine, from the worktree root, after gpu_ab/prepare.sh
# (the run tool must carry .gpu and .deps: both are git-ignored): builds
# fgrun without LLVM if needed (as tests/gpu/device_run.sh does), then for
# each graph times every variant of .gpu/ab with
#   build-gpu/tools/fgrun ART --graph G --bench N --seed 1
# (N = FG_AB_N, default 50), the default first and again last (the two
# defaults show the drift over the graph's runs), and prints
#   variant graph median_us
# lines (fgrun's queued median, device events), also to $OUT/ab.txt;
# then the same for the artifacts with SASS (.gpu/ab/sass/, whole-program
# ptxas: setmaxnreg honoured), variants named <variant>+sass (FG_AB_SETS:
# "ptx sass" by default). fgrun's full output (load lines: a SASS
# artifact must show no JIT) goes to $OUT/ab_full.txt.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/fgout}
mkdir -p "$OUT"
export XXHASH_ROOT=$PWD/.deps/root
export FUSEC_CACHE_DIR=${FUSEC_CACHE_DIR:-/tmp/fgab_cache}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
if [ ! -x build-gpu/tools/fgrun ]; then
  cmake -S . -B build-gpu -DFUSEC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release >/tmp/fgab_cmake.log 2>&1 ||
    { tail -40 /tmp/fgab_cmake.log; exit 1; }
  cmake --build build-gpu -j16 --target fgrun >/tmp/fgab_build.log 2>&1 ||
    { grep -E "error|Error" /tmp/fgab_build.log | head -40; exit 1; }
fi
FGRUN=build-gpu/tools/fgrun
N=${FG_AB_N:-50}
graphs=${FG_AB_GRAPHS:-"attn_fwd attn_fwd_causal attn_fwd_long_causal"}
variants=${FG_AB_VARIANTS:-"default ws1 ws2 pp1 pp2 noovl default"}
: >"$OUT/ab.txt"
: >"$OUT/ab_full.txt"
for set in ${FG_AB_SETS:-ptx sass}; do
  dir=.gpu/ab suffix=
  [ "$set" = sass ] && dir=.gpu/ab/sass suffix=+sass
  for g in $graphs; do
    for v in $variants; do
      art=$dir/${v}_$g.ptx
      [ -f "$art" ] || { echo "$v$suffix $g missing ($art: run gpu_ab/prepare.sh)" | tee -a "$OUT/ab.txt"; continue; }
      line=$("$FGRUN" "$art" --graph "$g" --bench "$N" --seed 1 2>&1 | tee -a "$OUT/ab_full.txt" |
        sed -n 's/^bench [^:]*: [0-9]* runs, median \([0-9.]*\) us.*/\1/p' | head -1)
      echo "$v$suffix $g ${line:-FAILED}" | tee -a "$OUT/ab.txt"
    done
  done
done
