"""A BackendBench-format dataset through `bbagent batch --dataset` on the GPU: which pairs were
used, skipped (with why) or run as untimed canaries, and what the accepted kernel's Verdict says
of each dataset input (tested, passed, timed).

    python benchmarks/dataset_batch.py [--out benchmarks/results/issue18-h200/dataset]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def row(op, args, count, **flags):
    base = {"uuid": f"{op}|{args}", "op_name": op, "args": args, "runnable": True, "included_in_benchmark": True,
            "why_excluded": None, "is_synthetic": False, "runtime_ms": 0.1, "relative_runtime_to_kernel_launch": 20.0,
            "is_overhead_dominated_op": False, "count": count, "in_models": "", "in_models_count": 1}
    return {**base, **flags}


ROWS = [
    row("aten.relu.default", "((T([4097, 1023], f16),), {})", 7),
    row("aten.relu.default", "((T([8191, 515], bf16),), {})", 3),
    row("aten.relu.default", "((T([5, 3], f32),), {})", 40, is_overhead_dominated_op=True,
        relative_runtime_to_kernel_launch=1.0),
    row("aten.relu.default", "((T([1 << 20, 4096], f16),), {})".replace("1 << 20", "1048576"), 1,
        included_in_benchmark=False, why_excluded="input larger than the GPU memory budget"),
    row("aten.relu.default", "((T([77, 77], f32),), {})", 0, is_synthetic=True),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        (scratch / "problems.json").write_text(json.dumps(ROWS))
        (scratch / "replays").mkdir()
        kernel = (ROOT / "tests" / "kernels" / "relu_triton.py").read_text()
        (scratch / "replays" / "aten.relu.default.json").write_text(
            json.dumps({"exchanges": [{"response": f"```python\n{kernel}```"}]}))
        done = subprocess.run([sys.executable, "-m", "bbagent", "batch", "--dataset", str(scratch / "problems.json"),
                               "--provider", "replay", "--replay", str(scratch / "replays"), "--rounds", "1",
                               "--root", str(scratch / "root"), "--json"], cwd=ROOT, capture_output=True, text=True)
        print(done.stderr[-2000:])
        result = json.loads(done.stdout.strip().splitlines()[-1])
        batch = Path(result["path"])
        dataset = json.loads((batch / "dataset.json").read_text())
        verdict = json.loads(next((scratch / "root" / "runs").glob("*aten.relu.default*/round-1/verdict.json"))
                             .read_text())
        timed = {t["id"] for t in (verdict.get("performance") or {}).get("tests", [])}
        rows = [{"id": t["id"], "source": t["source"], "input": t["input"], "passed": t["passed"],
                 "timed": t["id"] in timed} for t in verdict["tests"] if t["id"].startswith("dataset-")]
        report = {"counts": result["counts"], "dataset": dataset, "dataset_tests": rows,
                  "gpu": verdict["environment"].get("gpu"), "timed_tests": len(timed)}
    print(json.dumps(report, indent=1))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "dataset_batch.json").write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
