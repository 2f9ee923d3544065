"""Build the correctness tests for one aten overload: OpInfo samples plus real-model traces.

OpInfo samples are run once under a dispatch recorder; every call that reaches
exactly the target overload is captured with the arguments aten received, so a
sample that goes through ``F.relu`` becomes a direct ``aten.relu.default`` test.
Trace calls are materialised into seeded tensors.

Under the Triton interpreter (no CUDA) the suite is cut down, and every cut is
recorded as a skipped test with its reason: traces above ``cpu_max_numel``
elements, and bfloat16 cases (triton 3.9's interpreter computes bf16 arithmetic
and comparisons wrongly, so a CPU verdict on them would be noise).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bbagent.harness.gpu_pause import checkpoint
from bbagent.harness.inputs import clone_value, describe_call, map_tensors, materialize, spread, tensors_in
from bbagent.harness.layouts import channels_last_call
from bbagent.harness.opinfo_index import opinfos_reaching
from bbagent.harness.ops import op_name, packet_name
from bbagent.harness.suite.budget import CPU_MAX_NUMEL, MAX_TRACE_CASES_CPU
from bbagent.harness.suite.cache import probe_refresh
from bbagent.harness.suite.edge_cases import derive_edge_cases, reference_accepts, reference_accepts_cpu_first
from bbagent.harness.suite.index_args import make_index_args_valid
from bbagent.harness.suite.integer_extremes import derive_integer_extreme_cases
from bbagent.harness.suite.promotion import derive_promotion_cases
from bbagent.harness.traces import TraceCall, TraceFormatError, load_calls, parse_call_line
from bbagent.harness.variants import functional_of, is_written, out_arguments, schema_arguments, with_out_tensors

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# OpInfo samples are drawn in these dtypes where the OpInfo says the op supports them.
SAMPLE_DTYPES = FLOAT_DTYPES + (torch.int32, torch.int64, torch.bool)
# OpInfo tests kept per sampled dtype (so float16 samples cannot crowd out int32 ones).
MAX_OPINFO_CASES_PER_DTYPE = 16


@dataclass
class TestCase:
    """One test. OpInfo and edge cases hold their (small) inputs; a trace case holds its
    trace call and seed and draws its inputs only when it runs, so a suite of thousands of
    large real-model shapes never sits in device memory at once."""

    id: str
    source: str              # "opinfo:<name>", "trace (cnt N)" or "edge:<rule> (from <id>)"
    description: str
    dtype: str
    args: tuple | None = None
    kwargs: dict | None = None
    trace: TraceCall | None = None
    trace_op: Any = None     # for a trace case: the overload its trace was recorded at (index arguments follow it)
    seed: int = 0
    device: str = "cpu"
    out_of: Any = None       # for an out= overload: the functional overload whose result shapes `out`
    out_names: tuple = ()
    out_layout: str = "result"  # harness.variants.OUT_LAYOUTS
    timed: bool = True       # a trace case the timing phase may time (a dataset's canaries are not)
    refreshable: bool = False  # an OpInfo sample whose floating values a reused suite redraws (harness.suite.cache)

    def inputs(self) -> tuple[tuple, dict]:
        args, kwargs = self._drawn_inputs()
        if self.out_of is not None:
            kwargs = with_out_tensors(self.out_of, list(self.out_names), args, kwargs, self.out_layout)
        return args, kwargs

    def meta_inputs(self) -> tuple[tuple, dict]:
        """The inputs as data-free tensors on the meta device (same shapes, strides, dtypes)."""
        if self.trace is not None:
            return materialize(self.trace.args, "meta", None), materialize(self.trace.kwargs, "meta", None)
        return map_tensors((self.args, self.kwargs), _on_meta)

    def _drawn_inputs(self) -> tuple[tuple, dict]:
        if self.trace is None:
            return self.args or (), self.kwargs or {}
        gen = torch.Generator(device=self.device).manual_seed(self.seed)
        args = materialize(self.trace.args, self.device, gen)
        kwargs = materialize(self.trace.kwargs, self.device, gen)
        make_index_args_valid(self.trace_op, args, kwargs, gen)
        return args, kwargs

    def largest_tensor(self) -> int:
        """Elements of the largest input tensor, without drawing trace inputs."""
        if self.trace is not None:
            return max((spec.numel() for spec in self.trace.tensor_specs()), default=0)
        return max((t.numel() for t in tensors_in((self.args, self.kwargs))), default=0)


@dataclass
class Suite:
    cases: list[TestCase] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _on_meta(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")


class _CallCapture(TorchDispatchMode):
    """Record (args, kwargs) copies of every call that reaches ``target``."""

    def __init__(self, target):
        super().__init__()
        self.target = target
        self.calls: list[tuple[tuple, dict]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is self.target:
            with torch.utils._python_dispatch._disable_current_modes():
                self.calls.append((clone_value(args), clone_value(kwargs)))
        return func(*args, **kwargs)


MAX_OPINFOS = 4


def _matching_opinfos(op) -> list:
    """OpInfos named like the op, then those the shipped index says reach it (at most MAX_OPINFOS)."""
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except Exception as exc:  # expecttest missing, or a torch without the testing package
        raise RuntimeError(f"OpInfo database unavailable ({type(exc).__name__}: {exc})") from exc
    base = packet_name(op).rstrip("_")
    by_name: dict[str, list] = {}
    for info in sorted(op_db, key=lambda i: bool(i.variant_test_name)):  # plain variant first
        by_name.setdefault(info.name, []).append(info)
    named = [info for info in op_db
             if info.name.split(".")[-1] == base or getattr(info, "aten_name", None) == base]
    indexed = [info for n in opinfos_reaching(op_name(op)) for info in by_name.get(n, [])]
    unique = {id(info): info for info in named + indexed}  # OpInfo is not hashable
    return list(unique.values())[:MAX_OPINFOS]


def refused_note(refused: dict[str, int], shown: int = 3) -> str:
    """The suite's note on OpInfo samples left out because the OpInfo's own call raised on them."""
    kinds = sorted(refused.items(), key=lambda kv: -kv[1])
    said = "; ".join(f"{count}x {text}" for text, count in kinds[:shown])
    more = f"; and {len(kinds) - shown} other error(s)" if len(kinds) > shown else ""
    return (f"{sum(refused.values())} OpInfo sample(s) left out: the OpInfo's own call raised on them "
            f"({said}{more})")


def _first_line(exc: BaseException) -> str:
    """``TypeError: ...``: an exception as a note names it, its message's first line cut short."""
    text = str(exc).splitlines()[0][:160] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def opinfo_cases(op, device: str, dtypes: tuple[torch.dtype, ...]) -> tuple[list[TestCase], list[str]]:
    notes = []
    try:
        infos = _matching_opinfos(op)
    except RuntimeError as exc:
        return [], [str(exc)]
    if not infos:
        notes.append("no OpInfo entry reaches this operator; OpInfo tests: none")
    cases: list[TestCase] = []
    per_dtype: dict[torch.dtype, int] = {}
    refused: dict[str, int] = {}  # what the OpInfo's variants raised on samples left out, and how often
    for info in infos:
        supported = info.supported_dtypes(torch.device(device).type)
        variants = [v for v in (info.op, info.inplace_variant) if v is not None]
        for dtype in dtypes:
            if dtype not in supported:
                continue
            for sample in info.sample_inputs(device, dtype, requires_grad=False):
                if per_dtype.get(dtype, 0) >= MAX_OPINFO_CASES_PER_DTYPE:
                    break
                checkpoint()  # another evaluation's timing may want the GPU alone
                for variant in variants:
                    capture = _CallCapture(op)
                    try:
                        with capture:
                            variant(clone_value(sample.input), *clone_value(sample.args),
                                    **clone_value(sample.kwargs))
                    except Exception as exc:  # noqa: BLE001 - a sample this variant refuses: counted, said below
                        refused[_first_line(exc)] = refused.get(_first_line(exc), 0) + 1
                        continue
                    for args, kwargs in capture.calls:
                        cases.append(TestCase(
                            id=f"opinfo-{len(cases)}", source=f"opinfo:{info.name}", args=args,
                            kwargs=kwargs, description=describe_call(args, kwargs),
                            dtype=_leading_dtype(args, kwargs, dtype)))
                        per_dtype[dtype] = per_dtype.get(dtype, 0) + 1
    if refused:
        notes.append(refused_note(refused))
    unique = _dedupe(cases)
    for case in unique:
        checkpoint()
        case.refreshable = probe_refresh(op, case)
    return unique, notes


