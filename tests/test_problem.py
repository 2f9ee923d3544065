"""The Problem and the EvaluationRequest: an operator's name is resolved once on each side of the
process boundary (issue 61), and what crosses it is the problem's wire form."""
import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from conftest import KERNELS
from bbagent.harness import ops
from bbagent.harness.problem import OperatorProblem, operator_problem, problem_to_test, served_problem
from bbagent.harness.request import EvaluationRequest

RELU_FAMILY = ["aten.relu.default", "aten.relu_.default", "aten.relu.out"]


def test_generate_asks_for_the_functional_overload_and_serves_the_family():
    problem = operator_problem("aten.relu_.default")
    assert (problem.name, problem.names, problem.written_for_name) == ("aten.relu.default", RELU_FAMILY,
                                                                       "aten.relu.default")
    assert problem.requested == "aten.relu_.default" and problem.also_serves == RELU_FAMILY[1:]
    exact = operator_problem("aten.relu_.default", exact_overload=True)
    assert exact.names == ["aten.relu_.default"] and exact.written_for is exact.computation


def test_a_given_kernel_is_tested_first_on_its_own_overload():
    problem = problem_to_test("aten.relu_.default", family=True).written_as("aten.relu.default")
    assert problem.names == RELU_FAMILY and problem.written_for_name == "aten.relu.default"
    inplace = problem_to_test("aten.relu_.default", family=True)  # written for itself until said otherwise
    assert inplace.names[0] == inplace.written_for_name == "aten.relu_.default"
    alone = problem_to_test("aten.relu.out")
    assert alone.names == ["aten.relu.out"] and alone.written_for_name == "aten.relu.out"
    from bbagent.harness.adapters import AdapterError
    with pytest.raises(AdapterError):  # an in-place kernel cannot serve the functional overload
        inplace.written_as("aten.relu_.default")
    with pytest.raises(ops.UnknownOpError, match="did you mean"):
        problem_to_test("aten.relu.defualt")


def test_the_wire_form_is_plain_data_and_comes_back_the_same():
    problem = operator_problem("aten.add.Tensor")
    wire = json.loads(json.dumps(problem.to_wire()))
    assert wire == {"kind": "operator", "key": "aten.add.Tensor", "serves": ["aten.add.Tensor", "aten.add_.Tensor", "aten.add.out"],
                    "written_for": "aten.add.Tensor", "requested": "aten.add.Tensor"}
    assert OperatorProblem.from_wire(wire) == problem
    assert served_problem("aten.add.Tensor", wire["serves"]) == problem
    with pytest.raises(ValueError, match="not an operator problem"):
        OperatorProblem.from_wire({**wire, "kind": "program"})
    request = EvaluationRequest.of(problem, device="cpu", seed=3)
    again = EvaluationRequest.from_wire(json.loads(json.dumps(request.to_wire("2.13.0"))), "cpu")
    assert again == request


class Counted:
    """``ops.resolve_op`` counted per name, wherever a module bound it."""

    def __init__(self, monkeypatch):
        self.calls: list[str] = []
        original = ops.resolve_op

        def counting(name: str):
            self.calls.append(name)
            return original(name)
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("bbagent") and getattr(module, "resolve_op", None) is original:
                monkeypatch.setattr(module, "resolve_op", counting)


def test_each_kind_of_problem_and_of_child_work_is_behind_its_type():
    """One registry per side names the kinds: a problem's behaviour is read from its class (the
    baseline its speed is measured against, whether a suite is built ahead, its one name), and a
    Job's work comes back from the wire as the same typed work."""
    from bbagent.harness.problem import KINDS, ProgramProblem, kind_named, problem_from_wire
    from bbagent.harness.sandbox.job import BuildSuite, CompiledBaseline, Job, NcuProfile, Tests
    assert set(KINDS) == {"operator", "program"}
    program = ProgramProblem(path="/x/level1/19_ReLU.py", text="...", level=1)
    assert (program.key, program.name, program.names, program.overloads) == ("kernelbench/level1/19_ReLU", "19_ReLU",
                                                                             [], {})
    assert program.cache_key.startswith("kernelbench/level1/19_ReLU@") and program.requested == "/x/level1/19_ReLU.py"
    assert problem_from_wire(json.loads(json.dumps(program.to_wire()))) == program
    operator = operator_problem("aten.relu.default")
    assert operator.key == operator.cache_key == operator.to_wire()["key"] == "aten.relu.default"
    assert (kind_named("operator").default_baseline, kind_named("program").default_baseline) == ("eager", "inductor")
    assert kind_named("operator").suite_ahead and not kind_named("program").suite_ahead
    with pytest.raises(ValueError, match="no problem kind 'region'"):
        kind_named("region")
    for work in (Tests(timing={"target_ms": 5.0}), Tests(), BuildSuite(), NcuProfile(ids=["a", "b"]),
                 CompiledBaseline(compile_mode="default", target_ms=20.0, shapes=[{"input": None, "mode": "graph"}])):
        job = Job(problem=operator.to_wire(), kernel="k.py", seed=1, device="cpu", workdir="/w", work=work)
        again = Job.from_wire(job.to_wire())
        assert again == job and type(again.work) is type(work) and again.op == "aten.relu.default"
    assert Job(problem=operator.to_wire(), kernel="", seed=1, device="cpu", workdir="",
               work=Tests(timing={"x": 1})).timing == {"x": 1}
    assert Job(problem=operator.to_wire(), kernel="", seed=1, device="cpu", workdir="", work=BuildSuite()).timing is None


