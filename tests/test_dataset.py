"""`bbagent batch --dataset` (issue 18): a dataset in the published BackendBench test-suite format,
built here as parquet and as JSON from the shared real-model traces, selects, skips and explains
exactly as specified, and its inputs join the trace tests of their operator."""
import json
import subprocess
import sys

import pytest

from bbagent.agent.batch.selection import DATASET_FIELDS
from conftest import ROOT
from bbagent.harness.traces import iter_blocks

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
    from bbagent.agent.batch.start import Choice, choose_ops
    chosen = choose_ops(Choice(dataset=dataset))
    assert chosen.ops == ["aten.add.Tensor"]
    assert chosen.skipped["aten.mul.Tensor"] == "every input excluded: fails on the reference backend"
    assert chosen.skipped["aten._softmax.default"] == \
        "every input excluded: synthetic inputs (--include-synthetic to run them)"
    rows = _rows()
    assert chosen.extra_traces == {"aten.add.Tensor": [
        {"line": f"cnt: {rows[0]['count']}, {rows[0]['args']}", "timed": True},
        {"line": f"cnt: {rows[1]['count']}, {rows[1]['args']}", "timed": False}]}  # the overhead-dominated canary
    assert chosen.dataset["rows"] == 6 and chosen.dataset["pairs_used"] == 2 and chosen.dataset["canaries"] == 1
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
    from bbagent.agent.batch.start import Choice, choose_ops
    from bbagent.harness.ops import resolve_op
    from bbagent.harness.suite.build import build_suite
    from bbagent.harness.timing.phase import timed_cases
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


