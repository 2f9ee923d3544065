"""Cheats on purpose, spelt so the static check cannot see it: the product is computed by numpy
(np.asarray takes the host copy through __array__, which the source never names), copied into the
result, and a one-element Triton launch satisfies the launch rule. Only replaying the call's own
launches on new values shows that they do not make the result."""
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _decoy(x_ptr, y_ptr):
    tl.store(y_ptr, tl.load(x_ptr))


def _host(t):
    """The host copy numpy multiplies: floats in float32, integers as they are (exact)."""
    return np.asarray(t.cpu().to(torch.float32) if t.is_floating_point() else t.cpu())


def kernel(self, mat2):
    a = _host(self)
    b = _host(mat2)
    out = torch.empty((self.shape[0], mat2.shape[1]), dtype=self.dtype, device=self.device)
    out.copy_(torch.from_numpy(a @ b).to(self.dtype))
    if out.numel() and self.numel():
        scratch = torch.empty(1, dtype=self.dtype, device=self.device)
        _decoy[(1,)](out, scratch)
    return out
