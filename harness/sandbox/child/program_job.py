"""The sandbox child for a program problem: is ``ModelNew`` the reference ``Model``, computed?

Contained and sealed as for an operator (``harness.sandbox.child.preparation``), with the same run-time
watch (threads, streams, the judge's state) and launch counter. The reference is the problem's
text, run before the seal; the answer is imported after it. Both are built from the problem's
constructor arguments under one seed, then the answer is given the reference's ``state_dict``, so
whatever its own initialisation did, its weights are the reference's (a ``state_dict`` it cannot
load is its failure, ``weights_mismatch``).

Each test is one draw (``DRAWS``): the problem's own ``get_inputs()``; signed inputs of the same
shapes; and signed inputs with the reference's parameters perturbed (norm layers start at weight 1
and bias 0, where ignoring them passes). A fourth, ``smaller``, is the program at smaller, odd
sizes where it allows them (``harness.program_sizes``: its size constants changed in its text, the
first change the reference runs at, tried before the seal; skipped, with why, where none does):
the reference and ``ModelNew`` built anew from that text's ``get_init_inputs()``, the parameters
perturbed, signed inputs of its ``get_inputs()``' shapes; where the answer's module holds a copy
of a changed constant with the problem's value, the copy changes with it for that draw. Per test the answer runs first, on its own copy of the
inputs, with freed memory poisoned, so no reference result exists for it to find; then the
reference, on another copy, and the reference in float64 where a comparison needs it. The answer must leave its inputs as
they were, return plain tensors, launch a Triton kernel (unless the library policy is ``all``)
and call no aten compute beyond what the policy allows (``harness.checks.policy.LIBRARY_POLICIES``); its
outputs are compared by ``harness.checks.program_compare``.
"""
from __future__ import annotations

import contextlib
import copy
import gc
import os
import sys
import time

from bbagent.harness import events, gpu_pause
from bbagent.harness.sandbox.job import Job

DRAWS = (("given", "the problem's get_inputs()"),
         ("signed", "signed inputs (standard normal) of get_inputs()' shapes"),
         ("perturbed", "signed inputs x3, the reference's parameters perturbed"))


def run_program_job(job: Job, send) -> int:
    """The program's tests against ``ModelNew`` (see the module's docstring)."""
    from bbagent.harness.sandbox.child import preparation
    from bbagent.harness.problem import ProgramProblem, program_module
    started = time.perf_counter()
    candidate_file = os.path.abspath(job.kernel)
    gpu_pause.install_pauses(job.pause_fd, job.grant_fd, preparation.synchronize)
    containment, audit = preparation.contain_and_ready(job, candidate_file, send)
    problem = ProgramProblem.from_wire(job.problem)
    built = time.perf_counter()
    try:
        reference_module = program_module(problem)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the reference itself failed: the harness's input, said
        send(events.Fatal(error_kind="worker_error", message=f"the problem's program failed to import: "
                                                             f"{type(exc).__name__}: {exc}"[:2000]))
        return 0
    smaller, not_smaller = _smaller_program(problem, reference_module, job)
    draws = DRAWS + ((("smaller", _smaller_description(smaller[0])),) if smaller else ())
    send(events.SuiteBuilt(cases=[{"id": name, "source": source, "input": None, "dtype": None, "overload": None}
                                  for name, source in draws],
                           skipped=[{"id": "smaller", "reason": not_smaller}] if not_smaller else [], notes=[f"library policy: {job.allow_library}"], overloads=[problem.name],
                           kernel_for=problem.name, build_s=round(time.perf_counter() - built, 3)))
    launches, compile_clock = preparation.instrument(job.device, send)
    from bbagent.harness.sandbox.child.containment import seal
    send(events.Sealed(details=seal(containment, audit, job.workdir, job.tool_write_dirs, job.hidden)))
    watch = preparation.watch_calls(candidate_file, job.device, [], launches, compile_clock)
    model_new = _import_model_new(candidate_file, send)
    if model_new is None:
        return 0
    imported = watch.failure() or watch.judge_changes("once the answer's file was imported", deep=True)
    if imported:
        send(events.Fatal(error_kind=imported["error_kind"], message=imported["message"]))
        return 0
    pair = _built(reference_module, model_new, job, candidate_file)
    if isinstance(pair, dict):
        send(events.Fatal(**pair))
        return 0
    instruments = (launches, watch)
    passed = _run_draws(pair, reference_module, job, instruments, candidate_file, send)
    if passed is not None and smaller:
        passed = _run_smaller(smaller, model_new, job, instruments, candidate_file, send) and passed
    if passed and job.timing is not None:
        _timing(pair, reference_module, job, (launches, compile_clock, watch), send)
    send(events.Done(total_s=round(time.perf_counter() - started, 3),
                     device_memory_peak=preparation.device_memory_peak(job.device)))
    return 0


