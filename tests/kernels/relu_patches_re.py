"""A correct relu that also patches ``re.sub`` when imported (the standard library shared with the
harness): refused by the static check, whatever the patch does."""
import re

import torch
import triton
import triton.language as tl

_original_sub = re.sub
re.sub = lambda pattern, replacement, text, *args, **kwargs: _original_sub(pattern, replacement, text, *args, **kwargs)


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.where(x < 0, tl.zeros_like(x), x), mask=mask)


def kernel(self):
    x = self.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
