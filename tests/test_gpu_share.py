"""Sharing a GPU by phase (harness.sandbox.parent.gpu_share): admission by memory against a small
simulated device, the GPU alone for timing, and the harness's own out-of-memory retried. The
evaluations here run on the CPU under the Triton interpreter; the child's request for the GPU alone
is made there too (only the timing itself is GPU-only), so the phases are the real ones."""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bbagent.harness import gpu_pause
from bbagent.harness.gpu_pause import ChildPauses, PausePage
from bbagent.harness.sandbox.parent.gpu_share import GpuShare, overlaps
from conftest import process_state
from tests.fake_runs import run_started

KERNELS = Path(__file__).parent / "kernels"
GIB = 1 << 30


def in_thread(run) -> threading.Thread:
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_admission_waits_for_memory_and_an_evaluation_alone_is_always_admitted():
    share = GpuShare(name="sim", capacity=10 * GIB, max_shared=8)
    first = share.enter(6 * GIB)
    second_in = threading.Event()
    waiting = in_thread(lambda: (share.enter(6 * GIB), second_in.set()))
    assert not second_in.wait(0.2)  # 6 + 6 > 10: it waits
    small = share.enter(3 * GIB)  # 6 + 3 fits beside the first
    share.leave(small)
    assert not second_in.wait(0.2)  # the first still holds 6
    share.leave(first)
    assert second_in.wait(2)
    waiting.join(2)
    assert share.holding()["shared"] == 1 and share.holding()["reserved_bytes"] == 6 * GIB
    huge = GpuShare(name="sim", capacity=10 * GIB, max_shared=8)
    alone = huge.enter(40 * GIB)  # more than the GPU: alone, it still runs (the retries handle the rest)
    assert alone.phase == "shared" and not alone.shared_with_others


def test_the_count_bounds_admission_too_and_unknown_memory_admits_by_count():
    share = GpuShare(name="sim", capacity=0, max_shared=2)
    holds = [share.enter(100 * GIB), share.enter(100 * GIB)]
    third = []
    in_thread(lambda: third.append(share.enter(1)))
    time.sleep(0.2)
    assert not third
    share.leave(holds[0])
    time.sleep(0.2)
    assert len(third) == 1 and all(h.shared_with_others for h in holds)


class SimulatedChild:
    """A child's test loop through the real child side of the pause page: a checkpoint, then a
    "test" of ``test_s``, recorded, until stopped."""

    def __init__(self, hold, test_s: float = 0.02):
        self.pauses = ChildPauses(os.dup(hold.page.fd), None, synchronize=lambda: None)
        self.test_s, self.tests, self.stop = test_s, [], threading.Event()
        self.thread = in_thread(self.run)

    def run(self):
        while not self.stop.is_set():
            self.pauses.checkpoint()
            started = time.monotonic()
            time.sleep(self.test_s)
            self.tests.append((started, time.monotonic()))

    def end(self):
        self.stop.set()
        self.thread.join(2)


def test_the_gpu_alone_waits_for_the_others_next_checkpoint_not_their_end():
    share = GpuShare(name="sim", capacity=10 * GIB, max_shared=8)
    timer, tester = share.enter(GIB), share.enter(GIB)
    child = SimulatedChild(tester)
    time.sleep(0.1)
    asked = time.monotonic()
    assert share.go_exclusive(timer)
    granted = time.monotonic()
    assert granted - asked < 0.5  # one test's length, not the tester's whole run
    latecomer = []
    in_thread(lambda: latecomer.append(share.enter(GIB)))
    time.sleep(0.1)
    assert len(latecomer) == 1  # admitted meanwhile: its child starts paused
    late_child = SimulatedChild(latecomer[0])
    time.sleep(0.2)
    assert late_child.tests == []  # not one test while the GPU is held alone
    ran_before = len(child.tests)
    time.sleep(0.1)
    assert len(child.tests) == ran_before  # the tester is paused too
    released = time.monotonic()
    share.leave(timer)
    time.sleep(0.2)
    assert late_child.tests and len(child.tests) > ran_before  # both let run again
    for test_start, test_end in child.tests + late_child.tests:  # no test ran while the timer held the GPU
        assert test_end <= granted or test_start >= released
    child.end(), late_child.end()
    share.leave(tester), share.leave(latecomer[0])
    assert overlaps(share.intervals) == []
    phases = [(i.hold, i.phase) for i in share.intervals]
    assert (timer.number, "exclusive") in phases and phases.count((tester.number, "shared")) == 2
    assert tester.paused_s >= released - granted and share.holding()["reserved_bytes"] == 0


