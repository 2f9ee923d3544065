"""`bbagent batch` (issue 18): the ledger's states, leases, charging rules and resume keys; one
kernel per variant family; the shared rate limiter; a six-operator batch killed with SIGKILL in the
middle and resumed doing each operator exactly once, with `status --json` read while it runs;
Ctrl-C marking the running operator interrupted and `--resume` redoing only it; a 20 s provider
outage, 429s with latency, and a spent budget, against the fake server."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bbagent.agent.batch.ledger import Ledger
from conftest import PYTHONPATH, ROOT, dies_with_parent, process_state
from tests.fake_runs import run_started

# Six operators and a kernel from the corpus that passes each, answered on the first round.
KERNELS = {"aten.relu.default": "relu_triton.py", "aten.add.Tensor": "add_broadcast.py",
           "aten.sum.dim_IntList": "sum_dim.py", "aten.exp.default": "exp_imports_helpers.py",
           "aten.gather.default": "gather.py", "aten.index_select.default": "index_select.py"}
OPS = list(KERNELS)


def _answer(op: str) -> str:
    source = (ROOT / "tests" / "kernels" / KERNELS[op]).read_text()
    return f"Here is the kernel.\n\n```python\n{source}```\n"


def _replays(tmp_path, ops, latency_s=0.0):
    """A replay directory for a batch: <op>.json with one right answer each."""
    where = tmp_path / "replays"
    where.mkdir(exist_ok=True)
    for op in ops:
        (where / f"{op}.json").write_text(json.dumps({"model": "replayed", "latency_s": latency_s,
                                                      "exchanges": [{"response": _answer(op)}]}))
    return where


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
    # the same result again (a distributed executor may deliver one twice): nothing changes
    assert not ledger.finish("a", "accepted", best_speedup=2.0, tokens=(10, 5), cost_usd=0.01, gpu="NVIDIA H200")
    assert {k: v for k, v in ledger.row("a").items() if k != "updated_at"} == {
        k: v for k, v in rows["a"].items() if k != "updated_at"}
    assert ledger.claim(60) == "b" and ledger.claim(60) == "d" and ledger.claim(60) is None
    counts = ledger.counts()
    assert counts == {"pending": 0, "running": 2, "accepted": 0, "failed": 1, "skipped": 1, "interrupted": 0,
                      "total": 4}
    ledger.finish("d", "accepted", best_speedup=1.7, fast_p={"0": 1.0, "1": 0.75, "1.5": 0.5})
    from bbagent.agent.batch.runner import write_summary
    summary = write_summary(tmp_path, ledger)
    assert next(r for r in summary["ops"] if r["op"] == "d")["fast_p"]["1"] == 0.75
    assert "| d | accepted | 1 |  | 1.7x | 75% |" in (tmp_path / "summary.md").read_text()
    # with the inductor baseline timed, its geomean gets a column of its own
    ledger.finish("b", "accepted", best_speedup=1.2, baseline_speedups={"inductor": 0.9})
    summary = write_summary(tmp_path, ledger)
    assert next(r for r in summary["ops"] if r["op"] == "b")["baseline_speedups"] == {"inductor": 0.9}
    table = (tmp_path / "summary.md").read_text()
    assert "| speedup | vs inductor | fast_1 |" in table and "| b | accepted | 1 |  | 1.2x | 0.9x |" in table
    assert "| d | accepted | 1 |  | 1.7x |  | 75% |" in table


def test_resume_reopens_interrupted_lapsed_and_other_key_results_but_not_live_ones(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.key = {"torch": "2.13", "gpu": "H200"}
    ledger.add(["lapsed", "live", "stopped", "done", "old"])
    assert ledger.claim(0.01) == "lapsed"
    assert ledger.claim(600) == "live"
    assert ledger.claim(600) == "stopped" and ledger.claim(600) == "done" and ledger.claim(600) == "old"
    ledger.finish("done", "accepted")
    ledger.finish("stopped", "interrupted")
    ledger.key = {"torch": "2.13", "gpu": "A100"}  # "old" finished on another GPU model
    ledger.finish("old", "accepted", best_speedup=1.5)
    time.sleep(0.05)
    reopened = Ledger(tmp_path / "ledger.sqlite").reopen({"torch": "2.13", "gpu": "H200"})  # a new coordinator
    assert reopened == {"interrupted": ["stopped"], "lease_expired": ["lapsed"], "still_leased": ["live"],
                        "other_key": ["old"], "failed": []}
    states = {r["op"]: (r["state"], r["attempts"]) for r in ledger.rows()}
    assert states == {"lapsed": ("pending", 0), "live": ("running", 1), "stopped": ("pending", 0),
                      "done": ("accepted", 1), "old": ("pending", 0)}
    assert ledger.row("old")["best_speedup"] is None


def test_one_kernel_per_variant_family_and_clear_selection_errors():
    from bbagent.agent.batch.start import Choice, choose_ops
    from bbagent import UsageError

    def batch_selection(ops=(), exact_overload=False, **choice):
        return choose_ops(Choice(ops=list(ops), **choice), exact_overload)
    chosen = batch_selection(["aten.relu_.default", "aten.relu.default", "aten.add.Tensor"])
    assert chosen.ops == ["aten.relu_.default", "aten.add.Tensor"]
    assert "aten.relu_.default serves it" in chosen.skipped["aten.relu.default"]
    assert batch_selection(["aten.relu_.default", "aten.relu.default"], exact_overload=True).ops == \
        ["aten.relu_.default", "aten.relu.default"]
    for wrong, says in ((dict(ops=["aten.relu.default"], suite="opinfo"), "one way"),
                        (dict(ops=["aten.nope.default"]), "nope"),
                        (dict(family="no-such-family"), "no operator of family"),
                        (dict(ops=["aten.relu.default"], include_synthetic=True), "applies to --dataset")):
        with pytest.raises(UsageError, match=says):
            batch_selection(**wrong)
    reductions = batch_selection(suite="traces", family="reduction")
    assert "aten.sum.dim_IntList" in reductions.ops and len(reductions.ops) >= 3


def test_the_rate_limiter_caps_calls_in_flight_and_backs_every_caller_off():
    import threading
    from bbagent.agent.providers.limiter import RateLimiter
    limiter, most, lock = RateLimiter(concurrency=2), [0], threading.Lock()

    def call():
        with limiter.attempt():
            with lock:
                most[0] = max(most[0], limiter.in_flight)
            time.sleep(0.05)
    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 2 and limiter.snapshot()["calls"] == 8
    limiter.back_off(0.6)  # one caller was told 429: nobody else starts before the backoff passes
    started = time.monotonic()
    call()
    assert time.monotonic() - started >= 0.5 and limiter.snapshot()["rate_limited"] == 1


def _batch(root, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bbagent", "batch", "--provider", "replay", "--rounds", "3",
                             "--root", str(root), "--device", "cpu", "--timeout", "120", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_hear_ctrl_c)


def _hear_ctrl_c() -> None:
    """pytest-xdist workers ignore SIGINT, and an ignored signal stays ignored across exec: the
    batch would then not hear the Ctrl-C this test sends (as when started with `&` by a shell).
    The batch is killed when the test run is (issue 64, 4: a killed pytest left one running)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    dies_with_parent()


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


