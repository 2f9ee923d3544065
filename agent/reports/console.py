"""Human-readable console output for verdicts and rounds; a stdout that survives a closed pipe;
a spinner for waits."""
from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable

from rich.console import Console
from rich.status import Status
from rich.markup import escape

from bbagent.agent.generate.progress import (Asking, CandidateJudged, DeviceProbed, DispatcherDone, DispatcherTried,
                                             Evaluating, NewBest, ProbingDevice, Progress, ReplacedApproved, Retrying,
                                             RoundDone, SameKernel, Started, Tuning, TuningDone)

TABLE_WIDTH = 160
MESSAGE_LINES = 30


class PipeSafe:
    """stdout that survives its reader going away (``bbagent ops --json | head``): on a broken
    pipe the rest of the output goes to /dev/null and the command finishes as it would have."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._to_null()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._to_null()

    def _to_null(self) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self.stream.fileno())
        finally:
            os.close(null)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def pipe_safe(stream):
    return stream if isinstance(stream, PipeSafe) else PipeSafe(stream)


class Waiting:
    """While the user waits: in a terminal a spinner with the elapsed seconds, elsewhere one plain
    line. A context manager; ``start``/``stop`` for waits that end in another callback."""

    def __init__(self, console: Console, text: str):
        self.console, self.text = console, text
        self._status: Status | None = None
        self._done = threading.Event()

    def start(self) -> "Waiting":
        if not self.console.is_terminal:
            self.console.print(f"{self.text}...")
            return self
        started = time.monotonic()
        self._status = status = self.console.status(f"{self.text}...")
        status.start()

        def tick():
            while not self._done.wait(1.0):
                status.update(f"{self.text}... {time.monotonic() - started:.0f} s")
        threading.Thread(target=tick, daemon=True).start()
        return self

    def stop(self) -> None:
        self._done.set()
        if self._status is not None:
            self._status.stop()
            self._status = None

    def __enter__(self) -> "Waiting":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def widen(console: Console) -> None:
    """Piped to a log, rich would fold tables into 80 columns: give them room instead."""
    if not console.is_terminal:
        console.width = max(console.width, TABLE_WIDTH)


def verdict_line(verdict) -> str:
    status = "[green]PASS[/green]" if verdict.passed else "[red]FAIL[/red]"
    counts = verdict.test_counts()
    text = f"{status} {counts.text()}"
    if counts.overloads == 1 and verdict.summary.total and verdict.variants:  # an operator's (a program serves none)
        from bbagent.agent.judging import family_of_overload
        family = family_of_overload(verdict.op)["serves"]
        if len(family) > 1:  # generate's count covers the family: say why this one is smaller
            text += f" (of {verdict.op} alone; --variants tests all {len(family)} overloads, as generate does)"
    lines = verdict.message.strip().splitlines()
    if verdict.error_kind and len(lines) > 1:  # the whole message follows (print_verdict)
        from bbagent.harness.interface import ERROR_KINDS
        text += f" - {verdict.error_kind}: {ERROR_KINDS[verdict.error_kind]}"
    elif lines:
        text += f" - {escape(lines[0][:200])}"
    return text


def print_verdict(console: Console, verdict) -> None:
    env = verdict.environment
    where = env.gpu or ("CPU, Triton interpreter" if env.interpreter else env.device)
    where = f"on {where}" if where else "(not run)"
    console.print(f"{verdict.op} {where} (seed {verdict.seed}): {verdict_line(verdict)}")
    message = verdict.message.strip().splitlines()
    if verdict.error_kind and len(message) > 1:  # the whole cause: a syntax error's caret, a hang site
        console.print("\n".join(f"    {line}" for line in message[:MESSAGE_LINES]), markup=False)
    variants = verdict.variants
    if len(variants) > 1 or any(v.served_by == "adapter" for v in variants):
        from bbagent.agent.review.record import served_how
        for v in variants:
            state = "[green]ok[/green]" if v.ok else "[red]FAIL[/red]"
            console.print(f"  {state} {v.op} ({served_how(v)}): {v.passed} passed, {v.failed} failed "
                          f"of {v.planned}")
    for group in verdict.failure_groups:
        example = group.example
        console.print(f"  {group.error_kind} x{group.count}, e.g. {example.input}:", markup=False)
        console.print("    " + example.message.replace("\n", "\n    "), markup=False)
    skipped_reasons: dict[str, int] = {}
    for item in verdict.skipped:
        skipped_reasons[item.reason] = skipped_reasons.get(item.reason, 0) + 1
    for reason, count in skipped_reasons.items():
        console.print(f"  skipped {count}: {reason}", markup=False)


def round_reporter(console: Console) -> "RoundReporter":
    return RoundReporter(console)


class RoundReporter:
    """The progress of a generate run, one ``agent.generate.progress`` event at a time:
    ``reporter(event)`` prints what the event says; a wait shows a spinner until the next."""

    def __init__(self, console: Console):
        self.console = console
        self.waiting: list[Waiting] = []
        self.handlers: dict[type, Callable[[Any], None]] = {
            Started: self._started, Asking: self._asking, Retrying: self._retrying, Evaluating: self._evaluating,
            CandidateJudged: self._candidate, NewBest: self._best, DispatcherTried: self._dispatcher,
            DispatcherDone: self._dispatcher_done, ReplacedApproved: self._replaced_approved,
            SameKernel: self._same_kernel, RoundDone: self._round, ProbingDevice: self._probing,
            DeviceProbed: self._probed, Tuning: self._tuning, TuningDone: self._tuned}

    def __call__(self, event: Progress) -> None:
        handler = self.handlers.get(type(event))
        if handler is not None:
            handler(event)

    def wait(self, text: str) -> None:
        self.stop_waiting()
        self.waiting.append(Waiting(self.console, text).start())

    def stop_waiting(self) -> None:
        while self.waiting:
            self.waiting.pop().stop()

    def _started(self, event: Started) -> None:
        if event.variant_of is not None:
            self.console.print(f"{event.op} is a calling convention of {event.variant_of}: asking for "
                               f"{event.variant_of} once (--exact-overload asks for the overload itself)")
        self.console.print(f"bbagent generate {event.computation}: provider {event.provider}, model "
                           f"{event.model}, up to {event.rounds} round(s) of {event.candidates} candidate(s); "
                           f"run directory {event.run_dir}")
        if len(event.serves) > 1:
            self.console.print(f"the kernel is tested and served as {', '.join(event.serves)}")

    def _probing(self, event: ProbingDevice) -> None:
        self.wait("probing the GPU for the prompt (once per GPU model, torch and Triton)")

    def _probed(self, event: DeviceProbed) -> None:
        self.stop_waiting()
        self.console.print(escape(event.line()))

    def _asking(self, event: Asking) -> None:
        many = f" for {event.candidates} candidates" if event.candidates > 1 else ""
        self.wait(f"round {event.round}/{event.rounds}: asking the model{many}")

    def _retrying(self, event: Retrying) -> None:  # from the provider's retry loop, while waiting
        self.console.print(f"  the call failed ({escape(event.error[:200])}); attempt {event.attempt + 1} of "
                           f"{event.attempts} in {event.wait_s:.1f} s")

    def _evaluating(self, event: Evaluating) -> None:
        which = f" {event.candidate} of {event.candidates}" if event.candidates > 1 else ""
        self.wait(f"round {event.round}: evaluating the kernel{which}")

    def _candidate(self, event: CandidateJudged) -> None:
        self.stop_waiting()
        record, where = event.record, f"round {event.round}, candidate {event.candidate}"
        if record.outcome == "provider_error":
            self.console.print(f"{where}: [red]no answer[/red] ({escape((record.message or '')[:200])})")
        elif record.outcome == "no_code":
            self.console.print(f"{where}: [red]no code block[/red]")
        else:
            s = record.summary
            counted = f"{s.passed}/{s.total} tests" if s is not None else "no tests"
            self.console.print(f"{where}: {_status(record)} {counted}")

    def _best(self, event: NewBest) -> None:
        what = ("bbagent's dispatcher between rounds {} and {}".format(*event.dispatcher_of)
                if event.dispatcher_of else "")
        self.console.print(f"round {event.round}: {what or 'the kernel is'} faster than round {event.replaces}; "
                           "it replaces it in generated_kernels/ (the slower one stays in runs/)")

    def _dispatcher(self, event: DispatcherTried) -> None:
        self.wait("round {}: evaluating a dispatcher between the kernels of rounds {} and {} ({})".format(
            event.round, *event.parts, "; ".join(event.rules)))

    def _dispatcher_done(self, done: DispatcherDone) -> None:
        self.stop_waiting()
        event = done.record
        where, parts = f"round {event.after_round}", "rounds {} and {}".format(*event.parts)
        if event.outcome in ("not_tried", "cannot_merge"):
            self.console.print(f"{where}: no dispatcher between {parts}: {escape(event.reason or '')}")
        elif event.outcome == "pass":
            kept = "kept" if event.kept else "not faster than the best, not kept"
            self.console.print(f"{where}: dispatcher between {parts}: [green]PASS[/green]"
                               + (f", geomean {event.speedup:.3g}x eager" if event.speedup is not None else "")
                               + f"; {kept}")
        elif event.outcome:
            self.console.print(f"{where}: dispatcher between {parts}: [red]{escape(event.outcome)}[/red] "
                               f"({escape((event.message or '')[:200])})")

    def _replaced_approved(self, event: ReplacedApproved) -> None:
        self.console.print(f"[yellow]note:[/yellow] round {event.round}'s kernel replaces approved version "
                           f"{event.version} as the current kernel; version {event.version} stays in "
                           f"{event.where}/ and is what `bbagent.enable()` serves until the new one is approved")

    def _tuning(self, event: Tuning) -> None:
        self.wait(f"tuning round {event.round}'s Helion kernel: Helion's autotuner on the timed shapes, at most "
                  f"{event.budget_s:g} s, then its tests again with the configs found")

    def _tuned(self, event: TuningDone) -> None:
        self.stop_waiting()
        speeds = "".join(f", {what} {speed:.2f}x" for what, speed in (("untuned", event.speedup_untuned),
                                                                        ("tuned", event.speedup_tuned))
                         if speed is not None)
        self.console.print(f"tuning: {event.outcome}: {event.message}{speeds}", markup=False)

    def _same_kernel(self, event: SameKernel) -> None:
        self.console.print(f"note: round {event.round}'s kernel is the same code as the current version "
                           f"{event.version} (from run {event.run_id}): kept as it is, review status "
                           f"{event.status}, no new version")

    def _round(self, event: RoundDone) -> None:
        self.stop_waiting()
        record = event.record
        tokens = "{} in / {} out tokens".format(*record.tokens)
        if record.usage is not None and record.usage.cached:
            tokens += ", the answer reused from the call log"
        if record.outcome == "no_code":
            self.console.print(f"round {event.round}: [red]no code block[/red] in the answer ({tokens})")
            return
        counted = record.counts or record.summary
        counts = counted.model_dump() if counted is not None else {"total": 0}
        from bbagent.harness.interface import count_text  # pydantic: not at import, which every command pays before it starts
        line = f"round {event.round}: {_status(record)} {count_text(counts)} ({tokens})"
        if record.speedup is not None:
            line += f", geomean speedup {record.speedup:.3g}x over eager"
        if record.message:
            line += f" - {escape(record.message.splitlines()[0][:200])}"
        self.console.print(line)


def _status(record) -> str:
    return "[green]PASS[/green]" if record.outcome == "pass" else "[red]FAIL[/red]"


def print_ops(console: Console, rows: list[dict], total: int) -> None:
    """One line per overload, never folded (names stay whole at any width): name, family, OpInfo
    samples, trace tests, then how it is tested (via its functional overload) or why it is not."""
    width = max([len(r["op"]) for r in rows] + [2])
    console.print(f"{'op':<{width}}  {'family':<18} {'opinfo':>6} {'traces':>6}  notes", markup=False)
    for row in rows:
        note = (f"tests of {row['tested_via']}" if row["tested_via"] else row["why_none"]) or ""
        console.print(f"{row['op']:<{width}}  {row['family']:<18} {row['opinfo_samples']:>6} "
                      f"{row['trace_tests']:>6}  {note}", markup=False, overflow="ignore", crop=False)
    tested = sum(1 for r in rows if not r["why_none"])
    from bbagent.harness.interface import variant_counts
    counts = variant_counts(rows)
    shown = f"{len(rows)} of {total} overloads" if len(rows) != total else f"{total} overloads"
    console.print(f"{shown}, {tested} with tests; in-place: {counts['inplace']['tested']} of "
                  f"{counts['inplace']['listed']} tested ({counts['inplace']['via_functional']} also with their "
                  f"functional overload's tests), out=: {counts['out']['tested']} of {counts['out']['listed']} tested "
                  f"({counts['out']['via_functional']} with their functional overload's tests); --json for dtypes "
                  "and variants")


KERNEL_COLUMNS = ("written for", "serves", "tests", "speed", "model", "folder")


def print_kernels(console: Console, entries: list[dict]) -> None:
    """A table in a terminal; piped, tab-separated lines under a header, each value whole (a folder's
    path is never folded)."""
    from rich.table import Table
    from bbagent.agent.review.meta import PerformanceRecord
    from bbagent.agent.review.record import speed_line
    from bbagent.harness.interface import short_count
    rows = []
    for e in entries:
        tests = e.get("tests") or {}
        if e.get("status") in ("broken", "modified"):
            reason = e.get("reason") or next(iter(e.get("flags") or []), "") or "the file differs from the approved one"
            rows.append((e["written_for"], ", ".join(e["serves"]), "-", f"{e['status']}: {reason}", "-", str(e["dir"])))
            continue
        speed = speed_line(PerformanceRecord.model_validate(e["performance"]), short=True) if e.get("performance") else "-"
        rows.append((e["written_for"], ", ".join(e["serves"]), short_count(tests), speed,
                     f"{e.get('provider', '?')}/{e.get('model', '?')}", str(e["dir"])))
    if not console.is_terminal:
        console.file.write("".join("\t".join(row) + "\n" for row in [KERNEL_COLUMNS, *rows]))  # tabs kept
        return
    table = Table(box=None, pad_edge=False)
    for column in KERNEL_COLUMNS:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    widen(console)
    console.print(table)
    served = sum(len(e["serves"]) for e in entries)
    console.print(f"{len(entries)} accepted kernels serving {served} overloads")


def print_calls(console: Console, calls: list[dict]) -> None:
    from rich.table import Table
    table = Table(box=None, pad_edge=False)
    whole = {"run": "run_id", "op": "op", "provider": "provider", "model": "model"}  # names to copy: never folded
    for column in ("id", "run", "op", "round", "cand", "provider", "model", "in", "out", "cost $", "latency s",
                   "cached", "error"):
        longest = max((len(c[whole[column]] or "-") for c in calls), default=0) if column in whole else None
        table.add_column(column, overflow="fold", min_width=longest, no_wrap=column in whole)
    for c in calls:
        cost = "-" if c.get("error") else "?" if c["cost_usd"] is None else f"{c['cost_usd']:.4f}"
        table.add_row(str(c["id"]), c["run_id"] or "-", c["op"] or "-", str(c["round"]), str(c["candidate"]),
                      c["provider"], c["model"], str(c["input_tokens"]), str(c["output_tokens"]), cost,
                      f"{c['latency_s']:.2f}", "yes" if c["cached"] else "", escape((c.get("error") or "")[:160]))
    widen(console)
    console.print(table)
    from bbagent.agent.money import cost_text
    from bbagent.agent.providers.call_log import IN_FLIGHT
    total = sum(c["cost_usd"] or 0 for c in calls)
    unanswered = sum(c.get("error") == IN_FLIGHT for c in calls)
    failed = sum(bool(c.get("error")) for c in calls) - unanswered
    priced = all(c["cost_usd"] is not None for c in calls if not c.get("error"))
    console.print(f"{len(calls)} calls, {sum(bool(c['cached']) for c in calls)} from the cache, {failed} failed"
                  + (f", {unanswered} with no answer recorded (in flight when their process ended, or still)"
                     if unanswered else "") + f", {cost_text(total, priced)} in all")


def call_as_json(call: dict) -> dict:
    """A recorded call as ``logs --json`` prints it: its messages and parameters as JSON, not as
    the text the log keeps them in."""
    shown = {key: value for key, value in call.items() if key not in ("prompt", "params")}
    return {**shown, "messages": _parsed(call["prompt"]), "params": _parsed(call["params"])}


def _parsed(text: str | None):
    try:
        return json.loads(text) if text else None
    except ValueError:  # a log written by hand or cut short: shown as it is
        return text


def print_call(console: Console, call: dict) -> None:
    """One recorded call whole (``logs --id N``): what it was, every message sent, and the answer
    (or the error)."""
    from bbagent.agent.money import cost_text
    cost = "?" if call["cost_usd"] is None else cost_text(call["cost_usd"], True)
    console.print(f"call {call['id']}: run {call['run_id'] or '-'}, {call['op'] or '-'}, round {call['round']}, "
                  f"candidate {call['candidate']}, {call['provider']} {call['model']}, {call['input_tokens']} in + "
                  f"{call['output_tokens']} out tokens, {cost}, {call['latency_s']:.2f} s"
                  + (" (from the cache)" if call["cached"] else ""), markup=False)
    messages = _parsed(call["prompt"])
    for message in messages if isinstance(messages, list) else [{"role": "prompt", "content": messages}]:
        content = message.get("content") if isinstance(message, dict) else message
        if isinstance(content, list):  # content blocks: their text
            content = "\n".join(block.get("text", "") for block in content if isinstance(block, dict))
        console.print(f"\n--- {message.get('role', '?') if isinstance(message, dict) else '?'} ---\n{content}",
                      markup=False)
    if call.get("error"):
        console.print(f"\n--- error ---\n{call['error']}", markup=False)
    else:
        console.print(f"\n--- answer ---\n{call['response']}", markup=False)


def print_check_model(console: Console, result: dict) -> None:
    """``bbagent check-model``'s result: verdict, overloads served, timing, culprits."""
    from rich.table import Table
    widen(console)
    head = f"{result['model']} on {result.get('gpu') or result['device']} ({result['dtype']})"
    if result.get("crashed"):
        console.print(f"{head}: [red]CRASHED[/red]: {escape(result['crashed'])}\n{escape(result.get('stderr_tail', ''))}")
        return
    tol = result["tolerance"]
    if result.get("status") == "nothing_served":
        hint = "; --include-slower serves them anyway" if result.get("slower_skipped") else ""
        console.print(f"{head}: [yellow]NOTHING SERVED[/yellow]: no generated kernel served a call of the forward, "
                      f"so nothing was checked: {escape(result['why_nothing_served'])}{hint}")
        return
    if result.get("compiled"):
        _print_compiled_check(console, head, result)
        return
    status = "[green]MATCH[/green]" if result["match"] else "[red]MISMATCH[/red]"
    console.print(f"{head}: {status} against eager within atol {tol['atol']:g}, rtol {tol['rtol']:g}: "
                  f"{result['mismatches']} of {result['numel']} outputs outside, max abs error "
                  f"{result['max_abs_error']:.3g}, max rel error {result['max_rel_error']:.3g}")
    for m in result.get("first_mismatches") or []:
        console.print(f"  output[{m['index']}]: eager {m['eager']:.6g}, enabled {m['enabled']:.6g}")
    table = Table(show_edge=False, pad_edge=False, title="aten overloads served by generated kernels")
    for column in ("overload", "version", "calls served", "calls in model", "fallbacks", "speedup (bench)"):
        table.add_column(column, justify="left" if column in ("overload", "fallbacks") else "right")
    for op, r in sorted(result["served"].items(), key=lambda item: -item[1]["calls"]):
        fallbacks = ", ".join(f"{why}: {n}" for why, n in r["fallbacks"].items()) or "-"
        inside = f" ({r['calls_inside_other_ops']} inside other operators)" if r.get("calls_inside_other_ops") else ""
        table.add_row(op, f"v{r['version']}", str(r["calls"]), f"{r['model_calls']}{inside}", escape(fallbacks),
                      f"{r['speedup']:.3g}x" if r["speedup"] is not None else "-")
    console.print(table)
    total = sum(result["ops_run"].values())
    served = sum(r["calls"] for r in result["served"].values())
    console.print(f"the forward ran {total} aten calls over {len(result['ops_run'])} overloads; {served} served by "
                  f"generated kernels")
    for op, why in sorted(result.get("skipped_in_model", {}).items()):
        console.print(f"  not served: {op}: {escape(why)}")
    timing = result.get("timing")
    if timing:
        note = " (CPU: the Triton interpreter; says nothing about speed)" if result["device"] == "cpu" else ""
        console.print(f"time per forward (median of {timing['repeats']} x {timing['iterations']}): eager "
                      f"{timing['eager_ms']:.3f} ms, enabled {timing['enabled_ms']:.3f} ms, "
                      f"{timing['speedup']:.3g}x{note}")
    for culprit in result.get("culprits") or []:
        console.print(f"[red]culprit:[/red] {', '.join(culprit)}" + (" (only together)" if len(culprit) > 1 else ""))


