"""Compile processes (issue 33): forked copies of the sandbox child that compile a kernel into
Triton's cache, so that the compile thread asking finds it there. Triton compiles for a CUDA target
on a machine without a GPU (its bundled ptxas), so these run in CI; the compile-ahead GPU test and
the sandbox GPU test see them used in an evaluation."""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import PYTHONPATH

SCRIPT = r'''
import json, os, signal, sys, threading
import triton, triton.language as tl
from triton import knobs
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from bbagent.harness.sandbox.child.compile_processes import CompileProcesses


@triton.jit
def scale(x_ptr, out_ptr, n, FACTOR: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * FACTOR, mask=mask)


@triton.jit
def broken(x_ptr, out_ptr, n, FACTOR: tl.constexpr, BLOCK: tl.constexpr):
    tl.store(out_ptr, no_such_name)


def made_in_a_call():
    @triton.jit
    def inner(x_ptr, out_ptr, n, FACTOR: tl.constexpr, BLOCK: tl.constexpr):
        tl.store(out_ptr, tl.load(x_ptr) * FACTOR)
    return inner


hits = []
knobs.compilation.listener = lambda *, src, metadata, metadata_group, times, cache_hit: hits.append(cache_hit)
target = GPUTarget("cuda", 90, 32)
signature = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "FACTOR": "constexpr", "BLOCK": "constexpr"}
def source(fn, factor):
    return ASTSource(fn, signature, {"FACTOR": factor, "BLOCK": 128})

processes = CompileProcesses(2)
result = {"forked": processes.forked}
answers = []
threads = [threading.Thread(target=lambda f=f: answers.append(processes.warm(source(scale, f), target, {}, None)))
           for f in (2, 3)]
[t.start() for t in threads]
[t.join() for t in threads]
result["together"] = sorted(answers)
for factor in (2, 3):
    triton.compile(source(scale, factor), target=target)
result["hits_after_warming"] = list(hits)
hits.clear()
result["made_in_a_call"] = processes.warm(source(made_in_a_call(), 2), target, {}, None)
result["broken"] = processes.warm(source(broken, 2), target, {}, None)
result["after_broken"] = processes.warm(source(scale, 4), target, {}, None)
os.kill(processes._workers[0].pid, signal.SIGKILL)
result["one_killed"] = [processes.warm(source(scale, f), target, {}, None) for f in (5, 6, 7)]
result["counts"] = [processes.warmed, processes.not_warmed]
os.kill(processes._workers[1].pid, signal.SIGKILL)  # the last one: threads asking must not wait for ever
late = []
threads = [threading.Thread(target=lambda f=f: late.append(processes.warm(source(scale, f), target, {}, None)))
           for f in (8, 9, 10)]
[t.start() for t in threads]
[t.join(timeout=60) for t in threads]
result["all_killed"] = late
processes.close()
try:
    os.waitpid(-1, os.WNOHANG)
    result["children_left"] = True
except ChildProcessError:
    result["children_left"] = False
print(json.dumps(result))
'''


def test_compile_processes_fill_tritons_cache_and_fall_back_on_what_they_cannot_compile(tmp_path):
    script = tmp_path / "compile_processes_script.py"  # Triton reads a @triton.jit function's source from its file
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "TRITON_CACHE_DIR": str(tmp_path / "triton"),
           "TRITON_DEFAULT_FP_FUSION": "1"}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["forked"] == 2
    assert result["together"] == [True, True]  # two threads asking at once, one process each
    assert result["hits_after_warming"] == [True, True]  # the threads' own compilations found them in the cache
    assert result["made_in_a_call"] is False  # not reachable by name in the processes: the thread compiles it
    assert result["broken"] is False and result["after_broken"] is True  # a compile error leaves the process serving
    assert sorted(result["one_killed"]) == [False, True, True]  # the dead process answers once, then is dropped
    assert result["counts"] == [5, 3]
    assert result["all_killed"] == [False, False, False]  # every process dead: each asks, none waits
    assert result["children_left"] is False  # every process reaped


GUARD_SCRIPT = r'''
import json, os, sys
from bbagent.harness.sandbox.child.containment import AuditGuard
from bbagent.harness.sandbox.child.compile_processes import CompileProcesses
guard = AuditGuard(os.getcwd(), [], os.path.abspath("candidate.py"),
                   lambda kind, message: print(json.dumps([kind, message]), flush=True))
guard.install()
guard.arm(None)
processes = CompileProcesses(1)
print(json.dumps(["forked", processes.forked]), flush=True)
processes.close()
exec(compile("import os\nos.fork()\n", os.path.abspath("candidate.py"), "exec"))
print(json.dumps(["not stopped"]), flush=True)
'''


