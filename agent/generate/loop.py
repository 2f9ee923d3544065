"""The generate loop: prompt -> answer -> kernel -> verdict -> feedback, for N rounds.

One small class. Rounds first aim at a correct kernel; once one is correct and was timed
(GPU), the next rounds aim at speed: the feedback lists per-shape speedups, the slowest shapes
and the bandwidth gap, and the best correct kernel seen so far (highest geometric-mean
speedup) is what ``generated_kernels/`` holds. The loop stops when that best kernel reaches
``target_speedup`` (if given) or ``target_roof`` of the roofline, when ``patience`` rounds in a
row did not improve it, when the rounds run out, or at once after the first correct kernel where
nothing could be timed (CPU); run.json's ``stopped_because`` says which. Slower correct kernels
stay in ``runs/`` only.

Every ending is an ``Outcome``, whatever ended the run: a reason of its own, a budget, a batch
stopping it (``agent.generate.stopping``: a signal the loop reads, never an exception raised into
it), Ctrl-C, the provider, the machine that runs evaluations, or a bug (its traceback kept in the
run directory); none of them is raised out of ``Agent.generate``. The run directory is brought up
to date after every step, so a crash leaves a complete record with the status it reached:
``running`` while it works, then ``accepted``, ``failed`` (every round failed), ``stopped`` (a
budget ran out before a kernel was accepted), ``error`` (provider, machine or bbagent failure) or
``interrupted``.
"""
from __future__ import annotations

import platform
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from bbagent.agent.errors import InfrastructureError, ProviderError, UsageError, refused_by_machine, save_traceback
from bbagent.agent.judging import Evaluations
from bbagent.agent.generate.posed import Posed
from bbagent.agent.generate import dispatch
from bbagent.agent.generate.choosing import (Best, BestKernel, Candidate, beats, best_kernel_of, candidate_line, choose,
                                     round_summary)
from bbagent.agent.generate.dispatch import DispatchPlan
from bbagent.agent.generate.extract import extract_code
from bbagent.agent.generate.failure import failure_groups_of, why_failed
from bbagent.agent.generate.merge import CannotMerge
from bbagent.agent.generate.population import Population, Rival
from bbagent.agent.generate.profile_feedback import profile_part, profiling_cost
from bbagent.agent.generate.progress import (Asking, CandidateJudged, DispatcherDone, DispatcherTried, Evaluating, Listener,
                                     NewBest, ReplacedApproved, RoundDone, SameKernel, Tuning, TuningDone, ignore)
from bbagent.agent.generate.spending import Spent
from bbagent.agent.generate.stopping import StopSignal
from bbagent.agent.generate.tuning import tune
from bbagent.agent.generate.prompting import elide, render_feedback
from bbagent.agent.machine import this_process
from bbagent.agent.options import GenerateOptions
from bbagent.agent.providers import Completion, Provider
from bbagent.agent.review.lifecycle import install
from bbagent.agent.review.meta import Accepted
from bbagent.agent.review.record import authored_part, judged_part, now as _now
from bbagent.agent.run_record import (CandidateRecord, DispatcherRecord, Halt, RoundRecord, RunConfig, RunRecord,
                                       StoppedBecause, Tokens, TuningRecord, Usage, WhyFailed)
from bbagent.agent.storage import RunDir
from bbagent.harness.interface import Verdict

HISTORY_ROUNDS = 3          # earlier rounds summarised in each feedback message
FEEDBACK_CHARS = 16000      # the feedback message is elided head-and-tail beyond this
BEST_KERNEL_CHARS = 8000

