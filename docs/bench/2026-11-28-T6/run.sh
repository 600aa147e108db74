# T6: Llama with FUSEC_BACKEND_SINK_SUMS=rows after the deeper leads (RMSNorm's x_hat moves with
#     its weight gradient): GPU checks of its 5 new regions; default and fusec, each its own process
set -u
export XXHASH_ROOT=$PWD/.deps/root PYTHONUNBUFFERED=1
L=/tmp/t6; mkdir -p $L
cmake -S . -B build-gpu -DFUSEC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release >$L/cmake.log 2>&1 || { tail -30 $L/cmake.log; exit 1; }
cmake --build build-gpu -j16 >$L/build.log 2>&1 || { grep -E "error|Error" $L/build.log | head -30; exit 1; }
FGRUN=build-gpu/tools/fgrun
OUT=$L/o FG_JOBS=5 FG_LOG=$L/chk FG_JOBS_FILE=.gl/t6/jobs.txt FG_CHECK_TIMEOUT=90 FG_PREBUILT_FGRUN=$FGRUN timeout 100 bash tests/gpu/device_run.sh check > $L/check.txt 2>&1
echo "check exit $? at $SECONDS s"; tail -4 $L/check.txt
ext=$(ls build-gpu/python/fusec/_fgcall*.so | head -1)
export FGLOAD_LIBRARY=$PWD/build-gpu/loader/libfgload.so FUSEC_FGCALL=$ext PYTHONPATH=$PWD/python
export FUSEC_BACKEND_CACHE=$PWD/.gl/models FUSEC_BACKEND_ATTENTION=flash FUSEC_BACKEND_SINK_SUMS=rows
mkdir -p $L/pend
FUSEC_BACKEND_PENDING=$L/pend timeout 190 python3 examples/models/train_step.py --models llama --cudnn-sdp --isolate mode --modes default,fusec --steps 20 --warmup 5 --out $OUT/llama_rows2.json > $L/llama.log 2>&1
echo "llama exit $? at $SECONDS s, pending $(ls $L/pend | wc -l)"
grep -E "^  (default|fusec) |CUDA a step|regions|missing" $L/llama.log | head -6
cp $L/llama.log $OUT/; cp $L/chk/check_summary.txt $OUT/ 2>/dev/null
