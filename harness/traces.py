"""Real-model operator traces: parse the ``T([shape], dtype, stride=...)`` format.

The same parser reads the argument strings of a BackendBench dataset, whose serializer writes
strides as a third argument (``T([64, 128], f16, [1, 64])``), keyword names as quoted dict keys,
and other values by their ``repr`` (``inf``, ``torch.float16``, ``device(type='cuda', index=0)``).

A trace file is a sequence of blocks::

    Operator: aten.add.Tensor
    cnt: 156, ((T([1, 512, 768], f16), T([1, 512, 768], f16)), {})

The project ships one consolidated file (``harness/data/model_traces.txt``) built
from the per-model logs with ``python -m harness.traces consolidate SRC_DIR``:
identical argument lines are merged and their counts summed, most frequent first.
Arguments are parsed with ``ast`` into plain values and :class:`TensorSpec`;
nothing in a trace is ever evaluated as code.
"""
from __future__ import annotations

import ast
import math
import sys
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator

from bbagent.harness.parse import parse_expression

SHIPPED_TRACES = Path(__file__).parent / "data" / "model_traces.txt"

DTYPE_NAMES = {
    "f16": "float16", "f32": "float32", "f64": "float64", "bf16": "bfloat16",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
    "b8": "bool", "c32": "complex32", "c64": "complex64", "c128": "complex128",
}
SHORT_DTYPE = {v: k for k, v in DTYPE_NAMES.items()}
# Overloads renamed since the traces were recorded: current name -> names in the traces.
TRACE_ALIASES = {"aten.sum.dim_IntList": ("aten.sum.SymInt",)}


class TraceFormatError(ValueError):
    pass


@dataclass(frozen=True)
class TensorSpec:
    """A tensor described by a trace: shape, dtype name (torch spelling), optional strides."""

    shape: tuple[int, ...]
    dtype: str
    stride: tuple[int, ...] | None = None

    def numel(self) -> int:
        return math.prod(self.shape)

    def describe(self) -> str:
        text = f"T({list(self.shape)}, {SHORT_DTYPE.get(self.dtype, self.dtype)}"
        if self.stride is not None:
            text += f", stride={tuple(self.stride)}"
        return text + ")"


@dataclass(frozen=True)
class DtypeRef:
    """A dtype appearing as a plain argument (``dtype=f16``), kept by name."""

    name: str


@dataclass(frozen=True)
class NamedConstant:
    """Other ``torch.X`` constants (``torch.strided``, ``torch.channels_last``)."""

    name: str


@dataclass(frozen=True)
class TraceCall:
    op: str
    args: tuple
    kwargs: dict
    count: int

    def tensor_specs(self) -> list[TensorSpec]:
        return [v for v in _walk((self.args, self.kwargs)) if isinstance(v, TensorSpec)]

    def numel(self) -> int:
        return sum(spec.numel() for spec in self.tensor_specs())

    def describe(self) -> str:
        """``(T([4], f16), 2) {alpha=1}``: positional arguments, then keyword arguments if any."""
        return describe_value(self.args) + (f" {describe_value(self.kwargs)}" if self.kwargs else "")


