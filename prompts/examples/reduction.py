"""aten.sum.dim_IntList: no copy of the input. Its dimensions are merged where their strides allow
(`_groups`: kept dimensions in their order, reduced ones in any order, as a sum allows) into
out[o, i] = sum over r of x[o * so + r * sr + i_offset(i)], i_offset unravelling i over up to two
kept groups. Without kept inner dimensions (I = 1) each program sums a block of rows (`_row_sum`);
with them, each program takes one o and a block of i and loops down r with a [BR, BI] tile of 16 KB,
two tiles in flight (`_col_sum`); where that leaves too few programs, the blocks of i narrow, then R
is split and the parts summed by a second launch. Reduced dimensions that do not merge are summed innermost group first (both
passes in place); kept ones that do not merge into three groups are copied first. Integers and bools
accumulate in int64, float16/bfloat16 in float32."""
import torch
import triton
import triton.language as tl


@triton.jit
def _row_sum(x_ptr, out_ptr, rows, length, so, sr, ACC: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    acc = tl.zeros([ROWS, BLOCK], dtype=ACC)
    for start in range(0, length, BLOCK):
        cols = start + tl.arange(0, BLOCK).to(tl.int64)
        mask = (row[:, None] < rows) & (cols[None, :] < length)
        acc += tl.load(x_ptr + row[:, None] * so + cols[None, :] * sr, mask=mask, other=0).to(ACC)
    tl.store(out_ptr + row, tl.sum(acc, axis=1).to(out_ptr.dtype.element_ty), mask=row < rows)


@triton.jit
def _col_sum(x_ptr, out_ptr, R, I, I2, so, sr, si1, si2, CHUNK, splits, ACC: tl.constexpr, BR: tl.constexpr,
             BI: tl.constexpr, UNRAVEL: tl.constexpr):
    """out[o, s, i]: the sum over r in chunk s (of CHUNK) of x[o, r, i]; one chunk: the sum itself."""
    i_blocks = tl.cdiv(I, BI)
    i = (tl.program_id(0) % i_blocks).to(tl.int64) * BI + tl.arange(0, BI)
    if UNRAVEL:  # two kept groups: once per program, not per step
        i_offset = (i // I2) * si1 + (i % I2) * si2
    else:  # one: Triton sees the offsets contiguous where si2 == 1 and vectorises the loads
        i_offset = i * si2
    s = (tl.program_id(0) // i_blocks) % splits
    o = (tl.program_id(0) // i_blocks // splits).to(tl.int64)
    acc = tl.zeros([BR, BI], dtype=ACC)
    for start in tl.range(0, CHUNK, BR, num_stages=2):  # the next tile loads while this one is summed
        r = (s * CHUNK + start + tl.arange(0, BR)).to(tl.int64)
        mask = (r[:, None] < R) & (start + tl.arange(0, BR)[:, None] < CHUNK) & (i[None, :] < I)
        acc += tl.load(x_ptr + o * so + r[:, None] * sr + i_offset[None, :], mask=mask, other=0).to(ACC)
    tl.store(out_ptr + (o * splits + s) * I + i, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty), mask=i < I)


def _merged(pairs):
    """[size, stride] pairs (outermost first) with size-1 ones dropped and neighbours merged where
    one stride steps through both."""
    merged = []
    for size, stride in pairs:
        if size == 1:
            continue
        if merged and merged[-1][1] == stride * size:
            merged[-1] = [merged[-1][0] * size, stride]
        else:
            merged.append([size, stride])
    return merged


def _groups(x, dims):
    """(O, so), (R, sr), (I1, si1), (I2, si2) of ``x`` reduced over ``dims``, or None where they do not
    merge so."""
    kept = _merged([(x.shape[d], x.stride(d)) for d in range(x.dim()) if d not in dims])
    reduced = _merged(sorted(((x.shape[d], x.stride(d)) for d in dims), key=lambda p: -p[1]))
    if len(reduced) > 1 or len(kept) > 3:
        return None
    r, one = (reduced[0] if reduced else [1, 0]), [1, 0]
    if len(kept) >= 2:
        return kept[0], r, (kept[1] if len(kept) == 3 else one), kept[-1]
    if kept and kept[0][1] < r[1]:  # the kept dimension lies inside the reduced ones
        return one, r, one, kept[0]
    return (kept[0] if kept else one), r, one, one


def _inner_group(x, dims):
    """The reduced dimensions that merge with the innermost one."""
    order = sorted((d for d in dims if x.shape[d] > 1), key=lambda d: x.stride(d))
    inner = order[:1]
    while len(inner) < len(order) and x.stride(order[len(inner)]) == x.stride(inner[-1]) * x.shape[inner[-1]]:
        inner.append(order[len(inner)])
    return inner


def _sum(x, dims, out_dtype):
    """``x`` summed over ``dims`` (keepdim) into a new tensor of ``out_dtype``."""
    acc_dtype = out_dtype if out_dtype == torch.float64 else torch.float32 if out_dtype.is_floating_point else torch.int64
    out = torch.empty([1 if d in dims else n for d, n in enumerate(x.shape)], dtype=out_dtype, device=x.device)
    groups = _groups(x, dims) if out.numel() else None
    inner = _inner_group(x, dims) if groups is None and out.numel() else []
    if 0 < len(inner) < len(dims):  # reduced groups that do not merge: the innermost first, both in place
        return _sum(_sum(x, inner, acc_dtype), [d for d in dims if d not in inner], acc_dtype).to(out_dtype)
    if groups is None and out.numel():
        x = x.permute([d for d in range(x.dim()) if d not in dims] + dims).contiguous()
        groups = _groups(x, list(range(x.dim() - len(dims), x.dim())))
    if not out.numel():
        return out
    (O, so), (R, sr), (I1, si1), (I2, si2) = groups
    if I1 == 1 and 1 < I2 < 256 and O > 1:  # narrow columns: the outer index joins them (more work a program)
        (I1, si1), (O, so) = (O, so), (1, 0)
    I, acc = I1 * I2, {torch.float64: tl.float64, torch.float32: tl.float32, torch.int64: tl.int64}[acc_dtype]
    if I == 1 and O >= 1024:  # many rows: blocks of whole rows
        BLOCK = min(1024, max(16, triton.next_power_of_2(R)))
        _row_sum[(triton.cdiv(O, max(1, 4096 // BLOCK)),)](x, out, O, R, so, sr, ACC=acc, ROWS=max(1, 4096 // BLOCK),
                                                           BLOCK=BLOCK)
        return out
    tile = 16384 // x.element_size()  # 16 KB a step; a block of i of 1024 keeps each column's sum in one thread
    BI = min(triton.next_power_of_2(I), 1024)
    while BI > 64 and O * triton.cdiv(I, BI) < 1024:  # too few programs: narrower blocks before splitting R
        BI //= 2
    BR = max(1, min(triton.next_power_of_2(R), tile // BI))
    BI = min(triton.next_power_of_2(I), max(BI, tile // BR))  # a short R: wider blocks of i instead
    programs = O * triton.cdiv(I, BI)
    splits = max(1, min(triton.cdiv(R, 2 * BR), 1024 // programs))  # at least two steps a program
    chunk = max(BR, triton.cdiv(triton.cdiv(R, splits), BR) * BR)
    splits = max(1, triton.cdiv(R, chunk))
    part = out if splits == 1 else torch.empty([O, splits, I], dtype=acc_dtype, device=x.device)
    _col_sum[(programs * splits,)](x, part, R, I, I2, so, sr, si1, si2, chunk, splits, ACC=acc, BR=BR, BI=BI,
                                   UNRAVEL=I1 > 1)
    if splits > 1:  # the parts' sums: narrow blocks of i, for more programs
        BI = min(triton.next_power_of_2(I), 64)
        _col_sum[(O * triton.cdiv(I, BI),)](part, out, splits, I, I, splits * I, I, 0, 1, splits, 1, ACC=acc,
                                            BR=min(4096 // BI, max(16, triton.next_power_of_2(splits))), BI=BI,
                                            UNRAVEL=False)
    return out


def kernel(self, dim, keepdim=False, *, dtype=None):
    ndim = self.dim()
    dims = sorted({d % ndim for d in dim}) if dim and ndim else list(range(ndim))  # None or []: all
    out_dtype = dtype or (self.dtype if self.dtype.is_floating_point else torch.int64)
    out = _sum(self.to(out_dtype) if dtype is not None else self, dims, out_dtype)  # dtype= casts before reducing
    return out if keepdim else out.reshape([n for d, n in enumerate(self.shape) if d not in dims])
