"""A batch: `generate` for many operators at once, every step recorded so that nothing finished is
lost or redone.

This process is the coordinator: it alone writes the ledger (``agent.batch.ledger``) and the event
log (``runs/<batch>/events.jsonl``). ``jobs`` worker threads each claim the next pending operator
and run the agent loop for it (cheap: they wait on the model or the sandbox); the coordinator renews
their leases while they run. Failures are sorted: a kernel that never passed is charged to its
operator (``failed``, class ``kernel``); a provider that cannot be reached is not (the operator is
pending again, and every worker waits out a shared, growing pause, so an outage pauses the batch
instead of failing it); a provider that cannot be set up for it (no key, no replay) fails it as
``setup``. Ctrl-C (or SIGTERM, ``agent.errors.Terminated``) marks the running operators ``interrupted``; ``--resume`` runs them
again, with the operators whose lease lapsed because their process died (``kill -9``).
At the end, ``summary.json`` and ``summary.md`` in the batch directory.
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bbagent.agent.batch.executor import node_rows
from bbagent.agent.batch.ledger import FILE_NAME, Ledger, counts_of, spend_of
from bbagent.agent.errors import Terminated, UsageError, refused_by_machine, save_traceback
from bbagent.agent.batch.events import (Activity, BatchEnded, BatchStarted, BudgetSpent, OpEnded, OpInterrupted, OpRetried,
                                        OpStarted, RunProgress)
from bbagent.agent.generate.progress import Progress, Started, listener
from bbagent.agent.generate.spending import Spent
from bbagent.agent.generate.stopping import StopSignal
from bbagent.agent.money import cost_text
from bbagent.agent.machine import process_state, this_process
from bbagent.agent.run_record import Halt, StoppedBecause, mark_interrupted
from bbagent.harness.interface import PROGRAMS_FOLDER

LEASE_S = 900.0  # renewed every LEASE_S / 3 while the coordinator lives
INFRA_RETRIES = 8  # infrastructure failures of one operator before it may be marked failed ...
INFRA_GIVE_UP_S = 600.0  # ... and for how long they must have gone on (an outage is waited out)
PAUSE_S = (5.0, 300.0)  # the shared pause after an infrastructure failure: first, longest
TRACEBACKS = "tracebacks"  # runs/<batch>/tracebacks/: the batch's own code raising a bug around a run, whole
ACTIVITY_EVERY_S = 2.0  # how often the activity snapshot in the ledger is refreshed

# the ledger's error class of a run that did not end accepted, by why it stopped; "kernel" for the rest
ERROR_CLASS = {StoppedBecause.BUDGET: "budget", StoppedBecause.BATCH_BUDGET: "budget",
               StoppedBecause.PROVIDER_ERROR: "provider", StoppedBecause.SETUP: "setup",
               StoppedBecause.USAGE: "usage", StoppedBecause.INFRASTRUCTURE: "sandbox",
               StoppedBecause.MACHINE: "machine", StoppedBecause.ERROR: "internal", StoppedBecause.INTERRUPTED: "interrupted"}


def new_batch_id() -> str:
    return f"batch-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


@dataclass
class BatchResult:
    batch_id: str
    path: Path
    counts: dict
    interrupted: bool = False
    ended_by: str | None = None  # the budget that stopped new work (its message), if one did
    nothing_to_do: bool = False  # a resume that found every operator finished (and changed nothing)


@dataclass
class Budgets:
    """Batch-wide budgets (a run's own, per operator, are generate's ``max_cost_usd``/``max_tokens``).
    ``deadline`` is a time.time() value."""
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    deadline: float | None = None

    def spent(self, rows: list[dict], in_flight: tuple[int, float] = (0, 0.0)) -> Halt | None:
        """The stop of the batch's runs where one of its budgets is spent (its message says which),
        or None. ``in_flight``: the tokens and dollars the runs still going have spent so far (the
        ledger has them only once a run ends)."""
        spend = spend_of(rows)
        cost, tokens = spend["cost_usd"] + in_flight[1], spend["input"] + spend["output"] + in_flight[0]
        if self.max_cost_usd is not None and cost >= self.max_cost_usd:
            why = f"the batch's cost budget is spent (${cost:.4f} of --max-cost-usd {self.max_cost_usd:g})"
        elif self.max_tokens is not None and tokens >= self.max_tokens:
            why = f"the batch's token budget is spent ({tokens} of --max-tokens {self.max_tokens})"
        elif self.deadline is not None and time.time() >= self.deadline:
            why = f"the deadline {time.strftime('%Y-%m-%d %H:%M', time.localtime(self.deadline))} has passed"
        else:
            return None
        return Halt(StoppedBecause.BATCH_BUDGET, why)


def _unbound(op: str, report: Callable) -> None:
    raise RuntimeError("the batch's generate was never bound (agent.batch.start binds it before run)")


class Batch:
    """``generate(op, report) -> Outcome`` runs the agent loop for one operator (``agent.batch.start``
    binds every other option), its ``report`` hearing the run's ``Progress`` events; the batch's own
    ``report(event)`` hears every event the batch records (``agent.batch.events``; a run's as
    ``RunProgress``); a two-argument ``report(name, data)`` gets each one's name and fields."""

    def __init__(self, path: Path, generate: Callable = _unbound, *, jobs: int = 2, report: Callable | None = None,
                 lease_s: float = LEASE_S, pause_s: tuple[float, float] = PAUSE_S, budgets: Budgets | None = None,
                 executor=None, limiter=None, give_up_s: float = INFRA_GIVE_UP_S):
        self.path, self.generate, self.jobs, self.lease_s, self.pause_s = path, generate, jobs, lease_s, pause_s
        self.give_up_s = give_up_s
        self.budgets = budgets or Budgets()
        self.executor, self.limiter = executor, limiter  # shown in the activity snapshot
        self.started = time.time()
        self.done_at_start = 0  # operators accepted or failed before this session (for the ETA)
        self.ended_by: str | None = None
        self.ledger = Ledger(path / FILE_NAME)
        self.report = listener(report)
        self.events_lock = threading.Lock()
        self.running: set[str] = set()
        self.run_dirs: dict[str, str] = {}  # op -> its current run directory
        self.live_spend: dict[str, Spent] = {}  # op -> its current run's spend, counted by its loop
        self.paused_until = 0.0
        self.failures_in_a_row = 0
        self.infra_since: dict[str, float] = {}  # op -> its first infrastructure failure this session
        self.stop = threading.Event()  # set on Ctrl-C or SIGTERM
        # what each run reads to know the batch stopped it: Ctrl-C at its next step, a spent budget before a round
        self.stop_signal = StopSignal(cut=self.stop, budget=self.budget_spent)

    def event(self, event: Progress) -> None:
        """Log ``event`` in events.jsonl and tell the batch's listener."""
        record = {"time": round(time.time(), 3), "event": event.name, **event.fields()}
        with self.events_lock, (self.path / "events.jsonl").open("a") as log:
            log.write(json.dumps(record, default=str) + "\n")
        self.report(event)

    # --- the coordinator -----------------------------------------------------------------------

    def run(self) -> BatchResult:
        workers = [threading.Thread(target=self._work, name=f"batch-worker-{n}", daemon=True)
                   for n in range(self.jobs)]
        coordinator = this_process()
        sessions = self.ledger.meta().get("sessions") or []
        sessions.append({**coordinator, "jobs": self.jobs, "lease_s": self.lease_s, "ended_at": None, "ended": None})
        self.ledger.set_meta(ended_by=None, coordinator=coordinator, heartbeat=time.time(), sessions=sessions)
        counts = self.ledger.counts()
        self.done_at_start = counts["accepted"] + counts["failed"]
        self.event(BatchStarted(counts=counts, jobs=self.jobs, session=len(sessions), deadline=self.budgets.deadline))
        for worker in workers:
            worker.start()
        interrupted = False
        why = "Ctrl-C"
        try:
            renewed = noted = time.monotonic()
            while any(worker.is_alive() for worker in workers):
                for worker in workers:
                    worker.join(timeout=0.2)
                if time.monotonic() - renewed > self.lease_s / 3:
                    self.ledger.renew(sorted(self.running), self.lease_s)
                    renewed = time.monotonic()
                if time.monotonic() - noted > ACTIVITY_EVERY_S:  # for `bbagent status` and the live display
                    snapshot = self.activity()
                    self.ledger.set_meta(activity=snapshot, heartbeat=snapshot["at"])
                    self.report(Activity(snapshot))
                    noted = time.monotonic()
        except KeyboardInterrupt as exc:
            interrupted = True
            why = "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C"
            self.stop.set()  # each run stops at its next step (its stop signal; run.json: interrupted)
            stopped = self.ledger.interrupt_running()
            for worker in workers:  # a moment for runs between two steps to record it themselves
                worker.join(timeout=1.0 / len(workers))
            for op in stopped:  # the rest die with this process, mid-step: their run.json says so
                if self.run_dirs.get(op):
                    mark_interrupted(Path(self.run_dirs[op]), f"the batch was interrupted ({why})")
                self.event(OpInterrupted(op=op, run_dir=self.run_dirs.get(op)))
        counts = self.ledger.counts()
        self.end_session(f"interrupted ({why})" if interrupted else f"stopped: {self.ended_by}" if self.ended_by
                         else "finished")
        write_summary(self.path, self.ledger)
        self.event(BatchEnded(counts=counts, interrupted=interrupted))
        return BatchResult(self.path.name, self.path, counts, interrupted, self.ended_by)

    def end_session(self, how: str) -> None:
        """This session's record in the ledger: when and how it ended, what it did, its slots."""
        snapshot = self.activity()
        sessions = self.ledger.meta().get("sessions") or [{}]
        sessions[-1].update(ended_at=snapshot["at"], ended=how, wall_s=round(snapshot["at"] - self.started, 3),
                            finished_ops=snapshot["finished_this_session"], slots=snapshot["slots"],
                            gpus=snapshot["gpus"], nodes=node_rows(snapshot["gpus"]), llm=snapshot["llm"])
        self.ledger.set_meta(activity=snapshot, heartbeat=snapshot["at"], sessions=sessions)

    def activity(self) -> dict:
        """What is happening now: running operators, each evaluation slot (per GPU: busy, count,
        busy fraction of this session), the LLM calls in flight."""
        now = time.time()
        slots = self.executor.activity() if self.executor is not None else []
        for slot in slots:
            slot["busy_fraction"] = round(slot["busy_s"] / max(now - self.started, 1e-9), 3)
        rows = self.ledger.rows()
        counts, spend = counts_of(rows), spend_of(rows)
        gpus = self.executor.gpus() if self.executor is not None else []
        return {"at": round(now, 3), "session_started": round(self.started, 3), "running": sorted(self.running),
                "slots": slots, "gpus": gpus, "llm": self.limiter.snapshot() if self.limiter is not None else None,
                "paused_s": round(max(self.paused_until - now, 0.0), 1), "counts": counts,
                "finished_this_session": counts["accepted"] + counts["failed"] - self.done_at_start,
                "tokens": spend["input"] + spend["output"], "cost_usd": round(spend["cost_usd"], 6),
                "cost_complete": spend["cost_complete"]}

    # --- one worker ----------------------------------------------------------------------------

    def _work(self) -> None:
        while not self.stop.is_set():
            wait = self.paused_until - time.time()
            if wait > 0:
                self.stop.wait(min(wait, 1.0))
                continue
            spent = self.budget_spent()
            if spent:  # nothing new starts; work in flight stops before its next round
                return
            op = self.ledger.claim(self.lease_s)
            if op is None:
                return
            self.running.add(op)
            self.event(OpStarted(op=op))
            try:
                self._run_one(op)
            finally:
                self.running.discard(op)
                if self.executor is not None:
                    self.executor.finished(op)  # a cluster spreads the next operators by those not finished

    def _not_run(self, op: str, exc: Exception) -> None:
        """An operator whose run could not be asked for: the batch's own code around the run raised.
        Input the operator cannot take fails it; anything else is a bug (failed, its traceback kept
        in the batch's folder and named in the error)."""
        if isinstance(exc, UsageError):
            self.ledger.finish(op, "failed", error_class="usage", error=str(exc))
            return self.event(OpEnded(op=op, state="failed", error_class="usage", error=str(exc)))
        if (refused := refused_by_machine(exc)) is not None:  # a full disk: not a bug, named as what it is
            self.ledger.finish(op, "failed", error_class="machine", error=str(refused))
            return self.event(OpEnded(op=op, state="failed", error_class="machine", error=str(refused)))
        where = save_traceback(self.path / TRACEBACKS, prefix=f"{op.replace('/', '-')}-", header=f"batch {self.path.name}, {op}")
        error = f"{type(exc).__name__}: {exc} (a bug in bbagent; its traceback: {where})"
        self.ledger.finish(op, "failed", error_class="internal", error=error)
        return self.event(OpEnded(op=op, state="failed", error_class="internal", error=error))

    def budget_spent(self) -> Halt | None:
        """The stop of a spent batch budget, counting what the running operators spent so far, or
        None; the first time, recorded (``ended_by``) and told."""
        live = [self._spent_so_far(op) for op in list(self.running)]
        in_flight = (sum(sum(s.get("tokens", (0, 0))) for s in live), sum(s.get("cost_usd", 0.0) for s in live))
        spent = self.budgets.spent(self.ledger.rows(), in_flight)
        if spent is not None and self.ended_by is None:
            self.ended_by = spent.message
            self.ledger.set_meta(ended_by=spent.message)
            self.event(BudgetSpent(reason=spent.message))
        return spent

    def _run_one(self, op: str) -> None:
        try:
            outcome = self.generate(op, lambda event: self._heard(op, event))
        except Exception as exc:  # noqa: BLE001 - the batch's own code around a run must not stop the batch
            if self.stop.is_set():  # Ctrl-C or SIGTERM: whatever was cut off, the coordinator marked it interrupted
                return
            return self._not_run(op, exc)
        if self.stop.is_set():
            return  # Ctrl-C: the coordinator marked it interrupted
        spent = {**outcome.spent.ledger_fields(), "run_id": outcome.run_id, "rounds": outcome.rounds_used}
        error_class = ERROR_CLASS.get(outcome.stopped_because, "kernel")
        if outcome.status == "error" and outcome.transient:  # the provider or the GPU failed: not the op's fault
            return self._infrastructure(op, error_class, outcome.message, spent)
        self.failures_in_a_row = 0
        self.infra_since.pop(op, None)
        if outcome.status == "accepted":
            best = outcome.best
            self.ledger.finish(op, "accepted", best_speedup=best and best.speedup, fast_p=best and best.fast_p,
                               gpu=best and best.gpu, baseline_speedups=best and best.baseline_speedups, **spent)
        elif outcome.status == "interrupted" or outcome.stopped_because == StoppedBecause.BATCH_BUDGET:
            # cut short by the user or stopped between rounds by the batch's budget: not its failure, and a resume
            # runs it again
            self.ledger.finish(op, "interrupted", error_class=error_class, error=outcome.message, **spent)
        else:  # failed, stopped by its budget, a provider that cannot answer, input it cannot take, a bug
            why = outcome.why_failed.model_dump() if outcome.why_failed is not None else None
            self.ledger.finish(op, "failed", error_class=error_class, error=outcome.message, why_failed=why, **spent)
        row = self.ledger.row_of(op)
        self.event(OpEnded(op=op, state=row["state"], error_class=row["error_class"], rounds=row["rounds"],
                           run_id=row["run_id"], best_speedup=row["best_speedup"],
                           error=row["error"] if row["state"] != "accepted" else None))

    def spending(self, op: str) -> Spent:
        """The op's run's spend, counted into by its loop as each answer comes: what the batch's
        budget counts while the run goes on, and what a run cut short by an exception spent."""
        self.live_spend[op] = Spent()
        return self.live_spend[op]

    def _spent_so_far(self, op: str) -> dict:
        """What the op's current run has spent so far, as the ledger takes it."""
        spent = self.live_spend.get(op)
        run_dir = self.run_dirs.get(op)
        return {**(spent.ledger_fields() if spent is not None else {}),
                **({"run_id": Path(run_dir).name} if run_dir else {})}

    def _heard(self, op: str, event: Progress) -> None:
        if isinstance(event, Started):
            self.run_dirs[op] = event.run_dir
        self.event(RunProgress(op=op, event=event))

    def _infrastructure(self, op: str, kind: str, message: str, spent: dict | None = None) -> None:
        """Not the operator's fault: pending again (not charged) and a shared pause for every worker,
        doubling while failures follow each other. The operator is failed only after INFRA_RETRIES
        such failures spread over at least ``give_up_s``: a count alone would fail every operator of
        a long outage, as the shared pause lets each one try again after every pause."""
        row = self.ledger.row_of(op)
        now = time.time()
        failing_for = now - self.infra_since.setdefault(op, now)
        self.failures_in_a_row += 1
        pause = min(self.pause_s[0] * 2 ** (self.failures_in_a_row - 1), self.pause_s[1])
        self.paused_until = max(self.paused_until, now + pause)
        if row["infra_retries"] + 1 >= INFRA_RETRIES and failing_for >= self.give_up_s:
            self.ledger.finish(op, "failed", error_class=kind, error=message, **(spent or {}))
            return self.event(OpEnded(op=op, state="failed", error_class=kind, error=message))
        self.ledger.release(op, kind, message, **(spent or {}))
        self.event(OpRetried(op=op, error_class=kind, error=message, pause_s=round(pause, 1)))


