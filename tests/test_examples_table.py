"""benchmarks/examples_table.py (issue 49): which operator each worked example is for, each family's
target judged from a row, and the table it prints; one example benched for real (the CPU: tests
only, nothing to judge)."""
import math
import re
import subprocess
import sys

import pytest

from conftest import ROOT, load_benchmark, verdict_of


def test_every_example_names_its_operator():
    table = load_benchmark("examples_table")
    ops = {example.stem: table.operator_of(example) for example in sorted(table.EXAMPLES.glob("*.py"))}
    assert ops["elementwise_binary"] == "aten.mul.Tensor" and ops["matmul"] == "aten.mm.default"
    assert all(op.startswith("aten.") for op in ops.values()) and len(ops) >= 15


def _row(**fields) -> dict:
    return {"passed": True, "timed": 3, "eager": None, "largest_copy_fraction": None, "half_large_eager": None,
            **fields}


@pytest.mark.parametrize("family, fields, met", [
    ("softmax", {"eager": 1.02, "largest_copy_fraction": 0.91}, True),
    ("softmax", {"eager": 0.98, "largest_copy_fraction": 0.99}, False),  # slower than eager
    ("reduction", {"eager": 1.5, "largest_copy_fraction": 0.23}, False),  # far from copy bandwidth
    ("reduction", {"eager": 1.5, "largest_copy_fraction": 0.9, "passed": False}, False),  # wrong
    ("elementwise_unary", {"timed": 0}, None),  # nothing timed (the CPU): not judged
    ("matmul", {"eager": 0.5, "half_large_eager": 0.85}, True),  # judged on fp16/bf16 shapes >= 2048 only
    ("matmul", {"eager": 0.5}, None),  # no such shape timed
    ("convolution", {"eager": 0.49}, False),
    ("scan_sort", {"eager": 0.3}, None),  # no target
])
def test_each_family_is_judged_by_its_own_target(family, fields, met):
    assert load_benchmark("examples_table").target_check(family, _row(**fields))[1] is met


def test_a_row_reads_the_verdict_and_large_half_matmul_shapes_are_picked_out():
    table = load_benchmark("examples_table")
    shape = {"dtype": "float16", "mode": "graph", "speedup": 0.9, "overhead_dominated": False}
    tests = [{"id": "a", "input": "(T([4096, 2048], f16), T([2048, 4096], f16))", **shape},
             {"id": "b", "input": "(T([64, 2048], f16), T([2048, 4096], f16))", **shape, "speedup": 0.2},
             {"id": "c", "input": "(T([4096, 4096], f32), T([4096, 4096], f32))", **shape, "dtype": "float32"}]
    row = table.row_of("matmul", "aten.mm.default", verdict_of(tests), 1.0)
    assert row["half_large_shapes"] == 1 and row["half_large_eager"] == pytest.approx(0.9)
    assert row["timed"] == 3 and row["met"] is True and "| matmul | `aten.mm.default` |" in table.table([row], "GPU")


def test_one_example_benched_on_the_cpu_gives_its_row(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "examples_table.py"), "--families", "loss",
                           "--device", "cpu", "--no-inductor", "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| loss | `aten.mse_loss.default` |" in done.stdout and "timed (not here)" in done.stdout
    assert (tmp_path / "rows.json").is_file() and (tmp_path / "table.md").read_text() == done.stdout
    wrong = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "examples_table.py"), "--families", "nope"],
                           capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 2 and "no example for nope" in wrong.stderr


def test_the_matmul_targets_shapes_are_valid_inputs_and_a_bad_one_is_refused():
    from bbagent.agent.bench.run import check_extra_traces
    from bbagent.agent.errors import UsageError
    examples_table = load_benchmark("examples_table")
    extra = examples_table.extra_inputs("aten.mm.default")
    check_extra_traces(extra)  # every line parses
    assert len(extra["aten.mm.default"]) == len(examples_table.MATMUL_SHAPES)
    assert all(min(examples_table._dims(e["line"])) >= examples_table.MATMUL_MIN_DIM for e in extra["aten.mm.default"])
    assert examples_table.extra_inputs("aten.relu.default") is None
    for op in examples_table.LARGE_SHAPES:  # the copy-bandwidth target's large shapes: valid, about 200 MB
        check_extra_traces(examples_table.extra_inputs(op))
        first = re.search(r"T\(\[([\d, ]*)\]", examples_table.LARGE_SHAPES[op][0]).group(1)
        assert math.prod(int(d) for d in first.split(",")) >= 1 << 25
    with pytest.raises(UsageError, match="not an input of the traces' form"):
        check_extra_traces({"aten.mm.default": [{"line": "((T([2, 2], f16), T([2, 2], f16)), {})"}]})
