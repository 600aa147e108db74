"""From a PyTorch model to `.fg`: the exporter.

    import fusec.export
    ex = fusec.export.export(model, (x,), dynamic_shapes=({0: Dim("T")},))
    ex.write("out/")            # out/model.fg (one graph per region) + out/model.json
    print(ex.report())          # regions, ops left to PyTorch, ops fusec lacks

    python -m fusec.export SCRIPT.py:ENTRY [-o DIR] [--name NAME] [--check-compile]
      ENTRY() returns (module_or_fn, example_inputs) or (.., .., dynamic_shapes).

The ATen graph comes from torch.export, decomposed to core ATen (PyTorch's
tables; norms and softmax decomposed further so they reach fusec as
reductions and pointwise ops; sdpa kept whole for fusec's `sdpa`).
torch.fx's CapabilityBasedPartitioner cuts it into regions of the nodes the
mapping table (fusec.aten_map) can write; each region becomes one graph of
the `.fg` file, everything else (matmuls, convolutions, random
numbers, collectives, ops without a mapping) stays in PyTorch. The manifest
(JSON) lists the graph's inputs, then every node in order: a region (its
`.fg` graph, its inputs and outputs by name) or a PyTorch op, then the
outputs. An op without a mapping is reported with its count and the model's
source line, never dropped.

Symbolic sizes: a dim torch.export keeps dynamic becomes a size of the
graph's size clause with the facts torch knows (`<T: 2..1024>`), named after
the Dim. fusec's code generator takes one symbolic size, the leading dim of
every parameter; a region that doesn't fit that is written with the
example's static sizes and the manifest says so (`"static_because"`).
"""
import argparse
import collections
import json
import math
import operator
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile

from . import aten_map, sizes
from .aten_map import FG_DTYPE, TABLE, VIEW_OPS, Multi, left_to_torch

FG_WORDS = set(FG_DTYPE.values()) | {"graph", "return", "true", "false", "inf", "nan", "layout"}
NON_COMPUTE = VIEW_OPS | {"aten.full.default", "aten.scalar_tensor.default", "aten.full_like.default",
                          "aten.arange.default", "aten.arange.start", "aten.arange.start_step"}


class Refuse(Exception):
    """A node the mapping can't write: the partitioner leaves it to PyTorch."""

    def __init__(self, node, why):
        super().__init__(why)
        self.node, self.why = node, why


def op_name(node):
    t = node.target
    if t is operator.getitem:
        return "<built-in function getitem>"
    return str(t) if node.op == "call_function" else "%s:%s" % (node.op, t)


def source_line(node):
    """'file:line' of the model's code that made the node (the last frame of
    its stack trace outside torch itself), or '' when unknown."""
    st = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+)', st)
    if not frames:
        return ""
    torch_dir = os.sep + "torch" + os.sep
    here = os.path.dirname(os.path.abspath(__file__))
    user = [f for f in frames if torch_dir not in f[0] and not f[0].startswith(here)]
    f, ln = (user or frames)[-1]
    return "%s:%s" % (f, ln)


def _val_dtype(v):
    return aten_map.fg_dtype(v.dtype) if hasattr(v, "dtype") else None


def _tensors(v):
    if isinstance(v, (tuple, list)):
        return [t for x in v for t in _tensors(x)]
    return [v] if hasattr(v, "dtype") and hasattr(v, "shape") else []


# the sizes of traced values as ints without guards (fusec.sizes)
bound, Unbound, _hint, _ints = sizes.bound, sizes.Unbound, sizes.hint, sizes.ints


def _is_sym_name(s):
    return not isinstance(s, int) and getattr(s.node.expr, "is_Symbol", False)


# ---- what the partitioner may take --------------------------------------------


ATTENTION_CHOICES = ("all", "flash", "none")


def attention_choice():
    """Which of PyTorch's fused attention kernels (aten_map.FLASH) become
    fusec's sdpa / sdpa_bwd: FUSEC_BACKEND_ATTENTION=flash (the default):
    FlashAttention's, cuDNN's stay in PyTorch (a model's step took less CUDA
    time that way on both models, docs/benchmarks.md run V4); all: every one
    the table maps; none: every attention kernel stays in PyTorch
    (docs/pytorch.md)."""
    v = os.environ.get("FUSEC_BACKEND_ATTENTION", "flash")
    if v not in ATTENTION_CHOICES:
        raise ValueError("FUSEC_BACKEND_ATTENTION=%s: expected one of %s" % (v, ", ".join(ATTENTION_CHOICES)))
    return v


def _attention_taken(choice, name):
    return choice == "all" or (choice == "flash" and "cudnn" not in name)


class Support:
    """torch.fx OperatorSupport for fusec: a node is supported when the table
    has its overload, its tensors have fusec dtypes and its row's check
    passes. Records why every other node was left out."""

    def __init__(self, compiled_only=True, specialize=False):
        self.compiled_only, self.specialize = compiled_only, specialize
        self.attention = attention_choice()
        self.refused = {}  # node name -> reason (from emission)
        self.left = {}  # node name -> (op, reason, source line, by design)

    def is_node_supported(self, submodules, node):
        ok, why, design = self._judge(node)
        if not ok and node.op in ("call_function", "call_method", "call_module"):
            self.left[node.name] = (op_name(node), why, source_line(node), design)
        elif ok:
            self.left.pop(node.name, None)
        return ok

    def _judge(self, node):
        if node.op != "call_function":
            return False, "not an op", True
        name = op_name(node)
        if node.name in self.refused:
            return False, self.refused[node.name], False
        if name != "<built-in function getitem>" and not _tensors(node.meta.get("val")):
            return False, "no tensor result (size arithmetic, an assertion)", True
        entry = TABLE.get(name)
        if entry is None:
            design = left_to_torch(name)
            return False, ("left to PyTorch" if design else "no mapping to .fg"), design
        if name in aten_map.FLASH and not _attention_taken(self.attention, name):
            return False, "left to PyTorch (FUSEC_BACKEND_ATTENTION=%s)" % self.attention, True
        if self.compiled_only and name in aten_map.NOT_COMPILED:
            return False, aten_map.NOT_COMPILED[name], False
        vals = _tensors(node.meta.get("val"))
        ins = node.all_input_nodes
        if name in aten_map.FLASH:  # the results and operands sdpa / sdpa_bwd have (not the rng state)
            fwd = aten_map.FLASH[name].fwd
            vals = vals[:2] if fwd else vals
            ins = [a for a in node.args[:3 if fwd else 6] if hasattr(a, "meta")]
        elif name == "<built-in function getitem>":  # its item, not the whole tuple it picks from
            ins = []
        for a in ins:
            vals += _tensors(a.meta.get("val"))
        for v in vals:
            if _val_dtype(v) is None:
                return False, "dtype %s (fusec has no such dtype)" % str(v.dtype).replace("torch.", ""), False
            if len(v.shape) > 8:
                return False, "rank %d (fusec takes up to 8)" % len(v.shape), False
            if "strided" not in str(getattr(v, "layout", "torch.strided")):
                return False, "layout %s (fusec takes dense tensors)" % v.layout, False
        try:
            why = entry.check(_Probe(self.compiled_only, self.specialize), node)
        except Exception as ex:  # a row that can't judge the node leaves it to torch
            why = "cannot be judged (%s)" % ex
        return (why is None), why, False