def test_every_kind_is_registered_on_every_side_and_a_stored_kernel_asks_its_kind(tmp_path):
    """A new kind is a class per table: the harness's, the child's and the stored kernels' name the
    same kinds, and what serving and loading read of a stored kernel comes from its kind."""
    from bbagent.agent.errors import UsageError
    from bbagent.agent.review.kinds import STORED_KINDS
    from bbagent.agent.review.meta import ProgramSource
    from bbagent.harness.problem import KINDS
    from bbagent.harness.sandbox.child.worker import JOBS_BY_KIND
    assert set(STORED_KINDS) == set(KINDS) == set(JOBS_BY_KIND)
    operator = SimpleNamespace(op="aten.relu.default", serves=["aten.relu.default", "aten.relu_.default"], program=None)
    program = SimpleNamespace(op="kernelbench/level1/19_ReLU", serves=["kernelbench/level1/19_ReLU"],
                              program=ProgramSource(path=str(tmp_path / "19_ReLU.py"), name="19_ReLU", level=1,
                                                    sha256="0" * 64))
    assert STORED_KINDS["operator"].overloads(operator) == ["aten.relu.default", "aten.relu_.default"]
    assert STORED_KINDS["program"].overloads(program) == []  # a ModelNew is loaded, never served as an overload
    assert STORED_KINDS["program"].answered(program).name == "19_ReLU"
    with pytest.raises(UsageError, match="an operator's kernel, not a program's answer"):
        STORED_KINDS["operator"].answered(operator)
    kept = SimpleNamespace(folder=tmp_path, meta=program)
    assert STORED_KINDS["program"].region(kept) is None  # a KernelBench problem not at hand: nothing to compile
    with pytest.raises(UsageError, match="is not at hand"):
        STORED_KINDS["program"].kept_text(kept)


def test_generate_resolves_the_operators_name_once_in_the_parent(tmp_path, monkeypatch, no_keys):
    """From ``bbagent generate --op`` to the accepted kernel (two rounds, two Verdicts), the parent
    resolves the name given once; the overloads it serves come from the schemas. (The shipped
    listing, ``bbagent ops``, resolves every overload it lists once per process: read first.)"""
    from bbagent.agent.api.cli import main
    from bbagent.agent.generate.testable import listed_without_tests
    listed_without_tests(["aten.relu.default"])  # the catalogue, read once per process
    counted = Counted(monkeypatch)
    assert main(["generate", "--op", "aten.relu_.default", "--provider", "replay", "--root", str(tmp_path)]) == 0
    assert counted.calls == ["aten.relu_.default"]


CHILD = textwrap.dedent("""
    import sys
    from bbagent.harness import ops
    calls, original = [], ops.resolve_op
    def counting(name):
        calls.append(name)
        return original(name)
    ops.resolve_op = counting
    from bbagent.harness.sandbox.child.worker import main
    code = main(sys.argv[1:])
    print("resolved:", ",".join(calls), file=sys.stderr)
    sys.exit(code)
""")


def test_the_child_resolves_its_problem_once(tmp_path):
    """A cold child (the worker run as a fresh interpreter, as the sandbox starts one) reads the
    problem's wire form and resolves the computation's name alone, before its first test."""
    from bbagent.harness import events
    from bbagent.harness.sandbox.parent.environment import base_env, triton_cache_dir
    from bbagent.harness.sandbox.parent.run import child_env
    request = EvaluationRequest.of(operator_problem("aten.relu_.default"), device="cpu", seed=1)
    (tmp_path / "candidate.py").write_text((KERNELS / "relu_triton.py").read_text())
    job = request.job(tmp_path, [str(triton_cache_dir())])
    read, write = os.pipe()
    env = child_env(base_env("cpu"), tmp_path)
    child = subprocess.Popen([sys.executable, "-c", CHILD, "--job", job.to_wire(), "--result-fd", str(write)],
                             env=env, pass_fds=(write,), stderr=subprocess.PIPE, cwd=tmp_path, text=True)
    os.close(write)
    with os.fdopen(read) as channel:
        received = [events.decode(line) for line in channel if line.strip()]
    _, stderr = child.communicate(timeout=600)
    assert child.returncode == 0, stderr[-2000:]
    results = [e for e in received if isinstance(e, events.CaseResult)]
    assert results and all(e.record["passed"] for e in results)
    assert events.first(received, events.Done) is not None
    assert "resolved: aten.relu.default\n" in stderr
