"""Optimisation rounds in `generate`: the loop keeps the best correct kernel and stops at the
target. The harness is replaced by a scripted evaluator (the loop's Environment), so this runs
anywhere; tests/test_gpu.py runs the same story with real timing on a GPU."""
import json
import re
import tempfile
from pathlib import Path

from bbagent.agent.generate.posed import posed_operator
from bbagent.agent.judging import Evaluations, evaluation_request
from bbagent.agent.generate.loop import Agent
from bbagent.agent.generate.progress import NewBest
from bbagent.agent.options import GenerateOptions
from bbagent.agent.providers.replay import ReplayProvider
from bbagent.agent.storage import RunDir
from bbagent.harness.timing.metrics import summarize_performance
from bbagent.harness.timing.options import TimingOptions
from bbagent.harness.verdict import Verdict

OP = "aten.relu.default"


def answer(tag: str) -> str:
    return f"```python\n# {tag}\ndef kernel(self):\n    return self\n```\n"


def scripted_verdict(op: str, kernel_path, profile: bool = True):
    """A Verdict for the tag in the kernel: 'broken' fails, 'speed X' passes at X times eager (on
    'gpu NAME' if the tag names one)."""
    source = kernel_path.read_text()
    gpu = re.search(r"gpu (\w+)", source).group(1) if "gpu " in source else "scripted GPU"
    env = {"device": "cuda", "gpu": gpu, "interpreter": False, "torch": "t", "triton": "t"}
    base = {"op": op, "kernel": {"path": str(kernel_path), "sha256": str(abs(hash(source)))}, "seed": 0,
            "environment": env, "failure_groups": [], "skipped": []}
    if "broken" in source:
        return Verdict.model_validate({
            **base, "verdict": "fail", "error_kind": "mismatch", "message": "wrong values",
            "summary": {"planned": 4, "passed": 3, "total": 4, "skipped": 0, "not_run": 0, "failed": 1,
                        "reference_errors": 0},
            "performance": {"measured": False, "reason": "the kernel failed its tests; a failing kernel is not timed"}})
    speeds = ([float(x) for x in re.search(r"speeds ([\d.,]+)", source).group(1).split(",")] if "speeds " in source
              else [float(re.search(r"speed ([\d.]+)", source).group(1))] * 2)  # 'speeds X,Y': per shape
    def stats(ms: float) -> dict:
        return {"median_ms": ms, "mean_ms": ms, "std_ms": 0.0, "p20_ms": ms, "p80_ms": ms, "min_ms": ms, "reps": 10}
    roof = float(re.search(r"roof ([\d.]+)", source).group(1)) if "roof " in source else None
    tests = [{"id": f"trace-{i}", "input": f"(T([{n}], f16),)", "mode": "graph", "speedup": speed, "roof_fraction": roof,
              "overhead_dominated": False, "bytes": 4 * n, "aten_gbs": 2000.0, "candidate_gbs": 2000.0 * speed,
              "aten": stats(0.01), "candidate": stats(0.01 / speed)} for i, (n, speed) in enumerate(zip((1024, 4096), speeds))]
    if roof is not None:  # 'roof X': each shape at X of its roofline (memory-bound)
        for t in tests:
            t.update(flops=0, bound="memory", floor_ms=0.01 / t["speedup"] * roof, aten_roof_fraction=roof / t["speedup"])
    device = {"copy_gbs": 4000.0, "empty_launch_ms": 0.004, "empty_graph_launch_ms": 0.005}
    performance = {"measured": True, "gpu": gpu, "device": device, "tests": tests,
                   "summary": summarize_performance(op, tests, device, correct=True)}
    if "over-inductor" in source:  # 'over-inductor X': X times torch.compile's inductor
        over = float(re.search(r"over-inductor ([\d.]+)", source).group(1))
        performance["baselines"] = {"inductor": {
            "engine": "inductor", "compile_mode": "default", "measured": True, "compared": 2, "geomean_speedup": over,
            "speedup_p20": over, "speedup_p50": over, "speedup_p80": over, "fast_p": {"1": float(over > 1)}}}
    return Verdict.model_validate({
        **base, "verdict": "pass", "error_kind": None, "message": "", "performance": performance,
        "summary": {"planned": 4, "passed": 4, "total": 4, "skipped": 0, "not_run": 0, "failed": 0, "reference_errors": 0}})


