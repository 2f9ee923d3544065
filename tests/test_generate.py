"""`bbagent generate` end to end: real SDKs against the fake server, real evaluation (CPU interpreter)."""
import json
import time

import pytest

from bbagent.cli import main
from fake_llm import FakeLLMServer


def read_run(root):
    runs = sorted(p for p in (root / "runs").iterdir() if p.is_dir())
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
    captured = capsys.readouterr()
    out = captured.out + captured.err  # the result on stdout, the rounds' progress on stderr
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
    assert "export OPENAI_API_KEY=" in capsys.readouterr().err
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
    assert words in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_missing_key_exits_with_the_fix(tmp_path, no_keys, capsys):
    code = main(["generate", "--op", "aten.relu.default", "--provider", "anthropic", "--model", "m",
                 "--root", str(tmp_path)])
    assert code == 3
    assert "ANTHROPIC_API_KEY is not set" in capsys.readouterr().err


def test_ctrl_c_marks_the_run_interrupted(tmp_path, monkeypatch):
    from bbagent.agent.providers.replay import ReplayProvider

    def interrupt(self, messages, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(ReplayProvider, "complete", interrupt)
    code = main(["generate", "--op", "aten.relu.default", "--provider", "replay", "--root", str(tmp_path)])
    assert code == 130
    run_dir, run = read_run(tmp_path)
    assert run["status"] == "interrupted" and run["rounds"][0]["outcome"] == "interrupted"
    assert not list(run_dir.rglob("*.tmp"))


def test_every_ending_of_a_run_is_an_outcome_and_the_command_line_says_it(tmp_path, monkeypatch, capsys):
    """Issue 78, item 4: a run refused before it began and a bug inside a run are Outcomes, not
    exceptions out of ``bbagent.generate``; the command line turns each into its exit code and one
    line, and a bug's traceback is kept in the run's directory."""
    from bbagent import generate
    from bbagent.agent.providers.replay import ReplayProvider
    refused = generate("aten.no_such_op.default", provider="replay", root=tmp_path / "a", device="cpu")
    assert (refused.status, refused.stopped_because, refused.run_dir) == ("error", "usage", None)
    assert "no_such_op" in refused.message and not (tmp_path / "a" / "runs").exists()

    def bug(self, messages, **kwargs):
        raise AttributeError("'NoneType' object has no attribute 'text'")
    monkeypatch.setattr(ReplayProvider, "complete", bug)
    code = main(["generate", "--op", "aten.relu.default", "--provider", "replay", "--root", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert code == 70 and "a bug in bbagent" in err and "Traceback" not in err
    run_dir, run = read_run(tmp_path / "b")
    assert (run["status"], run["stopped_because"]) == ("error", "error")
    saved, = run_dir.glob("traceback-*.txt")
    assert saved.name in err and "AttributeError" in saved.read_text()


def test_replaying_a_past_run_reproduces_it(tmp_path, capsys):
    assert main(["generate", "--op", "aten.relu.default", "--provider", "replay", "--root", str(tmp_path / "a")]) == 0
    first_run, _ = read_run(tmp_path / "a")
    code = main(["generate", "--op", "aten.relu.default", "--provider", "replay", "--replay", str(first_run),
                 "--root", str(tmp_path / "b")])
    assert code == 0
    _, run = read_run(tmp_path / "b")
    assert [r["outcome"] for r in run["rounds"]] == ["fail", "pass"]


def test_calls_are_logged_with_cost_and_reuse_of_answers_is_explicit_and_per_endpoint(
        tmp_path, monkeypatch, no_keys, demo_answers, capsys):
    """Every call lands in runs/llm_calls.sqlite with tokens and cost. Running again asks the model
    afresh (issue 31: a retry wants a new sample); --cache answers identical requests from the log,
    but only those made to the same endpoint: another server behind the same model name is asked."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    argv = ["generate", "--op", "aten.relu.default", "--rounds", "3", "--provider", "openai", "--model", "gpt-5",
            "--seed", "5", "--root", str(tmp_path)]
    with FakeLLMServer().answer(*demo_answers) as server:
        url = server.url + "/v1"
        assert main([*argv, "--base-url", url]) == 0
        assert len(server.requests) == 2
        assert main([*argv, "--base-url", url, "--cache"]) == 0  # the script is spent: any request would fail
        assert len(server.requests) == 2
        server.answer(*demo_answers)
        assert main([*argv, "--base-url", url]) == 0  # the default: asked again
        assert len(server.requests) == 4
    with FakeLLMServer().answer(*demo_answers) as elsewhere:
        assert main([*argv, "--base-url", elsewhere.url + "/v1", "--cache"]) == 0
    assert len(elsewhere.requests) == 2  # another endpoint: nothing of the log answers it

    capsys.readouterr()
    assert main(["logs", "--root", str(tmp_path), "--json"]) == 0
    calls = json.loads(capsys.readouterr().out)
    assert [(c["round"], c["cached"]) for c in calls] == [(1, 0), (2, 0), (1, 1), (2, 1), (1, 0), (2, 0), (1, 0), (2, 0)]
    assert {c["endpoint"] for c in calls} == {url, elsewhere.url + "/v1"}
    first = calls[0]
    assert first["provider"] == "openai" and first["model"] == "gpt-5" and first["input_tokens"] > 0
    assert first["cost_usd"] == pytest.approx((first["input_tokens"] * 1.25 + first["output_tokens"] * 10) / 1e6)
    assert "aten::relu(Tensor self) -> Tensor" in first["messages"][-1]["content"] and "```python" in first["response"]
    assert calls[2]["cost_usd"] == 0.0  # answered from the log: nothing spent
    runs = sorted(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    first_run = json.loads((runs[0] / "run.json").read_text())
    assert first_run["cost_usd"] == pytest.approx(calls[0]["cost_usd"] + calls[1]["cost_usd"])
    assert json.loads((runs[1] / "run.json").read_text())["cached_calls"] == 2
    assert json.loads((runs[2] / "run.json").read_text())["cached_calls"] == 0

    # the log is also a replay source: a run id answers in the order of that run's calls
    assert main(["generate", "--op", "aten.relu.default", "--provider", "replay", "--replay", runs[0].name,
                 "--root", str(tmp_path)]) == 0
    assert "replay" in capsys.readouterr().err
    assert main(["logs", "--root", str(tmp_path), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 8  # the replay read the log and wrote nothing to it


def test_failed_calls_are_logged_and_a_refused_endpoint_is_named_quickly(tmp_path, monkeypatch, no_keys, capsys):
    """A call that fails is in the log with its error; nothing listening at --base-url is said in
    those words after one quick second try, not after a minute of retries."""
    import socket
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    # A port bound and held but not listening: connecting is refused, and no other test's server
    # (pytest-xdist runs them side by side) can be given the port meanwhile, as it could once released.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        started = time.monotonic()
        code = main(["generate", "--op", "aten.relu.default", "--provider", "openai", "--model", "gpt-5",
                     "--base-url", f"http://127.0.0.1:{port}/v1", "--root", str(tmp_path), "--rounds", "1"])
        took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 3 and f"connection refused at http://127.0.0.1:{port}/v1" in err and "nothing is listening" in err
    assert took < 15, took
    with FakeLLMServer().fail(401, "bad key") as server:
        assert main(["generate", "--op", "aten.relu.default", "--provider", "openai", "--model", "gpt-5",
                     "--base-url", server.url + "/v1", "--root", str(tmp_path), "--rounds", "1"]) == 3
    capsys.readouterr()
    assert main(["logs", "--root", str(tmp_path), "--json"]) == 0
    calls = json.loads(capsys.readouterr().out)
    # the refused connection's first attempt, retried once, is a call of its own (issue 64, 5)
    assert [("connection refused" in c["error"], "401" in c["error"]) for c in calls] == [(True, False), (True, False),
                                                                                           (False, True)]
    assert [c["error"].startswith("attempt 1 of 2 failed, retried after") for c in calls] == [False, True, False]
    assert all(c["response"] == "" and c["cost_usd"] is None for c in calls)
    assert main(["logs", "--root", str(tmp_path)]) == 0
    assert "3 calls, 0 from the cache, 3 failed" in " ".join(capsys.readouterr().out.split())


def test_a_cost_budget_stops_between_rounds(tmp_path, monkeypatch, no_keys, demo_answers, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer().answer(*demo_answers) as server:
        code = main(["generate", "--op", "aten.relu.default", "--rounds", "3", "--provider", "openai",
                     "--model", "gpt-5", "--base-url", server.url + "/v1", "--root", str(tmp_path),
                     "--max-cost-usd", "0.000001"])
    out = capsys.readouterr().out
    assert code == 1 and len(server.requests) == 1
    assert "stopped before round 2: the cost budget is spent" in out and "--max-cost-usd 1e-06" in out
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "stopped" and run["cost_usd"] > 0.000001 and run["finished_at"]
    for name in ("prompt.md", "messages.json", "response.md", "usage.json", "kernel.py", "verdict.json"):
        assert (run_dir / "round-1" / name).is_file(), name
    assert not (tmp_path / "generated_kernels").exists()


def test_a_budget_needs_a_price(tmp_path, monkeypatch, no_keys, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    code = main(["generate", "--op", "aten.relu.default", "--provider", "openai", "--model", "my-local-model",
                 "--base-url", "http://127.0.0.1:9/v1", "--root", str(tmp_path), "--max-cost-usd", "1"])
    assert code == 2 and "~/.config/bbagent/prices.json" in capsys.readouterr().err


def test_four_candidates_one_correct_is_found_in_one_round_and_replayed_from_the_log(
        tmp_path, monkeypatch, no_keys, demo_answers, capsys):
    """K=4 parallel answers, three wrong (float32 output) and one right: the right one is found
    in round 1; the log holds four calls with tokens and cost; the same run again makes no
    network call."""
    from bbagent.agent.generate.extract import extract_code
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    wrong, right = demo_answers
    argv = ["generate", "--op", "aten.relu.default", "--rounds", "2", "--candidates", "4", "--provider", "openai",
            "--model", "gpt-5", "--seed", "7", "--root", str(tmp_path)]
    with FakeLLMServer().answer(wrong, right, wrong, wrong) as server:
        assert main([*argv, "--base-url", server.url + "/v1"]) == 0
    out = capsys.readouterr().out
    assert len(server.requests) == 4 and "accepted after 1 round(s)" in out
    bodies = [r["body"] for r in server.requests]
    assert len({json.dumps(b["messages"]) for b in bodies}) == 1  # one prompt, four samples
    assert sorted(b.get("seed", 0) for b in bodies) == [0, 1, 2, 3]
    run_dir, run = read_run(tmp_path)
    first = run["rounds"][0]
    assert run["rounds_used"] == 1 and len(first["candidates"]) == 4
    assert sorted(c["outcome"] for c in first["candidates"]) == ["fail", "fail", "fail", "pass"]
    picked = run_dir / "round-1" / f"candidate-{first['picked']}"
    assert json.loads((picked / "verdict.json").read_text())["verdict"] == "pass"
    accepted = tmp_path / "generated_kernels" / "aten.relu.default" / "kernel.py"
    assert accepted.read_text() == extract_code(right) == (picked / "kernel.py").read_text()

    assert main(["logs", "--root", str(tmp_path), "--json"]) == 0
    calls = json.loads(capsys.readouterr().out)
    assert sorted(c["candidate"] for c in calls) == [0, 1, 2, 3] and {c["round"] for c in calls} == {1}
    assert all(c["input_tokens"] > 0 and c["output_tokens"] > 0 and c["cost_usd"] > 0 for c in calls)
    assert run["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in calls))

    with FakeLLMServer() as silent:  # another endpoint: --cache does not answer it from the log
        silent.answer(wrong, right, wrong, wrong)
        assert main([*argv, "--base-url", silent.url + "/v1", "--cache"]) == 0
    assert len(silent.requests) == 4


def test_a_failed_candidate_call_is_recorded_in_place_and_the_run_replays_by_id(
        tmp_path, monkeypatch, no_keys, demo_answers, capsys):
    """--candidates 3 where one call fails for good (400): run.json records its error at its own
    index, the other two keep theirs; replaying the run by its id asks each candidate for its own
    recorded answer (the failed one fails again) and ends the same way."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    wrong, right = demo_answers
    argv = ["generate", "--op", "aten.relu.default", "--rounds", "1", "--candidates", "3", "--root", str(tmp_path)]
    with FakeLLMServer().answer(wrong).fail(400, "bad request").answer(right) as server:
        assert main([*argv, "--provider", "openai", "--model", "gpt-5", "--base-url", server.url + "/v1"]) == 0
    assert "no answer" in capsys.readouterr().err
    run_dir, run = read_run(tmp_path)
    candidates = run["rounds"][0]["candidates"]
    outcomes = [c["outcome"] for c in candidates]
    assert len(candidates) == 3 and sorted(outcomes) == ["fail", "pass", "provider_error"]
    failed = outcomes.index("provider_error") + 1
    assert "400" in candidates[failed - 1]["message"]
    assert (run_dir / "round-1" / f"candidate-{failed}" / "error.txt").is_file()
    for k in {1, 2, 3} - {failed}:
        assert (run_dir / "round-1" / f"candidate-{k}" / "response.md").is_file()

    assert main([*argv, "--provider", "replay", "--replay", run_dir.name]) == 0
    replays = sorted(p for p in (tmp_path / "runs").iterdir() if p.is_dir() and p != run_dir)
    again = json.loads((replays[-1] / "run.json").read_text())["rounds"][0]["candidates"]
    assert [c["outcome"] for c in again] == outcomes


def test_retries_are_announced_while_waiting(tmp_path, monkeypatch, no_keys, demo_answers, capsys):
    """A transient failure is retried after a wait, and the user hears of it instead of silence."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer().fail(503, "overloaded").answer(demo_answers[1]) as server:
        code = main(["generate", "--op", "aten.relu.default", "--rounds", "1", "--provider", "openai", "--model", "m",
                     "--base-url", server.url + "/v1", "--root", str(tmp_path), "--device", "cpu"])
    assert code == 0 and len(server.requests) == 2
    err = capsys.readouterr().err
    assert "the call failed (OpenAI API server error (503)" in err and "attempt 2 of 5 in" in err


def test_why_a_run_failed_names_the_closest_kernel_its_error_kinds_and_the_answers_causes():
    """Issue 31: failures differ, and so does what is said about them."""
    from bbagent.agent.generate.failure import why_failed
    from bbagent.agent.run_record import RoundRecord

    def tests(passed, total):
        return {"planned": total, "not_run": 0, "total": total, "passed": passed, "failed": total - passed,
                "reference_errors": 0, "skipped": 0}

    def records(*rounds):
        return [RoundRecord.model_validate(r) for r in rounds]
    near = {"round": 1, "outcome": "fail", "summary": tests(97, 98),
            "failures": [{"error_kind": "mismatch", "count": 1, "first_test": "trace-12"}]}
    broken = {"round": 2, "outcome": "fail", "summary": tests(0, 0), "error_kind": "compile_error",
              "message": "CompilationError: at 3:4\nmore", "failures": []}
    silent = {"round": 3, "outcome": "no_code"}
    assert why_failed(records(near, broken, silent)).text() == (
        "no candidate passed in 3 round(s); closest: round 1, 97/98 tests passed (mismatch x1, first trace-12); "
        "no code block in the answer of round(s) 3")
    assert why_failed(records({**broken, "round": 1})).text() == ("no candidate passed in 1 round(s); closest: round 1: compile_error: "
                                           "CompilationError: at 3:4 more")  # every line, joined
    everywhere = {"round": 1, "outcome": "fail", "summary": tests(0, 98),
                  "failures": [{"error_kind": "mismatch", "count": 98, "first_test": "opinfo-0"}]}
    assert "0/98 tests passed (mismatch x98, first opinfo-0)" in why_failed(records(everywhere)).text()
    picked = {"round": 1, "outcome": "provider_error", "candidates": [{"outcome": "provider_error"},
                                                                      {"outcome": "no_code"}]}
    assert why_failed(records(picked)).text() == ("no candidate passed in 1 round(s); provider errors in round(s) 1")


def test_counts_agree_everywhere_and_say_what_the_cpu_did_not_run(tmp_path, capsys):
    """Issue 31: one way to count a kernel's tests (the family's, its own overload's beside it),
    and on the CPU the tests not run here are said, in generate, meta.json, the kernel's README,
    `kernels`, `review list` and `eval`."""
    import re
    assert main(["generate", "--op", "aten.relu.default", "--provider", "replay", "--device", "cpu",
                 "--root", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    line = re.search(r"round \d: PASS (\d+)/(\d+) tests passed \(3 overloads; (\d+)/(\d+) of aten.relu.default's own\), "
                     r"(\d+) not run here \(GPU-sized", err)
    assert line, err
    passed, total, own_passed, own_total, not_run = map(int, line.groups())
    assert passed == total and own_passed == own_total < total and not_run > 0
    folder = tmp_path / "generated_kernels" / "aten.relu.default"
    tests = json.loads((folder / "meta.json").read_text())["tests"]
    assert (tests["passed"], tests["own_total"], tests["not_run_here"], tests["interpreter"]) == (passed, own_total,
                                                                                                  not_run, True)
    assert f"{passed}/{total} tests passed (3 overloads" in (folder / "README.md").read_text()
    for argv in (["kernels"], ["review", "list"]):
        assert main([*argv, "--root", str(tmp_path)]) == 0
        assert f"{passed}/{total} +{not_run} not run" in capsys.readouterr().out, argv
    assert main(["eval", "--op", "aten.relu.default", "--device", "cpu", "--root", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"{own_total}/{own_total} tests passed" in out and "of aten.relu.default alone; --variants tests all 3" in out
    assert main(["eval", "--op", "aten.relu.default", "--device", "cpu", "--variants", "--root", str(tmp_path)]) == 0
    # the flag's earlier name is still taken, hidden from the help (--family names a prompt family elsewhere)
    assert main(["eval", "--op", "aten.relu.default", "--device", "cpu", "--family", "--root", str(tmp_path)]) == 0
    assert f"{total}/{total} tests passed (3 overloads; {own_total}/{own_total}" in " ".join(capsys.readouterr().out.split())


def test_the_suite_is_built_while_the_provider_answers(tmp_path, monkeypatch, no_keys, demo_answers, capsys):
    """The first prompt goes out and the operator's suite is built at the same time (a child of its
    own, no candidate); the first answer's evaluation then loads it instead of building it."""
    monkeypatch.setenv("BBAGENT_SUITE_CACHE", str(tmp_path / "suites"))  # nothing built before
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer().answer(*demo_answers).latency(4.0) as server:
        code = main(["generate", "--op", "aten.relu.default", "--rounds", "2", "--provider", "openai",
                     "--base-url", server.url + "/v1", "--model", "gpt-test", "--root", str(tmp_path),
                     "--timeout", "120"])
    assert code == 0, capsys.readouterr()
    run_dir, run = read_run(tmp_path)
    ahead = run["suite_ahead"]
    assert ahead["outcome"] == "built", ahead
    first = json.loads((run_dir / "round-1" / "verdict.json").read_text())
    assert any(note.startswith("suite reused") for note in first["suite"]["notes"]), first["suite"]["notes"]
    asked_at = server.requests[0]["received_at"]
    assert ahead["started_at"] < asked_at + 1.0  # it started with the request, not after the answer


def test_an_operator_with_no_test_is_refused_before_any_request(tmp_path, monkeypatch, no_keys, capsys, demo_answers):
    """Issue 47 (point 2): before, generate asked the model round after round for an operator
    nothing here can test and ended "0/0 tests passed". The listing says it has none; the suite,
    built once, agrees; exit 2 naming `bbagent ops`, and the model server never hears a request. An
    operator the float32 listing misses but whose OpInfo (integer-only) has samples is not refused."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer().answer(*demo_answers) as server:
        code = main(["generate", "--op", "aten._foreach_add.List", "--provider", "openai", "--model", "m",
                     "--base-url", server.url + "/v1", "--root", str(tmp_path)])
        assert code == 2 and server.requests == []
        err = " ".join(capsys.readouterr().err.split())
        assert "aten._foreach_add.List has no test here" in err and "`bbagent ops`" in err
        assert "nothing was asked of the model" in err
    from bbagent.agent.generate.testable import listed_without_tests, refuse_untested
    from bbagent.agent.judging import Evaluations, evaluation_request, problem_of
    assert listed_without_tests(["aten.gcd.default"])  # float32 samples never reach it: the suite decides
    gcd = problem_of("aten.gcd.default", exact_overload=True)
    refuse_untested("aten.gcd.default", ["aten.gcd.default"],
                    Evaluations(evaluation_request(gcd, tmp_path, device="cpu", seed=1, timeout_s=300)))
    assert listed_without_tests(["aten._foreach_add.List"], {"aten._foreach_add.List": [{"line": "x"}]}) is None
    assert main(["prompt", "--op", "aten._foreach_add.List"]) == 0
    assert "the shipped listing has no test for aten._foreach_add.List" in " ".join(capsys.readouterr().err.split())


def test_progress_reaches_a_typed_listener_and_a_two_argument_one_alike(tmp_path, no_keys):
    """``report`` hears one typed event at a time; a listener of the older ``report(name, data)``
    form hears the same events by name, with their fields."""
    import bbagent
    from bbagent.agent.generate.progress import RoundDone, Started
    typed, named = [], []
    for root, report in ((tmp_path / "a", typed.append), (tmp_path / "b", lambda name, data: named.append((name, data)))):
        outcome = bbagent.generate("aten.relu.default", provider="replay", root=root, device="cpu", rounds=2,
                                   report=report)
        assert outcome.status == "accepted"
    assert [type(e).__name__ for e in typed] == ["Started", "Asking", "Evaluating", "RoundDone",
                                                 "Asking", "Evaluating", "RoundDone"]
    assert isinstance(typed[0], Started) and typed[0].run_dir.startswith(str(tmp_path / "a"))
    assert [e.record.outcome for e in typed if isinstance(e, RoundDone)] == ["fail", "pass"]
    assert [name for name, _ in named] == [e.name for e in typed]
    assert named[0][1]["run_dir"].startswith(str(tmp_path / "b")) and named[-1][1]["record"]["outcome"] == "pass"


def test_answers_from_the_call_log_of_an_unpriced_model_cost_unknown_and_name_the_run_that_paid(
        tmp_path, monkeypatch, no_keys, demo_answers, capsys):
    """Issue 64, 2: answered from the log (--cache, or a resumed batch), a model with no price read
    as $0.0000 with cost_complete true; the kernel did not say which run paid for its answers. Here
    the first run gets round 1's (wrong) answer; the second takes it from the log and is accepted
    on a fresh round 2."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    argv = ["generate", "--op", "aten.relu.default", "--provider", "openai", "--model", "my-local-model", "--seed", "5",
            "--root", str(tmp_path)]
    with FakeLLMServer().answer(*demo_answers) as server:
        assert main([*argv, "--rounds", "1", "--base-url", server.url + "/v1"]) == 1
        assert main([*argv, "--rounds", "3", "--base-url", server.url + "/v1", "--cache"]) == 0
        assert main([*argv, "--rounds", "3", "--base-url", server.url + "/v1", "--cache"]) == 0  # all from the log
    capsys.readouterr()
    paid, reused, all_logged = sorted(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    again = json.loads((all_logged / "run.json").read_text())
    assert again["cached_calls"] == 2 and again["cost_usd"] == 0 and again["cost_complete"] is False
    assert again["answers_paid_by"] == sorted([paid.name, reused.name])
    record = json.loads((reused / "run.json").read_text())
    assert record["cached_calls"] == 1 and record["cost_complete"] is False and record["answers_paid_by"] == [paid.name]
    meta = json.loads((tmp_path / "generated_kernels" / "aten.relu.default" / "meta.json").read_text())
    assert meta["run_id"] == reused.name and meta["cost_complete"] is False and meta["answers_paid_by"] == [paid.name]
    assert main(["runs", "--root", str(tmp_path)]) == 0 and main(["review", "list", "--root", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    assert "$0.0000" not in shown and "$0.000" not in shown and "unknown" in shown
    assert main(["review", "show", "aten.relu.default", "--root", str(tmp_path)]) == 0
    assert f"paid for by run(s) {paid.name}" in " ".join(capsys.readouterr().err.split())
    assert main(["review", "list", "--json", "--root", str(tmp_path)]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["answers_paid_by"] == [paid.name] and listed["cost_complete"] is False  # the JSON says it too
