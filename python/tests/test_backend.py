#!/usr/bin/env python3
"""CPU tests of the torch.compile backend (python/fusec/backend.py): the
graphs AOTAutograd hands over (forward and backward) are partitioned, each
region compiled by fusec into the on-disk cache, and run here through fusec's
interpreter (make_backend(runner="fgrun")) against eager; a second backend
on the same cache compiles nothing; "fusec" is a registered backend name.
The GPU run (libfgload) is tests/gpu/python_backend.py.

Run: python3 python/tests/test_backend.py [-v]. Exit 77 (skipped) without
torch or the built tools.
"""
import os
import re
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("test_backend: torch is not installed; skipped")
    sys.exit(77)

from fusec import export as fe  # noqa: E402

try:
    fe.find_tool("fgrun"), fe.find_tool("fusec")
except FileNotFoundError as err:
    print("test_backend: %s; skipped" % err)
    sys.exit(77)

CACHE = os.environ["FUSEC_BACKEND_CACHE"] = tempfile.mkdtemp(prefix="fusec-backend-test-")
import fusec.backend as fb  # noqa: E402


sys.path.insert(0, HERE)
import fixtures  # noqa: E402  (the models the Python tests share)
from fixtures import Block  # noqa: E402


def MLP():
    return fixtures.MLP(d=32, h=64)


def close(a, b, tol=1e-5):
    return bool(((a - b).abs() <= tol * (1 + b.abs())).all())


class SpecializeTest(unittest.TestCase):
    """fusec.specialize's equations: the sizes of a region follow from its
    inputs' one unknown at a time, or the region is refused."""

    def test_solve(self):
        import sympy

        from fusec import specialize as sp

        b, t = sympy.symbols("s0 s1", integer=True, positive=True)
        x, y = torch.empty(3, 7, 4), torch.empty(21, 4)
        eqs = [(0, 1, t), (1, 0, b * t)]  # x: [B, T, 4] binds T; y: [B*T, 4] then gives B
        sp.check_solvable(eqs, {b, t})
        self.assertEqual(sp.solve(eqs, [x, y], {b, t}), {t: 7, b: 3})
        self.assertEqual(sp.solve([(0, None, 2 * b + 1)], [9], {b}), {b: 4})  # a scalar input
        with self.assertRaisesRegex(sp.Unsolvable, "s1"):
            sp.check_solvable([(1, 0, b * t)], {b, t})  # a product alone: two unknowns
        with self.assertRaisesRegex(sp.Unsolvable, "not 20"):  # the inputs disagree
            sp.solve([(0, 1, t), (1, 0, 3 * t)], [x, torch.empty(20, 4)], {t})
        with self.assertRaisesRegex(sp.Unsolvable, "solutions"):  # 2*T = 7: no integer T
            sp.solve([(0, 0, 2 * t)], [torch.empty(7)], {t})


