"""The sandbox child: build the suite, import the candidate, run and check every test.

Run by the fork server (``harness.sandbox.child.forkserver``) in a forked child, or cold as
``python -m harness.sandbox.child.worker --job JSON --result-fd FD``. Needs only the standard
library, torch, triton and numpy. It contains itself first (``harness.sandbox.child.containment``).
Results go out as JSON lines on the file descriptor ``--result-fd`` (not stdout,
which the candidate may print into); the parent turns them into a Verdict, also when this process dies
half-way, because every test is announced before it runs.

Order per test (``harness.checks.case``): the candidate runs first, on its own copy of the inputs,
after fresh allocations of their sizes were poisoned; the reference runs only once the candidate
has returned, on the inputs drawn again, so no result of the reference exists while the candidate
runs. What it reports is typed in ``harness.events``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from bbagent.harness import events, gpu_pause
from bbagent.harness.sandbox.child.ahead_groups import AheadGroups
from bbagent.harness.stopwatch import Stopwatch
from bbagent.harness.sandbox.job import BuildSuite, CompiledBaseline, Job, NcuProfile
from bbagent.harness.sandbox.child.preparation import (contain_and_ready, device_memory_peak, import_candidate, instrument,
                                                      synchronize, watch_calls)
from bbagent.harness.sandbox.child.timing_phase import profile_under_ncu, timing_phase


def main(argv: list[str] | None = None) -> int:
    """The cold path: a fresh interpreter runs one job (``python -m harness.sandbox.child.worker``)."""
    parser = argparse.ArgumentParser(prog="bbagent.harness.sandbox.child.worker")
    parser.add_argument("--job", required=True, help="the Job as JSON")
    parser.add_argument("--result-fd", type=int, required=True)
    args = parser.parse_args(argv)
    job = Job.from_wire(args.job)
    if job.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before torch or triton can import triton
    return run_job_reporting_errors(job, args.result_fd)


def _program_tests(job: Job, send) -> int:
    from bbagent.harness.sandbox.child.program_job import run_program_job
    return run_program_job(job, send)


def _operator_baselines(job: Job, send) -> int:
    from bbagent.harness.timing.inductor import operator_baselines
    return operator_baselines(job, send)


def _program_baselines(job: Job, send) -> int:
    from bbagent.harness.timing.inductor import program_baselines
    return program_baselines(job, send)


def run_job_reporting_errors(job: Job, result_fd: int) -> int:
    """``run_job``; an exception out of the harness itself (not the candidate, whose exceptions
    the runner catches) becomes a ``worker_error`` with its traceback, never a verdict on the kernel."""
    send = events.Channel(result_fd).send
    try:
        tests, baselines = JOBS_BY_KIND[job.problem["kind"]]
        return (baselines if isinstance(job.work, CompiledBaseline) else tests)(job, send)
    except Exception:  # noqa: BLE001 - a harness failure becomes a worker_error with its traceback
        import traceback
        text = traceback.format_exc()
        print(text, file=sys.stderr)
        try:
            send(events.Fatal(error_kind="worker_error", message="the harness failed (not the kernel):\n" + text[-3000:]))
        except OSError:
            pass
        return 1


def run_job(job: Job, send) -> int:
    """Contain this process, then build the suite and run every test against the candidate.
    ``send(event)`` writes one event on the result channel (``harness.events``)."""
    started = time.perf_counter()
    candidate_file = os.path.abspath(job.kernel)
    gpu_pause.install_pauses(job.pause_fd, job.grant_fd, synchronize)
    containment, audit = contain_and_ready(job, candidate_file, send)
    from bbagent.harness.problem import OperatorProblem
    suite_started = time.perf_counter()
    problem = OperatorProblem.from_wire(job.problem)  # the one look-up of the names on this side
    op = problem.computation
    gpu_pause.checkpoint()
    suites, reused, saved = _suites(job, problem)
    send(events.SuiteBuilt(cases=[{"id": c.id, "source": c.source, "input": c.description, "dtype": c.dtype,
                              "overload": name} for name, _, suite in suites for c in suite.cases],
                      skipped=[{**skip, "overload": name} for name, _, suite in suites for skip in suite.skipped],
                      notes=[note if name == job.op else f"{name}: {note}" for name, _, suite in suites
                             for note in suite.notes],
                      overloads=[name for name, _, _ in suites], kernel_for=problem.written_for_name,
                      build_s=round(time.perf_counter() - suite_started, 3), reused=reused, saved_sha256=saved))
    phases = {"start": round(suite_started - started, 3), "suite": round(time.perf_counter() - suite_started, 3)}
    if isinstance(job.work, BuildSuite):
        send(events.Done(total_s=round(time.perf_counter() - started, 3), phases=phases,
                         device_memory_peak=device_memory_peak(job.device)))
        return 0
    mark = time.perf_counter()
    launches, compile_clock = instrument(job.device, send)
    stopwatch = Stopwatch()
    from bbagent.harness.sandbox.child.containment import seal
    send(events.Sealed(details=seal(containment, audit, job.workdir, job.tool_write_dirs, job.hidden)))
    phases["seal"], mark = round(time.perf_counter() - mark, 3), time.perf_counter()
    written_for = problem.written_for
    watch = watch_calls(candidate_file, job.device, [written_for] + [target for _, target, _ in suites], launches,
                   compile_clock)
    kernel = _import_candidate(candidate_file, send)
    if kernel is None:
        return 0
    helion = _helion_policy(job)
    watch.scan()  # a thread the import left running the kernel's code
    imported = watch.failure() or watch.judge_changes("once the kernel's file was imported", deep=True)
    if imported:
        send(events.Fatal(error_kind=imported["error_kind"], message=imported["message"]))
        return 0
    phases["import"], mark = round(time.perf_counter() - mark, 3), time.perf_counter()
    from bbagent.harness.adapters import serving
    served = {name: watch.wrap(serving(kernel, written_for, target)) for name, target, _ in suites}
    if isinstance(job.work, NcuProfile):
        profile_under_ncu(op, job, job.work, suites[0][2], served[job.op], compile_clock, send)
    elif _profiled(job.profile, _run_tests, op, job, suites, served, (launches, compile_clock, stopwatch, watch),
                   candidate_file, send) is not None:
        return 0
    phases["tests"] = round(time.perf_counter() - mark, 3)
    if helion is not None:
        send(events.HelionConfigs(**helion.report()))
    from bbagent.harness.sandbox.child.device_memory import RETRIES
    send(events.Done(total_s=round(time.perf_counter() - started, 3), phases=phases, imported_sealed=audit.imported,
                     test_parts=stopwatch.rounded(), device_memory_peak=device_memory_peak(job.device),
                     memory_retries=RETRIES.count, memory_wait_s=round(RETRIES.wait_s, 3),
                     gpu_pauses=gpu_pause.paused()[0], gpu_paused_s=round(gpu_pause.paused()[1], 3)))
    return 0














def _helion_policy(job: Job):
    """What stands in front of a Helion kernel's functions (``harness.helion_configs``): its tuned
    configs pinned, or its tuning in the timing phase; None where neither is asked, or where the
    candidate has no Helion kernel."""
    budget = (job.timing or {}).get("autotune_s") or 0.0
    if job.helion_configs is None and not (budget and job.device == "cuda"):
        return None
    from bbagent.harness.helion_configs import ConfigTable, Pinned, Tuning, install
    from bbagent.harness.sandbox.child.containment import CANDIDATE_MODULE
    if job.helion_configs is not None:
        policy: Pinned | Tuning = Pinned(ConfigTable.from_json(job.helion_configs), say=lambda said: None)
    else:
        import torch
        policy = Tuning(budget, torch.cuda.get_device_name())
    return policy if install(sys.modules[CANDIDATE_MODULE], policy) else None


def _import_candidate(candidate_file: str, send):
    """The candidate's ``kernel``, or None after a ``fatal`` event saying why there is none."""
    module = import_candidate(candidate_file, send)
    if module is None:
        return None
    kernel = getattr(module, "kernel", None)
    if callable(kernel):
        return kernel
    defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                     and getattr(v, "__module__", None) == module.__name__)
    what = "defines no top-level 'kernel'" if kernel is None else f"defines 'kernel' as a {type(kernel).__name__}"
    send(events.Fatal(error_kind="missing_entry_point",
                      message=f"the kernel file {what}; it must define a function kernel(...) taking the operator's "
                              f"arguments (it defines: {', '.join(defined) or 'no public function'})"))
    return None


