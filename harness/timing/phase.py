"""The timing phase of an evaluation, in the sandbox child, on the GPU only.

It runs after every test passed. The timed tests are the trace tests (real-model shapes),
at most ``max_cases`` of them spread from the smallest input to the largest. Per test:
fresh inputs for the candidate, and for eager aten inputs of the same shapes drawn with another
seed (aten's results, in memory beside the candidate's calls, answer nothing it is asked); both
are captured in CUDA graphs where both can be (``harness.timing.clock.graphed``: launch-bound
shapes then measure the kernel, not the Python around it), else both run eagerly; then
``time_interleaved``. An eager timing the parent already has for (GPU, torch, op, input, mode)
is not measured again (``harness.timing.reference_cache``); the candidate is then timed alone.

After timing, the same tensors are refilled with other values and each side runs once more
the way it was timed, the candidate first: it must give the right answer for the new values.
This catches kernels that keep results between calls (keyed by pointer, say) or stop computing
after the first few calls; a graph capture that recorded no work fails the same way.

A measurement the device cannot produce voids the timing (``implausible_timing``): yardsticks
beyond the device (a copy faster than its memory, an empty launch under half a microsecond), a
call that launched a kernel yet measured under half an empty launch, a result written faster
than memory takes it, events that add up to more time than the host saw pass. So do a launch on
another stream, a thread left running, or a judge that changed while it was timed
(``harness.checks.runtime``, ``harness.checks.integrity``).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from bbagent.harness.checks.float64_judge import Float64Run, judged
from bbagent.harness.inputs import clone_value, copy_into, spread, tensors_in
from bbagent.harness.ops import packet_name, value_mode
from bbagent.harness.suite.build import TestCase
from bbagent.harness.timing.clock import (ImplausibleTiming, copy_bandwidth_gbs, empty_launch_ms, graphed, l2_cache_bytes,
                                  matmul_tflops, overhead_dominated, timing_stats, time_interleaved)
from bbagent.harness.timing.roofline import flops_of, timed_roofline
from bbagent.harness.variants import is_written, out_arguments, schema_arguments

# Other seeds for the values copied in after timing, and for aten's timed inputs (any offsets that
# are not 0 and differ will do).
RECHECK_SEED_OFFSET = 7919
ATEN_SEED_OFFSET = 104729
# Physical limits (``implausible``): an empty launch measured by CUDA events takes microseconds on
# any GPU; a kernel's call cannot take under half of one; writes past the L2 cache cannot reach
# memory at more than twice the measured copy bandwidth (a copy moves its bytes twice, and reaches
# most of the device's peak); no memory on a GPU today moves 20 TB/s.
MIN_EMPTY_LAUNCH_MS = 5e-4
LAUNCH_FLOOR_SHARE = 0.5
WRITE_CEILING_OF_COPY = 2.0
COPY_CEILING_GBS = 20_000.0


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
    autotune_s: float = 0.0  # a Helion kernel's tuning budget, spent before the timed calls (harness.helion_configs)


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
    """The least memory traffic the op can have (``traffic``)."""
    return traffic(op, args, kwargs, result)[0]


def traffic(op, args: tuple, kwargs: dict, result) -> tuple[int, int]:
    """(bytes moved, bytes written) at least: every input read once (an ``out=`` argument is only
    written), every result and written argument written once; a result that is one of the inputs
    as it is (a view) writes nothing."""
    reads, written = {}, {}
    outs = set(out_arguments(op))
    for name, schema_arg, value in schema_arguments(op, args, kwargs):
        for t in tensors_in(value):
            if name not in outs:
                reads[_identity(t)] = t
            if name in outs or is_written(schema_arg):
                written[_identity(t)] = t
    results = {_identity(t): t for t in tensors_in(result)}
    writes = {**written, **results}
    written.update({key: t for key, t in results.items() if key not in reads})

    def total(tensors: dict) -> int:
        return sum(distinct_bytes(t) for t in tensors.values())
    return total(reads) + total(writes), total(written)


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


def peak_memory_gbs() -> float | None:
    """The device's memory bandwidth from its clock and bus width, where torch reports them."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    clock_khz, bus_bits = getattr(props, "memory_clock_rate", None), getattr(props, "memory_bus_width", None)
    if not clock_khz or not bus_bits:
        return None
    return 2 * clock_khz * 1e3 * bus_bits / 8 / 1e9  # double data rate


