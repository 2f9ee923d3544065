"""Anthropic Messages API through the official SDK."""
from __future__ import annotations

import os

import anthropic

from bbagent.agent.providers.base import Completion, ProviderError, RetryPolicy, SdkProvider

KEY_VAR = "ANTHROPIC_API_KEY"


class AnthropicProvider(SdkProvider):
    name = "anthropic"
    sdk = anthropic
    vendor = "Anthropic API"
    key_var = KEY_VAR
    base_url_fix = "ANTHROPIC_BASE_URL"
    reach_hint = "ANTHROPIC_BASE_URL"

    def __init__(self, model: str, *, base_url: str | None = None, max_output_tokens: int = 8192,
                 temperature: float | None = None, timeout_s: float = 600.0,
                 retry: RetryPolicy | None = None):
        key = os.environ.get(KEY_VAR)
        if not key:
            raise ProviderError(f"{KEY_VAR} is not set. Export your key (export {KEY_VAR}=sk-ant-...), "
                                "or run the offline demo with --provider replay.")
        super().__init__(model, max_output_tokens=max_output_tokens, temperature=temperature, retry=retry)
        self.client = anthropic.Anthropic(api_key=key, base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL"),
                                          max_retries=0, timeout=timeout_s)

    def complete(self, messages: list[dict], *, round: int = 1, candidate: int = 0) -> Completion:
        """The Messages API has no sampling seed: candidates differ by sampling alone."""
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        turns = [m for m in messages if m["role"] != "system"]

        def call() -> Completion:
            params = {"model": self.model, "max_tokens": self.max_output_tokens, "messages": turns}
            if system:
                params["system"] = system
            if self.temperature is not None:
                params["temperature"] = self.temperature
            response = self.client.messages.create(**params)
            text = "".join(block.text for block in response.content if getattr(block, "type", "") == "text")
            return Completion(text=text, input_tokens=response.usage.input_tokens or 0,
                              output_tokens=response.usage.output_tokens or 0,
                              model=response.model or self.model, response_id=response.id)

        return self._retried(call)
