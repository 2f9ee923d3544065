"""Run ``bbagent bench`` several times on one kernel and report how much its numbers move.

    python benchmarks/bench_repeat.py --op aten.relu.default --kernel tests/kernels/relu_triton.py \
        --runs 3 --root /tmp/bench-root --json bench_repeat.json

The first run measures eager aten afresh (``--no-cache``); later runs read it from the cache, so
they re-time the candidate alone. Reported per shape: the candidate's median in each run and
the spread (max - min) / median across runs; overall: the median and worst spread, and the
achieved bandwidth of the largest shape against the measured copy bandwidth. Needs a GPU.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bbagent.cli import main as bbagent  # noqa: E402


def bench_once(args, first: bool) -> dict:
    argv = ["bench", "--op", args.op, "--kernel", args.kernel, "--root", str(args.root), "--json",
            "--max-shapes", str(args.max_shapes), "--target-ms", str(args.target_ms)]
    if first:
        argv.append("--no-cache")
    code = bbagent(argv)
    if code != 0:
        raise SystemExit(f"bbagent bench exited {code}")
    runs = sorted((args.root / "runs").glob(f"bench-*{args.op}*"), key=lambda p: p.stat().st_mtime)
    return json.loads((runs[-1] / "verdict.json").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", default="aten.relu.default")
    parser.add_argument("--kernel", default="tests/kernels/relu_triton.py")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-shapes", type=int, default=100)
    parser.add_argument("--target-ms", type=float, default=100.0)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--json", type=Path, help="write the per-shape table and the summary here")
    args = parser.parse_args()

    verdicts = [bench_once(args, first=(n == 0)) for n in range(args.runs)]
    rows = []
    for tests in zip(*(v["performance"]["tests"] for v in verdicts)):
        medians = [t["candidate"]["median_ms"] for t in tests]
        rows.append({"input": tests[0]["input"], "mode": tests[0]["mode"], "candidate_ms": medians,
                     "spread": (max(medians) - min(medians)) / statistics.median(medians),
                     "overhead_dominated": tests[0]["overhead_dominated"], "speedup": tests[0]["speedup"]})
    first = verdicts[0]["performance"]
    spreads = [r["spread"] for r in rows]
    summary = {"op": args.op, "kernel": args.kernel, "runs": args.runs, "shapes": len(rows),
               "gpu": first["gpu"], "device": first["device"], "summary_first_run": first["summary"],
               "spread_median": statistics.median(spreads), "spread_worst": max(spreads),
               "spread_median_not_overhead": statistics.median(
                   [r["spread"] for r in rows if not r["overhead_dominated"]] or [float("nan")])}
    for row in rows:
        print(f"{row['input'][:60]:60s} {row['mode']:5s} " + " ".join(f"{m * 1e3:8.2f}" for m in row["candidate_ms"])
              + f"  spread {100 * row['spread']:5.2f}%" + ("  overhead" if row["overhead_dominated"] else ""))
    print(json.dumps({k: v for k, v in summary.items() if k != "summary_first_run"}, indent=1))
    print(json.dumps(summary["summary_first_run"], indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
