import torch
import torch.nn as nn


class Model(nn.Module):
    """A ReLU on a 2-d batch."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 16
dim = 512


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
