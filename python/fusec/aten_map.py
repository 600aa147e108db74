"""The ATen -> .fg mapping: ONE table, one row per ATen overload fusec can take.

Each row (`Entry`) says how a node of that overload is written as `.fg`
(`emit`), when a node of it cannot be (`check`, returning the reason), and
how it is tested (`tests`: tiny torch functions whose exported graph uses
the overload; python/tests/test_export.py exports each one, runs the `.fg`
through the interpreter `fgrun` and compares with torch on the CPU).

An emitter gets an `Emitter` (fusec.export) and the FX node; it returns the
`.fg` expression of the node's value (a string), or for an op with several
results a `Multi` naming them. Operands are written with `e.v(arg)` (a
value name, or a literal), attributes with `e.lit(...)`.

What stays in PyTorch by design (matmuls, convolutions, random
numbers, collectives) is listed in LEFT_TO_TORCH, so the exporter's report
tells "left to PyTorch" from "fusec lacks a mapping".
"""
import operator
from collections import namedtuple

from . import sizes

# torch dtype name (str(torch.float32) without "torch.") -> .fg dtype
FG_DTYPE = {
    "bool": "bool", "int8": "i8", "uint8": "u8", "int16": "i16", "int32": "i32", "int64": "i64",
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
    "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2",
}
FLOAT_FG = {"f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2"}

Entry = namedtuple("Entry", "emit check")
Entry.__doc__ = """emit(e, node) -> expression | Multi; check(e, node) -> None or the reason the
node can't be written. Its tests are tests()[name]."""
Case = namedtuple("Case", "fn inputs")
Case.__doc__ = "A torch function and a function making its example inputs (CPU tensors)."
Multi = namedtuple("Multi", "n expr bind post", defaults=(None, None))
Multi.__doc__ = """An op with n results, which the exporter names; the node is result `bind`, or
(bind None) a tuple whose items getitem picks. `post`: {k: "...%s..."}, result k
as the node gives it is that expression of the op's result k (cuDNN attention's
logsumexp: [B,H,S,1] of sdpa's [B,H,S])."""


def fg_dtype(torch_dtype):
    return FG_DTYPE.get(str(torch_dtype).replace("torch.", ""))


# ---- small helpers for the rows -------------------------------------------


def _kw(node, name, pos, default=None):
    if name in node.kwargs:
        return node.kwargs[name]
    return node.args[pos] if len(node.args) > pos else default


def _ok(e, node):
    return None


def _rank(node):
    return len(node.meta["val"].shape)


def _dims(dims, rank, empty_is_all=False):
    if dims is None or (empty_is_all and not dims):  # aten's reductions: dim=[] reduces every dim
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return [d % rank if rank else 0 for d in dims]


def unary(op):
    return Entry(lambda e, n: "%s(%s)" % (op, e.v(n.args[0])), _ok)


def binary(op):
    return Entry(lambda e, n: "%s(%s, %s)" % (op, e.v(n.args[0]), e.v(n.args[1])), _ok)


def _float_out(e, node, op):
    """A float-valued pointwise op; an integer operand is cast first, as
    torch computes it in the result dtype (div of two ints gives a float)."""
    out = e.dtype(node)
    args = [e.cast_to(a, out) if e.is_int_operand(a) else e.v(a) for a in node.args[:2]]
    return "%s(%s)" % (op, ", ".join(args))


def _alpha(e, node, op):
    a, b = node.args[0], node.args[1]
    alpha = node.kwargs.get("alpha", 1)
    bv = e.v(b) if alpha == 1 else "mul(%s, %s)" % (e.v(b), e.lit(alpha))
    return "%s(%s, %s)" % (op, e.v(a), bv)


def _cast(e, node):
    return "cast(%s, dtype=%s)" % (e.v(node.args[0]), e.dtype(node))


def _to_copy_check(e, node):
    for k in node.kwargs:
        if k not in ("dtype", "layout", "device", "memory_format", "non_blocking"):
            return "argument %s=" % k
    mf = node.kwargs.get("memory_format")
    if mf is not None and "preserve" not in str(mf) and "contiguous" not in str(mf):
        return "memory_format=%s" % mf
    src, dst = node.args[0].meta["val"], node.meta["val"]
    if src.device != dst.device:
        return "a copy to another device (%s -> %s)" % (src.device, dst.device)
    return None


def _reduce(op):
    def emit(e, n):
        dims = _kw(n, "dim", 1)
        keep = _kw(n, "keepdim", 2, False)
        rank = len(n.args[0].meta["val"].shape)
        s = "%s(%s, dims=%s, keepdim=%s" % (op, e.v(n.args[0]), e.lit(_dims(dims, rank, True)), e.lit(bool(keep)))
        return s + ", dtype=%s)" % e.dtype(n)
    return Entry(emit, _ok)


def _sum_default(e, n):
    return "sum(%s, dtype=%s)" % (e.v(n.args[0]), e.dtype(n))


def _var_common(e, n, op):
    rank = len(n.args[0].meta["val"].shape)
    dims = _dims(_kw(n, "dim", 1), rank, True)
    corr = n.kwargs.get("correction")
    corr = 1 if corr is None else int(corr)  # ATen: None is Bessel's 1; an integral float as the int
    keep = n.kwargs.get("keepdim", False)
    return "%s(%s, dims=%s, correction=%s, keepdim=%s)" % (op, e.v(n.args[0]), e.lit(dims), e.lit(corr),
                                                           e.lit(bool(keep)))


def _var_check(e, n):
    c = n.kwargs.get("correction")
    if c is not None and not isinstance(c, int) and not (isinstance(c, float) and c.is_integer()):
        return "a fractional correction (%r)" % (c,)
    return None


def _view(e, n):
    return "reshape(%s, shape=%s)" % (e.v(n.args[0]), e.shape_attr(n.args[1]))


def _permute(e, n):
    return "permute(%s, dims=%s)" % (e.v(n.args[0]), e.lit(_dims(n.args[1], _rank(n))))


def _transpose(e, n):
    return "transpose(%s, dim0=%d, dim1=%d)" % (e.v(n.args[0]), n.args[1], n.args[2])


def _expand(e, n):
    return "expand(%s, shape=%s)" % (e.v(n.args[0]), e.expand_attr(n.args[0], n.args[1]))


def _squeeze(e, n):
    if len(n.args) == 1:
        return "squeeze(%s)" % e.v(n.args[0])
    d = n.args[1]
    rank = len(n.args[0].meta["val"].shape)
    return "squeeze(%s, dims=%s)" % (e.v(n.args[0]), e.lit(_dims(d, rank)))


def _slice(e, n):
    x = n.args[0]
    shape = x.meta["val"].shape
    rank = len(shape)
    d = _kw(n, "dim", 1, 0) % rank
    start = _kw(n, "start", 2, None)
    end = _kw(n, "end", 3, None)
    step = _kw(n, "step", 4, 1)
    starts, ends, steps = [0] * rank, [e.end_of(s) for s in shape], [1] * rank
    starts[d] = 0 if start is None else sizes.hint(start)
    ends[d] = ends[d] if end is None else min(sizes.hint(end), 2**62)
    steps[d] = int(step)
    return "slice(%s, starts=%s, ends=%s, steps=%s)" % (e.v(x), e.lit(starts), e.lit(ends), e.lit(steps))


