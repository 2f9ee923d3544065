"""Evaluate a candidate kernel file in a sandboxed child process and return its Verdict.

The parent never imports the candidate. The child is forked from a warm fork server
(``harness.sandbox.parent.pool``, ``harness.sandbox.child.forkserver``) or, with ``warm=False``, started as a fresh
interpreter; either way it leads its own session in a private temporary directory, with
an environment reduced to an allowlist (no API keys), and contains itself before the
candidate is imported (``harness.sandbox.child.containment``: namespaces, rlimits, audit hook). The
parent watches it (``harness.sandbox.parent.watch``): wall-clock limit, host memory and process count of
its session, output size; breaking one kills the whole session's group. Results arrive as
JSON lines on a dedicated pipe; stdout and stderr are kept as a bounded head and tail.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from bbagent.harness import workdirs
from bbagent.harness.after_tests import collect_ncu, finish_timing, keep_profiles, program_baseline_ahead, time_inductor
from bbagent.harness.assemble import assemble
from bbagent.harness.checks.static_check import check_source
from bbagent.harness.dsl import dsl_named
from bbagent.harness.events import Done, SuiteBuilt, first
from bbagent.harness.redact import Redactor, configured_secrets
from bbagent.harness.request import EvaluationRequest, default_device, fresh_seed
from bbagent.harness.sandbox.job import BuildSuite, Job
from bbagent.harness.sandbox.parent.environment import PROJECT_ROOT, SetupError, base_env, physical_gpu
from bbagent.harness.sandbox.parent.gpu_share import ChildGate, GpuShare, Hold
from bbagent.harness.sandbox.parent.machine_gpu import process_share
from bbagent.harness.sandbox.parent.run import child_env, exit_cause, run_child, warn_once
from bbagent.harness.sandbox.parent.watch import ChildOutcome
from bbagent.harness.suite.cache import adopt, cached as cached_suite, suite_key, touch
from bbagent.harness.suite.memory_need import expected_need
from bbagent.harness.timing.options import TimingOptions
from bbagent.harness.verdict import NcuReport, Verdict

__all__ = ["PROJECT_ROOT", "EvaluationRequest", "TimingOptions", "KernelFileError", "SetupError", "evaluate_kernel", "prepare_suite",
           "default_device", "adopt_remote_verdict", "physical_gpu"]


class KernelFileError(ValueError):
    """The kernel file is missing or unreadable (a usage error, not a failing verdict)."""


def evaluate_kernel(request: EvaluationRequest, kernel_path: str | Path, *, gpu: int | None = None,
             share: GpuShare | None = None) -> Verdict:
    """Run every test of the request's problem against the kernel file and return its Verdict.

    The problem's computation is tested (and timed) first; its other overloads are served through
    ``harness.adapters`` from the overload the kernel is written for. The child is forked from the
    fork server (``harness.sandbox.parent.pool``) unless ``request.warm`` is off; it sees only what
    ``harness.sandbox.child.file_view`` allows, never the request's ``hidden`` paths. Every text of
    the Verdict is redacted (``harness.redact``) of the secret-named environment variables' values
    and of the request's ``secrets``; the timing's results are its ``performance``. ``gpu`` pins
    the child to that GPU (numbered as this process sees them). ``share``
    (``harness.sandbox.parent.gpu_share.GpuShare``): the GPU is shared with other evaluations of
    this process; the tests wait for room and run beside theirs, the timing waits for the GPU
    alone, and a failure for want of memory there is run again alone. Without one, an evaluation on
    a GPU shares it so with the other processes of this user on it (``_process_share``)."""
    kernel_path = Path(kernel_path)
    if not kernel_path.is_file():
        raise KernelFileError(f"kernel file not found: {kernel_path}")
    source = kernel_path.read_bytes()
    findings = check_source(source.decode("utf-8", "replace"), dsl_named(request.dsl)) if request.static_check else []
    if findings:  # rejected before any of its code runs
        return _redacted(assemble(request.problem, kernel_path, source, request.fresh_seed(), [],
                                  ChildOutcome(returncode=0), request.timeout_s, static_findings=findings),
                         request.secrets)
    workdir = workdirs.make("cand")
    try:
        (workdir / "candidate.py").write_bytes(source)
        shared_env = base_env(request.device, gpu)
        job = request.job(workdir, [_triton_cache(shared_env)])
        key = suite_key(request.problem.names, request.device, request.suite_options())
        child = _Child(request, kernel_path, source, job, key, shared_env, workdir)
        share = share or _process_share(request, gpu)
        verdict = child.run(None) if share is None else _on_shared_gpu(share, child)
        return _redacted(verdict, request.secrets)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@dataclass
class _Child:
    """One evaluation's child, as ``evaluate_kernel`` set it up; ``run`` starts it (again, where asked)."""
    request: EvaluationRequest
    kernel_path: Path
    source: bytes
    job: Job
    key: str
    shared_env: dict
    workdir: Path

    @property
    def op(self) -> str:
        return self.request.op

    def run(self, share: GpuShare | None, hold: Hold | None = None) -> Verdict:
        """The Verdict (its secrets not yet redacted); on a shared GPU the child runs its tests under ``hold`` and asks
        for the GPU alone before timing (unless the hold has it alone already)."""
        workdir, request = self.workdir, self.request
        reuse = cached_suite(self.key)
        if reuse:
            touch(reuse)
        job = (replace(self.job, suite_file=str(reuse)) if reuse
               else replace(self.job, save_suite=str(workdir / "suite.pt")))
        gate = ChildGate(share, hold) if share is not None and hold is not None and hold.phase == "shared" else None
        try:
            events, outcome = run_child(job, child_env(self.shared_env, workdir), self.shared_env, request.warm,
                                        request.timeout_s, request.limits, gate=gate)
        finally:
            if gate is not None:
                gate.close()
        if not reuse:
            _adopt_suite(events, workdir / "suite.pt", self.key)
        verdict = assemble(request.problem, self.kernel_path, self.source, job.seed, events, outcome, request.timeout_s)
        containment = verdict.environment.containment
        for note in containment.notes if containment is not None else []:  # what the OS refused: said once
            warn_once(f"bbagent sandbox: {note}")
        if share is not None:
            done = first(events, Done)
            share.learn(self.key, done.device_memory_peak if done else None)
        if request.timing:
            if share is not None and hold is not None and verdict.performance is not None:
                share.go_exclusive(hold)  # the baselines and Nsight Compute measure the GPU too
            _after_timing(self.op, verdict, request, request.timing, job, self.shared_env, workdir)
        return verdict


