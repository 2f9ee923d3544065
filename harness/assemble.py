"""The Verdict from what the child said (``harness.events``) and how it ended
(``harness.sandbox.parent.watch.ChildOutcome``), also for a child that died half-way: every test is
announced before it runs, so the one it died in is known. Each part is built as its own type (the
tests, the summary, the failure groups, the overloads, the timings, the environment, the timing
phase's measurements) and the Verdict from them; the steps after the tests
(``harness.after_tests``) then fill in its ``performance``.
"""
from __future__ import annotations

import hashlib
import importlib.util
import re
from dataclasses import dataclass

from bbagent.harness.adapters import convention
from bbagent.harness.events import (AheadCall, CandidateStart, CaseResult, CaseStart, CompiledAhead, Done, ChildEnvironment,
                            Event, Fatal, HelionConfigs, InUse, InUseStart, Profile, ReferenceStart, Sealed, StoppedEarly, SuiteBuilt, Timing, TimingPlan,
                            TimingStart, Violation, first, of_kind)
from bbagent.harness.problem import OperatorProblem, ProgramProblem
from bbagent.harness.sandbox.parent.compile_pauses import compile_totals
from bbagent.harness.sandbox.parent.run import exit_cause
from bbagent.harness.sandbox.parent.watch import ChildOutcome
from bbagent.harness.timing.metrics import summarize_performance
from bbagent.harness.verdict import (SCHEMA_VERSION, Environment as EnvironmentPart, FailureGroup, GuardFinding, InUseCheck,
                                     HelionConfigs as HelionConfigsPart, KernelFile,
                                     Performance, ProfileFiles, Skipped, SuiteInfo, Summary, TestResult, Timings, Variant,
                                     Verdict)

# Kinds that are the candidate's doing even when no test was running (import time included).
SANDBOX_KINDS = frozenset({"network", "forbidden_write", "forbidden_read", "secret_read", "process_spawn",
                           "output_flood", "host_oom", "exit", "stray_thread", "reaches_harness", "tampering",
                           "native_code"})


@dataclass
class Failure:
    """Why an evaluation failed as a whole (not one test's failure): its kind and message, and
    ``infrastructure`` where it was the machine's doing, not the kernel's."""
    error_kind: str | None = None
    message: str = ""
    infrastructure: str | None = None


def assemble(problem: OperatorProblem | ProgramProblem, kernel_path, source: bytes, seed: int, events: list[Event],
             outcome: ChildOutcome, timeout_s: float, static_findings: list[dict] | None = None) -> Verdict:
    """The Verdict of one evaluation of ``problem`` (its secrets not yet redacted: ``harness.evaluate``)."""
    op = problem.key
    suite = first(events, SuiteBuilt)
    tests = [TestResult.model_validate(e.record) for e in of_kind(events, CaseResult)]
    timings = [dict(e.record) for e in of_kind(events, Timing)]  # the timing phase's data, read by its metrics
    failure = _failure(op, events, suite, tests, timings, outcome, timeout_s, static_findings)
    skipped = [Skipped.model_validate(s) for s in (suite.skipped if suite else [])]
    summary = summarize(tests, skipped, len(suite.cases) if suite else 0)
    passed = failure.error_kind is None and summary.failed == 0 and summary.passed > 0
    stopped = first(events, StoppedEarly)
    if stopped is not None:
        summary.not_run_reason = stopped_early_reason(stopped)
        summary.failing_classes = stopped.failing_classes
    if failure.error_kind is None and summary.failed:
        failure.message = describe_failures(summary, tests)
        if stopped is not None:
            failure.message += f"; {summary.not_run_reason}"
    profiles = [ProfileFiles(id=e.id, input=e.input, files=e.files, launches=e.launches, wall_s=e.wall_s, error=e.error)
                for e in of_kind(events, Profile)]
    findings = [GuardFinding.model_validate(f) for f in static_findings or []]
    return Verdict(
        schema_version=SCHEMA_VERSION, op=op, problem_kind=problem.kind,
        kernel=KernelFile(path=str(kernel_path), sha256=hashlib.sha256(source).hexdigest()),
        verdict="pass" if passed else "fail", error_kind=failure.error_kind, message=failure.message,
        infrastructure=failure.infrastructure, seed=seed, summary=summary,
        failure_groups=group_failures(tests), tests=tests, skipped=skipped,
        in_use=[InUseCheck.model_validate(e.record) for e in of_kind(events, InUse)],
        guard_findings=findings + [f for t in tests for f in t.guard_findings],
        performance=_performance(op, first(events, TimingPlan), timings, passed, profiles),
        helion_configs=_helion_configs(first(events, HelionConfigs)),
        suite=SuiteInfo(notes=suite.notes if suite else [], cases=len(suite.cases) if suite else 0),
        kernel_for=suite.kernel_for if suite else op,
        variants=_variant_summary(problem, suite, tests),
        timings=_timings(events, suite, outcome),
        environment=EnvironmentPart.model_validate(_environment(first(events, ChildEnvironment), first(events, Sealed))),
        exit=None if outcome.returncode == 0 else exit_cause(outcome.returncode),
        stderr_tail=outcome.stderr, stdout_tail=outcome.stdout)


