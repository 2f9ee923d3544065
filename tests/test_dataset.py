"""`bbagent batch --dataset` (issue 18): a dataset in the published BackendBench test-suite format,
built here as parquet and as JSON from the shared real-model traces, selects, skips and explains
exactly as specified, and its inputs join the trace tests of their operator."""
import json
import subprocess
import sys

import pytest

from agent.batch.selection import DATASET_FIELDS
from conftest import ROOT
from harness.traces import iter_blocks

TRACES = ROOT.parent / "shared" / "traces"


def _trace_args(op: str, model_file: str) -> list[tuple[int, str]]:
    """(count, arguments) of ``op`` in one shared model trace."""
    path = TRACES / model_file
    assert path.is_file(), f"the shared traces are missing: {path} (CI keeps ../shared beside the checkout)"
    found = []
    for name, line in iter_blocks(path.read_text()):
        if name == op:
            head, _, args = line.partition(",")
            found.append((int(head.split(":")[1]), args.strip()))
    assert found, f"{op} not in {path}"
    return found


def _row(op: str, args: str, count: int, **flags) -> dict:
    row = {"uuid": f"{op}:{args}"[:60], "op_name": op, "args": args, "runnable": True, "included_in_benchmark": True,
           "why_excluded": None, "is_synthetic": False, "runtime_ms": 0.5, "relative_runtime_to_kernel_launch": 40.0,
           "is_overhead_dominated_op": False, "count": count, "in_models": "AlbertForMaskedLM", "in_models_count": 1}
    row.update(flags)
    assert set(row) == set(DATASET_FIELDS)
    return row


def _rows() -> list[dict]:
    adds = _trace_args("aten.add.Tensor", "hf_train/AlbertForMaskedLM_training.txt")
    (softmax_count, softmax_args), = _trace_args("aten._softmax.default", "hf_train/AlbertForMaskedLM_training.txt")
    return [
        _row("aten.add.Tensor", adds[0][1], adds[0][0]),
        _row("aten.add.Tensor", adds[1][1], adds[1][0], is_overhead_dominated_op=True,
             relative_runtime_to_kernel_launch=1.1),
        _row("aten.add.Tensor", adds[2][1], adds[2][0], included_in_benchmark=False,
             why_excluded="inputs too large for the benchmark GPU"),
        _row("aten._softmax.default", softmax_args, 0, is_synthetic=True),
        _row("aten.mul.Tensor", adds[0][1], 3, runnable=False, included_in_benchmark=False,
             why_excluded="fails on the reference backend"),
        _row("aten.made_up_op.default", adds[0][1], 1),
        _row("aten.add.Tensor", "((T([2, 2], f16), __import__('os')), {})", 1),  # not the trace format
    ]


@pytest.fixture(params=["parquet", "json"])
def dataset(request, tmp_path):
    rows = _rows()
    path = tmp_path / f"backend_bench_problems.{request.param}"
    if request.param == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        path.write_text(json.dumps(rows))
    return path


def test_a_dataset_selects_skips_and_explains(dataset):
    from agent.batch.start import Choice, choose_ops
    chosen = choose_ops(Choice(dataset=dataset))
    assert chosen.ops == ["aten.add.Tensor"]
    assert chosen.skipped["aten.mul.Tensor"] == "every input excluded: fails on the reference backend"
    assert chosen.skipped["aten._softmax.default"] == \
        "every input excluded: synthetic inputs (--include-synthetic to run them)"
    assert chosen.skipped["aten.made_up_op.default"].startswith("not an operator here")
    rows = _rows()
    assert chosen.extra_traces == {"aten.add.Tensor": [
        {"line": f"cnt: {rows[0]['count']}, {rows[0]['args']}", "timed": True},
        {"line": f"cnt: {rows[1]['count']}, {rows[1]['args']}", "timed": False}]}  # the overhead-dominated canary
    assert chosen.dataset["rows"] == 7 and chosen.dataset["pairs_used"] == 2 and chosen.dataset["canaries"] == 1
    assert [(p["op"], p["why"]) for p in chosen.dataset["skipped_pairs"][:3]] == [
        ("aten.add.Tensor", "inputs too large for the benchmark GPU"),
        ("aten._softmax.default", "synthetic inputs (--include-synthetic to run them)"),
        ("aten.mul.Tensor", "fails on the reference backend")]
    unreadable = chosen.dataset["skipped_pairs"][3]
    assert len(chosen.dataset["skipped_pairs"]) == 4 and unreadable["why"].startswith("arguments bbagent cannot read")
    with_synthetic = choose_ops(Choice(dataset=dataset, include_synthetic=True))
    assert with_synthetic.ops == ["aten.add.Tensor", "aten._softmax.default"]
    assert with_synthetic.extra_traces["aten._softmax.default"][0]["line"].startswith("cnt: 0, ")


