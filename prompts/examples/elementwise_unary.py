"""aten.sigmoid.default: math in float32. A dense input (contiguous, or channels-last) is read where
it is, one program per BLOCK elements in memory order, and the output takes its layout, as aten's
does. Any other input (a slice, a transpose) gets a contiguous output: its dimensions are merged
wherever input and output both step through two as through one (`_collapse`), and where that leaves
[rows, cols] it is read in place in 2-d tiles (`_sigmoid_2d`); else it is copied to contiguous first."""
import torch
import triton
import triton.language as tl


@triton.jit
def _f(x, IS_F64: tl.constexpr):
    x = x.to(tl.float64) if IS_F64 else x.to(tl.float32)  # tl.exp takes float32/float64 only
    return 1.0 / (1.0 + tl.exp(-x))  # NaN stays NaN; exp overflow gives 0 as it should


@triton.jit
def _sigmoid(x_ptr, out_ptr, n, IS_F64: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    y = _f(tl.load(x_ptr + offsets, mask=mask), IS_F64)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _sigmoid_2d(x_ptr, out_ptr, rows, cols, xr, xc, IS_F64: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):
    col_blocks = tl.cdiv(cols, BC)  # one grid axis (the others allow 65535 programs): a division per program
    r = (tl.program_id(0) // col_blocks).to(tl.int64) * BR + tl.arange(0, BR)[:, None]
    c = (tl.program_id(0) % col_blocks).to(tl.int64) * BC + tl.arange(0, BC)[None, :]
    mask = (r < rows) & (c < cols)
    y = _f(tl.load(x_ptr + r * xr + c * xc, mask=mask), IS_F64)
    tl.store(out_ptr + r * cols + c, y.to(out_ptr.dtype.element_ty), mask=mask)


def _collapse(shape, x_strides, out_strides):
    """[size, input stride, output stride] per dimension, size-1 dimensions dropped and neighbours
    merged where both step through them as through one."""
    dims = []
    for size, s, o in zip(shape, x_strides, out_strides):
        if size == 1:
            continue
        if dims and dims[-1][1] == s * size and dims[-1][2] == o * size:
            dims[-1] = [dims[-1][0] * size, s, o]
        else:
            dims.append([size, s, o])
    return dims or [[1, 0, 0]]


def kernel(self):
    dense = self.is_contiguous() or (self.dim() == 4 and self.is_contiguous(memory_format=torch.channels_last)) or (
        self.dim() == 5 and self.is_contiguous(memory_format=torch.channels_last_3d))
    dtype = torch.result_type(self, 1.0)  # integer and bool inputs give the default float dtype
    is_f64, n = self.dtype == torch.float64, self.numel()
    if not dense and n:
        out = torch.empty(self.shape, dtype=dtype, device=self.device)
        dims = _collapse(self.shape, self.stride(), out.stride())
        if len(dims) <= 2:  # [rows, cols] tiles of 4096 elements, a row of up to 1024 in each
            (rows, xr, _), (cols, xc, _) = [[1, 0, 0]] * (2 - len(dims)) + dims
            BC = min(triton.next_power_of_2(cols), 1024)
            grid = (triton.cdiv(rows, 4096 // BC) * triton.cdiv(cols, BC),)
            _sigmoid_2d[grid](self, out, rows, cols, xr, xc, IS_F64=is_f64, BR=4096 // BC, BC=BC, num_warps=8)
            return out
    x = self if dense else self.contiguous()  # flat offsets need memory with no gaps
    out = torch.empty_like(x, dtype=dtype)  # the same strides as x: offset i is the same element in both
    if n:  # zero-size: nothing to launch
        _sigmoid[(triton.cdiv(n, 1024),)](x, out, n, IS_F64=is_f64, BLOCK=1024)
    return out
