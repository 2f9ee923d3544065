"""Evaluate a candidate kernel file in a child process and return its Verdict.

The parent never imports the candidate. The child (``harness.worker``) runs in a
new process group and a private temporary directory, with an environment reduced
to an allowlist (no API keys), and is killed as a group when the wall-clock limit
passes. Results arrive as JSON lines on a dedicated pipe; stdout and stderr are
kept only as a bounded tail for diagnosis.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from harness.budget import CPU_MAX_NUMEL
from harness.static_check import check_source
from harness.verdict import SCHEMA_VERSION, describe_failures, group_failures, summarize

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH",
                 "TRITON_CACHE_DIR", "TRITON_HOME", "TMPDIR", "NVIDIA_VISIBLE_DEVICES")
STDERR_TAIL_BYTES = 4000


class KernelFileError(ValueError):
    """The kernel file is missing or unreadable (a usage error, not a failing verdict)."""


def default_device() -> str:
    import torch  # the parent may import torch; it never imports the candidate
    return "cuda" if torch.cuda.is_available() else "cpu"


def _child_env(device: str, workdir: Path) -> dict:
    env = {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ}
    env["HOME"] = str(workdir)
    # The project first; then whatever the parent had (e.g. a --target site dir on a GPU box).
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("TRITON_CACHE_DIR", str(Path(tempfile.gettempdir()) / "bbagent-triton-cache"))
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


def _exit_cause(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exited with code {returncode}"


def _tail(path: Path, limit: int = STDERR_TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            data = f.read().decode("utf-8", "replace")
        return ("[... truncated]\n" if size > limit else "") + data
    except OSError:
        return ""


def evaluate(op: str, kernel_path: str | Path, *, device: str | None = None, seed: int | None = None,
             timeout_s: float = 300.0, cpu_max_numel: int = CPU_MAX_NUMEL) -> dict:
    """Run every test of ``op`` against the kernel file and return the Verdict dict."""
    kernel_path = Path(kernel_path)
    if not kernel_path.is_file():
        raise KernelFileError(f"kernel file not found: {kernel_path}")
    source = kernel_path.read_bytes()
    device = device or default_device()
    seed = seed if seed is not None else int.from_bytes(os.urandom(4), "little") % (2**31)
    findings = check_source(source.decode("utf-8", "replace"))
    if findings:  # rejected before any of its code runs
        return _assemble(op, kernel_path, source, seed, [], 0, False, timeout_s, 0.0, "", "",
                         static_findings=findings)

    workdir = Path(tempfile.mkdtemp(prefix="bbagent-cand-"))
    logdir = Path(tempfile.mkdtemp(prefix="bbagent-log-"))
    candidate = workdir / "candidate.py"
    candidate.write_bytes(source)
    events: list[dict] = []
    read_fd, write_fd = os.pipe()
    started = time.perf_counter()
    timed_out = False
    try:
        with open(logdir / "stdout", "wb") as out, open(logdir / "stderr", "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "harness.worker", "--op", op, "--kernel", str(candidate),
                 "--seed", str(seed), "--result-fd", str(write_fd), "--device", device,
                 "--cpu-max-numel", str(cpu_max_numel)],
                cwd=workdir, env=_child_env(device, workdir), stdin=subprocess.DEVNULL,
                stdout=out, stderr=err, pass_fds=(write_fd,), start_new_session=True)
            os.close(write_fd)
            write_fd = -1
            reader = threading.Thread(target=_read_events, args=(read_fd, events), daemon=True)
            reader.start()
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc)
            reader.join(timeout=5)
        wall = time.perf_counter() - started
        return _assemble(op, kernel_path, source, seed, events, proc.returncode, timed_out, timeout_s,
                         wall, _tail(logdir / "stderr"), _tail(logdir / "stdout", 1000))
    finally:
        if write_fd >= 0:
            os.close(write_fd)
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(logdir, ignore_errors=True)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _read_events(fd: int, events: list[dict]) -> None:
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as stream:
        for line in stream:
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                events.append({"event": "garbled", "line": line[:200]})


def _assemble(op, kernel_path, source, seed, events, returncode, timed_out, timeout_s, wall,
              stderr_tail, stdout_tail, static_findings: list[dict] | None = None) -> dict:
    by_kind: dict[str, list[dict]] = {}
    for event in events:
        by_kind.setdefault(event.get("event"), []).append(event)
    env = (by_kind.get("environment") or [{}])[0]
    suite = (by_kind.get("suite") or [None])[0]
    tests = [{k: v for k, v in e.items() if k != "event"} for e in by_kind.get("test", [])]
    finished_ids = {t["id"] for t in tests}
    unfinished = [e["id"] for e in by_kind.get("test_start", []) if e["id"] not in finished_ids]
    cases = {c["id"]: c for c in (suite or {}).get("cases", [])}
    done = "done" in by_kind
    error_kind, message = None, ""

    if static_findings:
        error_kind = "guard"
        message = "the kernel was not run; its source breaks these rules:\n" + "\n".join(
            f["message"] for f in static_findings)
    elif "fatal" in by_kind:
        fatal = by_kind["fatal"][0]
        error_kind, message = fatal["error_kind"], fatal["message"]
    elif not done:
        cause = (f"timed out after {timeout_s:g} s (process group killed)" if timed_out
                 else _exit_cause(returncode))
        kind = "timeout" if timed_out else "crash"
        candidate_started = {e["id"] for e in by_kind.get("candidate_start", [])}
        if unfinished and unfinished[0] not in candidate_started:
            case = cases.get(unfinished[0], {})
            error_kind = "worker_error"
            message = (f"the aten reference (not the kernel) {cause} on test {unfinished[0]} "
                       f"({case.get('input')}); the remaining tests did not run")
        elif unfinished:
            case = cases.get(unfinished[0], {})
            tests.append({"id": unfinished[0], "source": case.get("source"), "input": case.get("input"),
                          "dtype": case.get("dtype"), "passed": False, "error_kind": kind,
                          "message": f"the kernel {cause} while running this test"})
            error_kind, message = kind, f"test {unfinished[0]} ({case.get('input')}): the kernel {cause}"
        elif suite is None:
            error_kind = kind if timed_out else "worker_error"
            message = f"evaluation {cause} before the tests were built"
        else:
            error_kind, message = kind, f"the process {cause} while importing or compiling the kernel"
    elif not tests or all(t.get("passed") is None for t in tests):
        error_kind, message = "no_tests", "no test could be run for this operator on this device"

    skipped = (suite or {}).get("skipped", [])
    summary = summarize(tests, skipped, len(cases))
    passed = error_kind is None and summary["failed"] == 0 and summary["passed"] > 0
    groups = group_failures(tests)
    if error_kind is None and summary["failed"]:
        message = describe_failures(summary, groups)
    findings = list(static_findings or []) + [f for t in tests for f in t.get("guard_findings", [])]
    return {
        "schema_version": SCHEMA_VERSION,
        "op": op,
        "kernel": {"path": str(kernel_path), "sha256": hashlib.sha256(source).hexdigest()},
        "verdict": "pass" if passed else "fail",
        "error_kind": error_kind,
        "message": message,
        "seed": seed,
        "summary": summary,
        "failure_groups": groups,
        "tests": tests,
        "skipped": skipped,
        "guard_findings": findings,
        "suite": {"notes": (suite or {}).get("notes", []), "cases": len(cases)},
        "timings": {"wall_s": round(wall, 3), "startup_s": env.get("startup_s"),
                    "suite_build_s": (suite or {}).get("build_s"),
                    "tests_s": (by_kind.get("done") or [{}])[0].get("total_s")},
        "environment": {k: v for k, v in env.items() if k not in ("event", "startup_s")},
        "exit": None if returncode == 0 else _exit_cause(returncode),
        "stderr_tail": stderr_tail,
        "stdout_tail": stdout_tail,
    }
