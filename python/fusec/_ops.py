"""fusec graphs as PyTorch custom operators (torch.library), so that a call
sits inside torch.compile graphs and CUDA-graph captures (issue 21, item 3).

    op = fusec.register("model.ptx", "layer_norm")   # torch.ops.fusec.layer_norm.default
    y, mean, rstd = op(x, w, b)

The operator's kernel is a graph instance's call (the fast path); its fake
(meta) implementation computes the results' shapes without running
anything, from the plan, or for a graph with syms from
fgl_graph_result_shape, and reports the loader's own messages for a wrong
dtype or shape (naming the parameter) and the binding's for a wrong device.

Sizes under torch.compile's dynamic shapes: every size, stride and view
offset of a graph with syms is the plan's formula (read from the
artifact), evaluated on the inputs' sizes, symbolic ones included, so a
compiled graph is not specialized on them.

View results: a custom operator may not return aliases of its inputs or of
its other results, so the operator returns the written results only; for a
graph with view results, register returns a Python function that calls the
operator and builds the views with Tensor.as_strided (which torch.compile
traces), with the operator as its `op` attribute.

Results written in place (`return v -> p`, plan version 3): the operator
declares the parameters it writes as mutated (`Tensor(a0!) p` in its
schema, what torch.library.custom_op's mutates_args makes), so that
torch.compile's functionalization and autograd's version checks see the
writes, and returns the written results only (an operator of in-place
results alone returns nothing); register returns a function that calls it
and returns each such parameter's tensor, updated, in its result's place.
"""
import ctypes
import re

from . import _capi

# namespace -> torch.library.Library (kept alive: dropping it unregisters)
_LIBS = {}
# qualified name -> (module, graph instance)
_REGISTERED = {}

_SCALAR_TYPES = {"bool": "bool"}


def _scalar_type(dtype):
    if dtype in _SCALAR_TYPES:
        return _SCALAR_TYPES[dtype]
    return "float" if _capi.DTYPES[_capi.DTYPE_INDEX[dtype]][2] else "int"


def _hint(v):
    """An int for a size: itself, or a symbolic size's hint without a guard
    where torch offers one."""
    if isinstance(v, int):
        return v
    try:
        from torch.fx.experimental import symbolic_shapes as ss
    except ImportError:
        return int(v)
    for name in ("optimization_hint", "hint_int"):
        f = getattr(ss, name, None)
        if f is not None:
            try:
                return int(f(v))
            except Exception:
                pass
    return int(v)


_TOKEN = re.compile(r"\s*(?:([0-9]+)|([A-Za-z_][A-Za-z_0-9]*)|([-+*/%()]))")


def _formula(text, syms):
    """A plan formula (docs/artifact.md: + - * / % over ints and syms, / the
    floor division) as a function of the syms' values in `syms`' order, so
    that it evaluates on torch's symbolic sizes as well as on ints."""
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError("fusec: cannot read the plan formula %r" % text)
        num, name, op = m.groups()
        if name is not None and name not in syms:
            raise ValueError("fusec: the plan formula %r names %r, not a sym of the graph" % (text, name))
        out.append(num or name or ("//" if op == "/" else op))
        pos = m.end()
    return eval("lambda %s: (%s)" % (", ".join(syms), " ".join(out)), {"__builtins__": {}})


def _plan_results(path, graph, syms):
    """{result index: (sizes, strides, offset)} of a graph with syms, each a
    formula function (see _formula), read from the artifact's plan."""
    with open(path, "r", errors="replace") as f:
        text = f.read()
    out, on = {}, False
    for line in text.splitlines():
        if line.startswith("// graph "):
            on = line.split()[2] == graph
        elif on and line.startswith("// end"):
            break
        elif on and line.startswith("// result "):
            m = re.match(r"// result (\d+) \S+ \[(.*?)\] strides \[(.*?)\] (?:written|inplace p\d+|view \S+ "
                         r"offset (\S+))", line)
            if not m:
                raise ValueError("fusec: cannot read the plan line %r of %s" % (line, path))

            def fs(lst):
                return [_formula(t, syms) for t in lst.split(",") if t]

            out[int(m.group(1))] = (fs(m.group(2)), fs(m.group(3)), _formula(m.group(4) or "0", syms))
    return out


