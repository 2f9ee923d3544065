"""The probe's findings, as they cross from the probing process to the agent (JSON) and into the
prompt: the GPU's figures (``GpuFacts``: none on the CPU) and Triton's behaviour on it
(``TritonFacts``)."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

PROBE_FORMAT = 1  # bumped whenever the facts probed change: a cached probe of another format is redone


class GpuFacts(BaseModel):
    """The GPU, from the driver, and its yardsticks measured as the timing phase measures them."""
    model_config = ConfigDict(extra="forbid")
    name: str
    capability: str            # "9.0"
    multiprocessors: int
    memory_gib: float
    l2_mib: float | None
    shared_memory_per_block_kib: float  # the opt-in limit: a block asking for more fails to launch
    registers_per_block: int | None
    copy_gbs: float            # read + write of a large buffer (harness.timing.clock.copy_bandwidth_gbs)
    matmul_tflops: dict[str, float]  # torch.mm on 4096 x 4096, per dtype (float32 without TF32)
    empty_launch_us: float


class TritonFacts(BaseModel):
    """What Triton did on this device: each figure from a tiny kernel run there. ``None`` where the
    probe could not run (its error is in ``errors``)."""
    model_config = ConfigDict(extra="forbid")
    dot_min_k: dict[str, int | None]  # the smallest K of a 16 x 16 x K tl.dot that compiles and is right, per dtype
    exp_error_at_56: float | None     # float32 tl.exp's relative error at x = 56
    libdevice_exp_error_at_56: float | None  # libdevice.exp's (None: libdevice does not run here)
    dot_float32_error: float | None        # float32 tl.dot, default precision (TF32 on NVIDIA GPUs), 64x64x64
    dot_float32_ieee_error: float | None   # the same with input_precision="ieee"
    max_drops_nan: bool | None        # tl.max of [1, nan, 3, -2] is 3 (torch: nan)
    errors: dict[str, str] = {}


class DeviceFacts(BaseModel):
    """One probe: the device (``gpu`` None on the CPU, where Triton runs as the interpreter) and the
    stack it was probed with."""
    model_config = ConfigDict(extra="forbid")
    format: int = PROBE_FORMAT
    torch: str
    triton: str
    interpreter: bool
    gpu: GpuFacts | None
    triton_facts: TritonFacts
    probe_s: float
