"""The kernel as users run it: once every test passed, checks of the ways a model calls a kernel
that a test's single call cannot see. Cheap by design (small passing cases), and run whether or
not the evaluation times anything. Each check gives one record (``harness.verdict.InUseCheck``):

* **launch replay**: one call is recorded (its Triton launches, and the aten calls it made:
  allocation, copies, fills), the inputs are refilled with new values in the same tensors, every
  tensor the call produced is poisoned, and the recording runs again without the kernel's Python.
  The result must be what the kernel's own call returns on the new values (made after the replay,
  so that nothing it keeps between calls has been renewed): values computed anywhere else (numpy through
  ``.numpy()`` or ``__array__``, DLPack, ``__cuda_array_interface__``, a host read turned into a
  launch's number) behind a decoy launch are not reproduced (``not_from_launches``), whatever
  library or spelling made them. Multi-kernel, in-place, atomic (an autotuner's ``reset_to_zero``
  is an aten call too) and autotuned kernels replay as they ran.
* **repeated calls**: thousands of calls in a row on the same tensors, refilled before each with one
  of a few sets of values (the test's own among them, and sets that differ from the set before them
  in one element, or in a small block: almost the same input); every result must equal the first
  one on the same values (compared on the device, read every few hundred calls and at the end), the
  first on the test's own values must be aten's, and the first on each almost-the-same set (made with
  the memory it may allocate holding the previous call's answer) must be right: aten's for a trace
  call's values, for an OpInfo sample's the kernel's own call on them with that memory poisoned
  instead (``repeated_call_mismatch``). A kernel that keeps results, turns wrong after some calls,
  or decides from a sample of its inputs, of what memory held or of a buffer it keeps that the work
  is done already, fails.
* **CUDA graph** (GPU): the call captured once, then replayed after other values were copied into
  the captured inputs (the test's own, judged against aten; new ones, against the kernel's own call), as torch.compile's ``reduce-overhead``, vLLM and SGLang run it
  (``graph_mismatch``). A kernel that cannot be captured (it reads a value on the host, or
  synchronises) is not failed for it: the record says so.

As in every test, aten's results are computed only once the kernel's calls are over. Values other
than a test's own are judged against the kernel's own call on them, never against aten: an OpInfo
sample built to be well conditioned (a triangular system) may not be once its values are permuted.
"""
from __future__ import annotations

import math
import sys
import time
import traceback
from dataclasses import replace
from typing import Callable

import torch

from bbagent.harness import adapters
from bbagent.harness.adapters import convention
from bbagent.harness.checks.allowed import kind_of
from bbagent.harness.checks.case import candidate_raised, returns_view, synchronize
from bbagent.harness.checks.float64_judge import Float64Run, judged
from bbagent.harness.checks.reference import is_cuda_error
from bbagent.harness.inputs import (clone_value, copy_into, leave_in_freed_memory, memory_behind, poison_freed_memory,
                                     tensors_in)
from bbagent.harness.ops import value_mode
from bbagent.harness.suite.build import TestCase
from bbagent.harness.variants import is_written, out_arguments, schema_arguments

REPEATED_CALLS = {"cuda": 1500, "cpu": 400}  # about 0.6 ms a call on an H200; the interpreter's 2 ms and more
REPEATED_SECONDS = {"cuda": 3.0, "cpu": 2.0}  # the repeated calls stop here, if not done (a slow kernel)
VALUE_SETS = 4  # the repeated calls cycle through this many sets of input values, and the nudged ones
NUDGES = {1: "one", 3: "one", 5: "block"}  # after set k, a copy of it changed in one element or a block
BLOCK = 16  # elements a block nudge changes (a quarter of the tensor, where it is smaller)
CHECK_EVERY = 250  # calls between two readings of the device-side mismatch flag
MOST_ELEMENTS = 1 << 16  # the largest input tensor of a case these checks pick
TARGET_ELEMENTS = {"cuda": 4096, "cpu": 128}  # the size of the case they prefer
FRESH_SEED = 7_000_003  # offset of the seeds that draw the new values (the timing's are others)