class Scripted:
    """The harness's Evaluator protocol, answered by ``scripted_verdict`` (looked up at each call,
    so that a test may replace it); ``profile`` is whether the request still asks for profiles."""

    def prepare(self, request) -> str:
        return "cached"

    def evaluate(self, request, kernel_path):
        return scripted_verdict(request.op, kernel_path, profile=bool(request.timing.profile or request.timing.ncu))


def run_agent(tmp_path, answers: list[str], rounds: int, target: float | None, target_baseline: str = "eager",
              listener=None, stop=None, **options):
    replay = tmp_path / "answers.json"
    replay.write_text(json.dumps({"model": "scripted", "exchanges": [{"response": a} for a in answers]}))
    events = []
    options = GenerateOptions(provider="replay", rounds=rounds, target_speedup=target, target_baseline=target_baseline,
                              **options)
    operator = posed_operator(OP, exact_overload=True)
    request = evaluation_request(operator.problem, tmp_path, device="cpu", seed=0, timeout_s=60,
                                 timing=TimingOptions(profile=2))
    agent = Agent(operator=operator, provider=ReplayProvider.from_path(replay),
                  evaluations=Evaluations(request, Scripted()),
                  run=RunDir(tmp_path, "run-1"), root=tmp_path, options=options,
                  report=listener or events.append, **({"stop": stop} if stop is not None else {}))
    return agent.generate(), events


def test_a_faster_correct_kernel_replaces_a_slower_one(tmp_path):
    outcome, events = run_agent(tmp_path, [answer("speed 0.5"), answer("broken"), answer("speed 1.4"),
                                           answer("speed 3.0")], rounds=4, target=1.2)
    assert outcome.status == "accepted" and outcome.rounds_used == 3  # stopped at the target
    assert "round 3" in outcome.message and "target speedup 1.2x" in outcome.message
    accepted = tmp_path / "generated_kernels" / OP
    assert "speed 1.4" in (accepted / "kernel.py").read_text()
    meta = json.loads((accepted / "meta.json").read_text())
    assert meta["round"] == 3 and meta["performance"]["summary"]["geomean_speedup"] == 1.4
    assert [s["speedup"] for s in meta["performance"]["shapes"]] == [1.4, 1.4]
    assert meta["round_speedups"] == {"1": 0.5, "3": 1.4} or meta["round_speedups"] == {1: 0.5, 3: 1.4}
    run = tmp_path / "runs" / "run-1"
    assert "speed 0.5" in (run / "round-1" / "kernel.py").read_text()  # the slower one: in runs/ only
    assert NewBest(round=3, speedup=1.4, replaces=1) in events
    prompts = [(run / f"round-{n}" / "prompt.md").read_text() for n in (2, 3)]
    assert "0.5x" in prompts[0] and "Slowest shapes first" in prompts[0]  # speed feedback after round 1
    assert "round 1" in prompts[1] and "kept as the best so far" in prompts[1]  # failure feedback keeps the best
    state = json.loads((run / "run.json").read_text())
    assert state["best_round"] == 3 and state["best_speedup"] == 1.4


def test_a_slower_kernel_does_not_replace_the_best(tmp_path):
    outcome, _ = run_agent(tmp_path, [answer("speed 0.9"), answer("speed 0.7"), answer("speed 1.2"),
                                      answer("speed 1.5")], rounds=4, target=2.0)
    assert outcome.status == "accepted" and "ran out" in outcome.message
    assert "speed 1.5" in (tmp_path / "generated_kernels" / OP / "kernel.py").read_text()
    run = tmp_path / "runs" / "run-1"
    feedback = (run / "round-2" / "prompt.md").read_text()
    assert "target is a geometric mean of 2x" in feedback and "# speed" not in feedback
    # after the slower round 2, the speed feedback asks to build on round 1 and shows its code
    slower = (run / "round-3" / "prompt.md").read_text()
    assert "build on the faster one" in slower and "# speed 0.9" in slower and "# speed 0.7" not in slower
    # after round 3, the new best, its own code is in the conversation already: no copy
    assert "# speed" not in (run / "round-4" / "prompt.md").read_text()


