"""aten.sum.dim_IntList in Helion: the kept dimensions are moved in front and merged into rows, the
reduced ones behind them into one axis (a copy only where the layout needs it); each tile of rows
loops over the reduced axis, accumulating in float32 (float64 for float64, int64 for integers)."""
import torch
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[32, 128], num_warps=4), static_shapes=False)
def _row_sum(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    rows, length = x.size()
    acc_dtype = torch.promote_types(out.dtype, torch.float32)  # float32, or float64 for float64
    for tile_r in hl.tile(rows):
        acc = hl.zeros([tile_r], dtype=acc_dtype)
        for tile_l in hl.tile(length):
            acc = acc + x[tile_r, tile_l].to(acc.dtype).sum(1)
        out[tile_r] = acc.to(out.dtype)
    return out


@helion.kernel(config=helion.Config(block_sizes=[32, 128], num_warps=4), static_shapes=False)
def _row_sum_integer(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    rows, length = x.size()
    for tile_r in hl.tile(rows):
        acc = hl.zeros([tile_r], dtype=torch.int64)
        for tile_l in hl.tile(length):
            acc = acc + x[tile_r, tile_l].to(torch.int64).sum(1)
        out[tile_r] = acc.to(out.dtype)
    return out


def kernel(self, dim=None, keepdim=False, *, dtype=None):
    x = self if dtype is None else self.to(dtype)
    integer = not x.is_floating_point()
    out_dtype = dtype or (torch.int64 if integer else x.dtype)
    ndim = max(x.dim(), 1)
    dims = sorted({d % ndim for d in (range(ndim) if dim is None or len(dim) == 0 else dim)})
    kept = [d for d in range(x.dim()) if d not in dims]
    shape = [1 if d in dims else x.shape[d] for d in range(x.dim())] if keepdim else [x.shape[d] for d in kept]
    if x.dim() == 0:
        x = x.reshape(1)
    rows = 1
    for d in kept:
        rows *= x.shape[d]
    length = x.numel() // rows if rows else 0
    grid = x.permute(kept + dims).reshape(rows, length)  # a view where the layout allows, else a copy
    out = torch.empty(rows, dtype=out_dtype, device=x.device)
    if rows == 0:
        return out.reshape(shape)
    if length == 0:
        return out.zero_().reshape(shape)
    (_row_sum_integer if integer else _row_sum)(grid, out)
    return out.reshape(shape)
