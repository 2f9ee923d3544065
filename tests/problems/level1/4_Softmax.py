import torch
import torch.nn as nn


class Model(nn.Module):
    """A softmax over the features of each row: with 2**17 features its outputs are near 7.6e-6, below
    an absolute tolerance of 1e-5."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 2
dim = 131072


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
