# T1: row + column variants of GPT-2's sunk LayerNorm-backward region and the GELU-backward
#     bias sum (fgrun --bench), COL_VEC=4 alone; Llama under --seqs (693bb8a's CPU-input fix)
set -u
export XXHASH_ROOT=$PWD/.deps/root PYTHONUNBUFFERED=1
L=/tmp/t1; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
cmake -S . -B build-gpu -DFUSEC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release >$L/cmake.log 2>&1 || { tail -30 $L/cmake.log; exit 1; }
cmake --build build-gpu -j16 >$L/build.log 2>&1 || { grep -E "error|Error" $L/build.log | head -30; exit 1; }
echo "built at $SECONDS s"
FGRUN=build-gpu/tools/fgrun
for ptx in .gl/t1/var/*.ptx; do
  n=$(basename $ptx .ptx); g=${n%%@*}
  timeout 60 $FGRUN $ptx --graph $g --bench 30 --seed 1 2>&1 | grep -E '^bench.*(median .* GB/s$|fraction [0-9])' | sed "s|^bench [^:]*:|$n|" | tr '\n' ' ' | sed 's/$/\n/' | tee -a $L/var.txt >/dev/null
done
cp $L/var.txt $OUT/
echo "variants done at $SECONDS s: $(wc -l < $L/var.txt) lines"
ext=$(ls build-gpu/python/fusec/_fgcall*.so | head -1)
( export FGLOAD_LIBRARY=$PWD/build-gpu/loader/libfgload.so FUSEC_FGCALL=$ext PYTHONPATH=$PWD/python
  export FUSEC_BACKEND_CACHE=$PWD/.gl/models FUSEC_BACKEND_ATTENTION=flash FUSEC_BACKEND_PENDING=$L/pend
  mkdir -p $L/pend
  timeout 330 python3 examples/models/train_step.py --models llama --cudnn-sdp --isolate model --modes eager,default,fusec --seqs 256,512,1024 --steps 12 --warmup 3 --out $OUT/llama_seqs.json > $L/llama.log 2>&1; echo "llama exit $? pending $(ls $L/pend | wc -l)"
  tail -25 $L/llama.log )
cp $L/llama.log $OUT/
tar czf $OUT/t1_pend.tgz -C $L pend
echo "all done at $SECONDS s"
