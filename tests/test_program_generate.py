"""`bbagent generate --problem`: a program problem answered through the real OpenAI SDK against the
fake server, judged on the CPU under the Triton interpreter; then the accepted answer reviewed,
exported in KernelBench's layout and loaded back with `bbagent.load_program`."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bbagent.cli import main
from conftest import PYTHONPATH, dies_with_parent
from fake_llm import FakeLLMServer

PROBLEMS = Path(__file__).parent / "problems"
ANSWERS = PROBLEMS / "answers"
RELU = PROBLEMS / "level1" / "1_ReLU.py"
KEY = "kernelbench/level1/1_ReLU"


def fenced(answer: str) -> str:
    return f"Here is ModelNew.\n\n```python\n{(ANSWERS / f'{answer}.py').read_text()}```\n"


def test_a_program_fails_round_one_on_signed_inputs_and_is_accepted_in_round_two(tmp_path, monkeypatch, no_keys,
                                                                                  capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer().answer(fenced("relu_copy"), fenced("relu_right")) as server:
        code = main(["generate", "--problem", str(RELU), "--rounds", "3", "--provider", "openai", "--model", "gpt-test",
                     "--base-url", server.url + "/v1", "--root", str(tmp_path), "--device", "cpu", "--seed", "7",
                     "--timeout", "120"])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert len(server.requests) == 2
    first = server.requests[0]["body"]["messages"][0]["content"]
    assert "class ModelNew" in first and "return torch.relu(x)" in first  # the contract and the reference's source
    feedback = server.requests[1]["body"]["messages"][-1]["content"]
    assert "mismatch in 3 draws" in feedback and "smaller" in feedback and "signed inputs (standard normal)" in feedback, feedback

    runs = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert len(runs) == 1 and "kernelbench-level1-1_ReLU" in runs[0].name
    run = json.loads((runs[0] / "run.json").read_text())
    assert run["op"] == KEY and run["prompt_template"] == "program.j2"
    # no suite to build ahead: no child started for it (one used to, holding the GPU share for nothing)
    assert run["suite_ahead"]["outcome"].startswith("not built (a program has no suite") and \
        run["suite_ahead"]["seconds"] < 1, run["suite_ahead"]
    assert [r["outcome"] for r in run["rounds"]] == ["fail", "pass"]

    accepted = tmp_path / "generated_kernels" / KEY
    assert (accepted / "kernel.py").read_text() == (ANSWERS / "relu_right.py").read_text()
    meta = json.loads((accepted / "meta.json").read_text())
    assert meta["problem_kind"] == "program" and meta["program"]["level"] == 1 and meta["program"]["name"] == "1_ReLU"
    assert meta["tests"]["passed"] == meta["tests"]["total"] == 4 and meta["review"]["status"] == "needs_review"

    # reviewed like a kernel: listed, and exported only once approved (unless asked otherwise)
    assert main(["review", "list", "--json", "--root", str(tmp_path)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [row["op"] for row in listed] == [KEY]
    out = tmp_path / "kb-run"
    assert main(["export", "--kernelbench", str(out), "--root", str(tmp_path)]) == 1
    assert "no approved version" in capsys.readouterr().err and not out.exists()
    assert main(["review", "approve", KEY, "--root", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["export", "--kernelbench", str(out), "--root", str(tmp_path), "--json"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert [row["file"] for row in exported["written"]] == ["level1/level_1_problem_1_sample_0_kernel.py"]
    assert (out / "level1" / "level_1_problem_1_sample_0_kernel.py").read_text() == (accepted / "kernel.py").read_text()
    results = json.loads((out / "bbagent-level1" / "eval_results.json").read_text())  # KernelBench's format
    assert results == {"1": [{**results["1"][0], "sample_id": 0, "compiled": True, "correctness": True,
                              "runtime": -1.0}]}  # CPU: not timed
    # the first round's answers as samples, wrong ones included: round 1 copied its input
    assert main(["export", "--kernelbench", str(tmp_path / "kb-first"), "--samples", "first-round", "--root",
                 str(tmp_path), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert [(row["sample"], row["passed"]) for row in first["written"]] == [(0, False)]
    [sample] = json.loads((tmp_path / "kb-first" / "bbagent-level1" / "eval_results.json").read_text())["1"]
    assert sample["correctness"] is False and sample["compiled"] is True and sample["runtime"] == -1.0
    passed, total = map(int, sample["metadata"]["tests_passed"].split("/"))
    assert passed < total and "mismatch" in sample["metadata"]["error"], sample

    # loaded back as KernelBench runs it: ModelNew(*get_init_inputs()) holding Model's weights; the problem
    # file edited since is refused; enable() serves no aten overload with it
    edited = tmp_path / "level1" / "1_ReLU.py"
    edited.parent.mkdir()
    edited.write_text(RELU.read_text().replace("dim = 512", "dim = 256"))
    script = f"""