def implausible_device(stats: dict, peak_gbs: float | None) -> str | None:
    """Why the device's yardsticks cannot be right, or None."""
    for name in ("empty_launch_ms", "empty_graph_launch_ms"):
        if stats.get(name) is not None and stats[name] < MIN_EMPTY_LAUNCH_MS:
            return f"an empty Triton launch measured {stats[name] * 1e3:.3f} us ({name}), which no GPU can do"
    ceiling = min(COPY_CEILING_GBS, 1.3 * peak_gbs) if peak_gbs else COPY_CEILING_GBS
    if stats.get("copy_gbs") is not None and stats["copy_gbs"] > ceiling:
        return (f"a device-to-device copy measured {stats['copy_gbs']:.0f} GB/s, beyond this device's memory "
                f"({'peak ' + format(peak_gbs, '.0f') + ' GB/s' if peak_gbs else 'no GPU moves 20 TB/s'})")
    return None


def implausible_call(median_ms: float, empty_ms: float, launched: bool, written: int, l2_bytes: int,
                     copy_gbs: float) -> str | None:
    """Why a call's measured time cannot be right, or None (module docstring)."""
    if launched and median_ms < LAUNCH_FLOOR_SHARE * empty_ms:
        return (f"the kernel's call measured {median_ms * 1e3:.2f} us, under half an empty Triton launch measured the "
                f"same way ({empty_ms * 1e3:.2f} us)")
    beyond_cache = written - l2_bytes
    if beyond_cache > 0 and median_ms > 0 and beyond_cache / (median_ms * 1e-3) / 1e9 > WRITE_CEILING_OF_COPY * copy_gbs:
        return (f"the call wrote {written / 1e6:.1f} MB in {median_ms * 1e3:.2f} us: "
                f"{beyond_cache / (median_ms * 1e-3) / 1e9:.0f} GB/s past the L2 cache, over twice the device's "
                f"copy bandwidth ({copy_gbs:.0f} GB/s)")
    return None


def shape_roofline(op, args: tuple, kwargs: dict, result, dtype: str, bytes_moved: int, device: dict) -> dict:
    """FLOPs of one call and the ceilings that apply (``harness.timing.roofline``), for its dtype."""
    name = packet_name(op)
    transposed = bool(args[6]) if name in ("convolution", "_convolution") and len(args) > 6 else False
    shapes = [tuple(t.shape) for t in tensors_in((args, kwargs))]
    flops = flops_of(name, shapes, [tuple(t.shape) for t in tensors_in(result)], transposed)
    return {"flops": flops, "bytes": bytes_moved, "copy_gbs": device["copy_gbs"],
            "matmul_tflops": (device.get("matmul_tflops") or {}).get(dtype)}


