"""A correct Helion relu for aten.relu.default: tiled PyTorch code that Helion compiles to a Triton
kernel, with a fixed config (no autotuning); NaN kept, any strides (made contiguous first)."""
import torch
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1024]), static_shapes=False)
def _relu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    flat_in, flat_out = x.reshape(-1), out.reshape(-1)
    for tile in hl.tile(flat_in.size(0)):
        v = flat_in[tile]
        flat_out[tile] = torch.where(v < 0, torch.zeros_like(v), v)
    return out


def kernel(self):
    return _relu(self.contiguous())
