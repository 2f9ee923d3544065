"""A kernel file imported into this process, for serving it (``agent.serving.load``, and the
loader an exported package carries, ``harness.packaged``).

A kernel for the CPU runs under Triton's interpreter. Triton decides between compiling and
interpreting when it decorates a function (``@triton.jit`` reads ``TRITON_INTERPRET``), its own
library functions (``tl.sum``, ``tl.zeros_like``) included when ``triton`` is first imported. So
where triton is not imported yet, loading a CPU kernel sets ``TRITON_INTERPRET=1`` for this
process; where triton was imported compiling, it is refused at once with the fix. An autotuner
keeps its first configuration (the interpreter cannot time configurations).

A Helion kernel's tuned configs, kept beside its file, are pinned as it is imported (``pin_configs``).

Imports torch, triton and the standard library only: an exported package runs it without bbagent.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from pathlib import Path
from types import ModuleType

from bbagent.harness.helion_configs import CONFIGS_FILE, ConfigTable, Pinned, install


class KernelImportError(ValueError):
    """The file cannot be served here: it does not import, or its Triton kernels cannot run on the device."""


def import_module(path: str | Path, module_name: str, device: str = "cuda") -> ModuleType:
    """The module at ``path``, imported as ``module_name``, for ``device``; ``KernelImportError``
    where it cannot be imported, or (CPU) where its Triton functions are not interpreted."""
    if device == "cpu":
        interpret_triton()
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise KernelImportError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - said with the file's name
        raise KernelImportError(f"{path} cannot be imported: {type(exc).__name__}: {exc}") from exc
    if device == "cpu":
        for_the_interpreter(module, path)
    pin_configs(module, Path(path).with_name(CONFIGS_FILE))
    return module


def pin_configs(module: ModuleType, configs: Path) -> None:
    """A Helion kernel's tuned configs (``configs``, kept beside its file) pinned in front of its
    functions: a call whose specialization has none runs the untuned config and warns, once per
    specialization (``harness.helion_configs.Pinned``). Nothing where there is no such file."""
    if not configs.is_file():
        return
    try:
        table = ConfigTable.from_json(configs.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise KernelImportError(f"{configs} cannot be read: {exc}") from None
    if not install(module, Pinned(table, say=lambda said: warnings.warn(said, RuntimeWarning, stacklevel=4))):
        raise KernelImportError(f"{configs} holds Helion configs, but {module.__file__} has no @helion.kernel "
                                "function at its top level to pin them to")


def interpret_triton() -> None:
    """Make this process's Triton interpret its kernels, or raise ``KernelImportError`` naming the
    fix where triton was imported compiling them."""
    if "triton" not in sys.modules:
        os.environ["TRITON_INTERPRET"] = "1"
        return
    from triton.language import standard
    from triton.runtime.jit import JITFunction
    if isinstance(getattr(standard, "zeros_like", None), JITFunction) and os.environ.get("TRITON_INTERPRET") != "1":
        raise KernelImportError("a CPU kernel runs under Triton's interpreter, but triton was imported in this process "
                                "to compile for a GPU first: set TRITON_INTERPRET=1 before Python starts (or load the "
                                "CPU kernel before anything imports triton)")
    os.environ["TRITON_INTERPRET"] = "1"


def for_the_interpreter(module: ModuleType, path: str | Path) -> None:
    """Autotuners of the module keep their first configuration; a Triton function of the module
    that still came out compiled (a module imported before, cached) is refused with the fix."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction
    for value in vars(module).values():
        if isinstance(value, Autotuner) and len(value.configs) > 1:
            value.configs = value.configs[:1]
        inner = value
        for _ in range(8):  # through autotuners and heuristics to what they wrap
            if isinstance(inner, JITFunction) or not hasattr(inner, "fn"):
                break
            inner = inner.fn
        if isinstance(inner, JITFunction):
            raise KernelImportError(f"{path}: its Triton kernels were compiled for a GPU, not for the CPU's "
                                    "interpreter; start Python with TRITON_INTERPRET=1 set to run them on the CPU")
