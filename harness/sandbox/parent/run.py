"""The parent's side of one sandbox child: start it (forked from the device's warm fork server, or
cold behind a launcher such as ncu), read its events (``harness.events``) as they come, watch its
limits (wall clock, the per-test clock with compilation paused, the compile budget, host memory,
processes, output) and kill its whole process group when it breaks one, asking it first where it
hung. What the child said and how it ended go back to ``harness.evaluate``.
"""
from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from dataclasses import replace

from bbagent.harness.events import (CandidateStart, CaseResult, Compile, Done, Event, ExclusiveWanted, Fatal, ReferenceStart,
                            Timing, TimingStart, decode)
from bbagent.harness.sandbox.parent.compile_pauses import compile_totals, paused_seconds
from bbagent.harness.sandbox.parent.gpu_share import ChildGate
from bbagent.harness.sandbox.job import Job
from bbagent.harness.sandbox.parent.pool import ColdChild, PoolError, WarmChild, pool_for
from bbagent.harness.sandbox.parent.watch import BoundedCapture, ChildOutcome, Limits, SessionMemory

STDERR_TAIL_BYTES = 4000
WATCH_INTERVAL_S = 0.1
HANG_DUMP_WAIT_S = 0.5
COMPILER_PATHS = ("triton/compiler", "triton/backends", "triton/runtime/build", "harness/sandbox/compile_processes")
# the tests waiting for kernels compiled ahead in other threads (the dump shows the main thread only)
COMPILE_WAITS = ("wait_for_call", "finish")
_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """Say ``message`` on stderr, once per process."""
    if message not in _WARNED:
        _WARNED.add(message)
        print(message, file=sys.stderr)


# Helion, where a kernel uses it: no autotuning while judged (a kernel with no config of its own runs Helion's
# default one), no progress bar on the child's stderr. A kernel that lists several configs has Helion pick
# among them at its first call: in this process (no benchmark subprocess, no forked precompiles, which the
# sandbox stops as process starts). Its caches follow TMPDIR into the working directory.
HELION_JUDGED = {"HELION_AUTOTUNE_EFFORT": "none", "HELION_AUTOTUNE_PROGRESS_BAR": "0",
                 "HELION_AUTOTUNE_BENCHMARK_SUBPROCESS": "0", "HELION_AUTOTUNE_PRECOMPILE": "0"}


def child_env(base_env: dict, workdir) -> dict:
    """A child's environment: the allowlisted one, with its working directory as home and temp."""
    return {**base_env, **HELION_JUDGED, "HOME": str(workdir), "TMPDIR": str(workdir)}


def exit_cause(returncode: int | None) -> str:
    """How a child process ended, in words (None: it was never waited for)."""
    if returncode is None:
        return "gone without an exit status"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        note = " (the OS kills with SIGKILL when host memory runs out)" if name == "SIGKILL" else ""
        return f"killed by {name}{note}"
    return f"exited with code {returncode}"


def run_child(job: Job, env: dict, base_env: dict, warm: bool, timeout_s: float,
              limits: Limits, prefix: list[str] | None = None,
              gate: ChildGate | None = None) -> tuple[list[Event], ChildOutcome]:
    """Start the child (cold behind ``prefix``, a launcher such as ncu, where one is given), watch
    it until it ends or breaks a limit, and collect what it said. With a ``gate`` (a shared GPU),
    the child's request for the GPU alone is passed on, and its wait is not counted as its time."""
    events: list[Event] = []
    pipes = [os.pipe() for _ in range(3)]  # result channel, stdout, stderr
    write_ends = [w for _, w in pipes]
    started = time.perf_counter()
    outcome = ChildOutcome(launched_at=time.time())
    granting = gate.child_fds() if gate is not None else []  # the grant pipe, the pause page
    try:
        child: WarmChild | ColdChild | None = None
        if warm and not prefix:
            try:
                child = pool_for(job.device, base_env).launch(job, env, write_ends + granting)
            except PoolError as exc:
                warn_once(f"bbagent: no warm pool ({exc}); starting each candidate cold instead")
        if child is None:
            cold_job = replace(job, grant_fd=granting[0] if granting else None,
                               pause_fd=granting[1] if len(granting) > 1 else None)
            child = ColdChild(cold_job, write_ends[0], write_ends[1], write_ends[2], env, job.workdir, prefix)
    finally:
        for fd in write_ends:
            os.close(fd)
        if gate is not None:
            gate.close_child_end()
    if gate is not None:
        gate.started(child.pid)  # a warm child and a cold one each lead a process group of their own
    on_event = (lambda event: gate.wanted() if isinstance(event, ExclusiveWanted) else None) if gate else None
    reader = threading.Thread(target=_read_events, args=(pipes[0][0], events, on_event), daemon=True)
    stdout = BoundedCapture(pipes[1][0], limits.output_bytes)
    stderr = BoundedCapture(pipes[2][0], limits.output_bytes)
    for thread in (reader, stdout, stderr):
        thread.start()
    try:
        returncode = _watch(child, events, stdout, stderr, limits, timeout_s, outcome,
                            gate.paused_s if gate is not None else lambda: 0.0,
                            gate.stopped_s if gate is not None else lambda: 0.0)
    finally:
        if gate is not None:
            gate.started(None)
        child.kill()  # anything the child left behind in its group; all of it when interrupted (Ctrl-C)
    for thread in (reader, stdout, stderr):
        thread.join(timeout=5)
    outcome.returncode = returncode if returncode is not None else -signal.SIGKILL
    outcome.wall_s = time.perf_counter() - started
    outcome.stdout, outcome.stderr = stdout.text(1000), stderr.text(STDERR_TAIL_BYTES)
    outcome.hang_site = _hang_site(stderr.text(STDERR_TAIL_BYTES), job.kernel) if outcome.limit == "timeout" else ""
    return events, outcome


