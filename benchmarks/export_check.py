"""Approved kernels shipped without bbagent, measured where they land (issue 79).

From a root of approved kernels (``release_check.py --keep-root DIR`` leaves one: relu, sigmoid and
mul), with bbagent installed:

1. ``bbagent export --package`` and ``--backendbench``;
2. the package's wheel installed into a folder of its own, and a small gated MLP (relu, sigmoid,
   mul between linear layers) run with only that folder on ``PYTHONPATH``: its forward time in
   eager, under torch.compile, with the package enabled (as gated: only kernels measured at least
   as fast as eager; and with every kernel) in eager and compiled, side by side, with its outputs
   checked against eager's; and each kernel alone against eager on one large tensor;
3. BackendBench's own evaluation of the ``--backendbench`` export (``--backendbench-repo``: a
   snapshot of meta-pytorch/BackendBench, kept out of this repository): its ``DirectoryBackend``,
   its ``OpInfoTestSuite`` and ``eval.eval_one_op``, the calls its ``scripts/main.py`` makes for
   ``--backend directory --suite opinfo``, per dtype, beside bbagent's own Verdict of each kernel.
   Modules only its torchbench suite's data loader imports (``datasets``, ``tqdm``,
   ``pyarrow.parquet``), where absent, are given as empty modules: that suite downloads its inputs
   from the Hugging Face hub, which the GPU machine cannot reach, so it is not run.

    python3 benchmarks/export_check.py --root DIR --backendbench-repo BB --out OUT [--dtypes float32,bfloat16]
    python benchmarks/export_check.py --root DIR --out OUT --device cpu --shape 8,16,32,4096 --repeats 3 \
        --dtypes float32   # the dry run on a CPU

Prints one table per part and writes ``OUT/export-check.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

NAME = "shipped_kernels"
MODEL_SCRIPT = r"""
import json, statistics, sys, torch
import shipped_kernels as package
import time
device, repeats, batch, width, hidden, numel = sys.argv[1], *map(int, sys.argv[2:7])
torch.manual_seed(0)

class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.gate = torch.nn.Linear(width, hidden), torch.nn.Linear(width, hidden)
        self.down = torch.nn.Linear(hidden, width)
    def forward(self, x):
        return self.down(torch.relu(self.up(x)) * torch.sigmoid(self.gate(x)))

def ms(fn, *args):
    for _ in range(min(5, repeats)):
        fn(*args)
    times = []
    for _ in range(repeats):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(); fn(*args); end.record(); torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            start = time.perf_counter(); fn(*args); times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)

model, x = Mlp().to(device), torch.randn(batch, width, device=device)
rows, served_by = {}, {}
with torch.no_grad():
    expected = model(x)
    rows["eager"] = ms(model, x)
    torch._dynamo.reset()
    compiled = torch.compile(model)
    rows["torch.compile"] = ms(compiled, x)
    for label, options in (("package (gated)", {}), ("package (every kernel)", {"include_slower": True})):
        with package.enable(device=device, **options) as served:
            out = model(x)
            assert torch.allclose(out, expected, rtol=1e-4, atol=1e-4), label
            rows[label + ", eager"] = ms(model, x)
            torch._dynamo.reset()
            compiled = torch.compile(model)
            out = compiled(x)
            assert torch.allclose(out, expected, rtol=1e-3, atol=1e-3), label
            rows[label + ", compiled"] = ms(compiled, x)
            served_by[label] = {op: served.under_compile().get(op, "eager only") for op, n in served.calls().items()
                                if n}
        torch._dynamo.reset()
    alone = {}
    big = torch.randn(numel, device=device)
    ops = {"aten.relu.default": (torch.relu, (big,)), "aten.sigmoid.default": (torch.sigmoid, (big,)),
           "aten.mul.Tensor": (torch.mul, (big, big))}
    for op, (fn, args) in ops.items():
        eager = ms(fn, *args)
        with package.enable(device=device, include_slower=True, ops=[op]):
            ours = ms(fn, *args)
        alone[op] = {"eager_ms": eager, "package_ms": ours}
print(json.dumps({"model_ms": rows, "served": served_by, "alone": alone,
                  "bbagent_imported": [m for m in sys.modules if m.split(".")[0] == "bbagent"]}))
"""
BACKENDBENCH_SCRIPT = r"""
import json, sys, types
for name in ("datasets", "tqdm", "pyarrow", "pyarrow.parquet"):  # only its torchbench suite's loader uses them
    try:
        __import__(name)
    except ImportError:
        module = types.ModuleType(name)
        module.load_dataset = module.tqdm = None
        sys.modules[name] = module
