"""A Llama-style decoder stack, PyTorch only, for fusec's model runs:
RMSNorm, rotary position embeddings (RoPE), SwiGLU feed-forward and
grouped-query attention (GQA: n_kv_head key/value heads shared by
n_head / n_kv_head query heads each), pre-norm residual blocks, untied
output head. Random initialization; no weights are downloaded.

LlamaConfig.small() is about GPT-2 small's size (12 layers, 768 wide,
12 query heads over 4 key/value heads, SwiGLU width 2048, vocabulary 32000,
context 1024); LlamaConfig.tiny() is for quick runs and CPU tests.

Attention is PyTorch's scaled_dot_product_attention (the key/value heads
repeated to the query heads first) until fusec's `sdpa` runs in the code
generator.

    model = Llama(LlamaConfig.small())
    loss = model(idx, targets)       # idx, targets: int64 [B, T]
"""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class LlamaConfig:
    block_size: int = 1024
    vocab_size: int = 32000
    n_layer: int = 12
    n_head: int = 12
    n_kv_head: int = 4
    n_embd: int = 768
    ffn_hidden: int = 2048
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    @staticmethod
    def small():
        return LlamaConfig()

    @staticmethod
    def tiny():
        # head dim 64 (fusec's sdpa and sdpa_bwd take 64 and 128), two query heads over one k/v head
        return LlamaConfig(block_size=64, vocab_size=512, n_layer=2, n_head=2, n_kv_head=1, n_embd=128,
                           ffn_hidden=128)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rope_tables(head_dim, n, theta):
    """cos and sin of the rotation angles, [n, head_dim / 2] each."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    ang = torch.outer(torch.arange(n, dtype=torch.float32), inv)
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    """x: [B, H, T, D]; the pairs (x[..., :D/2], x[..., D/2:]) rotated (the
    rotate-half form of Llama's Hugging Face code)."""
    d = x.shape[-1] // 2
    x1, x2 = x[..., :d], x[..., d:]
    c, s = cos[: x.shape[2]], sin[: x.shape[2]]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).type_as(x)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head, self.n_kv = cfg.n_head, cfg.n_kv_head
        self.hd = cfg.n_embd // cfg.n_head
        self.wq = nn.Linear(cfg.n_embd, cfg.n_head * self.hd, bias=False)
        self.wk = nn.Linear(cfg.n_embd, cfg.n_kv_head * self.hd, bias=False)
        self.wv = nn.Linear(cfg.n_embd, cfg.n_kv_head * self.hd, bias=False)
        self.wo = nn.Linear(cfg.n_head * self.hd, cfg.n_embd, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        q = self.wq(x).view(B, T, self.n_head, self.hd).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_kv, self.hd).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_kv, self.hd).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = self.n_head // self.n_kv
        k = k[:, :, None].expand(B, self.n_kv, rep, T, self.hd).reshape(B, self.n_head, T, self.hd)
        v = v[:, :, None].expand(B, self.n_kv, rep, T, self.hd).reshape(B, self.n_head, T, self.hd)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(B, T, C))


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.w1 = nn.Linear(cfg.n_embd, cfg.ffn_hidden, bias=False)
        self.w3 = nn.Linear(cfg.n_embd, cfg.ffn_hidden, bias=False)
        self.w2 = nn.Linear(cfg.ffn_hidden, cfg.n_embd, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.n_embd, cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.n_embd, cfg.norm_eps)
        self.feed_forward = FeedForward(cfg)

    def forward(self, x, cos, sin):
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = RMSNorm(cfg.n_embd, cfg.norm_eps)
        self.output = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        cos, sin = rope_tables(cfg.n_embd // cfg.n_head, cfg.block_size, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x, self.rope_cos, self.rope_sin)
        logits = self.output(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
