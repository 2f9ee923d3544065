"""Answer from recorded exchanges, without any network.

A replay source is a JSON file ``{"model": ..., "exchanges": [{"response": str, "input_tokens":
int, "output_tokens": int}, ...]}``, a past run directory (``runs/<run_id>``: ``round-N/response.md``,
or ``round-N/candidate-K/response.md`` for a run with several candidates per round), or a run in
the call log (``agent.providers.call_log``). Exchanges that know their round and candidate (run directories,
the call log, JSON entries with ``round`` and ``candidate``) answer exactly that call: the
candidates of one round are asked from several threads, in no fixed order. Others answer in order.
A JSON file may hold ``"latency_s"``: each answer then takes that long, as a model's would (for
benchmarks of the batch). A directory of ``<op>.json`` files serves a batch: each operator its file.
"""
from __future__ import annotations

import json
import re
import threading
import time
from contextlib import nullcontext
from pathlib import Path

from bbagent.agent.providers.base import Completion, ProviderError
from bbagent.agent.providers.limiter import RateLimiter
from bbagent.agent.run_record import read_run

SHIPPED_REPLAYS = Path(__file__).resolve().parent / "replays"
_LOCK = threading.Lock()


def shipped_replay(op: str) -> Path | None:
    path = SHIPPED_REPLAYS / f"{op}.json"
    return path if path.exists() else None


def _number(path: Path) -> int:
    found = re.search(r"(\d+)$", path.name)
    if found is None:
        raise ValueError(f"{path.name}: a replay file's name ends in its number")
    return int(found.group(1))


def _from_run_dir(source: Path) -> tuple[str, list[dict]]:
    """Every answer a run directory holds, with its round and candidate (from 0)."""
    def exchange(response: Path, round_: int, candidate: int) -> dict:
        usage_file = response.parent / "usage.json"
        usage = json.loads(usage_file.read_text()) if usage_file.exists() else {}
        return {"response": response.read_text(), "input_tokens": usage.get("input_tokens", 0),
                "output_tokens": usage.get("output_tokens", 0), "round": round_, "candidate": candidate}
    exchanges = []
    for round_dir in sorted(source.glob("round-*"), key=_number):
        if (round_dir / "response.md").exists():
            exchanges.append(exchange(round_dir / "response.md", _number(round_dir), 0))
        for candidate_dir in sorted(round_dir.glob("candidate-*"), key=_number):
            if (candidate_dir / "response.md").exists():
                exchanges.append(exchange(candidate_dir / "response.md", _number(round_dir), _number(candidate_dir) - 1))
    if not exchanges:
        raise ProviderError(f"replay source {source} holds no round-*/response.md or "
                            "round-*/candidate-*/response.md files: it is not a run directory")
    record = read_run(source)
    model = (record.config.model if record is not None and record.config is not None else None) or "replay"
    return model, exchanges


def _from_file(source: Path) -> tuple[str, list[dict], float]:
    try:
        data = json.loads(source.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProviderError(f"cannot read replay file {source}: {exc}") from exc
    exchanges = data.get("exchanges") if isinstance(data, dict) else None
    if not isinstance(exchanges, list) or not all(isinstance(e, dict) and "response" in e for e in exchanges):
        raise ProviderError(f"replay file {source} needs an 'exchanges' list of {{'response': ...}} objects")
    latency = data.get("latency_s", 0.0)
    if not isinstance(latency, (int, float)) or latency < 0:
        raise ProviderError(f"replay file {source}: 'latency_s' must be a number of seconds, 0 or more")
    return data.get("model", "replay"), exchanges, float(latency)


class ReplayProvider:
    name = "replay"

    def __init__(self, source: str, model: str, exchanges: list[dict], latency_s: float = 0.0):
        self.source, self.model, self.latency_s = source, model, latency_s
        self.limiter: RateLimiter | None = None  # a batch's shared rate limiter
        self.keyed = {(e["round"], e["candidate"]): e for e in exchanges if "round" in e and "candidate" in e}
        self.in_order = [e for e in exchanges if not ("round" in e and "candidate" in e)]
        self.calls = 0
        self.on_retry = None  # nothing to retry

    @classmethod
    def from_path(cls, source: Path) -> "ReplayProvider":
        if source.is_dir():
            return cls(str(source), *_from_run_dir(source))
        return cls(str(source), *_from_file(source))

    @classmethod
    def from_log(cls, log, run_id: str) -> "ReplayProvider":
        """The answers a past run received, by round and candidate (``agent.providers.call_log``)."""
        calls = [c for c in log.calls(run_id=run_id) if not c.get("error")]  # failed calls answered nothing
        exchanges = [{"response": c["response"], "input_tokens": c["input_tokens"], "output_tokens": c["output_tokens"],
                      "round": c["round"], "candidate": c["candidate"]} for c in calls]
        return cls(f"run {run_id} in {log.path}", calls[0]["model"], exchanges)

    def complete(self, messages: list[dict], *, round: int = 1, candidate: int = 0) -> Completion:
        with _LOCK:  # candidates of one round ask from several threads
            if self.keyed:
                exchange = self.keyed.get((round, candidate))
                if exchange is None:
                    raise ProviderError(f"replay {self.source} holds no answer for round {round}, candidate "
                                        f"{candidate + 1} (the recorded run did not get one, or had fewer rounds "
                                        "or candidates)")
            else:
                if self.calls >= len(self.in_order):
                    raise ProviderError(f"replay {self.source} has only {len(self.in_order)} recorded answers; "
                                        f"lower --rounds or record a longer run")
                exchange = self.in_order[self.calls]
            self.calls += 1
        if self.latency_s:
            with self.limiter.attempt() if self.limiter is not None else nullcontext():
                time.sleep(self.latency_s)
        return Completion(text=exchange["response"], input_tokens=int(exchange.get("input_tokens") or 0),
                          output_tokens=int(exchange.get("output_tokens") or 0), model=self.model, attempts=1)
