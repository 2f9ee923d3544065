"""The inductor baseline's bookkeeping on the CPU (its timing is the GPU's: tests/test_gpu.py): which
shapes need measuring, the kernel's speedup over cached and fresh timings, compile failures left out
of every figure (never 1.0x), the cache round trip, the benchmark records and the speed feedback."""
import json
from pathlib import Path

import pytest

from bbagent.harness.timing import baselines
from bbagent.harness.timing.metrics import summarize_performance
from conftest import verdict_of

GPU = "NVIDIA H200"


def stats(ms: float) -> dict:
    return {"median_ms": ms, "mean_ms": ms, "std_ms": 0.0, "p20_ms": ms, "p80_ms": ms, "min_ms": ms, "reps": 10}


def timed_test(i: int, kernel_ms: float, mode: str = "graph", overhead: bool = False) -> dict:
    size = 1 << (20 + i)
    return {"id": f"trace-{i}", "input": f"(T([{size}], f32),)", "dtype": "float32", "mode": mode,
            "aten": stats(2 * kernel_ms), "aten_source": "measured", "candidate": stats(kernel_ms), "speedup": 2.0,
            "bytes": 8 * size, "aten_gbs": 1000.0, "candidate_gbs": 2000.0, "overhead_dominated": overhead,
            "flops": size, "bound": "memory", "floor_ms": kernel_ms / 2, "roof_fraction": 0.5,
            "aten_roof_fraction": 0.25, "candidate_tflops": 1.0}


def test_engines_parse_with_eager_always_first():
    assert baselines.parse_engines("inductor") == ("eager", "inductor")
    assert baselines.parse_engines("eager, inductor,inductor") == ("eager", "inductor")
    with pytest.raises(ValueError, match="unknown baseline tvm: choose from eager, inductor"):
        baselines.parse_engines("eager,tvm")
    with pytest.raises(ValueError):
        baselines.parse_engines(" , ")


def test_cache_modes_never_collide_with_eager_ones():
    assert baselines.cache_mode("default", "graph") == "inductor-default/graph"
    assert {baselines.cache_mode(m, t) for m in baselines.INDUCTOR_MODES for t in ("graph", "eager")}.isdisjoint(
        {"graph", "eager"})


def test_only_shapes_without_a_cached_row_for_this_gpu_and_mode_are_measured():
    tests = [timed_test(0, 1.0), timed_test(1, 1.0, mode="eager"), timed_test(2, 1.0),
             {"id": "trace-3", "input": "x", "error_kind": "timing_mismatch", "message": "wrong"}]
    rows = [{"gpu": GPU, "input": tests[0]["input"], "mode": "inductor-default/graph", "timing": stats(1.0)},
            {"gpu": GPU, "input": tests[1]["input"], "mode": "inductor-default/graph", "timing": stats(1.0)},
            {"gpu": "NVIDIA H100", "input": tests[2]["input"], "mode": "inductor-default/graph", "timing": stats(1.0)},
            {"gpu": GPU, "input": tests[2]["input"], "mode": "inductor-max-autotune/graph", "timing": stats(1.0)}]
    assert [t["id"] for t in baselines.wanted(tests, rows, GPU, "default")] == ["trace-1", "trace-2"]
    assert [t["id"] for t in baselines.wanted(tests, rows, GPU, "max-autotune")] == ["trace-0", "trace-1"]


