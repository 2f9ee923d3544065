"""What bbagent can test, per aten overload: OpInfo samples, trace calls, dtypes, value mode.

The numbers come from the shipped OpInfo index (float32 samples that reach the op,
up to ``SAMPLES_PER_OPINFO`` per OpInfo) and the shipped traces (distinct calls);
an evaluation multiplies the OpInfo samples over its dtypes and adds edge cases.
"""
from __future__ import annotations

import re
from collections import defaultdict

import torch

from bbagent.harness import opinfo_index
from bbagent.harness.ops import UnknownOpError, resolve_op, value_mode
from bbagent.harness.suite.build import SAMPLE_DTYPES
from bbagent.harness.traces import DTYPE_NAMES, SHIPPED_TRACES, TRACE_ALIASES, iter_blocks
from bbagent.harness.variants import variant_family

_TRACE_DTYPE = re.compile(r"T\(\[[^\]]*\], (\w+)")
SUITES = ("opinfo", "traces", "all")
TESTED_DTYPES = {str(d).removeprefix("torch.") for d in SAMPLE_DTYPES}


def _trace_summary() -> dict[str, dict]:
    summary: dict[str, dict] = defaultdict(lambda: {"calls": 0, "dtypes": set()})
    renamed = {old: new for new, olds in TRACE_ALIASES.items() for old in olds}
    for op, line in iter_blocks(SHIPPED_TRACES.read_text()):
        op = renamed.get(op, op)
        summary[op]["calls"] += 1
        summary[op]["dtypes"].update(DTYPE_NAMES.get(d, d) for d in _TRACE_DTYPE.findall(line))
    return summary


def list_ops(suite: str = "all") -> list[dict]:
    if suite not in SUITES:
        raise ValueError(f"unknown suite '{suite}'; choose one of {', '.join(SUITES)}")
    index = opinfo_index.load()["ops"]
    traces = _trace_summary()
    names = set()
    if suite in ("opinfo", "all"):
        names |= set(index)
    if suite in ("traces", "all"):
        names |= set(traces)
    rows = []
    for name in sorted(n for n in names if n.startswith("aten.")):
        info = index.get(name, {})
        trace = traces.get(name, {"calls": 0, "dtypes": set()})
        row = {"op": name, "opinfos": list(info.get("opinfos", {})),
               "opinfo_samples": sum(info.get("opinfos", {}).values()),
               "trace_tests": trace["calls"],
               "dtypes": sorted((set(info.get("dtypes", [])) & TESTED_DTYPES) | trace["dtypes"]),
               "value_mode": None, "why_none": "", "tested_via": None, "variants": None}
        try:
            op = resolve_op(name)
            row["value_mode"] = value_mode(op)
            row["variants"] = variant_family(op)  # shared by every overload of the family
        except UnknownOpError:
            row["why_none"] = f"not an overload in this torch ({torch.__version__})"
        if not row["why_none"] and not (row["opinfo_samples"] or row["trace_tests"]):
            row["why_none"] = "no OpInfo sample reaches it and no real-model trace calls it"
        rows.append(row)
    if suite == "all":
        _add_variant_rows(rows)
    return sorted(rows, key=lambda r: r["op"])


def _add_variant_rows(rows: list[dict]) -> None:
    """The in-place and ``out=`` overloads of every tested functional overload run its tests in
    their own calling convention (``harness.suite.build.build_suite``): ``tested_via`` names it, and
    members of such a family that nothing else lists get a row of their own."""
    listed = {row["op"]: row for row in rows}
    for row in list(rows):
        family = row["variants"]
        if row["why_none"] or not family or family["functional"] != row["op"] \
                or not (row["opinfo_samples"] or row["trace_tests"]):
            continue
        for member in family["serves"][1:]:
            if member in listed:
                listed[member]["tested_via"] = row["op"]
                listed[member]["why_none"] = ""
            else:
                listed[member] = {**row, "op": member, "tested_via": row["op"], "opinfos": [],
                                  "opinfo_samples": 0, "trace_tests": 0}
                rows.append(listed[member])


def variant_counts(rows: list[dict]) -> dict:
    """How many in-place and out= overloads the listing holds, and how many of them have tests
    (their own, or their functional overload's run in their convention)."""
    counts = {}
    for kind in ("inplace", "out"):
        members = [r for r in rows if r["variants"] and (
            r["op"] == r["variants"]["inplace"] if kind == "inplace" else r["op"] in r["variants"]["out"])]
        tested = [r for r in members if r["tested_via"] or r["opinfo_samples"] or r["trace_tests"]]
        counts[kind] = {"listed": len(members), "tested": len(tested),
                        "via_functional": sum(1 for r in tested if r["tested_via"])}
    return counts
