"""`bbagent batch --executor ray` on a real two-node Ray cluster on this machine (127.0.0.1), its
GPUs declared as the custom resource ``bbagent_gpu`` (no GPU here: evaluations run under the Triton
interpreter). Each node is its own process group, so the second can be killed alone, mid-batch."""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from bbagent.agent.batch.ledger import Ledger
from conftest import PYTHONPATH, ROOT, dies_with_parent

pytest.importorskip("ray", reason="Ray is an optional extra: pip install -e '.[dev]' (or '.[ray]') installs it")
pytestmark = pytest.mark.slow

KERNELS = {"aten.relu.default": "relu_triton.py", "aten.exp.default": "exp_imports_helpers.py",
           "aten.add.Tensor": "add_broadcast.py", "aten.index_select.default": "index_select.py"}
RESOURCE = "bbagent_gpu"
RAY = str(Path(sys.executable).parent / "ray")


def _answer(op: str) -> str:
    return f"Here it is.\n\n```python\n{(ROOT / 'tests' / 'kernels' / KERNELS[op]).read_text()}```\n"


def _free_port() -> int:
    """A port free now and below the ephemeral range (32768 and up on Linux), from which the OS hands
    out ports to bind(0) calls: another xdist worker's fake server cannot be given it between this
    check and Ray binding it."""
    for port in random.sample(range(20000, 32000), 200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-32000")


class Node:
    """``ray start --block`` in a process group of its own: stopping it kills that node alone."""

    def __init__(self, arguments: list[str], log: Path, extra_env: dict | None = None):
        env = {k: v for k, v in os.environ.items() if "KEY" not in k and not k.startswith("RAY_")}
        # Ray >= 2.5x turns on token authentication when ~/.ray/auth_token exists (any earlier local
        # ray.init() writes one): this test cluster is explicitly without, whatever the home holds.
        env.update(RAY_AUTH_MODE="disabled", RAY_health_check_period_ms="500", RAY_health_check_failure_threshold="4",
                   RAY_health_check_initial_delay_ms="0", PYTHONPATH=PYTHONPATH)
        env.update(extra_env or {})
        self.log = log.open("w")
        self.process = subprocess.Popen([RAY, "start", "--block", "--disable-usage-stats",
                                         "--num-gpus=0", f"--resources={json.dumps({RESOURCE: 1})}",
                                         "--object-store-memory=80000000", *arguments],
                                        stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                        preexec_fn=lambda: dies_with_parent(signal.SIGTERM))  # --block stops the node

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)