def _run_tests(op, job: Job, suites, served: dict, instruments, candidate_file: str, send) -> str | None:
    """Every test, then (on a GPU, all passed) the timing phase. Returns why the run ended early
    (a ``fatal`` event said it), else None. ``instruments``: the launch counter, the compile clock,
    the stopwatch that splits the tests' time into parts, and the run-time checks of every call."""
    launches, compile_clock, stopwatch, watch = instruments
    from bbagent.harness.checks.reference import ReferenceFault
    from bbagent.harness.suite.tiers import Classes, describe_class, failing_classes_first, first_tier_order
    passed: set[str] = set()
    failed, classes = False, Classes()
    planned, first_tier = first_tier_order([(name, target, case) for name, target, suite in suites
                                            for case in suite.cases], classes)
    failing_classes: dict[tuple, None] = {}
    # when the extra tests after a failed first tier must end (compiling counts: a failing candidate's time is waste)
    deadline: float | None = None
    ahead = AheadGroups(planned, served, compile_clock, job.device, send, stopwatch)
    try:
        for number, (name, target, case) in enumerate(planned):
            gpu_pause.checkpoint()  # between tests: another evaluation's timing may want the GPU alone
            ahead.finish_if_done(number)
            if number == first_tier and failed and job.fail_fast_s is not None:
                deadline = time.perf_counter() + job.fail_fast_s
                # reordered in place: the loop reads each entry by its position, this one and after
                planned[first_tier:] = failing_classes_first(planned[first_tier:], failing_classes, classes)
                name, target, case = planned[number]
                # the failing classes' tests compiled ahead too, as many calls as the budget has time for
                ahead.start(number, first_tier + sum(classes(n, c) in failing_classes for n, _, c in planned[first_tier:]),
                            until=deadline)
            elif ahead.due(number) and not failed:  # the first tier, then (if it passed) the rest
                ahead.start(number, first_tier if number < first_tier else len(planned))
            compiled = ahead.wait_for(number, None if deadline is None else max(0.0, deadline - time.perf_counter()))
            if deadline is not None and (not compiled or time.perf_counter() >= deadline):
                send(events.StoppedEarly(first_tier=first_tier, not_run=len(planned) - number,
                                         budget_s=job.fail_fast_s or 0.0,
                                         failing_classes=[describe_class(k) for k in failing_classes]))
                ahead.drop(report=True)  # what the tests that ran did not need
                break
            compile_clock.rotate(number)
            gpu_pause.checkpoint()  # after waiting for compilations, which may have been long
            send(events.CaseStart(id=case.id))
            try:
                result = _run_case(job.device, name, target, case, served, launches, candidate_file, send, stopwatch,
                                   watch)
            except ReferenceFault as fault:
                send(events.Fatal(error_kind="worker_error", message=str(fault)))
                return "reference fault"
            ended = _record_result(result, name, case, len(planned) - number - 1, job.device, send, stopwatch)
            if ended:
                return ended
            if result["passed"]:
                passed.add(case.id)
            if result["passed"] is False:
                failed = True
                failing_classes.setdefault(classes(name, case))
        ahead.finish()
    finally:
        ahead.drop(report=False)  # the run ended early: no test waits for them
    return _after_the_tests(op, job, suites, passed, failed, served, instruments, candidate_file, send)


