"""After an evaluation's tests and timing: what runs beside it and what its timing leaves behind.
The inductor baseline and Nsight Compute each run in a child of their own (``harness.sandbox.parent.run``),
the profiler's files move out of the child's directory, new measurements go into the timing cache,
and a Verdict with no timing says why. Each step fills in its part of the Verdict's ``performance``
as its own type; the timing modules' builders (``harness.timing.baselines``, ``ncu``) give data,
checked here as it becomes a part.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path

from bbagent.harness.assemble import not_timed_reason
from bbagent.harness.events import Baseline, ChildEnvironment, Done, Event, Fatal, NcuRange, first, of_kind
from bbagent.harness.sandbox.job import CompiledBaseline, Job, NcuProfile
from bbagent.harness.sandbox.parent.run import child_env, exit_cause, run_child
from bbagent.harness.sandbox.parent.watch import ChildOutcome, Limits
from bbagent.harness.timing import baselines, ncu
from bbagent.harness.timing.options import TimingOptions
from bbagent.harness.timing.profile import pick
from bbagent.harness.verdict import BaselineSummary, NcuReport, Performance, ProfileFiles, TimedTest, Verdict
from bbagent.harness import workdirs


def time_inductor(op: str, verdict: Verdict, timing: TimingOptions, job: Job, base_env: dict, warm: bool,
                  limits: Limits) -> None:
    """The inductor baseline of every timed shape (``harness.timing.baselines``): from the cache, or
    measured now in a child of its own with no candidate in it."""
    performance = verdict.performance
    if performance is None:  # nothing was timed: nothing to compare with
        return
    tests, gpu, mode = [_data(t) for t in performance.tests], performance.gpu, timing.inductor_mode
    if not verdict.passed:  # it went wrong while being timed: no speedup to compare
        performance.baselines = {"inductor": BaselineSummary.model_validate(baselines.not_measured(
            "the kernel failed while being timed; a failing kernel is not compared", mode))}
        return
    rows = timing.request(op)["reference"]
    missing = baselines.wanted(tests, rows, gpu, mode)
    measured, problem = [], None
    if missing:
        shapes = [{"input": t["input"], "mode": t["mode"]} for t in missing]
        child_job = Job(problem=job.problem, seed=job.seed, device=job.device, cpu_max_numel=job.cpu_max_numel,
                        extra_traces=job.extra_traces, channels_last=job.channels_last, kernel="",
                        workdir=str(workdirs.make("baseline")),
                        work=CompiledBaseline(compile_mode=mode, target_ms=timing.target_ms, shapes=shapes))
        events, outcome = run_baseline_child(child_job, base_env, warm, limits)
        measured = [dict(e.record) for e in of_kind(events, Baseline)]
        if first(events, Done) is None:
            problem = side_child_failure("the inductor baseline's child", events, outcome)
    baselines.attach(tests, rows, measured, gpu, mode, missing_error=problem)
    performance.tests = [TimedTest.model_validate(t) for t in tests]
    summary = baselines.summary(tests, performance.summary is not None and performance.summary.correct, mode)
    performance.baselines = {"inductor": BaselineSummary.model_validate(summary)}


def run_baseline_child(job: Job, base_env: dict, warm: bool, limits: Limits) -> tuple[list[Event], ChildOutcome]:
    """The inductor baseline's child for ``job`` (its ``work``, a ``CompiledBaseline``, says what to time), its
    working directory removed after it: its events and how it ended."""
    if not isinstance(job.work, CompiledBaseline):
        raise TypeError(f"a baseline's child runs a CompiledBaseline, not {type(job.work).__name__}")
    workdir = Path(job.workdir)
    per_shape_s = 180 if job.work.compile_mode != "default" else 60
    try:
        return run_child(job, child_env(base_env, workdir), base_env, warm,
                         120 + per_shape_s * len(job.work.shapes), limits)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def program_baseline_ahead(op: str, job: Job, timing: TimingOptions, base_env: dict, warm: bool,
                           limits: Limits) -> str:
    """A program's torch.compile baseline on its own inputs (in CUDA graphs, as an answer is most
    often timed), measured before any answer exists and put in the timing cache, so that the first
    answer timed finds it there. Its outcome in words: "cached" (it was there), "built", or why not.
    ``job`` is the program's (its seed, its device, its working directory, removed after)."""
    mode = timing.inductor_mode
    cached = [[row["gpu"], row["input"], row["mode"]] for row in timing.request(op)["reference"]
              if row["mode"] == baselines.cache_mode(mode, "graph")]
    child_job = replace(job, kernel="", save_suite=None,
                        work=CompiledBaseline(compile_mode=mode, target_ms=timing.target_ms, cached=cached,
                                      shapes=[{"input": None, "mode": "graph"}]))
    events, outcome = run_baseline_child(child_job, base_env, warm, limits)
    environment = first(events, ChildEnvironment)
    records = [e.record for e in of_kind(events, Baseline)]
    if any(r.get("cached") for r in records):
        return "cached"
    fresh = [r for r in records if r.get("timing") and not r.get("error")]
    if not fresh or environment is None or first(events, Done) is None:
        why = records[0].get("error") if records else side_child_failure("the inductor baseline's child", events,
                                                                          outcome)
        return f"not built ({why})"
    if timing.cache is not None:
        timing.cache.store_reference(op, environment.torch, environment.gpu, [
            baselines.cache_row(r["mode"], r["input"], r["timing"], r.get("eager_over_inductor"), r.get("launches"))
            for r in fresh])
    return "built"


