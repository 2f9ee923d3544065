"""The inductor baseline's child (``harness.timing.baselines`` says why it is a child of its own):
no candidate is imported here, so nothing is sealed; it runs on the GPU only.

Per shape asked for: fresh inputs, one clone for eager aten and one for the compiled op; the op is
compiled anew (``torch._dynamo.reset()`` first, so no shape runs into dynamo's recompile limit and
falls back to eager unseen) and called once, which compiles it; then both are timed interleaved by
``harness.timing.clock``, as CUDA-graph replays where the kernel was timed that way, else as
eager calls. Compile workers are kept in this process (``compile_threads = 1``): the watchdog
counts a sandbox child's processes.
"""
from __future__ import annotations

import time

from bbagent.harness.checks.case import exception_line
from bbagent.harness.checks.float64_judge import Float64Run, judged
from bbagent.harness.checks.program_compare import Float64Program, compare_outputs
from bbagent.harness.events import Baseline, BaselineStart, ChildEnvironment, Done
from bbagent.harness.inputs import clone_value
from bbagent.harness.ops import value_mode
from bbagent.harness.problem import OperatorProblem, ProgramProblem, given_inputs, program_module, reference_model
from bbagent.harness.suite.build import build_suite
from bbagent.harness.timing.baselines import INDUCTOR_MODES, cache_mode
from bbagent.harness.timing.clock import graphed, timing_stats, time_interleaved
from bbagent.harness.timing.phase import ATEN_SEED_OFFSET
from bbagent.harness.timing.profile import profile_sides
from bbagent.harness.timing.program_timing import described


def _calling(op):
    def call(*args, **kwargs):
        return op(*args, **kwargs)
    return call


def differs_from_eager(op, inputs: tuple[tuple, dict], actual) -> str | None:
    """How the compiled op's first result differs from eager aten's on the same inputs, judged by
    the rules a kernel is judged by (``harness.checks``); None when it agrees, or when the op's
    values are random (not compared one by one). A baseline that computes something else is not
    one."""
    mode = value_mode(op)
    if mode != "exact":
        return None
    fresh = clone_value(inputs)
    expected = op(*fresh[0], **fresh[1])
    failure = judged(expected, actual, mode, Float64Run(op, inputs))
    return failure["message"][:300] if failure else None


def time_compiled(op, case, timing_mode: str, compile_mode: str, target_ms: float) -> dict:
    """One shape: inductor's timing (and eager's, measured alongside) or why there is none."""
    import torch
    result = {"input": case.description, "mode": cache_mode(compile_mode, timing_mode)}
    args, kwargs = case.inputs()
    ref_in, ind_in, check_in = (clone_value((args, kwargs)) for _ in range(3))
    del args, kwargs
    torch._dynamo.reset()
    compiled = torch.compile(_calling(op), mode=INDUCTOR_MODES[compile_mode], dynamic=False, fullgraph=True)
    fns = {"aten": lambda: op(*ref_in[0], **ref_in[1]), "inductor": lambda: compiled(*ind_in[0], **ind_in[1])}
    first, failed = _first_call(fns["inductor"], result)
    if failed:
        return failed
    wrong = differs_from_eager(op, check_in, first)
    if wrong:
        return {**result, "error": f"inductor's result differs from eager aten's: {wrong}"}
    del first, check_in
    return _beside_eager(fns, result, timing_mode, target_ms, "inductor's compiled code could not be captured in a "
                                                              "CUDA graph, as the kernel and eager were on this shape")


def _first_call(compiled, result: dict):
    """(the compiled function's first result, None), its compile time in ``result``; or (None, the
    record saying why torch.compile failed): inductor's failure is reported, never a speedup of 1.0."""
    import torch
    started = time.perf_counter()
    try:
        first = compiled()
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - said in the record
        return None, {**result, "error": f"torch.compile failed: {exception_line(exc)}"}
    result["compile_s"] = round(time.perf_counter() - started, 3)
    return first, None


def _beside_eager(fns: dict, result: dict, timing_mode: str, target_ms: float, uncapturable: str) -> dict:
    """``result`` with inductor's timing and eager's over it, ``fns`` ("aten", "inductor") timed
    interleaved as CUDA-graph replays (``timing_mode`` graph) or eager calls."""
    timed = graphed(fns) if timing_mode == "graph" else fns
    if timed is None:
        return {**result, "error": uncapturable}
    samples = time_interleaved(timed, target_ms)
    inductor, eager = timing_stats(samples["inductor"]), timing_stats(samples["aten"])
    return {**result, "timing": inductor, "raw": [round(x, 6) for x in samples["inductor"]],
            "eager_over_inductor": eager["median_ms"] / inductor["median_ms"]}


