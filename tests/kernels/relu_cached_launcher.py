"""A correct relu that launches like some Triton libraries do: the first call of each specialisation
goes through the JIT (``_relu.run(...)``, which compiles, launches and returns the compiled kernel);
later calls launch that compiled kernel directly (``compiled[grid](...)``), skipping the JIT's
argument handling. The specialisation key holds what the JIT specialises on (dtype, 16-byte
alignment of the pointers, n == 1 and n % 16 == 0). Under the interpreter ``run`` returns nothing to
cache, so every call goes through it."""
import torch
import triton
import triton.language as tl

BLOCK = 1024
_compiled = {}


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
    if n == 0:
        return out
    grid = (triton.cdiv(n, BLOCK), 1, 1)
    key = (x.dtype, x.device, x.data_ptr() % 16 == 0, out.data_ptr() % 16 == 0, n == 1, n % 16 == 0)
    compiled = _compiled.get(key)
    if compiled is None:
        compiled = _relu.run(x, out, n, BLOCK, grid=grid, warmup=False)
        if compiled is not None:
            _compiled[key] = compiled
    else:
        compiled[grid](x, out, n, BLOCK)
    return out
