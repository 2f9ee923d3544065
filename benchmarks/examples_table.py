"""How fast each family's worked example is (issue 49): every ``prompts/examples/*.py`` tested and
timed by ``bbagent.bench`` on its operator's real-model trace shapes, against eager and inductor,
with its family's target beside it; exit 1 where an example misses its target.

The targets (issue 49): the memory-bound families at a geomean of at least 1.0x eager over their
timed shapes and at least 80% of the device's copy bandwidth on the largest one; matmul at least
0.8x eager (cuBLAS) in float16/bfloat16 on shapes whose every dimension is 2048 or more (the traces
have none: ``MATMUL_SHAPES`` are added to the matmul example's inputs and timed first, as
``LARGE_SHAPES`` are where an operator's largest trace shape is too small to judge bandwidth on);
convolution at least 0.5x eager. Families without one (linalg, random, scan_sort) are listed.
Per example: tests passed, geomean speedup over eager and over inductor, the roofline fraction
(geomean over the counted shapes), the largest shape's share of copy bandwidth, and with
``--profile`` the GPU launches per call (the torch profiler) or with ``--ncu`` the registers per
thread of the kernel's launches (Nsight Compute).

    python benchmarks/examples_table.py [--families a,b] [--max-shapes 24] [--target-ms 25]
        [--profile] [--ncu] [--out DIR] [--device cuda]
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "prompts" / "examples"
MEMORY_BOUND = ("elementwise_unary", "elementwise_binary", "copy_layout", "indexing", "reduction", "softmax",
                "normalization", "loss", "backward", "pooling")
EAGER_GEOMEAN, COPY_FRACTION = 1.0, 0.8  # memory-bound families
MATMUL_EAGER, MATMUL_MIN_DIM = 0.8, 2048  # float16/bfloat16 shapes of at least this in every dimension
CONVOLUTION_EAGER = 0.5
# the matmul target's shapes (the traces hold no float16/bfloat16 product this large): [M, K] @ [K, N]
MATMUL_SHAPES = [(2048, 2048, 2048, "f16"), (4096, 4096, 4096, "f16"), (4096, 4096, 4096, "bf16"),
                 (8192, 4096, 2048, "bf16"), (2048, 8192, 4096, "f16")]


# the copy-bandwidth target's shapes where the traces' largest is small (a 0.7 MB sigmoid measures the
# launch, not the kernel): about 200 MB each, timed first on a GPU
LARGE_SHAPES = {
    "aten.sigmoid.default": ["(T([32, 64, 224, 224], f16),)"],
    "aten.index_select.default": ["(T([131072, 1024], f16), 0, T([65536], i64))"],
    "aten.native_layer_norm.default": ["(T([16384, 4096], f16), [4096], T([4096], f16), T([4096], f16), 1e-05)"],
    "aten.mse_loss.default": ["(T([32, 64, 224, 224], f16), T([32, 64, 224, 224], f16))"],
}


def extra_inputs(op: str) -> dict | None:
    """Inputs the example is timed on beyond its operator's traces (as a dataset's rows: timed first):
    the large matmuls of the matmul target for ``aten.mm.default``, ``LARGE_SHAPES`` for the others."""
    if op == "aten.mm.default":
        args = [f"(T([{m}, {k}], {dtype}), T([{k}, {n}], {dtype}))" for m, k, n, dtype in MATMUL_SHAPES]
    else:
        args = LARGE_SHAPES.get(op, [])
    return {op: [{"line": f"cnt: 1, ({text}, {{}})", "timed": True} for text in args]} if args else None


def operator_of(example: Path) -> str:
    """The overload an example is written for: the first word of its docstring (``aten.mul.Tensor: ...``)."""
    found = re.match(r'\s*"""\s*(aten\.[\w.]+):', example.read_text())
    if found is None:
        raise ValueError(f"{example} does not start with a docstring naming its operator (\"\"\"aten.x.y: ...)")
    return found.group(1)


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _dims(text: str) -> list[int]:
    """Every dimension of the tensors a shape's description names (``T([2048, 4096], f16)``)."""
    return [int(d) for group in re.findall(r"T\(\[([\d, ]*)\]", text) for d in group.split(",") if d.strip()]


