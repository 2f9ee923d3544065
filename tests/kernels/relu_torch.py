"""Cheats on purpose: calls PyTorch's relu and launches no Triton kernel."""
import torch


def kernel(self):
    return torch.relu(self)
