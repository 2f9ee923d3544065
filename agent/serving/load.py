"""An accepted kernel imported into this process (``bbagent.load``; ``agent.serving.enable``
registers what it imports with torch): the overload asked for is served through
``harness.adapters`` where the kernel is written for its functional sibling.

A kernel for the CPU runs under Triton's interpreter (``harness.kernel_import`` says how): where
triton is not imported yet, loading a CPU kernel sets ``TRITON_INTERPRET=1`` for this process;
where triton was imported compiling, it is refused at once with the fix.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from bbagent.agent.errors import UsageError
from bbagent.agent.options import DEVICES
from bbagent.agent.review.catalog import kernel_serving

def device_or_default(device: str | None) -> str:
    """``device`` checked, or CUDA where this process sees a GPU, else the CPU."""
    if device is None:
        from bbagent.harness.interface import default_device
        return default_device()
    if device not in DEVICES:
        raise UsageError(f"device must be one of {', '.join(DEVICES)} (got '{device}')")
    return device


def load(root: str | Path, op: str, device: str | None = None) -> Callable:
    """A callable with ``op``'s calling convention, from the accepted kernel that serves it, for
    tensors on ``device`` (default: CUDA where there is a GPU, else the CPU). Imports the kernel
    module into this process: use it where the kernel is trusted (reviewed)."""
    device = device_or_default(device)
    if device == "cpu":
        interpret_triton()  # before anything here imports triton
    from bbagent.harness.interface import serving
    from bbagent.harness.interface import resolve_op
    entry = kernel_serving(root, op)
    if entry is None:
        raise UsageError(f"no accepted kernel serves {op} under {Path(root) / 'generated_kernels'}: "
                         f"run 'bbagent generate --op {op}' first")
    unusable = entry.unusable
    if unusable:
        raise UsageError(f"the kernel serving {op} cannot be loaded: {unusable}")
    kernel = import_kernel(entry.kernel, entry.folder.name, device)
    return serving(kernel, resolve_op(entry.meta.written_for), resolve_op(op))


def load_program(root: str | Path, problem: str | Path, device: str | None = None) -> type:
    """The ``ModelNew`` class of the accepted answer to ``problem`` (a problem file, checked to be
    the text the answer was accepted for, or its key, ``kernelbench/level1/19_ReLU``), for tensors
    on ``device`` (as ``load``). Imports the answer into this process: use it where it is trusted."""
    from bbagent.agent.review.catalog import find
    from bbagent.agent.errors import ReviewError
    device = device_or_default(device)
    if device == "cpu":
        interpret_triton()
    posed = _posed_problem(problem)
    key = posed.key if posed is not None else str(problem)
    try:
        entry = find(Path(root), key)
    except ReviewError as exc:
        raise UsageError(f"{exc}; bbagent generate --problem FILE writes one") from None
    current = entry.current
    answered = current.kind.answered(current.meta)
    if posed is not None and posed.sha256 != answered.sha256:
        raise UsageError(f"{problem} is not the program the answer in {current.folder} was accepted for (it was "
                         f"{answered.path}, sha256 {answered.sha256[:12]}; the file's text "
                         "has changed since): generate an answer for it again")
    if current.unusable:
        raise UsageError(f"the answer to {key} cannot be loaded: {current.unusable}")
    module = import_module(current.kernel, key.replace("/", "_"), device)
    model_new = getattr(module, "ModelNew", None)
    if not isinstance(model_new, type):
        raise UsageError(f"{current.kernel} defines no class ModelNew")
    return model_new


def _posed_problem(problem: str | Path):
    """The problem the file ``problem`` poses, or None where ``problem`` is a key, not a file."""
    if not Path(problem).expanduser().is_file():
        return None
    from bbagent.agent.judging import callers_fault
    from bbagent.harness.interface import program_problem
    with callers_fault():
        return program_problem(problem)


def import_kernel(path: str | Path, name: str, device: str = "cuda") -> Callable:
    """The ``kernel`` of the module at ``path``, imported under a module name made from ``name``,
    for ``device``. A UsageError where the module cannot be imported or defines no callable
    ``kernel``, or (CPU) where its Triton functions are not interpreted."""
    module = import_module(path, name, device)
    kernel = getattr(module, "kernel", None)
    if not callable(kernel):
        raise UsageError(f"{path} defines no kernel(...)")
    return kernel


def import_module(path: str | Path, name: str, device: str = "cuda"):
    """The module at ``path``, imported under a module name made from ``name``, for ``device``
    (``harness.kernel_import``). A UsageError where it cannot be imported, or (CPU) where its
    Triton functions are not interpreted."""
    from bbagent.harness.interface import KernelImportError
    from bbagent.harness.interface import import_kernel_module as imported
    try:
        return imported(path, "bbagent_kernel_" + name.replace(".", "_"), device)
    except KernelImportError as exc:
        raise UsageError(str(exc)) from None


def interpret_triton() -> None:
    """Make this process's Triton interpret its kernels (``harness.kernel_import``), or raise a
    UsageError naming the fix where triton was imported compiling them."""
    from bbagent.harness.interface import KernelImportError
    from bbagent.harness.interface import interpret_triton as interpret
    try:
        interpret()
    except KernelImportError as exc:
        raise UsageError(str(exc)) from None
