"""cat_promote_types.py, except that a cat of one tensor returns that tensor itself: right values,
but aten always allocates. Must fail as aliasing (wrong_alias), not as 'no Triton kernel launched'."""
import functools

import torch
import triton
import triton.language as tl


@triton.jit
def _copy_rows(src_ptr, dst_ptr, width, src_row, dst_row, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < width
    values = tl.load(src_ptr + row * src_row + cols, mask=mask)
    tl.store(dst_ptr + row * dst_row + cols, values.to(dst_ptr.dtype.element_ty), mask=mask)


def kernel(tensors, dim=0):
    if len(tensors) == 1:
        return tensors[0]
    dtype = functools.reduce(torch.promote_types, [t.dtype for t in tensors])
    kept = [t for t in tensors if not (t.dim() == 1 and t.shape[0] == 0)]  # legacy empty inputs are skipped
    if not kept:
        return torch.empty((0,), dtype=dtype, device=tensors[0].device)
    first = kept[0]
    dim = dim % first.dim()
    shape = list(first.shape)
    shape[dim] = sum(t.shape[dim] for t in kept)
    out = torch.empty(shape, dtype=dtype, device=first.device)
    outer = first.shape[:dim].numel()
    inner = first.shape[dim + 1:].numel()
    offset = 0
    for t in kept:
        width = t.shape[dim] * inner
        if width and outer:
            src = t.contiguous()
            grid = (outer, triton.cdiv(width, 1024))
            _copy_rows[grid](src, out.view(-1)[offset * inner:], width, width, shape[dim] * inner, BLOCK=1024)
        offset += t.shape[dim]
    return out