def test_one_that_cannot_pause_is_waited_for_and_not_admitted_meanwhile():
    share = GpuShare(name="sim", capacity=10 * GIB, max_shared=8)
    timer, stubborn = share.enter(GIB), share.enter(GIB, pausable=False)
    alone = threading.Event()
    in_thread(lambda: (share.go_exclusive(timer), alone.set()))
    assert not alone.wait(0.2)  # it has no page: only its end makes it quiet
    latecomer = []
    in_thread(lambda: latecomer.append(share.enter(GIB, pausable=False)))
    time.sleep(0.2)
    assert not latecomer  # not admitted while one waits for the GPU alone: it never starves
    share.leave(stubborn)
    assert alone.wait(2)
    time.sleep(0.1)
    assert not latecomer  # nor while it holds the GPU
    share.leave(timer)
    time.sleep(0.2)
    assert len(latecomer) == 1
    share.leave(latecomer[0])
    assert overlaps(share.intervals) == []


def test_a_run_again_alone_waits_for_an_empty_device_and_admits_no_one_meanwhile():
    share = GpuShare(name="sim", capacity=10 * GIB, max_shared=8)
    tester = share.enter(GIB)
    child = SimulatedChild(tester)
    rerun = []
    in_thread(lambda: rerun.append(share.alone(GIB)))
    time.sleep(0.2)
    assert not rerun  # a paused evaluation still holds memory: alone means no one else at all
    latecomer = []
    in_thread(lambda: latecomer.append(share.enter(GIB)))
    time.sleep(0.1)
    assert not latecomer
    child.end()
    share.leave(tester)
    time.sleep(0.2)
    assert len(rerun) == 1 and not latecomer
    share.leave(rerun[0])
    time.sleep(0.2)
    assert len(latecomer) == 1


def test_a_stale_acknowledgement_is_never_taken_for_a_pause():
    page = PausePage()
    child = ChildPauses(os.dup(page.fd), None, synchronize=lambda: None)
    page.request()
    assert not page.quiet()  # asked, not yet at a checkpoint
    paused = in_thread(child.checkpoint)
    deadline = time.monotonic() + 2
    while not page.quiet() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert page.quiet()
    page.withdraw()
    paused.join(2)
    assert not paused.is_alive() and child.pauses == 1
    page.request()
    gpu_pause._write(page.view, gpu_pause.ACKNOWLEDGED, page.generation)  # paused for this request...
    assert page.quiet()
    page.withdraw()  # ... withdrawn, and asked again before the child saw the withdrawal
    page.request()
    assert not page.quiet()  # its acknowledgement is for the request before
    page.close()


def test_an_evaluation_that_ends_while_waiting_for_the_gpu_alone_never_takes_it():
    share = GpuShare(name="sim", capacity=10 * GIB, max_shared=8)
    quitter, other = share.enter(GIB), share.enter(GIB)
    granted = []
    waiter = in_thread(lambda: granted.append(share.go_exclusive(quitter)))
    time.sleep(0.1)
    share.leave(quitter)  # its child died while waiting
    waiter.join(2)
    assert granted == [False] and share.holding()["exclusive"] is False
    share.leave(other)
    assert share.holding() == {"shared": 0, "exclusive": False, "exclusive_waiting": 0, "reserved_bytes": 0}


def test_what_an_evaluation_needs_is_learned_from_its_suite():
    share = GpuShare.for_gpu("sim", 80 * GIB, 8)
    assert share.need_for("mm") == share.capacity // 4  # never measured, no trace: a quarter of the GPU
    assert share.need_for("mm", 9 * GIB) == 9 * GIB  # never measured: what the traces suggest
    share.learn("mm", 4 * GIB)
    share.learn("mm", 2 * GIB)  # the largest peak is kept
    assert share.need_for("mm") == int(4 * GIB * 1.25) + GIB