def test_speedups_over_cached_and_fresh_timings_and_compile_failures_left_out():
    tests = [timed_test(0, 1.0), timed_test(1, 2.0), timed_test(2, 1.0), timed_test(3, 0.001, overhead=True)]
    rows = [{"gpu": GPU, "input": tests[0]["input"], "mode": "inductor-default/graph",
             "timing": {**stats(3.0), "eager_over_inductor": 1.5}}]
    measured = [{"input": tests[1]["input"], "mode": "inductor-default/graph", "timing": stats(1.0),
                 "raw": [1.0] * 10, "eager_over_inductor": 4.0, "compile_s": 2.5},
                {"input": tests[2]["input"], "mode": "inductor-default/graph",
                 "error": "torch.compile failed: Unsupported: boom"},
                {"input": tests[3]["input"], "mode": "inductor-default/graph", "timing": stats(0.004)}]
    baselines.attach(tests, rows, measured, GPU, "default")
    cached, fresh, failed, tiny = (t["baselines"]["inductor"] for t in tests)
    assert cached["source"] == "cache" and cached["speedup"] == 3.0 and cached["eager_over_inductor"] == 1.5
    assert "eager_over_inductor" not in cached["timing"]
    assert fresh["source"] == "measured" and fresh["speedup"] == 0.5 and fresh["compile_s"] == 2.5
    assert failed["error"].startswith("torch.compile failed") and "speedup" not in failed
    summary = baselines.summary(tests, True, "default")
    assert summary["compared"] == 2 and summary["compile_failures"] == [
        {"input": tests[2]["input"], "error": "torch.compile failed: Unsupported: boom"}]
    assert summary["geomean_speedup"] == pytest.approx((3.0 * 0.5) ** 0.5)
    assert summary["fast_p"]["1"] == 0.5 and summary["fast_p"]["0"] == 1.0
    assert baselines.summary(tests, False, "default")["geomean_speedup"] is None  # a failing kernel has none
    from bbagent.harness.verdict import BaselineSummary, TimedTest
    BaselineSummary.model_validate(summary)
    for t in tests:
        TimedTest.model_validate(t)


def test_a_shape_the_child_never_reached_says_why():
    tests = [timed_test(0, 1.0)]
    baselines.attach(tests, [], [], GPU, "default", missing_error="the inductor baseline's child was stopped: timeout")
    assert tests[0]["baselines"]["inductor"]["error"] == "the inductor baseline's child was stopped: timeout"
    assert baselines.summary(tests, True, "default")["geomean_speedup"] is None


def test_measured_inductor_timings_go_to_the_cache_and_come_back(tmp_path):
    from bbagent.harness.after_tests import store_measured as _store_measured
    from bbagent.harness.evaluate import TimingOptions
    from bbagent.harness.timing.reference_cache import ReferenceCache
    cache = ReferenceCache(tmp_path / "reference.sqlite")
    tests = [timed_test(0, 1.0)]
    listed = [{"name": "triton_poi_fused_relu_0", "us": 3000.0, "per_call": 1.0}]  # a program's: the profiler's list
    baselines.attach(tests, [], [{"input": tests[0]["input"], "mode": "inductor-default/graph", "timing": stats(3.0),
                                  "eager_over_inductor": 1.5, "launches": listed}], GPU, "default")
    verdict = verdict_of(tests, gpu=GPU, device_measured=False)
    timing = TimingOptions(cache=cache, baselines=("eager", "inductor"))
    _store_measured(timing, "aten.relu.default", verdict)
    rows = cache.reference_rows("aten.relu.default", "2.11")
    assert {row["mode"] for row in rows} == {"graph", "inductor-default/graph"}
    again = [timed_test(0, 1.5)]
    assert baselines.wanted(again, rows, GPU, "default") == []
    baselines.attach(again, rows, [], GPU, "default")
    assert again[0]["baselines"]["inductor"]["source"] == "cache"
    assert again[0]["baselines"]["inductor"]["speedup"] == 2.0
    assert again[0]["baselines"]["inductor"]["eager_over_inductor"] == 1.5
    assert again[0]["baselines"]["inductor"]["launches"] == listed


def test_the_options_travel_to_a_remote_evaluation():
    from bbagent.harness.evaluate import TimingOptions
    remote = TimingOptions(baselines=("eager", "inductor"), inductor_mode="max-autotune").remote("aten.relu.default", "2.11")
    rebuilt = TimingOptions(**remote)
    assert rebuilt.baselines == ("eager", "inductor") and rebuilt.inductor_mode == "max-autotune"


