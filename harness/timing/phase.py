"""The timing phase of an evaluation, in the sandbox child, on the GPU only.

It runs after every test passed. The timed tests are the trace tests (real-model shapes),
at most ``max_cases`` of them spread from the smallest input to the largest. Per test:
fresh inputs, one clone for eager aten and one for the candidate; both are captured in
CUDA graphs where both can be (``harness.timing.clock.graphed``: launch-bound shapes then measure
the kernel, not the Python around it), else both run eagerly; then ``time_interleaved``.
An eager timing the parent already has for (GPU, torch, op, input, mode) is not measured again
(``harness.timing.reference_cache``); the candidate is then timed alone.

After timing, the same tensors are refilled with other values and each side runs once more
the way it was timed: the candidate must give the right answer for the new values. This
catches kernels that keep results between calls (keyed by pointer, say) or stop computing
after the first few calls; a graph capture that recorded no work fails the same way.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from harness.inputs import clone_value, memory_behind, spread, tensors_in
from harness.ops import value_mode
from harness.checks.case import Float64Run, judged
from harness.suite.build import TestCase
from harness.timing.clock import (copy_bandwidth_gbs, empty_launch_ms, graphed, matmul_tflops, overhead_dominated,
                                  summarize, time_interleaved)
from harness.timing.roofline import flops_of, roofline
from harness.variants import is_written, out_arguments, schema_arguments

# Another seed for the values copied in after timing (any offset that is not 0 will do).
RECHECK_SEED_OFFSET = 7919


@dataclass
class TimingRequest:
    """What the parent asks for: ``reference`` and ``device`` are what it already has cached
    (``harness.timing.reference_cache``), as lists of rows for any GPU; the child uses its own GPU's."""
    target_ms: float = 25.0
    max_cases: int = 24
    reference: list[dict] = field(default_factory=list)  # {"gpu", "mode", "input", "timing"}
    device: list[dict] = field(default_factory=list)     # {"gpu", "triton", "stats"}
    profile: int = 0  # profile this many timed shapes (harness.timing.profile) ...
    pick: str = "largest"  # ... the largest, or those "furthest" from their roofline (harness.timing.profile.pick)


def timed_cases(cases: list[TestCase], passed: set[str], most: int) -> list[TestCase]:
    """The passed trace tests, one per distinct input, ``most`` of them: a dataset's timed inputs
    first (the shapes the user asked about), the rest spread evenly by size (so the smallest and
    the largest shapes are both timed). Inputs without elements are left out: nothing to time."""
    sized = {}
    for case in cases:
        if case.trace is not None and case.timed and case.id in passed and case.description not in sized:
            sized[case.description] = (case.largest_tensor(), case.id, case)
    ordered = [case for size, _, case in sorted(sized.values(), key=lambda s: s[:2]) if size > 0]
    asked = [case for case in ordered if case.source.startswith("dataset")][:most]
    others = [case for case in ordered if not case.source.startswith("dataset")]
    chosen = {id(case) for case in asked}
    chosen |= {id(others[i]) for i in spread(len(others), most - len(asked))}
    return [case for case in ordered if id(case) in chosen]


def distinct_bytes(t: torch.Tensor) -> int:
    """Bytes of the distinct elements a view addresses (a broadcast, stride-0 dim adds none)."""
    count = 1
    for size, stride in zip(t.shape, t.stride()):
        count *= size if stride != 0 or size == 0 else 1
    return count * t.element_size()


def bytes_moved(op, args: tuple, kwargs: dict, result) -> int:
    """The least memory traffic the op can have: every input read once (an ``out=`` argument
    is only written), every result and written argument written once."""
    reads, writes = {}, {}
    outs = set(out_arguments(op))
    for name, schema_arg, value in schema_arguments(op, args, kwargs):
        write_only = name in outs
        for t in tensors_in(value):
            (writes if write_only else reads)[_identity(t)] = t
            if is_written(schema_arg):
                writes[_identity(t)] = t
    for t in tensors_in(result):
        writes[_identity(t)] = t
    return sum(distinct_bytes(t) for t in list(reads.values()) + list(writes.values()))


def _identity(t: torch.Tensor) -> tuple:
    return (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype)


def device_stats(gpu: str, cached: list[dict]) -> tuple[dict, bool]:
    """(empty launch eager and graphed, copy bandwidth) for this GPU; True when measured now."""
    import triton
    for row in cached:  # a row from before the matmul yardstick is measured again
        if row["gpu"] == gpu and row["triton"] == triton.__version__ and "matmul_tflops" in row["stats"]:
            return row["stats"], False
    return {"empty_launch_ms": empty_launch_ms(), "empty_graph_launch_ms": empty_launch_ms(graph=True),
            "copy_gbs": copy_bandwidth_gbs(), "matmul_tflops": matmul_tflops()}, True


