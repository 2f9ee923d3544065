"""Per-shape dispatch (issue 34): two kernel files merged with their names kept apart, the rule
fitted from the parts' timings, the dispatcher evaluated by the real harness (CPU, Triton
interpreter), and the loop composing, evaluating and keeping one (scripted provider and timings)."""
import json
import re
import types

import pytest

from bbagent.agent.generate.dispatch import DispatchPlan, Rule, compose, description_bytes, plan
from bbagent.agent.generate.merge import CannotMerge, Part, import_identity, merge
from bbagent.agent.generate.population import Member
from bbagent.agent.generate.progress import NewBest
from conftest import ROOT
from test_optimise import answer, run_agent, scripted_verdict

KERNELS = ROOT / "tests" / "kernels"

FIRST = '''"""part one"""
from __future__ import annotations
import math as m
SCALE = 2


def helper(x):
    return x * SCALE


class Box:
    SCALE = 100
    twice = SCALE * 2

    def kernel(self, x=SCALE):  # a method named like the entry, defaulting to the class's SCALE
        return x


def kernel(x):
    SCALE = -1  # a local: hides the global within this function only
    return helper(x) + SCALE + Box().kernel() + Box.twice + int(m.sqrt(4))
'''
SECOND = '''import math
from math import sqrt as m
SCALE = 3
values = [SCALE for SCALE in range(2)]


def helper(x):
    return x + SCALE


def kernel(x):
    adjust = lambda SCALE: SCALE * 10
    return [helper(v) for v in x] + [adjust(1), int(m(9)), len(values)]
'''


def _module(merged, host: str = "") -> types.ModuleType:
    module = types.ModuleType("merged")
    exec(compile("\n".join(merged.future + [host] + merged.bodies), "merged", "exec"), module.__dict__)
    return module


def test_merged_parts_keep_their_own_globals_and_locals():
    merged = merge([Part(FIRST, "_round1"), Part(SECOND, "_round2")], {})
    assert merged.future == ["from __future__ import annotations"]
    assert merged.renamed[0] == {"Box": "Box_round1", "SCALE": "SCALE_round1", "helper": "helper_round1",
                                 "kernel": "kernel_round1", "m": "m_round1"}  # 'm' is bound to two things
    assert merged.renamed[1]["m"] == "m_round2" and "math" not in merged.renamed[1]
    module = _module(merged)
    # part one: helper 5*2, local SCALE -1, the method's default 100 (the class's), twice 200, sqrt 2
    assert module.kernel_round1(5) == 10 - 1 + 100 + 200 + 2
    # part two: its own helper and SCALE, the lambda's parameter, its import alias, its comprehension
    assert module.kernel_round2([1, 2]) == [4, 5, 10, 3, 2]
    assert module.SCALE_round1 == 2 and module.SCALE_round2 == 3 and not hasattr(module, "SCALE")
    assert "# a local: hides the global within this function only" in merged.bodies[0]  # comments kept


def test_names_the_host_binds_are_kept_apart_and_what_cannot_be_renamed_is_refused():
    merged = merge([Part("import numpy as torch\nkernel = 1\n", "_r1")], import_identity("import torch"))
    assert merged.renamed[0] == {"kernel": "kernel_r1", "torch": "torch_r1"}
    with pytest.raises(CannotMerge, match="global"):
        merge([Part("N = 1\ndef kernel():\n    global N\n    N = 2\n", "_r1")], {})
    with pytest.raises(CannotMerge, match="'\\*'"):
        merge([Part("from math import *\ndef kernel():\n    return pi\n", "_r1")], {})


def test_description_bytes_sum_every_tensor_of_the_call():
    assert description_bytes("(T([4, 8], f16), T([8], f32, stride=(2,)), 2) {alpha=1}") == (4 * 8 * 2 + 8 * 4,
                                                                                           "float16")
    assert description_bytes("([T([3], bf16), T([], i64)],)") == (3 * 2 + 8, "bfloat16")
    assert description_bytes("(3,)") == (0, None)


