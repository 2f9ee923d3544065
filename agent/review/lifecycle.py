"""The review lifecycle of an accepted kernel, kept in ``generated_kernels/<op>/meta.json``.

Schema ``bbagent.kernel-meta`` (``SCHEMA_VERSION``, since version 2) adds to what a run writes:

* ``version``: 1 for an operator's first accepted kernel, then 2, 3, ...; earlier versions move to
  ``generated_kernels/<op>/versions/<n>/`` (kernel.py, meta.json, README.md), each with its own
  review state, so a new kernel never silently replaces a reviewed one.
* ``tested_in``: torch, triton, GPU model (``cpu`` for the Triton interpreter) and the fingerprint
  of bbagent's test harness (``harness.fingerprint.harness_fingerprint``) the kernel's tests last passed under.
* ``review``: ``status`` (``needs_review`` | ``approved`` | ``rejected``), ``by``, ``at``, ``note``
  and ``history`` (every transition, oldest first).

An approval pins the kernel.py the reviewer read (``review.kernel_sha256``): an approved kernel whose
file no longer has that digest is **modified** (since approval), and is served nowhere until it is
reviewed again. A folder whose meta.json cannot be read, or whose kernel.py is missing, is
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
from bbagent.agent.review.meta import SCHEMA, SCHEMA_VERSION, STATUSES, KernelMeta, Replaced, ReviewEntry, TestedIn, read_meta, write_meta
from bbagent.agent.review.record import kernel_readme, now
from bbagent.agent.storage import accept_kernel

SHOWN_STATUSES = STATUSES + ("stale", "modified", "broken")
VERSIONS_DIR = "versions"
KERNEL_FILES = ("kernel.py", "meta.json", "README.md")
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
    for an approved kernel whose file changed since it was approved (``folder`` given); ``stale`` for
    one whose environment changed."""
    stored = meta.review.status
    if folder is not None and not (folder / "kernel.py").is_file():
        return "broken"
    if stored == "approved" and folder is not None and modified_since_approval(folder, meta):
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


def modified_since_approval(folder: Path, meta: KernelMeta) -> str | None:
    """Why the approved kernel in ``folder`` is not the file that was approved, in words naming the
    file and the fix, or None where it is (or nothing was approved). An approval recorded before
    approvals pinned the file is held to the digest the kernel was accepted with."""
    if meta.review.status != "approved":
        return None
    pinned = meta.review.kernel_sha256 or meta.kernel_sha256
    kernel = folder / "kernel.py"
    now_digest = file_sha256(kernel)
    if pinned is None or now_digest == pinned:
        return None
    what = "is missing" if now_digest is None else f"was modified since its approval (sha256 {pinned[:12]} approved, {now_digest[:12]} now)"
    return f"{kernel} {what}; review it again: bbagent review show {meta.op} && bbagent review approve {meta.op}"


def record_decision(meta: KernelMeta, status: str, note: str, by: str, kernel_sha256: str | None = None) -> KernelMeta:
    """``meta`` with a review decision (or bbagent's own, ``by="bbagent"``) added to its history;
    an approval records the digest of the file that was read (``kernel_sha256``)."""
    if status not in STATUSES:
        raise ReviewError(f"unknown review status '{status}'; one of {', '.join(STATUSES)}")
    entry = ReviewEntry(status=status, by=by, at=now(), note=note, kernel_sha256=kernel_sha256)
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


def archive_current(op_dir: Path, incoming_run: str | None) -> tuple[int, Replaced | None]:
    """Before a new kernel is installed in ``op_dir``: the version number it gets and, where the
    kernel there now is kept (moved to ``versions/<n>/``), what it was. The best kernel of the same
    run replaces its own earlier one in place, unless that one was reviewed meanwhile."""
    if not (Path(op_dir) / "meta.json").is_file():
        earlier = version_folders(op_dir)
        return (int(earlier[-1].name) + 1 if earlier else 1), None
    meta = read_meta(op_dir)
    if meta.run_id == incoming_run and meta.review.status == "needs_review":
        return meta.version, None
    target = Path(op_dir) / VERSIONS_DIR / str(meta.version)
    target.mkdir(parents=True, exist_ok=True)
    for name in KERNEL_FILES:
        if (Path(op_dir) / name).exists():
            shutil.copy2(Path(op_dir) / name, target / name)
    write_meta(target, meta)
    replaced = Replaced(version=meta.version, status=meta.review.status, run_id=meta.run_id,
                        where=f"{VERSIONS_DIR}/{meta.version}")
    return meta.version + 1, replaced


def install(root: Path, op: str, kernel_source: str, run_part: dict) -> KernelMeta:
    """Install a newly accepted kernel as ``root/generated_kernels/<op>/``, keeping the kernel there
    (unless it is the same run's unreviewed one) in ``versions/``. ``run_part``: meta.json's fields
    from the run (``agent.review.record.run_part``). Returns the new meta.json; its ``replaced``
    says what was moved aside. A kernel identical to the current one (same sha256) is no new
    version: the current one stays as it is, review included, and is returned."""
    folder = Path(root) / "generated_kernels" / op
    if (folder / "meta.json").is_file() and run_part.get("kernel_sha256"):
        current = read_meta(folder)
        if current.kernel_sha256 == run_part["kernel_sha256"] and current.run_id != run_part.get("run_id"):
            return current
    version, replaced = archive_current(folder, run_part.get("run_id"))
    accepted_at = run_part.get("accepted_at") or now()
    entry = ReviewEntry(status="needs_review", by="bbagent", at=accepted_at,
                        note=f"accepted by run {run_part.get('run_id')}")
    versions = run_part.get("versions") or {}
    meta = KernelMeta(**run_part, schema=SCHEMA, schema_version=SCHEMA_VERSION, version=version, replaced=replaced,
                      tested_in=tested_in(versions.get("torch"), versions.get("triton"), run_part.get("gpu")),
                      review={**entry.model_dump(), "history": [entry]})
    accept_kernel(Path(root), op, kernel_source, meta.as_json(), kernel_readme(meta))
    return meta
