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
import subprocess
import tempfile
import threading

from . import export as _export

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

    def __repr__(self):
        return "<fusec.backend.Stats graphs=%d regions=%d compiled=%d cache_hits=%d refused=%d missing=%d>" % (
            self.graphs, self.regions, self.compiled, self.cache_hits, self.refused, self.missing)

    def as_dict(self):
        return {"graphs": self.graphs, "regions": self.regions, "compiled": self.compiled,
                "cache_hits": self.cache_hits, "refused": self.refused, "missing": self.missing,
                "region_ops": self.region_ops, "left_to_torch": dict(self.left.most_common()),
                "unsupported": dict(self.unsupported.most_common())}


def compile_region(fg_text, fusec=None, stats=None, directory=None):
    """(path of the artifact, None) for one region's .fg text (graph `g`),
    compiled once into the cache; (None, fusec's message) when fusec refuses
    or there is no fusec binary (stats.missing) and the cache lacks it."""
    h = hashlib.sha256(fg_text.encode()).hexdigest()[:32]
    d = directory or cache_dir()
    ptx = os.path.join(d, h + ".ptx")
    if os.path.exists(ptx):
        if stats:
            stats.cache_hits += 1
        return ptx, None
    try:
        if os.environ.get("FUSEC_BACKEND_COMPILE") == "0":  # behave as a machine without fusec (tests)
            raise FileNotFoundError("fusec.backend: compiling is off (FUSEC_BACKEND_COMPILE=0)")
        fusec = fusec or _export.find_tool("fusec")
    except FileNotFoundError as err:  # a machine that only runs: the cache must hold every region
        if stats:
            stats.missing += 1
        pending = os.environ.get("FUSEC_BACKEND_PENDING")
        if pending:  # for a machine with fusec to compile: `python -m fusec.backend fill`
            os.makedirs(pending, exist_ok=True)
            _write_atomic(os.path.join(pending, h + ".fg"), fg_text)
        return None, "%s (and the region is not in the cache %s)" % (err, d)
    with tempfile.TemporaryDirectory(dir=d) as tmp:
        fg = os.path.join(tmp, "region.fg")
        with open(fg, "w") as f:
            f.write(fg_text)
        out = os.path.join(tmp, "region.ptx")
        r = subprocess.run([fusec, fg, "-o", out], capture_output=True, text=True)
        if r.returncode != 0:
            return None, r.stderr.strip()
        os.replace(out, ptx)  # atomic: a concurrent process sees the whole artifact or none
        os.replace(fg, os.path.join(d, h + ".fg"))
    if stats:
        stats.compiled += 1
    return ptx, None


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


def _loader_call(ptx, r):
    import torch

    from . import load

    with _lock:
        m = _modules.get(ptx)
        if m is None:
            m = _modules[ptx] = load(ptx)
    g = m.graph("g")
    state = {"checked": False}

    def call(*args):
        ins = [a.contiguous() if isinstance(a, torch.Tensor) else a for a, t in zip(args, r.tensor_in) if t]
        out = g(*ins)
        outs = out if isinstance(out, tuple) else (out,)
        if not state["checked"]:
            got = [o.dtype for o in outs]
            if got != list(r.out_dtypes):
                raise RuntimeError("fusec.backend: region %s returns %s where torch expects %s (a bug in the "
                                   "mapping: please report it with the region's .fg)" % (r.name, got, r.out_dtypes))
            state["checked"] = True
        outs = _export.restride(outs, r.out_orders)
        return tuple(outs) if r.tuple_out else outs[0]

    return call


def _fgrun_call(r, fgrun, work):
    fg = os.path.join(work, r.gname + ".fg")
    with open(fg, "w") as f:
        f.write(r.fg)

    def call(*args):
        import torch

        dev = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
        outs = _export._fgrun_region(fgrun, fg, r, work, args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        outs = tuple(o.to(dev) for o in outs)
        return outs if r.tuple_out else outs[0]

    return call


def compile_aten_graph(gm, example_inputs, runner="loader", stats=None, fusec=None):
    """Partitions an ATen graph (AOTAutograd's forward or backward) and puts a
    fusec call in place of each region fusec compiles. Returns the graph
    module (a callable)."""
    stats = stats or Stats()
    stats.graphs += 1
    pt = _export.partition(gm, prefix="r", static_fallback=False, canonical=True)
    _export._out_meta(pt)
    if pt.support.left:
        _log.info("fusec.backend: %s", pt.report())
    for op, d in pt.left_summary().items():
        stats.left[op] += d["count"]
        if not d["by_design"]:
            stats.unsupported[op] += d["count"]
    work = tempfile.mkdtemp(prefix="fusec-backend-") if runner == "fgrun" else None
    fgrun = _export.find_tool("fgrun") if runner == "fgrun" else None
    for r in pt.regions.values():
        if r.note:  # symbolic sizes fusec can't take, in a graph that runs at every size: PyTorch runs it
            stats.refused += 1
            _log.warning("fusec.backend: region %s stays in PyTorch: %s", r.name, r.note)
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
        call = _fgrun_call(r, fgrun, work) if runner == "fgrun" else _loader_call(ptx, r)
        setattr(pt.gm, r.name, _export._region_module(call))
    pt.gm.recompile()
    pt.gm.fusec_partitioned = pt
    return pt.gm


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

    backend = aot_autograd(fw_compiler=fw, bw_compiler=fw, decompositions=_export.decomposition_table())
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
        path, why = compile_region(text, directory=directory)
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
