"""A real model's output and time, as ``check-model`` measures them: an output against eager
within ``atol + rtol * |eager|``, and ms per forward."""
from __future__ import annotations

import time


def compare_outputs(expected, actual, atol: float, rtol: float) -> dict:
    """``actual`` against ``expected``: a tensor, or any nesting of them (a tuple, a dict, a Hugging
    Face model's output), compared tensor by tensor in order; the figures are over all of them."""
    from torch.utils._pytree import tree_flatten
    expected_leaves, expected_shape = tree_flatten(expected)
    actual_leaves, actual_shape = tree_flatten(actual)
    if str(expected_shape) != str(actual_shape):
        return {"match": False, "message": f"the outputs are laid out as {actual_shape}, eager's as {expected_shape}"}
    pairs = [(e, a) for e, a in zip(expected_leaves, actual_leaves) if hasattr(e, "detach")]
    if len(pairs) == 1:
        return _compare_tensor(*pairs[0], atol, rtol)
    parts = [_compare_tensor(e, a, atol, rtol) for e, a in pairs]
    errors = [p[key] for p in parts for key in ("max_abs_error",) if p.get(key) is not None]
    relative = [p["max_rel_error"] for p in parts if p.get("max_rel_error") is not None]
    wrong = [(i, p) for i, p in enumerate(parts) if not p["match"]]
    return {"match": not wrong, "mismatches": sum(p.get("mismatches", 0) for p in parts),
            "numel": sum(p.get("numel", 0) for p in parts), "max_abs_error": max(errors, default=None),
            "max_rel_error": max(relative, default=None), "outputs": len(parts),
            **({"first_wrong_output": wrong[0][0], "message": wrong[0][1].get("message")} if wrong else {}),
            "first_mismatches": wrong[0][1].get("first_mismatches", []) if wrong else []}


def _compare_tensor(expected, actual, atol: float, rtol: float) -> dict:
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