def target_check(family: str, row: dict) -> tuple[str, bool | None]:
    """The family's target in words, and whether the row meets it (None: no target, or nothing to judge)."""
    if not row["passed"]:
        return "correct", False
    if not row["timed"]:
        return "timed (not here)", None
    if family in MEMORY_BOUND:
        copy = row["largest_copy_fraction"]
        met = row["eager"] is not None and row["eager"] >= EAGER_GEOMEAN and copy is not None and copy >= COPY_FRACTION
        return f">= {EAGER_GEOMEAN:g}x eager, >= {COPY_FRACTION:.0%} copy bw on the largest", met
    if family == "matmul":
        big = row["half_large_eager"]
        return f">= {MATMUL_EAGER:g}x eager, fp16/bf16 dims >= {MATMUL_MIN_DIM}", None if big is None else big >= MATMUL_EAGER
    if family == "convolution":
        return f">= {CONVOLUTION_EAGER:g}x eager", None if row["eager"] is None else row["eager"] >= CONVOLUTION_EAGER
    return "-", None


def row_of(family: str, op: str, verdict, seconds: float) -> dict:
    """One example's figures from its bench Verdict."""
    performance = verdict.performance
    measured = performance is not None and performance.measured
    largest = performance.summary.largest if measured and performance.summary is not None else None
    tests = performance.counted_tests() if measured else []
    half_large = [t.speedup for t in tests if family == "matmul" and t.dtype in ("float16", "bfloat16") and t.speedup
                  and _dims(t.input) and min(_dims(t.input)) >= MATMUL_MIN_DIM]
    row = {"family": family, "op": op, "passed": verdict.passed, "tests": verdict.test_counts().text(),
           "timed": len(tests), "eager": verdict.geomean_speedup(), "inductor": verdict.baseline_speedup("inductor"),
           "roof": verdict.geomean_roof_fraction(),
           "largest_copy_fraction": largest.bandwidth_fraction if largest is not None else None,
           "largest": largest.input if largest is not None else None,
           "half_large_eager": geomean(half_large), "half_large_shapes": len(half_large),
           "launches_per_call": _launches(performance), "registers": _registers(performance),
           "message": "" if verdict.passed else (verdict.message or verdict.error_kind or "")[:300],
           "wall_s": round(seconds, 1),
           "shapes": [{"input": t.input, "dtype": t.dtype, "speedup": t.speedup, "overhead_dominated": t.overhead_dominated,
                       "kernel_us": round(t.candidate.median_ms * 1000, 2) if t.candidate else None,
                       "roof": t.roof_fraction} for t in (performance.tests if measured else [])]}
    row["target"], row["met"] = target_check(family, row)
    return row


def _launches(performance) -> float | None:
    """GPU launches per call of the kernel on the profiled shapes (the torch profiler's lists), at most."""
    profiles = (performance.profiles or []) if performance is not None else []
    counts = [sum(launch.per_call for launch in entry.launches.get("kernel", [])) for entry in profiles
              if entry.launches.get("kernel")]
    return max(counts) if counts else None


def _registers(performance) -> float | None:
    """Registers per thread of the kernel's launches on the shapes Nsight Compute profiled, at most."""
    report = performance.ncu if performance is not None else None
    found = [k.registers for shape in (report.shapes if report is not None else []) if shape.kernel is not None
             for k in shape.kernel.kernels if k.registers is not None]
    return max(found) if found else None


