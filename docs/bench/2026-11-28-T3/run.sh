# T3: GPU checks of the plans the cluster cap changes; GPT-2 static, default and fusec with
#     FUSEC_BACKEND_SINK_SUMS=0 (new compiler), each mode its own process; the regions of
#     SINK_SUMS=rows recorded for GPT-2 and Llama (pending, to fill on the build machine)
set -u
export XXHASH_ROOT=$PWD/.deps/root PYTHONUNBUFFERED=1
L=/tmp/t3; mkdir -p $L
cmake -S . -B build-gpu -DFUSEC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release >$L/cmake.log 2>&1 || { tail -30 $L/cmake.log; exit 1; }
cmake --build build-gpu -j16 >$L/build.log 2>&1 || { grep -E "error|Error" $L/build.log | head -30; exit 1; }
echo "built at $SECONDS s"
FGRUN=build-gpu/tools/fgrun
OUT=$L/o FG_JOBS=15 FG_LOG=$L/chk FG_JOBS_FILE=.gl/t3/jobs.txt FG_CHECK_TIMEOUT=240 FG_PREBUILT_FGRUN=$FGRUN timeout 250 bash tests/gpu/device_run.sh check > $L/check.txt 2>&1
echo "check exit $? at $SECONDS s"; tail -6 $L/check.txt
cp $L/chk/check_summary.txt $OUT/ 2>/dev/null
ext=$(ls build-gpu/python/fusec/_fgcall*.so | head -1)
export FGLOAD_LIBRARY=$PWD/build-gpu/loader/libfgload.so FUSEC_FGCALL=$ext PYTHONPATH=$PWD/python
export FUSEC_BACKEND_CACHE=$PWD/.gl/models FUSEC_BACKEND_ATTENTION=flash
T=examples/models/train_step.py
mkdir -p $L/pend_rows $L/pend0
FUSEC_BACKEND_PENDING=$L/pend0 FUSEC_BACKEND_SINK_SUMS=0 timeout 200 python3 $T --models gpt2 --cudnn-sdp --isolate mode --modes default,fusec --steps 20 --warmup 5 --out $OUT/gpt2_sink0.json > $L/gpt2_sink0.log 2>&1
echo "gpt2 sink0 exit $? at $SECONDS s, pending $(ls $L/pend0 | wc -l)"
grep -E "^  (default|fusec) |CUDA a step|regions|missing" $L/gpt2_sink0.log | head -12
for m in gpt2 llama; do
  FUSEC_BACKEND_PENDING=$L/pend_rows FUSEC_BACKEND_SINK_SUMS=rows timeout 100 python3 $T --models $m --cudnn-sdp --isolate none --modes fusec --steps 2 --warmup 1 --profile-modes none > $L/rec_$m.log 2>&1
  echo "rec $m exit $? at $SECONDS s, pending $(ls $L/pend_rows | wc -l)"; grep -E "fusec: |sunk" $L/rec_$m.log | head -3
done
cp $L/gpt2_sink0.log $OUT/
tar czf $OUT/t3_pend.tgz -C $L pend_rows pend0 rec_gpt2.log rec_llama.log check.txt
echo "all done at $SECONDS s"
