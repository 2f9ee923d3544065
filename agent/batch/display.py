"""How a running batch shows itself: a line per event (always; the only output when stderr is not
a terminal), and in a terminal a live panel under them, refreshed from the coordinator's activity
snapshots: operators done, accepted, failed, running and pending; each GPU's current operator and
busy fraction; LLM calls in flight; tokens, cost, elapsed time and an ETA.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from bbagent.agent.batch.events import (Activity, BatchStarted, BudgetSpent, CoordinatorLost, DatasetChosen, OpEnded,
                                        OpInterrupted, OpRetried, OpStarted, Resumed, RunProgress, RunsInterrupted,
                                        WorkdirsRemoved)
from bbagent.agent.batch.executor import node_rows
from bbagent.agent.generate.progress import DatasetInputs, DeviceProbed, ProbingDevice, Progress, ReplacedApproved, RoundDone
from bbagent.agent.money import cost_text


def _resume_line(e: Resumed) -> str:
    return (f"resuming: {len(e.interrupted)} interrupted and {len(e.lease_expired)} whose process "
            "died run again" + (f"; {len(e.other_key)} finished under another resume key (torch, triton, "
                                "GPU model, prompts or model changed) run again" if e.other_key else "")
            + (f"; {len(e.failed)} failed run again (--retry-failed)" if e.failed else "")
            + (f"; {len(e.still_leased)} still leased elsewhere" if e.still_leased else ""))


def _batch_start_line(e: BatchStarted) -> str:
    c = e.counts
    line = (f"batch: {c['pending']} to run, {c['skipped']} skipped, {c['accepted']} accepted earlier, "
            f"{e.jobs} at a time")
    if e.deadline:
        at = time.localtime(e.deadline)
        day = "today" if at.tm_yday == time.localtime().tm_yday else "tomorrow"
        line += (f"; no new work after {time.strftime('%Y-%m-%d %H:%M', at)} ({day}, in "
                 f"{duration(e.deadline - time.time())[:-3]})")
    return line


def _dataset_line(e: DatasetChosen) -> str:
    line = (f"dataset: {e.rows} rows; {e.pairs_used} inputs of {e.ops} operator(s) used "
            f"({e.canaries} correctness-only)")
    if e.skipped:
        top = "; ".join(f"{n} {escape(why[:90])}" for why, n in list(e.reasons.items())[:4])
        line += f"; {e.skipped} skipped: {top} (every one in {e.file})"
    return line


def _op_end_line(e: OpEnded) -> str:
    if e.state != "accepted":
        tail = f" ({e.error_class})" + (f": {escape(str(e.error))}" if e.error else "")
    else:
        parts = ([f"{e.best_speedup:.2f}x eager"] if e.best_speedup else []) + (
            [f"{e.rounds} round{'s' * (e.rounds != 1)}"] if e.rounds else [])
        tail = f" ({', '.join(parts)})" if parts else ""
    return f"{e.op}: [bold]{e.state}[/bold]{tail}"


def _run_line(e: RunProgress) -> str | None:
    """The few events of an operator's run a batch prints (the rest are in events.jsonl)."""
    inner, op = e.event, e.op
    if isinstance(inner, DatasetInputs):
        line = f"{op}: {inner.ran} of the dataset's inputs ran as tests"
        return line + (f"; {inner.not_run} did not: {escape(inner.why_not)}" if inner.not_run else "")
    if isinstance(inner, RoundDone):
        return f"{op}: round {inner.round}: {inner.record.outcome or ''}"
    if isinstance(inner, ReplacedApproved):
        return (f"[yellow]{op}: the new kernel replaces approved version {inner.version} as the current one"
                f"[/yellow]; that version stays in {inner.where}/ and enable() serves it until the new one is approved")
    return None


LINES: dict[type, Callable[..., str | None]] = {  # event type -> its line (rich markup); events not here print none
    Resumed: _resume_line,
    CoordinatorLost: lambda e: f"[yellow]the batch's last coordinator was lost: {escape(e.reason)}[/yellow]",
    RunsInterrupted: lambda e: (f"{len(e.runs)} run(s) the lost coordinator left saying 'running' now say "
                                "'interrupted' in their run.json"),
    BatchStarted: _batch_start_line,
    DatasetChosen: _dataset_line,
    ProbingDevice: lambda e: "probing the GPU for the prompts (once per GPU model, torch and Triton)",
    DeviceProbed: lambda e: escape(e.line()),
    OpStarted: lambda e: f"{e.op}: started",
    WorkdirsRemoved: lambda e: (f"removed {e.folders} working folder(s) that ended bbagent processes left "
                                f"behind ({e.bytes / 2**20:.1f} MiB)"),
    RunProgress: _run_line,
    OpRetried: lambda e: (f"[yellow]{e.op}: {e.error_class} failure, retried later (all workers pause "
                          f"{e.pause_s:g} s)[/yellow]: {escape(str(e.error)[:200])}"),
    OpEnded: _op_end_line,
    OpInterrupted: lambda e: f"{e.op}: interrupted",
    BudgetSpent: lambda e: (f"[yellow]{e.reason}: nothing new starts; running operators stop before their "
                            "next round[/yellow]"),
}


