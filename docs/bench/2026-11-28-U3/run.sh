# U3: record GPT-2 and Llama regions under --seqs with the layouts fix (specialize.py), then the rest of the check
set -u
export XXHASH_ROOT=$PWD/.deps/root PYTHONUNBUFFERED=1
L=/tmp/u3; mkdir -p $L/pending
if [ ! -f build-gpu/loader/libfgload.so ]; then
cmake -S . -B build-gpu -DFUSEC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release >$L/cmake.log 2>&1 || { tail -30 $L/cmake.log; exit 1; }
cmake --build build-gpu -j16 >$L/build.log 2>&1 || { grep -E "error|Error" $L/build.log | head -30; exit 1; }
fi
ext=$(ls build-gpu/python/fusec/_fgcall*.so | head -1)
( export FGLOAD_LIBRARY=$PWD/build-gpu/loader/libfgload.so FUSEC_FGCALL=$ext PYTHONPATH=$PWD/python
  export FUSEC_BACKEND_CACHE=$PWD/.gl/models FUSEC_BACKEND_PENDING=$L/pending FUSEC_BACKEND_ATTENTION=flash
  for m in gpt2 llama; do
    timeout 100 python3 examples/models/train_step.py --models $m --cudnn-sdp --isolate none --modes fusec --seqs 256,512,1024 --steps 3 --warmup 0 --profile-modes none > $L/rec_$m.log 2>&1; echo "rec $m exit $? pending $(ls $L/pending | wc -l) at $SECONDS s"
    grep -E "fusec: |a step" $L/rec_$m.log
  done )
tar czf $OUT/u3_pend.tgz -C $L pending rec_gpt2.log rec_llama.log
tar xzf .gl/pack.tar.gz
OUT=$L/o FG_JOBS=15 FG_LOG=$L/chk FG_JOBS_FILE=.gl/chk_rest2.txt timeout 200 bash tests/gpu/device_run.sh check > $L/check.txt 2>&1; echo "check exit $? at $SECONDS s"; grep -v "^PASS" $L/check.txt | tail -20
echo "check: $(grep -c ^PASS $L/chk/check_summary.txt) passed, $(grep -c ^FAIL $L/chk/check_summary.txt) failed of $(wc -l < .gl/chk_rest2.txt)"
cp $L/chk/check_summary.txt $OUT/