def gpu_verdict(tests: list[dict]):
    from bbagent.harness.verdict import Verdict
    device = {"copy_gbs": 4000.0, "empty_launch_ms": 0.004, "empty_graph_launch_ms": 0.002}
    performance = {"measured": True, "gpu": GPU, "device": device, "tests": tests, "target_ms": 25.0,
                   "summary": summarize_performance("aten.relu.default", tests, device, correct=True),
                   "baselines": {"inductor": baselines.summary(tests, True, "default")}}
    summary = {"planned": 4, "passed": 4, "total": 4, "skipped": 0, "not_run": 0, "failed": 0, "reference_errors": 0}
    return Verdict.model_validate({"op": "aten.relu.default", "kernel": {"path": "k.py", "sha256": "ab" * 32},
                                   "seed": 1, "verdict": "pass", "summary": summary, "performance": performance,
                                   "environment": {"device": "cuda"}})


def test_records_carry_one_engine_per_baseline(monkeypatch):
    import bbagent.agent.bench.records as bench
    from bbagent.agent.bench.schema import BenchRecord
    monkeypatch.setattr(bench, "hardware_config", lambda device: {"device": GPU})
    tests = [timed_test(0, 1.0), timed_test(1, 1.0)]
    baselines.attach(tests, [], [{"input": tests[0]["input"], "mode": "inductor-default/graph", "timing": stats(2.0),
                                  "raw": [2.0] * 10, "eager_over_inductor": 1.0, "compile_s": 1.2},
                                 {"input": tests[1]["input"], "mode": "inductor-default/graph",
                                  "error": "torch.compile failed: X"}], GPU, "default")
    records = bench.records_from_verdict(gpu_verdict(tests), "bench-1")
    by = {(r.workload_args["input"], r.engine): r for r in records}
    assert len(records) == 6 and {engine for _, engine in by} == {"aten", "inductor", "bbagent"}
    good = by[(tests[0]["input"], "inductor")]
    assert good.metrics["correct"] is True and good.metrics["reference_source"] == "measured"
    assert good.compilation_config == {"backend": "inductor", "mode": "default", "fullgraph": True, "dynamic": False}
    assert good.metrics["median_ms"] == 2.0 and good.runtime_raw == [2.0] * 10 and good.metrics["compile_s"] == 1.2
    assert by[(tests[0]["input"], "bbagent")].metrics["speedup_inductor"] == 2.0
    failed = by[(tests[1]["input"], "inductor")]
    assert failed.metrics["correct"] is False and failed.runtime_ms_mean is None and failed.metrics["speedup"] is None
    assert failed.metadata["error"] == "torch.compile failed: X"
    assert by[(tests[1]["input"], "bbagent")].metrics["speedup_inductor"] is None
    for record in records:  # what goes to bench.jsonl reads back under the schema
        BenchRecord.model_validate(json.loads(record.model_dump_json()))


def test_speed_feedback_and_table_compare_with_inductor(monkeypatch):
    from rich.console import Console
    from bbagent.agent.reports.bench import print_bench
    from bbagent.agent.generate.prompting import render_performance_feedback
    tests = [timed_test(0, 1.0), timed_test(1, 1.0)]
    baselines.attach(tests, [], [{"input": tests[0]["input"], "mode": "inductor-default/graph", "timing": stats(0.5)},
                                 {"input": tests[1]["input"], "mode": "inductor-default/graph",
                                  "error": "torch.compile failed: X"}], GPU, "default")
    verdict = gpu_verdict(tests)
    text = render_performance_feedback(verdict, target=1.5)
    assert "Against torch.compile (inductor, mode default) on the same shapes: geometric mean 0.5x over 1 shapes" in text
    assert "inductor failed to compile 1 shape, left out" in text
    console = Console(record=True, width=250)
    print_bench(console, verdict)
    shown = console.export_text()
    assert "vs inductor" in shown and "0.500x" in shown and "inductor: torch.compile failed: X" in shown
    assert "against inductor (default) geomean 0.500x over 1 shapes" in shown


