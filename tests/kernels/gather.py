"""A correct aten.gather.default: out[i][j][k] = self[i][index[i][j][k]][k] (for dim=1), any
strides for self and index, int64/int32/uint8 index, 0-dim tensors. Up to 4 dimensions."""
import torch
import triton
import triton.language as tl

RANK = 4


@triton.jit
def _gather(x_ptr, idx_ptr, out_ptr, n, DIM: tl.constexpr, s1, s2, s3,
            x0, x1, x2, x3, i0s, i1s, i2s, i3s, BLOCK: tl.constexpr):
    linear = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = linear < n
    c3 = linear % s3
    rest = linear // s3
    c2 = rest % s2
    rest = rest // s2
    c1 = rest % s1
    c0 = rest // s1
    picked = tl.load(idx_ptr + c0 * i0s + c1 * i1s + c2 * i2s + c3 * i3s, mask=mask, other=0).to(tl.int64)
    if DIM == 0:
        c0 = picked
    elif DIM == 1:
        c1 = picked
    elif DIM == 2:
        c2 = picked
    else:
        c3 = picked
    value = tl.load(x_ptr + c0 * x0 + c1 * x1 + c2 * x2 + c3 * x3, mask=mask)
    tl.store(out_ptr + linear, value, mask=mask)


def _padded(t):
    return [1] * (RANK - t.dim()) + list(t.shape), [0] * (RANK - t.dim()) + list(t.stride())


def kernel(self, dim, index, sparse_grad=False):
    if max(self.dim(), index.dim()) > RANK:
        raise ValueError(f"up to {RANK} dimensions")
    out = torch.empty(index.shape, dtype=self.dtype, device=self.device)
    n = out.numel()
    if n == 0:
        return out
    ndim = max(index.dim(), 1)
    padded_dim = RANK - ndim + dim % ndim
    x = self.reshape([1] * (ndim - self.dim()) + list(self.shape)) if self.dim() < ndim else self
    idx = index.reshape([1] * (ndim - index.dim()) + list(index.shape)) if index.dim() < ndim else index
    shape, idx_strides = _padded(idx)
    _, x_strides = _padded(x)
    _gather[(triton.cdiv(n, 1024),)](x, idx, out, n, padded_dim, *shape[1:], *x_strides, *idx_strides,
                                     BLOCK=1024)
    return out
