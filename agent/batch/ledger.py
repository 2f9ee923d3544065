"""The batch ledger: one SQLite file per batch (``runs/<batch>/ledger.sqlite``, WAL mode), the
only record of which operator is where. Written by the batch's coordinator process alone; read by
anyone (``bbagent status`` from another terminal).

Per operator: its state (pending, running, accepted, failed, skipped, interrupted), the attempts
charged to it, the infrastructure retries that were not, the lease its runner holds (renewed by
heartbeats; a lease that lapsed means the process running it died), the run directory, rounds,
best speedup, tokens, cost, and the last error with its class (``kernel``: the model's kernels
failed; ``provider``, ``sandbox``: infrastructure; ``usage``: the operator cannot be asked for).
"""
from __future__ import annotations

import json
import shlex
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path

from bbagent.agent.errors import UsageError
from bbagent.agent.machine import process_state

STATES = ("pending", "running", "accepted", "failed", "skipped", "interrupted")
FILE_NAME = "ledger.sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS batch (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ops (
    op TEXT PRIMARY KEY, position INTEGER NOT NULL, state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, infra_retries INTEGER NOT NULL DEFAULT 0,
    lease_until REAL, heartbeat REAL, run_id TEXT, rounds INTEGER, best_speedup REAL,
    tokens_input INTEGER NOT NULL DEFAULT 0, tokens_output INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0, error_class TEXT, error TEXT, updated_at REAL NOT NULL,
    resume_key TEXT, fast_p TEXT, gpu TEXT, baseline_speedups TEXT, why_failed TEXT,
    cost_complete INTEGER NOT NULL DEFAULT 1);
"""
ADDED_COLUMNS = ("resume_key", "fast_p", "gpu", "baseline_speedups", "why_failed")  # added to a ledger written before them


def _key_text(key: dict | None) -> str | None:
    return json.dumps(key, sort_keys=True) if key is not None else None


def counts_of(rows: list[dict]) -> dict[str, int]:
    """Operators per state, and the total."""
    counts = dict.fromkeys(STATES, 0)
    for row in rows:
        counts[row["state"]] += 1
    counts["total"] = sum(counts[s] for s in STATES)
    return counts


def spend_of(rows: list[dict]) -> dict:
    """Input and output tokens and dollars the operators' calls spent; ``cost_complete`` False where
    a call's model had no price (the dollars are then a lower bound)."""
    return {"input": sum(r["tokens_input"] for r in rows), "output": sum(r["tokens_output"] for r in rows),
            "cost_usd": sum(r["cost_usd"] for r in rows),
            "cost_complete": all(r.get("cost_complete", 1) for r in rows)}