class _Layouts:
    """The results' sizes, strides and view offsets of graph g for a call's
    arguments: ints for a graph without syms; for one with syms, the plan's
    formulas evaluated on the sizes that bind them (ints, or torch's
    symbolic sizes under torch.compile)."""

    def __init__(self, g):
        self.g = g
        self.syms = [s.name for s in g.syms]
        self.formulas = _plan_results(g.module.path, g.name, self.syms) if self.syms else None
        # (param index, dim) binding each sym: its first occurrence
        where = {}
        for p in g.params:
            for k, s in enumerate(p.shape if not p.is_scalar else ()):
                if isinstance(s, str):
                    where.setdefault(s, (p.index, k))
        self.where = [where[s] for s in self.syms]

    def result(self, j, args):
        r = self.g.results[j]
        if self.formulas is None:
            return r.shape, r.strides, r.offset or 0
        vals = [args[i].shape[k] for i, k in self.where]
        sizes, strides, offset = self.formulas[j]
        return tuple(f(*vals) for f in sizes), tuple(f(*vals) for f in strides), offset(*vals)


class _Sized:
    """sizes and strides with a tensor's shape / stride() (for _element_layout)."""

    def __init__(self, sizes, strides):
        self.shape, self._strides = tuple(sizes), tuple(strides)

    def stride(self):
        return self._strides


def _check_args(g, args):
    """The loader's checks of a call's inputs without running it
    (fgl_graph_result_shape: dtypes, ranks, sizes, syms and their facts;
    the binding's for the device and types), on real or fake tensors."""
    from . import FusecError, _torch

    torch = _torch()
    n = len(args)
    if n != len(g.params):
        raise FusecError(_capi.FGL_ERR_MISMATCH, "graph '%s' takes %d inputs, got %d" % (g.name, len(g.params), n))
    ins = (_capi.fgl_arg * max(1, n))()
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            t = ins[i].tensor
            t.dtype = g._checked_dtype(g._who(i), a)
            if a.dim() > _capi.MAX_RANK:
                raise FusecError(_capi.FGL_ERR_MISMATCH, "%s: rank %d is above the loader's maximum %d"
                                 % (g._who(i), a.dim(), _capi.MAX_RANK))
            t.rank = a.dim()
            sizes = [_hint(a.shape[k]) for k in range(a.dim())]
            strides = [_hint(a.stride(k)) for k in range(a.dim())]
            if t.dtype == _capi.DTYPE_INDEX["f4e2m1"]:  # fusec's element sizes
                sizes, strides = g._element_layout(g._who(i), t.dtype, _Sized(sizes, strides))
            for k in range(a.dim()):
                t.sizes[k], t.strides[k] = sizes[k], strides[k]
        elif isinstance(a, (int, float, bool)):
            g._set_scalar(ins[i], i, a)
        elif isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            g._set_scalar(ins[i], i, 0)  # a scalar's value changes no shape
        else:
            raise FusecError(_capi.FGL_ERR_MISMATCH, "%s: expected a torch.Tensor or a number, got %s"
                             % (g._who(i), type(a).__name__))
    err = _capi.fgl_error()
    for r in g.results:
        ri = _capi.fgl_result_info()
        st = g._dll.fgl_graph_result_shape(g._h, ins, n, r.index, ctypes.byref(ri), ctypes.byref(err))
        if st != _capi.FGL_OK:
            raise FusecError(st, err.msg.decode("utf-8", "replace"))


def _view(base, shape, strides, offset):
    """base.as_strided(shape, strides) `offset` elements past base's address,
    in calls torch.compile traces (it does not trace storage_offset()): the
    storage seen flat from base's address, sliced, then strided."""
    span = offset + 1
    for s, st in zip(shape, strides):
        span = span + (s - 1) * st
    # an empty view: offset alone. The builtin max, which Dynamo traces on
    # ints and SymInts alike (torch.sym_max on plain ints is a graph break
    # under fullgraph=True: seen on the H100, 2026-11-26).
    flat = base.as_strided((max(span, offset),), (1,))
    return flat[offset:].as_strided(shape, strides)


def _device_of(g, args):
    from . import _torch

    torch = _torch()
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.device
    return g.module.device


