"""The probe's tiny Triton kernels (one launch each). Imported after the process chose the GPU or
the interpreter (``TRITON_INTERPRET`` is read when a kernel is decorated)."""
from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def dot_block(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, IEEE: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K)[:, None] * N + tl.arange(0, N)[None, :])
    if IEEE:
        c = tl.dot(a, b, input_precision="ieee")
    else:
        c = tl.dot(a, b)
    tl.store(c_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], c)


@triton.jit
def exp_block(x_ptr, out_ptr, N: tl.constexpr, LIBDEVICE: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    if LIBDEVICE:
        y = libdevice.exp(x)
    else:
        y = tl.exp(x)
    tl.store(out_ptr + tl.arange(0, N), y)


@triton.jit
def max_block(x_ptr, out_ptr, N: tl.constexpr):
    tl.store(out_ptr, tl.max(tl.load(x_ptr + tl.arange(0, N)), axis=0))
