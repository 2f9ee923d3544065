"""`bbagent eval --json` through the CLI: a full passing verdict and a mismatch report.
The wrong, cheating and faulty kernels are judged in test_corpus.py."""
import json

from agent.cli import main
from harness.budget import CPU_MAX_NUMEL
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
    assert sources == {"opinfo", "trace", "edge"}
    edge_rules = {t["source"].split(" ")[0] for t in verdict["tests"] if t["source"].startswith("edge")}
    assert edge_rules == {"edge:nan_inf", "edge:large", "edge:non_contiguous", "edge:zero_size", "edge:permuted_values"}
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
