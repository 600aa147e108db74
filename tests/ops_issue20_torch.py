#!/usr/bin/env python3
"""The reference interpreter's issue 20 ops against PyTorch on the CPU.

cosh sinh fma lerp contiguous stack softmax log_softmax logsumexp argmax
argmin cumsum, at small odd shapes in several dtypes, with the edge cases PyTorch
defines: ties and NaN for argmax/argmin (the first index; NaN wins), rows
of -inf and +inf for logsumexp (-inf, +inf, never NaN), lerp weights on
both sides of 0.5 and negative, fma rounded once (checked against the exact
product-sum rounded to the dtype). Each graph runs through `fgrun` (the
interpreter) and is compared with torch.

usage: ops_issue20_torch.py FGRUN    (exit 77 when torch does not import)
"""
import os
import subprocess
import sys
import tempfile
from fractions import Fraction

try:
    import numpy as np
    import torch
except ImportError:
    print("torch or numpy missing: skipped")
    sys.exit(77)

FGRUN = sys.argv[1] if len(sys.argv) > 1 else "build/tools/fgrun"
TMP = tempfile.mkdtemp(prefix="ops20_")
failures = []
checked = 0

TORCH_DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
            "bf16": torch.bfloat16, "i32": torch.int32, "i64": torch.int64}


def to_np(t):
    """A torch tensor as what fgrun reads (bf16 as its raw u16 bits)."""
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def from_np(a, dt):
    if dt == "bf16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def run(name, src, inputs, out_dts):
    """Runs graph `g` of src on inputs (torch tensors); the results as torch."""
    d = os.path.join(TMP, name)
    os.makedirs(d, exist_ok=True)
    fg = os.path.join(d, "g.fg")
    with open(fg, "w") as f:
        f.write(src)
    paths = []
    for i, t in enumerate(inputs):
        p = os.path.join(d, f"in{i}.npy")
        np.save(p, to_np(t))
        paths.append(p)
    cmd = [FGRUN, fg, "--graph", "g", "--out", d]
    if paths:
        cmd += ["--inputs", ",".join(paths)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"{name}: fgrun failed: {r.stderr.strip()}")
        return None
    return [from_np(np.load(os.path.join(d, f"{i}.npy")), dt) for i, dt in enumerate(out_dts)]


def same(name, got, want, rtol=0.0, atol=0.0):
    """Equal shapes and dtypes, NaN where want is NaN, infinities equal, the
    rest within rtol/atol (0: bitwise)."""
    global checked
    checked += 1
    if got is None:
        return
    if tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
        failures.append(f"{name}: got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}")
        return
    if not got.is_floating_point():
        if not torch.equal(got, want):
            failures.append(f"{name}: got {got.tolist()}, want {want.tolist()}")
        return
    g, w = got.double(), want.double()
    nan_ok = torch.equal(torch.isnan(g), torch.isnan(w))
    fin = torch.isfinite(w)
    inf_ok = torch.equal(g[~fin & ~torch.isnan(w)], w[~fin & ~torch.isnan(w)])
    close = torch.allclose(g[fin], w[fin], rtol=rtol, atol=atol) if rtol or atol else \
        torch.equal(g[fin], w[fin])
    if not (nan_ok and inf_ok and close):
        diff = (g - w).abs()
        failures.append(f"{name}: mismatch (max abs diff {diff[fin].max().item() if fin.any() else 0})\n"
                        f"  got  {got.flatten()[:12].tolist()}\n  want {want.flatten()[:12].tolist()}")


