"""Compilation and autotuning are not run time: the child reports them, the parent pauses the test clock.

Child side (``CompileClock.install``): ``triton.compiler.compile`` (every JIT compilation, an
on-disk cache hit included) and ``Autotuner._bench`` (one config timed while autotuning) are
wrapped, as are the ``run`` and ``_bench`` of every ``Autotuner`` subclass a kernel brings (a
library's own tuner). While the tests run, every autotuner keeps only its first config. When the outermost such call starts, the child sends a ``Compile`` event (phase
"start", its kind; ``harness.events``); when it ends, phase "end" with the running totals
(compilations, autotuning runs, seconds of each). Nested calls (a config compiled while it is benchmarked) are
counted but not reported apart, as are calls overlapping in several threads (compiling ahead,
``harness.sandbox.child.compile_ahead``): the span is the time anything was compiling.

Parent side (``harness.sandbox.parent.compile_pauses``): the time between start and end events, on the
parent's own clock, so that a child that dies mid-compile still has its pause counted up to now.
"""
from __future__ import annotations

import threading
import time
import weakref
from contextlib import contextmanager

from bbagent.harness.events import Compile

CLOCKED_KINDS = ("compile", "autotune")
# while the tests run, each config of an autotuner runs this many tests (the first ones, which the
# first tier makes one per class of test), then the first config runs the rest: every config is
# compiled and run without benchmarking, and compilations stay near one per specialisation
TESTS_PER_CONFIG = 2


