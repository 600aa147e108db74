#!/usr/bin/env python3
"""The host time the torch.compile backend (python/fusec/backend.py) spends
around each region call, apart from the fusec Graph call itself (issue 21).

A training step of a model (examples/models: GPT-2 or the Llama-style
stack, tiny or small; bf16 autocast) is compiled with the backend; the real
arguments of every region call of the forward and backward graphs are
recorded, then each region's stand-in in the graph module (what the graph's
generated code calls) is timed against the Graph call alone on the
arguments the stand-in hands it. Their difference is the wrapper's overhead:
the stand-in's call, the inputs' layout checks, the dtype check, the
results' permutes and restrides, the counts.

  --runner stub (default; any machine, no fusec binary needed): the regions
      are not compiled; each Graph is a stub that returns, from its second
      call on, the results of its first (computed by the region's FX
      module, laid out as libfgload would give them). The stub's own time
      (a Python call) is measured and subtracted too.
  --runner loader (a GPU machine; FGLOAD_LIBRARY as for train_step.py):
      the real artifacts from $FUSEC_BACKEND_CACHE, CUDA tensors; fill the
      cache first with --prepare here, with the same model and size flags.

    python3 python/tests/bench_backend_overhead.py [--model gpt2] [--size tiny]
    FUSEC_BACKEND_CACHE=DIR python3 python/tests/bench_backend_overhead.py --prepare
    FUSEC_BACKEND_CACHE=DIR FGLOAD_LIBRARY=... python3 python/tests/bench_backend_overhead.py --runner loader

Prints the median over regions and the total over a step of (stand-in call)
- (Graph call), in microseconds, and writes them as JSON with --out.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "models"))

import torch  # noqa: E402

import fusec  # noqa: E402
import fusec.backend as fb  # noqa: E402
from fusec import export as fe  # noqa: E402


def model_of(name, size):
    if name == "gpt2":
        from gpt2 import GPT, GPTConfig

        return GPT, (GPTConfig.small() if size == "small" else GPTConfig.tiny())
    from llama import Llama, LlamaConfig

    return Llama, (LlamaConfig.small() if size == "small" else LlamaConfig.tiny())


class _StubGraph:
    """A Graph that returns, from its second call on, its first call's
    results: the region's FX module run on the inputs, each result laid out
    as libfgload gives it (row-major, in the region's result permutation)."""

    def __init__(self, sub, perms, covers=None):
        self.sub, self.perms, self.outs = sub, perms, None
        self.covers = covers  # export.Cover of each tensor input, or None

    def __call__(self, *ins):
        if self.outs is None:
            if self.covers and any(self.covers):  # the region's own input: the window of its cover
                ins = [t.as_strided(c.size, c.strides, c.rel) if c else t for t, c in zip(ins, self.covers)]
            with torch.no_grad():
                got = self.sub(*ins)
            got = list(got) if isinstance(got, (tuple, list)) else [got]
            self.outs = tuple(o.permute(p).contiguous() if p else o.contiguous()
                              for o, p in zip(got, self.perms or [None] * len(got)))
            if len(self.outs) == 1:
                self.outs = self.outs[0]
        return self.outs


def install_stubs():
    """Region compilation and loading replaced by stubs: compile_region
    returns a name per region text, fusec.load a module whose graph `g` is
    a _StubGraph of that region's FX module."""
    regions = {}  # stub path -> (partitioned, region)
    part = fe.partition

    def partition(*a, **k):
        pt = part(*a, **k)
        for r in pt.regions.values():
            regions["stub:" + fb._region_text(r)] = (pt, r)
        return pt

    def compile_region(text, fusec=None, stats=None, directory=None):
        if stats:
            stats.cache_hits += 1
        return "stub:" + text, None

    class _Mod:
        def __init__(self, path):
            pt, r = regions[path]
            self.g = _StubGraph(pt.gm.get_submodule(r.name), getattr(r, "out_perms", None),
                                getattr(r, "in_covers", None))

        def graphs(self):
            return [self.g]

        def graph(self, name):
            return self.g

    fe.partition = partition
    fb.compile_region = compile_region
    fusec.load = _Mod


class Recorder:
    """The graph modules the backend builds, each with the real arguments
    of its first call."""

    def __init__(self):
        self.graphs = []  # [gm, args or None]
        inner = fb.compile_aten_graph

        def compile_aten_graph(gm, example_inputs, *a, **k):
            out = inner(gm, example_inputs, *a, **k)
            entry = [out, None]
            self.graphs.append(entry)

            def run(*args):
                if entry[1] is None:
                    entry[1] = tuple(x.detach().clone() if isinstance(x, torch.Tensor) else x for x in args)
                return out(*args)

            return run

        fb.compile_aten_graph = compile_aten_graph


def region_nodes(gm):
    """(node, stand-in callable) of each region call of a backend graph module."""
    regions = gm.fusec_partitioned.regions
    for n in gm.graph.nodes:
        if n.op == "call_module" and n.target in regions:
            yield n, getattr(gm, n.target)
        elif n.op == "call_function" and getattr(n.target, "fusec_region", None) in regions:
            yield n, n.target


def region_args(gm, args):
    """{node: its args} of the region calls of one run of gm on args."""
    want = dict(region_nodes(gm))
    seen = {}

    class Rec(torch.fx.Interpreter):
        def run_node(self, n):
            if n in want:
                a, kw = self.fetch_args_kwargs_from_env(n)
                seen[n] = a
            return super().run_node(n)

    with torch.no_grad():
        Rec(gm).run(*args)
    return want, seen


def best_us(fn, reps, rounds, sync):
    """The best over `rounds` of the mean time of `reps` calls, in us."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / reps * 1e6)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=("gpt2", "llama"), default="gpt2")
    ap.add_argument("--size", choices=("tiny", "small"), default="tiny")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=None, help="default: the config's block size")
    ap.add_argument("--runner", choices=("stub", "loader"), default="stub")
    ap.add_argument("--prepare", action="store_true", help="fill $FUSEC_BACKEND_CACHE for --runner loader")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    cls, cfg = model_of(args.model, args.size)
    seq = args.seq or cfg.block_size
    device = "cuda" if args.runner == "loader" else "cpu"
    runner = "prepare" if args.prepare else "loader"
    if args.runner == "stub" and not args.prepare:
        install_stubs()
    rec = Recorder()
    torch.manual_seed(0)
    model = cls(cfg).to(device)
    stats = fb.Stats()
    cm = torch.compile(model, backend=fb.make_backend(runner, stats), dynamic=False)
    x = torch.randint(0, cfg.vocab_size, (args.batch, seq), device=device)
    y = torch.randint(0, cfg.vocab_size, (args.batch, seq), device=device)
    with torch.autocast(device, dtype=torch.bfloat16):
        loss = cm(x, y)
    loss.backward()
    if args.prepare:
        print("prepared: %d regions (%d compiled, %d cached, %d refused) in %s" % (
            stats.regions, stats.compiled, stats.cache_hits, stats.refused, fb.cache_dir()))
        return 0
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    rows = []
    for gi, (gm, gargs) in enumerate(rec.graphs):
        if gargs is None:
            continue
        want, seen = region_args(gm, gargs)
        for n, standin in want.items():
            a = seen.get(n)
            if a is None:
                continue
            io_ins = []
            g = _graph_of(standin, io_ins, a)
            c0 = stats.copies()
            call_us = best_us(lambda: standin(*a), args.reps, args.rounds, sync)
            c1 = stats.copies()
            g_us = best_us(lambda: g(*io_ins), args.reps, args.rounds, sync)
            n_calls = c1["calls"] - c0["calls"]
            copies = (sum(c1["inputs_copied"].values()) - sum(c0["inputs_copied"].values())
                      + sum(c1["results_restrided"].values()) - sum(c0["results_restrided"].values()))
            rows.append({"graph": gi, "region": n.name, "inputs": len(a), "call_us": call_us, "graph_call_us": g_us,
                         "overhead_us": call_us - g_us, "copies_per_call": copies / max(n_calls, 1)})
    ov = [r["overhead_us"] for r in rows]
    ov_nc = [r["overhead_us"] for r in rows if not r["copies_per_call"]]
    res = {"model": args.model, "size": args.size, "runner": args.runner, "device": device, "regions": len(rows),
           "overhead_us_median": statistics.median(ov), "overhead_us_mean": statistics.fmean(ov),
           "overhead_us_step": sum(ov), "call_us_step": sum(r["call_us"] for r in rows),
           "graph_call_us_step": sum(r["graph_call_us"] for r in rows),
           "regions_without_copies": len(ov_nc),
           "overhead_us_median_without_copies": statistics.median(ov_nc) if ov_nc else None, "rows": rows}
    print("%s %s, runner %s: %d region calls a step; wrapper overhead a call: median %.2f us, mean %.2f us; "
          "a step: %.0f us overhead of %.0f us in region calls (Graph calls %.0f us)" % (
              args.model, args.size, args.runner, len(rows), res["overhead_us_median"], res["overhead_us_mean"],
              res["overhead_us_step"], res["call_us_step"], res["graph_call_us_step"]))
    if ov_nc and len(ov_nc) < len(rows):
        print("  %d region calls copy an input or a result (their copies are in the overhead); the other %d: "
              "median %.2f us" % (len(rows) - len(ov_nc), len(ov_nc), res["overhead_us_median_without_copies"]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


def _graph_of(standin, ins_out, args):
    """The Graph the stand-in calls, and (into ins_out) the inputs it hands
    it for `args`: found by wrapping the Graph's call once."""
    found = []
    for obj in _closure_objects(standin):
        if isinstance(obj, _StubGraph) or type(obj).__name__ == "Graph":
            found.append(obj)
    if len(found) != 1:
        raise RuntimeError("bench: the region's Graph not found in its stand-in (%d candidates)" % len(found))
    g = found[0]
    cls = type(g)
    orig, own = cls.__call__, "__call__" in cls.__dict__  # fusec.Graph's is its C base's

    def spy(self, *ins):
        if self is g and not ins_out:
            ins_out.extend(ins)
        return orig(self, *ins)

    cls.__call__ = spy
    try:
        standin(*args)
    finally:
        if own:
            cls.__call__ = orig
        else:
            del cls.__call__
    return g


def _closure_objects(fn, depth=0):
    """The objects reachable from a callable's closures (and an nn.Module's
    forward's), a few levels deep."""
    if depth > 4:
        return []
    out = []
    f = getattr(fn, "forward", None) if isinstance(fn, torch.nn.Module) else fn
    f = getattr(f, "__func__", f)
    for c in getattr(f, "__closure__", None) or ():
        try:
            v = c.cell_contents
        except ValueError:
            continue
        out.append(v)
        if callable(v) and not isinstance(v, type):
            out.extend(_closure_objects(v, depth + 1))
    return out


if __name__ == "__main__":
    sys.exit(main())
