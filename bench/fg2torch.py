#!/usr/bin/env python3
"""A .fg graph as eager PyTorch: each statement one torch call, in order
(the semantics of docs/format.md written with PyTorch's ops, which the
format follows: promotion with weak scalars, bf16 rounded at every op).
Used by bench.py for the workloads that are plain .fg files (bench/suite/)
and for performance fuzzing (graphs of tools/fgdiff timed against
torch.compile of the same function).

    fn, sig = fg2torch.load(text, graph=None)   # sig: [(name, dtype, shape)]
    outs = fn(*inputs)                          # a tuple of tensors

Where PyTorch's op differs from the format, the difference is written out:
`dims=[]` reduces no dim (torch reduces all), integer `div` truncates, `pad`
lists dims first to last, `broadcast_in_dim` names the result dim of each
operand dim. `sdpa` is PyTorch's scaled_dot_product_attention (is_causal:
the same top-left alignment); its lse has no PyTorch counterpart (SDPA does
not return it), so a graph that uses lse raises. `sdpa_bwd` (do, q, k, v, o
and lse given) is the backward PyTorch's SDPA runs on the GPU, FlashAttention-2's
(aten._scaled_dot_product_flash_attention_backward, the call autograd
makes, with the graph's o and lse), where it applies (CUDA, bf16/f16, as
many key heads as query heads, causal only with Sq = Sk); elsewhere the
same formulas in f32 with explicit P = exp(scale q k^T - lse) (_sdpa_bwd_math).

A result written in place (`return v -> p`, docs/format.md 6.1) updates
the tensor passed for p: every result is computed first, from the
parameters as they were, then p.copy_(v) (a value sharing storage with a
parameter written in place, as in a swap, is cloned before any copy), and
the tensor passed for p is returned, the same object, as that result, as
the Python binding does. fn.inplace lists the parameters written ((result
index, parameter index) pairs).
"""
import math
import re

TOKEN = re.compile(r"\s*(?:(#[^\n]*)|([A-Za-z_][A-Za-z_0-9.]*)|(-(?:inf|nan)\b|-?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?))"
                   r"|(\"[^\"]*\")|(->|[()\[\]{},=:]))")


def _tokens(text):
    pos, out = 0, []
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise ValueError("fg2torch: cannot read %r" % text[pos:pos + 30])
        pos = m.end()
        com, name, num, s, punct = m.groups()
        if com:
            continue
        if name is not None:
            out.append(("name", name))
        elif num is not None:
            out.append(("num", num))
        elif s is not None:
            out.append(("str", s[1:-1]))
        elif punct is not None:
            out.append(("p", punct))
    return out


