"""``bbagent report`` on a fixture batch: the funnel, failures shown as failures, links, and the
page rendered by headless Chromium to a PNG in which the charts are visible."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bbagent.agent.batch.ledger import Ledger
from bbagent.cli import main
from bbagent.agent.reports.html import collect, fast_p_curve, funnel
from bbagent.agent.review import lifecycle
from conftest import speed_summary
from tests.test_review import KERNELS, install, run_meta

SHOTS = os.environ.get("BBAGENT_REPORT_SCREENSHOT")  # where to keep the PNG (the note's screenshot)


def timed(speedup: float, sizes=(1e4, 1e6, 1e8)) -> dict:
    shapes = [{"input": f"T([{int(b / 4)}], f32)", "bytes": int(b), "speedup": speedup * (0.7 + 0.15 * i),
               "aten_ms": 0.01, "kernel_ms": 0.01} for i, b in enumerate(sizes)]
    return {"measured": True, "gpu": "NVIDIA H200", "summary": speed_summary(speedup, counted=len(shapes)),
            "shapes": shapes}


@pytest.fixture
def batch(tmp_path):
    """Five operators: three accepted (1.6x approved, 0.8x, 1.1x), one failed, one skipped."""
    outcomes = {"aten.relu.default": ("relu_triton.py", 1.6, 0.02, 1), "aten.exp.default": ("exp_fast.py", 0.8, 0.05, 3),
                "aten.add.Tensor": ("add_broadcast.py", 1.1, 0.04, 2)}
    batch_dir = tmp_path / "runs" / "batch-20261123-010000-abcd"
    batch_dir.mkdir(parents=True)
    ledger = Ledger(batch_dir / "ledger.sqlite")
    ledger.add([*outcomes, "aten.mm.default", "aten.relu_.default"],
               skipped={"aten.relu_.default": "the kernel asked for aten.relu.default serves it"})
    for op, (kernel, speedup, cost, rounds) in outcomes.items():
        run_id = f"20261123-0100{rounds}0-{op}-0000"
        (tmp_path / "runs" / run_id).mkdir()
        install(tmp_path, op, (KERNELS / kernel).read_text(),
                run_meta(op, run_id, performance=timed(speedup), cost_usd=cost))
        ledger.claim(60)
        ledger.finish(op, "accepted", run_id=run_id, rounds=rounds, best_speedup=speedup, cost_usd=cost)
    lifecycle.set_status(tmp_path / "generated_kernels" / "aten.relu.default", "approved")
    ledger.claim(60)
    ledger.finish("aten.mm.default", "failed", run_id="20261123-010500-aten.mm.default-0000", rounds=5,
                  cost_usd=0.11, error_class="mismatch", error="every round failed: values differ")
    return tmp_path


def test_rows_funnel_and_fast_p_count_failures_as_failures(batch):
    data = collect(batch, None)
    ops = {o["op"]: o for o in data["ops"]}
    assert set(ops) == {"aten.relu.default", "aten.exp.default", "aten.add.Tensor", "aten.mm.default"}
    assert ops["aten.mm.default"]["speedup"] is None and ops["aten.mm.default"]["state"] == "failed"
    assert funnel(data["ops"]) == [("asked", 4), ("correct", 3), ("faster than eager", 2), ("approved", 1)]
    ps, shares = fast_p_curve(data["ops"])
    assert shares[0] == 0.75                    # p = 0: the three correct of four asked, not four of four
    assert shares[ps.index(next(p for p in ps if p > 1.2))] == 0.25


def test_report_is_one_offline_page_with_charts_links_and_failures(batch, capsys):
    assert main(["report", "--root", str(batch)]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path == batch / "runs" / "batch-20261123-010000-abcd" / "report.html"
    page = path.read_text()
    assert page.count("<svg") == 4                                      # speedups, fast_p, shapes, cost/rounds
    assert not re.search(r"""(src|href)=["']https?://""", page)         # nothing fetched when it opens
    assert "FAILED (mismatch)" in page                                  # drawn as a failure, not as 1.0x
    assert 'href="../../generated_kernels/aten.relu.default/kernel.py"' in page
    assert "every round failed: values differ" in page
    assert main(["report", "batch-nope", "--root", str(batch)]) == 2
    assert "no batch or run 'batch-nope'" in capsys.readouterr().err
    broken = batch / "runs" / "aten.relu.default-20261123-020000-dead"
    broken.mkdir()
    (broken / "run.json").write_text('{"op": 3}')  # there, but not a run record
    assert main(["report", broken.name, "--root", str(batch)]) == 2
    err = capsys.readouterr().err
    assert f"run '{broken.name}' cannot be reported" in err and "is not a bbagent run record" in err, err
    assert "Traceback" not in err


