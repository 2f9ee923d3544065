"""aten.mm.default: one program per [BLOCK_M, BLOCK_N] output tile, looping over K; any strides
(transposed views included); float inputs through tl.dot with a float32 accumulator (full
float32 precision for float32: input_precision="ieee"), integer (and float64) inputs through
multiply and sum in int64 (float64): tl.dot takes no int32/int64."""
import torch
import triton
import triton.language as tl


@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
        USE_DOT: tl.constexpr, ACC: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=ACC)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak, mask=(rm[:, None] < M) & (rk[None, :] < K),
                    other=0)
        b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn, mask=(rk[:, None] < K) & (rn[None, :] < N),
                    other=0)
        if USE_DOT:
            acc += tl.dot(a, b, input_precision="ieee") if a.dtype == tl.float32 else tl.dot(a, b)
        else:
            acc += tl.sum(a.to(ACC)[:, :, None] * b.to(ACC)[None, :, :], axis=1)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def kernel(self, mat2):
    M, K = self.shape
    N = mat2.shape[1]
    out = torch.empty((M, N), dtype=self.dtype, device=self.device)
    if M and N:  # K == 0 gives zeros: the loop does not run
        use_dot = self.dtype in (torch.float16, torch.bfloat16, torch.float32)
        acc = tl.float32 if use_dot else (tl.float64 if self.dtype == torch.float64 else tl.int64)
        BLOCK_M, BLOCK_N, BLOCK_K = (64, 64, 32) if use_dot else (16, 16, 16)  # BLOCK_K >= 16 for tl.dot
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        _mm[grid](self, mat2, out, M, N, K, self.stride(0), self.stride(1), mat2.stride(0), mat2.stride(1),
                  out.stride(0), out.stride(1), USE_DOT=use_dot, ACC=acc,
                  BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return out
