"""One test of a program's answer: ``ModelNew.forward`` on one draw, judged against ``Model``.

The answer runs first, on its own copy of the inputs (freed blocks of their sizes poisoned), under
the run-time watch and a dispatch mode that counts every aten operator it calls outside Triton
launches; then the reference on another copy, and the reference in float64 (a deep copy, every
floating weight and input in float64). The test fails, with its own error kind, where the answer
raised, changed an input, returned something other than plain tensors, launched no Triton kernel
(unless every library call is allowed), called aten compute the library policy does not allow
(``guard``), or returned values the comparison refuses.

The comparison is ``harness.checks.compare``'s, against the float32 reference and the float64 run,
with one change for programs: an output whose values are small (RMS below 0.01) is compared in units
of its RMS, so that the absolute tolerance is relative to the output's scale (a softmax over 10^5
classes has outputs near 1e-5, and zeros would pass an absolute 1e-5). The message then says so.
"""
from __future__ import annotations

import copy
import time
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bbagent.harness.checks.allowed import is_allowed
from bbagent.harness.checks.case import candidate_raised
from bbagent.harness.checks.compare import Exact, compare, same_tensors
from bbagent.harness.inputs import clone_value, poison_freed_memory, tensors_in
from bbagent.harness.plain import not_plain

# the aten operators --allow-library gemm leaves to torch (cuBLAS, cuDNN), by packet name
LIBRARY_GEMM = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "matmul", "linear",
                          "convolution", "_convolution", "conv1d", "conv2d", "conv3d", "cudnn_convolution",
                          "cudnn_convolution_transpose", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                          "convolution_overrideable", "mkldnn_convolution", "_scaled_mm"})
POLICIES = ("none", "gemm", "all")
SMALL_OUTPUT_RMS = 1e-2  # below it an output is compared in units of its RMS


class AtenCalls(TorchDispatchMode):
    """Every aten operator the answer calls outside a Triton launch, counted, and those the library
    policy refuses, with the answer's line."""

    def __init__(self, policy: str, launches, candidate_file: str):
        super().__init__()
        self.policy = policy
        self.launches = launches
        self.candidate_file = candidate_file
        self.calls: Counter = Counter()
        self.refused: dict[str, int | None] = {}

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # as harness.checks.guards.AtenRecorder: no TorchDynamo in a sealed child

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if not self.launches.in_launch:
            if self.launches.watch is not None:
                self.launches.watch.on_aten(func)
            self.calls[str(func)] += 1
            if not self.allowed(func) and str(func) not in self.refused:
                self.refused[str(func)] = self._line()
        return result

    def allowed(self, func) -> bool:
        if self.policy == "all" or is_allowed(func):
            return True
        return self.policy == "gemm" and func._schema.name.split("::")[-1] in LIBRARY_GEMM

    def _line(self) -> int | None:
        import traceback
        for frame in reversed(traceback.extract_stack()):
            if frame.filename == self.candidate_file:
                return frame.lineno
        return None

    def refusal(self) -> str | None:
        if not self.refused:
            return None
        called = ", ".join(f"{name} ({'line ' + str(line) if line else 'line unknown'})"
                           for name, line in self.refused.items())
        allowed = {"none": "nothing may stay in torch", "gemm": "only matrix products and convolutions may stay "
                   "in torch"}[self.policy]
        return (f"ModelNew.forward called PyTorch compute: {called}; under the library policy "
                f"'{self.policy}' {allowed}: compute the rest in @triton.jit kernels")


def judge_program_call(draw: str, reference, answer, inputs: list, job, instruments, candidate_file: str,
                       on_answer=lambda: None, on_reference=lambda: None) -> tuple[dict, bool]:
    """The test record of one draw (a ``harness.verdict.TestResult`` as data) and whether the
    evaluation cannot go on (a lost CUDA context, an exit). ``on_answer`` and ``on_reference`` are
    called as each side starts, so that a crash or a hang is blamed on the right one."""
    launches, watch = instruments
    result = {"id": draw, "source": draw, "input": _described(inputs), "dtype": _dtype(inputs), "passed": False}
    answer_inputs, kept = clone_value(inputs), clone_value(inputs)
    poison_freed_memory(tensors_in(answer_inputs), copies=1)
    calls = AtenCalls(job.allow_library, launches, candidate_file)
    before = launches.launches
    on_answer()
    started = time.perf_counter()
    try:
        with calls:
            actual = watch.wrap(answer)(*answer_inputs)
        _synchronize(job.device)
    except BaseException as exc:  # noqa: BLE001 - the answer's failure (sys.exit too), reported as such
        raised = candidate_raised(exc, candidate_file)
        fatal = bool(raised.pop("context_lost", False)) or not isinstance(exc, Exception)
        return result | raised, fatal
    result["duration_ms"] = round((time.perf_counter() - started) * 1000, 3)
    result["aten_calls"] = dict(calls.calls)
    failure = watch.failure() or watch.judge_changes("after ModelNew.forward")
    if failure:
        return result | {k: failure[k] for k in ("error_kind", "message")}, False
    on_reference()
    expected = reference(*clone_value(inputs))
    _synchronize(job.device)
    failure = _checked(actual, expected, _float64_run(reference, inputs), answer_inputs, kept, calls,
                       launches.launches - before, job.allow_library)
    if failure:
        return result | failure, False
    return result | {"passed": True}, False


