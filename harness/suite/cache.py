"""A suite built once per operator and reused, with fresh values for every evaluation.

Building an overload's tests (the OpInfo database, samples captured at the overload, edge and
promotion cases probed against aten, trace inputs planned) costs a child seconds; the result
depends on the operator, the device, the options, torch, triton and this harness, never on the
candidate. So the first child that builds a suite also saves it (before any candidate code
runs), the parent adopts the file once its digest matches the one the child sent before the
candidate was imported, and later children load it instead of building.

Values are drawn fresh per evaluation, so that no kernel can keep results from one evaluation to
the next:

* trace inputs hold a recipe (shapes, strides, dtypes) and are drawn from the evaluation's seed;
* OpInfo samples keep their shapes, strides, dtypes and integer tensors (indices stay valid), and
  each floating element is scaled by a fresh factor in [0.5, 2] (signs, zeros and non-finite
  values kept), where the build found that the reference takes such values as well as the
  sampled ones (``probe_refresh``); the others keep their sampled values, and the suite's notes
  count them;
* edge and promotion cases are their values (NaN, infinities, large magnitudes, zero size, one
  element): they are kept as built.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from bbagent.harness.fingerprint import harness_fingerprint, triton_version
from bbagent.harness.inputs import clone_value, map_tensors, memory_span, tensors_in
from bbagent.harness.ops import op_name
from bbagent.harness.traces import map_leaves
from bbagent.harness.variants import functional_of

FORMAT = 1
MAX_CACHED = 200  # suites kept; adopting one more removes the least recently used


def suite_key(overloads: list[str], device: str, options: dict) -> str:
    """What a suite depends on: the overloads, the device, the options that shape it, torch, triton
    and this harness's code and data."""
    what = {"format": FORMAT, "overloads": overloads, "device": device, "options": options,
            "torch": torch.__version__, "triton": triton_version(), "harness": harness_fingerprint()}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:24]


def dumps(suites: list[tuple[str, Any, Any]]) -> bytes:
    """``(name, overload, Suite)`` triples as bytes: tensors moved to the CPU, operator objects by name."""
    portable = []
    for name, _, suite in suites:
        cases = [replace(case, args=_on_cpu(case.args), kwargs=_on_cpu(case.kwargs),
                         out_of=None if case.out_of is None else op_name(case.out_of),
                         trace_op=None if case.trace_op is None else op_name(case.trace_op)) for case in suite.cases]
        portable.append((name, replace(suite, cases=cases)))
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, "suites": portable}, buffer)
    return buffer.getvalue()


def loads(data: bytes, device: str, problem) -> list[tuple[str, Any, Any]]:
    """The triples ``dumps`` saved, with tensors on ``device`` and operators taken from ``problem``
    (``harness.problem``: the overloads it was saved for) and their schemas, never looked up by name."""
    saved = torch.load(io.BytesIO(data), weights_only=False)  # written by a trusted child, digest checked
    if saved.get("format") != FORMAT:
        raise ValueError(f"suite file format {saved.get('format')}, expected {FORMAT}")
    overloads = dict(zip(problem.names, problem.serves))
    suites = []
    for name, suite in saved["suites"]:
        target = overloads[name]
        functional = functional_of(target)
        near = {op_name(op): op for op in (target, functional) if op is not None}
        for case in suite.cases:
            case.args, case.kwargs = _on(case.args, device), _on(case.kwargs, device)
            case.device = device
            if isinstance(case.out_of, str):
                case.out_of = near[case.out_of]
            if isinstance(case.trace_op, str):
                case.trace_op = near[case.trace_op]
        suites.append((name, target, suite))
    return suites


@dataclass(frozen=True)
class _MemoryFormat:
    """A ``torch.memory_format`` as saved (those objects do not pickle)."""
    name: str


MEMORY_FORMATS = {str(f).removeprefix("torch."): f for f in (torch.contiguous_format, torch.channels_last,
                                                            torch.channels_last_3d, torch.preserve_format)}


@dataclass
class _SavedTensor:
    """A tensor as saved: the memory from its storage's start to the end of its view, and the view.
    (``Tensor.to`` makes a view with gaps contiguous; the layout is part of the test.)"""
    memory: torch.Tensor
    shape: tuple
    stride: tuple
    offset: int


def _on_cpu(value):
    value = map_leaves(value, torch.memory_format, lambda f: _MemoryFormat(str(f).removeprefix("torch.")))
    return map_tensors(value, _saved)


def _saved(t: torch.Tensor) -> _SavedTensor:
    length = t.storage_offset() + memory_span(tuple(t.shape), t.stride())
    memory = t.detach().as_strided((length,), (1,), 0).to("cpu", copy=True)
    return _SavedTensor(memory, tuple(t.shape), t.stride(), int(t.storage_offset()))


