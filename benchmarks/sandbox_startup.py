"""Warm pool against cold start (issue 4), with the file view's cost (issue 17).

Measures, RUNS times each, on the default device:

* cold process: ``python -c "import torch; torch.zeros(1, device=DEVICE)"`` from start to exit;
* warm child ready: ``evaluate()`` called until the forked child has torch, triton and (on a
  GPU) an initialised CUDA context (``timings.child_ready_s``); the fork server's own start is
  reported apart (the first call pays it, once per device);
* cold child ready: the same with ``warm=False`` (a fresh interpreter per candidate);
* sealing (``containment.seal_s``): computing the file allow list and building the view from it
  (mount namespace), or computing the list alone (``namespaces=False``: the audit hook enforces
  it), just before the candidate is imported; the warm child is ready for the candidate after
  its start and its seal;
* whole evaluation of a correct relu kernel on all its tests, warm and cold.

    python benchmarks/sandbox_startup.py [--runs 10] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bbagent.harness.evaluate import EvaluationRequest, default_device, evaluate_kernel  # noqa: E402

RELU = ROOT / "tests" / "kernels" / "relu_triton.py"


def cold_process(device: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import torch; torch.zeros(1, device='{device}')"], check=True)
    return time.perf_counter() - started


def evaluation(warm: bool, device: str, seed: int, namespaces: bool = True) -> tuple[float, float, dict]:
    """(child ready seconds, whole evaluation seconds, the containment in force)."""
    started = time.perf_counter()
    verdict = evaluate_kernel(EvaluationRequest.of("aten.relu.default", device=device, seed=seed, warm=warm, namespaces=namespaces), RELU)
    total = time.perf_counter() - started
    if not verdict.passed:
        raise SystemExit(f"the correct relu failed: {verdict.error_kind}: {verdict.message[:300]}")
    containment = verdict.environment.containment
    return verdict.timings.child_ready_s, total, containment.model_dump() if containment else None


def summary(values: list[float]) -> dict:
    return {"median_s": round(statistics.median(values), 4), "min_s": round(min(values), 4),
            "max_s": round(max(values), 4), "runs": len(values)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    device = default_device()
    pool_start_ready, pool_start_total, containment = evaluation(True, device, 0)  # starts the fork server
    rows = {"cold process (import torch + first tensor)": [], "warm child ready": [], "cold child ready": [],
            "seal: allow list + file view": [], "seal: allow list only (audit hook)": [],
            "warm child ready + seal (view)": [], "relu evaluation, warm": [], "relu evaluation, cold": []}
    result = {"device": device, "runs": args.runs, "containment": containment,
              "fork_server_start": {"child_ready_s": pool_start_ready, "evaluation_s": pool_start_total}}
    if device == "cuda":
        import torch
        result["gpu"] = torch.cuda.get_device_name()
    for run in range(args.runs):
        rows["cold process (import torch + first tensor)"].append(cold_process(device))
        ready, total, sealed = evaluation(True, device, run + 1)
        if sealed["files"] != "mount_namespace":
            raise SystemExit(f"no file view here: {sealed['notes']}")
        rows["warm child ready"].append(ready)
        rows["seal: allow list + file view"].append(sealed["seal_s"])
        rows["warm child ready + seal (view)"].append(ready + sealed["seal_s"])
        rows["relu evaluation, warm"].append(total)
        rows["seal: allow list only (audit hook)"].append(evaluation(True, device, run + 1, namespaces=False)[2]["seal_s"])
        ready, total, _ = evaluation(False, device, run + 1)
        rows["cold child ready"].append(ready)
        rows["relu evaluation, cold"].append(total)
        print(f"run {run + 1}/{args.runs}: " + ", ".join(f"{k} {v[-1]:.3f} s" for k, v in rows.items()), flush=True)
        result.update(rows={name: summary(values) for name, values in rows.items()}, raw=rows)
        if args.json:  # after every run, so a run cut short keeps what it measured
            args.json.write_text(json.dumps(result, indent=1))
    warm = result["rows"]["warm child ready + seal (view)"]["median_s"]
    cold = result["rows"]["cold process (import torch + first tensor)"]["median_s"]
    result["warm_over_cold"] = round(warm / cold, 4)
    print(f"\n{'measure':<46} | median s | min s  | max s")
    for name, row in result["rows"].items():
        print(f"{name:<46} | {row['median_s']:8.3f} | {row['min_s']:6.3f} | {row['max_s']:6.3f}")
    print(f"warm child ready + seal / cold process = {result['warm_over_cold']:.1%} (target <= 10%); "
          f"fork server start (once): {pool_start_ready:.2f} s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
