"""Wrong on purpose: a correct softmax, except over a dimension of one element, where it answers
ones without a launch (right for finite inputs only: softmax of NaN or of an infinity is NaN)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_rows(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * cols + offsets, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(self, dim, half_to_float):
    out_dtype = torch.float32 if half_to_float else self.dtype
    dim = dim % max(self.dim(), 1)
    if self.dim() and self.shape[dim] == 1:
        return torch.ones(self.shape, dtype=out_dtype, device=self.device)
    x = self.movedim(dim, -1).contiguous() if self.dim() else self.reshape(1)
    out = torch.empty(x.shape, dtype=out_dtype, device=self.device)
    cols = x.shape[-1] if x.dim() else 1
    rows = x.numel() // max(cols, 1)
    if x.numel():
        _softmax_rows[(rows,)](x, out, rows, cols, BLOCK=triton.next_power_of_2(cols))
    return out.movedim(-1, dim) if self.dim() else out.reshape(())
