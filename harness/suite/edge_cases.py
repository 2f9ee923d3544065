"""Edge-case tests derived from ordinary ones: NaN and ±inf (also with each dimension narrowed to
one element in turn, and in a 0-dim tensor, so an answer that skips the work where a dimension has
one element meets them), large magnitudes, non-contiguous inputs, zero-size tensors, the same shapes
with new values (so a kernel that caches results by shape fails), and values a shortcut may test
for: all non-negative, all zero, all one constant (a relu that returns its input when it finds no
negative value, a kernel that answers zeros for zeros).

Each rule rewrites the tensors of a small base case. Whether the operator allows the
result is decided by the operator itself: a derived case is kept only when the aten
reference accepts it, so the rules stay generic and no per-op table is needed.
"""
from __future__ import annotations

import os
import resource
import signal
import time
from typing import Any, Callable

import torch

from bbagent.harness.inputs import clone_value, describe_call, map_tensors, tensors_in
from bbagent.harness.ops import value_mode

SMALL_NUMEL = 4096
LARGE_SCALE = {torch.float16: 1e3}   # other floating dtypes: 1e6


NAN_FIRST = (float("nan"), float("inf"), float("-inf"))
INF_FIRST = (float("inf"), float("nan"), float("-inf"))


def _with_nonfinite(t: torch.Tensor, values: tuple[float, ...] = NAN_FIRST) -> torch.Tensor:
    """A copy with NaN, +inf and -inf spread over the elements, in the order of ``values`` (a
    one-element tensor gets the first)."""
    if not t.dtype.is_floating_point or t.numel() == 0:
        return t
    out = t.clone(memory_format=torch.contiguous_format)
    flat = out.view(-1)
    step = max(1, flat.numel() // 3)
    for i, value in zip(range(0, flat.numel(), step), values):
        flat[i] = value
    return out


def _with_inf_first(t: torch.Tensor) -> torch.Tensor:
    return _with_nonfinite(t, INF_FIRST)


def _non_negative(t: torch.Tensor) -> torch.Tensor:
    return t.abs() if t.dtype.is_floating_point else t


def _all_zero(t: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(t) if t.dtype.is_floating_point else t


def _constant(t: torch.Tensor) -> torch.Tensor:
    return torch.full_like(t, 1.5) if t.dtype.is_floating_point else t


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
    "non_negative": _non_negative,
    "all_zero": _all_zero,
    "constant": _constant,
}
# for a shortcut on the values, and (below) on a dimension's size: an exact op's (a random op's tiny
# draws would repeat by chance) whose inputs are all floating
VALUE_RULES = ("non_negative", "all_zero", "constant")
# rules applied to other base cases than the first of its dtype: NaN and inf in a 0-dim tensor
SHAPED_RULES: dict[str, tuple[Callable[[torch.Tensor], bool], Callable[[torch.Tensor], torch.Tensor]]] = {
    "nan_inf_0_dim": (lambda t: t.dim() == 0, _with_inf_first),
}
MOST_DIMS = 4  # the size-1 rules narrow each of the first dimensions in turn


def _one_element_along(dim: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """A rule: NaN and infinities in a floating tensor narrowed to one element along ``dim`` (a
    softmax, a cumsum or a reduction over a dimension of one element meets them)."""
    def rule(t: torch.Tensor) -> torch.Tensor:
        if not t.dtype.is_floating_point or t.dim() <= dim or t.shape[dim] < 2:
            return t
        return _with_inf_first(t.narrow(dim, 0, 1))
    return rule


SIZE_1_RULES = {f"nan_inf_dim_{d}_size_1": _one_element_along(d) for d in range(MOST_DIMS)}


def reference_accepts(op, args: tuple, kwargs: dict) -> bool:
    tensors = tensors_in((args, kwargs))
    if tensors and all(t.device.type == "cpu" for t in tensors):
        return _accepts_in_fork(op, args, kwargs)
    try:
        op(*clone_value(args), **clone_value(kwargs))
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # device-side asserts surface here
        return True
    except Exception:  # noqa: BLE001 - whatever aten raises on an edge input: not a test
        return False


def reference_accepts_cpu_first(op, args: tuple, kwargs: dict) -> bool:
    """``reference_accepts``, asked first of CPU copies of the inputs where they are on a GPU: values
    that may be out of range as indices (an integer extreme) are an error on the CPU and a
    device-side assert on a GPU, which ends the process's CUDA context."""
    if any(t.device.type != "cpu" for t in tensors_in((args, kwargs))):
        on_cpu = map_tensors((args, kwargs), lambda t: t.to("cpu"))
        if not _accepts_in_fork(op, *on_cpu):
            return False
    return reference_accepts(op, args, kwargs)


FORK_MEMORY_BYTES = 4 << 30  # the forked probe's address space beyond its parent's


def _accepts_in_fork(op, args: tuple, kwargs: dict, timeout_s: float = 20.0) -> bool:
    """CPU aten kernels can trap on an edge input (integer division by zero in
    native_batch_norm_backward on zero-size tensors raises SIGFPE), which no Python code
    can catch; so on CPU the reference is probed in a forked child. Its address space may grow by
    ``FORK_MEMORY_BYTES`` (an integer extreme as a size, a ``bincount`` of 2**62, is refused, not
    allocated)."""
    pid = os.fork()
    if pid == 0:  # child: one thread, no cleanup, exit code is the answer
        try:
            _limit_address_space(FORK_MEMORY_BYTES)
            torch.set_num_threads(1)
            op(*args, **kwargs)
            os._exit(0)
        except BaseException:  # noqa: BLE001 - the forked probe's answer is its exit code, whatever it raised
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


def _limit_address_space(extra: int) -> None:
    """This process's address space capped at its present size plus ``extra`` bytes (Linux)."""
    try:
        with open("/proc/self/statm") as statm:
            size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = size + extra if hard == resource.RLIM_INFINITY else min(size + extra, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (OSError, ValueError):
        pass  # no /proc or no limits here: the probe runs unbounded, as before


def derive_edge_cases(op, base_cases: list, make_case: Callable[..., Any]) -> list:
    """One derived case per (rule, dtype): the plain rules from the first small base case of each
    dtype whose tensors all have two elements or more (the size-1 rules from the first such case
    alone); each shaped rule from the first small base case of each dtype with a floating tensor of
    its shape."""
    derived, used_dtypes, shaped_used, narrowed = [], set(), set(), False
    exact = value_mode(op) == "exact"
    for base in base_cases:
        wanted_shaped = {rule for rule in SHAPED_RULES if exact and (rule, base.dtype) not in shaped_used}
        if base.largest_tensor() > SMALL_NUMEL or (base.dtype in used_dtypes and not wanted_shaped):
            continue  # nothing left for this dtype: its inputs are not drawn
        base_args, base_kwargs = base.inputs()
        tensors = tensors_in((base_args, base_kwargs))
        if not tensors:
            continue
        rules = {}
        if base.dtype not in used_dtypes and all(t.numel() > 1 for t in tensors):
            used_dtypes.add(base.dtype)
            # the new values and shapes stay valid for every input: no index or mask among them (an
            # index out of range of a narrowed dimension is a device-side assert on a GPU)
            free = exact and all(t.dtype.is_floating_point for t in tensors)
            rules.update({name: fn for name, fn in RULES.items() if name not in VALUE_RULES or free})
            if free and not narrowed:  # new shapes are new compilations: once per operator, not per dtype
                narrowed = True
                rules.update(SIZE_1_RULES)
        for rule in wanted_shaped:
            shaped, fn = SHAPED_RULES[rule]
            if any(t.dtype.is_floating_point and shaped(t) for t in tensors):
                shaped_used.add((rule, base.dtype))
                rules[rule] = fn
        for rule, fn in rules.items():
            case = _derived(op, base, rule, fn, base_args, base_kwargs, make_case)
            if case is not None:
                derived.append(case)
    return derived


def _derived(op, base, rule: str, fn: Callable[[torch.Tensor], torch.Tensor], base_args, base_kwargs,
             make_case: Callable[..., Any]):
    """The case ``rule`` derives from ``base``, or None where it changes nothing or aten refuses it."""
    changed = []

    def apply(t: torch.Tensor) -> torch.Tensor:
        new = fn(t)
        changed.append(new is not t)
        return new
    args, kwargs = map_tensors(base_args, apply), map_tensors(base_kwargs, apply)
    if not any(changed) or not reference_accepts(op, args, kwargs):
        return None
    description = describe_call(args, kwargs)
    return make_case(id=f"edge-{rule}-{base.id}", source=f"edge:{rule} (from {base.id})", args=args, kwargs=kwargs,
                     description=f"{description} [{rule.replace('_', ' ')}]", dtype=base.dtype)
