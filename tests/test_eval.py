"""`bbagent eval --json` on correct, wrong, cheating and faulty kernels (CPU, Triton interpreter)."""
import json

import pytest

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


def test_autotuned_kernel_passes_its_launches_are_seen(capsys):
    code, verdict = run_eval(capsys, "relu_autotuned.py")
    assert code == 0, verdict["failure_groups"]


def test_identity_kernel_fails_with_mismatch_details(capsys):
    code, verdict = run_eval(capsys, "relu_identity.py")
    assert code == 1 and verdict["verdict"] == "fail"
    group = verdict["failure_groups"][0]
    assert group["error_kind"] == "mismatch"
    example = group["example"]
    first = example["mismatches"][0]
    assert first["expected"] == 0.0 and first["actual"] < 0
    assert example["max_abs_error"] > 0


def test_torch_relu_without_triton_is_rejected(capsys):
    code, verdict = run_eval(capsys, "relu_torch.py")
    assert code == 1
    assert {g["error_kind"] for g in verdict["failure_groups"]} == {"guard"}
    finding = verdict["guard_findings"][0]
    assert finding["op"] == "aten.relu.default" and finding["line"] == 6


def test_hanging_kernel_times_out(capsys):
    code, verdict = run_eval(capsys, "sleep_forever.py", "--timeout", "15")
    assert code == 1
    assert verdict["error_kind"] == "timeout"
    assert "timed out after 15 s" in verdict["message"]
    assert verdict["timings"]["wall_s"] < 40


@pytest.mark.parametrize("kernel, kind, words", [
    ("raises.py", "exception", "deliberate failure in the wrapper"),
    ("syntax_error.py", "import_error", "SyntaxError"),
    ("no_entry_point.py", "missing_entry_point", "kernel"),
    ("segfault.py", "crash", "SIGSEGV"),
])
def test_faults_give_the_real_cause(capsys, kernel, kind, words):
    code, verdict = run_eval(capsys, kernel)
    assert code == 1
    kinds = {verdict["error_kind"]} | {g["error_kind"] for g in verdict["failure_groups"]}
    assert kind in kinds
    text = verdict["message"] + " ".join(g["example"]["message"] for g in verdict["failure_groups"])
    assert words in text


def test_printing_a_fake_verdict_does_not_pass(capsys):
    code, verdict = run_eval(capsys, "forged_stdout.py")
    assert code == 1 and verdict["failure_groups"][0]["error_kind"] == "mismatch"


def test_missing_kernel_file_is_a_usage_error(capsys, tmp_path):
    code = main(["eval", "--op", "aten.relu.default", "--kernel", str(tmp_path / "nope.py")])
    assert code == 2
    assert "kernel file not found" in capsys.readouterr().out
