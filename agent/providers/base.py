"""What every provider shares: the protocol, the Completion record, errors that name their fix,
bounded retries with a notice before each wait.

A provider is any object with ``name``, ``model``, ``on_retry`` and
``complete(messages, *, round, candidate) -> Completion``, where ``messages`` is a list of
``{"role": "user" | "assistant", "content": str}``, ``round`` the round (from 1) and ``candidate``
the index of the answer within the round (from 0). A provider uses them as it can: OpenAI turns
the candidate into its sampling seed, a replay looks the recorded answer up by them, the call log
files the call under them.
"""
from __future__ import annotations

import socket
import time
from contextlib import nullcontext
from typing import Any, Callable, Protocol

from pydantic import BaseModel
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential, wait_random

from bbagent.agent.errors import ProviderError
from bbagent.agent.providers.limiter import RateLimiter, retry_after_s
from bbagent.agent.run_record import Usage


class Completion(Usage):
    """An answer: its text, and what it cost (``Usage``: tokens, time, attempts, price; run.json and
    ``usage.json`` keep that part)."""
    text: str


class Provider(Protocol):
    name: str
    model: str
    on_retry: Callable[[dict], None] | None  # told before each retry wait: attempt, attempts, wait_s, error
    limiter: RateLimiter | None  # a batch's shared rate limiter, gating every attempt; None alone

    def complete(self, messages: list[dict], *, round: int = 1, candidate: int = 0) -> Completion: ...


class RetryPolicy(BaseModel):
    """Bounded retries on 429, 5xx, timeouts and dropped connections."""

    attempts: int = 5
    initial_wait_s: float = 2.0
    max_wait_s: float = 60.0


def call_with_retries(call: Callable[[], Completion], is_transient: Callable[[BaseException], bool],
                      explain: Callable[[BaseException], str], policy: RetryPolicy,
                      on_retry: Callable[[dict], None] | None = None, limiter=None) -> Completion:
    """Run ``call``; retry transient errors up to ``policy.attempts`` times, never others.
    ``on_retry`` hears of each retry before its wait, so that a user is not left in silence.
    ``limiter`` (``agent.providers.limiter.RateLimiter``, shared by a batch) gates every attempt
    and hears of every 429, so that all calls back off together."""
    attempts = 0

    def notify(state) -> None:
        exc = state.outcome.exception()
        wait_s = state.next_action.sleep if state.next_action else 0.0
        if limiter is not None and status_code(exc) == 429:
            limiter.back_off(max(wait_s, retry_after_s(exc) or 0.0))
        if on_retry is not None:
            most = UNREACHABLE_ATTEMPTS if unreachable(exc) else policy.attempts
            on_retry({"attempt": state.attempt_number, "attempts": most, "wait_s": wait_s,
                      "status": status_code(exc), "error": explain(exc)})

    def counted() -> Completion:
        nonlocal attempts
        attempts += 1
        with limiter.attempt() if limiter is not None else nullcontext():
            return call()

    backoff = (wait_exponential(multiplier=policy.initial_wait_s, max=policy.max_wait_s)
               + wait_random(0, policy.initial_wait_s))
    every_attempt = stop_after_attempt(policy.attempts)

    def stop(state) -> bool:  # nothing listening at the endpoint: one quick second try, not a minute of them
        return every_attempt(state) or (state.attempt_number >= UNREACHABLE_ATTEMPTS
                                        and unreachable(state.outcome.exception()) is not None)

    def wait(state) -> float:
        return UNREACHABLE_WAIT_S if unreachable(state.outcome.exception()) else backoff(state)

    started = time.perf_counter()
    try:
        completion = Retrying(
            stop=stop,
            wait=wait,
            retry=retry_if_exception(is_transient),
            before_sleep=notify,
            reraise=True,
        )(counted)
    except Exception as exc:
        prefix = f"gave up after {attempts} attempts: " if is_transient(exc) else ""
        raise ProviderError(prefix + explain(exc), transient=is_transient(exc)) from exc
    completion.latency_s = round(time.perf_counter() - started, 3)
    completion.attempts = attempts
    return completion


UNREACHABLE_ATTEMPTS = 2
UNREACHABLE_WAIT_S = 1.0