import torch, bbagent
from bbagent.harness.interface import program_module, program_problem
ModelNew = bbagent.load_program({str(RELU)!r}, root={str(tmp_path)!r}, device="cpu")
problem = program_module(program_problem({str(RELU)!r}))
reference, answer = problem.Model(*problem.get_init_inputs()), ModelNew(*problem.get_init_inputs())
answer.load_state_dict(reference.state_dict())
x = torch.randn(16, 512)
assert torch.equal(answer(x), reference(x)), "the loaded answer differs"
assert bbagent.load_program({KEY!r}, root={str(tmp_path)!r}, device="cpu") is not None
try:
    bbagent.load_program({str(edited)!r}, root={str(tmp_path)!r}, device="cpu")
except bbagent.UsageError as exc:
    print("refused:", exc)
print("served:", dict(bbagent.enable(root={str(tmp_path)!r}, device="cpu").served))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": PYTHONPATH, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "text has changed" in done.stdout
    assert "served: {}" in done.stdout


def test_generate_refuses_a_file_that_is_no_problem_and_operator_only_flags(tmp_path, capsys):
    assert main(["generate", "--problem", str(PROBLEMS / "broken" / "no_model.py"), "--provider", "replay",
                 "--root", str(tmp_path)]) == 2
    assert "KernelBench's format" in capsys.readouterr().err
    assert main(["generate", "--problem", str(RELU), "--provider", "replay", "--channels-last",
                 "--root", str(tmp_path)]) == 2
    assert "--channels-last applies to an operator" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:  # argparse: one of --op and --problem
        main(["generate", "--problem", str(RELU), "--op", "aten.relu.default", "--root", str(tmp_path)])
    assert exited.value.code == 2 and "not allowed with" in capsys.readouterr().err


def _kernelbench(tmp_path) -> Path:
    """A KernelBench checkout's layout holding three of the tests' problems, and a file that is none."""
    checkout = tmp_path / "KernelBench-checkout"
    for level, names in (("level1", ("1_ReLU", "4_Softmax")), ("level2", ("1_Gemm_ReLU_BiasAdd",))):
        folder = checkout / "KernelBench" / level
        folder.mkdir(parents=True)
        for name in names:
            (folder / f"{name}.py").write_text((PROBLEMS / level / f"{name}.py").read_text())
    (checkout / "KernelBench" / "level1" / "9_Not_a_problem.py").write_text("x = 1\n")
    return checkout


def test_a_kernelbench_checkout_is_chosen_by_level_and_number():
    from bbagent import UsageError
    from bbagent.agent.batch.start import Choice, choose_ops
    import tempfile
    with tempfile.TemporaryDirectory() as scratch:
        checkout = _kernelbench(Path(scratch))
        chosen = choose_ops(Choice(kernelbench=checkout))
        assert chosen.ops == ["kernelbench/level1/1_ReLU", "kernelbench/level1/4_Softmax",
                              "kernelbench/level2/1_Gemm_ReLU_BiasAdd"]
        assert "KernelBench's format" in chosen.skipped["kernelbench/level1/9_Not_a_problem"]
        assert choose_ops(Choice(kernelbench=checkout, level="1", problems="2-4,9")).ops == \
            ["kernelbench/level1/4_Softmax"]
        for wrong, says in ((dict(level="3"), "has no level 3"), (dict(problems="4-2"), "no range"),
                            (dict(problems="x"), "numbers and ranges"), (dict(problems="50"), "no problem")):
            with pytest.raises(UsageError, match=says):
                choose_ops(Choice(kernelbench=checkout, **wrong))
        with pytest.raises(UsageError, match="choose the operators one way"):
            choose_ops(Choice(kernelbench=checkout, ops=["aten.relu.default"]))
        with pytest.raises(UsageError, match="no such folder"):
            choose_ops(Choice(kernelbench=Path(scratch) / "nowhere"))


