"""Cheats on purpose, spelt so the static check cannot see it: the writer thread of
relu_writer_thread.py, with threading reached through torch's own reference to it
(operator.attrgetter, no import of threading); it computes, and the call waits for it."""
import operator

import torch
import triton
import triton.language as tl


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
    if n:
        worker = operator.attrgetter("threading.Thread")(torch)(
            target=lambda: _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024))
        worker.start()
        worker.join()
    return out