def test_running_out_of_answers_after_a_correct_kernel_keeps_it(tmp_path):
    outcome, _ = run_agent(tmp_path, [answer("speed 0.5")], rounds=3, target=1.0)
    assert outcome.status == "accepted" and "provider error" in outcome.message
    assert (tmp_path / "generated_kernels" / OP / "kernel.py").is_file()


def test_speedups_measured_on_another_gpu_model_do_not_replace_the_best(tmp_path):
    # round 2 is faster on paper, but on another GPU model: not comparable, so round 1 stays;
    # round 3, on round 1's model, is faster and replaces it
    outcome, events = run_agent(tmp_path, [answer("speed 1.1 gpu H100"), answer("speed 9.0 gpu A10"),
                                           answer("speed 1.5 gpu H100")], rounds=3, target=5.0)
    best = [event for event in events if isinstance(event, NewBest)]
    assert [b.round for b in best] == [3] and best[0].replaces == 1
    state = json.loads((tmp_path / "runs" / "run-1" / "run.json").read_text())
    assert state["best_round"] == 3 and state["best_speedup"] == 1.5 and state["best_gpu"] == "H100"


def test_a_round_chooses_among_candidates_timed_on_one_gpu_model():
    from types import SimpleNamespace

    from bbagent.agent.generate.choosing import Candidate, choose

    def candidate(number, tag):
        verdict = scripted_verdict(OP, SimpleNamespace(read_text=lambda: f"# {tag}"))
        return Candidate(number, completion=object(), source=tag, verdict=verdict, record={})
    tried = [candidate(1, "speed 1.2 gpu H100"), candidate(2, "speed 4.0 gpu A10"), candidate(3, "speed 1.3 gpu H100")]
    assert choose(tried).number == 3


def test_a_target_over_inductor_keeps_optimising_past_eager(tmp_path):
    outcome, _ = run_agent(tmp_path, [answer("speed 1.5 over-inductor 0.8"), answer("speed 2.2 over-inductor 1.1"),
                                      answer("speed 3.0 over-inductor 1.5")], rounds=3, target=1.0,
                           target_baseline="inductor")
    assert outcome.status == "accepted" and outcome.rounds_used == 2, outcome.message
    assert "target speedup 1x over inductor (1.1x)" in outcome.message
    feedback = (tmp_path / "runs" / "run-1" / "round-2" / "prompt.md").read_text()
    assert "Against torch.compile (inductor, mode default) on the same shapes: geometric mean 0.8x" in feedback
    assert "target is a geometric mean of 1x over torch.compile (inductor)" in feedback
    state = json.loads((tmp_path / "runs" / "run-1" / "run.json").read_text())
    assert state["config"]["target_baseline"] == "inductor" and state["best_baseline_speedups"] == {"inductor": 1.1}


def test_without_an_inductor_figure_the_target_holds_against_eager(tmp_path):
    outcome, _ = run_agent(tmp_path, [answer("speed 1.5"), answer("speed 2.2")], rounds=2, target=1.2,
                           target_baseline="inductor")
    assert outcome.rounds_used == 1 and "reached the target speedup 1.2x" in outcome.message


def test_optimisation_stops_at_the_target_fraction_of_the_roofline(tmp_path):
    outcome, _ = run_agent(tmp_path, [answer("speed 1.1 roof 0.5"), answer("speed 1.5 roof 0.92"),
                                      answer("speed 2.0 roof 0.95")], rounds=5, target=None)
    assert outcome.status == "accepted" and outcome.rounds_used == 2
    assert "reached 92% of the roofline" in outcome.message and "--target-roof 0.9" in outcome.message
    run = json.loads((tmp_path / "runs" / "run-1" / "run.json").read_text())
    assert run["stopped_because"] == "target_roof" and run["best_round"] == 2
    feedback = (tmp_path / "runs" / "run-1" / "round-2" / "prompt.md").read_text()  # after round 1
    assert "90% of the roofline" in feedback and "this kernel: 50%" in feedback


