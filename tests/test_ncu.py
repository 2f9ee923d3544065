"""``bbagent bench --ncu`` on the CPU (Nsight Compute itself runs on the GPU: tests/test_gpu.py).

``tests/data/ncu_details.csv`` is real ncu 2025.3 output from an H200 (``--csv --print-units base
--nvtx --print-nvtx-rename kernel``, two calls of two aten kernels each), with its NVTX ranges
renamed to bbagent's."""
import os
import stat
import sys
from pathlib import Path

import pytest

from bbagent.harness.events import NcuRange
from bbagent.harness.timing import ncu
from conftest import verdict_of

SAMPLE = Path(__file__).parent / "data" / "ncu_details.csv"
EAGER_0 = {"name", "block", "grid", "time_us", "dram_gbs", "dram_pct", "sm_pct", "occupancy_pct", "registers"}


def test_the_csv_is_read_per_range_in_our_units():
    by_range = ncu.parse_csv(SAMPLE.read_text())
    assert sorted(by_range) == ["bbagent-eager-0", "bbagent-eager-1", "bbagent-kernel-0", "bbagent-kernel-1"]
    [first] = by_range["bbagent-eager-0"]
    assert set(first) == EAGER_0
    assert first["name"].startswith("void at::native::vectorized_elementwise_kernel<(int)4")  # the range prefix gone
    assert first["block"] == "(128, 1, 1)" and first["grid"] == "(16384, 1, 1)"
    assert first["time_us"] == pytest.approx(31.424)  # "31,424" ns
    assert first["dram_gbs"] == pytest.approx(3495.046843)  # "3,495,046,843,177.19" byte/s
    assert (first["dram_pct"], first["sm_pct"], first["occupancy_pct"], first["registers"]) == (72.77, 27.81, 82.79, 28)


def test_units_other_than_base_ones_are_converted():
    header = '"ID","Kernel Name","Block Size","Grid Size","Metric Name","Metric Unit","Metric Value"'
    rows = ['"0","bbagent-kernel-0/k","(1, 1, 1)","(2, 1, 1)","gpu__time_duration.sum","usecond","1,500.5"',
            '"0","bbagent-kernel-0/k","(1, 1, 1)","(2, 1, 1)","dram__bytes.sum.per_second","Tbyte/s","2.5"',
            '"0","bbagent-kernel-0/k","(1, 1, 1)","(2, 1, 1)","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","n/a"',
            '"1","stray","(1, 1, 1)","(2, 1, 1)","gpu__time_duration.sum","ns","10"']
    by_range = ncu.parse_csv("\n".join(["==PROF== Connected", header, *rows]))
    [kernel] = by_range["bbagent-kernel-0"]
    assert kernel["time_us"] == 1500.5 and kernel["dram_gbs"] == 2500.0 and kernel["sm_pct"] is None
    assert by_range[""] == [{"name": "stray", "block": "(1, 1, 1)", "grid": "(2, 1, 1)", "time_us": 0.01}]


def test_a_side_sums_time_and_weights_rates_by_it():
    kernels = [{"time_us": 10.0, "dram_gbs": 100.0, "dram_pct": 50.0, "sm_pct": 10.0, "occupancy_pct": None},
               {"time_us": 30.0, "dram_gbs": 200.0, "dram_pct": 10.0, "sm_pct": 30.0, "occupancy_pct": 40.0}]
    totals = ncu.side_totals(kernels)
    assert totals == {"time_us": 40.0, "dram_gbs": 175.0, "dram_pct": 20.0, "sm_pct": 25.0, "occupancy_pct": 40.0}
    assert ncu.side_totals([]) == {"time_us": None, "dram_gbs": None, "dram_pct": None, "sm_pct": None,
                                   "occupancy_pct": None}


