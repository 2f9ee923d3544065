"""WRONG: a Helion kernel is launched, but the result is torch's own relu: the guard must see the
aten call, as it sees one beside a Triton kernel."""
import torch
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1024]), static_shapes=False)
def _copy(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    flat_in, flat_out = x.reshape(-1), out.reshape(-1)
    for tile in hl.tile(flat_in.size(0)):
        flat_out[tile] = flat_in[tile]
    return out


def kernel(self):
    _copy(self.contiguous())
    return torch.relu(self)
