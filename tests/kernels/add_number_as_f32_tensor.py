"""A wrong aten.add.Tensor: a Python number becomes a 0-dim float32 tensor before the result dtype
is found, so a 0-dim float16 self plus 0.0001 gives float32 (aten: float16; a number never
promotes a tensor of its category). Everything else is right: broadcasting, alpha, bool."""
import torch
import triton
import triton.language as tl


@triton.jit
def _add(a_ptr, b_ptr, out_ptr, n, alpha, IS_BOOL: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    if IS_BOOL:
        result = (a.to(tl.int8) + alpha * b.to(tl.int8)) != 0
    else:
        result = a + alpha * b
    tl.store(out_ptr + offsets, result.to(out_ptr.dtype.element_ty), mask=mask)


def kernel(self, other, *, alpha=1):
    if not isinstance(other, torch.Tensor):  # the bug: the number's type takes part as a tensor's would
        other = torch.scalar_tensor(other, dtype=torch.float32, device=self.device)
    dtype = torch.result_type(self, other)
    compute = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    a, b = torch.broadcast_tensors(self.to(compute), other.to(compute))
    a, b = a.contiguous(), b.contiguous()
    out = torch.empty(a.shape, dtype=dtype, device=self.device)
    n = out.numel()
    if n:
        alpha = int(alpha) if compute == torch.bool or not compute.is_floating_point else float(alpha)
        _add[(triton.cdiv(n, 1024),)](a, b, out, n, alpha, IS_BOOL=compute == torch.bool, BLOCK=1024)
    return out
