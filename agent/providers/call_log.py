"""Every LLM call, in SQLite (``runs/llm_calls.sqlite``): what was asked, what came back (or the
error, for a call that failed), tokens, cost and latency, per run, operator, round and candidate,
and the batch and endpoint it was made for.

The same table can answer a request identical to one answered before (same provider, model,
endpoint, messages and parameters, candidate index included) without the network, but only
when asked: with ``--cache`` from any earlier call, and on a batch's ``--resume`` from the calls
that batch already paid for. By default every request goes to the model: a user who runs again
wants a new sample. A call is recorded when it is sent (``IN_FLIGHT``), then completed with its
answer or error; each failed attempt a retry followed is recorded too. ``bbagent logs`` lists the
calls; a past run can be replayed from it
(``--provider replay --replay RUN_ID``).
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from bbagent.agent.providers.prices import cost_usd, price_of  # noqa: F401  (where they were)

FILE_NAME = "llm_calls.sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, run_id TEXT, op TEXT, round INTEGER,
    candidate INTEGER, provider TEXT NOT NULL, model TEXT NOT NULL, request_hash TEXT NOT NULL,
    params TEXT NOT NULL, prompt TEXT NOT NULL, response TEXT NOT NULL, input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL, cost_usd REAL, latency_s REAL NOT NULL, cached INTEGER NOT NULL,
    endpoint TEXT, batch_id TEXT, error TEXT);
CREATE INDEX IF NOT EXISTS calls_by_hash ON calls (request_hash);
CREATE INDEX IF NOT EXISTS calls_by_run ON calls (run_id);
"""
COLUMNS = ("id", "time", "run_id", "op", "round", "candidate", "provider", "model", "request_hash", "params",
           "prompt", "response", "input_tokens", "output_tokens", "cost_usd", "latency_s", "cached", "endpoint",
           "batch_id", "error")
ADDED_COLUMNS = ("endpoint", "batch_id", "error")  # added to a log written before them
# A call is recorded as it is sent, with this error until its answer (or its real error) replaces it:
# a process killed meanwhile leaves the call listed, unanswered.
IN_FLIGHT = "no answer recorded: the call was in flight when its process ended (or is still in flight)"


def request_hash(provider: str, model: str, messages: list[dict], params: dict, endpoint: str | None = None) -> str:
    """The identity of a request: another server behind the same model name (``endpoint``, the
    base URL) is another request."""
    text = json.dumps({"provider": provider, "model": model, "messages": messages, "params": params,
                       **({"endpoint": endpoint} if endpoint else {})}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class LLMLog:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript(SCHEMA)
            columns = {row[1] for row in db.execute("PRAGMA table_info(calls)")}
            for column in ADDED_COLUMNS:
                if column not in columns:
                    db.execute(f"ALTER TABLE calls ADD COLUMN {column} TEXT")

    def _connect(self):
        return closing(sqlite3.connect(self.path, timeout=60))

    def record(self, **row) -> int:
        row = {"time": time.time(), **row}
        names = [c for c in COLUMNS if c != "id"]
        with self._connect() as db, db:
            cursor = db.execute(f"INSERT INTO calls ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                                [row.get(c) for c in names])
            return cursor.lastrowid

    def update(self, call_id: int, **fields) -> None:
        """Fill in a call recorded before its answer came (``IN_FLIGHT``): its answer or error."""
        names = [c for c in fields if c in COLUMNS and c != "id"]
        with self._connect() as db, db:
            db.execute(f"UPDATE calls SET {', '.join(f'{c} = ?' for c in names)} WHERE id = ?",
                       [fields[c] for c in names] + [call_id])

    def answered(self, digest: str, batch_id: str | None = None) -> dict | None:
        """The first call (not itself a cache hit, nor a failed one) that answered this exact
        request; with ``batch_id``, only among that batch's calls."""
        scope, values = ("AND batch_id = ? ", (digest, batch_id)) if batch_id else ("", (digest,))
        with self._connect() as db:
            found = db.execute(f"SELECT {', '.join(COLUMNS)} FROM calls WHERE request_hash = ? AND cached = 0 "
                               f"AND error IS NULL {scope}ORDER BY id LIMIT 1", values).fetchone()
        return dict(zip(COLUMNS, found)) if found else None

    def unanswered_runs(self) -> set[str]:
        """The runs with a call recorded as sent and never answered (``IN_FLIGHT``): a call in
        flight now, or one its process was killed in. What it cost, if anything, is unknown."""
        with self._connect() as db:
            return {row[0] for row in db.execute("SELECT DISTINCT run_id FROM calls WHERE error = ?", (IN_FLIGHT,))
                    if row[0]}

    def calls(self, op: str | None = None, run_id: str | None = None, *, model: str | None = None,
              search: tuple[str, ...] = (), last: int | None = None, call_id: int | None = None) -> list[dict]:
        """The recorded calls, oldest first: of ``op``; of ``run_id``, a run's id or a batch's (every
        call its runs made); of ``model``; whose prompt or answer holds every text of ``search``
        (case-insensitive); only the ``last`` ones; or the one numbered ``call_id``."""
        where, values = [], []
        for clause, value in (("op = ?", op), ("(run_id = ? OR batch_id = ?)", run_id), ("model = ?", model),
                              ("id = ?", call_id)):
            if value is not None:
                where.append(clause)
                values.extend([value] * clause.count("?"))
        for text in search:
            where.append("(instr(lower(prompt), lower(?)) > 0 OR instr(lower(response), lower(?)) > 0)")
            values.extend([text, text])
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        limit = f" LIMIT {int(last)}" if last else ""
        with self._connect() as db:
            rows = db.execute(f"SELECT {', '.join(COLUMNS)} FROM calls{clause} ORDER BY id DESC{limit}",
                              values).fetchall()
        return [dict(zip(COLUMNS, r)) for r in reversed(rows)]
