"""How a running batch shows itself: a line per event (always; the only output when stderr is not
a terminal), and in a terminal a live panel under them, refreshed from the coordinator's activity
snapshots: operators done, accepted, failed, running and pending; each GPU's current operator and
busy fraction; LLM calls in flight; tokens, cost, elapsed time and an ETA.
"""
from __future__ import annotations

import time

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from bbagent.agent.money import cost_text


def _resume_line(data: dict) -> str:
    return (f"resuming: {len(data['interrupted'])} interrupted and {len(data['lease_expired'])} whose process "
            "died run again" + (f"; {len(data['other_key'])} finished under another resume key (torch, triton, "
                                "GPU model, prompts or model changed) run again" if data.get("other_key") else "")
            + (f"; {len(data['failed'])} failed run again (--retry-failed)" if data.get("failed") else "")
            + (f"; {len(data['still_leased'])} still leased elsewhere" if data["still_leased"] else ""))


def _batch_start_line(data: dict) -> str:
    c = data["counts"]
    line = (f"batch: {c['pending']} to run, {c['skipped']} skipped, {c['accepted']} accepted earlier, "
            f"{data['jobs']} at a time")
    if data.get("deadline"):
        at = time.localtime(data["deadline"])
        day = "today" if at.tm_yday == time.localtime().tm_yday else "tomorrow"
        line += (f"; no new work after {time.strftime('%Y-%m-%d %H:%M', at)} ({day}, in "
                 f"{duration(data['deadline'] - time.time())[:-3]})")
    return line


def _dataset_line(data: dict) -> str:
    line = (f"dataset: {data['rows']} rows; {data['pairs_used']} inputs of {data['ops']} operator(s) used "
            f"({data['canaries']} correctness-only)")
    if data["skipped"]:
        top = "; ".join(f"{n} {escape(why[:90])}" for why, n in list(data["reasons"].items())[:4])
        line += f"; {data['skipped']} skipped: {top} (every one in {data['file']})"
    return line


def _dataset_inputs_line(data: dict) -> str:
    line = f"{data['op']}: {data['ran']} of the dataset's inputs ran as tests"
    if data.get("not_run"):
        line += f"; {data['not_run']} did not: {escape(data['why_not'])}"
    return line


def _op_end_line(data: dict) -> str:
    if data["state"] != "accepted":
        tail = f" ({data.get('error_class')})" + (f": {escape(str(data['error']))}" if data.get("error") else "")
    else:
        speedup = data.get("best_speedup")
        rounds = data.get("rounds")
        tail = " (" + ", ".join(([f"{speedup:.2f}x eager"] if speedup else [])
                                + ([f"{rounds} round{'s' * (rounds != 1)}"] if rounds else [])) + ")"
        tail = "" if tail == " ()" else tail
    return f"{data['op']}: [bold]{data['state']}[/bold]{tail}"


EVENT_LINES = {  # event -> its line (rich markup); events not here print none
    "resume": _resume_line,
    "coordinator_lost": lambda d: f"[yellow]the batch's last coordinator was lost: {escape(d['reason'])}[/yellow]",
    "runs_interrupted": lambda d: (f"{len(d['runs'])} run(s) the lost coordinator left saying 'running' now say "
                                   "'interrupted' in their run.json"),
    "batch_start": _batch_start_line,
    "dataset": _dataset_line,
    "op_start": lambda d: f"{d['op']}: started",
    "workdirs_removed": lambda d: (f"removed {d['folders']} working folder(s) that ended bbagent processes left "
                                   f"behind ({d['bytes'] / 2**20:.1f} MiB)"),
    "run_dataset_inputs": _dataset_inputs_line,
    "run_round": lambda d: f"{d['op']}: round {d.get('round')}: {d.get('outcome') or ''}",
    "op_retry": lambda d: (f"[yellow]{d['op']}: {d['error_class']} failure, retried later (all workers pause "
                           f"{d['pause_s']:g} s)[/yellow]: {escape(str(d['error'])[:200])}"),
    "op_end": _op_end_line,
    "run_replaced_approved": lambda d: (
        f"[yellow]{d['op']}: the new kernel replaces approved version {d.get('version')} as the current one"
        f"[/yellow]; that version stays in {d.get('where')}/ and enable() serves it until the new one is approved"),
    "op_interrupted": lambda d: f"{d['op']}: interrupted",
    "budget_spent": lambda d: (f"[yellow]{d['reason']}: nothing new starts; running operators stop before their "
                               "next round[/yellow]"),
}


def event_line(event: str, data: dict) -> str | None:
    """The line an event prints (rich markup), or None for events that print none."""
    line = EVENT_LINES.get(event)
    return line(data) if line is not None else None


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
    parts = [Text.from_markup(
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
    for gpu in snapshot.get("gpus") or []:
        parts.append(Text(gpu_line(gpu)))
    return Group(*parts)


def gpu_line(gpu: dict) -> str:
    """One GPU in a line: evaluations per hour, the GPU's own utilization, the waits for it."""
    line = (f"{gpu['name']}: {gpu['evaluations']} evaluations ({gpu['per_hour']:.0f}/h, up to {gpu['at_once']} at "
            f"once), waited {gpu['waited_s']:.0f} s for the GPU")
    if gpu.get("samples"):
        line += (f"; utilization {gpu['utilization_mean']:.0f}% mean, a kernel running in {gpu['busy_share']:.0%} of "
                 f"{gpu['samples']} s, memory peak {gpu['memory_peak_gib']} GiB")
    return line


class BatchDisplay:
    """``hear(event, data)`` for ``bbagent.batch(report=...)``; a context manager around the batch."""

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

    def hear(self, event: str, data: dict) -> None:
        if event == "activity":
            if self.live is not None:
                self.live.update(panel(data))
            return
        line = event_line(event, data)
        if line is not None:
            self.console.print(line)
