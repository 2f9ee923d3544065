"""A night's batch on one GPU, measured: 40 operators across the prompt families, each answered once
by a replay provider (a correct kernel for 24 of them: each family's worked example and correct
corpus kernels; a kernel for another operator, so a wrong one, for the other 16), with a fixed
simulated LLM latency, run by `bbagent batch --rounds 1` in a fresh root and a fresh Triton cache.

Reports candidates evaluated per hour and operators per hour (wall clock of the batch), the GPU's
utilization as NVML reports it (sampled here every second: the mean and the share of seconds with a
kernel running), how long candidates waited for the GPU (the Verdicts' ``timings.gpu_wait_s``), the
harness-caused failures (a Verdict of the harness failing, an infrastructure failure, an evaluation
run again alone), and, with ``--alone``, every accepted kernel timed again alone (``bbagent bench``)
against the speedup the batch recorded.

    python3 benchmarks/night_batch.py --latency 0 --alone --out benchmarks/results/issue46-h100/after-l0
    python3 benchmarks/night_batch.py --checkout /tmp/before --time-limit 240 --out .../before-l0
    python3 benchmarks/night_batch.py --executor ray --out .../ray-l0    # the same night on a one-node Ray cluster

``--checkout DIR`` runs another tree's bbagent (the tree before a change); ``--time-limit`` stops the
batch (SIGINT) after that many seconds and counts what finished by then.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "prompts" / "examples"
CORPUS = ROOT / "tests" / "kernels"
BATCH_MAX_SHAPES, BATCH_TARGET_MS = 24, 25.0  # `bbagent batch`'s defaults: what --alone times again
CORRECT = {  # operator -> a kernel file that passes it
    "aten.sigmoid.default": EXAMPLES / "elementwise_unary.py", "aten.mul.Tensor": EXAMPLES / "elementwise_binary.py",
    "aten.sum.dim_IntList": EXAMPLES / "reduction.py", "aten._softmax.default": EXAMPLES / "softmax.py",
    "aten.native_layer_norm.default": EXAMPLES / "normalization.py", "aten.mm.default": EXAMPLES / "matmul.py",
    "aten.convolution.default": EXAMPLES / "convolution.py",
    "aten.max_pool2d_with_indices.default": EXAMPLES / "pooling.py",
    "aten.index_select.default": EXAMPLES / "indexing.py", "aten.cat.default": EXAMPLES / "copy_layout.py",
    "aten.threshold_backward.default": EXAMPLES / "backward.py", "aten.cumsum.default": EXAMPLES / "scan_sort.py",
    "aten.uniform_.default": EXAMPLES / "random.py", "aten.mse_loss.default": EXAMPLES / "loss.py",
    "aten.triangular_solve.default": EXAMPLES / "linalg.py",
    "aten.relu.default": CORPUS / "relu_triton.py", "aten.add.Tensor": CORPUS / "add_broadcast.py",
    "aten.gather.default": CORPUS / "gather.py", "aten.exp.default": CORPUS / "exp_imports_helpers.py",
    "aten.empty_like.default": CORPUS / "empty_like.py",
    "aten._softmax_backward_data.default": CORPUS / "softmax_backward_f32.py",
    "aten.bernoulli_.float": CORPUS / "bernoulli_triton.py", "aten.normal_.default": CORPUS / "normal_triton.py",
    "aten.randn_like.default": CORPUS / "randn_like_triton.py",
}
WRONG = {  # operator -> a kernel written for another operator: it fails, for its own reason
    "aten.tanh.default": EXAMPLES / "elementwise_unary.py", "aten.silu.default": EXAMPLES / "elementwise_unary.py",
    "aten.sub.Tensor": CORPUS / "add_broadcast.py", "aten.div.Tensor": EXAMPLES / "elementwise_binary.py",
    "aten.neg.default": CORPUS / "relu_triton.py", "aten.gelu.default": CORPUS / "relu_triton.py",
    "aten.sqrt.default": CORPUS / "exp_imports_helpers.py", "aten.log.default": CORPUS / "exp_imports_helpers.py",
    "aten.mean.dim": EXAMPLES / "reduction.py", "aten.amax.default": EXAMPLES / "reduction.py",
    "aten.bmm.default": EXAMPLES / "matmul.py", "aten._log_softmax.default": EXAMPLES / "softmax.py",
    "aten.avg_pool2d.default": EXAMPLES / "pooling.py", "aten.sigmoid_backward.default": EXAMPLES / "backward.py",
    "aten.maximum.default": CORPUS / "add_broadcast.py", "aten.cumprod.default": EXAMPLES / "scan_sort.py",
}
HARNESS_KINDS = ("worker_error",)


def write_replays(where: Path, latency_s: float, answers: dict[str, Path]) -> None:
    where.mkdir(parents=True, exist_ok=True)
    for op, kernel in answers.items():
        answer = f"```python\n{kernel.read_text()}```\n"
        (where / f"{op}.json").write_text(json.dumps({"model": "replayed", "latency_s": latency_s,
                                                      "exchanges": [{"response": answer}]}))


def gpu_use(monitor) -> dict:
    """The batch's GPU as this script's own monitor saw it (the same for any tree it runs)."""
    use = monitor.summary().get(0, {})
    return {"samples": use.get("samples", 0), "utilization_mean": use.get("utilization_mean"),
            "seconds_busy_share": use.get("busy_share"), "memory_peak_gib": use.get("memory_peak_gib")}


class HostCpu:
    """The host's CPU busy share (all cores, from /proc/stat), sampled every second in a thread."""

    def __init__(self):
        import threading
        self.shares, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    @staticmethod
    def _times() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and iowait
        return sum(fields), idle

    def _sample(self):
        before = self._times()
        while not self.stop.wait(1.0):
            now = self._times()
            total, idle = now[0] - before[0], now[1] - before[1]
            if total:
                self.shares.append(1 - idle / total)
            before = now

    def summary(self) -> dict:
        self.stop.set()
        shares = self.shares or [0.0]
        return {"busy_mean": round(sum(shares) / len(shares), 3),
                "seconds_above_90pct": round(sum(s > 0.9 for s in shares) / len(shares), 3)}


