"""The timing phase's parts that hold on any machine: case choice, bytes moved, the recheck
after timing, metrics, the reference cache and the CPU path of an evaluation asked for timings."""
from pathlib import Path

import pytest
import torch

from bbagent.harness.evaluate import EvaluationRequest, TimingOptions, evaluate_kernel
from bbagent.harness.ops import resolve_op
from bbagent.harness.timing.phase import bytes_moved, recheck, timed_cases
from bbagent.harness.timing.metrics import fast_p, geomean, quantile, summarize_performance
from bbagent.harness.timing.reference_cache import ReferenceCache
from bbagent.harness.suite.build import build_suite, clone_value

RELU = "aten.relu.default"
KERNELS = Path(__file__).parent / "kernels"


def timing(speedup: float, overhead: bool = False, nbytes: int = 1000, gbs: float = 100.0) -> dict:
    return {"id": f"t{speedup}", "input": f"x{speedup}", "mode": "graph", "speedup": speedup,
            "overhead_dominated": overhead, "bytes": nbytes, "candidate_gbs": gbs, "aten_gbs": gbs * speedup,
            "aten": {"median_ms": speedup}, "candidate": {"median_ms": 1.0}}


def test_metrics_leave_overhead_dominated_tests_apart():
    timings = [timing(2.0), timing(0.5), timing(1.0, nbytes=10**9, gbs=3000.0), timing(9.0, overhead=True)]
    summary = summarize_performance(RELU, timings, {"copy_gbs": 4000.0}, correct=True)
    assert summary["geomean_speedup"] == pytest.approx(1.0)  # 2 * 0.5 * 1, the 9x launch-bound test apart
    assert summary["counted"] == 3 and summary["overhead_dominated"] == {"count": 1, "geomean_speedup": pytest.approx(9.0)}
    assert summary["speedup_p50"] == pytest.approx(1.0)
    assert summary["fast_p"]["1"] == pytest.approx(1 / 3) and summary["fast_p"]["0"] == 1.0
    assert summary["memory_bound"] and summary["largest"]["bandwidth_fraction"] == pytest.approx(0.75)


def test_a_failure_is_never_a_speedup():
    timings = [timing(2.0), {"id": "t", "input": "x", "error_kind": "timing_mismatch", "message": "m"}]
    summary = summarize_performance(RELU, timings, {"copy_gbs": 4000.0}, correct=True)
    assert summary["correct"] is False and summary["geomean_speedup"] is None
    assert set(summary["fast_p"].values()) == {0.0}
    assert fast_p([3.0, 3.0], total=2, correct=False)["1"] == 0.0


def test_statistics_helpers():
    assert geomean([]) is None and geomean([4.0, 1.0]) == pytest.approx(2.0)
    assert quantile([1.0, 2.0, 3.0, 4.0, 5.0], 0.2) == pytest.approx(1.8)
    assert quantile([], 0.5) is None
    mm = summarize_performance("aten.mm.default", [timing(1.0)], {"copy_gbs": 4000.0}, correct=True)
    assert mm["memory_bound"] is False and "largest" not in mm


def test_bytes_moved_counts_reads_and_writes_once():
    relu, relu_ = resolve_op(RELU), resolve_op("aten.relu_.default")
    x = torch.randn(4, 8)
    assert bytes_moved(relu, (x,), {}, torch.relu(x)) == 2 * 32 * 4
    assert bytes_moved(relu_, (x,), {}, x) == 2 * 32 * 4  # read self, write self
    out = torch.empty(4, 8)
    add_out = resolve_op("aten.add.out")
    bias = torch.randn(8).expand(4, 8)  # a broadcast view reads its 8 values once
    assert bytes_moved(add_out, (x, bias), {"out": out}, out) == (32 + 8 + 32) * 4


