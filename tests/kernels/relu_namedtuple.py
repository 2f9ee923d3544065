"""A correct relu whose configuration is a namedtuple and which warns and logs (the standard library
finds its caller's frame for each; none of it is the kernel reaching into the harness)."""
import collections
import logging
import typing
import warnings

import torch
import triton
import triton.language as tl

Config = collections.namedtuple("Config", ["block", "warps"])


class Launch(typing.NamedTuple):
    grid: int
    config: Config


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.where(x < 0, tl.zeros_like(x), x), mask=mask)  # keeps NaN


def kernel(self):
    x = self.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n > 1 << 30:
        warnings.warn("very large input")
    logging.getLogger(__name__).debug("relu of %d elements", n)
    if n:
        launch = Launch(triton.cdiv(n, 1024), Config(1024, 4))
        _relu[(launch.grid,)](x, out, n, BLOCK=launch.config.block, num_warps=launch.config.warps)
    return out
