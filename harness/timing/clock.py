"""GPU timing the way a kernel engineer would do it by hand.

Every repetition of every function: flush the L2 cache (write a buffer >= twice its size), record a
CUDA event, call, record another event, on one stream. The functions being compared (eager aten
and a candidate) run in alternation, rep by rep, in an order that flips each rep, so clock
boost, thermal drift and other load hit them alike. Each function is warmed up first (compiles,
autotuning, allocator) and the number of repetitions is chosen from a first estimate so that
each function gets about ``target_ms`` of GPU time, its flushes included. Results are per-repetition
milliseconds; ``timing_stats`` gives median, mean, std and quantiles. ``graphed`` turns the
functions into CUDA-graph replays, which leave out the host's launch cost (an empty Triton
launch measured 3.8 us on an H200; a wrapper that allocates and reshapes costs more), so small
shapes measure the kernel rather than the Python that launches it.

Nothing here runs on the CPU: interpreter timings say nothing about a GPU and are never
reported as performance (``TimingUnavailable``).

The candidate runs in this process, so the clock is checked as well as used: what it calls is
verified unchanged by the sandbox (``harness.checks.integrity``), and the events must agree with
the host's own clock (taken when this module was imported, before any candidate): intervals that
add up to more time than passed on the host are ``ImplausibleTiming``, never a result.
"""
from __future__ import annotations

import functools
import statistics
import time
from typing import Callable

import torch
import triton

from bbagent.harness.checks.compare import same_tensors

MIN_REPS, MAX_REPS = 10, 2000
WARMUP_CALLS = 3
# A test whose time is within this factor of an empty Triton launch measures launch overhead.
OVERHEAD_FACTOR = 1.3


HOST_CLOCK = time.perf_counter  # taken before any candidate is imported
# the events' intervals may exceed the host's elapsed time by this much (rounding, clock domains)
EVENT_SLACK_FACTOR, EVENT_SLACK_MS = 1.02, 0.5


class TimingUnavailable(RuntimeError):
    """Timing was asked for where there is no CUDA device."""


class ImplausibleTiming(RuntimeError):
    """A measurement the device cannot produce: the timing is void (the message says why)."""


def _require_cuda() -> None:
    if not torch.cuda.is_available():
        raise TimingUnavailable("timing needs a CUDA GPU; on the CPU (Triton interpreter) only "
                                "correctness is checked")


