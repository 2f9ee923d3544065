"""Answer from recorded exchanges, in order, without any network.

A replay source is either a JSON file ``{"model": ..., "exchanges": [{"response": str,
"input_tokens": int, "output_tokens": int}, ...]}`` or a past run directory
(``runs/<run_id>``), whose rounds' ``response.md`` files are answered in order.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

from agent.providers.base import Completion, ProviderError

SHIPPED_REPLAYS = Path(__file__).resolve().parent.parent / "replays"
_LOCK = threading.Lock()


def shipped_replay(op: str) -> Path | None:
    path = SHIPPED_REPLAYS / f"{op}.json"
    return path if path.exists() else None


def load_exchanges(source: Path) -> tuple[str, list[dict]]:
    if source.is_dir():
        rounds = sorted(source.glob("round-*/response.md"), key=lambda p: int(p.parent.name.split("-")[1]))
        if not rounds:
            raise ProviderError(f"replay source {source} holds no round-*/response.md files")
        usage = [json.loads(p.parent.joinpath("usage.json").read_text()) if p.parent.joinpath("usage.json").exists()
                 else {} for p in rounds]
        return "replay", [{"response": p.read_text(), **u} for p, u in zip(rounds, usage)]
    try:
        data = json.loads(source.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ProviderError(f"cannot read replay file {source}: {exc}") from exc
    exchanges = data.get("exchanges")
    if not isinstance(exchanges, list) or not all(isinstance(e, dict) and "response" in e for e in exchanges):
        raise ProviderError(f"replay file {source} needs an 'exchanges' list of {{'response': ...}} objects")
    return data.get("model", "replay"), exchanges


class ReplayProvider:
    name = "replay"

    def __init__(self, source: Path):
        self.source = source
        self.model, self.exchanges = load_exchanges(source)
        self.calls = 0

    @classmethod
    def from_log(cls, log, run_id: str) -> "ReplayProvider":
        """The answers a past run received, in the order of its calls (``agent.llm_log``)."""
        replay = cls.__new__(cls)
        calls = log.calls(run_id=run_id)
        replay.source, replay.calls = f"run {run_id} in {log.path}", 0
        replay.model = calls[0]["model"]
        replay.exchanges = [{"response": c["response"], "input_tokens": c["input_tokens"],
                             "output_tokens": c["output_tokens"]} for c in calls]
        return replay

    def complete(self, messages: list[dict]) -> Completion:
        with _LOCK:  # candidates of one round ask from several threads
            if self.calls >= len(self.exchanges):
                raise ProviderError(f"replay {self.source} has only {len(self.exchanges)} recorded answers; "
                                    f"lower --rounds or record a longer run")
            exchange = self.exchanges[self.calls]
            self.calls += 1
        return Completion(text=exchange["response"], input_tokens=int(exchange.get("input_tokens", 0)),
                          output_tokens=int(exchange.get("output_tokens", 0)), model=self.model,
                          attempts=1)
