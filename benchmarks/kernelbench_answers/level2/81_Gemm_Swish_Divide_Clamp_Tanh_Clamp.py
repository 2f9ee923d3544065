"""Hand-written answer to KernelBench level 2 81_Gemm_Swish_Divide_Clamp_Tanh_Clamp: GEMM, then Swish, /2, clamp, tanh, clamp."""
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
    x = x * tl.sigmoid(x) / 2.0
    x = tl.minimum(tl.maximum(x, -1.0), 1.0)
    x = (2.0 * tl.sigmoid(2.0 * x) - 1.0)
    x = tl.minimum(tl.maximum(x, -1.0), 1.0)
    tl.store(out_ptr + where, x, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, x):
        weight, bias = self.gemm.weight, self.gemm.bias
        y = torch.mm(x, weight.t())  # the GEMM stays in cuBLAS; the epilogue is one Triton pass
        out = torch.empty_like(y)
        M, N = y.shape
        p = [float(v) for v in (0.0,)] + [0.0] * 4
        _epilogue[(triton.cdiv(M, 32), triton.cdiv(N, 128))](y, bias, out, M, N, p[0], p[1], p[2], p[3],
                                                             BLOCK_M=32, BLOCK_N=128, num_warps=4)
        return out
