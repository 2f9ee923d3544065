"""Fail fast: one test of every class first, the rest after.

A class is what a kernel tends to get wrong as a whole: the overload, where the test comes from
(OpInfo, traces, a dataset, each edge rule, each promotion rule), the dtype, the rank and layout of
the inputs, the keyword arguments given, an out= tensor's layout, and for trace inputs the size
(order of magnitude). The first test of each class, in suite order, makes the first tier. A
candidate that passes it runs everything; one that fails there runs what else fits in a small
budget (its failing classes' tests first) and stops, its feedback grouped from the tests that ran.
"""
from __future__ import annotations

import math

from bbagent.harness.inputs import tensors_in

# seconds (compiling included) a candidate that failed in the first tier still gets for more tests,
# its failing classes' tests first, so that its feedback shows more than one failure per class.
# Their kernels compile ahead side by side, so half a second runs about as many as a second did
# when each test compiled its own in turn (H200, issue 33)
EXTRA_AFTER_FAILURE_S = 0.5


def class_of(overload: str, case) -> tuple:
    """The class of a test (``harness.suite.build.TestCase``)."""
    source = case.source.split(" ")[0].rstrip(",")
    kind = source if source.startswith(("edge:", "promotion:")) else source.split(":")[0]
    if case.trace is not None:
        shapes = [(tuple(spec.shape), spec.stride) for spec in case.trace.tensor_specs()]
        contiguous = all(stride is None or tuple(stride) == _contiguous_strides(shape) for shape, stride in shapes)
        numel = max((math.prod(shape) for shape, _ in shapes), default=0)
        size = int(math.log10(numel)) if numel else -1
        keywords = tuple(sorted(case.trace.kwargs)) if isinstance(case.trace.kwargs, dict) else ()
    else:
        tensors = tensors_in((case.args, case.kwargs))
        shapes = [(tuple(t.shape), t.stride()) for t in tensors]
        contiguous = all(t.is_contiguous() for t in tensors)
        size = None
        keywords = tuple(sorted(case.kwargs or {}))
    rank = len(shapes[0][0]) if shapes else -1
    return (overload, kind, case.dtype, rank, contiguous, keywords, size, case.out_layout if case.out_of else None)


def _contiguous_strides(shape: tuple) -> tuple:
    """A contiguous tensor's strides, as torch gives them (a dimension of size 0 or 1 steps as 1)."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


class Classes:
    """Each test's class, worked out once per test: the run orders its tests by class more than
    once, and a trace test's class takes its shapes apart (mm's 822 tests: 2.1 s of a wrong
    candidate's 3.6 s when worked out at each use)."""

    def __init__(self):
        self._known: dict[tuple[str, int], tuple] = {}
        self._cases: list = []  # kept alive, so that no other case takes an id known here

    def __call__(self, overload: str, case) -> tuple:
        key = (overload, id(case))
        if key not in self._known:
            self._known[key] = class_of(overload, case)
            self._cases.append(case)
        return self._known[key]


def first_tier_order(planned: list[tuple], classes: Classes | None = None) -> tuple[list[tuple], int]:
    """``planned`` ((overload name, overload, case) triples) reordered: the first test of every
    class, then the others, each part in suite order. Returns the order and the first tier's size."""
    classes = classes or Classes()
    seen: set = set()
    first: list = []
    rest: list = []
    for entry in planned:
        key = classes(entry[0], entry[2])
        (rest if key in seen else first).append(entry)
        seen.add(key)
    return first + rest, len(first)


def failing_classes_first(rest: list[tuple], failing: set[tuple] | dict,
                          classes: Classes | None = None) -> list[tuple]:
    """The tests left after a failing first tier: those of the failing classes first (more
    failures of the same kind tell the model where it fails: which sizes, which layouts), then
    the others, each part in suite order."""
    classes = classes or Classes()
    failing_first = [classes(entry[0], entry[2]) in failing for entry in rest]
    return ([entry for entry, first in zip(rest, failing_first) if first]
            + [entry for entry, first in zip(rest, failing_first) if not first])


def describe_class(key: tuple) -> str:
    """A class as a reader names it: ``edge:nan_inf float16 rank 2``, ``trace float32 rank 4 strided``."""
    overload, kind, dtype, rank, contiguous, keywords, size, out_layout = key
    words = [kind, dtype, f"rank {rank}" if rank >= 0 else "no tensor"]
    if not contiguous:
        words.append("strided")
    if keywords:
        words.append("with " + ", ".join(keywords))
    if size is not None and size >= 0:
        words.append(f"~1e{size} elements")
    if out_layout and out_layout != "result":
        words.append(f"out {out_layout}")
    return f"{overload.removeprefix('aten.')}: " + " ".join(words)
