"""Build the test suite of many operators on this machine's device and report, per op,
the number of tests, skips, build time and any harness error. Not a performance benchmark:
a check that the suite builder works across operators and torch versions.

    python benchmarks/suite_smoke.py [--limit N] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _reference_errors(suite, op) -> list[str]:
    """Tests whose inputs the aten reference rejects (they would end as reference_error)."""
    from bbagent.harness.suite.edge_cases import reference_accepts  # forks on CPU: aten CPU kernels can crash
    return [f"{case.id}: {case.description[:120]}" for case in suite.cases
            if not reference_accepts(op, *case.inputs())]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=60, help="most frequent trace ops to build (default 60)")
    parser.add_argument("--json", help="write the per-op rows here")
    parser.add_argument("--check-inputs", action="store_true",
                        help="also draw every test's inputs and run the aten reference on them")
    args = parser.parse_args()
    import torch
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    warnings.filterwarnings("ignore")
    from bbagent.harness.coverage import list_ops
    from bbagent.harness.ops import resolve_op
    from bbagent.harness.suite.build import build_suite
    rows = [r for r in list_ops("traces") if not r["why_none"]]
    rows.sort(key=lambda r: -r["trace_tests"])
    results = []
    for row in rows[: args.limit]:
        started = time.perf_counter()
        try:
            suite = build_suite(resolve_op(row["op"]), device, 0, interpreter=device == "cpu")
            result = {"op": row["op"], "tests": len(suite.cases), "skipped": len(suite.skipped),
                      "edge": sum(c.id.startswith("edge") for c in suite.cases), "error": None,
                      "reference_errors": _reference_errors(suite, resolve_op(row["op"])) if args.check_inputs else None}
        except Exception as exc:  # noqa: BLE001 - the point is to find these
            result = {"op": row["op"], "tests": 0, "skipped": 0, "edge": 0,
                      "error": f"{type(exc).__name__}: {exc}"[:300], "trace": traceback.format_exc()[-1500:]}
        result["build_s"] = round(time.perf_counter() - started, 2)
        results.append(result)
        torch.cuda.empty_cache() if device == "cuda" else None
        rejected = "" if result.get("reference_errors") is None else f" ref-rejects {len(result['reference_errors']):4d}"
        print(f"{result['op']:45s} tests {result['tests']:4d} edge {result['edge']:3d} skipped {result['skipped']:4d}"
              f"{rejected} {result['build_s']:6.2f} s {result['error'] or ''}", flush=True)
    errors = [r for r in results if r["error"]]
    print(f"{len(results)} ops on {device} (torch {torch.__version__}): {len(errors)} errors, "
          f"{sum(r['tests'] for r in results)} tests, {sum(r['build_s'] for r in results):.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
