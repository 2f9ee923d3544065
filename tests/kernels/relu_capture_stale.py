"""Cheats on purpose, spelt so the static check cannot see it: it keeps its last eager result, and
when the stream is capturing (the query reached through operator.attrgetter) it copies that stale
result instead of launching, so the graph replays an answer to other inputs. GPU only; on the CPU
it is a correct relu."""
import operator

import torch
import triton
import triton.language as tl

_last = {}


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.where(x < 0, tl.zeros_like(x), x), mask=mask)  # keeps NaN


def kernel(self):
    x = self.contiguous()
    capturing = x.is_cuda and operator.attrgetter("cuda.graphs.is_current_stream_" + "capturing")(torch)()
    key = (tuple(x.shape), x.dtype)
    if capturing and key in _last:
        return _last[key].clone()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    _last[key] = out
    return out