def rand(shape, dt, lo=-3.0, hi=3.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dt in ("i32", "i64"):
        return torch.randint(-5, 6, shape, generator=g, dtype=TORCH_DT[dt])
    return (torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(TORCH_DT[dt])


def ty(dt, shape):
    return f"{dt}[{','.join(str(s) for s in shape)}]"


# ---- pointwise: cosh sinh ----
for dt in ("f32", "f64", "bf16", "f16"):
    x = rand((3, 37), dt, seed=1)
    x[0, :4] = torch.tensor([0.0, -0.0, float("inf"), float("nan")]).to(x.dtype)
    src = f"graph g(x: {ty(dt, x.shape)}) {{\n  return cosh(x), sinh(x)\n}}\n"
    out = run(f"cosh_sinh_{dt}", src, [x], [dt, dt])
    if out:
        tol = {"f32": 1e-6, "f64": 1e-14, "bf16": 8e-3, "f16": 1e-3}[dt]
        same(f"cosh {dt}", out[0], torch.cosh(x.double()).to(x.dtype), rtol=tol)
        same(f"sinh {dt}", out[1], torch.sinh(x.double()).to(x.dtype), rtol=tol)

# ---- fma: one rounding, against the exact a*b+c rounded to the dtype ----


def round_exact(q, dt):
    """Fraction q rounded to nearest-even in dt (f32 or f64)."""
    if dt == "f64":
        return float(q)
    f = np.float32(float(q))
    cands = [f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf))]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - q),
                                     int(np.array(c).view(np.uint32)) & 1))
    return float(best)


for dt in ("f32", "f64"):
    a, b, c = rand((5, 19), dt, seed=2), rand((5, 19), dt, seed=3), rand((19,), dt, seed=4)
    # products that cancel c almost exactly: where a rounded a*b + c loses bits
    a[0, :5] = torch.tensor([1 + 2**-20, 3.0, 1e-3, 7.0, 0.1]).to(a.dtype)
    b[0, :5] = torch.tensor([1 - 2**-20, 1 / 3, 1e3, 1 / 7, 10.0]).to(b.dtype)
    c[:5] = torch.tensor([-1.0, -1.0, -1.0, -1.0, -1.0]).to(c.dtype)
    src = f"graph g(a: {ty(dt, a.shape)}, b: {ty(dt, b.shape)}, c: {ty(dt, c.shape)}) {{\n  return fma(a, b, c)\n}}\n"
    out = run(f"fma_{dt}", src, [a, b, c], [dt])
    if out:
        cb = c.expand_as(a)
        want = torch.tensor([round_exact(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), dt)
                             for x, y, z in zip(a.flatten().tolist(), b.flatten().tolist(),
                                                cb.flatten().tolist())], dtype=a.dtype).reshape(a.shape)
        same(f"fma {dt}", out[0], want)
# bf16: computed in f32, rounded once to bf16
a, b, c = rand((4, 9), "bf16", seed=5), rand((4, 9), "bf16", seed=6), rand((4, 9), "bf16", seed=7)
out = run("fma_bf16", "graph g(a: bf16[4,9], b: bf16[4,9], c: bf16[4,9]) {\n  return fma(a, b, c)\n}\n",
          [a, b, c], ["bf16"])
if out:
    want = torch.tensor([round_exact(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), "f32")
                         for x, y, z in zip(a.float().flatten().tolist(), b.float().flatten().tolist(),
                                            c.float().flatten().tolist())]).reshape(a.shape)
    same("fma bf16", out[0], want.to(torch.bfloat16))
# integers wrap: i32 a*b + c
a, b, c = rand((3, 7), "i32", seed=8), rand((3, 7), "i32", seed=9), rand((3, 7), "i32", seed=10)
out = run("fma_i32", "graph g(a: i32[3,7], b: i32[3,7], c: i32[3,7]) {\n  return fma(a, b, c)\n}\n",
          [a, b, c], ["i32"])
if out:
    same("fma i32", out[0], torch.addcmul(c, a, b))