def _print_compiled_check(console: Console, head: str, result: dict) -> None:
    """``check-model --compile``: eager, torch.compile and torch.compile with bbagent's kernels side
    by side (output against eager, time), then what compiled code called and what it left."""
    from rich.table import Table
    compiled, tol = result["compiled"], result["tolerance"]
    status = "[green]MATCH[/green]" if result["match"] else "[red]MISMATCH[/red]"
    console.print(f"{head}, torch.compile mode {compiled['mode']}: {status} against eager within atol "
                  f"{tol['atol']:g}, rtol {tol['rtol']:g}")
    timing = compiled.get("timing") or {}
    train = compiled.get("train")
    unit = "step" if train else "forward"
    table = Table(show_edge=False, pad_edge=False, title="the whole model, end to end" +
                  (f", {train['steps']} training steps (SGD, lr {train['learning_rate']:g})" if train else ""))
    columns = ("run", "losses and first gradients against eager" if train else "output against eager",
               f"ms per {unit}", "vs torch.compile") + (("peak MiB",) if train else ())
    for column in columns:
        table.add_column(column, justify="left" if column == columns[0] or column == columns[1] else "right")
    compile_ms = timing.get("compile_ms")
    for run, name, against in (("eager", "eager", None), ("torch.compile", "compile", compiled["compile_alone"]),
                               ("torch.compile + bbagent", "bbagent", compiled["compile_bbagent"])):
        ms = timing.get(f"{name}_ms")
        peak = (train["peak_mib"].get(name),) if train else ()
        table.add_row(run, _against_eager(against), f"{ms:.3f}" if ms is not None else "-",
                      f"{compile_ms / ms:.3g}x" if ms and compile_ms else "-",
                      *(f"{p:.0f}" if p is not None else "-" for p in peak))
    console.print(table)
    if timing and train:
        console.print(f"median of steps 2-{train['steps']} of each run (the first compiles)")
    elif timing:
        note = " (CPU: the Triton interpreter; says nothing about speed)" if result["device"] == "cpu" else ""
        console.print(f"median of {timing['repeats']} x {timing['iterations']} forwards each (eager and "
                      f"torch.compile alone timed before and after){note}")
    for op, row in sorted(compiled["kernels"].items()):
        console.print(f"  {op} v{row['version']}: {_compiled_use(row['under_compile'], row['compiled_calls'], row.get('compiled_sites', 0))}")
    for key, row in sorted(compiled["regions"].items()):
        console.print(f"  region {key}: {_compiled_use(row['why'], row['calls'], row.get('sites', 0))}")
    gate = compiled.get("gate")
    if gate is not None:
        served = ", ".join(gate["served"]) or "nothing (no set made the model faster beyond the noise)"
        console.print(f"whole-model gate ({compiled['mode']}): serves {escape(served)}")
        for timing in gate["sets"]:
            console.print(f"  {escape(' + '.join(timing['members']))}: {timing['speedup']:.3f}x torch.compile "
                          f"(95% interval {timing['low']:.3f}-{timing['high']:.3f})")
        for name, why in sorted(gate["left_out"].items()):
            console.print(f"  left out {escape(name)}: {escape(why)}")
        if gate.get("not_saved"):
            console.print(f"  [red]{escape(gate['not_saved'])}[/red]")
        if gate.get("saved_to"):
            console.print(f"  recorded in {escape(gate['saved_to'])}: bbagent.enable(model='{escape(gate['model'])}', "
                          f"mode='{gate['mode']}') serves it")
    if compiled["mode"] != "default" and "cudagraphs" not in compiled["mode"]:
        console.print("  (CUDA graph replays run no Python: the calls counted are those outside a replay)")


