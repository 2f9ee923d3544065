"""``generated_kernels/<op>/meta.json`` as one typed model, ``KernelMeta``: written only by
``write_meta`` and read only by ``read_meta`` (``bbagent schema kernel-meta`` prints its schema).

Schema ``bbagent.kernel-meta`` version 3: what the run that accepted the kernel knew (who wrote
it, its tests, speed and cost) and the review lifecycle (``version``, ``tested_in``, ``review``;
``agent.review.lifecycle``). The parts taken from the Verdict are the Verdict's own models
(``variants``, ``tests``, ``summary``, ``performance.device``, ``performance.summary``), so meta.json is
one dump of one typed record and reads back by validation.

Older folders are read through :func:`upgraded`: before version 2 they read as version 1,
needs_review, with ``tested_in`` from their recorded versions; version 2's ``tests`` (the Verdict's
summary and counts in one dict) is split into ``tests`` and ``summary``. A part of an older file that
the Verdict's models no longer read is kept whole under ``<name>_as_recorded`` and its field left
empty, never dropped. Fields bbagent does not know (a newer bbagent's) are kept as they are.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from bbagent.agent.run_record import Tokens
from bbagent.agent.storage import write_json
from bbagent.harness.interface import DeviceYardsticks, PerformanceSummary, Summary, TestCounts, Variant

SCHEMA: Literal["bbagent.kernel-meta"] = "bbagent.kernel-meta"
SCHEMA_VERSION: Literal[3] = 3
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


class EditedFrom(_Strict):
    """A version made from an earlier one's kernel.py edited by hand: which version, the digest its
    tests judged, and who judged the edit in (``bbagent review approve`` or ``review verify``)."""
    version: int
    kernel_sha256: str | None = None
    run_id: str | None = None
    by: str
    at: str


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
    device: DeviceYardsticks | None = None
    summary: PerformanceSummary | None = None
    shapes: list[ShapeTiming] = []
    baselines: dict[str, dict] = {}  # the Verdict's summaries over compiled baselines (``inductor``)

    @property
    def geomean_speedup(self) -> float | None:
        return self.summary.geomean_speedup if self.measured and self.summary is not None else None

    def speedup_over(self, baseline: str) -> float | None:
        """The measured geomean speedup over a compiled baseline (``inductor``), else None."""
        return (self.baselines.get(baseline) or {}).get("geomean_speedup") if self.measured else None


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


class ProgramSource(_Strict):
    """The program problem an answer was accepted for: its file when posed, KernelBench's level and
    the digest of its text (a problem edited since is another problem)."""
    path: str
    name: str
    level: int | None = None
    sha256: str


class Judged(_Strict):
    """meta.json's part that the Verdict accepting the kernel gives (``agent.review.record.judged_part``):
    what it answers, the overloads it serves, its tests and speed, and where they ran."""
    problem_kind: Literal["operator", "program"] = "operator"
    program: ProgramSource | None = None  # a program's answer: the problem it answers
    written_for: str
    serves: list[str]
    not_served: list[str] = []
    variants: list[Variant] = []
    tests: TestCounts | None = None  # None: not recorded (a folder older than the record of tests)
    summary: Summary | None = None
    kernel_sha256: str | None = None
    seed: int | None = None
    versions: Versions = Versions()
    device: str | None = None
    gpu: str | None = None
    interpreter: bool | None = None
    performance: PerformanceRecord = PerformanceRecord(reason="not recorded")
    dtypes: list[str] = []
    tolerance_used_max: float | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> "Judged":
        """A program's answer names the problem it answers, and only a program's does: code that
        asks which kind a kernel is reads ``program``."""
        if (self.program is not None) != (self.problem_kind == "program"):
            raise ValueError(f"problem_kind {self.problem_kind!r} with{'' if self.program else 'out'} a program")
        return self


class Authored(_Strict):
    """meta.json's part on who wrote the kernel (``agent.review.record.authored_part``): the provider
    and model, the run and round, what the run cost, the target it ran for, and what its rounds did."""
    provider: str | None = None
    model: str | None = None
    run_id: str | None = None
    round: int | None = None
    rounds_used: int | None = None
    tokens: Tokens = Tokens()
    cost_usd: float | None = None
    cost_complete: bool = True
    answers_paid_by: list[str] = []  # answers from the call log: the runs whose calls paid for them
    accepted_at: str | None = None
    target_speedup: float | None = None
    target_baseline: str | None = None
    round_speedups: dict[str, float | None] = {}
    earlier_guard_findings: list[EarlierGuardNote] = []


class Composed(_Strict):
    """meta.json's part on a dispatcher bbagent composed (``agent.generate.dispatch.provenance``):
    its two parts and its rules; empty for a kernel a model wrote."""
    composed_of: list[ComposedPart] = []
    dispatch_rules: list[str] = []
    dispatch_predicted_gain: float | None = None


def _fields(part: BaseModel) -> dict:
    """A part's declared fields, as the typed values it holds (nothing serialised)."""
    return {name: getattr(part, name) for name in type(part).model_fields}


