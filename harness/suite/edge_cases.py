"""Edge-case tests derived from ordinary ones: NaN and ±inf, large magnitudes,
non-contiguous inputs, zero-size tensors, and the same shapes with new values (so a
kernel that caches results by shape fails).

Each rule rewrites the tensors of a small base case. Whether the operator allows the
result is decided by the operator itself: a derived case is kept only when the aten
reference accepts it, so the rules stay generic and no per-op table is needed.
"""
from __future__ import annotations

import os
import signal
import time
from typing import Any, Callable

import torch

from bbagent.harness.inputs import clone_value, describe_call, map_tensors, tensors_in

SMALL_NUMEL = 4096
LARGE_SCALE = {torch.float16: 1e3}   # other floating dtypes: 1e6


def _with_nonfinite(t: torch.Tensor) -> torch.Tensor:
    """A copy with NaN, +inf and -inf spread over the elements."""
    if not t.dtype.is_floating_point or t.numel() == 0:
        return t
    out = t.clone(memory_format=torch.contiguous_format)
    flat = out.view(-1)
    step = max(1, flat.numel() // 3)
    for i, value in zip(range(0, flat.numel(), step), (float("nan"), float("inf"), float("-inf"))):
        flat[i] = value
    return out


def _scaled(t: torch.Tensor) -> torch.Tensor:
    if not t.dtype.is_floating_point:
        return t
    return t * LARGE_SCALE.get(t.dtype, 1e6)


def _non_contiguous(t: torch.Tensor) -> torch.Tensor:
    """Same values and shape, every other element of a buffer twice as wide in the last dim."""
    if t.dim() == 0 or t.numel() <= 1:
        return t
    buffer = torch.empty(*t.shape[:-1], t.shape[-1] * 2, dtype=t.dtype, device=t.device)
    view = buffer[..., ::2]
    view.copy_(t)
    return view


def _zero_size(t: torch.Tensor) -> torch.Tensor:
    if t.dim() == 0:
        return t
    return torch.empty((0,) + tuple(t.shape[1:]), dtype=t.dtype, device=t.device)


def _permuted_values(t: torch.Tensor) -> torch.Tensor:
    """Integer/bool tensors: the same values in reverse order (same shapes, new contents, and index
    tensors stay valid). Floating tensors get new values from the other rules."""
    if t.dtype.is_floating_point or t.numel() <= 1:
        return t
    return t.flatten().flip(0).reshape(t.shape).clone()


RULES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "nan_inf": _with_nonfinite,
    "permuted_values": _permuted_values,
    "large": _scaled,
    "non_contiguous": _non_contiguous,
    "zero_size": _zero_size,
}


def reference_accepts(op, args: tuple, kwargs: dict) -> bool:
    tensors = tensors_in((args, kwargs))
    if tensors and all(t.device.type == "cpu" for t in tensors):
        return _accepts_in_fork(op, args, kwargs)
    try:
        op(*clone_value(args), **clone_value(kwargs))
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # device-side asserts surface here
        return True
    except Exception:
        return False


def _accepts_in_fork(op, args: tuple, kwargs: dict, timeout_s: float = 20.0) -> bool:
    """CPU aten kernels can trap on an edge input (integer division by zero in
    native_batch_norm_backward on zero-size tensors raises SIGFPE), which no Python code
    can catch; so on CPU the reference is probed in a forked child."""
    pid = os.fork()
    if pid == 0:  # child: one thread, no cleanup, exit code is the answer
        try:
            torch.set_num_threads(1)
            op(*args, **kwargs)
            os._exit(0)
        except BaseException:
            os._exit(1)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return False


def derive_edge_cases(op, base_cases: list, make_case: Callable[..., Any]) -> list:
    """One derived case per (rule, dtype), from the first small base case of each dtype."""
    derived, used_dtypes = [], set()
    for base in base_cases:
        if base.dtype in used_dtypes or base.largest_tensor() > SMALL_NUMEL:
            continue
        base_args, base_kwargs = base.inputs()
        tensors = tensors_in((base_args, base_kwargs))
        if not tensors or not all(t.numel() > 1 for t in tensors):
            continue
        used_dtypes.add(base.dtype)
        for rule, fn in RULES.items():
            changed = []

            def apply(t: torch.Tensor, fn=fn) -> torch.Tensor:
                new = fn(t)
                changed.append(new is not t)
                return new
            args, kwargs = map_tensors(base_args, apply), map_tensors(base_kwargs, apply)
            if not any(changed) or not reference_accepts(op, args, kwargs):
                continue
            description = describe_call(args, kwargs)
            derived.append(make_case(id=f"edge-{rule}-{base.id}", source=f"edge:{rule} (from {base.id})",
                                     args=args, kwargs=kwargs,
                                     description=f"{description} [{rule.replace('_', ' ')}]", dtype=base.dtype))
    return derived
