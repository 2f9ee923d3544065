import torch

from bbagent.harness.checks.compare import Exact, compare


def test_equal_within_dtype_tolerance_passes():
    x = torch.randn(100, dtype=torch.float16)
    assert compare(x, x.clone()) is None
    assert compare(x.float(), x.float() * (1 + 1e-7)) is None


def test_mismatch_reports_count_errors_and_first_elements():
    expected = torch.zeros(4, 5)
    actual = expected.clone()
    actual[1, 2] = 0.5
    actual[3, 4] = -1.0
    failure = compare(expected, actual)
    assert failure["error_kind"] == "mismatch"
    assert failure["mismatch_count"] == 2 and failure["numel"] == 20
    assert failure["mismatches"][0] == {"index": [1, 2], "expected": 0.0, "actual": 0.5}
    assert failure["max_abs_error"] == 1.0
    assert "index [1, 2]" in failure["message"]


def test_nan_is_not_a_wildcard():
    expected = torch.tensor([1.0, float("nan"), 3.0])
    assert compare(expected, torch.tensor([1.0, float("nan"), 3.0])) is None
    assert compare(expected, torch.tensor([1.0, 2.0, 3.0]))["error_kind"] == "nan_mismatch"
    assert compare(torch.tensor([1.0, 2.0]), torch.tensor([float("nan"), 2.0]))["error_kind"] == "nan_mismatch"


def test_infinities_must_match_in_sign():
    assert compare(torch.tensor([float("inf")]), torch.tensor([float("inf")])) is None
    assert compare(torch.tensor([float("inf")]), torch.tensor([float("-inf")]))["error_kind"] == "mismatch"
    assert compare(torch.tensor([1e30]), torch.tensor([float("inf")]))["error_kind"] == "mismatch"


def test_shape_dtype_structure_and_integers():
    assert compare(torch.zeros(2, 3), torch.zeros(3, 2))["error_kind"] == "wrong_shape"
    assert compare(torch.zeros(2), torch.zeros(2, dtype=torch.float16))["error_kind"] == "wrong_dtype"
    assert compare((torch.zeros(1), torch.zeros(1)), torch.zeros(1))["error_kind"] == "wrong_structure"
    assert compare(torch.tensor([1, 2]), torch.tensor([1, 3]))["error_kind"] == "mismatch"
    assert compare(torch.zeros(1), 0.0)["error_kind"] == "wrong_type"


def test_unspecified_values_compare_metadata_only():
    import torch as t
    expected = t.empty(4, 6)
    assert compare(expected, t.full((4, 6), 7.0), mode="metadata") is None
    assert compare(expected, t.empty(6, 4).t(), mode="metadata")["error_kind"] == "wrong_strides"
    assert compare(expected, t.empty(4, 6, dtype=t.float16), mode="metadata")["error_kind"] == "wrong_dtype"


def test_random_values_compare_by_distribution():
    g = torch.Generator().manual_seed(0)
    expected = torch.rand(10000, generator=g)
    assert compare(expected, torch.rand(10000, generator=g), mode="distribution") is None
    failure = compare(expected, torch.rand(10000, generator=g) * 0.5, mode="distribution")
    assert failure["error_kind"] == "distribution_mismatch" and "Kolmogorov-Smirnov" in failure["message"]
    assert compare(expected, torch.zeros(10000) + 0.5, mode="distribution")["error_kind"] == "distribution_mismatch"


def test_random_values_with_the_right_moments_but_the_wrong_shape_fail():
    g = torch.Generator().manual_seed(1)
    normal = torch.randn(20000, generator=g)
    uniform_like_normal = (torch.rand(20000, generator=g) - 0.5) * 12 ** 0.5  # mean 0, std 1
    failure = compare(normal, uniform_like_normal, mode="distribution")
    assert failure["error_kind"] == "distribution_mismatch"


def test_heavy_tailed_draws_pass_against_each_other():
    """Cauchy draws have no mean or std; a moment test would reject a correct kernel."""
    for seed in range(20):
        g = torch.Generator().manual_seed(seed)
        a, b = torch.empty(5000).cauchy_(generator=g), torch.empty(5000).cauchy_(generator=g)
        assert compare(a, b, mode="distribution") is None, seed


