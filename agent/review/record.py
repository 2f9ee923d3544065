"""What a run records about the kernel it accepts: meta.json's typed parts (what the Verdict says
of the kernel, who wrote it and at what cost), and the README.md a reviewer reads first
(``agent.review.lifecycle.install`` adds the review lifecycle and writes both)."""
from __future__ import annotations

import datetime as dt

from bbagent.agent.review.meta import (Accepted, Authored, EarlierGuardNote, EditedFrom, Judged, KernelMeta,
                                       PerformanceRecord, ProgramSource, ShapeTiming, Versions)
from bbagent.agent.money import cost_text
from bbagent.agent.run_record import RoundRecord, Tokens
from bbagent.harness.interface import DSLS, Variant, Verdict


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def performance_record(verdict: Verdict) -> PerformanceRecord:
    """The speed part of meta.json: the metrics and every timed shape's numbers."""
    performance = verdict.performance
    if performance is None:
        return PerformanceRecord(reason="timing was not asked for")
    if not performance.measured:
        return PerformanceRecord(reason=performance.reason)
    shapes = [ShapeTiming(input=t.input, mode=t.mode, aten_ms=t.aten.median_ms if t.aten is not None else None,
                          kernel_ms=t.candidate.median_ms if t.candidate is not None else None,
                          speedup=t.speedup, bytes=t.bytes, kernel_gbs=t.candidate_gbs,
                          overhead_dominated=bool(t.overhead_dominated))
              for t in performance.tests]
    return PerformanceRecord(measured=True, gpu=performance.gpu, device=performance.device,
                             summary=performance.summary, shapes=shapes,
                             baselines={name: summary.model_dump() for name, summary in
                                        (performance.baselines or {}).items()})


def served_overloads(verdict: Verdict, op: str) -> list[str]:
    """The overloads a passing kernel serves: those whose own tests ran and all passed (an
    overload of the family without any test of its own is not served)."""
    return [v.op for v in verdict.variants if v.ok] or [op]


def guard_findings(rounds: list[RoundRecord]) -> list[EarlierGuardNote]:
    """Every guard failure of the run's rounds and candidates so far: a reviewer should know that
    the model tried to call aten, patch torch or read the harness before it got this kernel."""
    found = []
    for record in rounds:
        for item in [record, *(record.candidates or [])]:
            if item.error_kind == "guard":
                found.append(EarlierGuardNote(round=record.round, message=(item.message or "")[:300]))
    return found


def judged_part(op: str, verdict: Verdict, program=None) -> Judged:
    """What the Verdict that accepts a kernel for ``op`` says of it: its tests, speed and where they
    ran. ``program``: the ``ProgramProblem`` (or the ``ProgramSource`` recorded of it) an answer to
    a program was accepted for."""
    env = verdict.environment
    source = None if program is None else ProgramSource(path=program.path, name=program.name, level=program.level,
                                                          sha256=program.sha256)
    return Judged(
        problem_kind=verdict.problem_kind, program=source, written_for=op, serves=served_overloads(verdict, op),
        not_served=[v.op for v in verdict.variants if not v.ok], variants=verdict.variants,
        tests=verdict.test_counts(), summary=verdict.summary, kernel_sha256=verdict.kernel.sha256, seed=verdict.seed,
        versions=Versions(torch=env.torch, triton=env.triton, python=env.python, cuda=env.cuda),
        device=env.device, gpu=env.gpu, interpreter=env.interpreter, performance=performance_record(verdict),
        dtypes=sorted({t.dtype for t in verdict.tests if t.passed and t.dtype}),
        tolerance_used_max=max((t.tolerance_used for t in verdict.tests if t.tolerance_used is not None),
                               default=None))


def authored_part(*, provider: str | None, model: str | None, run_id: str | None, accepted_round: int | None,
                  tokens: Tokens,
                  cost_usd: float, cost_complete: bool, answers_paid_by: list[str], rounds: list[RoundRecord],
                  target_speedup: float | None, target_baseline: str | None) -> Authored:
    """Who wrote the kernel a run accepts in round ``accepted_round``, what the run spent so far,
    the target it ran for, and what its ``rounds`` (their records) did before."""
    return Authored(provider=provider, model=model, run_id=run_id, round=accepted_round, rounds_used=accepted_round,
                    tokens=tokens, cost_usd=round(cost_usd, 6), cost_complete=cost_complete,
                    answers_paid_by=answers_paid_by, accepted_at=now(), target_speedup=target_speedup,
                    target_baseline=target_baseline,
                    round_speedups={str(r.round): r.speedup for r in rounds if r.outcome == "pass"},
                    earlier_guard_findings=guard_findings(rounds))


