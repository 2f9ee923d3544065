"""GPU twins of the CPU evaluation and demo tests. Run on a CUDA machine: pytest -m gpu."""
import json
import os
from pathlib import Path

import pytest

from bbagent.cli import main
from conftest import KERNELS
from test_variants import FAMILIES, check_family_verdict, family_verdict

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("kernel", ["relu_triton.py", "relu_autotuned.py"])
def test_eval_on_gpu_runs_every_trace_and_bf16(capsys, kernel):
    code = main(["eval", "--op", "aten.relu.default", "--kernel", str(KERNELS / kernel), "--json"])
    verdict = json.loads(capsys.readouterr().out)
    assert code == 0, (verdict["error_kind"], verdict["message"], verdict["failure_groups"][:1])
    assert verdict["environment"]["device"] == "cuda" and not verdict["environment"]["interpreter"]
    assert verdict["skipped"] == []
    assert any(t["dtype"] == "bfloat16" for t in verdict["tests"])
    assert sum(t["source"].startswith("trace") for t in verdict["tests"]) > 50
    timings = verdict["timings"]  # compile processes the sandboxed child forked (if the cores were idle) compiled
    assert timings["ahead_processes"] <= 1 or timings["ahead_warmed"] > 0, timings


@pytest.mark.parametrize("kernel, kind", [("relu_identity.py", "mismatch"), ("relu_torch.py", "guard")])
def test_wrong_kernels_fail_on_gpu(capsys, kernel, kind):
    code = main(["eval", "--op", "aten.relu.default", "--kernel", str(KERNELS / kernel), "--json"])
    verdict = json.loads(capsys.readouterr().out)
    assert code == 1 and verdict["failure_groups"][0]["error_kind"] == kind


