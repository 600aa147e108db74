"""torch.compile(model, backend="fusec"): fusec's kernels for the regions of
the graphs Dynamo hands over, PyTorch for the rest.

    import fusec.backend                      # registers the backend "fusec"
    model = torch.compile(model, backend="fusec")

AOTAutograd turns Dynamo's graph into ATen forward (and, when training,
backward) graphs with fusec.export's decompositions; each is cut into regions
by fusec.export.partition (torch.fx's CapabilityBasedPartitioner and the
table of fusec.aten_map). Each region's `.fg` graph is compiled by the
installed `fusec` binary (find_tool: $FUSEC_BIN_DIR, the build tree, the
PATH) into an on-disk cache keyed by the hash of its text
($FUSEC_BACKEND_CACHE, default ~/.cache/fusec/backend), so a second process
compiles nothing; the artifact is loaded with libfgload through the Python
binding and called in place of the region. A region fusec refuses to compile
stays in PyTorch, with a warning that gives fusec's message.

make_backend(runner="fgrun") runs the regions through fusec's CPU
interpreter instead (for tests on machines without a GPU);
make_backend(runner="prepare") only compiles the regions into the cache and
leaves them to PyTorch (to fill the cache on a machine with fusec, for a GPU
machine without it: examples/models/train_step.py --prepare).

On a machine without fusec, a region missing from the cache stays in
PyTorch (Stats.missing); with $FUSEC_BACKEND_PENDING=DIR its text is written
to DIR/<hash>.fg (atomically: the ranks of a distributed run may write the
same region at once), for `python -m fusec.backend fill DIR` on a machine
with fusec. $FUSEC_BACKEND_COMPILE=0 makes a machine with fusec behave as
one without (tests of that flow).

A region's cache key is the hash of its text with values named v0, v1, ...
(partition(canonical=True)), so the same region traced on another device,
where PyTorch's attention kernels give the graph other node names, or in
another graph, hits the same entry.
"""
import collections
import hashlib
import logging
import os
import re
import subprocess
import tempfile
import threading

from . import export as _export
from . import gqa as _gqa
from . import specialize as _specialize

_log = logging.getLogger("fusec.backend")
_modules = {}  # artifact path -> fusec.Module (one load per process)
_lock = threading.Lock()


def cache_dir():
    d = os.environ.get("FUSEC_BACKEND_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "fusec", "backend")
    os.makedirs(d, exist_ok=True)
    return d


class Stats:
    """Counts of a backend: graphs partitioned, regions run by fusec (or,
    runner "prepare", compiled and left to PyTorch), compilations, cache
    hits, regions fusec refused, regions missing (no fusec binary and not in
    the cache); `left` counts the ops left to PyTorch by name, `unsupported`
    those of them fusec lacks (not left by design), over every graph."""

    def __init__(self):
        self.compiled = self.cache_hits = self.refused = self.missing = self.regions = self.graphs = 0
        self.left = collections.Counter()
        self.unsupported = collections.Counter()
        self.region_ops = 0  # ATen ops inside regions that run through fusec
        # regions written at each call's sizes (fusec.specialize; counted in
        # `regions` too) and the sizes they were written at
        self.specialized = self.shapes = 0
        self.sunk = 0  # sums moved into their input's region (FUSEC_BACKEND_SINK_SUMS, export._sink_sums)
        self.gqa = 0  # attention nodes given enable_gqa=True for repeated k, v heads (fusec.gqa)
        # around the region calls (counted per call): tensor inputs passed as
        # they are, inputs copied into the compiled layout (by where they come
        # from and why), results copied into the traced graph's layout
        self.calls = self.inputs_passed = 0
        self.inputs_copied = collections.Counter()
        self.results_restrided = collections.Counter()

    def __repr__(self):
        return "<fusec.backend.Stats graphs=%d regions=%d compiled=%d cache_hits=%d refused=%d missing=%d>" % (
            self.graphs, self.regions, self.compiled, self.cache_hits, self.refused, self.missing)

    def as_dict(self):
        return {"graphs": self.graphs, "regions": self.regions, "compiled": self.compiled,
                "cache_hits": self.cache_hits, "refused": self.refused, "missing": self.missing,
                "region_ops": self.region_ops, "specialized": self.specialized, "shapes": self.shapes,
                "sunk": self.sunk,
                "gqa": self.gqa, "left_to_torch": dict(self.left.most_common()),
                "unsupported": dict(self.unsupported.most_common()), **self.copies()}

    def copies(self):
        """The counts of the calls (a snapshot: subtract two to get a step's)."""
        return {"calls": self.calls, "inputs_passed": self.inputs_passed,
                "inputs_copied": dict(self.inputs_copied.most_common()),
                "results_restrided": dict(self.results_restrided.most_common())}


_ARCH = []


def target_arch():
    """The `--arch` regions are compiled for ("" for fusec's default):
    $FUSEC_BACKEND_ARCH, else sm_90a on a Hopper GPU (the wgmma attention
    kernels need the arch-specific target, docs/attention.md), else the
    default. The arch is part of the cache key."""
    env = os.environ.get("FUSEC_BACKEND_ARCH")
    if env is not None:
        return env
    if not _ARCH:
        arch = ""
        try:
            import torch

            if torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0):
                arch = "sm_90a"
        except Exception:  # no usable CUDA: fusec's default
            pass
        _ARCH.append(arch)
    return _ARCH[0]


