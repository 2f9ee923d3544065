"""``bbagent review verify``: re-run an approved kernel's tests where its environment changed.

A kernel approved under other torch, triton, GPU or test-suite versions (``stale``) is tested
again here with its whole family of served overloads, and timed on a GPU. Passing renews its
``tested_in`` and performance and keeps it approved; failing puts it back to ``needs_review``
with the failure in the note. Either way the Verdict is kept beside it as ``verify-verdict.json``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from bbagent.agent.review.catalog import KernelVersion, find, operators
from bbagent.agent.review.lifecycle import changes, record_decision, tested_in
from bbagent.agent.review.meta import read_meta, write_meta
from bbagent.agent.review.record import performance_record
from bbagent.agent.storage import write_atomic


def stale_versions(root: Path, op: str | None, force: bool = False) -> list[tuple[str, KernelVersion]]:
    """The versions to verify: every approved one that is stale (``force``: every approved one),
    of ``op`` or of every operator."""
    entries = [find(root, op)] if op else operators(root)
    return [(e.op, v) for e in entries for v in e.versions
            if v.status == "stale" or (force and v.status == "approved")]


def verify(root: Path, version: KernelVersion, evaluate: Callable) -> dict:
    """Test one version again with ``evaluate(kernel_file) -> Verdict`` (its whole family, written
    for its own overload) and record the outcome in its meta.json; returns what happened."""
    meta = version.meta
    was = changes(meta)
    verdict = evaluate(version.kernel)
    write_atomic(version.folder / "verify-verdict.json", verdict.model_dump_json(indent=2) + "\n")
    meta = read_meta(version.folder)
    env = verdict.environment
    where = env.gpu or "CPU (Triton interpreter)"
    s = verdict.summary
    if verdict.passed:
        update = {"tested_in": tested_in(env.torch, env.triton, env.gpu), "gpu": env.gpu,
                  "interpreter": env.interpreter, "tests": verdict.test_counts(), "summary": verdict.summary,
                  "versions": meta.versions.model_copy(update={"torch": env.torch, "triton": env.triton})}
        if verdict.performance is not None and verdict.performance.measured:
            update["performance"] = performance_record(verdict)
        meta = meta.model_copy(update=update)
        status, note = "approved", f"verified: {s.passed}/{s.total} tests passed on {where} (was: {'; '.join(was) or 'forced'})"
    else:
        first = (verdict.message or "").splitlines()[0][:300] if verdict.message else verdict.error_kind
        status, note = "needs_review", f"verify failed on {where}: {s.failed} of {s.total} tests failed: {first}"
    pinned = (meta.review.kernel_sha256 or meta.kernel_sha256) if status == "approved" else None  # still the file read
    meta = record_decision(meta, status, note, by="bbagent", kernel_sha256=pinned)
    write_meta(version.folder, meta)
    return {"op": meta.op, "version": version.number, "passed": verdict.passed, "status": status,
            "note": note, "verdict": str(version.folder / "verify-verdict.json")}
