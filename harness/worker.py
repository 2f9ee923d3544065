"""The sandbox child: build the suite, import the candidate, run and check every test.

Run as ``python -m harness.worker --op OP --kernel FILE --seed N --result-fd FD``.
Needs only the standard library, torch, triton and numpy. Results go out as JSON
lines on the file descriptor ``--result-fd`` (not stdout, which the candidate may
print into); the parent turns them into a Verdict, also when this process dies
half-way, because every test is announced before it runs.

Order per test: the reference runs first on its own clone of the inputs and its
output stays alive until the comparison, so the candidate cannot hand back memory
that held the reference result; the candidate then runs on a fresh clone.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import time

from harness.budget import CPU_MAX_NUMEL


def _emit_factory(fd: int):
    stream = os.fdopen(fd, "w", buffering=1)

    def emit(event: str, **data) -> None:
        stream.write(json.dumps({"event": event, **data}, default=str) + "\n")
        stream.flush()
    return emit


def use_first_autotune_config() -> None:
    """The interpreter cannot benchmark (no GPU driver), so ``@triton.autotune`` would raise;
    on CPU it runs its first config only. The GPU path autotunes as usual."""
    from triton.runtime.autotuner import Autotuner
    original = Autotuner.run

    def run(self, *args, **kwargs):
        self.configs = self.configs[:1]
        return original(self, *args, **kwargs)
    Autotuner.run = run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="harness.worker")
    parser.add_argument("--op", required=True)
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--result-fd", type=int, required=True)
    parser.add_argument("--device", required=True, choices=["cuda", "cpu"],
                        help="cpu means the Triton interpreter; the parent sets TRITON_INTERPRET=1 for it")
    parser.add_argument("--cpu-max-numel", type=int, default=CPU_MAX_NUMEL)
    args = parser.parse_args(argv)
    emit = _emit_factory(args.result_fd)

    started = time.perf_counter()
    device = args.device
    interpreter = device == "cpu"
    if interpreter:
        os.environ["TRITON_INTERPRET"] = "1"  # before torch or triton can import triton
    import torch
    import triton

    emit("environment", device=device, interpreter=interpreter,
         gpu=torch.cuda.get_device_name() if device == "cuda" else None,
         torch=torch.__version__, triton=triton.__version__, python=platform.python_version(),
         cuda=torch.version.cuda, startup_s=round(time.perf_counter() - started, 3))

    from harness.ops import resolve_op
    from harness.suite import build_suite
    op = resolve_op(args.op)
    suite_started = time.perf_counter()
    suite = build_suite(op, device, args.seed, interpreter=interpreter,
                        cpu_max_numel=args.cpu_max_numel)
    emit("suite", cases=[{"id": c.id, "source": c.source, "input": c.description, "dtype": c.dtype}
                         for c in suite.cases],
         skipped=suite.skipped, notes=suite.notes,
         build_s=round(time.perf_counter() - suite_started, 3))

    from harness.guards import AtenRecorder, LaunchCounter
    from harness.runner import ReferenceFault, failed_result, is_cuda_error, run_case, trimmed_traceback
    if interpreter:
        use_first_autotune_config()
    launches = LaunchCounter()
    launches.install()
    candidate_file = os.path.abspath(args.kernel)
    try:
        spec = importlib.util.spec_from_file_location("bbagent_candidate", candidate_file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        kernel = getattr(module, "kernel")
        if not callable(kernel):
            raise TypeError("'kernel' is not callable")
    except BaseException as exc:  # noqa: BLE001 - anything the candidate raises is its failure
        kind = "missing_entry_point" if isinstance(exc, AttributeError) and "kernel" in str(exc) \
            else "import_error"
        emit("fatal", error_kind=kind, message=trimmed_traceback(exc, candidate_file))
        return 0

    for number, case in enumerate(suite.cases):
        emit("test_start", id=case.id)
        recorder = AtenRecorder(op, launches, candidate_file)
        try:
            result = run_case(op, case, kernel, device, launches, recorder, candidate_file,
                              on_candidate=lambda case_id=case.id: emit("candidate_start", id=case_id))
        except ReferenceFault as fault:
            emit("fatal", error_kind="worker_error", message=str(fault))
            return 0
        except Exception as exc:  # a CUDA error raised after the kernel returned (in the checks)
            if not is_cuda_error(exc):
                raise
            result = failed_result(case, error_kind="cuda_error", context_lost=True,
                                   message=f"{type(exc).__name__}: {str(exc).splitlines()[0]}\n(raised while "
                                           "checking the kernel's result: the kernel made an out-of-bounds access)")
        lost = result.pop("context_lost", False)
        emit("test", **result)
        if lost:
            left = len(suite.cases) - number - 1
            lines = result["message"].splitlines()
            cause = next((line for line in lines if "CUDA error" in line), lines[0])
            emit("fatal", error_kind="cuda_error",
                 message=f"test {case.id} ({case.description}): {cause.strip()}; the CUDA context is lost, "
                         f"so the remaining {left} tests did not run")
            return 0
    emit("done", total_s=round(time.perf_counter() - started, 3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