class _Probe:
    """The part of Emitter the rows' checks use; `compiled_only`: the row
    must also fit fusec's code generator (the attention rows check its
    dtypes and head dims); `specialize`: the region is written at each
    call's sizes (fusec.specialize), so a row that needs static shapes may
    take symbolic ones, judged at the example's sizes here and at each
    call's when the region is written (sizes.shape reads them)."""

    compiled_only = False
    specialize = False

    def __init__(self, compiled_only=False, specialize=False):
        self.compiled_only, self.specialize = compiled_only, specialize

    def static(self, *shapes):
        """Whether a row that needs static shapes may take these."""
        return self.specialize or sizes.static(*shapes)

    def dtype(self, node):
        return _val_dtype(node.meta["val"])

    def operand_dtype(self, a):
        return _val_dtype(a.meta["val"]) if hasattr(a, "meta") and "val" in a.meta else None

    def has_multi(self, node):
        e = TABLE.get(op_name(node)) if hasattr(node, "op") else None
        return e is not None and node.op == "call_function" and isinstance(node.meta.get("val"), (tuple, list))


def _operator_support(compiled_only, specialize=False):
    from torch.fx.passes.operator_support import OperatorSupportBase

    class _S(OperatorSupportBase, Support):
        def __init__(self):
            Support.__init__(self, compiled_only, specialize)

        def is_node_supported(self, submodules, node):
            return Support.is_node_supported(self, submodules, node)

    return _S()


# ---- writing one region as a .fg graph ----------------------------------------------


class Emitter(_Probe):
    """Writes the nodes of one region as a .fg graph. `syms` maps a sympy
    symbol's name to its .fg size name and facts; symbolic=False writes
    every size as the example's."""

    def __init__(self, gname, params, nodes, outputs, syms, symbolic, canonical=False, layouts=None,
                 out_perms=None, covers=None):
        self.gname, self.params, self.nodes, self.outputs = gname, params, nodes, outputs
        self.syms, self.symbolic, self.canonical = syms, symbolic, canonical
        self.layouts = layouts or {}  # parameter node -> its dim order (layout=[...]), where not row-major
        self.covers = covers or {}  # parameter node -> its Cover (a window of a dense tensor)
        # per result: None, or the traced dim order P; the graph then returns
        # permute(value, dims=P), which fusec writes row-major, so that the
        # caller's permute back gives the traced strides without a copy
        self.out_perms = out_perms or [None] * len(outputs)
        self.names = {}
        self.multi = {}  # node -> list of result names
        self.used = set()
        self.lines = []
        self.node = None

    def name_of(self, node):
        if node not in self.names:
            # canonical: v0, v1, ... in order of definition, so that the same
            # region traced on another device or in another graph (whose FX
            # names differ) has the same text
            fx_name = node.name if hasattr(node, "name") else (
                "result_%d" % node[1] if node[0] == "result" else node[1].name + "_cover")
            n = "v%d" % len(self.names) if self.canonical else re.sub(r"[^A-Za-z0-9_.]", "_", fx_name)
            if n in FG_WORDS or not re.match(r"[A-Za-z_]", n):
                n = "v_" + n
            base, k = n, 1
            while n in self.used:
                n, k = "%s_%d" % (base, k), k + 1
            self.used.add(n)
            self.names[node] = n
        return self.names[node]

    # -- what the rows call --
    def v(self, a):
        if hasattr(a, "op"):
            if a not in self.names:
                if self.sym_scalar(a):  # a size the graph computes (a mean's count), written as its value
                    return self.lit(_hint(a))
                raise Refuse(self.node, "an operand (%s) that is not a tensor of the region" % a.name)
            return self.names[a]
        return self.lit(a)

    def sym_scalar(self, a):
        """Whether operand `a` is a symbolic integer the region takes as an
        input (not a tensor), which a static region writes as its value."""
        val = a.meta.get("val") if hasattr(a, "meta") else None
        return not self.symbolic and a not in self.names and type(val).__name__ == "SymInt"

    def lit(self, x):
        if isinstance(x, bool):
            return "true" if x else "false"
        if isinstance(x, int):
            return str(x)
        if isinstance(x, float):
            if x != x:
                return "nan"
            if x in (float("inf"), float("-inf")):
                return "inf" if x > 0 else "-inf"
            s = repr(x)
            return s if ("." in s or "e" in s) else s + ".0"
        if isinstance(x, (list, tuple)):
            return "[%s]" % ", ".join(self.lit(y) for y in x)
        if isinstance(x, str):
            return '"%s"' % x
        if hasattr(x, "node") and hasattr(x.node, "expr"):  # a SymInt/SymFloat attribute
            if self.symbolic:
                raise Refuse(self.node, "a symbolic value (%s) in an attribute" % x)
            return self.lit(_hint(x))
        raise Refuse(self.node, "an argument of type %s" % type(x).__name__)

    def is_int_operand(self, a):
        if hasattr(a, "op"):
            return self.operand_dtype(a) not in aten_map.FLOAT_FG
        return isinstance(a, (int, bool))

    def cast_to(self, a, dt):
        if hasattr(a, "op") and self.sym_scalar(a):
            return self.lit(float(_hint(a)))
        if hasattr(a, "op"):
            return "cast(%s, dtype=%s)" % (self.v(a), dt)
        return self.lit(float(a))

    def shape_attr(self, shape):
        out, n_sym = [], 0
        for s in shape:
            if isinstance(s, int):
                out.append(s)
            elif not self.symbolic:
                out.append(_hint(s))
            else:
                n_sym += 1
                out.append(-1)
        if n_sym > 1 or (n_sym and -1 in [s for s in shape if isinstance(s, int)]):
            raise Refuse(self.node, "a reshape with more than one symbolic size")
        return self.lit(out)

    def expand_attr(self, x, shape):
        xs = list(x.meta["val"].shape)
        off = len(shape) - len(xs)
        out = []
        for i, s in enumerate(shape):
            if isinstance(s, int):
                out.append(s)
            elif i >= off and (xs[i - off] is s or str(xs[i - off]) == str(s)):
                out.append(-1)
            elif not self.symbolic:
                out.append(_hint(s))
            else:
                raise Refuse(self.node, "an expand to a symbolic size")
        return self.lit(out)

    def end_of(self, s):
        return s if isinstance(s, int) else (2**62 if self.symbolic else _hint(s))

    def item(self, node, k):
        names = self.multi.get(node)
        if names is None:
            raise Refuse(self.node, "an item of a value that is not a tuple of the region")
        return names[k]

    def has_multi(self, node):
        return node in self.multi or _Probe.has_multi(self, node)

    # -- the graph --
    def dim(self, s):
        if isinstance(s, int):
            return str(s)
        if self.symbolic:
            return self.syms[str(s.node.expr)][0]
        return str(_hint(s))

    def ptype(self, v, layout=None):
        dt = _val_dtype(v)
        lay = " layout=%s" % self.lit(list(layout)) if layout else ""
        return "%s[%s]%s" % (dt, ", ".join(self.dim(s) for s in v.shape), lay)

    def emit(self):
        cover_names = {}
        for p in self.params:
            self.name_of(p)
            c = self.covers.get(p)
            if c is not None:
                cover_names[p] = self.name_of(("cover", p))
                view = "slice(%s, starts=%s, ends=%s)" % (cover_names[p], self.lit(c.starts), self.lit(c.ends))
                if c.perm != sorted(c.perm):
                    view = "permute(%s, dims=%s)" % (view, self.lit(c.perm))
                self.lines.append("  %s = %s" % (self.names[p], view))
        for node in self.nodes:
            self.node = node
            entry = TABLE[op_name(node)]
            out = entry.emit(self, node)
            if isinstance(out, Multi):
                base = self.name_of(node)
                names = ["%s_r%d" % (base, k) for k in range(out.n)]
                for n in names:
                    self.used.add(n)
                self.lines.append("  %s = %s" % (", ".join(names), out.expr))
                for k, form in sorted((out.post or {}).items()):  # result k as the node gives it
                    self.used.add(names[k] + "x")
                    self.lines.append("  %sx = %s" % (names[k], form % names[k]))
                    names[k] += "x"
                if out.bind is None:
                    self.multi[node] = names
                else:
                    self.used.discard(base)
                    self.names[node] = names[out.bind]
            else:
                self.lines.append("  %s = %s" % (self.name_of(node), out))
        self.node = None
        sizes = ""
        used_syms = []
        if self.symbolic:
            for p in self.params:
                for s in p.meta["val"].shape:
                    if not isinstance(s, int) and self.syms[str(s.node.expr)] not in used_syms:
                        used_syms.append(self.syms[str(s.node.expr)])
            if used_syms:
                sizes = "<%s>" % ", ".join("%s: %d..%d" % (n, lo, hi) for n, lo, hi in used_syms)
        head = "graph %s%s(%s) {" % (self.gname, sizes, ", ".join(
            "%s: %s[%s]" % (cover_names[p], _val_dtype(p.meta["val"]), ", ".join(map(str, self.covers[p].shape)))
            if p in cover_names else
            "%s: %s" % (self.names[p], self.ptype(p.meta["val"], self.layouts.get(p))) for p in self.params))
        rets = []
        for o, perm in zip(self.outputs, self.out_perms):
            if perm is None:
                rets.append(self.names[o])
                continue
            n = self.name_of(("result", len(rets)))  # a fresh name (v<N> when canonical)
            self.lines.append("  %s = permute(%s, dims=%s)" % (n, self.names[o], self.lit(list(perm))))
            rets.append(n)
        ret = "  return %s" % ", ".join(rets)
        return "\n".join([head] + self.lines + [ret, "}"]) + "\n"