def _after_the_tests(op, job: Job, suites, passed: set[str], failed: bool, served: dict, instruments,
                     candidate_file: str, send) -> str | None:
    """The judge checked unchanged, then (on a GPU, every test passed) the timing phase."""
    watch = instruments[3]  # (launches, compile clock, stopwatch, watch)
    ended = watch.judge_changes("after the tests", deep=True)
    if ended:
        send(events.Fatal(error_kind="tampering", message=ended["message"]))
        return "the judge changed"
    if failed:
        return None
    ended, wrong = _in_use(op, job, suites[0][2], passed, served[job.op], instruments, candidate_file, send)
    if ended or wrong:
        return ended
    if job.timing is not None:
        timing_phase(op, job, suites[0][2], passed, served, instruments, candidate_file, send)
    return None


def _in_use(op, job: Job, suite, passed: set[str], kernel, instruments, candidate_file: str,
            send) -> tuple[str | None, bool]:
    """Every test passed: the kernel as users run it (``harness.checks.in_use``), timed or not. Why the
    run ends here (a ``fatal`` event said it: the judge changed, the CUDA context is lost), else None;
    and whether a check failed (then nothing is timed)."""
    launches, _, stopwatch, watch = instruments
    from bbagent.harness.checks import in_use
    from bbagent.harness.checks.guards import AtenRecorder
    with stopwatch.part("in_use"):
        records = in_use.run_all(op, suite.cases, passed, kernel, job.device,
                                 lambda: AtenRecorder(op, launches, candidate_file), launches, candidate_file, watch,
                                 announce=lambda check: send(events.InUseStart(check=check)),
                                 checkpoint=gpu_pause.checkpoint, calls=job.in_use_calls)
    for record in records:
        lost, judge_changed = record.pop("context_lost", False), record.pop("judge_changed", False)
        send(events.InUse(record=record))
        if judge_changed:
            send(events.Fatal(error_kind="tampering", message=record["message"]))
            return "the judge changed", True
        if lost:
            send(events.Fatal(error_kind="cuda_error", message=f"every test passed; then {record['message']}"))
            return "CUDA context lost", True
    return None, any(record["passed"] is False for record in records)


