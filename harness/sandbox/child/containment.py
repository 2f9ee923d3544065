"""Containment of the sandbox child, applied before any candidate code is imported.

Layers, each listed in the Verdict (``environment.containment``):

* **Namespaces**, where the OS allows them: a network namespace (no interface is up, so every
  connection fails, 127.0.0.1 included) and a private mount namespace, in which ``seal`` builds
  the child's file view (``harness.sandbox.child.file_view``: only the allow list exists). Where the OS
  refuses, the reason is recorded and the audit hook below is the only barrier.
* **No capabilities** once sealed (``drop_capabilities``): root on a GPU machine, or the owner of
  the user namespace, can mount nothing, leave the view or make device nodes.
* **Resource limits**: no core dumps, a file-size limit, and a process-count limit (the kernel
  exempts uid 0 from that one; the parent's process watchdog covers root).
* **An audit hook** (``sys.addaudithook``; it cannot be removed from Python) that reports and
  ends the process on the first network use, write outside the working directory, process
  start or fork (but the harness's own compile processes), read of credentials or a process
  environment, or read or listing of a path outside the allow list by the candidate's own code,
  naming the candidate's line. A library's read outside the list fails as the view would fail it
  (file not found). Triton's own compiler may write to its cache and run its tools (ptxas, the C
  compiler for launchers); that is told apart by the code that asks, not by the candidate.
* **The run-time backing of the static rules**, on the same hook, for what the candidate's own
  code asks, however it is spelt: a thread started (``stray_thread``; on Python 3.11, which has
  no audit event for it, ``threading``'s and ``_thread``'s thread starts are wrapped instead);
  frames, tracebacks, the garbage collector's object lists (``reaches_harness``; a library that only
  finds its caller's module, as ``warnings``, ``logging`` and ``namedtuple`` do, is not the
  candidate asking); the code or defaults of a function, or the bases of a class, that is not its
  own, a tracer, a profiler or another audit hook (``tampering``; one a library adds for itself, as
  filelock does on Python 3.12 when torch or Helion imports it, is the library's); ctypes, or native code built and loaded
  outside Triton's compilation of a kernel (``native_code``). What a library asks on its own
  behalf (Triton's compile threads) is not the candidate's.

The candidate cannot import ctypes (static check), and the hook stops it at run time, so it
cannot get under the hook.
"""
from __future__ import annotations

import errno
import functools
import os
import re
import sys
import sysconfig
import threading
import time

from bbagent.harness.sandbox.child.file_view import AllowList, build_view
from bbagent.harness.sandbox.child.os_layers import drop_capabilities, enter_namespaces, set_limits
from bbagent.harness.sandbox.paths import HARNESS_DIR

VIOLATION_EXIT_CODE = 86
# the one harness module that forks once the candidate is imported (the compile processes)
HARNESS_FORKER = os.path.realpath(os.path.join(os.path.dirname(__file__), "compile_processes.py"))

NETWORK_EVENTS = frozenset({"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
                            "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"})
SOCKET_METHOD_EVENTS = frozenset({"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"})
PROCESS_EVENTS = frozenset({"os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system",
                            "subprocess.Popen", "os.startfile", "os.kill", "os.killpg"})
TOOL_EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn"})  # Triton runs ptxas and cc this way
WRITE_EVENTS = frozenset({"os.rename", "os.replace", "os.remove", "os.unlink", "os.rmdir", "os.mkdir",
                          "os.link", "os.symlink", "os.truncate", "os.chmod", "os.chown", "os.utime",
                          "shutil.rmtree", "shutil.copyfile", "shutil.copymode", "shutil.copystat",
                          "shutil.move"})
COPY_EVENTS = frozenset({"shutil.copyfile", "shutil.copymode", "shutil.copystat"})  # (src, dst)
LISTING_EVENTS = frozenset({"os.listdir", "os.scandir"})
MAX_IMPORTS_LISTED = 200
THREAD_EVENTS = frozenset({"_thread.start_new_thread", "_thread.start_joinable_thread"})  # Python 3.12 and newer
FRAME_EVENTS = frozenset({"sys._getframe", "sys._current_frames", "sys._current_exceptions", "gc.get_objects",
                          "gc.get_referrers", "gc.get_referents"})
FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back", "__code__"})
HOOK_EVENTS = frozenset({"sys.settrace", "sys.setprofile", "sys.addaudithook"})
NATIVE_EVENTS = frozenset({"ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.cdata",
                           "ctypes.cdata/buffer", "ctypes.call_function", "ctypes.addressof", "ctypes.string_at",
                           "ctypes.wstring_at", "ctypes.create_string_buffer"})
MUTATION_EVENTS = frozenset({"object.__setattr__", "object.__delattr__"})
REWIRING_ATTRIBUTES = frozenset({"__code__", "__defaults__", "__kwdefaults__", "__bases__"})
# the standard library's functions that hand frames back to their caller (inspect.currentframe,
# traceback.walk_stack, ...); others call sys._getframe only to find their caller's module
# (warnings.warn, logging, collections.namedtuple, typing, enum), which a kernel may use
FRAME_GIVERS = (os.sep + "inspect.py", os.sep + "traceback.py", os.sep + "pdb.py", os.sep + "bdb.py")
# Triton compiling a kernel: a C build or a native module loaded below one of these is Triton's own
TRITON_COMPILING = ("runtime/jit.py", "runtime/autotuner.py", "runtime/interpreter.py", "compiler/")
CANDIDATE_MODULE = "bbagent_candidate"  # the name the worker imports the candidate under
WATCHED = (NETWORK_EVENTS | PROCESS_EVENTS | WRITE_EVENTS | LISTING_EVENTS | THREAD_EVENTS | FRAME_EVENTS | HOOK_EVENTS
           | NATIVE_EVENTS | MUTATION_EVENTS | {"open", "sqlite3.connect", "object.__getattr__", "import"})
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
SECRET_DIRS = frozenset({".ssh", ".aws", ".gnupg", ".docker", ".kube", ".azure", "gcloud"})
SECRET_FILES = frozenset({".netrc", ".pgpass", ".git-credentials", "credentials", ".env", ".npmrc",
                          ".pypirc", "hosts.yml"})
PROC_SECRET = re.compile(r"^/proc/[^/]+/(task/[^/]+/)?(environ|mem)$")


def seal(status: dict, guard: "AuditGuard", workdir: str, tool_write_dirs: list[str],
         hidden: list[str]) -> dict:
    """Just before the candidate is imported: compute the allow list from what is loaded now,
    build the file view from it where the mount namespace allows, and arm the audit hook with
    it. Returns what the Verdict's containment gains (mechanism, paths, seconds)."""
    started = time.perf_counter()
    allowed = AllowList.for_child(workdir, tool_write_dirs, hidden)
    files, notes = "audit_hook", []
    if status.get("mount_namespace"):
        try:
            build_view(allowed, workdir)
            files = "mount_namespace"
        except OSError as exc:
            notes.append(f"no file view ({exc}); file reads are guarded by the audit hook only")
    dropped = drop_capabilities()
    if dropped is not True:
        notes.append(f"capabilities not dropped ({dropped})")
    guard.arm(allowed)
    return {"files": files, **allowed.summary(), "capabilities_dropped": dropped is True, "notes": notes,
            "seal_s": round(time.perf_counter() - started, 4)}


