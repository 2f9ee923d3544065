"""N evaluations of one kernel at once, as a batch on one GPU runs them: each one's verdict, wall
time, tests time, compilations and autotuning (from the Verdict's timings).

    python benchmarks/concurrent_evaluations.py --op aten.mm.default --kernel tests/kernels/mm_autotuned.py \\
        --jobs 8 [--json benchmarks/results/.../concurrent.json]
"""
from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bbagent.harness.evaluate import EvaluationRequest, evaluate_kernel


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", required=True)
    parser.add_argument("--kernel", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        verdicts = list(pool.map(lambda n: evaluate_kernel(EvaluationRequest.of(args.op, seed=n, timeout_s=args.timeout), args.kernel),
                                 range(args.jobs)))
    rows = [{"seed": n, "verdict": v.verdict, "error_kind": v.error_kind, "message": v.message[:300],
             "passed": v.summary.passed, "total": v.summary.total, **v.timings.model_dump()}
            for n, v in enumerate(verdicts)]
    print(f"{'seed':>4} {'verdict':7} {'tests':>9} {'wall_s':>7} {'tests_s':>7} {'compiles':>8} {'compile_s':>9} "
          f"{'autotune_runs':>13} {'autotune_s':>10}")
    for r in rows:
        print(f"{r['seed']:>4} {r['verdict']:7} {r['passed']:>4}/{r['total']:<4} {r['wall_s']:>7.1f} "
              f"{r['tests_s'] or 0:>7.1f} {r['compiles']:>8} {r['compile_s']:>9.1f} {r['autotune_runs']:>13} "
              f"{r['autotune_s']:>10.1f}" + (f"  {r['error_kind']}: {r['message'][:120]}" if r['error_kind'] else ""))
    total = time.perf_counter() - started
    print(f"{args.jobs} evaluations at once: {total:.1f} s in all")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"op": args.op, "kernel": str(args.kernel), "jobs": args.jobs,
                                         "total_s": round(total, 1), "rows": rows}, indent=1))
    return 0 if all(v.passed for v in verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
