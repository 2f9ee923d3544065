"""aten.native_layer_norm.default: the input viewed as [rows, N] (N = the normalised trailing
elements), one program per row, mean and variance in float32; a row of up to 4096 is read once and
kept in registers, a longer one is read in three passes (mean, variance, output); returns (output,
mean, rstd) with the statistics shaped [*leading, 1, ...]."""
import torch
import triton
import triton.language as tl


@triton.jit
def _write(x, cols, mask, mean, rstd, w_ptr, b_ptr, out_row, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
           ACC: tl.constexpr):
    y = (x - mean) * rstd
    if HAS_W:
        y = y * tl.load(w_ptr + cols, mask=mask, other=0).to(ACC)
    if HAS_B:
        y = y + tl.load(b_ptr + cols, mask=mask, other=0).to(ACC)
    tl.store(out_row + cols, y.to(out_row.dtype.element_ty), mask=mask)


@triton.jit
def _layer_norm(x_ptr, w_ptr, b_ptr, out_ptr, mean_ptr, rstd_ptr, N, eps,
                HAS_W: tl.constexpr, HAS_B: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr, ONE_TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row, out_row = x_ptr + row * N, out_ptr + row * N
    if ONE_TILE:  # the row in one tile (N <= BLOCK): read once, kept in registers
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < N, other=0).to(ACC)
        mean = tl.sum(x, axis=0) / N
        d = tl.where(cols < N, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / N + eps)  # biased variance (divide by N)
        _write(x, cols, cols < N, mean, rstd, w_ptr, b_ptr, out_row, HAS_W, HAS_B, ACC)
    else:  # longer rows: three passes (sum, squared deviations, output), the later ones mostly from cache
        total = tl.zeros([BLOCK], dtype=ACC)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            total += tl.load(x_row + cols, mask=cols < N, other=0).to(ACC)
        mean = tl.sum(total, axis=0) / N
        squares = tl.zeros([BLOCK], dtype=ACC)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            d = tl.where(cols < N, tl.load(x_row + cols, mask=cols < N, other=0).to(ACC) - mean, 0.0)
            squares += d * d
        rstd = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / N + eps)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(x_row + cols, mask=cols < N, other=0).to(ACC)
            _write(x, cols, cols < N, mean, rstd, w_ptr, b_ptr, out_row, HAS_W, HAS_B, ACC)
    tl.store(mean_ptr + row, mean.to(mean_ptr.dtype.element_ty))
    tl.store(rstd_ptr + row, rstd.to(rstd_ptr.dtype.element_ty))


def kernel(input, normalized_shape, weight, bias, eps):
    axis = input.dim() - len(normalized_shape)
    x = input.contiguous()
    out = torch.empty_like(x)
    # the saved statistics: float32 for float16/bfloat16 inputs on CUDA; on the CPU the input dtype,
    # unless the weight is float32 (mixed dtypes), then float32
    half = x.dtype in (torch.float16, torch.bfloat16)
    mixed = weight is not None and weight.dtype == torch.float32
    stat_dtype = torch.float32 if half and (x.is_cuda or mixed) else x.dtype
    stat_shape = list(x.shape[:axis]) + [1] * len(normalized_shape)
    mean = torch.empty(stat_shape, dtype=stat_dtype, device=x.device)
    rstd = torch.empty(stat_shape, dtype=stat_dtype, device=x.device)
    rows = mean.numel()
    N = x.numel() // rows if rows else 0
    if rows and N:
        w = weight.contiguous() if weight is not None else x  # any pointer: HAS_W is False
        b = bias.contiguous() if bias is not None else x
        BLOCK = min(4096, triton.next_power_of_2(N))
        _layer_norm[(rows,)](x, w, b, out, mean, rstd, N, eps, HAS_W=weight is not None,
                             HAS_B=bias is not None, ACC=tl.float64 if x.dtype == torch.float64 else tl.float32,
                             BLOCK=BLOCK, ONE_TILE=N <= BLOCK, num_warps=8 if BLOCK >= 4096 else 4)
    return out, mean, rstd
