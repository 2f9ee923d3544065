import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer and dropout, in training mode as KernelBench leaves its models: random."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 16)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):
        return self.dropout(self.linear(x))


def get_inputs():
    return [torch.rand(8, 16)]


def get_init_inputs():
    return []
