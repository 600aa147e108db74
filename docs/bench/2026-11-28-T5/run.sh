# T5: GPU checks of the plans the late placement's row-domain condition changes (final compiler);
#     Llama, fusec with FUSEC_BACKEND_SINK_SUMS=0 (T4 ran it with rows), its own process
set -u
export XXHASH_ROOT=$PWD/.deps/root PYTHONUNBUFFERED=1
L=/tmp/t5; mkdir -p $L
cmake -S . -B build-gpu -DFUSEC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release >$L/cmake.log 2>&1 || { tail -30 $L/cmake.log; exit 1; }
cmake --build build-gpu -j16 >$L/build.log 2>&1 || { grep -E "error|Error" $L/build.log | head -30; exit 1; }
echo "built at $SECONDS s"
FGRUN=build-gpu/tools/fgrun
OUT=$L/o FG_JOBS=15 FG_LOG=$L/chk FG_JOBS_FILE=.gl/t5/jobs.txt FG_CHECK_TIMEOUT=200 FG_PREBUILT_FGRUN=$FGRUN timeout 240 bash tests/gpu/device_run.sh check > $L/check.txt 2>&1
echo "check exit $? at $SECONDS s"; tail -8 $L/check.txt
cp $L/chk/check_summary.txt $OUT/ 2>/dev/null
ext=$(ls build-gpu/python/fusec/_fgcall*.so | head -1)
export FGLOAD_LIBRARY=$PWD/build-gpu/loader/libfgload.so FUSEC_FGCALL=$ext PYTHONPATH=$PWD/python
export FUSEC_BACKEND_CACHE=$PWD/.gl/models FUSEC_BACKEND_ATTENTION=flash FUSEC_BACKEND_SINK_SUMS=0
mkdir -p $L/pend
FUSEC_BACKEND_PENDING=$L/pend timeout 150 python3 examples/models/train_step.py --models llama --cudnn-sdp --isolate mode --modes fusec --steps 20 --warmup 5 --out $OUT/llama_sink0.json > $L/llama_sink0.log 2>&1
echo "llama sink0 exit $? at $SECONDS s, pending $(ls $L/pend | wc -l)"
grep -E "^  (default|fusec) |CUDA a step|regions|missing" $L/llama_sink0.log | head -4
cp $L/llama_sink0.log $OUT/
echo "all done at $SECONDS s"
