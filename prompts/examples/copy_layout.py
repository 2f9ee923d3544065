"""aten.cat.default: each input is copied by a Triton kernel into its slice of the output (a view
from out.narrow), reading and writing through strides, so non-contiguous inputs need no copy in
PyTorch; dtypes are promoted across inputs; legacy 1-d empty inputs are skipped. The dimensions of
each copy are first put in the output's memory order and merged wherever source and destination
both step through two as through one (`_collapse`); the output is channels-last where every input
is, as aten's is. A slice of a contiguous output becomes [rows, cols], copied in 2-d tiles with no
integer division (`_copy_2d`), up to 16 inputs in one launch (tuples of pointers and sizes: a cat of
many small inputs is launch-bound); what stays above 2 dimensions unravels a flat index (`_copy`)."""
import torch
import triton
import triton.language as tl

RANK = 5
MAXN = 16  # copies a launch at most (each is compiled in; the launch costs more than a small copy)


@triton.jit
def _copy_2d(srcs, dsts, rows, cols, srs, scs, drs, dcs, N: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):
    """N copies in one launch (tuples of N pointers and sizes): the program's second index picks its copy."""
    for k in tl.static_range(N):
        if tl.program_id(1) == k:
            col_blocks = tl.cdiv(cols[k], BC)  # the tiles on grid axis 0 (the others allow 65535): a division a program
            r = (tl.program_id(0) // col_blocks).to(tl.int64) * BR + tl.arange(0, BR)[:, None]
            c = (tl.program_id(0) % col_blocks).to(tl.int64) * BC + tl.arange(0, BC)[None, :]
            mask = (r < rows[k]) & (c < cols[k])
            v = tl.load(srcs[k] + r * srs[k] + c * scs[k], mask=mask)
            tl.store(dsts[k] + r * drs[k] + c * dcs[k], v.to(dsts[k].dtype.element_ty), mask=mask)


@triton.jit
def _copy(src_ptr, dst_ptr, n, s1, s2, s3, s4, a0, a1, a2, a3, a4, b0, b1, b2, b3, b4, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    i4, rest = offsets % s4, offsets // s4
    i3, rest = rest % s3, rest // s3
    i2, rest = rest % s2, rest // s2
    i1, i0 = rest % s1, rest // s1
    v = tl.load(src_ptr + i0 * a0 + i1 * a1 + i2 * a2 + i3 * a3 + i4 * a4, mask=mask)
    tl.store(dst_ptr + i0 * b0 + i1 * b1 + i2 * b2 + i3 * b3 + i4 * b4, v.to(dst_ptr.dtype.element_ty), mask=mask)


def _collapse(shape, src_strides, dst_strides):
    """[size, source stride, destination stride] per dimension, size-1 dimensions dropped and
    neighbours merged where both step through them as through one."""
    dims = []
    for size, s, d in zip(shape, src_strides, dst_strides):
        if size == 1:
            continue
        if dims and dims[-1][1] == s * size and dims[-1][2] == d * size:
            dims[-1] = [dims[-1][0] * size, s, d]
        else:
            dims.append([size, s, d])
    return dims or [[1, 0, 0]]


def _plan(t, dst, tiled):
    """Copies ``t`` into ``dst`` now with a flat index, or adds it to ``tiled`` (copies in 2-d tiles, by width)."""
    order = sorted(range(t.dim()), key=lambda d: -dst.stride(d))  # the destination's memory order
    dims = _collapse([t.shape[d] for d in order], [t.stride(d) for d in order], [dst.stride(d) for d in order])
    if len(dims) <= 2:  # [rows, cols] tiles of 4096 elements, a row of up to 1024 in each
        (rows, sr, dr), (cols, sc, dc) = [[1, 0, 0]] * (2 - len(dims)) + dims
        tiled.setdefault(min(triton.next_power_of_2(cols), 1024), []).append((t, dst, rows, cols, sr, sc, dr, dc))
    elif len(dims) <= RANK:
        sizes, src, out = zip(*([[1, 0, 0]] * (RANK - len(dims)) + dims))
        _copy[(triton.cdiv(t.numel(), 1024),)](t, dst, t.numel(), *sizes[1:], *src, *out, BLOCK=1024)
    else:
        raise NotImplementedError(f"up to {RANK} dimensions once merged")


def _copy_tiled(tiled):
    """The 2-d copies, those of one tile width together, MAXN a launch."""
    for BC, copies in tiled.items():
        for start in range(0, len(copies), MAXN):
            batch = copies[start:start + MAXN]
            grid = (max(triton.cdiv(rows, 4096 // BC) * triton.cdiv(cols, BC) for _, _, rows, cols, *_ in batch), len(batch))
            _copy_2d[grid](*zip(*batch), N=len(batch), BR=4096 // BC, BC=BC, num_warps=8)


def kernel(tensors, dim=0):
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    parts = [t for t in tensors if not (t.dim() == 1 and t.numel() == 0)] or tensors[:1]
    dim = dim % parts[0].dim()
    shape = list(parts[0].shape)
    shape[dim] = sum(t.shape[dim] for t in parts)
    # aten's layout: channels-last when every input is (a slice of it then copies in 2-d tiles too)
    layout = torch.channels_last if all(t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last)
                                        and not t.is_contiguous() for t in parts) else torch.contiguous_format
    out = torch.empty(shape, dtype=dtype, device=tensors[0].device, memory_format=layout)
    offset, tiled = 0, {}
    for t in parts:
        dst = out.narrow(dim, offset, t.shape[dim])  # a view: no data moves
        offset += t.shape[dim]
        if t.numel():
            _plan(t, dst, tiled)
    _copy_tiled(tiled)
    return out
