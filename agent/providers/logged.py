"""A provider wrapped with the call log (``agent.providers.call_log``): identical requests are answered
from the log (unless the cache is off), every call is recorded with its tokens and cost."""
from __future__ import annotations

import json
import threading

from agent.providers.call_log import LLMLog, cost_usd, request_hash
from agent.providers.base import Completion, Provider


class LoggedProvider:
    def __init__(self, inner: Provider, log: LLMLog, *, run_id: str, op: str, params: dict,
                 use_cache: bool = True):
        self.inner, self.log = inner, log
        self.name, self.model = inner.name, inner.model
        self.run_id, self.op, self.params = run_id, op, params
        # A replay reads the store (or a file) in order: it is neither answered from the cache (a hit
        # would not advance it) nor written to the log (replaying must not change what it replays).
        self.replaying = inner.name == "replay"
        self.use_cache = use_cache and not self.replaying
        self._lock = threading.Lock()

    @property
    def on_retry(self):
        return self.inner.on_retry

    @on_retry.setter
    def on_retry(self, callback) -> None:
        self.inner.on_retry = callback

    def complete(self, messages: list[dict], *, round: int = 1, candidate: int = 0) -> Completion:
        params = {**self.params, "candidate": candidate}  # the index is part of the request
        digest = request_hash(self.name, self.model, messages, params)
        hit = self.log.answered(digest) if self.use_cache else None
        if hit is not None:
            completion = Completion(text=hit["response"], input_tokens=hit["input_tokens"],
                                    output_tokens=hit["output_tokens"], model=hit["model"], cached=True,
                                    cost_usd=0.0)
        else:
            completion = self.inner.complete(messages, round=round, candidate=candidate)
            completion.cost_usd = cost_usd(self.model, completion.input_tokens, completion.output_tokens)
        if self.replaying:
            return completion
        with self._lock:
            self.log.record(run_id=self.run_id, op=self.op, round=round, candidate=candidate,
                            provider=self.name, model=self.model, request_hash=digest,
                            params=_json(params), prompt=_json(messages), response=completion.text,
                            input_tokens=completion.input_tokens, output_tokens=completion.output_tokens,
                            cost_usd=completion.cost_usd, latency_s=completion.latency_s,
                            cached=int(completion.cached))
        return completion


def _json(value) -> str:
    return json.dumps(value, sort_keys=True)
