"""The real openai and anthropic SDKs against a fake server on 127.0.0.1."""
import pytest

from bbagent.agent.providers import ProviderError, RetryPolicy, make_provider
from fake_llm import FakeLLMServer

FAST = RetryPolicy(attempts=3, initial_wait_s=0.01, max_wait_s=0.02)
MESSAGES = [{"role": "user", "content": "write relu"}]


def provider(name, server, monkeypatch, retry=FAST):
    if name == "openai":
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        return make_provider("openai", op="aten.relu.default", model="gpt-test",
                             base_url=server.url + "/v1", retry=retry)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    return make_provider("anthropic", op="aten.relu.default", model="claude-test",
                         base_url=server.url, retry=retry)


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_completion_records_tokens(name, monkeypatch, no_keys):
    with FakeLLMServer().answer("hello " * 40) as server:
        completion = provider(name, server, monkeypatch).complete(MESSAGES)
    assert completion.text.startswith("hello")
    assert completion.input_tokens > 0 and completion.output_tokens == len("hello " * 40) // 4
    assert completion.attempts == 1
    path = server.requests[0]["path"]
    assert path.endswith("/chat/completions" if name == "openai" else "/messages")


@pytest.mark.parametrize("name", ["openai", "anthropic"])
@pytest.mark.parametrize("code", [429, 500, 529])
def test_transient_errors_are_retried(name, code, monkeypatch, no_keys):
    with FakeLLMServer().fail(code).fail(code).answer("ok") as server:
        completion = provider(name, server, monkeypatch).complete(MESSAGES)
    assert completion.text == "ok" and completion.attempts == 3
    assert len(server.requests) == 3


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_retries_are_bounded(name, monkeypatch, no_keys):
    with FakeLLMServer().fail(503).fail(503).fail(503).answer("never reached") as server:
        with pytest.raises(ProviderError) as info:
            provider(name, server, monkeypatch).complete(MESSAGES)
    assert len(server.requests) == 3
    assert "gave up after 3 attempts" in str(info.value) and "503" in str(info.value)


@pytest.mark.parametrize("name, key_var", [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")])
def test_401_is_not_retried_and_names_the_fix(name, key_var, monkeypatch, no_keys):
    with FakeLLMServer().fail(401, "invalid x-api-key").answer("never reached") as server:
        with pytest.raises(ProviderError) as info:
            provider(name, server, monkeypatch).complete(MESSAGES)
    assert len(server.requests) == 1
    assert f"export {key_var}=" in str(info.value) and "401" in str(info.value)


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_400_is_not_retried(name, monkeypatch, no_keys):
    with FakeLLMServer().fail(400, "max_tokens too large").answer("never reached") as server:
        with pytest.raises(ProviderError) as info:
            provider(name, server, monkeypatch).complete(MESSAGES)
    assert len(server.requests) == 1
    assert "max_tokens too large" in str(info.value) and "--model" in str(info.value)


def test_unreachable_server_is_a_clear_error(monkeypatch, no_keys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    p = make_provider("openai", op="aten.relu.default", model="m", base_url="http://127.0.0.1:9/v1",
                      retry=RetryPolicy(attempts=2, initial_wait_s=0.01, max_wait_s=0.01))
    with pytest.raises(ProviderError) as info:
        p.complete(MESSAGES)
    assert "connection refused" in str(info.value) and "--base-url" in str(info.value)


@pytest.mark.parametrize("name, key_var", [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")])
def test_missing_key_names_the_variable(name, key_var, no_keys):
    with pytest.raises(ProviderError) as info:
        make_provider(name, op="aten.relu.default", model="m")
    assert f"{key_var} is not set" in str(info.value) and "--provider replay" in str(info.value)


def test_model_is_required_for_real_providers(no_keys):
    with pytest.raises(ProviderError, match="--model is required"):
        make_provider("openai", op="aten.relu.default")


def test_replay_answers_in_order_then_says_it_is_exhausted(tmp_path):
    source = tmp_path / "r.json"
    source.write_text('{"exchanges": [{"response": "a", "output_tokens": 3}, {"response": "b"}]}')
    p = make_provider("replay", op="aten.relu.default", replay=str(source))
    assert [p.complete(MESSAGES).text for _ in range(2)] == ["a", "b"]
    with pytest.raises(ProviderError, match="only 2 recorded answers"):
        p.complete(MESSAGES)


def test_replay_without_a_shipped_file_lists_what_exists():
    with pytest.raises(ProviderError, match="no shipped replay for aten.add.Tensor.*aten.relu.default"):
        make_provider("replay", op="aten.add.Tensor")


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_a_resumed_batch_reuses_only_the_answers_its_own_batch_paid_for(name, tmp_path, monkeypatch, no_keys):
    """Reuse is explicit: none by default, the batch's own calls on its resume, any with --cache."""
    from bbagent.agent.providers.call_log import LLMLog
    from bbagent.agent.providers.logged import LoggedProvider
    log = LLMLog(tmp_path / "llm_calls.sqlite")
    with FakeLLMServer().answer("one", "two", "three", "four") as server:
        inner = provider(name, server, monkeypatch)

        def ask(reuse, batch_id):
            logged = LoggedProvider(inner, log, run_id="r", op="aten.relu.default", params={}, reuse=reuse,
                                    batch_id=batch_id)
            return logged.complete(MESSAGES).text

        assert ask(None, "batch-a") == "one"
        assert ask(None, "batch-a") == "two"  # the default: asked again
        assert ask("batch", "batch-a") == "one"  # batch-a's resume: its own first answer, no request
        assert ask("batch", "batch-b") == "three"  # another batch paid nothing for it: asked
        assert ask("any", None) == "one"  # --cache: the first answer of any batch
    assert len(server.requests) == 3


def test_a_call_is_in_the_log_while_in_flight_and_a_retried_attempt_apart(tmp_path):
    """Issue 64, 5: a kill -9 while requests were in flight left them out of `logs` (the server saw
    4, the log listed 2); a 429 answered on a retry was not listed as the failed call it was."""
    from bbagent.agent.providers.base import Completion
    from bbagent.agent.providers.call_log import IN_FLIGHT, LLMLog
    from bbagent.agent.providers.logged import LoggedProvider
    log = LLMLog(tmp_path / "llm_calls.sqlite")
    seen_during = []

    class Inner:
        name, model, on_retry = "openai", "gpt-5", None

        def complete(self, messages, *, round=1, candidate=0):
            seen_during.extend(c["error"] for c in log.calls())  # what a kill -9 now would leave
            self.on_retry({"attempt": 1, "attempts": 5, "wait_s": 2.0, "status": 429, "error": "429 rate limited"})
            return Completion(text="answer", input_tokens=3, output_tokens=4)
    told = []
    provider = LoggedProvider(Inner(), log, run_id="run-1", op="aten.relu.default", params={})
    provider.on_retry = told.append
    assert provider.complete([{"role": "user", "content": "hi"}]).text == "answer"
    assert seen_during == [IN_FLIGHT]
    calls = log.calls()
    assert [c["error"] for c in calls] == [None, "attempt 1 of 5 failed, retried after 2.0 s: 429 rate limited"]
    assert calls[0]["response"] == "answer" and calls[0]["output_tokens"] == 4 and told[0]["status"] == 429
    assert log.answered(calls[0]["request_hash"])["id"] == calls[0]["id"]  # the answered call, not the failed attempt
