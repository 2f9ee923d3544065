"""What serving an in-place or out= overload through bbagent's adapter costs on the GPU.

The adapter (``harness.adapters``) runs the functional kernel, then copies its result into
``self`` or ``out``: one extra read and write of the result. For the in-place overloads'
own real-model trace shapes (relu_, add_) this times, interleaved with L2 flushed before each
repetition and as CUDA-graph replays where all can be captured:

* ``aten_inplace``: eager aten in-place (``relu_``), the baseline a backend replaces;
* ``kernel``: the functional Triton kernel alone (allocates and writes a new tensor);
* ``adapter_inplace``: the same kernel served as the in-place overload (kernel + copy_);
* ``aten_out`` / ``adapter_out``: the out= overload, eager and through the adapter.

    python benchmarks/variant_overhead.py --shapes 8 --json variant_overhead.json
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bbagent.harness.adapters import serving  # noqa: E402
from bbagent.harness.inputs import materialize  # noqa: E402
from bbagent.harness.ops import resolve_op  # noqa: E402
from bbagent.harness.inputs import spread  # noqa: E402
from bbagent.harness.timing.clock import graphed, timing_stats, time_interleaved  # noqa: E402
from bbagent.harness.traces import load_calls  # noqa: E402

FAMILIES = [("aten.relu.default", "aten.relu_.default", "aten.relu.out", "relu_triton.py"),
            ("aten.add.Tensor", "aten.add_.Tensor", "aten.add.out", "add_broadcast.py")]


def load_kernel(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "kernels" / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


def measure(functional: str, inplace: str, out: str, kernel_file: str, shapes: int, target_ms: float) -> list[dict]:
    f_op, i_op, o_op = resolve_op(functional), resolve_op(inplace), resolve_op(out)
    kernel = load_kernel(kernel_file)
    served_inplace, served_out = serving(kernel, f_op, i_op), serving(kernel, f_op, o_op)
    calls = sorted(load_calls(inplace), key=lambda c: c.numel())
    rows = []
    for position in sorted(spread(len(calls), shapes)):
        call = calls[position]
        gen = torch.Generator(device="cuda").manual_seed(position)
        args = materialize(call.args, "cuda", gen)
        kwargs = materialize(call.kwargs, "cuda", gen)
        result = f_op(*args, **kwargs)
        out_aten, out_adapter = torch.empty_like(result), torch.empty_like(result)
        fns = {"aten_inplace": lambda: i_op(*args, **kwargs),
               "kernel": lambda: kernel(*args, **kwargs),
               "adapter_inplace": lambda: served_inplace(*args, **kwargs),
               "aten_out": lambda: o_op(*args, **kwargs, out=out_aten),
               "adapter_out": lambda: served_out(*args, **kwargs, out=out_adapter)}
        replays = graphed(fns)
        samples = time_interleaved(replays or fns, target_ms=target_ms)
        medians = {name: timing_stats(values)["median_ms"] for name, values in samples.items()}
        rows.append({"op": inplace, "input": call.describe(), "numel": call.numel(),
                     "mode": "graph" if replays else "eager", "median_ms": medians,
                     "adapter_inplace_over_aten": medians["adapter_inplace"] / medians["aten_inplace"],
                     "adapter_inplace_over_kernel": medians["adapter_inplace"] / medians["kernel"],
                     "adapter_out_over_aten": medians["adapter_out"] / medians["aten_out"]})
        print(f"{inplace} {call.describe()}: " + ", ".join(f"{k} {v * 1000:.1f} us" for k, v in medians.items()),
              flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=int, default=8, help="trace shapes per op, spread small to large")
    parser.add_argument("--target-ms", type=float, default=50.0)
    parser.add_argument("--json", type=Path, help="write every row and the summary here")
    args = parser.parse_args()
    rows = [row for family in FAMILIES for row in measure(*family, args.shapes, args.target_ms)]
    summary = {}
    for op in sorted({r["op"] for r in rows}):
        mine = [r for r in rows if r["op"] == op]
        large = [r for r in mine if r["numel"] >= 1 << 20]  # past launch overhead
        summary[op] = {key: {"median_all": statistics.median(r[key] for r in mine),
                             "median_1M_elements_up": statistics.median(r[key] for r in large) if large else None}
                       for key in ("adapter_inplace_over_aten", "adapter_inplace_over_kernel", "adapter_out_over_aten")}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                                         "rows": rows, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