def bench_example(example: Path, args, root: Path) -> dict:
    import bbagent
    family, op = example.stem, operator_of(example)
    started = time.perf_counter()
    try:
        result = bbagent.bench(op, kernel=example, root=root, device=args.device, max_shapes=args.max_shapes,
                               target_ms=args.target_ms, baseline="eager,inductor" if args.inductor else "eager",
                               profile=args.profile, ncu=args.ncu, timeout_s=args.timeout,
                               extra_traces=extra_inputs(op) if args.device != "cpu" else None)
    except Exception as exc:  # noqa: BLE001 - one example that cannot be benched is a row, not the end of the table
        row = {"family": family, "op": op, "passed": False, "tests": "-", "timed": 0, "eager": None, "inductor": None,
               "roof": None, "largest_copy_fraction": None, "largest": None, "half_large_eager": None,
               "half_large_shapes": 0, "launches_per_call": None, "registers": None,
               "message": f"{type(exc).__name__}: {str(exc)[:300]}", "wall_s": round(time.perf_counter() - started, 1),
               "shapes": []}
        row["target"], row["met"] = target_check(family, row)
        return row
    return row_of(family, op, result.verdict, time.perf_counter() - started)


def _figure(value, pattern: str = "{:.2f}") -> str:
    return "-" if value is None else pattern.format(value)


def table(rows: list[dict], device: str) -> str:
    lines = [f"Worked examples on {device}: geomean speedups over the counted timed shapes",
             "", "| family | operator | tests | timed | x eager | x inductor | roof | copy bw (largest) | "
             "fp16/bf16 >= 2048 x eager | launches/call | regs | target | met |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        met = {True: "yes", False: "**no**", None: "-"}[r["met"]]
        lines.append(f"| {r['family']} | `{r['op']}` | {r['tests']} | {r['timed']} | {_figure(r['eager'])} | "
                     f"{_figure(r['inductor'])} | {_figure(r['roof'], '{:.0%}')} | "
                     f"{_figure(r['largest_copy_fraction'], '{:.0%}')} | "
                     f"{_figure(r['half_large_eager'])} ({r['half_large_shapes']}) | {_figure(r['launches_per_call'], '{:g}')} | "
                     f"{_figure(r['registers'], '{:g}')} | {r['target']} | {met} |")
    failed = [r for r in rows if r["message"]]
    lines += [""] + [f"- {r['family']}: {r['message']}" for r in failed]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", help="comma-separated example names (default: every one)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None)
    parser.add_argument("--max-shapes", type=int, default=24)
    parser.add_argument("--target-ms", type=float, default=25.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--no-inductor", dest="inductor", action="store_false", help="time against eager only")
    parser.add_argument("--profile", action="store_true", help="count GPU launches per call (torch profiler)")
    parser.add_argument("--ncu", action="store_true", help="read registers per thread (Nsight Compute)")
    parser.add_argument("--out", type=Path, help="write table.md and rows.json here")
    args = parser.parse_args()
    examples = sorted(EXAMPLES.glob("*.py"))
    if args.families:
        wanted = [name.strip() for name in args.families.split(",") if name.strip()]
        unknown = sorted(set(wanted) - {e.stem for e in examples})
        if unknown:
            parser.error(f"no example for {', '.join(unknown)}; there are: {', '.join(e.stem for e in examples)}")
        examples = [e for e in examples if e.stem in wanted]
    import torch
    device = torch.cuda.get_device_name() if torch.cuda.is_available() and args.device != "cpu" else "cpu"
    rows, text = [], table([], device)
    with tempfile.TemporaryDirectory(prefix="bbagent-examples-") as root:
        for example in examples:
            rows.append(bench_example(example, args, Path(root)))
            print(f"{example.stem}: {rows[-1]['tests']}, x eager {_figure(rows[-1]['eager'])}, "
                  f"{rows[-1]['wall_s']} s", file=sys.stderr, flush=True)
            text = table(rows, device)
            if args.out is not None:  # after every example: a run cut short keeps what it measured
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / "table.md").write_text(text)
                (args.out / "rows.json").write_text(json.dumps({"device": device, "rows": rows}, indent=1) + "\n")
    sys.stdout.write(text)
    return 1 if any(r["met"] is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
