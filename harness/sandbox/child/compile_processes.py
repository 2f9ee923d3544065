"""Compile in forked processes: Triton's front end and much of its lowering are Python holding the
GIL, so threads compiling side by side in one process mostly wait for each other (add's 107
specialisations on the H200: 3.7 s with 8 threads, no faster with 16, against 18 s with one).

``CompileProcesses(n)`` forks ``n`` copies of the sandbox child, after the candidate is imported
and before any compile thread starts, each of which compiles a kernel when asked and so leaves it
in Triton's on-disk cache, with its launcher. The compile thread that asked then compiles the
same source itself and finds it there. A worker only fills the cache: whatever it cannot do (a
kernel it cannot name, an argument it cannot receive, an error, a crash), the thread's own
compilation decides, as before, so a worker can make compiling faster but never change its result.

A worker names the kernel by its module and qualified name, as the candidate's module defined it
before the fork (a kernel made later, inside a call, compiles in the thread alone). It keeps the
sandbox it was forked in (the audit hook, the file view, the limits) and sends no events: it
calls Triton's compiler unwrapped, past the compile clock, and never writes to the result channel
it inherits.
"""
from __future__ import annotations

import gc
import io
import os
import pickle
import queue
import signal
import struct
import sys
import threading
import warnings

_LENGTH = struct.Struct("!I")


class _Unnamed(pickle.PicklingError):
    """An object a worker could not find by name (a kernel made after the fork)."""


def _jit_function_class():
    from triton.runtime.jit import JITFunction
    return JITFunction


def _by_name(module: str, qualname: str):
    """The JIT function ``module.qualname`` names in this process (an autotuner's or heuristics'
    wrapper unwrapped), or None."""
    jit_function = _jit_function_class()
    found = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    while found is not None and not isinstance(found, jit_function):
        inner = getattr(found, "fn", None)
        found = inner if inner is not found else None
    return found


class _Pickler(pickle.Pickler):
    """Pickles a JIT function as its name, where that name finds this very function."""

    def persistent_id(self, obj):
        if isinstance(obj, _jit_function_class()):
            function = getattr(obj, "fn", None)
            name = (getattr(function, "__module__", None), getattr(function, "__qualname__", ""))
            if name[0] is None or "<locals>" in name[1] or _by_name(*name) is not obj:
                raise _Unnamed(f"{obj!r} is not reachable by its name")
            return name
        return None


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, name):
        found = _by_name(*name)
        if found is None:
            raise pickle.UnpicklingError(f"no JIT function {name[0]}.{name[1]} in the compile process")
        return found


def _read_exactly(fd: int, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class _Worker:
    def __init__(self, pid: int, requests: int, answers: int):
        self.pid, self.requests, self.answers = pid, requests, answers


class CompileProcesses:
    """``count`` forked compile processes; ``warm`` asks one of them (blocking, from any thread)."""

    def __init__(self, count: int):
        self._idle: queue.SimpleQueue[_Worker | None] = queue.SimpleQueue()  # None: every worker has died
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()  # the counts below, kept by several threads
        self.warmed = self.not_warmed = 0
        # the child's objects left out of the processes' garbage collection: a collection there
        # would write to every object's page, and so copy the child's whole heap into each
        gc.freeze()
        try:
            for _ in range(count):
                self._workers.append(self._fork())
        except OSError:
            pass  # fewer processes (a process limit): the threads compile the rest themselves
        finally:
            gc.unfreeze()
        for worker in self._workers:
            self._idle.put(worker)
        self.forked = self._alive = len(self._workers)

    def _fork(self) -> _Worker:
        request_read, request_write = os.pipe()
        answer_read, answer_write = os.pipe()
        parent_ends = [request_write, answer_read] + [fd for w in self._workers for fd in (w.requests, w.answers)]
        with warnings.catch_warnings():  # torch's own threads make Python warn about fork; none runs Python
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            _serve(request_read, answer_write, parent_ends)  # never returns
        os.close(request_read)
        os.close(answer_write)
        return _Worker(pid, request_write, answer_read)

    def warm(self, src, target, options: dict, env_vars: dict | None) -> bool:
        """A worker compiles ``src`` as ``triton.compile(src, target=..., options=...)`` would,
        into Triton's cache. True once it has; False where it could not (the caller compiles as it
        would have anyway)."""
        try:
            buffer = io.BytesIO()
            _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump((src, target, options, env_vars))
        except Exception:  # noqa: BLE001 - not sendable (a kernel made in a call, an odd constant)
            return self._count(False)
        request = buffer.getvalue()
        worker = self._idle.get()
        if worker is None:  # none left: passed on to the next thread that asks
            self._idle.put(None)
            return self._count(False)
        try:
            _write_all(worker.requests, _LENGTH.pack(len(request)) + request)
            answer = _read_exactly(worker.answers, 1)
        except OSError:
            answer = None
        if answer is None:  # it died (a compiler crash): not put back; after the last one, threads stop waiting
            with self._lock:
                self._alive -= 1
                if self._alive == 0:
                    self._idle.put(None)
            return self._count(False)
        self._idle.put(worker)
        return self._count(answer == b"1")

    def _count(self, done: bool) -> bool:
        with self._lock:
            if done:
                self.warmed += 1
            else:
                self.not_warmed += 1
        return done

    def close(self) -> None:
        """Each worker told to end (its request pipe closed) and reaped."""
        for worker in self._workers:
            for fd in (worker.requests, worker.answers):
                try:
                    os.close(fd)
                except OSError:
                    pass
        for worker in self._workers:
            try:
                os.waitpid(worker.pid, 0)
            except ChildProcessError:
                pass
        self._workers = []


def _build_launcher(kernel) -> None:
    """The kernel's launcher (a C module Triton builds with the C compiler, 0.25 s each on the H200,
    at the kernel's first launch, in the tests' thread) built now, into Triton's cache, where that
    first launch finds it. Building it loads it but calls nothing of CUDA's. Whatever fails here,
    the first launch builds it as before."""
    try:
        from triton.runtime.driver import driver
        driver.active.launcher_cls(kernel.src, kernel.metadata)
    except Exception:  # noqa: BLE001
        pass


def _serve(requests: int, answers: int, parent_ends: list[int]) -> None:
    """In a forked worker: compile each request, answer b"1" (done) or b"0"; end at end of input.
    Only the other workers' pipes are closed: the child's other descriptors belong to Python
    objects, which would close them again (maybe once reused) when collected."""
    code = 0
    try:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
            signal.signal(sig, signal.SIG_DFL)
        for fd in parent_ends:
            os.close(fd)
        import inspect
        import triton.compiler.compiler
        compile_unwrapped = inspect.unwrap(triton.compiler.compiler.compile)
        while True:
            header = _read_exactly(requests, _LENGTH.size)
            if header is None:
                break
            request = _read_exactly(requests, _LENGTH.unpack(header)[0])
            if request is None:
                break
            try:
                src, target, options, env_vars = _Unpickler(io.BytesIO(request)).load()
                extra = {"_env_vars": env_vars} if env_vars is not None else {}
                _build_launcher(compile_unwrapped(src, target=target, options=options, **extra))
                answer = b"1"
            except Exception:  # noqa: BLE001 - the asking thread's own compilation reports it
                answer = b"0"
            _write_all(answers, answer)
    except BaseException:  # noqa: BLE001 - nothing to report to: the asking thread compiles itself
        code = 1
    finally:
        os._exit(code)
