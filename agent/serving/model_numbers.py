"""A real model's output and time, as ``check-model`` measures them: an output against eager
within ``atol + rtol * |eager|``, and ms per forward."""
from __future__ import annotations

import time


def compare_outputs(expected, actual, atol: float, rtol: float) -> dict:
    import torch
    exp, act = expected.detach().double(), actual.detach().double()
    if exp.shape != act.shape:
        return {"match": False, "message": f"shape {list(act.shape)}, eager {list(exp.shape)}"}
    diff = (act - exp).abs()
    same_nan = torch.isnan(exp) == torch.isnan(act)
    bad = (diff > atol + rtol * exp.abs()) & ~(torch.isnan(exp) & torch.isnan(act)) | ~same_nan
    finite = torch.isfinite(diff)
    first = bad.flatten().nonzero().flatten()[:5].tolist()
    return {"match": not bool(bad.any()), "mismatches": int(bad.sum()), "numel": exp.numel(),
            "max_abs_error": float(diff[finite].max()) if finite.any() else None,
            "max_rel_error": float((diff / exp.abs().clamp_min(1e-12))[finite].max()) if finite.any() else None,
            "first_mismatches": [{"index": i, "eager": float(exp.flatten()[i]), "enabled": float(act.flatten()[i])}
                                 for i in first]}


def timed_ms(run, device: str, iterations: int) -> float:
    import torch
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    started = time.perf_counter()
    for _ in range(iterations):
        run()
    sync()
    return (time.perf_counter() - started) * 1000 / iterations
