"""A model in KernelBench's format that runs in float32 only: a matrix inverse, which the CPU
computes for float32 and float64 but not in half precision."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.linalg.inv(x @ x.transpose(-1, -2) + torch.eye(x.shape[-1], dtype=x.dtype))


def get_inputs():
    return [torch.randn(4, 8, 8)]


def get_init_inputs():
    return []
