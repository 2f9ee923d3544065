"""Integer extremes (issue 75): every integer dtype an operator's tests hold gets tests with values
past float32's and float64's exact range and at its own range's ends, in the arguments aten accepts
them in; a kernel computing integers through a float type fails them with ``integer_through_float``.
The corpus (tests/kernels/corpus.json) judges relu, add and bitwise_and kernels through float32 and
float64; here, the values drawn and the cases derived."""
import pytest
import torch

from bbagent.harness.suite.build import build_suite
from bbagent.harness.suite.integer_extremes import TIERS, diagnosed, tier_of, with_extremes
from bbagent.harness.inputs import tensors_in

TIER = {tier.name: tier for tier in TIERS}


def extremes_of(op) -> list:
    return [case for case in build_suite(op, "cpu", 0, interpreter=True).cases if tier_of(case) is not None]


def values(dtype, tier: str) -> set[int]:
    return set(TIER[tier].values(torch.iinfo(dtype)))


def test_each_tier_holds_what_its_float_cannot():
    int32 = values(torch.int32, "past_float32")
    assert {2 ** 24 + 1, -(2 ** 24 + 1), 2 ** 31 - 1, -2 ** 31} <= int32
    assert all(abs(v) > 2 ** 24 for v in int32)
    assert all(float(torch.tensor(v, dtype=torch.float32)) != v for v in int32 if abs(v) < 2 ** 31 - 1)
    int64_low, int64_high = values(torch.int64, "past_float32"), values(torch.int64, "past_float64")
    assert 2 ** 53 - 1 in int64_low and all(abs(v) < 2 ** 53 for v in int64_low)
    assert {2 ** 53 + 1, 2 ** 63 - 1, -2 ** 63} <= int64_high and all(abs(v) > 2 ** 53 for v in int64_high)
    assert {255, 0, 128} <= values(torch.uint8, "range_ends")  # 128 + 128 wraps to 0
    assert {127, -128} <= values(torch.int8, "range_ends")
    applies = {dtype: [t.name for t in TIERS if t.applies(torch.iinfo(dtype))]
               for dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)}
    assert applies == {torch.int8: ["range_ends"], torch.int16: ["range_ends"], torch.int32: ["past_float32"],
                       torch.int64: ["past_float32", "past_float64"], torch.uint8: ["range_ends"]}


def test_every_other_element_changes_and_each_tensor_starts_elsewhere():
    small = torch.arange(-6, 6, dtype=torch.int64).reshape(3, 4)[:, ::2]  # non-contiguous
    tier_values = TIER["past_float64"].values(torch.iinfo(torch.int64))
    first, second = with_extremes(small, tier_values, 0), with_extremes(small, tier_values, 1)
    assert first.is_contiguous() and first.shape == small.shape
    assert torch.equal(first.flatten()[1::2], small.flatten()[1::2])  # the rest keep their small values
    assert all(int(v) in tier_values for v in first.flatten()[0::2])
    assert torch.equal(second.flatten()[0::2], small.flatten()[0::2])  # the second tensor: the other places
    zero_dim = with_extremes(torch.tensor(3), tier_values, 1)
    assert int(zero_dim) in tier_values


@pytest.mark.parametrize("name, arguments", [
    ("bitwise_left_shift.Tensor", {"self", "other"}), ("cumsum.default", {"self"}),
    # index operators: the data gets the extremes, the index keeps valid values
    ("index_select.default", {"self"}), ("scatter.src", {"self", "src"}),
])
def test_operators_get_a_case_per_integer_dtype_and_tier(name, arguments):
    packet, overload = name.split(".")
    op = getattr(getattr(torch.ops.aten, packet), overload)
    cases = extremes_of(op)
    tiers = {(tier_of(case).name, case.dtype) for case in cases}
    assert {("past_float32", "int32"), ("past_float32", "int64"), ("past_float64", "int64")} <= tiers
    for case in cases:
        changed = {part.split(" ")[0] for part in case.description.rsplit("[", 1)[1].split(":")[0].split(", ")}
        assert changed <= arguments, (case.description, arguments)
        if "index" in name or "gather" in name or "scatter" in name:
            index = case.args[2]
            assert int(index.abs().max()) < 2 ** 16  # the index was left as drawn


def test_an_index_only_operator_gets_none():
    assert extremes_of(torch.ops.aten.embedding.default) == []  # its integers are indices: aten refuses extremes


class _Case:
    source = "edge:integer_extremes_past_float32 (from opinfo-3)"


def test_a_kernel_wrong_through_float32_is_named_and_one_wrong_otherwise_is_not():
    x = with_extremes(torch.arange(-20, 20, dtype=torch.int32), TIER["past_float32"].values(torch.iinfo(torch.int32)), 0)
    expected = torch.relu(x)
    mismatch = {"error_kind": "mismatch", "message": "output: values differ"}
    through = torch.relu(x.to(torch.float32)).to(torch.int32)
    named = diagnosed(torch.ops.aten.relu.default, _Case(), dict(mismatch), expected, through, ((x,), {}))
    assert named["error_kind"] == "integer_through_float" and "through float32" in named["message"]
    identity = diagnosed(torch.ops.aten.relu.default, _Case(), dict(mismatch), expected, x.clone(), ((x,), {}))
    assert identity == mismatch  # wrong for another reason: no diagnosis
    class Ordinary:
        source = "opinfo:relu"
    assert diagnosed(torch.ops.aten.relu.default, Ordinary(), dict(mismatch), expected, through, ((x,), {})) == mismatch
    assert tensors_in(named) == []
