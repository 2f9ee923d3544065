import torch
import torch.nn as nn


class Model(nn.Module):
    """A transformer's feed-forward block: layer norm, linear, GELU, linear, and the residual."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


batch_size = 4
tokens = 8
dim = 32
hidden = 128


def get_inputs():
    return [torch.rand(batch_size, tokens, dim)]


def get_init_inputs():
    return [dim, hidden]
