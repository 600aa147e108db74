# U1: column-sum experiment (fgrun --bench, knob variants), wgrad_sums vs torch (bench.py),
#     GPT-2 regions recorded with SINK_SUMS=1, GPT-2/Llama recorded under --seqs (dynamic=True)
set -u
export XXHASH_ROOT=$PWD/.deps/root PYTHONUNBUFFERED=1
L=/tmp/u1; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
cmake -S . -B build-gpu -DFUSEC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release >$L/cmake.log 2>&1 || { tail -30 $L/cmake.log; exit 1; }
cmake --build build-gpu -j16 >$L/build.log 2>&1 || { grep -E "error|Error" $L/build.log | head -30; exit 1; }
echo "built at $SECONDS s"
FGRUN=build-gpu/tools/fgrun
for ptx in .gl/u1/var/*.ptx; do
  n=$(basename $ptx .ptx); g=${n%%@*}
  timeout 60 $FGRUN $ptx --graph $g --bench 30 --seed 1 2>&1 | grep -E '^bench.*(median .* GB/s$|fraction [0-9])' | sed "s|^bench [^:]*:|$n|" | tr '\n' ' ' | sed 's/$/\n/' | tee -a $L/var.txt >/dev/null
done
cp $L/var.txt $OUT/
echo "variants done at $SECONDS s: $(wc -l < $L/var.txt) lines"
OUT=$L/bench BENCH_PREP=.gl/u1/bench BENCH_BUDGET_S=150 bash bench/run.sh --only wgrad_sums,wgrad_sums_small --skip-max-autotune > $L/bench_run.txt 2>&1
cp $L/bench/bench.md $OUT/ 2>/dev/null; grep -E "wgrad" $L/bench/bench.md | head
echo "bench done at $SECONDS s"
ext=$(ls build-gpu/python/fusec/_fgcall*.so | head -1)
( export FGLOAD_LIBRARY=$PWD/build-gpu/loader/libfgload.so FUSEC_FGCALL=$ext PYTHONPATH=$PWD/python
  export FUSEC_BACKEND_CACHE=$PWD/.gl/models FUSEC_BACKEND_ATTENTION=flash
  T=examples/models/train_step.py
  mkdir -p $L/pend_sink $L/pend_dyn
  FUSEC_BACKEND_PENDING=$L/pend_sink FUSEC_BACKEND_SINK_SUMS=1 timeout 100 python3 $T --models gpt2 --cudnn-sdp --isolate none --modes fusec --steps 2 --warmup 1 --profile-modes none > $L/rec_sink.log 2>&1; echo "rec sink exit $? pending $(ls $L/pend_sink | wc -l)"
  grep -E "fusec: |sunk" $L/rec_sink.log | head -3
  for m in gpt2 llama; do
    FUSEC_BACKEND_PENDING=$L/pend_dyn timeout 110 python3 $T --models $m --cudnn-sdp --isolate none --modes fusec --seqs 256,512,1024 --steps 3 --warmup 0 --profile-modes none > $L/rec_dyn_$m.log 2>&1; echo "rec dyn $m exit $? pending $(ls $L/pend_dyn | wc -l)"
    grep -E "fusec: |written at|FAIL|Error" $L/rec_dyn_$m.log | head -5
  done )
tar czf $OUT/u1_pend.tgz -C $L pend_sink pend_dyn rec_sink.log rec_dyn_gpt2.log rec_dyn_llama.log bench_run.txt
echo "all done at $SECONDS s"
