"""Where a one-shot ``bbagent eval`` spends its wall time (issue 33's 6 s target for relu).

Runs ``python -m bbagent eval --op OP --kernel NEW_CANDIDATE --json`` RUNS times, each candidate
new (eval_cost's nonce, so Triton's cache misses), inside a thin wrapper that, in the CLI's own
process, samples the main thread's stack every few milliseconds and marks when the fork server was
spawned and when it said it was ready. Per run it prints the wall time, the interpreter's start
(before the wrapper's first line), the main thread's time by phase (the innermost frame of the
project's own code, or the library call under it), the fork server's start, the Verdict's own
timings, and how long the process took to end after writing what it saw (in an exit handler).
``--server-imports`` also runs the fork server's preload alone under ``-X importtime`` and lists
its costliest imports.

    python benchmarks/oneshot_timeline.py [--op relu] [--runs 4] [--kind correct|wrong]
                                          [--server-imports] [--out FILE]

The first run fills the file cache (and, with bytecode writable, the bytecode cache); it is
reported but marked.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from eval_cost import CANDIDATES, new_candidate, source_of  # noqa: E402

SAMPLE_S = 0.005

# Runs as ``python -c WRAPPER eval ...``: samples the main thread, marks the fork server's start,
# runs the CLI as the console script does, and writes what it saw to $ONESHOT_TIMELINE at exit.
WRAPPER = r'''
import atexit, json, os, sys, threading, time
started = time.time()
samples, marks = [], {}
main_thread = threading.main_thread().ident
project = os.environ["ONESHOT_PROJECT"]

def label(frame):
    leaf = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_code.co_name}"
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(project) and "/benchmarks/" not in name:
            return f"{os.path.relpath(name, project)}:{frame.f_code.co_name}", leaf
        frame = frame.f_back
    return "(outside the project)", leaf

def sample():
    while True:
        frame = sys._current_frames().get(main_thread)
        if frame is not None:
            samples.append((time.time(), *label(frame)))
        time.sleep(SAMPLE_S)

def dump():
    marks["exit_handler"] = time.time()
    with open(os.environ["ONESHOT_TIMELINE"], "w") as f:
        json.dump({"started": started, "marks": marks, "samples": samples}, f)

from bbagent.harness.sandbox.parent import pool
spawn, await_ready = pool.WarmPool._spawn, pool.WarmPool._await_ready
def marked_spawn(self):
    marks.setdefault("server_spawned", time.time())
    return spawn(self)
def marked_await(self):
    marks.setdefault("server_awaited", time.time())
    try:
        return await_ready(self)
    finally:
        marks.setdefault("server_ready", time.time())
pool.WarmPool._spawn, pool.WarmPool._await_ready = marked_spawn, marked_await
threading.Thread(target=sample, daemon=True).start()
import bbagent.cli
main = bbagent.cli.main
def marked_main():
    atexit.register(dump)  # after run's own handler, so before it
    try:
        return main(sys.argv[1:])
    finally:
        marks["main_returned"] = time.time()
bbagent.cli.main = marked_main
sys.exit(bbagent.cli.run())
'''.replace("SAMPLE_S", repr(SAMPLE_S))


def phases(samples: list, started: float) -> list[tuple[float, float, str]]:
    """Consecutive samples with the same project frame, as (start s, seconds, label with the
    library calls seen most under it)."""
    spans: list[list] = []
    for t, where, leaf in samples:
        if spans and spans[-1][2] == where:
            spans[-1][1] = t
            spans[-1][3][leaf] += 1
        else:
            spans.append([t, t, where, Counter({leaf: 1})])
    out = []
    for first, last, where, leaves in spans:
        seconds = last - first + SAMPLE_S
        if seconds >= 0.05:
            top = ", ".join(f"{leaf} {n}" for leaf, n in leaves.most_common(2))
            out.append((first - started, seconds, f"{where}  [{top}]"))
    return out


def one_run(op: str, source: str, workdir: Path, device: str | None) -> dict:
    kernel = workdir / "candidate.py"
    kernel.write_text(new_candidate(source))
    timeline = workdir / "timeline.json"
    env = dict(os.environ, ONESHOT_TIMELINE=str(timeline), ONESHOT_PROJECT=str(ROOT) + os.sep)
    command = [sys.executable, "-c", WRAPPER, "eval", "--op", op, "--kernel", str(kernel), "--json",
               *(["--device", device] if device else [])]
    began = time.time()
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    ended = time.time()
    try:
        seen = json.loads(timeline.read_text())
        verdict = json.loads(done.stdout)
    except (OSError, json.JSONDecodeError):
        raise SystemExit(f"oneshot_timeline: the run printed no Verdict (exit {done.returncode}):\n"
                         f"{done.stderr[-3000:]}") from None
    marks = seen["marks"]
    return {"wall_s": ended - began, "interpreter_start_s": seen["started"] - began,
            "after_exit_handler_s": ended - marks["exit_handler"],
            "server_spawned_s": marks.get("server_spawned", began) - began,
            "server_ready_s": marks.get("server_ready", began) - began,
            "waited_for_server_s": marks.get("server_ready", 0) - marks.get("server_awaited", 0),
            "main_returned_s": marks.get("main_returned", ended) - began,
            "verdict": verdict.get("verdict"), "timings": {k: v for k, v in (verdict.get("timings") or {}).items()
                                                           if k in ("child_ready_s", "suite_build_s", "tests_s",
                                                                    "phases", "compiles", "compile_s")},
            "phases": phases(seen["samples"], began)}


def server_imports(device: str, out) -> None:
    """The fork server's preload alone, under -X importtime, in the sandbox's environment."""
    from bbagent.harness.sandbox.parent.environment import base_env
    env = base_env(device)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-X", "importtime", "-c",
                           f"from bbagent.harness.sandbox.child.forkserver import preload; preload({device!r})"],
                          env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=300)
    took = time.perf_counter() - started
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, name = line[len("import time:"):].split("|", 2)
            rows.append((int(cumulative), name.rstrip()))
    print(f"\nfork server preload alone ({device}): {took:.2f} s, exit {done.returncode}; "
          f"costliest imports (cumulative):", file=out)
    for micros, name in sorted(rows, reverse=True)[:30]:
        print(f"  {micros / 1e6:6.3f} s {name}", file=out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--op", default="relu", help=f"of: {', '.join(CANDIDATES)}")
    parser.add_argument("--kind", default="correct", choices=["correct", "wrong"])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--device", default=None)
    parser.add_argument("--server-imports", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.op not in CANDIDATES:
        raise SystemExit(f"oneshot_timeline: unknown operator {args.op}; choose from {', '.join(CANDIDATES)}")
    op, correct, wrong = CANDIDATES[args.op]
    source = source_of(correct if args.kind == "correct" else wrong)
    out = open(args.out, "w") if args.out else sys.stdout
    results = []
    with tempfile.TemporaryDirectory(prefix="oneshot-") as scratch:
        for run in range(args.runs):
            result = one_run(op, source, Path(scratch), args.device)
            results.append(result)
            print(f"\nrun {run + 1}{' (fills the caches)' if run == 0 else ''}: {op} {args.kind}, "
                  f"verdict {result['verdict']}, wall {result['wall_s']:.2f} s", file=out)
            print(f"  interpreter start {result['interpreter_start_s']:.2f} s; fork server spawned at "
                  f"{result['server_spawned_s']:.2f} s, ready at {result['server_ready_s']:.2f} s (waited "
                  f"{result['waited_for_server_s']:.2f} s); main returned at {result['main_returned_s']:.2f} s; "
                  f"ended {result['after_exit_handler_s']:.2f} s after its exit handlers", file=out)
            print(f"  verdict timings: {json.dumps(result['timings'])}", file=out)
            for at, seconds, where in result["phases"]:
                print(f"  {at:6.2f} +{seconds:5.2f} s  {where}", file=out)
            out.flush()
    if args.server_imports:
        from bbagent.harness.evaluate import default_device
        server_imports(args.device or default_device(), out)
    if args.out:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