class BackendTest(unittest.TestCase):
    def test_registered(self):
        from torch._dynamo import list_backends

        self.assertIn("fusec", list_backends(exclude_tags=()))

    def test_training_step_matches_eager(self):
        torch.manual_seed(0)
        m = MLP()
        be = fb.make_backend("fgrun")
        cm = torch.compile(m, backend=be, dynamic=False)
        x = torch.randn(6, 32, requires_grad=True)
        y = cm(x)
        y.square().sum().backward()
        got = [y.detach(), x.grad.clone()] + [p.grad.clone() for p in m.parameters()]
        x.grad = None
        m.zero_grad()
        y = m(x)
        y.square().sum().backward()
        ref = [y.detach(), x.grad] + [p.grad for p in m.parameters()]
        for i, (g, r) in enumerate(zip(got, ref)):
            self.assertTrue(close(g, r), "tensor %d: %s" % (i, (g - r).abs().max()))
        self.assertEqual(be.stats.graphs, 2)  # forward and backward
        self.assertGreaterEqual(be.stats.regions, 4)
        self.assertEqual(be.stats.refused, 0)
        # the same graphs again, as a second process would: nothing compiled
        torch._dynamo.reset()
        be2 = fb.make_backend("fgrun")
        torch.compile(MLP(), backend=be2, dynamic=False)(torch.randn(6, 32, requires_grad=True)).sum().backward()
        self.assertEqual(be2.stats.compiled, 0, be2.stats)
        self.assertEqual(be2.stats.cache_hits, be.stats.regions)

    def test_attention_block_training(self):
        """nanoGPT's block: the attention kernels stay whole in PyTorch (their
        core-ATen decomposition breaks the backward), the rest fuses."""
        torch._dynamo.reset()
        torch.manual_seed(0)
        m = Block(d=64, heads=2)
        be = fb.make_backend("fgrun")
        x = torch.randn(2, 16, 64, requires_grad=True)
        torch.compile(m, backend=be, dynamic=False)(x).square().mean().backward()
        got = [x.grad.clone()] + [p.grad.clone() for p in m.parameters()]
        x.grad = None
        m.zero_grad()
        m(x).square().mean().backward()
        for i, (g, r) in enumerate(zip(got, [x.grad] + [p.grad for p in m.parameters()])):
            self.assertLess(((g - r).norm() / r.norm()).item(), 1e-5, "gradient %d" % i)
        self.assertGreaterEqual(be.stats.regions, 8)

    def test_autocast_bf16_training(self):
        """bf16 autocast: the casts AOTAutograd hands over fuse with the rest."""
        torch._dynamo.reset()
        torch.manual_seed(6)
        m = Block(d=64, heads=2)
        be = fb.make_backend("fgrun")
        cm = torch.compile(m, backend=be, dynamic=False)
        x = torch.randn(2, 16, 64, requires_grad=True)
        res = []
        for f in (cm, m):
            x.grad = None
            m.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = f(x)
            y.float().square().mean().backward()
            res.append([y.detach().float(), x.grad.clone()] + [p.grad.clone() for p in m.parameters()])
        for i, (g, r) in enumerate(zip(*res)):
            self.assertLess(((g - r).norm() / r.norm()).item(), 1e-2, "tensor %d" % i)
        self.assertEqual(be.stats.refused, 0)
        self.assertGreaterEqual(be.stats.regions, 8)

    def test_in_place_ops_and_buffers(self):
        """In-place ops and a buffer updated in forward, as AOTAutograd
        functionalizes them: same outputs and the same buffer as eager."""

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("count", torch.zeros(8))
                self.fc = nn.Linear(8, 8)

            def forward(self, x):
                y = self.fc(x)
                y.mul_(2).add_(1)
                self.count.add_(y.detach().sum(0))
                y = torch.relu_(y)
                return y * y.sigmoid()

        torch._dynamo.reset()
        torch.manual_seed(7)
        m, ref = M(), M()
        ref.load_state_dict(m.state_dict())
        be = fb.make_backend("fgrun")
        cm = torch.compile(m, backend=be, dynamic=False)
        x = torch.randn(4, 8, requires_grad=True)
        for _ in range(2):
            self.assertTrue(close(cm(x), ref(x)))
            self.assertTrue(close(m.count, ref.count))
        self.assertGreaterEqual(be.stats.regions, 1)

    def test_dynamic_batch(self):
        """A second batch size makes Dynamo recompile with a symbolic size:
        regions over it are written with a size clause, and run at any size."""
        torch._dynamo.reset()
        torch.manual_seed(5)
        m = MLP()
        be = fb.make_backend("fgrun")
        cm = torch.compile(m, backend=be)
        with torch.no_grad():
            for n in (8, 16, 40):
                x = torch.randn(n, 32)
                self.assertTrue(close(cm(x), m(x)), "batch %d" % n)
        texts = [open(os.path.join(fb.cache_dir(), f)).read() for f in os.listdir(fb.cache_dir()) if f.endswith(".fg")]
        # the region's graph named after its text (backend._named)
        self.assertTrue(any(re.match(r"graph g_[0-9a-f]{12}<s", t) and ", 32]" in t for t in texts), texts)
        # training at two sizes: the backward's transposes of the symbolic dim
        # (fusec's code generator takes it as the leading dim only) are written
        # at each call's sizes (fusec.specialize)
        for n in (12, 20):
            x = torch.randn(n, 32, requires_grad=True)
            cm(x).square().sum().backward()
            got = x.grad.clone()
            x.grad = None
            m(x).square().sum().backward()
            self.assertTrue(close(got, x.grad), "batch %d" % n)
        self.assertEqual(be.stats.refused, 0, be.stats)

    def test_dynamic_batch_view(self):
        """A view whose shape takes the batch size from the graph
        (`sym_size(x, 0)`, an FX node in the region's shape argument) at a
        second batch size: the partitioner's static trial write once raised
        TypeError there (int() of a Node) and crashed the compile."""
        torch._dynamo.reset()
        be = fb.make_backend("fgrun")

        def f(x):
            return (x * 2).view(x.shape[0], 4, 2, 4).sum(-1).exp()

        cf = torch.compile(f, backend=be)
        for n in (2, 3, 5):
            x = torch.randn(n, 4, 8)
            self.assertTrue(close(cf(x), f(x)), "batch %d" % n)
        self.assertEqual(be.stats.refused, 0, be.stats)

    def _seq_model(self):
        torch.manual_seed(11)
        return nn.Sequential(nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 16))

    def _train_at(self, cm, m, sizes, what):
        for b, t in sizes:
            x = torch.randn(b, t, 16, requires_grad=True)
            torch._dynamo.mark_dynamic(x, 1)
            cm(x).square().sum().backward()
            got = x.grad.clone()
            x.grad = None
            m(x).square().sum().backward()
            self.assertTrue(close(got, x.grad, 1e-4), "%s at [%d, %d]" % (what, b, t))

    def test_dynamic_sequence_length_specialized(self):
        """A dynamic sequence length (dim 1: [B, T, C]) is not fusec's
        symbolic size (the leading dim only): such regions are written at
        each call's sizes (fusec.specialize) instead of left to PyTorch, the
        graph compiled once (no recompilation a size), one artifact a region
        and size, a repeated size reusing its call."""
        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()
        m = self._seq_model()
        be = fb.make_backend("fgrun")
        cm = torch.compile(m, backend=be)
        self._train_at(cm, m, [(2, 5), (2, 7), (2, 9), (2, 7)], "T")
        st = be.stats
        self.assertGreater(st.specialized, 0, st)
        self.assertEqual(st.refused, 0, st)
        self.assertEqual(st.shapes, 3 * st.specialized, st.as_dict())  # 3 distinct sizes, the 4th reused
        self.assertEqual(counters["stats"]["unique_graphs"], 1)
        self.assertEqual(set(st.left) - {"aten.addmm.default", "aten.mm.default", "aten.t.default",
                                         "<built-in function mul>"}, set(), st.left)
        self.assertEqual(dict(st.unsupported), {}, st.unsupported)

    def test_dynamic_batch_and_sequence_specialized(self):
        """Both dims dynamic ([B*T, C] around the matmul: size expressions):
        the sizes follow from the inputs' (a product solved for its unknown),
        results equal eager's at every size."""
        torch._dynamo.reset()
        m = self._seq_model()
        be = fb.make_backend("fgrun")
        cm = torch.compile(m, backend=be, dynamic=True)
        self._train_at(cm, m, [(2, 5), (3, 4), (1, 9)], "B, T")
        self.assertGreater(be.stats.specialized, 0, be.stats)
        self.assertEqual(be.stats.refused, 0, be.stats)

    def test_specialized_region_keeps_layouts(self):
        """A region written at each call's sizes declares its inputs in the
        dim order the trace had them, as a static region does: a transposed
        input is passed as it is, not copied into row-major (run U2 of
        2026-11-28 copied 109 inputs a GPT-2 step before 5d48b0a)."""
        torch._dynamo.reset()

        def f(x, w):
            return torch.relu(x) * 2.0 + w.sum(0)

        be = fb.make_backend("fgrun")
        cf = torch.compile(f, backend=be, dynamic=True)
        for b, t in ((2, 5), (3, 4)):
            x, w = torch.randn(b, t, 6), torch.randn(6, 4).t()  # w: [4, 6], strides (1, 4)
            self.assertTrue(close(cf(x, w), f(x, w)))
        st = be.stats
        self.assertGreater(st.specialized, 0, st.as_dict())
        self.assertEqual(st.shapes, 2, st.as_dict())
        self.assertEqual(dict(st.inputs_copied), {}, st.copies())
        self.assertEqual(st.inputs_passed, 4, st.copies())

    def test_static_shape_rows_specialized(self):
        """Rows that need static shapes (attention, embedding and its
        backward, gather, full, arange, slices of a symbolic dim) take
        dynamic ones in a region written at each call's sizes: a bf16
        causal attention and an embedding + cross-entropy trained at three
        sequence lengths, nothing left to PyTorch, one graph."""
        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()
        torch.manual_seed(4)
        emb = nn.Embedding(50, 64)

        def f(ids, q, k, v):
            h = emb(ids)  # [B, T, 64]
            a = F.scaled_dot_product_attention(q * 0.5, k, v, is_causal=True).float()  # [B, 2, T, 64]
            logits = (h + a.sum(1)) @ emb.weight.t()
            return F.cross_entropy(logits.flatten(0, 1), ids.flatten()) + a[:, :, 1:].square().mean()

        be = fb.make_backend("fgrun")
        cf = torch.compile(f, backend=be)
        for t in (9, 16, 23):
            ids = torch.randint(0, 50, (3, t))
            q, k, v = (torch.randn(3, 2, t, 64, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            for x in (ids, q, k, v):
                torch._dynamo.mark_dynamic(x, 1 if x is ids else 2)
            loss = cf(ids, q, k, v)
            loss.backward()
            got = [x.grad.clone() for x in (q, k, v, emb.weight)]
            for x in (q, k, v, emb.weight):
                x.grad = None
            ref = f(ids, q, k, v)
            ref.backward()
            self.assertTrue(close(loss, ref, 1e-2), "T %d: %s vs %s" % (t, float(loss), float(ref)))
            for a, x in zip(got, (q, k, v, emb.weight)):
                scale = x.grad.float().abs().max()
                self.assertLess(float((a.float() - x.grad.float()).abs().max()), 2e-2 * float(scale) + 1e-6,
                                "T %d %s" % (t, tuple(x.shape)))
            for x in (q, k, v, emb.weight):
                x.grad = None
        st = be.stats
        self.assertEqual(set(st.unsupported), set(), st.unsupported)
        # only matmuls and size arithmetic (sym_size, the count's products) stay in PyTorch
        self.assertEqual({op for op in st.left if "mm" not in op and "sym_size" not in op and "built-in" not in op},
                         set(), st.left)
        self.assertGreater(st.specialized, 0, st)
        self.assertEqual(counters["stats"]["unique_graphs"], 1)

    def test_specialized_regions_pending_then_filled(self):
        """A machine without fusec: a size's region missing from the cache
        runs in PyTorch (results still eager's) and is recorded as pending;
        once filled, the same sizes run through fusec and compile nothing.
        FUSEC_BACKEND_SPECIALIZE=0 leaves such regions to PyTorch."""
        cache, pending = tempfile.mkdtemp(prefix="fusec-spec-"), tempfile.mkdtemp(prefix="fusec-spec-pend-")
        os.environ["FUSEC_BACKEND_CACHE"] = cache
        try:
            m = self._seq_model()
            os.environ["FUSEC_BACKEND_COMPILE"], os.environ["FUSEC_BACKEND_PENDING"] = "0", pending
            torch._dynamo.reset()
            be = fb.make_backend("fgrun")
            self._train_at(torch.compile(m, backend=be), m, [(2, 6), (2, 10)], "no fusec")
            self.assertGreater(be.stats.specialized, 0, be.stats)
            self.assertGreater(be.stats.missing, 0, be.stats)
            n = len(os.listdir(pending))
            self.assertGreaterEqual(n, 2 * be.stats.specialized)
            del os.environ["FUSEC_BACKEND_COMPILE"], os.environ["FUSEC_BACKEND_PENDING"]
            self.assertEqual(fb.fill(pending), n)
            torch._dynamo.reset()
            os.environ["FUSEC_BACKEND_COMPILE"] = "0"
            be2 = fb.make_backend("fgrun")
            self._train_at(torch.compile(m, backend=be2), m, [(2, 6), (2, 10)], "filled")
            self.assertEqual((be2.stats.missing, be2.stats.compiled), (0, 0), be2.stats)
            self.assertEqual(be2.stats.shapes, 2 * be2.stats.specialized)
            os.environ["FUSEC_BACKEND_SPECIALIZE"] = "0"
            torch._dynamo.reset()
            be3 = fb.make_backend("fgrun")
            self._train_at(torch.compile(m, backend=be3), m, [(2, 6), (2, 10)], "off")
            self.assertEqual(be3.stats.specialized, 0, be3.stats)
        finally:
            for k in ("FUSEC_BACKEND_COMPILE", "FUSEC_BACKEND_PENDING", "FUSEC_BACKEND_SPECIALIZE"):
                os.environ.pop(k, None)
            os.environ["FUSEC_BACKEND_CACHE"] = CACHE

    def _sunk(self, make, mode, seed, tag):
        """Trains make() one step through the backend with
        FUSEC_BACKEND_SINK_SUMS=mode; asserts the gradients are eager's and
        returns how many sums moved."""
        os.environ["FUSEC_BACKEND_SINK_SUMS"] = mode
        try:
            torch.manual_seed(seed)
            m = make()
            torch._dynamo.reset()
            be = fb.make_backend("fgrun")
            x = torch.randn(4, 6, 16)
            torch.compile(m, backend=be, dynamic=False)(x).square().sum().backward()
            got = [p.grad.clone() for p in m.parameters()]
            m.zero_grad()
            m(x).square().sum().backward()
            for a, p in zip(got, m.parameters()):
                self.assertTrue(close(a, p.grad, 1e-4), (tag, p.shape))
            return be.stats.sunk
        finally:
            del os.environ["FUSEC_BACKEND_SINK_SUMS"]

    def test_sink_sums_moves_bias_gradients(self):
        """FUSEC_BACKEND_SINK_SUMS=1: a bias gradient (the sum over tokens of
        the gradient a region makes for a matmul) and a LayerNorm weight
        gradient (sum(dy * x_hat)) move into the region that makes their
        input; the gradients stay eager's."""
        n = self._sunk(lambda: nn.Sequential(nn.LayerNorm(16), nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16),
                                             nn.LayerNorm(16)), "1", 3, "1")
        self.assertGreaterEqual(n, 3)

    def test_sink_sums_rows_only_beside_row_sums(self):
        """FUSEC_BACKEND_SINK_SUMS=rows: only the sums whose region also sums
        rows of their input's size move (the LayerNorm weight and bias
        gradients into the LayerNorm backward), not a Linear's bias gradient
        beside the GELU backward; the gradients stay eager's."""
        def make():
            return nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16), nn.Linear(16, 32), nn.GELU(),
                                 nn.Linear(32, 16), nn.LayerNorm(16))

        counts = {mode: self._sunk(make, mode, 3, mode) for mode in ("1", "rows")}
        self.assertGreaterEqual(counts["rows"], 2, counts)
        self.assertLess(counts["rows"], counts["1"], counts)

    def test_sink_sums_rmsnorm_lead(self):
        """An RMSNorm weight gradient, sum(dy * x_hat) with x_hat = x * rstd
        recomputed from the forward's saved x and rstd, moves into the
        RMSNorm backward's region with x_hat (export.LEAD_DEPTH); with one
        level of leads it would stay. The gradients stay eager's."""

        class RMSNorm(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.w = nn.Parameter(torch.rand(d) + 0.5)

            def forward(self, x):
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w

        counts = {}
        for depth in (1, fe.LEAD_DEPTH):
            old, fe.LEAD_DEPTH = fe.LEAD_DEPTH, depth
            try:
                counts[depth] = self._sunk(lambda: nn.Sequential(nn.Linear(16, 16), RMSNorm(16), nn.Linear(16, 16),
                                                                 RMSNorm(16)), "rows", 5, depth)
            finally:
                fe.LEAD_DEPTH = old
        self.assertGreater(counts[fe.LEAD_DEPTH], counts[1], counts)

    def test_unsupported_op_stays_in_torch(self):
        torch._dynamo.reset()
        be = fb.make_backend("fgrun")

        def f(x):
            return torch.cumsum(torch.tanh(x) * 2, 1).exp()

        x = torch.randn(3, 5)
        self.assertTrue(close(torch.compile(f, backend=be)(x), f(x)))
        self.assertEqual(be.stats.regions, 2)  # tanh*2 | exp, cumsum between them in PyTorch
        self.assertEqual(dict(be.stats.unsupported), {"aten.cumsum.default": 1})
        self.assertEqual(be.stats.left["aten.cumsum.default"], 1)

    def test_constant_tensor_left_by_design(self):
        """A constant the model builds with torch.tensor(...) (T5's relative
        position buckets) is `lift_fresh_copy`: left to PyTorch by design,
        not counted as an op fusec lacks."""
        torch._dynamo.reset()
        be = fb.make_backend("fgrun")

        def f(x):
            return torch.tanh(x) * torch.tensor([1.0, 2.0, 3.0])

        x = torch.randn(4, 3)
        self.assertTrue(close(torch.compile(f, backend=be)(x), f(x)))
        if not be.stats.left.get("aten.lift_fresh_copy.default"):
            self.skipTest("this torch's Dynamo folds the constant: no lift_fresh_copy to classify")
        self.assertNotIn("aten.lift_fresh_copy.default", be.stats.unsupported)

    def test_cache_key_ignores_node_names(self):
        """The same region in another graph, where the FX nodes have other
        names (its input is a matmul's result rather than a placeholder), is
        the same cache entry: the regions' values are named v0, v1, ..."""
        torch._dynamo.reset()
        cache = tempfile.mkdtemp(prefix="fusec-backend-key-")
        os.environ["FUSEC_BACKEND_CACHE"] = cache
        try:
            def f(x):
                return F.gelu(x * 2 + 1, approximate="tanh")

            def g(a, w):
                return F.gelu((a @ w) * 2 + 1, approximate="tanh")

            be1, be2 = fb.make_backend("fgrun"), fb.make_backend("fgrun")
            x, a, w = torch.randn(4, 8), torch.randn(4, 6), torch.randn(6, 8)
            self.assertTrue(close(torch.compile(f, backend=be1, dynamic=False)(x), f(x)))
            self.assertTrue(close(torch.compile(g, backend=be2, dynamic=False)(a, w), g(a, w)))
            self.assertEqual((be1.stats.compiled, be2.stats.compiled, be2.stats.cache_hits), (1, 0, 1))
            texts = [open(os.path.join(cache, n)).read() for n in os.listdir(cache) if n.endswith(".fg")]
            self.assertEqual(len(texts), 1)
            self.assertRegex(texts[0], r"^graph g_[0-9a-f]{12}\(v0: f32\[4, 8\]\) \{")
        finally:
            os.environ["FUSEC_BACKEND_CACHE"] = CACHE

    def test_prepare_runner(self):
        """runner "prepare" compiles the regions into the cache and leaves
        them to PyTorch (eager's results, up to the decompositions); a backend that
        runs them then compiles nothing."""
        torch._dynamo.reset()
        cache = tempfile.mkdtemp(prefix="fusec-backend-prep-")
        os.environ["FUSEC_BACKEND_CACHE"] = cache
        try:
            torch.manual_seed(9)
            m = MLP()
            x = torch.randn(5, 32, requires_grad=True)
            prep = fb.make_backend("prepare")
            y = torch.compile(m, backend=prep, dynamic=False)(x)
            y.sum().backward()
            self.assertTrue(close(y, m(x)))
            self.assertGreaterEqual(prep.stats.regions, 4)
            self.assertEqual(prep.stats.compiled, prep.stats.regions - prep.stats.cache_hits)
            torch._dynamo.reset()
            run = fb.make_backend("fgrun")
            torch.compile(m, backend=run, dynamic=False)(x).sum().backward()
            self.assertEqual(run.stats.compiled, 0, run.stats)
            self.assertEqual(run.stats.regions, prep.stats.regions)
        finally:
            os.environ["FUSEC_BACKEND_CACHE"] = CACHE

    def test_arch_in_key_and_fill(self):
        """$FUSEC_BACKEND_ARCH (on a Hopper GPU: sm_90a by default) is passed
        to fusec and is part of the cache key; a region written as pending
        where fusec is missing is compiled by `fill` for the same arch."""
        text = "graph g(v0: f32[4, 8]) {\n  v1 = mul(v0, v0)\n  return v1\n}\n"
        cache, pending = tempfile.mkdtemp(prefix="fusec-arch-"), tempfile.mkdtemp(prefix="fusec-pend-")
        old = os.environ.get("FUSEC_BACKEND_ARCH")
        try:
            os.environ["FUSEC_BACKEND_ARCH"] = ""
            plain, why = fb.compile_region(text, directory=cache)
            self.assertIsNotNone(plain, why)
            os.environ["FUSEC_BACKEND_ARCH"] = "sm_90a"
            a90, why = fb.compile_region(text, directory=cache)
            self.assertIsNotNone(a90, why)
            self.assertNotEqual(plain, a90)
            self.assertIn(".target sm_90a", open(a90).read())
            self.assertNotIn(".target sm_90a", open(plain).read())
            os.environ["FUSEC_BACKEND_COMPILE"], os.environ["FUSEC_BACKEND_PENDING"] = "0", pending
            cache2 = tempfile.mkdtemp(prefix="fusec-arch2-")
            self.assertEqual(fb.compile_region(text, directory=cache2)[0], None)
            del os.environ["FUSEC_BACKEND_COMPILE"], os.environ["FUSEC_BACKEND_PENDING"]
            os.environ["FUSEC_BACKEND_ARCH"] = ""  # fill takes the arch from the pending file
            self.assertEqual(fb.fill(pending, directory=cache2), 1)
            self.assertEqual(os.listdir(pending)[0].replace(".fg", ".ptx"),
                             [n for n in os.listdir(cache2) if n.endswith(".ptx")][0])
            self.assertEqual(os.path.basename(a90), os.listdir(pending)[0].replace(".fg", ".ptx"))
        finally:
            for k in ("FUSEC_BACKEND_COMPILE", "FUSEC_BACKEND_PENDING"):
                os.environ.pop(k, None)
            if old is None:
                os.environ.pop("FUSEC_BACKEND_ARCH", None)
            else:
                os.environ["FUSEC_BACKEND_ARCH"] = old

    def test_artifact_of_another_fusec_compiled_again(self):
        """The cache key is the region's text and arch, so an upgraded fusec
        would find its predecessor's artifacts: each carries the identity of
        the binary that compiled it (<key>.fusec), and where fusec is at hand
        one compiled by another binary (or recorded by none: a cache from
        before) is compiled again; without fusec the cache is used as is."""
        text = "graph g(v0: f32[4, 8]) {\n  v1 = add(v0, v0)\n  return v1\n}\n"
        cache = tempfile.mkdtemp(prefix="fusec-stale-")
        st = fb.Stats()
        ptx, why = fb.compile_region(text, directory=cache, stats=st)
        self.assertIsNotNone(ptx, why)
        side = ptx[:-len(".ptx")] + ".fusec"
        self.assertEqual(open(side).read().strip(), fb._fusec_id(fb._export.find_tool("fusec")))
        fb.compile_region(text, directory=cache, stats=st)
        self.assertEqual((st.compiled, st.cache_hits), (1, 1))
        for stale in ("0123456789abcdef\n", None):  # another binary's; none recorded
            if stale is None:
                os.remove(side)
            else:
                with open(side, "w") as f:
                    f.write(stale)
            with open(ptx, "a") as f:
                f.write("// stale\n")
            os.environ["FUSEC_BACKEND_COMPILE"] = "0"  # a machine without fusec runs what is there
            try:
                self.assertEqual(fb.compile_region(text, directory=cache, stats=st)[0], ptx)
            finally:
                del os.environ["FUSEC_BACKEND_COMPILE"]
            self.assertIn("// stale", open(ptx).read())
            self.assertEqual(fb.compile_region(text, directory=cache, stats=st)[0], ptx)
            self.assertNotIn("// stale", open(ptx).read())
        self.assertEqual((st.compiled, st.cache_hits), (3, 3))

    def _region_texts(self, cache):
        out = []
        for n in sorted(os.listdir(cache)):
            if n.endswith(".fg"):
                with open(os.path.join(cache, n)) as f:
                    out.append(f.read())
        return out

    def test_transposed_input_passed_as_is(self):
        """A region fed a transposed (dense, column-major) tensor: its
        parameter is compiled with layout=[1, 0] and the tensor is passed as
        it is (no copy counted), with eager's results; a result whose traced
        strides are transposed is written by fusec in that order (the region
        returns a permute, the call permutes back: nothing restrided)."""
        torch._dynamo.reset()
        cache = tempfile.mkdtemp(prefix="fusec-backend-layout-")
        os.environ["FUSEC_BACKEND_CACHE"] = cache
        try:
            def f(a, b):
                y = torch.sin(a) * 2 + b
                return y, (y * 3).t()

            be = fb.make_backend("fgrun")
            a = torch.randn(24, 40).t()  # [40, 24], strides (1, 40)
            b = torch.randn(40, 24)
            got = torch.compile(f, backend=be, dynamic=False)(a, b)
            ref = f(a, b)
            for g, r in zip(got, ref):
                self.assertTrue(close(g, r))
                self.assertEqual(g.stride(), r.stride())
            self.assertEqual(be.stats.regions, 1)
            self.assertEqual(be.stats.calls, 1)
            self.assertEqual(be.stats.inputs_passed, 2)
            self.assertEqual(dict(be.stats.inputs_copied), {})
            self.assertEqual(dict(be.stats.results_restrided), {})
            (text,) = self._region_texts(cache)
            self.assertIn("v0: f32[40, 24] layout=[1, 0], v1: f32[40, 24])", text)
            self.assertRegex(text, r"v\d+ = permute\(v\d+, dims=\[1, 0\]\)\n  return ")
        finally:
            os.environ["FUSEC_BACKEND_CACHE"] = CACHE

    def test_layout_mismatch_at_call_time(self):
        """A region compiled for a transposed input, called with a row-major
        tensor (and with a slice, not dense): the input is copied into the
        compiled layout (counted, by reason) and the results are right."""
        from torch.fx.experimental.proxy_tensor import make_fx

        def f(a):
            return torch.exp(a) + a.sum(dim=1, keepdim=True)

        gm = make_fx(f, tracing_mode="fake")(torch.randn(24, 40).t())
        be_stats = fb.Stats()
        run = fb.compile_aten_graph(gm, None, runner="fgrun", stats=be_stats)
        r = next(iter(run.fusec_partitioned.regions.values()))
        self.assertEqual(r.in_layouts, [(1, 0)])
        x = torch.randn(40, 24)
        for arg, why in ((x.t().contiguous().t(), None), (x, "another dim order"),
                         (torch.randn(40, 48)[:, ::2], "not dense")):
            got = run(arg)
            got = got[0] if isinstance(got, (tuple, list)) else got
            self.assertTrue(close(got, f(arg)), why)
            if why:
                self.assertEqual(be_stats.inputs_copied["input (%s)" % why], 1, be_stats.copies())
        self.assertEqual(be_stats.inputs_passed, 1)
        self.assertEqual(sum(be_stats.inputs_copied.values()), 2)
        # what is handed to fusec: the compiled layout's strides, whatever came in
        io = fb._RegionIO(r, None, fb.Stats())
        (t,) = io.inputs((x,))
        self.assertEqual(t.stride(), (1, 40))
        self.assertTrue(torch.equal(t, x))

    def test_regions_are_plain_calls(self):
        """The regions run as call_function nodes (no nn.Module around the
        call, issue 21): the graph module keeps no submodule for them, and
        the counts are the same over several calls."""
        torch._dynamo.reset()
        torch.manual_seed(1)
        m = MLP()
        be = fb.make_backend("fgrun")
        cm = torch.compile(m, backend=be, dynamic=False)
        x = torch.randn(6, 32)
        with torch.no_grad():
            for _ in range(3):
                self.assertTrue(close(cm(x), m(x)))
        from torch.fx.experimental.proxy_tensor import make_fx

        gm = make_fx(lambda a: torch.exp(a) * 2 + 1)(torch.randn(4, 8))
        stats = fb.Stats()
        run = fb.compile_aten_graph(gm, None, runner="fgrun", stats=stats)
        calls = [n for n in run.graph.nodes if n.op == "call_function" and getattr(n.target, "fusec_region", None)]
        self.assertEqual(len(calls), 1)
        self.assertFalse([n for n in run.graph.nodes if n.op == "call_module"])
        self.assertFalse(any(name.startswith("fused_") for name, _ in run.named_children()))
        a = torch.randn(4, 8)
        for _ in range(2):
            got = run(a)
            got = got[0] if isinstance(got, (tuple, list)) else got
            self.assertTrue(close(got, torch.exp(a) * 2 + 1))
        self.assertEqual((stats.calls, stats.inputs_passed), (2, 2))

    def test_row_major_input_not_contiguous_is_copied(self):
        """A region compiled for row-major inputs, called with a slice and a
        transposed view: each is copied (counted, by reason) and the results
        are right; the contiguous input next to them is passed as it is."""
        from torch.fx.experimental.proxy_tensor import make_fx

        def f(a, b):
            return torch.tanh(a) * b

        gm = make_fx(f, tracing_mode="fake")(torch.randn(16, 24), torch.randn(16, 24))
        stats = fb.Stats()
        run = fb.compile_aten_graph(gm, None, runner="fgrun", stats=stats)
        (r,) = run.fusec_partitioned.regions.values()
        self.assertEqual(r.in_layouts, [None, None])
        b = torch.randn(16, 24)
        for a, why in ((torch.randn(16, 24), None), (torch.randn(16, 48)[:, ::2], "not dense"),
                       (torch.randn(24, 16).t(), "another dim order"), (torch.randn(16, 24), None)):
            got = run(a, b)
            got = got[0] if isinstance(got, (tuple, list)) else got
            self.assertTrue(close(got, f(a, b)), why)
        self.assertEqual(stats.calls, 4)
        self.assertEqual(stats.inputs_passed, 6)
        self.assertEqual(dict(stats.inputs_copied), {"input (not dense)": 1, "input (another dim order)": 1})
        # what is handed to fusec: row-major, whatever came in
        io = fb._RegionIO(r, None, fb.Stats())
        x = torch.randn(24, 16).t()
        t, u = io.inputs((x, b))
        self.assertTrue(t.is_contiguous() and torch.equal(t, x))
        self.assertIs(u, b)

    def test_window_input_passed_as_its_storage(self):
        """A region fed q and k of a packed QKV tensor ([B, H, S, D] views of
        [B, S, 3 * H * D], as AOTAutograd hands an attention backward its
        saved inputs): each parameter is compiled as the dense tensor its
        strides imply, sliced (export.Cover), and each call passes a window
        of the input's own storage, copying nothing; the results are
        eager's. A dense q is copied into a window, and so is a k whose
        storage does not hold the window (both counted)."""
        from torch.fx.experimental.proxy_tensor import make_fx

        B, S, H, D = 2, 5, 3, 4

        def split(qkv):
            return [t.view(B, S, H, D).transpose(1, 2) for t in qkv.split(H * D, dim=2)]

        def f(q, k):
            return torch.tanh(q) * k + k.sum(dim=3, keepdim=True)

        qkv = torch.randn(B, S, 3 * H * D)
        q, k, _ = split(qkv)
        gm = make_fx(f, tracing_mode="fake")(q, k)
        stats = fb.Stats()
        run = fb.compile_aten_graph(gm, None, runner="fgrun", stats=stats)
        (r,) = run.fusec_partitioned.regions.values()
        self.assertEqual([c is not None for c in r.in_covers], [True, True])
        self.assertRegex(r.fg, r"\(v\d+: f32\[2, 5, 9, 4\], v\d+: f32\[2, 5, 9, 4\]\)")
        self.assertRegex(r.fg, r"= permute\(slice\(v\d+, starts=\[0, 0, 0, 0\], ends=\[2, 5, 3, 4\]\), "
                               r"dims=\[0, 2, 1, 3\]\)")
        self.assertRegex(r.fg, r"= permute\(slice\(v\d+, starts=\[0, 0, 3, 0\], ends=\[2, 5, 6, 4\]\), "
                               r"dims=\[0, 2, 1, 3\]\)")
        for _ in range(3):
            got = run(q, k)
            got = got[0] if isinstance(got, (tuple, list)) else got
            self.assertTrue(close(got, f(q, k)))
        self.assertEqual((stats.calls, stats.inputs_passed), (3, 6))
        self.assertEqual(dict(stats.inputs_copied), {})
        # what is handed to fusec: the packed tensor itself, twice
        io = fb._RegionIO(r, None, fb.Stats())
        for _ in range(2):  # checked, then the fast path
            t, u = io.inputs((q, k))
            for w in (t, u):
                self.assertEqual((w.shape, w.data_ptr()), (torch.Size([2, 5, 9, 4]), qkv.data_ptr()))
        # a dense q; a k with the traced strides in a storage too small for the window
        qd = q.contiguous()
        small = torch.randn(B * S * 3 * H * D - 3 * H * D + H * D)
        k2 = small.as_strided(k.shape, k.stride(), 0)
        got = run(qd, k2)
        got = got[0] if isinstance(got, (tuple, list)) else got
        self.assertTrue(close(got, f(qd, k2)))
        self.assertEqual(dict(stats.inputs_copied), {"input (not the traced window's strides)": 1,
                                                     "input (window out of its storage)": 1})

    def test_repeated_kv_heads_become_gqa(self):
        """Llama's repeat_kv (expand + reshape) and repeat_interleave before
        attention: the backend gives the attention node the key/value heads
        as they are and enable_gqa=True (fusec.gqa), so the attention of the
        ATen graphs (forward and backward) takes 2 key heads for 6 query
        heads and no graph repeats heads or sums dK, dV over a group;
        results and gradients match eager's. A repeat that is not head h ->
        h // rep (heads tiled: expand at dim 1) is left alone. (On the CPU
        the attention stays in PyTorch; tests/gpu/python_backend.py and the
        models run it through fusec's sdpa on the GPU.)"""
        B, H, Hk, S, D = 2, 6, 2, 8, 16
        rep = H // Hk

        def expand_form(q, k, v):
            k = k[:, :, None].expand(B, Hk, rep, S, D).reshape(B, H, S, D)
            v = v[:, :, None].expand(B, Hk, rep, S, D).reshape(B, H, S, D)
            return F.scaled_dot_product_attention(torch.tanh(q), k, v, is_causal=True)

        def interleave_form(q, k, v):  # mask, dropout, causal in their places; enable_gqa=False given
            return F.scaled_dot_product_attention(q * 2, k.repeat_interleave(rep, dim=1),
                                                  v.repeat_interleave(rep, dim=1), None, 0.0, False, scale=0.3,
                                                  enable_gqa=False)

        def tiled(q, k, v):  # head h -> h % Hk: not GQA's order
            k = k[:, None].expand(B, rep, Hk, S, D).reshape(B, H, S, D)
            v = v[:, None].expand(B, rep, Hk, S, D).reshape(B, H, S, D)
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        for f, gqa in ((expand_form, 1), (interleave_form, 1), (tiled, 0)):
            torch._dynamo.reset()
            torch.manual_seed(3)
            args = [torch.randn(B, n, S, D, requires_grad=True) for n in (H, Hk, Hk)]
            be = fb.make_backend("fgrun")
            seen = []  # the ATen graphs AOTAutograd hands over
            real = fb.compile_aten_graph

            def spy(gm, *a, **kw):
                seen.append(gm)
                return real(gm, *a, **kw)

            fb.compile_aten_graph = spy
            try:
                y = torch.compile(f, backend=be, dynamic=False)(*args)
                y.square().sum().backward()
            finally:
                fb.compile_aten_graph = real
            got = [y.detach()] + [a.grad.clone() for a in args]
            for a in args:
                a.grad = None
            y = f(*args)
            y.square().sum().backward()
            for i, (g, r) in enumerate(zip(got, [y.detach()] + [a.grad for a in args])):
                self.assertLess(((g - r).norm() / r.norm()).item(), 1e-5, "%s: tensor %d" % (f.__name__, i))
            self.assertEqual(be.stats.gqa, gqa, f.__name__)
            attn = [n for gm in seen for n in gm.graph.nodes if "scaled_dot_product" in str(n.target)]
            self.assertEqual(len(attn), 2, f.__name__)  # the forward's and the backward's
            for n in attn:  # k: its heads as they are (GQA) or repeated
                k = n.args[2] if "backward" in str(n.target) else n.args[1]
                self.assertEqual(k.meta["val"].shape[1], Hk if gqa else H, f.__name__)
            # with GQA no graph repeats heads or sums gradients over a group
            ops = {str(n.target) for gm in seen for n in gm.graph.nodes}
            self.assertEqual(bool(ops & {"aten.expand.default", "aten.sum.dim_IntList"}), not gqa,
                             (f.__name__, sorted(ops)))

    def test_layout_changes_between_calls(self):
        """A region compiled for a transposed input, called alternately with
        that layout (passed: remembered once matched) and row-major (copied
        every time): the counts and what is handed to fusec follow each call."""
        from torch.fx.experimental.proxy_tensor import make_fx

        def f(a):
            return torch.exp(a) + a.sum(dim=1, keepdim=True)

        gm = make_fx(f, tracing_mode="fake")(torch.randn(24, 40).t())
        stats = fb.Stats()
        run = fb.compile_aten_graph(gm, None, runner="fgrun", stats=stats)
        (r,) = run.fusec_partitioned.regions.values()
        self.assertEqual(r.in_layouts, [(1, 0)])
        io = fb._RegionIO(r, None, fb.Stats())
        x = torch.randn(40, 24)
        xt = x.t().contiguous().t()  # the same values, strides (1, 40)
        for k, arg in enumerate((xt, x, xt, x, xt)):
            (t,) = io.inputs((arg,))
            self.assertEqual(t.stride(), (1, 40))
            self.assertTrue(torch.equal(t, x))
            if arg is xt:
                self.assertIs(t, xt)
            got = run(arg)
            got = got[0] if isinstance(got, (tuple, list)) else got
            self.assertTrue(close(got, f(arg)), k)
        self.assertEqual((stats.calls, stats.inputs_passed), (5, 3))
        self.assertEqual(dict(stats.inputs_copied), {"input (another dim order)": 2})
        self.assertEqual((io.stats.calls, io.stats.inputs_passed), (5, 3))

    def test_result_layout_decided_per_strides(self):
        """What a result needs (nothing, or a copy into the traced dim order)
        is remembered per strides it comes with: a result that comes back
        in another layout on a later call is still restrided (and counted)."""
        import types

        r = types.SimpleNamespace(name="r", fg="graph g(v0: f32[8, 6]) {}", tensor_in=[True], in_layouts=[None],
                                  out_orders=[(1, 0), (0, 1)], out_perms=[None, None], out_sources=["a", "b"],
                                  out_dtypes=[torch.float32] * 2, tuple_out=True)
        stats = fb.Stats()
        io = fb._RegionIO(r, None, stats)
        row = torch.randn(8, 6)
        col = torch.randn(6, 8).t()
        for k, (o0, copied) in enumerate(((row, True), (col, False), (row, True), (col, False))):
            o1 = torch.randn(8, 6)
            a, b = io.outputs((o0, o1))
            self.assertEqual(a.stride(), (1, 8), k)
            self.assertTrue(torch.equal(a, o0))
            self.assertIs(b, o1)
            self.assertEqual(a is o0, not copied, k)
        self.assertEqual(dict(stats.results_restrided), {"a": 2})
        # a region of symbolic sizes: the decision is keyed by the shape too
        r.fg = "graph g<N>(v0: f32[N, 6]) {}"
        io = fb._RegionIO(r, None, fb.Stats())
        one = torch.randn(1, 6)  # strides (6, 1): size-1 rows take any order
        a, _ = io.outputs((one, torch.randn(1, 6)))
        self.assertIs(a, one)
        six = torch.randn(6, 6)  # the same strides (6, 1), row-major: copied
        a, _ = io.outputs((six, torch.randn(6, 6)))
        self.assertEqual(a.stride(), (1, 6))
        self.assertTrue(torch.equal(a, six))
        self.assertEqual(io.stats.results_restrided["a"], 1)

    def test_cpu_inputs_moved_to_the_device(self):
        """An input the trace has on the CPU beside inputs on a device (a
        0-dim tensor, which PyTorch's ops take with device tensors) is
        copied to that device at each call, and counted; one already there
        is passed. The meta device stands in for CUDA here."""
        import types

        r = types.SimpleNamespace(name="r", fg="graph g(v0: f32[4], v1: f32[]) {}", tensor_in=[True, True],
                                  in_layouts=[None, None], out_orders=[None], out_perms=[None],
                                  out_sources=["a"], out_dtypes=[torch.float32], tuple_out=False)

        def node(name, val):
            return types.SimpleNamespace(op="placeholder", name=name, meta={"val": val})

        dev, host = torch.empty(4, device="meta"), torch.tensor(2.0)
        stats = fb.Stats()
        io = fb._RegionIO(r, types.SimpleNamespace(args=[node("x", dev), node("s", host)]), stats)
        self.assertEqual((io.dev_of, io.to_dev), (0, [1]))
        for _ in range(2):
            a, b = io.inputs((dev, host))
            self.assertIs(a, dev)
            self.assertEqual(b.device.type, "meta")
            self.assertEqual(b.shape, host.shape)
        self.assertEqual(dict(stats.inputs_copied), {"input (on the CPU)": 2})
        a, b = io.inputs((dev, torch.empty((), device="meta")))  # already on the device: passed
        self.assertEqual(stats.inputs_copied["input (on the CPU)"], 2)
        # all on the CPU (the CPU runs): nothing moves
        io = fb._RegionIO(r, types.SimpleNamespace(args=[node("x", torch.zeros(4)), node("s", host)]), fb.Stats())
        self.assertEqual(io.to_dev, [])

    def test_overhead_bench_runs(self):
        """python/tests/bench_backend_overhead.py (the host time around the
        region calls, stub runner) finds and times every region call."""
        import json
        import subprocess

        out = os.path.join(tempfile.mkdtemp(prefix="fusec-bench-"), "b.json")
        r = subprocess.run([sys.executable, os.path.join(HERE, "bench_backend_overhead.py"), "--reps", "3",
                            "--rounds", "1", "--out", out], capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(out) as f:
            res = json.load(f)
        self.assertGreaterEqual(res["regions"], 10)
        self.assertTrue(all(row["call_us"] > 0 and row["graph_call_us"] > 0 for row in res["rows"]))


if __name__ == "__main__":
    unittest.main()