def _member(round: int, times_us: dict, gpu: str = "H200", source: str = "def kernel(x):\n    return x\n"):
    tests = [{"id": f"t{i}", "input": shape, "candidate": {"median_ms": us / 1e3, "mean_ms": us / 1e3, "std_ms": 0.0,
                                                           "min_ms": us / 1e3, "reps": 5}}
             for i, (shape, us) in enumerate(times_us.items())]
    verdict = types.SimpleNamespace(performance=types.SimpleNamespace(gpu=gpu, tests=[
        types.SimpleNamespace(input=t["input"], candidate=types.SimpleNamespace(median_ms=t["candidate"]["median_ms"]))
        for t in tests]), geomean_speedup=lambda: 1.0)
    return Member(round, source, verdict)


def test_the_rule_sends_each_size_to_the_faster_part_and_is_tried_only_where_it_gains():
    small, large = "(T([1024], f32),)", "(T([1048576], f32),)"
    short_rows, long_rows = _member(1, {small: 5.0, large: 100.0}), _member(2, {small: 10.0, large: 50.0})
    found = plan(short_rows, long_rows)
    assert found.rules == (Rule(None, 131072, 1, 2),)  # midway, geometrically, between 4 KiB and 4 MiB
    assert found.predicted_gain == pytest.approx(2 ** 0.5)  # sqrt(5*50) against sqrt(10*50) and sqrt(5*100)
    assert plan(short_rows, _member(3, {small: 6.0, large: 120.0})) is None  # one part is faster everywhere
    assert plan(short_rows, _member(4, {small: 10.0, large: 50.0}, gpu="A100")) is None  # times do not compare
    # per dtype where the dtypes disagree: large float16 calls are faster with the first part
    half = "(T([4194304], f16),)"
    by_dtype = plan(_member(5, {small: 5.0, large: 100.0, half: 10.0}),
                    _member(6, {small: 10.0, large: 50.0, half: 40.0}))
    assert by_dtype.rules == (Rule(None, -1, 5, 5), Rule("float32", 131072, 5, 6))
    assert by_dtype.predicted_gain == pytest.approx(2 ** (1 / 3))


def _correct_part(round: int, path, gpu="cpu") -> Member:
    return Member(round, path.read_text(), types.SimpleNamespace(geomean_speedup=lambda: None,
                                                                    performance=types.SimpleNamespace(gpu=gpu)))


@pytest.mark.parametrize("passes", [True, False])
def test_a_composed_dispatcher_passes_the_suite_when_both_parts_do(tmp_path, passes):
    """The real harness (CPU, Triton interpreter) on a dispatcher between two relus, calls up to
    4 KiB going to the first: passes with two correct parts, every test run; with a wrong second
    part (negatives kept) it fails, and only on calls larger than the threshold, so both parts
    really serve."""
    from bbagent.harness.evaluate import EvaluationRequest, evaluate_kernel
    second = (KERNELS / "relu_autotuned.py").read_text()
    if not passes:
        second = second.replace("tl.where(x < 0, tl.zeros_like(x), x)", "x")
        assert "tl.store(y_ptr + offsets, x, mask=mask)" in second
    (tmp_path / "second.py").write_text(second)
    parts = (_correct_part(1, KERNELS / "relu_triton.py"), _correct_part(2, tmp_path / "second.py"))
    source = compose(DispatchPlan(parts, (Rule(None, 4096, 1, 2),), 1.5), "aten.relu.default", "run-x")
    kernel_file = tmp_path / "kernel.py"
    kernel_file.write_text(source)
    verdict = evaluate_kernel(EvaluationRequest.of("aten.relu.default", device="cpu", seed=0), kernel_file)
    alone = evaluate_kernel(EvaluationRequest.of("aten.relu.default", device="cpu", seed=0), KERNELS / "relu_triton.py")
    assert verdict.passed is passes, verdict.message
    if passes:
        assert verdict.summary.total == alone.summary.total and verdict.summary.not_run == 0
        return
    failed = [t for t in verdict.tests if t.passed is False]
    assert failed and all(description_bytes(t.input)[0] > 4096 for t in failed)
    assert any(t.passed and 0 < description_bytes(t.input)[0] <= 4096 for t in verdict.tests)