def test_the_report_follows_the_child_and_says_what_is_missing():
    ranges = [NcuRange(**r) for r in [{"range": "bbagent-eager-0", "id": "trace-1", "input": "(T([8]),)", "side": "eager"},
              {"range": "bbagent-kernel-0", "id": "trace-1", "input": "(T([8]),)", "side": "kernel"},
              {"range": "bbagent-eager-1", "id": "trace-2", "input": "(T([4]),)", "side": "eager"},
              {"range": "bbagent-kernel-1", "id": "trace-2", "input": "(T([4]),)", "side": "kernel",
               "error": "RuntimeError: boom"},
              {"range": "bbagent-eager-2", "id": "trace-3", "input": "(T([2]),)", "side": "eager"}]]
    shapes = ncu.per_shape(ranges, ncu.parse_csv(SAMPLE.read_text()))
    assert [s["id"] for s in shapes] == ["trace-1", "trace-2", "trace-3"]
    assert shapes[0]["kernel"]["time_us"] == pytest.approx(31.424) and shapes[0]["kernel"]["error"] is None
    assert shapes[1]["kernel"]["error"] == "RuntimeError: boom"
    assert shapes[2]["eager"]["error"] == "ncu reported no kernel in this call's range" and "kernel" not in shapes[2]
    from bbagent.harness.verdict import NcuReport
    NcuReport.model_validate({"measured": True, "shapes": shapes})


def test_ncu_is_found_on_path_or_under_cuda_home(tmp_path, monkeypatch):
    fake = tmp_path / "cuda" / "bin" / "ncu"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    assert ncu.find_ncu() == str(fake)
    monkeypatch.setenv("PATH", str(fake.parent))
    monkeypatch.delenv("CUDA_HOME")
    assert ncu.find_ncu() == str(fake)
    line = ncu.command("ncu", tmp_path / "log.csv")
    assert line[-2:] == ["--log-file", str(tmp_path / "log.csv")] and "--profile-from-start" in line
    assert ",".join(ncu.METRICS) in line


FAKE_NCU = """#!{python}
# Stands in for ncu: runs the command after its options, then writes its log: a copy of a real ncu CSV
# (with --log-file), or the error ncu gives without access to the performance counters.
import shutil, subprocess, sys
args = sys.argv[1:]
log = args[args.index("--log-file") + 1]
command = args[args.index("--log-file") + 2:]
fd = int(command[command.index("--result-fd") + 1])
code = subprocess.call(command, pass_fds=(fd,))
if {counters_open}:
    shutil.copy({sample!r}, log)
else:
    open(log, "w").write("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
                         "Performance Counters on the target device 0.\\n")
sys.exit(code)
"""


RELU_PROBLEM = {"kind": "operator", "key": "aten.relu.default", "serves": ["aten.relu.default"], "written_for": "aten.relu.default"}  # harness.problem's wire form


def run_behind_fake_ncu(tmp_path, monkeypatch, counters_open: bool) -> tuple[dict, list, Path]:
    """The parent's side and the child's, for real, behind a stand-in for ncu: the report, the
    relu trace cases the timed tests were made of, and the stand-in."""
    from conftest import KERNELS
    from bbagent.harness.after_tests import collect_ncu as _collect_ncu
    from bbagent.harness.evaluate import TimingOptions
    from bbagent.harness.sandbox.parent.environment import base_env
    from bbagent.harness.sandbox.job import Job
    from bbagent.harness.ops import resolve_op
    from bbagent.harness.sandbox.parent.watch import Limits
    from bbagent.harness.suite.build import build_suite
    fake = tmp_path / "bin" / "ncu"
    fake.parent.mkdir()
    fake.write_text(FAKE_NCU.format(python=sys.executable, sample=str(SAMPLE), counters_open=counters_open))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    traces = [c for c in build_suite(resolve_op("aten.relu.default"), "cpu", 3, interpreter=True).cases
              if c.trace is not None][:3]
    tests = [{"id": c.id, "input": c.description, "bytes": size} for c, size in zip(traces, (10, 30, 20))]
    env = base_env("cpu")
    job = Job(problem=RELU_PROBLEM, kernel=str(KERNELS / "relu_triton.py"), seed=3, device="cpu", workdir="",
              tool_write_dirs=[env["TRITON_CACHE_DIR"]], cpu_max_numel=1 << 16)
    verdict = verdict_of(tests)
    _collect_ncu(verdict, TimingOptions(ncu=2, profile_dir=tmp_path / "run"), job, env, Limits())
    return verdict.performance.ncu.model_dump(), traces, fake


