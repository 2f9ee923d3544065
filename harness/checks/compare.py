"""Compare a candidate's result with the reference's.

Policy (also printed by ``bbagent eval --help``):

* structure, shapes, dtypes and devices must match exactly;
* integer and bool tensors must be equal;
* floating values pass where ``|actual - expected| <= atol + rtol * |expected|``
  with the per-dtype tolerances in ``TOLERANCES``;
* a value outside that tolerance of aten's result still passes when it is within the tolerance
  of a float64 run of the op (aten rounds intermediates too: CPU ``add`` with ``alpha`` on
  float16 rounds ``alpha * other`` first). Where aten's own result is outside the tolerance
  of the float64 run somewhere, the allowance grows by twice aten's largest error on that
  tensor: the candidate is held to aten's own accuracy, times two, never looser. For
  reductions (the op on all-ones inputs gives integer term counts n >= 2: sums, matmuls) it
  also grows by ``2 * 2**-24 * sqrt(n) * op(|inputs|)``: the probabilistic rounding-error
  bound of a float32 sum of n terms in any order (a blocked loop adding only positive terms
  reaches ~0.6 * sqrt(n / block) * 2**-24 * sum|terms|; a float16 accumulator is thousands of
  times further off). Where the float64 value is within the allowance of the dtype's largest
  finite value, +-inf against +-max is a rounding difference. Where aten returned NaN or inf
  but the float64 value is finite, that value rounded to the dtype (+-inf where it does not
  fit) is the reference (returning aten's own value there passes too);
* NaN positions must match exactly and infinities must match in position and sign
  (NaN is never a wildcard);
* non-tensor outputs (ints, floats, bools, None) must be equal (floats within float64
  tolerance).

A failure returns a dict with the error kind, a message, the number of mismatching
elements, the largest absolute and relative errors and the first few mismatching
indices with expected and actual values.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from bbagent.harness.inputs import tensors_in
from bbagent.harness.checks.policy import KS_ALPHA, TOLERANCES_BY_NAME

FLOAT32_UNIT_ROUNDOFF = 2.0 ** -24


@dataclass
class Exact:
    """The op's output computed in float64 (``truth``) and, for reductions, ``scale``:
    ``sqrt(n)`` times the sum of the magnitudes of the n terms behind each element (the op run
    on ``|inputs|``); ``2**-24 * scale`` is the rounding error of a float32 accumulation of
    those terms in any order, with high probability."""

    truth: torch.Tensor
    scale: torch.Tensor | None = None

# dtype -> (atol, rtol), from harness.checks.policy (a dtype missing here is compared exactly).
TOLERANCES = {getattr(torch, name): tolerance for name, tolerance in TOLERANCES_BY_NAME.items()}
MAX_REPORTED = 5


MIN_RANDOM_SAMPLES = 64
# what compare(report=False) returns for floating values that differ: a value mismatch, not counted
UNREPORTED = {"error_kind": "mismatch", "message": "values differ (not reported)", "max_abs_error": None}


def compare(expected: Any, actual: Any, path: str = "output", mode: str = "exact",
            exact: Any = None, report: bool = True) -> dict | None:
    """Return None when ``actual`` matches ``expected``, else a failure dict. ``exact`` is the
    same structure computed in float64, when known (see the reduction rule above). Without
    ``report``, floating values that differ give ``UNREPORTED`` instead of a failure with its
    numbers (for a caller that re-judges them against a float64 run before reporting)."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return _fail("wrong_type", f"{path}: expected a Tensor, got {type(actual).__name__}")
        if mode == "exact":
            return compare_tensors(expected, actual, path, exact if isinstance(exact, Exact) else None, report)
        failure = _compare_metadata(expected, actual, path)
        if failure or mode == "metadata":
            return failure
        return _compare_distribution(expected, actual, path)
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            got = f"{type(actual).__name__} of length {len(actual)}" if isinstance(actual, (tuple, list)) \
                else type(actual).__name__
            return _fail("wrong_structure", f"{path}: expected a {type(expected).__name__} of "
                                            f"{len(expected)} values, got {got}")
        exacts = exact if isinstance(exact, (tuple, list)) and len(exact) == len(expected) \
            else [None] * len(expected)
        for i, (e, a, x) in enumerate(zip(expected, actual, exacts)):
            failure = compare(e, a, f"{path}[{i}]", mode, x, report)
            if failure:
                return failure
        return None
    if isinstance(expected, float) and isinstance(actual, (int, float)):
        if math.isnan(expected) and math.isnan(actual):
            return None
        if math.isclose(expected, actual, rel_tol=1e-7, abs_tol=1e-7):
            return None
        return _fail("mismatch", f"{path}: expected {expected!r}, got {actual!r}")
    if expected != actual or type(expected) is not type(actual):
        return _fail("mismatch", f"{path}: expected {expected!r}, got {actual!r}")
    return None


