"""aten.mm.default: one program per [BLOCK_M, BLOCK_N] output tile, looping over K; any strides
(transposed views included). float16/bfloat16/float32 through tl.dot with a float32 accumulator
(float32 at full precision: input_precision="ieee"), with large tiles software-pipelined over K
(num_stages) and programs ordered in groups of GROUP_M tile rows, so that tiles running together
share their A and B blocks in L2; a small autotune set picks the tile per shape (each config
compiles once, then each new (M, N, K) is timed once). Integer and float64 inputs: multiply and
sum in int64 (float64) on small tiles, as tl.dot takes no int32/int64."""
import torch
import triton
import triton.language as tl

CONFIGS = [  # large tiles for large products, smaller ones where a large tile would leave SMs idle
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}, num_stages=3, num_warps=8),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, num_stages=4, num_warps=8),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32}, num_stages=4, num_warps=4),
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 64}, num_stages=5, num_warps=4),
]


@triton.jit
def _tile(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """This program's (tile row, tile column), GROUP_M tile rows at a time down each column."""
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * tiles_n)
    first = group * GROUP_M
    rows = tl.minimum(tiles_m - first, GROUP_M)
    return first + (pid % (GROUP_M * tiles_n)) % rows, (pid % (GROUP_M * tiles_n)) // rows


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def _mm_dot(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn, IEEE: tl.constexpr,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr = 8):
    pm, pn = _tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pm.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pn.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak, mask=(rm[:, None] < M) & (rk[None, :] < K),
                    other=0)
        b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn, mask=(rk[:, None] < K) & (rn[None, :] < N),
                    other=0)
        acc = tl.dot(a, b, acc, input_precision="ieee") if IEEE else tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _mm_exact(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn, ACC: tl.constexpr, BLOCK: tl.constexpr):
    rm = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    rn = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK, BLOCK], dtype=ACC)
    for k0 in range(0, K, BLOCK):
        rk = k0 + tl.arange(0, BLOCK)
        a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak, mask=(rm[:, None] < M) & (rk[None, :] < K),
                    other=0)
        b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn, mask=(rk[:, None] < K) & (rn[None, :] < N),
                    other=0)
        acc += tl.sum(a.to(ACC)[:, :, None] * b.to(ACC)[None, :, :], axis=1)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def kernel(self, mat2):
    M, K = self.shape
    N = mat2.shape[1]
    out = torch.empty((M, N), dtype=self.dtype, device=self.device)
    if M == 0 or N == 0:
        return out  # K == 0 gives zeros: the loops do not run
    strides = (self.stride(0), self.stride(1), mat2.stride(0), mat2.stride(1), out.stride(0), out.stride(1))
    if self.dtype in (torch.float16, torch.bfloat16, torch.float32):
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
        _mm_dot[grid](self, mat2, out, M, N, K, *strides, IEEE=self.dtype == torch.float32)
    else:
        acc = tl.float64 if self.dtype == torch.float64 else tl.int64
        _mm_exact[(triton.cdiv(M, 16), triton.cdiv(N, 16))](self, mat2, out, M, N, K, *strides, ACC=acc, BLOCK=16)
    return out