def _codegen_misfit(node):
    """Why a value's sizes don't fit fusec's code generator (a symbolic size
    only as the leading dim, a size name rather than an expression), or None."""
    for t in _tensors(node.meta.get("val")):
        for i, s in enumerate(t.shape):
            if isinstance(s, int):
                continue
            if not _is_sym_name(s):
                return "%s has the size expression %s" % (node.name, s)
            if i != 0:
                return "%s has the symbolic size %s as dim %d (fusec's code generator takes it as the leading dim)" % (
                    node.name, s, i)
    return None


def _syms_of(node):
    return {str(s) for t in _tensors(node.meta.get("val")) for s in t.shape if not isinstance(s, int)}


def _region_fits_codegen(params, nodes=()):
    """None when the region's only symbolic size is one sym, the leading dim
    of every parameter and value that has it; else why not."""
    for p in list(params) + list(nodes):
        why = _codegen_misfit(p)
        if why:
            return why
    seen = set().union(*[_syms_of(p) for p in list(params) + list(nodes)]) if params or nodes else set()
    if len(seen) > 1:
        return "more than one symbolic size (%s); fusec's code generator takes one" % ", ".join(sorted(seen))
    return None


def _codegen_refusal(params, nodes):
    """(node, why) of the first node of a region that breaks the code
    generator's rule for symbolic sizes (its value, or a parameter it reads),
    or None."""
    first = None
    for n in nodes:
        for v in [n] + [a for a in n.all_input_nodes if a in params]:
            why = _codegen_misfit(v)
            if why:
                return n, why
            syms = _syms_of(v)
            if syms:
                first = first or sorted(syms)[0]
                if syms != {first}:
                    return n, "a second symbolic size (%s besides %s); fusec's code generator takes one" % (
                        ", ".join(sorted(syms - {first})), first)
    return None


def _fg_param(p):
    """Whether a region's input is a parameter of its .fg graph: a tensor of
    a fusec dtype (not a number, nor an operand a row ignores, such as flash
    attention's rng state, aten_map.FLASH)."""
    ts = _tensors(p.meta.get("val"))
    return bool(ts) and all(_val_dtype(t) is not None for t in ts)


def _permuted_order(v):
    """The dim order (outermost first) of a tensor value of 2 or more dims
    whose strides are not in row-major order; None otherwise (or unknown)."""
    if not hasattr(v, "stride") or v.dim() < 2:
        return None
    order = _dim_order(v)
    return None if order is None or order == tuple(range(v.dim())) else order


def dense_layout(v):
    """The dim order (outermost first) of a tensor value that is dense in an
    order other than row-major: its .fg `layout=[...]`; None for a row-major
    tensor, one with gaps or overlaps (a slice, an expand), symbolic strides
    or fewer than 2 dims. Size-1 dims keep their place (any stride fits
    them)."""
    order = _permuted_order(v)
    if order is None:
        return None
    try:
        shape, st = _ints(v.shape), _ints(v.stride())
    except Exception:
        return None
    if strides_match(st, shape, dense_strides(shape, order)) and not strides_match(
            st, shape, dense_strides(shape, tuple(range(v.dim())))):
        return order
    return None


def result_perm(v):
    """The dim order a region's result is written in so that it has the
    traced graph's strides (the permute the region returns, which the call
    undoes): None where that is row-major (or unknown, or a result of fewer
    than 2 elements or dims)."""
    order = _permuted_order(v)
    if order is None:
        return None
    try:
        shape = _ints(v.shape)
        big = [d for d in order if shape[d] != 1]
        if math.prod(shape) <= 1 or big == sorted(big):  # row-major but for size-1 dims
            return None
    except Exception:
        return None
    return order


class Cover:
    """A parameter that is a window of a dense tensor (issue 21): a static
    value dense in no dim order, but a slice of one that is, such as q, k
    and v of a packed QKV projection's output ([B, H, S, D] views of [B, S,
    3 * H * D]), which a region would otherwise get as copies. The region
    declares the dense tensor (`shape`, row-major, its dims the value's in
    stride order, size-1 dims first) and takes the value as
    `permute(slice(cover, starts, ends), dims=perm)`; the caller passes
    `as_strided(x, shape, stride, x.storage_offset() - rel)`, a window of
    x's own storage, with no copy (the region reads only x's elements).
    `size` and `strides` are the value's, the check that a call's tensor is
    laid out as the traced one was."""

    def __init__(self, order, shape, starts, rel, size, strides):
        """order: the value's dims in the dense tensor's order (outermost
        first), whose extents are `shape` and the window's starts `starts`."""
        self.shape, self.starts, self.rel = shape, starts, rel
        self.ends = [s + size[d] for s, d in zip(starts, order)]
        self.perm = [order.index(i) for i in range(len(size))]
        self.stride = dense_strides(shape, tuple(range(len(shape))))
        self.size, self.strides = tuple(size), tuple(strides)


