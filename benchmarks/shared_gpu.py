"""Evaluations sharing one GPU, as ``bbagent batch --jobs N`` runs them: N new candidates of one
operator evaluated at once (one thread each, one fork server), each a correct kernel. Prints, per
evaluation, its verdict, wall seconds and any error; exits 1 if one did not pass.

    python3 benchmarks/shared_gpu.py --op mm --jobs 8 --json out.json

The case it guards: each evaluation's allocator keeps memory cached between tests
(``harness.sandbox.child.device_memory.give_back_cached_memory``); once the device runs short, each gives
back what it holds above its share, so that no evaluation ends in the harness's own CUDA OOM.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from eval_cost import CANDIDATES, new_candidate, source_of  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--op", default="mm", help=f"of: {', '.join(CANDIDATES)}")
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.op not in CANDIDATES:
        parser.error(f"--op must be one of {', '.join(CANDIDATES)}")
    from bbagent.harness.evaluate import EvaluationRequest, evaluate_kernel
    op_name, correct, _ = CANDIDATES[args.op]
    scratch = Path(tempfile.mkdtemp(prefix="bbagent-shared-gpu-"))
    paths = []
    for number in range(args.jobs):
        path = scratch / f"{args.op}_{number}.py"
        path.write_text(new_candidate(source_of(correct)))
        paths.append(path)

    def one(path: Path) -> dict:
        started = time.perf_counter()
        verdict = evaluate_kernel(EvaluationRequest.of(op_name, device="cuda", timeout_s=args.timeout), path)
        return {"candidate": path.name, "verdict": verdict.verdict, "error_kind": verdict.error_kind,
                "message": verdict.message[:3000], "tests": verdict.summary.total,
                "wall_s": round(time.perf_counter() - started, 2)}
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(one, paths))
    total = round(time.perf_counter() - started, 2)
    for row in rows:
        print(json.dumps(row))
    passed = sum(row["verdict"] == "pass" for row in rows)
    print(f"{passed} of {len(rows)} passed, {total} s in all")
    if args.json:
        args.json.write_text(json.dumps({"op": args.op, "jobs": args.jobs, "wall_s": total, "rows": rows}, indent=1))
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
