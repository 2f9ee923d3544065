"""What the profiles of a timed kernel say, for the next prompt: on each profiled shape (those
furthest from their roofline), the launches one call makes, extra copies named, and from Nsight
Compute the achieved DRAM bandwidth and SM throughput against peak, occupancy and registers,
beside eager's, with a one-line diagnosis from those numbers. Where ncu did not run, the torch
profiler's kernel list gives the launches and their times.
"""
from __future__ import annotations

import math

from bbagent.harness.interface import Launch, NcuSide, Performance

NAME_CHARS = 70
MEMORY_NEAR_PEAK_PCT = 70.0  # DRAM throughput at or above this share of peak: memory-bound near peak
LOW_OCCUPANCY_PCT = 30.0
MANY_REGISTERS = 128
LAUNCH_BOUND_US = 8.0  # a call whose GPU time is under this is dominated by launching
MANY_PROGRAMS = 50_000  # a grid this large ...
SMALL_PROGRAM_BYTES = 2048  # ... whose programs each move less than this: the work is cut too fine


COPY_ADVICE = "read the inputs as they are laid out (strides) and write the output directly"


def is_copy(name: str) -> bool:
    """A launch that only moves data: torch's copy kernels, CUDA memcpy and memset."""
    lowered = name.lower()
    return "copy" in lowered or lowered.startswith(("memcpy", "memset"))


