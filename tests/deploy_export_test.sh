#!/usr/bin/env bash
# examples/deploy's path from PyTorch, on the CPU: `make artifact` exports
# model.py (fusec.export: .fg + manifest) and compiles every region into one
# artifact with SASS (fusec --cubin; a fake ptxas makes the fake driver's
# cubin), then the C program, built against the installed libfgload, runs
# one region with no Python, from the SASS, and from the PTX on a GPU the
# SASS is not for. Exit 77 (skipped) without torch.
# usage: deploy_export_test.sh BUILD_DIR SCRATCH SOURCE_DIR FUSEC LIBCUDA PYTHON
set -euo pipefail
build=$1 scratch=$2 src=$3 fusec=$4 libcuda=$5 python=$6
"$python" -c "import torch" 2>/dev/null || { echo "skipped: no torch for $python"; exit 77; }
rm -rf "$scratch" && mkdir -p "$scratch/out"
cmake --install "$build" --prefix "$scratch/prefix" >"$scratch/install.log"
export PKG_CONFIG_PATH=$(dirname "$(find "$scratch/prefix" -name fgload.pc | head -1)")
make -s -C "$src/examples/deploy" BUILD="$scratch/out" "$scratch/out/deploy"
printf '#!/bin/sh\n{ printf "FAKECUBIN\\n"; cat "$2"; printf "\\000"; } > "$4"\n' >"$scratch/ptxas"
chmod +x "$scratch/ptxas"
make -s -C "$src/examples/deploy" BUILD="$scratch/out" PYTHON="$python" FUSEC="$fusec" CUBIN=sm_90 \
  FUSEC_FLAGS="--arch sm_80 --ptxas $scratch/ptxas" artifact | tee "$scratch/export.log"
grep -q "left to PyTorch: aten.addmm.default x2" "$scratch/export.log"
grep -q '"graph": "block_r0"' "$scratch/out/model/block.json"
grep -q '^// fusec-sass sm_90 ' "$scratch/out/model/block.ptx"
export FGL_LIBCUDA=$libcuda FUSEC_CACHE_DIR=$scratch/cache
"$scratch/out/deploy" "$scratch/out/model/block.ptx" block_r0 2>&1 | tee "$scratch/run.log"
grep -q "loaded .*block.ptx (3 graphs) in .* ms (the artifact's SASS for sm_90)" "$scratch/run.log"
grep -q "device: Fake GPU (sm_90), load .* ms (the artifact's SASS)" "$scratch/run.log"
grep -q "result 0: f32\[64,256\] written" "$scratch/run.log"
grep -q "result 1: f32\[256,1024\] view of p2+0" "$scratch/run.log"
FAKE_CUDA_CC=89 "$scratch/out/deploy" "$scratch/out/model/block.ptx" block_r0 2>&1 | tee "$scratch/run89.log"
grep -q "carries SASS for sm_90, not for this device (Fake GPU, sm_89): JIT from PTX" "$scratch/run89.log"
grep -q "(3 graphs) in .* ms (JIT)" "$scratch/run89.log"
grep -q "device: Fake GPU (sm_89), load .* ms (PTX JIT)" "$scratch/run89.log"
grep -q "result 0: f32\[64,256\] written" "$scratch/run89.log"
echo "deploy_export: ok"
