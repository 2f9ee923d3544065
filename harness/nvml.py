"""What the NVIDIA driver says of a GPU right now, through NVML (``libnvidia-ml.so.1``, which
every driver installs): its memory (total, used, free) and its utilization (the share of the
last sample period, 1/6 s to 1 s by model, in which some kernel ran). Asking never creates a CUDA
context, so the parent process of the evaluations may ask as often as it likes.

A machine without the library (no driver, a CPU box) gets ``NvmlUnavailable`` from ``open_gpu``;
callers fall back to knowing less, never to failing an evaluation.
"""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass


class NvmlUnavailable(RuntimeError):
    """NVML cannot be loaded or does not know this GPU."""


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


@dataclass(frozen=True)
class GpuSample:
    utilization: int  # percent of the last sample period with a kernel running
    memory_used: int  # bytes, every process's
    memory_total: int


_LIBRARY: list = []
_LOCK = threading.Lock()


def _library():
    with _LOCK:
        if not _LIBRARY:
            try:
                library = ctypes.CDLL("libnvidia-ml.so.1")
            except OSError as exc:
                raise NvmlUnavailable(f"NVML cannot be loaded ({exc})") from None
            _check(library.nvmlInit_v2(), "nvmlInit")
            _LIBRARY.append(library)
        return _LIBRARY[0]


def _check(code: int, what: str) -> None:
    if code != 0:
        raise NvmlUnavailable(f"{what} failed with NVML error {code}")


class Gpu:
    """One GPU, named as ``CUDA_VISIBLE_DEVICES`` names it: an index or a ``GPU-...`` UUID."""

    def __init__(self, visible_entry: str):
        self.library = _library()
        self.handle = ctypes.c_void_p()
        entry = visible_entry.strip()
        if entry.isdigit():
            _check(self.library.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(int(entry)), ctypes.byref(self.handle)),
                   f"the handle of GPU {entry}")
        else:
            _check(self.library.nvmlDeviceGetHandleByUUID(entry.encode(), ctypes.byref(self.handle)),
                   f"the handle of GPU {entry}")

    def uuid(self) -> str:
        """The GPU's UUID (``GPU-...``): the same whatever a process's ``CUDA_VISIBLE_DEVICES``."""
        buffer = ctypes.create_string_buffer(96)
        _check(self.library.nvmlDeviceGetUUID(self.handle, buffer, ctypes.c_uint(96)), "nvmlDeviceGetUUID")
        return buffer.value.decode()

    def sample(self) -> GpuSample:
        memory, utilization = _Memory(), _Utilization()
        _check(self.library.nvmlDeviceGetMemoryInfo(self.handle, ctypes.byref(memory)), "nvmlDeviceGetMemoryInfo")
        _check(self.library.nvmlDeviceGetUtilizationRates(self.handle, ctypes.byref(utilization)),
               "nvmlDeviceGetUtilizationRates")
        return GpuSample(utilization=int(utilization.gpu), memory_used=int(memory.used), memory_total=int(memory.total))


def open_gpu(visible_entry: str) -> Gpu:
    """The GPU of this ``CUDA_VISIBLE_DEVICES`` entry; ``NvmlUnavailable`` where NVML cannot say."""
    return Gpu(visible_entry)
