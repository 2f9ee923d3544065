"""The review lifecycle and `bbagent review` on a fixture tree of accepted kernels: versions kept,
transitions recorded, stale detection after a version change, diff, flags, the meta.json schema,
and verify re-testing a stale kernel in the sandbox."""
import json
import os
from pathlib import Path

import pytest

from bbagent.cli import main
from bbagent.agent import machine
from bbagent.agent.review import lifecycle
from bbagent.agent.review.catalog import find, flags, listing
from bbagent.agent.review.lifecycle import install as install_accepted, status_of
from bbagent.agent.review.meta import Accepted, KernelMeta, OverloadSpeed, read_meta, upgraded, write_meta
from conftest import speed_summary

KERNELS = Path(__file__).parent / "kernels"
RELU, ADD = "aten.relu.default", "aten.add.Tensor"


def install(root: Path, op: str, source: str, fields: dict) -> KernelMeta:
    """Install ``source`` as a run accepts it for ``op``, from meta.json's fields as these tests
    write them (``run_meta``: the acceptance's, typed as ``Accepted``); ``overload_speedups``, which
    ``bbagent bench`` measures later, written after it, as bench writes them."""
    fields = dict(fields)
    speeds = fields.pop("overload_speedups", None)
    meta = install_accepted(root, source, Accepted(**{"op": op, **fields}))
    if speeds:
        meta = meta.model_copy(update={"overload_speedups": {op: OverloadSpeed(**speed) for op, speed in speeds.items()}})
        write_meta(root / "generated_kernels" / op, meta)
    return meta


def run_meta(op: str, run_id: str, **extra) -> dict:
    """What a run records of an accepted kernel (``agent.review.meta.Accepted``), with what these tests vary."""
    import torch
    import triton
    return {"op": op, "written_for": op, "serves": [op], "provider": "replay", "model": "m", "run_id": run_id,
            "round": 1, "rounds_used": 1, "tokens": {"input": 10, "output": 20}, "cost_usd": 0.01,
            "cost_complete": True, "tests": {"passed": 40, "total": 40},
            "versions": {"torch": torch.__version__, "triton": triton.__version__},
            "gpu": machine.this_machine().gpu, "device": "cpu",  # tested here: not stale here
            "accepted_at": "2026-11-20T00:00:00+00:00", "performance": {"measured": False, "reason": "CPU"},
            **extra}


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """relu: version 1 (approved) replaced by version 2 from a later run; add: one version with
    every flag raised."""
    monkeypatch.setenv("BBAGENT_REVIEWER", "ada")
    install(tmp_path, RELU, (KERNELS / "relu_triton.py").read_text(), run_meta(RELU, "run-a"))
    lifecycle.set_status(tmp_path / "generated_kernels" / RELU, "approved", "looked fine")
    install(tmp_path, RELU, (KERNELS / "relu_strided.py").read_text(), run_meta(RELU, "run-b"))
    performance = {"measured": True, "gpu": "NVIDIA H200",
                   "summary": speed_summary(12.5),
                   "shapes": [{"input": "T([1024], f32)", "aten_ms": 0.01, "kernel_ms": 0.0008, "speedup": 12.5}]}
    install(tmp_path, ADD, (KERNELS / "add_broadcast.py").read_text(),
            run_meta(ADD, "run-c", serves=[ADD, "aten.add_.Tensor", "aten.add.out"], performance=performance,
                     tolerance_used_max=0.97, cost_usd=0.5,
                     earlier_guard_findings=[{"round": 1, "message": "called aten.add.Tensor"}],
                     overload_speedups={"aten.add_.Tensor": {"geomean_speedup": 0.62, "gpu": "NVIDIA H200"}}))
    return tmp_path


