"""Compiling ahead (issue 33): each call runs up to its first Triton launch, which compiles (on a
GPU in a thread pool) and runs nothing; what the candidate does after the launch never runs; a
call that raises is left to its test; one that does not reach a launch in time stops it all. In
the background, a launch made while the pool compiles runs its kernel, compiled there.
The CPU twin runs under the Triton interpreter (in a process of its own: TRITON_INTERPRET is read
when triton is imported); the GPU test also sees the kernels compiled, in the pool's threads,
each made first by a forked compile process (``harness.sandbox.child.compile_processes``)."""
import json
import os
import subprocess
import sys

import pytest

from conftest import PYTHONPATH, ROOT

SCRIPT = r'''
import functools, json, signal, sys, threading
import torch, triton, triton.compiler
import triton.language as tl
from bbagent.harness.sandbox.child import compile_ahead as ahead

device = sys.argv[1]
ahead.CALL_LIMIT_S = 2.0  # a call's own first-time work (Triton's binder for the kernel) must fit
ahead.processes_affordable = lambda: 8  # as on an idle machine (pytest runs GPU tests side by side)
from bbagent.harness.sandbox.child.preparation import load_lazy_parts
load_lazy_parts()  # as in the child: Triton's source hash computed and the device ready before compiling ahead
torch.zeros(1, device=device)
compiled_in = []
original_compile = triton.compiler.compile
def recording_compile(*args, **kwargs):
    compiled_in.append(threading.current_thread().name)
    return original_compile(*args, **kwargs)
triton.compiler.compile = recording_compile


@triton.jit
def fill(out_ptr, n, value, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, value, mask=offsets < n)


seen, outputs = [], []
def wrapper(block):
    out = torch.full((100,), -1.0, device=device)
    outputs.append(out)
    seen.append(("before", block))
    fill[(triton.cdiv(100, block),)](out, 100, 7.0, BLOCK=block)
    seen.append(("after", block))
    return out

def raising():
    raise ValueError("the test reports this")

def looping():
    while True:
        pass

handler = signal.getsignal(signal.SIGALRM)
calls = [functools.partial(wrapper, 32), functools.partial(wrapper, 64), raising, functools.partial(wrapper, 128),
         looping, functools.partial(wrapper, 256)]
stats = ahead.compile_ahead(iter(calls), device)
cached = None
if device == "cuda":
    caches = fill.device_caches[torch.cuda.current_device()][0]
    cached = sorted(type(k).__name__ for k in caches.values())
untouched = all(bool((o == -1).all()) for o in outputs)
after_ahead, seen_ahead = list(compiled_in), list(seen)
import pathlib, os
launchers = len(list(pathlib.Path(os.environ["TRITON_CACHE_DIR"]).rglob("__triton_launcher*.so")))
out = wrapper(32)  # launches for real again
compiles_after = len(compiled_in) - len(after_ahead)
# in the background: the call returns with the compilations under way; a launch waits for its own
compiled_before = len(compiled_in)
compiling = ahead.start_compiling_ahead(iter([functools.partial(wrapper, 512), functools.partial(wrapper, 1024)]),
                                        device)
compiling.wait_for_call(1)  # as a test does before its launch
early = wrapper(1024).tolist()[:3]
background = compiling.finish()
late = wrapper(512).tolist()[:3]
print(json.dumps({"background": background, "early": early, "late": late,
                  "background_compiled_in": compiled_in[compiled_before:],"stats": stats, "seen": seen_ahead, "untouched": untouched, "cached": cached,
                  "compiled_in": after_ahead, "handler_back": signal.getsignal(signal.SIGALRM) is handler,
                  "then": out.tolist()[:3], "compiles_after": compiles_after,
                  "launchers_built_ahead": launchers}))
'''


