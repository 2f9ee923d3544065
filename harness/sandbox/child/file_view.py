"""What of the file system the sandbox child may see: an allow list, and a root built from it.

The allow list (``AllowList.for_child``) is computed in the child just before the candidate is
imported, from what is already loaded there, so that nothing is guessed:

* read-only: the Python installation (its prefixes), every ``site-packages``/``dist-packages``
  directory on ``sys.path``, every other ``sys.path`` entry (``PYTHONPATH``, ``pip install
  --target``, an editable install's source directories) except one that is or holds the user's
  home, the project's root, a broad shared directory, or a file of secrets (``.env``, ``.netrc``,
  ...), the package directory of every module already imported from
  anywhere else (bbagent's own ``harness/``, not the project tree around it), the system
  directories (``/usr``, ``/lib*``, ``/bin``, ``/sbin``), the directory of every shared library
  mapped into the process (the CUDA driver's included, once CUDA is up), ``CUDA_HOME`` and
  ``LD_LIBRARY_PATH``, a few files of ``/etc`` the dynamic loader and the C compiler read,
  ``/sys``, the process's own ``/proc/<pid>`` with a handful of system-wide ``/proc`` files,
  and the ``/dev`` entries a kernel needs (``null``, ``urandom``, the NVIDIA devices, ...);
* writable: the private working directory and the Triton cache.

Everything else (the rest of the project tree, ``runs/``, ``generated_kernels/``, the user's
home, other users' files, other processes) is absent.

Two mechanisms enforce it, and the Verdict's ``environment.containment.files`` says which:

* ``mount_namespace``: ``build_view`` makes a new root in the child's mount namespace (a tmpfs
  holding bind mounts of the allowed paths at their own places), ``pivot_root`` into it and
  detaches the old root, so nothing else exists for the process or anything it runs;
* ``audit_hook``: where the OS gives no mount namespace, the audit hook
  (``harness.sandbox.child.containment``) checks every ``open``, ``os.open`` and directory listing
  against the same list. It also runs inside the view, so a candidate that reaches for a file
  outside it is named the same way on every machine.
"""
from __future__ import annotations

import ctypes
import glob
import os
import tempfile
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass, field

from bbagent.harness.sandbox.paths import PROJECT_ROOT

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ld.so.preload", "alternatives", "localtime",
             "passwd", "group", "nsswitch.conf", "os-release", "mime.types", "gai.conf", "hosts")
PROC_FILES = ("cpuinfo", "meminfo", "stat", "uptime", "loadavg", "version", "filesystems", "devices",
              "modules", "sys", "driver")
DEV_ENTRIES = ("null", "zero", "full", "random", "urandom", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
               "nvidia-modeset", "nvidia-caps")
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2"}
RUN_DIRS = ("/run/nvidia-persistenced",)
PACKAGE_DIR_NAMES = ("site-packages", "dist-packages")
SECRET_NAMES = frozenset({".env", ".netrc", ".git-credentials", ".pypirc", ".npmrc", "credentials", ".aws", ".ssh",
                          ".gnupg", ".docker", ".kube", "id_rsa", "id_ed25519", ".bash_history"})

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME = 1024, 2048
KEPT_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME  # a user namespace may not drop them
MNT_DETACH = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203}


