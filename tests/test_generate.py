"""`bbagent generate` end to end: real SDKs against the fake server, real evaluation (CPU interpreter)."""
import json

import pytest

from agent.cli import main
from fake_llm import FakeLLMServer


def read_run(root):
    runs = sorted((root / "runs").iterdir())
    assert len(runs) == 1
    return runs[0], json.loads((runs[0] / "run.json").read_text())


def feedback_of(request, provider):
    messages = request["body"]["messages"]
    assert messages[-1]["role"] == "user"
    return messages[-1]["content"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_generate_learns_from_feedback_and_stores_the_kernel(provider, tmp_path, monkeypatch, no_keys,
                                                              demo_answers, capsys):
    with FakeLLMServer().answer(*demo_answers) as server:
        if provider == "openai":
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
            extra = ["--base-url", server.url + "/v1", "--model", "gpt-test"]
        else:
            monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
            monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
            extra = ["--model", "claude-test"]
        code = main(["generate", "--op", "aten.relu.default", "--rounds", "3", "--provider", provider,
                     "--root", str(tmp_path), "--timeout", "120", *extra])
    out = capsys.readouterr().out
    assert code == 0, out
    assert len(server.requests) == 2
    first_prompt = server.requests[0]["body"]["messages"][0]["content"]
    assert "aten::relu(Tensor self) -> Tensor" in first_prompt and "T([16, 128, 512], f16)" in first_prompt
    feedback = feedback_of(server.requests[1], provider)
    assert "wrong_dtype" in feedback and "expected dtype torch.float16, got torch.float32" in feedback
    assert "round 1: FAIL" in out and "round 2: PASS" in out

    run_dir, run = read_run(tmp_path)
    assert run["status"] == "accepted" and run["rounds_used"] == 2
    assert run["tokens"]["input"] > 0 and run["tokens"]["output"] > 0
    assert [r["outcome"] for r in run["rounds"]] == ["fail", "pass"]
    for n in (1, 2):
        for name in ("prompt.md", "messages.json", "response.md", "usage.json", "kernel.py", "verdict.json"):
            assert (run_dir / f"round-{n}" / name).is_file(), (n, name)
    assert json.loads((run_dir / "round-2" / "verdict.json").read_text())["verdict"] == "pass"
    assert "wrong_dtype" in (run_dir / "round-2" / "prompt.md").read_text()

    accepted = tmp_path / "generated_kernels" / "aten.relu.default"
    assert (accepted / "kernel.py").read_text() == (run_dir / "round-2" / "kernel.py").read_text()
    meta = json.loads((accepted / "meta.json").read_text())
    assert meta["op"] == "aten.relu.default" and meta["provider"] == provider
    assert meta["run_id"] == run_dir.name and meta["rounds_used"] == 2
    assert meta["tests"]["passed"] == meta["tests"]["total"] > 0
    assert meta["versions"]["torch"] and meta["tokens"]["output"] > 0
    assert run_dir.name in (accepted / "README.md").read_text()


def test_every_round_failing_exits_nonzero_and_stores_nothing(tmp_path, monkeypatch, no_keys, demo_answers):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer().answer(demo_answers[0], "Sorry, I cannot help with that.", demo_answers[0]) as server:
        code = main(["generate", "--op", "aten.relu.default", "--rounds", "3", "--provider", "openai",
                     "--model", "m", "--base-url", server.url + "/v1", "--root", str(tmp_path)])
    assert code == 1
    assert not (tmp_path / "generated_kernels").exists()
    run_dir, run = read_run(tmp_path)
    assert run["status"] == "failed"
    assert [r["outcome"] for r in run["rounds"]] == ["fail", "no_code", "fail"]
    assert not (run_dir / "round-2" / "kernel.py").exists()
    assert "no ```python code block" in server.requests[2]["body"]["messages"][-1]["content"]


def test_provider_error_mid_run_is_recorded(tmp_path, monkeypatch, no_keys, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer().fail(401, "bad key") as server:
        code = main(["generate", "--op", "aten.relu.default", "--provider", "openai", "--model", "m",
                     "--base-url", server.url + "/v1", "--root", str(tmp_path)])
    assert code == 3
    assert "export OPENAI_API_KEY=" in capsys.readouterr().out
    run_dir, run = read_run(tmp_path)
    assert run["status"] == "error" and "401" in run["message"]
    assert run["rounds"][0]["outcome"] == "provider_error"
    assert (run_dir / "round-1" / "prompt.md").is_file()


@pytest.mark.parametrize("argv, words", [
    (["--rounds", "0"], "--rounds must be at least 1"),
    (["--rounds", "-2"], "--rounds must be at least 1"),
    (["--op", "relu"], "unknown operator 'relu'"),
])
def test_bad_arguments_are_usage_errors(argv, words, tmp_path, capsys):
    args = ["generate", "--op", "aten.relu.default", "--provider", "replay", "--root", str(tmp_path)]
    code = main(args + argv)
    assert code == 2
    assert words in capsys.readouterr().out
    assert not (tmp_path / "runs").exists()


def test_missing_key_exits_with_the_fix(tmp_path, no_keys, capsys):
    code = main(["generate", "--op", "aten.relu.default", "--provider", "anthropic", "--model", "m",
                 "--root", str(tmp_path)])
    assert code == 3
    assert "ANTHROPIC_API_KEY is not set" in capsys.readouterr().out


def test_ctrl_c_marks_the_run_interrupted(tmp_path, monkeypatch):
    from agent.providers.replay import ReplayProvider

    def interrupt(self, messages):
        raise KeyboardInterrupt
    monkeypatch.setattr(ReplayProvider, "complete", interrupt)
    code = main(["generate", "--op", "aten.relu.default", "--provider", "replay", "--root", str(tmp_path)])
    assert code == 130
    run_dir, run = read_run(tmp_path)
    assert run["status"] == "interrupted" and run["rounds"][0]["outcome"] == "interrupted"
    assert not list(run_dir.rglob("*.tmp"))


def test_replaying_a_past_run_reproduces_it(tmp_path, capsys):
    assert main(["generate", "--op", "aten.relu.default", "--provider", "replay", "--root", str(tmp_path / "a")]) == 0
    first_run, _ = read_run(tmp_path / "a")
    code = main(["generate", "--op", "aten.relu.default", "--provider", "replay", "--replay", str(first_run),
                 "--root", str(tmp_path / "b")])
    assert code == 0
    _, run = read_run(tmp_path / "b")
    assert [r["outcome"] for r in run["rounds"]] == ["fail", "pass"]
