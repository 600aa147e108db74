#!/usr/bin/env python3
"""bench/fg2torch.py's in-place results (`return v -> p`, docs/format.md
6.1) against the reference interpreter on the CPU.

Every graph of tests/graphs/inplace.fg that fg2torch can write (lerp has
no PyTorch form there) runs through fgrun and through fg2torch's eager
function on the same inputs: each result must match the interpreter's,
each in-place result must be the tensor passed for its parameter (the same
object, updated), and a swap (`q -> p, p -> q`) must read both parameters
before either is written. Then bench/workloads.py check-refs on the
in-place AdamW workloads (bench/suite/adamw_inplace.fg).

  fg2torch_inplace.py FGRUN      (exit 77: skipped when torch is missing)
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

try:
    import torch
except ImportError:
    print("skipped: torch is not installed")
    sys.exit(77)

FGRUN = sys.argv[1]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import fg2torch  # noqa: E402
import refs  # noqa: E402
import workloads  # noqa: E402

SRC = os.path.join(ROOT, "tests", "graphs", "inplace.fg")


def npy(t):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def from_npy(a, dtype):
    if dtype == torch.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).reshape(a.shape)
    return torch.from_numpy(a).reshape(a.shape)


with open(SRC) as f:
    text = f.read()
fails = ran = 0
for name, params, _, results in fg2torch.parse(text):
    fn, sig = fg2torch.load(text, name)
    if any(s is None for _, _, s in sig):  # a scalar lr: a 0-d tensor for both
        ins = refs.make_inputs([x for x in sig if x[2] is not None], torch.device("cpu"), seed=3)
        ins += [torch.tensor(1e-3, dtype=fg2torch.dtype_of(d)) for _, d, s in sig if s is None]
    else:
        ins = refs.make_inputs(sig, torch.device("cpu"), seed=3)
    d = tempfile.mkdtemp()
    try:
        paths = []
        for i, t in enumerate(ins):
            paths.append(os.path.join(d, "in%d.npy" % i))
            np.save(paths[-1], npy(t))
        p = subprocess.run([FGRUN, SRC, "--graph", name, "--inputs", ",".join(paths), "--out", d],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            print("FAIL %s: fgrun: %s" % (name, p.stdout.strip()))
            fails += 1
            continue
        try:
            outs = fn(*ins)
        except ValueError as e:
            print("skip %s: %s" % (name, e))
            continue
        ran += 1
        written = dict(fn.inplace)
        if [t for _, t in results if t is not None] != [sig[i][0] for i in written.values()]:
            print("FAIL %s: fn.inplace %s" % (name, fn.inplace))
            fails += 1
        for j, r in enumerate(outs):
            if j in written and r is not ins[written[j]]:
                print("FAIL %s: result %d is not the tensor passed for '%s'" % (name, j, sig[written[j]][0]))
                fails += 1
            ok, why = refs.compare(from_npy(np.load(os.path.join(d, "%d.npy" % j)), r.dtype), r)
            print("%s %s result %d%s: %s" % ("ok  " if ok else "FAIL", name, j,
                                             " (in place)" if j in written else "", why))
            fails += not ok
    finally:
        shutil.rmtree(d)
if ran < 7:
    print("FAIL: only %d graphs ran" % ran)
    fails += 1
bad = workloads.check_refs(FGRUN, [w["name"] for w in workloads.W if w["name"].startswith("adamw_inplace")])
sys.exit(1 if fails or bad else 0)