def test_without_matplotlib_the_report_has_its_tables_and_says_how_to_get_the_charts(batch, capsys, monkeypatch):
    """matplotlib is an optional extra: without it, `report` still writes the page (exit 0, not an
    internal error), with one line on the page and one on stderr naming the install."""
    import sys
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    assert main(["report", "--root", str(batch)]) == 0
    captured = capsys.readouterr()
    assert "pip install 'bbagent[report]'" in captured.err
    page = Path(captured.out.strip()).read_text()
    assert "<svg" not in page and "bbagent[report]" in page
    assert "every round failed: values differ" in page  # the operators' table is whole


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(chromium() is None, reason="no Chromium here (.ci/run installs Debian's chromium as root; "
                                               "apt-get install chromium)")
def test_chromium_renders_the_report_with_its_charts_visible(batch, tmp_path, capsys):
    """Headless Chromium screenshots the page; the PNG must be a real rendering: the charts' colours
    (the green bar of a faster kernel, the fast_p curve's blue) appear in many pixels."""
    assert main(["report", "--root", str(batch), "--out", str(tmp_path / "report.html")]) == 0
    png = Path(SHOTS) if SHOTS else tmp_path / "report.png"
    done = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'profile'}", "--hide-scrollbars",
                           "--window-size=1200,2600", f"--screenshot={png}", (tmp_path / "report.html").as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert png.is_file() and png.stat().st_size > 20_000, done.stderr[-2000:]
    from matplotlib.image import imread
    pixels = imread(png)[:, :, :3]
    green = ((abs(pixels[:, :, 0] - 0x2e / 255) < 0.05) & (abs(pixels[:, :, 1] - 0x7d / 255) < 0.05)
             & (abs(pixels[:, :, 2] - 0x32 / 255) < 0.05)).sum()
    blue = ((abs(pixels[:, :, 0] - 0x15 / 255) < 0.08) & (abs(pixels[:, :, 1] - 0x65 / 255) < 0.08)
            & (abs(pixels[:, :, 2] - 0xc0 / 255) < 0.08)).sum()
    assert green > 500 and blue > 100, (green, blue)
    dom = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", (tmp_path / "report.html").as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    for section in ('id="operators"', 'id="rounds"', 'id="families"', "Against the previous batch"):
        assert section in dom, section  # the sections issue 47 added, as the browser built the page