def _compare_metadata(expected: torch.Tensor, actual: torch.Tensor, path: str) -> dict | None:
    failure = _compare_shape_dtype_device(expected, actual, path)
    if failure is None and expected.numel() > 1 and actual.stride() != expected.stride():
        return _fail("wrong_strides", f"{path}: expected strides {expected.stride()}, got {actual.stride()}")
    return failure


def ks_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """Two-sample Kolmogorov-Smirnov distance: the largest gap between the empirical CDFs."""
    a, b = a.sort().values, b.sort().values
    points = torch.cat([a, b])
    cdf_a = torch.searchsorted(a, points, right=True).to(torch.float64) / a.numel()
    cdf_b = torch.searchsorted(b, points, right=True).to(torch.float64) / b.numel()
    return float((cdf_a - cdf_b).abs().max())


def ks_limit(n: int, m: int, alpha: float = KS_ALPHA) -> float:
    """Distance above which two samples of sizes n and m differ in distribution at level alpha
    (asymptotic; conservative for discrete values and for independent non-identical elements)."""
    return math.sqrt(-math.log(alpha / 2) / 2) * math.sqrt((n + m) / (n * m))


def _compare_distribution(expected: torch.Tensor, actual: torch.Tensor, path: str) -> dict | None:
    """Random ops: NaN positions must match (they come from the inputs, as in dropout of a NaN);
    the other values must pass a two-sample Kolmogorov-Smirnov test against the reference draw
    at ``KS_ALPHA``. Unlike mean and std this sees the distribution's shape (uniform values
    with a normal's mean and std fail) and copes with heavy tails (Cauchy has no mean)."""
    exp = expected.detach().to(torch.float64).flatten()
    act = actual.detach().to(torch.float64).flatten()
    nan_e, nan_a = torch.isnan(exp), torch.isnan(act)
    if not torch.equal(nan_e, nan_a):
        return _fail("nan_mismatch", f"{path}: NaN at {int(nan_a.sum())} positions, the reference has "
                                     f"{int(nan_e.sum())}; NaN in a random op's result comes from its inputs")
    exp, act = exp[~nan_e], act[~nan_a]
    n = exp.numel()
    if n < MIN_RANDOM_SAMPLES:
        return None
    distance, limit = ks_distance(exp, act), ks_limit(n, n)
    if distance <= limit:
        return None
    return _fail("distribution_mismatch",
                 f"{path}: the random values do not follow the reference draw's distribution "
                 f"(Kolmogorov-Smirnov distance {distance:.3g}, limit {limit:.3g} over {n} values); "
                 f"quantiles 1%/50%/99%: reference {_quantiles(exp)}, kernel {_quantiles(act)}; "
                 f"mean {float(exp.mean()):.4g} vs {float(act.mean()):.4g}")


def _quantiles(values: torch.Tensor) -> str:
    ordered = values.sort().values
    picks = [float(ordered[min(int(q * ordered.numel()), ordered.numel() - 1)]) for q in (0.01, 0.5, 0.99)]
    return "[" + ", ".join(f"{v:.4g}" for v in picks) + "]"


def _compare_shape_dtype_device(expected: torch.Tensor, actual: torch.Tensor, path: str) -> dict | None:
    if tuple(actual.shape) != tuple(expected.shape):
        return _fail("wrong_shape", f"{path}: expected shape {list(expected.shape)}, got {list(actual.shape)}")
    if actual.dtype != expected.dtype:
        return _fail("wrong_dtype", f"{path}: expected dtype {expected.dtype}, got {actual.dtype}")
    if actual.device.type != expected.device.type:
        return _fail("wrong_device", f"{path}: expected device {expected.device}, got {actual.device}")
    return None


