"""Compile ahead: before a group of tests runs, the candidate is called once per distinct input
layout up to its first Triton launch, which submits its compilation instead of launching
(Triton's ``AsyncCompileMode``); then those compilations run side by side, in threads, each made
first by a forked compile process (``harness.sandbox.compile_processes``: much of Triton's
compiler holds the GIL); the tests then find those kernels compiled.

On a GPU most of a new candidate's evaluation is compiling (softmax on the H200: 29 compilations,
6.7 of its 8.2 s), one at a time while the machine's other cores idle.

Only up to the first launch: that kernel does not run, and what follows it in the candidate's
code would read memory nothing wrote (an index taken from an unwritten buffer can end the CUDA
context). Up to the launch the code sees a clone of the test's own inputs, as in the test. A
kernel launched second compiles in its test, as before. Nothing here judges: whatever the
candidate raises, and any compile error, is left to the test, which makes the same call again.
"""
from __future__ import annotations

import os
import signal
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from typing import Callable, ContextManager, Iterable

import torch

from harness.inputs import map_tensors
from harness.sandbox.compile_processes import CompileProcesses

MAX_THREADS = 16
PROCESSES = True  # warm each compilation in a forked process (False: threads alone)
MAX_PROCESSES = 8
PROCESS_MEMORY = 1 << 30  # host memory to set aside per compile process (0.4-1 GiB each seen on the H200)
CALL_LIMIT_S = 5.0  # a call that runs this long before its first launch ends compiling ahead (its test will time it)


class _Launched(BaseException):
    """The call reached a Triton launch: compiling it was submitted, nothing ran."""


class _OutOfTime(BaseException):
    """A call ran ``CALL_LIMIT_S`` without reaching a launch."""


def layout_key(name: str, case) -> tuple:
    """What decides the kernels a test's call compiles, as far as the harness can know: the
    overload, and each argument's dtype, shape and strides (values for anything not a tensor)."""
    def described(t: torch.Tensor) -> tuple:
        return ("tensor", str(t.dtype), tuple(t.shape), tuple(t.stride()))
    return (name, repr(map_tensors(case.meta_inputs(), described)), case.out_layout, tuple(case.out_names))


def compile_ahead(calls: Iterable[Callable[[], object]], device: str,
                  paused: Callable[[], ContextManager] = nullcontext) -> dict:
    """Each ``call()`` up to its first launch (the iterable may set state for the call it yields
    next: the autotuners' configs), then their compilations side by side, each inside
    ``paused()`` (the compile clock's). Returns what ``harness.events.CompiledAhead`` reports."""
    started = time.perf_counter()
    made = reached = 0
    stopped = ""
    with _compiling_in_parallel(device, paused) as parallel, _launches_compile_only(), _call_limit() as limit:
        for call in calls:
            made += 1
            try:
                with limit():
                    call()
            except _Launched:
                reached += 1
            except _OutOfTime:
                stopped = f"a call ran {CALL_LIMIT_S:g} s without launching a kernel"
                break
            except KeyboardInterrupt:
                raise
            except BaseException:  # noqa: BLE001 - sys.exit too: the test makes the same call and reports it
                pass
    processes = parallel.processes if parallel else None
    return {"calls": made, "launches": reached, "seconds": round(time.perf_counter() - started, 3),
            "stopped": stopped, "processes": processes.forked if processes else 0,
            "warmed": processes.warmed if processes else 0}


@contextmanager
def _launches_compile_only():
    """Every ``JITFunction.run`` (``kernel[grid](...)``, an autotuner's or heuristics' call, a
    ``warmup``) compiles, or submits compiling, and then ends the call; under the interpreter,
    ``InterpretedFunction.run`` ends it without running."""
    classes = _jit_classes()
    originals = {cls: cls.run for cls in classes}

    def compile_only(original):
        def run(fn, *args, grid, warmup=False, **kwargs):
            original(fn, *args, grid=grid, warmup=True, **kwargs)
            raise _Launched()
        return run
    for cls in classes:
        cls.run = compile_only(originals[cls])
    try:
        yield
    finally:
        for cls, original in originals.items():
            cls.run = original


def _jit_classes() -> list[type]:
    from triton.runtime.jit import JITFunction
    classes = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        classes.append(InterpretedFunction)
    except ImportError:
        pass
    return classes


