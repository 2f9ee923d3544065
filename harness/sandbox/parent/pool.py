"""Starting sandbox children: warm (forked by a fork server) or cold (a fresh interpreter).

Both give a ``Child`` with the same three operations: ``pid``, ``wait(timeout)`` (the exit
code, negative for a signal as in ``subprocess``, or None while it runs) and ``kill()``
(the whole process group, which the child leads).

One ``WarmPool`` per device (per GPU, pinned with ``CUDA_VISIBLE_DEVICES``), created on first
use and shut down at exit; if its fork server dies it is started again on the next request.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import threading
import time

from bbagent.harness import workdirs
from bbagent.harness.sandbox.job import Job
from bbagent.harness.sandbox.process_group import Reaper, kill_group

SERVER_START_TIMEOUT_S = 180.0


class PoolError(RuntimeError):
    """The fork server could not be started or reached."""


class PoolClosed(RuntimeError):
    """The fork server was closed while this evaluation waited for it to start: the process is ending
    (Ctrl-C, SIGTERM, the exit handler). Not a ``PoolError``: nothing is started cold in its place."""


class ColdChild:
    """``python -m harness.sandbox.child.worker`` in a new session; ``prefix`` is a launcher in front of
    it (ncu), which then leads the session."""

    def __init__(self, job: Job, result_fd: int, out_fd: int, err_fd: int, env: dict, cwd: str,
                 prefix: list[str] | None = None):
        self.proc = subprocess.Popen(
            [*(prefix or []), sys.executable, "-m", "bbagent.harness.sandbox.child.worker", "--job", job.to_wire(),
             "--result-fd", str(result_fd)],
            cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out_fd, stderr=err_fd,
            pass_fds=(result_fd,) + tuple(fd for fd in (job.grant_fd, job.pause_fd) if fd is not None),
            start_new_session=True)
        self.pid = self.proc.pid
        try:
            self.reaper: Reaper | None = Reaper(self.pid)  # a warm child has the fork server for this
        except OSError:
            self.reaper = None

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        kill_group(self.pid)
        if self.reaper is not None:
            self.reaper.release()


class WarmChild:
    """A child of the fork server; its exit status arrives on the request's connection."""

    def __init__(self, conn: socket.socket):
        self.conn = conn
        self.buffer = b""
        reply = self._message(timeout=60.0)
        if reply is None or "pid" not in reply:
            conn.close()
            raise PoolError(f"the fork server did not start a child: {reply}")
        self.pid = reply["pid"]
        self.returncode: int | None = None

    def _message(self, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.conn], [], [], left)[0]:
                return None
            data = self.conn.recv(4096)
            if not data:
                return {"error": "the fork server closed the connection"}
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def wait(self, timeout: float) -> int | None:
        if self.returncode is None:
            message = self._message(timeout)
            if message is None:
                return None
            self.returncode = os.waitstatus_to_exitcode(message["status"]) if "status" in message else -9
            self.conn.close()
        return self.returncode

    def kill(self) -> None:
        kill_group(self.pid)


