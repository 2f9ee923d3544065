"""Human-readable console output for verdicts and rounds."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape


TABLE_WIDTH = 160


def widen(console: Console) -> None:
    """Piped to a log, rich would fold tables into 80 columns: give them room instead."""
    if not console.is_terminal:
        console.width = max(console.width, TABLE_WIDTH)


def verdict_line(verdict: dict) -> str:
    s = verdict["summary"]
    status = "[green]PASS[/green]" if verdict["verdict"] == "pass" else "[red]FAIL[/red]"
    text = f"{status} {s['passed']}/{s['total']} tests passed"
    if s["skipped"]:
        text += f", {s['skipped']} skipped"
    if verdict["message"]:
        text += f" - {escape(verdict['message'].splitlines()[0][:200])}"
    return text


def print_verdict(console: Console, verdict: dict) -> None:
    env = verdict["environment"]
    where = env.get("gpu") or ("CPU, Triton interpreter" if env.get("interpreter") else env.get("device"))
    where = f"on {where}" if where else "(not run)"
    console.print(f"{verdict['op']} {where} (seed {verdict['seed']}): {verdict_line(verdict)}", highlight=False)
    variants = verdict.get("variants") or []
    if len(variants) > 1 or any(v["served_by"] == "adapter" for v in variants):
        from agent.loop import served_how
        for v in variants:
            state = "[green]ok[/green]" if v["ok"] else "[red]FAIL[/red]"
            console.print(f"  {state} {v['op']} ({served_how(v)}): {v['passed']} passed, {v['failed']} failed "
                          f"of {v['planned']}", highlight=False)
    for group in verdict["failure_groups"]:
        example = group["example"]
        console.print(f"  {group['error_kind']} x{group['count']}, e.g. {example.get('input')}:", highlight=False,
                      markup=False)
        console.print("    " + example.get("message", "").replace("\n", "\n    "), highlight=False, markup=False)
    skipped_reasons: dict[str, int] = {}
    for item in verdict["skipped"]:
        skipped_reasons[item["reason"]] = skipped_reasons.get(item["reason"], 0) + 1
    for reason, count in skipped_reasons.items():
        console.print(f"  skipped {count}: {reason}", highlight=False, markup=False)


def round_reporter(console: Console):
    def report(event: str, data: dict) -> None:
        if event == "asking":
            many = f" for {data['candidates']} candidates" if data.get("candidates", 1) > 1 else ""
            console.print(f"round {data['round']}/{data['rounds']}: asking the model{many}...", highlight=False)
        elif event == "evaluating":
            which = (f" {data['candidate']} of {data['candidates']}" if data.get("candidates", 1) > 1 else "")
            console.print(f"round {data['round']}: evaluating the kernel{which}...", highlight=False)
        elif event == "candidate":
            record = data["record"]
            status = "[green]PASS[/green]" if record["outcome"] == "pass" else "[red]FAIL[/red]"
            s = record["summary"]
            console.print(f"round {data['round']}, candidate {data['candidate']}: {status} "
                          f"{s['passed']}/{s['total']} tests", highlight=False)
        elif event == "best":
            console.print(f"round {data['round']}: faster than round {data['replaces']}; it replaces it in "
                          "generated_kernels/ (the slower one stays in runs/)", highlight=False)
        elif event == "round":
            record = data["record"]
            usage = record.get("usage", {})
            tokens = f"{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens"
            if record["outcome"] == "no_code":
                console.print(f"round {data['round']}: [red]no code block[/red] in the answer ({tokens})")
                return
            s = record["summary"]
            status = "[green]PASS[/green]" if record["outcome"] == "pass" else "[red]FAIL[/red]"
            line = f"round {data['round']}: {status} {s['passed']}/{s['total']} tests ({tokens})"
            if record.get("speedup") is not None:
                line += f", geomean speedup {record['speedup']:.3g}x over eager"
            if record.get("message"):
                line += f" - {escape(record['message'].splitlines()[0][:200])}"
            console.print(line, highlight=False)
    return report


def print_ops(console: Console, rows: list[dict]) -> None:
    from rich.table import Table
    table = Table(box=None, pad_edge=False)
    for column in ("op", "family", "opinfo samples", "trace tests", "runs tests of", "dtypes", "values", "why none"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row["op"], row["family"], str(row["opinfo_samples"]), str(row["trace_tests"]),
                      row["tested_via"] or "", ",".join(row["dtypes"]), row["value_mode"] or "-", row["why_none"])
    console.print(table)
    tested = sum(1 for r in rows if not r["why_none"])
    from harness.coverage import variant_counts
    counts = variant_counts(rows)
    console.print(f"{len(rows)} overloads, {tested} with tests; in-place: {counts['inplace']['tested']} of "
                  f"{counts['inplace']['listed']} tested ({counts['inplace']['via_functional']} also with their "
                  f"functional overload's tests), out=: {counts['out']['tested']} of {counts['out']['listed']} tested "
                  f"({counts['out']['via_functional']} with their functional overload's tests)", highlight=False)


def print_kernels(console: Console, entries: list[dict]) -> None:
    from rich.table import Table
    from agent.loop import _speed_line
    table = Table(box=None, pad_edge=False)
    for column in ("written for", "serves", "tests", "speed", "model", "folder"):
        table.add_column(column, overflow="fold")
    for e in entries:
        tests = e.get("tests") or {}
        speed = _speed_line(e["performance"]).split(";")[0] if e.get("performance") else "-"
        table.add_row(e["written_for"], ", ".join(e["serves"]), f"{tests.get('passed', '?')}/{tests.get('total', '?')}",
                      speed, f"{e.get('provider', '?')}/{e.get('model', '?')}", e["dir"])
    widen(console)
    console.print(table)
    served = sum(len(e["serves"]) for e in entries)
    console.print(f"{len(entries)} accepted kernels serving {served} overloads", highlight=False)


def print_calls(console: Console, calls: list[dict]) -> None:
    from rich.table import Table
    table = Table(box=None, pad_edge=False)
    for column in ("id", "run", "op", "round", "cand", "provider", "model", "in", "out", "cost $", "latency s", "cached"):
        table.add_column(column, overflow="fold")
    for c in calls:
        cost = "?" if c["cost_usd"] is None else f"{c['cost_usd']:.4f}"
        table.add_row(str(c["id"]), c["run_id"] or "-", c["op"] or "-", str(c["round"]), str(c["candidate"]),
                      c["provider"], c["model"], str(c["input_tokens"]), str(c["output_tokens"]), cost,
                      f"{c['latency_s']:.2f}", "yes" if c["cached"] else "")
    widen(console)
    console.print(table)
    total = sum(c["cost_usd"] or 0 for c in calls)
    console.print(f"{len(calls)} calls, {sum(bool(c['cached']) for c in calls)} from the cache, "
                  f"${total:.4f} in all", highlight=False)
