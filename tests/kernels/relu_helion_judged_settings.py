"""A correct Helion relu (relu_helion.py) that fails unless Helion runs with the judged child's settings:
no autotuning, no benchmark subprocess, no forked precompiles. Helion compiles it to a Triton
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
    settings = _relu.settings  # as the judged child sets them: no autotuning, nothing started in other processes
    if (settings.autotune_effort, settings.autotune_benchmark_subprocess, settings.autotune_precompile) != ("none", False, None):
        raise RuntimeError(f"Helion runs judged with {settings.autotune_effort}, {settings.autotune_benchmark_subprocess}, {settings.autotune_precompile}")
    return _relu(self.contiguous())
