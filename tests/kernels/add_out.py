"""A correct aten.add.out: computes self + alpha * other straight into ``out`` (through out's
strides) and returns ``out`` itself. Resizes an empty ``out`` as aten does."""
import torch
import triton
import triton.language as tl

RANK = 5


@triton.jit
def _add(a_ptr, b_ptr, out_ptr, n, alpha, s1, s2, s3, s4,
         a0, a1, a2, a3, a4, b0, b1, b2, b3, b4, o0, o1, o2, o3, o4,
         IS_BOOL: tl.constexpr, BLOCK: tl.constexpr):
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
    a = tl.load(a_ptr + i0 * a0 + i1 * a1 + i2 * a2 + i3 * a3 + i4 * a4, mask=mask)
    b = tl.load(b_ptr + i0 * b0 + i1 * b1 + i2 * b2 + i3 * b3 + i4 * b4, mask=mask)
    if IS_BOOL:
        result = (a.to(tl.int8) + alpha * b.to(tl.int8)) != 0
    else:
        result = a + alpha * b
    tl.store(out_ptr + i0 * o0 + i1 * o1 + i2 * o2 + i3 * o3 + i4 * o4,
             result.to(out_ptr.dtype.element_ty), mask=mask)


def _strides(t, shape):
    view = t.expand(shape)
    return [0] * (RANK - view.dim()) + list(view.stride())


def kernel(self, other, *, alpha=1, out):
    if not isinstance(other, torch.Tensor):
        other = torch.scalar_tensor(other, dtype=torch.result_type(self, other), device=self.device)
    shape = torch.broadcast_shapes(self.shape, other.shape)
    if tuple(out.shape) != tuple(shape):
        out.resize_(shape)
    if len(shape) > RANK:
        raise ValueError(f"up to {RANK} dimensions")
    n = out.numel()
    if n == 0:
        return out
    compute = torch.result_type(self, other)
    if compute in (torch.float16, torch.bfloat16):
        compute = torch.float32
    a, b = self.to(compute), other.to(compute)
    is_bool = compute == torch.bool
    alpha = int(alpha) if is_bool or not compute.is_floating_point else float(alpha)
    sizes = [1] * (RANK - len(shape)) + list(shape)
    _add[(triton.cdiv(n, 1024),)](a, b, out, n, alpha, *sizes[1:], *_strides(a, shape), *_strides(b, shape),
                                  *_strides(out, shape), IS_BOOL=is_bool, BLOCK=1024)
    return out
