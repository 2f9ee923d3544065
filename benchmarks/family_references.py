"""Where aten's own in-place or out= overload disagrees with its functional overload.

For every in-place and out= overload bbagent tests (``tested_via`` in ``bbagent ops --json``), run
its test suite's inputs through aten's own overload and through bbagent's reference for it (the
functional overload's result written as the overload writes it, ``harness.checks.case
.functional_reference``), and list the overloads and inputs where the two disagree. Those tests
take the functional result as their expected value (issue 32). Prints a markdown table; ``--json``
keeps every row.

    python benchmarks/family_references.py [--device cuda] [--jobs 8] [--json FILE] [--ops a,b]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def check_overload(name: str, device: str, seed: int, most_cases: int) -> dict:
    """The disagreements of one overload over (at most ``most_cases`` of) its tests."""
    import torch
    from harness.checks.case import functional_reference
    from harness.inputs import clone_value
    from harness.ops import resolve_op, value_mode
    from harness.suite.build import build_suite
    op = resolve_op(name)
    row = {"op": name, "cases": 0, "disagree": 0, "examples": [], "error": None}
    if value_mode(op) != "exact":
        row["error"] = f"value mode {value_mode(op)}: not compared exactly"
        return row
    try:
        suite = build_suite(op, device, seed, interpreter=device == "cpu")
    except Exception as exc:  # noqa: BLE001 - an overload whose suite cannot be built here
        row["error"] = f"suite: {type(exc).__name__}: {str(exc)[:120]}"
        return row
    for case in suite.cases[:most_cases]:
        try:
            args, kwargs = case.inputs()
            ref_args, ref_kwargs = clone_value(args), clone_value(kwargs)
            expected = op(*ref_args, **ref_kwargs)
            if device == "cuda":
                torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - the reference refuses this input: no test either
            continue
        row["cases"] += 1
        corrected = functional_reference(op, args, kwargs, expected, ref_args, ref_kwargs, device)
        if corrected is not None:
            row["disagree"] += 1
            if len(row["examples"]) < 3:
                row["examples"].append({"test": case.id, "input": case.description, "note": corrected[3]})
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda where there is one)")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--most-cases", type=int, default=200, help="tests per overload, at most")
    parser.add_argument("--ops", help="comma-separated overloads (default: every in-place and out= one tested)")
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args()
    import torch
    from harness.coverage import list_ops
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    names = (args.ops.split(",") if args.ops else
             [r["op"] for r in list_ops("all") if r.get("tested_via") and not r.get("why_none")])
    started = time.perf_counter()
    context = multiprocessing.get_context("spawn")  # each worker starts its own CUDA context
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=context) as pool:
        rows = list(pool.map(check_overload, names, [device] * len(names), [args.seed] * len(names),
                             [args.most_cases] * len(names)))
    disagreeing = [r for r in rows if r["disagree"]]
    print(f"# aten's in-place/out= overloads against their functional result, {device}, torch {torch.__version__}\n")
    print(f"{len(rows)} overloads, {sum(r['cases'] for r in rows)} test inputs, {len(disagreeing)} overload(s) "
          f"disagreeing on {sum(r['disagree'] for r in rows)} input(s); {time.perf_counter() - started:.0f} s\n")
    print("| overload | inputs | disagree | first input where it does | what differs |")
    print("| --- | --- | --- | --- | --- |")
    for r in disagreeing:
        first = r["examples"][0]
        what = first["note"].split("(", 1)[1].rsplit(")", 1)[0] if "(" in first["note"] else first["note"]
        print(f"| {r['op']} | {r['cases']} | {r['disagree']} | `{first['input'][:70]}` | {what[:150].replace('|', '/')} |")
    skipped = [r for r in rows if r["error"]]
    if skipped:
        print(f"\n{len(skipped)} overload(s) not compared: " + "; ".join(f"{r['op']} ({r['error']})" for r in skipped[:20]))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