def edit_part(meta: KernelMeta, verdict: Verdict, edited_from: EditedFrom) -> Accepted:
    """The acceptance of ``meta``'s kernel.py edited by hand and judged by ``verdict``: the
    Verdict's tests, speed and environment; who wrote the kernel it was edited from, in which run,
    and what that cost (not what that run's earlier rounds did: they wrote another kernel)."""
    authored = authored_part(provider=meta.provider, model=meta.model, run_id=meta.run_id,
                             accepted_round=meta.round, tokens=meta.tokens, cost_usd=meta.cost_usd or 0.0,
                             cost_complete=meta.cost_complete, answers_paid_by=meta.answers_paid_by, rounds=[],
                             target_speedup=meta.target_speedup, target_baseline=meta.target_baseline)
    return Accepted.of(meta.op, judged_part(meta.op, verdict, meta.program), authored, edited_from=edited_from,
                       allow_library=meta.allow_library, dsl=meta.dsl)


def kernel_readme(meta: KernelMeta) -> str:
    where = meta.gpu or ("CPU, Triton interpreter" if meta.interpreter else meta.device)
    tests = meta.tests.text() if meta.tests is not None else "not recorded"
    skipped = " (see the run's verdict.json for the tests not run and why)" if meta.tests and meta.tests.not_run_here \
        else ""
    if meta.composed_of:
        parts = " and ".join(f"round {p.round} (`{p.file}`)" for p in meta.composed_of)
        author = (f"Per-shape dispatcher composed by bbagent in run `{meta.run_id}` from the kernels `{meta.provider}` / "
                  f"`{meta.model}` wrote in {parts}; rules: {'; '.join(meta.dispatch_rules)}. Accepted")
    elif meta.edited_from is not None:
        edit = meta.edited_from
        author = (f"Version {edit.version}'s kernel (written by `{meta.provider}` / `{meta.model}` in run "
                  f"`{meta.run_id}`) edited by hand; judged by {edit.by} at {edit.at}, its tests passed, recorded")
    else:
        author = (f"{DSLS[meta.dsl].title} kernel written by `{meta.provider}` / `{meta.model}` in run `{meta.run_id}` "
                  f"(round {meta.round}), accepted")
    return (f"# {meta.op}\n\n"
            f"{author} {meta.accepted_at}: version {meta.version}, "
            f"review status `{meta.review.status}` (`bbagent review show {meta.op}`).\n"
            f"{_replaced_line(meta)}\n"
            f"- tests: {tests} on {where}{skipped}\n"
            f"{_serves_line(meta)}"
            f"- versions: torch {meta.versions.torch}, triton {meta.versions.triton}\n"
            f"- speed: {speed_line(meta.performance)}\n"
            f"- tokens: {meta.tokens.input} in, {meta.tokens.output} out, "
            f"cost {cost_text(meta.cost_usd or 0.0, meta.cost_complete)}\n\n"
            f"The full transcript (prompts, answers, verdicts) is in `runs/{meta.run_id}/`.\n")


def _replaced_line(meta: KernelMeta) -> str:
    replaced = meta.replaced
    if not replaced:
        return ""
    return (f"It replaces version {replaced.version} ({replaced.status}, run `{replaced.run_id}`), "
            f"kept in `{replaced.where}/`.\n")


def _serves_line(meta: KernelMeta) -> str:
    """The overloads served, with each one's tests; empty for a kernel serving its own overload only."""
    if len(meta.variants) < 2:
        return ""
    line = "- serves: " + "; ".join(f"`{v.op}` ({served_how(v)}, {v.passed} tests passed)"
                                    for v in meta.variants if v.ok) + "\n"
    if meta.not_served:
        line += f"- not served (no test of their own ran): {', '.join(meta.not_served)}\n"
    return line


def served_how(variant: Variant) -> str:
    """How one overload is served, in words."""
    if variant.served_by == "kernel":
        return "the kernel itself"
    written = "self" if variant.convention == "inplace" else "out"
    return f"bbagent's adapter copies the functional result into {written}"


def speed_line(performance: PerformanceRecord, short: bool = False) -> str:
    """The kernel's speed in one line; ``short``: its first clause alone (the ``kernels`` listing),
    whole, whatever the reason it quotes holds."""
    if not performance.measured:
        return f"not measured ({performance.reason})"
    summary = performance.summary
    if summary is None or summary.geomean_speedup is None:
        clauses = [f"no shape above launch overhead on {performance.gpu}"]
    else:
        quantiles = [f"p{p} {speedup:.3g}x" for p, speedup in
                     ((20, summary.speedup_p20), (50, summary.speedup_p50), (80, summary.speedup_p80))
                     if speedup is not None]
        clauses = [f"geomean {summary.geomean_speedup:.3g}x eager over {summary.counted} shapes"
                   + (f" ({', '.join(quantiles)})" if quantiles else "") + f" on {performance.gpu}"]
        if summary.overhead_dominated.count:
            clauses.append(f"{summary.overhead_dominated.count} overhead-dominated shapes reported apart")
    return clauses[0] if short else "; ".join([*clauses, "per-shape numbers in meta.json"])