def _compiled_use(status: str | None, calls: int, sites: int) -> str:
    """How compiled code ran one kernel or region answer: launched by inductor's code at ``sites``
    places of the compiled graphs, ``calls`` opaque calls, or why neither."""
    from bbagent.agent.serving.compiled import is_served
    if not is_served(status):
        return f"not called by compiled code: {escape(str(status))}"
    said = [f"launched by inductor's code at {sites} place(s) in the compiled graphs"] if sites else []
    said += [f"{calls} compiled call(s) out of inductor's code"] if calls else []
    detail = status.split("; ", 1)[1] if "; " in status else ""
    return ("; ".join(said) or "not met in this model") + (f" ({escape(detail)})" if detail else "")


def _against_eager(compared: dict | None) -> str:
    if compared is None:
        return "-"
    if not compared["match"]:
        return f"[red]{compared.get('mismatches', 'all')} outside[/red], max abs error {compared.get('max_abs_error')}"
    return f"match, max abs error {compared['max_abs_error']:.3g}" if compared["max_abs_error"] is not None else "match"


def print_regions(console: Console, found) -> None:
    """``bbagent regions``: one row per region (hash, kind, count, operators, input shapes, on a GPU
    its time and share of the compiled model's) and the problem file written for it."""
    from rich.table import Table
    widen(console)
    built = escape(found.script) if found.script else escape(str(found.config))
    console.print(f"{found.model} on {found.device} ({found.dtype}), {built}: "
                  f"{len(found.regions)} region(s) in {found.graphs} graph(s) inductor received"
                  + (" (training: forward and backward)" if found.backward else ""))
    console.print(f"the compiled model: {found.gpu_us:.1f} us of GPU time per forward; a region's share is its count "
                  "times its GPU time compiled alone, over that; its floor, the least bytes it moves over the copy "
                  "bandwidth or its FLOPs over the matmul peak, whichever is longer" if found.gpu_us is not None else
                  "time shares are measured on a GPU only (--device cuda), of the inference graph (no --backward)")
    table = Table(show_edge=False, pad_edge=False)
    columns = ("hash", "kind", "count", "operators", "inputs", "us", "floor us", "share", "problem")
    timings = ("us", "floor us", "share")
    for column in columns if found.gpu_us is not None else [c for c in columns if c not in timings]:
        table.add_column(column, justify="right" if column in ("count", *timings) else "left", overflow="fold")
    for region, path in zip(found.regions, found.files):
        ops = ", ".join(op.removeprefix("aten.") for op in region.ops)
        shapes = ", ".join(f"{s.dtype}{s.shape}" for s in region.inputs)
        timed = [] if found.gpu_us is None else [
            f"{region.gpu_us:.1f}", f"{region.floor_us:.1f}" if region.floor_us is not None else "-",
            f"{region.share:.1%}" if region.share is not None else "-"]
        table.add_row(region.hash, region.kind, str(region.count), escape(ops), escape(shapes), *timed, escape(path))
    console.print(table)
