"""``bbagent bench``: test a kernel, time it against eager aten (and, with ``--baseline
eager,inductor``, torch.compile) on the op's trace shapes, and write one benchmark record (schema
v0.1, ``agent.bench_record``) per (op, input, engine) to ``runs/<run_id>/bench.jsonl``, beside the
Verdict.

On the GPU each timed shape gives an ``aten`` record, an ``inductor`` record where that baseline
was asked for (without timings, and ``correct`` false, where inductor failed to compile it) and a
``bbagent`` record with their timings. Where nothing was timed (the CPU interpreter, or a kernel that failed a test) the
records carry correctness alone, one pair per trace test, and say why in their metadata.
"""
from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from agent.report import widen
from agent.bench_record import BenchRecord, append_records, hardware_config, make_record
from harness.verdict import NcuReport, Performance, Verdict


def records_from_verdict(verdict: Verdict, run_id: str) -> list[BenchRecord]:
    device = verdict.environment.device or "cpu"
    performance = verdict.performance
    hardware = hardware_config(device)
    metadata = {"run_id": run_id, "verdict": verdict.verdict, "seed": verdict.seed}
    kernel = {"kernel": verdict.kernel.path, "sha256": verdict.kernel.sha256}
    version = verdict.kernel.sha256[:12]
    common = {"op": verdict.op, "device": device, "seed": verdict.seed, "hardware": hardware}
    records = []
    if performance is not None and performance.measured:
        copy_gbs = performance.device.copy_gbs
        profiled = _ncu_by_input(performance.ncu)
        for t in performance.tests:
            if t.error_kind:
                records.append(make_record(engine="bbagent", input_description=t.input, correct=False,
                                           engine_version=version, engine_config=kernel, **common,
                                           metadata={**metadata, "error_kind": t.error_kind}))
                continue
            execution = {"timing": "cuda_graph_replay" if t.mode == "graph" else "eager_calls",
                         "l2_flush": True, "interleaved_with_reference": t.aten_source == "measured",
                         "target_ms": performance.target_ms}
            shared = {"bytes_moved": t.bytes, "overhead_dominated": t.overhead_dominated, "flops": t.flops,
                      "bound": t.bound, "floor_ms": t.floor_ms}
            records.append(make_record(
                engine="aten", input_description=t.input, correct=True, timing=t.aten.model_dump(),
                samples=t.aten_raw, execution=execution, metadata=metadata, **common,
                metrics={**shared, "achieved_gbs": t.aten_gbs, "copy_bandwidth_fraction": t.aten_gbs / copy_gbs,
                         "roof_fraction": t.aten_roof_fraction, "reference_source": t.aten_source,
                         **_ncu_metrics(profiled, t.input, "eager")}))
            inductor = (t.baselines or {}).get("inductor")
            if inductor is not None:
                records.append(_inductor_record(t, inductor, execution, shared, metadata, common))
            vs_inductor = {"speedup_inductor": inductor.speedup} if inductor is not None else {}
            records.append(make_record(
                engine="bbagent", input_description=t.input, correct=True, timing=t.candidate.model_dump(),
                samples=t.candidate_raw, speedup=t.speedup, execution=execution, metadata=metadata,
                engine_version=version, engine_config=kernel, **common,
                metrics={**shared, "achieved_gbs": t.candidate_gbs, "achieved_tflops": t.candidate_tflops,
                         "copy_bandwidth_fraction": t.candidate_gbs / copy_gbs, "roof_fraction": t.roof_fraction,
                         **vs_inductor, **_ncu_metrics(profiled, t.input, "kernel")}))
        return records
    metadata["not_timed"] = performance.reason if performance is not None else "timing was not asked for"
    skipped = {name: b.reason for name, b in ((performance.baselines if performance else None) or {}).items()}
    if skipped:
        metadata["baselines_not_timed"] = skipped
    for test in verdict.tests:
        if not (test.source or "").startswith("trace") or test.passed is None:
            continue  # OpInfo and edge cases are not workloads; a reference error has no answer
        records.append(make_record(engine="aten", input_description=test.input, correct=True,
                                   metadata=metadata, **common))
        records.append(make_record(engine="bbagent", input_description=test.input, correct=bool(test.passed),
                                   engine_version=version, engine_config=kernel, metadata=metadata, **common))
    return records


