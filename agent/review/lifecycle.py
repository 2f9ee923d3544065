"""The review lifecycle of an accepted kernel, kept in ``generated_kernels/<op>/meta.json``.

Schema ``bbagent.kernel-meta`` (``SCHEMA_VERSION``, since version 2) adds to what a run writes:

* ``version``: 1 for an operator's first accepted kernel, then 2, 3, ...; earlier versions move to
  ``generated_kernels/<op>/versions/<n>/`` (kernel.py, meta.json, README.md), each with its own
  review state, so a new kernel never silently replaces a reviewed one.
* ``tested_in``: torch, triton, GPU model (``cpu`` for the Triton interpreter) and the fingerprint
  of bbagent's test harness (``harness.fingerprint.harness_fingerprint``) the kernel's tests last passed under.
* ``review``: ``status`` (``needs_review`` | ``approved`` | ``rejected``), ``by``, ``at``, ``note``
  and ``history`` (every transition, oldest first).

An approval covers what was judged: the Verdict shown, the approval and the served file are one
content digest. ``kernel_sha256`` is the digest of the kernel.py its tests judged; an approval pins
the kernel.py the reviewer read (``review.kernel_sha256``), and ``bbagent review approve`` of a file
that changed since its tests judges it first (``install_edit`` records the passing edit as a new
version with that Verdict). A Helion kernel's tuned configs (``helion_configs.json`` beside it) are
judged with it: ``helion_configs_sha256`` is the digest of the table its Verdict pinned, and a
table changed, added or removed since leaves the kernel unjudged, as an edited kernel.py does.
A kernel whose file no longer has the judged digest, or an approved one
whose file is not the one approved, is **modified**: no Verdict covers it, it is served nowhere, and
``bbagent review verify`` judges it as it judges a stale one. A folder whose meta.json cannot be read, or whose kernel.py is missing, is
**broken** (``agent.review.catalog.catalogue``), listed with its reason, never skipped silently.

A kernel is **stale** where it is approved and ``tested_in`` differs from this machine's
environment (``agent.machine.this_machine``) in torch, triton, the suite or, where this machine has a
GPU, the GPU model; ``bbagent review verify`` re-runs its tests here and renews ``tested_in``.
The document itself is ``agent.review.meta.KernelMeta``.
"""
from __future__ import annotations

import getpass
import hashlib
import os
import shutil
from pathlib import Path

from bbagent.agent.errors import ReviewError
from bbagent.agent.machine import harness_fingerprint, this_machine
from bbagent.agent.review.meta import (SCHEMA, SCHEMA_VERSION, STATUSES, Accepted, EditedFrom, KernelMeta, Replaced,
                                      Review, ReviewEntry, TestedIn, new_meta, read_meta, write_meta)
from bbagent.agent.review.record import edit_part, kernel_readme, now
from bbagent.agent.storage import accept_kernel
from bbagent.harness.interface import CONFIGS_FILE, Verdict

SHOWN_STATUSES = STATUSES + ("stale", "modified", "broken")
VERSIONS_DIR = "versions"
PROBLEM_FILE = "problem.py"  # a program answer's problem as it was when accepted: the answer serves without the original
KERNEL_FILES = ("kernel.py", "meta.json", "README.md", PROBLEM_FILE, CONFIGS_FILE)
ENVIRONMENT_KEYS = ("torch", "triton", "gpu", "suite")


def reviewer() -> str:
    """Who is reviewing: ``$BBAGENT_REVIEWER``, else the login name."""
    name = os.environ.get("BBAGENT_REVIEWER")
    if name:
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def tested_in(torch: str | None, triton: str | None, gpu: str | None) -> TestedIn:
    """The ``tested_in`` record of a kernel that passed its tests with these versions on ``gpu``
    (None: the CPU, under the Triton interpreter), with this harness."""
    return TestedIn(torch=torch, triton=triton, gpu=gpu or "cpu", suite=harness_fingerprint())


def changes(meta: KernelMeta, environment: dict | None = None) -> list[str]:
    """What differs between where the kernel was tested and ``environment`` (default this machine,
    ``agent.machine``), in words; empty when nothing that matters did. The GPU model counts only
    where this machine has one."""
    environment = environment or this_machine().as_dict()
    tested = meta.tested_in.model_dump()
    found = []
    for key in ENVIRONMENT_KEYS:
        now_value = environment.get(key)
        if key == "gpu" and now_value is None:
            continue
        if tested.get(key) != now_value:
            what = "test suite" if key == "suite" else key
            found.append(f"{what} {tested.get(key) or 'unknown'} -> {now_value}")
    return found


def status_of(meta: KernelMeta, environment: dict | None = None, folder: Path | None = None) -> str:
    """The status to show: the stored one; ``broken`` where ``folder`` has no kernel.py; ``modified``
    where its file is not the one its tests judged, or, approved, not the one approved (``folder``
    given); ``stale`` for an approved one whose environment changed."""
    stored = meta.review.status
    if folder is not None and not (folder / "kernel.py").is_file():
        return "broken"
    if stored != "rejected" and folder is not None and not_covered(folder, meta):
        return "modified"
    if stored == "approved" and changes(meta, environment):
        return "stale"
    return stored


