"""What a new user trips on (issue 80): the machine refusing a write, signals, regions into a batch,
the KernelBench report, logs, messages from the wrong context, roots and JSON. Each test runs the
command as a user does and fails on the behaviour the issue reported."""
import errno
import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bbagent.agent.errors import refused_by_machine
from bbagent.agent.storage import write_atomic
from conftest import KERNELS


def _bbagent(*argv: str, cwd: Path, env: dict | None = None, preexec_fn=None, timeout: float = 300):
    return subprocess.run([sys.executable, "-m", "bbagent", *argv], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, preexec_fn=preexec_fn, timeout=timeout)


def _file_size_limit(limit: int):
    """For a child process: files may grow to ``limit`` bytes (EFBIG past it), as a full disk or a
    quota refuses a write; SIGXFSZ ignored so that the write fails instead of killing the process."""
    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return limited


# 1. The machine refusing a write is not a bug in bbagent

def test_a_run_on_a_disk_that_refuses_writes_exits_74_naming_the_fix_not_a_bug(tmp_path):
    done = _bbagent("generate", "--op", "aten.relu.default", "--provider", "replay", "--root", str(tmp_path / "root"),
                    cwd=tmp_path, preexec_fn=_file_size_limit(6000))
    assert done.returncode == 74, done.stdout + done.stderr
    assert "the machine refused" in done.stderr and "run again" in done.stderr, done.stderr
    assert "bug" not in done.stderr and "Traceback" not in done.stderr


def test_an_atomic_write_refused_names_its_file_and_leaves_no_temporary_file(tmp_path):
    script = ("import sys; from pathlib import Path; from bbagent.agent.storage import write_atomic\n"
              "from bbagent.agent.errors import refused_by_machine\n"
              "try:\n    write_atomic(Path(sys.argv[1]), 'x' * 100000)\n"
              "except OSError as exc:\n    print(refused_by_machine(exc))\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "run.json")], capture_output=True, text=True,
                          preexec_fn=_file_size_limit(4096), timeout=120)
    assert f"the machine refused at {tmp_path / 'run.json'}: File too large" in done.stdout, done.stdout + done.stderr
    assert list(tmp_path.iterdir()) == []
    write_atomic(tmp_path / "ok.json", "{}")  # without the limit it writes
    assert (tmp_path / "ok.json").read_text() == "{}"


def test_sqlite_full_is_the_machine_refusing_and_a_bug_stays_a_bug(tmp_path):
    db = sqlite3.connect(tmp_path / "log.sqlite")
    db.execute("PRAGMA max_page_count = 2")
    db.execute("CREATE TABLE t (x TEXT)")
    try:
        db.execute("INSERT INTO t VALUES (?)", ("x" * 100000,))
    except sqlite3.Error as exc:
        assert "No space left on device" in str(refused_by_machine(exc))
    else:
        raise AssertionError("SQLite took a row larger than its page limit")
    assert refused_by_machine(ValueError("a bug")) is None
    assert refused_by_machine(OSError(errno.EEXIST, "File exists")) is None
    assert "ulimit -n" in str(refused_by_machine(OSError(errno.EMFILE, "Too many open files")))


# 2. SIGTERM ends eval, generate and check-model as Ctrl-C does, temporary folders removed

