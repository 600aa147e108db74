#!/usr/bin/env bash
# fgwarm on the fake driver: compiles and caches, then finds the entry;
# refuses when the cache keeps nothing; an artifact with SASS for this GPU
# needs nothing (made by fusec --cubin with a fake ptxas whose "cubin" is
# the fake driver's), one with SASS for another GPU is compiled.
# usage: fgwarm_test.sh FGWARM LIBCUDA FIXTURES SCRATCH [FUSEC]
set -euo pipefail
fgwarm=$1 libcuda=$2 fixtures=$3 scratch=$4 fusec=${5:-}
rm -rf "$scratch" && mkdir -p "$scratch"
export FGL_LIBCUDA=$libcuda FUSEC_CACHE_DIR=$scratch/cache
out=$("$fgwarm" "$fixtures/add.ptx")
echo "$out"
grep -q "add.ptx: compiled for Fake GPU (sm_90) in [0-9]* ms and cached" <<<"$out"
out=$("$fgwarm" --cache-dir "$scratch/cache" "$fixtures/add.ptx" "$fixtures/sym.ptx")
echo "$out"
grep -q "add.ptx: already in the cache" <<<"$out"
grep -q "sym.ptx: compiled for Fake GPU" <<<"$out"
# another opt level is another key
"$fgwarm" --opt-level 3 "$fixtures/add.ptx" | grep -q "compiled for"
if FUSEC_CACHE=0 "$fgwarm" "$fixtures/add.ptx" 2>"$scratch/err"; then echo "FUSEC_CACHE=0 passed"; exit 1; fi
grep -q "the cache did not keep it" "$scratch/err"
if "$fgwarm" "$scratch/none.ptx" 2>"$scratch/err"; then echo "a missing file passed"; exit 1; fi
grep -q "none.ptx: cannot open" "$scratch/err"
set +e
"$fgwarm" 2>/dev/null; [ $? = 2 ] || { echo "no artifact: not exit 2"; exit 1; }
"$fgwarm" --bogus "$fixtures/add.ptx" 2>/dev/null; [ $? = 2 ] || { echo "bad flag: not exit 2"; exit 1; }
"$fgwarm" --opt-level 9 "$fixtures/add.ptx" 2>/dev/null; [ $? = 2 ] || { echo "bad level: not exit 2"; exit 1; }
set -e
if [ -n "$fusec" ]; then
  printf 'graph g(x: f32[1000]) {\n  return exp(x)\n}\n' >"$scratch/g.fg"
  # the fake driver's cubin: FAKECUBIN, a newline, the PTX, a NUL
  printf '#!/bin/sh\n{ printf "FAKECUBIN\\n"; cat "$2"; printf "\\000"; } > "$4"\n' >"$scratch/ptxas"
  chmod +x "$scratch/ptxas"
  "$fusec" "$scratch/g.fg" -o "$scratch/g.ptx" --cubin sm_90,sm_80 --arch sm_80 --ptxas "$scratch/ptxas"
  out=$("$fgwarm" "$scratch/g.ptx")
  echo "$out"
  grep -q "g.ptx: carries SASS for this GPU (Fake GPU, sm_90): nothing to cache" <<<"$out"
  out=$(FAKE_CUDA_CC=86 "$fgwarm" "$scratch/g.ptx")
  echo "$out"
  grep -q "g.ptx: compiled for Fake GPU (sm_86)" <<<"$out"
fi
echo "fgwarm_test: ok"