def time_case(op, case: TestCase, kernel, request: TimingRequest, gpu: str, device: dict, recorder,
              watch=None) -> dict:
    """Time eager aten and the candidate on one trace input; then recheck the candidate. ``watch``
    (``harness.checks.runtime.CallWatch``) sees what the calls did besides return."""
    cand_in = case.inputs()
    ref_in = replace(case, seed=case.seed + ATEN_SEED_OFFSET).inputs()
    fns = {"aten": lambda: op(*ref_in[0], **ref_in[1]), "candidate": lambda: kernel(*cand_in[0], **cand_in[1])}
    launches = recorder.launches
    launched_before = launches.launches
    if watch is not None:
        watch.light = True  # a scan per call would add host time to the timed calls: once per test instead
    try:
        replays = graphed(fns)
        mode = "graph" if replays else "eager"
        timed = replays or fns
        cached = next((row["timing"] for row in request.reference
                       if row["gpu"] == gpu and row["mode"] == mode and row["input"] == case.description), None)
        try:
            samples = time_interleaved({"candidate": timed["candidate"]} if cached else timed, request.target_ms)
        except ImplausibleTiming as exc:
            return void_record(case, "implausible_timing", str(exc))
        output = timed["candidate"]()
    finally:
        if watch is not None:
            watch.light = False
            watch.scan()
    launched = launches.launches > launched_before
    ran = watch.failure() if watch is not None else None
    if ran:
        return void_record(case, ran["error_kind"], ran["message"])
    aten = cached or timing_stats(samples["aten"])
    candidate = timing_stats(samples["candidate"])
    moved, written = traffic(op, *cand_in, output)
    roof = shape_roofline(op, *cand_in, output, case.dtype, moved, device)
    del output
    empty = device["empty_graph_launch_ms" if mode == "graph" else "empty_launch_ms"]
    impossible = implausible_call(candidate["median_ms"], empty, launched, written, l2_cache_bytes(), device["copy_gbs"])
    if impossible:
        return void_record(case, "implausible_timing", impossible)
    result = {"id": case.id, "input": case.description, "dtype": case.dtype, "mode": mode,
              "aten": aten, "aten_source": "cache" if cached else "measured", "candidate": candidate,
              "candidate_raw": [round(x, 6) for x in samples["candidate"]],
              "aten_raw": None if cached else [round(x, 6) for x in samples["aten"]],
              "speedup": aten["median_ms"] / candidate["median_ms"],
              "bytes": moved, "candidate_gbs": moved / (candidate["median_ms"] * 1e-3) / 1e9,
              "aten_gbs": moved / (aten["median_ms"] * 1e-3) / 1e9,
              "overhead_dominated": overhead_dominated(min(aten["median_ms"], candidate["median_ms"]), empty),
              **timed_roofline(roof["flops"], moved, roof["copy_gbs"], roof["matmul_tflops"], candidate["median_ms"],
                               aten["median_ms"])}
    failure = recheck(op, case, timed, ref_in, cand_in, recorder)
    if failure is None and watch is not None:
        failure = watch.failure() or watch.judge_changes(f"after timing test {case.id}", deep=True)
    if failure:
        failure.pop("judge_changed", None)
        result.update(failure)
    return result


def void_record(case: TestCase, error_kind: str, message: str) -> dict:
    """A timing record that voids the timing (no numbers kept)."""
    return {"id": case.id, "input": case.description, "error_kind": error_kind, "message": "while being timed: " + message}


def recheck(op, case: TestCase, timed: dict, ref_in, cand_in, recorder) -> dict | None:
    """Other values in the same tensors, each side run as it was timed, the candidate first (so
    that aten's result for these values does not exist yet): the candidate's answer must follow (a
    random op's values cannot be compared one by one; not rechecked)."""
    mode = value_mode(op)
    if mode != "exact":
        return None
    fresh = replace(case, seed=case.seed + RECHECK_SEED_OFFSET).inputs()
    copy_into(cand_in, fresh)
    with recorder:
        actual = clone_value(timed["candidate"]())
    if actual is not None and any(t.is_cuda for t in tensors_in(actual)):
        torch.cuda.synchronize()
    copy_into(ref_in, fresh)
    expected = clone_value(timed["aten"]())
    if recorder.findings:
        return {"error_kind": "guard", "message": "while being timed: " + recorder.findings[0]["message"]}
    failure = judged(expected, actual, mode, Float64Run(op, fresh))
    return None if failure is None else timing_mismatch("the kernel", failure["message"])


def timing_mismatch(who: str, message: str) -> dict:
    """The failure of ``who`` (the kernel, ModelNew) whose result after timing did not follow new values."""
    return {"error_kind": "timing_mismatch",
            "message": f"after timing, the inputs were refilled with new values (same tensors) and {who} was run "
                       "once more the way it was timed: its result was wrong. It must compute every call from its "
                       "inputs (no results kept between calls). " + message}
