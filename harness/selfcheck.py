"""Check the verdict itself against a corpus of known kernels (``tests/kernels/corpus.json``).

Each entry names a kernel file, an operator and what the verdict must say: ``"pass"``, or
the failure kinds allowed (at least one must be seen, and no other), and optionally text
the verdict must contain. ``"timed": true`` asks for the timing phase (on a GPU), and
``"performance": {"geomean_speedup_below": x}`` what its counted speedup must stay under. The sandbox's fault corpus (``tests/faults/faults.json``) uses the
same format, with the static check off and a correct kernel evaluated after each fault.
The worked examples of the prompt families (``tests/kernels/examples.json``) are checked with the
corpus by default: each must pass. Used by the tests and, on a GPU machine, as a report:

    python -m harness.selfcheck [--corpus FILE ...] [--only NAME ...] [--jobs N] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from bbagent.harness.evaluate import PROJECT_ROOT, EvaluationRequest, default_device, evaluate_kernel
from bbagent.harness.verdict import Verdict
from bbagent.harness.sandbox.parent.watch import Limits
from bbagent.harness.timing.options import TimingOptions

CORPUS = PROJECT_ROOT / "tests" / "kernels" / "corpus.json"  # in a checkout; an installed wheel has no tests/
EXAMPLES = CORPUS.with_name("examples.json")  # the prompts' worked examples, each expected to pass


CORPUS_DEFAULTS = ("static_check", "after_each")
TIMED_TARGET_MS, TIMED_CASES = 5.0, 12  # an entry's timing phase: enough to see a cheat, kept short


def load_corpus(path: Path = CORPUS) -> list[dict]:
    """The entries, each with the corpus-wide settings (``static_check``, ``after_each``) it
    does not set itself."""
    corpus = json.loads(path.read_text())
    defaults = {k: corpus[k] for k in CORPUS_DEFAULTS if k in corpus}
    return [{**defaults, **entry} for entry in corpus["entries"]]


def expected_kinds(entry: dict, device: str):
    """``"pass"`` or the allowed kinds on ``device`` (``expect`` may map devices, or "any", to kinds)."""
    expect = entry["expect"]
    if isinstance(expect, dict):
        return expect.get(device, expect.get("any"))
    return expect


def entry_id(entry: dict) -> str:
    hook_only = "" if entry.get("namespaces", True) else "+audit_hook"
    family = "+family" if entry.get("family") else ""
    return f"{Path(entry['kernel']).stem}@{entry['op']}{family}{hook_only}"


def observed_kinds(verdict: Verdict) -> set[str]:
    kinds = {g.error_kind for g in verdict.failure_groups}
    if verdict.error_kind:
        kinds.add(verdict.error_kind)
    return kinds


def messages(verdict: Verdict) -> str:
    """Everything the verdict says in words: its message, each failure's, each guard finding's."""
    parts = [verdict.message] + [g.example.message for g in verdict.failure_groups]
    return "\n".join(parts + [f.message for f in verdict.guard_findings])


def judge(entry: dict, verdict: Verdict, device: str) -> tuple[bool, str]:
    """(as expected?, what was seen) for one corpus entry."""
    kinds = observed_kinds(verdict)
    seen = "pass" if verdict.passed else ",".join(sorted(kinds)) or "fail"
    expect = expected_kinds(entry, device)
    if expect == "pass":
        return verdict.passed, seen
    for says in (entry.get("says"), entry.get("says_on", {}).get(device)):
        if says and says not in messages(verdict):
            return False, f"{seen} (without {says!r})"
    if entry.get("stderr_says") and entry["stderr_says"] not in verdict.stderr_tail:
        return False, f"{seen} (stderr without {entry['stderr_says']!r})"
    leaked = [text for text in entry.get("absent", []) if text in verdict.model_dump_json()]
    if leaked:
        return False, f"{seen} (the verdict holds {leaked[0]!r})"
    return not verdict.passed and bool(kinds) and kinds <= set(expect), seen


def judge_performance(entry: dict, verdict: Verdict, device: str) -> tuple[bool, str]:
    """(as expected?, what was seen) of an entry's ``performance`` expectation, on a GPU (the CPU
    times nothing)."""
    below = (entry.get("performance") or {}).get("geomean_speedup_below")
    if below is None or device != "cuda":
        return True, ""
    summary = verdict.performance.summary if verdict.performance is not None else None
    if summary is None:
        return False, f"not timed ({verdict.performance.reason if verdict.performance else 'no timing phase'})"
    counted, apart = summary.geomean_speedup, summary.overhead_dominated
    seen = (f"counted geomean {counted if counted is None else round(counted, 3)} over {summary.counted} shapes, "
            f"{apart.geomean_speedup if apart.geomean_speedup is None else round(apart.geomean_speedup, 3)} over "
            f"{apart.count} overhead-dominated ones apart")
    return counted is not None and counted < below, seen


@contextmanager
def planted(files: dict[str, str]):
    """Files an entry's kernel goes looking for (``{project}`` is the checkout holding bbagent),
    written for the evaluation and removed after it. A file that exists already is left alone."""
    written = []
    try:
        for name, text in files.items():
            path = Path(name.replace("{project}", str(PROJECT_ROOT)))
            if not path.exists():
                path.write_text(text)
                written.append(path)
        yield
    finally:
        for path in written:
            path.unlink(missing_ok=True)


def run_entry(entry: dict, corpus_dir: Path, seed: int, device: str | None = None) -> dict:
    """Evaluate one entry (and, for a fault corpus, the correct kernel right after it)."""
    device = device or default_device()
    started = time.perf_counter()
    limits = Limits()
    if "memory_limit_mib" in entry:
        limits.memory_bytes = entry["memory_limit_mib"] << 20
    if "test_timeout_s" in entry:
        limits.test_seconds = entry["test_timeout_s"]
    timing = TimingOptions(target_ms=TIMED_TARGET_MS, max_cases=TIMED_CASES) if entry.get("timed") else None
    with planted(entry.get("plant", {})):
        request = EvaluationRequest.of(entry["op"], family=bool(entry.get("family")), device=device, seed=seed,
                                       timeout_s=entry.get("timeout_s", 300),
                                       static_check=entry.get("static_check", True), limits=limits,
                                       namespaces=entry.get("namespaces", True),
                                       secrets=tuple(entry.get("secrets") or ()), timing=timing)
        verdict = evaluate_kernel(request, corpus_dir / entry["kernel"])
    ok, seen = judge(entry, verdict, device)
    fast_enough, measured = judge_performance(entry, verdict, device)
    ok, seen = ok and fast_enough, seen + (f" ({measured})" if measured else "")
    wall = round(time.perf_counter() - started, 1)
    after = entry.get("after_each")
    if after:
        follow = evaluate_kernel(EvaluationRequest.of(after["op"], device=device, seed=seed), corpus_dir / after["kernel"])
        after_ok = follow.passed
        ok = ok and after_ok
        seen += f"; then {Path(after['kernel']).stem}: {follow.verdict}" + (
            "" if after_ok else f" ({follow.error_kind}: {follow.message[:200]})")
    return {"id": entry_id(entry), "kernel": entry["kernel"], "op": entry["op"],
            "expect": expected_kinds(entry, device), "seen": seen, "ok": ok, "pitfall": entry.get("pitfall", ""),
            "tests": verdict.summary.total, "passed": verdict.summary.passed,
            "wall_s": wall, "message": verdict.message[:300], "exit": verdict.exit,
            "stderr_tail": "" if ok else verdict.stderr_tail[-1500:], "ready_s": verdict.timings.child_ready_s,
            "files": verdict.environment.containment.files if verdict.environment.containment else None,
            "in_use": [{"check": c.check, "passed": c.passed, "seconds": c.seconds, "calls": c.calls, "note": c.note}
                       for c in verdict.in_use],
            "failures": [{"kind": g.error_kind, "count": g.count, "input": g.example.input,
                          "message": g.example.message[:400]} for g in verdict.failure_groups[:4]]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, nargs="+", default=[CORPUS, EXAMPLES],
                        help="corpus files (default: the verdict's corpus and the worked examples)")
    parser.add_argument("--only", nargs="*", help="entry ids or kernel file stems")
    parser.add_argument("--jobs", type=int, default=1, help="evaluations run at once")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    missing = [str(path) for path in args.corpus if not path.is_file()]
    if missing:
        print(f"selfcheck: no corpus at {', '.join(missing)}: run it in a checkout of bbagent (tests/kernels/) "
              "or give --corpus FILE", file=sys.stderr)
        return 2
    entries = [{**entry, "corpus_dir": path.parent} for path in args.corpus for entry in load_corpus(path)]
    if args.only:
        entries = [e for e in entries if entry_id(e) in args.only or Path(e["kernel"]).stem in args.only]
    device = default_device()
    elsewhere = [e for e in entries if expected_kinds(e, device) is None]
    entries = [e for e in entries if expected_kinds(e, device) is not None]
    print(f"device: {device}; {len(entries)} entries ({len(elsewhere)} others have no expectation on {device}); "
          f"seed {args.seed}", flush=True)
    rows = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_entry, e, e["corpus_dir"], args.seed, device) for e in entries]
        for future in as_completed(futures):
            row = future.result()
            rows.append(row)
            expect = row["expect"] if row["expect"] == "pass" else "/".join(row["expect"])
            print(f"{'ok ' if row['ok'] else 'BAD'} | {row['id']:<48} | expect {expect:<32} | seen {row['seen']:<28} "
                  f"| {row['passed']}/{row['tests']} tests | {row['wall_s']} s", flush=True)
            if args.json:  # rewritten after every entry, so a cut-short run keeps what it did
                args.json.write_text(json.dumps({"device": device, "seed": args.seed, "rows": rows}, indent=1))
    bad = [r for r in rows if not r["ok"]]
    views = sum(1 for r in rows if r["files"] == "mount_namespace")
    print(f"{len(rows) - len(bad)} of {len(rows)} as expected; the file view (mount namespace) in force in "
          f"{views} of {len(rows)} evaluations, the audit hook alone in {sum(1 for r in rows if r['files'] == 'audit_hook')}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