def _arch_line(arch):
    """The line an arch-specific region's cache text starts with (a .fg
    comment): the cache key and the pending file carry the arch."""
    return "# fusec --arch %s\n" % arch if arch else ""


def compile_region(fg_text, fusec=None, stats=None, directory=None, arch=None):
    """(path of the artifact, None) for one region's .fg text (graph `g`),
    compiled once into the cache for `arch` (None: target_arch()); (None,
    fusec's message) when fusec refuses or there is no fusec binary
    (stats.missing) and the cache lacks it."""
    arch = target_arch() if arch is None else arch
    fg_text = _arch_line(arch) + _named(fg_text)
    h = hashlib.sha256(fg_text.encode()).hexdigest()[:32]
    d = directory or cache_dir()
    ptx = os.path.join(d, h + ".ptx")
    try:
        if os.environ.get("FUSEC_BACKEND_COMPILE") == "0":  # behave as a machine without fusec (tests)
            raise FileNotFoundError("fusec.backend: compiling is off (FUSEC_BACKEND_COMPILE=0)")
        fusec = fusec or _export.find_tool("fusec")
    except FileNotFoundError as err:  # a machine that only runs: the cache must hold every region
        fusec, no_fusec = None, str(err)
    if os.path.exists(ptx) and (fusec is None or _compiled_by(ptx) == _fusec_id(fusec)):
        if stats:
            stats.cache_hits += 1
        return ptx, None
    if fusec is None:
        if stats:
            stats.missing += 1
        pending = os.environ.get("FUSEC_BACKEND_PENDING")
        if pending:  # for a machine with fusec to compile: `python -m fusec.backend fill`
            os.makedirs(pending, exist_ok=True)
            _write_atomic(os.path.join(pending, h + ".fg"), fg_text)
        return None, "%s (and the region is not in the cache %s)" % (no_fusec, d)
    with tempfile.TemporaryDirectory(dir=d) as tmp:
        fg = os.path.join(tmp, "region.fg")
        with open(fg, "w") as f:
            f.write(fg_text)
        out = os.path.join(tmp, "region.ptx")
        r = subprocess.run([fusec, fg, "-o", out] + (["--arch", arch] if arch else []), capture_output=True,
                           text=True)
        if r.returncode != 0:
            return None, r.stderr.strip()
        _write_atomic(ptx[:-len(".ptx")] + ".fusec", _fusec_id(fusec) + "\n")
        os.replace(out, ptx)  # atomic: a concurrent process sees the whole artifact or none
        os.replace(fg, os.path.join(d, h + ".fg"))
    if stats:
        stats.compiled += 1
    return ptx, None


_FUSEC_IDS = {}


def _fusec_id(path):
    """The identity of the fusec binary at `path` (the first 16 hex digits of
    its sha256), which the cache keeps beside each artifact (<key>.fusec): the
    key is the region's text and arch, so where fusec is at hand an artifact
    another binary compiled (an older fusec) is compiled again; a machine
    without fusec runs what the cache holds."""
    real = os.path.realpath(path)
    st = os.stat(real)
    k = (real, st.st_size, st.st_mtime_ns)
    if k not in _FUSEC_IDS:
        with open(real, "rb") as f:
            _FUSEC_IDS[k] = hashlib.sha256(f.read()).hexdigest()[:16]
    return _FUSEC_IDS[k]