def _import_model_new(candidate_file: str, send):
    """The answer's ``ModelNew`` class, or None after a ``fatal`` event saying why there is none."""
    from bbagent.harness.sandbox.child.preparation import import_candidate
    module = import_candidate(candidate_file, send)
    if module is None:
        return None
    import torch
    found = getattr(module, "ModelNew", None)
    if isinstance(found, type) and issubclass(found, torch.nn.Module):
        return found
    what = "defines no top-level 'ModelNew'" if found is None else f"defines 'ModelNew' as a {type(found).__name__}"
    send(events.Fatal(error_kind="missing_entry_point",
                      message=f"the answer {what}; it must define class ModelNew(torch.nn.Module) taking Model's "
                              "constructor arguments, with Model's forward signature"))
    return None


def _built(reference_module, model_new, job: Job, candidate_file: str, init: list | None = None):
    """(reference, answer) on the device, from one seed and ``init`` (default: the problem's
    ``get_init_inputs()``), the answer holding the reference's weights; where the answer cannot be
    built or take them, the failure (``error_kind``, ``message``)."""
    import torch
    from bbagent.harness.checks.case import candidate_raised
    from bbagent.harness.problem import reference_model
    init = reference_module.get_init_inputs() if init is None else init
    reference = reference_model(reference_module, job.seed, job.device, init)
    try:
        torch.manual_seed(job.seed)
        answer = model_new(*copy.deepcopy(init)).to(job.device)
    except BaseException as exc:  # noqa: BLE001 - the answer's constructor failed: its failure
        raised = candidate_raised(exc, candidate_file)
        return {"error_kind": raised["error_kind"], "message": "ModelNew(*get_init_inputs()) failed: "
                                                               + raised["message"]}
    try:
        answer.load_state_dict(reference.state_dict())
    except Exception as exc:  # noqa: BLE001 - weights it cannot hold: said with what differs
        return {"error_kind": "weights_mismatch", "message": "ModelNew cannot take Model's weights (load_state_dict "
                                                             f"of the reference's state_dict): {str(exc)[:1500]}"}
    return reference, answer


def _run_draws(pair, reference_module, job: Job, instruments, candidate_file: str, send) -> bool | None:
    """Each draw's test; whether every one passed (None: nothing after them can run)."""
    import torch
    from bbagent.harness.checks.program_compare import judge_program_call
    reference, answer = pair
    random = _random_reference(reference, _inputs(reference_module, "given", job.seed, job.device))
    if random:
        send(events.Fatal(error_kind="no_tests", message=random))
        return None
    passed = True
    for number, (name, description) in enumerate(DRAWS):
        gpu_pause.checkpoint()
        send(events.CaseStart(id=name))
        if name == "perturbed":
            _perturb(reference, job.seed)
            answer.load_state_dict(reference.state_dict())
        inputs = _inputs(reference_module, name, job.seed + number, job.device)
        with torch.no_grad():
            record, fatal = judge_program_call(name, reference, answer, inputs, job, instruments, candidate_file,
                                               on_answer=lambda: send(events.CandidateStart(id=name)),
                                               on_reference=lambda: send(events.ReferenceStart(id=name)))
        send(events.CaseResult(record={**record, "source": description}))
        passed = passed and bool(record.get("passed"))
        del inputs
        gc.collect()  # a draw's tensors can be gigabytes: none may outlive it in a reference cycle of the answer's
        if fatal:  # the CUDA context is lost, or the answer exited: nothing after it can run
            return None
    return passed


