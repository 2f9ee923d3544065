"""`bbagent eval --json` through the CLI: a full passing verdict and a mismatch report.
The wrong, cheating and faulty kernels are judged in test_corpus.py."""
import json

from bbagent.cli import main
from bbagent.harness.suite.budget import CPU_MAX_NUMEL
from conftest import KERNELS


def run_eval(capsys, kernel, *extra):
    code = main(["eval", "--op", "aten.relu.default", "--kernel", str(KERNELS / kernel), "--json",
                 "--timeout", "120", *extra])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_correct_triton_relu_passes(capsys):
    code, verdict = run_eval(capsys, "relu_triton.py", "--seed", "7")
    assert code == 0 and verdict["verdict"] == "pass"
    assert verdict["seed"] == 7
    s = verdict["summary"]
    assert s["failed"] == 0 and s["passed"] == s["total"] >= 8
    sources = {t["source"].split(":")[0].split(" ")[0] for t in verdict["tests"]}
    assert sources == {"opinfo", "trace", "edge", "promotion"}
    edge_rules = {t["source"].split(" ")[0] for t in verdict["tests"] if t["source"].startswith("edge")}
    assert edge_rules >= {"edge:nan_inf", "edge:large", "edge:non_contiguous", "edge:zero_size", "edge:permuted_values",
                          "edge:non_negative", "edge:all_zero", "edge:constant", "edge:nan_inf_dim_0_size_1"}
    # the kernel as it runs: its launches make its result, and hundreds of calls in a row stay right
    checks = {c["check"]: c for c in verdict["in_use"]}
    assert set(checks) == {"launch_replay", "repeated_calls"}  # the CUDA graph check needs a GPU
    assert all(c["passed"] for c in checks.values()) and checks["repeated_calls"]["calls"] >= 100
    assert not any(c["source"].startswith(("edge", "promotion")) for c in verdict["tests"] if c["id"] == checks["launch_replay"]["id"])
    assert {"int32", "int64"} <= {t["dtype"] for t in verdict["tests"]}
    # The CPU path says what it did not run, and why.
    assert verdict["environment"]["interpreter"] is True
    assert any("CPU interpreter budget" in s["reason"] and s["numel"] > CPU_MAX_NUMEL for s in verdict["skipped"])
    assert any("bfloat16" in s["reason"] for s in verdict["skipped"])
    assert len(verdict["kernel"]["sha256"]) == 64


def test_identity_kernel_fails_with_mismatch_details(capsys):
    code, verdict = run_eval(capsys, "relu_identity.py")
    assert code == 1 and verdict["verdict"] == "fail"
    group = verdict["failure_groups"][0]
    assert group["error_kind"] == "mismatch"
    example = group["example"]
    first = example["mismatches"][0]
    assert first["expected"] == 0.0 and first["actual"] < 0
    assert example["max_abs_error"] > 0


def test_missing_kernel_file_is_a_usage_error(capsys, tmp_path):
    code = main(["eval", "--op", "aten.relu.default", "--kernel", str(tmp_path / "nope.py")])
    assert code == 2
    assert "nope.py: no such file" in capsys.readouterr().err


def _emitted_error_kinds() -> set[str]:
    """Every error kind the harness's code can put into a Verdict, read from its source: values of
    ``error_kind=`` keywords and ``"error_kind":`` keys, ``_fail(kind, ...)`` and ``Failure(kind, ...)``, what the functions that
    name a failure's kind return (``candidate_error_kind``, ``_stop_cause``, the audit guard's
    judgements), and the sandbox limits (``outcome.limit = kind``)."""
    import ast
    from bbagent.harness.evaluate import PROJECT_ROOT

    kinds = set()

    def strings(node):
        """The kinds an expression can evaluate to: a string, either branch of a conditional,
        the first item of a `(kind, message)` tuple."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.IfExp):
            return strings(node.body) | strings(node.orelse)
        if isinstance(node, ast.Tuple) and node.elts:
            return strings(node.elts[0])
        return set()
    for path in (PROJECT_ROOT / "harness").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "error_kind":
                kinds |= strings(node.value)
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if isinstance(key, ast.Constant) and key.value == "error_kind":
                        kinds |= strings(value)
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("_fail", "Failure") and node.args:
                kinds |= strings(node.args[0])
            elif isinstance(node, ast.FunctionDef) and node.name in ("candidate_error_kind", "_stop_cause", "judge",
                                                                       "_judge_write"):
                for ret in (n for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None):
                    kinds |= strings(ret.value)
            elif isinstance(node, ast.Assign) and any(_names_a_kind(t) for t in node.targets):
                kinds |= strings(node.value)
    return kinds - {"error_kind"}


def _names_a_kind(target) -> bool:
    """`outcome.limit = ...`, `error_kind = ...`, `x["error_kind"] = ...`, first of a tuple of those."""
    import ast
    if isinstance(target, ast.Tuple) and target.elts:
        return _names_a_kind(target.elts[0])
    text = ast.unparse(target)
    return text in ("outcome.limit", "error_kind") or text.endswith("['error_kind']")


def test_every_error_kind_the_harness_emits_is_declared():
    from bbagent.harness.error_kinds import ERROR_KINDS
    emitted = _emitted_error_kinds()
    assert len(emitted) > 25  # the scan sees the code, not an empty set
    assert {"timing_mismatch", "reference_error", "network", "host_oom", "import_error", "crash", "output_flood",
            "mutation_mismatch", "no_tests"} <= emitted
    assert emitted <= set(ERROR_KINDS), emitted - set(ERROR_KINDS)


def test_a_verdict_round_trips_through_its_model_and_schema(capsys):
    from bbagent.harness.verdict import Verdict
    code, verdict = run_eval(capsys, "relu_identity.py")
    assert code == 1
    model = Verdict.model_validate(verdict)
    assert model.failure_groups[0].example.mismatches[0].expected == 0.0
    assert Verdict.model_validate_json(model.model_dump_json()) == model
    assert main(["schema", "verdict"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "Verdict" and "failure_groups" in schema["properties"]
    kinds = schema["$defs"]["TestResult"]["properties"]["error_kind"]["anyOf"][0]["enum"]
    assert "timing_mismatch" in kinds and "mismatch" in kinds
