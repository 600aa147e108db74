#!/usr/bin/env python3
"""CPU tests of the exporter (python/fusec/export.py) and its mapping table
(python/fusec/aten_map.py).

- every row of the table has test cases, and each case, exported with
  torch.export, lands its row's op in a region, leaves no op unmapped, runs
  through fusec's interpreter (fgrun) and matches torch on the CPU; its .fg
  compiles with fusec (unless it holds an op the code generator lacks);
- models: an MLP block (LayerNorm, Linear, GELU, residual) and a transformer
  block with attention, run region by region through fgrun against eager;
- a dynamic leading dim becomes a symbolic size with the facts of its Dim;
  more than one stays static, and the manifest says why;
- bad input: an op without a mapping and a dtype fusec lacks are reported by
  name, count and source line, and left to PyTorch (the answer still right);
- python -m fusec.export SCRIPT:ENTRY writes the .fg and the manifest.

Run: python3 python/tests/test_export.py [-v] [-k PATTERN]. Needs torch
(exit 77, skipped, without it) and build/tools/{fgrun,fusec} (or
$FUSEC_BIN_DIR).
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import unittest.mock

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("test_export: torch is not installed; skipped")
    sys.exit(77)

from fusec import aten_map  # noqa: E402
from fusec import export as fe  # noqa: E402

try:
    FGRUN, FUSEC = fe.find_tool("fgrun"), fe.find_tool("fusec")
except FileNotFoundError as err:
    print("test_export: %s; skipped" % err)
    sys.exit(77)


def _flat(x):
    if isinstance(x, (tuple, list)):
        return [t for y in x for t in _flat(y)]
    return [x]


def _tol(dt):
    return {torch.bfloat16: 2e-2, torch.float16: 2e-3, torch.float64: 1e-12}.get(dt, 2e-5)


def assert_close(tc, got, ref, what, floor=0.0):
    """floor: the least relative tolerance (a tenth of the inputs' dtype's:
    an f32 result computed from bf16 values, such as attention's lse, where
    torch's CPU kernels round inside, torch 2.15's flash kernel by 1e-3)."""
    got, ref = _flat(got), _flat(ref)
    tc.assertEqual(len(got), len(ref), what)
    for i, (g, r) in enumerate(zip(got, ref)):
        tc.assertEqual(g.dtype, r.dtype, "%s: result %d dtype" % (what, i))
        tc.assertEqual(tuple(g.shape), tuple(r.shape), "%s: result %d shape" % (what, i))
        if r.dtype.is_floating_point:
            gd, rd = g.double(), r.double()
            same_nan = torch.isnan(gd) == torch.isnan(rd)
            tc.assertTrue(bool(same_nan.all()), "%s: result %d NaNs differ" % (what, i))
            fin = ~torch.isnan(rd) & ~torch.isinf(rd)
            tc.assertTrue(bool((gd[torch.isinf(rd)] == rd[torch.isinf(rd)]).all()), "%s: result %d infs differ"
                          % (what, i))
            err = (gd[fin] - rd[fin]).abs()
            bound = max(_tol(r.dtype), floor) * (1 + rd[fin].abs())
            tc.assertTrue(bool((err <= bound).all()), "%s: result %d differs by %s\n got %s\n ref %s"
                          % (what, i, err.max() if err.numel() else 0, g, r))
        else:
            tc.assertTrue(bool((g == r).all()), "%s: result %d\n got %s\n ref %s" % (what, i, g, r))


class TableTest(unittest.TestCase):
    """Each row of the mapping table against the interpreter."""

    @classmethod
    def setUpClass(cls):
        cls.cases = aten_map.tests()

    def test_every_row_has_cases(self):
        missing = sorted(k for k in aten_map.TABLE if k not in self.cases and k not in aten_map.GPU_ONLY)
        self.assertEqual(missing, [], "rows of aten_map.TABLE without a test case")
        extra = sorted(k for k in self.cases if k not in aten_map.TABLE)
        self.assertEqual(extra, [], "test cases for ops the table lacks")

    def test_rows(self):
        n = 0
        for name, cases in sorted(self.cases.items()):
            for k, case in enumerate(cases):
                with self.subTest(op=name, case=k):
                    self.run_case(name, k, case)
                    n += 1
        print("\n%d cases over %d table rows" % (n, len(self.cases)), file=sys.stderr)

    def run_case(self, name, k, case):
        inputs = tuple(f() for f in case.inputs)
        ref = case.fn(*inputs)
        # non-strict: twice as fast as Dynamo, and the rows need no stack traces
        ex = fe.export(case.fn, inputs, name="case", compiled_only=False, strict=False)
        ops = [op for r in ex.partitioned.regions.values() for op in r.ops]
        if name not in ops:  # an op torch.export's decompositions take apart: as make_fx traces it
            ex = fe.trace_aten(case.fn, inputs, name="case", compiled_only=False)
            ops = [op for r in ex.partitioned.regions.values() for op in r.ops]
        self.assertIn(name, ops, "%s case %d: the op is not in a region:\n%s\n%s" % (name, k, ex.report(), ex.fg))
        self.assertEqual(ex.manifest["unsupported"], {}, "%s case %d:\n%s" % (name, k, ex.report()))
        got = ex.run_interpreted(*inputs, fgrun=FGRUN)
        floor = max([_tol(t.dtype) / 10 for t in inputs if isinstance(t, torch.Tensor) and t.dtype.is_floating_point],
                    default=0.0)
        assert_close(self, got, ref, "%s case %d\n%s" % (name, k, ex.fg), floor)
        if not any(op in aten_map.NOT_COMPILED for op in ops):
            ex.check_compile(FUSEC)


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures  # noqa: E402  (the models the Python tests share)


def MLP(d=32, h=64):
    return fixtures.MLP(d, h)


def Block(d=32, heads=4):
    return fixtures.Block(d, heads)


class ModelTest(unittest.TestCase):
    def check_model(self, m, inputs, compiled_only=True, **kw):
        torch.manual_seed(0)
        ex = fe.export(m, inputs, compiled_only=compiled_only, **kw)
        got = ex.run_interpreted(*inputs, fgrun=FGRUN)
        with torch.no_grad():
            ref = m(*inputs)
        assert_close(self, got, ref, ex.report())
        return ex

    def test_mlp(self):
        torch.manual_seed(1)
        ex = self.check_model(MLP(), (torch.randn(6, 32),))
        m = ex.manifest
        self.assertEqual(m["left_to_torch"], {"aten.addmm.default": 2})
        self.assertEqual(m["unsupported"], {})
        self.assertEqual(len(ex.partitioned.regions), 3, ex.fg)  # ln | gelu | residual add
        ex.check_compile(FUSEC)

    def test_block(self):
        torch.manual_seed(2)
        x = torch.randn(2, 5, 32)
        ex = self.check_model(Block(), (x,))
        self.assertIn("aten.scaled_dot_product_attention.default", ex.manifest["unsupported"])
        ex.check_compile(FUSEC)
        ex = self.check_model(Block(), (x,), compiled_only=False)  # fusec's sdpa in the interpreter
        self.assertNotIn("aten.scaled_dot_product_attention.default", ex.manifest["unsupported"])

    def test_bf16_block(self):
        torch.manual_seed(3)
        m = MLP().to(torch.bfloat16)
        ex = self.check_model(m, (torch.randn(4, 32, dtype=torch.bfloat16),))
        ex.check_compile(FUSEC)

    def test_dynamic_leading_dim(self):
        T = torch.export.Dim("T", min=2, max=4096)
        m = MLP()
        ex = fe.export(m, (torch.randn(8, 32),), dynamic_shapes=({0: T},))
        self.assertIn("<T: 2..4096>", ex.fg)
        self.assertIn("f32[T, 32]", ex.fg)
        self.assertEqual([i["shape"] for i in ex.manifest["inputs"] if i["kind"] == "user_input"], [["T", 32]])
        ex.check_compile(FUSEC)
        for n in (3, 17):
            x = torch.randn(n, 32)
            with torch.no_grad():
                assert_close(self, ex.run_interpreted(x, fgrun=FGRUN), m(x), "T=%d" % n)

    def test_two_dynamic_dims_are_static(self):
        B, T = torch.export.Dim("B", min=1, max=64), torch.export.Dim("T", min=2, max=1024)
        ex = fe.export(lambda x: torch.softmax(x * 2, -1), (torch.randn(2, 3, 8),), dynamic_shapes=({0: B, 1: T},))
        notes = [n.get("static_because") for n in ex.manifest["nodes"] if n["kind"] == "region"]
        self.assertTrue(notes and all(notes), ex.manifest)
        self.assertIn("f32[2, 3, 8]", ex.fg)
        ex.check_compile(FUSEC)


class TrainingTest(unittest.TestCase):
    def test_forward_and_backward_graphs(self):
        torch.manual_seed(4)
        m = MLP()
        x = torch.randn(6, 32, requires_grad=True)
        ex = fe.export_training(m, (x,), name="mlp")
        fw, bw = ex.forward, ex.backward
        self.assertEqual(fw.manifest["left_to_torch"], {"aten.addmm.default": 2})
        self.assertIn("aten.mm.default", bw.manifest["left_to_torch"])
        self.assertEqual(fw.manifest["unsupported"], {})
        self.assertEqual(bw.manifest["unsupported"], {})
        self.assertGreaterEqual(len(bw.partitioned.regions), 2)
        self.assertIn("graph mlp_fw_r0(", ex.fg)
        self.assertIn("graph mlp_bw_r0(", ex.fg)
        ex.check_compile(FUSEC)
        # the forward graph (parameters, then the input) through fgrun: its first result is the output
        got = fw.run_interpreted(*(list(m.parameters()) + [x.detach()]), fgrun=FGRUN)
        with torch.no_grad():
            assert_close(self, got[0], m(x), fw.report())


class FlashAttentionTest(unittest.TestCase):
    """The CUDA flash kernels' rows (aten_map.GPU_ONLY), traced on fake CUDA
    tensors as a training graph holds them (the forward's rng state saved
    for the backward), give the regions the CPU kernels' rows give: the same
    .fg text, so a cache filled from a CPU trace serves the GPU."""

    def trace(self, device, hd=64, dtype=torch.bfloat16):
        """(forward, backward) partitioned, as AOTAutograd's two graphs hold them."""
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.proxy_tensor import make_fx

        aten = torch.ops.aten

        def fwd(q, k, v):
            if device == "cuda":
                r = aten._scaled_dot_product_flash_attention(q * 2, k, v, 0.0, True)
                return r[0] + 1, q, k, v, r[0], r[1], r[6], r[7]  # the saved values, the rng state too
            r = aten._scaled_dot_product_flash_attention_for_cpu(q * 2, k, v, 0.0, True)
            return r[0] + 1, q, k, v, r[0], r[1]

        def bwd(q, k, v, o, lse, do, *rng):
            if device == "cuda":
                g = aten._scaled_dot_product_flash_attention_backward(do, q, k, v, o, lse, None, None, 16, 16, 0.0,
                                                                      True, rng[0], rng[1])
            else:
                g = aten._scaled_dot_product_flash_attention_for_cpu_backward(do, q, k, v, o, lse, 0.0, True)
            return g[0] * 2, g[1], g[2]

        with FakeTensorMode(allow_non_fake_inputs=True):
            qkv = [torch.empty(2, 4, 16, hd, dtype=dtype, device=device) for _ in range(5)]
            lse = torch.empty(2, 4, 16, device=device)
            rng = [torch.empty(2, dtype=torch.uint64, device=device), torch.empty((), dtype=torch.uint64,
                                                                                   device=device)]
            fw = make_fx(fwd, tracing_mode="fake")(*qkv[:3])
            bw = make_fx(bwd, tracing_mode="fake")(*qkv[:4], lse, qkv[4], *(rng if device == "cuda" else []))
        return [fe.partition(gm, prefix="r", static_fallback=False, canonical=True) for gm in (fw, bw)]

    def test_same_regions(self):
        try:
            gpu = self.trace("cuda")
        except Exception as ex:  # a torch without CUDA support can't make fake CUDA tensors
            self.skipTest("no fake CUDA tensors: %s" % ex)
        cpu = self.trace("cpu")
        for g, c, name in zip(gpu, cpu, aten_map.GPU_ONLY):
            self.assertIn(name, [op for r in g.regions.values() for op in r.ops], g.report())
            self.assertEqual({v[0] for v in g.support.left.values()} - {"aten.empty.memory_format",
                                                                         "<built-in function getitem>"}, set(),
                             g.report())
            self.assertEqual([r.fg for r in g.regions.values()], [r.fg for r in c.regions.values()])
        self.assertIn("sdpa(", gpu[0].fg_text())
        self.assertIn("sdpa_bwd(", gpu[1].fg_text())

    def test_refused_where_codegen_lacks(self):
        try:
            fw, bw = self.trace("cuda", hd=96)
        except Exception as ex:
            self.skipTest("no fake CUDA tensors: %s" % ex)
        ops = [op for r in fw.regions.values() for op in r.ops]
        self.assertIn("aten._scaled_dot_product_flash_attention.default", ops)  # the forward takes d96
        left = {v[0]: v[1] for v in bw.support.left.values()}
        self.assertIn("head dim 96", left.get("aten._scaled_dot_product_flash_attention_backward.default", ""))
        pt = self.trace("cpu", dtype=torch.float32)[0]
        left = {v[0]: v[1] for v in pt.support.left.values()}
        self.assertIn("f32 attention", left.get("aten._scaled_dot_product_flash_attention_for_cpu.default", ""))


