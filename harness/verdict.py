"""The Verdict: one JSON document per evaluated candidate.

Everything downstream (feedback prompts, storage, reports) reads this shape.
Top-level keys: ``schema_version``, ``op``, ``kernel`` {path, sha256}, ``verdict``
("pass" | "fail"), ``error_kind`` and ``message`` (for failures that are not one
test's: import error, timeout, crash, no tests), ``seed``, ``summary`` (counts),
``tests`` (one result per test run), ``skipped`` (tests not run, each with a reason),
``failure_groups`` (identical failures merged), ``guard_findings``, ``suite``
(notes on what the suite holds), ``timings``, ``environment``, ``stderr_tail``.
"""
from __future__ import annotations

import re

SCHEMA_VERSION = 1

ERROR_KINDS = {
    "import_error": "the kernel file raised while being imported (syntax error, bad import, ...)",
    "missing_entry_point": "the kernel file defines no callable named 'kernel'",
    "compile_error": "Triton failed to compile a kernel",
    "exception": "the kernel raised an exception",
    "timeout": "the evaluation ran past its wall-clock limit",
    "crash": "the process running the kernel died (signal or exit)",
    "cuda_error": "the kernel broke the CUDA context (illegal memory access, device-side assert, ...)",
    "cuda_oom": "the kernel ran out of GPU memory",
    "host_oom": "the process running the kernel used more host memory than allowed",
    "exit": "the kernel ended its process (sys.exit, os._exit)",
    "output_flood": "the kernel printed more output than allowed",
    "process_spawn": "the kernel started or forked a process (or too many of them)",
    "network": "the kernel tried to use the network",
    "forbidden_write": "the kernel wrote outside its private working directory",
    "secret_read": "the kernel tried to read credentials or another process's environment",
    "no_triton_launch": "no Triton kernel was launched",
    "guard": "the kernel broke a rule (e.g. called PyTorch compute)",
    "wrong_type": "returned a value of the wrong type",
    "wrong_structure": "returned the wrong number of values",
    "wrong_shape": "returned a tensor of the wrong shape",
    "wrong_dtype": "returned a tensor of the wrong dtype",
    "wrong_device": "returned a tensor on the wrong device",
    "mismatch": "values differ from the reference beyond tolerance",
    "nan_mismatch": "NaN positions differ from the reference",
    "wrong_strides": "returned a tensor with other strides (for ops whose values are unspecified)",
    "distribution_mismatch": "random values that do not follow the reference draws' distribution",
    "generator_misuse": "random values that do not follow the generator (seed, state)",
    "input_mutated": "modified an input it must not modify",
    "mutation_mismatch": "an argument the overload writes holds wrong values",
    "wrong_alias": "did not return the argument the overload must return",
    "no_tests": "no test could be run for this operator",
    "worker_error": "the evaluation harness itself failed",
}


def group_failures(tests: list[dict], limit: int = 10) -> list[dict]:
    """Merge failing tests with the same kind and message shape (numbers masked)."""
    groups: dict[tuple[str, str], dict] = {}
    for test in tests:
        if test.get("passed") is not False:
            continue
        message = test.get("message", "")
        key = (test.get("error_kind", "?"), _message_shape(message))
        group = groups.get(key)
        if group is None:
            groups[key] = {"error_kind": key[0], "count": 1, "tests": [test["id"]], "example": test}
        else:
            group["count"] += 1
            group["tests"].append(test["id"])
    ordered = sorted(groups.values(), key=lambda g: -g["count"])
    return ordered[:limit]


def _message_shape(message: str) -> str:
    """First line of a message with numbers and index lists masked, for grouping."""
    first = message.strip().split("\n")[-1] if "Error" in message else message.split("\n")[0]
    first = re.sub(r"\[[^\]]*\]", "[#]", first)
    return re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "#", first)


def describe_failures(summary: dict, tests: list[dict]) -> str:
    """One line: how many tests failed and how, e.g. '13 of 13 tests failed: mismatch x13'; with
    several overloads tested, the overloads that failed."""
    per_kind: dict[str, int] = {}
    failed_overloads: dict[str, int] = {}
    for test in tests:
        if test.get("passed") is False:
            per_kind[test.get("error_kind", "?")] = per_kind.get(test.get("error_kind", "?"), 0) + 1
            if "overload" in test:
                failed_overloads[test["overload"]] = failed_overloads.get(test["overload"], 0) + 1
    where = ""
    if len({t.get("overload") for t in tests}) > 1:
        where = " (" + ", ".join(f"{name} x{count}" for name, count in failed_overloads.items()) + ")"
    kinds = ", ".join(f"{kind} x{count}" for kind, count in per_kind.items())
    return f"{summary['failed']} of {summary['total']} tests failed: {kinds}{where}"


def summarize(tests: list[dict], skipped: list[dict], planned: int) -> dict:
    return {
        "planned": planned,
        "not_run": max(0, planned - len(tests)),
        "total": len(tests),
        "passed": sum(1 for t in tests if t.get("passed") is True),
        "failed": sum(1 for t in tests if t.get("passed") is False),
        "reference_errors": sum(1 for t in tests if t.get("passed") is None),
        "skipped": len(skipped),
    }
