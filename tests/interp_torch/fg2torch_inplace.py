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
import sys
import tempfile

from harness import ROOT, from_npy, npy, run_fgrun, torch  # exits 77 without torch; bench/ on the path
import fg2torch  # noqa: E402
import refs  # noqa: E402
import workloads  # noqa: E402

FGRUN = sys.argv[1]
SRC = os.path.join(ROOT, "tests", "graphs", "inplace.fg")

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
        res = run_fgrun(FGRUN, SRC, name, [npy(t) for t in ins], d)
        if isinstance(res, str):
            print("FAIL %s: fgrun: %s" % (name, res))
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
            ok, why = refs.compare(from_npy(res[j], r.dtype), r)
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
