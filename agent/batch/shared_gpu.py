"""One GPU shared by phase by several evaluations of one process: the piece both executors run.
The local executor holds one per GPU of this machine; on a Ray cluster each node's supervisor
holds one for its GPU. Either way the evaluations go through the harness's gate
(``harness.sandbox.parent.gpu_share.GpuShare``): tests side by side as device memory allows, the
timing and the profiling alone, the harness's own out-of-memory retried after a pause, a failure
doubted while shared run again alone. NVML samples the GPU itself (``GpuMonitor``).
"""
from __future__ import annotations

import os
from pathlib import Path

from bbagent.agent.batch.gpu_monitor import GpuMonitor
from bbagent.harness.interface import (GpuShare, evaluate_kernel, machine_gpu, physical_gpu, prepare_suite,
                                       total_memory)

EVALUATION_CORES = 2  # an evaluation's tests and its compile processes take about this many cores
EVALUATION_HOST_GIB = 8  # and up to this much host memory
MAX_PER_GPU = 8


def evaluations_per_gpu(gpus_on_host: int = 1, cores: int | None = None, host_memory_gib: float | None = None) -> int:
    """How many evaluations share one GPU by default: the host's cores and memory split among its
    ``gpus_on_host`` GPUs, about 2 cores and up to 8 GiB of host memory each; 8 at once kept an H100
    running kernels in 61-65% of the seconds of a 40-operator night, 830-900 evaluations an hour
    (benchmarks/night_batch.py, benchmarks/results/issue46-h100)."""
    cores = cores or os.cpu_count() or 1
    if host_memory_gib is None:
        try:
            host_memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        except (ValueError, OSError):
            host_memory_gib = 16.0
    gpus_on_host = max(1, gpus_on_host)
    return max(1, min(MAX_PER_GPU, cores // gpus_on_host // EVALUATION_CORES,
                      int(host_memory_gib / gpus_on_host // EVALUATION_HOST_GIB)))


class SharedGpu:
    """``at_once`` evaluations of this process on one GPU (``gpu``, numbered as this process sees
    them; None on the CPU, where a ``device_memory`` stands for a GPU's, as tests simulate one).
    ``device_memory``: the bytes evaluations are admitted against (None: what NVML reports, 0 where
    it cannot say, and then they are admitted by count alone)."""

    def __init__(self, name: str, gpu: int | None, at_once: int, device_memory: int | None = None,
                 evaluate=None):
        self.name, self.gpu = name, gpu
        if device_memory is None:
            device_memory = total_memory(physical_gpu(gpu)) if gpu is not None else 0
        across = None if gpu is None else machine_gpu(physical_gpu(gpu), device_memory)  # the other processes on it
        self.share = GpuShare.for_gpu(name, device_memory, at_once, across=across)
        self.run_evaluation = evaluate  # harness.interface.evaluate_kernel unless a test gives another
        self.monitor = None
        if gpu is not None:
            self.monitor = GpuMonitor({gpu: physical_gpu(gpu)})

    def evaluate(self, request, kernel_path: Path):
        """The Verdict of the kernel under the request, its tests beside the others' on this GPU."""
        if self.run_evaluation is None:
            self.run_evaluation = evaluate_kernel
        return self.run_evaluation(request, kernel_path, gpu=self.gpu, share=self.share)

    def prepare(self, request) -> str:
        """The request's suite built ahead, here (``harness.interface.prepare_suite``)."""
        return prepare_suite(request, gpu=self.gpu, share=self.share)

    def figures(self) -> dict:
        """at_once (the evaluations allowed together), most_at_once (the most admitted together so
        far), memory_gib (what they are admitted against; 0: by count alone), nvml (why the GPU
        was not sampled, if it was not), and the samples' figures (``GpuMonitor``)."""
        share = self.share
        measured = self.monitor.summary()[self.gpu] if self.monitor is not None and self.gpu is not None else {}
        unsampled = self.monitor.unavailable if self.monitor is not None else "the CPU"
        return {"at_once": share.max_shared, "most_at_once": share.most_held,
                "memory_gib": round(share.capacity / 2**30, 1), "nvml": unsampled, **measured}

    def close(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()
