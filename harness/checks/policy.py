"""The comparison policy as data and prose, without torch: ``bbagent eval --help`` prints it
(so that --help need not import torch), ``harness.checks.compare`` applies it."""
from __future__ import annotations

# dtype name -> (atol, rtol). The torch.testing defaults; a dtype missing here is compared exactly.
TOLERANCES_BY_NAME = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-5, 1.3e-6),
    "float16": (1e-5, 1e-3),
    "bfloat16": (1e-5, 1.6e-2),
}
# What a program's answer may leave to torch (harness.checks.program_compare): nothing; matrix products
# and convolutions (cuBLAS, cuDNN); everything.
LIBRARY_POLICIES = ("none", "gemm", "all")
# Chance that a correct random kernel fails one test's distribution check.
KS_ALPHA = 1e-6

TOLERANCE_POLICY = (
    "Outputs must match the aten reference in structure, shape, dtype and device. "
    "Integer/bool: exact. Floating: |actual-expected| <= atol + rtol*|expected| with "
    + ", ".join(f"{name} atol={a:g} rtol={r:g}" for name, (a, r) in TOLERANCES_BY_NAME.items())
    + ". NaN and +/-inf positions must match exactly. A value outside that tolerance of aten's result "
    "still passes within the tolerance of a float64 run of the op; where aten's own result is outside "
    "the tolerance of the float64 run, the allowance grows by twice aten's largest error on that tensor; "
    "for reductions of n terms (sums, matmuls) also by 2 * 2**-24 * sqrt(n) * op(|inputs|), the "
    "probabilistic float32 rounding bound of any summation order; near the dtype's largest value, inf "
    "against max is a rounding difference; where aten returns NaN/inf but the float64 value is finite, "
    "or is the kernel's own non-finite value (aten's float32 CPU gelu(+inf) is NaN, float64's and CUDA's "
    "inf), that value rounded to the dtype (+/-inf where it does not fit) is the reference (aten's own "
    "value also passes; the test says which reference agreed). "
    "Ops with unspecified values (empty*) are compared on shape, dtype, device and strides; random "
    "ops (tag nondeterministic_seeded) on those, NaN positions, and a two-sample Kolmogorov-Smirnov "
    f"test against an independent reference draw (level {KS_ALPHA:g}); they must also draw from the "
    "generator they are given: the same seed gives the same values, another seed or the next call "
    "other values (where aten's do)."
)
