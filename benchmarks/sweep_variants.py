"""Time several versions of one kernel against eager on the same inputs, to choose between them
(how the reduction and cat examples of issue 49 were tuned). Every version and eager are timed
interleaved, each call as a CUDA-graph replay after an L2 flush (``harness.timing.clock``, as
``bbagent bench`` times), on one process and one GPU, so their figures compare; each version's
output is checked against eager's first (a wrong one is timed and marked "!").

A version is a kernel file (``def kernel(...)``, as bbagent writes them), optionally with
module-level names set first: ``red.py:TILE=8192,WARPS=8`` (the value keeps the type of the
file's own). Inputs are the operator's trace shapes (the first ``--max-shapes``), or the lines of
``--inputs FILE``: one call's arguments a line, in the traces' form (``(T([4096, 1024], f16), [0], True)``).

    python benchmarks/sweep_variants.py aten.sum.dim_IntList prompts/examples/reduction.py new.py:TILE=8192
        [--inputs FILE] [--max-shapes 12] [--target-ms 20]
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import statistics
import sys
from pathlib import Path


class WrongInput(Exception):
    """What the command line asked for cannot be swept; said in one line, exit 2."""


def load_version(spec: str, index: int):
    """The kernel module a version names, its settings applied."""
    path, _, settings = spec.partition(":")
    if not Path(path).is_file():
        raise WrongInput(f"no kernel file {path!r}")
    module_spec = importlib.util.spec_from_file_location(f"version{index}", path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - a version that does not import is named, not a traceback
        raise WrongInput(f"{path} does not import: {type(exc).__name__}: {exc}") from None
    if not callable(getattr(module, "kernel", None)):
        raise WrongInput(f"{path} defines no kernel(...) function")
    for setting in filter(None, settings.split(",")):
        name, _, value = setting.partition("=")
        if not hasattr(module, name):
            raise WrongInput(f"{path} has no module-level {name!r} to set")
        setattr(module, name, type(getattr(module, name))(ast.literal_eval(value)))
    return module


def input_lines(op: str, inputs: Path | None, max_shapes: int) -> list[str]:
    if inputs is not None:
        if not inputs.is_file():
            raise WrongInput(f"no inputs file {str(inputs)!r}")
        return [line.strip() for line in inputs.read_text().splitlines() if line.strip() and not line.startswith("#")]
    from bbagent.harness.traces import describe_value, load_calls
    return [describe_value(call.args) for call in load_calls(op)[:max_shapes]]


def same(expected, actual) -> bool:
    """Every tensor of the output close to eager's (loosely: the verdict judges, this only flags a
    version gone wrong), as many and of the same shapes."""
    import torch
    from bbagent.harness.inputs import tensors_in
    want, got = tensors_in(expected), tensors_in(actual)
    return len(want) == len(got) and all(
        w.shape == g.shape and torch.allclose(w.float(), g.float(), atol=2e-2, rtol=2e-2, equal_nan=True)
        for w, g in zip(want, got))


def draw_inputs(op, call, device: str) -> list:
    """Seeded values for one call's arguments, index arguments redrawn so that the operator (an
    OpOverload) accepts them (as the verdict's suite draws them: an index_select index within its
    dimension)."""
    import torch
    from bbagent.harness.inputs import materialize
    from bbagent.harness.suite.index_args import make_index_args_valid
    gen = torch.Generator(device=device).manual_seed(0)
    inputs = list(materialize(call.args, device, gen))
    make_index_args_valid(op, inputs, {}, gen)
    return inputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("op", help="the aten overload, e.g. aten.sum.dim_IntList")
    parser.add_argument("versions", nargs="+", help="FILE or FILE:NAME=VALUE,...")
    parser.add_argument("--inputs", type=Path, help="argument lines in the traces' form (default: the op's traces)")
    parser.add_argument("--max-shapes", type=int, default=12)
    parser.add_argument("--target-ms", type=float, default=20.0, help="GPU time per version and input")
    args = parser.parse_args(argv)
    import torch
    from bbagent.harness.ops import UnknownOpError, resolve_op
    from bbagent.harness.traces import TraceFormatError, parse_call_line
    try:
        op = resolve_op(args.op)
    except UnknownOpError as exc:
        print(f"sweep_variants: no operator {args.op!r} ({exc})", file=sys.stderr)
        return 2
    try:
        versions = [load_version(spec, i) for i, spec in enumerate(args.versions)]
        calls = [(line, parse_call_line(args.op, f"cnt: 1, ({line}, {{}})"))
                 for line in input_lines(args.op, args.inputs, args.max_shapes)]
    except (WrongInput, TraceFormatError) as exc:
        print(f"sweep_variants: {'not an input line: ' if isinstance(exc, TraceFormatError) else ''}{exc}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("sweep_variants: needs a CUDA GPU (it times on one)", file=sys.stderr)
        return 2
    from bbagent.harness.timing.clock import graphed, time_interleaved
    for i, spec in enumerate(args.versions):
        print(f"v{i} = {spec}")
    print("input".ljust(48), "eager_us", *[f"v{i}".rjust(13) for i in range(len(versions))], flush=True)
    speedups: list[list[float]] = [[] for _ in versions]
    for line, call in calls:
        inputs = draw_inputs(op, call, "cuda")
        expected = op(*inputs)
        fns, wrong, cells = {"eager": lambda: op(*inputs)}, set(), {}
        for i, module in enumerate(versions):
            try:
                if not same(expected, module.kernel(*inputs)):
                    wrong.add(i)
                fns[f"v{i}"] = lambda module=module: module.kernel(*inputs)
            except Exception as exc:  # noqa: BLE001 - a version that fails is a cell, not the end of the sweep
                cells[i] = f"{type(exc).__name__}"[:13]
        times = time_interleaved(graphed(fns) or fns, target_ms=args.target_ms)
        eager = statistics.median(times["eager"])
        for i in range(len(versions)):
            if i not in cells:
                ms = statistics.median(times[f"v{i}"])
                speedups[i].append(eager / ms)
                cells[i] = f"{ms * 1e3:6.1f}({eager / ms:4.2f}){'!' if i in wrong else ''}"
        print(line[:48].ljust(48), f"{eager * 1e3:8.1f}", *[cells[i].rjust(13) for i in range(len(versions))], flush=True)
    print("geomean x eager".ljust(57), *[f"{statistics.geometric_mean(s):.3f}".rjust(13) if s else "-".rjust(13)
                                         for s in speedups])
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("sweep_variants: interrupted", file=sys.stderr)
        sys.exit(130)
