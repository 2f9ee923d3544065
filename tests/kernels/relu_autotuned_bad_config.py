"""A wrong relu behind @triton.autotune: its first config is right, its second returns the input
unchanged. Tests that run only the first config (or benchmark and pick one) pass it; every config
must run on some tests."""
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256})], key=["n"])
@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    if BLOCK == 256:
        y = x
    else:
        y = tl.where(x < 0, tl.zeros_like(x), x)
    tl.store(y_ptr + offsets, y, mask=mask)


def kernel(self):
    x = self.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _relu[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    return out
