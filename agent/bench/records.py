"""``bbagent bench``: test a kernel, time it against eager aten (and, with ``--baseline
eager,inductor``, torch.compile) on the op's trace shapes, and write one benchmark record (schema
v0.1, ``agent.bench.schema``) per (op, input, engine) to ``runs/<run_id>/bench.jsonl``, beside the
Verdict.

On the GPU each timed shape gives an ``aten`` record, an ``inductor`` record where that baseline
was asked for (without timings, and ``correct`` false, where inductor failed to compile it) and a
``bbagent`` record with their timings. Where nothing was timed (the CPU interpreter, or a kernel that failed a test) the
records carry correctness alone, one pair per trace test, and say why in their metadata.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from bbagent.agent.bench.schema import BenchRecord, append_records, hardware_config, make_record
from bbagent.harness.interface import NcuReport, TimingStats, Verdict


def records_from_verdict(verdict: Verdict, run_id: str, workload: str | None = None) -> list[BenchRecord]:
    """The records of one Verdict; ``workload`` names what was timed where the Verdict's op does not
    (a program's key)."""
    device = verdict.environment.device or "cpu"
    performance = verdict.performance
    hardware = hardware_config(device)
    metadata: dict[str, Any] = {"run_id": run_id, "verdict": verdict.verdict, "seed": verdict.seed}
    kernel = {"kernel": verdict.kernel.path, "sha256": verdict.kernel.sha256}
    version = verdict.kernel.sha256[:12]
    common: dict[str, Any] = {"op": workload or verdict.op, "device": device, "seed": verdict.seed,
                              "hardware": hardware}
    records = []
    if performance is not None and performance.measured:
        copy_gbs = performance.device.copy_gbs if performance.device is not None else None
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
                engine="aten", input_description=t.input, correct=True, timing=_dumped(t.aten),
                samples=t.aten_raw, execution=execution, metadata=metadata, **common,
                metrics={**shared, "achieved_gbs": t.aten_gbs,
                         "copy_bandwidth_fraction": _fraction(t.aten_gbs, copy_gbs), "roof_fraction": t.aten_roof_fraction, "reference_source": t.aten_source,
                         **_ncu_metrics(profiled, t.input, "eager")}))
            inductor = (t.baselines or {}).get("inductor")
            if inductor is not None:
                records.append(_inductor_record(t, inductor, execution, shared, metadata, common))
            vs_inductor = {"speedup_inductor": inductor.speedup} if inductor is not None else {}
            records.append(make_record(
                engine="bbagent", input_description=t.input, correct=True, timing=_dumped(t.candidate),
                samples=t.candidate_raw, speedup=t.speedup, execution=execution, metadata=metadata,
                engine_version=version, engine_config=kernel, **common,
                metrics={**shared, "achieved_gbs": t.candidate_gbs, "achieved_tflops": t.candidate_tflops,
                         "copy_bandwidth_fraction": _fraction(t.candidate_gbs, copy_gbs),
                         "roof_fraction": t.roof_fraction,
                         **vs_inductor, **_ncu_metrics(profiled, t.input, "kernel")}))
        return records
    metadata["not_timed"] = performance.reason if performance is not None else "timing was not asked for"
    skipped = {name: b.reason for name, b in ((performance.baselines if performance else None) or {}).items()}
    if skipped:
        metadata["baselines_not_timed"] = skipped
    for test in verdict.tests:
        # the inputs the kernel really meets: a trace shape of an operator, a program's own given inputs
        met = (test.source or "").startswith("trace") or test.id == "given"
        if not met or test.passed is None:
            continue  # OpInfo, edge cases and a program's other draws are not workloads; a reference error has no answer
        described = test.input or test.id
        records.append(make_record(engine="aten", input_description=described, correct=True,
                                   metadata=metadata, **common))
        records.append(make_record(engine="bbagent", input_description=described, correct=bool(test.passed),
                                   engine_version=version, engine_config=kernel, metadata=metadata, **common))
    return records


def _dumped(timing: TimingStats | None) -> dict | None:
    return timing.model_dump() if timing is not None else None


def _fraction(part: float | None, whole: float | None) -> float | None:
    return part / whole if part is not None and whole else None


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


def write_bench(run_path: Path, verdict: Verdict, workload: str | None = None) -> tuple[Path, list[BenchRecord]]:
    records = records_from_verdict(verdict, run_path.name, workload)
    target = run_path / "bench.jsonl"
    append_records(target, records)
    return target, records
