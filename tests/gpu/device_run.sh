#!/usr/bin/env bash
# On the GPU machine: builds libfgload and fgrun without LLVM, checks every
# precompiled artifact of .gpu/ptx against the CPU reference interpreter
# (poisoned outputs, fresh random inputs), runs the loader's GPU tests and
# the benchmarks. Logs go to $LOG (/tmp/fglogs), packed after each mode into
# $OUT/logs.tgz (the device tool returns at most 8 files).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/fgout}
LOG=${FG_LOG:-/tmp/fglogs}
mkdir -p "$OUT" "$LOG"
trap 'tar czf "$OUT/logs.tgz" --exclude=./cache --exclude=./loadcache -C "$LOG" .' EXIT
export XXHASH_ROOT=$PWD/.deps/root
export FUSEC_CACHE_DIR=$LOG/cache
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$LOG/device.txt"
what=${1:-all}
if [ -n "${FG_PREBUILT_FGRUN:-}" ]; then
  FGRUN=$FG_PREBUILT_FGRUN
elif [ ! -x build-gpu/tools/fgrun ]; then
  cmake -S . -B build-gpu -DFUSEC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release >"$LOG/cmake.log" 2>&1 ||
    { tail -40 "$LOG/cmake.log"; exit 1; }
  cmake --build build-gpu -j16 >"$LOG/build.log" 2>&1 ||
    { grep -E "error|Error" "$LOG/build.log" | head -40; exit 1; }
fi
FGRUN=${FGRUN:-build-gpu/tools/fgrun}

# One check: fgrun ARTIFACT --graph G --check SRC [FLAGS...], logged;
# prints PASS/FAIL.
check_one() {
  local ptx=$1 src=$2 g=$3 seed=$RANDOM
  shift 3
  local flag="$*" tag="$*"
  tag=${tag//[- =]/_}
  local log=$LOG/check_$(basename "$(dirname "$ptx")")_$(basename "$ptx" .ptx)_$g$tag.log
  if timeout "${FG_CHECK_TIMEOUT:-500}" "$FGRUN" "$ptx" --graph "$g" --check "$src" --seed "$seed" $flag >"$log" 2>&1; then
    echo "PASS $src $g $flag"
  else
    echo "FAIL $src $g $flag (seed $seed, exit $?)"
    tail -8 "$log" | sed 's/^/    /'
  fi
}
export -f check_one
export FGRUN LOG

# The sizes graph G of artifact PTX is checked at when it has a symbolic
# size (plan v2: `// sym 0 NAME min LO max HI div D`): each of SIZES...
# rounded up to the divisor and into the range, once each, as "--dim
# NAME=V" lines; nothing for a static graph.
sym_dims() {
  local ptx=$1 g=$2 sym name lo hi div v seen=" "
  shift 2
  sym=$(awk -v g="$g" '$2 == "graph" { on = ($3 == g) } on && $2 == "sym" { print $4, $6, $8, $10; exit }' "$ptx")
  [ -n "$sym" ] || return 0
  read -r name lo hi div <<<"$sym"
  for v in "$@"; do
    v=$(( (v + div - 1) / div * div )); [ "$v" -lt "$lo" ] && v=$(( (lo + div - 1) / div * div )); [ "$v" -gt "$hi" ] && v=$(( hi / div * div ))
    case $seen in *" $v "*) continue ;; esac
    seen="$seen$v "
    echo "--dim $name=$v"
  done
}

