"""relu computed on the host with numpy and copied back: right values, no Triton kernel. Every call
it makes is an allowed copy, so only the launch rule can catch it (no_triton_launch)."""
import numpy as np
import torch


def kernel(self):
    if self.dtype == torch.bfloat16:
        host = np.asarray(self.float().cpu())
    else:
        host = np.asarray(self.cpu())
    result = torch.from_numpy(np.where(host < 0, np.zeros_like(host), host).copy())
    return result.to(device=self.device, dtype=self.dtype)
