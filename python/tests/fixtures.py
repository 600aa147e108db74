"""The small models the Python tests share: the CPU tests here
(test_backend.py, test_distributed.py) and the GPU checks
(tests/gpu/python_backend.py, which puts this folder on sys.path).
The full models (GPT-2 small, the Llama-style stack) are in examples/models.
"""
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    """LayerNorm, Linear, tanh GELU, Linear, residual."""

    def __init__(self, d=256, h=1024):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, h), nn.Linear(h, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x)), approximate="tanh"))


class Block(nn.Module):
    """nanoGPT's block: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, d=256, heads=4):
        super().__init__()
        self.h = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))
