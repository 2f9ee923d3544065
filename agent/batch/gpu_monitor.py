"""How busy a batch's GPUs really are: each GPU's utilization and memory as the driver reports
them (NVML, ``harness.nvml``), sampled every second in a thread of the coordinator. "Busy" here is
the GPU running a kernel, not an evaluation slot being taken.

``GpuMonitor.summary()`` per GPU: the samples taken, the mean utilization, the share of samples in
which some kernel ran (utilization above zero), and the most memory every process together used.
Where NVML cannot be had (no driver library), the monitor says so once and reports no samples.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

from bbagent.harness.interface import open_gpu

SAMPLE_EVERY_S = 1.0


@dataclass
class GpuUse:
    """What one GPU's samples add up to."""
    samples: int = 0
    utilization_sum: int = 0
    busy_samples: int = 0  # utilization above zero
    memory_peak: int = 0
    memory_total: int = 0

    def add(self, utilization: int, memory_used: int, memory_total: int) -> None:
        self.samples += 1
        self.utilization_sum += utilization
        self.busy_samples += utilization > 0
        self.memory_peak = max(self.memory_peak, memory_used)
        self.memory_total = memory_total

    def summary(self) -> dict:
        return {"samples": self.samples,
                "utilization_mean": round(self.utilization_sum / self.samples, 1) if self.samples else None,
                "busy_share": round(self.busy_samples / self.samples, 3) if self.samples else None,
                "memory_peak_gib": round(self.memory_peak / 2**30, 1) if self.samples else None,
                "memory_total_gib": round(self.memory_total / 2**30, 1) if self.samples else None}


class GpuMonitor:
    """Samples the GPUs ``visible`` (GPU number -> its ``CUDA_VISIBLE_DEVICES`` entry) until ``stop``."""

    def __init__(self, visible: dict[int, str], every_s: float = SAMPLE_EVERY_S, open_gpu=open_gpu):
        self.uses = {gpu: GpuUse() for gpu in visible}
        self.unavailable: str | None = None
        self.handles = {}
        for gpu, entry in visible.items():
            try:
                self.handles[gpu] = open_gpu(entry)
            except Exception as exc:  # noqa: BLE001 - NvmlUnavailable, or a driver that refuses
                self.unavailable = str(exc)
        self.every_s = every_s
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._sample, name="bbagent-gpu-monitor", daemon=True)
        if self.handles:
            self.thread.start()

    def _sample(self) -> None:
        while not self.stopped.wait(self.every_s):
            for gpu, handle in self.handles.items():
                try:
                    sample = handle.sample()
                except Exception as exc:  # noqa: BLE001 - a GPU lost mid-batch: its samples stop
                    self.unavailable = str(exc)
                    continue
                with self.lock:
                    self.uses[gpu].add(sample.utilization, sample.memory_used, sample.memory_total)

    def summary(self) -> dict[int, dict]:
        with self.lock:
            return {gpu: use.summary() for gpu, use in self.uses.items()}

    def stop(self) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join(timeout=2 * self.every_s)