def _on_shared_gpu(share: GpuShare, child: _Child) -> Verdict:
    """The child run under ``share``: admitted by memory, its tests beside other evaluations', its
    timing alone. A failure that sharing may have caused (the kernel or the harness out of device
    memory while others held it) is not believed: the evaluation runs again alone, and that run's
    Verdict is the one returned."""
    first_guess = _first_guess(child.request)
    hold = share.enter(share.need_for(child.key, first_guess), child.op)
    waited = 0.0
    try:
        verdict = child.run(share, hold)
        shared = share.crowded(hold)
        doubt = _doubted_while_shared(verdict) if shared else None
        if doubt:
            waited += hold.waited_s
            share.leave(hold)
            hold = share.alone(share.need_for(child.key, first_guess), child.op)
            verdict = child.run(share, hold)
            verdict.timings.rerun_alone = doubt
    finally:
        share.leave(hold)
    verdict.timings.gpu_wait_s, verdict.timings.gpu_shared = round(waited + hold.waited_s, 3), shared
    return verdict


def _process_share(request: EvaluationRequest, gpu: int | None) -> GpuShare | None:
    """On a GPU, where no batch shares it: this process's gate, which meets the other processes on
    it (``harness.sandbox.parent.machine_gpu``); None on the CPU."""
    if request.device != "cuda":
        return None
    return process_share(gpu)


def _first_guess(request: EvaluationRequest) -> int:
    """The device memory to admit an evaluation by before any of its children measured a peak."""
    return request.expected_bytes or expected_need(request.problem.names, request.extra_traces)


def _doubted_while_shared(verdict: Verdict) -> str | None:
    """Why a Verdict reached on a shared GPU cannot be believed, or None."""
    if verdict.error_kind == "worker_error":
        return f"the harness failed beside other evaluations: {verdict.message[:200]}"
    if verdict.error_kind == "timeout":
        return "the evaluation ran past its time limit while other evaluations used the GPU"
    if verdict.error_kind == "cuda_oom" or any(t.error_kind == "cuda_oom" for t in verdict.tests):
        return "the kernel ran out of GPU memory while other evaluations held some of it"
    return None


