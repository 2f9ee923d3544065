"""OpenAI Chat Completions through the official SDK; also any OpenAI-compatible server
(vLLM, Ollama, ...) via ``--base-url`` or ``OPENAI_BASE_URL``."""
from __future__ import annotations

import os

import openai

from bbagent.agent.providers.base import Completion, ProviderError, RetryPolicy, SdkProvider

KEY_VAR = "OPENAI_API_KEY"


class OpenAIProvider(SdkProvider):
    name = "openai"
    sdk = openai
    vendor = "OpenAI API"
    key_var = KEY_VAR
    base_url_fix = "--base-url / OPENAI_BASE_URL"
    reach_hint = "--base-url / OPENAI_BASE_URL for a local server"

    def __init__(self, model: str, *, base_url: str | None = None, max_output_tokens: int = 8192,
                 temperature: float | None = None, timeout_s: float = 600.0,
                 retry: RetryPolicy | None = None):
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        key = os.environ.get(KEY_VAR)
        if not key and not base_url:
            raise ProviderError(f"{KEY_VAR} is not set. Export your key (export {KEY_VAR}=sk-...), "
                                "or run the offline demo with --provider replay.")
        super().__init__(model, max_output_tokens=max_output_tokens, temperature=temperature, retry=retry)
        # Local OpenAI-compatible servers usually ignore the key; the SDK still wants one.
        self.client = openai.OpenAI(api_key=key or "unused-local-server", base_url=base_url,
                                    max_retries=0, timeout=timeout_s)

    def complete(self, messages: list[dict], *, round: int = 1, candidate: int = 0) -> Completion:
        """``candidate`` k > 0 becomes the sampling seed k, so that the candidates of one round differ
        reproducibly (the first is asked as a single-candidate run asks)."""
        def call() -> Completion:
            params = {"model": self.model, "messages": messages,
                      "max_completion_tokens": self.max_output_tokens}
            if self.temperature is not None:
                params["temperature"] = self.temperature
            if candidate:
                params["seed"] = candidate
            response = self.client.chat.completions.create(**params)
            if not response.choices:
                raise ProviderError("the OpenAI-compatible server returned no choices")
            usage = response.usage
            return Completion(text=response.choices[0].message.content or "",
                              input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                              output_tokens=getattr(usage, "completion_tokens", 0) or 0,
                              model=response.model or self.model, response_id=response.id)

        return self._retried(call)
