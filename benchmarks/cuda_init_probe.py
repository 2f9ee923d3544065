"""Does the fork server's preload initialise CUDA? (It must not: forked children could not use it.)

Prints the stack of every first call to ``torch.cuda._lazy_init`` during
``harness.sandbox.child.forkserver.preload("cuda")``, then whether CUDA ended up initialised.

    PYTORCH_NVML_BASED_CUDA_CHECK=1 python benchmarks/cuda_init_probe.py
"""
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
import torch  # noqa: E402

original = torch.cuda._lazy_init


def spy():
    if not torch.cuda.is_initialized():
        print("=== torch.cuda._lazy_init called from:", file=sys.stderr)
        traceback.print_stack(limit=14)
    return original()


torch.cuda._lazy_init = spy
from bbagent.harness.sandbox.child.forkserver import preload  # noqa: E402

try:
    preload("cuda")
finally:
    print("CUDA initialised after preload:", torch.cuda.is_initialized(), file=sys.stderr)