def test_random_values_keep_the_inputs_nan_positions():
    expected = torch.rand(1000)
    expected[3] = float("nan")
    actual = torch.rand(1000)
    assert compare(expected, actual, mode="distribution")["error_kind"] == "nan_mismatch"
    actual[3] = float("nan")
    assert compare(expected, actual, mode="distribution") is None


def test_discrete_random_values_compare_by_distribution():
    g = torch.Generator().manual_seed(2)
    coin = torch.bernoulli(torch.full((4000,), 0.5), generator=g)
    assert compare(coin, torch.bernoulli(torch.full((4000,), 0.5), generator=g), mode="distribution") is None
    biased = torch.bernoulli(torch.full((4000,), 0.7), generator=g)
    assert compare(coin, biased, mode="distribution")["error_kind"] == "distribution_mismatch"


def test_value_modes_from_op_tags():
    from bbagent.harness.ops import value_mode
    aten = torch.ops.aten
    assert value_mode(aten.relu.default) == "exact"
    assert value_mode(aten.empty_like.default) == "metadata"
    assert value_mode(aten.bernoulli.p) == "distribution"


def test_long_reductions_are_judged_against_float64_no_looser_than_aten():
    torch.manual_seed(0)
    x = torch.randn(64, 100_000) * 10
    expected, exact = x.sum(1), x.double().sum(1)
    sequential = x.cumsum(1)[:, -1]  # a correct kernel that adds in another order
    assert compare(expected, sequential)["error_kind"] == "mismatch"  # per-dtype tolerance alone fails it
    assert compare(expected, sequential, exact=Exact(exact)) is None
    wrong = compare(expected, sequential * 1.001, exact=Exact(exact))
    assert wrong["error_kind"] == "mismatch" and "float64" in wrong["message"]


def test_elementwise_ops_get_no_reduction_allowance():
    y = torch.randn(1000).half() * 100
    exact = torch.relu(y.double())
    # aten's own relu is exact to the last bit, so nothing is loosened
    assert compare(torch.relu(y), torch.relu(y) + 0.01, exact=Exact(exact))["error_kind"] == "mismatch"


def test_reductions_allow_float32_accumulation_error_and_overflow_boundaries():
    # scale sqrt(n) * sum|terms| = 1e5: float32 accumulation may be off by up to 2 * 2**-24 * 1e5
    expected, truth, scale = torch.tensor([0.5]).half(), torch.tensor([0.5]).double(), torch.tensor([1e5]).double()
    reordered = torch.tensor([0.505]).half()
    assert compare(expected, reordered, exact=Exact(truth))["error_kind"] == "mismatch"  # not a reduction
    assert compare(expected, reordered, exact=Exact(truth, scale)) is None
    assert compare(expected, torch.tensor([0.53]).half(), exact=Exact(truth, scale))["error_kind"] == "mismatch"
    # exact value 65510: aten rounded to inf, the candidate to 65504; both are right
    big = torch.tensor([65510.0], dtype=torch.float64)
    assert compare(torch.tensor([float("inf")]).half(), torch.tensor([65504.0]).half(),
                   exact=Exact(big, big)) is None
    assert compare(torch.tensor([float("inf")]).half(), torch.tensor([60000.0]).half(),
                   exact=Exact(big, big))["error_kind"] == "mismatch"