def test_a_programs_speed_feedback_aims_at_torch_compile_and_lists_each_sides_kernels():
    """A program has one timed input: eager, torch.compile and the answer side by side, how far
    torch.compile's code is ahead, and the GPU kernels of each per call (the answer's and eager's
    from its own child's profiler, torch.compile's from the baseline's child)."""
    from bbagent.agent.generate.program_prompting import render_program_performance_feedback
    from bbagent.harness.verdict import ProfileFiles
    tests = [{**timed_test(0, 1.0), "id": "given", "input": "get_inputs(): float32[4096, 393216]"}]
    compiled = [{"name": "triton_poi_fused_add_mul_relu_0", "us": 500.0, "per_call": 1.0}]
    baselines.attach(tests, [], [{"input": tests[0]["input"], "mode": "inductor-default/graph", "timing": stats(0.5),
                                  "launches": compiled}], GPU, "default")
    verdict = gpu_verdict(tests).model_copy(update={"problem_kind": "program", "op": "19_ReLU"})
    mine = [{"name": "relu_kernel", "us": 600.0, "per_call": 1.0}, {"name": "add_kernel", "us": 300.0, "per_call": 1.0},
            {"name": "void at::native::elementwise_kernel<copy>", "us": 100.0, "per_call": 1.0}]
    eager = [{"name": "void at::native::vectorized_elementwise_kernel<relu>", "us": 900.0, "per_call": 2.0}]
    verdict.performance.profiles = [ProfileFiles.model_validate({"id": "given", "input": tests[0]["input"],
                                                                 "launches": {"kernel": mine, "eager": eager}})]
    text = render_program_performance_feedback(verdict, target=None, target_baseline="inductor")
    assert "Your ModelNew is correct: all 4 tests passed" in text and "`get_inputs(): float32[4096, 393216]`" in text
    assert "| eager PyTorch (`Model`) | 2000.0 | 2x faster |" in text
    assert "| torch.compile (inductor, mode default) | 500.0 | 0.5x (slower) |" in text
    assert "torch.compile's code is 2x faster than yours on these inputs (500.0 us against 1000.0 us)" in text
    assert "- torch.compile: 1 launch(es), 500.0 us of GPU time: triton_poi_fused_add_mul_relu_0 500.0 us" in text
    assert "- your ModelNew: 3 launch(es), 1000.0 us of GPU time: relu_kernel 600.0 us; add_kernel 300.0 us" in text
    assert "- eager Model: 2 launch(es), 900.0 us" in text and "x2" in text
    assert "torch.compile runs this program in 1 launch(es), yours in 3: fuse" in text
    assert "Your call spends 100.0 us only copying data" in text
    assert "real-model shapes" not in text and "roofline" not in text
    assert ("Its floor on this GPU is 500.0 us, memory-bound: 8.39 MB of inputs and outputs at the measured copy "
            "bandwidth, 0.00105 GFLOP at the measured matmul throughput. Yours runs at 50% of that ceiling, "
            "torch.compile's code at 100%, eager at 25%. torch.compile is already near the ceiling") in text
    far = verdict.model_copy(deep=True)
    far.performance.tests[0].baselines["inductor"].timing.median_ms = 2.0
    assert "torch.compile's code at 25%, eager at 25%." in render_program_performance_feedback(far, target=None)
    assert "already near the ceiling" not in render_program_performance_feedback(far, target=None)
    floorless = verdict.model_copy(deep=True)
    floorless.performance.tests[0].floor_ms = None  # a reference whose FLOPs could not be counted
    assert "Its floor" not in render_program_performance_feedback(floorless, target=None)
    # without profiles (the kernel lists are feedback only), the timings alone
    verdict.performance.profiles = None
    verdict.performance.tests[0].baselines["inductor"].launches = None
    assert "GPU kernels per call" not in render_program_performance_feedback(verdict, target=None)


def test_an_unknown_baseline_is_a_usage_error(tmp_path, capsys):
    from bbagent.cli import main
    assert main(["bench", "--op", "aten.relu.default", "--kernel", "k.py", "--root", str(tmp_path),
                 "--baseline", "eager,tvm"]) == 2
    assert "--baseline: unknown baseline tvm: choose from eager, inductor" in capsys.readouterr().err


