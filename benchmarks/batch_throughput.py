"""Batch throughput on 1 GPU against N GPUs: the same batch of operators, answered by a replay
provider with a fixed simulated LLM latency (each answer a correct corpus kernel, on round 1), run
by `bbagent batch` in a fresh root, a fresh Triton cache and a fresh process per configuration
(so every configuration pays the same cold starts and compiles, whatever order they run in). Reports per configuration the wall time, operators per minute, each GPU's busy
fraction and evaluation count (from summary.json), which GPU each evaluation ran on (from the
Verdicts' environment.cuda_visible_devices), and the evaluations' phase times summed (from the
Verdicts' timings: child start, suite build, tests, Triton compiles; the rest is mostly timing).

    python benchmarks/batch_throughput.py --gpus 0 --gpus 0,1 --latency 3 --jobs 10 \\
        --out benchmarks/results/issue18-h200
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# operator -> a corpus kernel that passes it (tests/kernels/corpus.json)
KERNELS = {"aten.relu.default": "relu_triton.py", "aten.add.Tensor": "add_broadcast.py",
           "aten.sum.dim_IntList": "sum_dim.py", "aten.gather.default": "gather.py",
           "aten.index_select.default": "index_select.py", "aten.exp.default": "exp_imports_helpers.py",
           "aten.mm.default": "mm_tiled.py", "aten.cat.default": "cat_promote_types.py",
           "aten.empty_like.default": "empty_like.py", "aten._softmax.default": "softmax.py"}

PHASES = ("wall_s", "startup_s", "suite_build_s", "tests_s", "compile_s", "autotune_s")


def write_replays(where: Path, latency_s: float) -> None:
    where.mkdir(parents=True, exist_ok=True)
    for op, kernel in KERNELS.items():
        answer = f"```python\n{(ROOT / 'tests' / 'kernels' / kernel).read_text()}```\n"
        (where / f"{op}.json").write_text(json.dumps({"model": "replayed", "latency_s": latency_s,
                                                      "exchanges": [{"response": answer}]}))


def run_batch(config: str, replays: Path, jobs: int, ops: list[str], keep: Path | None) -> dict:
    """``config``: GPUs of this machine for the local executor ("0,1"), or "ray:0,1" for the Ray
    executor on a cluster that bbagent starts here seeing those GPUs."""
    ray = config.startswith("ray:")
    gpus = config.removeprefix("ray:")
    root = Path(tempfile.mkdtemp(prefix=f"bbagent-batch-{config.replace(',', '_').replace(':', '-')}-"))
    env = dict(os.environ, TRITON_CACHE_DIR=str(root / "triton-cache"))
    command = [sys.executable, "-m", "bbagent", "batch", "--ops", ",".join(ops), "--provider", "replay",
               "--replay", str(replays), "--rounds", "1", "--jobs", str(jobs), "--root", str(root), "--json"]
    if ray:
        command += ["--executor", "ray"]
        env["CUDA_VISIBLE_DEVICES"] = gpus
    else:
        command += ["--gpus", gpus]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"batch on {config} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    batch = Path(result["path"])
    summary = json.loads((batch / "summary.json").read_text())
    pinned = collections.Counter()
    phases = collections.Counter()
    for path in root.glob("runs/*/round-*/verdict.json"):
        verdict = json.loads(path.read_text())
        pinned[verdict["environment"].get("cuda_visible_devices")] += 1
        for phase in PHASES:
            phases[phase] += verdict["timings"].get(phase) or 0.0
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        for name in ("summary.json", "summary.md", "events.jsonl"):
            (keep / f"gpus-{config.replace(',', '_').replace(':', '-')}-{name}").write_text((batch / name).read_text())
        (keep / f"gpus-{config.replace(',', '_').replace(':', '-')}-stderr.log").write_text(done.stderr)
    finished = summary["counts"]["accepted"] + summary["counts"]["failed"]
    return {"gpus": config, "wall_s": round(wall, 2), "batch_wall_s": summary["session"]["wall_s"],
            "ops": len(ops), "finished": finished, "accepted": summary["counts"]["accepted"],
            "failed": summary["counts"]["failed"], "ops_per_min": round(60 * finished / wall, 3),
            "slots": summary["session"]["slots"], "evaluations_by_visible_device": dict(pinned),
            "phase_s_summed": {phase: round(phases[phase], 1) for phase in PHASES},
            "failures": summary["failures"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", action="append", required=True,
                        help="a configuration, e.g. 0 or 0,1, or ray:0,1 for --executor ray (repeat)")
    parser.add_argument("--latency", type=float, default=3.0, help="simulated seconds per LLM answer (default 3)")
    parser.add_argument("--jobs", type=int, default=len(KERNELS), help="agent loops at once")
    parser.add_argument("--ops", type=int, default=len(KERNELS), help=f"how many operators (at most {len(KERNELS)})")
    parser.add_argument("--out", type=Path, help="directory for results.json and each batch's summary")
    args = parser.parse_args()
    ops = list(KERNELS)[:args.ops]
    with tempfile.TemporaryDirectory() as scratch:
        replays = Path(scratch) / "replays"
        write_replays(replays, args.latency)
        rows = [run_batch(gpus, replays, args.jobs, ops, args.out) for gpus in args.gpus]
    base = rows[0]["ops_per_min"]
    print(f"{len(ops)} operators, {args.jobs} agent loops, simulated LLM latency {args.latency:g} s, 1 round each")
    print(f"{'gpus':>8} {'wall s':>8} {'ops/min':>8} {'vs first':>8}  accepted/failed  busy fraction per GPU "
          f"(evaluations)")
    for row in rows:
        busy = ", ".join(f"{s['name']} {s['busy_fraction']:.0%} ({s['evaluations']})" for s in row["slots"])
        print(f"{row['gpus']:>8} {row['wall_s']:>8.1f} {row['ops_per_min']:>8.2f} {row['ops_per_min'] / base:>7.2f}x  "
              f"{row['accepted']}/{row['failed']}  {busy}  pinned: {row['evaluations_by_visible_device']}")
    print("evaluation phases, seconds summed over the batch's evaluations:")
    for row in rows:
        print(f"{row['gpus']:>8}  " + ", ".join(f"{k} {v:.1f}" for k, v in row["phase_s_summed"].items()))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps({"latency_s": args.latency, "jobs": args.jobs,
                                                           "ops": ops, "rows": rows,
                                                           "host": os.uname().nodename}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
