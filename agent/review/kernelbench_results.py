"""bbagent's judgement of KernelBench answers in the files KernelBench's own scripts read.

KernelBench's ``scripts/eval_from_generations.py`` writes ``runs/<run>/eval_results.json``: per
problem number, a list of samples, each ``{sample_id, compiled, correctness, metadata, runtime,
runtime_stats}`` (runtime in ms, -1.0 where none was measured); with several samples per problem
it adds ``pass_at_k_results.json`` (the unbiased pass@k estimator of Chen et al. 2021 per problem,
their average, and counts). ``scripts/benchmark_eval_analysis.py`` reads both, given the run's
folder. Here the same files are written from bbagent's Verdicts, so that bbagent's results and
KernelBench's own evaluation of the same files can be read by the same analysis, side by side.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from bbagent.agent.review.meta import PerformanceRecord
from bbagent.agent.storage import write_json
from bbagent.harness.interface import TestCounts, Verdict

NOT_LOADED = ("import_error", "missing_entry_point", "compile_error")  # KernelBench: compiled False
EVAL_RESULTS, PASS_AT_K = "eval_results.json", "pass_at_k_results.json"


@dataclass(frozen=True)
class JudgedSample:
    """What bbagent found of one sample: passed, the error kind and message of a failure, and its
    time on the GPU named (ms per call of ModelNew on the problem's inputs, and eager's), None
    where it was not timed."""
    passed: bool
    error_kind: str | None = None
    message: str = ""
    runtime_ms: float | None = None
    eager_ms: float | None = None
    gpu: str | None = None
    tests: TestCounts | None = None

    @classmethod
    def of_verdict(cls, verdict: Verdict) -> "JudgedSample":
        performance = verdict.performance
        test = (next((t for t in performance.counted_tests() if t.candidate is not None), None)
                if performance is not None and performance.measured else None)
        return cls(passed=verdict.passed, error_kind=verdict.error_kind, message=verdict.message,
                   tests=verdict.test_counts(),
                   runtime_ms=test.candidate.mean_ms if test is not None and test.candidate is not None else None,
                   eager_ms=test.aten.mean_ms if test is not None and test.aten is not None else None,
                   gpu=verdict.performance.gpu if verdict.performance is not None else None)

    @classmethod
    def of_accepted(cls, performance: PerformanceRecord, tests: TestCounts | None) -> "JudgedSample":
        shape = next((s for s in performance.shapes if s.kernel_ms is not None and not s.overhead_dominated),
                     None) if performance.measured else None
        return cls(passed=True, runtime_ms=shape.kernel_ms if shape is not None else None,
                   eager_ms=shape.aten_ms if shape is not None else None, gpu=performance.gpu, tests=tests)

    def row(self, sample_id: int) -> dict:
        """The sample as KernelBench's ``eval_results.json`` lists it."""
        metadata = {"judged_by": "bbagent", "hardware": self.gpu or "not timed",
                    **({"tests_passed": f"{self.tests.passed}/{self.tests.total}"} if self.tests else {}),
                    **({"error_kind": self.error_kind} if self.error_kind else {}),
                    **({"error": self.message[:500]} if self.message and not self.passed else {})}
        stats = ({"mean": self.runtime_ms, "hardware": self.gpu,
                  **({"eager_mean": self.eager_ms} if self.eager_ms is not None else {})}
                 if self.runtime_ms is not None else {})
        loaded = self.passed or self.error_kind not in (*NOT_LOADED, "no_code")
        return {"sample_id": sample_id, "compiled": loaded, "correctness": self.passed, "metadata": metadata,
                "runtime": self.runtime_ms if self.runtime_ms is not None else -1.0, "runtime_stats": stats}


def pass_at_k(n: int, correct: int, k: int) -> float:
    """The chance that at least one of ``k`` samples drawn from ``n`` (``correct`` of them right) is
    right, without replacement: 1 - C(n - c, k) / C(n, k)."""
    if n - correct < k:
        return 1.0
    return 1.0 - math.comb(n - correct, k) / math.comb(n, k)


def write_results(folder: Path, rows: dict[int, list[dict]], ks: tuple[int, ...] = (1, 5, 10)) -> list[Path]:
    """``folder/eval_results.json`` of ``rows`` (problem number: its samples' rows), and where a
    problem has more than one sample ``pass_at_k_results.json`` for each k up to the most samples;
    the files written."""
    ordered = {str(number): rows[number] for number in sorted(rows)}
    write_json(folder / EVAL_RESULTS, ordered)
    most = max((len(samples) for samples in rows.values()), default=0)
    if most < 2:
        return [folder / EVAL_RESULTS]
    wanted = sorted({k for k in ks if k <= most} | {1})
    problems = {}
    for number, samples in ordered.items():
        n, correct = len(samples), sum(1 for s in samples if s["correctness"] and s["compiled"])
        problems[number] = {"total_samples": n, "correct_samples": correct,
                            **{f"pass@{k}": pass_at_k(n, correct, min(k, n)) for k in wanted}}
    write_json(folder / PASS_AT_K, {
        "averages": {f"avg_pass@{k}": sum(p[f"pass@{k}"] for p in problems.values()) / len(problems) for k in wanted},
        "metadata": {"total_problems": len(problems), "problems_with_samples": len(problems),
                     "total_evaluated_samples": sum(p["total_samples"] for p in problems.values()),
                     "total_correct_samples": sum(p["correct_samples"] for p in problems.values()),
                     **{f"pass@{k}_count": len(problems) for k in wanted}, "judged_by": "bbagent"},
        "problems": problems})
    return [folder / EVAL_RESULTS, folder / PASS_AT_K]
