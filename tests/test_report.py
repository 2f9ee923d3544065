"""``bbagent report`` on a fixture batch: the funnel, failures shown as failures, links, and the
page rendered by headless Chromium to a PNG in which the charts are visible."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from agent.batch.ledger import Ledger
from bbagent.cli import main
from agent.reports.html import collect, fast_p_curve, funnel
from agent.review import lifecycle
from tests.test_review import KERNELS, install, run_meta

SHOTS = os.environ.get("BBAGENT_REPORT_SCREENSHOT")  # where to keep the PNG (the note's screenshot)


def timed(speedup: float, sizes=(1e4, 1e6, 1e8)) -> dict:
    shapes = [{"input": f"T([{int(b / 4)}], f32)", "bytes": int(b), "speedup": speedup * (0.7 + 0.15 * i),
               "aten_ms": 0.01, "kernel_ms": 0.01} for i, b in enumerate(sizes)]
    return {"measured": True, "gpu": "NVIDIA H200", "summary": {"geomean_speedup": speedup, "counted": len(shapes)},
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


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(chromium() is None, reason="no Chromium here (.ci/setup installs Debian's chromium as root; "
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
