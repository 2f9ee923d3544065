"""`bbagent batch` (issue 18, first part): the ledger's states, leases and charging rules; a batch
run to the end with the shipped replay; `kill -9` in the middle and `--resume` doing each operator
exactly once; Ctrl-C marking the running operator interrupted and `--resume` redoing only it."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from agent.batch.ledger import Ledger
from conftest import ROOT

OPS = ["aten.relu.default", "aten.relu_.default"]  # the shipped replay answers both (relu_ asks for relu)


def test_ledger_claims_in_order_and_charges_only_the_kernels_failures(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add(["a", "b", "c"], skipped={"c": "accepted already"})
    ledger.add(["a", "d"])  # a keeps its row; d joins at the end
    assert [r["op"] for r in ledger.rows()] == ["a", "b", "c", "d"]
    assert ledger.claim(60) == "a" and ledger.claim(60) == "b"
    ledger.release("b", "provider", "503 for minutes")  # infrastructure: pending again, not charged
    ledger.finish("a", "failed", error_class="kernel", error="mismatch", tokens=(10, 5), cost_usd=0.01)
    rows = {r["op"]: r for r in ledger.rows()}
    assert rows["b"]["state"] == "pending" and rows["b"]["attempts"] == 0 and rows["b"]["infra_retries"] == 1
    assert rows["a"]["attempts"] == 1 and rows["a"]["tokens_input"] == 10 and rows["a"]["error_class"] == "kernel"
    assert ledger.claim(60) == "b" and ledger.claim(60) == "d" and ledger.claim(60) is None
    counts = ledger.counts()
    assert counts == {"pending": 0, "running": 2, "accepted": 0, "failed": 1, "skipped": 1, "interrupted": 0,
                      "total": 4}


def test_resume_reopens_interrupted_and_lapsed_leases_but_not_live_ones(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add(["lapsed", "live", "stopped", "done"])
    assert ledger.claim(0.01) == "lapsed"
    assert ledger.claim(600) == "live"
    assert ledger.claim(600) == "stopped" and ledger.claim(600) == "done"
    ledger.finish("done", "accepted")
    ledger.finish("stopped", "interrupted")
    time.sleep(0.05)
    reopened = Ledger(tmp_path / "ledger.sqlite").reopen()  # a new coordinator
    assert reopened == {"interrupted": ["stopped"], "lease_expired": ["lapsed"], "still_leased": ["live"]}
    states = {r["op"]: (r["state"], r["attempts"]) for r in ledger.rows()}
    assert states == {"lapsed": ("pending", 0), "live": ("running", 1), "stopped": ("pending", 0),
                      "done": ("accepted", 1)}


def _batch(root, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "agent.cli", "batch", "--provider", "replay", "--rounds", "3",
                             "--root", str(root), "--device", "cpu", "--timeout", "120", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_hear_ctrl_c)


def _hear_ctrl_c() -> None:
    """pytest-xdist workers ignore SIGINT, and an ignored signal stays ignored across exec: the
    batch would then not hear the Ctrl-C this test sends (as when started with `&` by a shell)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ledger_rows(root) -> list[dict]:
    batches = sorted((root / "runs").glob("batch-*"))
    if not batches or not (batches[-1] / "ledger.sqlite").exists():
        return []
    return Ledger(batches[-1] / "ledger.sqlite").rows()


def _wait_for(root, predicate, timeout_s=120.0) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rows = _ledger_rows(root)
        if rows and predicate(rows):
            return rows
        time.sleep(0.2)
    raise AssertionError(f"the ledger never got there: {rows}")


