#!/usr/bin/env bash
# The two commands of the README, on a fresh Debian 12 machine as root:
#   ./build.sh demo   build, compile examples/ with fusec, run one graph with fgrun
#   ./build.sh test   build and run every test (also an ASan+UBSan build)
# Debian packages the build needs are installed when missing.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}

need_pkgs() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "build.sh: installing ${missing[*]}"
    if [ "$(id -u)" != 0 ]; then
      echo "build.sh: error: missing packages ${missing[*]}; run as root or install them" >&2
      exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

deps() {
  need_pkgs build-essential cmake pkg-config llvm-19-dev llvm-19-tools libxxhash-dev clang-19 \
    libclang-rt-19-dev clang-format-19 python3 valgrind
  if [ ! -x /usr/local/cuda/bin/ptxas ] && ! command -v ptxas >/dev/null; then
    echo "build.sh: note: the CUDA toolkit is absent: PTX assembly checks are skipped;" \
         "fusec needs libdevice (--libdevice or FUSEC_LIBDEVICE) for math functions"
  fi
}

configure_build() { # dir, extra cmake args...
  local dir=$1; shift
  mkdir -p "$dir"
  cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log"; exit 1; }
  if ! cmake --build "$dir" -j"$JOBS" >"$dir/build.log" 2>&1; then
    grep -E "error|Error" "$dir/build.log" | head -60
    echo "build.sh: building $dir failed (full log: $dir/build.log)" >&2
    exit 1
  fi
  echo "build.sh: built $dir"
}

demo() {
  deps
  mkdir -p build
  configure_build build
  mkdir -p build/demo
  if [ -f /usr/local/cuda/nvvm/libdevice/libdevice.10.bc ] || [ -n "${FUSEC_LIBDEVICE:-}" ]; then
    for f in examples/*.fg; do
      ./build/tools/fusec "$f" -o "build/demo/$(basename "$f" .fg).ptx"
      echo "fusec $f -> build/demo/$(basename "$f" .fg).ptx ($(grep -c '^.entry\|^\.visible \.entry' "build/demo/$(basename "$f" .fg).ptx") kernels)"
    done
  else
    echo "libdevice not found: showing the launch plan instead of PTX"
  fi
  ./build/tools/fusec examples/layer_norm.fg --graph layer_norm --emit plan -o -
  ./build/tools/fgrun examples/layer_norm.fg --graph layer_norm --out build/demo/layer_norm
  echo "results written to build/demo/layer_norm/"
}

test_all() {
  deps
  # The C sources are clang-formatted (.clang-format); in a git checkout only.
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then tools/format.sh --check; fi
  mkdir -p build build-asan
  configure_build build
  (cd build && ctest --output-on-failure -j"$JOBS")
  # The whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer,
  # built by gcc, then by clang (whose sanitizers see more: float-to-int
  # overflow, calls through a function pointer of another type).
  configure_build build-asan -DFUSEC_SANITIZE=ON
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j"$JOBS" -E 'fuzz/')
  CC=clang-19 configure_build build-clang -DFUSEC_SANITIZE=ON
  (cd build-clang && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j"$JOBS" -E 'fuzz/')
}

case "${1:-}" in
  demo) demo ;;
  test) test_all ;;
  *) echo "usage: ./build.sh demo | ./build.sh test" >&2; exit 2 ;;
esac
