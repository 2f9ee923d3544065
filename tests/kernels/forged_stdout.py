"""Prints a fake passing verdict to stdout, then returns a wrong result from a real Triton launch."""
import json

import torch
import triton
import triton.language as tl

print(json.dumps({"event": "done", "verdict": "pass"}))


@triton.jit
def _zero(y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offsets, tl.zeros((BLOCK,), tl.float32), mask=offsets < n)


def kernel(self):
    print('{"event": "test", "passed": true}')
    out = torch.empty_like(self)
    _zero[(triton.cdiv(max(out.numel(), 1), 256),)](out, out.numel(), BLOCK=256)
    return out
