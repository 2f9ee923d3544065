"""The sandbox (issue 4): every fault in tests/faults/faults.json is contained and reported with
its own error kind, a correct kernel evaluated right after it in the same warm pool still passes,
secrets stay in the parent, and the network and every file outside the allow list are out of reach.

The fault corpus runs on the default device: the Triton interpreter here (each fault has a CPU
expectation), the GPU on a GPU machine. The source check is off for it, so that every fault
reaches the run-time containment.
"""
import json
import os
import socket
import threading
from pathlib import Path

import pytest
import torch

from conftest import KERNELS, ROOT
from bbagent.harness.sandbox.child.containment import enter_namespaces
from bbagent.harness.sandbox.child.file_view import AllowList, build_view
from bbagent.harness.evaluate import EvaluationRequest, default_device, evaluate_kernel
from bbagent.harness.selfcheck import entry_id, expected_kinds, load_corpus, messages, observed_kinds, run_entry
from bbagent.harness.sandbox.parent.watch import BoundedCapture

FAULTS = ROOT / "tests" / "faults"
ENTRIES = load_corpus(FAULTS / "faults.json")
DEVICE = default_device()


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry_id(e) for e in ENTRIES])
def test_fault_is_contained_and_the_pool_survives_it(entry):
    if expected_kinds(entry, DEVICE) is None:
        pytest.skip(f"{entry['pitfall']}: no expectation on {DEVICE}")
    row = run_entry(entry, FAULTS, seed=1234, device=DEVICE)
    assert row["ok"], f"{row['id']}: expected {row['expect']}, saw {row['seen']}; {row['message']}"


def test_fault_corpus_covers_every_fault_the_sandbox_names():
    kinds = set()
    for entry in ENTRIES:
        for allowed in entry["expect"].values():
            kinds.update(allowed)
    assert kinds >= {"timeout", "crash", "cuda_error", "cuda_oom", "host_oom", "exit", "import_error",
                     "output_flood", "process_spawn", "network", "forbidden_write", "secret_read",
                     "forbidden_read"}