def test_timed_cases_spread_from_smallest_to_largest():
    suite = build_suite(resolve_op(RELU), "cpu", 0, interpreter=False)
    traces = [c for c in suite.cases if c.trace is not None]
    chosen = timed_cases(suite.cases, {c.id for c in suite.cases}, 4)
    sizes = sorted(c.largest_tensor() for c in traces if c.largest_tensor() > 0)  # [0, 1024]: nothing to time
    assert len(chosen) == 4 and all(c.trace is not None for c in chosen)
    assert chosen[0].largest_tensor() == sizes[0] and chosen[-1].largest_tensor() == sizes[-1]
    assert timed_cases(suite.cases, set(), 4) == []  # only passed tests are timed


def test_recheck_catches_a_kernel_that_keeps_its_results():
    """After timing, new values go into the same tensors: a kernel answering from a cache keyed
    by the input's address returns the old result and fails (the CPU twin of the GPU phase)."""
    op = resolve_op(RELU)
    case = next(c for c in build_suite(op, "cpu", 0, interpreter=True).cases if c.trace is not None)
    args, kwargs = case.inputs()
    ref_in, cand_in = clone_value((args, kwargs)), clone_value((args, kwargs))
    kept = {}

    def cached_relu(x):
        if x.data_ptr() not in kept:
            kept[x.data_ptr()] = torch.ops.aten.relu.default(x)
        return kept[x.data_ptr()]
    honest = {"aten": lambda: op(*ref_in[0]), "candidate": lambda: op(*cand_in[0])}
    stale = {"aten": honest["aten"], "candidate": lambda: cached_relu(*cand_in[0])}
    stale["candidate"]()  # the timed calls filled the cache
    assert recheck(op, case, honest, ref_in, cand_in, _Recorder()) is None
    failure = recheck(op, case, stale, ref_in, cand_in, _Recorder())
    assert failure["error_kind"] == "timing_mismatch" and "refilled with new values" in failure["message"]
    flagged = recheck(op, case, honest, ref_in, cand_in, _Recorder([{"message": "candidate called aten.relu"}]))
    assert flagged["error_kind"] == "guard" and "while being timed" in flagged["message"]


class _Recorder:
    """Stands in for the aten guard: these stand-in kernels are plain torch, which the real
    guard would flag; ``findings`` are what it would have seen."""

    def __init__(self, findings=()):
        self.findings = list(findings)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_reference_cache_round_trip(tmp_path):
    cache = ReferenceCache(tmp_path / "runs" / "reference_timings.sqlite")
    cache.store_reference(RELU, "2.11", "NVIDIA H200", [{"mode": "graph", "input": "(T([8], f16),)",
                                                         "timing": {"median_ms": 0.004}}])
    cache.store_reference(RELU, "2.11", "NVIDIA H200", [{"mode": "graph", "input": "(T([8], f16),)",
                                                         "timing": {"median_ms": 0.003}}])  # replaces
    assert cache.reference_rows(RELU, "2.11") == [{"gpu": "NVIDIA H200", "mode": "graph",
                                                   "input": "(T([8], f16),)", "timing": {"median_ms": 0.003}}]
    assert cache.reference_rows(RELU, "2.13") == [] and cache.reference_rows("aten.add.Tensor", "2.11") == []
    cache.store_device("NVIDIA H200", "2.11", "3.6.0", {"copy_gbs": 4244.0})
    assert cache.device_rows("2.11") == [{"gpu": "NVIDIA H200", "triton": "3.6.0", "stats": {"copy_gbs": 4244.0}}]
    again = ReferenceCache(tmp_path / "runs" / "reference_timings.sqlite")  # reopening keeps the rows
    assert len(again.reference_rows(RELU, "2.11")) == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU twin: on a GPU machine the kernel is timed")
def test_cpu_evaluation_asked_for_timing_says_why_there_is_none(tmp_path):
    cache = ReferenceCache(tmp_path / "cache.sqlite")
    verdict = evaluate_kernel(EvaluationRequest.of(RELU, device="cpu", seed=1, timing=TimingOptions(cache=cache)), KERNELS / "relu_triton.py")
    assert verdict.passed
    assert verdict.performance.measured is False
    assert "interpreter time says nothing about a GPU" in verdict.performance.reason
    assert not cache.path.exists()  # nothing measured, nothing written
