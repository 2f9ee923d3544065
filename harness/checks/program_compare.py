"""One test of a program's answer: ``ModelNew.forward`` on one draw, judged against ``Model``.

The answer runs first, on its own copy of the inputs (freed blocks of their sizes poisoned), under
the run-time watch and a dispatch mode that counts every aten operator it calls outside Triton
launches; then the reference on another copy, and, only where the answer is not within the
tolerance of that float32 result, the reference in float64 (a deep copy, every floating weight and
input in float64). Whatever the test no longer needs is let go as it goes: a problem's inputs can
be gigabytes. The test fails, with its own error kind, where the answer
raised, changed an input, returned something other than plain tensors, launched no Triton kernel
(unless every library call is allowed), called aten compute the library policy does not allow
(``guard``; the policies are ``harness.checks.policy.LIBRARY_POLICIES``), or returned values the
comparison refuses.

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
from bbagent.harness.checks.case import candidate_raised, synchronize
from bbagent.harness.checks.guards import candidate_line, on_fake_tensors
from bbagent.harness.checks.compare import CHUNK_ELEMENTS, Exact, chunks, compare, same_tensors
from bbagent.harness.inputs import clone_value, flat_values, poison_freed_memory, tensors_in
from bbagent.harness.plain import not_plain

# the aten operators --allow-library gemm leaves to torch (cuBLAS, cuDNN), by packet name
LIBRARY_GEMM = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "matmul", "linear",
                          "convolution", "_convolution", "conv1d", "conv2d", "conv3d", "cudnn_convolution",
                          "cudnn_convolution_transpose", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                          "convolution_overrideable", "mkldnn_convolution", "_scaled_mm"})
SMALL_OUTPUT_RMS = 1e-2  # below it an output is compared in units of its RMS
PIECE_ELEMENTS = CHUNK_ELEMENTS  # an output larger than this is compared a piece at a time


# what each aten operator an answer called outside Triton launches was, as the Verdict marks it
# (worst first: one call of an operator that is compute makes the operator compute)
CALL_KINDS = ("compute", "library", "bookkeeping", "plumbing")


class AtenCalls(TorchDispatchMode):
    """Every aten operator the answer calls outside a Triton launch, counted and marked
    (``CALL_KINDS``): the problem's computation the library policy refuses (``compute``) or leaves
    to torch (``library``); integer or boolean state of the answer's own module (``bookkeeping``:
    every tensor it reads is one of ``module``'s buffers and neither those nor what it makes are
    floating, as ``num_batches_tracked.add_(1)``); what a wrapper may always ask of torch
    (``plumbing``: views, allocation, copies, queries, ``harness.checks.allowed``). The refused, with
    the answer's line."""

    def __init__(self, policy: str, launches, candidate_file: str, module=None):
        super().__init__()
        self.policy = policy
        self.launches = launches
        self.candidate_file = candidate_file
        self.module = module
        self.calls: Counter = Counter()
        self.kinds: dict[str, str] = {}
        self.refused: dict[str, int | None] = {}

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # as harness.checks.guards.AtenRecorder: no TorchDynamo in a sealed child

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        state = self._own_state()  # before the call: an in-place update reads what the module holds
        result = func(*args, **kwargs)
        if not self.launches.in_launch and not on_fake_tensors((args, kwargs, result)):
            if self.launches.watch is not None:
                self.launches.watch.on_aten(func)
            name = str(func)
            self.calls[name] += 1
            kind = self.kind(func, tensors_in((args, kwargs)), tensors_in(result), state)
            self.kinds[name] = min(self.kinds.get(name, kind), kind, key=CALL_KINDS.index)
            if kind == "compute" and name not in self.refused:
                self.refused[name] = candidate_line(self.candidate_file)
        return result

    def _own_state(self) -> set[int]:
        """The storages of the module's integer and boolean buffers (a counter reassigned in forward
        is a buffer again)."""
        if self.module is None:
            return set()
        return {b.untyped_storage().data_ptr() for b in self.module.buffers() if not _floating(b)}

    def kind(self, func, read: list, made: list, state: set[int]) -> str:
        if is_allowed(func):
            return "plumbing"
        if read and all(t.untyped_storage().data_ptr() in state for t in read) and not any(map(_floating, made)):
            return "bookkeeping"
        if self.policy == "all" or (self.policy == "gemm" and func._schema.name.split("::")[-1] in LIBRARY_GEMM):
            return "library"
        return "compute"

    def refusal(self) -> str | None:
        if not self.refused:
            return None
        called = ", ".join(f"{name} ({'line ' + str(line) if line else 'line unknown'})"
                           for name, line in self.refused.items())
        allowed = {"none": "nothing may stay in torch", "gemm": "only matrix products and convolutions may stay "
                   "in torch"}[self.policy]
        return (f"ModelNew.forward called PyTorch compute: {called}; under the library policy "
                f"'{self.policy}' {allowed} (integer state of the module's own buffers, such as a batch counter, "
                "may): compute the rest in @triton.jit kernels")