def test_the_audit_hook_lets_only_the_compile_processes_module_fork(tmp_path):
    script = tmp_path / "guard_script.py"
    script.write_text(GUARD_SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": PYTHONPATH}, cwd=tmp_path)
    lines = [json.loads(line) for line in done.stdout.strip().splitlines()]
    assert lines[0] == ["forked", 1]
    assert lines[1][0] == "process_spawn" and "candidate line 2" in lines[1][1]
    assert done.returncode == 86 and len(lines) == 2


def test_the_watchdog_counts_pages_forked_processes_share_once(monkeypatch):
    import bbagent.harness.sandbox.parent.watch as watch
    size = 256 << 20
    readings = []
    real_proportional = watch._proportional
    monkeypatch.setattr(watch, "_proportional", lambda pid, rss: readings.append(pid) or real_proportional(pid, rss))
    leader, ready_read = _session_of_copies(size)
    try:
        count, held = watch.session_usage(leader)
        resident = {}
        for pid in [leader] + _session_members(leader):
            with open(f"/proc/{pid}/statm") as f:
                resident[pid] = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        # the watch loop's reading: proportional sizes at the first poll, then not again for a while
        memory = watch.SessionMemory()
        readings.clear()
        for _ in range(5):
            assert memory.usage(leader, limit=100 * size) == (4, pytest.approx(held, rel=0.05))
        assert len(readings) == 4
        # a limit the resident sizes' sum is over but the estimate is not: no reading, no kill
        assert memory.usage(leader, limit=2 * size)[1] < 2 * size
        assert len(readings) == 4
        # one the estimate is over: read again before the watch would stop the child
        assert memory.usage(leader, limit=size // 2)[1] > size // 2
        assert len(readings) == 8
    finally:
        os.killpg(leader, 9)
        os.waitpid(leader, 0)
        os.close(ready_read)
    assert count == 4
    assert sum(resident.values()) > 3.5 * size  # each copy's resident size counts the shared block
    # counted about once: the leader's own resident size (the block and the interpreter), plus the
    # few pages each copy wrote since the fork
    assert size < held < 1.25 * resident[leader]


def _session_of_copies(size: int) -> tuple[int, int]:
    """A session leader holding ``size`` bytes with three forked copies of itself, once all are
    running: (its pid, the read end of its ready pipe)."""
    ready_read, ready_write = os.pipe()
    leader = os.fork()
    if leader == 0:
        code = 1
        try:
            os.setsid()
            block = bytearray(os.urandom(1 << 20)) * (size >> 20)  # noqa: F841 - held: resident, every page written
            copies = []
            for _ in range(3):
                pid = os.fork()
                if pid == 0:
                    time.sleep(60)
                    os._exit(0)
                copies.append(pid)
            os.write(ready_write, b"1")
            time.sleep(60)
            code = 0
        finally:
            os._exit(code)
    os.close(ready_write)
    assert os.read(ready_read, 1) == b"1"
    return leader, ready_read


def _session_members(session: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != session:
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat[stat.rfind(b")") + 2:].split()[3]) == session:
                members.append(int(entry))
    return members


def test_compile_processes_are_forked_only_where_idle_cores_and_memory_allow(monkeypatch):
    from bbagent.harness.sandbox.child import compile_ahead
    monkeypatch.setattr(compile_ahead, "MAX_PROCESSES", 64)
    affordable = compile_ahead.processes_affordable()
    assert 0 <= affordable <= len(os.sched_getaffinity(0))  # never more than the cores
    monkeypatch.setattr(compile_ahead, "MAX_PROCESSES", 1)
    assert compile_ahead.processes_affordable() <= 1
    monkeypatch.setattr(compile_ahead, "MAX_PROCESSES", 64)
    monkeypatch.setattr(compile_ahead, "PROCESS_MEMORY", 1 << 50)  # more than any machine has free
    assert compile_ahead.processes_affordable() == 0


def test_a_compile_process_that_fails_never_fails_the_compilation():
    """Warming is only a head start: whatever goes wrong in it, the thread's own compilation decides."""
    from concurrent.futures import Future
    from contextlib import nullcontext
    from types import SimpleNamespace
    from bbagent.harness.sandbox.child.compile_ahead import _Deferred

    def broken_warm(*args):
        raise RuntimeError("a compile process broke")
    src, target, options = object(), object(), 3  # an int has no __dict__: vars() would raise

    def compile_fn():
        return ("compiled", src, target, options)
    deferred = _Deferred(nullcontext)
    deferred.processes = SimpleNamespace(forked=2, warm=broken_warm)
    future = Future()
    deferred._run(future, compile_fn)
    assert future.result()[0] == "compiled"