def _compiled_by(ptx):
    """The fusec identity recorded beside a cached artifact ("" if none: an
    artifact cached before identities were recorded)."""
    try:
        with open(ptx[:-len(".ptx")] + ".fusec") as f:
            return f.read().strip()
    except OSError:
        return ""


_GRAPH_G = re.compile(r"^graph g(?=[(<\s])")


def _named(fg_text):
    """A region's text (graph `g`, _region_text) with the graph named after
    the text's hash, g_<12 hex digits>: equal regions still share one name
    and one cache entry, and the kernels of different regions have different
    names (fg0_g_<hash>_k0, ...), so that a profile of a model tells them
    apart. A text already named (a pending file being filled) is kept."""
    if not _GRAPH_G.match(fg_text):
        return fg_text
    h = hashlib.sha256(fg_text.encode()).hexdigest()[:12]
    return _GRAPH_G.sub("graph g_" + h, fg_text, count=1)


def _write_atomic(path, text):
    """Writes `path` whole or not at all: several processes (the ranks of a
    distributed run) may record the same region at once."""
    tmp = "%s.%d.%d.tmp" % (path, os.getpid(), threading.get_ident())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _region_text(r):
    """The region's graph renamed `g`, so equal regions share a cache entry."""
    head, rest = r.fg.split("(", 1)
    return "graph g" + head[len("graph " + r.gname):] + "(" + rest


def _source(a):
    """Where a region's input comes from, for the copy counts: the op that
    makes it in the graph (a getitem's: the op it picks from), `input` for
    the graph's inputs, `region` for another region's result."""
    import operator

    if not hasattr(a, "op"):
        return "constant"
    if a.op == "placeholder":
        return "input"
    if a.target is operator.getitem and hasattr(a.args[0], "op"):
        a = a.args[0]
    if a.op == "call_module" or getattr(a.target, "fusec_region", None):
        return "region"
    return _export.op_name(a).replace("aten.", "").replace(".default", "")


