"""aten.exp.default from a kernel that imports what legitimate kernels import: numpy, math,
functools, Triton's libdevice, and (on its first call, after the sandbox has sealed the file view)
standard-library and numpy modules nobody imported before. On the GPU it uses libdevice.exp; the
interpreter cannot run libdevice, so there it uses tl.exp (exact on the CPU)."""
import functools
import math

import numpy as np
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _exp(x_ptr, y_ptr, n, BLOCK: tl.constexpr, ACCURATE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    if ACCURATE:
        y = libdevice.exp(x)
    else:
        y = tl.exp(x)
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


@functools.lru_cache(maxsize=None)
def _block_for(n: int) -> int:
    import statistics  # first imported here, inside the sandbox's view
    import numpy.polynomial  # noqa: F401
    sizes = [256, 512, 1024]
    return int(min(sizes, key=lambda b: abs(b - statistics.median([256, n, 1024]))))


def kernel(self):
    dtype = self.dtype if self.dtype.is_floating_point else torch.get_default_dtype()
    x = self.contiguous()
    out = torch.empty(x.shape, dtype=dtype, device=x.device)
    n = x.numel()
    if n:
        block = _block_for(int(np.clip(n, 1, 1 << 20)))
        _exp[(math.ceil(n / block),)](x, out, n, BLOCK=block, ACCURATE=x.is_cuda)
    return out
