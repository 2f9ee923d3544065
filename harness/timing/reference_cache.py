"""Eager aten timings and device yardsticks, cached in SQLite (``runs/reference_timings.sqlite``).

Timing eager aten on every trace shape costs as much as timing the candidate, and it is the
same number every time for a given GPU, torch version, op, input and timing mode (CUDA-graph
replay or eager calls). Repeated evaluations of an op (the rounds of a ``generate``, nightly
``bench`` runs) therefore measure eager once and read it back after; ``--no-cache`` measures
again and stores the new numbers. The device yardsticks (empty launch, copy bandwidth) are
cached per GPU, torch and triton version. The parent process owns the file; the sandboxed
child never sees it (it gets the rows it may use in its job and reports what it measured).
"""
from __future__ import annotations

import json
import sqlite3
import time
from contextlib import closing
from pathlib import Path

FILE_NAME = "reference_timings.sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS reference (
    gpu TEXT NOT NULL, torch TEXT NOT NULL, op TEXT NOT NULL, input TEXT NOT NULL, mode TEXT NOT NULL,
    timing TEXT NOT NULL, measured_at REAL NOT NULL,
    PRIMARY KEY (gpu, torch, op, input, mode));
CREATE TABLE IF NOT EXISTS device (
    gpu TEXT NOT NULL, torch TEXT NOT NULL, triton TEXT NOT NULL,
    stats TEXT NOT NULL, measured_at REAL NOT NULL,
    PRIMARY KEY (gpu, torch, triton));
"""


class ReferenceCache:
    """The file is created on the first write, so CPU-only use leaves nothing behind."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def _connect(self, create: bool = False):
        if create and not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # several evaluations (one per GPU in a batch) may write at once: wait for the lock
        db = sqlite3.connect(self.path, timeout=60)
        db.executescript(SCHEMA)
        return closing(db)

    def reference_rows(self, op: str, torch_version: str) -> list[dict]:
        """Every cached eager timing of ``op`` under this torch version, for any GPU."""
        if not self.path.exists():
            return []
        with self._connect() as db:
            rows = db.execute("SELECT gpu, mode, input, timing FROM reference WHERE op = ? AND torch = ?",
                              (op, torch_version)).fetchall()
        return [{"gpu": gpu, "mode": mode, "input": input_, "timing": json.loads(timing)}
                for gpu, mode, input_, timing in rows]

    def device_rows(self, torch_version: str) -> list[dict]:
        if not self.path.exists():
            return []
        with self._connect() as db:
            rows = db.execute("SELECT gpu, triton, stats FROM device WHERE torch = ?", (torch_version,)).fetchall()
        return [{"gpu": gpu, "triton": triton, "stats": json.loads(stats)} for gpu, triton, stats in rows]

    def store_reference(self, op: str, torch_version: str, gpu: str, rows: list[dict]) -> None:
        """``rows``: {"mode", "input", "timing"} measured now (replacing what was cached)."""
        now = time.time()
        with self._connect(create=True) as db, db:
            db.executemany("INSERT OR REPLACE INTO reference VALUES (?, ?, ?, ?, ?, ?, ?)",
                           [(gpu, torch_version, op, r["input"], r["mode"], json.dumps(r["timing"]), now)
                            for r in rows])

    def store_device(self, gpu: str, torch_version: str, triton_version: str, stats: dict) -> None:
        with self._connect(create=True) as db, db:
            db.execute("INSERT OR REPLACE INTO device VALUES (?, ?, ?, ?, ?)",
                       (gpu, torch_version, triton_version, json.dumps(stats), time.time()))
