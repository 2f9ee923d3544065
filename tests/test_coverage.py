import json

from bbagent.cli import main
from bbagent.harness.traces import load_calls


def ops_json(capsys, *argv):
    assert main(["ops", "--json", *argv]) == 0
    return {row["op"]: row for row in json.loads(capsys.readouterr().out)}


def test_ops_lists_counts_family_and_reasons(capsys):
    rows = ops_json(capsys)
    assert len(rows) > 600
    relu = rows["aten.relu.default"]
    assert relu["opinfo_samples"] > 0 and relu["trace_tests"] > 20
    assert relu["family"] == "elementwise_unary" and relu["value_mode"] == "exact"
    assert {"float16", "float32", "bfloat16"} <= set(relu["dtypes"])
    assert "nn.functional.linear" in rows["aten.addmm.default"]["opinfos"]
    assert rows["aten.bernoulli.default"]["value_mode"] == "distribution"
    assert rows["aten.empty_like.default"]["value_mode"] == "metadata"
    removed = rows["aten.upsample_nearest2d_backward.vec"]
    assert removed["why_none"].startswith("not an overload in this torch")
    assert all(r["why_none"] or r["opinfo_samples"] or r["trace_tests"] or r["tested_via"] for r in rows.values())
    # in-place and out= overloads run their functional sibling's tests (in-place ones their own traces too)
    assert rows["aten.add.out"]["tested_via"] == "aten.add.Tensor"
    assert rows["aten.sum.IntList_out"]["tested_via"] == "aten.sum.dim_IntList"
    assert rows["aten.relu_.default"]["tested_via"] == "aten.relu.default"
    assert rows["aten.relu_.default"]["trace_tests"] > 100
    assert rows["aten.uniform_.default"]["tested_via"] is None  # no functional tests: its own OpInfo samples


def test_ops_counts_tested_inplace_and_out_overloads(capsys):
    from bbagent.harness.coverage import variant_counts
    rows = list(ops_json(capsys).values())
    counts = variant_counts(rows)
    assert counts["inplace"]["listed"] > 100 and counts["out"]["listed"] > 300
    for kind in ("inplace", "out"):
        assert counts[kind]["tested"] == counts[kind]["listed"]
        assert 0 < counts[kind]["via_functional"] <= counts[kind]["tested"]
    assert main(["ops"]) == 0
    assert f"in-place: {counts['inplace']['tested']} of {counts['inplace']['listed']} tested" in capsys.readouterr().out


def test_ops_suite_filter(capsys):
    traces = ops_json(capsys, "--suite", "traces")
    assert all(r["trace_tests"] > 0 for r in traces.values())
    assert "aten.relu_.default" in traces and len(traces) < 200


def test_renamed_trace_overloads_are_mapped():
    calls = load_calls("aten.sum.dim_IntList")
    assert len(calls) > 400 and all(c.op == "aten.sum.dim_IntList" for c in calls)


def test_ops_show_each_overloads_variant_family(capsys):
    """The family (functional, in-place, out=) comes from the schemas, the same for every member."""
    rows = ops_json(capsys)
    relu = {"functional": "aten.relu.default", "inplace": "aten.relu_.default", "out": ["aten.relu.out"],
            "serves": ["aten.relu.default", "aten.relu_.default", "aten.relu.out"]}
    assert rows["aten.relu.default"]["variants"] == rows["aten.relu_.default"]["variants"] == relu
    assert rows["aten.relu.out"]["variants"] == relu
    add = rows["aten.add_.Tensor"]["variants"]
    assert (add["functional"], add["inplace"], add["out"]) == ("aten.add.Tensor", "aten.add_.Tensor", ["aten.add.out"])
    assert rows["aten.add.Scalar"]["variants"]["out"] == ["aten.add.Scalar_out"]
    total = rows["aten.sum.dim_IntList"]["variants"]
    assert total["inplace"] is None and total["out"] == ["aten.sum.IntList_out"]
    # an in-place op whose sibling writes more than self (running statistics) serves only itself
    assert rows["aten.rrelu_with_noise_.default"]["variants"]["serves"] == ["aten.rrelu_with_noise_.default"]
    assert rows["aten.upsample_nearest2d_backward.vec"]["variants"] is None  # gone from this torch
