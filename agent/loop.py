"""The generate loop: prompt -> answer -> kernel -> verdict -> feedback, for N rounds.

One small class. Rounds first aim at a correct kernel; once one is correct and was timed
(GPU), the next rounds aim at speed: the feedback lists per-shape speedups, the slowest shapes
and the bandwidth gap, and the best correct kernel seen so far (highest geometric-mean
speedup) is what ``generated_kernels/`` holds. The loop stops when that best kernel reaches
``target_speedup``, when the rounds run out, or at once after the first correct kernel where
nothing could be timed (CPU). Slower correct kernels stay in ``runs/`` only.

The run directory is brought up to date after every step (in a ``finally``), so a crash or
Ctrl-C leaves a complete record with the status it reached: ``running`` while it works, then
``accepted``, ``failed`` (every round failed), ``stopped`` (the cost or token budget ran out
before a kernel was accepted), ``error`` (provider or harness failure) or ``interrupted``.
"""
from __future__ import annotations

import datetime as dt
import platform
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from agent.extract import extract_code
from agent.prompting import elide, render_feedback, render_performance_feedback, render_prompt, template_name
from agent.providers import Provider, ProviderError
from agent.review.lifecycle import install
from agent.storage import RunDir, write_json
from harness.verdict import Verdict

Evaluator = Callable[[str, Path], Verdict]
HISTORY_ROUNDS = 3          # earlier rounds summarised in each feedback message
FEEDBACK_CHARS = 16000      # the feedback message is elided head-and-tail beyond this
BEST_KERNEL_CHARS = 8000


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class Outcome:
    status: str
    run_dir: Path
    rounds_used: int = 0
    accepted_dir: Path | None = None
    message: str = ""
    state: dict = field(default_factory=dict)  # run.json as last written: tokens, cost, rounds, ...
    transient: bool = False  # status "error" from a provider that may answer later (outage, rate limit)


@dataclass
class Best:
    """The best correct kernel so far: its round, source, Verdict and geomean speedup (None untimed)."""
    round: int
    source: str
    verdict: Verdict
    speedup: float | None


def _fast_p(verdict: Verdict) -> dict | None:
    """fast_p of a timed Verdict (share of shapes at least p times faster than eager), else None."""
    summary = verdict.performance.summary if verdict.performance is not None else None
    return dict(summary.fast_p) if summary is not None else None


def _baseline_speedups(verdict: Verdict) -> dict | None:
    """The geomean speedups over compiled baselines (``{"inductor": x}``) of a timed Verdict."""
    found = {name: verdict.baseline_speedup(name) for name in ((verdict.performance.baselines if verdict.performance
                                                                else None) or {})}
    return {name: value for name, value in found.items() if value is not None} or None


def timed_on(verdict: Verdict) -> str | None:
    """The GPU model a Verdict's speedups were measured on (None: not timed)."""
    performance = verdict.performance
    return performance.gpu if performance is not None and performance.measured else None


def beats(verdict: Verdict, best: Best | None) -> bool:
    """Whether a correct kernel replaces ``best``: the first one always does, a later one when it
    was timed and is faster, on the same GPU model (speedups on two models do not compare: a
    cluster's executor keeps an operator on one model while it can)."""
    if best is None:
        return True
    speedup = verdict.geomean_speedup()
    if speedup is None:
        return False
    if best.speedup is None:
        return True
    return timed_on(verdict) == timed_on(best.verdict) and speedup > best.speedup


@dataclass
class Candidate:
    """One answer of a round: its index, completion (None: the call failed), kernel source and
    Verdict (None: no code, or no answer)."""
    number: int
    completion: object
    source: str | None
    verdict: Verdict | None
    record: dict


def choose(tried: list[Candidate]) -> Candidate:
    """The round's result: the fastest correct candidate (the first, if none was timed), else
    the one that passed most tests, else the first."""
    correct = [c for c in tried if c.verdict is not None and c.verdict.passed]
    if correct:
        timed = [c for c in correct if c.verdict.geomean_speedup() is not None]
        if not timed:
            return correct[0]
        comparable = [c for c in timed if timed_on(c.verdict) == timed_on(timed[0].verdict)]
        return max(comparable, key=lambda c: c.verdict.geomean_speedup())
    evaluated = [c for c in tried if c.verdict is not None]
    answered = [c for c in tried if c.completion is not None]  # never empty: a round with no answer raised
    return max(evaluated, key=lambda c: c.verdict.summary.passed) if evaluated else answered[0]


