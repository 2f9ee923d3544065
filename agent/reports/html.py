"""``bbagent report``: one self-contained HTML page for a batch (or a single run), readable offline.

The page holds the funnel (asked -> correct -> faster than eager -> approved), the speedups
across operators (sorted; a failed operator is drawn as a failure, never as 1.0x), the fast_p
curve (share of the operators asked that are correct and more than p times faster than eager),
per-shape speedup against input size for each operator, cost and rounds per operator, the
slowest and most expensive operators, and links to every kernel and transcript. Charts are
matplotlib SVGs inlined in the page; nothing is fetched when it opens.
"""
from __future__ import annotations

import datetime
import html
import importlib.util
import io
import json
import math
import os
import time
from pathlib import Path

from bbagent.agent.batch.display import duration, gpu_lines
from bbagent.agent.batch.ledger import Ledger
from bbagent.agent.errors import ReportError
from bbagent.agent.families import family_of
from bbagent.agent.money import cost_text
from bbagent.agent.options import GenerateOptions
from bbagent.agent.reports.runs import BATCH_ID, RUN_ID, age_s, run_id_of
from bbagent.agent.review.catalog import flags as review_flags, version_diff, versions_in
from bbagent.agent.review.lifecycle import status_of, version_folders
from bbagent.agent.review.meta import PerformanceRecord, read_meta
from bbagent.agent.review.record import performance_record
from bbagent.agent.run_record import RoundRecord, RunRecord, UnreadableRun, read_run
from bbagent.agent.storage import write_atomic
from bbagent.harness.interface import PROGRAMS_FOLDER, Verdict, short_count

MAX_SHAPE_LINES = 12


def newest(runs: Path) -> str:
    """The id of the batch or run under ``runs`` written last (a batch writes its summary after
    its own runs end, so a batch's runs never hide it)."""
    found = [p for p in runs.glob("*") if p.is_dir() and (
        (BATCH_ID.match(p.name) and (p / "ledger.sqlite").is_file())
        or (RUN_ID.match(p.name) and (p / "run.json").is_file()))]
    if not found:
        raise ReportError(f"no batch or run under {runs}: run `bbagent generate` or `bbagent batch` first "
                          "(or pass --root where they ran)")
    return min(found, key=lambda path: (age_s(path), path.name)).name


def collect(root: Path, ident: str | None) -> dict:
    """The rows of a batch (``batch-...``) or of one run, one per operator, with the metadata and
    files of the batch or run; without ``ident``, the newest batch or run."""
    runs = root / "runs"
    ident = ident or newest(runs)
    where = runs / ident
    if (where / "ledger.sqlite").is_file():
        ledger = Ledger(where / "ledger.sqlite")
        rows = [r for r in ledger.rows() if r["state"] != "skipped"]
        ops = [_op_row(root, r["op"], r["state"], r.get("run_id"), r.get("rounds"), r.get("cost_usd"),
                       (r.get("tokens_input") or 0) + (r.get("tokens_output") or 0), r.get("error_class") or "",
                       r.get("error") or "") for r in rows]
        return {"title": f"batch {ident}", "ident": ident, "path": where, "ops": ops, "levels": _levels(where),
                "meta": batch_metadata(ledger.meta()), "comparison": comparison(root, ident, ops),
                "files": [where / name for name in ("summary.md", "summary.json", "ledger.sqlite", "events.jsonl",
                                                    "dataset.json") if (where / name).exists()]}
    if not (where / "run.json").is_file():
        raise ReportError(f"no batch or run '{ident}' under {runs} (`bbagent runs` lists them)")
    try:
        record = RunRecord.read(where)
    except UnreadableRun as exc:  # there, but not a run record this version reads
        raise ReportError(f"run '{ident}' cannot be reported: {exc}") from None
    op = _op_row(root, record.op, record.status, ident, record.rounds_used, record.cost_usd,
                 record.tokens.input + record.tokens.output, "", record.message)
    return {"title": f"run {ident}", "ident": ident, "path": where, "ops": [op], "meta": run_metadata(record),
            "files": [where / "run.json", where]}


