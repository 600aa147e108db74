"""PyTorch eager references of the benchmark graphs (bench/workloads.py),
written op by op to match the .fg semantics: the same ops in the same order,
f16/bf16 arithmetic rounded at every op's output as PyTorch eager does (and
as the .fg spec asks), reductions of f32 data in f32. Shapes come from the
inputs, so one function serves every shape of a template.

Also: input generation from a graph signature and the comparison used to
check fusec (and torch.compile) against eager."""
import torch

bf16, f32 = torch.bfloat16, torch.float32


def bias_gelu(x, bias):
    return torch.nn.functional.gelu(x + bias, approximate="tanh")


def bias_gelu_formula(y, bias):
    x = bias + y
    inner = (0.79788456 * x) * (1.0 + (0.044715 * x) * x)
    return (x * 0.5) * (1.0 + torch.tanh(inner))


def layer_norm_nanogpt(x, w, b):
    xf = x.to(f32)
    var, mean = torch.var_mean(xf, dim=2, correction=0, keepdim=False)
    var_k = var.unsqueeze(2)  # broadcast_in_dim(var, [B,T,1], dims=[0,1])
    mean_k = mean.unsqueeze(2)
    rstd = torch.rsqrt(var_k + 1e-5)
    xhat = (xf - mean_k) * rstd
    y = xhat * w.to(f32) + b.to(f32)
    return y.to(bf16), mean_k, rstd


def layer_norm_large(x, w, b):
    xf = x.to(f32)
    var, mean = torch.var_mean(xf, dim=1, correction=0, keepdim=True)
    rstd = torch.rsqrt(var + 1e-5)
    xhat = (xf - mean) * rstd
    y = xhat * w.to(f32) + b.to(f32)
    return y.to(bf16), mean, rstd


def softmax(x):
    xf = x.to(f32)
    m = torch.amax(xf, dim=1, keepdim=True)
    e = torch.exp(xf - m)
    s = torch.sum(e, dim=1, keepdim=True)
    return (e / s).to(bf16)


def softmax_small(x):
    xf = x.to(f32)
    e = torch.exp(xf - torch.amax(xf, dim=-1, keepdim=True))
    return (e / torch.sum(e, dim=-1, keepdim=True)).to(bf16)


def sum_rows(x):
    return torch.sum(x, dim=1)


def sum_cols(x):
    return torch.sum(x, dim=0)


def rmsnorm_bwd(x, w, dy, rstd):
    xf = x.to(f32)
    dyf = dy.to(f32)
    r = rstd.unsqueeze(1)
    xhat = xf * r
    g = dyf * w.to(f32)
    c = torch.mean(g * xhat, dim=1, keepdim=True)
    dx = (g - xhat * c) * r
    dw = torch.sum(dyf * xhat, dim=0)
    return dx.to(bf16), dw.to(bf16)


def layernorm_bwd(x, w, dy, mu, rstd):
    xf = x.to(f32)
    dyf = dy.to(f32)
    xhat = (xf - mu) * rstd
    g = dyf * w.to(f32)
    g_mean = torch.mean(g, dim=1, keepdim=True)
    gx_mean = torch.mean(g * xhat, dim=1, keepdim=True)
    dx = rstd * ((g - g_mean) - xhat * gx_mean)
    dw = torch.sum(dyf * xhat, dim=0)
    db = torch.sum(dyf, dim=0)
    return dx.to(bf16), dw.to(bf16), db.to(bf16)


def amax_rowcol(x):
    a = torch.abs(x)
    row = torch.amax(a, dim=1)
    col = torch.amax(a, dim=0)
    t = torch.amax(a, dim=(0, 1))
    return row.to(f32), col.to(f32), t.to(f32)


def amax_nested(x):
    a = torch.abs(x)
    return torch.amax(a, dim=1), torch.amax(a, dim=(1, 2))


def _div_scalar_by(v, t):
    # div(448.0, t): a true division (PyTorch's `448.0 / t` is reciprocal(t) * 448).
    return torch.div(torch.full_like(t, v), t)


