"""What bbagent can test, per aten overload: OpInfo samples, trace calls, dtypes, value mode.

The numbers come from the shipped OpInfo index (float32 samples that reach the op,
up to ``SAMPLES_PER_OPINFO`` per OpInfo) and the shipped traces (distinct calls);
an evaluation multiplies the OpInfo samples over its dtypes and adds edge cases.
"""
from __future__ import annotations

import re
from collections import defaultdict

import torch

from harness import opinfo_index
from harness.compare import value_mode
from harness.ops import UnknownOpError, op_name, packet_name, resolve_op
from harness.suite import SAMPLE_DTYPES
from harness.traces import DTYPE_NAMES, SHIPPED_TRACES, TRACE_ALIASES, iter_blocks
from harness.variants import functional_sibling, variant_family

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
        listed = {row["op"] for row in rows}
        rows += [r for r in _out_variants(rows) if r["op"] not in listed]
    return sorted(rows, key=lambda r: r["op"])


def _out_variants(rows: list[dict]) -> list[dict]:
    """Rows for the ``out=`` overloads of tested functional ones: they run the functional
    tests with preallocated ``out`` tensors (``harness.suite.build_suite``)."""
    extra = []
    for row in rows:
        if row["why_none"] or not (row["opinfo_samples"] or row["trace_tests"]):
            continue
        op = resolve_op(row["op"])
        packet = getattr(torch.ops.aten, packet_name(op))
        for overload in packet.overloads():
            candidate = getattr(packet, overload)
            if functional_sibling(candidate) is op:
                extra.append({**row, "op": op_name(candidate), "tested_via": row["op"]})
    return extra
