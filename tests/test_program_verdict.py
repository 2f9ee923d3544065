"""The verdict on a program's answer (`bbagent eval --problem`), on the CPU under the Triton
interpreter: KernelBench-format problems of levels 1-3 written for these tests (tests/problems/),
right answers passing and wrong ones failing for their own reason, KernelBench's weak spots
(inputs never negative, norm weights of 1 and 0, outputs below the absolute tolerance) and the
adversarial classes its own tests look for (inputs zeroed, uninitialised memory, PyTorch doing
the work)."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

import bbagent
from bbagent.harness.interface import program_problem
from conftest import PYTHONPATH

PROBLEMS = Path(__file__).parent / "problems"
ANSWERS = PROBLEMS / "answers"
ALL_PASS = {"given": None, "signed": None, "perturbed": None, "smaller": None}

CASES = [
    # problem, answer, verdict error kind, each draw's error kind (None: passed)
    ("level1/1_ReLU", "relu_right", None, ALL_PASS),
    # right on torch.rand's inputs, which are never negative: only signed inputs show it
    ("level1/1_ReLU", "relu_copy", None, {"given": None, "signed": "mismatch", "perturbed": "mismatch",
                                          "smaller": "mismatch"}),
    # right at the problem's sizes only (no mask, whole blocks): the smaller, odd sizes show it
    ("level1/1_ReLU", "relu_fixed_blocks", None, {**ALL_PASS, "smaller": ("nan_mismatch", "mismatch")}),
    # the problem's sizes copied into the answer's module: the copies change with the problem's
    ("level1/1_ReLU", "relu_module_sizes", None, ALL_PASS),
    # a program that runs at no other sizes: its answer is judged at its own, the smaller draw skipped
    ("level1/6_Fixed_view", "fixed_view_right", None, {"given": None, "signed": None, "perturbed": None}),
    ("level1/1_ReLU", "relu_zeroes_input", None, dict.fromkeys(ALL_PASS, "input_mutated")),
    # poisoned (NaN) where the allocator hands back a freed block; where the CPU's malloc gives fresh
    # pages instead (chance), zeros: a mismatch either way
    ("level1/1_ReLU", "relu_uninitialised", None, dict.fromkeys(ALL_PASS, ("nan_mismatch", "mismatch"))),
    ("level1/1_ReLU", "relu_torch", None, dict.fromkeys(ALL_PASS, "guard")),
    ("level1/1_ReLU", "relu_no_model_new", "missing_entry_point", {}),
    ("level1/3_LayerNorm", "layernorm_right", None, ALL_PASS),
    # a weight of ones and a bias of zeros ignored: only the perturbed weights show it
    ("level1/3_LayerNorm", "layernorm_no_affine", None, {"given": None, "signed": None, "perturbed": "mismatch",
                                                         "smaller": "mismatch"}),
    ("level1/4_Softmax", "softmax_right", None, ALL_PASS),
    ("level1/4_Softmax", "softmax_zeros", None, dict.fromkeys(ALL_PASS, "mismatch")),
    ("level1/5_Mean_over_dim", "mean_right", None, ALL_PASS),
    ("level1/5_Mean_over_dim", "mean_wrong_dim", None, dict.fromkeys(ALL_PASS, "mismatch")),
    ("level2/1_Gemm_ReLU_BiasAdd", "gemm_relu_bias_right", None, ALL_PASS),
    ("level2/1_Gemm_ReLU_BiasAdd", "gemm_relu_bias_no_bias", None, dict.fromkeys(ALL_PASS, "mismatch")),
    ("level2/1_Gemm_ReLU_BiasAdd", "gemm_relu_bias_renamed", "weights_mismatch", {}),
    ("level2/2_Gemm_Multiply_LeakyReLU", "gemm_multiply_leaky_right", None, ALL_PASS),
    ("level2/2_Gemm_Multiply_LeakyReLU", "gemm_multiply_leaky_as_relu", None, dict.fromkeys(ALL_PASS, "mismatch")),
    ("level2/3_Conv2d_ReLU_BiasAdd", "conv_relu_bias_right", None, ALL_PASS),
    ("level2/3_Conv2d_ReLU_BiasAdd", "conv_relu_bias_wrong_dim", None, dict.fromkeys(ALL_PASS, "mismatch")),
    # the batch counter's add_ is the module's own bookkeeping, not compute (issue 75); the statistics are
    ("level2/4_Gemm_Scale_BatchNorm", "gemm_scale_batchnorm_right", None, ALL_PASS),
    ("level2/4_Gemm_Scale_BatchNorm", "gemm_scale_batchnorm_torch_stats", None, dict.fromkeys(ALL_PASS, "guard")),
    ("level3/1_MLP_Block", "mlp_block_right", None, ALL_PASS),
    # a random program (dropout in training mode) is refused in words, whatever the answer
    ("broken/dropout", "dropout_linear", "no_tests", {}),
]


@pytest.mark.parametrize("problem, answer, error_kind, draws", CASES, ids=[f"{p}-{a}" for p, a, _, _ in CASES])
def test_each_answer_is_judged_for_its_own_reason(problem, answer, error_kind, draws, tmp_path):
    verdict = bbagent.evaluate_program(PROBLEMS / f"{problem}.py", ANSWERS / f"{answer}.py", root=tmp_path,
                                       device="cpu", seed=7)
    assert verdict.problem_kind == "program" and verdict.op == program_problem(PROBLEMS / f"{problem}.py").key
    assert verdict.error_kind == error_kind, verdict.message
    assert judged_as(verdict) == judged_as(verdict, draws), verdict.message
    assert verdict.passed == (error_kind is None and all(kind is None for kind in draws.values()))
    assert verdict.variants == []


@pytest.mark.gpu
@pytest.mark.parametrize("problem, answer, error_kind, draws", CASES, ids=[f"{p}-{a}" for p, a, _, _ in CASES])
def test_each_answer_is_judged_for_its_own_reason_on_the_gpu(problem, answer, error_kind, draws, tmp_path):
    """The same answers on CUDA (the interpreter above is the CPU twin): the same verdicts."""
    verdict = bbagent.evaluate_program(PROBLEMS / f"{problem}.py", ANSWERS / f"{answer}.py", root=tmp_path,
                                       device="cuda", seed=7)
    assert verdict.environment.gpu and not verdict.environment.interpreter
    assert verdict.error_kind == error_kind, verdict.message
    assert judged_as(verdict) == judged_as(verdict, draws), verdict.message


def judged_as(verdict, expected: dict | None = None) -> dict:
    """Each draw's error kind; with ``expected`` (a kind or a tuple of the kinds allowed), the kind
    found where it is one of those allowed, else what was expected."""
    found = {t.id: t.error_kind for t in verdict.tests}
    if expected is None:
        return found
    return {draw: found.get(draw) if isinstance(kinds, tuple) and found.get(draw) in kinds else kinds
            for draw, kinds in expected.items()}


def test_what_a_failure_says(tmp_path):
    def judged(problem, answer):
        return bbagent.evaluate_program(PROBLEMS / f"{problem}.py", ANSWERS / f"{answer}.py", root=tmp_path,
                                        device="cpu", seed=3)
    zeros = judged("level1/4_Softmax", "softmax_zeros").tests[0]
    # outputs near 7.6e-6 are within float32's absolute tolerance of zero: the scale decides
    assert "in units of the output's RMS" in zeros.message and zeros.mismatch_count == 2 * 131072
    guard = judged("level1/1_ReLU", "relu_torch").tests[0]
    assert "aten.relu.default (line 17)" in guard.message and "only matrix products and convolutions" in guard.message
    assert guard.aten_calls["aten.relu.default"] == 1
    right = judged("level2/1_Gemm_ReLU_BiasAdd", "gemm_relu_bias_right").tests[0]
    assert right.aten_calls["aten.mm.default"] == 1  # the library call, listed
    assert right.aten_call_kinds == {"aten.t.default": "plumbing", "aten.mm.default": "library",
                                     "aten.empty_like.default": "plumbing"}
    counter = judged("level2/4_Gemm_Scale_BatchNorm", "gemm_scale_batchnorm_right").tests[0]
    assert counter.passed and counter.aten_call_kinds["aten.add_.Tensor"] == "bookkeeping"
    stats = judged("level2/4_Gemm_Scale_BatchNorm", "gemm_scale_batchnorm_torch_stats").tests[0]
    assert stats.aten_call_kinds["aten.mean.dim"] == "compute" and stats.aten_call_kinds["aten.mul_.Tensor"] == "compute"
    assert "aten.mean.dim" in stats.message and "aten.add_.Tensor" in stats.message  # the running mean's, float
    renamed = judged("level2/1_Gemm_ReLU_BiasAdd", "gemm_relu_bias_renamed")
    assert 'Missing key(s) in state_dict: "weight", "shift"' in renamed.message


def test_the_smaller_draw_is_the_program_at_other_sizes_where_it_allows_them(tmp_path):
    def judged(problem, answer):
        return bbagent.evaluate_program(PROBLEMS / f"{problem}.py", ANSWERS / f"{answer}.py", root=tmp_path,
                                        device="cpu", seed=5)
    fixed = judged("level1/1_ReLU", "relu_fixed_blocks")
    smaller = next(t for t in fixed.tests if t.id == "smaller")
    assert not fixed.passed and smaller.input == "float32[5, 171]"
    assert smaller.source == "signed inputs at smaller sizes (batch_size 16→5, dim 512→171), the parameters perturbed"
    assert fixed.summary.passed == 3 and fixed.skipped == []
    # the view in the program's forward refuses every shrinking: the draw is skipped, saying why
    view = judged("level1/6_Fixed_view", "fixed_view_right")
    assert view.passed and [t.id for t in view.tests] == ["given", "signed", "perturbed"]
    (skipped,) = view.skipped
    assert skipped.id == "smaller" and skipped.reason.startswith("the program runs at none of the smaller sizes")
    assert "even sizes halved (batch_size 16→8, dim 512→256): RuntimeError: shape '[8, 1024]'" in skipped.reason


def test_the_library_policy_decides_what_may_stay_in_torch(tmp_path):
    right = PROBLEMS / "level2" / "1_Gemm_ReLU_BiasAdd.py", ANSWERS / "gemm_relu_bias_right.py"
    strict = bbagent.evaluate_program(*right, root=tmp_path, device="cpu", seed=1, allow_library="none")
    assert not strict.passed and strict.tests[0].error_kind == "guard" and "aten.mm.default" in strict.tests[0].message
    torch_relu = PROBLEMS / "level1" / "1_ReLU.py", ANSWERS / "relu_torch.py"
    assert bbagent.evaluate_program(*torch_relu, root=tmp_path, device="cpu", seed=1, allow_library="all").passed
    with pytest.raises(bbagent.UsageError, match="none, gemm or all"):
        bbagent.evaluate_program(*right, root=tmp_path, device="cpu", allow_library="most")


def test_eval_problem_as_a_user_runs_it(tmp_path):
    """Exit 0 for a pass, 1 for a failure, 2 with the reason for what is not a problem or not an
    answer file; --json prints the Verdict; never a traceback."""
    def run(*argv):
        return subprocess.run([sys.executable, "-m", "bbagent", "eval", *argv, "--device", "cpu", "--seed", "5"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300,
                              env={"PYTHONPATH": PYTHONPATH, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    relu = str(PROBLEMS / "level1" / "1_ReLU.py")
    done = run("--problem", relu, "--kernel", str(ANSWERS / "relu_right.py"), "--json")
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["verdict"] == "pass" and verdict["problem_kind"] == "program" and len(verdict["tests"]) == 4
    done = run("--problem", relu, "--kernel", str(ANSWERS / "relu_copy.py"))
    assert done.returncode == 1 and "1_ReLU" in done.stdout and "FAIL 1/4 tests passed" in done.stdout
    for argv, words in [(["--problem", str(PROBLEMS / "broken" / "no_model.py"), "--kernel", str(ANSWERS / "relu_right.py")],
                         "not a problem in KernelBench's format"),
                        (["--problem", relu], "needs --kernel ANSWER.py"),
                        (["--problem", relu, "--kernel", "nowhere.py"], "answer file not found: nowhere.py"),
                        (["--problem", relu, "--op", "aten.relu.default", "--kernel", "x.py"], "not allowed with"),
                        (["--problem", relu, "--kernel", str(ANSWERS / "relu_right.py"), "--variants"],
                         "--variants applies to an operator's kernel (--op), not to a program's answer")]:
        done = run(*argv)
        assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr, (argv, done.stderr)


def test_the_float64_run_happens_only_where_a_comparison_needs_it():
    """A problem's outputs can be gigabytes: the float64 reference runs only where the answer is not
    within the tolerance of the float32 one, and then decides (a float32 rounding difference passes)."""
    import torch
    from bbagent.harness.checks.program_compare import compare_outputs
    runs = []

    def truth(value):
        def run():
            runs.append(1)
            return value
        return run
    x = torch.randn(64, 64, dtype=torch.float64)
    exact = x @ x
    expected = (x.float() @ x.float())
    assert compare_outputs(expected, expected.clone(), truth(exact)) is None and runs == []
    off = expected.clone()
    off[0, 0] += 1e-3 * off[0, 0].abs()  # a float32 reference rounding far off at one element (as cuDNN's TF32 may)
    assert compare_outputs(off, exact.float(), truth(exact)) is None and runs == [1]  # the float64 run decides
    wrong = compare_outputs(expected, expected + 1.0, truth(exact))
    assert wrong["error_kind"] == "mismatch" and len(runs) == 2
    shape = compare_outputs(expected, expected[:1], truth(exact))
    assert shape["error_kind"] == "wrong_shape" and len(runs) == 2


def test_a_large_output_is_judged_a_piece_at_a_time(monkeypatch):
    """Above PIECE_ELEMENTS values an output's float64 comparison runs a chunk at a time (a 1.6e9-value
    output ran the H200 out of memory at once); a failure says which piece it is in."""
    import torch
    from bbagent.harness.checks import program_compare
    monkeypatch.setattr(program_compare, "PIECE_ELEMENTS", 100)
    expected = torch.randn(30, 20)
    wrong = expected.clone()
    wrong.view(-1)[250] += 1.0
    failure = program_compare.compare_outputs(expected, wrong, lambda: expected.double())
    assert failure["error_kind"] == "mismatch" and "values 200 to 299 of the output flattened" in failure["message"]
    assert program_compare.compare_outputs(expected, expected.clone(), lambda: None) is None


def test_bench_problem_on_the_cpu_records_correctness_and_says_why_nothing_was_timed(tmp_path):
    """The CPU twin of the GPU timing below: the answer judged, nothing timed, the records say why."""
    result = bbagent.bench(problem=PROBLEMS / "level1" / "1_ReLU.py", kernel=ANSWERS / "relu_right.py", root=tmp_path,
                           device="cpu", seed=3, baseline="eager,inductor", profile=True)
    assert result.verdict.passed and not result.verdict.performance.measured
    assert not result.verdict.performance.profiles  # nothing timed: nothing profiled
    assert "interpreter" in result.verdict.performance.reason
    assert [(r.workload, r.engine, r.runtime_ms_mean) for r in result.records] == \
        [("kernelbench/level1/1_ReLU", "aten", None), ("kernelbench/level1/1_ReLU", "bbagent", None)]
    with pytest.raises(bbagent.UsageError, match="one of them"):
        bbagent.bench("aten.relu.default", problem=PROBLEMS / "level1" / "1_ReLU.py", root=tmp_path)


@pytest.mark.gpu
def test_a_program_is_timed_against_eager_and_torch_compile_and_a_lazy_answer_fails(tmp_path):
    """On the GPU: the answer and eager interleaved on the problem's inputs (L2 flushed, CUDA graphs),
    torch.compile beside them in a child of its own, each side's GPU kernels listed by the profiler
    for the feedback; an answer that stops computing after its first calls passes the draws and
    fails the check after timing."""
    from bbagent.agent.generate.program_prompting import render_program_performance_feedback
    relu = PROBLEMS / "level2" / "1_Gemm_ReLU_BiasAdd.py"
    result = bbagent.bench(problem=relu, kernel=ANSWERS / "gemm_relu_bias_right.py", root=tmp_path, device="cuda",
                           seed=3, baseline="eager,inductor", target_ms=20, profile=True)
    performance = result.verdict.performance
    assert result.verdict.passed and performance.measured, result.verdict.message
    timed, = performance.tests
    assert timed.mode == "graph" and timed.speedup > 0 and timed.aten_source == "measured"
    inductor = timed.baselines["inductor"]
    assert inductor.error is None and inductor.speedup > 0 and inductor.eager_over_inductor > 0, inductor
    assert {r.engine for r in result.records} == {"aten", "inductor", "bbagent"}
    assert inductor.launches and all(k.us > 0 for k in inductor.launches), inductor
    profiled, = performance.profiles
    assert profiled.launches["kernel"] and profiled.launches["eager"] and profiled.files, profiled
    assert any("gemm" in k.name.lower() or "relu" in k.name.lower() for k in profiled.launches["kernel"]), profiled
    assert timed.flops >= 2 * 32 * 64 * 48 and timed.floor_ms > 0 and 0 < timed.roof_fraction < 1.5, timed
    text = render_program_performance_feedback(result.verdict, target=None, target_baseline="inductor")
    assert "GPU kernels per call" in text and "- torch.compile:" in text and "- your ModelNew:" in text, text
    assert "Its floor on this GPU is" in text, text
    lazy = bbagent.bench(problem=PROBLEMS / "level1" / "1_ReLU.py", kernel=ANSWERS / "relu_lazy.py", root=tmp_path,
                         device="cuda", seed=3, target_ms=20)
    assert [t.passed for t in lazy.verdict.tests] == [True, True, True, True]
    assert not lazy.verdict.passed and lazy.verdict.performance.tests[0].error_kind == "timing_mismatch", \
        lazy.verdict.message


def test_a_program_is_admitted_to_a_shared_gpu_by_the_memory_its_tensors_need(tmp_path):
    """A batch shares a GPU by memory; a program has no traces to guess from, so its inputs, outputs
    and weights say it (a KernelBench level-1 activation holds 6.4 GB in and 6.4 GB out: admitted
    beside others at the operators' 3 GiB default, eight of them ran out of an H200's memory)."""
    from bbagent.agent.judging import evaluation_request, program_of
    from bbagent.harness.evaluate import _first_guess
    from bbagent.harness.suite.memory_need import CHILD_BASE_BYTES, COPIES_ALIVE
    problem, facts = program_of(PROBLEMS / "level2" / "1_Gemm_ReLU_BiasAdd.py")
    tensors = sum(v.shape[0] * v.shape[1] for v in facts.inputs + facts.outputs) + \
        sum(math.prod(p.shape) for p in facts.parameters)
    assert facts.device_need() == COPIES_ALIVE * 4 * tensors + CHILD_BASE_BYTES  # all float32
    request = evaluation_request(problem, tmp_path, device="cpu", seed=1, timeout_s=60, facts=facts)
    assert _first_guess(request) == request.expected_bytes == facts.device_need()
    assert _first_guess(evaluation_request(problem, tmp_path, device="cpu", seed=1, timeout_s=60)) == CHILD_BASE_BYTES


def _timed_request(tmp_path, device: str):
    from bbagent.agent.judging import evaluation_request, program_of, timing_options
    problem, facts = program_of(PROBLEMS / "level2" / "1_Gemm_ReLU_BiasAdd.py")
    timing = timing_options(tmp_path, max_shapes=1, target_ms=20, no_cache=False, engines=("eager", "inductor"))
    return evaluation_request(problem, tmp_path, device=device, seed=3, timeout_s=300, timing=timing, facts=facts)


def test_a_programs_torch_compile_baseline_measured_ahead_goes_to_the_timing_cache(tmp_path, monkeypatch):
    """While the model writes its first answer, a program's torch.compile baseline is measured
    (its first timed evaluation's costliest part) and cached; the child's part is the GPU's (below):
    here its events are given, and the bookkeeping judged."""
    from bbagent.harness import after_tests, evaluate
    from bbagent.harness.events import Baseline, ChildEnvironment, Done
    request = _timed_request(tmp_path, "cpu")
    assert evaluate.prepare_suite(request).startswith("not built (a program has no suite; its torch.compile baseline "
                                                      "is measured ahead only where its answers are timed")
    request = _timed_request(tmp_path, "cuda")
    stats = {"median_ms": 2.0, "mean_ms": 2.0, "std_ms": 0.0, "p20_ms": 2.0, "p80_ms": 2.0, "min_ms": 2.0, "reps": 9}
    told = []

    def child(job, base_env, warm, limits):
        told.append(job.work)
        if job.work.cached:
            record = {"input": "get_inputs(): float32[32, 64]", "mode": "inductor-default/graph", "cached": True}
        else:
            record = {"input": "get_inputs(): float32[32, 64]", "mode": "inductor-default/graph", "timing": stats,
                      "eager_over_inductor": 1.25, "launches": [{"name": "triton_poi_0", "us": 2000.0, "per_call": 1}]}
        return [ChildEnvironment(device="cuda", interpreter=False, gpu="NVIDIA H100 80GB HBM3", torch="2.11"),
                Baseline(record=record), Done(total_s=1.0)], None
    monkeypatch.setattr(after_tests, "run_baseline_child", child)
    monkeypatch.setattr(evaluate, "base_env", lambda device, gpu: {"TRITON_CACHE_DIR": str(tmp_path / "triton")})
    assert evaluate.prepare_suite(request) == "built"
    assert told[0].shapes == [{"input": None, "mode": "graph"}] and told[0].cached == []
    rows = request.timing.cache.reference_rows(request.op, "2.11")
    assert [(r["gpu"], r["input"], r["mode"]) for r in rows] == \
        [("NVIDIA H100 80GB HBM3", "get_inputs(): float32[32, 64]", "inductor-default/graph")]
    assert rows[0]["timing"]["eager_over_inductor"] == 1.25 and rows[0]["timing"]["launches"][0]["name"] == "triton_poi_0"
    import torch
    monkeypatch.setattr(torch, "__version__", "2.11")  # the cache's rows are the parent's torch version's
    assert evaluate.prepare_suite(request) == "cached"
    assert told[1].cached == [["NVIDIA H100 80GB HBM3", "get_inputs(): float32[32, 64]", "inductor-default/graph"]]


@pytest.mark.gpu
def test_a_programs_baseline_measured_ahead_is_what_its_first_answer_is_compared_with(tmp_path):
    from bbagent.harness.evaluate import evaluate_kernel, prepare_suite
    request = _timed_request(tmp_path, "cuda")
    assert prepare_suite(request) == "built"
    assert prepare_suite(request) == "cached"
    verdict = evaluate_kernel(request, ANSWERS / "gemm_relu_bias_right.py")
    inductor = verdict.performance.tests[0].baselines["inductor"]
    assert verdict.passed and inductor.source == "cache" and inductor.speedup > 0 and inductor.launches, inductor