@contextmanager
def _compiling_in_parallel(device: str, paused: Callable[[], ContextManager]):
    """Triton's asynchronous compile mode, on a GPU where Triton has it: the calls inside only
    submit their compilations; on leaving, those run side by side (``_Deferred.run_all``) and
    every one has finished, a failed one left for its test to repeat."""
    AsyncCompileMode = None
    if device == "cuda":
        try:
            from triton.runtime._async_compile import AsyncCompileMode
        except ImportError:  # a Triton without it: the tests compile one at a time, as before
            pass
    if AsyncCompileMode is None:
        yield None
        return
    deferred = _Deferred(paused)
    with _finishing(mode := AsyncCompileMode(deferred)):
        try:
            yield deferred
        except BaseException:
            deferred.cancel_left()  # before the mode waits for them
            raise
        deferred.run_all()


def processes_affordable() -> int:
    """How many compile processes this machine has room for now: at most ``MAX_PROCESSES``, no
    more than the cores idle at this instant (evaluations sharing the machine, as a batch runs
    them, already keep its cores busy), nor than the available memory holds at ``PROCESS_MEMORY``
    each (the pages a fork copies as it writes them, Triton's compiler's own)."""
    try:
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[0])  # runnable now, this process included
        with open("/proc/meminfo") as f:
            available = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, ValueError, IndexError, StopIteration):
        return 0
    idle = len(os.sched_getaffinity(0)) - running + 1
    return max(0, min(MAX_PROCESSES, idle, available // PROCESS_MEMORY))


class _Deferred:
    """The executor given to Triton's asynchronous compile mode: it keeps each submitted
    compilation until ``run_all``, which forks the compile processes
    (``harness.sandbox.compile_processes``) while no compile thread runs yet, then runs each
    compilation in a thread, warmed in a process first; the time of each counts as compiling
    (``paused``)."""

    def __init__(self, paused: Callable[[], ContextManager]):
        self.paused = paused
        self.pending: list[tuple[Future, Callable]] = []
        self.processes: CompileProcesses | None = None

    def submit(self, compile_fn: Callable) -> Future:
        future: Future = Future()
        self.pending.append((future, compile_fn))
        return future

    def run_all(self) -> None:
        pending, self.pending = self.pending, []
        workers = max(1, min(MAX_THREADS, len(os.sched_getaffinity(0)), len(pending)))
        processes = min(workers, processes_affordable()) if PROCESSES else 0
        if processes > 1:
            self.processes = CompileProcesses(processes)
        try:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bbagent-compile") as threads:
                for future, compile_fn in pending:
                    threads.submit(self._run, future, compile_fn)
        finally:
            if self.processes is not None:
                self.processes.close()

    def _run(self, future: Future, compile_fn: Callable) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            with self.paused():
                if self.processes is not None and self.processes.forked:
                    self._warm(compile_fn)
                kernel = compile_fn()
        except BaseException as exc:  # noqa: BLE001 - kept in the future: the test that launches it reports it
            future.set_exception(exc)
        else:
            future.set_result(kernel)

    def _warm(self, compile_fn: Callable) -> None:
        """A compile process compiles what ``compile_fn`` (Triton's closure) will, found by the
        names Triton gives its variables; where they are not there, or anything here fails,
        nothing is warmed (the thread's own compilation alone decides)."""
        try:
            found = dict(zip(compile_fn.__code__.co_freevars, (c.cell_contents for c in compile_fn.__closure__ or ())))
            if not {"src", "target", "options"} <= found.keys():
                return
            options = found["options"]
            self.processes.warm(found["src"], found["target"], options if isinstance(options, dict) else vars(options),
                                found.get("env_vars"))
        except Exception:  # noqa: BLE001 - warming is only ever a head start
            pass

    def cancel_left(self) -> None:
        """Futures never run (the calls were interrupted) end cancelled, so that nothing waits on them."""
        for future, _ in self.pending:
            future.cancel()
        self.pending = []


@contextmanager
def _finishing(mode):
    """``mode`` entered and left; a compilation that failed raises when its test launches it
    (Triton keeps the failed future in the kernel's cache), so the error is not raised here."""
    mode.__enter__()
    try:
        yield
    finally:
        try:
            mode.__exit__(None, None, None)
        except Exception:  # noqa: BLE001 - reported by the test that launches that kernel
            pass


@contextmanager
def _call_limit():
    """``limit()``: a context in which a call that runs past ``CALL_LIMIT_S`` raises ``_OutOfTime``
    (SIGALRM; the previous handler is put back)."""
    def expire(signum, frame):
        raise _OutOfTime()

    @contextmanager
    def limit():
        signal.setitimer(signal.ITIMER_REAL, CALL_LIMIT_S)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    previous = signal.signal(signal.SIGALRM, expire)
    try:
        yield limit
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