def test_the_live_panel_shows_progress_gpus_llm_and_eta():
    from rich.console import Console
    from bbagent.agent.batch.display import event_line, panel
    snapshot = {"at": 1300.0, "session_started": 1000.0, "finished_this_session": 3, "tokens": 12345,
                "cost_usd": 0.5, "paused_s": 0.0, "running": ["aten.mm.default"],
                "counts": {"pending": 4, "running": 2, "accepted": 2, "failed": 1, "skipped": 1, "interrupted": 0,
                           "total": 10},
                "llm": {"in_flight": 1, "concurrency": 8, "calls": 9, "rate_limited": 2, "paused_s": 3.0},
                "slots": [{"name": "gpu-0", "busy": "aten.mm.default", "busy_fraction": 0.93, "evaluations": 4},
                          {"name": "gpu-1", "busy": None, "busy_fraction": 0.5, "evaluations": 2}]}
    console = Console(record=True, width=120)
    console.print(panel(snapshot))
    text = console.export_text()
    assert "3 of 9 done: 2 accepted, 1 failed, 2 running, 4 pending, 1 skipped" in text
    assert "elapsed 0:05:00, ETA 0:10:00; 12345 tokens, $0.5000" in text  # 300 s for 3 ops, 6 left
    assert "1 of 8 calls in flight, 9 made, 2 rate limited, all calls paused 3 s (429)" in text
    assert "gpu-0  aten.mm.default  93%" in text and "gpu-1  -" in text
    from bbagent.agent.batch.events import Activity, OpEnded
    assert event_line(Activity(snapshot)) is None and "accepted" in event_line(OpEnded(op="x", state="accepted"))


