"""Timing a program's answer, in the sandbox child, on the GPU, after every draw passed: ``Model``
(eager PyTorch, the reference) and ``ModelNew`` on the problem's own inputs (``get_inputs()``), as
KernelBench times them, but the way ``harness.timing.phase`` times an operator: L2 flushed before
every call, the two interleaved rep by rep, both captured in CUDA graphs where both can be (else
both called eagerly), the clock checked against the host's. The reference gets inputs of its own
(drawn with another seed), so its results, in memory beside the answer's calls, answer nothing.

After timing, the answer's input tensors are refilled with signed values and it runs once more the
way it was timed, before the reference computes those values: it must follow them (an answer that
keeps results between calls, or a graph that captured no work, fails ``timing_mismatch``).

On request (``TimingRequest.profile``: generate's optimisation rounds, ``bench --profile``),
``profile_program`` then lists the GPU kernels of one call of each side, by the torch profiler.

The record keeps the program's roofline (``harness.timing.roofline``): the bytes its inputs and
outputs occupy, the least it must move, and its FLOPs, its operators' as the reference runs once more
after timing (``harness.timing.program_floor.counted_flops``), against the copy bandwidth and the
matmul throughput in the inputs' dtype; a reference that cannot be counted leaves the FLOPs out.
"""
from __future__ import annotations

from typing import Any

import torch

from bbagent.harness.checks.case import synchronize
from bbagent.harness.checks.program_compare import Float64Program, compare_outputs, inputs_dtype
from bbagent.harness.checks.program_compare import described as described_inputs
from bbagent.harness.inputs import clone_value, copy_into, tensors_in
from bbagent.harness.timing.clock import (ImplausibleTiming, graphed, l2_cache_bytes, overhead_dominated, timing_stats,
                                          time_interleaved)
from bbagent.harness.timing.phase import ATEN_SEED_OFFSET, RECHECK_SEED_OFFSET, implausible_call, timing_mismatch
from bbagent.harness.timing.profile import profile_sides
from bbagent.harness.timing.program_floor import counted_flops, products_dtype
from bbagent.harness.timing.roofline import timed_roofline

TIMED_ID = "given"  # the draw timed: the problem's own inputs


def described(inputs: list) -> str:
    """``get_inputs(): float32[16, 512], 3``: the timed input as the Verdict and the cache name it."""
    return "get_inputs(): " + described_inputs(inputs)


def time_program(reference, answer, inputs_of, request, gpu: str, device: dict, launches, watch) -> dict:
    """One timing record (``harness.verdict.TimedTest`` as data) of the answer against the reference
    on the problem's inputs; ``inputs_of(draw, seed_offset)`` gives fresh inputs on the device."""
    answer_in, eager_in = inputs_of("given", 0), inputs_of("given", ATEN_SEED_OFFSET)
    fns = {"aten": lambda: reference(*eager_in), "candidate": lambda: answer(*answer_in)}
    record: dict[str, Any] = {"id": TIMED_ID, "input": described(answer_in), "dtype": inputs_dtype(answer_in)}
    launched_before = launches.launches
    watch.light = True  # a scan per call would add host time to the timed calls
    try:
        with torch.no_grad():
            replays = graphed(fns)
            mode = "graph" if replays else "eager"
            timed = replays or fns
            try:
                samples = time_interleaved(timed, request.target_ms)
            except ImplausibleTiming as exc:
                return {**record, "error_kind": "implausible_timing", "message": f"while being timed: {exc}"}
            output = timed["candidate"]()
    finally:
        watch.light = False
        watch.scan()
    ran = watch.failure()
    if ran:
        return {**record, "error_kind": ran["error_kind"], "message": "while being timed: " + ran["message"]}
    eager, mine = timing_stats(samples["aten"]), timing_stats(samples["candidate"])
    written = sum(t.numel() * t.element_size() for t in tensors_in(output))
    moved = written + sum(t.numel() * t.element_size() for t in tensors_in(answer_in))
    del output
    empty = device["empty_graph_launch_ms" if mode == "graph" else "empty_launch_ms"]
    impossible = implausible_call(mine["median_ms"], empty, launches.launches > launched_before, written,
                                  l2_cache_bytes(), device["copy_gbs"])
    if impossible:
        return {**record, "error_kind": "implausible_timing", "message": "while being timed: " + impossible}
    record.update(_roofline(reference, eager_in, moved, device, mine, eager))
    record.update({"mode": mode, "aten": eager, "aten_source": "measured", "candidate": mine,
                   "candidate_raw": [round(x, 6) for x in samples["candidate"]],
                   "aten_raw": [round(x, 6) for x in samples["aten"]],
                   "speedup": eager["median_ms"] / mine["median_ms"], "bytes": moved,
                   "candidate_gbs": moved / (mine["median_ms"] * 1e-3) / 1e9,
                   "aten_gbs": moved / (eager["median_ms"] * 1e-3) / 1e9,
                   "overhead_dominated": overhead_dominated(min(eager["median_ms"], mine["median_ms"]), empty)})
    failure = _recheck(reference, timed, answer_in, eager_in, inputs_of)
    if failure is None:
        failure = watch.failure() or watch.judge_changes("after timing", deep=True)
        if failure:
            failure.pop("judge_changed", None)
    return {**record, **failure} if failure else record


def _roofline(reference, eager_in: list, moved: int, device: dict, mine: dict, eager: dict) -> dict:
    """The timing record's roofline fields (``TimedTest``), for the answer and for eager; none
    where the reference's FLOPs cannot be counted."""
    try:
        flops, _ = counted_flops(reference, eager_in)
    except Exception:  # noqa: BLE001 - a reference a dispatch mode cannot run keeps its timing, without a floor
        return {}
    matmul_tflops = (device.get("matmul_tflops") or {}).get(products_dtype(eager_in))
    return timed_roofline(flops, moved, device["copy_gbs"], matmul_tflops, mine["median_ms"], eager["median_ms"])


def _recheck(reference, timed: dict, answer_in: list, eager_in: list, inputs_of) -> dict | None:
    """Signed values in the same tensors, the answer first, each side run as it was timed."""
    fresh = inputs_of("signed", RECHECK_SEED_OFFSET)
    with torch.no_grad():
        copy_into(answer_in, fresh)
        actual = clone_value(timed["candidate"]())
        synchronize("cuda")
        copy_into(eager_in, fresh)
        expected = clone_value(timed["aten"]())
        failure = compare_outputs(expected, actual, Float64Program(reference, fresh))
    return None if failure is None else timing_mismatch("ModelNew", failure["message"])


def profile_program(reference, answer, inputs_of, workdir: str) -> tuple[list[str], dict]:
    """Trace files and GPU kernels per call (``harness.timing.profile.profile_sides``) of eager
    ``Model`` and of ``ModelNew``, each on inputs of its own."""
    eager_in, answer_in = inputs_of("given", ATEN_SEED_OFFSET), inputs_of("given", 0)
    with torch.no_grad():
        return profile_sides({"eager": lambda: reference(*eager_in), "kernel": lambda: answer(*answer_in)},
                             TIMED_ID, workdir)
