"""LLM providers: ``openai``, ``anthropic`` and the offline ``replay``."""
from __future__ import annotations

from pathlib import Path

from bbagent.agent.errors import ProviderError
from bbagent.agent.options import PROVIDERS
from bbagent.agent.providers.base import Completion, Provider, RetryPolicy, SdkProvider


def make_provider(name: str, *, op: str, model: str | None = None, base_url: str | None = None,
                  replay: str | None = None, max_output_tokens: int = 8192,
                  temperature: float | None = None, retry: RetryPolicy | None = None, log=None,
                  root: Path | None = None) -> Provider:
    """Build the provider named on the command line; every misuse raises ProviderError.
    ``replay`` names a file, a run directory, a run id under ``root/runs`` or a run id in
    ``log`` (an ``agent.providers.call_log.LLMLog``)."""
    if name == "replay":
        return _replay_provider(op, replay, log, root)
    if name not in PROVIDERS:
        raise ProviderError(f"unknown provider '{name}'; choose one of {', '.join(PROVIDERS)}")
    if not model:
        example = "gpt-5" if name == "openai" else "claude-sonnet-4-5"
        raise ProviderError(f"--model is required with --provider {name} (for example --model {example})")
    sdk: type[SdkProvider]
    if name == "openai":
        from bbagent.agent.providers.openai_provider import OpenAIProvider
        sdk = OpenAIProvider
    else:
        from bbagent.agent.providers.anthropic_provider import AnthropicProvider
        sdk = AnthropicProvider
    return sdk(model, base_url=base_url, max_output_tokens=max_output_tokens, temperature=temperature, retry=retry)


def _replay_provider(op: str, replay: str | None, log, root: Path | None):
    from bbagent.agent.providers.replay import SHIPPED_REPLAYS, ReplayProvider, shipped_replay
    if not replay:
        source = shipped_replay(op)
        if source is None:
            shipped = sorted(p.stem for p in SHIPPED_REPLAYS.glob("*.json"))
            raise ProviderError(f"no shipped replay for {op} (shipped: {', '.join(shipped) or 'none'}); "
                                "pass --replay FILE, RUN_DIR or RUN_ID")
        return ReplayProvider.from_path(source)
    source = Path(replay)
    if source.is_dir() and not any(source.glob("round-*")):  # a batch's replays: <op>.json each
        if not (source / f"{op}.json").is_file():
            raise ProviderError(f"replay directory {source} holds no {op}.json (nor is it a run directory)")
        return ReplayProvider.from_path(source / f"{op}.json")
    if source.exists():
        return ReplayProvider.from_path(source)
    if root is not None and (root / "runs" / replay).is_dir():
        return ReplayProvider.from_path(root / "runs" / replay)
    if log is not None and log.calls(run_id=replay):
        return ReplayProvider.from_log(log, replay)
    where = f" nor a run under {root / 'runs'}" if root is not None else ""
    raise ProviderError(f"replay source not found: '{replay}' is no file or directory{where}, and the call log "
                        "has no run of that id")


__all__ = ["Completion", "Provider", "ProviderError", "RetryPolicy", "make_provider", "PROVIDERS"]
