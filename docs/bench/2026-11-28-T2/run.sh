# T2: GPU checks of the graphs whose plans the new rules change (reduce-reshape, late column
#     reductions, 8-byte column vectors), of the changed and new model regions; fgrun --bench of
#     GPT-2's LayerNorm-backward and GELU-backward regions old vs new; wgrad_sums vs torch.compile
set -u
export XXHASH_ROOT=$PWD/.deps/root PYTHONUNBUFFERED=1
L=/tmp/t2; mkdir -p $L
tar xzf .gl/pack.tar.gz
cmake -S . -B build-gpu -DFUSEC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release >$L/cmake.log 2>&1 || { tail -30 $L/cmake.log; exit 1; }
cmake --build build-gpu -j16 >$L/build.log 2>&1 || { grep -E "error|Error" $L/build.log | head -30; exit 1; }
echo "built at $SECONDS s"
FGRUN=build-gpu/tools/fgrun
for ptx in .gl/t2/var/*.ptx; do
  n=$(basename $ptx .ptx); g=${n%%@*}
  timeout 60 $FGRUN $ptx --graph $g --bench 30 --seed 1 2>&1 | grep -E '^bench.*(median .* GB/s$|fraction [0-9])' | sed "s|^bench [^:]*:|$n|" | tr '\n' ' ' | sed 's/$/\n/' | tee -a $L/var.txt >/dev/null
done
cp $L/var.txt $OUT/
echo "variants done at $SECONDS s"
OUT=$L/bench BENCH_PREP=.gl/t2/bench BENCH_BUDGET_S=120 bash bench/run.sh --only wgrad_sums,wgrad_sums_small --skip-max-autotune > $L/bench_run.txt 2>&1
cp $L/bench/bench.md $OUT/ 2>/dev/null; grep -E "wgrad" $L/bench/bench.md | head
echo "bench done at $SECONDS s"
cat .gl/chk_models.txt .gl/chk_t2.txt > $L/jobs.txt
OUT=$L/o FG_JOBS=15 FG_LOG=$L/chk FG_JOBS_FILE=$L/jobs.txt FG_CHECK_TIMEOUT=240 FG_PREBUILT_FGRUN=$FGRUN timeout 380 bash tests/gpu/device_run.sh check > $L/check.txt 2>&1
echo "check exit $? at $SECONDS s"; tail -30 $L/check.txt
cp $L/chk/check_summary.txt $OUT/ 2>/dev/null
tar czf $OUT/t2_logs.tgz -C $L check.txt bench_run.txt chk/check_summary.txt 2>/dev/null
echo "all done at $SECONDS s"