def strided_cover(v):
    """The Cover of a tensor value, or None where it is dense in some dim
    order, has symbolic sizes or strides, an expanded (zero-stride) or
    overlapping dim, an innermost stride other than 1, or is not a window
    of the dense tensor its strides imply (a row boundary crossed)."""
    if not hasattr(v, "stride") or v.dim() < 1:
        return None
    try:
        size = _ints(v.shape)
        st = _ints(v.stride())
        off = _ints([v.storage_offset()])[0]
    except Exception:
        return None
    if 0 in size or strides_match(st, size, dense_strides(size, tuple(range(len(size))))) \
            or dense_layout(v) is not None:
        return None
    big = [d for d in range(len(size)) if size[d] != 1]
    if not big or any(st[d] <= 0 for d in big):
        return None
    big.sort(key=lambda d: -st[d])  # outermost first
    if st[big[-1]] != 1 or len({st[d] for d in big}) != len(big):
        return None
    # the dense tensor's extent along each dim: the next outer stride over
    # this one; the outermost keeps its size
    ext, starts = {}, {}
    rel = 0
    for j, d in enumerate(big):
        if j == 0:
            ext[d], starts[d] = size[d], 0
            continue
        outer = st[big[j - 1]]
        if outer % st[d]:
            return None
        ext[d] = outer // st[d]
        starts[d] = (off // st[d]) % ext[d]
        if starts[d] + size[d] > ext[d]:
            return None
        rel += starts[d] * st[d]
    order = [d for d in range(len(size)) if size[d] == 1] + big
    return Cover(order, [ext.get(d, 1) for d in order], [starts.get(d, 0) for d in order], rel, size, st)


def dense_strides(shape, order):
    """The strides of a tensor of `shape` dense in the dim order `order`
    (outermost first)."""
    st, acc = [0] * len(shape), 1
    for d in reversed(order):
        st[d] = acc
        acc *= shape[d]
    return tuple(st)


def strides_match(strides, shape, want):
    """Whether `strides` are `want` on every dim of size > 1 (the loader's
    check: a size-1 dim's stride is never used); an empty tensor matches."""
    if tuple(strides) == want or 0 in shape:
        return True
    return all(s == w or n == 1 for s, w, n in zip(strides, want, shape))


def emit_region(gname, params, nodes, outputs, syms, canonical=False, layouts=False, layout_out=None):
    """(text, note): the .fg graph of a region, symbolic where it fits;
    canonical: values named v0, v1, ... rather than after the FX nodes.
    layouts: a parameter whose example is dense in another dim order than
    row-major (a transposed view, a permuted matmul output) is declared with
    that `layout=[...]` (static regions only), so that the caller passes it
    as it is; layouts="covers": and a parameter that is a window of a dense
    tensor (strided_cover) is declared as that tensor and sliced, so that
    the caller passes the window's storage (Cover). `layout_out` (a dict),
    when given, receives them (parameter node -> dim order; "covers":
    parameter node -> Cover; "results": the results' dim orders)."""
    params = [p for p in params if _fg_param(p)]
    has_sym = any(not isinstance(s, int) for p in params for s in p.meta["val"].shape) or any(
        not isinstance(s, int) for n in nodes for t in _tensors(n.meta.get("val")) for s in t.shape)
    note = None
    if has_sym:
        note = _region_fits_codegen(params, nodes)
        if note is None:
            try:
                return Emitter(gname, params, nodes, outputs, syms, True, canonical).emit(), None
            except Refuse as r:
                note = "%s at %s" % (r.why, r.node.name)
            except KeyError as k:
                note = "a size %s with no declared range" % k
    lay, covers = {}, {}
    if layouts:
        for p in params:
            order = dense_layout(p.meta["val"])
            if order is not None:
                lay[p] = order
            elif layouts == "covers":
                c = strided_cover(p.meta["val"])
                if c is not None:
                    covers[p] = c
    perms = [result_perm(o.meta.get("val")) for o in outputs] if layouts else None
    if layout_out is not None:
        layout_out.update(lay)
        layout_out["results"] = perms
        layout_out["covers"] = covers
    return Emitter(gname, params, nodes, outputs, syms, False, canonical, lay, perms, covers).emit(), note


def _partition_io(nodes):
    """(params, outputs) of a set of nodes of a graph, in graph order."""
    nset = set(nodes)
    params, outputs = [], []
    for n in nodes:
        for a in n.all_input_nodes:
            if a not in nset and a not in params:
                params.append(a)
        if any(u not in nset for u in n.users):
            outputs.append(n)
    return params, outputs


# ---- partitioning a graph ------------------------------------------------------------


class Region:
    def __init__(self, name, gname, fg, inputs, outputs, note):
        self.name, self.gname, self.fg, self.inputs, self.outputs, self.note = name, gname, fg, inputs, outputs, note

    def __repr__(self):
        return "<Region %s (%s): %d in, %d out>" % (self.name, self.gname, len(self.inputs), len(self.outputs))


class Partitioned:
    """The result of partition(): `gm` with each region a submodule call
    (`fused_N`), `regions` (name -> Region with its .fg graph text), and what
    was left to PyTorch (`support.left`)."""

    def __init__(self, gm, regions, support, prefix):
        self.gm, self.regions, self.support, self.prefix = gm, regions, support, prefix

    def fg_text(self):
        return "".join(r.fg + "\n" for r in self.regions.values())

    def left_summary(self):
        """{op: {"count", "reason", "sources", "by_design"}} of the ops left to PyTorch."""
        out = {}
        for op, why, src, design in self.support.left.values():
            if op.startswith("call_module:") or op == "<built-in function getitem>":
                continue
            d = out.setdefault(op, {"count": 0, "reason": why, "sources": [], "by_design": design})
            d["count"] += 1
            if src and src not in d["sources"] and len(d["sources"]) < 5:
                d["sources"].append(src)
        return out

    def report(self):
        lines = ["fusec: %d region(s) (%d .fg ops)" % (len(self.regions), sum(
            r.fg.count("\n") - 2 for r in self.regions.values()))]
        for r in self.regions.values():
            lines.append("  %s: graph %s, %d input(s), %d output(s)%s" % (
                r.name, r.gname, len(r.inputs), len(r.outputs), ("; static: " + r.note) if r.note else ""))
        left = self.left_summary()
        design = {k: v for k, v in left.items() if v["by_design"]}
        lack = {k: v for k, v in left.items() if not v["by_design"]}
        if design:
            lines.append("left to PyTorch: " + ", ".join("%s x%d" % (k, v["count"]) for k, v in sorted(design.items())))
        if lack:
            lines.append("fusec lacks (left to PyTorch):")
            for k, v in sorted(lack.items()):
                lines.append("  %s x%d: %s%s" % (k, v["count"], v["reason"],
                                                 (" (at %s)" % ", ".join(v["sources"])) if v["sources"] else ""))
        return "\n".join(lines)


def _bound(v, default):
    """An int of a sympy range bound; `default` for an infinite one (int_oo)."""
    try:
        if getattr(v, "is_finite", True) is False or getattr(v, "is_integer", True) is False:
            return default
        return int(v)
    except Exception:
        return default


def _sym_table(gm, names=None, ranges=None):
    """{sympy symbol name: (.fg size name, lo, hi)} for the symbols of the graph."""
    names = names or {}
    out = {}
    for n in gm.graph.nodes:
        for t in _tensors(n.meta.get("val")):
            for s in t.shape:
                if isinstance(s, int) or not _is_sym_name(s):
                    continue
                key = str(s.node.expr)
                if key in out:
                    continue
                lo, hi = 1, 2**31 - 1
                vr = (ranges or {}).get(key)
                if vr is None:
                    vr = s.node.shape_env.var_to_range.get(s.node.expr)
                if vr is not None:
                    lo = max(0, _bound(vr.lower, lo))
                    hi = min(2**62, _bound(vr.upper, hi))
                nm = names.get(key) or key
                out[key] = (re.sub(r"[^A-Za-z0-9_]", "_", nm), lo, hi)
    return out


def _free_flash_rng(gm):
    """Prepares PyTorch's fused attention nodes for fusec's sdpa rows
    (aten_map.FLASH): drops the getitems of their results that nothing uses,
    and, for the CUDA forwards (flash, cuDNN) without dropout, gives the rng
    state a training forward saves for the backward (Fused.rng: the
    dropout's philox seed and offset, which the kernel leaves uninitialized
    or unused and its backward reads only with dropout) a fresh empty tensor
    of its own, so the node's only used results are out and logsumexp, what
    sdpa gives."""
    import torch

    changed = False
    for n in list(gm.graph.nodes):
        f = aten_map.FLASH.get(str(n.target)) if n.op == "call_function" else None
        if f is None or not f.fwd:
            continue
        for u in list(n.users):
            if u.target is operator.getitem and not u.users and u.args[1] not in (0, 1):
                gm.graph.erase_node(u)
                changed = True
        if not f.rng or aten_map._kw(n, "dropout_p", f.dropout, 0.0) != 0:
            continue
        for u in list(n.users):
            if u.target is not operator.getitem or u.args[1] not in f.rng:
                continue
            val = u.meta.get("val")
            if val is None:
                continue
            dev = "cpu" if str(val.device) == "meta" else val.device
            first = next(m for m in gm.graph.nodes if m.op != "placeholder")
            with gm.graph.inserting_before(first):  # at the top: regions around the attention stay whole
                e = gm.graph.call_function(torch.ops.aten.empty.memory_format, (list(val.shape),),
                                           {"dtype": val.dtype, "device": torch.device(dev)})
            e.meta = dict(u.meta)
            u.replace_all_uses_with(e)
            gm.graph.erase_node(u)
            changed = True
    if changed:
        gm.recompile()


_SINK_OPS = {"aten.sum.dim_IntList"}  # reductions _sink_sums moves to their input's region
LEAD_DEPTH = 3  # how deep _sink_sums looks for pointwise values that move with a sum
_SINK_TAIL = VIEW_OPS | {"aten._to_copy.default", "prims.convert_element_type.default"}


_ROW_SUMS = {"aten.sum.dim_IntList", "aten.mean.dim"}


def _row_reduces(q, val):
    """Whether partition q reduces, over their last dim, values of as many
    elements and the same last dim as the tensor `val` (a LayerNorm
    backward's row sums, where a weight gradient's sum over the rows joins
    the row kernel as a column reduction)."""
    if val is None or len(val.shape) == 0:
        return False
    numel, last = math.prod(val.shape), val.shape[-1]
    for m in q.nodes:
        if op_name(m) not in _ROW_SUMS or len(m.args) < 2 or not hasattr(m.args[0], "meta"):
            continue
        x = m.args[0].meta.get("val")
        dims = m.args[1] if isinstance(m.args[1], (list, tuple)) else [m.args[1]]
        if x is None or len(x.shape) == 0 or dims is None or len(dims) != 1:
            continue
        if dims[0] % len(x.shape) == len(x.shape) - 1 and x.shape[-1] == last and math.prod(x.shape) == numel:
            return True
    return False


def _sink_sums(parts, rows_only=False):
    """Moves each sum whose input another partition computes, with the
    casts and views after it, into that partition, where they make the
    graph's results only (a bias gradient: the sum over tokens of a gradient
    a region makes for a matmul). A pointwise value only the sum reads,
    whose other operands are the graph's inputs (a LayerNorm weight
    gradient: sum(dy * x_hat), x_hat saved by the forward), moves with it.
    CapabilityBasedPartitioner leaves such sums together in one partition
    after the last matmul, which reads every gradient again; in the
    producer's region the sum is a column reduction beside the values it
    reads. Nothing else reads what is moved, so no partition comes to depend
    on another. rows_only: only into a partition that also reduces values of
    the sum's input size over their last dim (_row_reduces: a LayerNorm
    backward, where the code generator makes the sum a column reduction of
    the row kernel); a sum moved beside pointwise work is a kernel of its
    own there, slower than the siblings summed together (docs/benchmarks.md,
    runs U2 and T2). Returns the partitions left non-empty and the count
    moved."""
    owner = {n: p for p in parts for n in p.nodes}

    def movable(a, p):
        """Whether a (a node of p) is a pointwise value only its one user in
        p reads, so that it may move with that user."""
        return a in p.nodes and len(a.users) == 1 and aten_map.TABLE.get(op_name(a)) is not None \
            and op_name(a) not in _SINK_OPS and op_name(a) not in VIEW_OPS

    def source(n, p):
        """(the partition computing n's non-input operands, the nodes of p
        to move with n, in graph order), or (None, None). The nodes moved
        are the pointwise values only the sum reads, up to LEAD_DEPTH deep
        (a LayerNorm weight gradient's dy * x_hat; RMSNorm's x_hat = x *
        rstd recomputed from the forward's saved x and rstd)."""
        lead, qs = [], set()

        def visit(a, depth):
            if a.op == "placeholder":
                return
            if depth < LEAD_DEPTH and movable(a, p):
                for b in a.all_input_nodes:
                    visit(b, depth + 1)
                lead.append(a)
                return
            qs.add(owner.get(a))

        for a in n.all_input_nodes:
            visit(a, 0)
        if len(qs) != 1 or None in qs:
            return None, None
        q = next(iter(qs))
        return (q, lead) if q is not p else (None, None)

    moved = 0
    for p in parts:
        for n in [m for m in p.nodes if op_name(m) in _SINK_OPS]:
            if n not in p.nodes:
                continue
            q, lead = source(n, p)
            if q is None or (rows_only and not _row_reduces(q, n.args[0].meta.get("val"))):
                continue
            chain, tip = lead + [n], n
            while True:  # the casts and views that only carry the sum to the results
                users = list(tip.users)
                if len(users) == 1 and users[0] in p.nodes and op_name(users[0]) in _SINK_TAIL \
                        and len(users[0].all_input_nodes) == 1:
                    tip = users[0]
                    chain.append(tip)
                    continue
                break
            if any(u.op != "output" for m in chain[len(lead):] for u in m.users if u not in chain):
                continue
            for m in chain:
                p.remove_node(m)
                q.add_node(m)
                owner[m] = q
            moved += 1
    return [p for p in parts if p.nodes], moved


def set_layouts(r, params, outs, lay):
    """A Region's in_layouts, in_covers and out_perms from what emit_region
    wrote into `lay` (its layout_out) for the placeholders `params` and the
    results `outs`: None where row-major, one entry a .fg tensor parameter."""
    params = [p for p in params if _fg_param(p)]
    r.in_layouts = [lay.get(p) for p in params]
    r.in_covers = [lay.get("covers", {}).get(p) for p in params]
    r.out_perms = lay.get("results") or [None] * len(outs)


def partition(gm, prefix="g", sym_names=None, sym_ranges=None, compiled_only=True, static_fallback=True,
              max_rounds=50, canonical=False, layouts=False, sink_sums=False):
    """Cuts an ATen FX GraphModule (with meta['val'] on its nodes) into fusec
    regions in place; returns a Partitioned. compiled_only=False also takes
    the rows only the interpreter runs (aten_map.NOT_COMPILED).
    static_fallback: a region whose symbolic sizes fusec's code generator
    doesn't take is written with the example's sizes (the exporter); False
    leaves the nodes that break the rule to PyTorch instead; "specialize"
    (the backend, whose graphs run at every size) keeps such a region, with
    its note, for fusec.specialize to write at each call's sizes (its
    Region's `parts`: the placeholders, nodes and outputs). canonical: the regions' values are
    named v0, v1, ... (the backend's cache key) rather than after the nodes.
    layouts: parameters dense in another dim order than row-major are
    declared with their `layout=[...]` (the backend: the caller passes them
    as they are); each Region's `in_layouts` gives the dim order of each
    .fg tensor parameter (None: row-major). layouts="covers": also windows
    of dense tensors (emit_region); each Region's `in_covers` gives each
    tensor parameter's Cover or None. sink_sums: _sink_sums (the backend's
    FUSEC_BACKEND_SINK_SUMS; True: every sum, "rows": only beside row sums of
    its input's size, the backend's default; docs/pytorch.md, docs/benchmarks.md
    2026-11-28 runs U2, T3, T4)."""
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner

    support = _operator_support(compiled_only, static_fallback == "specialize")
    _free_flash_rng(gm)
    syms = _sym_table(gm, sym_names, sym_ranges)
    for _ in range(max_rounds):
        part = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True,
                                          non_compute_ops=sorted(NON_COMPUTE))
        parts = [p for p in part.propose_partitions() if any(op_name(n) not in NON_COMPUTE for n in p.nodes)]
        sunk = 0
        if sink_sums:
            parts, sunk = _sink_sums(parts, rows_only=sink_sums == "rows")
        order = {n: i for i, n in enumerate(gm.graph.nodes)}
        refused = False
        for p in parts:  # a dry run of the writing, so a node it refuses goes back to PyTorch
            nodes = sorted(p.nodes, key=order.get)
            params, outs = _partition_io(nodes)
            try:
                fg_params = [q for q in params if _fg_param(q)]
                forms = (True, False)
                if not static_fallback:
                    bad = _codegen_refusal(params, nodes)
                    if bad:
                        raise Refuse(*bad)
                elif static_fallback == "specialize":
                    forms = (False,)  # where the symbolic form fails, written at each call's sizes
                for sym in forms:
                    Emitter("probe", fg_params, nodes, outs, syms, sym).emit()
            except Refuse as r:
                support.refused[r.node.name] = r.why
                support.left[r.node.name] = (op_name(r.node), r.why, source_line(r.node), False)
                refused = True
            except KeyError:
                pass
        if not refused:
            break
    else:
        raise RuntimeError("fusec.export: partitioning did not settle")
    fused = part.fuse_partitions(parts) if parts else gm
    regions = collections.OrderedDict()
    k = 0
    for n in list(fused.graph.nodes):
        if n.op != "call_module" or not n.target.startswith("fused_"):
            continue
        sub = fused.get_submodule(n.target)
        ph = [m for m in sub.graph.nodes if m.op == "placeholder"]
        body = [m for m in sub.graph.nodes if m.op == "call_function"]
        out = [m for m in sub.graph.nodes if m.op == "output"][0].args[0]
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        gname = "%s%d" % (prefix, k)
        k += 1
        lay = {}
        text, note = emit_region(gname, ph, body, outs, syms, canonical, layouts, lay)
        regions[n.target] = Region(n.target, gname, text, [p.name for p in ph], [o.name for o in outs], note)
        set_layouts(regions[n.target], ph, outs, lay)
        regions[n.target].ops = [op_name(m) for m in body]
        regions[n.target].tuple_out = isinstance(out, (tuple, list))
        regions[n.target].tensor_in = [_fg_param(p) for p in ph]
        regions[n.target].parts = (ph, body, outs)
    pt = Partitioned(fused, regions, support, prefix)
    pt.syms = syms
    pt.sunk = sunk
    return pt


