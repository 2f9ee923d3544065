"""``bbagent review verify``: re-run an approved kernel's tests where its environment changed, and
judge a kernel.py changed since its tests.

A kernel approved under other torch, triton, GPU or test-suite versions (``stale``) is tested
again here with its whole family of served overloads, and timed on a GPU. Passing renews its
``tested_in`` and performance and keeps it approved; failing puts it back to ``needs_review``
with the failure in the note. A current kernel.py edited since its tests (``modified``) is judged as
a stale one is: passing records the edit as a new version with that Verdict, needing review
(``lifecycle.install_edit``; approving it is a reviewer's act); failing leaves it unserved, back to
``needs_review``. Either way the Verdict is kept beside it as ``verify-verdict.json``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from bbagent.agent.review.catalog import KernelVersion, find, judge_edit, operators
from bbagent.agent.review.lifecycle import changes, record_decision, tested_in, unjudged
from bbagent.agent.review.meta import read_meta, write_meta
from bbagent.agent.review.record import performance_record
from bbagent.agent.storage import write_atomic


VERDICT_FILE = "verify-verdict.json"  # beside the kernel: the Verdict of its last verification


def stale_versions(root: Path, op: str | None, force: bool = False) -> list[tuple[str, KernelVersion]]:
    """The versions to verify: every approved one that is stale (``force``: every approved one) and
    every current one whose kernel.py changed since its tests, of ``op`` or of every operator."""
    entries = [find(root, op)] if op else operators(root)
    return [(e.op, v) for e in entries for v in e.versions
            if v.status == "stale" or (force and v.status == "approved")
            or (v.current and v.status == "modified" and unjudged(v.folder, v.meta))]


def verify(root: Path, version: KernelVersion, judge: Callable) -> dict:
    """Test one version again with ``judge(version) -> Verdict`` (its whole family, written for its
    own overload) and record the outcome in its meta.json; returns what happened."""
    meta = version.meta
    if unjudged(version.folder, meta):
        return _verify_edit(root, version, judge)
    was = changes(meta)
    verdict = judge(version)
    write_atomic(version.folder / VERDICT_FILE, verdict.model_dump_json(indent=2) + "\n")
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
            "note": note, "verdict": str(version.folder / VERDICT_FILE)}


def _verify_edit(root: Path, version: KernelVersion, judge: Callable) -> dict:
    """A current kernel.py changed since its tests, judged (``catalog.judge_edit``): passing, recorded
    as a new version with that Verdict (needs review); failing, back to needs_review."""
    edit = judge_edit(root, version, judge, VERDICT_FILE, "bbagent")
    verdict_path = str(version.folder / VERDICT_FILE)
    if edit.meta is not None:
        s, meta = edit.verdict.summary, edit.meta
        note = (f"kernel.py edited since version {version.number}'s tests: {s.passed}/{s.total} tests passed; "
                f"recorded as version {meta.version}, which needs review (bbagent review approve {meta.op})")
        return {"op": meta.op, "version": meta.version, "passed": True, "status": meta.review.status, "note": note,
                "verdict": verdict_path}
    refused = edit.refused or "the edited kernel was not judged"
    meta = record_decision(read_meta(version.folder), "needs_review", refused, by="bbagent")
    write_meta(version.folder, meta)
    return {"op": meta.op, "version": version.number, "passed": False, "status": "needs_review", "note": refused,
            "verdict": verdict_path}
