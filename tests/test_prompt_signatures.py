"""The `kernel(...)` signature every prompt asks for binds every call its tests make, and each
argument arrives as the prompt says it does.

For each overload `bbagent ops` lists: render the prompt, take its `def kernel(...)` line,
define a stub with it, and call the stub with the arguments of every test of the overload's
suite (as built for a GPU: every trace call, not the CPU interpreter's cut). Derived edge
cases (integer extremes among them) and the in-place refusal probe are left out: edge cases
replace tensors by tensors in the same positions of their base case, and the probe only drops cases, so neither changes
how a call binds; both fork a process per case and would make this test several times slower.
Type-promotion cases are kept, but every one the rules derive is checked, without asking the
reference whether it accepts it (that forks a process per candidate case too): a superset of
the calls the suite makes.
"""
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import bbagent.harness.suite.build as suite_module
from bbagent.harness.problem import operator_problem
from bbagent.agent.generate.prompting import render_prompt
from bbagent.agent.generate.signature import parameters
from bbagent.harness.coverage import list_ops
from bbagent.harness.ops import UnknownOpError, resolve_op
from bbagent.harness.traces import DtypeRef, NamedConstant, TensorSpec

CHUNKS = 12  # the overloads are split so that pytest-xdist spreads them over its workers


def _fits(kind: str, value) -> bool:
    """Whether ``value`` is what the prompt's words for ``kind`` promise (a TensorSpec is a
    trace's tensor, a DtypeRef/NamedConstant a trace's dtype or layout constant)."""
    if kind.startswith("Optional["):
        return value is None or _fits(kind[len("Optional["):-1], value)
    if kind.startswith("List["):
        return isinstance(value, (list, tuple)) and all(_fits(kind[len("List["):-1], v) for v in value)
    checks = {
        "Tensor": lambda v: isinstance(v, (torch.Tensor, TensorSpec)),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, float),
        "bool": lambda v: isinstance(v, bool),
        "number": lambda v: isinstance(v, (int, float)),
        "str": lambda v: isinstance(v, str),
        "ScalarType": lambda v: isinstance(v, (torch.dtype, DtypeRef)),
        "Layout": lambda v: isinstance(v, (torch.layout, NamedConstant)),
        "MemoryFormat": lambda v: isinstance(v, (torch.memory_format, NamedConstant)),
        "Device": lambda v: isinstance(v, (torch.device, str)),
        "Generator": lambda v: isinstance(v, torch.Generator),
    }
    return checks.get(kind.replace("SymInt", "int"), lambda v: False)(value)


def _call_of(case, op):
    """The arguments a test of ``op`` passes to the kernel, without drawing its tensors."""
    args, kwargs = (case.trace.args, dict(case.trace.kwargs)) if case.trace is not None \
        else (case.args, dict(case.kwargs))
    if case.out_of is not None:
        kinds = {a.name: str(a.real_type) for a in op._schema.arguments}
        for name in case.out_names:  # the out= tensors the suite adds (a list for Tensor(a!)[] out)
            kwargs[name] = [torch.empty(0)] if kinds.get(name, "").startswith("List") else torch.empty(0)
    return args, kwargs


def _listed_overloads() -> list[str]:
    names = []
    for row in list_ops("all"):
        try:
            resolve_op(row["op"])
        except UnknownOpError:  # listed for its missing tests (gone from this torch): no prompt
            continue
        names.append(row["op"])
    return names


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_every_prompt_signature_binds_every_test_call(chunk, monkeypatch):
    monkeypatch.setattr(suite_module, "derive_edge_cases", lambda *args, **kwargs: [])
    monkeypatch.setattr(suite_module, "derive_integer_extreme_cases", lambda *args, **kwargs: [])
    monkeypatch.setattr(suite_module, "_inplace_refusal", lambda *args, **kwargs: None)
    monkeypatch.setattr(suite_module, "reference_accepts", lambda *args, **kwargs: True)
    names = _listed_overloads()
    assert len(names) > 1000
    # OpInfo's sample iterators call inspect.stack(), whose cost grows with the caller's stack
    # depth and sys.modules: under pytest that made this test four times slower than the same
    # work in a thread of its own, whose stack starts here.
    with ThreadPoolExecutor(max_workers=1) as pool:
        problems, calls = pool.submit(_check_signatures, names[chunk::CHUNKS]).result()
    assert not problems, "\n".join(problems[:30])
    assert calls > 500


def _check_signatures(names: list[str]) -> tuple[list[str], int]:
    """Problems found (unbindable calls, arguments that arrive otherwise than the prompt says)
    and the number of calls tried."""
    problems, calls = [], 0
    for name in names:
        op = resolve_op(name)
        prompt = render_prompt(problem(name))
        line = re.search(r"^ *def kernel\((.*)\):$", prompt, re.MULTILINE)
        assert line, f"{name}: no 'def kernel(...):' line in the prompt"
        namespace = {}
        exec(f"def kernel({line.group(1)}):\n    return dict(locals())", {"torch": torch}, namespace)
        stub = namespace["kernel"]
        suite = suite_module.build_suite(op, "cpu", 0, interpreter=False)
        params = parameters(op)
        says_number = {p.name for p in params
                       if re.search(rf"^ *- `{re.escape(p.name)}` \(.*a Python number instead", prompt, re.MULTILINE)}
        for case in suite.cases:
            args, kwargs = _call_of(case, op)
            try:
                bound = stub(*args, **kwargs)
            except TypeError as exc:
                problems.append(f"{name} {case.id} ({case.description[:80]}): {exc}")
                continue
            calls += 1
            for p in params:
                value = bound[p.name]
                if (value is None and p.default == "None") or _fits(p.kind, value) \
                        or (p.name in says_number and isinstance(value, (int, float))):
                    continue
                problems.append(f"{name} {case.id}: `{p.name}` arrives as {value!r}; the prompt says "
                                f"{p.arrives_as!r}")
    return problems, calls


def problem(name: str):
    """The problem of ``name`` alone (as ``generate --exact-overload`` asks for it)."""
    return operator_problem(name, exact_overload=True)