def candidate_line(c: Candidate) -> str:
    if c.completion is None:
        return f"no answer ({c.record['message'][:160]})"
    if c.verdict is None:
        return "no code block"
    s = c.verdict.summary
    line = f"{c.verdict.verdict.upper()} {s.passed}/{s.total} tests"
    if c.verdict.passed:
        speedup = c.verdict.geomean_speedup()
        return line + (f", geomean {speedup:.3g}x eager" if speedup is not None else "")
    detail = (c.verdict.message or c.verdict.error_kind or "").splitlines()
    return line + (f" ({detail[0][:160]})" if detail else "")


def round_summary(n: int, tried: list[Candidate], pick: Candidate) -> str:
    if len(tried) == 1:
        return f"round {n}: {candidate_line(pick)}"
    correct = sum(1 for c in tried if c.verdict is not None and c.verdict.passed)
    return f"round {n}: {correct} of {len(tried)} candidates correct; picked candidate {pick.number + 1}: {candidate_line(pick)}"


@dataclass
class Agent:
    op: str
    provider: Provider
    evaluate: Evaluator
    run: RunDir
    root: Path
    rounds: int
    target_speedup: float = 1.0
    target_baseline: str = "eager"  # what target_speedup is measured against: eager, or inductor
    candidates: int = 1
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    config: dict = field(default_factory=dict)
    report: Callable[[str, dict], None] = lambda event, data: None
    serves: list[str] = field(default_factory=list)  # every overload the kernel is tested and served as (op first)
    device: str | None = None  # where the candidates run (the prompt says what that means); None: the default
    channels_last: bool = False  # trace inputs are also tested channels-last (the prompt says so)

    def __post_init__(self):
        self.state = {
            "run_id": self.run.path.name, "op": self.op, "status": "running", "started_at": _now(),
            "finished_at": None, "config": {"rounds": self.rounds, "candidates": self.candidates,
                                            "target_speedup": self.target_speedup,
                                            "target_baseline": self.target_baseline,
                                            "provider": self.provider.name, "model": self.provider.model,
                                            **self.config},
            "prompt_template": template_name(self.op), "serves": self.serves or [self.op],
            "host": {"python": platform.python_version(), "platform": platform.platform()},
            "environment": None, "tokens": {"input": 0, "output": 0}, "cost_usd": 0.0, "cost_complete": True,
            "cached_calls": 0, "rounds": [], "message": "",
        }
        self.messages: list[dict] = []
        self.best: Best | None = None
        self.history: list[str] = []  # one line per round, the last HISTORY_ROUNDS go into the feedback

    def save(self) -> None:
        write_json(self.run.path / "run.json", self.state)

    def generate(self) -> Outcome:
        outcome = Outcome("failed", self.run.path)
        try:
            self.messages = [{"role": "user", "content": render_prompt(self.op, also_serves=self.serves[1:], device=self.device,
                                                                      channels_last=self.channels_last)}]
            for n in range(1, self.rounds + 1):
                spent = self.over_budget()
                if spent:
                    outcome.message = f"stopped before round {n}: {spent}" + (
                        f"; {self.summary_of_best()}" if self.best else "; no kernel was accepted")
                    outcome.status = "accepted" if self.best else "stopped"
                    break
                outcome.rounds_used = n
                verdict, kernel_source = self.step(n)
                if verdict is not None and verdict.passed:
                    self.consider(kernel_source, verdict, n)
                    outcome.status, outcome.accepted_dir = "accepted", self.root / "generated_kernels" / self.op
                    stop = self.stop_reason()
                    if stop:
                        outcome.message = stop
                        break
            else:
                outcome.message = (self.summary_of_best() + f"; the {self.rounds} round(s) ran out" if self.best
                                   else f"no candidate passed in {self.rounds} round(s)")
        except ProviderError as exc:
            if self.best is None:
                outcome.status, outcome.message, outcome.transient = "error", str(exc), exc.transient
            else:  # a correct kernel is already accepted: the provider only cut optimisation short
                outcome.message = f"{self.summary_of_best()}; optimisation stopped by a provider error: {exc}"
        except KeyboardInterrupt:
            outcome.status, outcome.message = "interrupted", "interrupted by the user (Ctrl-C)"
            raise
        except Exception as exc:  # a harness or storage bug: recorded, then shown in full
            cause = "" if getattr(exc, "infrastructure", False) else "internal error: "  # e.g. a lost GPU
            outcome.status, outcome.message = "error", f"{cause}{type(exc).__name__}: {exc}"
            raise
        finally:
            self.state.update(status=outcome.status, finished_at=_now(), message=outcome.message,
                              rounds_used=outcome.rounds_used,
                              accepted_dir=str(outcome.accepted_dir) if outcome.accepted_dir else None,
                              best_round=self.best.round if self.best else None,
                              best_speedup=self.best.speedup if self.best else None,
                              best_fast_p=_fast_p(self.best.verdict) if self.best else None,
                              best_gpu=(self.best.verdict.environment.gpu or self.best.verdict.environment.device)
                              if self.best else None,
                              best_baseline_speedups=_baseline_speedups(self.best.verdict) if self.best else None)
            self.save()
            outcome.state = self.state
        return outcome

    def over_budget(self) -> str | None:
        """Why no further call may be made, or None. Checked between rounds: a round's calls
        are never cut off half-way, so the run directory stays complete."""
        cost, tokens = self.state["cost_usd"], self.state["tokens"]["input"] + self.state["tokens"]["output"]
        if self.max_cost_usd is not None and cost >= self.max_cost_usd:
            return f"the cost budget is spent (${cost:.4f} of --max-cost-usd {self.max_cost_usd:g})"
        if self.max_tokens is not None and tokens >= self.max_tokens:
            return f"the token budget is spent ({tokens} of --max-tokens {self.max_tokens})"
        return None

    def count(self, completion) -> None:
        self.state["tokens"]["input"] += completion.input_tokens
        self.state["tokens"]["output"] += completion.output_tokens
        if completion.cost_usd is None:
            self.state["cost_complete"] = False  # a model without a price: the total is a lower bound
        else:
            self.state["cost_usd"] += completion.cost_usd
        self.state["cached_calls"] += int(completion.cached)

    def consider(self, kernel_source: str, verdict: Verdict, n: int) -> None:
        """Install a correct kernel if it is the first, or faster than the best so far."""
        if beats(verdict, self.best):
            speedup = verdict.geomean_speedup()
            if self.best is not None:
                self.report("best", {"round": n, "speedup": speedup, "replaces": self.best.round})
            self.best = Best(n, kernel_source, verdict, speedup)
            self.accept(kernel_source, verdict, n)

    def stop_reason(self) -> str | None:
        best = self.best
        if best.speedup is None:
            performance = best.verdict.performance
            reason = (performance.reason if performance is not None else None) or "it was not timed"
            return f"{self.summary_of_best()}; no optimisation rounds: {reason}"
        if self.target_baseline != "eager":
            over = best.verdict.baseline_speedup(self.target_baseline)
            if over is not None:
                if over >= self.target_speedup:
                    return (f"{self.summary_of_best()}; reached the target speedup {self.target_speedup:g}x over "
                            f"{self.target_baseline} ({over:.3g}x)")
                return None
            # no figure over that baseline (it compiled no shape): the target holds against eager
        if best.speedup >= self.target_speedup:
            return f"{self.summary_of_best()}; reached the target speedup {self.target_speedup:g}x"
        return None

    def summary_of_best(self) -> str:
        speed = f", geomean speedup {self.best.speedup:.3g}x over eager" if self.best.speedup is not None else ""
        return f"accepted the kernel of round {self.best.round}{speed}"

    def step(self, n: int) -> tuple[Verdict | None, str | None]:
        """One round: ask for ``candidates`` answers (in parallel), evaluate every kernel, pick the
        round's result (the fastest correct one, else the first correct, else the one passing most
        tests) and build the next prompt from it."""
        round_dir = f"round-{n}"
        record = {"round": n, "outcome": "asking"}
        self.state["rounds"].append(record)
        self.run.write(f"{round_dir}/prompt.md", self.messages[-1]["content"])
        self.run.write_json(f"{round_dir}/messages.json", self.messages)
        self.save()
        self.report("asking", {"round": n, "rounds": self.rounds, "candidates": self.candidates})
        try:
            tried = []
            for k, answer in enumerate(self.ask(n)):
                where = round_dir if self.candidates == 1 else f"{round_dir}/candidate-{k + 1}"
                tried.append(self.no_answer(n, k, where, answer) if isinstance(answer, ProviderError)
                             else self.try_candidate(n, k, where, answer))
            pick = choose(tried)
            record.update(pick.record)
            if self.candidates > 1:
                record.update(candidates=[c.record for c in tried], picked=pick.number + 1)
            self.report("round", {"round": n, "rounds": self.rounds, "record": record})
            feedback = (render_feedback(None, no_code=True) if pick.verdict is None
                        else self.feedback(pick.verdict, n))
            self.history.append(round_summary(n, tried, pick))
            self.messages = [self.messages[0], {"role": "assistant", "content": pick.completion.text},
                             {"role": "user", "content": self.compose(feedback, tried, pick)}]
            return pick.verdict, pick.source
        except KeyboardInterrupt:
            record["outcome"] = "interrupted"
            raise
        except ProviderError as exc:
            record.update(outcome="provider_error", message=str(exc))
            raise
        finally:
            self.save()

    def ask(self, n: int) -> list:
        """One answer per candidate of round ``n``, asked in parallel, in candidate order: a
        Completion, or the ProviderError of a call that failed for good. The round fails only if
        every call failed."""
        if self.candidates == 1:
            return [self.provider.complete(self.messages, round=n, candidate=0)]
        with ThreadPoolExecutor(max_workers=self.candidates) as pool:
            futures = [pool.submit(self.provider.complete, self.messages, round=n, candidate=k)
                       for k in range(self.candidates)]
        answers = []
        for future in futures:
            try:
                answers.append(future.result())
            except ProviderError as exc:
                answers.append(exc)
        if all(isinstance(a, ProviderError) for a in answers):
            raise answers[0]
        return answers

    def no_answer(self, n: int, k: int, where: str, error: ProviderError) -> "Candidate":
        """A candidate whose call failed: recorded with its error, its index kept."""
        self.run.write(f"{where}/error.txt", f"{error}\n")
        record = {"outcome": "provider_error", "message": str(error)}
        self.report("candidate", {"round": n, "candidate": k + 1, "record": record})
        return Candidate(k, None, None, None, record)

    def try_candidate(self, n: int, k: int, where: str, completion) -> "Candidate":
        """Store one answer, extract its kernel and evaluate it."""
        self.run.write(f"{where}/response.md", completion.text)
        usage = completion.model_dump(exclude={"text"})
        self.run.write_json(f"{where}/usage.json", usage)
        self.count(completion)
        record = {"usage": usage}
        source = extract_code(completion.text)
        if source is None:
            record.update(outcome="no_code")
            return Candidate(k, completion, None, None, record)
        kernel_path = self.run.write(f"{where}/kernel.py", source)
        self.save()
        self.report("evaluating", {"round": n, "candidate": k + 1, "candidates": self.candidates})
        verdict = self.evaluate(self.op, kernel_path)
        self.run.write(f"{where}/verdict.json", verdict.model_dump_json(indent=2) + "\n")
        self.state["environment"] = verdict.environment.model_dump()
        record.update(outcome=verdict.verdict, summary=verdict.summary.model_dump(), error_kind=verdict.error_kind,
                      message=verdict.message)
        if verdict.passed:
            record["speedup"] = verdict.geomean_speedup()
        if self.candidates > 1:
            self.report("candidate", {"round": n, "candidate": k + 1, "record": record})
        return Candidate(k, completion, source, verdict, record)

    def compose(self, feedback: str, tried: list, pick: "Candidate") -> str:
        """The next user message: recent rounds, this round's candidates, the feedback on the
        picked one and, when that one is not the best kernel so far, the best kernel itself;
        trimmed head-and-tail to ``FEEDBACK_CHARS``."""
        parts = []
        if len(self.history) > 1:
            parts.append("Recent rounds:\n" + "\n".join(f"- {line}" for line in self.history[-HISTORY_ROUNDS:]))
        if len(tried) > 1:
            parts.append(f"This round's {len(tried)} candidates:\n" + "\n".join(
                f"- candidate {c.number + 1}: {candidate_line(c)}" for c in tried)
                + f"\nThe feedback below is about candidate {pick.number + 1}.")
        parts.append(feedback.strip())
        best = self.best  # of the earlier rounds: shown when this round's pick does not replace it
        if best is not None and not (pick.verdict is not None and pick.verdict.passed and beats(pick.verdict, best)):
            parts.append(f"Your best correct kernel so far (round {best.round}):\n```python\n"
                         f"{elide(best.source, BEST_KERNEL_CHARS)}```")
        return elide("\n\n".join(parts), FEEDBACK_CHARS) + "\n"

    def feedback(self, verdict: Verdict, n: int) -> str:
        """What the model reads next: its failures, or, for a correct and timed kernel, its speed.
        ``self.best`` is still the best kernel of the rounds before this one."""
        if verdict.passed and verdict.geomean_speedup() is not None:
            return render_performance_feedback(verdict, previous_best=self.best, target=self.target_speedup,
                                               target_baseline=self.target_baseline)
        return render_feedback(verdict, best=self.best)

    def accept(self, kernel_source: str, verdict: Verdict, n: int) -> None:
        env = verdict.environment
        meta = {
            "op": self.op, "written_for": self.op, "serves": served_overloads(verdict, self.op),
            "not_served": [v.op for v in verdict.variants if not v.ok],
            "variants": [v.model_dump() for v in verdict.variants], "provider": self.provider.name,
            "model": self.provider.model, "run_id": self.run.path.name, "round": n, "rounds_used": n,
            "tokens": dict(self.state["tokens"]), "cost_usd": round(self.state["cost_usd"], 6),
            "cost_complete": self.state["cost_complete"], "tests": verdict.summary.model_dump(),
            "kernel_sha256": verdict.kernel.sha256, "seed": verdict.seed,
            "versions": {"torch": env.torch, "triton": env.triton, "python": env.python, "cuda": env.cuda},
            "device": env.device, "gpu": env.gpu, "interpreter": env.interpreter,
            "accepted_at": _now(), "performance": performance_record(verdict),
            "target_speedup": self.target_speedup, "target_baseline": self.target_baseline,
            "round_speedups": {r["round"]: r.get("speedup") for r in self.state["rounds"] if r.get("outcome") == "pass"},
        }
        meta.update(dtypes=sorted({t.dtype for t in verdict.tests if t.passed and t.dtype}),
                    earlier_guard_findings=_guard_findings(self.state["rounds"]),
                    tolerance_used_max=max((t.tolerance_used for t in verdict.tests if t.tolerance_used is not None),
                                           default=None))
        meta = install(self.root, self.op, kernel_source, meta, _kernel_readme)
        replaced = meta.get("replaced")
        if replaced and replaced["status"] == "approved":
            self.report("replaced_approved", {"round": n, **replaced})


