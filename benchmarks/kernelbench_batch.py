"""Real KernelBench problems through the whole loop: `bbagent batch --kernelbench` against a fake
OpenAI-compatible server on 127.0.0.1 that answers each problem's prompt with a hand-written answer
(``benchmarks/kernelbench_answers/``), one round each, the evaluations sharing the GPU as a night's
batch does. Two batches: every problem answered right, then the problems that have a wrong answer
answered wrong. Reports each problem's outcome against its expectation, program evaluations per
hour (wall clock of the batch) and the accepted answers' speedups over eager and torch.compile.

    python3 benchmarks/kernelbench_batch.py --kernelbench .kernelbench --out OUT [--latency 0]

``--kernelbench`` holds KernelBench's ``level<N>/`` folders (a snapshot, never committed); only the
problems with an answer are copied into the batch's own KernelBench layout.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANSWERS = Path(__file__).parent / "kernelbench_answers"
sys.path.insert(0, str(ROOT / "tests"))
from fake_llm import FakeLLMServer  # noqa: E402 - the tests' fake server, speaking the OpenAI wire format


def layout(kernelbench: Path, where: Path, wrong: bool) -> dict[str, str]:
    """A KernelBench layout at ``where`` holding the problems answered (``wrong``: those with a wrong
    answer), and each problem's answer text by the name its prompt shows (`19_ReLU`)."""
    answers = {}
    for path in sorted(ANSWERS.glob("level*/*.py")):
        problem, _, flaw = path.stem.partition("--")
        if bool(flaw) != wrong:
            continue
        target = where / "KernelBench" / path.parent.name / f"{problem}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(kernelbench / path.parent.name / f"{problem}.py", target)
        answers[f"`{problem}`"] = f"Here is ModelNew.\n\n```python\n{path.read_text()}```\n"
    return answers


def run_batch(kernelbench: Path, out: Path, work: Path, wrong: bool, latency: float, device: str) -> dict:
    name = "wrong" if wrong else "right"
    work = work / f"batch-{name}"
    shutil.rmtree(work, ignore_errors=True)
    answers = layout(kernelbench, work / "checkout", wrong)
    env = {**os.environ, "OPENAI_API_KEY": "sk-fake"}
    with FakeLLMServer().answer_by_op(answers).latency(latency) as server:
        started = time.time()
        done = subprocess.run([sys.executable, "-m", "bbagent", "batch", "--kernelbench", str(work / "checkout"),
                               "--provider", "openai", "--model", "fake-kernelbench", "--base-url", server.url + "/v1",
                               "--rounds", "1", "--device", device, "--seed", "1", "--root", str(work / "root"),
                               "--json"], capture_output=True, text=True, env=env, timeout=3000)
        wall = time.time() - started
    (out / f"batch-{name}.stderr").write_text(done.stderr)
    batch = next((work / "root" / "runs").glob("batch-*"))
    summary = json.loads((batch / "summary.json").read_text())
    rows = []
    for run in sorted((work / "root" / "runs").glob("*kernelbench-level*")):
        record = json.loads((run / "run.json").read_text())
        verdict_file = run / "round-1" / "verdict.json"
        verdict = json.loads(verdict_file.read_text()) if verdict_file.exists() else {}
        performance = verdict.get("performance") or {}
        timed = (performance.get("tests") or [{}])[0]
        inductor = (timed.get("baselines") or {}).get("inductor") or {}
        rows.append({"problem": record["op"], "status": record["status"], "expected": "failed" if wrong else "accepted",
                     "failing": [[t["id"], t["error_kind"]] for t in verdict.get("tests", []) if not t.get("passed")],
                     "speedup_eager": timed.get("speedup"), "speedup_compile": inductor.get("speedup"),
                     "compile_error": inductor.get("error"), "compile_source": inductor.get("source"),
                     "ahead": (record.get("suite_ahead") or {}).get("outcome"),
                     "ahead_s": (record.get("suite_ahead") or {}).get("seconds"),
                     "run_s": _seconds(record.get("started_at"), record.get("finished_at"))})
    return {"batch": name, "exit": done.returncode, "wall_s": round(wall, 1), "requests": len(server.requests),
            "counts": summary.get("counts"), "evaluations_per_hour": round(3600 * len(rows) / wall, 1),
            "as_expected": sum(r["status"] == r["expected"] for r in rows), "problems": len(rows), "rows": rows}


def _seconds(started: str | None, finished: str | None) -> float | None:
    """Seconds between two of run.json's UTC times (``2026-11-28T00:10:02+00:00``)."""
    from datetime import datetime
    if not started or not finished:
        return None
    return (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernelbench", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bbagent-kernelbench-batch"),
                        help="where the batches' checkout layout and root go (default /tmp/bbagent-kernelbench-batch)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each fake answer takes")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                        help="cpu: a smoke run under the interpreter (on problems scaled down by hand)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for wrong in (False, True):
        result = run_batch(args.kernelbench, args.out, args.work, wrong, args.latency, args.device)
        (args.out / f"batch-{result['batch']}.json").write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps({k: v for k, v in result.items() if k != "rows"}), flush=True)
        for row in result["rows"]:
            print(f"  {row['problem']:55s} {row['status']:9s} (expected {row['expected']}) "
                  f"{row['failing'] or ''} x eager {row['speedup_eager']} x compile {row['speedup_compile']}", flush=True)


if __name__ == "__main__":
    main()