class _Parser:
    def __init__(self, toks):
        self.t, self.i = toks, 0

    def peek(self, k=0):
        return self.t[self.i + k] if self.i + k < len(self.t) else ("eof", None)

    def take(self, kind=None, val=None):
        tok = self.peek()
        if (kind and tok[0] != kind) or (val is not None and tok[1] != val):
            raise ValueError("fg2torch: expected %s %s, got %r" % (kind, val, tok))
        self.i += 1
        return tok[1]

    def expr(self):
        kind, val = self.peek()
        if kind == "num":
            self.i += 1
            return ("lit", float(val) if re.search(r"[.eEna]", val) else int(val))
        if kind == "str":
            self.i += 1
            return ("lit", val)
        if kind == "p" and val == "[":
            self.i += 1
            items = []
            while self.peek() != ("p", "]"):
                if items:
                    self.take("p", ",")
                items.append(self.expr())
            self.take("p", "]")
            return ("list", items)
        name = self.take("name")
        if self.peek() == ("p", "("):
            self.i += 1
            args, kw = [], {}
            while self.peek() != ("p", ")"):
                if args or kw:
                    self.take("p", ",")
                if self.peek()[0] == "name" and self.peek(1) == ("p", "="):
                    k = self.take("name")
                    self.take("p", "=")
                    kw[k] = self.expr()
                else:
                    args.append(self.expr())
            self.take("p", ")")
            return ("call", name, args, kw)
        return ("name", name)

    def result(self):
        """(expr, the parameter it is written into or None): `expr [-> NAME]`."""
        e = self.expr()
        if self.peek() == ("p", "->"):
            self.i += 1
            return e, self.take("name")
        return e, None

    def type_(self):
        dt = self.take("name")
        if self.peek() != ("p", "["):
            return dt, None
        self.take("p", "[")
        dims = []
        while self.peek() != ("p", "]"):
            if dims:
                self.take("p", ",")
            kind, v = self.peek()
            self.i += 1
            dims.append(int(v) if kind == "num" else v)
        self.take("p", "]")
        return dt, dims

    def graph(self):
        self.take("name", "graph")
        name = self.take("name")
        self.take("p", "(")
        params = []
        while self.peek() != ("p", ")"):
            if params:
                self.take("p", ",")
            pname = self.take("name")
            self.take("p", ":")
            dt, dims = self.type_()
            layout = None
            if self.peek() == ("name", "layout"):  # layout=[...]: the caller's strides (fn.layouts)
                self.i += 1
                self.take("p", "=")
                self.take("p", "[")
                layout = []
                while self.peek() != ("p", "]"):
                    if layout:
                        self.take("p", ",")
                    layout.append(int(self.take("num")))
                self.take("p", "]")
            params.append((pname, dt, dims, layout))
        self.take("p", ")")
        self.take("p", "{")
        stmts, results = [], None
        while self.peek() != ("p", "}"):
            if self.peek() == ("name", "return"):
                self.i += 1
                results = [self.result()]
                while self.peek() == ("p", ","):
                    self.i += 1
                    results.append(self.result())
                continue
            names = [self.take("name")]
            while self.peek() == ("p", ","):
                self.i += 1
                names.append(self.take("name"))
            self.take("p", "=")
            stmts.append((names, self.expr()))
        self.take("p", "}")
        return name, params, stmts, results


def parse(text):
    """[(name, params, statements, results)] of every graph in text."""
    p = _Parser(_tokens(text))
    out = []
    while p.peek()[0] != "eof":
        out.append(p.graph())
    return out


def _torch():
    import torch
    return torch


def dtype_of(name):
    torch = _torch()
    return {"bool": torch.bool, "i8": torch.int8, "u8": torch.uint8, "i16": torch.int16, "i32": torch.int32,
            "i64": torch.int64, "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
            "f64": torch.float64, "f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2,
            "f8e8m0": torch.float8_e8m0fnu}[name]


def _compiling():
    """Under torch.compile's tracing (a constant there: the bookkeeping of
    fn.gathered is left out of compiled code)."""
    c = getattr(_torch(), "compiler", None)
    return bool(c is not None and hasattr(c, "is_compiling") and c.is_compiling())


def _is_t(x):
    return hasattr(x, "dtype") and hasattr(x, "shape")


def _dims(x, dims):
    """Normalized dims of a reduction: None (all) when not given."""
    if dims is None:
        return list(range(x.dim()))
    return [d % x.dim() if x.dim() else 0 for d in dims]


def _reduce(op, x, dims=None, keepdim=False, dtype=None, correction=1):
    torch = _torch()
    ds = _dims(x, dims)
    if x.dim() == 0 or not ds:
        # no dim reduced: the identity, converted as a reduction converts
        xs = x.to(dtype) if dtype else x
        if op in ("var", "var_mean"):  # one element: 0 / max(0, 1 - correction)
            d = (xs - xs) * (xs - xs)
            v = d / max(0.0, 1.0 - correction)
            return (v, xs) if op == "var_mean" else v
        return xs
    kw = {"dim": ds, "keepdim": keepdim}
    if op == "sum":  # the result keeps x's dtype unless dtype= (torch gives i64 for ints)
        return torch.sum(x, dtype=dtype, **kw).to(dtype or x.dtype)
    if op == "mean":
        return torch.mean(x, dtype=dtype, **kw)
    if op == "prod":
        r = x
        for d in sorted(ds, reverse=True):
            r = torch.prod(r, dim=d, keepdim=keepdim, dtype=dtype)
        return r.to(dtype or x.dtype)
    if op in ("amax", "amin"):
        r = (torch.amax if op == "amax" else torch.amin)(x, **kw)
        return r.to(dtype) if dtype else r
    xs = x.to(dtype) if dtype else x
    if op == "var":
        return torch.var(xs, correction=correction, **kw)
    if op == "var_mean":
        return torch.var_mean(xs, correction=correction, **kw)
    raise ValueError(op)


