"""The MX formats of the CPU interpreter (fgrun) against PyTorch on the CPU.

- f8e8m0: fusec's cast from f32 against torch's x.to(torch.float8_e8m0fnu)
  on every sign/exponent/top-13-mantissa-bit combination of f32 (random low
  bits) plus the exact ties and the powers of two: 4.2M patterns.
- f4e2m1: the packed .npy bytes that fgrun writes, viewed by torch as
  torch.float4_e2m1fn_x2 and unpacked low nibble first, give the values.
- MXFP8: tests/graphs/mx_formats.fg's mxfp8_e4m3 against torchao's to_mx
  (FLOOR) written out in torch, including an all-zero block.
Usage: mx_torch_check.py FGRUN REPO. Exits 77 (skipped) without numpy/torch
or without torch's MX dtypes."""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError:
    sys.exit(77)
if not hasattr(torch, "float8_e8m0fnu") or not hasattr(torch, "float4_e2m1fn_x2"):
    sys.exit(77)

FGRUN, REPO = sys.argv[1], sys.argv[2]
fails = 0


def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    fails += not ok


def fgrun(src, graph, inputs, out):
    args = [FGRUN, src, "--graph", graph, "--out", out]
    if inputs:
        args += ["--inputs", ",".join(inputs)]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)


with tempfile.TemporaryDirectory() as t:
    # f8e8m0 from f32
    rng = np.random.default_rng(0)
    hi = np.arange(1 << 22, dtype=np.uint64) << 10
    lo = rng.integers(0, 1 << 10, size=1 << 22, dtype=np.uint64)
    exps = np.arange(1 << 9, dtype=np.uint32) << 23
    bits = np.concatenate([(hi | lo).astype(np.uint32), exps | 0x400000, exps])
    x = bits.view(np.float32)
    np.save(f"{t}/x.npy", x)
    with open(f"{t}/e.fg", "w") as f:
        f.write(f"graph g(x: f32[{x.size}]) {{\n  return cast(x, dtype=f8e8m0)\n}}\n")
    fgrun(f"{t}/e.fg", "g", [f"{t}/x.npy"], f"{t}/e")
    got = np.load(f"{t}/e/0.npy")
    want = torch.from_numpy(x.copy()).to(torch.float8_e8m0fnu).view(torch.uint8).numpy()
    check(np.array_equal(got, want), f"f8e8m0 cast == torch float8_e8m0fnu on {x.size} f32 patterns "
          f"({int((got != want).sum())} differ)")
    dec = torch.from_numpy(np.arange(255, dtype=np.uint8)).view(torch.float8_e8m0fnu).float()
    check(bool((dec == torch.exp2(torch.arange(255, dtype=torch.float64) - 127).float()).all()),
          "torch's e8m0 codes 0..254 are 2^(e-127), as fusec decodes them")

    # f4e2m1 packing
    src = os.path.join(REPO, "tests/golden/fgrun/mx_formats.fg")
    fgrun(src, "make", [], f"{t}/m")
    packed = np.load(f"{t}/m/0.npy")
    tv = torch.from_numpy(packed).view(torch.float4_e2m1fn_x2)
    vals = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6])
    u = tv.view(torch.uint8).numpy()
    unpacked = np.stack([vals[u & 0xF], vals[u >> 4]], -1).reshape(2, 16)
    want = np.array([0, 0, .5, 1, 1, 1, 1.5, 2, 2, 2, 2, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4] + [6] * 11)
    check(tuple(tv.shape) == (2, 8) and np.array_equal(unpacked.reshape(-1), want),
          "f4e2m1 .npy bytes are torch.float4_e2m1fn_x2, element 2k in the low nibble")

    # MXFP8 against torchao's to_mx (FLOOR)
    torch.manual_seed(0)
    xb = (torch.randn(37, 4096) * torch.exp(torch.randn(37, 4096) * 3)).to(torch.bfloat16)
    xb[0, :32] = 0
    np.save(f"{t}/xb.npy", xb.view(torch.int16).numpy().view(np.uint16))
    d = xb.reshape(37, 128, 32).float()
    amax = d.abs().amax(-1, keepdim=True)
    e = ((amax.view(torch.int32) >> 23) & 0xFF) - 127
    s = torch.where(torch.isfinite(amax), torch.clamp(e - 8, min=-127, max=128) + 127, 255).to(torch.uint8)
    inv = (254 - s.to(torch.int32)).to(torch.uint8).view(torch.float8_e8m0fnu).float()
    q = torch.clamp(d * inv, -448, 448).to(torch.float8_e4m3fn).reshape(37, 4096)
    fgrun(os.path.join(REPO, "tests/graphs/mx_formats.fg"), "mxfp8_e4m3", [f"{t}/xb.npy"], f"{t}/q")
    check(np.array_equal(np.load(f"{t}/q/0.npy"), q.view(torch.uint8).numpy()),
          "MXFP8 e4m3 elements == torchao to_mx (FLOOR)")
    check(np.array_equal(np.load(f"{t}/q/1.npy"), s.reshape(37, 128).numpy()),
          "MXFP8 e8m0 scales == torchao to_mx (FLOOR)")

print(f"mx_torch_check: {fails} failed")
sys.exit(1 if fails else 0)