def _levels(batch: Path) -> dict:
    """A ``--kernelbench`` batch's scores per level, as its summary.json keeps them (empty for
    another batch, or one whose summary is not written yet)."""
    try:
        return json.loads((batch / "summary.json").read_text()).get("kernelbench_levels") or {}
    except (OSError, ValueError):
        return {}


def _options_line(options: dict) -> str:
    """The options that differ from generate's defaults."""
    defaults = GenerateOptions(provider="replay").model_dump()
    changed = {k: v for k, v in options.items() if k not in ("provider", "model", "replay") and v != defaults.get(k)}
    return ", ".join(f"{k}={v}" for k, v in changed.items()) or "the defaults"


def _when(moment) -> str:
    if isinstance(moment, (int, float)):
        return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(moment))
    return str(moment or "-")


def _duration(seconds: float | None) -> str:
    return "-" if seconds is None else duration(seconds)


def batch_metadata(meta: dict) -> list[tuple[str, str]]:
    """What a reader of the page asks first: when, how long, where, with what, how it was asked."""
    options, key = meta.get("generate_options") or {}, meta.get("resume_key") or {}
    sessions = meta.get("sessions") or []
    wall = sum(s.get("wall_s") or 0 for s in sessions) if sessions else None
    return [("started", _when(meta.get("created_at"))),
            ("running time", _duration(wall) + (f" over {len(sessions)} sessions ({len(sessions) - 1} resume(s))"
                                                 if len(sessions) > 1 else "")),
            ("sessions", "; ".join(f"{_when(s.get('started_at'))}: {s.get('ended') or 'running'} "
                                   f"(jobs {s.get('jobs')})" for s in sessions) or "-"),
            ("evaluated on", {"cpu": "cpu (Triton interpreter)"}.get(key.get("gpu") or "", key.get("gpu"))
             or options.get("device") or "-"),
            ("torch / triton", f"{key.get('torch', '-')} / {key.get('triton', '-')}"),
            ("provider / model", f"{options.get('provider', '-')} / {options.get('model') or '-'}"
                                 + (f" at {options['base_url']}" if options.get("base_url") else "")),
            ("options", _options_line(options)),
            ("stopped early", meta.get("ended_by") or "no")] + _gpu_rows(sessions)


def _gpu_rows(sessions: list[dict]) -> list[tuple[str, str]]:
    """Per session that ran on GPUs: each GPU's evaluations, waits and own utilization (NVML)."""
    return [(f"GPUs, session {n}" if len(sessions) > 1 else "GPUs", "; ".join(gpu_lines(session["gpus"])))
            for n, session in enumerate(sessions, 1) if session.get("gpus")]


def run_metadata(record: RunRecord) -> list[tuple[str, str]]:
    config = record.config.model_dump() if record.config is not None else {}
    env = record.environment or {}
    took = None
    try:
        if record.finished_at and record.started_at:
            took = (datetime.datetime.fromisoformat(record.finished_at)
                    - datetime.datetime.fromisoformat(record.started_at)).total_seconds()
    except ValueError:
        pass
    device = env.get("gpu") or (f"{env.get('device')} (Triton interpreter)" if env.get("interpreter")
                                else env.get("device"))
    return [("started", _when(record.started_at)), ("running time", _duration(took)),
            ("evaluated on", device or "-"), ("torch / triton", f"{env.get('torch', '-')} / {env.get('triton', '-')}"),
            ("provider / model", f"{config.get('provider', '-')} / {config.get('model') or '-'}"),
            ("options", _options_line(config)), ("outcome", f"{record.status}: {record.message}")]


