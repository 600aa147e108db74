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
bench/suite/bias_gelu_bwd.fg bias_gelu_bwd COL_VEC=8
bench/suite/bias_gelu_bwd.fg bias_gelu_bwd_small -
bench/suite/bias_gelu_bwd.fg bias_gelu_bwd_small COL_VEC=8
bench/suite/bias_gelu_bwd.fg bias_gelu_bwd_small COL_VEC=2
examples/sdpa_bwd_epilogue_packed.fg sdpa_bwd_epilogue_packed -
examples/sdpa_bwd_epilogue_packed.fg sdpa_bwd_epilogue_packed COL_VEC=8
examples/sdpa_bwd_epilogue_packed.fg sdpa_bwd_epilogue_packed_small -
examples/sdpa_bwd_epilogue_packed.fg sdpa_bwd_epilogue_packed_small COL_VEC=8
examples/sdpa_bwd_epilogue_separate.fg sdpa_bwd_epilogue_separate -
examples/sdpa_bwd_epilogue_separate.fg sdpa_bwd_epilogue_separate COL_VEC=8
examples/sdpa_bwd_epilogue_separate.fg sdpa_bwd_epilogue_separate_small -
examples/sdpa_bwd_epilogue_separate.fg sdpa_bwd_epilogue_separate_small COL_VEC=8
examples/sum_rows.fg sum_cols -
examples/sum_rows.fg sum_cols COL_VEC=4
examples/fp8_amax.fg fp8_scaled_cast -
examples/fp8_amax.fg fp8_scaled_cast L2_REVERSE=0
examples/fp8_amax.fg fp8_scaled_cast L2_REVERSE=2
bench/suite/norm_stats.fg groupnorm_fwd -
bench/suite/norm_stats.fg groupnorm_fwd ROW_CLUSTER_BLOCK=512
bench/suite/norm_stats.fg groupnorm_fwd ROW_VEC16=0
bench/suite/norm_stats.fg groupnorm_fwd ROW_CLUSTER_SIZE=4
bench/suite/norm_stats.fg groupnorm_fwd ROW_VEC16=1,ROW_CLUSTER_SIZE=4,ROW_CLUSTER_BLOCK=512
bench/suite/norm_stats.fg groupnorm_fwd ROW_CLUSTER=0
tests/golden/opt/pointwise_flat_dense.fg ce_bwd -
tests/golden/opt/pointwise_flat_dense.fg ce_bwd PW_FLAT_DENSE=0
tests/golden/opt/pointwise_flat_dense.fg ce_bwd PW_FLAT=2,PW_FLAT_DENSE=0
tests/graphs/l2_reverse.fg l2r_scaled_cast_scalar -
tests/graphs/l2_reverse.fg l2r_scaled_cast_scalar PW_FLAT_DENSE=0
examples/rmsnorm_bwd.fg layernorm_bwd -
examples/rmsnorm_bwd.fg layernorm_bwd CLUSTER=1
examples/rmsnorm_bwd.fg layernorm_bwd CLUSTER=4
examples/rmsnorm_bwd.fg layernorm_bwd ROWCOL_FILL=1
examples/rmsnorm_bwd.fg rmsnorm_bwd -
examples/rmsnorm_bwd.fg rmsnorm_bwd ROWCOL_FILL=1
examples/rmsnorm_bwd.fg rmsnorm_bwd CLUSTER=2
bench/suite/embedding.fg embedding_bwd -
bench/suite/embedding.fg embedding_bwd SCATTER_CHUNKS=1
bench/suite/embedding.fg embedding_bwd SCATTER_CHUNKS=4
bench/suite/embedding.fg embedding_bwd_small -
bench/suite/embedding.fg embedding_bwd_small SCATTER_CHUNKS=1
bench/fuzz_g249.fg g -
bench/fuzz_g249.fg g COL_THREADS=1
bench/fuzz_g249.fg g COL_VEC=8
bench/fuzz_g249.fg g COL_THREADS=16
LIST
ls .gpu/var | wc -l
