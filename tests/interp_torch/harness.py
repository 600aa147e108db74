"""What the interpreter-against-PyTorch tests share: skipping without
torch (exit 77, ctest's skip code), bench/ on the import path, .npy
conversion of torch tensors (bf16 as its 16-bit pattern), and one graph of
a .fg file run through fgrun on given inputs."""
import os
import subprocess
import sys

import numpy as np

try:
    import torch
except ImportError:
    print("skipped: torch is not installed")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))


def npy(t):
    """A CPU tensor as a numpy array (bf16: its bits as uint16)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def from_npy(a, dtype):
    """npy's inverse, for a result of dtype."""
    if dtype == torch.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).reshape(a.shape)
    return torch.from_numpy(a).reshape(a.shape)


def run_fgrun(fgrun, src, graph, arrays, d):
    """Runs graph of file src through fgrun on the numpy arrays (written to
    directory d), results to d/<graph>/. Returns the result arrays in
    order, or the error text (a str) when fgrun fails."""
    paths = []
    for i, a in enumerate(arrays):
        paths.append(os.path.join(d, "%s_in%d.npy" % (graph, i)))
        np.save(paths[-1], a)
    out = os.path.join(d, graph)
    os.makedirs(out, exist_ok=True)
    p = subprocess.run([fgrun, src, "--graph", graph, "--inputs", ",".join(paths), "--out", out],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        return p.stdout.strip()
    n = len([f for f in os.listdir(out) if f.endswith(".npy")])
    return [np.load(os.path.join(out, "%d.npy" % j)) for j in range(n)]