class _RegionIO:
    """What a region's call does around fusec, with the counts (Stats):
    each tensor input is passed as it is when its strides are those of the
    layout its .fg parameter was compiled with (row-major, or the
    `layout=[...]` of a dense permuted example), else copied into that
    layout; each result is laid out as the traced graph had it (a copy where
    fusec's dim order differs: export.restride).

    The checks are made cheap for the hundreds of calls a training step
    makes (issue 21): a static region's inputs are passed when their
    strides, all read at once, are those of the last call whose inputs all
    matched (their shapes are the compiled ones: the loader refuses others);
    a symbolic region's (row-major only) when each is_contiguous, tested in
    C through map; otherwise each input is checked and copied on its own.
    What the results need (nothing, a permute back, a copy) is decided once
    per layout key (their strides, and shapes for a symbolic region) and
    remembered."""

    def __init__(self, r, node, stats):
        import torch

        self.r, self.stats = r, stats
        args = [a for a, t in zip(node.args, r.tensor_in) if t] if node is not None else []
        n_in = self.n_in = sum(r.tensor_in)
        # the positions of the .fg's tensor parameters among the call's arguments
        # (None: every argument is one)
        self.sel = None if all(r.tensor_in) else [i for i, t in enumerate(r.tensor_in) if t]
        self.src_in = [_source(a) for a in args] if len(args) == n_in else ["?"] * n_in
        # inputs the trace has on the CPU where others are on a device (a
        # 0-dim tensor PyTorch's ops take beside device tensors, as a
        # dynamic graph's size-derived scalars): moved to the others' device
        # at each call (the loader takes one device a module), with
        # self.dev_of the input whose device that is
        vals = [a.meta.get("val") if hasattr(a, "meta") else None for a in args] if len(args) == n_in else []
        devs = [getattr(getattr(v, "device", None), "type", None) for v in vals]
        self.dev_of = next((i for i, d in enumerate(devs) if d not in (None, "cpu")), None)
        self.to_dev = [i for i, d in enumerate(devs) if d == "cpu"] if self.dev_of is not None else []
        layouts = getattr(r, "in_layouts", None) or [None] * n_in
        self.layouts = [tuple(x) if x else None for x in layouts]
        self.laid = [i for i, o in enumerate(self.layouts) if o is not None]
        self.inv = [[o.index(i) for i in range(len(o))] if o else None for o in self.layouts]
        self.covers = getattr(r, "in_covers", None) or [None] * n_in
        self.covered = [i for i, c in enumerate(self.covers) if c is not None]
        self.want = {}  # (input index, shape) -> the compiled layout's strides
        self.src_out = getattr(r, "out_sources", None) or ["?"] * len(r.out_orders)
        perms = getattr(r, "out_perms", None) or [None] * len(r.out_orders)
        self.out_inv = [tuple(p.index(i) for i in range(len(p))) if p else None for p in perms]
        self.out_orders = list(r.out_orders)
        # the results that may need a permute or a copy (a traced order of 2 or more dims)
        self.out_work = [k for k, (o, inv) in enumerate(zip(self.out_orders, self.out_inv))
                         if inv is not None or (o is not None and len(o) >= 2)]
        # `graph g<T>(...)`: symbolic sizes; a static region's inputs and results have the
        # shapes it was compiled for (the loader refuses others), so strides alone tell layouts apart
        self.static = "<" not in r.fg.split("(", 1)[0]
        self.in_ok = None  # static: the strides of every input of the last call that passed them all
        self.out_acts = {}  # the results' layout key -> [(result, inverse perm or None, copied)]
        self._contig = torch.Tensor.is_contiguous
        self._stride = torch.Tensor.stride
        self._tensor = torch.Tensor

    def inputs(self, args):
        """The tensor inputs of a call, each in its compiled layout (the
        counts updated)."""
        ins = args if self.sel is None else [args[i] for i in self.sel]
        st = self.stats
        st.calls += 1
        if self.to_dev:
            ins = self._moved(list(ins))
        key = None
        try:
            if self.static:  # the strides of every input at once, against the last call's
                key = tuple(map(self._stride, ins))
                if key == self.in_ok:
                    st.inputs_passed += self.n_in
                    if self.covered:
                        ins = list(ins)
                        for i in self.covered:
                            ins[i] = self._window(i, ins[i])
                    return ins
            elif all(map(self._contig, ins)):  # symbolic: row-major inputs only (no layouts)
                st.inputs_passed += self.n_in
                return ins
        except TypeError:  # not a tensor: the loop below passes it as it is
            key = None
        ins, passed = self._inputs_checked(list(ins))
        if passed and key is not None:
            self.in_ok = key
        return ins

    def _moved(self, ins):
        """The inputs with those on the CPU (self.to_dev) copied to the
        device of input self.dev_of (counted)."""
        dev = ins[self.dev_of].device
        for i in self.to_dev:
            if ins[i].device != dev:
                ins[i] = ins[i].to(dev, non_blocking=True)
                self.stats.inputs_copied["%s (on the CPU)" % self.src_in[i]] += 1
        return ins

    def _inputs_checked(self, ins):
        """(inputs, whether all were passed as they are): each input checked
        on its own, copied into its compiled layout where it is not in it."""
        st = self.stats
        passed = True
        for i, a in enumerate(ins):
            if not isinstance(a, self._tensor):
                continue
            order = self.layouts[i]
            c = self.covers[i]
            if c is not None:
                if _export.strides_match(a.stride(), tuple(a.shape), c.strides) and tuple(a.shape) == c.size:
                    st.inputs_passed += 1
                    ins[i] = self._window(i, a)
                    continue
                ins[i] = self._window_copy(i, a, "not the traced window's strides")
                passed = False
                continue
            if order is None:
                if a.is_contiguous():
                    st.inputs_passed += 1
                    continue
                ins[i] = a.contiguous()
            else:
                shape = tuple(a.shape)
                want = self.want.get((i, shape))
                if want is None:
                    want = self.want[(i, shape)] = _export.dense_strides(shape, order)
                if _export.strides_match(a.stride(), shape, want):
                    st.inputs_passed += 1
                    continue
                t = a.new_empty([shape[d] for d in order]).permute(self.inv[i])
                t.copy_(a)
                ins[i] = t
            passed = False
            why = "another dim order" if _export.dense_layout(a) is not None or a.is_contiguous() \
                else "not dense"
            st.inputs_copied["%s (%s)" % (self.src_in[i], why)] += 1
        return ins, passed

    def _window(self, i, a):
        """Input i, a window of a dense tensor (export.Cover), as that tensor:
        a view of a's own storage; a copy into a fresh one where that
        storage does not hold the whole tensor."""
        c = self.covers[i]
        try:
            return a.as_strided(c.shape, c.stride, a.storage_offset() - c.rel)
        except RuntimeError:
            return self._window_copy(i, a, "window out of its storage")

    def _window_copy(self, i, a, why):
        c = self.covers[i]
        t = a.new_empty(c.shape)
        t.as_strided(c.size, c.strides, c.rel).copy_(a)
        self.stats.inputs_copied["%s (%s)" % (self.src_in[i], why)] += 1
        return t

    def outputs(self, outs):
        """The results as the traced graph lays them out: a result the
        region returns permuted into the traced dim order (export.result_perm)
        is permuted back (a view with the traced strides); one whose dim
        order still differs is copied (export.restride; counted). What each
        result needs is decided once per layout key (the results' strides,
        and shapes for a symbolic region)."""
        key = tuple(map(self._stride, outs))
        if not self.static:
            key = (key, tuple(o.shape for o in outs))
        acts = self.out_acts.get(key)
        if acts is None:
            acts = self.out_acts[key] = self._out_actions(outs)
        if not acts:
            return outs
        outs = list(outs)
        for k, inv, copy in acts:
            o = outs[k]
            if inv is not None:
                o = o.t() if inv == (1, 0) else o.permute(*inv)  # .t(): the cheapest view call
            if copy:
                self.stats.results_restrided[self.src_out[k]] += 1
                order = self.out_orders[k]
                t = o.new_empty([o.shape[i] for i in order]).permute([order.index(i) for i in range(o.dim())])
                t.copy_(o)
                o = t
            outs[k] = o
        return outs

    def _out_actions(self, outs):
        """[(result, inverse perm or None, copied)] of the results that need
        a permute back or a copy (export.restride's test)."""
        acts = []
        for k in self.out_work:
            o, inv, order = outs[k], self.out_inv[k], self.out_orders[k]
            if inv is not None:
                o = o.permute(*inv)
            copy = order is not None and o.dim() >= 2 and o.numel() > 1 and _export._dim_order(o) != order
            if inv is not None or copy:
                acts.append((k, inv, copy))
        return acts


