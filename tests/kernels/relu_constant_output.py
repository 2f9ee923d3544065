"""Wrong on purpose: returns zeros of the right shape and dtype, made by an allowed allocation,
whatever the input."""
import torch


def kernel(self):
    return torch.zeros_like(self)
