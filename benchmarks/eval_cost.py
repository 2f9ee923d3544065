"""What one candidate's evaluation costs (issue 33): a correct and a wrong kernel per operator, each
as a new candidate, warm (as ``generate`` and a batch evaluate: one process, the warm fork server)
and one-shot (``bbagent eval --json`` from a fresh process).

Every candidate is new: a nonce comment goes into the body of each ``@triton.jit`` function, so
Triton's cache (keyed on a function's source) misses, as it does for a model's new answer. The warm
rows follow one evaluation of the same operator that is not counted (the fork server up, the
operator's suite built, as in the second round of a ``generate``).

    python benchmarks/eval_cost.py [--ops relu,add] [--modes warm,oneshot] [--device cuda]
                                   [--json FILE] [--markdown FILE] [--timeout 300]

Correctness only (no timing phase), as ``bbagent eval`` does. Writes a table with, per candidate:
tests run of planned, passed, wall seconds, child ready, suite build, tests, compiles (seconds),
autotuning runs (seconds), what the verdict said, and the tests' time by part
(``timings.test_parts``). ``--loop-profile`` runs the suites in this process instead (cProfile;
with ``--torch-profile`` the second pass under torch's profiler, aten calls by device time).
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import json
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CORPUS = ROOT / "tests" / "kernels"
EXAMPLES = ROOT / "prompts" / "examples"


def _mutated(path: Path, find: str, replace: str) -> str:
    """The file's source with ``find`` (present exactly once) replaced: a wrong kernel made from a
    correct one, for operators whose corpus has no wrong kernel."""
    source = path.read_text()
    if source.count(find) != 1:
        raise SystemExit(f"eval_cost: {path.name} holds {find!r} {source.count(find)} times, not once")
    return source.replace(find, replace)


# operator: (correct kernel, wrong kernel) as (file) or (file, find, replace)
CANDIDATES = {
    "relu": ("aten.relu.default", (CORPUS / "relu_triton.py",), (CORPUS / "relu_nan_to_zero.py",)),
    "add": ("aten.add.Tensor", (CORPUS / "add_broadcast.py",), (CORPUS / "add_ignores_alpha.py",)),
    "softmax": ("aten._softmax.default", (CORPUS / "softmax.py",), (CORPUS / "softmax_unstable.py",)),
    "mm": ("aten.mm.default", (CORPUS / "mm_tiled.py",), (CORPUS / "mm_ignores_strides.py",)),
    "mm_autotuned": ("aten.mm.default", (CORPUS / "mm_autotuned.py",),
                     (CORPUS / "mm_autotuned.py", "for k0 in range(0, K, BK):", "for k0 in range(BK, K, BK):")),
    "layer_norm": ("aten.native_layer_norm.default", (EXAMPLES / "normalization.py",),
                   (EXAMPLES / "normalization.py", "/ N + eps)", "/ (N - 1) + eps)")),
    "convolution": ("aten.convolution.default", (EXAMPLES / "convolution.py",),
                    (EXAMPLES / "convolution.py", "HAS_BIAS=bias is not None", "HAS_BIAS=False")),
}


def source_of(spec: tuple) -> str:
    return spec[0].read_text() if len(spec) == 1 else _mutated(*spec)


def new_candidate(source: str) -> str:
    """``source`` with a fresh nonce comment at the top of every ``@triton.jit`` function's body, so
    that no compiled kernel of an earlier evaluation matches (Triton hashes each function's source)."""
    lines = source.splitlines(keepends=True)
    firsts = sorted({node.body[0].lineno for node in ast.walk(ast.parse(source))
                     if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list)},
                    reverse=True)
    nonce = secrets.token_hex(8)
    for lineno in firsts:
        line = lines[lineno - 1]
        indent = line[:len(line) - len(line.lstrip())]
        lines.insert(lineno - 1, f"{indent}# candidate {nonce}\n")
    return "".join(lines)


def row_of(name: str, kind: str, mode: str, verdict: dict, wall_s: float) -> dict:
    summary = verdict.get("summary") or {}
    timings = verdict.get("timings") or {}
    failures = [group["error_kind"] for group in verdict.get("failure_groups") or []]
    return {"operator": name, "kernel": kind, "mode": mode, "passed": verdict.get("verdict") == "pass",
            "planned": summary.get("planned"), "ran": summary.get("total"), "tests_passed": summary.get("passed"),
            "not_run": summary.get("not_run"), "wall_s": round(wall_s, 2),
            "child_ready_s": timings.get("child_ready_s"), "suite_build_s": timings.get("suite_build_s"),
            "tests_s": timings.get("tests_s"), "compiles": timings.get("compiles"),
            "compile_s": timings.get("compile_s"), "autotune_runs": timings.get("autotune_runs"),
            "autotune_s": timings.get("autotune_s"), "ahead_calls": timings.get("ahead_calls"),
            "ahead_s": timings.get("ahead_s"), "ahead_processes": timings.get("ahead_processes"),
            "ahead_warmed": timings.get("ahead_warmed"), "host_memory_peak_gib": timings.get("host_memory_peak_gib"),
            "imported_sealed": timings.get("imported_sealed"),
            "phases": timings.get("phases"), "test_parts": timings.get("test_parts"), "failures": failures, "error": verdict.get("error_kind")}