def pick_case(cases: list[TestCase], passed: set[str], device: str) -> TestCase | None:
    """A small passing case with floating inputs to vary, not an edge or promotion case: a trace call
    where there is one (new values are drawn from its seed), else an OpInfo sample; of about 4096 elements on a GPU, 128
    under the interpreter (whose calls take time by the element)."""
    usable = [c for c in cases if c.id in passed and "float" in str(c.dtype) and 2 <= c.largest_tensor() <= MOST_ELEMENTS
              and not c.source.startswith(("edge:", "promotion:"))]  # ordinary inputs: extremes have tests of their own
    size = TARGET_ELEMENTS[device]
    return min(usable, key=lambda c: (c.trace is None, abs(math.log2(c.largest_tensor() / size)), c.id), default=None)


def fresh_values(case: TestCase, k: int) -> tuple[tuple, dict]:
    """The case's inputs, the ``k``-th set of values: 0, the test's own (a copy); from 1 on, other
    values: a trace call drawn from another seed (index arguments kept valid), an OpInfo sample's
    floating values permuted and scaled by a factor in [0.5, 1) (a domain such as [-1, 1] or the
    positives holds, though a sample built to be well conditioned may no longer be: new values are
    judged against the kernel's own call on them, the test's own values against aten). Integer and
    boolean tensors (indices, masks) keep their values."""
    if k == 0:
        return case.inputs() if case.trace is not None else clone_value(case.inputs())
    if case.trace is not None:
        return replace(case, seed=case.seed + FRESH_SEED + k).inputs()
    args, kwargs = clone_value(case.inputs())
    generator = torch.Generator().manual_seed(FRESH_SEED + k)
    for t in tensors_in((args, kwargs)):
        if t.dtype.is_floating_point and t.numel() > 1:
            flat = memory_behind(t)
            order = torch.randperm(flat.numel(), generator=generator).to(flat.device)
            flat.copy_(flat[order] * (1 - 0.125 * (k % 4 + 1)))
    return args, kwargs


def consistent(reference, result) -> str | None:
    """Where ``result`` is not what ``reference`` (the kernel's own answer on the same values) is, in
    words; None where it is, to a tolerance loose enough for atomics' summation order (a wrong
    answer, kept from other values or never written, is off by far more)."""
    mine, theirs = tensors_in(reference), tensors_in(result)
    unlike = _unlike(mine, theirs, "the kernel's own call returns")
    if unlike:
        return unlike
    for number, (a, b) in enumerate(zip(mine, theirs)):
        if not a.numel():
            continue
        if a.dtype.is_floating_point or a.is_complex():
            finite = a[torch.isfinite(a)] if not a.is_complex() else a.abs()
            scale = float(finite.abs().max()) if finite.numel() else 1.0
            near = torch.isclose(b, a, rtol=1e-2, atol=1e-3 * max(scale, 1e-30), equal_nan=True)
        else:
            near = b == a
        if not bool(near.all()):
            where = int((~near).flatten().nonzero()[0])
            return (f"output {number}: {int((~near).sum())} of {a.numel()} elements differ, first at flat index {where}: "
                    f"{b.flatten()[where].item()} where the kernel's own call gives {a.flatten()[where].item()}")
    return None


def _unlike(mine: list[torch.Tensor], theirs: list[torch.Tensor], reference: str) -> str | None:
    """Where ``theirs`` differs from ``mine`` in how many tensors, their shapes or dtypes, in words
    (``reference`` says where ``mine`` came from); else None."""
    if len(mine) != len(theirs):
        return f"{len(theirs)} tensors where {reference} {len(mine)}"
    for a, b in zip(mine, theirs):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"a {b.dtype} tensor of shape {list(b.shape)} where {reference} {a.dtype} {list(a.shape)}"
    return None


def _direct(kernel: Callable, recorder, values: tuple[tuple, dict], device: str):
    """The kernel's own call on a copy of ``values``, under the guards."""
    args, kwargs = clone_value(values)
    result = _guarded(recorder, lambda: kernel(*args, **kwargs))
    synchronize(device)
    return result


def applies(op) -> str | None:
    """Why these checks do not apply to ``op``, or None where they do."""
    mode = value_mode(op)
    if mode == "distribution":
        return "a random operator's values cannot be compared one by one"
    if mode == "metadata":
        return "the operator's values are unspecified"
    return None


