"""aten.index_select.default: the input read through its own strides, never copied. The output is
contiguous; each program takes BLOCK of its elements, unravels each one's position over up to four
dimensions (int32 arithmetic where the tensors allow it: divisions are several times faster) and
reads the input at the same position with the selected dimension's coordinate looked up in `index`.
More than four dimensions: the input is made contiguous and viewed as [outer, size, inner]. int32 and
int64 indices, 0-dim inputs, empty indices."""
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _index_select(x_ptr, idx_ptr, out_ptr, n, s1, s2, s3, t0, t1, t2, t3, dim_stride, idx_stride, DIM: tl.constexpr,
                  BLOCK: tl.constexpr, INDEX: tl.constexpr):
    offsets = tl.program_id(0).to(INDEX) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    i3, rest = offsets % s3, offsets // s3  # the output's sizes s0..s3 (s0 implied)
    i2, rest = rest % s2, rest // s2
    i1, i0 = rest % s1, rest // s1
    j = i0 if DIM == 0 else (i1 if DIM == 1 else (i2 if DIM == 2 else i3))  # the position along dim
    src = tl.load(idx_ptr + j * idx_stride, mask=mask, other=0).to(INDEX)  # int32 indices too
    # t_DIM is 0: j * dim_stride could overflow int32, src * dim_stride stays inside the input
    value = tl.load(x_ptr + i0 * t0 + i1 * t1 + i2 * t2 + i3 * t3 + src * dim_stride, mask=mask)
    tl.store(out_ptr + offsets, value, mask=mask)


def kernel(self, dim, index):
    dim = dim % max(self.dim(), 1)
    out_shape = list(self.shape)
    if out_shape:
        out_shape[dim] = index.numel()
    out = torch.empty(out_shape, dtype=self.dtype, device=self.device)
    x = self if self.dim() else self.reshape(1)
    if x.dim() > 4:  # [outer, size, inner]
        x, dim = x.contiguous().view(x.shape[:dim].numel(), x.shape[dim], x.shape[dim + 1:].numel()), 1
    n = out.numel()
    if n:
        pad = 4 - x.dim()
        sizes = [1] * pad + list(x.shape)
        sizes[pad + dim] = index.numel()
        strides = [0] * pad + list(x.stride())
        strides[pad + dim] = 0  # the selected dimension is reached through the index alone
        reach = sum((s - 1) * abs(t) for s, t in zip(x.shape, x.stride()))
        _index_select[(triton.cdiv(n, BLOCK),)](x, index, out, n, *sizes[1:], *strides, x.stride(dim),
                                                index.stride(0) if index.dim() else 0, DIM=pad + dim,
                                                BLOCK=BLOCK, INDEX=tl.int32 if max(n, reach) < 2**31 else tl.int64)
    return out