def event_line(event: Progress) -> str | None:
    """The line an event prints (rich markup), or None for events that print none."""
    line = LINES.get(type(event))
    return line(event) if line is not None else None


def duration(seconds: float) -> str:
    """``H:MM:SS`` (the live panel, the deadline line, the report's running time)."""
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def panel(snapshot: dict) -> Group:
    c = snapshot["counts"]
    elapsed = snapshot["at"] - snapshot["session_started"]
    left = c["pending"] + c["running"]
    done = snapshot["finished_this_session"]
    eta = duration(elapsed / done * left) if done else "-"
    parts: list[Text | Table] = [Text.from_markup(
        f"[bold]{c['accepted'] + c['failed']}[/bold] of {c['total'] - c['skipped']} done: "
        f"[green]{c['accepted']} accepted[/green], [red]{c['failed']} failed[/red], {c['running']} running, "
        f"{c['pending']} pending, {c['skipped']} skipped"),
        Text(f"elapsed {duration(elapsed)}, ETA {eta}; {snapshot['tokens']} tokens, "
             f"{cost_text(snapshot['cost_usd'], snapshot.get('cost_complete', True))}")]
    llm = snapshot.get("llm")
    if llm:
        paused = f", all calls paused {llm['paused_s']:g} s (429)" if llm["paused_s"] else ""
        parts.append(Text(f"LLM: {llm['in_flight']} of {llm['concurrency']} calls in flight, {llm['calls']} made, "
                          f"{llm['rate_limited']} rate limited{paused}"))
    if snapshot.get("paused_s"):
        parts.append(Text(f"provider failures: new work paused {snapshot['paused_s']:g} s", style="yellow"))
    if snapshot["slots"]:
        table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
        for column in ("slot", "evaluating", "busy", "evaluations"):
            table.add_column(column)
        for slot in snapshot["slots"]:
            table.add_row(slot["name"], slot["busy"] or "-", f"{slot['busy_fraction']:.0%}", str(slot["evaluations"]))
        parts.append(table)
    parts += [Text(line) for line in gpu_lines(snapshot.get("gpus") or [])]
    return Group(*parts)


def gpu_lines(gpus: list[dict]) -> list[str]:
    """A line per GPU, then, for a cluster's (rows with a node), a line per node."""
    lines = [gpu_line(gpu) for gpu in gpus]
    for node in node_rows(gpus):
        use = (f", utilization {node['utilization_mean']:.0f}% mean over {node['sampled']} GPU(s) sampled"
               if node["sampled"] else "")
        lines.append(f"node {node['node']}: {node['gpus']} GPU(s), {node['evaluations']} evaluations "
                     f"({node['per_hour']:.0f}/h){use}")
    return lines


def gpu_line(gpu: dict) -> str:
    """One GPU in a line: evaluations per hour, the GPU's own utilization, the waits for it."""
    most = f", {gpu['most_at_once']} at most so far" if gpu.get("most_at_once") is not None else ""
    line = (f"{gpu['name']}: {gpu['evaluations']} evaluations ({gpu['per_hour']:.0f}/h, up to {gpu['at_once']} at "
            f"once{most}), waited {gpu['waited_s']:.0f} s for the GPU")
    if gpu.get("queued_s") is not None:  # not in a summary written before it was counted
        line += f", {gpu['queued_s']:.0f} s for a free slot"
    if gpu.get("samples"):
        line += (f"; utilization {gpu['utilization_mean']:.0f}% mean, a kernel running in {gpu['busy_share']:.0%} of "
                 f"{gpu['samples']} s, memory peak {gpu['memory_peak_gib']} GiB")
    return line


class BatchDisplay:
    """``hear(event)`` for ``bbagent.batch(report=...)``; a context manager around the batch."""

    def __init__(self, console: Console):
        self.console = console
        self.live = Live(console=console, refresh_per_second=2, transient=True) if console.is_terminal else None
        self.started = time.time()

    def __enter__(self) -> "BatchDisplay":
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.stop()

    def hear(self, event: Progress) -> None:
        if isinstance(event, Activity):
            if self.live is not None:
                self.live.update(panel(event.snapshot))
            return
        line = event_line(event)
        if line is not None:
            self.console.print(line)
