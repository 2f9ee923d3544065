"""What the integer-extremes tests (issue 75) draw and cost: for operators whose tests hold integer
tensors, the values each tier sets per dtype, the extreme cases each suite gets, the time they add to
building the suite, and their share of one evaluation of a correct kernel (the corpus's).

    python benchmarks/integer_extremes_cost.py [--device cuda|cpu] [--out DIR]

Prints a Markdown table (and writes it to ``DIR/integer-extremes-cost.md``).
"""
from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path
from unittest import mock

import torch

KERNELS = Path(__file__).resolve().parent.parent / "tests" / "kernels"
# operator, a correct kernel for it from the corpus
OPERATORS = [("aten.relu.default", "relu_triton.py"), ("aten.add.Tensor", "add_broadcast.py"),
             ("aten.bitwise_and.Tensor", "bitwise_and.py"), ("aten.sum.dim_IntList", "sum_dim.py"),
             ("aten.index_select.default", "index_select.py"), ("aten.gather.default", "gather.py")]


def values_table() -> list[str]:
    from bbagent.harness.suite.integer_extremes import TIERS
    lines = ["| dtype | tier | values set (every other element, cycled) |", "| --- | --- | --- |"]
    for dtype in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64):
        info = torch.iinfo(dtype)
        for tier in TIERS:
            if tier.applies(info):
                lines.append(f"| {str(dtype).removeprefix('torch.')} | {tier.name} | "
                             f"{', '.join(str(v) for v in tier.values(info))} |")
    return lines


def build_seconds(op, device: str, with_extremes: bool) -> tuple[float, int]:
    """Seconds to build the operator's suite, and its integer-extremes cases."""
    from bbagent.harness.suite import build
    from bbagent.harness.suite.integer_extremes import tier_of
    patch = contextlib.nullcontext() if with_extremes else \
        mock.patch.object(build, "derive_integer_extreme_cases", lambda *a, **k: [])
    with patch:
        started = time.perf_counter()
        suite = build.build_suite(op, device, 0, interpreter=device == "cpu")
        return time.perf_counter() - started, sum(tier_of(c) is not None for c in suite.cases)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import bbagent
    from bbagent.harness.interface import resolve_op
    lines = ["# Integer extremes: values and cost", "", f"device: {args.device}", "", *values_table(), "",
             "| operator | extreme cases | suite build s without / with | tests | extreme tests' ms | all tests' ms "
             "| evaluation s | share |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, kernel in OPERATORS:
        op = resolve_op(name)
        without, _ = build_seconds(op, args.device, False)
        with_them, count = build_seconds(op, args.device, True)
        started = time.perf_counter()
        verdict = bbagent.evaluate(name, KERNELS / kernel, device=args.device, seed=1)
        wall = time.perf_counter() - started
        extreme = [t for t in verdict.tests if "integer_extremes" in t.id]
        extreme_ms = sum(t.duration_ms or 0 for t in extreme)
        all_ms = sum(t.duration_ms or 0 for t in verdict.tests)
        lines.append(f"| {name} ({verdict.verdict}) | {count} | {without:.2f} / {with_them:.2f} | {len(verdict.tests)} | "
                     f"{extreme_ms:.1f} | {all_ms:.1f} | {wall:.1f} | {extreme_ms / max(all_ms, 1e-9):.1%} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "integer-extremes-cost.md").write_text(text)


if __name__ == "__main__":
    main()
