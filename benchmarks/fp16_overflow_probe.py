"""How many exact float16 mm results overflow float16 under the input generator's spreads.

Draws the 40 longest-K float16 ``aten.mm`` trace inputs (CPU, float64 product) with values
spread over two decades either side of 1 and over one (harness.inputs.FLOAT16_SPREAD), and
prints the share of results beyond float16's largest value, 65504.

    python benchmarks/fp16_overflow_probe.py
"""
import torch

from bbagent.harness import inputs
from bbagent.harness.inputs import materialize
from bbagent.harness.traces import load_calls

FLOAT16_MAX = 65504


def main() -> None:
    calls = [c for c in load_calls("aten.mm.default") if any(s.dtype == "float16" for s in c.tensor_specs())]
    calls = sorted(calls, key=lambda c: -c.tensor_specs()[0].shape[1])[:40]
    for spread in (2, 1):
        inputs.FLOAT16_SPREAD = spread
        total = beyond = 0
        for call in calls:
            a, b = materialize(call.args, "cpu", torch.Generator().manual_seed(0))
            if a.shape[0] * a.shape[1] * b.shape[1] > 3e9:
                continue
            exact = a.double() @ b.double()
            total += exact.numel()
            beyond += int((exact.abs() > FLOAT16_MAX).sum())
        print(f"values 1e-{spread}..1e{spread}: {beyond / total:.1%} of {total} exact results beyond {FLOAT16_MAX}")


if __name__ == "__main__":
    main()
