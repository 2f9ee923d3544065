"""What a served kernel costs under torch.compile, per call, beside inductor's own launch (issue 76).

The model is ``--layers`` times ``x = relu(x @ w)`` on small tensors, so that the host's time
decides: inductor alone launches a matrix product (cuBLAS) and its own Triton kernel for each relu;
with the corpus Triton relu approved, ``bbagent.enable()`` puts the approved kernel in the relu's
place, either launched by inductor's generated code (``direct``, ``agent.serving.direct``) or as an
opaque call out of it (``opaque``, ``enable(direct=False)``: the path before issue 76). Each is
timed per forward (host clock, the GPU synchronised once per batch of forwards, the median of
``--repeats`` batches) in torch.compile's default mode and under CUDA graphs, eager beside them; the
cost per served call is (the forward's time - inductor's) / layers. The generated code of each
compile is searched for the kernel's name and for a ``bbagent_served`` call, and every output is
compared with eager's. ``--dsl helion`` serves the corpus Helion relu instead: Helion launches its
Triton kernel from its own host code (``JITFunction.run``), which the direct path records as well.

    python benchmarks/compiled_launch.py --out $OUT [--dsl helion]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
# the corpus relu of each kernel language, and the name its Triton kernel has in the generated code
RELUS = {"triton": ("relu_triton.py", "_relu"), "helion": ("relu_helion.py", "_helion__relu")}


def per_forward_us(function, x, forwards: int, repeats: int) -> float:
    import torch
    for _ in range(20):
        function(x)
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(forwards):
            function(x)
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - started) * 1e6 / forwards)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--forwards", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--dsl", choices=sorted(RELUS), default="triton")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import torch
    from torch._inductor.utils import run_and_get_code
    import bbagent
    from enable_overhead import approved_root
    torch.manual_seed(0)
    weights = [torch.randn(args.size, args.size, device="cuda") / args.size ** 0.5 for _ in range(args.layers)]

    def model(x):
        for w in weights:
            x = torch.relu(x @ w)
        return x
    x = torch.randn(args.size, args.size, device="cuda")
    eager = model(x)
    file, name = RELUS[args.dsl]
    root = approved_root((ROOT / "tests" / "kernels" / file).read_text(), dsl=args.dsl)
    rows, checks = {}, {}
    for mode in ("default", "reduce-overhead"):
        settings = {} if mode == "default" else {"mode": mode}
        rows[(mode, "eager")] = per_forward_us(model, x, args.forwards, args.repeats)
        for side in ("inductor", "direct", "opaque"):
            torch._dynamo.reset()
            enabled = None if side == "inductor" else bbagent.enable(root, device="cuda", include_slower=True,
                                                                      direct=side == "direct")
            try:
                compiled = torch.compile(lambda t: model(t), **settings)
                output, codes = run_and_get_code(compiled, x)
                code = "\n".join(codes)
                if args.out:
                    args.out.mkdir(parents=True, exist_ok=True)
                    (args.out / f"generated-{mode}-{side}.py").write_text(code)
                for _ in range(3):
                    output = compiled(x)  # CUDA graphs record, then replay
                rows[(mode, side)] = per_forward_us(compiled, x, args.forwards, args.repeats)
                report = {row["op"]: row for row in enabled.report()} if enabled else {}
                checks[f"{mode}/{side}"] = {
                    "matches_eager": bool(torch.allclose(output, eager, atol=1e-4, rtol=1e-4)),
                    "kernel_in_generated_code": f"def {name}(" in code,
                    "bbagent_served_call_in_generated_code": "bbagent_served" in code,
                    "under_compile": (report.get("aten.relu.default") or {}).get("under_compile"),
                    "compiled_sites": enabled.compiled_sites() if enabled else {},
                    "compiled_calls": enabled.compiled_calls() if enabled else {}}
            finally:
                if enabled is not None:
                    enabled.disable()
    print(f"{args.layers} x relu(x @ w), float32 [{args.size}, {args.size}], the {args.dsl} relu served, "
          f"{torch.cuda.get_device_name()}, torch "
          f"{torch.__version__}: host us per forward (median of {args.repeats} x {args.forwards} forwards)")
    print(f"{'mode':<16} {'eager':>9} {'inductor':>9} {'direct':>9} {'opaque':>9} {'direct/call':>12} {'opaque/call':>12}")
    for mode in ("default", "reduce-overhead"):
        base = rows[(mode, "inductor")]
        print(f"{mode:<16} {rows[(mode, 'eager')]:9.1f} {base:9.1f} {rows[(mode, 'direct')]:9.1f} "
              f"{rows[(mode, 'opaque')]:9.1f} {(rows[(mode, 'direct')] - base) / args.layers:+11.2f} "
              f"{(rows[(mode, 'opaque')] - base) / args.layers:+11.2f}")
    print("(direct/call, opaque/call: us per served relu beyond inductor's own launch of its relu kernel)")
    for name, check in checks.items():
        print(f"  {name}: {json.dumps(check)}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "compiled_launch.json").write_text(json.dumps(
            {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "dsl": args.dsl, "layers": args.layers,
             "size": args.size, "us_per_forward": {f"{m}/{s}": v for (m, s), v in rows.items()}, "checks": checks},
            indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