def _floating(t) -> bool:
    return t.dtype.is_floating_point or t.dtype.is_complex


def judge_program_call(draw: str, reference, answer, inputs: list, job, instruments, candidate_file: str,
                       on_answer=lambda: None, on_reference=lambda: None) -> tuple[dict, bool]:
    """The test record of one draw (a ``harness.verdict.TestResult`` as data) and whether the
    evaluation cannot go on (a lost CUDA context, an exit). ``on_answer`` and ``on_reference`` are
    called as each side starts, so that a crash or a hang is blamed on the right one."""
    launches, watch = instruments
    result: dict[str, object] = {"id": draw, "source": draw, "input": described(inputs), "dtype": inputs_dtype(inputs),
                                 "passed": False}
    answer_inputs, kept = clone_value(inputs), clone_value(inputs)
    poison_freed_memory(tensors_in(answer_inputs), copies=3)  # the last draw freed three copies of its inputs
    calls = AtenCalls(job.allow_library, launches, candidate_file, answer if isinstance(answer, torch.nn.Module) else None)
    before = launches.launches
    on_answer()
    started = time.perf_counter()
    try:
        with calls:
            actual = watch.wrap(answer)(*answer_inputs)
        synchronize(job.device)
    except BaseException as exc:  # noqa: BLE001 - the answer's failure (sys.exit too), reported as such
        raised = candidate_raised(exc, candidate_file)
        fatal = bool(raised.pop("context_lost", False)) or not isinstance(exc, Exception)
        return result | raised, fatal
    result["duration_ms"] = round((time.perf_counter() - started) * 1000, 3)
    result["aten_calls"] = dict(calls.calls)
    result["aten_call_kinds"] = dict(calls.kinds)
    failure = watch.failure() or watch.judge_changes("after ModelNew.forward")
    if failure:
        return result | {k: failure[k] for k in ("error_kind", "message")}, False
    if not same_tensors(answer_inputs, kept):
        return result | {"error_kind": "input_mutated", "message": "ModelNew.forward changed an input tensor in "
                                                                   "place; it must leave its inputs as they were"}, False
    del answer_inputs, kept  # a problem's inputs can be gigabytes: what is no longer needed goes now
    on_reference()
    expected = reference(*clone_value(inputs))
    synchronize(job.device)
    truth = Float64Program(reference, inputs)
    failure = _checked(actual, expected, truth, calls, launches.launches - before, job.allow_library)
    if failure:
        return result | failure, False
    return result | {"passed": True}, False


class Float64Program:
    """The reference with every floating weight and input in float64, run the first time a comparison
    needs it (never where the answer is within the tolerance of the float32 reference); None where
    it cannot run so (an operator without float64 on this device)."""

    def __init__(self, reference, inputs: list):
        self.reference, self.inputs, self.ran, self.output = reference, inputs, False, None

    def __call__(self):
        if not self.ran:
            self.ran = True
            try:
                model = copy.deepcopy(self.reference).to(torch.float64)
                wide = [v.to(torch.float64) if isinstance(v, torch.Tensor) and v.dtype.is_floating_point else v
                        for v in self.inputs]
                self.output = model(*wide)
            except Exception:  # noqa: BLE001 - no float64 run: the float32 reference alone decides
                self.output = None
        return self.output


