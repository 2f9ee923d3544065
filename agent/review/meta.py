"""``generated_kernels/<op>/meta.json`` as one typed model, ``KernelMeta``: written only by
``write_meta`` and read only by ``read_meta`` (``bbagent schema kernel-meta`` prints its schema).

Schema ``bbagent.kernel-meta`` version 2: what the run that accepted the kernel knew (who wrote
it, its tests, speed and cost) and the review lifecycle (``version``, ``tested_in``, ``review``;
``agent.review.lifecycle``). Folders written before version 2 read as version 1, needs_review,
with ``tested_in`` from their recorded versions. Fields bbagent does not know (a newer bbagent's)
are kept as they are.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bbagent.agent.run_record import Tokens
from bbagent.agent.storage import write_json

SCHEMA = "bbagent.kernel-meta"
SCHEMA_VERSION = 2
STATUSES = ("needs_review", "approved", "rejected")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ReviewEntry(_Strict):
    status: Literal["needs_review", "approved", "rejected"]
    by: str | None = None
    at: str | None = None
    note: str = ""
    kernel_sha256: str | None = None  # the kernel.py that was read: an approval pins it


class Review(ReviewEntry):
    history: list[ReviewEntry] = []


class TestedIn(_Strict):
    torch: str | None = None
    triton: str | None = None
    gpu: str = "cpu"            # "cpu": the Triton interpreter
    suite: str | None = None    # agent.machine.harness_fingerprint; None for folders older than schema 2


class Replaced(_Strict):
    version: int
    status: str
    run_id: str | None = None
    where: str


class OverloadSpeed(_Open):
    geomean_speedup: float | None = None
    gpu: str | None = None
    at: str | None = None
    bench_run: str | None = None


class Versions(_Open):
    torch: str | None = None
    triton: str | None = None
    python: str | None = None
    cuda: str | None = None


class ShapeTiming(_Open):
    input: str
    mode: str | None = None
    aten_ms: float | None = None
    kernel_ms: float | None = None
    speedup: float | None = None
    bytes: float | None = None
    kernel_gbs: float | None = None
    overhead_dominated: bool = False


class PerformanceRecord(_Open):
    """The kernel's speed where it was accepted: the Verdict's metrics and every timed shape."""
    measured: bool = False
    reason: str | None = None
    gpu: str | None = None
    device: dict | None = None
    summary: dict | None = None  # harness.verdict.PerformanceSummary as data
    shapes: list[ShapeTiming] = []

    @property
    def geomean_speedup(self) -> float | None:
        return (self.summary or {}).get("geomean_speedup") if self.measured else None


class EarlierGuardNote(_Open):
    """A guard failure in a round of the run before its accepted kernel (the model called aten, patched torch or
    read the harness): the round and the message, for the reviewer."""
    round: int | None = None
    message: str = ""


class ComposedPart(_Open):
    """One part of a dispatcher bbagent composed (``agent.generate.dispatch``): where it came from."""
    round: int
    run_id: str
    file: str  # the part's kernel.py as the run stored it
    kernel_sha256: str | None = None
    geomean_speedup: float | None = None
    gpu: str | None = None


class KernelMeta(_Open):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    schema_name: Literal["bbagent.kernel-meta"] = Field(alias="schema")
    schema_version: Literal[2]
    op: str
    written_for: str
    serves: list[str]
    not_served: list[str] = []
    variants: list[dict] = []  # harness.verdict.Variant rows
    version: int
    review: Review
    tested_in: TestedIn
    provider: str | None = None
    model: str | None = None
    run_id: str | None = None
    round: int | None = None
    rounds_used: int | None = None
    tokens: Tokens = Tokens()
    cost_usd: float | None = None
    cost_complete: bool = True
    tests: dict = {}  # harness.verdict.Summary as data
    kernel_sha256: str | None = None
    seed: int | None = None
    versions: Versions = Versions()
    device: str | None = None
    gpu: str | None = None
    interpreter: bool | None = None
    accepted_at: str | None = None
    performance: PerformanceRecord = PerformanceRecord(reason="not recorded")
    target_speedup: float | None = None
    target_baseline: str | None = None
    round_speedups: dict[str, float | None] = {}
    dtypes: list[str] = []
    earlier_guard_findings: list[EarlierGuardNote] = []
    tolerance_used_max: float | None = None
    overload_speedups: dict[str, OverloadSpeed] = {}
    replaced: Replaced | None = None
    composed_of: list[ComposedPart] = []  # a dispatcher: its two parts; empty for a kernel a model wrote
    dispatch_rules: list[str] = []
    dispatch_predicted_gain: float | None = None

    def as_json(self) -> dict:
        """The document as meta.json holds it (what ``--json`` listings print)."""
        return self.model_dump(mode="json", by_alias=True)

    def overload_speeds(self) -> dict[str, float]:
        """Measured geomean speedup over eager per served overload: the kernel's own from its timing,
        the others from ``bbagent bench --op OVERLOAD`` (``overload_speedups``)."""
        speeds = {op: record.geomean_speedup for op, record in self.overload_speedups.items()
                  if record.geomean_speedup is not None}
        own = self.performance.geomean_speedup
        if own is not None:
            speeds.setdefault(self.written_for, own)
        return speeds


def upgraded(document: dict, folder_name: str | None = None) -> dict:
    """A meta.json document in the current schema's shape: older folders get version 1, needs_review,
    a ``tested_in`` from their recorded versions (suite unknown, so an approval of them goes stale),
    and, from before variants were served, ``written_for`` and ``serves`` from ``op``."""
    document = dict(document)
    op = document.get("op") or document.get("written_for") or folder_name
    document.setdefault("op", op)
    document.setdefault("written_for", document.get("op"))
    document["serves"] = document.get("serves") or [document["written_for"]]
    if document.get("schema_version") == SCHEMA_VERSION:
        return document
    document.setdefault("version", 1)
    document.setdefault("review", {"status": "needs_review", "by": None, "at": None, "note": "", "history": []})
    if "tested_in" not in document:
        versions = document.get("versions") or {}
        document["tested_in"] = {"torch": versions.get("torch"), "triton": versions.get("triton"),
                                 "gpu": document.get("gpu") or "cpu", "suite": None}
    document.update(schema=SCHEMA, schema_version=SCHEMA_VERSION)
    return document


def read_meta(folder: str | Path) -> KernelMeta:
    """The meta.json of a kernel folder (OSError, ValueError where there is none or it is no meta.json)."""
    folder = Path(folder)
    document = json.loads((folder / "meta.json").read_text())
    if not isinstance(document, dict):
        raise ValueError(f"{folder / 'meta.json'} is not a JSON object")
    return KernelMeta.model_validate(upgraded(document, folder.name))


def write_meta(folder: str | Path, meta: KernelMeta) -> None:
    write_json(Path(folder) / "meta.json", meta.as_json())


def kernel_meta_schema() -> dict:
    return KernelMeta.model_json_schema(by_alias=True)
