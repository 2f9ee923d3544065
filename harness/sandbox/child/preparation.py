"""What every sandbox child does around its tests, whatever its problem's kind: contain itself and
get the device ready (``contain_and_ready``, which imports now what torch and Triton would import
after the seal: ``load_lazy_parts``), count launches and clock compilations (``instrument``), watch
every call of the candidate (``watch_calls``), and wait for or measure the device.
"""
from __future__ import annotations

import faulthandler
import os
import platform
import signal
import sys
import time
from typing import TYPE_CHECKING

from bbagent.harness import events, gpu_pause
from bbagent.harness.sandbox.job import Job

if TYPE_CHECKING:
    from bbagent.harness.sandbox.child.containment import AuditGuard

def synchronize() -> None:
    """Wait for this process's GPU work (where it has touched the GPU at all)."""
    import torch
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()

def device_memory_peak(device: str) -> int | None:
    if device != "cuda":
        return None
    import torch
    return int(torch.cuda.max_memory_reserved())

def contain_and_ready(job: Job, candidate_file: str, send) -> tuple[dict, AuditGuard]:
    """Contain this process (``harness.sandbox.child.containment``), get the device ready and say so."""
    started = time.perf_counter()
    from bbagent.harness.sandbox.child.containment import contain
    containment, audit = contain(job.workdir, job.tool_write_dirs, candidate_file,
                                 report=lambda kind, message: send(events.Violation(error_kind=kind, message=message)),
                                 namespaces=job.namespaces, network_namespace=job.network_namespace)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=False)  # where a hang is, on request
    import torch
    import triton
    load_lazy_parts()
    cuda = job.device == "cuda"
    if cuda:
        gpu_pause.checkpoint()  # not even a context while another evaluation is being timed
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
    send(events.ChildEnvironment(device=job.device, interpreter=not cuda, gpu=torch.cuda.get_device_name() if cuda else None,
                            cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES") if cuda else None,
                            torch=torch.__version__, triton=triton.__version__, python=platform.python_version(),
                            cuda=torch.version.cuda, startup_s=round(time.perf_counter() - started, 3), ready_at=time.time(),
                            containment=containment))
    return containment, audit

def load_lazy_parts() -> None:
    """Import and compute now what torch and Triton leave to their first use, which would come
    during the first test, after this process is sealed (each import then pays the audit hook and
    the file view: 4 s for torch._dynamo on the H200). The fork server calls this once, so its
    children inherit the result; a cold child calls it before sealing."""
    import threading
    try:
        import triton.experimental.gluon  # noqa: F401 - the first compile imports it
    except ImportError:
        pass
    try:  # hashes Triton's sources and libtriton once per process (0.4-0.7 s), at the first compile
        from triton.runtime.cache import triton_key
    except ImportError:  # older Triton keeps it here
        from triton.compiler.compiler import triton_key
    # Beside the imports below: reading and hashing libtriton (hundreds of MB) runs without the
    # GIL. Its own imports are Triton's packages, which the imports below do not touch.
    failures: list[Exception] = []

    def hash_triton() -> None:
        try:
            triton_key()
        except Exception as exc:  # noqa: BLE001 - raised below, in this thread
            failures.append(exc)
    hashing = threading.Thread(target=hash_triton, name="bbagent-triton-key", daemon=True)
    hashing.start()
    from bbagent.harness.checks.guards import AtenRecorder
    if hasattr(AtenRecorder.__dict__["__torch_dispatch__"], "__wrapped__"):
        import torch._dynamo  # noqa: F401 - the wrapper torch put on the tests' dispatch mode imports it
    # torch.broadcast_shapes, common in kernels' wrappers, imports it (and sympy) at its first call
    import torch.fx.experimental.symbolic_shapes  # noqa: F401
    import bbagent.harness.adapters  # noqa: F401 - the tests' own, imported where they are used
    import bbagent.harness.checks.case  # noqa: F401
    import bbagent.harness.checks.in_use  # noqa: F401
    # imported before the candidate, so that the judge's state taken then covers them
    import bbagent.harness.checks.integrity  # noqa: F401
    import bbagent.harness.checks.random_ops  # noqa: F401
    import bbagent.harness.timing.phase  # noqa: F401
    import bbagent.harness.suite.tiers  # noqa: F401
    import bbagent.harness.sandbox.child.compile_ahead  # noqa: F401
    import bbagent.harness.sandbox.child.device_memory  # noqa: F401
    import bbagent.harness.helion_configs  # noqa: F401 - a Helion kernel's configs, where its Job pins or tunes them
    hashing.join()  # before any fork: a child must not inherit a thread half-way
    if failures:
        raise failures[0]

def instrument(device: str, send):
    """Count launches and report compilation and autotuning (``harness.sandbox.child.compile_clock``)."""
    from bbagent.harness.checks.guards import LaunchCounter
    from bbagent.harness.sandbox.child.compile_clock import CompileClock
    launches = LaunchCounter()
    launches.install(device)
    compile_clock = CompileClock(send)
    compile_clock.install()
    compile_clock.quick_autotuning()
    return launches, compile_clock

def watch_calls(candidate_file: str, device: str, ops: list, launches, compile_clock):
    """The run-time checks of every call (``harness.checks.runtime``), with the judge as it is now,
    just before the candidate is imported (``harness.checks.integrity``); the launch counter tells
    it each launch's stream."""
    from bbagent.harness.checks.integrity import JudgeState
    from bbagent.harness.checks.runtime import CallWatch
    from bbagent.harness.variants import functional_of
    ops = list(dict.fromkeys([*ops, *(f for f in map(functional_of, ops) if f is not None)]))
    judge = JudgeState.capture(ops=ops, classes=[launches.launcher] if launches.launcher else [])
    watch = CallWatch(candidate_file, device, judge, exempt=lambda: compile_clock.autotuning)
    launches.watch = watch
    return watch


def import_candidate(candidate_file: str, send):
    """The candidate's file imported as a module, or None after a ``fatal`` event saying why
    (what it raises while imported is its failure)."""
    import importlib.util
    from bbagent.harness.checks.case import trimmed_traceback
    from bbagent.harness.sandbox.child.containment import CANDIDATE_MODULE
    try:
        spec = importlib.util.spec_from_file_location(CANDIDATE_MODULE, candidate_file)
        if spec is None or spec.loader is None:
            raise ImportError(f"{candidate_file} cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # as an import would: the compile processes find its kernels by name
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - anything the candidate raises is its failure
        send(events.Fatal(error_kind="exit" if isinstance(exc, SystemExit) else "import_error",
                          message=trimmed_traceback(exc, candidate_file)))
        return None
    return module