# ---- torch.export front end --------------------------------------------------------


def decomposition_table():
    """Core ATen decompositions, plus norms and softmax taken apart into
    reductions and pointwise ops; sdpa kept whole (fusec's `sdpa`)."""
    import torch
    from torch._decomp import core_aten_decompositions, get_decompositions

    aten = torch.ops.aten
    t = dict(core_aten_decompositions())
    t.update(get_decompositions([
        aten.native_layer_norm, aten._softmax, aten._log_softmax, aten.native_group_norm, aten.gelu_backward,
        aten.native_layer_norm_backward, aten._softmax_backward_data, aten._log_softmax_backward_data,
        aten.silu_backward, aten.sigmoid_backward, aten.tanh_backward, aten.threshold_backward,
    ]))
    # sdpa whole; its fused kernels stay whole too: core ATen's decomposition of
    # the CPU flash kernel gives a forward whose saved results the kernel's
    # backward misreads (aot_autograd with core_aten_decompositions() alone
    # gets nanoGPT's attention gradients wrong, relative error 4 at torch 2.15)
    for name in ("scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
                 "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                 "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_fused_attention_overrideable"):
        op = getattr(aten, name, None)
        for ov in ([] if op is None else [getattr(op, o) for o in op.overloads()]):
            t.pop(ov, None)
    return t


class Exported:
    """What export() returns: `fg` (the .fg text), `manifest` (a dict),
    `partitioned` (the FX graph with its regions), report(), write(DIR),
    check_compile(fusec), run_interpreted(*inputs)."""

    def __init__(self, name, ep, partitioned):
        self.name, self.ep, self.partitioned = name, ep, partitioned
        self.fg = partitioned.fg_text()
        self.manifest = _manifest(name, ep, partitioned)

    def report(self):
        return self.partitioned.report()

    def write(self, out_dir):
        os.makedirs(out_dir, exist_ok=True)
        fg = os.path.join(out_dir, self.name + ".fg")
        with open(fg, "w") as f:
            f.write(self.fg)
        with open(os.path.join(out_dir, self.name + ".json"), "w") as f:
            json.dump(self.manifest, f, indent=1)
            f.write("\n")
        return fg

    def check_compile(self, fusec=None):
        """Compiles the .fg with the fusec binary; raises RuntimeError with its
        message when it fails."""
        fusec = fusec or find_tool("fusec")
        with tempfile.TemporaryDirectory() as d:
            fg = self.write(d)
            r = subprocess.run([fusec, fg, "-o", os.path.join(d, "out.ptx")], capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError("fusec failed on the exported %s.fg:\n%s" % (self.name, r.stderr))

    def flat_args(self, *user_inputs):
        """The graph module's arguments: parameters, buffers, constants, then
        the user inputs flattened."""
        import torch.utils._pytree as pytree

        flat = list(pytree.tree_leaves(user_inputs))
        if self.ep is None:
            return flat
        sig = self.ep.graph_signature
        out, k = [], 0
        for spec in sig.input_specs:
            kind = spec.kind.name
            if kind == "USER_INPUT":
                out.append(flat[k])
                k += 1
            elif kind in ("PARAMETER", "BUFFER") and spec.target in self.ep.state_dict:
                out.append(self.ep.state_dict[spec.target])
            else:
                out.append(self.ep.constants[spec.target])
        return out

    def run_interpreted(self, *user_inputs, fgrun=None):
        """Runs the exported model on the CPU: PyTorch ops with torch, each
        region through fusec's interpreter (fgrun). For tests."""
        import torch

        fgrun = fgrun or find_tool("fgrun")
        gm = self.partitioned.gm
        with tempfile.TemporaryDirectory() as d:
            fg = os.path.join(d, "m.fg")
            with open(fg, "w") as f:
                f.write(self.fg)
            saved = {r.name: gm.get_submodule(r.name) for r in self.partitioned.regions.values()}
            try:
                for r in self.partitioned.regions.values():
                    setattr(gm, r.name, _region_module(lambda *a, r=r: _fgrun_region(fgrun, fg, r, d, a)))
                with torch.no_grad():
                    return gm(*self.flat_args(*user_inputs))
            finally:
                for k, v in saved.items():
                    setattr(gm, k, v)


def find_tool(name):
    """A fusec tool: $FUSEC_BIN_DIR/NAME, the build tree's, or the PATH's."""
    cands = []
    if os.environ.get("FUSEC_BIN_DIR"):
        cands.append(os.path.join(os.environ["FUSEC_BIN_DIR"], name))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cands.append(os.path.join(root, "build", "tools", name))
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    p = shutil.which(name)
    if p is None:
        raise FileNotFoundError("fusec: no '%s' (set FUSEC_BIN_DIR, build the tree, or put it on the PATH)" % name)
    return p


def to_npy(t, path):
    import numpy as np
    import torch

    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        a = t.view(torch.int16).numpy().view(np.uint16)
    elif t.dtype in (getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)):
        a = t.view(torch.uint8).numpy()
    else:
        a = t.numpy()
    np.save(path, a)


def from_npy(path, dtype):
    import numpy as np
    import torch

    a = np.load(path)
    if dtype == torch.bfloat16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    if dtype in (getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)):
        return torch.from_numpy(a.copy()).view(dtype)
    return torch.from_numpy(a.copy()).to(dtype)


