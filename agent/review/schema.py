"""The documented schema of ``generated_kernels/<op>/meta.json`` (``bbagent schema kernel-meta``).

The fields bbagent and its readers rely on are typed here; a run adds more (tokens, variants,
performance, round_speedups, ...) which the schema allows without naming. Version 2 is the
first with the review lifecycle (``agent.review.lifecycle``).
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ReviewEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Literal["needs_review", "approved", "rejected"]
    by: str | None
    at: str | None
    note: str = ""


class Review(ReviewEntry):
    history: list[ReviewEntry]


class TestedIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    torch: str | None
    triton: str | None
    gpu: str            # "cpu": the Triton interpreter
    suite: str | None   # agent.review.lifecycle.suite_fingerprint; None for folders older than schema 2


class Replaced(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: int
    status: str
    run_id: str | None
    where: str


class OverloadSpeed(_Open):
    geomean_speedup: float | None
    gpu: str | None = None
    at: str | None = None


class KernelMeta(_Open):
    schema_name: Literal["bbagent.kernel-meta"] = Field(alias="schema")
    schema_version: Literal[2]
    op: str
    written_for: str
    serves: list[str]
    version: int
    review: Review
    tested_in: TestedIn
    run_id: str | None
    round: int | None = None
    provider: str | None = None
    model: str | None = None
    accepted_at: str | None = None
    tests: dict
    performance: dict
    cost_usd: float | None = None
    dtypes: list[str] = []
    tolerance_used_max: float | None = None
    earlier_guard_findings: list[dict] = []
    overload_speedups: dict[str, OverloadSpeed] = {}
    replaced: Replaced | None = None


def kernel_meta_schema() -> dict:
    return KernelMeta.model_json_schema()