class AuditGuard:
    """The audit hook. ``report(kind, message)`` must put the finding on the result channel;
    the process then ends with ``VIOLATION_EXIT_CODE`` so the candidate cannot catch it."""

    def __init__(self, workdir: str, tool_write_dirs: list[str], candidate_file: str, report):
        self.write_roots = [os.path.realpath(workdir)]
        self.tool_roots = [os.path.realpath(d) for d in tool_write_dirs if d]
        self.candidate_file = candidate_file
        self.report = report
        self.stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
        import torch
        import triton
        self.tool_package = os.path.realpath(os.path.dirname(triton.__file__))
        harness_dir = os.path.realpath(HARNESS_DIR)
        self.protected_roots = [self.stdlib, self.tool_package, os.path.realpath(os.path.dirname(torch.__file__)),
                                harness_dir]
        self.judging = threading.local()  # per thread: Triton compiles in several at once (compile_ahead)
        self.armed = False
        self.allowed: AllowList | None = None
        self.imported: list[str] = []  # modules first imported once armed (a diagnostic of cost)

    def install(self) -> None:
        sys.addaudithook(self.hook)

    def arm(self, allowed: AllowList | None = None) -> None:
        """From now on every watched event is judged, reads against ``allowed``. Called just
        before the candidate is imported: the harness's own suite building (which forks to probe
        aten safely) runs before, unarmed."""
        self.allowed = allowed
        self.armed = True

    def hook(self, event: str, args: tuple) -> None:
        if not self.armed or event not in WATCHED or getattr(self.judging, "busy", False):
            return
        if event == "import" and args[1] is None and len(self.imported) < MAX_IMPORTS_LISTED:
            self.imported.append(str(args[0]))
        self._judged(self.judge, event, args)

    def _judged(self, judge, *args) -> None:
        """``judge(*args)``, stopping the process on a finding; the events this raises itself (its
        frame walks) are not judged."""
        if getattr(self.judging, "busy", False):
            return
        self.judging.busy = True
        try:
            finding = judge(*args)
            if finding:
                self.stop(*finding)
        finally:
            self.judging.busy = False

    def stop(self, kind: str, what: str) -> None:
        """Report the violation (with the candidate's line) and end the process at once. Called
        while judging (the events its own frame walk raises are not judged)."""
        line = self._candidate_line()
        where = f"candidate line {line}: " if line else ""
        self.report(kind, f"{where}{what} (stopped by the sandbox)")
        os._exit(VIOLATION_EXIT_CODE)

    def watch_thread_starts(self) -> None:
        """Where Python raises no audit event for a new thread (3.11), wrap the functions that start
        one (``threading``'s and ``_thread``'s) so that a start by the candidate's code is judged."""
        if sys.version_info >= (3, 12):
            return
        import _thread
        guard, original = self, _thread.start_new_thread

        def start_new_thread(*args, **kwargs):
            if guard.armed:
                guard._judged(guard.judge_thread_start)
            return original(*args, **kwargs)
        _thread.start_new_thread = start_new_thread
        threading._start_new_thread = start_new_thread  # type: ignore[attr-defined]  # CPython's private alias

    def judge(self, event: str, args: tuple) -> tuple[str, str] | None:
        if event == "import":
            return self._judge_native_module(args)
        if event in THREAD_EVENTS:
            return self.judge_thread_start()
        if event in FRAME_EVENTS or event == "object.__getattr__":
            return self._judge_introspection(event, args)
        if event in HOOK_EVENTS:  # a library's own hook (filelock adds one on Python 3.12) is the library's
            if self._from_candidate():
                return "tampering", f"installed a tracing, profiling or audit hook ({event})"
            return None
        if event in NATIVE_EVENTS:
            if self._from_candidate():
                return "native_code", f"used ctypes ({event} {_short(args)}); a kernel computes in Triton"
            return None
        if event in MUTATION_EVENTS:
            return self._judge_mutation(event, args)
        if event in NETWORK_EVENTS:
            shown = args[1:] if event in SOCKET_METHOD_EVENTS else args  # a method's first argument is the socket
            return "network", f"network use ({event} {_short(shown)})"
        if event in PROCESS_EVENTS:
            if event in TOOL_EVENTS and self._from_tool():
                if self._built_for_candidate():
                    return "native_code", (f"built native code outside Triton's compilation of a kernel ({event} "
                                           f"{_short(_command(event, args))})")
                return None
            if event == "os.fork" and _code_path(self._first_caller()) == HARNESS_FORKER:
                return None  # the harness's own compile processes (compiling ahead)
            if event in ("os.kill", "os.killpg") and args[0] in (0, os.getpid(), os.getpgid(0)):
                return None  # signalling itself harms no one else (and is reported as a crash)
            return "process_spawn", f"started a process ({event} {_short(_command(event, args))})"
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            if not isinstance(path, (str, bytes)):
                return None
            path = os.fsdecode(path)
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(flags, int) and flags & WRITE_FLAGS)
            if writes:
                return self._judge_write(path, f"open({path!r}, {mode or flags!r})")
            return self._judge_read(path)
        if event in LISTING_EVENTS:
            if (isinstance(args[0], (str, bytes)) and self.allowed
                    and not self.allowed.allows_listing_real(self._real_path(os.fsdecode(args[0])))):
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.fsdecode(args[0]))
            return None
        if event == "sqlite3.connect":
            database = args[0] if args else None
            if isinstance(database, (str, bytes, os.PathLike)) and os.fsdecode(database) != ":memory:":
                return self._judge_write(os.fsdecode(database), f"sqlite3.connect({os.fsdecode(database)!r})")
            return None
        targets = args[1:2] if event in COPY_EVENTS else args
        for path in [a for a in targets if isinstance(a, (str, bytes))]:
            finding = self._judge_write(os.fsdecode(path), f"{event}({_short(args)})")
            if finding:
                return finding
        return None

    def judge_thread_start(self) -> tuple[str, str] | None:
        if self._from_candidate():
            return "stray_thread", "started a thread; a kernel computes on the calling thread (work left to another " \
                                   "thread escapes the checks and the timing)"
        return None

    def _judge_introspection(self, event: str, args: tuple) -> tuple[str, str] | None:
        """Frames, tracebacks and the collector's object lists asked for by the candidate's own code."""
        if event == "object.__getattr__":
            obj, name = args[0], args[1]
            if name not in FRAME_ATTRIBUTES or (name == "__code__" and _owned_by_candidate(obj)):
                return None
        if not self._from_candidate():
            return None
        if event == "sys._getframe":
            top = self._top_caller()
            if top != self.candidate_file and not top.endswith(FRAME_GIVERS):
                return None  # a library finding its caller's module hands no frame back
        what = f"'{args[1]}' of a {type(args[0]).__name__}" if event == "object.__getattr__" else event
        return "reaches_harness", (f"reached into the frames or objects of the process ({what}); a kernel must not "
                                   "look at the harness that shares its process")

    def _judge_mutation(self, event: str, args: tuple) -> tuple[str, str] | None:
        """A function's code or defaults, or a class's bases, set by the candidate's own code on
        something that is not its own: what the attribute tables do not show (plain attributes raise
        no event, and the harness compares the tables themselves: ``harness.checks.integrity``).
        Renaming (``__module__``, ``__qualname__``, ``__doc__``: ``namedtuple``, ``functools.wraps``)
        changes no behaviour."""
        obj, name = args[0], args[1]
        if name not in REWIRING_ATTRIBUTES or _owned_by_candidate(obj) or not self._protected(obj):
            return None
        if not self._from_candidate():
            return None
        owner = getattr(obj, "__qualname__", type(obj).__name__)
        return "tampering", f"changed {getattr(obj, '__module__', '?')}.{owner}.{name} ({event})"

    def _protected(self, obj) -> bool:
        """A function whose code is in a file of the standard library, torch, Triton or the harness
        (not one made moments ago from a string, as ``namedtuple`` makes its ``__new__``), or a class
        of those."""
        code = getattr(obj, "__code__", None)
        if isinstance(obj, type):
            module = sys.modules.get(getattr(obj, "__module__", None) or "")
            path = getattr(module, "__file__", None)
        else:
            path = getattr(code, "co_filename", None)
        if not isinstance(path, str) or path.startswith("<"):
            return False
        real = _code_path(path)
        return any(_under(real, root) for root in self.protected_roots)

    def _judge_native_module(self, args: tuple) -> tuple[str, str] | None:
        """A native module loaded from a writable directory (the candidate's own build), unless
        Triton loads the launcher it compiled for a kernel."""
        filename = args[1] if len(args) > 1 else None
        if not isinstance(filename, str) or not filename.endswith((".so", ".pyd")):
            return None
        real = self._real_path(filename)
        writable = self.write_roots + self.tool_roots
        if not any(_under(real, root) for root in writable):
            return None
        if self._from_tool() and not self._built_for_candidate():
            return None
        return "native_code", f"loaded a native module it built ({filename}); a kernel computes in Triton"

    def _built_for_candidate(self) -> bool:
        """Triton's build functions called by the candidate directly (a C extension of its own), not
        under Triton's compilation of a kernel (its launcher)."""
        for frame in self._frames():
            name = frame.f_code.co_filename
            if name == self.candidate_file:
                return True
            path = _code_path(name)
            if _under(path, self.tool_package) and path[len(self.tool_package) + 1:].startswith(TRITON_COMPILING):
                return False
        return False

    def _top_caller(self) -> str:
        """The file of the innermost frame above the hook."""
        for frame in self._frames():
            return _code_path(frame.f_code.co_filename)
        return ""

    def _judge_read(self, path: str) -> tuple[str, str] | None:
        """Credentials and process environments are named as such; any other path outside the
        allow list is a violation when the candidate's own code opens it, and not found (as
        in the file view) when a library does."""
        real = self._real_path(path)  # resolved once: an event's path is judged twice
        if _is_secret(path, real):
            return "secret_read", f"read of {path!r}"
        if self.allowed is None or self.allowed.allows_real(real):
            return None
        if self._from_candidate():
            return "forbidden_read", f"read of {path!r}, outside what the sandbox shows a kernel"
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)

    def _real_path(self, path: str) -> str:
        """``os.path.realpath(path)``, without asking the disk for an absolute path inside a tool
        directory (Triton's cache): only Triton writes there and it makes no links, so there the
        normalised spelling is the real path. Triton's cache raises over a hundred events per
        compilation, and resolving each path component by component held the GIL that the
        compile threads share."""
        if os.path.isabs(path):
            normal = os.path.normpath(path)
            if any(_under(normal, root) for root in self.tool_roots):
                return normal
        return os.path.realpath(path)

    def _judge_write(self, path: str, what: str) -> tuple[str, str] | None:
        real = self._real_path(path)
        if real == os.devnull or any(_under(real, root) for root in self.write_roots):
            return None
        if any(_under(real, root) for root in self.tool_roots) and self._from_tool():
            return None
        return "forbidden_write", f"write outside the working directory: {what}"

    def _frames(self):
        """The stack above the hook (this module's frames left out)."""
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename != __file__:
                yield frame
            frame = frame.f_back

    def _first_caller(self) -> str:
        """The file of the first frame outside the standard library: who asked."""
        for frame in self._frames():
            name = frame.f_code.co_filename
            if name.startswith("<frozen") or _under(_code_path(name), self.stdlib):
                continue
            return name
        return ""

    def _from_tool(self) -> bool:
        """Triton (its compiler, launcher build or cache) asked, not the candidate or anything
        it called directly."""
        return _under(_code_path(self._first_caller()), self.tool_package)

    def _from_candidate(self) -> bool:
        return self._first_caller() == self.candidate_file

    def _candidate_line(self) -> int | None:
        for frame in self._frames():
            if frame.f_code.co_filename == self.candidate_file:
                return frame.f_lineno
        return None


