"""Compilation and autotuning pause the per-test clock: the child's CompileClock reports outermost
intervals with running totals; the parent sums the pauses on its own clock."""
import time

import pytest
from functools import cached_property

from bbagent.harness.events import CandidateStart, CaseResult, CaseStart, Compile, decode, encode
from bbagent.harness.sandbox.child.compile_clock import CompileClock, time_once
from bbagent.harness.sandbox.parent.compile_pauses import compile_totals, paused_seconds
from bbagent.harness.sandbox.parent.run import running_test as _running_test


class FakeTuner:
    """What CompileClock needs of triton's Autotuner: a cache, a cached do_bench, run."""
    def __init__(self):
        self.cache = {}

    @cached_property
    def do_bench(self):
        return "the real benchmarker"

    def run(self):
        self.cache["key"] = "config"
        return self.do_bench


def test_nested_calls_report_one_interval_and_count_every_compile():
    events = []
    clock = CompileClock(lambda event: events.append(decode(encode(event), time.perf_counter())))  # over the wire
    compile_ = clock._timed("compile", lambda: time.sleep(0.02))
    bench = clock._timed("autotune", lambda: compile_())
    run = clock._counting_runs(lambda tuner: [bench() for _ in range(3)])
    run(FakeTuner())
    compile_()
    assert [(e.phase, e.kind) for e in events] == [("start", "autotune"), ("end", "autotune")] * 3 + [
        ("start", "compile"), ("end", "compile")]
    totals = compile_totals(events)
    assert totals["compiles"] == 4 and totals["autotune_runs"] == 1
    assert totals["autotune_s"] >= 0.06 and 0.02 <= totals["compile_s"] < 0.06
    assert compile_totals([]) == {"compiles": 0, "autotune_runs": 0, "compile_s": 0.0, "autotune_s": 0.0}


def test_paused_seconds_counts_only_after_since_and_an_open_interval_up_to_now():
    events = [Compile(phase="start", received_at=1.0), CaseResult(record={}, received_at=2.0),
              Compile(phase="end", received_at=4.0), Compile(phase="start", received_at=10.0)]
    assert paused_seconds(events, 0.0, 12.0) == 3.0 + 2.0
    assert paused_seconds(events, 3.0, 12.0) == 1.0 + 2.0
    assert paused_seconds(events, 11.0, 12.0) == 1.0


def test_the_running_test_is_found_behind_compile_events():
    start = CandidateStart(id="t1")
    compiles = [Compile(phase=p) for p in ("start", "end") * 20]
    assert _running_test([CaseStart(id="t1"), start] + compiles) is start
    assert _running_test([start, CaseResult(record={"id": "t1"})] + compiles) is None


def test_autotuning_is_quick_during_the_tests_and_real_again_for_timing():
    clock = CompileClock(lambda event: None)
    clock._switch_benchmarker(FakeTuner)
    FakeTuner.run = clock._counting_runs(FakeTuner.run)
    tuner = FakeTuner()
    clock.quick_autotuning()
    assert tuner.run() is time_once and list(clock.tuners) == [tuner]
    clock.real_autotuning()
    assert tuner.cache == {} and tuner.do_bench == "the real benchmarker"
    clock.quick_autotuning()
    assert tuner.do_bench is time_once  # a cached real benchmarker does not hide the switch


# a child's clock installed and quick, then the candidate (argv[2]) imported, the project at argv[1]
CLOCKED_CANDIDATE = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
from bbagent.harness.sandbox.child.compile_clock import CompileClock
events = []
clock = CompileClock(events.append)
clock.install()
clock.quick_autotuning()
import importlib.util
spec = importlib.util.spec_from_file_location("candidate", sys.argv[2])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
'''

TRIM_SCRIPT = CLOCKED_CANDIDATE + r'''
tuner = module._relu
during = len(tuner.configs)
clock.real_autotuning()
print(json.dumps({"kind": type(tuner).__name__, "during": during, "after": len(tuner.configs),
                  "counted": getattr(type(tuner), "_bbagent_counted", False)}))
'''


def test_every_autotuner_holds_one_config_during_the_tests_and_all_of_them_for_timing():
    """Issue 32: a library's Autotuner subclass that overrides run (FlagGems' LibTuner) compiled
    and benchmarked 22 configs for every new shape key during the correctness tests. While the
    tests run every autotuner, subclasses included, holds one config; the timing phase gets all
    20 back."""
    import json
    import subprocess
    import sys
    from conftest import KERNELS, ROOT
    done = subprocess.run([sys.executable, "-c", TRIM_SCRIPT, str(ROOT), str(KERNELS / "relu_libtuner.py")],
                          capture_output=True, text=True, timeout=300, env={**__import__("os").environ,
                                                                              "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"kind": "LibraryTuner", "during": 1, "after": 20, "counted": True}, seen


def test_a_spent_compile_budget_is_reported_as_such_with_its_figures():
    """Issue 32: compile time that runs out is not a test that hung."""
    from bbagent.harness.assemble import _stop_cause
    from bbagent.harness.sandbox.parent.watch import ChildOutcome
    from bbagent.harness.error_kinds import ERROR_KINDS
    outcome = ChildOutcome(limit="compile_budget", detail="compilation and autotuning took more than 240 s "
                                                          "(22 compilations, 3 autotuning runs so far)")
    kind, cause = _stop_cause([], outcome, 300.0)
    assert kind == "compile_budget" and kind in ERROR_KINDS
    assert "compile budget" in cause and "22 compilations, 3 autotuning runs" in cause and "timed out" not in cause


ROTATE_SCRIPT = CLOCKED_CANDIDATE + r'''
import torch
x = torch.randn(1000)
ran = []
for number in range(int(sys.argv[3])):
    clock.rotate(number)
    module.kernel(x)
    tuner = module._relu  # Triton's records the config it ran; the library's keeps its choice per key
    config = getattr(tuner, "best_config", None) or tuner.cache[(1000,)]
    ran.append(config.kwargs["BLOCK"])
clock.real_autotuning()
print(json.dumps({"ran": ran, "benched": clock._benched, "totals": clock.totals, "after": len(module._relu.configs)}))
'''


@pytest.mark.parametrize("kernel, blocks", [("relu_autotuned.py", [256, 1024]),
                                            ("relu_libtuner.py", [64, 128, 256, 512, 1024])])
def test_every_config_runs_during_the_tests_and_none_is_benchmarked_until_timing(kernel, blocks):
    """Issue 33: while the tests run, an autotuner (Triton's, or a library's subclass that tunes in
    its own run) runs each of its configs on some tests, one config per test, and benchmarks none;
    the timing phase gets every config back."""
    import json
    import os
    import subprocess
    import sys
    from conftest import KERNELS, ROOT
    from bbagent.harness.sandbox.child.compile_clock import TESTS_PER_CONFIG
    configs = {"relu_autotuned.py": 2, "relu_libtuner.py": 20}[kernel]
    tests = configs * TESTS_PER_CONFIG + 3
    done = subprocess.run([sys.executable, "-c", ROTATE_SCRIPT, str(ROOT), str(KERNELS / kernel), str(tests)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(set(seen["ran"])) == blocks  # every config ran
    assert seen["ran"][-3:] == [blocks[0]] * 3  # after them, the first config
    assert seen["benched"] == 0 and seen["totals"]["autotune_runs"] == 0  # nothing benchmarked
    assert seen["after"] == configs
