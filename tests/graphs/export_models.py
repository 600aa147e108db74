#!/usr/bin/env python3
"""Writes tests/graphs/export_models.fg: the exporter's graphs of the models in
python/tests/fixtures.py (run from the repository root, with torch)."""
import sys; sys.path.insert(0, 'python'); sys.path.insert(0, 'python/tests')
import torch
import fusec.export as fe
from fixtures import MLP, Block
torch.manual_seed(0)
parts = []
ex = fe.export(MLP(768, 3072), (torch.randn(512, 768),), name="mlp_f32"); parts.append(ex.fg)
ex = fe.export(MLP(768, 3072).to(torch.bfloat16), (torch.randn(512, 768, dtype=torch.bfloat16),), name="mlp_bf16"); parts.append(ex.fg)
T = torch.export.Dim("T", min=1, max=65536)
ex = fe.export(MLP(768, 3072).to(torch.bfloat16), (torch.randn(64, 768, dtype=torch.bfloat16),), ({0: T},), name="mlp_dyn"); parts.append(ex.fg)
ex = fe.export_training(Block(768, 12), (torch.randn(2, 64, 768, requires_grad=True),), name="gpt_block"); parts.append(ex.fg)
hdr = """# Exercises: graphs as the PyTorch exporter writes them (python/fusec/export.py),
# so the GPU check runs what the exporter and the torch.compile backend hand
# fusec: GPT-2-sized MLP blocks (LayerNorm, GELU tanh, residual; the Linear
# layers left to PyTorch) in f32 and bf16, one with a symbolic T, and
# nanoGPT's block in training (AOTAutograd's forward and backward regions:
# norm backward with its weight gradients, GELU backward, bias gradients,
# returned weight transposes as views). Regenerate with
# tests/graphs/export_models.py (run from the repository root).

"""
open('tests/graphs/export_models.fg', 'w').write(hdr + "".join(parts))