def _region_call(name, call):
    """`call` named for the region `name`, as the graph module's code calls
    it (a call_function node: no nn.Module call around it)."""
    call.__name__ = call.__qualname__ = "fusec_" + name
    call.fusec_region = name
    return call


def _install(gm, node, call):
    """Puts `call` in place of a region's submodule call in gm's graph: a
    plain function call (an nn.Module's __call__ costs microseconds, and a
    step makes hundreds of region calls)."""
    name = node.target
    node.op, node.target = "call_function", call
    gm.delete_submodule(name)


def _loader_call(ptx, r, io):
    from . import load

    with _lock:
        m = _modules.get(ptx)
        if m is None:
            m = _modules[ptx] = load(ptx)
    g = m.graph(m.graphs()[0])  # the region's one graph (compile_region names it)
    inputs, outputs = io.inputs, io.outputs
    tuple_out = r.tuple_out
    plain_out = not io.out_work  # no result needs a permute or a copy
    checked = False

    def call(*args):
        nonlocal checked
        out = g(*inputs(args))
        if not checked:
            got = [o.dtype for o in (out if isinstance(out, tuple) else (out,))]
            if got != list(r.out_dtypes):
                raise RuntimeError("fusec.backend: region %s returns %s where torch expects %s (a bug in the "
                                   "mapping: please report it with the region's .fg)" % (r.name, got, r.out_dtypes))
            checked = True
        if plain_out:
            if isinstance(out, tuple):
                return out if tuple_out else out[0]
            return (out,) if tuple_out else out
        outs = outputs(out if isinstance(out, tuple) else (out,))
        return tuple(outs) if tuple_out else outs[0]

    return _region_call(r.name, call)


def _specialized_call(r, pt, node, stats, runner, fusec, fgrun, work, layouts=False):
    """The call of a region written at each call's sizes (fusec.specialize),
    PyTorch running the region's own nodes where there is no artifact."""
    sub = pt.gm.get_submodule(r.name)  # kept: _install drops it from the graph module

    def load(ptx, rs):
        io = _RegionIO(rs, node, stats)
        return _fgrun_call(rs, fgrun, work, io, ptx) if runner == "fgrun" else _loader_call(ptx, rs, io)

    sp = _specialize.Specialized(r, pt.syms, sub, load, lambda rs: compile_region(_region_text(rs), fusec, stats),
                                 stats, _log, layouts)

    def call(*args):
        return sp(*args)

    return _region_call(r.name, call)


