"""A correct aten.add_.Tensor: writes self in place through its own strides (non-contiguous self
works without a copy), broadcasting other, and returns self."""
import torch
import triton
import triton.language as tl

RANK = 5


@triton.jit
def _add_(self_ptr, other_ptr, n, alpha, s1, s2, s3, s4,
          a0, a1, a2, a3, a4, b0, b1, b2, b3, b4, IS_BOOL: tl.constexpr, BLOCK: tl.constexpr):
    linear = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = linear < n
    i4 = linear % s4
    rest = linear // s4
    i3 = rest % s3
    rest = rest // s3
    i2 = rest % s2
    rest = rest // s2
    i1 = rest % s1
    i0 = rest // s1
    where = self_ptr + i0 * a0 + i1 * a1 + i2 * a2 + i3 * a3 + i4 * a4
    b = tl.load(other_ptr + i0 * b0 + i1 * b1 + i2 * b2 + i3 * b3 + i4 * b4, mask=mask)
    a = tl.load(where, mask=mask).to(b.dtype)  # other arrives in the compute dtype
    if IS_BOOL:
        result = (a.to(tl.int8) + alpha * b.to(tl.int8)) != 0
    else:
        result = a + alpha * b
    tl.store(where, result.to(self_ptr.dtype.element_ty), mask=mask)


def _strides(t, shape):
    view = t.expand(shape)
    return [0] * (RANK - view.dim()) + list(view.stride())


def kernel(self, other, *, alpha=1):
    if not isinstance(other, torch.Tensor):
        other = torch.scalar_tensor(other, dtype=torch.result_type(self, other), device=self.device)
    if self.dim() > RANK:
        raise ValueError(f"up to {RANK} dimensions")
    n = self.numel()
    if n == 0:
        return self
    compute = torch.result_type(self, other)
    if compute in (torch.float16, torch.bfloat16):
        compute = torch.float32
    other = other.to(compute)
    is_bool = compute == torch.bool
    alpha = int(alpha) if is_bool or not compute.is_floating_point else float(alpha)
    sizes = [1] * (RANK - self.dim()) + list(self.shape)
    _add_[(triton.cdiv(n, 1024),)](self, other, n, alpha, *sizes[1:], *_strides(self, self.shape),
                                   *_strides(other, self.shape), IS_BOOL=is_bool, BLOCK=1024)
    return self
