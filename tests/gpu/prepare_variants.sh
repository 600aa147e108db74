#!/usr/bin/env bash
# On the build machine: schedule experiments for tests/gpu/device_run.sh
# variants, each workload compiled with knobs (fusec --knob) into
# .gpu/var/WORKLOAD@KNOBS.ptx. Run after tests/gpu/prepare.sh (which clears
# .gpu). The list is the experiment; edit it.
set -euo pipefail
cd "$(dirname "$0")/../.."
FUSEC=${FUSEC:-build/tools/fusec}
mkdir -p .gpu/var
while read -r file graph knobs; do
  [ -n "$file" ] || continue
  args=() tag=default
  if [ "$knobs" != - ]; then
    tag=${knobs//,/+}
    IFS=, read -ra ks <<<"$knobs"
    for k in "${ks[@]}"; do args+=(--knob "$k"); done
  fi
  "$FUSEC" "$file" --graph "$graph" "${args[@]}" -o ".gpu/var/$graph@$tag.ptx"
done <<'LIST'
bench/suite/bias_gelu_bwd.fg bias_gelu_bwd -
bench/suite/bias_gelu_bwd.fg bias_gelu_bwd COL_SPLIT=64
bench/suite/bias_gelu_bwd.fg bias_gelu_bwd COL_SPLIT=128
bench/suite/bias_gelu_bwd.fg bias_gelu_bwd COL_VEC=4
bench/suite/bias_gelu_bwd.fg bias_gelu_bwd COL_VEC=4,COL_SPLIT=64
bench/suite/bias_gelu_bwd.fg bias_gelu_bwd COL_VEC=2
bench/suite/bias_gelu_bwd.fg bias_gelu_bwd_small -
bench/suite/bias_gelu_bwd.fg bias_gelu_bwd_small COL_VEC=4
bench/suite/bias_gelu_bwd.fg bias_gelu_bwd_small COL_VEC=2
bench/suite/bias_gelu_bwd.fg bias_gelu_bwd_small COL_SPLIT=16
bench/suite/bias_gelu_bwd.fg bias_gelu_bwd_small COL_VEC=4,COL_SPLIT=16
examples/qkv_rope.fg qkv_rope -
examples/qkv_rope.fg qkv_rope PW_BLOCK=256
examples/qkv_rope.fg qkv_rope PW_BLOCK=512
examples/qkv_rope.fg qkv_rope PW_CHUNKS=1
examples/qkv_rope.fg qkv_rope PW_CHUNKS=4
examples/qkv_rope.fg qkv_rope PW_BLOCK=256,PW_CHUNKS=4
examples/bias_gelu.fg bias_gelu -
examples/bias_gelu.fg bias_gelu PW_BLOCK=256
examples/bias_gelu.fg bias_gelu PW_BLOCK=512
examples/bias_gelu.fg bias_gelu PW_CHUNKS=4
examples/bias_gelu.fg bias_gelu PW_CHUNKS=1
LIST
ls .gpu/var | wc -l