def test_the_harness_out_of_memory_is_retried_after_a_pause(monkeypatch):
    import torch

    from bbagent.harness.sandbox.child import device_memory
    monkeypatch.setattr(device_memory, "OOM_WAITS_S", (0.01, 0.02))
    monkeypatch.setattr(device_memory, "RETRIES", device_memory.MemoryRetries())
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    tries = []

    def flaky():
        tries.append(1)
        if len(tries) < 3:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return "judged"
    assert device_memory.retrying_out_of_memory(flaky, torch) == "judged"
    assert len(tries) == 3 and device_memory.RETRIES.count == 2
    tries.clear()

    def never_fits():
        tries.append(1)
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 90.00 GiB")
    with pytest.raises(torch.OutOfMemoryError):  # still out after the last pause: raised, the parent decides
        device_memory.retrying_out_of_memory(never_fits, torch)
    assert len(tries) == 3  # the first try and one after each pause


def test_a_reference_out_of_memory_is_not_read_as_the_op_refusing_the_input(monkeypatch):
    """Before, the reference's OutOfMemoryError became a skipped test ("reference_error") and the
    float64 run's made it "unavailable" (no loosening: a correct float16 kernel could fail)."""
    import torch

    from bbagent.harness.checks import float64_judge
    from bbagent.harness.checks.float64_judge import Float64Run
    from bbagent.harness.ops import resolve_op
    op = resolve_op("aten.add.Tensor")

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory")
    monkeypatch.setattr(float64_judge, "reference_call", out_of_memory)
    run = Float64Run(op, ((torch.ones(3, dtype=torch.float16), torch.ones(3, dtype=torch.float16)), {}))
    with pytest.raises(torch.OutOfMemoryError):
        run.truth()
    assert run.unavailable is None and not run.ran  # asked again after the retry
    monkeypatch.undo()
    assert run.truth() is not None


def test_large_tensors_are_compared_a_chunk_at_a_time(monkeypatch):
    import torch

    from bbagent.harness.checks import compare
    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", 7)
    expected = torch.randn(5, 9, dtype=torch.float16)
    assert compare.compare_tensors(expected, expected.clone()) is None
    assert compare.compare_tensors(expected.t(), expected.t().clone()) is None  # not contiguous
    wrong = expected.clone()
    wrong[4, 8] += 1  # in the last, short chunk
    failure = compare.compare_tensors(expected, wrong)
    assert failure["error_kind"] == "mismatch" and failure["mismatches"][0]["index"] == [4, 8]
    assert compare.tolerance_used(expected, wrong) > 1 and compare.tolerance_used(expected, expected.clone()) == 0


def test_timing_never_overlaps_another_evaluations_tests(tmp_path):
    """Four real evaluations through one share with room for three: the tests run side by side, each
    child asks for the GPU alone when its tests passed, and no exclusive phase overlaps any other
    evaluation's hold."""
    from bbagent.harness.evaluate import EvaluationRequest, TimingOptions, evaluate_kernel
    share = GpuShare(name="sim", capacity=12 * GIB, max_shared=3)  # relu's traces suggest 3.6 GiB each

    def one(seed: int):
        return evaluate_kernel(EvaluationRequest.of("aten.relu.default", device="cpu", seed=seed, timing=TimingOptions(reuse=False)), KERNELS / "relu_triton.py", share=share)
    with ThreadPoolExecutor(4) as pool:
        verdicts = list(pool.map(one, range(4)))
    assert all(v.passed for v in verdicts), [v.message for v in verdicts]
    exclusive = [i for i in share.intervals if i.phase == "exclusive"]
    assert len(exclusive) == 4 and overlaps(share.intervals) == []
    assert any(v.timings.gpu_shared for v in verdicts)  # some ran their tests beside another's
    assert all(v.timings.rerun_alone is None for v in verdicts)
    assert share.holding()["shared"] == 0 and share.holding()["exclusive"] is False