def ending_of(exc: BaseException, traceback_folder: Path | None = None) -> Halt:
    """How ``exc`` ends a run, called while it is handled: Ctrl-C or SIGTERM (interrupted), input
    the run cannot take (usage), the provider, the machine that runs evaluations (infrastructure,
    which may pass), the machine refusing a write (a full disk), or anything else, a bug in bbagent, whose traceback is kept in a file in
    ``traceback_folder`` (the run's directory; the temporary folder before there is one)."""
    if isinstance(exc, KeyboardInterrupt):
        return Halt(StoppedBecause.INTERRUPTED, f"interrupted by the user ({str(exc) or 'Ctrl-C'})", status="interrupted")
    if isinstance(exc, UsageError):
        return Halt(StoppedBecause.USAGE, str(exc), status="error")
    if isinstance(exc, ProviderError):
        return Halt(StoppedBecause.PROVIDER_ERROR, str(exc), status="error", transient=exc.transient)
    if isinstance(exc, InfrastructureError):  # e.g. a lost GPU: not the kernel's failure
        return Halt(StoppedBecause.INFRASTRUCTURE, f"{type(exc).__name__}: {exc}", status="error", transient=True)
    if (refused := refused_by_machine(exc)) is not None:
        return Halt(StoppedBecause.MACHINE, str(refused), status="error")
    where = save_traceback(traceback_folder, prefix="traceback-", header=f"bbagent run, {type(exc).__name__}")
    return Halt(StoppedBecause.ERROR, f"internal error: {type(exc).__name__}: {exc} (a bug in bbagent; its "
                                      f"traceback: {where})", status="error")


class _Cut(Exception):
    """The loop's own way out of a round that its stop signal cut short (caught in ``generate``)."""

    def __init__(self, halt: Halt):
        super().__init__(halt.message)
        self.halt = halt


@dataclass
class Outcome:
    """How a run ended: a view of its record (run.json; status accepted, failed, stopped, error or
    interrupted, the message, why it stopped, why it failed), with what the record does not keep:
    the spend as counted, the best kernel, and whether an error may pass (a provider outage or rate
    limit, a lost GPU). What ``generate`` returns, however the run ended, and a batch reads.
    ``run_dir`` is None for a run that never started (``not_started``)."""
    record: RunRecord
    run_dir: Path | None
    spent: Spent = field(default_factory=Spent)
    best: BestKernel | None = None
    transient: bool = False

    @classmethod
    def not_started(cls, op: str, halt: Halt) -> "Outcome":
        """A run refused before it began (input it cannot take, a provider it cannot set up): no
        run directory, nothing spent."""
        return cls(RunRecord(op=op, status=halt.status or "error", stopped_because=halt.because,
                             message=halt.message, rounds_used=0), None, transient=halt.transient)

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def message(self) -> str:
        return self.record.message

    @property
    def rounds_used(self) -> int:
        return self.record.rounds_used or 0

    @property
    def accepted_dir(self) -> Path | None:
        return Path(self.record.accepted_dir) if self.record.accepted_dir else None

    @property
    def why_failed(self) -> WhyFailed | None:
        return self.record.why_failed

    @property
    def stopped_because(self) -> StoppedBecause:
        return self.record.stopped_because

    @property
    def run_id(self) -> str:
        return self.run_dir.name if self.run_dir is not None else ""


def rival_part(rival: Rival, best_round: int, shown: int = 6) -> str:
    """The prompt's part on a kept kernel faster than the best on some shapes: where, and its code."""
    rows = sorted(rival.wins, key=lambda w: w[1] / w[2])[:shown]
    table = "\n".join(f"| `{shape}` | {mine:.1f} | {theirs:.1f} |" for shape, mine, theirs in rows)
    more = f" (the {shown} where it leads most)" if len(rival.wins) > shown else ""
    return (f"The kernel of round {rival.member.round} is slower overall but faster than your best (round "
            f"{best_round}) on {len(rival.wins)} timed shape(s){more}:\n"
            f"| input | round {rival.member.round} us | round {best_round} us |\n| --- | --- | --- |\n{table}\n"
            "Take what makes each fast where it is fast (kernel() may choose by size or dtype). Its code:\n"
            f"```python\n{elide(rival.member.source, BEST_KERNEL_CHARS // 2)}```")


