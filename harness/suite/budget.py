"""How much of a suite the CPU (Triton interpreter) path runs; the GPU path runs everything.

The interpreter executes a kernel in numpy, block by block: a 2**18-element relu takes
about a second there, a 2**20-element one four. Every case left out is recorded in the
Verdict as skipped, with the reason.
"""
CPU_MAX_NUMEL = 1 << 18
MAX_TRACE_CASES_CPU = 5
# Calls per random-op test (the pooled distribution check, harness.checks.random_ops): a draw of
# tl.randn costs the interpreter ~50 ms, so the CPU path pools 8 draws, the GPU path up to 200.
MAX_RANDOM_CALLS_CPU = 8