def test_the_ncu_child_runs_behind_ncu_and_its_csv_is_kept(tmp_path, monkeypatch):
    """The candidate runs in a sandbox child started behind the launcher, calls eager and the
    kernel on the two largest timed shapes, and the launcher's CSV lands in the run's profiles/
    and in the report."""
    report, traces, fake = run_behind_fake_ncu(tmp_path, monkeypatch, counters_open=True)
    assert report["measured"] is True and report["notes"] == [] and report["ncu"] == str(fake)
    assert report["csv"] == str(tmp_path / "run" / "profiles" / "ncu.csv")
    assert Path(report["csv"]).read_text() == SAMPLE.read_text()
    assert [s["id"] for s in report["shapes"]] == [traces[1].id, traces[2].id]  # the two that move the most bytes
    for shape in report["shapes"]:
        assert shape["eager"]["error"] is None and shape["kernel"]["error"] is None
        assert shape["kernel"]["time_us"] > 0 and shape["kernel"]["kernels"][0]["block"] == "(128, 1, 1)"


def test_counters_closed_to_users_give_no_figures_and_the_fix(tmp_path, monkeypatch):
    report, _, _ = run_behind_fake_ncu(tmp_path, monkeypatch, counters_open=False)
    assert report["measured"] is False and report["notes"][0].startswith("ncu said: ERR_NVGPUCTRPERM")
    assert report["notes"][1] == ncu.COUNTERS_FIX and report["reason"] == "; ".join(report["notes"])
    assert all(shape[side]["error"] == "ncu reported no kernel in this call's range"
               for shape in report["shapes"] for side in ("eager", "kernel"))


def test_a_failing_launcher_is_reported_not_raised(tmp_path, monkeypatch):
    from bbagent.harness.after_tests import collect_ncu as _collect_ncu
    from bbagent.harness.evaluate import TimingOptions
    from bbagent.harness.sandbox.parent.environment import base_env
    from bbagent.harness.sandbox.job import Job
    from bbagent.harness.sandbox.parent.watch import Limits
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM - no permission to the GPU performance counters'\n"
                    "exit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    job = Job(problem=RELU_PROBLEM, kernel=str(fake), seed=3, device="cpu", workdir="")
    verdict = verdict_of([{"id": "trace-1", "input": "x", "bytes": 1}])
    _collect_ncu(verdict, TimingOptions(ncu=2), job, base_env("cpu"), Limits())
    report = verdict.performance.ncu
    assert report.measured is False and report.reason.startswith("the ncu child exited with code 1")
    assert "ERR_NVGPUCTRPERM" in report.reason and ncu.COUNTERS_FIX in report.notes
    failed = verdict_of([], verdict="fail")
    _collect_ncu(failed, TimingOptions(ncu=2), job, base_env("cpu"), Limits())
    assert failed.performance.ncu.reason == "the kernel failed while being timed; it is not profiled"


def test_the_table_shows_each_side_and_where_the_csv_is():
    from rich.console import Console
    from bbagent.agent.reports.bench import print_ncu
    from bbagent.harness.verdict import NcuReport
    ranges = [NcuRange(range=f"bbagent-{side}-0", id="trace-1", input="(T([8]),)", side=side)
              for side in ("eager", "kernel")]
    report = NcuReport.model_validate({"measured": True, "csv": "/r/profiles/ncu.csv",
                                       "shapes": ncu.per_shape(ranges, ncu.parse_csv(SAMPLE.read_text()))})
    console = Console(record=True, width=200)
    print_ncu(console, report)
    shown = console.export_text()
    assert "% DRAM peak" in shown and "occupancy" in shown and "/r/profiles/ncu.csv" in shown
    assert "3495" in shown and "73%" in shown and "83%" in shown  # eager's call: GB/s, % DRAM peak, occupancy
    console = Console(record=True, width=200)
    print_ncu(console, NcuReport(measured=False, reason=ncu.NOT_FOUND))
    assert "no Nsight Compute metrics: Nsight Compute's command line (ncu) was found neither" in console.export_text()


def test_one_ncu_session_at_a_time_across_processes(tmp_path):
    """Two processes asking for ncu: the second waits until the first is done."""
    import multiprocessing
    import time
    from bbagent.harness.timing.ncu import one_at_a_time
    marks = tmp_path / "marks"

    def hold(name):
        with one_at_a_time():
            with open(marks, "a") as f:
                f.write(f"{name} in {time.monotonic()}\n")
            time.sleep(0.5)
            with open(marks, "a") as f:
                f.write(f"{name} out {time.monotonic()}\n")
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=hold, args=(name,)) for name in ("a", "b")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    lines = [line.split() for line in marks.read_text().splitlines()]
    assert [kind for _, kind, _ in lines] == ["in", "out", "in", "out"]
    assert lines[0][0] == lines[1][0] and lines[2][0] == lines[3][0]