def _watch(child, events: list[Event], stdout: BoundedCapture, stderr: BoundedCapture, limits: Limits,
           timeout_s: float, outcome: ChildOutcome, waited_for_gpu=lambda: 0.0, stopped=lambda: 0.0) -> int | None:
    """Wait for the child, killing it when it breaks a limit (named in ``outcome``); its exit code.
    ``waited_for_gpu()``: the seconds it has waited for the GPU alone or been paused for another's,
    not counted; ``stopped()``: the seconds it was stopped meanwhile, not counted as compiling."""
    deadline = time.perf_counter() + timeout_s  # from the child's start: a fork server's own start is not counted
    returncode = None
    memory = SessionMemory()
    while returncode is None:
        returncode = child.wait(WATCH_INTERVAL_S)
        if returncode is not None:
            break
        processes, rss = memory.usage(child.pid, limits.memory_bytes)
        outcome.memory_peak = max(outcome.memory_peak, rss)
        running = running_test(events)
        now = time.perf_counter()
        if now > deadline + waited_for_gpu():
            outcome.limit = "timeout"
            _dump_stack(child.pid)
        elif running and (now - running.received_at - paused_seconds(events, running.received_at, now)
                          > limits.test_seconds):
            outcome.limit, outcome.detail = "timeout", (f"test {running.id} ran past {limits.test_seconds:g} s "
                                                        "(compilation and autotuning not counted)")
            _dump_stack(child.pid)
        elif paused_seconds(events, 0.0, now) - stopped() > limits.compile_seconds:
            totals = compile_totals(events)
            outcome.limit, outcome.detail = "compile_budget", (
                f"compilation and autotuning took more than {limits.compile_seconds:g} s "
                f"({totals['compiles']} compilations, {totals['autotune_runs']} autotuning runs so far)")
            _dump_stack(child.pid)
        elif rss > limits.memory_bytes:
            outcome.limit, outcome.detail = "host_oom", (f"{rss / 2**30:.1f} GiB resident, limit "
                                                         f"{limits.memory_bytes / 2**30:.1f} GiB")
        elif processes > limits.processes:
            outcome.limit, outcome.detail = "process_spawn", f"{processes} processes, limit {limits.processes}"
        elif stdout.total + stderr.total > limits.output_bytes:
            outcome.limit, outcome.detail = "output_flood", (f"{(stdout.total + stderr.total) / 2**20:.0f} MiB, "
                                                             f"limit {limits.output_bytes / 2**20:.0f} MiB")
        if outcome.limit:
            child.kill()
            returncode = child.wait(30.0)
    return returncode


def running_test(events: list[Event]) -> CandidateStart | TimingStart | None:
    """The event that started what the candidate is running now (a test's call of the kernel, or
    its timing), if any; compile events between it and now are skipped. Once the test's reference
    started, the candidate is not running."""
    seen = 0
    for event in reversed(events):
        if isinstance(event, Compile):
            continue
        if isinstance(event, (CandidateStart, TimingStart)):
            return event
        seen += 1
        if isinstance(event, (ReferenceStart, CaseResult, Timing, Fatal, Done)) or seen >= 3:
            return None
    return None


def _dump_stack(pid: int) -> None:
    """Ask the child where it is (faulthandler on SIGUSR1, to stderr) before it is killed."""
    try:
        os.kill(pid, signal.SIGUSR1)
    except OSError:
        return
    time.sleep(HANG_DUMP_WAIT_S)


def _hang_site(stderr: str, candidate_file: str) -> str:
    """Where a timed-out child was, from its faulthandler dump (most recent call first)."""
    start = max(stderr.rfind(marker) for marker in ("Stack (most recent call first)", "Current thread", "Thread 0x"))
    if start < 0:
        return ""
    frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', stderr[start:])
    if not frames:
        return ""
    files = [f[0] for f in frames]
    mine = next((f for f in frames if f[0] == candidate_file), None)
    at = f" (candidate line {mine[1]}, in {mine[2]})" if mine else ""
    waiting = any(name.endswith("compile_ahead.py") and function in COMPILE_WAITS for name, _, function in frames)
    if waiting or any(part in name for name in files for part in COMPILER_PATHS):
        return "in Triton's compiler: a kernel whose compilation does not finish" + at
    if mine:
        return "in the kernel's code: a loop that does not finish" + at
    if any(os.path.basename(name) in ("case.py", "compare.py") for name in files[:2]):
        return "waiting for the device: a Triton kernel that does not finish"
    return f"in {os.path.basename(files[0])}"


def _read_events(fd: int, events: list[Event], on_event=None) -> None:
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as stream:
        for line in stream:
            event = decode(line, time.perf_counter())
            events.append(event)
            if on_event is not None:
                on_event(event)