class CudnnAttentionTest(unittest.TestCase):
    """cuDNN's attention kernels (PyTorch's default on Hopper), traced on fake
    CUDA tensors as a training graph holds them: the regions are the flash
    kernels' with the logsumexp reshaped to cuDNN's [B,H,Sq,1] (forward) and
    back (backward), GQA included; and those regions, run in fusec's
    interpreter, give what the CPU flash kernel gives (its logsumexp with a
    trailing 1: the one convention of both, natural log of the scaled rows).
    The mapping is what is tested, so every test but the last traces with
    FUSEC_BACKEND_ATTENTION=all (the default, flash, leaves cuDNN's kernels
    to PyTorch)."""

    B, H, HK, S, D = 2, 4, 2, 16, 64

    def setUp(self):
        env = unittest.mock.patch.dict(os.environ, {"FUSEC_BACKEND_ATTENTION": "all"})
        env.start()
        self.addCleanup(env.stop)

    def trace(self, mask=False, cum=False):
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.proxy_tensor import make_fx

        aten = torch.ops.aten
        B, H, HK, S, D = self.B, self.H, self.HK, self.S, self.D

        def fwd(q, k, v, *bias):
            r = aten._scaled_dot_product_cudnn_attention(q * 2, k, v, bias[0] if bias else None, True, 0.0, True,
                                                         False)
            return r[0] + 1, q, k, v, r[0], r[1], r[6], r[7]  # the saved values, the rng state too

        def bwd(q, k, v, o, lse, do, seed, offset, *cums):
            g = aten._scaled_dot_product_cudnn_attention_backward(do, q, k, v, o, lse, seed, offset, None,
                                                                  *(cums or (None, None)), S, S, 0.0, True)
            return g[0] * 2, g[1], g[2]

        with FakeTensorMode(allow_non_fake_inputs=True):
            mk = lambda h: torch.empty(B, h, S, D, dtype=torch.bfloat16, device="cuda")  # noqa: E731
            q, k, v, o, do = mk(H), mk(HK), mk(HK), mk(H), mk(H)
            lse = torch.empty(B, H, S, 1, device="cuda")
            seed, offset = (torch.empty((), dtype=torch.int64, device="cuda") for _ in range(2))
            bias = [torch.empty(B, H, S, S, dtype=torch.bfloat16, device="cuda")] if mask else []
            fw = make_fx(fwd, tracing_mode="fake")(q, k, v, *bias)
            cums = [torch.empty(B + 1, dtype=torch.int32, device="cuda") for _ in range(2)] if cum else []
            bw = make_fx(bwd, tracing_mode="fake")(q, k, v, o, lse, do, seed, offset, *cums)
        return [fe.partition(gm, prefix="r", static_fallback=False, canonical=True) for gm in (fw, bw)]

    def test_regions(self):
        try:
            fw, bw = self.trace()
        except Exception as ex:  # a torch without CUDA support can't make fake CUDA tensors
            self.skipTest("no fake CUDA tensors: %s" % ex)
        for pt, name in zip((fw, bw), ("aten._scaled_dot_product_cudnn_attention.default",
                                       "aten._scaled_dot_product_cudnn_attention_backward.default")):
            self.assertIn(name, [op for r in pt.regions.values() for op in r.ops], pt.report())
            self.assertEqual({v[0] for v in pt.support.left.values()} - {"aten.empty.memory_format",
                                                                          "<built-in function getitem>"}, set(),
                             pt.report())
        f, b = fw.fg_text(), bw.fg_text()
        self.assertRegex(f, r"(v\d+_r0), (v\d+_r1) = sdpa\(v\d+, v\d+, v\d+, causal=true\)\n"
                            r"  \2x = reshape\(\2, shape=\[2, 4, 16, 1\]\)")
        self.assertRegex(b, r"sdpa_bwd\(v\d+, v\d+, v\d+, v\d+, v\d+, reshape\(v\d+, shape=\[2, 4, 16\]\), "
                            r"causal=true\)")
        self.assertRegex(b, r"v\d+: bf16\[2, 2, 16, 64\]")  # k, v: two key heads (GQA)
        # the forward region in fusec's interpreter against the CPU flash kernel
        fe._out_meta(fw)
        (r,) = fw.regions.values()
        torch.manual_seed(5)
        args = [torch.randn(self.B, h, self.S, self.D).to(torch.bfloat16) for h in (self.H, self.HK, self.HK)]
        with tempfile.TemporaryDirectory() as work:
            path = os.path.join(work, "r.fg")
            with open(path, "w") as fh:
                fh.write(r.fg)
            outs = fe._fgrun_call(FGRUN, path, r.gname, args, r.out_dtypes, work)
        ke, ve = (t.repeat_interleave(self.H // self.HK, dim=1) for t in args[1:])
        o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(args[0] * 2, ke, ve, 0.0, True)[:2]
        lses = [t for t in outs if tuple(t.shape) == (self.B, self.H, self.S, 1)]
        self.assertEqual(len(lses), 1, [t.shape for t in outs])
        self.assertLess((lses[0] - lse.unsqueeze(-1)).abs().max().item(), 1e-2)
        os_ = [t for t in outs if tuple(t.shape) == tuple(o.shape)]
        self.assertTrue(any((t.float() - o.float()).abs().max().item() < 2e-2 for t in os_), "no output is o")

    def test_mask_and_varlen_left_to_torch(self):
        try:
            fw, _ = self.trace(mask=True)
        except Exception as ex:
            self.skipTest("no fake CUDA tensors: %s" % ex)
        left = {v[0]: v[1] for v in fw.support.left.values()}
        self.assertIn("attention mask", left.get("aten._scaled_dot_product_cudnn_attention.default", ""))
        _, bw = self.trace(cum=True)  # packed variable-length sequences: not fusec's
        left = {v[0]: v[1] for v in bw.support.left.values()}
        self.assertIn("variable-length", left.get("aten._scaled_dot_product_cudnn_attention_backward.default", ""))


    def test_attention_choice_leaves_kernels_to_torch(self):
        """FUSEC_BACKEND_ATTENTION: flash leaves cuDNN's kernels to PyTorch,
        none every attention kernel; an unknown value is an error."""
        cudnn = "aten._scaled_dot_product_cudnn_attention.default"
        for choice, taken in (("flash", False), ("none", False), ("all", True)):
            with unittest.mock.patch.dict(os.environ, {"FUSEC_BACKEND_ATTENTION": choice}):
                try:
                    fw, _ = self.trace()
                except Exception as ex:
                    self.skipTest("no fake CUDA tensors: %s" % ex)
            left = {v[0]: v[1] for v in fw.support.left.values()}
            ops = [op for r in fw.regions.values() for op in r.ops]
            self.assertEqual(cudnn in ops, taken, fw.report())
            if not taken:
                self.assertEqual(left.get(cudnn), "left to PyTorch (FUSEC_BACKEND_ATTENTION=%s)" % choice)
        sup = fe.Support()
        flash = "aten._scaled_dot_product_flash_attention.default"
        self.assertTrue(fe._attention_taken("flash", flash))
        self.assertFalse(fe._attention_taken("none", flash))
        with unittest.mock.patch.dict(os.environ, {"FUSEC_BACKEND_ATTENTION": "cudnn"}):
            with self.assertRaisesRegex(ValueError, "FUSEC_BACKEND_ATTENTION=cudnn: expected one of all, flash, none"):
                fe.Support()
        with unittest.mock.patch.dict(os.environ):
            os.environ.pop("FUSEC_BACKEND_ATTENTION")
            self.assertEqual(fe.Support().attention, "flash")  # the default
        self.assertEqual(sup.attention, "all")  # setUp's


class CoverTest(unittest.TestCase):
    """export.strided_cover: the dense tensor a window is a slice of."""

    def test_packed_qkv_views(self):
        B, S, H, D = 2, 5, 3, 4
        qkv = torch.randn(B, S, 3 * H * D)
        for k, t in enumerate(qkv.split(H * D, dim=2)):
            x = t.view(B, S, H, D).transpose(1, 2)  # [B, H, S, D], strides (S*3HD, D, 3HD, 1)
            c = fe.strided_cover(x)
            self.assertEqual(c.shape, [B, S, 3 * H, D])
            self.assertEqual(c.starts, [0, 0, k * H, 0])
            self.assertEqual(c.ends, [B, S, (k + 1) * H, D])
            self.assertEqual(c.perm, [0, 2, 1, 3])
            self.assertEqual(c.rel, k * H * D)
            base = x.as_strided(c.shape, c.stride, x.storage_offset() - c.rel)
            self.assertEqual(base.data_ptr(), qkv.data_ptr())
            self.assertTrue(torch.equal(base[:, :, k * H:(k + 1) * H, :].permute(c.perm), x))

    def test_row_window_and_size_one_dims(self):
        x = torch.randn(6, 10)[1:, 2:7].unsqueeze(1)  # [5, 1, 5], strides (10, ., 1), offset 12
        c = fe.strided_cover(x)
        self.assertEqual((c.shape, c.starts, c.ends, c.perm, c.rel), ([1, 5, 10], [0, 0, 2], [1, 5, 7], [1, 0, 2], 2))

    def test_no_cover(self):
        for x, why in ((torch.randn(4, 6), "row-major"), (torch.randn(6, 4).t(), "dense, transposed"),
                       (torch.randn(4, 12)[:, ::2], "a step"), (torch.randn(4, 1).expand(4, 6), "an expand"),
                       (torch.randn(4, 8).as_strided((4, 6), (4, 1), 0), "overlapping rows"),
                       (torch.randn(40).as_strided((4, 6), (8, 1), 5), "a row boundary crossed")):
            self.assertIsNone(fe.strided_cover(x), why)


class BadInputTest(unittest.TestCase):
    def test_unmapped_op_reported(self):
        def f(x):
            y = torch.cumsum(x * 2, 0)  # no mapping
            return torch.cumsum(y, 1) + 1

        x = torch.randn(4, 5)
        ex = fe.export(f, (x,))
        u = ex.manifest["unsupported"]["aten.cumsum.default"]
        self.assertEqual(u["count"], 2)
        self.assertEqual(u["reason"], "no mapping to .fg")
        self.assertTrue(any(s.endswith("test_export.py:%d" % (f.__code__.co_firstlineno + 1)) for s in u["sources"]),
                        u["sources"])
        self.assertIn("aten.cumsum.default x2", ex.report())
        assert_close(self, ex.run_interpreted(x, fgrun=FGRUN), f(x), ex.report())

    def test_unsupported_dtype_reported(self):
        def f(x):
            return (x * 2).abs() + 1

        x = torch.randn(3, 4, dtype=torch.complex64)
        ex = fe.export(f, (x,))
        u = ex.manifest["unsupported"]
        self.assertIn("complex64", u["aten.mul.Tensor"]["reason"])
        self.assertIn("complex64", u["aten.abs.default"]["reason"])
        ops = [op for r in ex.partitioned.regions.values() for op in r.ops]
        self.assertEqual(ops, ["aten.add.Tensor"])  # abs's result is f32: the add is fusec's
        assert_close(self, ex.run_interpreted(x, fgrun=FGRUN), f(x), ex.report())

    def test_mask_attention_left_to_torch(self):
        def f(q, m):
            return F.scaled_dot_product_attention(q, q, q, attn_mask=m) * 2

        q, m = torch.randn(1, 2, 4, 8), torch.randn(4, 4)
        ex = fe.export(f, (q, m), compiled_only=False)
        self.assertIn("attention mask", ex.manifest["unsupported"]["aten.scaled_dot_product_attention.default"]
                      ["reason"])
        assert_close(self, ex.run_interpreted(q, m, fgrun=FGRUN), f(q, m), ex.report())


class CommandLineTest(unittest.TestCase):
    def test_cli(self):
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "model.py")
            with open(script, "w") as f:
                f.write("import torch\n"
                        "def entry():\n"
                        "    m = torch.nn.Sequential(torch.nn.LayerNorm(16), torch.nn.Linear(16, 16), torch.nn.GELU())\n"
                        "    return m, (torch.randn(4, 16),)\n")
            env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
            r = subprocess.run([sys.executable, "-m", "fusec.export", script + ":entry", "-o", d, "--check-compile",
                                "--fusec", FUSEC], capture_output=True, text=True, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("left to PyTorch: aten.addmm.default x1", r.stdout)
            with open(os.path.join(d, "entry.json")) as f:
                m = json.load(f)
            self.assertEqual([n["kind"] for n in m["nodes"] if n["kind"] == "region"], ["region", "region"])
            with open(os.path.join(d, "entry.fg")) as f:
                self.assertIn("graph entry_r0(", f.read())
            r = subprocess.run([sys.executable, "-m", "fusec.export", script + ":nope", "-o", d],
                               capture_output=True, text=True, env=env)
            self.assertEqual(r.returncode, 1)
            self.assertIn("has no function 'nope'", r.stderr)


if __name__ == "__main__":
    unittest.main()