def test_profiles_of_the_largest_shapes_move_into_the_run_directory(tmp_path):
    from bbagent.harness.after_tests import keep_profiles as _keep_profiles
    from bbagent.harness.timing.profile import largest
    from bbagent.harness.verdict import ProfileFiles
    results = [{"id": "a", "bytes": 10}, {"id": "b", "bytes": 30}, {"id": "c", "bytes": 20},
               {"id": "d", "error_kind": "timing_mismatch"}]
    assert largest(results, 2) == ["b", "c"]
    workdir = tmp_path / "child"
    (workdir / "profiles").mkdir(parents=True)
    for side in ("eager", "kernel"):
        (workdir / "profiles" / f"b-{side}.trace.json").write_text('{"traceEvents": []}')
    entries = [ProfileFiles(id="b", input="x", files=["profiles/b-eager.trace.json", "profiles/b-kernel.trace.json"]),
               ProfileFiles(id="c", input="y", files=["profiles/c-eager.trace.json"])]
    _keep_profiles(entries, workdir, tmp_path / "run")
    assert entries[0].files == [str(tmp_path / "run" / "profiles" / f"b-{s}.trace.json") for s in ("eager", "kernel")]
    assert all(Path(name).is_file() for name in entries[0].files) and entries[0].error is None
    assert entries[1].files == [] and "could not be kept" in entries[1].error
    lost = [ProfileFiles(id="b", input="x", files=["profiles/b-eager.trace.json"])]
    _keep_profiles(lost, workdir, None)
    assert lost[0].files == [] and "no profile directory" in lost[0].error


def test_a_baseline_child_that_fails_leaves_every_shape_with_the_reason():
    """The parent's side of the baseline child, run for real: on this CPU machine the child cannot
    reach a GPU and fails; every shape then carries why, and nothing counts as a speedup."""
    from bbagent.harness.after_tests import time_inductor as _time_inductor
    from bbagent.harness.evaluate import TimingOptions
    from bbagent.harness.sandbox.parent.environment import base_env
    from bbagent.harness.sandbox.parent.watch import Limits
    tests = [timed_test(0, 1.0), timed_test(1, 1.0, mode="eager")]
    device = {"copy_gbs": 4000.0, "empty_launch_ms": 0.004, "empty_graph_launch_ms": 0.002}
    verdict = verdict_of(tests, gpu=GPU, summary=summarize_performance("aten.relu.default", tests, device, correct=True))
    from bbagent.harness.sandbox.job import Job
    job = Job(problem={"kind": "operator", "key": "aten.relu.default", "serves": ["aten.relu.default"], "written_for": "aten.relu.default"}, kernel="", seed=3, device="cpu", workdir="", cpu_max_numel=1 << 16)
    _time_inductor("aten.relu.default", verdict, TimingOptions(baselines=("eager", "inductor")), job,
                   base_env("cpu"), True, Limits())
    errors = {t.baselines["inductor"].error for t in verdict.performance.tests}
    [error] = errors  # the traceback's last line (the CPU build: "AssertionError: Torch not compiled with CUDA ...")
    assert error.startswith("the inductor baseline's child failed: ") and "Error" in error and "\n" not in error
    summary = verdict.performance.baselines["inductor"]
    assert summary.compared == 0 and summary.geomean_speedup is None and len(summary.compile_failures) == 2


def test_a_compiled_result_that_differs_from_eager_is_named():
    import torch
    from bbagent.harness.ops import resolve_op
    from bbagent.harness.timing.inductor import differs_from_eager
    relu = resolve_op("aten.relu.default")
    x = torch.randn(64, 33)
    inputs = ((x,), {})
    assert differs_from_eager(relu, inputs, torch.relu(x)) is None
    wrong = torch.relu(x)
    wrong[3, 5] = 7.0
    message = differs_from_eager(relu, inputs, wrong)
    assert message.startswith("output: values differ at 1 of 2112 elements") and "index [3, 5]" in message, message
    assert torch.equal(inputs[0][0], x)  # the inputs stay as they were
    bernoulli = resolve_op("aten.bernoulli.default")  # random values: not compared one by one
    assert differs_from_eager(bernoulli, ((torch.rand(8),), {}), torch.zeros(8)) is None
