import torch
import torch.nn as nn


class Model(nn.Module):
    """Layer normalization over the last two dimensions, with its affine weight and bias."""

    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


batch_size = 8
features = 16
dim = 32


def get_inputs():
    return [torch.rand(batch_size, features, dim)]


def get_init_inputs():
    return [(features, dim)]
