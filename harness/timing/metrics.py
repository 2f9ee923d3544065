"""Per-operator performance metrics from the timed tests of one evaluation.

- speedup = eager median / candidate median, per test;
- ``geomean_speedup`` and the 20th/50th/80th percentiles over the timed tests that are not
  overhead-dominated (those, within 1.3x of an empty launch, measure launches rather than
  kernels and are summarised apart);
- ``fast_p``: the share of the op's timed tests that are correct and faster than p times
  eager. A kernel that failed any test has no speedup at all (geomean None, fast_p 0): a
  failure never counts as 1.0x;
- achieved bandwidth = least bytes moved / time, shown as a fraction of the device's measured
  copy bandwidth, the ceiling for a memory-bound op (every op outside ``COMPUTE_BOUND``).
"""
from __future__ import annotations

import math

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
# Ops whose time is arithmetic, not memory traffic, on the shapes models use.
COMPUTE_BOUND = frozenset({"mm", "bmm", "addmm", "baddbmm", "addbmm", "addmv", "mv", "matmul", "dot", "vdot",
                           "linear", "convolution", "_convolution", "convolution_backward", "cudnn_convolution",
                           "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                           "_scaled_dot_product_cudnn_attention", "_flash_attention_forward",
                           "_efficient_attention_forward", "_scaled_mm", "_int_mm"})


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def quantile(values: list[float], q: float) -> float | None:
    """Linear interpolation between the closest ranks."""
    if not values:
        return None
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def is_memory_bound(op_name: str) -> bool:
    """Whether the overload named ``aten.<packet>.<overload>`` moves memory more than it computes
    (a program's name says nothing of it: False)."""
    parts = op_name.split(".")
    return len(parts) == 3 and parts[1] not in COMPUTE_BOUND


def fast_p(speedups: list[float], total: int, correct: bool) -> dict[str, float]:
    """Share of ``total`` tests that are correct and faster than p x eager, for each p."""
    if not correct or total == 0:
        return {f"{p:g}": 0.0 for p in FAST_P}
    return {f"{p:g}": sum(s > p for s in speedups) / total for p in FAST_P}


def summarize_performance(op_name: str, timings: list[dict], device: dict, correct: bool) -> dict:
    """The metrics above. ``timings`` are the timing results of ``harness.timing.phase.time_case``."""
    timed = [t for t in timings if "error_kind" not in t]
    correct = correct and len(timed) == len(timings)
    counted = [t for t in timed if not t["overhead_dominated"]]
    apart = [t for t in timed if t["overhead_dominated"]]
    speedups = [t["speedup"] for t in counted]
    copy_gbs = device.get("copy_gbs")
    memory_bound = is_memory_bound(op_name)
    summary = {
        "correct": correct, "timed": len(timed), "counted": len(counted),
        "geomean_speedup": geomean(speedups) if correct else None,
        "speedup_p20": quantile(speedups, 0.2) if correct else None,
        "speedup_p50": quantile(speedups, 0.5) if correct else None,
        "speedup_p80": quantile(speedups, 0.8) if correct else None,
        "fast_p": fast_p(speedups, len(counted), correct),
        "overhead_dominated": {"count": len(apart),
                               "geomean_speedup": geomean([t["speedup"] for t in apart]) if correct else None},
        "memory_bound": memory_bound, "copy_gbs": copy_gbs,
    }
    if memory_bound and copy_gbs and counted:
        fractions = [t["candidate_gbs"] / copy_gbs for t in counted]
        largest = max(counted, key=lambda t: t["bytes"])
        summary.update(bandwidth_fraction_p50=quantile(fractions, 0.5),
                       largest={"input": largest["input"], "bytes": largest["bytes"],
                                "bandwidth_fraction": largest["candidate_gbs"] / copy_gbs,
                                "aten_bandwidth_fraction": largest["aten_gbs"] / copy_gbs})
    return summary