def _checked(actual, expected, truth, calls: AtenCalls, launched: int, policy: str) -> dict | None:
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
    """``compare`` of the answer's outputs with the reference's and, where that fails, with the
    float64 run's (``truth()``, run then), each small output (RMS below ``SMALL_OUTPUT_RMS``) in
    units of its RMS (see the module's docstring). An output of more than ``PIECE_ELEMENTS`` values
    is judged a chunk at a time, so that its float64 copies fit beside the program's own memory."""
    whole = compare(expected, actual, "output", mode="metadata")  # structure, shapes, dtypes: no values read
    if whole is not None and whole["error_kind"] in STRUCTURAL:
        return whole
    flat_expected, flat_actual = flat_values(expected), flat_values(actual)
    for i, (e, a) in enumerate(zip(flat_expected, flat_actual)):
        path = "output" if len(flat_expected) == 1 else f"output[{i}]"
        scale = _small_scale(e)
        if not isinstance(e, torch.Tensor):
            failure = compare(e, a, path)
        else:
            failure = _compare_tensor(e, a, lambda: _truth_of(truth, i, len(flat_expected), e), path, scale)
        if failure is not None:
            return failure
    return None


def _compare_tensor(e, a, truth, path: str, scale: float | None) -> dict | None:
    if scale is not None:
        e, a = e / scale, a / scale
    if all(compare(pe, pa, path, report=False) is None for pe, pa in chunks(e, a, size=PIECE_ELEMENTS)):
        return None
    t = truth()
    if t is not None and scale is not None:
        t = t / scale
    sides = [e, a] if t is None else [e, a, t]
    pieces = [sides] if e.numel() <= PIECE_ELEMENTS else chunks(*sides, size=PIECE_ELEMENTS)  # small: its own shape
    failure, where = None, ""
    for number, part in enumerate(pieces):
        failure = compare(part[0], part[1], path, exact=Exact(truth=part[2]) if t is not None else None)
        if failure is not None:
            if e.numel() > PIECE_ELEMENTS:
                start = number * PIECE_ELEMENTS
                where = (f" (judged {PIECE_ELEMENTS} values at a time: the first failing piece holds values "
                         f"{start} to {start + part[0].numel() - 1} of the output flattened, and indices are within it)")
            break
    if failure is not None:
        failure["message"] += where
        if scale is not None:
            failure["message"] += (f" (values in units of the output's RMS, {scale:.3g}: the tolerance is relative "
                                   "to the output's scale)")
    return failure


def _truth_of(truth, i: int, count: int, expected: torch.Tensor):
    """The float64 run's ``i``-th output of ``count``, where it is a tensor of the expected shape; else None."""
    run = truth()
    flat = flat_values(run) if run is not None else []
    if len(flat) == count and isinstance(flat[i], torch.Tensor) and flat[i].shape == expected.shape:
        return flat[i]
    return None


def _small_scale(output) -> float | None:
    """The RMS of an output's finite values where it is below ``SMALL_OUTPUT_RMS``, else None
    (summed a chunk at a time in float64: outputs can hold billions of values)."""
    if not isinstance(output, torch.Tensor) or not output.dtype.is_floating_point or output.numel() == 0:
        return None
    squares, count = 0.0, 0
    for (part,) in chunks(output.detach()):
        part = part.to(torch.float64)
        finite = torch.isfinite(part)
        squares += float(torch.where(finite, part, 0.0).square().sum())
        count += int(finite.sum())
    rms = (squares / count) ** 0.5 if count else 0.0
    return rms if 0.0 < rms < SMALL_OUTPUT_RMS else None


def described(inputs: list) -> str:
    """``float32[16, 512], 3``: a program's inputs as its tests and timings name them."""
    return ", ".join(f"{str(v.dtype).removeprefix('torch.')}{list(v.shape)}" if isinstance(v, torch.Tensor)
                     else repr(v)[:40] for v in inputs)


def inputs_dtype(inputs: list) -> str | None:
    """The dtype of a program's first tensor input."""
    return next((str(v.dtype).removeprefix("torch.") for v in inputs if isinstance(v, torch.Tensor)), None)
