"""aten.threshold_backward.default: the gradient of threshold/relu, elementwise in grad_output and
the forward input: zero where self <= threshold (NaN compares false, so its gradient passes)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _threshold_backward(g_ptr, x_ptr, out_ptr, n, threshold, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    g = tl.load(g_ptr + offsets, mask=mask)
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.where(x <= threshold, 0, g.to(out_ptr.dtype.element_ty))
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def kernel(grad_output, self, threshold):
    shape = torch.broadcast_shapes(grad_output.shape, self.shape)
    g = grad_output.expand(shape).contiguous()  # flat offsets need one contiguous layout
    x = self.expand(shape).contiguous()
    out = torch.empty(shape, dtype=torch.result_type(grad_output, self), device=g.device)
    n = out.numel()
    if n:
        _threshold_backward[(triton.cdiv(n, 1024),)](g, x, out, n, threshold, BLOCK=1024)
    return out
