"""Hand-written answer to KernelBench level 2 40_Matmul_Scaling_ResidualAdd: GEMM, then x * s + x."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _epilogue(y_ptr, bias_ptr, out_ptr, M, N, p0, p1, p2, p3, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    where = rows[:, None].to(tl.int64) * N + cols[None, :]
    x = tl.load(y_ptr + where, mask=mask, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    x = x + bias[None, :]
    x = x * p0 + x
    tl.store(out_ptr + where, x, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        weight, bias = self.matmul.weight, self.matmul.bias
        y = torch.mm(x, weight.t())  # the GEMM stays in cuBLAS; the epilogue is one Triton pass
        out = torch.empty_like(y)
        M, N = y.shape
        p = [float(v) for v in (self.scaling_factor,)] + [0.0] * 4
        _epilogue[(triton.cdiv(M, 32), triton.cdiv(N, 128))](y, bias, out, M, N, p[0], p[1], p[2], p[3],
                                                             BLOCK_M=32, BLOCK_N=128, num_warps=4)
        return out