class Ledger:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.lock = threading.Lock()
        self.key: dict | None = None  # the resume key results are finished under (agent.batch.start.resume_key)
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)
            columns = {row["name"] for row in db.execute("PRAGMA table_info(ops)")}
            for column in ADDED_COLUMNS:
                if column not in columns:
                    db.execute(f"ALTER TABLE ops ADD COLUMN {column} TEXT")
            if "cost_complete" not in columns:  # 0: a call's model had no price, so cost_usd is a lower bound
                db.execute("ALTER TABLE ops ADD COLUMN cost_complete INTEGER NOT NULL DEFAULT 1")

    def _connect(self):
        connection = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        connection.row_factory = sqlite3.Row
        return closing(connection)

    def _write(self, sql: str, params=()) -> int:
        with self.lock, self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            changed = db.execute(sql, params).rowcount
            db.execute("COMMIT")
            return changed

    # --- the batch's settings ------------------------------------------------------------------

    def set_meta(self, **values) -> None:
        for key, value in values.items():
            self._write("INSERT OR REPLACE INTO batch VALUES (?, ?)", (key, json.dumps(value)))

    def meta(self) -> dict:
        with self._connect() as db:
            return {row["key"]: json.loads(row["value"]) for row in db.execute("SELECT * FROM batch")}

    # --- operators ---------------------------------------------------------------------------------

    def add(self, ops: list[str], skipped: dict[str, str] | None = None) -> None:
        """Operators in batch order; an operator already in the ledger keeps its row."""
        now, skipped = time.time(), skipped or {}
        with self.lock, self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            start = db.execute("SELECT COALESCE(MAX(position), -1) + 1 FROM ops").fetchone()[0]
            for index, op in enumerate(ops):
                state, reason = ("skipped", skipped[op]) if op in skipped else ("pending", None)
                db.execute("INSERT OR IGNORE INTO ops (op, position, state, error, updated_at) VALUES (?, ?, ?, ?, ?)",
                           (op, start + index, state, reason, now))
            db.execute("COMMIT")

    def claim(self, lease_s: float) -> str | None:
        """The next pending operator, now running under a lease of ``lease_s``; None when none is left."""
        now = time.time()
        with self.lock, self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT op FROM ops WHERE state = 'pending' ORDER BY position LIMIT 1").fetchone()
            if row is not None:
                db.execute("UPDATE ops SET state = 'running', attempts = attempts + 1, lease_until = ?, "
                           "heartbeat = ?, updated_at = ? WHERE op = ?", (now + lease_s, now, now, row["op"]))
            db.execute("COMMIT")
        return row["op"] if row is not None else None

    def renew(self, ops: list[str], lease_s: float) -> None:
        now = time.time()
        for op in ops:
            self._write("UPDATE ops SET lease_until = ?, heartbeat = ? WHERE op = ? AND state = 'running'",
                        (now + lease_s, now, op))

    def finish(self, op: str, state: str, *, run_id: str | None = None, rounds: int | None = None,
               best_speedup: float | None = None, tokens: tuple[int, int] = (0, 0), cost_usd: float = 0.0,
               cost_complete: bool = True, error_class: str | None = None, error: str | None = None, fast_p: dict | None = None,
               gpu: str | None = None, baseline_speedups: dict | None = None, why_failed: dict | None = None) -> bool:
        """The operator's outcome (``gpu``: the GPU model its kernel was evaluated on;
        ``baseline_speedups``: its geomean over compiled baselines, ``{"inductor": x}``; ``why_failed``:
        a failed run's ``agent.generate.failure.WhyFailed``, as a dict); tokens and
        cost add to what earlier attempts spent. An operator already accepted or failed keeps its
        outcome: a result that arrives twice changes nothing (False); one interrupted (Ctrl-C) is not
        failed afterwards by whatever its run raised as it was cut off (it may still be accepted)."""
        assert state in ("accepted", "failed", "interrupted"), state
        return self._write(
            "UPDATE ops SET state = ?, run_id = COALESCE(?, run_id), rounds = COALESCE(?, rounds), "
            "best_speedup = COALESCE(?, best_speedup), tokens_input = tokens_input + ?, "
            "tokens_output = tokens_output + ?, cost_usd = cost_usd + ?, cost_complete = MIN(cost_complete, ?), "
            "error_class = ?, error = ?, lease_until = NULL, updated_at = ?, resume_key = ?, fast_p = COALESCE(?, fast_p), gpu = COALESCE(?, gpu), "
            "baseline_speedups = COALESCE(?, baseline_speedups), why_failed = ? "
            "WHERE op = ? AND state NOT IN ('accepted', 'failed') AND NOT (state = 'interrupted' AND ? = 'failed')",
            (state, run_id, rounds, best_speedup, tokens[0], tokens[1], cost_usd, int(cost_complete), error_class, error,
             time.time(), _key_text(self.key), json.dumps(fast_p) if fast_p else None, gpu,
             json.dumps(baseline_speedups) if baseline_speedups else None,
             json.dumps(why_failed) if why_failed else None, op, state)) > 0

    def release(self, op: str, error_class: str, error: str, *, tokens: tuple[int, int] = (0, 0),
                cost_usd: float = 0.0, cost_complete: bool = True, **_) -> None:
        """An infrastructure failure: the operator is pending again and the attempt is not charged
        (what its calls cost still counts)."""
        self._write("UPDATE ops SET state = 'pending', attempts = attempts - 1, infra_retries = infra_retries + 1, "
                    "tokens_input = tokens_input + ?, tokens_output = tokens_output + ?, cost_usd = cost_usd + ?, "
                    "cost_complete = MIN(cost_complete, ?), error_class = ?, error = ?, lease_until = NULL, "
                    "updated_at = ? WHERE op = ?",
                    (tokens[0], tokens[1], cost_usd, int(cost_complete), error_class, error, time.time(), op))

    def interrupt_running(self) -> list[str]:
        """Every running operator of this coordinator becomes interrupted (Ctrl-C)."""
        ops = [row["op"] for row in self.rows() if row["state"] == "running"]
        for op in ops:
            self.finish(op, "interrupted", error_class="interrupted", error="the batch was interrupted")
        return ops

    def reopen(self, key: dict | None = None, coordinator_dead: bool = False, retry_failed: bool = False,
               dry_run: bool = False) -> dict[str, list[str]]:
        """For ``--resume``: interrupted operators, running ones whose lease lapsed (their process
        died) or whose coordinator is known dead (``coordinator_dead``: it ran on this host and its
        process is gone), with ``retry_failed`` the failed ones, and, given the resume ``key`` now,
        those finished under another key, are pending again (``dry_run``: only say which). A
        running operator with a live lease is left alone: another coordinator may hold it."""
        now = time.time()
        reopened: dict[str, list] = {"interrupted": [], "lease_expired": [], "still_leased": [], "other_key": [],
                                     "failed": []}
        for row in self.rows():
            if row["state"] == "interrupted":
                reopened["interrupted"].append(row["op"])
            elif row["state"] == "running" and (coordinator_dead or (row["lease_until"] or 0) < now):
                reopened["lease_expired"].append(row["op"])
            elif row["state"] == "running":
                reopened["still_leased"].append(row["op"])
            elif (row["state"] in ("accepted", "failed") and key is not None and row["resume_key"]
                  and row["resume_key"] != _key_text(key)):
                reopened["other_key"].append(row["op"])
            elif row["state"] == "failed" and retry_failed:
                reopened["failed"].append(row["op"])
        if dry_run:
            return reopened
        self.key = key
        for op in reopened["interrupted"] + reopened["lease_expired"]:
            # an interruption or a dead process is not the kernel's failure: the attempt is not charged
            self._write("UPDATE ops SET state = 'pending', attempts = MAX(attempts - 1, 0), lease_until = NULL, "
                        "updated_at = ? WHERE op = ?", (now, op))
        for op in reopened["other_key"]:  # its result no longer counts: a fresh start
            self._write("UPDATE ops SET state = 'pending', attempts = 0, best_speedup = NULL, rounds = NULL, "
                        "fast_p = NULL, gpu = NULL, error_class = NULL, error = NULL, updated_at = ? WHERE op = ?",
                        (now, op))
        for op in reopened["failed"]:  # asked again: its attempts so far stay counted, the uncharged stay uncharged
            self._write("UPDATE ops SET state = 'pending', lease_until = NULL, updated_at = ? WHERE op = ?", (now, op))
        return reopened

    def row_of(self, op: str) -> dict:
        """``op``'s row, which the batch wrote when it began (a KeyError where there is none)."""
        row = self.row(op)
        if row is None:
            raise KeyError(f"the ledger has no row for {op}")
        return row

    def row(self, op: str) -> dict | None:
        with self._connect() as db:
            found = db.execute("SELECT * FROM ops WHERE op = ?", (op,)).fetchone()
        return dict(found) if found is not None else None

    def rows(self) -> list[dict]:
        with self._connect() as db:
            return [dict(row) for row in db.execute("SELECT * FROM ops ORDER BY position")]

    def counts(self) -> dict[str, int]:
        return counts_of(self.rows())


