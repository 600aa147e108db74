#!/usr/bin/env python3
"""The benchmark workloads: each one a .fg graph (a template of an example
graph of examples/, with its shapes as parameters) and a PyTorch reference
function written op by op to match the graph's semantics.

Every template, instantiated at its example's shapes, is checked to be the
example graph (comments and spacing aside): `check-templates`, also run by
`prepare`. The example files themselves are not touched.

Commands (build machine; plain python3, no torch needed):
  workloads.py list
  workloads.py check-templates
  workloads.py emit DIR                    one DIR/NAME.fg per workload
  workloads.py prepare --fusec F --out D [--tiny] [--arch sm_90a] [--cubin sm_90a] [--only A,B]
                                           emit into D/fg, compile each into
                                           D/ptx/NAME.ptx with F (timed, median
                                           of 3), write D/compile.json (--tiny:
                                           the tiny shapes, for bench.py
                                           --dry-run-cpu)
  workloads.py check-refs --fgrun F        (needs torch + numpy, CPU) runs every
                                           reference at tiny shapes against the
                                           CPU interpreter of fgrun
"""
import json
import os
import re
import string
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---- .fg templates (bodies copied from examples/*.fg; $NAME are shapes) ----

T = {}

T["bias_gelu"] = """
graph $name(x: bf16[$M,$N], bias: bf16[$N]) {
  return gelu(add(x, bias), approximate="tanh")
}"""

T["bias_gelu_small"] = """
graph $name(x: f32[$M,$N], bias: f32[$N]) {
  h = add(x, bias)
  y = gelu(h, approximate="tanh")
  return y
}"""

T["bias_gelu_formula_small"] = """
graph $name(y: f32[$M,$N], bias: f32[$N]) {
  x = add(bias, y)
  inner = mul(mul(0.79788456, x), add(1.0, mul(mul(0.044715, x), x)))
  return mul(mul(x, 0.5), add(1.0, tanh(inner)))
}"""

T["layer_norm"] = """
graph $name(x: bf16[$B,$T,$C], w: bf16[$C], b: bf16[$C]) {
  xf = cast(x, dtype=f32)
  var, mean = var_mean(xf, dims=[2], correction=0, keepdim=false)
  var_k = broadcast_in_dim(var, shape=[$B,$T,1], dims=[0,1])
  mean_k = broadcast_in_dim(mean, shape=[$B,$T,1], dims=[0,1])
  rstd = rsqrt(add(var_k, 1e-5))
  xhat = mul(sub(xf, mean_k), rstd)
  wf = broadcast_in_dim(cast(w, dtype=f32), shape=[$B,$T,$C], dims=[2])
  bf = broadcast_in_dim(cast(b, dtype=f32), shape=[$B,$T,$C], dims=[2])
  y = add(mul(xhat, wf), bf)
  return cast(y, dtype=bf16), mean_k, rstd
}"""

T["layer_norm_large"] = """
graph $name(x: bf16[$M,$N], w: bf16[$N], b: bf16[$N]) {
  xf = cast(x, dtype=f32)
  var, mean = var_mean(xf, dims=[1], correction=0, keepdim=true)
  rstd = rsqrt(add(var, 1e-5))
  xhat = mul(sub(xf, mean), rstd)
  y = add(mul(xhat, cast(w, dtype=f32)), cast(b, dtype=f32))
  return cast(y, dtype=bf16), mean, rstd
}"""

T["softmax"] = """
graph $name(x: bf16[$M,$N]) {
  xf = cast(x, dtype=f32)
  m = amax(xf, dims=[1], keepdim=true)
  e = exp(sub(xf, m))
  s = sum(e, dims=[1], keepdim=true)
  y = div(e, s)
  return cast(y, dtype=bf16)
}"""

T["softmax_small"] = """
graph $name(x: bf16[$M,$N]) {
  xf = cast(x, dtype=f32)
  e = exp(sub(xf, amax(xf, dims=[-1], keepdim=true)))
  return cast(div(e, sum(e, dims=[-1], keepdim=true)), dtype=bf16)
}"""

T["sum_rows"] = """
graph $name(x: f32[$M,$N]) {
  return sum(x, dims=[1])
}"""

T["sum_cols"] = """
graph $name(x: f32[$M,$N]) {
  return sum(x, dims=[0])
}"""

T["rmsnorm_bwd"] = """
graph $name(x: bf16[$M,$N], w: bf16[$N], dy: bf16[$M,$N], rstd: f32[$M]) {
  xf = cast(x, dtype=f32)
  dyf = cast(dy, dtype=f32)
  r = unsqueeze(rstd, dim=1)
  xhat = mul(xf, r)
  g = mul(dyf, cast(w, dtype=f32))
  c = mean(mul(g, xhat), dims=[1], keepdim=true)
  dx = mul(sub(g, mul(xhat, c)), r)
  dw = sum(mul(dyf, xhat), dims=[0])
  return cast(dx, dtype=bf16), cast(dw, dtype=bf16)
}"""

T["layernorm_bwd"] = """
graph $name(x: bf16[$M,$N], w: bf16[$N], dy: bf16[$M,$N], mu: f32[$M,1], rstd: f32[$M,1]) {
  xf = cast(x, dtype=f32)
  dyf = cast(dy, dtype=f32)
  xhat = mul(sub(xf, mu), rstd)
  g = mul(dyf, cast(w, dtype=f32))
  g_mean = mean(g, dims=[1], keepdim=true)
  gx_mean = mean(mul(g, xhat), dims=[1], keepdim=true)
  dx = mul(rstd, sub(sub(g, g_mean), mul(xhat, gx_mean)))
  dw = sum(mul(dyf, xhat), dims=[0])
  db = sum(dyf, dims=[0])
  return cast(dx, dtype=bf16), cast(dw, dtype=bf16), cast(db, dtype=bf16)
}"""

T["amax_rowcol"] = """
graph $name(x: bf16[$M,$N]) {
  a = abs(x)
  row_amax = amax(a, dims=[1])
  col_amax = amax(a, dims=[0])
  t_amax = amax(a, dims=[0,1])
  return cast(row_amax, dtype=f32), cast(col_amax, dtype=f32), cast(t_amax, dtype=f32)
}"""

T["amax_nested"] = """
graph $name(x: f32[$A,$B,$C]) {
  a = abs(x)
  r1 = amax(a, dims=[1])
  r12 = amax(a, dims=[1,2])
  return r1, r12
}"""

T["fp8_scaled_cast"] = """
graph $name(x: bf16[$M,$N]) {
  xf = cast(x, dtype=f32)
  amax_t = amax(abs(xf), dims=[0,1])
  scale = div(448.0, clamp(amax_t, min=1e-12))
  xs = clamp(mul(xf, scale), min=-448.0, max=448.0)
  return cast(xs, dtype=f8e4m3), reciprocal(scale)
}"""

T["fp8_rowwise_cast"] = """
graph $name(x: bf16[$M,$N]) {
  xf = cast(x, dtype=f32)
  amax_r = amax(abs(xf), dims=[-1], keepdim=true)
  scale = div(448.0, clamp(amax_r, min=1e-12))
  x8 = cast(clamp(mul(xf, scale), min=-448.0, max=448.0), dtype=f8e4m3)
  return x8, reciprocal(scale)
}"""

T["sdpa_bwd_epilogue_packed"] = """
graph $name(dqkv: bf16[$B,$S,3,$H,$D]) {
  dq = slice(dqkv, starts=[0,0,0,0,0], ends=[$B,$S,1,$H,$D])
  dk = slice(dqkv, starts=[0,0,1,0,0], ends=[$B,$S,2,$H,$D])
  dv = slice(dqkv, starts=[0,0,2,0,0], ends=[$B,$S,3,$H,$D])
  q2 = reshape(dq, shape=[$B,$S,$HD])
  k2 = reshape(dk, shape=[$B,$S,$HD])
  v2 = reshape(dv, shape=[$B,$S,$HD])
  g = cat(q2, k2, v2, dim=2)
  dbias = cast(sum(cast(g, dtype=f32), dims=[0,1]), dtype=bf16)
  dqkv_view = reshape(g, shape=[$BS,$HD3])
  dqkv_t = permute(dqkv_view, dims=[1,0])
  return dbias, dqkv_view, dqkv_t
}"""

T["sdpa_bwd_epilogue_packed_small"] = """
graph $name(dqkv: bf16[$B,$S,3,$H,$D]) {
  dq = slice(dqkv, starts=[0,0,0,0,0], ends=[$B,$S,1,$H,$D], steps=[1,1,1,1,1])
  dk = slice(dqkv, starts=[0,0,1,0,0], ends=[$B,$S,2,$H,$D], steps=[1,1,1,1,1])
  dv = slice(dqkv, starts=[0,0,2,0,0], ends=[$B,$S,3,$H,$D], steps=[1,1,1,1,1])
  g = cat(reshape(dq, shape=[$B,$S,$HD]), reshape(dk, shape=[$B,$S,$HD]), reshape(dv, shape=[$B,$S,$HD]), dim=2)
  dbias = cast(sum(cast(g, dtype=f32), dims=[0,1]), dtype=bf16)
  dqkv_view = reshape(g, shape=[$BS,$HD3])
  dqkv_t = permute(dqkv_view, dims=[1,0])
  return dbias, dqkv_view, dqkv_t
}"""

T["sdpa_bwd_epilogue_separate"] = """
graph $name(dq: bf16[$B,$H,$S,$D], dk: bf16[$B,$H,$S,$D], dv: bf16[$B,$H,$S,$D]) {
  q2 = reshape(transpose(dq, dim0=1, dim1=2), shape=[$B,$S,$HD])
  kt = permute(dk, dims=[0,2,1,3])
  k2 = reshape(kt, shape=[$B,$S,$HD])
  vt = transpose(dv, dim0=1, dim1=2)
  v2 = reshape(vt, shape=[$B,$S,$HD])
  dqkv = cat(q2, k2, v2, dim=2)
  dbias = cast(sum(cast(dqkv, dtype=f32), dims=[0,1]), dtype=bf16)
  dqkv_view = reshape(dqkv, shape=[$BS,$HD3])
  dqkv_t = permute(dqkv_view, dims=[1,0])
  return dbias, dqkv_view, dqkv_t
}"""

T["sdpa_bwd_epilogue_separate_small"] = """
graph $name(dq: bf16[$B,$H,$S,$D], dk: bf16[$B,$H,$S,$D], dv: bf16[$B,$H,$S,$D]) {
  q2 = reshape(permute(dq, dims=[0,2,1,3]), shape=[$B,$S,$HD])
  k2 = reshape(permute(dk, dims=[0,2,1,3]), shape=[$B,$S,$HD])
  v2 = reshape(permute(dv, dims=[0,2,1,3]), shape=[$B,$S,$HD])
  dqkv = cat(q2, k2, v2, dim=2)
  dbias = cast(sum(cast(dqkv, dtype=f32), dims=[0,1]), dtype=bf16)
  dqkv_view = reshape(dqkv, shape=[$BS,$HD3])
  dqkv_t = transpose(dqkv_view, dim0=0, dim1=1)
  return dbias, dqkv_view, dqkv_t
}"""

T["qkv_rope"] = """
graph $name(qkv: bf16[$B,$T,$C], cos: bf16[$T,$HS], sin: bf16[$T,$HS]) {
  t5 = reshape(qkv, shape=[$B,$T,$G,$QT,$HS])
  tp = permute(t5, dims=[0,2,3,1,4])
  qs, ks, vs = split(tp, sizes=[$Q,1,1], dim=2)
  q = reshape(qs, shape=[$B,-1,$T,$HS])
  k = reshape(ks, shape=[$B,-1,$T,$HS])
  v = reshape(vs, shape=[$B,-1,$T,$HS])
  q1 = slice(q, starts=[0,0,0,0], ends=[$B,$NH,$T,$HALF])
  q2 = slice(q, starts=[0,0,0,$HALF], ends=[$B,$NH,$T,$HS])
  q_rot = cat(neg(q2), q1, dim=3)
  q_roped = add(mul(q, cos), mul(q_rot, sin))
  k1 = slice(k, starts=[0,0,0,0], ends=[$B,$G,$T,$HALF])
  k2 = slice(k, starts=[0,0,0,$HALF], ends=[$B,$G,$T,$HS])
  k_roped = add(mul(k, cos), mul(cat(neg(k2), k1, dim=3), sin))
  return q_roped, k_roped, v
}"""

T["qkv_rope_mha_small"] = """
graph $name(qkv: bf16[$B,$T,$C], cos: bf16[$T,$HS], sin: bf16[$T,$HS]) {
  t = permute(reshape(qkv, shape=[$B,$T,$G,3,$HS]), dims=[0,2,3,1,4])
  qs, ks, vs = split(t, sizes=[1,1,1], dim=2)
  q = reshape(qs, shape=[$B,$G,$T,$HS])
  k = reshape(ks, shape=[$B,$G,$T,$HS])
  v = reshape(vs, shape=[$B,$G,$T,$HS])
  q_rot = cat(neg(slice(q, starts=[0,0,0,$HALF], ends=[$B,$G,$T,$HS])), slice(q, starts=[0,0,0,0], ends=[$B,$G,$T,$HALF]), dim=3)
  k_rot = cat(neg(slice(k, starts=[0,0,0,$HALF], ends=[$B,$G,$T,$HS])), slice(k, starts=[0,0,0,0], ends=[$B,$G,$T,$HALF]), dim=3)
  q_roped = add(mul(q, cos), mul(q_rot, sin))
  k_roped = add(mul(k, cos), mul(k_rot, sin))
  return q_roped, k_roped, v
}"""


def derive(kind, s):
    """Shape parameters derived from the free ones."""
    s = dict(s)
    if kind.startswith("sdpa"):
        s["HD"] = s["H"] * s["D"]
        s["HD3"] = 3 * s["HD"]
        s["BS"] = s["B"] * s["S"]
    if kind == "qkv_rope":
        s["QT"] = s["Q"] + 2
        s["NH"] = s["G"] * s["Q"]
        s["C"] = s["G"] * s["QT"] * s["HS"]
        s["HALF"] = s["HS"] // 2
    if kind == "qkv_rope_mha_small":
        s["C"] = 3 * s["G"] * s["HS"]
        s["HALF"] = s["HS"] // 2
    return s


def instantiate(kind, name, shape):
    return string.Template(T[kind]).substitute(name=name, **derive(kind, shape)).strip() + "\n"


# ---- the workloads -------------------------------------------------------------
# (name, template, shapes, example (file, graph) when the shapes are the
# example's, tiny shapes for check-refs, short description). In priority
# order: the run's time guard gives max-autotune to the first ones.

W = []


def w(name, kind, shape, tiny, desc, example=None, small=False):
    W.append(dict(name=name, kind=kind, shape=shape, tiny=tiny, desc=desc, example=example, small=small))


w("bias_gelu", "bias_gelu", dict(M=16384, N=4096), dict(M=8, N=64), "bias + tanh-GELU, bf16 [16384,4096]",
  ("bias_gelu.fg", "bias_gelu"))
w("layer_norm_large", "layer_norm_large", dict(M=16384, N=4096), dict(M=8, N=64),
  "LayerNorm fwd (y, mean, rstd), bf16 [16384,4096]", ("layer_norm.fg", "layer_norm_large"))
w("softmax", "softmax", dict(M=16384, N=4096), dict(M=8, N=64), "softmax, bf16 [16384,4096]",
  ("softmax.fg", "softmax"))
w("sum_rows", "sum_rows", dict(M=16384, N=4096), dict(M=8, N=64), "row sum, f32 [16384,4096]",
  ("sum_rows.fg", "sum_rows"))
w("sum_cols", "sum_cols", dict(M=16384, N=4096), dict(M=8, N=64), "column sum, f32 [16384,4096]",
  ("sum_rows.fg", "sum_cols"))
w("rmsnorm_bwd", "rmsnorm_bwd", dict(M=4096, N=4096), dict(M=8, N=64), "RMSNorm bwd (dx, dw), bf16 [4096,4096]",
  ("rmsnorm_bwd.fg", "rmsnorm_bwd"))
w("layernorm_bwd", "layernorm_bwd", dict(M=4096, N=4096), dict(M=8, N=64),
  "LayerNorm bwd (dx, dw, db), bf16 [4096,4096]", ("rmsnorm_bwd.fg", "layernorm_bwd"))
w("amax_rowcol", "amax_rowcol", dict(M=8192, N=8192), dict(M=8, N=64), "row+col+tensor amax, bf16 [8192,8192]",
  ("fp8_amax.fg", "amax_rowcol"))
w("amax_nested", "amax_nested", dict(A=64, B=1024, C=4096), dict(A=2, B=8, C=64),
  "nested amax (dims 1 and 1,2), f32 [64,1024,4096]", ("fp8_amax.fg", "amax_nested"))
w("sdpa_bwd_epilogue_packed", "sdpa_bwd_epilogue_packed", dict(B=8, S=2048, H=32, D=128),
  dict(B=2, S=4, H=2, D=8), "packed dQKV epilogue, bf16 [8,2048,3,32,128] (B,H,S,D = 8,32,2048,128)",
  ("sdpa_bwd_epilogue_packed.fg", "sdpa_bwd_epilogue_packed"))
w("sdpa_bwd_epilogue_separate", "sdpa_bwd_epilogue_separate", dict(B=8, S=2048, H=32, D=128),
  dict(B=2, S=4, H=2, D=8), "separate dQ,dK,dV epilogue, 3 x bf16 [8,32,2048,128]",
  ("sdpa_bwd_epilogue_separate.fg", "sdpa_bwd_epilogue_separate"))
w("qkv_rope", "qkv_rope", dict(B=4, T=2048, G=8, Q=4, HS=128), dict(B=2, T=4, G=2, Q=2, HS=8),
  "litgpt qkv split + RoPE (GQA), bf16 [4,2048,6144]", ("qkv_rope.fg", "qkv_rope"))
w("layer_norm_nanogpt", "layer_norm", dict(B=16, T=128, C=1600), dict(B=2, T=4, C=64),
  "nanoGPT LayerNorm fwd, bf16 [16,128,1600]", ("layer_norm.fg", "layer_norm"), small=True)
w("softmax_small", "softmax_small", dict(M=2048, N=1024), dict(M=8, N=64), "softmax, bf16 [2048,1024]",
  ("softmax.fg", "softmax_small"), small=True)
for shp in ((65536, 1024), (32768, 8192)):
    tag = "%dx%d" % shp
    w("rmsnorm_bwd_" + tag, "rmsnorm_bwd", dict(M=shp[0], N=shp[1]), dict(M=8, N=64),
      "RMSNorm bwd, bf16 [%d,%d]" % shp)
    w("layernorm_bwd_" + tag, "layernorm_bwd", dict(M=shp[0], N=shp[1]), dict(M=8, N=64),
      "LayerNorm bwd, bf16 [%d,%d]" % shp)
w("fp8_scaled_cast", "fp8_scaled_cast", dict(M=8192, N=8192), dict(M=8, N=64),
  "tensor-wise scaled cast to f8e4m3, bf16 [8192,8192]", ("fp8_amax.fg", "fp8_scaled_cast"))
w("fp8_rowwise_cast", "fp8_rowwise_cast", dict(M=8192, N=8192), dict(M=8, N=64),
  "row-wise scaled cast to f8e4m3, bf16 [8192,8192]", ("fp8_amax.fg", "fp8_rowwise_cast"))
w("bias_gelu_small", "bias_gelu_small", dict(M=256, N=1024), dict(M=8, N=64), "bias + tanh-GELU, f32 [256,1024]",
  ("bias_gelu.fg", "bias_gelu_small"), small=True)
w("bias_gelu_formula_small", "bias_gelu_formula_small", dict(M=256, N=1024), dict(M=8, N=64),
  "Megatron's spelled-out bias-GELU, f32 [256,1024]", ("bias_gelu.fg", "bias_gelu_formula_small"), small=True)
w("sum_rows_small", "sum_rows", dict(M=2048, N=1024), dict(M=8, N=64), "row sum, f32 [2048,1024]", small=True)
w("sum_cols_small", "sum_cols", dict(M=2048, N=1024), dict(M=8, N=64), "column sum, f32 [2048,1024]", small=True)
w("rmsnorm_bwd_small", "rmsnorm_bwd", dict(M=1024, N=1024), dict(M=8, N=64), "RMSNorm bwd, bf16 [1024,1024]",
  small=True)
w("layernorm_bwd_small", "layernorm_bwd", dict(M=1024, N=1024), dict(M=8, N=64), "LayerNorm bwd, bf16 [1024,1024]",
  small=True)
w("amax_rowcol_small", "amax_rowcol", dict(M=1024, N=1024), dict(M=8, N=64), "row+col+tensor amax, bf16 [1024,1024]",
  small=True)
w("amax_nested_small", "amax_nested", dict(A=8, B=256, C=1024), dict(A=2, B=8, C=64),
  "nested amax, f32 [8,256,1024]", small=True)
w("sdpa_bwd_epilogue_packed_small", "sdpa_bwd_epilogue_packed_small", dict(B=16, S=128, H=12, D=64),
  dict(B=2, S=4, H=2, D=8), "packed dQKV epilogue, nanoGPT bf16 [16,128,3,12,64]",
  ("sdpa_bwd_epilogue_packed.fg", "sdpa_bwd_epilogue_packed_small"), small=True)
w("sdpa_bwd_epilogue_separate_small", "sdpa_bwd_epilogue_separate_small", dict(B=16, S=128, H=12, D=64),
  dict(B=2, S=4, H=2, D=8), "separate dQKV epilogue, nanoGPT 3 x bf16 [16,12,128,64]",
  ("sdpa_bwd_epilogue_separate.fg", "sdpa_bwd_epilogue_separate_small"), small=True)
w("qkv_rope_mha_small", "qkv_rope_mha_small", dict(B=2, T=256, G=8, HS=64), dict(B=2, T=4, G=2, HS=8),
  "qkv split + RoPE (MHA), bf16 [2,256,1536]", ("qkv_rope.fg", "qkv_rope_mha_small"), small=True)

# ---- the suite of graphs from other projects' code (bench/suite/*.fg) ----
# Each file names its source (repository, file, function); each workload is
# a graph at its source's shape plus NAME_small, latency-bound. Their
# references are the graphs themselves as eager PyTorch (bench/fg2torch.py).

SUITE = os.path.join(ROOT, "bench", "suite")


def suite_graph(fname, graph):
    with open(os.path.join(SUITE, fname)) as f:
        src = f.read()
    m = re.search(r"^graph\s+%s\s*\(.*?^\}" % re.escape(graph), src, re.S | re.M)
    if not m:
        raise KeyError("bench/suite/%s has no graph %s" % (fname, graph))
    return m.group(0) + "\n"


def s(name, fname, desc, desc_small):
    for nm, d, small in ((name, desc, False), (name + "_small", desc_small, True)):
        W.append(dict(name=nm, kind="suite", shape=None, tiny=None, desc=d, example=None, small=small,
                      src=(fname, nm), tiny_src=(fname, name + "_small")))


s("cross_entropy_fwd", "cross_entropy.fg", "llm.c cross-entropy fwd, bf16 [4096,50304]", "cross-entropy fwd, bf16 [64,8192]")
s("cross_entropy_bwd", "cross_entropy.fg", "llm.c cross-entropy bwd (dlogits), bf16 [4096,50304]",
  "cross-entropy bwd, bf16 [64,8192]")
s("cross_entropy_gather_fwd", "cross_entropy.fg",
  "llm.c / Liger cross-entropy fwd, target logit by take_along_dim, bf16 [4096,50304]",
  "cross-entropy fwd (take_along_dim), bf16 [64,8192]")
s("swiglu_bwd", "swiglu.fg", "Liger SwiGLU bwd, bf16 [4096,14336]", "SwiGLU bwd, bf16 [128,2048]")
s("geglu_fwd", "swiglu.fg", "Liger GeGLU (tanh) fwd, bf16 [4096,16384]", "GeGLU fwd, bf16 [128,2048]")
s("add_rmsnorm", "add_rmsnorm.fg", "vLLM fused add + RMSNorm (returns the sum), bf16 [8192,4096]",
  "add + RMSNorm, bf16 [256,4096]")
s("bias_dropout_add_ln", "bias_dropout_add_ln.fg",
  "Megatron bias-dropout-add (p=0.1, Philox) + LayerNorm (returns the sum), bf16 [8192,4096]",
  "bias-dropout-add + LayerNorm, bf16 [256,4096]")
s("llama_rmsnorm_pow", "pow_norms.fg", "HF LlamaRMSNorm written with pow, bf16 [8192,4096]",
  "LlamaRMSNorm (pow), bf16 [256,4096]")
s("t5_layernorm_pow", "pow_norms.fg", "HF T5LayerNorm with pow(x, -0.5), f32 [16384,1024]",
  "T5LayerNorm (pow), f32 [512,1024]")
s("fp8_cast_amax", "fp8_scaling.fg", "TE tensor-wise fp8 cast + amax, bf16 [8192,8192]",
  "fp8 cast + amax, bf16 [512,1024]")
s("fp8_rowwise_pow2", "fp8_scaling.fg", "torchao row-wise fp8 with power-of-2 scales, bf16 [8192,8192]",
  "row-wise fp8 pow-2 scales, bf16 [512,1024]")
s("bias_gelu_bwd", "bias_gelu_bwd.fg", "Megatron bias-GELU bwd + bias grad, bf16 [8192,16384]",
  "bias-GELU bwd + bias grad, bf16 [256,4096]")
s("adamw", "adamw.fg", "llm.c AdamW update, f32 x 124M", "AdamW update, f32 x 1M")
s("adamw_inplace", "adamw_inplace.fg", "llm.c AdamW update in place (p, m, v -> their own storage), f32 x 124M",
  "AdamW update in place, f32 x 1M")
s("batchnorm_stats", "norm_stats.fg", "batch-norm statistics over N,H,W, f32 [32,256,56,56]",
  "batch-norm statistics, f32 [8,64,28,28]")
s("groupnorm_fwd", "norm_stats.fg", "diffusers GroupNorm(32) fwd, f32 [16,512,64,64]",
  "GroupNorm fwd, f32 [2,128,16,16]")
s("mxfp8_quant", "mx_quant.fg", "torchao to_mx MXFP8 (e4m3, 32-blocks, FLOOR), bf16 [8192,8192]",
  "MXFP8 quantization, bf16 [512,1024]")
s("nvfp4_quant", "mx_quant.fg", "TE NVFP4 (f4e2m1, 16-blocks, e4m3 scales), bf16 [8192,8192]",
  "NVFP4 quantization, bf16 [512,1024]")
s("wgrad_sums", "wgrad_sums.fg", "GPT-2 small weight-gradient sums, 12 layers (a backward region, run V4), B*T=8192",
  "weight-gradient sums, 12 layers, B*T=256")
s("softmax_bwd", "softmax_bwd.fg", "softmax bwd, bf16 [65536,1024]", "softmax bwd, bf16 [1024,1024]")
s("rope_rotate_half", "rope.fg", "HF RoPE (rotate_half), bf16 [4,32,2048,128]", "RoPE rotate_half, bf16 [1,8,128,64]")
s("rope_interleaved", "rope.fg", "Meta llama RoPE (interleaved pairs), bf16 [4,2048,32,128]",
  "RoPE interleaved, bf16 [1,128,8,64]")
s("attn_fwd", "attention.fg", "attention fwd (SDPA), bf16 [4,32,4096,128]", "attention fwd, bf16 [1,8,512,128]")
s("attn_fwd_causal", "attention.fg", "attention fwd causal (SDPA), bf16 [4,32,4096,128]",
  "attention fwd causal, bf16 [1,8,512,128]")
s("attn_fwd_d64", "attention.fg", "attention fwd (SDPA), bf16 [8,16,2048,64]", "attention fwd, bf16 [1,8,512,64]")
s("attn_fwd_long_causal", "attention.fg", "attention fwd causal (SDPA), bf16 [1,32,16384,128]",
  "attention fwd causal, bf16 [1,4,512,128]")
s("attn_fwd_gqa_causal", "attention.fg", "attention fwd causal GQA 32/8 heads (SDPA enable_gqa), bf16 [4,32,4096,128]",
  "attention fwd causal GQA 8/2 heads, bf16 [1,8,512,128]")
s("embedding_fwd", "embedding.fg", "llm.c GPT-2 encoder fwd (wte[ids] + wpe), f32 V=50257 [8,1024,768]",
  "encoder fwd, f32 V=4096 [2,256,256]")
s("embedding_bwd", "embedding.fg",
  "llm.c GPT-2 encoder bwd (dwte index_add, dwpe), f32 V=50257 [8,1024,768]",
  "encoder bwd, f32 V=4096 [2,256,256]")
s("attn_bwd", "attention.fg", "attention bwd (SDPA's backward), bf16 [4,32,4096,128]",
  "attention bwd, bf16 [1,8,512,128]")
s("attn_bwd_causal", "attention.fg", "attention bwd causal (SDPA's backward), bf16 [4,32,4096,128]",
  "attention bwd causal, bf16 [1,8,512,128]")
s("attn_bwd_d64", "attention.fg", "attention bwd (SDPA's backward), bf16 [8,16,2048,64]",
  "attention bwd, bf16 [1,8,512,64]")
s("attn_bwd_long_causal", "attention.fg", "attention bwd causal (SDPA's backward), bf16 [1,32,16384,128]",
  "attention bwd causal, bf16 [1,4,512,128]")
s("scan_row_g20261179", "scan.fg",
  "cumsum over one row + log_softmax, f16 [6291456] (perf fuzzing, bench/perf_fuzz.py seed 20261127, graph g20261179)",
  "cumsum over one row + log_softmax, f16 [65536]")
s("scan_col_g20261200", "scan.fg",
  "cumsum along dim 0 (column scan), f16 [4096,8,2048] (perf fuzzing, bench/perf_fuzz.py seed 20261127, graph g20261200)",
  "cumsum along dim 0, f16 [256,8,256]")

BY_NAME = {x["name"]: x for x in W}


def fg_text(wl, tiny=False):
    if wl["kind"] == "suite":  # the small graph renamed, so that --graph NAME finds it
        text = suite_graph(*(wl["tiny_src"] if tiny else wl["src"]))
        return re.sub(r"^graph\s+\w+", "graph " + wl["name"], text, count=1)
    return instantiate(wl["kind"], wl["name"], wl["tiny"] if tiny else wl["shape"])


# ---- signatures ------------------------------------------------------------------


def writes_in_place(text):
    """Whether the first graph in text writes a result into a parameter
    (`return v -> p`, docs/format.md 6.1): its calls change their inputs."""
    m = _SIG.search(text)
    body = text[m.end():] if m else text
    body = body[:body.find("\ngraph ")] if "\ngraph " in body else body
    return "->" in re.sub(r"#[^\n]*", "", body)  # `->` is written nowhere else (docs/format.md 1)

_SIG = re.compile(r"graph\s+(\w+)\s*\((.*?)\)\s*\{", re.S)
_PARAM = re.compile(r"(\w+)\s*:\s*(\w+)(?:\[([^\]]*)\])?")


def signature(text):
    """[(name, dtype, shape or None for scalars)] of the first graph in text."""
    m = _SIG.search(text)
    out = []
    for pm in _PARAM.finditer(m.group(2)):
        shape = None if pm.group(3) is None else tuple(int(v) for v in pm.group(3).split(",") if v.strip())
        out.append((pm.group(1), pm.group(2), shape))
    return out


# ---- template check against examples/ ------------------------------------------------


def _normalize(text):
    text = re.sub(r"#[^\n]*", "", text)
    return " ".join(text.split())


def example_graph(fname, graph):
    with open(os.path.join(ROOT, "examples", fname)) as f:
        src = f.read()
    m = re.search(r"^graph\s+%s\s*\(.*?^\}" % re.escape(graph), src, re.S | re.M)
    if not m:
        raise KeyError("examples/%s has no graph %s" % (fname, graph))
    return m.group(0)


def check_templates():
    """Each template at its example's shapes must be the example graph."""
    bad = []
    seen = set()
    for wl in W:
        if not wl["example"]:
            continue
        fname, graph = wl["example"]
        want = _normalize(example_graph(fname, graph))
        got = _normalize(instantiate(wl["kind"], graph, wl["shape"]))
        if want != got:
            bad.append("%s: template %s at %s differs from examples/%s graph %s:\n  want %s\n  got  %s"
                       % (wl["name"], wl["kind"], wl["shape"], fname, graph, want, got))
        seen.add(wl["kind"])
    missing = set(T) - seen
    if missing:
        bad.append("templates never checked against an example: %s" % sorted(missing))
    return bad


# ---- prepare: emit + compile with fusec ----------------------------------------------


def prepare(fusec, out, reps=3, tiny=False, arch=None, cubin=None, only=None):
    bad = check_templates()
    if bad:
        print("\n".join(bad), file=sys.stderr)
        sys.exit("workloads.py: the templates do not match examples/ (fix bench/workloads.py)")
    os.makedirs(os.path.join(out, "fg"), exist_ok=True)
    os.makedirs(os.path.join(out, "ptx"), exist_ok=True)
    res = {}
    for wl in W:
        name = wl["name"]
        if only and name not in only:
            continue
        src = os.path.join(out, "fg", name + ".fg")
        dst = os.path.join(out, "ptx", name + ".ptx")
        with open(src, "w") as f:
            f.write(fg_text(wl, tiny=tiny))
        walls, cpus, err = [], [], None
        for _ in range(reps):
            r0 = os.times()
            t0 = time.perf_counter()
            try:
                p = subprocess.run([fusec, src, "-o", dst] + (["--arch", arch] if arch else []) +
                                   (["--cubin", cubin] if cubin else []), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
            except OSError as e:
                sys.exit("workloads.py: cannot run %s: %s" % (fusec, e))
            walls.append(time.perf_counter() - t0)
            r1 = os.times()
            cpus.append((r1.children_user - r0.children_user) + (r1.children_system - r0.children_system))
            if p.returncode != 0:
                err = (p.stderr or p.stdout).strip().splitlines()
                err = " | ".join(err[:3]) if err else "exit %d" % p.returncode
                break
        walls.sort()
        cpus.sort()
        if err:
            res[name] = dict(ok=False, error=err)
            print("bench prepare: %-34s NOT SUPPORTED: %s" % (name, err))
            if os.path.exists(dst):
                os.remove(dst)
        else:
            with open(dst) as f:
                ptx = f.read()
            kernels = sum(int(m) for m in re.findall(r"^// graph \S+ params \d+ results \d+ temps \d+ kernels (\d+)",
                                                     ptx, re.M))
            res[name] = dict(ok=True, seconds=walls[len(walls) // 2], cpu_seconds=cpus[len(cpus) // 2],
                             runs=reps, kernels=kernels, ptx_bytes=len(ptx))
            print("bench prepare: %-34s %.3f s (median of %d), %d kernel(s)" % (name, res[name]["seconds"], reps,
                                                                                 kernels))
    def git(*a):  # the source tree fusec was built from (its build folder sits in it), else this one
        for d in (os.path.dirname(os.path.abspath(fusec)), ROOT):
            try:
                p = subprocess.run(["git", "-C", d] + list(a), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   text=True)
            except OSError:
                continue
            if p.returncode == 0:
                return p.stdout.strip()
        return ""
    meta = dict(
        fusec=os.path.abspath(fusec),
        tiny_shapes=tiny,
        arch=arch or "fusec's default",
        # SASS in the artifact (fusec --cubin: whole-program ptxas), else PTX only,
        # which the loader JITs as relocatable code (docs/loader.md, "Cubin cache")
        cubin=cubin or "none",
        commit=git("rev-parse", "--short", "HEAD"),
        dirty=bool(git("status", "--porcelain", "--untracked-files=no")),
        date=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        host_cpus=os.cpu_count(),
        method="wall time of `fusec NAME.fg -o NAME.ptx` (one graph per file), median of %d runs, on the build "
               "machine (no GPU); cpu_seconds = user+sys" % reps,
    )
    with open(os.path.join(out, "compile.json"), "w") as f:
        json.dump(dict(meta=meta, workloads=res), f, indent=1)
    n_ok = sum(1 for r in res.values() if r["ok"])
    print("bench prepare: %d of %d workloads compiled into %s/ptx (commit %s%s)" % (
        n_ok, len(res), out, meta["commit"], ", with uncommitted changes" if meta["dirty"] else ""))


# ---- check-refs: references vs the CPU interpreter at tiny shapes --------------------


def check_refs(fgrun, only=None):
    import tempfile

    import numpy as np
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import refs

    bad = 0
    for wl in W:
        if only and wl["name"] not in only:
            continue
        text = fg_text(wl, tiny=True)
        sig = signature(text)
        ins = refs.make_inputs(sig, torch.device("cpu"), seed=1)
        d = tempfile.mkdtemp()
        try:
            src = os.path.join(d, "g.fg")
            with open(src, "w") as f:
                f.write(text)
            paths = []
            for i, t in enumerate(ins):
                p = os.path.join(d, "in%d.npy" % i)
                if t.dtype == torch.bfloat16:
                    np.save(p, t.view(torch.int16).numpy().view(np.uint16))
                else:
                    np.save(p, t.numpy())
                paths.append(p)
            pr = subprocess.run([fgrun, src, "--graph", wl["name"], "--inputs", ",".join(paths), "--out", d],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if pr.returncode != 0:
                print("FAIL %s: fgrun: %s" % (wl["name"], pr.stdout.strip()))
                bad += 1
                continue
            want = refs.ref_for_workload(wl, tiny=True)(*ins)
            if not isinstance(want, tuple):
                want = (want,)
            msgs = []
            for j, r in enumerate(want):
                a = np.load(os.path.join(d, "%d.npy" % j))
                if r.dtype == torch.bfloat16:
                    got = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
                elif r.dtype in (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e8m0fnu,
                                 torch.float4_e2m1fn_x2):  # (f4e2m1: its packed bytes)
                    got = torch.from_numpy(a).view(r.dtype)
                else:
                    got = torch.from_numpy(a)
                got = got.reshape(a.shape)
                ok, why = refs.compare(got, r, exact=j in refs.EXACT.get(wl["name"], ()))
                if not ok:
                    msgs.append("result %d: %s" % (j, why))
            if msgs:
                print("FAIL %s: %s" % (wl["name"], "; ".join(msgs)))
                bad += 1
            else:
                print("ok   %s (%d results)" % (wl["name"], len(want)))
        finally:
            import shutil

            shutil.rmtree(d)
    print("check-refs: %d failed" % bad)
    return bad


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    cmd = argv[0]
    if cmd == "list":
        for wl in W:
            print("%-34s %s" % (wl["name"], wl["desc"]))
        return 0
    if cmd == "check-templates":
        bad = check_templates()
        print("\n".join(bad) if bad else "templates match examples/ (%d workloads)" % len(W))
        return 1 if bad else 0
    if cmd == "emit":
        os.makedirs(argv[1], exist_ok=True)
        for wl in W:
            with open(os.path.join(argv[1], wl["name"] + ".fg"), "w") as f:
                f.write(fg_text(wl, tiny="--tiny" in argv))
        return 0
    if cmd == "prepare":
        fusec = argv[argv.index("--fusec") + 1]
        out = argv[argv.index("--out") + 1]
        arch = argv[argv.index("--arch") + 1] if "--arch" in argv else None
        cubin = argv[argv.index("--cubin") + 1] if "--cubin" in argv else None
        only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else None
        unknown = [n for n in only or () if n not in BY_NAME]
        if unknown:
            print("workloads.py: no workload named %s" % ", ".join(unknown), file=sys.stderr)
            return 2
        prepare(fusec, out, reps=1 if "--tiny" in argv else 3, tiny="--tiny" in argv, arch=arch,
                cubin=cubin, only=only)
        return 0
    if cmd == "check-refs":
        fgrun = argv[argv.index("--fgrun") + 1]
        only = [a for a in argv[1:] if a in BY_NAME]
        return 1 if check_refs(fgrun, only) else 0
    print("unknown command %s" % cmd, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
