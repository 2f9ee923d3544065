"""The run record (issue 48): run.json as one typed value, read back validated, its shape kept."""
import json
import os

import pytest

from bbagent.agent.machine import this_process

from bbagent.agent.run_record import (CandidateRecord, RoundRecord, RunRecord, StoppedBecause, UnreadableRun,
                                      interrupt_lost_runs, mark_interrupted)

SUMMARY = {"planned": 3, "not_run": 0, "total": 3, "passed": 2, "failed": 1, "reference_errors": 0, "skipped": 0}


def _record(run_id="20261126-010000-aten.relu.default-abcd", **fields) -> RunRecord:
    return RunRecord(run_id=run_id, op="aten.relu.default", status="running", started_at="2026-11-26T01:00:00+00:00",
                     config={"provider": "replay", "model": "m", "rounds": 2}, rounds=[], **fields)


def test_a_record_written_and_read_back_is_the_same_and_names_only_what_was_set(tmp_path):
    record = _record(batch_id="batch-20261126-010000-0001", process={"host": "elsewhere", "pid": 1, "started_at": 0})
    record.rounds.append(RoundRecord(round=1, outcome="asking"))
    record.rounds[-1] = RoundRecord(round=1, outcome="fail", summary=SUMMARY, error_kind=None, failures=[
        {"error_kind": "mismatch", "count": 1, "first_test": "opinfo-0"}], candidates=[
        CandidateRecord(outcome="no_code"), CandidateRecord(outcome="fail", summary=SUMMARY)], picked=2)
    record.tokens = {"input": 10, "output": 20}
    record.write(tmp_path)
    written = json.loads((tmp_path / "run.json").read_text())
    round_one = written["rounds"][0]
    assert "speedup" not in round_one and round_one["error_kind"] is None  # set to None is written, unset is not
    assert written["tokens"] == {"input": 10, "output": 20} and "why_failed" not in written
    again = RunRecord.read(tmp_path)
    assert again == record and again.rounds[0].summary.passed == 2 and again.rounds[0].tried()[0].outcome == "no_code"
    assert again.config.model == "m" and again.config.rounds == 2  # an option kept as it was given


def test_fields_a_newer_version_wrote_survive_a_rewrite(tmp_path):
    data = {**_record().model_dump(mode="json", exclude_unset=True), "a_later_field": {"kept": True}}
    (tmp_path / "run.json").write_text(json.dumps(data))
    assert mark_interrupted(tmp_path, "stopped by the test")
    written = json.loads((tmp_path / "run.json").read_text())
    assert written["a_later_field"] == {"kept": True}
    assert written["status"] == "interrupted" and written["stopped_because"] == "interrupted"
    assert written["message"] == "stopped by the test" and written["finished_at"]
    assert not mark_interrupted(tmp_path, "again")  # no longer running: left as it is


@pytest.mark.parametrize("text, said", [
    (None, "cannot read"),
    ("{not json", "is not a bbagent run record"),
    (json.dumps({"op": "aten.relu.default", "status": "finished-ish"}), "status"),
    (json.dumps({"op": "aten.relu.default", "status": "failed", "rounds": [{"outcome": "fail"}]}), "rounds.0.round"),
    (json.dumps([1, 2]), "is not a bbagent run record"),
])
def test_a_file_that_is_not_a_run_record_is_refused_saying_where(tmp_path, text, said):
    if text is not None:
        (tmp_path / "run.json").write_text(text)
    with pytest.raises(UnreadableRun, match="run.json") as caught:
        RunRecord.read(tmp_path)
    assert said in str(caught.value)
    assert not mark_interrupted(tmp_path, "x")  # and nothing is written over it
    assert text is None or (tmp_path / "run.json").read_text() == text


def test_a_hand_written_minimal_record_reads_with_its_folder_as_its_id(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"op": "aten.exp.default", "status": "failed"}))
    record = RunRecord.read(tmp_path)
    assert record.run_id == tmp_path.name and record.rounds == [] and record.stopped_because == StoppedBecause.RUNNING


def test_a_resume_marks_only_its_own_batch_runs_whose_process_is_gone(tmp_path):
    gone = {"host": "a-host-that-is-not-this-one", "pid": 1, "started_at": 0}
    alive = this_process()
    mine, other, live, done = (tmp_path / name for name in ("r-mine", "r-other", "r-live", "r-done"))
    _record(batch_id="batch-1", process=gone).write(mine)
    _record(batch_id="batch-2", process=gone).write(other)
    _record(batch_id="batch-1", process=alive).write(live)
    finished = _record(batch_id="batch-1", process=gone)
    finished.status = "accepted"
    finished.write(done)
    assert interrupt_lost_runs(tmp_path, "batch-1", since=0.0) == ["r-mine"]
    assert RunRecord.read(mine).status == "interrupted" and "batch-1" in RunRecord.read(mine).message
    assert [RunRecord.read(p).status for p in (other, live, done)] == ["running", "running", "accepted"]
    assert interrupt_lost_runs(tmp_path, "batch-2", since=os.path.getmtime(other / "run.json") + 60) == []
