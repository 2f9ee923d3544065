"""aten.native_layer_norm.default in Helion: rows of the normalized size, a tile of rows per program
holding whole rows (Helion loops over a long row itself where a config asks); mean and variance in
float32, the result cast back; mean and rstd in the dtype aten saves them in."""
import torch
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[4], num_warps=4), static_shapes=False)
def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float, out: torch.Tensor,
                mean: torch.Tensor, rstd: torch.Tensor) -> torch.Tensor:
    rows, length = x.size()
    for tile_r in hl.tile(rows):
        v = x[tile_r, :].to(torch.float32)
        mu = v.sum(-1) / length
        centred = v - mu[:, None]
        inverse = 1.0 / torch.sqrt((centred * centred).sum(-1) / length + eps)  # tl.sqrt: rsqrt is libdevice
        y = centred * inverse[:, None] * weight[None, :].to(torch.float32) + bias[None, :].to(torch.float32)
        out[tile_r, :] = y.to(out.dtype)
        mean[tile_r] = mu.to(mean.dtype)
        rstd[tile_r] = inverse.to(rstd.dtype)
    return out


def kernel(input, normalized_shape, weight, bias, eps):
    axis = input.dim() - len(normalized_shape)
    length = 1
    for size in normalized_shape:
        length *= size
    rows = input.numel() // length if length else 0
    stats_shape = list(input.shape[:axis]) + [1] * len(normalized_shape)
    x = input.contiguous().view(rows, length)
    out = torch.empty_like(x)
    # the saved statistics: float32 for float16/bfloat16 inputs on CUDA, and on the CPU with a float32
    # weight (mixed dtypes); else the input's dtype
    half = input.dtype in (torch.float16, torch.bfloat16)
    mixed = weight is not None and weight.dtype == torch.float32
    stat_dtype = torch.float32 if half and (input.is_cuda or mixed) else input.dtype
    mean = torch.empty(rows, dtype=stat_dtype, device=input.device)
    rstd = torch.empty(rows, dtype=stat_dtype, device=input.device)
    if rows and length:
        w = weight.reshape(length) if weight is not None else torch.ones(length, dtype=input.dtype, device=input.device)
        b = bias.reshape(length) if bias is not None else torch.zeros(length, dtype=input.dtype, device=input.device)
        _layer_norm(x, w, b, eps, out, mean, rstd)
    elif rows:  # nothing to normalize over: the mean of no values, as aten gives it
        mean.fill_(float("nan"))
        rstd.fill_(float("nan"))
    return out.view(input.shape), mean.view(stats_shape), rstd.view(stats_shape)