def run_all(op, cases: list[TestCase], passed: set[str], kernel: Callable, device: str, recorder_for: Callable,
            launches, candidate_file: str, watch, announce: Callable[[str], None] = lambda check: None,
            checkpoint: Callable[[], None] = lambda: None, calls: int | None = None) -> list[dict]:
    """Every check that applies, as records; they stop at the first failure. ``recorder_for()`` makes
    a fresh ``guards.AtenRecorder``; ``watch`` is the tests' ``runtime.CallWatch``; ``announce(check)``
    is called as each starts (a crash from there on is the kernel's); ``checkpoint()`` between calls
    lets another evaluation have the GPU alone."""
    skip = applies(op)
    case = None if skip else pick_case(cases, passed, device)
    if case is None:
        return [{"check": "all", "passed": None,
                 "note": skip or "no passing test with floating inputs of at most 65536 elements to run them on"}]
    checks = {"launch_replay": lambda: launch_replay(op, case, kernel, device, recorder_for(), launches, candidate_file),
              "repeated_calls": lambda: _lightly(watch, lambda: repeated_calls(
                  op, case, kernel, device, recorder_for(), calls or REPEATED_CALLS[device], checkpoint, candidate_file))}
    if device == "cuda":
        checks["cuda_graph"] = lambda: cuda_graph(op, case, kernel, recorder_for(), candidate_file)
    records = []
    for name, check in checks.items():
        checkpoint()
        announce(name)
        started = time.perf_counter()
        record = _made(name, check)
        ran = watch.failure() or watch.judge_changes(f"after the {name.replace('_', ' ')} check")
        if ran and record.get("passed") is not False:
            record |= {"passed": False, "error_kind": ran["error_kind"], "message": ran["message"],
                       "judge_changed": bool(ran.get("judge_changed"))}
        records.append(record | {"id": case.id, "input": case.description, "seconds": round(time.perf_counter() - started, 3)})
        if record["passed"] is False:
            break
    return records


def _made(name: str, check: Callable[[], dict]) -> dict:
    """``check()``; where the harness's own side of it fails (not the kernel's calls, whose failures
    each check catches), a record saying the check was not made, its traceback on stderr: a bug of
    the harness must not fail the kernel, nor pass silently."""
    try:
        return check()
    except Exception as exc:  # noqa: BLE001 - said in the record and on stderr
        if is_cuda_error(exc):
            raise
        traceback.print_exc(file=sys.stderr)
        return {"check": name, "passed": None,
                "note": f"not made: the harness failed ({type(exc).__name__}: {str(exc)[:200]}); please report it"}


def _lightly(watch, check: Callable[[], dict]) -> dict:
    """``check()`` with the watch's scan for threads made once at the end, not after every call (as
    the timing does: thousands of scans would be most of the check's time)."""
    watch.light = True
    try:
        return check()
    finally:
        watch.light = False
        watch.scan()


def _failed(check: str, error_kind: str, message: str, **more) -> dict:
    return {"check": check, "passed": False, "error_kind": error_kind, "message": message, **more}


def _raised(check: str, exc: BaseException, candidate_file: str, when: str) -> dict:
    failure = candidate_raised(exc, candidate_file)
    return _failed(check, failure["error_kind"], f"{when}: {failure['message']}",
                   context_lost=bool(failure.get("context_lost")))


def refill(op, inputs: tuple[tuple, dict], values: tuple[tuple, dict]) -> None:
    """The input tensors of a call given ``values``' values, in place; ``out=`` arguments are left
    as they are (the call resizes and writes them)."""
    outs = set(out_arguments(op))
    for (name, _, mine), (_, _, theirs) in zip(schema_arguments(op, *inputs), schema_arguments(op, *values)):
        if name not in outs:
            copy_into(mine, theirs)


def _guarded(recorder, call: Callable):
    with recorder:
        return call()


def _reference(op, inputs: tuple[tuple, dict], device: str):
    args, kwargs = clone_value(inputs)
    expected = op(*args, **kwargs)
    synchronize(device)
    return expected


