"""Whether an operator has any test here, found before the model is asked anything: a kernel for an
operator with no test can never be judged, so every answer would be paid for and thrown away
(``generate --op aten._foreach_add.List`` asked round after round and ended "0/0 tests passed").

First the shipped listing (``harness.coverage.list_ops``, what ``bbagent ops`` shows): an overload
that float32 OpInfo samples reach or a real-model trace calls has tests, and so has one with a
dataset's inputs. Only where it says none is the suite itself built, once, by evaluating a
candidate that implements nothing: the listing's index holds float32 samples only, and OpInfos
named like the operator (integer-only ones, say) reach it as well. That evaluation's Verdict
counting no test at all is the refusal.
"""
from __future__ import annotations

import functools
import shutil

from bbagent.agent.errors import UsageError
from bbagent.harness.interface import list_ops, make_workdir

NOTHING_IMPLEMENTED = "def kernel(*args, **kwargs):\n    raise NotImplementedError('bbagent: does an operator have tests?')\n"


@functools.lru_cache(maxsize=1)
def _listed() -> dict[str, str]:
    """Overload -> why it has no tests ('' where it has some), for every listed overload."""
    return {row["op"]: row["why_none"] for row in list_ops("all")}


def listed_without_tests(overloads: list[str], extra_traces: dict | None = None) -> str | None:
    """Why the shipped listing gives these overloads (an operator and those its kernel serves) no
    test, or None where one of them has some (or a dataset brings inputs for it)."""
    listed = _listed()
    if any(listed.get(name) == "" for name in overloads):
        return None
    if extra_traces and any(extra_traces.get(name) for name in overloads):  # keyed by overload name
        return None
    reasons = [listed.get(name) for name in overloads if listed.get(name)]
    return reasons[0] if reasons else "no OpInfo sample reaches it and no real-model trace calls it"


def refuse_untested(op: str, overloads: list[str], evaluations, extra_traces: dict | None = None) -> None:
    """Raise ``UsageError`` (exit 2) where ``op`` has no test here. ``evaluations``
    (``agent.judging.Evaluations``, untimed) are the run's own (a batch's go through its slots);
    one runs only where the listing says none."""
    why = listed_without_tests(overloads, extra_traces)
    if why is None:
        return
    scratch = make_workdir("testable")
    try:
        stub = scratch / "kernel.py"
        stub.write_text(NOTHING_IMPLEMENTED)
        verdict = evaluations.evaluate(stub)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if verdict.infrastructure or verdict.summary.planned or verdict.summary.total:
        return  # it has tests (or this could not be told): the model is asked, as before
    raise UsageError(f"{op} has no test here ({why}), so no kernel for it could be judged: nothing was asked of "
                     "the model. `bbagent ops` lists the operators bbagent can test; a dataset's inputs for it "
                     "(`bbagent batch --dataset`) would be tests")