def compare_tensors(expected: torch.Tensor, actual: torch.Tensor, path: str = "output",
                    exact: Exact | None = None, report: bool = True) -> dict | None:
    failure = _compare_shape_dtype_device(expected, actual, path)
    if failure:
        return failure
    if expected.numel() == 0:
        return None
    exp = expected.detach()
    act = actual.detach()
    if not (exp.dtype.is_floating_point or exp.dtype.is_complex):
        bad = exp != act
        return _mismatch_report(path, exp, act, bad, "mismatch", exact=True) if bad.any() else None
    known = exact if exact is not None and exact.truth.shape == exp.shape else None
    atol, rtol = TOLERANCES.get(exp.dtype, (0.0, 0.0))
    if known is None and _close_everywhere(exp, act, atol, rtol):
        # the common case: equal (infinities too), both NaN, or both finite and within the
        # tolerance; exactly the elements the checks below pass
        return None
    exp64, act64 = exp.to(torch.float64), act.to(torch.float64)
    truth = known.truth.detach().to(torch.float64) if known is not None else None
    scale = known.scale if known is not None else None
    if truth is not None and _all_finite_and_allowed(exp64, act64, truth, scale, atol, rtol):
        return None
    if not report:
        return dict(UNREPORTED)
    if truth is not None:
        exp64 = torch.where(_aten_not_finite_wrongly(exp64, act64, truth, exp.dtype),
                            truth.to(exp.dtype).to(torch.float64), exp64)
    exp_nan, act_nan = torch.isnan(exp64), torch.isnan(act64)
    nan_bad = exp_nan != act_nan
    if nan_bad.any():
        return _mismatch_report(path, exp64, act64, nan_bad, "nan_mismatch", exact=True)
    exp_inf = torch.isinf(exp64)
    both_finite = ~exp_nan & ~exp_inf & torch.isfinite(act64)
    inf_bad = (exp_inf | torch.isinf(act64)) & (exp64 != act64) & ~exp_nan
    diff = torch.where(both_finite, (act64 - exp64).abs(), torch.zeros_like(exp64))
    close_bad = both_finite & (diff > atol + rtol * exp64.abs())
    allowance = None
    if (close_bad.any() or inf_bad.any()) and truth is not None:
        allowance = _allowance_from_exact(exp64, truth, scale, both_finite, atol, rtol)
        close_bad = close_bad & ((act64 - truth).abs() > allowance)
        inf_bad = inf_bad & ~_overflow_boundary(act64, truth, allowance, exp.dtype)
    bad = inf_bad | close_bad
    if bad.any():
        found = _mismatch_report(path, exp64, act64, bad, "mismatch", atol=atol, rtol=rtol, diff=diff)
        if allowance is not None and truth is not None:  # quoted at the first reported element, not the largest
            first = int(bad.flatten().nonzero()[0])
            found["message"] += (
                f"; also more than the allowed distance from a float64 run of the op (at the first element "
                f"reported, {float(truth.flatten()[first]):.6g} +- {float(allowance.flatten()[first]):.3g}: dtype "
                "tolerance, twice aten's own largest error where aten is outside it, and twice the float32 "
                "rounding bound sqrt(n) * 2**-24 * sum|terms| for reductions)")
        return found
    return None


def non_finite_disagreements(expected: Any, actual: Any) -> int:
    """Elements where aten's result is NaN or inf and a passing kernel's is not the same (the float64
    run decided them: ``_aten_not_finite_wrongly``)."""
    count = 0
    for e, a in zip(tensors_in(expected), tensors_in(actual)):
        if e.is_floating_point() and e.shape == a.shape and e.numel():
            differ = ~((e == a) | (torch.isnan(e) & torch.isnan(a))) & ~torch.isfinite(e)
            count += int(differ.sum())
    return count