def test_a_new_run_keeps_the_approved_version_and_serves_it_until_the_new_one_is_approved(tree):
    relu = find(tree, RELU)
    assert [v.number for v in relu.versions] == [2, 1]
    assert [v.status for v in relu.versions] == ["needs_review", "approved"]
    assert relu.current.meta.replaced.model_dump() == {"version": 1, "status": "approved", "run_id": "run-a",
                                             "where": "versions/1"}
    assert (tree / "generated_kernels" / RELU / "versions" / "1" / "kernel.py").read_text() == \
        (KERNELS / "relu_triton.py").read_text()
    assert relu.served().number == 1                              # the approved one, not the newer
    assert relu.served(include_unreviewed=True).number == 2
    # the same run's better kernel replaces its own unreviewed one in place: no new version
    install(tree, RELU, "# faster\n", run_meta(RELU, "run-b"))
    assert [v.number for v in find(tree, RELU).versions] == [2, 1]


def test_transitions_are_recorded_with_reviewer_time_and_note(tree, capsys):
    assert main(["review", "reject", RELU, "--root", str(tree)]) == 2
    assert "reject needs --note" in capsys.readouterr().err
    assert main(["review", "reject", RELU, "--note", "misses strides", "--root", str(tree)]) == 0
    assert main(["review", "approve", RELU, "--version", "1", "--note", "again", "--root", str(tree)]) == 0
    current, first = find(tree, RELU).versions
    assert current.status == "rejected" and current.meta.review.by == "ada"
    assert current.meta.review.note == "misses strides"
    assert [h.status for h in current.meta.review.history] == ["needs_review", "rejected"]
    assert [h.status for h in first.meta.review.history] == ["needs_review", "approved", "approved"]
    assert main(["review", "approve", RELU, "--version", "7", "--root", str(tree)]) == 2
    assert "has no version 7" in capsys.readouterr().err
    assert main(["review", "show", "aten.relu", "--root", str(tree)]) == 2
    assert "did you mean aten.relu.default" in capsys.readouterr().err


def test_an_approved_kernel_goes_stale_when_torch_triton_gpu_or_suite_change(tree, monkeypatch):
    lifecycle.set_status(tree / "generated_kernels" / ADD, "approved")
    meta = read_meta(tree / "generated_kernels" / ADD)
    here = machine.this_machine().as_dict()
    assert status_of(meta, here) == "approved"
    for key, value in (("torch", "9.9.9"), ("triton", "0.1"), ("suite", "0" * 16), ("gpu", "NVIDIA B200")):
        changed = {**here, key: value}
        assert status_of(meta, changed) == "stale", key
    # without a GPU here, a kernel tested on one is not called stale for that alone
    on_h200 = meta.model_copy(update={"tested_in": meta.tested_in.model_copy(update={"gpu": "NVIDIA H200"})})
    assert status_of(on_h200, {**here, "gpu": None}) == "approved"
    monkeypatch.setattr(lifecycle, "this_machine", lambda: machine.Machine(**{**here, "torch": "9.9.9"}))
    rows = listing(tree, status="stale")
    assert [r["op"] for r in rows] == [ADD] and rows[0]["changes"] == [f"torch {here['torch']} -> 9.9.9"]
    assert find(tree, RELU).served() is None            # its approved version 1 is stale too: nothing served


