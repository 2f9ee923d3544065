"""Wrong on purpose: relu by a Triton kernel that also counts the negative elements; when it finds
none, the wrapper returns its input itself instead of the result (aten's relu always allocates). The
values are right, so only the aliasing check on an input without a negative value can see it."""
import torch
import triton
import triton.language as tl


@triton.jit
def _relu_counting(x_ptr, y_ptr, negatives_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0)
    tl.store(y_ptr + offsets, tl.where(x < 0, tl.zeros_like(x), x), mask=mask)
    tl.atomic_add(negatives_ptr, tl.sum((x < 0).to(tl.int32), axis=0))


def kernel(self):
    x = self.contiguous()
    out = torch.empty_like(x)
    negatives = torch.zeros(1, dtype=torch.int32, device=self.device)
    n = x.numel()
    if n:
        _relu_counting[(triton.cdiv(n, 1024),)](x, out, negatives, n, BLOCK=1024)
    if negatives.item() == 0:
        return self
    return out
