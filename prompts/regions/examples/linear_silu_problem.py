"""The problem the fused-GEMM worked example answers: a linear layer's product with its weight
as the graph holds it (a transposed view), its bias, then SiLU."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, weight_t, bias):
        return torch.nn.functional.silu(torch.mm(x, weight_t) + bias)


def get_inputs():
    return [torch.randn(96, 80, dtype=torch.bfloat16), torch.randn(48, 80, dtype=torch.bfloat16).t(),
            torch.randn(48, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