def _record_result(result: dict, name: str, case, left: int, device: str, send, stopwatch) -> str | None:
    """Send one test's result; why the run ends here (the judge changed, the CUDA context is lost),
    else None. On a GPU, a trace input's cached memory is given back before the next test."""
    lost = result.pop("context_lost", False)
    judge_changed = result.pop("judge_changed", False)
    send(events.CaseResult(record={**result, "overload": name}))
    if judge_changed:  # no later test could be judged
        send(events.Fatal(error_kind="tampering", message=f"test {case.id}: {result['message']}"))
        return "the judge changed"
    if device == "cuda" and not lost and case.trace is not None:  # only trace inputs are large
        import torch
        from bbagent.harness.sandbox.child.device_memory import give_back_cached_memory
        with stopwatch.part("memory"):
            give_back_cached_memory(torch)
    if lost:
        lines = result["message"].splitlines()
        cause = next((line for line in lines if "CUDA error" in line), lines[0])
        send(events.Fatal(error_kind="cuda_error",
                          message=f"test {case.id} ({case.description}): {cause.strip()}; the CUDA context is "
                                  f"lost, so the remaining {left} tests did not run"))
        return "CUDA context lost"
    return None


def _profiled(profile: bool, run, *args):
    """``run(*args)``; with ``profile``, under ``harness.sandbox.child.profiling``."""
    if not profile:
        return run(*args)
    from bbagent.harness.sandbox.child.profiling import profiled
    return profiled(run, *args)