def prepare_suite(request: EvaluationRequest, *, gpu: int | None = None, share: GpuShare | None = None) -> str:
    """Build the suite ``evaluate_kernel`` would build for this request, before any candidate exists
    (while the model writes the first one), and keep it in the suite cache, so that the first
    evaluation loads it. Returns "cached" (it was there), "built", or why it was not built; a
    failure here costs nothing but the saving (the evaluation builds it then). A program has no
    suite to build (its reference and inputs are made in its own child, from the problem's text, in
    a second or two): what is built ahead for it is its torch.compile baseline, the costliest part
    of its first timed evaluation (``_program_ahead``)."""
    if not request.problem.suite_ahead:
        return _program_ahead(request, gpu, share)
    names = request.problem.names
    key = suite_key(names, request.device, request.suite_options())
    if cached_suite(key):
        return "cached"
    workdir = workdirs.make("suite")
    try:
        (workdir / "candidate.py").write_bytes(b"")  # never imported: the child ends once the suite is saved
        shared_env = base_env(request.device, gpu)
        untimed = replace(request, timing=None)  # nothing is timed: the timing cache is not read
        job = replace(untimed.job(workdir, [_triton_cache(shared_env)], seed=fresh_seed()), work=BuildSuite(),
                      save_suite=str(workdir / "suite.pt"))
        share = share or _process_share(request, gpu)
        hold = share.enter(share.need_for(key, _first_guess(request)), request.op) if share else None
        # it pauses for another's timing
        gate = ChildGate(share, hold) if share is not None and hold is not None else None
        try:
            events, outcome = run_child(job, child_env(shared_env, workdir), shared_env, request.warm,
                                        request.timeout_s, request.limits, gate=gate)
        finally:
            if gate is not None:
                gate.close()
            if share is not None and hold is not None:
                share.leave(hold)
        _adopt_suite(events, workdir / "suite.pt", key)  # its memory peak is not learned: no test ran
        if cached_suite(key):
            return "built"
        return f"not built ({exit_cause(outcome.returncode) if outcome.returncode else outcome.limit or 'no suite'})"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _program_ahead(request: EvaluationRequest, gpu: int | None, share: GpuShare | None) -> str:
    """A program's torch.compile baseline measured before its first answer exists
    (``harness.after_tests.program_baseline_ahead``), where its answers will be timed against it;
    on a shared GPU with the GPU held alone, as any timing is."""
    timing = request.timing
    if request.device != "cuda" or timing is None or "inductor" not in timing.baselines:
        return ("not built (a program has no suite; its torch.compile baseline is measured ahead only where its "
                "answers are timed against it, on a GPU)")
    shared_env = base_env(request.device, gpu)
    share = share or _process_share(request, gpu)
    hold = None
    if share is not None:
        key = suite_key(request.problem.names, request.device, request.suite_options())
        hold = share.enter(share.need_for(key, _first_guess(request)), request.op, pausable=False)
    try:
        if share is not None and hold is not None:
            share.go_exclusive(hold)  # it times the GPU: alone, as every timing
        job = request.job(workdirs.make("baseline"), [_triton_cache(shared_env)], seed=fresh_seed())
        return program_baseline_ahead(request.op, job, timing, shared_env, request.warm, request.limits)
    finally:
        if share is not None and hold is not None:
            share.leave(hold)


def _adopt_suite(events: list, saved: Path, key: str) -> None:
    """Keep the suite this child built for the next evaluation of the same operator, if the file
    still holds what the child announced before its candidate ran."""
    announced = first(events, SuiteBuilt)
    if announced is not None and announced.saved_sha256:
        adopt(saved, announced.saved_sha256, key)


def _triton_cache(base_env: dict) -> str:
    """The Triton cache the child may write, created here (the file view shows it only if it exists)."""
    where = base_env["TRITON_CACHE_DIR"]
    try:
        Path(where).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SetupError(f"the Triton cache directory {where} cannot be created ({exc.strerror}); set "
                         "TRITON_CACHE_DIR to a directory you can write") from None
    return where


def _after_timing(op: str, verdict: Verdict, request: EvaluationRequest, timing: TimingOptions, job: Job,
                  base_env: dict, workdir: Path) -> None:
    """The profiles kept, the baselines and Nsight Compute run beside, the cache brought up to date
    (``timing``: the request's, set)."""
    warm, limits = request.warm, request.limits
    performance = verdict.performance
    if performance is not None and performance.profiles:  # out of the workdir before it is removed
        keep_profiles(performance.profiles, workdir, timing.profile_dir)
    if "inductor" in timing.baselines and performance is not None:
        time_inductor(op, verdict, timing, job, base_env, warm, limits)
    if timing.ncu and performance is not None and performance.measured:
        refused = request.problem.ncu_refused
        if refused:
            performance.ncu = NcuReport(measured=False, reason=refused)
        else:
            collect_ncu(verdict, timing, job, base_env, limits)
    finish_timing(timing, op, verdict)


def _redacted(verdict: Verdict, secrets: tuple[str, ...]) -> Verdict:
    """The Verdict, with every secret the parent knows replaced in all its texts (the count in
    ``redactions``, added to any made before): nothing a candidate printed or raised carries one
    into storage or a prompt."""
    data, count = Redactor(configured_secrets(list(secrets))).value(verdict.model_dump())
    if not count:
        return verdict
    data["redactions"] = verdict.redactions + count
    return Verdict.model_validate(data)


def adopt_remote_verdict(request: EvaluationRequest, verdict: dict, kernel_path: Path) -> Verdict:
    """A Verdict's data evaluated in another process or on another machine (a Ray supervisor) made
    this side's: the local kernel path, the timing brought into this side's cache, and this side's
    secrets redacted too (the count adds to the redactions made there)."""
    result = Verdict.model_validate({**verdict, "kernel": {**verdict["kernel"], "path": str(kernel_path)}})
    if request.timing is not None:
        finish_timing(request.timing, request.op, result)
    return _redacted(result, request.secrets)