def tolerance_used(expected: Any, actual: Any) -> float | None:
    """For a passing result: the largest ``|actual - expected| / (atol + rtol * |expected|)`` over
    the floating tensors' finite elements (1.0 is the edge of the dtype tolerance; above 1 the
    value passed only through the float64 rules above). None where nothing floating was compared."""
    used = None
    for exp, act in zip(tensors_in(expected), tensors_in(actual)):
        atol, rtol = TOLERANCES.get(exp.dtype, (0.0, 0.0))
        if not exp.dtype.is_floating_point or exp.numel() == 0 or exp.shape != act.shape or atol + rtol == 0:
            continue
        for exp_part, act_part in chunks(exp.detach(), act.detach()):
            exp64, act64 = exp_part.to(torch.float64), act_part.to(torch.float64)
            # 0 where either value is not finite: the ratio is NaN or inf exactly there (atol > 0)
            ratio = ((act64 - exp64).abs() / (atol + rtol * exp64.abs())).nan_to_num(0.0, 0.0, 0.0)
            used = max(used or 0.0, float(ratio.max()))
    return used


# Elements compared at a time in float64 on the common path: a few 128 MiB temporaries, whatever
# the tensor's size. Whole, a [64, 128, 50265] float16 result took some 3 GiB per float64 copy,
# and evaluations sharing an 80 GB GPU ran out of memory there (issue 46).
CHUNK_ELEMENTS = 1 << 24


def chunks(*tensors: torch.Tensor, size: int = CHUNK_ELEMENTS):
    """The tensors (of one shape) flattened and cut into aligned pieces of ``size`` elements."""
    flat = [t.reshape(-1) for t in tensors]
    total = flat[0].numel()
    for start in range(0, total, size):
        yield [f[start:start + size] for f in flat]


def _close_everywhere(exp: torch.Tensor, act: torch.Tensor, atol: float, rtol: float) -> bool:
    """Every element of ``act`` within the dtype tolerance of ``exp`` (NaN against NaN too),
    judged in float64 a chunk at a time."""
    return all(bool(torch.isclose(a.to(torch.float64), e.to(torch.float64), rtol=rtol, atol=atol, equal_nan=True).all())
               for e, a in chunks(exp, act))


def _all_finite_and_allowed(exp64, act64, truth64, scale, atol: float, rtol: float) -> bool:
    """The rules of ``compare_tensors`` for the common case, in a few passes over the values: every
    value finite (aten's, the kernel's, the float64 run's), each within the dtype tolerance of aten's
    or within the allowance of the float64 value. True only where those rules pass every element;
    False also where some value is not finite (the full rules then decide)."""
    diff = act64 - exp64
    if not bool(torch.isfinite(diff + (truth64 - exp64)).all()):  # inf or NaN in any of the three
        return False
    outside = diff.abs() > atol + rtol * exp64.abs()
    if not bool(outside.any()):
        return True
    allowance = _allowance_from_exact(exp64, truth64, scale, None, atol, rtol)
    return not bool((outside & ((act64 - truth64).abs() > allowance)).any())


def _aten_not_finite_wrongly(exp64, act64, truth64, dtype) -> torch.Tensor:
    """Where aten returned NaN or inf and the candidate did not return aten's value, but the float64
    run gives a finite value (aten's intermediates overflowed: cuBLAS's reduced-precision split-K
    float16 matmul returns NaN on long K) or the candidate's own non-finite value (aten's
    vectorised float32 CPU gelu gives NaN at +inf, where float64 and aten on CUDA give inf): the
    float64 value rounded to ``dtype`` (+-inf where it does not fit) is the reference there.
    Reproducing aten's NaN or inf passes too."""
    same = (exp64 == act64) | (torch.isnan(exp64) & torch.isnan(act64))
    rounded = truth64.to(dtype).to(torch.float64)
    agrees = (rounded == act64) | (torch.isnan(rounded) & torch.isnan(act64))
    return ~torch.isfinite(exp64) & ~same & (torch.isfinite(truth64) | agrees)


