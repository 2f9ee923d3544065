"""LLM providers: ``openai``, ``anthropic`` and the offline ``replay``."""
from __future__ import annotations

from pathlib import Path

from agent.providers.base import Completion, Provider, ProviderError, RetryPolicy

PROVIDERS = ("openai", "anthropic", "replay")


def make_provider(name: str, *, op: str, model: str | None = None, base_url: str | None = None,
                  replay: str | None = None, max_output_tokens: int = 8192,
                  temperature: float | None = None, retry: RetryPolicy | None = None, log=None) -> Provider:
    """Build the provider named on the command line; every misuse raises ProviderError.
    ``log`` (an ``agent.llm_log.LLMLog``) lets ``replay`` take a run id from the call log."""
    if name == "replay":
        from agent.providers.replay import SHIPPED_REPLAYS, ReplayProvider, shipped_replay
        if replay and not Path(replay).exists() and log is not None and log.calls(run_id=replay):
            return ReplayProvider.from_log(log, replay)
        source = Path(replay) if replay else shipped_replay(op)
        if source is None:
            shipped = sorted(p.stem for p in SHIPPED_REPLAYS.glob("*.json"))
            raise ProviderError(f"no shipped replay for {op} (shipped: {', '.join(shipped) or 'none'}); "
                                "pass --replay FILE_OR_RUN_DIR")
        if not source.exists():
            raise ProviderError(f"replay source not found: {source}")
        return ReplayProvider(source)
    if name not in PROVIDERS:
        raise ProviderError(f"unknown provider '{name}'; choose one of {', '.join(PROVIDERS)}")
    if not model:
        example = "gpt-5" if name == "openai" else "claude-sonnet-4-5"
        raise ProviderError(f"--model is required with --provider {name} (for example --model {example})")
    common = dict(base_url=base_url, max_output_tokens=max_output_tokens, temperature=temperature, retry=retry)
    if name == "openai":
        from agent.providers.openai_provider import OpenAIProvider
        return OpenAIProvider(model, **common)
    from agent.providers.anthropic_provider import AnthropicProvider
    return AnthropicProvider(model, **common)


__all__ = ["Completion", "Provider", "ProviderError", "RetryPolicy", "make_provider", "PROVIDERS"]