def _helion_configs(event: HelionConfigs | None) -> HelionConfigsPart | None:
    if event is None:
        return None
    return HelionConfigsPart(tuned=event.tuned, pinned=event.pinned, unseen=event.unseen)


def in_use_words(record: dict) -> str:
    """The check of ``harness.checks.in_use`` a record is of, in words, with the test it used."""
    words = {"launch_replay": "the check that its launches make its result", "cuda_graph": "the CUDA graph check",
             "repeated_calls": "the repeated-call check"}.get(record["check"], "the checks as it runs")
    return words + (f" on test {record['id']} ({record.get('input')})" if record.get("id") else "")


def stopped_early_reason(stopped: StoppedEarly) -> str:
    """Why a failing candidate's other tests did not run, naming the classes that failed."""
    shown = stopped.failing_classes[:6]
    more = len(stopped.failing_classes) - len(shown)
    return (f"fail fast: it failed in the first tier ({stopped.first_tier} tests, one of each class), so after "
            f"{stopped.budget_s:g} s more of tests the other {stopped.not_run} did not run; classes failing: "
            + "; ".join(shown) + (f"; and {more} more" if more > 0 else ""))


def outside_the_view(message: str) -> str:
    """For an import that failed in the sandbox: where this process (which sees every file) finds
    the module, so that the message says it exists but outside what the sandbox shows."""
    missing = re.findall(r"No module named '([\w.]+)'", message)
    if not missing:
        return ""
    top = missing[-1].split(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return ""
    if spec is None:
        return ""
    where = spec.origin if spec.origin not in (None, "namespace") else ", ".join(spec.submodule_search_locations or [])
    return (f"\n'{top}' exists at {where}, outside what the sandbox shows a kernel: its sys.path entry is the "
            "user's home, the project's root, a broad shared directory, or holds a file of secrets (.env, "
            ".netrc, ...). Install it into site-packages, or put it in a directory of its own on PYTHONPATH.")


def _failure(op: str, events: list[Event], suite: SuiteBuilt | None, tests: list[TestResult], timings: list[dict],
             outcome: ChildOutcome, timeout_s: float, static_findings: list[dict] | None) -> Failure:
    """The evaluation's own failure, if any (``tests`` gains the test the kernel died in)."""
    if static_findings:
        return Failure("guard", "the kernel was not run; its source breaks these rules:\n"
                       + "\n".join(f["message"] for f in static_findings))
    fatal = first(events, Fatal)
    if fatal is not None:
        return Failure(fatal.error_kind, fatal.message + outside_the_view(fatal.message))
    if first(events, Done) is None:
        return _stopped(op, events, suite, tests, outcome, timeout_s)
    in_use = next((e.record for e in of_kind(events, InUse) if e.record.get("passed") is False), None)
    if in_use:
        return Failure(in_use["error_kind"], f"every test passed; then, {in_use_words(in_use)}: {in_use['message']}")
    timing_failure = next((t for t in timings if "error_kind" in t), None)
    if timing_failure:
        return Failure(timing_failure["error_kind"],
                       f"test {timing_failure['id']} ({timing_failure['input']}): {timing_failure['message']}")
    if not tests or all(t.passed is None for t in tests):
        return Failure("no_tests", "no test could be run for this operator on this device")
    return Failure()


def _stopped(op: str, events: list[Event], suite: SuiteBuilt | None, tests: list[TestResult], outcome: ChildOutcome,
             timeout_s: float) -> Failure:
    """A child that ended before it said ``done``: where it was (a test, its timing, the import,
    the suite's building) and whose doing it was."""
    kind, cause = _stop_cause(events, outcome, timeout_s)
    cases = {c["id"]: c for c in (suite.cases if suite else [])}
    finished = {t.id for t in tests}
    unfinished = [e.id for e in of_kind(events, CaseStart) if e.id not in finished]
    timed = {e.record.get("id") for e in of_kind(events, Timing)}
    unfinished_timing = [e.id for e in of_kind(events, TimingStart) if e.id not in timed]
    if unfinished and _last_side(events, unfinished[0]) != "candidate" and kind not in SANDBOX_KINDS:
        case = cases.get(unfinished[0], {})
        return Failure("worker_error", f"the aten reference (not the kernel) {cause} on test {unfinished[0]} "
                                       f"({case.get('input')}); the remaining tests did not run")
    ahead = _unfinished_ahead_call(events)
    test_id = unfinished[0] if unfinished else ahead
    if test_id is not None:
        case = cases.get(test_id, {})
        when = ("while running this test" if unfinished else
                "when called on this test's inputs to compile its kernels ahead of the tests")
        tests.append(TestResult(id=test_id, source=case.get("source"), input=case.get("input"), dtype=case.get("dtype"),
                                overload=case.get("overload", op), passed=False, error_kind=kind,
                                message=f"the kernel {cause} {when}"))
        return Failure(kind, f"test {test_id} ({case.get('input')}): the kernel {cause}")
    checks = of_kind(events, InUseStart)
    if checks and len(checks) > len(of_kind(events, InUse)):
        return Failure(kind, f"every test passed, then the kernel {cause} in {in_use_words({'check': checks[-1].check})}")
    if unfinished_timing:
        case = cases.get(unfinished_timing[0], {})
        return Failure(kind, f"every test passed, then the kernel {cause} while being timed on test "
                             f"{unfinished_timing[0]} ({case.get('input')})")
    if suite is None and kind not in SANDBOX_KINDS:
        message = f"evaluation {cause} before the tests were built"
        if kind in ("timeout", "compile_budget"):
            return Failure(kind, message)
        return Failure("worker_error", message, infrastructure=message)  # the machine's doing, not the kernel's
    return Failure(kind, f"the kernel {cause} while being imported or compiled")


def _last_side(events: list[Event], test_id: str) -> str | None:
    """Who ran last in the test: "candidate", "reference" (its call had returned), or None (neither yet)."""
    for event in reversed(events):
        if isinstance(event, CandidateStart) and event.id == test_id:
            return "candidate"
        if isinstance(event, ReferenceStart) and event.id == test_id:
            return "reference"
    return None


def _unfinished_ahead_call(events: list[Event]) -> str | None:
    """The test whose call (compiling ahead, ``harness.sandbox.child.compile_ahead``) was under way when
    the child ended, if one was."""
    for event in reversed(events):
        if isinstance(event, AheadCall):
            return event.id
        if isinstance(event, (CompiledAhead, CaseStart, CaseResult)):
            return None
    return None


def _stop_cause(events: list[Event], outcome: ChildOutcome, timeout_s: float) -> tuple[str, str]:
    """(error kind, what happened) for a child that ended without finishing its tests."""
    violation = first(events, Violation)
    if violation is not None:
        return violation.error_kind, f"was stopped: {violation.message}"
    if outcome.limit == "timeout":
        site = f"; it was {outcome.hang_site}" if outcome.hang_site else ""
        what = outcome.detail or f"the evaluation ran past {timeout_s:g} s"
        return "timeout", f"timed out: {what} (process group killed){site}"
    if outcome.limit == "compile_budget":  # not a hang: the tests could not go on for compiling
        return "compile_budget", (f"used up its compile budget: {outcome.detail}; the process group was killed "
                                  "before its correctness was known")
    if outcome.limit:
        what = {"host_oom": "used too much host memory", "process_spawn": "started too many processes",
                "output_flood": "printed too much output"}[outcome.limit]
        return outcome.limit, f"{what} ({outcome.detail}; process group killed)"
    if outcome.returncode is not None and outcome.returncode >= 0:
        return "exit", (f"ended the process with exit code {outcome.returncode} (sys.exit or os._exit); "
                        "a kernel must return its result")
    return "crash", f"crashed: its process was {exit_cause(outcome.returncode)}"


def _timings(events: list[Event], suite: SuiteBuilt | None, outcome: ChildOutcome) -> Timings:
    env, done = first(events, ChildEnvironment), first(events, Done)
    ready_at = env.ready_at if env else None
    return Timings(
        wall_s=round(outcome.wall_s, 3), startup_s=env.startup_s if env else None,
        child_ready_s=round(ready_at - outcome.launched_at, 3) if ready_at else None,
        suite_build_s=suite.build_s if suite else None, tests_s=done.total_s if done else None,
        phases=done.phases if done else {}, test_parts=done.test_parts if done else {},
        imported_sealed=done.imported_sealed if done else [],
        host_memory_peak_gib=round(outcome.memory_peak / 2**30, 2),
        device_memory_peak_gib=round(done.device_memory_peak / 2**30, 2) if done and done.device_memory_peak else None,
        memory_retries=done.memory_retries if done else 0, memory_wait_s=done.memory_wait_s if done else 0.0,
        gpu_pauses=done.gpu_pauses if done else 0, gpu_paused_s=done.gpu_paused_s if done else 0.0,
        **_ahead_totals(of_kind(events, CompiledAhead)), **compile_totals(events))


def _ahead_totals(groups: list[CompiledAhead]) -> dict:
    return {"ahead_calls": sum(g.calls for g in groups), "ahead_launches": sum(g.launches for g in groups),
            "ahead_s": round(sum(g.seconds for g in groups), 3),
            "ahead_stopped": next((g.stopped for g in groups if g.stopped), ""),
            "ahead_processes": max((g.processes for g in groups), default=0),
            "ahead_warmed": sum(g.warmed for g in groups)}


def _environment(env: ChildEnvironment | None, sealed: Sealed | None) -> dict:
    """What the child reported at its start, with the file view it sealed itself in before the
    candidate was imported (``harness.sandbox.child.containment.seal``)."""
    environment = env.reported() if env else {}
    containment = environment.get("containment")
    if containment is not None and sealed is not None:
        view = dict(sealed.details)
        environment["containment"] = {**containment, **view,
                                      "notes": containment.get("notes", []) + view.pop("notes", [])}
    return environment


def _variant_summary(problem: OperatorProblem | ProgramProblem, suite: SuiteBuilt | None, tests: list[TestResult]) -> list[Variant]:
    """Per tested overload: its calling convention, whether the kernel serves it directly or
    through bbagent's adapter, and its test counts (``passed`` True only when all of its own
    tests ran and passed)."""
    overload = problem.overloads
    if not overload:  # a program: one problem, no overloads to serve
        return []
    op = problem.name
    kernel_for = suite.kernel_for if suite else op
    rows = []
    for name in (suite.overloads if suite else [op]):
        planned = sum(1 for c in (suite.cases if suite else []) if c.get("overload", op) == name)
        mine = [t for t in tests if (t.overload or op) == name]
        passed = sum(1 for t in mine if t.passed is True)
        failed = sum(1 for t in mine if t.passed is False)
        unjudged = sum(1 for t in mine if t.passed is None)
        rows.append(Variant(op=name, convention=convention(overload[name]),
                            served_by="kernel" if name == kernel_for else "adapter", planned=planned,
                            passed=passed, failed=failed, ok=failed == 0 and passed > 0 and passed + unjudged == planned))
    return rows


def _performance(op: str, plan: TimingPlan | None, timings: list[dict], passed: bool,
                 profiles: list[ProfileFiles]) -> Performance | None:
    """The Verdict's ``performance``: what the timing phase measured, with its metrics."""
    if plan is None:
        return None
    return Performance.model_validate({
        "measured": True, "gpu": plan.gpu, "device": plan.device, "device_measured": plan.device_measured,
        "target_ms": plan.target_ms, "planned": len(plan.ids), "tests": timings,
        "summary": summarize_performance(op, timings, plan.device, passed), "profiles": profiles or None})


def not_timed_reason(verdict: Verdict) -> str:
    """Why a Verdict that was asked for timings has none."""
    if verdict.environment.interpreter:
        return ("CPU (Triton interpreter): interpreter time says nothing about a GPU; only correctness "
                "was checked")
    if not verdict.passed:
        return "the kernel failed its tests; a failing kernel is not timed"
    return "no timing phase ran"


def group_failures(tests: list[TestResult], limit: int = 10) -> list[FailureGroup]:
    """Merge failing tests with the same kind and message shape (numbers masked)."""
    groups: dict[tuple[str, str], FailureGroup] = {}
    for test in tests:
        if test.passed is not False:
            continue
        key = (test.error_kind or "?", _message_shape(test.message))
        group = groups.get(key)
        if group is None:
            groups[key] = FailureGroup(error_kind=key[0], count=1, tests=[test.id], example=test)
        else:
            group.count += 1
            group.tests.append(test.id)
    ordered = sorted(groups.values(), key=lambda g: -g.count)
    return ordered[:limit]


def _message_shape(message: str) -> str:
    """First line of a message with numbers and index lists masked, for grouping."""
    first = message.strip().split("\n")[-1] if "Error" in message else message.split("\n")[0]
    first = re.sub(r"\[[^\]]*\]", "[#]", first)
    return re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "#", first)


