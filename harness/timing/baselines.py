"""Baselines other than eager aten: what a user would otherwise run. Today one: ``inductor``, the
aten op compiled by ``torch.compile`` (inductor backend, whole graph, static shapes).

Inductor is timed in a child of its own with no candidate in it (``harness.timing.inductor``,
started by ``harness.evaluate``), after the candidate has passed and been timed: its compiler writes
caches, reads its own sources and may start compile workers, all of which the candidate's sandbox
forbids, and a kernel that fails should not pay for compiling. In that child inductor runs
interleaved with eager aten in the same L2-flushed loop, once per (GPU, torch, op, input, timing
mode, compile mode); the timings are cached like eager's, in the same table, under the mode
``inductor-<compile mode>/<graph|eager>``. The kernel's speedup over inductor on a shape is
inductor's median over the kernel's median in the same timing mode (CUDA-graph replay or eager
calls). A shape inductor failed to compile is reported with its error and left out of the
summary; it never counts as 1.0x.
"""
from __future__ import annotations

from bbagent.harness.timing.metrics import fast_p, geomean, quantile

ENGINES = ("eager", "inductor")
# bbagent captures every side in a CUDA graph itself, so inductor's own CUDA graphs stay off.
INDUCTOR_MODES = {"default": None, "max-autotune": "max-autotune-no-cudagraphs"}
CPU_REASON = ("the inductor baseline is timed on a CUDA GPU only: on the CPU (Triton interpreter) nothing "
              "is timed, so there is no speed to compare")


def parse_engines(text: str) -> tuple[str, ...]:
    """``eager,inductor`` as a tuple; eager is always included (it is the reference of every test).
    Raises ValueError naming the engines there are."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in ENGINES]
    if unknown or not names:
        raise ValueError(f"unknown baseline {', '.join(unknown) or repr(text)}: choose from {', '.join(ENGINES)}")
    return tuple(dict.fromkeys(["eager", *names]))


def cache_mode(compile_mode: str, timing_mode: str) -> str:
    """The reference cache's ``mode`` for an inductor timing (eager's are plain graph/eager)."""
    return f"inductor-{compile_mode}/{timing_mode}"


def cache_row(mode: str, input_id: str | None, timing: dict, eager_over_inductor: float | None,
              launches: list[dict] | None) -> dict:
    """An inductor timing as the reference cache keeps it (``attach`` reads it back): the ratio and
    the kernel list ride in its ``timing``."""
    return {"mode": mode, "input": input_id,
            "timing": {**timing, "eager_over_inductor": eager_over_inductor, **({"launches": launches} if launches else {})}}


def wanted(tests: list[dict], rows: list[dict], gpu: str | None, compile_mode: str) -> list[dict]:
    """The timed tests with no cached inductor row for their (GPU, input, timing mode)."""
    have = {(row["input"], row["mode"]) for row in rows if row["gpu"] == gpu}
    return [t for t in tests if "error_kind" not in t and (t["input"], cache_mode(compile_mode, t["mode"])) not in have]


def attach(tests: list[dict], rows: list[dict], measured: list[dict], gpu: str | None, compile_mode: str,
           missing_error: str | None = None) -> None:
    """Give each timed test its ``baselines.inductor``: the timing (from ``measured`` this time, else
    the cache ``rows``), the kernel's speedup over it, or why there is none (``missing_error``: why
    the baseline's child measured nothing for a shape)."""
    fresh = {(m["input"], m["mode"]): {**m, "source": "measured"} for m in measured}
    cached = {}
    for row in rows:
        if row["gpu"] == gpu:
            timing = dict(row["timing"])
            cached[(row["input"], row["mode"])] = {"timing": timing, "source": "cache",
                                                   "eager_over_inductor": timing.pop("eager_over_inductor", None),
                                                   "launches": timing.pop("launches", None)}
    for test in tests:
        if "error_kind" in test:
            continue
        key = (test["input"], cache_mode(compile_mode, test["mode"]))
        found = fresh.get(key) or cached.get(key) or {
            "source": "measured", "error": missing_error or "not measured (the baseline's child ended before this shape)"}
        entry = {"compile_mode": compile_mode, "source": found["source"]}
        if found.get("error"):
            entry["error"] = found["error"]
        else:
            timing = found["timing"]
            entry.update(timing=timing, raw=found.get("raw"), eager_over_inductor=found.get("eager_over_inductor"),
                         compile_s=found.get("compile_s"), speedup=timing["median_ms"] / test["candidate"]["median_ms"],
                         launches=found.get("launches"))
        test.setdefault("baselines", {})["inductor"] = entry


def summary(tests: list[dict], correct: bool, compile_mode: str) -> dict:
    """Geomean, quantiles and fast_p of the kernel over inductor, over the shapes that are not
    overhead-dominated and that inductor compiled; the others are counted and listed."""
    timed = [t for t in tests if "error_kind" not in t]
    with_entry = [t for t in timed if "inductor" in (t.get("baselines") or {})]
    failures = [{"input": t["input"], "error": t["baselines"]["inductor"]["error"]}
                for t in with_entry if t["baselines"]["inductor"].get("error")]
    compared = [t for t in with_entry if not t["baselines"]["inductor"].get("error") and not t["overhead_dominated"]]
    speedups = [t["baselines"]["inductor"]["speedup"] for t in compared]
    correct = correct and len(timed) == len(tests)
    return {"engine": "inductor", "compile_mode": compile_mode, "measured": True, "compared": len(compared),
            "compile_failures": failures,
            "geomean_speedup": geomean(speedups) if correct else None,
            "speedup_p20": quantile(speedups, 0.2) if correct else None,
            "speedup_p50": quantile(speedups, 0.5) if correct else None,
            "speedup_p80": quantile(speedups, 0.8) if correct else None,
            "fast_p": fast_p(speedups, len(compared), correct)}


def not_measured(reason: str, compile_mode: str) -> dict:
    return {"engine": "inductor", "compile_mode": compile_mode, "measured": False, "reason": reason}
