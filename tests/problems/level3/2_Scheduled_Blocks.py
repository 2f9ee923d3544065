import torch
import torch.nn as nn


class Model(nn.Module):
    """Residual blocks whose scale follows a schedule read while the model is built (as stochastic
    depth schedules are), so that building it needs values, not only shapes."""

    def __init__(self, dim, depth):
        super().__init__()
        scales = torch.linspace(0.5, 1.0, depth)
        self.scales = [scales[i].item() for i in range(depth)]
        self.blocks = nn.ModuleList(nn.Linear(dim, dim) for _ in range(depth))

    def forward(self, x):
        for scale, block in zip(self.scales, self.blocks):
            x = x + scale * torch.tanh(block(x))
        return x


def get_inputs():
    return [torch.rand(4, 16)]


def get_init_inputs():
    return [16, 3]
