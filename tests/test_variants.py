"""Operator variants: one functional kernel serves the in-place and out= overloads of its family,
each overload tested on its own tests (derived from the functional ones), on CPU under the
Triton interpreter. Kernels wrong in one calling convention fail on that overload."""
import json
from types import SimpleNamespace
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bbagent.cli import main
from bbagent.harness.adapters import AdapterError, serving
from bbagent.harness.evaluate import EvaluationRequest, evaluate_kernel
from bbagent.harness.ops import resolve_op
from bbagent.harness.suite.build import build_suite

KERNELS = Path(__file__).parent / "kernels"
ROOT = Path(__file__).resolve().parent.parent


def family_verdict(functional: str, kernel: str, members: list[str], device: str = "cpu"):
    from bbagent.harness.problem import served_problem
    return evaluate_kernel(EvaluationRequest.of(served_problem(functional, [functional, *members]), device=device, seed=7),
                    KERNELS / kernel)


FAMILIES = [
    ("aten.relu.default", "relu_triton.py", ["aten.relu_.default", "aten.relu.out"]),
    ("aten.add.Tensor", "add_broadcast.py", ["aten.add_.Tensor", "aten.add.out"]),
    # a reduction: aten has no in-place sum, so sum serves its out= overload only ...
    ("aten.sum.dim_IntList", "sum_dim.py", ["aten.sum.IntList_out"]),
    # ... and a reduction along a dimension with all three conventions
    ("aten.cumsum.default", "cumsum_dim.py", ["aten.cumsum_.default", "aten.cumsum.out"]),
]


@pytest.mark.parametrize("functional, kernel, members", FAMILIES)
def test_one_functional_kernel_passes_every_variant(functional, kernel, members):
    check_family_verdict(family_verdict(functional, kernel, members), functional, members)


def check_family_verdict(verdict, functional: str, members: list[str]) -> None:
    assert verdict.passed, verdict.message
    rows = {row.op: row for row in verdict.variants}
    assert list(rows) == [functional] + members
    assert rows[functional].served_by == "kernel" and verdict.kernel_for == functional
    for member in members:
        row = rows[member]
        assert row.served_by == "adapter" and row.ok and row.passed == row.planned > 0
    tests = verdict.tests
    assert {t.overload for t in tests} == set(rows)
    assert all(t.id.startswith(t.overload.removeprefix("aten.") + "/") for t in tests if t.overload != functional)
    out_ids = [t.id for t in tests if t.overload.endswith("out")]
    for layout in ("out_empty", "out_wrong_shape", "out_strided"):
        assert any(f"/{layout}-" in i for i in out_ids), layout
    inplace = [t for t in tests if rows[t.overload].convention == "inplace"]
    if inplace:  # self non-contiguous in some in-place tests, as in the functional ones
        assert any("stride=" in t.input.split(")")[0] for t in inplace)


def test_inplace_kernel_returning_a_new_tensor_fails_on_the_inplace_overload():
    verdict = evaluate_kernel(EvaluationRequest.of("aten.add_.Tensor", device="cpu", seed=7), KERNELS / "add_inplace_returns_new.py")
    assert verdict.verdict == "fail"
    failed = [t for t in verdict.tests if t.passed is False]
    assert failed and {t.overload for t in failed} == {"aten.add_.Tensor"}
    assert verdict.failure_groups[0].error_kind == "mutation_mismatch"
    assert {t.error_kind for t in failed} <= {"mutation_mismatch", "wrong_alias"}
    assert "'self' is written by this overload (schema: aten::add_.Tensor(Tensor(a!) self" in \
        verdict.failure_groups[0].example.message


def test_out_kernel_ignoring_out_fails_on_the_out_overload():
    verdict = evaluate_kernel(EvaluationRequest.of("aten.add.out", device="cpu", seed=7), KERNELS / "add_out_ignores_out.py")
    assert verdict.verdict == "fail"
    failed = [t for t in verdict.tests if t.passed is False]
    assert {t.overload for t in failed} == {"aten.add.out"}
    kinds = {t.error_kind for t in failed}
    assert "mutation_mismatch" in kinds and kinds <= {"mutation_mismatch", "wrong_alias"}
    mismatch = next(t for t in failed if t.error_kind == "mutation_mismatch")
    assert mismatch.message.startswith("'out' is written by this overload")