def _stopped_by_sigterm(tmp_path: Path, argv: list[str], after: str, wait_s: float) -> tuple[int, str]:
    """Run ``argv`` with its own temporary folder, send SIGTERM ``wait_s`` seconds after ``after``
    appears on stderr; the exit code and stderr."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    process = subprocess.Popen([sys.executable, "-m", "bbagent", *argv], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(temp)})
    seen = ""
    while after not in seen:
        line = process.stderr.readline()
        assert line, f"{argv} ended before '{after}': {seen}"
        seen += line
    time.sleep(wait_s)
    process.send_signal(signal.SIGTERM)
    _, rest = process.communicate(timeout=120)
    left = [p.name for p in temp.iterdir() if p.name.startswith("bbagent-") and f"-{process.pid}-" in p.name]
    assert left == [], left
    return process.returncode, seen + rest


def test_sigterm_stops_eval_as_ctrl_c_does_and_removes_its_temporary_folders(tmp_path):
    code, err = _stopped_by_sigterm(tmp_path, ["eval", "--op", "aten.add.Tensor", "--kernel",
                                               str(KERNELS / "add_broadcast.py")], "evaluating", 4.0)
    assert code == 130 and "interrupted" in err and "Traceback" not in err, err


def test_sigterm_stops_generate_recording_the_run_as_interrupted(tmp_path):
    code, err = _stopped_by_sigterm(tmp_path, ["generate", "--op", "aten.relu.default", "--provider", "replay",
                                               "--root", str(tmp_path)], "evaluating the kernel", 2.0)
    assert code == 130 and "recorded as interrupted" in err and "Traceback" not in err, err
    [run] = (tmp_path / "runs").glob("*-aten.relu.default-*")
    assert json.loads((run / "run.json").read_text())["status"] == "interrupted"


def test_sigterm_stops_check_model_as_ctrl_c_does(tmp_path):
    from tests.test_check_model import TINY, approve
    approve(tmp_path, "aten.relu.default", "relu_triton.py")
    code, err = _stopped_by_sigterm(tmp_path, ["check-model", "--model", "transformer", "--device", "cpu", *TINY,
                                               "--root", str(tmp_path), "--include-slower"], "running", 3.0)
    assert code == 130 and "interrupted" in err and "Traceback" not in err, err


# 3. What `regions` writes is what `batch --kernelbench` takes; a failed `regions` leaves no folder

PROBLEMS = Path(__file__).parent / "problems"


def test_a_folder_of_numbered_problems_as_regions_writes_them_is_a_batch(tmp_path, no_keys):
    from fake_llm import FakeLLMServer
    from test_program_generate import fenced
    found = tmp_path / "runs" / "20261129-150000-regions-my_model-ab12"  # as `regions --script my_model.py` names it
    found.mkdir(parents=True)
    (found / "1_pointwise_0a1b2c3d.py").write_text((PROBLEMS / "level1" / "1_ReLU.py").read_text())
    (found / "2_reduction_4e5f6a7b.py").write_text((PROBLEMS / "level1" / "4_Softmax.py").read_text())
    with FakeLLMServer().answer_by_op({"`1_pointwise_0a1b2c3d`": fenced("relu_right"),
                                       "`2_reduction_4e5f6a7b`": fenced("softmax_right")}) as server:
        done = _bbagent("batch", "--kernelbench", str(found), "--provider", "openai", "--model", "gpt-test",
                        "--base-url", server.url + "/v1", "--root", str(tmp_path), "--device", "cpu", "--rounds", "1",
                        "--timeout", "120", cwd=tmp_path, env={"OPENAI_API_KEY": "sk-test"}, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    for name in ("1_pointwise_0a1b2c3d", "2_reduction_4e5f6a7b"):
        assert (tmp_path / "generated_kernels" / "kernelbench" / "other" / name / "kernel.py").is_file()
    refused = _bbagent("batch", "--kernelbench", str(found), "--level", "1", "--provider", "replay", cwd=tmp_path)
    assert refused.returncode == 2 and "drop --level" in refused.stderr, refused.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = _bbagent("batch", "--kernelbench", str(empty), "--provider", "replay", cwd=tmp_path)
    assert refused.returncode == 2 and "no numbered problem files" in refused.stderr, refused.stderr


def test_a_failed_regions_leaves_no_empty_run_folder(tmp_path):
    (tmp_path / "broken.py").write_text("class Model(:\n")
    for script, said in (("missing.py", "no such file"), ("broken.py", "not a Python file")):
        done = _bbagent("regions", "--script", script, "--device", "cpu", "--root", str(tmp_path), cwd=tmp_path)
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert list((tmp_path / "runs").glob("*regions*")) == []


# 4. The KernelBench levels say "not timed" where nothing was timed, never 0%

def test_kernelbench_levels_untimed_say_not_timed_in_summary_and_report(tmp_path):
    from bbagent.agent.batch.runner import _levels_md, by_level
    from bbagent.agent.reports.html import collect, render
    from tests.test_report import batch as report_batch
    row = {"state": "accepted", "best_speedup": None, "baseline_speedups": None}
    levels = by_level([{**row, "op": "kernelbench/level1/1_ReLU"}, {**row, "op": "kernelbench/level1/4_Softmax"},
                       {**row, "op": "kernelbench/level2/1_Gemm", "best_speedup": 1.6,
                        "baseline_speedups": {"inductor": 0.9}},
                       {**row, "op": "kernelbench/level2/2_Gemm", "state": "failed"}])
    assert levels["level1"]["fast_p_eager"] == {"0": 1.0, "1": None, "1.5": None, "2": None}
    assert levels["level2"]["fast_p_eager"] == {"0": 0.5, "1": 0.5, "1.5": 0.5, "2": 0.0}
    assert levels["level2"]["fast_p_compile"]["1"] == 0.0  # timed against inductor, and slower
    table = "\n".join(_levels_md(levels))
    assert "| level1 | 2 | 0 | 2 | 2 | not timed | not timed |" in table, table
    assert "| level2 | 2 | 0 | 1 | 0 | 50% / 50% / 0% | 0% / 0% / 0% |" in table, table
    data = collect(report_batch.__wrapped__(tmp_path), None)
    data["levels"] = levels
    page = render(data, tmp_path / "report.html")
    level1 = page.split("<td>level1</td>")[1].split("</tr>")[0]
    assert level1.count("not timed") == 2 and "0%" not in level1, level1


# 5. Without prices the most expensive operators are ranked by tokens; the table fits the window

def test_most_expensive_operators_without_prices_are_ranked_by_tokens(tmp_path):
    from bbagent.agent.reports.html import collect, render
    from tests.test_report import batch as report_batch
    data = collect(report_batch.__wrapped__(tmp_path), None)
    spent = {"aten.relu.default": 1000, "aten.exp.default": 3000, "aten.add.Tensor": 2000, "aten.mm.default": 9000}
    for o in data["ops"]:
        o["cost_known"], o["cost_usd"], o["tokens"] = False, 0.0, spent[o["op"]]
    page = render(data, tmp_path / "report.html")
    table = page.split('id="costliest"')[1].split("</table>")[0]
    order = [op for op in spent if op in table]
    assert sorted(order, key=table.index) == ["aten.mm.default", "aten.exp.default", "aten.add.Tensor",
                                              "aten.relu.default"], table
    assert "Ranked by tokens" in page and "9,000" in table
    priced = collect(tmp_path, None)  # every price known: ranked by dollars, as before
    page = render(priced, tmp_path / "report.html")
    table = page.split('id="costliest"')[1].split("</table>")[0]
    assert table.index("aten.mm.default") < table.index("aten.exp.default") < table.index("aten.relu.default")
    assert "Ranked by tokens" not in page


def _chromium() -> str | None:
    import shutil
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(_chromium() is None, reason="no Chromium here (.ci/run installs Debian's chromium as root; "
                                                "apt-get install chromium)")
def test_the_report_fits_a_1400px_window_with_long_errors_and_paths(tmp_path):
    from bbagent.agent.batch.ledger import Ledger
    from bbagent.agent.reports.html import write_report
    from tests.test_report import batch as report_batch
    root = report_batch.__wrapped__(tmp_path)
    ledger = Ledger(next((root / "runs").glob("batch-*")) / "ledger.sqlite")
    op = "aten.native_layer_norm.default"
    ledger.add([op])
    ledger.claim(60)
    ledger.finish(op, "failed", run_id=f"20261123-010900-{op}-0000", rounds=5, cost_usd=0.2, error_class="mismatch",
                  error="every round failed: " + f"/tmp/bbagent-cand-12345-abcdefgh/{op}/round_5/kernel.py:"
                  "T([8192,4096],bf16)->T([8192,4096],bf16)_max_abs_error_1.5e+00" * 3)
    page = write_report(root, None, tmp_path / "report.html")
    page.write_text(page.read_text().replace(
        "</body>", "<script>document.body.dataset.width = document.documentElement.scrollWidth</script></body>"))
    dom = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--window-size=1400,1000", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                          page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    width = int(dom.split('data-width="')[1].split('"')[0])
    assert width <= 1400, width


# 6. logs: by batch, the last N, a search, one call whole, JSON of messages

def _logged(root: Path) -> None:
    from bbagent.agent.providers.call_log import FILE_NAME, LLMLog
    log = LLMLog(root / "runs" / FILE_NAME)
    for n, (run, batch, op, answer) in enumerate([
            ("20261129-010000-aten.relu.default-aaaa", "batch-20261129-010000-abcd", "aten.relu.default",
             "```python\ndef relu_kernel(): ...\n```"),
            ("20261129-010100-aten.exp.default-bbbb", "batch-20261129-010000-abcd", "aten.exp.default",
             "```python\ndef exp_kernel(): tl.exp(x)\n```"),
            ("20261129-020000-aten.relu.default-cccc", None, "aten.relu.default", "```python\ndef relu2(): ...\n```")]):
        messages = [{"role": "system", "content": "You write Triton kernels."},
                    {"role": "user", "content": f"Write {op} as a Triton kernel (call {n})."}]
        log.record(run_id=run, op=op, round=1, candidate=0, provider="openai", model="gpt-test", request_hash=str(n),
                   params=json.dumps({"candidate": 0}), prompt=json.dumps(messages), response=answer, input_tokens=10,
                   output_tokens=20, cost_usd=None, latency_s=1.5, cached=0, endpoint=None, batch_id=batch)


def test_logs_filter_by_batch_count_and_search_and_show_one_call_whole(tmp_path):
    _logged(tmp_path)

    def logs(*argv: str):
        done = _bbagent("logs", "--root", str(tmp_path), *argv, cwd=tmp_path)
        assert "Traceback" not in done.stderr
        return done

    def ops_of(*argv: str) -> list[str]:
        done = logs(*argv, "--json")
        assert done.returncode == 0, done.stderr
        return [call["op"] for call in json.loads(done.stdout)]

    assert ops_of("--run", "batch-20261129-010000-abcd") == ["aten.relu.default", "aten.exp.default"]
    assert ops_of("--run", "20261129-020000-aten.relu.default-cccc") == ["aten.relu.default"]
    assert ops_of("-n", "1") == ["aten.relu.default"] and len(ops_of("-n", "2")) == 2 and len(ops_of("-n", "0")) == 3
    assert ops_of("-q", "TL.EXP") == ["aten.exp.default"]  # the answer searched, whatever the case
    assert ops_of("-q", "call 2") == ["aten.relu.default"]  # the prompt searched
    assert ops_of("-q", "triton", "-q", "exp") == ["aten.exp.default"]
    [call] = json.loads(logs("--json", "-n", "1").stdout)
    assert call["messages"][1] == {"role": "user", "content": "Write aten.relu.default as a Triton kernel (call 2)."}
    assert call["params"] == {"candidate": 0} and "prompt" not in call
    whole = logs("--id", "2")
    assert whole.returncode == 0, whole.stderr
    assert "--- system ---\nYou write Triton kernels." in whole.stdout and "tl.exp(x)" in whole.stdout
    assert json.loads(logs("--id", "2", "--json").stdout)["op"] == "aten.exp.default"
    missing = logs("--id", "99")
    assert missing.returncode == 2 and "no recorded call numbered 99" in missing.stderr
    assert logs("-n", "-1").returncode == 2
    assert "no recorded call matches -q nothing-like-this" in logs("-q", "nothing-like-this").stderr
    table = logs("--run", "batch-20261129-010000-abcd").stdout  # piped: names whole on one line, to copy
    assert "20261129-010000-aten.relu.default-aaaa" in table and "20261129-010100-aten.exp.default-bbbb" in table


# 7. Messages from the right context

def test_generate_problem_does_not_call_the_program_a_calling_convention(tmp_path):
    from test_program_generate import RELU, fenced
    replay = tmp_path / "answers.json"
    replay.write_text(json.dumps({"model": "replay-test", "exchanges": [{"response": fenced("relu_right")}]}))
    done = _bbagent("generate", "--problem", str(RELU), "--provider", "replay", "--replay", str(replay), "--rounds",
                    "1", "--root", str(tmp_path), "--device", "cpu", cwd=tmp_path)
    assert "bbagent generate kernelbench/level1/1_ReLU" in done.stderr, done.stderr
    assert "calling convention" not in done.stderr and "--exact-overload" not in done.stderr, done.stderr
    variant = _bbagent("prompt", "--op", "aten.relu_.default", cwd=tmp_path)
    assert "aten.relu_.default is a calling convention of aten.relu.default" in variant.stderr, variant.stderr


def test_review_of_a_kernel_not_there_suggests_only_names_alike(tmp_path):
    from tests.test_check_model import approve
    approve(tmp_path, "aten.relu.default", "relu_triton.py")
    unrelated = _bbagent("review", "reject", "aten.cat.default", "--note", "x", "--root", str(tmp_path), cwd=tmp_path)
    assert unrelated.returncode == 2 and "did you mean" not in unrelated.stderr, unrelated.stderr
    assert "the kernels here are for aten.relu.default" in unrelated.stderr
    slip = _bbagent("review", "show", "aten.rel.default", "--root", str(tmp_path), cwd=tmp_path)
    assert slip.returncode == 2 and "did you mean aten.relu.default?" in slip.stderr, slip.stderr


def test_check_model_counts_calls_made_inside_other_operators_as_calls_in_the_model(tmp_path):
    from rich.console import Console

    from bbagent.agent.reports.console import print_check_model
    from tests.test_check_model import approve, check
    approve(tmp_path, "aten.index_select.default", "index_select.py", dtypes=("float32", "int64"))
    code, result = check(tmp_path)
    served = result["served"]["aten.index_select.default"]
    assert code == 0 and served["calls"] >= 1, result
    assert "aten.index_select.default" not in result["ops_run"]  # the embedding calls it, inside its kernel
    assert served["model_calls"] == served["calls"] == served["calls_inside_other_ops"]
    printed = Console(record=True, width=300)
    print_check_model(printed, result)
    text = printed.export_text()
    assert f"{served['calls']} ({served['calls']} inside other operators)" in text, text


def test_runs_says_unknown_for_a_run_whose_call_was_lost_at_a_kill(tmp_path, no_keys):
    from bbagent.agent.providers.call_log import FILE_NAME, IN_FLIGHT, LLMLog
    from fake_llm import FakeLLMServer
    with FakeLLMServer().answer("no answer in time").latency(60.0) as server:
        process = subprocess.Popen([sys.executable, "-m", "bbagent", "generate", "--op", "aten.relu.default",
                                    "--provider", "openai", "--model", "gpt-5", "--base-url", server.url + "/v1",
                                    "--root", str(tmp_path), "--device", "cpu"], cwd=tmp_path,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env={**os.environ, "OPENAI_API_KEY": "sk-test"})
        deadline = time.monotonic() + 120
        while not ((tmp_path / "runs" / FILE_NAME).is_file()
                   and any(c["error"] == IN_FLIGHT for c in LLMLog(tmp_path / "runs" / FILE_NAME).calls())):
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.2)
        process.kill()  # kill -9: the call in flight is lost, and what it cost is unknown
        process.wait()
    listed = _bbagent("runs", "--root", str(tmp_path), cwd=tmp_path)
    [line] = [line for line in listed.stdout.splitlines() if "aten.relu.default" in line]
    assert "interrupted" in line and "unknown (a call in flight" in line and "$0.0000" not in line, listed.stdout
    [row] = json.loads(_bbagent("runs", "--root", str(tmp_path), "--json", cwd=tmp_path).stdout)
    assert row["cost_complete"] is False and row["call_in_flight"] is True


# 8. Roots made alike; with --json an error is JSON on stdout too

def test_eval_makes_a_new_root_as_generate_does_but_reading_needs_one_that_exists(tmp_path):
    new = tmp_path / "new-root"
    done = _bbagent("eval", "--op", "aten.relu.default", "--kernel", str(KERNELS / "relu_triton.py"), "--root",
                    str(new), "--json", cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["verdict"] == "pass", done.stderr
    assert (new / "runs").is_dir()
    read = _bbagent("eval", "--op", "aten.relu.default", "--root", str(tmp_path / "typo"), cwd=tmp_path)
    assert read.returncode == 2 and "does not exist" in read.stderr and not (tmp_path / "typo").exists()


def test_with_json_every_error_is_one_json_object_on_stdout(tmp_path):
    for argv, kind in ((["logs", "--json", "-n", "x"], "usage"),  # argparse's own refusal
                       (["eval", "--op", "aten.relu.default", "--kernel", "nope.py", "--json"], "usage"),
                       (["kernels", "--root", str(tmp_path / "nowhere"), "--json"], "usage")):
        done = _bbagent(*argv, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        error = json.loads(done.stdout)["error"]
        assert error["kind"] == kind and error["exit_code"] == 2 and error["message"] in done.stderr, done.stdout
    plain = _bbagent("logs", "-n", "x", cwd=tmp_path)  # without --json: stdout stays empty
    assert plain.returncode == 2 and plain.stdout == ""


# 9. KernelBench's workflow: several samples per problem, and results its analysis reads

def test_first_round_answers_are_kernelbench_samples_with_pass_at_k(tmp_path, no_keys):
    from bbagent.agent.review.kernelbench_results import pass_at_k
    from fake_llm import FakeLLMServer
    from test_program_generate import RELU, fenced
    with FakeLLMServer().answer(fenced("relu_right"), fenced("relu_copy"), "I cannot write this one.") as server:
        done = _bbagent("generate", "--problem", str(RELU), "--candidates", "3", "--rounds", "1", "--provider", "openai",
                        "--model", "gpt-test", "--base-url", server.url + "/v1", "--root", str(tmp_path), "--device",
                        "cpu", "--timeout", "120", cwd=tmp_path, env={"OPENAI_API_KEY": "sk-test"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "KernelBench-runs"
    exported = _bbagent("export", "--kernelbench", str(out), "--samples", "first-round", "--root", str(tmp_path),
                        cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    files = sorted(p.name for p in (out / "level1").iterdir())
    assert files == [f"level_1_problem_1_sample_{s}_kernel.py" for s in range(3)]
    assert "run_name=level1 level=1" in exported.stdout and "num_samples_per_problem=3" in exported.stdout
    results = json.loads((out / "bbagent-level1" / "eval_results.json").read_text())
    by_sample = {r["sample_id"]: r for r in results["1"]}
    assert sorted((r["correctness"], r["compiled"]) for r in by_sample.values()) == \
        [(False, False), (False, True), (True, True)]  # no code, a wrong copy, the right one
    assert "no code block" in (out / "level1" / next(
        f for f in files if by_sample[int(f.split("_")[5])]["metadata"].get("error_kind") == "no_code")).read_text()
    summary = json.loads((out / "bbagent-level1" / "pass_at_k_results.json").read_text())
    assert summary["problems"]["1"] == {"total_samples": 3, "correct_samples": 1, "pass@1": pass_at_k(3, 1, 1)}
    assert abs(summary["averages"]["avg_pass@1"] - 1 / 3) < 1e-9
    assert pass_at_k(3, 1, 2) == 1 - 1 / 3 and pass_at_k(5, 0, 3) == 0.0 and pass_at_k(4, 3, 2) == 1.0
    manifest = json.loads((out / "bbagent_export.json").read_text())
    assert manifest["samples"] == "first-round" and len(manifest["written"]) == 3