# ---- lerp ----
for dt in ("f32", "f64", "bf16"):
    a, b = rand((4, 21), dt, seed=11), rand((4, 21), dt, seed=12)
    w = rand((4, 21), dt, lo=-1.5, hi=1.5, seed=13)
    w[0, :6] = torch.tensor([0.0, 0.5, -0.5, 1.0, 0.49999, float("nan")]).to(w.dtype)
    src = (f"graph g(a: {ty(dt, a.shape)}, b: {ty(dt, b.shape)}, w: {ty(dt, w.shape)}) {{\n"
           f"  return lerp(a, b, w), lerp(a, b, 0.75), lerp(a, b, -0.25)\n}}\n")
    out = run(f"lerp_{dt}", src, [a, b, w], [dt, dt, dt])
    if out:
        # torch's CPU kernel is fma(w, b-a, a) / fma(w-1, b-a, b), as fusec:
        # equal but for its scalar tail, which may round each step
        tol = {"f32": 2e-7, "f64": 1e-15, "bf16": 0}[dt]
        same(f"lerp {dt}", out[0], torch.lerp(a, b, w), rtol=tol, atol=tol)
        same(f"lerp {dt} 0.75", out[1], torch.lerp(a, b, 0.75), rtol=tol, atol=tol)
        same(f"lerp {dt} -0.25", out[2], torch.lerp(a, b, -0.25), rtol=tol, atol=tol)

# ---- contiguous, stack ----
x = rand((3, 5), "f32", seed=14)
y = rand((3, 5), "i32", seed=15)
src = ("graph g(x: f32[3,5], y: i32[3,5]) {\n"
       "  return contiguous(transpose(x, dim0=0, dim1=1)), stack(x, y, x, dim=1), stack(y, y, dim=-1),"
       " stack(x, dim=0)\n}\n")
out = run("stack", src, [x, y], ["f32", "f32", "i32", "f32"])
if out:
    same("contiguous", out[0], x.t().contiguous())
    same("stack promote dim=1", out[1], torch.stack([x, y.float(), x], dim=1))
    same("stack dim=-1", out[2], torch.stack([y, y], dim=-1))
    same("stack one", out[3], torch.stack([x], dim=0))

# ---- softmax, log_softmax ----
for dt in ("f32", "f64", "bf16", "f16"):
    x = rand((5, 33), dt, seed=16)
    x[1, 3] = float("-inf")
    x[2, :] = float("-inf")
    x[3, 7] = float("nan")
    src = (f"graph g(x: {ty(dt, x.shape)}) {{\n"
           "  return softmax(x, dim=-1), log_softmax(x, dim=1), softmax(x, dim=0), "
           "log_softmax(x, dim=0, dtype=f64)\n}\n")
    out = run(f"softmax_{dt}", src, [x], [dt, dt, dt, "f64"])
    if out:
        tol = {"f32": 2e-6, "f64": 1e-13, "bf16": 8e-3, "f16": 1e-3}[dt]
        same(f"softmax {dt}", out[0], torch.softmax(x, dim=-1), rtol=tol, atol=tol)
        same(f"log_softmax {dt}", out[1], torch.log_softmax(x, dim=1), rtol=tol, atol=tol)
        same(f"softmax dim0 {dt}", out[2], torch.softmax(x, dim=0), rtol=tol, atol=tol)
        same(f"log_softmax f64 {dt}", out[3], torch.log_softmax(x, dim=0, dtype=torch.float64),
             rtol=1e-13, atol=1e-13)

# ---- logsumexp ----
for dt in ("f32", "f64", "bf16"):
    x = rand((6, 4, 7), dt, seed=17)
    x[0, :, :] = float("-inf")          # a whole row of -inf for dims=[1,2]
    x[1, 2, :] = float("-inf")          # a -inf row for dims=[2]
    x[2, 1, 3] = float("inf")           # +inf
    x[3, 0, 0] = float("nan")
    x[4, 3, :] = 80.0                   # large: needs the max subtracted
    src = (f"graph g(x: {ty(dt, x.shape)}) {{\n"
           "  return logsumexp(x, dims=[2]), logsumexp(x, dims=[1,2], keepdim=true), "
           "logsumexp(x), logsumexp(x, dims=[0])\n}\n")
    out = run(f"logsumexp_{dt}", src, [x], [dt] * 4)
    if out:
        tol = {"f32": 2e-6, "f64": 1e-13, "bf16": 8e-3}[dt]
        same(f"logsumexp dims=[2] {dt}", out[0], torch.logsumexp(x, dim=2), rtol=tol, atol=tol)
        same(f"logsumexp keepdim {dt}", out[1], torch.logsumexp(x, dim=[1, 2], keepdim=True),
             rtol=tol, atol=tol)
        same(f"logsumexp all {dt}", out[2], torch.logsumexp(x, dim=[0, 1, 2]), rtol=tol, atol=tol)
        same(f"logsumexp dims=[0] {dt}", out[3], torch.logsumexp(x, dim=0), rtol=tol, atol=tol)