def _op_row(root: Path, op: str, state: str, run_id: str | None, rounds, cost, tokens: int, error_class: str,
            error: str) -> dict:
    run = read_run(root / "runs" / run_id) if run_id else None
    history = round_history(run.rounds if run is not None else [])
    why = run.why_failed if run is not None and state != "accepted" else None
    shown_round = (why.best_round if why is not None else run.best_round) if run is not None else None
    row = {"op": op, "state": state, "run_id": run_id, "rounds": rounds, "cost_usd": cost or 0.0, "tokens": tokens,
           "cost_known": run is None or run.cost_complete, "error_class": error_class,
           "error": why.text() if why is not None and why.best_round is not None else error,  # of the round shown
           "speedup": None, "untimed": None, "shapes": [], "review": None, "kernel": None, "flags": [],
           "source": None, "diff": None,
           "transcript": str(root / "runs" / run_id) if run_id else None, "history": history,
           "paid_by": [str(root / "runs" / paid) for paid in (run.answers_paid_by if run is not None else [])],
           "tests": _tests_of(history, shown_round), "family": _family(op)}
    if state != "accepted":
        return row
    folder = _kernel_folder(root, op, run_id)
    if folder is not None:
        meta = read_meta(folder)
        row.update(review=status_of(meta), kernel=str(folder / "kernel.py"), flags=review_flags(meta),
                   source=_read_text(folder / "kernel.py"), diff=_diff_to_approved(root / "generated_kernels" / op,
                                                                                    folder))
        performance = meta.performance
    else:  # the kernel folder moved on: the run's own verdicts still hold the numbers
        performance = _best_performance(root / "runs" / str(run_id))
    if performance.measured:
        row["speedup"] = performance.geomean_speedup
        row["shapes"] = [{"bytes": s.bytes, "speedup": s.speedup, "input": s.input}
                         for s in performance.shapes if s.speedup]
    else:
        row["untimed"] = performance.reason or "not timed"
    return row


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _diff_to_approved(base: Path, folder: Path) -> dict | None:
    """The kernel in ``folder`` against the newest other approved version kept in ``base``, its
    operator's folder (``review diff``'s format), or None where no other version is approved or a
    file cannot be read."""
    try:
        versions = versions_in(base)
        shown = next(v for v in versions if v.folder == folder)
        other = next((v for v in versions if v is not shown and v.meta.review.status == "approved"), None)
        if other is None:
            return None
        return {"against": str(other.number), "text": version_diff(shown.meta.op, other, shown) or "(the same file)"}
    except (OSError, ValueError, StopIteration):  # a version that cannot be read is no baseline
        return None


def round_history(rounds: list[RoundRecord]) -> list[dict]:
    """Each round of a run as the report lists it: its outcome, tests passed of total, speedup, and
    what failed (from run.json's round records)."""
    history = []
    for record in rounds:
        counts = record.counts or record.summary
        history.append({"round": record.round, "outcome": record.outcome or "-",
                        "tests": short_count(counts.model_dump()) if counts else "-",
                        "passed": counts and counts.passed, "total": counts and counts.total,
                        "speedup": record.speedup, "message": " ".join((record.message or "").split())[:300],
                        "failures": [f"{f.error_kind} x{f.count}" + (f", first {f.first_test}" if f.first_test else "")
                                     for f in record.failures]})
    return history


def _tests_of(history: list[dict], best_round: int | None) -> dict:
    """The tests of the operator's best round (else its last): passed, total, and as text."""
    chosen = next((h for h in history if h["round"] == best_round), history[-1] if history else None)
    if chosen is None or chosen["total"] is None:
        return {"text": "-", "passed": None, "total": None}
    return {"text": chosen["tests"], "passed": chosen["passed"], "total": chosen["total"]}


def _family(op: str) -> str:
    """An operator's prompt family; a KernelBench problem's level (``KernelBench level1``)."""
    parts = op.split("/")
    if len(parts) == 3 and parts[0] == PROGRAMS_FOLDER:
        return f"KernelBench {parts[1]}"
    try:
        return family_of(op)
    except Exception:  # noqa: BLE001 - an operator this torch no longer has: still listed
        return "unknown"


def by_family(ops: list[dict]) -> list[dict]:
    """Per prompt family: operators asked, accepted, and the pass rate."""
    families: dict[str, dict] = {}
    for o in ops:
        row = families.setdefault(o["family"], {"family": o["family"], "asked": 0, "accepted": 0})
        row["asked"] += 1
        row["accepted"] += o["state"] == "accepted"
    for row in families.values():
        row["rate"] = row["accepted"] / row["asked"]
    return sorted(families.values(), key=lambda r: (-r["asked"], r["family"]))


