#!/usr/bin/env python3
"""Host time of a training step: fusec against torch.compile default, one
process (examples/models/train_step.py's models, batch 8 x block size, bf16
autocast, fused AdamW; PyTorch's default SDPA choice, cuDNN's on Hopper).

    python3 tests/gpu/step_host_time.py gpt2 fusec,default [SEQS]

Per mode, after 8 warm-up steps: the median over 20 steps of the time the
host takes to enqueue a step (perf_counter around it, no synchronization
inside; the GPU idle at its start), of the step with a synchronization
after it, and of the forward alone (enqueue); then a cProfile of 3 steps,
the 30 functions with the most time of their own. Where the enqueue time
is about the synchronized step's, the step is bound by the host. Regions
come from $FUSEC_BACKEND_CACHE as for train_step.py (docs/pytorch.md).
SEQS (e.g. 256,512,1024): the steps take these sequence lengths in turn,
every mode compiled with dynamic=True (train_step.py --seqs)."""
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "models"))

import torch  # noqa: E402
import train_step as ts  # noqa: E402  (puts python/ on the path)
import fusec.backend as fb  # noqa: E402


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    name, modes = argv[0], argv[1].split(",")
    if not torch.cuda.is_available():
        print("step_host_time: no CUDA device; skipped")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = True
    cfg = ts.make_config(name, "small")
    torch.manual_seed(0)
    init = {k: v.clone() for k, v in ts.MODELS[name][0](cfg).state_dict().items()}
    seqs = [int(t) for t in argv[2].split(",")] if len(argv) == 3 else None
    data = ts.batches(cfg, 4 * len(seqs) if seqs else 4, 8, cfg.block_size, "cuda", seqs=seqs)
    n = len(data)
    for mode in modes:
        torch._dynamo.reset()
        model = ts.MODELS[name][0](cfg).cuda()
        model.load_state_dict(init)
        opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1, fused=True)
        m = ts.compiled(model, mode, fb.Stats(), "loader", dynamic=True if seqs else None)

        def fwd(x, y):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return m(x, y)

        def step(x, y):
            opt.zero_grad(set_to_none=True)
            loss = fwd(x, y)
            loss.backward()
            opt.step()
            return loss

        for i in range(max(8, n)):
            step(*data[i % n])
            torch.cuda.synchronize()
        host, wall, fw = [], [], []
        for i in range(20):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step(*data[i % n])
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            host.append((t1 - t0) * 1e3)
            wall.append((t2 - t0) * 1e3)
        for i in range(20):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            loss = fwd(*data[i % n])
            fw.append((time.perf_counter() - t0) * 1e3)
            del loss
        print("%s %s: host ms a step (enqueue, median of 20) %.2f; wall with sync %.2f; forward alone host %.2f"
              % (name, mode, statistics.median(host), statistics.median(wall), statistics.median(fw)), flush=True)
        torch.cuda.synchronize()
        pr = cProfile.Profile()
        pr.enable()
        for i in range(3):
            step(*data[i % n])
        pr.disable()
        torch.cuda.synchronize()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(30)
        print("\n".join(s.getvalue().splitlines()[:60]), flush=True)
        del m, model, opt
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
