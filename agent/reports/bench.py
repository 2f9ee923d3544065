"""``bbagent bench``'s console output: the per-shape table against eager (and inductor), the
summary line, the profiles kept and Nsight Compute's figures."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from bbagent.agent.reports.console import widen
from bbagent.harness.interface import NcuReport, Performance, TimingStats, Verdict


def print_bench(console: Console, verdict: Verdict) -> None:
    performance = verdict.performance
    if performance is None or not performance.measured:
        reason = performance.reason if performance is not None else "timing was not asked for"
        console.print(f"no timings: {reason}")
        for name, b in ((performance.baselines if performance else None) or {}).items():
            console.print(f"{name} baseline not timed: {b.reason}")
        if performance is not None and performance.ncu is not None:
            print_ncu(console, performance.ncu)
        return
    table = Table(box=None, pad_edge=False)
    with_inductor = "inductor" in (performance.baselines or {})
    columns = ["input", "mode", "eager us", "kernel us", "speedup"]
    columns += ["inductor us", "vs inductor"] if with_inductor else []
    columns += ["kernel GB/s", "% copy", "% roof", ""]
    for column in columns:
        table.add_column(column, overflow="fold", justify="left" if column in ("input", "mode", "") else "right")
    copy_gbs = performance.device.copy_gbs if performance.device is not None else None
    for t in performance.tests:
        if t.error_kind:
            table.add_row(t.input, *["-"] * (len(columns) - 2), t.error_kind)
            continue
        flag = "overhead-dominated" if t.overhead_dominated else ""
        flag += " (eager from cache)" if t.aten_source == "cache" else ""
        row = [t.input, t.mode, _us(t.aten), _us(t.candidate), f"{t.speedup:.3f}x"]
        if with_inductor:
            inductor = (t.baselines or {}).get("inductor")
            if inductor is None or inductor.error:
                row += ["-", "-"]
                flag += f" inductor: {inductor.error}" if inductor is not None else ""
            else:
                row += [_us(inductor.timing), f"{inductor.speedup:.3f}x"]
        gbs = t.candidate_gbs
        row += [f"{gbs:.0f}" if gbs is not None else "-",
                f"{100 * gbs / copy_gbs:.0f}%" if gbs is not None and copy_gbs else "-",
                f"{100 * t.roof_fraction:.0f}% {t.bound}" if t.roof_fraction is not None else "-", flag.strip()]
        table.add_row(*row)
    widen(console)
    console.print(table)
    console.print(summary_line(performance))
    for entry in performance.profiles or []:
        files = ", ".join(entry.files) or "none"
        console.print(f"profile of {entry.input}: {files}{' (' + entry.error + ')' if entry.error else ''}")
    if performance.ncu is not None:
        print_ncu(console, performance.ncu)


def _us(timing: TimingStats | None) -> str:
    return "-" if timing is None else f"{timing.median_ms * 1e3:.1f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def print_ncu(console: Console, report: NcuReport) -> None:
    """Nsight Compute's figures per shape and side (eager, kernel), summed over each call's launches."""
    if not report.measured:
        console.print(f"no Nsight Compute metrics: {report.reason}")
        return
    table = Table(box=None, pad_edge=False)
    columns = ["input", "side", "launches", "ncu us", "DRAM GB/s", "% DRAM peak", "% SM", "occupancy", ""]
    for column in columns:
        table.add_column(column, overflow="fold", justify="left" if column in ("input", "side", "") else "right")
    for shape in report.shapes:
        for name in ("eager", "kernel"):
            side = getattr(shape, name)
            if side is None:
                continue
            if side.error and not side.kernels:
                table.add_row(shape.input, name, *["-"] * 6, side.error)
                continue
            table.add_row(shape.input, name, str(len(side.kernels)),
                          "-" if side.time_us is None else f"{side.time_us:.1f}",
                          "-" if side.dram_gbs is None else f"{side.dram_gbs:.0f}", _percent(side.dram_pct),
                          _percent(side.sm_pct), _percent(side.occupancy_pct), side.error or "")
    console.print("Nsight Compute (clocks locked to base, caches flushed between its passes: compare its percentages, "
                  "not its times, with the table above)")
    console.print(table)
    for note in report.notes:
        console.print(f"ncu: {note}")
    if report.csv:
        console.print(f"ncu's metrics per kernel launch: {report.csv}")


def summary_line(performance: Performance) -> str:
    s, device = performance.summary, performance.device
    if s is None or device is None:
        return f"{performance.gpu}: not measured ({performance.reason or 'no summary'})"
    parts = [f"{performance.gpu}: copy bandwidth {device.copy_gbs:.0f} GB/s, empty launch "
             f"{device.empty_launch_ms * 1e3:.1f} us (graph replay {device.empty_graph_launch_ms * 1e3:.1f} us)"]
    if s.geomean_speedup is not None:
        parts.append(f"geomean speedup {s.geomean_speedup:.3f}x over {s.counted} shapes "
                     f"(p20 {s.speedup_p20:.3f}x, p50 {s.speedup_p50:.3f}x, p80 {s.speedup_p80:.3f}x); "
                     f"fast_1 {s.fast_p['1']:.2f}")
    for name, b in (performance.baselines or {}).items():
        if not b.measured:
            parts.append(f"{name} not timed: {b.reason}")
        elif b.geomean_speedup is not None:
            failed = f"; {len(b.compile_failures)} shapes it failed to compile left out" if b.compile_failures else ""
            fast_1 = f"{b.fast_p['1']:.2f}" if b.fast_p else "-"
            parts.append(f"against {name} ({b.compile_mode}) geomean {b.geomean_speedup:.3f}x over {b.compared} shapes "
                         f"(p20 {b.speedup_p20:.3f}x, p50 {b.speedup_p50:.3f}x, p80 {b.speedup_p80:.3f}x); "
                         f"fast_1 {fast_1}{failed}")
        else:
            parts.append(f"against {name}: no shape compared ({len(b.compile_failures)} failed to compile)")
    if s.overhead_dominated.count:
        parts.append(f"{s.overhead_dominated.count} overhead-dominated shapes reported apart")
    if s.largest:
        parts.append(f"largest shape at {100 * s.largest.bandwidth_fraction:.1f}% of copy bandwidth "
                     f"(eager {100 * s.largest.aten_bandwidth_fraction:.1f}%)")
    return "; ".join(parts)
