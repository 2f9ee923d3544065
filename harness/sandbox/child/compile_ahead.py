"""Compile ahead: before a group of tests runs, the candidate is called once per distinct input
layout up to its first Triton launch, which submits its compilation instead of launching
(Triton's ``AsyncCompileMode``); then those compilations run side by side, in threads, each made
first by a forked compile process (``harness.sandbox.child.compile_processes``: much of Triton's
compiler holds the GIL); the tests then find those kernels compiled. ``start_compiling_ahead``
returns while they compile: the tests start at once, each waiting only for what its own call
submitted (``Compiling.wait_for_call``; the worker compiles each group of tests so: the first tier,
then the rest; a group's tests all run, so none of its compilations is wasted).

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
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager, nullcontext
from typing import Callable, ContextManager, Iterable

import torch

from bbagent.harness.inputs import map_tensors
from bbagent.harness.sandbox.child.compile_processes import CompileProcesses

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
    return start_compiling_ahead(calls, device, paused).finish()


def start_compiling_ahead(calls: Iterable[Callable[[], object]], device: str,
                          paused: Callable[[], ContextManager] = nullcontext) -> "Compiling":
    """As ``compile_ahead``, returning once the calls are made, with their compilations under way
    (in the order submitted): ``Compiling.wait_for_call(n)`` waits for those of the calls up to
    the n-th, ``Compiling.finish()`` for all."""
    started = time.perf_counter()
    made = reached = 0
    stopped = ""
    submitted: list[int] = []  # after each call, the compilations submitted so far
    with _launches_compile_only(), _call_limit() as limit:
        parallel = _compile_in_parallel(device, paused)
        try:
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
                finally:
                    submitted.append(len(parallel.deferred.pending) if parallel else 0)
        except BaseException:
            if parallel:
                parallel.abandon()
            raise
    if parallel:
        parallel.start()
    return Compiling(parallel, {"calls": made, "launches": reached, "stopped": stopped}, started, submitted)


class Compiling:
    """Compilations submitted ahead and running in the background (``start_compiling_ahead``)."""

    def __init__(self, parallel: "_Parallel | None", report: dict, started: float, submitted: list[int]):
        self.parallel, self.report, self.started, self.submitted = parallel, report, started, submitted
        self.finished: dict | None = None

    def wait_for_call(self, number: int, timeout: float | None = None) -> bool:
        """Wait until what calls 0 to ``number`` submitted has compiled (they compile in that
        order). A test waits so for its own call's kernels before it launches them: Triton 3.9
        keeps a compilation's future in the kernel's cache and would wait for it, but Triton 3.6
        (on the H200) compiled the kernel again in the launching thread. False where ``timeout``
        seconds passed first."""
        if self.parallel is None or self.finished is not None or not self.submitted:
            return True
        count = self.submitted[min(number, len(self.submitted) - 1)]
        _, not_done = wait([future for future, _ in self.parallel.deferred.queued[:count]], timeout=timeout)
        return not not_done

    def finish(self) -> dict:
        """Wait for every compilation (a failed one is left for its test, which raises it), then
        what ``harness.events.CompiledAhead`` reports, its seconds up to the last one finished."""
        if self.finished is None:
            self.finished = self._report(self.parallel.finish() if self.parallel else None)
        return self.finished

    def abandon(self) -> dict:
        """No test will run any more: compilations not yet started are dropped (those running end
        with the process). Returns the report as ``finish`` does, up to now."""
        if self.finished is None:
            if self.parallel:
                self.parallel.abandon()
            self.finished = self._report(self.parallel.deferred.processes if self.parallel else None)
        return self.finished

    def _report(self, processes) -> dict:
        return {**self.report, "seconds": round(time.perf_counter() - self.started, 3),
                "processes": processes.forked if processes else 0, "warmed": processes.warmed if processes else 0}


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


def _compile_in_parallel(device: str, paused: Callable[[], ContextManager]) -> "_Parallel | None":
    """Triton's asynchronous compile mode entered, on a GPU where Triton has it (else None: the
    tests compile one at a time, as before): until ``_Parallel.start``, launches only submit
    their compilations."""
    if device != "cuda":
        return None
    try:
        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:  # a Triton without it
        return None
    deferred = _Deferred(paused)
    mode = AsyncCompileMode(deferred)
    mode.__enter__()
    return _Parallel(mode, deferred)


class _Parallel:
    def __init__(self, mode, deferred: "_Deferred"):
        self.mode, self.deferred = mode, deferred

    def start(self) -> None:
        """Leave the mode without waiting (launches compile as usual again) and start compiling
        what was submitted, side by side (``_Deferred.start_all``)."""
        from triton.runtime._async_compile import active_mode
        active_mode.set(None)
        self.deferred.start_all()

    def finish(self):
        """Wait for every compilation and let Triton finish them (``AsyncCompileMode``'s exit);
        returns the compile processes (or None). A compilation that failed raises when its test
        launches it (Triton keeps the failed future in the kernel's cache), not here."""
        try:
            self.deferred.wait_all()
        finally:
            try:
                self.mode.__exit__(None, None, None)
            except Exception:  # noqa: BLE001 - reported by the test that launches that kernel
                pass
        return self.deferred.processes

    def abandon(self) -> None:
        from triton.runtime._async_compile import active_mode
        active_mode.set(None)
        self.deferred.cancel_left()


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
    compilation until ``start_all``, which forks the compile processes
    (``harness.sandbox.child.compile_processes``) while no compile thread runs yet, then runs each
    compilation in a thread, warmed in a process first; the time of each counts as compiling
    (``paused``)."""

    def __init__(self, paused: Callable[[], ContextManager]):
        self.paused = paused
        self.pending: list[tuple[Future, Callable]] = []
        self.processes: CompileProcesses | None = None
        self.threads: ThreadPoolExecutor | None = None
        self.queued: list[tuple[Future, Future]] = []  # (Triton's future, the thread pool's)

    def submit(self, compile_fn: Callable) -> Future:
        future: Future = Future()
        self.pending.append((future, compile_fn))
        return future

    def start_all(self) -> None:
        """Fork the compile processes, then compile each submitted kernel in a thread pool; returns
        at once (``wait_all`` waits)."""
        pending, self.pending = self.pending, []
        workers = max(1, min(MAX_THREADS, len(os.sched_getaffinity(0)), len(pending)))
        processes = min(workers, processes_affordable()) if PROCESSES else 0
        if processes > 1:
            self.processes = CompileProcesses(processes)
        self.threads = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bbagent-compile")
        self.queued = [(future, self.threads.submit(self._run, future, compile_fn)) for future, compile_fn in pending]

    def wait_all(self) -> None:
        try:
            if self.threads is not None:
                self.threads.shutdown(wait=True)
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
            if self.processes is None or not {"src", "target", "options"} <= found.keys():
                return
            options = found["options"]
            self.processes.warm(found["src"], found["target"], options if isinstance(options, dict) else vars(options),
                                found.get("env_vars"))
        except Exception:  # noqa: BLE001 - warming is only ever a head start
            pass

    def cancel_left(self) -> None:
        """Futures never run (the calls were interrupted, or no test will run any more) end
        cancelled, so that nothing waits on them."""
        for future, _ in self.pending:
            future.cancel()
        self.pending = []
        for future, queued in self.queued:
            if queued.cancel():
                future.cancel()
        if self.threads is not None:  # what runs finishes; the processes end with this one
            self.threads.shutdown(wait=False)


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
