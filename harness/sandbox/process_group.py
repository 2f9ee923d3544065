"""Ending a sandbox child's whole process group: what the parent does to a child it gives up on
(``harness.sandbox.parent.pool``), what the fork server does to a child whose parent went away
(``harness.sandbox.child.forkserver``), each in its own process, and the ``Reaper`` that does it for a
cold child when the parent dies without a word (SIGKILL): a child stopped while another evaluation is
timed (``GpuShare``) cannot notice by itself, and would hold its GPU memory for good. Standard library only."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

# The reaper: a small interpreter (no site, no bbagent) that reads its lifeline until it closes. A
# byte first means the parent ended the child itself; nothing means the parent died: kill the group.
_REAPER_CODE = """
import os, signal, sys
if not os.read(0, 1):
    try:
        os.killpg(int(sys.argv[1]), signal.SIGKILL)
    except OSError:
        pass
"""


def kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads; gone already is fine."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


class Reaper:
    """Kills the process group ``pid`` leads if this process dies before ``release()``; SIGKILL reaches
    a stopped process, and the reaper lives outside the group (a SIGSTOP of the group misses it)."""

    def __init__(self, pid: int):
        self._lifeline: int | None
        lifeline, self._lifeline = os.pipe()  # both ends close-on-exec: only the reaper inherits its end
        try:
            self._process = subprocess.Popen([sys.executable, "-S", "-I", "-c", _REAPER_CODE, str(pid)],
                                             stdin=lifeline, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                             start_new_session=True)
        finally:
            os.close(lifeline)

    def release(self) -> None:
        """The child has been ended here: the reaper exits without killing (idempotent)."""
        if self._lifeline is None:
            return
        try:
            os.write(self._lifeline, b"x")
        except OSError:
            pass
        os.close(self._lifeline)
        self._lifeline = None
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
