#!/usr/bin/env bash
# ctest label "gpu": every example and test graph compiled by fusec and run
# with fgrun --check against the CPU interpreter (poisoned outputs, fresh
# random inputs). Without a GPU it skips (exit 77). On the GPU machine,
# where fusec cannot be built (no LLVM), it uses the artifacts carried in
# .gpu/ptx (tests/gpu/prepare.sh).
#   ctest_check.sh FGRUN [FUSEC]
set -u
FGRUN=$1
FUSEC=${2:-}
cd "$(dirname "$0")/../.."
if [ ! -e /dev/nvidiactl ] && ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
  echo "skipped: no GPU (no /dev/nvidiactl, no libcuda.so.1)"
  exit 77
fi
if [ -n "$FUSEC" ] && [ -x "$FUSEC" ]; then
  FUSEC=$FUSEC bash tests/gpu/prepare.sh >/dev/null
elif [ ! -d .gpu/ptx ]; then
  echo "skipped: no fusec and no carried artifacts in .gpu/ptx"
  exit 77
fi
export FGRUN_BIN=$FGRUN
OUT=${OUT:-$(mktemp -d)} FG_LOG=$(mktemp -d) FG_PREBUILT_FGRUN=$FGRUN bash tests/gpu/device_run.sh check | tee /dev/stderr | tail -1 | grep -q ', 0 failed'