def _allowance_from_exact(exp64, truth64, scale, finite, atol: float, rtol: float) -> torch.Tensor:
    """Per-element allowed distance from the float64 result: the dtype tolerance; plus twice
    aten's largest error on this tensor where aten itself is outside the tolerance somewhere;
    plus, for reductions, twice ``2**-24 * Exact.scale`` (``sqrt(n) * sum|terms|``)."""
    aten_error = (exp64 - truth64).abs()
    if finite is not None:  # None: every value is finite
        aten_error = torch.where(finite & torch.isfinite(truth64), aten_error, torch.zeros_like(exp64))
    allowance = atol + rtol * truth64.abs().nan_to_num(0.0, 0.0, 0.0)
    if bool((aten_error > allowance).any()):
        allowance = allowance + 2 * aten_error.max()
    if scale is not None and scale.shape == truth64.shape:
        allowance = allowance + 2 * FLOAT32_UNIT_ROUNDOFF * scale.detach().to(torch.float64).abs().nan_to_num(0.0, 0.0, 0.0)
    return allowance


def _overflow_boundary(act64, truth64, allowance, dtype) -> torch.Tensor:
    """Elements whose exact value is within the allowance of the dtype's largest finite value:
    there, one side rounding to +-inf and the other to +-max is a rounding difference."""
    largest = torch.finfo(dtype).max
    near = torch.isfinite(truth64) & (truth64.abs() >= largest - allowance)
    return near & (torch.sign(act64) == torch.sign(truth64)) & (
        torch.isinf(act64) | ((act64 - truth64).abs() <= allowance))


def _mismatch_report(path, exp, act, bad, kind, exact=False, atol=0.0, rtol=0.0, diff=None) -> dict:
    """The failure with its count, largest errors and first ``MAX_REPORTED`` wrong elements (each
    quantity read back from the device in one transfer, not one per number)."""
    total = bad.numel()
    flat_bad = bad.reshape(-1).nonzero().reshape(-1)[:MAX_REPORTED]
    shape = tuple(bad.shape)
    exp_flat, act_flat = exp.reshape(-1), act.reshape(-1)
    picked = torch.stack([exp_flat[flat_bad], act_flat[flat_bad]]).tolist()
    examples = [{"index": list(_unravel(flat, shape)), "expected": _py(e), "actual": _py(a)}
                for flat, e, a in zip(flat_bad.tolist(), *picked)]
    sums = [bad.sum().to(torch.float64)]
    if diff is not None:
        sums += [diff.max(), (diff / exp.abs().clamp_min(1e-30)).max()]
    read = torch.stack(sums).tolist()
    report = _fail(kind, "")
    report.update(mismatch_count=int(read[0]), numel=total, mismatches=examples)
    if diff is not None:
        report["max_abs_error"], report["max_rel_error"] = read[1], read[2]
    what = "NaN positions differ" if kind == "nan_mismatch" else "values differ"
    tol = "" if exact else f" (atol={atol:g}, rtol={rtol:g})"
    first = examples[0]
    report["message"] = (f"{path}: {what} at {report['mismatch_count']} of {total} elements{tol}; first at index "
                         f"{first['index']}: expected {first['expected']}, got {first['actual']}")
    return report


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return tuple(reversed(index))


def _py(item):
    """A reported element: a number as Python has it, NaN and infinities as text (JSON has none)."""
    if isinstance(item, float) and (math.isnan(item) or math.isinf(item)):
        return str(item)
    return item


def _fail(kind: str, message: str) -> dict:
    return {"error_kind": kind, "message": message}


def same_tensors(a: Any, b: Any) -> bool:
    """The tensors in two structures are equal one by one (``equal_exactly``), and as many."""
    ta, tb = tensors_in(a), tensors_in(b)
    return len(ta) == len(tb) and all(equal_exactly(x, y) for x, y in zip(ta, tb))


def equal_exactly(before: torch.Tensor, after: torch.Tensor) -> bool:
    """Bitwise-style equality that treats NaN as equal to NaN (for mutation checks)."""
    if before.shape != after.shape or before.dtype != after.dtype:
        return False
    if torch.equal(before, after):  # the common case, in one pass (NaN is never equal there)
        return True
    if before.dtype.is_floating_point:
        return bool(((before == after) | (torch.isnan(before) & torch.isnan(after))).all())
    return bool((before == after).all())
