"""Why a correct bernoulli_ kernel failed its timing phase on the H100 (issue 46's night batch):
the timing phase captures eager aten and the candidate in CUDA graphs (``harness.timing.clock.graphed``).
The candidate takes its seed on the host (``int(torch.randint(..., device="cuda"))``), a host
synchronisation that a capture cannot contain; this probe shows what that failed capture leaves
behind for the eager calls that follow, through the harness's own ``as_graph`` (which resets the
CUDA generators after a failed capture) and through a bare capture (which does not).

    python3 benchmarks/graph_capture_probe.py > probe.txt
"""
from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bbagent.harness.timing.clock import as_graph  # noqa: E402


def load_kernel():
    spec = importlib.util.spec_from_file_location("candidate", ROOT / "tests" / "kernels" / "bernoulli_triton.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


def attempt(label: str, run) -> None:
    try:
        result = run()
        print(f"{label}: ok ({type(result).__name__})")
    except Exception as exc:  # noqa: BLE001 - the probe reports every failure
        print(f"{label}: {type(exc).__name__}: {exc}")
        traceback.print_exc(limit=4, file=sys.stdout)


def bare_capture(fn):
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            fn()
    finally:
        torch.cuda.synchronize()


def main() -> None:
    kernel = load_kernel()
    x = torch.empty(64, 1, 1, 1, dtype=torch.float16, device="cuda")
    y = torch.empty_like(x)
    aten = lambda: torch.ops.aten.bernoulli_.float(x, 0.52)  # noqa: E731
    candidate = lambda: kernel(y, 0.52)  # noqa: E731
    print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())
    attempt("eager aten before any capture", aten)
    attempt("eager candidate before any capture", candidate)
    print("as_graph(aten) captured:", as_graph(aten) is not None)
    print("as_graph(candidate) captured:", as_graph(candidate) is not None)
    attempt("eager aten after the candidate's failed as_graph", aten)
    attempt("eager candidate after the candidate's failed as_graph", candidate)
    attempt("bare capture of the candidate", lambda: bare_capture(candidate))
    attempt("eager aten after the bare capture", aten)
    attempt("torch.randint on the default generator after it", lambda: torch.randint(10, (1,), device="cuda"))
    try:
        torch.cuda.set_sync_debug_mode("error")
        attempt("candidate under sync_debug_mode=error", candidate)
    finally:
        torch.cuda.set_sync_debug_mode("default")


if __name__ == "__main__":
    main()
