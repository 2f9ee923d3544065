"""A correct relu behind a library-style autotuner: a subclass of Triton's Autotuner that overrides
run and benchmarks every config itself for each new shape key (as FlagGems' LibTuner does), 20
configs keyed on the size. During the tests it holds one config at a time (each config runs on
some tests) and nothing is benchmarked: autotuning is never test time."""
import time

import torch
import triton
import triton.language as tl
from triton.runtime.autotuner import Autotuner


class LibraryTuner(Autotuner):
    def run(self, *args, **kwargs):
        key = tuple(kwargs[name] if name in kwargs else args[self.fn.arg_names.index(name)] for name in self.keys)
        if key not in self.cache:
            timings = {}
            for config in self.configs:
                started = time.perf_counter()
                self.fn.run(*args, **{**kwargs, **config.all_kwargs()})
                timings[config] = time.perf_counter() - started
            self.cache[key] = min(timings, key=timings.get)
        return self.fn.run(*args, **{**kwargs, **self.cache[key].all_kwargs()})


def library_autotune(configs, key):
    def decorator(fn):
        return LibraryTuner(fn, fn.arg_names, configs, key, reset_to_zero=None, restore_value=None)
    return decorator


CONFIGS = [triton.Config({"BLOCK": block}, num_warps=warps) for block in (64, 128, 256, 512, 1024)
           for warps in (1, 2, 4, 8)]


@library_autotune(configs=CONFIGS, key=["n"])
@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.where(x < 0, tl.zeros_like(x), x), mask=mask)


def kernel(self):
    x = self.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _relu[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    return out
