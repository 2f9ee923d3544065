"""Where a child's time goes, on request (``Job.profile``; ``benchmarks/eval_cost.py --child-profile``).

Two views, printed on stderr, whose tail the Verdict keeps: cProfile of the thread that runs the
tests (its costliest calls, by own time and with what they call), and a sampler of every other
thread (the compile threads of ``harness.sandbox.child.compile_ahead``, which cProfile does not see):
how often each thread was found in each function, its innermost Python frame.
"""
from __future__ import annotations

import collections
import os
import sys
import threading

SAMPLE_EVERY_S = 0.005
ROWS = 30


def profiled(run, *args):
    """``run(*args)`` under both views; the report is printed even when ``run`` raises."""
    import cProfile
    import pstats
    profiler = cProfile.Profile()
    samples: collections.Counter = collections.Counter()
    stop = threading.Event()
    sampler = threading.Thread(target=_sample, args=(threading.get_ident(), samples, stop), daemon=True)
    sampler.start()
    try:
        return profiler.runcall(run, *args)
    finally:
        stop.set()
        sampler.join()
        stats = pstats.Stats(profiler).stats
        for key, title in ((2, "own"), (3, "cumulative")):
            print(f"profile, by {title} seconds:", file=sys.stderr)
            for (path, line, name), row in sorted(stats.items(), key=lambda kv: -kv[1][key])[:ROWS]:
                print(f"{row[key]:8.3f} {row[1]:7d} {os.path.basename(path)}:{line}:{name}"[:110], file=sys.stderr)
        print(f"other threads, sampled every {SAMPLE_EVERY_S * 1e3:g} ms (seconds found in each function):",
              file=sys.stderr)
        for (thread, where), count in samples.most_common(ROWS):
            print(f"{count * SAMPLE_EVERY_S:8.3f} {thread} {where}"[:110], file=sys.stderr)


def _sample(profiled_thread: int, samples: collections.Counter, stop: threading.Event) -> None:
    me = threading.get_ident()
    while not stop.wait(SAMPLE_EVERY_S):
        names = {thread.ident: thread.name for thread in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident in (me, profiled_thread):
                continue
            name = names.get(ident, "?").split("_")[0]
            code = frame.f_code
            samples[(name, f"{os.path.basename(code.co_filename)}:{code.co_name}")] += 1