def _guard_findings(rounds: list[dict]) -> list[dict]:
    """Every guard failure of the run's rounds and candidates so far: a reviewer should know that
    the model tried to call aten, patch torch or read the harness before it got this kernel."""
    found = []
    for record in rounds:
        for item in [record, *record.get("candidates", [])]:
            if item.get("error_kind") == "guard":
                found.append({"round": record.get("round"), "message": (item.get("message") or "")[:300]})
    return found


def served_overloads(verdict: Verdict, op: str) -> list[str]:
    """The overloads a passing kernel serves: those whose own tests ran and all passed (an
    overload of the family without any test of its own is not served)."""
    return [v.op for v in verdict.variants if v.ok] or [op]


def performance_record(verdict: Verdict) -> dict:
    """The speed part of meta.json: the metrics and every timed shape's numbers."""
    performance = verdict.performance
    if performance is None:
        return {"measured": False, "reason": "timing was not asked for"}
    if not performance.measured:
        return {"measured": False, "reason": performance.reason}
    shapes = [{"input": t.input, "mode": t.mode, "aten_ms": t.aten.median_ms, "kernel_ms": t.candidate.median_ms,
               "speedup": t.speedup, "bytes": t.bytes, "kernel_gbs": t.candidate_gbs,
               "overhead_dominated": t.overhead_dominated}
              for t in performance.tests]
    return {"measured": True, "gpu": performance.gpu, "device": performance.device.model_dump(),
            "summary": performance.summary.model_dump(), "shapes": shapes}