def test_optimisation_stops_when_rounds_in_a_row_do_not_improve_the_best(tmp_path):
    outcome, _ = run_agent(tmp_path, [answer("speed 1.2 roof 0.4"), answer("speed 1.1 roof 0.3"), answer("broken"),
                                      answer("speed 5.0 roof 0.8")], rounds=6, target=None, patience=2)
    assert outcome.rounds_used == 3  # rounds 2 and 3 did not beat round 1: round 4 is never asked for
    assert "no round improved it in the last 2" in outcome.message and "40% of the roofline" in outcome.message
    run = json.loads((tmp_path / "runs" / "run-1" / "run.json").read_text())
    assert run["stopped_because"] == "patience" and run["best_round"] == 1


def test_without_targets_optimisation_runs_until_the_rounds_run_out(tmp_path):
    outcome, _ = run_agent(tmp_path, [answer("speed 1.2 roof 0.95"), answer("speed 1.3 roof 0.96"),
                                      answer("speed 1.4 roof 0.97")], rounds=3, target=None, target_roof=0.0,
                           patience=5)
    assert outcome.rounds_used == 3 and "ran out" in outcome.message
    run = json.loads((tmp_path / "runs" / "run-1" / "run.json").read_text())
    assert run["stopped_because"] == "rounds" and run["best_round"] == 3


def test_the_stopping_rules_options_are_checked():
    import pytest
    from bbagent.agent.errors import UsageError
    with pytest.raises(UsageError, match="--target-roof must be between 0 and 1"):
        GenerateOptions.of(provider="replay", target_roof=1.5)
    with pytest.raises(UsageError, match="--patience must be at least 1"):
        GenerateOptions.of(provider="replay", patience=0)


def test_a_kernel_faster_on_some_shapes_is_kept_and_shown_beside_the_best(tmp_path):
    """Round 1 is fast on the small shape, round 2 on the large one and wins the geomean: round 3's
    prompt shows round 1's code and the shape where it wins; a kernel faster nowhere is not shown."""
    outcome, _ = run_agent(tmp_path, [answer("speeds 3.0,0.5 small"), answer("speeds 0.8,2.0 large"),
                                      answer("speeds 0.7,0.7 slow"), answer("speeds 0.9,2.1 large2")],
                           rounds=4, target=None, target_roof=0.0, patience=3)
    run = tmp_path / "runs" / "run-1"
    third = (run / "round-3" / "prompt.md").read_text()
    assert "The kernel of round 1 is slower overall but faster than your best (round 2) on 1 timed shape" in third
    assert "| `(T([1024], f16),)` | 3.3 | 12.5 |" in third and "# speeds 3.0,0.5 small" in third
    fourth = (run / "round-4" / "prompt.md").read_text()  # round 3 is slower everywhere: round 1 is still the rival
    assert "The kernel of round 1" in fourth and "# speeds 0.7,0.7 slow" not in fourth.split("The kernel of round 1")[1]
    assert outcome.rounds_used == 4


def test_the_population_keeps_the_best_by_geomean_and_every_shapes_fastest():
    from bbagent.agent.generate import population
    from bbagent.agent.generate.population import Population
    kept = Population()
    for number, speeds in enumerate(["3.0,0.5", "0.8,2.0", "0.7,0.7", "0.75,0.75", "0.72,0.72", "0.9,1.9"], 1):
        path = Path(tempfile.mkdtemp()) / "kernel.py"
        path.write_text(f"# speeds {speeds}\n")
        kept.add(number, path.read_text(), scripted_verdict(OP, path))
    rounds = sorted(m.round for m in kept.members)
    assert len(rounds) <= population.KEPT_BY_GEOMEAN + 2
    assert 1 in rounds and 2 in rounds  # each the fastest on one shape
    assert 3 not in rounds  # slowest by geomean and fastest nowhere
    rival = kept.rival(2)
    assert rival.member.round == 1 and [w[0] for w in rival.wins] == ["(T([1024], f16),)"]