def map_leaves(value: Any, kind: type, fn: Callable[[Any], Any]) -> Any:
    """Apply ``fn`` to every ``kind`` (a TensorSpec, a tensor) in a structure of tuples, lists and dicts."""
    if isinstance(value, kind):
        return fn(value)
    if isinstance(value, tuple):
        return tuple(map_leaves(v, kind, fn) for v in value)
    if isinstance(value, list):
        return [map_leaves(v, kind, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_leaves(v, kind, fn) for k, v in value.items()}
    return value


def _walk(value: Any) -> Iterator[Any]:
    if isinstance(value, (tuple, list)):
        for item in value:
            yield from _walk(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _walk(item)
    else:
        yield value


def describe_value(value: Any, leaf: Callable[[Any], Any] = lambda v: v) -> str:
    """Short human description of a parsed argument; ``leaf`` may first turn a value
    (a real tensor, say) into something describable (a TensorSpec)."""
    value = leaf(value)
    if isinstance(value, TensorSpec):
        return value.describe()
    if isinstance(value, (DtypeRef, NamedConstant)):
        return value.name
    if isinstance(value, tuple):
        inner = ", ".join(describe_value(v, leaf) for v in value)
        return f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, list):
        return "[" + ", ".join(describe_value(v, leaf) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={describe_value(v, leaf)}" for k, v in value.items()) + "}"
    return repr(value)


# --- parsing -----------------------------------------------------------------

def _eval_node(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str) and node.value in DTYPE_NAMES:  # BackendBench reads 'f16' as f16
            return DtypeRef(DTYPE_NAMES[node.value])
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(_eval_node(e) for e in node.elts)
    if isinstance(node, ast.List):
        return [_eval_node(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        if None in node.keys:
            raise TraceFormatError("unsupported syntax: ** inside a dict")
        return {_eval_node(k): _eval_node(v) for k, v in zip(node.keys, node.values) if k is not None}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval_node(node.operand)
    if isinstance(node, ast.Name):
        if node.id in DTYPE_NAMES:
            return DtypeRef(DTYPE_NAMES[node.id])
        if node.id == "inf":
            return math.inf
        if node.id == "nan":
            return math.nan
        raise TraceFormatError(f"unknown name '{node.id}'")
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("torch", "th"):
        if node.attr in SHORT_DTYPE or node.attr in DTYPE_NAMES.values():
            return DtypeRef(node.attr)
        return NamedConstant(f"torch.{node.attr}")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "T":
        return _tensor_spec(node)
    if isinstance(node, ast.Call) and _called(node) == "device":  # torch.device('cuda'), or the repr device(type='cuda', index=0)
        return _device(node)
    raise TraceFormatError(f"unsupported syntax: {ast.dump(node)[:80]}")


def _called(node: ast.AST) -> str | None:
    """The name a call calls: ``device`` for both ``torch.device(...)`` and ``device(...)``."""
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Name):
        return node.func.id
    return node.func.attr if isinstance(node.func, ast.Attribute) else None


def _device(node: ast.Call) -> str:
    values = [_eval_node(a) for a in node.args] + [_eval_node(k.value) for k in node.keywords
                                                     if k.arg in ("type", "index")]
    if not values or not isinstance(values[0], str):
        raise TraceFormatError("device(...) takes a device type such as 'cuda'")
    index = values[1] if len(values) > 1 else None
    return values[0] if index is None or ":" in values[0] else f"{values[0]}:{int(index)}"


def _tensor_spec(node: ast.Call) -> TensorSpec:
    """``T(shape, dtype)`` with strides as ``stride=`` (the traces) or a third argument (BackendBench)."""
    if len(node.args) not in (2, 3):
        raise TraceFormatError("T(...) takes a shape, a dtype and optionally strides")
    shape = _eval_node(node.args[0])
    dtype = _eval_node(node.args[1])
    stride = _eval_node(node.args[2]) if len(node.args) == 3 else None
    for kw in node.keywords:
        if kw.arg == "stride" and stride is None:
            stride = _eval_node(kw.value)
        elif kw.arg == "stride":
            raise TraceFormatError("T() given strides twice")
        else:
            raise TraceFormatError(f"unknown T() keyword '{kw.arg}'")
    if not isinstance(dtype, DtypeRef):
        raise TraceFormatError(f"bad dtype in T(): {dtype!r}")
    if not isinstance(shape, (list, tuple)) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise TraceFormatError(f"bad shape in T(): {shape!r}")
    if stride is not None:
        if not isinstance(stride, (list, tuple)) or not all(isinstance(s, int) for s in stride):
            raise TraceFormatError(f"bad strides in T(): {stride!r}")
        if len(stride) != len(shape):
            raise TraceFormatError("stride and shape differ in length")
        stride = tuple(stride)
    return TensorSpec(tuple(shape), dtype.name, stride)


def parse_call_line(op: str, line: str) -> TraceCall:
    """Parse one ``cnt: N, ((args), {kwargs})`` line."""
    head, sep, rest = line.partition(",")
    if not sep or not head.strip().startswith("cnt:"):
        raise TraceFormatError(f"expected 'cnt: N, (...)': {line[:80]}")
    count = int(head.split(":", 1)[1])
    try:
        tree = parse_expression(rest.strip())
    except SyntaxError as exc:
        raise TraceFormatError(f"cannot parse arguments: {exc}") from None
    value = _eval_node(tree)
    if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict)):
        raise TraceFormatError("expected ((args), {kwargs})")
    args = value[0] if isinstance(value[0], tuple) else (value[0],)
    return TraceCall(op, args, value[1], count)


def iter_blocks(text: str) -> Iterator[tuple[str, str]]:
    """Yield (operator, call line) pairs from trace text."""
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("Operator:"):
            current = line.split(":", 1)[1].strip()
        elif line.startswith("cnt:"):
            if current is None:
                raise TraceFormatError("call line before any 'Operator:' line")
            yield current, line


def load_calls(op: str, path: Path = SHIPPED_TRACES) -> list[TraceCall]:
    """All trace calls of ``op`` in ``path``, most frequent first; bad lines are skipped."""
    if not path.exists():
        return []
    by_op = _lines_by_op(path, path.stat().st_mtime_ns)
    calls = []
    for name in (op, *TRACE_ALIASES.get(op, ())):
        for line in by_op.get(name, ()):
            try:
                calls.append(parse_call_line(op, line))
            except TraceFormatError:
                continue
    return sorted(calls, key=lambda c: -c.count)


@lru_cache(maxsize=4)
def _lines_by_op(path: Path, mtime_ns: int) -> dict[str, list[str]]:
    """The call lines of a trace file grouped by operator, read once per file version
    (listing or prompting every operator would otherwise scan the whole file per operator)."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for name, line in iter_blocks(path.read_text()):
        grouped[name].append(line)
    return dict(grouped)


# --- consolidation -----------------------------------------------------------

def consolidate(src_dir: Path) -> str:
    """Merge every ``*.txt`` trace under ``src_dir`` into one text, counts summed."""
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    files = sorted(Path(src_dir).rglob("*.txt"))
    if not files:
        raise FileNotFoundError(f"no *.txt trace files under {src_dir}")
    for path in files:
        for op, line in iter_blocks(path.read_text()):
            head, _, rest = line.partition(",")
            args = rest.strip()
            n = int(head.split(":", 1)[1])
            counts[op][args] = counts[op].get(args, 0) + n
    out = [f"# consolidated from {len(files)} model traces; counts summed over models"]
    for op in sorted(counts):
        out.append(f"Operator: {op}")
        for args, n in sorted(counts[op].items(), key=lambda kv: (-kv[1], kv[0])):
            out.append(f"cnt: {n}, {args}")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] != "consolidate":
        print("usage: python -m harness.traces consolidate SRC_DIR DEST_FILE", file=sys.stderr)
        return 2
    text = consolidate(Path(argv[1]))
    Path(argv[2]).write_text(text)
    print(f"wrote {argv[2]} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
