#!/usr/bin/env bash
# On the build machine (LLVM, no GPU): compiles every benchmark workload of
# bench/workloads.py with fusec into .gpu/bench/ptx/NAME.ptx (one graph per
# file, each compile timed: .gpu/bench/compile.json) and unpacks xxHash into
# .deps/root for the GPU machine. Builds nothing else. Then, on the GPU
# machine, with .gpu/bench and .deps/root carried: bash bench/run.sh
# (see bench/README.md). FUSEC_ARCH=sm_90a compiles for Hopper with wgmma
# (what a user on an H100 passes as --arch). A workload that fusec cannot compile is recorded as
# unsupported (it is still measured with PyTorch), not dropped.
set -euo pipefail
cd "$(dirname "$0")/.."
FUSEC=${FUSEC:-build/tools/fusec}
if [ ! -x "$FUSEC" ]; then
  echo "bench/prepare.sh: $FUSEC not found: build the compiler first (./build.sh demo, or cmake --build build)" >&2
  exit 1
fi
rm -rf .gpu/bench
mkdir -p .gpu/bench
python3 bench/workloads.py prepare --fusec "$FUSEC" --out .gpu/bench ${FUSEC_ARCH:+--arch "$FUSEC_ARCH"}
# the same workloads with a symbolic leading dim (device_run.sh symsuite)
rm -rf .gpu/symsuite
python3 bench/symbolic_suite.py prepare --fusec "$FUSEC" --out .gpu/symsuite | tail -1
if [ ! -d .deps/root ]; then
  mkdir -p .deps && (cd .deps && apt-get download libxxhash0 libxxhash-dev >/dev/null 2>&1 &&
    for d in *.deb; do dpkg -x "$d" root; done)
fi
[ -f .deps/root/usr/include/xxhash.h ] || { echo "bench/prepare.sh: .deps/root has no xxhash.h" >&2; exit 1; }
du -sh .gpu/bench .deps/root | sed 's/^/bench\/prepare.sh: carry /'
