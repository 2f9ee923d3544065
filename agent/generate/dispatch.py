"""Per-shape dispatch without the model: when two correct kernels of a run each win on different
timed shapes, bbagent writes one kernel file holding both (``agent.generate.merge``) and a
``kernel`` of its own that calls one or the other by the size of the call's tensors and, where
their timings differ by dtype, by dtype. The loop evaluates that file like any candidate (every
test, then timing) and keeps it only when it is faster than both.

The rule comes from the parts' own timings: for the shapes both were timed on, the size
threshold (bytes held by the call's tensor arguments, the same sum the dispatcher takes at run
time) that gives the least total log time, for all dtypes together and, where that differs, per
dtype. No dispatcher is tried unless that rule predicts it at least ``MIN_GAIN`` faster by geomean
than the better part.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from bbagent.agent.generate.merge import CannotMerge, Part, import_identity, merge
from bbagent.agent.generate.population import Member
from bbagent.agent.review.meta import Composed, ComposedPart
from bbagent.harness.interface import DTYPE_NAMES

MIN_GAIN = 0.03
HOST_NAMES = ("kernel", "DISPATCH_PARTS", "DISPATCH_RULES", "call_size")
ITEM_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "u8": 1, "b8": 1, "i16": 2, "i32": 4, "i64": 8,
              "c32": 4, "c64": 8, "c128": 16}
_TENSOR = re.compile(r"T\(\[([\d,\s]*)\],\s*(\w+)")


@dataclass(frozen=True)
class Rule:
    """Calls of ``dtype`` (None: any dtype without a rule of its own) whose tensor arguments hold at
    most ``up_to_bytes`` go to the kernel of round ``small``, larger ones to that of round ``large``."""
    dtype: str | None
    up_to_bytes: int
    small: int
    large: int

    def part_for(self, size: int) -> int:
        return self.small if size <= self.up_to_bytes else self.large

    def text(self) -> str:
        calls = f"{self.dtype} calls" if self.dtype else "calls of any other dtype"
        if self.small == self.large:
            return f"{calls}: round {self.small}"
        return f"{calls}: up to {self.up_to_bytes} bytes of tensors round {self.small}, above round {self.large}"


@dataclass(frozen=True)
class DispatchPlan:
    parts: tuple[Member, Member]
    rules: tuple[Rule, ...]
    predicted_gain: float  # the better part's geomean time over the dispatcher's, from the parts' own times

    def rounds(self) -> tuple[int, int]:
        return self.parts[0].round, self.parts[1].round


def description_bytes(description: str) -> tuple[int, str | None]:
    """Bytes held by the tensors a test's input description names (``(T([4, 8], f16), 2)``), and
    the first one's dtype (torch's name), as ``call_size`` finds them in the real call."""
    size, dtype = 0, None
    for dims, short in _TENSOR.findall(description):
        numel = math.prod(int(d) for d in dims.replace(" ", "").split(",") if d)
        size += numel * ITEM_BYTES.get(short, 4)
        if dtype is None:
            dtype = DTYPE_NAMES.get(short, short)
    return size, dtype


def plan(first: Member, second: Member) -> DispatchPlan | None:
    """The dispatch rule between two correct kernels timed on the same GPU model, if it predicts
    a dispatcher ``MIN_GAIN`` faster than the better of them; else None."""
    if first.gpu != second.gpu or first.parts or second.parts:
        return None
    times = [first.times_us(), second.times_us()]
    shapes = []  # (dtype, bytes, time of first, time of second)
    for description in sorted(set(times[0]) & set(times[1])):
        size, dtype = description_bytes(description)
        shapes.append((dtype, size, times[0][description], times[1][description]))
    if len(shapes) < 2:
        return None
    rounds = (first.round, second.round)
    rules = [_fit(None, shapes, rounds)]
    for dtype in sorted({s[0] for s in shapes if s[0]}):
        group = [s for s in shapes if s[0] == dtype]
        own = _fit(dtype, group, rounds)
        if [own.part_for(s[1]) for s in group] != [rules[0].part_for(s[1]) for s in group]:
            rules.append(own)  # only where it chooses otherwise than the rule for all
    by_dtype = {rule.dtype: rule for rule in rules}

    def chosen(shape):
        part = by_dtype.get(shape[0], by_dtype[None]).part_for(shape[1])
        return shape[2] if part == first.round else shape[3]
    dispatched = _log_mean([chosen(s) for s in shapes])
    better = min(_log_mean([s[2] for s in shapes]), _log_mean([s[3] for s in shapes]))
    gain = math.exp(better - dispatched)
    if gain < 1 + MIN_GAIN or all(r.small == r.large for r in rules):
        return None
    return DispatchPlan((first, second), tuple(rules), gain)


def _log_mean(values: list[float]) -> float:
    return sum(math.log(v) for v in values) / len(values)


def _fit(dtype: str | None, shapes: list[tuple], rounds: tuple[int, int]) -> Rule:
    """The threshold and its sides with the least total log time over ``shapes``; a threshold
    falls midway (geometrically) between the sizes on either side of it."""
    sizes = sorted({s[1] for s in shapes})
    cuts = [-1] + [int(math.sqrt(max(a, 1) * max(b, 1))) for a, b in zip(sizes, sizes[1:])] + [sizes[-1]]
    best: tuple | None = None
    for small_first in (True, False):
        small, large = (rounds if small_first else rounds[::-1])
        for cut in cuts:
            cost = sum(math.log(s[2] if (s[1] <= cut) == small_first else s[3]) for s in shapes)
            if best is None or cost < best[0] - 1e-12:
                best = (cost, cut, small, large)
    assert best is not None  # cuts is never empty
    _, cut, small, large = best
    if cut in (-1, sizes[-1]):  # one part for every size
        only = large if cut == -1 else small
        return Rule(dtype, -1, only, only)
    return Rule(dtype, cut, small, large)


def compose(chosen: DispatchPlan, op: str, run_id: str) -> str:
    """The dispatcher's kernel file: both parts, renamed apart, and bbagent's ``kernel`` choosing
    between them. CannotMerge where the parts cannot be put together safely."""
    first, second = chosen.parts
    host = {name: ("host", name) for name in HOST_NAMES} | import_identity("import torch")
    merged = merge([Part(first.source, f"_round{first.round}"), Part(second.source, f"_round{second.round}")], host)
    entries = []
    for member, renamed in zip(chosen.parts, merged.renamed):
        if "kernel" not in renamed:
            raise CannotMerge(f"the kernel of round {member.round} defines no top-level 'kernel'")
        entries.append(f"    {member.round}: {renamed['kernel']},")
    rules = "\n".join(f"    {rule.dtype!r}: ({rule.up_to_bytes}, {rule.small}, {rule.large}),  # {rule.text()}"
                      for rule in sorted(chosen.rules, key=lambda r: (r.dtype is None, r.dtype or "")))
    header = (f'"""{op}: a per-shape dispatcher composed by bbagent (not written by a model) in run {run_id},\n'
              f"between the correct kernels of rounds {first.round} and {second.round}, each faster on some "
              f"timed shapes ({first.gpu}).\n"
              "Each part follows as its model wrote it, its top-level names suffixed with its round;\n"
              "`kernel` at the end chooses by the bytes of the call's tensor arguments and their dtype.\n"
              f'Predicted from the parts\' own timings: {chosen.predicted_gain:.3g}x the better part (geomean)."""\n')
    sections = [header + "".join(line + "\n" for line in merged.future) + "import torch\n"]
    for member, body in zip(chosen.parts, merged.bodies):
        speedup = member.verdict.geomean_speedup()
        speed = f" (geomean {speedup:.3g}x eager)" if speedup is not None else ""
        sections.append(f"# ---- round {member.round}, as its model wrote it{speed} ----\n{body.rstrip()}\n")
    sections.append(_DISPATCHER.format(entries="\n".join(entries), rules=rules))
    return "\n\n".join(sections)


