"""aten.sigmoid.default in Helion: one tiled loop over the tensor, flattened on the host; the math inside the
loop is compiled by Helion into the Triton kernel, computed in float32 and cast back on store
(torch.sigmoid lowers to tl.sigmoid, which the CPU interpreter also runs; torch.exp lowers to
libdevice, which it cannot)."""
import torch
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1024], num_warps=4), static_shapes=False)
def _sigmoid(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        v = x[tile].to(torch.float32)
        out[tile] = torch.sigmoid(v).to(out.dtype)
    return out


def kernel(self: torch.Tensor) -> torch.Tensor:
    # integer and bool inputs give the default float dtype, as the reference does
    dtype = self.dtype if self.is_floating_point() else torch.get_default_dtype()
    x = self.contiguous()
    out = torch.empty(x.shape, dtype=dtype, device=x.device)
    if x.numel() == 0:
        return out
    # flattened here, not inside the Helion function: Helion 1.4 reuses a kernel compiled for a shape with a
    # dimension of size 1 for other shapes of the same rank when the function reshapes inside
    _sigmoid(x.view(-1), out.view(-1))
    return out