class Accepted(Judged, Authored, Composed):
    """Everything the acceptance of a kernel knows, assembled from its typed parts (``of``): what
    ``agent.review.lifecycle.install`` takes, and adds the review lifecycle to. Nothing undeclared."""
    op: str  # an aten overload; for a program, its key (kernelbench/level1/19_ReLU)
    edited_from: EditedFrom | None = None  # kernel.py edited by hand from an earlier version, then judged
    allow_library: str | None = None  # a program's answer: what it was judged as allowed to leave to torch
    dsl: str = "triton"  # the kernel language it was asked (and judged) in (harness.dsl)
    helion_configs_sha256: str | None = None  # a Helion kernel's tuned configs beside it, judged pinned with it

    @classmethod
    def of(cls, op: str, judged: Judged, authored: Authored, composed: Composed | None = None, *,
           edited_from: EditedFrom | None = None, allow_library: str | None = None, dsl: str = "triton") -> "Accepted":
        return cls(op=op, **_fields(judged), **_fields(authored), **_fields(composed or Composed()),
                   edited_from=edited_from, allow_library=allow_library, dsl=dsl)


FIRST_KEYS = ("schema", "schema_version", "op", "version", "review", "tested_in")  # meta.json's head, for a reader


class KernelMeta(Accepted):
    """A meta.json document: the acceptance (``Accepted``) with the review lifecycle, and what a
    later ``bbagent bench`` measured of the other overloads it serves. Fields another version of
    bbagent wrote are read and kept (``extra="allow"``); a new document refuses them (``new_meta``)."""
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    schema_name: Literal["bbagent.kernel-meta"] = Field(alias="schema")
    schema_version: Literal[3]
    version: int
    review: Review
    tested_in: TestedIn
    overload_speedups: dict[str, OverloadSpeed] = {}
    replaced: Replaced | None = None

    def as_json(self) -> dict:
        """The document as meta.json holds it (what ``--json`` listings print): what it is first."""
        document = self.model_dump(mode="json", by_alias=True)
        return {**{key: document[key] for key in FIRST_KEYS if key in document}, **document}

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
    """A meta.json document in the current schema's shape (see the module's docstring): from before
    variants were served, ``written_for`` and ``serves`` come from ``op``; before version 2, version 1,
    needs_review and a ``tested_in`` from the recorded versions (suite unknown, so an approval of them
    goes stale); before version 3, ``tests`` split into the Verdict's counts and summary."""
    document = dict(document)
    op = document.get("op") or document.get("written_for") or folder_name
    document.setdefault("op", op)
    document.setdefault("written_for", document.get("op"))
    document["serves"] = document.get("serves") or [document["written_for"]]
    if document.get("schema_version") == SCHEMA_VERSION:
        return document
    if document.get("schema_version") != 2:
        document.setdefault("version", 1)
        document.setdefault("review", {"status": "needs_review", "by": None, "at": None, "note": "", "history": []})
    if "tested_in" not in document:
        versions = document.get("versions") or {}
        document["tested_in"] = {"torch": versions.get("torch"), "triton": versions.get("triton"),
                                 "gpu": document.get("gpu") or "cpu", "suite": None}
    _split_tests(document)
    _keep_unreadable(document, "tests", TestCounts, None)
    _keep_unreadable(document, "variants", list[Variant], [])
    _keep_unreadable(document, "performance", PerformanceRecord,
                     {"reason": "recorded by an older bbagent in a form not read now (performance_as_recorded)"})
    document.update(schema=SCHEMA, schema_version=SCHEMA_VERSION)
    return document