def _ncu_by_input(report: NcuReport | None) -> dict:
    return {shape.input: shape for shape in report.shapes} if report is not None and report.measured else {}


def _ncu_metrics(profiled: dict, input_description: str, side: str) -> dict:
    """``{"ncu": ...}``, Nsight Compute's totals for one engine on a shape it profiled, else nothing."""
    found = getattr(profiled.get(input_description), side, None)
    if found is None or not found.kernels:
        return {}
    return {"ncu": {**found.model_dump(exclude={"kernels", "error"}), "launches": len(found.kernels),
                    "clocks": "locked to base by ncu"}}


def _inductor_record(t, inductor, execution: dict, shared: dict, metadata: dict, common: dict) -> BenchRecord:
    """The inductor baseline on one shape: its timing (measured with eager in a child of its own, or
    from the cache), or, where it failed to compile, no timing and the error."""
    compilation = {"backend": "inductor", "mode": inductor.compile_mode, "fullgraph": True, "dynamic": False}
    if inductor.error:
        return make_record(engine="inductor", input_description=t.input, correct=False, compilation_config=compilation,
                           metadata={**metadata, "error": inductor.error}, **common)
    return make_record(
        engine="inductor", input_description=t.input, correct=True, timing=inductor.timing.model_dump(),
        samples=inductor.raw, compilation_config=compilation, metadata=metadata, **common,
        execution={**execution, "interleaved_with_reference": inductor.source == "measured",
                   "interleaved_with_kernel": False},
        metrics={**shared, "reference_source": inductor.source, "eager_over_inductor": inductor.eager_over_inductor,
                 "compile_s": inductor.compile_s})


def write_bench(run_path: Path, verdict: Verdict) -> tuple[Path, list[BenchRecord]]:
    records = records_from_verdict(verdict, run_path.name)
    target = run_path / "bench.jsonl"
    append_records(target, records)
    return target, records


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
    copy_gbs = performance.device.copy_gbs
    for t in performance.tests:
        if t.error_kind:
            table.add_row(t.input, *["-"] * (len(columns) - 2), t.error_kind)
            continue
        flag = "overhead-dominated" if t.overhead_dominated else ""
        flag += " (eager from cache)" if t.aten_source == "cache" else ""
        row = [t.input, t.mode, f"{t.aten.median_ms * 1e3:.1f}", f"{t.candidate.median_ms * 1e3:.1f}", f"{t.speedup:.3f}x"]
        if with_inductor:
            inductor = (t.baselines or {}).get("inductor")
            if inductor is None or inductor.error:
                row += ["-", "-"]
                flag += f" inductor: {inductor.error}" if inductor is not None else ""
            else:
                row += [f"{inductor.timing.median_ms * 1e3:.1f}", f"{inductor.speedup:.3f}x"]
        row += [f"{t.candidate_gbs:.0f}", f"{100 * t.candidate_gbs / copy_gbs:.0f}%",
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
            parts.append(f"against {name} ({b.compile_mode}) geomean {b.geomean_speedup:.3f}x over {b.compared} shapes "
                         f"(p20 {b.speedup_p20:.3f}x, p50 {b.speedup_p50:.3f}x, p80 {b.speedup_p80:.3f}x); "
                         f"fast_1 {b.fast_p['1']:.2f}{failed}")
        else:
            parts.append(f"against {name}: no shape compared ({len(b.compile_failures)} failed to compile)")
    if s.overhead_dominated.count:
        parts.append(f"{s.overhead_dominated.count} overhead-dominated shapes reported apart")
    if s.largest:
        parts.append(f"largest shape at {100 * s.largest.bandwidth_fraction:.1f}% of copy bandwidth "
                     f"(eager {100 * s.largest.aten_bandwidth_fraction:.1f}%)")
    return "; ".join(parts)
