#!/usr/bin/env bash
# On the build machine, after tests/gpu/prepare.sh: the sched17 knobs (issue 17;
# docs/benchmarks.md) compiled into .gpu/ptx-s17-KNOBS/, so that
# `tests/gpu/device_run.sh check` checks those kernel forms against the
# interpreter too (check reads every .gpu/ptx-*/ directory).
set -euo pipefail
cd "$(dirname "$0")/../.."
FUSEC=${FUSEC:-build/tools/fusec}
for v in ROW_VEC16=1,ROW_CLUSTER_PEEL=1 ROW_VEC16=1,ROW_CLUSTER_BLOCK=256 ROW_CLUSTER_SIZE=4 PW_FLAT=2; do
  d=.gpu/ptx-s17-${v//[,=]/_}; mkdir -p "$d"; a=()
  IFS=, read -ra ks <<<"$v"; for k in "${ks[@]}"; do a+=(--knob "$k"); done
  for f in tests/graphs/sched17.fg tests/graphs/row_reshape_outputs.fg tests/graphs/sink_reshape.fg tests/graphs/variance_one_pass.fg tests/graphs/row_peeled.fg; do
    b=${f%.fg}; b=${b%/*}; b=${b//\//_}__$(basename "$f" .fg)
    "$FUSEC" "$f" "${a[@]}" -o "$d/$b.ptx"
  done
done
