"""A small model in KernelBench's format: two linear layers with a ReLU between them."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.up, self.down = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return [32]