def _leading_dtype(args, kwargs, sampled: torch.dtype) -> str:
    """The dtype aten received (a sample drawn in float16 may reach the op as float64 when the
    OpInfo passes ``dtype=``), so the test is labelled, and cut on CPU, by what really runs."""
    tensors = tensors_in((args, kwargs))
    return str(tensors[0].dtype if tensors else sampled).removeprefix("torch.")


def _dedupe(cases: list[TestCase]) -> list[TestCase]:
    """Drop cases whose description and dtype repeat (OpInfo variants often coincide)."""
    seen, unique = set(), []
    for case in cases:
        key = (case.description, case.dtype)
        if key not in seen:
            seen.add(key)
            unique.append(case)
    return unique


def _output_numel(op, call: TraceCall) -> int:
    """Elements the op produces for a trace call, found on the meta device (no data): an
    index_select of 54,760 rows from a small table writes far more than it reads."""
    try:
        result = op(*materialize(call.args, "meta", None), **materialize(call.kwargs, "meta", None))
    except Exception:  # noqa: BLE001 - no meta kernel: the inputs' size is all we know
        return 0
    return sum(t.numel() for t in tensors_in(result))


def build_suite(op, device: str, seed: int, *, interpreter: bool,
                cpu_max_numel: int = CPU_MAX_NUMEL, extra_traces: dict | None = None,
                channels_last: bool = False) -> Suite:
    """The tests of ``op``. The in-place and ``out=`` overloads of a family get their functional
    overload's tests (``harness.variants.functional_of``) in their own calling convention, plus
    their own traces; overloads without a functional sibling get OpInfo, traces and edge cases.
    ``extra_traces`` (per operator name, ``{"line", "timed"}``) adds a dataset's inputs to the
    trace tests of their operator. ``channels_last`` runs every trace input with a contiguous 4-d
    or 5-d tensor a second time with those tensors channels-last (``harness.layouts``)."""
    functional = functional_of(op)
    extra = extra_traces or {}
    if functional is None or functional is op:
        return _build_suite(op, device, seed, interpreter, cpu_max_numel, extra=extra, channels_last=channels_last)
    base = _build_suite(functional, device, seed, interpreter, cpu_max_numel, extra=extra,
                        channels_last=channels_last)
    is_out = bool(out_arguments(op))
    suite = _out_suite(op, functional, base) if is_out else _inplace_suite(op, functional, base)
    # its own tests too (traces; for an in-place overload also OpInfo samples that reach it, e.g. a
    # random fill with no functional OpInfo), less those that repeat a derived one
    own = _build_suite(op, device, seed, interpreter, cpu_max_numel, traces_only=is_out, extra=extra,
                       channels_last=channels_last)
    tag = "out" if is_out else "inplace"  # ids apart from the functional ones
    derived = {(case.description, case.dtype) for case in base.cases}
    suite.cases += [replace(case, id=f"{tag}-{case.id}") for case in own.cases
                    if (case.description, case.dtype) not in derived]
    suite.skipped += [{**skip, "id": f"{tag}-{skip['id']}"} for skip in own.skipped]
    return suite


