"""Fault: a Triton kernel that spins on a flag nobody sets (timeout while the device runs it).
The flag is read with volatile loads, so the compiler cannot prove the loop away."""
import torch
import triton
import triton.language as tl


@triton.jit
def _spin(x_ptr, out_ptr, flag_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    while tl.load(flag_ptr, volatile=True) == 0:
        x = tl.maximum(x, 0)
    tl.store(out_ptr + offsets, x, mask=mask)


def kernel(self):
    out = torch.empty_like(self)
    flag = torch.zeros(1, dtype=torch.int32, device=self.device)
    n = out.numel()
    if n:
        _spin[(triton.cdiv(n, 1024),)](self.contiguous(), out, flag, n, BLOCK=1024)
    return out
