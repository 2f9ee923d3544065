"""Issue 34 on a GPU: a ``bbagent generate`` of aten._softmax.default with a replayed sequence of
two correct kernels written for the purpose, one fast on small tensors and one on large ones,
ends with bbagent's per-shape dispatcher; the table of per-shape times and speedups of both parts
and the dispatcher, and the feedback prompt (with the profiles' figures and diagnosis), are
written to ``--out``.

Both kernels are tests/kernels/softmax.py (stable, any dim, half_to_float) with other launch
settings: "rows" gives each program one row on 4 warps, so that a small tensor's few rows still
spread over the multiprocessors; "blocks" gives each program 16384 elements of whole rows on 8
warps, fewer and fuller programs for the millions of short rows of a large attention tensor,
which leaves most multiprocessors idle on a small one.

    python benchmarks/dispatch_demo.py --out benchmarks/results/issue34-h200
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OP = "aten._softmax.default"
# (rows a program, as Python source over the row's padded length ``block``; warps)
SETTINGS = {"rows": ("1", 4), "blocks": ("max(1, 16384 // block)", 8)}


def variant(per_program: str, warps: int) -> str:
    source = (ROOT / "tests" / "kernels" / "softmax.py").read_text()
    rows, launch = "per_program = max(1, 4096 // block)", "ROWS=per_program, BLOCK=block)"
    assert rows in source and launch in source
    source = source.replace(rows, f"per_program = {per_program}")
    return source.replace(launch, f"ROWS=per_program, BLOCK=block, num_warps={warps})")


def answer(name: str) -> str:
    per_program, warps = SETTINGS[name]
    return (f"A row-block softmax, {per_program} row(s) a program on {warps} warps:\n\n```python\n"
            f"{variant(per_program, warps)}```\n")


def times(verdict: dict) -> dict[str, dict]:
    return {t["input"]: t for t in verdict["performance"]["tests"] if t.get("candidate")}


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--max-shapes", type=int, default=24)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bbagent-dispatch-demo-"))
    replay = root / "answers.json"
    replay.write_text(json.dumps({"model": "replay-dispatch-demo",
                                  "exchanges": [{"response": answer("rows")}, {"response": answer("blocks")}]}))
    command = [sys.executable, "-m", "bbagent", "generate", "--op", OP, "--provider", "replay", "--replay", str(replay),
               "--rounds", "2", "--target-roof", "0", "--root", str(root), "--max-shapes", str(args.max_shapes)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    (args.out / "generate-stdout.txt").write_text(f"$ {' '.join(command)}\n{done.stdout}\n{done.stderr}\n"
                                                  f"exit {done.returncode}, {wall:.0f} s\n")
    [run] = [path for path in (root / "runs").glob(f"*-{OP}-*") if path.is_dir()]
    state = json.loads((run / "run.json").read_text())
    (args.out / "run.json").write_text(json.dumps(state, indent=2))
    for n in (2,):
        prompt = run / f"round-{n}" / "prompt.md"
        if prompt.exists():
            (args.out / f"round-{n}-prompt.md").write_text(prompt.read_text())
    verdicts = {"rows (round 1)": run / "round-1" / "verdict.json", "blocks (round 2)": run / "round-2" / "verdict.json",
                "dispatcher": run / "round-2" / "dispatcher" / "verdict.json"}
    loaded = {name: json.loads(path.read_text()) for name, path in verdicts.items() if path.exists()}
    dispatcher = run / "round-2" / "dispatcher" / "kernel.py"
    if dispatcher.exists():
        (args.out / "dispatcher-kernel.py").write_text(dispatcher.read_text())
    rows = _table(loaded)
    (args.out / "per-shape.md").write_text(rows)
    print(rows)
    print(f"stopped_because: {state.get('stopped_because')}; dispatchers: {json.dumps(state.get('dispatchers'))}")
    return 0 if done.returncode == 0 else 1


def _table(loaded: dict[str, dict]) -> str:
    names = list(loaded)
    per = {name: times(verdict) for name, verdict in loaded.items() if verdict.get("performance")}
    shapes = sorted(set.intersection(*(set(t) for t in per.values())) if per else set(),
                    key=lambda s: next(iter(per.values()))[s].get("bytes") or 0)
    lines = ["| input | bytes | eager us | " + " | ".join(f"{n} us" for n in names) + " | "
             + " | ".join(f"{n} speedup" for n in names) + " |",
             "| --- " * (3 + 2 * len(names)) + "|"]
    speedups = {n: [] for n in names}
    for shape in shapes:
        first = per[names[0]][shape]
        eager = first["aten"]["median_ms"] * 1e3
        cells = [f"{per[n][shape]['candidate']['median_ms'] * 1e3:.2f}" for n in names]
        for n in names:
            speedups[n].append(per[n][shape]["speedup"])
        lines.append(f"| `{shape}` | {first.get('bytes')} | {eager:.2f} | " + " | ".join(cells) + " | "
                     + " | ".join(f"{per[n][shape]['speedup']:.3f}" for n in names) + " |")
    lines.append("| geomean over these shapes | | | " + " | " * (len(names) - 1) + " | "
                 + " | ".join(f"{geomean(speedups[n]):.3f}" for n in names) + " |")
    summaries = [f"- {n}: verdict {v['verdict']}, geomean speedup (bbagent's, counted shapes) "
                 f"{(v.get('performance') or {}).get('summary', {}).get('geomean_speedup')}" for n, v in loaded.items()]
    return "\n".join(lines) + "\n\n" + "\n".join(summaries) + "\n"


if __name__ == "__main__":
    sys.exit(main())