def fp8_scaled_cast(x):
    xf = x.to(f32)
    amax_t = torch.amax(torch.abs(xf), dim=(0, 1))
    scale = _div_scalar_by(448.0, torch.clamp(amax_t, min=1e-12))
    xs = torch.clamp(xf * scale, min=-448.0, max=448.0)
    return xs.to(torch.float8_e4m3fn), torch.reciprocal(scale)


def fp8_rowwise_cast(x):
    xf = x.to(f32)
    amax_r = torch.amax(torch.abs(xf), dim=-1, keepdim=True)
    scale = _div_scalar_by(448.0, torch.clamp(amax_r, min=1e-12))
    x8 = torch.clamp(xf * scale, min=-448.0, max=448.0).to(torch.float8_e4m3fn)
    return x8, torch.reciprocal(scale)


def sdpa_bwd_epilogue_packed(dqkv):
    B, S, _, H, D = dqkv.shape
    dq = dqkv[:, :, 0:1]
    dk = dqkv[:, :, 1:2]
    dv = dqkv[:, :, 2:3]
    q2 = dq.reshape(B, S, H * D)
    k2 = dk.reshape(B, S, H * D)
    v2 = dv.reshape(B, S, H * D)
    g = torch.cat((q2, k2, v2), dim=2)
    dbias = torch.sum(g.to(f32), dim=(0, 1)).to(bf16)
    dqkv_view = g.reshape(B * S, 3 * H * D)
    dqkv_t = dqkv_view.permute(1, 0)
    return dbias, dqkv_view, dqkv_t


def sdpa_bwd_epilogue_separate(dq, dk, dv):
    B, H, S, D = dq.shape
    q2 = dq.transpose(1, 2).reshape(B, S, H * D)
    k2 = dk.permute(0, 2, 1, 3).reshape(B, S, H * D)
    v2 = dv.transpose(1, 2).reshape(B, S, H * D)
    dqkv = torch.cat((q2, k2, v2), dim=2)
    dbias = torch.sum(dqkv.to(f32), dim=(0, 1)).to(bf16)
    dqkv_view = dqkv.reshape(B * S, 3 * H * D)
    dqkv_t = dqkv_view.permute(1, 0)
    return dbias, dqkv_view, dqkv_t


def _rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1 = x[..., :half]
    x2 = x[..., half:]
    rotated = torch.cat((-x2, x1), dim=3)
    return x * cos + rotated * sin


def _qkv_rope(qkv, cos, sin, groups, q_per_kv):
    B, T, C = qkv.shape
    hs = cos.shape[-1]
    t5 = qkv.reshape(B, T, groups, q_per_kv + 2, hs)
    tp = t5.permute(0, 2, 3, 1, 4)
    qs, ks, vs = tp.split((q_per_kv, 1, 1), dim=2)
    q = qs.reshape(B, -1, T, hs)
    k = ks.reshape(B, -1, T, hs)
    v = vs.reshape(B, -1, T, hs)
    return _rope(q, cos, sin), _rope(k, cos, sin), v