def describe_failures(summary: Summary, tests: list[TestResult]) -> str:
    """One line: how many tests failed and how, e.g. '13 of 13 tests failed: mismatch x13'; with
    several overloads tested, the overloads that failed."""
    per_kind: dict[str, int] = {}
    failed_overloads: dict[str, int] = {}
    for test in tests:
        if test.passed is False:
            kind = test.error_kind or "?"
            per_kind[kind] = per_kind.get(kind, 0) + 1
            if test.overload is not None:
                failed_overloads[test.overload] = failed_overloads.get(test.overload, 0) + 1
    where = ""
    if len({t.overload for t in tests}) > 1:
        where = " (" + ", ".join(f"{name} x{count}" for name, count in failed_overloads.items()) + ")"
    kinds = ", ".join(f"{kind} x{count}" for kind, count in per_kind.items())
    return f"{summary.failed} of {summary.total} tests failed: {kinds}{where}"


def summarize(tests: list[TestResult], skipped: list[Skipped], planned: int) -> Summary:
    return Summary(planned=planned, not_run=max(0, planned - len(tests)), total=len(tests),
                   passed=sum(1 for t in tests if t.passed is True), failed=sum(1 for t in tests if t.passed is False),
                   reference_errors=sum(1 for t in tests if t.passed is None), skipped=len(skipped))