def earlier_batches(root: Path, ident: str) -> list[str]:
    """The batches under ``root`` created before ``ident``, oldest first (batch ids start with their time)."""
    return sorted(p.name for p in (root / "runs").glob("batch-*")
                  if BATCH_ID.match(p.name) and p.name < ident and (p / "ledger.sqlite").is_file())


def comparison(root: Path, ident: str, ops: list[dict]) -> dict | None:
    """This batch against the previous one in the same root: per operator in both, the outcome and
    speedup then and now, and its history over every earlier batch that asked it (oldest first,
    as asv shows a benchmark across commits); None where there is no earlier batch."""
    batches = earlier_batches(root, ident)
    if not batches:
        return None
    ledgers = [{r["op"]: r for r in Ledger(root / "runs" / batch / "ledger.sqlite").rows()} for batch in batches]
    before_id, before = batches[-1], ledgers[-1]
    rows = []
    for o in ops:
        then = before.get(o["op"])
        if then is None or then["state"] == "skipped":
            continue
        change = ("newly accepted" if o["state"] == "accepted" and then["state"] != "accepted" else
                  "regressed" if then["state"] == "accepted" and o["state"] != "accepted" else
                  "faster" if o["speedup"] and then["best_speedup"] and o["speedup"] > then["best_speedup"] * 1.05 else
                  "slower" if o["speedup"] and then["best_speedup"] and o["speedup"] < then["best_speedup"] / 1.05 else
                  "same")
        history = [{"batch": batch, "state": ledger[o["op"]]["state"], "speedup": ledger[o["op"]]["best_speedup"]}
                   for batch, ledger in zip(batches, ledgers)
                   if o["op"] in ledger and ledger[o["op"]]["state"] not in ("skipped", "pending")]
        rows.append({"op": o["op"], "before": then["state"], "now": o["state"], "speed_before": then["best_speedup"],
                     "speed_now": o["speedup"], "change": change, "history": history})
    counts = {kind: sum(r["change"] == kind for r in rows)
              for kind in ("newly accepted", "regressed", "faster", "slower", "same")}
    return {"batch": before_id, "rows": rows, "counts": counts}


def _kernel_folder(root: Path, op: str, run_id: str | None) -> Path | None:
    """The version of ``op``'s kernel that ``run_id`` accepted (current or under versions/)."""
    base = root / "generated_kernels" / op
    for folder in [base, *reversed(version_folders(base))]:
        if run_id_of(folder) == run_id:
            return folder
    return None


def _best_performance(run_dir: Path) -> PerformanceRecord:
    best = None
    for path in run_dir.glob("round-*/**/verdict.json"):
        verdict = Verdict.model_validate_json(path.read_text())
        speed = verdict.geomean_speedup() if verdict.passed else None
        if speed is not None and (best is None or speed > best[0]):
            best = (speed, verdict)
    return performance_record(best[1]) if best else PerformanceRecord(reason="no timed round")


def funnel(ops: list[dict]) -> list[tuple[str, int | str]]:
    """Asked, correct, faster than eager ("not timed" where no correct kernel was), approved."""
    correct = [o for o in ops if o["state"] == "accepted"]
    timed = [o for o in correct if o["speedup"] is not None]
    return [("asked", len(ops)), ("correct", len(correct)),
            ("faster than eager", sum(1 for o in timed if o["speedup"] >= 1.0) if timed else "not timed"),
            ("approved", sum(1 for o in correct if o["review"] == "approved"))]


def fast_p_curve(ops: list[dict], points: int = 60) -> tuple[list[float], list[float]]:
    """fast_p over p: the share of operators asked that are correct with a speedup above p."""
    speeds = [o["speedup"] for o in ops if o["state"] == "accepted" and o["speedup"]]
    top = max([2.0, *speeds]) * 1.05
    ps = [top * i / (points - 1) for i in range(points)]
    return ps, [sum(1 for s in speeds if s > p) / max(len(ops), 1) for p in ps]