_PLAN_RESULT = None


def plan_result_strides(ptx):
    """{result index: strides} of the static results of an artifact's plan
    (the `// result` lines, docs/artifact.md): the strides libfgload gives
    each result (row-major where written; a view's own)."""
    import re

    global _PLAN_RESULT
    if _PLAN_RESULT is None:
        _PLAN_RESULT = re.compile(r"^// result (\d+) \S+ \[[^\]]*\] strides \[([0-9, ]*)\]", re.M)
    with open(ptx) as f:
        text = f.read()
    out = {}
    for m in _PLAN_RESULT.finditer(text):
        out.setdefault(int(m.group(1)), tuple(int(x) for x in m.group(2).split(",") if x.strip()))
    return out


def _fgrun_call(r, fgrun, work, io, ptx):
    fg = os.path.join(work, r.gname + ".fg")
    with open(fg, "w") as f:
        f.write(r.fg)
    strides = plan_result_strides(ptx) if ptx else {}

    def call(*args):
        import torch

        dev = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
        ins = io.inputs(args)  # fgrun reads them in logical order; the counts are the loader's
        outs = _export._fgrun_call(fgrun, fg, r.gname, ins, r.out_dtypes, work)
        laid = []
        for k, o in enumerate(outs):  # the strides libfgload would give each result
            st = strides.get(k)
            if st is not None and len(st) == o.dim() and 0 not in st and tuple(o.stride()) != st:
                t = torch.empty_strided(o.shape, st, dtype=o.dtype)
                t.copy_(o)
                o = t
            laid.append(o.to(dev))
        outs = io.outputs(laid)
        return tuple(outs) if r.tuple_out else outs[0]

    return _region_call(r.name, call)


def sink_sums_mode():
    """FUSEC_BACKEND_SINK_SUMS: "rows" (the default) a gradient's sum moves
    to its input's region (export._sink_sums) where that region row-reduces
    values of its size, "1" wherever, "0" never (docs/pytorch.md)."""
    v = os.environ.get("FUSEC_BACKEND_SINK_SUMS", "rows")
    return {"1": True, "rows": "rows"}.get(v, False)


def compile_aten_graph(gm, example_inputs, runner="loader", stats=None, fusec=None):
    """Partitions an ATen graph (AOTAutograd's forward or backward) and puts a
    fusec call in place of each region fusec compiles. Returns the graph
    module (a callable)."""
    stats = stats or Stats()
    stats.graphs += 1
    layouts = os.environ.get("FUSEC_BACKEND_LAYOUTS", "1") != "0"
    if layouts and os.environ.get("FUSEC_BACKEND_COVERS", "1") != "0":
        layouts = "covers"
    # FUSEC_BACKEND_SPECIALIZE=0: a region whose symbolic sizes fusec's code
    # generator does not take stays in PyTorch, rather than written at each
    # call's sizes (fusec.specialize)
    spec = runner != "prepare" and os.environ.get("FUSEC_BACKEND_SPECIALIZE", "1") != "0"
    pt = _export.partition(gm, prefix="r", static_fallback="specialize" if spec else False, canonical=True,
                           layouts=layouts, sink_sums=sink_sums_mode())
    stats.sunk += pt.sunk
    _export._out_meta(pt)
    nodes = {n.target: n for n in pt.gm.graph.nodes if n.op == "call_module"}
    if pt.support.left:
        _log.info("fusec.backend: %s", pt.report())
    for op, d in pt.left_summary().items():
        stats.left[op] += d["count"]
        if not d["by_design"]:
            stats.unsupported[op] += d["count"]
    work = tempfile.mkdtemp(prefix="fusec-backend-") if runner == "fgrun" else None
    fgrun = _export.find_tool("fgrun") if runner == "fgrun" else None
    calls = []  # (node, the region's call)
    for r in pt.regions.values():
        if r.note:  # symbolic sizes fusec's code generator does not take
            try:
                if not spec:
                    raise _specialize.Unsolvable("FUSEC_BACKEND_SPECIALIZE=0")
                call = _specialized_call(r, pt, nodes[r.name], stats, runner, fusec, fgrun, work, layouts)
            except _specialize.Unsolvable as ex:  # a graph that runs at every size: PyTorch runs it
                stats.refused += 1
                _log.warning("fusec.backend: region %s stays in PyTorch: %s (%s)", r.name, r.note, ex)
                continue
            stats.regions += 1
            stats.specialized += 1
            stats.region_ops += len(r.ops)
            calls.append((nodes[r.name], call))
            continue
        missing = stats.missing
        ptx, why = compile_region(_region_text(r), fusec, stats)
        if ptx is None:
            stats.refused += stats.missing == missing
            _log.warning("fusec.backend: region %s stays in PyTorch; %s:\n%s", r.name,
                         "fusec refused it" if stats.missing == missing else "missing", why)
            continue
        stats.regions += 1
        stats.region_ops += len(r.ops)
        if runner == "prepare":  # compiled into the cache; PyTorch runs the region here
            continue
        io = _RegionIO(r, nodes.get(r.name), stats)
        call = _fgrun_call(r, fgrun, work, io, ptx) if runner == "fgrun" else _loader_call(ptx, r, io)
        calls.append((nodes[r.name], call))
    for node, call in calls:  # after every _RegionIO: _source reads the region nodes
        _install(pt.gm, node, call)
    pt.gm.recompile()
    pt.gm.fusec_partitioned = pt
    return pt.gm