def _kernel_readme(meta: dict) -> str:
    s = meta["tests"]
    where = meta["gpu"] or ("CPU, Triton interpreter" if meta["interpreter"] else meta["device"])
    skipped = f" ({s['skipped']} skipped: see the run's verdict.json for why)" if s["skipped"] else ""
    return (f"# {meta['op']}\n\n"
            f"Triton kernel written by `{meta['provider']}` / `{meta['model']}` in run `{meta['run_id']}` "
            f"(round {meta['round']}), accepted {meta['accepted_at']}: version {meta['version']}, "
            f"review status `{meta['review']['status']}` (`bbagent review show {meta['op']}`).\n"
            f"{_replaced_line(meta)}\n"
            f"- tests: {s['passed']} of {s['total']} passed on {where}{skipped}\n"
            f"{_serves_line(meta)}"
            f"- versions: torch {meta['versions']['torch']}, triton {meta['versions']['triton']}\n"
            f"- speed: {_speed_line(meta['performance'])}\n"
            f"- tokens: {meta['tokens']['input']} in, {meta['tokens']['output']} out, "
            f"cost ${meta['cost_usd']:.4f}{'' if meta['cost_complete'] else ' (at least: a model had no price)'}\n\n"
            f"The full transcript (prompts, answers, verdicts) is in `runs/{meta['run_id']}/`.\n")