def test_inplace_suite_is_the_functional_tests_aten_accepts_in_place():
    suite = build_suite(resolve_op("aten.add_.Tensor"), "cpu", 0, interpreter=True)
    functional = build_suite(resolve_op("aten.add.Tensor"), "cpu", 0, interpreter=True)
    derived = [c for c in suite.cases if c.source.endswith(", in place")]
    assert derived and len(derived) < len(functional.cases)
    refused = [s for s in suite.skipped if "aten.add_.Tensor rejects this input" in s["reason"]]
    # a [5, 1] self cannot take the broadcast [5, 5] result in place
    assert any(s["input"].startswith("(T([5, 1]") for s in refused)
    for case in derived[:10]:
        args, kwargs = case.inputs()
        torch.ops.aten.add_.Tensor(*args, **kwargs)  # aten accepts every derived case
    ids = [c.id for c in suite.cases]
    assert len(ids) == len(set(ids))


def test_out_suite_preallocates_out_in_every_layout():
    suite = build_suite(resolve_op("aten.relu.out"), "cpu", 0, interpreter=True)
    layouts = {}
    for case in suite.cases:
        if case.dtype in ("float32", "float16"):  # poisoned with NaN
            layouts.setdefault(case.out_layout, []).append(case)
    assert set(layouts) == {"result", "empty", "wrong_shape", "strided"}
    for layout, cases in layouts.items():
        args, kwargs = cases[-1].inputs()
        out, expected = kwargs["out"], torch.relu(args[0])
        if layout == "empty":
            assert out.shape == (0,)
        elif layout == "wrong_shape":
            assert out.shape != expected.shape and out.isnan().all()
        else:
            assert out.shape == expected.shape and out.isnan().all()
            assert out.is_contiguous() == (layout == "result")


def test_adapters_write_through_strides_and_resize_out():
    relu = resolve_op("aten.relu.default")
    inplace = serving(lambda x: x.clamp(min=0), relu, resolve_op("aten.relu_.default"))
    wide = torch.randn(4, 6)
    self = wide[:, ::2]
    expected = self.clamp(min=0)
    assert inplace(self) is self and torch.equal(self, expected) and torch.equal(wide[:, ::2], expected)
    out_variant = serving(lambda x: x.clamp(min=0), relu, resolve_op("aten.relu.out"))
    out = torch.empty(0)
    x = torch.randn(3, 5)
    assert out_variant(x, out=out) is out and torch.equal(out, x.clamp(min=0))
    with pytest.raises(AdapterError, match="only the functional overload"):
        serving(lambda x: x, resolve_op("aten.relu_.default"), relu)
    with pytest.raises(AdapterError):
        serving(lambda x: x, relu, resolve_op("aten.add_.Tensor"))