def test_dataset_inputs_join_the_trace_tests_and_canaries_are_never_timed(dataset):
    from agent.batch.start import Choice, choose_ops
    from harness.ops import resolve_op
    from harness.suite.build import build_suite
    from harness.timing.phase import timed_cases
    extra = choose_ops(Choice(dataset=dataset)).extra_traces
    suite = build_suite(resolve_op("aten.add.Tensor"), "cpu", 0, interpreter=False, extra_traces=extra)
    added = [case for case in suite.cases if case.id.startswith("dataset-")]
    shipped = [case for case in suite.cases if case.id.startswith("trace-")]
    # both inputs are also in the shipped consolidated traces, so they are tested once, as traces
    assert shipped and not added
    novel = {"aten.add.Tensor": [{"line": "cnt: 2, ((T([3, 5], f32), T([3, 5], f32)), {})", "timed": True},
                                 {"line": "cnt: 2, ((T([7, 5], f32), T([5], f32)), {})", "timed": False}]}
    suite = build_suite(resolve_op("aten.add.Tensor"), "cpu", 0, interpreter=False, extra_traces=novel)
    added = {case.description: case for case in suite.cases if case.id.startswith("dataset-")}
    assert set(added) == {"(T([3, 5], f32), T([3, 5], f32))", "(T([7, 5], f32), T([5], f32))"}
    canary = next(case for case in added.values() if not case.timed)
    assert "correctness only" in canary.source
    timed = timed_cases(suite.cases, {case.id for case in suite.cases}, most=3)
    asked = next(case for case in added.values() if case.timed)
    assert asked in timed and canary not in timed and len(timed) == 3  # the dataset's shape first, then spread
    assert canary not in timed_cases(suite.cases, {case.id for case in suite.cases}, most=10**6)


def test_bad_datasets_are_usage_errors_that_say_why(tmp_path):
    (tmp_path / "rows.csv").write_text("op_name,args\n")
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "no_args.json").write_text(json.dumps([{"op_name": "aten.relu.default"}]))
    for name, says in (("missing.parquet", "no such file"), ("rows.csv", "expected a .parquet or .json"),
                       ("broken.json", "not readable JSON"), ("no_args.json", "row 0 has no args")):
        done = subprocess.run([sys.executable, "-m", "bbagent", "batch", "--dataset", str(tmp_path / name),
                               "--provider", "replay", "--device", "cpu", "--root", str(tmp_path)],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr, (name, done.stderr)


def test_a_dataset_batch_tests_the_dataset_inputs(tmp_path):
    """End to end: the relu kernel's round Verdict holds the dataset's input as a test."""
    from bbagent import batch
    rows = [_row("aten.relu.default", "((T([33, 65], f32),), {})", 2)]  # an input no shipped trace has
    (tmp_path / "problems.json").write_text(json.dumps(rows))
    source = (ROOT / "tests" / "kernels" / "relu_triton.py").read_text()
    replays = tmp_path / "replays"
    replays.mkdir()
    (replays / "aten.relu.default.json").write_text(json.dumps({"exchanges": [{"response": f"```python\n{source}```"}]}))
    result = batch(dataset=tmp_path / "problems.json", root=tmp_path, provider="replay", replay=str(replays),
                   rounds=1, device="cpu", timeout_s=120)
    assert result.counts["accepted"] == 1, result.counts
    verdict = json.loads(next((tmp_path / "runs").glob("*aten.relu.default*/round-1/verdict.json")).read_text())
    dataset_tests = [t for t in verdict["tests"] if t["id"].startswith("dataset-")]
    assert [t["input"] for t in dataset_tests] == ["(T([33, 65], f32),)"] and dataset_tests[0]["passed"]
    assert json.loads((result.path / "dataset.json").read_text())["pairs_used"] == 1