def _bin(op, a, b):
    torch = _torch()
    if not _is_t(a) and not _is_t(b):
        raise ValueError("fg2torch: %s of two scalars" % op)
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        fl = any(_is_t(v) and v.dtype.is_floating_point or isinstance(v, float) for v in (a, b))
        if fl:
            return a / b
        ta = a if _is_t(a) else torch.tensor(a, device=b.device)
        return torch.div(ta, b, rounding_mode="trunc")
    if op == "pow":
        return torch.pow(a, b)
    ta = a if _is_t(a) else torch.tensor(a, device=b.device)
    tb = b if _is_t(b) else torch.tensor(b, device=a.device)
    f = {"fmod": torch.fmod, "maximum": torch.maximum, "minimum": torch.minimum, "eq": torch.eq,
         "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
         "logical_and": torch.logical_and, "logical_or": torch.logical_or}[op]
    if op in ("maximum", "minimum", "fmod"):  # promote as a weak scalar would
        rt = torch.result_type(a, b)
        ta, tb = ta.to(rt), tb.to(rt)
    return f(ta, tb)


UNARY = {
    "abs": "abs", "neg": "neg", "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log1p": "log1p",
    "log2": "log2", "sqrt": "sqrt", "rsqrt": "rsqrt", "reciprocal": "reciprocal", "sin": "sin", "cos": "cos",
    "tanh": "tanh", "erf": "erf", "sigmoid": "sigmoid", "relu": "relu", "floor": "floor", "ceil": "ceil",
    "round": "round", "trunc": "trunc", "sign": "sign", "isnan": "isnan", "isinf": "isinf",
    "logical_not": "logical_not", "sinh": "sinh", "cosh": "cosh",
}
BINARY = ("add", "sub", "mul", "div", "pow", "fmod", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
          "logical_and", "logical_or")
REDUCTIONS = ("sum", "mean", "prod", "amax", "amin", "var", "var_mean")


FLOAT_UNARY = ("exp", "exp2", "expm1", "log", "log1p", "log2", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh",
               "erf", "sigmoid", "silu", "gelu", "sinh", "cosh", "softmax", "log_softmax", "logsumexp")
KEEP_F8 = ("cast", "reshape", "view", "permute", "transpose", "broadcast_in_dim", "expand", "squeeze", "unsqueeze",
           "slice", "split", "segment_set", "full", "iota")


class _NoLse:
    """sdpa's lse: SDPA does not return it."""


NO_LSE = _NoLse()


