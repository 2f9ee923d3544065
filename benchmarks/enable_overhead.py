"""What bbagent.enable() costs per call on the host: torch.relu on a small tensor, eager against
served by (a) a pass-through Python kernel (returns its input: the wrapper's own cost: dispatch
into Python, dtype check, re-entrancy guard, counter) and (b) the corpus Triton relu kernel (the
wrapper plus a Triton launch). Host time per call, measured with the GPU synchronised once per
batch of calls; the median of --repeats batches.

    python benchmarks/enable_overhead.py --device cuda --calls 20000
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def per_call_us(function, x, calls: int, repeats: int, sync) -> float:
    for _ in range(100):
        function(x)
    sync()
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            function(x)
        sync()
        samples.append((time.perf_counter() - started) * 1e6 / calls)
    return statistics.median(samples)


def approved_root(source: str, dsl: str = "triton") -> Path:
    from bbagent.agent.machine import this_machine
    from bbagent.agent.review.lifecycle import install, set_status
    from bbagent.agent.review.meta import Accepted
    import torch
    import triton
    root = Path(tempfile.mkdtemp(prefix="bbagent-enable-overhead-"))
    op = "aten.relu.default"
    install(root, source, Accepted.model_validate({
        "op": op, "written_for": op, "serves": [op], "run_id": "bench", "tests": {"passed": 1, "total": 1},
        "versions": {"torch": torch.__version__, "triton": triton.__version__}, "gpu": this_machine().gpu,
        "dtypes": ["float32"], "performance": {"measured": False}, "dsl": dsl}))
    set_status(root / "generated_kernels" / op, "approved")
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--numel", type=int, default=1024)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.device == "cpu":  # the kernels run under Triton's interpreter: chosen before triton loads
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    import bbagent
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    x = torch.randn(args.numel, device=args.device)
    rows = {"eager": per_call_us(torch.relu, x, args.calls, args.repeats, sync)}
    kernels = {"pass-through python kernel": "def kernel(self):\n    return self\n",
               "triton relu kernel": (ROOT / "tests" / "kernels" / "relu_triton.py").read_text()}
    for name, source in kernels.items():
        with bbagent.enable(approved_root(source), device=args.device, include_slower=True) as enabled:
            rows[name] = per_call_us(torch.relu, x, args.calls, args.repeats, sync)
            assert enabled.calls()["aten.relu.default"] > args.calls, enabled.report()
    print(f"torch.relu on {args.numel} float32 elements ({args.device}), host us per call, median of "
          f"{args.repeats} x {args.calls} calls")
    for name, us in rows.items():
        print(f"  {name:<28} {us:8.2f} us  (+{us - rows['eager']:.2f} us over eager)")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "enable_overhead.json").write_text(json.dumps({"device": args.device, "numel": args.numel,
                                                                    "calls": args.calls, "us_per_call": rows},
                                                                   indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