@pytest.mark.slow
def test_a_kernelbench_batch_killed_in_the_middle_resumes_and_answers_each_problem_once(tmp_path, no_keys):
    import os
    import signal
    import time
    checkout = _kernelbench(tmp_path)
    answers = {"`1_ReLU`": fenced("relu_right"), "`4_Softmax`": fenced("softmax_right"),
               "`1_Gemm_ReLU_BiasAdd`": fenced("gemm_relu_bias_right")}
    keys = ["kernelbench/level1/1_ReLU", "kernelbench/level1/4_Softmax", "kernelbench/level2/1_Gemm_ReLU_BiasAdd"]
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "OPENAI_API_KEY": "sk-test"}

    def batch(server, *args):
        return subprocess.Popen([sys.executable, "-m", "bbagent", "batch", "--provider", "openai", "--model", "gpt-test",
                                 "--base-url", server.url + "/v1", "--root", str(tmp_path), "--device", "cpu",
                                 "--timeout", "120", "--seed", "7", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
                                preexec_fn=dies_with_parent)

    def rows():
        from bbagent.agent.batch.ledger import Ledger
        found = sorted((tmp_path / "runs").glob("batch-*/ledger.sqlite"))
        return Ledger(found[-1]).rows() if found else []

    with FakeLLMServer().answer_by_op(answers).latency(2.0) as server:
        first = batch(server, "--kernelbench", str(checkout), "--jobs", "1")
        deadline = time.monotonic() + 240
        while not (sum(r["state"] == "accepted" for r in rows()) >= 1 and any(r["state"] == "running" for r in rows())):
            assert time.monotonic() < deadline and first.poll() is None, first.communicate()
            time.sleep(0.2)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        done_before = {r["op"] for r in rows() if r["state"] == "accepted"}
        batch_id = sorted((tmp_path / "runs").glob("batch-*"))[-1].name
        resumed = batch(server, "--resume", batch_id)
        out, err = resumed.communicate(timeout=400)
    assert resumed.returncode == 0, out + err
    ledger = {r["op"]: r for r in rows()}
    assert [op for op in keys if ledger[op]["state"] == "accepted"] == keys
    assert ledger["kernelbench/level1/9_Not_a_problem"]["state"] == "skipped"
    events = [json.loads(line) for line in (tmp_path / "runs" / batch_id / "events.jsonl").read_text().splitlines()]
    begun = [e["op"] for e in events if e["event"] == "op_start"]
    assert all(begun.count(op) == 1 for op in done_before) and sorted(set(begun)) == sorted(keys), begun
    for key in keys:
        meta = json.loads((tmp_path / "generated_kernels" / key / "meta.json").read_text())
        assert meta["problem_kind"] == "program" and meta["op"] == key
    summary = json.loads((tmp_path / "runs" / batch_id / "summary.json").read_text())
    levels = summary["kernelbench_levels"]  # the file that is no problem: skipped, counted apart
    assert levels["level1"] == {**levels["level1"], "problems": 2, "skipped": 1, "correct": 2, "untimed": 2}
    assert levels["level1"]["fast_p_eager"]["0"] == 1 and levels["level1"]["fast_p_eager"]["1"] is None  # CPU: untimed
    assert levels["level2"] == {**levels["level2"], "problems": 1, "skipped": 0, "correct": 1}
    assert "## KernelBench problems by level" in (tmp_path / "runs" / batch_id / "summary.md").read_text()
    from bbagent.agent.reports.html import write_report
    report = write_report(tmp_path, batch_id).read_text()  # the HTML report groups them by level too
    assert "<h2>KernelBench problems by level</h2>" in report and "<td>level2</td>" in report
    # each problem's row names its level, and the pass rates by family are by level for problems
    assert report.count("<td>KernelBench level1</td>") == 2 + 1 and report.count("<td>KernelBench level2</td>") == 1 + 1


def test_an_answer_is_judged_again_from_its_problem_kept_beside_it(tmp_path, monkeypatch, no_keys, capsys):
    """The problem file an answer was posed from is gone (a cleaned folder, a root moved to another
    machine): an edit of the answer is still judged against the problem as it was, from the
    ``problem.py`` kept beside the answer and beside each earlier version; with neither at hand the
    judging is refused, naming what is missing."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("BBAGENT_REVIEWER", "ada")
    posed = tmp_path / "posed" / "1_ReLU.py"
    posed.parent.mkdir()
    posed.write_text(RELU.read_text())
    root = ["--root", str(tmp_path / "root")]
    with FakeLLMServer().answer(fenced("relu_right")) as server:
        assert main(["generate", "--problem", str(posed), "--rounds", "1", "--provider", "openai", "--model",
                     "gpt-test", "--base-url", server.url + "/v1", *root, "--device", "cpu", "--seed", "7",
                     "--timeout", "120"]) == 0
    folder = tmp_path / "root" / "generated_kernels" / "kernelbench" / "other" / "1_ReLU"
    assert (folder / "problem.py").read_text() == RELU.read_text()
    posed.unlink()
    (folder / "kernel.py").write_text((folder / "kernel.py").read_text() + "\n# read and tidied by hand\n")
    capsys.readouterr()
    assert main(["review", "approve", "kernelbench/other/1_ReLU", *root, "--device", "cpu"]) == 0, capsys.readouterr()
    assert "judged first" in capsys.readouterr().out
    assert (folder / "versions" / "1" / "problem.py").read_text() == RELU.read_text()
    assert (folder / "problem.py").read_text() == RELU.read_text()
    (folder / "problem.py").unlink()
    (folder / "kernel.py").write_text((folder / "kernel.py").read_text() + "# again\n")
    assert main(["review", "approve", "kernelbench/other/1_ReLU", *root, "--device", "cpu"]) == 2
    said = capsys.readouterr().err
    assert "is not at hand" in said and "problem.py" in said and str(posed) in said, said
