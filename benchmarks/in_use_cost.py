"""What the checks of a kernel as it runs (``harness.checks.in_use``: launch replay, repeated calls,
CUDA graph) add to an evaluation: each corpus entry expected to pass on this device is evaluated
twice, one at a time (the first warms Triton's cache and the suite cache), and the second's
seconds per check are kept. Prints one row per entry and the medians; ``--json`` keeps the rows.

    python3 benchmarks/in_use_cost.py --json benchmarks/results/issue60-h200/in-use-cost.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from bbagent.harness.evaluate import default_device
from bbagent.harness.selfcheck import CORPUS, EXAMPLES, expected_kinds, load_corpus, run_entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, nargs="+", default=[CORPUS, EXAMPLES])
    parser.add_argument("--limit", type=int, default=None, help="at most this many entries")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    device = default_device()
    rows = []
    for corpus in args.corpus:
        entries = [e for e in load_corpus(corpus) if expected_kinds(e, device) == "pass"]
        for entry in entries[: args.limit]:
            run_entry(entry, corpus.parent, 1234, device)  # warm
            row = run_entry(entry, corpus.parent, 1235, device)
            total = sum(c["seconds"] or 0 for c in row["in_use"])
            by_check = {c["check"]: c["seconds"] for c in row["in_use"]}
            rows.append({"id": row["id"], "ok": row["ok"], "wall_s": row["wall_s"], "in_use_s": round(total, 3),
                         **by_check, "notes": [c["note"] for c in row["in_use"] if c["passed"] is not True]})
            print(f"{row['id']:60s} ok={row['ok']!s:5s} wall {row['wall_s']:6.1f} s  in use {total:6.3f} s  "
                  + "  ".join(f"{k} {v}" for k, v in by_check.items()), flush=True)
    if not rows:
        print("no entry expected to pass here", file=sys.stderr)
        return 1
    summary = {"device": device, "entries": len(rows),
               "median_in_use_s": statistics.median(r["in_use_s"] for r in rows),
               "max_in_use_s": max(r["in_use_s"] for r in rows),
               "median_by_check": {check: statistics.median(r[check] for r in rows if r.get(check) is not None)
                                   for check in ("launch_replay", "repeated_calls", "cuda_graph")
                                   if any(r.get(check) is not None for r in rows)}}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