def test_generate_for_an_inplace_overload_asks_for_the_computation_once(tmp_path, capsys):
    """``generate --op aten.relu_.default`` asks for aten.relu.default (the shipped replay), and the
    accepted kernel serves the whole family, each overload tested; eval and loading find it."""
    assert main(["generate", "--op", "aten.relu_.default", "--provider", "replay", "--root", str(tmp_path),
                 "--device", "cpu", "--seed", "3"]) == 0
    printed = capsys.readouterr().err
    assert "asking for aten.relu.default once" in printed
    folder = tmp_path / "generated_kernels" / "aten.relu.default"
    meta = json.loads((folder / "meta.json").read_text())
    family = ["aten.relu.default", "aten.relu_.default", "aten.relu.out"]
    assert meta["written_for"] == "aten.relu.default" and meta["serves"] == family
    assert [v["op"] for v in meta["variants"]] == family and all(v["ok"] for v in meta["variants"])
    assert "`aten.relu_.default` (bbagent's adapter copies the functional result into self" in \
        (folder / "README.md").read_text()
    run = json.loads(next((tmp_path / "runs").glob("*/run.json")).read_text())
    assert run["serves"] == family
    first_prompt = next((tmp_path / "runs").glob("*/round-1/prompt.md")).read_text()
    assert "Write a Triton kernel that implements the PyTorch operator `aten.relu.default`" in first_prompt
    assert "## The same kernel serves aten.relu_.default, aten.relu.out" in first_prompt
    capsys.readouterr()
    assert main(["prompt", "--op", "aten.relu_.default", "--device", "cpu"]) == 0
    assert capsys.readouterr().out == first_prompt  # prompt prints what generate sent

    assert main(["kernels", "--json", "--root", str(tmp_path)]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["serves"] == family and listed["kernel"] == str(folder / "kernel.py")
    # eval of any overload of the family finds the accepted kernel and serves it through the adapter
    assert main(["eval", "--op", "aten.relu.out", "--root", str(tmp_path), "--device", "cpu", "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["kernel_for"] == "aten.relu.default" and verdict["variants"][0]["served_by"] == "adapter"
    # bench of the in-place overload measures it as served (here on CPU: correctness only)
    assert main(["bench", "--op", "aten.relu_.default", "--root", str(tmp_path), "--device", "cpu", "--json"]) == 0
    bench = json.loads(capsys.readouterr().out)
    assert json.loads((Path(bench["run_dir"]) / "verdict.json").read_text())["kernel_for"] == "aten.relu.default"
    assert main(["eval", "--op", "aten.sum.IntList_out", "--root", str(tmp_path), "--device", "cpu"]) == 2
    assert "no accepted kernel serves aten.sum.IntList_out" in capsys.readouterr().err


def test_eval_refuses_a_variant_kernel_for_the_whole_family(capsys):
    code = main(["eval", "--op", "aten.relu_.default", "--kernel", str(KERNELS / "relu_inplace.py"), "--variants",
                 "--device", "cpu"])
    assert code == 2
    assert "a kernel written for aten.relu_.default cannot serve aten.relu.default" in capsys.readouterr().err


def test_registered_kernel_serves_every_overload_of_its_family(tmp_path):
    """``bbagent.enable`` installs one accepted kernel for its whole family. The kernel here
    computes abs (not relu) on purpose, so the results prove the dispatch reached it."""
    folder = tmp_path / "generated_kernels" / "aten.relu.default"
    folder.mkdir(parents=True)
    (folder / "kernel.py").write_text("def kernel(self):\n    return self.abs()\n")
    (folder / "meta.json").write_text(json.dumps({"op": "aten.relu.default", "written_for": "aten.relu.default",
                                                  "serves": ["aten.relu.default", "aten.relu_.default",
                                                             "aten.relu.out"]}))
    script = (
        "import sys, torch\n"
        "from pathlib import Path\n"
        "import bbagent\n"
        "enabled = bbagent.enable(Path(sys.argv[1]), device='cpu', include_unreviewed=True, include_slower=True)\n"
        "done = list(enabled.served)\n"
        "x = torch.tensor([-1.0, 2.0, -3.0])\n"
        "assert torch.equal(torch.relu(x), x.abs()), 'functional'\n"
        "y = x.clone(); r = torch.relu_(y)\n"
        "assert r is y and torch.equal(y, x.abs()), 'in-place'\n"
        "out = torch.empty(0); torch.ops.aten.relu.out(x, out=out)\n"
        "assert torch.equal(out, x.abs()), 'out='\n"
        "print(','.join(done))\n")
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "aten.relu.default,aten.relu_.default,aten.relu.out"


def test_float64_rejudging_of_written_arguments_and_dtype_arguments():
    """The float64 run behind a re-judged mismatch must really be float64 (a ``dtype=float16``
    argument is lifted too), and an out= argument gets the same reduction allowance as the result."""
    from bbagent.harness.checks.float64_judge import Float64Run
    x = torch.randn(64, 32).half()
    scan = Float64Run(torch.ops.aten.cumsum.default, ((x, 1), {"dtype": torch.float16}))
    assert scan.truth().truth.dtype == torch.float64
    out = torch.empty(1, 32, dtype=torch.half)
    total = Float64Run(torch.ops.aten.sum.IntList_out, ((x, [0], True), {"out": out}))
    assert total.is_reduction() and total.truth(scaled=True).scale is not None
    assert torch.equal(total.truth("out", scaled=True).scale, total.truth(scaled=True).scale)
    assert total.truth("self", scaled=True).scale is None  # an argument that is not returned


def test_an_overload_without_tests_of_its_own_is_not_served():
    from bbagent.agent.review.record import served_overloads
    from bbagent.harness.verdict import Variant
    verdict = SimpleNamespace(variants=[
        Variant(op="aten.uniform.default", convention="functional", served_by="kernel", ok=False, planned=0,
                passed=0, failed=0),
        Variant(op="aten.uniform_.default", convention="inplace", served_by="adapter", ok=True, planned=14,
                passed=14, failed=0)])
    assert served_overloads(verdict, "aten.uniform.default") == ["aten.uniform_.default"]
    assert served_overloads(SimpleNamespace(variants=[]), "aten.relu.default") == ["aten.relu.default"]


def test_what_generate_asks_for():
    from bbagent.agent.generate.posed import posed_operator
    family = ("aten.relu.default", "aten.relu_.default", "aten.relu.out")
    asked = posed_operator("aten.relu.out")
    assert (asked.requested, asked.key, asked.serves, asked.family) == \
        ("aten.relu.out", "aten.relu.default", family, "elementwise_unary")
    asked = posed_operator("aten.relu_.default", exact_overload=True)
    assert (asked.key, asked.serves, asked.also_serves) == ("aten.relu_.default", ("aten.relu_.default",), [])
    # no functional sibling (it writes running statistics too): asked for and served as itself
    asked = posed_operator("aten.rrelu_with_noise_.default")
    assert (asked.key, asked.serves) == ("aten.rrelu_with_noise_.default", ("aten.rrelu_with_noise_.default",))