def time_compiled_program(model, inputs_of, timing_mode: str, compile_mode: str, target_ms: float) -> dict:
    """A program's inductor timing on its own inputs (and eager's, alongside), or why there is none:
    ``model`` compiled whole (graph breaks allowed: the program is the user's), checked against eager
    by the program comparison, then timed as the answer was (CUDA-graph replays or eager calls), and
    its GPU kernels per call listed by the torch profiler (``launches``: what the answer is to beat)."""
    import torch
    result: dict[str, object] = {"mode": cache_mode(compile_mode, timing_mode)}
    eager_in, compiled_in = inputs_of(ATEN_SEED_OFFSET), inputs_of(0)
    torch._dynamo.reset()
    compiled = torch.compile(model, mode=INDUCTOR_MODES[compile_mode], dynamic=False)
    fns = {"aten": lambda: model(*eager_in), "inductor": lambda: compiled(*compiled_in)}
    with torch.no_grad():
        first, failed = _first_call(fns["inductor"], result)
        if failed:
            return failed
        wrong = compare_outputs(model(*compiled_in), first, Float64Program(model, compiled_in))
        if wrong:
            return {**result, "error": f"inductor's result differs from eager's: {wrong['message'][:300]}"}
        del first
        result = _beside_eager(fns, result, timing_mode, target_ms, "inductor's compiled program could not be "
                                                                    "captured in a CUDA graph, as the answer and eager were")
        if "error" not in result:
            result["launches"] = _kernels_of(fns["inductor"])
        return result


def _kernels_of(call) -> list[dict] | None:
    """The GPU kernels of one call of ``call`` (``harness.timing.profile.launches_per_call``); None
    where the profiler could not list them (the list is feedback: the timing is kept without it)."""
    try:
        return profile_sides({"inductor": call}, "inductor", None)[1]["inductor"]
    except Exception:  # noqa: BLE001 - see the docstring
        return None


def _program_baselines(job, send) -> None:
    """A program's baseline: its ``Model`` built from the seed as the answer's child built it, timed
    compiled on the problem's own inputs (the one shape a program's answer is timed on); a shape
    with no input named is those inputs, measured ahead of any answer, and one ``cached`` (GPU,
    input, mode) already is skipped."""
    import torch
    module = program_module(ProgramProblem.from_wire(job.problem))
    model = reference_model(module, job.seed, "cuda")

    def inputs_of(offset: int) -> list:
        return given_inputs(module, job.seed + offset, "cuda")
    asked = job.work  # a harness.sandbox.job.CompiledBaseline: the child runs this for no other work
    cached = [list(row) for row in asked.cached]
    for shape in asked.shapes:
        found = described(inputs_of(0))
        timed = shape["input"] or found  # None: ahead of any answer (harness.after_tests.program_baseline_ahead)
        send(BaselineStart(input=timed))
        mode = cache_mode(asked.compile_mode, shape["mode"])
        if [torch.cuda.get_device_name(), found, mode] in cached:
            send(Baseline(record={"input": found, "mode": mode, "cached": True}))
            continue
        if found != timed:
            record = {"error": f"the program's inputs here are {found}, not the timed {timed}"}
        else:
            try:
                record = time_compiled_program(model, inputs_of, shape["mode"], asked.compile_mode,
                                               asked.target_ms)
            except Exception as exc:  # noqa: BLE001 - e.g. the compiled code raised while being timed
                record = {"error": f"inductor failed while being timed: {exception_line(exc)}"}
        send(Baseline(record={"input": timed, "mode": mode, **record}))
        torch.cuda.empty_cache()


def start_baseline_job(send) -> None:
    """What every baseline child does first: inductor compiles on one thread, the GPU is touched and
    the child says where it runs."""
    import torch
    from torch._inductor import config
    config.compile_threads = 1
    torch.zeros(1, device="cuda")
    send(ChildEnvironment(device="cuda", interpreter=False, gpu=torch.cuda.get_device_name(), torch=torch.__version__))


def program_baselines(job, send) -> int:
    """``start_baseline_job``, then the program's baselines (``_program_baselines``)."""
    start_baseline_job(send)
    _program_baselines(job, send)
    send(Done(total_s=0))
    return 0


def operator_baselines(job, send) -> int:
    """Build the op's suite as the candidate's child did (same seed, same inputs), then time each
    asked-for shape (``job.work.shapes``: input description and timing mode)."""
    import torch
    start_baseline_job(send)
    op = OperatorProblem.from_wire(job.problem).computation
    suite = build_suite(op, "cuda", job.seed, interpreter=False, cpu_max_numel=job.cpu_max_numel,
                        extra_traces=job.extra_traces, channels_last=job.channels_last)
    by_input = {case.description: case for case in suite.cases if case.trace is not None}
    asked = job.work  # a harness.sandbox.job.CompiledBaseline: the child runs this for no other work
    for shape in asked.shapes:
        case = by_input.get(shape["input"])
        send(BaselineStart(input=shape["input"]))
        if case is None:
            send(Baseline(record={"input": shape["input"], "mode": cache_mode(asked.compile_mode, shape["mode"]),
                                  "error": "this input is not among the op's trace tests in this child"}))
            continue
        try:
            send(Baseline(record=time_compiled(op, case, shape["mode"], asked.compile_mode, asked.target_ms)))
        except Exception as exc:  # noqa: BLE001 - e.g. the compiled code raised while being timed
            send(Baseline(record={"input": shape["input"], "mode": cache_mode(asked.compile_mode, shape["mode"]),
                                  "error": f"inductor failed while being timed: {exception_line(exc)}"}))
        torch.cuda.empty_cache()
    send(Done(total_s=0))
    return 0
