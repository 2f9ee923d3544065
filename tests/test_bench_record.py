"""Benchmark records (schema v0.1): what the CPU path writes validates, carries correctness only,
and cannot carry timings or speedups it did not measure."""
import json

import pytest
from pydantic import ValidationError

from bbagent.agent.bench.schema import BenchRecord, append_records, make_record

REQUIRED = {"workload", "engine", "hardware", "runtime_ms_mean", "runtime_ms_std", "timestamp",
            "schema_version", "metadata", "workload_args", "workload_metadata", "engine_version",
            "engine_config", "compilation_config", "software_config", "runtime_config", "hardware_config",
            "execution_config", "metrics", "runtime_raw"}


def cpu_record(**overrides):
    return make_record("aten.relu.default", "bbagent", "cpu", "(T([64, 256], f16),)", 7, True, **overrides)


def test_cpu_records_have_every_field_and_no_timings(tmp_path):
    path = tmp_path / "runs" / "r1" / "bench.jsonl"
    append_records(path, [cpu_record(), cpu_record()])
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    data = json.loads(lines[0])
    assert set(data) == REQUIRED and data["schema_version"] == "0.1"
    assert data["runtime_ms_mean"] is None and data["runtime_raw"] is None
    assert data["metrics"] == {"correct": True, "speedup": None}
    assert {"torch", "triton", "cuda", "python"} <= set(data["software_config"])
    assert BenchRecord.model_validate(data).workload == "aten.relu.default"


def test_cpu_records_cannot_claim_performance():
    timing = {"mean_ms": 1.0, "std_ms": 0.1, "median_ms": 1.0, "reps": 10}
    with pytest.raises(ValidationError, match="only recorded when a GPU measured"):
        cpu_record(timing=timing)
    with pytest.raises(ValidationError, match="needs timings"):
        cpu_record(speedup=2.0)


def test_unknown_fields_and_engines_are_rejected():
    data = cpu_record().model_dump()
    with pytest.raises(ValidationError):
        BenchRecord.model_validate({**data, "runtime_ms": 1.0})
    with pytest.raises(ValidationError):
        BenchRecord.model_validate({**data, "engine": "tvm"})


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the CPU twin of test_gpu's bench test")
def test_bench_command_on_cpu_writes_correctness_only_records(tmp_path, capsys):
    from bbagent.cli import main
    from conftest import KERNELS
    from bbagent.harness.timing import ncu
    code = main(["bench", "--op", "aten.relu.default", "--kernel", str(KERNELS / "relu_triton.py"),
                 "--root", str(tmp_path), "--json", "--seed", "3", "--baseline", "eager,inductor", "--profile", "--ncu"])
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert code == 0 and summary["verdict"] == "pass" and summary["performance"] is None
    assert "interpreter" in summary["not_timed"]
    inductor = summary["baselines"]["inductor"]  # skipped on the CPU, saying why
    assert inductor["measured"] is False and "CUDA GPU only" in inductor["reason"]
    assert "inductor baseline not timed: the inductor baseline is timed on a CUDA GPU only" in captured.err
    assert summary["profiles"] == [] and "no profiles: they are taken on a CUDA GPU" in captured.err
    assert summary["ncu"] == {"measured": False, "reason": ncu.CPU_REASON, "ncu": None, "csv": None, "shapes": [],
                              "notes": [], "wall_s": None}
    assert f"no Nsight Compute metrics: {ncu.CPU_REASON}" in captured.err
    records = [BenchRecord.model_validate_json(line) for line in open(summary["bench_file"])]
    verdict = json.loads((tmp_path / "runs" / summary["run_dir"].split("/")[-1] / "verdict.json").read_text())
    trace_tests = [t for t in verdict["tests"] if t["source"].startswith("trace")]
    assert len(records) == 2 * len(trace_tests) > 0
    assert all(r.runtime_ms_mean is None and r.runtime_raw is None and r.metrics["speedup"] is None
               for r in records)
    assert {r.metadata["not_timed"] for r in records} == {summary["not_timed"]}
    assert all(r.metadata["baselines_not_timed"] == {"inductor": inductor["reason"]} for r in records)
    assert {r.engine for r in records} == {"aten", "bbagent"}  # no inductor record without an inductor time


def test_bench_without_a_kernel_names_the_fix(tmp_path, capsys):
    from bbagent.cli import main
    assert main(["bench", "--op", "aten.relu.default", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "bbagent generate --op aten.relu.default" in err and "--kernel" in err
