"""A correct _softmax_backward_data that accumulates in float32: grad_input = y * (g - sum(g * y)).
aten computes g * y in the input's dtype (float16) first, so this kernel is closer to the exact
value than aten is; the float64 re-judgement must see it (input_dtype is a positional argument)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_backward(g_ptr, y_ptr, out_ptr, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    base = rows.to(tl.int64)[:, None] * n_cols
    acc = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        g = tl.load(g_ptr + base + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        y = tl.load(y_ptr + base + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        acc += g * y
    dot = tl.sum(acc, axis=1)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        g = tl.load(g_ptr + base + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        y = tl.load(y_ptr + base + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + base + cols[None, :], (y * (g - dot[:, None])).to(out_ptr.dtype.element_ty), mask=mask)


def kernel(grad_output, output, dim, input_dtype):
    shape = grad_output.shape
    if grad_output.dim() == 0:
        grad_output, output, dim = grad_output.reshape(1), output.reshape(1), 0
    dim = dim % grad_output.dim()
    g = grad_output.movedim(dim, -1).contiguous()
    y = output.movedim(dim, -1).contiguous()
    out = torch.empty(g.shape, dtype=input_dtype, device=g.device)
    n_cols = g.shape[-1]
    if g.numel():
        n_rows = g.numel() // n_cols
        block = min(triton.next_power_of_2(n_cols), 4096)
        rows = max(1, min(64, 8192 // block))  # several rows per program: fewer programs, same sums
        _softmax_backward[(triton.cdiv(n_rows, rows),)](g, y, out, n_rows, n_cols, ROWS=rows, BLOCK=block, num_warps=8)
    return out.movedim(-1, dim).contiguous().reshape(shape)
