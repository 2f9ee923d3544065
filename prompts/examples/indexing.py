"""aten.index_select.default: the input viewed as [outer, size, inner] around `dim` (a contiguous
copy), one program per BLOCK output elements, each reading the index entry of its position along
`dim`; int32 and int64 indices, 0-dim inputs, empty indices."""
import torch
import triton
import triton.language as tl


@triton.jit
def _index_select(x_ptr, idx_ptr, out_ptr, n, size, count, inner, idx_stride, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    i, rest = offsets % inner, offsets // inner
    j, o = rest % count, rest // count  # output position (o, j, i)
    src = tl.load(idx_ptr + j * idx_stride, mask=mask, other=0).to(tl.int64)  # int32 indices too
    tl.store(out_ptr + offsets, tl.load(x_ptr + (o * size + src) * inner + i, mask=mask), mask=mask)


def kernel(self, dim, index):
    x = self.contiguous()
    dim = dim % max(x.dim(), 1)
    shape = list(x.shape)
    size = shape[dim] if shape else 1
    inner = 1
    for s in shape[dim + 1:]:
        inner *= s
    if shape:
        shape[dim] = index.numel()
    out = torch.empty(shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    if n:
        BLOCK = 1024
        _index_select[(triton.cdiv(n, BLOCK),)](x, index, out, n, size, index.numel(), inner,
                                                index.stride(0) if index.dim() else 0, BLOCK=BLOCK)
    return out