def _data(test: TimedTest) -> dict:
    """A timed test as the timing modules' builders read it: the fields it was given (a test timed
    without fault has no ``error_kind``)."""
    return test.model_dump(exclude_unset=True)


def keep_profiles(profiles: list[ProfileFiles], workdir: Path, destination: Path | None) -> None:
    """Move the child's profile files out of its working directory (removed next) into
    ``destination``, and name them there."""
    for entry in profiles:
        if destination is None:  # the kernel lists (launches) are what was asked for
            entry.files = []
            entry.error = None if entry.launches else "not kept: no profile directory was given"
            continue
        kept = []
        for name in entry.files:
            target = Path(destination) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                shutil.move(str(workdir / name), target)
            except OSError as exc:
                entry.error = f"{name} could not be kept: {exc.strerror or exc}"
                continue
            kept.append(str(target))
        entry.files = kept


def collect_ncu(verdict: Verdict, timing: TimingOptions, job: Job, base_env: dict, limits: Limits) -> None:
    """Nsight Compute metrics of eager and the kernel on timed shapes (``timing.pick``), from a cold
    child of their own started by ncu (``harness.timing.ncu``); its CSV is kept in the run."""
    performance = verdict.performance
    if performance is None:  # nothing was timed: nothing to profile
        return
    if not verdict.passed:
        performance.ncu = NcuReport(measured=False, reason="the kernel failed while being timed; it is not profiled")
        return
    found = ncu.find_ncu()
    if found is None:
        performance.ncu = NcuReport(measured=False, reason=ncu.NOT_FOUND)
        return
    ids = pick([_data(t) for t in performance.tests], timing.ncu, timing.pick)
    started = time.perf_counter()
    workdir = workdirs.make("ncu")
    log = workdirs.make("ncu-log") / "ncu.csv"  # out of the child's view
    kept = None
    try:
        shutil.copy(job.kernel, workdir / "candidate.py")
        child_job = replace(job, kernel=str(workdir / "candidate.py"), workdir=str(workdir),
                            save_suite=None, work=NcuProfile(ids=ids), network_namespace=False,
                            tool_write_dirs=job.tool_write_dirs + ncu.lock_directories())
        with ncu.one_at_a_time():
            events, outcome = run_child(child_job, child_env(base_env, workdir), base_env, False,
                                        120 + 60 * len(ids), limits, prefix=ncu.command(found, log))
        text = log.read_text(errors="replace") if log.exists() else ""
        if text and timing.profile_dir is not None:
            kept = Path(timing.profile_dir) / "profiles" / "ncu.csv"
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(text)
    except OSError as exc:  # ncu could not be started, or its output not kept
        performance.ncu = NcuReport(measured=False, reason=f"ncu ({found}): {exc.strerror or exc}")
        return
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(log.parent, ignore_errors=True)
    shapes = ncu.per_shape(of_kind(events, NcuRange), ncu.parse_csv(text))
    said = ncu.errors("\n".join([text, outcome.stdout or "", outcome.stderr or ""]))
    if first(events, Done) is None:
        notes = [side_child_failure("the ncu child", events, outcome, said)]
    else:
        notes = [f"ncu said: {said}"] if said else []
    notes += [ncu.COUNTERS_FIX] if "ERR_NVGPUCTRPERM" in said else []
    measured = any((shape.get(side) or {}).get("kernels") for shape in shapes for side in ncu.SIDES)
    performance.ncu = NcuReport.model_validate({
        "measured": measured, "reason": None if measured else "; ".join(notes) or "ncu measured no kernel",
        "ncu": found, "csv": str(kept) if kept else None, "shapes": shapes, "notes": notes,
        "wall_s": round(time.perf_counter() - started, 2)})


