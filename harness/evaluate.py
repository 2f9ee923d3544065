"""Evaluate a candidate kernel file in a sandboxed child process and return its Verdict.

The parent never imports the candidate. The child is forked from a warm fork server
(``harness.sandbox.pool``, ``harness.sandbox.forkserver``) or, with ``warm=False``, started as a fresh
interpreter; either way it leads its own session in a private temporary directory, with
an environment reduced to an allowlist (no API keys), and contains itself before the
candidate is imported (``harness.sandbox.containment``: namespaces, rlimits, audit hook). The
parent watches it (``harness.sandbox.watch``): wall-clock limit, host memory and process count of
its session, output size; breaking one kills the whole session's group. Results arrive as
JSON lines on a dedicated pipe; stdout and stderr are kept as a bounded head and tail.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from harness.suite.budget import CPU_MAX_NUMEL
from harness.timing import baselines, ncu
from harness.timing.profile import largest
from harness.timing.metrics import summarize_performance
from harness.timing.reference_cache import ReferenceCache
from harness.sandbox.pool import ColdChild, PoolError, pool_for
from harness.sandbox.compile_clock import compile_totals, paused_seconds
from harness.sandbox.watch import BoundedCapture, Limits, ChildOutcome, session_usage
from harness.checks.static_check import check_source
from harness.redact import Redactor, configured_secrets
from harness.verdict import SCHEMA_VERSION, Verdict, describe_failures, group_failures, summarize

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH",
                 "TRITON_CACHE_DIR", "TRITON_HOME", "TMPDIR", "NVIDIA_VISIBLE_DEVICES")
STDERR_TAIL_BYTES = 4000
WATCH_INTERVAL_S = 0.1
CHANNEL_KEYS = ("event", "received_at")  # added on the result channel, not part of a test's record
HANG_DUMP_WAIT_S = 0.5
COMPILER_PATHS = ("triton/compiler", "triton/backends", "triton/runtime/build")


@dataclass
class TimingOptions:
    """Ask for the timing phase (``harness.timing.phase``; GPU only, after every test passed).
    ``cache``: eager timings and device yardsticks already measured are read from it (unless
    ``reuse`` is False, as with ``--no-cache``) and new ones are written to it. ``keep_raw``
    keeps every repetition's time in the Verdict (``bbagent bench`` writes them to its records)."""
    target_ms: float = 25.0
    max_cases: int = 24
    cache: ReferenceCache | None = None
    reuse: bool = True
    keep_raw: bool = False
    rows: dict | None = None  # the cached rows, read by the machine that holds the cache (see remote)
    baselines: tuple[str, ...] = ("eager",)  # harness.timing.baselines.ENGINES; eager always
    inductor_mode: str = "default"  # a key of harness.timing.baselines.INDUCTOR_MODES
    profile: int = 0  # profile this many of the largest timed shapes (harness.timing.profile) ...
    profile_dir: Path | None = None  # ... into this directory (local evaluations only)
    ncu: int = 0  # Nsight Compute metrics on this many of the largest timed shapes (harness.timing.ncu)

    def request(self, op: str) -> dict:
        asked = {"target_ms": self.target_ms, "max_cases": self.max_cases, "profile": self.profile}
        if self.rows is not None:
            return {**asked, **self.rows}
        import torch  # the child's version is the parent's (same environment)
        return {**asked, **self._cached(op, torch.__version__)}

    def _cached(self, op: str, torch_version: str) -> dict:
        use = self.cache is not None and self.reuse
        return {"reference": self.cache.reference_rows(op, torch_version) if use else [],
                "device": self.cache.device_rows(torch_version) if use else []}

    def remote(self, op: str, torch_version: str) -> dict:
        """These options as plain data for an evaluation on another machine (whose torch is
        ``torch_version``): the cached rows travel, the cache stays; raw times are kept, for
        ``finish_timing`` on this side to store and strip."""
        return {"target_ms": self.target_ms, "max_cases": self.max_cases, "keep_raw": True,
                "rows": self._cached(op, torch_version), "baselines": tuple(self.baselines),
                "inductor_mode": self.inductor_mode}


class KernelFileError(ValueError):
    """The kernel file is missing or unreadable (a usage error, not a failing verdict)."""