def test_aten_overflow_where_float64_is_finite_is_aten_error():
    # cuBLAS's reduced-precision split-K float16 matmul can return inf/NaN for finite results
    expected = torch.tensor([float("nan"), float("inf"), 1.0]).half()
    truth = torch.tensor([1200.0, -3000.0, 1.0], dtype=torch.float64)
    right = torch.tensor([1200.0, -3000.0, 1.0]).half()
    assert compare(expected, right)["error_kind"] == "nan_mismatch"  # without the float64 run
    assert compare(expected, right, exact=Exact(truth)) is None
    assert compare(expected, expected.clone(), exact=Exact(truth)) is None  # aten's own value passes
    wrong = compare(expected, torch.tensor([1300.0, -3000.0, 1.0]).half(), exact=Exact(truth))
    assert wrong["error_kind"] == "mismatch" and wrong["mismatches"][0]["expected"] == 1200.0
    # where the exact value overflows float16, aten's NaN (inf - inf in its partial sums) or -inf passes
    nan, overflow = torch.tensor([float("nan")]).half(), Exact(torch.tensor([-1e6], dtype=torch.float64))
    assert compare(nan, torch.tensor([float("-inf")]).half(), exact=overflow) is None
    assert compare(nan, torch.tensor([float("inf")]).half(), exact=overflow)["error_kind"] == "mismatch"
    assert compare(nan, torch.tensor([-1.0]).half(), exact=overflow)["error_kind"] == "mismatch"
    # a NaN the exact value has too stays a NaN the candidate must match
    assert compare(nan, torch.tensor([1.0]).half(),
                   exact=Exact(torch.tensor([float("nan")], dtype=torch.float64)))["error_kind"] == "nan_mismatch"


def test_positive_long_sums_with_a_blocked_float32_loop_pass_and_float16_accumulators_do_not():
    from bbagent.harness.checks.float64_judge import Float64Run
    torch.manual_seed(0)
    x = torch.rand(8, 40_000) * 10  # positive terms: the worst case for a sequential accumulator
    op = torch.ops.aten.sum.dim_IntList
    run = Float64Run(op, ((x, [1]), {}))
    assert run.is_reduction()
    exact = run.truth(scaled=True)
    assert run.truth().scale is None  # unscaled unless asked
    assert torch.allclose(exact.scale, x.double().sum(1) * 200)  # sqrt(40_000) * sum|terms|
    blocks = x.view(8, 2500, 16).sum(2)
    blocked = torch.zeros(8)
    for i in range(blocks.shape[1]):  # what a Triton kernel looping over BLOCK=16 chunks does
        blocked = blocked + blocks[:, i]
    expected = op(x, [1])
    assert compare(expected, blocked, exact=exact) is None
    half_acc = torch.zeros(8, dtype=torch.float16)
    for i in range(blocks.shape[1]):
        half_acc = half_acc + blocks[:, i].half()
    assert compare(expected, half_acc.float(), exact=exact)["error_kind"] == "mismatch"


def test_tolerance_used_is_the_passing_error_as_a_fraction_of_the_tolerance():
    from bbagent.harness.checks.compare import TOLERANCES, tolerance_used
    atol, rtol = TOLERANCES[torch.float32]
    expected = torch.tensor([0.0, 1.0, 2.0])
    assert tolerance_used(expected, expected.clone()) == 0.0
    actual = expected + torch.tensor([0.0, 0.5 * (atol + rtol), 0.0])
    assert abs(tolerance_used(expected, actual) - 0.5) < 0.02   # the float32 sum rounds the offset
    assert tolerance_used(torch.tensor([1, 2]), torch.tensor([1, 2])) is None   # integers: exact, no fraction
    assert tolerance_used((expected, 3), (actual, 3)) == tolerance_used(expected, actual)


def test_the_float64_run_converts_positional_dtype_arguments():
    """Issue 32: _softmax_backward_data takes input_dtype positionally; the float64 re-judgement
    must turn it to float64 too, or the run is never made (and was silently skipped)."""
    from bbagent.harness.checks.float64_judge import Float64Run
    op = torch.ops.aten._softmax_backward_data.default
    y = torch.softmax(torch.randn(4, 7), dim=1).half()
    g = torch.randn(4, 7).half()
    run = Float64Run(op, ((g, y, 1, torch.float16), {}))
    assert run.truth() is not None and run.truth().truth.dtype == torch.float64 and run.unavailable is None
    exact = op(g.double(), y.double(), 1, torch.float64)
    assert torch.equal(run.truth().truth, exact)
    _, args, _ = run._run_on(lambda t: t.to(torch.float64))
    assert args[3] == torch.float64  # CUDA refuses float64 inputs with input_dtype float16; the CPU does not