def unreachable(exc: BaseException | None) -> str | None:
    """Why nothing answered at all, where the cause says so: ``connection refused`` (nothing listens
    at that host and port) or ``unknown host`` (the name does not resolve); None otherwise."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        text = str(exc)
        if isinstance(exc, ConnectionRefusedError) or "Connection refused" in text or "[Errno 111]" in text:
            return "connection refused"
        if isinstance(exc, socket.gaierror) or "Name or service not known" in text or "nodename nor servname" in text:
            return "unknown host"
        exc = exc.__cause__ or exc.__context__
    return None


def unreachable_message(exc: BaseException, vendor: str, url, fix: str) -> str | None:
    """The message for an endpoint that did not answer at all, naming it and the fix; else None."""
    why = unreachable(exc)
    if why == "connection refused":
        return (f"connection refused at {url}: nothing is listening there. Start the server, or fix {fix}")
    if why == "unknown host":
        return f"the host of {url} is unknown (its name does not resolve). Fix {fix}"
    return None


def status_code(exc: BaseException) -> int | None:
    return getattr(exc, "status_code", None)


def transient_errors(sdk) -> Callable[[BaseException], bool]:
    """Retry rule shared by the OpenAI and Anthropic SDKs (same exception names):
    timeouts, dropped connections, 429 and 5xx (Anthropic's 529 'overloaded' included)."""
    def is_transient(exc: BaseException) -> bool:
        if isinstance(exc, (sdk.APITimeoutError, sdk.APIConnectionError, sdk.RateLimitError)):
            return True
        code = status_code(exc)
        return code is not None and (code == 429 or code >= 500)
    return is_transient


def explain_http_error(exc: BaseException, *, vendor: str, key_var: str, model: str) -> str:
    """A message for an SDK error that names the fix."""
    code = status_code(exc)
    detail = str(getattr(exc, "message", None) or exc)[:300]
    if code == 401:
        return (f"{vendor} rejected the API key in {key_var} (401 Unauthorized). "
                f"Set a valid key: export {key_var}=...")
    if code == 403:
        return f"{vendor} refused the request (403 Forbidden): {detail}. Check that the key in {key_var} may use model '{model}'."
    if code == 404:
        return f"{vendor} does not know model '{model}' or the endpoint (404): {detail}. Check --model and --base-url."
    if code == 400:
        return f"{vendor} rejected the request (400 Bad Request): {detail}. Check --model '{model}' and --max-output-tokens."
    if code == 429:
        return f"{vendor} rate limit or quota exceeded (429): {detail}. Wait, or raise your quota."
    if code is not None and code >= 500:
        return f"{vendor} server error ({code}): {detail}. The service may be down; try again later."
    return f"{vendor} request failed ({type(exc).__name__}): {detail}"


class SdkProvider:
    """What the SDK providers (``openai_provider``, ``anthropic_provider``) share: their settings,
    every call retried through ``call_with_retries`` under a batch's shared limiter, and a failure
    explained in words. A subclass names its ``sdk`` module, ``vendor``, key variable and where a
    base URL is set, builds ``self.client`` and makes one call (``complete``)."""
    name = ""
    sdk: Any = None  # the SDK's module
    vendor = ""
    key_var = ""
    base_url_fix = ""  # where the user sets the endpoint
    reach_hint = ""  # what to check when it cannot be reached

    def __init__(self, model: str, *, max_output_tokens: int, temperature: float | None,
                 retry: RetryPolicy | None):
        self.model = model
        self.max_output_tokens = max_output_tokens
        self.temperature = temperature
        self.retry = retry or RetryPolicy()
        self.on_retry: Callable[[dict], None] | None = None
        self.limiter: RateLimiter | None = None  # a batch's shared rate limiter
        self.is_transient = transient_errors(self.sdk)
        self.client: Any = None

    def _retried(self, call: Callable[[], Completion]) -> Completion:
        return call_with_retries(call, self.is_transient, self._explain, self.retry, self.on_retry, self.limiter)

    def _explain(self, exc: BaseException) -> str:
        if isinstance(exc, ProviderError):
            return str(exc)
        if isinstance(exc, self.sdk.APIConnectionError):
            refused = unreachable_message(exc, self.vendor, self.client.base_url, self.base_url_fix)
            if refused:
                return refused
            return (f"cannot reach the {self.vendor} at {self.client.base_url} ({exc}). "
                    f"Check your network, or {self.reach_hint}.")
        return explain_http_error(exc, vendor=self.vendor, key_var=self.key_var, model=self.model)
