"""What the aten reference alone costs over an operator's whole suite (issue 33: convolution's
correct candidate spent 39 of its 55 s in the reference on the H200).

Each mode runs in a fresh process (cuDNN keeps its plans per process), builds the operator's suite,
and calls the reference on every test's inputs twice (a first pass, as a child pays it, and a
second), synchronising after each call:

* ``reference``: as the sandbox child computes it (``harness.checks.case.reference_call``: a
  convolution without cuDNN);
* ``cudnn``: the op called as it is, cuDNN enabled;
* ``cudnn_benchmark``: the same under ``torch.backends.cudnn.flags(enabled=True, benchmark=True)``.

    python benchmarks/reference_cost.py [--op aten.convolution.default] [--modes default,no_cudnn]
                                        [--out FILE]

Prints, per mode, each pass's seconds and the slowest tests of the first pass.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODES = ("reference", "cudnn", "cudnn_benchmark")


def measure(op_name: str, mode: str) -> dict:
    """In this process: the reference's seconds per pass over the suite, and the slowest tests."""
    import contextlib

    import torch

    from bbagent.harness.checks.reference import reference_call
    from bbagent.harness.inputs import clone_value
    from bbagent.harness.ops import resolve_op
    from bbagent.harness.suite.build import build_suite
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.zeros(1, device=device)
    op = resolve_op(op_name)
    started = time.perf_counter()
    suite = build_suite(op, device, 1, interpreter=device == "cpu")
    built = time.perf_counter() - started
    call = reference_call if mode == "reference" else lambda op, args, kwargs: op(*args, **kwargs)
    flags = (torch.backends.cudnn.flags(enabled=True, benchmark=True) if mode == "cudnn_benchmark"
             else contextlib.nullcontext())
    passes, slowest, errors = [], [], 0
    with flags:
        for number in range(2):
            total = 0.0
            for case in suite.cases:
                args, kwargs = case.inputs()
                args, kwargs = clone_value(args), clone_value(kwargs)
                began = time.perf_counter()
                try:
                    call(op, args, kwargs)
                    if device == "cuda":
                        torch.cuda.synchronize()
                except Exception:  # noqa: BLE001 - a reference error is a test's result: counted
                    errors += number == 0
                took = time.perf_counter() - began
                total += took
                if number == 0:
                    slowest.append((took, case.id, case.description))
            passes.append(round(total, 3))
    slowest.sort(reverse=True)
    return {"mode": mode, "device": device, "tests": len(suite.cases), "suite_build_s": round(built, 3),
            "passes_s": passes, "errors": errors, "slowest": [(round(t, 4), i, d) for t, i, d in slowest[:10]]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--op", default="aten.convolution.default")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)  # one mode, in this process
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.op, args.child)))
        return 0
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise SystemExit(f"reference_cost: unknown mode {', '.join(unknown)}; choose from {', '.join(MODES)}")
    lines = []
    for mode in modes:
        done = subprocess.run([sys.executable, __file__, "--op", args.op, "--child", mode],
                              capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            lines.append(f"{mode}: failed (exit {done.returncode}): {done.stderr[-1500:]}")
            continue
        result = json.loads(done.stdout.strip().splitlines()[-1])
        lines.append(f"{args.op} {mode} on {result['device']}: {result['tests']} tests, suite built in "
                     f"{result['suite_build_s']} s; reference passes {result['passes_s']} s, "
                     f"{result['errors']} tests raised")
        lines += [f"    {t:.4f} s  {i}  {d}" for t, i, d in result["slowest"]]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