def test_a_float64_run_that_cannot_be_made_is_said():
    from bbagent.harness.checks.float64_judge import Float64Run, judged

    def op(x):
        if x.dtype == torch.float64:
            raise RuntimeError("no float64 kernel for this op here")
        return x * 2
    x = torch.tensor([1.0, 2.0])
    failure = judged(op(x), op(x) + 1, "exact", Float64Run(op, ((x,), {})))
    assert failure["error_kind"] == "mismatch"
    assert "no float64 run of the op could be made to re-judge it (RuntimeError: no float64 kernel" in failure["message"]


def test_the_allowance_quoted_is_the_one_at_the_reported_element():
    """Issue 32: the message quoted the largest allowance over the whole tensor (4.79e+119 for exp)."""
    expected = torch.tensor([1.0, 1e30])
    truth = torch.tensor([1.0, 1e30], dtype=torch.float64)
    failure = compare(expected, torch.tensor([1.5, 1e30]), exact=Exact(truth))
    assert failure["error_kind"] == "mismatch" and "at the first element reported, 1 +- 1.13e-05" in failure["message"]


def test_the_reduction_allowance_is_computed_only_where_the_float64_value_alone_does_not_pass():
    """The runs on ones and on magnitudes cost as much as the float64 run: a result within the
    dtype tolerance of the float64 value passes without them; one that needs the allowance gets it."""
    from bbagent.harness.checks.float64_judge import Float64Run, judged
    torch.manual_seed(0)
    op = torch.ops.aten.sum.dim_IntList
    x = torch.rand(8, 40_000) * 10
    run = Float64Run(op, ((x, [1]), {}))
    correctly_rounded = x.double().sum(1).float()
    assert judged(correctly_rounded + 1.0, correctly_rounded, "exact", run) is None  # aten off, the kernel not
    assert run.ran and not run.scaled
    # at ~2e5 the float32 tolerance is ~0.27 and the allowance of a 40_000-term sum ~4.8
    run = Float64Run(op, ((x, [1]), {}))
    assert judged(correctly_rounded, correctly_rounded + 1.0, "exact", run) is None and run.scaled
    run = Float64Run(op, ((x, [1]), {}))
    failure = judged(correctly_rounded, correctly_rounded + 50.0, "exact", run)
    assert failure["error_kind"] == "mismatch" and run.scaled and "float64 run" in failure["message"]