def _svg(figure) -> str:
    import matplotlib.pyplot as plt
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg"):]


NO_MATPLOTLIB = ("No charts: matplotlib (an optional extra) is not installed; pip install 'bbagent[report]' "
                 "draws them. The tables below are complete.")


def can_draw() -> bool:
    """Whether matplotlib, which draws the charts, can be imported."""
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        return False


def charts(ops: list[dict]) -> dict[str, str]:
    """The page's charts as inline SVG: speedups and fast_p where something was timed, per-shape
    speedups (where shapes were timed), cost (where a price was known) and rounds. None without
    matplotlib (``NO_MATPLOTLIB`` says so on the page)."""
    if not can_draw():
        return {}
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, small
    found: dict[str, str] = {}
    if any(o["speedup"] for o in ops):
        found.update(speedups=_svg(_speedups_chart(plt, ops)), fast_p=_svg(_fast_p_chart(plt, ops)))
    with_shapes = [o for o in ops if o["shapes"]][:MAX_SHAPE_LINES]
    if with_shapes:
        found["shapes"] = _svg(_shapes_chart(plt, with_shapes))
    if ops:
        found["cost_rounds"] = _svg(_cost_chart(plt, ops, with_cost=any(o["cost_usd"] > 0 for o in ops)))
    return found


def untimed_reason(ops: list[dict]) -> str:
    """One line saying why no speed chart is drawn."""
    accepted = [o for o in ops if o["state"] == "accepted"]
    if not accepted:
        return "No speed charts: no operator has a correct kernel, so nothing was timed."
    reasons = sorted({o["untimed"] for o in accepted if o["untimed"]})
    return ("No speed charts: no correct kernel was timed (" + "; ".join(reasons[:3]) + ")." if reasons
            else "No speed charts: no correct kernel was timed.")


def _speedups_chart(plt, ops: list[dict]):
    ordered = sorted(ops, key=lambda o: (o["state"] != "accepted", -(o["speedup"] or 0), o["op"]))
    figure, axis = plt.subplots(figsize=(9, max(2.5, 0.32 * len(ordered) + 1)))
    for i, o in enumerate(ordered):
        if o["state"] != "accepted":
            axis.barh(i, 0, color="none")
            axis.text(0.0, i, f"  FAILED ({o['error_class'] or o['state']})", va="center", color="#b00020",
                      transform=axis.get_yaxis_transform())
        elif o["speedup"] is None:
            axis.text(0.0, i, "  correct, not timed", va="center", color="#555",
                      transform=axis.get_yaxis_transform())
        else:
            axis.barh(i, o["speedup"], color="#2e7d32" if o["speedup"] >= 1 else "#ef6c00")
            axis.text(o["speedup"], i, f" {o['speedup']:.2f}x", va="center", fontsize=8)
    axis.axvline(1.0, color="#333", linewidth=0.8, linestyle="--")
    axis.set_yticks(range(len(ordered)), [o["op"] for o in ordered], fontsize=8)
    axis.invert_yaxis()
    axis.set_xlabel("geomean speedup over eager (dashed: 1.0x)")
    axis.set_title("speedup per operator")
    return figure


def _fast_p_chart(plt, ops: list[dict]):
    ps, shares = fast_p_curve(ops)
    figure, axis = plt.subplots(figsize=(6, 3.2))
    axis.plot(ps, shares, color="#1565c0")
    axis.axvline(1.0, color="#333", linewidth=0.8, linestyle="--")
    axis.set_xlabel("p (speedup threshold)")
    axis.set_ylabel("fast_p: share of operators asked")
    axis.set_ylim(0, 1.02)
    axis.set_title("fast_p: correct and more than p times faster than eager")
    return figure


def _shapes_chart(plt, with_shapes: list[dict]):
    figure, axis = plt.subplots(figsize=(8, 4))
    for o in with_shapes:
        points = sorted((s["bytes"] or 1, s["speedup"]) for s in o["shapes"])
        axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3, linewidth=0.6,
                  alpha=0.8, label=o["op"])
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.axhline(1.0, color="#333", linewidth=0.8, linestyle="--")
    axis.set_xlabel("bytes moved by the shape (log)")
    axis.set_ylabel("speedup over eager (log)")
    axis.set_title("per-shape speedup against input size")
    axis.legend(fontsize=7, loc="best")
    return figure


