"""The operating system's layers of the sandbox child's containment (``harness.sandbox.child.containment``
applies them with the audit hook): a network and a private mount namespace where the OS allows
them, no capabilities once sealed, and resource limits (no core dumps, a file-size limit, a
process-count limit). Each returns what is in force, with the OS's reason where it is not.
Child side; standard library only.
"""
from __future__ import annotations

import ctypes
import os
import resource

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_REC, MS_PRIVATE = 16384, 1 << 18

FILE_SIZE_LIMIT = 1 << 30
PROCESS_HEADROOM = 64


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _unshare(flags: int) -> str | None:
    if _libc().unshare(flags) != 0:
        return os.strerror(ctypes.get_errno())
    return None


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def enter_namespaces(network: bool = True) -> dict:
    """A network and a private mount namespace for this process (the file view is built in the
    latter by ``seal``); the mount namespace alone with ``network`` False. Returns what is in
    force, with the OS's reason where something is not."""
    notes: list[str] = []
    status = {"network_namespace": False, "mount_namespace": False, "notes": notes}
    uid, gid = os.getuid(), os.getgid()
    flags = (CLONE_NEWNET if network else 0) | CLONE_NEWNS
    error = _unshare(flags) if uid == 0 else "not root"
    if error:  # again inside a new user namespace (unprivileged, or root without CAP_SYS_ADMIN)
        user_error = _unshare(CLONE_NEWUSER | flags)
        if user_error is None:
            try:
                _write("/proc/self/setgroups", "deny")
                _write("/proc/self/uid_map", f"{uid} {uid} 1")
                _write("/proc/self/gid_map", f"{gid} {gid} 1")
                error = None
            except OSError as exc:
                error = f"user namespace id maps: {exc.strerror}"
        else:
            error = f"{error}; user namespace: {user_error}"
    if error:
        notes.append(f"no network or mount namespace (unshare: {error}); the network, file "
                               "reads and file writes are guarded by the audit hook only")
        return status
    status["network_namespace"] = network
    if not network:
        notes.append("no network namespace (not asked for); the network is guarded by the audit hook only")
    if _libc().mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        notes.append(f"mount namespace not private ({os.strerror(ctypes.get_errno())}); "
                               "file reads are guarded by the audit hook only")
        return status
    status["mount_namespace"] = True
    return status


PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
CAPABILITY_VERSION_3 = 0x20080522
LAST_CAPABILITY_MAX = 63


def drop_capabilities() -> bool | str:
    """No capability is left to the process or anything it starts (no new privileges either):
    root on a GPU machine, or the owner of a user namespace, can then mount nothing, leave its
    root, or make device nodes, even from native code. True, or the OS's reason."""
    libc = _libc()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"no_new_privs: {os.strerror(ctypes.get_errno())}"
    for capability in range(LAST_CAPABILITY_MAX + 1):
        libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)  # EINVAL past the kernel's last one
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable; two 32-bit words each
    if libc.capset(header, data) != 0:
        return f"capset: {os.strerror(ctypes.get_errno())}"
    return True


def _count_own_processes() -> int:
    uid, count = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


def set_limits() -> dict:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    limits = {"core_dumps": 0, "file_size_bytes": FILE_SIZE_LIMIT, "processes": None}
    if os.getuid() != 0:
        allowed = _count_own_processes() + PROCESS_HEADROOM
        resource.setrlimit(resource.RLIMIT_NPROC, (allowed, allowed))
        limits["processes"] = allowed
    return limits
