"""The judge and the clock as they were before the candidate was imported, verified unchanged.

The candidate shares the child's process with the checks and the timing, so it could rewrite
what they call: ``torch.isclose``, ``torch.cuda.Event.elapsed_time``, ``time.perf_counter``, the
harness's own functions, the target operator's aten kernel, or torch's global numerics (TF32 for
float32, the default dtype), which the reference shares. The static check refuses the spellings
it can see; this is the run-time rule, whatever the spelling. ``JudgeState.capture`` takes, just
before the candidate is imported:

* the attribute table (``__dict__``) of every module and class the checks and the clock use
  (torch, ``torch.Tensor``, ``torch.cuda.Event``, ``time``, ``math``, the harness's own modules and
  classes, Triton's launchers and benchmarking, ...), and each one's entry in ``sys.modules``;
* the instance attributes of the operators under test (``OpOverload._op``);
* torch's global settings (numerics, autocast, modes on the dispatch stacks), the tracing
  and profiling hooks, ``gc.callbacks``;
* with ``deep``, the aten kernels registered for the operators under test and those the checks
  run (a ``torch.library`` override of ``aten::isclose`` or of the reference is a new kernel
  there), and the code of every Python function in those tables.

``changes()`` names what differs, compared by identity (an object of the candidate's cannot
answer for it). The worker checks after the import, around each test's checks and before and
after the timing (deep at the phases' ends); a change voids the evaluation as ``tampering``.
Values that torch itself adds at run time (a submodule imported later) are new keys of a module
and are left alone; a new key of a class can shadow a base class's method and is a change.
"""
from __future__ import annotations

import functools
import gc
import operator
import os
import sys
import threading
from typing import Iterable

import torch

try:  # torch.get_default_device() imports it at its first call, which would come after the seal
    import torch.utils._device  # noqa: F401
except ImportError:
    pass

MODULES = ("torch", "torch.cuda", "torch.cuda.streams", "torch.cuda.graphs", "torch.cuda.memory", "torch.backends",
           "torch.backends.cuda", "torch.backends.cudnn", "torch._ops", "torch.library", "torch.overrides",
           "torch.utils._python_dispatch", "torch.testing", "time", "math", "statistics", "builtins", "threading",
           "_thread", "triton", "triton.testing", "triton.runtime.autotuner", "triton.runtime.jit")
# aten operators the checks themselves run (comparisons, conversions, the poison and the inputs)
JUDGE_OPS = ("isclose", "isnan", "isinf", "isfinite", "eq", "ne", "lt", "le", "gt", "ge", "abs", "sub", "add", "mul",
             "div", "where", "all", "any", "sum", "max", "min", "nonzero", "equal", "_to_copy", "copy_", "clone",
             "empty_strided", "full", "stack", "cat", "sort", "searchsorted", "sign", "round", "logical_not",
             "bitwise_and", "bitwise_or", "clamp_min", "sqrt", "randn", "randint", "rand", "pow")


# values a module recomputes itself, which nothing the harness judges with reads: ``time.tzset()`` (a library may
# call it, and inside the sandbox's file view the zone file is gone) sets the time zone's names and offsets
RECOMPUTED = {"time": frozenset({"tzname", "timezone", "altzone", "daylight"})}
HARNESS_PACKAGE = __name__.removesuffix(".checks.integrity")  # bbagent.harness: every module of it is watched


def _watched_modules() -> list:
    names = list(MODULES) + sorted(n for n in sys.modules if n == HARNESS_PACKAGE or n.startswith(HARNESS_PACKAGE + "."))
    return [(name, sys.modules[name]) for name in names if name in sys.modules]


def _classes_of(module) -> Iterable[type]:
    """Classes a module defines itself (not those it imports)."""
    for value in list(vars(module).values()):
        if isinstance(value, type) and value.__module__ == module.__name__:
            yield value


def _default_classes() -> list[type]:
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    classes = [torch.Tensor, torch.cuda.Event, torch.cuda.Stream, torch.cuda.graphs.CUDAGraph, torch._ops.OpOverload,
               torch._ops.OpOverloadPacket, TorchDispatchMode, TorchFunctionMode, threading.Thread]
    try:
        from triton.runtime.autotuner import Autotuner, Heuristics
        from triton.runtime.jit import JITFunction
        classes += [JITFunction, Autotuner, Heuristics]
        from triton.runtime.interpreter import InterpretedFunction
        classes.append(InterpretedFunction)
    except ImportError:
        pass
    return classes