def test_a_cpu_batch_report_says_why_each_failure_failed_with_its_metadata_and_no_empty_charts(tmp_path, capsys):
    """Issue 31: a real batch on the CPU, one operator accepted and one whose answers held no code:
    the page names the failure's cause, the run's metadata and files, draws no speed chart where
    nothing was timed (one line says why), and `report` with no id after a `generate` shows that run."""
    import json
    from bbagent import batch as run_batch
    replays = tmp_path / "replays"
    replays.mkdir()
    relu = (KERNELS / "relu_triton.py").read_text()
    (replays / "aten.relu.default.json").write_text(json.dumps({"model": "a-recorded-model",  # no price: a replay costs $0
                                                                "exchanges": [{"response": f"```python\n{relu}```"}]}))
    (replays / "aten.exp.default.json").write_text(json.dumps({"exchanges": [{"response": "Sorry, no."}]}))
    result = run_batch(["aten.relu.default", "aten.exp.default"], root=tmp_path, provider="replay",
                       replay=str(replays), rounds=1, device="cpu", timeout_s=120, jobs=1)
    assert result.counts["accepted"] == 1 and result.counts["failed"] == 1
    assert main(["report", "--root", str(tmp_path)]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path == result.path / "report.html"
    page = path.read_text()
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert "no code block in the answer of round(s) 1" in text  # the failure's own cause
    assert "2 operators asked" in text
    for label in ("started", "running time", "evaluated on", "torch / triton", "provider / model", "options"):
        assert f"{label} " in text, label
    assert "replay / -" in text and "cpu (Triton interpreter)" in text and "(jobs 1)" in text and "2.13" in text
    for name in ("summary.md", "ledger.sqlite", "events.jsonl"):
        assert f'href="{name}"' in page, name
    assert "LLM cost $0.0000" in text and "unknown" not in text
    assert "No speed charts: no correct kernel was timed" in text and 'id="chart-speedups"' not in page
    assert 'id="chart-fast-p"' not in page and 'class="sortable"' in page
    if SHOTS:  # the note's screenshot of this page
        subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,1400",
                        f"--screenshot={Path(SHOTS).with_name('report-cpu-batch.png')}", path.as_uri()],
                       capture_output=True, timeout=120)

    # issue 47: per-operator test counts, each round's history, pass rate by family
    assert 'id="rounds"' in page and 'id="families"' in page and 'id="comparison-none"' in page
    assert "aten.relu.default 1 pass" in text  # its history: round 1 passed
    assert "elementwise_unary 2 1 50%" in text and "No earlier batch under this root" in text  # relu and exp
    relu_row = re.search(r"<tr>\s*<td>aten\.relu\.default</td>(.*?)</tr>", page, re.S).group(1)
    assert re.search(r">\d+/\d+( \+\d+ not run)?<", relu_row)  # its tests passed of total
    # a second batch in the same root is compared with the first
    (replays / "aten.exp.default.json").write_text(json.dumps({"exchanges": [{"response": f"```python\n{relu}```"}]}))
    again = run_batch(["aten.relu.default", "aten.exp.default"], root=tmp_path, provider="replay", force=True,
                      replay=str(replays), rounds=1, device="cpu", timeout_s=120, jobs=1)
    assert main(["report", "--root", str(tmp_path), again.path.name]) == 0
    second = Path(capsys.readouterr().out.strip()).read_text()
    second_text = " ".join(re.sub(r"<[^>]+>", " ", second).split())
    assert f"Against {result.path.name}, for the 2 operators both asked" in second_text
    assert 'id="comparison"' in second and "aten.exp.default failed failed" in second_text  # relu's kernel is no exp

    # after a single generate, `report` with no id draws that run
    code = main(["generate", "--op", "aten.exp.default", "--provider", "replay", "--replay",
                 str(replays / "aten.exp.default.json"), "--rounds", "1", "--device", "cpu", "--root", str(tmp_path)])
    assert code == 1
    capsys.readouterr()
    assert main(["report", "--root", str(tmp_path)]) == 0
    page = Path(capsys.readouterr().out.strip()).read_text()
    assert "bbagent report: run " in page and "aten.exp.default" in page and "1 operator asked" in page


def test_an_unknown_price_is_shown_as_unknown_never_as_zero(batch):
    data = collect(batch, None)
    for o in data["ops"]:
        o["cost_known"], o["cost_usd"] = False, 0.0
    from bbagent.agent.reports.html import render
    page = render(data, batch / "runs" / "x.html")
    assert "LLM cost unknown (no price for the model)" in page and "$0.0000" not in page


def test_the_report_shows_a_failures_closest_round_flags_the_untimed_and_who_paid(batch):
    """Issue 64, 6: a failed operator's tests came from its last round while "why it failed"
    quoted another; a flag raised on a kernel was missing; "faster than eager: 0" stood where
    nothing was timed; the slowest operators section vanished; a run that reused logged answers
    linked only to itself."""
    from bbagent.agent.reports.html import render
    from bbagent.agent.run_record import RunRecord

    def counts(passed: int) -> dict:
        return {"passed": passed, "total": 40}
    mm_run = "20261123-010500-aten.mm.default-0000"
    RunRecord.model_validate({
        "op": "aten.mm.default", "status": "failed", "answers_paid_by": ["20261122-230000-aten.mm.default-1111"],
        "rounds": [{"round": n, "outcome": "fail", "counts": counts(passed)} for n, passed in ((1, 3), (2, 31), (3, 0))],
        "why_failed": {"rounds": 3, "best_round": 2, "passed": 31, "total": 40}}).write(batch / "runs" / mm_run)
    relu = batch / "generated_kernels" / "aten.relu.default" / "meta.json"
    meta = json.loads(relu.read_text())
    relu.write_text(json.dumps({**meta, "tolerance_used_max": 8.81}))
    data = collect(batch, "batch-20261123-010000-abcd")
    mm = next(o for o in data["ops"] if o["op"] == "aten.mm.default")
    assert mm["tests"]["text"].startswith("31/40") and "closest: round 2, 31/40 tests passed" in mm["error"]
    page = render(data, batch / "runs" / "report.html")
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert "a passing result used 881% of the dtype tolerance" in text
    assert "answers paid by 20261122-230000-aten.mm.default-1111" in text
    assert 'id="slowest"' in page
    for o in data["ops"]:
        o["speedup"], o["untimed"] = None, "timed on the CPU"
    assert ("faster than eager", "not timed") in funnel(data["ops"])
    untimed = render(data, batch / "runs" / "report.html")
    assert 'id="slowest"' in untimed and "none timed" in untimed