def qkv_rope_mha(qkv, cos, sin):
    hs = cos.shape[-1]
    return _qkv_rope(qkv, cos, sin, qkv.shape[-1] // (3 * hs), 1)


def _mx_scale(amax, emax):
    """fusec's mx_scale (docs/format.md 5.10) as float8_e8m0fnu: the f32
    exponent of amax less emax, clamped below at 0 (2^-127); inf or NaN
    amax: 0xff (NaN)."""
    e = (amax.to(f32).view(torch.int32) >> 23) & 0xFF
    code = torch.where(e == 0xFF, torch.full_like(e, 0xFF), torch.clamp(e - emax, min=0))
    return code.to(torch.uint8).view(torch.float8_e8m0fnu)


# f4e2m1's magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 (codes 0..7) and the
# midpoints between neighbours
_F4_MID = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def _f4_codes(v):
    """fusec's f32 -> f4e2m1 cast as 4-bit codes: round to nearest, ties to
    the even code, saturating at 6; the sign bit as the value's (-0.0 too)."""
    a = v.abs()
    mid = torch.tensor(_F4_MID, dtype=f32, device=v.device)
    lo = torch.bucketize(a, mid, right=False)  # a tie to the lower code
    hi = torch.bucketize(a, mid, right=True)  # ... to the upper one
    code = torch.where((lo != hi) & (lo % 2 == 1), hi, lo)
    return code | (torch.signbit(v).to(torch.int64) << 3)


def _f4_pack(codes):
    """Two codes a byte along the last dim, element 2k in the low nibble,
    as float4_e2m1fn_x2 (the packed bytes)."""
    c = codes.reshape(*codes.shape[:-1], codes.shape[-1] // 2, 2)
    return (c[..., 0] | (c[..., 1] << 4)).to(torch.uint8).view(torch.float4_e2m1fn_x2)


def mxfp8_quant(x):
    """torchao's to_mx (FLOOR, e4m3, blocks of 32) as the graph of
    bench/suite/mx_quant.fg computes it."""
    R, K = x.shape
    xb = x.reshape(R, K // 32, 32)
    s = _mx_scale(torch.amax(torch.abs(xb), dim=2, keepdim=True), 8)
    q = torch.clamp(xb.to(f32) / s.to(f32), min=-448.0, max=448.0).to(torch.float8_e4m3fn)
    return q.reshape(R, K), s.reshape(R, K // 32)


def nvfp4_quant(x):
    """TransformerEngine's NVFP4 (blocks of 16, e4m3 scales under a
    per-tensor f32 scale) as the graph of bench/suite/mx_quant.fg computes it."""
    R, K = x.shape
    xf = x.to(f32)
    g = torch.amax(torch.abs(xf))
    senc0 = torch.tensor(2688.0, dtype=f32, device=x.device) / g
    senc = torch.where((g == 0.0) | torch.isinf(senc0), torch.tensor(1.0, dtype=f32, device=x.device), senc0)
    xb = xf.reshape(R, K // 16, 16)
    ab = torch.amax(torch.abs(xb), dim=2, keepdim=True)
    sb = torch.clamp((ab / 6.0) * senc, max=448.0).to(torch.float8_e4m3fn)
    sbf = sb.to(f32)
    inv = torch.where(sbf == 0.0, torch.tensor(0.0, dtype=f32, device=x.device), senc / sbf)
    q = _f4_pack(_f4_codes(xb * inv).reshape(R, K))
    return q, sb.reshape(R, K // 16), senc


# suite graphs (bench/suite/) whose ops bench/fg2torch.py does not take
# (mx_scale, f8e8m0 and f4e2m1 results): hand-written references
SUITE_REFS = {
    "mxfp8_quant": mxfp8_quant,
    "mxfp8_quant_small": mxfp8_quant,
    "nvfp4_quant": nvfp4_quant,
    "nvfp4_quant_small": nvfp4_quant,
}


def ref_for(kind, shape):
    """The reference of a workload (template kind + shape parameters)."""
    if kind == "qkv_rope":  # n_query_groups and q_per_kv are not recoverable from the input shapes
        groups, q_per_kv = shape["G"], shape["Q"]

        def qkv_rope(qkv, cos, sin):
            return _qkv_rope(qkv, cos, sin, groups, q_per_kv)

        return qkv_rope
    return REFS[kind]


def ref_for_workload(wl, tiny=False):
    """The reference of a workload of bench/workloads.py: a suite graph
    (bench/suite/) as eager PyTorch through bench/fg2torch.py, or the
    hand-written reference of a template kind."""
    if wl["kind"] == "suite" and wl["name"] in SUITE_REFS:
        return SUITE_REFS[wl["name"]]
    if wl["kind"] == "suite":
        import fg2torch
        import workloads
        return fg2torch.load(workloads.fg_text(wl, tiny))[0]
    return ref_for(wl["kind"], wl["tiny"] if tiny else wl["shape"])


# template kind (bench/workloads.py) -> reference
REFS = {
    "bias_gelu": bias_gelu,
    "bias_gelu_small": bias_gelu,
    "bias_gelu_formula_small": bias_gelu_formula,
    "layer_norm": layer_norm_nanogpt,
    "layer_norm_large": layer_norm_large,
    "softmax": softmax,
    "softmax_small": softmax_small,
    "sum_rows": sum_rows,
    "sum_cols": sum_cols,
    "rmsnorm_bwd": rmsnorm_bwd,
    "layernorm_bwd": layernorm_bwd,
    "amax_rowcol": amax_rowcol,
    "amax_nested": amax_nested,
    "fp8_scaled_cast": fp8_scaled_cast,
    "fp8_rowwise_cast": fp8_rowwise_cast,
    "sdpa_bwd_epilogue_packed": sdpa_bwd_epilogue_packed,
    "sdpa_bwd_epilogue_packed_small": sdpa_bwd_epilogue_packed,
    "sdpa_bwd_epilogue_separate": sdpa_bwd_epilogue_separate,
    "sdpa_bwd_epilogue_separate_small": sdpa_bwd_epilogue_separate,
    "qkv_rope_mha_small": qkv_rope_mha,
}

# ---- timed formulations that are not the checked reference ----
# A graph whose exact result PyTorch cannot give with its own ops (dropout:
# fusec's mask is its Philox stream, docs/format.md 5.12, not torch's
# generator) is CHECKED against the graph in eager PyTorch with fusec's stream
# (fg2torch, exact masks), while eager and torch.compile are TIMED on the
# formulation a PyTorch user writes (torch's own dropout; under
# torch.compile Inductor's in-kernel Philox). That formulation cannot match
# the reference element for element, so its results are checked by what
# they must satisfy whatever the mask: TIMED[name] = (fn, check, what),
# check(outputs, inputs) -> (ok, [detail]).


def bias_dropout_add_ln_torch(seed, off, x, bias, residual, w, b, p=0.1):
    """Megatron-LM's _bias_dropout_add_func (megatron/core/fusions/
    fused_bias_dropout.py) in training, then F.layer_norm of the sum; seed
    and off unused (torch's generator)."""
    F = torch.nn.functional
    y = residual + F.dropout(x + bias, p=p, training=True)
    return y, F.layer_norm(y, (y.shape[-1],), w, b, eps=1e-5)


def check_bias_dropout_add_ln(outs, inputs, p=0.1):
    """Each element of the sum y is either the residual (dropped) or
    residual + (x + bias) / (1 - p) (kept): y against the nearer of the two
    (relative L2, bf16 tolerance), the kept fraction within 0.01 of 1 - p,
    and the normalized output against LayerNorm of the returned y."""
    _, _, x, bias, residual, w, b = inputs
    y, o = outs
    r = residual.double()
    yd = y.double()
    kept_v = r + (x + bias).double() / (1.0 - p)
    kept = (yd - kept_v).abs() < (yd - r).abs()
    ok1, why1 = compare(y, torch.where(kept, kept_v, r).to(y.dtype))
    frac = kept.double().mean().item()
    ok2 = abs(frac - (1.0 - p)) <= 0.01
    ln = torch.nn.functional.layer_norm(y.float(), (y.shape[-1],), w.float(), b.float(), eps=1e-5).to(o.dtype)
    ok3, why3 = compare(o, ln)
    return ok1 and ok2 and ok3, ["sum vs residual or residual + (x + bias)/(1-p): %s" % why1,
                                 "kept fraction %.4f (1 - p = %.2f)%s" % (frac, 1.0 - p, "" if ok2 else " MISMATCH"),
                                 "LayerNorm of the returned sum: %s" % why3]


TIMED = {
    n: (bias_dropout_add_ln_torch, check_bias_dropout_add_ln,
        "residual + F.dropout(x + bias, p=0.1) then F.layer_norm (Megatron's code, torch's RNG)")
    for n in ("bias_dropout_add_ln", "bias_dropout_add_ln_small")
}


# results compared bitwise (not by the float tolerance) with the checked
# reference: the dropout's sum, whose every op is rounded to bf16 as eager
# rounds it, so a single mask bit that differs from fusec's stream fails
EXACT = {n: (0,) for n in ("bias_dropout_add_ln", "bias_dropout_add_ln_small")}


def timed_for_workload(wl):
    """(fn, check, what) of a workload timed on another formulation than its
    checked reference, or None."""
    return TIMED.get(wl["name"])


DTYPES = {
    "bool": torch.bool, "i8": torch.int8, "u8": torch.uint8, "i16": torch.int16, "i32": torch.int32,
    "i64": torch.int64, "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64,
    "f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2,
}


def make_inputs(sig, device, seed=0):
    """Inputs for a signature [(name, dtype, shape)]: standard normal, except
    the saved statistics `rstd` (uniform in [0.5, 1.5], as 1/std is positive)
    and `mu` (normal scaled by 0.1); integer `seed` and `off` (a random
    stream's) uniform over their dtype."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    out = []
    # integer inputs are class indices into the last dim of the first
    # parameter of rank 2 or more (cross-entropy's target into the logits)
    classes = next((sh[-1] for _, d, sh in sig if sh and len(sh) >= 2), 2)
    # ... except `ids`: token ids into the rows of that parameter (an embedding table)
    rows = next((sh[0] for _, d, sh in sig if sh and len(sh) >= 2), 2)
    for name, dt, shape in sig:
        if shape is None:
            raise ValueError("scalar parameter %s: no benchmark input rule" % name)
        tdt = DTYPES[dt]
        if not tdt.is_floating_point and tdt != torch.bool:
            if name in ("seed", "off", "offset"):  # a random stream's (docs/format.md 5.12): any value
                info = torch.iinfo(tdt)
                out.append(torch.randint(info.min, info.max, shape, generator=gen, device=device, dtype=tdt))
                continue
            high = rows if name == "ids" else classes
            out.append(torch.randint(0, high, shape, generator=gen, device=device, dtype=torch.int64).to(tdt))
            continue
        if name in ("rstd", "v"):  # a positive statistic, a second moment
            t = torch.rand(shape, generator=gen, device=device, dtype=f32) + 0.5
        else:
            t = torch.randn(shape, generator=gen, device=device, dtype=f32)
            if name == "mu":
                t = t * 0.1
        out.append(t.to(tdt))
    return out


# relative L2 tolerance by dtype (fgrun --check's)
TOL = {
    torch.float16: 1e-3, torch.bfloat16: 1e-2, torch.float32: 1e-4, torch.float64: 1e-9,
    torch.float8_e4m3fn: 6e-2, torch.float8_e5m2: 1.2e-1,
}


def compare(got, want, exact=False):
    """(ok, reason): same shape and dtype; integers and bool exact; floats by
    relative L2 error under TOL, with NaN and inf positions equal (exact:
    floats bitwise too)."""
    if tuple(got.shape) != tuple(want.shape):
        return False, "shape %s, expected %s" % (tuple(got.shape), tuple(want.shape))
    if got.dtype != want.dtype:
        return False, "dtype %s, expected %s" % (got.dtype, want.dtype)
    if want.dtype in (torch.float8_e8m0fnu, torch.float4_e2m1fn_x2):  # codes, exactly
        ok = torch.equal(got.view(torch.uint8), want.view(torch.uint8))
        return ok, "exact" if ok else "codes differ (%d of %d)" % (
            int((got.view(torch.uint8) != want.view(torch.uint8)).sum()), want.numel())
    if exact and want.dtype.is_floating_point:
        bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[want.element_size()]
        n = int((got.contiguous().view(bits) != want.contiguous().view(bits)).sum())
        return n == 0, "bitwise equal" if n == 0 else "%d of %d elements differ in their bits" % (n, want.numel())
    if want.dtype not in TOL:
        ok = torch.equal(got, want)
        return ok, "exact" if ok else "integer values differ"
    g = got.to(torch.float64)
    w = want.to(torch.float64)
    gf, wf = torch.isfinite(g), torch.isfinite(w)
    if not (bool(gf.all()) and bool(wf.all())):  # the masks only where needed (large tensors)
        gn, wn = torch.isnan(g), torch.isnan(w)
        if not torch.equal(gn, wn):
            return False, "NaN positions differ (%d vs %d NaNs)" % (int(gn.sum()), int(wn.sum()))
        gi, wi = torch.isinf(g), torch.isinf(w)
        if not torch.equal(gi, wi) or not torch.equal(g[gi], w[wi]):
            return False, "inf positions differ"
        g, w = g[wf], w[wf]
    del gf, wf
    num = torch.linalg.vector_norm(g - w).item()
    den = torch.linalg.vector_norm(w).item()
    err = num / den if den > 0 else num
    tol = TOL[want.dtype]
    return err <= tol, "rel L2 %.3g (tol %.0e)" % (err, tol)