class WarmPool:
    """A fork server for one device, with the allowlisted environment ``env``."""

    def __init__(self, device: str, env: dict):
        self.device, self.env = device, dict(env)
        self.lock = threading.Lock()
        self.server: subprocess.Popen | None = None
        self.directory = ""
        self.broken = ""
        self.ready = False  # the server said it is ready

    def start_in_background(self) -> None:
        """Start the server now without waiting for it (its interpreter imports torch and Triton:
        seconds), so that the caller's own work overlaps it; ``launch`` waits. A server that
        cannot start is reported by ``launch``."""
        with self.lock:
            if self.server is None and not self.broken:
                try:
                    self._spawn()
                except OSError as exc:
                    self.close()
                    self.broken = f"the fork server did not start ({exc})"

    def _start(self) -> None:
        if self.server is None:
            self._spawn()
        self._await_ready()

    def _spawn(self) -> None:
        self.directory = str(workdirs.make("pool"))
        self.socket_path = os.path.join(self.directory, "socket")
        lifeline_read, self.lifeline = os.pipe()
        self.stderr_path = os.path.join(self.directory, "server.stderr")
        with open(self.stderr_path, "wb") as stderr:
            self.server = subprocess.Popen(
                [sys.executable, "-m", "bbagent.harness.sandbox.child.forkserver", "--socket", self.socket_path, "--device", self.device],
                stdin=lifeline_read, stdout=subprocess.PIPE, stderr=stderr, env=self.env,
                cwd=self.directory, start_new_session=True)
        os.close(lifeline_read)
        self.spawned_at = time.monotonic()

    def _await_ready(self) -> None:
        server = self.server  # close() may take it away meanwhile: another thread's, the exit handler's
        if server is None or server.stdout is None:
            raise PoolClosed("the fork server was closed before this evaluation could wait for it to start "
                             "(the process is ending)")
        left = SERVER_START_TIMEOUT_S - (time.monotonic() - self.spawned_at)
        try:
            ready = select.select([server.stdout], [], [], max(0.0, left))[0]
            line = server.stdout.readline() if ready else b""
        except (OSError, ValueError):  # its stdout closed by close()
            line = b""
        if self.server is not server:
            raise PoolClosed("the fork server was closed while this evaluation waited for it to start "
                             "(the process is ending)")
        if line.strip() != b"ready":
            said = line.decode("utf-8", "replace").strip()
            code = server.poll()
            detail = (f"exit code {code}" if code is not None else "no answer") + \
                (f", first output line {said!r}" if said else "") + f"; stderr: {self._stderr_tail()}"
            self.close()
            raise PoolError(f"the fork server did not start ({detail})")
        self.ready = True

    def _stderr_tail(self) -> str:
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read()[-2000:].decode("utf-8", "replace").strip() or "(no output)"
        except OSError:
            return "(no output)"

    def launch(self, job: Job, env: dict, fds: list[int]) -> WarmChild:
        """Ask the server for a child running ``job`` in ``env`` with the result, stdout and stderr
        fds (and the grant pipe's read end and the pause page, where the GPU is shared)."""
        with self.lock:
            if self.broken:
                raise PoolError(self.broken)
            if self.server is not None and self.server.poll() is not None:
                self.close()  # it ended: start another
            if self.server is None or not self.ready:
                try:
                    self._start()
                except PoolError as exc:
                    self.broken = str(exc)  # not retried: each try costs a full interpreter start
                    raise
            path = self.socket_path
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(path)
            socket.send_fds(conn, [job.to_wire(env=env).encode() + b"\n"], fds)
        except OSError as exc:
            conn.close()
            if self.server is None:  # closed since: the process is ending
                raise PoolClosed("the fork server was closed before this evaluation reached it") from exc
            raise PoolError(f"the fork server is unreachable: {exc}") from exc
        return WarmChild(conn)

    def close(self) -> None:
        """Stop the server. Taken out of ``self`` first: a second close (another thread's, or the
        exit handler's after Ctrl-C) while this one waits finds nothing left to close."""
        server, ready, self.server, self.ready = self.server, self.ready, None, False
        if server is not None:
            try:
                os.close(self.lifeline)
            except OSError:
                pass
            try:
                if not ready:  # still importing: it would see its lifeline close only once serving
                    kill_group(server.pid)
                server.wait(timeout=5)
            except (subprocess.TimeoutExpired, KeyboardInterrupt):  # Ctrl-C while it exits: no traceback at exit
                kill_group(server.pid)
                server.wait()
            if server.stdout is not None:
                server.stdout.close()
        directory, self.directory = self.directory, ""
        if directory:
            shutil.rmtree(directory, ignore_errors=True)


_POOLS: dict[tuple, WarmPool] = {}
_POOLS_LOCK = threading.Lock()


def pool_for(device: str, env: dict) -> WarmPool:
    """The shared pool for this device and environment (one fork server each)."""
    key = (device, tuple(sorted(env.items())))
    with _POOLS_LOCK:
        if key not in _POOLS:
            _POOLS[key] = WarmPool(device, env)
        return _POOLS[key]


@atexit.register
def close_all() -> None:
    for pool in list(_POOLS.values()):
        pool.close()
    _POOLS.clear()
