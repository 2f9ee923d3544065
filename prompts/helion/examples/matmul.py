"""aten.mm.default in Helion: a tile of the output per program, a loop over K accumulating in
float32 (hl.dot with acc=, compiled to tl.dot; dot_precision="ieee", since Helion's default is TF32); integer matrices, which tl.dot does not take,
multiply and sum a small K tile at a time in int64."""
import torch
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[64, 64, 32], num_warps=4, num_stages=3), static_shapes=False,
               dot_precision="ieee")  # float32 to float32's tolerance: no TF32
def _mm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    n = b.size(1)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = hl.dot(a[tile_m, tile_k], b[tile_k, tile_n], acc=acc)
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


@helion.kernel(config=helion.Config(block_sizes=[16, 16, 8]), static_shapes=False)
def _mm_integer(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    n = b.size(1)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.int64)
        for tile_k in hl.tile(k):
            x = a[tile_m, tile_k].to(torch.int64)
            y = b[tile_k, tile_n].to(torch.int64)
            acc = acc + (x[:, :, None] * y[None, :, :]).sum(1)
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


def kernel(self: torch.Tensor, mat2: torch.Tensor) -> torch.Tensor:
    m, n = self.shape[0], mat2.shape[1]
    out = torch.empty((m, n), dtype=self.dtype, device=self.device)
    if out.numel() == 0:
        return out
    if self.shape[1] == 0:
        out.zero_()
        return out
    if self.is_floating_point():
        return _mm(self, mat2, out)
    return _mm_integer(self, mat2, out)
