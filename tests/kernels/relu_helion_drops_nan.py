"""WRONG: a Helion relu written as where(x > 0, x, 0), which turns NaN into 0 (relu keeps NaN)."""
import torch
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1024]), static_shapes=False)
def _relu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    flat_in, flat_out = x.reshape(-1), out.reshape(-1)
    for tile in hl.tile(flat_in.size(0)):
        v = flat_in[tile]
        flat_out[tile] = torch.where(v > 0, v, torch.zeros_like(v))
    return out


def kernel(self):
    return _relu(self.contiguous())