def test_the_finite_shortcut_decides_as_the_full_rules(monkeypatch):
    """Issue 33: ``compare_tensors`` with a float64 truth first tries a shortcut for all-finite
    values. Wherever the shortcut passes a result the full rules must pass it too, and where every
    value is finite the two must agree; checked over mismatches near the tolerance, aten errors that
    widen the allowance, reduction scales, and NaN/inf sprinkled in."""
    from bbagent.harness.checks import compare as module
    full_rules = lambda *args: False  # noqa: E731 - the shortcut declines: the full rules decide
    gen = torch.Generator().manual_seed(7)
    agreed = shortcut_passes = 0
    for trial in range(400):
        dtype = (torch.float16, torch.bfloat16, torch.float32)[trial % 3]
        atol, rtol = module.TOLERANCES[dtype]
        truth = torch.randn(64, generator=gen, dtype=torch.float64) * 10 ** (trial % 5 - 2)
        aten = (truth + torch.randn(64, generator=gen, dtype=torch.float64) * rtol * (trial % 4)).to(dtype)
        actual = (truth + torch.randn(64, generator=gen, dtype=torch.float64) * rtol * (trial % 7)).to(dtype)
        scale = truth.abs() * (trial % 2) * 100 if trial % 6 == 0 else None
        finite = trial % 5 != 0
        if not finite:  # one NaN or infinity, in aten's result, the kernel's or the float64 run's
            where = int(torch.randint(0, 64, (1,), generator=gen))
            (aten, actual, truth)[(trial // 5) % 3][where] = (float("nan"), float("inf"), -float("inf"))[trial % 3]
        exact = module.Exact(truth, scale)
        decided = module.compare_tensors(aten, actual, exact=exact) is None
        shortcut = module._all_finite_and_allowed(aten.double(), actual.double(), truth, scale, atol, rtol)
        with monkeypatch.context() as patched:
            patched.setattr(module, "_all_finite_and_allowed", full_rules)
            full = module.compare_tensors(aten, actual, exact=exact) is None
        assert decided == full, trial
        if shortcut:
            shortcut_passes += 1
            assert full, trial
        if finite:
            assert shortcut == full, trial
            agreed += 1
    assert shortcut_passes > 50 and agreed > 250  # both outcomes were exercised


def test_the_first_comparison_is_not_reported_where_float64_rejudges_it():
    """The report of aten's comparison (counts, first elements) is only built where no float64
    re-judgement follows; ``judged`` still reports every failure with its numbers."""
    from bbagent.harness.checks.float64_judge import Float64Run, judged
    from bbagent.harness.checks.compare import UNREPORTED, compare
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16)
    assert compare(x, x + 1, report=False) == UNREPORTED
    assert compare(x.int(), x.int() + 1, report=False)["mismatch_count"] == 3  # integers: not re-judged
    failure = judged(x * 2, x * 2 + 1, "exact", Float64Run(torch.ops.aten.mul.Tensor, ((x, 2.0), {})))
    assert failure["error_kind"] == "mismatch" and failure["mismatch_count"] == 3 and failure["mismatches"]
    assert "float64 run" in failure["message"]


class _CudnnSeen(torch.utils._python_dispatch.TorchDispatchMode):
    """Records ``torch.backends.cudnn.enabled`` at each aten call; refuses convolutions without
    cuDNN when ``refuse`` (as aten does where it has no kernel of its own for an input)."""

    def __init__(self, refuse: bool = False):
        super().__init__()
        self.seen, self.refuse = [], refuse

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append((func.__name__, torch.backends.cudnn.enabled))
        if self.refuse and not torch.backends.cudnn.enabled:
            raise NotImplementedError("no kernel of aten's own here")
        return func(*args, **(kwargs or {}))


def test_convolution_references_run_without_cudnn_and_fall_back_to_it():
    from bbagent.harness.checks.reference import reference_call
    conv = torch.ops.aten.convolution.default
    x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    args = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    expected = conv(*args)
    with _CudnnSeen() as mode:
        got = reference_call(conv, args, {})
        reference_call(torch.ops.aten.relu.default, (x,), {})
    assert torch.equal(got, expected)
    assert mode.seen == [("convolution.default", False), ("relu.default", True)]
    assert torch.backends.cudnn.enabled  # put back
    with _CudnnSeen(refuse=True) as mode:
        got = reference_call(conv, args, {})
    assert torch.equal(got, expected)
    assert mode.seen == [("convolution.default", False), ("convolution.default", True)]


def test_one_rule_for_a_reference_that_fails(monkeypatch):
    """Issue 48 (point 4): a CUDA error in the float64 reference was swallowed (the run only marked
    'unavailable') while one in aten's reference ended the evaluation. Now every reference call
    follows one rule: out of memory is raised for the retry, a CUDA error is the reference's fault
    (ReferenceFault), anything else is the reference refusing the input."""
    import pytest
    import torch

    from bbagent.harness.checks import float64_judge
    from bbagent.harness.checks.float64_judge import Float64Run
    from bbagent.harness.checks.reference import ReferenceFault, reference_refused
    from bbagent.harness.ops import resolve_op
    op = resolve_op("aten.add.Tensor")
    inputs = ((torch.ones(3, dtype=torch.float16), torch.ones(3, dtype=torch.float16)), {})

    def fails_with(exc):
        def call(*args, **kwargs):
            raise exc
        monkeypatch.setattr(float64_judge, "reference_call", call)
    fails_with(RuntimeError("CUDA error: an illegal memory access was encountered"))
    with pytest.raises(ReferenceFault, match="float64 reference of aten.add.Tensor hit a CUDA error"):
        Float64Run(op, inputs).truth()
    fails_with(NotImplementedError("no float64 kernel"))
    run = Float64Run(op, inputs)
    assert run.truth() is None and run.unavailable.startswith("NotImplementedError")
    with pytest.raises(torch.OutOfMemoryError):
        reference_refused(torch.OutOfMemoryError("CUDA out of memory"), "aten's reference")
    assert reference_refused(ValueError("bad input"), "aten's reference") is None
