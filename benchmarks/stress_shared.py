"""A shared GPU under stress: 16 evaluations at once of model-sized operators (add, mm, bmm,
convolution, native_layer_norm, _softmax, sum), correct kernels and wrong ones, each with its
timing phase, through one ``GpuShare`` as a batch runs them (``--evals-per-gpu 16``). Every correct
kernel must pass, every wrong one must fail for its own reason (the corpus's expected error kinds),
and no Verdict may say the harness failed. Prints one line per evaluation and the GPU's phases;
exits 1 on any surprise.

    python3 benchmarks/stress_shared.py --json benchmarks/results/issue46-h100/stress.json

``--no-share`` runs the same 16 evaluations at once without the gate (as 16 separate ``bbagent
eval`` processes would), to show what the gate prevents.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
EXAMPLES, CORPUS = ROOT / "prompts" / "examples", ROOT / "tests" / "kernels"
PASS = "pass"
CASES = [  # (operator, kernel, expected: "pass" or the error kinds a wrong one may fail with)
    ("aten.add.Tensor", CORPUS / "add_broadcast.py", PASS),
    ("aten.add.Tensor", CORPUS / "add_ignores_alpha.py", {"mismatch"}),
    ("aten.add.Tensor", CORPUS / "add_writes_other.py", {"input_mutated"}),
    ("aten.mm.default", EXAMPLES / "matmul.py", PASS),
    ("aten.mm.default", CORPUS / "mm_tiled.py", PASS),
    ("aten.mm.default", CORPUS / "mm_half_accumulator.py", {"mismatch", "nan_mismatch"}),
    ("aten.bmm.default", EXAMPLES / "matmul.py", {"exception", "wrong_shape", "mismatch", "cuda_error"}),
    ("aten.convolution.default", EXAMPLES / "convolution.py", PASS),
    ("aten.native_layer_norm.default", EXAMPLES / "normalization.py", PASS),
    ("aten._softmax.default", EXAMPLES / "softmax.py", PASS),
    ("aten._softmax.default", CORPUS / "softmax_unstable.py", {"nan_mismatch", "mismatch"}),
    ("aten._softmax.default", CORPUS / "softmax_last_dim_only.py", {"mismatch"}),
    ("aten.sum.dim_IntList", CORPUS / "sum_dim.py", PASS),
    ("aten.sum.dim_IntList", CORPUS / "sum_half_accumulator.py", {"mismatch"}),
    ("aten.add.Tensor", CORPUS / "add_broadcast.py", PASS),
    ("aten.mm.default", CORPUS / "mm_tiled.py", PASS),
]
HARNESS_KINDS = {"worker_error"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--no-share", action="store_true", help="run them at once without the gate")
    parser.add_argument("--max-shapes", type=int, default=6, help="timed shapes per correct kernel (default 6)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from bbagent.harness.interface import physical_gpu, total_memory
    from bbagent.harness.evaluate import EvaluationRequest, TimingOptions, evaluate_kernel
    from bbagent.harness.sandbox.parent.gpu_share import GpuShare, overlaps
    share = None if args.no_share else GpuShare.for_gpu("gpu-0", total_memory(physical_gpu(0)), len(CASES))

    def one(case) -> dict:
        op, kernel, expected = case
        started = time.perf_counter()
        verdict = evaluate_kernel(EvaluationRequest.of(op, device="cuda", timeout_s=args.timeout, timing=TimingOptions(max_cases=args.max_shapes, reuse=False)), kernel, share=share)
        kinds = {verdict.error_kind} | {t.error_kind for t in verdict.tests if t.error_kind}
        kinds.discard(None)
        ok = verdict.passed if expected == PASS else (not verdict.passed and bool(kinds & expected)
                                                      and not kinds & HARNESS_KINDS)
        return {"op": op, "kernel": kernel.name, "expected": expected if expected == PASS else sorted(expected),
                "verdict": verdict.verdict, "kinds": sorted(kinds), "ok": ok, "message": verdict.message[:400],
                "wall_s": round(time.perf_counter() - started, 1), "gpu_wait_s": verdict.timings.gpu_wait_s,
                "gpu_shared": verdict.timings.gpu_shared, "rerun_alone": verdict.timings.rerun_alone,
                "memory_retries": verdict.timings.memory_retries,
                "device_memory_peak_gib": verdict.timings.device_memory_peak_gib,
                "speedup": verdict.geomean_speedup()}
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(CASES)) as pool:
        rows = list(pool.map(one, CASES))
    total = round(time.perf_counter() - started, 1)
    for row in rows:
        print(json.dumps(row))
    bad = [row for row in rows if not row["ok"]]
    overlapping = overlaps(share.intervals) if share else []
    print(f"{len(rows) - len(bad)} of {len(rows)} as expected, {total} s; harness failures: "
          f"{sum('worker_error' in r['kinds'] for r in rows)}; run again alone: {sum(bool(r['rerun_alone']) for r in rows)}; "
          f"exclusive phases overlapping another evaluation: {len(overlapping)}")
    if args.json:
        args.json.write_text(json.dumps({"share": not args.no_share, "wall_s": total, "rows": rows,
                                         "overlaps": len(overlapping)}, indent=1, default=list))
    return 0 if not bad and not overlapping else 1


if __name__ == "__main__":
    sys.exit(main())
