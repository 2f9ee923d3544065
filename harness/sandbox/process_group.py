"""Ending a sandbox child's whole process group: what the parent does to a child it gives up on
(``harness.sandbox.parent.pool``) and what the fork server does to a child whose parent went away
(``harness.sandbox.child.forkserver``), each in its own process. Standard library only."""
from __future__ import annotations

import os
import signal


def kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads; gone already is fine."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
