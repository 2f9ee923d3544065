"""aten._softmax.default: a per-shape dispatcher composed by bbagent (not written by a model) in run 20261124-213914-aten._softmax.default-6550,
between the correct kernels of rounds 1 and 2, each faster on some timed shapes (NVIDIA H200).
Each part follows as its model wrote it, its top-level names suffixed with its round;
`kernel` at the end chooses by the bytes of the call's tensor arguments and their dtype.
Predicted from the parts' own timings: 1.13x the better part (geomean)."""
import torch


# ---- round 1, as its model wrote it (geomean 0.61x eager) ----
"""A correct aten._softmax.default: numerically stable (row max subtracted), any dim, float16 in
float32 arithmetic, half_to_float, NaN/inf propagated as aten does. Each program takes a block of
whole rows (rows up to 16384 long)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_rows_round1(x_ptr, out_ptr, rows, length, ACC: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (row[:, None] < rows) & (cols[None, :] < length)
    offsets = row[:, None] * length + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=float("-inf")).to(ACC)
    shifted = x - tl.max(x, axis=1)[:, None]
    e = tl.where(mask, tl.exp(shifted), 0.0)
    tl.store(out_ptr + offsets, (e / tl.sum(e, axis=1)[:, None]).to(out_ptr.dtype.element_ty), mask=mask)


def kernel_round1(self, dim, half_to_float):
    out_dtype = torch.float32 if half_to_float else self.dtype
    x = self.reshape(1, 1) if self.dim() == 0 else self.movedim(dim, -1).contiguous()
    length = x.shape[-1]
    if length > 16384:
        raise ValueError("rows longer than 16384 are not handled by this kernel")
    out = torch.empty(x.shape, dtype=out_dtype, device=self.device)
    rows = out.numel() // length if length else 0
    if rows:
        block = max(16, triton.next_power_of_2(length))
        per_program = 1
        acc = tl.float64 if self.dtype == torch.float64 else tl.float32
        _softmax_rows_round1[(triton.cdiv(rows, per_program),)](x, out, rows, length, ACC=acc,
                                                         ROWS=per_program, BLOCK=block, num_warps=4)
    return out.reshape(()) if self.dim() == 0 else out.movedim(-1, dim)


# ---- round 2, as its model wrote it (geomean 0.765x eager) ----
"""A correct aten._softmax.default: numerically stable (row max subtracted), any dim, float16 in
float32 arithmetic, half_to_float, NaN/inf propagated as aten does. Each program takes a block of
whole rows (rows up to 16384 long)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_rows_round2(x_ptr, out_ptr, rows, length, ACC: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (row[:, None] < rows) & (cols[None, :] < length)
    offsets = row[:, None] * length + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=float("-inf")).to(ACC)
    shifted = x - tl.max(x, axis=1)[:, None]
    e = tl.where(mask, tl.exp(shifted), 0.0)
    tl.store(out_ptr + offsets, (e / tl.sum(e, axis=1)[:, None]).to(out_ptr.dtype.element_ty), mask=mask)


def kernel_round2(self, dim, half_to_float):
    out_dtype = torch.float32 if half_to_float else self.dtype
    x = self.reshape(1, 1) if self.dim() == 0 else self.movedim(dim, -1).contiguous()
    length = x.shape[-1]
    if length > 16384:
        raise ValueError("rows longer than 16384 are not handled by this kernel")
    out = torch.empty(x.shape, dtype=out_dtype, device=self.device)
    rows = out.numel() // length if length else 0
    if rows:
        block = max(16, triton.next_power_of_2(length))
        per_program = max(1, 16384 // block)
        acc = tl.float64 if self.dtype == torch.float64 else tl.float32
        _softmax_rows_round2[(triton.cdiv(rows, per_program),)](x, out, rows, length, ACC=acc,
                                                         ROWS=per_program, BLOCK=block, num_warps=8)
    return out.reshape(()) if self.dim() == 0 else out.movedim(-1, dim)


# ---- the dispatcher (bbagent) ----
DISPATCH_PARTS = {
    1: kernel_round1,
    2: kernel_round2,
}
# dtype (None: any other) -> (bytes of tensor arguments up to which the first round serves, that round, the other)
DISPATCH_RULES = {
    None: (2198602, 1, 2),  # calls of any other dtype: up to 2198602 bytes of tensors round 1, above round 2
}


def call_size(value, found=None):
    """(bytes held by the tensors in a call's arguments, the first one's dtype name)."""
    found = [0, None] if found is None else found
    if isinstance(value, torch.Tensor):
        found[0] += value.numel() * value.element_size()
        if found[1] is None:
            found[1] = str(value.dtype).removeprefix("torch.")
    elif isinstance(value, (tuple, list)):
        for item in value:
            call_size(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            call_size(item, found)
    return found[0], found[1]


def kernel(*args, **kwargs):
    size, dtype = call_size((args, kwargs))
    up_to, small, large = DISPATCH_RULES.get(dtype, DISPATCH_RULES[None])
    return DISPATCH_PARTS[small if size <= up_to else large](*args, **kwargs)
