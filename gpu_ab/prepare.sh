#!/usr/bin/env bash
# On the build machine, from the worktree root (branch attnws2): compiles
# the A/B artifacts gpu_ab/run.sh times on the GPU, one graph each:
#   .gpu/ab/<variant>_<graph>.ptx
# graphs attn_fwd, attn_fwd_causal, attn_fwd_long_causal of
# bench/suite/attention.fg at --arch sm_90a; variants: default (no knob),
# ws1, ws2 (ATTN_WS), pp1, pp2 (ATTN_PINGPONG), noovl (ATTN_OVERLAP=0);
# and the same with SASS from whole-program ptxas in the artifact
# (fusec --cubin sm_90a) as .gpu/ab/sass/<variant>_<graph>.ptx: the
# driver's JIT compiles PTX as relocatable code (cuLink), where ptxas
# ignores setmaxnreg (C7504), so the ATTN_WS kernels JIT-compiled keep
# 168 registers a thread, spill and serialize their wgmmas (C7512);
# only the SASS set runs them as designed (README.md).
# Also checks, per artifact, that ptxas (whole-program and relocatable,
# -c, as the driver's JIT compiles) reports no serialized wgmma and no
# spill in the cp.async (_v) kernels; a finding is printed, not fatal.
#   gpu_ab/prepare.sh [FUSEC]   (default build/tools/fusec)
set -eu
cd "$(dirname "$0")/.."
FUSEC=${1:-build/tools/fusec}
PTXAS=${PTXAS:-/usr/local/cuda/bin/ptxas}
out=.gpu/ab
rm -rf "$out"
mkdir -p "$out/sass"
variants="default ws1:ATTN_WS=1 ws2:ATTN_WS=2 pp1:ATTN_PINGPONG=1 pp2:ATTN_PINGPONG=2 noovl:ATTN_OVERLAP=0"
graphs="attn_fwd attn_fwd_causal attn_fwd_long_causal"
for vk in $variants; do
  v=${vk%%:*}
  knob=()
  [ "$vk" = "$v" ] || knob=(--knob "${vk#*:}")
  for g in $graphs; do
    f=$out/${v}_$g.ptx
    "$FUSEC" bench/suite/attention.fg --graph "$g" --arch sm_90a "${knob[@]}" -o "$f"
    "$FUSEC" bench/suite/attention.fg --graph "$g" --arch sm_90a "${knob[@]}" --cubin sm_90a -o "$out/sass/${v}_$g.ptx"
    if [ -x "$PTXAS" ]; then
      for mode in whole reloc; do
        flags=(-arch=sm_90a -v)
        [ $mode = reloc ] && flags+=(-c)
        "$PTXAS" "${flags[@]}" "$f" -o "$out/x.o" >"$out/x.v" 2>&1 || { echo "ptxas $mode failed: $f"; cat "$out/x.v"; exit 1; }
        # the _v kernels' lines: serialized wgmma (info C75xx) or spills
        awk '/C7504/ && !seen++ { print }
             /serialized/ && /_v\047/ { print }
             /Function properties for/ { fn = $NF }
             fn ~ /_v$/ && /[1-9][0-9]* bytes spill/ { print fn ":" $0 }' "$out/x.v" |
          sed "s|^|$f ($mode): |"
      done
    fi
  done
done
rm -f "$out/x.o" "$out/x.v"
echo "$(ls "$out"/*.ptx | wc -l) PTX-only and $(ls "$out"/sass/*.ptx | wc -l) with SASS artifacts in $out"
# The correctness checks to run on the GPU first (README.md): the
# attention test graphs at sm_90a with each knob, named as
# tests/gpu/prepare.sh names them (which writes the same files, and more,
# but starts with rm -rf .gpu: run it before this script, not after), for
# tests/gpu/device_run.sh check (aligned and --misalign).
mkdir -p .gpu/ptx-sm90a .gpu/ptx-sm90a-ws1 .gpu/ptx-sm90a-ws2 .gpu/ptx-sm90a-pingpong1 .gpu/ptx-sm90a-pingpong2
name() { echo "$(dirname "$1" | tr / _)__$(basename "$1" .fg).ptx"; }
for f in tests/graphs/attention_wgmma.fg tests/graphs/attention_fwd.fg tests/graphs/attention_overlap.fg tests/graphs/attention_ws.fg; do
  "$FUSEC" "$f" --arch sm_90a -o ".gpu/ptx-sm90a/$(name "$f")"
done
for k in 1 2; do
  for f in tests/graphs/attention_ws.fg tests/graphs/attention_wgmma.fg tests/graphs/attention_overlap.fg; do
    "$FUSEC" "$f" --arch sm_90a --knob ATTN_WS=$k -o ".gpu/ptx-sm90a-ws$k/$(name "$f")"
  done
  for f in tests/graphs/attention_wgmma.fg tests/graphs/attention_fwd.fg tests/graphs/attention_overlap.fg; do
    "$FUSEC" "$f" --arch sm_90a --knob ATTN_PINGPONG=$k -o ".gpu/ptx-sm90a-pingpong$k/$(name "$f")"
  done
done
# xxHash for the GPU machine's build of fgrun (as tests/gpu/prepare.sh)
if [ ! -d .deps/root ]; then
  if [ -d /work/main/.deps/root ]; then
    cp -r /work/main/.deps .
  else
    mkdir -p .deps && (cd .deps && apt-get download libxxhash0 libxxhash-dev >/dev/null 2>&1 &&
      for d in *.deb; do dpkg -x "$d" root; done)
  fi
fi
