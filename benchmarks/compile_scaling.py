"""How compiling ahead scales: one new candidate per run, its suite's calls compiled ahead with
1, 4, 8 or 16 threads (``harness.sandbox.child.compile_ahead``), each compilation made first in a forked
compile process or not (``--modes processes,threads``), in this process, no sandbox.

For each run: the wall time of compiling ahead, the compilations made, and the sum of their
stages' durations (Triton's compilation listener: front end, then each lowering stage), so that
the wall time can be set against the work. Then every test's call once (what compiling ahead did
not reach compiles there, and each kernel's first launch loads its module and launcher).

    python3 benchmarks/compile_scaling.py --ops add,mm --threads 1,8,16 --modes processes,threads --json out.json

Needs a GPU (Triton's asynchronous compile mode is used only on CUDA).
"""
from __future__ import annotations

import argparse
import collections
import functools
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from eval_cost import CANDIDATES, new_candidate, source_of  # noqa: E402


class StageTimes:
    """Triton's compilation listener: per-stage seconds summed over compilations (cache hits apart)."""

    def __init__(self):
        self.compiles = 0
        self.hits = 0
        self.stages: dict[str, float] = collections.defaultdict(float)

    def __call__(self, *, src, metadata, metadata_group, times, cache_hit):
        if cache_hit:
            self.hits += 1
            return
        self.compiles += 1
        self.stages["front end"] += times.ir_initialization / 1e6
        for stage, micros in times.lowering_stages:
            self.stages[stage] += micros / 1e6


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"candidate_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as the sandbox child does: the compile processes find its kernels by name
    spec.loader.exec_module(module)
    return module.kernel


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", default="add,mm")
    parser.add_argument("--threads", default="1,8,16")
    parser.add_argument("--modes", default="processes,threads",
                        help="processes: each compilation made first in a forked compile process; threads: not")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import torch
    import triton
    from triton import knobs
    from bbagent.harness.inputs import clone_value
    from bbagent.harness.ops import resolve_op
    from bbagent.harness.sandbox.child import compile_ahead
    from bbagent.harness.suite.build import build_suite
    from bbagent.harness.sandbox.child.preparation import load_lazy_parts
    load_lazy_parts()
    torch.zeros(1, device="cuda")
    rows = []
    scratch = Path(tempfile.mkdtemp(prefix="bbagent-compile-scaling-"))
    for name in [n for n in args.ops.split(",") if n]:
        op_name, correct, _ = CANDIDATES[name]
        op = resolve_op(op_name)
        suite = build_suite(op, "cuda", 1, interpreter=False)
        runs = [(int(t), mode) for t in args.threads.split(",") for mode in args.modes.split(",") if mode]
        for threads, mode in runs:
            path = scratch / f"{name}_{threads}_{mode}.py"
            path.write_text(new_candidate(source_of(correct)))
            kernel = load(path)
            seen, calls = set(), []
            for case in suite.cases:
                key = compile_ahead.layout_key(op_name, case)
                if key not in seen:
                    seen.add(key)
                    calls.append(case)

            def call(case):
                inputs, kwargs = case.inputs()
                kernel(*clone_value(inputs), **clone_value(kwargs))
            listener = StageTimes()
            knobs.compilation.listener = listener
            compile_ahead.MAX_THREADS = threads
            compile_ahead.PROCESSES = mode == "processes"
            started = time.perf_counter()
            made = compile_ahead.compile_ahead((functools.partial(call, c) for c in calls), "cuda")
            ahead_s = time.perf_counter() - started
            ahead_compiles, ahead_hits = listener.compiles, listener.hits
            started = time.perf_counter()
            for case in suite.cases:
                call(case)
            torch.cuda.synchronize()
            tests_s = time.perf_counter() - started
            knobs.compilation.listener = None
            row = {"operator": name, "threads": threads, "mode": mode, "processes": made["processes"],
                   "warmed": made["warmed"], "calls": made["calls"], "launches": made["launches"],
                   "ahead_s": round(ahead_s, 2), "ahead_compiles": ahead_compiles, "ahead_cache_hits": ahead_hits,
                   "stage_s": {k: round(v, 2) for k, v in listener.stages.items()},
                   "tests": len(suite.cases), "calls_after_s": round(tests_s, 2),
                   "compiles_after": listener.compiles - ahead_compiles, "triton": triton.__version__}
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