def evaluate_warm(op: str, path: Path, device: str, timeout_s: float, profile: bool = False) -> tuple[dict, float]:
    from bbagent.harness.evaluate import EvaluationRequest, evaluate_kernel
    started = time.perf_counter()
    verdict = evaluate_kernel(EvaluationRequest.of(op, device=device, timeout_s=timeout_s, warm=True, profile=profile), path)
    return json.loads(verdict.model_dump_json()), time.perf_counter() - started


def evaluate_oneshot(op: str, path: Path, device: str, timeout_s: float, workdir: Path) -> tuple[dict, float]:
    command = [sys.executable, "-m", "bbagent", "eval", "--op", op, "--kernel", str(path), "--json",
               "--device", device, "--timeout", str(timeout_s)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=timeout_s + 120)
    wall = time.perf_counter() - started
    try:
        return json.loads(done.stdout), wall
    except json.JSONDecodeError:
        raise SystemExit(f"eval_cost: `{' '.join(command)}` printed no Verdict (exit {done.returncode}):\n"
                         f"{done.stderr[-2000:]}") from None


def suite_profile(names: list[str], device: str, out) -> None:
    """Where a child's suite build goes, in this (fresh) process as in a child: torch, the device,
    the OpInfo database, then each operator's suite built twice (two seeds) with the first build's
    costliest calls."""
    import cProfile
    import io
    import pstats
    started = time.perf_counter()
    import torch
    marks = {"import torch": time.perf_counter() - started}
    if device == "cuda":
        at = time.perf_counter()
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        marks["CUDA ready"] = time.perf_counter() - at
    at = time.perf_counter()
    from torch.testing._internal.common_methods_invocations import op_db  # noqa: F401
    marks["OpInfo database"] = time.perf_counter() - at
    from bbagent.harness.ops import resolve_op
    from bbagent.harness.suite.build import build_suite
    for key, value in marks.items():
        print(f"{key}: {value:.2f} s", file=out)
    for name in names:
        op = resolve_op(CANDIDATES[name][0])
        profile = cProfile.Profile()
        at = time.perf_counter()
        profile.enable()
        suite = build_suite(op, device, 1, interpreter=device == "cpu")
        profile.disable()
        first = time.perf_counter() - at
        at = time.perf_counter()
        build_suite(op, device, 2, interpreter=device == "cpu")
        second = time.perf_counter() - at
        print(f"{name}: {len(suite.cases)} cases; first build {first:.2f} s, second (another seed) {second:.2f} s",
              file=out)
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(25)
        print(text.getvalue(), file=out)


