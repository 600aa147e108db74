# T4: GPT-2's weight-gradient region g_d539612508bc (FUSEC_BACKEND_SINK_SUMS=0) standalone, old
#     compiler vs new vs new with LATE_COLUMNS=0 (fgrun --bench); GPT-2 and Llama with
#     FUSEC_BACKEND_SINK_SUMS=rows, default and fusec, each mode its own process
set -u
export XXHASH_ROOT=$PWD/.deps/root PYTHONUNBUFFERED=1
L=/tmp/t4; mkdir -p $L
cmake -S . -B build-gpu -DFUSEC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release >$L/cmake.log 2>&1 || { tail -30 $L/cmake.log; exit 1; }
cmake --build build-gpu -j16 >$L/build.log 2>&1 || { grep -E "error|Error" $L/build.log | head -30; exit 1; }
echo "built at $SECONDS s"
FGRUN=build-gpu/tools/fgrun
for ptx in .gl/t4/var/*.ptx; do
  n=$(basename $ptx .ptx); g=${n%%@*}
  timeout 90 $FGRUN $ptx --graph $g --bench 20 --seed 1 2>&1 | grep -E '^bench.*(median .* GB/s$|fraction [0-9])' | sed "s|^bench [^:]*:|$n|" | tr '\n' ' ' | sed 's/$/\n/' | tee -a $L/var.txt
done
cp $L/var.txt $OUT/
echo "variants done at $SECONDS s"
ext=$(ls build-gpu/python/fusec/_fgcall*.so | head -1)
export FGLOAD_LIBRARY=$PWD/build-gpu/loader/libfgload.so FUSEC_FGCALL=$ext PYTHONPATH=$PWD/python
export FUSEC_BACKEND_CACHE=$PWD/.gl/models FUSEC_BACKEND_ATTENTION=flash FUSEC_BACKEND_SINK_SUMS=rows
T=examples/models/train_step.py
mkdir -p $L/pend
for m in gpt2 llama; do
  FUSEC_BACKEND_PENDING=$L/pend timeout 230 python3 $T --models $m --cudnn-sdp --isolate mode --modes default,fusec --steps 20 --warmup 5 --out $OUT/${m}_rows.json > $L/${m}_rows.log 2>&1
  echo "$m rows exit $? at $SECONDS s, pending $(ls $L/pend | wc -l)"
  grep -E "^  (default|fusec) |CUDA a step|regions|missing" $L/${m}_rows.log | head -6
done
cp $L/gpt2_rows.log $L/llama_rows.log $OUT/
echo "all done at $SECONDS s"