def _cost_chart(plt, ops: list[dict], with_cost: bool):
    """Rounds per operator, beside its cost where any cost is known (an unknown price is never drawn as $0)."""
    height = max(2.5, 0.3 * len(ops) + 1)
    if with_cost:
        figure, (cost_axis, rounds_axis) = plt.subplots(1, 2, figsize=(10, height), sharey=True)
    else:
        figure, rounds_axis = plt.subplots(figsize=(6, height))
    names = [o["op"] for o in ops]
    if with_cost:
        cost_axis.barh(names, [o["cost_usd"] for o in ops], color="#6a1b9a")
        for i, o in enumerate(ops):
            if not o["cost_known"]:
                cost_axis.text(o["cost_usd"], i, " price unknown", va="center", fontsize=7, color="#555")
        cost_axis.set_xlabel("LLM cost, USD")
        cost_axis.set_xlim(left=0)
    rounds_axis.barh(names, [o["rounds"] or 0 for o in ops], color="#00838f")
    rounds_axis.set_xlabel("rounds")
    rounds_axis.xaxis.get_major_locator().set_params(integer=True)
    rounds_axis.tick_params(axis="y", labelsize=8)
    rounds_axis.invert_yaxis()
    figure.suptitle("cost and rounds per operator" if with_cost else "rounds per operator")
    return figure


def _link(path: str | None, base: Path, text: str) -> str:
    if not path:
        return "-"
    target = os.path.relpath(path, base)
    return f'<a href="{html.escape(target)}">{html.escape(text)}</a>'


def render(data: dict, out: Path) -> str:
    from jinja2 import Environment, PackageLoader, select_autoescape
    ops = data["ops"]
    base = out.parent
    total = sum(o["cost_usd"] for o in ops)
    accepted = [o for o in ops if o["state"] == "accepted"]
    slowest = sorted((o for o in accepted if o["speedup"] is not None), key=lambda o: o["speedup"])[:5]
    timed = [o["speedup"] for o in accepted if o["speedup"]]
    geomean = math.exp(sum(map(math.log, timed)) / len(timed)) if timed else None
    environment = Environment(loader=PackageLoader("bbagent.agent.reports", "templates"), autoescape=select_autoescape())
    template = environment.get_template("report.html.j2")
    rows = [{**o, "kernel_link": _link(o["kernel"], base, "kernel.py"), "cost": cost_text(o["cost_usd"], o["cost_known"]),
             "transcript_link": _link(o["transcript"], base, o["run_id"] or "run"),
             "paid_links": [_link(p, base, Path(p).name) for p in o["paid_by"]]} for o in ops]
    drawn = charts(ops)
    priced = all(o["cost_known"] for o in ops)  # else dollars undercount: rank by the tokens spent
    costliest = sorted(rows, key=lambda o: -(o["cost_usd"] if priced else o["tokens"]))[:5]
    return template.render(title=data["title"], funnel=funnel(ops), charts=drawn, rows=rows,
                           families=by_family(ops), levels=data.get("levels") or {}, compared=data.get("comparison"),
                           is_batch=data["title"].startswith("batch"),
                           slowest=slowest, costliest=costliest, ranked_by="cost" if priced else "tokens",
                           geomean=geomean, meta=data.get("meta") or [],
                           files=[_link(str(f), base, f.name + ("/" if f.is_dir() else "")) for f in data.get("files", [])],
                           untimed=(None if "speedups" in drawn else untimed_reason(ops) if can_draw()
                                    else NO_MATPLOTLIB),
                           total_cost=cost_text(total, all(o["cost_known"] for o in ops)),
                           asked=f"{len(ops)} operator{'s' * (len(ops) != 1)} asked")


def write_report(root: Path, ident: str | None, out: Path | None = None) -> Path:
    data = collect(root, ident)
    target = out or data["path"] / "report.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, render(data, target.resolve()))
    return target
