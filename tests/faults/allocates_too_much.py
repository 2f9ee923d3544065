"""Fault: asks for 4 TiB on the input's device (CUDA out of memory on a GPU, host out of memory on CPU)."""
import torch


def kernel(self):
    scratch = torch.empty(1 << 40, dtype=torch.float32, device=self.device)
    return scratch[: self.numel()].view(self.shape)