def _status(root) -> dict:
    done = subprocess.run([sys.executable, "-m", "bbagent", "status", "--json", "--root", str(root)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_a_six_operator_batch_killed_in_the_middle_resumes_and_does_each_operator_once(tmp_path):
    replays = _replays(tmp_path, OPS, latency_s=0.5)
    first = _batch(tmp_path, "--ops", ",".join(OPS), "--jobs", "2", "--replay", str(replays))
    _wait_for(tmp_path, lambda rows: sum(r["state"] == "accepted" for r in rows) >= 2
              and any(r["state"] == "running" for r in rows), timeout_s=240)
    status = _status(tmp_path)  # from another process, while it runs
    busy = _batch(tmp_path, "--resume", sorted((tmp_path / "runs").glob("batch-*"))[-1].name)
    out, err = busy.communicate(timeout=120)
    assert busy.returncode == 2 and "is still running (process" in err, out + err
    assert status["liveness"]["state"] == "running" and status["resume"] is None
    counts = status["counts"]
    assert counts["total"] == 6 == sum(counts[s] for s in ("pending", "running", "accepted", "failed", "skipped",
                                                          "interrupted"))
    assert [row["op"] for row in status["ops"]] == OPS
    os.killpg(first.pid, signal.SIGKILL)  # the coordinator dies with operators in flight
    first.wait()
    done_before = {r["op"] for r in _ledger_rows(tmp_path) if r["state"] == "accepted"}
    in_flight = {r["op"] for r in _ledger_rows(tmp_path) if r["state"] == "running"}
    # their leases (120 s) are still live, but the coordinator ran on this host and its process is gone
    batch_id = sorted((tmp_path / "runs").glob("batch-*"))[-1].name
    dead = _status(tmp_path)
    assert dead["liveness"]["state"] == "dead" and "is gone" in dead["liveness"]["reason"], dead["liveness"]
    assert dead["resume"].startswith(f"bbagent batch --resume {batch_id} --root ")
    assert dead["activity"] is None  # no "calls in flight" from a dead coordinator
    listed = subprocess.run([sys.executable, "-m", "bbagent", "runs", "--json", "--root", str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    listing = {e["id"]: e for e in json.loads(listed.stdout)}
    assert listing[batch_id]["status"] == "dead"
    killed_runs = [e for e in listing.values() if e["kind"] == "run" and e["op"] in in_flight]
    assert killed_runs and all(e["status"] == "interrupted" for e in killed_runs), killed_runs
    import tempfile
    left = list(Path(tempfile.gettempdir()).glob(f"bbagent-*-{first.pid}-*"))  # the killed one's working folders
    resumed = _batch(tmp_path, "--resume", batch_id, "--jobs", "3")
    out, err = resumed.communicate(timeout=400)
    assert resumed.returncode == 0, out + err
    assert not any(p.exists() for p in left)  # removed by the resume
    assert not left or "working folder(s) that ended bbagent processes left behind" in err
    assert f"{len(in_flight)} whose process died run again" in err
    events = [json.loads(line) for line in (tmp_path / "runs" / batch_id / "events.jsonl").read_text().splitlines()]
    lost, = [e for e in events if e["event"] == "coordinator_lost"]
    assert lost["coordinator"]["pid"] == first.pid and set(lost["running"]) == in_flight
    marked, = [e for e in events if e["event"] == "runs_interrupted"]  # their run.json no longer says running
    assert sorted(marked["runs"]) == sorted(e["id"] for e in killed_runs)
    for entry in killed_runs:
        record = json.loads((Path(entry["path"]) / "run.json").read_text())
        assert record["status"] == "interrupted" and record["stopped_because"] == "interrupted", record
        assert record["batch_id"] == batch_id and "its process died" in record["message"]
    rows = {r["op"]: r for r in _ledger_rows(tmp_path)}
    assert all(rows[op]["state"] == "accepted" and rows[op]["attempts"] == 1 for op in OPS), rows
    events = [json.loads(line) for line in (tmp_path / "runs" / batch_id / "events.jsonl").read_text().splitlines()]
    begun = [e["op"] for e in events if e["event"] == "op_start"]
    for op in OPS:  # finished work is never redone; work in flight at the kill runs once more
        assert begun.count(op) == (1 if op in done_before else 2 if op in in_flight else 1), (op, begun)
    assert sorted(p.name for p in (tmp_path / "generated_kernels").iterdir() if p.is_dir()) == sorted(OPS)
    summary = json.loads((tmp_path / "runs" / batch_id / "summary.json").read_text())
    assert summary["counts"]["accepted"] == 6 and summary["counts"]["total"] == 6
    first_session, second_session = summary["sessions"]  # the summary covers both sessions of the batch
    assert first_session["pid"] == first.pid and first_session["jobs"] == 2 and first_session["ended"].startswith("lost")
    assert first_session["finished_ops"] == len(done_before)  # a lost session's count is read from the ledger
    assert second_session["jobs"] == 3 and second_session["ended"] == "finished"
    assert second_session["finished_ops"] == 6 - len(done_before)
    assert second_session["slots"] and sum(s["evaluations"] for s in second_session["slots"]) >= 1
    text = (tmp_path / "runs" / batch_id / "summary.md").read_text()
    assert "## Sessions" in text and "lost" in text and text.count("| finished |") == 1
    assert _status(tmp_path)["liveness"]["state"] == "finished"
    # a new batch of the same operators skips them all: accepted kernels serve them
    again = _batch(tmp_path, "--ops", ",".join(OPS), "--replay", str(replays))
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0 and "6 skipped" in out, out + err


@pytest.mark.slow
def test_ctrl_c_marks_the_running_operator_interrupted_and_resume_redoes_only_it(tmp_path):
    ops = ["aten.relu.default", "aten.index_select.default"]
    first = _batch(tmp_path, "--ops", ",".join(ops), "--jobs", "1", "--replay", str(_replays(tmp_path, ops, 2.0)))
    _wait_for(tmp_path, lambda rows: rows[0]["state"] == "accepted" and rows[1]["state"] == "running"
              and any((tmp_path / "runs").glob(f"*-{ops[1]}-*/run.json")))  # its run has begun
    os.killpg(first.pid, signal.SIGINT)
    out, err = first.communicate(timeout=60)
    assert first.returncode == 130, out + err
    assert "continue with: bbagent batch --resume" in err
    rows = {r["op"]: r for r in _ledger_rows(tmp_path)}
    assert rows[ops[1]]["state"] == "interrupted" and rows[ops[0]]["state"] == "accepted"
    stopped = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob(f"*-{ops[1]}-*/run.json")]
    assert [run["status"] for run in stopped] == ["interrupted"]  # not left "running"
    batch_id = sorted((tmp_path / "runs").glob("batch-*"))[-1].name
    refused = _batch(tmp_path, "--resume", batch_id, "--rounds", "7")
    out, err = refused.communicate(timeout=120)
    assert refused.returncode == 2 and "drop --rounds" in err, out + err
    resumed = _batch(tmp_path, "--resume", batch_id)
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, out + err
    assert "resuming: 1 interrupted" in err and f"{ops[0]}: started" not in err
    rows = {r["op"]: r for r in _ledger_rows(tmp_path)}
    assert rows[ops[1]]["state"] == "accepted" and rows[ops[1]]["attempts"] == 1


def test_a_test_run_killed_mid_batch_leaves_no_batch_running(tmp_path):
    """Issue 64, 4: pytest killed during a batch test left the `bbagent batch` child (its own session,
    so the test can signal its group) running on. It now dies with whoever started it."""
    op = "aten.relu.default"
    replays = _replays(tmp_path, [op], 120.0)  # the model takes two minutes: the batch is waiting for it
    stand_in = subprocess.Popen(  # stands for the pytest worker: starts the batch as the tests do, then is killed
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from test_batch import _batch; "
         f"print(_batch(Path(sys.argv[1]), '--ops', '{op}', '--replay', sys.argv[2]).pid, flush=True); time.sleep(600)",
         str(tmp_path), str(replays)], stdout=subprocess.PIPE, text=True, cwd=ROOT / "tests",
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), PYTHONPATH])})
    batch_pid = int(stand_in.stdout.readline())
    try:
        _wait_for(tmp_path, lambda rows: rows[0]["state"] == "running")
        stand_in.kill()
        stand_in.wait()
        deadline = time.monotonic() + 30
        while process_state(batch_pid) not in ("", "Z") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert process_state(batch_pid) in ("", "Z"), "the batch outlived the test run that started it"
    finally:
        try:
            os.killpg(batch_pid, signal.SIGKILL)  # what is left of its group (the sandbox's workers)
        except ProcessLookupError:
            pass  # nothing was left


def test_a_batch_with_both_streams_into_a_pipe_closed_early_runs_as_it_would_have(tmp_path):
    """Issue 64, 3: `bbagent batch ... 2>&1 | head -2` ran on silently, then `status` said "stopped
    (finished)" with the operator still running and its run failed. Now the batch is the same as
    without the pipe: the operator accepted, the batch finished."""
    op = "aten.relu.default"
    process = subprocess.Popen([sys.executable, "-m", "bbagent", "batch", "--provider", "replay", "--rounds", "3",
                                "--root", str(tmp_path), "--device", "cpu", "--ops", op,
                                "--replay", str(_replays(tmp_path, [op]))],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True, preexec_fn=dies_with_parent)
    process.stdout.readline(), process.stdout.readline()
    process.stdout.close()  # `2>&1 | head -2`
    assert process.wait(timeout=300) == 0
    [row] = _ledger_rows(tmp_path)
    assert row["state"] == "accepted" and row["attempts"] == 1
    status = _status(tmp_path)
    assert status["liveness"]["state"] == "finished" and status["counts"]["accepted"] == 1, status
    [run] = [p for p in (tmp_path / "runs").glob(f"*-{op}-*") if p.is_dir()]
    assert json.loads((run / "run.json").read_text())["status"] == "accepted"