def test_the_report_has_each_kernels_code_its_diff_against_the_approved_one_failure_details_and_a_filter(batch):
    """Issue 64, 6, what pytest-html users expect: each failure's rounds in an expandable cell, an
    outcome filter, the kernel's code inline and its diff against the approved version."""
    from bbagent.agent.reports.html import _diff_to_approved, render
    relu = batch / "generated_kernels" / "aten.relu.default"
    install(batch, "aten.relu.default", (KERNELS / "relu_strided.py").read_text(),
            run_meta("aten.relu.default", "20261123-020000-aten.relu.default-0000"))  # v2, after the approved v1
    diff = _diff_to_approved(relu, relu)
    assert diff["against"] == "1" and diff["text"].startswith("--- aten.relu.default version 1 (approved)")
    assert any(line.startswith("+") for line in diff["text"].splitlines()[2:])
    assert _diff_to_approved(relu, relu / "versions" / "1") is None  # v1 is the approved one: nothing to compare
    page = render(collect(batch, "batch-20261123-010000-abcd"), batch / "runs" / "report.html")
    assert 'id="outcome-filter"' in page and '<option value="failed">failed</option>' in page
    assert 'data-state="failed"' in page and 'data-state="accepted"' in page
    assert "<summary>code</summary>" in page and "@triton.jit" in page
    assert "<li>no round recorded</li>" in page  # the failed mm has no run record in this fixture


def test_an_operators_history_runs_across_every_earlier_batch_oldest_first(tmp_path, batch):
    """Issue 64, 6: the report compared a batch with the previous one only; asv's users see a benchmark
    across all commits. Three earlier batches, then this one: each operator's row lists every batch
    that asked it, oldest first, with its outcome and speedup, and the change against the last."""
    from bbagent.agent.reports.html import comparison
    outcomes = [{"aten.relu.default": ("accepted", 1.2), "aten.exp.default": ("failed", None)},
                {"aten.relu.default": ("failed", None)},  # exp not asked in this one
                {"aten.relu.default": ("accepted", 1.4), "aten.exp.default": ("accepted", 0.9)}]
    root = tmp_path / "history"  # beside the fixture's batch, not with it
    names = [f"batch-2026112{n}-010000-aaa{n}" for n in range(3)]
    for name, ops in zip(names, outcomes):
        (root / "runs" / name).mkdir(parents=True)
        ledger = Ledger(root / "runs" / name / "ledger.sqlite")
        ledger.add(list(ops))
        for op, (state, speedup) in ops.items():
            ledger.claim(60)
            ledger.finish(op, state, best_speedup=speedup, error_class=None if state == "accepted" else "kernel")
    now = [{"op": "aten.relu.default", "state": "accepted", "speedup": 1.5},
           {"op": "aten.exp.default", "state": "failed", "speedup": None}]
    compared = comparison(root, "batch-20261128-010000-bbbb", now)
    assert compared["batch"] == names[-1]
    rows = {r["op"]: r for r in compared["rows"]}
    assert [(h["batch"], h["state"], h["speedup"]) for h in rows["aten.relu.default"]["history"]] == [
        (names[0], "accepted", 1.2), (names[1], "failed", None), (names[2], "accepted", 1.4)]
    assert [h["batch"] for h in rows["aten.exp.default"]["history"]] == [names[0], names[2]]
    assert rows["aten.relu.default"]["change"] == "faster" and rows["aten.exp.default"]["change"] == "regressed"
    from bbagent.agent.reports.html import render
    page = render({**collect(batch, None), "comparison": compared}, tmp_path / "r.html")
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert "accepted 1.20x → failed → accepted 1.40x → accepted 1.50x" in text
