"""Cheats on purpose (static spelling): relu computed by numpy through the result's .numpy() view
(on the host; a GPU tensor goes there and back by allowed copies), behind a one-element Triton
launch that satisfies the launch rule. No aten compute is called."""
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _decoy(x_ptr, y_ptr):
    tl.store(y_ptr, tl.load(x_ptr))


def kernel(self):
    host = self.cpu()
    out = torch.empty_like(host)
    if host.numel():
        np.maximum(host.numpy(), 0, out=out.numpy())
        out.numpy()[np.isnan(host.numpy())] = np.nan
    result = out.to(self.device)
    if result.numel():
        scratch = torch.empty(1, dtype=self.dtype, device=self.device)
        _decoy[(1,)](result, scratch)
    return result
