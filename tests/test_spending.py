"""bbagent.agent.generate.spending: a run's spend counted as each answer comes, its budget, and a batch
reading a running operator's spend from the same object (no run.json read back)."""
from bbagent.agent.generate.spending import Spent
from bbagent.agent.providers.base import Completion
from tests.fake_runs import run_started


def test_answers_are_counted_and_an_unpriced_one_makes_the_cost_a_lower_bound():
    spent = Spent()
    spent.count(Completion(text="a", input_tokens=100, output_tokens=20, cost_usd=0.25))
    spent.count(Completion(text="b", input_tokens=10, output_tokens=5, cached=True, cost_usd=0.0, paid_by="run-x"))
    assert (spent.tokens, spent.cost_usd, spent.cost_complete, spent.cached_calls) == (135, 0.25, True, 1)
    spent.count(Completion(text="c", input_tokens=1, output_tokens=1, cost_usd=None))
    assert spent.cost_complete is False and spent.cost_usd == 0.25
    assert spent.run_fields() == {"tokens": {"input": 111, "output": 26}, "cost_usd": 0.25, "cost_complete": False,
                                  "cached_calls": 1, "answers_paid_by": ["run-x"]}
    assert spent.ledger_fields() == {"tokens": (111, 26), "cost_usd": 0.25, "cost_complete": False}


def test_the_run_budget_names_what_is_spent():
    spent = Spent(input_tokens=900, output_tokens=100, cost_usd=1.5)
    assert spent.over_budget(None, None) is None
    assert spent.over_budget(2.0, 5000) is None
    cost, tokens = spent.over_budget(1.5, None), spent.over_budget(None, 1000)
    assert (cost.because, cost.message) == ("budget", "the cost budget is spent ($1.5000 of --max-cost-usd 1.5)")
    assert (tokens.because, tokens.message) == ("budget", "the token budget is spent (1000 of --max-tokens 1000)")


def test_a_batch_budget_counts_what_a_running_operator_has_spent_so_far(tmp_path):
    from bbagent.agent.batch.runner import Batch, Budgets
    from bbagent.agent.generate.loop import Outcome
    from bbagent.agent.run_record import RunRecord
    seen = []

    def generate(op, hear):  # as agent.batch.start's generate_one: the loop counts into runner.spending(op)
        hear(run_started(op, tmp_path / f"run-{op}"))
        spent = runner.spending(op)
        spent.count(Completion(text="answer", input_tokens=600, output_tokens=500, cost_usd=0.5))
        seen.append(runner.budget_spent())  # asked between rounds while the run goes on
        return Outcome(RunRecord(op=op, status="failed", rounds_used=1), run_dir=tmp_path / f"run-{op}", spent=spent)
    batch_dir = tmp_path / "batch"
    batch_dir.mkdir()
    runner = Batch(batch_dir, generate, jobs=1, budgets=Budgets(max_tokens=1000))
    runner.ledger.add(["a"])
    runner.run()
    assert seen and seen[0] is not None and seen[0].because == "batch_budget" and "token" in seen[0].message, seen
    row = runner.ledger.row("a")
    assert (row["tokens_input"], row["tokens_output"], row["run_id"]) == (600, 500, "run-a")