def test_a_misspelled_operator_stops_the_batch_naming_its_rows(tmp_path, capsys):
    """Issue 47 (point 8): its rows were skipped with exit 0 and no reason on the console."""
    from bbagent.cli import main
    adds = _trace_args("aten.add.Tensor", "hf_train/AlbertForMaskedLM_training.txt")
    rows = [_row("aten.add.Tensor", adds[0][1], 1), {**_row("aten.add.Tensr", adds[1][1], 1), "uuid": "u-typo"}]
    (tmp_path / "problems.json").write_text(json.dumps(rows))
    code = main(["batch", "--dataset", str(tmp_path / "problems.json"), "--provider", "replay", "--root",
                 str(tmp_path), "--device", "cpu"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "unknown operator 'aten.add.Tensr'" in err and "(rows u-typo)" in err
    assert "aten.add.Tensor" in err and not list(tmp_path.glob("runs/batch-*"))  # the names it could mean; no batch


def test_a_dataset_batch_tests_the_dataset_inputs(tmp_path):
    """End to end: the relu kernel's round Verdict holds the dataset's inputs as tests, and the batch
    says how many ran and why the others did not (the CPU interpreter's cap on trace inputs)."""
    from bbagent.agent.batch.display import event_line
    from bbagent import batch
    rows = [_row("aten.relu.default", f"((T([33, {65 + k}], f32),), {{}})", 2) for k in range(7)]  # no shipped trace
    (tmp_path / "problems.json").write_text(json.dumps(rows))
    heard = []
    source = (ROOT / "tests" / "kernels" / "relu_triton.py").read_text()
    replays = tmp_path / "replays"
    replays.mkdir()
    (replays / "aten.relu.default.json").write_text(json.dumps({"exchanges": [{"response": f"```python\n{source}```"}]}))
    result = batch(dataset=tmp_path / "problems.json", root=tmp_path, provider="replay", replay=str(replays),
                   rounds=1, device="cpu", timeout_s=120, report=lambda event, data: heard.append((event, data)))
    assert result.counts["accepted"] == 1, result.counts
    verdict = json.loads(next((tmp_path / "runs").glob("*aten.relu.default*/round-1/verdict.json")).read_text())
    dataset_tests = [t for t in verdict["tests"] if "dataset-" in t["id"]]  # as relu, and as relu_ and relu.out
    assert dataset_tests and all(t["input"].startswith("(T([33, ") and t["passed"] for t in dataset_tests)
    assert json.loads((result.path / "dataset.json").read_text())["pairs_used"] == 7
    used, = [data for event, data in heard if event == "run_dataset_inputs"]
    assert used["ran"] == len({t["input"].split(" out=")[0] for t in dataset_tests})
    assert used["ran"] + used["not_run"] == 7
    assert used["not_run"] >= 1
    from bbagent.agent.batch.events import RunProgress
    from bbagent.agent.generate.progress import DatasetInputs
    line = event_line(RunProgress(op=used["op"], event=DatasetInputs(ran=used["ran"], not_run=used["not_run"],
                                                                       why_not=used["why_not"])))
    assert f"aten.relu.default: {used['ran']} of the dataset's inputs ran as tests; {used['not_run']} did not" in line
    assert "CPU interpreter runs at most 5 trace inputs" in line


# --- the published format as BackendBench writes it (issue 31) ----------------------------------

SHORT = {"float16": "f16", "float32": "f32", "bfloat16": "bf16", "int64": "i64", "bool": "b8"}


def _serialized(value) -> str:
    """A value as the format's serializer writes it: a tensor as ``T(shape, dtype)``, with its
    strides as a third argument when it is not contiguous; a list item by item; anything else by
    its repr (``inf``, ``torch.float16``, ``device(type='cpu')``)."""
    import torch
    if isinstance(value, torch.Tensor):
        dtype = SHORT[str(value.dtype).removeprefix("torch.")]
        strides = "" if value.is_contiguous() else f", {list(value.stride())}"
        return f"T({list(value.shape)}, {dtype}{strides})"
    if isinstance(value, list):
        return "[" + ", ".join(_serialized(v) for v in value) + "]"
    return repr(value)


def _published(args: tuple, kwargs: dict) -> str:
    positional = "(" + ", ".join(_serialized(a) for a in args) + ",)" if args else "()"
    return "(" + positional + ", {" + ", ".join(f"'{k}': {_serialized(v)}" for k, v in kwargs.items()) + "})"


def _published_rows() -> list[dict]:
    import torch
    transposed = torch.empty(128, 64, dtype=torch.float16).t()  # [64, 128] with strides [1, 64]
    plain = torch.empty(64, 128, dtype=torch.float16)
    base = dict(runnable=True, included_in_benchmark=True, why_excluded=[], is_synthetic=False, runtime_ms=0.1,
                relative_runtime_to_kernel_launch=30.0, is_overhead_dominated_op=False, count=4,
                in_models="m1,m2", in_models_count=2)
    return [
        {**base, "uuid": "u-strided", "op_name": "aten.add.Tensor", "args": _published((transposed, plain), {})},
        {**base, "uuid": "u-kwargs", "op_name": "aten.clamp.default",
         "args": _published((plain,), {"min": -float("inf"), "max": 6.0})},
        {**base, "uuid": "u-dtype", "op_name": "aten._to_copy.default",
         "args": _published((plain,), {"dtype": torch.float32, "device": torch.device("cpu")})},
        {**base, "uuid": "u-excluded", "op_name": "aten.mul.Tensor", "args": _published((plain, plain), {}),
         "included_in_benchmark": "false", "why_excluded": ["too slow on the reference", "flaky"]},
    ]


@pytest.mark.parametrize("form", ["json", "parquet"])
def test_the_published_format_is_read_as_written(tmp_path, form):
    """List ``why_excluded``, strided ``T(...)`` with strides as a third argument, quoted keyword
    names, ``inf``, dtypes and devices by repr, and the string "false": every row is read and used
    or excluded as its fields say, from JSON and from parquet alike."""
    from bbagent.agent.batch.start import Choice, choose_ops
    from bbagent.harness.traces import parse_call_line
    rows = _published_rows()
    assert "[1, 64])" in rows[0]["args"]  # the transposed input is written with its strides
    path = tmp_path / f"problems.{form}"
    if form == "parquet":  # a column has one type: the flag column as text throughout
        import pyarrow as pa
        import pyarrow.parquet as pq
        pq.write_table(pa.Table.from_pylist([{**r, "included_in_benchmark": str(r["included_in_benchmark"]).lower()}
                                             for r in rows]), path)
    else:
        path.write_text(json.dumps(rows))
    chosen = choose_ops(Choice(dataset=path))
    assert chosen.ops == ["aten.add.Tensor", "aten.clamp.default", "aten._to_copy.default"]
    assert chosen.skipped == {"aten.mul.Tensor": "every input excluded: too slow on the reference; flaky"}
    assert chosen.dataset["pairs_used"] == 3 and len(chosen.dataset["skipped_pairs"]) == 1
    strided = parse_call_line("aten.add.Tensor", chosen.extra_traces["aten.add.Tensor"][0]["line"])
    assert [(s.shape, s.stride) for s in strided.tensor_specs()] == [((64, 128), (1, 64)), ((64, 128), None)]
    clamp = parse_call_line("aten.clamp.default", chosen.extra_traces["aten.clamp.default"][0]["line"])
    assert clamp.kwargs == {"min": -float("inf"), "max": 6.0}
    to_copy = parse_call_line("aten._to_copy.default", chosen.extra_traces["aten._to_copy.default"][0]["line"])
    assert to_copy.kwargs["dtype"].name == "float32" and to_copy.kwargs["device"] == "cpu"


def test_a_strided_dataset_input_is_tested_with_its_strides():
    from bbagent.harness.inputs import materialize
    from bbagent.harness.traces import parse_call_line
    call = parse_call_line("aten.add.Tensor", "cnt: 1, ((T([64, 128], f16, [1, 64]), T([64, 128], f16)), {})")
    first = materialize(call.args, "cpu", None)[0]
    assert first.shape == (64, 128) and first.stride() == (1, 64) and not first.is_contiguous()


def test_rows_as_pandas_reads_them_and_malformed_rows_named_by_uuid(tmp_path):
    """A parquet read through pandas gives numpy arrays and numpy booleans; a row that cannot be
    read stops the batch before anything runs, naming its uuid and what is wrong."""
    import numpy as np
    from bbagent.agent.batch.selection import dataset_row
    row = dataset_row({"uuid": "u1", "op_name": " aten.relu.default ", "args": "((T([4], f32),), {})",
                       "why_excluded": np.array(["a", "b"], dtype=object), "included_in_benchmark": np.bool_(False),
                       "runnable": np.True_, "is_synthetic": "False", "count": np.int64(7),
                       "is_overhead_dominated_op": float("nan")})
    assert row["why_excluded"] == "a; b" and row["included_in_benchmark"] is False and row["runnable"] is True
    assert row["is_synthetic"] is False and row["count"] == 7 and row["is_overhead_dominated_op"] is False
    assert row["op_name"] == "aten.relu.default"
    assert dataset_row({"op_name": "aten.relu.default", "args": "x", "why_excluded": []})["why_excluded"] is None
    bad = [{"uuid": "good", "op_name": "aten.relu.default", "args": "((T([4], f32),), {})"},
           {"uuid": "row-with-a-bad-flag", "op_name": "aten.relu.default", "args": "((T([4], f32),), {})",
            "runnable": "maybe"}]
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    done = subprocess.run([sys.executable, "-m", "bbagent", "batch", "--dataset", str(tmp_path / "bad.json"),
                           "--provider", "replay", "--device", "cpu", "--root", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "row 1 (uuid row-with-a-bad-flag) has runnable = 'maybe', which is not true or false" in done.stderr