_DISPATCHER = '''# ---- the dispatcher (bbagent) ----
DISPATCH_PARTS = {{
{entries}
}}
# dtype (None: any other) -> (bytes of tensor arguments up to which the first round serves, that round, the other)
DISPATCH_RULES = {{
{rules}
}}


def call_size(value, found=None):
    """(bytes held by the tensors in a call's arguments, the first one's dtype name)."""
    found = [0, None] if found is None else found
    if isinstance(value, torch.Tensor):
        found[0] += value.numel() * value.element_size()
        if found[1] is None:
            found[1] = str(value.dtype).removeprefix("torch.")
    elif isinstance(value, (tuple, list)):
        for item in value:
            call_size(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            call_size(item, found)
    return found[0], found[1]


def kernel(*args, **kwargs):
    size, dtype = call_size((args, kwargs))
    up_to, small, large = DISPATCH_RULES.get(dtype, DISPATCH_RULES[None])
    return DISPATCH_PARTS[small if size <= up_to else large](*args, **kwargs)
'''


def provenance(chosen: DispatchPlan, run_id: str, root: Path) -> Composed:
    """meta.json's fields for an accepted dispatcher: each part's own provenance (its round, file
    under the root, digest, speed, the GPU it was timed on) and the rules."""
    parts = []
    for member in chosen.parts:
        path = Path(member.verdict.kernel.path)
        try:
            path = path.resolve().relative_to(Path(root).resolve())
        except ValueError:
            pass
        parts.append(ComposedPart(round=member.round, run_id=run_id, file=str(path),
                                  kernel_sha256=member.verdict.kernel.sha256,
                                  geomean_speedup=member.verdict.geomean_speedup(), gpu=member.gpu))
    return Composed(composed_of=parts, dispatch_rules=[rule.text() for rule in chosen.rules],
                    dispatch_predicted_gain=round(chosen.predicted_gain, 4))
