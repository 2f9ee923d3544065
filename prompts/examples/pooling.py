"""aten.max_pool2d_with_indices.default: one program per BLOCK output elements, looping over the
window (its size a constexpr: the loop unrolls and the window's loads are in flight together);
NaN wins and ties keep the first position, as in PyTorch; indices are flat positions h * W + w
within each input plane. The input is read through its strides, never copied: a channels-last
input gives a channels-last output, walked with the channel fastest so that neighbouring
programs read neighbouring memory. Lists of one value apply to both dimensions, an empty stride
means stride = kernel size."""
import torch
import triton
import triton.language as tl


@triton.jit
def _max_pool(x_ptr, out_ptr, idx_ptr, N, C, H, W, OH, OW, s_n, s_c, s_h, s_w,
              SH, SW, PH, PW, DH, DW, KH: tl.constexpr, KW: tl.constexpr, LOWEST: tl.constexpr,
              CHANNELS_LAST: tl.constexpr, BLOCK: tl.constexpr, INDEX: tl.constexpr):
    # int32 index arithmetic (divisions are several times faster) unless a tensor is too large for it
    offsets = tl.program_id(0).to(INDEX) * BLOCK + tl.arange(0, BLOCK)
    valid = offsets < N * C * OH * OW
    if CHANNELS_LAST:  # the output's memory order: n, oh, ow, c
        c, rest = offsets % C, offsets // C
        ow, rest = rest % OW, rest // OW
        oh, n = rest % OH, rest // OH
    else:  # n, c, oh, ow
        ow, rest = offsets % OW, offsets // OW
        oh, rest = rest % OH, rest // OH
        c, n = rest % C, rest // C
    plane = n * s_n + c * s_c
    h0, w0 = oh * SH - PH, ow * SW - PW
    # start from the first window position inside the input (PyTorch's initial index)
    first_h = h0 + ((-h0 + DH - 1) // DH) * DH * (h0 < 0)
    first_w = w0 + ((-w0 + DW - 1) // DW) * DW * (w0 < 0)
    best = tl.full([BLOCK], LOWEST, dtype=x_ptr.dtype.element_ty)
    best_idx = first_h * W + first_w
    for kh in tl.static_range(KH):  # unrolled: every load of the window is in flight at once
        for kw in tl.static_range(KW):
            h, w = h0 + kh * DH, w0 + kw * DW
            inside = valid & (h >= 0) & (h < H) & (w >= 0) & (w < W)
            v = tl.load(x_ptr + plane + h * s_h + w * s_w, mask=inside, other=LOWEST)
            take = inside & ((v > best) | (v != v))  # a NaN always takes over (as in PyTorch)
            best = tl.where(take, v, best)
            best_idx = tl.where(take, h * W + w, best_idx)
    tl.store(out_ptr + offsets, best, mask=valid)
    tl.store(idx_ptr + offsets, best_idx, mask=valid)


def _out_size(size, k, s, p, d, ceil_mode):
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:  # the last window may not start in the padding
        out -= 1
    return out


def kernel(self, kernel_size, stride=[], padding=[0, 0], dilation=[1, 1], ceil_mode=False):
    pair = lambda v: (v[0], v[0]) if len(v) == 1 else tuple(v)  # noqa: E731
    (KH, KW), (PH, PW), (DH, DW) = pair(kernel_size), pair(padding), pair(dilation)
    SH, SW = pair(stride) if stride else (KH, KW)
    x = self if self.dim() == 4 else self.unsqueeze(0)  # unbatched [C, H, W] inputs too
    N, C, H, W = x.shape
    OH, OW = _out_size(H, KH, SH, PH, DH, ceil_mode), _out_size(W, KW, SW, PW, DW, ceil_mode)
    # aten's output layout: channels-last where the input is (and is not also contiguous)
    channels_last = self.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
    layout = torch.channels_last if channels_last else torch.contiguous_format
    out = torch.empty((N, C, OH, OW), dtype=self.dtype, device=self.device, memory_format=layout)
    idx = torch.empty((N, C, OH, OW), dtype=torch.int64, device=self.device, memory_format=layout)
    n = out.numel()
    if n:
        lowest = float("-inf") if self.dtype.is_floating_point else torch.iinfo(self.dtype).min
        BLOCK = 256
        big = max(n, x.numel(), max(s * (d - 1) for s, d in zip(x.stride(), x.shape)) + 1) >= 2**31
        _max_pool[(triton.cdiv(n, BLOCK),)](x, out, idx, N, C, H, W, OH, OW, *x.stride(),
                                            SH, SW, PH, PW, DH, DW, KH=KH, KW=KW, LOWEST=lowest,
                                            CHANNELS_LAST=channels_last, BLOCK=BLOCK,
                                            INDEX=tl.int64 if big else tl.int32)
    if self.dim() == 3:
        out, idx = out.squeeze(0), idx.squeeze(0)
    return out, idx