@pytest.mark.slow
def test_a_batch_killed_in_the_middle_resumes_and_does_each_operator_once(tmp_path):
    first = _batch(tmp_path, "--ops", ",".join(OPS), "--jobs", "1", "--lease", "1")
    _wait_for(tmp_path, lambda rows: rows[0]["state"] == "accepted" and rows[1]["state"] == "running")
    os.killpg(first.pid, signal.SIGKILL)  # the coordinator dies with the second operator in flight
    first.wait()
    time.sleep(1.5)  # its lease lapses
    batch_id = sorted((tmp_path / "runs").glob("batch-*"))[-1].name
    resumed = _batch(tmp_path, "--resume", batch_id, "--jobs", "2")
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, out + err
    assert "1 whose process died run again" in err
    rows = {r["op"]: r for r in _ledger_rows(tmp_path)}
    assert rows["aten.relu.default"]["state"] == rows["aten.relu_.default"]["state"] == "accepted"
    assert rows["aten.relu.default"]["attempts"] == 1 and rows["aten.relu_.default"]["attempts"] == 1
    events = [json.loads(line) for line in (tmp_path / "runs" / batch_id / "events.jsonl").read_text().splitlines()]
    begun = [e["op"] for e in events if e["event"] == "op_start"]
    assert begun.count("aten.relu.default") == 1 and begun.count("aten.relu_.default") == 2
    summary = json.loads((tmp_path / "runs" / batch_id / "summary.json").read_text())
    assert summary["counts"]["accepted"] == 2 and summary["counts"]["total"] == 2
    meta = json.loads((tmp_path / "generated_kernels" / "aten.relu.default" / "meta.json").read_text())
    assert "aten.relu_.default" in meta["serves"]
    # a new batch of the same operators skips both: an accepted kernel serves them
    again = _batch(tmp_path, "--ops", ",".join(OPS))
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0 and "2 skipped" in out, out + err


@pytest.mark.slow
def test_ctrl_c_marks_the_running_operator_interrupted_and_resume_redoes_only_it(tmp_path):
    first = _batch(tmp_path, "--ops", ",".join(OPS), "--jobs", "1")
    _wait_for(tmp_path, lambda rows: rows[0]["state"] == "accepted" and rows[1]["state"] == "running")
    os.killpg(first.pid, signal.SIGINT)
    out, err = first.communicate(timeout=60)
    assert first.returncode == 130, out + err
    assert "continue with: bbagent batch --resume" in err
    rows = {r["op"]: r for r in _ledger_rows(tmp_path)}
    assert rows["aten.relu_.default"]["state"] == "interrupted" and rows["aten.relu.default"]["state"] == "accepted"
    batch_id = sorted((tmp_path / "runs").glob("batch-*"))[-1].name
    resumed = _batch(tmp_path, "--resume", batch_id)
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, out + err
    assert "resuming: 1 interrupted" in err and "aten.relu.default: started" not in err
    rows = {r["op"]: r for r in _ledger_rows(tmp_path)}
    assert rows["aten.relu_.default"]["state"] == "accepted" and rows["aten.relu_.default"]["attempts"] == 1


def _relu_answers(demo_answers, n):
    return [demo_answers[1]] * n  # a correct relu: any operator of the batch may take any answer


def test_a_provider_outage_pauses_the_batch_and_no_operator_fails(tmp_path, monkeypatch, no_keys, demo_answers):
    from bbagent import batch
    from fake_llm import FakeLLMServer
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    heard = []
    with FakeLLMServer().answer(*_relu_answers(demo_answers, 4)).outage(6) as server:
        result = batch(OPS, root=tmp_path, jobs=2, provider="openai", model="gpt-test",
                       base_url=server.url + "/v1", retries=1, rounds=2, device="cpu", timeout_s=120,
                       infra_pause_s=(1.0, 4.0), report=lambda event, data: heard.append((event, data)))
    assert server.refused >= 2
    assert result.counts["accepted"] == 2 and result.counts["failed"] == 0, result.counts
    rows = {r["op"]: r for r in Ledger(result.path / "ledger.sqlite").rows()}
    assert all(r["attempts"] == 1 for r in rows.values())
    assert sum(r["infra_retries"] for r in rows.values()) >= 2
    assert any(event == "op_retry" and data["error_class"] == "provider" for event, data in heard)


def test_a_spent_batch_budget_starts_nothing_new(tmp_path, monkeypatch, no_keys, demo_answers):
    from bbagent import batch
    from fake_llm import FakeLLMServer
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer().answer(*_relu_answers(demo_answers, 4)) as server:
        result = batch(OPS, root=tmp_path, jobs=1, provider="openai", model="gpt-test",
                       base_url=server.url + "/v1", rounds=2, device="cpu", timeout_s=120, batch_max_tokens=1)
    assert result.counts["accepted"] == 1 and result.counts["pending"] == 1, result.counts
    assert "token budget is spent" in result.ended_by
    summary = (result.path / "summary.md").read_text()
    assert "New work stopped: the batch's token budget is spent" in summary