def file_sha256(path: Path) -> str | None:
    """The file's sha256, or None where it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def configs_beside(kernel: Path) -> str | None:
    """The Helion configs kept beside the kernel file ``kernel`` (``CONFIGS_FILE``), as text; None
    where there are none. OSError and UnicodeDecodeError are the caller's to word."""
    configs = Path(kernel).with_name(CONFIGS_FILE)
    return configs.read_text(encoding="utf-8") if configs.is_file() else None


def unjudged(folder: Path, meta: KernelMeta) -> str | None:
    """Why no Verdict covers ``folder``'s kernel.py (it was changed since its tests judged it), in
    words naming the file and the fix; None where the file is the one judged, cannot be read, or
    was recorded before the judged digest was."""
    judged, now_digest = meta.kernel_sha256, file_sha256(folder / "kernel.py")
    if judged is not None and now_digest is not None and now_digest != judged:
        return (f"{folder / 'kernel.py'} changed since its tests judged it (sha256 {judged[:12]} judged, "
                f"{now_digest[:12]} now): no Verdict covers it; `bbagent review approve {meta.op}` judges it first")
    configs = folder / CONFIGS_FILE
    now_configs = file_sha256(configs)
    if now_configs == meta.helion_configs_sha256:
        return None
    said = ("is missing" if now_configs is None else "was added" if meta.helion_configs_sha256 is None else "changed")
    return (f"{configs}, the Helion configs the kernel runs, {said} since its tests judged it: no Verdict covers "
            f"the kernel with it; `bbagent review approve {meta.op}` judges it first")


def not_covered(folder: Path, meta: KernelMeta) -> str | None:
    """Why the kernel.py in ``folder`` may not be served whatever its review says: approved, it is
    missing or not the file approved (``modified_since_approval``); or no Verdict covers it
    (``unjudged``: an approval that pinned a file its tests never judged, before approvals judged
    edits, is refused so too). None where neither holds."""
    return modified_since_approval(folder, meta) or unjudged(folder, meta)


def modified_since_approval(folder: Path, meta: KernelMeta) -> str | None:
    """Why the approved kernel in ``folder`` is not the file that was approved, in words naming the
    file and the fix, or None where it is (or nothing was approved). An approval recorded before
    approvals pinned the file is held to the digest the kernel was accepted with."""
    if meta.review.status != "approved":
        return None
    pinned = meta.review.kernel_sha256 or meta.kernel_sha256
    kernel = folder / "kernel.py"
    now_digest = file_sha256(kernel)
    if now_digest is None:
        return f"{kernel} is missing"
    if pinned is not None and now_digest != pinned:
        return (f"{kernel} was modified since its approval (sha256 {pinned[:12]} approved, {now_digest[:12]} now); "
                f"review it again: bbagent review show {meta.op} && bbagent review approve {meta.op} "
                "(which judges the file first)")
    return None


def record_decision(meta: KernelMeta, status: str, note: str, by: str, kernel_sha256: str | None = None) -> KernelMeta:
    """``meta`` with a review decision (or bbagent's own, ``by="bbagent"``) added to its history;
    an approval records the digest of the file that was read (``kernel_sha256``)."""
    if status not in STATUSES:
        raise ReviewError(f"unknown review status '{status}'; one of {', '.join(STATUSES)}")
    entry = ReviewEntry.model_validate({"status": status, "by": by, "at": now(), "note": note,
                                        "kernel_sha256": kernel_sha256})
    return meta.model_copy(update={"review": meta.review.model_copy(
        update={**entry.model_dump(), "history": [*meta.review.history, entry]})})


def set_status(folder: Path, status: str, note: str = "", by: str | None = None) -> KernelMeta:
    """Record a review decision in ``folder``'s meta.json; an approval pins kernel.py as it is now."""
    digest = file_sha256(folder / "kernel.py")
    if digest is None and status == "approved":
        raise ReviewError(f"{folder / 'kernel.py'} is missing or unreadable: there is nothing to approve")
    meta = record_decision(read_meta(folder), status, note, by or reviewer(), kernel_sha256=digest)
    write_meta(folder, meta)
    return meta


def version_folders(op_dir: Path) -> list[Path]:
    """The earlier versions of an operator's kernel, oldest first."""
    where = Path(op_dir) / VERSIONS_DIR
    found = [p for p in where.iterdir() if p.is_dir() and p.name.isdigit()] if where.is_dir() else []
    return sorted(found, key=lambda p: int(p.name))