def run_script(device: str, tmp_path) -> dict:
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    script = tmp_path / "compile_ahead_script.py"  # Triton reads a @triton.jit function's source from its file
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), device], capture_output=True, text=True, timeout=300,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_common(result: dict) -> None:
    stats = result["stats"]
    assert stats["calls"] == 5 and stats["launches"] == 3  # the looping call stopped it; the last never ran
    assert "without launching a kernel" in stats["stopped"]
    assert result["seen"] == [["before", 32], ["before", 64], ["before", 128]]  # nothing after a launch ran
    assert result["untouched"]  # and the kernels did not run
    assert result["handler_back"]
    assert result["then"] == [7.0, 7.0, 7.0]  # launching works again afterwards
    background = result["background"]
    assert background["calls"] == 2 and background["launches"] == 2 and not background["stopped"]
    assert result["early"] == result["late"] == [7.0, 7.0, 7.0]  # a launch before finish() ran its kernel


def test_compile_ahead_stops_each_call_at_its_launch_under_the_interpreter(tmp_path):
    check_common(run_script("cpu", tmp_path))


@pytest.mark.gpu
def test_compile_ahead_compiles_in_threads_and_runs_nothing(tmp_path):
    result = run_script("cuda", tmp_path)
    check_common(result)
    assert len(result["compiled_in"]) == 3
    assert all(name.startswith("bbagent-compile") for name in result["compiled_in"]), result["compiled_in"]
    assert result["cached"] == ["CompiledKernel"] * 3  # compiled, not left as futures
    assert result["compiles_after"] == 0  # the test's launch found its kernel compiled
    assert result["stats"]["processes"] == 3 and result["stats"]["warmed"] == 3  # a compile process made each first
    assert result["launchers_built_ahead"] >= 1  # with its launcher, before any launch
    # the background's two kernels compiled in the pool (Triton 3.6's launch then loads it from its cache)
    pool = [name for name in result["background_compiled_in"] if name.startswith("bbagent-compile")]
    assert len(pool) == 2, result["background_compiled_in"]
    assert result["background"]["processes"] == 2


def test_a_process_ending_while_compiling_ahead_is_blamed_on_that_tests_call():
    from bbagent.harness.evaluate import EvaluationRequest, evaluate_kernel
    verdict = evaluate_kernel(EvaluationRequest.of("aten.relu.default", device="cpu", static_check=False), ROOT / "tests" / "faults" / "calls_os_exit.py")
    assert verdict.error_kind == "exit"
    failed = [t for t in verdict.tests if t.passed is False]
    assert len(failed) == 1 and verdict.message.startswith(f"test {failed[0].id} (")
    assert "compile its kernels ahead" in failed[0].message


def test_a_test_waits_only_for_the_compilations_its_own_call_submitted():
    """``Compiling.wait_for_call(n)``: done once what calls 0..n submitted has compiled (later
    submissions may still run); False where the timeout passes first; a test of a layout whose
    call was never made (``number`` past the last call) waits for everything submitted."""
    from concurrent.futures import Future
    from types import SimpleNamespace
    from bbagent.harness.sandbox.child.compile_ahead import Compiling
    futures = [Future() for _ in range(4)]
    deferred = SimpleNamespace(queued=[(future, None) for future in futures], processes=None)
    parallel = SimpleNamespace(deferred=deferred, finish=lambda: None, abandon=lambda: None)
    compiling = Compiling(parallel, {"calls": 3, "launches": 3, "stopped": ""}, 0.0, submitted=[1, 1, 3])
    futures[0].set_result("kernel")
    assert compiling.wait_for_call(0, timeout=0) and compiling.wait_for_call(1, timeout=0)  # call 1 submitted none
    assert not compiling.wait_for_call(2, timeout=0.01)  # its two are still compiling
    futures[1].set_result("kernel")
    futures[2].set_exception(RuntimeError("a compile error, left for the test to raise"))
    assert compiling.wait_for_call(2, timeout=0)
    assert compiling.wait_for_call(99, timeout=0)  # everything submitted; the fourth was never submitted by a call
    report = compiling.abandon()
    assert report["calls"] == 3 and report["processes"] == 0 and compiling.finish() is report
    assert compiling.wait_for_call(2, timeout=0)  # after the end nothing waits
