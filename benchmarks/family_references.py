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
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def check_overload(name: str, device: str, seed: int, most_cases: int) -> dict:
    """The disagreements of one overload over (at most ``most_cases`` of) its tests."""
    import torch
    from bbagent.harness.checks.case import functional_reference
    from bbagent.harness.checks.reference import ReferenceFault, is_cuda_error
    from bbagent.harness.inputs import clone_value
    from bbagent.harness.ops import resolve_op, value_mode
    from bbagent.harness.suite.build import build_suite
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
        except Exception as exc:  # noqa: BLE001 - the reference refuses this input: no test either
            if is_cuda_error(exc):  # sticky: nothing more can run in this process
                row["error"] = f"the reference hit a CUDA error on {case.id}"
                break
            continue
        row["cases"] += 1
        try:
            corrected = functional_reference(op, args, kwargs, expected, ref_args, ref_kwargs, device)
        except ReferenceFault as exc:
            row["error"] = str(exc)[:160]
            break
        if corrected is not None:
            row["disagree"] += 1
            if len(row["examples"]) < 3:
                row["examples"].append({"test": case.id, "input": case.description, "note": corrected[3]})
    return row


def check_chunk(names: list[str], device: str, seed: int, most_cases: int) -> list[dict]:
    """Overloads one after another in this process, up to the first that loses the CUDA context
    (its row says so; the caller runs the rest in a fresh process)."""
    rows = []
    for name in names:
        row = check_overload(name, device, seed, most_cases)
        rows.append(row)
        if row["error"] and "CUDA error" in row["error"]:
            break
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda where there is one)")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--most-cases", type=int, default=200, help="tests per overload, at most")
    parser.add_argument("--chunk", type=int, default=12, help="overloads per worker process")
    parser.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                        help="start no new work after this long; the report covers what finished")
    parser.add_argument("--ops", help="comma-separated overloads (default: every in-place and out= one tested)")
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args()
    import torch
    from bbagent.harness.coverage import list_ops
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    names = (args.ops.split(",") if args.ops else
             [r["op"] for r in list_ops("all") if r.get("tested_via") and not r.get("why_none")])
    started = time.perf_counter()
    context = multiprocessing.get_context("spawn")  # each worker starts its own CUDA context
    rows: list[dict] = []
    waiting = [names[i:i + args.chunk] for i in range(0, len(names), args.chunk)]
    # a fresh process per chunk: a CUDA error (a device-side assert) loses only its process's context
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=context, max_tasks_per_child=1) as pool:
        running = {}
        while waiting or running:
            out_of_time = args.time_budget is not None and time.perf_counter() - started > args.time_budget
            while waiting and len(running) < args.jobs and not out_of_time:
                chunk = waiting.pop(0)
                running[pool.submit(check_chunk, chunk, device, args.seed, args.most_cases)] = chunk
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                chunk = running.pop(future)
                finished = future.result()
                rows += finished
                if len(finished) < len(chunk):
                    waiting.append(chunk[len(finished):])
    not_reached = [name for chunk in waiting for name in chunk]
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
        print(f"\n{len(skipped)} overload(s) not compared (or not to the end): "
              + "; ".join(f"{r['op']} ({r['error'].splitlines()[0]})" for r in skipped[:40]))
    if not_reached:
        print(f"\n{len(not_reached)} overload(s) not reached within --time-budget {args.time_budget:g} s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