def _sdpa_bwd_math(do, q, k, v, o, lse, causal, scale):
    """sdpa_bwd by its formulas (docs/format.md 5.8, ir/interp_sdpa.c) in
    f32: dv = P^T dO, dS = P (dO V^T - rowsum(dO o)), dq = scale dS K,
    dk = scale dS^T Q; dk, dv summed over each key head's query heads."""
    torch = _torch()
    B, Hq, Sq, D = q.shape
    Hk, Sk = k.shape[1], k.shape[2]
    g = Hq // Hk
    f = torch.float32
    kk = k.to(f).repeat_interleave(g, dim=1)
    vv = v.to(f).repeat_interleave(g, dim=1)
    qf, dof = q.to(f), do.to(f)
    s = scale * (qf @ kk.transpose(-1, -2))
    if causal:
        keep = torch.ones(Sq, Sk, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, -math.inf)
    p = torch.exp(s - lse.to(f)[..., None])
    delta = (dof * o.to(f)).sum(-1, keepdim=True)
    ds = p * (dof @ vv.transpose(-1, -2) - delta)
    dq = scale * (ds @ kk)
    dk = (scale * (ds.transpose(-1, -2) @ qf)).view(B, Hk, g, Sk, D).sum(2)
    dv = (p.transpose(-1, -2) @ dof).view(B, Hk, g, Sk, v.shape[3]).sum(2)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def _sdpa_bwd(do, q, k, v, o, lse, causal=False, scale=None):
    torch = _torch()
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    flash = (q.is_cuda and q.dtype in (torch.bfloat16, torch.float16) and q.shape[1] == k.shape[1]
             and (not causal or q.shape[2] == k.shape[2]))
    if not flash:
        return _sdpa_bwd_math(do, q, k, v, o, lse, causal, scale)
    # the call autograd makes after _scaled_dot_product_flash_attention:
    # cum_seq_q, cum_seq_k undefined (None: not variable-length), no
    # dropout (the philox state unused)
    none = torch.empty(0, dtype=torch.int64, device=q.device)
    dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_backward(
        do, q, k, v, o, lse, None, None, q.shape[2], k.shape[2], 0.0, causal, none, none, scale=scale)
    return dq, dk, dv


def _call(name, args, kw, device):
    """The op on tensors of dtypes PyTorch computes with: f8 operands are
    computed in f32 and the result rounded back (the format's rule for
    narrow floats), integer operands of float-only functions in f32."""
    torch = _torch()
    if any(a is NO_LSE for a in args):
        raise ValueError("fg2torch: sdpa's lse has no PyTorch form (SDPA does not return it)")
    if name == "sdpa_bwd":
        return _sdpa_bwd(*args, causal=bool(kw.get("causal", False)), scale=kw.get("scale"))
    if name == "sdpa":
        q, k, v = args
        # GQA/MQA (fewer key heads than query heads): SDPA's enable_gqa
        gqa = {"enable_gqa": True} if q.shape[-3] != k.shape[-3] else {}
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(kw.get("causal", False)),
                                                             scale=kw.get("scale"), **gqa)
        return o, NO_LSE
    f8 = (torch.float8_e4m3fn, torch.float8_e5m2)
    if name not in KEEP_F8 and any(_is_t(a) and a.dtype in f8 for a in args):
        back = None
        for a in args:
            if _is_t(a) and a.dtype != torch.bool:  # (where's condition does not promote)
                back = a.dtype if back is None else torch.promote_types(back, a.dtype) if a.dtype not in f8 else back
        wide = [a.float() if _is_t(a) and a.dtype in f8 else a for a in args]
        r = _call(name, wide, kw, device)
        rs = r if isinstance(r, tuple) else (r,)
        rs = tuple(t.to(back) if t.dtype.is_floating_point and back in f8 and "dtype" not in kw else t for t in rs)
        return rs if isinstance(r, tuple) else rs[0]
    if name in FLOAT_UNARY and not args[0].dtype.is_floating_point:
        args = [args[0].float()] + list(args[1:])
    return _call_typed(name, args, kw, device)