@dataclass
class Agent:
    """The loop for one operator, or one program (its answers take an operator's place: named by the
    program's key, installed under ``generated_kernels/<key>/``). ``options`` are generate's (rounds,
    candidates, budgets, the target); the provider and the evaluator are set up already
    (``agent.generate.start``)."""
    operator: Posed
    provider: Provider
    evaluations: Evaluations  # the run's request, where it runs, the suite built ahead
    run: RunDir
    root: Path
    options: GenerateOptions = field(default_factory=lambda: GenerateOptions(provider="replay"))
    report: Listener = ignore  # hears each Progress event
    stop: StopSignal = field(default_factory=StopSignal)  # what may stop the run from outside it (a batch)
    spent: Spent = field(default_factory=Spent)  # counted as each answer comes (a batch reads it while the run goes on)
    batch_id: str | None = None  # the batch the run belongs to, named in run.json

    def __post_init__(self):
        o = self.options
        self.rounds, self.candidates, self.target_speedup = o.rounds, o.candidates, o.target_speedup
        # what target_speedup is measured against: the problem's own bar unless asked (a program's is torch.compile)
        self.target_baseline = o.target_baseline or self.operator.problem.default_baseline
        self.target_roof, self.patience = o.target_roof, o.patience
        self.population = Population()  # the correct, timed kernels worth showing again
        self.dispatch_tried: set[tuple[int, int]] = set()  # pairs of rounds a dispatcher was considered for
        self.record = RunRecord(
            run_id=self.run.path.name, op=self.op, status="running", stopped_because=StoppedBecause.RUNNING,
            started_at=_now(), finished_at=None,
            config=RunConfig(**{**o.model_dump(exclude={"replay"}), "provider": self.provider.name,
                                "model": self.provider.model, "target_baseline": self.target_baseline}),
            batch_id=self.batch_id, prompt_template=self.operator.prompt_template,
            serves=list(self.operator.serves),
            host={"python": platform.python_version(), "platform": platform.platform()},
            process=this_process(),  # a run left "running" by a killed process reads as interrupted
            environment=None, **self.spent.run_fields(), rounds=[], dispatchers=[], message="")
        self.messages: list[dict] = []
        self.best: Best | None = None
        self.history: list[str] = []  # one line per round, the last HISTORY_ROUNDS go into the feedback

    def first_prompt(self) -> str:
        return self.operator.first_prompt(self.options)

    @property
    def op(self) -> str:
        """The problem's one name: the overload the model is asked for and its kernels are evaluated and
        installed as, or a program's key."""
        return self.operator.key

    def save(self) -> None:
        for name, value in self.spent.run_fields().items():
            setattr(self.record, name, value)
        self.record.write(self.run.path)

    def generate(self) -> Outcome:
        """Run the rounds until something ends the run, and return how it ended, whatever that was."""
        outcome = Outcome(self.record, self.run.path, self.spent)
        try:
            self.evaluations.prepare()  # the suite is built while the model writes its first answer
            halt = self.rounds_until_halted()
            self.tune_best()
        except _Cut as cut:
            halt = cut.halt
        except ProviderError as exc:
            halt = ending_of(exc) if self.best is None else Halt(  # the provider only cut optimisation short
                StoppedBecause.PROVIDER_ERROR, f"{self.summary_of_best()}; optimisation stopped by a provider error: {exc}")
        except (KeyboardInterrupt, Exception) as exc:  # noqa: BLE001 - Ctrl-C, the machine, a bug: recorded
            halt = ending_of(exc, self.run.path)
        self.stopped(outcome, halt)
        self.finish(outcome)
        return outcome

    def rounds_until_halted(self) -> Halt:
        """The rounds, until a target is reached, a budget or the stop signal allows no further
        round, or they run out: how that ended the run."""
        self.messages = [{"role": "user", "content": self.first_prompt()}]
        for n in range(1, self.rounds + 1):
            halt = self.halt_before_round(n)
            if halt is not None:
                return halt
            self.record.rounds_used = n
            verdict, kernel_source = self.step(n)
            if verdict is not None and verdict.passed and kernel_source is not None:
                self.consider(kernel_source, verdict, n)
                self.record.accepted_dir = str(self.root / "generated_kernels" / self.op)
            if self.options.dispatch:
                self.try_dispatcher(n)
            halt = self.target_halt(n, self.best) if self.best is not None else None
            if halt is not None:
                return halt
        return Halt(StoppedBecause.ROUNDS, self.summary_of_best() + f"; the {self.rounds} round(s) ran out"
                    if self.best else self.record_why_failed())

    def tune_best(self) -> None:
        """The rounds ended with a kernel accepted: where ``--autotune-budget`` asks, tune it
        (``agent.generate.tuning``), and where its tests pass with the configs found, install it
        again with them beside it. A tuning that fails leaves the kernel as accepted, and says why."""
        best, budget = self.best, self.options.autotune_budget
        if best is None or not budget:
            return
        record = self.record.tuning = TuningRecord(budget_s=budget, speedup_untuned=best.speedup)
        self.report(Tuning(round=best.round, budget_s=budget))
        self.save()
        try:
            tuned = tune(self.evaluations, self.run.write("tuning/kernel.py", best.source), budget, record,
                         keep=lambda name, verdict: self.run.write(f"tuning/{name}-verdict.json",
                                                                  verdict.model_dump_json(indent=2) + "\n"))
            if tuned is not None:
                self.run.write("tuning/helion_configs.json", tuned.configs)
                self.best = Best(best.round, best.source, tuned.verdict, tuned.verdict.geomean_speedup(),
                                 best.dispatcher)
                self.accept(best.source, tuned.verdict, best.round, best.dispatcher, configs=tuned.configs)
        except KeyboardInterrupt:
            record.outcome, record.message = "interrupted", "interrupted: the kernel keeps its untuned configs"
            raise
        except Exception as exc:  # noqa: BLE001 - the accepted kernel stays; the tuning's failure is recorded
            record.outcome, record.message = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            self.save()
        self.report(TuningDone(outcome=record.outcome, message=record.message, speedup_untuned=record.speedup_untuned,
                               speedup_tuned=record.speedup_tuned))

    def stopped(self, outcome: Outcome, halt: Halt) -> None:
        """How the run ended, from the Halt that ended it."""
        record = self.record
        record.stopped_because, record.message, outcome.transient = halt.because, halt.message, halt.transient
        record.status = halt.status or ("accepted" if self.best else "failed")

    def heed_the_stop_signal(self) -> None:
        """Mid-round: end the run here where the stop signal says so (a batch stopped by Ctrl-C)."""
        halt = self.stop.now()
        if halt is not None:
            raise _Cut(halt)

    def halt_before_round(self, n: int) -> Halt | None:
        """Before round ``n``: the stop where the signal, the run's own budget (``over_budget``) or
        a batch's allows no further round, or None."""
        cut = self.stop.now()
        if cut is not None:
            return cut
        spent = self.over_budget() or self.stop.budget()
        if spent is None:
            return None
        return Halt(spent.because, f"stopped before round {n}: {spent.message}" + (
            f"; {self.summary_of_best()}" if self.best else
            "; no kernel was accepted" + (f" ({self.record_why_failed()})" if n > 1 else "")),
            status=None if self.best else "stopped")

    def finish(self, outcome: Outcome) -> None:
        """Complete the record (best kernel, why it failed, when it ended) and bring run.json up to
        date with it: after every ending, a crash or Ctrl-C included."""
        outcome.best = best = best_kernel_of(self.best)
        record = self.record
        if self.best is None and record.rounds:
            record.why_failed = why_failed(record.rounds)
        record.finished_at = _now()
        record.best_round, record.best_speedup = (best.round, best.speedup) if best else (None, None)
        record.best_fast_p, record.best_gpu = (best.fast_p, best.gpu) if best else (None, None)
        record.best_baseline_speedups = best.baseline_speedups if best else None
        self.save()

    def record_why_failed(self) -> str:
        """Why no kernel passed, in one line (run.json keeps it whole as ``why_failed``)."""
        return why_failed(self.record.rounds).text()

    def over_budget(self) -> Halt | None:
        """The stop where the run's own budget allows no further call, or None. Checked between
        rounds (with a batch's): a round's calls are never cut off half-way, so the run directory
        stays complete."""
        return self.spent.over_budget(self.options.max_cost_usd, self.options.max_tokens)

    def consider(self, kernel_source: str, verdict: Verdict, n: int, dispatcher: DispatchPlan | None = None) -> bool:
        """Install a correct kernel if it is the first, or faster than the best so far (whether it was)."""
        if not beats(verdict, self.best):
            return False
        speedup = verdict.geomean_speedup()
        if self.best is not None:
            self.report(NewBest(round=n, speedup=speedup, replaces=self.best.round,
                                dispatcher_of=list(dispatcher.rounds()) if dispatcher else None))
        self.best = Best(n, kernel_source, verdict, speedup, dispatcher)
        self.accept(kernel_source, verdict, n, dispatcher)
        return True

    def try_dispatcher(self, n: int) -> None:
        """After round ``n``: where the best kernel and a kept one each win on some timed shapes,
        compose a dispatcher between them (``agent.generate.dispatch``; each pair once), evaluate
        it like any candidate, and keep it when it is faster than both. run.json's
        ``dispatchers`` records every pair considered and what came of it."""
        best = self.best
        if best is None or best.speedup is None or best.parts is not None:
            return
        rival = self.population.rival(best.round)
        mine = self.population.member(best.round)
        if rival is None or mine is None or rival.member.parts is not None:
            return
        first, second = sorted((mine, rival.member), key=lambda m: m.round)
        if (first.round, second.round) in self.dispatch_tried:
            return
        self.dispatch_tried.add((first.round, second.round))
        record = DispatcherRecord(after_round=n, parts=[first.round, second.round])
        self.record.dispatchers.append(record)
        try:
            chosen = dispatch.plan(first, second)
            if chosen is None:
                record.outcome, record.reason = "not_tried", (
                    f"the parts' own timings predict no rule {dispatch.MIN_GAIN:.0%} faster than the better part")
                return
            record.rules, record.predicted_gain = [rule.text() for rule in chosen.rules], round(chosen.predicted_gain, 4)
            try:
                source = dispatch.compose(chosen, self.op, self.run.path.name)
            except CannotMerge as exc:
                record.outcome, record.reason = "cannot_merge", str(exc)
                return
            where = f"round-{n}/dispatcher"
            kernel_path = self.run.write(f"{where}/kernel.py", source)
            record.outcome, record.kernel = "evaluating", f"{where}/kernel.py"
            self.save()
            self.report(DispatcherTried(round=n, parts=record.parts, rules=record.rules))
            verdict = self.evaluations.evaluate(kernel_path, profile=self.profiles_read_after(n))
            self.run.write(f"{where}/verdict.json", verdict.model_dump_json(indent=2) + "\n")
            record.outcome, record.speedup = verdict.verdict, verdict.geomean_speedup() if verdict.passed else None
            record.message = "" if verdict.passed else (verdict.message or verdict.error_kind or "")[:400]
            if verdict.passed:
                self.population.add(n, source, verdict, parts=chosen.rounds())
                record.kept = self.consider(source, verdict, n, dispatcher=chosen)
                if record.kept:
                    self.messages[-1]["content"] += (
                        f"\nbbagent then composed a dispatcher between your kernels of rounds {first.round} and "
                        f"{second.round} ({'; '.join(record.rules)}); at {verdict.geomean_speedup():.3g}x eager "
                        "(geomean) it is now the best kernel. A single kernel fast on every shape would beat it.\n")
        finally:
            self.report(DispatcherDone(record))
            self.save()

    def target_halt(self, n: int, best: Best) -> Halt | None:
        """After round ``n``, ``best`` the best kernel so far: the stop where optimisation ends, or
        None. It ends at once where nothing was timed; else when the best reaches ``--target-speedup``
        (if given), or ``--target-roof`` of the roofline (geomean over its timed shapes), or when
        ``--patience`` rounds in a row did not improve it, whichever comes first."""
        if best.speedup is None:
            performance = best.verdict.performance
            reason = (performance.reason if performance is not None else None) or (
                "every timed shape took about as long as an empty kernel launch (overhead-dominated), so there is "
                "no speed to improve" if performance is not None and performance.measured else "it was not timed")
            return Halt(StoppedBecause.UNTIMED, f"{self.summary_of_best()}; no optimisation rounds: {reason}")
        if self.target_speedup is not None:
            reached = self._reached_target_speedup(best)
            if reached:
                return Halt(StoppedBecause.TARGET_SPEEDUP, reached)
        roof = best.verdict.geomean_roof_fraction()
        if self.target_roof and roof is not None and roof >= self.target_roof:
            return Halt(StoppedBecause.TARGET_ROOF, f"{self.summary_of_best()}; reached {roof:.0%} of the roofline "
                                                    f"(geomean over its timed shapes; --target-roof {self.target_roof:g})")
        if n - best.round >= self.patience:
            near = f", {roof:.0%} of the roofline" if roof is not None else ""
            return Halt(StoppedBecause.PATIENCE, f"{self.summary_of_best()}{near}; no round improved it in the "
                                                 f"last {self.patience} (--patience {self.patience})")
        return None

    def _reached_target_speedup(self, best: Best) -> str | None:
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
        best = self.best
        if best is None:
            return "no kernel was accepted"
        speed = f", geomean speedup {best.speedup:.3g}x over eager" if best.speedup is not None else ""
        if best.parts is not None:
            return "accepted bbagent's dispatcher between the kernels of rounds {} and {}{}".format(*best.parts, speed)
        return f"accepted the kernel of round {best.round}{speed}"

    def profiles_read_after(self, n: int) -> bool:
        """Whether a kernel evaluated in round ``n`` is worth profiling: only a later round reads
        the profiles (the speed feedback), and profiling holds the GPU alone for seconds."""
        return n < self.rounds

    def step(self, n: int) -> tuple[Verdict | None, str | None]:
        """One round: ask for ``candidates`` answers (in parallel), evaluate every kernel, pick the
        round's result (the fastest correct one, else the first correct, else the one passing most
        tests) and build the next prompt from it."""
        round_dir = f"round-{n}"
        self.record.rounds.append(RoundRecord(round=n, outcome="asking"))
        self.run.write(f"{round_dir}/prompt.md", self.messages[-1]["content"])
        self.run.write_json(f"{round_dir}/messages.json", self.messages)
        self.save()
        try:
            self.report(Asking(round=n, rounds=self.rounds, candidates=self.candidates))
            tried = []
            for k, answer in enumerate(self.ask(n)):
                self.heed_the_stop_signal()  # before each evaluation: a batch stopped meanwhile ends the run here
                where = round_dir if self.candidates == 1 else f"{round_dir}/candidate-{k + 1}"
                tried.append(self.no_answer(n, k, where, answer) if isinstance(answer, ProviderError)
                             else self.try_candidate(n, k, where, answer))
            pick = choose(tried)
            record = RoundRecord(round=n, **pick.record.model_dump(exclude_unset=True))
            if self.candidates > 1:
                record.candidates, record.picked = [c.record for c in tried], pick.number + 1
            self.record.rounds[-1] = record
            self.report(RoundDone(round=n, rounds=self.rounds, record=record))
            feedback = (render_feedback(None, no_code=True) if pick.verdict is None
                        else self.feedback(pick.verdict, n))
            self.history.append(round_summary(n, tried, pick))
            if pick.verdict is not None:
                self.population.add(n, pick.source, pick.verdict)
            assert pick.completion is not None  # choose picks a candidate that answered
            self.messages = [self.messages[0], {"role": "assistant", "content": pick.completion.text},
                             {"role": "user", "content": self.compose(feedback, tried, pick, n)}]
            return pick.verdict, pick.source
        except (KeyboardInterrupt, _Cut):  # Ctrl-C, or a batch stopping its runs
            self.record.rounds[-1].outcome = "interrupted"
            raise
        except ProviderError as exc:
            self.record.rounds[-1].outcome, self.record.rounds[-1].message = "provider_error", str(exc)
            raise
        finally:
            self.save()

    def ask(self, n: int) -> list[Completion | ProviderError]:
        """One answer per candidate of round ``n``, asked in parallel, in candidate order: a
        Completion, or the ProviderError of a call that failed for good. The round fails only if
        every call failed."""
        if self.candidates == 1:
            return [self.provider.complete(self.messages, round=n, candidate=0)]
        with ThreadPoolExecutor(max_workers=self.candidates) as pool:
            futures = [pool.submit(self.provider.complete, self.messages, round=n, candidate=k)
                       for k in range(self.candidates)]
        answers: list[Completion | ProviderError] = []
        for future in futures:
            try:
                answers.append(future.result())
            except ProviderError as exc:
                answers.append(exc)
        failed = [a for a in answers if isinstance(a, ProviderError)]
        if len(failed) == len(answers):
            raise failed[0]
        return answers

    def no_answer(self, n: int, k: int, where: str, error: ProviderError) -> "Candidate":
        """A candidate whose call failed: recorded with its error, its index kept."""
        self.run.write(f"{where}/error.txt", f"{error}\n")
        record = CandidateRecord(outcome="provider_error", message=str(error))
        self.report(CandidateJudged(round=n, candidate=k + 1, record=record))
        return Candidate(k, None, None, None, record)

    def try_candidate(self, n: int, k: int, where: str, completion) -> "Candidate":
        """Store one answer, extract its kernel and evaluate it."""
        self.run.write(f"{where}/response.md", completion.text)
        usage = Usage(**completion.model_dump(exclude={"text"}))
        self.run.write_json(f"{where}/usage.json", usage.model_dump())
        self.spent.count(completion)
        source = extract_code(completion.text)
        if source is None:
            return Candidate(k, completion, None, None, CandidateRecord(outcome="no_code", usage=usage))
        kernel_path = self.run.write(f"{where}/kernel.py", source)
        self.save()
        self.report(Evaluating(round=n, candidate=k + 1, candidates=self.candidates))
        verdict = self.evaluations.evaluate(kernel_path, profile=self.profiles_read_after(n))
        self.run.write(f"{where}/verdict.json", verdict.model_dump_json(indent=2) + "\n")
        self.record.environment = verdict.environment.model_dump()
        prepared = self.evaluations.prepared
        if prepared is not None and self.record.suite_ahead is None:  # built while the first answer was written
            self.record.suite_ahead = prepared
        record = CandidateRecord(outcome=verdict.verdict, usage=usage, summary=verdict.summary,
                                 error_kind=verdict.error_kind, message=verdict.message,
                                 failures=failure_groups_of(verdict), counts=verdict.test_counts())
        if verdict.passed:
            record.speedup = verdict.geomean_speedup()
            profiling_s = profiling_cost(verdict)
            if profiling_s is not None:
                record.profiling_s = profiling_s
        if self.candidates > 1:
            self.report(CandidateJudged(round=n, candidate=k + 1, record=record))
        return Candidate(k, completion, source, verdict, record)

    def compose(self, feedback: str, tried: list, pick: "Candidate", n: int) -> str:
        """The next user message: recent rounds, this round's candidates, the feedback on the
        picked one, when that one is not the best kernel so far the best kernel itself, and a kept
        kernel faster than the best on some shapes (``Population.rival``) with those shapes;
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
        replaces = pick.verdict is not None and pick.verdict.passed and beats(pick.verdict, best)
        if best is not None and not replaces:
            parts.append(f"Your best correct kernel so far (round {best.round}):\n```python\n"
                         f"{elide(best.source, BEST_KERNEL_CHARS)}```")
        best_round = n if replaces else best.round if best is not None else None
        dispatcher_of = None if replaces or best is None else best.parts
        rival = self.population.rival(best_round, dispatcher_of) if best_round is not None else None
        if rival is not None and best_round is not None:
            parts.append(rival_part(rival, best_round))
        return elide("\n\n".join(parts), FEEDBACK_CHARS) + "\n"

    def feedback(self, verdict: Verdict, n: int) -> str:
        """What the model reads next: its failures, or, for a correct and timed kernel, its speed.
        ``self.best`` is still the best kernel of the rounds before this one."""
        if verdict.passed and verdict.geomean_speedup() is not None:
            return self.operator.performance_feedback(verdict, previous_best=self.best, target=self.target_speedup,
                                                      target_baseline=self.target_baseline,
                                                      target_roof=self.target_roof,
                                                      profiled=profile_part(verdict.performance))
        return render_feedback(verdict, best=self.best)

    def accept(self, kernel_source: str, verdict: Verdict, n: int, dispatcher: DispatchPlan | None = None,
               configs: str | None = None) -> None:
        spent, program = self.spent, self.operator.answers_program
        authored = authored_part(provider=self.provider.name, model=self.provider.model, run_id=self.run.path.name,
                                 accepted_round=n, tokens=Tokens(input=spent.input_tokens, output=spent.output_tokens),
                                 cost_usd=spent.cost_usd, cost_complete=spent.cost_complete,
                                 answers_paid_by=sorted(spent.paid_by), rounds=self.record.rounds,
                                 target_speedup=self.target_speedup, target_baseline=self.target_baseline)
        composed = dispatch.provenance(dispatcher, self.run.path.name, self.root) if dispatcher is not None else None
        accepted = Accepted.of(self.op, judged_part(self.op, verdict, program), authored, composed,
                               allow_library=self.operator.allow_library(self.options), dsl=self.options.dsl)
        meta = install(self.root, kernel_source, accepted, problem_text=program.text if program else None,
                       configs=configs)
        if meta.run_id != self.run.path.name:  # the same code as the current kernel: kept as it is
            self.report(SameKernel(round=n, version=meta.version, status=meta.review.status, run_id=meta.run_id))
            return
        if meta.replaced is not None and meta.replaced.status == "approved":
            self.report(ReplacedApproved(round=n, **meta.replaced.model_dump()))
