import torch

from harness.compare import compare


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