def _fgrun_call(fgrun, fg, gname, tensors, out_dtypes, work):
    d = tempfile.mkdtemp(dir=work)
    paths = []
    for i, t in enumerate(tensors):
        p = os.path.join(d, "in%d.npy" % i)
        to_npy(t, p)
        paths.append(p)
    cmd = [fgrun, fg, "--graph", gname, "--out", d]
    if paths:
        cmd += ["--inputs", ",".join(paths)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("fgrun failed on graph %s: %s" % (gname, r.stderr.strip()))
    return [from_npy(os.path.join(d, "%d.npy" % j), dt) for j, dt in enumerate(out_dtypes)]


def _dim_order(t):
    """The dims of a tensor from the outermost to the innermost (its strides'
    order; size-1 dims and ties keep their place): of the example's strides
    where they are symbolic (_hint), or None where none can be read."""
    try:
        st = [_hint(s) for s in t.stride()]
    except Exception:
        return None
    sz = list(t.shape)
    keyed = [(-st[i] if not isinstance(sz[i], int) or sz[i] != 1 else None, i) for i in range(len(st))]
    order = [i for k, i in sorted((k, i) for k, i in keyed if k is not None)]
    ones = [i for k, i in keyed if k is None]
    return tuple(sorted(order + ones, key=lambda i: (order.index(i) if i in order else i)))


def restride(outs, orders, on_copy=None):
    """Region results laid out as the traced graph had them: the ops left to
    PyTorch after a region (an attention backward kernel, an as_strided) may
    rely on the strides the graph was traced with, where fusec returns its
    own (row-major, or views). A copy only where the order of dims differs;
    on_copy(k), when given, is called for each result k copied."""
    fixed = []
    for k, (o, order) in enumerate(zip(outs, orders)):
        if order is None or o.dim() < 2 or _dim_order(o) == order or o.numel() <= 1:
            fixed.append(o)
            continue
        if on_copy is not None:
            on_copy(k)
        inv = [order.index(i) for i in range(o.dim())]
        t = o.new_empty([o.shape[i] for i in order]).permute(inv)
        t.copy_(o)
        fixed.append(t)
    return fixed


def _region_module(call):
    """An nn.Module whose forward is `call` (a region's stand-in in the graph module)."""
    import torch

    class RegionCall(torch.nn.Module):
        def forward(self, *args):
            return call(*args)

    return RegionCall()


def _fgrun_region(fgrun, fg, r, work, args):
    ins = [a for a, t in zip(args, r.tensor_in) if t]
    outs = restride(_fgrun_call(fgrun, fg, r.gname, ins, r.out_dtypes, work), r.out_orders)
    return tuple(outs) if r.tuple_out else outs[0]


def _manifest(name, ep, pt):
    gm = pt.gm
    sig = ep.graph_signature if ep is not None else None
    kinds = {}
    if sig is not None:
        for spec in sig.input_specs:
            kinds[spec.arg.name] = (spec.kind.name.lower(), spec.target)

    def desc(n):
        ts = _tensors(n.meta.get("val"))
        if len(ts) == 1 and not isinstance(n.meta.get("val"), (tuple, list)):
            t = ts[0]
            syms = getattr(pt, "syms", {})
            return {"dtype": _val_dtype(t) or str(t.dtype),
                    "shape": [s if isinstance(s, int) else syms.get(str(s), (str(s),))[0] for s in t.shape]}
        return {}

    m = {"version": 1, "name": name, "fg": name + ".fg", "inputs": [], "nodes": [], "outputs": []}
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            kind, target = kinds.get(n.name, ("user_input", None))
            e = {"name": n.name, "kind": kind}
            if target:
                e["target"] = target
            e.update(desc(n))
            m["inputs"].append(e)
        elif n.op == "output":
            outs = n.args[0] if isinstance(n.args[0], (tuple, list)) else [n.args[0]]
            m["outputs"] = [a.name if hasattr(a, "name") else repr(a) for a in outs]
        elif n.op == "call_module" and n.target in pt.regions:
            r = pt.regions[n.target]
            e = {"kind": "region", "name": n.name, "graph": r.gname,
                 "inputs": [a.name if hasattr(a, "name") else repr(a) for a in n.args],
                 "outputs": r.outputs, "returns": "tuple" if r.tuple_out else "tensor"}
            if r.note:
                e["static_because"] = r.note
            m["nodes"].append(e)
        else:
            e = {"kind": "torch", "name": n.name, "op": op_name(n),
                 "inputs": [a.name for a in n.all_input_nodes]}
            if n.target is operator.getitem:
                e["index"] = n.args[1]
            left = pt.support.left.get(n.name)
            if left and n.target is not operator.getitem:
                e["why"] = left[1]
                if left[2]:
                    e["source"] = left[2]
            e.update(desc(n))
            m["nodes"].append(e)
    left = pt.left_summary()
    m["left_to_torch"] = {k: v["count"] for k, v in sorted(left.items()) if v["by_design"]}
    m["unsupported"] = {k: v for k, v in sorted(left.items()) if not v["by_design"]}
    return m


def _out_meta(pt):
    for n in pt.gm.graph.nodes:
        if n.op == "call_module" and n.target in pt.regions:
            sub = pt.gm.get_submodule(n.target)
            out = [m for m in sub.graph.nodes if m.op == "output"][0].args[0]
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            r = pt.regions[n.target]
            r.out_dtypes = [o.meta["val"].dtype for o in outs]
            r.out_orders = [_dim_order(o.meta["val"]) for o in outs]
            r.out_sources = [op_name(o).replace("aten.", "").replace(".default", "") if hasattr(o, "op") else "?"
                             for o in outs]


def export(fn, example_inputs, dynamic_shapes=None, *, name="model", strict=None, verbose=False,
           compiled_only=True):
    """Exports `fn` (an nn.Module or a function) at `example_inputs` (a tuple)
    with torch.export and cuts it into fusec regions. Returns an Exported.
    `dynamic_shapes` is torch.export's; a dynamic dim becomes a symbolic size
    named after its Dim where fusec's code generator takes it (see the module
    doc). strict: torch.export's mode; None tries strict (Dynamo, which keeps
    the model's stack traces) and falls back to non-strict."""
    import torch

    example_inputs = tuple(example_inputs)
    if isinstance(fn, torch.nn.Module):
        mod = fn
    else:  # forward(*args): one entry, the tuple of the arguments' specs
        mod = _fn_module(fn)
        if isinstance(dynamic_shapes, (tuple, list)):
            dynamic_shapes = (tuple(dynamic_shapes),)
    ep = None
    if strict is not False:  # strict (Dynamo) records the model's stack traces: the source lines in reports
        try:
            ep = torch.export.export(mod, example_inputs, dynamic_shapes=dynamic_shapes, strict=True)
        except Exception:
            if strict:
                raise
    if ep is None:
        ep = torch.export.export(mod, example_inputs, dynamic_shapes=dynamic_shapes, strict=False)
    ep = ep.run_decompositions(decomposition_table())
    gm = ep.graph_module
    sym_names = _dim_names(ep, example_inputs, dynamic_shapes)
    ranges = {str(k): v for k, v in ep.range_constraints.items()}
    pt = partition(gm, prefix=re.sub(r"[^A-Za-z0-9_]", "_", name) + "_r", sym_names=sym_names, sym_ranges=ranges,
                   compiled_only=compiled_only)
    _out_meta(pt)
    ex = Exported(name, ep, pt)
    if verbose:
        print(ex.report(), file=sys.stderr)
    return ex


def export_graph(gm, name="model", compiled_only=True):
    """Partitions an ATen FX GraphModule whose placeholders are the flat
    inputs and whose nodes carry meta['val'] (make_fx's, AOTAutograd's);
    returns an Exported."""
    pt = partition(gm, prefix=re.sub(r"[^A-Za-z0-9_]", "_", name) + "_r", compiled_only=compiled_only)
    _out_meta(pt)
    return Exported(name, None, pt)


def trace_aten(fn, example_inputs, name="model", compiled_only=True):
    """export_graph of make_fx's ATen graph of `fn` (no decompositions: the
    ops as the dispatcher sees them, as a graph of AOTAutograd holds them)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    return export_graph(make_fx(fn, tracing_mode="fake")(*example_inputs), name, compiled_only)


class TrainingExport:
    """What export_training() returns: the forward and backward graphs
    (AOTAutograd's) each cut into regions, in one .fg file (graphs
    NAME_fw_rK, NAME_bw_rK) and one manifest with a section per graph."""

    def __init__(self, name, fw, bw):
        self.name, self.forward, self.backward = name, fw, bw
        self.fg = fw.fg + bw.fg
        self.manifest = {"version": 1, "name": name, "fg": name + ".fg", "training": True,
                         "forward": fw.manifest, "backward": bw.manifest}
        for part in ("forward", "backward"):
            self.manifest[part].pop("fg", None)

    def report(self):
        return "forward: %s\nbackward: %s" % (self.forward.report(), self.backward.report())

    write = Exported.write
    check_compile = Exported.check_compile


def export_training(module, example_inputs, *, name="model", compiled_only=True):
    """AOTAutograd's forward and backward graphs of `module` (an nn.Module)
    at `example_inputs`, with export's decompositions, each cut into fusec
    regions. The backward is traced from the sum of the float outputs; the
    forward's placeholders are the parameters and buffers, then the inputs;
    the backward's are the saved values, then the output gradients (the
    manifest names them as the graphs do). Returns a TrainingExport."""
    import torch
    from functorch.compile import aot_module, make_boxed_func

    graphs = {}

    def capture(kind):
        def compiler(gm, example):
            graphs[kind] = gm
            return make_boxed_func(gm.forward)
        return compiler

    f = aot_module(module, fw_compiler=capture("fw"), bw_compiler=capture("bw"),
                   decompositions=decomposition_table())
    out = f(*example_inputs)
    outs = [o for o in (out if isinstance(out, (tuple, list)) else [out])
            if isinstance(o, torch.Tensor) and o.requires_grad]
    if not outs:
        raise ValueError("fusec.export_training: no output of the module requires a gradient")
    sum(o.float().sum() for o in outs).backward()
    fw = export_graph(graphs["fw"], name + "_fw", compiled_only)
    bw = export_graph(graphs["bw"], name + "_bw", compiled_only)
    return TrainingExport(name, fw, bw)


def _fn_module(fn):
    import torch

    class FnModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fn = fn

        def forward(self, *args):
            return self.fn(*args)

    return FnModule()


def _dim_names(ep, example_inputs, dynamic_shapes):
    """{sympy symbol name: Dim name} from the dynamic_shapes spec."""
    if not dynamic_shapes:
        return {}
    import torch.utils._pytree as pytree

    ph = [n for n in ep.graph_module.graph.nodes if n.op == "placeholder"]
    user = [n for n, s in zip(ph, ep.graph_signature.input_specs) if s.kind.name == "USER_INPUT"]
    specs = dynamic_shapes
    if isinstance(specs, dict):
        specs = list(specs.values())
    flat_specs = pytree.tree_leaves(list(specs), is_leaf=lambda x: isinstance(x, dict) or x is None)
    out = {}
    for n, spec in zip(user, flat_specs):
        if not isinstance(spec, dict):
            continue
        shape = n.meta["val"].shape
        for d, dim in spec.items():
            s = shape[d]
            nm = getattr(dim, "__name__", None)
            if nm and not isinstance(s, int) and _is_sym_name(s):
                out.setdefault(str(s.node.expr), nm)
    return out


# ---- command line --------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fusec.export", description=(
        "Export a PyTorch model to fusec: a .fg file (one graph per fusable region) and a JSON manifest. "
        "ENTRY is a function of SCRIPT returning (module_or_fn, example_inputs[, dynamic_shapes])."))
    ap.add_argument("target", metavar="SCRIPT:ENTRY")
    ap.add_argument("-o", "--out", default=".", help="output directory (default .)")
    ap.add_argument("--name", help="name of the .fg/.json files (default: ENTRY)")
    ap.add_argument("--check-compile", action="store_true", help="compile the .fg with fusec (exit 1 if it fails)")
    ap.add_argument("--fusec", help="the fusec binary for --check-compile")
    ap.add_argument("--training", action="store_true",
                    help="export AOTAutograd's forward and backward graphs (the module must be an nn.Module)")
    a = ap.parse_args(argv)
    if ":" not in a.target:
        ap.error("expected SCRIPT:ENTRY, got '%s'" % a.target)
    script, entry = a.target.rsplit(":", 1)
    if not os.path.isfile(script):
        print("fusec.export: error: no such script '%s'" % script, file=sys.stderr)
        return 1
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    g = runpy.run_path(script, run_name="fusec_export_entry")
    if entry not in g or not callable(g[entry]):
        print("fusec.export: error: %s has no function '%s'" % (script, entry), file=sys.stderr)
        return 1
    got = g[entry]()
    if not isinstance(got, tuple) or len(got) not in (2, 3):
        print("fusec.export: error: %s() must return (module_or_fn, example_inputs[, dynamic_shapes])" % entry,
              file=sys.stderr)
        return 1
    fn, inputs = got[0], got[1]
    dyn = got[2] if len(got) == 3 else None
    if a.training:
        if dyn is not None:
            print("fusec.export: error: --training takes static shapes (ENTRY returned dynamic_shapes)",
                  file=sys.stderr)
            return 1
        ex = export_training(fn, inputs, name=a.name or entry)
    else:
        ex = export(fn, inputs, dyn, name=a.name or entry)
    path = ex.write(a.out)
    print(ex.report())
    print("wrote %s and %s" % (path, os.path.join(a.out, ex.name + ".json")))
    if a.check_compile:
        try:
            ex.check_compile(a.fusec)
        except (RuntimeError, FileNotFoundError) as err:
            print("fusec.export: error: %s" % err, file=sys.stderr)
            return 1
        print("fusec compiles %s" % path)
    return 0


class _CallableModule(type(sys)):
    """`fusec.export(...)` calls export(): the module is callable."""

    def __call__(self, *args, **kwargs):
        return export(*args, **kwargs)


if __name__ == "__main__":
    sys.exit(main())
else:
    sys.modules[__name__].__class__ = _CallableModule
