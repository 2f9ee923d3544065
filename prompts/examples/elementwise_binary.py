"""aten.mul.Tensor: broadcasting through stride-0 views (no copies), type promotion, a Python
number for `other`, bool results. The output is contiguous; each input is read through the
strides of its view expanded to the output shape. Up to 5 dimensions."""
import torch
import triton
import triton.language as tl

RANK = 5


@triton.jit
def _mul(a_ptr, b_ptr, out_ptr, n, s1, s2, s3, s4, a0, a1, a2, a3, a4, b0, b1, b2, b3, b4,
         HALF: tl.constexpr, IS_BOOL: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    i4 = offsets % s4  # unravel the flat output index (sizes s0..s4, s0 implied)
    rest = offsets // s4
    i3 = rest % s3
    rest = rest // s3
    i2 = rest % s2
    rest = rest // s2
    i1 = rest % s1
    i0 = rest // s1
    a = tl.load(a_ptr + i0 * a0 + i1 * a1 + i2 * a2 + i3 * a3 + i4 * a4, mask=mask)
    b = tl.load(b_ptr + i0 * b0 + i1 * b1 + i2 * b2 + i3 * b3 + i4 * b4, mask=mask)
    compute = tl.float32 if HALF else out_ptr.dtype.element_ty  # mixed inputs: cast in the kernel
    if IS_BOOL:
        y = (a != 0) & (b != 0)
    else:
        y = a.to(compute) * b.to(compute)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def _strides(t, shape):
    """Strides of t broadcast to shape (0 on broadcast dimensions), left-padded to RANK."""
    view = t.expand(shape)
    return [0] * (RANK - view.dim()) + list(view.stride())


def kernel(self, other):
    dtype = torch.result_type(self, other)  # a Python number does not raise float16 to float32
    if not isinstance(other, torch.Tensor):
        other = torch.full((), other, dtype=dtype, device=self.device)
    shape = torch.broadcast_shapes(self.shape, other.shape)
    if len(shape) > RANK:
        raise NotImplementedError(f"up to {RANK} dimensions")
    out = torch.empty(shape, dtype=dtype, device=self.device)
    n = out.numel()
    if n:
        sizes = [1] * (RANK - len(shape)) + list(shape)
        BLOCK = 1024
        _mul[(triton.cdiv(n, BLOCK),)](self, other, out, n, *sizes[1:], *_strides(self, shape),
                                       *_strides(other, shape), HALF=dtype in (torch.float16, torch.bfloat16),
                                       IS_BOOL=dtype == torch.bool, BLOCK=BLOCK)
    return out