def shape_roofline(op, args: tuple, kwargs: dict, result, dtype: str, bytes_moved: int, device: dict) -> dict:
    """FLOPs of one call and the ceilings that apply (``harness.timing.roofline``), for its dtype."""
    from harness.ops import packet_name
    name = packet_name(op)
    transposed = bool(args[6]) if name in ("convolution", "_convolution") and len(args) > 6 else False
    shapes = [tuple(t.shape) for t in tensors_in((args, kwargs))]
    flops = flops_of(name, shapes, [tuple(t.shape) for t in tensors_in(result)], transposed)
    return {"flops": flops, "bytes": bytes_moved, "copy_gbs": device["copy_gbs"],
            "matmul_tflops": (device.get("matmul_tflops") or {}).get(dtype)}


def _copy_into(destination, source) -> None:
    for dst, src in zip(tensors_in(destination), tensors_in(source)):
        memory_behind(dst).copy_(memory_behind(src))


def time_case(op, case: TestCase, kernel, request: TimingRequest, gpu: str, device: dict, recorder) -> dict:
    """Time eager aten and the candidate on one trace input; then recheck the candidate."""
    args, kwargs = case.inputs()
    ref_in, cand_in = clone_value((args, kwargs)), clone_value((args, kwargs))
    del args, kwargs
    fns = {"aten": lambda: op(*ref_in[0], **ref_in[1]), "candidate": lambda: kernel(*cand_in[0], **cand_in[1])}
    replays = graphed(fns)
    mode = "graph" if replays else "eager"
    timed = replays or fns
    cached = next((row["timing"] for row in request.reference
                   if row["gpu"] == gpu and row["mode"] == mode and row["input"] == case.description), None)
    samples = time_interleaved({"candidate": timed["candidate"]} if cached else timed, request.target_ms)
    aten = cached or summarize(samples["aten"])
    candidate = summarize(samples["candidate"])
    output = timed["candidate"]()
    moved = bytes_moved(op, *cand_in, output)
    roof = shape_roofline(op, *cand_in, output, case.dtype, moved, device)
    del output
    empty = device["empty_graph_launch_ms" if mode == "graph" else "empty_launch_ms"]
    ceilings = (roof["flops"], moved, roof["copy_gbs"], roof["matmul_tflops"])
    mine, eager = roofline(*ceilings[:2], candidate["median_ms"] * 1e-3, *ceilings[2:]), \
        roofline(*ceilings[:2], aten["median_ms"] * 1e-3, *ceilings[2:])
    result = {"id": case.id, "input": case.description, "dtype": case.dtype, "mode": mode,
              "aten": aten, "aten_source": "cache" if cached else "measured", "candidate": candidate,
              "candidate_raw": [round(x, 6) for x in samples["candidate"]],
              "aten_raw": None if cached else [round(x, 6) for x in samples["aten"]],
              "speedup": aten["median_ms"] / candidate["median_ms"],
              "bytes": moved, "candidate_gbs": moved / (candidate["median_ms"] * 1e-3) / 1e9,
              "aten_gbs": moved / (aten["median_ms"] * 1e-3) / 1e9,
              "overhead_dominated": overhead_dominated(min(aten["median_ms"], candidate["median_ms"]), empty),
              "flops": mine["flops"], "bound": mine["bound"], "floor_ms": mine["floor_ms"],
              "roof_fraction": mine["roof_fraction"], "aten_roof_fraction": eager["roof_fraction"],
              "candidate_tflops": mine["achieved_tflops"]}
    failure = recheck(op, case, timed, ref_in, cand_in, recorder)
    if failure:
        result.update(failure)
    return result


def recheck(op, case: TestCase, timed: dict, ref_in, cand_in, recorder) -> dict | None:
    """Other values in the same tensors, each side run as it was timed: the candidate's
    answer must follow (a random op's values cannot be compared one by one; not rechecked)."""
    mode = value_mode(op)
    if mode != "exact":
        return None
    fresh = replace(case, seed=case.seed + RECHECK_SEED_OFFSET).inputs()
    _copy_into(ref_in, fresh)
    _copy_into(cand_in, fresh)
    expected = clone_value(timed["aten"]())
    with recorder:
        actual = clone_value(timed["candidate"]())
    if actual is not None and any(t.is_cuda for t in tensors_in(actual)):
        torch.cuda.synchronize()
    if recorder.findings:
        return {"error_kind": "guard", "message": "while being timed: " + recorder.findings[0]["message"]}
    failure = judged(expected, actual, mode, Float64Run(op, fresh))
    if failure is None:
        return None
    return {"error_kind": "timing_mismatch",
            "message": "after timing, the inputs were refilled with new values (same tensors) and the kernel "
                       "was run once more the way it was timed: its result was wrong. A kernel must compute "
                       "every call from its inputs (no results kept between calls). " + failure["message"]}
