import torch
import torch.nn as nn
import torch.nn.functional as F
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[16, 64], num_warps=4), static_shapes=False)
def _relu_bias(y: torch.Tensor, bias: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    m, n = y.size()
    for tile_m, tile_n in hl.tile([m, n]):
        v = y[tile_m, tile_n]
        out[tile_m, tile_n] = torch.where(v < 0, torch.zeros_like(v), v) + bias[tile_n][None, :]
    return out


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = F.linear(x, self.gemm.weight)  # the matrix product stays in cuBLAS (allowed: gemm)
        return _relu_bias(y, self.bias, torch.empty_like(y))