LIVENESS = ("running", "dead", "stopped", "finished")
DEFAULT_LEASE_S = 120.0  # a session that recorded no lease of its own


def liveness(meta: dict, counts: dict, now: float | None = None) -> dict:
    """Whether a batch is ``running`` (its coordinator lives, or beats within its lease when it
    runs on another host), ``dead`` (its process is gone, or no heartbeat for longer than the
    lease: it was killed), ``stopped`` (its last session ended with work left: Ctrl-C or a budget)
    or ``finished``; with the reason, the coordinator and the age of its last heartbeat."""
    now = time.time() if now is None else now
    sessions = meta.get("sessions") or []
    coordinator = meta.get("coordinator") or {}
    heartbeat = meta.get("heartbeat") or (meta.get("activity") or {}).get("at")
    age = round(now - heartbeat, 1) if heartbeat else None
    unfinished = counts["pending"] + counts["running"] + counts["interrupted"]
    who = f"process {coordinator.get('pid')} on {coordinator.get('host')}"
    last = sessions[-1] if sessions else {}
    if not sessions or last.get("ended_at"):  # (a ledger written before sessions were recorded has none)
        state = "stopped" if unfinished else "finished"
        reason = (last.get("ended") or "") if sessions else ""
        reason = "" if reason == state else reason
        if not sessions and counts["running"] and process_state(coordinator) != "dead":
            state, reason = "running", "operators hold leases"
    else:
        lease = last.get("lease_s") or DEFAULT_LEASE_S
        process = process_state(coordinator)
        if process == "dead":
            state, reason = "dead", f"its coordinator ({who}) is gone: it was killed or crashed"
        elif process == "unknown" and (age is None or age > lease):
            state, reason = "dead", f"no heartbeat from its coordinator ({who}) for {age or 0:.0f} s (lease {lease:g} s)"
        else:
            state, reason = "running", f"{who} is alive" if process == "alive" else f"heartbeat {age:.0f} s ago"
    return {"state": state, "reason": reason, "coordinator": coordinator or None, "heartbeat_age_s": age,
            "sessions": len(sessions)}


def status(root: Path, batch_id: str | None = None) -> dict:
    """A batch's counts and rows from its ledger (the newest batch under ``root/runs`` when no id),
    readable while it runs, with its liveness and, where it can go on, the command that resumes it."""
    batches = sorted(p.name for p in (root / "runs").glob("batch-*") if (p / FILE_NAME).is_file())
    if not batches:
        raise UsageError(f"no batch under {root / 'runs'}: start one with `bbagent batch`")
    name = batch_id or batches[-1]
    if name not in batches:
        raise UsageError(f"no batch '{name}' under {root / 'runs'}; there are: {', '.join(batches[-5:])}")
    ledger = Ledger(root / "runs" / name / FILE_NAME)
    meta, counts = ledger.meta(), ledger.counts()
    alive = liveness(meta, counts)
    retry = alive["state"] == "finished" and counts["failed"] > 0
    resume = f"bbagent batch --resume {name} --root {shlex.quote(str(root))}" + (" --retry-failed" if retry else "")
    resumable = alive["state"] in ("dead", "stopped") or retry
    return {"batch_id": name, "counts": counts, "ops": ledger.rows(), "liveness": alive,
            "resume": resume if resumable else None,
            "activity": meta.get("activity") if alive["state"] == "running" else None,
            "last_activity": meta.get("activity"), "ended_by": meta.get("ended_by"),
            "sessions": meta.get("sessions") or []}
