"""Separate processes on one GPU (issue 75, 4): admitted by device memory beside each other's
evaluations, timing alone, and nothing held by a process that died; through files and flock
(harness.sandbox.parent.machine_gpu), so they work the same on this CPU machine, with a named GPU
that NVML does not know."""
import os
import signal
import subprocess
import sys
import time

import pytest

from bbagent.harness.sandbox.parent.gpu_share import GpuShare
from bbagent.harness.sandbox.parent.machine_gpu import MachineGpu
from conftest import PYTHONPATH

PEER = os.path.join(os.path.dirname(__file__), "machine_gpu_peer.py")


class Peer:
    """Another process with its own MachineGpu on the same GPU."""

    def __init__(self, folder, capacity=100):
        self.proc = subprocess.Popen([sys.executable, PEER, "test-gpu", str(capacity), str(folder)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONPATH": PYTHONPATH})
        assert self.proc.stdout.readline().strip() == "ready"

    def ask(self, command: str) -> str:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


@pytest.fixture
def here(tmp_path):
    gpu = MachineGpu("test-gpu", 100, folder=tmp_path)
    yield gpu
    gpu.close()


def test_admission_by_memory_across_processes(tmp_path, here):
    peer = Peer(tmp_path)
    try:
        assert peer.ask("enter 1 60") == "True"  # alone: admitted whatever it needs
        assert not here.try_enter(1, 60)  # 60 + 60 > 100
        mark = here.mark()
        assert here.try_enter(2, 30)  # fits beside it
        assert here.others_since(mark)  # the other process held the GPU meanwhile
        here.leave(2)
        assert peer.ask("leave 1") == "left"
        assert here.try_enter(1, 60)
        mark = here.mark()
        assert not here.others_since(mark)
        assert peer.ask("enter 5 10") == "True"
        assert here.others_since(mark)  # admitted after the mark
        assert peer.ask("leave 5") == "left"
        here.leave(1)
    finally:
        peer.kill()


def test_timing_waits_for_the_other_processes_tests_and_holds_new_ones_off(tmp_path, here):
    peer = Peer(tmp_path)
    try:
        assert peer.ask("enter 1 10") == "True"
        assert not here.try_alone()  # its tests are running
        assert peer.ask("enter 2 10") == "False"  # waiting for the GPU alone, this process holds the turnstile
        assert peer.ask("leave 1") == "left"
        assert here.try_alone()
        assert peer.ask("enter 3 10") == "False"  # no tests while one is timed
        assert peer.ask("alone") == "False"
        here.end_alone()
        assert peer.ask("alone") == "True"  # its turn
        assert not here.try_enter(1, 10)
        assert peer.ask("end") == "ended"
        assert here.try_enter(1, 10)
        here.leave(1)
    finally:
        peer.kill()


def test_a_process_that_dies_holds_nothing(tmp_path, here):
    peer = Peer(tmp_path)
    assert peer.ask("enter 1 90") == "True"
    assert not here.try_enter(1, 90) and not here.try_alone()
    here.end_alone()
    peer.kill()  # kill -9: its locks go with it, its registry entry is dropped as its process is gone
    assert here.try_enter(1, 90)
    assert here.try_alone()
    here.end_alone()
    here.leave(1)


def test_a_gpu_share_waits_for_another_processes_tests_before_timing(tmp_path, here):
    """GpuShare with ``across``: an evaluation of this process is admitted beside another process's
    where memory allows, is crowded by it, and is let hold the GPU alone only once that process's
    tests are over."""
    share = GpuShare(name="gpu", capacity=100, max_shared=4, across=here)
    peer = Peer(tmp_path)
    try:
        assert peer.ask("enter 1 40") == "True"
        hold = share.enter(50, "relu")
        assert share.crowded(hold)
        granted = []
        import threading
        waiting = threading.Thread(target=lambda: granted.append(share.go_exclusive(hold)))
        waiting.start()
        time.sleep(0.3)
        assert not granted  # the other process's tests go on
        assert peer.ask("enter 2 10") == "False"  # and it starts no new ones meanwhile
        assert peer.ask("leave 1") == "left"
        waiting.join(timeout=5)
        assert granted == [True] and share.exclusive is hold
        share.leave(hold)
        assert peer.ask("enter 2 10") == "True"  # over: the other process's tests go on
        assert peer.ask("leave 2") == "left"
    finally:
        peer.kill()