check() {
  local jobs=$LOG/jobs.txt
  : >"$jobs"
  # FG_JOBS_FILE: the jobs of an earlier check's jobs.txt left to run (a
  # check cut off by the call's time limit, resumed), instead of all
  [ -n "${FG_JOBS_FILE:-}" ] && cp "$FG_JOBS_FILE" "$jobs"
  [ -n "${FG_JOBS_FILE:-}" ] || for ptx in .gpu/ptx/*.ptx .gpu/ptx-*/*.ptx; do
    [ -f "$ptx" ] || continue
    base=$(basename "$ptx" .ptx)
    src=${base%%__*}; src=${src//_//}/${base#*__}.fg
    for g in $(sed -n 's|^// graph \([^ ]*\) .*|\1|p' "$ptx"); do
      # the largest graphs take minutes in the CPU interpreter
      case $g in large_2g*|*_32k) [ "${FG_SLOW:-0}" = 1 ] || continue ;; esac
      # FG_CHECK_FILTER: a regular expression on "artifact graph" (default: all)
      echo "$ptx $g" | grep -Eq "${FG_CHECK_FILTER:-.}" || continue
      # A graph with a symbolic size (plan v2 `sym` lines): one artifact
      # checked at several sizes, odd ones and 1 among them.
      dims=$(sym_dims "$ptx" "$g" ${FG_SYM_SIZES:-0 1 2 37 1000 4097})
      if [ -n "$dims" ]; then
        while read -r dim; do
          echo "$ptx $src $g $dim" >>"$jobs"
          [ "${FG_MISALIGN:-1}" = 1 ] && echo "$ptx $src $g $dim --misalign" >>"$jobs"
        done <<<"$dims"
        continue
      fi
      echo "$ptx $src $g" >>"$jobs"
      # Every pointer misaligned: the plain kernel variants (FG_MISALIGN=0: off).
      # Not for bench/: its shapes are large, its kernels the same.
      case $ptx in .gpu/ptx/bench__*) ;; .gpu/ptx/* | .gpu/ptx-sm90a/* | .gpu/ptx-sm90a-overlap/* | .gpu/ptx-sm90a-pingpong[12]/* | .gpu/ptx-sm90a-ws[12]/* | .gpu/ptx-sm90a-lpt/* | .gpu/ptx-sm90a-bwd*/* | .gpu/ptx-lpt/*) [ "${FG_MISALIGN:-1}" = 1 ] && echo "$ptx $src $g --misalign" >>"$jobs" ;; esac
    done
  done
  xargs -P "${FG_JOBS:-6}" -L 1 bash -c 'check_one "$@"' _ <"$jobs" | tee "$LOG/check_summary.txt" | grep -v '^PASS' || true
  echo "check: $(grep -c '^PASS' "$LOG/check_summary.txt") passed, $(grep -c '^FAIL' "$LOG/check_summary.txt") failed"
}

# The differential tester's random graphs (.gpu/difftest/gN.fg + gN.ptx,
# and those over a symbolic size in .gpu/difftest-sym, written by
# tests/gpu/prepare.sh): every artifact against the interpreter, aligned
# and misaligned; one over a symbolic size at each size of
# FG_DIFFTEST_SYM_SIZES its facts admit (0: the smallest).
difftest() {
  local jobs=$LOG/difftest_jobs.txt ptx g dims dim
  : >"$jobs"
  for ptx in .gpu/difftest/*.ptx .gpu/difftest-sym/*.ptx; do
    [ -f "$ptx" ] || continue
    g=$(basename "$ptx" .ptx)
    dims=$(sym_dims "$ptx" "$g" ${FG_DIFFTEST_SYM_SIZES:-0 1 37 200})
    while read -r dim; do # one empty line for a static graph (no trailing blank: xargs -L joins)
      echo "$ptx ${ptx%.ptx}.fg $g${dim:+ $dim}" >>"$jobs"
      echo "$ptx ${ptx%.ptx}.fg $g${dim:+ $dim} --misalign" >>"$jobs"
    done <<<"$dims"
  done
  xargs -P "${FG_JOBS:-6}" -L 1 bash -c 'check_one "$@"' _ <"$jobs" | tee "$LOG/difftest_summary.txt" |
    grep -v '^PASS' || true
  echo "difftest: $(grep -c '^PASS' "$LOG/difftest_summary.txt") passed, $(grep -c '^FAIL' "$LOG/difftest_summary.txt") failed" \
    "($(ls .gpu/difftest/*.ptx 2>/dev/null | wc -l) graphs and $(ls .gpu/difftest-sym/*.ptx 2>/dev/null | wc -l)" \
    "over a symbolic size, aligned and misaligned)"
}

# Benchmarks: fgrun --bench (device events, median) with the copy bandwidth
# of the same run; one line per graph in $LOG/bench.txt.
bench() {
  : >"$LOG/bench.txt"
  while read -r file g; do
    [ -n "$file" ] || continue
    ptx=.gpu/ptx/$(dirname "$file" | tr / _)__$(basename "$file" .fg).ptx
    "$FGRUN" "$ptx" --graph "$g" --bench "${FG_BENCH_N:-100}" --seed 1 2>&1 | grep -E '^(bench|load)' | tee -a "$LOG/bench.txt"
  done <<'LIST'
examples/bias_gelu.fg bias_gelu
examples/layer_norm.fg layer_norm_large
examples/softmax.fg softmax
examples/sum_rows.fg sum_rows
examples/layer_norm.fg layer_norm
examples/softmax.fg softmax_small
examples/sum_rows.fg sum_cols
examples/rmsnorm_bwd.fg rmsnorm_bwd
examples/rmsnorm_bwd.fg layernorm_bwd
examples/fp8_amax.fg amax_rowcol
examples/fp8_amax.fg amax_nested
bench/norm_bwd.fg rmsnorm_bwd_4k
bench/norm_bwd.fg rmsnorm_bwd_64k
bench/norm_bwd.fg rmsnorm_bwd_32k
bench/norm_bwd.fg layernorm_bwd_4k
bench/norm_bwd.fg layernorm_bwd_64k
bench/norm_bwd.fg layernorm_bwd_32k
examples/sdpa_bwd_epilogue_packed.fg sdpa_bwd_epilogue_packed
examples/sdpa_bwd_epilogue_separate.fg sdpa_bwd_epilogue_separate
examples/qkv_rope.fg qkv_rope
tests/graphs/chain60.fg chain60
LIST
}

# Symbolic sizes against static shapes (bench/symbolic.fg): each workload
# static, symbolic with facts and without, at the static graph's T.
symbench() {
  : >"$LOG/symbench.txt"
  local ptx=.gpu/ptx/bench__symbolic.ptx
  for w in rmsnorm bias_gelu rmsnorm_bwd bias_grad; do
    for v in static facts nofacts; do
      local dim=
      [ "$v" = static ] || dim="--dim T=${FG_SYM_T:-16384}"
      echo "== ${w}_$v" | tee -a "$LOG/symbench.txt"
      "$FGRUN" "$ptx" --graph "${w}_$v" $dim --bench "${FG_BENCH_N:-100}" --seed 1 2>&1 | grep -E '^(bench|load|error)' | tee -a "$LOG/symbench.txt"
    done
  done
}

# Every bench workload with its leading dim symbolic against static compiles
# at four sizes (bench/symbolic_suite.py; prepared by bench/prepare.sh into
# .gpu/symsuite).
symsuite() {
  if [ ! -f .gpu/symsuite/plan.json ]; then
    echo "symsuite: no .gpu/symsuite/plan.json (run bench/prepare.sh on the build machine)"
    return
  fi
  python3 bench/symbolic_suite.py run --fgrun "$FGRUN" --dir .gpu/symsuite --n "${FG_BENCH_N:-50}" \
    ${FG_SYMSUITE_ONLY:+--only "$FG_SYMSUITE_ONLY"} 2>&1 |
    tee "$LOG/symsuite.txt"
  cp .gpu/symsuite/results.json "$LOG/symsuite.json" 2>/dev/null
}

# Every workload's symbolic artifact without a divisor, checked against the
# interpreter at T = 1, 7, 63, 4097 (issue 18; sizes whose largest tensor
# would take the CPU interpreter minutes are listed as skipped).
symcheck() {
  if [ ! -f .gpu/symsuite/plan.json ]; then
    echo "symcheck: no .gpu/symsuite/plan.json (run bench/prepare.sh on the build machine)"
    return
  fi
  python3 bench/symbolic_suite.py check --fgrun "$FGRUN" --dir .gpu/symsuite --jobs "${FG_JOBS:-6}" \
    --sizes "${FG_SYM_CHECK_SIZES:-1,7,63,4097}" 2>&1 | tee "$LOG/symcheck.txt" | grep -v ' pass$'
  cp .gpu/symsuite/check.json "$LOG/symcheck.json" 2>/dev/null
}

# tests/graphs/symbolic_large.fg at T = 32769: 2^31 + 65536 elements, the
# 64-bit index variant of one artifact over T (the CPU reference takes
# minutes).
symlarge() {
  local ptx=.gpu/ptx/tests_graphs__symbolic_large.ptx g
  for g in sym_large_pw sym_large_rowsum; do
    FG_CHECK_TIMEOUT=900 check_one "$ptx" tests/graphs/symbolic_large.fg "$g" --dim T=32769 &
  done
  wait
}

# CTAs counting down (opt/schedule.c choose_l2_order) change no bit: each
# graph of tests/graphs/l2_reverse.fg as compiled (reversed) against all
# ascending (.gpu/l2/ascending.ptx, tests/gpu/prepare.sh), same inputs.
l2order() {
  local rev=.gpu/ptx/tests_graphs__l2_reverse.ptx g
  for g in $(sed -n 's|^// graph \([^ ]*\) .*|\1|p' "$rev"); do
    rm -rf "$LOG/l2a" "$LOG/l2r"
    if ! "$FGRUN" .gpu/l2/ascending.ptx --graph "$g" --seed 7 --out "$LOG/l2a" >/dev/null 2>&1 ||
      ! "$FGRUN" "$rev" --graph "$g" --seed 7 --out "$LOG/l2r" >/dev/null 2>&1; then
      echo "FAIL l2order $g: a run failed"
    elif diff -rq "$LOG/l2a" "$LOG/l2r" >/dev/null; then
      echo "PASS l2order $g: reversed == ascending, bitwise"
    else
      echo "FAIL l2order $g: outputs differ"
    fi
  done
}

# Bitwise reproducibility: 100 runs and a CUDA-graph replay of every graph
# with a grid reduction of the row + column form, and of the scatters'
# kernels (issue 20: the counts left zero for the next run; scatter2: the
# fused sort and scatter_add; scatter5: the scan's ranges, whose counts the
# fill kernel leaves zero too; scatter_select: the sum that selects its
# sources itself).
repeat() {
  local t=build-gpu/tests/loader/gpu_repeat_test
  [ -x "$t" ] || t=$(find build-gpu -name gpu_repeat_test -type f | head -1)
  : >"$LOG/repeat.txt"
  for spec in examples__rmsnorm_bwd:rmsnorm_bwd examples__rmsnorm_bwd:layernorm_bwd examples__fp8_amax:amax_rowcol \
      bench__norm_bwd:rmsnorm_bwd_4k bench__norm_bwd:layernorm_bwd_4k bench__norm_bwd:rmsnorm_bwd_64k \
      bench__norm_bwd:layernorm_bwd_64k bench__norm_bwd:rmsnorm_bwd_32k bench__norm_bwd:layernorm_bwd_32k \
      tests_graphs__random:bias_dropout_add_layernorm tests_graphs__random:dropout_pointwise \
      tests_graphs__scatter:emb_bwd_gpt2 tests_graphs__scatter:dups_bf16 tests_graphs__scatter:all_same \
      tests_graphs__scatter2:sort_dups16 tests_graphs__scatter2:sort_one_slice \
      tests_graphs__scatter2:big_all_one tests_graphs__scatter2:sa_hist tests_graphs__scatter2:sa_moe_combine \
      tests_graphs__scatter4:chunks_gpt2ish tests_graphs__scatter4:chunks_one_bin \
      tests_graphs__scatter4:chunks_dups_bf16_odd tests_graphs__scatter5:ranges_gpt2 \
      tests_graphs__scatter5:ranges_hot tests_graphs__scatter5:ranges_chunks \
      tests_graphs__scatter5:sort_chunks_f32 tests_graphs__scatter_select:sel_emb_small \
      tests_graphs__scatter_select:sel_raw_hot tests_graphs__row_cluster_few:few_groupnorm \
      tests_graphs__column_threads:odd_f32 \
      tests_graphs__column_threads:halfs tests_graphs__column_threads:var_split tests_graphs__column_threads:arg_cols \
      tests_graphs__cumsum_scan:col_g34 tests_graphs__cumsum_scan:chained tests_graphs__row_reshape_outputs:gn_cluster8_bf16 \
      tests_graphs__scan_split:row_odd_f16 tests_graphs__scan_split:row_multi_bf16 tests_graphs__scan_split:row_host \
      tests_graphs__scan_split:col_g20261200 tests_graphs__scan_split:col_ints_mid \
      tests_graphs__streams:emb_bwd_cols tests_graphs__streams:three_outputs \
      tests_graphs__streams:dependent_pair; do
    "$t" "${FG_REPEAT_DIR:-.gpu/ptx}/${spec%%:*}.ptx" "${spec#*:}" 100 2>&1 | tail -3 | tee -a "$LOG/repeat.txt"
  done
  # the attention backward (no atomics): test graphs and the bench's largest
  for spec in tests_graphs__attention_bwd:bwd_bf16_d64 tests_graphs__attention_bwd:bwd_gqa_causal \
      tests_graphs__attention_bwd:bwd_packed_qkv tests_graphs__attention_bwd:train_f16_d128_gqa; do
    "$t" ".gpu/ptx/${spec%%:*}.ptx" "${spec#*:}" 100 2>&1 | tail -1 | tee -a "$LOG/repeat.txt"
  done
  for w in attn_bwd attn_bwd_causal; do
    [ -f ".gpu/bench/ptx/$w.ptx" ] && "$t" ".gpu/bench/ptx/$w.ptx" "$w" 100 2>&1 | tail -1 | tee -a "$LOG/repeat.txt"
  done
  # row + column kernels over T, whose grid follows T: the size changes every run
  for spec in tests_graphs__symbolic_leading:sl_rmsnorm_bwd:1000,37,4097,1 \
      tests_graphs__symbolic_leading:sl_layernorm_bwd_amax:4097,1000,2,37 \
      tests_graphs__symbolic_leading:sl_amax_rowcol:1000,40,4096,8 bench__symbolic:rmsnorm_bwd_facts:16384,384,4096,8 \
      tests_graphs__symbolic_reduced_split:sr_sum_f32:384,1000,37,4097 tests_graphs__symbolic_rowcol_defer:rd_amax_bf16:1000,37,4097,384; do
    local art=${spec%%:*} rest=${spec#*:}
    timeout 120 "$t" "${FG_REPEAT_DIR:-.gpu/ptx}/$art.ptx" "${rest%%:*}" 40 "${rest#*:}" 2>&1 | tail -3 |
      tee -a "$LOG/repeat.txt"
  done
}

# Every graph of every artifact under .gpu/var/ (schedule experiments).
variants() {
  : >"$LOG/variants.txt"
  for ptx in .gpu/var/*.ptx; do
    [ -f "$ptx" ] || continue
    for g in $(sed -n 's|^// graph \([^ ]*\) .*|\1|p' "$ptx"); do
      "$FGRUN" "$ptx" --graph "$g" --bench "${FG_BENCH_N:-50}" --seed 1 2>&1 | grep -E '^bench.*fraction' |
        sed "s|^|$(basename "$ptx" .ptx) |" | tee -a "$LOG/variants.txt"
    done
  done
}

# Timelines (.gpu/trace/*.ptx, compiled with --knob TRACE=1): each graph
# benchmarked, then one more run's per-CTA timeline written to
# $LOG/trace_NAME.bin and summarized by tests/gpu/trace_report.py.
trace() {
  for ptx in .gpu/trace/*.ptx; do
    [ -f "$ptx" ] || continue
    local n g
    n=$(basename "$ptx" .ptx)
    g=$(sed -n 's|^// graph \([^ ]*\) .*|\1|p' "$ptx" | head -1)
    FG_TRACE_OUT=$LOG/trace_$n.bin "$FGRUN" "$ptx" --graph "$g" --bench "${FG_BENCH_N:-30}" --seed 1 2>&1 |
      grep -E '^bench.*fraction' | sed "s|^|$n |"
    python3 tests/gpu/trace_report.py "$LOG/trace_$n.bin" "$ptx" || true
  done
}

# The loader's host time a call on this machine's driver (host_overhead):
# fgl_run against bare launches, the binding's cost, and the second
# stream's fork and join.
hostcost() {
  local t
  t=$(find build-gpu -name host_overhead -type f | head -1)
  [ -x "$t" ] || { echo "hostcost: host_overhead not built"; return 1; }
  "$t" tests/loader/add.ptx tests/loader/sym.ptx 10000 2>&1 | tee "$LOG/hostcost.txt"
}

# Load times of the artifact holding every example (.gpu/all_examples.ptx):
# cold (empty cubin cache, driver JIT cache off) then warm (cache hit).
loadtime() {
  local cache=$LOG/loadcache
  rm -rf "$cache"
  for i in 1 2 3; do
    rm -rf "$cache"
    CUDA_CACHE_DISABLE=1 FUSEC_CACHE_DIR=$cache "$FGRUN" .gpu/all_examples.ptx --graph layer_norm --bench 3 | grep '^load' | sed 's/^/cold: /'
  done
  for i in 1 2 3; do
    CUDA_CACHE_DISABLE=1 FUSEC_CACHE_DIR=$cache "$FGRUN" .gpu/all_examples.ptx --graph layer_norm --bench 3 | grep '^load' | sed 's/^/warm: /'
  done
}

# First loads in fresh processes, PTX JIT against the artifact's SASS
# (tests/loader/gpu_coldload: the context is made first and not counted,
# CUDA_CACHE_DISABLE=1, libfgload's cache off; load plus one instance of
# every graph): every example graph alone and all of them in one artifact
# (.gpu/coldload from tests/gpu/prepare.sh), FG_COLDLOAD_N (3) processes
# each; medians in ms in $LOG/coldload.txt, every run in coldload_raw.txt.
coldload() {
  local t f n kind i
  t=$(find build-gpu -name gpu_coldload -type f | head -1)
  [ -n "$t" ] || { echo "coldload: no gpu_coldload in build-gpu"; return; }
  : >"$LOG/coldload_raw.txt"
  for f in .gpu/coldload/ptx/*.ptx; do
    [ -f "$f" ] || continue
    n=$(basename "$f" .ptx)
    for kind in ptx sass; do
      [ -f ".gpu/coldload/$kind/$n.ptx" ] || continue
      for i in $(seq "${FG_COLDLOAD_N:-3}"); do
        CUDA_CACHE_DISABLE=1 FUSEC_CACHE=0 "$t" ".gpu/coldload/$kind/$n.ptx" "$n $kind" >>"$LOG/coldload_raw.txt" 2>&1
      done
    done
  done
  grep -v '^coldload ' "$LOG/coldload_raw.txt" | head -20
  awk 'function med(s,   a, m, i, j, x) {
         m = split(s, a, " ")
         for (i = 2; i <= m; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
         return m ? a[int((m + 1) / 2)] : -1
       }
       $1 == "coldload" { k = $2 " " $3; v[k] = v[k] " " $7; if ($5 != ($3 == "sass" ? "sass" : "jit")) bad[k] = $5; names[$2] = $NF }
       END {
         printf "%-48s %6s %12s %10s %8s\n", "artifact (median ms, first load + instances)", "graphs", "ptx-jit", "sass", "ratio"
         for (n in names) {
           p = med(v[n " ptx"]); s = med(v[n " sass"]); note = ""
           if (bad[n " ptx"] != "" || bad[n " sass"] != "") note = "  (WRONG SOURCE: ptx " bad[n " ptx"] ", sass " bad[n " sass"] ")"
           printf "%-48s %6d %12.1f %10.1f %7.1fx%s\n", n, names[n], p, s, (s > 0 ? p / s : 0), note
         }
       }' "$LOG/coldload_raw.txt" | { IFS= read -r h; echo "$h"; sort; } | tee "$LOG/coldload.txt"
  # the SASS computes what the interpreter does: every graph of the
  # all-examples artifact, run from its SASS, checked
  local sass=.gpu/coldload/sass/all_examples.ptx g
  [ -f "$sass" ] || return 0
  for g in $(sed -n 's|^// graph \([^ ]*\) .*|\1|p' "$sass"); do
    check_one "$sass" .gpu/all_examples.fg "$g"
  done | tee "$LOG/coldload_check.txt" | grep -v '^PASS' || true
  echo "coldload check (from SASS): $(grep -c '^PASS' "$LOG/coldload_check.txt") passed, $(grep -c '^FAIL' "$LOG/coldload_check.txt") failed"
}

# Hardware counters of the row + column and epilogue kernels (ncu, clocks
# left alone); one report per graph in $LOG/ncu_*.txt.
profile() {
  command -v ncu >/dev/null || { echo "profile: no ncu here"; return; }
  for spec in ${FG_PROFILE:-bench__norm_bwd:rmsnorm_bwd_4k bench__norm_bwd:layernorm_bwd_4k examples__fp8_amax:amax_rowcol \
      examples__sdpa_bwd_epilogue_separate:sdpa_bwd_epilogue_separate examples__sdpa_bwd_epilogue_packed:sdpa_bwd_epilogue_packed}; do
    ptx=.gpu/ptx/${spec%%:*}.ptx; [ -f "$ptx" ] || ptx=.gpu/var/${spec%%:*}.ptx
    timeout 300 ncu --clock-control none --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
      --section LaunchStats --section SchedulerStats --section SourceCounters \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,gpu__time_duration.sum \
      "$FGRUN" "$ptx" --graph "${spec#*:}" --bench 3 --seed 1 >"$LOG/ncu_${spec#*:}.txt" 2>&1
    echo "profile ${spec#*:}: exit $?, $(grep -E 'gpu__time_duration.sum|dram__bytes_(read|write).sum' "$LOG/ncu_${spec#*:}.txt" | tr -s ' ' | tr '\n' ';')"
  done
}

# The Python binding on the GPU: fast calls, custom ops, CUDA-graph capture,
# torch.compile and the host time per call (tests/gpu/python_fastcall.py),
# then the symbolic-size calls (tests/gpu/python_symbolic.py). The fast-call
# extension is the one build-gpu built (python/CMakeLists.txt), when the
# machine has the Python headers; without it the ctypes path runs.
python_checks() {
  local ext
  ext=$(ls build-gpu/python/fusec/_fgcall*.so 2>/dev/null | head -1)
  [ -n "$ext" ] || echo "python: no build-gpu/python/fusec/_fgcall*.so (no Python headers?): ctypes path only"
  FGLOAD_LIBRARY=$PWD/build-gpu/loader/libfgload.so FUSEC_FGCALL=${ext:-0} \
    python3 tests/gpu/python_fastcall.py .gpu/ptx/tests_graphs__python_fastcall.ptx \
    $(ls .gpu/ptx/tests_graphs__python_inplace.ptx 2>/dev/null) 2>&1 | tee "$LOG/python_fastcall.txt"
  [ -f .gpu/ptx/bench__symbolic.ptx ] && FGLOAD_LIBRARY=$PWD/build-gpu/loader/libfgload.so FUSEC_FGCALL=${ext:-0} \
    python3 tests/gpu/python_symbolic.py .gpu/ptx/bench__symbolic.ptx 2>&1 | tail -3 | tee "$LOG/python_symbolic.txt"
  # the exporter's cuDNN attention rows: its logsumexp is flash's (no fusec involved)
  python3 tests/gpu/python_cudnn_sdpa.py 2>&1 | tee "$LOG/python_cudnn_sdpa.txt"
}

# GPT-2 small data-parallel (examples/models/train_ddp.py; docs/pytorch.md,
# "More than one GPU"): torchrun on FG_DDP_NPROC (2) GPUs, eager /
# torch.compile default / fusec, optimize_ddp off, then the same global
# batch on one GPU (two micro-batches a step; FG_DDP_1GPU_MODES, default all
# three), losses compared; then, unless FG_DDP_OPTIMIZER=0, Dynamo's
# DDPOptimizer (graphs cut at DDP's buckets: regions of their own). Regions
# come from $FUSEC_BACKEND_CACHE (default .gpu/models, carried from the build
# machine); every rank writes those missing to $LOG/pending, packed into
# $OUT/ddp_pending.tgz for `python3 -m fusec.backend fill` there. A run
# that misses any stops after fusec's first step (--require-cache).
# FG_DDP_ARGS: more flags for every run (e.g. "--steps 30").
ddp() {
  local n=${FG_DDP_NPROC:-2} ext np
  ext=$(ls build-gpu/python/fusec/_fgcall*.so 2>/dev/null | head -1)
  export FUSEC_BACKEND_CACHE=${FUSEC_BACKEND_CACHE:-$PWD/.gpu/models} FUSEC_BACKEND_PENDING=$LOG/pending \
    FGLOAD_LIBRARY=$PWD/build-gpu/loader/libfgload.so FUSEC_FGCALL=${ext:-0}
  # NVLink multicast stays off (the machines' rule: KINDS.md)
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  mkdir -p "$FUSEC_BACKEND_PENDING"
  echo "ddp: cache $FUSEC_BACKEND_CACHE ($(ls "$FUSEC_BACKEND_CACHE"/*.ptx 2>/dev/null | wc -l) regions)," \
    "$(python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.device_count(), "GPUs")')"
  ddp_run() { # NPROC NAME FLAGS...: one torchrun, its log and JSON
    local np=$1 name=$2 rc
    shift 2
    timeout "${FG_DDP_TIMEOUT:-500}" python3 -m torch.distributed.run --standalone --nproc_per_node="$np" examples/models/train_ddp.py \
      --require-cache --out "$LOG/$name.json" ${FG_DDP_ARGS:-} "$@" >"$LOG/$name.log" 2>&1
    rc=$?
    grep -E '^(==|  [a-z]|      |FAIL|train_ddp)' "$LOG/$name.log" | grep -vE '^  [a-z]+ +step +[0-9]' | tee "$LOG/$name.summary"
    cp "$LOG/$name.json" "$OUT/" 2>/dev/null
    echo "ddp $name: exit $rc"
    [ "$rc" = 0 ] || tail -5 "$LOG/$name.log" | sed 's/^/    /'
  }
  ddp_run "$n" ddp$n --modes fusec,eager,default
  if [ "$(ls "$FUSEC_BACKEND_PENDING" | wc -l)" = 0 ]; then
    ddp_run 1 ddp1 --modes "${FG_DDP_1GPU_MODES:-eager,default,fusec}" --reference "$LOG/ddp$n.json"
  fi
  # losses against the first run's (its eager)
  [ "${FG_DDP_OPTIMIZER:-1}" = 1 ] && ddp_run "$n" ddp${n}_opt --modes fusec,default --optimize-ddp ddp_optimizer \
    $([ -f "$LOG/ddp$n.json" ] && echo --reference "$LOG/ddp$n.json")
  np=$(ls "$FUSEC_BACKEND_PENDING" | grep -c '\.fg$')
  tar czf "$OUT/ddp_pending.tgz" -C "$LOG" pending
  echo "ddp: $np regions missing from the cache, in \$OUT/ddp_pending.tgz (there: tar xzf it, then" \
    "FUSEC_BIN_DIR=build/tools FUSEC_BACKEND_CACHE=\$PWD/.gpu/models python3 -m fusec.backend fill pending)"
}

# issue 19 (wgmma): the attention forward at the issue's shapes, the
# wgmma kernel (--arch sm_90a) and the mma.sync one (sm_90) in the same run
# (tests/gpu/prepare.sh), fgrun's bench line a graph and target in
# $LOG/wgmmabench.txt (TFLOP/s: 4 B H Sq Sk D a forward over its time,
# half of that causal). The backward's graphs too (wgmmabwd: the wgmma dq
# and dk, dv kernels at sm_90a, mma.sync at sm_90; TFLOP/s: 10 B H Sq Sk
# D, half of that causal, as bench/suite/attention.fg's attn_bwd* count).
# wgmma2: every knob variant prepare.sh wrote (attention_sm90a-*.ptx)
# too, each line tagged with its name.
wgmmabench() {
  : >"$LOG/wgmmabench.txt"
  local g t art
  local ts="sm90a $(ls .gpu/bench-sm90a/ 2>/dev/null | sed -n 's/^attention_\(sm90a-.*\)\.ptx$/\1/p' | tr '\n' ' ') sm90"
  for g in attn_fwd attn_fwd_causal attn_fwd_d64 attn_fwd_long_causal \
    attn_bwd attn_bwd_causal attn_bwd_d64 attn_bwd_long_causal; do
    for t in $ts; do
      art=.gpu/bench-sm90a/attention_$t.ptx
      [ -f "$art" ] || continue
      "$FGRUN" "$art" --graph "$g" --bench "${FG_BENCH_N:-50}" --seed 1 2>&1 | grep -E '^(bench|load|error)' |
        sed "s|^|$t |" | tee -a "$LOG/wgmmabench.txt"
    done
  done
}

case $what in
  wgmmabench) wgmmabench ;;
  ddp) ddp ;;
  python) python_checks ;;
  profile) profile ;;
  loadtime) loadtime ;;
  hostcost) hostcost ;;
  coldload) coldload ;;
  check) check ;;
  difftest) difftest ;;
  bench) bench ;;
  repeat) repeat ;;
  symbench) symbench ;;
  symsuite) symsuite ;;
  symcheck) symcheck ;;
  symlarge) symlarge ;;
  l2order) l2order ;;
  variants) variants ;;
  trace) trace ;;
  all) check; difftest; repeat; bench; loadtime ;;
esac
