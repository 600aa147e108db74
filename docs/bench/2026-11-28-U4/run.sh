# U4: GPT-2 and Llama under dynamic=True at lengths 256/512/1024 (eager, default, fusec), regions with layouts; host time
set -u
export XXHASH_ROOT=$PWD/.deps/root PYTHONUNBUFFERED=1
L=/tmp/u4; mkdir -p $L/pending
if [ ! -f build-gpu/loader/libfgload.so ]; then
cmake -S . -B build-gpu -DFUSEC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release >$L/cmake.log 2>&1 || { tail -30 $L/cmake.log; exit 1; }
cmake --build build-gpu -j16 >$L/build.log 2>&1 || { grep -E "error|Error" $L/build.log | head -30; exit 1; }
fi
ext=$(ls build-gpu/python/fusec/_fgcall*.so | head -1)
export FGLOAD_LIBRARY=$PWD/build-gpu/loader/libfgload.so FUSEC_FGCALL=$ext PYTHONPATH=$PWD/python
export FUSEC_BACKEND_CACHE=$PWD/.gl/models FUSEC_BACKEND_PENDING=$L/pending FUSEC_BACKEND_ATTENTION=flash
for m in gpt2 llama; do
  timeout 200 python3 examples/models/train_step.py --models $m --cudnn-sdp --isolate model --modes eager,default,fusec --seqs 256,512,1024 --steps 12 --warmup 3 --out $L/dyn_$m.json >$L/dyn_$m.log 2>&1; echo "dyn $m exit $? at $SECONDS s"
  sed -n '/^== /,$p' $L/dyn_$m.log | grep -vE "Warning|warn\(|^fusec: no|stays in PyTorch"
  cp $L/dyn_$m.json $OUT/
done
echo "pending: $(ls $L/pending | wc -l)"
timeout 80 python3 tests/gpu/step_host_time.py gpt2 fusec,default 256,512,1024 > $L/host.log 2>&1; echo "host exit $? at $SECONDS s"
grep -E "host ms|tottime|^ +[0-9]" $L/host.log | head -40
tar czf $OUT/u4_logs.tgz -C $L dyn_gpt2.log dyn_llama.log host.log pending