def loop_profile(names: list[str], device: str, out, limit: int | None = None, torch_profile: bool = False) -> None:
    """Where a test's time goes once the suite is built: each operator's correct kernel run over its
    suite in this process (no sandbox), as the child runs it, under cProfile: the first pass (what a
    fresh child pays: compiles, first launches, lazily loaded libraries) and a second one."""
    import cProfile
    import importlib.util
    import io
    import pstats
    started = time.perf_counter()
    import torch
    if device == "cuda":
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
    print(f"torch imported and {device} ready: {time.perf_counter() - started:.2f} s", file=out)
    from bbagent.harness.checks.case import run_case
    from bbagent.harness.stopwatch import Stopwatch
    from bbagent.harness.checks.guards import AtenRecorder, LaunchCounter
    from bbagent.harness.ops import resolve_op
    from bbagent.harness.suite.build import build_suite
    launches = LaunchCounter()
    launches.install(device)
    for name in names:
        op_name, correct, _ = CANDIDATES[name]
        op = resolve_op(op_name)
        path = Path(tempfile.mkdtemp()) / "candidate.py"
        path.write_text(new_candidate(source_of(correct)))
        spec = importlib.util.spec_from_file_location("candidate", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        suite = build_suite(op, device, 1, interpreter=device == "cpu")
        cases = suite.cases[::max(1, len(suite.cases) // limit)][:limit] if limit else suite.cases
        for label in ("first", "second"):
            stopwatch = Stopwatch()
            profile = cProfile.Profile() if label == "first" or not torch_profile else None
            device_profile = _torch_profiler(device) if profile is None else None
            started = time.perf_counter()
            with (device_profile or contextlib.nullcontext()):
                if profile:
                    profile.enable()
                for case in cases:
                    run_case(op, case, module.kernel, device, launches, AtenRecorder(op, launches, str(path)), str(path),
                             stopwatch=stopwatch)
                if profile:
                    profile.disable()
            took = time.perf_counter() - started
            print(f"{name}: {len(cases)} of {len(suite.cases)} tests, {label} pass {took:.2f} s "
                  f"({1e3 * took / len(cases):.1f} ms a test); parts: {_parts(stopwatch.rounded())}", file=out)
            if profile:
                text = io.StringIO()
                pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(40)
                print(text.getvalue(), file=out)
            else:
                print(_device_table(device_profile, device), file=out)


def _torch_profiler(device: str):
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    return profile(activities=activities, record_shapes=True)


def _device_table(profile, device: str) -> str:
    """The aten calls of a pass, with their input dtypes (which of them are the float64
    re-judgements), by device time on a GPU, else by host time."""
    sort = "cuda_time_total" if device == "cuda" else "cpu_time_total"
    return profile.key_averages(group_by_input_shape=False).table(sort_by=sort, row_limit=40)


def _parts(parts: dict | None) -> str:
    """``ahead 1.2, inputs 0.3, ...``: where the tests' time went (``timings.test_parts``)."""
    return ", ".join(f"{name} {seconds:g}" for name, seconds in (parts or {}).items()) or "-"


def markdown(rows: list[dict], device: str) -> str:
    head = ("| operator | kernel | mode | verdict | tests run / planned | wall s | child ready s | suite build s "
            "| tests s | compiled ahead s (calls) | compile processes (warmed) | compiles (s) | autotune runs (s) "
            "| host memory peak GiB | tests' parts s |")
    lines = [f"Device: {device}.", "", head, "|" + " --- |" * 15]
    for r in rows:
        verdict = "pass" if r["passed"] else "fail: " + ", ".join(sorted(set(r["failures"])) or [r["error"] or "?"])
        lines.append(f"| {r['operator']} | {r['kernel']} | {r['mode']} | {verdict} | {r['ran']} / {r['planned']} "
                     f"| {r['wall_s']} | {r['child_ready_s']} | {r['suite_build_s']} | {r['tests_s']} "
                     f"| {r['ahead_s']} ({r['ahead_calls']}) | {r.get('ahead_processes')} ({r.get('ahead_warmed')}) "
                     f"| {r['compiles']} ({r['compile_s']}) | {r['autotune_runs']} ({r['autotune_s']}) "
                     f"| {r.get('host_memory_peak_gib')} | {_parts(r.get('test_parts'))} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", default=",".join(CANDIDATES), help=f"of: {', '.join(CANDIDATES)}")
    parser.add_argument("--modes", default="warm,oneshot")
    parser.add_argument("--kinds", default="correct,wrong")
    parser.add_argument("--device", default=None)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--suite-profile", action="store_true",
                        help="instead: where a fresh process's suite builds of these operators go")
    parser.add_argument("--child-profile", action="store_true",
                        help="warm evaluations run their tests under cProfile; their costliest calls are printed")
    parser.add_argument("--loop-profile", action="store_true",
                        help="instead: where the tests' time goes, the correct kernels run in this process")
    parser.add_argument("--torch-profile", action="store_true",
                        help="with --loop-profile: the second pass under torch's profiler (aten calls by device time)")
    parser.add_argument("--limit", type=int, default=None,
                        help="with --loop-profile: this many tests, spread over the suite")
    args = parser.parse_args()
    from bbagent.harness.evaluate import default_device
    device = args.device or default_device()
    names = [n for n in args.ops.split(",") if n]
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown:
        raise SystemExit(f"eval_cost: unknown operator {', '.join(unknown)}; choose from {', '.join(CANDIDATES)}")
    if args.suite_profile:
        suite_profile(names, device, sys.stdout)
        return 0
    if args.loop_profile:
        loop_profile(names, device, sys.stdout, args.limit, args.torch_profile)
        return 0
    modes, kinds = args.modes.split(","), args.kinds.split(",")
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bbagent-eval-cost-") as scratch:
        scratch = Path(scratch)
        for name in names:
            op, correct, wrong = CANDIDATES[name]
            specs = {"correct": correct, "wrong": wrong}
            for mode in modes:
                if mode == "warm":  # the fork server up and this operator seen once, as in a second round
                    first = scratch / f"{name}-warmup.py"
                    first.write_text(new_candidate(source_of(correct)))
                    evaluate_warm(op, first, device, args.timeout)
                for kind in kinds:
                    path = scratch / f"{name}-{kind}-{mode}.py"
                    path.write_text(new_candidate(source_of(specs[kind])))
                    if mode == "warm":
                        verdict, wall = evaluate_warm(op, path, device, args.timeout, args.child_profile)
                        if args.child_profile:
                            print(verdict["stderr_tail"])
                    else:
                        verdict, wall = evaluate_oneshot(op, path, device, args.timeout, scratch)
                    row = row_of(name, kind, mode, verdict, wall)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    if args.json:
                        args.json.write_text(json.dumps({"device": device, "rows": rows}, indent=1))
    gpu = device
    if device == "cuda":
        import torch
        gpu = f"cuda ({torch.cuda.get_device_name()}, torch {torch.__version__})"
    table = markdown(rows, gpu)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
