import math

import pytest
import torch

from bbagent.cli import main
from bbagent.harness.inputs import make_tensor, materialize
from bbagent.harness.ops import UnknownOpError, describe, resolve_op
from bbagent.harness.traces import (SHIPPED_TRACES, DtypeRef, TensorSpec, TraceFormatError, consolidate,
                            load_calls, parse_call_line)


def test_resolves_exact_overloads():
    assert resolve_op("aten.relu.default") is torch.ops.aten.relu.default
    assert resolve_op("aten.add.Tensor") is torch.ops.aten.add.Tensor
    info = describe(resolve_op("aten.relu_.default"))
    assert info.is_inplace and not info.is_out
    assert describe(resolve_op("aten.relu.out")).is_out


@pytest.mark.parametrize("name, expected_match", [
    ("aten.relux.default", "aten.relu.default"),
    ("relu", "aten.relu.default"),
    ("aten.relu", "aten.relu.default"),
    ("aten.relu.Tensor", "aten.relu.default"),
])
def test_unknown_ops_suggest_close_matches(name, expected_match):
    with pytest.raises(UnknownOpError) as info:
        resolve_op(name)
    assert expected_match in str(info.value)


def test_cli_unknown_op_is_a_usage_error_without_traceback(tmp_path, capsys):
    kernel = tmp_path / "k.py"
    kernel.write_text("def kernel(self): pass\n")
    code = main(["eval", "--op", "aten.relux.default", "--kernel", str(kernel)])
    err = capsys.readouterr()
    assert code == 2
    text = err.out + err.err
    assert "unknown operator 'aten.relux.default'" in text and "aten.relu.default" in text
    assert "Traceback" not in text


def test_parses_strides_kwargs_and_dtypes():
    call = parse_call_line("aten.addmm.default",
                           "cnt: 3, ((T([4096], f16), T([1024, 128], f16), T([128, 4096], f16, stride=(1, 128))), {})")
    assert call.count == 3
    assert call.args[2] == TensorSpec((128, 4096), "float16", (1, 128))
    call = parse_call_line("aten.sum.dim_IntList", "cnt: 1, ((T([2, 3], f32), [0], True), {'dtype': torch.bool})")
    assert call.args[1:] == ([0], True) and call.kwargs == {"dtype": DtypeRef("bool")}
    call = parse_call_line("aten.x.default", "cnt: 0, ((T([2], b8), -inf, 1e-05), {})")
    assert call.args[1] == -math.inf and call.args[2] == 1e-05


@pytest.mark.parametrize("line", ["cnt: 1, ((os.system('x'),), {})", "cnt: 1, ((T([2], q9),), {})", "nonsense"])
def test_rejects_anything_that_is_not_trace_syntax(line):
    with pytest.raises(TraceFormatError):
        parse_call_line("aten.x.default", line)


def test_shipped_traces_cover_relu_and_parse(tmp_path):
    calls = load_calls("aten.relu.default")
    assert len(calls) > 20
    assert calls == sorted(calls, key=lambda c: -c.count)
    assert "Operator: aten.relu.default" in SHIPPED_TRACES.read_text()


def test_consolidate_sums_counts(tmp_path):
    (tmp_path / "a.txt").write_text("Operator: aten.relu.default\ncnt: 2, ((T([4], f16),), {})\n")
    (tmp_path / "b.txt").write_text("Operator: aten.relu.default\ncnt: 3, ((T([4], f16),), {})\n"
                                    "cnt: 1, ((T([8], f32),), {})\n")
    text = consolidate(tmp_path)
    out = tmp_path / "all.txt"
    out.write_text(text)
    calls = load_calls("aten.relu.default", out)
    assert [(c.count, c.args[0].shape) for c in calls] == [(5, (4,)), (1, (8,))]


def test_materialized_tensors_are_signed_seeded_and_strided():
    spec = TensorSpec((64, 256), "float16", (1, 64))
    a = make_tensor(spec, "cpu", torch.Generator().manual_seed(1))
    b = make_tensor(spec, "cpu", torch.Generator().manual_seed(1))
    c = make_tensor(spec, "cpu", torch.Generator().manual_seed(2))
    assert a.stride() == (1, 64) and a.dtype == torch.float16
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert (a < 0).any() and (a > 0).any() and a.abs().max() > 1
    args = materialize(((TensorSpec((3,), "int64"), 2), {"dtype": DtypeRef("float32")}), "cpu",
                       torch.Generator().manual_seed(0))
    assert args[0][0].dtype == torch.int64 and args[1]["dtype"] is torch.float32


@pytest.mark.parametrize("name", [
    "aten.gather.default", "aten.scatter_add.default", "aten.index_select.default", "aten.index_add.default",
    "aten.embedding.default", "aten.embedding_dense_backward.default", "aten.nll_loss_forward.default",
    "aten.nll_loss_backward.default", "aten._embedding_bag.default",
    "aten._embedding_bag_per_sample_weights_backward.default", "aten.max_pool2d_with_indices_backward.default",
    "aten.index.Tensor", "aten.index_put.default", "aten.index_put_.default", "aten._index_put_impl_.default",
])
def test_trace_index_arguments_are_valid(name):
    from bbagent.harness.suite.build import build_suite
    op = resolve_op(name)
    suite = build_suite(op, "cpu", 0, interpreter=True, cpu_max_numel=1 << 22)
    traces = [c for c in suite.cases if c.source.startswith("trace")]
    assert traces
    for case in traces:
        args, kwargs = case.inputs()
        op(*args, **kwargs)  # raises if an index is out of range