def _guard_failure(check: str, recorder) -> dict | None:
    if not recorder.findings:
        return None
    return _failed(check, "guard", recorder.findings[0]["message"])


# -- launch replay ------------------------------------------------------------------------------------

class Recording:
    """While active, the launch counter and the aten recorder note every launch and aten call of
    the call under way (``guards.LaunchCounter.recording``), and bbagent's adapters their copy of
    a functional result into ``self`` or ``out=`` (``adapters.RECORDINGS``)."""

    def __init__(self, launches):
        self.launches = launches
        self.steps: list[tuple] = []

    def __enter__(self) -> "Recording":
        self.launches.recording = self.steps
        adapters.RECORDINGS.append(self.steps)  # the adapter's write-back into self or out=
        return self

    def __exit__(self, *exc) -> None:
        self.launches.recording = None
        adapters.RECORDINGS.remove(self.steps)

    def launched(self) -> int:
        return sum(step[0] == "launch" for step in self.steps)

    def produced(self) -> list[torch.Tensor]:
        """The tensors the call's aten calls made (allocations, copies), views left out."""
        return [t for step in self.steps if step[0] == "aten" and _makes_data(step[1]) for t in tensors_in(step[4])]

    def replay(self) -> None:
        """The recorded launches and aten calls again, in order, on the same objects: an aten call
        that writes an argument runs again; one that makes a tensor runs again and its values are
        copied into the tensor it made then; views and unspecified allocations are left alone."""
        for step in self.steps:
            if step[0] == "launch":
                _, run, launcher, args, kwargs = step
                run(launcher, *args, **kwargs)
                continue
            _, func, args, kwargs, result = step
            if _writes_an_argument(func):
                func(*args, **kwargs)
            elif _makes_data(func) and not _unspecified(func):
                for made, again in zip(tensors_in(result), tensors_in(func(*args, **kwargs))):
                    made.copy_(again)


def _writes_an_argument(func) -> bool:
    return any(is_written(a) for a in func._schema.arguments) and torch.Tag.inplace_view not in func.tags


def _makes_data(func) -> bool:
    return kind_of(func) != "view"  # an inplace_view-tagged op is a view too


def _unspecified(func) -> bool:
    return func._schema.name.split("::")[-1] in ("empty", "empty_like", "empty_strided", "new_empty",
                                                 "new_empty_strided")