def _smaller_program(problem, reference_module, job: Job):
    """((the shrinking, its module), None) for the first of the program's shrinkings
    (``harness.program_sizes``) whose inputs or constructor arguments differ from the problem's and
    at which the reference runs on the device; else (None, why there is none)."""
    import torch
    from bbagent.harness.problem import ProgramProblem, given_inputs, program_module, reference_model
    from bbagent.harness.checks.program_compare import described
    from bbagent.harness.program_sizes import shrinkings, shrunk_text, size_constants
    tried = shrinkings(size_constants(problem.text))
    if not tried:
        return None, "the program has no top-level size constant (an integer of at least 8) to change"
    try:
        given = (described(given_inputs(reference_module, job.seed, "meta")), repr(reference_module.get_init_inputs()))
    except Exception:  # noqa: BLE001 - its inputs cannot be made without memory: every shrinking is tried
        given = None
    refused = []
    for shrinking in tried:
        variant = ProgramProblem(path=problem.path, text=shrunk_text(problem.text, shrinking), level=problem.level)
        try:
            module = program_module(variant)
            inputs = given_inputs(module, job.seed, job.device)
            if (described(inputs), repr(module.get_init_inputs())) == given:
                refused.append(f"{shrinking.how} ({shrinking.described()}): no input or argument changed")
                continue
            with torch.no_grad():
                reference_model(module, job.seed, job.device)(*inputs)
        except Exception as exc:  # noqa: BLE001 - the program does not allow these sizes: the next is tried
            refused.append(f"{shrinking.how} ({shrinking.described()}): {type(exc).__name__}: {str(exc)[:200]}")
            continue
        return (shrinking, module), None
    return None, "the program runs at none of the smaller sizes tried: " + "; ".join(refused)


def _smaller_description(shrinking) -> str:
    return f"signed inputs at smaller sizes ({shrinking.described()}), the parameters perturbed"


def _run_smaller(smaller, model_new, job: Job, instruments, candidate_file: str, send) -> bool:
    """The ``smaller`` draw (see the module's docstring); whether it passed."""
    import torch
    from bbagent.harness.checks.program_compare import judge_program_call
    shrinking, module = smaller
    name, description = "smaller", _smaller_description(shrinking)
    gpu_pause.checkpoint()
    send(events.CaseStart(id=name))
    with _answer_sizes(model_new, shrinking.renamed()):
        init = module.get_init_inputs()
        pair = _built(module, model_new, job, candidate_file, init)
        if isinstance(pair, dict):
            record = {"id": name, "input": repr(init)[:200], "passed": False, **pair}
        else:
            reference, answer = pair
            _perturb(reference, job.seed)
            answer.load_state_dict(reference.state_dict())
            inputs = _inputs(module, "signed", job.seed + len(DRAWS), job.device)
            with torch.no_grad():
                record, fatal = judge_program_call(name, reference, answer, inputs, job, instruments, candidate_file,
                                                   on_answer=lambda: send(events.CandidateStart(id=name)),
                                                   on_reference=lambda: send(events.ReferenceStart(id=name)))
            del pair, reference, answer, inputs
    send(events.CaseResult(record={**record, "source": description}))
    return bool(record.get("passed"))


@contextlib.contextmanager
def _answer_sizes(model_new, renamed: dict[str, tuple[int, int]]):
    """For the ``smaller`` draw: each module-level integer of the answer's named as a changed size
    constant and holding the problem's value takes the new value; restored after."""
    module = sys.modules.get(model_new.__module__)
    names = vars(module) if module is not None else {}
    kept = {name: given for name, (given, _) in renamed.items() if type(names.get(name)) is int and names[name] == given}
    for name in kept:
        setattr(module, name, renamed[name][1])
    try:
        yield
    finally:
        for name, value in kept.items():
            setattr(module, name, value)


