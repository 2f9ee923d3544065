"""``bbagent bench``: test a kernel, time it against eager aten on the op's trace shapes, and
write one benchmark record (schema v0.1, ``agent.bench_record``) per (op, input, engine)
to ``runs/<run_id>/bench.jsonl``, beside the Verdict.

On the GPU each timed shape gives an ``aten`` record and a ``bbagent`` record with their
timings. Where nothing was timed (the CPU interpreter, or a kernel that failed a test) the
records carry correctness alone, one pair per trace test, and say why in their metadata.
"""
from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from agent.report import widen
from agent.bench_record import BenchRecord, append_records, hardware_config, make_record
from harness.verdict import Performance, Verdict


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
                         "roof_fraction": t.aten_roof_fraction, "reference_source": t.aten_source}))
            records.append(make_record(
                engine="bbagent", input_description=t.input, correct=True, timing=t.candidate.model_dump(),
                samples=t.candidate_raw, speedup=t.speedup, execution=execution, metadata=metadata,
                engine_version=version, engine_config=kernel, **common,
                metrics={**shared, "achieved_gbs": t.candidate_gbs, "achieved_tflops": t.candidate_tflops,
                         "copy_bandwidth_fraction": t.candidate_gbs / copy_gbs, "roof_fraction": t.roof_fraction}))
        return records
    metadata["not_timed"] = performance.reason if performance is not None else "timing was not asked for"
    for test in verdict.tests:
        if not (test.source or "").startswith("trace") or test.passed is None:
            continue  # OpInfo and edge cases are not workloads; a reference error has no answer
        records.append(make_record(engine="aten", input_description=test.input, correct=True,
                                   metadata=metadata, **common))
        records.append(make_record(engine="bbagent", input_description=test.input, correct=bool(test.passed),
                                   engine_version=version, engine_config=kernel, metadata=metadata, **common))
    return records


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
        return
    table = Table(box=None, pad_edge=False)
    for column in ("input", "mode", "eager us", "kernel us", "speedup", "kernel GB/s", "% copy", "% roof", ""):
        table.add_column(column, overflow="fold", justify="left" if column in ("input", "mode", "") else "right")
    copy_gbs = performance.device.copy_gbs
    for t in performance.tests:
        if t.error_kind:
            table.add_row(t.input, "-", "-", "-", "-", "-", "-", "-", t.error_kind)
            continue
        flag = "overhead-dominated" if t.overhead_dominated else ""
        flag += " (eager from cache)" if t.aten_source == "cache" else ""
        table.add_row(t.input, t.mode, f"{t.aten.median_ms * 1e3:.1f}", f"{t.candidate.median_ms * 1e3:.1f}",
                      f"{t.speedup:.3f}x", f"{t.candidate_gbs:.0f}", f"{100 * t.candidate_gbs / copy_gbs:.0f}%",
                      f"{100 * t.roof_fraction:.0f}% {t.bound}" if t.roof_fraction is not None else "-", flag.strip())
    widen(console)
    console.print(table)
    console.print(summary_line(performance))


def summary_line(performance: Performance) -> str:
    s, device = performance.summary, performance.device
    parts = [f"{performance.gpu}: copy bandwidth {device.copy_gbs:.0f} GB/s, empty launch "
             f"{device.empty_launch_ms * 1e3:.1f} us (graph replay {device.empty_graph_launch_ms * 1e3:.1f} us)"]
    if s.geomean_speedup is not None:
        parts.append(f"geomean speedup {s.geomean_speedup:.3f}x over {s.counted} shapes "
                     f"(p20 {s.speedup_p20:.3f}x, p50 {s.speedup_p50:.3f}x, p80 {s.speedup_p80:.3f}x); "
                     f"fast_1 {s.fast_p['1']:.2f}")
    if s.overhead_dominated.count:
        parts.append(f"{s.overhead_dominated.count} overhead-dominated shapes reported apart")
    if s.largest:
        parts.append(f"largest shape at {100 * s.largest.bandwidth_fraction:.1f}% of copy bandwidth "
                     f"(eager {100 * s.largest.aten_bandwidth_fraction:.1f}%)")
    return "; ".join(parts)