def _on(value, device: str):
    value = map_leaves(value, _MemoryFormat, lambda f: MEMORY_FORMATS[f.name])
    return map_leaves(value, _SavedTensor, lambda s: s.memory.to(device).as_strided(s.shape, s.stride, s.offset))


def refreshed(suites: list[tuple[str, Any, Any]], seed: int) -> tuple[list, int]:
    """The suites with this evaluation's values: trace inputs drawn from ``seed``, refreshable OpInfo
    samples redrawn. Returns them and how many cases got new values."""
    gen = torch.Generator().manual_seed(seed)
    fresh = 0
    for _, _, suite in suites:
        for number, case in enumerate(suite.cases):
            if case.trace is not None:
                case.seed = seed + number
                fresh += 1
            elif case.refreshable:
                case.args, case.kwargs = redrawn((case.args, case.kwargs), gen)
                fresh += 1
    return suites, fresh


def redrawn(value, gen: torch.Generator):
    """``value`` with every floating tensor's elements each scaled by a factor drawn from [0.5, 2]:
    new values with the same signs, zeros, NaNs and infinities (the structure a test was sampled
    for), magnitudes within a factor of two; same shape, strides, dtype and device. Other tensors
    (integers: indices) as they are."""
    def redraw(t: torch.Tensor) -> torch.Tensor:
        if not t.dtype.is_floating_point or t.numel() == 0:
            return t
        factors = torch.empty(t.shape, dtype=torch.float64).uniform_(0.5, 2.0, generator=gen)
        values = (t.detach().to("cpu", torch.float64) * factors).to(t.dtype)
        length = t.storage_offset() + memory_span(tuple(t.shape), t.stride())
        new = t.detach().as_strided((length,), (1,), 0).clone().as_strided(t.shape, t.stride(), t.storage_offset())
        new.copy_(values.to(t.device))  # the same layout: strides, gaps, storage offset
        return new
    return map_tensors(value, redraw)


def probe_refresh(op, case) -> bool:
    """Whether ``case``'s floating inputs can be redrawn: the reference takes redrawn values without
    raising and gives no more non-finite elements than on the sampled values."""
    if not any(t.dtype.is_floating_point and t.numel() for t in tensors_in((case.args, case.kwargs))):
        return False
    if any(t.dtype.is_floating_point and t.numel() and _overlaps(t) for t in tensors_in((case.args, case.kwargs))):
        return False  # a broadcast (stride-0) input: its elements must stay equal
    try:
        before = _non_finite(op(*clone_value(case.args), **clone_value(case.kwargs)))
        args, kwargs = redrawn((case.args, case.kwargs), torch.Generator().manual_seed(0))
        after = _non_finite(op(*args, **kwargs))
        if torch.cuda.is_available() and case.device != "cpu":
            torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - the reference refusing redrawn values: the sample keeps its own
        return False
    return after <= before


def _overlaps(t: torch.Tensor) -> bool:
    return torch._debug_has_internal_overlap(t) == 1


def _non_finite(result) -> int:
    return sum(int((~torch.isfinite(t)).sum()) for t in tensors_in(result)
               if t.dtype.is_floating_point or t.dtype.is_complex)


def suite_cache_dir() -> Path:
    """Where adopted suites live: private to this user, outside every child's file view."""
    return Path(os.environ.get("BBAGENT_SUITE_CACHE") or Path(tempfile.gettempdir()) / f"bbagent-suites-{os.getuid()}")


def cached(key: str) -> Path | None:
    path = suite_cache_dir() / f"{key}.pt"
    return path if path.is_file() else None


def adopt(saved: Path, digest: str, key: str) -> Path | None:
    """Move a child's saved suite into the cache if its bytes match the digest the child sent before
    its candidate ran (the candidate could have rewritten the file since); None if they do not."""
    try:
        data = saved.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != digest:
        return None
    where = suite_cache_dir()
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = where / f"{key}.pt"
    partial = where / f".{key}.{os.getpid()}.partial"
    partial.touch(mode=0o600)
    partial.write_bytes(data)
    os.replace(partial, target)
    _keep_newest(where, MAX_CACHED)
    return target


def _keep_newest(where: Path, count: int) -> None:
    """Remove all but the ``count`` suites used last (a harness change makes every key new).
    Another process may be removing some at the same time: a suite gone already is skipped."""
    used = []
    for path in where.glob("*.pt"):
        try:
            used.append((path.stat().st_mtime, path))
        except FileNotFoundError:
            pass
    for _, old in sorted(used, reverse=True)[count:]:
        old.unlink(missing_ok=True)


def touch(path: Path) -> None:
    """Mark a cached suite as used now (``_keep_newest`` keeps the most recently used)."""
    try:
        os.utime(path)
    except OSError:
        pass
