"""aten.convolution.default: an implicit GEMM. 1-d and 2-d inputs are viewed as 3-d (size-1
spatial dimensions in front). A program computes [BLOCK_M output positions] x [BLOCK_N output
channels of one group], looping over K = the group's input channels times the window and gathering
the input elements each output position reads; direct and transposed convolutions differ only
in that gather and in the weight's layout. K runs channels innermost on channels-last inputs (and
a float input with a window and 16 or more channels a group is made channels-last: its gathers
then read runs of channels), else the window innermost. Index arithmetic is int32 where every
tensor allows it. Floats use tl.dot on tiles an autotune set picks per shape; integers multiply
and sum on small tiles (the same kernel, its block sizes given)."""
import torch
import triton
import triton.language as tl

CONFIGS = [
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}, num_warps=8, num_stages=3),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 32}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16}, num_warps=4, num_stages=2),
]


@triton.jit
def _conv(x_ptr, w_ptr, b_ptr, out_ptr, N, D, H, W, OD, OH, OW, C_in_g, C_out_g, KD, KH, KW,
          sxn, sxc, sxd, sxh, sxw, swg, swo, swi, swd, swh, sww, sb, son, soc, sod, soh, sow,
          std, sth, stw, pd, ph, pw, dd, dh, dw,
          TRANSPOSED: tl.constexpr, CHANNELS_INNER: tl.constexpr, HAS_BIAS: tl.constexpr, USE_DOT: tl.constexpr,
          ACC: tl.constexpr, INDEX: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    g = tl.program_id(2)
    m = tl.program_id(0).to(INDEX) * BLOCK_M + tl.arange(0, BLOCK_M)  # flat (n, od, oh, ow)
    co = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)  # output channel within the group
    ow, rest = m % OW, m // OW
    oh, rest = rest % OH, rest // OH
    od, n = rest % OD, rest // OD
    K = C_in_g * KD * KH * KW
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=ACC)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        # not `rest`: that one is [BLOCK_M] of INDEX, and a name reassigned in a loop must keep its type
        if CHANNELS_INNER:  # k = (kd, kh, kw, ci): neighbouring k read neighbouring channels-last memory
            ci, k_rest = k % C_in_g, k // C_in_g
            kw, k_rest = k_rest % KW, k_rest // KW
            kh, kd = k_rest % KH, k_rest // KH
        else:  # k = (ci, kd, kh, kw)
            kw, k_rest = k % KW, k // KW
            kh, k_rest = k_rest % KH, k_rest // KH
            kd, ci = k_rest % KD, k_rest // KD
        if TRANSPOSED:  # output o receives input i where o = i * stride - pad + k * dil
            td = od[:, None] + pd - kd[None, :] * dd
            th = oh[:, None] + ph - kh[None, :] * dh
            tw = ow[:, None] + pw - kw[None, :] * dw
            ok = (td >= 0) & (td % std == 0) & (th >= 0) & (th % sth == 0) & (tw >= 0) & (tw % stw == 0)
            i_d, i_h, i_w = td // std, th // sth, tw // stw
            a_off = n[:, None] * sxn + (g * C_in_g + ci[None, :]) * sxc + i_d * sxd + i_h * sxh + i_w * sxw
        else:  # separable: the offset is a row part (output position) plus a column part (k)
            i_d = od[:, None] * std - pd + kd[None, :] * dd
            i_h = oh[:, None] * sth - ph + kh[None, :] * dh
            i_w = ow[:, None] * stw - pw + kw[None, :] * dw
            ok = (i_d >= 0) & (i_h >= 0) & (i_w >= 0)
            row = n * sxn + (od * std - pd) * sxd + (oh * sth - ph) * sxh + (ow * stw - pw) * sxw
            col = (g * C_in_g + ci) * sxc + kd * dd * sxd + kh * dh * sxh + kw * dw * sxw
            a_off = row[:, None] + col[None, :]
        ok &= (i_d < D) & (i_h < H) & (i_w < W) & (m[:, None] < N * OD * OH * OW) & (k[None, :] < K)
        a = tl.load(x_ptr + a_off, mask=ok, other=0)
        b = tl.load(w_ptr + g * swg + co[None, :] * swo + ci[:, None] * swi + kd[:, None] * swd + kh[:, None] * swh
                    + kw[:, None] * sww, mask=(k[:, None] < K) & (co[None, :] < C_out_g), other=0)
        if USE_DOT:
            acc += tl.dot(a, b, input_precision="ieee") if a.dtype == tl.float32 else tl.dot(a, b)
        else:
            acc += tl.sum(a.to(ACC)[:, :, None] * b.to(ACC)[None, :, :], axis=1)
    if HAS_BIAS:
        acc += tl.load(b_ptr + (g * C_out_g + co) * sb, mask=co < C_out_g, other=0).to(ACC)[None, :]
    offsets = (n[:, None] * son + (g * C_out_g + co[None, :]) * soc
               + od[:, None] * sod + oh[:, None] * soh + ow[:, None] * sow)
    tl.store(out_ptr + offsets, acc.to(out_ptr.dtype.element_ty),
             mask=(m[:, None] < N * OD * OH * OW) & (co[None, :] < C_out_g))