class _Table:
    """One attribute table: its keys and values, by identity. ``extra_keys`` False: a new key is
    a change too (a class's new attribute shadows its bases); ``may_add``: new keys allowed all the
    same (an instance's ``functools.cached_property`` values). ``owner``: the class whose table it
    is, for the one key the standard library adds to a class (``copyreg``'s ``__slotnames__``)."""

    def __init__(self, name: str, table, extra_keys: bool, may_add: frozenset = frozenset(),
                 owner: type | None = None, recomputed: frozenset = frozenset()):
        self.name, self.table, self.extra_keys, self.may_add, self.owner = name, table, extra_keys, may_add, owner
        self.recomputed = recomputed  # keys whose values the module itself may set anew (``RECOMPUTED``)
        self.keys = list(table.keys())
        self.values = list(table.values())

    def changed(self) -> list[str]:
        table = self.table
        # the common case in one pass: a dict keeps its order, so a key removed, added or set to
        # another object shows as a length or a value out of place
        if len(table) == len(self.values) and all(map(operator.is_, table.values(), self.values)):
            return []
        now = dict(table.items())
        found = []
        for i, (key, value) in enumerate(zip(self.keys, self.values)):
            if key in now and now[key] is not value and _rewrapped_by_torch(now[key], value):
                self.values[i] = now[key]  # torch wrapped its own function (TorchDynamo, imported late)
            elif key in now and key in self.recomputed:
                self.values[i] = now[key]
            elif key not in now or now[key] is not value:
                found.append(f"{self.name}.{key}")
        if not self.extra_keys:
            known = set(self.keys) | self.may_add
            found += [f"{self.name}.{k} (added)" for k in now if k not in known
                      and not (k == "__slotnames__" and self.owner is not None and now[k] == slot_names(self.owner))]
        return found


def slot_names(cls: type) -> list[str]:
    """The names of ``cls``'s slots, as ``copy`` and ``pickle`` cache them on the class the first
    time one of its instances is copied (``copyreg``'s ``__slotnames__``; a library that deep-copies
    a graph holding an ``OpOverload``, as Helion does, adds it): that value is no tampering."""
    names = []
    for klass in cls.__mro__:
        slots = vars(klass).get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            private = name.startswith("__") and not name.endswith("__") and klass.__name__.lstrip("_")
            names.append(f"_{klass.__name__.lstrip('_')}{name}" if private else name)
    return names


TORCH_DIR = os.path.dirname(os.path.realpath(torch.__file__)) + os.sep


def _rewrapped_by_torch(new, old) -> bool:
    """``new`` is a wrapper that torch's own code made around ``old`` (``functools.wraps``, as
    TorchDynamo does to ``torch.manual_seed`` when it is first imported): harmless, and not the
    candidate's (a wrapper of its own has its code in the candidate's file; torch wrapping the
    candidate's function does not lead back to ``old``)."""
    code = getattr(new, "__code__", None)
    if code is None or not os.path.realpath(code.co_filename).startswith(TORCH_DIR):
        return False
    seen = 0
    while new is not None and seen < 8:
        new, seen = getattr(new, "__wrapped__", None), seen + 1
        if new is old:
            return True
    return False


def global_settings() -> dict[str, object]:
    """torch's process-wide settings that change what the reference or the timing compute (grad and
    inference mode change no value compared, so a kernel may leave them switched)."""
    backends = torch.backends
    settings = {
        "torch.get_default_dtype()": torch.get_default_dtype(),
        "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision(),
        "torch.backends.cuda.matmul.allow_tf32": backends.cuda.matmul.allow_tf32,
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction":
            backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction":
            backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "torch.backends.cudnn.allow_tf32": backends.cudnn.allow_tf32,
        "torch.backends.cudnn.enabled": backends.cudnn.enabled,
        "torch.backends.cudnn.deterministic": backends.cudnn.deterministic,
        "torch.backends.cudnn.benchmark": backends.cudnn.benchmark,
        "torch.are_deterministic_algorithms_enabled()": torch.are_deterministic_algorithms_enabled(),
        "autocast": torch._C._is_any_autocast_enabled(),
        "torch function modes": torch._C._len_torch_function_stack(),
        "torch dispatch modes": torch._C._len_torch_dispatch_stack(),
        "torch function enabled": torch._C._is_torch_function_enabled(),
        "sys.gettrace()": sys.gettrace(),
        "sys.getprofile()": sys.getprofile(),
        "gc.callbacks": tuple(gc.callbacks),
    }
    if hasattr(threading, "gettrace"):
        settings["threading.gettrace()"] = threading.gettrace()
        settings["threading.getprofile()"] = threading.getprofile()
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        settings["sys.monitoring tools"] = tuple(monitoring.get_tool(i) for i in range(6))
    precision = getattr(backends.cuda.matmul, "fp32_precision", None)
    if precision is not None:
        settings["torch.backends.cuda.matmul.fp32_precision"] = precision
    if hasattr(torch, "get_default_device"):
        settings["torch.get_default_device()"] = torch.get_default_device()
    return settings