xi = rand((3, 5), "i32", seed=18)
out = run("logsumexp_i32", "graph g(x: i32[3,5]) {\n  return logsumexp(x, dims=[1])\n}\n", [xi], ["f32"])
if out:
    same("logsumexp i32", out[0], torch.logsumexp(xi, dim=1), rtol=2e-6)

# ---- argmax, argmin ----
for dt in ("f32", "bf16", "f64", "i32", "i64"):
    x = rand((5, 13), dt, seed=19)
    if dt in ("i32", "i64"):
        x[0, :] = 3                     # all tied
    else:
        x = torch.round(x)              # many ties
        x[1, 4] = float("nan")
        x[1, 9] = float("nan")
        x[2, :] = float("-inf")
        x[3, 2] = -0.0
        x[3, 5] = 0.0
        x[4, 12] = float("nan")
    src = (f"graph g(x: {ty(dt, x.shape)}) {{\n"
           "  return argmax(x, dim=1), argmin(x, dim=-1, keepdim=true), argmax(x, dim=0), "
           "argmin(x), argmax(x, keepdim=true)\n}\n")
    out = run(f"argmax_{dt}", src, [x], ["i64"] * 5)
    if out:
        same(f"argmax {dt}", out[0], torch.argmax(x, dim=1))
        same(f"argmin keepdim {dt}", out[1], torch.argmin(x, dim=-1, keepdim=True))
        same(f"argmax dim0 {dt}", out[2], torch.argmax(x, dim=0))
        same(f"argmin flat {dt}", out[3], torch.argmin(x))
        same(f"argmax flat keepdim {dt}", out[4], torch.argmax(x, keepdim=True))

# ---- cumsum ----
for dt in ("f32", "f64", "bf16", "i32", "i64"):
    x = rand((4, 9, 5), dt, seed=20)
    if dt not in ("i32", "i64"):
        x[0, 3, 1] = float("inf")
        x[1, 2, 2] = float("nan")
    src = (f"graph g(x: {ty(dt, x.shape)}) {{\n"
           "  return cumsum(x, dim=1), cumsum(x, dim=-1), cumsum(x, dim=0)\n}\n")
    odt = dt if dt in ("f32", "f64", "bf16") else "i64"
    out = run(f"cumsum_{dt}", src, [x], [odt] * 3)
    if out:
        # torch accumulates f32 in double, fusec in f32; bf16 in f32 both
        tol = {"f32": 1e-6, "f64": 1e-14, "bf16": 8e-3}.get(dt, 0)
        for k, dim in enumerate((1, -1, 0)):
            same(f"cumsum {dt} dim={dim}", out[k], torch.cumsum(x, dim=dim), rtol=tol, atol=tol)
x = rand((3, 6), "i32", seed=21)
out = run("cumsum_dtype", "graph g(x: i32[3,6]) {\n  return cumsum(x, dim=1, dtype=f32), cumsum(x, dim=0, dtype=i32)\n}\n",
          [x], ["f32", "i32"])
if out:
    same("cumsum dtype=f32", out[0], torch.cumsum(x, dim=1, dtype=torch.float32))
    same("cumsum dtype=i32", out[1], torch.cumsum(x, dim=0, dtype=torch.int32))

if failures:
    print(f"{len(failures)} of {checked} checks failed:")
    for f in failures:
        print(" ", f)
    sys.exit(1)
print(f"ok: {checked} checks of the interpreter against torch {torch.__version__}")