def _slice_check(e, n):
    shape = n.args[0].meta["val"].shape
    d = _kw(n, "dim", 1, 0) % len(shape)
    for k in ("start", "end", "step"):
        v = _kw(n, k, {"start": 2, "end": 3, "step": 4}[k], None)
        if v is not None and not isinstance(v, int) and (k == "step" or not e.specialize):
            return "a %s that is symbolic (%s)" % (k, v)
    if not e.static([shape[d]]):
        return "a slice of a symbolic dim"
    return None


def _select(e, n):
    x = n.args[0]
    shape = x.meta["val"].shape
    rank = len(shape)
    d, i = n.args[1] % rank, n.args[2]
    i = i + sizes.hint(shape[d]) if i < 0 else i
    starts, ends = [0] * rank, [e.end_of(s) for s in shape]
    starts[d], ends[d] = i, i + 1
    return "squeeze(slice(%s, starts=%s, ends=%s), dims=[%d])" % (e.v(x), e.lit(starts), e.lit(ends), d)


def _select_check(e, n):
    shape = n.args[0].meta["val"].shape
    if not e.static([shape[n.args[1] % len(shape)]]) or not isinstance(n.args[2], int):
        return "a select along a symbolic dim"
    return None


def _cat(e, n):
    rank = _rank(n)
    d = _kw(n, "dim", 1, 0) % rank
    # torch.cat skips 1-D empty tensors (a legacy rule); .fg does not
    ts = [t for t in n.args[0]
          if not (len(t.meta["val"].shape) == 1 and t.meta["val"].shape[0] == 0 and rank != 1)]
    return "cat(%s, dim=%d)" % (", ".join(e.v(t) for t in ts), d)


def _split(e, n):
    x = n.args[0]
    shape = x.meta["val"].shape
    d = _kw(n, "dim", 2, 0) % len(shape)
    size = sizes.hint(shape[d])
    arg = n.args[1]
    if isinstance(arg, int):  # split.Tensor: equal pieces of `arg`, the last one shorter
        pieces = [min(arg, size - k) for k in range(0, size, arg)] if size else [0]
    else:
        pieces = [sizes.hint(a) for a in arg]
    return Multi(len(pieces), "split(%s, sizes=%s, dim=%d)" % (e.v(x), e.lit(pieces), d))


def _split_check(e, n):
    shape = n.args[0].meta["val"].shape
    d = _kw(n, "dim", 2, 0) % len(shape)
    if not e.static([shape[d]]):
        return "a split along a symbolic dim"
    return None