def _cached_properties(cls: type) -> frozenset:
    """Names a ``functools.cached_property`` of the class stores in an instance's ``__dict__``."""
    return frozenset(name for klass in cls.__mro__ for name, value in vars(klass).items()
                     if isinstance(value, functools.cached_property))


def _same_setting(a, b) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(map(_same_setting, a, b))
    return a is b or (type(a) is type(b) and type(a) in (bool, int, float, str, torch.dtype, torch.device) and a == b)


def aten_kernels(names: Iterable[str]) -> dict[str, str]:
    """The dispatcher's registrations of each aten operator (``torch._C._dispatch_dump``)."""
    dumped = {}
    for name in names:
        qualified = name if "::" in name else f"aten::{name}"
        try:
            dumped[qualified] = torch._C._dispatch_dump(qualified)
        except RuntimeError:  # no such operator in this torch
            continue
    return dumped


def _function_code(tables: list[_Table]) -> dict[str, tuple]:
    """``(__code__, __defaults__, __kwdefaults__)`` of every Python function in the tables."""
    code = {}
    for table in tables:
        for key, value in zip(table.keys, table.values):
            function = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if type(function).__name__ == "function":
                code[f"{table.name}.{key}"] = (function, function.__code__, function.__defaults__,
                                               function.__kwdefaults__)
    return code


class JudgeState:
    """What the checks and the clock use, as captured (module docstring)."""

    def __init__(self, tables: list[_Table], modules: dict[str, object], settings: dict[str, object],
                 kernels: dict[str, str], code: dict[str, tuple]):
        self.tables, self.modules, self.settings, self.kernels, self.code = tables, modules, settings, kernels, code

    @classmethod
    def capture(cls, ops: Iterable = (), classes: Iterable[type] = ()) -> "JudgeState":
        """Now: the watched modules and classes (plus ``classes``), the instance attributes of
        ``ops``, the settings, and the aten kernels of ``ops`` and the checks' own."""
        modules = _watched_modules()
        tables = [_Table(name, vars(module), extra_keys=True, recomputed=RECOMPUTED.get(name, frozenset()))
                  for name, module in modules]
        watched_classes = list(dict.fromkeys([*_default_classes(), *classes,
                                              *(c for _, m in modules if m.__name__.startswith(HARNESS_PACKAGE)
                                                for c in _classes_of(m))]))
        tables += [_Table(f"{c.__module__}.{c.__qualname__}", vars(c), extra_keys=False, owner=c)
                   for c in watched_classes]
        ops = list(ops)
        tables += [_Table(str(op), vars(op), extra_keys=False, may_add=_cached_properties(type(op)))
                   for op in ops if hasattr(op, "__dict__")]
        names = [op._schema.name for op in ops if hasattr(op, "_schema")] + list(JUDGE_OPS)
        return cls(tables, dict(modules), global_settings(), aten_kernels(names), _function_code(tables))

    def changes(self, deep: bool = False) -> list[str]:
        """What differs from the capture, named (empty when nothing does). ``deep`` also compares
        the aten kernels and every function's code (about a millisecond)."""
        found = [name for table in self.tables for name in table.changed()]
        found += [f"sys.modules['{name}']" for name, module in self.modules.items() if sys.modules.get(name) is not module]
        now = global_settings()
        found += [f"{name} (was {self.settings[name]!r}, now {value!r})" for name, value in now.items()
                  if name in self.settings and not _same_setting(value, self.settings[name])]
        if deep:
            found += [f"the aten kernels registered for {name}" for name, text in aten_kernels(self.kernels).items()
                      if text != self.kernels[name]]
            found += [f"{name}.__code__" for name, (function, code, defaults, kwdefaults) in self.code.items()
                      if function.__code__ is not code or function.__defaults__ is not defaults
                      or function.__kwdefaults__ is not kwdefaults]
        return found


def tampering_message(changes: list[str], when: str) -> str:
    """The ``tampering`` message for these changes."""
    shown = ", ".join(changes[:6]) + (f" and {len(changes) - 6} more" if len(changes) > 6 else "")
    return (f"{when}, what the harness judges and times with had changed: {shown}. A kernel must not rewrite "
            "torch, Triton, the standard library, the harness or torch's global settings (the reference, the "
            "comparison and the clock use them); the evaluation is void")
