#!/usr/bin/env bash
# On the GPU machine: builds libfgload and fgrun without LLVM, checks every
# precompiled artifact of .gpu/ptx against the CPU reference interpreter
# (poisoned outputs, fresh random inputs), runs the loader's GPU tests and
# the benchmarks. Logs go to $OUT (or /tmp/fgout).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/fgout}
mkdir -p "$OUT"
export XXHASH_ROOT=$PWD/.deps/root
export FUSEC_CACHE_DIR=$OUT/cache
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$OUT/device.txt"
what=${1:-all}
if [ ! -x build-gpu/tools/fgrun ]; then
  cmake -S . -B build-gpu -DFUSEC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1 ||
    { tail -40 "$OUT/cmake.log"; exit 1; }
  cmake --build build-gpu -j16 >"$OUT/build.log" 2>&1 ||
    { grep -E "error|Error" "$OUT/build.log" | head -40; exit 1; }
fi
FGRUN=build-gpu/tools/fgrun

check() {
  local pass=0 fail=0 slow=()
  for ptx in .gpu/ptx/*.ptx; do
    base=$(basename "$ptx" .ptx)
    src=${base%%__*}; src=${src//_//}/${base#*__}.fg
    for g in $(sed -n 's|^// graph \([^ ]*\) .*|\1|p' "$ptx"); do
      case $g in large_2g*) slow+=("$ptx:$src:$g"); continue ;; esac
      seed=$RANDOM
      if timeout 300 "$FGRUN" "$ptx" --graph "$g" --check "$src" --seed "$seed" >"$OUT/check_${base}_$g.log" 2>&1; then
        pass=$((pass + 1))
      else
        fail=$((fail + 1))
        echo "FAIL $src $g (seed $seed)"
        tail -6 "$OUT/check_${base}_$g.log" | sed 's/^/    /'
      fi
    done
  done
  if [ "${FG_SLOW:-0}" = 1 ]; then
    for s in "${slow[@]}"; do
      IFS=: read -r ptx src g <<<"$s"
      if timeout 500 "$FGRUN" "$ptx" --graph "$g" --check "$src" --seed 1 >"$OUT/check_slow_$g.log" 2>&1; then
        pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $src $g"; tail -6 "$OUT/check_slow_$g.log"; fi
    done
  fi
  echo "check: $pass passed, $fail failed"
}

case $what in
  check) check ;;
  all) check ;;
esac