class SetupError(ValueError):
    """The environment bbagent runs in cannot host the sandbox; the message names the fix."""


def check_servable(kernel_for: str, overloads: list[str]) -> None:
    """Raise ``AdapterError`` (a usage error) unless a kernel written for ``kernel_for`` can serve
    every overload: itself, or, from the functional overload, its in-place and out= siblings."""
    from harness.adapters import AdapterError, check_serves
    from harness.ops import UnknownOpError, resolve_op
    try:
        written_for = resolve_op(kernel_for)
        for name in overloads:
            check_serves(written_for, resolve_op(name))
    except UnknownOpError as exc:
        raise AdapterError(str(exc)) from None


def default_device() -> str:
    import torch  # the parent may import torch; it never imports the candidate
    return "cuda" if torch.cuda.is_available() else "cpu"


def physical_gpu(gpu: int) -> str:
    """The CUDA_VISIBLE_DEVICES entry of the parent's GPU number ``gpu`` (numbered as torch in
    this process numbers them: through this process's own CUDA_VISIBLE_DEVICES, if set)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return str(gpu)
    entries = [entry.strip() for entry in visible.split(",") if entry.strip()]
    if not 0 <= gpu < len(entries):
        raise SetupError(f"GPU {gpu} is not visible: CUDA_VISIBLE_DEVICES={visible!r} shows {len(entries)}")
    return entries[gpu]


def _base_env(device: str, gpu: int | None = None) -> dict:
    """The allowlisted environment shared by every child of a device (and its fork server);
    pinned to one GPU when ``gpu`` is given (one fork server per GPU)."""
    env = {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ}
    if gpu is not None and device != "cpu":
        env["CUDA_VISIBLE_DEVICES"] = physical_gpu(gpu)
    # The project first; then whatever the parent had (e.g. a --target site dir on a GPU box).
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("TRITON_CACHE_DIR", str(Path(tempfile.gettempdir()) / "bbagent-triton-cache"))
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:  # torch.cuda.is_available() through NVML, so the fork server never initialises CUDA
        env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    return env


def _exit_cause(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        note = " (the OS kills with SIGKILL when host memory runs out)" if name == "SIGKILL" else ""
        return f"killed by {name}{note}"
    return f"exited with code {returncode}"


def evaluate(op: str, kernel_path: str | Path, *, device: str | None = None, seed: int | None = None,
             timeout_s: float = 300.0, cpu_max_numel: int = CPU_MAX_NUMEL, warm: bool = True,
             static_check: bool = True, limits: Limits | None = None,
             hidden: list[str | Path] | None = None, timing: TimingOptions | None = None,
             kernel_for: str | None = None, overloads: list[str] | None = None,
             namespaces: bool = True, secrets: list[str] | None = None, gpu: int | None = None,
             extra_traces: dict[str, list[dict]] | None = None, channels_last: bool = False) -> Verdict:
    """Run every test of ``op`` against the kernel file and return its Verdict.

    ``kernel_for`` is the overload whose calling convention the file's ``kernel`` has (default
    ``op``); ``overloads`` are the overloads to test (default ``op`` alone; ``op`` is always
    tested, and timed, first). An overload other than ``kernel_for`` is served through
    ``harness.adapters``: ``kernel_for`` must then be its family's functional overload.

    ``warm`` forks the child from the device's fork server (``harness.sandbox.pool``) instead of
    starting an interpreter. ``static_check=False`` skips the source rules, so that the
    run-time containment can be tested on its own. The child sees only what
    ``harness.sandbox.file_view`` allows; ``hidden`` paths stay out of its view even where they lie
    inside an allowed directory (``runs/`` inside a virtual environment, say); ``namespaces=False``
    leaves the file view and the network to the audit hook alone, as on an OS that gives no
    namespaces (for testing that layer). Every text of the Verdict is redacted
    (``harness.redact``) of the secret-named environment variables' values and of ``secrets``.
    ``timing`` asks
    for the timing phase; its results are the Verdict's ``performance``. ``gpu`` pins the child to
    that GPU (numbered as this process sees them). ``extra_traces`` adds trace inputs to the tests:
    per operator name (``aten.add.Tensor``), ``{"line": "cnt: N, ((...), {})", "timed": bool}``
    (a dataset's inputs; untimed ones are correctness canaries). ``channels_last`` runs each trace
    input with a contiguous 4-d or 5-d tensor once more with it in channels-last layout."""
    kernel_path = Path(kernel_path)
    if not kernel_path.is_file():
        raise KernelFileError(f"kernel file not found: {kernel_path}")
    overloads = [op] + [name for name in (overloads or []) if name != op]
    check_servable(kernel_for or op, overloads)
    source = kernel_path.read_bytes()
    device = device or default_device()
    limits = limits or Limits()
    seed = seed if seed is not None else int.from_bytes(os.urandom(4), "little") % (2**31)
    findings = check_source(source.decode("utf-8", "replace")) if static_check else []
    if findings:  # rejected before any of its code runs
        return _redacted(_assemble(op, kernel_path, source, seed, [], ChildOutcome(returncode=0),
                                   timeout_s, static_findings=findings), secrets)

    workdir = Path(tempfile.mkdtemp(prefix="bbagent-cand-")).resolve()
    candidate = workdir / "candidate.py"
    candidate.write_bytes(source)
    base_env = _base_env(device, gpu)
    try:  # the file view shows the Triton cache only if it exists
        Path(base_env["TRITON_CACHE_DIR"]).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        raise SetupError(f"the Triton cache directory {base_env['TRITON_CACHE_DIR']} cannot be created "
                         f"({exc.strerror}); set TRITON_CACHE_DIR to a directory you can write") from None
    job = {"op": op, "kernel": str(candidate), "seed": seed, "device": device, "workdir": str(workdir),
           "hidden": [str(Path(p).resolve()) for p in hidden or []], "tool_write_dirs": [base_env["TRITON_CACHE_DIR"]],
           "cpu_max_numel": cpu_max_numel, "timing": timing.request(op) if timing else None,
           "kernel_for": kernel_for or op, "overloads": overloads, "namespaces": namespaces,
           "extra_traces": extra_traces or {}, "channels_last": channels_last}
    env = _child_env(base_env, workdir)
    try:
        events, outcome = _run_child(job, env, base_env, warm, timeout_s, limits)
        verdict = _assemble(op, kernel_path, source, seed, events, outcome, timeout_s)
        for note in (verdict["environment"].get("containment") or {}).get("notes", []):  # what the OS refused: said once
            _warn_once(f"bbagent sandbox: {note}")
        if timing:
            if (verdict["performance"] or {}).get("profiles"):  # out of the workdir before it is removed
                _keep_profiles(verdict["performance"]["profiles"], workdir, timing.profile_dir)
            if "inductor" in timing.baselines and verdict["performance"] is not None:
                _time_inductor(op, verdict, timing, job, base_env, warm, limits)
            if timing.ncu and verdict["performance"] is not None:
                _collect_ncu(verdict, timing, job, base_env, limits)
            finish_timing(timing, op, verdict)
        return _redacted(verdict, secrets)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _child_env(base_env: dict, workdir: Path) -> dict:
    """A child's environment: the allowlisted one, with its working directory as home and temp."""
    return {**base_env, "HOME": str(workdir), "TMPDIR": str(workdir)}


def _time_inductor(op: str, verdict: dict, timing: TimingOptions, job: dict, base_env: dict, warm: bool,
                   limits: Limits) -> None:
    """The inductor baseline of every timed shape (``harness.timing.baselines``): from the cache, or
    measured now in a child of its own with no candidate in it."""
    performance = verdict["performance"]
    tests, gpu, mode = performance["tests"], performance["gpu"], timing.inductor_mode
    if verdict["verdict"] != "pass":  # it went wrong while being timed: no speedup to compare
        performance["baselines"] = {"inductor": baselines.not_measured(
            "the kernel failed while being timed; a failing kernel is not compared", mode)}
        return
    rows = timing.request(op)["reference"]
    missing = baselines.wanted(tests, rows, gpu, mode)
    measured, problem = [], None
    if missing:
        workdir = Path(tempfile.mkdtemp(prefix="bbagent-baseline-")).resolve()
        shapes = [{"input": t["input"], "mode": t["mode"]} for t in missing]
        child_job = {**{k: job[k] for k in ("op", "seed", "device", "cpu_max_numel", "extra_traces", "channels_last")},
                     "kernel": "", "workdir": str(workdir), "timing": None,
                     "baseline": {"compile_mode": mode, "target_ms": timing.target_ms, "shapes": shapes}}
        per_shape_s = 180 if mode != "default" else 60
        try:
            events, outcome = _run_child(child_job, _child_env(base_env, workdir), base_env, warm,
                                         120 + per_shape_s * len(shapes), limits)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        measured = [{k: v for k, v in e.items() if k not in CHANNEL_KEYS} for e in events if e.get("event") == "baseline"]
        if not any(e.get("event") == "done" for e in events):
            problem = _side_child_problem("the inductor baseline's child", events, outcome)
    baselines.attach(tests, rows, measured, gpu, mode, missing_error=problem)
    performance["baselines"] = {"inductor": baselines.summary(tests, performance["summary"]["correct"], mode)}


def _keep_profiles(profiles: list[dict], workdir: Path, destination: Path | None) -> None:
    """Move the child's profile files out of its working directory (removed next) into
    ``destination``, and name them there."""
    for entry in profiles:
        if destination is None:
            entry.update(files=[], error="not kept: no profile directory was given")
            continue
        kept = []
        for name in entry["files"]:
            target = Path(destination) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                shutil.move(str(workdir / name), target)
            except OSError as exc:
                entry["error"] = f"{name} could not be kept: {exc.strerror or exc}"
                continue
            kept.append(str(target))
        entry["files"] = kept


def _collect_ncu(verdict: dict, timing: TimingOptions, job: dict, base_env: dict, limits: Limits) -> None:
    """Nsight Compute metrics of eager and the kernel on the largest timed shapes, from a cold
    child of their own started by ncu (``harness.timing.ncu``); its CSV is kept in the run."""
    performance = verdict["performance"]
    if verdict["verdict"] != "pass":
        performance["ncu"] = {"measured": False, "reason": "the kernel failed while being timed; it is not profiled"}
        return
    found = ncu.find_ncu()
    if found is None:
        performance["ncu"] = {"measured": False, "reason": ncu.NOT_FOUND}
        return
    ids = largest(performance["tests"], timing.ncu)
    workdir = Path(tempfile.mkdtemp(prefix="bbagent-ncu-")).resolve()
    log = Path(tempfile.mkdtemp(prefix="bbagent-ncu-log-")).resolve() / "ncu.csv"  # out of the child's view
    kept = None
    try:
        shutil.copy(job["kernel"], workdir / "candidate.py")
        child_job = {**job, "kernel": str(workdir / "candidate.py"), "workdir": str(workdir), "timing": None,
                     "ncu": {"ids": ids}, "network_namespace": False,
                     "tool_write_dirs": job["tool_write_dirs"] + ncu.lock_directories()}
        events, outcome = _run_child(child_job, _child_env(base_env, workdir), base_env, False, 120 + 60 * len(ids),
                                     limits, prefix=ncu.command(found, log))
        text = log.read_text(errors="replace") if log.exists() else ""
        if text and timing.profile_dir is not None:
            kept = Path(timing.profile_dir) / "profiles" / "ncu.csv"
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(text)
    except OSError as exc:  # ncu could not be started, or its output not kept
        performance["ncu"] = {"measured": False, "reason": f"ncu ({found}): {exc.strerror or exc}"}
        return
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(log.parent, ignore_errors=True)
    shapes = ncu.report([e for e in events if e.get("event") == "ncu_range"], ncu.parse_csv(text))
    said = ncu.errors("\n".join([text, outcome.stdout or "", outcome.stderr or ""]))
    if not any(e.get("event") == "done" for e in events):
        notes = [_side_child_problem("the ncu child", events, outcome, said)]
    else:
        notes = [f"ncu said: {said}"] if said else []
    notes += [ncu.COUNTERS_FIX] if "ERR_NVGPUCTRPERM" in said else []
    measured = any((shape.get(side) or {}).get("kernels") for shape in shapes for side in ncu.SIDES)
    performance["ncu"] = {"measured": measured, "reason": None if measured else "; ".join(notes) or "ncu measured no kernel",
                          "ncu": found, "csv": str(kept) if kept else None, "shapes": shapes, "notes": notes}


def _side_child_problem(what: str, events: list[dict], outcome: ChildOutcome, said: str = "") -> str:
    """Why a child beside the evaluation (the inductor baseline's, ncu's) said nothing to the end."""
    fatal = next((e for e in events if e.get("event") == "fatal"), None)
    if fatal:  # a harness traceback: its last line says what
        lines = [line for line in fatal["message"].strip().splitlines() if line.strip()]
        return f"{what} failed: " + (lines[-1] if lines else "")[:500]
    if outcome.limit:
        return f"{what} was stopped: {outcome.limit} {outcome.detail}".strip()
    last = said or ((outcome.stderr or "").strip().splitlines()[-1:] or [""])[0]
    return f"{what} {_exit_cause(outcome.returncode)} {last[:300]}".strip()


def finish_timing(timing: TimingOptions, op: str, verdict: dict) -> None:
    """After a timed evaluation: why it was not timed, or its new measurements into the cache and
    (unless ``keep_raw``) the raw times out of the Verdict. Safe to run again on the same Verdict."""
    if verdict["performance"] is None:
        reason = not_timed_reason(verdict)
        verdict["performance"] = {"measured": False, "reason": reason}
        on_cpu = verdict["environment"].get("interpreter")
        if "inductor" in timing.baselines:
            why = baselines.CPU_REASON if on_cpu else reason
            verdict["performance"]["baselines"] = {"inductor": baselines.not_measured(why, timing.inductor_mode)}
        if timing.ncu:
            verdict["performance"]["ncu"] = {"measured": False, "reason": ncu.CPU_REASON if on_cpu else reason}
    elif verdict["performance"].get("measured") is not False:
        _store_measured(timing, op, verdict)
        if not timing.keep_raw:
            for test in verdict["performance"]["tests"]:
                test.pop("candidate_raw", None)
                test.pop("aten_raw", None)
                for entry in (test.get("baselines") or {}).values():
                    entry.pop("raw", None)


def _redacted(verdict: dict, secrets: list[str] | None) -> Verdict:
    """The Verdict, with every secret the parent knows replaced in all its texts (the count in
    ``redactions``): nothing a candidate printed or raised carries one into storage or a prompt."""
    verdict, count = Redactor(configured_secrets(secrets or [])).value(verdict)
    verdict["redactions"] = count
    return Verdict.model_validate(verdict)


def _run_child(job: dict, env: dict, base_env: dict, warm: bool, timeout_s: float,
               limits: Limits, prefix: list[str] | None = None) -> tuple[list[dict], ChildOutcome]:
    """Start the child (cold behind ``prefix``, a launcher such as ncu, where one is given), watch
    it until it ends or breaks a limit, and collect what it said."""
    events: list[dict] = []
    pipes = [os.pipe() for _ in range(3)]  # result channel, stdout, stderr
    write_ends = [w for _, w in pipes]
    started = time.perf_counter()
    outcome = ChildOutcome(launched_at=time.time())
    try:
        child = None
        if warm and not prefix:
            try:
                child = pool_for(job["device"], base_env).launch({**job, "env": env}, write_ends)
            except PoolError as exc:
                _warn_once(f"bbagent: no warm pool ({exc}); starting each candidate cold instead")
        if child is None:
            child = ColdChild(job, write_ends[0], write_ends[1], write_ends[2], env, job["workdir"], prefix)
    finally:
        for fd in write_ends:
            os.close(fd)
    reader = threading.Thread(target=_read_events, args=(pipes[0][0], events), daemon=True)
    stdout = BoundedCapture(pipes[1][0], limits.output_bytes)
    stderr = BoundedCapture(pipes[2][0], limits.output_bytes)
    for thread in (reader, stdout, stderr):
        thread.start()
    try:
        returncode = _watch(child, events, stdout, stderr, limits, timeout_s, outcome)
    finally:
        child.kill()  # anything the child left behind in its group; all of it when interrupted (Ctrl-C)
    for thread in (reader, stdout, stderr):
        thread.join(timeout=5)
    outcome.returncode = returncode if returncode is not None else -signal.SIGKILL
    outcome.wall_s = time.perf_counter() - started
    outcome.stdout, outcome.stderr = stdout.text(1000), stderr.text(STDERR_TAIL_BYTES)
    outcome.hang_site = _hang_site(stderr.text(STDERR_TAIL_BYTES), job["kernel"]) if outcome.limit == "timeout" else ""
    return events, outcome


def _watch(child, events: list[dict], stdout: BoundedCapture, stderr: BoundedCapture, limits: Limits,
           timeout_s: float, outcome: ChildOutcome) -> int | None:
    """Wait for the child, killing it when it breaks a limit (named in ``outcome``); its exit code."""
    deadline = time.perf_counter() + timeout_s  # from the child's start: a fork server's own start is not counted
    returncode = None
    while returncode is None:
        returncode = child.wait(WATCH_INTERVAL_S)
        if returncode is not None:
            break
        processes, rss = session_usage(child.pid)
        running = _running_test(events)
        now = time.perf_counter()
        if now > deadline:
            outcome.limit = "timeout"
            _dump_stack(child.pid)
        elif running and (now - running["received_at"] - paused_seconds(events, running["received_at"], now)
                          > limits.test_seconds):
            outcome.limit, outcome.detail = "timeout", (f"test {running['id']} ran past {limits.test_seconds:g} s "
                                                        "(compilation and autotuning not counted)")
            _dump_stack(child.pid)
        elif paused_seconds(events, 0.0, now) > limits.compile_seconds:
            totals = compile_totals(events)
            outcome.limit, outcome.detail = "timeout", (
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


def _store_measured(timing: TimingOptions, op: str, verdict: dict) -> None:
    """Put what the child measured (eager timings, device yardsticks) into the cache."""
    if timing.cache is None:
        return
    performance = verdict["performance"]
    env = verdict["environment"]
    gpu = performance["gpu"]
    if performance.get("device_measured"):
        timing.cache.store_device(gpu, env["torch"], env["triton"], performance["device"])
    eager = [{"mode": t["mode"], "input": t["input"], "timing": t["aten"]}
             for t in performance["tests"] if t.get("aten_source") == "measured"]
    inductor = [(t, t["baselines"]["inductor"]) for t in performance["tests"] if "inductor" in (t.get("baselines") or {})]
    compiled = [{"mode": baselines.cache_mode(entry["compile_mode"], t["mode"]), "input": t["input"],
                 "timing": {**entry["timing"], "eager_over_inductor": entry["eager_over_inductor"]}}
                for t, entry in inductor if entry["source"] == "measured" and "timing" in entry]
    timing.cache.store_reference(op, env["torch"], gpu, eager + compiled)


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        print(message, file=sys.stderr)


def _running_test(events: list[dict]) -> dict | None:
    """The candidate_start event of the test the candidate is running now, if any (compile
    events between it and now are skipped)."""
    seen = 0
    for event in reversed(events):
        kind = event.get("event")
        if kind == "compile":
            continue
        if kind in ("candidate_start", "timing_start"):
            return event
        seen += 1
        if kind in ("test", "timing", "fatal", "done") or seen >= 3:
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
    if any(part in name for name in files for part in COMPILER_PATHS):
        return "in Triton's compiler: a kernel whose compilation does not finish" + at
    if mine:
        return "in the kernel's code: a loop that does not finish" + at
    if any(os.path.basename(name) in ("case.py", "compare.py") for name in files[:2]):
        return "waiting for the device: a Triton kernel that does not finish"
    return f"in {os.path.basename(files[0])}"


def _read_events(fd: int, events: list[dict]) -> None:
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as stream:
        for line in stream:
            try:
                events.append({**json.loads(line), "received_at": time.perf_counter()})
            except json.JSONDecodeError:
                events.append({"event": "garbled", "line": line[:200]})


def _assemble(op, kernel_path, source, seed, events, outcome: ChildOutcome, timeout_s,
              static_findings: list[dict] | None = None) -> dict:
    by_kind: dict[str, list[dict]] = {}
    for event in events:
        by_kind.setdefault(event.get("event"), []).append(event)
    env = (by_kind.get("environment") or [{}])[0]
    suite = (by_kind.get("suite") or [None])[0]
    tests = [{k: v for k, v in e.items() if k not in CHANNEL_KEYS} for e in by_kind.get("test", [])]
    finished_ids = {t["id"] for t in tests}
    unfinished = [e["id"] for e in by_kind.get("test_start", []) if e["id"] not in finished_ids]
    cases = {c["id"]: c for c in (suite or {}).get("cases", [])}
    done = "done" in by_kind
    error_kind, message, infrastructure = None, "", None
    timings = [{k: v for k, v in e.items() if k not in CHANNEL_KEYS} for e in by_kind.get("timing", [])]
    timed_ids = {t["id"] for t in timings}
    unfinished_timing = [e["id"] for e in by_kind.get("timing_start", []) if e["id"] not in timed_ids]
    timing_failure = next((t for t in timings if "error_kind" in t), None)

    if static_findings:
        error_kind = "guard"
        message = "the kernel was not run; its source breaks these rules:\n" + "\n".join(
            f["message"] for f in static_findings)
    elif "fatal" in by_kind:
        fatal = by_kind["fatal"][0]
        error_kind, message = fatal["error_kind"], fatal["message"]
    elif not done:
        kind, cause = _stop_cause(by_kind, outcome, timeout_s)
        candidate_started = {e["id"] for e in by_kind.get("candidate_start", [])}
        if unfinished and unfinished[0] not in candidate_started and kind not in SANDBOX_KINDS:
            case = cases.get(unfinished[0], {})
            error_kind = "worker_error"
            message = (f"the aten reference (not the kernel) {cause} on test {unfinished[0]} "
                       f"({case.get('input')}); the remaining tests did not run")
        elif unfinished:
            case = cases.get(unfinished[0], {})
            tests.append({"id": unfinished[0], "source": case.get("source"), "input": case.get("input"),
                          "dtype": case.get("dtype"), "overload": case.get("overload", op),
                          "passed": False, "error_kind": kind,
                          "message": f"the kernel {cause} while running this test"})
            error_kind, message = kind, f"test {unfinished[0]} ({case.get('input')}): the kernel {cause}"
        elif unfinished_timing:
            case = cases.get(unfinished_timing[0], {})
            error_kind = kind
            message = (f"every test passed, then the kernel {cause} while being timed on test "
                       f"{unfinished_timing[0]} ({case.get('input')})")
        elif suite is None and kind not in SANDBOX_KINDS:
            error_kind = kind if kind == "timeout" else "worker_error"
            message = f"evaluation {cause} before the tests were built"
            infrastructure = message if error_kind == "worker_error" else None
        else:
            error_kind, message = kind, f"the kernel {cause} while being imported or compiled"
    elif timing_failure:
        error_kind = timing_failure["error_kind"]
        message = f"test {timing_failure['id']} ({timing_failure['input']}): {timing_failure['message']}"
    elif not tests or all(t.get("passed") is None for t in tests):
        error_kind, message = "no_tests", "no test could be run for this operator on this device"

    skipped = (suite or {}).get("skipped", [])
    summary = summarize(tests, skipped, len(cases))
    passed = error_kind is None and summary["failed"] == 0 and summary["passed"] > 0
    groups = group_failures(tests)
    if error_kind is None and summary["failed"]:
        message = describe_failures(summary, tests)
    findings = list(static_findings or []) + [f for t in tests for f in t.get("guard_findings", [])]
    return {
        "schema_version": SCHEMA_VERSION,
        "op": op,
        "kernel": {"path": str(kernel_path), "sha256": hashlib.sha256(source).hexdigest()},
        "verdict": "pass" if passed else "fail",
        "error_kind": error_kind,
        "message": message,
        "infrastructure": infrastructure,
        "seed": seed,
        "summary": summary,
        "failure_groups": groups,
        "tests": tests,
        "skipped": skipped,
        "guard_findings": findings,
        "performance": _performance(op, (by_kind.get("timing_plan") or [None])[0], timings, passed,
                                    [{k: v for k, v in e.items() if k not in CHANNEL_KEYS} for e in by_kind.get("profile", [])]),
        "suite": {"notes": (suite or {}).get("notes", []), "cases": len(cases)},
        "kernel_for": (suite or {}).get("kernel_for", op),
        "variants": _variant_summary(op, suite, tests),
        "timings": {"wall_s": round(outcome.wall_s, 3), "startup_s": env.get("startup_s"),
                    "child_ready_s": round(env["ready_at"] - outcome.launched_at, 3) if env.get("ready_at") else None,
                    "suite_build_s": (suite or {}).get("build_s"),
                    "tests_s": (by_kind.get("done") or [{}])[0].get("total_s"),
                    **compile_totals(events)},
        "environment": _environment(env, (by_kind.get("sealed") or [None])[0]),
        "exit": None if outcome.returncode == 0 else _exit_cause(outcome.returncode),
        "stderr_tail": outcome.stderr,
        "stdout_tail": outcome.stdout,
    }


def _environment(env: dict, sealed: dict | None) -> dict:
    """What the child reported at its start, with the file view it sealed itself in before the
    candidate was imported (``harness.sandbox.containment.seal``)."""
    environment = {k: v for k, v in env.items() if k not in CHANNEL_KEYS + ("startup_s", "ready_at")}
    containment = environment.get("containment")
    if containment is not None and sealed is not None:
        sealed = {k: v for k, v in sealed.items() if k not in CHANNEL_KEYS}
        environment["containment"] = {**containment, **sealed,
                                      "notes": containment.get("notes", []) + sealed.pop("notes", [])}
    return environment


def _variant_summary(op: str, suite: dict | None, tests: list[dict]) -> list[dict]:
    """Per tested overload: its calling convention, whether the kernel serves it directly or
    through bbagent's adapter, and its test counts (``passed`` True only when all of its own
    tests ran and passed)."""
    from harness.adapters import convention
    from harness.ops import resolve_op
    suite = suite or {}
    kernel_for = suite.get("kernel_for", op)
    rows = []
    for name in suite.get("overloads", [op]):
        planned = sum(1 for c in suite.get("cases", []) if c.get("overload", op) == name)
        mine = [t for t in tests if t.get("overload", op) == name]
        passed = sum(1 for t in mine if t.get("passed") is True)
        failed = sum(1 for t in mine if t.get("passed") is False)
        rows.append({"op": name, "convention": convention(resolve_op(name)),
                     "served_by": "kernel" if name == kernel_for else "adapter", "planned": planned,
                     "passed": passed, "failed": failed,
                     "ok": failed == 0 and passed > 0 and passed + sum(1 for t in mine if t.get("passed") is None) == planned})
    return rows


def _performance(op: str, plan: dict | None, timings: list[dict], passed: bool, profiles: list[dict]) -> dict | None:
    """The Verdict's ``performance``: what the timing phase measured, with its metrics."""
    if plan is None:
        return None
    return {"measured": True, "gpu": plan["gpu"], "device": plan["device"],
            "device_measured": plan["device_measured"], "target_ms": plan["target_ms"],
            "planned": len(plan["ids"]), "tests": timings,
            "summary": summarize_performance(op, timings, plan["device"], passed), "profiles": profiles or None}


def not_timed_reason(verdict: dict) -> str:
    """Why a Verdict that was asked for timings has none."""
    if verdict["environment"].get("interpreter"):
        return ("CPU (Triton interpreter): interpreter time says nothing about a GPU; only correctness "
                "was checked")
    if verdict["verdict"] != "pass":
        return "the kernel failed its tests; a failing kernel is not timed"
    return "no timing phase ran"


# Kinds that are the candidate's doing even when no test was running (import time included).
SANDBOX_KINDS = frozenset({"network", "forbidden_write", "forbidden_read", "secret_read", "process_spawn", "output_flood",
                           "host_oom", "exit"})


def _stop_cause(by_kind: dict, outcome: ChildOutcome, timeout_s: float) -> tuple[str, str]:
    """(error kind, what happened) for a child that ended without finishing its tests."""
    if "violation" in by_kind:
        violation = by_kind["violation"][0]
        return violation["error_kind"], f"was stopped: {violation['message']}"
    if outcome.limit == "timeout":
        site = f"; it was {outcome.hang_site}" if outcome.hang_site else ""
        what = outcome.detail or f"the evaluation ran past {timeout_s:g} s"
        return "timeout", f"timed out: {what} (process group killed){site}"
    if outcome.limit:
        what = {"host_oom": "used too much host memory", "process_spawn": "started too many processes",
                "output_flood": "printed too much output"}[outcome.limit]
        return outcome.limit, f"{what} ({outcome.detail}; process group killed)"
    if outcome.returncode is not None and outcome.returncode >= 0:
        return "exit", (f"ended the process with exit code {outcome.returncode} (sys.exit or os._exit); "
                        "a kernel must return its result")
    return "crash", f"crashed: its process was {_exit_cause(outcome.returncode)}"