import torch
from BackendBench.backends import DirectoryBackend
from BackendBench.eval import eval_one_op
from BackendBench.suite import OpInfoTestSuite
ops_dir, dtypes, ops, device = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), sys.argv[4]
backend = DirectoryBackend(ops_dir)
rows = []
for dtype in dtypes:
    suite = OpInfoTestSuite(f"opinfo_{device}_{dtype}", device, getattr(torch, dtype), filter=ops)
    for test in suite:
        if test.op not in backend:
            continue
        correctness, performance, results, _ = eval_one_op(test.op, backend[test.op], test.correctness_tests,
                                                           test.performance_tests)
        failed = [r.error_msg or "mismatch" for r in results if not r.is_correct]
        rows.append({"op": str(test.op), "dtype": dtype, "tests": len(results), "passed": len(results) - len(failed),
                     "correctness": correctness, "first_failure": failed[0][:200] if failed else None})
print(json.dumps({"loaded": sorted(str(op) for op in backend.compiled_kernels), "rows": rows}))
"""


def run(argv: list, env: dict | None = None, timeout: float = 1200) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(map(str, argv))[:300]}\n{done.stderr[-3000:]}")
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, required=True, help="a root holding approved kernels")
    parser.add_argument("--backendbench-repo", type=Path, help="a snapshot of meta-pytorch/BackendBench")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dtypes", default="float32,bfloat16", help="the OpInfo suites BackendBench builds")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu: a dry run under Triton's interpreter (with small --shape)")
    parser.add_argument("--shape", default="512,2048,8192,16777216", help="batch,width,hidden of the MLP and the "
                                                                           "elements of the one-kernel runs")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    bbagent = [sys.executable, "-m", "bbagent"]
    package = json.loads(run(bbagent + ["export", "--package", str(args.out / "package"), "--name", NAME, "--root",
                                        str(args.root), "--json"]).stdout)
    exported = json.loads(run(bbagent + ["export", "--backendbench", str(args.out / "backendbench"), "--root",
                                         str(args.root), "--json"]).stdout)
    site = args.out / "package-site"
    run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(site),
         package["wheel"]])
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BBAGENT_ROOT", "TRITON_INTERPRET")}
    if args.device == "cpu":
        clean["TRITON_INTERPRET"] = "1"
    model = json.loads(run([sys.executable, "-c", MODEL_SCRIPT, args.device, str(args.repeats), *args.shape.split(",")],
                           env={**clean, "PYTHONPATH": str(site)}).stdout.splitlines()[-1])
    result = {"package": package, "backendbench_export": exported, "model": model}
    print(f"package {NAME} (its wheel alone on PYTHONPATH; bbagent modules imported: {model['bbagent_imported']})")
    batch, width, hidden, numel = args.shape.split(",")
    print(f"  gated MLP {batch}x{width} -> {hidden} -> {width}, fp32, ms per forward (median of {args.repeats})")
    for label, ms in model["model_ms"].items():
        print(f"    {label:<36} {ms:8.3f} ms  ({model['model_ms']['eager'] / ms:5.2f}x eager, "
              f"{model['model_ms']['torch.compile'] / ms:5.2f}x torch.compile)")
    for label, ops in model["served"].items():
        print(f"    served by {label}: " + ("; ".join(f"{op} ({path})" for op, path in ops.items()) or "none"))
    print(f"  each kernel alone, {numel} fp32 elements: eager ms, package ms")
    for op, row in model["alone"].items():
        print(f"    {op:<24} {row['eager_ms']:.3f}  {row['package_ms']:.3f}  ({row['eager_ms'] / row['package_ms']:.2f}x)")
    if args.backendbench_repo is not None:
        ops = [row["overload"].removeprefix("aten.") for row in exported["written"]]
        env = {**clean, "PYTHONPATH": os.pathsep.join([str(args.backendbench_repo), os.environ.get("PYTHONPATH", "")])}
        bench = json.loads(run([sys.executable, "-c", BACKENDBENCH_SCRIPT, str(args.out / "backendbench"), args.dtypes,
                                ",".join(ops), args.device], env=env, timeout=3000).stdout.splitlines()[-1])
        result["backendbench"] = bench
        verdicts = {row["overload"]: row["verdict"]["tests"] for row in exported["written"]}
        print(f"BackendBench's evaluation of the --backendbench export (loaded: {', '.join(bench['loaded'])})")
        print("    overload                 dtype      BackendBench passed   bbagent's Verdict")
        for row in bench["rows"]:
            tests = verdicts.get(row["op"], {})
            print(f"    {row['op']:<24} {row['dtype']:<10} {row['passed']:>4}/{row['tests']:<4} "
                  f"           {tests.get('passed')}/{tests.get('total')} tests"
                  + (f"  first failure: {row['first_failure']}" if row["first_failure"] else ""))
    (args.out / "export-check.json").write_text(json.dumps(result, indent=1, default=str))
    print(f"export check done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
