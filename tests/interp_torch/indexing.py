#!/usr/bin/env python3
"""The reference interpreter's indexing ops against PyTorch on the CPU.

gather, take_along_dim, index_select, scatter_add and index_add at small
shapes, every index dtype, indices in range (PyTorch raises otherwise) and
out of range (compared with PyTorch at the clamped indices: fusec's defined
behaviour, docs/format.md 5.10). Gathers must agree bitwise; the scatters
in f64 and f32 to a tight tolerance (PyTorch's CPU order of additions is
its own), in i64 exactly.

  indexing.py FGRUN      (exit 77: skipped when torch is missing)
"""
import os
import sys
import tempfile

import numpy as np

from harness import run_fgrun, torch  # exits 77 without torch

FGRUN = sys.argv[1]
rng = np.random.default_rng(20)
fails = 0
cases = 0

NP = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "i32": np.int32, "i16": np.int16,
      "i8": np.int8, "u8": np.uint8}


def shape_str(s):
    return "[" + ",".join(str(d) for d in s) + "]"


def run(body, params, arrays):
    """Runs a one-graph file through fgrun; returns result 0."""
    with tempfile.TemporaryDirectory() as d:
        sig = ", ".join(f"{n}: {t}{shape_str(a.shape)}" for (n, t), a in zip(params, arrays))
        src = f"graph g({sig}) {{\n  return {body}\n}}\n"
        with open(os.path.join(d, "g.fg"), "w") as f:
            f.write(src)
        res = run_fgrun(FGRUN, os.path.join(d, "g.fg"), "g", arrays, d)
        if isinstance(res, str):
            raise RuntimeError(f"fgrun failed on\n{src}\n{res}")
        return res[0]


def check(name, got, want, exact):
    global fails, cases
    cases += 1
    want = want.numpy()
    ok = got.shape == want.shape and got.dtype == want.dtype
    if ok:
        ok = np.array_equal(got, want) if exact else np.allclose(got, want, rtol=1e-6, atol=1e-6)
    if not ok:
        fails += 1
        print(f"FAIL {name}: got {got.dtype}{got.shape}\n{got}\nwant {want.dtype}{want.shape}\n{want}")


def indices(shape, size, dt, in_range):
    lo, hi = (0, size) if in_range else (-3, size + 4)
    if dt == "u8":
        lo = 0
    return rng.integers(lo, hi, size=shape).astype(NP[dt])


def clamped(i, size):
    return torch.from_numpy(np.clip(i.astype(np.int64), 0, size - 1))


for dt in ["i8", "u8", "i16", "i32", "i64"]:
    for in_range in [True, False]:
        tag = f"{dt} {'in range' if in_range else 'out of range'}"
        # gather: index smaller than x outside dim, along each dim
        x = rng.standard_normal((5, 7, 6)).astype(np.float32)
        for dim in [0, 1, 2, -1]:
            ishape = [4, 3, 5]
            ishape[dim] = 9
            i = indices(ishape, x.shape[dim], dt, in_range)
            got = run(f"gather(x, i, dim={dim})", [("x", "f32"), ("i", dt)], [x, i])
            want = torch.gather(torch.from_numpy(x), dim, clamped(i, x.shape[dim]))
            check(f"gather dim={dim} {tag}", got, want, True)
        # take_along_dim: broadcasting outside dim
        xb = rng.standard_normal((5, 1, 6)).astype(np.float64)
        i = indices((1, 4, 3), 6, dt, in_range)
        got = run("take_along_dim(x, i, dim=2)", [("x", "f64"), ("i", dt)], [xb, i])
        want = torch.take_along_dim(torch.from_numpy(xb), clamped(i, 6), dim=2)
        check(f"take_along_dim {tag}", got, want, True)
        # index_select: an embedding lookup and a middle dim
        table = rng.standard_normal((11, 13)).astype(np.float32)
        i = indices((17,), 11, dt, in_range)
        got = run("index_select(t, i, dim=0)", [("t", "f32"), ("i", dt)], [table, i])
        check(f"index_select dim=0 {tag}", got,
              torch.index_select(torch.from_numpy(table), 0, clamped(i, 11)), True)
        i = indices((4,), 7, dt, in_range)
        got = run("index_select(x, i, dim=1)", [("x", "f32"), ("i", dt)], [x, i])
        check(f"index_select dim=1 {tag}", got,
              torch.index_select(torch.from_numpy(x), 1, clamped(i, 7)), True)
        # scatter_add: index smaller than src; f64, f32 and i64
        for xt in ["f64", "f32", "i64"]:
            if xt == "i64":
                base = rng.integers(-50, 50, size=(6, 5)).astype(np.int64)
                src = rng.integers(-50, 50, size=(8, 5)).astype(np.int64)
            else:
                base = rng.standard_normal((6, 5)).astype(NP[xt])
                src = rng.standard_normal((8, 5)).astype(NP[xt])
            for dim in [0, 1]:
                ishape = (7, 4) if dim == 0 else (5, 8)
                s2 = src if dim == 0 else rng.standard_normal((6, 9)).astype(src.dtype)
                i = indices(ishape, base.shape[dim], dt, in_range)
                got = run(f"scatter_add(x, i, s, dim={dim})", [("x", xt), ("i", dt), ("s", xt)],
                          [base, i, s2])
                want = torch.from_numpy(base).scatter_add(dim, clamped(i, base.shape[dim]),
                                                          torch.from_numpy(s2))
                check(f"scatter_add {xt} dim={dim} {tag}", got, want, xt == "i64")
            # index_add: embedding backward, [N, D] rows into a [V, D] table
            i = indices((8,), 6, dt, in_range)
            got = run("index_add(x, i, s, dim=0)", [("x", xt), ("i", dt), ("s", xt)],
                      [base, i, src])
            want = torch.from_numpy(base).index_add(0, clamped(i, 6), torch.from_numpy(src))
            check(f"index_add {xt} {tag}", got, want, xt == "i64")

print(f"{cases - fails} passed, {fails} failed")
sys.exit(1 if fails else 0)
