"""The generate loop: prompt -> answer -> kernel -> verdict -> feedback, for N rounds.

One small class. The run directory is brought up to date after every step (in a
``finally``), so a crash or Ctrl-C leaves a complete record with the status it
reached: ``running`` while it works, then ``accepted``, ``failed`` (every round
failed), ``error`` (provider or harness failure) or ``interrupted``.
"""
from __future__ import annotations

import datetime as dt
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from agent.extract import extract_code
from agent.prompting import render_feedback, render_prompt, template_name
from agent.providers import Provider, ProviderError
from agent.storage import RunDir, accept_kernel, write_json

Evaluator = Callable[[str, Path], dict]


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class Outcome:
    status: str
    run_dir: Path
    rounds_used: int = 0
    accepted_dir: Path | None = None
    message: str = ""


@dataclass
class Agent:
    op: str
    provider: Provider
    evaluate: Evaluator
    run: RunDir
    root: Path
    rounds: int
    config: dict = field(default_factory=dict)
    report: Callable[[str, dict], None] = lambda event, data: None

    def __post_init__(self):
        self.state = {
            "run_id": self.run.path.name, "op": self.op, "status": "running", "started_at": _now(),
            "finished_at": None, "config": {"rounds": self.rounds, "provider": self.provider.name,
                                            "model": self.provider.model, **self.config},
            "prompt_template": template_name(self.op),
            "host": {"python": platform.python_version(), "platform": platform.platform()},
            "environment": None, "tokens": {"input": 0, "output": 0}, "rounds": [], "message": "",
        }
        self.messages: list[dict] = []

    def save(self) -> None:
        write_json(self.run.path / "run.json", self.state)

    def generate(self) -> Outcome:
        outcome = Outcome("failed", self.run.path)
        try:
            self.messages = [{"role": "user", "content": render_prompt(self.op)}]
            for n in range(1, self.rounds + 1):
                outcome.rounds_used = n
                verdict, kernel_source = self.step(n)
                if verdict is not None and verdict["verdict"] == "pass":
                    outcome.accepted_dir = self.accept(kernel_source, verdict, n)
                    outcome.status = "accepted"
                    break
            else:
                outcome.message = f"no candidate passed in {self.rounds} round(s)"
        except ProviderError as exc:
            outcome.status, outcome.message = "error", str(exc)
        except KeyboardInterrupt:
            outcome.status, outcome.message = "interrupted", "interrupted by the user (Ctrl-C)"
            raise
        except Exception as exc:  # a harness or storage bug: recorded, then shown in full
            outcome.status, outcome.message = "error", f"internal error: {type(exc).__name__}: {exc}"
            raise
        finally:
            self.state.update(status=outcome.status, finished_at=_now(), message=outcome.message,
                              rounds_used=outcome.rounds_used,
                              accepted_dir=str(outcome.accepted_dir) if outcome.accepted_dir else None)
            self.save()
        return outcome

    def step(self, n: int) -> tuple[dict | None, str | None]:
        """One round: ask, extract, evaluate, and queue the feedback for the next round."""
        round_dir = f"round-{n}"
        record = {"round": n, "outcome": "asking"}
        self.state["rounds"].append(record)
        self.run.write(f"{round_dir}/prompt.md", self.messages[-1]["content"])
        self.run.write_json(f"{round_dir}/messages.json", self.messages)
        self.save()
        self.report("asking", {"round": n, "rounds": self.rounds})
        try:
            completion = self.provider.complete(self.messages)
            self.run.write(f"{round_dir}/response.md", completion.text)
            usage = completion.model_dump(exclude={"text"})
            self.run.write_json(f"{round_dir}/usage.json", usage)
            self.state["tokens"]["input"] += completion.input_tokens
            self.state["tokens"]["output"] += completion.output_tokens
            record.update(usage=usage)

            kernel_source = extract_code(completion.text)
            if kernel_source is None:
                verdict = None
                record.update(outcome="no_code")
                feedback = render_feedback(None, no_code=True)
            else:
                kernel_path = self.run.write(f"{round_dir}/kernel.py", kernel_source)
                record.update(outcome="evaluating")
                self.save()
                self.report("evaluating", {"round": n})
                verdict = self.evaluate(self.op, kernel_path)
                self.run.write_json(f"{round_dir}/verdict.json", verdict)
                self.state["environment"] = verdict.get("environment")
                record.update(outcome=verdict["verdict"], summary=verdict["summary"],
                              error_kind=verdict["error_kind"], message=verdict["message"])
                feedback = render_feedback(verdict)
            self.report("round", {"round": n, "rounds": self.rounds, "record": record})
            self.messages += [{"role": "assistant", "content": completion.text},
                              {"role": "user", "content": feedback}]
            return verdict, kernel_source
        except KeyboardInterrupt:
            record["outcome"] = "interrupted"
            raise
        except ProviderError as exc:
            record.update(outcome="provider_error", message=str(exc))
            raise
        finally:
            self.save()

    def accept(self, kernel_source: str, verdict: dict, n: int) -> Path:
        env = verdict.get("environment", {})
        meta = {
            "op": self.op, "provider": self.provider.name, "model": self.provider.model,
            "run_id": self.run.path.name, "round": n, "rounds_used": n,
            "tokens": dict(self.state["tokens"]), "tests": verdict["summary"],
            "kernel_sha256": verdict["kernel"]["sha256"], "seed": verdict["seed"],
            "versions": {k: env.get(k) for k in ("torch", "triton", "python", "cuda")},
            "device": env.get("device"), "gpu": env.get("gpu"), "interpreter": env.get("interpreter"),
            "accepted_at": _now(),
        }
        readme = _kernel_readme(meta, verdict)
        return accept_kernel(self.root, self.op, kernel_source, meta, readme)


def _kernel_readme(meta: dict, verdict: dict) -> str:
    s = meta["tests"]
    where = meta["gpu"] or ("CPU, Triton interpreter" if meta["interpreter"] else meta["device"])
    skipped = f" ({s['skipped']} skipped: see the run's verdict.json for why)" if s["skipped"] else ""
    return (f"# {meta['op']}\n\n"
            f"Triton kernel written by `{meta['provider']}` / `{meta['model']}` in run `{meta['run_id']}` "
            f"(round {meta['round']}), accepted {meta['accepted_at']}.\n\n"
            f"- tests: {s['passed']} of {s['total']} passed on {where}{skipped}\n"
            f"- versions: torch {meta['versions']['torch']}, triton {meta['versions']['triton']}\n"
            f"- tokens: {meta['tokens']['input']} in, {meta['tokens']['output']} out\n\n"
            f"The full transcript (prompts, answers, verdicts) is in `runs/{meta['run_id']}/`.\n")
