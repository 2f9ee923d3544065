"""A cold sandbox child is killed when the parent dies without ending it (SIGKILL), even while the
child is stopped (GpuShare stops a paused child's group while another evaluation is timed): the
``Reaper`` beside it does it. Released, the reaper leaves the child alone."""
import os
import signal
import subprocess
import sys
import textwrap
import time

from conftest import ROOT, process_state


def test_a_stopped_child_dies_with_a_parent_killed_outright():
    parent = textwrap.dedent("""
        import os, signal, subprocess, sys, time
        from bbagent.harness.sandbox.process_group import Reaper
        child = subprocess.Popen(["sleep", "120"], start_new_session=True, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        os.killpg(child.pid, signal.SIGSTOP)
        Reaper(child.pid)
        print(child.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == -signal.SIGKILL, done.stderr
    child = int(done.stdout.split()[0])
    deadline = time.monotonic() + 10
    while process_state(child) not in ("", "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    state = process_state(child)
    if state not in ("", "Z"):
        os.killpg(child, signal.SIGKILL)
    assert state in ("", "Z"), f"the stopped child {child} outlived its parent (state {state})"


def test_a_released_reaper_leaves_the_child_alone():
    from bbagent.harness.sandbox.process_group import Reaper
    child = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        reaper = Reaper(child.pid)
        reaper.release()
        reaper.release()  # a second release is harmless
        time.sleep(0.3)
        assert child.poll() is None
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
