"""Real KernelBench problems judged and timed on the GPU, with hand-written answers (right and wrong)
as a model would give them: every verdict against its expectation, program evaluations per hour,
and fast_p per level over eager and over torch.compile, with KernelBench's published H100 baseline
times beside ours.

    python benchmarks/kernelbench_table.py --kernelbench .kernelbench --out $OUT [--level 1] \
        [--inductor-mode default|max-autotune] [--published .kernelbench/timing]

``--kernelbench`` holds KernelBench's ``level<N>/`` problem files (a snapshot of
ScalingIntelligence/KernelBench, never committed); the answers are ``benchmarks/kernelbench_answers/
level<N>/<problem>.py`` (right) and ``<problem>--<flaw>.py`` (wrong: expected to fail). Each answer
goes through ``bbagent.bench(problem=...)``: the program verdict (four draws), then, for a passing
answer, the answer and eager interleaved on the problem's inputs (L2 flushed, CUDA graphs where both
can be captured) and torch.compile in a child of its own. One JSON line per answer goes to
``OUT/kernelbench-<mode>.jsonl`` as it finishes (a run cut short keeps what it measured); the table
goes to ``OUT/kernelbench-<mode>.md``.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from bbagent.agent.batch.runner import KERNELBENCH_FAST_P as FAST_P  # the p a batch's summary scores too

ANSWERS = Path(__file__).parent / "kernelbench_answers"


def answers(levels: list[int]) -> list[tuple[int, str, Path, bool]]:
    """(level, problem, answer file, expected to pass) for every answer of these levels."""
    found = []
    for level in levels:
        for path in sorted((ANSWERS / f"level{level}").glob("*.py"), key=lambda p: (int(p.stem.split("_")[0]), p.stem)):
            problem, _, flaw = path.stem.partition("--")
            found.append((level, problem, path, not flaw))
    return found


def judged(level: int, problem: str, answer: Path, expected: bool, kernelbench: Path, mode: str, root: Path) -> dict:
    import bbagent
    started = time.perf_counter()
    result = bbagent.bench(problem=kernelbench / f"level{level}" / f"{problem}.py", kernel=answer, root=root,
                           device="cuda", seed=1, baseline="eager,inductor", inductor_mode=mode, target_ms=10.0,
                           timeout_s=900)
    verdict, row = result.verdict, {"level": level, "problem": problem, "answer": answer.name, "expected_pass": expected}
    row.update(verdict=verdict.verdict, error_kind=verdict.error_kind, gpu=verdict.environment.gpu,
               failing=[[t.id, t.error_kind] for t in verdict.tests if not t.passed],
               wall_s=round(time.perf_counter() - started, 1), as_expected=verdict.passed == expected,
               memory_peak_gib=verdict.timings.device_memory_peak_gib if verdict.timings else None)
    performance = verdict.performance
    if performance is not None and performance.measured and performance.tests and not performance.tests[0].error_kind:
        timed = performance.tests[0]
        inductor = (timed.baselines or {}).get("inductor")
        row.update(mode=timed.mode, eager_ms=timed.aten.median_ms, answer_ms=timed.candidate.median_ms,
                   speedup_eager=timed.speedup, overhead_dominated=timed.overhead_dominated)
        if inductor is not None and inductor.error is None:
            row.update(compile_ms=inductor.timing.median_ms, speedup_compile=inductor.speedup,
                       compile_s=inductor.compile_s)
        elif inductor is not None:
            row["compile_error"] = inductor.error
    elif performance is not None and performance.tests:
        row["timing_error"] = performance.tests[0].error_kind
    return row


def fast_p(rows: list[dict], over: str) -> dict[str, float]:
    """Share of the problems answered (right answers only) correct and faster than p x the baseline."""
    right = [r for r in rows if r["expected_pass"]]
    return {f"{p:g}": sum(1 for r in right if r["verdict"] == "pass" and (r.get(over) or 0) > p) / len(right)
            for p in FAST_P} if right else {}


def published(folder: Path | None) -> dict:
    if folder is None:
        return {}
    tables = {}
    for name, file in (("eager", "H100_Modal_eager.json"), ("compile", "H100_Modal_compile_default.json")):
        path = folder / file
        if path.is_file():
            tables[name] = json.loads(path.read_text())
    return tables


def table(rows: list[dict], mode: str, kb: dict) -> str:
    lines = [f"# KernelBench problems on {rows[0]['gpu'] if rows else '?'} (torch.compile mode {mode})", "",
             "| level | problem | answer | expected | verdict | failing draws | eager ms | answer ms | x eager | "
             "compile ms | x compile | KB H100 eager ms | KB H100 compile ms | wall s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        def ms(key):
            return f"{r[key]:.3f}" if r.get(key) is not None else "-"

        def published_ms(kind):
            entry = kb.get(kind, {}).get(f"level{r['level']}", {}).get(f"{r['problem']}.py")
            return f"{entry['mean']:.3f}" if entry else "-"
        lines.append(f"| {r['level']} | {r['problem']} | {r['answer']} | {'pass' if r['expected_pass'] else 'fail'} | "
                     f"{r['verdict']}{'' if r['as_expected'] else ' (UNEXPECTED)'} | "
                     f"{', '.join(f'{d}:{k}' for d, k in r['failing']) or '-'} | {ms('eager_ms')} | {ms('answer_ms')} | "
                     f"{ms('speedup_eager')} | {ms('compile_ms')} | {ms('speedup_compile')} | {published_ms('eager')} | "
                     f"{published_ms('compile')} | {r['wall_s']} |")
    lines += ["", "| level | problems | fast_0 | fast_1 eager | fast_1.5 eager | fast_2 eager | fast_1 compile | "
                  "fast_1.5 compile | fast_2 compile | geomean x eager | geomean x compile |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for level in sorted({r["level"] for r in rows}):
        mine = [r for r in rows if r["level"] == level]
        eager, compiled = fast_p(mine, "speedup_eager"), fast_p(mine, "speedup_compile")
        lines.append(f"| {level} | {sum(r['expected_pass'] for r in mine)} | {eager.get('0', 0):.2f} | "
                     f"{eager.get('1', 0):.2f} | {eager.get('1.5', 0):.2f} | {eager.get('2', 0):.2f} | "
                     f"{compiled.get('1', 0):.2f} | {compiled.get('1.5', 0):.2f} | {compiled.get('2', 0):.2f} | "
                     f"{_geomean(mine, 'speedup_eager')} | {_geomean(mine, 'speedup_compile')} |")
    total_s = sum(r["wall_s"] for r in rows)
    lines += ["", f"{len(rows)} evaluations in {total_s:.0f} s: {3600 * len(rows) / total_s:.0f} program evaluations "
                  "per hour (each: four draws, then for a passing answer the timing and the torch.compile child), "
                  f"{sum(r['as_expected'] for r in rows)} of {len(rows)} verdicts as expected." if rows else ""]
    return "\n".join(lines) + "\n"


def _geomean(rows: list[dict], key: str) -> str:
    values = [r[key] for r in rows if r["expected_pass"] and r.get(key)]
    return f"{math.exp(sum(map(math.log, values)) / len(values)):.3g}" if values else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernelbench", type=Path, required=True, help="folder holding level<N>/ problem files")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--level", default="1,2")
    parser.add_argument("--only", default="", help="comma-separated problem names (default: every answer)")
    parser.add_argument("--inductor-mode", default="default", choices=("default", "max-autotune"))
    parser.add_argument("--root", type=Path, default=Path("/tmp/bbagent-kernelbench-root"),
                        help="bbagent's root for the bench runs (default /tmp/bbagent-kernelbench-root)")
    parser.add_argument("--published", type=Path, help="KernelBench's results/timing/H100_Modal JSONs, renamed")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / f"kernelbench-{args.inductor_mode}.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    done = {(r["level"], r["answer"]) for r in rows}
    only = {name for name in args.only.split(",") if name}
    for level, problem, answer, expected in answers([int(x) for x in args.level.split(",")]):
        if (level, answer.name) in done or (only and problem not in only):
            continue
        row = judged(level, problem, answer, expected, args.kernelbench, args.inductor_mode, args.root)
        rows.append(row)
        with log.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
    (args.out / f"kernelbench-{args.inductor_mode}.md").write_text(table(rows, args.inductor_mode,
                                                                        published(args.published)))


if __name__ == "__main__":
    main()
