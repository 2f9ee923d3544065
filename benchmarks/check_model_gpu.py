"""Real models on generated kernels, on a GPU: corpus kernels accepted through the real loop
(`bbagent batch` with a replay provider answering each operator with its corpus kernel), the
in-place overloads the models call timed as served (`bbagent bench`), every kernel approved
(`bbagent review approve`), then `bbagent check-model` on resnet18 and on the small transformer:
once with enable()'s default speed gate and once with --include-slower. Every command's output
goes to OUT/ (stdout .txt, the JSON results .json).

    python benchmarks/check_model_gpu.py --out benchmarks/results/issue19-h200
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = {"aten.relu.default": "relu_triton.py", "aten.add.Tensor": "add_broadcast.py",
           "aten._softmax.default": "softmax.py", "aten.addmm.default": "addmm_tiled.py"}
SERVED_AS = ["aten.relu_.default", "aten.add_.Tensor"]   # what resnet18 calls (ReLU(inplace), out += identity)
CHECKS = [("resnet18-gated", ["--model", "resnet18"]),
          ("resnet18-all", ["--model", "resnet18", "--include-slower"]),
          ("transformer-gated", ["--model", "transformer"]),
          ("transformer-all", ["--model", "transformer", "--include-slower", "--set", "activation=relu"])]


def bbagent(out: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bbagent", *args], cwd=ROOT, capture_output=True, text=True)
    (out / f"{name}.txt").write_text(f"$ bbagent {' '.join(args)}\n# exit {done.returncode}, "
                                     f"{time.perf_counter() - started:.1f} s\n{done.stdout}\n--- stderr ---\n"
                                     f"{done.stderr[-6000:]}")
    print(f"{name}: exit {done.returncode} in {time.perf_counter() - started:.1f} s", flush=True)
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--root", type=Path, help="reuse this root (default: a fresh one)")
    parser.add_argument("--skip-setup", action="store_true", help="the root already holds the approved kernels")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    root = args.root or Path(tempfile.mkdtemp(prefix="bbagent-check-model-"))
    if not args.skip_setup:
        replays = root / "replays"
        replays.mkdir(parents=True, exist_ok=True)
        for op, kernel in KERNELS.items():
            answer = f"```python\n{(ROOT / 'tests' / 'kernels' / kernel).read_text()}```\n"
            (replays / f"{op}.json").write_text(json.dumps({"model": "replayed", "exchanges": [{"response": answer}]}))
        bbagent(args.out, "batch", "batch", "--ops", ",".join(KERNELS), "--provider", "replay", "--replay",
                str(replays), "--rounds", "1", "--root", str(root))
        for op in SERVED_AS:
            bbagent(args.out, f"bench-{op}", "bench", "--op", op, "--root", str(root), "--max-shapes", "16",
                    "--target-ms", "25")
        for op in KERNELS:
            bbagent(args.out, f"approve-{op}", "review", "approve", op, "--note", "corpus kernel", "--root", str(root))
    bbagent(args.out, "review-list", "review", "list", "--root", str(root))
    bbagent(args.out, "review-list-json", "review", "list", "--json", "--root", str(root))
    for name, options in CHECKS:
        bbagent(args.out, f"check-{name}", "check-model", *options, "--root", str(root))
        json_done = bbagent(args.out, f"check-{name}-json", "check-model", *options, "--json", "--repeats", "3",
                            "--root", str(root))
        if json_done.stdout.strip():
            (args.out / f"check-{name}.json").write_text(json_done.stdout)
    batches = sorted((root / "runs").glob("batch-*"))
    if batches:
        bbagent(args.out, "report", "report", batches[-1].name, "--out", str(args.out / "report" / "report.html"),
                "--root", str(root))
    print(f"root: {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