def side_child_failure(what: str, events: list[Event], outcome: ChildOutcome, said: str = "") -> str:
    """Why a child beside the evaluation (the inductor baseline's, ncu's) said nothing to the end."""
    fatal = first(events, Fatal)
    if fatal:  # a harness traceback: its last line says what
        lines = [line for line in fatal.message.strip().splitlines() if line.strip()]
        return f"{what} failed: " + (lines[-1] if lines else "")[:500]
    if outcome.limit:
        return f"{what} was stopped: {outcome.limit} {outcome.detail}".strip()
    last = said or ((outcome.stderr or "").strip().splitlines()[-1:] or [""])[0]
    return f"{what} {exit_cause(outcome.returncode)} {last[:300]}".strip()


def finish_timing(timing: TimingOptions, op: str, verdict: Verdict) -> None:
    """After a timed evaluation: why it was not timed, or its new measurements into the cache and
    (unless ``keep_raw``) the raw times out of the Verdict. Safe to run again on the same Verdict."""
    if verdict.performance is None:
        reason = not_timed_reason(verdict)
        on_cpu = verdict.environment.interpreter
        performance = verdict.performance = Performance(measured=False, reason=reason)
        if "inductor" in timing.baselines:
            why = baselines.CPU_REASON if on_cpu else reason
            performance.baselines = {"inductor": BaselineSummary.model_validate(
                baselines.not_measured(why, timing.inductor_mode))}
        if timing.ncu:
            performance.ncu = NcuReport(measured=False, reason=ncu.CPU_REASON if on_cpu else reason)
    elif verdict.performance.measured:
        if verdict.passed:  # measured in a candidate's process: kept only where nothing was amiss
            store_measured(timing, op, verdict)
        if not timing.keep_raw:
            for test in verdict.performance.tests:
                test.candidate_raw = test.aten_raw = None
                for entry in (test.baselines or {}).values():
                    entry.raw = None


def store_measured(timing: TimingOptions, op: str, verdict: Verdict) -> None:
    """Put what the child measured (eager timings, device yardsticks) into the cache."""
    if timing.cache is None:
        return
    performance, env = verdict.performance, verdict.environment
    if performance is None or performance.gpu is None or env.torch is None:
        return  # nothing timed, or not where the cache can name it
    gpu = performance.gpu
    if performance.device_measured and performance.device is not None and env.triton is not None:
        timing.cache.store_device(gpu, env.torch, env.triton, performance.device.model_dump(exclude_none=True))
    eager = [{"mode": t.mode, "input": t.input, "timing": t.aten.model_dump()}
             for t in performance.tests if t.aten_source == "measured" and t.aten is not None]
    inductor = [(t, t.baselines["inductor"]) for t in performance.tests if t.baselines and "inductor" in t.baselines]
    compiled = [baselines.cache_row(baselines.cache_mode(entry.compile_mode, t.mode), t.input, entry.timing.model_dump(),
                                    entry.eager_over_inductor, [k.model_dump() for k in entry.launches or []])
                for t, entry in inductor if entry.source == "measured" and entry.timing is not None and t.mode]
    timing.cache.store_reference(op, env.torch, gpu, eager + compiled)