@dataclass
class AllowList:
    """Real (symlink-free) paths. ``links`` are the spellings with symlinks on the way
    (``/lib`` for ``/usr/lib``): the view recreates those links."""
    read_only: list[str] = field(default_factory=list)
    writable: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)  # inside an allowed directory, yet not shown

    @classmethod
    def for_child(cls, workdir: str, tool_write_dirs: list[str], hidden: Sequence[str] = ()) -> "AllowList":
        broad = _shared_roots()
        python = _python_paths(broad)
        spelled = python + _path_entries(broad) + _imported_package_paths(python, broad) + _library_dirs(broad)
        spelled += list(SYSTEM_DIRS)
        spelled += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
        spelled += [os.environ[v] for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
        spelled += ["/etc/" + name for name in ETC_FILES] + ["/sys"] + list(RUN_DIRS)
        spelled += [f"/proc/{os.getpid()}"] + ["/proc/" + name for name in PROC_FILES]
        spelled += ["/dev/" + name for name in DEV_ENTRIES] + glob.glob("/dev/nvidia[0-9]*")
        writable = _roots([os.path.realpath(p) for p in [workdir, *tool_write_dirs] if p and os.path.isdir(p)])
        read_only = _roots([os.path.realpath(p) for p in spelled if os.path.exists(p)])
        read_only = [p for p in read_only if not any(_under(p, w) for w in writable)]
        links = sorted({p for p in spelled + [workdir, *tool_write_dirs] if p and os.path.lexists(p)
                        and os.path.realpath(p) != os.path.normpath(p)})
        hidden = [os.path.realpath(h) for h in hidden
                  if any(_under(os.path.realpath(h), root) and os.path.realpath(h) != root
                         for root in read_only + writable)]
        return cls(read_only, writable, links, hidden)

    def allows(self, path: str) -> bool:
        """May the child read ``path`` (any spelling)?"""
        return self.allows_real(os.path.realpath(path))

    def allows_real(self, real: str) -> bool:
        """``allows`` for a path already resolved (``os.path.realpath``)."""
        if any(_under(real, h) for h in self.hidden):
            return False
        return any(_under(real, root) for root in self.read_only + self.writable) or real == "/proc/self"

    def allows_listing_real(self, real: str) -> bool:
        """May the child list the directory at ``real`` (resolved by ``os.path.realpath``): an
        allowed one, or one on the way to one (listing ``/proc`` shows only what the view holds)."""
        return self.allows_real(real) or any(_under(root, real) for root in self.read_only + self.writable)

    def summary(self) -> dict:
        return {"read_only_paths": self.read_only, "writable_paths": self.writable, "hidden_paths": self.hidden}


def _python_paths(broad: set[str]) -> list[str]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.update(sysconfig.get_paths().values())
    paths.update(p for p in sys.path if os.path.basename(os.path.normpath(p)) in PACKAGE_DIR_NAMES)
    return [p for p in paths if p and os.path.isabs(p) and os.path.realpath(p) not in broad]


def _path_entries(broad: set[str]) -> list[str]:
    """The ``sys.path`` entries beyond the Python installation, and the source directories of
    editable installs (their finders' ``MAPPING``), that may be shown: not a broad shared
    directory, not the project's root or anything in or around it (the project tree stays
    hidden: bbagent's own ``harness/`` is shown as an imported package), not one that holds the
    user's home, and not one holding a file of secrets."""
    entries = [p for p in sys.path if p and os.path.isabs(p)]
    for name, module in list(sys.modules.items()):
        mapping = getattr(module, "MAPPING", None) if name.startswith("__editable__") else None
        if isinstance(mapping, dict):
            entries += [str(v) for v in mapping.values() if isinstance(v, str)]
    homes = {os.path.realpath(os.path.expanduser("~")), os.path.realpath(os.environ.get("HOME", "/"))}
    project = os.path.realpath(PROJECT_ROOT)
    shown = []
    for entry in entries:
        real = os.path.realpath(entry)
        if not os.path.isdir(real) or real in broad or _under(real, project) or _under(project, real) \
                or any(_under(home, real) for home in homes) or _holds_secrets(real):
            continue
        shown.append(entry)
    return shown


def _holds_secrets(directory: str) -> bool:
    try:
        return any(name in SECRET_NAMES for name in os.listdir(directory))
    except OSError:
        return True


def _imported_package_paths(shown: list[str], broad: set[str]) -> list[str]:
    """The outermost package directory (or module file) of every module imported so far: not the
    sys.path entry it came from, which may hold much more (the project tree around ``harness/``).
    ``a.b.c`` in ``.../a/b/c.py`` is shown as ``.../a``; where an editable install maps a
    subpackage elsewhere (``bbagent.harness`` onto a checkout's ``harness/``, beside
    ``bbagent`` in ``agent/api/``), as the outermost package whose folder holds the file."""
    found = set()
    for name, module in list(sys.modules.items()):
        location = getattr(module, "__file__", None)
        if not isinstance(location, str) or not os.path.isabs(location) or name == "__main__" \
                or any(_under(location, root) for root in shown):
            continue
        found.add(_outermost_package_path(name, location))
    return sorted(top for top in found if os.path.realpath(top) not in broad)


def _outermost_package_path(name: str, location: str) -> str:
    parts = name.split(".")
    for depth in range(1, len(parts)):
        package = sys.modules.get(".".join(parts[:depth]))
        for folder in getattr(package, "__path__", None) or []:
            if isinstance(folder, str) and os.path.isabs(folder) and _under(location, folder):
                return folder
    return os.path.dirname(location) if os.path.basename(location).startswith("__init__.") else location


def _library_dirs(broad: set[str]) -> list[str]:
    """Directories of the shared libraries mapped into this process."""
    dirs = set()
    try:
        with open(f"/proc/{os.getpid()}/maps") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) == 6 and fields[5].startswith("/") and ".so" in fields[5]:
                    dirs.add(os.path.dirname(fields[5].strip()))
    except OSError:
        pass
    return sorted(d for d in dirs if os.path.realpath(d) not in broad)


