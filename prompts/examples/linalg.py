"""aten.triangular_solve.default: one program per matrix of the (broadcast) batch holds A and B in
registers and substitutes row by row, reading only the triangle that `upper` names (`transpose`
solves with A^T, loaded through swapped strides; `unitriangular` takes the diagonal as 1).
Returns (solution, the coefficient matrix broadcast to the batch)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _solve(a_ptr, b_ptr, x_ptr, n, k, sa_r, sa_c, LOWER: tl.constexpr, UNIT: tl.constexpr,
           BN: tl.constexpr, BK: tl.constexpr):
    batch = tl.program_id(0).to(tl.int64)
    r, c = tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + batch * n * n + r[:, None] * sa_r + r[None, :] * sa_c,
                mask=(r[:, None] < n) & (r[None, :] < n), other=0).to(tl.float32)
    b = tl.load(b_ptr + batch * n * k + r[:, None] * k + c[None, :], mask=(r[:, None] < n) & (c[None, :] < k),
                other=0).to(tl.float32)
    x = tl.zeros([BN, BK], dtype=tl.float32)
    for step in range(n):
        i = step if LOWER else n - 1 - step
        row = tl.sum(tl.where(r[:, None] == i, a, 0.0), axis=0)  # row i of A, as a vector over columns
        known = (r < i) if LOWER else (r > i)  # only the triangle counts
        total = tl.sum(tl.where(known, row, 0.0)[:, None] * x, axis=0)
        diag = 1.0 if UNIT else tl.sum(tl.where(r == i, row, 0.0), axis=0)
        b_i = tl.sum(tl.where(r[:, None] == i, b, 0.0), axis=0)
        x = tl.where(r[:, None] == i, ((b_i - total) / diag)[None, :], x)
    tl.store(x_ptr + batch * n * k + r[:, None] * k + c[None, :], x.to(x_ptr.dtype.element_ty),
             mask=(r[:, None] < n) & (c[None, :] < k))


def kernel(self, A, upper=True, transpose=False, unitriangular=False):
    batch = list(torch.broadcast_shapes(self.shape[:-2], A.shape[:-2]))
    n, k = A.shape[-1], self.shape[-1]
    # returned as the "cloned coefficient": a new tensor, as aten's is (A.contiguous() may be A itself)
    coefficient = A.expand(batch + [n, n]).clone(memory_format=torch.contiguous_format)
    b = self.expand(batch + [n, k]).contiguous()
    out = torch.empty(batch + [n, k], dtype=self.dtype, device=self.device)
    count = out.numel() // (n * k) if n * k else 0
    if count:
        sa_r, sa_c = (1, n) if transpose else (n, 1)  # A^T: rows and columns swap strides
        _solve[(count,)](coefficient, b, out, n, k, sa_r, sa_c, LOWER=upper == transpose, UNIT=unitriangular,
                         BN=max(16, triton.next_power_of_2(n)), BK=max(16, triton.next_power_of_2(k)))
    return out, coefficient