class CompileClock:
    def __init__(self, send):
        self.send = send
        self.depth = 0
        self.totals = {"compiles": 0, "autotune_runs": 0, "compile_s": 0.0, "autotune_s": 0.0}
        self._outer_kind = ""
        self._outer_started = 0.0
        self._benched = 0  # configs benchmarked so far: an Autotuner.run that raises it was an autotuning run
        self._tuning = 0  # autotuning benchmarks under way (their launches are Triton's, on streams it picks)
        self._runs_open = 0
        self.quick = False
        self.tuners = weakref.WeakSet()
        self.test_number = 0
        self._lock = threading.RLock()  # compiling ahead compiles in several threads at once

    def install(self) -> None:
        import triton.compiler
        import triton.compiler.compiler
        from triton.runtime.autotuner import Autotuner
        compile_fn = self._timed("compile", triton.compiler.compile)
        triton.compiler.compile = compile_fn  # JITFunction binds `from ..compiler import compile` lazily
        triton.compiler.compiler.compile = compile_fn
        if hasattr(Autotuner, "_bench"):
            Autotuner._bench = self._timed("autotune", Autotuner._bench)
        Autotuner.run = self._counting_runs(Autotuner.run)
        self._switch_benchmarker(Autotuner)
        self._see_every_tuner(Autotuner)

    def _see_every_tuner(self, Autotuner) -> None:
        """Every autotuner made from now on (``@triton.autotune``, and subclasses such as a library's
        own tuner that override ``run`` or ``_bench``) is registered: its own ``run``/``_bench`` are
        counted like the base class's, and while ``quick`` it runs one config at a time."""
        clock, original_init = self, Autotuner.__init__

        def init(tuner, *args, **kwargs):
            original_init(tuner, *args, **kwargs)
            clock.register(tuner, Autotuner)
        Autotuner.__init__ = init

    def register(self, tuner, Autotuner) -> None:
        self.tuners.add(tuner)
        kind = type(tuner)
        if kind is not Autotuner and not getattr(kind, "_bbagent_counted", False):
            if "run" in kind.__dict__:
                kind.run = self._counting_runs(kind.__dict__["run"])
            if "_bench" in kind.__dict__:
                kind._bench = self._timed("autotune", kind.__dict__["_bench"])
            kind._bbagent_counted = True
        if self.quick:
            self._trim(tuner)

    def _trim(self, tuner) -> None:
        """One config at a time while the tests run (``rotate`` picks it): nothing to benchmark for
        any shape key, and a compile per config and specialisation only where a test uses it (the
        timing phase puts every config back and autotunes for real)."""
        configs = getattr(tuner, "configs", None)
        if isinstance(configs, list) and len(configs) > 1 and not hasattr(tuner, "_bbagent_configs"):
            tuner._bbagent_configs = configs
            self._hold(tuner)

    def _config_index(self, count: int) -> int:
        """The config the current test runs: the first ``count * TESTS_PER_CONFIG`` tests take each
        config in turn, the rest the first config."""
        return self.test_number % count if self.test_number < count * TESTS_PER_CONFIG else 0

    def rotate(self, test_number: int) -> None:
        """Before test ``test_number`` (run order): every trimmed autotuner switches to its config
        for that test, so that each config runs on some tests without any being benchmarked."""
        self.test_number = test_number
        for tuner in list(self.tuners):
            self._hold(tuner)

    def held_configs(self) -> tuple:
        """Which config each trimmed autotuner holds now (two tests with the same inputs compile
        different kernels when these differ)."""
        return tuple(self._config_index(len(t._bbagent_configs)) for t in list(self.tuners)
                     if getattr(t, "_bbagent_configs", None))

    def _hold(self, tuner) -> None:
        """A trimmed autotuner holds the current test's config; a tuner's own per-key choice (a
        library's run) is forgotten when that config changes."""
        configs = getattr(tuner, "_bbagent_configs", None)
        if not configs:
            return
        config = configs[self._config_index(len(configs))]
        if tuner.configs != [config]:
            tuner.configs = [config]
            cache = getattr(tuner, "cache", None)
            if cache is not None and hasattr(cache, "clear"):
                cache.clear()

    def _switch_benchmarker(self, Autotuner) -> None:
        """Let ``quick`` replace the autotuner's benchmarker (``Autotuner.do_bench``, a property in
        triton 3.x; the module's ``do_bench`` where there is none)."""
        clock = self
        original = Autotuner.__dict__.get("do_bench")
        if original is None:
            import triton.runtime.autotuner as module
            if hasattr(module, "do_bench"):
                slow = module.do_bench
                module.do_bench = lambda *a, **k: (time_once if clock.quick else slow)(*a, **k)
            return

        class Switch:  # a data descriptor: consulted before an instance's cached value
            def __get__(self, instance, owner):
                if instance is None:
                    return original
                if clock.quick:
                    return time_once
                return original.__get__(instance, owner)

            def __set__(self, instance, value):
                instance.__dict__["do_bench"] = value
        Autotuner.do_bench = Switch()

    def quick_autotuning(self) -> None:
        """While the tests run, an autotuner runs one config at a time (and one that still
        benchmarks times it by a single run): the tests need every config to work, not the fastest
        one, and a shape-keyed autotuner would otherwise compile and time every config for every
        new shape (a matmul suite holds hundreds)."""
        self.quick = True
        for tuner in list(self.tuners):
            self._trim(tuner)

    def real_autotuning(self) -> None:
        """Before the timing phase: every config back, the quick choices forgotten; autotuning runs
        again, for real."""
        self.quick = False
        for tuner in list(self.tuners):
            if hasattr(tuner, "_bbagent_configs"):
                tuner.configs = tuner.__dict__.pop("_bbagent_configs")
            cache = getattr(tuner, "cache", None)
            if cache is not None and hasattr(cache, "clear"):
                cache.clear()

    def _timed(self, kind: str, original):
        clock = self

        def timed(*args, **kwargs):
            clock._enter(kind)
            try:
                return original(*args, **kwargs)
            finally:
                clock._exit(kind)
        timed.__wrapped__ = original  # type: ignore[attr-defined]  # as functools.wraps sets it
        return timed

    def _counting_runs(self, original):
        clock = self

        def run(tuner, *args, **kwargs):
            clock.tuners.add(tuner)
            before = clock._benched
            clock._runs_open += 1  # a subclass's run calling the base class's counts once
            try:
                return original(tuner, *args, **kwargs)
            finally:
                clock._runs_open -= 1
                if clock._runs_open == 0 and clock._benched > before:
                    clock.totals["autotune_runs"] += 1
        return run

    @contextmanager
    def paused(self):
        """Time that counts as compiling without being a compilation itself (compiling ahead:
        waiting for a compile process, ``harness.sandbox.child.compile_ahead``)."""
        self._enter("compile", counted=False)
        try:
            yield
        finally:
            self._exit("compile")

    def _enter(self, kind: str, counted: bool = True) -> None:
        with self._lock:
            self._enter_locked(kind, counted)

    def _exit(self, kind: str) -> None:
        with self._lock:
            self._exit_locked(kind)

    @property
    def autotuning(self) -> bool:
        """An autotuner is benchmarking configs (its launches are Triton's own)."""
        return self._tuning > 0

    def _enter_locked(self, kind: str, counted: bool = True) -> None:
        if kind == "autotune":
            self._tuning += 1
        if kind == "autotune" and counted:
            self._benched += 1
        if kind == "compile" and counted:
            self.totals["compiles"] += 1
        self.depth += 1
        if self.depth == 1:
            self._outer_kind, self._outer_started = kind, time.perf_counter()
            self.send(Compile(phase="start", kind=kind))

    def _exit_locked(self, kind: str) -> None:
        if kind == "autotune":
            self._tuning -= 1
        self.depth -= 1
        if self.depth == 0:
            seconds = time.perf_counter() - self._outer_started
            self.totals[f"{self._outer_kind}_s"] += seconds
            self.send(Compile(phase="end", kind=self._outer_kind,
                              totals={k: round(v, 3) if isinstance(v, float) else v for k, v in self.totals.items()}))


def time_once(fn, quantiles=None, **_):
    """A benchmarker that runs ``fn`` once: its wall time, in ms, as ``do_bench`` reports it."""
    import torch
    started = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - started) * 1e3
    return [ms] * len(quantiles) if quantiles else ms
