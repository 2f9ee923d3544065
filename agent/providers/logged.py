"""A provider wrapped with the call log (``agent.providers.call_log``): every call is recorded as it
is sent, then with its tokens and cost, a failed one with its error, each retried attempt apart;
identical requests are answered from the log only where reuse was asked for (``reuse``: ``"any"``
for ``--cache``, ``"batch"`` for a batch's ``--resume``, which reuses only the answers of its own
batch)."""
from __future__ import annotations

import json
import threading
import time

from bbagent.agent.providers.call_log import IN_FLIGHT, LLMLog, request_hash
from bbagent.agent.providers.prices import cost_usd
from bbagent.agent.errors import ProviderError
from bbagent.agent.providers.base import Completion, Provider
from bbagent.agent.providers.limiter import RateLimiter


UNANSWERED = {"response": "", "input_tokens": 0, "output_tokens": 0, "cost_usd": None, "cached": 0}


class LoggedProvider:
    def __init__(self, inner: Provider, log: LLMLog, *, run_id: str, op: str, params: dict,
                 reuse: str | None = None, batch_id: str | None = None):
        assert reuse in (None, "any", "batch"), reuse
        self.inner, self.log = inner, log
        self.name, self.model = inner.name, inner.model
        self.run_id, self.op, self.params, self.batch_id = run_id, op, params, batch_id
        self.endpoint = endpoint_of(inner)
        # A replay reads the store (or a file) in order: it is neither answered from the cache (a hit
        # would not advance it) nor written to the log (replaying must not change what it replays).
        self.replaying = inner.name == "replay"
        self.reuse = None if self.replaying or (reuse == "batch" and not batch_id) else reuse
        self._lock = threading.Lock()
        self._sending = threading.local()  # the call this thread is sending, for the retries it makes
        self._on_retry = getattr(inner, "on_retry", None)
        if hasattr(inner, "on_retry"):
            inner.on_retry = self._retrying

    @property
    def limiter(self) -> RateLimiter | None:
        """The wrapped provider's: it makes the calls this one does not answer from the log."""
        return getattr(self.inner, "limiter", None)

    @limiter.setter
    def limiter(self, limiter: RateLimiter | None) -> None:
        self.inner.limiter = limiter

    @property
    def on_retry(self):
        return self._on_retry

    @on_retry.setter
    def on_retry(self, callback) -> None:
        self._on_retry = callback

    def complete(self, messages: list[dict], *, round: int = 1, candidate: int = 0) -> Completion:
        params = {**self.params, "candidate": candidate}  # the index is part of the request
        digest = request_hash(self.name, self.model, messages, params, self.endpoint)
        hit = (self.log.answered(digest, self.batch_id if self.reuse == "batch" else None) if self.reuse
               else None)
        row = dict(run_id=self.run_id, op=self.op, round=round, candidate=candidate, provider=self.name,
                   model=self.model, request_hash=digest, params=_json(params), prompt=_json(messages),
                   endpoint=self.endpoint, batch_id=self.batch_id)
        return self._from_log(hit, row) if hit is not None else self._asked(messages, row, round, candidate)

    def _from_log(self, hit: dict, row: dict) -> Completion:
        """The answer the log already holds for this request: it costs this run nothing (a price
        unknown stays unknown) and names the run that paid for it."""
        completion = Completion(text=hit["response"], input_tokens=hit["input_tokens"],
                                output_tokens=hit["output_tokens"], model=hit["model"], cached=True,
                                cost_usd=None if hit["cost_usd"] is None else 0.0, paid_by=hit["run_id"])
        self._record(**row, response=completion.text, input_tokens=completion.input_tokens,
                     output_tokens=completion.output_tokens, cost_usd=completion.cost_usd,
                     latency_s=completion.latency_s, cached=1)
        return completion

    def _asked(self, messages: list[dict], row: dict, round: int, candidate: int) -> Completion:
        """The provider's answer, the call in the log from the moment it is sent, then completed
        with the answer or the error (a replay reads the log and writes nothing to it)."""
        started = time.perf_counter()
        sent = None if self.replaying else self._record(**row, **UNANSWERED, latency_s=0.0, error=IN_FLIGHT)
        self._sending.row, self._sending.started = row, started
        try:
            completion = self.inner.complete(messages, round=round, candidate=candidate)
        except ProviderError as exc:  # a failed call is a call: logged with its error
            if sent is not None:
                self._update(sent, latency_s=round_s(time.perf_counter() - started), error=str(exc))
            raise
        finally:
            self._sending.row = None
        completion.cost_usd = (0.0 if self.replaying  # a recorded answer costs nothing now
                               else cost_usd(self.model, completion.input_tokens, completion.output_tokens))
        if sent is not None:
            self._update(sent, response=completion.text, input_tokens=completion.input_tokens,
                         output_tokens=completion.output_tokens, cost_usd=completion.cost_usd,
                         latency_s=completion.latency_s, error=None)
        return completion

    def _record(self, **row) -> int:
        with self._lock:
            return self.log.record(**row)

    def _update(self, call_id: int, **fields) -> None:
        with self._lock:
            self.log.update(call_id, **fields)

    def _retrying(self, retry: dict) -> None:
        """The provider is about to retry: the attempt that failed is a call of its own in the log
        (a 429 answered later still cost a request), then whoever listens is told."""
        row = getattr(self._sending, "row", None)
        if row is not None and not self.replaying:
            self._record(**row, **UNANSWERED, latency_s=round_s(time.perf_counter() - self._sending.started),
                         error=f"attempt {retry.get('attempt')} of {retry.get('attempts')} failed, retried after "
                               f"{retry.get('wait_s', 0):.1f} s: {retry.get('error')}")
        if self._on_retry is not None:
            self._on_retry(retry)


def endpoint_of(provider) -> str | None:
    """The base URL a provider's client calls (None for a replay)."""
    client = getattr(provider, "client", None)
    url = getattr(client, "base_url", None)
    return str(url).rstrip("/") if url is not None else None


def round_s(seconds: float) -> float:
    return round(seconds, 3)


def _json(value) -> str:
    return json.dumps(value, sort_keys=True)
