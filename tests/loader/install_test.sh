#!/usr/bin/env bash
# Installs libfgload from BUILD_DIR into a scratch prefix, builds
# examples/deploy against the installed copy with pkg-config (shared and
# static), and runs it on an artifact through the given libcuda stand-in.
# usage: install_test.sh BUILD_DIR SCRATCH DEPLOY_SRC ARTIFACT LIBCUDA
set -euo pipefail
build=$1 scratch=$2 src=$3 artifact=$4 libcuda=$5
rm -rf "$scratch"
mkdir -p "$scratch/out"
cmake --install "$build" --prefix "$scratch/prefix" > "$scratch/install.log"
pc=$(dirname "$(find "$scratch/prefix" -name fgload.pc | head -1)")
test -f "$scratch/prefix/include/fgload.h"
ls "$scratch"/prefix/lib*/libfgload.a "$scratch"/prefix/lib*/libfgload.so* > /dev/null 2>&1 || ls "$scratch"/prefix/lib*/*/libfgload.a > /dev/null
export PKG_CONFIG_PATH=$pc
echo "pkg-config: $(pkg-config --cflags --libs fgload)"
make -s -C "$src" BUILD="$scratch/out"
# the example must not link libcuda (it is dlopen'ed)
if ldd "$scratch/out/deploy" | grep -q libcuda; then echo "deploy links libcuda"; exit 1; fi
FGL_LIBCUDA=$libcuda FUSEC_CACHE_DIR=$scratch/cache "$scratch/out/deploy" "$artifact" | tee "$scratch/run.log"
grep -q "result 0: f32\[1048576\] written" "$scratch/run.log"
grep -q "result 1: f32\[1024,1024\] view of p0+0" "$scratch/run.log"
# a graph with symbolic sizes: N from the command line, shapes from the loader
FGL_LIBCUDA=$libcuda FUSEC_CACHE_DIR=$scratch/cache "$scratch/out/deploy" "$(dirname "$artifact")/sym.ptx" axpy_n N=64 | tee "$scratch/run_sym.log"
grep -q "result 0: f32\[64\] written" "$scratch/run_sym.log"
grep -q "result 1: f32\[32\] view of r0+32" "$scratch/run_sym.log"
# static link through pkg-config --static
cc -std=c11 -O2 $(pkg-config --cflags fgload) "$src/main.c" -o "$scratch/out/deploy_static" \
   -Wl,-Bstatic $(pkg-config --libs-only-L fgload) -lfgload -Wl,-Bdynamic $(pkg-config --static --libs-only-l fgload | sed 's/-lfgload//') -lm
FGL_LIBCUDA=$libcuda FUSEC_CACHE_DIR=$scratch/cache "$scratch/out/deploy_static" "$artifact" ident | grep -q "result 0: f32\[8,4\] view of p0+0"
echo "install_and_deploy: ok"
