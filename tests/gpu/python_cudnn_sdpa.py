#!/usr/bin/env python3
"""On the GPU machine: what the exporter's cuDNN attention rows assume
(python/fusec/aten_map.py FLASH, docs/pytorch.md "The mapping table"), checked
against PyTorch's own kernels:

- _scaled_dot_product_cudnn_attention's logsumexp is flash's ([B,H,Sq], the
  natural log of each row's sum of exponentials of scaled scores) with a
  trailing 1: equal within bf16's rounding of the scores;
- its backward, given flash's logsumexp in its place, gives its own dq, dk,
  dv (so a fusec forward feeding a cuDNN backward left in PyTorch, or the
  other way round, is right);
- its output equals flash's; dk, dv have the key heads (GQA).

Shapes: causal and not, D 64 and 128, Sq not a multiple of 64, GQA 6/2.
Exit 0 when every case holds (a case whose kernel PyTorch refuses on this
machine is reported and skipped, but not all of them), 1 otherwise, 77
without CUDA.

  python3 tests/gpu/python_cudnn_sdpa.py
"""
import sys

import torch

if not torch.cuda.is_available():
    print("python_cudnn_sdpa: no CUDA device; skipped")
    sys.exit(77)

aten = torch.ops.aten
torch.manual_seed(0)
print("torch %s, cuDNN %s, %s" % (torch.__version__, torch.backends.cudnn.version(), torch.cuda.get_device_name()))
bad = ran = 0
CASES = ((2, 6, 6, 300, 64, True), (2, 6, 2, 256, 128, False), (2, 6, 2, 300, 64, True), (1, 4, 4, 77, 128, True))
for B, H, Hk, S, D, causal in CASES:
    def mk(h):
        return torch.randn(B, h, S, D, device="cuda", dtype=torch.bfloat16)

    q, k, v, do = mk(H), mk(Hk), mk(Hk), mk(H)
    ke, ve = (t.repeat_interleave(H // Hk, dim=1) for t in (k, v))
    case = "[%d,%d/%d,%d,%d] causal=%s" % (B, H, Hk, S, D, causal)
    try:
        r = aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False)
        g = aten._scaled_dot_product_cudnn_attention_backward(do, q, k, v, r[0], r[1], r[6], r[7], None, None, None,
                                                              S, S, 0.0, causal)
    except RuntimeError as ex:
        print("%s: cuDNN refused it here, skipped (%s)" % (case, str(ex).split("\n")[0][:160]))
        continue
    ran += 1
    f = aten._scaled_dot_product_flash_attention(q, ke, ve, 0.0, causal)
    o, lse = r[0], r[1]
    g2 = aten._scaled_dot_product_cudnn_attention_backward(do, q, k, v, o, f[1].unsqueeze(-1).contiguous(), r[6], r[7],
                                                           None, None, None, S, S, 0.0, causal)
    d_lse = (lse.reshape(B, H, S) - f[1]).abs().max().item()
    d_o = (o.float() - f[0].float()).abs().max().item()
    d_g = max(((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-6)).item()
              for a, b in zip(g, g2))
    ok = (tuple(lse.shape) == (B, H, S, 1) and lse.dtype == torch.float32 and d_lse < 2e-2 and d_o < 2e-2
          and d_g < 2e-2 and tuple(g[1].shape) == (B, Hk, S, D) and tuple(g[2].shape) == (B, Hk, S, D))
    bad += not ok
    print("%s %s: lse %s strides %s (flash's differs by %.2e), o strides %s (flash's by %.2e), "
          "backward with flash's lse: relative %.2e, dk %s"
          % ("PASS" if ok else "FAIL", case, tuple(lse.shape), lse.stride(), d_lse, o.stride(), d_o, d_g,
             tuple(g[1].shape)))
# Which kernel PyTorch's SDPA picks by default here in eager (cuDNN's on),
# at the models' shapes (examples/models: GPT-2 small, the Llama-style GQA
# 12/4) and the suite's. What AOTAutograd traces for Inductor or fusec may
# differ (make_fx and AOTAutograd have picked differently, docs/pytorch.md):
# train_step.py --cudnn-sdp's profiles tell. Information only.
BACKENDS = {getattr(torch.nn.attention.SDPBackend, n).value: n for n in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH",
                                                                         "CUDNN_ATTENTION", "ERROR")}
for B, H, Hk, S, D, causal in ((8, 12, 12, 1024, 64, True), (8, 12, 4, 1024, 64, True), (4, 32, 32, 4096, 128, True),
                               (8, 16, 16, 2048, 64, False)):
    q = torch.empty(B, H, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.empty(B, Hk, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    try:
        c = torch._fused_sdp_choice(q, k, k, is_causal=causal, enable_gqa=H != Hk)
        name = BACKENDS.get(c, str(c))
    except Exception as ex:  # a torch without the private helper
        name = "unknown (%s)" % ex
    print("default SDPA kernel at [%d,%d/%d,%d,%d] causal=%s: %s" % (B, H, Hk, S, D, causal, name))
print("python_cudnn_sdpa: %d of %d cases failed, %d skipped" % (bad, ran, len(CASES) - ran))
sys.exit(1 if bad or not ran else 0)