# out= tests beyond the result-shaped ones: per layout, this many spread over the functional tests
MAX_OUT_LAYOUT_CASES = 6


def _out_suite(op, functional, base: Suite) -> Suite:
    """Every functional test with ``out`` preallocated in the result's shape; a spread of them
    again with an empty ``out`` and with one of the wrong shape (the kernel must resize it, as
    aten's ``resize_output`` does), and with a non-contiguous ``out`` of the right shape."""
    names = tuple(out_arguments(op))
    shown = ", ".join(names)
    cases = []
    for case in base.cases:
        cases.append(replace(case, out_of=functional, out_names=names,
                             description=f"{case.description} {shown}=<shaped like the result>"))
    for layout, wording in (("empty", "empty, shape [0]"), ("wrong_shape", "of the wrong shape"),
                            ("strided", "non-contiguous")):
        usable = [c for c in base.cases if layout != "strided" or _can_stride_result(functional, c)]
        for position in sorted(spread(len(usable), MAX_OUT_LAYOUT_CASES)):
            case = usable[position]
            cases.append(replace(case, id=f"out_{layout}-{case.id}", out_of=functional, out_names=names,
                                 out_layout=layout, source=f"{case.source}, out= {wording}",
                                 description=f"{case.description} {shown}=<{wording}>"))
    notes = base.notes + [f"out= tests: the tests of {op_name(functional)}, with {shown} preallocated in the "
                          "result's shape and filled with NaN (or the smallest integer); some again with "
                          f"{shown} empty, of the wrong shape (to be resized) and non-contiguous"]
    return Suite(cases=cases, skipped=base.skipped, notes=notes)