def archive_current(root: Path, op_dir: Path, incoming_run: str | None) -> tuple[int, Replaced | None]:
    """Before a new kernel is installed in ``op_dir``: the version number it gets and, where the
    kernel there now is kept (moved to ``versions/<n>/``), what it was. The best kernel of the same
    run replaces its own earlier one in place, unless that one was reviewed meanwhile. What is kept
    is the file its tests judged (``judged_source``)."""
    if not (Path(op_dir) / "meta.json").is_file():
        earlier = version_folders(op_dir)
        return (int(earlier[-1].name) + 1 if earlier else 1), None
    meta = read_meta(op_dir)
    if meta.run_id == incoming_run and meta.review.status == "needs_review":
        return meta.version, None
    target = Path(op_dir) / VERSIONS_DIR / str(meta.version)
    target.mkdir(parents=True, exist_ok=True)
    for name in KERNEL_FILES:
        if name != "kernel.py" and (Path(op_dir) / name).exists():
            shutil.copy2(Path(op_dir) / name, target / name)
    source = judged_source(root, op_dir, meta)
    if source is not None:
        (target / "kernel.py").write_bytes(source)
    write_meta(target, meta)
    replaced = Replaced(version=meta.version, status=meta.review.status, run_id=meta.run_id,
                        where=f"{VERSIONS_DIR}/{meta.version}")
    return meta.version + 1, replaced


def judged_source(root: Path, op_dir: Path, meta: KernelMeta) -> bytes | None:
    """The kernel.py its tests judged: the file in ``op_dir`` where it still has the judged digest
    (or none was recorded), else the copy of it in its run's transcript (``runs/<run_id>/``); None
    where neither is left (the version is then kept without its kernel.py, and lists as broken)."""
    here = Path(op_dir) / "kernel.py"
    if meta.kernel_sha256 is None or file_sha256(here) == meta.kernel_sha256:
        return here.read_bytes() if here.is_file() else None
    transcript = Path(root) / "runs" / str(meta.run_id)
    for candidate in sorted(transcript.rglob("*.py")) if meta.run_id and transcript.is_dir() else []:
        if file_sha256(candidate) == meta.kernel_sha256:
            return candidate.read_bytes()
    return None


def install(root: Path, kernel_source: str, accepted: Accepted, problem_text: str | None = None,
            configs: str | None = None) -> KernelMeta:
    """Install a newly accepted kernel as ``root/generated_kernels/<op>/``, keeping the kernel there
    (unless it is the same run's unreviewed one, or this is an edit of it) in ``versions/``.
    ``accepted``: what its acceptance knows (``agent.review.meta.Accepted``); ``problem_text``: a
    program answer's problem as judged, kept beside it (``PROBLEM_FILE``); ``configs``: a Helion
    kernel's tuned configs its Verdict pinned, kept beside it (``CONFIGS_FILE``). Returns the new
    meta.json; its ``replaced`` says what was moved aside. A kernel identical to the current one
    (same sha256) is no new version: the current one stays as it is, review included, and is returned."""
    folder = Path(root) / "generated_kernels" / accepted.op
    if configs is not None:
        accepted = accepted.model_copy(update={"helion_configs_sha256": hashlib.sha256(configs.encode()).hexdigest()})
    if (folder / "meta.json").is_file() and accepted.kernel_sha256:
        current = read_meta(folder)
        if (current.kernel_sha256, current.helion_configs_sha256) == (accepted.kernel_sha256,
                                                                      accepted.helion_configs_sha256) \
                and current.run_id != accepted.run_id:
            return current
    edit = accepted.edited_from
    incoming = None if edit is not None else accepted.run_id  # an edit never replaces in place
    note = (f"accepted by run {accepted.run_id}" if edit is None else
            f"kernel.py of version {edit.version} edited by hand, then judged: its tests passed")
    entry = ReviewEntry(status="needs_review", by="bbagent", at=accepted.accepted_at or now(), note=note)
    meta = new_meta(accepted, schema=SCHEMA, schema_version=SCHEMA_VERSION, version=0, replaced=None,  # checked
                    tested_in=tested_in(accepted.versions.torch, accepted.versions.triton, accepted.gpu),
                    review=Review(**entry.model_dump(), history=[entry]))  # before anything is moved aside
    version, replaced = archive_current(root, folder, incoming)
    meta = meta.model_copy(update={"version": version, "replaced": replaced})
    beside = {name: text for name, text in ((PROBLEM_FILE, problem_text), (CONFIGS_FILE, configs)) if text is not None}
    accept_kernel(Path(root), accepted.op, kernel_source, meta.as_json(), kernel_readme(meta), beside)
    return meta


def install_edit(root: Path, meta: KernelMeta, source: str, verdict: Verdict, by: str,
                 problem_text: str | None = None, configs: str | None = None) -> KernelMeta:
    """``source``, the current kernel.py of ``meta``'s folder edited by hand since its tests judged it
    and now judged again by ``verdict`` (``agent.review.record.edit_part``), installed as a new
    version that says what it was edited from; the version it was edited from is kept in
    ``versions/`` with the file its tests judged. Returns the new meta.json (needs_review)."""
    edited_from = EditedFrom(version=meta.version, kernel_sha256=meta.kernel_sha256, run_id=meta.run_id, by=by,
                             at=now())
    return install(root, source, edit_part(meta, verdict, edited_from), problem_text, configs)
