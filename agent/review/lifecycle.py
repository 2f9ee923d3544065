"""The review lifecycle of an accepted kernel, kept in ``generated_kernels/<op>/meta.json``.

Schema ``bbagent.kernel-meta`` version 2 (``SCHEMA_VERSION``) adds to what a run writes:

* ``version``: 1 for an operator's first accepted kernel, then 2, 3, ...; earlier versions move to
  ``generated_kernels/<op>/versions/<n>/`` (kernel.py, meta.json, README.md), each with its own
  review state, so a new kernel never silently replaces a reviewed one.
* ``tested_in``: torch, triton, GPU model (``cpu`` for the Triton interpreter) and the fingerprint
  of bbagent's test suite (``suite_fingerprint``) the kernel's tests last passed under.
* ``review``: ``status`` (``needs_review`` | ``approved`` | ``rejected``), ``by``, ``at``, ``note``
  and ``history`` (every transition, oldest first).

A kernel is **stale** where it is approved and ``tested_in`` differs from this machine's
environment (``current_environment``) in torch, triton, the suite or, where this machine has a
GPU, the GPU model; ``bbagent review verify`` re-runs its tests here and renews ``tested_in``.
Folders written before this schema (no ``schema_version``) read as version 1, ``needs_review``.
"""
from __future__ import annotations

import datetime as dt
import getpass
import hashlib
import json
import os
import shutil
from functools import lru_cache
from pathlib import Path

from agent.storage import write_json

SCHEMA = "bbagent.kernel-meta"
SCHEMA_VERSION = 2
STATUSES = ("needs_review", "approved", "rejected")
SHOWN_STATUSES = STATUSES + ("stale",)
VERSIONS_DIR = "versions"
KERNEL_FILES = ("kernel.py", "meta.json", "README.md")
ENVIRONMENT_KEYS = ("torch", "triton", "gpu", "suite")


class ReviewError(Exception):
    """A review command that cannot be done as asked (unknown op, wrong state); exit 2."""


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def reviewer() -> str:
    """Who is reviewing: ``$BBAGENT_REVIEWER``, else the login name."""
    name = os.environ.get("BBAGENT_REVIEWER")
    if name:
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


@lru_cache(maxsize=1)
def suite_fingerprint() -> str:
    """A hash of bbagent's test suite: the harness code and its data (trace shapes, tolerances).
    Any change to what a kernel is tested with changes it."""
    harness = Path(__file__).resolve().parent.parent.parent / "harness"
    digest = hashlib.sha256()
    for path in sorted(p for p in harness.rglob("*") if p.is_file() and p.suffix in (".py", ".json", ".txt")):
        digest.update(path.relative_to(harness).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def tested_in(versions: dict, gpu: str | None) -> dict:
    """The ``tested_in`` record of a kernel that passed its tests with these versions on ``gpu``
    (None: the CPU, under the Triton interpreter)."""
    return {"torch": versions.get("torch"), "triton": versions.get("triton"), "gpu": gpu or "cpu",
            "suite": suite_fingerprint()}


@lru_cache(maxsize=1)
def current_environment() -> dict:
    """This machine's torch, triton, GPU model (None without a visible GPU) and suite fingerprint."""
    import torch
    import triton
    gpu = None
    if os.environ.get("CUDA_VISIBLE_DEVICES", "x") not in ("", "-1") and (
            shutil.which("nvidia-smi") or Path("/proc/driver/nvidia/gpus").is_dir()):
        from agent.api import gpu_model
        gpu = gpu_model()
        gpu = None if gpu == "unknown GPU" else gpu
    return {"torch": torch.__version__, "triton": triton.__version__, "gpu": gpu, "suite": suite_fingerprint()}


def changes(meta: dict, environment: dict | None = None) -> list[str]:
    """What differs between where the kernel was tested and ``environment`` (this machine), in
    words; empty when nothing that matters did. The GPU model counts only where this machine has one."""
    environment = environment or current_environment()
    tested = meta.get("tested_in") or {}
    found = []
    for key in ENVIRONMENT_KEYS:
        now_value = environment.get(key)
        if key == "gpu" and now_value is None:
            continue
        if tested.get(key) != now_value:
            what = "test suite" if key == "suite" else key
            found.append(f"{what} {tested.get(key) or 'unknown'} -> {now_value}")
    return found


def status_of(meta: dict, environment: dict | None = None) -> str:
    """The status to show: the stored one, or ``stale`` for an approved kernel whose environment changed."""
    stored = meta["review"]["status"]
    if stored == "approved" and changes(meta, environment):
        return "stale"
    return stored


def upgraded(meta: dict) -> dict:
    """``meta`` in the current schema: older folders get version 1 and ``needs_review``, and a
    ``tested_in`` from their recorded versions (suite unknown, so an approval of them goes stale)."""
    if meta.get("schema_version") == SCHEMA_VERSION:
        return meta
    meta = dict(meta)
    meta.setdefault("version", 1)
    meta.setdefault("review", {"status": "needs_review", "by": None, "at": None, "note": "", "history": []})
    if "tested_in" not in meta:
        versions = meta.get("versions") or {}
        meta["tested_in"] = {"torch": versions.get("torch"), "triton": versions.get("triton"),
                             "gpu": meta.get("gpu") or "cpu", "suite": None}
    meta.update(schema=SCHEMA, schema_version=SCHEMA_VERSION)
    return meta


def new_meta(meta: dict, version: int) -> dict:
    """A freshly accepted kernel's meta.json: ``meta`` from the run plus the lifecycle fields."""
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **meta, "version": version,
            "tested_in": tested_in(meta.get("versions") or {}, meta.get("gpu")),
            "review": {"status": "needs_review", "by": "bbagent", "at": meta.get("accepted_at") or now(),
                       "note": f"accepted by run {meta.get('run_id')}",
                       "history": [{"status": "needs_review", "by": "bbagent", "at": meta.get("accepted_at") or now(),
                                    "note": f"accepted by run {meta.get('run_id')}"}]}}


