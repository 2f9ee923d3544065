"""Benchmark records (schema v0.1): what the CPU path writes validates, carries correctness only,
and cannot carry timings or speedups it did not measure."""
import json

import pytest
from pydantic import ValidationError

from harness.bench_record import BenchRecord, append_records, make_record

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