def _index_args(name, args, kwargs=None):
    from bbagent.harness.suite.index_args import make_index_args_valid
    kwargs = kwargs or {}
    make_index_args_valid(resolve_op(name), args, kwargs, torch.Generator().manual_seed(3))
    return args


def test_writes_that_keep_one_value_get_distinct_indices():
    """Colliding writes of index_put (no accumulate), scatter (no reduce), index_copy and
    max_unpool leave an unspecified value: their indices are drawn distinct."""
    big = torch.full((4, 3), -1, dtype=torch.int64)
    _, (rows, cols), _ = _index_args("aten.index_put.default", (torch.zeros(4, 3), [big[0].clone(), big[1].clone()],
                                                                torch.ones(3)))
    assert len(set(zip(rows.tolist(), cols.tolist()))) == 3 and rows.max() < 4 and cols.max() < 3
    _, _, index, _ = _index_args("aten.scatter.src", (torch.zeros(5, 6), 0, torch.zeros(5, 6, dtype=torch.int64),
                                                      torch.ones(5, 6)))
    assert all(len(set(index[:, j].tolist())) == 5 for j in range(6))  # distinct along dim 0
    _, _, index, _ = _index_args("aten.index_copy.default", (torch.zeros(9, 2), 0, torch.zeros(9, dtype=torch.int64),
                                                             torch.ones(9, 2)))
    assert sorted(index.tolist()) == list(range(9))
    _, indices, _ = _index_args("aten.max_unpool2d.default", (torch.ones(2, 3, 4, 4),
                                                              torch.zeros(2, 3, 4, 4, dtype=torch.int64), [8, 8]))
    planes = indices.reshape(6, 16)
    assert all(len(set(p.tolist())) == 16 for p in planes) and int(indices.max()) < 64
    # collisions well defined: independent draws, in range
    _, (rows,), _, _ = _index_args("aten.index_put.default", (torch.zeros(4), [torch.zeros(50, dtype=torch.int64)],
                                                              torch.ones(50), True))
    assert rows.min() >= 0 and rows.max() < 4


def test_index_lists_follow_the_indexed_dims():
    """``index`` with [None, idx] indexes dim 1; a bool mask covers as many dims as it has."""
    x = torch.zeros(3, 7, 5)
    _, (none, index) = _index_args("aten.index.Tensor", (x, [None, torch.full((20,), 99)]))
    assert none is None and 0 <= int(index.min()) and int(index.max()) < 7
    mask = torch.ones(3, 7, dtype=torch.bool)
    _, (kept_mask, last) = _index_args("aten.index.Tensor", (x, [mask, torch.full((4,), 99)]))
    assert kept_mask is mask and int(last.max()) < 5


def test_clone_keeps_broadcast_layouts():
    from bbagent.harness.inputs import clone_value
    spec = TensorSpec((4, 3, 5), "float16", (5, 0, 1))
    original = make_tensor(spec, "cpu", torch.Generator().manual_seed(0))
    copy = clone_value(original)
    assert copy.stride() == (5, 0, 1) and torch.equal(copy, original)
    assert copy.data_ptr() != original.data_ptr()


def test_trace_inputs_with_stride_zero_reach_the_reference():
    from bbagent.harness.inputs import clone_value
    from bbagent.harness.suite.build import build_suite
    op = resolve_op("aten.add.Tensor")
    suite = build_suite(op, "cpu", 0, interpreter=False)
    broadcast = [c for c in suite.cases if c.trace is not None
                 and any(spec.stride and 0 in spec.stride for spec in c.trace.tensor_specs())]
    broadcast.sort(key=lambda c: c.largest_tensor())
    assert len(broadcast) >= 3
    for case in broadcast[:3]:
        args, kwargs = case.inputs()
        op(*clone_value(args), **clone_value(kwargs))


def test_out_overloads_take_the_functional_tests_with_poisoned_out():
    from bbagent.harness.suite.build import build_suite
    from bbagent.harness.variants import functional_sibling, out_arguments
    aten = torch.ops.aten
    assert functional_sibling(aten.add.out) is aten.add.Tensor
    assert functional_sibling(aten.sum.IntList_out) is aten.sum.dim_IntList
    assert out_arguments(aten.max.dim_max) == ["max", "max_values"]
    assert functional_sibling(aten.max.dim_max) is aten.max.dim
    assert functional_sibling(aten.add.Tensor) is None
    suite = build_suite(aten.add.out, "cpu", 0, interpreter=True)
    assert suite.cases and all("out=" in c.description for c in suite.cases)
    args, kwargs = suite.cases[0].inputs()
    expected = aten.add.Tensor(*args, **{k: v for k, v in kwargs.items() if k != "out"})
    assert kwargs["out"].shape == expected.shape and torch.isnan(kwargs["out"]).all()