def _partition_fn():
    """How AOTAutograd splits a training graph into forward and backward:
    by default as Inductor does (min_cut_rematerialization_partition: cheap
    pointwise values the backward needs are recomputed there, not saved, so
    a cross-entropy saves its logsumexp, not [tokens, vocab] log-probabilities);
    FUSEC_BACKEND_PARTITION=default saves whatever the forward computed
    (AOTAutograd's default_partition)."""
    from functorch.compile import default_partition, min_cut_rematerialization_partition

    how = os.environ.get("FUSEC_BACKEND_PARTITION", "min_cut")
    if how not in ("min_cut", "default"):
        raise ValueError("FUSEC_BACKEND_PARTITION: expected min_cut or default, got %r" % how)
    return min_cut_rematerialization_partition if how == "min_cut" else default_partition


def make_backend(runner="loader", stats=None, fusec=None):
    """A torch.compile backend. runner: "loader" (libfgload on the GPU),
    "fgrun" (fusec's CPU interpreter, for tests) or "prepare" (compile the
    regions into the cache, PyTorch runs them). `stats` (a Stats) counts
    graphs, regions, compilations and cache hits."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    stats = stats if stats is not None else Stats()

    def fw(gm, example_inputs):
        return make_boxed_func(compile_aten_graph(gm, example_inputs, runner, stats, fusec))

    aot = aot_autograd(fw_compiler=fw, bw_compiler=fw, partition_fn=_partition_fn(),
                       decompositions=_export.decomposition_table())

    def backend(gm, example_inputs, **kwargs):
        if os.environ.get("FUSEC_BACKEND_GQA", "1") != "0":
            stats.gqa += _gqa.rewrite(gm)
        return aot(gm, example_inputs, **kwargs)

    backend.stats = stats
    return backend


STATS = Stats()


def _register():
    from torch._dynamo import list_backends, register_backend

    if "fusec" in list_backends(exclude_tags=()):
        return

    def fusec(gm, example_inputs, **kwargs):
        return make_backend("loader", STATS)(gm, example_inputs, **kwargs)

    register_backend(name="fusec")(fusec)


_register()


def fill(pending, directory=None):
    """Compiles every region .fg of `pending` (written where fusec was
    missing, FUSEC_BACKEND_PENDING) into the cache; prints what fusec
    refused. Returns the number compiled."""
    n = 0
    for name in sorted(os.listdir(pending)):
        if not name.endswith(".fg"):
            continue
        with open(os.path.join(pending, name)) as f:
            text = f.read()
        arch = ""  # the arch the running process asked for (_arch_line)
        if text.startswith("# fusec --arch "):
            line, text = text.split("\n", 1)
            arch = line.split()[-1]
        path, why = compile_region(text, directory=directory, arch=arch)
        if path:
            n += 1
        else:
            print("fusec.backend fill: %s refused: %s" % (name, why))
    return n


if __name__ == "__main__":
    import sys

    if len(sys.argv) >= 3 and sys.argv[1] == "fill":
        print("fusec.backend fill: %d regions compiled into %s" % (fill(sys.argv[2]), cache_dir()))
    else:
        print("usage: python -m fusec.backend fill PENDING_DIR  (into $FUSEC_BACKEND_CACHE)", file=sys.stderr)
        sys.exit(2)