@functools.lru_cache(maxsize=4096)
def _code_path(filename: str) -> str:
    """The real path of a loaded module's file, as a frame names it: resolved once per file, since
    every watched event walks the stack (Triton's compile threads raise thousands of events, and
    resolving each frame's path again held the GIL for most of their time)."""
    return os.path.realpath(filename)


def _owned_by_candidate(obj) -> bool:
    """A function or class the candidate's module defined (its own to change)."""
    try:
        return getattr(obj, "__module__", None) == CANDIDATE_MODULE
    except Exception:  # noqa: BLE001 - an attribute that raises: not the candidate's own
        return False


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _is_secret(path: str, real: str) -> bool:
    """``path`` (``real`` its real path) is a credential file or a process's environment or memory."""
    if PROC_SECRET.match(path) or PROC_SECRET.match(real):
        return True
    parts = real.split(os.sep)
    return bool(SECRET_DIRS.intersection(parts)) or parts[-1] in SECRET_FILES


def _command(event: str, args: tuple):
    """What a process event started: its command line, not its environment."""
    return args[1] if event in ("subprocess.Popen", "os.posix_spawn", "os.exec") and len(args) > 1 else args


def _short(value, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...)"


def contain(workdir: str, tool_write_dirs: list[str], candidate_file: str, report,
            namespaces: bool = True, network_namespace: bool = True) -> tuple[dict, AuditGuard]:
    """Apply every layer but the file view; return what is in force (for the Verdict) and the
    audit guard, installed but not yet armed (``seal`` builds the view and arms it)."""
    status = enter_namespaces(network_namespace) if namespaces else {
        "network_namespace": False, "mount_namespace": False, "notes": ["namespaces not requested"]}
    status["limits"] = set_limits()
    guard = AuditGuard(workdir, tool_write_dirs, candidate_file, report)
    guard.install()
    guard.watch_thread_starts()
    status["audit_hook"] = True
    return status, guard
