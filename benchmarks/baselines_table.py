"""Speedups of correct kernels against eager and against torch.compile (inductor), per operator, by
`bbagent bench --baseline eager,inductor --profile --ncu` (issue 21), plus one --channels-last run,
the profile files and Nsight Compute's metrics. Each op runs in its own process, in one fresh root
(so eager and inductor are measured, not read from an earlier cache), and the tables are written
from the --json summaries.

    python benchmarks/baselines_table.py --out benchmarks/results/issue21-h200-baselines [--max-shapes 8]

Writes OUT/<op>.json (the bench summary), OUT/<op>.txt (the table bench prints), OUT/table.md
(one row per run: geomean, p20/p50/p80 and fast_1 against each baseline, inductor's compile failures),
OUT/ncu.md (Nsight Compute's figures per profiled shape, where ncu is installed) and copies the profile
traces and ncu's CSVs to OUT/profiles/.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "tests" / "kernels"
EXAMPLES = ROOT / "prompts" / "examples"
# (op, kernel file, extra bench options): correct kernels from the corpus and the prompt examples
RUNS = [("aten.relu.default", KERNELS / "relu_triton.py", []),
        ("aten.add.Tensor", KERNELS / "add_broadcast.py", []),
        ("aten._softmax.default", KERNELS / "softmax.py", []),
        ("aten.native_layer_norm.default", EXAMPLES / "normalization.py", []),
        ("aten.mm.default", KERNELS / "mm_tiled.py", []),
        ("aten.max_pool2d_with_indices.default", EXAMPLES / "pooling.py", ["--channels-last"])]


def run_one(op: str, kernel: Path, extra: list[str], root: Path, out: Path, max_shapes: int) -> dict:
    name = op + ("-channels-last" if "--channels-last" in extra else "")
    command = [sys.executable, "-m", "bbagent", "bench", "--op", op, "--kernel", str(kernel), "--root", str(root),
               "--max-shapes", str(max_shapes), "--baseline", "eager,inductor", "--profile", "--ncu", "--json", *extra]
    print("$ python", " ".join(command[1:]), flush=True)
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    (out / f"{name}.txt").write_text(done.stderr)
    try:
        summary = json.loads(done.stdout)
    except json.JSONDecodeError:
        summary = {"op": op, "error": f"exit {done.returncode}: {done.stderr[-800:]}"}
    summary["name"] = name
    (out / f"{name}.json").write_text(json.dumps(summary, indent=1) + "\n")
    for entry in summary.get("profiles") or []:
        for file in entry.get("files", []):
            (out / "profiles").mkdir(exist_ok=True)
            shutil.copy(file, out / "profiles" / f"{name}-{Path(file).name}")
    if (summary.get("ncu") or {}).get("csv"):
        (out / "profiles").mkdir(exist_ok=True)
        shutil.copy(summary["ncu"]["csv"], out / "profiles" / f"{name}-ncu.csv")
    return summary


def ncu_rows(summary: dict) -> list[str]:
    """Nsight Compute's figures per profiled shape and side, or why there are none."""
    report = summary.get("ncu") or {}
    if not report.get("measured"):
        return [f"| {summary['name']} | no metrics: {report.get('reason') or summary.get('error', '')[:200]} |" + " |" * 7]

    def cell(value, unit=""):
        return "-" if value is None else f"{value:.0f}{unit}"
    rows = []
    for shape in report["shapes"]:
        for side in ("eager", "kernel"):
            s = shape.get(side) or {}
            rows.append(f"| {summary['name']} | {shape['input']} | {side} | {len(s.get('kernels', []))} | "
                        f"{cell(s.get('time_us'))} | {cell(s.get('dram_gbs'))} | {cell(s.get('dram_pct'), '%')} | "
                        f"{cell(s.get('sm_pct'), '%')} | {cell(s.get('occupancy_pct'), '%')} {s.get('error') or ''} |")
    return rows


def row(summary: dict) -> str:
    if "error" in summary:
        return f"| {summary['name']} | failed: {summary['error'][:200]} |" + " |" * 6
    eager, inductor = summary.get("performance") or {}, (summary.get("baselines") or {}).get("inductor") or {}

    def figures(s: dict) -> list[str]:
        if s.get("geomean_speedup") is None:
            return ["-", "-", "-"]
        return [f"{s['geomean_speedup']:.3f}x", f"{s['speedup_p20']:.2f} / {s['speedup_p50']:.2f} / {s['speedup_p80']:.2f}",
                f"{s['fast_p']['1']:.2f}"]
    failures = len(inductor.get("compile_failures") or [])
    verdict = summary["verdict"] + (f" (not timed: {summary['not_timed'][:60]})" if summary.get("not_timed") else "")
    return (f"| {summary['name']} | {verdict} | " + " | ".join(figures(eager)) + " | "
            + " | ".join(figures(inductor)) + f" | {failures} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--max-shapes", type=int, default=8)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bbagent-baselines-"))
    summaries = [run_one(op, kernel, extra, root, args.out, args.max_shapes) for op, kernel, extra in RUNS]
    table = ["| run | verdict | vs eager geomean | p20 / p50 / p80 | fast_1 | vs inductor geomean | p20 / p50 / p80 "
             "| fast_1 | inductor compile failures |", "| --- " * 9 + "|", *map(row, summaries)]
    (args.out / "table.md").write_text("\n".join(table) + "\n")
    ncu_table = ["| run | input | side | launches | ncu us | DRAM GB/s | % DRAM peak | % SM | occupancy |",
                 "| --- " * 9 + "|", *[line for s in summaries for line in ncu_rows(s)]]
    (args.out / "ncu.md").write_text("\n".join(ncu_table) + "\n")
    print("\n".join(table + [""] + ncu_table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