def _replaced_line(meta: dict) -> str:
    replaced = meta.get("replaced")
    if not replaced:
        return ""
    return (f"It replaces version {replaced['version']} ({replaced['status']}, run `{replaced['run_id']}`), "
            f"kept in `{replaced['where']}/`.\n")


def _serves_line(meta: dict) -> str:
    """The overloads served, with each one's tests; empty for a kernel serving its own overload only."""
    variants = meta.get("variants") or []
    if len(variants) < 2:
        return ""
    line = "- serves: " + "; ".join(f"`{v['op']}` ({served_how(v)}, {v['passed']} tests passed)"
                                    for v in variants if v["ok"]) + "\n"
    if meta.get("not_served"):
        line += f"- not served (no test of their own ran): {', '.join(meta['not_served'])}\n"
    return line


def served_how(variant: dict) -> str:
    """How one overload is served, in words (a Verdict's ``variants`` row)."""
    if variant["served_by"] == "kernel":
        return "the kernel itself"
    written = "self" if variant["convention"] == "inplace" else "out"
    return f"bbagent's adapter copies the functional result into {written}"


def _speed_line(performance: dict) -> str:
    if not performance["measured"]:
        return f"not measured ({performance['reason']})"
    summary = performance["summary"]
    line = (f"geomean {summary['geomean_speedup']:.3g}x eager over {summary['counted']} shapes "
            f"(p20 {summary['speedup_p20']:.3g}x, p50 {summary['speedup_p50']:.3g}x, "
            f"p80 {summary['speedup_p80']:.3g}x) on {performance['gpu']}"
            if summary["geomean_speedup"] is not None else f"no shape above launch overhead on {performance['gpu']}")
    if summary["overhead_dominated"]["count"]:
        line += f"; {summary['overhead_dominated']['count']} overhead-dominated shapes reported apart"
    return line + "; per-shape numbers in meta.json"
