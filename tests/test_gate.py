"""The whole-model gate (``agent.serving.gate``, ``check-model --gate``): a set is served only where
the compiled model gets faster beyond the noise; the decision is recorded per model, mode and
device, and ``bbagent.enable(model=..., mode=...)`` serves exactly that, saying why it leaves out
the rest."""
import json
import random

from bbagent.agent.serving.check_model_compiled import gate_candidates
from bbagent.agent.serving.gate import decided, sets_together, timed_set
from test_check_model import RELU, TINY
from test_enable import in_fresh_process


def rounds(ratio: float, noise: float, seed: int, count: int = 7) -> tuple[list[float], list[float]]:
    """Paired rounds: torch.compile alone near 10 ms, the set ``ratio`` times faster, each round
    off by up to ``noise`` (a fraction) either way."""
    draw = random.Random(seed)
    alone = [10 * (1 + draw.uniform(-noise, noise)) for _ in range(count)]
    return alone, [a / ratio * (1 + draw.uniform(-noise, noise)) for a in alone]


def test_a_set_is_served_only_where_the_model_gets_faster_beyond_the_noise():
    fast = timed_set(["fast"], *rounds(1.10, 0.01, 1))
    slow = timed_set(["slow"], *rounds(0.80, 0.01, 2))  # a deliberately slow answer
    tie = timed_set(["tie"], *rounds(1.00, 0.05, 3))
    also_fast = timed_set(["also_fast"], *rounds(1.05, 0.01, 4))
    assert fast.wins and fast.low > 1.05 and not slow.wins and not tie.wins and tie.low < 1.0 < tie.high
    served, left_out = decided([fast, slow, tie], [])
    assert served == ["fast"]
    assert left_out["slow"].startswith("makes the model slower (0.8") and "95% interval" in left_out["slow"]
    assert left_out["tie"].startswith(("not faster beyond the noise", "makes the model slower"))
    together = timed_set(["fast", "also_fast"], *rounds(1.16, 0.01, 5))
    served, left_out = decided([fast, also_fast, slow], [together])
    assert served == ["fast", "also_fast"] and set(left_out) == {"slow"}
    worse_together = timed_set(["fast", "also_fast"], *rounds(1.02, 0.01, 6))
    served, left_out = decided([fast, also_fast], [worse_together])
    assert served == ["fast"] and "not in the best set" in left_out["also_fast"]
    assert decided([slow, tie], [])[0] == []
    served, left_out = decided([slow], [], alone={"slow": 1.42})  # a region that wins alone, loses in the model
    assert left_out["slow"].startswith("wins alone (1.420x torch.compile on its own problem) but makes the model "
                                       "slower (0.8")
    # neither wins alone, both together do (one's layout is the other's input): the pair is served
    first, second = timed_set(["first"], *rounds(0.99, 0.01, 7)), timed_set(["second"], *rounds(1.00, 0.03, 8))
    assert sets_together([first, second]) == [["first", "second"]]
    assert sets_together([fast, also_fast, slow]) == [["fast", "also_fast"], ["fast", "also_fast", "slow"]]
    assert sets_together([fast, slow]) == [["fast", "slow"]] and sets_together([fast]) == []
    pair = timed_set(["first", "second"], *rounds(1.08, 0.01, 9))
    served, left_out = decided([first, second], [pair])
    assert served == ["first", "second"] and left_out == {}


def test_the_gate_measures_a_region_answer_that_an_overlapping_one_shadowed():
    """With everything served, the pass swaps the region that starts first: an approved answer to a
    region overlapping it (the gated MLP beside the norm + gate/up region) never runs, yet the gate
    still measures it alone; an answer whose problem is not at hand is not a candidate."""
    norm, mlp, gone = "kernelbench/other/region_norm", "kernelbench/other/region_mlp", "kernelbench/other/region_gone"
    uses = {"compiled_calls": {norm: 4, mlp: 0, "aten.relu.default": 0}, "compiled_sites": {"aten.gelu.default": 2},
            "regions": {norm: {"served": True, "calls": 4}, mlp: {"served": True, "calls": 0},
                        gone: {"served": False, "calls": 0}}}
    assert gate_candidates(uses) == ["aten.gelu.default", mlp, norm]


def test_check_model_gate_records_a_plan_that_enable_serves_exactly(tmp_path, capsys):
    """A deliberately slow relu (right, but launched a hundred times over, under Triton's
    interpreter on the CPU): the gate measures it in the compiled model, leaves it out as making the model slower, and
    records the plan; ``enable(model=..., mode=...)`` then serves nothing and says why; a model
    with no plan recorded is refused with the command that records one."""
    from bbagent.agent.review import lifecycle
    from bbagent.cli import main
    from conftest import KERNELS
    from tests.test_review import install, run_meta
    launch = "        _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)\n"
    relu = (KERNELS / "relu_triton.py").read_text()
    assert launch in relu
    slow = relu.replace(launch, "        for _ in range(100):  # the same result, a hundred times over\n    " + launch)
    install(tmp_path, RELU, slow, run_meta(RELU, "run-slow", dtypes=["float32"]))
    lifecycle.set_status(tmp_path / "generated_kernels" / RELU, "approved")
    code = main(["check-model", "--model", "transformer", "--device", "cpu", *TINY, "--root", str(tmp_path),
                 "--repeats", "3", "--iterations", "1", "--gate", "--json"])
    result = json.loads(capsys.readouterr().out)
    gate = result["compiled"]["gate"]
    assert code == 0 and gate["served"] == [] and gate["mode"] == "default", gate
    assert gate["left_out"][RELU].startswith("makes the model slower")
    assert [s["members"] for s in gate["sets"]] == [[RELU]] and len(gate["sets"][0]["bbagent_ms"]) == 3
    plan = tmp_path / "runs" / "plans" / "transformer-default-cpu.json"
    assert gate["saved_to"] == str(plan) and json.loads(plan.read_text())["served"] == []
    served = in_fresh_process(
        "import json, sys, bbagent\n"
        "enabled = bbagent.enable(sys.argv[1], device='cpu', model='transformer', mode='default')\n"
        "print(json.dumps({'served': sorted(enabled.served), 'why': enabled.skipped.get('aten.relu.default')}))\n",
        tmp_path)
    assert served["served"] == [] and served["why"].startswith("the whole-model gate left it out of transformer "
                                                               "(default): makes the model slower")
    refused = in_fresh_process(
        "import json, sys, bbagent\n"
        "try:\n"
        "    bbagent.enable(sys.argv[1], device='cpu', model='resnet18', mode='reduce-overhead')\n"
        "except ValueError as exc:\n"
        "    print(json.dumps({'error': str(exc)}))\n", tmp_path)
    assert "no serving plan for resnet18 in mode reduce-overhead on cpu" in refused["error"]
    assert "--gate" in refused["error"]


def test_a_plans_members_are_names_check_model_and_enable_take():
    """A plan lists region answers by key (``kernelbench/<level>/<problem>``): ``--ops`` and
    ``enable(ops=...)`` take them beside aten overloads; a malformed key or overload is refused."""
    import pytest
    from bbagent.agent.errors import UsageError
    from bbagent.agent.judging import check_served_name
    check_served_name("kernelbench/other/1_reduction_pointwise_44daf41505b6")
    check_served_name("aten.relu.default")
    for wrong, said in (("kernelbench/1_reduction", "kernelbench/<level>/<problem>"),
                        ("kernelbench//x", "kernelbench/<level>/<problem>"), ("relu", "unknown operator 'relu'")):
        with pytest.raises(UsageError, match=said):
            check_served_name(wrong)