def _split_tests(document: dict) -> None:
    """Version 2's ``tests`` held the Verdict's summary and counts in one dict (older ones the summary
    alone): the counts go to ``tests`` (tests skipped there were not run), the summary to ``summary``;
    where the summary is incomplete the dict is also kept as ``tests_as_recorded``."""
    tests = document.get("tests")
    if not isinstance(tests, dict) or set(tests) <= set(TestCounts.model_fields):
        document["tests"] = tests or None
        return
    counts = {key: value for key, value in tests.items() if key in TestCounts.model_fields}
    counts.setdefault("not_run_here", tests.get("skipped") or 0)
    counts.setdefault("interpreter", bool(document.get("interpreter")))
    document["tests"] = counts
    summary = {key: value for key, value in tests.items() if key in Summary.model_fields}
    try:
        Summary.model_validate(summary)
        document.setdefault("summary", summary)
    except ValidationError:
        document["tests_as_recorded"] = tests


def _keep_unreadable(document: dict, name: str, kind, empty) -> None:
    """A part of an older file that does not read as ``kind`` (a model, or a type such as
    ``list[Variant]``): kept whole as ``<name>_as_recorded`` (a later write keeps it too) and replaced
    by ``empty``, so the folder still reads."""
    value = document.get(name)
    if value is None:
        return
    try:
        TypeAdapter(kind).validate_python(value)
    except ValidationError:
        document[f"{name}_as_recorded"] = value
        document[name] = empty


def read_meta(folder: str | Path) -> KernelMeta:
    """The meta.json of a kernel folder (OSError, ValueError where there is none or it is no meta.json)."""
    folder = Path(folder)
    document = json.loads((folder / "meta.json").read_text())
    if not isinstance(document, dict):
        raise ValueError(f"{folder / 'meta.json'} is not a JSON object")
    return KernelMeta.model_validate(upgraded(document, folder.name))


def undeclared(model: BaseModel, where: str = "") -> list[str]:
    """The fields of ``model``, and of the models inside it, that the schema does not declare: kept
    as read from a file another version of bbagent wrote (tolerated, and written back as read)."""
    found = [f"{where}{key}" for key in (model.model_extra or {})]
    for name in type(model).model_fields:
        value = getattr(model, name)
        items = value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else [value]
        found += [path for item in items if isinstance(item, BaseModel) for path in undeclared(item, f"{where}{name}.")]
    return found


def new_meta(accepted: Accepted, **lifecycle) -> KernelMeta:
    """A new meta.json document: ``accepted`` with the ``lifecycle`` fields. Every field is declared:
    an undeclared one (a misspelt name, a field not yet in the schema, in a part or nested in one)
    is bbagent's bug, refused here rather than written."""
    meta = KernelMeta(**_fields(accepted), **lifecycle)
    unknown = undeclared(meta)
    if unknown:
        raise ValueError(f"meta.json fields not in its schema: {', '.join(unknown)}")
    return meta


def write_meta(folder: str | Path, meta: KernelMeta) -> None:
    write_json(Path(folder) / "meta.json", meta.as_json())


def kernel_meta_schema() -> dict:
    return KernelMeta.model_json_schema(by_alias=True)
