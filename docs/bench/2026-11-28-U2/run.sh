# U2: GPT-2 with cuDNN SDPA: default vs fusec (SINK_SUMS 0) vs fusec (SINK_SUMS 1), each in its own process;
#     GPT-2 under dynamic=True at lengths 256/512/1024: eager, default, fusec (regions written per length)
set -u
export XXHASH_ROOT=$PWD/.deps/root PYTHONUNBUFFERED=1
L=/tmp/u2; mkdir -p $L/pending
if [ ! -f build-gpu/loader/libfgload.so ]; then
cmake -S . -B build-gpu -DFUSEC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release >$L/cmake.log 2>&1 || { tail -30 $L/cmake.log; exit 1; }
cmake --build build-gpu -j16 >$L/build.log 2>&1 || { grep -E "error|Error" $L/build.log | head -30; exit 1; }
fi
ext=$(ls build-gpu/python/fusec/_fgcall*.so | head -1)
export FGLOAD_LIBRARY=$PWD/build-gpu/loader/libfgload.so FUSEC_FGCALL=$ext PYTHONPATH=$PWD/python
export FUSEC_BACKEND_CACHE=$PWD/.gl/models FUSEC_BACKEND_PENDING=$L/pending FUSEC_BACKEND_ATTENTION=flash
T=examples/models/train_step.py
timeout 150 python3 $T --models gpt2 --cudnn-sdp --isolate mode --modes default,fusec --out $L/sink0.json >$L/sink0.log 2>&1; echo "sink0 exit $? at $SECONDS s"
FUSEC_BACKEND_SINK_SUMS=1 timeout 80 python3 $T --models gpt2 --cudnn-sdp --isolate mode --modes fusec --out $L/sink1.json >$L/sink1.log 2>&1; echo "sink1 exit $? at $SECONDS s"
grep -hE "^  (default|fusec) +loss|profile:|fusec: |sunk" $L/sink0.log $L/sink1.log
timeout 240 python3 $T --models gpt2 --cudnn-sdp --isolate model --modes eager,default,fusec --seqs 256,512,1024 --steps 12 --warmup 3 --out $L/dyn_gpt2.json >$L/dyn_gpt2.log 2>&1; echo "dyn gpt2 exit $? at $SECONDS s"
grep -vE "Warning|warn\(|^fusec: no|stays in PyTorch" $L/dyn_gpt2.log | tail -32
echo "pending: $(ls $L/pending | wc -l)"
cp $L/*.json $OUT/ 2>/dev/null
tar czf $OUT/u2_logs.tgz -C $L sink0.log sink1.log dyn_gpt2.log pending
