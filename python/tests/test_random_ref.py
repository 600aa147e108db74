#!/usr/bin/env python3
"""The interpreter's rand, randn and dropout against python/fusec/random_ref.py
(numpy), bitwise: the stream docs/format.md 5.11 states, reproduced outside
fusec. Runs fgrun on a graph of every random op and dtype with seeds and
offsets at the edges of their words (0, -1, 2^63, 2^32 - 1, i32 and u8
tensors), and compares each result's bits with the reference.

Run: python3 python/tests/test_random_ref.py FGRUN. Exit 77 (skipped)
without numpy."""
import importlib.util
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("skipped: numpy not importable")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "random_ref", os.path.join(HERE, "..", "fusec", "random_ref.py"))
R = importlib.util.module_from_spec(spec)
spec.loader.exec_module(R)

GRAPH = """
graph g(seed: i64, off: i64, s32: i32[1], o8: u8[], x: f32[7, 33], xd: f64[5, 3], xb: bf16[3, 11]) {
  r32 = rand(seed, off, shape=[7, 33])
  r64 = rand(seed, off, shape=[2, 3, 5], dtype=f64)
  rb = rand(seed, off, shape=[37], dtype=bf16)
  rh = rand(seed, off, shape=[37], dtype=f16)
  r8 = rand(seed, off, shape=[19], dtype=f8e4m3)
  r85 = rand(seed, off, shape=[19], dtype=f8e5m2)
  rt = rand(s32, o8, shape=[4, 9])
  rl = rand(123, 456, shape=[6])
  n32 = randn(seed, off, shape=[9, 13])
  n64 = randn(seed, off, shape=[21], dtype=f64)
  d32 = dropout(x, seed, off, p=0.3)
  d64 = dropout(xd, seed, off, p=0.5)
  db = dropout(xb, s32, o8, p=0.125)
  d0 = dropout(x, seed, off, p=0.0)
  d1 = dropout(x, seed, off, p=1.0)
  return r32, r64, rb, rh, r8, r85, rt, rl, n32, n64, d32, d64, db, d0, d1
}
"""

M64 = 2 ** 64 - 1


def bf16_bits_to_f32(u16):
    return (u16.astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16_bits(f):
    u = f.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    return u.astype(np.uint16)


def f8_value(bits, e4m3):
    bits = bits.astype(np.int64)
    sign = np.where(bits & 0x80, -1.0, 1.0)
    eb, mb, bias = (4, 3, 7) if e4m3 else (5, 2, 15)
    e = (bits >> mb) & ((1 << eb) - 1)
    m = bits & ((1 << mb) - 1)
    v = np.where(e == 0, m / 2.0 ** mb * 2.0 ** (1 - bias), (1 + m / 2.0 ** mb) * 2.0 ** (e - bias))
    return sign * v


def main():
    fgrun = sys.argv[1]
    fails = 0
    cases = [(0, 0), (-1, -1), (2 ** 63, 2 ** 32 - 1), (0x0123456789ABCDEF, 12345),
             (42, 2 ** 40 + 3)]
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        gpath = os.path.join(tmp, "g.fg")
        with open(gpath, "w") as f:
            f.write(GRAPH)
        for seed, off in cases:
            s32, o8 = (seed * 7 + 3) & 0xFFFFFFFF, (off * 5 + 1) & 0xFF
            s32 = s32 - 2 ** 32 if s32 >= 2 ** 31 else s32
            x = rng.standard_normal((7, 33)).astype(np.float32)
            xd = rng.standard_normal((5, 3))
            xbf = bf16_bits_to_f32(f32_to_bf16_bits(rng.standard_normal((3, 11))))
            ins = {
                "seed": np.array(seed & M64, dtype=np.uint64).astype(np.int64),
                "off": np.array(off & M64, dtype=np.uint64).astype(np.int64),
                "s32": np.array([s32], dtype=np.int32), "o8": np.array(o8, dtype=np.uint8),
                "x": x, "xd": xd, "xb": f32_to_bf16_bits(xbf),
            }
            paths = []
            for k, v in ins.items():
                p = os.path.join(tmp, k + ".npy")
                np.save(p, v)
                paths.append(p)
            outd = os.path.join(tmp, "out")
            subprocess.run([fgrun, gpath, "--graph", "g", "--inputs", ",".join(paths), "--out", outd],
                           check=True)
            got = [np.load(os.path.join(outd, "%d.npy" % i)) for i in range(15)]
            ref = [
                R.rand((7, 33), "f32", seed, off), R.rand((2, 3, 5), "f64", seed, off),
                R.rand((37,), "bf16", seed, off), R.rand((37,), "f16", seed, off),
                R.rand((19,), "f8e4m3", seed, off), R.rand((19,), "f8e5m2", seed, off),
                R.rand((4, 9), "f32", s32, o8), R.rand((6,), "f32", 123, 456),
                R.randn((9, 13), "f32", seed, off), R.randn((21,), "f64", seed, off),
                R.dropout(x, 0.3, seed, off), R.dropout(xd, 0.5, seed, off),
                R.dropout(xbf, 0.125, s32, o8), R.dropout(x, 0.0, seed, off),
                R.dropout(x, 1.0, seed, off),
            ]
            names = "r32 r64 rb rh r8 r85 rt rl n32 n64 d32 d64 db d0 d1".split()
            for name, g, r in zip(names, got, ref):
                if name == "rb":
                    g = bf16_bits_to_f32(g)
                elif name == "rh":
                    g = g.view(np.float16).astype(np.float32)
                elif name in ("r8", "r85"):
                    g = f8_value(g, name == "r8").astype(np.float32)
                elif name == "db":
                    g, r = g, f32_to_bf16_bits(r)
                if name == "n64":  # f64 transcendentals: libm against numpy
                    ok = np.allclose(g, r, rtol=1e-14, atol=1e-14)
                else:
                    ok = g.shape == r.shape and g.dtype == r.dtype and \
                        np.array_equal(g.view(np.uint8), r.view(np.uint8))
                if not ok:
                    fails += 1
                    print("FAIL %s seed=%d off=%d\n got %s\n ref %s" % (name, seed, off, g.ravel()[:8],
                                                                        r.ravel()[:8]))
    checks = len(cases) * 15
    print("%d passed, %d failed" % (checks - fails, fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
