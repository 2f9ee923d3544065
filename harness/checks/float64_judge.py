"""A floating mismatch judged again against the op run in float64 (the float64 rules in
``harness.checks.compare``): ``judged`` compares, and where a floating mismatch asks for it, runs
the op once more on the inputs cast to float64 (``Float64Run``); for a reduction it also scales
the allowance by the terms' magnitudes.
"""
from __future__ import annotations

import torch

from bbagent.harness.checks.compare import Exact, compare
from bbagent.harness.checks.reference import out_of_memory, reference_call, reference_refused
from bbagent.harness.inputs import clone_value, map_tensors, tensors_in
from bbagent.harness.variants import schema_arguments


def judged(expected, actual, mode: str, exact: "Float64Run", path: str = "output",
           argument: str | None = None) -> dict | None:
    """``compare``, with a floating mismatch re-judged against the float64 run (of the
    returned values, or of the written ``argument``): first without the reduction allowance,
    then, where that fails and the op is a reduction, with it (it only loosens, so a pass
    without it is a pass; a float16 matmul mostly needs none, and the two runs on ones and
    magnitudes cost as much as the float64 run itself). The first comparison reports nothing
    where a re-judgement follows (counting and quoting the mismatches of a float16 matmul cost
    more than judging it)."""
    failure = compare(expected, actual, path, mode, report=False)  # UNREPORTED is always re-judged
    if exact.wanted(failure):
        truth = exact.truth(argument, scaled=False)
        failure = compare(expected, actual, path, mode, truth)
        if failure and truth is not None and exact.is_reduction():
            failure = compare(expected, actual, path, mode, exact.truth(argument, scaled=True))
        if failure and truth is None and exact.unavailable:
            failure["message"] += (f"; no float64 run of the op could be made to re-judge it ({exact.unavailable}), "
                                   "so aten's own rounding is the reference")
    return failure


class Float64Run:
    """The op run once more on the test's inputs cast to float64, only when a floating
    mismatch asks for it (the float64 rules in ``harness.checks.compare``). For reductions (the op
    on all-ones inputs gives integer term counts >= 2, as sum and mm do) it also runs the op
    on the inputs' magnitudes, when asked; ``sqrt(n)`` times that (n the term count) is the scale
    of any float32 accumulation order's rounding error."""

    def __init__(self, op, inputs: tuple[tuple, dict]):
        self.op, self.inputs = op, inputs
        self.ran = self.scaled = False
        self.values = self.args = self.kwargs = None
        self.scale = None
        self.unavailable: str | None = None  # why the float64 run could not be made

    @staticmethod
    def wanted(failure: dict | None) -> bool:
        return failure is not None and (failure["error_kind"] == "nan_mismatch"
                                  or (failure["error_kind"] == "mismatch" and "max_abs_error" in failure))

    def _run_on(self, convert):
        # ``convert`` makes a new tensor of each floating one; the rest are cloned (the op may write them)
        args, kwargs = map_tensors(self.inputs, lambda t: convert(t) if _is_float(t) else clone_value(t))
        # a floating dtype argument, positional or keyword, would cast the float64 inputs back
        # (cumsum(x, 1, dtype=float16); _softmax_backward_data(grad, out, dim, float16))
        args = tuple(_float64_dtype(v) for v in args)
        kwargs = {k: _float64_dtype(v) for k, v in kwargs.items()}
        return reference_call(self.op, args, kwargs), args, kwargs

    def _run(self) -> None:
        if self.ran:
            return
        self.ran = True
        try:
            self.values, self.args, self.kwargs = self._run_on(lambda t: t.to(torch.float64, copy=True))
        except Exception as exc:  # noqa: BLE001 - the op has no float64 version here: nothing is loosened
            self.ran = not out_of_memory(exc)  # asked again after the retry
            reference_refused(exc, f"the float64 reference of {self.op}")
            self.unavailable = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ''}"

    def is_reduction(self) -> bool:
        """Whether the op sums terms here (the op on all-ones inputs gives integer counts >= 2);
        the magnitudes' run is then made, for ``truth(scaled=True)``."""
        self._run()
        if not self.scaled and self.values is not None:
            self.scaled = True
            try:
                counts, _, _ = self._run_on(lambda t: torch.ones_like(t, dtype=torch.float64))
                if _is_term_count(counts):
                    magnitudes, _, _ = self._run_on(lambda t: t.to(torch.float64).abs())
                    self.scale = _times_sqrt(magnitudes, counts)
            except Exception as exc:  # noqa: BLE001 - no magnitudes' run: the allowance is not scaled
                self.scaled = not out_of_memory(exc)
                reference_refused(exc, f"the float64 reference of {self.op}")
                self.scale = None
        return self.scale is not None

    def truth(self, argument: str | None = None, scaled: bool = False):
        """The float64 values (``Exact`` leaves) of the result, or of the written ``argument``
        (which, when the op also returns it, gets the result's scale); None where there is no
        float64 run."""
        self._run()
        if self.values is None:
            return None
        scale = self.scale if scaled else None
        if argument is None:
            return _pair(self.values, scale)
        # a written argument that is also returned (out=, in-place self) gets the result's allowance
        for name, _, value in schema_arguments(self.op, self.args, self.kwargs):
            if name == argument:
                return _pair(value, _scale_of_returned(value, self.values, scale))
        return None


def _is_float(t: torch.Tensor) -> bool:
    return t.dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _is_term_count(value) -> bool:
    tensors = tensors_in(value)
    return bool(tensors) and all(  # finite, whole and >= 2, read back once per tensor
        t.is_floating_point() and t.numel() and bool((torch.isfinite(t) & (t == t.round()) & (t >= 2)).all())
        for t in tensors)


def _scale_of_returned(value, truth, scale):
    """The reduction scale of ``value`` when the op returned it (itself, or as one of its outputs)."""
    if value is truth:
        return scale
    if isinstance(truth, (tuple, list)):
        scales = scale if isinstance(scale, (tuple, list)) else [None] * len(truth)
        return next((s for t, s in zip(truth, scales) if t is value), None)
    return None


def _times_sqrt(magnitudes, counts):
    """``sqrt(n) * sum|terms|`` per element, over matching output structures."""
    if isinstance(magnitudes, torch.Tensor) and isinstance(counts, torch.Tensor):
        return magnitudes * counts.sqrt()
    if isinstance(magnitudes, (tuple, list)) and isinstance(counts, (tuple, list)):
        return type(magnitudes)(_times_sqrt(m, c) for m, c in zip(magnitudes, counts))
    return None


def _pair(truth, scale):
    """``Exact`` leaves for a truth structure (scale, where given, has the same structure)."""
    if isinstance(truth, torch.Tensor):
        return Exact(truth, scale if isinstance(scale, torch.Tensor) else None)
    if isinstance(truth, (tuple, list)):
        scales = scale if isinstance(scale, (tuple, list)) and len(scale) == len(truth) else [None] * len(truth)
        return type(truth)(_pair(t, s) for t, s in zip(truth, scales))
    return truth


def _float64_dtype(value):
    return torch.float64 if isinstance(value, torch.dtype) and value.is_floating_point else value