def l2_cache_bytes(device: torch.device | str | None = None) -> int:
    """The device's L2 cache (64 MiB where torch does not say)."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device() if device is None else device)
    return getattr(props, "L2_cache_size", 0) or (64 << 20)


class L2Flusher:
    """Writes a buffer of at least twice the L2 cache (and 256 MiB, as do_bench does), so no input
    is still cached. Its size matters a second way: the GPU is busy with it while the host
    records the start event and launches the call; a short flush lets the GPU go idle waiting
    for the launch, and the host's launch cost lands inside the measurement."""

    def __init__(self, device: torch.device | str = "cuda"):
        _require_cuda()
        self.buffer = torch.empty(max(2 * l2_cache_bytes(device), 256 << 20) // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        self.buffer.zero_()


def _events(count: int) -> list[tuple[torch.cuda.Event, torch.cuda.Event]]:
    """Created before timing starts: creating them between flush and call costs host time."""
    return [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(count)]


def _time_once(fn: Callable[[], object], flush: L2Flusher,
               pair: tuple[torch.cuda.Event, torch.cuda.Event]) -> None:
    flush()
    start, end = pair
    start.record()
    fn()
    end.record()


def choose_reps(fns: dict[str, Callable[[], object]], flush: L2Flusher, target_ms: float) -> int:
    """Repetitions so the slowest function gets about ``target_ms`` of GPU time, the flush before
    each of its calls included. The flush writes 256 MiB (about 0.1 ms on an H100), more than a
    small kernel takes: counted, it keeps a small shape's timing near ``target_ms`` per function
    (a few hundred repetitions) instead of MAX_REPS flushes, while the GPU sits exclusively with
    this evaluation and every other one sharing it waits."""
    flushes = _events(WARMUP_CALLS)
    for start, end in flushes:
        start.record()
        flush()
        end.record()
    estimates = []
    for fn in fns.values():
        pairs = _events(WARMUP_CALLS)
        for pair in pairs:
            _time_once(fn, flush, pair)
        torch.cuda.synchronize()
        estimates.append(min(s.elapsed_time(e) for s, e in pairs))
    flush_ms = min(s.elapsed_time(e) for s, e in flushes)
    slowest = max(max(estimates), 1e-3)
    return int(min(MAX_REPS, max(MIN_REPS, target_ms / (slowest + flush_ms))))


def as_graph(fn: Callable[[], object]) -> Callable[[], object] | None:
    """``fn`` captured in a CUDA graph, as a function that replays it and returns the captured
    output (refreshed in place by the replay); None where it cannot be captured (host
    synchronisation, CPU work that must rerun). Replay leaves out the host's launch cost,
    which otherwise dominates small shapes."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()  # warm-up on the capturing stream, as CUDA graphs require
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = fn()
        graph.replay()
        direct = fn()
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - a call that cannot be captured is timed without a graph
        torch.cuda.synchronize()
        _reset_random_generators()
        return None
    # A capture can succeed with an empty graph (work done off the capturing stream, or on the
    # host); its replay would time as nothing. Trust it only if it recomputes what a direct call does.
    if not same_tensors(captured, direct):
        return None

    def replay():
        graph.replay()
        return captured
    return replay


def _reset_random_generators() -> None:
    """A capture that failed half-way (a host synchronisation inside it: a seed read with
    ``int(torch.randint(...))``) leaves the CUDA generators believing a capture is under way, and
    every random op after it raises "Offset increment outside graph capture"
    (``benchmarks/graph_capture_probe.py``). Each default generator gets a fresh copy of its own
    seed and offset, which carries no capture."""
    for generator in torch.cuda.default_generators:
        if hasattr(generator, "graphsafe_set_state"):
            generator.graphsafe_set_state(generator.clone_state())


def graphed(fns: dict[str, Callable[[], object]]) -> dict[str, Callable[[], object]] | None:
    """Every function as a CUDA-graph replay, or None when any cannot be captured (so that
    the functions compared are always timed alike)."""
    _require_cuda()
    replays = {name: as_graph(fn) for name, fn in fns.items()}
    if any(replay is None for replay in replays.values()):
        return None
    return {name: replay for name, replay in replays.items() if replay is not None}


def time_interleaved(fns: dict[str, Callable[[], object]], target_ms: float = 100.0,
                     reps: int | None = None) -> dict[str, list[float]]:
    """Per-repetition milliseconds of each function, measured in alternation."""
    _require_cuda()
    flush = L2Flusher()
    for fn in fns.values():  # warm-up: compilation, autotuning, allocator
        fn()
    torch.cuda.synchronize()
    reps = reps or choose_reps(fns, flush, target_ms)
    names = list(fns)
    events = {name: _events(reps) for name in names}
    started = HOST_CLOCK()
    for rep in range(reps):
        for name in (names if rep % 2 == 0 else names[::-1]):
            _time_once(fns[name], flush, events[name][rep])
    torch.cuda.synchronize()
    host_ms = (HOST_CLOCK() - started) * 1e3
    samples = {name: [s.elapsed_time(e) for s, e in pairs] for name, pairs in events.items()}
    impossible = events_beyond_host(sum(sum(times) for times in samples.values()), host_ms, reps)
    if impossible:
        raise ImplausibleTiming(impossible)
    return samples


def events_beyond_host(measured_ms: float, host_ms: float, reps: int) -> str | None:
    """Why intervals measured one after another on one stream, adding up to ``measured_ms``, cannot
    fit in the ``host_ms`` the host saw pass around them (the host waited for the last), or None."""
    if measured_ms <= host_ms * EVENT_SLACK_FACTOR + EVENT_SLACK_MS:
        return None
    return (f"the CUDA events measured {measured_ms:.3f} ms in all over {reps} repetitions, but only {host_ms:.3f} ms "
            "passed on the host's clock: the events or the clock were tampered with")


def timing_stats(samples: list[float]) -> dict[str, float]:
    """Median, mean, std, 20th/80th percentiles, min and count of per-repetition times (ms)."""
    if not samples:
        raise ValueError("no timing samples")
    ordered = sorted(samples)

    def quantile(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
    return {"median_ms": statistics.median(ordered), "mean_ms": statistics.fmean(ordered),
            "std_ms": statistics.pstdev(ordered), "p20_ms": quantile(0.2), "p80_ms": quantile(0.8),
            "min_ms": ordered[0], "reps": len(ordered)}


def empty_launch_ms(target_ms: float = 50.0, graph: bool = False) -> float:
    """Median time of launching a Triton kernel that does nothing, measured like any other
    function (``graph``: as a CUDA-graph replay): a test within ``OVERHEAD_FACTOR`` of it
    measures launch overhead, not the kernel."""
    x = torch.empty(1, device="cuda")
    fn = lambda: _nothing[(1,)](x)  # noqa: E731
    if graph:
        fn = as_graph(fn) or fn
    return timing_stats(time_interleaved({"empty": fn}, target_ms)["empty"])["median_ms"]


def copy_bandwidth_gbs(target_ms: float = 50.0, max_bytes: int = 1 << 30) -> float:
    """The device's achievable memory bandwidth, measured as a large copy_ (read + write)
    in GB/s: the yardstick for what a memory-bound kernel reaches."""
    free, _ = torch.cuda.mem_get_info()
    size = min(max_bytes, free // 4) // 4 * 4
    src = torch.empty(size // 4, dtype=torch.int32, device="cuda").fill_(1)
    dst = torch.empty_like(src)
    median = timing_stats(time_interleaved({"copy": lambda: dst.copy_(src)}, target_ms)["copy"])["median_ms"]
    return 2 * size / (median * 1e-3) / 1e9


MATMUL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def matmul_tflops(size: int = 4096, target_ms: float = 50.0) -> dict[str, float]:
    """The device's matmul throughput per dtype, measured as a large square ``torch.mm``: the
    ceiling for a compute-bound kernel (``harness.timing.roofline``). float32 as torch runs it by
    default (no TF32 unless the user allowed it)."""
    result = {}
    for dtype in MATMUL_DTYPES:
        a = torch.randn(size, size, device="cuda").to(dtype)
        b = torch.randn(size, size, device="cuda").to(dtype)
        median = timing_stats(time_interleaved({"mm": functools.partial(torch.mm, a, b)}, target_ms)["mm"])["median_ms"]
        result[str(dtype).removeprefix("torch.")] = 2 * size ** 3 / (median * 1e-3) / 1e12
        del a, b
    return result


@triton.jit
def _nothing(x_ptr):
    pass


def overhead_dominated(median_ms: float, empty_ms: float) -> bool:
    return median_ms < OVERHEAD_FACTOR * empty_ms