def read_meta(folder: Path) -> dict:
    return upgraded(json.loads((Path(folder) / "meta.json").read_text()))


def write_meta(folder: Path, meta: dict) -> None:
    write_json(Path(folder) / "meta.json", meta)


def set_status(folder: Path, status: str, note: str = "", by: str | None = None) -> dict:
    """Record a review decision (or bbagent's own, ``by="bbagent"``) in ``folder``'s meta.json."""
    if status not in STATUSES:
        raise ReviewError(f"unknown review status '{status}'; one of {', '.join(STATUSES)}")
    meta = read_meta(folder)
    entry = {"status": status, "by": by or reviewer(), "at": now(), "note": note}
    meta["review"] = {**entry, "history": [*meta["review"].get("history", []), entry]}
    write_meta(folder, meta)
    return meta


def version_folders(op_dir: Path) -> list[Path]:
    """The earlier versions of an operator's kernel, oldest first."""
    where = Path(op_dir) / VERSIONS_DIR
    found = [p for p in where.iterdir() if p.is_dir() and p.name.isdigit()] if where.is_dir() else []
    return sorted(found, key=lambda p: int(p.name))


def archive_current(op_dir: Path, incoming_run: str | None) -> tuple[int, dict | None]:
    """Before a new kernel is installed in ``op_dir``: the version number it gets and, where the
    kernel there now is kept (moved to ``versions/<n>/``), what it was. The best kernel of the same
    run replaces its own earlier one in place, unless that one was reviewed meanwhile."""
    if not (Path(op_dir) / "meta.json").is_file():
        earlier = version_folders(op_dir)
        return (int(earlier[-1].name) + 1 if earlier else 1), None
    meta = read_meta(op_dir)
    if meta.get("run_id") == incoming_run and meta["review"]["status"] == "needs_review":
        return meta["version"], None
    target = Path(op_dir) / VERSIONS_DIR / str(meta["version"])
    target.mkdir(parents=True, exist_ok=True)
    for name in KERNEL_FILES:
        if (Path(op_dir) / name).exists():
            shutil.copy2(Path(op_dir) / name, target / name)
    write_meta(target, meta)
    replaced = {"version": meta["version"], "status": meta["review"]["status"], "run_id": meta.get("run_id"),
                "where": f"{VERSIONS_DIR}/{meta['version']}"}
    return meta["version"] + 1, replaced


def install(root: Path, op: str, kernel_source: str, run_meta: dict, make_readme) -> dict:
    """Install a newly accepted kernel as ``root/generated_kernels/<op>/``, keeping the kernel there
    (unless it is the same run's unreviewed one) in ``versions/``. Returns the new meta.json; its
    ``replaced`` says what was moved aside."""
    from agent.storage import accept_kernel
    version, replaced = archive_current(Path(root) / "generated_kernels" / op, run_meta.get("run_id"))
    meta = new_meta(run_meta, version)
    if replaced is not None:
        meta["replaced"] = replaced
    accept_kernel(Path(root), op, kernel_source, meta, make_readme(meta))
    return meta
