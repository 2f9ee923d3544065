import torch
import torch.nn as nn


class Model(nn.Module):
    """Scales by the input's largest value, read on the host: a shape-only run cannot go past it."""

    def forward(self, x):
        y = torch.exp(x)
        return y / y.max().item()


def get_inputs():
    return [torch.rand(8, 8)]


def get_init_inputs():
    return []