def coordinator_state(meta: dict) -> str:
    """Whether the batch's last coordinator is ``alive`` or ``dead`` (it ran on this host: its
    process is checked), or ``unknown`` (another host, or no record)."""
    coordinator = meta.get("coordinator") or {}
    if coordinator.get("pid") == os.getpid() and coordinator.get("host") == socket.gethostname():
        return "dead"  # this process is resuming it: whatever ran before in it has ended
    return process_state(coordinator)


def _when(moment: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(moment)) if moment else ""


def _sessions_md(sessions: list[dict]) -> list[str]:
    """Each session of the batch (its start and every ``--resume``): when, where, how it ended, and
    its evaluation slots."""
    if not sessions:
        return []
    lines = ["", "## Sessions", "", "| # | started | ended | how it ended | jobs | operators finished | process |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {n} | {_when(s.get('started_at'))} | {_when(s.get('ended_at'))} | "
              f"{(s.get('ended') or 'running').replace('|', '/')} | {s.get('jobs', '')} | "
              f"{'' if s.get('finished_ops') is None else s['finished_ops']} | {s.get('pid', '')} on {s.get('host', '')} |"
              for n, s in enumerate(sessions, 1)]
    for n, session in enumerate(sessions, 1):
        if session.get("slots"):
            lines += ["", f"### Evaluation slots of session {n} ({session.get('wall_s') or 0:.0f} s)", "",
                      "| slot | GPU model | evaluations | busy s | busy fraction | lost in flight | out of service |",
                      "| --- | --- | --- | --- | --- | --- | --- |"]
            lines += [f"| {s['name']} | {s.get('gpu_model') or ''} | {s['evaluations']} | {s['busy_s']:.1f} | "
                      f"{s['busy_fraction']:.0%} | {s.get('lost', 0)} | {(s.get('retired') or '').replace('|', '/')} |"
                      for s in session["slots"]]
        if session.get("gpus"):
            lines += ["", f"### GPUs of session {n}", "", "A slot is busy while an evaluation holds it; a GPU is busy "
                      "while it runs a kernel (NVML, sampled every second).", "",
                      "| GPU | evaluations | per hour | at once (most of allowed) | waited for the GPU s | "
                      "waited for a free slot s | utilization mean | seconds with a kernel running | memory peak GiB |",
                      "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
            lines += [gpu_row(g) for g in session["gpus"]]
            nodes = node_rows(session["gpus"])
            if nodes:
                lines += ["", f"### Nodes of session {n}", "", "| node | GPUs | evaluations | per hour | "
                          "utilization mean (GPUs sampled) |", "| --- | --- | --- | --- | --- |"]
                lines += [f"| {node['node']} | {node['gpus']} | {node['evaluations']} | {node['per_hour']:.0f} | "
                          + (f"{node['utilization_mean']:.1f}% ({node['sampled']})" if node["sampled"] else
                             "not measured") + " |" for node in nodes]
    return lines


def gpu_row(gpu: dict) -> str:
    """One GPU's line of the summary's table (``Executor.gpus``)."""
    measured = gpu.get("samples")
    use = (f"{gpu['utilization_mean']:.1f}% | {gpu['busy_share']:.0%} of {gpu['samples']} | {gpu['memory_peak_gib']}"
           if measured else f"not measured ({gpu.get('nvml') or 'no samples'}) | | ")
    queued = "" if gpu.get("queued_s") is None else f"{gpu['queued_s']:.0f}"  # not counted in older summaries
    return (f"| {gpu['name']} {gpu.get('gpu_model') or ''} | {gpu['evaluations']} | {gpu['per_hour']:.0f} | "
            f"{at_once(gpu)} | {gpu['waited_s']:.0f} | {queued} | {use} |")


def at_once(gpu: dict) -> str:
    """The evaluations a GPU allows at once, and the most it admitted together where that was counted."""
    return f"{gpu['most_at_once']} of {gpu['at_once']}" if gpu.get("most_at_once") is not None else str(gpu["at_once"])


KERNELBENCH_FAST_P = (0.0, 1.0, 1.5, 2.0)  # the p KernelBench reports fast_p for


def by_level(ops: list[dict]) -> dict[str, dict]:
    """A batch's KernelBench problems (keys ``kernelbench/level<N>/...``) per level, scored as the
    field scores them: fast_p, the share of the level's problems answered correctly and faster than
    p x the baseline (eager, and torch.compile where it was timed); p = 0 is the share answered
    correctly. An answer not timed (the CPU) counts for p = 0 only, and where no correct answer was
    timed against a baseline its fast_p for p > 0 is None (not timed, not 0%); a problem the batch
    skipped (an accepted answer serves it, or the file is no problem) is counted apart."""
    levels: dict[str, list[dict]] = {}
    for row in ops:
        parts = row["op"].split("/")
        if len(parts) == 3 and parts[0] == PROGRAMS_FOLDER:
            levels.setdefault(parts[1], []).append(row)
    scored = {}
    for level, listed in sorted(levels.items()):
        rows = [r for r in listed if r["state"] != "skipped"]  # answered already, or no problem: not scored here
        correct = [r for r in rows if r["state"] == "accepted"]

        def share(p: float, speedup) -> float | None:
            if p > 0 and correct and all(speedup(r) is None for r in correct):
                return None  # correct answers, none timed: no share faster can be told
            return sum(1 for r in correct if p == 0 or (speedup(r) or 0) > p) / len(rows) if rows else 0.0
        compile_speedup = lambda r: (r["baseline_speedups"] or {}).get("inductor")  # noqa: E731
        scored[level] = {"problems": len(rows), "skipped": len(listed) - len(rows), "correct": len(correct),
                         "untimed": sum(1 for r in correct if r["best_speedup"] is None),
                         "fast_p_eager": {f"{p:g}": share(p, lambda r: r["best_speedup"]) for p in KERNELBENCH_FAST_P},
                         "fast_p_compile": {f"{p:g}": share(p, compile_speedup) for p in KERNELBENCH_FAST_P}}
    return scored


def _levels_md(levels: dict[str, dict]) -> list[str]:
    if not levels:
        return []
    lines = ["", "## KernelBench problems by level", "",
             "fast_p: the share of the level's problems answered correctly and faster than p x the baseline.", "",
             "| level | problems | skipped | correct | not timed | fast_1 / 1.5 / 2 over eager | "
             "fast_1 / 1.5 / 2 over torch.compile |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for level, row in levels.items():
        def shares(key: str) -> str:
            if row[key]["1"] is None:
                return "not timed"
            return " / ".join(f"{row[key][p]:.0%}" for p in ("1", "1.5", "2"))
        lines.append(f"| {level} | {row['problems']} | {row['skipped']} | {row['correct']} | {row['untimed']} | "
                     f"{shares('fast_p_eager')} | "
                     f"{shares('fast_p_compile')} |")
    return lines


def write_summary(path: Path, ledger: Ledger) -> dict:
    """``summary.json`` and ``summary.md``: per operator its outcome, rounds, speedup, tokens and cost;
    the totals; the failures grouped by class."""
    rows = ledger.rows()
    failures: dict[str, list[str]] = {}
    for row in rows:
        if row["state"] in ("failed", "interrupted"):
            failures.setdefault(row["error_class"] or "unknown", []).append(row["op"])
    meta = ledger.meta()
    meta.pop("activity", None)
    sessions = meta.pop("sessions", None) or []
    spend = spend_of(rows)
    summary = {"batch_id": path.name, "meta": meta, "counts": counts_of(rows), "sessions": sessions,
               "session": sessions[-1] if sessions else {},  # the last one
               "tokens": {"input": spend["input"], "output": spend["output"]},
               "cost_usd": round(spend["cost_usd"], 6), "cost_complete": spend["cost_complete"], "failures": failures,
               "ops": [{**{k: r[k] for k in ("op", "state", "attempts", "infra_retries", "rounds", "best_speedup",
                                             "gpu", "tokens_input", "tokens_output", "cost_usd", "cost_complete",
                                             "error_class",
                                             "error", "run_id")},
                        "why_failed": json.loads(r["why_failed"]) if r.get("why_failed") else None,
                        "fast_p": json.loads(r["fast_p"]) if r["fast_p"] else None,
                        "baseline_speedups": json.loads(r["baseline_speedups"]) if r["baseline_speedups"] else None}
                       for r in rows]}
    summary["kernelbench_levels"] = by_level(summary["ops"])
    (path / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    counts = summary["counts"]
    compared = any(r["baseline_speedups"] for r in summary["ops"])  # a column over inductor only where timed
    lines = [f"# {path.name}", "",
             f"{counts['accepted']} accepted, {counts['failed']} failed, {counts['skipped']} skipped, "
             f"{counts['interrupted']} interrupted, {counts['pending'] + counts['running']} not finished, of "
             f"{counts['total']}; {summary['tokens']['input']} input + {summary['tokens']['output']} output tokens, "
             f"{cost_text(summary['cost_usd'], summary['cost_complete'])}", ""] + ([f"New work stopped: {summary['meta']['ended_by']}.", ""]
                                                  if summary["meta"].get("ended_by") else []) + [
             f"| op | state | attempts | rounds | speedup | {'vs inductor | ' if compared else ''}fast_1 | on | cost | error |",
             "| --- " * (9 + bool(compared)) + "|"]
    for r in summary["ops"]:
        speedup = f"{r['best_speedup']:.3g}x" if r["best_speedup"] is not None else ""
        inductor = (r["baseline_speedups"] or {}).get("inductor")
        over = (f"{inductor:.3g}x | " if inductor is not None else " | ") if compared else ""
        fast_1 = next((f"{v:.0%}" for k, v in (r["fast_p"] or {}).items() if float(k) == 1.0), "")
        error = (f"{r['error_class']}: " if r["error_class"] else "") + " ".join((r["error"] or "").split()).replace("|", "/")
        lines.append(f"| {r['op']} | {r['state']} | {r['attempts']} | {r['rounds'] or ''} | {speedup} | {over}{fast_1} | "
                     f"{r['gpu'] or ''} | {cost_text(r['cost_usd'], r['cost_complete'])} | "
                     f"{error.strip() if r['state'] != 'accepted' else ''} |")
    if len({r["gpu"] for r in summary["ops"] if r["best_speedup"] is not None}) > 1:
        lines += ["", "Speedups were measured on different GPU models (column 'on'): compare them within one model."]
    lines += _levels_md(summary["kernelbench_levels"])
    lines += _sessions_md(sessions)
    if failures:
        lines += ["", "## Failures by class", ""] + [f"- {kind}: {', '.join(ops)}" for kind, ops in failures.items()]
    (path / "summary.md").write_text("\n".join(lines) + "\n")
    return summary
