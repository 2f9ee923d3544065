"""Cheats on purpose: copies its input with a Triton kernel and returns the copy as a torch.Tensor
subclass whose __torch_function__ applies relu whenever the result is used, so that every
comparison made through torch computes the right answer for the judge."""
import torch
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


class Lazy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        def unwrap(value):
            if isinstance(value, Lazy):
                return torch.relu(value.as_subclass(torch.Tensor))
            if isinstance(value, (list, tuple)):
                return type(value)(unwrap(v) for v in value)
            return value
        return func(*unwrap(args), **{k: unwrap(v) for k, v in (kwargs or {}).items()})


def kernel(self):
    x = self.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _copy[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out.as_subclass(Lazy)