def _shared_roots() -> set[str]:
    """Directories too broad to show whole: ``/``, ``/tmp``, a home directory and what holds it."""
    homes = {os.path.realpath(os.path.expanduser("~")), os.path.realpath(os.environ.get("HOME", "/"))}
    return {"/", "/home", "/root", "/tmp", "/var", "/var/tmp", "/opt", "/mnt", "/srv", "/media"} | homes | \
        {os.path.dirname(home) for home in homes}


def _roots(paths: list[str]) -> list[str]:
    """The paths without those inside another one (shown through it already)."""
    kept: list[str] = []
    for path in sorted(set(paths), key=len):
        if not any(_under(path, root) for root in kept):
            kept.append(path)
    return sorted(kept)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class ViewError(OSError):
    """The view could not be built (the reason is the OS's)."""


def build_view(allowed: AllowList, workdir: str) -> None:
    """In a private mount namespace: a new root holding only ``allowed``, entered with
    ``pivot_root``; the old root is detached. The working directory is ``workdir`` afterwards.
    Raises ``ViewError`` (the process is then unchanged or unusable; the caller ends it)."""
    libc = ctypes.CDLL(None, use_errno=True)

    def mount(source, target, fstype, flags, data=None) -> None:
        encoded = [os.fsencode(x) if isinstance(x, str) else x for x in (source, target, fstype, data)]
        if libc.mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]) != 0:
            error = ctypes.get_errno()
            raise ViewError(error, f"mount {source or fstype} on {target}: {os.strerror(error)}")

    # a new folder each time: an evaluation run again (alone, after a doubt) reuses its working
    # directory, where the last child's folder is left (and whatever the candidate put there)
    staging = tempfile.mkdtemp(prefix=".view-", dir=workdir)
    mount("tmpfs", staging, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0755")
    for link in allowed.links:
        _recreate_link_chain(staging, link)
    for path in allowed.read_only:
        _bind(mount, path, staging + path, read_only=True, extra=0)
    for path in allowed.writable:
        _bind(mount, path, staging + path, read_only=False,
              extra=MS_NOSUID | MS_NODEV | (MS_NOEXEC if path == os.path.realpath(workdir) else 0))
    for path in allowed.hidden:
        if os.path.isdir(staging + path):
            mount("tmpfs", staging + path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k")
    pid = os.getpid()
    if allowed.allows(f"/proc/{pid}"):
        os.symlink(str(pid), os.path.join(staging, "proc", "self"))
        os.symlink("self/mounts", os.path.join(staging, "proc", "mounts"))
    dev = os.path.join(staging, "dev")
    os.makedirs(dev, exist_ok=True)
    for name, target in DEV_LINKS.items():
        if not os.path.lexists(os.path.join(dev, name)):
            os.symlink(target, os.path.join(dev, name))
    os.makedirs(os.path.join(dev, "shm"), exist_ok=True)
    mount("tmpfs", os.path.join(dev, "shm"), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64m,mode=1777")
    mount(None, staging, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    _pivot(libc, staging)
    os.chdir(workdir)


def _bind(mount, source: str, target: str, read_only: bool, extra: int) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "a").close()
    mount(source, target, None, MS_BIND | MS_REC)
    kept = os.statvfs(source).f_flag & KEPT_FLAGS
    mount(None, target, None, MS_BIND | MS_REMOUNT | kept | extra | (MS_RDONLY if read_only else 0))


def _recreate_link_chain(staging: str, spelled: str) -> None:
    """Each symlink met on the way along ``spelled`` exists in the view with the same target."""
    parts = os.path.normpath(spelled).strip(os.sep).split(os.sep)
    current = os.sep
    for index, part in enumerate(parts):
        here = os.path.join(current, part)
        if os.path.islink(here):
            in_view = staging + here
            if not os.path.lexists(in_view):
                os.makedirs(os.path.dirname(in_view), exist_ok=True)
                os.symlink(os.readlink(here), in_view)
            rest = parts[index + 1:]
            if rest:
                _recreate_link_chain(staging, os.path.join(os.path.realpath(here), *rest))
            return
        current = here


def _pivot(libc, new_root: str) -> None:
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise ViewError(0, f"pivot_root: unknown system call number on {os.uname().machine}")
    os.chdir(new_root)
    if libc.syscall(number, b".", b".") != 0:
        error = ctypes.get_errno()
        raise ViewError(error, f"pivot_root: {os.strerror(error)}")
    if libc.umount2(b".", MNT_DETACH) != 0:
        error = ctypes.get_errno()
        raise ViewError(error, f"detaching the old root: {os.strerror(error)}")
    os.chdir("/")