def test_diff_against_the_previous_version(tree, capsys):
    assert main(["review", "diff", RELU, "--root", str(tree)]) == 0
    text = capsys.readouterr().out
    assert f"--- {RELU} version 1 (approved)" in text and f"+++ {RELU} version 2 (needs_review)" in text
    removed = [line for line in text.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line for line in text.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert removed and added
    assert main(["review", "diff", ADD, "--root", str(tree)]) == 2
    assert "first accepted kernel" in capsys.readouterr().err


def test_flags_name_what_needs_a_second_look(tree):
    add = flags(find(tree, ADD).current.meta)
    assert any("12.5x over eager is above 10x" in f for f in add)
    assert any("used 97% of the dtype tolerance" in f for f in add)
    assert any("guard finding in round 1: called aten.add.Tensor" in f for f in add)
    assert any("aten.add_.Tensor is served at 0.62x eager" in f for f in add)
    assert any("not timed as served: aten.add.out" in f for f in add)
    assert flags(find(tree, RELU).current.meta) == []


def test_list_filters_sorts_numerically_and_prints_json(tree, capsys):
    install(tree, "aten.exp.default", (KERNELS / "exp_fast.py").read_text(),
            run_meta("aten.exp.default", "run-d", cost_usd=0.09))
    assert main(["review", "list", "--sort", "cost", "--json", "--root", str(tree)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["cost_usd"] for r in rows] == [0.5, 0.09, 0.01]     # numbers, largest first (not "0.5" < "0.09")
    assert main(["review", "list", "--status", "needs_review", "--family", "elementwise_unary", "--json",
                 "--root", str(tree)]) == 0
    assert [r["op"] for r in json.loads(capsys.readouterr().out)] == ["aten.exp.default", RELU]
    assert main(["review", "list", "--root", str(tree)]) == 0
    table = capsys.readouterr().out
    assert RELU in table and "needs_review" in table and "12.5x" in table


def test_meta_json_follows_its_schema(tree, capsys):
    for entry in (find(tree, RELU), find(tree, ADD)):
        for version in entry.versions:
            KernelMeta.model_validate(json.loads((version.folder / "meta.json").read_text()))
    broken = read_meta(tree / "generated_kernels" / ADD).as_json()
    broken["review"]["status"] = "maybe"
    with pytest.raises(ValueError):
        KernelMeta.model_validate(broken)
    # a folder written before the lifecycle existed reads as version 1, needs_review, and validates
    old = {k: v for k, v in run_meta(RELU, "run-0").items()}
    assert KernelMeta.model_validate(upgraded(old)).review.status == "needs_review"
    # and one from before variants were served (op alone) serves its own overload
    (tree / "old").mkdir()
    (tree / "old" / "meta.json").write_text(json.dumps({"op": RELU, "run_id": "run-0"}))
    assert read_meta(tree / "old").serves == [RELU] and read_meta(tree / "old").written_for == RELU
    assert main(["schema", "kernel-meta"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert {"schema", "version", "review", "tested_in"} <= set(schema["required"])


def test_an_undeclared_field_is_refused_when_written_and_kept_when_read(tree):
    """Issue 78: a new meta.json is assembled from declared fields only (a misspelt or unplanned
    field is bbagent's bug, refused before it is written); a field another version of bbagent wrote
    is read, tolerated, and written back as it was."""
    with pytest.raises(ValueError, match="speeed\n  Extra inputs are not permitted"):
        install(tree, "aten.exp.default", (KERNELS / "exp_fast.py").read_text(),
                {**run_meta("aten.exp.default", "run-x"), "speeed": 2.0})
    assert not (tree / "generated_kernels" / "aten.exp.default").exists()
    before = find(tree, RELU).current.meta
    with pytest.raises(ValueError, match="performance.roof"):  # refused before the current version moves aside
        install(tree, RELU, (KERNELS / "relu_triton.py").read_text(),
                {**run_meta(RELU, "run-x"), "performance": {"reason": "r", "roof": 1}})
    assert find(tree, RELU).current.meta == before
    folder = tree / "generated_kernels" / ADD
    document = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps({**document, "from_a_newer_bbagent": [1, 2]}))
    meta = read_meta(folder)
    write_meta(folder, meta)
    assert json.loads((folder / "meta.json").read_text())["from_a_newer_bbagent"] == [1, 2]


def accepted_verdict():
    """A passing, timed Verdict serving relu's family, as the harness hands it to the run."""
    from conftest import make_verdict
    stats = {"median_ms": 0.01, "mean_ms": 0.01, "std_ms": 0.0, "p20_ms": 0.01, "p80_ms": 0.01, "min_ms": 0.01,
             "reps": 10}
    timed = {"id": "trace-0", "input": "(T([1024], f32),)", "mode": "graph", "speedup": 1.25, "bytes": 8192,
             "overhead_dominated": False, "aten": stats, "candidate": {**stats, "median_ms": 0.008}}
    variants = [{"op": op, "convention": convention, "served_by": by, "planned": 4, "passed": 4, "failed": 0, "ok": True}
                for op, convention, by in ((RELU, "functional", "kernel"), ("aten.relu_.default", "inplace", "adapter"))]
    return make_verdict(verdict="pass", summary={"planned": 8, "total": 8, "passed": 8}, variants=variants,
                        environment={"torch": "2.11", "triton": "3.6", "gpu": "NVIDIA H200"},
                        performance={"measured": True, "gpu": "NVIDIA H200", "tests": [timed],
                                     "device": {"copy_gbs": 4000.0, "empty_launch_ms": 0.004,
                                                "empty_graph_launch_ms": 0.005},
                                     "summary": speed_summary(1.25, counted=1)})


def test_meta_json_is_one_dump_of_the_verdicts_own_parts(tmp_path):
    """Issue 78: meta.json is assembled from typed parts (what the Verdict says, who wrote it) that
    hold the Verdict's parts themselves (no dict between them and the record), meta.json is one dump
    of the record, its head says what it is, and reading it back validates to an equal record."""
    from bbagent.agent.review.record import authored_part, judged_part, kernel_readme
    from bbagent.agent.run_record import Tokens
    verdict = accepted_verdict()
    authored = authored_part(provider="replay", model="m", run_id="run-a", accepted_round=1,
                             tokens=Tokens(input=1, output=2), cost_usd=0.0, cost_complete=True, answers_paid_by=[],
                             rounds=[], target_speedup=1.0, target_baseline="eager")
    meta = install_accepted(tmp_path, (KERNELS / "relu_triton.py").read_text(),
                            Accepted.of(RELU, judged_part(RELU, verdict), authored))
    assert meta.summary is verdict.summary and meta.variants[1] is verdict.variants[1]
    assert meta.performance.summary is verdict.performance.summary
    assert meta.performance.device is verdict.performance.device
    assert meta.tests == verdict.test_counts()
    folder = tmp_path / "generated_kernels" / RELU
    assert json.loads((folder / "meta.json").read_text()) == meta.as_json()
    assert list(json.loads((folder / "meta.json").read_text()))[:4] == ["schema", "schema_version", "op", "version"]
    assert read_meta(folder) == meta
    assert meta.serves == [RELU, "aten.relu_.default"] and meta.performance.geomean_speedup == 1.25
    readme = kernel_readme(meta)
    assert "8/8 tests passed" in readme and "adapter copies the functional result into self" in readme
    assert "geomean 1.25x eager over 1 shapes" in readme


def test_older_meta_json_files_read_in_the_current_shape_and_lose_nothing(tmp_path):
    """Version 2 kept the Verdict's summary and counts in one ``tests`` dict and its parts as plain
    dicts; a file from before the typed Verdict may hold a part no model reads now: it is kept whole."""
    verdict = accepted_verdict()
    version_2 = {**run_meta(RELU, "run-0"), "schema": "bbagent.kernel-meta", "schema_version": 2, "version": 1,
                 "review": {"status": "approved", "by": "ada", "at": None, "note": "", "history": []},
                 "tested_in": {"torch": "2.11", "triton": "3.6", "gpu": "NVIDIA H200", "suite": "abc"},
                 "tests": {**verdict.summary.model_dump(), **verdict.test_counts().model_dump()},
                 "variants": [v.model_dump() for v in verdict.variants],
                 "performance": {"measured": True, "gpu": "NVIDIA H200",
                                 "device": verdict.performance.device.model_dump(),
                                 "summary": verdict.performance.summary.model_dump()}}
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "meta.json").write_text(json.dumps(version_2))
    meta = read_meta(tmp_path / "v2")
    assert meta.schema_version == 3 and meta.review.status == "approved" and meta.tested_in.suite == "abc"
    assert meta.tests == verdict.test_counts() and meta.summary == verdict.summary
    assert meta.variants == verdict.variants and meta.performance.geomean_speedup == 1.25
    assert not [key for key in meta.as_json() if key.endswith("_as_recorded")]

    older = {"op": RELU, "run_id": "run-0", "tests": {"passed": 5, "total": 6, "skipped": 1},
             "variants": [{"op": RELU, "ok": True}],
             "performance": {"measured": True, "summary": {"geomean": 2.0}}}
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "meta.json").write_text(json.dumps(older))
    meta = read_meta(tmp_path / "v1")
    assert (meta.version, meta.review.status) == (1, "needs_review")
    assert meta.tests.text() == "5/6 tests passed, 1 skipped" and meta.summary is None
    assert meta.variants == [] and meta.performance.measured is False
    assert "performance_as_recorded" in meta.performance.reason
    write_meta(tmp_path / "v1", meta)  # what a review decision does: the older parts stay in the file
    again = json.loads((tmp_path / "v1" / "meta.json").read_text())
    assert again["tests_as_recorded"] == older["tests"] and again["variants_as_recorded"] == older["variants"]
    assert again["performance_as_recorded"] == older["performance"] and again["schema_version"] == 3


def test_verify_retests_stale_kernels_and_records_the_outcome(tree, capsys):
    """Two stale approved kernels: a correct relu passes again (renewed, still approved); a wrong
    one (identity) fails and goes back to needs_review with the failure in its note."""
    folder = tree / "generated_kernels" / RELU
    (folder / "kernel.py").write_text((KERNELS / "relu_identity.py").read_text())
    for where in (folder, folder / "versions" / "1"):
        meta = read_meta(where)
        write_meta(where, meta.model_copy(update={"tested_in": meta.tested_in.model_copy(update={"torch": "2.0.0"})}))
        lifecycle.set_status(where, "approved")
    assert [v.status for v in find(tree, RELU).versions] == ["stale", "stale"]
    assert main(["review", "verify", RELU, "--json", "--root", str(tree)]) == 1
    results = {r["version"]: r for r in json.loads(capsys.readouterr().out)}
    assert results[1]["passed"] and results[1]["status"] == "approved"
    assert not results[2]["passed"] and results[2]["status"] == "needs_review"
    current, first = find(tree, RELU).versions
    assert first.status == "approved" and not lifecycle.changes(first.meta)
    assert first.meta.review.note.startswith("verified: ") and "was: torch 2.0.0" in first.meta.review.note
    assert current.status == "needs_review" and "verify failed" in current.meta.review.note
    assert (current.folder / "verify-verdict.json").is_file()
    assert main(["review", "verify", RELU, "--root", str(tree)]) == 0
    assert "nothing to verify" in capsys.readouterr().out


def test_generate_twice_keeps_the_approved_kernel_as_version_1_and_says_so(tmp_path, capsys, no_keys,
                                                                           demo_answers):
    """The real loop: a replayed correct answer accepted and approved; the same code from a second
    run changes nothing; another correct kernel from a third run becomes version 2."""
    replay = tmp_path / "relu.json"
    replay.write_text(json.dumps({"model": "replayed", "exchanges": [{"response": demo_answers[1]}]}))
    generate = ["generate", "--op", RELU, "--provider", "replay", "--replay", str(replay), "--rounds", "1",
                "--root", str(tmp_path)]
    assert main(generate) == 0
    first = read_meta(tmp_path / "generated_kernels" / RELU)
    assert first.version == 1 and first.review.status == "needs_review"
    assert first.tested_in.suite == machine.harness_fingerprint() and first.dtypes
    assert main(["review", "approve", RELU, "--root", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(generate) == 0
    said = capsys.readouterr()
    assert "same code as the current version 1" in said.err and "no new version" in said.err
    assert [v.number for v in find(tmp_path, RELU).versions] == [1] and find(tmp_path, RELU).current.status == "approved"
    other = (KERNELS / "relu_strided.py").read_text()
    replay.write_text(json.dumps({"model": "replayed", "exchanges": [{"response": f"```python\n{other}```"}]}))
    assert main(generate) == 0
    said = capsys.readouterr()
    assert "replaces approved version 1 as the current kernel; version 1 stays in versions/1/" in said.out + said.err
    relu = find(tmp_path, RELU)
    assert [(v.number, v.status) for v in relu.versions] == [(2, "needs_review"), (1, "approved")]
    assert relu.served().number == 1 and relu.versions[1].meta.run_id == first.run_id
    assert "It replaces version 1 (approved" in (relu.current.folder / "README.md").read_text()


def test_identical_kernels_are_no_new_version_and_keep_their_review(tmp_path, monkeypatch):
    """Issue 31: seven runs of the demo left versions 1-6 with one sha256, and a re-run after
    approval put the same code back to needs_review."""
    import hashlib
    monkeypatch.setenv("BBAGENT_REVIEWER", "ada")
    source = (KERNELS / "relu_triton.py").read_text()
    digest = hashlib.sha256(source.encode()).hexdigest()
    install(tmp_path, RELU, source, run_meta(RELU, "run-a", kernel_sha256=digest))
    lifecycle.set_status(tmp_path / "generated_kernels" / RELU, "approved", "fine")
    for run in ("run-b", "run-c"):
        kept = install(tmp_path, RELU, source, run_meta(RELU, run, kernel_sha256=digest))
        assert kept.run_id == "run-a" and kept.review.status == "approved"
    relu = find(tmp_path, RELU)
    assert [v.number for v in relu.versions] == [1] and relu.current.status == "approved"
    other = (KERNELS / "relu_strided.py").read_text()
    install(tmp_path, RELU, other, run_meta(RELU, "run-d", kernel_sha256=hashlib.sha256(other.encode()).hexdigest()))
    assert [v.number for v in find(tmp_path, RELU).versions] == [2, 1]  # other code: a new version


def test_review_takes_any_overload_a_kernel_serves_and_diffs_against_the_approved_version(tree, capsys):
    install(tree, RELU, (KERNELS / "relu_ignores_strides.py").read_text(),
            run_meta(RELU, "run-e", serves=[RELU, "aten.relu_.default", "aten.relu.out"]))  # version 3
    assert main(["review", "diff", "aten.relu_.default", "--root", str(tree)]) == 0
    text = capsys.readouterr().out
    assert f"--- {RELU} version 1 (approved)" in text and f"+++ {RELU} version 3 (needs_review)" in text
    assert main(["review", "diff", RELU, "--against", "2", "--root", str(tree)]) == 0
    assert f"--- {RELU} version 2 (needs_review)" in capsys.readouterr().out
    assert main(["review", "approve", "aten.relu_.default", "--root", str(tree)]) == 0
    assert find(tree, RELU).current.status == "approved"


def test_files_follow_the_users_umask(tmp_path, capsys):
    """Teammates on a shared checkout can read what bbagent writes (umask 022: 0755 and 0644)."""
    import stat
    old = os.umask(0o022)
    try:
        assert main(["generate", "--op", "aten.relu.default", "--provider", "replay", "--device", "cpu",
                     "--root", str(tmp_path)]) == 0
        assert main(["report", "--root", str(tmp_path)]) == 0
        assert main(["review", "approve", RELU, "--root", str(tmp_path)]) == 0
    finally:
        os.umask(old)
    folder = tmp_path / "generated_kernels" / RELU
    run = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    modes = {path.relative_to(tmp_path).as_posix(): stat.S_IMODE(path.stat().st_mode)
             for path in [folder, folder / "meta.json", folder / "kernel.py", run / "run.json", run / "report.html"]}
    assert modes[folder.relative_to(tmp_path).as_posix()] == 0o755, modes
    assert all(mode == 0o644 for name, mode in modes.items() if name != folder.relative_to(tmp_path).as_posix()), modes


def test_review_of_an_operator_that_failed_says_why(tmp_path, capsys):
    run = tmp_path / "runs" / "20261124-010000-aten.exp.default-abcd"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"op": "aten.exp.default", "status": "failed", "message":
                                              "no candidate passed in 5 round(s); closest: round 3, 97/98 tests passed"}))
    assert main(["review", "show", "aten.exp.default", "--root", str(tmp_path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"Its last run, {run.name}, failed: no candidate passed in 5 round(s); closest: round 3, 97/98" in err


def test_review_show_piped_prints_the_kernel_file_as_it_is(tree):
    """Piped (as `bbagent review show OP > kernel.py` is), stdout is the file itself: no line numbers,
    no trailing spaces; the review's facts go to stderr."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "bbagent", "review", "show", RELU, "--root", str(tree)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (KERNELS / "relu_strided.py").read_text()  # the current version, byte for byte
    assert "needs_review" in done.stderr and "folder:" in done.stderr and "Traceback" not in done.stderr


def test_kernels_and_runs_piped_are_lines_under_a_header_with_every_path_whole(tree):
    import subprocess
    import sys
    run = tree / "runs" / "20261120-000000-aten.relu.default-abcd"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"op": RELU, "status": "accepted", "cost_usd": 0.01}))

    def piped(*argv) -> list[str]:
        done = subprocess.run([sys.executable, "-m", "bbagent", *argv, "--root", str(tree)], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        return done.stdout.splitlines()
    header, *rows = piped("kernels")
    assert header.split("\t") == ["written for", "serves", "tests", "speed", "model", "folder"]
    assert len(rows) == 2 and all(Path(row.split("\t")[-1]).is_dir() for row in rows)  # each folder path whole
    header, *rows = piped("runs")
    assert header.split()[:4] == ["run", "kind", "status", "op"] and run.name in rows[0]


def test_broken_kernel_folders_are_listed_with_their_reason_and_take_nothing_down(tree, capsys):
    kernels = tree / "generated_kernels"
    (kernels / ADD / "meta.json").write_text("{not json")
    install(tree, "aten.exp.default", (KERNELS / "exp_fast.py").read_text(), run_meta("aten.exp.default", "run-d"))
    (kernels / "aten.exp.default" / "kernel.py").unlink()
    assert main(["review", "list", "--root", str(tree), "--json"]) == 0
    rows = {r["op"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[RELU]["status"] == "needs_review"                  # the sound kernel is still listed
    assert rows[ADD]["status"] == "broken" and "meta.json cannot be read" in rows[ADD]["flags"][0]
    assert rows["aten.exp.default"]["status"] == "broken" and "kernel.py is missing" in rows["aten.exp.default"]["flags"][0]
    assert main(["review", "list", "--root", str(tree)]) == 0
    captured = capsys.readouterr()
    assert "broken" in captured.out and "kernel.py is missing" in captured.err
    for command in (["review", "show", "aten.exp.default"], ["review", "show", ADD]):
        assert main(command + ["--root", str(tree)]) == 2            # said in words, never exit 70
        assert "is broken" in capsys.readouterr().err
    assert main(["kernels", "--root", str(tree), "--json"]) == 0
    statuses = {e["written_for"]: e["status"] for e in json.loads(capsys.readouterr().out)}
    assert statuses == {RELU: "needs_review", ADD: "broken", "aten.exp.default": "broken"}


def test_an_approval_pins_the_file_that_was_read(tree):
    folder = tree / "generated_kernels" / ADD
    lifecycle.set_status(folder, "approved", "read it")
    meta = read_meta(folder)
    assert meta.review.kernel_sha256 == lifecycle.file_sha256(folder / "kernel.py")
    assert status_of(meta, folder=folder) == "approved"
    (folder / "kernel.py").write_text((folder / "kernel.py").read_text() + "\n# one more line\n")
    assert status_of(meta, folder=folder) == "modified"
    assert find(tree, ADD).served() is None
    assert "modified since its approval" in lifecycle.modified_since_approval(folder, meta)


def test_the_kernels_listing_keeps_a_speed_reason_whole():
    """Issue 64, 9: the speed column was cut at the first semicolon, inside the reason's parentheses."""
    import io
    from rich.console import Console
    from bbagent.agent.reports.console import print_kernels
    reason = "timed on the CPU; the interpreter says nothing about speed"
    entry = {"written_for": "aten.relu.default", "serves": ["aten.relu.default"], "tests": {}, "status": "approved",
             "performance": {"measured": False, "reason": reason}, "provider": "openai", "model": "m", "dir": "/k"}
    buffer = io.StringIO()
    print_kernels(Console(file=buffer, force_terminal=False), [entry])
    assert f"not measured ({reason})" in buffer.getvalue().splitlines()[1].split("\t")


def test_review_show_in_a_narrow_terminal_wraps_the_kernels_lines_instead_of_cutting_them(tmp_path):
    """Issue 64, 7: a reviewer must see whole lines; the header comes before the code."""
    import io
    from argparse import Namespace
    from rich.console import Console
    from bbagent.agent.api.cli.review import _show
    long_line = "# the IEEE fallback of tl.dot is used for float32 inputs; " + "every word of this line must be seen " * 3
    install(tmp_path, RELU, (KERNELS / "relu_triton.py").read_text() + long_line + "\n", run_meta(RELU, "run-a"))
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=70, soft_wrap=True, highlight=False, color_system=None)
    _show(Namespace(op=RELU, root=str(tmp_path), version=None, json=False), terminal, terminal)
    shown = screen.getvalue()
    import re
    unnumbered = " ".join(re.sub(r"^\s*\d+ ", "", line).strip() for line in shown.splitlines())
    assert " ".join(long_line.split()) in unnumbered
    assert shown.index("version 1") < shown.index("import triton")


def test_an_edited_kernel_is_judged_before_it_is_approved_and_served(tmp_path, monkeypatch, capsys):
    """Issue 75, 2: the Verdict shown, the approval and the served file are one digest. An approved
    relu edited into a `kernel(...) + 1` wrapper is not served, shows no tests, is verified as stale,
    and `review approve` judges it and refuses; edited right, it is judged, recorded as version 2 with
    its own Verdict and approved, while version 1 keeps the file its tests judged."""
    import hashlib
    from bbagent.agent.review.verify import stale_versions
    monkeypatch.setenv("BBAGENT_REVIEWER", "ada")
    source = (KERNELS / "relu_triton.py").read_text()
    transcript = tmp_path / "runs" / "run-a" / "round-1"
    transcript.mkdir(parents=True)
    (transcript / "kernel.py").write_text(source)  # the run's copy of what its tests judged
    install(tmp_path, RELU, source, run_meta(RELU, "run-a", kernel_sha256=hashlib.sha256(source.encode()).hexdigest()))
    folder = tmp_path / "generated_kernels" / RELU
    root = ["--root", str(tmp_path)]
    assert main(["review", "approve", RELU, *root]) == 0  # the judged file: approved as it is
    assert "judged first" not in capsys.readouterr().out

    (folder / "kernel.py").write_text(source + "\n_judged = kernel\n\n\ndef kernel(self):\n    return _judged(self) + 1\n")
    relu = find(tmp_path, RELU)
    assert relu.current.status == "modified" and relu.served() is None
    assert "modified since its approval" in relu.current.unusable and "judges the file first" in relu.current.unusable
    assert main(["review", "show", RELU, *root]) == 0
    said = capsys.readouterr().err
    assert "tests: none of this file" in said and "tests passed" not in said and "unjudged" in said
    assert [(op, v.number) for op, v in stale_versions(tmp_path, RELU)] == [(RELU, 1)]

    assert main(["review", "approve", RELU, *root]) == 1
    said = capsys.readouterr().err
    assert "judging" in said and "not approved" in said and "fails them now" in said
    relu = find(tmp_path, RELU)
    assert [v.number for v in relu.versions] == [1] and relu.served() is None
    assert (folder / "review-verdict.json").is_file()
    assert main(["review", "verify", RELU, "--json", *root]) == 1  # verify judges it as approve did
    verified, = json.loads(capsys.readouterr().out)
    assert not verified["passed"] and verified["status"] == "needs_review" and "fails them now" in verified["note"]
    assert find(tmp_path, RELU).current.status == "modified"  # still no Verdict covers it: not served

    right = source + "\n# read and tidied by hand\n"
    (folder / "kernel.py").write_text(right)
    assert main(["review", "approve", RELU, *root]) == 0
    assert "judged first" in capsys.readouterr().out
    relu = find(tmp_path, RELU)
    assert [(v.number, v.status) for v in relu.versions] == [(2, "approved"), (1, "needs_review")]  # verify failed it
    assert relu.served().number == 2 and relu.current.meta.edited_from.version == 1
    assert relu.current.meta.kernel_sha256 == hashlib.sha256(right.encode()).hexdigest()
    assert relu.current.meta.review.kernel_sha256 == relu.current.meta.kernel_sha256
    assert relu.current.meta.tests.passed == relu.current.meta.tests.total > 0
    assert (folder / "versions" / "1" / "kernel.py").read_text() == source
    assert "edited by hand" in (folder / "README.md").read_text()