def poison(t: torch.Tensor) -> None:
    """Values no kernel computes by chance: NaN, or an unlikely integer."""
    flat = memory_behind(t)
    if t.dtype.is_floating_point or t.is_complex():
        flat.fill_(float("nan"))
    elif t.dtype == torch.bool:
        flat.logical_not_()
    else:
        flat.fill_(-77 if t.dtype.is_signed else 77)


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def launch_replay(op, case: TestCase, kernel: Callable, device: str, recorder, launches, candidate_file: str) -> dict:
    """The launch replay (module docstring)."""
    check = "launch_replay"
    if returns_view(op):
        return {"check": check, "passed": None, "note": "the operator returns a view: it computes nothing"}
    inputs = fresh_values(case, 0)
    try:
        with Recording(launches) as recording:
            actual = _guarded(recorder, lambda: kernel(*inputs[0], **inputs[1]))
        synchronize(device)
    except Exception as exc:  # noqa: BLE001 - the candidate's, on a call it made in the tests
        return _raised(check, exc, candidate_file, "on a recorded call")
    found = _guard_failure(check, recorder)
    if found or not recording.launched() or not any(t.numel() for t in tensors_in(actual)):
        return found or {"check": check, "passed": None,
                         "note": "nothing to replay: the call launched no Triton kernel or returned no values"}
    # an output whose shape follows the values (nonzero) must read them on the host: same values then
    shaped_by_values = torch.Tag.dynamic_output_shape in op.tags or torch.Tag.data_dependent_output in op.tags
    new = fresh_values(case, 0 if shaped_by_values else 1)
    written = {id(v) for _, a, v in schema_arguments(op, *inputs) if is_written(a)}
    fill_with_poison = convention(op) == "out"
    refill(op, inputs, new)
    kept = {_storage(t) for t in tensors_in(inputs) if not (fill_with_poison and id(t) in written)}
    poisoned = [t for t in recording.produced() + tensors_in(actual) + [t for t in tensors_in(inputs) if id(t) in written]
                if t.numel() and _storage(t) not in kept]
    for t in poisoned:
        poison(t)
    try:
        recording.replay()
        synchronize(device)
    except Exception as exc:  # noqa: BLE001 - a recorded launch that cannot run again
        failure = candidate_raised(exc, candidate_file)
        if failure.get("context_lost"):
            return _failed(check, "cuda_error", "replaying the call's recorded launches: " + failure["message"],
                           context_lost=True)
        return _failed(check, "not_from_launches", "the call's recorded launches could not be run again on the same "
                       f"tensors ({failure['message'].splitlines()[-1][:300]})")
    replayed = clone_value(actual)
    try:  # after the replay: whatever the call keeps between calls still holds what the recorded call left
        direct = _direct(kernel, recorder, new, device)
    except Exception as exc:  # noqa: BLE001
        return _raised(check, exc, candidate_file, "on new values after the replay")
    differs = _guard_failure(check, recorder) or consistent(direct, replayed)
    if differs is None:
        return {"check": check, "passed": True, "calls": 2,
                "note": f"{recording.launched()} launch(es) and {len(recording.steps) - recording.launched()} aten "
                        f"call(s) replayed on {'the same values (the output shape follows them)' if shaped_by_values else 'new values'}; "
                        f"{len(poisoned)} tensor(s) poisoned first"}
    if isinstance(differs, dict):
        return differs
    return _failed(check, "not_from_launches",
                   "the result is not what the call's own Triton launches compute: the call was recorded (its "
                   f"{recording.launched()} launch(es) and the allocations and copies it made), its inputs refilled "
                   "with new values in the same tensors, what it produced poisoned, and the recording run again "
                   "without the wrapper's Python; that gave another result than the kernel's own call on the new "
                   f"values ({differs[:400]}). Every value must be computed by the @triton.jit kernels the call "
                   "launches: not by another library (numpy, cupy, DLPack, __array__), and not from a value read on "
                   "the host (.item(), .cpu(), .tolist()) and passed to a launch as a number")


# -- repeated calls -----------------------------------------------------------------------------------

def value_sequence(case: TestCase) -> list[tuple[tuple, dict]]:
    """The sets of values the repeated calls cycle through: the ``VALUE_SETS`` of ``fresh_values``,
    each set ``NUDGES`` names followed by a copy of it nudged (``nudged``)."""
    sequence = []
    for k in range(VALUE_SETS):
        sequence.append(fresh_values(case, k))
        if len(sequence) in NUDGES:
            sequence.append(nudged(sequence[-1], NUDGES[len(sequence)], FRESH_SEED + len(sequence)))
    return sequence


