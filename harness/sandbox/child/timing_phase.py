"""The sandbox child's timing phase (``harness.sandbox.child.worker`` runs it once every test passed):
on a shared GPU it first waits for the GPU alone, then times eager aten and the candidate on the
timed trace inputs (``harness.timing.phase``) and profiles the shapes asked for; or, under ncu, it
runs the kernel and eager on the cases ncu profiles. Child side: imported in the sandbox only.
"""
from __future__ import annotations

import os
import sys
import time

from bbagent.harness import events
from bbagent.harness.sandbox.job import Job, NcuProfile


def wait_for_the_gpu_alone(job: Job, send) -> None:
    """On a shared GPU: ask the parent for the GPU alone and wait until it grants it (one byte on
    the grant pipe; an empty read means the parent is gone, and the run ends soon anyway)."""
    if job.grant_fd is None:
        return
    send(events.ExclusiveWanted())
    os.read(job.grant_fd, 1)


def timing_phase(op, job: Job, suite, passed: set[str], served: dict, instruments, candidate_file: str,
                 send) -> None:
    """Every test passed: wait for the GPU alone (a shared one), then time the candidate (GPU only)."""
    launches, compile_clock, stopwatch, watch = instruments
    wait_for_the_gpu_alone(job, send)
    if job.device == "cuda":
        compile_clock.real_autotuning()
        with stopwatch.part("timing"):
            _time_candidate(op, suite, passed, served[job.op], job, launches, candidate_file, send, watch)


def _time_candidate(op, suite, passed: set[str], kernel, job: Job, launches, candidate_file: str, send,
                    watch) -> None:
    """The timing phase (``harness.timing.phase``): device yardsticks, then each timed trace input.
    A failure while timing (an exception, a CUDA error, a wrong result on the recheck, a measurement
    the device cannot produce, a judge that changed) is reported as a ``timing`` event with an
    ``error_kind`` and ends the phase."""
    import torch
    from bbagent.harness.checks.guards import AtenRecorder
    from bbagent.harness.timing.phase import (TimingRequest, device_stats, implausible_device, peak_memory_gbs, time_case,
                                      timed_cases, void_record)
    from bbagent.harness.checks.case import candidate_raised
    assert job.timing is not None, "timed only where its Job asks for timing"
    request = TimingRequest(**job.timing)
    gpu = torch.cuda.get_device_name()
    cases = timed_cases(suite.cases, passed, request.max_cases)
    stats, measured = device_stats(gpu, request.device)
    send(events.TimingPlan(ids=[c.id for c in cases], device=stats, device_measured=measured, gpu=gpu,
                           target_ms=request.target_ms))
    impossible = implausible_device(stats, peak_memory_gbs())
    if impossible and cases:
        send(events.Timing(record={"id": cases[0].id, "input": cases[0].description, "error_kind": "implausible_timing",
                                   "message": f"the device's yardsticks are impossible: {impossible}; the clock was "
                                              "tampered with, or the device is not what it says"}))
        return
    if request.autotune_s:
        _tune(cases, kernel)
    results = []
    for case in cases:
        send(events.TimingStart(id=case.id))
        try:
            result = time_case(op, case, kernel, request, gpu, stats, AtenRecorder(op, launches, candidate_file), watch)
        except Exception as exc:  # noqa: BLE001 - the candidate's failure on a repeated call
            failure = candidate_raised(exc, candidate_file)
            result = void_record(case, failure["error_kind"], failure["message"])
        send(events.Timing(record=result))
        if "error_kind" in result:
            return
        results.append(result)
    if request.profile:  # diagnostics for the feedback, after the verdict's last check
        _profile_shapes(op, cases, results, kernel, request, job.workdir, send)


def _tune(cases, kernel) -> None:
    """A Helion kernel tuned first, where its Job asks (``harness.helion_configs.Tuning``): one call
    per timed shape, the largest first, each new specialization searched within its share of the
    budget (a kernel whose key leaves sizes out runs one config for many: the largest shape's, where
    the time is). A call that raises ends the tuning; the timed calls that follow meet the failure
    as their own."""
    import torch
    from bbagent.harness.helion_configs import tuning_in
    from bbagent.harness.sandbox.child.containment import CANDIDATE_MODULE
    tuning = tuning_in(sys.modules.get(CANDIDATE_MODULE))
    if tuning is None:
        return
    tuning.active = True
    try:
        for left, case in zip(range(len(cases), 0, -1), reversed(cases)):  # timed_cases: smallest first
            tuning.shapes_left = left
            args, kwargs = case.inputs()
            kernel(*args, **kwargs)
            torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the candidate's failure, reported by the timing that follows
        tuning.untuned.append(f"{case.description}: the call raised {type(exc).__name__}; tuning ended")
    finally:
        tuning.active = False


def _profile_shapes(op, cases, results: list[dict], kernel, request, workdir: str, send) -> None:
    from bbagent.harness.checks.case import exception_line
    from bbagent.harness.timing.profile import pick, profile_case
    by_id = {case.id: case for case in cases}
    for case_id in pick(results, request.profile, request.pick):
        case = by_id[case_id]
        try:
            started = time.perf_counter()
            files, launches = profile_case(op, case, kernel, workdir)
            send(events.Profile(id=case_id, input=case.description, files=files, launches=launches,
                                wall_s=round(time.perf_counter() - started, 3)))
        except Exception as exc:  # noqa: BLE001 - a profiler that cannot run here is reported, not fatal
            send(events.Profile(id=case_id, input=case.description, files=[], error=exception_line(exc, 300)))


def profile_under_ncu(op, job: Job, ncu: NcuProfile, suite, kernel, compile_clock, send) -> None:
    """No tests: the kernel and eager on the cases ncu asks for (``ncu.ids``), each in a range of its own."""
    if job.device == "cuda":
        compile_clock.real_autotuning()
    from bbagent.harness.timing.ncu import profile_cases
    by_id = {case.id: case for case in suite.cases}
    profile_cases(op, [by_id[i] for i in ncu.ids if i in by_id], kernel, send)
