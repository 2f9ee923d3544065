"""The fork server: a process that has imported torch, triton and the harness (on CPU also the
OpInfo database), but never initialised CUDA, and forks one fresh child per candidate.

Started by ``harness.sandbox.parent.pool.WarmPool`` as
``python -m harness.sandbox.child.forkserver --socket PATH --device cpu|cuda`` with an environment
already reduced to the allowlist (a forked child inherits the server's environment block,
which ``/proc/self/environ`` shows). Protocol, one Unix-socket connection per candidate:

* parent -> server: the ``harness.sandbox.child.worker.Job`` as one JSON line (plus ``env``), with three
  file descriptors attached: the result channel, stdout and stderr; where the GPU is shared, a
  fourth, the read end of the grant pipe (``Job.grant_fd``, ``harness.sandbox.parent.gpu_share``), and a
  fifth where the child can be paused, its pause page (``Job.pause_fd``, ``harness.gpu_pause``);
* server -> parent: ``{"pid": N}`` once the child exists, then ``{"status": S}`` (the raw
  wait status) when it has ended. Closing the connection early kills the child's group.

The server never runs candidate code, so a fault cannot reach it; every candidate gets a
new child. It exits when its stdin (a pipe from the parent, the lifeline) closes.
"""
from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import sys
import tempfile
import traceback

from bbagent.harness.sandbox.process_group import kill_group

FDS_PER_JOB = (3, 4, 5)  # result, stdout, stderr; the grant pipe and the pause page where the GPU is shared


def preload(device: str) -> None:
    """Everything a child would otherwise import itself (on CPU the OpInfo database too)."""
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    import numpy  # noqa: F401
    import torch
    import triton  # noqa: F401
    if device == "cpu":
        # Not on CUDA: importing it asks for the device's capability (common_device_type, torch
        # 2.11), which initialises CUDA; each child imports it there (benchmarks/cuda_init_probe.py).
        from torch.testing._internal.common_methods_invocations import op_db  # noqa: F401
    import bbagent.harness.sandbox.child.containment  # noqa: F401
    import bbagent.harness.checks.guards  # noqa: F401
    import bbagent.harness.checks.case  # noqa: F401
    import bbagent.harness.suite.build  # noqa: F401
    from bbagent.harness.sandbox.child.preparation import load_lazy_parts
    load_lazy_parts()
    if torch.cuda.is_initialized():
        raise SystemExit("forkserver: CUDA was initialised while preloading; forked children could not use it")


def _child(job: dict, fds: list[int], inherited: list) -> None:
    """In the forked child: its own session, its own stdio, the job's environment; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        for item in inherited:
            item.close() if hasattr(item, "close") else os.close(item)
        os.setsid()
        result_fd, out_fd, err_fd = fds[:3]
        job["grant_fd"] = fds[3] if len(fds) > 3 else None
        job["pause_fd"] = fds[4] if len(fds) > 4 else None
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.close(out_fd)
        os.close(err_fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        env = job.pop("env")
        os.environ.clear()
        os.environ.update(env)
        os.chdir(job["workdir"])
        tempfile.tempdir = job["workdir"]
        from bbagent.harness.sandbox.job import Job
        from bbagent.harness.sandbox.child.worker import run_job_reporting_errors
        code = run_job_reporting_errors(Job.from_wire(job), result_fd)
    except BaseException:  # noqa: BLE001 - reported on stderr, the parent reads its tail
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, max(FDS_PER_JOB))
    while not data.endswith(b"\n"):
        more = conn.recv(1 << 20)
        if not more:
            raise ConnectionError("request cut short")
        data += more
    if len(fds) not in FDS_PER_JOB:
        raise ConnectionError(f"expected {' or '.join(map(str, FDS_PER_JOB))} file descriptors, got {len(fds)}")
    return json.loads(data), fds


def _send(conn: socket.socket, message: dict) -> None:
    try:
        conn.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass  # the parent gave up on this child; nothing to tell


def serve(listener: socket.socket, lifeline: int) -> None:
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    abandoned: set[int] = set()
    while True:
        watched: list = [listener, lifeline, wake_read, *(c for p, c in children.items() if p not in abandoned)]
        try:
            readable = select.select(watched, [], [])[0]
        except InterruptedError:
            continue
        if lifeline in readable and not os.read(lifeline, 1):
            for pid in children:
                kill_group(pid)
            return
        if wake_read in readable:
            os.read(wake_read, 4096)
        _reap(children)
        abandoned &= children.keys()
        for pid, conn in list(children.items()):
            if conn in readable and not conn.recv(1, socket.MSG_PEEK):
                kill_group(pid)  # the parent closed the connection: the child is abandoned
                abandoned.add(pid)
        if listener in readable:
            conn, _ = listener.accept()
            try:
                job, fds = _receive(conn)
            except (OSError, ValueError) as exc:
                _send(conn, {"error": str(exc)})
                conn.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(job, fds, [listener, lifeline, wake_read, wake_write, conn, *children.values()])
            for fd in fds:
                os.close(fd)
            children[pid] = conn
            _send(conn, {"pid": pid})


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            _send(conn, {"status": status})
            conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bbagent.harness.sandbox.child.forkserver")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--device", required=True, choices=["cpu", "cuda"])
    args = parser.parse_args(argv)
    preload(args.device)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(args.socket)
    listener.listen(64)
    print("ready", flush=True)
    serve(listener, sys.stdin.fileno())
    # at once: the interpreter's own shutdown (torch and Triton loaded) takes most of a second,
    # and the parent waits for this process to end before it exits itself
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
