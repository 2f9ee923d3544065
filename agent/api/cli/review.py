"""``bbagent review``: list, show, approve, reject, diff and verify accepted kernels."""
from __future__ import annotations

import json
import sys

from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

import bbagent as api
from bbagent.agent.reports.console import widen
from bbagent.agent.money import cost_text
from bbagent.harness.interface import CONFIGS_FILE, ConfigTable, count_text, short_count
from bbagent import UsageError

STATUS_STYLE = {"approved": "green", "rejected": "red", "needs_review": "yellow", "stale": "magenta"}


def run(args, out, err) -> int:
    return {"list": _list, "show": _show, "approve": _decide, "reject": _decide, "diff": _diff,
            "verify": _verify}[args.action](args, out, err)


def _status(status: str) -> str:
    return f"[{STATUS_STYLE.get(status, 'white')}]{status}[/]"


def _list(args, out, err) -> int:
    rows = api.review_list(args.root, status=args.status, family=args.family, sort=args.sort)
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
        return 0
    if not rows:
        err.print(f"no accepted kernels under {api.resolve_root(args.root) / 'generated_kernels'}"
                  + (" match the filter" if args.status or args.family else ""))
        return 0
    widen(out)
    table = Table(show_edge=False, pad_edge=False)
    for column in ("op", "ver", "status", "tests", "speedup", "cost", "served", "flags"):
        table.add_column(column, justify="right" if column in ("ver", "tests", "speedup", "cost") else "left")
    for r in rows:
        speed = f"{r['geomean_speedup']:.3g}x" if r["geomean_speedup"] is not None else "-"
        cost = cost_text(r["cost_usd"], r.get("cost_complete", True), 3) if r["cost_usd"] is not None else "-"
        served = f"v{r['served_version']}" if r["served_version"] else "none"
        table.add_row(escape(r["op"]), str(r["version"] or "-"), _status(r["status"]),
                      short_count(r["tests"]), speed, cost, served, str(len(r["flags"]) or ""))
    out.print(table)
    for r in rows:
        if r["status"] in ("broken", "modified"):
            err.print(f"[red]{r['status']}:[/red] {escape(r['flags'][0])}")
    counts = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    out.print(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + "; `bbagent review show OP` for details")
    return 0


def _print_configs(info, text: str) -> None:
    """A Helion kernel's tuned configs (``helion_configs.json``), served pinned with it: one line each."""
    try:
        table = ConfigTable.from_json(text)
    except ValueError as exc:
        info.print(f"[red]Helion configs:[/red] {escape(CONFIGS_FILE)} cannot be read: {escape(str(exc))}")
        return
    info.print(f"Helion configs ({CONFIGS_FILE}, served pinned): {len(table.configs)} tuned with Helion {table.helion} "
               f"on {escape(table.gpu)} in {table.spent_s:g} s of a {table.budget_s:g} s budget")
    for row in table.configs:
        said = ", ".join(f"{name}={value}" for name, value in row.config.items())
        info.print(f"  {escape(row.kernel)}({escape(row.shapes)}): {escape(said)}", soft_wrap=True)
    for call in table.untuned:
        info.print(f"  untuned: {escape(call)}", soft_wrap=True)


def _show(args, out, err) -> int:
    """In a terminal: the kernel's review facts and its code, highlighted. Piped: stdout gets the
    kernel file exactly as it is (``review show OP > kernel.py`` saves it), the facts go to stderr."""
    shown = api.review_show(args.op, args.root, args.version)
    if args.json:
        print(json.dumps(shown, indent=1, default=str))
        return 0
    info = out if out.is_terminal else err
    widen(info)
    meta = shown["meta"]
    review = meta["review"]
    info.print(f"[bold]{escape(shown['op'])}[/bold] version {shown['version']}"
               f"{' (current)' if shown['current'] else ''}: {_status(shown['status'])}"
               + (f" by {escape(str(review['by']))} at {review['at']}" if review.get("by") else "")
               + (f" - {escape(review['note'])}" if review.get("note") else ""))
    for change in shown["changes"]:
        info.print(f"  changed since its tests: {escape(change)}")
    tests = meta.get("tests") or {}
    where = meta.get("gpu") or "CPU (Triton interpreter)"
    judged = (f"tests: {count_text(tests) if tests else 'not recorded'} on {escape(where)}" if not shown["unjudged"]
              else "tests: none of this file (it changed since its tests judged it)")
    info.print(f"model {escape(str(meta.get('model')))} ({meta.get('provider')}), run {meta.get('run_id')}, round "
               f"{meta.get('round')}; {judged}; "
               f"cost {cost_text(meta.get('cost_usd') or 0.0, meta.get('cost_complete', True))}; serves {', '.join(meta.get('serves') or [shown['op']])}")
    if meta.get("edited_from"):
        edit = meta["edited_from"]
        info.print(f"edited by hand from version {edit['version']}; judged by {escape(str(edit['by']))} at {edit['at']}")
    if meta.get("answers_paid_by"):
        info.print(f"answers taken from the call log, paid for by run(s) {', '.join(meta['answers_paid_by'])}")
    for flag in shown["flags"]:
        info.print(f"[yellow]flag:[/yellow] {escape(flag)}")
    if out.is_terminal:
        out.print(Syntax(shown["kernel_source"], "python", line_numbers=True, word_wrap=True), soft_wrap=False)  # wrapped, never cut
    else:
        sys.stdout.write(shown["kernel_source"])
        sys.stdout.flush()
    if shown["helion_configs"] is not None:
        _print_configs(info, shown["helion_configs"])
    if shown["unjudged"]:
        info.print(f"[red]unjudged:[/red] {escape(shown['unjudged'])}")
    else:
        _print_shapes(info, meta.get("performance") or {})
    info.print(f"folder: {shown['dir']}")
    info.print(f"transcript: {shown['transcript'] or 'runs/' + str(meta.get('run_id')) + ' (not under this root)'}")
    if len(shown["versions"]) > 1:
        info.print("versions: " + ", ".join(f"v{v['version']} {_status(v['status'])}" for v in shown["versions"])
                   + (f"; enable() serves v{shown['served_version']}" if shown["served_version"] else
                      "; none approved: enable() serves none"))
    return 0