def dispatching_verdict(op, kernel_path, profile: bool = True):
    """The scripted evaluator, with a dispatcher's speed per shape the better of its parts' (what
    the real one measures of a good rule)."""
    source = kernel_path.read_text()
    if "DISPATCH_RULES" not in source:
        return scripted_verdict(op, kernel_path)
    speeds = [[float(x) for x in found.split(",")] for found in re.findall(r"speeds ([\d.,]+)", source)]
    best = ",".join(str(max(pair)) for pair in zip(*speeds))
    scripted = kernel_path.with_name("scripted.py")
    scripted.write_text(f"# speeds {best}\n")
    verdict = scripted_verdict(op, scripted)
    return verdict.model_copy(update={"kernel": verdict.kernel.model_copy(update={"path": str(kernel_path)})})


def test_the_loop_composes_a_dispatcher_and_keeps_it_when_it_beats_both(tmp_path, monkeypatch):
    import test_optimise
    monkeypatch.setattr(test_optimise, "scripted_verdict", dispatching_verdict)
    outcome, events = run_agent(tmp_path, [answer("speeds 2,0.5"), answer("speeds 0.5,2"), answer("speed 0.4")],
                                rounds=3, target=None, target_roof=0)
    assert outcome.status == "accepted" and "dispatcher between the kernels of rounds 1 and 2" in outcome.message
    run = tmp_path / "runs" / "run-1"
    state = json.loads((run / "run.json").read_text())
    [record] = state["dispatchers"]  # round 3's kernel wins nowhere: no second pair
    assert record["parts"] == [1, 2] and record["outcome"] == "pass" and record["kept"] is True
    assert record["rules"] == ["calls of any other dtype: up to 4096 bytes of tensors round 1, above round 2"]
    accepted = tmp_path / "generated_kernels" / "aten.relu.default"
    kernel = (accepted / "kernel.py").read_text()
    assert kernel == (run / "round-2" / "dispatcher" / "kernel.py").read_text()
    assert "def kernel_round1(self):" in kernel and "def kernel_round2(self):" in kernel
    meta = json.loads((accepted / "meta.json").read_text())
    assert [(p["round"], p["file"]) for p in meta["composed_of"]] == [(1, "runs/run-1/round-1/kernel.py"),
                                                                       (2, "runs/run-1/round-2/kernel.py")]
    assert meta["performance"]["summary"]["geomean_speedup"] == 2.0 and meta["round"] == 2
    assert "composed by bbagent" in (accepted / "README.md").read_text()
    assert NewBest(round=2, speedup=2.0, replaces=1, dispatcher_of=[1, 2]) in events
    assert "bbagent then composed a dispatcher between your kernels of rounds 1 and 2" in (
        run / "round-3" / "prompt.md").read_text()


def test_no_dispatcher_is_composed_when_asked_not_to(tmp_path, monkeypatch):
    import test_optimise
    monkeypatch.setattr(test_optimise, "scripted_verdict", dispatching_verdict)
    outcome, _ = run_agent(tmp_path, [answer("speeds 2,0.5"), answer("speeds 0.5,2")], rounds=2, target=None,
                           target_roof=0, dispatch=False)
    assert "round 1" in outcome.message
    assert json.loads((tmp_path / "runs" / "run-1" / "run.json").read_text())["dispatchers"] == []


def test_every_correct_corpus_kernel_and_prompt_example_merges_with_itself_and_imports(tmp_path):
    """Kernels as libraries and models write them (decorators, autotune configs, helpers, constants,
    heuristics lambdas): two copies merged apart import, each with its own entry and Triton kernels."""
    import importlib.util
    corpus = json.loads((KERNELS / "corpus.json").read_text())
    entries = corpus["entries"]
    files = sorted({KERNELS / e["kernel"] for e in entries if e.get("expect") == "pass"})
    files += sorted((ROOT / "prompts" / "examples").glob("*.py"))
    assert len(files) > 30
    host = {"kernel": ("host", "kernel")} | import_identity("import torch")
    for number, path in enumerate(files):
        merged = merge([Part(path.read_text(), "_r1"), Part(path.read_text(), "_r2")], host)
        module_file = tmp_path / f"merged_{number}.py"
        module_file.write_text("\n".join(merged.future + ["import torch"] + merged.bodies))
        spec = importlib.util.spec_from_file_location(f"merged_{number}", module_file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        first, second = (getattr(module, renamed["kernel"]) for renamed in merged.renamed)
        assert callable(first) and callable(second) and first is not second, path.name
        assert not hasattr(module, "kernel"), path.name
