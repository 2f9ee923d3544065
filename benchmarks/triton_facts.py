"""Check the Triton facts that bbagent's prompts state, on this machine's stack.

Each probe runs a tiny @triton.jit kernel (on the GPU, or on CPU tensors under the Triton
interpreter when there is no CUDA) and records what Triton did next to what torch does, or
the error it raised. The prompts' "Triton traps" section (prompts/base.j2, prompts/traps.j2)
must agree with these results on both stacks bbagent runs on.

    python benchmarks/triton_facts.py [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.language.extra import libdevice  # noqa: E402

from bbagent.harness.device_probe.kernels import dot_block as _dot  # noqa: E402  (the probe's own)
from bbagent.harness.device_probe.probe import error_text  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def _reduce(x_ptr, out_ptr, N: tl.constexpr, OP: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    if OP == 0:
        r = tl.max(x, axis=0)
    elif OP == 1:
        r = tl.min(x, axis=0)
    elif OP == 2:
        r = tl.argmax(x, axis=0).to(tl.float32)
    else:
        r = tl.argmin(x, axis=0).to(tl.float32)
    tl.store(out_ptr, r)


@triton.jit
def _binary(a_ptr, b_ptr, out_ptr, N: tl.constexpr, OP: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    if OP == 0:
        r = tl.maximum(a, b)
    elif OP == 1:
        r = tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
    elif OP == 2:
        r = a // b
    elif OP == 3:
        r = a % b
    else:
        r = tl.minimum(a, b)
    tl.store(out_ptr + offs, r)


@triton.jit
def _unary(x_ptr, out_ptr, N: tl.constexpr, OP: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if OP == 0:
        r = tl.exp(x)
    elif OP == 1:
        r = tl.log(x)
    elif OP == 2:
        r = tl.sqrt(x)
    elif OP == 3:
        r = tl.erf(x)
    elif OP == 4:
        r = tl.sigmoid(x)
    elif OP == 5:
        r = tl.sin(x)
    elif OP == 6:
        r = tl.abs(x)
    else:
        r = x.to(tl.int32)
    tl.store(out_ptr + offs, r)


@triton.jit
def _libdevice_tanh(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, libdevice.tanh(tl.load(x_ptr + offs)))


@triton.jit
def _sort(x_ptr, out_ptr, N: tl.constexpr, DESCENDING: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.sort(tl.load(x_ptr + offs), descending=DESCENDING))


@triton.jit
def _sort_dim0(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(out_ptr + offs, tl.sort(tl.load(x_ptr + offs), dim=0))


@triton.jit
def _cumsum(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.cumsum(tl.load(x_ptr + offs), axis=0))


@triton.jit
def _arange(out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, offs)


@triton.jit
def _int_sum(x_ptr, out_ptr, N: tl.constexpr):
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, N)), axis=0))


@triton.jit
def _rand_loaded_seed(seed_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.rand(tl.load(seed_ptr), offs))


def _try(fn):
    """fn()'s result, or the error it raised (type and the message's last line)."""
    try:
        return {"ok": True, "value": fn()}
    except Exception as exc:  # noqa: BLE001 - the point is to record it
        return {"ok": False, "error": error_text(exc)}


def _values(t: torch.Tensor) -> list:
    return [None if isinstance(v, float) and math.isnan(v) else v for v in t.cpu().tolist()]


def probes() -> dict:
    d = DEVICE
    nan = float("nan")
    facts = {}
    x = torch.tensor([1.0, nan, 3.0, -2.0], device=d)
    for name, op, ref in (("tl.max", 0, torch.max(x)), ("tl.min", 1, torch.min(x)),
                          ("tl.argmax", 2, torch.argmax(x)), ("tl.argmin", 3, torch.argmin(x))):
        def run(op=op):
            out = torch.empty(1, device=d)
            _reduce[(1,)](x, out, N=4, OP=op)
            return _values(out)[0]
        facts[f"{name} of [1, nan, 3, -2]"] = {"triton": _try(run), "torch": _values(ref.float().reshape(1))[0]}
    a = torch.tensor([nan, 1.0, nan, 2.0], device=d)
    b = torch.tensor([1.0, nan, nan, 1.0], device=d)
    for name, op in (("tl.maximum(a, b)", 0), ("tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)", 1),
                     ("tl.minimum(a, b)", 4)):
        def run(op=op):
            out = torch.empty(4, device=d)
            _binary[(1,)](a, b, out, N=4, OP=op)
            return _values(out)
        ref = torch.minimum(a, b) if op == 4 else torch.maximum(a, b)
        facts[f"{name}, a=[nan, 1, nan, 2], b=[1, nan, nan, 1]"] = {"triton": _try(run), "torch": _values(ref)}
    ia = torch.tensor([-7, 7, -7, 7], device=d, dtype=torch.int32)
    ib = torch.tensor([2, -2, -2, 2], device=d, dtype=torch.int32)
    for name, op, ref in (("a // b", 2, torch.div(ia, ib, rounding_mode="floor")), ("a % b", 3, torch.remainder(ia, ib))):
        def run(op=op):
            out = torch.empty(4, device=d, dtype=torch.int32)
            _binary[(1,)](ia, ib, out, N=4, OP=op)
            return _values(out)
        facts[f"int32 {name}, a=[-7, 7, -7, 7], b=[2, -2, -2, 2]"] = {"triton": _try(run), "torch": _values(ref)}
    names = ("tl.exp", "tl.log", "tl.sqrt", "tl.erf", "tl.sigmoid", "tl.sin", "tl.abs")
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        xs = torch.tensor([0.5, 1.0, 2.0, 4.0], device=d, dtype=dtype)
        for op, name in enumerate(names):
            def run(op=op):
                out = torch.empty(4, device=d, dtype=dtype)
                _unary[(1,)](xs, out, N=4, OP=op)
                return [round(v, 4) for v in out.float().cpu().tolist()]
            facts[f"{name} on {str(dtype).removeprefix('torch.')}"] = {"triton": _try(run)}
    xs = torch.tensor([-1.5, -0.5, 0.5, 1.7], device=d)
    def cast():
        out = torch.empty(4, device=d, dtype=torch.int32)
        _unary[(1,)](xs, out, N=4, OP=7)
        return _values(out)
    facts["x.to(tl.int32) of [-1.5, -0.5, 0.5, 1.7]"] = {"triton": _try(cast), "torch": _values(xs.to(torch.int32))}
    def tanh():
        out = torch.empty(4, device=d)
        _libdevice_tanh[(1,)](xs, out, N=4)
        return [round(v, 4) for v in out.cpu().tolist()]
    facts["libdevice.tanh (triton.language.extra.libdevice)"] = {"triton": _try(tanh)}
    s = torch.tensor([3.0, nan, 1.0, 2.0, -1.0, nan, 0.0, 5.0], device=d)
    for descending in (False, True):
        def run(descending=descending):
            out = torch.empty(8, device=d)
            _sort[(1,)](s, out, N=8, DESCENDING=descending)
            return _values(out)
        facts[f"tl.sort(descending={descending}) of [3, nan, 1, 2, -1, nan, 0, 5]"] = {
            "triton": _try(run), "torch": _values(torch.sort(s, descending=descending).values)}
    def sort_dim0():
        m = torch.tensor([[2.0, 1.0], [1.0, 2.0]], device=d)
        out = torch.empty_like(m)
        _sort_dim0[(1,)](m, out, M=2, N=2)
        return out.cpu().tolist()
    facts["tl.sort(x, dim=0) of [[2, 1], [1, 2]]"] = {"triton": _try(sort_dim0), "torch": [[1.0, 1.0], [2.0, 2.0]]}
    gen = torch.Generator(device=d).manual_seed(0)
    for dtype, shapes in ((torch.float16, ((16, 16, 16), (16, 16, 8), (1, 16, 16), (16, 1, 16), (8, 8, 16))),
                          (torch.float32, ((16, 16, 16), (16, 16, 8), (16, 16, 4))),
                          (torch.int8, ((16, 16, 32),)), (torch.int32, ((16, 16, 16),)),
                          (torch.int64, ((16, 16, 16),))):
        for m, n, k in shapes:
            def run(m=m, n=n, k=k, dtype=dtype):
                if dtype.is_floating_point:
                    a = torch.randn(m, k, device=d, generator=gen).to(dtype)
                    bm = torch.randn(k, n, device=d, generator=gen).to(dtype)
                else:
                    a = torch.randint(-3, 4, (m, k), device=d, generator=gen).to(dtype)
                    bm = torch.randint(-3, 4, (k, n), device=d, generator=gen).to(dtype)
                c = torch.empty(m, n, device=d, dtype=torch.float32 if dtype.is_floating_point else torch.int32)
                _dot[(1,)](a, bm, c, M=m, N=n, K=k, IEEE=False)
                ref = (a.double() @ bm.double())
                return float(((c.double() - ref).abs().max() / ref.abs().max()).item())
            facts[f"tl.dot {str(dtype).removeprefix('torch.')} M={m} N={n} K={k}: max error / max |ref|"] = \
                {"triton": _try(run)}
    for ieee in (False, True):
        def run(ieee=ieee):
            a = torch.randn(64, 64, device=d, generator=gen)
            bm = torch.randn(64, 64, device=d, generator=gen)
            c = torch.empty(64, 64, device=d)
            _dot[(1,)](a, bm, c, M=64, N=64, K=64, IEEE=ieee)
            ref = a.double() @ bm.double()
            return float(((c.double() - ref).norm() / ref.norm()).item())
        facts[f"tl.dot float32 64x64x64 {'input_precision=ieee' if ieee else 'default precision'}: "
              "relative error (norm)"] = {"triton": _try(run)}
    def cumsum():
        v = torch.arange(8, device=d, dtype=torch.float32)
        out = torch.empty_like(v)
        _cumsum[(1,)](v, out, N=8)
        return out.cpu().tolist()
    def arange6():
        out = torch.empty(6, device=d, dtype=torch.int32)
        _arange[(1,)](out, N=6)
        return out.cpu().tolist()
    facts["tl.arange(0, 6)"] = {"triton": _try(arange6)}
    def int_sum():
        v = torch.full((4,), 2**30, device=d, dtype=torch.int32)
        out = torch.empty(1, device=d, dtype=torch.int64)
        _int_sum[(1,)](v, out, N=4)
        return out.cpu().tolist()[0]
    facts["tl.sum of int32 [2**30] * 4, stored to int64"] = {"triton": _try(int_sum), "torch": 2**32}
    def rand_seed_from_tensor():
        seed = torch.randint(2**31 - 1, (1,), device=d, generator=torch.Generator(device=d).manual_seed(1))
        first, again = torch.empty(4, device=d), torch.empty(4, device=d)
        _rand_loaded_seed[(1,)](seed, first, N=4)
        _rand_loaded_seed[(1,)](seed, again, N=4)
        return {"values": [round(v, 4) for v in first.cpu().tolist()], "same seed, same values": bool((first == again).all())}
    facts["tl.rand(tl.load(seed_ptr), offsets): a seed loaded in the kernel (no host sync)"] = {
        "triton": _try(rand_seed_from_tensor)}
    facts["tl.cumsum of 0..7"] = {"triton": _try(cumsum), "torch": torch.arange(8.0).cumsum(0).tolist()}
    return facts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    stack = {"triton": triton.__version__, "torch": torch.__version__, "device": DEVICE,
             "gpu": torch.cuda.get_device_name() if DEVICE == "cuda" else None,
             "interpreter": DEVICE == "cpu"}
    facts = probes()
    for name, fact in facts.items():
        result = fact["triton"]
        shown = result["value"] if result["ok"] else result["error"]
        ref = f"   torch: {fact['torch']}" if "torch" in fact else ""
        print(f"{name:70s} {shown}{ref}")
    print(json.dumps(stack))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"stack": stack, "facts": facts}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