def test_why_a_run_stopped_reads_as_its_value_in_text_json_and_comparisons():
    import json

    from bbagent.agent.generate.loop import StoppedBecause
    why = StoppedBecause.BATCH_BUDGET
    assert str(why) == f"{why}" == "batch_budget" == why
    assert json.dumps({"stopped_because": why}) == '{"stopped_because": "batch_budget"}'



def test_a_run_ends_through_one_door_whoever_stops_it(tmp_path):
    """Issues 61 and 78: a target, the rounds running out, a batch stopping the run (its stop signal,
    read by the loop; no listener raises into it), its budget, Ctrl-C and a bug all end the run with
    an Outcome, returned, never raised: the outcome and run.json agree on why."""
    from bbagent.agent.generate.progress import Asking
    from bbagent.agent.generate.stopping import StopSignal
    from bbagent.agent.run_record import Halt, StoppedBecause

    signal = StopSignal(cut_message="interrupted: the batch was stopped")

    def ctrl_c_of_the_batch_in_round_2(event):  # the batch sets its event while the model writes round 2's answer
        if isinstance(event, Asking) and event.round == 2:
            signal.cut.set()
    outcome, _ = run_agent(tmp_path, [answer("speed 1.1"), answer("speed 1.2")], rounds=3, target=None,
                           listener=ctrl_c_of_the_batch_in_round_2, stop=signal)
    run = json.loads((tmp_path / "runs" / "run-1" / "run.json").read_text())
    assert (outcome.status, outcome.stopped_because, outcome.message) == (
        "interrupted", StoppedBecause.INTERRUPTED, "interrupted: the batch was stopped")
    assert (run["status"], run["stopped_because"], run["rounds"][-1]["outcome"]) == (
        "interrupted", "interrupted", "interrupted")
    assert not (tmp_path / "runs" / "run-1" / "round-2" / "verdict.json").exists()  # cut before its evaluation

    def at(name):
        (tmp_path / name).mkdir()
        return tmp_path / name
    ran_out, _ = run_agent(at("again"), [answer("broken")] * 2, rounds=2, target=None)
    assert (ran_out.status, ran_out.stopped_because, ran_out.rounds_used) == ("failed", StoppedBecause.ROUNDS, 2)

    spent = Halt(StoppedBecause.BATCH_BUDGET, "the batch's token budget is spent (9 of --max-tokens 1)")
    budget, _ = run_agent(at("budget"), [answer("speed 1.1"), answer("speed 1.2")], rounds=3, target=None,
                          stop=StopSignal(budget=lambda: spent))
    assert (budget.status, budget.stopped_because, budget.rounds_used) == ("stopped", StoppedBecause.BATCH_BUDGET, 0)
    assert budget.message.startswith("stopped before round 1: the batch's token budget is spent")

    def ctrl_c(event):
        if isinstance(event, Asking) and event.round == 2:
            raise KeyboardInterrupt
    interrupted, _ = run_agent(at("ctrl-c"), [answer("speed 1.1")] * 2, rounds=3, target=None, listener=ctrl_c)
    assert (interrupted.status, interrupted.stopped_because) == ("interrupted", StoppedBecause.INTERRUPTED)
    assert interrupted.message == "interrupted by the user (Ctrl-C)"
    assert interrupted.best is not None and interrupted.best.round == 1  # what it had accepted stays

    def bug(event):
        if isinstance(event, Asking) and event.round == 2:
            raise AttributeError("'NoneType' object has no attribute 'stdout'")
    crashed, _ = run_agent(at("bug"), [answer("speed 1.1")] * 2, rounds=3, target=None, listener=bug)
    run = json.loads((crashed.run_dir / "run.json").read_text())
    assert (crashed.status, crashed.stopped_because, run["status"]) == ("error", StoppedBecause.ERROR, "error")
    saved, = crashed.run_dir.glob("traceback-*.txt")
    assert str(saved) in crashed.message and "a bug in bbagent" in crashed.message
    assert "AttributeError" in saved.read_text() and "Traceback (most recent call last)" in saved.read_text()
