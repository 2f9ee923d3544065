"""How far correct kernels and aten are from a float64 result on long reductions (GPU).

Runs the corpus's sum and mm kernels and aten on trace shapes whose float16 comparisons
failed on the H200, and prints each one's largest error against float64, next to
u32 * op(|inputs|), the scale of float32 accumulation error.

    python benchmarks/numerics_probe.py
"""
import importlib.util
from pathlib import Path

import torch

from bbagent.harness.inputs import make_tensor
from bbagent.harness.traces import TensorSpec

KERNELS = Path(__file__).resolve().parent.parent / "tests" / "kernels"


def load(name):
    spec = importlib.util.spec_from_file_location(name, KERNELS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


def report(label, op, kernel, *specs_and_args):
    gen = torch.Generator(device="cuda").manual_seed(0)
    args = [make_tensor(a, "cuda", gen) if isinstance(a, TensorSpec) else a for a in specs_and_args]
    truth = op(*[a.double() if isinstance(a, torch.Tensor) else a for a in args])
    magnitude = op(*[a.double().abs() if isinstance(a, torch.Tensor) else a for a in args])
    finite = truth.abs() < 65504
    for who, result in (("aten", op(*args)), ("kernel", kernel(*args))):
        err = (result.double() - truth).abs()[finite]
        bad = (err > 1e-5 + 1e-3 * truth.abs()[finite]).sum().item()
        print(f"{label:<44} {who:<7} max err {err.max().item():10.4g}  over f16 tol: {bad:6d}  "
              f"u32*op(|x|) max {(magnitude * 2**-24).max().item():10.4g}", flush=True)


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    mm, total = load("mm_tiled"), load("sum_dim")
    report("mm [16,663552]^T-strided x [663552,16]", torch.mm, mm,
           TensorSpec((16, 663552), "float16", (1, 16)), TensorSpec((663552, 16), "float16"))
    report("mm [128,8192] x [8192,2048]", torch.mm, mm,
           TensorSpec((128, 8192), "float16"), TensorSpec((8192, 2048), "float16"))
    report("sum [1024,2,768] dims [0,1]", lambda x, d, k: torch.sum(x, d, k), total,
           TensorSpec((1024, 2, 768), "float16"), [0, 1], True)
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    report("mm [16,663552] (no reduced-precision reduction)", torch.mm, mm,
           TensorSpec((16, 663552), "float16", (1, 16)), TensorSpec((663552, 16), "float16"))
