"""The model of examples/deploy's export step (README.md): a transformer MLP
block, LayerNorm -> Linear -> GELU -> Linear -> residual, in f32.
`python -m fusec.export model.py:entry` cuts it into the regions fusec
fuses (the LayerNorm, the GELU, the residual add) around the two matmuls it
leaves to PyTorch (cuBLAS)."""
import torch


class Block(torch.nn.Module):
    def __init__(self, d=256, h=1024):
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, h)
        self.fc2 = torch.nn.Linear(h, d)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x))))


def entry():
    torch.manual_seed(0)
    return Block().eval(), (torch.randn(64, 256),)