def register(module, graph, name=None, *, namespace="fusec", lib=None):
    """Registers graph `graph` of `module` (a fusec.Module, or an artifact's
    path, loaded with fusec.load(path, lib)) as the PyTorch operator
    torch.ops.<namespace>.<name> (name: the graph's name) and returns it (an
    OpOverload), or for a graph with view results or results written in
    place a function building them around it (see the module doc). Scalar parameters take Python numbers
    (float for float dtypes, int for integers, bool). Raises ValueError when
    the name is taken."""
    from . import Module, _torch, load, torch_dtype, torch_layout

    torch = _torch()
    if not isinstance(module, Module):
        module = load(module, lib)
    g = module.graph(graph)
    opname = name or re.sub(r"\W", "_", graph)
    qual = "%s::%s" % (namespace, opname)
    if qual in _REGISTERED:
        raise ValueError("fusec.register: the operator %s is registered already (graph '%s' of %s): pass name="
                         % (qual, _REGISTERED[qual][1].name, _REGISTERED[qual][0].path))
    written = [r for r in g.results if not r.is_view and r.inplace is None]
    views = [r for r in g.results if r.is_view]
    inplace = [r for r in g.results if r.inplace is not None]
    mutated = {r.inplace for r in inplace}
    used = set()
    args = []
    for p in g.params:
        pn = re.sub(r"\W", "_", p.name)
        if not re.match(r"[A-Za-z_]", pn) or pn in used or pn in ("self", "out"):
            pn = "p%d_%s" % (p.index, pn)
        used.add(pn)
        if p.index in mutated:  # written in place: an alias set of its own, mutable
            args.append("Tensor(a%d!) %s" % (p.index, pn))
        else:
            args.append("%s %s" % (_scalar_type(p.dtype) if p.is_scalar else "Tensor", pn))
    rets = "Tensor" if len(written) == 1 else "(%s)" % ", ".join("Tensor" for _ in written)
    library = _LIBS.get(namespace)
    if library is None:
        library = _LIBS[namespace] = torch.library.Library(namespace, "FRAGMENT")
    library.define("%s(%s) -> %s" % (opname, ", ".join(args), rets))

    def kernel(*a):
        res = g(*a)
        res = res if isinstance(res, tuple) else (res,)
        w = tuple(res[r.index] for r in written)
        return w[0] if len(w) == 1 else (w or None)

    layouts = _Layouts(g)

    def fake(*a):
        _check_args(g, a)
        dev = _device_of(g, a)
        out = []
        for r in written:
            shape, strides, _ = layouts.result(r.index, a)
            shape, strides = torch_layout(r.dtype, shape, strides)  # f4e2m1: packed
            out.append(torch.empty_strided(shape, strides, dtype=torch_dtype(r.dtype), device=dev))
        return out[0] if len(out) == 1 else (tuple(out) or None)

    dev_type = module.device.type if module.device is not None else "cuda"
    library.impl(opname, kernel, dev_type.upper())
    torch.library.register_fake(qual, fake, lib=library)
    op = getattr(getattr(torch.ops, namespace), opname).default
    _REGISTERED[qual] = (module, g)
    if not views and not inplace:
        return op

    def call(*a):
        if torch.compiler.is_compiling() and any(r.base[0] == "param" for r in views):
            # A view of a parameter needs its storage offset, which the
            # trace does not see (_view); refused, never wrong.
            raise NotImplementedError(
                "fusec.register: graph '%s' has results that are views of its parameters, which "
                "torch.compile does not trace correctly yet; call it outside torch.compile, or "
                "return copies from the graph" % g.name)
        w = op(*a)
        w = () if not written else w if isinstance(w, tuple) else (w,)
        res = [None] * len(g.results)
        for r, t in zip(written, w):
            res[r.index] = t
        for r in inplace:  # the parameter's tensor, which the op updated
            res[r.index] = a[r.inplace]
        for r in views:
            shape, strides, off = layouts.result(r.index, a)
            if r.base[0] == "param":
                res[r.index] = _view(a[r.base[1]], shape, strides, off)
            else:
                # a result the op just allocated: its storage starts at it.
                # (_view's slice-then-as_strided read the wrong elements
                # under Inductor on the H100, 2026-11-26.)
                res[r.index] = res[r.base[1]].as_strided(shape, strides, off)
        return res[0] if len(res) == 1 else tuple(res)

    call.op = op
    call.__name__ = opname
    call.__qualname__ = qual
    return call
