"""Benchmark records in the unified benchmark log schema v0.1: one record per
(operator, input, engine), so results from different machines and nights can be joined.

``engine`` is ``"aten"`` (eager PyTorch, the reference), ``"inductor"`` (the op compiled by
torch.compile: ``compilation_config`` says how) or ``"bbagent"`` (a generated kernel). Timings exist only where a GPU measured them: a record made on the CPU (Triton
interpreter) carries correctness alone, with ``runtime_ms_mean``/``runtime_ms_std`` null and
no ``runtime_raw``, so no file can pass interpreter time off as performance.
"""
from __future__ import annotations

import json
import platform
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

from bbagent.harness.interface import triton_version

SCHEMA_VERSION: Literal["0.1"] = "0.1"
Engine = Literal["aten", "inductor", "bbagent"]


class BenchRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workload: str = Field(description="aten overload, e.g. aten.relu.default")
    engine: Engine
    hardware: str = Field(description="device name, e.g. NVIDIA H200, or cpu")
    runtime_ms_mean: float | None
    runtime_ms_std: float | None
    timestamp: float = Field(description="seconds since the epoch")
    schema_version: Literal["0.1"] = SCHEMA_VERSION
    metadata: dict[str, Any] = {}
    workload_args: dict[str, Any] = Field(description="the input: its description and seed")
    workload_metadata: dict[str, Any] = {}
    engine_version: str
    engine_config: dict[str, Any] = {}
    compilation_config: dict[str, Any] = {}
    software_config: dict[str, Any]
    runtime_config: dict[str, Any] = {}
    hardware_config: dict[str, Any]
    execution_config: dict[str, Any]
    metrics: dict[str, Any]
    runtime_raw: list[float] | None = None

    @model_validator(mode="after")
    def _timings_only_from_a_gpu(self) -> "BenchRecord":
        timed = self.runtime_ms_mean is not None or self.runtime_ms_std is not None or self.runtime_raw
        if timed and self.execution_config.get("device") != "cuda":
            raise ValueError("timings are only recorded when a GPU measured them")
        if not timed and self.metrics.get("speedup") is not None:
            raise ValueError("a speedup needs timings")
        return self


@lru_cache(maxsize=1)
def software_config() -> dict[str, Any]:
    """Versions (and the driver, via NVML): the same for every record of a process, read once."""
    config = {"python": platform.python_version(), "torch": torch.__version__,
              "triton": triton_version(), "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        config["driver"] = _driver_version()
    return config


def _driver_version() -> str | None:
    try:
        import pynvml  # nvidia-ml-py, optional: without it the driver is left out
        pynvml.nvmlInit()
        return pynvml.nvmlSystemGetDriverVersion()
    except Exception:  # noqa: BLE001 - any NVML failure: the driver is left out of the record
        return None


def hardware_config(device: str) -> dict[str, Any]:
    if device != "cuda":
        return {"device": "cpu", "machine": platform.machine(), "processor": platform.processor()}
    props = torch.cuda.get_device_properties(0)
    return {"device": props.name, "compute_capability": f"{props.major}.{props.minor}",
            "multiprocessors": props.multi_processor_count, "memory_bytes": props.total_memory,
            "l2_cache_bytes": getattr(props, "L2_cache_size", None)}


def make_record(op: str, engine: Engine, device: str, input_description: str, seed: int, correct: bool,
                timing: dict[str, float] | None = None, samples: list[float] | None = None,
                speedup: float | None = None, engine_version: str = "", execution: dict | None = None,
                hardware: dict | None = None, metrics: dict | None = None, metadata: dict | None = None,
                engine_config: dict | None = None, compilation_config: dict | None = None) -> BenchRecord:
    """One record. ``timing`` is ``harness.timing.clock.timing_stats`` output (GPU only); ``metrics``
    adds to the correctness, speedup and median; ``hardware`` saves asking the device again."""
    hardware = hardware or hardware_config(device)
    return BenchRecord(
        workload=op, engine=engine, hardware=hardware["device"],
        runtime_ms_mean=timing["mean_ms"] if timing else None,
        runtime_ms_std=timing["std_ms"] if timing else None,
        timestamp=time.time(), workload_args={"input": input_description, "seed": seed},
        engine_version=engine_version or (torch.__version__ if engine in ("aten", "inductor") else "unknown"),
        software_config=software_config(), hardware_config=hardware,
        execution_config={"device": device, **(execution or {})},
        metrics={"correct": correct, "speedup": speedup,
                 **({"median_ms": timing["median_ms"], "reps": timing["reps"]} if timing else {}),
                 **(metrics or {})},
        metadata=metadata or {}, engine_config=engine_config or {}, compilation_config=compilation_config or {},
        runtime_raw=samples)


def append_records(path: Path, records: list[BenchRecord]) -> None:
    """Append as JSON lines (one record per line), creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        for record in records:
            out.write(json.dumps(record.model_dump(), sort_keys=True) + "\n")