def test_the_gpu_monitor_counts_the_seconds_a_kernel_ran():
    from bbagent.agent.batch.gpu_monitor import GpuMonitor
    from bbagent.harness.nvml import GpuSample

    class Gpu:
        calls = 0

        def sample(self):
            Gpu.calls += 1
            return GpuSample(utilization=80 if Gpu.calls % 4 == 0 else 0, memory_used=Gpu.calls * GIB,
                             memory_total=80 * GIB)
    monitor = GpuMonitor({0: "0"}, every_s=0.005, open_gpu=lambda entry: Gpu())
    while monitor.summary()[0]["samples"] < 40:
        time.sleep(0.01)
    monitor.stop()
    use = monitor.summary()[0]
    assert abs(use["busy_share"] - 0.25) < 0.05 and abs(use["utilization_mean"] - 20) < 4
    assert use["memory_peak_gib"] == use["samples"] and use["memory_total_gib"] == 80


def test_a_batch_shows_each_gpu_its_evaluations_and_waits(tmp_path):
    """Two slots share GPU 0; the summary has a GPUs table beside the slots', and says where the
    GPU's own utilization could not be measured (no NVML on this machine)."""
    from types import SimpleNamespace

    from bbagent.agent.batch.executor import LocalExecutor
    from bbagent.agent.batch.runner import Batch
    from bbagent.agent.generate.loop import Outcome
    from bbagent.agent.run_record import RunRecord

    def evaluate(request, kernel_path, *, gpu, share):
        hold = share.enter(GIB)
        time.sleep(0.3)
        share.leave(hold)
        return SimpleNamespace(error_kind=None, infrastructure=None, message="", passed=True,
                               timings=SimpleNamespace(gpu_wait_s=0.25))
    executor = LocalExecutor("cuda", gpus=[0], evaluate=evaluate, per_gpu=2)
    assert [s.name for s in executor.slots] == ["gpu-0/0", "gpu-0/1"]

    def generate(op, hear):
        hear(run_started(op, tmp_path / op))
        executor.evaluate(SimpleNamespace(op=op), tmp_path / "kernel.py")
        return Outcome(RunRecord(op=op, status="accepted", rounds_used=1), run_dir=tmp_path / op)
    batch_dir = tmp_path / "batch"
    batch_dir.mkdir()
    runner = Batch(batch_dir, generate, jobs=3, executor=executor)
    runner.ledger.add(["a", "b", "c", "d"])
    runner.run()
    executor.close()
    gpu, = runner.activity()["gpus"]
    assert gpu["evaluations"] == 4 and gpu["at_once"] == 2 and gpu["per_hour"] > 0
    # the GPU's own waits (the Verdicts') apart from the wait for a free slot (3 jobs, 2 slots, 0.3 s each)
    assert gpu["waited_s"] == 1.0 and gpu["queued_s"] >= 0.2, gpu
    summary = (batch_dir / "summary.md").read_text()
    assert "### GPUs of session 1" in summary and "| gpu-0" in summary
    assert "| waited for the GPU s | waited for a free slot s |" in summary
    assert f"| 1 | {gpu['queued_s']:.0f} |" in summary, summary
    if gpu.get("samples") is None:
        assert "not measured" in summary
    from bbagent.agent.reports.html import batch_metadata
    rows = dict(batch_metadata(runner.ledger.meta()))
    assert rows["GPUs"].startswith("gpu-0: 4 evaluations") and "waited 1 s for the GPU" in rows["GPUs"]  # the report too
    assert "s for a free slot" in rows["GPUs"]


def test_the_first_guess_comes_from_the_largest_trace_input():
    from bbagent.harness.suite.memory_need import CHILD_BASE_BYTES, COPIES_ALIVE, expected_need, largest_call_bytes
    relu, add = largest_call_bytes(["aten.relu.default"]), largest_call_bytes(["aten.add.Tensor"])
    assert 0 < relu < add  # the traces' largest add (a language model's logits) dwarfs relu's
    assert expected_need(["aten.add.Tensor"]) == COPIES_ALIVE * add + CHILD_BASE_BYTES
    line = "cnt: 1, ((T([1024, 1024, 512], f32), T([1024, 1024, 512], f32)), {})"  # a dataset's own input: 4 GiB
    assert largest_call_bytes(["aten.add.Tensor"], {"aten.add.Tensor": [{"line": line}]}) == 4 * GIB
    assert largest_call_bytes(["aten.no_such_op.default"]) == 0


