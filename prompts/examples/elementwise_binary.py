"""aten.mul.Tensor: type promotion, a Python number for `other`, bool results. The output is
contiguous. Where each input is dense in the output's order (contiguous with the output's shape)
or is a single value, a flat index reads it (`_mul_dense`: near copy bandwidth). Otherwise each
input is read through the strides of its view expanded to the output shape (broadcasting through
stride-0 views, no copies), its dimensions first merged wherever every operand steps through two
as through one (`_collapse`): most broadcasts ([N, C, H, W] by [N, C, 1, 1]) become [rows, cols],
read in 2-d tiles with no integer division (`_mul_2d`); what stays above 2 dimensions unravels a
flat index (`_mul`, up to 5)."""
import torch
import triton
import triton.language as tl

RANK = 5


@triton.jit
def _times(a, b, out_ty: tl.constexpr, HALF: tl.constexpr, IS_BOOL: tl.constexpr):
    compute = tl.float32 if HALF else out_ty  # mixed inputs: cast in the kernel
    if IS_BOOL:
        return (a != 0) & (b != 0)
    return (a.to(compute) * b.to(compute)).to(out_ty)


@triton.jit
def _mul_dense(a_ptr, b, out_ptr, n, A_ONE: tl.constexpr, B_ONE: tl.constexpr, B_NUMBER: tl.constexpr,
               HALF: tl.constexpr, IS_BOOL: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr) if A_ONE else tl.load(a_ptr + offsets, mask=mask)  # a single value: loaded once
    out_ty: tl.constexpr = out_ptr.dtype.element_ty
    if B_NUMBER:  # a Python number arrives as the value itself (float32, or an integer)
        y = (a.to(tl.float32 if HALF else out_ty) * b).to(out_ty)
    elif B_ONE:
        y = _times(a, tl.load(b), out_ty, HALF, IS_BOOL)
    else:
        y = _times(a, tl.load(b + offsets, mask=mask), out_ty, HALF, IS_BOOL)
    tl.store(out_ptr + offsets, y.to(out_ty), mask=mask)


@triton.jit
def _mul_2d(a_ptr, b_ptr, out_ptr, rows, cols, ar, ac, br, bc, HALF: tl.constexpr, IS_BOOL: tl.constexpr,
            BR: tl.constexpr, BC: tl.constexpr):
    col_blocks = tl.cdiv(cols, BC)  # one grid axis (the others allow 65535 programs): a division per program
    r = (tl.program_id(0) // col_blocks).to(tl.int64) * BR + tl.arange(0, BR)[:, None]
    c = (tl.program_id(0) % col_blocks).to(tl.int64) * BC + tl.arange(0, BC)[None, :]
    mask = (r < rows) & (c < cols)
    a = tl.load(a_ptr + r * ar + c * ac, mask=mask)
    b = tl.load(b_ptr + r * br + c * bc, mask=mask)
    out_ty: tl.constexpr = out_ptr.dtype.element_ty
    tl.store(out_ptr + r * cols + c, _times(a, b, out_ty, HALF, IS_BOOL).to(out_ty), mask=mask)


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
    out_ty: tl.constexpr = out_ptr.dtype.element_ty
    tl.store(out_ptr + offsets, _times(a, b, out_ty, HALF, IS_BOOL).to(out_ty), mask=mask)


def _collapse(shape, a_strides, b_strides):
    """[size, a stride, b stride] per dimension, size-1 dimensions dropped and neighbours merged
    where both operands (and the contiguous output) step through them as through one."""
    dims = []
    for size, sa, sb in zip(shape, a_strides, b_strides):
        if size == 1:
            continue
        if dims and dims[-1][1] == sa * size and dims[-1][2] == sb * size:
            dims[-1] = [dims[-1][0] * size, sa, sb]
        else:
            dims.append([size, sa, sb])
    return dims or [[1, 0, 0]]


def _dense(t, shape) -> bool:
    """Whether ``t`` is read with the output's flat index: a single value, or contiguous with its shape."""
    return t.numel() == 1 or (tuple(t.shape) == tuple(shape) and t.is_contiguous())


def kernel(self, other):
    dtype = torch.result_type(self, other)  # a Python number does not raise float16 to float32
    # a number goes in as a kernel argument (float32 or an integer; float64 would lose digits)
    number = not isinstance(other, torch.Tensor) and dtype not in (torch.float64, torch.bool)
    if not isinstance(other, torch.Tensor) and not number:
        other = torch.full((), other, dtype=dtype, device=self.device)
    shape = self.shape if number else torch.broadcast_shapes(self.shape, other.shape)
    out = torch.empty(shape, dtype=dtype, device=self.device)
    n = out.numel()
    half, is_bool = dtype in (torch.float16, torch.bfloat16), dtype == torch.bool
    if n and _dense(self, shape) and (number or _dense(other, shape)):  # 4096 elements a program: 16 a thread
        _mul_dense[(triton.cdiv(n, 4096),)](self, other, out, n, A_ONE=self.numel() == 1,
                                            B_ONE=not number and other.numel() == 1, B_NUMBER=number, HALF=half,
                                            IS_BOOL=is_bool, BLOCK=4096, num_warps=8)
    elif n:
        if number:
            other = torch.full((), other, dtype=dtype, device=self.device)
        dims = _collapse(shape, self.expand(shape).stride(), other.expand(shape).stride())
        if len(dims) <= 2:  # [rows, cols] tiles of 4096 elements, a row of up to 1024 in each
            (rows, ar, br), (cols, ac, bc) = [[1, 0, 0]] * (2 - len(dims)) + dims
            BC = min(triton.next_power_of_2(cols), 1024)
            grid = (triton.cdiv(rows, 4096 // BC) * triton.cdiv(cols, BC),)
            _mul_2d[grid](self, other, out, rows, cols, ar, ac, br, bc, HALF=half, IS_BOOL=is_bool,
                          BR=4096 // BC, BC=BC, num_warps=8)
        else:
            if len(dims) > RANK:
                raise NotImplementedError(f"up to {RANK} dimensions once merged")
            dims = [[1, 0, 0]] * (RANK - len(dims)) + dims
            sizes, a_str, b_str = zip(*dims)
            _mul[(triton.cdiv(n, 1024),)](self, other, out, n, *sizes[1:], *a_str, *b_str, HALF=half,
                                          IS_BOOL=is_bool, BLOCK=1024)
    return out