def _checked(actual, expected, truth, answer_inputs, kept, calls: AtenCalls, launched: int, policy: str) -> dict | None:
    if not same_tensors(answer_inputs, kept):
        return {"error_kind": "input_mutated", "message": "ModelNew.forward changed an input tensor in place; it must "
                                                          "leave its inputs as they were"}
    why = not_plain(actual, "ModelNew.forward's result")
    if why:
        return {"error_kind": "not_plain_tensor", "message": why}
    refusal = calls.refusal()
    if refusal:
        return {"error_kind": "guard", "message": refusal}
    if launched == 0 and policy != "all":
        return {"error_kind": "no_triton_launch", "message": "ModelNew.forward launched no Triton kernel"}
    return compare_outputs(expected, actual, truth)


STRUCTURAL = ("wrong_type", "wrong_structure", "wrong_shape", "wrong_dtype", "wrong_device")


def compare_outputs(expected, actual, truth) -> dict | None:
    """``compare`` of the answer's outputs with the reference's and the float64 run's, each small
    output (RMS below ``SMALL_OUTPUT_RMS``) in units of its RMS (see the module's docstring)."""
    whole = compare(expected, actual, "output")
    if whole is not None and whole["error_kind"] in STRUCTURAL:
        return whole
    flat_expected, flat_actual = _flat(expected), _flat(actual)
    flat_truth = _flat(truth) if truth is not None else [None] * len(flat_expected)
    if len(flat_truth) != len(flat_expected):
        flat_truth = [None] * len(flat_expected)
    for i, (e, a, t) in enumerate(zip(flat_expected, flat_actual, flat_truth)):
        path = "output" if len(flat_expected) == 1 else f"output[{i}]"
        exact = t is not None and isinstance(e, torch.Tensor) and isinstance(t, torch.Tensor) and t.shape == e.shape
        scale = _small_scale(t if exact else e)
        if scale is not None:
            e, a, t = e / scale, a / scale, (t / scale if exact else t)
        failure = compare(e, a, path, exact=Exact(truth=t) if exact else None)
        if failure is not None:
            if scale is not None:
                failure["message"] += (f" (values in units of the output's RMS, {scale:.3g}: the tolerance is relative "
                                       "to the output's scale)")
            return failure
    return None


def _small_scale(reference) -> float | None:
    if not isinstance(reference, torch.Tensor) or not reference.dtype.is_floating_point or reference.numel() == 0:
        return None
    finite = reference[torch.isfinite(reference)].to(torch.float64)
    rms = float(finite.square().mean().sqrt()) if finite.numel() else 0.0
    return rms if 0.0 < rms < SMALL_OUTPUT_RMS else None


def _float64_run(reference, inputs: list):
    """The reference with every floating weight and input in float64, or None where it cannot run so."""
    try:
        model = copy.deepcopy(reference).to(torch.float64)
        wide = [v.to(torch.float64) if isinstance(v, torch.Tensor) and v.dtype.is_floating_point else v
                for v in clone_value(inputs)]
        output = model(*wide)
    except Exception:  # noqa: BLE001 - an operator without float64 (on this device): the float32 reference alone
        return None
    return output


def _flat(value) -> list:
    if isinstance(value, (list, tuple)):
        return [item for part in value for item in _flat(part)]
    return [value]


def _described(inputs: list) -> str:
    return ", ".join(f"{str(v.dtype).removeprefix('torch.')}{list(v.shape)}" if isinstance(v, torch.Tensor)
                     else repr(v)[:40] for v in inputs)


def _dtype(inputs: list) -> str | None:
    return next((str(v.dtype).removeprefix("torch.") for v in inputs if isinstance(v, torch.Tensor)), None)


def _synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
