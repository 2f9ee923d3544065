"""aten.add.Tensor as add_broadcast.py computes it, except that integer results are computed through
float32 (``a.to(tl.float32) + alpha * b.to(tl.float32)``, stored back as the result's integer type):
right on every small integer, wrong on sums float32 cannot hold exactly."""
import torch
import triton
import triton.language as tl

RANK = 5


@triton.jit
def _add(a_ptr, b_ptr, out_ptr, n, alpha,
         s1, s2, s3, s4,
         a0, a1, a2, a3, a4,
         b0, b1, b2, b3, b4,
         o0, o1, o2, o3, o4,
         IS_BOOL: tl.constexpr, THROUGH_FLOAT: tl.constexpr, BLOCK: tl.constexpr):
    linear = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = linear < n
    # unravel the linear index over the (padded) result shape; size 0 is never reached here
    i4 = linear % s4
    rest = linear // s4
    i3 = rest % s3
    rest = rest // s3
    i2 = rest % s2
    rest = rest // s2
    i1 = rest % s1
    i0 = rest // s1
    a = tl.load(a_ptr + i0 * a0 + i1 * a1 + i2 * a2 + i3 * a3 + i4 * a4, mask=mask)
    b = tl.load(b_ptr + i0 * b0 + i1 * b1 + i2 * b2 + i3 * b3 + i4 * b4, mask=mask)
    if IS_BOOL:
        result = (a.to(tl.int8) + alpha * b.to(tl.int8)) != 0
    elif THROUGH_FLOAT:
        result = a.to(tl.float32) + alpha * b.to(tl.float32)
    else:
        result = a + alpha * b
    tl.store(out_ptr + i0 * o0 + i1 * o1 + i2 * o2 + i3 * o3 + i4 * o4,
             result.to(out_ptr.dtype.element_ty), mask=mask)


def _padded(t, shape):
    """Strides of ``t`` broadcast to ``shape`` (stride 0 where it is broadcast), left-padded to RANK."""
    view = t.expand(shape)
    return [0] * (RANK - view.dim()) + list(view.stride())


def add_into(out, self, other, alpha):
    """out = self + alpha * other, computed in the result dtype (float32 for half types)."""
    shape = out.shape
    if len(shape) > RANK:
        raise ValueError(f"this kernel handles up to {RANK} dimensions, got {len(shape)}")
    n = out.numel()
    if n == 0:
        return out
    compute = out.dtype
    if compute in (torch.float16, torch.bfloat16):
        compute = torch.float32
    if compute == torch.bool:
        a, b = self, other
    else:
        a, b = self.to(compute), other.to(compute)
    sizes = [1] * (RANK - len(shape)) + list(shape)
    out_strides = [0] * (RANK - out.dim()) + list(out.stride())
    alpha = int(alpha) if compute == torch.bool or not compute.is_floating_point else float(alpha)
    _add[(triton.cdiv(n, 1024),)](a, b, out, n, alpha, *sizes[1:], *_padded(a, shape), *_padded(b, shape),
                                  *out_strides, IS_BOOL=compute == torch.bool,
                                  THROUGH_FLOAT=not compute.is_floating_point and compute != torch.bool, BLOCK=1024)
    return out


def as_tensor(value, like):
    return value if isinstance(value, torch.Tensor) else torch.scalar_tensor(value, device=like.device,
                                                                                dtype=torch.result_type(like, value))


def kernel(self, other, *, alpha=1):
    dtype = torch.result_type(self, other)
    other = as_tensor(other, self)
    out = torch.empty(torch.broadcast_shapes(self.shape, other.shape), dtype=dtype, device=self.device)
    return add_into(out, self, other, alpha)