def _print_shapes(out, performance: dict) -> None:
    if not performance.get("measured"):
        out.print(f"speed: not measured ({escape(str(performance.get('reason')))})")
        return
    summary = performance["summary"]
    if summary.get("geomean_speedup") is not None:
        out.print(f"speed: geomean {summary['geomean_speedup']:.3g}x eager over {summary['counted']} shapes on "
                  f"{escape(str(performance.get('gpu')))}")
    table = Table(show_edge=False, pad_edge=False, title="per-shape timing")
    for column in ("input", "aten ms", "kernel ms", "speedup", "GB/s"):
        table.add_column(column, justify="left" if column == "input" else "right")
    for shape in performance.get("shapes") or []:
        table.add_row(escape(str(shape["input"])[:70]), _ms(shape.get("aten_ms")), _ms(shape.get("kernel_ms")),
                      f"{shape['speedup']:.3g}x" if shape.get("speedup") else "-",
                      f"{shape['kernel_gbs']:.0f}" if shape.get("kernel_gbs") else "-")
    out.print(table)


def _ms(value) -> str:
    return f"{value:.4f}" if value is not None else "-"


def _decide(args, out, err) -> int:
    def judging(op: str, number: int, why: str) -> None:
        err.print(f"{escape(why)}\njudging {escape(op)} version {number}'s kernel.py before approving it...")
    record = api.review_decide(args.op, args.action, args.note, root=args.root, version=args.version,
                               device=args.device, timeout_s=args.timeout, on_judge=judging)
    if args.json:
        print(json.dumps(record))
    elif record["refused"]:
        err.print(f"[red]not approved:[/red] {escape(record['refused'])}")
    else:
        judged = f" (judged first: {escape(record['judged'])})" if record["judged"] else ""
        out.print(f"{escape(args.op)} version {record['version']}: {_status(record['status'])} by "
                  f"{escape(str(record['by']))}{judged}")
    return 1 if record["refused"] else 0


def _diff(args, out, err) -> int:
    text = api.review_diff(args.op, args.root, args.version, args.against)
    if not text:
        err.print("the two versions' kernel.py are identical")
        return 0
    out.print(Syntax(text, "diff") if out.is_terminal else escape(text), end="" if not out.is_terminal else "\n")
    return 0


def _verify(args, out, err) -> int:
    if bool(args.op) == bool(args.all):
        raise UsageError("review verify takes one OP or --all")

    def started(op: str, number: int) -> None:
        err.print(f"verifying {op} version {number}...")
    results = api.review_verify(args.op, root=args.root, force=args.force, device=args.device,
                                timeout_s=args.timeout, allow_no_opinfo=args.allow_no_opinfo, on_start=started)
    if args.json:
        print(json.dumps(results, indent=1))
    elif not results:
        out.print("nothing to verify: every approved kernel was tested in this environment"
                  + ("" if args.force else " (--force re-tests them anyway)"))
    for r in results if not args.json else []:
        mark = "[green]passed[/green]" if r["passed"] else "[red]failed[/red]"
        out.print(f"{escape(r['op'])} v{r['version']}: {mark}, now {_status(r['status'])}: {escape(r['note'])}")
    return 0 if all(r["passed"] for r in results) else 1