def test_sigterm_stops_a_batch_as_ctrl_c_does_and_the_printed_hint_resumes_it_from_anywhere(tmp_path):
    """A scheduler's stop (SIGTERM) is not a crash: the running operator is interrupted, the session
    ends stopped with its summary written, and the hint printed (with --root) works as copied. An
    option given again is refused even at its default value (--rounds 5 for a batch of 3 rounds)."""
    import shlex
    op = "aten.relu.default"
    replays = _replays(tmp_path, [op], 60.0)  # the model takes a minute: the batch is asking when stopped
    root = tmp_path / "a root"  # a space: the hint must quote it
    first = _batch(root, "--ops", op, "--replay", str(replays))
    _wait_for(root, lambda rows: rows and rows[0]["state"] == "running"
              and any((root / "runs").glob(f"*-{op}-*/run.json")))
    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=60)
    assert first.returncode == 130, out + err
    assert "Traceback" not in err
    hint = next(line for line in err.splitlines() if "continue with: " in line).split("continue with: ", 1)[1]
    batch = sorted((root / "runs").glob("batch-*"))[-1]
    assert hint == f"bbagent batch --resume {batch.name} --root {shlex.quote(str(root))}"
    assert "interrupted (SIGTERM)" in (batch / "summary.md").read_text()
    status = json.loads(subprocess.run([sys.executable, "-m", "bbagent", "status", "--root", str(root), "--json"],
                                       cwd=tmp_path, capture_output=True, text=True, timeout=120).stdout)
    assert status["liveness"]["state"] == "stopped" and status["counts"]["interrupted"] == 1
    refused = subprocess.run([sys.executable, "-m", *shlex.split(hint), "--rounds", "5"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)  # 5: the default, not the batch's 3
    assert refused.returncode == 2 and "drop --rounds" in refused.stderr, refused.stdout + refused.stderr
    _replays(tmp_path, [op], 0.0)  # the model answers at once now
    resumed = subprocess.run([sys.executable, "-m", *shlex.split(hint)], cwd=tmp_path, capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _ledger_rows(root)[0]["state"] == "accepted"


def test_why_an_operator_failed_is_shown_whole_in_the_console_status_and_summary(tmp_path, capsys):
    """A guard failure's message is "its source breaks these rules:" then the rule on the next line:
    the reason shown everywhere carries the rule, not the line ending in a colon."""
    from bbagent.cli import main
    op = "aten.relu.default"
    replays = tmp_path / "replays"
    replays.mkdir()
    source = (ROOT / "tests" / "kernels" / "relu_triton.py").read_text()
    source = source.replace("import torch", "import threading\nimport torch", 1)
    (replays / f"{op}.json").write_text(json.dumps({"model": "replayed", "exchanges": [
        {"response": f"```python\n{source}```\n"}]}))
    rule = "imports 'threading', which a kernel does not need"
    code = main(["batch", "--ops", op, "--provider", "replay", "--replay", str(replays), "--rounds", "1",
                 "--root", str(tmp_path), "--device", "cpu"])
    console = capsys.readouterr()
    assert code == 1 and rule in " ".join(console.err.split()), console.err
    batch = sorted((tmp_path / "runs").glob("batch-*"))[-1]
    assert rule in (batch / "summary.md").read_text()
    assert main(["status", "--root", str(tmp_path)]) == 0
    assert rule in " ".join(capsys.readouterr().out.split())


TWO = ["aten.relu.default", "aten.index_select.default"]


def test_a_provider_outage_pauses_the_batch_and_no_operator_fails(tmp_path, monkeypatch, no_keys):
    from bbagent import batch
    from fake_llm import FakeLLMServer
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    heard = []
    # 20 s of outage with shared pauses of 1, 2, then 4 s: each operator is refused about 6 times, near
    # INFRA_RETRIES (8), but an operator is failed only after failing for INFRA_GIVE_UP_S (10 minutes)
    with FakeLLMServer().answer_by_op({op: _answer(op) for op in TWO}).outage(20) as server:
        result = batch(TWO, root=tmp_path, jobs=2, provider="openai", model="gpt-test",
                       base_url=server.url + "/v1", retries=1, rounds=2, device="cpu", timeout_s=120,
                       infra_pause_s=(1.0, 4.0), report=lambda event, data: heard.append((event, data)))
    assert server.refused >= 4
    rows = {r["op"]: r for r in Ledger(result.path / "ledger.sqlite").rows()}
    assert result.counts["accepted"] == 2 and result.counts["failed"] == 0, (result.counts, rows)
    assert all(r["attempts"] == 1 for r in rows.values())
    assert sum(r["infra_retries"] for r in rows.values()) >= 4
    assert any(event == "op_retry" and data["error_class"] == "provider" for event, data in heard)


def test_rate_limits_and_latency_go_through_one_shared_limiter(tmp_path, monkeypatch, no_keys):
    from bbagent import batch
    from fake_llm import FakeLLMServer
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer().answer_by_op({op: _answer(op) for op in TWO}).latency(1.0).rate_limit(2) as server:
        result = batch(TWO, root=tmp_path, jobs=2, llm_concurrency=1, provider="openai", model="gpt-test",
                       base_url=server.url + "/v1", retries=4, rounds=1, device="cpu", timeout_s=120)
    assert result.counts["accepted"] == 2, result.counts
    assert server.most_in_flight == 1  # two agent loops, one call in flight at a time
    summary = json.loads((result.path / "summary.json").read_text())
    llm = summary["session"]["llm"]
    assert llm["rate_limited"] == 2 and llm["calls"] == 4 and llm["concurrency"] == 1


def test_a_spent_batch_budget_starts_nothing_new(tmp_path, monkeypatch, no_keys):
    from bbagent import batch
    from fake_llm import FakeLLMServer
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer().answer_by_op({op: _answer(op) for op in TWO}) as server:
        result = batch(TWO, root=tmp_path, jobs=1, provider="openai", model="gpt-test",
                       base_url=server.url + "/v1", rounds=2, device="cpu", timeout_s=120, max_tokens=1)
    assert result.counts["accepted"] == 1 and result.counts["pending"] == 1, result.counts
    assert "token budget is spent" in result.ended_by
    summary = (result.path / "summary.md").read_text()
    assert "New work stopped: the batch's token budget is spent" in summary


def test_runs_lists_runs_and_batches_and_prune_keeps_what_is_alive_or_referred_to(tmp_path):
    from bbagent import UsageError, prune_runs, runs
    runs_dir = tmp_path / "runs"
    ten_days_ago = time.time() - 10 * 86400

    def run(run_id, status, old=True):
        path = runs_dir / run_id
        path.mkdir(parents=True)
        (path / "run.json").write_text(json.dumps({"run_id": run_id, "op": "aten.relu.default", "status": status}))
        if old:
            for p in (path / "run.json", path):
                os.utime(p, (ten_days_ago, ten_days_ago))

    def batch(batch_id, run_id, lease_until):
        (runs_dir / batch_id).mkdir(parents=True)
        ledger = Ledger(runs_dir / batch_id / "ledger.sqlite")
        ledger.add(["aten.relu.default"])
        ledger.claim(600)
        if lease_until is None:
            ledger.finish("aten.relu.default", "accepted", run_id=run_id)
        ledger._write("UPDATE ops SET updated_at = ?", (ten_days_ago,))
        ledger.set_meta(created_at=ten_days_ago)

    run("20261101-100000-aten.relu.default-aaaa", "accepted")   # an accepted kernel came from it
    run("20261101-100000-aten.relu.default-bbbb", "failed")     # old and unreferenced
    run("20261123-100000-aten.relu.default-cccc", "running", old=False)
    run("20261101-100000-aten.relu.default-dddd", "accepted")   # listed by an old finished batch
    run("20261101-100000-aten.relu.default-eeee", "failed")     # listed by a batch still running
    run("20261101-100000-aten.relu.default-ffff", "accepted")   # an earlier version of the kernel came from it
    batch("batch-20261101-100000-0001", "20261101-100000-aten.relu.default-dddd", None)
    batch("batch-20261101-100000-0002", "20261101-100000-aten.relu.default-eeee", lease_until=600)
    Ledger(runs_dir / "batch-20261101-100000-0002" / "ledger.sqlite")._write(
        "UPDATE ops SET run_id = '20261101-100000-aten.relu.default-eeee'")
    kernel = tmp_path / "generated_kernels" / "aten.relu.default"
    kernel.mkdir(parents=True)
    (kernel / "meta.json").write_text(json.dumps({"run_id": "20261101-100000-aten.relu.default-aaaa"}))
    (kernel / "versions" / "1").mkdir(parents=True)
    (kernel / "versions" / "1" / "meta.json").write_text(json.dumps({"run_id": "20261101-100000-aten.relu.default-ffff"}))
    (runs_dir / "llm_calls.sqlite").write_text("")
    listed = runs(tmp_path)
    assert [e["kind"] for e in listed] == ["run"] * 6 + ["batch"] * 2
    assert {e["id"]: e["status"] for e in listed if e["kind"] == "batch"} == {
        "batch-20261101-100000-0001": "finished", "batch-20261101-100000-0002": "running"}
    would = prune_runs(1, root=tmp_path, dry_run=True)
    gone = {"20261101-100000-aten.relu.default-bbbb", "20261101-100000-aten.relu.default-dddd",
            "batch-20261101-100000-0001"}
    assert {e["id"] for e in would["removed"]} == gone and all((runs_dir / name).exists() for name in gone)
    done = prune_runs(1, root=tmp_path)
    assert {e["id"] for e in done["removed"]} == gone and not any((runs_dir / name).exists() for name in gone)
    kept = {e["id"]: e["why"] for e in done["kept"]}
    assert "accepted kernel aten.relu.default came from it" in kept["20261101-100000-aten.relu.default-aaaa"]
    assert "aten.relu.default (version 1) came from it" in kept["20261101-100000-aten.relu.default-ffff"]
    assert "live lease" in kept["batch-20261101-100000-0002"]
    assert "is kept" in kept["20261101-100000-aten.relu.default-eeee"]
    assert (runs_dir / "20261123-100000-aten.relu.default-cccc").exists() and (runs_dir / "llm_calls.sqlite").exists()
    assert "still running" in {e["id"]: e["why"] for e in prune_runs(0, root=tmp_path)["kept"]}[
        "20261123-100000-aten.relu.default-cccc"]
    with pytest.raises(UsageError):
        prune_runs(-1, root=tmp_path)


def test_a_lost_gpu_is_taken_out_and_its_failures_are_not_charged_to_the_operator(tmp_path):
    from types import SimpleNamespace

    from bbagent.agent.batch.executor import LocalExecutor
    from bbagent.agent.batch.runner import Batch
    from bbagent.agent.errors import InfrastructureError
    from bbagent.agent.generate.loop import Outcome, ending_of
    from bbagent.agent.run_record import RunRecord
    lost = "evaluation exited with code 1 before the tests were built"

    def evaluate(request, kernel_path, *, gpu, **options):  # GPU 1 fell off the bus
        return SimpleNamespace(error_kind="worker_error" if gpu == 1 else None, infrastructure=lost if gpu == 1 else None,
                               message=lost if gpu == 1 else "", passed=gpu != 1)
    executor = LocalExecutor("cuda", gpus=[0, 1], evaluate=evaluate)

    def generate(op, hear):  # as a run does: the evaluator's InfrastructureError ends it in error, transient
        hear(run_started(op, tmp_path / op))
        try:
            executor.evaluate(SimpleNamespace(op=op), tmp_path / "kernel.py")
        except InfrastructureError as exc:
            return Outcome.not_started(op, ending_of(exc))
        return Outcome(RunRecord(op=op, status="accepted", rounds_used=1), run_dir=tmp_path / op)
    batch_dir = tmp_path / "batch"
    batch_dir.mkdir()
    runner = Batch(batch_dir, generate, jobs=1, pause_s=(0.01, 0.01), executor=executor)
    runner.ledger.add(["a", "b", "c", "d", "e"])
    result = runner.run()
    assert result.counts["accepted"] == 5, runner.ledger.rows()
    rows = {r["op"]: r for r in runner.ledger.rows()}
    assert all(r["attempts"] == 1 for r in rows.values())  # the lost GPU's failures were not charged
    assert sum(r["infra_retries"] for r in rows.values()) == 3
    slots = {s["name"]: s for s in executor.activity()}
    assert slots["gpu-1"]["retired"].startswith("3 sandbox failures in a row") and slots["gpu-1"]["evaluations"] == 3
    assert slots["gpu-0"]["evaluations"] == 5 and slots["gpu-0"]["retired"] is None
    events = [json.loads(line) for line in (batch_dir / "events.jsonl").read_text().splitlines()]
    assert [e["error_class"] for e in events if e["event"] == "op_retry"] == ["sandbox"] * 3
    executor.slots[0].retired = "gone too"
    with pytest.raises(InfrastructureError, match="every evaluation slot is out of service"):
        executor.evaluate(SimpleNamespace(op="a"), tmp_path / "kernel.py")


def test_a_gpu_number_is_pinned_through_the_parents_visible_devices(monkeypatch):
    from bbagent.harness.sandbox.parent.environment import SetupError, base_env, physical_gpu
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert physical_gpu(1) == "1" and base_env("cuda", 1)["CUDA_VISIBLE_DEVICES"] == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 5")
    assert physical_gpu(1) == "5" and base_env("cuda", 1)["CUDA_VISIBLE_DEVICES"] == "5"
    assert base_env("cuda")["CUDA_VISIBLE_DEVICES"] == "3, 5"  # not pinned: what the parent sees
    with pytest.raises(SetupError, match="GPU 2 is not visible"):
        physical_gpu(2)


def test_a_provider_without_its_key_stops_the_batch_before_anything_starts(tmp_path, no_keys):
    from bbagent.agent.providers import ProviderError
    from bbagent import batch
    with pytest.raises(ProviderError, match="export OPENAI_API_KEY"):
        batch(["aten.relu.default"], root=tmp_path, provider="openai", model="gpt-5", device="cpu")
    assert not list(tmp_path.glob("runs/batch-*"))


def test_one_death_losing_every_evaluation_on_a_gpu_counts_once_and_they_run_again():
    """Issue 65, on an H200: a Ray supervisor running 8 evaluations died once; each of the 8 lost ones
    counted as a failure of the GPU, so the third took all its slots out and the batch paused with
    "every evaluation slot is out of service". One death is one failure: the lost evaluations run again."""
    import threading
    from types import SimpleNamespace

    from bbagent.agent.batch.executor import Slot, SlotLost, SlotPool
    all_started, seen = threading.Barrier(4), set()

    class OneSupervisor(SlotPool):  # its four slots share one GPU ("node/0")
        def _run_on(self, slot, request, kernel_path):
            if request.op not in seen:  # each first evaluation is in flight when the supervisor dies
                seen.add(request.op)
                first = all_started.wait(timeout=10) == 0
                raise SlotLost("the supervisor died", counted=not first)
            time.sleep(0.5)  # every loss is counted before a run again succeeds
            return SimpleNamespace(infrastructure=None, op=request.op)
    pool = OneSupervisor([Slot(f"gpu-0/{n}", "node/0") for n in range(4)])
    results = []
    threads = [threading.Thread(target=lambda op=op: results.append(pool.evaluate(SimpleNamespace(op=op), "k.py")))
               for op in "abcd"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(r.op for r in results) == list("abcd")
    assert not any(s.retired for s in pool.slots) and sum(s.lost for s in pool.slots) == 4
    assert all(s.failures_in_a_row == 0 for s in pool.slots)  # and the runs again succeeded


def test_a_cluster_homes_new_operators_by_those_its_nodes_have_not_finished(tmp_path):
    """Prepare homes an operator on the node with the fewest operators per slot. Counted over the whole
    batch, a node that had finished its operators (a faster node) still looked loaded, and new
    operators queued on the slower one; the batch now tells the executor when an operator is done."""
    from bbagent.agent.batch.executor import Slot, SlotPool
    from bbagent.agent.batch.ray_executor import RayExecutor
    from bbagent.agent.batch.runner import Batch
    from bbagent.agent.generate.loop import Outcome
    from bbagent.agent.run_record import RunRecord
    cluster = RayExecutor.__new__(RayExecutor)  # its slot accounting alone, no Ray
    slots = [Slot(f"{node}/gpu-0/{n}", f"{node}/0") for node in "AB" for n in range(2)]
    for slot in slots:
        slot.node_id = slot.name[0]
    SlotPool.__init__(cluster, slots)
    cluster.model_of, cluster.home = {}, {"a1": "A", "a2": "A", "a3": "A", "b1": "B", "b2": "B"}

    def home_of_a_new_operator() -> str:
        slot = cluster._take(cluster._least_loaded(cluster._accepts("new")))
        cluster._give(slot)
        return slot.node_id
    assert home_of_a_new_operator() == "B"  # 2 unfinished on B against 3 on A
    for op in ("a1", "a2", "a3"):
        cluster.finished(op)
    assert home_of_a_new_operator() == "A" and cluster.home == {"b1": "B", "b2": "B"}

    told = []

    class Told(SlotPool):
        def finished(self, op):
            told.append(op)

    def generate(op, hear):
        hear(run_started(op, tmp_path / op))
        return Outcome(RunRecord(op=op, status="accepted", rounds_used=1), run_dir=tmp_path / op)
    (tmp_path / "batch").mkdir()
    runner = Batch(tmp_path / "batch", generate, jobs=2, executor=Told([Slot("cpu-0", None, "cpu")]))
    runner.ledger.add(["x", "y", "z"])
    runner.run()
    assert sorted(told) == ["x", "y", "z"]


def test_a_simulated_device_memory_goes_with_the_ray_executor_and_must_be_positive(tmp_path):
    from bbagent import UsageError, batch
    with pytest.raises(UsageError, match="goes with executor='ray'"):
        batch(["aten.relu.default"], root=tmp_path, provider="replay", device="cpu", ray_device_memory_gib=8)
    with pytest.raises(UsageError, match="must be more than 0"):
        batch(["aten.relu.default"], root=tmp_path, provider="replay", device="cpu", executor="ray",
              ray_device_memory_gib=0)
    assert not list(tmp_path.glob("runs/batch-*"))


@pytest.mark.parametrize("give_up_s", [0.0, 1.0])
def test_an_operator_is_failed_for_infrastructure_only_after_retries_spread_over_the_give_up_time(tmp_path, give_up_s):
    from bbagent.agent.batch.runner import INFRA_RETRIES, Batch
    from bbagent.agent.errors import InfrastructureError
    from bbagent.agent.generate.loop import Outcome, ending_of
    tries = []

    def generate(op, hear):  # every run ends in error, for the machine that runs evaluations
        tries.append(time.time())
        lost = InfrastructureError("gpu-0: evaluation exited with code 1 before the tests were built")
        return Outcome.not_started(op, ending_of(lost))
    runner = Batch(tmp_path, generate, jobs=1, pause_s=(0.01, 0.01), give_up_s=give_up_s)
    runner.ledger.add(["a"])
    result = runner.run()
    row = runner.ledger.row("a")
    assert result.counts["failed"] == 1 and row["error_class"] == "sandbox", row
    assert len(tries) >= INFRA_RETRIES and tries[-1] - tries[0] >= give_up_s
    if give_up_s == 0.0:  # the count alone decides
        assert len(tries) == INFRA_RETRIES and row["infra_retries"] == INFRA_RETRIES - 1
    else:  # 8 tries 10 ms apart are not enough: it went on until 1 s had passed (a loaded machine still makes 8 tries in less)
        assert len(tries) > INFRA_RETRIES


def test_a_resume_keeps_the_batch_whole_retries_failed_ops_and_changes_nothing_when_done(tmp_path):
    """A resume runs with the batch's own --jobs; with nothing left to do it writes nothing; with
    --retry-failed it runs the failed operators again, and the summary keeps every session."""
    ops = ["aten.relu.default", "aten.exp.default"]
    replays = _replays(tmp_path, ops[:1])
    (replays / "aten.exp.default.json").write_text(json.dumps({"exchanges": [{"response": "I cannot do this."}] * 3}))
    first = _batch(tmp_path, "--ops", ",".join(ops), "--jobs", "1", "--replay", str(replays))
    out, err = first.communicate(timeout=300)
    assert first.returncode == 1, out + err
    batch_dir = sorted((tmp_path / "runs").glob("batch-*"))[-1]
    why = "no candidate passed in 3 round(s); no code block in the answer of round(s) 1, 2, 3"
    assert why in err  # the failure's cause, as it happens ...
    assert why in (batch_dir / "summary.md").read_text()  # ... in the summary ...
    failed, = [o for o in json.loads((batch_dir / "summary.json").read_text())["ops"] if o["state"] == "failed"]
    assert failed["why_failed"]["no_code_rounds"] == [1, 2, 3]
    shown = subprocess.run([sys.executable, "-m", "bbagent", "status", "--root", str(tmp_path)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert why in " ".join(shown.stdout.split()), shown.stdout  # ... and in status
    written = {p.name: p.stat().st_mtime_ns for p in batch_dir.iterdir()}
    idle = _batch(tmp_path, "--resume", batch_dir.name)
    out, err = idle.communicate(timeout=120)
    assert idle.returncode == 1 and "nothing to do" in out  # exits as the batch ended: with a failure and "--retry-failed" in out, out + err
    assert {p.name: p.stat().st_mtime_ns for p in batch_dir.iterdir() if p.name in written} == written
    assert _status(tmp_path)["resume"].endswith("--retry-failed")
    (replays / "aten.exp.default.json").write_text(json.dumps({"exchanges": [{"response": _answer("aten.exp.default")}]}))
    again = _batch(tmp_path, "--resume", batch_dir.name, "--retry-failed")
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0 and "1 failed run again" in err and "aten.relu.default: started" not in err, out + err
    rows = {r["op"]: r for r in _ledger_rows(tmp_path)}
    assert rows["aten.exp.default"]["state"] == "accepted" and rows["aten.exp.default"]["attempts"] == 2
    summary = json.loads((batch_dir / "summary.json").read_text())
    assert [(s["jobs"], s["ended"], s["finished_ops"]) for s in summary["sessions"]] == [(1, "finished", 2),
                                                                                         (1, "finished", 1)]


def test_a_spent_batch_budget_stops_a_running_operator_between_rounds(tmp_path, monkeypatch, no_keys):
    """Issue 31: --max-cost-usd 0.000001 let a running operator spend 37,500 times the budget. The
    batch's budget now stops it before its next round; it is interrupted (not failed), so that a
    resume with a larger budget goes on."""
    from bbagent import batch
    from fake_llm import FakeLLMServer
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    wrong = (ROOT / "tests" / "kernels" / "relu_identity.py").read_text()
    with FakeLLMServer().answer_by_op({"aten.relu.default": f"```python\n{wrong}```"}) as server:
        result = batch(["aten.relu.default"], root=tmp_path, jobs=1, provider="openai", model="gpt-5",
                       base_url=server.url + "/v1", rounds=4, device="cpu", timeout_s=120, max_cost_usd=0.000001)
    assert len(server.requests) == 1, len(server.requests)  # not four rounds
    row, = Ledger(result.path / "ledger.sqlite").rows()
    assert row["state"] == "interrupted" and row["error_class"] == "budget", row
    assert "stopped before round 2: the batch's cost budget is spent" in row["error"]
    assert "cost budget is spent" in result.ended_by


def test_a_deadline_says_the_moment_it_resolved_to():
    """Issue 31: `--deadline 05:27` given at 05:37 silently meant tomorrow; the start line says so."""
    from bbagent.agent.batch.display import event_line
    from bbagent.agent.batch.start import next_time_of_day
    past = time.strftime("%H:%M", time.localtime(time.time() - 600))
    deadline = next_time_of_day(past)
    assert 23 * 3600 < deadline - time.time() < 24 * 3600
    from bbagent.agent.batch.events import BatchStarted
    line = event_line(BatchStarted(counts={"pending": 1, "skipped": 0, "accepted": 0}, jobs=1, session=1,
                                   deadline=deadline))
    day = "today" if time.localtime(deadline).tm_yday == time.localtime().tm_yday else "tomorrow"  # (just after midnight)
    assert f"no new work after {time.strftime('%Y-%m-%d %H:%M', time.localtime(deadline))} ({day}, in 23:" in line


def test_a_model_with_no_price_costs_unknown_everywhere_and_a_user_file_prices_it(tmp_path, monkeypatch, no_keys):
    """Issue 47 (point 7): a model missing from the shipped prices showed $0.0000 in summary.md,
    status, the live panel and runs. Now it reads unknown; the user's own prices file
    ($BBAGENT_PRICES; nothing in the package edited) prices it; a broken one is refused before any call."""
    from bbagent import batch, runs
    from fake_llm import FakeLLMServer
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("BBAGENT_PRICES", str(tmp_path / "none-yet.json"))
    (tmp_path / "none-yet.json").write_text('{"_comment": "nothing priced"}')
    one = ["aten.relu.default"]
    with FakeLLMServer().answer_by_op({op: _answer(op) for op in one}) as server:
        unpriced = batch(one, root=tmp_path / "a", jobs=1, provider="openai", model="my-local-model",
                         base_url=server.url + "/v1", rounds=1, device="cpu", timeout_s=120)
        summary_md = (unpriced.path / "summary.md").read_text()
        assert "unknown (no price for the model)" in summary_md and "$0.0000" not in summary_md
        assert json.loads((unpriced.path / "summary.json").read_text())["cost_complete"] is False
        listed, = [e for e in runs(tmp_path / "a") if e["kind"] == "batch"]
        assert listed["cost_complete"] is False
        listed = subprocess.run([sys.executable, "-m", "bbagent", "runs", "--root", str(tmp_path / "a")], cwd=tmp_path,
                                capture_output=True, text=True, timeout=120, env=dict(os.environ))
        assert "unknown (no price for the model)" in listed.stdout and "$0.0000" not in listed.stdout
        (tmp_path / "prices.json").write_text(json.dumps({"my-local-model": [1000.0, 2000.0]}))
        monkeypatch.setenv("BBAGENT_PRICES", str(tmp_path / "prices.json"))
        priced = batch(one, root=tmp_path / "b", jobs=1, provider="openai", model="my-local-model",
                       base_url=server.url + "/v1", rounds=1, device="cpu", timeout_s=120)
        summary = json.loads((priced.path / "summary.json").read_text())
        assert summary["cost_complete"] is True and summary["cost_usd"] > 0
        (tmp_path / "prices.json").write_text(json.dumps({"my-local-model": "cheap"}))
        asked = len(server.requests)
        from bbagent import generate
        refused = generate("aten.relu.default", root=tmp_path / "c", provider="openai", model="my-local-model",
                           base_url=server.url + "/v1", rounds=1, device="cpu")
        assert (refused.status, refused.stopped_because, refused.run_dir) == ("error", "usage", None)
        assert "the price of 'my-local-model' must be" in refused.message
        assert len(server.requests) == asked


def test_a_run_the_batch_budget_stops_is_interrupted_by_its_stop_reason_not_its_message(tmp_path, monkeypatch,
                                                                                        no_keys):
    """Issue 48: the runner told a run stopped by the batch's budget from one stopped by its own by
    finding the batch's reason inside the run's message. The run now says why it stopped
    (Outcome.stopped_because "batch_budget"), and the batch reads that."""
    from bbagent import batch
    from fake_llm import FakeLLMServer
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer().answer("Sorry, no code this time.", _answer("aten.relu.default")) as server:
        result = batch(["aten.relu.default"], root=tmp_path, jobs=1, provider="openai", model="gpt-test",
                       base_url=server.url + "/v1", rounds=2, device="cpu", timeout_s=120, max_tokens=1)
    row, = Ledger(result.path / "ledger.sqlite").rows()
    assert row["state"] == "interrupted" and row["error_class"] == "budget", row
    run = json.loads(next((tmp_path / "runs").glob("*aten.relu.default*/run.json")).read_text())
    assert run["stopped_because"] == "batch_budget" and len(server.requests) == 1


def test_an_operator_cut_off_by_ctrl_c_is_interrupted_whatever_its_run_raises_and_a_bug_keeps_its_traceback(tmp_path):
    """Issue 75, 5: after Ctrl-C (the batch's stop set, the running operator marked interrupted), the
    run of that operator raised as its fork server was closed under it, and the worker recorded it
    "failed (internal)", which --resume then skipped. Now neither the worker nor the ledger turns an
    interrupted operator into a failed one; a bug outside an interruption is failed with its
    traceback kept in the batch's folder."""
    from bbagent.agent.batch.runner import TRACEBACKS, Batch
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add(["cut", "buggy"])
    assert ledger.claim(60) == "cut"
    ledger.interrupt_running()
    assert not ledger.finish("cut", "failed", error_class="internal", error="AttributeError: late")
    assert ledger.row("cut")["state"] == "interrupted"

    def generate(op, report):
        raise AttributeError("'NoneType' object has no attribute 'stdout'")
    batch = Batch(tmp_path, generate)
    assert batch.ledger.claim(60) == "buggy"
    batch.stop.set()  # Ctrl-C: the coordinator marks it interrupted; the worker must not fail it
    batch._run_one("buggy")
    assert batch.ledger.row("buggy")["state"] == "running"
    batch.ledger.interrupt_running()
    assert batch.ledger.row("buggy")["state"] == "interrupted"
    assert batch.ledger.reopen()["interrupted"] == ["cut", "buggy"]  # --resume runs both again

    batch.stop.clear()
    assert batch.ledger.claim(60) == "cut"
    batch._run_one("cut")
    row = batch.ledger.row("cut")
    assert row["state"] == "failed" and row["error_class"] == "internal" and "a bug in bbagent" in row["error"]
    saved, = (tmp_path / TRACEBACKS).iterdir()
    assert saved.name.startswith("cut-") and saved.name in row["error"]
    assert "AttributeError" in saved.read_text() and "Traceback (most recent call last)" in saved.read_text()
