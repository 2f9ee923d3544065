"""Run the probe on this process's device: the GPU's figures from the driver and the timing phase's
yardsticks, and what Triton does there (``harness.device_probe.kernels``)."""
from __future__ import annotations

import math
import time

import torch

from bbagent.harness.device_probe import kernels
from bbagent.harness.device_probe.facts import DeviceFacts, GpuFacts, TritonFacts
from bbagent.harness.timing.clock import copy_bandwidth_gbs, empty_launch_ms, matmul_tflops

DOT_DTYPES = {"float16": torch.float16, "float32": torch.float32, "int8": torch.int8}
DOT_K = (8, 16, 32)


def probe(device: str) -> DeviceFacts:
    """Every fact, on ``device`` ("cuda": the current GPU; "cpu": the Triton interpreter, no GPU facts)."""
    import triton
    started = time.perf_counter()
    gpu = gpu_facts() if device == "cuda" else None
    found = triton_facts(device)
    return DeviceFacts(torch=torch.__version__, triton=triton.__version__, interpreter=device == "cpu", gpu=gpu,
                       triton_facts=found, probe_s=round(time.perf_counter() - started, 2))


def gpu_facts() -> GpuFacts:
    import triton
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    driver = triton.runtime.driver.active.utils.get_device_properties(index)
    l2 = getattr(props, "L2_cache_size", None)
    return GpuFacts(name=props.name, capability=f"{props.major}.{props.minor}",
                    multiprocessors=driver["multiprocessor_count"], memory_gib=round(props.total_memory / 2**30, 1),
                    l2_mib=round(l2 / 2**20, 1) if l2 else None,
                    shared_memory_per_block_kib=round(driver["max_shared_mem"] / 1024, 1),
                    registers_per_block=driver.get("max_num_regs"), copy_gbs=round(copy_bandwidth_gbs(), 1),
                    matmul_tflops={k: round(v, 1) for k, v in matmul_tflops().items()},
                    empty_launch_us=round(empty_launch_ms() * 1e3, 2))


def triton_facts(device: str) -> TritonFacts:
    errors: dict[str, str] = {}

    def attempt(name: str, fn):
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - what failed is itself a finding
            errors[name] = error_text(exc)
            return None

    gen = torch.Generator(device=device).manual_seed(0)
    min_k = {name: _smallest_k(kernels, device, name, dtype, gen, attempt) for name, dtype in DOT_DTYPES.items()}
    return TritonFacts(
        dot_min_k=min_k,
        exp_error_at_56=attempt("tl.exp", lambda: _exp_error(kernels, device, libdevice=False)),
        libdevice_exp_error_at_56=attempt("libdevice.exp", lambda: _exp_error(kernels, device, libdevice=True)),
        dot_float32_error=attempt("dot float32", lambda: _dot_error(kernels, device, gen, ieee=False)),
        dot_float32_ieee_error=attempt("dot float32 ieee", lambda: _dot_error(kernels, device, gen, ieee=True)),
        max_drops_nan=attempt("tl.max", lambda: _max_drops_nan(kernels, device)),
        errors=errors)


def error_text(exc: BaseException) -> str:
    """``Type: last line of the message`` (200 characters at most): a Triton compile error says what
    it refused on its last line."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1][:200] if lines else ''}"


def _smallest_k(kernels, device: str, name: str, dtype, gen, attempt) -> int | None:
    """The smallest K of ``DOT_K`` with which a 16 x 16 x K block product compiles and is exact
    enough (the wrong answer of a K the hardware cannot do counts as failing)."""
    for k in DOT_K:
        if attempt(f"dot {name} K={k}", lambda k=k: _dot_right(kernels, device, dtype, k, gen)):
            return k
    return None


def _dot_right(kernels, device: str, dtype, k: int, gen) -> bool:
    if dtype.is_floating_point:
        a, b = (torch.randn(shape, device=device, generator=gen).to(dtype) for shape in ((16, k), (k, 16)))
        c = torch.empty(16, 16, device=device)
    else:
        a, b = (torch.randint(-3, 4, shape, device=device, generator=gen).to(dtype) for shape in ((16, k), (k, 16)))
        c = torch.empty(16, 16, device=device, dtype=torch.int32)
    kernels.dot_block[(1,)](a, b, c, M=16, N=16, K=k, IEEE=False)
    expected = a.double() @ b.double()
    error = ((c.double() - expected).abs().max() / expected.abs().max().clamp_min(1)).item()
    if error > 1e-2:
        raise ValueError(f"a 16 x 16 x {k} product was wrong (relative error {error:.2g})")
    return True


def _exp_error(kernels, device: str, libdevice: bool) -> float:
    x = torch.linspace(55.0, 57.0, 64, device=device)
    out = torch.empty_like(x)
    kernels.exp_block[(1,)](x, out, N=64, LIBDEVICE=libdevice)
    expected = torch.exp(x.double())
    return float(((out.double() - expected).abs() / expected).max().item())


def _dot_error(kernels, device: str, gen, ieee: bool) -> float:
    a, b = (torch.randn(64, 64, device=device, generator=gen) for _ in range(2))
    c = torch.empty(64, 64, device=device)
    kernels.dot_block[(1,)](a, b, c, M=64, N=64, K=64, IEEE=ieee)
    expected = a.double() @ b.double()
    return float(((c.double() - expected).norm() / expected.norm()).item())


def _max_drops_nan(kernels, device: str) -> bool:
    x = torch.tensor([1.0, math.nan, 3.0, -2.0], device=device)
    out = torch.empty(1, device=device)
    kernels.max_block[(1,)](x, out, N=4)
    return not math.isnan(out.item())
