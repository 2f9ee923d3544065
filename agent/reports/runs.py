"""The runs and batches under ``ROOT/runs/``: listing them, and pruning old ones safely.

Pruning removes a run directory or a batch directory older than a given age, never one that may
still be in use or that something kept refers to: a run whose run.json says ``running`` and was
written recently, a batch with an operator running under a live lease, a run an accepted kernel
was accepted from (``run_id`` of ``generated_kernels/*/meta.json`` and of its ``versions/*/``), a run a kept batch lists. The
call log (``llm_calls.sqlite``) and the timing cache are never touched.
"""
from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

from bbagent.agent.batch.ledger import FILE_NAME, Ledger, liveness
from bbagent.agent.machine import process_state
from bbagent.agent.providers.call_log import FILE_NAME as CALL_LOG, LLMLog
from bbagent.agent.review.meta import read_meta
from bbagent.agent.run_record import RunRecord, read_run

RUN_ID = re.compile(r"^\d{8}-\d{6}-.+-[0-9a-f]{4}$")
BATCH_ID = re.compile(r"^batch-\d{8}-\d{6}-[0-9a-f]{4}$")
RECENT_S = 6 * 3600  # a run "running" and written within this is taken to be alive


def age_s(path: Path) -> float:
    """Seconds since anything in the run directory (not below it) was last written. (A batch's
    age comes from its ledger: opening a ledger writes its files.)"""
    newest = max((p.stat().st_mtime for p in [path, *path.iterdir()]), default=path.stat().st_mtime)
    return time.time() - newest


def run_status(record: RunRecord | None) -> str:
    """A run's status from its record; a run that says ``running`` but whose process is gone
    (killed with the batch or the shell that ran it) is ``interrupted``; ``unreadable`` where its
    run.json is not a run record."""
    if record is None:
        return "unreadable"
    if record.status == "running" and process_state(record.process) == "dead":
        return "interrupted"
    return record.status


def list_runs(runs_dir: Path) -> list[dict]:
    """Every run and batch, oldest first: id, kind, what it ran, its status, when, cost (not
    complete for a run with a call in flight, or lost in flight at a kill: what it cost is unknown)."""
    entries: list[dict] = []
    if not runs_dir.is_dir():
        return entries
    in_flight = LLMLog(runs_dir / CALL_LOG).unanswered_runs() if (runs_dir / CALL_LOG).is_file() else set()
    for path in sorted(runs_dir.iterdir()):
        if path.is_dir() and RUN_ID.match(path.name) and (path / "run.json").is_file():
            record = read_run(path)
            entries.append({"id": path.name, "kind": "run", "op": record and record.op, "status": run_status(record),
                            "started_at": record and record.started_at, "rounds": record and record.rounds_used,
                            "cost_usd": record and record.cost_usd,
                            "cost_complete": (record is None or record.cost_complete) and path.name not in in_flight,
                            "call_in_flight": path.name in in_flight,
                            "model": record and record.config and record.config.model,
                            "age_s": round(age_s(path)), "path": str(path)})
        elif path.is_dir() and BATCH_ID.match(path.name) and (path / FILE_NAME).is_file():
            ledger = Ledger(path / FILE_NAME)
            counts, rows = ledger.counts(), ledger.rows()
            meta = ledger.meta()
            entries.append({"id": path.name, "kind": "batch", "op": f"{counts['total']} operators",
                            "status": liveness(meta, counts)["state"],
                            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z",
                                                        time.localtime(meta.get("created_at") or 0)),
                            "counts": counts, "cost_usd": round(sum(r["cost_usd"] for r in rows), 6),
                            "cost_complete": all(r.get("cost_complete", 1) for r in rows),
                            "model": (meta.get("generate_options") or {}).get("model"),
                            "age_s": round(time.time() - max([r["updated_at"] for r in rows]
                                                             + [meta.get("created_at") or 0])),
                            "path": str(path)})
    return entries


def run_id_of(folder: Path) -> str | None:
    """The run an accepted kernel's folder came from (None where its meta.json cannot be read)."""
    try:
        return read_meta(folder).run_id
    except (OSError, ValueError):
        return None


def _kept_runs(root: Path, batches_kept: list[Path]) -> dict[str, str]:
    """Run ids that must stay, with the reason."""
    kept = {}
    for meta in [*(root / "generated_kernels").glob("*/meta.json"),
                 *(root / "generated_kernels").glob("*/versions/*/meta.json")]:
        folder = meta.parent
        run_id = run_id_of(folder)
        name = folder.name if folder.parent.name != "versions" else f"{folder.parent.parent.name} (version {folder.name})"
        if run_id:
            kept[run_id] = f"the accepted kernel {name} came from it"
    for batch in batches_kept:
        for row in Ledger(batch / FILE_NAME).rows():
            if row["run_id"]:
                kept.setdefault(row["run_id"], f"batch {batch.name} is kept")
    return kept


def prune(root: Path, older_than_s: float, dry_run: bool = False) -> dict:
    """Remove runs and batches older than ``older_than_s`` that are safe to remove; returns what
    was (or, with ``dry_run``, would be) removed and what was kept, each with the reason."""
    runs_dir = root / "runs"
    removed, kept = [], []
    entries = list_runs(runs_dir)
    batches_kept = []
    for entry in (e for e in entries if e["kind"] == "batch"):
        path = Path(entry["path"])
        live = [r["op"] for r in Ledger(path / FILE_NAME).rows()
                if r["state"] == "running" and (r["lease_until"] or 0) > time.time()]
        if live:
            kept.append({"id": entry["id"], "why": f"operators running under a live lease: {', '.join(live)}"})
            batches_kept.append(path)
        elif entry["age_s"] < older_than_s:
            batches_kept.append(path)
        else:
            removed.append(entry)
    keep_runs = _kept_runs(root, batches_kept)
    for entry in (e for e in entries if e["kind"] == "run"):
        if entry["id"] in keep_runs:
            if entry["age_s"] >= older_than_s:
                kept.append({"id": entry["id"], "why": keep_runs[entry["id"]]})
        elif entry["status"] == "running" and entry["age_s"] < RECENT_S:
            kept.append({"id": entry["id"], "why": "still running (written in the last 6 hours)"})
        elif entry["age_s"] >= older_than_s:
            removed.append(entry)
    if not dry_run:
        for entry in removed:
            shutil.rmtree(entry["path"], ignore_errors=True)
    return {"removed": [{"id": e["id"], "kind": e["kind"], "age_s": e["age_s"]} for e in removed],
            "kept": kept, "dry_run": dry_run}
