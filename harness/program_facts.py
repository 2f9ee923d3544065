"""What a program problem computes, found by running it on tensors without data.

``describe_program`` imports the problem's file (the user's own reference program, trusted as the
user's code is; an answer never runs here), builds ``Model(*get_init_inputs())`` and
``get_inputs()`` on the ``meta`` device, where tensors have a shape and a dtype but no memory
(a problem feeding 16 GiB of inputs costs nothing), and runs ``forward`` once under a dispatch
mode that counts each aten overload it calls. An overload without a meta implementation ends the
trace early: what was counted before it is kept and ``trace_error`` says where it stopped.
Anything the problem itself gets wrong (importing, its ``get_inputs``, building ``Model``) is a
``ProblemError``, in words.
"""
from __future__ import annotations

from collections import Counter
from typing import Literal

from pydantic import BaseModel, ConfigDict

from bbagent.harness.inputs import flat_values
from bbagent.harness.problem import ProblemError, ProgramProblem, program_module
from bbagent.harness.suite.memory_need import program_need

VALUE_TEXT_LIMIT = 80


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ValueFact(_Strict):
    """One input, output or constructor argument: a tensor's shape and dtype, or a value's text."""
    kind: Literal["tensor", "value"]
    text: str  # ``float32[16, 16384]`` for a tensor, the repr (cut at 80 characters) for a value
    shape: list[int] | None = None
    dtype: str | None = None


class ParameterFact(_Strict):
    """One entry of ``Model``'s ``state_dict``: what ``ModelNew`` must hold under the same name."""
    name: str
    shape: list[int]
    dtype: str
    kind: Literal["parameter", "buffer"]


class AtenUse(_Strict):
    name: str  # ``aten.addmm.default``
    count: int  # calls in one forward


class ProgramFacts(_Strict):
    init_args: list[ValueFact]
    inputs: list[ValueFact]
    input_bytes: int
    parameters: list[ParameterFact]
    aten_ops: list[AtenUse]  # in the order of their first call
    outputs: list[ValueFact]
    trace_error: str | None = None  # where the shape-only run of forward stopped

    def device_need(self) -> int:
        """The device memory an evaluation of the program is expected to need before any child
        measured it (``harness.suite.memory_need``): the copies of its inputs, outputs and weights a
        test keeps alive at once, and a child's own. A GPU shared by a batch admits it by this."""
        tensors = [(v.shape, v.dtype) for v in self.inputs + self.outputs
                   if v.kind == "tensor" and v.shape is not None and v.dtype is not None]
        tensors += [(p.shape, p.dtype) for p in self.parameters]
        return program_need(tensors)


def describe_program(problem: ProgramProblem) -> ProgramFacts:
    """Run ``problem``'s program once on shape-only tensors (see the module's docstring)."""
    import torch
    module = _imported(problem)
    with torch.device("meta"):
        torch.manual_seed(0)
        init = _called(module.get_init_inputs, "get_init_inputs()", problem)
        model = _built(module, init, problem)
        inputs = _called(module.get_inputs, "get_inputs()", problem)
        if not isinstance(model, torch.nn.Module):
            raise ProblemError(f"{problem.path}: Model(...) made a {type(model).__name__}, not a torch.nn.Module")
        counts, output, error = _traced(model, inputs)
    tensors = [value for value in inputs if isinstance(value, torch.Tensor)]
    return ProgramFacts(
        init_args=[_fact(value) for value in init], inputs=[_fact(value) for value in inputs],
        input_bytes=sum(t.numel() * t.element_size() for t in tensors),
        parameters=_state(model), aten_ops=[AtenUse(name=name, count=n) for name, n in counts.items()],
        outputs=[] if output is None else [_fact(value) for value in flat_values(output)], trace_error=error)


def _imported(problem: ProgramProblem):
    """The problem's module, imported under a name of its own (two problems never share one)."""
    try:
        return program_module(problem)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever the problem's file raises is the problem's to fix
        raise ProblemError(f"importing {problem.path} failed: {type(exc).__name__}: {exc}") from None




def _built(module, init, problem: ProgramProblem):
    """``Model(*init)`` on the meta device; a constructor that reads a value (``.item()`` of a
    schedule, say) is built on the CPU instead and its weights moved to the meta device."""
    import torch
    try:
        return module.Model(*init)
    except Exception:  # noqa: BLE001 - read values while building: built for real below, where its error is said
        pass
    with torch.device("cpu"):
        torch.manual_seed(0)
        model = _called(lambda: module.Model(*init), "Model(*get_init_inputs())", problem)
    return model.to("meta") if isinstance(model, torch.nn.Module) else model


def _called(function, what: str, problem: ProgramProblem):
    try:
        value = function()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the problem's own code failed: said, with what failed
        raise ProblemError(f"{problem.path}: {what} failed: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    if what.startswith("get_") and not isinstance(value, (list, tuple)):
        raise ProblemError(f"{problem.path}: {what} must return a list (it returned a {type(value).__name__})")
    return value


def _traced(model, inputs) -> tuple[Counter, object, str | None]:
    """The aten overloads one forward calls, with their counts; the output, or None with the
    error where the trace stopped."""
    from torch.utils._python_dispatch import TorchDispatchMode
    counts: Counter = Counter()

    class Counting(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            counts[str(func)] += 1
            return func(*args, **(kwargs or {}))

    import torch
    try:
        with torch.no_grad(), Counting():  # as the program is judged: no autograd bookkeeping among its calls
            return counts, model(*inputs), None
    except Exception as exc:  # noqa: BLE001 - an operator without a meta kernel: the trace stops there
        return counts, None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]


def _state(model) -> list[ParameterFact]:
    names = {name for name, _ in model.named_parameters()}
    return [ParameterFact(name=name, shape=list(t.shape), dtype=str(t.dtype).removeprefix("torch."),
                          kind="parameter" if name in names else "buffer")
            for name, t in model.state_dict().items()]


def _fact(value) -> ValueFact:
    import torch
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        return ValueFact(kind="tensor", text=f"{dtype}{list(value.shape)}", shape=list(value.shape), dtype=dtype)
    text = repr(value)
    return ValueFact(kind="value", text=text if len(text) <= VALUE_TEXT_LIMIT else text[:VALUE_TEXT_LIMIT - 3] + "...")