def _inplace_suite(op, functional, base: Suite) -> Suite:
    """The functional tests run in place (on a clone of the written argument, as every test
    clones its inputs), where aten accepts them: an in-place add cannot broadcast ``self``
    to a larger shape or cast a float result into an integer ``self``."""
    cases, skipped = [], list(base.skipped)
    for case in base.cases:
        refusal = _inplace_refusal(op, functional, case)
        if refusal:
            skipped.append({"id": case.id, "input": case.description,
                            "reason": f"{op_name(op)} rejects this input of {op_name(functional)} ({refusal})"})
        else:
            cases.append(replace(case, source=f"{case.source}, in place"))
    notes = base.notes + [f"in-place tests: the tests of {op_name(functional)} that {op_name(op)} accepts, "
                          "each on a fresh copy of the written argument (non-contiguous where the functional "
                          "test's input is)"]
    return Suite(cases=cases, skipped=skipped, notes=notes)


def _inplace_refusal(op, functional, case: TestCase) -> str | None:
    """Why aten's in-place overload rejects the case's inputs, or None. Small inputs are tried
    for real; trace inputs on the meta device, where the functional overload works there."""
    if case.trace is None:
        return None if reference_accepts(op, case.args or (), case.kwargs or {}) else "aten raises on it"
    args, kwargs = case.meta_inputs()
    try:
        functional(*clone_value(args), **clone_value(kwargs))
    except Exception:  # noqa: BLE001 - no meta kernel: the run itself will tell
        return None  # no meta kernel: the run itself will tell
    try:
        op(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - what aten raises is the reason returned
        return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    written = [value for _, schema_arg, value in schema_arguments(op, args, kwargs) if is_written(schema_arg)]
    if any(torch._debug_has_internal_overlap(t) == 1 for t in tensors_in(written)):  # not checked on meta
        return "the written argument has elements sharing memory (a stride-0, broadcast layout)"
    return None


def _can_stride_result(functional, case: TestCase) -> bool:
    """Every result tensor has a last dimension of more than one element (so a view of every
    other element of a wider buffer is non-contiguous); found on the meta device."""
    try:
        args, kwargs = case.meta_inputs()
        results = tensors_in(functional(*args, **kwargs))
    except Exception:  # noqa: BLE001 - no meta kernel: no strided out= layout
        return False
    return bool(results) and all(t.dim() > 0 and t.shape[-1] > 1 for t in results)


def _trace_calls(name: str, extra: dict, channels_last: bool = False) -> list[tuple[str, TraceCall, bool]]:
    """(id prefix, call, timed) for the shipped traces of ``name`` and then a dataset's inputs not
    already among them; with ``channels_last``, then each of those again in that layout where it
    has a tensor to change (prefix ``trace-cl``, ``dataset-cl``)."""
    calls = [("trace", call, True) for call in load_calls(name)]
    seen = {call.describe() for _, call, _ in calls}
    for entry in extra.get(name, []):
        try:
            call = parse_call_line(name, entry["line"])
        except TraceFormatError:
            continue
        if call.describe() not in seen:
            seen.add(call.describe())
            calls.append(("dataset", call, bool(entry.get("timed", True))))
    if channels_last:
        for prefix, call, timed in list(calls):
            changed = channels_last_call(call)
            if changed is not None and changed.describe() not in seen:
                seen.add(changed.describe())
                calls.append((prefix + "-cl", changed, timed))
    return calls


def _kept_on_cpu(eligible: list[tuple]) -> set[int]:
    """Positions of the trace inputs the CPU interpreter runs: ``MAX_TRACE_CASES_CPU`` spread over
    the inputs as traced, and as many over their channels-last twins (which add to them, not
    displace them)."""
    kept = set()
    for twins in (False, True):
        members = [position for position, entry in enumerate(eligible) if entry[1].endswith("-cl") == twins]
        kept |= {members[j] for j in spread(len(members), MAX_TRACE_CASES_CPU)}
    return kept


def _build_suite(op, device: str, seed: int, interpreter: bool, cpu_max_numel: int,
                 traces_only: bool = False, extra: dict | None = None, channels_last: bool = False) -> Suite:
    suite = Suite()
    dtypes = SAMPLE_DTYPES
    torch.manual_seed(seed)  # OpInfo's make_tensor draws from the global generator
    cases, notes = ([], []) if traces_only else opinfo_cases(op, device, dtypes)
    suite.notes.extend(notes)
    trace_cases = []
    eligible = []
    numbered = _trace_calls(op_name(op), extra or {}, channels_last)
    calls = [call for _, call, _ in numbered]
    for i, (prefix, call, timed) in enumerate(numbered):
        numel = max(call.numel(), _output_numel(op, call)) if interpreter else 0
        if numel > cpu_max_numel:
            suite.skipped.append({"id": f"{prefix}-{i}", "input": call.describe(), "numel": numel,
                                  "reason": f"over the CPU interpreter budget of {cpu_max_numel} elements"})
        else:
            eligible.append((i, prefix, call, timed))
    kept = _kept_on_cpu(eligible) if interpreter else range(len(eligible))
    for position, (i, prefix, call, timed) in enumerate(eligible):
        description = call.describe()
        trace_id = f"{prefix}-{i}"
        if position not in kept:
            suite.skipped.append({"id": trace_id, "input": description,
                                  "reason": f"CPU interpreter runs at most {MAX_TRACE_CASES_CPU} trace inputs"})
            continue
        specs = call.tensor_specs()
        layout = ", channels-last" if prefix.endswith("-cl") else ""
        source = f"trace (cnt {call.count}{layout})" if prefix.startswith("trace") else \
            f"dataset (cnt {call.count}{layout}{'' if timed else ', correctness only'})"
        trace_cases.append(TestCase(
            id=trace_id, source=source, description=description,
            dtype=specs[0].dtype if specs else "none", trace=call, trace_op=op, seed=seed + i, device=device,
            timed=timed))
    if interpreter:
        suite.notes.append("Triton interpreter (no CUDA): nothing is timed; an autotuner runs each config on some "
                           "tests, none benchmarked")
    checkpoint()
    edge = [] if traces_only else derive_edge_cases(op, cases + trace_cases, TestCase)
    edge += [] if traces_only else derive_promotion_cases(op, cases + trace_cases, TestCase, reference_accepts,
                                                              calls)
    edge += [] if traces_only else derive_integer_extreme_cases(op, cases + trace_cases, TestCase,
                                                                reference_accepts_cpu_first)
    for case in cases + trace_cases + edge:
        if interpreter and case.dtype == "bfloat16":
            suite.skipped.append({"id": case.id, "input": case.description,
                                  "reason": "bfloat16 under the Triton CPU interpreter is unreliable; runs on GPU"})
        else:
            suite.cases.append(case)
    return suite