def timed_shapes(verdict: dict) -> list[dict]:
    """Each timed shape of a Verdict (the batch's or bench's): eager's and the kernel's median and the
    speedup, so a geomean that moved between two runs can be traced to the shapes that moved."""
    tests = (verdict.get("performance") or {}).get("tests") or []
    return [{"input": t["input"], "mode": t.get("mode"), "overhead_dominated": t.get("overhead_dominated"),
             "aten_ms": (t.get("aten") or {}).get("median_ms"), "candidate_ms": (t.get("candidate") or {}).get("median_ms"),
             "speedup": t.get("speedup")} for t in tests]


def evaluation_rows(verdicts: list[dict]) -> list[dict]:
    """Where each evaluation's time went (the Verdict's timings)."""
    rows = []
    for v in verdicts:
        t = v.get("timings") or {}
        rows.append({"op": v.get("op"), "verdict": v.get("verdict"), "wall_s": t.get("wall_s"),
                     "suite_build_s": t.get("suite_build_s"), "tests_s": t.get("tests_s"),
                     "timing_s": (t.get("test_parts") or {}).get("timing"), "compile_s": t.get("compile_s"),
                     "gpu_wait_s": t.get("gpu_wait_s"), "gpu_pauses": t.get("gpu_pauses"),
                     "gpu_paused_s": t.get("gpu_paused_s")})
    return sorted(rows, key=lambda r: r["op"] or "")