def _run_case(device: str, name: str, target, case, served: dict, launches, candidate_file: str, send,
              stopwatch: Stopwatch, watch) -> dict:
    """One test's result record; a CUDA error raised after the kernel returned (in the checks) is
    the kernel's out-of-bounds access. On a GPU, a test whose harness side (inputs, reference,
    checks) ran out of device memory runs again once memory is free (``device_memory``)."""
    import torch
    from bbagent.harness.checks.case import failed_result, run_case
    from bbagent.harness.checks.reference import is_cuda_error
    from bbagent.harness.checks.guards import AtenRecorder
    from bbagent.harness.sandbox.child.device_memory import retrying_out_of_memory

    def run() -> dict:
        recorder = AtenRecorder(target, launches, candidate_file)
        return run_case(target, case, served[name], device, launches, recorder, candidate_file,
                        on_candidate=lambda case_id=case.id: send(events.CandidateStart(id=case_id)), stopwatch=stopwatch,
                        on_reference=lambda case_id=case.id: send(events.ReferenceStart(id=case_id)), watch=watch)
    try:
        return retrying_out_of_memory(run, torch) if device == "cuda" else run()
    except Exception as exc:
        if not is_cuda_error(exc):
            raise
        return failed_result(case, error_kind="cuda_error", context_lost=True,
                             message=f"{type(exc).__name__}: {str(exc).splitlines()[0]}\n(raised while "
                                     "checking the kernel's result: the kernel made an out-of-bounds access)")


def _suites(job: Job, problem) -> tuple[list, bool, str | None]:
    """The job's suites: loaded from ``job.suite_file`` with this evaluation's values, else built
    (and saved to ``job.save_suite`` when asked, with the saved bytes' digest). Also whether they
    were reused, and that digest."""
    from bbagent.harness.suite import cache
    if job.suite_file:
        try:
            with open(job.suite_file, "rb") as handle:
                suites = cache.loads(handle.read(), job.device, problem)
            suites, fresh = cache.refreshed(suites, job.seed)
            total = sum(len(suite.cases) for _, _, suite in suites)
            suites[0][2].notes.append(
                f"suite reused (built once per operator, options, torch, triton and harness); {fresh} of {total} tests "
                "drawn fresh for this evaluation, the rest are edge and promotion cases, whose values are the test, "
                "and OpInfo samples whose reference refused redrawn values")
            return suites, True, None
        except Exception as exc:  # noqa: BLE001 - a stale or damaged file: build instead, and say why
            print(f"bbagent: the cached suite {job.suite_file} could not be used ({exc}); building it", file=sys.stderr)
    suites = _build_suites(job, problem, job.device == "cpu")
    if not job.save_suite:
        return suites, False, None
    import hashlib
    try:
        data = cache.dumps(suites)
        with open(job.save_suite, "wb") as handle:
            handle.write(data)
    except Exception as exc:  # noqa: BLE001 - reuse is a saving, never a reason to fail
        print(f"bbagent: this suite cannot be saved for reuse ({type(exc).__name__}: {exc})", file=sys.stderr)
        return suites, False, None
    return suites, False, hashlib.sha256(data).hexdigest()


def _build_suites(job: Job, problem, interpreter: bool) -> list[tuple[str, Any, Any]]:
    """(name, overload, Suite) for every overload the problem serves, its computation first. Test
    ids of the other overloads carry the overload's name (``relu_.default/opinfo-3``)."""
    from bbagent.harness.suite.build import build_suite
    suites = []
    for name, target in zip(problem.names, problem.serves):
        suite = build_suite(target, job.device, job.seed, interpreter=interpreter, cpu_max_numel=job.cpu_max_numel,
                            extra_traces=job.extra_traces, channels_last=job.channels_last)
        if target is not problem.computation:
            prefix = name.removeprefix("aten.") + "/"
            for case in suite.cases:
                case.id = prefix + case.id
            suite.skipped = [{**skip, "id": prefix + skip["id"]} for skip in suite.skipped]
        suites.append((name, target, suite))
    return suites


# per problem kind (harness.problem.KINDS): what its child runs for a candidate's tests, and for a
# baseline (a Job with ``baseline`` set). Each is imported when its job comes: the child starts light.
JOBS_BY_KIND: dict[str, tuple[Callable[[Job, Callable], int], Callable[[Job, Callable], int]]] = {
    "operator": (run_job, _operator_baselines),
    "program": (_program_tests, _program_baselines),
}


if __name__ == "__main__":
    sys.exit(main())