def test_api_keys_in_the_parent_are_invisible_to_the_candidate(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-parent-secret")
    verdict = evaluate_kernel(EvaluationRequest.of("aten.relu.default", device=DEVICE, seed=1, static_check=False), FAULTS / "env_probe.py")
    assert observed_kinds(verdict) == {"exception"}
    assert "secret-looking variables visible: []" in messages(verdict)
    assert "parent-secret" not in verdict.model_dump_json()
    # with the source check on, reading the environment is refused before the kernel runs
    assert evaluate_kernel(EvaluationRequest.of("aten.relu.default", device=DEVICE, seed=1), FAULTS / "env_probe.py").error_kind == "guard"


def test_a_socket_to_localhost_fails(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    accepted = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except OSError:
                continue
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    candidate = tmp_path / "phones_home.py"
    candidate.write_text((FAULTS / "connects_to_localhost.py").read_text().replace('("127.0.0.1", 9)',
                                                                                   f'("127.0.0.1", {port})'))
    try:
        verdict = evaluate_kernel(EvaluationRequest.of("aten.relu.default", device=DEVICE, seed=1, static_check=False), candidate)
    finally:
        stop.set()
        thread.join()
        server.close()
    assert verdict.error_kind == "network" and f"127.0.0.1', {port}" in verdict.message
    assert accepted == []


def _in_namespaced_child(action) -> str:
    """Run ``action`` in a forked child after enter_namespaces; return what it returned."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            status = enter_namespaces()
            outcome = action() if status["mount_namespace"] else "no namespaces: " + "; ".join(status["notes"])
        except BaseException as exc:  # noqa: BLE001
            outcome = f"error {exc!r}"
        os.write(write, outcome.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        text = f.read().decode()
    os.waitpid(pid, 0)
    return text


def test_network_namespace_alone_blocks_localhost():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]

    def connect():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return "connected"
        except OSError as exc:
            return f"refused: {exc.strerror}"
    try:
        outcome = _in_namespaced_child(connect)
    finally:
        server.close()
    if outcome.startswith("no namespaces"):
        pytest.skip(f"this OS gives no network namespace here ({outcome}); the audit hook is the barrier")
    assert outcome.startswith("refused"), outcome


def test_the_file_view_shows_only_the_allow_list(tmp_path):
    """In the mount namespace: the working directory is writable, bbagent's code and the Python
    installation readable, the rest of the project and every other file absent."""
    workdir, outside = tmp_path / "work", tmp_path / "outside.txt"
    workdir.mkdir()
    outside.write_text("not for the kernel")

    def look():
        allowed = AllowList.for_child(str(workdir), [])
        build_view(allowed, str(workdir))
        seen = {"outside": outside.exists(), "readme": (ROOT / "README.md").exists(),
                "harness": (ROOT / "harness" / "evaluate.py").is_file(), "torch": os.path.isdir(os.path.dirname(torch.__file__)),
                "cwd": os.getcwd() == str(workdir.resolve()), "proc": sorted(p for p in os.listdir("/proc") if p.isdigit())}
        (workdir / "x.txt").write_text("mine")
        try:
            (ROOT / "harness" / "x.txt").write_text("escaped")
            seen["harness_write"] = "written"
        except OSError as exc:
            seen["harness_write"] = exc.strerror
        return json.dumps(seen)
    outcome = _in_namespaced_child(look)
    if outcome.startswith("no namespaces"):
        pytest.skip(f"this OS gives no mount namespace here ({outcome}); the audit hook is the barrier")
    seen = json.loads(outcome)
    assert seen["harness_write"] == "Read-only file system"
    assert seen["harness"] and seen["torch"] and seen["cwd"]
    assert not seen["outside"] and not seen["readme"]
    assert len(seen["proc"]) == 1  # its own process only
    assert (workdir / "x.txt").read_text() == "mine" and not (ROOT / "harness" / "x.txt").exists()


def test_a_second_view_in_the_same_working_directory_is_built_afresh(tmp_path):
    """An evaluation run again alone (issue 75, 4) reuses its working directory, where the first
    child's staging folder is left, and whatever its candidate planted there (a ``.view`` link out):
    the second child's view is built in a folder of its own, not refused ("File exists")."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / ".view").symlink_to(tmp_path)  # planted by a candidate

    def look():
        build_view(AllowList.for_child(str(workdir), []), str(workdir))
        return json.dumps({"cwd": os.getcwd() == str(workdir.resolve())})
    for _ in range(2):
        outcome = _in_namespaced_child(look)
        if outcome.startswith("no namespaces"):
            pytest.skip(f"this OS gives no mount namespace here ({outcome}); the audit hook is the barrier")
        assert json.loads(outcome)["cwd"], outcome
    assert (workdir / ".view").is_symlink()  # followed by nothing


def test_cold_start_gives_the_same_verdict_as_the_warm_pool():
    warm = evaluate_kernel(EvaluationRequest.of("aten.relu.default", device=DEVICE, seed=5), KERNELS / "relu_triton.py")
    cold = evaluate_kernel(EvaluationRequest.of("aten.relu.default", device=DEVICE, seed=5, warm=False), KERNELS / "relu_triton.py")
    assert warm.verdict == cold.verdict == "pass"
    assert warm.summary == cold.summary
    assert warm.environment.containment.audit_hook and cold.environment.containment.audit_hook
    assert warm.environment.containment.capabilities_dropped and cold.environment.containment.capabilities_dropped


@pytest.mark.parametrize("namespaces", [True, False], ids=["file_view", "audit_hook"])
def test_the_candidate_holds_no_capability(tmp_path, namespaces):
    """Root on a GPU machine, or the owner of a user namespace, keeps no capability once the
    candidate runs: it can mount nothing, leave its root or make device nodes, even natively."""
    probe = tmp_path / "capabilities.py"
    probe.write_text("def kernel(self):\n"
                     "    status = open('/proc/self/status').read().splitlines()\n"
                     "    raise RuntimeError('; '.join(l for l in status if l.startswith(('Cap', 'NoNewPrivs'))))\n")
    verdict = evaluate_kernel(EvaluationRequest.of("aten.relu.default", device=DEVICE, seed=1, static_check=False, namespaces=namespaces), probe)
    said = messages(verdict)
    assert verdict.error_kind is None and "RuntimeError" in said, said
    for field in ("CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert f"{field}:\t0000000000000000" in said, said
    assert "NoNewPrivs:\t1" in said


def test_captured_output_keeps_head_and_tail_and_says_what_was_cut():
    read, write = os.pipe()
    capture = BoundedCapture(read, limit=1 << 20, keep=100)
    capture.start()
    os.write(write, b"A" * 100 + b"B" * 10_000 + b"C" * 100)
    os.close(write)
    capture.join()
    text = capture.text(200)
    assert capture.total == 10_200
    assert text.startswith("A" * 100) and text.endswith("C" * 100) and "[... 10000 bytes left out ...]" in text


def test_the_audit_hook_alone_lets_a_legitimate_kernel_import_what_it_needs():
    """As on an OS that gives no mount namespace: lazy imports of the standard library, numpy
    and Triton's helpers still work (the hook's allow list is the view's)."""
    verdict = evaluate_kernel(EvaluationRequest.of("aten.exp.default", device=DEVICE, seed=3, namespaces=False), KERNELS / "exp_imports_helpers.py")
    assert verdict.passed, verdict.message
    assert verdict.environment.containment.files == "audit_hook"


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # killed, not yet reaped
    except FileNotFoundError:
        return True


def test_an_interrupted_evaluation_leaves_no_child_running(monkeypatch):
    """Ctrl-C while a child runs (here: raised from the watch loop once the kernel, which never
    returns, has started): the child's whole group is killed before the interrupt goes on. The
    child leads its own session, so the terminal's SIGINT never reaches it."""
    import signal
    import time
    import bbagent.harness.sandbox.parent.run as ev
    from bbagent.harness.events import CandidateStart
    pids = []
    real_usage, real_running = ev.SessionMemory.usage, ev.running_test
    monkeypatch.setattr(ev.SessionMemory, "usage", lambda self, pid, limit: pids.append(pid) or real_usage(self, pid, limit))

    def running_then_interrupt(events):
        if any(isinstance(e, CandidateStart) for e in events):
            raise KeyboardInterrupt
        return real_running(events)
    monkeypatch.setattr(ev, "running_test", running_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        evaluate_kernel(EvaluationRequest.of("aten.relu.default", device="cpu", warm=False, timeout_s=120), FAULTS / "loop_forever.py")
    try:
        deadline = time.monotonic() + 5
        while not _gone(pids[0]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(pids[0])
    finally:
        try:
            os.killpg(pids[0], signal.SIGKILL)
        except OSError:
            pass


def _kernel_with_helper(where):
    """A correct relu importing its block size from a helper package installed in ``where``."""
    (where / "relu_helpers").mkdir(parents=True)
    (where / "relu_helpers" / "__init__.py").write_text("BLOCK = 1024\n")
    source = (KERNELS / "relu_triton.py").read_text().replace(
        "import triton.language as tl\n", "import triton.language as tl\nfrom relu_helpers import BLOCK\n")
    source = source.replace("cdiv(n, 1024)", "cdiv(n, BLOCK)").replace("BLOCK=1024)", "BLOCK=BLOCK)")
    kernel = where.parent / f"{where.name}_kernel.py"
    kernel.write_text(source)
    return kernel


def _eval_with_pythonpath(kernel, path) -> tuple[int, str]:
    import subprocess
    import sys
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "bbagent", "eval", "--op", "aten.relu.default", "--kernel", str(kernel),
                           "--device", "cpu"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    return done.returncode, " ".join(done.stdout.split())


def test_a_helper_package_on_pythonpath_is_shown_and_one_beside_secrets_is_named(tmp_path):
    """Issue 32: a kernel engineer's own library on PYTHONPATH (or a --target install) is importable
    in the sandbox; one whose directory holds secrets stays hidden, and the message says where it is."""
    shown = tmp_path / "libs"
    code, out = _eval_with_pythonpath(_kernel_with_helper(shown), shown)
    assert code == 0 and "PASS" in out, out
    secret = tmp_path / "secret_libs"
    kernel = _kernel_with_helper(secret)
    (secret / ".env").write_text("OPENAI_API_KEY=sk-not-for-kernels\n")
    code, out = _eval_with_pythonpath(kernel, secret)
    assert code == 1 and "No module named 'relu_helpers'" in out, out
    assert f"'relu_helpers' exists at {secret / 'relu_helpers' / '__init__.py'}, outside what the sandbox shows" in out


def test_a_fork_server_started_early_serves_the_first_evaluation_and_exits_at_once(monkeypatch):
    """``start_early`` spawns the server without waiting (its start-up overlaps the caller's
    checks); the first evaluation waits for it and uses it; closing it is quick whether it is still
    importing (killed) or serving (it leaves without the interpreter's slow shutdown)."""
    import time
    from bbagent.harness.evaluate import EvaluationRequest, evaluate_kernel
    from bbagent.harness.sandbox.parent.environment import base_env, start_early
    from bbagent.harness.sandbox.parent.pool import WarmPool, pool_for
    monkeypatch.setenv("BBAGENT_TEST_POOL", "early")  # a pool of this test's own (the env is its key)
    monkeypatch.setattr("bbagent.harness.sandbox.parent.environment.ENV_ALLOWLIST",
                        ("PATH", "TMPDIR", "TRITON_CACHE_DIR", "BBAGENT_TEST_POOL"))
    pool = pool_for("cpu", base_env("cpu"))
    assert pool.server is None
    start_early("cpu")
    server = pool.server
    assert server is not None and not pool.ready  # spawned, not waited for
    verdict = evaluate_kernel(EvaluationRequest.of("aten.relu.default", device="cpu"), KERNELS / "relu_triton.py")
    assert verdict.passed and pool.server is server and pool.ready  # the early server ran it
    started = time.monotonic()
    pool.close()
    assert server.returncode == 0 and time.monotonic() - started < 0.5
    still_importing = WarmPool("cpu", base_env("cpu"))
    still_importing.start_in_background()
    started = time.monotonic()
    still_importing.close()
    assert still_importing.server is None and time.monotonic() - started < 2.0


def test_a_pool_closed_while_an_evaluation_waits_for_it_says_so_and_starts_nothing_cold():
    """Issue 75, 5: Ctrl-C (or the exit handler) closes the fork server while a worker thread waits
    for it to start; the wait read the server after close() had taken it away ("'NoneType' object has
    no attribute 'stdout'", recorded as the operator's internal failure). Now the waiting launch
    raises PoolClosed, which is no PoolError: no cold child is started in its place."""
    import threading
    import time
    from bbagent.harness.sandbox.parent.environment import base_env
    from bbagent.harness.sandbox.parent.pool import PoolClosed, PoolError, WarmPool
    pool = WarmPool("cpu", base_env("cpu"))
    pool.start_in_background()
    raised = []

    def wait_for_it():
        try:
            pool.launch(None, {}, [])
        except BaseException as exc:  # noqa: BLE001 - what the waiting thread met is the finding
            raised.append(exc)
    waiting = threading.Thread(target=wait_for_it)
    waiting.start()
    time.sleep(0.3)  # in its wait: the server is still importing torch
    assert not pool.ready
    pool.close()
    waiting.join(timeout=30)
    assert len(raised) == 1 and isinstance(raised[0], PoolClosed), raised
    assert not isinstance(raised[0], PoolError) and not pool.broken


def test_the_likely_device_needs_no_torch_import(monkeypatch):
    from bbagent.harness.sandbox.parent import environment
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.delitem(__import__("sys").modules, "torch")  # as before the caller imports it
    assert environment.likely_device() == "cpu"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setattr(environment, "NVIDIA_GPUS", Path("/nonexistent/nvidia/gpus"))
    assert environment.likely_device() == "cpu"


def test_the_audit_hook_resolves_paths_outside_the_tool_directory_on_disk(tmp_path):
    """Inside Triton's cache (a tool directory) the spelling is taken as the real path; a spelling
    that leaves it, or any path elsewhere, is resolved through its links."""
    from bbagent.harness.sandbox.child.containment import AuditGuard
    work, tool, elsewhere = tmp_path / "work", tmp_path / "tool", tmp_path / "elsewhere"
    for d in (work, tool, elsewhere):
        d.mkdir()
    (work / "link").symlink_to(elsewhere)
    guard = AuditGuard(str(work), [str(tool)], str(work / "candidate.py"), report=lambda kind, message: None)
    assert guard._real_path(f"{tool}/abc/kernel.json") == f"{tool}/abc/kernel.json"
    assert guard._real_path(f"{tool}/abc/../../elsewhere/x") == str(elsewhere / "x")
    assert guard._real_path(f"{work}/link/x") == str(elsewhere / "x")
    assert guard._judge_write(f"{tool}/../elsewhere/x", "w") is not None  # outside every writable root
    assert guard._judge_write(f"{work}/link/x", "w") is not None  # out of the working directory by a link
    assert guard._judge_write(f"{work}/x", "w") is None


def test_an_audit_hook_is_tampering_when_the_candidate_adds_it_not_when_a_library_adds_its_own(tmp_path):
    """filelock adds an audit hook of its own on Python 3.12, when torch's inductor or Helion
    imports it under the candidate's ``import``: that is the library's, not tampering (a right
    Helion kernel was rejected for it on the GPU machine); the candidate's own call still is."""
    from bbagent.harness.sandbox.child.containment import AuditGuard
    guard = AuditGuard(str(tmp_path), [], str(tmp_path / "candidate.py"), report=lambda kind, message: None)

    def judged_from(filename: str):  # judge the event as if the code of ``filename`` raised it
        scope = {"guard": guard}
        exec(compile("found = guard.judge('sys.addaudithook', ())", filename, "exec"), scope)
        return scope["found"]
    library = str(tmp_path / "site-packages" / "filelock" / "_core" / "_fork.py")
    assert judged_from(library) is None
    assert judged_from(str(tmp_path / "candidate.py"))[0] == "tampering"


def test_cached_memory_goes_back_only_when_the_device_runs_short(monkeypatch):
    """After a large test the child returns its allocator's cache only above a sixteenth of the
    device and while under a quarter of the device is free (emptying costs 140 ms a time on mm)."""
    from types import SimpleNamespace
    from bbagent.harness.sandbox.child import device_memory
    from bbagent.harness.sandbox.child.device_memory import give_back_cached_memory
    gib = 1 << 30

    def device(reserved: int, free: int) -> tuple[SimpleNamespace, list]:
        emptied = []
        cuda = SimpleNamespace(memory_reserved=lambda: reserved, mem_get_info=lambda: (free, 128 * gib),
                               current_device=lambda: 0, empty_cache=lambda: emptied.append(True),
                               get_device_properties=lambda index: SimpleNamespace(total_memory=128 * gib))
        return SimpleNamespace(cuda=cuda), emptied
    for reserved, free, returned in [(4 * gib, 10 * gib, False),   # under a sixteenth: kept
                                     (40 * gib, 80 * gib, False),  # the device has room: kept
                                     (40 * gib, 20 * gib, True)]:  # the device runs short: given back
        torch_like, emptied = device(reserved, free)
        monkeypatch.setattr(device_memory, "_free_checked_at", [float("-inf")])
        give_back_cached_memory(torch_like)
        assert bool(emptied) is returned, (reserved, free)
    give_back_cached_memory(torch_like)  # at once again: the device is not asked twice in half a second
    assert emptied == [True]


def test_a_pool_closed_again_while_it_closes_ends_without_an_error():
    """Issue 64, 4: Ctrl-C on a batch; the pool's exit handler closed the fork server while another
    close waited for it, and the first then failed with 'NoneType' object has no attribute 'stdout'."""
    from bbagent.harness.sandbox.parent.pool import WarmPool

    class Server:
        pid, closed = -1, []
        stdout = type("Stream", (), {"close": lambda self: Server.closed.append("stdout")})()

        def wait(self, timeout=None):
            pool.close()  # the second close, from the exit handler, while this one waits

        def poll(self):
            return None
    pool = WarmPool("cpu", {})
    read_end, pool.lifeline = os.pipe()
    pool.server, pool.ready = Server(), True
    pool.close()
    os.close(read_end)
    assert pool.server is None and Server.closed == ["stdout"]