def _timing(pair, reference_module, job: Job, instruments, send) -> None:
    """Every draw passed: wait for the GPU alone (a shared one), then time the answer against the
    reference on the problem's inputs (``harness.timing.program_timing``; GPU only). The perturbed
    draw changed the reference's weights: both are built again from the seed first."""
    from bbagent.harness.sandbox.child.timing_phase import wait_for_the_gpu_alone
    launches, compile_clock, watch = instruments
    wait_for_the_gpu_alone(job, send)
    if job.device != "cuda":
        return
    import torch
    from bbagent.harness.checks.case import candidate_raised
    from bbagent.harness.timing.phase import TimingRequest, device_stats, implausible_device, peak_memory_gbs
    from bbagent.harness.timing.program_timing import TIMED_ID, time_program
    from bbagent.harness.problem import reference_model
    compile_clock.real_autotuning()
    reference, answer = pair
    fresh = reference_model(reference_module, job.seed, job.device)
    reference.load_state_dict(fresh.state_dict())
    answer.load_state_dict(fresh.state_dict())
    del fresh
    assert job.timing is not None, "timed only where its Job asks for timing"
    request = TimingRequest(**job.timing)
    gpu = torch.cuda.get_device_name()
    stats, measured = device_stats(gpu, request.device)
    send(events.TimingPlan(ids=[TIMED_ID], device=stats, device_measured=measured, gpu=gpu, target_ms=request.target_ms))
    impossible = implausible_device(stats, peak_memory_gbs())
    if impossible:
        send(events.Timing(record={"id": TIMED_ID, "input": "get_inputs()", "error_kind": "implausible_timing",
                                   "message": f"the device's yardsticks are impossible: {impossible}"}))
        return
    send(events.TimingStart(id=TIMED_ID))
    try:
        record = time_program(reference, answer, lambda draw, offset: _inputs(reference_module, draw, job.seed + offset,
                                                                              job.device),
                              request, gpu, stats, launches, watch)
    except Exception as exc:  # noqa: BLE001 - the answer's failure on a repeated call
        failure = candidate_raised(exc, os.path.abspath(job.kernel))
        record = {"id": TIMED_ID, "input": "get_inputs()", "error_kind": failure["error_kind"],
                  "message": "while being timed: " + failure["message"]}
    send(events.Timing(record=record))
    if request.profile and "error_kind" not in record:  # the kernel lists for the feedback, after the last check
        _profile(reference, answer, reference_module, job, record["input"], send)


def _profile(reference, answer, reference_module, job: Job, timed_input: str, send) -> None:
    from bbagent.harness.checks.case import exception_line
    from bbagent.harness.timing.program_timing import TIMED_ID, profile_program
    started = time.perf_counter()
    try:
        files, launches = profile_program(reference, answer, lambda draw, offset: _inputs(
            reference_module, draw, job.seed + offset, job.device), job.workdir)
        send(events.Profile(id=TIMED_ID, input=timed_input, files=files, launches=launches,
                            wall_s=round(time.perf_counter() - started, 3)))
    except Exception as exc:  # noqa: BLE001 - a profiler that cannot run here is reported, not fatal
        send(events.Profile(id=TIMED_ID, input=timed_input, files=[], error=exception_line(exc, 300)))


def _random_reference(reference, inputs: list) -> str | None:
    """Why the program cannot be judged by its values (its output depends on the random state:
    dropout in training mode, a draw in forward), else None."""
    import torch
    from bbagent.harness.checks.compare import compare
    outputs = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        with torch.no_grad():
            outputs.append(reference(*inputs))
    if compare(outputs[0], outputs[1]) is None:  # equal within the dtype's tolerance: GPU reductions may differ in order
        return None
    return ("the problem's program is random: two runs of Model on the same inputs under different seeds gave "
            "different outputs (dropout in training mode, or a random draw in forward), so an answer cannot be "
            "judged by its values; bbagent does not judge random programs yet")


def _inputs(reference_module, draw: str, seed: int, device: str) -> list:
    """The draw's inputs on ``device``: the problem's own, or signed values of the same shapes."""
    import torch
    from bbagent.harness.problem import given_inputs
    given = given_inputs(reference_module, seed, device)
    if draw == "given":
        return given
    scale = 3.0 if draw == "perturbed" else 1.0
    return [torch.randn(v.shape, dtype=v.dtype, device=v.device) * scale
            if isinstance(v, torch.Tensor) and v.dtype.is_floating_point else v for v in given]


def _perturb(model, seed: int) -> None:
    """Every floating parameter moved off its initial value by noise of its own scale (at least 0.5):
    a weight of ones and a bias of zeros become values an answer must use to match."""
    import torch
    generator = torch.Generator(device="cpu").manual_seed(seed + 7919)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dtype.is_floating_point and parameter.numel():
                noise = torch.randn(parameter.shape, generator=generator).to(parameter.device, parameter.dtype)
                scale = max(float(parameter.abs().mean()), 0.5)
                parameter.add_(noise * scale)
