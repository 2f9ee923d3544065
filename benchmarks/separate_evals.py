"""Separate ``bbagent eval --problem`` processes on one GPU, as a KernelBench user judges answers from a
script: every answer of ``benchmarks/kernelbench_answers/level<N>/`` judged alone, one process at a
time, then all of them again with ``--jobs`` processes at once; each verdict (and each draw's error
kind) must be the same both ways (issue 75, 4: eight at once failed a correct level-2 GEMM answer that
passed alone). The processes share the GPU through ``harness.sandbox.parent.machine_gpu``: admitted by
device memory, timing alone, and a failure under contention run again alone.

    python benchmarks/separate_evals.py --kernelbench .kernelbench --levels 1,2 --alone-levels 2 --jobs 8 --out $OUT

``--kernelbench`` holds KernelBench's ``level<N>/`` problem files (a snapshot, never committed). Only
the answers of ``--alone-levels`` are judged alone first (device time is short); the others' verdict
together is held to what their file name expects (``<problem>--<flaw>.py`` fails, the rest pass). One
JSON line per evaluation goes to ``OUT/separate-evals.jsonl`` as it ends; the comparison to
``OUT/separate-evals.md``. Exit 1 where a verdict differs.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ANSWERS = Path(__file__).parent / "kernelbench_answers"


def answers(kernelbench: Path, levels: list[int]) -> list[tuple[str, Path, Path]]:
    """(name, problem file, answer file) of every answer whose problem is in the snapshot."""
    found = []
    for level in levels:
        for answer in sorted((ANSWERS / f"level{level}").glob("*.py")):
            problem = kernelbench / f"level{level}" / f"{answer.stem.partition('--')[0]}.py"
            if problem.is_file():
                found.append((f"level{level}/{answer.stem}", problem, answer))
    return found


def judged(name: str, problem: Path, answer: Path, root: Path, log) -> dict:
    """One ``bbagent eval --problem`` process: its verdict, each draw's error kind, its wall time."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bbagent", "eval", "--problem", str(problem), "--kernel", str(answer),
                           "--device", "cuda", "--seed", "1", "--json", "--root", str(root)],
                          capture_output=True, text=True, timeout=1800)
    row = {"answer": name, "exit": done.returncode, "wall_s": round(time.perf_counter() - started, 1)}
    try:
        verdict = json.loads(done.stdout)
        timings = verdict.get("timings") or {}
        row.update(verdict=verdict["verdict"], error_kind=verdict.get("error_kind"),
                   draws={t["id"]: t.get("error_kind") for t in verdict.get("tests", [])},
                   rerun_alone=timings.get("rerun_alone"), gpu_wait_s=timings.get("gpu_wait_s"),
                   gpu_shared=timings.get("gpu_shared"), message=(verdict.get("message") or "")[:300])
    except (ValueError, KeyError):
        row.update(verdict="no verdict", stderr=done.stderr[-800:])
    log.write(json.dumps(row) + "\n")
    log.flush()
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernelbench", type=Path, required=True)
    parser.add_argument("--levels", default="1,2")
    parser.add_argument("--alone-levels", default=None, help="levels judged alone first (default: all)")
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = answers(args.kernelbench, [int(n) for n in args.levels.split(",")])
    root = Path(tempfile.mkdtemp(prefix="separate-evals-"))
    rows = {}
    with (args.out / "separate-evals.jsonl").open("w") as log:
        started = time.perf_counter()
        alone_levels = [f"level{n}/" for n in (args.alone_levels or args.levels).split(",")]
        for name, problem, answer in work:
            if name.startswith(tuple(alone_levels)):
                rows[name, "alone"] = judged(name, problem, answer, root, log) | {"how": "alone"}
        alone_s = time.perf_counter() - started
        started = time.perf_counter()
        with ThreadPoolExecutor(args.jobs) as pool:
            together = list(pool.map(lambda w: judged(w[0], w[1], w[2], root, log), work))
        together_s = time.perf_counter() - started
    for row in together:
        rows[row["answer"], "together"] = row | {"how": "together"}
    lines = [f"# {len(work)} answers: alone one at a time ({alone_s:.0f} s), then {args.jobs} separate processes at "
             f"once ({together_s:.0f} s)", "",
             "| answer | alone | together | same | draws together | rerun alone | GPU wait s | wall s alone / together |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    differ = 0
    for name, _, _ in work:
        t = rows[name, "together"]
        expected = {"verdict": "fail" if "--" in name else "pass", "draws": t.get("draws"), "wall_s": "-"}
        a = rows.get((name, "alone"), expected)
        same = (a.get("verdict"), a.get("draws")) == (t.get("verdict"), t.get("draws"))
        differ += not same
        draws = ", ".join(f"{k}:{v or 'ok'}" for k, v in (t.get("draws") or {}).items())
        alone = a.get("verdict") if (name, "alone") in rows else f"(expected {a['verdict']})"
        lines.append(f"| {name} | {alone} | {t.get('verdict')} | {'yes' if same else 'NO'} | {draws} | "
                     f"{t.get('rerun_alone') or ''} | {t.get('gpu_wait_s')} | {a['wall_s']} / {t['wall_s']} |")
    lines.append("")
    lines.append(f"{len(work) - differ} of {len(work)} judged the same alone and {args.jobs} at once")
    (args.out / "separate-evals.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
