"""A correct Triton randn_like for aten.randn_like.default: standard normal values in self's
shape, the requested dtype, device and self's layout, seeded from the default generator."""
import torch
import triton
import triton.language as tl


@triton.jit
def _randn(out_ptr, n, seed, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.randn(seed, offsets), mask=offsets < n)


def kernel(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    # Triton writes only the GPU (or the interpreter's CPU) memory self lives in: fill there,
    # then move the result where `device` asks for it.
    out = torch.empty_like(self, dtype=dtype, memory_format=memory_format or torch.preserve_format)
    seed = int(torch.randint(2**31 - 1, (1,), device=out.device))
    # empty_like keeps a dense layout: fill its storage in memory order, whatever the strides
    n = out.numel()
    if n:
        _randn[(triton.cdiv(n, 1024),)](out, n, seed, BLOCK=1024)
    return out if device is None else out.to(device)