def _wait_for_nodes(address: str, count: int, log: Path) -> None:
    probe = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
             "print(sum(1 for n in ray.nodes() if n['Alive']))")
    deadline = time.time() + 120
    while time.time() < deadline:
        done = subprocess.run([sys.executable, "-c", probe, address], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip() == str(count):
            return
        time.sleep(1)
    pytest.fail(f"the Ray cluster did not reach {count} nodes in 120 s; its log:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head and a second node, each with one bbagent_gpu; yields (address, second node)."""
    logs = tmp_path_factory.mktemp("ray-logs")
    temp = tempfile.mkdtemp(prefix="bbray-")  # short: Ray's socket paths must fit 107 bytes
    port = _free_port()
    address = f"127.0.0.1:{port}"
    head = Node(["--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=2",
                 "--include-dashboard=false", f"--temp-dir={temp}"], logs / "head.log")
    second = None
    try:
        _wait_for_nodes(address, 1, logs / "head.log")
        second = Node([f"--address={address}", "--node-ip-address=127.0.0.1", "--num-cpus=1"], logs / "second.log")
        _wait_for_nodes(address, 2, logs / "second.log")
        yield address, second
    finally:
        for node in (second, head):
            if node is not None:
                node.kill()
        shutil.rmtree(temp, ignore_errors=True)


def _ledger(result) -> dict:
    keep = ("state", "attempts", "infra_retries", "rounds", "error_class", "gpu", "error")
    return {r["op"]: {k: r[k] for k in keep} for r in Ledger(result.path / "ledger.sqlite").rows()}


def _kernels(root: Path) -> dict:
    return {p.parent.name: p.read_text() for p in (root / "generated_kernels").glob("*/kernel.py")}


def test_a_ray_batch_gives_the_ledger_of_a_local_one_and_no_node_sees_a_key(cluster, tmp_path, monkeypatch, no_keys):
    from bbagent import batch
    from fake_llm import FakeLLMServer
    address, _ = cluster
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-driver-only")
    ops = ["aten.relu.default", "aten.exp.default"]
    results = {}
    with FakeLLMServer().answer_by_op({op: _answer(op) for op in ops}) as server:
        for executor in ("local", "ray"):
            results[executor] = batch(ops, root=tmp_path / executor, jobs=2, provider="openai", model="gpt-test",
                                      base_url=server.url + "/v1", rounds=1, device="cpu", timeout_s=300,
                                      executor=executor, **({"ray_address": address, "ray_resource": RESOURCE}
                                                            if executor == "ray" else {}))
    assert _ledger(results["ray"]) == _ledger(results["local"])
    assert all(row["state"] == "accepted" and row["gpu"] == "cpu" for row in _ledger(results["ray"]).values())
    assert _kernels(tmp_path / "ray") == _kernels(tmp_path / "local") and len(_kernels(tmp_path / "ray")) == 2
    summary = json.loads((results["ray"].path / "summary.json").read_text())
    slots = summary["session"]["slots"]
    assert len(slots) == 2 and sum(s["evaluations"] for s in slots) == 2 and not any(s["retired"] for s in slots)
    for verdict_file in (tmp_path / "ray" / "runs").glob("*/round-*/verdict.json"):
        verdict = json.loads(verdict_file.read_text())
        assert verdict["verdict"] == "pass" and Path(verdict["kernel"]["path"]).is_relative_to(tmp_path / "ray")

    import ray  # the supervisors' own view: no secret-named variable reached their processes
    from bbagent.agent.batch.ray_executor import RayExecutor
    executor = RayExecutor("cpu", address=address, resource=RESOURCE)
    try:
        seen = [slot.info for slot in executor.slots]
        assert len(seen) == 2 and len({info["pid"] for info in seen}) == 2
        assert all(info["secret_env_names"] == [] for info in seen), seen
    finally:
        executor.close()
        ray.shutdown()


def test_killing_a_node_mid_batch_loses_nothing_and_the_head_finishes(cluster, tmp_path, monkeypatch, no_keys):
    from bbagent import batch
    from fake_llm import FakeLLMServer
    address, second = cluster
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    ops = list(KERNELS)
    evaluating = threading.Event()

    def hear(event, data):
        if event == "run_evaluating":
            evaluating.set()

    def kill_when_both_evaluate():
        evaluating.wait(timeout=300)
        time.sleep(3)  # both slots busy: each of the first two candidates takes longer than this
        second.kill()
    killer = threading.Thread(target=kill_when_both_evaluate, daemon=True)
    killer.start()
    with FakeLLMServer().answer_by_op({op: _answer(op) for op in ops}) as server:
        result = batch(ops, root=tmp_path, jobs=4, provider="openai", model="gpt-test", base_url=server.url + "/v1",
                       rounds=1, device="cpu", timeout_s=300, executor="ray", ray_address=address,
                       ray_resource=RESOURCE, report=hear)
    killer.join(timeout=60)
    import ray  # the batch left the cluster it joined: a driver left connected dies with the cluster
    assert not ray.is_initialized()
    assert second.process.poll() is not None, "the second node was never killed"
    rows = _ledger(result)
    assert all(r["state"] == "accepted" and r["attempts"] == 1 and r["infra_retries"] == 0 and r["rounds"] == 1
               for r in rows.values()), json.dumps(rows, indent=1)
    assert set(_kernels(tmp_path)) == set(ops)
    for op in ops:  # each operator ran once: one run, one round, one Verdict
        assert len(list((tmp_path / "runs").glob(f"*-{op}-*/round-1/verdict.json"))) == 1, op
    slots = json.loads((result.path / "summary.json").read_text())["session"]["slots"]
    lost = [s for s in slots if s["retired"]]
    assert len(lost) == 1 and lost[0]["retired"].startswith("node lost while evaluating") and lost[0]["lost"] == 1, slots
    kept = [s for s in slots if not s["retired"]]
    assert len(kept) == 1 and kept[0]["evaluations"] >= 3, slots
    assert "node lost while evaluating" in (result.path / "summary.md").read_text()


def test_a_cluster_with_token_authentication_gets_a_message_naming_the_fix(tmp_path):
    """Ray >= 2.5x clusters use token authentication by default; a driver joining by address sends
    the token only when told to. Without it: exit 2 and the fix named, and none of Ray's retry noise;
    with it: joined (the next complaint is the cluster's missing GPUs)."""
    token = os.urandom(16).hex()
    temp = tempfile.mkdtemp(prefix="bbray-")
    port = _free_port()
    head = Node(["--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=1",
                 "--include-dashboard=false", f"--temp-dir={temp}"], tmp_path / "head.log",
                extra_env={"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token})
    try:
        deadline = time.time() + 120
        while time.time() < deadline and "Ray runtime started" not in (tmp_path / "head.log").read_text():
            time.sleep(0.5)
        command = [str(Path(sys.executable).parent / "bbagent"), "batch", "--ops", "aten.relu.default",
                   "--provider", "replay", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}",
                   "--root", str(tmp_path / "root")]
        plain = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        refused = subprocess.run(command, capture_output=True, text=True, timeout=300, env=plain)
        assert refused.returncode == 2, refused.stderr
        assert "RAY_AUTH_MODE=token" in refused.stderr and "RAY_AUTH_TOKEN" in refused.stderr
        assert "Traceback" not in refused.stderr and "gcs_client" not in refused.stderr, refused.stderr
        joined = subprocess.run(command, capture_output=True, text=True, timeout=300,
                                env={**plain, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token})
        assert joined.returncode == 2 and "has no node with the resource 'GPU' free" in joined.stderr, joined.stderr
    finally:
        head.kill()
        shutil.rmtree(temp, ignore_errors=True)