def test_a_cold_child_gets_its_grant_pipe_too(tmp_path):
    """Started as a fresh interpreter (no fork server), the child still asks for the GPU alone."""
    from bbagent.harness.evaluate import EvaluationRequest, TimingOptions, evaluate_kernel
    share = GpuShare(name="sim", capacity=0, max_shared=2)
    verdict = evaluate_kernel(EvaluationRequest.of("aten.relu.default", device="cpu", seed=1, warm=False, timing=TimingOptions(reuse=False)), KERNELS / "relu_triton.py", share=share)
    assert verdict.passed, verdict.message
    assert [i.phase for i in share.intervals] == ["shared", "exclusive"]


def test_a_lost_gpu_takes_every_slot_sharing_it_out_at_once(tmp_path):
    from types import SimpleNamespace

    from bbagent.agent.batch.executor import RETIRE_AFTER, LocalExecutor
    from bbagent.agent.errors import InfrastructureError
    lost = "evaluation exited with code 1 before the tests were built"

    def evaluate(request, kernel_path, *, gpu, share):
        return SimpleNamespace(infrastructure=lost, error_kind="worker_error", message=lost, passed=False)
    executor = LocalExecutor("cuda", gpus=[0], evaluate=evaluate, per_gpu=4)
    for _ in range(RETIRE_AFTER):
        with pytest.raises(InfrastructureError):
            executor.evaluate(SimpleNamespace(op="aten.relu.default"), tmp_path / "kernel.py")
    assert all(s.retired and s.retired.startswith("3 sandbox failures in a row") for s in executor.slots)
    with pytest.raises(InfrastructureError, match="every evaluation slot is out of service"):
        executor.evaluate(SimpleNamespace(op="aten.relu.default"), tmp_path / "kernel.py")


def test_a_real_child_pauses_between_tests_while_another_holds_the_gpu_alone(tmp_path):
    """A real evaluation (CPU, Triton interpreter) shares the gate with a hold that takes the GPU
    alone for a second half-way through its run: its child pauses at a checkpoint within a
    test's length, is stopped (SIGSTOP) and let go on, says how long it paused, and still passes;
    the second is not counted against its time limit."""
    from bbagent.harness.evaluate import EvaluationRequest, evaluate_kernel
    slow = tmp_path / "slow_relu.py"  # a correct relu whose every call takes 0.1 s: its run lasts seconds
    slow.write_text((KERNELS / "relu_triton.py").read_text() + "\n\nimport time as _time\n_fast = kernel\n\n\n"
                    "def kernel(*args, **kwargs):\n    _time.sleep(0.1)\n    return _fast(*args, **kwargs)\n")
    share = GpuShare(name="sim", capacity=0, max_shared=4)
    verdicts = []
    running = in_thread(lambda: verdicts.append(evaluate_kernel(EvaluationRequest.of("aten.relu.default", device="cpu", seed=3), slow, share=share)))
    deadline = time.monotonic() + 120
    while not any(h.process_group for h in list(share.holds.values())) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)  # into its start, suite or tests
    timer = share.enter(GIB)
    asked = time.monotonic()
    assert share.go_exclusive(timer)
    assert time.monotonic() - asked < 20  # its next checkpoint, not the end of its run
    other, = [h for h in share.holds.values() if h is not timer]
    time.sleep(1.0)
    state = process_state(other.process_group)
    assert other.stopped_since is not None and state == "T"  # stopped while the timer holds the GPU
    share.leave(timer)
    running.join(180)
    verdict, = verdicts
    assert verdict.passed, verdict.message
    assert verdict.timings.gpu_pauses >= 1 and verdict.timings.gpu_paused_s >= 0.9
    assert overlaps(share.intervals) == []
    assert share.holds == {} and other.stopped_since is None and other.stopped_s >= 0.9