def test_replay_demo_on_gpu(tmp_path, capsys):
    code = main(["generate", "--op", "aten.relu.default", "--provider", "replay", "--root", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert (tmp_path / "generated_kernels" / "aten.relu.default" / "kernel.py").is_file()


def test_timing_phase_times_the_kernel_and_caches_eager(tmp_path):
    from bbagent.harness.evaluate import EvaluationRequest, TimingOptions, evaluate_kernel
    from bbagent.harness.timing.reference_cache import ReferenceCache
    options = TimingOptions(target_ms=10, max_cases=6, cache=ReferenceCache(tmp_path / "ref.sqlite"))
    first = evaluate_kernel(EvaluationRequest.of("aten.relu.default", timing=options), KERNELS / "relu_triton.py")
    assert first.passed, first.message
    performance = first.performance
    assert performance.measured and performance.planned == len(performance.tests) == 6
    assert {t.aten_source for t in performance.tests} == {"measured"}
    assert all(t.speedup > 0 and t.bytes > 0 and t.mode in ("graph", "eager") for t in performance.tests)
    assert performance.device.copy_gbs > 500 and performance.device.empty_launch_ms > 0
    summary = performance.summary
    assert summary.correct and summary.counted + summary.overhead_dominated.count == 6
    second = evaluate_kernel(EvaluationRequest.of("aten.relu.default", timing=options), KERNELS / "relu_triton.py")
    assert {t.aten_source for t in second.performance.tests} == {"cache"}
    assert second.performance.device_measured is False


def test_a_kernel_that_keeps_results_between_calls_fails_before_timing():
    """Every test passes (each calls it once); the repeated-call check (issue 60) catches it before
    the timing phase, which caught it as timing_mismatch before that check existed."""
    from bbagent.harness.evaluate import EvaluationRequest, TimingOptions, evaluate_kernel
    request = EvaluationRequest.of("aten.relu.default", timing=TimingOptions(target_ms=5, max_cases=3))
    verdict = evaluate_kernel(request, KERNELS / "relu_keeps_results.py")
    assert verdict.summary.failed == 0  # every test passed
    assert verdict.verdict == "fail" and verdict.error_kind == "repeated_call_mismatch", verdict.message
    assert verdict.performance is None or not verdict.performance.measured  # nothing timed


def test_events_that_report_more_time_than_passed_void_the_timing():
    """The clock's own cross-check (its CPU twin: test_runtime_checks): intervals inflated by a
    rewritten elapsed_time add up to more than the host saw pass."""
    import torch
    from bbagent.harness.timing.clock import ImplausibleTiming, time_interleaved
    x = torch.randn(1 << 20, device="cuda")
    honest = time_interleaved({"relu": lambda: torch.relu(x)}, target_ms=5)
    assert 0 < sum(honest["relu"]) < 1000
    original = torch.cuda.Event.elapsed_time
    torch.cuda.Event.elapsed_time = lambda start, end: 1000.0
    try:
        with pytest.raises(ImplausibleTiming, match="passed on the host's clock"):
            time_interleaved({"relu": lambda: torch.relu(x)}, target_ms=5)
    finally:
        torch.cuda.Event.elapsed_time = original


def test_the_devices_yardsticks_are_plausible_here():
    """Measured yardsticks pass the plausibility rules (a false alarm would void every timing)."""
    import torch
    from bbagent.harness.timing.phase import device_stats, implausible_device, peak_memory_gbs
    stats, measured = device_stats(torch.cuda.get_device_name(), [])
    assert measured and implausible_device(stats, peak_memory_gbs()) is None, (stats, peak_memory_gbs())


def test_optimisation_round_replaces_a_slow_kernel_on_gpu(tmp_path, capsys):
    """Replay: round 1 answers a correct but slow relu, round 2 a fast one; the fast one is
    accepted, the slow one stays in runs/ only."""
    answers = [f"```python\n{(KERNELS / name).read_text()}\n```\n" for name in ("relu_slow.py", "relu_triton.py")]
    replay = tmp_path / "answers.json"
    replay.write_text(json.dumps({"model": "replay-test", "exchanges": [{"response": a} for a in answers]}))
    code = main(["generate", "--op", "aten.relu.default", "--provider", "replay", "--replay", str(replay),
                 "--rounds", "2", "--target-speedup", "50", "--target-roof", "0", "--max-shapes", "8", "--target-ms", "10",
                 "--root", str(tmp_path)])
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert code == 0, out
    accepted = tmp_path / "generated_kernels" / "aten.relu.default"
    meta = json.loads((accepted / "meta.json").read_text())
    speedups = {int(k): v for k, v in meta["round_speedups"].items()}
    assert meta["round"] == 2 and speedups[2] > 1.5 * speedups[1], speedups
    assert (accepted / "kernel.py").read_text() == (KERNELS / "relu_triton.py").read_text().strip() + "\n"
    run = next((tmp_path / "runs").glob("*aten.relu.default*"))
    assert "range(4)" in (run / "round-1" / "kernel.py").read_text()
    assert "Slowest shapes first" in (run / "round-2" / "prompt.md").read_text()
    assert len(meta["performance"]["shapes"]) == 8 and "faster than round 1" in out


def test_bench_writes_valid_timed_records(tmp_path, capsys):
    from bbagent.agent.bench.schema import BenchRecord
    code = main(["bench", "--op", "aten.relu.default", "--kernel", str(KERNELS / "relu_triton.py"),
                 "--max-shapes", "4", "--target-ms", "10", "--root", str(tmp_path), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["verdict"] == "pass"
    records = [BenchRecord.model_validate_json(line) for line in open(summary["bench_file"])]
    assert len(records) == 8 and {r.engine for r in records} == {"aten", "bbagent"}
    assert all(r.runtime_ms_mean and r.runtime_raw and r.execution_config["device"] == "cuda" for r in records)
    assert all(r.metrics["speedup"] > 0 for r in records if r.engine == "bbagent")


def test_bench_against_inductor_measures_once_then_reads_the_cache(tmp_path, capsys):
    from bbagent.agent.bench.schema import BenchRecord
    command = ["bench", "--op", "aten.relu.default", "--kernel", str(KERNELS / "relu_triton.py"), "--max-shapes", "3",
               "--target-ms", "10", "--root", str(tmp_path), "--json", "--baseline", "eager,inductor"]
    sources = []
    for _ in range(2):
        code = main(command)
        summary = json.loads(capsys.readouterr().out)
        assert code == 0 and summary["verdict"] == "pass"
        inductor = summary["baselines"]["inductor"]
        assert inductor["measured"] and inductor["compile_failures"] == [] and inductor["compared"] >= 1, inductor
        assert inductor["geomean_speedup"] > 0
        records = [BenchRecord.model_validate_json(line) for line in open(summary["bench_file"])]
        timed = [r for r in records if r.engine == "inductor"]
        assert len(timed) == 3 and all(r.runtime_ms_mean and r.metrics["correct"] for r in timed)
        assert all(r.metrics["speedup_inductor"] > 0 for r in records if r.engine == "bbagent")
        sources.append({r.metrics["reference_source"] for r in timed})
    assert sources == [{"measured"}, {"cache"}]


def test_bench_profile_writes_chrome_traces_of_eager_and_the_kernel(tmp_path, capsys):
    code = main(["bench", "--op", "aten.relu.default", "--kernel", str(KERNELS / "relu_triton.py"), "--max-shapes", "3",
                 "--target-ms", "10", "--root", str(tmp_path), "--json", "--profile"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and len(summary["profiles"]) == 2, summary["profiles"]
    for entry in summary["profiles"]:
        assert entry["error"] is None and len(entry["files"]) == 2, entry
        for name in entry["files"]:
            assert name.startswith(summary["run_dir"]) and "traceEvents" in json.load(open(name))


@pytest.mark.skipif(__import__("bbagent.harness.timing.ncu", fromlist=["find_ncu"]).find_ncu() is None,
                    reason="Nsight Compute (ncu) is not installed on this GPU machine")
def test_bench_ncu_measures_eager_and_the_kernel_on_the_largest_shapes(tmp_path, capsys):
    code = main(["bench", "--op", "aten.relu.default", "--kernel", str(KERNELS / "relu_triton.py"), "--max-shapes", "3",
                 "--target-ms", "10", "--root", str(tmp_path), "--json", "--ncu"])
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    report = summary["ncu"]
    assert code == 0 and report["measured"], report
    assert len(report["shapes"]) == 2 and report["notes"] == [] and report["csv"].startswith(summary["run_dir"])
    for shape in report["shapes"]:
        eager, kernel = shape["eager"], shape["kernel"]
        assert eager["error"] is None and kernel["error"] is None, shape
        assert [k["name"] for k in kernel["kernels"]] == ["_relu"], kernel["kernels"]  # the Triton kernel, once
        for side in (eager, kernel):
            assert side["time_us"] > 0 and side["dram_gbs"] > 0 and 0 < side["occupancy_pct"] <= 100
            assert 0 < side["dram_pct"] <= 100 and 0 < side["sm_pct"] <= 100
    assert "Nsight Compute (clocks locked to base" in captured.err and "% DRAM peak" in captured.err
    records = [json.loads(line) for line in open(summary["bench_file"])]
    profiled = [r for r in records if "ncu" in r["metrics"]]
    assert len(profiled) == 4 and {r["engine"] for r in profiled} == {"aten", "bbagent"}


@pytest.mark.parametrize("functional, kernel, members", FAMILIES)
def test_one_functional_kernel_serves_every_variant_on_gpu(functional, kernel, members):
    verdict = family_verdict(functional, kernel, members, device="cuda")
    check_family_verdict(verdict, functional, members)
    assert verdict.skipped == [] or all("rejects this input" in s.reason for s in verdict.skipped)
    for row in verdict.variants:  # bfloat16 runs on the GPU, in every convention
        assert any(t.dtype == "bfloat16" for t in verdict.tests if t.overload == row.op), row.op


@pytest.mark.parametrize("op, kernel", [("aten.add_.Tensor", "add_inplace_returns_new.py"),
                                        ("aten.add.out", "add_out_ignores_out.py")])
def test_wrong_convention_fails_on_its_overload_on_gpu(op, kernel):
    from bbagent.harness.evaluate import EvaluationRequest, evaluate_kernel
    verdict = evaluate_kernel(EvaluationRequest.of(op, seed=7), KERNELS / kernel)
    failed = [t for t in verdict.tests if t.passed is False]
    assert verdict.verdict == "fail" and {t.overload for t in failed} == {op}
    assert verdict.failure_groups[0].error_kind == "mutation_mismatch"


def test_a_batch_executor_pins_each_evaluation_to_its_gpu():
    import torch

    from bbagent.agent.batch.executor import LocalExecutor
    from bbagent.harness.evaluate import EvaluationRequest, physical_gpu
    gpus = list(range(torch.cuda.device_count()))
    executor = LocalExecutor("cuda", gpus=gpus, per_gpu=1)
    for gpu in gpus:  # one evaluation per slot, in turn: each lands on the next free GPU
        verdict = executor.evaluate(EvaluationRequest.of("aten.relu.default", device="cuda"), KERNELS / "relu_triton.py")
        assert verdict.passed, verdict.message
    seen = {s["name"]: s["evaluations"] for s in executor.activity()}
    assert seen == {f"gpu-{gpu}": 1 for gpu in gpus}
    assert verdict.environment.cuda_visible_devices == physical_gpu(gpus[-1])


def test_enable_serves_cuda_tensors_and_check_model_matches_on_gpu(tmp_path, capsys):
    """GPU twin of test_enable / test_check_model: approved kernels registered for the CUDA key
    serve the model's calls on the GPU, and the tiny transformer matches eager."""
    from test_check_model import TINY, approve
    approve(tmp_path, "aten.relu.default", "relu_triton.py", dtypes=("float32", "float16", "bfloat16"))
    approve(tmp_path, "aten.add.Tensor", "add_broadcast.py")
    code = main(["check-model", "--model", "transformer", "--device", "cuda", *TINY, "--root", str(tmp_path),
                 "--include-slower", "--repeats", "1", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["match"], result
    assert result["served"]["aten.relu.default"]["calls"] == 1
    assert result["served"]["aten.add.Tensor"]["calls"] == result["ops_run"]["aten.add.Tensor"] > 0
    assert result["gpu"]


CONVOLUTIONS = [  # (input shape, weight shape, stride, padding, dilation, transposed, groups, dtype)
    ((128, 120, 14, 14), (120, 1, 7, 7), [1, 1], [3, 3], [1, 1], False, 120, "float16"),  # depthwise
    ((16, 64, 21, 21), (128, 16, 3, 3), [2, 2], [1, 1], [1, 1], False, 4, "bfloat16"),  # grouped
    ((4, 32, 9, 9), (32, 16, 3, 3), [2, 2], [1, 1], [1, 1], True, 1, "float16"),  # transposed
    ((8, 16, 64), (32, 16, 5), [1], [2], [2], False, 1, "float32"),  # 1-d, dilated
    ((2, 8, 6, 10, 10), (16, 8, 3, 3, 3), [1, 1, 1], [1, 1, 1], [1, 1, 1], False, 1, "float16"),  # 3-d
    ((32, 256, 14, 14), (512, 256, 1, 1), [1, 1], [0, 0], [1, 1], False, 1, "float32"),
]


@pytest.mark.parametrize("case", CONVOLUTIONS, ids=lambda c: f"{len(c[0]) - 2}d-{c[7]}-groups{c[6]}"
                         + ("-transposed" if c[5] else ""))
def test_convolution_references_run_on_atens_own_kernels_and_agree_with_float64(case):
    """The reference of a convolution runs without cuDNN (no plan per new shape) on aten's own CUDA
    kernels, not falling back to cuDNN, and is as close to the float64 result as the dtype allows."""
    import torch
    from bbagent.harness.checks.reference import reference_call
    from test_compare import _CudnnSeen
    x_shape, w_shape, stride, padding, dilation, transposed, groups, dtype = case
    dtype = getattr(torch, dtype)
    x = torch.randn(x_shape, device="cuda", dtype=dtype)
    w = torch.randn(w_shape, device="cuda", dtype=dtype) / w_shape[1] ** 0.5
    args = (x, w, None, stride, padding, dilation, transposed, [0] * len(stride), groups)
    with _CudnnSeen() as mode:
        got = reference_call(torch.ops.aten.convolution.default, args, {})
    assert mode.seen == [("convolution.default", False)]  # aten's own kernel: no fallback to cuDNN
    truth = torch.ops.aten.convolution.default(x.double().cpu(), w.double().cpu(), *args[2:])
    tolerance = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 1e-5}[dtype]
    torch.testing.assert_close(got.double().cpu(), truth, rtol=tolerance, atol=tolerance * truth.abs().max().item())


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_an_approved_relu_is_called_by_the_compiled_model_on_gpu(tmp_path, capsys, mode):
    """Issue 63's must-show: under torch.compile (and under CUDA graphs) compiled code runs the
    approved relu (since issue 76 launched by inductor's code itself); the compiled model with it
    matches eager; the three runs are timed."""
    from test_check_model import TINY, approve
    approve(tmp_path, "aten.relu.default", "relu_triton.py", dtypes=("float32", "float16", "bfloat16"))
    code = main(["check-model", "--model", "transformer", "--device", "cuda", *TINY, "--root", str(tmp_path),
                 "--include-slower", "--repeats", "3", "--compile", mode, "--json"])
    result = json.loads(capsys.readouterr().out)
    compiled = result["compiled"]
    assert code == 0 and result["match"] and compiled["compile_alone"]["match"], result
    # issue 76: inductor's own code launches the approved relu (no opaque calls to count), one site per relu
    assert compiled["kernels"]["aten.relu.default"]["under_compile"] == "launched by inductor's code", compiled
    assert compiled["compiled_sites"]["aten.relu.default"] >= 1 and compiled["compiled_calls"]["aten.relu.default"] == 0
    assert compiled["timing"]["bbagent_ms"] > 0 and compiled["timing"]["compile_ms"] > 0


def test_regions_have_their_share_of_the_compiled_models_gpu_time(tmp_path):
    import bbagent
    survey = bbagent.regions("transformer", config={"d_model": 64, "heads": 2, "d_ff": 128}, device="cuda",
                             out=tmp_path / "found")
    assert survey.gpu_us > 0 and survey.regions
    for region in survey.regions:
        assert region.gpu_us > 0 and 0 < region.share < 2, region
        assert 0 < region.floor_us < 10 * region.gpu_us, region  # a floor, measured on this card


def test_enable_with_no_device_serves_cuda_tensors_on_a_gpu_machine(tmp_path):
    """GPU twin of test_enable_with_no_arguments_serves_on_a_machine_without_cuda (issue 64, 1):
    where CUDA is visible, ``bbagent.enable()`` picks it and serves CUDA tensors (a kernel not
    timed on the GPU is served only when asked, with include_slower)."""
    from test_enable import FAMILY, RELU, relu_served_with_no_device
    result = relu_served_with_no_device(tmp_path, "cuda", include_slower=True)
    assert result == {"calls": {op: 1 if op == RELU else 0 for op in FAMILY}, "device": "CUDA", "y": [0.0, 2.0]}


@pytest.mark.parametrize("dsl", ["triton", "helion"])
def test_inductors_own_code_launches_the_approved_relu_on_gpu(tmp_path, dsl):
    """Issue 76, 1: with an approved Triton relu enabled, the code inductor generates defines and
    launches the judged kernel itself (no ``bbagent_served`` call in it), in the default mode and
    under CUDA graphs, and computes what eager computes; with ``direct=False`` the call is the
    opaque twin's, as before. Issue 81, 4: so does an approved Helion relu (its Triton kernel,
    which Helion's host code launches with ``JITFunction.run``)."""
    import subprocess
    import sys
    from conftest import PYTHONPATH
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "compiled_launch.py"), "--layers", "2",
                           "--forwards", "50", "--repeats", "2", "--dsl", dsl, "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": PYTHONPATH})
    assert done.returncode == 0, done.stderr[-3000:]
    checks = json.loads((tmp_path / "compiled_launch.json").read_text())["checks"]
    for mode in ("default", "reduce-overhead"):
        direct, opaque = checks[f"{mode}/direct"], checks[f"{mode}/opaque"]
        assert direct["matches_eager"] and opaque["matches_eager"], checks
        assert direct["kernel_in_generated_code"] and not direct["bbagent_served_call_in_generated_code"], direct
        assert direct["under_compile"] == "launched by inductor's code" and direct["compiled_sites"][
            "aten.relu.default"] == 2, direct
        assert opaque["bbagent_served_call_in_generated_code"] and opaque["under_compile"] == "served", opaque