def run_batch(checkout: Path | None, replays: Path, ops: list[str], args, keep: Path | None) -> dict:
    root = Path(tempfile.mkdtemp(prefix="bbagent-night-"))
    env = dict(os.environ, TRITON_CACHE_DIR=str(root / "triton-cache"), BBAGENT_SUITE_CACHE=str(root / "suites"))
    if checkout is not None:  # another tree's bbagent, installed (as a wheel installs it) where only this batch sees it
        target = root / "installed"
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--disable-pip-version-check", "--target", str(target), str(checkout)], check=True)
        env["PYTHONPATH"] = os.pathsep.join([str(target), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
    command = [sys.executable, "-m", "bbagent", "batch", "--ops", ",".join(ops), "--provider", "replay",
               "--replay", str(replays), "--rounds", "1", "--root", str(root), "--json", "--exact-overload"]
    command += ["--jobs", str(args.jobs)] if args.jobs else []
    command += ["--evals-per-gpu", str(args.evals_per_gpu)] if args.evals_per_gpu else []
    command += ["--executor", args.executor]
    from bbagent.agent.batch.gpu_monitor import GpuMonitor  # NVML every second, as a batch samples its GPUs
    monitor = GpuMonitor({0: os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]})
    if monitor.unavailable:
        print(f"no NVML: {monitor.unavailable}", file=sys.stderr)
    host = HostCpu()
    started = time.time()
    batch = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        stdout, stderr = batch.communicate(timeout=args.time_limit)
        stopped = False
    except subprocess.TimeoutExpired:
        batch.send_signal(signal.SIGINT)
        stdout, stderr = batch.communicate()
        stopped = True
    wall = time.time() - started
    monitor.stop()
    gpu = gpu_use(monitor)
    cpu = host.summary()
    verdicts = [json.loads(p.read_text()) for p in root.glob("runs/*/round-*/verdict.json")]
    runs = [json.loads(p.read_text()) for p in root.glob("runs/*/run.json")]
    finished = [r for r in runs if r.get("status") in ("accepted", "failed")]
    harness_failures = [{"op": v["op"], "error_kind": v["error_kind"], "infrastructure": v.get("infrastructure"),
                         "message": (v["message"] or "")[:300]}
                        for v in verdicts if v["error_kind"] in HARNESS_KINDS or v.get("infrastructure")]
    reruns = [{"op": v["op"], "why": v["timings"].get("rerun_alone")} for v in verdicts if v["timings"].get("rerun_alone")]
    expected_wrong = [r["op"] for r in runs if r.get("op") in WRONG and r.get("status") == "accepted"]
    missed_correct = [{"op": r.get("op"), "message": (r.get("message") or "")[:300]}
                      for r in finished if r.get("op") in CORRECT and r.get("status") != "accepted"]
    hours = wall / 3600
    row = {"checkout": str(checkout or "the installed bbagent"), "executor": args.executor, "latency_s": args.latency, "wall_s": round(wall, 1), "stopped_at_limit": stopped,
           "exit": batch.returncode, "operators": len(ops), "operators_finished": len(finished),
           "evaluations": len(verdicts), "evaluations_per_hour": round(len(verdicts) / hours, 1),
           "operators_per_hour": round(len(finished) / hours, 1),
           "accepted": sum(r.get("status") == "accepted" for r in runs),
           "gpu": gpu, "host_cpu": cpu, "gpu_wait_s_summed": round(sum(v["timings"].get("gpu_wait_s") or 0 for v in verdicts), 1),
           "gpu_shared_evaluations": sum(bool(v["timings"].get("gpu_shared")) for v in verdicts),
           "memory_retries": sum(v["timings"].get("memory_retries") or 0 for v in verdicts),
           "harness_failures": harness_failures, "reruns_alone": reruns, "wrong_accepted": expected_wrong,
           "correct_not_accepted": missed_correct,
           "gpu_paused_s_summed": round(sum(v["timings"].get("gpu_paused_s") or 0 for v in verdicts), 1),
           "timing_s_summed": round(sum((v["timings"].get("test_parts") or {}).get("timing") or 0 for v in verdicts), 1),
           "speedups": {r["op"]: r.get("best_speedup") for r in runs if r.get("status") == "accepted"},
           "batch_shapes": {v["op"]: shapes for v in verdicts if (shapes := timed_shapes(v))},
           "per_evaluation": evaluation_rows(verdicts)}
    if keep is not None:  # kept now: a run cut at its limit while timing alone still has the batch's numbers
        save(keep, row)
    if args.alone:
        row["alone"] = []
        time_alone(root, env, runs, args,
                   lambda timed: (row["alone"].append(timed), keep is not None and save(keep, row)))
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        for summary in root.glob("runs/batch-*/summary.*"):
            (keep / summary.name).write_text(summary.read_text())
        (keep / "batch-stderr.log").write_text(stderr[-20000:])
    return row


def save(out: Path, row: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").write_text(json.dumps(row, indent=1) + "\n")


def time_alone(root: Path, env: dict, runs: list[dict], args, timed) -> None:
    """Each accepted, timed kernel (those of ``--alone-ops`` where given) timed again ``--alone-repeats``
    times, with eager aten, with nothing else on the GPU (``bbagent bench --no-cache``), handed to
    ``timed`` as soon as it is measured. Repeats show how far two runs alone differ."""
    deadline = time.time() + args.alone_budget
    wanted = set(args.alone_ops.split(",")) if args.alone_ops else None
    for run in sorted(runs, key=lambda r: r.get("op") or ""):
        if run.get("status") != "accepted" or not run.get("best_speedup") or (wanted and run["op"] not in wanted):
            continue
        kernel = root / "generated_kernels" / run["op"] / "kernel.py"
        for _ in range(args.alone_repeats):
            if time.time() > deadline:
                return
            # --no-cache: eager aten is timed again alone too, not read from what the batch measured beside
            # others; the batch's own shapes and time per shape (bench's defaults time more shapes)
            done = subprocess.run([sys.executable, "-m", "bbagent", "bench", "--op", run["op"], "--kernel", str(kernel),
                                   "--root", str(root), "--json", "--no-cache", "--max-shapes", str(BATCH_MAX_SHAPES),
                                   "--target-ms", str(BATCH_TARGET_MS)], cwd=root, env=env, capture_output=True,
                                  text=True)
            try:
                printed = json.loads(done.stdout[done.stdout.index("{"):])
                alone = printed["performance"]["geomean_speedup"]
                verdict = json.loads((Path(printed["run_dir"]) / "verdict.json").read_text())
            except (ValueError, KeyError, TypeError, OSError):
                verdict, alone = {}, None
            batch = run["best_speedup"]
            timed({"op": run["op"], "batch": batch, "alone": alone, "ratio": round(batch / alone, 3) if alone else None,
                   "alone_shapes": timed_shapes(verdict)})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.0, help="simulated seconds per LLM answer (default 0)")
    parser.add_argument("--jobs", type=int, help="agent loops at once (default: the batch's own)")
    parser.add_argument("--evals-per-gpu", type=int, help="passed to the batch (default: the batch's own)")
    parser.add_argument("--executor", choices=["local", "ray"], default="local",
                        help="the batch's executor; ray: a one-node cluster started on this machine (default local)")
    parser.add_argument("--checkout", type=Path, help="another bbagent tree to run, installed for the batch "
                        "(default: the bbagent this Python imports)")
    parser.add_argument("--time-limit", type=float, help="stop the batch after this many seconds")
    parser.add_argument("--ops", type=int, default=len(CORRECT) + len(WRONG), help="how many operators (from the start)")
    parser.add_argument("--alone", action="store_true", help="time each accepted kernel again alone afterwards")
    parser.add_argument("--alone-budget", type=float, default=240.0, help="seconds for --alone (default 240)")
    parser.add_argument("--alone-ops", help="with --alone: only these accepted operators (comma-separated)")
    parser.add_argument("--alone-repeats", type=int, default=1, help="with --alone: time each kernel this many times")
    parser.add_argument("--out", type=Path, help="directory for result.json and the batch's summary")
    args = parser.parse_args()
    answers = {**CORRECT, **WRONG}
    ops = sorted(answers)[:args.ops]  # correct and wrong ones mixed, in the order of their names
    with tempfile.TemporaryDirectory() as scratch:
        replays = Path(scratch) / "replays"
        write_replays(replays, args.latency, {op: answers[op] for op in ops})
        row = run_batch(args.checkout.resolve() if args.checkout else None, replays, ops, args, args.out)
    print(json.dumps({k: v for k, v in row.items() if k not in ("speedups", "per_evaluation", "batch_shapes", "alone")},
                     indent=1))
    for timed in row.get("alone") or []:
        print(f"{timed['op']}: batch {timed['batch']:.3f}, alone {timed['alone'] or 0:.3f}, ratio {timed['ratio']}")
    if row.get("alone"):
        ratios = [r["ratio"] for r in row["alone"] if r["ratio"]]
        worst = max(ratios, key=lambda r: abs(math.log(r))) if ratios else None
        print(f"speedup in the batch / alone: {len(ratios)} kernels, worst {worst}")
    if args.out:
        save(args.out, row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
