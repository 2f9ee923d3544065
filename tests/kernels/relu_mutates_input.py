"""Wrong on purpose for aten.relu.default: right values, but computed in place in its input."""
import triton
import triton.language as tl


@triton.jit
def _relu_(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(x_ptr + offsets, tl.where(x < 0, tl.zeros_like(x), x), mask=mask)


def kernel(self):
    x = self.contiguous()
    if x.numel():
        _relu_[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024)
    return x