def short(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[:NAME_CHARS - 3] + "..."


def programs(grid: str) -> int:
    """The number of programs (CUDA blocks) of a grid as ncu writes it: ``(802816, 1, 1)``."""
    try:
        return math.prod(int(part) for part in grid.strip("() ").split(","))
    except ValueError:
        return 0


def diagnose_ncu(kernel: NcuSide, eager: NcuSide | None, bytes_moved: int | None = None) -> str:
    """One line from Nsight Compute's figures of the kernel's call (and eager's, for contrast);
    ``bytes_moved``: what the call moves at least (the timed shape's)."""
    launches = kernel.kernels
    copies = [k for k in launches if is_copy(k.name)] if len(launches) > 1 else []
    if copies:
        share = sum(k.time_us or 0 for k in copies) / max(kernel.time_us or 0, 1e-9)
        return (f"extra copies: {len(copies)} of the call's {len(launches)} launches only copy data "
                f"({', '.join(short(k.name) for k in copies[:3])}), {share:.0%} of its GPU time; {COPY_ADVICE}")
    eager_launches = len(eager.kernels) if eager is not None else 1
    if (kernel.time_us or 0) < LAUNCH_BOUND_US:
        return (f"launch-bound: the call's GPU time is {kernel.time_us or 0:.1f} us over {len(launches)} launch(es)"
                f" (eager {eager_launches}); fewer launches, or less host work per call, is what is left")
    if len(launches) > max(eager_launches, 1):
        return (f"more launches than eager: {len(launches)} per call against {eager_launches}; fuse them into one "
                "kernel")
    main = max(launches, key=lambda k: k.time_us or 0)
    grid = programs(main.grid)
    if bytes_moved and grid >= MANY_PROGRAMS and bytes_moved / grid < SMALL_PROGRAM_BYTES:
        return (f"many small programs: {grid} programs of {main.block} threads, {bytes_moved / grid:.0f} bytes each "
                f"(SM {kernel.sm_pct or 0:.0f}%, DRAM {kernel.dram_pct or 0:.0f}% of peak); give each program more "
                "work (several rows, a larger block)")
    registers = max((k.registers or 0 for k in launches), default=0)
    if (kernel.occupancy_pct or 100) < LOW_OCCUPANCY_PCT and registers >= MANY_REGISTERS:
        return (f"low occupancy from registers: {kernel.occupancy_pct:.0f}% of the warps a multiprocessor holds, "
                f"{registers:.0f} registers per thread; smaller tiles, fewer live values or num_warps")
    dram, sm = kernel.dram_pct or 0.0, kernel.sm_pct or 0.0
    eager_dram = f" (eager {eager.dram_pct:.0f}%)" if eager is not None and eager.dram_pct is not None else ""
    if dram >= MEMORY_NEAR_PEAK_PCT:
        return f"memory-bound near peak: DRAM at {dram:.0f}% of peak{eager_dram}; only moving fewer bytes helps"
    if dram >= sm:
        return (f"memory-bound far from peak: DRAM at {dram:.0f}% of peak{eager_dram}, SM throughput {sm:.0f}%; "
                "more bytes in flight (larger blocks, more programs, wider contiguous loads)")
    return f"compute-bound: SM throughput at {sm:.0f}% of peak, DRAM {dram:.0f}%"


def diagnose_launches(kernel: list[Launch], eager: list[Launch]) -> str:
    """One line from the torch profiler's kernel lists of one call."""
    total = sum(k.us for k in kernel)
    launches = sum(k.per_call for k in kernel)
    copies = [k for k in kernel if is_copy(k.name)] if launches > 1 else []
    if copies:
        share = sum(k.us for k in copies) / max(total, 1e-9)
        return (f"extra copies: {', '.join(short(k.name) for k in copies[:3])}, {share:.0%} of the call's GPU time; "
                f"{COPY_ADVICE}")
    eager_launches = sum(k.per_call for k in eager)
    if launches > max(eager_launches, 1):
        return f"more launches than eager: {launches:g} per call against {eager_launches:g}; fuse them into one kernel"
    if total < LAUNCH_BOUND_US:
        return f"launch-bound: the call's GPU time is {total:.1f} us; fewer launches or less host work per call"
    return f"{launches:g} launch(es), {total:.1f} us of GPU time per call (eager {sum(k.us for k in eager):.1f} us)"


def profile_part(performance: Performance | None) -> str | None:
    """The prompt's part on the profiles of a timed kernel, or None where there are none."""
    if performance is None:
        return None
    roof = {t.input: t.roof_fraction for t in performance.tests}
    moved = {t.input: t.bytes for t in performance.tests}
    report = performance.ncu
    if report is not None and report.measured:
        blocks = [_ncu_shape(shape, roof.get(shape.input), moved.get(shape.input)) for shape in report.shapes
                  if shape.kernel is not None and shape.kernel.kernels]
        if blocks:
            cost = f"; profiling took {report.wall_s:.0f} s" if report.wall_s is not None else ""
            return ("Nsight Compute on the shapes furthest from their roofline (ncu locks clocks to base: read its "
                    f"percentages, not its times{cost}):\n" + "\n".join(blocks))
    profiles = [p for p in performance.profiles or [] if p.launches.get("kernel")]
    if profiles:
        seconds = sum(p.wall_s or 0 for p in profiles)
        return ("The torch profiler on the shapes furthest from their roofline (Nsight Compute was not available; "
                f"profiling took {seconds:.1f} s):\n" + "\n".join(_launch_shape(p, roof.get(p.input)) for p in profiles))
    return None


def profiling_cost(verdict) -> float | None:
    """Seconds the evaluation spent profiling for the feedback (ncu's child, or the torch
    profiler's calls), None where it profiled nothing."""
    performance = verdict.performance
    if performance is None:
        return None
    spent = [performance.ncu.wall_s] if performance.ncu is not None and performance.ncu.wall_s is not None else []
    spent += [p.wall_s for p in performance.profiles or [] if p.wall_s is not None]
    return round(sum(spent), 2) if spent else None


def _fraction(value: float | None) -> str:
    return f", {value:.0%} of its roofline" if value is not None else ""


def _ncu_shape(shape, roof_fraction: float | None, bytes_moved: int | None) -> str:
    rows = []
    for label, side in (("your kernel", shape.kernel), ("eager", shape.eager)):
        if side is None or not side.kernels:
            continue
        names = "; ".join(f"{short(k.name)}{' (copy)' if is_copy(k.name) and len(side.kernels) > 1 else ''}"
                          for k in side.kernels[:4])
        registers = "/".join(f"{k.registers:.0f}" for k in side.kernels[:4] if k.registers is not None) or "-"
        rows.append(f"| {label} | {len(side.kernels)}: {names} | {_num(side.time_us, 1)} | {_num(side.dram_gbs, 0)} | "
                    f"{_num(side.dram_pct, 0)} | {_num(side.sm_pct, 0)} | {_num(side.occupancy_pct, 0)} | {registers} |")
    return (f"- `{shape.input}`{_fraction(roof_fraction)}: {diagnose_ncu(shape.kernel, shape.eager, bytes_moved)}\n"
            "  | call | launches | time us | DRAM GB/s | DRAM % peak | SM % peak | occupancy % | registers |\n"
            "  | --- | --- | --- | --- | --- | --- | --- | --- |\n" + "\n".join("  " + row for row in rows))


def _launch_shape(profile, roof_fraction: float | None) -> str:
    lines = [f"- `{profile.input}`{_fraction(roof_fraction)}: "
             f"{diagnose_launches(profile.launches['kernel'], profile.launches.get('eager', []))}"]
    for label, side in (("your kernel", "kernel"), ("eager", "eager")):
        launches = profile.launches.get(side, [])
        listed = "; ".join(f"{short(k.name)} {k.us:.1f} us" + (f" x{k.per_call:g}" if k.per_call != 1 else "")
                           for k in launches[:4])
        lines.append(f"  {label}: {listed or 'nothing recorded'}")
    return "\n".join(lines)


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def program_kernels_part(performance: Performance | None) -> str | None:
    """The prompt's part on a timed program's GPU kernels: per call of torch.compile's code, of
    ``ModelNew`` and of eager ``Model`` (the torch profiler's lists), their count and time, the
    costliest named, and what the counts say; None where no list was made."""
    if performance is None or not performance.tests:
        return None
    timed = performance.tests[0]
    inductor = (timed.baselines or {}).get("inductor")
    profiled = next((p for p in performance.profiles or [] if p.launches.get("kernel")), None)
    sides = [("torch.compile", inductor.launches if inductor is not None else None),
             ("your ModelNew", profiled.launches.get("kernel") if profiled else None),
             ("eager Model", profiled.launches.get("eager") if profiled else None)]
    listed = [(label, launches) for label, launches in sides if launches]
    if not listed:
        return None
    lines = ["GPU kernels per call, from the torch profiler (the costliest first):"]
    for label, launches in listed:
        count, total = sum(k.per_call for k in launches), sum(k.us for k in launches)
        named = "; ".join(f"{short(k.name)} {k.us:.1f} us" + (f" x{k.per_call:g}" if k.per_call != 1 else "")
                          for k in launches[:5])
        more = f"; and {len(launches) - 5} more" if len(launches) > 5 else ""
        lines.append(f"- {label}: {count:g} launch(es), {total:.1f} us of GPU time: {named}{more}")
    mine, compiled = dict(sides)["your ModelNew"], dict(sides)["torch.compile"]
    if mine and compiled:
        ours, theirs = sum(k.per_call for k in mine), sum(k.per_call for k in compiled)
        copies = [k for k in mine if is_copy(k.name)] if ours > 1 else []
        if copies:
            lines.append(f"Your call spends {sum(k.us for k in copies):.1f} us only copying data "
                         f"({', '.join(short(k.name) for k in copies[:3])}); {COPY_ADVICE}.")
        if ours > theirs:
            lines.append(f"torch.compile runs this program in {theirs:g} launch(es), yours in {ours:g}: fuse what "
                         "it fuses (the pointwise work around a matrix product or convolution into its epilogue, "
                         "a normalization and what follows it into one pass).")
    return "\n".join(lines)