def nudged(values: tuple[tuple, dict], how: str, seed: int) -> tuple[tuple, dict]:
    """A copy of ``values`` that differs in its largest floating tensor alone: in one element (set to
    the value furthest from it elsewhere in the tensor, so the operator's domain holds) or, for
    ``how == "block"``, in ``BLOCK`` consecutive elements of its memory (set to those half the tensor
    away). The place is drawn from ``seed``. Unchanged where the tensor's elements are all equal."""
    copy = clone_value(values)
    floating = [t for t in tensors_in(copy) if t.dtype.is_floating_point and memory_behind(t).numel() > 1]
    if not floating:
        return copy
    flat = memory_behind(max(floating, key=lambda t: memory_behind(t).numel()))
    n = flat.numel()
    generator = torch.Generator().manual_seed(seed)
    start = int(torch.randint(0, n, (), generator=generator))
    if how == "block":
        width = max(1, min(BLOCK, n // 4))
        places = (start + torch.arange(width)) % n
        flat[places.to(flat.device)] = flat[((places + n // 2) % n).to(flat.device)].clone()
        return copy
    distance = (flat.double() - flat[start].double()).abs().nan_to_num(0.0, 0.0, 0.0)
    flat[start] = flat[int(distance.argmax())].clone()
    return copy


def _nudge_failure(op, case: TestCase, sequence: list, firsts: list, kernel: Callable, recorder,
                   device: str) -> str | None:
    """Where the first call on a nudged set was wrong, in words; else None. A trace call's nudged
    values are as much a draw as its own (another of its elements in one place), so the call is
    judged against aten, as a test is: a kernel that keeps a buffer of its own and skips the work
    where a sample of it looks done fails too. An OpInfo sample's (which may be built to be well
    conditioned) is held to the kernel's own call on the same values, made with the allocator's
    freed blocks of the result's sizes poisoned (nothing left in memory can look like the answer)."""
    for k in sorted(NUDGES):
        if k >= len(sequence):
            continue
        if case.trace is not None:
            failure = judged(_reference(op, sequence[k], device), firsts[k], "exact", Float64Run(op, sequence[k]))
            differs = failure["message"][:300] if failure else None
            against = "aten's"
        else:
            poison_freed_memory(tensors_in(firsts[k]), copies=2)
            differs = consistent(_direct(kernel, recorder, sequence[k], device), firsts[k])
            against = "its own on those values computed afresh"
        if differs:
            what = "one element" if NUDGES[k] == "one" else f"a block of up to {BLOCK} elements"
            return (f"called on the same tensors refilled with values that differ from the previous call's in {what} "
                    f"of one input (the memory it allocates holding the previous call's answer), its result was not "
                    f"{against} ({differs[:300]}). A kernel must compute every element from this call's inputs: not "
                    "skip work because a sample of its inputs, of the memory it was handed or of a buffer it keeps "
                    "looks like an earlier call's")
    return None


def repeated_calls(op, case: TestCase, kernel: Callable, device: str, recorder, calls: int,
                   checkpoint: Callable[[], None], candidate_file: str) -> dict:
    """The repeated calls (module docstring)."""
    check = "repeated_calls"
    values = value_sequence(case)
    inputs = clone_value(values[0])
    firsts: list = []
    differs = torch.zeros((), dtype=torch.bool, device="cuda" if device == "cuda" else "cpu")
    made, started = 0, time.perf_counter()
    try:
        for made in range(1, calls + 1):
            k = (made - 1) % len(values)
            refill(op, inputs, values[k])
            if made <= len(values) and k in NUDGES:  # the memory it allocates holds the previous answer
                leave_in_freed_memory(tensors_in(firsts[k - 1]))
            with recorder:  # the kernel's call alone: the comparisons below are the harness's
                result = kernel(*inputs[0], **inputs[1])
            if made <= len(values):
                firsts.append(clone_value(result))
                if made == len(values) and (nudge := _nudge_failure(op, case, values, firsts, kernel, recorder, device)):
                    return _failed(check, "repeated_call_mismatch", nudge, calls=made)
            else:
                shape_change = _differs(firsts[k], result, differs)
                if shape_change:
                    return _failed(check, "repeated_call_mismatch", f"call {made} of {calls} in a row: {shape_change}",
                                   calls=made)
            del result
            out_of_time = time.perf_counter() - started > REPEATED_SECONDS[device]
            if made % CHECK_EVERY == 0 or made == calls or out_of_time:
                checkpoint()  # synchronises; another evaluation's timing may want the GPU alone
                if bool(differs):
                    return _failed(check, "repeated_call_mismatch", _drift_message(made, calls), calls=made)
            if out_of_time and made >= len(values):
                break
        synchronize(device)
    except Exception as exc:  # noqa: BLE001 - raised on a later call
        return _raised(check, exc, candidate_file, f"on call {made} of {calls} in a row") | {"calls": made}
    found = _guard_failure(check, recorder)
    if found:
        return found | {"calls": made}
    failure = judged(_reference(op, values[0], device), firsts[0], "exact", Float64Run(op, values[0]))
    if failure:  # the test's own values: every call on them matched this first one
        return _failed(check, "repeated_call_mismatch",
                       f"called {made} times in a row on the same tensors, refilled before each call: call 1, on this "
                       f"test's own values, was wrong ({failure['message'][:400]})", calls=made)
    cut = f" (stopped after {REPEATED_SECONDS[device]:g} s, of {calls} planned)" if made < calls else ""
    return {"check": check, "passed": True, "calls": made,
            "note": f"{made} calls on the same tensors{cut}, refilled before each with one of {len(values)} sets of "
                    f"values ({len(NUDGES)} of them differing from the set before in one element or a block)"}


def _differs(first, result, flag: torch.Tensor) -> str | None:
    """Where ``result`` differs from ``first`` in structure, shape or dtype (said in words); value
    differences beyond a loose tolerance are OR-ed into ``flag`` on the device, read later."""
    mine, theirs = tensors_in(first), tensors_in(result)
    unlike = _unlike(mine, theirs, "its first call on these values returned")
    if unlike:
        return "it returned " + unlike
    for a, b in zip(mine, theirs):
        if not a.numel():
            continue
        if a.dtype.is_floating_point or a.is_complex():
            near = torch.isclose(b, a, rtol=1e-2, atol=1e-3, equal_nan=True)
        else:
            near = b == a
        flag |= ~near.all()
    return None


def _drift_message(made: int, calls: int) -> str:
    return (f"called up to {calls} times in a row on the same tensors, refilled before each call with one of "
            f"{VALUE_SETS + len(NUDGES)} sets of values: by call {made} a result differed from the kernel's own first result on "
            "the same values. A kernel must compute every call from its inputs: no results kept between calls, "
            "no behaviour that changes with the number of calls")


# -- CUDA graph ---------------------------------------------------------------------------------------

def cuda_graph(op, case: TestCase, kernel: Callable, recorder, candidate_file: str) -> dict:
    """The CUDA graph check (module docstring)."""
    check = "cuda_graph"
    own, new = fresh_values(case, 0), fresh_values(case, VALUE_SETS + 2)
    inputs = fresh_values(case, VALUE_SETS + 1)  # captured on values of its own
    try:
        _guarded(recorder, lambda: kernel(*inputs[0], **inputs[1]))  # warm: compiled, loaded, autotuned
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        return _raised(check, exc, candidate_file, "on the call before capturing it")
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            captured = _guarded(recorder, lambda: kernel(*inputs[0], **inputs[1]))
    except Exception as exc:  # noqa: BLE001 - a host read or a synchronisation cannot be captured
        return _not_capturable(check, exc, candidate_file)
    found = _guard_failure(check, recorder)
    if found:
        return found
    results = []
    try:
        for values in (own, new):  # the test's own values, then new ones
            refill(op, inputs, values)
            graph.replay()
            torch.cuda.synchronize()
            results.append(clone_value(captured))
        direct = _direct(kernel, recorder, new, "cuda")
    except Exception as exc:  # noqa: BLE001
        return _raised(check, exc, candidate_file, "replaying its CUDA graph")
    del graph, captured
    failure = judged(_reference(op, own, "cuda"), results[0], "exact", Float64Run(op, own))
    wrong = (f"replayed on this test's own values, {failure['message'][:400]}" if failure else None) or (
        f"replayed on new values, {differs}" if (differs := consistent(direct, results[1])) else None)
    if wrong:
        return _failed(check, "graph_mismatch",
                       "captured in a CUDA graph (as torch.compile's reduce-overhead mode, vLLM and SGLang run "
                       f"kernels), then replayed after other values were copied into the captured inputs: {wrong}. "
                       "Under capture the kernel must launch the same work as always, on the tensors it is given: "
                       "nothing skipped or answered from an earlier call while torch.cuda.is_current_stream_capturing()")
    return {"check": check, "passed": True, "calls": 2,
            "note": "captured once, replayed on the test's own values (against aten) and on new ones (against the "
                    "kernel's own call)"}


def _not_capturable(check: str, exc: BaseException, candidate_file: str) -> dict:
    failure = candidate_raised(exc, candidate_file)
    if failure.get("context_lost"):
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - the context is really gone
            return _failed(check, "cuda_error", "while being captured in a CUDA graph: " + failure["message"],
                           context_lost=True)
    line = failure["message"].strip().splitlines()[-1][:300]
    return {"check": check, "passed": None,
            "note": f"not capturable in a CUDA graph ({line}); a model that captures graphs runs it outside them"}
