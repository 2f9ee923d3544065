"""aten.mse_loss.default: the elementwise squared error, then the reduction the integer argument
names (0 none, 1 mean, 2 sum): each of at most 1024 programs sums a contiguous chunk of the squared
errors in float32 (looping over it, two blocks in flight) and writes it to a buffer, and a second
one-program kernel adds those partial sums in a fixed order (deterministic, no atomics)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _squared_error(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    d = tl.load(x_ptr + offsets, mask=mask).to(tl.float32) - tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, (d * d).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _chunk_sums(x_ptr, y_ptr, partial_ptr, n, CHUNK, BLOCK: tl.constexpr):
    """partial[p]: the sum of the squared errors of elements [p * CHUNK, (p + 1) * CHUNK)."""
    first = tl.program_id(0).to(tl.int64) * CHUNK
    total = tl.zeros([BLOCK], dtype=tl.float32)
    for start in tl.range(0, CHUNK, BLOCK, num_stages=2):  # CHUNK is a multiple of BLOCK
        offsets = first + start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offsets, mask=offsets < n, other=0).to(tl.float32)
        d = x - tl.load(y_ptr + offsets, mask=offsets < n, other=0).to(tl.float32)
        total += d * d
    tl.store(partial_ptr + tl.program_id(0), tl.sum(total, axis=0))


@triton.jit
def _sum_partials(partial_ptr, out_ptr, count, divisor, BLOCK: tl.constexpr):
    total = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, count, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        total += tl.load(partial_ptr + offsets, mask=offsets < count, other=0)
    tl.store(out_ptr, (tl.sum(total, axis=0) / divisor).to(out_ptr.dtype.element_ty))


def kernel(self, target, reduction=1):
    shape = torch.broadcast_shapes(self.shape, target.shape)
    x, y = self.expand(shape).contiguous(), target.expand(shape).contiguous()
    dtype = torch.result_type(self, target)
    n, BLOCK = x.numel(), 2048
    if reduction == 0:
        out = torch.empty(shape, dtype=dtype, device=x.device)
        if n:
            _squared_error[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
        return out
    out = torch.empty((), dtype=dtype, device=x.device)
    chunk = max(1, triton.cdiv(triton.cdiv(n, 1024), BLOCK)) * BLOCK  # at most 1024 chunks: one step to add them
    programs = triton.cdiv(n, chunk)
    partials = torch.empty(max(programs, 1), dtype=torch.float32, device=x.device)
    if n:
        _chunk_sums[(programs,)](x, y, partials, n, chunk, BLOCK=BLOCK)
    divisor = float(n) if reduction == 1 else 1.0  # the mean of nothing is nan (0 / 0), as in PyTorch
    _sum_partials[(1,)](partials, out, programs, divisor, BLOCK=1024)
    return out