def _pad(e, n):
    x = n.args[0]
    rank = len(x.meta["val"].shape)
    torch_pad = list(n.args[1])  # last dim first, (lo, hi) pairs
    value = _kw(n, "value", 2, 0)
    pad = [0] * (2 * rank)
    for k in range(len(torch_pad) // 2):
        d = rank - 1 - k
        pad[2 * d], pad[2 * d + 1] = torch_pad[2 * k], torch_pad[2 * k + 1]
    return "pad(%s, pad=%s, value=%s)" % (e.v(x), e.lit(pad), e.lit(value))


def _where(e, n):
    return "where(%s, %s, %s)" % (e.v(n.args[0]), e.v(n.args[1]), e.v(n.args[2]))


def _clamp(e, n):
    lo = _kw(n, "min", 1)
    hi = _kw(n, "max", 2)
    parts = [e.v(n.args[0])]
    if lo is not None:
        parts.append("min=%s" % e.lit(lo))
    if hi is not None:
        parts.append("max=%s" % e.lit(hi))
    return "clamp(%s)" % ", ".join(parts)


def _clamp_check(e, n):
    lo, hi = _kw(n, "min", 1), _kw(n, "max", 2)
    if lo is None and hi is None:
        return "a clamp without bounds"
    for b in (lo, hi):
        if b is not None and not isinstance(b, (int, float, bool)):
            return "a tensor bound"
    return None


def _full(e, n):
    shape = [sizes.hint(s) for s in n.args[0]]
    return "full(shape=%s, value=%s, dtype=%s)" % (e.lit(shape), e.lit(n.args[1]), e.dtype(n))


def _full_check(e, n):
    if any(not isinstance(s, int) for s in n.args[0]) and not e.specialize:
        return "a symbolic shape"
    return None


def _arange(e, n):
    start, end = (0, n.args[0]) if n.target.__name__.endswith(".default") else (n.args[0], n.args[1])
    step = n.args[2] if len(n.args) > 2 else n.kwargs.get("step", 1)
    count = sizes.hint(n.meta["val"].shape[0])
    out = e.dtype(n)
    if start == 0 and step == 1:
        return "iota(%d, dtype=%s)" % (count, out) if out == "i64" else "cast(iota(%d), dtype=%s)" % (count, out)
    if all(isinstance(v, int) for v in (start, step)):  # integers: exact in i64
        return "cast(add(mul(iota(%d), %d), %d), dtype=%s)" % (count, step, start, out)
    # floats: start + i * step in f64, then rounded once, as torch computes it
    return "cast(add(mul(cast(iota(%d), dtype=f64), %s), %s), dtype=%s)" % (
        count, e.lit(float(step)), e.lit(float(start)), out)


def _arange_check(e, n):
    end = 0 if n.target.__name__.endswith(".default") else 1  # arange(end) or arange(start, end, ...)
    if any(not isinstance(a, (int, float)) and not (k == end and e.specialize) for k, a in enumerate(n.args[:3])):
        return "a symbolic or tensor bound"
    if not e.static([n.meta["val"].shape[0]]):
        return "a symbolic length"
    return None


def _full_like(e, n):
    shape = sizes.shape(n.meta["val"])
    return "full(shape=%s, value=%s, dtype=%s)" % (e.lit(shape), e.lit(n.args[1]), e.dtype(n))


def _full_like_check(e, n):
    if not e.static(n.meta["val"].shape):
        return "a symbolic shape"
    if not isinstance(n.args[1], (int, float, bool)):
        return "a tensor fill value"
    return None


def _gather(e, n):
    x, d, index = n.args[0], n.args[1], n.args[2]
    return "gather(%s, %s, dim=%d)" % (e.v(x), e.v(index), d % len(x.meta["val"].shape))


def _gather_check(e, n):
    x, index = n.args[0].meta["val"], n.args[2].meta["val"]
    if len(x.shape) != len(index.shape) or len(x.shape) == 0:
        return "an index of another rank than the tensor's"
    if not e.static(x.shape, index.shape):
        return "a symbolic shape"
    return None


def _iota_along(n, d, rank):
    """iota(n) as a rank-`rank` tensor along dim d (size 1 elsewhere)."""
    shape = [1] * rank
    shape[d] = n
    return "reshape(iota(%d), shape=[%s])" % (n, ", ".join(map(str, shape)))


def _scatter_value(e, n):  # one index per row along dim: out = where(iota == index, value, x)
    x, d, index, value = n.args[0], n.args[1], n.args[2], n.args[3]
    shape = x.meta["val"].shape
    d %= len(shape)
    return "where(eq(%s, %s), %s, %s)" % (_iota_along(sizes.hint(shape[d]), d, len(shape)), e.v(index), e.lit(value),
                                          e.v(x))


def _scatter_value_check(e, n):
    x, index, value = n.args[0].meta["val"], n.args[2].meta["val"], n.args[3]
    if len(x.shape) != len(index.shape) or len(x.shape) == 0 or not e.static(x.shape, index.shape):
        return "an index of another rank or a symbolic shape"
    d = n.args[1] % len(x.shape)
    xs, ix = sizes.shape(x), sizes.shape(index)
    if ix[d] != 1 or any(ix[k] != xs[k] for k in range(len(xs)) if k != d):
        return "an index other than one position per row along the dim (fusec writes it as a select)"
    if not isinstance(value, (int, float, bool)) or (isinstance(value, float) and not x.dtype.is_floating_point):
        return "a fill value of another kind than the tensor's"
    return None


def _slice_scatter(e, n):  # src padded to x's shape, chosen inside the slice
    x, src = n.args[0], n.args[1]
    shape = sizes.shape(x.meta["val"])
    rank = len(shape)
    d = _kw(n, "dim", 2, 0) % rank
    start, end = _slice_bounds(n, shape[d])
    pad = [0] * (2 * rank)
    pad[2 * d], pad[2 * d + 1] = start, shape[d] - end
    io = _iota_along(shape[d], d, rank)
    return "where(logical_and(ge(%s, %d), lt(%s, %d)), pad(%s, pad=%s, value=0), %s)" % (
        io, start, io, end, e.v(src), e.lit(pad), e.v(x))


def _slice_bounds(n, size):
    start = _kw(n, "start", 3, None)
    end = _kw(n, "end", 4, None)
    start = 0 if start is None else start
    end = size if end is None else end
    start = max(0, min(size, start + size if start < 0 else start))
    end = max(start, min(size, end + size if end < 0 else end))
    return start, end


def _slice_scatter_check(e, n):
    x = n.args[0].meta["val"]
    if not e.static(x.shape, n.args[1].meta["val"].shape):
        return "a symbolic shape"
    if any(not (v is None or isinstance(v, int)) for v in (_kw(n, "start", 3), _kw(n, "end", 4))):
        return "symbolic bounds"
    if _kw(n, "step", 5, 1) != 1:
        return "a step other than 1"
    return None


def _scalar_tensor(e, n):
    return "full(shape=[], value=%s, dtype=%s)" % (e.lit(n.args[0]), e.dtype(n))


def _gelu(e, n):
    approx = n.kwargs.get("approximate", "none")
    return "gelu(%s, approximate=\"%s\")" % (e.v(n.args[0]), approx)


def _pow_scalar(e, n):  # aten.pow.Scalar: a number to a tensor power
    return "pow(%s, %s)" % (e.lit(n.args[0]), e.v(n.args[1]))


def _rsub(e, n):  # rsub(a, b, alpha) = b - alpha * a
    alpha = n.kwargs.get("alpha", 1)
    a = e.v(n.args[0]) if alpha == 1 else "mul(%s, %s)" % (e.v(n.args[0]), e.lit(alpha))
    return "sub(%s, %s)" % (e.v(n.args[1]), a)


def _div_mode(e, n):
    mode = n.kwargs.get("rounding_mode")
    out = e.dtype(n)
    if out in FLOAT_FG:
        q = "div(%s, %s)" % (e.v(n.args[0]), e.v(n.args[1]))
        return {"trunc": "trunc(%s)", "floor": "floor(%s)", None: "%s"}[mode] % q
    return "div(%s, %s)" % (e.v(n.args[0]), e.v(n.args[1]))  # integers: trunc


def _div_mode_check(e, n):
    if n.kwargs.get("rounding_mode") == "floor" and e.dtype(n) not in FLOAT_FG:
        return "floor division of integers (fusec's integer div truncates)"
    return None


def _identity(e, n):
    return e.v(n.args[0])


def _sdpa(e, n):
    q, k, v = n.args[:3]
    causal = bool(_kw(n, "is_causal", 5, False))
    scale = n.kwargs.get("scale")
    s = "sdpa(%s, %s, %s, causal=%s" % (e.v(q), e.v(k), e.v(v), e.lit(causal))
    if scale is not None:
        s += ", scale=%s" % e.lit(float(scale))
    return Multi(2, s + ")", 0)  # the node is `o`; `lse` is not used


def _sdpa_check(e, n):
    if _kw(n, "attn_mask", 3) is not None:
        return "an attention mask (fusec's sdpa takes causal=true/false only)"
    if _kw(n, "dropout_p", 4, 0.0):
        return "dropout in attention"
    if n.kwargs.get("enable_gqa"):
        return "grouped-query attention (enable_gqa=True)"
    shapes = [a.meta["val"].shape for a in n.args[:3]]
    if any(len(s) != 4 for s in shapes):
        return "q, k, v of rank other than 4 ([B,H,S,D])"
    if shapes[0] != shapes[1] or shapes[1] != shapes[2]:
        return "q, k, v of different shapes"
    return None


# ---- attention: PyTorch's fused kernels as fusec's sdpa / sdpa_bwd (export2) ----
# AOTAutograd takes F.scaled_dot_product_attention apart into the kernel the
# device picks: on the CPU _scaled_dot_product_flash_attention_for_cpu(_backward),
# on CUDA _scaled_dot_product_flash_attention(_backward) (FlashAttention) or,
# by default on Hopper, _scaled_dot_product_cudnn_attention(_backward). Each
# forward returns the output and the logsumexp, f32, natural log, of each row
# of scaled scores: fusec's `o, lse = sdpa(...)` (format.md 5.8) to the
# letter, [B,H,Sq] (flash) or [B,H,Sq,1] (cuDNN: a reshape of it; PyTorch's
# context-parallel attention merges both kernels' logsumexps by the one
# formula, torch/distributed/tensor/experimental/_context_parallel), so the
# two devices' flash regions have the same text. The CUDA forwards' other
# results (cum_seq_q/k: None; max_q/max_k; the dropout's philox state; the
# debug mask) are not fusec's: the node is taken only where none of them is
# used (export._free_flash_rng frees the philox state a training graph
# saves, which without dropout the backward never reads).

SDPA_HEAD_DIMS = (64, 96, 128, 256)  # what the code generator's sdpa takes (opt/segment.c)
SDPA_BWD_HEAD_DIMS = (64, 128)  # and its sdpa_bwd
# overload -> where its arguments are (positions; None: it has no such argument)
Fused = namedtuple("Fused", "fwd dropout causal bias debug lse4 cum rng", defaults=((), ()))
Fused.__doc__ = """fwd: a forward (else a backward, operands do, q, k, v, o, lse first);
the positions of dropout_p, is_causal, the attention bias and return_debug_mask;
lse4: the logsumexp is [B,H,Sq,1] (cuDNN), not [B,H,Sq]; cum: the positions of a
backward's cum_seq_q/k (None but for packed variable-length batches); rng: the
results of a CUDA forward that hold the dropout's philox state."""
FLASH = {
    "aten._scaled_dot_product_flash_attention_for_cpu.default": Fused(True, 3, 4, None, None, False),
    "aten._scaled_dot_product_flash_attention.default": Fused(True, 3, 4, None, 5, False, (), (6, 7)),
    "aten._scaled_dot_product_flash_attention_for_cpu_backward.default": Fused(False, 6, 7, None, None, False),
    "aten._scaled_dot_product_flash_attention_backward.default": Fused(False, 10, 11, None, None, False, (6, 7)),
    "aten._scaled_dot_product_cudnn_attention.default": Fused(True, 5, 6, 3, 7, True, (), (6, 7)),
    "aten._scaled_dot_product_cudnn_attention_backward.default": Fused(False, 13, 14, 8, None, True, (9, 10)),
}


def _flash_attrs(e, n):
    f = FLASH[str(n.target)]
    s = "causal=%s" % e.lit(bool(_kw(n, "is_causal", f.causal, False)))
    scale = n.kwargs.get("scale")
    if scale is not None:
        s += ", scale=%s" % e.lit(float(scale))
    return s


def _flash(e, n):
    q, k, v = n.args[:3]
    post = None
    if FLASH[str(n.target)].lse4:
        B, H, S = q.meta["val"].shape[:3]
        post = {1: "reshape(%%s, shape=%s)" % e.lit([B, H, S, 1])}
    return Multi(2, "sdpa(%s, %s, %s, %s)" % (e.v(q), e.v(k), e.v(v), _flash_attrs(e, n)), None, post)


def _flash_bwd(e, n):
    ops = [e.v(a) for a in n.args[:6]]  # do, q, k, v, o, lse
    if FLASH[str(n.target)].lse4:
        ops[5] = "reshape(%s, shape=%s)" % (ops[5], e.lit(list(n.args[1].meta["val"].shape[:3])))
    return Multi(3, "sdpa_bwd(%s, %s)" % (", ".join(ops), _flash_attrs(e, n)))


def _flash_check(e, n):
    f = FLASH[str(n.target)]
    if _kw(n, "dropout_p", f.dropout, 0.0) != 0:
        return "dropout in attention"
    if n.kwargs.get("attn_mask") is not None or (f.bias is not None and _kw(n, "attn_bias", f.bias) is not None):
        return "an attention mask (fusec's sdpa takes causal=true/false only)"
    if any(_kw(n, name, pos) is not None for name, pos in zip(("cum_seq_q", "cum_seq_k"), f.cum)):
        return "variable-length sequences (cum_seq_q/k)"
    scale = n.kwargs.get("scale")
    if scale is not None and not isinstance(scale, (int, float)):
        return "a symbolic scale"
    if f.fwd:
        if f.debug is not None and _kw(n, "return_debug_mask", f.debug, False):
            return "return_debug_mask=True"
        for u in n.users:
            if u.target is not operator.getitem or u.args[1] not in (0, 1):
                return "a use of a result fusec's sdpa does not give (%s)" % u.name
        q, k, v = (a.meta["val"] for a in n.args[:3])
        do = None
    else:
        do, q, k, v, o, lse = (a.meta["val"] for a in n.args[:6])
        if not e.static(o.shape, q.shape, do.shape, lse.shape):
            return "attention over a symbolic size"
        qs = sizes.shape(q)
        if sizes.shape(o) != qs or sizes.shape(do) != qs:
            return "do or o of another shape than q"
        want = qs[:3] + ([1] if f.lse4 else [])
        if sizes.shape(lse) != want or str(lse.dtype) != "torch.float32":
            return "a logsumexp other than f32 [B,H,Sq%s]" % (",1" if f.lse4 else "")
    if any(len(t.shape) != 4 for t in (q, k, v)):
        return "q, k, v of rank other than 4 ([B,H,S,D])"
    if not e.static(q.shape, k.shape, v.shape):
        return "attention over a symbolic size"
    (B, H, S, D), (Bk, Hk, Sk, Dk), vs = sizes.shape(q), sizes.shape(k), sizes.shape(v)
    if Bk != B or Dk != D or vs != [B, Hk, Sk, D] or Hk == 0 or H % Hk:
        return "q, k, v shapes fusec's sdpa does not take (%s, %s, %s)" % ([B, H, S, D], [Bk, Hk, Sk, Dk], vs)
    if k.dtype != q.dtype or v.dtype != q.dtype or (do is not None and (do.dtype != q.dtype or o.dtype != q.dtype)):
        return "operands of different dtypes"
    if getattr(e, "compiled_only", False):
        dims = SDPA_HEAD_DIMS if f.fwd else SDPA_BWD_HEAD_DIMS
        if str(q.dtype) not in ("torch.bfloat16", "torch.float16"):
            return "%s attention (fusec's code generator takes bf16 and f16)" % fg_dtype(q.dtype)
        if D not in dims:
            return "head dim %d (fusec's code generator takes %s)" % (D, ", ".join(map(str, dims)))
        if Sk < 1:
            return "attention with no keys"
    return None


# ---- embeddings (export2): the lookup as index_select, its backward as index_add ----


def _embedding(e, n):  # aten.embedding(weight, indices, padding_idx, ...): rows of the table
    w, ids = n.args[0], n.args[1]
    ishape = list(ids.meta["val"].shape)
    d = list(w.meta["val"].shape[1:])
    flat = e.v(ids) if len(ishape) == 1 else "reshape(%s, shape=[-1])" % e.v(ids)
    sel = "index_select(%s, %s, dim=0)" % (e.v(w), flat)
    return sel if len(ishape) == 1 else "reshape(%s, shape=%s)" % (sel, e.lit(ishape + d))


def _embedding_check(e, n):
    w, ids = n.args[0].meta["val"], n.args[1].meta["val"]
    if len(w.shape) != 2:
        return "a table of rank other than 2"
    if not e.static(w.shape, ids.shape):
        return "a symbolic shape"
    if e.operand_dtype(n.args[1]) not in ("i8", "u8", "i16", "i32", "i64"):
        return "indices that are not integers"
    return None  # padding_idx and sparse only matter to the backward


def _index_put(e, n):  # index_put(x, [idx], values, accumulate=True): index_add of the rows
    x, (idx,), vals = n.args[0], n.args[1], n.args[2]
    xs, ishape = sizes.shape(x.meta["val"]), sizes.shape(idx.meta["val"])
    i = e.v(idx) if len(ishape) == 1 else "reshape(%s, shape=[-1])" % e.v(idx)
    i = "where(lt(%s, 0), add(%s, %d), %s)" % (i, i, xs[0], i)  # torch counts a negative index from the end
    k = 1
    for s in ishape:
        k *= s
    v = e.v(vals) if len(ishape) == 1 else "reshape(%s, shape=%s)" % (e.v(vals), e.lit([k] + xs[1:]))
    return "index_add(%s, %s, %s, dim=0)" % (e.v(x), i, v)


def _index_put_check(e, n):
    if not _kw(n, "accumulate", 3, False):
        return "index_put without accumulate (fusec maps the accumulating form, an embedding's backward)"
    ind = n.args[1]
    if len(ind) != 1 or ind[0] is None:
        return "more than one index tensor, or a None index"
    x, idx, vals = n.args[0].meta["val"], ind[0].meta["val"], n.args[2].meta["val"]
    if e.operand_dtype(ind[0]) not in ("i8", "u8", "i16", "i32", "i64"):
        return "a mask or non-integer index"
    if not e.static(x.shape, idx.shape, vals.shape) or len(x.shape) == 0:
        return "a symbolic shape"
    if sizes.shape(vals) != sizes.shape(idx) + sizes.shape(x)[1:]:
        return "values that broadcast (fusec's index_add takes one slice per index)"
    if vals.dtype != x.dtype:
        return "values of another dtype than the tensor's"
    return None


def _getitem(e, n):
    return e.item(n.args[0], n.args[1])


def _getitem_check(e, n):
    return None if e.has_multi(n.args[0]) else "an item of a value fusec does not produce"


def _bitwise_bool(op):
    def check(e, n):
        if any(e.operand_dtype(a) not in ("bool", None) for a in n.args[:2]):
            return "a bitwise op on integers"
        return None
    return Entry(lambda e, n: "%s(%s)" % (op, ", ".join(e.v(a) for a in n.args[:2])), check)


# ---- the table ----------------------------------------------------------------

TABLE = {}
for _op in ("abs neg relu floor ceil trunc round sign exp exp2 expm1 log log2 log1p sqrt rsqrt reciprocal sin "
            "cos tanh sigmoid silu erf isnan isinf logical_not").split():
    TABLE["aten.%s.default" % _op] = unary(_op)
for _op in ("maximum minimum logical_and logical_or").split():
    TABLE["aten.%s.default" % _op] = binary(_op)
for _op in ("mul eq ne lt le gt ge fmod").split():
    TABLE["aten.%s.Tensor" % _op] = binary(_op)
    TABLE["aten.%s.Scalar" % _op] = binary(_op)
for _op in ("pow.Tensor_Tensor", "pow.Tensor_Scalar"):
    TABLE["aten." + _op] = Entry(lambda e, n: _float_out(e, n, "pow") if e.dtype(n) in FLOAT_FG
                                 else "pow(%s, %s)" % (e.v(n.args[0]), e.v(n.args[1])), _ok)
TABLE["aten.pow.Scalar"] = Entry(_pow_scalar, _ok)
for _op in ("add", "sub"):
    TABLE["aten.%s.Tensor" % _op] = Entry(lambda e, n, op=_op: _alpha(e, n, op), _ok)
    TABLE["aten.%s.Scalar" % _op] = Entry(lambda e, n, op=_op: _alpha(e, n, op), _ok)
TABLE["aten.rsub.Scalar"] = Entry(_rsub, _ok)
TABLE["aten.div.Tensor"] = Entry(lambda e, n: _float_out(e, n, "div"), _ok)
TABLE["aten.div.Scalar"] = Entry(lambda e, n: _float_out(e, n, "div"), _ok)
TABLE["aten.div.Tensor_mode"] = Entry(_div_mode, _div_mode_check)
TABLE["aten.gelu.default"] = Entry(_gelu, _ok)
TABLE["aten.bitwise_not.default"] = Entry(lambda e, n: "logical_not(%s)" % e.v(n.args[0]),
                                          lambda e, n: None if e.operand_dtype(n.args[0]) == "bool"
                                          else "a bitwise not of integers")
TABLE["aten.bitwise_and.Tensor"] = _bitwise_bool("logical_and")
TABLE["aten.bitwise_or.Tensor"] = _bitwise_bool("logical_or")
TABLE["aten.where.self"] = Entry(_where, _ok)
TABLE["aten.clamp.default"] = Entry(_clamp, _clamp_check)
TABLE["aten.clamp_min.default"] = Entry(lambda e, n: "clamp(%s, min=%s)" % (e.v(n.args[0]), e.lit(n.args[1])),
                                        _clamp_check)
TABLE["aten.clamp_max.default"] = Entry(lambda e, n: "clamp(%s, max=%s)" % (e.v(n.args[0]), e.lit(n.args[1])),
                                        lambda e, n: None)
# indexing (issue 21, item 4: cross-entropy's target logit, its one-hot
# backward, and the backward of a slice such as RoPE's halves)
TABLE["aten.gather.default"] = Entry(_gather, _gather_check)
TABLE["aten.scatter.value"] = Entry(_scatter_value, _scatter_value_check)
TABLE["aten.slice_scatter.default"] = Entry(_slice_scatter, _slice_scatter_check)
# embeddings (export2): the lookup and, from embedding_dense_backward's
# decomposition, the accumulating index_put into a zeros table
TABLE["aten.embedding.default"] = Entry(_embedding, _embedding_check)
TABLE["aten.index_put.default"] = Entry(_index_put, _index_put_check)
TABLE["aten._unsafe_index_put.default"] = Entry(_index_put, _index_put_check)
# casts
TABLE["aten._to_copy.default"] = Entry(_cast, _to_copy_check)
TABLE["prims.convert_element_type.default"] = Entry(_cast, _ok)
# reductions
TABLE["aten.sum.dim_IntList"] = _reduce("sum")
TABLE["aten.sum.default"] = Entry(_sum_default, _ok)
TABLE["aten.mean.default"] = Entry(lambda e, n: "mean(%s, dtype=%s)" % (e.v(n.args[0]), e.dtype(n)), _ok)
TABLE["aten.amax.default"] = _reduce("amax")
TABLE["aten.amin.default"] = _reduce("amin")
TABLE["aten.mean.dim"] = _reduce("mean")
TABLE["aten.prod.dim_int"] = _reduce("prod")
TABLE["aten.var.correction"] = Entry(lambda e, n: _var_common(e, n, "var"), _var_check)
TABLE["aten.var_mean.correction"] = Entry(lambda e, n: Multi(2, _var_common(e, n, "var_mean")), _var_check)
# views, copies
TABLE["aten.view.default"] = Entry(_view, _ok)
TABLE["aten._unsafe_view.default"] = Entry(_view, _ok)
TABLE["aten.permute.default"] = Entry(_permute, _ok)
TABLE["aten.transpose.int"] = Entry(_transpose, _ok)
TABLE["aten.t.default"] = Entry(lambda e, n: ("transpose(%s, dim0=0, dim1=1)" % e.v(n.args[0]))
                                if _rank(n) == 2 else e.v(n.args[0]), _ok)
TABLE["aten.expand.default"] = Entry(_expand, _ok)
TABLE["aten.unsqueeze.default"] = Entry(lambda e, n: "unsqueeze(%s, dim=%d)" % (e.v(n.args[0]), n.args[1] % _rank(n)),
                                        _ok)
TABLE["aten.squeeze.dim"] = Entry(_squeeze, _ok)
TABLE["aten.squeeze.dims"] = Entry(_squeeze, _ok)
TABLE["aten.squeeze.default"] = Entry(_squeeze, _ok)
TABLE["aten.slice.Tensor"] = Entry(_slice, _slice_check)
TABLE["aten.select.int"] = Entry(_select, _select_check)
TABLE["aten.cat.default"] = Entry(_cat, _ok)
TABLE["aten.split.Tensor"] = Entry(_split, _split_check)
TABLE["aten.split_with_sizes.default"] = Entry(_split, _split_check)
TABLE["aten.constant_pad_nd.default"] = Entry(_pad, _ok)
TABLE["aten.clone.default"] = Entry(_identity, _ok)
TABLE["aten.alias.default"] = Entry(_identity, _ok)
TABLE["aten.full.default"] = Entry(_full, _full_check)
TABLE["aten.scalar_tensor.default"] = Entry(_scalar_tensor, _ok)
TABLE["aten.full_like.default"] = Entry(_full_like, _full_like_check)
TABLE["aten.arange.default"] = Entry(_arange, _arange_check)
TABLE["aten.arange.start"] = Entry(_arange, _arange_check)
TABLE["aten.arange.start_step"] = Entry(_arange, _arange_check)
TABLE["aten.scaled_dot_product_attention.default"] = Entry(_sdpa, _sdpa_check)
TABLE["<built-in function getitem>"] = Entry(_getitem, _getitem_check)
# attention (export2): PyTorch's flash kernels, CPU and CUDA, as sdpa / sdpa_bwd
for _op in FLASH:
    TABLE[_op] = Entry(_flash, _flash_check) if FLASH[_op].fwd else Entry(_flash_bwd, _flash_check)

# Rows the interpreter runs but fusec's code generator does not compile yet:
# left to PyTorch unless export(..., compiled_only=False) (the table's tests).
NOT_COMPILED = {
    # torch.export's composite op (rows tested in f32 with small head dims); AOTAutograd's graphs
    # hold the flash kernels instead, which are compiled (FLASH)
    "aten.scaled_dot_product_attention.default": "the composite sdpa (the flash kernels' rows are compiled)",
}

# Rows of kernels only a CUDA device gives: tests() has no case for them (its
# cases run on the CPU); test_export.py traces them on fake CUDA tensors and
# checks their regions are the CPU rows' (the same .fg text).
GPU_ONLY = {
    "aten._scaled_dot_product_flash_attention.default": "aten._scaled_dot_product_flash_attention_for_cpu.default",
    "aten._scaled_dot_product_flash_attention_backward.default":
        "aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
    # the same with the logsumexp reshaped (test_export.py CudnnAttentionTest)
    "aten._scaled_dot_product_cudnn_attention.default": "aten._scaled_dot_product_flash_attention_for_cpu.default",
    "aten._scaled_dot_product_cudnn_attention_backward.default":
        "aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
}

# Ops that carry no arithmetic: a region of these alone is left to PyTorch.
VIEW_OPS = {
    "aten.view.default", "aten._unsafe_view.default", "aten.permute.default",
    "aten.transpose.int", "aten.t.default", "aten.expand.default", "aten.unsqueeze.default", "aten.squeeze.dim",
    "aten.squeeze.dims", "aten.squeeze.default", "aten.slice.Tensor", "aten.select.int", "aten.split.Tensor",
    "aten.split_with_sizes.default", "aten.clone.default", "aten.alias.default",
    "<built-in function getitem>",
}

# Left in PyTorch by design, not for want of a mapping (prefixes of the overload name).
LEFT_TO_TORCH = (
    "aten.mm", "aten.bmm", "aten.addmm", "aten.matmul", "aten.baddbmm", "aten.linear", "aten.convolution",
    "aten._convolution", "aten.conv", "aten.embedding", "aten.rand", "aten.randn", "aten.bernoulli",
    "aten.native_dropout", "aten.normal", "aten.uniform", "aten.randint", "aten.randperm", "aten.multinomial",
    "_c10d_functional.", "c10d_functional.", "aten._assert", "aten.sym_", "_dtensor.", "aten._scaled_mm", "aten._fused_",
    "aten.empty.memory_format",  # export._free_flash_rng's stand-in for flash attention's rng state
    "aten.lift_fresh",  # a constant the model builds with torch.tensor(...): no arithmetic to fuse
)


def left_to_torch(name):
    return any(name.startswith(p) for p in LEFT_TO_TORCH)


# ---- tests: a torch function per row ---------------------------------------------
# (imported lazily; the rows above do not need torch)


def _tests():
    import torch
    import torch.nn.functional as F

    def r(*s, dtype=None):
        def make():
            g = torch.Generator().manual_seed(hash(s) & 0xFFFF)
            return torch.randn(*s, generator=g, dtype=torch.float32).to(dtype or torch.float32)
        return make

    def pos(*s):
        return lambda: r(*s)().abs() + 0.25

    def ints(*s, lo=-9, hi=10, dtype=torch.int32):
        return lambda: torch.randint(lo, hi, s, generator=torch.Generator().manual_seed(7), dtype=dtype)

    def boolean(*s):
        return lambda: r(*s)() > 0

    T = {}

    def add(name, fn, *inputs):
        T.setdefault(name, []).append(Case(fn, list(inputs)))

    for op in "abs neg relu floor ceil trunc round sign exp exp2 expm1 sin cos tanh sigmoid erf".split():
        add("aten.%s.default" % op, getattr(torch, op), r(5, 7))
    add("aten.round.default", torch.round, lambda: torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 3.2]))
    add("aten.abs.default", torch.abs, ints(5, 3))
    add("aten.neg.default", torch.neg, r(4, 6, dtype=torch.bfloat16))
    for op in "log log2 log1p sqrt rsqrt reciprocal".split():
        add("aten.%s.default" % op, getattr(torch, op), pos(5, 7))
    add("aten.silu.default", lambda x: F.silu(x), r(6, 5))
    add("aten.isnan.default", torch.isnan, lambda: torch.tensor([1.0, float("nan"), float("inf"), -2.0]))
    add("aten.isinf.default", torch.isinf, lambda: torch.tensor([1.0, float("nan"), float("inf"), -float("inf")]))
    add("aten.logical_not.default", torch.logical_not, r(3, 4))
    add("aten.bitwise_not.default", lambda x: ~(x > 0), r(3, 4))
    add("aten.bitwise_and.Tensor", lambda x, y: (x > 0) & (y > 0), r(3, 4), r(3, 4))
    add("aten.bitwise_or.Tensor", lambda x, y: (x > 0) | (y > 0), r(3, 4), r(3, 4))
    for op in "maximum minimum logical_and logical_or".split():
        add("aten.%s.default" % op, getattr(torch, op), r(4, 5), r(5))
    for op in "mul eq ne lt le gt ge".split():
        add("aten.%s.Tensor" % op, getattr(torch, op), r(4, 5), r(4, 1))
        add("aten.%s.Scalar" % op, _with_scalar(getattr(torch.ops.aten, op).Scalar, 0.5), r(4, 5))
    add("aten.mul.Tensor", torch.mul, r(4, 5, dtype=torch.bfloat16), r(5))
    add("aten.mul.Tensor", lambda x: x * 3, ints(4, 5))
    add("aten.fmod.Tensor", torch.fmod, r(4, 5), pos(4, 5))
    add("aten.fmod.Scalar", lambda x: torch.fmod(x, 0.75), r(4, 5))
    add("aten.pow.Tensor_Tensor", torch.pow, pos(3, 4), r(3, 4))
    add("aten.pow.Tensor_Scalar", lambda x: x ** 3, r(3, 4))
    add("aten.pow.Tensor_Scalar", lambda x: x ** 0.5, pos(3, 4))
    add("aten.pow.Scalar", lambda x: 2.0 ** x, r(3, 4))
    add("aten.add.Tensor", torch.add, r(4, 5), r(4, 5, dtype=torch.float16))
    add("aten.add.Tensor", lambda x, y: torch.add(x, y, alpha=2), r(4, 5), r(5))
    add("aten.add.Tensor", lambda x: x + 1.5, ints(4, 5))
    add("aten.sub.Tensor", lambda x, y: torch.sub(x, y, alpha=0.5), r(4, 5), r(4, 5))
    add("aten.sub.Tensor", torch.sub, ints(3, 4), ints(3, 4))
    add("aten.rsub.Scalar", lambda x: 1 - x, r(4, 5))
    add("aten.div.Tensor", torch.div, r(4, 5), pos(4, 5))
    add("aten.div.Tensor", torch.div, ints(4, 5), ints(4, 5, lo=1))
    add("aten.div.Tensor_mode", lambda x, y: torch.div(x, y, rounding_mode="trunc"), ints(4, 5), ints(4, 5, lo=1))
    add("aten.div.Tensor_mode", lambda x, y: torch.div(x, y, rounding_mode="floor"), r(4, 5), pos(4, 5))
    add("aten.gelu.default", F.gelu, r(4, 9))
    add("aten.gelu.default", lambda x: F.gelu(x, approximate="tanh"), r(4, 9, dtype=torch.bfloat16))
    add("aten.where.self", torch.where, boolean(4, 5), r(4, 5), r(5))
    add("aten.where.self", lambda c, x: torch.where(c, x, float("-inf")), boolean(4, 5), r(4, 5))
    add("aten.clamp.default", lambda x: x.clamp(-0.5, 0.75), r(4, 6))
    add("aten.clamp_min.default", lambda x: x.clamp_min(0.1), r(4, 6))
    add("aten.clamp_max.default", lambda x: x.clamp_max(0.1), r(4, 6))
    add("aten._to_copy.default", lambda x: x.to(torch.bfloat16), r(4, 6))
    add("aten._to_copy.default", lambda x: x.to(torch.int32), lambda: r(4, 6)() * 10)
    add("aten._to_copy.default", lambda x: x.float() * 2, r(4, 6, dtype=torch.float16))
    add("aten.sum.dim_IntList", lambda x: x.sum(-1), r(6, 33))
    add("aten.sum.dim_IntList", lambda x: x.sum((0, 2), keepdim=True), r(3, 4, 5))
    add("aten.sum.dim_IntList", lambda x: x.sum(0), ints(5, 4))
    add("aten.sum.dim_IntList", lambda x: (x > 0).sum(-1), r(5, 9))
    add("aten.sum.dim_IntList", lambda x: x.sum(-1, dtype=torch.float32), r(5, 9, dtype=torch.bfloat16))
    add("aten.sum.default", torch.sum, r(7, 9))
    add("aten.mean.default", torch.mean, r(7, 9))
    add("aten.mean.default", torch.mean, r(5, 3, 4, dtype=torch.bfloat16))
    add("aten.amax.default", lambda x: x.amax(1), r(5, 17))
    add("aten.amin.default", lambda x: x.amin(0, keepdim=True), r(5, 17))
    add("aten.amax.default", lambda x: x.amax(-1), ints(4, 6))
    add("aten.mean.dim", lambda x: x.mean(-1, keepdim=True), r(5, 17))
    add("aten.mean.dim", lambda x: x.mean(-1), r(5, 16, dtype=torch.bfloat16))
    add("aten.prod.dim_int", lambda x: x.prod(1), lambda: r(4, 5)() * 0.5 + 1)
    add("aten.var.correction", lambda x: x.var(-1), r(5, 17))
    add("aten.var.correction", lambda x: x.var(0, correction=0), r(5, 17))
    add("aten.var.correction", lambda x: torch.ops.aten.var.correction(x, [1], correction=2.0), r(5, 17))
    add("aten.var.correction", lambda x: torch.ops.aten.var.correction(x, [1], correction=None), r(5, 17))
    add("aten.var_mean.correction", lambda x: torch.var_mean(x, -1, correction=0, keepdim=True), r(5, 17))
    add("aten.view.default", lambda x: (x + 1).view(4, 3, 2), r(4, 6))
    add("aten.view.default", lambda x: (x * 2).view(-1), r(3, 5))
    add("aten.permute.default", lambda x: (x + 1).permute(2, 0, 1), r(2, 3, 4))
    add("aten.transpose.int", lambda x: (x + 1).transpose(0, 1) * 2, r(3, 4))
    add("aten.expand.default", lambda x, y: x.expand(4, 5) * y, r(1, 5), r(4, 5))
    add("aten.unsqueeze.default", lambda x: (x + 1).unsqueeze(1) + x.unsqueeze(-1), r(3, 4))
    add("aten.squeeze.dim", lambda x: (x + 1).squeeze(1), r(3, 1, 4))
    add("aten.squeeze.dims", lambda x: (x + 1).squeeze((0, 2)), r(1, 3, 1, 4))
    add("aten.slice.Tensor", lambda x: (x + 1)[:, 1:5:2], r(3, 7))
    add("aten.slice.Tensor", lambda x: (x * 2)[-2:], r(5, 3))
    add("aten.select.int", lambda x: (x + 1)[:, -1] * x[:, 0], r(3, 7))
    add("aten.cat.default", lambda x, y: torch.cat([x + 1, y * 2], dim=1), r(3, 4), r(3, 2))
    add("aten.split.Tensor", lambda x: tuple(t * 2 for t in torch.split(x + 1, 3, dim=1)), r(3, 7))
    add("aten.split_with_sizes.default", lambda x: tuple(t * 2 for t in torch.split(x + 1, [1, 4], dim=0)),
        r(5, 2))
    add("aten.constant_pad_nd.default", lambda x: F.pad(x + 1, (1, 2, 0, 1), value=0.5), r(3, 4))
    add("aten.clone.default", lambda x: torch.clone(x + 1) * 2, r(3, 4))
    add("aten.full.default", lambda x: x + torch.full((3, 4), 2.5), r(3, 4))
    add("aten.full_like.default", lambda x: x * torch.full_like(x, 2.5), r(3, 4))
    add("aten.full_like.default", lambda x: x + torch.ones_like(x, dtype=torch.int32), r(3, 4))
    add("aten.arange.start_step", lambda x: x + torch.arange(3, 11, 2, dtype=torch.float32), r(2, 4))
    add("aten.arange.start_step", lambda x: x + torch.arange(5), ints(2, 5))
    add("aten.arange.start_step", lambda x: x * torch.arange(0.5, 2.0, 0.25), r(3, 6))
    add("aten.arange.start_step", lambda x: x.masked_fill(torch.arange(4)[:, None] < torch.arange(4), -1.0),
        r(4, 4))
    add("aten.arange.default", lambda x: x + torch.ops.aten.arange.default(6), r(6))
    add("aten.arange.start", lambda x: x + torch.ops.aten.arange.start(2, 8), ints(6))
    add("aten.scalar_tensor.default", lambda x: torch.where(x > 0, x, torch.ops.aten.scalar_tensor(0.5)), r(3, 4))
    add("aten.scaled_dot_product_attention.default",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), r(1, 2, 9, 8), r(1, 2, 9, 8),
        r(1, 2, 9, 8))
    add("aten.scaled_dot_product_attention.default",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3), r(2, 1, 5, 4), r(2, 1, 5, 4),
        r(2, 1, 5, 4))
    # rows that torch.export's decompositions take apart; a graph of AOTAutograd or
    # make_fx still holds them (the test traces these with make_fx)
    aten, prims = torch.ops.aten, torch.ops.prims
    add("aten.add.Scalar", lambda x: aten.add.Scalar(x, 2.5), r(3, 4))
    add("aten.sub.Scalar", lambda x: aten.sub.Scalar(x, 2), ints(3, 4))
    add("aten.div.Scalar", lambda x: aten.div.Scalar(x, 4), r(3, 4))
    add("aten.mul.Scalar", lambda x: aten.mul.Scalar(x, 0.5), r(3, 4, dtype=torch.bfloat16))
    add("aten._unsafe_view.default", lambda x: aten._unsafe_view(x + 1, [2, 6]), r(3, 4))
    add("aten.alias.default", lambda x: aten.alias(x + 1) * 2, r(3, 4))
    add("aten.squeeze.default", lambda x: torch.squeeze(x + 1), r(1, 3, 1, 4))
    add("aten.t.default", lambda x: (x + 1).t() * 2, r(3, 4))
    add("aten.t.default", lambda x: (x + 1).t() * 2, r(5))
    add("prims.convert_element_type.default", lambda x: prims.convert_element_type(x * 3, torch.float16), r(3, 4))
    add("<built-in function getitem>", lambda x: torch.var_mean(x, 1)[1] + 1, r(4, 6))
    # indexing
    add("aten.gather.default", lambda x, i: torch.gather(x * 2, 1, i), r(5, 9),
        ints(5, 3, lo=0, hi=9, dtype=torch.int64))
    add("aten.gather.default", lambda x, i: torch.gather(x + 1, 0, i), r(6, 4, dtype=torch.bfloat16),
        ints(2, 4, lo=0, hi=6, dtype=torch.int64))
    add("aten.gather.default", lambda x, t: -torch.log_softmax(x, -1).gather(1, t[:, None]).mean(), r(7, 33),
        ints(7, lo=0, hi=33, dtype=torch.int64))
    add("aten.scatter.value", lambda x, i: torch.scatter(x * 2, 1, i, -1.0), r(5, 9),
        ints(5, 1, lo=0, hi=9, dtype=torch.int64))
    add("aten.scatter.value", lambda x, i: torch.scatter(x + 1, 0, i, 3), ints(6, 4),
        ints(1, 4, lo=0, hi=6, dtype=torch.int64))
    add("aten.slice_scatter.default", lambda x, s: torch.slice_scatter(x * 2, s + 1, 1, 2, 5), r(3, 8, 2),
        r(3, 3, 2))
    add("aten.slice_scatter.default", lambda x, s: torch.slice_scatter(x + 1, s * 2, -1, -4), r(4, 6, dtype=torch.bfloat16),
        r(4, 4, dtype=torch.bfloat16))
    # attention (export2): the CPU flash kernels, as AOTAutograd gives them, in dtypes and
    # head dims fusec's code generator takes (the .fg compiles too)
    def flash(i, sq, sk, dtype, causal, scale=None):  # input i of (do, q, k, v, o, lse)
        def make():
            g = torch.Generator().manual_seed(11)
            q, k, v, do = (torch.randn(*s, generator=g).to(dtype) for s in (sq, sk, sk, sq))
            o, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, scale=scale)
            return (do, q, k, v, o, lse)[i]
        return make

    cpu_flash = aten._scaled_dot_product_flash_attention_for_cpu
    cpu_flash_bwd = aten._scaled_dot_product_flash_attention_for_cpu_backward
    add("aten._scaled_dot_product_flash_attention_for_cpu.default", lambda q, k, v: cpu_flash(q, k, v, 0.0, True),
        *(flash(i, (1, 2, 9, 64), (1, 2, 9, 64), torch.bfloat16, True) for i in (1, 2, 3)))
    add("aten._scaled_dot_product_flash_attention_for_cpu.default",
        lambda q, k, v: cpu_flash(q * 2, k, v, 0.0, False, scale=0.1)[0] + 1,
        *(flash(i, (2, 2, 5, 128), (2, 2, 11, 128), torch.float16, False) for i in (1, 2, 3)))
    add("aten._scaled_dot_product_flash_attention_for_cpu.default", lambda q, k, v: cpu_flash(q, k, v, 0.0, True),
        *(flash(i, (1, 2, 13, 64), (1, 2, 6, 64), torch.bfloat16, True) for i in (1, 2, 3)))
    add("aten._scaled_dot_product_flash_attention_for_cpu.default", lambda q, k, v: cpu_flash(q, k, v, 0.0, True),
        *(flash(i, (1, 4, 7, 64), (1, 2, 7, 64), torch.bfloat16, True) for i in (1, 2, 3)))  # GQA
    add("aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
        lambda do, q, k, v, o, lse: cpu_flash_bwd(do, q, k, v, o, lse, 0.0, True),
        *(flash(i, (1, 4, 7, 64), (1, 2, 7, 64), torch.bfloat16, True) for i in range(6)))  # GQA
    add("aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
        lambda do, q, k, v, o, lse: cpu_flash_bwd(do, q, k, v, o, lse, 0.0, True),
        *(flash(i, (1, 2, 9, 64), (1, 2, 9, 64), torch.bfloat16, True) for i in range(6)))
    add("aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
        lambda do, q, k, v, o, lse: cpu_flash_bwd(do, q, k, v, o, lse, 0.0, False, scale=0.2),
        *(flash(i, (2, 1, 6, 128), (2, 1, 10, 128), torch.float16, False, 0.2) for i in range(6)))
    # embeddings (export2)
    add("aten.embedding.default", lambda w, i: F.embedding(i, w) * 2, r(11, 6),
        ints(3, 4, lo=0, hi=11, dtype=torch.int64))
    add("aten.embedding.default", lambda w, i: F.embedding(i, w + 1), r(7, 5, dtype=torch.bfloat16),
        ints(9, lo=0, hi=7, dtype=torch.int64))
    add("aten.index_put.default", lambda w, i, g: aten.index_put(w * 2, [i], g, True), r(6, 5),
        ints(3, 4, lo=-6, hi=6, dtype=torch.int64), r(3, 4, 5))
    add("aten.index_put.default", lambda w, i, g: aten.index_put(w, [i], g + 1, True), r(9, 3, dtype=torch.bfloat16),
        ints(13, lo=0, hi=9, dtype=torch.int32), r(13, 3, dtype=torch.bfloat16))
    add("aten._unsafe_index_put.default", lambda w, i, g: aten._unsafe_index_put(w * 2, [i], g, True), r(6, 5),
        ints(2, 7, lo=0, hi=6, dtype=torch.int64), r(2, 7, 5))
    add("aten.index_put.default", lambda w, i: aten.embedding_dense_backward(w * 3, i, 10, -1, False),
        r(2, 5, 4), ints(2, 5, lo=0, hi=10, dtype=torch.int64))
    # norms, after PyTorch's decompositions
    add("aten.var_mean.correction", lambda x, w, b: F.layer_norm(x, (16,), w, b), r(5, 16), r(16), r(16))
    add("aten.amax.default", lambda x: torch.softmax(x, -1), r(4, 19))
    add("aten.amax.default", lambda x: torch.log_softmax(x, -1), r(4, 19))
    add("aten.mean.dim", lambda x, w: F.rms_norm(x, (16,), w, 1e-6), r(5, 16), r(16))
    return T


def _with_scalar(f, c):
    return lambda x: f(x, c)


def tests():
    """{overload name: [Case, ...]}, every row of TABLE covered (checked by the test)."""
    return _tests()


__all__ = ["TABLE", "GPU_ONLY", "FLASH", "Entry", "Case", "Multi", "FG_DTYPE", "VIEW_OPS", "LEFT_TO_TORCH", "left_to_torch", "fg_dtype", "NOT_COMPILED",
           "tests", "math", "operator"]