# the float path, autotuned; the integer path calls _conv itself with its small block sizes
_conv_tuned = triton.autotune(configs=CONFIGS, key=["N", "OD", "OH", "OW", "C_in_g", "C_out_g", "KD", "KH", "KW"])(_conv)


def kernel(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    spatial = input.dim() - 2
    x, w = input, weight
    for _ in range(3 - spatial):  # view 1-d and 2-d convolutions as 3-d ones
        x, w = x.unsqueeze(2), w.unsqueeze(2)
    pad3 = lambda values, fill: [fill] * (3 - spatial) + list(values)  # noqa: E731
    st, pa, di, op = pad3(stride, 1), pad3(padding, 0), pad3(dilation, 1), pad3(output_padding, 0)
    N, C_in, D, H, W = x.shape
    KD, KH, KW = w.shape[2:]
    use_dot = input.dtype in (torch.float16, torch.bfloat16, torch.float32)
    if use_dot and not transposed and KD * KH * KW > 1 and C_in // groups >= 16:  # k = (kd, kh, kw, ci)
        x, w = x.contiguous(memory_format=torch.channels_last_3d), w.contiguous(memory_format=torch.channels_last_3d)
    if transposed:  # weight [C_in, C_out / groups, *k]
        C_out = w.shape[1] * groups
        size = [(i - 1) * s - 2 * p + d * (k - 1) + o + 1
                for i, s, p, d, k, o in zip((D, H, W), st, pa, di, (KD, KH, KW), op)]
        swg, swo, swi = (C_in // groups) * w.stride(0), w.stride(1), w.stride(0)
    else:  # weight [C_out, C_in / groups, *k]
        C_out = w.shape[0]
        size = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in zip((D, H, W), st, pa, di, (KD, KH, KW))]
        swg, swo, swi = (C_out // groups) * w.stride(0), w.stride(0), w.stride(1)
    out = torch.empty([N, C_out] + size, dtype=input.dtype, device=input.device)
    M = N * size[0] * size[1] * size[2]
    if M and C_out:
        acc = tl.float32 if use_dot else (tl.float64 if input.dtype == torch.float64 else tl.int64)
        C_out_g = C_out // groups
        args = (x, w, bias if bias is not None else x, out, N, D, H, W, *size, C_in // groups, C_out_g, KD, KH, KW,
                *x.stride(), swg, swo, swi, *w.stride()[2:], bias.stride(0) if bias is not None else 0,
                *out.stride(), *st, *pa, *di)
        span = lambda t: sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1  # noqa: E731 - elements reached
        flags = dict(TRANSPOSED=bool(transposed), CHANNELS_INNER=x.stride(1) == 1 and x.stride(-1) != 1,
                     HAS_BIAS=bias is not None, USE_DOT=use_dot, ACC=acc,
                     INDEX=tl.int64 if max(span(x), span(w), span(out)) >= 2**31 else tl.int32)
        if use_dot:
            grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(C_out_g, meta["BLOCK_N"]), groups)  # noqa: E731
            _conv_tuned[grid](*args, **flags)
        else:
            _conv[(triton.cdiv(M, 16), triton.cdiv(C_out_g, 16), groups)](*args, **flags, BLOCK_M=16, BLOCK_N=16,
                                                                          BLOCK_K=16)
    return out.view(out.shape[:2] + out.shape[5 - spatial:])