def _call_typed(name, args, kw, device):
    torch = _torch()
    F = torch.nn.functional
    if name in UNARY:
        x = args[0]
        if name in ("floor", "ceil", "round", "trunc") and not x.dtype.is_floating_point:
            return x
        return getattr(torch, UNARY[name])(x)
    if name == "silu":
        return F.silu(args[0])
    if name == "gelu":
        return F.gelu(args[0], approximate=kw.get("approximate", "none"))
    if name in BINARY:
        return _bin(name, args[0], args[1])
    if name == "where":
        c, a, b = args
        return torch.where(c, a, b)
    if name == "clamp":
        return torch.clamp(args[0], min=kw.get("min"), max=kw.get("max"))
    if name == "cast":
        x, to = args[0], dtype_of(kw["dtype"])
        if x.dtype.is_floating_point and not to.is_floating_point and to != torch.bool:
            # the format saturates out-of-range values (PyTorch leaves them undefined); NaN is
            # unspecified there, 0 here
            info = torch.iinfo(to)
            hi = min(info.max, 9223372036854774784)  # the largest double below 2^63
            x = torch.nan_to_num(x.double().trunc(), nan=0.0).clamp(info.min, hi)
        return x.to(to)
    if name in REDUCTIONS:
        dt = dtype_of(kw["dtype"]) if "dtype" in kw else None
        return _reduce(name, args[0], kw.get("dims"), kw.get("keepdim", False), dt, kw.get("correction", 1))
    x = args[0] if args else None
    if name in ("reshape", "view"):
        return x.reshape(kw["shape"])
    if name == "permute":
        return x.permute(kw["dims"])
    if name == "transpose":
        return x.transpose(kw["dim0"], kw["dim1"])
    if name == "broadcast_in_dim":
        shape, dims = kw["shape"], [d % len(kw["shape"]) for d in kw["dims"]]
        view = [1] * len(shape)
        for i, d in enumerate(dims):
            view[d] = x.shape[i]
        return x.reshape(view).expand(shape)
    if name == "expand":
        return x.expand(kw["shape"])
    if name == "squeeze":
        if "dims" not in kw:
            return x.squeeze()
        for d in sorted((d % x.dim() for d in kw["dims"]), reverse=True):
            x = x.squeeze(d)
        return x
    if name == "unsqueeze":
        return x.unsqueeze(kw["dim"])
    if name == "slice":
        steps = kw.get("steps") or [1] * x.dim()
        return x[tuple(slice(s, e, st) for s, e, st in zip(kw["starts"], kw["ends"], steps))]
    if name == "cat":
        rt = args[0].dtype
        for a in args[1:]:
            rt = torch.promote_types(rt, a.dtype)
        return torch.cat([a.to(rt) for a in args], dim=kw.get("dim", 0))
    if name == "split":
        return tuple(torch.split(x, kw["sizes"], dim=kw["dim"]))
    if name == "pad":
        p = kw["pad"]
        pairs = [p[2 * i:2 * i + 2] for i in range(len(p) // 2)]
        flat = [v for pr in reversed(pairs) for v in pr]
        return F.pad(x, flat, value=kw.get("value", 0))
    if name == "full":
        v = kw["value"]
        dt = dtype_of(kw["dtype"]) if "dtype" in kw else (torch.float32 if isinstance(v, float) else
                                                           torch.bool if isinstance(v, bool) else torch.int64)
        return torch.full(kw["shape"], v, dtype=dt, device=device)
    if name == "iota":
        return torch.arange(args[0], dtype=dtype_of(kw.get("dtype", "i64")), device=device)
    if name in ("segment_set", "contiguous"):
        return x.contiguous() if name == "contiguous" else x
    if name in ("fma", "lerp", "stack", "cumsum", "argmax", "argmin", "logsumexp", "softmax", "log_softmax",
                "mx_scale"):
        return _ops20(name, args, kw)
    if name in INDEXING:  # indices in range (PyTorch raises where fusec clamps: docs/format.md 5.11)
        return _indexing(name, args, kw["dim"])
    if name == "rand":
        return _rand(args[0], args[1], kw["shape"], kw.get("dtype", "f32"), device)
    if name == "dropout":
        return _dropout(args[0], args[1], args[2], float(kw["p"]))
    raise ValueError("fg2torch: no PyTorch form of '%s'" % name)


def _ops20(name, args, kw):
    """The ops of docs/format.md 5.13 and mx_scale (5.10) as PyTorch computes them."""
    torch = _torch()
    if name == "fma":  # a*b + c rounded once in f32 (f64 for f64): PyTorch has no fused form; f64 is close
        a, b, c = args
        ts = [v for v in (a, b, c) if _is_t(v)]
        rt = ts[0].dtype
        for v in ts[1:]:
            rt = torch.promote_types(rt, v.dtype)
        if not rt.is_floating_point:
            return a * b + c
        w = [v.double() if _is_t(v) else v for v in (a, b, c)]
        return (w[0] * w[1] + w[2]).to(rt)
    if name == "lerp":
        a, b, w = args
        like = next(v for v in (a, b, w) if _is_t(v))
        a, b = [v if _is_t(v) else torch.full_like(like, float(v)) for v in (a, b)]
        rt = torch.result_type(a, b)
        if _is_t(w):
            # torch.lerp does not promote: the result dtype as the language
            # promotes (a 0-d f32 weight of f16 tensors stays f16)
            probe = torch.empty((1,) if a.dim() or b.dim() else (), dtype=rt)
            rt = torch.result_type(probe, w)
        if rt in (torch.float16, torch.bfloat16):
            # narrow floats are computed in f32 and rounded once, each operand
            # as given: a 0-d f32 end or weight is not rounded to f16 first
            # (as torch.lerp over f16 tensors would; the interpreter does not)
            f = torch.float32
            return torch.lerp(a.to(f), b.to(f), w.to(f) if _is_t(w) else float(w)).to(rt)
        return torch.lerp(a.to(rt), b.to(rt), w.to(rt) if _is_t(w) else float(w))
    if name == "stack":
        rt = args[0].dtype
        for a in args[1:]:
            rt = torch.promote_types(rt, a.dtype)
        return torch.stack([a.to(rt) for a in args], dim=kw.get("dim", 0))
    x = args[0]
    if name == "cumsum":
        dt = dtype_of(kw["dtype"]) if "dtype" in kw else (x.dtype if x.dtype.is_floating_point else torch.int64)
        acc = torch.float32 if dt in (torch.float16, torch.bfloat16) else dt
        return torch.cumsum(x.to(acc), dim=kw["dim"]).to(dt)
    if name in ("argmax", "argmin"):
        f = torch.argmax if name == "argmax" else torch.argmin
        if "dim" not in kw:
            r = f(x.reshape(-1))
            return r.reshape([1] * x.dim()) if kw.get("keepdim", False) else r
        return f(x, dim=kw["dim"], keepdim=kw.get("keepdim", False))
    if name == "logsumexp":
        xs = x if x.dtype.is_floating_point else x.float()
        return torch.logsumexp(xs, dim=_dims(xs, kw.get("dims")), keepdim=kw.get("keepdim", False))
    if name in ("softmax", "log_softmax"):
        f = torch.softmax if name == "softmax" else torch.log_softmax
        if "dtype" not in kw and x.device.type == "cpu" and x.dtype in (torch.float16, torch.bfloat16):
            # (CPU torch sums f16 in f16: exp of a 65536-long row overflowed to -inf; CUDA,
            # as fusec, sums in f32. check-refs runs here on the CPU)
            return f(x.float(), dim=kw["dim"]).to(x.dtype)
        return f(x, dim=kw["dim"], dtype=dtype_of(kw["dtype"]) if "dtype" in kw else None)
    if name == "mx_scale":  # 2^(floor(log2 |amax|) - emax) as f8e8m0 (docs/format.md 5.10)
        emax = {"f8e4m3": 8, "f8e5m2": 15, "f4e2m1": 2}[kw.get("elem", "f8e4m3")]
        a = x.float().abs()
        e = ((a.view(torch.int32) >> 23) & 0xFF) - emax
        e = torch.where(torch.isfinite(a), e.clamp(min=0), torch.full_like(e, 255))
        return e.to(torch.uint8).view(torch.float8_e8m0fnu)
    raise ValueError(name)


INDEXING = ("index_select", "gather", "take_along_dim", "index_add", "scatter_add")


def _indexing(name, args, dim):
    """The indexing ops (docs/format.md 5.11); the scatters accumulate as
    a reduction does (f32 for narrower floats), rounded once."""
    torch = _torch()
    x, idx = args[0], args[1].long()
    if name == "index_select":
        return torch.index_select(x, dim, idx)
    if name == "gather":
        return torch.gather(x, dim, idx)
    if name == "take_along_dim":
        return torch.take_along_dim(x, idx, dim=dim)
    src = args[2]
    narrow = x.dtype in (torch.float16, torch.bfloat16)
    xa, sa = (x.float(), src.float()) if narrow else (x, src)
    r = xa.index_add(dim, idx, sa) if name == "index_add" else xa.scatter_add(dim, idx, sa)
    return r.to(x.dtype) if narrow else r


# ---- fusec's random stream (docs/format.md 5.12) in torch: the numbers of
# python/fusec/random_ref.py (numpy), on the tensors' device, bit for bit.

_M32 = 0xFFFFFFFF
_SIGNIFICAND_BITS = {"f64": 32, "f32": 24, "f16": 11, "bf16": 8, "f8e4m3": 4, "f8e5m2": 3}


def _word64(v):
    """A seed or offset (an integer, or a tensor of one integer element) as
    its 64-bit two's complement word."""
    return int(v.reshape(()).item() if _is_t(v) else v) & 0xFFFFFFFFFFFFFFFF


def _mulhilo(a, m):
    """(high, low) 32-bit words of a * m (a: int64 tensor of 32-bit values,
    m: a 32-bit constant), in int64 without overflow (16-bit halves of m)."""
    p_lo = a * (m & 0xFFFF)  # < 2^48
    p_hi = a * (m >> 16)  # < 2^48
    low = p_lo + ((p_hi & 0xFFFF) << 16)  # < 2^49
    return (p_hi >> 16) + (low >> 32), low & _M32


def _philox_words(n, seed, offset, device):
    """The 32-bit word (int64 tensor) of each element index 0..n-1: block
    i // 4 of Philox-4x32-10 keyed by the seed, counter (lo32(i // 4),
    hi32(i // 4), lo32(offset), hi32(offset)), word i % 4."""
    torch = _torch()
    seed, offset = _word64(seed), _word64(offset)
    blk = torch.arange((n + 3) // 4, dtype=torch.int64, device=device)
    c = [blk & _M32, blk >> 32, torch.full_like(blk, offset & _M32), torch.full_like(blk, offset >> 32)]
    k0, k1 = seed & _M32, seed >> 32
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & _M32, (k1 + 0xBB67AE85) & _M32
        hi0, lo0 = _mulhilo(c[0], 0xD2511F53)
        hi1, lo1 = _mulhilo(c[2], 0xCD9E8D57)
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
    return torch.stack(c, dim=1).reshape(-1)[:n]


def _rand(seed, offset, shape, dt, device):
    torch = _torch()
    n = 1
    for d in shape:
        n *= d
    b = _SIGNIFICAND_BITS[dt]
    w = _philox_words(n, seed, offset, device) >> (32 - b)
    u = w.double() * 2.0 ** -b if dt == "f64" else w.float() * 2.0 ** -b  # exact in the dtype
    return u.reshape(shape).to(dtype_of(dt))


def _dropout(x, seed, offset, p):
    """where(rand_f32 >= f32(p), x * S, 0), S = 1/(1-p) a weak literal: the
    product in f32 for f32 and narrower (rounded to x's dtype), f64 for f64."""
    torch = _torch()
    u = (_philox_words(x.numel(), seed, offset, x.device) >> 8).float() * 2.0 ** -24
    keep = (u >= torch.tensor(p, dtype=torch.float32)).reshape(x.shape)
    scale = 0.0 if p >= 1.0 else 1.0 / (1.0 - p)
    wide = x if x.dtype == torch.float64 else x.float()
    return torch.where(keep, wide * scale, torch.zeros((), dtype=wide.dtype, device=x.device)).to(x.dtype)


CONSTS = {"inf": math.inf, "nan": math.nan, "true": True, "false": False}


def with_layouts(fn, inputs):
    """inputs, each parameter with a layout given as a tensor of the same
    values laid out in that order (dims listed outermost first)."""
    out = list(inputs)
    for i, lay in fn.layouts.items():
        inv = sorted(range(len(lay)), key=lambda d: lay[d])
        out[i] = inputs[i].permute(*lay).contiguous().permute(*inv)
    return out


def load(text, graph=None):
    """(fn, sig) for the graph named `graph` (or the first) of text; sig is
    [(name, dtype, shape)] (shape None for scalar parameters)."""
    graphs = parse(text)
    g = next((x for x in graphs if graph is None or x[0] == graph), None)
    if g is None:
        raise ValueError("fg2torch: no graph %r" % graph)
    _, params, stmts, results = g
    pindex = {p[0]: i for i, p in enumerate(params)}
    inplace = []  # (result index, parameter index)
    for j, (_, target) in enumerate(results):
        if target is not None:
            if target not in pindex or params[pindex[target]][2] is None:
                raise ValueError("fg2torch: result %d is written into '%s', not a tensor parameter" % (j, target))
            inplace.append((j, pindex[target]))

    # parameters read only as the data operand of gathers: what the gathers
    # read of them, not the whole tensor (fn.gathered, after a call:
    # {parameter index: bytes}, for the benchmark's byte count)
    uses = {}

    def walk(e, parent=None, pos=None):
        if e[0] == "name" and e[1] in pindex:
            uses.setdefault(e[1], []).append((parent, pos))
        elif e[0] == "list":
            for x in e[1]:
                walk(x)
        elif e[0] == "call":
            for j, x in enumerate(e[2]):
                walk(x, e[1], j)
            for x in e[3].values():
                walk(x)

    for _, e in stmts:
        walk(e)
    for e, _ in results:
        walk(e)
    only_gathered = {n for n, us in uses.items()
                     if all(par in ("index_select", "gather", "take_along_dim") and pos == 0 for par, pos in us)}
    gathered = {}

    def ev(e, env, device):
        kind = e[0]
        if kind == "lit":
            return e[1]
        if kind == "list":
            return [ev(x, env, device) for x in e[1]]
        if kind == "name":
            if e[1] in env:
                return env[e[1]]
            if e[1] in CONSTS:
                return CONSTS[e[1]]
            if re.match(r"^(bool|[iu]\d+|[bf]f?\d+|f8e\dm\d)$", e[1]):
                return e[1]  # a dtype attribute
            if e[1] in ("-inf",):
                return -math.inf
            return e[1]  # a string attribute written bare
        _, name, args, kw = e
        a = [ev(x, env, device) for x in args]
        k = {key: ev(v, env, device) for key, v in kw.items()}
        r = _call(name, a, k, device)
        if (name in INDEXING and args and args[0][0] == "name" and args[0][1] in only_gathered
                and not _compiling()):
            i = pindex[args[0][1]]
            full = a[0].numel() * a[0].element_size()
            gathered[i] = min(full, gathered.get(i, 0) + r.numel() * r.element_size())
        return r

    def fn(*inputs):
        if not _compiling():
            gathered.clear()
        if len(inputs) != len(params):
            raise ValueError("fg2torch: %d inputs for %d parameters" % (len(inputs), len(params)))
        device = next((x.device for x in inputs if _is_t(x)), "cpu")
        env = {p[0]: v for p, v in zip(params, inputs)}
        for names, e in stmts:
            v = ev(e, env, device)
            if len(names) == 1:
                env[names[0]] = v
            else:
                for n, x in zip(names, v):
                    env[n] = x
        outs = [ev(r, env, device) for r, _ in results]
        if any(x is NO_LSE for x in outs):
            raise ValueError("fg2torch: sdpa's lse has no PyTorch form (SDPA does not return it)")
        if inplace:  # every value computed: now the writes
            written = {inputs[i].untyped_storage().data_ptr() for _, i in inplace}
            vals = [(j, i, outs[j].clone() if outs[j].untyped_storage().data_ptr() in written else outs[j])
                    for j, i in inplace]
            for j, i, v in vals:
                inputs[i].copy_(v)
                outs[j] = inputs[i]
        return tuple(outs)

    fn.inplace = tuple(inplace)
    fn.gathered = gathered
    # {parameter index: layout} for parameters with a layout (docs/format.md
    # 3.3): the caller passes them strided, see with_layouts
    fn.layouts = {i: p[3] for i, p in enumerate(params) if p[3] is not None}

    sig = [(p[0], p[1], p[2]) for p in params]
    return fn, sig
